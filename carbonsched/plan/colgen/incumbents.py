"""Incumbent phases: priced greedy plans, LP roundings, the one-slot repack and the moves.

Every phase appends ``(name, plan)`` candidates to the solve's state; the finish keeps the
one of least objective.
"""

from __future__ import annotations

import time

import numpy as np

from carbonsched.plan.baselines import priced_greedy
from carbonsched.plan.colgen.budget import moves_hold_s
from carbonsched.plan.colgen.classes import expand, least_flexible_first, round_lp
from carbonsched.plan.colgen.grid import kw_slot_price
from carbonsched.plan.colgen.lagrangian_dual import multipliers
from carbonsched.plan.colgen.repack import unit_repack
from carbonsched.plan.colgen.state import ColgenState
from carbonsched.plan.local import improve
from carbonsched.plan.result import PlanResult


def room(st: ColgenState, label: str) -> bool:
    """Whether one more priced greedy (as long as the first) fits before the finish.

    A master stopped by the limit leaves little: on 10k x 16 x 48 at load 0.8 two more
    candidates once ended the solve at 62.7 s of 60 (docs/benchmarks/planner-log.md#planner-3-11).
    The finish kept is :meth:`ColgenState.plain_reserve_s` (no MIP runs in a priced greedy).

    Parameters
    ----------
    st
        The solve's state: ``st.left()`` and ``st.t_pg`` (one priced greedy plan's time) [s].
    label
        The candidate's name, appended to ``st.skipped`` when it does not fit.

    Returns
    -------
    bool
        True when at least ``st.t_pg`` plus the reserve is left.
    """
    if st.left() >= st.t_pg + st.plain_reserve_s():
        return True
    st.skipped.append(label)
    return False


def incumbents(st: ColgenState) -> None:
    """The greedy plans and the master's LP rounded and completed by priced greedy.

    Candidates: the carbon greedy, priced greedy (carbon + shadow prices, least flexible
    first), priced greedy on refined multipliers, largest-first priced greedy (up to
    :attr:`ColgenOptions.both_orders_max_jobs` jobs), and the LP floor and LP rounding each
    completed by priced greedy; a candidate that does not fit the time left is skipped and
    named in the note. Sets ``lff``, ``t_pg``, ``residual``, ``fixed_opts`` and
    ``fixed_counts``.
    """
    sets, lay, cls, opt = st.sets, st.lay, st.cls, st.opt
    pool, xo, lam_c, rank_kw = st.pool, st.xo, st.lam_c, st.rank_kw
    placeable = sets.placeable
    st.lff = lff = least_flexible_first(sets)
    # incumbent 1: Lagrangian heuristic (greedy on carbon + shadow prices)
    t_pg = time.perf_counter()
    st.cands = [("greedy", st.greedy),
                ("priced greedy", priced_greedy(sets, rank_kw, lam_c, order=lff))]
    st.t_pg = time.perf_counter() - t_pg
    st.skipped = []
    earlier_draws(st)
    if st.refined_lam is not None and room(st, "priced greedy on the refined multipliers"):
        # the refined multipliers price the cells the last master LP left under-priced: on
        # 10k x 16 x 48 at load 0.6, seed 2 (one master in the budget) priced greedy on them
        # gave 3,551.1 kg against 3,556.3 on the master's duals
        # (docs/benchmarks/planner-log.md#planner-3-8)
        r_c, r_p, r_a = st.refined_lam
        st.cands.append(("priced greedy on the refined multipliers",
                         priced_greedy(sets, kw_slot_price(sets, r_p, r_a), r_c,
                                       order=lff)))
    if len(placeable) <= opt.both_orders_max_jobs and room(st, "largest-first priced greedy"):
        big_first = placeable[np.argsort(-(sets.job_gpus * sets.job_dur)[placeable],
                                         kind="stable")]
        st.cands.append(("largest-first priced greedy",
                         priced_greedy(sets, rank_kw, lam_c, order=big_first)))
    # incumbent 2: the LP rounded (largest values first) and completed by priced greedy
    floor = np.floor(xo + opt.integral_tol).astype(np.int64)
    used = np.bincount(cls.of_job[pool[:, 0]], weights=floor, minlength=len(lay.reps))
    st.residual = lay.mult - used.astype(np.int64)
    st.fixed_opts, st.fixed_counts = pool[floor > 0], floor[floor > 0]
    roundings = [] if st.no_master else [("LP rounding", round_lp(cls, pool, xo))]
    if st.no_master:
        # nothing to round: its completion would be priced greedy again, 1.5-2.5 s at 10k
        # jobs that a 20 s budget does not have (10k x 16 x 48 at load 0.3, two solves
        # sharing the 2 cores: 21-23.5 s with it, the same plan as priced greedy)
        st.note("no master LP solved in the budget: the plan is priced greedy on the "
                f"{st.priced_by}'s multipliers (no LP to round)")
    elif 2 * int(st.fixed_counts.sum()) >= len(placeable):
        roundings.insert(0, ("LP floor", expand(cls, st.fixed_opts, st.fixed_counts)))
    else:
        # an interior LP point has few integral counts: its floor is mostly priced greedy
        # again (2 s at 10k jobs, measured), time the type pass needs more
        st.note(f"LP floor + priced greedy skipped (the LP's integral part holds "
                f"{int(st.fixed_counts.sum())} of {len(placeable)} jobs)")
    for label, part in roundings:
        if not room(st, f"{label} + priced greedy"):
            continue
        placed = np.zeros(len(sets.job_gpus), dtype=bool)
        placed[part[:, 0]] = True
        completion = priced_greedy(sets, rank_kw, lam_c, order=lff[~placed[lff]],
                                   prefilled=part)
        if "short" not in completion.solver.note:
            st.cands.append((f"{label} + priced greedy", completion))
    if st.skipped:
        st.note(f"skipped for time ({max(st.left(), 0.0):.1f} s of the limit left, a priced "
                f"greedy plan took {st.t_pg:.1f} s): " + ", ".join(st.skipped))


