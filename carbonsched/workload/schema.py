"""One job schema: every job spec becomes a :class:`~carbonsched.domain.Job` via :class:`JobSpec`.

A job reaches carbonsched as a row of a workload file (JSON or CSV, :mod:`.files`), as a request
to the API (``POST /v1/jobs``, ``POST /v1/placements``) or as a spec stored in the service's
store; each entry point validates it with :class:`JobSpec` and converts it with
:meth:`JobSpec.to_job`, so all accept the same fields with the same limits and say the same
thing about the same bad value. The fields, their units and limits are documented in
``docs/workload.md``; the limits themselves live in :mod:`carbonsched.limits`.

Every refusal is a pydantic error whose message reads ``"<problem>; <how to fix it>"`` (for
example ``"must be 1..100000 GPUs, got 0; give a whole number of GPUs in 1..100000"``) at the
field it concerns. The file reader prefixes ``"<path>, job N, field 'x': "``; the API returns it
in its 422 ``detail``. The checks of single values (:func:`whole_number`,
:func:`positive_number`, :func:`utc_datetime`) are public so that the inference rows of a
workload file follow the same rules.

Values are taken leniently where a CSV cell gives text: numbers as ``"8"`` or ``"8.0"``,
booleans as ``true``/``false``, ``1``/``0``, ``yes``/``no`` or an empty cell (false); an empty
cell or ``null`` is an absent value.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

import pandas as pd
from pydantic import (
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    ValidationError,
    ValidationInfo,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from carbonsched.domain import Job, WorkKind
from carbonsched.limits import (
    EARLIEST_YEAR,
    IDENTIFIER_PATTERN,
    LATEST_YEAR,
    MAX_ALLOWED_SITES,
    MAX_CHECKPOINT_OVERHEAD_MINUTES,
    MAX_DURATION_HOURS,
    MAX_DURATION_MINUTES,
    MAX_GPU_TYPE_CHARS,
    MAX_IDENTIFIER_CHARS,
    MAX_JOB_GPUS,
    MAX_PIECES,
    MAX_POWER_PER_GPU_KW,
    MIN_DURATION_HOURS,
    TEXT_PATTERN,
    TIME_PATTERN,
    identifier_problem,
)

SITE_SEPARATOR = ";"
"""Separator of site ids when ``allowed_sites`` is given as one text (the CSV cell)."""
TRUE_WORDS = frozenset({"true", "1", "yes"})
"""Text read as true (any case, surrounding blanks ignored)."""
FALSE_WORDS = frozenset({"false", "0", "no", ""})
"""Text read as false; an empty cell is false."""
UNITS = {"gpus": "GPUs", "duration_hours": "h", "duration_minutes": "min",
         "power_per_gpu_kw": "kW", "checkpoint_overhead_minutes": "min", "max_pieces": "-",
         "slo_ms": "ms"}
"""Unit of each numeric field, as the messages name it."""


# --- checks of one value ----------------------------------------------------------------------

def problem(what: str, fix: str, kind: str = "value_error") -> PydanticCustomError:
    """An error for one field: ``"<what>; <fix>"``.

    Parameters
    ----------
    what
        What is wrong, naming the value given.
    fix
        How to fix it.
    kind
        The error type in the API's 422 ``detail`` (``value_error``, ``missing``,
        ``extra_forbidden``).
    """
    return PydanticCustomError(kind, f"{what}; {fix}")


def missing(field: str) -> PydanticCustomError:
    """The error of a required field that is absent, ``null`` or an empty cell."""
    return problem("is missing", f"give {field} for every job", "missing")


def absent(value: Any) -> bool:
    """Whether ``value`` stands for "not given": ``None`` or an empty (or blank) text."""
    return value is None or (isinstance(value, str) and not value.strip())


def whole_number(value: Any, unit: str, minimum: int, maximum: int) -> int:
    """A whole number in ``minimum..maximum`` from a number or its text (``8``, ``"8"``, ``8.0``).

    Parameters
    ----------
    value
        The value given.
    unit
        Its unit, for the message (``GPUs``, ``min``, ``-``).
    minimum, maximum
        Inclusive bounds. [unit]

    Raises
    ------
    PydanticCustomError
        Not a whole number (booleans are not numbers), or outside the bounds.
    """
    try:
        if isinstance(value, bool):
            raise ValueError
        f = float(value.strip() if isinstance(value, str) else value)
        if not f.is_integer():
            raise ValueError
    except (TypeError, ValueError, OverflowError):
        raise problem(f"expected a whole number [{unit}], got {value!r}",
                      "give an integer") from None
    if not minimum <= f <= maximum:
        raise problem(f"must be {minimum}..{maximum} {unit}, got {value!r}",
                      f"give a whole number of {unit} in {minimum}..{maximum}")
    return int(f)


def positive_number(value: Any, unit: str, maximum: float) -> float:
    """A finite number in ``(0, maximum]`` from a number or its text.

    Parameters
    ----------
    value
        The value given.
    unit
        Its unit, for the message (``kW``, ``h``, ``ms``).
    maximum
        Inclusive upper bound. [unit]

    Raises
    ------
    PydanticCustomError
        Not a number (booleans are not numbers), not finite, <= 0 or above ``maximum``.
    """
    try:
        if isinstance(value, bool):
            raise ValueError
        f = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError, OverflowError):
        raise problem(f"expected a number [{unit}], got {value!r}", "give a number") from None
    if not math.isfinite(f) or f <= 0 or f > maximum:
        raise problem(f"must be a finite number > 0 and <= {maximum:g} {unit}, got {value!r}",
                      f"give a value in {unit} within (0, {maximum:g}]")
    return f


def utc_datetime(value: Any, on_hour: bool = False) -> datetime:
    """A tz-aware UTC datetime from ISO 8601 text with an offset (or an aware datetime).

    Parameters
    ----------
    value
        ISO 8601 text such as ``'2023-07-15T08:00:00+08:00'`` (other spellings pandas reads
        are accepted too), or an aware ``datetime``.
    on_hour
        Also require the start of an hour (inference demand is hourly).

    Returns
    -------
    datetime.datetime
        The instant in UTC (``tzinfo=datetime.UTC``), to the microsecond.

    Raises
    ------
    PydanticCustomError
        Not text or a datetime, unparseable, naive (no UTC offset), outside the years
        :data:`~carbonsched.limits.EARLIEST_YEAR`..:data:`~carbonsched.limits.LATEST_YEAR`
        (the year as written, in its own offset), or (``on_hour``) not on the hour.
    """
    if isinstance(value, datetime):
        t = value
    elif isinstance(value, str) and value.strip():
        text = value.strip()
        try:
            t = datetime.fromisoformat(text)      # ISO 8601, the common case, in ~1 µs
        except ValueError:
            try:
                t = pd.Timestamp(text)
            except (ValueError, TypeError, OverflowError):
                t = pd.NaT
            if t is pd.NaT:
                raise problem(f"cannot parse {value!r} as a timestamp",
                              "write ISO 8601 such as '2023-07-15T08:00:00+08:00'") from None
    else:
        raise problem(f"expected an ISO 8601 timestamp, got {value!r}",
                      "write e.g. '2023-07-15T08:00:00Z'")
    if t.tzinfo is None or t.utcoffset() is None:
        raise problem(f"timestamp {value!r} is naive (no UTC offset)",
                      "add 'Z' for UTC or an offset such as '+08:00'")
    # the year as written, in its own offset: what the OpenAPI document's pattern states
    # (TIME_PATTERN) and the API's other times check; its instant in UTC may be a few hours
    # into 1969 or 2201, well inside pandas' range
    if not EARLIEST_YEAR <= t.year <= LATEST_YEAR:
        raise problem(f"timestamp {value!r} is outside the supported years "
                      f"{EARLIEST_YEAR}..{LATEST_YEAR}",
                      f"give a time in the years {EARLIEST_YEAR}..{LATEST_YEAR}")
    t = t.astimezone(UTC)
    if isinstance(t, pd.Timestamp):
        t = (t.floor("us") if t.nanosecond else t).to_pydatetime()
    if on_hour and (t.minute or t.second or t.microsecond):
        raise problem(f"timestamp {value!r} is not on the hour",
                      "plans use hourly slots; round it to the hour")
    return t


def timestamp(value: Any, on_hour: bool = False) -> pd.Timestamp:
    """:func:`utc_datetime` as a :class:`pandas.Timestamp` (UTC); raises as it does."""
    return pd.Timestamp(utc_datetime(value, on_hour))


def _has_control(text: str) -> bool:
    return any(ord(c) < 0x20 for c in text)


def _text(value: Any, numbers: bool = False) -> str:
    """Non-empty text, surrounding blanks removed, no control characters."""
    if numbers and isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise problem(f"expected a non-empty string, got {value!r}", "give a text value")
    text = value.strip()
    if _has_control(text):
        raise problem(f"{text!r} contains a control character (tab, newline, ...)",
                      "remove it")
    return text


# --- field validators (pydantic ``BeforeValidator``s) -----------------------------------------

def _required(check: Callable[[Any, str], Any]) -> BeforeValidator:
    def run(value: Any, info: ValidationInfo) -> Any:
        if absent(value):
            raise missing(str(info.field_name))
        return check(value, str(info.field_name))
    return BeforeValidator(run)


def _optional(check: Callable[[Any, str], Any], default: Any) -> BeforeValidator:
    def run(value: Any, info: ValidationInfo) -> Any:
        if absent(value):
            return default
        return check(value, str(info.field_name))
    return BeforeValidator(run)


def identifier(value: Any, what: str) -> str:
    """An identifier (job id, tenant, site id) under the one grammar, for a pydantic validator.

    A whole number is taken as its text (a CSV cell ``42``) and surrounding blanks are removed
    (as for every text cell); the rest is :func:`carbonsched.limits.identifier_problem`.

    Raises
    ------
    PydanticCustomError
        With the grammar's message, the same as every other entry point's.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if isinstance(value, str):
        value = value.strip()
    msg = identifier_problem(value, what)
    if msg is not None:
        raise PydanticCustomError("value_error", msg)
    return value


