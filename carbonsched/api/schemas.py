"""Request and response schemas of the REST API (pydantic v2), with an example on each.

Families follow the FastAPI full-stack template: ``JobCreate`` (what a client sends),
``JobPublic`` / ``JobsPublic`` (what the service returns). A job is the one job schema
(:class:`carbonsched.workload.schema.JobSpec`: the workload file's fields, limits and messages).
Datetimes must carry a time zone (``AwareDatetime``); the service answers in UTC ISO 8601.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import Path
from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    ValidationInfo,
    model_validator,
)
from pydantic_core import PydanticCustomError

from carbonsched.errors import InputError
from carbonsched.flex import (
    MAX_NOTICE_MINUTES,
    GridEvent,
    event_notice,
    event_site,
    event_target_fraction,
    event_target_kw,
    event_time,
)
from carbonsched.limits import (
    EARLIEST_YEAR,
    IDENTIFIER_PATTERN,
    LATEST_YEAR,
    MAX_IDENTIFIER_CHARS,
    MAX_NAME_CHARS,
    TIME_PATTERN,
)
from carbonsched.pipeline.document import PlanDocument
from carbonsched.workload.schema import (
    JOB_RULES_SCHEMA,
    Area,
    Gpus,
    GpuType,
    HourTime,
    JobSpec,
    PowerPerGpuKw,
    SloMs,
    identifier,
    reworded,
    whole_in,
)


def _in_range(v: datetime) -> datetime:
    if not EARLIEST_YEAR <= v.year <= LATEST_YEAR:
        raise ValueError(f"{v.isoformat()} is outside the supported years "
                         f"{EARLIEST_YEAR}..{LATEST_YEAR}")
    return v


Time = Annotated[AwareDatetime, AfterValidator(_in_range),
                 Field(json_schema_extra={"pattern": TIME_PATTERN})]
"""A tz-aware datetime in the years carbonsched handles (pandas' range is 1677-2262)."""

JobIdPath = Annotated[str, Path(min_length=1, max_length=MAX_IDENTIFIER_CHARS,
                                pattern=IDENTIFIER_PATTERN, description="Job id."),
                      BeforeValidator(lambda v: identifier(v, "job id"))]
"""A job id in a URL path, under the one identifier grammar (422 with its message)."""
SiteIdPath = Annotated[str, Path(min_length=1, max_length=MAX_IDENTIFIER_CHARS,
                                 pattern=IDENTIFIER_PATTERN, description="Site id."),
                       BeforeValidator(lambda v: identifier(v, "site id"))]
"""A site id in a URL path, under the one identifier grammar (422 with its message)."""
TOKEN_ID_PATTERN = r"^[0-9a-f]{16}$"
"""A token id as :meth:`carbonsched.store.service.ServiceStore.create_token` makes them."""

_JOB_EXAMPLE = {
    "id": "train-llm-042", "tenant": "research", "gpu_type": "H800", "gpus": 8,
    "duration_hours": 3, "power_per_gpu_kw": 0.7,
    "earliest_start": "2023-07-15T00:00:00Z", "deadline": "2023-07-15T20:00:00Z",
    "allowed_sites": [], "kind": "training", "command": "python3 /workspace/train.py"}
"""A job as a client submits it; it names what it runs (a service that dispatches without
the placeholder refuses a job that names nothing, ``POST /v1/jobs``)."""
_PREEMPTIBLE_EXAMPLE = {
    "id": "finetune-007", "tenant": "research", "gpu_type": "H800", "gpus": 4,
    "duration_minutes": 150, "power_per_gpu_kw": 0.7,
    "earliest_start": "2023-07-15T00:30:00Z", "deadline": "2023-07-15T20:00:00Z",
    "preemptible": True, "checkpoint_overhead_minutes": 5, "max_pieces": 3, "kind": "training",
    "template": "batch-eval"}


def _example(*examples: dict[str, Any]) -> ConfigDict:
    return ConfigDict(json_schema_extra={"examples": list(examples)})


class ErrorPublic(BaseModel):
    """An error: what is wrong and how to fix it."""

    model_config = _example({"detail": "unknown site 'xx'; known sites: a, b"})
    detail: str


class JobCreate(JobSpec):
    """A batch or training job: the fields of a job in the workload file (docs/workload.md).

    The one job schema (:class:`~carbonsched.workload.schema.JobSpec`): the same fields, limits
    and messages as a workload file; ``to_job()`` gives the domain job.
    """

    model_config = ConfigDict(extra="forbid", json_schema_extra={
        "examples": [_JOB_EXAMPLE, _PREEMPTIBLE_EXAMPLE], **JOB_RULES_SCHEMA})


Alternatives = Annotated[int, Field(ge=0, le=20, description="Next best options to return."),
                         whole_in(0, 20, 3)]
"""How many next best options a placement query returns (0..20)."""


class JobPlacementQuery(JobCreate):
    """Where and when should this job run? ``reserve: true`` books the answer."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        _JOB_EXAMPLE | {"reserve": False, "alternatives": 3}], **JOB_RULES_SCHEMA})
    reserve: bool = False
    alternatives: Alternatives = 3


class InferencePlacementQuery(BaseModel):
    """Which site should serve a user area's inference within its latency SLO?

    The fields of an inference demand in the workload file, with its rules and messages
    (``start`` on the hour, as the file's ``hour``; ``slo_ms`` up to
    :data:`~carbonsched.limits.MAX_SLO_MS`).
    """

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{
        "kind": "inference", "area": "shanghai", "slo_ms": 20, "gpu_type": "L20", "gpus": 4,
        "start": "2023-07-15T08:00:00Z", "duration_hours": 2}]})
    kind: Literal["inference"]
    area: Area
    slo_ms: SloMs
    gpu_type: GpuType
    gpus: Gpus
    power_per_gpu_kw: PowerPerGpuKw = None
    start: HourTime
    duration_hours: Annotated[int, Field(ge=1, le=168, description="Hours served. [h]"),
                              whole_in(1, 168, 1)] = 1
    alternatives: Alternatives = 3

    @model_validator(mode="wrap")
    @classmethod
    def _in_the_files_words(cls, data: Any, handler: Any) -> InferencePlacementQuery:
        """Absent and unknown fields in the workload file's words ("problem; fix")."""
        try:
            return handler(data)
        except ValidationError as exc:
            raise reworded(cls, exc, "an inference query") from None


def _query_kind(v: Any) -> str:
    kind = v.get("kind") if isinstance(v, dict) else getattr(v, "kind", None)
    return "inference" if kind == "inference" else "job"


PlacementQuery = Annotated[
    Annotated[JobPlacementQuery, Tag("job")] | Annotated[InferencePlacementQuery,
                                                          Tag("inference")],
    Discriminator(_query_kind)]


class PlacementOption(BaseModel):
    """One site and start with its forecast energy and emissions."""

    model_config = _example({"site": "cn-gs-qingyang", "start": "2023-07-15T05:00:00Z",
                             "end": "2023-07-15T08:00:00Z", "emissions_kg": 2.02,
                             "energy_kwh": 19.55, "carbon_intensity_g_per_kwh": 221.0})
    site: str
    start: datetime
    end: datetime
    emissions_kg: float = Field(description="Forecast emissions, green surplus absorbed "
                                "first. [kg CO2e]")
    energy_kwh: float = Field(description="Facility energy (IT × PUE). [kWh]")
    carbon_intensity_g_per_kwh: float = Field(description="Mean forecast grid carbon "
                                              "intensity over the run. [gCO2eq/kWh]")
    latency_ms: float | None = None


class PlacementPublic(BaseModel):
    """The answer to a placement query."""

    model_config = _example({
        "plan_id": "fb45e1630aff49f6a70f2eaedca274d2", "placed": True, "reason": "Placed",
        "detail": "", "recommended": PlacementOption.model_config["json_schema_extra"][
            "examples"][0],
        "carbon_agnostic": {"site": "cn-nm-horinger", "start": "2023-07-15T00:00:00Z",
                            "end": "2023-07-15T03:00:00Z", "emissions_kg": 12.19,
                            "energy_kwh": 19.35, "carbon_intensity_g_per_kwh": 631.9},
        "saving_kg": 10.17, "saving_pct": 83.4, "alternatives": [], "reserved": False,
        "signal_quality": "modelled", "job_id": "train-llm-042", "area": None})
    plan_id: str
    placed: bool
    reason: str
    detail: str
    recommended: PlacementOption | None
    carbon_agnostic: PlacementOption | None = Field(
        description="The carbon-agnostic choice: earliest start with room at the first "
        "allowed site (jobs) or the lowest-latency site (inference).")
    saving_kg: float | None
    saving_pct: float | None
    alternatives: list[PlacementOption]
    reserved: bool = False
    signal_quality: str | None
    job_id: str | None = None
    area: str | None = None


class JobsCreate(BaseModel):
    """Jobs to submit (each planned again by the next daily run)."""

    model_config = ConfigDict(extra="forbid",
                              json_schema_extra={"examples": [{"jobs": [_JOB_EXAMPLE]}]})
    jobs: list[JobCreate] = Field(min_length=1)


class JobPublic(BaseModel):
    """A job's state and reason (Kueue-style conditions) and, when planned, where and when."""

    model_config = _example({
        "id": "train-llm-042", "state": "Planned", "reason": "Placed", "detail": "",
        "source": "api", "plan_id": "fb45e1630aff49f6a70f2eaedca274d2",
        "site": "cn-gs-qingyang", "start": "2023-07-15T05:00:00Z",
        "end": "2023-07-15T08:00:00Z", "emissions_kg": 2.02, "energy_kwh": 19.55,
        "submitted_at": "2023-07-14T23:00:00Z"})
    id: str
    state: str
    reason: str
    detail: str = ""
    source: Literal["api", "plan"]
    plan_id: str | None = None
    site: str | None = None
    start: datetime | None = None
    end: datetime | None = None
    emissions_kg: float | None = None
    energy_kwh: float | None = None
    submitted_at: datetime | None = None


class JobsPublic(BaseModel):
    """Submitted jobs."""

    model_config = _example({"data": [JobPublic.model_config["json_schema_extra"][
        "examples"][0]], "count": 1})
    data: list[JobPublic]
    count: int


class PlanPublic(PlanDocument):
    """The plan document that ``carbonsched plan --out`` writes (docs/plan-document.schema.json)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{
        "plan_id": "fb45e1630aff49f6a70f2eaedca274d2", "date": "2023-07-15",
        "catalog": "china-eastdata-westcompute", "signal_quality": "modelled",
        "solver": {"name": "highs", "status": "optimal", "mip_gap": 0.0, "seconds": 1.2},
        "placements": [], "inference": [], "unplaced": [],
        "totals": {"energy_kwh": 269.0, "emissions_kg": 74.8,
                   "baseline_emissions_kg": 123.6}, "notes": []}]})


class SitePublic(BaseModel):
    """A site of the served catalog."""

    model_config = _example({
        "id": "cn-gs-qingyang", "name": "Gansu hub, Qingyang cluster", "role": "green-hub",
        "zone": "CN-GS", "timezone": "Asia/Shanghai", "latitude": 35.7, "longitude": 107.6,
        "gpus": {"H800": 256}, "it_power_cap_kw": 400.0, "green_surplus_max_kw": 100.0,
        "backend": "slurm", "signal_quality": "modelled", "in_plan": True, "note": ""})
    id: str
    name: str
    role: str
    zone: str
    timezone: str
    latitude: float
    longitude: float
    gpus: dict[str, int]
    it_power_cap_kw: float
    green_surplus_max_kw: float
    backend: str
    signal_quality: str | None = Field(
        description="The quality of the signals the served plan was made on at this site "
        "(measured, estimated, modelled, degraded); null for a site the plan left out; with "
        "no plan loaded, the catalog's declared quality.")
    in_plan: bool | None = Field(
        default=None, description="Whether the served plan covers the site; false: the plan "
        "left it out (its signals could not be read or forecast: the plan's notes say why), "
        "so nothing is placed there; null: no plan loaded.")
    note: str = Field(default="", description="Why the site is not in the served plan; "
                      "empty when it is.")


class SitesPublic(BaseModel):
    """The served catalog's sites."""

    model_config = _example({"catalog": "china-eastdata-westcompute",
                             "data": [SitePublic.model_config["json_schema_extra"][
                                 "examples"][0]], "count": 1,
                             "plan_id": "fb45e1630aff49f6a70f2eaedca274d2", "detail": ""})
    catalog: str
    data: list[SitePublic]
    count: int
    plan_id: str | None = Field(default=None, description="The served plan that `in_plan` "
                                "and `signal_quality` are read from; null: none loaded.")
    detail: str = Field(default="", description="Said when the answer is not from a fresh "
                        "plan: no plan is loaded, or the newest plan could not be loaded and "
                        "this one, the last loaded, answers (and why); empty otherwise.")


class ForecastPoint(BaseModel):
    """One hourly forecast value with its 80 % and 95 % intervals."""

    model_config = _example({"ts": "2023-07-15T05:00:00Z", "mean": 221.0, "lo_80": 190.0,
                             "hi_80": 250.0, "lo_95": 175.0, "hi_95": 268.0})
    ts: datetime
    mean: float
    lo_80: float
    hi_80: float
    lo_95: float
    hi_95: float


class ForecastPublic(BaseModel):
    """A site's forecast of one signal, as the latest plan used it."""

    model_config = _example({
        "site": "cn-gs-qingyang", "signal": "carbon_intensity",
        "stored_signal": "carbon_intensity_g_per_kwh", "unit": "gCO2eq/kWh",
        "model": "lightgbm", "issued_at": "2023-07-15T00:00:00Z",
        "signal_quality": "modelled", "plan_id": "fb45e1630aff49f6a70f2eaedca274d2",
        "points": [ForecastPoint.model_config["json_schema_extra"]["examples"][0]],
        "detail": ""})
    site: str
    signal: str
    stored_signal: str
    unit: str
    model: str
    issued_at: datetime | None
    signal_quality: str | None
    plan_id: str
    points: list[ForecastPoint]
    detail: str = Field(default="", description="Said when the newest plan could not be "
                        "loaded and this one, the last loaded, answers (and why); empty "
                        "otherwise.")


class RunPublic(BaseModel):
    """A run of the plan -> dispatch pipeline (one per planning date)."""

    model_config = _example({
        "planning_date": "2023-07-15", "local_day": "2023-07-14",
        "issued_at": "2023-07-15T00:00:00Z", "trigger": "scheduled", "replica": "host-1",
        "status": "succeeded", "started_at": "2023-07-14T22:00:00Z",
        "finished_at": "2023-07-14T22:00:31Z", "plan_id": "fb45e1630aff49f6a70f2eaedca274d2",
        "solver_status": "optimal", "dispatch": "dispatch: not configured", "error": "",
        "attempts": 1, "catalog": "global", "notes": ""})
    planning_date: str
    local_day: str
    issued_at: datetime
    trigger: str
    replica: str
    status: str
    started_at: datetime
    finished_at: datetime | None
    plan_id: str | None
    solver_status: str | None
    dispatch: str
    error: str
    attempts: int
    catalog: str | None = None
    """The catalog the run planned (``null`` on records made before it was recorded)."""
    notes: str = ""
    """What a person should know about the run: a plan made outside the service (e.g. by
    ``carbonsched plan``) that this run's plan replaced as the served plan."""


class RunsPublic(BaseModel):
    """Run records, newest first, and the cron's state on this replica.

    ``cron``: ``enabled``; when enabled, ``leader``, ``timezone``, ``at`` (the daily run's
    local time), ``next_due_planning_date`` and ``next_due_issue_time`` (UTC) of the first run
    that falls due after now (daily: the next local day's run; rolling every N < 24 hours: the
    next issue time), and ``skipped`` when the start-up run left a run out.
    """

    model_config = _example({"data": [RunPublic.model_config["json_schema_extra"][
        "examples"][0]], "count": 1, "cron": {"enabled": True, "leader": True,
                                              "timezone": "Asia/Shanghai", "at": "06:00:00",
                                              "next_due_planning_date": "2023-07-16",
                                              "next_due_issue_time": "2023-07-16T00:00:00Z"}})
    data: list[RunPublic]
    count: int
    cron: dict[str, Any]


class RunTriggered(BaseModel):
    """A run request: started in the background, or already recorded."""

    model_config = _example({"planning_date": "2023-07-15", "started": True,
                             "detail": "run started; poll GET /v1/runs"})
    planning_date: str
    started: bool
    detail: str


class HealthPublic(BaseModel):
    """Liveness or readiness."""

    model_config = _example({"status": "ok", "checks": {"store": "ok",
                                                         "plan": "fb45e1630aff49f6"}})
    status: str
    checks: dict[str, Any] = Field(default_factory=dict)


# --- Carbon Aware SDK (Green Software Foundation) WebAPI shapes ---------------------------------
# The SDK's WebAPI v1.5 components (its OpenAPI document), field for field; carbonsched/service/
# carbon_aware.py computes what goes in them.
_SDK_POINT = {"location": "westus", "timestamp": "2023-07-15T05:00:00Z", "duration": 60,
              "value": 221.0}


class EmissionsData(BaseModel):
    """The SDK's ``EmissionsData``: location, time, rating [gCO2eq/kWh] and duration (hh:mm:ss)."""

    model_config = _example({"location": "westus", "time": "2023-07-15T05:00:00Z",
                             "rating": 221.0, "duration": "01:00:00"})
    location: str | None
    time: datetime
    rating: float
    duration: str = Field(json_schema_extra={"format": "time-span"})


class EmissionsDataDTO(BaseModel):
    """The SDK's ``EmissionsDataDTO`` in forecasts: location, timestamp, duration [min], value."""

    model_config = _example(_SDK_POINT)
    location: str | None
    timestamp: datetime
    duration: int
    value: float


class EmissionsForecastDTO(BaseModel):
    """The SDK's ``EmissionsForecastDTO`` (``/emissions/forecasts/current`` and ``batch``)."""

    model_config = _example({
        "generatedAt": "2023-07-14T23:00:00Z", "requestedAt": "2023-07-14T23:00:00Z",
        "location": "westus", "dataStartAt": "2023-07-15T00:00:00Z",
        "dataEndAt": "2023-07-15T06:00:00Z", "windowSize": 60,
        "optimalDataPoints": [_SDK_POINT], "forecastData": [_SDK_POINT]})
    generatedAt: datetime
    requestedAt: datetime
    location: str | None
    dataStartAt: datetime
    dataEndAt: datetime
    windowSize: int
    optimalDataPoints: list[EmissionsDataDTO] | None
    forecastData: list[EmissionsDataDTO] | None


def _stated_required(example: dict[str, Any], *names: str
                     ) -> Callable[[dict[str, Any]], None]:
    """A ``json_schema_extra`` stating ``names`` required, not null and (text) not empty.

    The SDK's batch items declare every field optional and nullable, and the service refuses an
    item without these with the SDK's 400 and message (``"requestedAt is not set"``); the
    fields stay optional in the model so that the message stays, and the schema says what is
    refused.
    """
    def extra(schema: dict[str, Any]) -> None:
        schema["examples"] = [example]
        schema["required"] = list(names)
        for name in names:
            prop = schema["properties"][name]
            prop.pop("default", None)
            (given,) = [b for b in prop.pop("anyOf") if b.get("type") != "null"]
            if given.get("type") == "string" and "format" not in given:
                given["minLength"] = 1
            prop.update(given)
    return extra


class EmissionsForecastBatchParametersDTO(BaseModel):
    """One item of ``POST /emissions/forecasts/batch``: the forecast issued at ``requestedAt``."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_stated_required({
        "requestedAt": "2023-07-14T12:00:00Z", "location": "westus",
        "dataStartAt": "2023-07-14T14:00:00Z", "dataEndAt": "2023-07-14T18:00:00Z",
        "windowSize": 30}, "requestedAt", "location"))
    requestedAt: Time | None = None
    location: str | None = Field(None, max_length=MAX_NAME_CHARS)
    dataStartAt: Time | None = None
    dataEndAt: Time | None = None
    windowSize: int | None = Field(None, ge=0, le=2**31 - 1)


class CarbonIntensityBatchParametersDTO(BaseModel):
    """One item of ``POST /emissions/average-carbon-intensity/batch``."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_stated_required({
        "location": "westus", "startTime": "2023-07-14T14:00:00Z",
        "endTime": "2023-07-14T18:00:00Z"}, "location", "startTime", "endTime"))
    location: str | None = Field(None, max_length=MAX_NAME_CHARS)
    startTime: Time | None = None
    endTime: Time | None = None


