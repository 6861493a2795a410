"""Reads that must not grow with history: the outbox's ended rows, the rolling state's old jobs.

Before, the service's status-refresh loop read the whole dispatch outbox back after every pass
(and threw it away), a report of one day read every intent ever written, ``carbonsched cancel
JOB`` read them all to find one job's plan, every rolling run loaded and validated every job the
rolling state ever held, and the placement book's refresher read every API job of the plan every
few seconds to keep the reserved ones. Each test here puts many old, ended rows into a store and
counts the rows the read returns (:class:`RowsRead`: every SELECT is counted again on its own
connection), next to what it returned before (the same answers). SQLite.
"""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest
from sqlalchemy import event, insert, inspect, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from carbonsched.adapters.dispatch.base import BackendJob
from carbonsched.catalog import load_catalog
from carbonsched.dispatch.outbox import dispatch_records, refresh_status
from carbonsched.domain import JobState, ReasonCode
from carbonsched.store import Store
from carbonsched.store.models import DispatchRow

HISTORY = 400
"""Old, ended rows put into each store (a read of all of them is what the tests catch)."""
T0 = datetime(2027, 3, 14, 6, tzinfo=UTC)
SITE = "ca-on-toronto"


class RowsRead:
    """Counts the rows the SELECTs naming ``table`` return, on every engine, while entered.

    Each such statement is run again as ``SELECT count(*) FROM (...)`` with its parameters on
    its own connection, inside its transaction, so the count is what it read then; and SQLite's
    query plan of it is read: ``scans`` lists the statements that scan the whole table (no
    index bounds the read).
    """

    def __init__(self, table: str) -> None:
        self.table, self.rows, self.statements = table, 0, 0
        self.scans: list[str] = []
        self.plans: list[str] = []

    def _count(self, conn: Any, cursor: Any, statement: str, parameters: Any, context: Any,
               executemany: bool) -> None:
        sql = statement.lstrip()
        if executemany or not sql[:6].upper() == "SELECT" or self.table not in sql:
            return
        counter = cursor.connection.cursor()
        try:
            counter.execute(f"SELECT count(*) FROM ({sql}) AS counted", parameters)
            self.rows += counter.fetchone()[0]
            counter.execute(f"EXPLAIN QUERY PLAN {sql}", parameters)
            plan = [str(r[-1]) for r in counter.fetchall()]
            self.plans += plan
            if any(p.startswith(f"SCAN {self.table}") for p in plan):
                self.scans.append(sql)
        finally:
            counter.close()
        self.statements += 1

    def __enter__(self) -> RowsRead:
        event.listen(Engine, "after_cursor_execute", self._count)
        return self

    def __exit__(self, *exc: object) -> None:
        event.remove(Engine, "after_cursor_execute", self._count)


def _intent(key: str, job_id: str, plan_id: str, state: str, start: datetime, hours: float = 2,
            actual: tuple[datetime | None, datetime | None] | None = None,
            backend_id: str | None = "ontario:1", site: str = SITE, piece: int = 0
            ) -> dict[str, Any]:
    end = start + timedelta(hours=hours)
    a_start, a_end = actual if actual is not None else (start, end)
    return dict(key=key, job_id=job_id, piece=piece, plan_id=plan_id, site=site,
                backend="slurm:ontario", state=state, reason="Completed", detail="",
                backend_id=backend_id, request_json=json.dumps({"payload": "x" * 500}),
                planned_start=start, planned_end=end, attempts=1, created_at=start,
                updated_at=start, submitted_at=start, actual_start=a_start, actual_end=a_end,
                times_source="sacct", duplicates="")


def _history(store: Store, n: int = HISTORY, start: datetime = T0 - timedelta(days=200),
             site: str = SITE) -> None:
    """``n`` intents of other jobs, dispatched, run and ended long before ``T0``."""
    with store.engine.begin() as c:
        c.execute(insert(DispatchRow), [
            _intent(f"old-{i}#0", f"old-{i}", f"plan-old-{i // 50}", "Succeeded",
                    start + timedelta(hours=3 * i), site=site, backend_id=f"ontario:{i}")
            for i in range(n)])


@pytest.fixture
def store(tmp_path) -> Store:
    return Store(f"sqlite:///{tmp_path / 'o.sqlite'}")


