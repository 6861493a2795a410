"""Grid events, live: re-plan the site's window and act through dispatch, each action once.

A grid event (:class:`carbonsched.flex.GridEvent`) asks a site to shed IT power in a window.
:func:`grid_pass` (run by the service every ``CARBONSCHED_GRID_EVENT_INTERVAL_S`` and at once
when an event is posted; ``carbonsched grid-event apply`` runs one pass) does three things:

1. **Re-plan** an event that has started and has no actions yet (:func:`choose_actions`): the
   dispatch units of the site whose planned run overlaps the window, read live from the backend,
   are candidates — work not yet started is *held* (it starts at the event's end), running work
   of a preemptible job is *paused* (it resumes at the event's end) — each only if it still
   ends by its deadline when delayed by the event (:func:`delayed_end`) and, for a piece of a job
   planned in several, by the planned start of the job's next piece (pieces of one job never
   overlap: the event's detail names the piece, the hours and the next piece of each one
   refused so). Holds come first (they
   cost no checkpoint), then pauses; within each, the most slack first; until the chosen units'
   IT power reaches the target. The baseline is the peak planned IT power of the site's units
   in the window (:func:`baseline_kw`); what cannot be shed is the event's ``shortfall_kw``,
   named in its detail. Inference is never touched (it is not dispatched as units), so its
   SLOs hold.
2. **Act** (:func:`take_actions`): each chosen action is a row of ``grid_event_actions``,
   unique on ``(event, key, action)``, written before any side effect. An actor *claims* a row
   (a compare-and-set of ``state``/``owner``; lease ``CARBONSCHED_DISPATCH_LEASE_S``) before it
   calls the backend and marks it ``done`` after. A claim whose holder died (a process on this
   host that is gone, :func:`carbonsched.dispatch.lease.holder_is_dead`) or whose lease
   expired is taken over; the backend calls are idempotent (:class:`PausesWork` reads the
   job's state first), so an action whose side effect was made but not recorded is found done
   (``already``) and never made twice. An action the backend cannot take (the job is not in
   the state it needs, is gone, or the backend cannot pause) is recorded ``skipped``, and the
   pass names it apart from those taken (:attr:`GridPassSummary.skipped`): a shedding action
   skipped while its unit may still draw power (:attr:`SkippedAction.load_not_shed`) is
   power the re-plan counted as shed that is not.
3. **Undo** at the event's end: a ``resume`` for every pause done, a ``release`` for every
   hold done, taken the same way, each with the piece's planned end moved by the delay
   (:func:`moved_end`: what it had left from the undo, capped by its job's next piece and
   deadline; the backend stops it by then, and Kubernetes moves its ``stop-at``);
   the event is ``ended`` when none is open. Shedding actions
   still open at the end are skipped (never taken late); one claimed by an actor that died is
   marked done unseen, and its undo, which reads the backend first, settles it.

Backends (:class:`~carbonsched.adapters.dispatch.base.PausesWork`): Slurm ``scontrol suspend``
/ ``resume`` for running work and ``scontrol hold`` / ``release`` for pending work; Kubernetes
``spec.suspend`` on a Job or JobSet, and held objects kept held (the release loop skips keys an
event holds). docs/dispatch.md "Grid events" has the table.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd
from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from carbonsched.adapters.dispatch.base import (
    DispatchAdapter,
    PausesWork,
    WorkAction,
    WorkOutcome,
)
from carbonsched.catalog import Catalog
from carbonsched.dispatch.lease import holder_is_dead, owner_identity
from carbonsched.dispatch.outbox import unexpected
from carbonsched.domain import TERMINAL_STATES, JobState
from carbonsched.errors import BackendError, BackendUnavailableError, InputError
from carbonsched.flex import GridEvent
from carbonsched.store import Store
from carbonsched.store.grid_events import SHED, UNDO, held_keys
from carbonsched.store.grid_models import GridActionRow, GridEventRow
from carbonsched.store.models import DispatchRow

Clock = Callable[[], datetime]


@dataclass(frozen=True)
class Unit:
    """A dispatch unit as the re-plan sees it.

    Attributes
    ----------
    key, backend_id
        The dispatch key and the backend's id.
    running
        True when the backend reports it running now, False when it has not started.
    preemptible
        True when the job may be paused and resumed (a job the plan splits into pieces, or a
        placement marked ``preemptible``).
    gpus, power_kw
        GPUs and their IT power (GPUs x the type's IT power per GPU). [-], [kW]
    planned_start, planned_end, deadline
        The placement's planned run and the latest end its job allows (tz-aware).
    next_key, next_start
        The dispatch key and planned start (tz-aware) of the job's next piece still to run, at
        any site; None for a job placed whole or its last piece.
    """

    key: str
    backend_id: str | None
    running: bool
    preemptible: bool
    gpus: int
    power_kw: float
    planned_start: datetime
    planned_end: datetime
    deadline: datetime
    next_key: str | None = None
    next_start: datetime | None = None


@dataclass(frozen=True)
class Choice:
    """One chosen action: ``pause`` or ``hold`` of a unit, and its new end. [tz-aware]"""

    unit: Unit
    action: str
    new_end: datetime


@dataclass
class EventPlan:
    """What :func:`choose_actions` found for one event.

    Attributes
    ----------
    baseline_kw, target_kw, planned_kw
        Peak planned IT power in the window, the reduction asked, the IT power of the chosen
        units. [kW]
    choices
        The actions, in the order they are taken.
    left
        Units not chosen, by why (``not_preemptible``, ``deadline``, ``next_piece``,
        ``not_needed``). [-]
    refused
        One sentence per unit left as ``next_piece``: the piece, the hours it would run if
        delayed, and its job's next piece it would run into.
    """

    baseline_kw: float
    target_kw: float
    planned_kw: float
    choices: list[Choice]
    left: dict[str, int] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)

    @property
    def shortfall_kw(self) -> float:
        """``max(0, target - planned)``. [kW]"""
        return max(0.0, self.target_kw - self.planned_kw)

    def describe(self) -> str:
        """One line a person reads: what is shed, what is left and why."""
        n_p = sum(c.action == "pause" for c in self.choices)
        n_h = sum(c.action == "hold" for c in self.choices)
        text = (f"baseline {self.baseline_kw:.1f} kW, target {self.target_kw:.1f} kW: pause "
                f"{n_p} running unit(s), hold {n_h} not started, {self.planned_kw:.1f} kW")
        why = {"not_preemptible": "running and not preemptible",
               "deadline": "would miss its deadline if delayed to the event's end",
               "next_piece": "would run into its job's next piece if delayed to the event's "
                             "end",
               "not_needed": "not needed for the target"}
        if self.left:
            text += "; left running or due: " + ", ".join(
                f"{n} {why.get(k, k)}" for k, n in sorted(self.left.items()))
        if self.refused:
            text += "; " + "; ".join(self.refused)
        if self.shortfall_kw > 0:
            text += (f"; SHORTFALL {self.shortfall_kw:.1f} kW: no more work at the site can "
                     "be paused or held without missing a deadline or running a piece into "
                     "its job's next piece")
        return text


def delayed_end(unit: Unit, event: GridEvent, now: datetime, action: str) -> datetime:
    """When ``unit`` ends if ``action`` keeps it off until the event's end. [tz-aware]

    A pause at ``t0 = max(now, event.start)`` leaves ``planned_end - t0`` of its run for after
    the event; a hold moves its whole planned run to start at the event's end (or at its
    planned start, if later).
    """
    if action == "pause":
        t0 = max(now, event.start)
        return event.end + max(timedelta(0), unit.planned_end - t0)
    start = max(event.end, unit.planned_start)
    return start + (unit.planned_end - unit.planned_start)


def moved_end(action: str, planned_start: datetime, planned_end: datetime,
              shed_at: datetime | None, now: datetime, deadline: datetime,
              next_start: datetime | None) -> datetime:
    """The planned end of a piece a grid event held or paused, moved by the delay. [tz-aware]

    At the undo (``now``), the piece runs what it has left: a ``release`` its whole planned
    run from ``max(now, planned_start)``; a ``resume`` its planned end less the instant it was
    paused (``shed_at``, the pause's ``done_at``; the planned end when not known: nothing
    left) from ``now``. The end is capped by the job's ``deadline`` and the planned start of
    its next piece (``next_start``; pieces of one job never overlap), and is never before
    the planned end. The backend stops the run by it as it would at its planned end
    (:meth:`~carbonsched.adapters.dispatch.base.PausesWork.resume`).

    Parameters
    ----------
    action
        The undo: ``"release"`` (of a hold) or ``"resume"`` (of a pause).
    planned_start, planned_end
        The piece's planned run. [tz-aware]
    shed_at
        When the pause took effect (``"resume"`` only). [tz-aware]
    now
        The actor's clock at the undo. [tz-aware]
    deadline, next_start
        The job's latest end, and its next piece's planned start (None for a job placed
        whole or its last piece). [tz-aware]
    """
    if action == "release":
        end = max(now, planned_start) + (planned_end - planned_start)
    else:
        paused = planned_end if shed_at is None else max(shed_at, planned_start)
        end = now + max(timedelta(0), planned_end - paused)
    cap = min(deadline, next_start) if next_start is not None else deadline
    return max(planned_end, min(end, cap))


def baseline_kw(units: Sequence[Unit], event: GridEvent, now: datetime) -> float:
    """Peak planned IT power of ``units`` in the event's window. [kW]

    A running unit counts from the window's start to its planned end (at least until ``now``:
    a unit running late still draws); one not started over its planned run.
    """
    spans = []
    for u in units:
        s = event.start if u.running else max(u.planned_start, event.start)
        e = min(max(u.planned_end, now + timedelta(seconds=1)) if u.running
                else u.planned_end, event.end)
        if e > s:
            spans.append((s, e, u.power_kw))
    points = sorted({s for s, _, _ in spans})
    return max((sum(p for s, e, p in spans if s <= t < e) for t in points), default=0.0)


def choose_actions(event: GridEvent, units: Sequence[Unit], now: datetime) -> EventPlan:
    """The re-plan of one event: which units to hold and pause (module docstring, step 1).

    Parameters
    ----------
    event
        The grid event.
    units
        The site's live dispatch units whose planned run overlaps the window.
    now
        The actor's clock (tz-aware).

    Returns
    -------
    EventPlan
        A unit is chosen only if :func:`delayed_end` is at or before its deadline and at or
        before the planned start of its job's next piece (:attr:`Unit.next_start`): a piece
        delayed past it would overlap that piece's hours (on Slurm the next piece waits for it,
        ``--dependency=afterany``, and is pushed into hours the plan gave to other work; on
        Kubernetes, where each piece is released at its own start, it would run at once with
        the next piece, or, bounded by its planned stop, lose the work of its delay). Both
        limits are inclusive: a piece that would end exactly when the next starts is chosen.
        One refused for its next piece is named in :attr:`EventPlan.refused`.
    """
    base = baseline_kw(units, event, now)
    target = event.reduction_kw(base)
    left: dict[str, int] = {}
    refused: list[str] = []
    cands: list[tuple[int, timedelta, Choice]] = []
    for u in units:
        if u.running:
            if not u.preemptible:
                left["not_preemptible"] = left.get("not_preemptible", 0) + 1
                continue
            action, rank = "pause", 1
        else:
            if u.planned_start >= event.end:
                continue
            action, rank = "hold", 0
        end = delayed_end(u, event, now, action)
        if end > u.deadline:
            left["deadline"] = left.get("deadline", 0) + 1
            continue
        if u.next_start is not None and end > u.next_start:
            left["next_piece"] = left.get("next_piece", 0) + 1
            refused.append(_overlap(u, event, now, action, end))
            continue
        cands.append((rank, u.deadline - end, Choice(u, action, end)))
    cands.sort(key=lambda c: (c[0], -c[1].total_seconds(), c[2].unit.key))
    chosen: list[Choice] = []
    shed = 0.0
    for _, _, c in cands:
        if shed >= target - 1e-9:
            left["not_needed"] = left.get("not_needed", 0) + 1
            continue
        chosen.append(c)
        shed += c.unit.power_kw
    return EventPlan(base, target, shed, chosen, left, refused)


def _hm(ts: datetime) -> str:
    return pd.Timestamp(ts).tz_convert("UTC").strftime("%Y-%m-%d %H:%M UTC")


def _overlap(u: Unit, event: GridEvent, now: datetime, action: str, end: datetime) -> str:
    """Why ``u`` is not held or paused: the hours it would run, into its job's next piece."""
    if action == "hold":
        start = max(pd.Timestamp(event.end), pd.Timestamp(u.planned_start))
        did = (f"{u.key} not held: held to the event's end it would run {_hm(start)} to "
               f"{_hm(end)} (planned {_hm(u.planned_start)} to {_hm(u.planned_end)})")
    else:
        did = (f"{u.key} not paused: paused to the event's end it would run on until "
               f"{_hm(end)} (planned to end {_hm(u.planned_end)})")
    return (f"{did}, past {_hm(u.next_start or end)}, when its job's next piece {u.next_key} "
            "starts; pieces of one job never overlap")


