"""SQLite connections as the store opens them: WAL mode and a busy timeout."""

from __future__ import annotations

from sqlalchemy import event
from sqlalchemy.engine import Engine

SQLITE_BUSY_TIMEOUT_MS = 10_000
"""How long a SQLite writer waits for another's lock before failing. [ms]"""


def enable_sqlite_wal(engine: Engine,
                      busy_timeout_s: float = SQLITE_BUSY_TIMEOUT_MS / 1000) -> None:
    """Open every SQLite connection in WAL mode with the store's busy timeout.

    WAL lets readers (the API) proceed while the cron writes a plan; ``synchronous=NORMAL`` is
    the setting SQLite documents as safe with WAL (https://sqlite.org/wal.html,
    https://sqlite.org/pragma.html#pragma_synchronous).
    """

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_conn, _record):  # noqa: ANN001
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.close()


def transactional_ddl(engine: Engine) -> None:
    """Make ``engine``'s transactions cover DDL too: one migration is all or nothing.

    Python's ``sqlite3`` driver commits on its own before a DDL statement, so a schema migration
    run inside ``engine.begin()`` is kept statement by statement: a process stopped between two
    statements of one revision leaves the first (a new column) without the version bump, and
    every later start fails on it. SQLAlchemy's documented pysqlite recipe
    (https://docs.sqlalchemy.org/en/20/dialects/sqlite.html#serializable-isolation-savepoints-transactional-ddl)
    turns the driver's own transaction handling off and emits ``BEGIN`` itself, so SQLite (whose
    DDL is transactional) rolls the whole upgrade back. ``BEGIN IMMEDIATE`` takes the write lock
    at once, as a migration writes anyway. For an engine of migrations only: the store's own
    engine keeps the driver's handling, on which the ``BEGIN IMMEDIATE`` of
    :meth:`carbonsched.store.service.ServiceStore.reserve_job` builds.

    Parameters
    ----------
    engine
        A SQLite engine (pysqlite driver), before its first connection; its ``connect`` and
        ``begin`` events get the recipe's listeners.
    """

    @event.listens_for(engine, "connect")
    def _no_driver_transactions(dbapi_conn, _record):  # noqa: ANN001
        dbapi_conn.isolation_level = None

    @event.listens_for(engine, "begin")
    def _begin(conn):  # noqa: ANN001
        conn.exec_driver_sql("BEGIN IMMEDIATE")
