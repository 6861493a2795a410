"""Typed planner outcomes: status, solver record, plan result and the independent score.

Emissions accounting (used by every policy and by :func:`score_plan`): per site and hour,
facility power = IT power × PUE; absorbed green surplus = min(surplus, facility power) at zero
marginal carbon; emissions [kg] = (facility energy − absorbed) [kWh] × CI [g/kWh] / 1000
(GHG Protocol Scope 2 Guidance, 2015, location-based: activity data × emission factor).
A job's or inference placement's share of a site-hour's emissions is proportional to its
facility energy in that hour.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np
import pandas as pd

from carbonsched.domain import InferencePlacement, Placement, Unplaced
from carbonsched.errors import InfeasiblePlanError
from carbonsched.timeaxis import HOUR


class PlanStatus(StrEnum):
    """What the planner can truthfully say about a plan."""

    OPTIMAL = "optimal"
    """Solver proved optimality within the requested relative gap (``mip_gap``)."""
    FEASIBLE = "feasible"
    """A feasible plan whose proven gap to the bound is above the requested one (time limit)."""
    INFEASIBLE = "infeasible"
    """No plan satisfies a constraint family (``SolverRecord.infeasible_family``)."""
    NO_SOLUTION = "no_solution"
    """The solver found nothing within the limit and no fallback was possible."""
    HEURISTIC = "heuristic"
    """A feasible plan from a heuristic (baseline, or fallback when the solver had none)."""
    ERROR = "error"
    """The solver returned a solution that fails the recount (a value that is not whole, a job
    placed twice, a capacity, power or SLO row broken): no plan is made from it
    (``SolverRecord.violations`` says what failed)."""


@dataclass
class SolverRecord:
    """How a plan was obtained.

    Attributes
    ----------
    name
        ``"highs"``, ``"cbc"``, or the heuristic's name.
    status
        The planner status (same as ``PlanResult.status``).
    mip_gap
        (objective − bound) / |objective|, from the solver's proven bound; None if no bound.
    seconds, build_seconds, solve_seconds
        Wall time in total, building the model and inside the solver. [s]
    objective
        Objective of the returned plan: emissions plus unplaced penalty. [kg]
    bound
        Proven lower bound on the objective (full LP or branch-and-bound bound). [kg]
    method
        ``"milp"`` (direct model), ``"colgen"`` (column generation + repair MIP) or heuristic.
    infeasible_family
        Constraint family that makes the model infeasible, when infeasible.
    note
        Free text for a person (fallbacks, limits hit).
    """

    name: str
    status: PlanStatus
    mip_gap: float | None = None
    seconds: float = 0.0
    build_seconds: float = 0.0
    solve_seconds: float = 0.0
    objective: float | None = None
    bound: float | None = None
    method: str = ""
    infeasible_family: str | None = None
    note: str = ""
    violations: dict[str, int] = field(default_factory=dict)
    """What the recount of the solver's solution found, by family (empty when it passed)."""
    greedy_unplaced: int | None = None
    """With the greedy fallback: jobs it left unplaced that passed the pre-check (an exact
    solve with a longer limit may place them). [-]"""


@dataclass
class PlanResult:
    """A plan: placements, inference allocation, unplaced jobs with reasons, totals."""

    status: PlanStatus
    solver: SolverRecord
    placements: list[Placement] = field(default_factory=list)
    inference: list[InferencePlacement] = field(default_factory=list)
    unplaced: list[Unplaced] = field(default_factory=list)
    totals: dict[str, float] = field(default_factory=dict)

    def raise_for_status(self) -> PlanResult:
        """Return self, or raise :class:`InfeasiblePlanError` if the plan is infeasible."""
        if self.status == PlanStatus.INFEASIBLE:
            raise InfeasiblePlanError(self.solver.infeasible_family or "unknown",
                                      self.solver.note)
        return self