# --- the pass -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class SkippedAction:
    """An action a pass recorded ``skipped``: nothing was done to its unit.

    Attributes
    ----------
    event_id, key, action
        The event, the dispatch unit and the action (``pause``, ``hold``, ``resume``,
        ``release``).
    outcome
        Why, in a word: the backend's (:class:`WorkOutcome` ``absent``, ``wrong_state``,
        ``unsupported``), or ``skipped`` when no backend call was made (no adapter for the
        site in this actor, a backend that cannot pause or hold, the event ended before it was
        taken).
    why
        What was found, in the backend's words or the pass's.
    power_kw
        IT power of the unit (GPUs x the type's IT power per GPU). [kW]
    """

    event_id: str
    key: str
    action: str
    outcome: str
    why: str
    power_kw: float

    @property
    def load_not_shed(self) -> bool:
        """A shedding action (pause, hold) skipped while its unit may still draw its power.

        Every skipped shedding action but ``absent`` (the backend has the job no more, or it
        is over: it draws nothing): the re-plan counted the unit's power as shed, and it is
        not.
        """
        return self.action in SHED and self.outcome != WorkOutcome.ABSENT.value


@dataclass
class GridPassSummary:
    """What one :func:`grid_pass` did.

    Attributes
    ----------
    planned
        Event ids re-planned in this pass.
    taken
        ``(event_id, key, action, outcome)`` of every action this pass took (``done``), found
        done (``already``: an earlier attempt's) or settled at the event's end (``settled``).
    skipped
        Actions this pass recorded ``skipped`` (:class:`SkippedAction`), apart from ``taken``.
    retry
        ``(event_id, key, action, why)`` of actions left for the next pass (backend down).
    failed
        ``(event_id, key, action, why)`` of actions given up after the retries.
    ended
        Event ids whose every undo action is done.
    backends
        ``{key: backend kind}`` of every action taken, found done or skipped: the part of the
        adapter's name before ``:`` (``slurm``, ``kubernetes``), ``none`` without an adapter
        (the service's ``carbonsched_grid_event_actions_total`` counter is labelled by it).
    """

    planned: list[str] = field(default_factory=list)
    taken: list[tuple[str, str, str, str]] = field(default_factory=list)
    skipped: list[SkippedAction] = field(default_factory=list)
    retry: list[tuple[str, str, str, str]] = field(default_factory=list)
    failed: list[tuple[str, str, str, str]] = field(default_factory=list)
    ended: list[str] = field(default_factory=list)
    backends: dict[str, str] = field(default_factory=dict)

    @property
    def load_not_shed(self) -> list[SkippedAction]:
        """The skipped shedding actions whose unit may still draw its power."""
        return [a for a in self.skipped if a.load_not_shed]

    def to_dict(self) -> dict[str, Any]:
        """As JSON (``grid-event apply --json``)."""
        return {"planned": self.planned, "ended": self.ended,
                "taken": [dict(zip(("event_id", "key", "action", "outcome"), t, strict=True))
                          for t in self.taken],
                "skipped": [{**asdict(a), "load_not_shed": a.load_not_shed}
                            for a in self.skipped],
                "retry": [dict(zip(("event_id", "key", "action", "why"), t, strict=True))
                          for t in self.retry],
                "failed": [dict(zip(("event_id", "key", "action", "why"), t, strict=True))
                           for t in self.failed]}