# --- the status-refresh loop ------------------------------------------------------------------
class _Backend:
    """Reports every key it is asked about as having ended (its name says Slurm)."""

    name = "slurm:ontario"

    def __init__(self) -> None:
        self.asked: list[str] = []

    def status(self, keys=None):
        self.asked += list(keys or [])
        return {k: BackendJob(key=k, backend_id="ontario:7", state=JobState.SUCCEEDED,
                              reason=ReasonCode.COMPLETED, raw_state="COMPLETED",
                              actual_start=T0, actual_end=T0 + timedelta(hours=1))
                for k in keys or []}


def _loops(store: Store, backend: _Backend) -> Any:
    from carbonsched.clock import ManualClock
    from carbonsched.config import Settings
    from carbonsched.service.loops import ServiceLoops
    from carbonsched.service.metrics import ServiceMetrics
    from carbonsched.store.service import ServiceStore

    return ServiceLoops(Settings(dispatch_loops=True), ServiceStore(store),
                        load_catalog("global"), ManualClock(T0 + timedelta(hours=2)),
                        ServiceMetrics(), SimpleNamespace(held=True),
                        build_adapter=lambda site: backend)


def test_the_refresh_loop_reads_the_rows_not_over_not_the_outbox(store):
    _history(store)
    with store.engine.begin() as c:
        c.execute(insert(DispatchRow), [
            _intent(f"live-{i}#0", f"live-{i}", "plan-now", "Running", T0,
                    actual=(T0, None), backend_id=f"ontario:{900 + i}") for i in range(3)])
    backend = _Backend()
    loops = _loops(store, backend)
    with RowsRead("dispatch_intents") as read:
        assert loops.run_loop("refresh") == "ok"
    # the pass recorded what the backend said about the three live rows ...
    assert sorted(backend.asked) == ["live-0#0", "live-1#0", "live-2#0"]
    recs = dispatch_records(store, job_ids=["live-0", "live-1", "live-2"])
    assert set(recs["state"]) == {"Succeeded"} and recs["actual_end"].notna().all()
    # ... and read them (and the backlog's count), never the outbox's ended history
    assert read.rows <= 3 + 1, read.rows
    assert read.scans == [], read.scans
    # `carbonsched status` still shows the whole outbox after its refresh
    assert len(refresh_status(store, "global", adapters={SITE: backend})) == HISTORY + 3


# --- carbonsched cancel JOB -------------------------------------------------------------------
def test_cancel_without_a_catalog_reads_only_the_jobs_rows(store, monkeypatch):
    from typer.testing import CliRunner

    import carbonsched.dispatch.outbox as outbox
    from carbonsched.cli.app import app
    from carbonsched.config import get_settings
    from tests.report.builders import plan_doc

    doc = plan_doc("2027-03-14", "global", [("j", "t", SITE, "2027-03-14T06:00:00Z",
                                             "2027-03-14T07:00:00Z", 1, 0.5)])
    store.save_plan(doc)
    _history(store)
    with store.engine.begin() as c:
        c.execute(insert(DispatchRow), [
            {**_intent("j#0", "j", doc["plan_id"], "Pending", T0, backend_id=None,
                       actual=(None, None)), "reason": "AwaitingSubmit"}])
    catalogs: list[Any] = []
    cancel_job = outbox.cancel_job

    def cancel(store, catalog, *a, **k):
        catalogs.append(catalog)
        return cancel_job(store, catalog, *a, **k, adapters={})

    monkeypatch.setattr(outbox, "cancel_job", cancel)
    monkeypatch.setenv("CARBONSCHED_DATABASE_URL", str(store.engine.url))
    get_settings.cache_clear()
    try:
        with RowsRead("dispatch_intents") as read:
            r = CliRunner().invoke(app, ["cancel", "j"])
    finally:
        get_settings.cache_clear()
    assert r.exit_code == 0, r.output
    assert r.stdout.strip() == f"cancelled j#0 at {SITE} (slurm:ontario)"
    assert catalogs == ["global"]                 # the catalog its plan names
    assert read.rows <= 10, read.rows             # j's row: looked up, claimed, cancelled
    assert read.scans == [], read.scans
    with Session(store.engine) as s:
        assert s.scalar(select(DispatchRow.state).where(DispatchRow.key == "j#0")) == \
            "Cancelled"