class CarbonIntensityDTO(BaseModel):
    """The SDK's ``CarbonIntensityDTO``: the mean carbon intensity of a period [gCO2eq/kWh]."""

    model_config = _example({"location": "westus", "startTime": "2023-07-14T14:00:00Z",
                             "endTime": "2023-07-14T18:00:00Z", "carbonIntensity": 345.434})
    location: str | None
    startTime: datetime | None
    endTime: datetime | None
    carbonIntensity: float


class Location(BaseModel):
    """The SDK's ``Location``: where a location name is, and the site it names (``name``)."""

    model_config = _example({"latitude": 37.359, "longitude": -121.924,
                             "name": "us-ciso-sanjose"})
    latitude: float | None
    longitude: float | None
    name: str | None


class ValidationProblemDetails(BaseModel):
    """The SDK's error body (RFC 9457 problem details): ``errors`` maps parameters to messages."""

    model_config = ConfigDict(extra="allow", json_schema_extra={"examples": [{
        "type": "https://tools.ietf.org/html/rfc9110#section-15.5.1",
        "title": "One or more validation errors occurred.", "status": 400,
        "detail": "unknown location 'atlantis'; known locations ...",
        "errors": {"location": ["unknown location 'atlantis'; known locations ..."]}}]})
    type: str | None = None
    title: str | None = None
    status: int | None = None
    detail: str | None = None
    instance: str | None = None
    errors: dict[str, list[str]] | None = None


