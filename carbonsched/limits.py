"""Limits on what carbonsched accepts as input, each with the reason for its value.

One place for the bounds that more than one stage checks: the job schema
(:mod:`carbonsched.workload.schema`, which every job entry point uses), the domain objects
(:class:`carbonsched.domain.Job`), the catalog loader, and the store's column widths.
"""

from __future__ import annotations

MAX_JOB_GPUS = 100_000
"""Largest gang accepted (far above any real job; keeps GPU sums exact in int64). [GPUs]"""
MAX_DURATION_HOURS = 24 * 366
"""Longest job accepted (a year; the plan's horizon is at most a week). [h]"""
MAX_SLO_MS = 100_000.0
"""Largest inference latency SLO accepted, by a workload file and the API alike (100 s). [ms]"""
MAX_HORIZON_HOURS = 168
"""Longest planning horizon accepted (one week; the daily plan is day-ahead). [h]"""
MAX_DURATION_MINUTES = 60 * MAX_DURATION_HOURS
"""The same limit in minutes. [min]"""
MIN_DURATION_HOURS = 1 / 60
"""Shortest job, and the step of ``duration_hours``: plans count whole minutes
(``Job.duration_minutes`` >= 1), so an hour value is a whole number of minutes. [h]"""
MAX_POWER_PER_GPU_KW = 10.0
"""Largest IT power per GPU accepted (board plus server share; an H100 SXM is about 1.2). [kW]"""
MAX_PIECES = 24
"""Most pieces a preemptible job may be split into (``Job.max_pieces``). [-]"""
MAX_DOMAINS = 1024
"""Most network domains a gang may be allowed to span (``Job.max_domains``). [-]"""
MAX_CHECKPOINT_OVERHEAD_MINUTES = 24 * 60
"""Longest checkpoint/resume overhead accepted (a day). [min]"""

MAX_ID_CHARS = 200
"""Longest job id: the store's ``job_id`` columns (``String(200)``). [characters]"""
MAX_NAME_CHARS = 100
"""Longest site or area id (and tenant): the store's ``site`` and ``area`` columns
(``String(100)``). [characters]"""
MAX_GPU_TYPE_CHARS = 40
"""Longest GPU type name: the store's ``gpu_type`` columns (``String(40)``). [characters]"""
MAX_ALLOWED_SITES = 200
"""Most site ids in a job's ``allowed_sites`` (the largest shipped catalog has far fewer). [-]"""

EARLIEST_YEAR = 1970
"""First calendar year of a timestamp carbonsched accepts (the Unix epoch). [year]"""
LATEST_YEAR = 2200
"""Last calendar year accepted: inside pandas' nanosecond range (1677-2262), with room for a
job's duration and a plan's horizon after it. [year]"""
TIME_PATTERN = (r"^(19[7-9][0-9]|2[01][0-9][0-9]|2200)-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
                r"T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?"
                r"(Z|[+-](0[0-9]|1[0-3]):[0-5][0-9])$")
"""An RFC 3339 date-time with an offset in the years EARLIEST_YEAR..LATEST_YEAR, as the OpenAPI
document states it (``pattern`` beside ``format: date-time``) for every time the API reads."""

# --- the identifier grammar -------------------------------------------------------------------

MAX_IDENTIFIER_CHARS = 100
"""Longest job id, tenant or site id: the narrowest store column that holds one (``site`` and
``area`` are ``String(100)``), so one grammar fits every table. [characters]"""
PATH_SEPARATORS = ("/", "\\")
"""Characters an identifier may not hold: it names files (reports, logs), URL path segments
(``GET /v1/jobs/{job_id}``) and backend objects, where either splits it."""
IDENTIFIER_RULE = (f"give 1..{MAX_IDENTIFIER_CHARS} printable characters without '/', '\\', "
                   "control or invisible characters, not '.' or '..'")
"""How to fix an identifier the grammar refuses (the second half of every such message)."""
IDENTIFIER_PATTERN = (r"^[^\x00-\x1f\x7f/\\]*"
                      r"[^\x00-\x20\x7f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000/\\]"
                      r"[^\x00-\x1f\x7f/\\]*$")
"""The grammar as a JSON-schema ``pattern`` for the OpenAPI document: no control character or
path separator, and not blank (blanks at either end of a value in a body are trimmed before the
check, as :data:`TEXT_PATTERN`'s). A superset: Unicode's other non-printable characters, and
``.`` and ``..``, are refused by :func:`identifier_problem` (the 422 descriptions name them)."""