def earlier_draws(st: ColgenState) -> None:
    """In a staged solve's short path, priced greedy on earlier smoothed-dual iterates too.

    Priced greedy is not monotone in its prices (:attr:`ColgenOptions.smooth_draws`): each of
    the smoothed dual's earlier best iterates (``st.earlier_duals``, newest first) prices a
    plan while one more fits the time left, and the best is appended as ``priced greedy on an
    earlier smoothed-dual iterate``. Only in the short path of a staged solve
    (``st.force_short``), whose plan the master-LP path starts from and which leaves its
    passes to that path; a short path alone prices its marks after the repack instead
    (:func:`marked_draws`).
    """
    if not (st.no_master and st.force_short and st.earlier_duals):
        return
    _draw(st, st.earlier_duals)


def marked_draws(st: ColgenState) -> None:
    """In a short path alone, priced greedy on the iterates a shorter limit would have ended at.

    A short path alone (a limit under the short budget, no master LP) prices a plan on each of
    the smoothed dual's best iterates at evaluations ``e, 2e, 4e, ...`` (``st.marked_duals``,
    newest first, :attr:`ColgenOptions.smooth_marks_alone`) while one more fits the time left,
    and appends the best after the one-slot repack: a longer limit then keeps, within a factor
    of two in evaluations, the plan a shorter one would have priced, and the repack still
    starts from the best plan before the marks, as without them. Priced before the repack,
    the mark's plan was repacked worse (10k × 16 × 48 at load 0.3, 20 s, seed 4: the mark's
    plan 2,019.9 kg repacked to 2,028.7 kg, the last iterate's 2,026.0 kg to 2,006.4 kg).
    """
    if not (st.no_master and not st.force_short and st.marked_duals):
        return
    n = _draw(st, st.marked_duals)
    if n < len(st.marked_duals):
        st.note(f"priced greedy on {len(st.marked_duals) - n} of {len(st.marked_duals)} "
                f"earlier smoothed-dual iterates skipped for time ({max(st.left(), 0.0):.1f} s "
                f"of the limit left, a priced greedy plan took {st.t_pg:.1f} s)")


