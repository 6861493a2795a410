"""Column generation end to end: the phases in order, on one explicit state."""

from __future__ import annotations

import pickle
import time

import numpy as np

from carbonsched.plan.colgen.bounds import split_bounds
from carbonsched.plan.colgen.budget import short_path_s, tail_s
from carbonsched.plan.colgen.classes import count_options, plan_options
from carbonsched.plan.colgen.incumbents import (
    best_not_repacked,
    early_moves,
    final_moves,
    incumbents,
    marked_draws,
    repack,
    repack_more,
)
from carbonsched.plan.colgen.master import (
    build_master,
    final_crossover,
    master_rounds,
    refine_bound,
    warm_up,
)
from carbonsched.plan.colgen.options import ColgenOptions
from carbonsched.plan.colgen.passes import run_passes
from carbonsched.plan.colgen.pieces import finish_pieces, piece_reserve_s
from carbonsched.plan.colgen.pricing import price, stack_options
from carbonsched.plan.colgen.repair_mip import repair_incumbent
from carbonsched.plan.colgen.state import ColgenState
from carbonsched.plan.colgen.status import add_note, plan_status
from carbonsched.plan.colgen.warm import PreviousRun, carried_columns, record
from carbonsched.plan.gap import relative_gap, within_gap
from carbonsched.plan.result import PlanResult, SolverRecord, join_clauses
from carbonsched.plan.sets import PlanSets


