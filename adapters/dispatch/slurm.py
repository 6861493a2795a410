"""Slurm adapter: ``sbatch --parsable``, ``squeue --json``, ``sacct`` and ``scancel``.

Each Slurm site names its cluster (``[sites.backend] cluster``). Two ways to reach it:

- ``SLURM_CONF`` per cluster (``conf``): the tools read that cluster's own ``slurm.conf``. This is
  how the tests reach three independent clusters with no slurmdbd.
- ``--clusters=<name>`` (``use_clusters_flag``): one ``slurm.conf`` and a slurmdbd that knows every
  cluster (``sacctmgr add cluster``), the usual multi-cluster deployment. Without slurmdbd Slurm
  answers ``'ontario' can't be reached now, or it is an invalid entry for --cluster``.

Time: ``sbatch`` parses ``--begin`` and ``--deadline`` *itself*, as wall time in its own process's
zone (``parse_time()`` in Slurm's ``src/common/parse_time.c``, with ``tm_isdst = -1``), and sends
the controller an epoch. So a wall time in the fall-back hour of a DST zone is ambiguous and one in
the spring-forward gap does not exist. :func:`begin_wall_time` converts the planned UTC start to the
host zone's wall time and runs sbatch with ``TZ`` set to that zone's *fixed* offset at that
instant (a POSIX ``<-0500>+05:00`` rule), so the wall time is the host's and Slurm reads it exactly,
across DST. ``--deadline`` is written in the same fixed offset.

The idempotency key and the plan id travel in ``--comment`` (``carbonsched key=<k> plan=<p>``,
URL-quoted) and the key in the job name (:func:`slurm_job_name`); job ids are unique per cluster
only, so a job is known as ``<cluster>:<id>``.

Environment: every tool runs with a minimal environment (:data:`TOOL_ENV_PASSTHROUGH`, plus
``SLURM_CONF`` and ``TZ``), never the dispatcher's, and jobs are submitted with
``--export=NONE``: the job's ``CARBONSCHED_*`` variables are ``export`` lines at the top of its
batch script. (With ``--export=NONE`` Slurm loads the job user's login environment on the node,
sbatch(1): keep secrets out of that user's login files.)

Ambiguous submissions: an ``sbatch`` that timed out, was killed, printed no job id or failed
without the controller's "Batch job submission failed" refusal may still have been accepted. The
job is then looked up by its key (``squeue``, then ``sacct`` by job name in a window from the
submit attempt) before anything else; found, it is returned (and recorded), not submitted again.
Two jobs carrying one key (``sbatch`` retries a submission whose answer was lost) are reported
in :attr:`BackendJob.duplicates`.

Accounting: ``sacct`` is always bounded by the submit time (``-S``/``-E``, the cluster's submit
time when squeue reported it, else the submit attempt minus :data:`CLOCK_SLACK_S`) and each line
is matched by job id, job name, comment (where the accounting keeps it) and submit time: a
recycled job id never brings an older job's state or times. The job-completion file
(``sacct -c``) ignores ``-S``/``-E``/``--name``; the same matching filters its lines.

``squeue --json`` differs across Slurm generations (parsed by :func:`parse_squeue_json`):
22.05 (OpenAPI v0.0.38) gives ``"job_state": "PENDING"`` and plain integers; 23.11 and later
(v0.0.40+) give ``"job_state": ["PENDING"]`` (a base state plus flags) and numbers as
``{"set": true, "infinite": false, "number": 1804987800}``. Sources: Slurm REST API reference
(https://slurm.schedmd.com/rest_api.html), ``v0.0.38_job_response_properties`` and
``v0.0.40_job_info``.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import threading
from collections.abc import Collection, Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from carbonsched.adapters.dispatch.base import (
    CHECKPOINT_SIGNAL_LEAD_S,
    BackendJob,
    DispatchRequest,
    SubmittedUnit,
    WorkAction,
    WorkOutcome,
    dispatch_key,
    short_hash,
    split_key,
)
from carbonsched.domain import TERMINAL_STATES, JobState, ReasonCode
from carbonsched.errors import (
    BackendError,
    BackendRejectedError,
    BackendUnavailableError,
    DataFormatError,
)

COMMENT_PREFIX = "carbonsched"
JOB_NAME_MAX = 200
"""Longest job name written (a name that would be longer ends in a hash of the key). [chars]"""
TOOL_ENV_PASSTHROUGH = ("PATH",)
"""Variables of the dispatcher's environment the Slurm tools get (to find ``sbatch``); nothing
else of it reaches them, so nothing else can reach a job."""
CLOCK_SLACK_S = 600
"""How far the cluster's clock may be from the dispatcher database's when a ``sacct`` window
starts from the submit attempt rather than the cluster's own submit time. [s] A project choice:
NTP keeps hosts within a second; ten minutes covers a host whose time daemon stopped."""
SACCT_SEP = "\x1f"
"""Field separator asked of ``sacct`` (ASCII unit separator): a job name may hold ``|``."""
REFUSED = "Batch job submission failed"
"""sbatch's prefix when the controller answered with a refusal (definite: nothing was made),
unless the reason is one of :data:`UNREACHABLE`."""

#: stderr fragments that mean "the controller cannot be reached" (retry), not "refused"
UNREACHABLE = (
    "Unable to contact slurm controller",
    "Socket timed out",
    "Connection refused",
    "Zero Bytes were transmitted",
    "Slurm controller not responding",
    "Communication connection failure",
    "Munge",
    "can't be reached now",
    "Unexpected message received",
    "Message receive failure",
    "Insane message length",
    "send/recv",
    "Transport endpoint",
)

#: stderr fragments that mean "this host has no configuration for the cluster": no
#: ``SLURM_CONF``, no ``/etc/slurm/slurm.conf`` and no configless DNS SRV record (slurm.conf(5),
#: "Configless"), or a ``SLURM_CONF`` that cannot be read. Nothing reached a controller: retried
#: like an unreachable one, with the fix in the message. (A ``SLURM_CONF`` that names a missing
#: file makes the tools retry for 60 s, longer than the tool timeout: that ends as a timeout.)
NO_CONFIG = (
    "Could not establish a configuration source",
    "_establish_config_source",
    "something wrong with opening/reading",
)

#: Slurm base job states -> lifecycle (squeue(1) "JOB STATE CODES")
STATE_MAP: dict[str, tuple[JobState, ReasonCode]] = {
    "PENDING": (JobState.DISPATCHED, ReasonCode.SUBMITTED),
    "REQUEUED": (JobState.DISPATCHED, ReasonCode.SUBMITTED),
    "REQUEUE_HOLD": (JobState.DISPATCHED, ReasonCode.SUBMITTED),
    "REQUEUE_FED": (JobState.DISPATCHED, ReasonCode.SUBMITTED),
    "RESV_DEL_HOLD": (JobState.DISPATCHED, ReasonCode.SUBMITTED),
    "CONFIGURING": (JobState.RUNNING, ReasonCode.STARTED),
    "RUNNING": (JobState.RUNNING, ReasonCode.STARTED),
    "COMPLETING": (JobState.RUNNING, ReasonCode.STARTED),
    "RESIZING": (JobState.RUNNING, ReasonCode.STARTED),
    "SIGNALING": (JobState.RUNNING, ReasonCode.STARTED),
    "STAGE_OUT": (JobState.RUNNING, ReasonCode.STARTED),
    "SUSPENDED": (JobState.RUNNING, ReasonCode.STARTED),
    "STOPPED": (JobState.RUNNING, ReasonCode.STARTED),
    "COMPLETED": (JobState.SUCCEEDED, ReasonCode.COMPLETED),
    "CANCELLED": (JobState.CANCELLED, ReasonCode.CANCELLED),
    "DEADLINE": (JobState.FAILED, ReasonCode.DEADLINE_PASSED),
    "FAILED": (JobState.FAILED, ReasonCode.BACKEND_FAILED),
    "TIMEOUT": (JobState.FAILED, ReasonCode.BACKEND_FAILED),
    "NODE_FAIL": (JobState.FAILED, ReasonCode.BACKEND_FAILED),
    "OUT_OF_MEMORY": (JobState.FAILED, ReasonCode.BACKEND_FAILED),
    "BOOT_FAIL": (JobState.FAILED, ReasonCode.BACKEND_FAILED),
    "PREEMPTED": (JobState.FAILED, ReasonCode.PREEMPTED),
    "REVOKED": (JobState.CANCELLED, ReasonCode.CANCELLED),
}
_TERMINAL_WORDS = {w for w, (st, _) in STATE_MAP.items() if st in TERMINAL_STATES}

#: what the cluster did, for the states that are its doing and not the job's (squeue(1) "JOB
#: STATE CODES"): the record's detail says it, never only the bare word
CLUSTER_DID = {
    "PREEMPTED": "preempted by the cluster",
    "NODE_FAIL": "a node of the job failed",
    "BOOT_FAIL": "a node of the job failed to boot",
    "CANCELLED": "cancelled on the cluster (scancel by a user or an administrator), "
                 "not by carbonsched",
    "REVOKED": "revoked by the federation",
    "DEADLINE": "Slurm's --deadline passed before it could run",
}


def cluster_detail(state: str, reason: str = "", restarts: int = 0) -> str:
    """What a Slurm job's state says happened, for the dispatch record's detail.

    Parameters
    ----------
    state
        The base state word (``PENDING``, ``NODE_FAIL``, ...).
    reason
        Slurm's ``state_reason`` (``BeginTime``, ``NodeDown``, ...); ``None``/empty: none.
    restarts
        How often the cluster requeued the job (squeue's ``restart_cnt``; ``scontrol requeue``,
        a node failure or a preemption with ``PreemptMode=REQUEUE``). [-]

    Returns
    -------
    str
        ``""`` for a job the cluster did nothing to (the reason alone, as before), else e.g.
        ``"requeued by the cluster 1 time(s) (scontrol requeue, a node failure or a
        preemption); pending again (Slurm reason: BeginTime)"``.
    """
    why = f"Slurm reason: {reason}" if reason and reason != "None" else ""
    said = CLUSTER_DID.get(state)
    if said:
        return f"{said} (Slurm {state}{'; ' + why if why else ''})"
    if restarts:
        now = "pending again" if state in ("PENDING", "REQUEUED", "REQUEUE_HOLD") else \
            f"{state.lower()} again"
        return (f"requeued by the cluster {restarts} time(s) (scontrol requeue, a node failure "
                f"or a preemption); {now}{' (' + why + ')' if why else ''}")
    return why.removeprefix("Slurm reason: ")


def host_timezone() -> tzinfo:
    """See :func:`host_timezone_source` (the zone only)."""
    return host_timezone_source()[0]


def host_timezone_source() -> tuple[tzinfo, str]:
    """The zone ``sbatch`` reads wall times in: ``$TZ``, ``/etc/timezone``, ``/etc/localtime``.

    UTC when none of them names an IANA zone.
    """
    candidates = [("TZ", os.environ.get("TZ", "").lstrip(":"))]
    try:
        candidates.append(("/etc/timezone", Path("/etc/timezone").read_text().strip()))
    except OSError:
        pass
    try:
        link = os.readlink("/etc/localtime")
        candidates.append(("/etc/localtime", link.split("zoneinfo/", 1)[-1]))
    except OSError:
        pass
    for source, name in candidates:
        if name:
            try:
                return ZoneInfo(name), source
            except (ZoneInfoNotFoundError, ValueError):
                continue
    return UTC, "fallback"


def begin_wall_time(ts: datetime, zone: tzinfo,
                    also: tuple[datetime, ...] = ()) -> tuple[str, list[str]]:
    """Slurm wall time(s) for ``ts`` in ``zone`` and the ``TZ`` that makes sbatch read them exactly.

    Parameters
    ----------
    ts
        The instant (tz-aware), e.g. the planned start.
    zone
        The host's zone (see :func:`host_timezone`).
    also
        More instants (e.g. the deadline) written in the same fixed offset.

    Returns
    -------
    (tz, [wall times])
        ``tz`` is a POSIX fixed-offset rule such as ``<-0500>+05:00`` (POSIX offsets count west
        of Greenwich); wall times are ``YYYY-MM-DDTHH:MM:SS``.
    """
    local = ts.astimezone(zone)
    offset = local.utcoffset() or timedelta(0)
    secs = int(offset.total_seconds())
    hh, mm = divmod(abs(secs) // 60, 60)
    name = f"<{'+' if secs >= 0 else '-'}{hh:02d}{mm:02d}>"
    rule = f"{name}{'-' if secs >= 0 else '+'}{hh:02d}:{mm:02d}"
    fixed = local.tzinfo if zone is UTC else _fixed(offset)
    walls = [t.astimezone(fixed).strftime("%Y-%m-%dT%H:%M:%S") for t in (ts, *also)]
    return rule, walls


def _fixed(offset: timedelta) -> tzinfo:
    from datetime import timezone

    return timezone(offset)


def make_comment(key: str, plan_id: str, placeholder: bool = False) -> str:
    """The ``--comment`` carrying the idempotency key and the plan id.

    A placeholder job (``dispatch --placeholder``) also carries ``placeholder=1``, so
    ``squeue``/``sacct`` show it for what it is.
    """
    tail = " placeholder=1" if placeholder else ""
    return f"{COMMENT_PREFIX} key={quote(key, safe='')} plan={quote(plan_id, safe='')}{tail}"


def slurm_job_name(job_id: str, piece: int) -> str:
    """The job name of a dispatch unit: ``carbonsched-<job_id>-<piece>``.

    At most :data:`JOB_NAME_MAX` characters; a longer one is cut and ends in ``-<hash of the
    key>`` so that the name still names one key.
    """
    name = f"carbonsched-{job_id}-{piece}"
    if len(name) <= JOB_NAME_MAX:
        return name
    tail = f"-{short_hash(dispatch_key(job_id, piece), 12)}-{piece}"
    return name[:JOB_NAME_MAX - len(tail)] + tail


def parse_comment(comment: str | None) -> tuple[str, str] | None:
    """(key, plan id) from one of our comments; None for a foreign job."""
    if not comment or not comment.startswith(COMMENT_PREFIX + " "):
        return None
    fields = dict(part.split("=", 1) for part in comment.split()[1:] if "=" in part)
    if "key" not in fields:
        return None
    return unquote(fields["key"]), unquote(fields.get("plan", ""))


def _number(value: Any) -> int | None:
    """A Slurm number: 22.05 plain int (0 = unset), 23.11+ ``{set, infinite, number}``."""
    if isinstance(value, dict):
        if not value.get("set", False) or value.get("infinite", False):
            return None
        value = value.get("number")
    if value is None or isinstance(value, bool):
        return None
    return int(value)


def _epoch(value: Any) -> datetime | None:
    n = _number(value)
    return None if not n else datetime.fromtimestamp(n, UTC)


def _states(value: Any) -> list[str]:
    if isinstance(value, list):
        return [str(v) for v in value]
    return [str(value)] if value else []


def parse_squeue_json(doc: Mapping[str, Any], source: str = "squeue --json") -> list[dict]:
    """Normalise the jobs of a ``squeue --json`` document (22.05 or 23.11+ shape).

    Returns
    -------
    list of dict
        One per job: ``job_id`` (int), ``cluster``, ``states`` (base state first, then flags),
        ``comment``, ``begin``, ``start``, ``end``, ``submit`` (tz-aware UTC or None),
        ``state_reason``, ``gres`` (``gpu:A100:8`` or ""), ``time_limit_min``, ``name``.

    Raises
    ------
    DataFormatError
        The document has no ``jobs`` list or a job lacks ``job_id``/``job_state``.
    """
    jobs = doc.get("jobs")
    if not isinstance(jobs, list):
        raise DataFormatError(source, "no 'jobs' list: not a squeue --json document")
    out = []
    for i, j in enumerate(jobs):
        if "job_id" not in j or "job_state" not in j:
            raise DataFormatError(source, f"job #{i} lacks job_id or job_state")
        gres = j.get("tres_per_node") or ""
        out.append({
            "job_id": int(_number(j["job_id"]) or 0),
            "cluster": j.get("cluster", ""),
            "states": _states(j["job_state"]),
            "comment": j.get("comment") or "",
            "begin": _epoch(j.get("eligible_time")),
            "start": _epoch(j.get("start_time")),
            "end": _epoch(j.get("end_time")),
            "submit": _epoch(j.get("submit_time")),
            "state_reason": j.get("state_reason", ""),
            "gres": gres.removeprefix("gres:").replace("gres/", ""),
            "time_limit_min": _number(j.get("time_limit")),
            "name": j.get("name", ""),
            "restarts": int(_number(j.get("restart_cnt")) or 0),
        })
    return out


def backend_job(cluster: str, job: Mapping[str, Any]) -> BackendJob | None:
    """Our :class:`BackendJob` for one normalised squeue job; None for a foreign job."""
    ours = parse_comment(job["comment"])
    if ours is None:
        return None
    states = job["states"]
    base = states[0] if states else "UNKNOWN"
    state, reason = STATE_MAP.get(base, (JobState.DISPATCHED, ReasonCode.SUBMITTED))
    restarts = int(job.get("restarts") or 0)
    if state is JobState.DISPATCHED and restarts:
        # the cluster took a job that ran back and queued it again: not "held until its start"
        reason = ReasonCode.EVICTED
    started = state is not JobState.DISPATCHED and not (
        state is JobState.CANCELLED and (job["start"] is None or job["start"] == job["end"]))
    return BackendJob(
        key=ours[0], plan_id=ours[1], backend_id=f"{cluster}:{job['job_id']}", state=state,
        reason=reason, raw_state=",".join(states),
        actual_start=job["start"] if started else None,
        actual_end=job["end"] if state in TERMINAL_STATES and started else None,
        begin=job["begin"],
        detail=cluster_detail(base, job.get("state_reason", "") or "", restarts),
        submitted=job.get("submit"))


class SlurmAdapter:
    """Dispatch to one Slurm cluster with the standard client tools.

    Parameters
    ----------
    cluster
        The cluster's name (``ClusterName``).
    partition
        Partition for ``--partition``; None leaves the cluster's default.
    conf
        The cluster's ``slurm.conf`` (exported as ``SLURM_CONF`` to every tool), or None to use
        the host's default configuration.
    use_clusters_flag
        Pass ``--clusters=<cluster>`` (needs slurmdbd; see the module docstring).
    timezone
        The zone sbatch's wall times are written in; default :func:`host_timezone`.
    accounting
        Where actual start and end come from once a job is over: ``"jobcomp"`` (``sacct -c``,
        the job-completion file; Slurm <= 23.02), ``"slurmdbd"`` (``sacct`` against the
        database) or ``"none"`` (squeue's times only, while the controller remembers the job).
    timeout_s
        Timeout of each tool call. [s]
    output
        ``--output`` of each job (default ``/dev/null``; give a pattern such as
        ``/scratch/%x-%j.out`` in a real deployment).
    account
        ``--account`` to charge (the service user's Slurm account); None leaves the default.
        A job's own ``account`` wins.
    """

    kind = "slurm"
    defers_start = True

    def __init__(self, cluster: str, *, partition: str | None = None,
                 conf: str | Path | None = None, use_clusters_flag: bool = False,
                 timezone: tzinfo | None = None, accounting: str = "jobcomp",
                 timeout_s: float = 30.0, output: str = "/dev/null",
                 account: str | None = None) -> None:
        if accounting not in ("jobcomp", "slurmdbd", "none"):
            raise ValueError(f"accounting must be jobcomp, slurmdbd or none, got {accounting!r}")
        self.cluster = cluster
        self.name = f"slurm:{cluster}"
        self.partition = partition
        self.conf = Path(conf) if conf else None
        self.use_clusters_flag = use_clusters_flag
        self.timezone, self.timezone_source = ((timezone, "configured") if timezone
                                               else host_timezone_source())
        self.accounting_source = accounting
        self.timeout_s = timeout_s
        self.output = output
        self.account = account
        self._index: dict[str, BackendJob] | None = None
        self._lock = threading.Lock()

    @property
    def submit_settle_s(self) -> float:
        """How long after an unresolved submission attempt before submitting again. [s]

        Applies to an attempt whose outcome is unknown and whose key was not found: the tool
        timeout :attr:`timeout_s` (a request still in flight reaches the controller within its
        ``MessageTimeout``, 10 s by default, slurm.conf(5), well inside it). A claim taken over
        from a dead dispatcher has always passed it: the lease is at least twice the timeout.
        """
        return self.timeout_s

    # -- plumbing -------------------------------------------------------------------------------
    def _env(self, tz: str | None = None) -> dict[str, str]:
        """The whole environment of a Slurm tool, and nothing else of the dispatcher's.

        :data:`TOOL_ENV_PASSTHROUGH`, ``SLURM_CONF`` (this cluster's, else the dispatcher's),
        ``TZ`` and ``LC_ALL=C``.
        """
        env = {k: os.environ[k] for k in TOOL_ENV_PASSTHROUGH if k in os.environ}
        conf = str(self.conf) if self.conf is not None else os.environ.get("SLURM_CONF")
        if conf:
            env["SLURM_CONF"] = conf
        env["TZ"] = tz or "UTC"
        env["LC_ALL"] = "C"
        return env

    def _cluster_args(self) -> list[str]:
        return [f"--clusters={self.cluster}"] if self.use_clusters_flag else []

    def _run(self, argv: list[str], tz: str | None = None, key: str = "") -> str:
        try:
            proc = subprocess.run(argv, env=self._env(tz), capture_output=True,
                                  text=True, timeout=self.timeout_s, check=False)
        except FileNotFoundError as exc:
            raise BackendUnavailableError(
                f"{self.name}: {argv[0]} is not installed on this host "
                "(apt-get install slurm-client)") from exc
        except subprocess.TimeoutExpired as exc:
            raise BackendUnavailableError(
                f"{self.name}: {argv[0]} timed out after {self.timeout_s:g} s") from exc
        if proc.returncode != 0:
            msg = " ".join((proc.stderr or proc.stdout).split())[:400]
            if any(s.lower() in msg.lower() for s in NO_CONFIG):
                raise BackendUnavailableError(
                    f"{self.name}: no Slurm configuration for cluster {self.cluster!r} on this "
                    f"host ({msg}); set CARBONSCHED_SLURM_CONF_DIR to a folder holding "
                    "<cluster>/slurm.conf (or SLURM_CONF to the cluster's slurm.conf); "
                    "`carbonsched dispatch --dry-run` prints what would be submitted without one")
            if any(s.lower() in msg.lower() for s in UNREACHABLE):
                raise BackendUnavailableError(f"{self.name}: controller unreachable: {msg}")
            if argv[0] == "sbatch":
                raise BackendRejectedError(self.name, key, msg)
            raise BackendError(f"{self.name}: {argv[0]} failed: {msg}")
        return proc.stdout

    # -- contract -------------------------------------------------------------------------------
    def sbatch_argv(self, req: DispatchRequest) -> tuple[str, list[str]]:
        """The TZ value and the exact sbatch command line for ``req`` (script on stdin).

        A piece of a preemptible job that pauses gets ``--signal=B:USR1@<lead>`` (Slurm signals
        the batch shell :data:`CHECKPOINT_SIGNAL_LEAD_S` seconds before the time limit so the job
        writes its checkpoint); a resumed piece whose predecessor this cluster holds gets
        ``--dependency=afterany:<id>`` so it never overlaps it. Jobs get ``--export=NONE``: the
        piece's environment (:meth:`DispatchRequest.job_env`) and the job's own ``env`` are
        ``export`` lines in the batch script (:meth:`batch_script`), and nothing of the
        dispatcher's. The payload's ``account``, ``partition`` and ``qos`` win over the site's;
        ``workdir`` is ``--chdir`` (default ``/tmp``); ``image`` is ``--container`` for an OCI
        bundle path (Slurm's containers.html) and pyxis's ``--container-image`` for an image
        reference (NVIDIA enroot/pyxis, the plugin GPU clusters run). Fractional GPUs:
        :meth:`gres`.
        """
        tz, (begin, deadline) = begin_wall_time(req.start, self.timezone, (req.deadline,))
        minutes = -(-req.duration_s // 60)
        p = req.payload
        argv = ["sbatch", "--parsable", *self._cluster_args(),
                f"--job-name={slurm_job_name(req.job_id, req.piece)}", "--export=NONE",
                f"--begin={begin}", f"--deadline={deadline}", f"--time={minutes}",
                *self.gang_args(req),
                f"--comment={make_comment(req.key, req.plan_id, req.placeholder)}",
                f"--output={self.output}", f"--chdir={(p and p.workdir) or '/tmp'}"]
        if req.pauses:
            argv.append(f"--signal=B:USR1@{CHECKPOINT_SIGNAL_LEAD_S}")
        if req.resumes:
            prev = (self._index or {}).get(dispatch_key(req.job_id, req.piece - 1))
            if prev is not None and prev.backend_id.startswith(f"{self.cluster}:"):
                argv.append(f"--dependency=afterany:{prev.backend_id.split(':', 1)[1]}")
        if p is not None and p.qos:
            argv.insert(3, f"--qos={p.qos}")
        partition = (p and p.partition) or self.partition
        if partition:
            argv.insert(3, f"--partition={partition}")
        account = (p and p.account) or self.account
        if account:
            argv.insert(3, f"--account={account}")
        if p is not None and p.image:
            argv.append(f"--container={p.image}" if p.image.startswith("/")
                        else f"--container-image={p.image}")
        return tz, argv

    def gang_args(self, req: DispatchRequest) -> list[str]:
        """The gang's shape on the sbatch line: ``--gres`` counts GPUs per node (sbatch(1)).

        One node: ``--gres=<gres> --nodes=1`` (:meth:`gres`: whole GPUs, a MIG slice or
        shards). A gang of ``N > 1`` nodes (:attr:`DispatchRequest.nodes`, from the site's
        ``gpus_per_node``): ``--gres=gpu:<type>:<G> --nodes=N --ntasks-per-node=1`` with
        ``G = gpus / N``: Slurm allocates exactly ``N`` nodes with ``G`` GPUs each, and one task
        per node is where a launcher (``srun torchrun ...``) starts a process group per node.
        Source: sbatch(1), Slurm 22.05 (``--gres`` "per node"; ``--nodes`` min[-max], a single
        value is exact). A gang with a topology constraint (:attr:`DispatchRequest.max_domains`)
        also gets ``--switches=<max_domains>`` (no wait time: the cluster's ``max_switch_wait``
        applies; the plan already put it where that many domains have room).
        """
        if req.nodes == 1:
            return [f"--gres={self.gres(req)}", "--nodes=1"]
        # a topology-bound gang: at most that many leaf switches (sbatch(1), Slurm 22.05:
        # "--switches=<count>[@max-time]: ... the maximum count of leaf switches desired for
        # the job allocation"; with topology/tree a leaf switch is one network domain)
        span = [f"--switches={req.max_domains}"] if req.max_domains else []
        return [f"--gres=gpu:{req.gpu_type}:{req.gpus_per_node}", f"--nodes={req.nodes}",
                "--ntasks-per-node=1", *span]

    def gres(self, req: DispatchRequest) -> str:
        """The ``--gres`` value: whole GPUs, a MIG slice or GPU shards.

        The slice is the plan's (:attr:`DispatchRequest.mig_profile`, ``gpu_milli``), not the
        payload's. ``gpu:<type>:<n>`` for whole GPUs; ``gpu:<profile>:1`` for a
        ``mig_profile`` (Slurm names MIG instances as GPU types, gres.conf(5), "MIG");
        ``shard:<k>`` for ``gpu_milli``, ``k`` = :attr:`DispatchRequest.gpu_shares` (Slurm's shard
        GRES, https://slurm.schedmd.com/gres.html#Sharding; the catalog pool's
        ``shares_per_gpu`` is the cluster's shard ``Count`` per GPU, and the plan booked
        exactly these shares).
        """
        if req.mig_profile:
            return f"gpu:{req.mig_profile}:1"
        if req.gpu_milli:
            return f"shard:{req.gpu_shares}"
        return f"gpu:{req.gpu_type}:{req.gpus}"

    def batch_script(self, req: DispatchRequest) -> str:
        """The batch script sent on sbatch's stdin.

        The job's own ``script`` (or the file at ``script_path``, read on this submit host as
        ``sbatch <path>`` would) with the ``export`` lines inserted after its ``#!`` line and
        its leading ``#SBATCH`` / comment block (sbatch stops reading directives at the first
        command); else ``#!/bin/sh``, the exports and the command (or, for a placeholder,
        ``sleep <planned seconds>``, labelled). The exports are the job's ``env`` then the
        piece's ``CARBONSCHED_*`` variables, and nothing else.

        Raises
        ------
        BackendRejectedError
            ``script_path`` cannot be read on this host, or does not start with ``#!``.
        """
        env = {**req.user_env(), **req.job_env()}
        exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items())
        p = req.payload
        text = p.script if p is not None else None
        if p is not None and p.script_path:
            try:
                text = Path(p.script_path).read_text()
            except (OSError, UnicodeDecodeError) as exc:
                raise BackendRejectedError(self.name, req.key, f"script_path {p.script_path}: "
                                           f"cannot read it on this submit host ({exc})") from exc
            if not text.startswith("#!"):
                raise BackendRejectedError(self.name, req.key, f"script_path {p.script_path} "
                                           "does not start with '#!'; add an interpreter line")
        if text is None:
            head = "#!/bin/sh\n"
            if req.placeholder:
                head += "# carbonsched placeholder: the job names nothing to run\n"
            return head + exports + req.shell_command() + "\n"
        lines = text.splitlines(keepends=True)
        cut = 1
        while cut < len(lines) and (not lines[cut].strip() or lines[cut].lstrip().startswith("#")):
            cut += 1
        head = "".join(lines[:cut])
        return head + ("" if head.endswith("\n") else "\n") + exports + "".join(lines[cut:])

    def render(self, req: DispatchRequest) -> str:
        """``TZ=... sbatch ... <<'EOF'`` and the batch script, exactly as :meth:`submit` runs it.

        Prefixed by ``SLURM_CONF`` when the cluster has its own.
        """
        tz, argv = self.sbatch_argv(req)
        conf = f"SLURM_CONF={shlex.quote(str(self.conf))} " if self.conf else ""
        script = self.batch_script(req)
        mark = "EOF_CARBONSCHED"
        while mark in script:
            mark += "_"
        return f"{conf}TZ={shlex.quote(tz)} {shlex.join(argv)} <<'{mark}'\n{script}{mark}"

    def submit(self, req: DispatchRequest) -> BackendJob:
        """Submit unless a job with the same key exists on the cluster (then return it).

        An ambiguous failure (timeout, killed, no job id printed, an error that is not the
        controller's refusal) is resolved by looking the key up before returning: found, the
        job is returned with :attr:`BackendJob.resolved` saying so.

        Raises
        ------
        BackendRejectedError
            The controller refused the job (nothing was made).
        BackendUnavailableError
            The controller cannot be reached, or the outcome is unknown and the job is not
            (yet) to be found: it is looked up again before any resubmission.
        """
        index = self._ensure_index()
        with self._lock:
            if req.key in index:
                return index[req.key]
        tz, argv = self.sbatch_argv(req)
        script = self.batch_script(req)
        try:
            proc = subprocess.run(argv, env=self._env(tz), capture_output=True, text=True,
                                  input=script, timeout=self.timeout_s, check=False)
        except FileNotFoundError as exc:
            raise BackendUnavailableError(
                f"{self.name}: sbatch is not installed on this host "
                "(apt-get install slurm-client)") from exc
        except subprocess.TimeoutExpired:
            return self._resolve(req, f"sbatch timed out after {self.timeout_s:g} s")
        msg = " ".join((proc.stderr or proc.stdout or "").split())[:400]
        out = (proc.stdout or "").strip()
        job_id = out.split(";")[0]
        if proc.returncode == 0 and job_id.isdigit():
            job = BackendJob(key=req.key, plan_id=req.plan_id,
                             backend_id=f"{self.cluster}:{job_id}", state=JobState.DISPATCHED,
                             reason=ReasonCode.SUBMITTED, raw_state="PENDING", begin=req.start)
            with self._lock:
                index[req.key] = job
            return job
        unreachable = any(u.lower() in msg.lower() for u in UNREACHABLE)
        refused = proc.returncode > 0 and REFUSED in msg and not unreachable
        why = (f"sbatch exited {proc.returncode}: {msg}" if proc.returncode != 0
               else f"sbatch --parsable printed {out[:80]!r}, not a job id")
        # even a refusal is looked up: only the cluster knows whether a job was made
        return self._resolve(req, why, refused=msg if refused else "")

    def _resolve(self, req: DispatchRequest, why: str, refused: str = "") -> BackendJob:
        """After a failed submission: the job if the cluster has it under the key.

        Not found, or found already ended, a refusal by the controller (``refused``) is final
        (Slurm 22.05 keeps a refused job's record as ``FAILED``/``BadConstraints``); not found,
        anything else is unknown and retried later (after another lookup).
        """
        try:
            found = self.status([req.key])
        except (BackendError, DataFormatError) as exc:
            raise BackendUnavailableError(
                f"{self.name}: submission outcome unknown ({why}); looking the key up failed "
                f"too ({exc}); it is looked up again before any resubmission") from exc
        job = found.get(req.key)
        if refused and (job is None or job.state in TERMINAL_STATES):
            # Slurm keeps a refused job's record, ended (FAILED, reason BadConstraints): that
            # is the refusal itself; only a live job means the submission went through
            raise BackendRejectedError(self.name, req.key, refused)
        if job is None:
            raise BackendUnavailableError(
                f"{self.name}: submission outcome unknown ({why}); the key is not on the "
                f"cluster; it is looked up again before any resubmission (after "
                f"{self.submit_settle_s:g} s)")
        return replace(job, resolved=f"{why}; found on the cluster by key as {job.backend_id}, "
                                     "recorded, not submitted again")

    def _ensure_index(self) -> dict[str, BackendJob]:
        if self._index is None:
            self.status()
        assert self._index is not None
        return self._index

    def squeue(self) -> list[dict]:
        """Every job the controller knows (all states), normalised by :func:`parse_squeue_json`.

        Raises
        ------
        BackendUnavailableError
            The controller cannot be reached, including when ``squeue --json`` says so only
            inside its document: it exits 0 with an ``errors`` entry and an empty ``jobs`` list
            (Slurm 22.05 when the controller is down), which must never read as "no jobs".
        """
        import json

        out = self._run(["squeue", "--json", "--states=all", *self._cluster_args()])
        try:
            doc = json.loads(out)
        except json.JSONDecodeError as exc:
            raise DataFormatError(f"{self.name} squeue --json", f"not JSON: {exc}") from exc
        errors = doc.get("errors") if isinstance(doc, dict) else None
        if errors:
            said = "; ".join(f"{e.get('source', '')}: {e.get('description') or e.get('error')}"
                             for e in errors if isinstance(e, dict)) or str(errors)[:200]
            raise BackendUnavailableError(f"{self.name}: controller unreachable: squeue could "
                                          f"not list the jobs ({said})")
        return parse_squeue_json(doc, f"{self.name} squeue --json")

    def status(self, keys: Collection[str] | None = None) -> dict[str, BackendJob]:
        """Our jobs on the cluster by key (one ``squeue --json`` call).

        Refreshes the index :meth:`submit` checks. Final start and end of finished jobs come from
        :meth:`accounting`.
        """
        by_key: dict[str, list[BackendJob]] = {}
        for j in self.squeue():
            if j["cluster"] and j["cluster"] != self.cluster:
                continue
            bj = backend_job(self.cluster, j)
            if bj is not None:
                by_key.setdefault(bj.key, []).append(bj)
        found = {k: _keep_one(v) for k, v in by_key.items()}
        with self._lock:
            self._index = dict(found)
        if keys is not None:
            found = {k: v for k, v in found.items() if k in set(keys)}
        return found

    def cancel(self, key: str) -> bool:
        """``scancel`` our job with this key; False if the cluster has none or it is over."""
        job = self.status([key]).get(key)
        if job is None or job.state in TERMINAL_STATES:
            return False
        self._run(["scancel", *self._cluster_args(), job.backend_id.split(":", 1)[1]])
        return True

    # -- grid events (PausesWork) -----------------------------------------------------------
    pauses_running = True

    def _current(self, key: str) -> dict[str, Any] | None:
        """The live squeue entry of our job with this key (the newest if there are several)."""
        found = [j for j in self.squeue()
                 if (not j["cluster"] or j["cluster"] == self.cluster)
                 and (ours := parse_comment(j["comment"])) is not None and ours[0] == key]
        return max(found, key=lambda j: j["job_id"]) if found else None

    def _act(self, key: str, verb: str, want: tuple[str, ...], already: tuple[str, ...],
             held: bool | None = None) -> WorkAction:
        """``scontrol <verb> <id>`` when the job's base state is in ``want``.

        ``held`` (for ``hold``/``release``): whether the action's result is a pending job
        held by ``scontrol hold`` (Slurm reason ``JobHeldAdmin`` or ``JobHeldUser``).
        """
        job = self._current(key)
        if job is None:
            return WorkAction(WorkOutcome.ABSENT, None, f"{self.name} has no live job of key "
                              f"{key} (over, or forgotten by the controller)")
        bid = f"{self.cluster}:{job['job_id']}"
        base = job["states"][0] if job["states"] else "UNKNOWN"
        is_held = str(job.get("state_reason") or "").startswith("JobHeld")
        if base in already and (held is None or is_held == held):
            return WorkAction(WorkOutcome.ALREADY, bid, f"already {base}"
                              + (f" ({job['state_reason']})" if is_held else "")
                              + f": scontrol {verb} not sent again")
        if base not in want:
            outcome = WorkOutcome.ABSENT if base in _TERMINAL_WORDS else WorkOutcome.WRONG_STATE
            return WorkAction(outcome, bid, f"job is {base}, not "
                              f"{' or '.join(want)}: scontrol {verb} not sent")
        self._run(["scontrol", *self._cluster_args(), verb, str(job["job_id"])])
        return WorkAction(WorkOutcome.DONE, bid, f"scontrol {verb} {job['job_id']}")

    def pause(self, key: str) -> WorkAction:
        """``scontrol suspend``: the job's processes are stopped (SIGSTOP), its GPUs idle.

        Slurm 22.05 (scontrol(1) ``suspend``, operator or administrator only). The job keeps
        its nodes and GPU memory while suspended; its time limit does not run. ``ALREADY``
        when the job is ``SUSPENDED``.
        """
        return self._act(key, "suspend", ("RUNNING",), ("SUSPENDED",))

    def resume(self, key: str, end_by: datetime | None = None) -> WorkAction:
        """``scontrol resume`` of a ``SUSPENDED`` job (``ALREADY`` when it runs).

        ``end_by`` is not needed: a suspended job's time limit does not run (slurmctld keeps
        the run time before the suspend and sets the end time at the resume to the time the
        limit has left), so the resumed piece runs the rest of its ``--time`` and its
        ``--signal`` comes that long before the new end.
        """
        return self._act(key, "resume", ("SUSPENDED",), ("RUNNING", "COMPLETING"))

    def hold(self, key: str) -> WorkAction:
        """``scontrol hold`` of a ``PENDING`` job (priority 0: it does not start).

        ``ALREADY`` when it is pending with reason ``JobHeldAdmin``/``JobHeldUser``.
        """
        job = self._current(key)
        if job is not None and str(job.get("state_reason") or "").startswith("JobHeld"):
            return self._act(key, "hold", (), ("PENDING",), held=True)
        return self._act(key, "hold", ("PENDING",), (), held=True)

    def unhold(self, key: str, planned_start: datetime, now: datetime,
               end_by: datetime | None = None) -> WorkAction:
        """``scontrol release`` of a job held by :meth:`hold`.

        ``--begin`` still holds it until its planned start. ``ALREADY`` when it is pending
        and not held, or already running. ``end_by`` is not needed: a released job runs its
        whole ``--time`` from when it starts.
        """
        job = self._current(key)
        if job is None or not str(job.get("state_reason") or "").startswith("JobHeld"):
            return self._act(key, "release", (), ("PENDING", "RUNNING", "COMPLETING"))
        return self._act(key, "release", ("PENDING",), ())

    def sacct(self, names: Collection[str], since: datetime) -> list[dict[str, Any]]:
        """Accounting lines of jobs named ``names`` submitted since ``since`` (bounded query).

        ``-S since -E now --name=...`` (the job-completion file, ``-c``, ignores them: the lines
        are filtered here by name and submit time all the same). Times are UTC (``TZ=UTC``).
        Empty when ``accounting="none"``.

        Returns
        -------
        list of dict
            One per job id: ``job_id`` (int), ``name``, ``state`` (base word of its last
            line), ``submit`` (its first line's: a requeue resets it), ``start``, ``end``
            (tz-aware UTC or None), ``comment``, ``runs`` (the states of its earlier lines, one
            per requeue, oldest first).
        """
        names = sorted(set(names))
        if not names or self.accounting_source == "none":
            return []
        src = ["-c"] if self.accounting_source == "jobcomp" else [f"--clusters={self.cluster}"]
        start = since.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")
        want = set(names)
        out: list[dict[str, Any]] = []
        for i in range(0, len(names), 200):
            chunk = names[i:i + 200]
            # --name splits at commas: a name holding one is matched below, not in the query
            by_name = [] if any("," in n for n in chunk) else [f"--name={','.join(chunk)}"]
            text = self._run(["sacct", *src, "-n", "-P", "-X", f"--delimiter={SACCT_SEP}",
                              "-S", start, "-E", "now", "-o",
                              "JobID,JobName%300,State,Submit,Start,End,Comment%400", *by_name])
            for line in text.splitlines():
                parts = line.split(SACCT_SEP, 6)
                if len(parts) != 7 or not parts[0].isdigit() or parts[1] not in want:
                    continue
                submit = _sacct_time(parts[3])
                if submit is None or submit < since:
                    continue
                out.append({"job_id": int(parts[0]), "name": parts[1],
                            "state": (parts[2].split() or ["UNKNOWN"])[0], "submit": submit,
                            "start": _sacct_time(parts[4]), "end": _sacct_time(parts[5]),
                            "comment": parts[6].strip()})
        # a requeued job has a line per run (the job-completion file records the requeue as
        # PENDING or NODE_FAIL, ...), in order: the last is the job's state now, the earlier
        # ones are counted as its restarts
        last: dict[int, dict[str, Any]] = {}
        for r in out:
            runs = last[r["job_id"]]["runs"] + [last[r["job_id"]]["state"]] \
                if r["job_id"] in last else []
            first = last.pop(r["job_id"], r)  # a requeue resets Submit: keep the first's
            last[r["job_id"]] = {**r, "submit": min(first["submit"], r["submit"]), "runs": runs}
        return list(last.values())

    def accounting(self, units: Collection[SubmittedUnit]) -> dict[str, BackendJob]:
        """Our jobs found in ``sacct`` by key, for units the controller no longer reports.

        One bounded query (:meth:`sacct`) from the earliest unit's ``since`` (minus
        :data:`CLOCK_SLACK_S` unless that is the cluster's own submit time). A line is a unit's
        job when its name is the unit's (:func:`slurm_job_name`), its comment (where the
        accounting keeps it) carries the unit's key, it was submitted at or after the unit's
        ``since`` (to the second when that is the cluster's recorded submit time) and, when the
        unit has a backend id, the job id is that id. Several lines for one key: the one with
        the unit's backend id (else the newest) is the job; the others are its
        :attr:`BackendJob.duplicates`.

        Returns
        -------
        dict
            Key -> :class:`BackendJob` with the final state, actual start and end.
        """
        mine = [u for u in units if u.backend_id is None
                or u.backend_id.startswith(self.cluster + ":")]
        if not mine or self.accounting_source == "none":
            return {}
        names = {slurm_job_name(*split_key(u.key)): u for u in mine}
        lows = {u.key: (u.since - timedelta(seconds=1) if u.exact
                        else u.since - timedelta(seconds=CLOCK_SLACK_S)) for u in mine}
        lines = self.sacct(names, min(lows.values()))
        hits: dict[str, list[dict[str, Any]]] = {}
        for r in lines:
            u = names[r["name"]]
            ours = parse_comment(r["comment"]) if r["comment"] else None
            if r["comment"] and (ours is None or ours[0] != u.key):
                continue  # the accounting keeps comments and this one is not our key
            if r["submit"] < lows[u.key] or (
                    u.exact and r["submit"] > u.since + timedelta(seconds=1)
                    and u.backend_id == f"{self.cluster}:{r['job_id']}"):
                continue
            hits.setdefault(u.key, []).append(r)
        out: dict[str, BackendJob] = {}
        for key, rs in hits.items():
            u = next(x for x in mine if x.key == key)
            jobs = [accounting_job(self.cluster, key, r) for r in rs]
            main = next((j for j in jobs if j.backend_id == u.backend_id), None)
            if u.backend_id is not None and main is None:
                continue  # the key's id is not among them: never take another job's record
            main = main or max(jobs, key=lambda j: int(j.backend_id.rsplit(":", 1)[1]))
            out[key] = replace(main, duplicates=tuple(
                j.backend_id for j in jobs if j.backend_id != main.backend_id))
        return out

    def gpu_types(self) -> dict[str, int]:
        """GPU type -> count over the cluster's nodes (``sinfo -o %G``)."""
        out = self._run(["sinfo", "-h", "-N", *self._cluster_args(), "-o", "%N|%G"])
        seen: dict[str, dict[str, int]] = {}
        for line in out.splitlines():
            node, _, gres = line.partition("|")
            for item in gres.split(","):
                parts = item.split("(")[0].split(":")
                if len(parts) == 3 and parts[0] == "gpu":
                    seen.setdefault(node, {})[parts[1]] = int(parts[2])
        total: dict[str, int] = {}
        for per in seen.values():
            for t, n in per.items():
                total[t] = total.get(t, 0) + n
        return total


def _rank(job: BackendJob) -> tuple[int, int]:
    live = job.state not in TERMINAL_STATES
    return (int(live), int(job.backend_id.rsplit(":", 1)[1]))


def _keep_one(jobs: list[BackendJob]) -> BackendJob:
    """The job to record when a key is on the cluster more than once: the live, then the newest.

    The others become its :attr:`BackendJob.duplicates`.
    """
    main = max(jobs, key=_rank)
    dups = tuple(sorted(j.backend_id for j in jobs if j is not main))
    return replace(main, duplicates=dups) if dups else main


def accounting_job(cluster: str, key: str, r: dict[str, Any]) -> BackendJob:
    """Our :class:`BackendJob` for one line of :meth:`SlurmAdapter.sacct` (key already matched).

    The state is the line's (its last run's); a job the cluster requeued names its earlier runs
    in the detail (``from sacct: ...; before: NODE_FAIL``) and, pending again, is ``Evicted``.
    An unknown state word is ``Failed/Lost``.
    """
    state, reason = STATE_MAP.get(r["state"], (JobState.FAILED, ReasonCode.LOST))
    runs = r.get("runs") or []
    if state is JobState.DISPATCHED and runs:
        reason = ReasonCode.EVICTED
    said = cluster_detail(r["state"], "", len(runs))
    before = f"; before: {', '.join(runs)}" if runs else ""
    started = r["start"] is not None and not (state is JobState.CANCELLED
                                              and r["start"] == r["end"])
    ours = parse_comment(r["comment"]) if r["comment"] else None
    return BackendJob(key=key, plan_id=ours[1] if ours else "",
                      backend_id=f"{cluster}:{r['job_id']}", state=state, reason=reason,
                      raw_state=r["state"], actual_start=r["start"] if started else None,
                      actual_end=r["end"] if started and state in TERMINAL_STATES else None,
                      submitted=r["submit"],
                      detail=f"from sacct{': ' + said if said else ''}{before}")


def _sacct_time(text: str) -> datetime | None:
    text = text.strip()
    if not text or text in ("Unknown", "None"):
        return None
    return datetime.fromisoformat(text).replace(tzinfo=UTC)
