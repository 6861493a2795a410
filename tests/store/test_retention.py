"""Retention: ``prune`` deletes exactly the old finished rows and keeps every live one.

On SQLite and on the real PostgreSQL that scripts/test starts (``pg_db``). The store holds old
and live rows of every kind; after a prune the old finished ones are gone, each kept one is
named with why it stays, a dry run deletes nothing and counts the same, a row exactly N days
old stays, and N below 1 is refused.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from carbonsched.errors import InputError
from carbonsched.store import Store
from carbonsched.store.grid_models import GridActionRow, GridEventRow
from carbonsched.store.models import (
    DispatchRow,
    ForecastRow,
    InferenceRow,
    PlacementRow,
    PlanRow,
)
from carbonsched.store.pruned_jobs import TOMBSTONE_DAYS, PrunedJobRow
from carbonsched.store.retention import RUN_RECORD_FLOOR_DAYS, TABLES, prune
from carbonsched.store.rolling_models import RollingJobRow
from carbonsched.store.service_models import BookingLedgerRow, RunRow, ServiceJobRow
from carbonsched.store.signal_models import PublishedForecastRow, SignalFetchRow

NOW = datetime(2024, 6, 30, 12, 0, tzinfo=UTC)
KEEP = 30
CUT = NOW - timedelta(days=KEEP)
OLD = NOW - timedelta(days=60)
RECENT = NOW - timedelta(days=1)
FUTURE = NOW + timedelta(days=5)


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path) -> Store:
    if request.param == "sqlite":
        return Store(f"sqlite:///{tmp_path}/store.db")
    return Store(request.getfixturevalue("pg_db"))


def _plan(s: Session, pid: str, created: datetime, catalog: str = "cat-a",
          children: bool = True) -> None:
    s.add(PlanRow(plan_id=pid, date=created.date().isoformat(), catalog=catalog,
                  created_at=created, signal_quality="ok", solver_name="highs",
                  solver_status="optimal", mip_gap=0.0, solve_seconds=1.0, energy_kwh=1.0,
                  emissions_kg=1.0, baseline_emissions_kg=2.0, plan_json="{}"))
    s.flush()
    if not children:
        return
    end = created + timedelta(days=1)
    for i in range(2):
        s.add(PlacementRow(plan_id=pid, job_id=f"{pid}-j{i}", state="Planned", reason="Placed",
                           site="site-a", start=created, end=end, gpu_type="A100", gpus=1,
                           energy_kwh=1.0, emissions_kg=1.0))
    s.add(InferenceRow(plan_id=pid, area="area-a", hour=created, site="site-a",
                       gpu_type="A100", gpus=1, energy_kwh=1.0, emissions_kg=1.0))
    for h in range(3):
        s.add(ForecastRow(plan_id=pid, site="site-a", signal="carbon", model="m",
                          issued_at=created, ts=created + timedelta(hours=h), mean=1.0,
                          lo_80=0.5, hi_80=1.5, lo_95=0.2, hi_95=1.8))


def _intent(s: Session, key: str, plan_id: str, state: str, end: datetime,
            actual_end: datetime | None = None, deadline: datetime | None = None) -> None:
    deadline = deadline or end
    s.add(DispatchRow(
        key=f"{key}#0", job_id=key, piece=0, plan_id=plan_id, site="site-a", backend="slurm",
        state=state, reason="x", detail="", request_json=json.dumps(
            {"deadline": deadline.isoformat()}),
        planned_start=end - timedelta(hours=1), planned_end=end, attempts=1,
        created_at=end - timedelta(hours=2), updated_at=actual_end or end,
        actual_end=actual_end))


def _api_job(s: Session, jid: str, state: str, updated: datetime,
             plan_id: str | None = None) -> None:
    s.add(ServiceJobRow(job_id=jid, tenant="t", spec_json="{}", state=state, reason="x",
                        plan_id=plan_id, submitted_at=updated, updated_at=updated))


def _rolling(s: Session, jid: str, state: str, updated: datetime, end: datetime | None,
             deadline: datetime, plan_id: str | None = None) -> None:
    s.add(RollingJobRow(job_id=jid, spec_json=json.dumps({"deadline": deadline.isoformat()}),
                        state=state, gpu_type="A100", gpus=1, start=end, end=end,
                        plan_id=plan_id, issued_at=updated, updated_at=updated))


def _run(s: Session, issued: datetime, status: str) -> None:
    s.add(RunRow(run_key=issued.strftime("%Y-%m-%dT%H:%MZ"),
                 planning_date=issued.date().isoformat(), local_day=issued.date().isoformat(),
                 issued_at=issued, trigger="cron", replica="r", status=status,
                 started_at=issued, finished_at=None if status == "running" else issued))


def _event(s: Session, eid: str, end: datetime, ended: datetime | None,
           actions: tuple[str, ...] = ("done", "done")) -> None:
    s.add(GridEventRow(event_id=eid, site="site-a", start=end - timedelta(hours=1), end=end,
                       created_at=end, ended_at=ended))
    s.flush()
    for i, st in enumerate(actions):
        s.add(GridActionRow(event_id=eid, key=f"k{i}#0", action="pause", site="site-a",
                            state=st, created_at=end, updated_at=end))


def _fetch(s: Session, at: datetime) -> None:
    s.add(SignalFetchRow(provider="p", zone="z", signal="carbon", start=at, end=at,
                         fetched_at=at, status="ok"))


def _published(s: Session, published: datetime, ts: datetime) -> None:
    s.add(PublishedForecastRow(provider="p", zone="z", feature="carbon", published_at=published,
                               ts=ts, value=1.0, fetched_at=published))


def fill(store: Store) -> None:
    """Old finished rows of every kind, and the live or recent rows that must stay."""
    with Session(store.engine) as s, s.begin():
        _plan(s, "p-old-free", OLD)                       # goes, with 2+1+3 children
        _plan(s, "p-old-pending", OLD)                    # a Pending intent names it
        _plan(s, "p-old-rolling", OLD)                    # a pending rolling job names it
        _plan(s, "p-old-api", OLD)                        # a Planned API job names it
        _plan(s, "p-old-deadline", OLD)                   # a kept (deadline) intent names it
        _plan(s, "p-new", RECENT)                         # newest of cat-a
        _plan(s, "p-b-only", OLD, catalog="cat-b")        # newest (only) plan of cat-b
        # the outbox
        _intent(s, "i-succeeded", "p-old-free", "Succeeded", OLD, actual_end=OLD)  # goes
        _intent(s, "i-failed", "p-old-free", "Failed", OLD)                        # goes
        _intent(s, "i-cancel-dl", "p-old-deadline", "Cancelled", OLD, deadline=FUTURE)
        _intent(s, "i-pending", "p-old-pending", "Pending", OLD)
        _intent(s, "i-dispatched", "p-old-free-x", "Dispatched", OLD)
        _intent(s, "i-running", "p-old-free-x", "Running", OLD)
        _intent(s, "i-paused", "p-old-free-x", "Paused", OLD)
        _intent(s, "i-recent", "p-new", "Succeeded", RECENT)
        _intent(s, "i-late-end", "p-new", "Succeeded", OLD, actual_end=RECENT)
        _intent(s, "i-at-cut", "p-new", "Succeeded", CUT)         # exactly N days: stays
        # API jobs
        _api_job(s, "a-old-done", "Succeeded", OLD)                # goes
        _api_job(s, "a-recent-failed", "Failed", RECENT)
        _api_job(s, "a-old-planned", "Planned", OLD, plan_id="p-old-api")
        # rolling state
        _rolling(s, "r-old-failed", "Failed", OLD, None, OLD)              # goes
        _rolling(s, "r-old-done", "Dispatched", OLD, OLD, OLD)             # goes
        _rolling(s, "r-old-pending", "Pending", OLD, None, FUTURE, plan_id="p-old-rolling")
        _rolling(s, "r-dl-future", "Failed", OLD, None, FUTURE)
        _rolling(s, "r-committed", "Dispatched", OLD, RECENT, FUTURE)
        _rolling(s, "r-newest", "Failed", RECENT, None, OLD)
        # booking ledger
        s.add(BookingLedgerRow(plan_id="p-old-free", site="site-a", bookings=1, updated_at=OLD))
        s.add(BookingLedgerRow(plan_id="p-new", site="site-a", bookings=1, updated_at=OLD))
        # run records
        _run(s, OLD, "succeeded")                                    # goes
        _run(s, OLD + timedelta(hours=1), "running")
        _run(s, OLD + timedelta(hours=2), "interrupted")
        _run(s, RECENT, "succeeded")
        # grid events
        _event(s, "e-ended", OLD, OLD)                               # goes, with 2 actions
        _event(s, "e-open", OLD, None)
        _event(s, "e-claimed", OLD, OLD, actions=("claimed",))
        _event(s, "e-recent", RECENT, RECENT)
        # signal fetches and published forecasts
        _fetch(s, OLD)                                               # goes
        _fetch(s, CUT - timedelta(seconds=1))                        # goes
        _fetch(s, CUT)                                               # exactly N days: stays
        _published(s, OLD, OLD + timedelta(hours=1))                 # goes
        _published(s, OLD, NOW + timedelta(hours=1))                 # an hour still ahead


EXPECTED = {
    "dispatch_intents": {"i-succeeded#0", "i-failed#0"},
    "service_jobs": {"a-old-done"},
    "rolling_jobs": {"r-old-failed", "r-old-done"},
    "plans": {"p-old-free"},
    "placements": {"p-old-free-j0", "p-old-free-j1"},
    "inference_placements": {"p-old-free"},
    "forecasts": {("p-old-free", 0), ("p-old-free", 1), ("p-old-free", 2)},
    "booking_ledger": {("p-old-free", "site-a")},
    "pipeline_runs": {OLD.strftime("%Y-%m-%dT%H:%MZ")},
    "grid_events": {"e-ended"},
    "grid_event_actions": {("e-ended", "k0#0"), ("e-ended", "k1#0")},
    "signal_fetches": {OLD, CUT - timedelta(seconds=1)},
    "published_forecasts": {OLD + timedelta(hours=1)},
    "pruned_jobs": set(),
}
"""What a prune at NOW keeping 30 days deletes, per table (each row by what names it)."""


def snapshot(store: Store) -> dict[str, set]:
    """Every row of every pruned table, by what names it (as :data:`EXPECTED`)."""
    with Session(store.engine) as s:
        def col(*cols):
            return set(s.execute(select(*cols)).all()) if len(cols) > 1 else set(
                s.scalars(select(*cols)))

        fc = {(p, int((t - i).total_seconds() // 3600)) for p, t, i in
              s.execute(select(ForecastRow.plan_id, ForecastRow.ts, ForecastRow.issued_at))}
        return {
            "dispatch_intents": col(DispatchRow.key),
            "service_jobs": col(ServiceJobRow.job_id),
            "rolling_jobs": col(RollingJobRow.job_id),
            "plans": col(PlanRow.plan_id),
            "placements": col(PlacementRow.job_id),
            "inference_placements": col(InferenceRow.plan_id),
            "forecasts": fc,
            "booking_ledger": col(BookingLedgerRow.plan_id, BookingLedgerRow.site),
            "pipeline_runs": col(RunRow.run_key),
            "grid_events": col(GridEventRow.event_id),
            "grid_event_actions": col(GridActionRow.event_id, GridActionRow.key),
            "signal_fetches": col(SignalFetchRow.fetched_at),
            "published_forecasts": col(PublishedForecastRow.ts),
            "pruned_jobs": col(PrunedJobRow.job_id),
        }


def test_prune_deletes_exactly_the_old_finished_rows(store):
    fill(store)
    before = snapshot(store)
    assert set(before) == set(TABLES)
    for table, gone in EXPECTED.items():
        assert gone <= before[table], table

    dry = prune(store, KEEP, now=NOW, dry_run=True)
    assert snapshot(store) == before                       # a dry run deletes nothing
    assert dry.dry_run and dry.cutoff == CUT
    assert dry.deleted == {t: len(EXPECTED[t]) for t in TABLES}

    real = prune(store, KEEP, now=NOW, batch_rows=1)       # one row per transaction
    assert real.deleted == dry.deleted                      # the dry run counted the same
    after = snapshot(store)
    for table in TABLES:
        if table != "pruned_jobs":
            assert after[table] == before[table] - EXPECTED[table], table
    # every job id whose rows went stays final (a tombstone each), as the dry run counted
    assert after["pruned_jobs"] == {"i-succeeded", "i-failed", "a-old-done", "r-old-failed",
                                    "r-old-done"}
    assert real.tombstones == dry.tombstones == 5
    # the live rows, each named: exactly-once holds, live work keeps its plan
    assert {"i-pending#0", "i-dispatched#0", "i-running#0", "i-paused#0"} <= after[
        "dispatch_intents"]
    assert {"p-old-pending", "p-old-rolling", "p-old-api", "p-old-deadline", "p-new",
            "p-b-only"} <= after["plans"]
    assert "i-at-cut#0" in after["dispatch_intents"]       # exactly N days old: stays
    assert CUT in after["signal_fetches"]

    again = prune(store, KEEP, now=NOW)                     # nothing left to delete
    assert again.total == 0


def test_newest_plan_of_a_catalog_stays_even_when_old(store):
    with Session(store.engine) as s, s.begin():
        _plan(s, "p-1", OLD - timedelta(days=1))
        _plan(s, "p-2", OLD)
    r = prune(store, KEEP, now=NOW)
    assert r.deleted["plans"] == 1
    assert snapshot(store)["plans"] == {"p-2"}


def test_run_records_of_the_last_days_stay_whatever_n_is(store):
    with Session(store.engine) as s, s.begin():
        _run(s, NOW - timedelta(days=RUN_RECORD_FLOOR_DAYS) + timedelta(hours=1), "succeeded")
        _run(s, NOW - timedelta(days=RUN_RECORD_FLOOR_DAYS + 1), "succeeded")
    r = prune(store, 1, now=NOW)
    assert r.deleted["pipeline_runs"] == 1
    assert len(snapshot(store)["pipeline_runs"]) == 1


@pytest.mark.parametrize("days", [0, -3])
def test_keep_days_below_one_is_refused(store, days):
    fill(store)
    before = snapshot(store)
    with pytest.raises(InputError, match="at least 1 day"):
        prune(store, days, now=NOW)
    assert snapshot(store) == before


# --- the command ----------------------------------------------------------------------------
def _cli(*args: str):
    from carbonsched.cli.app import app

    return CliRunner().invoke(app, ["store", "prune", *args])


def test_cli_prune_prints_the_table_and_the_sqlite_note(private_store):
    from carbonsched.config import get_settings

    store = Store(get_settings().resolved_database_url())
    now = datetime.now(UTC)
    with Session(store.engine) as s, s.begin():
        for days in (40, 41, 5):
            _fetch(s, now - timedelta(days=days))
    r = _cli("--keep-days", "30", "--dry-run")
    assert r.exit_code == 0, r.output
    assert "Would delete" in r.stdout and "signal_fetches" in r.stdout
    assert len(snapshot(store)["signal_fetches"]) == 3
    r = _cli("--keep-days", "30")
    assert r.exit_code == 0, r.output
    assert "Deleted" in r.stdout and "VACUUM" in r.stdout
    assert len(snapshot(store)["signal_fetches"]) == 1
    r = _cli("--keep-days", "30", "--vacuum")
    assert r.exit_code == 0, r.output
    assert "VACUUM:" in r.stdout and "MiB" in r.stdout


@pytest.mark.parametrize("args", [["--keep-days", "0"], ["--keep-days", "-1"], []])
def test_cli_refuses_n_below_one_or_missing(private_store, args):
    r = _cli(*args)
    assert r.exit_code == 2
    assert r.stderr.startswith("error: ")
    assert "--keep-days" in r.stderr


def test_cli_takes_n_from_the_setting(private_store, monkeypatch):
    from carbonsched.config import get_settings

    monkeypatch.setenv("CARBONSCHED_RETENTION_DAYS", "7")
    get_settings.cache_clear()
    r = _cli("--dry-run")
    assert r.exit_code == 0, r.output
    assert "older than 7 days" in r.stdout


def test_a_jobs_units_go_together_or_not_at_all(store):
    """A job's first unit (J#0) is its claim on the id (dispatched_jobs, the API's duplicate
    check): prune took J#0 (old, Succeeded) while J#1 was still Paused, so the id read as free
    and a later plan's J#1 was shadowed. Now the units of a job go only all together."""
    from carbonsched.dispatch.outbox import dispatched_jobs

    with Session(store.engine) as s, s.begin():
        _plan(s, "p1", OLD, children=False)
        _plan(s, "p-new", RECENT, children=False)
        for job, second in (("held", "Paused"), ("done", "Succeeded")):
            _intent(s, job, "p1", "Succeeded", OLD, OLD, deadline=OLD + timedelta(days=1))
            s.add(DispatchRow(
                key=f"{job}#1", job_id=job, piece=1, plan_id="p1", site="site-a",
                backend="slurm", state=second, reason="x", detail="",
                request_json=json.dumps({"deadline": (OLD + timedelta(days=1)).isoformat()}),
                planned_start=OLD + timedelta(hours=4), planned_end=OLD + timedelta(hours=5),
                attempts=1, created_at=OLD, updated_at=OLD,
                actual_end=OLD + timedelta(hours=5) if second == "Succeeded" else None))
    res = prune(store, KEEP, now=NOW)
    with Session(store.engine) as s:
        left = sorted(r.key for r in s.scalars(select(DispatchRow)))
    # the job with a live unit keeps both; the finished job loses both (just at the limit of
    # the rule: every unit old and terminal)
    assert left == ["held#0", "held#1"]
    assert res.deleted["dispatch_intents"] == 2
    assert sorted(dispatched_jobs(store, ["held", "done"])) == ["held"]