def test_dispatch_records_filters_in_sql(store):
    _history(store, n=30)
    everything = dispatch_records(store)
    assert len(everything) == 30 and "request_json" not in everything
    some = [f"old-{i}" for i in (3, 17, 4)]
    with RowsRead("dispatch_intents") as read:
        mine = dispatch_records(store, job_ids=some)
    assert read.rows == 3
    assert read.scans == [], read.scans
    pd.testing.assert_frame_equal(
        mine, everything[everything["job_id"].isin(some)].reset_index(drop=True))
    many = [f"old-{i}" for i in range(0, 30, 2)] + [f"absent-{i}" for i in range(600)]
    pd.testing.assert_frame_equal(      # more ids than one IN list: the same rows, same order
        dispatch_records(store, job_ids=many),
        everything[everything["job_id"].isin(many)].reset_index(drop=True))
    assert dispatch_records(store, job_ids=[]).empty


# --- the report's outbox ----------------------------------------------------------------------
def _edge_runs(store: Store, t0: datetime, t1: datetime) -> None:
    """Runs on either side of every edge of ``[t0, t1)``, with and without an end on record."""
    h = timedelta(hours=1)
    rows = [
        ("ends-at-t0", "Succeeded", t0 - 3 * h, (t0 - 3 * h, t0)),
        ("ends-after-t0", "Succeeded", t0 - 3 * h, (t0 - 3 * h, t0 + h)),
        ("starts-at-t1", "Succeeded", t1, (t1, t1 + h)),
        ("starts-before-t1", "Running", t1 - h, (t1 - h, None)),
        ("running-long", "Running", t0 - 90 * h, (t0 - 90 * h, None)),
        ("paused-long", "Paused", t0 - 90 * h, (t0 - 90 * h, None)),
        ("cancelled-no-end-in", "Cancelled", t0 - h, (t0 - h, None)),
        ("cancelled-no-end-before", "Cancelled", t0 - 5 * h, (t0 - 5 * h, None)),
        ("lost-started-late", "Failed", t0 - 9 * h, (t0 + h, None)),
        ("never-started", "Dispatched", t0 + h, (None, None)),
        ("inside", "Succeeded", t0 + 2 * h, (t0 + 2 * h, t0 + 4 * h)),
    ]
    with store.engine.begin() as c:
        c.execute(insert(DispatchRow), [
            _intent(f"{job}#0", job, "plan-edge", state, start, actual=actual)
            for job, state, start, actual in rows])


def test_the_reports_actual_runs_read_the_period_not_the_outbox(store):
    from carbonsched.report.inputs import actual_runs

    t0, t1 = T0, T0 + timedelta(days=1)
    _history(store)
    _edge_runs(store, t0, t1)
    before = actual_runs(store, pd.Timestamp(t0), pd.Timestamp(t1),
                         dispatch_records(store))         # the whole outbox, as before
    with RowsRead("dispatch_intents") as read:
        now = actual_runs(store, pd.Timestamp(t0), pd.Timestamp(t1))
    pd.testing.assert_frame_equal(now.reset_index(drop=True), before.reset_index(drop=True))
    assert sorted(now["job_id"]) == sorted([
        "ends-after-t0", "starts-before-t1", "running-long", "paused-long",
        "cancelled-no-end-in", "lost-started-late", "inside"])
    # the period's runs and the few candidates at its edges; none of the ended history
    assert read.rows <= 11, read.rows
    assert read.scans == [], read.scans


