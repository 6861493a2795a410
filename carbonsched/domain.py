"""Domain objects: sites, work, placements and plans; lifecycle states and reason codes.

All timestamps are tz-aware UTC and label the start of their hour. Units are in the names.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

import pandas as pd

from carbonsched.errors import WorkloadError
from carbonsched.timeaxis import require_aware


class SiteRole(StrEnum):
    """What a site is for."""

    GREEN_HUB = "green-hub"
    """Remote, renewable-rich; for latency-tolerant training and batch work."""
    EDGE = "edge"
    """Near users; for latency-critical inference."""


class SignalQuality(StrEnum):
    """Where a site's hourly signals come from."""

    MEASURED = "measured"
    """Real hourly history from a provider (Electricity Maps, EIA-930, ...)."""
    ESTIMATED = "estimated"
    """A provider's history in which most hours (> 50 %) are the provider's own estimates
    (Electricity Maps' ``Data Estimated`` flag), e.g. JP-TK and IN-WE."""
    MODELLED = "modelled"
    """A documented deterministic model built from cited facts (no public hourly series)."""
    DEGRADED = "degraded"
    """Measured or estimated history that is stale (newest carbon-intensity observation older
    than :data:`carbonsched.adapters.signals.quality.SIGNAL_AGE_THRESHOLD_HOURS`) or damaged
    (quarantined, missing or gap-filled hours near the issue time); the plan's ``notes`` say
    why."""


class JobState(StrEnum):
    """Lifecycle of a job (after Kueue's workload conditions)."""

    PENDING = "Pending"
    PLANNED = "Planned"
    DISPATCHED = "Dispatched"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    CANCELLED = "Cancelled"


class ReasonCode(StrEnum):
    """Why a job is in its state; shown by the API and the report."""

    PLACED = "Placed"
    NO_FEASIBLE_SLOT = "NoFeasibleSlot"
    """No allowed site has the GPU type and a start inside the window within the horizon."""
    INSUFFICIENT_CAPACITY = "InsufficientCapacity"
    """Feasible in isolation but the GPUs were needed by other work."""
    EXCEEDS_POWER_CAP = "ExceedsPowerCap"
    """The job alone draws more IT power than every allowed site's cap."""
    GANG_TOO_LARGE = "GangTooLarge"
    """The gang needs more GPUs of its type than any allowed site has."""
    UNKNOWN_GPU_TYPE = "UnknownGpuType"
    DATA_RESIDENCY = "DataResidency"
    """No allowed site (data residency) exists in the catalog."""
    DEADLINE_PASSED = "DeadlinePassed"
    SOLVER_NO_SOLUTION = "SolverNoSolution"
    BACKEND_UNAVAILABLE = "BackendUnavailable"
    """The site's scheduler could not be reached; dispatch retries with backoff."""
    # dispatch (carbonsched.dispatch, adapters/dispatch)
    AWAITING_SUBMIT = "AwaitingSubmit"
    """The dispatch intent is recorded (outbox) and not yet confirmed by the backend."""
    SUBMITTED = "Submitted"
    """The backend holds the job until its planned start (Slurm ``--begin``, a suspended Job)."""
    ALREADY_DISPATCHED = "AlreadyDispatched"
    """The same job (and piece) was dispatched from an earlier plan; never submitted again."""
    NOT_COMMITTED = "NotCommitted"
    """The placement starts at or after ``commit_before``; a later run (plan) decides it."""
    REJECTED = "Rejected"
    """The backend refused the submission (invalid request, unknown partition or GPU type)."""
    NAME_CONFLICT = "NameConflict"
    """A foreign object (not carrying our labels for this job) holds the Job name."""
    STARTED = "Started"
    COMPLETED = "Completed"
    BACKEND_FAILED = "BackendFailed"
    """The backend ran the job and it failed (non-zero exit, timeout, node failure)."""
    CANCELLED = "Cancelled"
    LOST = "Lost"
    """The backend no longer knows a job it accepted (purged, or the cluster was rebuilt)."""
    PAUSED = "Paused"
    """A piece of a preemptible job stopped at its planned end (time limit); the next piece
    resumes it from its checkpoint."""


