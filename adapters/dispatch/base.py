"""The dispatch adapter contract: what every scheduler backend provides.

Required (:class:`DispatchAdapter`): ``submit`` (idempotent on the dispatch key), ``status`` and
``cancel``, plus ``render`` (the exact submission, for ``--dry-run``). Optional capabilities are
separate protocols an adapter may also satisfy (after Kueue's ``GenericJob`` and its optional
interfaces):

- :class:`DefersStart` — the backend holds a job until a start time it is given (Slurm
  ``--begin``); adapters without it submit held and need :class:`ReleasesHeld`.
- :class:`ReleasesHeld` — jobs are submitted held (a suspended Kubernetes Job) and released by the
  service at their planned start (``release``).
- :class:`KeepsPlannedStop` — a released job may start later than its release (Kueue admits it
  from its queue), so the release pass bounds it by its planned stop once it has
  (``keep_planned_stops``).
- :class:`ReportsGpuTypes` — the backend reports the GPU types and counts it offers.
- :class:`KeepsAccounting` — the backend keeps records of finished jobs (Slurm ``sacct``), looked
  up by key in a bounded window before a unit whose submission may have been made is submitted
  again, and for actual start and end once the controller forgets a job.

The dispatch unit is a (job id, piece): its key, :func:`dispatch_key`, is what the backend keeps
(Slurm ``--comment``, a Kubernetes label), so a crash between a submit and its record is repaired
by finding the key on the backend. The plan id travels with it but is not part of the key: a job
that appears in several successive plans (the rolling horizon) is dispatched once.

Suspend and resume: a preemptible job the plan splits into pieces is dispatched as one unit per
piece, each a backend job of its own that starts at the piece's planned start, is stopped at its
planned end, and (for pieces after the first) restores the checkpoint the previous piece wrote.
Every piece gets the same environment (:meth:`DispatchRequest.job_env`), so one job script
handles all: Slurm sends ``SIGUSR1`` to the batch shell before a pausing piece's time limit
(``--signal=B:USR1@…``) and runs a resumed piece only after the previous one ended
(``--dependency=afterany:…``); Kubernetes holds each piece's Job with ``spec.suspend`` until its
start and stops a pausing piece with ``activeDeadlineSeconds`` the grace period before its planned
end (SIGTERM, then the pod's grace period to checkpoint: gone by the end).
"""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Protocol, runtime_checkable

from carbonsched.domain import JobPayload, JobState, ReasonCode, milli_shares, nothing_to_run
from carbonsched.errors import TimeAxisError
from carbonsched.limits import DEFAULT_SHARES_PER_GPU, SHARES_PER_GPU_CHOICES, check_identifier

#: methods every adapter must have (checked by the registry at start-up)
REQUIRED_METHODS = ("submit", "status", "cancel", "render")


def dispatch_key(job_id: str, piece: int) -> str:
    """The idempotency key of one dispatch unit: ``<job_id>#<piece>``."""
    return f"{job_id}#{piece}"


def split_key(key: str) -> tuple[str, int]:
    """``(job_id, piece)`` of a key made by :func:`dispatch_key`.

    Raises
    ------
    ValueError
        ``key`` does not end in ``#<piece number>``.
    """
    job_id, sep, piece = key.rpartition("#")
    if not sep or not piece.isdigit():
        raise ValueError(f"dispatch key {key!r} does not end in #<piece number>")
    return job_id, int(piece)


CHECKPOINT_SIGNAL_LEAD_S = 120
"""How long before a pausing piece must stop it is told to write its checkpoint: Slurm's
``--signal=B:USR1@<this>`` (Slurm may signal up to 60 s earlier than asked, sbatch(1)); on
Kubernetes ``activeDeadlineSeconds`` sends SIGTERM this long before the piece's planned end and
the pod's ``terminationGracePeriodSeconds`` (this) ends at it. [s] A project choice (two minutes
for a GPU job to flush its state), not a cited constant."""


NEVER_RAN = "never-ran"
""":attr:`BackendJob.raw_state` of a run released or resumed after its planned stop (moved by
a grid event or not), so that no pod of it ran then (Kubernetes: ``parallelism: 0``, or a
Volcano Job's pods left gated): read Failed/``DeadlinePassed``. Never a pause ending: the
outbox records such a pausing piece Failed, its work still owed, not ``Succeeded``/``Paused``
(:func:`carbonsched.dispatch.outbox.mark_never_ran`)."""


