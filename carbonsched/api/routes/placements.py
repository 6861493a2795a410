"""``POST /v1/placements``: where and when should this job (or inference) run?"""

from __future__ import annotations

from typing import Annotated, Any

import pandas as pd
from fastapi import APIRouter, Body, HTTPException, Request
from starlette.concurrency import run_in_threadpool

from carbonsched.api.deps import ReadRole, state_of
from carbonsched.api.routes import (
    BAD_BODY,
    ERRORS,
    JOB_RULES,
    NO_PLAN,
    NOT_FOUND,
    NOTHING_TO_RUN_RULE,
    refuse_ids_in_use,
    refuse_nothing_to_run,
    refused_422,
    require_book,
    with_catalog_template,
)
from carbonsched.api.schemas import (
    ErrorPublic,
    InferencePlacementQuery,
    PlacementPublic,
    PlacementQuery,
)
from carbonsched.errors import InputError
from carbonsched.service.booking import reserve_job

router = APIRouter(prefix="/v1", tags=["placements"],
                   responses=ERRORS | NOT_FOUND | NO_PLAN | BAD_BODY | {
                       409: {"model": ErrorPublic, "description": "Job id already reserved."},
                       503: {"model": ErrorPublic, "description": "No plan to answer from "
                             "yet, the store is unreachable, or the capacity offered was "
                             "taken by other reservations on every attempt (retry)."}})


@router.post("/placements", operation_id="createPlacement", response_model=PlacementPublic,
             openapi_extra=refused_422(*JOB_RULES, "an inference query without "
                                       "`power_per_gpu_kw` for a GPU type the parameter "
                                       "table has no power figure of", "an inference "
                                       "`start` not on the hour (plans use hourly slots)",
                                       f"with `reserve: true`, {NOTHING_TO_RUN_RULE}"))
async def create_placement(query: Annotated[PlacementQuery, Body()], request: Request,
                           role: ReadRole) -> PlacementPublic:
    """Recommend a site and start in the capacity the current plan leaves free.

    A job (the workload file's fields) gets the lowest-emission start with room for its whole
    run, the carbon-agnostic choice and the saving, and the next best site. ``reserve: true``
    (role ``submit``) books it into the plan; when the service dispatches without the
    placeholder, a job to book must name what it runs (422 otherwise). ``kind: inference``
    with a user area and SLO gets the lowest-emission site within the SLO.
    """
    # The hot route (BENCHMARKS.md section 6): ``async``, because a job query is ~0.5 ms of
    # numpy on arrays held in memory, cheaper on the event loop than a hop to the thread pool
    # and back; store calls (reserve) and the inference query (it compiles the planner's sets
    # with pandas) run in the thread pool. The state is read from the request rather than
    # through the ``State`` dependency: each dependency costs FastAPI's resolver per request.
    state = state_of(request)
    if not isinstance(query, InferencePlacementQuery):
        # refused like any bad field: before "no plan yet"
        query = with_catalog_template(query, state.catalog.templates, ("body",))
        if query.reserve:      # a job to book names what it runs: a bad field too
            refuse_nothing_to_run(state, [query], [("body",)])
    book = require_book(state)
    now = state.clock.now()
    if isinstance(query, InferencePlacementQuery):
        from carbonsched.workload.files import it_power_per_gpu_kw

        kw = query.power_per_gpu_kw
        if kw is None:
            try:
                kw = it_power_per_gpu_kw(query.gpu_type, state.catalog)
            except (InputError, KeyError) as exc:
                raise InputError(f"no default power for GPU type {query.gpu_type!r} ({exc}); "
                                 "give power_per_gpu_kw") from exc
        ans = await run_in_threadpool(
            book.place_inference, query.area, pd.Timestamp(query.start).tz_convert("UTC"),
            query.duration_hours, query.gpu_type, query.gpus, query.slo_ms, kw,
            query.alternatives, now)
        state.metrics.placements.labels(outcome="placed" if ans["placed"] else
                                        "unplaced").inc()
        return PlacementPublic(**_said(state, book, ans), area=query.area)
    job = query.to_job()
    if not query.reserve:
        ans = book.place_job(job, now, query.alternatives)
        state.metrics.placements.labels(outcome="placed" if ans["placed"] else
                                        "unplaced").inc()
        return PlacementPublic(**_said(state, book, ans), reserved=False, job_id=job.id)
    if not state.allows(role, "submit"):
        raise HTTPException(403, f"reserve: true needs role 'submit'; this token's role is "
                            f"{role!r}")
    if await run_in_threadpool(state.db.get_job, job.id) is not None:
        raise HTTPException(409, f"job {job.id!r} already exists; reserve it under a new "
                            "id or read it with GET /v1/jobs/{id}")
    await run_in_threadpool(refuse_ids_in_use, state, [job.id], "reserve")
    # acknowledged only once committed under the site's booking lock (service.booking)
    spec = query.model_dump(mode="json", exclude={"reserve", "alternatives"})
    ans, row = await run_in_threadpool(reserve_job, book, state.db, job, spec, now,
                                       query.alternatives)
    reserved = row is not None
    state.metrics.placements.labels(
        outcome=("reserved" if reserved else "placed") if ans["placed"] else "unplaced").inc()
    return PlacementPublic(**_said(state, book, ans), reserved=reserved, job_id=job.id)


def _said(state: Any, book: Any, ans: dict[str, Any]) -> dict[str, Any]:
    """``ans`` with the stale-plan note in its detail when a newer plan could not be loaded."""
    note = state.stale_book_note(book)
    if not note:
        return ans
    return {**ans, "detail": f"{ans['detail']}; {note}" if ans["detail"] else note}