def backend_kind(adapter: DispatchAdapter | None) -> str:
    """The backend kind of an adapter: its name before ``:`` (``slurm``), ``none`` for None."""
    return "none" if adapter is None else str(adapter.name).split(":", 1)[0]


def _event(row: GridEventRow) -> GridEvent:
    return GridEvent(site=row.site, start=pd.Timestamp(row.start), end=pd.Timestamp(row.end),
                     target_kw=row.target_kw, target_fraction=row.target_fraction,
                     notice=pd.Timedelta(seconds=row.notice_s or 0), id=row.event_id)


def _preemptible(store: Store, rows: Sequence[DispatchRow]) -> set[str]:
    """Keys of rows whose job may be paused: split into pieces, or marked ``preemptible``."""
    out = set()
    plans: dict[str, dict[str, Any]] = {}
    for r in rows:
        req = json.loads(r.request_json)
        if int(req.get("pieces") or 1) > 1:
            out.add(r.key)
            continue
        if r.plan_id not in plans:
            try:
                plans[r.plan_id] = {str(p["job_id"]): p for p in
                                    store.get_plan(r.plan_id).get("placements", [])}
            except InputError:
                plans[r.plan_id] = {}
        if plans[r.plan_id].get(r.job_id, {}).get("preemptible"):
            out.add(r.key)
    return out


