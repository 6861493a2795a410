"""Dispatch a stored plan to each site's scheduler, exactly once, as a reconcile loop.

The unit is a (job id, piece): its key ``<job_id>#<piece>`` is unique in the store's outbox
(``dispatch_intents``) and is what each backend keeps (Slurm ``--comment``, a Kubernetes
annotation plus a hashed label). :func:`dispatch_plan`:

1. builds the adapters of every site of the catalog (an unknown backend kind or an unusable
   configuration fails here, before anything is written or submitted);
2. sorts the plan's placements: jobs whose first piece starts at or after ``commit_before`` are
   left to a later run (``NotCommitted``; a job whose first piece starts before it is committed
   whole, every piece, as the rolling planner commits it); a key already in the outbox from an
   *earlier plan* is never submitted again, nor any piece of a job whose first piece an
   earlier plan holds (``AlreadyDispatched``); one whose deadline cannot be met any more is recorded
   ``Failed/DeadlinePassed``;
3. writes the remaining intents (``Pending/AwaitingSubmit``) in one transaction — the outbox —
   before any side effect;
4. reconciles every pending intent (this plan's and any left by an earlier crash) with what its
   backend reports: a key already on the backend is recorded, not resubmitted; only the rest is
   submitted (a few submissions in flight per backend), each result recorded as it arrives;
5. retries a backend that cannot be reached with exponential backoff (the intents show
   ``Pending/BackendUnavailable`` meanwhile); what is still unreachable after the last attempt is
   left pending for the next run, which finishes it.

Claims (:mod:`carbonsched.dispatch.lease`): before any side effect a dispatcher claims the
intents it drives — a lease with its owner id and an expiry, taken with ``SELECT ... FOR UPDATE
SKIP LOCKED`` on PostgreSQL and a conditional ``UPDATE`` on SQLite — renews it while it works
(and, for each row, right before the submission, which it makes only if the row is still its
own) and releases it after. Dispatchers running the same plan at once (an operator's
``carbonsched dispatch`` beside the cron) therefore submit each unit once: one claims it, the
others wait for it to be recorded (``dispatch_wait_s``) and report it ``recorded``. Writing the
intents is itself idempotent (``INSERT ... ON CONFLICT DO NOTHING`` on the key).

A SIGKILL at any line leaves at worst an intent whose job exists on the backend but is not
recorded, leased by the dead dispatcher: once the lease expires (at once when the dead process
was on this host) the next run takes it over, finds the key on the backend — the controller's
list, then its accounting records (``sacct`` by job name in a window bounded by the submit
attempt) for a unit whose ``submit_attempted_at`` says a submission may have been made — and
records it; only a unit found nowhere is submitted (tested against real Slurm). A unit found on
its backend more than once is flagged (``duplicates``; ``carbonsched status``).

:func:`release_due` unsuspends held Kubernetes Jobs whose planned start has come (Slurm holds by
``--begin`` itself); :func:`refresh_status` records each job's lifecycle and the actual start and
end its backend reports (``sacct`` for Slurm, Job status for Kubernetes) for ``carbonsched status``
and the report export (:func:`dispatch_records`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
from sqlalchemy import and_, insert, or_, select
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.orm import Session

from carbonsched.adapters.dispatch.base import (
    NEVER_RAN,
    BackendJob,
    DispatchAdapter,
    DispatchRequest,
    KeepsAccounting,
    KeepsPlannedStop,
    ReleasesHeld,
    SubmittedUnit,
    dispatch_key,
    payload_problem,
)
from carbonsched.adapters.dispatch.registry import AdapterRegistry, BackendConfig, default_registry
from carbonsched.catalog import Catalog, load_catalog
from carbonsched.config import Settings, get_settings
from carbonsched.dispatch.lease import Claim, Claimant, check_lease_covers
from carbonsched.domain import TERMINAL_STATES, JobPayload, JobState, ReasonCode, Site
from carbonsched.errors import (
    AdapterContractError,
    BackendError,
    BackendRejectedError,
    BackendUnavailableError,
    CarbonschedError,
    InputError,
    StoreUnavailableError,
    TimeAxisError,
    UnitHeldError,
    UnknownSiteError,
)
from carbonsched.limits import DEFAULT_SHARES_PER_GPU
from carbonsched.store import Store
from carbonsched.store.grid_events import GridMark, grid_marks, held_keys
from carbonsched.store.models import DispatchRow
from carbonsched.store.pruned_jobs import PrunedJob, pruned_jobs, pruned_sentence

Clock = Callable[[], datetime]
"""Returns "now" (tz-aware); injected so tests drive time."""

logger = logging.getLogger(__name__)


STORE_ERRORS: tuple[type[Exception], ...] = (SQLAlchemyError, StoreUnavailableError)
"""The store's own errors: an outage of the database, not of the adapter that raised it."""


def unexpected(backend: str, what: str, exc: BaseException, *,
               passes: tuple[type[Exception], ...] = (BackendUnavailableError,),
               reraise: tuple[type[Exception], ...] = STORE_ERRORS) -> Exception:
    """Classify what an adapter call raised: the one place that tells an adapter's fault.

    A fault in an adapter (a custom one's bug, a tool printing what it never printed before)
    is not the backend's answer: the units it concerns stay as they were (a submission that
    may have been made is looked up by key before another), the rest of the pass goes on, and
    the next pass tries again. The traceback goes to the log.

    In this order: the store's own errors (``reraise``) are raised again; the kinds a caller
    records (``passes``) are returned as they are; any other :class:`BackendError` (the
    backend's own error, not an outage) is raised again; anything else is an adapter fault.

    Parameters
    ----------
    backend
        The adapter's name (``slurm:ontario``).
    what
        The call that raised (``submit of job-1#0``, ``status``).
    exc
        What it raised.
    passes
        The kinds the caller records (or raises itself) as they are: by default an outage;
        a pass that records the backend's own error too passes ``(BackendError,)``, one that
        also records an input error ``(BackendError, InputError)``.
    reraise
        The store's errors raised again before ``passes`` is looked at
        (:data:`STORE_ERRORS`); ``(SQLAlchemyError,)`` where a
        :class:`StoreUnavailableError` an adapter raises is a :class:`BackendError` to pass.

    Returns
    -------
    Exception
        ``exc`` itself when it is one of ``passes``; for an adapter fault, a new
        :class:`BackendUnavailableError` naming the backend, the call and the exception
        (callers tell the two apart by identity, ``returned is exc``).

    Raises
    ------
    SQLAlchemyError, StoreUnavailableError
        ``exc`` itself when it is one of ``reraise``: the store failed, not the adapter.
    BackendError
        ``exc`` itself when it is the backend's own error and not one of ``passes`` (squeue
        refusing a cluster name): a fault an operator must fix, which stops the run loudly
        (``dispatch`` exits 2; the intents stay in the outbox for the run after the fix).
    """
    if isinstance(exc, reraise):
        raise exc   # the store's outage, not the adapter's: the pass ends
    if isinstance(exc, passes):
        return exc
    if isinstance(exc, BackendError):   # the backend's own error: the operator's to fix
        raise exc
    logger.error("%s: %s raised %s", backend, what, type(exc).__name__, exc_info=exc)
    return BackendUnavailableError(
        f"{backend}: {what} raised {type(exc).__name__}: {str(exc)[:300]} (a fault in the "
        "adapter, not the backend's answer; the traceback is in the log); tried again in the "
        "next pass")


def system_clock() -> datetime:
    """The wall clock in UTC."""
    return datetime.now(UTC)


def backend_config(settings: Settings) -> BackendConfig:
    """The adapters' view of the dispatch settings."""
    return BackendConfig(slurm_conf_dir=settings.slurm_conf_dir,
                         slurm_use_clusters=settings.slurm_use_clusters,
                         slurm_accounting=settings.slurm_accounting,
                         slurm_timezone=settings.slurm_timezone,
                         slurm_account=settings.slurm_account, kubeconfig=settings.kubeconfig,
                         k8s_image=settings.k8s_image,
                         k8s_gpu_share_resource=settings.k8s_gpu_share_resource,
                         k8s_topology_label=settings.k8s_topology_label,
                         timeout_s=settings.dispatch_backend_timeout_s)


@dataclass
class DispatchOutcome:
    """What one run did with one dispatch unit.

    ``action``: ``submitted`` (created now), ``reconciled`` (found on the backend under its key,
    recorded without submitting), ``recorded`` (already recorded by an earlier run of this plan),
    ``already_dispatched`` (dispatched from an earlier plan), ``pruned`` (its job ended and
    the store pruned its records: final under its id, no intent written), ``not_committed``,
    ``deadline_passed``, ``rejected``, ``unavailable`` (left pending for the next run),
    ``held_elsewhere`` (another live dispatcher still holds its claim after the wait),
    ``lost_claim`` (this run's claim was taken over before the submission: not submitted),
    ``interrupted`` (the dispatcher was asked to stop before the unit's submission began: not
    submitted, left pending and unclaimed for the next run), ``dry_run``. ``duplicates``:
    other backend ids found with the same key.
    """

    key: str
    job_id: str
    piece: int
    site: str
    backend: str
    action: str
    state: str
    reason: str
    plan_id: str
    backend_id: str | None = None
    detail: str = ""
    rendered: str = ""
    duplicates: str = ""


INCOMPLETE = frozenset({"unavailable", "held_elsewhere", "lost_claim", "interrupted"})
"""Outcomes that leave a unit pending: the run is not complete (exit 3; run again)."""

ON_BACKEND = frozenset({"submitted", "reconciled", "recorded", "already_dispatched"})
"""Outcomes of a unit that is on its backend (now or, with a backend id, from an earlier run)."""

NOT_ASKED = frozenset({"not_committed", "dry_run", "pruned"})
"""Outcomes of a unit this run was not asked to submit (``pruned``: its job is final under
its id, its records pruned: :mod:`carbonsched.store.pruned_jobs`)."""

REFUSED_UNWRITTEN = frozenset({"no_payload"})
"""Refusals that write no outbox row: the unit is never submitted and only this run's outcome
says why (every other refusal, ``deadline_passed`` or ``rejected``, is a ``Failed`` row). A
job submitted through the API so refused is recorded ``Failed`` by the run that dispatched it
(:func:`carbonsched.service.runs.end_refused_jobs`)."""


