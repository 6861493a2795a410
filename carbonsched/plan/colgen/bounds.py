"""Bounds stronger than the LP: the GPU-type split (capacity kept) and the site split."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from carbonsched.plan.colgen.classes import count_options
from carbonsched.plan.colgen.grid import inference_site_cost, kw_slot_price
from carbonsched.plan.colgen.lagrangian_dual import duals_from, lagrangian, multipliers
from carbonsched.plan.colgen.layout import INF, Layout
from carbonsched.plan.colgen.options import ColgenOptions
from carbonsched.plan.colgen.pricing import price
from carbonsched.plan.colgen.solver import new_highs
from carbonsched.plan.colgen.state import ColgenState
from carbonsched.plan.highs import mip_dual_bound, run_highs
from carbonsched.plan.model import cover_index
from carbonsched.plan.sets import PlanSets, enumerate_options, option_costs


@dataclass
class SplitBound:
    """Outcome of :func:`split_bound`."""

    bound: float
    lagrangian: float
    per_type: dict
    """By GPU type: ``(lagrangian term, proven term, options in the MIP, MIP status)``."""
    options: np.ndarray
    """``(O, 3)`` ``(representative, site, start)`` of the subproblem MIPs' solutions."""
    counts: np.ndarray
    columns: np.ndarray | None = None
    """Every option the subproblem MIPs had (reduced cost below their thresholds)."""


