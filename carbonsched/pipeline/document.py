"""The plan document: the typed form of what ``carbonsched plan --out`` writes.

The daily pipeline builds the document (:func:`carbonsched.pipeline.daily.run_daily_plan`) and
checks it against :class:`PlanDocument` before returning it; the store keeps it whole; ``plans
show --json``, the API's ``GET /v1/plans/{id}`` and the report read it back through the same
model. Its JSON Schema is published as ``docs/plan-document.schema.json``
(``python3 scripts/plan_schema.py`` writes it; the tests check it is current).

Timestamps are UTC ISO 8601 strings (``2023-07-15T08:00:00Z``), each labelling the *start* of
its interval; energies are in kWh, powers in kW, emissions in kg CO2e (location-based: facility
energy × the site-hour's grid carbon intensity, GHG Protocol Scope 2 Guidance, 2015).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from carbonsched.domain import PAYLOAD_FIELDS
from carbonsched.errors import InputError

UtcTime = str
"""UTC instant as ISO 8601 text (``2023-07-15T08:00:00Z``)."""


class _Row(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PlacementRow(_Row):
    """Where and when one job (or one piece of a preemptible job) runs."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "job_id": "train-llm-042",
                    "site": "cn-nm-horinger",
                    "start": "2023-07-15T02:00:00Z",
                    "end": "2023-07-15T05:00:00Z",
                    "gpu_type": "H800",
                    "gpus": 8,
                    "energy_kwh": 18.5,
                    "emissions_kg": 9.1,
                    "piece": 0,
                    "pieces": 1,
                    "overhead_minutes": 0,
                    "overhead_kwh": 0.0,
                    "deadline": "2023-07-15T20:00:00Z",
                }
            ]
        },
    )

    job_id: str
    site: str
    start: UtcTime = Field(description="Planned start (UTC).")
    end: UtcTime = Field(description="Planned end (UTC), exclusive.")
    gpu_type: str
    gpus: int = Field(description="GPUs of the gang. [-]")
    energy_kwh: float = Field(description="Facility energy of the placement. [kWh]")
    emissions_kg: float = Field(description="Location-based emissions. [kg CO2e]")
    piece: int = Field(0, description="Piece number, 0-based. [-]")
    pieces: int = Field(1, description="Pieces of the job. [-]")
    overhead_minutes: int = Field(0, description="Checkpoint/restore overhead inside it. [min]")
    overhead_kwh: float = Field(0.0, description="Energy of that overhead. [kWh]")
    gpu_index: int | None = Field(
        None, description="A fractional job's GPU in the site's pool of its type (0-based), for "
        "its whole run; absent (null) for whole GPUs. [-]")
    mig_start: int | None = Field(
        None, description="A MIG slice's first memory slice on that GPU (nvidia-smi mig -lgipp "
        "placement start); null otherwise. [-]")
    deadline: UtcTime | None = Field(
        None,
        description="The job's own deadline (UTC), for the backend; absent in the baseline's rows.",
    )
    domains: list[int] | None = Field(
        None,
        description="Network domain (0-based, of the site's pool of the GPU type) of each node "
        "of a gang with a topology constraint; absent for other jobs.",
    )
    max_domains: int | None = Field(
        None,
        description="The gang's topology constraint, for the backend (Slurm --switches, Kueue "
        "topology annotations): most network domains it may span (1 = same-domain). [-]",
    )
    payload: dict[str, Any] | None = Field(
        None,
        description="What the job runs, for the backend: the job's payload fields (docs/"
        "workload.md, 'Payload fields'; templates applied, only the fields set). Absent: the job "
        "names nothing to run and is dispatched only with --placeholder.",
        json_schema_extra={"propertyNames": {"enum": list(PAYLOAD_FIELDS)}},
    )