def solve_colgen(sets: PlanSets, time_limit_s: float, mip_gap: float, threads: int,
                 rec: SolverRecord, started: float, progress=None,
                 cg_share: float | None = None,
                 options: ColgenOptions | None = None,
                 previous: PreviousRun | None = None) -> PlanResult:
    """Column generation to the exact LP bound, then a repair MIP (package docstring).

    Phases, each on the shared :class:`~carbonsched.plan.colgen.state.ColgenState`: warm-up
    (classes, greedy plan, Lagrangian warm-up, or on a short budget the smoothed dual),
    master rounds, refinement of the bound, the final crossover, incumbent selection
    (priced greedy plans and LP roundings), the one-slot repack and early moves, the passes
    (site, GPU type), the split bounds, the repair MIP and the finish (final moves, status,
    note).

    Monotone in the limit: at any size, a limit at or above the short path's
    (:func:`~carbonsched.plan.colgen.budget.short_path_s`) runs the short path first in
    :attr:`ColgenOptions.short_first_share` of it and keeps its plan and bound; the master-LP
    path then runs in the rest from the short path's warm-up, multipliers and plan, and the
    better plan with the larger bound is returned (the note says which path's plan it is).
    A short path whose plan is proven optimal (gap 0) is returned without the second.
    Measured on 10k × 16 × 48 at load 0.3, seed 1: the short path alone 0.26 % in 17.5 s at
    a 20 s limit, the master-LP path alone 2.64 % at the default 60 s; both paths in turn at
    60 s, the short one in half of it: 0.18 % (seed 1) and 0.14 % (seed 2) on a shared
    machine where main gave 0.47 % and 0.09 % (docs/benchmarks/planner-log.md#planner-3-16).
    On the rolling warm-start instances (1,853-1,890 jobs × 8 sites × 72 slots, seeds 0-4,
    cold and warm): the master-LP path alone at 15 s returned plans above the short path's
    alone at 7.5 s in 9 of 10 solves, by up to 1.15 %; staged, no 15 s or 30 s plan is more
    than 0.02 % above the 7.5 s one (BENCHMARKS.md section 16).

    Parameters
    ----------
    sets
        Compiled sets.
    time_limit_s
        Budget of the whole solve, counted from ``started``. [s]
    mip_gap
        Relative gap at which the repair MIP may stop. [-]
    threads
        HiGHS threads.
    rec
        Solver record to fill (``bound``, ``mip_gap``, seconds, status, note).
    started
        ``time.perf_counter()`` at the start of the solve.
    progress
        Optional callback for one-line progress messages.
    cg_share
        Share of the budget column generation may use before the repair starts; default
        :attr:`ColgenOptions.cg_share`. [-]
    options
        The tunables; default :class:`ColgenOptions` () (the environment is not read here:
        :meth:`ColgenOptions.from_env` is the caller's).
    previous
        The previous rolling run (issue 36 item 2;
        :class:`~carbonsched.plan.colgen.warm.PreviousRun`), or None: its plan's positions
        (shifted onto this run's slots), completed by priced greedy on this solve's prices,
        are a candidate like the others, so the repack, passes and repair start from it when
        it is the best; its multipliers and column pool
        (:class:`~carbonsched.plan.colgen.warm.CarriedDuals`, from its result's ``carry``),
        shifted onto this run's slots, start the warm-up (fewer rounds,
        :attr:`ColgenOptions.warmup_carried_rounds`) when their Lagrangian is above the cold
        start's, and the columns join the master's seeds
        (:func:`~carbonsched.plan.colgen.master.carry_in`). ``rec.warm_start`` gets
        ``multipliers: warm: ...`` or ``multipliers: cold: <why>``.

    Returns
    -------
    PlanResult
        Its ``carry`` holds this solve's best multipliers, its last master's support and the
        plan's options for the next rolling run. ``optimal`` when the gap to the best proven
        bound (the Lagrangian's or LP's, the GPU-type split's, or the dual bound of a repair MIP
        over the whole model: each valid whether or not the LP converged or the repair finished)
        is within ``mip_gap`` (:func:`~carbonsched.plan.colgen.status.plan_status`);
        ``feasible`` otherwise; ``heuristic`` (greedy plan) if the repair found nothing. With
        preemptible jobs the paths above run in the limit less
        :func:`~carbonsched.plan.colgen.pieces.piece_reserve_s`, and the piece phase
        (:func:`~carbonsched.plan.colgen.pieces.finish_pieces`) then prices piece patterns, may
        replace the plan by a piece repair MIP's and reports the Lagrangian bound over piece
        plans instead of the one-piece bounds (valid over every plan with pieces;
        :mod:`~carbonsched.plan.colgen.pieces`); ``optimal`` then means the gap to it is within
        ``mip_gap``.

    Notes
    -----
    Any slot grid the sets support (60, 30 or 15 minutes): prices are per kW through a slot
    and inference holds in every slot of its hour (:mod:`carbonsched.plan.colgen.grid`), as
    in the direct MILP.
    """
    opt = ColgenOptions() if options is None else options
    previous = PreviousRun() if previous is None else previous
    if rec.name != "highs":
        add_note(rec, "column generation always uses HiGHS (highspy); CBC has no in-process "
                 "LP interface")
        rec.name = "highs"
    share = opt.cg_share if cg_share is None else cg_share
    # preemptible jobs: time kept for the piece phase (bound over piece plans, repair MIP)
    full_limit_s = time_limit_s
    time_limit_s -= piece_reserve_s(sets, time_limit_s)
    short_s = short_path_s(sets, opt)
    states: list[ColgenState] = []
    if opt.short_first_share <= 0 or time_limit_s < short_s:
        # one path: the short one below its budget, the master-LP one with staging off
        st = ColgenState(sets=sets, time_limit_s=time_limit_s, mip_gap=mip_gap,
                         threads=threads, rec=rec, started=started, opt=opt, cg_share=share,
                         progress=progress, **previous.state_fields())
        states.append(st)
        res = _run_path(st)
    else:
        first_s = min(opt.short_first_share * time_limit_s, short_s)
        res = _short_then_long(sets, time_limit_s, first_s, mip_gap, threads, rec, started,
                               progress, share, opt, previous, states)
    if full_limit_s > time_limit_s:
        res = finish_pieces(states, res, full_limit_s)
    return res


