"""The repair MIP: re-plan some classes over candidate options with every other class fixed.

Also its LP relaxation with pricing rounds (:func:`repair` with ``relax``), used by the
one-slot repack, and the choice of neighbours a repair frees with the fractional classes.
"""

from __future__ import annotations

import re
import time

import highspy
import numpy as np

from carbonsched.plan.colgen.classes import Classes, count_options, expand, plan_options
from carbonsched.plan.colgen.layout import (
    INF,
    Layout,
    fixed_columns,
    option_block,
    pricing_duals,
    row_bounds,
    usage,
)
from carbonsched.plan.colgen.options import ColgenOptions
from carbonsched.plan.colgen.pricing import candidate_options, price, stack_options
from carbonsched.plan.colgen.solver import highs_solution, new_highs, set_limit
from carbonsched.plan.colgen.state import ColgenState
from carbonsched.plan.colgen.status import add_note
from carbonsched.plan.gap import ABS_GAP_KG
from carbonsched.plan.highs import mip_dual_bound, run_highs
from carbonsched.plan.model import cover_index
from carbonsched.plan.result import PlanResult, PlanStatus, SolverRecord, build_plan_result
from carbonsched.plan.sets import PlanSets, enumerate_options, inference_positions


def repair(sets: PlanSets, lay: Layout, cls: Classes, fixed_opts: np.ndarray,
           fixed_counts: np.ndarray, rep_c: np.ndarray, rhs: np.ndarray, opts: np.ndarray,
           threads: int, time_limit_s: float, mip_gap: float, say,
           start: PlanResult | None = None, relax: bool = False, price_k: int = 0,
           status_out: dict | None = None, options: ColgenOptions | None = None
           ) -> tuple[np.ndarray, np.ndarray, bool, float | None] | None:
    """MIP over the repair classes' candidate options, all inference and absorption.

    Capacity, power and absorption rows are reduced by the fixed classes' usage.

    With ``relax`` (which needs ``start``), the model is solved as an LP by the dual simplex with
    the inference allocation fixed at ``start``'s, and each option's count is rounded down (a value
    within :attr:`ColgenOptions.repack_round_tol` of an integer counts as that integer): a feasible
    plan whatever the LP's values, since each cell's GPU count and IT power only grow with the
    option counts and the plan's build recomputes absorption from the placements
    (:func:`unit_repack`). With ``price_k`` > 0 as well, ``opts`` is only the start: after each LP
    the repair classes are priced on its duals (:func:`price`, up to ``price_k`` new options per
    class) and the options of negative reduced cost added, until there are none (the LP over every
    option of the repair classes is then solved) or the time is up. ``status_out``, if given, gets
    ``"status"`` (HiGHS's model status of the last run), ``"time_limited"`` (that status is the
    time limit) and ``"complete"`` (whether the pricing ended with no option left to add).
    ``options`` (defaults when None) gives the HiGHS heuristic effort, the pricing and rounding
    tolerances and the log file (:attr:`ColgenOptions.repair_log`).

    Parameters
    ----------
    sets, lay, cls
        Compiled sets, the master's row layout and the job classes.
    fixed_opts, fixed_counts
        ``(F, 3)`` options of the fixed work and its jobs on each.
    rep_c, rhs
        Positions of the repair classes and the jobs of each to place.
    opts
        ``(O, 3)`` candidate options of the repair classes.
    threads, time_limit_s, mip_gap
        HiGHS threads, time limit [s] and relative gap (a quarter of it is
        HiGHS's ``mip_rel_gap``) [-].
    say
        Callable taking a one-line progress message.
    start, relax, price_k, status_out, options
        See above; ``options`` defaults when None.

    Returns
    -------
    (chosen, alloc, proven, bound) or None
        Per-job ``(job, site, start)`` of every placed job, the inference allocation
        ``(D, S)``, whether the MIP proved optimality within its gap (with ``relax``: whether
        the LP's values were integral), and HiGHS's dual bound on this MIP [kg] (None if not
        finite, and with ``relax``) — a bound on the whole problem only when the MIP frees
        every class over every option with nothing fixed; None if the MIP found no solution
        in the limit, or (``relax``) no LP was solved to optimality: stopped by the limit or
        infeasible.

    Raises
    ------
    ValueError
        ``relax`` without a start plan whose placements of the repair classes are among
        ``opts`` and whose inference :func:`~carbonsched.plan.sets.inference_positions`
        decodes (a caller's error: :func:`unit_repack` passes such a plan).
    """
    opt = ColgenOptions() if options is None else options
    gpus_fixed, kw_fixed = usage(sets, fixed_opts, fixed_counts)
    e_fixed = usage(sets, fixed_opts, fixed_counts, energy=True)[1]
    lo, hi = row_bounds(sets, lay, gpus_fixed, kw_fixed, e_fixed)
    free = np.ones(len(lay.reps), dtype=bool)
    free[rep_c] = False
    lo[: len(lay.reps)][free] = -INF
    hi[: len(lay.reps)][free] = INF
    lo[rep_c] = hi[rep_c] = rhs
    left_of = np.zeros(len(lay.reps), dtype=np.int64)
    left_of[rep_c] = rhs
    h = new_highs(threads, time_limit_s)
    h.setOptionValue("mip_rel_gap", float(mip_gap) / 4)
    h.setOptionValue("mip_heuristic_effort", opt.repair_heuristic_effort)
    if relax:
        h.setOptionValue("solver", "simplex")
    if opt.repair_log:   # debugging aid
        h.setOptionValue("output_flag", True)
        h.setOptionValue("log_file", opt.repair_log)
        h.setOptionValue("log_to_console", False)
    h.addRows(lay.n_rows, lo, hi, 0, np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0))
    fx = fixed_columns(sets, lay, rep_c, integer=True)
    fx["upper"][: len(rep_c)] = rhs
    nf = len(fx["costs"])
    x0 = None if start is None else _start_vector(sets, lay, cls, start, rep_c, fx, opts,
                                                   e_fixed)
    if relax:
        if x0 is None:
            raise ValueError("repair(relax=True) needs a start plan whose placements of the "
                             "repair classes are among the options and whose inference "
                             "the sets know (no unknown site, no more GPUs than demanded)")
        inf_col = np.flatnonzero(fx["kinds"] == 1)
        fx["lower"][inf_col] = fx["upper"][inf_col] = x0[inf_col]
    h.addCols(nf, fx["costs"], fx["lower"], fx["upper"], len(fx["rows"]), fx["starts"],
              fx["rows"], fx["vals"])
    c, st, ri, va = option_block(sets, lay, opts)
    ub = left_of[cls.of_job[opts[:, 0]]].astype(float)
    h.addCols(len(opts), c, np.zeros(len(opts)), ub, len(ri), st, ri, va)
    kinds = np.concatenate([fx["kinds"], np.full(len(opts), 3)])
    int_cols = np.flatnonzero(_integral(kinds)).astype(np.int32)
    if not relax:
        h.changeColsIntegrality(len(int_cols), int_cols,
                                np.full(len(int_cols), 1, dtype=np.uint8))
        if x0 is not None:
            h.setSolution(highs_solution(x0))
    say(f"repair {'LP' if relax else 'MIP'}: {len(rep_c)} classes, {len(opts)} options, "
        f"limit {time_limit_s:.1f} s")
    t_run = time.perf_counter()
    run_highs(h)
    if not relax and x0 is not None:
        costs = np.concatenate([fx["costs"], c])
        bad = start_misvalued(h, costs)
        if bad:
            # HiGHS's presolve lost part of the objective with the start (issue 36): its
            # "optimal" was the start itself and its dual bound not a bound; solved again
            # without presolve (a valid proof), from the same start
            say(f"repair MIP: {bad}; solved again without presolve")
            if status_out is not None:
                status_out["start_misvalued"] = bad
            h.setOptionValue("presolve", "off")
            set_limit(h, max(time_limit_s - (time.perf_counter() - t_run), 0.1), mip=True)
            h.setSolution(highs_solution(x0))
            run_highs(h)
    if relax:
        val, opts, complete = _priced_lp(sets, lay, cls, h, rep_c, left_of, opts, price_k,
                                         time_limit_s - (time.perf_counter() - t_run), say,
                                         t_run, opt.repack_rc_tol, opt.price_chunk)
        if status_out is not None:
            status_out["status"] = h.modelStatusToString(h.getModelStatus())
            status_out["time_limited"] = (h.getModelStatus()
                                          == highspy.HighsModelStatus.kTimeLimit)
            status_out["complete"] = complete
        if val is None:
            return None
        # rounded down (within the tolerance): each cell's GPUs and IT kW only grow with the
        # counts, so none is used more than in the LP solution
        x = np.floor(val + opt.repack_round_tol).astype(np.int64)
        whole = _integral(np.concatenate([fx["kinds"], np.full(len(opts), 3)]))  # priced too
        proven = bool(np.all(np.abs(val[whole] - x[whole]) <= opt.repack_round_tol))
        bound = None
    else:
        if h.getInfo().primal_solution_status != 2:
            return None
        proven = h.getModelStatus() == highspy.HighsModelStatus.kOptimal
        bound = mip_dual_bound(h, has_integers=len(int_cols) > 0)
        x = np.round(np.asarray(h.getSolution().col_value)).astype(np.int64)
    alloc = np.zeros(sets.inf_sites.shape, dtype=np.int64)
    ys = fx["ys"]
    if len(ys):
        alloc[ys[:, 0], ys[:, 1]] = x[np.flatnonzero(fx["kinds"] == 1)]
    all_opts = np.concatenate([fixed_opts, opts])
    all_counts = np.concatenate([fixed_counts, x[nf:]])
    return (expand(cls, all_opts, all_counts), alloc, proven,
            bound if bound is not None and np.isfinite(bound) else None)