def _job_id(value: Any, field: str) -> str:
    return identifier(value, "job id")


def _tenant(value: Any, field: str) -> str:
    return identifier(value, "tenant")


def _gpu_type(value: Any, field: str) -> str:
    text = _text(value)
    if len(text) > MAX_GPU_TYPE_CHARS:
        raise problem(f"GPU type is {len(text)} characters long, the store keeps at most "
                      f"{MAX_GPU_TYPE_CHARS}", "use the catalog's GPU type name")
    return text


def _kind(value: Any, field: str) -> str:
    if not isinstance(value, str) or value not in (WorkKind.TRAINING, WorkKind.BATCH):
        raise problem(f"unknown job kind {value!r}", "give 'training' or 'batch'")
    return str(value)


def _sites(value: Any, field: str) -> list[str]:
    if isinstance(value, str):
        value = [s.strip() for s in value.split(SITE_SEPARATOR) if s.strip()]
    if not isinstance(value, (list, tuple)) or not all(isinstance(s, str) for s in value):
        raise problem(f"expected a list of site ids, got {value!r}",
                      "give a JSON list of strings (CSV: ids separated by ';')")
    if len(value) > MAX_ALLOWED_SITES:
        raise problem(f"{len(value)} sites listed, at most {MAX_ALLOWED_SITES} are accepted",
                      "list fewer sites (an empty list allows any site)")
    return [identifier(s, "site id") for s in value]


