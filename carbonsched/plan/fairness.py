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
   would leave one type's hours unallocated when another type runs out.
   Allocation :math:`A_{ig} = F_{ig} + \mathrm{DRF}_{ig}`.
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
import pulp

FAIR_PENALTY_FACTOR = 2.0
"""Shortfall of a fair-share row, per GPU-hour, in units of the unplaced penalty per
GPU-hour: above it, so swapping one tenant's job for another's to reach the shares always
pays, whatever the carbon difference. A design choice of this project. [-]"""
QUOTA_PENALTY_FACTOR = 4.0
"""Shortfall of a guaranteed quota row, per GPU-hour, in units of the unplaced penalty per
GPU-hour: above the fair-share rows (a quota is guaranteed first). A design choice. [-]"""
SHARE_EPS = 1e-9


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

    Returns
    -------
    (FairTargets, allocation, capacity, binding)
        Allocation :math:`A_{ig}` over every type, shape ``(I, G)`` [GPU·h]; capacity per type
        (the carbon-only plan's placed GPU-hours where the type binds, else the demand),
        shape ``(G,)`` [GPU·h]; the binding types.
    """
    from carbonsched.plan.sets import compile_sets

    sets = compile_sets(problem, columns=False)
    names, types, demand = demand_gpu_hours(problem, [int(k) for k in sets.placeable])
    placed = placed_gpu_hours(problem, carbon_plan, names, types).sum(axis=0)
    total = demand.sum(axis=0)
    bind = total > placed + 1e-6
    cap = np.where(bind, placed, total)
    floor = quota_floors(problem, types, demand)
    weights = np.array([t.weight for t in problem.tenants.values()], dtype=float)
    alloc = demand.copy()
    if bind.any() and len(names):
        b = np.flatnonzero(bind)
        f = np.minimum(floor[:, b], demand[:, b])
        left = np.maximum(cap[b] - f.sum(axis=0), 0.0)
        # each job uses one GPU type, so a tenant's demand is one vector per type, not one
        # Leontief vector: filled per binding type (weighted DRF of one resource, i.e. weighted
        # max-min); coupling the types would strand one type's hours when another runs out
        for k in range(len(b)):
            alloc[:, b[k]] = f[:, k] + weighted_drf((demand[:, b] - f)[:, [k]], left[[k]],
                                                    weights)[:, 0]
    phi = float(problem.fairness)
    binding = [types[g] for g in np.flatnonzero(bind)]
    ft = FairTargets(tenants=names, gpu_types=binding,
                     target_gpu_hours=phi * alloc[:, bind],
                     floor_gpu_hours=floor, floor_types=types,
                     capacity_gpu_hours=cap[bind])
    return ft, alloc, cap, binding


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
