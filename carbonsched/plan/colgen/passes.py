"""Fix-and-optimise passes over the best plan: by GPU type and by site."""

from __future__ import annotations

import time

import numpy as np

from carbonsched.plan.colgen.budget import plan_overhead_s
from carbonsched.plan.colgen.classes import Classes, plan_options
from carbonsched.plan.colgen.layout import Layout
from carbonsched.plan.colgen.options import ColgenOptions
from carbonsched.plan.colgen.pricing import candidate_options
from carbonsched.plan.colgen.repair_mip import note_start_misvalued, repair
from carbonsched.plan.colgen.state import ColgenState
from carbonsched.plan.colgen.status import add_note
from carbonsched.plan.model import cover_index
from carbonsched.plan.result import PlanResult, PlanStatus, SolverRecord, build_plan_result
from carbonsched.plan.sets import PlanSets, enumerate_options, option_costs

SITE_PASS_MIN_S = 1.0
"""Least budget with which :func:`site_pass` tries a site: below it the pass ends at once. [s]"""

TYPE_PASS_MIN_S = 0.5
"""Least time :func:`type_pass` gives one GPU type's MIP: a budget below it runs none. [s]"""


def type_pass(sets: PlanSets, lay: Layout, cls: Classes, duals: np.ndarray,
              lp_opts: np.ndarray, extra_opts: np.ndarray, plan: PlanResult, threads: int,
              seconds: float, mip_gap: float, say, rec: SolverRecord,
              repair_follows: bool = False, options: ColgenOptions | None = None
              ) -> PlanResult | None:
    """Fix-and-optimise by GPU type: re-plan one type's classes with the rest fixed.

    Types with the fewest options go first; each MIP (:func:`repair`) frees every class of the type
    with all its options (or, above :attr:`ColgenOptions.type_pass_max_options`, the generated,
    split-bound and best-priced ones), keeps every other class where ``plan`` put it, and starts
    from ``plan``, so a pass never worsens the plan. Unless a repair MIP over every class follows
    (``repair_follows``, small instances), a type whose work ``plan`` leaves out first gets the MIP
    over its own classes alone (every option, all other types fixed: on 10k × 16 × 48 at load 0.6
    the 238 V100M16 classes, 8,373 options, proved optimal in 4.5 s and placed 16 of 17 left-out
    GPU-hours, where the MIP freeing 250 more classes got nowhere in its 1–3 s), then, if work is
    still left out, the MIP that also frees the classes running on its sites; and the types without
    left-out work go largest first. With a repair to follow, the order is the one measured best on
    1k × 16 × 48 at load 0.6 (the wide MIP per left-out type, then the types by increasing options).
    The few-GPU types are where priced greedy and LP rounding leave gangs out (Helber & Sahling, "A
    fix-and-optimize approach for the multi-level capacitated lot sizing problem", Int. J.
    Production Economics 123, 2010, doi:10.1016/j.ijpe.2009.08.022).

    Parameters
    ----------
    sets, lay, cls
        Compiled sets, the master's row layout and the job classes.
    duals
        ``(R,)`` master row duals in the covering form, to price each class's best options.
    lp_opts, extra_opts
        ``(O, 3)`` options of the LP solution's support and of the split bound's MIPs.
    plan
        The plan to improve.
    threads
        HiGHS threads.
    seconds
        Time for the whole pass. [s]
    mip_gap
        Relative gap at which a MIP may stop. [-]
    say
        Callable taking a one-line progress message.
    rec
        Solver record; a note names a type re-planned alone.
    repair_follows
        Whether a repair MIP over every class follows.
    options
        :attr:`ColgenOptions.type_pass_first_share`,
        :attr:`ColgenOptions.type_pass_neighbours`,
        :attr:`ColgenOptions.type_pass_max_options`, :attr:`ColgenOptions.repair_top_k`,
        :attr:`ColgenOptions.own_pass_overhead_s` and the repair's settings (defaults when
        None).

    Returns
    -------
    PlanResult or None
        The improved plan, or None if no pass improved ``plan``.
    """
    opt = ColgenOptions() if options is None else options
    t_end = time.perf_counter() + seconds
    overhead = plan_overhead_s(sets, opt.own_pass_overhead_s)
    reps = cls.rep
    g_of_c = sets.job_gtype[reps]
    n_t = len(sets.slot)
    n_win = np.clip(sets.job_last[reps] - sets.job_first[reps] + 1, 0, n_t)
    n_opt = sets.job_sites[reps].sum(axis=1) * n_win
    types = np.unique(g_of_c)
    types = types[np.argsort([n_opt[g_of_c == g].sum() for g in types], kind="stable")]
    # types with work left out first (an unplaced GPU-hour costs ten dirtiest ones), with
    # most of the time; then the others
    jpos = {jb.id: k for k, jb in enumerate(sets.problem.jobs)}
    out_jobs = _left_out(sets, cls, plan, jpos)
    out_g = np.zeros(len(sets.gpu_type))
    for g, ks in out_jobs.items():
        out_g[g] = float((sets.job_gpus[ks] * sets.job_dur[ks]).sum())
    first = [g for g in types if out_g[g] > 0]
    first.sort(key=lambda g: -out_g[g])
    rest = [g for g in types if out_g[g] == 0]
    if not repair_follows:
        # without a repair MIP after the pass, the types with the most options (where most
        # of the emissions are) go first among the rest: measured on 10k × 16 × 48 at load
        # 0.3, the three smallest types' MIPs gained nothing and the largest's (G2, 2 s)
        # 2129.0 -> 2109.2 kg, when it got any time
        rest = rest[::-1]
    types = np.array(first + rest, dtype=np.int64)
    t_first = time.perf_counter() + opt.type_pass_first_share * seconds if first else 0.0
    best = plan
    start_obj = plan.totals["objective"]
    # a type with work left out gets first the exact MIP over its own classes alone (all
    # their options, every other type fixed), then, if work is still left out and time
    # remains, the MIP that frees its sites' busy classes of other types too
    passes = [(k, g, own_only) for k, g in enumerate(types)
              for own_only in ((True, False) if k < len(first) and not repair_follows
                               else (False,))]
    type_end = 0.0
    for k, g, own_only in passes:
        left = t_end - time.perf_counter()
        if k < len(first):
            if own_only:
                # an even split of the types' time, but when that is too short for a MIP
                # the types that leave out the most work take it
                type_end = time.perf_counter() + max(
                    (t_first - time.perf_counter()) / (len(first) - k),
                    min(left, 1.0 + overhead))
                share = type_end - time.perf_counter() - overhead
            elif repair_follows:
                share = (t_first - time.perf_counter()) / (len(first) - k)
            else:
                share = type_end - time.perf_counter() - overhead
                if share < 1.0 or g not in _left_out(sets, cls, best, jpos):
                    continue
        elif repair_follows:
            share = left / (len(types) - k) if k < len(types) - 1 else left
        else:
            # the largest type first, with all that is left (HiGHS stops when it proves
            # its MIP); the MIP's build and the plan overrun its limit
            share = left - overhead
        if share < TYPE_PASS_MIN_S:
            continue
        own = np.flatnonzero(g_of_c == g).astype(np.int64)
        rep_c = own
        po = plan_options(sets, cls, best)
        if k < len(first) and len(po) and not own_only:
            # the type's work is left out: free, too, the classes the plan runs on the sites
            # that have the type in the hours the left-out jobs could run (their power is
            # what keeps the gangs out), most overlapping first
            near = _busy_neighbours(sets, cls, po, own, out_jobs[g], int(g),
                                    opt.type_pass_neighbours)
            rep_c = np.union1d(own, near).astype(np.int64)
        fix_o, fix_n, opts = _type_options(sets, lay, cls, duals, lp_opts, extra_opts, po, own,
                                           rep_c, n_opt[own].sum() <= opt.type_pass_max_options,
                                           opt)
        so: dict = {}
        out = repair(sets, lay, cls, fix_o.reshape(-1, 3), fix_n.astype(np.int64), rep_c,
                     lay.mult[rep_c], opts, threads, share, mip_gap, say, start=best,
                     options=opt, status_out=so)
        note_start_misvalued(rec, so, "fix-and-optimise by GPU type")
        if out is None:
            continue
        cand = build_plan_result(sets, out[0], out[1], PlanStatus.FEASIBLE, rec)
        if cand.totals["objective"] < best.totals["objective"] - 1e-9:
            say(f"type {sets.gpu_type[g]}{' alone' if own_only else ''}: "
                f"{best.totals['objective']:.3f} -> {cand.totals['objective']:.3f}")
            if own_only:
                add_note(rec, f"{sets.gpu_type[g]} re-planned alone (its own MIP, every other "
                      f"type fixed): {best.totals['objective']:.3f} -> "
                      f"{cand.totals['objective']:.3f}")
            best = cand
    return best if best.totals["objective"] < start_obj - 1e-9 else None