START_CHECK_REL_TOL = 1e-6
"""Relative difference between HiGHS's reported objective and the objective recomputed
from the returned column values above which :func:`start_misvalued` refuses a MIP result
(HiGHS's own feasibility tolerances are 1e-6 on rows and integrality). [-]"""


def start_misvalued(h: highspy.Highs, costs: np.ndarray) -> str:
    """Why a MIP run from a start cannot be trusted, or ``""`` when it can.

    On a model with a MIP start, HiGHS 1.16's presolve was seen to value the start in its
    reduced space without the objective's offset (log: "MIP start solution is feasible:
    4.2488" then "feasible in the reduced space: 3.3727"), prune every node against that
    value and report the start as ``Optimal`` with the offset-less value as objective and
    dual bound — a plan 17 % above the optimum "proven" optimal, and a bound below it
    that, with an offset of the other sign, would have been above it (the same presolve
    family as ERGO-Code/HiGHS issues 1273, 2900, 3094). The run is refused when the
    objective it reports differs from ``costs`` · its column values, or its dual bound
    exceeds that value, by more than :data:`START_CHECK_REL_TOL` (relative, at least
    1e-9 kg).

    Parameters
    ----------
    h
        The model after ``run()``.
    costs
        ``(N,)`` the model's column costs, in column order. [kg]

    Returns
    -------
    str
        The two values that disagree, for the note; empty when they agree or there is no
        solution to check.
    """
    if h.getInfo().primal_solution_status != 2:
        return ""
    x = np.asarray(h.getSolution().col_value)
    value = float(costs @ x)
    reported = float(h.getInfo().objective_function_value)
    tol = START_CHECK_REL_TOL * max(abs(value), 1e-3)
    if abs(reported - value) > tol:
        return (f"HiGHS reported objective {reported:.6g} kg for a solution worth "
                f"{value:.6g} kg")
    bound = mip_dual_bound(h, has_integers=True)
    if np.isfinite(bound) and bound > value + tol:
        return f"HiGHS's dual bound {bound:.6g} kg is above its solution's {value:.6g} kg"
    return ""