class WorkKind(StrEnum):
    """Kind of batch work (both latency-tolerant)."""

    TRAINING = "training"
    BATCH = "batch"


@dataclass(frozen=True)
class GpuPool:
    """GPUs of one type at a site.

    Attributes
    ----------
    count
        Number of GPUs. [-]
    board_power_w
        Board power per GPU at full load (vendor TDP/TBP). [W]
    """

    count: int
    board_power_w: float


@dataclass(frozen=True)
class PueModel:
    """Parameters of a site's PUE model (see ``carbonsched.forecasts.pue``).

    Attributes
    ----------
    pue_min
        PUE in full free cooling (fans, power distribution losses only). [-]
    free_cooling_below_c
        Outdoor dry-bulb [°C] below which the chillers are off (economiser only).
    mechanical_slope_per_c
        PUE increase per °C above the free-cooling limit (chiller load). [1/°C]
    humidity_slope
        PUE increase per unit relative humidity above ``humidity_ref_pct`` when above the
        free-cooling limit (evaporative/dehumidification penalty). [1/%]
    humidity_ref_pct
        Reference relative humidity. [%]
    pue_max
        Cap on modelled PUE. [-]
    """

    pue_min: float = 1.15
    free_cooling_below_c: float = 18.0
    mechanical_slope_per_c: float = 0.012
    humidity_slope: float = 0.0008
    humidity_ref_pct: float = 50.0
    pue_max: float = 1.8


@dataclass(frozen=True)
class Backend:
    """The scheduler that runs a site's work.

    Attributes
    ----------
    kind
        ``"slurm"`` or ``"kubernetes"``.
    cluster
        Slurm cluster name (``kind="slurm"``).
    context, namespace
        Kubernetes context and namespace (``kind="kubernetes"``).
    partition
        Slurm partition, optional.
    """

    kind: str
    cluster: str | None = None
    context: str | None = None
    namespace: str | None = None
    partition: str | None = None


@dataclass(frozen=True)
class Site:
    """A data-centre site in a catalog; see ``regions/schema.md`` for every field."""

    id: str
    name: str
    role: SiteRole
    zone: str
    signal_source: str
    latitude: float
    longitude: float
    timezone: str
    gpus: dict[str, GpuPool]
    it_power_cap_kw: float
    pue: PueModel
    latency_ms: dict[str, float]
    backend: Backend
    green_surplus_max_kw: float = 0.0
    """Green power the site has contracted to absorb when the grid would curtail it (for
    example a direct-supply or curtailment-absorption agreement). The hourly absorbable power is
    ``green_surplus_index × green_surplus_max_kw``. [kW]"""
    facility_power_cap_kw: float | None = None
    """Grid-connection cap on facility power (IT × PUE); ``None`` where only the IT cap
    (PDU/UPS) binds. The planner keeps IT power × the PUE forecast's upper 95 % bound within it
    in every hour. [kW]"""
    province: str | None = None
    annual_emission_factor_g_per_kwh: float | None = None
    """Official annual average grid emission factor, where one is cited. [g/kWh]"""
    meta: dict[str, Any] = field(default_factory=dict)

    def gpu_count(self, gpu_type: str) -> int:
        """GPUs of ``gpu_type`` at this site (0 if none). [-]"""
        pool = self.gpus.get(gpu_type)
        return pool.count if pool else 0


