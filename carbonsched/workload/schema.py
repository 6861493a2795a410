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

import json
import math
import re
from collections.abc import Callable, Mapping
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

from carbonsched.adapters.dispatch.k8s_podspec import pod_template_problem
from carbonsched.domain import (
    MIG_PROFILES,
    PAYLOAD_FIELDS,
    Job,
    JobPayload,
    WorkKind,
    mig_profiles,
)
from carbonsched.limits import (
    EARLIEST_YEAR,
    ENV_NAME_PATTERN,
    IDENTIFIER_PATTERN,
    LATEST_YEAR,
    MAX_ALLOWED_SITES,
    MAX_CHECKPOINT_OVERHEAD_MINUTES,
    MAX_COMMAND_CHARS,
    MAX_DOMAINS,
    MAX_DURATION_HOURS,
    MAX_DURATION_MINUTES,
    MAX_ENV_VALUE_CHARS,
    MAX_ENV_VARS,
    MAX_GPU_MILLI,
    MAX_GPU_TYPE_CHARS,
    MAX_IDENTIFIER_CHARS,
    MAX_JOB_GPUS,
    MAX_NAME_CHARS,
    MAX_PATH_CHARS,
    MAX_PIECES,
    MAX_POD_TEMPLATE_BYTES,
    MAX_POWER_PER_GPU_KW,
    MAX_SCRIPT_BYTES,
    MAX_SLO_MS,
    MAX_VOLUMES,
    MIN_DURATION_HOURS,
    RESERVED_ENV_PREFIX,
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
         "max_domains": "-", "slo_ms": "ms", "alternatives": "options"}
"""Unit of each numeric field, as the messages name it (``-`` for a field not listed)."""


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


def missing(field: str, what: str = "every job") -> PydanticCustomError:
    """The error of a required field that is absent, ``null`` or an empty cell."""
    return problem("is missing", f"give {field} for {what}", "missing")


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


def _name(what: str, limit: int, fix: str) -> Callable[[Any, str], str]:
    """The check of a name: text without control characters, at most ``limit`` characters."""
    def check(value: Any, field: str) -> str:
        text = _text(value)
        if len(text) > limit:
            raise problem(f"{what} is {len(text)} characters long, the store keeps at most "
                          f"{limit}", fix)
        return text
    return check


_gpu_type = _name("GPU type", MAX_GPU_TYPE_CHARS, "use the catalog's GPU type name")
_area = _name("area", MAX_NAME_CHARS, "use the id of one of the catalog's areas")


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


TOPOLOGIES = ("same-domain",)
"""Values of a job's ``topology`` field: ``same-domain`` keeps the whole gang inside one
network domain (``nodes_per_domain`` in the catalog; ``max_domains = 1``)."""


def _topology(value: Any, field: str) -> str:
    if not isinstance(value, str) or value.strip() not in TOPOLOGIES:
        raise problem(f"unknown topology {value!r}",
                      "give 'same-domain' (or max_domains = N for a span of N domains)")
    return value.strip()