class TenantRow(_Row):
    """One tenant's fair share in the plan (planned with fairness above 0)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "tenant": "london",
                    "weight": 2.0,
                    "demand_gpu_hours": 120.0,
                    "placed_gpu_hours": 96.0,
                    "dominant_share": 0.21,
                    "target_share": 0.2,
                    "dominant_gpu_type": "A100",
                    "quota_gpu_hours": 24.0,
                    "quota_met": True,
                }
            ]
        },
    )

    tenant: str
    weight: float = Field(description="Weight in weighted DRF. [-]")
    demand_gpu_hours: float = Field(description="GPU-hours its jobs ask for. [GPU·h]")
    placed_gpu_hours: float = Field(description="GPU-hours the plan places. [GPU·h]")
    dominant_share: float = Field(
        description="Largest share, over the binding GPU types, of the type's GPU-hours the "
        "tenant's placed work holds (0 when nothing binds). [-]"
    )
    target_share: float = Field(description="The same share in the fair allocation. [-]")
    dominant_gpu_type: str | None = Field(None, description="The type of target_share.")
    quota_gpu_hours: float = Field(
        description="Guaranteed GPU-hours over the horizon, capped at demand. [GPU·h]"
    )
    quota_met: bool | None = Field(None, description="None without a quota.")
    fair_applied: bool = Field(
        True, description="False when the plan's path ignored the fair-share rows (a greedy "
        "fallback): dominant_share is then as placed, not held to target_share."
    )


class RunningRow(_Row):
    """Work already running (or committed by an earlier run) that holds GPUs and IT power.

    The planner subtracted it from each site's GPUs and power caps
    (:class:`carbonsched.domain.RunningWork`); the placement book does the same.
    """

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "job_id": "train-llm-041",
                    "site": "cn-nm-horinger",
                    "gpu_type": "H800",
                    "gpus": 8,
                    "it_power_kw": 5.6,
                    "start": None,
                    "end": "2023-07-15T03:30:00Z",
                }
            ]
        },
    )

    job_id: str = Field("", description="The job holding the capacity (empty if unnamed).")
    site: str
    gpu_type: str
    gpus: int = Field(description="GPUs held (a slice holds its one GPU). [-]")
    it_power_kw: float = Field(description="IT power drawn while running. [kW]")
    start: UtcTime | None = Field(None, description="Held from (the horizon start if none).")
    end: UtcTime = Field(description="Released at.")
    gpu_index: int | None = Field(None, description="For a slice (MIG instance or milli "
                                  "share): the GPU of the pool it holds; slices on one GPU "
                                  "hold that one GPU.")


class InferenceRow(_Row):
    """GPUs serving one user area's inference in one hour at one site."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "area": "beijing",
                    "hour": "2023-07-15T00:00:00Z",
                    "site": "cn-he-zhangjiakou",
                    "gpu_type": "T4",
                    "gpus": 7,
                    "energy_kwh": 1.1,
                    "emissions_kg": 0.6,
                }
            ]
        },
    )

    area: str
    hour: UtcTime
    site: str
    gpu_type: str
    gpus: int = Field(description="GPUs allocated. [-]")
    energy_kwh: float = Field(description="Facility energy. [kWh]")
    emissions_kg: float = Field(description="Location-based emissions. [kg CO2e]")