def site_units(store: Store, catalog: Catalog, adapter: DispatchAdapter, event: GridEvent,
               now: datetime) -> list[Unit]:
    """The site's dispatch units whose planned run overlaps the window, read live.

    Running or not started comes from the backend (:meth:`DispatchAdapter.status`), never the
    stored record (which may be a refresh interval old); units the backend reports over, or
    no longer has, are left out, and so are units another event already pauses or holds (a
    repeated POST of one event sheds nothing twice).
    """
    from carbonsched.workload.files import it_power_per_gpu_kw

    with Session(store.engine) as s:
        rows = list(s.scalars(select(DispatchRow).where(
            DispatchRow.site == event.site, DispatchRow.state.not_in(sorted(TERMINAL_STATES)),
            DispatchRow.backend_id.is_not(None), DispatchRow.planned_start < event.end)))
    if not rows:
        return []
    try:
        live = adapter.status([r.key for r in rows])
    except Exception as exc:   # a fault in the adapter: the event waits, as for an outage
        raise unexpected(adapter.name, "status", exc) from exc
    pre = _preemptible(store, rows)
    nxt = next_pieces(store, rows)
    taken = held_keys(store, [r.key for r in rows])
    out = []
    for r in rows:
        if r.key in taken:   # paused or held by another event (a repeated or overlapping one)
            continue
        job = live.get(r.key)
        if job is None or job.state.value in TERMINAL_STATES:
            continue
        running = job.state is JobState.RUNNING
        if not running and r.planned_end <= max(now, event.start):
            continue
        req = json.loads(r.request_json)
        gpus = int(req["gpus"])
        out.append(Unit(key=r.key, backend_id=job.backend_id, running=running,
                        preemptible=r.key in pre, gpus=gpus,
                        power_kw=gpus * it_power_per_gpu_kw(req["gpu_type"], catalog),
                        planned_start=r.planned_start, planned_end=r.planned_end,
                        deadline=datetime.fromisoformat(req["deadline"].replace("Z", "+00:00"))
                        .astimezone(UTC), next_key=nxt.get(r.key, (None, None))[0],
                        next_start=nxt.get(r.key, (None, None))[1]))
    return out