def short_hash(text: str, n: int = 10) -> str:
    """First ``n`` hex digits of the SHA-256 of ``text`` (names and label values)."""
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def _aware(ts: datetime, what: str) -> datetime:
    if ts.tzinfo is None or ts.utcoffset() is None:
        raise TimeAxisError(f"{what} {ts.isoformat()} is naive; give it tz-aware (UTC)")
    return ts


@dataclass(frozen=True)
class DispatchRequest:
    """One placement to hand to a backend.

    Attributes
    ----------
    plan_id, job_id, piece
        The plan the placement comes from, the job and the piece of the job (0 for a job placed
        whole).
    site
        The catalog site id.
    start, end
        Planned start and end (tz-aware). The backend must not start the job before ``start``.
    deadline
        Latest end the backend may allow (Slurm ``--deadline``); the job is dropped by the
        backend if it cannot end by then.
    gpu_type, gpus
        GPU model and gang size. [-]
    pieces
        How many pieces the job runs in: 1 for a job placed whole; more for a preemptible job the
        plan suspends in dirty hours and resumes from its checkpoint in clean ones. [-] 0 (the
        default) means not given: the piece is taken as the job's last (``piece + 1``).
    checkpoint_overhead_s
        Time a resumed piece spends restoring its checkpoint, inside ``[start, end)``. [s]
    nodes
        Nodes the gang spans: 1 (the default) runs all ``gpus`` on one node; ``N > 1`` runs
        ``gpus / N`` GPUs on each of ``N`` nodes (Slurm ``--nodes=N --gres=gpu:<type>:G
        --ntasks-per-node=1``, ``SlurmAdapter.gang_args``; a multi-pod workload on
        Kubernetes). ``gpus`` must divide evenly. Set by
        :func:`carbonsched.dispatch.outbox.plan_requests` from the site's ``gpus_per_node``. [-]
    payload
        What the job runs and its GPU slice (:class:`~carbonsched.domain.JobPayload`), from the
        job's spec; None when the job names nothing to run.
    placeholder
        Run the placeholder ``sleep <planned seconds>`` (``carbonsched dispatch
        --placeholder``) because the job names nothing to run; labelled on the backend object.
    max_domains
        The gang's topology constraint from the plan (``Job.max_domains``): most network
        domains it may span, 1 for ``topology = "same-domain"``; None without one. Slurm
        ``--switches``, Kueue topology annotations. [-]
    mig_profile, gpu_milli
        The GPU slice the plan runs the job on at this site: a MIG profile (at a pool with
        ``sharing = "mig"``) or a share of one GPU (``sharing = "milli"``) [1/1000 GPU]; both
        None (the default) for whole GPUs. Set by
        :func:`carbonsched.dispatch.outbox.plan_requests` from the placement (a placement with
        ``gpu_index`` holds a slice), not from the payload: a job asking for a slice at a site
        that does not share GPUs that way is planned on, and asks for, a whole GPU.
    shares_per_gpu
        Shares one GPU of the site's pool is cut into (the catalog's ``shares_per_gpu``: Slurm
        shard ``Count``, time-slicing ``replicas``); a ``gpu_milli`` request asks for
        :attr:`gpu_shares` of them. [-]
    """

    plan_id: str
    job_id: str
    piece: int
    site: str
    start: datetime
    end: datetime
    deadline: datetime
    gpu_type: str
    gpus: int
    pieces: int = 0
    checkpoint_overhead_s: int = 0
    nodes: int = 1
    payload: JobPayload | None = None
    placeholder: bool = False
    max_domains: int | None = None
    mig_profile: str | None = None
    gpu_milli: int | None = None
    shares_per_gpu: int = DEFAULT_SHARES_PER_GPU

    def __post_init__(self) -> None:
        # the one identifier grammar, before any backend sees the id (InputError, its message)
        check_identifier(self.job_id, "job id")
        check_identifier(self.site, "site id")
        if self.pieces == 0 and self.piece >= 0:
            object.__setattr__(self, "pieces", self.piece + 1)
        if not 0 <= self.piece < self.pieces:
            raise ValueError(f"job {self.job_id}: piece {self.piece} is outside "
                             f"0..{self.pieces - 1} (the job runs in {self.pieces} piece(s))")
        if self.checkpoint_overhead_s < 0:
            raise ValueError(f"job {self.job_id}: checkpoint_overhead_s must be >= 0, got "
                             f"{self.checkpoint_overhead_s}")
        for name in ("start", "end", "deadline"):
            _aware(getattr(self, name), f"job {self.job_id} {name}")
        if self.end <= self.start:
            raise TimeAxisError(f"job {self.job_id}: end {self.end.isoformat()} is not after "
                                f"start {self.start.isoformat()}")
        if self.gpus < 1:
            raise ValueError(f"job {self.job_id}: gpus must be >= 1, got {self.gpus}")
        if self.mig_profile is not None and self.gpu_milli is not None:
            raise ValueError(f"job {self.job_id}: a GPU slice is a MIG profile or a milli share, "
                             f"not both (mig_profile {self.mig_profile!r}, gpu_milli "
                             f"{self.gpu_milli})")
        if (self.mig_profile is not None or self.gpu_milli is not None) and self.gpus != 1:
            raise ValueError(f"job {self.job_id}: a GPU slice is part of one GPU; gpus must be "
                             f"1, got {self.gpus}")
        if self.gpu_milli is not None and not 1 <= self.gpu_milli <= 1000:
            raise ValueError(f"job {self.job_id}: gpu_milli must be in 1..1000, got "
                             f"{self.gpu_milli}")
        if self.shares_per_gpu not in SHARES_PER_GPU_CHOICES:
            raise ValueError(f"job {self.job_id}: shares_per_gpu must divide 1000, got "
                             f"{self.shares_per_gpu}")
        if self.nodes < 1 or self.gpus % self.nodes:
            raise ValueError(f"job {self.job_id}: {self.gpus} GPUs cannot be cut into "
                             f"{self.nodes} node(s) of equal size; give nodes dividing gpus")

    @property
    def gpu_shares(self) -> int | None:
        """Whole shares of one GPU a ``gpu_milli`` request asks for; None otherwise. [-]

        :func:`carbonsched.domain.milli_shares` of ``gpu_milli`` and ``shares_per_gpu``; None
        for whole GPUs or a MIG slice.
        """
        if self.gpu_milli is None:
            return None
        return milli_shares(self.gpu_milli, self.shares_per_gpu)

    @property
    def gpus_per_node(self) -> int:
        """GPUs on each node of the gang (``gpus / nodes``). [-]"""
        return self.gpus // self.nodes

    @property
    def key(self) -> str:
        """The idempotency key the backend keeps."""
        return dispatch_key(self.job_id, self.piece)

    @property
    def duration_s(self) -> int:
        """Planned run time. [s]"""
        return int((self.end - self.start).total_seconds())

    @property
    def resumes(self) -> bool:
        """True for a piece after the first: it restores the job's checkpoint."""
        return self.piece > 0

    @property
    def pauses(self) -> bool:
        """True for a piece before the last.

        It is stopped at its planned end (after being told to checkpoint) and a later piece
        resumes it.
        """
        return self.piece < self.pieces - 1

    def job_env(self) -> dict[str, str]:
        """Environment variables the job's command reads to checkpoint and resume.

        ``CARBONSCHED_JOB_ID``, ``CARBONSCHED_PLAN_ID``, ``CARBONSCHED_PIECE`` (0-based),
        ``CARBONSCHED_PIECES``, ``CARBONSCHED_RESUME`` (``1`` when the piece must restore the
        checkpoint the previous piece wrote, else ``0``) and ``CARBONSCHED_PIECE_END`` (UTC,
        ISO 8601: when the piece must have written its checkpoint and exited; later it is
        stopped). Same names on every backend.
        """
        return {"CARBONSCHED_JOB_ID": self.job_id, "CARBONSCHED_PLAN_ID": self.plan_id,
                "CARBONSCHED_PIECE": str(self.piece), "CARBONSCHED_PIECES": str(self.pieces),
                "CARBONSCHED_RESUME": "1" if self.resumes else "0",
                "CARBONSCHED_PIECE_END": self.end.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}

    def shell_command(self) -> str:
        """What the job runs as shell text; empty when it names no command.

        The payload's command (with its ``args``, quoted) or, for a placeholder,
        ``sleep <planned seconds>``.
        """
        p = self.payload
        if p is not None and p.command:
            cmd = p.command if isinstance(p.command, str) else shlex.join(p.command)
            return " ".join([cmd, *map(shlex.quote, p.args)]) if p.args else cmd
        return f"sleep {self.duration_s}" if self.placeholder else ""

    def user_env(self) -> dict[str, str]:
        """The environment the job names (its payload's ``env``), in order; never ours."""
        if self.payload is None:
            return {}
        return {k: v for k, v in self.payload.env if not k.startswith("CARBONSCHED_")}


