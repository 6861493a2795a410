"""The store under concurrency, busy SQLite and unusable paths (issue 7, items 8 and 12).

Fifteen real processes open a fresh store at the same moment, on SQLite and on the real
PostgreSQL server that scripts/test starts; a second process holding SQLite's write lock makes
``save_plan`` wait, retry and then say *locked* (not *unreachable*) and that the plan file is
intact.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sqlite3
import threading
import time
import uuid
from pathlib import Path

import pytest
from test_store import _forecasts, _plan  # tests/store is on sys.path (rootdir import)
from typer.testing import CliRunner

from carbonsched.cli.app import app
from carbonsched.config import get_settings
from carbonsched.errors import BackendUnavailableError
from carbonsched.store import Store, StoreLockedError

N_PROCESSES = 15


def _open(url: str, barrier, out) -> None:
    barrier.wait()
    try:
        Store(url)
        out.put(("ok", ""))
    except Exception as exc:  # noqa: BLE001 - the test reports every failure by kind
        out.put((type(exc).__name__, str(exc)[:300]))


def _open_all_at_once(url: str) -> list[tuple[str, str]]:
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(N_PROCESSES)
    out = ctx.Queue()
    procs = [ctx.Process(target=_open, args=(url, barrier, out)) for _ in range(N_PROCESSES)]
    for p in procs:
        p.start()
    results = [out.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    return results


def test_fifteen_processes_open_a_fresh_sqlite_store_at_once(tmp_path):
    # before: 6 of 15 failed ("table plans already exists" / locked), reported as unreachable
    url = f"sqlite:///{tmp_path}/fresh/cs.db"
    results = _open_all_at_once(url)
    assert results == [("ok", "")] * N_PROCESSES
    store = Store(url)
    store.save_plan(_plan("after"), _forecasts())
    assert [p["plan_id"] for p in store.list_plans()] == ["after"]
    with sqlite3.connect(f"{tmp_path}/fresh/cs.db") as c:
        assert c.execute("select count(*) from alembic_version").fetchone() == (1,)
    # the migration's lock file goes with its last holder (an empty one stayed beside the store)
    assert not (tmp_path / "fresh" / "cs.db.migrate.lock").exists()


def test_a_process_that_waited_on_a_removed_lock_file_locks_the_one_at_the_path(tmp_path):
    # the holder removes the lock file before it lets go; a waiter that then held a lock on
    # the removed file would migrate beside a third process that opened the path anew
    import fcntl

    if not Path("/proc/locks").exists():
        pytest.skip("needs Linux's /proc/locks to see the second thread wait")
    store = Store(f"sqlite:///{tmp_path}/cs.db")
    lock_path = tmp_path / "cs.db.migrate.lock"
    first_holds, second_holds, release = (threading.Event() for _ in range(3))
    seen = {}

    def first():
        with store._migration_lock():
            first_holds.set()
            release.wait(timeout=60)

    def second():
        first_holds.wait(timeout=60)
        with store._migration_lock():
            second_holds.set()
            with open(lock_path, "a") as fh:       # a third process opening the path now
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    seen["third"] = "got the lock"
                except BlockingIOError:
                    seen["third"] = "waits"
            release.wait(timeout=60)

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    assert first_holds.wait(timeout=60)
    # the second thread blocked on the first's file: /proc/locks lists it as a waiter ("->")
    # on that inode (a sleep here let it come late, open the new file and test nothing)
    ino = os.stat(lock_path).st_ino
    deadline = time.monotonic() + 60
    while not any("->" in line and f":{ino} " in line
                  for line in Path("/proc/locks").read_text().splitlines()):
        assert time.monotonic() < deadline, "the second thread never waited on the lock"
        time.sleep(0.01)
    release.set()
    second_holds.wait(timeout=60)
    for t in threads:
        t.join(timeout=60)
    assert seen == {"third": "waits"}
    assert not lock_path.exists()


@pytest.mark.postgres
def test_fifteen_processes_open_a_fresh_postgres_store_at_once(pg_db):
    url = pg_db
    results = _open_all_at_once(url)
    assert results == [("ok", "")] * N_PROCESSES
    store = Store(url)
    store.save_plan(_plan("after"), _forecasts())
    assert store.get_plan("after")["plan_id"] == "after"
    store.engine.dispose()


def plans_list_on(url: str, monkeypatch):
    """``carbonsched plans list`` with ``CARBONSCHED_DATABASE_URL=url`` (CliRunner's result)."""
    monkeypatch.setenv("CARBONSCHED_DATABASE_URL", url)
    get_settings.cache_clear()
    try:
        return CliRunner().invoke(app, ["plans", "list"])
    finally:
        get_settings.cache_clear()


def test_a_dead_server_is_still_unreachable_exit_3(tmp_path, monkeypatch):
    r = plans_list_on("postgresql+psycopg2://u:secret@127.0.0.1:1/x", monkeypatch)
    assert r.exit_code == 3, r.output
    out = " ".join(r.output.split())
    assert "127.0.0.1:1/x is unreachable" in out and "secret" not in out
    assert "locked" not in out


def _hold_write_lock(path: str, seconds: float, ready: threading.Event,
                     release: threading.Event | None = None) -> None:
    con = sqlite3.connect(path, timeout=0, check_same_thread=False)
    con.execute("BEGIN EXCLUSIVE")
    ready.set()
    if release is not None:
        release.wait(seconds)
    else:
        time.sleep(seconds)
    con.rollback()
    con.close()


def test_locked_sqlite_store_retries_then_says_locked_and_plan_file_intact(tmp_path):
    path = f"{tmp_path}/cs.db"
    store = Store(f"sqlite:///{path}", busy_timeout_s=0.1, locked_retries=2,
                  locked_backoff_s=0.05)
    ready = threading.Event()
    # the other writer holds the lock for 8 s: far longer than the bounded retries, so a loaded
    # machine only stretches the wait, never lets the lock go before the store gives up
    holder = threading.Thread(target=_hold_write_lock, args=(path, 8.0, ready))
    holder.start()
    ready.wait()
    t = time.perf_counter()
    with pytest.raises(StoreLockedError) as info:
        store.save_plan(_plan("busy"), _forecasts())
    waited = time.perf_counter() - t
    holder.join()
    msg = str(info.value)
    assert "is locked by another process" in msg and "unreachable" not in msg
    assert "recording plan busy waited 3 times" in msg
    assert "the plan file is intact" in msg
    # bounded: 3 attempts x 0.1 s busy timeout + 0.05 + 0.1 s pauses, well under the 8 s lock
    assert 0.3 < waited < 7.0
    assert isinstance(info.value, BackendUnavailableError)       # exit 3 in the CLI
    # once the other writer is gone the same store records the plan
    store.save_plan(_plan("busy"), _forecasts())
    assert store.get_plan("busy")["plan_id"] == "busy"


def test_locked_sqlite_store_succeeds_when_the_lock_goes_during_the_retries(tmp_path):
    path = f"{tmp_path}/cs.db"
    store = Store(f"sqlite:///{path}", busy_timeout_s=0.1, locked_retries=4,
                  locked_backoff_s=0.2)
    ready = threading.Event()
    holder = threading.Thread(target=_hold_write_lock, args=(path, 0.5, ready))
    holder.start()
    ready.wait()
    store.save_plan(_plan("later"), _forecasts())
    holder.join()
    assert store.get_plan("later")["plan_id"] == "later"


def test_cli_plan_on_a_locked_store_exits_3_saying_locked(tmp_path, monkeypatch):
    path = f"{tmp_path}/cs.db"
    Store(f"sqlite:///{path}")
    monkeypatch.setenv("CARBONSCHED_DATABASE_URL", f"sqlite:///{path}")
    import carbonsched.store as store_mod

    monkeypatch.setattr(store_mod.Store.__init__, "__defaults__", (0.1, 2, 0.05))
    get_settings.cache_clear()
    ready, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=_hold_write_lock, args=(path, 600.0, ready, release))
    holder.start()
    ready.wait()
    out = tmp_path / "plan.json"
    try:
        r = CliRunner().invoke(app, ["plan", "--date", "2026-11-30", "--out", str(out)])
    finally:
        release.set()
        get_settings.cache_clear()
    assert r.exit_code == 3, r.output
    text_ = " ".join(r.output.split())
    assert "is locked by another process" in text_ and "the plan file is intact" in text_
    import json

    assert json.loads(out.read_text())["workload"]["source"] == "demo"
    holder.join(timeout=30)