def split_bound(sets: PlanSets, lay: Layout, lam_c: np.ndarray, lam_p: np.ndarray,
                lam_a: np.ndarray, upper: float, seconds: float, threads: int,
                say=None, options: ColgenOptions | None = None) -> SplitBound:
    r"""Lagrangian bound with power and absorption relaxed and GPU capacity kept.

    With multipliers :math:`\lambda^P, \lambda^A \ge 0` on the power and absorption rows the problem
    separates by GPU type :math:`g` (capacity rows are per type, inference uses one type): :math:`z
    \ge \sum_g V_g(\lambda) + \kappa(\lambda)`, where :math:`V_g` is the type's own scheduling MIP
    (assignment, inference, capacity) with per-kW prices :math:`k_{st} + \lambda^P_{st} -
    \mathrm{PUE}_{st}\lambda^A_{st}` and :math:`\kappa` the absorption and :math:`-\lambda^P \bar P`
    terms. Each :math:`V_g` is bounded below by its capacity-relaxed Lagrangian
    :math:`L_g(\lambda^C)` (the classic bound, summing to :func:`lagrangian`); and since every
    solution of the type's problem has value at least :math:`L_g + \sum_o \bar c_o x_o` with
    non-negative reduced costs :math:`\bar c_o`, a solution below :math:`L_g + \Delta` uses only
    options with :math:`\bar c_o < \Delta`. Hence :math:`V_g \ge \min(L_g + \Delta, B_g)`,
    :math:`B_g` the dual bound of the MIP over those options — valid for any :math:`\Delta`, which
    is lowered until the MIP has at most :attr:`ColgenOptions.split_mip_max` options (reduced-cost
    fixing; Nemhauser & Wolsey, *Integer and Combinatorial Optimization*, Wiley 1988, §II.5; for the
    decomposition by resource, Guignard, "Lagrangean relaxation", TOP 11, 2003,
    doi:10.1007/BF02579036).

    The capacity rows are where few-GPU types lose integrality (a gang of 4 cannot use three
    free GPUs), which the LP and :func:`lagrangian` cannot see.

    Parameters
    ----------
    lam_c, lam_p, lam_a
        Non-negative multipliers of the capacity ``(S, T, G)``, power and absorption
        ``(S, T)`` rows (any values give a valid bound).
    upper
        Objective of the best plan known; no threshold above ``upper − L`` is needed. [kg]
    seconds
        Time for all subproblem MIPs. [s]
    threads
        HiGHS threads.
    say
        Optional callable taking one-line progress messages.
    options
        :attr:`ColgenOptions.split_enum_max`, :attr:`ColgenOptions.split_mip_max` and
        :attr:`ColgenOptions.split_min_delta` (defaults when None).

    Returns
    -------
    SplitBound
        The bound [kg], the Lagrangian it starts from [kg], the terms by GPU type and the
        subproblem MIPs' solutions and options.
    """
    opt = ColgenOptions() if options is None else options
    t_end = time.perf_counter() + seconds
    n_s, n_t = sets.pue.shape
    n_g = len(sets.gpu_type)
    reps, mult = lay.reps, lay.mult
    value, _, _, _, a_val = lagrangian(sets, lay, lam_c, lam_p, lam_a,
                                       chunk=opt.price_chunk)
    # per-class and per-demand terms of the Lagrangian, to split it by type
    pen = sets.unplaced_cost[reps].astype(float)    # penalty, or terminal value (deferral)
    rc1 = price(sets, lay, duals_from(lay, lam_c, lam_p, lam_a), reps, k=1,
                chunk=opt.price_chunk)[0][:, 0]
    class_term = mult * np.minimum(rc1, pen)
    kprice = kw_slot_price(sets, lam_p, lam_a)    # (S, T) [kg per kW-slot]
    dem = lay.demands
    # the GPUs free in each hour (less the work already running), as :func:`lagrangian`'s
    # capacity term: with the installed count here the bound once exceeded the optimum
    # (a GPU busy in hour 0 counted free by the type's MIP, and its price counted twice)
    cap = sets.gpu_cap.astype(float)                                       # (S, T, G)
    dem_term = np.zeros(len(dem))
    if len(dem):
        # summed over every slot of the demand's hour (one on the hourly grid)
        per_gpu = inference_site_cost(sets, dem, kprice, lam_c)
        per_gpu = np.where(sets.inf_sites[dem], per_gpu, np.inf)
        dem_term = sets.inf_gpus[dem] * per_gpu.min(axis=1)
    g_of_c = sets.job_gtype[reps]
    g_of_d = sets.inf_gtype[dem] if len(dem) else np.zeros(0, np.int64)
    lag_g = np.array([class_term[g_of_c == g].sum() + dem_term[g_of_d == g].sum()
                      - (lam_c[:, :, g] * cap[:, :, g]).sum() for g in range(n_g)])
    const = value - lag_g.sum()
    delta_max = max(upper - value, 0.0) * (1 + 1e-9) + 1e-9
    n_win = np.clip(sets.job_last[reps] - sets.job_first[reps] + 1, 0, n_t)
    n_opt = sets.job_sites[reps].sum(axis=1) * n_win
    per_type: dict = {}
    proven_g = lag_g.copy()
    sol_o, sol_n = [np.zeros((0, 3), np.int64)], [np.zeros(0, np.int64)]
    seen = [np.zeros((0, 3), np.int64)]
    order = np.argsort([n_opt[g_of_c == g].sum() for g in range(n_g)], kind="stable")
    for g in order:
        cg = np.flatnonzero(g_of_c == g)
        dg = np.flatnonzero(g_of_d == g)
        name = str(sets.gpu_type[g])
        left = t_end - time.perf_counter()
        if len(cg) == 0 or n_opt[cg].sum() > opt.split_enum_max or left < 0.2:
            per_type[name] = (float(lag_g[g]), float(lag_g[g]), 0, "not enumerated")
            continue
        opts = enumerate_options(sets, reps[cg])
        cov = cover_index(sets, opts)
        j = opts[cov.option, 0]
        # power sees the whole gang in every slot, absorption the share of the slot it runs
        c_tilde = option_costs(sets, opts) + np.bincount(
            cov.option, weights=sets.job_kw[j] * (lam_p[cov.site, cov.slot] - cov.energy
                                                  * (sets.pue * lam_a)[cov.site, cov.slot]),
            minlength=len(opts))
        rc = c_tilde + np.bincount(cov.option, weights=sets.job_gpus[j]
                                   * lam_c[cov.site, cov.slot, cov.gtype], minlength=len(opts))
        loc = np.full(len(sets.job_gpus), -1, dtype=np.int64)
        loc[reps[cg]] = np.arange(len(cg))
        oc = loc[opts[:, 0]]
        pi = np.minimum(np.full(len(cg), np.inf), pen[cg])
        np.minimum.at(pi, oc, rc)
        rc = rc - pi[oc]
        delta = delta_max
        if (rc < delta).sum() > opt.split_mip_max:
            delta = float(np.partition(rc, opt.split_mip_max)[opt.split_mip_max])
        if delta < opt.split_min_delta * delta_max:
            per_type[name] = (float(lag_g[g]), float(lag_g[g]), 0,
                              f"skipped: threshold {delta:.3g} below {opt.split_min_delta} of gap")
            continue
        keep = rc < delta
        opts, c_tilde, oc = opts[keep], c_tilde[keep], oc[keep]
        seen.append(opts)
        db, status, x = _type_mip(sets, int(g), dem[dg], opts, c_tilde, oc, mult[cg], pen[cg],
                                  kprice, threads, left)
        if np.isfinite(db) or db == np.inf:
            proven_g[g] = max(lag_g[g], min(lag_g[g] + delta, db))
        if x is not None:
            sol_o.append(opts[x > 0])
            sol_n.append(x[x > 0])
        per_type[name] = (float(lag_g[g]), float(proven_g[g]), int(len(opts)), status)
        if say:
            say(f"split bound, type {name}: Lagrangian {lag_g[g]:.3f} -> {proven_g[g]:.3f} "
                f"({len(opts)} options, threshold {delta:.3g}, {status})")
    return SplitBound(bound=float(proven_g.sum() + const), lagrangian=float(value),
                      per_type=per_type, options=np.concatenate(sol_o),
                      counts=np.concatenate(sol_n), columns=np.concatenate(seen))