def _draw(st: ColgenState, draws: list) -> int:
    """Priced greedy on each of ``draws`` (row duals) while one fits; the best a candidate.

    Returns how many were priced.
    """
    sets, lay = st.sets, st.lay
    label = "priced greedy on an earlier smoothed-dual iterate"
    plans = []
    for k, duals in enumerate(draws, 1):
        if not room(st, f"{label} ({k} of {len(draws)})"):
            break
        lam_c, lam_p, lam_a = multipliers(sets, lay, duals)
        plans.append(priced_greedy(sets, kw_slot_price(sets, lam_p, lam_a), lam_c,
                                   order=st.lff))
    if plans and st.opt.repack_more > 0 and st.force_short:
        # each its own candidate: the master-LP path may repack any of them (repack_more)
        st.cands.extend((f"{label} ({k} of {len(draws)})", plan)
                        for k, plan in enumerate(plans, 1))
    elif plans:
        st.cands.append((label, min(plans, key=lambda r: r.totals["objective"])))
    return len(plans)


REPACKED = " + one-slot repack"
"""Suffix of a candidate that is the one-slot repack of the candidate it names."""


def plan_key(plan: PlanResult) -> frozenset:
    """What makes two plans the same plan: every placement's and inference row's position.

    ``(job, piece, site, start, end, GPU type)`` per placement (times as ns since the epoch)
    and ``(area, hour, site, GPU type, GPUs)`` per (area, hour, site, GPU type), its rows' GPUs
    summed (two rows of 2 GPUs are the plan one row of 4 is); GPU indices, MIG starts and
    domains follow from these. Candidates of different names can hold the same plan (a staged
    solve's master-LP path without a master prices its greedy plan on the short path's
    multipliers). 0.03-0.14 s for 50k placements and 5k inference rows (the 2-core machine
    of BENCHMARKS.md section 3, loaded).
    """
    served: dict[tuple, int] = {}
    for i in plan.inference:
        key = ("inference", i.area, i.hour.value, i.site, i.gpu_type)
        served[key] = served.get(key, 0) + i.gpus
    return frozenset(
        [("job", p.job_id, p.piece, p.site, p.start.value, p.end.value, p.gpu_type)
         for p in plan.placements]
        + [(*key, gpus) for key, gpus in served.items() if gpus])


def best_not_repacked(cands: list[tuple[str, PlanResult]], repacked: set[frozenset],
                      also: tuple[PlanResult, ...] = ()) -> tuple[str, PlanResult] | None:
    """The candidate of least objective whose plan is not in ``repacked`` nor one of ``also``.

    Returns None when every candidate is. Keys are computed best first, so mostly for one or
    two candidates, and not at all when there is nothing to skip.
    """
    skip = set(repacked) | {plan_key(p) for p in also}
    for c in sorted(cands, key=lambda c: c[1].totals["objective"]):
        if not skip or plan_key(c[1]) not in skip:
            return c
    return None


