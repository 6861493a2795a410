"""The master LP phases: warm-up, column-generation rounds, bound refinement, crossover.

Each phase takes the solve's :class:`~carbonsched.plan.colgen.state.ColgenState` and fills
in its part of it (see the package docstring for the method and its measurements).
"""

from __future__ import annotations

import time

import highspy
import numpy as np

from carbonsched.plan.baselines import greedy_from_sets
from carbonsched.plan.colgen.budget import SHORT_PATH_SLOTS, short_path_s, tail_s
from carbonsched.plan.colgen.classes import job_classes, plan_options
from carbonsched.plan.colgen.grid import kw_slot_price
from carbonsched.plan.colgen.lagrangian_dual import (
    duals_from,
    job_cost_scale,
    lagrangian,
    lagrangian_warmup,
    multipliers,
)
from carbonsched.plan.colgen.layout import (
    INF,
    Layout,
    fixed_columns,
    make_layout,
    option_block,
    pricing_duals,
    row_bounds,
)
from carbonsched.plan.colgen.options import ColgenOptions
from carbonsched.plan.colgen.pricing import price, stack_options
from carbonsched.plan.colgen.smoothed import smoothed_ascent
from carbonsched.plan.colgen.solver import new_highs, set_limit
from carbonsched.plan.colgen.state import ColgenState, MasterSolution
from carbonsched.plan.colgen.warm import carried_columns, carried_multipliers
from carbonsched.plan.highs import run_highs


def usable_interior(h: highspy.Highs,
                    primal_tol: float = ColgenOptions.imprecise_primal_tol) -> bool:
    """Whether an interior-point master that ended imprecise still gives a usable solution.

    IPX stops with HiGHS status ``Unknown`` when it cannot reach its tolerance (seen once on
    the 50k × 16 × 48 master at load 0.3, which left the whole solve without a master). Its
    last iterate is kept when HiGHS flags primal and dual values valid and the primal rows
    hold within ``primal_tol`` (:attr:`ColgenOptions.imprecise_primal_tol`; absolute, jobs,
    GPUs, kW): any non-negative multipliers give a valid Lagrangian bound, and the rounding
    re-checks every capacity.

    Parameters
    ----------
    h
        The master's HiGHS object after a run that ended ``Unknown``.
    primal_tol
        Largest primal infeasibility accepted. [jobs, GPUs, kW]

    Returns
    -------
    bool
        Whether its last iterate is kept as the master's solution.
    """
    sol = h.getSolution()
    return bool(sol.value_valid and sol.dual_valid
                and h.getInfo().max_primal_infeasibility <= primal_tol)


def binding_cells(lay: Layout, raw: np.ndarray, scale: float,
                  dual_rel: float = ColgenOptions.binding_dual_rel) -> int:
    """Capacity, power and absorption rows whose multiplier exceeds ``dual_rel × scale``.

    A basic solution has at most as many non-zero variables as the LP has rows (Bertsimas &
    Tsitsiklis, *Introduction to Linear Optimization*, Athena 1997, §2.3): one per class row
    plus one per binding capacity, power or absorption row, so a vertex splits at most about
    that many classes over several options (or between an option and staying unplaced). At
    an interior point the count estimates the fractional classes a crossover would leave.

    Parameters
    ----------
    lay
        The master's layout; rows ``lay.cap_base`` to ``lay.n_cell_rows`` are counted (the
        real capacity, power and absorption rows, in the covering and the flow form).
    raw
        The master's row duals as HiGHS returns them, shape ``(lay.n_rows,)``; these rows
        are ``<=`` rows of a minimisation, so a binding one has a negative dual. [kg per GPU,
        kg per kW]
    scale
        The largest cost of the master's initial columns (at least 1). [kg]
    dual_rel
        :attr:`ColgenOptions.binding_dual_rel`. [-]

    Returns
    -------
    int
        The number of rows whose ``-raw`` exceeds ``dual_rel × scale``.
    """
    return int((-raw[lay.cap_base: lay.n_cell_rows] > dual_rel * scale).sum())