@pytest.mark.parametrize("make_bad", ["under-a-file", "under-dev-null"])
def test_store_folder_that_cannot_be_created_is_exit_3_with_a_message(tmp_path, monkeypatch,
                                                                     make_bad):
    if make_bad == "under-a-file":
        (tmp_path / "afile").write_text("x")
        url = f"sqlite:///{tmp_path}/afile/sub/cs.db"
        folder = f"{tmp_path}/afile/sub"
    else:
        url = "sqlite:////dev/null/carbonsched/cs.db"
        folder = "/dev/null/carbonsched"
    with pytest.raises(BackendUnavailableError) as info:
        Store(url)
    assert f"the store folder {folder} cannot be created" in str(info.value)
    r = plans_list_on(url, monkeypatch)
    assert r.exit_code == 3, r.output
    assert "cannot be created" in r.output and "Traceback" not in r.output


@pytest.mark.postgres
def test_longest_job_id_fits_the_store_on_postgres_and_sqlite(tmp_path):
    from carbonsched.limits import MAX_IDENTIFIER_CHARS as MAX_ID_CHARS

    urls = [f"sqlite:///{tmp_path}/cs.db"]
    if os.environ.get("CARBONSCHED_TEST_POSTGRES_URL"):
        urls.append(os.environ["CARBONSCHED_TEST_POSTGRES_URL"])
    for url in urls:
        store = Store(url)
        plan = _plan(f"long-{uuid.uuid4().hex[:6]}")
        plan["placements"][0]["job_id"] = "j" * MAX_ID_CHARS
        store.save_plan(plan)
        rows = store.placements(plan["plan_id"])
        assert "j" * MAX_ID_CHARS in set(rows["job_id"])
        store.engine.dispose()


def test_a_lock_file_that_cannot_be_removed_still_lets_go(tmp_path, monkeypatch):
    # only a missing file was forgiven: a PermissionError on removal failed the store's open
    # after its migration had committed, and left the file locked until garbage collection
    import fcntl

    from carbonsched import store as store_module

    store = Store(f"sqlite:///{tmp_path}/cs.db")
    lock_path = tmp_path / "cs.db.migrate.lock"

    def refuse(path):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(store_module.os, "unlink", refuse)
    with store._migration_lock():
        pass
    with open(lock_path, "a") as fh:              # let go: another opener gets it at once
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_the_holder_removes_only_its_own_lock_file(tmp_path):
    # a file put at the path by someone else while the lock was held is theirs to remove
    store = Store(f"sqlite:///{tmp_path}/cs.db")
    lock_path = tmp_path / "cs.db.migrate.lock"
    with store._migration_lock():
        lock_path.unlink()                       # e.g. a temporary-files cleaner
        lock_path.write_text("another process's lock file")
    assert lock_path.read_text() == "another process's lock file"