def next_pieces(store: Store, rows: Sequence[DispatchRow]) -> dict[str, tuple[str, datetime]]:
    """The next piece of each row's job: ``{key: (next piece's key, its planned start)}``.

    The piece of the same job with the earliest planned start among its later pieces (higher
    piece number) still to run (not Succeeded, Failed or Cancelled), at any site; a row whose
    job has none (placed whole, or its last piece) is absent. One query for every job of
    ``rows``.
    """
    jobs = sorted({r.job_id for r in rows})
    if not jobs:
        return {}
    with Session(store.engine) as s:
        later = list(s.execute(select(
            DispatchRow.job_id, DispatchRow.piece, DispatchRow.key,
            DispatchRow.planned_start).where(DispatchRow.job_id.in_(jobs),
                                             DispatchRow.state.not_in(sorted(TERMINAL_STATES)))))
    out: dict[str, tuple[str, datetime]] = {}
    for r in rows:
        after = [(st, k) for j, p, k, st in later if j == r.job_id and p > r.piece]
        if after:
            st, k = min(after)
            out[r.key] = (k, st)
    return out


def plan_event(store: Store, catalog: Catalog, adapter: DispatchAdapter, row: GridEventRow,
               now: datetime) -> EventPlan:
    """Re-plan one started event and write its actions (once: a second call finds them).

    Backends that cannot pause running work (:attr:`PausesWork.pauses_running` False) offer
    only their units not yet started.
    """
    event = _event(row)
    units = site_units(store, catalog, adapter, event, now)
    can_pause = isinstance(adapter, PausesWork) and adapter.pauses_running
    if not isinstance(adapter, PausesWork):
        units = []
    plan = choose_actions(event, [u if can_pause or not u.running else
                                  replace(u, preemptible=False) for u in units], now)
    detail = plan.describe()
    if not isinstance(adapter, PausesWork):
        detail = (f"the backend {adapter.name} cannot pause or hold work; nothing shed. "
                  + detail)
    elif not can_pause:
        detail += f"; {adapter.name} cannot pause running work (only holds)"

    def write() -> None:
        with Session(store.engine) as s, s.begin():
            ev = s.get(GridEventRow, row.event_id, with_for_update=True)
            if ev is None or ev.planned_at is not None:
                return  # another actor planned it first: its actions stand
            for c in plan.choices:
                s.add(GridActionRow(event_id=row.event_id, key=c.unit.key, action=c.action,
                                    site=row.site, backend_id=c.unit.backend_id,
                                    gpus=c.unit.gpus, power_kw=c.unit.power_kw,
                                    state="planned", attempts=0, created_at=now,
                                    updated_at=now,
                                    detail=f"{c.action} until {row.end.isoformat()}; ends by "
                                           f"{c.new_end.isoformat()} (deadline "
                                           f"{c.unit.deadline.isoformat()})"))
            ev.planned_at = now
            ev.baseline_kw, ev.target_reduction_kw = plan.baseline_kw, plan.target_kw
            ev.planned_reduction_kw, ev.shortfall_kw = plan.planned_kw, plan.shortfall_kw
            ev.detail = detail

    store._retry_locked(write, "re-planning a grid event")
    return plan


def _claim(store: Store, action_id: int, owner: str, lease: timedelta, now: datetime,
           is_dead: Callable[[str], bool]) -> GridActionRow | None:
    """Claim one action (compare-and-set); the row as claimed, or None when another holds it."""
    def run() -> GridActionRow | None:
        with Session(store.engine, expire_on_commit=False) as s, s.begin():
            r = s.get(GridActionRow, action_id)
            if r is None:
                return None
            free = r.state == "planned" or (r.state == "claimed" and (
                r.owner == owner or r.owner is None
                or (r.lease_expires_at is not None and r.lease_expires_at <= now)
                or is_dead(r.owner)))
            if not free:
                return None
            took_over = r.state == "claimed" and r.owner not in (None, owner)
            res = s.execute(update(GridActionRow).where(
                GridActionRow.id == action_id, GridActionRow.state == r.state,
                GridActionRow.owner.is_not_distinct_from(r.owner),
                GridActionRow.attempts == r.attempts).values(
                state="claimed", owner=owner, lease_expires_at=now + lease,
                attempts=r.attempts + 1, updated_at=now,
                detail=(f"taken over at {now.isoformat()} from {r.owner} (gone or its lease "
                        "expired); the backend is read before acting" if took_over
                        else r.detail)))
            if res.rowcount != 1:
                return None
        s2 = Session(store.engine, expire_on_commit=False)
        try:
            return s2.get(GridActionRow, action_id)
        finally:
            s2.close()

    return store._retry_locked(run, "claiming a grid-event action")