# --- tokens -------------------------------------------------------------------------------------
class TokenCreate(BaseModel):
    """A token to mint: its role, a label and an optional expiry."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{
        "role": "submit", "name": "ci-pipeline", "expires_at": "2030-01-01T00:00:00Z"}]})
    role: Literal["read", "submit", "admin"]
    name: str = Field("", max_length=200, pattern=r"^[^\x00-\x1f\x7f]*$")
    expires_at: Time | None = Field(None, description="Valid strictly before this instant "
                                    "(tz-aware); absent: no expiry.")


class TokenPublic(BaseModel):
    """A stored token (never the token itself: only its SHA-256 digest is stored)."""

    model_config = _example({"token_id": "3f9c2a7d1e6b8a05", "role": "submit",
                             "name": "ci-pipeline", "created_at": "2025-06-01T00:00:00Z",
                             "expires_at": "2030-01-01T00:00:00Z", "revoked_at": None,
                             "active": True})
    token_id: str
    role: str
    name: str
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    active: bool = Field(description="Not revoked and not expired now.")


class TokenCreated(TokenPublic):
    """A minted token: ``token`` is shown this once and never stored."""

    model_config = _example(TokenPublic.model_config["json_schema_extra"]["examples"][0]
                            | {"token": "cst_6yQ0x...", "active": True})
    token: str


class TokensPublic(BaseModel):
    """Stored tokens, oldest first."""

    model_config = _example({"data": [TokenPublic.model_config["json_schema_extra"][
        "examples"][0]], "count": 1})
    data: list[TokenPublic]
    count: int


# --- grid events --------------------------------------------------------------------------------
GRID_EVENT_ID_PATTERN = r"^ge-[0-9a-f]{12}$"
"""A grid event id as :func:`carbonsched.store.grid_events.insert_event` makes them."""


def _event_rule(check: Callable[[Any, str], Any], optional: bool = False) -> BeforeValidator:
    """A grid event field checked by its rule in :mod:`carbonsched.flex`, with its sentence.

    ``check(value, field)`` is the rule :class:`~carbonsched.flex.GridEvent` applies for
    ``carbonsched grid-event add`` and an event file too; its refusal is the 422's message.
    ``None`` passes an optional field (absent).
    """
    def run(value: Any, info: ValidationInfo) -> Any:
        if value is None and optional:
            return None
        try:
            return check(value, str(info.field_name))
        except InputError as exc:
            raise PydanticCustomError("value_error", str(exc)) from None
    return BeforeValidator(run)


EventTime = Annotated[AwareDatetime, Field(json_schema_extra={"pattern": TIME_PATTERN}),
                      _event_rule(lambda v, f: event_time(v, f).to_pydatetime())]
"""A grid event's start or end (:func:`carbonsched.flex.event_time`): its zone, years and
hour, in UTC after validation."""


class GridEventCreate(BaseModel):
    """A grid event: shed power at one site in a window, by kW or by a share of the baseline.

    Each rule is :class:`carbonsched.flex.GridEvent`'s, with its words, as for ``carbonsched
    grid-event add`` and an event file: the fields' own (the schema states them too) and those
    across fields (exactly one target, ``end`` after ``start``).
    """

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"site": "cn-nm-horinger", "start": "2026-07-01T17:00:00Z",
         "end": "2026-07-01T20:00:00Z", "target_fraction": 0.25, "notice_minutes": 240},
        {"site": "cn-nm-horinger", "start": "2026-07-01T17:00:00Z",
         "end": "2026-07-01T18:00:00Z", "target_kw": 500}]})
    site: Annotated[str, Field(min_length=1, max_length=MAX_IDENTIFIER_CHARS,
                               pattern=IDENTIFIER_PATTERN, description="Catalog site id."),
                    _event_rule(lambda v, f: event_site(v))]
    start: EventTime = Field(description="Start of the event window (tz-aware, on the hour: "
                             "the plan's hourly slots).")
    end: EventTime = Field(description="End of the window (tz-aware, on the hour, exclusive), "
                           "after start.")
    target_kw: Annotated[float | None, _event_rule(lambda v, f: event_target_kw(v), True)] = \
        Field(None, gt=0, description="IT power to shed. [kW] Give this or target_fraction.")
    target_fraction: Annotated[float | None, _event_rule(
        lambda v, f: event_target_fraction(v), True)] = Field(
        None, gt=0, le=1, description="Share of the site's baseline power to shed, (0, 1]. [-]")
    notice_minutes: Annotated[float | None, _event_rule(
        lambda v, f: event_notice(v).total_seconds() / 60, True)] = Field(
        None, ge=0, le=MAX_NOTICE_MINUTES, description="How long before start the event was "
        "announced, at most a year. [min] Absent: 240 (the default notice of carbonsched.flex).")

    @model_validator(mode="after")
    def _one_target_and_order(self) -> GridEventCreate:
        try:
            self.to_event()
        except InputError as exc:   # the rules across fields: one target, end after start
            raise PydanticCustomError("value_error", str(exc)) from None
        return self

    def to_event(self) -> GridEvent:
        """The event (:class:`carbonsched.flex.GridEvent`) this body asks for."""
        return GridEvent(site=self.site, start=self.start, end=self.end,
                         target_kw=self.target_kw, target_fraction=self.target_fraction,
                         **({} if self.notice_minutes is None else
                            {"notice": event_notice(self.notice_minutes)}))


class GridActionPublic(BaseModel):
    """One action of a grid event on one dispatch unit, and its state."""

    model_config = _example({
        "key": "llm-pretrain-0042#0", "action": "pause", "state": "done",
        "backend_id": "ontario:1187", "gpus": 8, "power_kw": 3.2, "attempts": 1,
        "detail": "scontrol suspend 1187", "done_at": "2026-07-01T17:00:05Z",
        "updated_at": "2026-07-01T17:00:05Z"})
    key: str = Field(description="The dispatch unit, <job_id>#<piece>.")
    action: Literal["pause", "hold", "resume", "release"]
    state: Literal["planned", "claimed", "done", "skipped", "failed"]
    backend_id: str | None
    gpus: int
    power_kw: float = Field(description="IT power of the unit. [kW]")
    attempts: int
    detail: str
    done_at: datetime | None
    updated_at: datetime | None


class GridEventPublic(BaseModel):
    """A grid event, what the re-plan chose and (on GET by id) every action's state."""

    model_config = _example({
        "event_id": "ge-3f9c2a7d1e6b", "site": "cn-nm-horinger",
        "start": "2026-07-01T17:00:00Z", "end": "2026-07-01T20:00:00Z", "target_kw": None,
        "target_fraction": 0.25, "notice_s": 14400.0, "source": "api:admin",
        "state": "active", "created_at": "2026-07-01T13:00:00Z",
        "planned_at": "2026-07-01T17:00:04Z", "baseline_kw": 160.0,
        "target_reduction_kw": 40.0, "planned_reduction_kw": 52.0, "shortfall_kw": 0.0,
        "detail": "baseline 160.0 kW, target 40.0 kW: pause 2 running unit(s), hold 0 not "
                  "started, 52.0 kW", "ended_at": None, "counts": {"pause:done": 2},
        "actions": []})
    event_id: str
    site: str
    start: datetime
    end: datetime
    target_kw: float | None
    target_fraction: float | None
    notice_s: float
    source: str
    state: Literal["scheduled", "active", "resuming", "ended"]
    created_at: datetime
    planned_at: datetime | None = Field(description="When the re-plan chose the actions.")
    baseline_kw: float | None = Field(description="Peak planned IT power at the site in the "
                                      "window. [kW]")
    target_reduction_kw: float | None = Field(description="The reduction asked. [kW]")
    planned_reduction_kw: float | None = Field(description="IT power of the work the re-plan "
                                               "chose to pause or hold: the re-plan's figure, "
                                               "kept when an action is later skipped (counts "
                                               "and actions say which were). [kW]")
    shortfall_kw: float | None = Field(description="What the re-plan could not shed without "
                                       "missing a deadline (target - planned); a skipped "
                                       "action is not added. [kW]")
    detail: str
    ended_at: datetime | None
    counts: dict[str, int] = Field(description="Actions by <action>:<state>.")
    actions: list[GridActionPublic] = Field(default_factory=list)


class GridEventsPublic(BaseModel):
    """Grid events, newest start first (without their action lists)."""

    model_config = _example({"data": [], "count": 0})
    data: list[GridEventPublic]
    count: int