def test_a_days_report_reads_its_jobs_and_runs_not_the_outbox(tmp_path, shared_data,
                                                              fixtures_dir):
    from carbonsched.report import build_report
    from tests.report.test_report_scope2 import _store_with_outbox_row, _two_day_docs

    d1, _ = _two_day_docs()
    store = _store_with_outbox_row(tmp_path, [d1], d1["plan_id"], "Succeeded",
                                   ("2023-07-03T12:00Z", "2023-07-03T14:00Z"),
                                   ("2023-07-03T12:30Z", "2023-07-03T14:30Z"), "sacct")
    day = datetime(2023, 7, 3, tzinfo=UTC)
    with store.engine.begin() as c:      # a run of a job no plan of the day places
        c.execute(insert(DispatchRow), [_intent("X#0", "X", "plan-x", "Succeeded",
                                                day + timedelta(hours=5), site="de-site")])
    fleet = fixtures_dir / "report" / "two_markets.toml"
    first = build_report(store, fleet, shared_data, "2023-07-03", "2023-07-03")
    _history(store, start=day - timedelta(days=200), site="de-site")
    with RowsRead("dispatch_intents") as read:
        again = build_report(store, fleet, shared_data, "2023-07-03", "2023-07-03")
    assert again.totals.keys() == first.totals.keys()
    for k, v in first.totals.items():
        assert again.totals[k] == v or (pd.isna(v) and pd.isna(again.totals[k])), k
    assert again.metadata["notes"] == first.metadata["notes"]
    assert "1 actual run(s) for jobs not in the period's plans ignored: X" in " | ".join(
        again.metadata["notes"])
    pd.testing.assert_frame_equal(again.frames["jobs"], first.frames["jobs"])
    assert read.rows <= 4, read.rows      # J1's row (twice: its job, its run) and X's run
    assert read.scans == [], read.scans


# --- the placement book's refresher -----------------------------------------------------------
def test_the_book_refresher_reads_only_the_reserved_jobs(store, monkeypatch):
    from carbonsched.api.state import ServiceState

    calls: list[dict[str, Any]] = []
    taken: list[list[dict[str, Any]]] = []
    jobs = [{"job_id": f"a{i}", "reserved": i % 10 == 0} for i in range(50)]

    def db_jobs(**kw):
        calls.append(kw)
        return [j for j in jobs if kw.get("reserved") is None
                or j["reserved"] is kw["reserved"]]

    book = SimpleNamespace(plan_id="p1", set_reservations=taken.append)
    state = SimpleNamespace(
        _book_lock=threading.Lock(), catalog=SimpleNamespace(name="global"),
        db=SimpleNamespace(latest_plan_id=lambda name: "p1", jobs=db_jobs), book=book,
        book_error="", metrics=SimpleNamespace(plan_refresh_failing=SimpleNamespace(
            set=lambda v: None)), settings=SimpleNamespace(book_refresh_s=2.0))
    assert ServiceState.refresh_book(state) is book
    assert calls == [{"plan_id": "p1", "reserved": True}]
    assert [j["job_id"] for j in taken[0]] == ["a0", "a10", "a20", "a30", "a40"]


# --- the rolling state --------------------------------------------------------------------------
def _rolling_history(store: Store, n: int) -> None:
    """A job ``clash`` committed long ago, and ``n`` old jobs committed or ended before then."""
    from carbonsched.store.rolling_models import RollingJobRow

    t = datetime(2023, 6, 1, tzinfo=UTC)

    def row(jid: str, state: str, gpus: int, i: int) -> dict[str, Any]:
        start = t + timedelta(hours=i)
        spec = {"id": jid, "gpu_type": "A100", "gpus": gpus, "duration_hours": 1,
                "power_per_gpu_kw": 0.8125, "earliest_start": start.isoformat(),
                "deadline": (start + timedelta(days=1)).isoformat()}
        placed = state == "Dispatched"
        return dict(job_id=jid, spec_json=json.dumps(spec), state=state,
                    reason="Placed" if placed else "DeadlinePassed", detail="",
                    site="de-fra" if placed else None, gpu_type="A100", gpus=gpus,
                    start=start if placed else None,
                    end=start + timedelta(hours=1) if placed else None, energy_kwh=None,
                    emissions_kg=None, pieces_json=None, plan_id="plan-old",
                    issued_at=t + timedelta(days=1), updated_at=start)

    with store.engine.begin() as c:
        c.execute(insert(RollingJobRow), [row("clash", "Dispatched", 2, 0)] + [
            row(f"old-{i}", "Dispatched" if i % 2 else "Failed", 1, i) for i in range(n)])


