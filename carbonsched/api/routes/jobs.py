"""``POST /v1/jobs`` and ``GET /v1/jobs/{job_id}``: submitted jobs, their state and reason."""

from __future__ import annotations

import logging
from typing import Annotated, Any

from fastapi import APIRouter, Body, HTTPException

from carbonsched.api.deps import ReadRole, State, SubmitRole
from carbonsched.api.routes import (
    BAD_BODY,
    ERRORS,
    IDENTIFIER_RULE,
    JOB_RULES,
    NOT_FOUND,
    NOTHING_TO_RUN_RULE,
    STORE_RETRY_AFTER_S,
    refuse_ids_in_use,
    refuse_nothing_to_run,
    refused_422,
    with_catalog_template,
)
from carbonsched.api.schemas import ErrorPublic, JobIdPath, JobPublic, JobsCreate, JobsPublic
from carbonsched.api.state import ServiceState
from carbonsched.errors import (
    BackendUnavailableError,
    InputError,
    StoreUnavailableError,
    UnknownSiteError,
)
from carbonsched.service.booking import job_row, reserve_job
from carbonsched.store.service import DuplicateJobError

log = logging.getLogger("carbonsched.api")

router = APIRouter(prefix="/v1", tags=["jobs"], responses=ERRORS)

AWAITING_PLAN = "AwaitingPlan"
"""Reason of a job submitted while no plan is loaded: the next daily run plans it."""


def persist_job(state: ServiceState, spec: dict[str, Any], ans: dict[str, Any] | None
                ) -> dict[str, Any]:
    """Store a submitted job that is not booked (``Pending`` with its answer's reason)."""
    row = job_row(spec, ans, False, state.clock.now(),
                  no_plan=state.book_error or "no plan loaded", awaiting_reason=AWAITING_PLAN)
    state.db.add_jobs([row])
    return row


def _public(row: dict[str, Any], source: str) -> JobPublic:
    return JobPublic(id=row["job_id"], state=row["state"], reason=row["reason"],
                     detail=row.get("detail") or "", source=source, plan_id=row.get("plan_id"),
                     site=row.get("site"), start=row.get("start"), end=row.get("end"),
                     emissions_kg=row.get("emissions_kg"), energy_kwh=row.get("energy_kwh"),
                     submitted_at=row.get("submitted_at"))


@router.post("/jobs", operation_id="submitJobs", status_code=201, response_model=JobsPublic,
             responses={409: {"model": ErrorPublic, "description": (
                 "A job id the service already holds (an earlier submission, or a job of the "
                 "workload file, the current plan, dispatch or the rolling state); nothing of "
                 "the request is stored (jobs of it stored before a racing request took an id "
                 "are withdrawn; one that could not be is named).")},
                        **NOT_FOUND, **BAD_BODY},
             openapi_extra=refused_422(*JOB_RULES, "a job id twice in one request",
                                       NOTHING_TO_RUN_RULE))
def submit_jobs(body: Annotated[JobsCreate, Body()], state: State,
                role: SubmitRole) -> JobsPublic:
    """Submit jobs.

    Each is booked into the current plan's free capacity now (state ``Planned``) or left
    ``Pending`` with the reason, and planned again by the next daily run. All or nothing: a
    job that cannot be stored (every booking attempt lost its race, 503; an id a racing
    request stored first, 409; the store lost) takes back the jobs stored before it, and
    the answer says so, or names those that could not be taken back. An id the
    service already holds (a submitted job, a job of the workload file, of the current plan,
    of the dispatch outbox or of the rolling state) is refused with 409 and nothing is
    stored. When the service dispatches its plans without the placeholder, a job that names
    nothing to run (itself or through its template) is refused with 422 and nothing is
    stored: dispatch would never submit it.
    """
    limit = state.settings.max_jobs_per_request
    if len(body.jobs) > limit:
        raise InputError(f"{len(body.jobs)} jobs in one request; at most {limit} are accepted "
                         "(CARBONSCHED_MAX_JOBS_PER_REQUEST): split the submission")
    ids = [j.id for j in body.jobs]
    dup = next((i for i in ids if ids.count(i) > 1), None)
    if dup is not None:
        raise InputError(f"job id {dup!r} appears twice in this request; ids must be unique")
    for i in ids:
        if state.db.get_job(i) is not None:
            raise HTTPException(409, f"job {i!r} already exists; submit it under a new id")
    refuse_ids_in_use(state, ids)
    jobs = [with_catalog_template(j, state.catalog.templates, ("body", "jobs", i))
            for i, j in enumerate(body.jobs)]
    refuse_nothing_to_run(state, jobs, [("body", "jobs", i) for i in range(len(jobs))])
    # every job's sites checked before any is stored, plan loaded or not: a stored job naming
    # a site the catalog lacks would stop every later run (the planner refuses such work)
    known = set(state.catalog.site_ids)
    for j in jobs:
        for sid in j.to_job().allowed_sites:
            if sid not in known:
                raise UnknownSiteError(sid, state.catalog.site_ids)
    book = state.book
    stored: list[dict[str, Any]] = []
    try:
        for j in jobs:
            spec = j.model_dump(mode="json")
            row = None
            ans = None
            if book is not None:
                # booked only once committed under the site's lock (service.booking)
                ans, row = reserve_job(book, state.db, j.to_job(), spec, state.clock.now(), 0)
            if row is None:
                row = persist_job(state, spec, ans)
            stored.append(row)
    except Exception as exc:
        withdraw_request(state, stored, exc)
        raise
    out = [_public(row, "api") for row in stored]
    return JobsPublic(data=out, count=len(out))


