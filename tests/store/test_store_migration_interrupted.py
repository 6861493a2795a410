"""A start-up migration stopped part-way leaves the store at its old revision, whole.

Python's ``sqlite3`` driver commits before each DDL statement on its own, so a migration run in
one ``engine.begin()`` was kept statement by statement: a process stopped inside revision
``0017_rolling_issue_time`` (after its ``add_column``, before its table copy) left the column
without the version bump, and every later start failed on "duplicate column name", reported as
an unreachable database. The real upgrade is interrupted here (by a ``KeyboardInterrupt``, as a
Ctrl-C or the CLI's SIGTERM handler raises it, at the step after the column was added); a schema
that does not match its revision is said as what it is.
"""

from __future__ import annotations

import sqlite3

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from test_store_concurrency import plans_list_on  # tests/store is on sys.path (rootdir import)

from carbonsched.store import MIGRATIONS, Store, StoreSchemaError
from carbonsched.store.sqlite import enable_sqlite_wal

OLD = "0014_front_door"
STEP = "0017_rolling_issue_time"


def _store_at(path, revision: str) -> str:
    """A SQLite store at ``revision`` holding one run record; its URL."""
    url = f"sqlite:///{path}"
    eng = sa.create_engine(url)
    enable_sqlite_wal(eng)
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with eng.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)
    with eng.begin() as conn:
        conn.execute(sa.text(
            "INSERT INTO pipeline_runs (planning_date, local_day, issued_at, trigger, replica, "
            "status, started_at, attempts, dispatch, error, notes) VALUES ('2026-01-01', "
            "'2026-01-01', '2026-01-01 00:00:00.000000', 'cli', 'r', 'succeeded', "
            "'2026-01-01 00:00:00.000000', 1, '', '', '')"))
    eng.dispose()
    return url


def _revision_and_columns(path) -> tuple[list, list[str]]:
    con = sqlite3.connect(path)
    try:
        rev = con.execute("SELECT version_num FROM alembic_version").fetchall()
        cols = [r[1] for r in con.execute("PRAGMA table_info(pipeline_runs)")]
    finally:
        con.close()
    return rev, cols


def test_an_upgrade_interrupted_mid_revision_keeps_nothing_and_the_next_start_reaches_head(
        tmp_path, monkeypatch):
    db = tmp_path / "store.db"
    url = _store_at(db, OLD)
    create = sa.Table.create
    seen = []

    def interrupted(self, bind, checkfirst=False):  # noqa: ANN001
        if self.name == "_pipeline_runs_rekeyed":   # 0017's copy, after its add_column
            seen.append([c["name"] for c in sa.inspect(bind).get_columns("pipeline_runs")])
            raise KeyboardInterrupt("stopped while 0017 copies pipeline_runs")
        return create(self, bind, checkfirst)

    monkeypatch.setattr(sa.Table, "create", interrupted)
    with pytest.raises(KeyboardInterrupt):
        Store(url)
    assert seen and "run_key" in seen[0]          # the column was added when it stopped
    monkeypatch.setattr(sa.Table, "create", create)
    rev, cols = _revision_and_columns(db)
    assert rev == [(OLD,)]
    assert "run_key" not in cols                  # nothing of the cut revision stayed
    store = Store(url)                            # the next start migrates the whole way
    rev, cols = _revision_and_columns(db)
    assert rev == [(store_head(),)] and "run_key" in cols
    with store.engine.connect() as conn:
        keys = conn.execute(sa.text("SELECT run_key, status FROM pipeline_runs")).all()
    assert keys == [("2026-01-01T00:00Z", "succeeded")]


def store_head() -> str:
    from alembic.script import ScriptDirectory

    return ScriptDirectory(str(MIGRATIONS)).get_current_head()


def test_a_schema_that_does_not_match_its_revision_is_said_as_such(tmp_path, monkeypatch):
    # what an interrupted start-up left before the fix: 0017's column without its version
    db = tmp_path / "store.db"
    url = _store_at(db, OLD)
    con = sqlite3.connect(db)
    con.execute("ALTER TABLE pipeline_runs ADD COLUMN run_key VARCHAR(20)")
    con.commit()
    con.close()
    with pytest.raises(StoreSchemaError) as err:
        Store(url)
    msg = str(err.value)
    assert "unreachable" not in msg and "CARBONSCHED_DATABASE_URL" not in msg
    assert f"cannot be migrated from revision {OLD} to {store_head()}" in msg
    assert f"revision {STEP} failed (OperationalError: duplicate column name: run_key)" in msg
    assert f"the store is still at revision {OLD}" in msg
    assert "restore the database from a backup, or undo the stray change" in msg
    assert _revision_and_columns(db)[0] == [(OLD,)]
    # the CLI: one error line, exit 2 (a person mends it; retrying will not)
    r = plans_list_on(url, monkeypatch)
    assert r.exit_code == 2, r.output
    out = " ".join(r.output.split())
    assert out.startswith("error: database ") and f"revision {STEP} failed" in out
    assert "Traceback" not in r.output


def test_the_failed_revision_named_is_the_one_after_those_applied(tmp_path):
    db = tmp_path / "store.db"
    url = _store_at(db, OLD)
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE grid_events (x INTEGER)")   # 0021 creates it
    con.commit()
    con.close()
    with pytest.raises(StoreSchemaError) as err:
        Store(url)
    assert ("revision 0021_grid_events failed (OperationalError: table grid_events already "
            "exists)") in str(err.value)
    assert f"the store is still at revision {OLD}" in str(err.value)
    rev, cols = _revision_and_columns(db)
    assert rev == [(OLD,)] and "run_key" not in cols     # 0017, applied before, rolled back