def _flag(value: Any, field: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in TRUE_WORDS | FALSE_WORDS:
        return value.strip().lower() in TRUE_WORDS
    raise problem(f"expected true or false, got {value!r}",
                  "give true or false (CSV: true/false, 1/0 or empty)")


def _whole(minimum: int, maximum: int) -> Callable[[Any, str], int]:
    return lambda value, field: whole_number(value, UNITS.get(field, "-"), minimum, maximum)


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


# --- payload fields (docs/workload.md, "Payload fields") ---------------------------------------

SLURM_NAME_PATTERN = r"^[A-Za-z0-9_.+@-]{1,64}$"
"""Grammar of ``account``, ``partition`` and ``qos``: no blanks, commas or control characters
(sbatch reads commas as list separators), at most 64 characters."""
IMAGE_PATTERN = r"^([A-Za-z0-9][A-Za-z0-9._/:@+-]{0,511}|/[A-Za-z0-9._/+@-]{1,4095})$"
"""Grammar of ``image``: a container image reference (``registry/repo:tag`` or
``@sha256:...``; the OCI distribution spec's characters, no blanks, at most 512 characters), or
the absolute path of an OCI bundle (Slurm's own ``--container``)."""
DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
"""A Kubernetes DNS-1123 label (volume names, claim names); Kubernetes API conventions."""
DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$"
"""A Kubernetes DNS-1123 subdomain (service account names)."""
MIG_PROFILE_PATTERN = r"^[1-9]g\.[0-9]{1,3}gb(\+me)?$"
"""Spelling of a MIG profile: ``<slices>g.<memory>gb``, optionally ``+me`` (NVIDIA MIG User
Guide, "Terminology")."""
RUN_FIELDS = ("script", "script_path", "command")
"""The fields naming what a Slurm job runs: at most one of them."""
VOLUME_SOURCES = ("host_path", "claim", "config_map", "secret", "empty_dir")
"""Where a volume's data comes from (Kubernetes ``hostPath``, ``persistentVolumeClaim``,
``configMap``, ``secret``, ``emptyDir``): exactly one per volume."""
ENV_SEPARATOR = ";"
"""Separator of ``NAME=value`` pairs when ``env`` is one text (the CSV cell)."""


def _json_text(value: Any) -> Any:
    """A JSON list or object given as text (a CSV cell) parsed; anything else as is."""
    if isinstance(value, str) and value.strip()[:1] in ("[", "{"):
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise problem(f"cannot parse {value[:60]!r} as JSON ({exc.msg})",
                          "write a JSON list or object") from None
    return value


def _free_text(value: Any, what: str, limit: int, newlines: bool = False) -> str:
    if not isinstance(value, str) or not value.strip():
        raise problem(f"expected a non-empty {what}, got {value!r}", f"give the {what} as text")
    if newlines and "\r" in value:
        raise problem(f"the {what} has Windows line ends (a carriage return, \\r)",
                      "use Unix line ends (\\n): a shell reads the \\r as part of a word, "
                      "and sbatch refuses a script with DOS line breaks")
    bad = [c for c in value if ord(c) < 0x20 and not (newlines and c in "\n\t")]
    if bad or "\x7f" in value:
        raise problem(f"the {what} contains a control character ({(bad or ['DEL'])[0]!r})",
                      "remove it" + ("" if newlines else " (one line only)"))
    if len(value) > limit:
        raise problem(f"the {what} is {len(value)} characters long, at most {limit} are "
                      "accepted", "shorten it" + ("; ship a script and give script_path"
                                                  if newlines else ""))
    return value


def _script(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise problem(f"expected the batch script as text, got {value!r}",
                      "give the script's text, starting with a '#!' line")
    size = len(value.encode("utf-8"))
    if size > MAX_SCRIPT_BYTES:
        raise problem(f"the script is {size} bytes, at most {MAX_SCRIPT_BYTES} are accepted",
                      "ship it on the cluster and give script_path instead")
    if "\x00" in value:
        raise problem("the script contains a NUL character", "remove it")
    if "\r" in value:
        raise problem("the script has Windows line ends (a carriage return, \\r)",
                      "save it with Unix line ends (\\n): sbatch refuses a script with DOS "
                      "line breaks")
    if not value.startswith("#!"):
        raise problem(f"the script starts with {value.splitlines()[0][:40]!r}, not '#!'",
                      "start it with an interpreter line such as '#!/bin/bash' (sbatch "
                      "refuses a script without one)")
    return value


def _abs_path(value: Any, field: str) -> str:
    path = _free_text(value, "path", MAX_PATH_CHARS).strip()
    if not path.startswith("/"):
        raise problem(f"{path!r} is not an absolute path", "give a path starting with '/' "
                      "(as seen on the cluster's nodes)")
    return path


def _command(value: Any, field: str) -> str | list[str]:
    if isinstance(value, str) and value.strip().startswith("["):
        try:   # an argv list written as JSON text (a CSV cell); else shell text ("[ -f x ]")
            parsed = json.loads(value)
            value = parsed if isinstance(parsed, list) else value
        except json.JSONDecodeError:
            pass
    if isinstance(value, str):
        return _free_text(value, "command", MAX_COMMAND_CHARS, newlines=True)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        items = [_free_text(v, "command item", MAX_COMMAND_CHARS, newlines=True)
                 for v in value]
        if sum(map(len, items)) > MAX_COMMAND_CHARS:
            raise problem(f"the command is {sum(map(len, items))} characters long, at most "
                          f"{MAX_COMMAND_CHARS} are accepted", "shorten it")
        return items
    raise problem(f"expected shell text or a list of strings, got {value!r}",
                  "give e.g. \"python train.py\" or [\"python\", \"train.py\"]")


def _args(value: Any, field: str) -> list[str]:
    value = _json_text(value)
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise problem(f"expected a list of strings, got {value!r}",
                      "give a JSON list such as [\"--epochs\", \"3\"]")
    items = [_free_text(v, "argument", MAX_COMMAND_CHARS, newlines=True) if v else v
             for v in value]
    if sum(map(len, items)) > MAX_COMMAND_CHARS:
        raise problem(f"the arguments are {sum(map(len, items))} characters long, at most "
                      f"{MAX_COMMAND_CHARS} are accepted", "shorten them")
    return items


def env_problem(name: Any, value: Any) -> str | None:
    """What is wrong with one ``env`` entry, or None: the one rule of every entry point.

    Names follow :data:`~carbonsched.limits.ENV_NAME_PATTERN` and never start with
    :data:`~carbonsched.limits.RESERVED_ENV_PREFIX`; values are text of at most
    :data:`~carbonsched.limits.MAX_ENV_VALUE_CHARS` characters without NUL.
    """
    if not isinstance(name, str) or not re.fullmatch(ENV_NAME_PATTERN, name):
        return (f"variable name {name!r} is not a shell name; use letters, digits and '_', "
                "not starting with a digit, at most 128 characters")
    if name.upper().startswith(RESERVED_ENV_PREFIX):
        return (f"variable {name!r} is set by carbonsched for every piece "
                f"({RESERVED_ENV_PREFIX}*); rename it")
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return f"variable {name!r} has value {value!r}; give text"
    text = str(value)
    if "\x00" in text:
        return f"variable {name!r} contains a NUL character; remove it"
    if len(text) > MAX_ENV_VALUE_CHARS:
        return (f"variable {name!r} is {len(text)} characters long, at most "
                f"{MAX_ENV_VALUE_CHARS} are accepted; shorten it")
    return None


def _env(value: Any, field: str) -> dict[str, str]:
    value = _json_text(value)
    if isinstance(value, str):   # the CSV cell: NAME=value;NAME2=value2
        pairs = {}
        for item in (i for i in value.split(ENV_SEPARATOR) if i.strip()):
            name, sep, val = item.partition("=")
            if not sep:
                raise problem(f"{item.strip()!r} is not NAME=value",
                              "write NAME=value pairs separated by ';' (or a JSON object)")
            pairs[name.strip()] = val
        value = pairs
    if not isinstance(value, Mapping):
        raise problem(f"expected a mapping of names to values, got {value!r}",
                      "give a JSON object such as {\"OMP_NUM_THREADS\": \"8\"}")
    if len(value) > MAX_ENV_VARS:
        raise problem(f"{len(value)} variables, at most {MAX_ENV_VARS} are accepted",
                      "pass fewer (or read a file the job ships)")
    for name, val in value.items():
        msg = env_problem(name, val)
        if msg is not None:
            what, _, fix = msg.rpartition("; ")
            raise problem(what, fix)
    return {str(k): str(v) for k, v in value.items()}


def _pattern(regex: str, what: str, example: str) -> Callable[[Any, str], str]:
    def check(value: Any, field: str) -> str:
        if not isinstance(value, str) or not re.fullmatch(regex, value.strip()):
            raise problem(f"{value!r} is not a valid {what}", f"give e.g. {example!r}")
        return value.strip()
    return check


def _volumes(value: Any, field: str) -> list[dict[str, Any]]:
    value = _json_text(value)
    if not isinstance(value, (list, tuple)):
        raise problem(f"expected a list of volumes, got {value!r}",
                      "give [{\"name\": \"data\", \"mount_path\": \"/data\", "
                      "\"claim\": \"datasets\"}]")
    if len(value) > MAX_VOLUMES:
        raise problem(f"{len(value)} volumes, at most {MAX_VOLUMES} are accepted",
                      "mount fewer")
    out, names = [], set()
    keys = ("name", "mount_path", "read_only", *VOLUME_SOURCES)
    for i, v in enumerate(value):
        if not isinstance(v, Mapping):
            raise problem(f"volume {i} is {v!r}, not an object", "give name, mount_path and "
                          f"one of {', '.join(VOLUME_SOURCES)}")
        extra = sorted(set(v) - set(keys))
        if extra:
            raise problem(f"volume {i} has unknown key(s) {', '.join(extra)}",
                          f"use {', '.join(keys)}")
        name = _pattern(DNS_LABEL_PATTERN, "volume name (DNS-1123 label)", "data")(
            v.get("name"), field)
        if name in names:
            raise problem(f"volume name {name!r} appears twice", "give each volume its name")
        names.add(name)
        # empty_dir is a flag: false ("no", "0") names no source, as a stored spec reads it
        sources = [k for k in VOLUME_SOURCES if v.get(k) not in (None, False, "")
                   and (k != "empty_dir" or _flag(v[k], field))]
        if len(sources) != 1:
            raise problem(f"volume {name!r} names {len(sources)} sources "
                          f"({', '.join(sources) or 'none'})",
                          f"give exactly one of {', '.join(VOLUME_SOURCES)}")
        src = sources[0]
        item: dict[str, Any] = {"name": name, "mount_path": _abs_path(v.get("mount_path"),
                                                                         field)}
        if src == "host_path":
            item[src] = _abs_path(v[src], field)
        elif src == "empty_dir":
            item[src] = _flag(v[src], field)
        else:
            item[src] = _pattern(DNS_SUBDOMAIN_PATTERN, f"{src} name", "datasets")(v[src], field)
        if v.get("read_only") is not None:
            item["read_only"] = _flag(v["read_only"], field)
        out.append(item)
    return out


def _pod_template(value: Any, field: str) -> dict[str, Any]:
    """A Kubernetes PodTemplateSpec of at most ``MAX_POD_TEMPLATE_BYTES`` as JSON.

    Its fields' types are checked by :func:`pod_template_problem`
    (:mod:`carbonsched.adapters.dispatch.k8s_podspec`), as the Kubernetes adapter checks them
    again at dispatch.
    """
    value = _json_text(value)
    if isinstance(value, Mapping):
        size = len(json.dumps(value))
        if size > MAX_POD_TEMPLATE_BYTES:
            raise problem(f"the pod template is {size} bytes as JSON, at most "
                          f"{MAX_POD_TEMPLATE_BYTES} are accepted", "make it smaller")
    why = pod_template_problem(value)
    if why is not None:
        raise problem(*why)
    return json.loads(json.dumps(value))


def _gpu_milli(value: Any, field: str) -> int:
    return whole_number(value, "1/1000 GPU", 1, MAX_GPU_MILLI)


_SLURM_NAME = _pattern(SLURM_NAME_PATTERN, "Slurm name (no blanks or commas, <= 64 "
                       "characters)", "gpu")


Text = Annotated[str, Field(min_length=1, pattern=TEXT_PATTERN)]
Identifier = Annotated[str, Field(min_length=1, max_length=MAX_IDENTIFIER_CHARS,
                                  pattern=IDENTIFIER_PATTERN)]
"""A job id, tenant or site id (:func:`carbonsched.limits.identifier_problem`), as the OpenAPI
document shows it."""

# --- inference demand fields: the workload file's rules (files._inference_from), for the API ---

HourTime = Annotated[AwareDatetime, Field(json_schema_extra={"pattern": TIME_PATTERN},
                                          description="On the hour (ISO 8601 with an offset)."),
                     _required(lambda v, f: utc_datetime(v, on_hour=True))]
"""A required time on the hour, in UTC after validation: an inference demand's hour (plans use
hourly slots), with the workload file's message."""

SloMs = Annotated[float, Field(gt=0, le=MAX_SLO_MS, description="Round-trip latency SLO, at "
                               "most what a workload file accepts. [ms]"),
                  _required(lambda v, f: positive_number(v, "ms", MAX_SLO_MS))]
"""A required latency SLO in ``(0, MAX_SLO_MS]`` [ms], with the workload file's message."""

GpuType = Annotated[Text, Field(max_length=MAX_GPU_TYPE_CHARS,
                                description="GPU model, as in the catalog inventories."),
                    _required(_gpu_type)]
"""A required GPU type name, with the job schema's message."""

Area = Annotated[str, Field(min_length=1, max_length=MAX_NAME_CHARS, pattern=r"^[^\x00-\x1f]+$",
                            description="User area id, as in the catalog's areas."),
                 _required(_area)]
"""A required user area id (an inference demand's), with the workload file's message."""

Gpus = Annotated[int, Field(ge=1, le=MAX_JOB_GPUS, description="GPUs. [-]"),
                 _required(_whole(1, MAX_JOB_GPUS))]
"""A required GPU count in ``1..MAX_JOB_GPUS``, with the job schema's message."""

PowerPerGpuKw = Annotated[float | None, Field(
    gt=0, le=MAX_POWER_PER_GPU_KW, description="IT power per GPU [kW]; default the GPU type's "
    "from the parameter table."),
    _optional(lambda v, f: positive_number(v, "kW", MAX_POWER_PER_GPU_KW), None)]
"""An optional IT power per GPU in ``(0, MAX_POWER_PER_GPU_KW]`` [kW]."""


def whole_in(minimum: int, maximum: int, default: int) -> BeforeValidator:
    """A pydantic validator: an optional whole number in ``minimum..maximum``.

    The job schema's message; ``default`` when absent.
    """
    return _optional(_whole(minimum, maximum), default)

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
    topology: Annotated[Literal["same-domain"] | None, Field(
        description="'same-domain': the whole gang in one network domain (NVLink/InfiniBand "
        "island; the site's nodes_per_domain). Same as max_domains = 1."),
        _optional(_topology, None)] = None
    max_domains: Annotated[int | None, Field(
        ge=1, le=MAX_DOMAINS, description="Most network domains the gang may span (1 = "
        "same-domain); runs in one piece. [-]"),
        _optional(_whole(1, MAX_DOMAINS), None)] = None

    # -- payload (docs/workload.md, "Payload fields"); all optional ----------------------------
    template: Annotated[Identifier | None, Field(
        description="Name of a catalog template ([templates.NAME]) whose fields the job's "
        "own override."), _optional(lambda v, f: identifier(v, "template name"), None)] = None
    script: Annotated[str | None, Field(
        max_length=MAX_SCRIPT_BYTES, description="Slurm batch script, inline (starts with "
        "'#!'; at most 64 KiB)."), _optional(_script, None)] = None
    script_path: Annotated[str | None, Field(
        max_length=MAX_PATH_CHARS, description="Slurm batch script: absolute path on the "
        "cluster's submit host."), _optional(_abs_path, None)] = None
    command: Annotated[str | list[str] | None, Field(
        description="What to run: shell text (sh -c) or an argv list."),
        _optional(_command, None)] = None
    args: Annotated[list[str], Field(description="Arguments after command (Kubernetes "
                                     "args)."), _optional(_args, [])] = Field(
        default_factory=list)
    workdir: Annotated[str | None, Field(max_length=MAX_PATH_CHARS, description="Working "
                                         "directory (absolute)."),
                       _optional(_abs_path, None)] = None
    env: Annotated[dict[str, str], Field(
        max_length=MAX_ENV_VARS, description="Environment the job gets, and only that; names "
        "are shell names, never CARBONSCHED_*."), _optional(_env, {})] = Field(
        default_factory=dict)
    account: Annotated[str | None, Field(pattern=SLURM_NAME_PATTERN, description="Slurm "
                                         "--account."), _optional(_SLURM_NAME, None)] = None
    partition: Annotated[str | None, Field(pattern=SLURM_NAME_PATTERN, description="Slurm "
                                           "--partition (else the site's)."),
                         _optional(_SLURM_NAME, None)] = None
    qos: Annotated[str | None, Field(pattern=SLURM_NAME_PATTERN, description="Slurm --qos."),
                   _optional(_SLURM_NAME, None)] = None
    image: Annotated[str | None, Field(pattern=IMAGE_PATTERN, description="Container image "
                                       "(Kubernetes; Slurm --container where the cluster "
                                       "runs containers)."),
                     _optional(_pattern(IMAGE_PATTERN, "container image reference",
                                        "ghcr.io/org/train:1.4"), None)] = None
    volumes: Annotated[list[dict[str, Any]], Field(
        max_length=MAX_VOLUMES, description="Kubernetes volumes with their mounts: name, "
        "mount_path, read_only and one of host_path, claim, config_map, secret, empty_dir."),
        _optional(_volumes, [])] = Field(default_factory=list)
    service_account: Annotated[str | None, Field(
        pattern=DNS_SUBDOMAIN_PATTERN, description="Kubernetes serviceAccountName."),
        _optional(_pattern(DNS_SUBDOMAIN_PATTERN, "service account name (DNS-1123 "
                           "subdomain)", "trainer"), None)] = None
    pod_template: Annotated[dict[str, Any] | None, Field(
        description="A full Kubernetes PodTemplateSpec, instead of image/command/volumes."),
        _optional(_pod_template, None)] = None
    gpu_milli: Annotated[int | None, Field(
        ge=1, le=MAX_GPU_MILLI, description="Part of one GPU, in thousandths (1..1000); "
        "planned as a share of one GPU where the site time-slices its GPUs (catalog sharing = "
        "\"milli\"), else as one whole GPU. [1/1000 GPU]"), _optional(_gpu_milli, None)] = None
    mig_profile: Annotated[str | None, Field(
        pattern=MIG_PROFILE_PATTERN, description="A MIG profile of the job's GPU type, e.g. "
        "1g.10gb; planned as a MIG slice where the site partitions its GPUs (catalog sharing = "
        "\"mig\"), else as one whole GPU."),
        _optional(_pattern(MIG_PROFILE_PATTERN, "MIG profile", "1g.10gb"), None)] = None

    @model_validator(mode="wrap")
    @classmethod
    def _whole_job(cls, data: Any, handler: ModelWrapValidatorHandler[JobSpec],
                   info: ValidationInfo) -> JobSpec:
        """Field errors in the schema's words (unknown fields first), then the cross-field rules."""
        templates = (info.context or {}).get("templates") if info is not None else None
        if templates is not None and isinstance(data, Mapping) and not absent(
                data.get("template")):
            data = with_template(cls, data, templates)
        try:
            spec = handler(data)
        except ValidationError as exc:
            raise reworded(cls, exc) from None
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
        if spec.topology is not None and spec.max_domains not in (None, 1):
            raise _at(cls, "max_domains", problem(
                f"max_domains {spec.max_domains} with topology 'same-domain' (one domain)",
                "give one of them: topology 'same-domain', or max_domains = N"),
                spec.max_domains)
        if (spec.topology is not None or spec.max_domains is not None) and spec.max_pieces > 1:
            raise _at(cls, "max_pieces", problem(
                f"max_pieces {spec.max_pieces} > 1 on a gang with a topology constraint",
                "a topology-bound gang runs in one piece: set max_pieces to 1, or drop "
                "topology / max_domains"), spec.max_pieces)
        _payload_rules(cls, spec)
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
                   max_pieces=self.max_pieces, payload=self.payload(),
                   max_domains=1 if self.topology == "same-domain" else self.max_domains)

    def payload(self) -> JobPayload | None:
        """The payload fields as a :class:`~carbonsched.domain.JobPayload` (None if none set)."""
        return JobPayload.from_dict(self.model_dump(mode="json", include=set(PAYLOAD_FIELDS),
                                                    exclude_defaults=True))

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
            "max_pieces": job.max_pieces,
            **({"topology": "same-domain"} if job.max_domains == 1 else
               {"max_domains": job.max_domains} if job.max_domains is not None else {}),
            **(job.payload.to_dict() if job.payload is not None else {})})