def _finish(store: Store, action_id: int, owner: str, state: str, detail: str,
            backend_id: str | None, now: datetime) -> bool:
    """Record an action's end, only if this actor still holds it."""
    def run() -> bool:
        with Session(store.engine) as s, s.begin():
            vals: dict[str, Any] = {"state": state, "detail": detail, "updated_at": now,
                                    "owner": None if state == "planned" else owner,
                                    "lease_expires_at": None}
            if backend_id:
                vals["backend_id"] = backend_id
            if state == "done":
                vals["done_at"] = now
            res = s.execute(update(GridActionRow).where(
                GridActionRow.id == action_id, GridActionRow.owner == owner,
                GridActionRow.state == "claimed").values(**vals))
            return res.rowcount == 1

    return store._retry_locked(run, "recording a grid-event action")


def _call(adapter: PausesWork, row: GridActionRow, planned_start: datetime,
          now: datetime, end_by: datetime | None) -> WorkAction:
    if row.action == "pause":
        return adapter.pause(row.key)
    if row.action == "resume":
        return adapter.resume(row.key, end_by=end_by)
    if row.action == "hold":
        return adapter.hold(row.key)
    return adapter.unhold(row.key, planned_start, now, end_by=end_by)


@dataclass(frozen=True)
class _Piece:
    """What an undo needs to move a piece's planned end (:func:`moved_end`)."""

    planned_start: datetime
    planned_end: datetime
    deadline: datetime
    next_start: datetime | None
    shed_at: datetime | None


def _pieces(store: Store, rows: Sequence[GridActionRow]) -> dict[tuple[str, str], _Piece]:
    """``{(event id, key): _Piece}`` of the undo actions among ``rows``."""
    undo = [r for r in rows if r.action in UNDO.values()]
    if not undo:
        return {}
    with Session(store.engine, expire_on_commit=False) as s:
        units = {d.key: d for d in s.scalars(select(DispatchRow).where(
            DispatchRow.key.in_({r.key for r in undo})))}
        shed = {(a.event_id, a.key): a.done_at for a in s.scalars(select(GridActionRow).where(
            GridActionRow.event_id.in_({r.event_id for r in undo}),
            GridActionRow.key.in_({r.key for r in undo}),
            GridActionRow.action.in_(list(SHED))))}
    nxt = next_pieces(store, list(units.values()))
    out = {}
    for r in undo:
        d = units.get(r.key)
        if d is None:
            continue
        deadline = datetime.fromisoformat(json.loads(d.request_json)["deadline"].replace(
            "Z", "+00:00")).astimezone(UTC)
        out[(r.event_id, r.key)] = _Piece(
            _utc(d.planned_start), _utc(d.planned_end), deadline,
            None if r.key not in nxt else _utc(nxt[r.key][1]),
            None if shed.get((r.event_id, r.key)) is None
            else _utc(shed[(r.event_id, r.key)]))
    return out


def _utc(ts: datetime) -> datetime:
    """``ts`` tz-aware UTC (SQLite hands back naive UTC)."""
    return ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)


def take_actions(store: Store, adapters: Mapping[str, DispatchAdapter], rows: Sequence[
        GridActionRow], summary: GridPassSummary, *, owner: str, lease: timedelta,
        clock: Clock, max_attempts: int, is_dead: Callable[[str], bool] = holder_is_dead
        ) -> None:
    """Claim and take each action of ``rows`` (module docstring, step 2)."""
    starts: dict[str, datetime] = {}
    if rows:
        with Session(store.engine) as s:
            starts = {k: v for k, v in s.execute(select(
                DispatchRow.key, DispatchRow.planned_start).where(
                DispatchRow.key.in_([r.key for r in rows])))}
    pieces = _pieces(store, rows)
    for r in rows:
        now = clock()
        claimed = _claim(store, r.id, owner, lease, now, is_dead)
        if claimed is None:
            continue
        adapter = adapters.get(r.site)
        summary.backends[r.key] = backend_kind(adapter)
        if adapter is None or not isinstance(adapter, PausesWork):
            why = (f"no adapter for site {r.site} in this actor" if adapter is None else
                   f"{adapter.name} cannot pause or hold work")
            _finish(store, r.id, owner, "skipped", why, None, clock())
            summary.skipped.append(SkippedAction(r.event_id, r.key, r.action, "skipped", why,
                                                 r.power_kw))
            continue
        try:
            try:
                pc = pieces.get((r.event_id, r.key))
                end_by = None if pc is None else moved_end(
                    r.action, pc.planned_start, pc.planned_end, pc.shed_at, now, pc.deadline,
                    pc.next_start)
                got = _call(adapter, claimed, starts.get(r.key, now), now, end_by)
            except (BackendError, InputError):
                raise
            except Exception as exc:   # a fault in the adapter: counted as a failed attempt
                raise BackendError(str(unexpected(adapter.name, f"{r.action} of {r.key}",
                                                  exc))) from exc
        except BackendUnavailableError as exc:
            _finish(store, r.id, owner, "planned",
                    f"BackendUnavailable at {now.isoformat()}, retried next pass: {exc}",
                    None, clock())
            summary.retry.append((r.event_id, r.key, r.action, str(exc)))
            continue
        except (BackendError, InputError) as exc:
            final = claimed.attempts >= max_attempts
            _finish(store, r.id, owner, "failed" if final else "planned",
                    f"attempt {claimed.attempts} of {max_attempts} failed: {exc}", None,
                    clock())
            (summary.failed if final else summary.retry).append(
                (r.event_id, r.key, r.action, str(exc)))
            continue
        prior = (claimed.detail + "; ") if claimed.detail.startswith("taken over") else ""
        done = got.outcome in (WorkOutcome.DONE, WorkOutcome.ALREADY)
        _finish(store, r.id, owner, "done" if done else "skipped",
                f"{prior}{got.outcome}: {got.detail}", got.backend_id, clock())
        if done:
            summary.taken.append((r.event_id, r.key, r.action, str(got.outcome)))
        else:
            summary.skipped.append(SkippedAction(r.event_id, r.key, r.action,
                                                 str(got.outcome), got.detail, r.power_kw))