class UnplacedRow(_Row):
    """A job the plan leaves out, with its reason code (e.g. ``NoFeasibleSlot``)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"job_id": "batch-7", "reason": "NoFeasibleSlot", "detail": ""}]
        },
    )

    job_id: str
    reason: str
    detail: str = ""


class SiteHourRow(_Row):
    """IT and facility power of the plan at one site in one hour, with headroom under caps."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "site": "cn-nm-horinger",
                    "hour": "2023-07-15T00:00:00Z",
                    "in_horizon": True,
                    "it_power_kw": 5.6,
                    "running_it_power_kw": 0.0,
                    "it_power_cap_kw": 9.9,
                    "it_headroom_kw": 4.3,
                    "it_energy_kwh": 5.6,
                    "pue": 1.1,
                    "pue_hi_95": 1.12,
                    "facility_power_kw": 6.16,
                    "facility_power_hi95_kw": 6.27,
                    "facility_power_cap_kw": None,
                    "facility_headroom_kw": None,
                    "facility_energy_kwh": 6.16,
                }
            ]
        },
    )

    site: str
    hour: UtcTime
    in_horizon: bool = Field(description="False for hours past the horizon (tails of work).")
    it_power_kw: float = Field(description="IT power of the plan's work. [kW]")
    running_it_power_kw: float = Field(description="IT power of work already running. [kW]")
    it_power_cap_kw: float = Field(description="The site's IT power cap. [kW]")
    it_headroom_kw: float = Field(description="Cap minus IT power. [kW]")
    it_energy_kwh: float = Field(description="IT energy in the hour. [kWh]")
    pue: float = Field(description="Forecast PUE (mean). [-]")
    pue_hi_95: float = Field(description="Upper 95 % bound of the PUE forecast. [-]")
    facility_power_kw: float = Field(description="IT power × PUE. [kW]")
    facility_power_hi95_kw: float = Field(description="IT power × PUE's upper bound. [kW]")
    facility_power_cap_kw: float | None = Field(description="The facility cap, if any. [kW]")
    facility_headroom_kw: float | None = Field(description="Cap minus the upper bound. [kW]")
    facility_energy_kwh: float = Field(description="Facility energy in the hour. [kWh]")
    sliced_gpus: int | None = Field(
        None, description="GPUs carrying slices (MIG instances or milli shares); only at a "
        "site that shares GPUs or runs a fractional job. [-]")
    slices_used: dict[str, int] | None = Field(
        None, description="Slices in use: MIG instances by profile, gpu_milli summed. [-]")
    stranded_gpus: float | None = Field(
        None, description="GPU capacity held but idle: compute or milli left on GPUs "
        "carrying slices, 1 - share of a fractional job on a whole GPU. [GPU]")
    flex_it_kw: float | None = Field(
        default=None, description="IT power that could be shed in the hour at the plan's "
        "notice without missing a deadline or an SLO (hold + pause + cap + serve_cap; docs/"
        "grid-flexibility.md). [kW]")
    flex_facility_kw: float | None = Field(default=None,
                                           description="flex_it_kw × PUE. [kW]")
    flex_hold_kw: float | None = Field(default=None, description="Of flex_it_kw: work not "
                                       "started at the announcement, held. [kW]")
    flex_pause_kw: float | None = Field(default=None, description="Of flex_it_kw: preemptible "
                                        "work paused at a checkpoint. [kW]")
    flex_cap_kw: float | None = Field(default=None, description="Of flex_it_kw: GPU power-cap "
                                      "headroom of running work. [kW]")
    flex_serve_cap_kw: float | None = Field(
        default=None, description="Of flex_it_kw: GPU power-cap headroom of serving GPUs, "
        "throughput kept on idle GPUs of the site (docs/grid-flexibility.md). [kW]")
    commit_limit_kw: float | None = Field(default=None, description="Facility power a grid-"
                                          "flexibility commitment allows in the hour. [kW]")


class SolverInfo(_Row):
    """How the plan was solved: solver, typed status, gap, bound and notes."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "name": "highs",
                    "status": "optimal",
                    "mip_gap": 0.0009,
                    "seconds": 0.55,
                    "objective": 102.4,
                    "bound": 102.3,
                    "method": "milp",
                    "note": "solver status Optimal",
                    "violations": {},
                    "requested": "highs",
                }
            ]
        },
    )

    name: str
    status: str = Field(
        description="optimal, feasible, time_limit, infeasible, no_solution, heuristic, ..."
    )
    mip_gap: float | None = Field(description="Proven relative gap; None without a bound. [-]")
    seconds: float = Field(description="Solve time. [s]")
    objective: float | None = Field(None, description="Objective value. [kg CO2e]")
    bound: float | None = Field(None, description="Proven lower bound. [kg CO2e]")
    method: str | None = None
    infeasible_family: str | None = None
    note: str = ""
    violations: dict[str, Any] = Field(
        default_factory=dict, description="Recounted rule violations (empty: none)."
    )
    greedy_unplaced: int | None = None
    requested: str | None = Field(None, description="The solver asked for (``auto`` picks).")


class Totals(_Row):
    """The plan's totals and its carbon-agnostic baseline's."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "energy_kwh": 245.7,
                    "emissions_kg": 102.4,
                    "baseline_emissions_kg": 133.5,
                    "surplus_absorbed_kwh": 0.0,
                    "baseline_energy_kwh": 245.7,
                }
            ]
        },
    )

    energy_kwh: float = Field(description="Facility energy. [kWh]")
    emissions_kg: float = Field(description="Location-based emissions. [kg CO2e]")
    baseline_emissions_kg: float = Field(description="The baseline's emissions. [kg CO2e]")
    surplus_absorbed_kwh: float = Field(0.0, description="Green surplus absorbed. [kWh]")
    baseline_energy_kwh: float = Field(0.0, description="The baseline's energy. [kWh]")
    carbon_only_emissions_kg: float | None = Field(
        None, description="Emissions of the carbon-only plan (fairness 0), when planned with "
        "tenant fair shares. [kg CO2e]"
    )
    fairness_cost_kg: float | None = Field(
        None, description="Carbon cost of fairness: emissions_kg less carbon_only_emissions_kg. "
        "[kg CO2e]"
    )
    fairness_not_applied_tenants: int | None = Field(
        None, description="Tenants whose fair shares the plan asked for but did not apply (the "
        "plan fell back to a path without fair-share rows, e.g. greedy; the notes name it). [-]"
    )