@dataclass
class DispatchSummary:
    """The result of :func:`dispatch_plan`."""

    plan_id: str
    dry_run: bool
    commit_before: datetime | None
    started_at: datetime
    seconds: float = 0.0
    retries: int = 0
    """Backoff rounds made because a backend was unavailable. [-]"""
    outcomes: list[DispatchOutcome] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """Fallbacks taken, counted (e.g. placements without a deadline of their own)."""

    @property
    def counts(self) -> dict[str, int]:
        """Outcomes per action."""
        out: dict[str, int] = {}
        for o in self.outcomes:
            out[o.action] = out.get(o.action, 0) + 1
        return dict(sorted(out.items()))

    @property
    def complete(self) -> bool:
        """True when nothing is left pending (no backend unavailable, no claim held elsewhere)."""
        return not any(o.action in INCOMPLETE for o in self.outcomes)

    @property
    def nothing_submitted(self) -> bool:
        """True when the run was asked to submit units and none is on its backend.

        Asked: every unit but those :data:`NOT_ASKED` (``not_committed``, ``dry_run``); on its
        backend: :data:`ON_BACKEND`. A plan whose every placement is ``deadline_passed`` (a
        past day) is the common case; a plan with no placements, or a dry run, asks nothing.
        """
        asked = [o for o in self.outcomes if o.action not in NOT_ASKED]
        return bool(asked) and not any(_on_backend(o) for o in asked)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary."""
        return {"plan_id": self.plan_id, "dry_run": self.dry_run,
                "commit_before": _iso(self.commit_before), "started_at": _iso(self.started_at),
                "seconds": round(self.seconds, 3), "retries": self.retries,
                "complete": self.complete, "nothing_submitted": self.nothing_submitted,
                "counts": self.counts, "notes": self.notes,
                "outcomes": [asdict(o) for o in self.outcomes]}


def _on_backend(o: DispatchOutcome) -> bool:
    """True when the unit is on its backend.

    Submitted or found now, or recorded earlier with a backend id (a unit recorded as
    ``DeadlinePassed`` or rejected has none).
    """
    if o.action in ("recorded", "already_dispatched"):
        return bool(o.backend_id)
    return o.action in ON_BACKEND


def _iso(ts: datetime | None) -> str | None:
    return None if ts is None else ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _now(clock: Clock) -> datetime:
    now = clock()
    if now.tzinfo is None:
        raise TimeAxisError(f"the dispatch clock returned naive {now!r}; it must be tz-aware")
    return now.astimezone(UTC)


def resolve_plan_id(store: Store, plan_id: str) -> str:
    """The full id of the plan ``plan_id`` names: ``latest``, an id or a unique id prefix.

    :meth:`carbonsched.store.Store.resolve_plan_id`, the one resolver every command uses.

    Raises
    ------
    InputError
        No such plan, ``latest`` with no stored plan, or an ambiguous prefix (matches listed).
    """
    return store.resolve_plan_id(plan_id)


def build_adapters(catalog: Catalog, *, registry: AdapterRegistry | None = None,
                   settings: Settings | None = None) -> dict[str, DispatchAdapter]:
    """Adapters for every site of ``catalog`` (start-up check of every backend)."""
    settings = settings or get_settings()
    return (registry or default_registry()).build_for_sites(catalog.sites,
                                                            backend_config(settings))


def plan_requests(plan: Mapping[str, Any], catalog: Catalog,
                  deadline_slack_s: float = 3600.0,
                  placeholder: bool = False) -> list[DispatchRequest]:
    """One :class:`DispatchRequest` per placement of a plan document.

    Each request carries its placement's ``payload`` (the job's payload fields, templates
    applied; :class:`~carbonsched.domain.JobPayload`); a legacy placement ``command`` is read
    as the payload's command. With ``placeholder``, a placement whose job names nothing to run
    becomes a placeholder request (``sleep <planned seconds>``, labelled on the backend).

    The piece is the placement's ``piece`` (0 when the plan places jobs whole); the job's number
    of pieces is the placement's ``pieces`` when given, else how many placements the plan has
    for the job; a resumed piece's checkpoint overhead is its ``overhead_minutes`` (0 if absent).
    The backend's deadline is the placement's ``deadline`` when the plan gives one, else its end
    plus ``deadline_slack_s``. The node count (:attr:`DispatchRequest.nodes`) comes from the
    site's node shape (:func:`placement_nodes`).

    Raises
    ------
    UnknownSiteError
        A placement names a site the catalog lacks.
    InputError
        A placement's gang is larger than one of the site's nodes and not a whole number of
        them (a plan made before the catalog declared its node shape): nothing is dispatched.
    WorkloadError
        A placement's payload has a field the schema does not know.
    """
    known = [s.id for s in catalog.sites]
    out = []
    per_job: dict[str, int] = {}
    for p in plan.get("placements", []):
        per_job[str(p["job_id"])] = per_job.get(str(p["job_id"]), 0) + 1
    for p in plan.get("placements", []):
        if p["site"] not in known:
            raise UnknownSiteError(p["site"], known)
        start = pd.Timestamp(p["start"]).to_pydatetime()
        end = pd.Timestamp(p["end"]).to_pydatetime()
        deadline = (pd.Timestamp(p["deadline"]).to_pydatetime() if p.get("deadline")
                    else end + timedelta(seconds=deadline_slack_s))
        payload = JobPayload.from_dict(p.get("payload")) or (
            JobPayload(command=str(p["command"])) if p.get("command") else None)
        mig_profile, gpu_milli = placement_slice(p)
        pool = catalog.site(p["site"]).gpus.get(p["gpu_type"])
        out.append(DispatchRequest(
            plan_id=str(plan["plan_id"]), job_id=str(p["job_id"]), piece=int(p.get("piece", 0)),
            site=p["site"], start=start, end=end, deadline=deadline, gpu_type=p["gpu_type"],
            gpus=int(p["gpus"]),
            pieces=int(p.get("pieces") or per_job[str(p["job_id"])]),
            checkpoint_overhead_s=round(60 * float(p.get("overhead_minutes") or 0)),
            nodes=placement_nodes(catalog.site(p["site"]), str(p["job_id"]), p["gpu_type"],
                                  int(p["gpus"])),
            payload=payload, max_domains=p.get("max_domains"),
            placeholder=placeholder and (payload is None or not payload.runs_something),
            mig_profile=mig_profile, gpu_milli=gpu_milli,
            shares_per_gpu=pool.shares_per_gpu if pool is not None else DEFAULT_SHARES_PER_GPU))
    return out


def placement_slice(placement: Mapping[str, Any]) -> tuple[str | None, int | None]:
    """The GPU slice a plan document's placement runs on: ``(mig_profile, gpu_milli)``.

    A placement holds a slice when the plan gave it a GPU of the pool (``gpu_index``): a MIG
    instance when it also has ``mig_start``, else a milli share; the sizes are the payload's.
    Otherwise ``(None, None)``: whole GPUs, also for a job whose payload asks for a slice at a
    site that does not share GPUs that way (the planner gave it a whole GPU,
    :func:`carbonsched.plan.slices.job_slice`), so dispatch asks for what the plan booked.
    """
    pay = placement.get("payload") or {}
    if placement.get("gpu_index") is None:
        return None, None
    if placement.get("mig_start") is not None and pay.get("mig_profile"):
        return str(pay["mig_profile"]), None
    if placement.get("mig_start") is None and pay.get("gpu_milli") is not None:
        return None, int(pay["gpu_milli"])
    return None, None


def placement_nodes(site: Site, job_id: str, gpu_type: str, gpus: int) -> int:
    """Nodes a placed gang spans at ``site``: its node shape (``gpus_per_node``) cuts it.

    A gang of at most one node's GPUs is 1 node; a larger gang is ``gpus / gpus_per_node``
    nodes. A site without the GPU type gives 1 (the backend refuses the type itself); a site
    without a node shape is one node per pool (``regions/schema.md``).

    Parameters
    ----------
    site
        The placement's site.
    job_id, gpu_type
        For the message.
    gpus
        Gang size. [-]

    Returns
    -------
    int
        Node count. [-]

    Raises
    ------
    InputError
        The gang is larger than one node and not a whole number of nodes.
    """
    pool = site.gpus.get(gpu_type)
    if pool is None or gpus <= pool.node_gpus:
        return 1
    if gpus % pool.node_gpus:
        raise InputError(
            f"placement of job {job_id!r} at site {site.id!r}: {gpus} {gpu_type} GPUs is larger "
            f"than one node ({pool.node_gpus} per node, gpus_per_node in the catalog) and not a "
            "whole number of nodes, so no cluster can run it; re-plan with the current catalog "
            "(the planner refuses such gangs, GangNotWholeNodes) or correct the site's "
            "gpus_per_node; nothing was dispatched")
    return gpus // pool.node_gpus


def _request_json(req: DispatchRequest) -> str:
    return json.dumps({"plan_id": req.plan_id, "job_id": req.job_id, "piece": req.piece,
                       "site": req.site, "start": _iso(req.start), "end": _iso(req.end),
                       "deadline": _iso(req.deadline), "gpu_type": req.gpu_type,
                       "gpus": req.gpus, "pieces": req.pieces,
                       "checkpoint_overhead_s": req.checkpoint_overhead_s,
                       "nodes": req.nodes, "max_domains": req.max_domains,
                       "payload": req.payload.to_dict() if req.payload is not None else None,
                       "placeholder": req.placeholder, "mig_profile": req.mig_profile,
                       "gpu_milli": req.gpu_milli, "shares_per_gpu": req.shares_per_gpu})


def _request_from_row(row: DispatchRow) -> DispatchRequest:
    d = json.loads(row.request_json)
    payload = JobPayload.from_dict(d.get("payload")) or (
        # an outbox row written before payloads: its shell command
        JobPayload(command=str(d["command"])) if d.get("command") else None)
    if "mig_profile" in d:
        mig_profile, gpu_milli = d["mig_profile"], d.get("gpu_milli")
    else:   # a row written before requests carried the plan's slice: the payload's, as then
        mig_profile = payload.mig_profile if payload is not None else None
        gpu_milli = payload.gpu_milli if payload is not None and not mig_profile else None
    return DispatchRequest(plan_id=d["plan_id"], job_id=d["job_id"], piece=d["piece"],
                           site=d["site"], start=pd.Timestamp(d["start"]).to_pydatetime(),
                           end=pd.Timestamp(d["end"]).to_pydatetime(),
                           deadline=pd.Timestamp(d["deadline"]).to_pydatetime(),
                           gpu_type=d["gpu_type"], gpus=d["gpus"],
                           pieces=d.get("pieces", 0),
                           checkpoint_overhead_s=d.get("checkpoint_overhead_s", 0),
                           nodes=d.get("nodes", 1), max_domains=d.get("max_domains"),
                           payload=payload, placeholder=bool(d.get("placeholder", False)),
                           mig_profile=mig_profile, gpu_milli=gpu_milli,
                           # a row written before the catalog carried shares_per_gpu: the
                           # default the adapters assumed then
                           shares_per_gpu=d.get("shares_per_gpu", DEFAULT_SHARES_PER_GPU))


REFUSED_FINAL = frozenset({str(ReasonCode.REJECTED), str(ReasonCode.NAME_CONFLICT),
                           str(ReasonCode.INVALID_SPEC)})
"""Reasons a unit ended ``Failed`` without reaching its backend: final under its key."""


def _already_dispatched(row: DispatchRow) -> DispatchOutcome:
    """The outcome of a unit another plan dispatched: not submitted again under its key.

    A unit its backend refused (:data:`REFUSED_FINAL`) says so and how to run the job after
    all (a new id): the same id stays the refused unit's, whatever a later plan asks.
    """
    detail = f"dispatched from plan {row.plan_id}; not submitted again"
    if row.state == JobState.FAILED.value and row.reason in REFUSED_FINAL:
        detail = (f"dispatched from plan {row.plan_id} and refused there ({row.reason}: "
                  f"{row.detail}); a refused unit is final under its id: give the job a new "
                  "id to run it")
    o = _outcome(row, "already_dispatched", detail)
    o.reason = str(ReasonCode.ALREADY_DISPATCHED)
    return o


def _pruned(req: DispatchRequest, backend: str, plan_id: str, p: PrunedJob) -> DispatchOutcome:
    """The outcome of a unit whose job the store pruned: final under its id, nothing written."""
    return DispatchOutcome(key=req.key, job_id=req.job_id, piece=req.piece, site=req.site,
                           backend=backend, action="pruned", state=p.state,
                           reason=str(ReasonCode.ALREADY_DISPATCHED), plan_id=plan_id,
                           detail=pruned_sentence(p))


def _outcome(row: DispatchRow, action: str, detail: str = "") -> DispatchOutcome:
    return DispatchOutcome(key=row.key, job_id=row.job_id, piece=row.piece, site=row.site,
                           backend=row.backend, action=action, state=row.state,
                           reason=row.reason, plan_id=row.plan_id, backend_id=row.backend_id,
                           detail=detail or row.detail, duplicates=row.duplicates or "")


PAUSE_ENDINGS = frozenset({"TIMEOUT", "DeadlineExceeded"})
"""How a backend reports a piece stopped at its planned end: Slurm's ``TIMEOUT`` state (the
``--time`` limit; not ``DEADLINE``, a job that could not run before ``--deadline``) and a
Kubernetes Job whose ``Failed`` condition has reason ``DeadlineExceeded``
(``activeDeadlineSeconds``)."""


def _ending(job: BackendJob) -> str:
    """The backend's word for how ``job`` ended, in :data:`PAUSE_ENDINGS` terms."""
    if "TIMEOUT" in (job.raw_state or "").split(","):
        return "TIMEOUT"
    if job.raw_state == "failed" and job.reason == ReasonCode.DEADLINE_PASSED:
        return "DeadlineExceeded"
    return job.raw_state or ""


def mark_paused(row: DispatchRow, ending: str) -> bool:
    """Record a pausing piece stopped at its planned end as ``Succeeded``/``Paused``.

    A piece before a preemptible job's last is meant to end at its time limit (after writing
    its checkpoint); the backend calls that a failure. ``ending`` is the backend's word for how
    the job ended (Slurm state or reason code). Returns True when the row was re-labelled.
    """
    if row.state != str(JobState.FAILED) or ending not in PAUSE_ENDINGS:
        return False
    req = json.loads(row.request_json)
    piece = int(req.get("piece", row.piece))
    pieces = int(req.get("pieces") or piece + 1)
    if piece >= pieces - 1:
        return False
    row.state, row.reason = str(JobState.SUCCEEDED), str(ReasonCode.PAUSED)
    row.detail = (f"piece {piece + 1} of {pieces} stopped at its planned end ({ending}); "
                  f"piece {piece + 2} resumes from the checkpoint")
    return True