def crossover_pays(lay: Layout, raw: np.ndarray, scale: float,
                   options: ColgenOptions | None = None) -> tuple[bool, int]:
    """Whether a vertex would leave no more fractional classes than the repair MIP takes.

    True with at most :attr:`ColgenOptions.repair_all_classes` classes (the repair then takes
    every class) or at most :attr:`ColgenOptions.repair_max_classes` binding rows
    (:func:`binding_cells`, returned too); ``options`` default when None.

    Parameters
    ----------
    lay
        The master's row layout (:func:`~carbonsched.plan.colgen.layout.make_layout`).
    raw
        ``(R,)`` the master's row duals as HiGHS returns them.
    scale
        The largest cost of the master's initial columns. [kg]
    options
        Tunables; defaults when None.

    Returns
    -------
    (pays, binding)
        Whether the crossover pays, and the binding rows counted.
    """
    opt = ColgenOptions() if options is None else options
    n_bind = binding_cells(lay, raw, scale, opt.binding_dual_rel)
    return len(lay.reps) <= opt.repair_all_classes or n_bind <= opt.repair_max_classes, n_bind


def warm_up(st: ColgenState) -> None:
    """Classes, layout, greedy plan and the seeds of the master; the Lagrangian warm-up.

    Sets ``cls``, ``lay``, ``greedy``, ``seeds``, ``lb``, ``warm_duals``, ``best_lam``,
    ``warm_s`` and ``short``; on a budget under
    :func:`~carbonsched.plan.colgen.budget.short_path_s` no master LP follows and the smoothed
    dual gives the bound (:func:`short_budget_dual`).
    """
    sets, opt = st.sets, st.opt
    st.tb = time.perf_counter()
    st.cls = cls = job_classes(sets)
    st.lay = lay = make_layout(sets, cls, opt.flow)
    reps = cls.rep
    st.greedy = greedy_from_sets(sets)
    g_opts = plan_options(sets, cls, st.greedy)
    rc0, s0, st0 = price(sets, lay, np.zeros(lay.n_rows), reps, k=1, chunk=opt.price_chunk)
    st.seeds = [g_opts, stack_options(reps, rc0, s0, st0, np.isfinite(rc0))]
    st.lb = -np.inf
    st.warm_duals = np.zeros(lay.n_rows)
    st.best_lam = multipliers(sets, lay, st.warm_duals)
    st.warm_s = 0.0
    carried = carry_in(st) if st.carried is not None else None
    rounds = opt.warmup_max_rounds_big if len(reps) > opt.warmup_big_classes \
        else opt.warmup_max_rounds
    if carried is not None:
        # start near where the previous run ended: no Polyak warm-up (aimed at the greedy
        # plan, 30 rounds from the carried start never rose above it); on a budget with a
        # master, the smoothed dual from the carried multipliers in its place (the short
        # path runs it anyway, short_budget_dual)
        rounds = 0
        short = st.force_short or st.time_limit_s < short_path_s(sets, opt)
        if not short and opt.warmup_carried_share > 0:
            tw = time.perf_counter()
            sd = smoothed_ascent(sets, lay, opt.warmup_carried_share * st.time_limit_s,
                                 job_cost_scale(sets, st.greedy.totals["objective"]),
                                 start=carried, options=opt)
            st.seeds.append(sd.pool)
            if sd.bound > st.lb:
                st.lb, st.warm_duals = sd.bound, sd.duals
                st.best_lam = multipliers(sets, lay, sd.duals)
            st.warm_s += time.perf_counter() - tw
            st.say(f"smoothed dual from the carried multipliers: {sd.evaluations} "
                   f"evaluations, bound {st.lb:.3f} ({sd.seconds:.1f} s)")
        rcw, sw, tw_ = price(sets, lay, np.where(np.arange(lay.n_rows) < len(reps), 0.0,
                                                 st.warm_duals),
                             reps, k=opt.warmup_top_k, chunk=opt.price_chunk)
        st.seeds.append(stack_options(reps, rcw, sw, tw_, np.isfinite(rcw)))
    if opt.warmup_share > 0 and rounds > 0:
        tw = time.perf_counter()
        big = len(reps) > opt.warmup_big_classes
        wu = lagrangian_warmup(sets, lay, st.greedy.totals["objective"],
                               (opt.warmup_share_big if big else opt.warmup_share)
                               * st.time_limit_s,
                               max_iter=rounds, start=carried, options=opt)
        if wu.bound >= st.lb:        # the carried start's own bound is kept otherwise
            st.lb = wu.bound
            st.warm_duals = wu.duals
            st.best_lam = multipliers(sets, lay, wu.duals)
        st.warm_s = time.perf_counter() - tw
        st.seeds.append(wu.pool)
        rcw, sw, tw = price(sets, lay, np.where(np.arange(lay.n_rows) < len(reps), 0.0,
                                                wu.duals),
                            reps, k=opt.warmup_top_k, chunk=opt.price_chunk)
        st.seeds.append(stack_options(reps, rcw, sw, tw, np.isfinite(rcw)))
        st.say(f"Lagrangian warm-up: {wu.iterations} rounds, bound {wu.bound:.3f}, "
               f"{len(wu.pool)} options visited")
    # a budget too short for a master LP and a plan (10k x 16 x 48 in 20 s: one interior-point
    # master took 6 s and its duals bounded worse than the warm-up): the smoothed dual instead
    st.short = st.force_short or st.time_limit_s < short_path_s(sets, opt)
    st.priced_by = "warm-up"
    if st.short and st.left() > opt.smooth_plan_share * st.time_limit_s:
        short_budget_dual(st)
    elif st.short:
        st.note(f"short budget ({st.time_limit_s:.1f} s for {len(sets.placeable)} jobs): no "
                f"master LP, and no time for the smoothed dual ({max(st.left(), 0.0):.1f} s "
                "left after the warm-up); the bound is the warm-up's")