def _run_path(st: ColgenState) -> PlanResult:
    """One path end to end on ``st``: the short one when ``st.short`` comes out true."""
    opt = st.opt
    if not st.resumed:
        warm_up(st)
    build_master(st)
    master_rounds(st)
    refine_bound(st)
    final_crossover(st)
    incumbents(st)
    if st.prior is not None:   # the short path's plan: the passes and repair start from it
        st.cands.append((f"{SHORT_PATH}: {st.prior[0]}", st.prior[1]))
        if st.prior_more:
            st.cands.extend((f"{SHORT_PATH}: {n}", p) for n, p in st.prior_more)
        elif st.prior_unrepacked is not None:
            st.cands.append((f"{SHORT_PATH}: {st.prior_unrepacked[0]}", st.prior_unrepacked[1]))
    elif st.warm_start is not None and len(st.warm_start):
        warm_candidate(st)
    repack(st)
    repack_more(st)
    marked_draws(st)
    if st.force_short and not opt.short_first_passes:
        return finish(st)   # a staged solve's short path: the master-LP path follows
    early_moves(st)
    run_passes(st)
    split_bounds(st)
    st.say(f"LP {'converged' if st.converged else 'stopped'} after {st.it} rounds "
           f"({time.perf_counter() - st.ts:.1f} s): {int(st.residual.sum())} jobs of "
           f"{int((st.residual > 0).sum())} classes left by the LP's integral part")
    if opt.dump_state:   # debugging aid: the state before the repair
        _dump_state(st, opt.dump_state)
    # incumbent 4: repair MIP over the residual classes and the fixed classes that share a
    # binding cell with them, started from the best plan so far
    repair_incumbent(st)
    final_moves(st)
    return finish(st)


WARM_START = "warm start"
"""Prefix of the candidate that is the warm start's plan (completed by priced greedy)."""


def warm_candidate(st: ColgenState) -> None:
    """The warm start's placements where they still fit, completed by priced greedy.

    Appended to ``st.cands`` as ``warm start: <label>``; the incumbent phases that follow
    (repack, moves, passes, repair) start from it when it is the best candidate. It runs
    whatever the path's time left, unlike the other priced greedy candidates
    (:func:`~carbonsched.plan.colgen.incumbents.room`): a staged solve's short path has a
    budget of milliseconds on a small instance while the solve has its whole limit, and the
    master-LP path takes the short path's plan instead of the warm start, so a time check here
    dropped the warm start from the solve (``tests/plan/test_warm_start.py``). It costs one
    priced greedy plan, which :meth:`ColgenState.plain_reserve_s` is sized to hold.
    """
    from carbonsched.plan.baselines import priced_greedy

    warm = st.warm_start
    placed = np.zeros(len(st.sets.job_gpus), dtype=bool)
    placed[warm[:, 0]] = True
    plan = priced_greedy(st.sets, st.rank_kw, st.lam_c, order=st.lff[~placed[st.lff]],
                         prefilled=warm)
    st.cands.append((f"{WARM_START}: {st.warm_label or 'a previous plan'} + priced greedy",
                     plan))


SUPPORT_TOL = 1e-9
"""LP value above which a master column is in the support carried to the next rolling run:
only those (about one per class) are carried, since a master seeded with a whole pool
(19,140 columns of 22,505 on 2,000 jobs x 8 sites x 72 h) did not solve in 11.8 s where
the cold one's 13,556 solved in 8.4 s (BENCHMARKS.md section 16). [jobs]"""

SHORT_PATH = "short path"
"""Prefix of the candidate that is the short path's plan in a staged solve's note."""