def note_start_misvalued(rec: SolverRecord, status_out: dict, where: str) -> None:
    """Count in the plan note a MIP :func:`start_misvalued` refused and solved again.

    One clause per phase, ``"<where>: <n> MIP run(s) refused and solved again without
    presolve (HiGHS's presolve mis-valued the start, first: <why>)"``, its count raised by
    each further refusal in the phase (a site pass may run dozens), so the note stays a line a
    person reads.

    Parameters
    ----------
    rec
        The solver record whose note gets the clause.
    status_out
        The ``status_out`` dict given to :func:`repair`.
    where
        Which phase ran the MIP, for the note.
    """
    bad = status_out.get("start_misvalued")
    if not bad:
        return
    head = f"{where}: "
    mid = (" MIP run(s) refused and solved again without presolve (HiGHS's presolve "
           "mis-valued the start, first: ")
    found = re.search(re.escape(head) + r"(\d+)" + re.escape(mid) + r"[^)]*\)", rec.note)
    if found is None:
        add_note(rec, f"{head}1{mid}{bad})")
        return
    n = int(found.group(1)) + 1
    counted = re.sub(r"^(" + re.escape(head) + r")\d+", lambda m: f"{m.group(1)}{n}",
                     found.group(0))
    rec.note = rec.note[:found.start()] + counted + rec.note[found.end():]


