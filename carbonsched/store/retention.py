"""Retention: delete what is both older than N days and finished, never what work still needs.

:func:`prune` deletes, table by table and in batches (one transaction per batch), the rows
that are older than ``keep_days`` days **and** finished. The cutoff is ``now - keep_days``; a
row is older when its time is strictly before the cutoff, so a row exactly ``keep_days`` days
old stays (:func:`cutoff`).

What goes (and what always stays):

``dispatch_intents``
    Terminal units (``Succeeded``, ``Failed``, ``Cancelled``) whose planned end, actual end
    (when known) and job deadline are all before the cutoff, as every other unit of the same
    job (a job's units go together: its first unit is its claim on the id). A ``Pending``,
    ``Dispatched``, ``Running`` or ``Paused`` row is never deleted (the outbox's
    exactly-once); a finished unit whose job's deadline is still inside the window stays, so
    that the same job id in a later plan is taken for the dispatched one, never submitted
    again.
``service_jobs``
    API jobs in a terminal state last changed before the cutoff.
``rolling_jobs``
    Ended (``Failed``) rows, and committed (``Dispatched``) rows whose last piece ended, last
    changed before the cutoff with the job's deadline before it too (a workload file that still
    lists the job ends it ``DeadlinePassed`` instead of planning it again). ``Pending`` rows,
    and the rows of the newest rolling run (its issue time orders the next run), stay.
``plans`` (with their ``placements``, ``inference_placements`` and ``forecasts``)
    Plans recorded before the cutoff, for a date before the cutoff's, whose placements and
    inference hours all end before the cutoff, and that no remaining dispatch intent, rolling
    job, API job or running run record references; never the newest plan of a catalog (the
    plan the service serves).
``booking_ledger``
    Lock rows last changed before the cutoff whose plan is not kept.
``pipeline_runs``
    Finished records (not ``running`` or ``interrupted``) issued and finished before the
    cutoff, and issued at least :data:`RUN_RECORD_FLOOR_DAYS` days ago whatever ``keep_days``
    is: the cron and ``plan --dispatch`` look up the records of the newest due run and the
    one before it (issued at or after their run time, since the cron refuses a run after its
    issue time), which 3 days cover whatever the zone and offset.
``grid_events`` (with their ``grid_event_actions``)
    Events that ended (``ended_at``) before the cutoff, whose window also ended before it, with
    no action claimed by an actor.
``signal_fetches``, ``published_forecasts``
    Fetch log rows fetched before the cutoff; published forecast values published for an hour
    before the cutoff (and published before it).

``pruned_jobs``
    Tombstones written more than :data:`~carbonsched.store.pruned_jobs.TOMBSTONE_DAYS` days
    before the cutoff.

Tombstones: a job id whose rows go (its outbox units, its API record, its rolling row) gets
one row in ``pruned_jobs`` (id, final state and reason, ``now``), written in the transaction
that deletes them (:mod:`carbonsched.store.pruned_jobs`). The runs, the API and dispatch read
it: the id stays final, so a static workload file that still lists the job neither plans it
again nor reports it ``DeadlinePassed`` again, and no new intent is written under the id.
While a job still has units in the outbox (its claim on the id: live, or ended too recently
to go), its API record or rolling row goes without a tombstone; the units' own prune writes
it, with the state they recorded.

Not pruned: ``signal_cache`` (the signal history the forecasts train on; one row per zone,
signal and hour), ``api_tokens`` and ``service_leases`` (a handful of rows).

A dry run counts exactly what a real run would delete, with the same rules. On SQLite freed
pages are reused by later writes but the file does not shrink until ``VACUUM``
(:func:`vacuum`); on PostgreSQL autovacuum makes the space reusable.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import and_, delete, exists, false, func, not_, or_, select, text
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session, aliased
from sqlalchemy.sql import ColumnElement

from carbonsched.domain import TERMINAL_STATES, JobState
from carbonsched.errors import InputError
from carbonsched.store.grid_models import GridActionRow, GridEventRow
from carbonsched.store.models import (
    DispatchRow,
    ForecastRow,
    InferenceRow,
    PlacementRow,
    PlanRow,
)
from carbonsched.store.pruned_jobs import TOMBSTONE_DAYS, PrunedJobRow, write_tombstones
from carbonsched.store.rolling_models import RollingJobRow
from carbonsched.store.service import RETRYABLE
from carbonsched.store.service_models import BookingLedgerRow, RunRow, ServiceJobRow
from carbonsched.store.signal_models import PublishedForecastRow, SignalFetchRow

log = logging.getLogger("carbonsched.store.retention")

MIN_KEEP_DAYS = 1
"""Fewest days :func:`prune` keeps: 0 would delete work finished a moment ago. [d]"""
RUN_RECORD_FLOOR_DAYS = 3
"""Run records issued less than this long ago stay whatever ``keep_days`` is (module doc). [d]"""
BATCH_ROWS = 1000
"""Rows deleted per transaction (and per ``IN`` list). [-]"""
PLAN_BATCH = 10
"""Plans deleted per transaction (a plan of 10k jobs has 10k placements and its forecasts). [-]"""

CLAIMED = "claimed"
"""State of a grid action an actor holds."""

TABLES = ("dispatch_intents", "service_jobs", "rolling_jobs", "plans", "placements",
          "inference_placements", "forecasts", "booking_ledger", "pipeline_runs",
          "grid_events", "grid_event_actions", "signal_fetches", "published_forecasts",
          "pruned_jobs")
"""The tables :func:`prune` deletes from, in the order it reports them."""


@dataclass
class PruneResult:
    """What :func:`prune` deleted (or, in a dry run, would delete)."""

    keep_days: int
    cutoff: datetime
    """Rows older than this (strictly before it) and finished are deleted. [UTC]"""
    dry_run: bool
    dialect: str
    deleted: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TABLES, 0))
    """Rows per table (every table of :data:`TABLES`, 0 included)."""
    tombstones: int = 0
    """Job ids whose rows went, each recorded final in ``pruned_jobs`` (in a dry run: ids
    whose rows would go). [-]"""

    @property
    def total(self) -> int:
        """Rows deleted in all. [-]"""
        return sum(self.deleted.values())


def cutoff(now: datetime, keep_days: int) -> datetime:
    """The instant ``keep_days`` days before ``now``: rows strictly before it may go.

    Raises
    ------
    InputError
        ``keep_days`` below :data:`MIN_KEEP_DAYS`, or a naive ``now``.
    """
    check_keep_days(keep_days)
    if now.tzinfo is None:
        raise ValueError(f"naive now {now!r}; give it in UTC")
    return now.astimezone(UTC) - timedelta(days=keep_days)


def check_keep_days(keep_days: int, source: str = "--keep-days") -> None:
    """Refuse a retention shorter than :data:`MIN_KEEP_DAYS` days, saying how to fix it."""
    if keep_days < MIN_KEEP_DAYS:
        raise InputError(
            f"{source} {keep_days} would delete finished work the moment it ends; give at least "
            f"{MIN_KEEP_DAYS} day (e.g. {source} 30), or leave the store unpruned")


def _chunks(items: Sequence[Any], n: int) -> Iterable[Sequence[Any]]:
    for i in range(0, len(items), n):
        yield items[i:i + n]


def _before(value: Any, cut: datetime) -> bool:
    """Whether the ISO time ``value`` (from a stored JSON document) lies before ``cut``.

    A missing or unreadable time is not "before": the row stays.
    """
    if not value:
        return False
    try:
        t = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return False
    if t.tzinfo is None:
        return False
    return t < cut


# --- what each table may lose ---------------------------------------------------------------
def _unit_old(d: Any, cut: datetime) -> ColumnElement[bool]:
    """SQL: dispatch unit ``d`` (the table or an alias) is terminal and ended before ``cut``."""
    return and_(d.state.in_(sorted(TERMINAL_STATES)), d.planned_end < cut,
                or_(d.actual_end.is_(None), d.actual_end < cut))


def _intent_old(cut: datetime) -> ColumnElement[bool]:
    """SQL: a terminal dispatch unit that ended before ``cut``, as every unit of its job did.

    Per job, not per unit: dispatch reads a job's first unit (``J#0``) as the job's claim on
    its id (``dispatched_jobs``, the API's duplicate check, the withdrawal of other plans'
    pieces), so a unit goes only with all of its job's. The deadline is checked apart.
    """
    d = DispatchRow
    other = aliased(DispatchRow)
    return and_(_unit_old(d, cut), not_(exists().where(other.job_id == d.job_id,
                                                       not_(_unit_old(other, cut)))))


def _service_job_old(cut: datetime) -> ColumnElement[bool]:
    j = ServiceJobRow
    return and_(j.state.in_(sorted(TERMINAL_STATES)), j.updated_at < cut)


def _rolling_old(cut: datetime, newest_issue: datetime | None) -> ColumnElement[bool]:
    """SQL: an ended or long-finished committed rolling row (the deadline is checked apart)."""
    r = RollingJobRow
    newest = (r.issued_at < newest_issue) if newest_issue is not None else false()
    return and_(r.updated_at < cut, r.issued_at.is_not(None), newest,
                or_(r.state == str(JobState.FAILED),
                    and_(r.state == str(JobState.DISPATCHED), r.end.is_not(None),
                         r.end < cut)))


class _Pruner:
    def __init__(self, store: Any, now: datetime, keep_days: int, dry_run: bool,
                 batch_rows: int, progress: Callable[[str, int], None] | None) -> None:
        self.store = store
        self.engine = store.engine
        self.now = now.astimezone(UTC)
        self.cut = cutoff(now, keep_days)
        self.dry_run = dry_run
        self.batch = max(1, int(batch_rows))
        self.progress = progress
        self.result = PruneResult(keep_days, self.cut, dry_run, self.engine.dialect.name)
        # plans some remaining row names although the SQL rule would let that row go (its
        # deadline is not past): kept, whatever the mode
        self.kept_refs: set[str] = set()
        # job ids a dry run counted as tombstones (a job may lose rows of several tables)
        self.counted: set[str] = set()

    # --- plumbing ---------------------------------------------------------------------------
    def _tx(self, fn: Callable[[Session], int], doing: str) -> int:
        """Run ``fn`` in one transaction (SQLite's "locked" retried as the store does)."""

        def once() -> int:
            with Session(self.engine) as s, s.begin():
                return fn(s)

        return self.store._retry_locked(once, doing)

    def _add(self, table: str, n: int) -> None:
        if n:
            self.result.deleted[table] += n
            if self.progress is not None:
                self.progress(table, self.result.deleted[table])

    def _simple(self, table: str, pk: Any, where: ColumnElement[bool],
                tomb: Callable[[Session, Sequence[Any]], None] | None = None) -> None:
        """Delete the rows ``where`` holds, by primary key in batches (or count them).

        ``tomb(session, keys)`` writes the tombstones of the rows about to go, in the
        transaction that deletes them (:meth:`_tombstones`).
        """
        if self.dry_run:
            with Session(self.engine) as s:
                self._add(table, int(s.scalar(select(func.count()).select_from(
                    pk.class_).where(where)) or 0))
                if tomb is not None:
                    tomb(s, s.scalars(select(pk).where(where)).all())
            return
        while True:
            def step(s: Session) -> int:
                ids = s.scalars(select(pk).where(where).order_by(pk).limit(self.batch)).all()
                if not ids:
                    return -1
                if tomb is not None:
                    tomb(s, ids)
                return int(s.execute(delete(pk.class_).where(pk.in_(ids), where)).rowcount)

            n = self._tx(step, f"pruning {table}")
            if n < 0:
                return
            self._add(table, n)

    def _with_deadline(self, table: str, pk: Any, blob: Any, ref: Any,
                       where: ColumnElement[bool], deadline_of: Callable[[dict], Any],
                       tomb: Callable[[Session, Sequence[Any]], None] | None = None) -> None:
        """Like :meth:`_simple`, for rows whose JSON ``blob`` names a deadline before the cutoff.

        The plans the other candidates name are kept (:attr:`kept_refs`).
        """
        last: Any = None
        while True:
            q = select(pk, blob, ref).where(where).order_by(pk).limit(self.batch)
            if last is not None:
                q = q.where(pk > last)
            with Session(self.engine) as s:
                rows = s.execute(q).all()
            if not rows:
                return
            last = rows[-1][0]
            go = []
            for key, doc, plan_id in rows:
                try:
                    deadline = deadline_of(json.loads(doc or "{}"))
                except (ValueError, TypeError, AttributeError):
                    deadline = None
                if _before(deadline, self.cut):
                    go.append(key)
                elif plan_id is not None:
                    self.kept_refs.add(plan_id)
            if not go:
                continue
            if self.dry_run:
                self._add(table, len(go))
                if tomb is not None:
                    with Session(self.engine) as s:
                        tomb(s, go)
                continue

            def step(s: Session, go: Sequence[Any] = go) -> int:
                if tomb is not None:
                    tomb(s, go)
                return int(s.execute(delete(pk.class_).where(pk.in_(go), where)).rowcount)

            self._add(table, self._tx(step, f"pruning {table}"))

    # --- tombstones -------------------------------------------------------------------------
    def _tombstones(self, s: Session, rows: dict[str, tuple[str, str]], source: str) -> None:
        """Record each job id of ``rows`` (id -> (state, reason)) final, in ``s``'s transaction.

        In a dry run nothing is written: the ids not yet recorded are counted.
        """
        if not rows:
            return
        if self.dry_run:
            from carbonsched.store.pruned_jobs import pruned_jobs

            have = pruned_jobs(self.engine, rows, session=s)
            fresh = [j for j in rows if j not in have and j not in self.counted]
            self.counted.update(fresh)
            self.result.tombstones += len(fresh)
            return
        self.result.tombstones += write_tombstones(s, [
            {"job_id": jid, "state": st, "reason": why, "source": source,
             "pruned_at": self.now} for jid, (st, why) in rows.items()])

    def _intent_tombs(self, s: Session, ids: Sequence[Any]) -> None:
        """The tombstones of the jobs whose units ``ids`` go: each job's final state.

        Read from every unit of the job that its claim's plan wrote (as
        :func:`carbonsched.dispatch.outbox.dispatched_jobs` reads a job): ``Failed`` when a
        unit failed, else ``Cancelled`` when one was cancelled, else ``Succeeded``.
        """
        jobs = set(s.scalars(select(DispatchRow.job_id).where(DispatchRow.id.in_(list(ids)))))
        units: dict[str, list[DispatchRow]] = {}
        for r in s.scalars(select(DispatchRow).where(DispatchRow.job_id.in_(sorted(jobs)))
                           .order_by(DispatchRow.job_id, DispatchRow.piece)):
            units.setdefault(r.job_id, []).append(r)
        out: dict[str, tuple[str, str]] = {}
        for jid, rs in units.items():
            claim = next((r for r in rs if r.piece == 0), rs[0])
            mine = [r for r in rs if r.plan_id == claim.plan_id] or rs
            pick = next((r for st in (JobState.FAILED, JobState.CANCELLED)
                         for r in mine if r.state == st.value), mine[-1])
            out[jid] = (pick.state, pick.reason)
        self._tombstones(s, out, "dispatch_intents")

    def _outbox_holds(self, s: Session, job_ids: Iterable[str]) -> set[str]:
        """The ids of ``job_ids`` that still have units in ``dispatch_intents`` (in ``s``).

        Those units are the job's claim on its id: dispatch holds the job (live, or final with
        the state its units recorded) until they go, and their own prune writes the job's
        tombstone then (:meth:`_intent_tombs`), with the outbox's final state.
        """
        ids = sorted(set(job_ids))
        held: set[str] = set()
        for batch in _chunks(ids, 500):
            held.update(s.scalars(select(DispatchRow.job_id).distinct()
                                  .where(DispatchRow.job_id.in_(list(batch)))))
        return held

    def _service_tombs(self, s: Session, ids: Sequence[Any]) -> None:
        rows = list(s.scalars(select(ServiceJobRow).where(ServiceJobRow.job_id.in_(list(ids)))))
        held = self._outbox_holds(s, (r.job_id for r in rows))
        self._tombstones(s, {r.job_id: (r.state, r.reason) for r in rows
                             if r.job_id not in held}, "service_jobs")

    def _rolling_tombs(self, s: Session, ids: Sequence[Any]) -> None:
        """The tombstones of the rolling rows ``ids`` whose job dispatch does not hold.

        A committed row (``Dispatched``: the rolling plan committed it) whose job never had
        units in the outbox ends ``Planned``: the plan placed it and nothing dispatched it
        (``Dispatched`` would say it is still on a backend). A job with units still in the
        outbox gets none here (:meth:`_outbox_holds`).
        """
        rows = list(s.scalars(select(RollingJobRow).where(RollingJobRow.job_id.in_(list(ids)))))
        held = self._outbox_holds(s, (r.job_id for r in rows))
        self._tombstones(s, {
            r.job_id: (str(JobState.PLANNED) if r.state == str(JobState.DISPATCHED)
                       else r.state, r.reason)
            for r in rows if r.job_id not in held}, "rolling_jobs")

    # --- the tables -------------------------------------------------------------------------
    def intents(self) -> None:
        self._with_deadline("dispatch_intents", DispatchRow.id, DispatchRow.request_json,
                            DispatchRow.plan_id, _intent_old(self.cut),
                            lambda d: d.get("deadline"), self._intent_tombs)

    def service_jobs(self) -> None:
        self._simple("service_jobs", ServiceJobRow.job_id, _service_job_old(self.cut),
                     self._service_tombs)

    def rolling(self) -> None:
        with Session(self.engine) as s:
            newest = s.scalar(select(func.max(RollingJobRow.issued_at)))
        self.rolling_where = _rolling_old(self.cut, newest)
        self._with_deadline("rolling_jobs", RollingJobRow.job_id, RollingJobRow.spec_json,
                            RollingJobRow.plan_id, self.rolling_where,
                            lambda d: d.get("deadline"), self._rolling_tombs)

    def _plan_free(self) -> ColumnElement[bool]:
        """SQL: no row that stays (by the SQL rules) references the plan."""
        p = PlanRow.plan_id
        return and_(
            not_(exists().where(DispatchRow.plan_id == p, not_(_intent_old(self.cut)))),
            not_(exists().where(RollingJobRow.plan_id == p, not_(self.rolling_where))),
            not_(exists().where(ServiceJobRow.plan_id == p,
                                not_(_service_job_old(self.cut)))),
            not_(exists().where(RunRow.plan_id == p, RunRow.status.in_(RETRYABLE))))

    def plans(self) -> None:
        newest: dict[str, tuple[datetime, str]] = {}
        with Session(self.engine) as s:
            for pid, catalog, created in s.execute(select(
                    PlanRow.plan_id, PlanRow.catalog, PlanRow.created_at)):
                # as ServiceStore.latest_plan_id orders them: newest created_at, then plan id
                best = newest.get(catalog)
                if best is None or (created, pid) > best:
                    newest[catalog] = (created, pid)
            keep = {pid for _c, pid in newest.values()} | self.kept_refs
            pl, inf = PlacementRow, InferenceRow
            where = and_(
                PlanRow.created_at < self.cut, PlanRow.date < self.cut.date().isoformat(),
                not_(exists().where(pl.plan_id == PlanRow.plan_id, pl.end >= self.cut)),
                not_(exists().where(inf.plan_id == PlanRow.plan_id, inf.hour >= self.cut)),
                self._plan_free())
            ids = [pid for pid in s.scalars(select(PlanRow.plan_id).where(where)
                                            .order_by(PlanRow.plan_id)) if pid not in keep]
        self.pruned_plans = set()
        children = (("placements", PlacementRow), ("inference_placements", InferenceRow),
                    ("forecasts", ForecastRow))
        for batch in _chunks(ids, PLAN_BATCH):
            def step(s: Session, batch: Sequence[str] = batch) -> int:
                counts = {name: dict(s.execute(
                    select(row.plan_id, func.count()).where(row.plan_id.in_(batch))
                    .group_by(row.plan_id)).all()) for name, row in children}
                if self.dry_run:
                    gone = list(batch)
                else:
                    # the rule checked again as the rows go (PostgreSQL cascades the children)
                    gone = list(s.scalars(delete(PlanRow).where(
                        PlanRow.plan_id.in_(batch), where).returning(PlanRow.plan_id)))
                    for _name, row in children:   # SQLite enforces no ON DELETE CASCADE
                        s.execute(delete(row).where(row.plan_id.in_(gone)))
                for name, _row in children:
                    self._add(name, sum(counts[name].get(pid, 0) for pid in gone))
                self.pruned_plans.update(gone)
                return len(gone)

            self._add("plans", self._tx(step, "pruning plans"))

    def ledger(self) -> None:
        b = BookingLedgerRow
        with Session(self.engine) as s:
            present = set(s.scalars(select(PlanRow.plan_id)))
            rows = [(pid, site) for pid, site in s.execute(
                select(b.plan_id, b.site).where(b.updated_at < self.cut))
                if pid in self.pruned_plans or pid not in present]
        for batch in _chunks(rows, self.batch):
            if self.dry_run:
                self._add("booking_ledger", len(batch))
                continue

            def step(s: Session, batch: Sequence[tuple[str, str]] = batch) -> int:
                return sum(int(s.execute(delete(b).where(
                    b.plan_id == pid, b.site == site, b.updated_at < self.cut)).rowcount)
                    for pid, site in batch)

            self._add("booking_ledger", self._tx(step, "pruning booking_ledger"))

    def runs(self) -> None:
        floor = min(self.cut, self.now - timedelta(days=RUN_RECORD_FLOOR_DAYS))
        r = RunRow
        self._simple("pipeline_runs", r.run_key, and_(
            r.status.not_in(RETRYABLE), r.issued_at < floor,
            r.finished_at.is_not(None), r.finished_at < self.cut))

    def grid(self) -> None:
        e, a = GridEventRow, GridActionRow
        where = and_(e.ended_at.is_not(None), e.ended_at < self.cut, e.end < self.cut,
                     not_(exists().where(a.event_id == e.event_id, a.state == CLAIMED)))
        with Session(self.engine) as s:
            ids = list(s.scalars(select(e.event_id).where(where).order_by(e.event_id)))
        for batch in _chunks(ids, self.batch):
            def step(s: Session, batch: Sequence[str] = batch) -> int:
                # counted first: PostgreSQL cascades the actions with their event
                counts = dict(s.execute(select(a.event_id, func.count()).where(
                    a.event_id.in_(batch)).group_by(a.event_id)).all())
                if self.dry_run:
                    gone = list(batch)
                else:
                    gone = list(s.scalars(delete(e).where(e.event_id.in_(batch), where)
                                          .returning(e.event_id)))
                    s.execute(delete(a).where(a.event_id.in_(gone)))   # SQLite: no cascade
                self._add("grid_event_actions", sum(counts.get(i, 0) for i in gone))
                return len(gone)

            self._add("grid_events", self._tx(step, "pruning grid_events"))

    def signals(self) -> None:
        self._simple("signal_fetches", SignalFetchRow.id, SignalFetchRow.fetched_at < self.cut)
        pf = PublishedForecastRow
        self._simple("published_forecasts", pf.id,
                     and_(pf.ts < self.cut, pf.published_at < self.cut))

    def tombstones(self) -> None:
        """Expire the tombstones :data:`TOMBSTONE_DAYS` days older than the cutoff."""
        self._simple("pruned_jobs", PrunedJobRow.job_id,
                     PrunedJobRow.pruned_at < self.cut - timedelta(days=TOMBSTONE_DAYS))

    def run(self) -> PruneResult:
        # the order matters: a plan goes only once nothing that stays references it; the
        # outbox first, so that a job's tombstone carries the state its units recorded
        self.tombstones()
        self.intents()
        self.service_jobs()
        self.rolling()
        self.plans()
        self.ledger()
        self.runs()
        self.grid()
        self.signals()
        return self.result


def prune(store: Any, keep_days: int, *, now: datetime | None = None, dry_run: bool = False,
          batch_rows: int = BATCH_ROWS,
          progress: Callable[[str, int], None] | None = None) -> PruneResult:
    """Delete what is older than ``keep_days`` days and finished (module docstring).

    Parameters
    ----------
    store
        A :class:`carbonsched.store.Store` (migrated).
    keep_days
        Days kept, at least :data:`MIN_KEEP_DAYS`.
    now
        The instant the cutoff counts back from (tz-aware); default the wall clock.
    dry_run
        Count what would be deleted, delete nothing.
    batch_rows
        Rows per transaction.
    progress
        Called with (table, rows so far) after each batch.

    Returns
    -------
    PruneResult

    Raises
    ------
    InputError
        ``keep_days`` below :data:`MIN_KEEP_DAYS`.
    sqlalchemy.exc.DBAPIError
        The database failed (the batches committed before stay deleted; a second run goes on).
    """
    now = now or datetime.now(UTC)
    result = _Pruner(store, now, keep_days, dry_run, batch_rows, progress).run()
    log.info("prune (keep %d days, cutoff %s)%s: %s", keep_days, result.cutoff.isoformat(),
             " dry run" if dry_run else "",
             ", ".join(f"{t} {n}" for t, n in result.deleted.items() if n) or "nothing")
    if result.tombstones:
        log.info("prune: %d job id(s) recorded final (pruned_jobs)", result.tombstones)
    return result


@dataclass(frozen=True)
class VacuumResult:
    """A SQLite file's size around ``VACUUM``. [bytes]"""

    before: int
    after: int


def sqlite_file_bytes(store: Any) -> int | None:
    """Bytes of a SQLite store's file and its WAL, or ``None`` (not a file on SQLite)."""
    path = getattr(store, "_sqlite_file", None)
    if path is None or store.engine.dialect.name != "sqlite":
        return None
    total = 0
    for p in (path, path.with_name(path.name + "-wal")):
        try:
            total += p.stat().st_size
        except OSError:
            pass
    return total


def check_vacuum(store: Any) -> None:
    """Refuse ``--vacuum`` on a store that is not a SQLite file (before anything is pruned).

    Raises
    ------
    InputError
        The store is PostgreSQL (or another server), whose autovacuum makes freed space
        reusable, or an in-memory SQLite database; the message says to drop ``--vacuum``.
    """
    if sqlite_file_bytes(store) is not None:
        return
    what = ("an in-memory SQLite database, which has no file to shrink"
            if store.engine.dialect.name == "sqlite" else
            f"{store.engine.dialect.name}, whose autovacuum makes freed space reusable (run "
            "VACUUM FULL there yourself to return it to the disk)")
    raise InputError(f"--vacuum compacts a SQLite file; the store {store._safe_url()} is "
                     f"{what}; drop --vacuum")


def vacuum(store: Any) -> VacuumResult:
    """Rebuild a SQLite store's file without its free pages (``VACUUM``), then truncate the WAL.

    ``VACUUM`` needs the write lock and as much free disk as the file; other processes wait on
    it (their busy timeout) or fail with "database is locked".

    Raises
    ------
    InputError
        The store is not a SQLite file.
    """
    check_vacuum(store)
    before = sqlite_file_bytes(store) or 0

    def run() -> None:
        with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
            _vacuum(c)

    store._retry_locked(run, "compacting the store (VACUUM)")
    return VacuumResult(before, sqlite_file_bytes(store) or 0)


def _vacuum(conn: Connection) -> None:
    conn.execute(text("VACUUM"))
    conn.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))