def site_pass(sets: PlanSets, lay: Layout, cls: Classes, duals: np.ndarray,
              lp_opts: np.ndarray, lp_site_kg: np.ndarray, plan: PlanResult, threads: int,
              seconds: float, mip_gap: float, say, rec: SolverRecord,
              options: ColgenOptions | None = None) -> PlanResult | None:
    """Large-neighbourhood search by site: re-plan everything one site runs, the rest fixed.

    Site power (IT and facility caps) binds in most site-hours of a loaded fleet (10k × 16 × 48 at
    load 0.6: 591 of 768 power rows have a non-zero dual), so it couples every GPU type at a site: a
    type re-planned alone (:func:`type_pass`) cannot move the other types' work out of the way, and
    measured from the same start it stalled 1.7 % above the LP (3,466.8 kg after 45 s against the
    LP's 3,408.9). Here a neighbourhood is every class with a placement at one site (freed with all
    its jobs, wherever the plan put them), plus every class with work left out, up to
    :attr:`ColgenOptions.site_pass_max_left_out` (restricting those to the ones that may run at the
    site gave 3,560.6 kg against 3,452.4 on seed 0: the left-out V100 gangs stayed out); its MIP
    (:func:`repair`) gets those classes' generated and best-priced options, keeps every other class
    where ``plan`` put it and starts from ``plan``, so a step never worsens the plan. Sites go in
    decreasing order of their excess over the LP, the plan's grid emissions there less the LP
    solution's (``lp_site_kg``); a site whose MIP proved its neighbourhood optimal is not tried
    again until another site's step changes the plan. Measured from the same start in 15 s: 3,452.4
    kg (seed 0) and 3,477.4 kg (seed 4) against the type pass's 3,484.6 and 3,502.7
    (fix-and-optimise by neighbourhoods of one resource: Shaw, "Using constraint programming and
    local search methods to solve vehicle routing problems", CP 1998, doi:10.1007/3-540-49481-2_30;
    Pisinger & Ropke, "Large neighborhood search", Handbook of Metaheuristics, 2010,
    doi:10.1007/978-1-4419-1665-5_13).

    Parameters
    ----------
    sets, lay, cls
        Compiled sets, the master's row layout and the job classes.
    duals
        ``(R,)`` master row duals in the covering form (:func:`pricing_duals`), to price each
        class's best options. [kg per row unit]
    lp_opts
        ``(O, 3)`` ``(representative, site, start)`` positions of the LP solution's support
        (candidate options of every class).
    lp_site_kg
        ``(S,)`` grid emissions of the LP solution per site, surplus not counted
        (:func:`~carbonsched.plan.sets.option_costs` × LP values). [kg]
    plan
        The plan to improve (every step starts from the best so far).
    threads
        HiGHS threads.
    seconds
        Time for the whole pass; each site MIP gets at most :attr:`ColgenOptions.site_pass_max_s`,
        less the largest overrun a step has shown (model build, HiGHS past its limit, the plan's
        build), at least :func:`plan_overhead_s`. [s]
    mip_gap
        Relative gap at which a site MIP may stop. [-]
    say
        Callable taking a one-line progress message.
    rec
        Solver record; a note names the pass when it improves the plan.
    options
        :attr:`ColgenOptions.site_pass_max_left_out`, :attr:`ColgenOptions.site_pass_max_s`,
        :attr:`ColgenOptions.repair_top_k`, :attr:`ColgenOptions.own_pass_overhead_s` and the
        repair's settings (defaults when None).

    Returns
    -------
    PlanResult or None
        The improved plan, or None if no step improved ``plan``.
    """
    opt = ColgenOptions() if options is None else options
    t_end = time.perf_counter() + seconds
    reps = cls.rep
    n_s = len(sets.site)
    best = plan
    start_obj = plan.totals["objective"]
    changes = 0
    settled = np.full(n_s, -1)        # the change count at which a site's MIP was proven
    tried = np.full(n_s, -1)          # the change count at which a site was last tried
    steps = 0
    # a step's time beyond its MIP's limit, largest seen
    reserve = plan_overhead_s(sets, opt.own_pass_overhead_s)
    while True:
        if t_end - time.perf_counter() < SITE_PASS_MIN_S:
            break
        po = plan_options(sets, cls, best)
        excess = np.bincount(po[:, 1], weights=option_costs(sets, po), minlength=n_s) \
            - lp_site_kg
        open_ = np.flatnonzero((settled != changes) & (tried != changes))
        if len(open_) == 0:
            break
        site = int(open_[np.argmax(excess[open_])])
        tried[site] = changes
        placed = np.bincount(cls.of_job[po[:, 0]], minlength=len(reps))
        short = np.flatnonzero(placed < lay.mult)
        if len(short) > opt.site_pass_max_left_out:
            # those that may run at the site first, then the most expensive to leave out
            key = np.lexsort((-sets.unplaced_cost[reps[short]] * (lay.mult - placed)[short],
                              ~sets.job_sites[reps[short], site]))
            short = short[key[:opt.site_pass_max_left_out]]
        rep_c = np.union1d(cls.of_job[po[po[:, 1] == site, 0]], short).astype(np.int64)
        if len(rep_c) == 0:
            settled[site] = changes
            continue
        in_rep = np.zeros(len(reps), dtype=bool)
        in_rep[rep_c] = True
        outside = ~in_rep[cls.of_job[po[:, 0]]]
        fix_o, fix_n = np.unique(po[outside], axis=0, return_counts=True)
        opts = np.unique(np.concatenate([
            candidate_options(sets, lay, duals, reps[rep_c], lp_opts, opt.repair_top_k,
                              chunk=opt.price_chunk),
            po[~outside]]), axis=0)
        limit = min(opt.site_pass_max_s, t_end - time.perf_counter() - reserve)
        if limit < 0.5:
            break
        ts = time.perf_counter()
        so = {}
        out = repair(sets, lay, cls, fix_o.reshape(-1, 3), fix_n.astype(np.int64), rep_c,
                     lay.mult[rep_c], opts, threads, limit, mip_gap, say, start=best,
                     options=opt, status_out=so)
        note_start_misvalued(rec, so, "site by site")
        cand = None if out is None else build_plan_result(sets, out[0], out[1],
                                                          PlanStatus.FEASIBLE, rec)
        reserve = max(reserve, time.perf_counter() - ts - limit)
        steps += 1
        if cand is None:
            continue
        if cand.totals["objective"] < best.totals["objective"] - 1e-9:
            say(f"site {sets.site[site]}: {best.totals['objective']:.3f} -> "
                f"{cand.totals['objective']:.3f}")
            best = cand
            changes += 1
        if out[2]:
            settled[site] = changes
    if best.totals["objective"] < start_obj - 1e-9:
        add_note(rec, f"re-planned site by site ({steps} site MIPs, each freeing the classes a "
              f"site runs and the left-out work): {start_obj:.3f} -> "
              f"{best.totals['objective']:.3f}")
        return best
    return None