def _two_rolling_runs(tmp_path, shared_data, n: int) -> dict[str, Any]:
    """The service's first two rolling runs over ``n`` old jobs of the state (SQLite)."""
    from datetime import time

    from carbonsched.clock import ManualClock
    from carbonsched.config import Settings
    from carbonsched.dispatch.outbox import dispatch_plan
    from carbonsched.service.cron import DailyCron
    from carbonsched.service.runs import planning_pipeline
    from carbonsched.store.rolling_state import RollingStore
    from carbonsched.store.service import ServiceStore
    from tests.service.test_rolling_service import settings

    tmp_path.mkdir()
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    s = settings(tmp_path, shared_data, url)
    work = json.loads(open(s.workload_file).read())
    work["jobs"].append({"id": "clash", "gpu_type": "A100", "gpus": 1, "duration_hours": 1,
                         "power_per_gpu_kw": 0.8125, "earliest_start": "2023-07-10T00:00:00Z",
                         "deadline": "2023-07-12T00:00:00Z"})
    open(s.workload_file, "w").write(json.dumps(work))
    db = ServiceStore(Store(url))
    _rolling_history(db.store, n)
    clock = ManualClock(datetime(2023, 7, 9, 23, 0, tzinfo=UTC))

    def dry_dispatch(store, plan_id, catalog, *, clock, commit_before):
        return dispatch_plan(store, plan_id, catalog, dry_run=True, clock=clock,
                             commit_before=commit_before, placeholder=True,
                             settings=Settings(slurm_conf_dir=None, kubeconfig=None)).to_dict()

    cron = DailyCron(db, planning_pipeline(s, db, clock, dry_dispatch), clock, "UTC",
                     time(0, 0), offset_days=1)
    out: dict[str, Any] = {"reads": [], "plans": [], "scans": []}
    for day in (9, 10):
        clock.set(datetime(2023, 7, day, 23, 0, tzinfo=UTC))
        with RowsRead("rolling_jobs") as read:
            rec = cron.tick()
        out["reads"].append(read.rows)
        out["scans"] += read.scans
        plan = db.store.get_plan(rec["plan_id"])
        out["plans"].append((plan["rolling"], [n for n in plan["notes"] if "id" in n]))
    out["state"] = {r["job_id"]: {k: v for k, v in r.items() if k != "plan_id"}
                    for r in RollingStore(db.store).rows() if not r["job_id"].startswith("old-")}
    return out


def test_a_rolling_run_reads_its_work_not_the_states_history(tmp_path, shared_data):
    alone = _two_rolling_runs(tmp_path / "alone", shared_data, 0)
    old = _two_rolling_runs(tmp_path / "old", shared_data, HISTORY)
    # the same runs: what they committed, deferred and ended, and the id clash said
    assert old["plans"] == alone["plans"]
    assert old["state"] == alone["state"]
    r1, r2 = (p[0] for p in old["plans"])
    assert "morning" in r1["committed"] and "evening" in r2["committed"]
    assert "clash" not in r1["committed"] + [d["job_id"] for d in r1["deferred"]]
    assert any("share an id with a different job the rolling state already holds" in n
               and "clash" in n for n in old["plans"][0][1])
    assert old["state"]["clash"]["state"] == "Dispatched"    # the held job keeps its id
    # each run read the same rows as with no history: its pending and running work, its
    # new jobs' ids; none of the old jobs
    assert old["reads"] == alone["reads"], (old["reads"], alone["reads"])
    assert max(old["reads"]) < HISTORY / 4
    assert old["scans"] == [], old["scans"]


def test_the_rolling_load_for_a_run_and_whole(store):
    from carbonsched.store.rolling_state import RollingStore

    _rolling_history(store, 40)
    rs = RollingStore(store)
    whole = rs.load()
    assert len(whole.committed) == 21 and len(whole.ended) == 20
    t = pd.Timestamp("2023-06-01T10:30Z")    # old-9 (09:00-10:00) is over, old-11 is not
    with RowsRead("rolling_jobs") as read:
        run = rs.load(t, job_ids=["clash", "new-1"])
    assert sorted(run.committed) == ["clash"] + [f"old-{i}" for i in range(11, 40, 2)]
    assert run.ended == {} and run.jobs["clash"] == whole.jobs["clash"]
    assert run.last_issued_at == whole.last_issued_at == pd.Timestamp("2023-06-02T00:00Z")
    assert read.rows == 15 + 1 + 1      # running, the clash's row, the latest issue time
    assert read.scans == [], read.scans
    # through the indexes of migration 0026 (the committed rows still running, the latest run)
    plans = " | ".join(read.plans)
    assert "ix_rolling_jobs_state_end (state=? AND end>?)" in plans, plans
    assert "ix_rolling_jobs_issued_at" in plans, plans
    assert rs.held_jobs(["clash", "old-3", "nope"]) == {
        "clash": whole.jobs["clash"], "old-3": whole.jobs["old-3"]}