def mark_never_ran(row: DispatchRow, job: BackendJob) -> bool:
    """Say that the row's piece ran nothing: released or resumed after its planned stop.

    The backend reads such a run Failed/``DeadlinePassed`` with raw state
    :data:`~carbonsched.adapters.dispatch.base.NEVER_RAN` (Kubernetes: ``parallelism: 0``, or
    a Volcano Job's pods left gated), which :func:`mark_paused` does not take for a pause
    ending: the piece wrote no checkpoint at its planned end and its work is still owed, so
    it stays ``Failed``/``DeadlinePassed`` and the job is a piece short, never
    ``Succeeded``/``Paused``. The detail says so, naming the piece. Returns True when the row
    was re-labelled.
    """
    if row.state != str(JobState.FAILED) or job.raw_state != NEVER_RAN:
        return False
    req = json.loads(row.request_json)
    piece = int(req.get("piece", row.piece))
    pieces = int(req.get("pieces") or piece + 1)
    row.reason = str(ReasonCode.DEADLINE_PASSED)
    row.detail = (f"piece {piece + 1} of {pieces} never ran after its release or resume: "
                  f"{job.detail or 'released after its planned stop'}; its work is still owed "
                  "(not recorded as paused: it did not run to its planned stop)")
    return True


SUSPENDED_WORDS = frozenset({"SUSPENDED", "suspended"})
"""A backend's words for a job stopped in place: Slurm's ``SUSPENDED`` (``scontrol suspend``)
and the Kubernetes adapter's ``suspended`` (a Job or JobSet with ``spec.suspend: true``)."""


def mark_grid_event(row: DispatchRow, job: BackendJob, mark: GridMark | None) -> bool:
    """Show what a grid event did to the row's job, where its backend confirms it.

    A job a grid event paused is recorded ``Paused``/``GridEventPaused`` while its backend
    reports it stopped in place (:data:`SUSPENDED_WORDS`; Slurm reports a suspended job in
    state ``SUSPENDED``, which reads as running, and Kubernetes a suspended Job, which reads as
    dispatched); one it holds, ``Dispatched``/``GridEventHeld`` while not started; one resumed
    or released after the event, ``Running``/``GridEventResumed`` while it runs. The detail
    names the event and when it acted. A backend that says otherwise (the job resumed by hand,
    ended) is shown as it says. Returns True when the row was re-labelled.
    """
    if mark is None or row.state in TERMINAL_STATES:
        return False
    raw = set((job.raw_state or "").split(","))
    at = "" if mark.at is None else f" at {_iso(mark.at)}"
    if mark.mark == "paused" and raw & SUSPENDED_WORDS:
        row.state, row.reason = str(JobState.PAUSED), str(ReasonCode.GRID_EVENT_PAUSED)
        row.detail = (f"paused by grid event {mark.event_id}{at}; resumed at the event's end "
                      f"(backend: {job.raw_state})")
    elif mark.mark == "held" and row.state == str(JobState.DISPATCHED):
        row.reason = str(ReasonCode.GRID_EVENT_HELD)
        row.detail = (f"held by grid event {mark.event_id}{at} past its planned start; "
                      "released at the event's end")
    elif mark.mark in ("resumed", "released") and row.state == str(JobState.RUNNING):
        row.reason = str(ReasonCode.GRID_EVENT_RESUMED)
        row.detail = f"{mark.mark} after grid event {mark.event_id}{at}"
    else:
        return False
    return True


def _note_duplicates(row: DispatchRow, ids: Sequence[str]) -> None:
    """Add ``ids`` to the row's duplicates (sticky: a duplicate once seen stays flagged)."""
    known = [d for d in (row.duplicates or "").split(",") if d]
    new = [d for d in ids if d and d not in known and d != row.backend_id]
    if new:
        row.duplicates = ",".join(known + new)


def _apply(row: DispatchRow, job: BackendJob, now: datetime) -> None:
    row.backend_id = job.backend_id
    row.state = str(job.state)
    row.reason = str(job.reason)
    row.detail = job.resolved or job.detail or ""
    row.submitted_at = row.submitted_at or now
    if job.submitted is not None:
        row.backend_submitted_at = job.submitted
    _note_duplicates(row, job.duplicates)
    if job.actual_start is not None:
        row.actual_start = job.actual_start
        row.times_source = row.times_source or "backend"
    if job.actual_end is not None:
        row.actual_end = job.actual_end
    mark_paused(row, _ending(job))
    mark_never_ran(row, job)
    row.updated_at = now


def dispatch_plan(store: Store, plan_id: str, catalog: Catalog | str | None = None, *,
                  dry_run: bool = False, commit_before: datetime | None = None,
                  clock: Clock = system_clock,
                  adapters: Mapping[str, DispatchAdapter] | None = None,
                  settings: Settings | None = None,
                  sleep: Callable[[float], None] = time.sleep,
                  max_attempts: int | None = None,
                  claimant: Claimant | None = None,
                  placeholder: bool | None = None,
                  stop: threading.Event | None = None) -> DispatchSummary:
    """Dispatch a stored plan's placements to their sites' schedulers, exactly once.

    Parameters
    ----------
    store
        The store holding the plan and the outbox.
    plan_id
        A stored plan id, or ``"latest"``.
    catalog
        The plan's catalog (object, name or path); None loads the one the plan names. A catalog
        other than the plan's is refused.
    dry_run
        Render the exact submissions (sbatch lines, Job manifests) and write nothing; a unit
        its adapter cannot render (:class:`~carbonsched.errors.BackendRejectedError`, e.g. a
        pod template no manifest can be built from) is reported ``rejected`` with the reason.
    commit_before
        Commit only the jobs whose first piece starts before this instant (tz-aware), each
        whole: the next run, with the next plan, decides the rest. None commits the whole
        plan.
    clock
        "Now" (deadline checks, timestamps).
    adapters
        Site id -> adapter; None builds them from the registry and the settings.
    settings
        Dispatch settings; None reads the environment.
    sleep
        Called with each backoff delay. [s]
    max_attempts
        Attempts per unreachable backend in this run; None uses the settings.
    claimant
        Whose claims this run takes (:class:`~carbonsched.dispatch.lease.Claimant`); None makes
        one with ``settings.dispatch_lease_s``.
    placeholder
        Submit a job that names nothing to run as the placeholder ``sleep <planned seconds>``
        (labelled on the backend object and counted in the notes); None uses
        ``settings.dispatch_placeholder``. Without it such a job is not submitted: its outcome
        is ``no_payload`` (reason ``NoPayload``), counted in the notes.
    stop
        Set by the caller to stop the run (a service shutting down): no submission begins
        after it, those in flight finish and are recorded, the units not submitted are
        ``interrupted`` (pending, their claims released, taken by the next run) and a note
        counts them. A signal turned into :class:`~carbonsched.errors.Interrupted` in the
        calling thread does the same, the note added to the interruption. None: only a
        signal stops it.

    Returns
    -------
    DispatchSummary
        One outcome per placement (and per pending intent reconciled from an earlier run).

    Raises
    ------
    InputError
        Unknown plan, catalog mismatch, a naive ``commit_before``, an unknown site, a lease
        shorter than twice a backend's call timeout.
    AdapterContractError
        A site's backend kind has no adapter.
    """
    t0 = time.perf_counter()
    settings = settings or get_settings()
    attempts_max = max_attempts or settings.dispatch_max_attempts
    if commit_before is not None and commit_before.tzinfo is None:
        raise TimeAxisError(f"commit_before {commit_before.isoformat()} is naive; give it "
                            "tz-aware (UTC)")
    plan_id = resolve_plan_id(store, plan_id)
    plan = store.get_plan(plan_id)
    if catalog is None or isinstance(catalog, str | Path):
        catalog = load_catalog(catalog or plan["catalog"])
    if catalog.name != plan["catalog"]:
        raise InputError(f"plan {plan_id} was made for catalog {plan['catalog']!r}, not "
                         f"{catalog.name!r}; dispatch it with --catalog {plan['catalog']}")
    if adapters is None:
        adapters = build_adapters(catalog, settings=settings)
    now = _now(clock)
    summary = DispatchSummary(plan_id=plan_id, dry_run=dry_run, commit_before=commit_before,
                              started_at=now)
    if placeholder is None:
        placeholder = settings.dispatch_placeholder
    requests = plan_requests(plan, catalog, settings.dispatch_deadline_slack_s, placeholder)
    missing = sorted({r.site for r in requests} - set(adapters))
    if missing:
        raise AdapterContractError(f"no dispatch adapter for site(s) {', '.join(missing)} of "
                                   f"plan {plan_id}; give one per site the plan uses")
    no_deadline = sum(1 for p in plan.get("placements", []) if not p.get("deadline"))
    if no_deadline:
        summary.notes.append(
            f"{no_deadline} of {len(requests)} placements carry no deadline: the backend's "
            f"deadline is their planned end + {settings.dispatch_deadline_slack_s:g} s "
            "(CARBONSCHED_DISPATCH_DEADLINE_SLACK_S)")
    for name in sorted({adapters[r.site].name for r in requests}):
        a = next(adapters[r.site] for r in requests if adapters[r.site].name == name)
        if getattr(a, "timezone_source", "") == "fallback":
            summary.notes.append(f"{name}: no host zone found (TZ, /etc/timezone, "
                                 "/etc/localtime): --begin is written in UTC")
    placeholders = sum(1 for r in requests if r.placeholder)
    if placeholders:
        summary.notes.append(
            f"{placeholders} of {len(requests)} placements name nothing to run: each runs the "
            "placeholder 'sleep <planned seconds>' (--placeholder), labelled on the backend")
    # a job in pieces is committed whole once its first piece starts before commit_before (as
    # the rolling planner commits it): a later run never places its later pieces again
    job_start: dict[str, datetime] = {}
    for r in requests:
        job_start[r.job_id] = min(job_start.get(r.job_id, r.start), r.start)

    def uncommitted(req: DispatchRequest) -> bool:
        return commit_before is not None and job_start[req.job_id] >= commit_before

    # only what this run commits is refused for naming nothing to run: an uncommitted job
    # (rolling) stays pending, planned again by the next run
    unrunnable = {r.key: why for r in requests if not uncommitted(r)
                  and (why := payload_problem(r, getattr(adapters[r.site], "kind", "")))
                  is not None}
    if unrunnable:
        summary.notes.append(
            f"{len(unrunnable)} of {len(requests)} placements were not submitted: their job "
            "names nothing the site can run (outcome no_payload; give a script or command, or "
            "dispatch with --placeholder)")
    summary.notes += _late_plan_notes(plan, requests, now, commit_before)

    if not dry_run:
        for a in {a.name: a for a in adapters.values()}.values():
            if getattr(a, "timeout_s", None):
                check_lease_covers(settings.dispatch_lease_s, float(a.timeout_s),  # type: ignore[attr-defined]
                                   f"a call to {a.name}")

    with Session(store.engine, expire_on_commit=False) as s:
        existing = _rows_by_key(s, [r.key for r in requests])
        # read after the rows: prune writes a job's tombstone in the transaction that deletes
        # its units, so a unit missed above is pruned and its tombstone is seen here
        pruned = pruned_jobs(store.engine, {r.job_id for r in requests
                                            if r.key not in existing}, session=s)
        new_rows: list[dict[str, Any]] = []
        for req in requests:
            adapter = adapters[req.site]
            row = existing.get(req.key)
            if row is not None:
                if row.plan_id != plan_id:
                    summary.outcomes.append(_already_dispatched(row))
                elif row.state != JobState.PENDING.value:
                    summary.outcomes.append(_outcome(row, "recorded"))
                continue  # pending rows of this plan are reconciled below
            if req.job_id in pruned:
                summary.outcomes.append(_pruned(req, adapter.name, plan_id,
                                                pruned[req.job_id]))
                continue
            if uncommitted(req):
                summary.outcomes.append(DispatchOutcome(
                    key=req.key, job_id=req.job_id, piece=req.piece, site=req.site,
                    backend=adapter.name, action="not_committed",
                    state=str(JobState.PLANNED), reason=str(ReasonCode.NOT_COMMITTED),
                    plan_id=plan_id, detail=f"starts {_iso(req.start)}, at or after "
                    f"commit_before {_iso(commit_before)}" + (
                        "" if req.start == job_start[req.job_id] else
                        f" (its job's first piece starts {_iso(job_start[req.job_id])})")))
                continue
            if req.key in unrunnable:
                summary.outcomes.append(DispatchOutcome(
                    key=req.key, job_id=req.job_id, piece=req.piece, site=req.site,
                    backend=adapter.name, action="no_payload", state=str(JobState.PLANNED),
                    reason=str(ReasonCode.NO_PAYLOAD), plan_id=plan_id,
                    detail=unrunnable[req.key]))
                continue
            if dry_run:
                try:
                    rendered = adapter.render(req)
                except BackendRejectedError as exc:  # what a submission would be refused for
                    summary.outcomes.append(DispatchOutcome(
                        key=req.key, job_id=req.job_id, piece=req.piece, site=req.site,
                        backend=adapter.name, action="rejected", state=str(JobState.PLANNED),
                        reason=str(ReasonCode.REJECTED), plan_id=plan_id, detail=exc.detail))
                    continue
                summary.outcomes.append(DispatchOutcome(
                    key=req.key, job_id=req.job_id, piece=req.piece, site=req.site,
                    backend=adapter.name, action="dry_run", state=str(JobState.PLANNED),
                    reason=str(ReasonCode.PLACED), plan_id=plan_id, rendered=rendered))
                continue
            late = now + timedelta(seconds=req.duration_s) > req.deadline
            row_values = dict(
                key=req.key, job_id=req.job_id, piece=req.piece, plan_id=plan_id,
                site=req.site, backend=adapter.name,
                state=str(JobState.FAILED if late else JobState.PENDING),
                reason=str(ReasonCode.DEADLINE_PASSED if late else ReasonCode.AWAITING_SUBMIT),
                detail=(f"now {_iso(now)} + {req.duration_s} s is after the deadline "
                        f"{_iso(req.deadline)}") if late else "",
                request_json=_request_json(req), planned_start=req.start, planned_end=req.end,
                attempts=0, created_at=now, updated_at=now, duplicates="")
            new_rows.append(row_values)
            if late:
                summary.outcomes.append(_outcome(DispatchRow(**row_values), "deadline_passed"))
        if dry_run:
            summary.seconds = time.perf_counter() - t0
            return summary
        # the outbox: intents are durable before any submission; a concurrent dispatcher of the
        # same plan may have written some of them already (then its rows stand)
        _insert_new(s, new_rows)
        withdrawn = _withdraw_pieces_of_other_plans(s, new_rows, plan_id)
        gone = {o.key for o in withdrawn}
        summary.outcomes = [o for o in summary.outcomes if o.key not in gone] + withdrawn
        s.commit()

    committed = [r.key for r in requests if not uncommitted(r)]
    claimant = claimant or Claimant(store, settings.dispatch_lease_s)
    _drive_pending(store, adapters, summary, clock, settings, sleep, attempts_max, claimant,
                   wait_keys=committed, stop=stop)
    _settle_outcomes(store, summary, committed, plan_id, claimant)
    summary.seconds = time.perf_counter() - t0
    return summary