def repack(st: ColgenState) -> None:
    """The one-slot repack of the best plan not repacked yet, with a share of the time left.

    It starts from the best candidate whose plan (:func:`plan_key`) the repack has neither
    started from nor produced (``st.repacked``, kept by a staged solve's short path for the
    master-LP path; a start that gave no plan for a reason more time does not change counts
    as repacked). That is the best plan so far except in a staged solve's master-LP path,
    whose best is mostly the short path's repacked plan: there, in the 62 staged solves of
    the benchmark matrix with two repacks (10k jobs × 16 sites, 48 and 72 h at 60 s,
    ``bench/results/matrix_2026-12-06_smooth_plan_share/``), the second repack gained
    nothing in 62 of 62, 55 of them on the short path's repacked plan. That path repacks the
    best plan the short path did not (``st.prior_unrepacked``) or one of its own instead;
    the note says so when the best plan is not the start. Side by side on the same commands,
    where both arms' short paths ran alike, 3 of 18 plans came out lower (by up to 4.1 kg),
    2 higher (by at most 0.06 kg), for 0.5 s more repack on average (BENCHMARKS.md section 3,
    ``bench/results/matrix_2026-12-06_repack_next/``).

    :func:`~carbonsched.plan.colgen.repack.unit_repack` gets
    :attr:`ColgenOptions.repack_share` of the time left less
    :meth:`ColgenState.plain_reserve_s` (an LP, no MIP), less one priced greedy plan's time
    (``t_pg``) for what comes on top of the LP's limit (setting the model up and building the
    plan: 0.4-0.7 s at 10k jobs, the order of a priced greedy plan's 0.4 s), when more than
    the reserve and :attr:`ColgenOptions.step_margin_s` are left. With the MIP's reserve
    (:attr:`ColgenOptions.finish_s`, 2 s) a warm 9 s rolling step (9.2k jobs × 16 sites × 72
    slots, seed 2) skipped it (1.37 s expected, 0.76 s available) and ended at 2,273.3 kg in
    7.4 s; with it, 2,250.3 kg in 8.8 s (BENCHMARKS.md section 16).

    The one-GPU, one-slot jobs re-placed by an LP around the rest of the plan fill any hole,
    and are most of the work a full fleet leaves out; it runs before the moves' time is held
    back: on a loaded fleet it gains more than they do (10k x 16 x 48 at load 0.8, seed 2:
    5,925.6 -> 5,473.6 kg, the moves after it 0.6 kg more).
    """
    opt = st.opt
    if (opt.repack_max_options <= 0
            or st.left() <= st.plain_reserve_s() + opt.step_margin_s):
        return
    start = best_not_repacked(st.cands, st.repacked)
    if start is not None:
        _repack_from(st, *start)


def _repack_from(st: ColgenState, start_name: str, start_plan: PlanResult,
                 keep_s: float = 0.0) -> bool:
    """One one-slot repack of ``start_plan``, appended as ``<start_name> + one-slot repack``.

    Runs when more than :meth:`ColgenState.plain_reserve_s` + ``keep_s`` +
    :attr:`ColgenOptions.step_margin_s` is left; the LP gets
    :attr:`ColgenOptions.repack_share` of the time left less the reserve and ``keep_s``, less
    one priced greedy plan's time (:func:`repack`). Returns whether it ran (with or without
    a plan).
    """
    opt = st.opt
    reserve_s = st.plain_reserve_s() + keep_s
    if st.left() <= reserve_s + opt.step_margin_s:
        return False
    lp_s = max(opt.repack_share * (st.left() - reserve_s) - st.t_pg, 0.0)
    so: dict = {}
    repacked = unit_repack(st.sets, st.lay, st.cls, start_plan, st.threads, lp_s,
                           st.say, st.rec, prices=(st.rank_kw, st.lam_c), greedy_s=st.t_pg,
                           options=opt, status_out=so)
    # kept by a staged solve's short path for the master-LP path, and by repack_more
    track = st.force_short or opt.repack_more > 0
    if repacked is None:
        if track and not so.get("time_limited"):
            # no plan for a reason more time does not change: the master-LP path repacks
            # another plan; one cut short by the time it may repack again with more
            st.repacked.add(plan_key(start_plan))
        return True
    best_name, best_plan = st.best()
    if best_plan is not start_plan:
        st.note(f"one-slot repack from {start_name} "
                f"({start_plan.totals['objective']:.3f} kg), the best plan not repacked yet: "
                f"the best, {best_name} ({best_plan.totals['objective']:.3f} kg), is a plan "
                "the repack started from or produced")
    st.cands.append((f"{start_name}{REPACKED}", repacked))
    if track:
        st.repacked.update((plan_key(start_plan), plan_key(repacked)))
    return True