@dataclass(frozen=True)
class Job:
    """A latency-tolerant batch or training job: a gang of GPUs for a number of hours.

    Attributes
    ----------
    id, tenant
        Identifiers; any string (the planner never uses them in solver names).
    gpu_type
        GPU model the job needs, as in the site inventories.
    gpus
        Gang size: all GPUs at one site at once, or none. [-]
    duration_hours
        Run time. [h] (whole hours)
    power_per_gpu_kw
        IT power per GPU while running, including host share. [kW]
    earliest_start, deadline
        Window (tz-aware UTC): the job starts at or after ``earliest_start`` and ends by
        ``deadline``.
    allowed_sites
        Sites the job may run at (data residency); empty means any site.
    kind
        ``training`` or ``batch``.
    """

    id: str
    tenant: str
    gpu_type: str
    gpus: int
    duration_hours: int
    power_per_gpu_kw: float
    earliest_start: pd.Timestamp
    deadline: pd.Timestamp
    allowed_sites: tuple[str, ...] = ()
    kind: WorkKind = WorkKind.BATCH

    def __post_init__(self) -> None:
        object.__setattr__(self, "earliest_start", require_aware(self.earliest_start,
                                                                 f"job {self.id} earliest_start"))
        object.__setattr__(self, "deadline", require_aware(self.deadline,
                                                           f"job {self.id} deadline"))
        if self.gpus < 1:
            raise WorkloadError(f"job {self.id}: gpus must be >= 1, got {self.gpus}")
        if self.duration_hours < 1:
            raise WorkloadError(
                f"job {self.id}: duration_hours must be >= 1, got {self.duration_hours}")
        if self.power_per_gpu_kw <= 0:
            raise WorkloadError(
                f"job {self.id}: power_per_gpu_kw must be > 0, got {self.power_per_gpu_kw}")
        if self.deadline < self.earliest_start:
            raise WorkloadError(f"job {self.id}: deadline is before earliest_start")

    @property
    def it_power_kw(self) -> float:
        """IT power of the whole gang while running. [kW]"""
        return self.gpus * self.power_per_gpu_kw

    @property
    def energy_kwh(self) -> float:
        """IT energy of the whole run. [kWh]"""
        return self.it_power_kw * self.duration_hours


@dataclass(frozen=True)
class InferenceDemand:
    """Latency-critical inference demand of one user area in one hour.

    Attributes
    ----------
    area
        User area id, as in the sites' ``latency_ms`` tables.
    hour
        Start of the hour (tz-aware UTC).
    gpu_type, gpus
        GPUs needed in that hour. [-]
    slo_ms
        Latency SLO: serve only from sites with round-trip latency <= this. [ms]
    power_per_gpu_kw
        IT power per serving GPU. [kW]
    """

    area: str
    hour: pd.Timestamp
    gpu_type: str
    gpus: int
    slo_ms: float
    power_per_gpu_kw: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "hour", require_aware(self.hour, f"inference {self.area} hour"))
        if self.gpus < 0:
            raise WorkloadError(f"inference {self.area}: gpus must be >= 0")


@dataclass(frozen=True)
class Placement:
    """Where and when a job runs, with its forecast energy and emissions."""

    job_id: str
    site: str
    start: pd.Timestamp
    end: pd.Timestamp
    gpu_type: str
    gpus: int
    energy_kwh: float
    """Facility energy (IT × PUE). [kWh]"""
    emissions_kg: float
    """Forecast emissions net of absorbed green surplus. [kg CO2eq]"""


@dataclass(frozen=True)
class InferencePlacement:
    """GPUs serving one area's inference from one site in one hour."""

    area: str
    hour: pd.Timestamp
    site: str
    gpu_type: str
    gpus: int
    energy_kwh: float
    emissions_kg: float


@dataclass(frozen=True)
class Unplaced:
    """A job the plan does not place, with the reason."""

    job_id: str
    reason: ReasonCode
    detail: str = ""


@dataclass
class Workload:
    """A day's work: batch/training jobs and inference demand."""

    jobs: list[Job]
    inference: list[InferenceDemand]


def jsonable(obj: Any) -> Any:
    """Convert dataclasses, timestamps and enums to JSON-ready values (UTC ISO 8601)."""
    if hasattr(obj, "__dataclass_fields__"):
        return {k: jsonable(v) for k, v in asdict(obj).items()}
    if isinstance(obj, pd.Timestamp):
        return obj.tz_convert("UTC").strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(obj, StrEnum):
        return str(obj)
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, float):
        return round(obj, 6)
    return obj