def _rows_by_key(s: Session, keys: Sequence[str]) -> dict[str, DispatchRow]:
    out: dict[str, DispatchRow] = {}
    for i in range(0, len(keys), 5000):
        out.update({r.key: r for r in s.scalars(select(DispatchRow).where(
            DispatchRow.key.in_(list(keys[i:i + 5000]))))})
    return out


def _pending_keys(store: Store, keys: Sequence[str]) -> list[str]:
    """Those of ``keys`` whose intent is still pending."""
    out: list[str] = []
    with Session(store.engine) as s:
        for i in range(0, len(keys), 5000):
            out += s.scalars(select(DispatchRow.key).where(
                DispatchRow.key.in_(list(keys[i:i + 5000])),
                DispatchRow.state == JobState.PENDING.value)).all()
    return out


def _withdraw_pieces_of_other_plans(s: Session, rows: Sequence[Mapping[str, Any]],
                                    plan_id: str) -> list[DispatchOutcome]:
    """Take back this plan's new intents of later pieces of a job another plan dispatched.

    A job is dispatched from one plan (docs/dispatch.md): the row of its first piece
    (``<job>#0``, unique) is the job's claim. Two plans may split a job differently: one that
    dispatched it whole (``J#0``) and a later one in two pieces (``J#0``, ``J#1``) share only
    the first key, so the later plan's ``J#1`` is a new key. Its intent, written in the same
    transaction as the job's first piece, is deleted when that piece's row belongs to another
    plan. On PostgreSQL a concurrent insert of the same first key waits for the other
    transaction, so the row read here is the committed claim; SQLite serialises writers.

    Parameters
    ----------
    s
        The session the intents were inserted in (not yet committed).
    rows
        The intents this run inserted (``key``, ``job_id``, ``piece``, ...).
    plan_id
        This run's plan.

    Returns
    -------
    list of DispatchOutcome
        One ``already_dispatched`` outcome per withdrawn intent (pending, or recorded failed
        as past its deadline), to replace any outcome this run gave it.
    """
    later = {}
    for r in rows:
        if r["piece"] > 0:
            later.setdefault(r["job_id"], []).append(r["key"])
    if not later:
        return []
    first = _rows_by_key(s, [dispatch_key(j, 0) for j in later])
    claimed = {j: c for j in later if (c := first.get(dispatch_key(j, 0))) is not None
               and c.plan_id != plan_id}
    # one query for the later pieces of every job another plan claimed (not one per job)
    mine = _rows_by_key(s, [k for j in claimed for k in later[j]])
    out = []
    for job_id, claim in claimed.items():
        keys = later[job_id]
        for k in keys:
            row = mine.get(k)
            # written by this run (pending, or failed as past its deadline), never submitted
            if row is None or row.plan_id != plan_id or row.submit_attempted_at is not None:
                continue
            o = _outcome(row, "already_dispatched", f"job dispatched from plan "
                         f"{claim.plan_id} ({claim.key}); this plan's piece not submitted")
            o.reason = str(ReasonCode.ALREADY_DISPATCHED)
            out.append(o)
            s.delete(row)
    s.flush()
    return out


def _insert_new(s: Session, rows: Sequence[Mapping[str, Any]]) -> None:
    """Insert intents, leaving any key already there as it is (``ON CONFLICT DO NOTHING``)."""
    if not rows:
        return
    dialect = s.get_bind().dialect.name
    if dialect in ("postgresql", "sqlite"):
        if dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as dialect_insert
        else:
            from sqlalchemy.dialects.sqlite import insert as dialect_insert
        stmt = dialect_insert(DispatchRow).on_conflict_do_nothing(index_elements=["key"])
        for i in range(0, len(rows), 1000):
            s.execute(stmt, list(rows[i:i + 1000]))
        return
    for r in rows:  # other databases: one savepoint per intent
        try:
            with s.begin_nested():
                s.execute(insert(DispatchRow), [dict(r)])
        except IntegrityError:
            continue


def _drive_pending(store: Store, adapters: Mapping[str, DispatchAdapter],
                   summary: DispatchSummary, clock: Clock, settings: Settings,
                   sleep: Callable[[float], None], attempts_max: int, claimant: Claimant,
                   wait_keys: Sequence[str] = (), stop: threading.Event | None = None) -> None:
    """Claim, reconcile and submit every pending intent of the adapters' sites.

    Unreachable backends are retried with backoff; then, for ``wait_keys`` that another live
    dispatcher holds, this run waits (up to ``settings.dispatch_wait_s``) for them to be
    recorded, taking over any whose claim lapses.

    Asked to stop — ``stop`` set (a service shutting down), or an interruption of this thread
    (:class:`~carbonsched.errors.Interrupted`) — no submission begins after it; those in flight
    finish and are recorded, every claim is released, and a note says how many units are on
    their backend and how many are left pending for the next run (in ``summary.notes``, and
    added to the interruption, whose line the CLI prints).
    """
    outcomes: dict[str, DispatchOutcome] = {}
    sites = list(adapters)
    stop = stop or threading.Event()
    with claimant.heartbeat():
        try:
            for attempt in range(attempts_max):
                if stop.is_set():
                    break
                claim = claimant.claim(sites)
                if not claim.ids:
                    break
                if attempt > 0:
                    delay = settings.dispatch_backoff_s * 2 ** (attempt - 1)
                    summary.retries += 1
                    sleep(delay)
                _drive_claim(store, adapters, claim, clock, settings, claimant, outcomes,
                             summary, stop)
                if all(o.action != "unavailable" for o in outcomes.values()):
                    break
            if wait_keys:
                # the plan's units still pending that this run did not give up on: another
                # dispatcher claims them (or is in the middle of claiming them); wait for them
                # to be recorded, and take over any whose claim lapses
                deadline = time.monotonic() + settings.dispatch_wait_s
                poll = min(1.0, settings.dispatch_lease_s / 10)
                while time.monotonic() < deadline and not stop.is_set():
                    left = [k for k in _pending_keys(store, wait_keys)
                            if k not in outcomes or outcomes[k].action != "unavailable"]
                    if not left:
                        break
                    claim = claimant.claim(sites, keys=left)
                    if claim.ids:
                        _drive_claim(store, adapters, claim, clock, settings, claimant,
                                     outcomes, summary, stop)
                        continue
                    stop.wait(max(0.05, min(poll, deadline - time.monotonic())))
        except BaseException as exc:
            if not isinstance(exc, Exception):   # interrupted (a signal): say what is left
                stop.set()
                exc.add_note(stopped_note(outcomes.values()))
            raise
    if stop.is_set():
        outcomes.update(_not_driven(store, claimant, sites, wait_keys, outcomes))
        summary.notes.append(stopped_note(outcomes.values()))
    if claimant.missed_beats:
        summary.notes.append(f"{claimant.missed_beats} lease renewal(s) failed (the database "
                             "did not answer); claims are renewed again before each submission")
    # an intent driven now replaces what the sorting step said about the same key
    summary.outcomes = [o for o in summary.outcomes if o.key not in outcomes]
    summary.outcomes.extend(outcomes.values())


def _not_driven(store: Store, claimant: Claimant, sites: Sequence[str],
                wait_keys: Sequence[str], outcomes: Mapping[str, DispatchOutcome]
                ) -> dict[str, DispatchOutcome]:
    """The pending units a run asked to stop did not drive, each ``interrupted``.

    ``wait_keys`` (a plan's committed units), else every pending unit of ``sites``; a unit
    with an outcome already, or that another live dispatcher holds, is left out.
    """
    with Session(store.engine) as s:
        if wait_keys:
            rows = [r for r in _rows_by_key(s, list(wait_keys)).values()
                    if r.state == JobState.PENDING.value]
        else:
            rows = list(s.scalars(select(DispatchRow).where(
                DispatchRow.state == JobState.PENDING.value, DispatchRow.site.in_(list(sites)))))
    rows = [r for r in rows if r.key not in outcomes]
    if not rows:
        return {}
    held = {h.key for h in claimant.held_elsewhere([r.key for r in rows])}
    return {r.key: _outcome(r, "interrupted", _NOT_BEGUN) for r in rows if r.key not in held}


def stopped_note(outcomes: Collection[DispatchOutcome]) -> str:
    """What a dispatch run asked to stop leaves: units on their backend, units still pending.

    Parameters
    ----------
    outcomes
        The outcomes of the run's units: those it drove before it stopped, and those the stop
        kept it from driving (``interrupted``, :func:`_not_driven`).

    Returns
    -------
    str
        ``dispatch stopped: 2 units on their backend (submitted or found before the stop; a
        submission in flight finished and was recorded), 18 left pending for the next run
        (18 interrupted)``.
    """
    on = sum(1 for o in outcomes if o.action in ("submitted", "reconciled"))
    left: dict[str, int] = {}
    for o in outcomes:
        if o.action in INCOMPLETE:
            left[o.action] = left.get(o.action, 0) + 1
    n_left = sum(left.values())
    why = ", ".join(f"{n} {a}" for a, n in sorted(left.items()))
    return (f"dispatch stopped: {on} unit{'s' * (on != 1)} on their backend (submitted or found "
            "before the stop; a submission in flight finished and was recorded), "
            f"{n_left} left pending for the next run" + (f" ({why})" if why else ""))