def _type_mip(sets: PlanSets, g: int, dem_g: np.ndarray, opts: np.ndarray,
              c_tilde: np.ndarray, oc: np.ndarray, mult_c: np.ndarray, pen_c: np.ndarray,
              kprice: np.ndarray, threads: int, seconds: float
              ) -> tuple[float, str, np.ndarray | None]:
    """One GPU type's scheduling MIP of :func:`split_bound`: assignment, inference, capacity.

    Parameters
    ----------
    sets
        Compiled sets.
    g
        The GPU type's position.
    dem_g
        Positions of the type's active inference demands.
    opts, c_tilde, oc
        The type's options ``(O, 3)`` below the reduced-cost threshold, their costs with the
        power and absorption multipliers [kg], and their classes' positions among the type's.
    mult_c, pen_c
        Multiplicity and unplaced cost [kg] of the type's classes.
    kprice
        ``(S, T)`` price of one kWh of IT energy with the power and absorption multipliers.
        [kg/kWh]
    threads
        HiGHS threads.
    seconds
        Time limit of the MIP. [s]

    Returns
    -------
    (dual bound, status, counts)
        HiGHS's MIP dual bound [kg] (+inf when infeasible), its model status, and the
        integer option counts of its solution (None without one).
    """
    n_s, n_t = sets.pue.shape
    n_c, n_d = len(mult_c), len(dem_g)
    cap = sets.gpu_cap.astype(float)
    # the type's MIP: assignment, inference and capacity rows (covering form)
    cells = np.flatnonzero(sets.gpu_count[:, g] > 0)
    cell_row = np.full((n_s, n_t), -1, dtype=np.int64)
    n_cap = len(cells) * n_t
    cell_row[cells] = (n_c + n_d + np.arange(n_cap)).reshape(len(cells), n_t)
    h = new_highs(threads, max(seconds, 0.1))
    h.setOptionValue("mip_rel_gap", 1e-4)
    lo = np.concatenate([mult_c.astype(float), sets.inf_gpus[dem_g].astype(float),
                         np.full(n_cap, -INF)])
    hi = np.concatenate([mult_c.astype(float), sets.inf_gpus[dem_g].astype(float),
                         cap[cells, :, g].reshape(-1)])
    h.addRows(len(lo), lo, hi, 0, np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0))
    # unplaced columns
    h.addCols(n_c, pen_c, np.zeros(n_c), mult_c.astype(float), n_c,
              np.arange(n_c, dtype=np.int32), np.arange(n_c, dtype=np.int32), np.ones(n_c))
    n_y = 0
    if n_d:
        dd, ss = np.nonzero(sets.inf_sites[dem_g])
        d_pos = dem_g[dd]
        n_y = len(dd)
        # its serve row and the capacity row of every slot of its hour (one when hourly)
        n_h = sets.slots_per_hour
        t_y = sets.inf_hour[d_pos][:, None] + np.arange(n_h)[None, :]
        rows = np.concatenate([(n_c + dd)[:, None], cell_row[ss[:, None], t_y]],
                              axis=1).reshape(-1)
        cost_y = inference_site_cost(sets, d_pos, kprice)[np.arange(n_y), ss]
        h.addCols(n_y, cost_y, np.zeros(n_y), sets.inf_gpus[d_pos].astype(float),
                  (1 + n_h) * n_y, np.arange(0, (1 + n_h) * n_y, 1 + n_h, dtype=np.int32),
                  rows.astype(np.int32), np.ones((1 + n_h) * n_y))
    cov = cover_index(sets, opts)
    cols = np.concatenate([np.arange(len(opts)), cov.option])
    rows = np.concatenate([oc, cell_row[cov.site, cov.slot]])
    vals = np.concatenate([np.ones(len(opts)),
                           sets.job_gpus[opts[cov.option, 0]].astype(float)])
    srt = np.argsort(cols, kind="stable")
    starts = np.searchsorted(cols[srt], np.arange(len(opts))).astype(np.int32)
    h.addCols(len(opts), c_tilde, np.zeros(len(opts)), mult_c[oc].astype(float),
              len(srt), starts, rows[srt].astype(np.int32), vals[srt])
    n_col = n_c + n_y + len(opts)
    h.changeColsIntegrality(n_col, np.arange(n_col, dtype=np.int32),
                            np.ones(n_col, dtype=np.uint8))
    run_highs(h)
    # +inf when infeasible: no solution of the type's problem below the threshold
    db = mip_dual_bound(h, has_integers=n_col > 0)
    status = h.modelStatusToString(h.getModelStatus())
    x = None
    if h.getInfo().primal_solution_status == 2:
        x = np.round(np.asarray(h.getSolution().col_value)[n_c + n_y:]).astype(np.int64)
    return db, status, x


