"""Typed planner outcomes: status, solver record, plan result and the independent score.

Emissions accounting (used by every policy and by :func:`score_plan`): per site and hour,
facility power = IT power × PUE; absorbed green surplus = min(surplus, facility power) at zero
marginal carbon; emissions [kg] = (facility energy − absorbed) [kWh] × CI [g/kWh] / 1000
(GHG Protocol Scope 2 Guidance, 2015, location-based: activity data × emission factor).
A job's or inference placement's share of a site-hour's emissions is proportional to its
facility energy in that hour.

Minutes: a run from a slot-aligned start for ``m`` minutes occupies ``ceil(m / L)`` slots of
``L`` minutes (the problem's ``slot_minutes``: 60 by default, 30 or 15); capacity and power caps
see its whole gang in each (conservative), energy and emissions count the minutes it runs in
each slot (the last slot its fraction; a slot's energy is mean kW × ``L / 60`` h). Hourly
signals and hourly inference demand hold in every slot of their hour. Slots past the horizon (a run
that starts inside it and ends after it) are costed on the continued signals
(:data:`carbonsched.plan.sets.CONTINUATION_RULE`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np
import pandas as pd

from carbonsched.domain import InferencePlacement, Placement, ReasonCode, Unplaced
from carbonsched.errors import InfeasiblePlanError
from carbonsched.plan.slices import assign_runs, layouts_in_use, recount_slices
from carbonsched.timeaxis import HOUR

MINUTE = pd.Timedelta(minutes=1)


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


def join_clauses(*clauses: str | None) -> str:
    """The non-empty ``clauses`` joined by ``"; "`` (how a plan's note reads).

    Parameters
    ----------
    *clauses
        Parts of a note, in order; empty ones and None are left out.

    Returns
    -------
    str
        ``"a; b"`` for ``("a", "", "b")``; ``""`` when every clause is empty.
    """
    return "; ".join(c for c in clauses if c)


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
    warm_start: str = ""
    """``warm: <what the solve started from>`` or ``cold: <why not>`` (issue 36 item 2); empty
    when the caller gave no warm start and asked for none."""


@dataclass
class PlanResult:
    """A plan: placements, inference allocation, unplaced jobs with reasons, totals."""

    status: PlanStatus
    solver: SolverRecord
    placements: list[Placement] = field(default_factory=list)
    inference: list[InferencePlacement] = field(default_factory=list)
    unplaced: list[Unplaced] = field(default_factory=list)
    totals: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    """What a person must know about the plan's assumptions: work running past the horizon
    on continued signals, jobs deferred past the horizon (terminal value rule)."""
    tenants: list[dict[str, Any]] = field(default_factory=list)
    """Per tenant when the problem declares tenants: dominant share, DRF target, quota met
    (:func:`carbonsched.plan.fairness.tenant_rows`); empty otherwise."""
    carry: Any = field(default=None, repr=False, compare=False)
    """What the next rolling run's solve can start from besides the plan: column
    generation's multipliers and column pool
    (:class:`carbonsched.plan.colgen.warm.CarriedDuals`); ``None`` from the direct MILP and
    the heuristics (issue 36 item 2). Kept in memory only, never serialised."""

    @property
    def deferred(self) -> list[Unplaced]:
        """Jobs left ``Pending`` for a later run (reason ``DeferredPastHorizon``)."""
        return [u for u in self.unplaced if u.reason == ReasonCode.DEFERRED_PAST_HORIZON]

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
        Placements starting before the earliest start, off the slot grid or outside the
        horizon, or ending after the deadline (a run may continue past the horizon's end). [-]
    gang_violations
        Jobs placed more than once or split when not preemptible, preemptible jobs whose
        pieces break their terms (more than ``max_pieces``, several sites, overlapping,
        overhead or work minutes wrong), a wrong GPU count or type or duration, a site not
        allowed, or a gang larger than one node that the site's node shape cannot cut into
        whole nodes. [-]
    unplaced_gpu_hours
        GPU-hours of jobs the plan does not place; a fractional job counts its share of a GPU
        (:attr:`carbonsched.domain.Job.gpu_share`: ``gpu_milli / 1000`` or the MIG profile's
        compute slices over the GPU's). [GPU·h]
    slice_violations
        GPUs (per site, hour and type) whose slices break their layout: a MIG instance at an
        invalid start, overlapping another, over the GPU's compute or ``+me``; milli shares
        over 1000 on one GPU; a GPU index outside the pool
        (:func:`carbonsched.plan.slices.recount_slices`). [-]
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
    slice_violations: int = 0
    commitment_violations: int = 0
    """(site, slot) cells inside a grid-flexibility commitment's window whose facility power
    (all IT power × the PUE the caps are planned against) is over ``baseline - reduction``
    (:class:`carbonsched.flex.Commitment`). [-]"""
    flex_overpromise: int = 0
    """Site-hours whose stated flexibility band (``flex_it_kw``, when given to
    :func:`score_plan`) is more than the recount from the jobs' own terms can shed without
    missing a deadline or an SLO (:func:`carbonsched.plan.flex.recount_flex`). [-]"""
    domain_violations: int = 0
    """Placements of topology-bound gangs whose domains (one per node) are missing, out of
    range, span more than ``max_domains`` or overfill a domain, plus (site, type, domain,
    slot) cells where bound gangs hold more GPUs than the domain has
    (:func:`carbonsched.plan.domains.domain_violations`). [-]"""
    quota_shortfalls: int = 0
    """(tenant, GPU type) pairs whose guaranteed quota over the horizon, capped at the
    tenant's demand, is not met by the plan's GPU-hours (the problem's ``tenants``,
    :func:`carbonsched.plan.fairness.quota_shortfalls`); 0 without tenants. Not a hard rule
    of the recount: a quota can be out of reach of the jobs' windows. [-]"""

    def as_dict(self) -> dict[str, Any]:
        """Plain dict (JSON-ready)."""
        return dict(self.__dict__)


def emissions_by_site_hour(
    it_kw: np.ndarray, pue: np.ndarray, ci: np.ndarray, surplus_kw: np.ndarray,
    slot_hours: float = 1.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Facility energy, absorbed surplus and emissions per site-slot (1-hour slots default).

    Parameters
    ----------
    it_kw, pue, ci, surplus_kw
        Arrays of shape ``(S, T)``: mean IT power over the slot [kW], PUE [-], CI [g/kWh],
        surplus [kW].
    slot_hours
        Length of a slot. [h]

    Returns
    -------
    facility_kwh, absorbed_kwh, emissions_kg
        Arrays of shape ``(S, T)``. [kWh], [kWh], [kg]
    """
    if slot_hours == 1.0:
        facility = it_kw * pue
        absorbed = np.minimum(facility, surplus_kw)
    else:
        facility = it_kw * pue * slot_hours
        absorbed = np.minimum(facility, surplus_kw * slot_hours)
    return facility, absorbed, (facility - absorbed) * ci / 1000.0


def run_weights(minutes: int, offset_minutes: int = 0, upto_minutes: int | None = None,
                slot_minutes: int = 60) -> np.ndarray:
    """Share of each occupied slot a run uses, from a slot-aligned start. [-]

    Parameters
    ----------
    minutes
        Length of the run. [min]
    offset_minutes, upto_minutes
        Count only the part of the run in ``[offset, upto)`` minutes from its start (e.g. the
        checkpoint overhead at the start of a resumed piece). [min]
    slot_minutes
        Slot length ``L``. [min]

    Returns
    -------
    numpy.ndarray
        Shape ``(ceil(minutes / L),)``, each in [0, 1].
    """
    L = int(slot_minutes)
    n = -(-int(minutes) // L)
    lo = np.arange(n) * L
    hi = np.minimum(lo + L, minutes)
    a = max(int(offset_minutes), 0)
    b = int(minutes) if upto_minutes is None else min(int(upto_minutes), int(minutes))
    return np.clip(np.minimum(hi, b) - np.maximum(lo, a), 0, None) / float(L)


@dataclass
class Run:
    """One contiguous run of a job (a whole job, or one piece of a preemptible one)."""

    job: int
    site: int
    start: int
    """Start slot position on the extended axis."""
    minutes: int
    """Wall time of the run, overhead included. [min]"""
    piece: int = 0
    pieces: int = 1
    overhead_minutes: int = 0


def plan_runs(sets: Any, chosen: np.ndarray, chosen_patterns: Any = None) -> list[Run]:
    """Runs of chosen one-piece options ``(job, site, start)`` and chosen piece patterns."""
    runs = [Run(int(j), int(s), int(t), int(sets.job_minutes[j])) for j, s, t in chosen]
    pats = getattr(sets, "patterns", None)
    for p in ([] if chosen_patterns is None else chosen_patterns):
        pieces = pats.pieces[int(p)]
        j, site = int(pats.job[int(p)]), int(pats.site[int(p)])
        runs.extend(Run(j, site, t, m, i, len(pieces), o)
                    for i, (t, m, o) in enumerate(pieces))
    return runs


def build_plan_result(
    sets: Any,
    chosen: np.ndarray,
    inf_alloc: np.ndarray,
    status: PlanStatus,
    solver: SolverRecord,
    unplaced_reason: dict[int, tuple[Any, str]] | None = None,
    chosen_patterns: Any = None,
    domains: dict[str, tuple[int, ...]] | None = None,
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
        (default ``InsufficientCapacity``; ``DeferredPastHorizon`` for a job whose deadline
        lies beyond the horizon).
    chosen_patterns
        Positions of chosen piece patterns (:attr:`PlanSets.patterns`) of preemptible jobs.
    domains
        Job id -> domain per node the solver chose for topology-bound gangs; where GPUs are
        shared, gangs and slices are booked together (:func:`carbonsched.plan.slices.
        assign_runs`) and these are kept where that book has room.
    """
    prob = sets.problem
    n_s, n_t = sets.pue.shape
    n_h = getattr(sets, "n_horizon", n_t) or n_t
    sm = int(getattr(sets, "slot_minutes", 60))
    sh = sm / 60.0                    # slot length [h]
    it_kw = np.zeros((n_s, n_t))      # mean IT power per site-slot (kWh = mean kW × sh)
    chosen = np.asarray(chosen, dtype=np.int64).reshape(-1, 3)
    runs = plan_runs(sets, chosen, chosen_patterns)
    # fractional jobs at sites that share GPUs: one GPU (and MIG start) for the whole run
    runs, slice_of, no_slice, n_moved, gang_doms = assign_runs(sets, runs,
                                                               np.asarray(inf_alloc), domains)
    if no_slice:
        unplaced_reason = dict(unplaced_reason or {})
        for k in no_slice:
            unplaced_reason.setdefault(k, (
                ReasonCode.INSUFFICIENT_CAPACITY,
                "no GPU slice stayed free for its whole run at any start of its window (the "
                "slice layouts of each hour could not be kept over consecutive hours); a later "
                "run re-plans it"))
    weights = []
    by_minutes: dict[int, np.ndarray] = {}   # runs of one length share their weights (read-only)
    for r in runs:
        w = by_minutes.get(r.minutes)
        if w is None:
            w = by_minutes[r.minutes] = run_weights(r.minutes, slot_minutes=sm)
        weights.append(w)
        it_kw[r.site, r.start:r.start + len(w)] += sets.job_kw[r.job] * w
    inf_kw = inf_alloc * sets.inf_kw_per_gpu[:, None] if len(inf_alloc) else np.zeros((0, n_s))
    sph = 60 // sm
    for d in range(len(inf_alloc)):
        for t in range(int(sets.inf_hour[d]), int(sets.inf_hour[d]) + sph):
            it_kw[:, t] += inf_kw[d]
    facility, absorbed, em = emissions_by_site_hour(it_kw, sets.pue, sets.ci_g_per_kwh,
                                                    sets.surplus_kw, sh)
    with np.errstate(divide="ignore", invalid="ignore"):
        em_per_it_kwh = np.where(it_kw > 0, em / np.where(it_kw > 0, it_kw, 1.0), 0.0)
    placements = []
    placed = set()
    past = set()
    slot_starts = list(sets.slot)   # indexing the DatetimeIndex per run took 0.4 s at 10k jobs
    for i_run, (r, w) in enumerate(zip(runs, weights, strict=True)):
        job = prob.jobs[r.job]
        gpu_index, mig_start = slice_of.get(i_run, (None, None))
        placed.add(r.job)
        a, b = r.start, r.start + len(w)
        if b > n_h:
            past.add(r.job)
        kw = sets.job_kw[r.job]
        start = slot_starts[r.start]
        ow = run_weights(r.minutes, 0, r.overhead_minutes, sm) if r.overhead_minutes else None
        placements.append(Placement(
            job_id=job.id, site=sets.site[r.site], start=start, end=start + r.minutes * MINUTE,
            gpu_type=job.gpu_type, gpus=job.gpus,
            energy_kwh=float(kw * (w * sets.pue[r.site, a:b]).sum() * sh),
            emissions_kg=float(kw * (w * em_per_it_kwh[r.site, a:b]).sum()),
            piece=r.piece, pieces=r.pieces, overhead_minutes=r.overhead_minutes,
            overhead_kwh=float(kw * (ow * sets.pue[r.site, a:b]).sum() * sh) if ow is not None
            else 0.0, gpu_index=gpu_index, mig_start=mig_start,
            domains=gang_doms.get(i_run, ()),
        ))
    infs = []
    for d, s in zip(*np.nonzero(inf_alloc > 0), strict=True):
        dem = prob.inference[d]
        t = sets.inf_hour[d]
        if sph == 1:
            e_kwh = float(inf_kw[d, s] * sets.pue[s, t])
            e_kg = float(inf_kw[d, s] * em_per_it_kwh[s, t])
        else:   # every slot of the demand's hour
            e_kwh = float(inf_kw[d, s] * sets.pue[s, t:t + sph].sum() * sh)
            e_kg = float(inf_kw[d, s] * em_per_it_kwh[s, t:t + sph].sum())
        infs.append(InferencePlacement(
            area=dem.area, hour=dem.hour, site=sets.site[s], gpu_type=dem.gpu_type,
            gpus=int(inf_alloc[d, s]), energy_kwh=e_kwh, emissions_kg=e_kg,
        ))
    unplaced = []
    unplaced_gpu_h = 0.0
    penalty_kg = 0.0
    deferrable = getattr(sets, "deferrable", np.zeros(len(prob.jobs), dtype=bool))
    horizon_end = sets.slot[0] + n_h * pd.Timedelta(minutes=sm)
    n_deferred = 0
    for k, job in enumerate(prob.jobs):
        if k in placed:
            continue
        unplaced_gpu_h += job.gpus * job.gpu_share * job.duration_hours   # a slice: its share
        if k not in sets.reasons:
            penalty_kg += float(sets.unplaced_cost[k])
        given = (unplaced_reason or {}).get(k)
        if k in sets.reasons:
            code, detail = sets.reasons[k]
        elif given is not None and given[0] == ReasonCode.SOLVER_NO_SOLUTION:
            code, detail = given
        elif len(deferrable) and deferrable[k]:
            code, detail = (ReasonCode.DEFERRED_PAST_HORIZON,
                            f"deadline {job.deadline.isoformat()} is after the horizon end "
                            f"{horizon_end.isoformat()}; a start after the horizon (terminal "
                            f"value {float(sets.unplaced_cost[k]):.4g} kg) beats every start "
                            "with room inside it, so a later run plans it")
        elif given is not None:
            code, detail = given
        else:
            code, detail = (ReasonCode.INSUFFICIENT_CAPACITY,
                            "feasible alone, but the GPUs or power were needed by other work")
        if code == ReasonCode.DEFERRED_PAST_HORIZON:
            n_deferred += 1
        unplaced.append(Unplaced(job_id=job.id, reason=code, detail=detail))
    emissions = float(em.sum())
    totals = {
        "energy_kwh": float(facility.sum()),
        "it_energy_kwh": float(it_kw.sum() * sh),
        "emissions_kg": emissions,
        "surplus_absorbed_kwh": float(absorbed.sum()),
        "unplaced_gpu_hours": unplaced_gpu_h,
        "objective": emissions + penalty_kg,
        "jobs_placed": float(len(placed)),
        "jobs_unplaced": float(len(unplaced)),
        "jobs_deferred": float(n_deferred),
        "jobs_past_horizon": float(len(past)),
        "overhead_kwh": float(sum(p.overhead_kwh for p in placements)),
    }
    notes = plan_notes(sets, len(past), n_deferred)
    if n_moved:
        notes.append(f"slices: {n_moved} fractional job(s) moved from the solver's start to "
                     "another start of their window, where one GPU keeps their slice over the "
                     "whole run")
    if no_slice:
        notes.append(f"slices: {len(no_slice)} fractional job(s) left unplaced: no GPU slice "
                     "stayed free for the whole run (InsufficientCapacity)")
    split = {p.job_id: p.pieces for p in placements if p.pieces > 1}
    if split:
        notes.append(f"pieces: {len(split)} preemptible job(s) run in {sum(split.values())} "
                     f"pieces; the checkpoint overhead of their resumptions, "
                     f"{totals['overhead_kwh']:.4g} kWh, is counted in their energy and "
                     "emissions (overhead_kwh per piece)")
    return PlanResult(status=status, solver=solver, placements=placements, inference=infs,
                      unplaced=unplaced, totals=totals, notes=notes)


def plan_notes(sets: Any, n_past: int, n_deferred: int) -> list[str]:
    """The plan's notes on the horizon's end: continued signals, deferrals, running work."""
    from carbonsched.plan.sets import CONTINUATION_RULE, TERMINAL_VALUE_RULE

    out = list(getattr(sets, "notes", []))
    if n_past:
        out.append(f"horizon: {n_past} job(s) start inside the horizon and run past its end; "
                   f"their hours after it are costed on continued signals ({CONTINUATION_RULE})")
    if n_deferred:
        out.append(f"horizon: {n_deferred} job(s) deferred past the horizon "
                   f"(Pending, DeferredPastHorizon): {TERMINAL_VALUE_RULE}; terminal values "
                   f"use continued signals ({CONTINUATION_RULE})")
    running = getattr(sets.problem, "running", None)
    if running:
        out.append(f"running work: {len(running)} running job(s) hold their GPUs and power "
                   "in the slots they still occupy")
    return out


VIOLATION_FIELDS = ("gang_violations", "deadline_misses", "capacity_violations",
                    "power_cap_violations", "facility_cap_violations", "slo_violations",
                    "slice_violations", "commitment_violations",
                    "flex_overpromise", "domain_violations")
"""The :class:`Score` counts that a trustworthy plan has at zero."""


def recount_violations(problem: Any, result: PlanResult) -> dict[str, int]:
    """Recount a plan against every hard constraint; the families it breaks, with counts.

    Each job at most once and as specified, or in at most ``max_pieces`` non-overlapping
    pieces at one site when preemptible (gang), starting inside the horizon on the slot grid
    and inside its window, ending by its deadline (deadline), GPUs per (site, hour, type)
    (capacity), IT power per (site, hour) (power cap), facility power per (site, hour) at the
    PUE's upper bound (grid-connection cap), inference served in full within its SLO (SLO),
    MIG layouts and milli shares per GPU (slices), topology-bound gangs within their network
    domains (domains) and facility power inside a committed grid-flexibility window
    (commitment) — all by :func:`score_plan`, from the placements alone, over every hour a placement
    occupies (tail hours past the horizon included) with the problem's running work added.
    Works on the problem's own slot index, whatever its length or first hour.

    Returns
    -------
    dict
        ``{field: count}`` for every :data:`VIOLATION_FIELDS` entry above zero; empty when the
        plan keeps every constraint.
    """
    sc = score_plan(problem, result)
    return {f: int(getattr(sc, f)) for f in VIOLATION_FIELDS if getattr(sc, f) > 0}


def _load_from_placements(sets: Any, problem: Any, result: PlanResult
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int]:
    """Peak IT kW ``(S, T)``, IT energy kWh ``(S, T)`` and GPUs ``(S, T, G)`` of a plan.

    Also counts deadline misses (start off the grid, outside the horizon or the window, end
    after the deadline, or a run past the extended axis) and gang violations (wrong gang,
    type, site, length, duplicates, or pieces that break the job's preemption terms).
    """
    n_s, n_t = sets.pue.shape
    n_h = sets.n_horizon or n_t
    n_g = len(sets.gpu_type)
    spos = {s: i for i, s in enumerate(sets.site)}
    gpos = {g: i for i, g in enumerate(sets.gpu_type)}
    jobs = {j.id: (k, j) for k, j in enumerate(problem.jobs)}
    sites = {s.id: s for s in problem.sites}
    peak = np.zeros((n_s, n_t))
    energy = np.zeros((n_s, n_t))
    gpus = np.zeros((n_s, n_t, n_g), dtype=np.int64)
    t0 = sets.slot[0]
    sm = int(getattr(sets, "slot_minutes", 60))
    slot = pd.Timedelta(minutes=sm)
    deadline_misses = 0
    gang = 0
    by_job: dict[str, list[Any]] = {}
    for p in result.placements:
        if p.job_id not in jobs or p.site not in spos:
            gang += 1
            continue
        by_job.setdefault(p.job_id, []).append(p)
        k, job = jobs[p.job_id]
        s = spos[p.site]
        if (p.gpus != job.gpus or p.gpu_type != job.gpu_type
                or (job.allowed_sites and p.site not in job.allowed_sites)
                or sites[p.site].gpu_count(job.gpu_type) == 0
                or (job.gpus <= sites[p.site].gpu_count(job.gpu_type)
                    and sites[p.site].gang_nodes(job.gpu_type, job.gpus) is None)):
            gang += 1                    # incl. a gang not cut into the site's whole nodes
        minutes = int(round((p.end - p.start) / MINUTE))
        if job.max_pieces == 1 and minutes != job.duration_minutes:
            gang += 1                    # a whole job for the wrong length
        a_f = (p.start - t0) / slot
        a = int(round(a_f))
        miss = (abs(a_f - a) > 1e-9 or a < 0 or a >= n_h or p.start < job.earliest_start
                or p.end > job.deadline or minutes < 1)
        # load: a whole job for its own length from its start; a piece for the piece's
        w = run_weights(job.duration_minutes if job.max_pieces == 1 else max(minutes, 1),
                        slot_minutes=sm)
        b = a + len(w)
        if a < 0 or b > n_t:
            miss = True
            lo, hi = max(a, 0), min(b, n_t)
            w = w[lo - a: lo - a + max(hi - lo, 0)]
            a, b = lo, max(hi, lo)
        deadline_misses += int(miss)
        peak[s, a:b] += job.it_power_kw
        energy[s, a:b] += job.it_power_kw * w
        g = gpos.get(job.gpu_type)
        if g is not None and getattr(p, "gpu_index", None) is None:
            gpus[s, a:b, g] += job.gpus   # a slice counts with its GPU (recount_slices)
    for job_id, ps in by_job.items():
        _k, job = jobs[job_id]
        if job.max_pieces == 1:
            gang += len(ps) - 1          # placed more than once
            continue
        gang += _piece_violations(job, ps, slot)
    return peak, energy, gpus, deadline_misses, gang


def _piece_violations(job: Any, ps: list[Any], slot: pd.Timedelta = HOUR) -> int:
    """1 when the pieces of a preemptible job break its terms, else 0.

    At most ``max_pieces`` pieces, all at one site, numbered ``0..k-1`` in time order, each
    knowing ``pieces = k``, not overlapping (a piece starts no earlier than the slot after the
    previous one ends), every piece after the first paying ``checkpoint_overhead_minutes``,
    and the work done (run time less overhead) summing to ``duration_minutes``.
    """
    ps = sorted(ps, key=lambda p: p.start)
    k = len(ps)
    if k > job.max_pieces or len({p.site for p in ps}) != 1:
        return 1
    if [p.piece for p in ps] != list(range(k)) or any(p.pieces != k for p in ps):
        return 1
    work = 0
    for i, p in enumerate(ps):
        minutes = int(round((p.end - p.start) / MINUTE))
        over = p.overhead_minutes
        if over != (job.checkpoint_overhead_minutes if i > 0 else 0) or minutes <= over:
            return 1
        work += minutes - over
        if i > 0:
            prev_end = ps[i - 1].end
            busy_until = ps[i - 1].start + math.ceil(
                (prev_end - ps[i - 1].start) / slot - 1e-9) * slot
            if p.start < busy_until:
                return 1
    return 0 if work == job.duration_minutes else 1


def score_plan(problem: Any, result: PlanResult, signals: pd.DataFrame | None = None,
               flex: Any = None) -> Score:
    """Re-score a plan from its placements alone, trusting none of its numbers.

    Parameters
    ----------
    problem
        The :class:`~carbonsched.plan.sets.PlanningProblem` the plan was made for.
    result
        The plan.
    signals
        Signals to score with (e.g. the actual CI); default ``problem.signals``.
    flex
        Optional stated flexibility band (:class:`carbonsched.plan.flex.FlexBand`): each
        site-hour's ``flex_it_kw`` is recounted from the jobs' terms and counted in
        ``flex_overpromise`` where it promises more.

    Returns
    -------
    Score
        Emissions, energy, absorbed surplus and counts of every kind of violation. Emissions
        and energy count the minutes each placement runs (tail hours on continued signals);
        capacity and caps see the whole gang in every hour it occupies, plus running work.
    """
    from carbonsched.plan.sets import compile_sets

    sets = compile_sets(problem, signals, columns=False)
    n_s, n_t = sets.pue.shape
    spos = {s: i for i, s in enumerate(sets.site)}
    gpos = {g: i for i, g in enumerate(sets.gpu_type)}
    sites = {s.id: s for s in problem.sites}
    it_kw, it_kwh, gpus, deadline_misses, gang = _load_from_placements(sets, problem, result)
    t0 = sets.slot[0]
    slot = pd.Timedelta(minutes=sets.slot_minutes)
    sph = sets.slots_per_hour
    slo = 0
    # demands of one (area, hour, GPU type) may carry different SLOs (tiers): the placements
    # merge them per site, so the recount checks that an assignment exists (Hall's condition on
    # nested site sets: for every SLO level L, the GPUs needed within L are served from sites
    # within L), not each site against one demand's SLO
    demand: dict[tuple[str, pd.Timestamp, str], list[tuple[float, int, float]]] = {}
    for dem in problem.inference:
        demand.setdefault((dem.area, dem.hour, dem.gpu_type), []).append(
            (dem.slo_ms, dem.gpus, dem.power_per_gpu_kw))
    served: dict[tuple[str, pd.Timestamp, str], list[tuple[float, int]]] = {}
    for ip in result.inference:
        key = (ip.area, ip.hour, ip.gpu_type)
        if key not in demand or ip.site not in spos:
            slo += 1
            continue
        kw = demand[key][-1][2]
        site = sites[ip.site]
        lat = site.latency_ms.get(ip.area, float("inf"))
        loosest = max(d[0] for d in demand[key])
        if lat > loosest or site.gpu_count(ip.gpu_type) == 0:
            slo += 1      # counted here once; its GPUs still count as served below
        served.setdefault(key, []).append((min(lat, loosest), ip.gpus))
        t_h = int(round((ip.hour - t0) / slot))
        for t in range(t_h, t_h + sph):       # every slot of its hour
            if 0 <= t < n_t:
                it_kw[spos[ip.site], t] += ip.gpus * kw
                it_kwh[spos[ip.site], t] += ip.gpus * kw
                g = gpos.get(ip.gpu_type)
                if g is not None:
                    gpus[spos[ip.site], t, g] += ip.gpus
    for key, dems in demand.items():
        got = served.get(key, [])
        for level in sorted({d[0] for d in dems}):
            need = sum(d[1] for d in dems if d[0] <= level)
            if sum(g for lat, g in got if lat <= level) < need:
                slo += 1
                break
    # slices: GPUs carrying them count once, their layouts recounted
    sl = recount_slices(sets, problem, result.placements)
    gpus = gpus + sl.sliced_gpus
    # running work holds GPUs and power too (it is not this plan's emissions)
    all_kw = it_kw + sets.running_kw
    # GPUs carrying running slices are in both running_gpus and the slice recount: once
    held = sets.running_gpus - sets.running_sliced_gpus
    cap_viol = int((gpus + held > sets.gpu_count[:, None, :]).sum())
    pow_viol = int((all_kw > sets.it_power_cap_kw[:, None] + 1e-6).sum())
    fac_viol = int((all_kw * sets.pue_cap > sets.facility_power_cap_kw[:, None] + 1e-6).sum())
    commit_viol = int((all_kw * sets.pue_cap > sets.commit_limit_kw + 1e-6).sum())
    over = 0
    if flex is not None:
        from carbonsched.plan.flex import recount_flex
        over = recount_flex(problem, result, flex)
    facility, absorbed, em = emissions_by_site_hour(it_kwh, sets.pue, sets.ci_g_per_kwh,
                                                    sets.surplus_kw, sets.slot_hours)
    placed_ids = {p.job_id for p in result.placements}
    unplaced_gpu_h = float(sum(j.gpus * j.gpu_share * j.duration_hours for j in problem.jobs
                               if j.id not in placed_ids))
    penalty_kg = float(sum(sets.unplaced_cost[k] for k, j in enumerate(problem.jobs)
                           if j.id not in placed_ids and k not in sets.reasons))
    emissions = float(em.sum())
    from carbonsched.plan.domains import domain_violations
    from carbonsched.plan.fairness import quota_shortfalls

    return Score(
        domain_violations=domain_violations(sets, problem, result),
        quota_shortfalls=len(quota_shortfalls(problem, result)),
        emissions_kg=emissions, energy_kwh=float(facility.sum()),
        surplus_absorbed_kwh=float(absorbed.sum()), capacity_violations=cap_viol,
        power_cap_violations=pow_viol, facility_cap_violations=fac_viol, slo_violations=slo,
        deadline_misses=deadline_misses,
        gang_violations=gang, unplaced_gpu_hours=unplaced_gpu_h,
        objective=emissions + penalty_kg, slice_violations=sl.violations,
        commitment_violations=commit_viol, flex_overpromise=over,
    )


def site_hour_power(problem: Any, result: PlanResult, band: Any = None
                    ) -> list[dict[str, Any]]:
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
        One row per (site, slot) of the horizon, sites in problem order — and per tail slot
        past the horizon when a placement runs into it (``in_horizon`` false): ``site``,
        ``hour`` (UTC start), ``in_horizon``, ``it_power_kw`` (the gangs that occupy the hour,
        whole, plus running work: what the caps see), ``running_it_power_kw``,
        ``it_power_cap_kw``, ``it_headroom_kw`` [kW]; ``it_energy_kwh`` (the minutes actually
        run, this plan's work) [kWh]; ``pue`` and ``pue_hi_95`` [-]; ``facility_power_kw``
        (IT × PUE), ``facility_power_hi95_kw`` (IT × the PUE's upper 95 % bound, what the
        grid-connection cap is planned against), ``facility_power_cap_kw`` and
        ``facility_headroom_kw`` (cap − facility_power_hi95_kw; both ``None`` at a site
        without a facility cap) [kW]; ``facility_energy_kwh`` (IT energy × PUE) [kWh]. A
        negative headroom is a violation that :func:`score_plan` counts. At a site with a GPU
        pool that shares GPUs (``sharing`` in the catalog) or where a fractional job runs,
        also ``sliced_gpus`` (GPUs carrying slices) [-], ``slices_used`` (MIG instances by
        profile, ``gpu_milli`` summed) and ``stranded_gpus`` (capacity held but idle: the
        compute or milli left on GPUs carrying slices, ``1 - share`` of a fractional job on
        a whole GPU) [GPU] (:func:`carbonsched.plan.slices.recount_slices`).
        With ``band`` (a
        :class:`carbonsched.plan.flex.FlexBand`) each row also states ``flex_it_kw``,
        ``flex_facility_kw`` and its split ``flex_hold_kw``, ``flex_pause_kw``,
        ``flex_cap_kw``, ``flex_serve_cap_kw`` [kW] (0 in tail hours); and
        ``commit_limit_kw``, the facility power a commitment allows (``None`` outside every
        commitment window) [kW].
    """
    from carbonsched.plan.sets import compile_sets

    flex_rows: dict[Any, dict[str, float]] = {}
    if band is not None:
        from carbonsched.plan.flex import LEVERS, band_rows
        flex_rows = band_rows(band)
        zero = {"flex_it_kw": 0.0, "flex_facility_kw": 0.0,
                **{f"flex_{lv}_kw": 0.0 for lv in LEVERS}}
    sets = compile_sets(problem, columns=False)
    n_s, n_t = sets.pue.shape
    n_h = sets.n_horizon or n_t
    spos = {s: i for i, s in enumerate(sets.site)}
    t0 = sets.slot[0]
    it_kw, it_kwh, _g, _d, _gang = _load_from_placements(sets, problem, result)
    kw_per_gpu = {(d.area, d.hour, d.gpu_type): d.power_per_gpu_kw for d in problem.inference}
    slot = pd.Timedelta(minutes=sets.slot_minutes)
    for ip in result.inference:
        t_h = int(round((ip.hour - t0) / slot))
        key = (ip.area, ip.hour, ip.gpu_type)
        for t in range(t_h, t_h + sets.slots_per_hour):
            if ip.site in spos and 0 <= t < n_t and key in kw_per_gpu:
                it_kw[spos[ip.site], t] += ip.gpus * kw_per_gpu[key]
                it_kwh[spos[ip.site], t] += ip.gpus * kw_per_gpu[key]
    it_kwh = it_kwh * sets.slot_hours   # mean kW over a slot -> kWh
    sl = recount_slices(sets, problem, result.placements)
    shares = {s for s, site in enumerate(problem.sites)
              if any(p.sharing for p in site.gpus.values())}
    shares |= {int(s) for s in np.flatnonzero(sl.stranded_gpus.any(axis=1))}
    used = (it_kw > 0).any(axis=0)
    last = max(n_h, int(np.flatnonzero(used).max()) + 1 if used.any() else 0)
    rows = []
    for s, site in enumerate(sets.site):
        fac_cap = float(sets.facility_power_cap_kw[s])
        has_fac = bool(np.isfinite(fac_cap))
        for t in range(last):
            hour = sets.slot[t]
            run = float(sets.running_kw[s, t])
            it = float(it_kw[s, t]) + run
            pue, pue_hi = float(sets.pue[s, t]), float(sets.pue_cap[s, t])
            rows.append({
                "site": site, "hour": hour, "in_horizon": t < n_h, "it_power_kw": it,
                "running_it_power_kw": run,
                "it_power_cap_kw": float(sets.it_power_cap_kw[s]),
                "it_headroom_kw": float(sets.it_power_cap_kw[s]) - it,
                "it_energy_kwh": float(it_kwh[s, t]),
                "pue": pue, "pue_hi_95": pue_hi,
                "facility_power_kw": it * pue, "facility_power_hi95_kw": it * pue_hi,
                "facility_power_cap_kw": fac_cap if has_fac else None,
                "facility_headroom_kw": fac_cap - it * pue_hi if has_fac else None,
                "facility_energy_kwh": float(it_kwh[s, t]) * pue,
            })
            if s in shares:
                rows[-1].update(sliced_gpus=int(sl.sliced_gpus[s, t].sum()),
                                slices_used=layouts_in_use(sl, s, t),
                                stranded_gpus=round(float(sl.stranded_gpus[s, t]), 6))
            if band is not None:
                lim = float(sets.commit_limit_kw[s, t])
                rows[-1].update(flex_rows.get((site, hour), zero))
                rows[-1]["commit_limit_kw"] = lim if np.isfinite(lim) else None
    return rows
