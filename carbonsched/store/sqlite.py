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