def grid_pass(store: Store, catalog: Catalog, adapters: Mapping[str, DispatchAdapter], *,
              clock: Clock, lease_s: float = 120.0, max_attempts: int = 5,
              owner: str | None = None, is_dead: Callable[[str], bool] = holder_is_dead,
              event_id: str | None = None) -> GridPassSummary:
    """One pass over the stored grid events (module docstring): re-plan, act, undo.

    Parameters
    ----------
    store, catalog, adapters
        The store, the catalog and an adapter per site id (sites without one are left for
        an actor that has it).
    clock
        The actor's "now" (tz-aware).
    lease_s
        How long an action's claim lasts (``CARBONSCHED_DISPATCH_LEASE_S``). [s]
    max_attempts
        Backend errors of one action before it is ``failed``
        (``CARBONSCHED_DISPATCH_MAX_ATTEMPTS``); an unreachable backend is retried every
        pass. [-]
    owner
        The claim's owner id (default :func:`~carbonsched.dispatch.lease.owner_identity`).
    event_id
        Only this event.

    Returns
    -------
    GridPassSummary
    """
    owner = owner or owner_identity()
    lease = timedelta(seconds=lease_s)
    summary = GridPassSummary()
    now = clock()
    with Session(store.engine, expire_on_commit=False) as s:
        q = select(GridEventRow).where(GridEventRow.ended_at.is_(None),
                                       GridEventRow.start <= now)
        if event_id:
            q = q.where(GridEventRow.event_id == event_id)
        events = list(s.scalars(q.order_by(GridEventRow.start)))
    for ev in events:
        adapter = adapters.get(ev.site)
        if adapter is None:
            if ev.planned_at is None and now >= ev.end:
                _close(store, ev.event_id, now, "ended before any actor could act on it (no "
                       "backend for its site was available in its window)")
                summary.ended.append(ev.event_id)
            elif ev.site in catalog.site_ids:
                # a site of this catalog whose backend could not be built (/readyz
                # sites_unavailable names why): the event waits, and an unplanned one says so
                # where its reader looks (once: the first pass that found it so)
                why = (f"waiting since {now.isoformat()}: no backend for site {ev.site} in "
                       "this service (its adapter could not be built; /readyz names why); "
                       "retried every pass")
                if "no backend for site" not in (ev.detail or ""):
                    _note(store, ev.event_id, why)
                summary.retry.append((ev.event_id, "", "plan" if ev.planned_at is None
                                      else "act", why))
            # else: a site of another catalog sharing the store; an actor that has it acts
            continue
        if ev.planned_at is None and now < ev.end:
            try:
                plan_event(store, catalog, adapter, ev, now)
            except BackendError as exc:
                # an outage is a state: the event says why it waits, the next pass re-plans
                why = (f"re-plan waiting since {now.isoformat()}: {adapter.name} could not be "
                       f"read ({exc}); retried every pass")
                _note(store, ev.event_id, why)
                summary.retry.append((ev.event_id, "", "plan", str(exc)))
                continue
            summary.planned.append(ev.event_id)
        elif ev.planned_at is None:
            _close(store, ev.event_id, now, "ended before any actor could act on it "
                   "(no service pass ran in its window)")
            summary.ended.append(ev.event_id)
            continue
        acts = _actions(store, ev.event_id)
        if clock() < ev.end:
            todo = [a for a in acts if a.action in SHED and a.state in ("planned", "claimed")]
            take_actions(store, adapters, todo, summary, owner=owner, lease=lease, clock=clock,
                         max_attempts=max_attempts, is_dead=is_dead)
            continue
        _end_event(store, adapters, ev, acts, summary, owner=owner, lease=lease, clock=clock,
                   max_attempts=max_attempts, is_dead=is_dead)
    return summary


def _actions(store: Store, event_id: str) -> list[GridActionRow]:
    with Session(store.engine, expire_on_commit=False) as s:
        return list(s.scalars(select(GridActionRow).where(
            GridActionRow.event_id == event_id).order_by(GridActionRow.id)))