def _short_then_long(sets: PlanSets, time_limit_s: float, first_s: float, mip_gap: float,
                     threads: int, rec: SolverRecord, started: float, progress,
                     cg_share: float, opt: ColgenOptions, previous: PreviousRun,
                     states: list[ColgenState]) -> PlanResult:
    """The short path in ``first_s``, then the master-LP path in the rest, best of both.

    The short path's plan is a candidate of the second path (its passes and repair start
    from it when it is the best) and its bound a floor of the second path's, so the
    result is never worse in objective or bound than the short path's
    (:attr:`ColgenOptions.short_first_share`). The second path reuses the short path's
    classes, layout, greedy plan and multipliers instead of a new warm-up, and its first
    master starts from the columns :func:`resume_seeds` picks. When the short path's plan is
    proven optimal (a gap of 0 to its bound) it is returned with a note saying so. When at
    most twice the second path's fixed tail (:func:`~carbonsched.plan.colgen.budget.tail_s`,
    what always follows a master) is left, the short path's plan is returned with a note
    saying so. The short path's best plan other than its own that its repack neither started
    from nor produced is a candidate of the second path too, whose one-slot repack starts
    from the best plan not repacked yet (:func:`~carbonsched.plan.colgen.incumbents.repack`),
    not from one the short path's repack started from or produced; with
    :attr:`ColgenOptions.repack_more` above 0 every other plan of the short path is a
    candidate of the second path, whose repacks then start from several of them
    (:func:`~carbonsched.plan.colgen.incumbents.repack_more`).

    Parameters
    ----------
    sets, time_limit_s, mip_gap, threads, rec, started, progress, cg_share, opt
        As :func:`solve_colgen`'s (``cg_share`` resolved, ``opt`` not None). [s where a time]
    previous
        As :func:`solve_colgen`'s: its plan is a candidate of the short path (and so of the
        second) and the short path's warm-up starts from its multipliers (the second path
        resumes from the short path's).
    first_s
        The short path's budget, counted from ``started``. [s]
    states
        Each path's state is appended to it (the piece phase reads their multipliers).

    Returns
    -------
    PlanResult
        The better of both paths' plans, its record holding the larger bound.
    """
    st1 = ColgenState(sets=sets, time_limit_s=first_s, mip_gap=mip_gap, threads=threads,
                      rec=rec, started=started, opt=opt, cg_share=cg_share, progress=progress,
                      force_short=True, **previous.state_fields())
    states.append(st1)
    first = _run_path(st1)
    name1, _ = st1.best()
    obj1, bound1 = first.totals["objective"], rec.bound
    t1 = time.perf_counter() - started
    head = (f"the short path (smoothed dual, no master LP) ran first in {t1:.1f} s of the "
            f"{time_limit_s:g} s limit: plan {obj1:.3f} kg from {name1}, bound "
            + ("none" if bound1 is None else f"{bound1:.3f} kg"))
    left = time_limit_s - t1
    if within_gap(rec.mip_gap, 0.0):
        add_note(rec, head + "; proven optimal: the master-LP path is not started")
        rec.seconds = time.perf_counter() - started
        return first
    if left <= 2 * tail_s(sets, opt.tail_s_per_job):
        add_note(rec, head + f"; {max(left, 0.0):.1f} s left, too little for the master-LP "
                 "path: the short path's plan is returned")
        rec.seconds = time.perf_counter() - started
        return first
    if progress:
        progress(head)
    seeds = resume_seeds(st1, first)
    n_seeds = len(np.unique(np.concatenate(seeds), axis=0))
    add_note(rec, head + f"; then the master-LP path in the {left:.1f} s left, from the "
             f"short path's warm-up, multipliers and plan, its first master over {n_seeds} "
             "columns (the plan's, the smoothed dual's, the best-priced ones"
             + (" and the previous run's)" if st1.carried is not None else ")"))
    st2 = ColgenState(sets=sets, time_limit_s=time_limit_s, mip_gap=mip_gap, threads=threads,
                      rec=rec, started=started, opt=opt, cg_share=cg_share, progress=progress)
    for f in ("cls", "lay", "greedy", "lb", "warm_duals", "best_lam", "priced_by",
              "carried_how"):
        setattr(st2, f, getattr(st1, f))
    st2.seeds = seeds
    st2.tb = time.perf_counter()
    st2.short = False
    st2.resumed = True
    st2.prior_build_s = rec.build_seconds
    st2.prior = (name1, first)
    # the repack starts from the best plan not repacked yet: the short path's next best
    st2.repacked = set(st1.repacked)
    if opt.repack_more > 0:
        # every other plan of the short path: the repacks start from the best not repacked
        st2.prior_more = [(n, p) for n, p in st1.cands
                          if p is not first and p is not st1.greedy]
    else:
        st2.prior_unrepacked = best_not_repacked(st1.cands, st1.repacked, also=(first,))
    st2.prior_bound = -np.inf if bound1 is None else bound1
    states.append(st2)
    return _run_path(st2)


