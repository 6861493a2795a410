"""Reading and writing grid events and their actions (tables in :mod:`.grid_models`).

The acting logic (choosing, claiming and taking actions) is
:mod:`carbonsched.dispatch.grid`; the API and the CLI go through
:mod:`carbonsched.service.grid_events`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from carbonsched.errors import InputError
from carbonsched.flex import GridEvent
from carbonsched.store import Store
from carbonsched.store.grid_models import GridActionRow, GridEventRow

SHED = ("pause", "hold")
"""Actions that shed power during an event."""
UNDO = {"pause": "resume", "hold": "release"}
"""The action that undoes each shedding action at the event's end."""


def _iso(ts: datetime | None) -> str | None:
    return None if ts is None else ts.isoformat().replace("+00:00", "Z")


def event_key(event: GridEvent) -> str:
    """The id of ``event``: ``ge-`` and 12 hex digits of a hash of what it asks.

    The site, the window (UTC) and the target (kW or share): the same event announced twice
    (a client retrying after a lost answer, two announcers) is one event, so its power is
    shed once (:func:`insert_event`). SHA-256, first 48 bits.
    """
    what = "|".join([event.site, event.start.tz_convert("UTC").isoformat(),
                     event.end.tz_convert("UTC").isoformat(), repr(event.target_kw),
                     repr(event.target_fraction)])
    return f"ge-{hashlib.sha256(what.encode()).hexdigest()[:12]}"


def insert_event(store: Store, event: GridEvent, now: datetime, source: str = ""
                 ) -> tuple[str, bool]:
    """Store ``event`` once; returns its id (:func:`event_key`) and whether it is new.

    An event with the same site, window and target is already stored: nothing is written
    (its first announcement's notice and source stand), and ``False`` says so.
    """
    event_id = event_key(event)

    def write() -> bool:
        with Session(store.engine) as s, s.begin():
            if s.get(GridEventRow, event_id) is not None:
                return False
            s.add(GridEventRow(event_id=event_id, site=event.site,
                               start=event.start.to_pydatetime(),
                               end=event.end.to_pydatetime(), target_kw=event.target_kw,
                               target_fraction=event.target_fraction,
                               notice_s=event.notice.total_seconds(), source=source,
                               created_at=now, detail=""))
            return True

    try:
        new = store._retry_locked(write, "recording a grid event")
    except IntegrityError:   # the same event written by another process meanwhile
        new = False
    return event_id, bool(new)


def event_rows(store: Store, event_id: str | None = None) -> list[GridEventRow]:
    """Every stored event (newest start first), or the one with ``event_id`` (empty if none)."""
    with Session(store.engine, expire_on_commit=False) as s:
        q = select(GridEventRow).order_by(GridEventRow.start.desc(), GridEventRow.event_id)
        if event_id is not None:
            q = q.where(GridEventRow.event_id == event_id)
        return list(s.scalars(q))


def action_rows(store: Store, event_id: str | None = None) -> list[GridActionRow]:
    """Actions of one event (or of all), in the order they were written."""
    with Session(store.engine, expire_on_commit=False) as s:
        q = select(GridActionRow).order_by(GridActionRow.id)
        if event_id is not None:
            q = q.where(GridActionRow.event_id == event_id)
        return list(s.scalars(q))


def held_keys(store: Store, keys: list[str] | None = None) -> set[str]:
    """Dispatch keys a grid event holds back: a ``pause`` or ``hold`` not yet undone.

    A held Kubernetes Job must not be released at its planned start (nor a paused one
    resumed) while its event holds it: :func:`carbonsched.dispatch.outbox.release_due` skips
    these keys. A shedding action counts from the moment it is written (planned or claimed),
    so the release loop never races an action about to be taken; it stops counting when its
    undo is done or skipped, or when the shedding action itself was skipped or failed.
    """
    with Session(store.engine) as s:
        q = select(GridActionRow.event_id, GridActionRow.key, GridActionRow.action,
                   GridActionRow.state)
        if keys is not None:
            q = q.where(GridActionRow.key.in_(keys))
        rows = list(s.execute(q))
    shed = {(e, k) for e, k, a, st in rows if a in SHED and st in ("planned", "claimed", "done")}
    undone = {(e, k) for e, k, a, st in rows if a in UNDO.values() and st in ("done", "skipped")}
    return {k for e, k in shed - undone}