def _left_out(sets: PlanSets, cls: Classes, plan: PlanResult,
              jpos: dict[str, int]) -> dict[int, list[int]]:
    """The placeable jobs ``plan`` leaves out (positions), by GPU type."""
    out: dict[int, list[int]] = {}
    for u in plan.unplaced:
        k = jpos[u.job_id]
        if cls.of_job[k] >= 0:
            out.setdefault(int(sets.job_gtype[k]), []).append(k)
    return out


def _pass_fits(st: ColgenState, label: str, budget_s: float, min_s: float,
               skipped: list[str]) -> bool:
    """Whether a pass can run a MIP: more than ``step_min_left_s`` left and ``min_s`` for it.

    A MIP keeps :attr:`ColgenOptions.finish_s` (HiGHS overruns its limit by up to a second at
    10k jobs) and needs :attr:`ColgenOptions.step_margin_s` past it
    (:attr:`ColgenOptions.step_min_left_s`, the rule the split bound and the repair start
    on), and the pass's own budget ``budget_s`` must reach its least useful time ``min_s``
    [s] (:data:`SITE_PASS_MIN_S`, :data:`TYPE_PASS_MIN_S`). A pass that does not fit is
    appended to ``skipped`` (``label``), which :func:`run_passes` names in the solve's note.
    """
    if st.left() > st.opt.step_min_left_s and budget_s >= min_s:
        return True
    skipped.append(label)
    return False