JOB_FIELDS = tuple(JobSpec.model_fields)
"""The fields of a job spec, in the schema's order."""


def _at(cls: type[BaseModel], field: str, error: PydanticCustomError, value: Any
        ) -> ValidationError:
    """``error`` at ``field`` as a ValidationError (so the API's ``loc`` names the field)."""
    return ValidationError.from_exception_data(
        cls.__name__, [InitErrorDetails(type=error, loc=(field,), input=value)])


def _payload_rules(cls: type[BaseModel], spec: JobSpec) -> None:
    """The payload's cross-field rules (one run field, pod template alone, one GPU slice)."""
    given = [f for f in RUN_FIELDS if getattr(spec, f) is not None]
    if len(given) > 1:
        raise _at(cls, given[1], problem(
            f"{' and '.join(given)} are both given", f"give one of {', '.join(RUN_FIELDS)} "
            "(what the job runs)"), getattr(spec, given[1]))
    if spec.pod_template is not None:
        clash = [f for f in ("image", "command", "args", "volumes", "service_account",
                             "workdir", "script", "script_path")
                 if getattr(spec, f) not in (None, [], {})]
        if clash:
            raise _at(cls, clash[0], problem(
                f"{clash[0]} is given with pod_template",
                "put it inside the pod template, or drop pod_template"), getattr(spec, clash[0]))
    if spec.args and spec.command is None and spec.pod_template is None and spec.image is None:
        raise _at(cls, "args", problem("args without command or image",
                                       "give command (or image) with args"), spec.args)
    if spec.gpu_milli is not None and spec.mig_profile is not None:
        raise _at(cls, "mig_profile", problem(
            "gpu_milli and mig_profile are both given",
            "give one: gpu_milli for a shared GPU, mig_profile for a MIG slice"),
                  spec.mig_profile)
    for f in ("gpu_milli", "mig_profile"):
        if getattr(spec, f) is not None and spec.gpus != 1:
            raise _at(cls, "gpus", problem(
                f"a job with {f} asks for one slice of one GPU, got gpus {spec.gpus}",
                f"set gpus to 1 (or drop {f} for whole GPUs)"), spec.gpus)
    if spec.mig_profile is not None:
        offered = mig_profiles(spec.gpu_type)
        if spec.mig_profile not in offered:
            where = (f"{spec.gpu_type} offers {', '.join(offered)}" if offered else
                     f"{spec.gpu_type} has no MIG profiles (MIG GPUs: "
                     f"{', '.join(MIG_PROFILES)})")
            raise _at(cls, "mig_profile", problem(
                f"MIG profile {spec.mig_profile!r} is not one of the GPU type's; {where} "
                "(NVIDIA MIG User Guide, Supported MIG Profiles)",
                "give one of its profiles, or gpu_milli"), spec.mig_profile)