def split_rises(per_type: dict, min_kg: float = ColgenOptions.split_note_min_kg
                ) -> list[str]:
    """``"type Lagrangian->proven"`` [kg] of the types whose split bound rose enough to count.

    A type counts when its bound rose by at least ``min_kg``
    (:attr:`ColgenOptions.split_note_min_kg`) [kg] (the plan note; empty: the split bound is
    not adopted).
    """
    return [f"{k} {v[0]:.3f}->{v[1]:.3f}" for k, v in per_type.items()
            if v[1] >= v[0] + min_kg]


def site_bound(sets: PlanSets, lay: Layout, raw: np.ndarray, upper: float, seconds: float,
               threads: int, say=None, options: ColgenOptions | None = None) -> SplitBound:
    r"""Lagrangian bound with the assignment and inference rows relaxed: one MIP per site.

    With the master's duals :math:`\pi_c` (assignment) and :math:`\sigma_d` (inference) as
    multipliers, the problem separates by site (GPU capacity, power and absorption rows are
    per site):

    .. math:: z \ge \sum_c m_c \pi_c + \sum_d N_d \sigma_d
              + \sum_c m_c \min(0, p_c - \pi_c) + \sum_s V_s(\pi, \sigma),

    :math:`V_s` the site's own MIP: options at the site with costs :math:`c_o - \pi_c`
    (at most :math:`m_c` of a class), inference with :math:`e_{ds} - \sigma_d`, absorption,
    and the site's capacity, power and absorption rows, integer — the gangs that do not fit
    a site's few GPUs or its power cap, which no LP sees. Each :math:`V_s` is bounded below by
    its own Lagrangian :math:`L_s` (capacity, power and absorption relaxed with the master's
    duals; :math:`\sum_s L_s` plus the first terms is the LP value at the LP's optimal
    duals), and as in :func:`split_bound` by :math:`\min(L_s + \Delta, B_s)` with
    :math:`B_s` the dual bound of the MIP over the options of reduced cost below
    :math:`\Delta` (a Lagrangian decomposition by site; Guignard, TOP 11, 2003,
    doi:10.1007/BF02579036; reduced-cost fixing, Nemhauser & Wolsey 1988, §II.5).

    Parameters
    ----------
    raw
        Master row duals (HiGHS signs) in the covering layout's first rows; any values
        give a valid bound.
    upper
        Objective of the best plan known. [kg]
    seconds
        Time for all site MIPs. [s]
    threads
        HiGHS threads.
    say
        Optional callable taking one-line progress messages.
    options
        :attr:`ColgenOptions.site_mip_max` and :attr:`ColgenOptions.split_min_delta`
        (defaults when None).

    Returns
    -------
    SplitBound
        The bound [kg], the sites' Lagrangian [kg], the terms by site and the site MIPs'
        solutions.
    """
    opt = ColgenOptions() if options is None else options
    t_end = time.perf_counter() + seconds
    n_s, n_t = sets.pue.shape
    reps, mult = lay.reps, lay.mult
    pi = raw[lay.assign_row[reps]]
    dem = lay.demands
    sigma = raw[lay.serve_row[dem]] if len(dem) else np.zeros(0)
    lam_c, lam_p, lam_a = multipliers(sets, lay, raw)
    pen = sets.unplaced_cost[reps].astype(float)    # penalty, or terminal value (deferral)
    ci_kg = sets.ci_g_per_kwh / 1000.0
    const = float((mult * pi).sum() + (sets.inf_gpus[dem] * sigma).sum()
                  + (mult * np.minimum(0.0, pen - pi)).sum())
    opts = enumerate_options(sets, reps)
    cov = cover_index(sets, opts)
    j = opts[cov.option, 0]
    loc = np.full(len(sets.job_gpus), -1, dtype=np.int64)
    loc[reps] = np.arange(len(reps))
    oc = loc[opts[:, 0]]
    cost = option_costs(sets, opts) - pi[oc]                    # relaxed-assignment cost
    r = cost + np.bincount(cov.option, weights=sets.job_gpus[j] * lam_c[cov.site, cov.slot,
                                                                          cov.gtype]
                           + sets.job_kw[j] * (lam_p[cov.site, cov.slot] - cov.energy
                                               * (sets.pue * lam_a)[cov.site, cov.slot]),
                           minlength=len(opts))
    del cov, j
    # inference columns y_ds and their reduced costs
    dd, ys = np.nonzero(sets.inf_sites[dem]) if len(dem) else (np.zeros(0, int),) * 2
    d_pos = dem[dd] if len(dem) else np.zeros(0, np.int64)
    t_y, g_y = sets.inf_hour[d_pos], sets.inf_gtype[d_pos]
    kw_y = sets.inf_kw_per_gpu[d_pos]
    cost_y = kw_y * sets.cost_per_kwh[ys, t_y] - sigma[dd]
    r_y = cost_y + lam_c[ys, t_y, g_y] + kw_y * (lam_p - sets.pue * lam_a)[ys, t_y]
    n_y = sets.inf_gpus[d_pos].astype(float)
    has_abs = lay.absorb_row >= 0
    cap = sets.gpu_count.astype(float)
    pcap = sets.power_rhs_kw
    delta_max = float("inf")
    per_site: dict = {}
    total = const
    sol_o, sol_n = [np.zeros((0, 3), np.int64)], [np.zeros(0, np.int64)]
    site_of = opts[:, 1]
    for s in range(n_s):
        on = np.flatnonzero(site_of == s)
        # the site's Lagrangian: each class all on its best option here if that is negative
        beta = np.zeros(len(reps))
        np.minimum.at(beta, oc[on], r[on])
        on_y = np.flatnonzero(ys == s)
        abs_t = np.flatnonzero(has_abs[s] & (lam_a[s] < ci_kg[s]))
        l_s = float((mult * beta).sum() + (n_y[on_y] * np.minimum(0.0, r_y[on_y])).sum()
                    + ((lam_a[s, abs_t] - ci_kg[s, abs_t]) * sets.surplus_kw[s, abs_t]).sum()
                    - (lam_c[s] * cap[s][None, :]).sum() - (lam_p[s] * pcap[s]).sum())
        total += l_s
        per_site[str(sets.site[s])] = (l_s, l_s, 0, "not run")
    lag_total = total
    if not np.isfinite(upper):
        return SplitBound(lag_total, lag_total, per_site, sol_o[0], sol_n[0])
    delta_max = max(upper - lag_total, 0.0) * (1 + 1e-9) + 1e-9
    for s in range(n_s):
        left = (t_end - time.perf_counter()) / (n_s - s)
        name = str(sets.site[s])
        l_s = per_site[name][0]
        if left < 0.1:
            continue
        on = np.flatnonzero(site_of == s)
        beta = np.zeros(len(reps))
        np.minimum.at(beta, oc[on], r[on])
        rc = r[on] - beta[oc[on]]
        delta = delta_max
        if (rc < delta).sum() > opt.site_mip_max:
            delta = float(np.partition(rc, opt.site_mip_max)[opt.site_mip_max])
        if delta < opt.split_min_delta * delta_max:
            per_site[name] = (l_s, l_s, 0, f"skipped: threshold {delta:.3g}")
            continue
        sel = on[rc < delta]
        o_s = opts[sel]
        on_y = np.flatnonzero(ys == s)
        db, status, x = _site_mip(sets, s, has_abs[s], o_s, oc[sel], cost[sel], mult,
                                  (t_y[on_y], g_y[on_y], kw_y[on_y], cost_y[on_y], n_y[on_y]),
                                  threads, left)
        if db == np.inf:   # all zeros is a solution: "infeasible" is numerical trouble
            db = -np.inf
        proven = max(l_s, min(l_s + delta, db))
        total += proven - l_s
        if x is not None:
            sol_o.append(o_s[x > 0])
            sol_n.append(x[x > 0])
        per_site[name] = (l_s, proven, int(len(o_s)), status)
        if say:
            say(f"site bound, {name}: Lagrangian {l_s:.3f} -> {proven:.3f} ({len(o_s)} "
                f"options, threshold {delta:.3g}, {status})")
    return SplitBound(bound=float(total), lagrangian=float(lag_total), per_type=per_site,
                      options=np.concatenate(sol_o), counts=np.concatenate(sol_n))