def _drive_claim(store: Store, adapters: Mapping[str, DispatchAdapter], claim: Claim,
                 clock: Clock, settings: Settings, claimant: Claimant,
                 outcomes: dict[str, DispatchOutcome], summary: DispatchSummary,
                 stop: threading.Event) -> None:
    """Drive the claimed rows, one thread per backend.

    An interruption of this (the main) thread — a signal turned into
    :class:`~carbonsched.errors.Interrupted`, ``KeyboardInterrupt`` — sets ``stop``: no
    submission begins after it, the submissions in flight finish and are recorded
    (:func:`_submit_rows`), what each backend's pass did is merged into ``outcomes`` (the units
    not submitted ``interrupted``), and the interruption goes on up.
    """
    with Session(store.engine) as s:
        rows = [(r.id, r.site) for r in s.execute(select(DispatchRow.id, DispatchRow.site).where(
            DispatchRow.id.in_(claim.ids)))]
    groups: dict[str, list[int]] = {}
    for rid, site in rows:
        groups.setdefault(adapters[site].name, []).append(rid)
    site_of = {adapters[site].name: site for _, site in rows}

    def pending_rows(ids: Sequence[int], action: str, detail: str) -> list[DispatchOutcome]:
        with Session(store.engine) as s:   # what the pass recorded before stands
            return [_outcome(r, action, detail)
                    if r.state == JobState.PENDING.value else _outcome(r, "recorded")
                    for r in s.scalars(select(DispatchRow).where(DispatchRow.id.in_(ids)))]

    def take(f: Future[list[DispatchOutcome]]) -> None:
        try:
            done = f.result()
        except (SQLAlchemyError, StoreUnavailableError, BackendError):
            raise   # the store's outage, or a backend's error an operator must fix
        except Exception as exc:  # one adapter's fault holds back only its own units
            name, ids = futs[f]
            done = pending_rows(ids, "unavailable", str(unexpected(name, "a dispatch pass", exc)))
        for o in done:
            outcomes[o.key] = o

    pool = ThreadPoolExecutor(max_workers=max(1, len(groups)))
    futs: dict[Future[list[DispatchOutcome]], tuple[str, list[int]]] = {}
    taken: set[Future[list[DispatchOutcome]]] = set()
    try:
        futs = {pool.submit(_drive_backend, store, adapters[site_of[name]], ids, clock,
                            settings.dispatch_workers, claimant, claim.taken_over, stop):
                (name, ids) for name, ids in groups.items()}
        for f in as_completed(futs):
            take(f)
            taken.add(f)
    except BaseException as exc:
        if isinstance(exc, Exception):
            pool.shutdown(wait=True)
            raise
        # asked to stop (a signal, in this thread): no submission begins from now on; those in
        # flight are waited for (a second signal ends the process at once) and recorded
        stop.set()
        pool.shutdown(wait=True, cancel_futures=True)
        for f, (_name, ids) in futs.items():
            if f in taken:
                continue
            try:
                if f.cancelled():
                    raise RuntimeError("not started")
                take(f)
            except Exception:  # noqa: BLE001 - the interruption is what goes up; rows say
                with contextlib.suppress(SQLAlchemyError):
                    for o in pending_rows(ids, "interrupted", _NOT_BEGUN):
                        outcomes[o.key] = o
        raise
    pool.shutdown(wait=True)
    dup = [o for o in outcomes.values() if o.duplicates]
    note = [n for n in summary.notes if n.startswith("duplicates on the backend:")]
    if dup:
        text = ("duplicates on the backend: " + "; ".join(
            f"{o.key} is {o.backend_id} and also {o.duplicates}" for o in dup[:10])
            + (f" (and {len(dup) - 10} more)" if len(dup) > 10 else "")
            + "; `carbonsched status` lists them: cancel the extra jobs")
        summary.notes = [n for n in summary.notes if n not in note] + [text]


def _settle_outcomes(store: Store, summary: DispatchSummary, keys: Sequence[str], plan_id: str,
                     claimant: Claimant) -> None:
    """Give every committed key of the plan an outcome from its row as it is now.

    A key this run did not drive (another dispatcher claimed it) is ``recorded`` when it is no
    longer pending, ``held_elsewhere`` when another live dispatcher still holds it, and
    ``already_dispatched`` when a concurrent run of an earlier plan wrote it.
    """
    have = {o.key: o for o in summary.outcomes}
    todo = [k for k in keys if k not in have or have[k].action in ("held_elsewhere",
                                                                     "lost_claim")]
    if not todo:
        return
    held = {h.key: h for h in claimant.held_elsewhere(todo)}
    with Session(store.engine) as s:
        rows = _rows_by_key(s, todo)
    fresh: dict[str, DispatchOutcome] = {}
    for k in todo:
        row = rows.get(k)
        if row is None:
            continue
        if row.plan_id != plan_id:
            o = _already_dispatched(row)
        elif row.state != JobState.PENDING.value:
            o = _outcome(row, "recorded")
        elif k in held:
            o = _outcome(row, "held_elsewhere", f"claimed by {held[k].owner} until "
                         f"{_iso(held[k].expires_at)}; not submitted by this run")
        elif k in have:
            o = have[k]
        else:
            o = _outcome(row, "unavailable", row.detail or "still pending: run dispatch again")
        fresh[k] = o
    summary.outcomes = [o for o in summary.outcomes if o.key not in fresh]
    summary.outcomes.extend(fresh.values())
    n_held = sum(1 for o in fresh.values() if o.action == "held_elsewhere")
    if n_held:
        summary.notes.append(
            f"{n_held} placement(s) are still being dispatched by another dispatcher (claims "
            "named in the outcomes); run `carbonsched status` later, or dispatch again after "
            "its claims expire")


def _late_plan_notes(plan: Mapping[str, Any], requests: Sequence[DispatchRequest], now: datetime,
                     commit_before: datetime | None) -> list[str]:
    """Notes for a plan dispatched after its time.

    Placements that can no longer meet their deadline (recorded ``DeadlinePassed``, never
    submitted) and placements whose planned start has passed (the backend starts them at once,
    so they run in other hours than planned).
    """
    todo = [r for r in requests if commit_before is None or r.start < commit_before]
    if not todo:
        return []
    hopeless = sum(1 for r in todo if now + timedelta(seconds=r.duration_s) > r.deadline)
    late = sum(1 for r in todo if r.start < now
               and now + timedelta(seconds=r.duration_s) <= r.deadline)
    notes = []
    when = f"(now {_iso(now)}; the plan is for {plan.get('date', '?')})"
    if hopeless:
        notes.append(f"{hopeless} of {len(todo)} placements can no longer end by their deadline "
                     f"{when}: they are recorded DeadlinePassed and not submitted; plan again "
                     "for the current day")
    if late:
        notes.append(f"{late} of {len(todo)} placements were planned to start before now "
                     f"{when}: the backend starts them at once, in other hours than the plan "
                     "priced")
    return notes


UNREADABLE = (CarbonschedError, ValueError, KeyError, TypeError)
"""What :func:`_request_from_row` raises for a stored request this version's schema refuses."""


def _late(row: DispatchRow, now: datetime, req: DispatchRequest | None = None) -> str:
    """Why the intent can no longer end by its deadline ("" when it still can).

    ``req``: the row's request when the caller has read it already; else it is read here, and
    a stored request that no longer reads back is not late ("": the submission path refuses
    it alone, ``InvalidSpec``).
    """
    if req is None:
        try:
            req = _request_from_row(row)
        except UNREADABLE:
            return ""
    if now + timedelta(seconds=req.duration_s) <= req.deadline:
        return ""
    late = f"now {_iso(now)} + {req.duration_s} s is after the deadline {_iso(req.deadline)}"
    if row.submit_attempted_at is None:
        return f"{late}; not submitted"
    return (f"{late}; the submission attempted at {_iso(row.submit_attempted_at)} is in neither "
            "the backend's job list nor its records (a backend that keeps no records forgets a "
            "job soon after it ends); not submitted again")


def _drive_backend(store: Store, adapter: DispatchAdapter, row_ids: Sequence[int],
                   clock: Clock, workers: int, claimant: Claimant,
                   taken_over: Collection[int] = (),
                   stop: threading.Event | None = None) -> list[DispatchOutcome]:
    """One backend's pass over claimed rows.

    Find the keys already on the backend (its current list, then — for rows whose
    ``submit_attempted_at`` says a submission may have been made — its accounting records),
    record those, then submit the rest, each only after renewing its claim, and record each
    result; finally ask the backend once more to learn its submit times and any duplicate.
    A backend that cannot be reached (:class:`BackendUnavailableError`, a host without its
    configuration included) gets nothing submitted: its rows stay pending as ``unavailable``
    and the next run retries them. A row whose submission may already have reached the
    backend (``submit_attempted_at`` set) stays pending even past its deadline: only the
    backend can say whether that job exists. Once ``stop`` is set no submission begins (see
    :func:`_submit_rows`); the rows not submitted are ``interrupted``, their claims released.
    """
    out: list[DispatchOutcome] = []
    stop = stop or threading.Event()
    try:
        with Session(store.engine, expire_on_commit=False) as s:
            rows = {r.key: r for r in s.scalars(select(DispatchRow).where(
                DispatchRow.id.in_(list(row_ids))).order_by(DispatchRow.id))}
            if stop.is_set():   # asked to stop before this backend's pass began
                return [_outcome(r, "interrupted", _NOT_BEGUN) for r in rows.values()]
            unknown: dict[str, str] = {}
            try:
                try:
                    found = adapter.status(list(rows))
                except Exception as exc:
                    raise unexpected(adapter.name, "status", exc) from exc
                maybe = [r for k, r in rows.items()
                         if k not in found and r.submit_attempted_at is not None]
                if maybe and isinstance(adapter, KeepsAccounting):
                    try:
                        found.update(adapter.accounting([
                            SubmittedUnit(r.key, None, r.submit_attempted_at) for r in maybe
                            if r.submit_attempted_at is not None]))
                    except Exception as exc:
                        if isinstance(exc, BackendUnavailableError):
                            raise   # an outage (the store's too): this backend's pass waits
                        exc = unexpected(adapter.name, "accounting", exc, passes=(BackendError,))
                        unknown = {r.key: f"a submission attempted at "
                                   f"{_iso(r.submit_attempted_at)} may have reached "
                                   f"{adapter.name}, whose records could not be read ({exc}); "
                                   "not submitted again until they can" for r in maybe}
            except BackendUnavailableError as exc:
                now = _now(clock)
                for r in rows.values():
                    r.attempts += 1
                    r.updated_at = now
                    # past its deadline and never attempted: it can no longer run in time, stop
                    # retrying it; attempted: it may be on the backend, so it waits for the
                    # backend's answer (found by key, or not found and then failed as late)
                    attempted = r.submit_attempted_at
                    late = "" if attempted is not None else _late(r, now)
                    if late:
                        r.state, r.reason, r.detail = (str(JobState.FAILED),
                                                       str(ReasonCode.DEADLINE_PASSED), late)
                        out.append(_outcome(r, "deadline_passed"))
                    else:
                        r.reason = str(ReasonCode.BACKEND_UNAVAILABLE)
                        r.detail = (str(exc) if attempted is None else
                                    f"a submission attempted at {_iso(attempted)} may have "
                                    f"reached {adapter.name}, which cannot be asked now "
                                    f"({exc}); not submitted again until it can")
                        out.append(_outcome(r, "unavailable"))
                s.commit()
                return out
            now = _now(clock)
            for key, job in found.items():
                row = rows[key]
                _apply(row, job, now)
                how = ("taken over from a dispatcher whose claim lapsed; "
                       if row.id in taken_over else "")
                out.append(_outcome(row, "reconciled", f"{how}found on {adapter.name} by key "
                                    f"as {job.backend_id}" + (f" ({job.detail})" if job.detail
                                                              else "")))
            s.commit()
            for key, why in unknown.items():
                r = rows[key]
                r.reason, r.detail, r.updated_at = str(ReasonCode.BACKEND_UNAVAILABLE), why, now
                out.append(_outcome(r, "unavailable"))
            todo = [r for k, r in rows.items() if k not in found and k not in unknown]
            settle = float(getattr(adapter, "submit_settle_s", 0.0) or 0.0)
            if todo and settle:
                db_now = claimant.db_now()
                waiting = [r for r in todo if r.submit_attempted_at is not None
                           and db_now < r.submit_attempted_at + timedelta(seconds=settle)]
                for r in waiting:
                    r.reason = str(ReasonCode.BACKEND_UNAVAILABLE)
                    r.detail = (f"a submission attempted at {_iso(r.submit_attempted_at)} may "
                                f"still reach {adapter.name}: not found by key yet; looked up "
                                f"again, and submitted only if still absent, after {settle:g} s")
                    r.updated_at = now
                    out.append(_outcome(r, "unavailable"))
                todo = [r for r in todo if r not in waiting]
                s.commit()
            if not todo:
                return out
            submitted = _submit_rows(s, adapter, todo, clock, workers, claimant, out, stop)
            if submitted:
                _learn_backend_records(s, adapter, submitted, out)
    finally:
        claimant.release(row_ids)
    return out


_LOST = "lost"
_STOPPED = "stopped"
_NOT_BEGUN = ("the dispatcher was asked to stop before this unit's submission began: not "
              "submitted, left pending for the next run")


class _Unreadable(Exception):
    """A stored request that no longer reads back (the detail)."""


