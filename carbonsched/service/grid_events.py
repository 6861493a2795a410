"""Grid events through the service: announce, list, show, act (the API and the CLI share these).

``POST /v1/grid-events`` and ``carbonsched grid-event add`` call :func:`announce_event`; the
service's ``grid`` loop (and ``carbonsched grid-event apply``) calls :func:`apply_events`,
which re-plans and acts through dispatch (:mod:`carbonsched.dispatch.grid`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from carbonsched.adapters.dispatch.base import DispatchAdapter
from carbonsched.catalog import Catalog
from carbonsched.config import Settings
from carbonsched.dispatch.grid import GridPassSummary, grid_pass
from carbonsched.errors import UnknownSiteError
from carbonsched.flex import GridEvent
from carbonsched.store import Store
from carbonsched.store.grid_events import (
    action_rows,
    event_public,
    event_rows,
    insert_event,
    require_event,
)


def announce_event(store: Store, catalog: Catalog, event: GridEvent, now: datetime,
                   source: str = "") -> dict[str, Any]:
    """Record a grid event at one of the catalog's sites; returns it as :func:`show_event`.

    Announcing the same event again (site, window, target) records nothing new: the answer
    is the stored event, its ``detail`` saying so.

    Raises
    ------
    UnknownSiteError
        The site is not in the service's catalog (the message lists those it has).
    """
    known = [s.id for s in catalog.sites]
    if event.site not in known:
        raise UnknownSiteError(event.site, known)
    event_id, new = insert_event(store, event, now, source)
    out = show_event(store, event_id, now)
    if not new:
        said = ("already announced (the same site, window and target): this is that event, "
                "its power shed once")
        out["detail"] = f"{said}; {out['detail']}" if out.get("detail") else said
    return out


def show_event(store: Store, event_id: str, now: datetime) -> dict[str, Any]:
    """One event with its actions and their states (``GET /v1/grid-events/{id}``).

    Raises
    ------
    InputError
        No such event.
    """
    row = require_event(store, event_id)
    return event_public(row, action_rows(store, event_id), now)


def list_events(store: Store, now: datetime) -> list[dict[str, Any]]:
    """Every event, newest start first, each with its action counts (no action list)."""
    acts: dict[str, list] = {}
    for a in action_rows(store):
        acts.setdefault(a.event_id, []).append(a)
    out = []
    for r in event_rows(store):
        d = event_public(r, acts.get(r.event_id, []), now)
        d.pop("actions")
        out.append(d)
    return out


def apply_events(store: Store, catalog: Catalog, adapters: Mapping[str, DispatchAdapter],
                 settings: Settings, clock: Callable[[], datetime],
                 event_id: str | None = None) -> GridPassSummary:
    """One pass of :func:`carbonsched.dispatch.grid.grid_pass` with the service's settings.

    The claim's lease is ``dispatch_lease_s``; an action is given up after
    ``dispatch_max_attempts`` backend errors.
    """
    return grid_pass(store, catalog, adapters, clock=clock, lease_s=settings.dispatch_lease_s,
                     max_attempts=settings.dispatch_max_attempts, event_id=event_id)