def _integral(kinds: np.ndarray) -> np.ndarray:
    """Integer columns of :func:`repair`'s model, by kind, ``(N,)`` bool.

    All but absorption (2) and the flow form's run columns (4, 5).
    """
    return (kinds != 2) & (kinds != 4) & (kinds != 5)


def _priced_lp(sets: PlanSets, lay: Layout, cls: Classes, h: highspy.Highs, rep_c: np.ndarray,
               left_of: np.ndarray, opts: np.ndarray, price_k: int, seconds: float, say,
               t_run: float, rc_tol: float, chunk: int
               ) -> tuple[np.ndarray | None, np.ndarray, bool]:
    """Pricing rounds on :func:`repair`'s relaxed model, solved once already.

    An option enters when its reduced cost is below ``-rc_tol`` [kg]
    (:attr:`ColgenOptions.repack_rc_tol`); ``chunk`` classes are priced per numpy block.

    Returns
    -------
    (values, options, complete)
        Column values of the last LP solved to optimality (None if none was), the options
        its columns stand for (a round cut short by the time limit is dropped with its
        columns), and whether the pricing ended with no option of negative reduced cost left
        (the LP over every option then solved).
    """
    ok = highspy.HighsModelStatus.kOptimal
    if h.getModelStatus() != ok:
        return None, opts, False
    val = np.asarray(h.getSolution().col_value).copy()
    n_val = len(opts)
    complete = price_k <= 0    # every option given at once
    have = {tuple(o) for o in opts.tolist()} if price_k > 0 else set()
    while price_k > 0:
        # column generation over the repair classes' options (the dual simplex restarts from
        # the last basis when columns are added)
        duals = pricing_duals(sets, lay, np.asarray(h.getSolution().row_dual))
        # one more than asked: an option already in the LP may price out when it holds its
        # whole class (at its upper bound), and at most one per class can
        rc, ss, tt = price(sets, lay, duals, cls.rep[rep_c], k=price_k + 1, chunk=chunk)
        new = stack_options(cls.rep[rep_c], rc, ss, tt, rc < -rc_tol)
        if len(new):
            new = new[[tuple(o) not in have for o in new.tolist()]]
        if len(new) == 0:
            complete = True
            break
        rest = seconds - (time.perf_counter() - t_run)
        if rest < 0.1:
            break
        c, st, ri, va = option_block(sets, lay, new)
        ub = left_of[cls.of_job[new[:, 0]]].astype(float)
        h.addCols(len(new), c, np.zeros(len(new)), ub, len(ri), st, ri, va)
        opts = np.concatenate([opts, new])
        have.update(tuple(o) for o in new.tolist())
        set_limit(h, rest)
        run_highs(h)
        if h.getModelStatus() != ok:
            break
        val = np.asarray(h.getSolution().col_value).copy()
        n_val = len(opts)
        say(f"repair LP: {len(new)} options priced in, {len(opts)} in all "
            f"({time.perf_counter() - t_run:.1f} s)")
    return val, opts[:n_val], complete and n_val == len(opts)


def _start_vector(sets: PlanSets, lay: Layout, cls: Classes, plan: PlanResult,
                  rep_c: np.ndarray, fx: dict, opts: np.ndarray, e_fixed: np.ndarray
                  ) -> np.ndarray | None:
    """Column values of the repair MIP that reproduce ``plan`` on the repair classes.

    ``e_fixed`` is the fixed work's IT kW weighted by the share of each slot it runs. None
    when a placement of the repair classes is not among ``opts``, or the plan's inference
    names a site the sets do not know or serves more GPUs than demanded.
    """
    po = plan_options(sets, cls, plan)
    in_rep = np.zeros(len(lay.reps), dtype=bool)
    in_rep[rep_c] = True
    po = po[in_rep[cls.of_job[po[:, 0]]]]
    key = {tuple(o): i for i, o in enumerate(opts.tolist())}
    x_opt = np.zeros(len(opts))
    for o in po.tolist():
        i = key.get(tuple(o))
        if i is None:
            return None
        x_opt[i] += 1
    c_pos = {int(c): i for i, c in enumerate(rep_c)}
    x_u = np.zeros(len(rep_c))
    placed = np.bincount(cls.of_job[po[:, 0]], minlength=len(lay.reps)) if len(po) else \
        np.zeros(len(lay.reps), dtype=np.int64)
    for c, i in c_pos.items():
        x_u[i] = lay.mult[c] - placed[c]
    try:
        alloc = inference_positions(sets, plan.inference)
    except ValueError:                  # an unknown site, or more GPUs than demanded
        return None
    x_y = [int(alloc[d, s]) for d, s in fx["ys"].tolist()]
    g_rep, kw_rep = usage(sets, po, np.ones(len(po), dtype=np.int64))
    x_run = [g_rep.reshape(-1), kw_rep.reshape(-1).copy()] if lay.flow else []
    e_rep = usage(sets, po, np.ones(len(po), dtype=np.int64), energy=True)[1]
    for (d, s), v in zip(fx["ys"].tolist(), x_y, strict=True):
        e_rep[s, sets.inf_slots(d)] += v * sets.inf_kw_per_gpu[d]   # every slot of its hour
    sa, ta = np.nonzero(lay.absorb_row >= 0)
    # absorption counts the minutes run (partial last slots), as the absorption rows do
    x_a = np.minimum(sets.surplus_kw[sa, ta], sets.pue[sa, ta] * (e_fixed + e_rep)[sa, ta])
    return np.concatenate([x_u, np.array(x_y, dtype=float), x_a, *x_run, x_opt])


