"""The service's store on SQLite (WAL) and on the real PostgreSQL that scripts/test starts."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import create_engine, inspect, text

from carbonsched.errors import InputError
from carbonsched.store import Store
from carbonsched.store.service import (
    DuplicateJobError,
    LeaderLease,
    ServiceStore,
    hash_token,
    role_allows,
)
from tests.service.conftest import postgres_url

NOW = datetime(2023, 7, 14, 23, tzinfo=UTC)
I16, I17 = datetime(2023, 7, 16, tzinfo=UTC), datetime(2023, 7, 17, tzinfo=UTC)
"""Issue times of the planning dates 2023-07-16 and -17 (a run record's key)."""


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request, tmp_path) -> ServiceStore:
    if request.param == "sqlite":
        return ServiceStore(Store(f"sqlite:///{tmp_path / 's.sqlite'}"))
    request.getfixturevalue("pg_db")
    return ServiceStore(Store(request.getfixturevalue("pg_db")))


def test_migration_creates_the_service_tables(db):
    names = set(inspect(db.engine).get_table_names())
    assert {"api_tokens", "service_jobs", "pipeline_runs", "plans", "rolling_jobs",
            "service_leases", "booking_ledger"} <= names
    assert {"owner", "heartbeat_at", "lease_expires_at"} <= {
        c["name"] for c in inspect(db.engine).get_columns("pipeline_runs")}
    from alembic.script import ScriptDirectory

    from carbonsched.store import MIGRATIONS

    with db.engine.connect() as c:
        # the newest migration (the service's tables come with 0003_service, before it)
        assert c.execute(text("SELECT version_num FROM alembic_version")).scalar() == \
            ScriptDirectory(str(MIGRATIONS)).get_current_head()


def test_sqlite_runs_in_wal_mode(tmp_path):
    db = ServiceStore(Store(f"sqlite:///{tmp_path / 'w.sqlite'}"))
    with db.engine.connect() as c:
        assert c.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert c.execute(text("PRAGMA busy_timeout")).scalar() == 10_000
    assert (tmp_path / "w.sqlite-wal").exists()


def test_tokens_are_stored_hashed_with_roles(db):
    tid, token = db.create_token("submit", NOW, name="ci")
    assert token.startswith("cst_") and len(token) > 40
    with db.engine.connect() as c:
        rows = c.execute(text("SELECT token_id, token_sha256, role FROM api_tokens")).all()
    assert rows == [(tid, hash_token(token), "submit")]
    assert token not in repr(rows)
    assert db.role_for_token(token) == "submit"
    assert db.role_for_token(token + "x") is None
    with db.engine.begin() as c:
        c.execute(text("UPDATE api_tokens SET revoked_at = :t"), {"t": NOW})
    assert db.role_for_token(token) is None
    with pytest.raises(InputError, match="unknown role 'root'; use one of read, submit, admin"):
        db.create_token("root", NOW)
    assert role_allows("admin", "submit") and not role_allows("read", "submit")


def _job_row(jid: str) -> dict:
    return {"job_id": jid, "tenant": "t", "spec_json": "{}", "state": "Pending",
            "reason": "AwaitingPlan", "detail": "", "submitted_at": NOW, "updated_at": NOW,
            "reserved": False}


def test_jobs_round_trip_and_duplicates(db):
    db.add_jobs([_job_row("a"), _job_row("b")])
    with pytest.raises(DuplicateJobError, match="job 'a' already exists"):
        db.add_jobs([_job_row("c"), _job_row("a")])
    assert db.get_job("c") is None   # all or none
    db.update_job("a", state="Planned", reason="Placed", site="s1",
                  start=NOW + timedelta(hours=1), end=NOW + timedelta(hours=3), reserved=True,
                  plan_id="p1")
    a = db.get_job("a")
    assert (a["state"], a["site"], a["reserved"]) == ("Planned", "s1", True)
    assert a["start"] == NOW + timedelta(hours=1) and a["start"].tzinfo is not None
    assert [r["job_id"] for r in db.jobs(plan_id="p1")] == ["a"]
    assert [r["job_id"] for r in db.jobs(states=("Pending",))] == ["b"]


def test_a_planning_date_is_claimed_once_under_contention(db):
    wins = []
    barrier = threading.Barrier(8)

    def claim(i: int) -> None:
        barrier.wait()
        if db.claim_run("2023-07-16", "2023-07-15", I16, "scheduled", f"r{i}", NOW,
                        timedelta(hours=3)):
            wins.append(i)

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1
    row = db.get_run("2023-07-16")
    assert row["replica"] == f"r{wins[0]}" and row["status"] == "running"
    db.finish_run("2023-07-16", NOW, "succeeded", plan_id="p", dispatch="dispatch: not "
                  "configured")
    assert db.get_run("2023-07-16")["status"] == "succeeded"
    assert not db.claim_run("2023-07-16", "2023-07-15", I16, "x", "y",
                            NOW + timedelta(days=9), timedelta(hours=3))


class StepClock:
    def __init__(self, at: datetime) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at


