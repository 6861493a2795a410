"""The Lagrangian dual of the capacity, power and absorption rows, and its subgradient ascent."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from carbonsched.plan.colgen.grid import (
    absorb_slot_credit,
    inference_site_cost,
    inference_usage,
    kw_slot_price,
)
from carbonsched.plan.colgen.layout import Layout, usage
from carbonsched.plan.colgen.options import ColgenOptions
from carbonsched.plan.colgen.pricing import price
from carbonsched.plan.sets import PlanSets


@dataclass
class Warmup:
    """Result of the Lagrangian warm-up: best bound, its duals and the options it visited."""

    bound: float
    duals: np.ndarray
    pool: np.ndarray
    iterations: int


def lagrangian_warmup(sets: PlanSets, lay: Layout, upper: float, seconds: float,
                      max_iter: int = 100_000, trace: list | None = None,
                      start: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
                      options: ColgenOptions | None = None) -> Warmup:
    r"""Subgradient ascent on the Lagrangian dual of the capacity, power and absorption rows.

    For multipliers :math:`\lambda \ge 0` every class independently takes its cheapest
    option or stays unplaced, every inference demand its cheapest site, every absorption
    variable its bound; :math:`L(\lambda)` is a valid lower bound on the LP and on the MILP
    (Held, Wolfe & Crowder, "Validation of subgradient optimization", Math. Programming 6,
    1974, doi:10.1007/BF01580223). Steps are Polyak's, :math:`\theta (U - L) / \|g\|^2`,
    with :math:`\theta` halved after 10 rounds without improvement. The options chosen along
    the way seed the column-generation master, and the duals of the best round price it.

    Parameters
    ----------
    upper
        The Polyak target: an upper bound on the optimum (the greedy plan's objective), or
        the restricted master's LP value when refining its duals (``start``). [kg]
    seconds
        Time budget. [s]
    start
        Multipliers ``(lam_c, lam_p, lam_a)`` to start from (default zero), projected to
        :math:`\ge 0`.
    options
        :attr:`ColgenOptions.warmup_stall` and :attr:`ColgenOptions.warmup_keep_rounds`
        (defaults when None).
    """
    opt = ColgenOptions() if options is None else options
    t_end = time.perf_counter() + seconds
    n_s, n_t = sets.pue.shape
    n_g = len(sets.gpu_type)
    cap = sets.gpu_cap.astype(float)
    pcap = sets.power_rhs_kw.astype(float).copy()
    has_abs = lay.absorb_row >= 0
    if start is None:
        lam_c = np.zeros((n_s, n_t, n_g))
        lam_p = np.zeros((n_s, n_t))
        lam_a = np.zeros((n_s, n_t))
    else:
        lam_c, lam_p, lam_a = (np.maximum(0.0, np.asarray(x, dtype=float)) for x in start)
    best = (-np.inf, None)
    visited = []
    theta, stall = 1.0, 0
    it = 0
    while it < max_iter and time.perf_counter() < t_end:
        it += 1
        duals = duals_from(lay, lam_c, lam_p, lam_a)
        value, opts, g_used, kw_used, a_val = lagrangian(sets, lay, lam_c, lam_p, lam_a,
                                                         chunk=opt.price_chunk)
        visited.append(opts)
        if len(visited) > opt.warmup_keep_rounds:
            visited.pop(0)
        if trace is not None:
            trace.append((time.perf_counter(), value))
        if value > best[0] + 1e-9 * max(1.0, abs(value)):
            best = (value, duals.copy())
            stall = 0
        else:
            stall += 1
            if stall >= opt.warmup_stall:
                theta, stall = theta / 2, 0
        gc = g_used - cap
        gp = kw_used - pcap
        ga = np.where(has_abs, a_val - sets.pue * kw_used, 0.0)
        # projected subgradient: components that would push a zero multiplier negative vanish
        gc = np.where((lam_c <= 0) & (gc < 0), 0.0, gc)
        gp = np.where((lam_p <= 0) & (gp < 0), 0.0, gp)
        ga = np.where((lam_a <= 0) & (ga < 0), 0.0, ga)
        norm = float((gc ** 2).sum() + (gp ** 2).sum() + (ga ** 2).sum())
        if norm <= 1e-12 or theta < 1e-4:
            break
        step = theta * max(upper - value, 1e-9 * abs(upper)) / norm
        lam_c = np.maximum(0.0, lam_c + step * gc)
        lam_p = np.maximum(0.0, lam_p + step * gp)
        lam_a = np.maximum(0.0, lam_a + step * ga)
    pool = np.unique(np.concatenate(visited), axis=0) if visited else np.zeros((0, 3), np.int64)
    return Warmup(bound=best[0], duals=best[1] if best[1] is not None else
                  np.zeros(lay.n_rows), pool=pool, iterations=it)


def duals_from(lay: Layout, lam_c: np.ndarray, lam_p: np.ndarray, lam_a: np.ndarray
                ) -> np.ndarray:
    """Row duals (HiGHS signs, assignment rows 0) from non-negative multipliers.

    Parameters
    ----------
    lay
        The master's row layout (:func:`~carbonsched.plan.colgen.layout.make_layout`).
    lam_c, lam_p, lam_a
        Non-negative multipliers of the capacity ``(S, T, G)`` [kg per GPU-hour], power
        ``(S, T)`` [kg per kWh of IT energy] and absorption ``(S, T)`` [kg per kWh] rows.

    Returns
    -------
    numpy.ndarray
        ``(R,)`` row duals: minus the multipliers on the capacity, power and
        absorption rows, 0 elsewhere.
    """
    n_s, n_t = lam_p.shape
    duals = np.zeros(lay.n_rows)
    duals[lay.cap_base: lay.pow_base] = -lam_c.reshape(-1)
    duals[lay.pow_base: lay.pow_base + n_s * n_t] = -lam_p.reshape(-1)
    m = lay.absorb_row >= 0
    duals[lay.absorb_row[m]] = -lam_a[m]
    return duals


def multipliers(sets: PlanSets, lay: Layout, duals: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Non-negative multipliers (capacity, power, absorption) from master row duals.

    Parameters
    ----------
    sets
        Compiled sets.
    lay
        The master's row layout (:func:`~carbonsched.plan.colgen.layout.make_layout`).
    duals
        ``(R,)`` row duals (HiGHS signs) in the covering form's layout.

    Returns
    -------
    lam_c, lam_p, lam_a
        ``max(0, -dual)`` of the capacity ``(S, T, G)``, power and absorption ``(S, T)``
        rows (0 where a site-hour has no absorption row).
    """
    n_s, n_t = sets.pue.shape
    n_g = len(sets.gpu_type)
    lam_c = np.maximum(0.0, -duals[lay.cap_base: lay.pow_base]).reshape(n_s, n_t, n_g)
    lam_p = np.maximum(0.0, -duals[lay.pow_base: lay.pow_base + n_s * n_t]).reshape(n_s, n_t)
    lam_a = np.zeros((n_s, n_t))
    m = lay.absorb_row >= 0
    lam_a[m] = np.maximum(0.0, -duals[lay.absorb_row[m]])
    return lam_c, lam_p, lam_a


def inference_prices(sets: PlanSets, lay: Layout, lam_c: np.ndarray, lam_p: np.ndarray,
                     lam_a: np.ndarray) -> np.ndarray:
    """Lagrangian cost of one inference GPU of each active demand at each site, ``(D', S)``.

    kW × (carbon cost + power multiplier − PUE × absorption multiplier) + the GPU capacity
    multiplier of its hour and type [kg per GPU]; +inf at sites the demand may not use.

    Parameters
    ----------
    sets
        Compiled sets.
    lay
        The master's row layout (:func:`~carbonsched.plan.colgen.layout.make_layout`).
    lam_c, lam_p, lam_a
        Non-negative multipliers of the capacity ``(S, T, G)`` [kg per GPU-hour], power
        ``(S, T)`` [kg per kWh of IT energy] and absorption ``(S, T)`` [kg per kWh] rows.

    Returns
    -------
    numpy.ndarray
        ``(D', S)`` [kg per GPU] over the active demands.
    """
    dem = lay.demands
    # summed over every slot of the demand's hour (one slot on the hourly grid)
    per_gpu = inference_site_cost(sets, dem, kw_slot_price(sets, lam_p, lam_a),
                                  lam_c)
    return np.where(sets.inf_sites[dem], per_gpu, np.inf)


def lagrangian(sets: PlanSets, lay: Layout, lam_c: np.ndarray, lam_p: np.ndarray,
               lam_a: np.ndarray, chunk: int = ColgenOptions.price_chunk):
    r"""Lagrangian function of the capacity, power and absorption rows at given multipliers.

    Every class takes its cheapest option under the prices or stays unplaced, every inference
    demand its cheapest eligible site, every absorption variable its best bound. The value is
    a valid lower bound on the LP and the MILP for any :math:`\lambda \ge 0` (weak duality),
    whatever solver produced the multipliers.

    Parameters
    ----------
    sets, lay
        Compiled sets and the master's row layout.
    lam_c, lam_p, lam_a
        Multipliers of the capacity ``(S, T, G)`` [kg per GPU-hour], power ``(S, T)`` [kg
        per kWh] and absorption ``(S, T)`` [kg per kWh] rows, each ``>= 0``.
    chunk
        Classes priced per numpy block (:attr:`ColgenOptions.price_chunk`).

    Returns
    -------
    value, opts, gpus_used, kw_used, absorbed
        Bound [kg]; the chosen options ``(O, 3)`` (one per placed class); the GPUs ``(S, T,
        G)`` and IT kW ``(S, T)`` that choice uses and the absorption ``(S, T)`` [kW].
    """
    reps, mult = lay.reps, lay.mult.astype(float)
    pen = sets.unplaced_cost[reps].astype(float)    # penalty, or terminal value (deferral)
    cap = sets.gpu_cap.astype(float)
    pcap = sets.power_rhs_kw.astype(float).copy()
    has_abs = lay.absorb_row >= 0
    ci_kg = absorb_slot_credit(sets)    # kg per kW absorbed through a slot
    dem = lay.demands
    rc, ss, tt = price(sets, lay, duals_from(lay, lam_c, lam_p, lam_a), reps, k=1,
                       chunk=chunk)
    rc, ss, tt = rc[:, 0], ss[:, 0], tt[:, 0]
    place = rc < pen
    value = float((mult * np.minimum(rc, pen)).sum())
    opts = np.stack([reps[place], ss[place], tt[place]], axis=1)
    g_used, kw_used = usage(sets, opts, mult[place].astype(np.int64))
    if len(dem):
        per_gpu = inference_prices(sets, lay, lam_c, lam_p, lam_a)
        site_d = np.argmin(per_gpu, axis=1)
        n_d = sets.inf_gpus[dem].astype(float)
        value += float((n_d * per_gpu[np.arange(len(dem)), site_d]).sum())
        g_inf, kw_inf = inference_usage(sets, dem, site_d, n_d)   # every slot of its hour
        g_used = g_used + g_inf
        kw_used = kw_used + kw_inf
    take = has_abs & (lam_a < ci_kg)
    a_val = np.where(take, sets.surplus_kw, 0.0)
    value += float(((lam_a - ci_kg) * a_val).sum())
    value -= float((lam_c * cap).sum() + (lam_p * pcap).sum())
    return value, opts, g_used, kw_used, a_val


def job_cost_scale(sets: PlanSets, objective_kg: float) -> float:
    """Temperature scale of the smoothed dual: the mean cost of a placeable job. [kg]

    ``objective_kg`` / placeable jobs (the greedy plan's, or the last master's LP value); an
    objective net of absorbed surplus can be 0, negative or a rounding residue (a credit that
    cancels the emissions), and when it is below :data:`NET_COST_FLOOR` of the dirtiest hour's
    cost of a job, that cost stands in: a tenth of the mean unplaced penalty (the penalty is
    10 x the dirtiest hour's cost), at least 1e-6 kg. The scale is then at least 1e-12 kg, so
    the smoothed dual's temperatures (down to ``smooth_mu_min_rel`` = 1e-5 of it) keep their
    reciprocal far inside single precision (below 1e17 of float32's 3.4e38).

    Parameters
    ----------
    sets
        Compiled sets.
    objective_kg
        A plan's objective or an LP value. [kg]
    """
    n = max(len(sets.placeable), 1)
    pen = np.abs(sets.unplaced_cost[sets.placeable]) if len(sets.placeable) else np.zeros(0)
    dirtiest = float(max(pen.mean() / 10.0 if len(pen) else 0.0, 1e-6))
    if np.isfinite(objective_kg) and objective_kg / n >= NET_COST_FLOOR * dirtiest:
        return float(objective_kg / n)
    return dirtiest


NET_COST_FLOOR = 1e-6
"""Smallest mean net cost per job, as a share of the dirtiest hour's, taken as the smoothed
dual's temperature scale (:func:`job_cost_scale`); below it the net cost is a residue. It must
keep ``smooth_mu_min_rel x NET_COST_FLOOR x 1e-6 kg`` above 1 / float32's largest value
(2.9e-39 kg); chosen far above that, below any net cost a real fleet has. [-]"""
