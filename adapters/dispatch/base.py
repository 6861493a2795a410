"""The dispatch adapter contract: what every scheduler backend provides.

Required (:class:`DispatchAdapter`): ``submit`` (idempotent on the dispatch key), ``status`` and
``cancel``, plus ``render`` (the exact submission, for ``--dry-run``). Optional capabilities are
separate protocols an adapter may also satisfy (after Kueue's ``GenericJob`` and its optional
interfaces):

- :class:`DefersStart` — the backend holds a job until a start time it is given (Slurm
  ``--begin``); adapters without it submit held and need :class:`ReleasesHeld`.
- :class:`ReleasesHeld` — jobs are submitted held (a suspended Kubernetes Job) and released by the
  service at their planned start (``release``).
- :class:`ReportsGpuTypes` — the backend reports the GPU types and counts it offers.

The dispatch unit is a (job id, piece): its key, :func:`dispatch_key`, is what the backend keeps
(Slurm ``--comment``, a Kubernetes label), so a crash between a submit and its record is repaired
by finding the key on the backend. The plan id travels with it but is not part of the key: a job
that appears in several successive plans (the rolling horizon) is dispatched once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

from carbonsched.domain import JobState, ReasonCode
from carbonsched.errors import TimeAxisError

#: methods every adapter must have (checked by the registry at start-up)
REQUIRED_METHODS = ("submit", "status", "cancel", "render")


def dispatch_key(job_id: str, piece: int) -> str:
    """The idempotency key of one dispatch unit: ``<job_id>#<piece>``."""
    return f"{job_id}#{piece}"


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
    command
        What the job runs (``sh -c`` text). The plan carries no commands: the default is a
        placeholder that sleeps for the planned duration.
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
    command: str = ""

    def __post_init__(self) -> None:
        for name in ("start", "end", "deadline"):
            _aware(getattr(self, name), f"job {self.job_id} {name}")
        if self.end <= self.start:
            raise TimeAxisError(f"job {self.job_id}: end {self.end.isoformat()} is not after "
                                f"start {self.start.isoformat()}")
        if self.gpus < 1:
            raise ValueError(f"job {self.job_id}: gpus must be >= 1, got {self.gpus}")

    @property
    def key(self) -> str:
        """The idempotency key the backend keeps."""
        return dispatch_key(self.job_id, self.piece)

    @property
    def duration_s(self) -> int:
        """Planned run time. [s]"""
        return int((self.end - self.start).total_seconds())

    def shell_command(self) -> str:
        """The command, or the placeholder ``sleep <planned seconds>``."""
        return self.command or f"sleep {self.duration_s}"


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
class ReportsGpuTypes(Protocol):
    """The backend reports the GPUs it offers."""

    def gpu_types(self) -> dict[str, int]:
        """GPU type -> count the backend offers. [-]"""