def withdraw_request(state: ServiceState, stored: list[dict[str, Any]],
                     exc: Exception) -> None:
    """Take back what a submission stored before ``exc`` stopped it: all of it, or say what stays.

    Each job of ``POST /v1/jobs`` is committed on its own (a reservation under its site's
    lock, :func:`carbonsched.service.booking.reserve_job`); a later job that fails (every
    booking attempt lost its race, an id another request stored meanwhile, the store lost)
    would leave the earlier ones stored under an answer that says nothing is. They are deleted
    as they were stored (:meth:`~carbonsched.store.service.ServiceStore.withdraw_jobs`) and
    dropped from this replica's book, so the request stores nothing and its retry is a new
    request. Nothing stored before ``exc``: nothing to do, ``exc`` answers as it is.

    Parameters
    ----------
    state
        The service state.
    stored
        The rows this request stored, in order.
    exc
        What stopped it.

    Raises
    ------
    HTTPException
        When something was stored: ``exc``'s status and message (409 for a duplicate id, 503
        with ``Retry-After`` for contention or an outage; else 500, the error logged), then that the
        jobs stored before it were withdrawn (nothing of the request is stored), or which
        could not be (the store failed, or a run changed them meanwhile): those stand, and a
        retry of the request answers 409 for them.
    """
    if not stored:
        return
    why = "a run in progress may have read them, or one recorded them meanwhile"
    try:
        gone = state.db.withdraw_jobs(stored)
    except StoreUnavailableError as err:
        gone, why = [], f"the store failed: {err.detail}"
    book = state.book
    for jid in gone:
        if book is not None:
            book.release(jid)
    left = [r["job_id"] for r in stored if r["job_id"] not in gone]
    if not left:
        said = (f"the {len(stored)} job(s) of this request stored before it were withdrawn: "
                "nothing of the request is stored; submit it again")
    else:
        said = (f"job(s) {', '.join(map(repr, left))} of this request were stored before it "
                f"and could not be withdrawn ({why}): they stand (GET /v1/jobs/{{id}}) and a "
                "retry of the request answers 409 for them; submit the others without them"
                + ("" if len(left) == len(stored) else
                   f" (the other {len(stored) - len(left)} stored before it were withdrawn)"))
        log.warning("POST /v1/jobs stopped by %s: %s", type(exc).__name__, said)
    headers = None
    msg = str(exc)
    if isinstance(exc, DuplicateJobError):
        status = 409
    elif isinstance(exc, BackendUnavailableError):
        status = 503
        headers = {"Retry-After": str(int(getattr(exc, "retry_after_s",
                                                  STORE_RETRY_AFTER_S)))}
    else:   # a fault of the service: logged with its traceback, not shown
        status, msg = 500, f"the service failed storing job {len(stored) + 1} of the request"
        log.error("POST /v1/jobs failed after storing %d job(s): %s", len(stored), said,
                  exc_info=exc)
    raise HTTPException(status, f"{msg}; {said}", headers=headers) from exc


@router.get("/jobs/{job_id}", operation_id="getJob", response_model=JobPublic,
            responses=NOT_FOUND, openapi_extra=refused_422(IDENTIFIER_RULE))
def get_job(job_id: JobIdPath, state: State,
            role: ReadRole) -> JobPublic:
    """A job's state and reason: a submitted job, else a job of the current plan.

    A submitted job dispatch holds (its intent written) reads its state from the outbox as
    the dispatch loops last recorded it (``Dispatched``, ``Running``, ``Paused``,
    ``Succeeded``, ``Failed``, ``Cancelled``), with the plan it was dispatched from.
    """
    from carbonsched.dispatch.outbox import dispatched_jobs
    from carbonsched.service.runs import API_DISPATCH_STATES

    row = state.db.get_job(job_id)
    if row is not None:
        if row["state"] in API_DISPATCH_STATES:
            d = dispatched_jobs(state.db.store, [job_id]).get(job_id)
            if d is not None:
                row = row | {"state": d.state, "reason": d.reason, "detail": d.detail,
                             "plan_id": d.plan_id, "site": d.site.split(", ")[0],
                             "start": d.start, "end": d.end}
        return _public(row, "api")
    book = state.book
    if book is not None:
        prow = state.db.plan_job(book.plan_id, job_id)
        if prow is not None:
            return _public(prow, "plan")
    raise HTTPException(404, f"no job {job_id!r} was submitted or is in the current plan")