class WorkloadJobRow(_Row):
    """A job the plan was built for (read by the report)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "job_id": "train-llm-042",
                    "tenant": "research",
                    "kind": "training",
                    "gpu_type": "H800",
                    "gpus": 8,
                    "duration_hours": 3.0,
                    "duration_minutes": 180,
                    "power_per_gpu_kw": 0.7,
                }
            ]
        },
    )

    job_id: str
    tenant: str
    kind: str
    gpu_type: str
    gpus: int
    duration_hours: float = Field(description="Run time. [h]")
    duration_minutes: int | None = Field(None, description="Run time. [min]")
    power_per_gpu_kw: float = Field(description="IT power per GPU. [kW]")
    gpu_share: float | None = Field(
        None, description="Share of one GPU a fractional job asks for (gpu_milli / 1000, or a "
        "MIG profile's compute slices over the GPU's); its IT power is power_per_gpu_kw × this. "
        "Absent for whole GPUs. [-]")


class InferencePowerRow(_Row):
    """IT power per GPU of one area's inference on one GPU type, in every hour or in one.

    A row without ``hour`` holds for every hour of the plan; an area and GPU type whose
    power differs between hours has one row per hour instead.
    """

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"area": "beijing", "gpu_type": "T4", "power_per_gpu_kw": 0.16}]
        },
    )

    area: str
    gpu_type: str
    hour: UtcTime | None = Field(
        default=None, description="The hour this power holds in; absent: every hour.")
    power_per_gpu_kw: float = Field(description="[kW]")


class WorkloadInfo(_Row):
    """The work the plan was built for: ``source`` is ``demo`` or ``file``."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"source": "file", "jobs": [], "inference_power": []}]},
    )

    source: str | None = None
    jobs: list[WorkloadJobRow] = Field(default_factory=list)
    inference_power: list[InferencePowerRow] = Field(default_factory=list)


class Baseline(_Row):
    """The carbon-agnostic baseline the plan's saving is measured against."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "policy": "agnostic",
                    "definition": "carbon-agnostic first-fit",
                    "placed": 30,
                    "placements": [],
                    "inference": [],
                    "unplaced": [],
                    "deferred": [],
                }
            ]
        },
    )

    policy: str | None = None
    definition: str | None = None
    placed: int | None = Field(None, description="Jobs the baseline placed. [-]")
    placements: list[PlacementRow] = Field(default_factory=list)
    inference: list[InferenceRow] = Field(default_factory=list)
    unplaced: list[UnplacedRow] = Field(default_factory=list)
    deferred: list[UnplacedRow] = Field(default_factory=list)


class RunInfo(_Row):
    """The service run that made the plan (absent for ``carbonsched plan``)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "planning_date": "2023-07-15",
                    "issued_at": "2023-07-15T00:00:00+00:00",
                    "trigger": "cron",
                    "api_jobs": 2,
                }
            ]
        },
    )

    planning_date: str
    issued_at: UtcTime
    trigger: str
    api_jobs: int = Field(description="Jobs submitted through the API in the plan. [-]")