def carry_in(st: ColgenState) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The previous rolling run's multipliers and columns as this solve's start (issue 36).

    The columns (:func:`~carbonsched.plan.colgen.warm.carried_columns`) always join the
    master's seeds. The multipliers, shifted onto this run's slots
    (:func:`~carbonsched.plan.colgen.warm.carried_multipliers`), become the start of the
    warm-up and the first bound only if their Lagrangian is above the cold start's (zero
    multipliers, where a cold warm-up starts): the guard that keeps a warm start from
    steering the ascent below a cold one's first step. Sets ``carried_how`` (``warm: ...``
    or ``cold: <why>``, for ``solver.warm_start`` and the note) and, when used, ``lb``,
    ``warm_duals`` and ``best_lam``.

    Returns
    -------
    tuple of numpy.ndarray or None
        ``(lam_c, lam_p, lam_a)`` to start the warm-up from, or ``None`` (cold).
    """
    sets, lay, opt = st.sets, st.lay, st.opt
    lam, kept, why = carried_multipliers(sets, lay, st.carried)
    cols = carried_columns(sets, st.cls, st.carried)
    if len(cols):
        st.seeds.append(cols)
    n_t = len(sets.slot)
    what = (f"{len(cols)} of its {len(st.carried.job_id)} columns are options of this run"
            if len(st.carried.job_id) else "no columns")
    if why:
        st.carried_how = f"cold: the previous run's multipliers not used ({why}); {what}"
        st.note("multipliers: " + st.carried_how)
        return None
    v = lagrangian(sets, lay, *lam, chunk=opt.price_chunk)[0]
    zero = tuple(np.zeros_like(x) for x in lam)
    v0 = lagrangian(sets, lay, *zero, chunk=opt.price_chunk)[0]
    shift = f"{kept} of {n_t} slots kept, {n_t - kept} new ones from the nearest kept slot"
    if not v > v0:
        st.carried_how = (f"cold: the previous run's multipliers ({shift}) bound "
                          f"{v:.3f} kg here, not above the cold start's {v0:.3f} kg; {what}")
        st.note("multipliers: " + st.carried_how)
        return None
    st.lb, st.best_lam, st.warm_duals = v, lam, duals_from(lay, *lam)
    st.carried_how = (f"warm: the previous run's multipliers ({shift}; bound {v:.3f} kg "
                      f"at the start, cold start {v0:.3f} kg, the previous run "
                      f"{st.carried.bound:.3f} kg) and {what}")
    st.note("multipliers: " + st.carried_how)
    st.say("carried multipliers: " + st.carried_how)
    return lam


def short_budget_dual(st: ColgenState) -> None:
    """The smoothed Lagrangian dual in place of the master, from the warm-up's multipliers.

    It runs until :attr:`ColgenOptions.smooth_plan_share` of the budget is left; its bound and
    multipliers replace the warm-up's when higher.
    """
    sets, lay, opt = st.sets, st.lay, st.opt
    sd = smoothed_ascent(sets, lay, st.left() - opt.smooth_plan_share * st.time_limit_s,
                         job_cost_scale(sets, st.greedy.totals["objective"]),
                         start=st.best_lam, options=opt)
    st.warm_s += sd.seconds
    st.seeds.append(sd.pool)
    st.short_pool = sd.pool
    st.say(f"smoothed dual: {sd.evaluations} evaluations, bound {sd.bound:.3f} "
           f"({sd.seconds:.1f} s)")
    head = (f"short budget ({st.time_limit_s:.1f} s for {len(sets.placeable)} jobs over "
            f"{sets.pue.shape[1]} slots, less than {short_path_s(sets, opt):.1f} s: "
            f"{opt.smooth_s_per_job * 1000:g} ms per job per {SHORT_PATH_SLOTS} slots): "
            "no master LP; ")
    if sd.bound > st.lb:
        was = f"{st.lb:.3f} (warm-up) -> " if np.isfinite(st.lb) else ""
        st.note(head + f"the bound is the smoothed Lagrangian dual's, {was}"
                f"{sd.bound:.3f} kg ({sd.evaluations} L-BFGS-B evaluations, "
                f"{sd.seconds:.1f} s)")
        st.lb, st.warm_duals = sd.bound, sd.duals
        st.best_lam = multipliers(sets, lay, sd.duals)
        st.priced_by = "smoothed dual"
        st.earlier_duals = sd.earlier
        st.marked_duals = sd.marks
    else:
        st.note(head + f"the smoothed Lagrangian dual reached {sd.bound:.3f} kg "
                f"({sd.evaluations} L-BFGS-B evaluations, {sd.seconds:.1f} s), not above "
                f"the warm-up's {st.lb:.3f}, which is kept")


def build_master(st: ColgenState) -> None:
    """The restricted master LP in HiGHS: rows, the fixed columns and the seeded options.

    Sets ``pool``, ``h``, ``use_ipm``, ``n_fixed``, ``scale`` and the record's build time.
    """
    sets, lay, opt = st.sets, st.lay, st.opt
    reps = lay.reps
    st.pool = pool = np.unique(np.concatenate(st.seeds), axis=0)
    lo, hi = row_bounds(sets, lay)
    h = new_highs(st.threads, max(st.left(), 0.1))
    st.use_ipm = opt.master_solver == "ipm" or (opt.master_solver == "auto"
                                                and len(reps) > opt.ipm_min_classes)
    if st.use_ipm:
        h.setOptionValue("solver", "ipm")
        h.setOptionValue("run_crossover", "off")
        # the bound is the Lagrangian of whatever duals come out (valid for any), so the
        # interior point need not polish them: measured 59 iterations to 1e-5 where the
        # default 1e-8 had not finished after 90 s on the 10k × 16 × 48 master at load 0.6
        h.setOptionValue("ipm_optimality_tolerance", opt.ipm_tol)
    else:
        h.setOptionValue("simplex_strategy", opt.simplex_strategy)
    h.addRows(lay.n_rows, lo, hi, 0, np.zeros(0, np.int32), np.zeros(0, np.int32),
              np.zeros(0))
    fx = fixed_columns(sets, lay, np.arange(len(reps)), integer=False)
    st.n_fixed = len(fx["costs"])
    h.addCols(st.n_fixed, fx["costs"], fx["lower"], fx["upper"], len(fx["rows"]),
              fx["starts"], fx["rows"], fx["vals"])
    c, stt, ri, va = option_block(sets, lay, pool)
    h.addCols(len(pool), c, np.zeros(len(pool)), np.full(len(pool), INF), len(ri), stt, ri,
              va)
    st.h = h
    st.rec.build_seconds = time.perf_counter() - st.tb - st.warm_s   # sets, classes, master
    st.say(f"column generation: {len(sets.placeable)} jobs in {len(reps)} classes, "
           f"{len(pool)} initial columns")
    st.scale = max(float(np.abs(c).max(initial=1.0)), 1e-9)


def master_rounds(st: ColgenState) -> None:
    """Column generation: solve the master, price every option, add the negative ones.

    Stops when no option prices out or the gap to the Lagrangian bound is small
    (``converged``), when the master stops short of optimal, or when the time its
    predecessor took is not left before the plan's share (:attr:`ColgenOptions.round_growth`).
    """
    opt, h = st.opt, st.h
    st.ts = time.perf_counter()
    # the masters' share of the budget, the first one's too: cut, it leaves the warm-up's
    # bound (10k x 16 x 48 at load 0.6, seed 0, two solves sharing the 2 cores: 2754.9
    # against 3396.9 when it ends)
    share = max(st.cg_share, opt.cg_extend_share)
    st.tail = max((1 - share) * st.time_limit_s, tail_s(st.sets, opt.tail_s_per_job))
    n_imprecise = 0   # masters whose interior point ended imprecise, used all the same
    while not st.short:
        st.it += 1
        set_limit(h, st.left() - st.tail)
        tr = time.perf_counter()
        if st.it == 1 and opt.write_master:   # debugging aid
            h.writeModel(opt.write_master)
        run_highs(h)
        t_lp = time.perf_counter() - tr
        ms = h.getModelStatus()
        imprecise = (st.use_ipm and ms == highspy.HighsModelStatus.kUnknown
                     and usable_interior(h, opt.imprecise_primal_tol))
        if imprecise:
            n_imprecise += 1
            st.say(f"round {st.it}: the interior point ended imprecise (HiGHS status "
                   f"Unknown, primal infeasibility {h.getInfo().max_primal_infeasibility:.2g});"
                   " used as the master's solution")
        if ms != highspy.HighsModelStatus.kOptimal and not imprecise:
            _stopped_master(st, ms)
            break
        if not _next_round(st, imprecise, t_lp):
            break
    if n_imprecise:
        st.note(f"{n_imprecise} master LP(s) ended imprecise (HiGHS status Unknown: the "
                "interior point stopped short of its tolerance) and were used as solved: "
                "their duals price the columns and give Lagrangian bounds (valid for any "
                "non-negative multipliers), their values guide the rounding")


def _stopped_master(st: ColgenState, ms: highspy.HighsModelStatus) -> None:
    """Note a master stopped short of optimal, and bound with the duals it returned."""
    sets, lay, h = st.sets, st.lay, st.h
    st.note(f"master LP stopped: {h.modelStatusToString(ms)}")
    # the interrupted interior point's last iterate still gives multipliers (the
    # Lagrangian bound is valid for any non-negative ones)
    # (HiGHS flags them not valid; after an earlier master they may be its duals)
    cut = np.asarray(h.getSolution().row_dual)
    if len(cut) == lay.n_rows and np.isfinite(cut).all() and np.abs(cut).any():
        lam = multipliers(sets, lay, pricing_duals(sets, lay, cut))
        v = lagrangian(sets, lay, *lam, chunk=st.opt.price_chunk)[0]
        st.say(f"round {st.it}: bound {v:.3f} from the row duals HiGHS returned for the "
               "stopped master")
        if v > st.lb:
            st.lb, st.best_lam = v, lam
            st.note(f"bound {v:.3f} from the row duals HiGHS returned for the stopped master "
                    "(flagged not valid; any non-negative multipliers give a valid bound)")


def _next_round(st: ColgenState, imprecise: bool, t_lp: float) -> bool:
    """Take a solved master: bound, price, add columns; whether another round follows."""
    sets, lay, opt, h = st.sets, st.lay, st.opt, st.h
    reps = lay.reps
    z = h.getInfo().objective_function_value
    sol = h.getSolution()
    raw = np.asarray(sol.row_dual)
    duals = pricing_duals(sets, lay, raw)
    # an imprecise end is no vertex even with the crossover asked for
    st.good = MasterSolution(np.asarray(sol.col_value)[st.n_fixed: st.n_fixed + len(st.pool)],
                             duals, raw, len(st.pool), bool(st.vertex) and not imprecise)
    st.z_good = z
    tr = time.perf_counter()
    for cand in (raw, duals) if lay.flow else (raw,):
        lam = multipliers(sets, lay, cand)
        v = lagrangian(sets, lay, *lam, chunk=opt.price_chunk)[0]
        if v > st.lb:
            st.lb, st.best_lam = v, lam
    rc, bs, bt = price(sets, lay, duals, reps, k=opt.columns_per_round, chunk=opt.price_chunk)
    t_pr = time.perf_counter() - tr
    neg = rc < -opt.rc_tol * st.scale
    st.say(f"round {st.it}: LP {z:.3f}, bound {st.lb:.3f}, {int(neg.sum())} new columns, "
           f"pool {len(st.pool)} (LP {t_lp:.1f} s, pricing {t_pr:.1f} s)")
    if not neg.any() or z - st.lb <= max(opt.cg_rel_tol, opt.cg_gap_share * st.mip_gap) * abs(z):
        st.converged = True
        return False
    if (st.use_ipm and not st.vertex and z - st.lb <= opt.crossover_at * abs(z)
            and crossover_pays(lay, raw, st.scale, opt)[0]):
        # the next round is likely the last: let it end at a vertex
        h.setOptionValue("run_crossover", "on")
        st.vertex = True
    new = stack_options(reps, rc, bs, bt, neg)
    c, stt, ri, va = option_block(sets, lay, new)
    h.addCols(len(new), c, np.zeros(len(new)), np.full(len(new), INF), len(ri), stt, ri, va)
    st.pool = np.concatenate([st.pool, new])
    # a master cut by the time limit yields no duals, and the plan is rounded from the
    # last one solved: a further master is started only if the time its predecessor took
    # is left before the plan's least share of the budget (measured on 10k x 16 x 48 at
    # load 0.3, seed 2: the second master improved the plan from 2212.2 to 2114.3)
    if st.left() - opt.round_growth * t_lp <= st.tail:
        st.note("column generation stopped by the time budget; the bound is the best "
                "Lagrangian bound reached")
        return False
    return True


def refine_bound(st: ColgenState) -> None:
    """Lift the bound when column generation stopped before converging.

    By :attr:`ColgenOptions.refine_method`: the smoothed dual from the last master's duals
    (10k x 16 x 48 at load 0.8, seed 1, one master in a 24 s budget: 3,388.4 -> 7,538.1 kg in
    2.8 s; off-line, 7,680.8 in 6 s; LP 7,786.1; 60 Polyak steps reached 3,901.0), or Polyak
    steps from the best multipliers towards the last master's LP value, an upper bound on the
    dual optimum (10k x 16 x 48 at load 0.6: 3305.6 to 3396.6 kg, LP 3408.9, in 60 steps,
    3-4 s, where another interior-point master takes 20 s). Sets ``refined_lam`` when the
    bound rose, and the record's bound.
    """
    sets, lay, opt = st.sets, st.lay, st.opt
    refine_s = min(opt.refine_share * st.time_limit_s,
                   st.left() - max(opt.refine_keep_share * st.time_limit_s,
                                   tail_s(sets, opt.tail_s_per_job)))
    st.refined_lam = None
    z_good = st.z_good
    if (not st.converged and st.good is not None and opt.refine_rounds > 0 and refine_s > 0
            and z_good - st.lb > max(opt.cg_rel_tol, opt.cg_gap_share * st.mip_gap)
            * abs(z_good)):
        tr = time.perf_counter()
        if opt.refine_method == "smoothed":
            sd = smoothed_ascent(sets, lay, refine_s, job_cost_scale(sets, z_good),
                                 start=multipliers(sets, lay, st.good.duals), options=opt)
            ref_bound, ref_duals = sd.bound, sd.duals
            how = (f"the smoothed dual from the last master's duals ({sd.evaluations} "
                   "L-BFGS-B evaluations)")
        else:
            ref = lagrangian_warmup(sets, lay, z_good, refine_s, max_iter=opt.refine_rounds,
                                    start=st.best_lam, options=opt)
            ref_bound, ref_duals = ref.bound, ref.duals
            how = f"{ref.iterations} subgradient steps"
        if ref_bound > st.lb:
            st.note(f"bound refined from {st.lb:.3f} to {ref_bound:.3f} by {how} (column "
                    "generation had not converged)")
            st.lb, st.best_lam = ref_bound, multipliers(sets, lay, ref_duals)
            st.refined_lam = st.best_lam
        st.say(f"bound refined to {st.lb:.3f} by {how} ({time.perf_counter() - tr:.1f} s)")
    st.rec.bound = st.lb if np.isfinite(st.lb) else None


def final_crossover(st: ColgenState) -> None:
    """Cross the last interior master over to a vertex when it pays, and fix the duals.

    Runs with :attr:`ColgenOptions.crossover_min_left` of the budget left and when a vertex
    would leave no more fractional classes than the repair takes (:func:`crossover_pays`).
    Then sets ``no_master``, ``xo``, ``duals``, ``row_duals``, trims ``pool`` to the last
    master's columns, and the prices of the plan (``lam_c``, ``rank_kw``).
    """
    sets, lay, opt, h = st.sets, st.lay, st.opt, st.h
    good = st.good
    final_x = (st.use_ipm and good is not None and not good.vertex
               and st.left() > opt.crossover_min_left * st.time_limit_s)
    pays, n_bind = crossover_pays(lay, good.raw, st.scale, opt) if final_x else (True, 0)
    if final_x and not pays:
        # a vertex would leave more fractional classes than the repair MIP takes, and the
        # crossover costs as long as a master or longer: on 10k x 16 x 48 at load 0.8, seed
        # 4, 22.7 s of 60 for 847 fractional classes, the plan 9.5 % above the bound where
        # the interior LP's rounding and the passes reached 2.2 %
        st.note(f"crossover to a vertex skipped: {n_bind} binding capacity, power and "
                f"absorption rows at the last master's LP solution, more than the "
                f"{opt.repair_max_classes} classes a repair MIP takes")
        st.say(f"crossover skipped: {n_bind} binding rows (the repair takes "
               f"{opt.repair_max_classes} classes)")
    elif final_x:
        # a vertex (basic) solution has few fractional values; interior ones have many
        tr = time.perf_counter()
        h.setOptionValue("run_crossover", "on")
        set_limit(h, st.left() - opt.repair_share * st.time_limit_s)
        run_highs(h)
        ok = (h.getModelStatus() == highspy.HighsModelStatus.kOptimal
              and h.getInfo().basis_validity == 1)
        st.say(f"crossover to a vertex: {time.perf_counter() - tr:.1f} s, "
               f"{h.modelStatusToString(h.getModelStatus())}")
        if ok:
            sol = h.getSolution()
            raw = np.asarray(sol.row_dual)
            good = MasterSolution(
                np.asarray(sol.col_value)[st.n_fixed: st.n_fixed + len(st.pool)],
                pricing_duals(sets, lay, raw), raw, len(st.pool), True)
    st.no_master = good is None
    if st.no_master:   # no master LP solved in time: price with the warm-up's multipliers
        good = MasterSolution(np.zeros(len(st.pool)), st.warm_duals, st.warm_duals,
                              len(st.pool), False)
    st.good = good
    st.xo, st.duals, st.row_duals = good.values, good.duals, good.raw
    st.pool = st.pool[:good.n_pool]
    st.lam_c, lam_p, lam_a = multipliers(sets, lay, st.duals)
    st.rank_kw = kw_slot_price(sets, lam_p, lam_a)