@dataclass
class Score:
    """A plan re-scored from its placements alone, with the given signals.

    Attributes
    ----------
    emissions_kg
        Emissions net of absorbed surplus. [kg CO2e]
    energy_kwh
        Facility energy (IT × PUE). [kWh]
    surplus_absorbed_kwh
        Green surplus absorbed. [kWh]
    capacity_violations
        (site, hour, GPU type) cells over their GPU count. [-]
    power_cap_violations
        (site, hour) cells over the IT power cap (PDU/UPS). [-]
    facility_cap_violations
        (site, hour) cells whose facility power, IT × the PUE the cap is planned against
        (``pue_hi_95`` when the signals carry it, else ``pue``: the actual PUE when scoring on
        actual signals), is over the site's grid-connection cap ``facility_power_cap_kw``. [-]
    slo_violations
        Inference placements outside the SLO, at a site lacking the type, or demand left
        unserved (one per demand short of GPUs). [-]
    deadline_misses
        Placements starting before the earliest start or ending after the deadline, or
        running outside the horizon. [-]
    gang_violations
        Jobs placed more than once, split, with the wrong GPU count or type, or for the
        wrong duration, or at a site not allowed. [-]
    unplaced_gpu_hours
        GPU-hours of jobs the plan does not place. [GPU·h]
    objective
        emissions_kg + penalty × GPU-hours of unplaced jobs that could run alone (the planner's
        objective; jobs the pre-check rejects are left out, they are the same for any plan).
        [kg]
    """

    emissions_kg: float
    energy_kwh: float
    surplus_absorbed_kwh: float
    capacity_violations: int
    power_cap_violations: int
    facility_cap_violations: int
    slo_violations: int
    deadline_misses: int
    gang_violations: int
    unplaced_gpu_hours: float
    objective: float

    def as_dict(self) -> dict[str, Any]:
        """Plain dict (JSON-ready)."""
        return dict(self.__dict__)


@dataclass
class SiteHourLoad:
    """Per site-hour IT power and per site-hour-type GPUs of a plan."""

    it_kw: np.ndarray          # (S, T)
    gpus: np.ndarray           # (S, T, G)