class ReplayInfo(_Row):
    """The past day a replayed plan was made on (``carbonsched plan --replay-from``)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "source_date": "2023-07-15",
                    "target_date": "2026-12-04",
                    "shift_days": 1238,
                    "underlying_signal_quality": "estimated",
                }
            ]
        },
    )

    source_date: str = Field(description="The day whose real signals and work were replayed.")
    target_date: str = Field(description="The day planned (the plan's date).")
    shift_days: int = Field(description="Whole days the signals and work were moved. [d]")
    underlying_signal_quality: str = Field(
        description="The source signals' own quality (measured, estimated, degraded)."
    )


class PlanDocument(BaseModel):
    """A plan: placements, inference, what was left out, power per site-hour, and provenance.

    Raises
    ------
    pydantic.ValidationError
        On construction from a document of another shape (see :func:`read_plan_document` for
        the error carbonsched raises).
    """

    model_config = ConfigDict(extra="forbid")

    plan_id: str = Field(description="32 hexadecimal digits; commands accept a unique prefix.")
    date: str = Field(description="Planning date, YYYY-MM-DD (UTC day of the issue time).")
    catalog: str
    signal_quality: str = Field(
        description="The weakest site's: measured > estimated > degraded > modelled; "
        "'replayed' when a past day's real signals were moved onto the planned day "
        "(see replay)."
    )
    site_signal_quality: dict[str, str] = Field(default_factory=dict)
    site_signal_age_hours: dict[str, dict[str, float | None]] = Field(
        default_factory=dict, description="Per site and signal, hours since its newest value. [h]"
    )
    issued_at: UtcTime | None = None
    horizon_hours: int | None = Field(None, description="Hours planned. [h]")
    slot_minutes: int | None = Field(None, description="Planning slot length. [min]")
    workload: WorkloadInfo | None = None
    sites: list[str] = Field(default_factory=list)
    site_roles: dict[str, str] = Field(default_factory=dict)
    solver: SolverInfo
    placements: list[PlacementRow]
    inference: list[InferenceRow]
    unplaced: list[UnplacedRow]
    deferred: list[UnplacedRow] = Field(
        default_factory=list, description="Jobs left for a later run (rolling)."
    )
    running: list[RunningRow] = Field(
        default_factory=list, description="Work already running that holds GPUs and power in "
        "the horizon (rolling: the pieces earlier runs committed)."
    )
    totals: Totals
    site_hours: list[SiteHourRow] = Field(default_factory=list)
    tenants: list[TenantRow] = Field(
        default_factory=list,
        description="Per tenant: dominant share, target, quota met (planned with fairness "
        "above 0 and a catalog with tenants; docs/plan.md, 'Tenants and fair shares').",
    )
    baseline: Baseline | None = None
    baseline_unplaced: list[UnplacedRow] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    forecast_models: dict[str, dict[str, dict[str, Any]]] = Field(
        default_factory=dict,
        description="Per site and signal: the model chosen on rolling "
        "validation, its error and its candidates.",
    )
    degraded: list[dict[str, Any]] | None = Field(
        None, description="Live provider signals that were degraded (plans on live signals)."
    )
    provider_signals: dict[str, Any] | None = Field(
        None, description="Per site, which provider gave each signal (plans on live signals)."
    )
    rolling: dict[str, Any] | None = Field(
        None, description="The rolling step: commit_before, committed, deferred, held work."
    )
    run: RunInfo | None = None
    replay: ReplayInfo | None = Field(
        None, description="Set when the plan replays a past day's real signals (signal_quality "
        "'replayed'); absent otherwise."
    )
    flexibility: dict[str, Any] | None = Field(
        None, description="Grid events committed in this plan: per event and hour the "
        "baseline, target, committed, planned and delivered reduction and shortfall [kW, kWh], "
        "offered and delivered MWh (docs/grid-flexibility.md); absent without events."
    )


def read_plan_document(doc: dict[str, Any], where: str = "plan") -> PlanDocument:
    """Check a plan document's shape and return it typed.

    Parameters
    ----------
    doc
        The document as JSON-decoded (from ``--out``, the store or the API).
    where
        Where it came from, for the message (a file path, ``plan <id>``).

    Raises
    ------
    carbonsched.errors.InputError
        The document does not have the plan document's shape; the message names the first
        fields that differ.
    """
    try:
        return PlanDocument.model_validate(doc)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5]
        )
        raise InputError(
            f"{where} is not a carbonsched plan document ({problems}); see "
            "docs/plan-document.schema.json"
        ) from exc


def plan_document_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of :class:`PlanDocument`."""
    schema = PlanDocument.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema


def placed_words(placements: list[dict[str, Any]]) -> str:
    """How many jobs a plan document's placements hold, in words.

    ``"30 jobs"``, or ``"29 jobs in 31 pieces"`` when some run in pieces (a placement row is
    one piece of a job).
    """
    n = len({p["job_id"] for p in placements})
    pieces = len(placements)
    return f"{n} job{'' if n == 1 else 's'}" + (f" in {pieces} pieces" if pieces != n else "")