def payload_problem(req: DispatchRequest, kind: str) -> str | None:
    """Why ``req`` cannot be submitted to a backend of ``kind``, or None when it can.

    A request without a payload is submitted only as a placeholder; Slurm runs a ``script``,
    ``script_path`` or ``command``; Kubernetes runs an ``image``, a ``command`` (in the
    site's default image) or a ``pod_template``, never a ``script_path`` (a file on the
    submit host) nor an image given as a path (an OCI bundle, Slurm's ``--container``). The
    text is the outcome's detail in ``carbonsched dispatch``.
    """
    p = req.payload
    if p is None or not p.runs_something:
        if req.placeholder:
            return None
        return nothing_to_run(req.job_id, "", "dispatch with --placeholder "
                              "(CARBONSCHED_DISPATCH_PLACEHOLDER=true) to run 'sleep <planned "
                              "seconds>'")
    if not p.runs_on(kind) and kind == "slurm":   # the planner's rule (JobPayload.runs_on)
        return (f"job {req.job_id}: a Slurm site runs a script, script_path or command; the "
                "job gives only " + ", ".join(k for k in ("image", "pod_template")
                                              if getattr(p, k)) + "; add one")
    if not p.runs_on(kind) and kind == "kubernetes" and p.bundle_image:
        return (f"job {req.job_id}: its image {p.image!r} is a path (an OCI bundle, run by "
                "Slurm's --container), not an image a Kubernetes pod can pull; give a registry "
                "image, or allow it only at Slurm sites (allowed_sites)")
    if not p.runs_on(kind) and kind == "kubernetes":
        return (f"job {req.job_id}: a Kubernetes site runs an image with a command, not a "
                "batch script; give image and command (or pod_template), or allow it only "
                "at Slurm sites (allowed_sites)")
    return None


