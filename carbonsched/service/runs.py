"""The run path: plan a date, record it, dispatch it — one function for every caller.

:func:`execute_run` is ``carbonsched plan --dispatch``'s run and the service cron's: it claims
the run record of the planning date, plans (daily, or one rolling step with
``CARBONSCHED_ROLLING``), writes the ``--out`` plan file, stores plan and forecasts, updates the
jobs submitted through the API, dispatches (:func:`finish_run`) and finishes the run record with
the :class:`RunOutcome`. It is :func:`planning_pipeline` (the work) under :func:`claim_and_run`
(the record); the cron (:class:`carbonsched.service.cron.DailyCron`) builds the pipeline once and
calls :func:`claim_and_run` with it on each due day. A run that raises is recorded the same way
whoever started it: status ``failed`` and :func:`failure_detail` (the message and, unless it is
bad input, the end of the traceback); then the exception is raised again.

:func:`plan_once` is ``carbonsched plan`` without ``--dispatch``: plan, write the plan file,
store it unless asked not to; no run record, no dispatch.

In both, the plan file is written before anything is stored, so a dead database never loses it.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import threading
import time as _time
import traceback
from collections.abc import Callable, Collection
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
from sqlalchemy.exc import DBAPIError

from carbonsched.catalog import Catalog
from carbonsched.clock import Clock
from carbonsched.config import database_label
from carbonsched.domain import Job, ReasonCode, Workload
from carbonsched.errors import (
    BackendUnavailableError,
    CarbonschedError,
    InputError,
    ProviderUnavailableError,
    RunBlockedError,
    RunTakenOverError,
)
from carbonsched.pipeline.document import read_plan_document
from carbonsched.service.providers import (
    NO_PROVIDERS,
    RunLoaders,
    run_loaders,
    service_providers,
)
from carbonsched.store.service import is_outage, unavailable

log = logging.getLogger("carbonsched.service.runs")

DispatchStep = Callable[..., Any]
"""``dispatch(store, plan_id, catalog, *, clock=...) -> outcome`` — the signature of
``carbonsched.dispatch.outbox.dispatch_plan``; the outcome is recorded (JSON) in the run record."""

DISPATCH_NOT_CONFIGURED = "dispatch: not configured"


@dataclass
class RunOutcome:
    """What one pipeline run produced (recorded in its run record)."""

    status: str
    """``succeeded``, ``infeasible`` (plan written, solver found no feasible plan) or
    ``dispatch_failed``."""
    plan_id: str | None
    solver_status: str | None
    dispatch: str
    notes: str = ""
    """What a person should know (recorded in the run record's ``notes``)."""
    catalog: str | None = None
    """The catalog the run planned (recorded with the run)."""
    dispatch_outcome: str = ""
    """What dispatch did (:func:`dispatch_verdict`): ``ok``, ``incomplete``, ``rejected``,
    ``nothing_submitted``, ``not_configured`` or ``failed``."""


def dispatch_verdict(summary: dict[str, Any]) -> tuple[str, str]:
    """What a dispatch summary means for the run, as ``carbonsched dispatch`` reads it.

    Parameters
    ----------
    summary
        :meth:`carbonsched.dispatch.outbox.DispatchSummary.to_dict` (another dispatch step's
        dict without those keys reads ``ok``).

    Returns
    -------
    (str, str)
        The outcome (``incomplete``: units left pending, a backend unavailable or a claim held
        elsewhere; ``rejected``: a backend refused units, now or in an earlier dispatch of the
        plan (recorded ``Rejected``); ``nothing_submitted``: none of the
        units asked for is on its backend; else ``ok``) and a sentence for the run's notes
        (``""`` for ``ok``).
    """
    counts = dict(summary.get("counts") or {})
    # a unit refused by an earlier dispatch of the plan is recorded now: still refused
    refused_before = sum(1 for o in summary.get("outcomes") or []
                         if isinstance(o, dict) and o.get("action") == "recorded"
                         and o.get("reason") == str(ReasonCode.REJECTED))
    if refused_before:
        counts["rejected"] = counts.get("rejected", 0) + refused_before
        counts["recorded"] = counts.get("recorded", 0) - refused_before
        if not counts["recorded"]:
            del counts["recorded"]
    said = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    pid = str(summary.get("plan_id", ""))[:12]
    if summary.get("complete") is False:
        return "incomplete", (f"dispatch left units pending ({said}): the service's dispatch "
                              f"loops retry them, or run `carbonsched dispatch {pid}` again")
    if counts.get("rejected"):
        return "rejected", (f"dispatch: a backend refused {counts['rejected']} unit(s) ({said}); "
                            f"`carbonsched status {pid}` names them and why")
    if summary.get("nothing_submitted"):
        return "nothing_submitted", (f"dispatch submitted nothing: none of the units asked for "
                                     f"is on its backend ({said}); `carbonsched status {pid}` "
                                     "says why")
    return "ok", ""


def stoppable(dispatch: DispatchStep | None, stop: threading.Event) -> DispatchStep | None:
    """``dispatch`` called with ``stop=stop`` when it takes that argument.

    :func:`carbonsched.dispatch.outbox.dispatch_plan` does: once ``stop`` is set (the service
    shutting down) no submission begins and the units not submitted stay pending, unclaimed,
    for the next pass. A step that takes neither ``stop`` nor ``**kwargs`` is returned as it is.

    Parameters
    ----------
    dispatch
        The dispatch step, or ``None``.
    stop
        The event the service sets when it is asked to stop.

    Returns
    -------
    callable or None
        The step with ``stop`` bound, the step itself, or ``None``.
    """
    if dispatch is None:
        return None
    try:
        params = inspect.signature(dispatch).parameters.values()
    except (TypeError, ValueError):   # a callable without a signature: called as it is
        return dispatch
    if any(p.name == "stop" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return functools.partial(dispatch, stop=stop)
    return dispatch


def finish_run(doc: dict[str, Any], service_store: Any, catalog: Catalog, clock: Clock,
               dispatch: Callable[..., Any] | None, metrics: Any,
               **dispatch_kw: Any) -> tuple[str, str, str, str, str]:
    """The end of a planning run, daily or rolling: solver metrics, then dispatch.

    A dispatch that raises does not lose the plan (it is stored already): the run is
    ``dispatch_failed`` and the error is in the run record; an outage is raised instead (the
    run is retried).

    Parameters
    ----------
    doc
        The stored plan document.
    dispatch
        :func:`carbonsched.dispatch.outbox.dispatch_plan` or ``None`` (not configured).
    dispatch_kw
        Passed to ``dispatch`` (e.g. ``commit_before`` for a rolling run).

    Returns
    -------
    (str, str, str, str, str)
        Run status (``succeeded``, ``infeasible`` or ``dispatch_failed``), solver status, the
        dispatch summary for the run record, the dispatch outcome (:func:`dispatch_verdict`,
        or ``not_configured``, ``failed``) and a sentence for the run's notes when dispatch
        left units pending, was refused or submitted nothing (``""`` otherwise).

    Raises
    ------
    BackendUnavailableError
        Dispatch met an outage (the database, the dispatch lease): the run is interrupted and
        retried (:func:`execute_run`), never recorded final.
    """
    status = doc["solver"]["status"]
    if metrics is not None:
        metrics.solver_seconds.observe(doc["solver"]["seconds"])
        metrics.solver_status.labels(status=status).inc()
    run_status = "infeasible" if status in ("infeasible", "no_solution") else "succeeded"
    said = ""
    if dispatch is None:
        disp, outcome = DISPATCH_NOT_CONFIGURED, "not_configured"
    else:
        try:
            # dispatch_plan's clock is a callable returning "now" (the service's clock.now)
            res = dispatch(service_store.store, doc["plan_id"], catalog, clock=clock.now,
                           **dispatch_kw)
            res = res.to_dict() if hasattr(res, "to_dict") else res
            disp = "dispatch: " + json.dumps(res, default=str)[:4000]
            outcome, said = dispatch_verdict(res if isinstance(res, dict) else {})
        except BackendUnavailableError:
            # an outage (the database, a lease) is a state with a retry: the run is
            # interrupted and retried once its lease ran out, never final as dispatch_failed
            if metrics is not None:
                metrics.dispatch_outcomes.labels(outcome="interrupted").inc()
            raise
        except DBAPIError as exc:
            if is_outage(exc):
                if metrics is not None:
                    metrics.dispatch_outcomes.labels(outcome="interrupted").inc()
                raise unavailable(service_store.store.engine,
                                  f"dispatching plan {doc['plan_id']}", exc) from exc
            disp = f"dispatch failed: {type(exc).__name__}: {exc}"
            outcome, run_status = "failed", "dispatch_failed"
        except Exception as exc:
            disp = f"dispatch failed: {type(exc).__name__}: {exc}"
            outcome, run_status = "failed", "dispatch_failed"
    if metrics is not None:
        metrics.dispatch_outcomes.labels(outcome=outcome).inc()
    return run_status, status, disp, outcome, said


class Submitted(list[tuple[dict[str, Any], Job]]):
    """The API's jobs still to plan: (stored row, job) pairs (:func:`submitted_jobs`).

    ``invalid``: job id -> the ``InvalidSpec`` detail of a stored spec the job schema now
    refuses (:func:`~carbonsched.workload.schema.invalid_spec_detail`).
    """

    def __init__(self, items: Any = (), invalid: dict[str, str] | None = None) -> None:
        super().__init__(items)
        self.invalid: dict[str, str] = dict(invalid or {})


def submitted_jobs(service_store: Any) -> Submitted:
    """The API's ``Pending`` and ``Planned`` jobs, read once and through the job schema once.

    A run takes one such snapshot and hands it to :func:`unrunnable_submitted_jobs`,
    :func:`with_submitted_jobs` and :func:`expired_submitted_jobs`, so all three see the same
    jobs (a job submitted meanwhile waits for the next run). A stored spec the schema now
    refuses (stored before one of its rules was tightened) is not among them: it is in
    ``invalid``, and :func:`unrunnable_submitted_jobs` ends it (``InvalidSpec``), so it cannot
    stop the run.

    Returns
    -------
    Submitted
        Each stored row (``job_id``, ``state``, ``spec``, ...) with its job
        (:func:`job_from_spec`).
    """
    from pydantic import ValidationError

    from carbonsched.workload.schema import invalid_spec_detail

    out = Submitted()
    for r in service_store.jobs(states=("Pending", "Planned")):
        try:
            out.append((r, job_from_spec(r["spec"])))
        except (ValidationError, InputError) as exc:
            out.invalid[r["job_id"]] = invalid_spec_detail(exc)
    return out


def with_submitted_jobs(wl: Workload, service_store: Any, issued_at: pd.Timestamp,
                        horizon_hours: int, skip: set[str] | frozenset[str] = frozenset(),
                        snapshot: Submitted | None = None) -> tuple[Workload, set[str]]:
    """Add the API's pending and planned jobs whose window overlaps the horizon.

    A job dispatch holds (its claim, ``<job>#0``, is in the outbox, submitted or not) is not
    among them: :func:`sync_dispatched_jobs` moves it out of ``Planned`` first, and one it has
    not reached yet is skipped here too, so a later plan never places (and reserves capacity
    for) a job already dispatched from an earlier one. ``snapshot``: the run's
    :func:`submitted_jobs` (read here when ``None``).
    """
    from carbonsched.dispatch.outbox import dispatched_jobs

    end = issued_at + pd.Timedelta(hours=horizon_hours)
    have = {j.id for j in wl.jobs}
    snap = submitted_jobs(service_store) if snapshot is None else snapshot
    gone = dispatched_jobs(service_store.store,
                           [r["job_id"] for r, _ in snap if r["state"] == "Planned"])
    extra: list[Job] = []
    for row, job in snap:
        if row["job_id"] in skip:    # :func:`unrunnable_submitted_jobs`
            continue
        if job.id in have or job.id in gone or cannot_finish(job, issued_at) \
                or job.earliest_start >= end:
            continue
        extra.append(job)
    return Workload(jobs=list(wl.jobs) + extra, inference=wl.inference), {j.id for j in extra}


API_DISPATCH_STATES = ("Planned", "Dispatched", "Running", "Paused")
"""States of an API job whose record follows its dispatch (:func:`sync_dispatched_jobs`)."""


def sync_dispatched_jobs(service_store: Any, now: datetime,
                         pending: Collection[str] = ()) -> int:
    """Record each API job dispatch holds as the outbox has it.

    A job ``Planned`` (or already ``Dispatched``, ``Running``, ``Paused``) whose first piece
    dispatch holds (:func:`carbonsched.dispatch.outbox.dispatched_jobs`) takes the state of its
    pieces (``Dispatched``, ``Running``, ``Paused``, ``Succeeded``, ``Failed``,
    ``Cancelled``), the plan it was dispatched from and its span. Called before a run plans (so
    no later plan places a dispatched job again) and after it dispatches.

    ``pending``: ids of ``Pending`` jobs to record likewise, those a run found dispatch holds
    under the API job's own id (:func:`without_dispatched_api_jobs`: a run stopped between its
    dispatch and its record, then given up). A ``Pending`` job is never matched by id alone
    otherwise: a workload file's job of the same id (a ``NameConflict``) may hold the claim.

    Returns
    -------
    int
        Records changed.
    """
    from carbonsched.dispatch.outbox import dispatched_jobs

    rows = {r["job_id"]: r for r in service_store.jobs(states=API_DISPATCH_STATES)}
    if pending:
        want = set(pending)
        rows |= {r["job_id"]: r for r in service_store.jobs(states=("Pending",))
                 if r["job_id"] in want}
    changed = 0
    for jid, d in dispatched_jobs(service_store.store, list(rows)).items():
        row = rows[jid]
        site = d.site.split(", ")[0]
        if (row["state"], row["plan_id"], row["site"], row["detail"]) == (
                d.state, d.plan_id, site, d.detail):
            continue
        service_store.update_job(jid, state=d.state, reason=d.reason, detail=d.detail,
                                 plan_id=d.plan_id, site=site, start=d.start, end=d.end,
                                 reserved=False, updated_at=now)
        changed += 1
    return changed


def cannot_finish(job: Job, issued_at: pd.Timestamp) -> bool:
    """Whether no run issued at ``issued_at`` can finish ``job`` by its deadline.

    Its latest start (deadline − duration: :func:`carbonsched.plan.rolling.latest_start`) is
    before the issue time: the rule the rolling planner ends pending jobs by, so a daily and a
    rolling service end the same jobs at the same run.
    """
    from carbonsched.plan.rolling import latest_start

    return latest_start(job) < issued_at


def expired_submitted_jobs(service_store: Any, issued_at: pd.Timestamp,
                           snapshot: Submitted | None = None) -> list[Job]:
    """The API's pending jobs no run issued at ``issued_at`` can finish (:func:`cannot_finish`).

    Only ``Pending`` jobs (never placed): a ``Planned`` one may have been dispatched and run.

    Parameters
    ----------
    service_store
        The service store (:class:`carbonsched.store.service.ServiceStore`).
    issued_at
        The run's issue time (tz-aware).
    snapshot
        The run's :func:`submitted_jobs` (read here when ``None``).

    Returns
    -------
    list of Job
        Those jobs, through the one job schema (:func:`job_from_spec`).
    """
    snap = submitted_jobs(service_store) if snapshot is None else snapshot
    return [job for row, job in snap
            if row["state"] == "Pending" and cannot_finish(job, issued_at)]


def end_expired_jobs(service_store: Any, jobs: list[Job], issued_at: pd.Timestamp,
                     now: datetime) -> list[str]:
    """Record each of ``jobs`` (:func:`expired_submitted_jobs`) ``Failed``/``DeadlinePassed``.

    A job no longer ``Pending`` (cancelled, or placed by another run meanwhile) is left as it
    is.

    Parameters
    ----------
    service_store
        The service store.
    jobs
        The expired jobs.
    issued_at
        The run's issue time, for the detail.
    now
        The record's ``updated_at``.

    Returns
    -------
    list of str
        The ids recorded ``Failed``.
    """
    ended = []
    for job in jobs:
        row = service_store.get_job(job.id)
        if row is None or row["state"] != "Pending":
            continue
        latest = job.deadline - pd.Timedelta(minutes=job.duration_minutes)
        service_store.update_job(
            job.id, state="Failed", reason=str(ReasonCode.DEADLINE_PASSED),
            detail=(f"it cannot finish by its deadline {job.deadline.isoformat()}: its latest "
                    f"start {latest.isoformat()} is before the run issued at "
                    f"{issued_at.isoformat()}"), updated_at=now)
        ended.append(job.id)
    return ended


def job_from_spec(spec: dict[str, Any]) -> Job:
    """A stored API job through the one job schema (minutes, pieces and preemptible kept).

    Its catalog template was applied when it was submitted (the stored spec holds the merged
    fields): the name is dropped here so no run applies it again, to a template the catalog
    may have changed or removed since.

    Raises
    ------
    pydantic.ValidationError
        The stored spec breaks the job schema.
    """
    from carbonsched.workload.schema import JobSpec

    return JobSpec.model_validate({**spec, "template": None}).to_job()


def unrunnable_submitted_jobs(service_store: Any, catalog: Catalog, workload: Workload,
                              snapshot: Submitted | None = None
                              ) -> dict[str, tuple[str, str]]:
    """The API's jobs still to plan (``Pending``, ``Planned``) that no run can plan, and why.

    * ``UnknownSite``: it names a site ``catalog`` does not define (submitted before a catalog
      edit removed it). Planned with the rest, it would stop the whole run (the planner
      refuses work naming unknown sites).
    * ``NameConflict``: a job of the workload file has its id; the file's job is planned
      under it, this one never would be.
    * ``InvalidSpec``: its stored spec no longer passes the job schema (a rule tightened since
      it was stored); read back, it would stop every run.

    ``snapshot``: the run's :func:`submitted_jobs` (read here when ``None``).

    Returns
    -------
    dict
        Job id -> (reason code, detail). [-]
    """
    known = set(catalog.site_ids)
    file_ids = {j.id for j in workload.jobs}
    snap = submitted_jobs(service_store) if snapshot is None else snapshot
    out: dict[str, tuple[str, str]] = {
        jid: (str(ReasonCode.INVALID_SPEC), detail) for jid, detail in snap.invalid.items()}
    for row, job in snap:
        jid = row["job_id"]
        if jid in file_ids:
            out[jid] = (str(ReasonCode.NAME_CONFLICT),
                        f"the service's workload file has a job {jid!r} too: that job is "
                        "planned under this id, this one never would be; submit it again "
                        "under another id")
            continue
        unknown = sorted(set(job.allowed_sites) - known)
        if unknown:
            out[jid] = (str(ReasonCode.UNKNOWN_SITE),
                        f"it names site(s) {', '.join(unknown)} that catalog {catalog.name!r} "
                        f"does not define (its sites: {', '.join(sorted(known))}); submit it "
                        "again with sites of this catalog")
    return out


def ids_in_use(settings: Any, service_store: Any, job_ids: list[str],
               plan_id: str | None = None) -> dict[str, str]:
    """Which of ``job_ids`` the service already holds outside its API jobs, and where.

    An id is held by a job of the workload file (``settings.workload_file``), of the current
    plan ``plan_id``, of the dispatch outbox (any plan's job dispatch claimed), or of the
    rolling state (pending, committed or ended). A job submitted under such an id would
    never be planned as itself (``NameConflict`` at the next run) or would be taken for the
    other job by dispatch, so the API refuses it at once. A workload file that cannot be read
    is not checked (logged; the next run fails on it and its record says why).

    Parameters
    ----------
    settings
        :class:`~carbonsched.config.Settings`.
    service_store
        :class:`~carbonsched.store.service.ServiceStore`.
    job_ids
        The submitted ids.
    plan_id
        The plan the API serves from, or ``None``.

    Returns
    -------
    dict
        Job id -> where it is held (a phrase for the message), only for held ids.
    """
    from carbonsched.dispatch.outbox import dispatched_jobs
    from carbonsched.store.rolling_state import RollingStore

    out: dict[str, str] = {}
    if settings.workload_file:
        try:
            file_ids = _workload_file_ids(str(settings.workload_file))
        except (OSError, InputError) as exc:
            # the operator's file, not the request, is at fault: the next run fails on it and
            # its record says why; the submission is not refused for it
            log.warning("job ids not checked against the workload file %s: %s",
                        settings.workload_file, exc)
            file_ids = frozenset()
        out |= {i: f"a job of the workload file {settings.workload_file}"
                for i in job_ids if i in file_ids}
    if plan_id is not None:
        out |= {i: f"a job of the current plan {plan_id[:12]}"
                for i in service_store.plan_job_ids(plan_id, job_ids) if i not in out}
    out |= {i: f"a job dispatch holds (from plan {d.plan_id[:12]})"
            for i, d in dispatched_jobs(service_store.store, job_ids).items() if i not in out}
    out |= {i: "a job of the rolling state"
            for i in RollingStore(service_store.store).holds(job_ids) if i not in out}
    return out


def _workload_file_ids(path: str) -> frozenset[str]:
    """The job ids of the workload file at ``path``, read again only when it changes."""
    st = Path(path).stat()
    return _file_ids(path, st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=4)
def _file_ids(path: str, _mtime_ns: int, _size: int) -> frozenset[str]:
    from carbonsched.workload.files import read_workload

    return frozenset(j.id for j in read_workload(path).jobs)


def end_unrunnable_jobs(service_store: Any, bad: dict[str, tuple[str, str]],
                        now: datetime) -> None:
    """Record each of :func:`unrunnable_submitted_jobs` ``Failed`` with its reason."""
    for jid, (reason, detail) in bad.items():
        service_store.update_job(jid, state="Failed", reason=reason, detail=detail,
                                 site=None, start=None, end=None, reserved=False,
                                 updated_at=now)


def end_refused_jobs(service_store: Any, dispatched: Any, now: datetime) -> list[str]:
    """Record ``Failed`` each API job this run's dispatch refused without writing an outbox row.

    Such a refusal (:data:`carbonsched.dispatch.outbox.REFUSED_UNWRITTEN`: ``no_payload``, a
    job that names nothing its site runs) leaves no row for :func:`sync_dispatched_jobs` to
    follow, so the job would stay ``Planned`` with a start in the past, planned again by every
    run. A job whose every unit of this run was so refused, still ``Pending`` or ``Planned``,
    ends ``Failed`` with the outcome's reason (``NoPayload``) and dispatch's detail.

    Parameters
    ----------
    service_store
        The service store.
    dispatched
        What the dispatch step returned (:class:`~carbonsched.dispatch.outbox.DispatchSummary`
        or its ``to_dict()``); anything without outcomes records nothing.
    now
        The record's ``updated_at``.

    Returns
    -------
    list of str
        The ids recorded ``Failed``, sorted.
    """
    from carbonsched.dispatch.outbox import REFUSED_UNWRITTEN

    res = dispatched.to_dict() if hasattr(dispatched, "to_dict") else dispatched
    outcomes = res.get("outcomes") if isinstance(res, dict) else None
    if not isinstance(outcomes, list):
        return []
    by_job: dict[str, list[dict[str, Any]]] = {}
    for o in outcomes:
        if isinstance(o, dict) and o.get("job_id") is not None:
            by_job.setdefault(str(o["job_id"]), []).append(o)
    ended = []
    for jid, os_ in sorted(by_job.items()):
        if not all(o.get("action") in REFUSED_UNWRITTEN for o in os_):
            continue
        row = service_store.get_job(jid)
        if row is None or row["state"] not in ("Pending", "Planned"):
            continue
        first = min(os_, key=lambda o: o.get("piece", 0))
        service_store.update_job(
            jid, state="Failed", reason=first["reason"],
            detail=f"dispatch of plan {first['plan_id']} did not submit it: {first['detail']}",
            plan_id=first["plan_id"], site=None, start=None, end=None, reserved=False,
            updated_at=now)
        ended.append(jid)
    return ended


def refused_note(ids: list[str]) -> str:
    """The run's note on the API jobs :func:`end_refused_jobs` ended (``ids``, not empty)."""
    return (f"{len(ids)} job(s) submitted through the API ended Failed: dispatch did not "
            "submit them, as they name nothing their site runs (NoPayload; each job's detail "
            f"says what to give): {', '.join(ids[:10])}" + (" ..." if len(ids) > 10 else ""))


def _keeping(dispatch: DispatchStep | None, into: list[Any]) -> DispatchStep | None:
    """``dispatch``, keeping what each call returns in ``into`` (``None`` stays ``None``)."""
    if dispatch is None:
        return None

    def step(*args: Any, **kw: Any) -> Any:
        res = dispatch(*args, **kw)
        into.append(res)
        return res

    return step


def unrunnable_note(bad: dict[str, tuple[str, str]]) -> str:
    """The plan's note on :func:`unrunnable_submitted_jobs` (``""`` when none)."""
    if not bad:
        return ""
    ids = sorted(bad)
    legend = "; ".join(f"{code}: {why}" for code, why in UNRUNNABLE_REASONS.items()
                       if any(reason == code for reason, _ in bad.values()))
    return (f"{len(ids)} job(s) submitted through the API cannot be planned and ended Failed "
            f"({legend}): " + ", ".join(f"{j} ({bad[j][0]})" for j in ids[:10])
            + (" ..." if len(ids) > 10 else ""))


UNRUNNABLE_REASONS = {
    str(ReasonCode.UNKNOWN_SITE): "a site the catalog does not define",
    str(ReasonCode.NAME_CONFLICT): "the id of a job of the workload file",
    str(ReasonCode.INVALID_SPEC): "a stored spec the job schema now refuses"}
"""The reasons :func:`unrunnable_submitted_jobs` gives, in the words of :func:`unrunnable_note`."""


def job_spans(placements: Any) -> dict[str, dict[str, Any]]:
    """Each job's whole placement over its pieces: what an API job's record holds.

    Parameters
    ----------
    placements
        Plan-document placement rows (dicts) or :class:`~carbonsched.domain.Placement`
        objects, with ``job_id``, ``site``, ``start``, ``end``, ``energy_kwh``,
        ``emissions_kg`` and optionally ``piece``.

    Returns
    -------
    dict
        Job id -> ``site`` (the first piece's), ``start`` (first piece's) and ``end`` (last
        piece's) [UTC datetime], ``energy_kwh`` and ``emissions_kg`` (summed over the pieces),
        ``detail`` (``""`` for one piece; the pieces and their sites otherwise).
    """
    by_job: dict[str, list[tuple[Any, ...]]] = {}
    for p in placements:
        get = p.get if isinstance(p, dict) else (lambda k, d=None, p=p: getattr(p, k, d))
        by_job.setdefault(get("job_id"), []).append(
            (pd.Timestamp(get("start")), pd.Timestamp(get("end")), get("site"),
             float(get("energy_kwh") or 0.0), float(get("emissions_kg") or 0.0)))
    out = {}
    for jid, ps in by_job.items():
        ps.sort(key=lambda x: x[0])
        sites = list(dict.fromkeys(x[2] for x in ps))
        out[jid] = dict(
            site=ps[0][2], start=ps[0][0].to_pydatetime(), end=max(x[1] for x in ps)
            .to_pydatetime(), energy_kwh=sum(x[3] for x in ps),
            emissions_kg=sum(x[4] for x in ps),
            detail="" if len(ps) == 1 else f"in {len(ps)} pieces at {', '.join(sites)}")
    return out


def update_submitted(service_store: Any, doc: dict[str, Any], api_ids: set[str],
                     now: datetime) -> None:
    """Record in the service store where the plan put each job submitted through the API.

    A job cut into pieces is recorded whole (:func:`job_spans`).
    """
    placed = job_spans(doc["placements"])
    unplaced = {u["job_id"]: u for u in doc["unplaced"]}
    for jid in api_ids:
        if jid in placed:
            service_store.update_job(jid, state="Planned", reason="Placed",
                                     plan_id=doc["plan_id"], reserved=False, updated_at=now,
                                     **placed[jid])
        elif jid in unplaced:
            u = unplaced[jid]
            service_store.update_job(jid, state="Pending", reason=u["reason"],
                                     detail=u.get("detail", ""), plan_id=doc["plan_id"],
                                     site=None, start=None, end=None, reserved=False,
                                     updated_at=now)


ERROR_MAX_CHARS = 4000
"""Longest error text kept in a run record (the column is text; a traceback is cut). [chars]"""

Pipeline = Callable[[str, datetime, str], RunOutcome]
"""``pipeline(planning_date, issued_at, trigger) -> RunOutcome``: one run's work once its record
is claimed (:func:`planning_pipeline`; the cron's tests inject a recorder)."""


def failure_detail(exc: BaseException) -> str:
    """What the run record keeps of a run that raised.

    ``<ExceptionType>: <message>``; unless the error is bad input (:class:`InputError`, whose
    message says what, where and how to fix), followed by the last two frames of the traceback
    and the exception line. Cut to :data:`ERROR_MAX_CHARS`.
    """
    detail = f"{type(exc).__name__}: {exc}"
    if not isinstance(exc, InputError):
        detail += "\n" + "".join(traceback.format_exception(exc)[-3:])
    return detail[:ERROR_MAX_CHARS]


def write_plan_file(path: str | Path, doc: dict[str, Any]) -> None:
    """Write a plan document as indented JSON, atomically (the ``--out`` file)."""
    from carbonsched.fileio import atomic_write_text

    atomic_write_text(path, json.dumps(doc, indent=2) + "\n")


@dataclass(frozen=True)
class _Claim:
    """The claimed record of the run in progress: its check, and how to name its plan."""

    check: Callable[[str], None]
    """``check(before)``: :func:`still_ours`."""
    plan: Callable[[str], None]
    """``plan(plan_id)``: :func:`record_run_plan`."""
    trigger: str = "cli"
    replica: str = ""
    lease: timedelta = timedelta(0)
    """The claim's trigger, replica and lease: an earlier run this run finishes first
    (:func:`finish_stopped_runs`) is claimed with them."""
    metrics: Any = None


_RUN_CLAIM: ContextVar[_Claim | None] = ContextVar("carbonsched_run_claim", default=None)
"""The claim of the run in progress (set by :func:`claim_and_run`; ``None`` outside one)."""


def still_ours(before: str) -> None:
    """Before a side effect of a run: renew its claim, or stop it if another replica has it.

    A run whose lease ran out while it could not renew it (a database blip longer than the
    lease) may have been taken over: the other replica plans and dispatches the same issue
    time. This run must then take no further side effect (store a plan, record its state,
    dispatch). Outside a claimed run (a plain ``carbonsched plan``) it does nothing.

    Parameters
    ----------
    before
        What the run is about to do, for the message (e.g. ``"stored its plan"``).

    Raises
    ------
    RunTakenOverError
        The record is no longer this run's.
    StoreUnavailableError
        The database cannot be reached to renew the claim (the run is then interrupted and
        retried, never continued blind).
    """
    claim = _RUN_CLAIM.get()
    if claim is not None:
        claim.check(before)


def record_run_plan(plan_id: str) -> None:
    """Once a run stored its plan, before it dispatches: name the plan in its run record.

    A run stopped after this (a signal, a crash, a lost database) may have dispatched part of
    the plan; run again, it is finished from this plan (:func:`saved_run`), never planned
    anew. Stopped before it, nothing of the plan was dispatched (dispatch reads the plan the
    record names only after this), and planning again is right. Outside a claimed run (a
    plain ``carbonsched plan``) it does nothing.

    Parameters
    ----------
    plan_id
        The stored plan's id.

    Raises
    ------
    RunTakenOverError
        The record is no longer this run's.
    StoreUnavailableError
        The database cannot be reached.
    """
    claim = _RUN_CLAIM.get()
    if claim is not None:
        claim.plan(plan_id)


class RunHeartbeat:
    """Renew a claimed run record's lease every ``lease / 3`` while its run is in progress.

    A daemon thread; a renewal that fails (the database is down) is logged and tried again at
    the next beat, so a short outage loses nothing, and a process that dies stops renewing:
    another replica takes the record over once the lease ran out
    (:meth:`~carbonsched.store.service.ServiceStore.claim_run`).

    Parameters
    ----------
    service_store
        :class:`~carbonsched.store.service.ServiceStore`.
    key, owner
        The claimed record's key (its issue time, :func:`~carbonsched.store.service.run_key`)
        and the claim's owner token.
    lease
        The lease length; renewed every third of it.
    """

    def __init__(self, service_store: Any, key: str, owner: str,
                 lease: timedelta) -> None:
        self.store = service_store
        self.key = key
        self.owner = owner
        self.lease = lease
        self.lost = False
        """True once a renewal found the record no longer this claim's."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True,
                                        name=f"run-heartbeat-{key}")

    def __enter__(self) -> RunHeartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)

    def _beat(self) -> None:
        every = self.lease.total_seconds() / 3
        while not self._stop.wait(every):
            try:
                if not self.store.renew_run(self.key, self.owner, self.lease):
                    self.lost = True
                    log.error("run for %s: the run record is no longer this run's (its lease "
                              "ran out and another replica took it over)", self.key)
                    return
            except CarbonschedError as exc:
                log.warning("run for %s: lease not renewed (%s); trying again in %.0f s",
                            self.key, exc, every)


def claim_and_run(service_store: Any, clock: Clock, pipeline: Pipeline, *, planning_date: str,
                  issued_at: datetime, trigger: str, replica: str, lease: timedelta,
                  local_day: str | None = None, metrics: Any = None) -> RunOutcome | None:
    """Run ``pipeline`` for the issue time ``issued_at`` once, under its run record.

    The record is claimed first (:meth:`~carbonsched.store.service.ServiceStore.claim_run`: one
    per issue time — one per planning date for daily runs, issued at its 00:00 UTC — under a
    lease that :class:`RunHeartbeat` renews while the pipeline runs; a record whose lease ran
    out is taken over), then the pipeline runs and the record is
    finished with its outcome. A pipeline that raises is recorded with :func:`failure_detail`
    and the exception is raised again: ``interrupted`` when it is an outage (a backend, the
    store or a signal provider unavailable; the date is claimed again ``lease`` later, by this
    command or any replica's cron), else ``failed`` (final: the error needs a person). When
    the database is down too, the record stays ``running`` with its lease, which runs out
    ``lease`` later, so the date is run again then.

    Parameters
    ----------
    service_store
        :class:`~carbonsched.store.service.ServiceStore` (run records).
    clock
        The one clock (``started_at`` and ``finished_at``).
    pipeline
        The run's work (:func:`planning_pipeline`).
    planning_date
        ``YYYY-MM-DD``, the UTC date of the issue.
    issued_at
        The plan's issue time, the record's key (the planning date's 00:00 UTC for a daily
        run; any whole hour for a rolling run every few hours).
    trigger, replica
        Recorded with the run (``scheduled``, ``check``, ``startup``, ``lease``, ``cli``; the
        process that ran it).
    lease
        The run record's lease (``settings.lease_s``).
    local_day
        The cron's local day the run belongs to (default: the planning date).
    metrics
        :class:`~carbonsched.service.metrics.ServiceMetrics` or ``None`` (counts runs by
        trigger and status).

    Returns
    -------
    RunOutcome or None
        ``None`` when the issue time has a run already (nothing was done).

    Raises
    ------
    StoreUnavailableError
        The database cannot be reached while claiming or finishing the record.
    Exception
        Whatever the pipeline raised, after it was recorded.
    BaseException
        An interruption (:class:`~carbonsched.errors.Interrupted`, ``KeyboardInterrupt``),
        after the record was finished ``interrupted`` with no retry time (the run may be run
        again at once); a note added to it says so.
    """
    from carbonsched.store.service import run_key

    key = run_key(issued_at)
    if key == run_key(planning_date):
        key = planning_date   # a daily run: named by its date where a person reads it
    existing = service_store.get_run(key)
    if existing is not None and existing["status"] not in ("running", "interrupted"):
        return None
    local_day = local_day or planning_date
    owner = service_store.claim_run(planning_date, local_day, issued_at, trigger, replica,
                                    clock.now(), lease)
    if not owner:
        return None
    log.info("run issued at %s (planning date %s, local day %s, %s on %s) started", key,
             planning_date, local_day, trigger, replica)
    with RunHeartbeat(service_store, key, owner, lease) as beat:
        def check(before: str) -> None:
            if beat.lost or not service_store.renew_run(key, owner, lease):
                beat.lost = True
                raise RunTakenOverError(
                    f"run issued at {key}: another replica took its record over (its lease "
                    f"ran out) before this run {before}; this run stops, that one's stands")

        def plan(plan_id: str) -> None:
            if beat.lost or not service_store.record_run_plan(key, owner, plan_id):
                beat.lost = True
                raise RunTakenOverError(
                    f"run issued at {key}: another replica took its record over (its lease "
                    f"ran out) after this run stored plan {plan_id[:12]}, before it "
                    "dispatched it; this run stops, that one's stands")

        claim = _RUN_CLAIM.set(_Claim(check, plan, trigger, replica, lease, metrics))
        try:
            out = pipeline(planning_date, issued_at, trigger)
        except RunTakenOverError as exc:
            log.error("%s", exc)
            _count(metrics, trigger, "taken_over")
            return None
        except Exception as exc:
            outage = isinstance(exc, BackendUnavailableError | ProviderUnavailableError)
            log.error("run issued at %s %s: %s", key,
                      "interrupted by an outage" if outage else "failed", exc)
            try:
                service_store.finish_run(
                    key, clock.now(), "interrupted" if outage else "failed",
                    owner=owner, retry_after=lease if outage else None,
                    error=failure_detail(exc))
            except Exception as rec_exc:  # the database died too: the lease runs out
                log.error("run for %s: the failure could not be recorded (%s); the record "
                          "stays 'running' until its lease runs out (%.0f s)", key,
                          rec_exc, lease.total_seconds())
            _count(metrics, trigger, "failed")
            raise
        except BaseException as exc:   # a signal (Interrupted, KeyboardInterrupt): no failure
            exc.add_note(_record_interrupted(service_store, clock, key, owner, lease, exc))
            _count(metrics, trigger, "interrupted")
            raise
        finally:
            _RUN_CLAIM.reset(claim)
        extra = {"catalog": out.catalog} if out.catalog else {}
        if not service_store.finish_run(key, clock.now(), out.status, owner=owner,
                                        plan_id=out.plan_id, solver_status=out.solver_status,
                                        dispatch=out.dispatch, notes=out.notes, **extra):
            log.error("run for %s finished (%s) after another replica took its record over; "
                      "the record keeps that replica's outcome", key, out.status)
    _count(metrics, trigger, out.status)
    return out


def _record_interrupted(service_store: Any, clock: Clock, key: str, owner: str,
                        lease: timedelta, exc: BaseException) -> str:
    """Record the run stopped by ``exc`` ``interrupted``, claimable again at once; say what was.

    The process was asked to stop: the run did not fail and may be run again now (no lease to
    wait out, as for a process that died). When the record cannot be written it stays
    ``running`` until its lease runs out; the returned note says which.
    """
    why = f"interrupted by {exc or type(exc).__name__} (the process was asked to stop)"
    log.warning("run issued at %s %s", key, why)
    try:
        if service_store.finish_run(key, clock.now(), "interrupted", owner=owner,
                                    retry_after=None, error=why):
            return f"run {key} recorded interrupted (run it again now)"
        return f"run {key} was taken over by another replica before it stopped"
    except Exception as rec_exc:  # noqa: BLE001 - the database is gone too: the lease runs out
        return (f"run {key} stays 'running' until its lease runs out "
                f"({lease.total_seconds():.0f} s): {rec_exc}")


def _count(metrics: Any, trigger: str, status: str) -> None:
    if metrics is not None:
        metrics.plan_runs.labels(trigger=trigger, status=status).inc()


def execute_run(settings: Any, service_store: Any, clock: Clock, *, planning_date: str,
                trigger: str, replica: str, issued_at: datetime | None = None,
                local_day: str | None = None, dispatch: DispatchStep | None = None,
                metrics: Any = None, on_plan: Callable[[str], None] | None = None,
                out_file: str | Path | None = None) -> RunOutcome | None:
    """The run path: claim the date's run record, plan, write, store, dispatch, record.

    :func:`planning_pipeline` under :func:`claim_and_run`, with the run record's lease of
    ``settings.lease_s``. The catalog is loaded before the record is claimed, so a
    catalog that cannot be read claims nothing.

    Parameters
    ----------
    settings
        :class:`~carbonsched.config.Settings`: catalog, workload file, data folder, solver,
        time limit, horizon, rolling mode, lease.
    service_store
        :class:`~carbonsched.store.service.ServiceStore`.
    clock
        The one clock.
    planning_date
        ``YYYY-MM-DD``.
    trigger, replica
        Recorded with the run.
    issued_at
        Default: the planning date's 00:00 UTC.
    local_day
        The cron's local day (default: the planning date).
    dispatch, metrics, on_plan, out_file
        As for :func:`planning_pipeline`.

    Returns
    -------
    RunOutcome or None
        ``None`` when the planning date has a run already.

    Raises
    ------
    Exception
        What the run raised, after the run record was finished as ``failed``.
    """
    from carbonsched.timeaxis import day_start_utc

    pipeline = planning_pipeline(settings, service_store, clock, dispatch, metrics, on_plan,
                                 out_file)
    if issued_at is None:
        issued_at = day_start_utc(planning_date).to_pydatetime()
    return claim_and_run(service_store, clock, pipeline, planning_date=planning_date,
                         issued_at=issued_at, trigger=trigger, replica=replica,
                         lease=timedelta(seconds=settings.lease_s),
                         local_day=local_day, metrics=metrics)


@dataclass
class _Planned:
    """One run's plan before it is stored, and how to record it."""

    doc: dict[str, Any]
    forecasts: pd.DataFrame
    api_ids: set[str]
    record: Callable[[Any, datetime], None]
    """``record(service_store, now)``: rolling state and the API jobs' states."""
    dispatch_kw: dict[str, Any] = field(default_factory=dict)


def planning_pipeline(settings: Any, service_store: Any, clock: Clock,
                      dispatch: DispatchStep | None = None, metrics: Any = None,
                      on_plan: Callable[[str], None] | None = None,
                      out_file: str | Path | None = None) -> Pipeline:
    """The work of one run, once its record is claimed (see :func:`execute_run`).

    Each call reads the configured workload (``settings.workload_file``, or the catalog's demo
    day), adds the jobs submitted through the API and plans the date: the daily plan
    (:func:`carbonsched.pipeline.daily.run_daily_plan`), or with ``settings.rolling`` one
    rolling step (:func:`carbonsched.service.rolling.rolling_step`). With
    ``settings.providers_file`` both plan on the providers' history and published forecasts
    (:mod:`carbonsched.service.providers`: the process's one provider client set, a new run
    budget per run; an outage is a named fallback in the notes). The document gets a
    ``run`` section (planning date, issue time, trigger, API jobs), is written to ``out_file``,
    then stored with its forecasts; the rolling state and the API jobs' states are recorded,
    ``on_plan`` is told, and the plan is dispatched (:func:`finish_run`; a rolling step with
    ``commit_before`` = the next run). Before planning and after dispatching, the API jobs
    dispatch submitted take their state from the outbox (:func:`sync_dispatched_jobs`); after
    dispatching, those it refused without an outbox row end ``Failed``
    (:func:`end_refused_jobs`, named in the run's notes). The run record names the plan once
    it is stored, before any of it is dispatched (:func:`record_run_plan`); a run stopped
    after that (its dispatch may have submitted units) is finished from that plan when run
    again, daily or rolling, never planned again: dispatched again (the outbox submits each
    unit once), then a rolling run's state saved from it unless the stopped attempt saved it,
    then the API jobs' records. A rolling run issued before the newest run of the state is
    refused (the pipeline raises :class:`InputError`; :func:`saved_run`).

    Parameters
    ----------
    settings
        :class:`~carbonsched.config.Settings`.
    service_store
        :class:`~carbonsched.store.service.ServiceStore`.
    clock
        The one clock (handed to the dispatch step).
    dispatch
        ``dispatch(store, plan_id, catalog, *, clock=...)`` or ``None``.
    metrics
        :class:`~carbonsched.service.metrics.ServiceMetrics` or ``None``.
    on_plan
        Called with the new plan id once it is stored (the API reloads its book).
    out_file
        Also write the plan document here (JSON), before it is stored.

    Raises
    ------
    InputError
        The catalog cannot be loaded (when the pipeline is built, before any run).
    CatalogError
        The providers file cannot be read (when the pipeline is built, before any run).
    """
    from carbonsched.catalog import load_catalog
    from carbonsched.workload.files import demo_workload, read_workload

    catalog = load_catalog(settings.catalog)
    providers = service_providers(settings, service_store.store)
    # the model choices of every site and issue hour stay fitted for their refit period
    from carbonsched.pipeline.daily import size_model_cache

    size_model_cache(len(catalog.sites),
                     settings.rolling_run_every_hours if settings.rolling else 24)

    def plan_step(pdate: str, t: pd.Timestamp, wl: Workload, trigger: str
                  ) -> tuple[_Planned, dict[str, Any], str]:
        """Plan the run, write its plan file and store it: (step, document, run note)."""
        with run_loaders(providers, clock) as loaders:
            step = (_plan_rolling(settings, service_store, catalog, wl, pdate, t, loaders)
                    if settings.rolling
                    else _plan_daily(settings, service_store, wl, pdate, t, loaders))
            if loaders.prefetch is not None:
                # a run that started at or after its issue time could not fetch its own
                # forecasts, nor will the next one of its cadence: keep them for it now
                every = settings.rolling_run_every_hours if settings.rolling else 24
                pre = loaders.prefetch(catalog, t, t + pd.Timedelta(hours=every),
                                       settings.horizon_hours)
                if pre:
                    step.doc.setdefault("notes", []).append(pre)
        doc = step.doc
        doc["run"] = {"planning_date": pdate, "issued_at": t.isoformat(), "trigger": trigger,
                      "api_jobs": len(step.api_ids)}
        note = replaced_plans_note(service_store, catalog.name, pdate, trigger)
        if note:
            log.warning("run for %s: %s", pdate, note)
            doc.setdefault("notes", []).append(note)
        read_plan_document(doc, "the run's plan document")  # with its run and rolling parts
        if out_file:
            write_plan_file(out_file, doc)
        still_ours("stored its plan")
        service_store.store.save_plan(doc, step.forecasts)
        # before anything of it is dispatched: a stop from here on is finished from this plan
        record_run_plan(doc["plan_id"])
        if not settings.rolling:
            still_ours("recorded its jobs' states")
            step.record(service_store, clock.now())
        return step, doc, note

    def run(pdate: str, issued_at: datetime, trigger: str) -> RunOutcome:
        t0 = _time.perf_counter()
        wl = (read_workload(settings.workload_file) if settings.workload_file
              else demo_workload(catalog, pdate))
        t = pd.Timestamp(issued_at).tz_convert("UTC")
        # a run stopped once it had stored its plan (its dispatch may have submitted units)
        # is finished from that plan, never planned again; a rolling run issued before the
        # newest run of the rolling state is refused
        saved = saved_run(service_store, t, rolling=settings.rolling)
        if settings.rolling and saved is None:
            # an earlier run stopped after it stored its plan (it may have dispatched part of
            # it) is finished first, on this one run path; this run then plans on its state
            finish_stopped_runs(service_store, clock, run, t)
        # API jobs dispatch submitted since the last run leave Planned: no plan places them again
        sync_dispatched_jobs(service_store, clock.now())
        if saved is not None:
            step = (_resume_rolling_or_wait(service_store, catalog, wl, t, saved)
                    if settings.rolling
                    else _resume_daily(service_store, catalog, wl, t, saved))
            doc = step.doc
            note = resumed_note(t, saved)
            log.warning("run for %s: %s", pdate, note)
            if out_file:
                write_plan_file(out_file, doc)
            if not settings.rolling or saved.state_saved:
                # recorded before dispatch, as the first attempt did (a daily run), or because
                # the rolling state is saved: the API jobs' records follow the plan whatever
                # dispatch does now
                still_ours("recorded its jobs' states")
                step.record(service_store, clock.now())
        else:
            step, doc, note = plan_step(pdate, t, wl, trigger)
        if on_plan is not None:
            on_plan(doc["plan_id"])
        still_ours("dispatched its plan")
        dispatched: list[Any] = []
        run_status, status, disp, outcome, said = finish_run(
            doc, service_store, catalog, clock, _keeping(dispatch, dispatched), metrics,
            **step.dispatch_kw)
        if said:
            log.warning("run for %s: %s", pdate, said)
            note = f"{note}; {said}" if note else said
        if settings.rolling and (saved is None or not saved.state_saved):
            # recorded once dispatch wrote its intents: a rolling state that says "committed"
            # before any intent exists loses the jobs if dispatch never happens (a crash, a
            # failed dispatch); a stop before it is finished from the stored plan when run
            # again (saved_run): dispatched again, then recorded here from that plan
            if run_status == "dispatch_failed":
                kept = ("the rolling state was not advanced (dispatch failed): the next run "
                        "plans this run's work again")
                log.error("run for %s: %s", pdate, kept)
                note = f"{note}; {kept}" if note else kept
            else:
                still_ours("recorded its rolling state")
                step.record(service_store, clock.now())
        elif settings.rolling and run_status == "dispatch_failed":
            pid = doc["plan_id"][:12]
            kept = (f"the rolling state holds plan {pid}'s commitments (saved before the "
                    f"stop): once the fault is fixed, run `carbonsched dispatch {pid}`")
            log.error("run for %s: %s", pdate, kept)
            note = f"{note}; {kept}"
        if dispatch is not None:
            sync_dispatched_jobs(service_store, clock.now())
            # after the rolling state's record, which would set them Planned or Pending again
            refused = [j for res in dispatched
                       for j in end_refused_jobs(service_store, res, clock.now())]
            if refused:
                ended = refused_note(refused)
                log.warning("run for %s: %s", pdate, ended)
                note = f"{note}; {ended}" if note else ended
        log.info("pipeline: plan %s for %s (%s) in %.1f s; %s", doc["plan_id"], pdate, status,
                 _time.perf_counter() - t0, disp)
        return RunOutcome(run_status, doc["plan_id"], status, disp, note, catalog.name,
                          outcome)

    return run


def check_store_catalog(service_store: Any, catalog: str) -> None:
    """Refuse to run the pipeline of ``catalog`` on a store whose runs planned another catalog.

    Run records are keyed by issue time alone: on a store shared by two catalogs, the
    first catalog's run of a date would stop the second's ("already has a run"), and the
    service would serve the newest plan of its own catalog among the other's runs. One store
    per served catalog is the rule (``docs/service.md``); plans made by ``carbonsched plan``
    carry their catalog and may share a store.

    Raises
    ------
    InputError
        The store holds run records of another catalog: names them, the store and the fix.
    """
    others = {c: n for c, n in service_store.run_catalogs().items() if c != catalog}
    if others:
        held = ", ".join(f"{c!r} ({n} run(s))" for c, n in sorted(others.items()))
        raise InputError(
            f"the store {service_store.safe_url()} holds the runs of catalog(s) {held}, not "
            f"of {catalog!r}; runs are kept one per issue time, so two catalogs cannot "
            "share a store's runs: give this catalog a store of its own "
            "(CARBONSCHED_DATABASE_URL), or serve the catalog the store was made for")


def replaced_plans_note(service_store: Any, catalog: str, pdate: str, trigger: str) -> str:
    """The note of a run whose plan replaces plans made outside the service, or ``""``.

    The service serves the newest plan of its catalog; a plan of the same catalog and date
    made outside the run path (``carbonsched plan`` writes no ``run`` section) is replaced as
    the served plan by the run's. It stays in the store; the note names it and says how to
    keep the service from planning over it.

    Parameters
    ----------
    service_store
        :class:`~carbonsched.store.service.ServiceStore`.
    catalog, pdate
        The run's catalog name and planning date (``YYYY-MM-DD``).
    trigger
        The run's trigger (``startup`` names the setting that turns start-up runs off).
    """
    store = service_store.store
    theirs = [r["plan_id"] for r in store.list_plans(pdate)
              if r["catalog"] == catalog and "run" not in store.get_plan(r["plan_id"])]
    if not theirs:
        return ""
    how = ("give the service your workload (--jobs, CARBONSCHED_WORKLOAD_FILE)"
           + (" or turn the start-up run off (CARBONSCHED_CRON_STARTUP_RUN=false)"
              if trigger == "startup" else ""))
    return (f"this {trigger} run's plan replaces plan(s) {', '.join(theirs)} for {pdate}, made "
            "outside the service (e.g. `carbonsched plan`), as the plan the service serves; "
            f"they stay in the store (`carbonsched plans show ID`); to serve your own plan, "
            f"{how}")


@dataclass(frozen=True)
class FileWork:
    """The workload file's work a run plans, and what dispatch already holds of it."""

    workload: Workload
    """The work left to plan: the file's jobs less those dispatch or the store holds."""
    notes: list[str]
    """One note per kind of job left out (final, dispatched and not ended); empty when none."""
    running: list[Any]
    """:class:`~carbonsched.domain.RunningWork` of the left-out jobs' units that have not
    ended: the GPUs and IT power they hold in the horizon (empty without ``horizon_start``)."""


def without_dispatched_jobs(store: Any, wl: Workload, known: Collection[str] = (),
                            horizon_start: pd.Timestamp | None = None, *,
                            source: str = "of the workload file") -> FileWork:
    """``wl`` without the workload file's jobs that dispatch holds or the store holds final.

    A static workload file planned every day still lists the jobs an earlier plan dispatched.
    They are not new work: one that is final under its id (every unit of its claim ended, or
    the store pruned its records: :func:`carbonsched.dispatch.outbox.final_jobs`) is planned
    neither again nor as a new ``DeadlinePassed``; one dispatch holds and that has not ended
    (its units ``Pending``, ``Dispatched``, ``Running`` or ``Paused``:
    :func:`carbonsched.dispatch.outbox.dispatched_jobs`) is not placed a second time either,
    and the units it still runs hold their GPUs and power in the horizon as running work
    (:func:`dispatched_running_work`). One note per kind names them.

    Parameters
    ----------
    store
        The store (:class:`~carbonsched.store.Store`).
    wl
        The workload file's work.
    known
        Ids not looked up (kept): the rolling state's own, which it never plans again.
    horizon_start
        The run's first slot (tz-aware UTC): the running work is that of the horizon from
        it; ``None``: no running work is read (``FileWork.running`` is empty).
    source
        Where the jobs come from, as the notes name them (``"of the workload file"``,
        ``"submitted through the API"``: :func:`without_dispatched_api_jobs`).

    Returns
    -------
    FileWork
        The workload left to plan, the notes and the running work.
    """
    from carbonsched.dispatch.outbox import dispatched_jobs, final_jobs
    from carbonsched.domain import TERMINAL_STATES

    ids = {j.id for j in wl.jobs} - set(known)
    held = dispatched_jobs(store, ids)
    final = final_jobs(store, ids, held)
    live = {i: d for i, d in held.items() if i not in final and d.state not in TERMINAL_STATES}
    notes: list[str] = []
    if final:
        f = sorted(final)
        notes.append(f"{len(f)} job(s) {source} were not planned again: "
                     + "; ".join(final[i] for i in f[:5]) + (" ..." if len(f) > 5 else ""))
    running: list[Any] = []
    if live:
        jobs = {j.id: j for j in wl.jobs if j.id in live}
        if horizon_start is not None:
            running = dispatched_running_work(store, live, jobs, horizon_start)
        lv = sorted(live)
        notes.append(
            f"{len(lv)} job(s) {source} were not planned again: dispatch holds "
            "them and they have not ended ("
            + "; ".join(f"job {i!r} {live[i].state}, dispatched from plan "
                        f"{live[i].plan_id[:12]}" for i in lv[:5])
            + (" ..." if len(lv) > 5 else "") + "); a job is dispatched once under its id, "
            "so the GPUs and power its units hold in this horizon are held as running work, "
            "not planned again")
    if not final and not live:
        return FileWork(wl, [], [])
    return FileWork(Workload(jobs=[j for j in wl.jobs if j.id not in final and j.id not in live],
                             inference=wl.inference), notes, running)


API_LIVE_STATES = ("Dispatched", "Running", "Paused")
"""States of an API job dispatch holds and that has not ended (:func:`sync_dispatched_jobs`)."""


def without_dispatched_api_jobs(service_store: Any, snap: Submitted,
                                known: Collection[str] = (),
                                horizon_start: pd.Timestamp | None = None
                                ) -> tuple[set[str], FileWork]:
    """The API's jobs that dispatch holds: not planned again, their running units held.

    An API job is dispatched once under its id, from the plan that first wrote its claim
    (``<job>#0``). Its record follows the outbox (:func:`sync_dispatched_jobs`), but a run
    stopped after its dispatch wrote intents and before it recorded its jobs' states (then
    given up: ``carbonsched runs abandon``) leaves such jobs ``Pending``: planned again, they
    would be booked twice while their units run as the stopped plan placed them. So, as for
    the workload file's jobs (:func:`without_dispatched_jobs`): every API job of ``snap``
    (``Pending``, ``Planned``) and every one recorded ``Dispatched``, ``Running`` or
    ``Paused``, less ``known``, is looked up in the outbox; the ones it holds are left out
    of the plan, and the units that have not ended hold their GPUs and power in the horizon
    as the planner's running work.

    Parameters
    ----------
    service_store
        :class:`~carbonsched.store.service.ServiceStore`.
    snap
        The run's :func:`submitted_jobs`.
    known
        Ids not looked up: those the rolling state holds committed (it holds their pieces'
        capacity itself), the unrunnable ones (``NameConflict``: a workload file's job of the
        same id may hold the claim) and the workload file's own (looked up as file jobs).
    horizon_start
        The run's first slot (tz-aware UTC); ``None``: no running work is read.

    Returns
    -------
    held : set of str
        The ids looked up that dispatch holds (live or final): not to plan.
    work : FileWork
        Its ``running`` work and ``notes`` (``workload`` is not used).
    """
    skip = set(known) | set(snap.invalid)
    jobs = {job.id: job for _, job in snap if job.id not in skip}
    for r in service_store.jobs(states=API_LIVE_STATES):
        if r["job_id"] in skip or r["job_id"] in jobs:
            continue
        try:
            jobs[r["job_id"]] = job_from_spec(r["spec"])
        except (ValueError, InputError):    # a spec the schema now refuses: nothing to hold
            continue
    if not jobs:
        return set(), FileWork(Workload(jobs=[], inference=[]), [], [])
    work = without_dispatched_jobs(service_store.store,
                                   Workload(jobs=list(jobs.values()), inference=[]),
                                   horizon_start=horizon_start,
                                   source="submitted through the API")
    kept = {j.id for j in work.workload.jobs}
    return set(jobs) - kept, work


def dispatched_running_work(store: Any, held: dict[str, Any], jobs: dict[str, Job],
                            horizon_start: pd.Timestamp) -> list[Any]:
    """The GPUs and power the units of dispatched jobs that have not ended hold in a horizon.

    Each unit (:attr:`~carbonsched.dispatch.outbox.DispatchedJob.live`) holds its placement
    as the plan it was dispatched from placed it (site, GPU type and count, a slice's GPU, a
    gang's domains; read from the stored plan, else the job's own GPUs), over its planned
    span moved by its start's delay when its backend started it later than planned.
    :func:`carbonsched.plan.rolling.running_work` turns the pieces into the planner's running
    work, so a daily run holds them as a rolling run holds its committed pieces; a unit whose
    span ends by ``horizon_start`` holds nothing.

    Parameters
    ----------
    store
        The store (:class:`~carbonsched.store.Store`) holding the plans.
    held
        Job id -> :class:`~carbonsched.dispatch.outbox.DispatchedJob` (not ended).
    jobs
        Job id -> :class:`~carbonsched.domain.Job`, for every id of ``held``: its IT power
        [kW] and GPU slice.
    horizon_start
        The run's first slot (tz-aware UTC).

    Returns
    -------
    list of RunningWork
        One per unit still holding capacity at or after ``horizon_start``.
    """
    from carbonsched.domain import Placement
    from carbonsched.plan.rolling import running_work

    placed: dict[tuple[str, int], dict[str, Any]] = {}
    for plan_id in sorted({d.plan_id for d in held.values()}):
        try:
            doc = store.get_plan(plan_id)
        except InputError:          # the plan is gone: the unit's own span and the job's GPUs
            continue
        for p in doc.get("placements", []):
            d = held.get(p["job_id"])
            if d is not None and d.plan_id == plan_id:
                placed[(p["job_id"], int(p.get("piece", 0)))] = p
    pieces: dict[str, list[Placement]] = {}
    for jid, d in held.items():
        job = jobs[jid]
        for u in d.live:
            p = placed.get((jid, u.piece), {})
            start, end = pd.Timestamp(u.planned_start), pd.Timestamp(u.planned_end)
            if u.actual_start is not None and pd.Timestamp(u.actual_start) > start:
                end += pd.Timestamp(u.actual_start) - start    # started late: ends late
                start = pd.Timestamp(u.actual_start)
            pieces.setdefault(jid, []).append(Placement(
                job_id=jid, site=u.site, start=start, end=end,
                gpu_type=str(p.get("gpu_type", job.gpu_type)),
                gpus=int(p.get("gpus", job.gpus)), energy_kwh=0.0, emissions_kg=0.0,
                piece=u.piece, gpu_index=p.get("gpu_index"), mig_start=p.get("mig_start"),
                domains=tuple(p.get("domains") or ())))
    return running_work(pieces, jobs, pd.DatetimeIndex([pd.Timestamp(horizon_start)]))


def _plan_daily(settings: Any, service_store: Any, wl: Workload, pdate: str,
                t: pd.Timestamp, loaders: RunLoaders = NO_PROVIDERS) -> _Planned:
    """The daily plan of ``pdate`` with the API jobs whose window overlaps the horizon.

    ``loaders``: the providers' history and published forecasts, or the files (default).
    """
    from carbonsched.catalog import load_catalog
    from carbonsched.pipeline.daily import run_daily_plan

    snap = submitted_jobs(service_store)      # one snapshot of the API's jobs for the run
    bad = unrunnable_submitted_jobs(service_store, load_catalog(settings.catalog), wl, snap)
    # the file's jobs dispatch holds are not new work; the units still running hold capacity
    # from the plan's first slot (the date's 00:00 UTC: run_daily_plan's horizon)
    start = pd.Timestamp(pdate, tz="UTC")
    file_work = without_dispatched_jobs(service_store.store, wl, horizon_start=start)
    # so are the API's: one an earlier plan dispatched is left out (even if its record still
    # says Pending), and its units still running hold their GPUs and power too
    api_held, api_work = without_dispatched_api_jobs(
        service_store, snap, set(bad) | {j.id for j in wl.jobs}, start)
    wl, api_ids = with_submitted_jobs(file_work.workload, service_store, t,
                                      settings.horizon_hours, set(bad) | api_held, snap)
    expired = [j for j in expired_submitted_jobs(service_store, t, snap)
               if j.id not in bad and j.id not in api_held]
    daily = run_daily_plan(pdate, settings.catalog, wl, settings.data_dir, settings.solver,
                           settings.time_limit_s, settings.horizon_hours,
                           signal_loader=loaders.signal_loader,
                           running=file_work.running + api_work.running,
                           exogenous_loader=loaders.exogenous_loader)
    doc = daily.document
    if expired:
        ids = sorted(j.id for j in expired)
        doc["notes"].append(f"{len(ids)} job(s) submitted through the API ended with "
                            "DeadlinePassed: their latest start (deadline - duration) is "
                            "before this run, so no plan can finish them by their deadline "
                            f"({', '.join(ids[:10])}{', ...' if len(ids) > 10 else ''})")

    if bad:
        doc["notes"].append(unrunnable_note(bad))
    doc["notes"].extend(file_work.notes + api_work.notes)

    def record(db: Any, now: datetime) -> None:
        update_submitted(db, doc, api_ids, now)
        end_expired_jobs(db, expired, t, now)
        end_unrunnable_jobs(db, bad, now)
        sync_dispatched_jobs(db, now, pending=api_held)   # a Pending one dispatch holds

    return _Planned(doc, daily.forecasts, api_ids, record)


def _plan_rolling(settings: Any, service_store: Any, catalog: Catalog, wl: Workload,
                  pdate: str, t: pd.Timestamp, loaders: RunLoaders = NO_PROVIDERS) -> _Planned:
    """One rolling step: new work is ``wl`` plus every API job not committed yet.

    ``loaders``: the providers' history and published forecasts, or the files (default).

    Recorded: the rolling state, then the API jobs (committed → ``Planned``; deferred →
    ``Pending`` with reason ``NotCommitted``; ended → ``Failed`` with the reason).
    """
    from carbonsched.domain import Unplaced
    from carbonsched.service.rolling import rolling_step
    from carbonsched.store.rolling_state import RollingStore

    snap = submitted_jobs(service_store)      # one snapshot of the API's jobs for the run
    bad = _unrunnable_rolling(service_store, catalog, wl, snap)
    # the file's jobs whose id the store holds final (pruned) or dispatch holds (from a daily
    # run's plan, or a stopped run given up) are not new work, nor are the API's: every job
    # but those the rolling state committed (it holds their capacity itself) is looked up
    rs = RollingStore(service_store.store)
    file_ids = {j.id for j in wl.jobs}
    committed = rs.holds(file_ids | {job.id for _, job in snap}
                         | {r["job_id"] for r in service_store.jobs(states=API_LIVE_STATES)},
                         states=("Dispatched",))
    file_work = without_dispatched_jobs(service_store.store, wl, committed, t)
    api_held, api_work = without_dispatched_api_jobs(service_store, snap,
                                                     committed | set(bad) | file_ids, t)
    api = [job for r, job in snap if r["job_id"] not in bad and r["job_id"] not in api_held]
    api_ids = {j.id for j in api}
    # a bad job already pending in the rolling state ends there too (the planner would
    # refuse the whole run for a site the catalog lost)
    end_first = [Unplaced(jid, ReasonCode(reason), detail)
                 for jid, (reason, detail) in bad.items()
                 if reason == str(ReasonCode.UNKNOWN_SITE)]
    # so does a job the state still carries as pending that dispatch holds: a run committed
    # and dispatched it, then stopped before it saved the state (and was given up); it runs as
    # that run placed it, its units held above, and is never planned a second time
    held = (file_ids - {j.id for j in file_work.workload.jobs}) | api_held
    end_first += [Unplaced(jid, ReasonCode.ALREADY_DISPATCHED,
                           "dispatch holds it (its claim is in the outbox) from a run that did "
                           "not record it in the rolling state: it runs as that run's plan "
                           "placed it, its units held as running work, never planned again")
                  for jid in sorted(rs.holds(held, states=("Pending",)))]
    step = rolling_step(service_store.store, catalog, settings.catalog, pdate, t,
                        list(file_work.workload.jobs) + api, wl, settings.data_dir,
                        settings.solver,
                        settings.time_limit_s, settings.horizon_hours,
                        settings.rolling_run_every_hours,
                        signal_loader=loaders.signal_loader,
                        exogenous_loader=loaders.exogenous_loader, end_first=end_first,
                        dispatched=file_work.running + api_work.running)
    doc = step.daily.document
    if bad:
        doc["notes"].append(unrunnable_note(bad))
    doc["notes"].extend(file_work.notes + api_work.notes)

    def record(db: Any, now: datetime) -> None:
        step.rolling_store.save(step.planner.state, step.run, doc["plan_id"], now)
        _update_rolling_jobs(db, doc, api_ids, now)
        end_unrunnable_jobs(db, bad, now)
        sync_dispatched_jobs(db, now, pending=api_held)   # a Pending one dispatch holds

    return _Planned(doc, step.daily.forecasts, api_ids, record,
                    {"commit_before": step.run.commit_before.to_pydatetime()})


def _unrunnable_rolling(service_store: Any, catalog: Catalog, wl: Workload,
                        snap: Submitted) -> dict[str, tuple[str, str]]:
    """:func:`unrunnable_submitted_jobs` of a rolling run: an API job that came first keeps its id.

    A ``NameConflict`` with the workload file is no conflict when the rolling state holds the
    API job itself under the id: it keeps it, and the workload file's job is the one ignored
    (:func:`~carbonsched.service.rolling.rolling_step` says so).
    """
    from carbonsched.store.rolling_state import RollingStore

    bad = unrunnable_submitted_jobs(service_store, catalog, wl, snap)
    clashes = [j for j, (reason, _) in bad.items() if reason == str(ReasonCode.NAME_CONFLICT)]
    # the rolling state is read here only to settle an id clash (rolling_step reads it anyway)
    held = RollingStore(service_store.store).held_jobs(clashes) if clashes else {}
    for jid in clashes:
        if jid in held and held[jid] == next(j for r, j in snap if r["job_id"] == jid):
            del bad[jid]
    return bad


@dataclass(frozen=True)
class SavedRun:
    """A run stopped after it stored its plan, to finish from that plan (:func:`saved_run`)."""

    plan_id: str
    """The plan the stopped attempt stored (and may have dispatched part of)."""
    state_saved: bool
    """A rolling run: its rolling state is saved from the plan (``False``: stopped before;
    always ``False`` for a daily run)."""


def saved_run(service_store: Any, issued_at: datetime | pd.Timestamp, *,
              rolling: bool) -> SavedRun | None:
    """Where a run issued at ``issued_at`` stands: new, or stopped after it stored its plan.

    A run names its plan in its run record once it stored it, before it dispatches any of it
    (:func:`record_run_plan`). A run stopped after that (a signal, a crash, kill -9, a lost
    database: its record is ``interrupted``, or ``running`` until its lease ran out) may have
    submitted units already: it is finished from that plan, never planned again, as a new plan
    could place the same jobs at other sites or hours than the units running on the
    clusters. A run stopped before it named its plan dispatched nothing (dispatch reads the
    plan only after) and is planned again.

    A rolling run also reads the rolling state: it is as of the newest run that saved it
    (:meth:`~carbonsched.store.rolling_state.RollingStore.last_run`). A run issued at that
    very time saved its state and was stopped before its record was finished: it is finished
    from the plan the state was saved from (``state_saved``). A run issued before it is
    refused: the newer run already committed the work starting before its own next run and
    carried the rest, so an earlier run planned on that state would commit work in hours the
    newer run has given away (and the state before the newer run is not kept).

    Parameters
    ----------
    service_store
        :class:`~carbonsched.store.service.ServiceStore`.
    issued_at
        The run's issue time (tz-aware).
    rolling
        The service runs rolling steps (``settings.rolling``).

    Returns
    -------
    SavedRun or None
        The plan to finish the run from, or ``None``: plan it.

    Raises
    ------
    InputError
        A rolling ``issued_at`` before the newest saved run: the message names that run, its
        record's status and what to do.
    """
    from carbonsched.store.rolling_state import RollingStore
    from carbonsched.store.service import RETRYABLE, run_key

    t = pd.Timestamp(issued_at).tz_convert("UTC")
    if rolling:
        last, plan_id = RollingStore(service_store.store).last_run()
        if last == t and plan_id:
            return SavedRun(plan_id, state_saved=True)
        if last == t:
            raise InputError(f"rolling run issued at {run_key(t)}: the rolling state is saved "
                             "as of this run but names no plan to finish it from; the state "
                             "was written outside the service's run path")
        if last is not None and last > t:
            _refuse_before(service_store, t, last, plan_id)
    rec = service_store.get_run(t.to_pydatetime())
    if rec is not None and rec["status"] in RETRYABLE and rec["plan_id"]:
        return SavedRun(rec["plan_id"], state_saved=False)
    return None


def _refuse_before(service_store: Any, t: pd.Timestamp, last: pd.Timestamp,
                   plan_id: str | None) -> None:
    """Refuse a rolling run issued at ``t``, before ``last``, the newest run of the state."""
    from carbonsched.store.service import RETRYABLE, run_key

    rec = service_store.get_run(last.to_pydatetime())
    status = rec["status"] if rec is not None else "no run record"
    newer = f"issued at {run_key(last)} ({status}, plan {str(plan_id)[:12]})"
    if rec is not None and rec["status"] in RETRYABLE:
        how = ("finish that run first: `carbonsched plan --dispatch --rolling` (without "
               "--date) runs it again while it is the newest due run, and the service's cron "
               "takes it over; it is finished from its saved state, not planned again")
    else:
        how = ("a missed rolling run is not run afterwards: the newer run planned what it "
               "would have (waiting jobs carried with their own deadlines; those whose window "
               "closed ended DeadlinePassed); drop --date to run the run due now, or for a plan "
               f"of {t:%Y-%m-%d} that commits nothing run `carbonsched plan --date "
               f"{t:%Y-%m-%d} --no-store --out plan.json`")
    raise InputError(
        f"rolling run issued at {run_key(t)} is before the newest run of the rolling state, "
        f"{newer}: that run committed the work starting before its next run and carried the "
        "rest, so no run issued earlier can be planned on its state; " + how)


def resumed_note(issued_at: pd.Timestamp, saved: SavedRun) -> str:
    """The note of a run finished from the plan an earlier attempt stored (:func:`saved_run`).

    Parameters
    ----------
    issued_at
        The run's issue time (tz-aware UTC).
    saved
        What the stopped attempt left: its plan id, and whether it saved its rolling state.

    Returns
    -------
    str
        One sentence for the plan's notes.
    """
    from carbonsched.store.service import run_key

    pid = saved.plan_id[:12]
    when = ("after it saved its rolling state" if saved.state_saved else
            "after it stored its plan, before its record was finished")
    return (f"run {run_key(issued_at)} was stopped {when} (plan {pid}): finished from that "
            "plan, not planned again; dispatch submits only what is not on its backend yet "
            "(each unit once, by its outbox key)")


def _stored_plan(service_store: Any, t: pd.Timestamp, plan_id: str,
                 rolling: bool) -> dict[str, Any]:
    """The plan document a stopped run stored, or an error saying why it cannot be finished.

    Raises
    ------
    InputError
        The store no longer holds the plan, or the plan is a rolling step and the service no
        longer runs rolling steps (or the other way round).
    """
    from carbonsched.store.service import run_key

    try:
        doc = service_store.store.get_plan(plan_id)
    except InputError as exc:
        raise InputError(
            f"run issued at {run_key(t)} was stopped after it stored plan {plan_id}, which "
            f"the store no longer holds ({exc}): it cannot be finished from it, and planning "
            "it again could place its dispatched units elsewhere; `carbonsched status` shows "
            "what dispatch holds") from exc
    if bool(doc.get("rolling")) != rolling:
        made, now = ("a rolling step", "daily runs") if doc.get("rolling") else (
            "a daily plan", "rolling steps")
        raise InputError(
            f"run issued at {run_key(t)} was stopped after it stored plan {plan_id[:12]}, "
            f"{made}, and the service now runs {now} (CARBONSCHED_ROLLING changed): finish it "
            "with the setting it was started with, then change it")
    return doc


def finish_stopped_runs(service_store: Any, clock: Clock, pipeline: Pipeline,
                        issued_at: datetime | pd.Timestamp) -> list[str]:
    """Before a rolling run plans: finish the earlier runs stopped after they stored their plans.

    A rolling run issued at T stopped after it named its plan in its record
    (:func:`record_run_plan`) and before it saved the rolling state (kill -9, a lost node,
    SIGTERM) may have dispatched part of its plan, and the cron claims only the newest due
    issue time: a later run planned on the state as of before T would plan T's jobs again
    (committing placements that are not what runs, while T's running units hold no GPUs or
    power in its plan), and T, before the newest run, would be refused for good. So each
    retryable record issued after the state's last run and before ``issued_at`` that names a
    plan (:meth:`~carbonsched.store.service.ServiceStore.stopped_runs`), oldest first, is
    claimed as a restart claims it (:func:`claim_and_run`: a live lease is never taken, so two
    replicas never both finish it) and finished by ``pipeline`` from its plan, as a run of T
    itself would be (dispatched again, its state saved from the plan, its API jobs recorded,
    its record done with :func:`resumed_note`). The claim's trigger, replica and lease are the
    running claim's (:func:`claim_and_run`'s).

    Parameters
    ----------
    service_store
        :class:`~carbonsched.store.service.ServiceStore`.
    clock
        The one clock.
    pipeline
        The run path's pipeline (:func:`planning_pipeline`'s run), which finishes each.
    issued_at
        The issue time of the run about to plan (tz-aware).

    Returns
    -------
    list of str
        The keys of the runs finished (:func:`~carbonsched.store.service.run_key`).

    Raises
    ------
    RunBlockedError
        An earlier such run is held by another replica's live lease (it is finishing it), or
        cannot be finished from its plan (the plan is lost, or the rolling state cannot be
        saved from it): the message names it, why and what to do; the run is retried after
        its lease, never planned over it.
    """
    from carbonsched.store.rolling_state import RollingStore
    from carbonsched.store.service import RUN_KEY_FORMAT, run_key

    t = pd.Timestamp(issued_at).tz_convert("UTC")
    claim = _RUN_CLAIM.get() or _Claim(lambda _b: None, lambda _p: None, "cli", "local",
                                       timedelta(seconds=60))
    tried: set[str] = set()
    finished: list[str] = []
    while True:
        last, _ = RollingStore(service_store.store).last_run()
        stopped = service_store.stopped_runs(None if last is None else last.to_pydatetime(),
                                             t.to_pydatetime())
        if not stopped:
            return finished
        rec = stopped[0]
        key = rec["run_key"]
        if key in tried:       # its claim was refused: a live lease holds it
            raise RunBlockedError(
                f"rolling run issued at {run_key(t)} is not planned yet: the run issued at "
                f"{key} stopped after it stored plan {str(rec['plan_id'])[:12]} (it may have "
                f"dispatched part of it) and is held by {rec['replica']} ({rec['status']}, "
                f"its lease runs until {rec['lease_expires_at']}), which finishes it from "
                "that plan; planning now would plan that run's jobs again on a rolling state "
                "that lacks them: this run is tried again after its lease, on that run's "
                "state")
        tried.add(key)
        issued = datetime.strptime(key, RUN_KEY_FORMAT).replace(tzinfo=UTC)
        log.warning("run issued at %s: the run issued at %s stopped after it stored plan %s "
                    "and is not finished; finishing it first", run_key(t), key,
                    str(rec["plan_id"])[:12])
        try:
            out = claim_and_run(service_store, clock, pipeline,
                                planning_date=rec["planning_date"], issued_at=issued,
                                trigger=claim.trigger, replica=claim.replica,
                                lease=claim.lease, local_day=rec["local_day"],
                                metrics=claim.metrics)
        except RunBlockedError as exc:
            raise RunBlockedError(
                f"rolling run issued at {run_key(t)} is not planned: the earlier run issued "
                f"at {key} stopped after it stored plan {str(rec['plan_id'])[:12]} (it may "
                f"have dispatched part of it) and cannot be finished from it: {exc}. "
                "Planning now would place its jobs again while its units run, on a rolling "
                "state that does not hold them; once that is fixed, the next attempt of "
                "either run finishes it, then this run plans (both are retried after their "
                "leases)") from exc
        if out is not None:
            finished.append(key)


def _resume_rolling_or_wait(service_store: Any, catalog: Catalog, wl: Workload,
                            t: pd.Timestamp, saved: SavedRun) -> _Planned:
    """:func:`_resume_rolling`; a run it cannot finish stays retryable (:class:`RunBlockedError`).

    Recorded ``failed``, the run would be final while its units may run, and the next rolling
    run would plan over it on a state that lacks them; ``interrupted``, every later run
    finishes it first (:func:`finish_stopped_runs`) or says why it cannot.
    """
    try:
        return _resume_rolling(service_store, catalog, wl, t, saved)
    except InputError as exc:
        from carbonsched.store.service import run_key

        raise RunBlockedError(f"{exc} (the run stays interrupted and is tried again after "
                              "its lease; no later rolling run is planned before it is "
                              "finished; if it can never be finished, give it up: "
                              f"`carbonsched runs abandon {run_key(t)} --reason TEXT`)"
                              ) from exc


def _resume_rolling(service_store: Any, catalog: Catalog, wl: Workload, t: pd.Timestamp,
                    saved: SavedRun) -> _Planned:
    """A rolling run stopped after it stored its plan (:func:`saved_run`), to finish from it.

    The stored plan is dispatched again with its ``commit_before`` (the outbox keeps every
    unit to one submission). Its record, the first attempt's in full: when the state is not
    saved yet, the rolling state as the plan decided it
    (:func:`~carbonsched.service.rolling.stored_step`, from the state the first attempt
    loaded, the workload file's jobs and the API's); then the plan's decisions on the API jobs
    still ``Pending`` or ``Planned``, and the API jobs no run can plan ended.

    Raises
    ------
    InputError
        The plan is no longer in the store, or the rolling state cannot be taken from it
        (:func:`~carbonsched.service.rolling.stored_step`).
    """
    from carbonsched.service.rolling import plan_job_ids, stored_step
    from carbonsched.store.rolling_state import RollingStore

    doc = _stored_plan(service_store, t, saved.plan_id, rolling=True)
    snap = submitted_jobs(service_store)
    bad = _unrunnable_rolling(service_store, catalog, wl, snap)
    api_ids = {job.id for r, job in snap if r["job_id"] not in bad}
    step = None
    if not saved.state_saved:
        # the plan's jobs as the first attempt had them: the file's first (its job keeps an
        # id an API job shares), then the API's, whatever their record's state is now
        jobs = {j.id: j for j in wl.jobs}
        for jid in sorted(plan_job_ids(doc) - set(jobs)):
            row = service_store.get_job(jid)
            if row is not None:
                try:
                    jobs[jid] = job_from_spec(row["spec"])
                except (ValueError, InputError):
                    continue     # a spec the schema now refuses: stored_step names the job
        step = stored_step(service_store.store, catalog, t, doc, jobs)

    def record(db: Any, now: datetime) -> None:
        if step is not None:
            RollingStore(db.store).save(step[0].state, step[1], doc["plan_id"], now)
        _update_rolling_jobs(db, doc, api_ids, now)
        end_unrunnable_jobs(db, bad, now)

    rolling = doc.get("rolling") or {}
    kw = ({"commit_before": pd.Timestamp(rolling["commit_before"]).to_pydatetime()}
          if rolling.get("commit_before") else {})
    return _Planned(doc, pd.DataFrame(), api_ids, record, kw)


def _resume_daily(service_store: Any, catalog: Catalog, wl: Workload, t: pd.Timestamp,
                  saved: SavedRun) -> _Planned:
    """A daily run stopped after it stored its plan (:func:`saved_run`), to finish from it.

    The stored plan is dispatched again whole (the outbox keeps every unit to one
    submission); before that its decisions are recorded on the API jobs it names that are
    still ``Pending`` or ``Planned``, and the API jobs no run can plan, or that can no longer
    finish, end, as the first attempt recorded them before its dispatch.

    Raises
    ------
    InputError
        The plan is no longer in the store.
    """
    doc = _stored_plan(service_store, t, saved.plan_id, rolling=False)
    snap = submitted_jobs(service_store)
    bad = unrunnable_submitted_jobs(service_store, catalog, wl, snap)
    named = ({p["job_id"] for p in doc["placements"]}
             | {u["job_id"] for u in doc["unplaced"]})
    api_ids = {job.id for r, job in snap if r["job_id"] not in bad and job.id in named}
    expired = [j for j in expired_submitted_jobs(service_store, t, snap)
               if j.id not in bad and j.id not in named]

    def record(db: Any, now: datetime) -> None:
        update_submitted(db, doc, api_ids, now)
        end_expired_jobs(db, expired, t, now)
        end_unrunnable_jobs(db, bad, now)

    return _Planned(doc, pd.DataFrame(), api_ids, record)


def _update_rolling_jobs(service_store: Any, doc: dict[str, Any], api_ids: set[str],
                         now: datetime) -> None:
    """Record in the service store what a rolling run did to each job submitted through the API.

    ``doc`` is the run's plan document: its ``rolling`` section (committed and deferred jobs,
    ended and still pending ones with their reasons, ``commit_before``) and its placements.
    """
    rolling, plan_id = doc["rolling"], doc["plan_id"]
    commit_before = pd.Timestamp(rolling["commit_before"])
    committed = set(rolling.get("committed", []))
    deferred = {d["job_id"] for d in rolling.get("deferred", [])}
    spans = job_spans(p for p in doc["placements"] if p["job_id"] in api_ids)
    for jid, span in sorted(spans.items()):
        if jid in committed:
            service_store.update_job(jid, state="Planned", reason="Placed", plan_id=plan_id,
                                     reserved=False, updated_at=now, **span)
        elif jid in deferred:
            service_store.update_job(
                jid, state="Pending", reason="NotCommitted",
                detail=f"planned to start at {span['start'].isoformat()}; the next run "
                       f"({commit_before.isoformat()}) plans it again",
                plan_id=plan_id, site=span["site"], start=span["start"], end=span["end"],
                reserved=False, updated_at=now)
    for state, units in (("Failed", rolling.get("ended", [])),
                         ("Pending", rolling.get("still_pending", []))):
        for u in units:
            if u["job_id"] in api_ids:
                service_store.update_job(u["job_id"], state=state, reason=str(u["reason"]),
                                         detail=u.get("detail", ""), plan_id=plan_id,
                                         site=None, start=None, end=None, reserved=False,
                                         updated_at=now)


@dataclass
class PlanOnceResult:
    """What :func:`plan_once` produced."""

    daily: Any
    """The :class:`~carbonsched.pipeline.daily.DailyPlan` (document, summary, forecasts)."""
    out_file: Path | None
    """Where the plan document was written, or ``None``."""
    stored_in: str | None
    """The database the plan was recorded in (:func:`~carbonsched.config.database_label`), or
    ``None``."""
    store_error: CarbonschedError | None = None
    """Why recording the plan failed (a dead database), or ``None``; the caller raises it
    once it has shown the plan (:meth:`raise_store_error`)."""

    def raise_store_error(self) -> None:
        """Raise :attr:`store_error` if recording the plan failed."""
        if self.store_error is not None:
            raise self.store_error


def _recorded_load(settings: Any) -> Any:
    """``(site, t0, t1) -> Series``: recorded facility power from the store's plans.

    One store (engine) for every site's call, opened at the first.
    """
    opened: list[Any] = []

    def load(site: str, t0: Any, t1: Any) -> Any:
        from carbonsched.pipeline.flex import recorded_site_load
        from carbonsched.store import Store

        if not opened:
            opened.append(Store(settings.resolved_database_url()))
        return recorded_site_load(opened[0], site, t0, t1)
    return load


def plan_once(settings: Any, planning_date: str, *, catalog: str | Path,
              workload_file: str | Path | None = None, data_dir: str | Path | None = None,
              solver: str = "highs", time_limit_s: float = 60.0, horizon_hours: int = 24,
              slot_minutes: int = 60, progress: Callable[[str], None] | None = None,
              signal_loader: Any = None, out_file: str | Path | None = None,
              store: bool = True, replay_from: str | None = None,
              grid_events: list[Any] | None = None,
              power_caps: bool | None = None,
              fairness: float | None = None,
              exogenous_loader: Any = None) -> PlanOnceResult:
    """Plan one date, write the plan file, record it unless ``store`` is false.

    ``carbonsched plan`` without ``--dispatch``: no run record, no dispatch, no API jobs. The
    plan file is written first; a store that fails does not raise here but comes back as
    :attr:`PlanOnceResult.store_error`, so that the caller shows the plan before the error.

    Parameters
    ----------
    settings
        :class:`~carbonsched.config.Settings` (the database URL; the data folder by default).
    planning_date
        ``YYYY-MM-DD``; issued at its 00:00 UTC.
    catalog
        Catalog name or TOML path.
    workload_file
        Jobs file (``docs/workload.md``); ``None`` plans the catalog's demo day.
    data_dir
        Folder of the real public data; default ``settings.data_dir``.
    solver, time_limit_s, horizon_hours, slot_minutes, progress, signal_loader, exogenous_loader
        As for :func:`carbonsched.pipeline.daily.run_daily_plan`. [s], [h], [min]
    out_file
        Write the plan document here (JSON).
    store
        Record the plan and its forecasts in the store (``settings.database_url``).
    replay_from
        Plan ``planning_date`` on this past day's real signals and work, moved forward
        (:mod:`carbonsched.pipeline.replayed`); ``None``: no replay.
    grid_events, power_caps
        As for :func:`carbonsched.pipeline.daily.run_daily_plan`: announced grid events to
        commit a reduction for, and GPU power caps on or off (``None``: the setting).
    fairness
        Tenants' fair shares against carbon, 0..1 (:attr:`carbonsched.config.Settings.
        fairness`); ``None``: ``settings.fairness``. [-]

    Raises
    ------
    InputError
        Bad input (an unreadable workload file, an unknown catalog, no data for the date).
    """
    from carbonsched.pipeline.daily import run_daily_plan
    from carbonsched.workload.files import read_workload

    wl = read_workload(workload_file) if workload_file else None
    kw: dict[str, Any] = {} if progress is None else {"progress": progress}
    if grid_events and store:
        kw["load_history"] = _recorded_load(settings)
    daily = run_daily_plan(planning_date, catalog, wl, data_dir or settings.data_dir, solver,
                           time_limit_s, horizon_hours, signal_loader=signal_loader,
                           slot_minutes=slot_minutes, replay_from=replay_from,
                           grid_events=grid_events, power_caps=power_caps,
                           fairness=settings.fairness if fairness is None else fairness,
                           exogenous_loader=exogenous_loader, **kw)
    if out_file:
        write_plan_file(out_file, daily.document)
    res = PlanOnceResult(daily, Path(out_file) if out_file else None, None)
    if store:
        from carbonsched.store import Store

        try:
            db = Store(settings.resolved_database_url())
            db.save_plan(daily.document, daily.forecasts)
        except CarbonschedError as exc:
            res.store_error = exc
        else:
            res.stored_in = database_label(db.engine.url)
    return res