def run_passes(st: ColgenState) -> None:
    """The site pass and the type pass over the best plan so far, as the time allows.

    Without a repair MIP to follow (more fractional classes than
    :attr:`ColgenOptions.repair_max_classes`), most of what is left goes to the site-by-site
    search (power binds per site, across GPU types, :attr:`ColgenOptions.site_pass_share`)
    and the type pass takes most of the rest, the split bound what remains; with a repair to
    follow, the type pass gets :attr:`ColgenOptions.type_pass_share` of the budget (at most
    0.6 of what is left, and at most what is left less :attr:`ColgenOptions.finish_s`).
    Improved plans are appended to ``st.cands``.
    """
    sets, lay, cls, opt = st.sets, st.lay, st.cls, st.opt
    pool, xo = st.pool, st.xo
    # incumbent 3: fix-and-optimise by GPU type, few-GPU types first
    n_frac = int((st.residual > 0).sum())
    will_repair = 0 < n_frac <= opt.repair_max_classes or (
        len(lay.reps) <= opt.repair_all_classes and n_frac > 0)
    skipped: list[str] = []
    site_s = opt.site_pass_share * 0.8 * (st.left() - opt.finish_s)
    if (opt.site_pass_share > 0 and not will_repair
            and _pass_fits(st, "site-by-site pass", site_s, SITE_PASS_MIN_S, skipped)):
        _, best_plan = st.best()
        lp_site_kg = np.bincount(pool[:, 1], weights=option_costs(sets, pool) * xo,
                                 minlength=len(sets.site))
        improved = site_pass(sets, lay, cls, st.duals, pool[xo > opt.integral_tol],
                             lp_site_kg, best_plan, st.threads, site_s, st.mip_gap, st.say,
                             st.rec, options=opt)
        if improved is not None:
            st.cands.append(("site by site", improved))
    # without a repair to follow (too many fractional classes) the pass takes most of what is
    # left, the split bound the rest; either way the MIP leaves finish_s (HiGHS overruns its
    # limit by up to a second) for the plan that follows
    tp_s = min(opt.type_pass_share * st.time_limit_s, 0.6 * st.left(),
               st.left() - opt.finish_s) if will_repair \
        else 0.8 * (st.left() - opt.finish_s)
    if opt.type_pass_share > 0 and _pass_fits(st, "fix-and-optimise by GPU type", tp_s,
                                              TYPE_PASS_MIN_S, skipped):
        _, best_plan = st.best()
        improved = type_pass(sets, lay, cls, st.duals, pool[xo > opt.integral_tol],
                             st.split_opts, best_plan, st.threads, tp_s, st.mip_gap, st.say,
                             st.rec, repair_follows=will_repair, options=opt)
        if improved is not None:
            st.cands.append(("fix-and-optimise by GPU type", improved))
    if skipped:
        st.note(f"{' and '.join(skipped)} skipped for time ({max(st.left(), 0.0):.2f} s of the "
                "limit left: too little for a MIP pass)")