def resume_seeds(st1: ColgenState, first: PlanResult) -> list[np.ndarray]:
    """The columns the master-LP path's first master starts from, after the short path.

    The short path's plan, the options its smoothed dual chose
    (:attr:`ColgenState.short_pool`), the :attr:`ColgenOptions.warmup_top_k` best-priced
    options of each class at its best multipliers and, in a rolling run, the previous run's
    columns — not the Polyak warm-up's visited options, which are most of ``st1.seeds`` and
    priced at multipliers the smoothed dual has left behind. Measured on 10k × 16 × 72 h at
    load 0.8, seed 1 (idle machine, 60 s): the master over all 105,120 seeded columns had not
    finished in 23 s (its stopped duals bounded −17,680 kg; gap 32.4 %); over the 44,172
    columns here it solved in 10.8 s, converged in two rounds (bound 7,100.7 kg) and the gap
    was 0.70 % (BENCHMARKS.md section 3).

    Returns ``st1.seeds`` unchanged when the short path's smoothed dual did not run.

    Returns
    -------
    list of numpy.ndarray
        ``(O, 3)`` ``(representative job, site, start)`` blocks, duplicates allowed.
    """
    if st1.short_pool is None or st1.warm_duals is None:
        return list(st1.seeds)
    sets, lay, opt = st1.sets, st1.lay, st1.opt
    reps = lay.reps
    on_rows = np.where(np.arange(lay.n_rows) < len(reps), 0.0, st1.warm_duals)
    rc, s_, t_ = price(sets, lay, on_rows, reps, k=opt.warmup_top_k, chunk=opt.price_chunk)
    seeds = [plan_options(sets, st1.cls, first), st1.short_pool,
             stack_options(reps, rc, s_, t_, np.isfinite(rc))]
    if st1.carried is not None:
        seeds.append(carried_columns(sets, st1.cls, st1.carried))
    return seeds


def _dump_state(st: ColgenState, path: str) -> None:
    """Pickle the state before the repair (pool, LP values, duals, candidates) to ``path``."""
    with open(path, "wb") as fh:
        pickle.dump({"pool": st.pool, "xo": st.xo, "duals": st.duals,
                     "residual": st.residual, "fixed_opts": st.fixed_opts,
                     "fixed_counts": st.fixed_counts,
                     "cands": [(n, r.totals["objective"]) for n, r in st.cands],
                     "bound": st.rec.bound}, fh)


def finish(st: ColgenState) -> PlanResult:
    """The incumbent of least objective, with its gap, status, timings and the plan note.

    Returns
    -------
    PlanResult
        The chosen plan, its solver record filled (objective, bound, gap, status, seconds).
    """
    rec = st.rec
    name, res = st.best()
    rec.solve_seconds = time.perf_counter() - st.ts + st.warm_s   # warm-up, masters, repair
    res.solver = rec
    rec.objective = res.totals["objective"]
    if st.prior is not None:
        # a staged solve: the short path's bound (its split bounds included) is a floor
        bounds = [b for b in (rec.bound, st.prior_bound) if b is not None and np.isfinite(b)]
        rec.bound = max(bounds) if bounds else None
        rec.build_seconds += st.prior_build_s
        rec.solve_seconds = time.perf_counter() - st.started - rec.build_seconds
    rec.mip_gap = relative_gap(rec.objective, rec.bound)
    own = name.removeprefix(f"{SHORT_PATH}: ")
    status = plan_status(own, rec.mip_gap, st.mip_gap)
    rec.status = res.status = status
    st.note(f"column generation: {st.it} rounds, {len(st.pool)} columns of "
            f"{count_options(st.sets)} options, {len(st.lay.reps)} classes; plan from {name} ("
            + ", ".join(f"{n} {r.totals['objective']:.3f}" for n, r in st.cands) + ")")
    if st.prior is not None:
        # the short path's plan itself: a repack of its next best is the master-LP path's
        st.note("plan from the " + ("short path" if name == f"{SHORT_PATH}: {st.prior[0]}"
                                     else "master-LP path") + "; bound the larger of both")
    if st.carried_how and st.carried_how not in rec.warm_start:
        rec.warm_start = join_clauses(rec.warm_start,
                                      "multipliers: " + st.carried_how)
    # for the next rolling run: the best bound's multipliers, the last master's support
    # (its columns with a positive LP value) and the plan's own options (colgen.warm)
    if st.best_lam is not None:
        support = (st.pool[np.asarray(st.xo) > SUPPORT_TOL] if st.xo is not None
                   and len(st.xo) == len(st.pool) else np.zeros((0, 3), np.int64))
        pool = np.concatenate([support.reshape(-1, 3), plan_options(st.sets, st.cls, res)])
        res.carry = record(st.sets, st.lay, st.best_lam, pool, st.lb)
    rec.seconds = time.perf_counter() - st.started
    return res