def _submit_rows(s: Session, adapter: DispatchAdapter, todo: Sequence[DispatchRow],
                 clock: Clock, workers: int, claimant: Claimant,
                 out: list[DispatchOutcome], stop: threading.Event) -> list[DispatchRow]:
    """Submit ``todo`` (in waves by piece), each after renewing its claim; record each result.

    Once ``stop`` is set no submission begins: a worker checks it right before it claims the
    unit's side effect (:meth:`~carbonsched.dispatch.lease.Claimant.begin_side_effect`), the
    units still queued are cancelled (``shutdown(cancel_futures=True)``) and later waves are
    not started; each of those is reported ``interrupted`` and left pending (the caller
    releases its claim). A submission already begun is waited for and recorded: a side effect
    is never left between its claim and its record.
    """
    def submit(row: DispatchRow) -> tuple[DispatchRow, BackendJob | Exception | str]:
        try:
            req = _request_from_row(row)
        except UNREADABLE as exc:
            # a stored request this version's schema refuses; not on the backend by key (the
            # pass looked it up first), and it cannot be submitted
            return row, _Unreadable(
                f"its stored request no longer reads back ({type(exc).__name__}: {exc}); it is "
                f"not on {adapter.name} and cannot be submitted; submit the job again as the "
                "schema asks, under a new id (this unit is final)")
        late = _late(row, _now(clock), req)
        if late:
            return row, late
        if stop.is_set():   # asked to stop: this unit's side effect is not begun
            return row, _STOPPED
        if not claimant.begin_side_effect(row.id):
            return row, _LOST
        try:
            return row, adapter.submit(req)
        except BackendRejectedError as exc:
            return row, exc
        except Exception as exc:  # unreachable, or a fault: this unit waits, the pass goes on
            return row, unexpected(adapter.name, f"submit of {row.key}", exc)

    submitted: list[DispatchRow] = []
    not_begun: list[DispatchRow] = []
    pending_commit = 0

    def finished() -> Iterator[tuple[DispatchRow, BackendJob | Exception | str]]:
        """Each result as it arrives; once ``stop`` is set, the rest without starting any."""
        # in waves by piece: a resumed piece is submitted after its predecessor, so the backend
        # can chain it (Slurm --dependency) to the job it already holds
        waves = [[r for r in todo if r.piece == k] for k in sorted({r.piece for r in todo})]
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for wave in waves:
                if stop.is_set():
                    not_begun.extend(wave)
                    continue
                futs = {pool.submit(submit, r): r for r in wave}
                seen: set[Future[Any]] = set()
                for fut in as_completed(futs):
                    seen.add(fut)
                    yield fut.result()
                    if stop.is_set():
                        break
                if len(seen) == len(futs):
                    continue
                # stopped: the queued are cancelled (as_completed never yields a cancelled
                # future); a submission already running is waited for and recorded
                pool.shutdown(wait=False, cancel_futures=True)
                for fut, row in futs.items():
                    if fut in seen:
                        continue
                    if fut.cancelled():
                        not_begun.append(row)
                    else:
                        yield fut.result()

    for row, res in finished():
        now = _now(clock)
        if res is _STOPPED:
            not_begun.append(row)
            continue
        if res is _LOST:  # another dispatcher took the claim over: it decides this unit
            out.append(_outcome(row, "lost_claim", "this run's claim was taken over before "
                                "the submission; not submitted by this run"))
            continue
        row.attempts += 1
        if isinstance(res, _Unreadable):
            row.state, row.reason = str(JobState.FAILED), str(ReasonCode.INVALID_SPEC)
            row.detail, row.updated_at = str(res), now
            out.append(_outcome(row, "rejected"))
        elif isinstance(res, str):  # a retried intent whose deadline has passed
            row.state, row.reason = str(JobState.FAILED), str(ReasonCode.DEADLINE_PASSED)
            row.detail, row.updated_at = res, now
            out.append(_outcome(row, "deadline_passed"))
        elif isinstance(res, BackendUnavailableError):
            row.reason, row.detail, row.updated_at = (
                str(ReasonCode.BACKEND_UNAVAILABLE), str(res), now)
            out.append(_outcome(row, "unavailable"))
        elif isinstance(res, BackendRejectedError):
            row.state = str(JobState.FAILED)
            row.reason = str(ReasonCode.NAME_CONFLICT if res.conflict
                             else ReasonCode.REJECTED)
            row.detail, row.updated_at = res.detail, now
            out.append(_outcome(row, "rejected"))
        else:
            _apply(row, res, now)
            out.append(_outcome(row, "reconciled" if res.resolved else "submitted"))
            submitted.append(row)
        pending_commit += 1
        if pending_commit >= 200:
            s.commit()
            pending_commit = 0
    s.commit()
    for row in sorted(not_begun, key=lambda r: r.id):
        out.append(_outcome(row, "interrupted", _NOT_BEGUN))
    return submitted


def _learn_backend_records(s: Session, adapter: DispatchAdapter, rows: Sequence[DispatchRow],
                           out: list[DispatchOutcome]) -> None:
    """Ask the backend once about what was just submitted: its submit times and duplicates.

    The backend's own submit time bounds later accounting queries; a key found twice (a
    submission the backend made twice) is flagged. A backend that does not answer now leaves
    the rows as recorded (the next status refresh learns the same).
    """
    try:
        found = adapter.status([r.key for r in rows])
    except BackendError:
        return
    except Exception as exc:
        unexpected(adapter.name, "status after submitting", exc)   # logged; the store's raise
        return
    by_key = {o.key: o for o in out}
    for r in rows:
        job = found.get(r.key)
        if job is None:
            continue
        if job.submitted is not None:
            r.backend_submitted_at = job.submitted
        _note_duplicates(r, [job.backend_id, *job.duplicates])
        if r.key in by_key:
            by_key[r.key].duplicates = r.duplicates or ""
    s.commit()


def reconcile(store: Store, catalog: Catalog | str, *, clock: Clock = system_clock,
              adapters: Mapping[str, DispatchAdapter] | None = None,
              settings: Settings | None = None,
              sleep: Callable[[float], None] = time.sleep,
              max_attempts: int | None = None,
              claimant: Claimant | None = None,
              stop: threading.Event | None = None) -> DispatchSummary:
    """Finish every pending intent of the catalog's sites (the service calls this at start-up).

    Only intents no live dispatcher holds are driven; ``stop`` as for :func:`dispatch_plan`.
    """
    settings = settings or get_settings()
    if isinstance(catalog, str | Path):
        catalog = load_catalog(catalog)
    adapters = adapters if adapters is not None else build_adapters(catalog, settings=settings)
    summary = DispatchSummary(plan_id="", dry_run=False, commit_before=None,
                              started_at=_now(clock))
    t0 = time.perf_counter()
    _drive_pending(store, adapters, summary, clock, settings, sleep,
                   max_attempts or settings.dispatch_max_attempts,
                   claimant or Claimant(store, settings.dispatch_lease_s), stop=stop)
    summary.seconds = time.perf_counter() - t0
    return summary


def release_due(store: Store, catalog: Catalog | str, *, clock: Clock = system_clock,
                adapters: Mapping[str, DispatchAdapter] | None = None) -> list[str]:
    """Release held jobs (suspended Kubernetes Jobs) whose planned start has come.

    A unit a grid event holds or pauses (:func:`carbonsched.store.grid_events.held_keys`) is
    left held until the event releases it.

    A release that fails (a cluster unreachable, a patch refused) is recorded in that row's
    detail, headed by its reason (``BackendUnavailable`` for an outage or an adapter's fault,
    else ``ReleaseFailed``), and tried again in the next pass; it never holds back the other
    rows.

    Then, on backends where a released job may start later than its release
    (:class:`~carbonsched.adapters.dispatch.base.KeepsPlannedStop`: Kueue's queue, Volcano's
    scheduling of a gang), every released unit not over is bounded by its planned stop
    (:meth:`~carbonsched.adapters.dispatch.kubernetes.KubernetesAdapter.keep_planned_stops`):
    one admitted after a wait ends at its stop, never that wait later; what was patched is
    written to the row's detail, and a failure there is recorded and tried again likewise
    (with the same reasons).

    Returns
    -------
    list of str
        Keys released now.
    """
    if isinstance(catalog, str | Path):
        catalog = load_catalog(catalog)
    adapters = adapters if adapters is not None else build_adapters(catalog)
    now = _now(clock)
    released = []
    keeping = sorted(site for site, a in adapters.items() if isinstance(a, KeepsPlannedStop))
    with Session(store.engine) as s:
        # one read serves the pass: the held units due (to release) and, on the backends that
        # keep planned stops, the released ones not over (to bound: Dispatched or Running)
        rows = s.scalars(select(DispatchRow).where(
            or_(DispatchRow.state == JobState.DISPATCHED.value,
                and_(DispatchRow.state == JobState.RUNNING.value,
                     DispatchRow.site.in_(keeping))),
            DispatchRow.planned_start <= now, DispatchRow.site.in_(list(adapters)))).all()
        # a grid event holding (or pausing) a unit keeps it held past its planned start; the
        # event's release (carbonsched.dispatch.grid) lets it go; nor is it bounded (its
        # event's resume bounds it)
        held = held_keys(store, [r.key for r in rows]) if rows else set()
        failed: set[str] = set()
        down: set[str] = set()
        for r in rows:
            adapter = adapters[r.site]
            if (r.state != JobState.DISPATCHED.value or not isinstance(adapter, ReleasesHeld)
                    or r.key in held):
                continue
            try:
                done = adapter.release(r.key)
            except Exception as exc:
                exc = unexpected(adapter.name, f"release of {r.key}", exc,
                                 passes=(BackendError, InputError))
                # one backend's failure holds back only its own rows: the others are released in
                # this pass, and this one is tried again in the next (the detail says so)
                reason = (ReasonCode.BACKEND_UNAVAILABLE
                          if isinstance(exc, BackendUnavailableError)
                          else ReasonCode.RELEASE_FAILED)
                r.detail = (f"{reason}: release at the planned start failed at {_iso(now)}, "
                            f"retried in the next release pass: {exc}")
                r.updated_at = now
                failed.add(r.key)
                if isinstance(exc, BackendUnavailableError):
                    down.add(adapter.name)
                continue
            if done:
                released.append(r.key)
                r.detail = f"released at {_iso(now)}"
                r.updated_at = now
        # a backend found down in this pass is not asked again; a failed release keeps its detail
        _keep_planned_stops({site: adapters[site] for site in keeping
                             if adapters[site].name not in down},
                            [r for r in rows if r.key not in held and r.key not in failed], now)
        s.commit()
    return released


def _keep_planned_stops(keeping: Mapping[str, DispatchAdapter], rows: Sequence[DispatchRow],
                        now: datetime) -> None:
    """Bound the released units not over by their planned stops (:func:`release_due`).

    ``keeping`` maps each site whose backend needs it (:class:`KeepsPlannedStop`, not found
    down in this pass) to its adapter; ``rows`` are the pass's units due, Dispatched or Running,
    without those a grid event holds or whose release failed in this pass. One call per
    backend; one backend's failure is recorded on its own rows only.
    """
    groups: dict[str, list[DispatchRow]] = {}
    for r in rows:
        if r.site in keeping:
            groups.setdefault(keeping[r.site].name, []).append(r)
    for group in groups.values():
        adapter = keeping[group[0].site]
        try:
            done = adapter.keep_planned_stops([r.key for r in group])
        except Exception as exc:
            exc = unexpected(adapter.name, "keep_planned_stops", exc,
                             passes=(BackendError, InputError))
            reason = (ReasonCode.BACKEND_UNAVAILABLE
                      if isinstance(exc, BackendUnavailableError) else ReasonCode.RELEASE_FAILED)
            for r in group:
                r.detail = (f"{reason}: bounding by its planned stop failed at {_iso(now)}, "
                            f"retried in the next release pass: {exc}")
            continue
        for r in group:
            if r.key in done:
                r.detail = f"bounded by its planned stop at {_iso(now)}: {done[r.key]}"
                r.updated_at = now


def refresh_status(store: Store, catalog: Catalog | str, *, plan_id: str | None = None,
                   clock: Clock = system_clock,
                   adapters: Mapping[str, DispatchAdapter] | None = None) -> pd.DataFrame:
    """Record what each backend reports for the intents not yet over, then return the outbox.

    :func:`refresh_backends`, then :func:`dispatch_records` of ``plan_id`` (every row when
    ``None``: for ``carbonsched status``; a loop that only records calls
    :func:`refresh_backends`, whose cost does not grow with the outbox's history).
    """
    refresh_backends(store, catalog, plan_id=plan_id, clock=clock, adapters=adapters)
    return dispatch_records(store, plan_id)


LIVE = tuple(s.value for s in JobState if s.value not in TERMINAL_STATES)
"""The outbox states of a row not yet over (every state but
:data:`~carbonsched.domain.TERMINAL_STATES`): an ``IN`` list on the indexed ``state`` column,
where ``NOT IN`` would scan every row ever dispatched."""