def _busy_neighbours(sets: PlanSets, cls: Classes, po: np.ndarray, own: np.ndarray,
                     out_jobs: list[int], g: int, limit: int) -> np.ndarray:
    """Classes of other types running where and when GPU type ``g``'s left-out jobs could.

    Parameters
    ----------
    sets, cls
        Compiled sets and the job classes.
    po
        ``(P, 3)`` ``(representative, site, start)`` placements of the plan.
    own
        Positions of the type's own classes (never returned).
    out_jobs
        Positions of the type's left-out jobs.
    g
        The GPU type's position.
    limit
        Most classes returned (:attr:`ColgenOptions.type_pass_neighbours`).

    Returns
    -------
    numpy.ndarray
        Class positions, the most overlapping cells first.
    """
    hot = np.zeros((len(sets.site), len(sets.slot)), dtype=bool)
    for j in out_jobs:
        hot[:, sets.job_first[j]: sets.job_last[j] + sets.job_dur[j]] = True
    hot &= (sets.gpu_count[:, g] > 0)[:, None]
    cv = cover_index(sets, po)
    c_hit = cls.of_job[po[cv.option[hot[cv.site, cv.slot]], 0]]
    score = np.bincount(c_hit, minlength=len(cls.rep))
    score[own] = 0
    near = np.flatnonzero(score > 0)
    return near[np.argsort(-score[near], kind="stable")][:limit]