def _site_mip(sets: PlanSets, s: int, has_abs_s: np.ndarray, o_s: np.ndarray,
              oc_s: np.ndarray, cost_s: np.ndarray, mult: np.ndarray, inf: tuple,
              threads: int, seconds: float) -> tuple[float, str, np.ndarray | None]:
    """One site's MIP of :func:`site_bound`: its classes, inference, capacity, power, absorption.

    Parameters
    ----------
    sets
        Compiled sets.
    s
        The site's position.
    has_abs_s
        ``(T,)`` whether the site has an absorption row in each hour.
    o_s, oc_s, cost_s
        The site's options ``(O, 3)`` below the reduced-cost threshold, their classes'
        positions and their costs less the assignment duals. [kg]
    mult
        Multiplicity of every class.
    inf
        The site's inference columns: hour, GPU type, kW per GPU, cost less the demand's
        dual [kg per GPU] and upper bound [GPUs], one array each.
    threads
        HiGHS threads.
    seconds
        Time limit of the MIP. [s]

    Returns
    -------
    (dual bound, status, counts)
        HiGHS's MIP dual bound [kg], its model status, and the integer option counts of its
        solution (None without one).
    """
    n_t = sets.pue.shape[1]
    n_g = len(sets.gpu_type)
    cap = sets.gpu_count.astype(float)
    pcap = sets.power_rhs_kw
    ci_kg = sets.ci_g_per_kwh / 1000.0
    t_y, g_y, kw_y, cost_y, n_y = inf
    cls_here = np.unique(oc_s)
    crow = np.full(len(mult), -1, dtype=np.int64)
    crow[cls_here] = np.arange(len(cls_here))
    n_c = len(cls_here)
    cap_base, pow_base = n_c, n_c + n_t * n_g
    abs_row = np.full(n_t, -1, dtype=np.int64)
    ab_t = np.flatnonzero(has_abs_s)
    abs_row[ab_t] = pow_base + n_t + np.arange(len(ab_t))
    n_rows = pow_base + n_t + len(ab_t)
    lo = np.full(n_rows, -INF)
    hi = np.concatenate([mult[cls_here].astype(float),
                         np.repeat(cap[s][None, :], n_t, 0).reshape(-1),
                         pcap[s], np.zeros(len(ab_t))])
    h = new_highs(threads, seconds)
    h.setOptionValue("mip_rel_gap", 1e-4)
    h.addRows(n_rows, lo, hi, 0, np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0))
    c2 = cover_index(sets, o_s)
    jj = o_s[c2.option, 0]
    kwc = sets.job_kw[jj]
    ar = abs_row[c2.slot]
    hv = ar >= 0
    cols = np.concatenate([np.arange(len(o_s)), c2.option, c2.option, c2.option[hv]])
    rows = np.concatenate([crow[oc_s], cap_base + c2.slot * n_g + c2.gtype,
                           pow_base + c2.slot, ar[hv]])
    vals = np.concatenate([np.ones(len(o_s)), sets.job_gpus[jj].astype(float), kwc,
                           -(sets.pue[s, c2.slot] * kwc * c2.energy)[hv]])
    srt = np.argsort(cols, kind="stable")
    starts = np.searchsorted(cols[srt], np.arange(len(o_s))).astype(np.int32)
    h.addCols(len(o_s), cost_s, np.zeros(len(o_s)), mult[oc_s].astype(float),
              len(srt), starts, rows[srt].astype(np.int32), vals[srt])
    n_int = len(o_s)
    if len(t_y):
        ar_y = abs_row[t_y]
        nnz = np.where(ar_y >= 0, 3, 2)
        r3 = np.stack([cap_base + t_y * n_g + g_y, pow_base + t_y, ar_y], axis=1)
        v3 = np.stack([np.ones(len(t_y)), kw_y, -kw_y * sets.pue[s, t_y]], 1)
        keep = np.arange(3)[None, :] < nnz[:, None]
        st_y = np.concatenate([[0], np.cumsum(nnz)[:-1]]).astype(np.int32)
        h.addCols(len(t_y), cost_y, np.zeros(len(t_y)), n_y,
                  int(nnz.sum()), st_y, r3[keep].astype(np.int32), v3[keep])
        n_int += len(t_y)
    if len(ab_t):
        h.addCols(len(ab_t), -ci_kg[s, ab_t], np.zeros(len(ab_t)),
                  sets.surplus_kw[s, ab_t], len(ab_t),
                  np.arange(len(ab_t), dtype=np.int32), abs_row[ab_t].astype(np.int32),
                  np.ones(len(ab_t)))
    h.changeColsIntegrality(n_int, np.arange(n_int, dtype=np.int32),
                            np.ones(n_int, dtype=np.uint8))
    run_highs(h)
    db = mip_dual_bound(h, has_integers=n_int > 0)
    status = h.modelStatusToString(h.getModelStatus())
    x = None
    if h.getInfo().primal_solution_status == 2:
        x = np.round(np.asarray(h.getSolution().col_value)[: len(o_s)]).astype(np.int64)
    return db, status, x