def repack_more(st: ColgenState) -> None:
    """In a staged solve's master-LP path, more one-slot repacks after :func:`repack`.

    Up to :attr:`ColgenOptions.repack_more` more starts, each the best candidate not
    repacked yet (:func:`best_not_repacked`: the short path's earlier-iterate priced greedy
    plans, each its own candidate, and this path's own), while it is within
    :attr:`ColgenOptions.repack_more_rel` of the best plan so far and a repack fits the time
    left with :attr:`ColgenOptions.step_min_left_s` kept for the passes and the repair that
    follow. Which smoothed-dual iterate's priced greedy plan repacks best is not the one whose
    plan is best before the repack (BENCHMARKS.md section 3), so the plan no longer hangs on
    which iterates the short path's clock left it.
    """
    opt = st.opt
    if opt.repack_more <= 0 or opt.repack_max_options <= 0 or st.prior is None:
        return
    done = 0
    while done < opt.repack_more:
        start = best_not_repacked(st.cands, st.repacked)
        if start is None:
            return
        best = st.best()[1].totals["objective"]
        if start[1].totals["objective"] > best * (1.0 + opt.repack_more_rel):
            return
        # a start that ran is repacked whatever came of it: the next is another plan
        st.repacked.add(plan_key(start[1]))
        if not _repack_from(st, *start, keep_s=opt.step_min_left_s):
            st.note(f"one-slot repack of {start[0]} skipped for time "
                    f"({max(st.left(), 0.0):.1f} s of the limit left)")
            return
        done += 1


def early_moves(st: ColgenState) -> None:
    """Hold back the final moves' time, and on small instances run moves now too.

    ``held`` becomes :func:`~carbonsched.plan.colgen.budget.moves_hold_s`; up to
    :attr:`ColgenOptions.moves_first_max_jobs` jobs the passes and the repair start from the
    moved plan too (1k x 16 x 48 at load 0.6, seed 2: 0.55 % against 0.86 % with the final
    moves alone; at 10k, load 0.8, seed 2, the site pass gained less from the moved plan), at
    most as long as the hold, taken from the passes.
    """
    opt = st.opt
    if opt.moves_share > 0:
        st.held = moves_hold_s(st.time_limit_s, len(st.sets.placeable), opt)
        if (len(st.sets.placeable) <= opt.moves_first_max_jobs and st.held > 0
                and st.left() > st.held + opt.step_min_left_s):
            add_moves(st, st.held)


def final_moves(st: ColgenState) -> None:
    """One-job moves, insertions and ejections on the best plan with the time left.

    The priced greedy steers jobs by LP prices the finished plan does not need, and the
    passes and the repair re-plan one neighbourhood at a time; the held time is released
    first, and the moves (no MIP) leave :meth:`ColgenState.plain_reserve_s`.
    """
    st.held = 0.0
    reserve_s = st.plain_reserve_s()
    if st.opt.moves_share > 0 and st.left() > reserve_s:
        add_moves(st, st.left() - reserve_s)


def add_moves(st: ColgenState, seconds: float) -> None:
    """Append the best candidate improved by moves, if anything moved.

    :func:`carbonsched.plan.local.improve` (moves, insertions, ejections) within ``seconds``
    [s]; the new candidate is named ``"<its name> + moves"``.

    Parameters
    ----------
    st
        The solve's state; ``st.cands`` gets the new candidate.
    seconds
        Time for the moves. [s]
    """
    name, best = st.best()
    tr = time.perf_counter()
    out = improve(st.sets, best, seconds, st.rec)
    if out is None:
        return
    plan, mv = out
    st.say(f"moves on {name}: {best.totals['objective']:.3f} -> "
           f"{plan.totals['objective']:.3f} ({mv.moved} jobs moved, {mv.inserted} left-out "
           f"jobs placed where they fit, {mv.ejected} by moving one job out of their way"
           + (f", {mv.deferred} deferred past the horizon" if mv.deferred else "")
           + f"; {time.perf_counter() - tr:.1f} s)")
    st.cands.append((f"{name} + moves", plan))
