"""The service's store on SQLite (WAL) and on the real PostgreSQL that scripts/test starts."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import create_engine, inspect, text

from carbonsched.errors import InputError
from carbonsched.store import Store
from carbonsched.store.service import (
    DuplicateJobError,
    LeaderLock,
    ServiceStore,
    hash_token,
    role_allows,
)
from tests.service.conftest import postgres_url

NOW = datetime(2023, 7, 14, 23, tzinfo=UTC)


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request, tmp_path) -> ServiceStore:
    if request.param == "sqlite":
        return ServiceStore(Store(f"sqlite:///{tmp_path / 's.sqlite'}"))
    request.getfixturevalue("pg_db")
    return ServiceStore(Store(request.getfixturevalue("pg_db")))


def test_migration_creates_the_service_tables(db):
    names = set(inspect(db.engine).get_table_names())
    assert {"api_tokens", "service_jobs", "pipeline_runs", "plans", "rolling_jobs"} <= names
    with db.engine.connect() as c:
        # the newest migration (the service's tables come with 0003_service, before it)
        assert c.execute(text("SELECT version_num FROM alembic_version")).scalar() == \
            "0006_bookings_tokens"


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
        if db.claim_run("2023-07-16", "2023-07-15", NOW, "scheduled", f"r{i}", NOW,
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
    assert not db.claim_run("2023-07-16", "2023-07-15", NOW + timedelta(days=9), "x", "y",
                            NOW + timedelta(days=9), timedelta(hours=3))


def test_leader_lock(db):
    a = LeaderLock(db.engine)
    other = create_engine(db.engine.url.render_as_string(hide_password=False))
    b = LeaderLock(other)
    try:
        assert a.try_acquire()
        if db.dialect == "postgresql":
            assert not b.try_acquire() and not b.held
            a.release()
            assert b.try_acquire() and b.held
        else:  # single node: always leads
            assert b.try_acquire() and a.single_node
    finally:
        a.release()
        b.release()
        other.dispose()


def test_leadership_passes_when_the_leader_connection_dies(pg_db):
    e1, e2 = create_engine(pg_db), create_engine(pg_db)
    ServiceStore(Store(pg_db))
    a, b = LeaderLock(e1), LeaderLock(e2)
    assert a.try_acquire() and not b.try_acquire()
    a._conn.invalidate()   # the session ends as when a replica dies
    a._conn = None
    # the server frees the lock when it sees the socket close: not instantly on a loaded host
    deadline = time.monotonic() + 10.0
    acquired = b.try_acquire()
    while not acquired and time.monotonic() < deadline:
        time.sleep(0.1)
        acquired = b.try_acquire()
    assert acquired, "the standby never took the lock after the leader died"
    b.release()
    e1.dispose()
    e2.dispose()


def test_postgres_url_is_set_by_the_test_command():
    if postgres_url() is None:
        pytest.skip("CARBONSCHED_TEST_POSTGRES_URL not set (scripts/test starts PostgreSQL)")
    assert postgres_url().startswith("postgresql")