@dataclass(frozen=True)
class BackendJob:
    """What a backend reports about one of our jobs.

    Attributes
    ----------
    key
        The dispatch key found on the backend object.
    backend_id
        The backend's id: ``<cluster>:<job id>`` for Slurm (ids are unique per cluster only),
        ``<context>/<namespace>/<name>`` for Kubernetes.
    state, reason
        Lifecycle state and reason code.
    raw_state
        The backend's own state words (``PENDING``, ``RUNNING,COMPLETING``, ``suspended``).
    plan_id
        The plan id the object carries.
    actual_start, actual_end
        When the job really started and ended, as the backend reports them (tz-aware UTC).
    begin
        The start time the backend holds the job until (Slurm's begin time), when it says.
    submitted
        When the backend accepted the job, in the backend's own clock (Slurm's submit time),
        when it says: bounds later accounting queries.
    duplicates
        Other backend ids carrying the same key (a submission made twice, e.g. by sbatch
        retrying one whose answer was lost); empty when the key is on the backend once.
    resolved
        Set when a submission's outcome was ambiguous and the job was found by its key
        instead: what happened (the job was recorded, not submitted again).
    """

    key: str
    backend_id: str
    state: JobState
    reason: ReasonCode
    raw_state: str = ""
    plan_id: str = ""
    actual_start: datetime | None = None
    actual_end: datetime | None = None
    begin: datetime | None = None
    detail: str = ""
    submitted: datetime | None = None
    duplicates: tuple[str, ...] = ()
    resolved: str = ""


@dataclass(frozen=True)
class SubmittedUnit:
    """A dispatch unit that is, or may be, on a backend: what a bounded lookup needs.

    Attributes
    ----------
    key
        The dispatch key.
    backend_id
        The backend's id when recorded; None when a submission may have been made but its
        answer was lost.
    since
        The earliest time the job can have been submitted (tz-aware).
    exact
        True when ``since`` is the backend's own recorded submit time (its clock); False when it
        is the dispatcher's (then a lookup allows for clock skew).
    """

    key: str
    backend_id: str | None
    since: datetime
    exact: bool = False