def test_tombstones_go_only_long_after_their_rows(store):
    """A tombstone outlives its job's rows by TOMBSTONE_DAYS past the cutoff; at the limit it
    stays, a second older it goes."""
    at = CUT - timedelta(days=TOMBSTONE_DAYS)
    with Session(store.engine) as s, s.begin():
        for jid, when in (("t-limit", at), ("t-older", at - timedelta(seconds=1)),
                          ("t-recent", RECENT)):
            s.add(PrunedJobRow(job_id=jid, state="Succeeded", reason="Completed",
                               source="dispatch_intents", pruned_at=when))
    res = prune(store, KEEP, now=NOW)
    assert res.deleted["pruned_jobs"] == 1
    assert snapshot(store)["pruned_jobs"] == {"t-limit", "t-recent"}


def test_vacuum_is_refused_on_a_store_without_a_file_in_one_sentence_before_any_prune(store):
    """``--vacuum`` (the CLI, before anything is pruned) and ``vacuum()`` refuse a store that
    is not a SQLite file with one sentence: PostgreSQL (its autovacuum), an in-memory SQLite
    database (no file); a SQLite file is compacted (just beside the refusals)."""
    from carbonsched.store.retention import check_vacuum, vacuum

    stores = [store, Store("sqlite://")]
    for s in stores:
        if s.engine.dialect.name == "sqlite" and s is store:
            check_vacuum(s)                  # a file: compacted
            assert vacuum(s).before > 0
            continue
        for call in (check_vacuum, vacuum):
            with pytest.raises(InputError) as e:
                call(s)
            what = ("an in-memory SQLite database, which has no file to shrink"
                    if s.engine.dialect.name == "sqlite" else
                    "postgresql, whose autovacuum makes freed space reusable (run VACUUM FULL "
                    "there yourself to return it to the disk)")
            assert str(e.value) == (f"--vacuum compacts a SQLite file; the store "
                                    f"{s._safe_url()} is {what}; drop --vacuum")