def refresh_backends(store: Store, catalog: Catalog | str, *, plan_id: str | None = None,
                     clock: Clock = system_clock,
                     adapters: Mapping[str, DispatchAdapter] | None = None) -> int:
    """Record what each backend reports for the intents not yet over (of ``plan_id``, or all).

    Actual start and end: Slurm's ``sacct`` once a job is over (``times_source = "sacct"``),
    ``squeue`` before (``"squeue"``); Kubernetes Job ``status.startTime`` and the ``Complete`` or
    ``Failed`` condition (``"job-status"``). A backend that cannot be reached leaves its rows as
    they were, with reason ``BackendUnavailable`` in the detail; one that no longer knows a job it
    accepted marks it ``Lost``. Only the rows not over are read (through the ``state`` index),
    so a pass costs what is live, not what was ever dispatched.

    Returns
    -------
    int
        How many intents the backends were asked about.
    """
    if isinstance(catalog, str | Path):
        catalog = load_catalog(catalog)
    adapters = adapters if adapters is not None else build_adapters(catalog)
    now = _now(clock)
    with Session(store.engine) as s:
        q = select(DispatchRow).where(DispatchRow.site.in_(list(adapters)),
                                      DispatchRow.backend_id.is_not(None),
                                      DispatchRow.state.in_(LIVE))
        if plan_id:
            q = q.where(DispatchRow.plan_id == plan_id)
        rows = list(s.scalars(q))
        marks = grid_marks(store, [r.key for r in rows])
        groups: dict[str, list[DispatchRow]] = {}
        for r in rows:
            groups.setdefault(adapters[r.site].name, []).append(r)
        for group in groups.values():
            adapter = adapters[group[0].site]
            try:
                found = adapter.status([r.key for r in group])
            except Exception as exc:
                exc = unexpected(adapter.name, "status", exc)
                for r in group:
                    r.detail = f"{ReasonCode.BACKEND_UNAVAILABLE}: {exc}"
                continue
            source = _times_source(adapter)
            units = [_unit(r) for r in group
                     if r.key not in found or found[r.key].state.value in TERMINAL_STATES]
            acct: dict[str, BackendJob] = {}
            acct_error = ""
            if units and isinstance(adapter, KeepsAccounting):
                try:
                    acct = adapter.accounting(units)
                except Exception as exc:
                    exc = unexpected(adapter.name, "accounting", exc,
                                     passes=(BackendError, InputError))
                    acct_error = f"; its accounting could not be read: {exc}"
            for r in group:
                job = found.get(r.key)
                if job is not None:
                    _record_reported(r, job, source, now, marks.get(r.key))
                elif r.key not in acct:
                    if acct_error:  # unknown, not lost: the records could not be read
                        r.detail = f"{adapter.name} no longer reports {r.backend_id}{acct_error}"
                        continue
                    r.state, r.reason = str(JobState.FAILED), str(ReasonCode.LOST)
                    r.detail = (f"{adapter.name} no longer reports {r.backend_id} and its "
                                "accounting holds no job of this key submitted since "
                                f"{_iso(_unit(r).since)}")
                    r.updated_at = now
                if r.key in acct:
                    _record_accounted(r, acct[r.key], now)
        s.commit()
    return len(rows)


def _times_source(adapter: DispatchAdapter) -> str:
    """What a backend's current list calls its actual times (``times_source``)."""
    return "squeue" if adapter.name.startswith("slurm:") else "job-status"


def _record_reported(row: DispatchRow, job: BackendJob, source: str, now: datetime,
                     mark: GridMark | None = None) -> None:
    """Record the row's job as its backend's current list reports it (:func:`refresh_status`).

    Parameters
    ----------
    row
        The outbox row, in an open session.
    job
        The backend's reading of its job.
    source
        :func:`_times_source` of the backend, recorded with the actual start when it gives one.
    now
        When it is recorded. [UTC]
    mark
        The grid event's mark of the row (:func:`mark_grid_event`), if any.
    """
    _apply(row, job, now)
    mark_grid_event(row, job, mark)
    if job.actual_start is not None:
        row.times_source = source


def _record_accounted(row: DispatchRow, job: BackendJob, now: datetime) -> None:
    """Record the row's job as its backend's accounting keeps it: final state, actual times.

    Parameters
    ----------
    row
        The outbox row, in an open session.
    job
        The accounting record of its job (:meth:`KeepsAccounting.accounting`).
    now
        When it is recorded. [UTC]
    """
    row.backend_id = row.backend_id or job.backend_id
    row.state, row.reason = str(job.state), str(job.reason)
    mark_paused(row, job.raw_state)
    row.actual_start, row.actual_end = job.actual_start, job.actual_end
    if job.submitted is not None and row.backend_submitted_at is None:
        row.backend_submitted_at = job.submitted
    _note_duplicates(row, job.duplicates)
    row.times_source = "sacct"
    row.detail = job.detail or row.detail
    row.updated_at = now


def _unit(row: DispatchRow) -> SubmittedUnit:
    """The row as a bounded accounting query: from the backend's own submit time when known."""
    if row.backend_submitted_at is not None:
        return SubmittedUnit(row.key, row.backend_id, row.backend_submitted_at, exact=True)
    since = row.submit_attempted_at or row.submitted_at or row.created_at
    return SubmittedUnit(row.key, row.backend_id, since, exact=False)


@dataclass(frozen=True)
class LiveUnit:
    """One unit of a job's claim that has not ended: it holds, or is to hold, its GPUs."""

    piece: int
    site: str
    state: str
    """:class:`~carbonsched.domain.JobState` value, never one of
    :data:`~carbonsched.domain.TERMINAL_STATES`."""
    planned_start: datetime
    planned_end: datetime
    """The placement's span as dispatched. [UTC]"""
    actual_start: datetime | None
    """When its backend started it (``None``: not started, or not reported). [UTC]"""


@dataclass(frozen=True)
class DispatchedJob:
    """What dispatch did with one job, from its outbox rows (every piece submitted)."""

    job_id: str
    state: str
    """:class:`~carbonsched.domain.JobState` value: ``Running`` when a piece runs, else
    ``Paused``, ``Failed``, ``Cancelled`` when a piece is, ``Succeeded`` when all did, else
    ``Dispatched`` (an intent awaiting submission, submitted and not started, or between
    pieces)."""
    reason: str
    detail: str
    plan_id: str
    """The plan the job was dispatched from (its claim, ``<job>#0``)."""
    site: str
    """The sites of its pieces, comma-separated in piece order."""
    start: datetime
    end: datetime
    """First piece's planned start and last piece's planned end. [UTC]"""
    live: tuple[LiveUnit, ...] = ()
    """The units of the claim's plan that have not ended, in piece order (empty when every
    unit ended)."""


_JOB_STATE_ORDER = (JobState.RUNNING, JobState.PAUSED, JobState.FAILED, JobState.CANCELLED)


def dispatched_jobs(store: Store, job_ids: Collection[str]) -> dict[str, DispatchedJob]:
    """The jobs of ``job_ids`` dispatch holds, with their state from the outbox.

    A job is held once its first piece's row (``<job>#0``, its claim) exists, submitted or
    not: dispatch drives that intent (reconcile) and never submits another plan's placement
    of the job (``already_dispatched``). The state is read from the claiming plan's rows as
    the dispatch loops last recorded them (``refresh_status``); an intent not yet on its
    backend reads ``Dispatched`` with reason ``AwaitingSubmit``, so a job whose later piece
    is still to be submitted is never ``Succeeded``.

    Parameters
    ----------
    store
        The store holding the outbox.
    job_ids
        Jobs to look up.

    Returns
    -------
    dict
        Job id -> :class:`DispatchedJob`, only for dispatched jobs.
    """
    ids = sorted(set(job_ids))
    if not ids:
        return {}
    rows: dict[str, list[DispatchRow]] = {}
    with Session(store.engine) as s:
        for i in range(0, len(ids), 500):     # bounded IN lists
            q = select(DispatchRow).where(DispatchRow.job_id.in_(ids[i:i + 500]))
            for r in s.scalars(q.order_by(DispatchRow.job_id, DispatchRow.piece)):
                rows.setdefault(r.job_id, []).append(r)
    out = {}
    for job_id, rs in rows.items():
        claim = next((r for r in rs if r.piece == 0), None)
        if claim is None:
            continue
        mine = [r for r in rs if r.plan_id == claim.plan_id]
        states = {r.state for r in mine}
        pick = next((r for st in _JOB_STATE_ORDER for r in mine if r.state == st.value), None)
        if pick is None and states == {JobState.SUCCEEDED.value}:
            pick = mine[-1]
        state = pick.state if pick is not None else JobState.DISPATCHED.value
        waiting = next((r for r in mine if r.state == JobState.PENDING.value), None)
        row = pick or waiting or mine[-1]
        reason = str(ReasonCode.AWAITING_SUBMIT) if pick is None and waiting else row.reason
        out[job_id] = DispatchedJob(
            job_id=job_id, state=state, reason=reason,
            detail=(f"dispatched from plan {claim.plan_id} to {row.backend}"
                    + (f" as {row.backend_id}" if row.backend_id else
                       ", awaiting submission" if row.state == JobState.PENDING.value else "")
                    + (f": {row.detail}" if row.detail else "")),
            plan_id=claim.plan_id,
            site=", ".join(dict.fromkeys(r.site for r in mine)),
            start=min(r.planned_start for r in mine), end=max(r.planned_end for r in mine),
            live=tuple(LiveUnit(r.piece, r.site, r.state, r.planned_start, r.planned_end,
                                r.actual_start) for r in mine if r.state not in TERMINAL_STATES))
    return out


def final_jobs(store: Store, job_ids: Collection[str],
               dispatched: Mapping[str, DispatchedJob] | None = None) -> dict[str, str]:
    """The jobs of ``job_ids`` that are final under their id in the store, with the sentence.

    Final: dispatch holds it and every unit of its claim ended (``Succeeded``, ``Failed``,
    ``Cancelled``: :func:`dispatched_jobs`), or dispatch does not hold it and the store pruned
    its records (a tombstone, :mod:`carbonsched.store.pruned_jobs`). A job dispatch holds and
    that has not ended is never final, whatever tombstone names its id. Dispatch never
    submits such a job again under its id, so a run does not plan it again (a workload file
    planned every day still lists it).

    Parameters
    ----------
    store
        The store holding the outbox and the tombstones.
    job_ids
        Jobs to look up.
    dispatched
        :func:`dispatched_jobs` of ``job_ids``, when the caller read it already (``None``:
        read here).

    Returns
    -------
    dict
        Job id -> :func:`~carbonsched.store.pruned_jobs.final_under_id`'s sentence, only for
        final jobs.
    """
    from carbonsched.store.pruned_jobs import final_under_id

    ids = set(job_ids)
    held = dispatched_jobs(store, ids) if dispatched is None else dispatched
    out = {i: final_under_id(i, d.state, d.reason, f"dispatched from plan {d.plan_id}")
           for i, d in held.items() if i in ids and d.state in TERMINAL_STATES}
    # the outbox first: a job it holds is final only when its units ended, whatever tombstone
    # names the id (one is written only as the job's units go; a live job is never final)
    out |= {i: pruned_sentence(p)
            for i, p in pruned_jobs(store.engine, ids - set(held)).items()}
    return out


RECORD_COLUMNS = ["key", "job_id", "piece", "plan_id", "site", "backend", "backend_id", "state",
                  "reason", "detail", "planned_start", "planned_end", "actual_start",
                  "actual_end", "times_source", "attempts", "duplicates", "lease_owner"]
"""The columns of :func:`dispatch_records` (never the request's JSON)."""

_TEXT_COLUMNS = ("key", "job_id", "plan_id", "site", "backend", "backend_id", "state", "reason",
                 "detail", "times_source", "duplicates", "lease_owner")
"""The text columns of :data:`RECORD_COLUMNS` (``None`` where the store has ``NULL``)."""


def dispatch_records(store: Store, plan_id: str | None = None, *,
                     job_ids: Collection[str] | None = None,
                     ran_in: tuple[datetime, datetime] | None = None) -> pd.DataFrame:
    """The outbox as a frame (for ``carbonsched status``, ``cancel`` and the report export).

    Columns (:data:`RECORD_COLUMNS`): key, job_id, piece, plan_id, site, backend, backend_id,
    state, reason, detail, planned_start, planned_end, actual_start, actual_end (tz-aware UTC),
    times_source, attempts, duplicates (other backend ids found with the same key,
    comma-separated; "" when none), lease_owner (the dispatcher claiming a pending row now,
    else None); rows by site, planned start and key. Every row unless filtered; the filters
    are read in SQL (indexed), so a filtered read costs what it returns, not the outbox's
    history:

    ``plan_id``
        The rows of that plan's jobs, including those dispatched from an earlier plan (their
        ``plan_id`` says which).
    ``job_ids``
        The rows of these jobs.
    ``ran_in``
        ``(t0, t1)``: the rows that have started (an ``actual_start``) and whose run may
        overlap ``[t0, t1)``: started before ``t1`` and ended after ``t0``, or with no end on
        record and still live, or planned or started to end after ``t0`` (the report's
        :func:`carbonsched.report.inputs.actual_runs` then ends such a run at its planned
        end and keeps exactly the runs overlapping the period).
    """
    t = DispatchRow.__table__.c
    q = select(*(t[c] for c in RECORD_COLUMNS))
    if plan_id:
        try:
            jobs = [p["job_id"] for p in store.get_plan(plan_id).get("placements", [])]
        except InputError:
            jobs = []
        q = q.where((t.plan_id == plan_id) | t.job_id.in_(jobs))
    if ran_in is not None:
        t0, t1 = (pd.Timestamp(x).to_pydatetime() for x in ran_in)
        q = q.where(t.actual_start.is_not(None), t.actual_start < t1,
                    (t.actual_end > t0)
                    | (t.actual_end.is_(None) & (t.state.in_(LIVE) | (t.planned_end > t0)
                                                 | (t.actual_start > t0))))
    order = (t.site, t.planned_start, t.key)
    with Session(store.engine) as s:
        if job_ids is None:
            rows = s.execute(q.order_by(*order)).all()
        else:
            ids = sorted(set(job_ids))
            rows = [r for i in range(0, len(ids), 500)     # bounded IN lists
                    for r in s.execute(q.where(t.job_id.in_(ids[i:i + 500])).order_by(*order))]
            if len(ids) > 500:
                rows.sort(key=lambda r: (r.site, r.planned_start, r.key))
    df = pd.DataFrame([tuple(r) for r in rows], columns=RECORD_COLUMNS)
    # text columns keep None where the store has NULL: pandas 3 infers its string dtype for a
    # column of strings and None and reads the None as NaN (a float), which every reader
    # (the status table, ``r.backend_id or ""``) would take for a value
    for c in _TEXT_COLUMNS:
        df[c] = df[c].astype(object).where(df[c].notna(), None)
    return df