def _note(store: Store, event_id: str, detail: str) -> None:
    """Set a not yet planned event's detail (what it waits for)."""
    def run() -> None:
        with Session(store.engine) as s, s.begin():
            s.execute(update(GridEventRow).where(GridEventRow.event_id == event_id,
                                                 GridEventRow.planned_at.is_(None)).values(
                detail=detail))

    store._retry_locked(run, "noting a grid event's wait")


def _close(store: Store, event_id: str, now: datetime, note: str = "") -> None:
    def run() -> None:
        with Session(store.engine) as s, s.begin():
            ev = s.get(GridEventRow, event_id)
            if ev is not None and ev.ended_at is None:
                ev.ended_at = now
                if note:
                    ev.detail = f"{ev.detail}; {note}" if ev.detail else note

    store._retry_locked(run, "closing a grid event")


def _close_planned(store: Store, rows: list[GridActionRow], now: datetime, state: str,
                   detail: Any, doing: str) -> None:
    """Set ``rows`` still ``planned`` to ``state`` with ``detail`` (a value or SQL)."""
    def run() -> None:
        with Session(store.engine) as s, s.begin():
            s.execute(update(GridActionRow).where(
                GridActionRow.id.in_([a.id for a in rows]),
                GridActionRow.state == "planned").values(state=state, updated_at=now,
                                                         detail=detail))
    store._retry_locked(run, doing)


def _end_event(store: Store, adapters: Mapping[str, DispatchAdapter], ev: GridEventRow,
               acts: list[GridActionRow], summary: GridPassSummary, **kw: Any) -> None:
    """Step 3: skip shedding actions still open, write and take the undo actions."""
    now = kw["clock"]()
    # a shedding action tried before (a timeout: the backend may have applied it) is settled
    # as done, so that its undo, which reads the backend first, is written and taken; one
    # never tried is skipped
    tried = [a for a in acts if a.action in SHED and a.state == "planned" and a.attempts > 0]
    if tried:
        _close_planned(store, tried, now, "done", GridActionRow.detail + (
            "; the event ended after an attempt that may have taken effect: undone regardless "
            "(the undo reads the backend first)"), "settling a grid event's tried actions")
        for a in tried:
            summary.taken.append((a.event_id, a.key, a.action, "settled"))
            summary.backends[a.key] = backend_kind(adapters.get(ev.site))
        acts = _actions(store, ev.event_id)
    open_shed = [a for a in acts if a.action in SHED and a.state == "planned"]
    if open_shed:
        late = "the event ended before this action was taken: not taken late"
        _close_planned(store, open_shed, now, "skipped", late,
                       "skipping a grid event's late actions")
        for a in open_shed:
            summary.skipped.append(SkippedAction(a.event_id, a.key, a.action, "skipped", late,
                                                 a.power_kw))
            summary.backends[a.key] = backend_kind(adapters.get(ev.site))
    stuck = [a for a in acts if a.action in SHED and a.state == "claimed"]
    for a in stuck:
        # an actor was taking this shedding action (and died, or its lease ran out): never take
        # it now, after the end; mark it done so that its undo, which reads the backend first
        # (``already`` when nothing was paused or held), is what settles it
        c = _claim(store, a.id, kw["owner"], kw["lease"], now, kw["is_dead"])
        if c is None:
            continue   # a live actor still holds it: the next pass
        _finish(store, a.id, kw["owner"], "done",
                f"{c.detail}; the event ended before its actor recorded it: not taken now, "
                "undone regardless (the undo reads the backend first)", None, now)
        summary.taken.append((a.event_id, a.key, a.action, "settled"))
        summary.backends[a.key] = backend_kind(adapters.get(ev.site))
    if stuck:
        acts = _actions(store, ev.event_id)
    have = {(a.key, a.action) for a in acts}
    new = [a for a in acts if a.action in SHED and a.state == "done"
           and (a.key, UNDO[a.action]) not in have]
    if new:
        def write() -> None:
            with Session(store.engine) as s, s.begin():
                for a in new:
                    s.add(GridActionRow(event_id=ev.event_id, key=a.key, action=UNDO[a.action],
                                        site=a.site, backend_id=a.backend_id, gpus=a.gpus,
                                        power_kw=a.power_kw, state="planned", attempts=0,
                                        created_at=now, updated_at=now,
                                        detail=f"{UNDO[a.action]} at the event's end"))
        try:
            store._retry_locked(write, "writing a grid event's undo actions")
        except IntegrityError:
            pass  # another actor wrote them first (unique on event, key, action): theirs stand
        acts = _actions(store, ev.event_id)
    todo = [a for a in acts if a.action in UNDO.values() and a.state in ("planned", "claimed")]
    take_actions(store, adapters, todo, summary, **kw)
    acts = _actions(store, ev.event_id)
    if not any(a.state in ("planned", "claimed") for a in acts):
        _close(store, ev.event_id, kw["clock"]())
        summary.ended.append(ev.event_id)