def test_leader_lease_moves_only_when_it_runs_out(db):
    clock = StepClock(NOW)
    other = create_engine(db.engine.url.render_as_string(hide_password=False))
    a = LeaderLease(db.engine, "a", 45.0, lease_clock=clock)
    b = LeaderLease(other, "b", 45.0, lease_clock=clock)
    try:
        assert a.try_acquire() and a.held
        assert not b.try_acquire() and not b.held
        clock.at = NOW + timedelta(seconds=30)
        assert a.try_acquire()                      # renewed: until NOW + 75 s
        clock.at = NOW + timedelta(seconds=75)
        assert not b.try_acquire()                  # just at the limit: still a's
        clock.at = NOW + timedelta(seconds=75, microseconds=1)
        assert b.try_acquire() and b.held           # a stopped renewing: b leads
        assert not a.try_acquire() and not a.held   # and a knows it lost the lead
        assert b.holder()["owner"].startswith("b/")
        b.release()                                 # a clean stop hands over at once
        assert a.try_acquire()
    finally:
        a.release()
        b.release()
        other.dispose()


def test_a_run_record_lease_is_renewed_by_its_owner_only(db):
    clock = StepClock(NOW)
    db.lease_clock = clock
    lease = timedelta(seconds=45)
    owner = db.claim_run("2023-07-16", "2023-07-15", I16, "scheduled", "r1", NOW, lease)
    assert owner and owner.startswith("r1/")
    assert db.claim_run("2023-07-16", "2023-07-15", I16, "scheduled", "r2", NOW, lease) is None
    clock.at = NOW + timedelta(seconds=40)
    assert db.renew_run("2023-07-16", owner, lease)             # until NOW + 85 s
    assert not db.renew_run("2023-07-16", "r2/x", lease)
    clock.at = NOW + timedelta(seconds=85)
    assert db.claim_run("2023-07-16", "2023-07-15", I16, "check", "r2", NOW, lease) is None
    clock.at = NOW + timedelta(seconds=85, microseconds=1)
    second = db.claim_run("2023-07-16", "2023-07-15", I16, "check", "r2", NOW, lease)
    assert second and second.startswith("r2/")
    row = db.get_run("2023-07-16")
    assert (row["replica"], row["attempts"], row["owner"]) == ("r2", 2, second)
    assert row["heartbeat_at"] == NOW + timedelta(seconds=85, microseconds=1)
    # the first owner comes back: it can neither renew nor finish the record now
    assert not db.renew_run("2023-07-16", owner, lease)
    assert not db.finish_run("2023-07-16", NOW, "succeeded", owner=owner)
    assert db.finish_run("2023-07-16", NOW, "succeeded", owner=second)
    assert db.get_run("2023-07-16")["status"] == "succeeded"


def test_a_dead_database_is_the_projects_error_naming_it(private_pg):
    from carbonsched.errors import StoreUnavailableError

    db = ServiceStore(Store(private_pg.url))
    owner = db.claim_run("2023-07-16", "2023-07-15", I16, "cli", "r1", NOW,
                         timedelta(seconds=45))
    lease = LeaderLease(db.engine, "r1", 45.0)
    assert lease.try_acquire()
    private_pg.stop()
    calls = {
        "claim_run": lambda: db.claim_run("2023-07-17", "2023-07-16", I17, "cli", "r1", NOW,
                                          timedelta(seconds=45)),
        "get_run": lambda: db.get_run("2023-07-16"),
        "renew_run": lambda: db.renew_run("2023-07-16", owner, timedelta(seconds=45)),
        "finish_run": lambda: db.finish_run("2023-07-16", NOW, "failed", owner=owner),
        "runs": lambda: db.runs(),
        "jobs": lambda: db.jobs(),
        "role_for_token": lambda: db.role_for_token("cst_x"),
        "ping": db.ping,
        "lease": lease.try_acquire,
    }
    for name, call in calls.items():
        with pytest.raises(StoreUnavailableError) as info:
            call()
        msg = str(info.value)
        assert msg.startswith(f"database postgresql+psycopg2://postgres:***@127.0.0.1:"
                              f"{private_pg.port}/carbonsched is unreachable ("), (name, msg)
        assert "pw-not-shown" not in msg and "\n" not in msg, (name, msg)
        assert msg.endswith("check CARBONSCHED_DATABASE_URL and that the server is running, "
                            "then retry"), (name, msg)
    assert "(reading the run record of 2023-07-16: " in str(
        pytest.raises(StoreUnavailableError, db.get_run, "2023-07-16").value)
    db.engine.dispose()


def test_an_unreachable_sqlite_file_names_its_path_and_what_to_check(tmp_path):
    import shutil

    from carbonsched.errors import StoreUnavailableError

    path = tmp_path / "gone" / "carbonsched.db"
    db = ServiceStore(Store(f"sqlite:///{path}"))
    db.engine.dispose()
    shutil.rmtree(path.parent)          # SQLite: "unable to open database file"
    msg = str(pytest.raises(StoreUnavailableError, db.get_run, "2023-07-16").value)
    assert msg == (f"database {path} is unreachable (reading the run record of 2023-07-16: "
                   "unable to open database file); check CARBONSCHED_DATABASE_URL and that "
                   f"this user can read and write {path} and its folder, then retry")


def test_postgres_url_is_set_by_the_test_command():
    if postgres_url() is None:
        pytest.skip("CARBONSCHED_TEST_POSTGRES_URL not set (scripts/test starts PostgreSQL)")
    assert postgres_url().startswith("postgresql")
