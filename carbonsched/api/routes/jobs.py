"""``POST /v1/jobs`` and ``GET /v1/jobs/{job_id}``: submitted jobs, their state and reason."""

from __future__ import annotations

import json
from typing import Annotated, Any

import pandas as pd
from fastapi import APIRouter, Body, HTTPException, Path

from carbonsched.api.deps import ReadRole, State, SubmitRole
from carbonsched.api.routes import BAD_BODY, ERRORS, JOB_RULES, NOT_FOUND, refused_422
from carbonsched.api.schemas import ErrorPublic, JobPublic, JobsCreate, JobsPublic
from carbonsched.api.state import ServiceState
from carbonsched.errors import InputError

router = APIRouter(prefix="/v1", tags=["jobs"], responses=ERRORS)

AWAITING_PLAN = "AwaitingPlan"
"""Reason of a job submitted while no plan is loaded: the next daily run plans it."""


def persist_job(state: ServiceState, spec: dict[str, Any], ans: dict[str, Any] | None,
                reserved: bool) -> dict[str, Any]:
    """Store a submitted job with the state its placement answer gives it."""
    now = state.clock.now()
    row: dict[str, Any] = {"job_id": spec["id"], "tenant": spec["tenant"],
                           "spec_json": json.dumps(spec), "submitted_at": now,
                           "updated_at": now, "reserved": False, "detail": ""}
    if ans is None:
        row |= {"state": "Pending", "reason": AWAITING_PLAN,
                "detail": state.book_error or "no plan loaded"}
    elif ans["placed"] and reserved:
        rec = ans["recommended"]
        row |= {"state": "Planned", "reason": "Placed", "plan_id": ans["plan_id"],
                "site": rec["site"], "start": pd.Timestamp(rec["start"]).to_pydatetime(),
                "end": pd.Timestamp(rec["end"]).to_pydatetime(),
                "emissions_kg": rec["emissions_kg"], "energy_kwh": rec["energy_kwh"],
                "reserved": True}
    else:
        row |= {"state": "Pending", "reason": ans["reason"], "detail": ans["detail"],
                "plan_id": ans["plan_id"]}
    state.db.add_jobs([row])
    return row


def _public(row: dict[str, Any], source: str) -> JobPublic:
    return JobPublic(id=row["job_id"], state=row["state"], reason=row["reason"],
                     detail=row.get("detail") or "", source=source, plan_id=row.get("plan_id"),
                     site=row.get("site"), start=row.get("start"), end=row.get("end"),
                     emissions_kg=row.get("emissions_kg"), energy_kwh=row.get("energy_kwh"),
                     submitted_at=row.get("submitted_at"))


@router.post("/jobs", operation_id="submitJobs", status_code=201, response_model=JobsPublic,
             responses={409: {"model": ErrorPublic, "description": "A job id exists already."},
                        **NOT_FOUND, **BAD_BODY},
             openapi_extra=refused_422(*JOB_RULES, "a job id twice in one request"))
def submit_jobs(body: Annotated[JobsCreate, Body()], state: State,
                role: SubmitRole) -> JobsPublic:
    """Submit jobs.

    Each is booked into the current plan's free capacity now (state ``Planned``) or left
    ``Pending`` with the reason, and planned again by the next daily run.
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
    book = state.book
    out = []
    for j in body.jobs:
        spec = j.model_dump(mode="json")
        ans = None
        if book is not None:
            ans = book.place_job(j.to_job(), state.clock.now(), 0, reserve=True)
        try:
            out.append(_public(persist_job(state, spec, ans, reserved=bool(ans and
                                                                           ans["placed"])),
                               "api"))
        except Exception:
            if book is not None:
                book.release(j.id)
            raise
    return JobsPublic(data=out, count=len(out))


@router.get("/jobs/{job_id}", operation_id="getJob", response_model=JobPublic,
            responses=NOT_FOUND)
def get_job(job_id: Annotated[str, Path(min_length=1, max_length=200)], state: State,
            role: ReadRole) -> JobPublic:
    """A job's state and reason: a submitted job, else a job of the current plan."""
    row = state.db.get_job(job_id)
    if row is not None:
        return _public(row, "api")
    book = state.book
    if book is not None:
        prow = state.db.plan_job(book.plan_id, job_id)
        if prow is not None:
            return _public(prow | {"detail": ""}, "plan")
    raise HTTPException(404, f"no job {job_id!r} was submitted or is in the current plan")
