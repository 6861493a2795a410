r"""Tenants and fair shares: guaranteed quotas, then weighted DRF, then carbon.

When capacity binds (the carbon-only plan cannot place every job's GPU-hours of a type), who
gets the GPUs is decided by fairness before carbon:

1. **Carbon-only plan.** The plan is solved without tenant rows. A GPU type *binds* when this
   plan places fewer GPU-hours of it than the jobs ask for; its capacity :math:`C_g` for the
   shares is the GPU-hours that plan places (what the sites and windows really allow).
2. **Quotas.** Each tenant :math:`i` is first given its guaranteed quota
   :math:`F_{ig} = \min(Q_{ig} H / 24, D_{ig})` (``quota_gpu_hours_per_day`` over a horizon of
   :math:`H` hours, capped at its demand :math:`D_{ig}`), in the spirit of Kueue's ClusterQueue
   ``nominalQuota`` (https://kueue.sigs.k8s.io/docs/concepts/cluster_queue/).
3. **Weighted DRF** (Ghodsi et al., "Dominant Resource Fairness: Fair Allocation of Multiple
   Resource Types", NSDI 2011, section 4 progressive filling, with weights as in its
   section 6): the rest :math:`C_g - \sum_i F_{ig}` is shared by progressive filling so that
   each tenant's share divided by its weight :math:`w_i` is equal for all tenants that still
   want more (:func:`weighted_drf`). Every job uses GPUs of one type, so a tenant's demand is
   not one fixed vector over the types (DRF's Leontief task) but one amount per type: the
   filling runs on each binding type (a single-resource DRF, weighted max-min), and a tenant's
   dominant share is its largest share over the types. Coupling the types along one vector
   would leave one type's hours unallocated when another type runs out. Jobs are indivisible,
   so the filling gives whole jobs (:func:`job_by_job_drf`, the paper's Algorithm 1: the
   tenant with the lowest weighted share above its quota gets its next job if it fits), each
   at a site it may run at and a start in its window, packed into the GPUs free per
   (site, slot): a target is a set of the tenant's jobs that fits beside the others', which a
   plan can reach. (The continuous water-filling over what each tenant can reach,
   :func:`reachable_drf`, is a reference for comparison and is not computed by the plan: its
   level can lie between two sums of a tenant's jobs or above what whole-job packing holds,
   so no plan need reach it.) Allocation :math:`A_{ig} = F_{ig} + \mathrm{DRF}_{ig}`.
4. **Fair plan.** The MILP gets, per tenant and binding type, rows
   :math:`P_{ig} + \sigma_{ig} \ge \phi A_{ig}` and :math:`P_{ig} + \rho_{ig} \ge F_{ig}`
   where :math:`P_{ig}` is the GPU-hours placed (options and piece patterns of the tenant's
   jobs), :math:`\phi \in [0, 1]` the ``fairness`` setting (0 carbon only, 1 strict DRF),
   and the shortfalls are charged :data:`FAIR_PENALTY_FACTOR` and
   :data:`QUOTA_PENALTY_FACTOR` × the unplaced penalty per GPU-hour × (the type's largest row
   ÷ this row): above any carbon difference, so carbon is minimised *within* the fair
   allocation, and relative to the share, so a small share is not the one left short. Each
   binding type's GPU-hours for the tenants stay at most :math:`C_g` (the whole the shares are
   of: where IT power caps bind, the plan could otherwise trade one type's hours for another's
   and the shares would count against a different whole).

The plan shows each tenant's dominant share (placed GPU-hours over :math:`C_g`, the largest
over binding types), its DRF target, its quota met or not, and the **carbon cost of
fairness**: the fair plan's emissions less the carbon-only plan's [kg]. Binding resources are
GPU-hours by type; IT power caps and green surplus are not (yet) resources of the share.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pulp

FAIR_PENALTY_FACTOR = 2.0
"""Shortfall of a fair-share row, per GPU-hour, in units of the unplaced penalty per
GPU-hour: above it, so swapping one tenant's job for another's to reach the shares always
pays, whatever the carbon difference. A design choice of this project. [-]"""
QUOTA_PENALTY_FACTOR = 4.0
"""Shortfall of a guaranteed quota row, per GPU-hour, in units of the unplaced penalty per
GPU-hour: above the fair-share rows (a quota is guaranteed first). A design choice. [-]"""
SHARE_EPS = 1e-9
REPACK_TIME_LIMIT_S = 30.0
"""Time limit of one exact fit check of :func:`job_by_job_drf` (a feasibility MILP, run only
when the greedy placement finds no room); past it the job counts as not fitting. A design
choice of this project: small problems answer in milliseconds. [s]"""


@dataclass
class FairTargets:
    r"""What the fair plan must reach: GPU-hours per (tenant, GPU type).

    Attributes
    ----------
    tenants
        Tenant names, shape ``(I,)``.
    gpu_types
        The binding GPU types, shape ``(R,)``.
    target_gpu_hours
        :math:`\phi A_{ig}`, shape ``(I, R)``. [GPU·h]
    floor_gpu_hours
        Guaranteed quotas :math:`F_{ig}` over the horizon, capped at demand, shape ``(I, R)``;
        over every GPU type of the catalog, binding or not, in ``floor_types``. [GPU·h]
    floor_types
        GPU types of ``floor_gpu_hours``' columns.
    capacity_gpu_hours
        The shared capacity :math:`C_g` of each binding type, shape ``(R,)``: the fair plan
        places at most this much of it for the tenants (the carbon-only plan's GPU-hours), so
        that shares count against a fixed whole even where power caps would let the plan trade
        one type's hours for another's. [GPU·h]
    """

    tenants: list[str]
    gpu_types: list[str]
    target_gpu_hours: np.ndarray
    floor_gpu_hours: np.ndarray
    floor_types: list[str] = field(default_factory=list)
    capacity_gpu_hours: np.ndarray | None = None
    groups: dict[str, tuple[list[tuple[str, ...]], np.ndarray]] = field(default_factory=dict)
    """Per binding type, the residency groups (the sites a job of the type may use, as site
    ids) and the fair allocation per (tenant, group), shape ``(I, K)`` [GPU·h], whose row sums
    are the allocation ``target_gpu_hours`` holds at fairness 1 (:func:`job_by_job_drf`)."""


def weighted_drf(demand: np.ndarray, capacity: np.ndarray, weights: np.ndarray
                 ) -> np.ndarray:
    r"""Weighted dominant-resource-fair allocation by progressive filling.

    Each tenant :math:`i` receives :math:`f_i D_i` (a fraction of its demand vector); its
    dominant share :math:`s_i = f_i \max_r D_{ir} / C_r` grows as :math:`w_i \lambda` with one
    level :math:`\lambda` for all, until the tenant's demand is met or a resource it uses is
    exhausted, which freezes it (Ghodsi et al., NSDI 2011, progressive filling; weighted as
    in section 6).

    Parameters
    ----------
    demand
        Demand per tenant and resource, shape ``(I, R)``, >= 0. [GPU·h]
    capacity
        Capacity per resource, shape ``(R,)``, >= 0. [GPU·h]
    weights
        Tenant weights, shape ``(I,)``, > 0. [-]

    Returns
    -------
    numpy.ndarray
        Allocation, shape ``(I, R)``, at most ``demand``; column sums at most ``capacity``.

    Raises
    ------
    ValueError
        Shapes that disagree, a negative demand or capacity, or a weight that is not > 0.
    """
    demand = np.asarray(demand, dtype=float)
    capacity = np.asarray(capacity, dtype=float)
    weights = np.asarray(weights, dtype=float)
    n_i, n_r = demand.shape if demand.ndim == 2 else (0, 0)
    if demand.ndim != 2 or capacity.shape != (n_r,) or weights.shape != (n_i,):
        raise ValueError(f"weighted_drf: demand (I, R), capacity (R,) and weights (I,) "
                         f"disagree: {demand.shape}, {capacity.shape}, {weights.shape}")
    if (demand < 0).any() or (capacity < 0).any() or not (weights > 0).all():
        raise ValueError("weighted_drf: demands and capacities must be >= 0 and weights > 0")
    cap = np.where(capacity > SHARE_EPS, capacity, SHARE_EPS)
    ds = (demand / cap).max(axis=1) if n_r else np.zeros(n_i)   # dominant share of demand
    frac = np.zeros(n_i)
    active = ds > SHARE_EPS
    level = 0.0
    while active.any():
        # per unit of level, tenant i's allocation grows by w_i / ds_i of its demand
        rate = np.where(active, weights / np.where(ds > 0, ds, 1.0), 0.0)
        used = (frac[:, None] * demand).sum(axis=0)
        grow = (rate[:, None] * demand).sum(axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            by_res = np.where(grow > SHARE_EPS, (capacity - used) / grow, np.inf)
            by_ten = np.where(active, (1.0 - frac) / np.where(rate > 0, rate, 1.0), np.inf)
        step = max(min(by_res.min(initial=np.inf), by_ten.min(initial=np.inf)), 0.0)
        if not np.isfinite(step):
            break
        frac = np.minimum(frac + rate * step, 1.0)
        level += step
        full = by_res <= step + 1e-12
        hit = (demand[:, full] > SHARE_EPS).any(axis=1) if full.any() else np.zeros(n_i, bool)
        active &= ~hit & (frac < 1.0 - 1e-12)
    return frac[:, None] * demand


def reachable_drf(demand: np.ndarray, reach: np.ndarray, site_capacity: np.ndarray,
                  weights: np.ndarray, floor: np.ndarray | None = None,
                  total_capacity: float | None = None) -> np.ndarray:
    r"""Weighted max-min fair GPU-hours of one type when each demand reaches only some sites.

    Tenant :math:`i` asks :math:`D_{ik}` GPU-hours in residency group :math:`k` (a set of
    sites, ``reach[k]``); site :math:`s` offers :math:`c_s`. A feasible allocation is a flow
    :math:`y_{iks} \ge 0` (:math:`s \in k`) with :math:`\sum_{i,k} y_{iks} \le c_s` and
    :math:`\sum_s y_{iks} \le D_{ik}`; tenant :math:`i` holds :math:`a_i = \sum_{k,s} y_{iks}`.
    First the guaranteed floors :math:`F_i` are met as far as the flow allows (most total
    floor); then progressive filling (Ghodsi et al., NSDI 2011, section 4, weighted as in its
    section 6) raises one level :math:`\lambda`, every tenant still growing holding
    :math:`a_i \ge F_i + w_i \lambda`: the largest feasible :math:`\lambda` is found by a
    linear program, each growing tenant that cannot then hold more (another linear program,
    the others kept at their levels) is frozen, and the filling goes on with the rest. This is
    the classic water-filling of weighted max-min fairness with each demand capped at what it
    can reach (Bertsekas & Gallager, *Data Networks*, 2nd ed., 1992, section 6.5.2, max-min
    fair flows); with one group reaching every site it equals :func:`weighted_drf` on one
    resource.

    Parameters
    ----------
    demand
        GPU-hours asked per tenant and group, shape ``(I, K)``, >= 0. [GPU·h]
    reach
        Sites each group may use, shape ``(K, S)``, bool.
    site_capacity
        GPU-hours each site offers, shape ``(S,)``, >= 0. [GPU·h]
    weights
        Tenant weights, shape ``(I,)``, > 0. [-]
    floor
        Guaranteed GPU-hours per tenant, shape ``(I,)`` (default none). [GPU·h]
    total_capacity
        At most this much over all sites together (default: no such row). [GPU·h]

    Returns
    -------
    numpy.ndarray
        Allocation per tenant and group, shape ``(I, K)``: at most ``demand``, each site's
        total at most its capacity (and the sum at most ``total_capacity``).

    Notes
    -----
    A "site" here is any cell a demand may reach: :func:`fair_targets` passes (site, slot)
    cells, so that a job's window limits its reach as its residency does.

    Raises
    ------
    ValueError
        Shapes that disagree, a negative demand, capacity or floor, or a weight not > 0.
    """
    from scipy.optimize import linprog

    demand = np.asarray(demand, dtype=float)
    reach = np.asarray(reach, dtype=bool)
    cap = np.asarray(site_capacity, dtype=float)
    w = np.asarray(weights, dtype=float)
    n_i, n_k = demand.shape if demand.ndim == 2 else (0, 0)
    n_s = len(cap)
    fl = np.zeros(n_i) if floor is None else np.asarray(floor, dtype=float)
    if demand.ndim != 2 or reach.shape != (n_k, n_s) or w.shape != (n_i,) \
            or fl.shape != (n_i,) or cap.ndim != 1:
        raise ValueError(f"reachable_drf: demand (I, K), reach (K, S), site_capacity (S,), "
                         f"weights (I,) and floor (I,) disagree: {demand.shape}, "
                         f"{reach.shape}, {cap.shape}, {w.shape}, {fl.shape}")
    if (demand < 0).any() or (cap < 0).any() or (fl < 0).any() or not (w > 0).all():
        raise ValueError("reachable_drf: demands, capacities and floors must be >= 0 and "
                         "weights > 0")
    arcs = [(i, k, s) for i in range(n_i) for k in range(n_k) if demand[i, k] > SHARE_EPS
            for s in np.flatnonzero(reach[k] & (cap > SHARE_EPS)).tolist()]
    out = np.zeros((n_i, n_k))
    if not arcs:
        return out
    n_y = len(arcs)
    tol = 1e-7 * max(float(cap.sum()), 1.0)
    # flow rows: each site's capacity and each (tenant, group) demand
    rows, rhs = [], []
    site_of = np.array([a[2] for a in arcs])
    for s in np.unique(site_of).tolist():
        rows.append((site_of == s).astype(float))
        rhs.append(cap[s])
    if total_capacity is not None:
        rows.append(np.ones(len(arcs)))
        rhs.append(float(total_capacity))
    pair = np.array([a[0] * n_k + a[1] for a in arcs])
    for ik in np.unique(pair).tolist():
        rows.append((pair == ik).astype(float))
        rhs.append(demand[ik // n_k, ik % n_k])
    flow_a, flow_b = np.array(rows), np.array(rhs)
    ten = np.array([a[0] for a in arcs])
    held = np.array([ten == i for i in range(n_i)], dtype=float)          # (I, n_y)

    def solve(c: np.ndarray, extra_a: list, extra_b: list, n_extra: int) -> Any:
        a_ub = np.vstack([np.hstack([flow_a, np.zeros((len(flow_a), n_extra))])]
                         + extra_a) if extra_a else \
            np.hstack([flow_a, np.zeros((len(flow_a), n_extra))])
        b_ub = np.concatenate([flow_b, extra_b]) if extra_b else flow_b
        res = linprog(c, A_ub=a_ub, b_ub=b_ub, bounds=[(0, None)] * (n_y + n_extra),
                      method="highs")
        if res.status != 0:
            raise RuntimeError(f"reachable_drf: the filling LP failed ({res.message})")
        return res

    # floors: the most total floor the flow holds (f_i <= F_i, f_i <= a_i)
    level = np.zeros(n_i)
    if fl.sum() > SHARE_EPS:
        ea, eb = [], []
        for i in range(n_i):
            r = np.zeros(n_y + n_i)
            r[n_y + i] = 1.0
            ea.append(r.copy())
            eb.append(fl[i])
            r[:n_y] = -held[i]
            ea.append(r)
            eb.append(0.0)
        res = solve(np.concatenate([np.zeros(n_y), -np.ones(n_i)]), ea, eb, n_i)
        level = np.minimum(res.x[n_y:], fl)
    reachable = np.array([sum(demand[i, k] for k in range(n_k) if
                              any(a[0] == i and a[1] == k for a in arcs)) for i in range(n_i)])
    reachable = np.minimum(reachable, held @ cap[site_of])
    active = reachable - level > tol

    def at_least(lv: np.ndarray, n_extra: int, lam: bool) -> tuple[list, list]:
        ea, eb = [], []
        for i in range(n_i):
            r = np.zeros(n_y + n_extra)
            r[:n_y] = -held[i]
            if lam and active[i]:
                r[n_y] = w[i]
            ea.append(r)
            eb.append(-lv[i])
        return ea, eb

    while active.any():
        ea, eb = at_least(level, 1, True)
        c = np.zeros(n_y + 1)
        c[n_y] = -1.0
        lam = max(float(solve(c, ea, eb, 1).x[n_y]), 0.0)
        base = level + np.where(active, w * lam, 0.0)
        frozen = np.zeros(n_i, dtype=bool)
        ea, eb = at_least(np.maximum(base - tol, 0.0), 0, False)
        for i in np.flatnonzero(active):
            most = float(held[i] @ solve(-held[i], ea, eb, 0).x)
            frozen[i] = most <= base[i] + tol
        if not frozen.any():
            frozen = active.copy()       # no tenant can grow: numerical end of the filling
        level = base
        active &= ~frozen
    try:
        ea, eb = at_least(level, 0, False)
        y = solve(np.ones(n_y), ea, eb, 0).x      # the least flow that holds every level
    except RuntimeError:                          # a level a rounding above what holds
        ea, eb = at_least(np.maximum(level - tol, 0.0), 0, False)
        y = solve(np.ones(n_y), ea, eb, 0).x
    for (i, k, _s), v in zip(arcs, y, strict=True):
        out[i, k] += v
    return np.minimum(out, demand)


def job_by_job_drf(job_tenant: np.ndarray, job_gpus: np.ndarray, job_slots: np.ndarray,
                   job_sites: np.ndarray, job_first: np.ndarray, job_last: np.ndarray,
                   free_gpus: np.ndarray, weights: np.ndarray, slot_hours: float = 1.0,
                   floor: np.ndarray | None = None, total_capacity: float | None = None,
                   job_gpu_hours: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    r"""Weighted DRF targets of whole jobs: progressive filling job by job (DRF Algorithm 1).

    Ghodsi et al., "Dominant Resource Fairness: Fair Allocation of Multiple Resource Types",
    NSDI 2011, Algorithm 1: repeatedly give the next task to the user with the lowest
    (weighted, section 6) dominant share, if it fits. Here a task is one of the tenant's own
    jobs (indivisible: all its GPUs at one site for its whole run, one start in its window),
    it *fits* when it and the jobs given before can all be packed together into
    ``free_gpus`` (each at an allowed site, all its GPUs free in every slot of one start in its
    window; for intervals on identical GPUs a count per (site, slot) within the free GPUs is a
    packing), and the shares are of one GPU type,
    so a tenant's dominant share is its GPU-hours over the type's capacity and the lowest
    weighted share is the lowest :math:`a_i / w_i`. Before the filling, each tenant below its
    guaranteed ``floor`` gets jobs the same way (lowest :math:`a_i / F_i` first) until its
    floor is reached or none of its jobs fits; the filling then shares the rest, the share
    counted above the floor, :math:`\max(a_i - F_i, 0) / w_i` (allocation :math:`F + \mathrm{DRF}`
    as in the module docstring, step 3). A job that does not fit is dropped for good
    (capacity only shrinks), and a tenant with no job left is done.

    Why this is the target and the water-filled :func:`reachable_drf` is not: a plan places
    whole jobs, so a tenant's GPU-hours are a sum of its jobs' GPU-hours packed into whole
    GPUs of one site. The continuous level can lie between two such sums (a tenant of 4 GPU-h
    jobs with a 30.4 GPU-h level is 5 % off whatever the plan does) or above what whole-job
    packing holds (4-GPU jobs that each need a whole 4-GPU site-hour). Each allocation here
    is a packing of whole jobs, so a plan can reach every target at once; the continuous
    level stays available as :func:`reachable_drf` (what divisible work would get, not a
    reachable plan).

    Each job is placed where it is least in the way of the jobs still waiting: the (site,
    start) whose slots the other waiting jobs press on least (each job's GPU-hours spread
    evenly over the (site, slot) cells it may use), then best-fit (the fewest free GPU-slots
    left over its run), then the earliest start and the first site. Without the first rule a
    job free to run anywhere takes the only site another tenant may use, and the exact check
    below has to move it (DRF's Algorithm 1
    assumes any task fits any free capacity; with placement constraints the order of the
    sites matters, cf. Ghodsi et al., "Choosy: Max-Min Fair Sharing for Datacenter Jobs with
    Constraints", EuroSys 2013); without the second small jobs fragment pools that a later
    gang needs. When this greedy placement finds no room, an exact check (a feasibility MILP
    over every given job's positions, :data:`REPACK_TIME_LIMIT_S`) may move the given jobs to
    make room; a job shape proved not to fit is not tried again. Tenants tie on share by
    their order; a tenant's jobs are tried in order of GPU-hours, largest first (first-fit
    decreasing: the big gangs are packed while there is room, the small jobs fill what is
    left, and the last steps towards the level are the finest; smallest first left 14 of 288
    V100 GPU-hours of the ``global`` bench unpacked, BENCHMARKS.md section 15), then fewest
    start positions, then position.

    Parameters
    ----------
    job_tenant
        Tenant position of each job, shape ``(N,)``, int in ``0..I-1``.
    job_gpus
        GPUs of each job (the whole gang, at one site), shape ``(N,)``. [-]
    job_slots
        Slots each job's run occupies, shape ``(N,)``, >= 1. [-]
    job_sites
        Sites each job may use, shape ``(N, S)``, bool.
    job_first, job_last
        First and last allowed start slot of each job, shape ``(N,)`` (last < first: none).
    free_gpus
        GPUs free per (site, slot) for these jobs, shape ``(S, T)``, >= 0; slots past ``T``
        are not limited. [-]
    weights
        Tenant weights, shape ``(I,)``, > 0. [-]
    slot_hours
        Length of a slot, > 0. [h]
    floor
        Guaranteed GPU-hours per tenant, shape ``(I,)`` (default none). [GPU·h]
    total_capacity
        The tenants' GPU-hours together stay at most this (default: no such limit). [GPU·h]
    job_gpu_hours
        What each job counts towards its tenant's share, shape ``(N,)`` (default
        ``gpus × slots × slot_hours``; the planner passes GPUs × work time, which a last
        part-slot makes shorter). [GPU·h]

    Returns
    -------
    (allocation, starts)
        GPU-hours given per tenant, shape ``(I,)`` [GPU·h] (each a sum of whole jobs'
        ``job_gpu_hours``); and each job's ``(site, start slot)``, shape
        ``(N, 2)``, ``-1`` for a job not given.

    Raises
    ------
    ValueError
        Shapes that disagree, a tenant position out of range, a negative GPU count, free
        capacity or floor, a job of no slot, a weight not > 0 or a slot length not > 0.
    """
    tenant = np.asarray(job_tenant, dtype=np.int64)
    gpus = np.asarray(job_gpus, dtype=float)
    dur = np.asarray(job_slots, dtype=np.int64)
    sites = np.asarray(job_sites, dtype=bool)
    first = np.asarray(job_first, dtype=np.int64)
    last = np.asarray(job_last, dtype=np.int64)
    free = np.array(free_gpus, dtype=float)
    w = np.asarray(weights, dtype=float)
    n_j, n_i = len(tenant), len(w)
    fl = np.zeros(n_i) if floor is None else np.asarray(floor, dtype=float)
    if (free.ndim != 2 or w.ndim != 1 or fl.shape != (n_i,) or sites.shape != (n_j, len(free))
            or any(a.shape != (n_j,) for a in (gpus, dur, first, last))):
        raise ValueError(f"job_by_job_drf: job_tenant, job_gpus, job_slots, job_first, "
                         f"job_last (N,), job_sites (N, S), free_gpus (S, T), weights (I,) and "
                         f"floor (I,) disagree: {tenant.shape}, {gpus.shape}, {dur.shape}, "
                         f"{first.shape}, {last.shape}, {sites.shape}, {free.shape}, "
                         f"{w.shape}, {fl.shape}")
    if n_j and (tenant.min() < 0 or tenant.max() >= n_i):
        raise ValueError(f"job_by_job_drf: a job's tenant position is outside 0..{n_i - 1}")
    if ((gpus < 0).any() or (free < 0).any() or (fl < 0).any() or (dur < 1).any()
            or not (w > 0).all() or not slot_hours > 0):
        raise ValueError("job_by_job_drf: GPUs, free GPUs and floors must be >= 0, every job "
                         "at least one slot, weights and the slot length > 0")
    n_t = free.shape[1]
    gh = (gpus * dur * float(slot_hours) if job_gpu_hours is None
          else np.asarray(job_gpu_hours, dtype=float))
    if gh.shape != (n_j,) or (gh < 0).any():
        raise ValueError(f"job_by_job_drf: job_gpu_hours must be >= 0 with shape ({n_j},), "
                         f"not {gh.shape}")
    limit = np.inf if total_capacity is None else float(total_capacity)
    tol = 1e-9 * max(float(gh.sum()), 1.0)
    n_starts = np.maximum(last - first + 1, 0) * sites.sum(axis=1)
    queue = [sorted(np.flatnonzero(tenant == i).tolist(),
                    key=lambda k: (-gh[k], n_starts[k], k)) for i in range(n_i)]
    held = np.zeros(n_i)
    starts = np.full((n_j, 2), -1, dtype=np.int64)

    # what the waiting jobs press on each (site, slot): GPU-hours spread over their cells
    span = np.zeros((n_j, n_t), dtype=bool)
    for k in range(n_j):
        span[k, max(int(first[k]), 0):min(int(last[k]) + int(dur[k]), n_t)] = True
    cells = sites.sum(axis=1) * span.sum(axis=1)
    density = np.where(cells > 0, gh / np.maximum(cells, 1), 0.0)
    press = np.einsum("k,ks,kt->st", density, sites.astype(float), span.astype(float))

    def leave(k: int) -> None:
        """Job ``k`` no longer waits: take its pressure off its cells."""
        press[np.ix_(sites[k], span[k])] -= density[k]

    def best_fit(k: int) -> tuple[int, int] | None:
        d, lo, hi = int(dur[k]), max(int(first[k]), 0), int(last[k])
        if hi < lo:
            return None
        best: tuple[float, float, int, int] | None = None
        for s in np.flatnonzero(sites[k]).tolist():
            row = np.concatenate([free[s], np.full(d, np.inf)])
            win = np.lib.stride_tricks.sliding_window_view(row, d)[lo:min(hi, n_t - 1) + 1]
            if not len(win):
                continue
            ok = win.min(axis=1) >= gpus[k] - 1e-9
            if not ok.any():
                continue
            prow = np.concatenate([press[s], np.zeros(d)])
            p = np.lib.stride_tricks.sliding_window_view(prow, d)[lo:lo + len(win)].sum(axis=1)
            left = np.where(np.isfinite(win), win - gpus[k], 0.0).sum(axis=1)
            key = np.where(ok, np.round(p, 9), np.inf)
            tie = np.flatnonzero(key == key.min())
            t = int(tie[np.argmin(left[tie])])
            cand = (float(key[t]), float(left[t]), lo + t, s)
            if best is None or cand < best:
                best = cand
        return None if best is None else (best[3], best[2])

    free0 = free.copy()
    no_fit: set[tuple] = set()      # jobs proved not to fit; capacity only shrinks

    def shape(k: int) -> tuple:
        return (float(gpus[k]), int(dur[k]), int(first[k]), int(last[k]),
                sites[k].tobytes())

    def repack(k: int) -> bool:
        """Whether the jobs given so far and ``k`` fit together, moved anywhere they may run.

        An exact check (a feasibility MILP, HiGHS through :func:`scipy.optimize.milp`); on
        success the packing it found replaces the greedy one.
        """
        from scipy.optimize import LinearConstraint, milp
        from scipy.sparse import coo_matrix

        given = np.flatnonzero(starts[:, 0] >= 0).tolist() + [k]
        cols, rows_, vals, eq_rows = [], [], [], []
        pos: list[tuple[int, int, int]] = []
        for n, j in enumerate(given):
            d, lo, hi = int(dur[j]), max(int(first[j]), 0), min(int(last[j]), n_t - 1)
            for s in np.flatnonzero(sites[j]).tolist():
                for t in range(lo, hi + 1):
                    if free0[s, t:t + d].min(initial=np.inf) < gpus[j] - 1e-9:
                        continue
                    c = len(pos)
                    pos.append((j, s, t))
                    eq_rows.append((n, c))
                    for u in range(t, min(t + d, n_t)):
                        rows_.append(s * n_t + u)
                        cols.append(c)
                        vals.append(gpus[j])
        if not pos:
            return False
        n_c, n_g = len(pos), len(given)
        cap_a = coo_matrix((vals, (rows_, cols)), shape=(free0.size, n_c)).tocsr()
        used = np.flatnonzero(cap_a.getnnz(axis=1))
        eq_a = coo_matrix((np.ones(len(eq_rows)), ([r for r, _c in eq_rows],
                                                   [c for _r, c in eq_rows])),
                          shape=(n_g, n_c))
        res = milp(np.zeros(n_c), integrality=np.ones(n_c),
                   bounds=(0, 1),
                   constraints=[LinearConstraint(cap_a[used], -np.inf,
                                                 free0.reshape(-1)[used] + 1e-9),
                                LinearConstraint(eq_a, 1, 1)],
                   options={"time_limit": REPACK_TIME_LIMIT_S})
        if res.x is None or res.status not in (0,):
            return False
        free[:] = free0
        for c in np.flatnonzero(res.x > 0.5).tolist():
            j, s, t = pos[c]
            free[s, t:t + int(dur[j])] -= gpus[j]
            starts[j] = (s, t)
        return True

    def give(i: int) -> bool:
        """Give tenant ``i`` its next job that fits; False when none does (it is done)."""
        while queue[i]:
            k = queue[i].pop(0)
            leave(k)
            if held.sum() + gh[k] > limit + tol or shape(k) in no_fit:
                continue
            at = best_fit(k)
            if at is not None:
                s, t = at
                free[s, t:t + int(dur[k])] -= gpus[k]
                starts[k] = at
            elif not repack(k):
                no_fit.add(shape(k))
                continue
            held[i] += gh[k]
            return True
        return False

    # the guaranteed floors first, the tenant furthest below its floor first
    short = fl > tol
    while short.any():
        i = int(np.argmin(np.where(short, held / np.where(fl > 0, fl, 1.0), np.inf)))
        if not give(i):
            short[i] = False
        short &= held < fl - tol
    # then DRF Algorithm 1 on the rest: the lowest weighted share above the floor gets its next
    # job (A = F + DRF, module docstring step 3)
    active = np.array([bool(q) for q in queue])
    while active.any():
        i = int(np.argmin(np.where(active, np.maximum(held - fl, 0.0) / w, np.inf)))
        if not give(i):
            active[i] = False
    return held, starts


def horizon_hours(problem: Any) -> float:
    """Length of the planning horizon. [h]"""
    return len(problem.slots) * problem.slot_minutes / 60.0


def quota_floors(problem: Any, gpu_types: list[str], demand: np.ndarray) -> np.ndarray:
    """Guaranteed GPU-hours over the horizon per (tenant, type), capped at demand. [GPU·h]

    Parameters
    ----------
    problem
        The planning problem (its ``tenants`` and horizon).
    gpu_types
        Column order, shape ``(R,)``.
    demand
        Demand per tenant (``problem.tenants`` order) and type, shape ``(I, R)``. [GPU·h]
    """
    h = horizon_hours(problem) / 24.0
    q = np.array([[float(t.quota_gpu_hours_per_day.get(g, 0.0)) * h for g in gpu_types]
                  for t in problem.tenants.values()]).reshape(len(problem.tenants),
                                                              len(gpu_types))
    return np.minimum(q, demand)


def demand_gpu_hours(problem: Any, jobs: list[int] | None = None
                     ) -> tuple[list[str], list[str], np.ndarray]:
    """GPU-hours asked per (tenant, GPU type).

    Parameters
    ----------
    problem
        The planning problem; tenants are ``problem.tenants`` (jobs of other tenants are
        left out).
    jobs
        Job positions to count (default all).

    Returns
    -------
    (tenants, gpu_types, demand)
        Demand shape ``(I, R)``. [GPU·h]
    """
    names = list(problem.tenants)
    types = sorted({g for s in problem.sites for g in s.gpus})
    tpos = {t: i for i, t in enumerate(names)}
    gpos = {g: i for i, g in enumerate(types)}
    out = np.zeros((len(names), len(types)))
    for k in (range(len(problem.jobs)) if jobs is None else jobs):
        j = problem.jobs[k]
        if j.tenant in tpos and j.gpu_type in gpos:
            out[tpos[j.tenant], gpos[j.gpu_type]] += j.gpus * j.duration_hours
    return names, types, out


def placed_gpu_hours(problem: Any, result: Any, names: list[str], types: list[str]
                     ) -> np.ndarray:
    """GPU-hours a plan places per (tenant, type), from its placements (work minutes). [GPU·h]"""
    tenant_of = {j.id: j.tenant for j in problem.jobs}
    tpos = {t: i for i, t in enumerate(names)}
    gpos = {g: i for i, g in enumerate(types)}
    out = np.zeros((len(names), len(types)))
    for p in result.placements:
        t, g = tpos.get(tenant_of.get(p.job_id, "")), gpos.get(p.gpu_type)
        if t is not None and g is not None:
            minutes = (p.end - p.start).total_seconds() / 60.0 - p.overhead_minutes
            out[t, g] += p.gpus * minutes / 60.0
    return out


def quota_shortfalls(problem: Any, result: Any) -> list[tuple[str, str, float, float]]:
    """Guaranteed quotas a plan does not meet, recounted from its placements.

    Returns
    -------
    list of (tenant, gpu_type, quota_gpu_hours, placed_gpu_hours)
        One per (tenant, type) whose quota over the horizon, capped at the tenant's demand
        (:func:`quota_floors`), is above the GPU-hours placed (tolerance 1e-6 GPU·h); empty
        without tenants.
    """
    if not getattr(problem, "tenants", None):
        return []
    names, types, demand = demand_gpu_hours(problem)
    floor = quota_floors(problem, types, demand)
    placed = placed_gpu_hours(problem, result, names, types)
    return [(names[i], types[g], float(floor[i, g]), float(placed[i, g]))
            for i, g in zip(*np.nonzero(placed < floor - 1e-6), strict=True)]


def define_fairness_constraints(m: Any, patterns: Any) -> None:
    """Fair-share and quota rows with penalised shortfalls (module docstring, step 4).

    Parameters
    ----------
    m
        The :class:`~carbonsched.plan.model.PlanModel` being built.
    patterns
        The piece patterns ``m`` holds (:class:`~carbonsched.plan.sets.PiecePatterns`), in the
        order of ``m.z``.
    """
    sets = m.sets
    prob = sets.problem
    ft: FairTargets = prob.fair_targets
    tpos = {t: i for i, t in enumerate(ft.tenants)}
    gh = sets.job_gpus * sets.job_minutes / 60.0          # GPU-hours of each job
    terms: dict[tuple[int, str], list] = {}
    for i, j in enumerate(m.options[:, 0].tolist()):
        job = prob.jobs[j]
        if job.tenant in tpos:
            terms.setdefault((tpos[job.tenant], job.gpu_type), []).append((m.x[i], gh[j]))
    for i, j in enumerate(patterns.job.tolist()):
        job = prob.jobs[j]
        if job.tenant in tpos:
            terms.setdefault((tpos[job.tenant], job.gpu_type), []).append((m.z[i], gh[j]))
    pen = float(sets.penalty_per_gpu_hour)
    extra = []
    for rows, types, factor, tag in ((ft.target_gpu_hours, ft.gpu_types, FAIR_PENALTY_FACTOR,
                                      "fair"),
                                     (ft.floor_gpu_hours, ft.floor_types, QUOTA_PENALTY_FACTOR,
                                      "quota")):
        for (ti, gi) in zip(*np.nonzero(rows > 1e-9), strict=True):
            need = float(rows[ti, gi])
            t = terms.get((int(ti), types[gi]), [])
            short = m.lp.add_variable(f"{tag}short{ti}_{gi}", 0, need)
            m.fair_vars[f"{tag}:{ft.tenants[ti]}:{types[gi]}"] = short
            m.lp.addConstraint(pulp.LpAffineExpression(t + [(short, 1.0)]) >= need,
                               name=f"{tag}{ti}_{gi}")
            # a GPU-hour short weighs more on a small share: the shortfall is charged relative
            # to the row (the largest row of the type at the base price), so no tenant is the
            # one left short because its share is small
            rel = float(rows[:, gi].max()) / need
            extra.append((short, factor * pen * rel))
    if extra:
        m.lp.setObjective(m.lp.objective + pulp.LpAffineExpression(extra))
    if ft.capacity_gpu_hours is not None:
        # the whole the shares are of: each binding type's GPU-hours for the tenants, as placed
        # by the carbon-only plan (power caps could otherwise trade one type for another)
        for gi, g in enumerate(ft.gpu_types):
            t = [term for ti in range(len(ft.tenants)) for term in terms.get((ti, g), [])]
            cap = float(ft.capacity_gpu_hours[gi]) + 1e-6
            if t and sum(w for _v, w in t) > cap:
                m.lp.addConstraint(pulp.LpAffineExpression(t) <= cap, name=f"faircap{gi}")


def fairness_wanted(problem: Any) -> bool:
    """True when the problem declares tenants and a fairness above 0.

    Fairness 0 is the carbon-only plan: tenants, weights and quotas are then not used.
    """
    tenants = getattr(problem, "tenants", None) or {}
    return (bool(tenants) and getattr(problem, "fair_targets", None) is None
            and getattr(problem, "fairness", 0.0) > 0)


def fair_targets(problem: Any, carbon_plan: Any) -> tuple[FairTargets, np.ndarray,
                                                          np.ndarray, list[str]]:
    """The fair allocation from the carbon-only plan (module docstring, steps 1-3).

    On each binding type the allocation is given job by job (:func:`job_by_job_drf`, DRF's
    Algorithm 1): the tenant with the lowest weighted share gets its next whole job if it
    fits, at a site it may run at (:attr:`carbonsched.plan.sets.PlanSets.job_sites`: allowed
    sites with the type, the gang's shape and the power for it) and a start in its window;
    each (site, slot) offers the GPUs running work and the carbon-only plan's inference
    leave, all of them together at most the type's capacity :math:`C_g`. A target is then a
    set of whole jobs packed together, which a plan can reach.

    Returns
    -------
    (FairTargets, allocation, capacity, binding)
        Allocation :math:`A_{ig}` over every type, shape ``(I, G)`` [GPU·h]; capacity per type
        (the carbon-only plan's placed GPU-hours where the type binds, else the demand),
        shape ``(G,)`` [GPU·h]; the binding types.
    """
    from carbonsched.plan.sets import compile_sets

    sets = compile_sets(problem, columns=False)
    placeable = [int(k) for k in sets.placeable]
    names, types, demand = demand_gpu_hours(problem, placeable)
    placed = _placed_by_site(problem, carbon_plan, names, types, list(sets.site)).sum(axis=1)
    cells_gpu_h = _free_cells(sets, carbon_plan, types)          # (G, S, T) GPU-h per cell
    total = demand.sum(axis=0)
    bind = total > placed + 1e-6
    cap = np.where(bind, placed, total)
    floor = quota_floors(problem, types, demand)
    weights = np.array([t.weight for t in problem.tenants.values()], dtype=float)
    alloc = demand.copy()
    groups: dict[str, tuple[list[tuple[str, ...]], np.ndarray]] = {}
    if bind.any() and len(names):
        tpos = {t: i for i, t in enumerate(names)}
        # each job uses one GPU type, so the filling runs per binding type (a single-resource
        # weighted max-min); coupling the types would strand one type's hours when another
        # runs out
        for g in np.flatnonzero(bind).tolist():
            jobs = [k for k in placeable
                    if problem.jobs[k].gpu_type == types[g] and problem.jobs[k].tenant in tpos]
            if not jobs:
                continue
            jt = np.array([tpos[problem.jobs[k].tenant] for k in jobs])
            fl_g = np.minimum(floor[:, g], demand[:, g])
            # the target: whole jobs given one by one (DRF Algorithm 1), packed into the
            # GPUs free per (site, slot)
            # job GPU-hours as the demand counts them (work time, not whole slots)
            gh = np.array([problem.jobs[k].gpus * problem.jobs[k].duration_hours for k in jobs])
            held, at = job_by_job_drf(
                jt, np.array([problem.jobs[k].gpus for k in jobs]), sets.job_dur[jobs],
                sets.job_sites[jobs], sets.job_first[jobs], sets.job_last[jobs],
                cells_gpu_h[g] / sets.slot_hours, weights, slot_hours=sets.slot_hours,
                floor=fl_g, total_capacity=float(cap[g]), job_gpu_hours=gh)
            alloc[:, g] = held
            # the residency groups (the sites a job may use), with what each tenant got there
            keys: list[tuple[int, ...]] = []
            for k in jobs:
                key = tuple(np.flatnonzero(sets.job_sites[k]).tolist())
                if key not in keys:
                    keys.append(key)
            a = np.zeros((len(names), len(keys)))
            for n, k in enumerate(jobs):
                if at[n, 0] >= 0:
                    a[jt[n], keys.index(tuple(np.flatnonzero(sets.job_sites[k]).tolist()))] \
                        += gh[n]
            groups[types[g]] = ([tuple(sets.site[s] for s in key) for key in keys], a)
    phi = float(problem.fairness)
    binding = [types[g] for g in np.flatnonzero(bind)]
    ft = FairTargets(tenants=names, gpu_types=binding,
                     target_gpu_hours=phi * alloc[:, bind],
                     floor_gpu_hours=floor, floor_types=types,
                     capacity_gpu_hours=cap[bind], groups=groups)
    return ft, alloc, cap, binding


def _free_cells(sets: Any, carbon_plan: Any, types: list[str]) -> np.ndarray:
    """GPU-hours per (type, site, slot) the jobs may share, shape ``(G, S, T)``. [GPU·h]

    The GPUs left by running work (:attr:`PlanSets.gpu_cap`) less the carbon-only plan's
    inference GPUs, times the slot length.
    """
    n_s, n_t, _n_g = sets.gpu_cap.shape
    out = np.zeros((len(types), n_s, n_t))
    gpos = {g: i for i, g in enumerate(sets.gpu_type)}
    for gi, g in enumerate(types):
        if g in gpos:
            out[gi] = sets.gpu_cap[:, :, gpos[g]]
    spos = {s: i for i, s in enumerate(sets.site)}
    tpos = {g: i for i, g in enumerate(types)}
    sph = sets.slots_per_hour
    for ip in getattr(carbon_plan, "inference", []) or []:
        s, g = spos.get(ip.site), tpos.get(ip.gpu_type)
        if s is None or g is None:
            continue
        t = int(round((ip.hour - sets.slot[0]) / pd.Timedelta(minutes=sets.slot_minutes)))
        if 0 <= t < n_t:
            out[g, s, t:t + sph] -= ip.gpus
    return np.maximum(out, 0.0) * sets.slot_hours


def _placed_by_site(problem: Any, result: Any, names: list[str], types: list[str],
                    sites: list[str]) -> np.ndarray:
    """GPU-hours a plan places for the tenants per (type, site), shape ``(G, S)``. [GPU·h]"""
    tenant_of = {j.id: j.tenant for j in problem.jobs}
    known = set(names)
    gpos = {g: i for i, g in enumerate(types)}
    spos = {s: i for i, s in enumerate(sites)}
    out = np.zeros((len(types), len(sites)))
    for p in result.placements:
        g, s = gpos.get(p.gpu_type), spos.get(p.site)
        if tenant_of.get(p.job_id) in known and g is not None and s is not None:
            minutes = (p.end - p.start).total_seconds() / 60.0 - p.overhead_minutes
            out[g, s] += p.gpus * minutes / 60.0
    return out


def solve_fair(problem: Any, solve: Callable[..., Any], time_limit_s: float, **kw: Any) -> Any:
    """Solve the carbon-only plan, then the fair plan; the fair one with its tenant table.

    Parameters
    ----------
    problem
        The planning problem, with ``tenants`` and ``fairness``.
    solve
        :func:`carbonsched.plan.solve.solve_plan`.
    time_limit_s
        Budget of both solves together (the carbon-only plan gets 40 %). [s]
    **kw
        Passed on to ``solve``.

    Returns
    -------
    PlanResult
        The fair plan; ``tenants`` rows (:func:`tenant_rows`), ``totals`` with
        ``carbon_only_emissions_kg`` and ``fairness_cost_kg`` [kg CO2e], and a note.
    """
    started = time.perf_counter()
    plain = dataclasses.replace(problem, tenants={}, fairness=0.0)
    carbon = solve(plain, time_limit_s=0.4 * time_limit_s, **kw)
    ft, alloc, cap, binding = fair_targets(problem, carbon)
    fair_problem = dataclasses.replace(problem, fair_targets=ft)
    left = max(time_limit_s - (time.perf_counter() - started), 0.2 * time_limit_s)
    res = solve(fair_problem, time_limit_s=left, **kw)
    method = getattr(getattr(res, "solver", None), "method", None)
    if method not in FAIR_METHODS:
        # the fair rows live in the direct MILP only: a greedy fallback ignores them
        return fairness_not_applied(
            problem, res, f"the fair plan fell back to the {method or 'unknown'} plan "
            f"({getattr(res.solver, 'status', '')}), which does not model fair shares",
            (alloc, cap, binding), carbon)
    res.tenants = tenant_rows(problem, res, alloc, cap, binding)
    e_fair, e_carbon = res.totals.get("emissions_kg", 0.0), carbon.totals.get("emissions_kg",
                                                                             0.0)
    res.totals["carbon_only_emissions_kg"] = float(e_carbon)
    res.totals["fairness_cost_kg"] = float(e_fair - e_carbon)
    pct = 100.0 * (e_fair - e_carbon) / e_carbon if e_carbon > 0 else 0.0
    unmet = [r["tenant"] for r in res.tenants if r["quota_met"] is False]
    res.notes.append(
        f"fairness: {len(res.tenants)} tenant(s), fairness {float(problem.fairness):g}, "
        f"binding GPU types {', '.join(binding) or 'none'}; carbon cost of fairness "
        f"{e_fair - e_carbon:+.3f} kg ({pct:+.2f} %) against the carbon-only plan"
        + (f"; quota not met for {', '.join(unmet)}" if unmet else ""))
    return res


FAIR_METHODS = frozenset({"milp", "none"})
"""Solver methods whose plan holds the fair-share rows (:func:`define_fairness_constraints`
is built into the direct MILP only; ``none``: nothing to decide)."""

NOT_APPLIED_NOTE = "fairness not applied"
"""How the plan's note (and the CLI's tenants table) starts when a plan asked for fair shares
but the path that made it does not model them."""


def fairness_not_applied(problem: Any, res: Any, why: str,
                         targets: tuple[np.ndarray, np.ndarray, list[str]] | None = None,
                         carbon_plan: Any = None) -> Any:
    """Say in ``res`` that the tenants' fair shares were not applied, and show how far off.

    The plan gets the tenant rows (:func:`tenant_rows`) with ``fair_applied`` false, the
    count in ``totals["fairness_not_applied_tenants"]`` and a note starting with
    :data:`NOT_APPLIED_NOTE` that names the path (``why``); the shares are what the plan
    placed, the targets what weighted DRF would give (from ``targets``, or from ``res``
    itself as the carbon-only plan when none are given).

    Parameters
    ----------
    problem
        The planning problem (``tenants`` and ``fairness``).
    res
        The plan made without the fair-share rows (greedy fallback, a baseline); changed in
        place and returned.
    why
        The path that made the plan, in words.
    targets
        ``(allocation, capacity, binding)`` of :func:`fair_targets`, when known.
    carbon_plan
        The carbon-only plan, for the carbon cost (default: none reported).
    """
    if not getattr(problem, "tenants", None):
        return res
    if targets is None:
        _ft, alloc, cap, binding = fair_targets(problem, res)
    else:
        alloc, cap, binding = targets
    res.tenants = [dict(r, fair_applied=False)
                   for r in tenant_rows(problem, res, alloc, cap, binding)]
    res.totals["fairness_not_applied_tenants"] = len(res.tenants)
    if carbon_plan is not None:
        e_c = float(carbon_plan.totals.get("emissions_kg", 0.0))
        res.totals["carbon_only_emissions_kg"] = e_c
        res.totals["fairness_cost_kg"] = float(res.totals.get("emissions_kg", 0.0)) - e_c
    res.notes = [n for n in res.notes if not n.startswith(NOT_APPLIED_NOTE)]
    off = [r["tenant"] for r in res.tenants
           if r["target_share"] > SHARE_EPS
           and abs(r["dominant_share"] - r["target_share"]) > 0.05 * r["target_share"]]
    res.notes.append(
        f"{NOT_APPLIED_NOTE}: {why}; fairness {float(problem.fairness):g} was asked for "
        f"{len(res.tenants)} tenant(s): their shares are as placed, not held to the "
        f"weighted-DRF targets" + (f" ({len(off)} more than 5 % off: {', '.join(off)})"
                                   if off else ""))
    return res


def tenant_rows(problem: Any, result: Any, alloc: np.ndarray, cap: np.ndarray,
                binding: list[str]) -> list[dict[str, Any]]:
    """One row per tenant: weight, GPU-hours, dominant share and target, quota met.

    Returns
    -------
    list of dict
        ``tenant``, ``weight`` [-], ``demand_gpu_hours``, ``placed_gpu_hours`` [GPU·h],
        ``dominant_share`` and ``target_share`` (largest over binding types of GPU-hours over
        the type's capacity; 0 when nothing binds) [-], ``dominant_gpu_type``,
        ``quota_gpu_hours`` (over the horizon, capped at demand) [GPU·h], ``quota_met``
        (None without a quota) and ``fair_applied`` (false when the plan's path ignored the
        fair-share rows, :func:`fairness_not_applied`).
    """
    names, types, demand = demand_gpu_hours(problem)
    placed = placed_gpu_hours(problem, result, names, types)
    floor = quota_floors(problem, types, demand)
    b = [types.index(g) for g in binding]
    rows = []
    for i, name in enumerate(names):
        t = problem.tenants[name]
        shares = placed[i, b] / np.maximum(cap[b], SHARE_EPS) if b else np.zeros(0)
        target = alloc[i, b] / np.maximum(cap[b], SHARE_EPS) if b else np.zeros(0)
        dom = int(np.argmax(target)) if len(target) else -1
        has_quota = bool(floor[i].sum() > 0)
        rows.append({
            "tenant": name, "weight": float(t.weight),
            "demand_gpu_hours": float(demand[i].sum()),
            "placed_gpu_hours": float(placed[i].sum()),
            "dominant_share": float(shares.max()) if len(shares) else 0.0,
            "target_share": float(target.max()) if len(target) else 0.0,
            "dominant_gpu_type": binding[dom] if dom >= 0 else None,
            "quota_gpu_hours": float(floor[i].sum()),
            "quota_met": bool((placed[i] >= floor[i] - 1e-6).all()) if has_quota else None,
            "fair_applied": True,
        })
    return rows