def identifier_problem(value: object, what: str) -> str | None:
    """Why ``value`` is not an identifier, or ``None`` when it is one.

    The one grammar of job ids, tenants and site ids, checked by every entry point (workload
    files, the API, the store and the dispatch adapters) with this message: 1 to
    :data:`MAX_IDENTIFIER_CHARS` characters, each printable (:meth:`str.isprintable`: no
    control, format or separator character other than the ASCII space), none a path separator
    (:data:`PATH_SEPARATORS`), not ``.`` or ``..``, no blank at either end.

    Parameters
    ----------
    value
        The value given.
    what
        What it is, for the message (``job id``, ``tenant``, ``site id``).

    Returns
    -------
    str or None
        ``"<what> <value> <problem>; <how to fix>"``, the same at every entry point.
    """
    if not isinstance(value, str):
        return f"{what} {value!r} is not a text; {IDENTIFIER_RULE}"
    shown = repr(value if len(value) <= 60 else value[:60] + "...")
    if not value:
        why = "is empty"
    elif len(value) > MAX_IDENTIFIER_CHARS:
        why = f"is {len(value)} characters long"
    elif any(c in value for c in PATH_SEPARATORS):
        why = "holds a path separator"
    elif not value.isprintable():
        bad = next(c for c in value if not c.isprintable())
        why = f"holds the non-printable character U+{ord(bad):04X}"
    elif value in (".", ".."):
        why = "is a path component"
    elif value != value.strip():
        why = "starts or ends with a blank"
    else:
        return None
    return f"{what} {shown} {why}; {IDENTIFIER_RULE}"


def check_identifier(value: object, what: str) -> str:
    """``value`` if it is an identifier (:func:`identifier_problem`), else raise.

    Raises
    ------
    carbonsched.errors.InputError
        With the message of :func:`identifier_problem`.
    """
    from carbonsched.errors import InputError

    msg = identifier_problem(value, what)
    if msg is not None:
        raise InputError(msg)
    return value  # type: ignore[return-value]
TEXT_PATTERN = (r"^[^\x00-\x1f]*"
                r"[^\x00-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
                r"[^\x00-\x1f]*$")
"""A text field of a job as the OpenAPI document states it: no control character, and not blank
(at least one character that is not white space as :meth:`str.strip` sees it; a blank value is
an absent one, :func:`carbonsched.workload.schema.absent`)."""

# --- job payloads (docs/workload.md, "Payload fields") ------------------------------------------
MAX_SCRIPT_BYTES = 64 * 1024
"""Longest inline batch ``script`` (UTF-8 bytes). A project choice: the script travels in the
store, the plan document and every outbox row of the job; Slurm itself accepts up to 4 MB
(``SchedulerParameters=max_script_size``, slurm.conf(5)). Longer scripts: use ``script_path``.
[bytes]"""
MAX_COMMAND_CHARS = 8192
"""Longest ``command`` (shell text, or all argv items together) and ``args``. [characters]"""
MAX_ENV_VARS = 128
"""Most variables in a job's ``env``. [-]"""
MAX_ENV_VALUE_CHARS = 4096
"""Longest value of one ``env`` variable. [characters]"""
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"
"""Grammar of an ``env`` name: a portable shell variable name (letters, digits, underscore, not
starting with a digit; IEEE Std 1003.1-2017, Base Definitions 3.235 "Name"), at most 128
characters. Kubernetes accepts a superset (C identifiers and more)."""
RESERVED_ENV_PREFIX = "CARBONSCHED_"
"""Prefix of the variables carbonsched sets for every piece (``DispatchRequest.job_env``); a
job's ``env`` cannot set them."""
MAX_PATH_CHARS = 4096
"""Longest ``script_path``, ``workdir`` or mount path (Linux ``PATH_MAX``). [characters]"""
MAX_POD_TEMPLATE_BYTES = 256 * 1024
"""Largest ``pod_template`` as JSON. A project choice well under the Kubernetes API server's
request limit (3 MiB) and etcd's value limit (1.5 MiB). [bytes]"""
MAX_VOLUMES = 32
"""Most entries in a job's ``volumes``. [-]"""
MAX_GPU_MILLI = 1000
"""``gpu_milli`` is thousandths of one GPU, 1..1000 (as in the Alibaba GPU-sharing trace,
``gpu_milli`` column, Weng et al., USENIX ATC 2023). [1/1000 GPU]"""
DEFAULT_SHARES_PER_GPU = 10
"""Shares one GPU of a ``sharing = "milli"`` pool is cut into when the catalog does not say
(``shares_per_gpu``): Slurm's shards per GPU (gres.conf ``Name=shard`` ``Count``, per node,
over the node's GPUs), or the NVIDIA device plugin's time-slicing ``replicas``. A project
default (the value the adapters assumed before the catalog carried it), not a vendor one.
[-]"""
SHARES_PER_GPU_CHOICES = tuple(n for n in range(1, MAX_GPU_MILLI + 1) if MAX_GPU_MILLI % n == 0)
"""Accepted ``shares_per_gpu``: the divisors of 1000 (1, 2, 4, 5, 8, 10, 20, 25, ...), so a
whole number of shares is a whole number of milli and the planner's packing (sizes summing to
at most 1000) is exactly the backend's (shares summing to at most the count). [-]"""