def neighbours(sets: PlanSets, lay: Layout, duals: np.ndarray, cand: np.ndarray,
               fixed: np.ndarray, cls: Classes, limit: int) -> np.ndarray:
    """Fixed classes occupying a binding (capacity or power) cell that ``cand`` could use.

    Freeing them lets the repair MIP make room for the fractional classes instead of leaving
    work out. At most ``limit`` classes, those sharing the most such cells first.

    Parameters
    ----------
    sets
        Compiled sets.
    lay
        The master's row layout (:func:`~carbonsched.plan.colgen.layout.make_layout`).
    duals
        ``(R,)`` row duals (HiGHS signs) in the covering form's layout.
    cand
        ``(O, 3)`` options the residual classes could use.
    fixed
        ``(F, 3)`` options of the fixed classes.
    cls
        The job classes.
    limit
        Most classes returned.

    Returns
    -------
    numpy.ndarray
        Class positions, most shared binding cells first.
    """
    if len(cand) == 0 or len(fixed) == 0 or limit <= 0:
        return np.zeros(0, dtype=np.int64)
    n_s, n_t = sets.pue.shape
    n_g = len(sets.gpu_type)
    tight_cap = np.abs(duals[lay.cap_base: lay.pow_base]).reshape(n_s, n_t, n_g) > 1e-9
    tight_pow = np.abs(duals[lay.pow_base: lay.pow_base + n_s * n_t]).reshape(n_s, n_t) > 1e-9
    cov = cover_index(sets, cand)
    hot_cap = np.zeros((n_s, n_t, n_g), dtype=bool)
    hot_pow = np.zeros((n_s, n_t), dtype=bool)
    hot_cap[cov.site, cov.slot, cov.gtype] = True
    hot_pow[cov.site, cov.slot] = True
    hot_cap &= tight_cap
    hot_pow &= tight_pow
    fc = cover_index(sets, fixed)
    hits = hot_cap[fc.site, fc.slot, fc.gtype] | hot_pow[fc.site, fc.slot]
    c_of = cls.of_job[fixed[:, 0]]
    score = np.bincount(c_of[fc.option[hits]], minlength=len(cls.rep))
    picked = np.flatnonzero(score > 0)
    return picked[np.argsort(-score[picked], kind="stable")][:limit]


REPAIR_MIN_S = 0.5
"""Least time the repair MIP runs in [s]: with less left after its set-up than
:attr:`ColgenOptions.finish_s` and this, the repair is skipped and named in a note."""


def repair_budget_s(st: ColgenState) -> float | None:
    """The repair MIP's time limit: what is left less :attr:`ColgenOptions.finish_s`. [s]

    Returns None, and notes the repair as skipped for time, when that is under
    :data:`REPAIR_MIN_S`: the set-up (neighbours, candidate options) runs after the start
    check (:attr:`ColgenOptions.step_min_left_s`), and a floor at the least time would take
    it out of the time kept for HiGHS's overrun and the finish.
    """
    seconds = st.left() - st.opt.finish_s
    if seconds < REPAIR_MIN_S:
        st.note(f"repair MIP skipped for time ({max(st.left(), 0.0):.2f} s of the limit left "
                "after its set-up: too little for a MIP)")
        return None
    return seconds