# --- the migration ------------------------------------------------------------------------------
INDEXES = {"ix_dispatch_intents_actual_end", "ix_rolling_jobs_state_end",
           "ix_rolling_jobs_issued_at"}


@pytest.fixture(params=["sqlite", "postgresql"])
def any_store(request, tmp_path) -> Store:
    if request.param == "sqlite":
        return Store(f"sqlite:///{tmp_path / 'm.sqlite'}")
    return Store(request.getfixturevalue("pg_db"))


def test_the_migration_adds_and_drops_the_indexes(any_store):
    from tests.store.test_published_forecasts import _migrate

    def indexes() -> set[str]:
        # a new connection: a pooled SQLite one may hold the reflection of before the
        # migration engine (store/__init__.py migrate) changed the schema
        any_store.engine.dispose()
        insp = inspect(any_store.engine)
        return {i["name"] for t in ("dispatch_intents", "rolling_jobs")
                for i in insp.get_indexes(t)}

    assert INDEXES <= indexes()            # the store migrates to head when opened
    _history(any_store, n=5)
    _rolling_history(any_store, 4)
    _migrate(any_store, "0025_published_forecasts", down=True)
    assert not INDEXES & indexes()
    _migrate(any_store, "head")
    assert INDEXES <= indexes()
    assert len(dispatch_records(any_store, ran_in=(T0 - timedelta(days=200), T0))) == 5


# --- the grid events' marks the refresh reads --------------------------------------------------
class _SuspendedBackend(_Backend):
    """Reports every key as Slurm reports a suspended job (running, raw state SUSPENDED)."""

    def status(self, keys=None):
        self.asked += list(keys or [])
        return {k: BackendJob(key=k, backend_id="ontario:7", state=JobState.RUNNING,
                              reason=ReasonCode.STARTED, raw_state="SUSPENDED",
                              actual_start=T0, actual_end=None) for k in keys or []}


def test_the_refresh_reads_the_grid_marks_of_the_live_rows_not_every_action(store):
    """Before, every refresh pass read every done grid-event action ever taken (one per unit a
    pause, resume, hold or release touched) to label the few live rows; now only the live
    rows' keys, by the key's index. The live paused row is still labelled from its mark."""
    from carbonsched.store.grid_models import GridActionRow, GridEventRow

    _history(store)
    old = T0 - timedelta(days=100)
    with store.engine.begin() as c:
        c.execute(insert(GridEventRow), [dict(event_id="ev-old", site=SITE, start=old,
                                              end=old + timedelta(hours=1), created_at=old),
                                         dict(event_id="ev-now", site=SITE, start=T0,
                                              end=T0 + timedelta(hours=4), created_at=T0)])
        c.execute(insert(GridActionRow), [
            dict(event_id="ev-old", key=f"old-{i}#0", action=action, site=SITE, state="done",
                 created_at=old, updated_at=old, done_at=old)
            for i in range(HISTORY) for action in ("pause", "resume")] + [
            dict(event_id="ev-now", key="live-0#0", action="pause", site=SITE, state="done",
                 created_at=T0, updated_at=T0, done_at=T0 + timedelta(minutes=5))])
        c.execute(insert(DispatchRow), [
            _intent(f"live-{i}#0", f"live-{i}", "plan-now", "Running", T0,
                    actual=(T0, None), backend_id=f"ontario:{900 + i}") for i in range(3)])
    backend = _SuspendedBackend()
    with RowsRead("grid_event_actions") as read:
        refresh_status(store, "global", adapters={SITE: backend}, plan_id="plan-now")
    assert read.rows == 1, read.rows     # the live paused row's one done action
    assert read.scans == [], read.scans
    recs = dispatch_records(store, job_ids=["live-0", "live-1"]).set_index("job_id")
    assert recs.loc["live-0", "state"] == "Paused"
    assert recs.loc["live-0", "reason"] == "GridEventPaused"
    assert "paused by grid event ev-now at " in recs.loc["live-0", "detail"]
    assert recs.loc["live-1", "state"] == "Running"