def _type_options(sets: PlanSets, lay: Layout, cls: Classes, duals: np.ndarray,
                  lp_opts: np.ndarray, extra_opts: np.ndarray, po: np.ndarray,
                  own: np.ndarray, rep_c: np.ndarray, every: bool, opt: ColgenOptions
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The fixed placements and the candidate options of one type pass MIP.

    ``every``: the type's own classes get all their options (else the generated and
    best-priced ones); the freed classes of other types get the generated and best-priced
    ones, every class its ``extra_opts`` and its placements in ``po``.

    Returns
    -------
    (fixed options, fixed counts, options)
        ``po``'s placements outside ``rep_c`` as unique options and their counts, and the
        ``(O, 3)`` options of the MIP.
    """
    reps = cls.rep
    in_rep = np.zeros(len(reps), dtype=bool)
    in_rep[rep_c] = True
    outside = ~in_rep[cls.of_job[po[:, 0]]] if len(po) else np.zeros(0, dtype=bool)
    fix_o, fix_n = np.unique(po[outside], axis=0, return_counts=True)
    if every:
        opts = enumerate_options(sets, reps[own])
    else:
        opts = candidate_options(sets, lay, duals, reps[own], lp_opts, opt.repair_top_k,
                                 chunk=opt.price_chunk)
    if len(rep_c) > len(own):
        opts = np.concatenate([opts, candidate_options(
            sets, lay, duals, reps[np.setdiff1d(rep_c, own)], lp_opts, opt.repair_top_k,
            chunk=opt.price_chunk)])
    if len(extra_opts):
        opts = np.concatenate([opts, extra_opts[in_rep[cls.of_job[extra_opts[:, 0]]]]])
    opts = np.unique(np.concatenate([opts, po[~outside]]), axis=0)
    return fix_o, fix_n, opts