def repair_incumbent(st: ColgenState) -> None:
    """The repair MIP over the classes the LP left fractional, from the best plan so far.

    Frees the residual classes, the fixed classes that share a binding cell with them
    (:func:`neighbours`) and the classes the start plan placed off their LP options, up to
    :attr:`ColgenOptions.repair_max_classes` (every class up to
    :attr:`ColgenOptions.repair_all_classes`, and then, up to
    :attr:`ColgenOptions.repair_all_options` options, every option: the MIP is the whole
    class-aggregated model and its dual bound bounds the problem). Appends the plan, and
    possibly a higher bound.
    """
    sets, lay, cls, opt = st.sets, st.lay, st.cls, st.opt
    reps, pool, xo = lay.reps, st.pool, st.xo
    frac = np.flatnonzero(st.residual > 0)
    every = len(reps) <= opt.repair_all_classes
    if not ((0 < len(frac) <= opt.repair_max_classes or (every and len(frac)))
            and st.left() > opt.step_min_left_s):
        return
    lp_pos = pool[xo > opt.integral_tol]
    in_f = np.zeros(len(reps), dtype=bool)
    in_f[frac] = True
    # neighbours: fixed classes in the binding cells where the LP put the residual work
    neigh = neighbours(sets, lay, st.row_duals, lp_pos[in_f[cls.of_job[lp_pos[:, 0]]]],
                       st.fixed_opts, cls, max(opt.repair_max_classes - len(frac), 0))
    # large-neighbourhood search around the best plan so far: every other class keeps
    # its placements from that plan, so the plan itself is a feasible start; classes the
    # plan placed off their LP options are freed too
    lp_based = [c for c in st.cands if c[0].startswith("LP floor + priced greedy")]
    start_plan = min(lp_based, key=lambda c: c[1].totals["objective"])[1] \
        if lp_based and not every else st.best()[1]
    st.say(f"repair MIP starts from {start_plan.totals['objective']:.3f}")
    start_opts = plan_options(sets, cls, start_plan)
    lp_set = {tuple(o) for o in lp_pos.tolist()}
    moved = np.unique([cls.of_job[o[0]] for o in start_opts.tolist()
                       if tuple(o) not in lp_set]).astype(np.int64)
    rep_c = np.union1d(np.union1d(frac, neigh), moved).astype(np.int64)
    if every:                                # small instance: the MIP over every class
        rep_c = np.arange(len(reps), dtype=np.int64)
    in_rep = np.zeros(len(reps), dtype=bool)
    in_rep[rep_c] = True
    outside = ~in_rep[cls.of_job[start_opts[:, 0]]]
    fix_o, fix_n = np.unique(start_opts[outside], axis=0, return_counts=True)
    split_opts = st.split_opts
    rep_opts = np.unique(np.concatenate([
        candidate_options(sets, lay, st.duals, reps[rep_c], lp_pos, opt.repair_top_k,
                          chunk=opt.price_chunk),
        start_opts[~outside], split_opts[in_rep[cls.of_job[split_opts[:, 0]]]]]), axis=0)
    whole = (len(rep_c) == len(reps) and len(fix_o) == 0
             and count_options(sets) <= opt.repair_all_options)
    if whole:
        # small instance: every option of every class (the MIP is then the full model)
        rep_opts = np.unique(np.concatenate([rep_opts, enumerate_options(sets, reps)]),
                             axis=0)
    seconds = repair_budget_s(st)
    if seconds is None:
        return
    so: dict = {}
    out = repair(sets, lay, cls, fix_o.reshape(-1, 3), fix_n.astype(np.int64), rep_c,
                 lay.mult[rep_c], rep_opts, st.threads, seconds,
                 st.mip_gap, st.say, start=start_plan, options=opt, status_out=so)
    note_start_misvalued(st.rec, so, "repair MIP")
    if out is None:
        return
    chosen, alloc, _, rep_bound = out
    st.cands.append(("LP + repair MIP", build_plan_result(
        sets, chosen, alloc, PlanStatus.FEASIBLE, st.rec)))
    if whole and rep_bound is not None and rep_bound > st.lb + ABS_GAP_KG:
        # the MIP over the whole (class-aggregated) model: its dual bound bounds
        # the problem, and holds the gangs the LP relaxes
        st.say(f"bound from the repair MIP over the whole model {rep_bound:.3f} "
               f"(was {st.lb:.3f})")
        st.note(f"bound from the MIP over every class and option: {st.lb:.3f} -> "
                f"{rep_bound:.3f}")
        st.lb = rep_bound
        st.rec.bound = st.lb