@runtime_checkable
class DispatchAdapter(Protocol):
    """The required contract of a scheduler backend."""

    name: str
    """``<kind>:<instance>``, e.g. ``slurm:ontario``."""

    def submit(self, request: DispatchRequest) -> BackendJob:
        """Create the job, or return the existing one carrying the same key.

        Raises
        ------
        BackendUnavailableError
            The backend cannot be reached (retry later).
        BackendRejectedError
            The backend refused the request (do not retry).
        """

    def status(self, keys: Collection[str] | None = None) -> dict[str, BackendJob]:
        """Our jobs on the backend by key (all of ours when ``keys`` is None)."""

    def cancel(self, key: str) -> bool:
        """Cancel our job with this key; False if the backend has none (idempotent)."""

    def render(self, request: DispatchRequest) -> str:
        """The exact submission (an sbatch line, a Job manifest) for ``--dry-run``."""


@runtime_checkable
class DefersStart(Protocol):
    """The backend itself holds a job until its planned start."""

    defers_start: bool


@runtime_checkable
class ReleasesHeld(Protocol):
    """Jobs are submitted held and released at their planned start by the service."""

    def release(self, key: str) -> bool:
        """Release the held job; False if it is not held (idempotent)."""


@runtime_checkable
class KeepsPlannedStop(Protocol):
    """A released job may start later than its release (Kueue's queue, Volcano's gang).

    The release pass bounds such a job by its planned stop once it has started.
    """

    def keep_planned_stops(self, keys: Collection[str]) -> dict[str, str]:
        """Bound the runs of these released keys by their planned stops.

        Key -> what was done, for the keys changed now.
        """


@runtime_checkable
class KeepsAccounting(Protocol):
    """The backend keeps records of jobs it no longer reports as current (Slurm's ``sacct``)."""

    def accounting(self, units: Collection[SubmittedUnit]) -> dict[str, BackendJob]:
        """Our jobs found in the records by key, bounded by each unit's ``since``."""


@runtime_checkable
class ReportsGpuTypes(Protocol):
    """The backend reports the GPUs it offers."""

    def gpu_types(self) -> dict[str, int]:
        """GPU type -> count the backend offers. [-]"""


class WorkOutcome(StrEnum):
    """What a grid-event action found and did on the backend (:class:`PausesWork`)."""

    DONE = "done"
    """This call changed the job on the backend (paused, held, resumed, released)."""
    ALREADY = "already"
    """The backend already shows the result (an earlier attempt's): nothing was sent."""
    ABSENT = "absent"
    """The backend has no such job, or it is over: nothing to do."""
    WRONG_STATE = "wrong_state"
    """The job is not in the state the action needs (a pause of a job not running, a hold of a
    job already running): nothing was sent; the detail says the state."""
    UNSUPPORTED = "unsupported"
    """The backend (or this workload kind) cannot do the action; the detail says what would."""


@dataclass(frozen=True)
class WorkAction:
    """The result of one :class:`PausesWork` call.

    Attributes
    ----------
    outcome
        :class:`WorkOutcome`.
    backend_id
        The job's backend id, when found.
    detail
        What was done or found, in the backend's words (``scontrol suspend 42``).
    """

    outcome: WorkOutcome
    backend_id: str | None = None
    detail: str = ""


@runtime_checkable
class PausesWork(Protocol):
    """The backend can pause running work and hold unstarted work for a grid event.

    Every method is idempotent: it reads the job's state first and acts only when the state
    needs it, so a retry after a crash finds the result (``ALREADY``) instead of acting twice.
    """

    pauses_running: bool
    """Whether :meth:`pause` can pause running work on this backend (and workload kind)."""

    def pause(self, key: str) -> WorkAction:
        """Pause our running job with this key."""

    def resume(self, key: str, end_by: datetime | None = None) -> WorkAction:
        """Resume our job paused by :meth:`pause`.

        ``end_by`` (tz-aware): the piece's planned end moved later by the pause
        (:func:`carbonsched.dispatch.grid.moved_end`); the backend stops the resumed run by
        it as it would at its planned end (a pausing piece the checkpoint grace before it).
        None keeps the planned end. A backend whose time limit does not run while the job is
        suspended (Slurm) needs nothing moved and may ignore it.
        """

    def hold(self, key: str) -> WorkAction:
        """Keep our job that has not started from starting."""

    def unhold(self, key: str, planned_start: datetime, now: datetime,
               end_by: datetime | None = None) -> WorkAction:
        """Let our held job start again (at once when ``planned_start`` is not after ``now``).

        ``now`` is the actor's clock (tz-aware). ``end_by`` (tz-aware): the piece's planned
        end moved later by the hold (:func:`carbonsched.dispatch.grid.moved_end`), as for
        :meth:`resume`; a backend that runs a held job its whole time limit from its start
        (Slurm ``--time``) may ignore it.
        """