def split_bounds(st: ColgenState) -> None:
    """The GPU-type split bound, and the site split bound when switched on.

    The type split (:func:`split_bound`, :attr:`ColgenOptions.split_share` of the budget, at
    most 0.4 of what is left less :attr:`ColgenOptions.finish_s`) from the best multipliers;
    its bound is taken when it is higher and some type rose by
    :attr:`ColgenOptions.split_note_min_kg`. The site split (:func:`site_bound`,
    :attr:`ColgenOptions.site_share`, off by default; at most half of what is left less
    :attr:`ColgenOptions.finish_s`) from the last
    master's duals. Both MIPs' options join ``st.split_opts`` for the repair.
    """
    sets, lay, opt = st.sets, st.lay, st.opt
    if opt.split_share > 0 and st.left() > opt.step_min_left_s:
        upper = min(r.totals["objective"] for _, r in st.cands)
        tr = time.perf_counter()
        sb = split_bound(sets, lay, *st.best_lam, upper,
                         min(opt.split_share * st.time_limit_s,
                             0.4 * (st.left() - opt.finish_s)),
                         st.threads, st.say, options=opt)
        st.say(f"type-split bound {sb.bound:.3f} (Lagrangian {sb.lagrangian:.3f}, best bound "
               f"{st.lb:.3f}) in {time.perf_counter() - tr:.1f} s")
        st.split_opts = np.concatenate([sb.options, sb.columns])
        risen = split_rises(sb.per_type, opt.split_note_min_kg)
        if sb.bound > st.lb and risen:
            st.lb = sb.bound
            st.rec.bound = st.lb
            st.note("bound from the GPU-type split (capacity kept, power relaxed): "
                    + ", ".join(risen))
    if opt.site_share > 0 and sets.slots_per_hour > 1:
        st.note(f"the site-split bound (site_share {opt.site_share:g}) models hourly slots "
                f"only: not run on this {sets.slot_minutes}-minute grid (the LP and "
                "GPU-type bounds hold)")
    elif (opt.site_share > 0 and st.left() > opt.step_min_left_s
            and count_options(sets) <= opt.site_enum_max):
        upper = min(r.totals["objective"] for _, r in st.cands)
        tr = time.perf_counter()
        sbs = site_bound(sets, lay, st.row_duals, upper,
                         min(opt.site_share * st.time_limit_s,
                             0.5 * (st.left() - opt.finish_s)), st.threads,
                         st.say, options=opt)
        st.say(f"site-split bound {sbs.bound:.3f} (its Lagrangian {sbs.lagrangian:.3f}, best "
               f"bound {st.lb:.3f}) in {time.perf_counter() - tr:.1f} s")
        st.split_opts = np.concatenate([st.split_opts, sbs.options])
        if sbs.bound > st.lb:
            st.lb = sbs.bound
            st.rec.bound = st.lb
            st.note(f"bound from the site split (assignment relaxed, one MIP per site): "
                    f"{sbs.bound:.3f}")