def _flag(value: Any, field: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in TRUE_WORDS | FALSE_WORDS:
        return value.strip().lower() in TRUE_WORDS
    raise problem(f"expected true or false, got {value!r}",
                  "give true or false (CSV: true/false, 1/0 or empty)")


def _whole(minimum: int, maximum: int) -> Callable[[Any, str], int]:
    return lambda value, field: whole_number(value, UNITS[field], minimum, maximum)


def _hours(value: Any, field: str) -> float:
    hours = positive_number(value, "h", MAX_DURATION_HOURS)
    minutes = hours * 60.0
    if abs(minutes - round(minutes)) > 1e-6:
        raise problem(f"{value!r} h is not a whole number of minutes",
                      "give duration_minutes, e.g. 1.5 h = 90")
    if hours < MIN_DURATION_HOURS:   # rounds to 0 minutes (5e-324 h passed the check above)
        raise problem(f"{value!r} h is shorter than one minute ({MIN_DURATION_HOURS:.6g} h)",
                      "give at least 1 minute: duration_minutes >= 1 or duration_hours "
                      ">= 1/60")
    return hours


def _time(value: Any, field: str) -> datetime:
    return utc_datetime(value)


Text = Annotated[str, Field(min_length=1, pattern=TEXT_PATTERN)]
Identifier = Annotated[str, Field(min_length=1, max_length=MAX_IDENTIFIER_CHARS,
                                  pattern=IDENTIFIER_PATTERN)]
"""A job id, tenant or site id (:func:`carbonsched.limits.identifier_problem`), as the OpenAPI
document shows it."""

JOB_RULES_SCHEMA: dict[str, Any] = {"allOf": [
    # the run time is required, in one of its two spellings, and not null
    {"anyOf": [{"required": ["duration_minutes"],
                "properties": {"duration_minutes": {"type": "integer"}}},
               {"required": ["duration_hours"],
                "properties": {"duration_hours": {"type": "number"}}}]},
    # max_pieces above 1 needs preemptible: true
    {"anyOf": [{"properties": {"max_pieces": {"maximum": 1}}},
               {"required": ["preemptible"], "properties": {"preemptible": {"const": True}}}]},
]}
"""The rules of a job that span fields and that JSON Schema can state (merged into the
job schemas' OpenAPI document). The rest it cannot state: ``deadline`` at least the duration
after ``earliest_start``, and ``duration_minutes`` = 60 x ``duration_hours`` when both are
given (refused with 422; the operations' 422 descriptions say so)."""


# --- the schema -------------------------------------------------------------------------------

class JobSpec(BaseModel):
    """A latency-tolerant batch or training job as a client or a file gives it.

    The one schema of a job spec (``docs/workload.md``, "Job fields"): the workload file's
    rows, the API's requests and the store's stored specs are validated by it, and
    :meth:`to_job` is the one conversion to a :class:`~carbonsched.domain.Job`. Limits are in
    :mod:`carbonsched.limits`. Give the run time as ``duration_minutes`` or
    ``duration_hours`` (fractions of an hour that are whole minutes); after validation
    ``duration_minutes`` always holds it.

    Raises
    ------
    pydantic.ValidationError
        On validation: one error per bad field, at that field, with the message
        ``"<problem>; <fix>"``; unknown fields are reported first.
    """

    model_config = ConfigDict(extra="forbid", json_schema_extra=JOB_RULES_SCHEMA)

    id: Annotated[Identifier, Field(description="Job id, unique."),
                  _required(_job_id)]
    tenant: Annotated[Identifier, Field(description="Who submits it."),
                      _optional(_tenant, "default")] = "default"
    kind: Annotated[Literal["training", "batch"], _optional(_kind, "batch")] = "batch"
    gpu_type: Annotated[Text, Field(max_length=MAX_GPU_TYPE_CHARS,
                                    description="GPU model, as in the catalog inventories."),
                        _required(_gpu_type)]
    gpus: Annotated[int, Field(ge=1, le=MAX_JOB_GPUS,
                               description="Gang size: all at one site at once. [GPUs]"),
                    _required(_whole(1, MAX_JOB_GPUS))]
    duration_minutes: Annotated[int | None, Field(
        ge=1, le=MAX_DURATION_MINUTES, description="Run time (or give duration_hours). [min]"),
        _optional(_whole(1, MAX_DURATION_MINUTES), None)] = None
    duration_hours: Annotated[float | None, Field(
        ge=MIN_DURATION_HOURS, le=MAX_DURATION_HOURS,
        json_schema_extra={"multipleOf": MIN_DURATION_HOURS},  # stated; _hours checks it
        description="Run time in hours, a whole number of minutes (1.5 = 90 min, at least "
        "1/60); or give duration_minutes. [h]"), _optional(_hours, None)] = None
    power_per_gpu_kw: Annotated[float, Field(
        gt=0, le=MAX_POWER_PER_GPU_KW, description="IT power per GPU incl. host share. [kW]"),
        _required(lambda v, f: positive_number(v, "kW", MAX_POWER_PER_GPU_KW))]
    earliest_start: Annotated[AwareDatetime, Field(json_schema_extra={"pattern": TIME_PATTERN},
                                                   description="Start at or after (ISO 8601 "
                                                   "with an offset)."), _required(_time)]
    deadline: Annotated[AwareDatetime, Field(json_schema_extra={"pattern": TIME_PATTERN},
                                             description="End by (ISO 8601 with an offset)."),
                        _required(_time)]
    allowed_sites: Annotated[list[Identifier], Field(
        max_length=MAX_ALLOWED_SITES, description="Sites the job may run at (data "
        "residency); empty: any."), _optional(_sites, [])] = Field(default_factory=list)
    preemptible: Annotated[bool, Field(description="Can checkpoint, be suspended and "
                                       "resume."), _optional(_flag, False)] = False
    checkpoint_overhead_minutes: Annotated[int, Field(
        ge=0, le=MAX_CHECKPOINT_OVERHEAD_MINUTES, description="Restore time of each resumed "
        "piece. [min]"), _optional(_whole(0, MAX_CHECKPOINT_OVERHEAD_MINUTES), 0)] = 0
    max_pieces: Annotated[int, Field(ge=1, le=MAX_PIECES, description="Most pieces the job "
                                     "may run in; above 1 needs preemptible. [-]"),
                          _optional(_whole(1, MAX_PIECES), 1)] = 1

    @model_validator(mode="wrap")
    @classmethod
    def _whole_job(cls, data: Any, handler: ModelWrapValidatorHandler[JobSpec]) -> JobSpec:
        """Field errors in the schema's words (unknown fields first), then the cross-field rules."""
        try:
            spec = handler(data)
        except ValidationError as exc:
            raise _reworded(cls, exc) from None
        if isinstance(data, JobSpec):
            return spec
        named = "duration_hours" if isinstance(data, dict) and "duration_hours" in data \
            else "duration_minutes"
        minutes = spec.duration_minutes
        if minutes is None and spec.duration_hours is None:
            raise _at(cls, named, problem(
                "is missing", "give duration_minutes (or duration_hours) for every job",
                "missing"), data)
        if spec.duration_hours is not None:
            from_hours = int(round(spec.duration_hours * 60.0))
            if minutes is not None and abs(spec.duration_hours * 60.0 - minutes) > 1e-6:
                raise _at(cls, "duration_hours", problem(
                    f"{spec.duration_hours:g} h disagrees with duration_minutes {minutes}",
                    "give one of duration_minutes or duration_hours"), spec.duration_hours)
            minutes = from_hours
        end = spec.earliest_start + timedelta(minutes=minutes)
        if spec.deadline < end:
            raise _at(cls, "deadline", problem(
                f"deadline {spec.deadline.isoformat()} is before earliest_start + duration "
                f"({end.isoformat()})",
                "give a deadline at least the job's duration after earliest_start"),
                      spec.deadline)
        if spec.max_pieces > 1 and not spec.preemptible:
            raise _at(cls, "max_pieces", problem(
                f"max_pieces {spec.max_pieces} > 1 on a job that is not preemptible",
                "set preemptible to true, or max_pieces to 1"), spec.max_pieces)
        spec.duration_minutes = minutes
        return spec

    def to_job(self) -> Job:
        """The domain :class:`~carbonsched.domain.Job` (times in UTC); the one conversion.

        Raises
        ------
        WorkloadError
            Only if :class:`~carbonsched.domain.Job` refuses what the schema accepted (a bug).
        """
        return Job(id=self.id, tenant=self.tenant, gpu_type=self.gpu_type, gpus=self.gpus,
                   duration_minutes=self.duration_minutes,
                   power_per_gpu_kw=self.power_per_gpu_kw,
                   earliest_start=pd.Timestamp(self.earliest_start).tz_convert("UTC"),
                   deadline=pd.Timestamp(self.deadline).tz_convert("UTC"),
                   allowed_sites=tuple(self.allowed_sites), kind=WorkKind(self.kind),
                   preemptible=self.preemptible,
                   checkpoint_overhead_minutes=self.checkpoint_overhead_minutes,
                   max_pieces=self.max_pieces)

    @classmethod
    def from_job(cls, job: Job) -> JobSpec:
        """The spec of a domain job (``duration_minutes``; for storing it as JSON).

        Raises
        ------
        pydantic.ValidationError
            The job breaks the schema's limits (a job built in code, not read through it).
        """
        return cls.model_validate({
            "id": job.id, "tenant": job.tenant, "kind": str(job.kind),
            "gpu_type": job.gpu_type, "gpus": job.gpus, "duration_minutes": job.duration_minutes,
            "power_per_gpu_kw": job.power_per_gpu_kw, "earliest_start": job.earliest_start,
            "deadline": job.deadline, "allowed_sites": list(job.allowed_sites),
            "preemptible": job.preemptible,
            "checkpoint_overhead_minutes": job.checkpoint_overhead_minutes,
            "max_pieces": job.max_pieces})


JOB_FIELDS = tuple(JobSpec.model_fields)
"""The fields of a job spec, in the schema's order."""


def _at(cls: type[BaseModel], field: str, error: PydanticCustomError, value: Any
        ) -> ValidationError:
    """``error`` at ``field`` as a ValidationError (so the API's ``loc`` names the field)."""
    return ValidationError.from_exception_data(
        cls.__name__, [InitErrorDetails(type=error, loc=(field,), input=value)])


def _reworded(cls: type[BaseModel], exc: ValidationError) -> ValidationError:
    """The errors of pydantic itself (absent or unknown fields) in the schema's words."""
    fields = ", ".join(cls.model_fields)
    out: list[InitErrorDetails] = []
    for e in exc.errors():
        loc = tuple(e["loc"])
        name = str(loc[0]) if loc else ""
        if e["type"] == "missing" and len(loc) == 1:
            err = missing(name)
        elif e["type"] == "extra_forbidden" and len(loc) == 1:
            err = problem("unknown field", f"remove it or use one of {fields}",
                          "extra_forbidden")
        else:
            err = PydanticCustomError(e["type"], e["msg"])
        out.append(InitErrorDetails(type=err, loc=loc, input=e.get("input")))
    out.sort(key=lambda d: d["type"].type != "extra_forbidden")
    return ValidationError.from_exception_data(cls.__name__, out)