@dataclass(frozen=True)
class CancelOutcome:
    """What :func:`cancel_job` did to one unit."""

    key: str
    site: str
    backend: str
    state_before: str
    """The unit's state in the outbox when the cancel held its lease."""
    outcome: str
    """:data:`CANCELLED`, :data:`NOT_ON_BACKEND` or :data:`ALREADY_ENDED`."""
    state: str = ""
    """The unit's state in the outbox after the cancel: ``Cancelled``, or for
    :data:`ALREADY_ENDED` the state it ended in (``Succeeded``, ``Failed``, ``Cancelled``)."""

    @property
    def ended_on_backend(self) -> bool:
        """:data:`ALREADY_ENDED` found on its backend: the outbox had not recorded the end yet."""
        return self.outcome == ALREADY_ENDED and self.state_before not in TERMINAL_STATES


CANCELLED = "cancelled"
"""The unit was stopped by the cancel (on its backend, or before it got there)."""
NOT_ON_BACKEND = "not-on-backend"
"""Its backend had nothing to cancel: neither its current list nor (Slurm) its accounting knows
the job (it was forgotten there unseen); recorded ``Cancelled``."""
ALREADY_ENDED = "already-ended"
"""The unit had ended before the cancel: the outbox recorded it so, or its backend reported it
over (``Succeeded``, ``Failed``, ``Cancelled``), which is then recorded, with its actual times,
as :func:`refresh_status` records it. Nothing was cancelled."""


def cancel_job(store: Store, catalog: Catalog | str, job_id: str, from_piece: int = 0, *,
               pieces: Collection[int] | None = None,
               adapters: Mapping[str, DispatchAdapter] | None = None,
               clock: Clock = system_clock, settings: Settings | None = None
               ) -> list[CancelOutcome]:
    """Cancel a dispatched job's units on their backends and record them ``Cancelled``.

    Every unit of the job from piece ``from_piece`` on (a later piece resumes from an earlier
    one's checkpoint, so it cannot run without it), or only ``pieces``. The cancel claims
    **every** unit's outbox row first (its lease, :meth:`Claimant.claim_key`), as a dispatcher
    does before a submission, and acts only once it holds them all, so no dispatcher submits
    one of them meanwhile:

    - when a live dispatcher holds one (a submission may be in flight), nothing is cancelled
      and the holder and the time its lease ends are named, to retry then;
    - a unit the outbox records ended (``Succeeded``, ``Failed``, ``Cancelled``) is left as it
      is (its record and times are kept);
    - a pending unit never tried on its backend is recorded ``Cancelled`` without a backend
      call, and no dispatcher submits it after (they submit only pending rows);
    - any other unit's backend is asked for it first (its current list, then, for a job the
      list no longer shows or shows over, the backend's accounting, Slurm's ``sacct``): a unit
      over there (the outbox records ends only when :func:`refresh_status` runs) is recorded as
      the backend reports it, with its actual start and end, and not cancelled, so a finished
      Kubernetes Job and its logs are kept (:data:`ALREADY_ENDED`); a unit still waiting or
      running there is cancelled on its backend by key (idempotent), then recorded.

    Returns
    -------
    list of CancelOutcome
        One per unit, in piece order.

    Raises
    ------
    InputError
        The job (or piece) was never dispatched.
    UnitHeldError
        A live dispatcher holds one of the units (the message says until when); nothing was
        cancelled; retry then.
    BackendUnavailableError
        A backend did not answer (asked for the unit's state, or to cancel it); its unit is
        left as it was, not cancelled blind (the units before it in piece order are done), so
        the cancel can be retried.
    BackendError
        A backend failed the call otherwise; as above.
    """
    if isinstance(catalog, str | Path):
        catalog = load_catalog(catalog)
    settings = settings or get_settings()
    with Session(store.engine) as s:
        q = select(DispatchRow.key, DispatchRow.piece).where(DispatchRow.job_id == job_id)
        found = sorted(s.execute(q).all(), key=lambda r: r.piece)
    if not found:
        raise InputError(f"job {job_id!r} was never dispatched; `carbonsched status` lists the "
                         "dispatched jobs")
    keys = [r.key for r in found if (r.piece in pieces if pieces is not None
                                     else r.piece >= from_piece)]
    if not keys:
        raise InputError(f"job {job_id!r} has no piece {min(pieces or [from_piece])}; its "
                         f"pieces: {', '.join(str(r.piece) for r in found)}")
    claimant = Claimant(store, settings.dispatch_lease_s)
    out: list[CancelOutcome] = []
    try:
        for key in keys:            # every unit held before any is touched
            taken, holder, until = claimant.claim_key(key)
            if not taken:
                raise UnitHeldError(
                    f"{key} of job {job_id} is being dispatched by {holder} (its lease ends "
                    f"{_iso(until)}); nothing was cancelled; cancel again after that, when "
                    "the submission has settled")
    except BaseException:
        claimant.release()          # the units taken so far
        raise
    built: dict[str, Mapping[str, DispatchAdapter]] = {}

    def backends() -> Mapping[str, DispatchAdapter]:
        if "a" not in built:
            built["a"] = adapters if adapters is not None else build_adapters(catalog)
        return built["a"]

    # the leases are renewed while the backends are called, one unit after another, and
    # released on leaving the block
    with claimant.heartbeat():
        for key in keys:
            out.append(_cancel_held(store, claimant, key, job_id, backends, clock))
    return out


def _cancel_held(store: Store, claimant: Claimant, key: str, job_id: str,
                 backends: Callable[[], Mapping[str, DispatchAdapter]], clock: Clock
                 ) -> CancelOutcome:
    """Cancel one unit whose lease ``claimant`` holds (:func:`cancel_job`).

    Raises
    ------
    UnitHeldError
        The lease was lost (renewals failed past its expiry and another took the row):
        nothing is done to this unit.
    BackendUnavailableError, BackendError
        The backend could not say whether the unit has ended (:func:`_cancel_reading`), or
        failed the cancel: nothing is written to this unit. The adapter's own unexpected
        exception (not a :class:`BackendError`) is a :class:`BackendUnavailableError` naming
        the adapter, the call and the exception (:func:`unexpected`).
    """
    with Session(store.engine) as s:
        # the row locked for the write, and written only while the lease is still ours
        q = select(DispatchRow).where(DispatchRow.key == key)
        if store.engine.dialect.name == "postgresql":
            q = q.with_for_update()
        row = s.scalars(q).one()
        if row.lease_owner != claimant.owner:
            raise UnitHeldError(
                f"{key} of job {job_id}: the cancel lost its lease to {row.lease_owner} (its "
                "renewals failed); the units before it are cancelled, this one and the later "
                "ones are not; cancel again")
        before = row.state
        if row.state in TERMINAL_STATES:
            return CancelOutcome(key, row.site, row.backend, before, ALREADY_ENDED, before)
        if row.state == str(JobState.PENDING) and row.submit_attempted_at is None:
            done = True        # never tried on its backend: nothing there to cancel
        else:
            adapter = backends()[row.site]
            # the outbox learns of an end only at the next refresh: a unit over on its backend
            # is recorded as it ended, never cancelled (a Kubernetes cancel deletes the Job)
            job, acct = _cancel_reading(adapter, row, job_id)
            if acct is not None or (job is not None and job.state.value in TERMINAL_STATES):
                now = _now(clock)
                if job is not None:
                    _record_reported(row, job, _times_source(adapter), now)
                if acct is not None:
                    _record_accounted(row, acct, now)
                s.commit()
                return CancelOutcome(key, row.site, row.backend, before, ALREADY_ENDED,
                                     row.state)
            try:
                done = adapter.cancel(key)
            except Exception as exc:
                fault = unexpected(adapter.name, f"cancel of {key}", exc,
                                   passes=(BackendError,), reraise=(SQLAlchemyError,))
                if fault is exc:    # the backend's, an outage included: as it is
                    raise
                raise BackendUnavailableError(
                    f"{key} of job {job_id}: {fault}; it may or may not be cancelled on its "
                    "backend, and is recorded as it was (the units before it are done, it and "
                    "the later ones are left as they were); cancel again once the adapter is "
                    "fixed") from exc
        row.state, row.reason = str(JobState.CANCELLED), str(ReasonCode.CANCELLED)
        row.updated_at = _now(clock)
        if done and row.actual_start is not None and row.actual_end is None:
            # it ran until now: the report counts its hours to here, not to its period's end
            # (a job the backend found over keeps no end: the planned end)
            row.actual_end = row.updated_at
        s.commit()
        return CancelOutcome(key, row.site, row.backend, before,
                             CANCELLED if done else NOT_ON_BACKEND, row.state)


def _cancel_reading(adapter: DispatchAdapter, row: DispatchRow, job_id: str
                    ) -> tuple[BackendJob | None, BackendJob | None]:
    """What the unit's backend says of its job before a cancel (:func:`_cancel_held`).

    The backend's current list (:meth:`DispatchAdapter.status`) first; when it no longer shows
    the job, or shows it over, the backend's accounting (:class:`KeepsAccounting`, Slurm's
    ``sacct``: a finished job leaves ``squeue`` after a few minutes), as
    :func:`refresh_status` reads them.

    Returns
    -------
    tuple
        The current list's reading (None when it lacks the job) and the accounting record when
        that says the job ended (else None).

    Raises
    ------
    BackendUnavailableError, BackendError
        The backend could not be asked, or its list lacks the job and its accounting could not
        be read: whether the unit has ended is not known, so it is not cancelled (that would
        record ``Cancelled`` for good over a ``Succeeded`` or ``Failed`` end, and on Kubernetes
        delete a finished Job with its logs).
    """
    def unknown(exc: BaseException, what: str) -> BackendError:
        msg = (f"{row.key} of job {job_id}: {what} ({exc}); whether it has ended is not known, "
               "so it was not cancelled (the units before it are done, it and the later ones "
               "are left as they were); cancel again once the backend answers")
        return (BackendUnavailableError(msg) if isinstance(exc, BackendUnavailableError)
                else BackendError(msg))

    try:
        job = adapter.status([row.key]).get(row.key)
    except Exception as exc:
        exc = unexpected(adapter.name, f"status of {row.key}", exc, passes=(BackendError,),
                         reraise=(SQLAlchemyError,))
        raise unknown(exc, f"{adapter.name} could not be asked for its state") from exc
    if (job is not None and job.state.value not in TERMINAL_STATES) or not isinstance(
            adapter, KeepsAccounting):
        return job, None
    try:
        acct = adapter.accounting([_unit(row)]).get(row.key)
    except Exception as exc:
        exc = unexpected(adapter.name, f"accounting of {row.key}", exc,
                         passes=(BackendError, InputError), reraise=(SQLAlchemyError,))
        if job is not None:   # over by its list; the accounting would only refine its times
            return job, None
        raise unknown(exc, f"{adapter.name} no longer lists it and its accounting could not "
                      "be read") from exc
    return job, acct if acct is not None and acct.state.value in TERMINAL_STATES else None


def cancel_unit(store: Store, catalog: Catalog | str, job_id: str, piece: int = 0, *,
                adapters: Mapping[str, DispatchAdapter] | None = None,
                clock: Clock = system_clock, settings: Settings | None = None) -> str:
    """Cancel one unit (:func:`cancel_job` of that piece alone); what it did.

    Returns
    -------
    str
        :data:`CANCELLED`, :data:`NOT_ON_BACKEND` or :data:`ALREADY_ENDED`.

    Raises
    ------
    InputError, UnitHeldError, BackendUnavailableError
        As :func:`cancel_job`.
    """
    (one,) = cancel_job(store, catalog, job_id, pieces=[piece], adapters=adapters, clock=clock,
                        settings=settings)
    return one.outcome