def emissions_by_site_hour(
    it_kw: np.ndarray, pue: np.ndarray, ci: np.ndarray, surplus_kw: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Facility energy, absorbed surplus and emissions per site-hour (1-hour slots).

    Parameters
    ----------
    it_kw, pue, ci, surplus_kw
        Arrays of shape ``(S, T)``: IT power [kW], PUE [-], CI [g/kWh], surplus [kW].

    Returns
    -------
    facility_kwh, absorbed_kwh, emissions_kg
        Arrays of shape ``(S, T)``. [kWh], [kWh], [kg]
    """
    facility = it_kw * pue
    absorbed = np.minimum(facility, surplus_kw)
    return facility, absorbed, (facility - absorbed) * ci / 1000.0


def build_plan_result(
    sets: Any,
    chosen: np.ndarray,
    inf_alloc: np.ndarray,
    status: PlanStatus,
    solver: SolverRecord,
    unplaced_reason: dict[int, tuple[Any, str]] | None = None,
) -> PlanResult:
    """Turn chosen options and an inference allocation into a :class:`PlanResult`.

    Parameters
    ----------
    sets
        :class:`~carbonsched.plan.sets.PlanSets`.
    chosen
        ``(P, 3)`` ``(job, site, start)`` positions, at most one per job.
    inf_alloc
        ``(D, S)`` integer GPUs serving each demand from each site.
    unplaced_reason
        Reason per job position for jobs not placed and not rejected by the pre-check
        (default ``InsufficientCapacity``).
    """
    from carbonsched.domain import ReasonCode

    prob = sets.problem
    n_s, n_t = sets.pue.shape
    it_kw = np.zeros((n_s, n_t))
    chosen = np.asarray(chosen, dtype=np.int64).reshape(-1, 3)
    for j, s, t in chosen:
        it_kw[s, t:t + sets.job_dur[j]] += sets.job_kw[j]
    inf_kw = inf_alloc * sets.inf_kw_per_gpu[:, None] if len(inf_alloc) else np.zeros((0, n_s))
    for d in range(len(inf_alloc)):
        it_kw[:, sets.inf_hour[d]] += inf_kw[d]
    facility, absorbed, em = emissions_by_site_hour(it_kw, sets.pue, sets.ci_g_per_kwh,
                                                    sets.surplus_kw)
    with np.errstate(divide="ignore", invalid="ignore"):
        em_per_it_kwh = np.where(it_kw > 0, em / np.where(it_kw > 0, it_kw, 1.0), 0.0)
    placements = []
    placed = set()
    for j, s, t in chosen:
        job = prob.jobs[j]
        d = int(sets.job_dur[j])
        placed.add(int(j))
        start = sets.slot[t]
        placements.append(Placement(
            job_id=job.id, site=sets.site[s], start=start, end=start + d * HOUR,
            gpu_type=job.gpu_type, gpus=job.gpus,
            energy_kwh=float(sets.job_kw[j] * sets.pue[s, t:t + d].sum()),
            emissions_kg=float(sets.job_kw[j] * em_per_it_kwh[s, t:t + d].sum()),
        ))
    infs = []
    for d, s in zip(*np.nonzero(inf_alloc > 0), strict=True):
        dem = prob.inference[d]
        t = sets.inf_hour[d]
        infs.append(InferencePlacement(
            area=dem.area, hour=dem.hour, site=sets.site[s], gpu_type=dem.gpu_type,
            gpus=int(inf_alloc[d, s]), energy_kwh=float(inf_kw[d, s] * sets.pue[s, t]),
            emissions_kg=float(inf_kw[d, s] * em_per_it_kwh[s, t]),
        ))
    unplaced = []
    unplaced_gpu_h = 0.0
    penalised_gpu_h = 0.0
    for k, job in enumerate(prob.jobs):
        if k in placed:
            continue
        unplaced_gpu_h += job.gpus * job.duration_hours
        if k not in sets.reasons:
            penalised_gpu_h += job.gpus * job.duration_hours
        if k in sets.reasons:
            code, detail = sets.reasons[k]
        elif unplaced_reason and k in unplaced_reason:
            code, detail = unplaced_reason[k]
        else:
            code, detail = (ReasonCode.INSUFFICIENT_CAPACITY,
                            "feasible alone, but the GPUs or power were needed by other work")
        unplaced.append(Unplaced(job_id=job.id, reason=code, detail=detail))
    emissions = float(em.sum())
    totals = {
        "energy_kwh": float(facility.sum()),
        "it_energy_kwh": float(it_kw.sum()),
        "emissions_kg": emissions,
        "surplus_absorbed_kwh": float(absorbed.sum()),
        "unplaced_gpu_hours": unplaced_gpu_h,
        "objective": emissions + sets.penalty_per_gpu_hour * penalised_gpu_h,
        "jobs_placed": float(len(placements)),
        "jobs_unplaced": float(len(unplaced)),
    }
    return PlanResult(status=status, solver=solver, placements=placements, inference=infs,
                      unplaced=unplaced, totals=totals)


VIOLATION_FIELDS = ("gang_violations", "deadline_misses", "capacity_violations",
                    "power_cap_violations", "facility_cap_violations", "slo_violations")
"""The :class:`Score` counts that a trustworthy plan has at zero."""


def recount_violations(problem: Any, result: PlanResult) -> dict[str, int]:
    """Recount a plan against every hard constraint; the families it breaks, with counts.

    Each job at most once and as specified (gang), inside its window and the horizon
    (deadline), GPUs per (site, hour, type) (capacity), IT power per (site, hour) (power cap),
    facility power per (site, hour) at the PUE's upper bound (grid-connection cap) and
    inference served in full within its SLO (SLO) — all by :func:`score_plan`, from the
    placements alone. Works on the problem's own slot index, whatever its length or first hour.

    Returns
    -------
    dict
        ``{field: count}`` for every :data:`VIOLATION_FIELDS` entry above zero; empty when the
        plan keeps every constraint.
    """
    sc = score_plan(problem, result)
    return {f: int(getattr(sc, f)) for f in VIOLATION_FIELDS if getattr(sc, f) > 0}


def score_plan(problem: Any, result: PlanResult, signals: pd.DataFrame | None = None) -> Score:
    """Re-score a plan from its placements alone, trusting none of its numbers.

    Parameters
    ----------
    problem
        The :class:`~carbonsched.plan.sets.PlanningProblem` the plan was made for.
    result
        The plan.
    signals
        Signals to score with (e.g. the actual CI); default ``problem.signals``.

    Returns
    -------
    Score
        Emissions, energy, absorbed surplus and counts of every kind of violation.
    """
    from carbonsched.plan.sets import compile_sets

    sets = compile_sets(problem, signals)
    n_s, n_t = sets.pue.shape
    n_g = len(sets.gpu_type)
    spos = {s: i for i, s in enumerate(sets.site)}
    gpos = {g: i for i, g in enumerate(sets.gpu_type)}
    jobs = {j.id: (k, j) for k, j in enumerate(problem.jobs)}
    sites = {s.id: s for s in problem.sites}
    it_kw = np.zeros((n_s, n_t))
    gpus = np.zeros((n_s, n_t, n_g), dtype=np.int64)
    t0 = sets.slot[0]
    deadline_misses = 0
    gang = 0
    seen: dict[str, int] = {}
    for p in result.placements:
        seen[p.job_id] = seen.get(p.job_id, 0) + 1
        if p.job_id not in jobs or p.site not in spos:
            gang += 1
            continue
        k, job = jobs[p.job_id]
        s = spos[p.site]
        dur = int(round((p.end - p.start) / HOUR))
        if (p.gpus != job.gpus or p.gpu_type != job.gpu_type or dur != job.duration_hours
                or (job.allowed_sites and p.site not in job.allowed_sites)
                or sites[p.site].gpu_count(job.gpu_type) == 0):
            gang += 1
        if p.start < job.earliest_start or p.end > job.deadline:
            deadline_misses += 1
        a = int(round((p.start - t0) / HOUR))
        b = a + job.duration_hours
        if a < 0 or b > n_t:
            deadline_misses += 1
            a, b = max(a, 0), min(b, n_t)
        it_kw[s, a:b] += job.it_power_kw
        g = gpos.get(job.gpu_type)
        if g is not None:
            gpus[s, a:b, g] += job.gpus
    gang += sum(c - 1 for c in seen.values() if c > 1)
    slo = 0
    served: dict[tuple[str, pd.Timestamp, str], int] = {}
    demand = {}
    for dem in problem.inference:
        key = (dem.area, dem.hour, dem.gpu_type)
        demand[key] = (demand.get(key, (0, dem.slo_ms, dem.power_per_gpu_kw))[0] + dem.gpus,
                       dem.slo_ms, dem.power_per_gpu_kw)
    for ip in result.inference:
        key = (ip.area, ip.hour, ip.gpu_type)
        if key not in demand or ip.site not in spos:
            slo += 1
            continue
        _, slo_ms, kw = demand[key]
        site = sites[ip.site]
        if site.latency_ms.get(ip.area, float("inf")) > slo_ms or site.gpu_count(ip.gpu_type) == 0:
            slo += 1
        served[key] = served.get(key, 0) + ip.gpus
        t = int(round((ip.hour - t0) / HOUR))
        if 0 <= t < n_t:
            it_kw[spos[ip.site], t] += ip.gpus * kw
            g = gpos.get(ip.gpu_type)
            if g is not None:
                gpus[spos[ip.site], t, g] += ip.gpus
    slo += sum(1 for key, (need, _, _) in demand.items() if served.get(key, 0) < need)
    cap_viol = int((gpus > sets.gpu_count[:, None, :]).sum())
    pow_viol = int((it_kw > sets.it_power_cap_kw[:, None] + 1e-6).sum())
    fac_viol = int((it_kw * sets.pue_cap > sets.facility_power_cap_kw[:, None] + 1e-6).sum())
    facility, absorbed, em = emissions_by_site_hour(it_kw, sets.pue, sets.ci_g_per_kwh,
                                                    sets.surplus_kw)
    placed_ids = {p.job_id for p in result.placements}
    unplaced_gpu_h = float(sum(j.gpus * j.duration_hours for j in problem.jobs
                               if j.id not in placed_ids))
    penalised_gpu_h = float(sum(j.gpus * j.duration_hours for k, j in enumerate(problem.jobs)
                                if j.id not in placed_ids and k not in sets.reasons))
    emissions = float(em.sum())
    return Score(
        emissions_kg=emissions, energy_kwh=float(facility.sum()),
        surplus_absorbed_kwh=float(absorbed.sum()), capacity_violations=cap_viol,
        power_cap_violations=pow_viol, facility_cap_violations=fac_viol, slo_violations=slo,
        deadline_misses=deadline_misses,
        gang_violations=gang, unplaced_gpu_hours=unplaced_gpu_h,
        objective=emissions + sets.penalty_per_gpu_hour * penalised_gpu_h,
    )


def site_hour_power(problem: Any, result: PlanResult) -> list[dict[str, Any]]:
    """IT and facility power of a plan per site-hour, with the headroom under each cap.

    Computed from the placements and inference allocations alone (as :func:`score_plan`).

    Parameters
    ----------
    problem
        The :class:`~carbonsched.plan.sets.PlanningProblem` the plan was made for.
    result
        The plan.

    Returns
    -------
    list of dict
        One row per (site, slot), sites in problem order: ``site``, ``hour`` (UTC start),
        ``it_power_kw``, ``it_power_cap_kw``, ``it_headroom_kw`` [kW]; ``pue`` and
        ``pue_hi_95`` [-]; ``facility_power_kw`` (IT × PUE), ``facility_power_hi95_kw``
        (IT × the PUE's upper 95 % bound, what the grid-connection cap is planned against),
        ``facility_power_cap_kw`` and ``facility_headroom_kw`` (cap − facility_power_hi95_kw;
        both ``None`` at a site without a facility cap) [kW]. A negative headroom is a
        violation that :func:`score_plan` counts.
    """
    from carbonsched.plan.sets import compile_sets

    sets = compile_sets(problem)
    n_s, n_t = sets.pue.shape
    spos = {s: i for i, s in enumerate(sets.site)}
    t0 = sets.slot[0]
    kw_of = {j.id: j.it_power_kw for j in problem.jobs}
    it_kw = np.zeros((n_s, n_t))
    for p in result.placements:
        if p.job_id not in kw_of or p.site not in spos:
            continue
        a, b = int(round((p.start - t0) / HOUR)), int(round((p.end - t0) / HOUR))
        it_kw[spos[p.site], max(a, 0):min(b, n_t)] += kw_of[p.job_id]
    kw_per_gpu = {(d.area, d.hour, d.gpu_type): d.power_per_gpu_kw for d in problem.inference}
    for ip in result.inference:
        t = int(round((ip.hour - t0) / HOUR))
        key = (ip.area, ip.hour, ip.gpu_type)
        if ip.site in spos and 0 <= t < n_t and key in kw_per_gpu:
            it_kw[spos[ip.site], t] += ip.gpus * kw_per_gpu[key]
    rows = []
    for s, site in enumerate(sets.site):
        fac_cap = float(sets.facility_power_cap_kw[s])
        has_fac = bool(np.isfinite(fac_cap))
        for t, hour in enumerate(sets.slot):
            it, pue, pue_hi = float(it_kw[s, t]), float(sets.pue[s, t]), float(sets.pue_cap[s, t])
            rows.append({
                "site": site, "hour": hour, "it_power_kw": it,
                "it_power_cap_kw": float(sets.it_power_cap_kw[s]),
                "it_headroom_kw": float(sets.it_power_cap_kw[s]) - it,
                "pue": pue, "pue_hi_95": pue_hi,
                "facility_power_kw": it * pue, "facility_power_hi95_kw": it * pue_hi,
                "facility_power_cap_kw": fac_cap if has_fac else None,
                "facility_headroom_kw": fac_cap - it * pue_hi if has_fac else None,
            })
    return rows
