"""``/v1/grid-events``: announce a grid event (role ``admin``), list them, show one's actions.

The same service calls as ``carbonsched grid-event add|list|show``
(:mod:`carbonsched.service.grid_events`). Posting an event wakes the leader's ``grid`` loop,
which re-plans the site's window and pauses/holds work through dispatch within seconds of the
event's start, then resumes/releases it at its end (docs/service.md, "Grid events").
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, HTTPException, Path
from starlette.concurrency import run_in_threadpool

from carbonsched.api.deps import AdminRole, ReadRole, State
from carbonsched.api.routes import BAD_BODY, ERRORS, NOT_FOUND, refused_422
from carbonsched.api.schemas import (
    GRID_EVENT_ID_PATTERN,
    GridEventCreate,
    GridEventPublic,
    GridEventsPublic,
)
from carbonsched.errors import InputError
from carbonsched.service.grid_events import announce_event, list_events, show_event

router = APIRouter(prefix="/v1", tags=["grid-events"], responses=ERRORS)


@router.post("/grid-events", operation_id="createGridEvent", status_code=201,
             response_model=GridEventPublic, responses=NOT_FOUND | BAD_BODY,
             openapi_extra=refused_422("neither or both of `target_kw` and "
                                       "`target_fraction`", "an `end` not after `start`",
                                       "a `start` or `end` not on the hour",
                                       "a `start` or `end` outside the years 1970..2200 in "
                                       "UTC (the pattern states the year as written)"))
async def create_grid_event(body: Annotated[GridEventCreate, Body()], state: State,
                            role: AdminRole) -> GridEventPublic:
    """Announce a grid event at a site: shed ``target_kw`` or ``target_fraction`` of its power.

    Stored at once; the leader re-plans the site's window and acts (pauses preemptible running
    work, holds work not yet started) within ``CARBONSCHED_GRID_EVENT_INTERVAL_S`` of the
    event's start — at once when it has started — and resumes it all at the end. 404: a site
    the service's catalog lacks.
    """
    event = body.to_event()   # the body's validation applied the event's rules (422)
    out = await run_in_threadpool(announce_event, state.store, state.catalog, event,
                                  state.clock.now(), f"api:{role}")
    if state.loops is not None and state.loops.dispatch_on:
        state.loops.kick("grid")
    elif not out["detail"]:
        out["detail"] = ("stored, but this service runs no dispatch loops "
                         "(CARBONSCHED_DISPATCH_LOOPS off, no CARBONSCHED_DISPATCHER): nothing "
                         "acts on it until `carbonsched grid-event apply` runs or a service "
                         "with the loops does")
    return GridEventPublic(**out)


@router.get("/grid-events", operation_id="listGridEvents", response_model=GridEventsPublic)
def get_grid_events(state: State, role: ReadRole) -> GridEventsPublic:
    """Every grid event, newest start first, with its action counts."""
    rows = list_events(state.store, state.clock.now())
    return GridEventsPublic(data=[GridEventPublic(**r) for r in rows], count=len(rows))


@router.get("/grid-events/{event_id}", operation_id="getGridEvent",
            response_model=GridEventPublic, responses=NOT_FOUND)
def get_grid_event(event_id: Annotated[str, Path(pattern=GRID_EVENT_ID_PATTERN,
                                                 description="The event's id (ge- and 12 hex "
                                                 "digits, as POST answered it).")],
                   state: State, role: ReadRole) -> GridEventPublic:
    """One event: what the re-plan chose and every action with its state and detail."""
    try:
        return GridEventPublic(**show_event(state.store, event_id, state.clock.now()))
    except InputError as exc:
        raise HTTPException(404, str(exc)) from None