@dataclass(frozen=True)
class GridMark:
    """What grid events last did to one dispatch key (:func:`grid_marks`).

    Attributes
    ----------
    mark
        ``paused`` or ``held`` (a shedding action done, its undo not yet done), ``resumed``
        or ``released`` (the undo done).
    event_id
        The event that acted.
    at
        When the action (or its undo) was done. [tz-aware UTC]
    """

    mark: str
    event_id: str
    at: datetime | None


KEYS_PER_READ = 5000
"""Keys per ``IN`` list of :func:`grid_marks` (SQLite allows 32,766 parameters per statement
since 3.32; PostgreSQL 65,535)."""


def grid_marks(store: Store, keys: list[str] | None = None) -> dict[str, GridMark]:
    """Per dispatch key, what grid events last did to it (only done actions count).

    A key with a ``pause`` (``hold``) done and its ``resume`` (``release``) not yet done is
    ``paused`` (``held``); with the undo done, ``resumed`` (``released``). Of several events
    acting on one key, the latest action done wins. Used by
    :func:`carbonsched.dispatch.outbox.refresh_status` to show a paused job as ``Paused`` (not
    ``Running``) when its backend confirms it.

    Parameters
    ----------
    store
        The store.
    keys
        The dispatch keys to read (by the key's index, :data:`KEYS_PER_READ` per statement),
        so a pass over the live units costs what is live, not every action grid events ever
        took; None reads every done action.

    Returns
    -------
    dict of str to GridMark
        Per key with a done action, its latest mark.
    """
    q = select(GridActionRow.event_id, GridActionRow.key, GridActionRow.action,
               GridActionRow.done_at, GridActionRow.id).where(GridActionRow.state == "done")
    with Session(store.engine) as s:
        if keys is None:
            found = list(s.execute(q))
        else:
            wanted = sorted(set(keys))
            found = [r for i in range(0, len(wanted), KEYS_PER_READ)
                     for r in s.execute(q.where(GridActionRow.key.in_(
                         wanted[i:i + KEYS_PER_READ])))]
    rows = sorted(found, key=lambda r: r[4])
    word = {"pause": "paused", "hold": "held", "resume": "resumed", "release": "released"}
    out: dict[str, GridMark] = {}
    for event_id, key, action, done_at, _id in rows:
        if action in word:
            at = done_at if done_at is None or done_at.tzinfo else done_at.replace(tzinfo=UTC)
            out[key] = GridMark(word[action], event_id, at)
    return out


def event_public(row: GridEventRow, actions: list[GridActionRow], now: datetime
                 ) -> dict[str, Any]:
    """An event and its actions as the API and ``grid-event list --json`` show them.

    ``state``: ``scheduled`` (before its start), ``active`` (in its window), ``resuming`` (past
    its end, undo actions still open), ``ended``. ``counts``: actions by ``<action>:<state>``.
    """
    if row.ended_at is not None:
        state = "ended"
    elif now < row.start:
        state = "scheduled"
    elif now < row.end:
        state = "active"
    else:
        state = "resuming"
    counts: dict[str, int] = {}
    for a in actions:
        counts[f"{a.action}:{a.state}"] = counts.get(f"{a.action}:{a.state}", 0) + 1
    return {
        "event_id": row.event_id, "site": row.site, "start": _iso(row.start),
        "end": _iso(row.end), "target_kw": row.target_kw,
        "target_fraction": row.target_fraction, "notice_s": row.notice_s,
        "source": row.source, "state": state, "created_at": _iso(row.created_at),
        "planned_at": _iso(row.planned_at), "baseline_kw": row.baseline_kw,
        "target_reduction_kw": row.target_reduction_kw,
        "planned_reduction_kw": row.planned_reduction_kw, "shortfall_kw": row.shortfall_kw,
        "detail": row.detail, "ended_at": _iso(row.ended_at), "counts": counts,
        "actions": [{"key": a.key, "action": a.action, "state": a.state,
                     "backend_id": a.backend_id, "gpus": a.gpus, "power_kw": a.power_kw,
                     "attempts": a.attempts, "detail": a.detail,
                     "done_at": _iso(a.done_at), "updated_at": _iso(a.updated_at)}
                    for a in actions]}


def require_event(store: Store, event_id: str) -> GridEventRow:
    """The stored event ``event_id``.

    Raises
    ------
    InputError
        No such event (the message says how to list them).
    """
    rows = event_rows(store, event_id)
    if not rows:
        raise InputError(f"no grid event {event_id!r}; list them with `carbonsched grid-event "
                         "list` or GET /v1/grid-events")
    return rows[0]