def with_template(cls: type[BaseModel], data: Mapping[str, Any],
                  templates: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """``data`` laid over the template it names: the job's own fields win.

    A job that names what it runs (``script``, ``script_path`` or ``command``) drops all three
    of the template's; one that gives ``gpu_milli`` or ``mig_profile`` drops the template's
    other; ``env`` mappings are merged (the job's values win).

    Parameters
    ----------
    cls
        The schema (for the error's location).
    data
        The job as given (a mapping with ``template``).
    templates
        Template name -> its fields (the catalog's ``[templates.NAME]`` tables).

    Raises
    ------
    pydantic.ValidationError
        At ``template``: no template of that name (the message lists those that exist).
    """
    name = str(data.get("template")).strip()
    if name not in templates:
        known = ", ".join(sorted(templates)) or "none"
        raise _at(cls, "template", problem(
            f"unknown template {name!r}; the catalog defines: {known}",
            "use one of them, or define [templates." + name + "] in the catalog"), name)
    base = {k: v for k, v in templates[name].items() if not absent(v)}
    given = {k: v for k, v in data.items() if not absent(v) and v != [] and v != {}}
    if any(k in given for k in RUN_FIELDS):
        base = {k: v for k, v in base.items() if k not in RUN_FIELDS}
    if "gpu_milli" in given or "mig_profile" in given:
        base = {k: v for k, v in base.items() if k not in ("gpu_milli", "mig_profile")}
    merged = {**base, **given}
    if isinstance(base.get("env"), Mapping) and isinstance(given.get("env"), Mapping):
        merged["env"] = {**base["env"], **given["env"]}
    return merged


def reworded(cls: type[BaseModel], exc: ValidationError, what: str = "every job"
             ) -> ValidationError:
    """The errors of pydantic itself (absent or unknown fields) in the schema's words.

    ``what`` is what a missing field is asked for ("give slo_ms for every job").
    """
    fields = ", ".join(cls.model_fields)
    out: list[InitErrorDetails] = []
    for e in exc.errors():
        loc = tuple(e["loc"])
        name = str(loc[0]) if loc else ""
        if e["type"] == "missing" and len(loc) == 1:
            err = missing(name, what)
        elif e["type"] == "extra_forbidden" and len(loc) == 1:
            err = problem("unknown field", f"remove it or use one of {fields}",
                          "extra_forbidden")
        else:
            err = PydanticCustomError(e["type"], e["msg"])
        out.append(InitErrorDetails(type=err, loc=loc, input=e.get("input")))
    out.sort(key=lambda d: d["type"].type != "extra_forbidden")
    return ValidationError.from_exception_data(cls.__name__, out)


def invalid_spec_detail(exc: Exception) -> str:
    """The ``InvalidSpec`` detail of a stored job whose spec the job schema now refuses.

    One sentence for every read-back of a stored spec (the API's jobs still to plan, a job
    waiting in the rolling state), so a job ended for it reads the same whichever run ends it.

    Parameters
    ----------
    exc
        What reading the stored spec back raised: a :class:`pydantic.ValidationError` (only
        its first error is named, as ``field '<loc>': <msg>``, its location's parts joined
        with ``.``; ``'-'`` for an error of the whole spec), or any other error (an
        :class:`~carbonsched.errors.InputError` of :meth:`JobSpec.to_job`), named by its text.

    Returns
    -------
    str
        One line: ``"its stored spec no longer passes the job schema (<what>); submit it
        again as the schema asks, under a new id (docs/workload.md)"`` (the ended job keeps
        its id: the API answers 409 for it).
    """
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        what = f"field {'.'.join(map(str, first['loc'])) or '-'!r}: {first['msg']}"
    else:
        what = str(exc)
    return (f"its stored spec no longer passes the job schema ({what}); submit it again as "
            "the schema asks, under a new id (docs/workload.md)")


def apply_templates(jobs: list[Job], templates: Mapping[str, Mapping[str, Any]],
                    where: str = "workload") -> list[Job]:
    """``jobs`` with each job's ``template`` applied (:func:`with_template`; its own fields win).

    The merged spec is validated again by :class:`JobSpec`, so a template's field breaks the
    same rule with the same message as a job's own.

    Parameters
    ----------
    jobs
        Jobs as read (a job without a template is returned as is).
    templates
        Template name -> its fields (:attr:`carbonsched.catalog.Catalog.templates`).
    where
        What the jobs come from, for the message (a file name).

    Raises
    ------
    WorkloadError
        ``"<where>, job <id>, field '<field>': <problem>; <fix>"``: an unknown template (naming
        those that exist), or a merged field the schema refuses.
    """
    from carbonsched.errors import WorkloadError

    out = []
    for job in jobs:
        if job.payload is None or job.payload.template is None:
            out.append(job)
            continue
        try:
            spec = JobSpec.model_validate(JobSpec.from_job(job).model_dump(mode="json"),
                                          context={"templates": templates})
        except ValidationError as exc:
            e = exc.errors()[0]
            field = ".".join(str(x) for x in e["loc"]) or "job"
            raise WorkloadError(f"{where}, job {job.id}, field {field!r}: {e['msg']}") from None
        out.append(spec.to_job())
    return out
