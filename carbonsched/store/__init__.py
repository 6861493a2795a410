"""The store: plans, placements and forecasts in any SQLAlchemy database, migrated by Alembic.

The embedded default is a SQLite file in the user's data directory; ``CARBONSCHED_DATABASE_URL``
(any SQLAlchemy URL, e.g. ``postgresql+psycopg2://user@127.0.0.1:5432/carbonsched``) overrides it.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
import zlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, delete, select, text
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool

from carbonsched.config import (
    UNESCAPED_AT,
    database_label,
    unescaped_at,
    url_without_secrets,
)
from carbonsched.errors import (
    BackendError,
    BackendUnavailableError,
    InputError,
    StoreUnavailableError,
    missing_extra,
    store_check,
)
from carbonsched.store.models import ForecastRow, InferenceRow, PlacementRow, PlanRow
from carbonsched.store.sqlite import enable_sqlite_wal, transactional_ddl

MIGRATIONS = Path(__file__).resolve().parent / "migrations"

_URL_FIX = ("set CARBONSCHED_DATABASE_URL to a SQLAlchemy URL, e.g. "
            "postgresql+psycopg2://user@host:5432/carbonsched or "
            "sqlite:////var/lib/carbonsched/carbonsched.db")

SQLITE_BUSY_TIMEOUT_S = 10.0
"""How long one SQLite statement waits for another process's write lock (``sqlite3``'s
``timeout``). [s]"""
LOCKED_RETRIES = 3
"""Further attempts of a whole transaction that failed with "database is locked". [-]"""
LOCKED_BACKOFF_S = 0.5
"""Pause before the first retry, doubled before each further one. [s]"""
MIGRATION_LOCK_KEY = zlib.crc32(b"carbonsched.store.migrate")
"""PostgreSQL advisory-lock key that serialises schema migrations across processes."""
PLAN_ID_MIN_PREFIX = 6
"""Fewest characters of a plan id that name it (``plan`` prints 12; git's short ids: 4+)."""

_T = TypeVar("_T")


class StoreLockedError(BackendUnavailableError):
    """The store is busy: another process holds SQLite's write lock past every retry."""


class StoreSchemaError(BackendError):
    """The database answers, but its schema cannot be brought to the newest revision.

    A migration step failed on the schema it found (a column or table already there, one
    missing): the schema does not match the revision it records. Nothing of the failed upgrade
    is kept (migrations run in one transaction); a person has to mend the schema.
    """


_CONNECTION_WORDS = ("unable to open database", "could not connect", "connection refused",
                     "server closed the connection", "connection already closed",
                     "could not receive data", "could not send data", "timeout expired",
                     "terminating connection", "disk i/o error")
"""Driver messages of a database that cannot be reached (not of a schema it refuses)."""


def _connection_failure(exc: DBAPIError) -> bool:
    msg = str(exc.orig).lower()
    return bool(exc.connection_invalidated) or any(w in msg for w in _CONNECTION_WORDS)


def _is_locked(exc: OperationalError) -> bool:
    msg = str(exc.orig).lower()
    return "database is locked" in msg or "database table is locked" in msg


def _optional_float(value: Any) -> float | None:
    """``value`` as a float, ``None`` for a missing or NaN one (a nullable column)."""
    if value is None:
        return None
    v = float(value)
    return None if math.isnan(v) else v


def _ts(value: str | None) -> datetime | None:
    return None if value is None else pd.Timestamp(value).to_pydatetime()


class Store:
    """Plans and forecasts in a database.

    Parameters
    ----------
    url
        SQLAlchemy URL. SQLite parent folders are created.

    Raises
    ------
    BackendUnavailableError
        The database cannot be reached (the message names the URL without its password).
    """

    def __init__(self, url: str, busy_timeout_s: float = SQLITE_BUSY_TIMEOUT_S,
                 locked_retries: int = LOCKED_RETRIES,
                 locked_backoff_s: float = LOCKED_BACKOFF_S) -> None:
        self.url = url
        self.locked_retries = locked_retries
        self.locked_backoff_s = locked_backoff_s
        self.busy_timeout_s = busy_timeout_s
        self._sqlite_file: Path | None = None
        connect_args: dict[str, Any] = {}
        if url.startswith("sqlite:///") and url != "sqlite:///:memory:":
            self._sqlite_file = Path(url.removeprefix("sqlite:///").split("?")[0])
            try:
                self._sqlite_file.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise BackendUnavailableError(
                    f"the store folder {self._sqlite_file.parent} cannot be created "
                    f"({exc.strerror or exc}); set CARBONSCHED_DATABASE_URL to a writable place, "
                    "e.g. sqlite:////tmp/carbonsched.db") from exc
            connect_args["timeout"] = busy_timeout_s
        # neither the parser's words nor a chained exception is shown: they may hold the
        # password, whole or in part (a port that is not a number is a piece of it)
        try:
            parsed = make_url(url)
        except (ArgumentError, ValueError, TypeError) as exc:
            raise InputError(f"database URL {url_without_secrets(url)} is not usable "
                             f"({type(exc).__name__}); {_URL_FIX}") from None
        if unescaped_at(url):
            raise InputError(f"database URL {parsed.drivername}://… is not usable: "
                             f"{UNESCAPED_AT} in CARBONSCHED_DATABASE_URL")
        try:
            self.engine: Engine = create_engine(url, future=True, connect_args=connect_args)
        except ModuleNotFoundError as exc:  # the driver: psycopg2 comes with [service]
            raise missing_extra(exc.name or "psycopg2",
                                f"a {parsed.drivername} database URL") from exc
        except (SQLAlchemyError, ImportError, ValueError, TypeError) as exc:
            shown = url_without_secrets(url)
            said = str(exc).replace(url, shown)
            if parsed.password:
                said = said.replace(str(parsed.password), "***")
            raise InputError(f"database URL {shown} is not usable "
                             f"({type(exc).__name__}: {said}); {_URL_FIX}") from None
        if self.engine.dialect.name == "sqlite":
            # the store's own busy timeout (its bounded "locked" retries build on it)
            enable_sqlite_wal(self.engine, busy_timeout_s)
        self.migrate()

    def _safe_url(self) -> str:
        return database_label(self.engine.url)

    def _unreachable(self, exc: OperationalError) -> BackendUnavailableError:
        if _is_locked(exc):
            return self._locked(exc, "opening the store")
        return StoreUnavailableError(self._safe_url(), "opening the store",
                                     " ".join(str(exc.orig).split()))

    def _locked(self, exc: OperationalError, doing: str) -> StoreLockedError:
        return StoreLockedError(
            f"database {self._safe_url()} is locked by another process ({doing} waited "
            f"{self.locked_retries + 1} times, {' '.join(str(exc.orig).split())}); the plan "
            "file is intact (write it with --out) — retry when the other carbonsched run "
            "has finished")

    def _retry_locked(self, fn: Callable[[], _T], doing: str) -> _T:
        """Run ``fn``; on SQLite's "database is locked" wait and retry, bounded."""
        pause = self.locked_backoff_s
        for attempt in range(self.locked_retries + 1):
            try:
                return fn()
            except OperationalError as exc:
                if not _is_locked(exc):
                    raise
                if attempt == self.locked_retries:
                    raise self._locked(exc, doing) from exc
                time.sleep(pause)
                pause *= 2
        raise AssertionError("unreachable")  # pragma: no cover

    @contextlib.contextmanager
    def _migration_lock(self) -> Iterator[None]:
        """Serialise migrations across processes next to a SQLite file (PostgreSQL: no-op).

        The lock is an exclusive ``flock`` on ``<file>.migrate.lock``, removed by its holder
        before it lets go, so no empty file stays beside the store. A process that waited on
        a file its holder then removed holds a lock on nothing: it opens the path again until
        the file it locked is the one at the path (same device and inode). The holder removes
        the path only while it is still its own file, and never fails for the removal. On
        PostgreSQL :meth:`migrate` takes a transaction-level advisory lock instead.
        """
        if self._sqlite_file is None:
            yield
            return
        import fcntl

        lock_path = self._sqlite_file.with_name(self._sqlite_file.name + ".migrate.lock")

        def same_file(fh: Any) -> bool:
            try:
                at_path = os.stat(lock_path)
            except FileNotFoundError:
                return False
            held = os.fstat(fh.fileno())
            return (at_path.st_dev, at_path.st_ino) == (held.st_dev, held.st_ino)

        while True:
            fh = open(lock_path, "a")  # noqa: SIM115 - held across the yield, closed below
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
                if same_file(fh):
                    break
            except BaseException:
                fh.close()
                raise
            fh.close()              # its holder removed it while we waited: take the new one
        try:
            yield
        finally:
            try:
                with contextlib.suppress(OSError):
                    if same_file(fh):
                        os.unlink(lock_path)
            finally:
                fh.close()          # closing releases the flock

    def _at_head(self) -> bool:
        head = ScriptDirectory(str(MIGRATIONS)).get_current_head()
        with self.engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision() == head

    @contextlib.contextmanager
    def _migration_engine(self) -> Iterator[Engine]:
        """The engine a migration runs on: a SQLite file's own, whose DDL is transactional.

        SQLite files get an engine of one connection for the migration
        (:func:`~carbonsched.store.sqlite.transactional_ddl`), disposed after it; PostgreSQL
        (transactional DDL already) and an in-memory SQLite database (one connection, gone with
        the process) migrate on the store's engine.
        """
        if self._sqlite_file is None:
            yield self.engine
            return
        engine = create_engine(self.engine.url, future=True, poolclass=NullPool,
                               connect_args={"timeout": self.busy_timeout_s})
        enable_sqlite_wal(engine, self.busy_timeout_s)
        transactional_ddl(engine)
        try:
            yield engine
        finally:
            engine.dispose()

    def _schema_error(self, exc: DBAPIError, start: str | None,
                      applied: list[str]) -> StoreSchemaError:
        """What a migration step that the schema refused is said as (not "unreachable")."""
        script = ScriptDirectory(str(MIGRATIONS))
        pending = [r.revision for r in reversed(list(
            script.iterate_revisions("heads", start or "base"))) if r.revision != start]
        failed = pending[len(applied)] if len(applied) < len(pending) else "?"
        at = start or "base (an empty schema)"
        detail = " ".join(str(exc.orig).split())[:300]
        return StoreSchemaError(
            f"database {self._safe_url()}: the schema cannot be migrated from revision {at} "
            f"to {script.get_current_head()}: revision {failed} failed ({type(exc.orig).__name__}"
            f": {detail}); nothing of the upgrade was kept, the store is still at revision "
            f"{at}. Its schema does not match that revision (a change made by hand, or a "
            "migration cut short in an older carbonsched, which kept part of it): restore the "
            "database from a backup, or undo the stray change the error names (e.g. drop the "
            "column or table), then start carbonsched again (docs/reliability.md, "
            "Schema migrations)")

    def migrate(self) -> None:
        """Bring the schema to the newest Alembic revision, safely from many processes at once.

        A store that is already at the head revision is left alone (no write, no lock).
        Otherwise the migration runs under a lock that serialises it across processes — an
        exclusive ``flock`` on ``<file>.migrate.lock`` next to a SQLite file, a transaction-level
        advisory lock (``pg_advisory_xact_lock``) on PostgreSQL — and re-reads the revision
        once it holds the lock, so the processes that waited find the schema at head.

        Raises
        ------
        BackendUnavailableError
            The database cannot be reached (a real connection failure).
        StoreLockedError
            A SQLite store stayed locked by another process through every retry.
        StoreSchemaError
            A migration step failed on the schema it found (the store stays at its revision).
        """
        cfg = Config()
        cfg.set_main_option("script_location", str(MIGRATIONS))

        def upgrade() -> None:
            if self._at_head():
                return
            with self._migration_lock(), self._migration_engine() as engine, \
                    engine.begin() as conn:
                if conn.dialect.name == "postgresql":
                    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"),
                                 {"k": MIGRATION_LOCK_KEY})
                start = MigrationContext.configure(conn).get_current_revision()
                applied: list[str] = []
                cfg.attributes["connection"] = conn
                cfg.attributes["on_version_apply"] = (
                    lambda *, step, **_kw: applied.append(step.up_revision_id))
                try:
                    command.upgrade(cfg, "head")
                except DBAPIError as exc:
                    if isinstance(exc, OperationalError) and _is_locked(exc) \
                            or _connection_failure(exc):
                        raise
                    raise self._schema_error(exc, start, applied) from exc

        try:
            self._retry_locked(upgrade, "migrating the schema")
        except OperationalError as exc:
            raise self._unreachable(exc) from exc

    def save_plan(self, plan: dict[str, Any], forecasts: pd.DataFrame | None = None) -> None:
        """Store a plan document (the ``--out`` JSON) and the forecasts it used.

        Parameters
        ----------
        plan
            The plan document (keys as written by ``carbonsched plan --out``).
        forecasts
            Long frame with columns site, signal, model, issued_at, ts, mean, lo_80, hi_80,
            lo_95, hi_95; optional.
        """
        try:
            self._retry_locked(lambda: self._save_plan(plan, forecasts),
                               f"recording plan {plan['plan_id']}")
        except OperationalError as exc:
            raise StoreUnavailableError(
                self._safe_url(), f"recording plan {plan['plan_id']}",
                " ".join(str(exc.orig).split()), "the plan itself is intact (write it with "
                f"--out); check {store_check(self._safe_url())}, then plan again") from exc
        except SQLAlchemyError as exc:
            raise BackendError(
                f"database {self._safe_url()} refused plan {plan['plan_id']}: "
                f"{' '.join(str(exc).split())[:300]}") from exc

    def _save_plan(self, plan: dict[str, Any], forecasts: pd.DataFrame | None) -> None:
        pid = plan["plan_id"]
        with Session(self.engine) as s, s.begin():
            # children first: SQLite enforces no ON DELETE CASCADE without a PRAGMA
            for table in (ForecastRow, InferenceRow, PlacementRow, PlanRow):
                s.execute(delete(table).where(table.plan_id == pid))
            s.add(PlanRow(
                plan_id=pid, date=plan["date"], catalog=plan["catalog"],
                created_at=datetime.now(UTC), signal_quality=plan["signal_quality"],
                solver_name=plan["solver"]["name"], solver_status=plan["solver"]["status"],
                mip_gap=plan["solver"].get("mip_gap"), solve_seconds=plan["solver"]["seconds"],
                energy_kwh=plan["totals"]["energy_kwh"],
                emissions_kg=plan["totals"]["emissions_kg"],
                baseline_emissions_kg=plan["totals"]["baseline_emissions_kg"],
                plan_json=json.dumps(plan)))
            s.flush()
            for p in plan["placements"]:
                s.add(PlacementRow(plan_id=pid, job_id=p["job_id"], state="Planned",
                                   reason="Placed", site=p["site"], start=_ts(p["start"]),
                                   end=_ts(p["end"]), gpu_type=p["gpu_type"], gpus=p["gpus"],
                                   energy_kwh=p["energy_kwh"], emissions_kg=p["emissions_kg"]))
            for u in plan["unplaced"]:
                s.add(PlacementRow(plan_id=pid, job_id=u["job_id"], state="Pending",
                                   reason=u["reason"]))
            for i in plan["inference"]:
                s.add(InferenceRow(plan_id=pid, area=i["area"], hour=_ts(i["hour"]),
                                   site=i["site"], gpu_type=i.get("gpu_type", ""),
                                   gpus=i["gpus"], energy_kwh=i.get("energy_kwh", 0.0),
                                   emissions_kg=i.get("emissions_kg", 0.0)))
            if forecasts is not None and len(forecasts):
                s.add_all(ForecastRow(
                    plan_id=pid, site=r.site, signal=r.signal, model=r.model,
                    issued_at=pd.Timestamp(r.issued_at).to_pydatetime(),
                    ts=pd.Timestamp(r.ts).to_pydatetime(), mean=float(r.mean),
                    lo_80=float(r.lo_80), hi_80=float(r.hi_80), lo_95=float(r.lo_95),
                    hi_95=float(r.hi_95), p_surplus=_optional_float(getattr(r, "p_surplus", None)))
                    for r in forecasts.itertuples(index=False))

    def get_plan(self, plan_id: str) -> dict[str, Any]:
        """The stored plan document.

        Raises
        ------
        InputError
            No plan with that id.
        """
        with Session(self.engine) as s:
            row = s.get(PlanRow, plan_id)
            if row is None:
                raise InputError(f"no plan {plan_id!r} in {self._safe_url()}")
            return json.loads(row.plan_json)

    def list_plans(self, date: str | None = None, limit: int | None = None
                   ) -> list[dict[str, Any]]:
        """Summaries of stored plans, newest first (optionally for one date, at most ``limit``)."""
        q = select(PlanRow).order_by(PlanRow.created_at.desc(), PlanRow.plan_id)
        if date:
            q = q.where(PlanRow.date == date)
        if limit is not None:
            q = q.limit(limit)
        with Session(self.engine) as s:
            return [dict(plan_id=r.plan_id, date=r.date, catalog=r.catalog,
                         signal_quality=r.signal_quality, solver_name=r.solver_name,
                         solver_status=r.solver_status, emissions_kg=r.emissions_kg,
                         baseline_emissions_kg=r.baseline_emissions_kg,
                         created_at=r.created_at.isoformat())
                    for r in s.scalars(q)]

    def resolve_plan_id(self, ref: str) -> str:
        """The full id of the plan ``ref`` names: ``latest``, the id itself, or a unique prefix.

        The one resolver of plan references: ``plans show``, ``dispatch``, ``status`` and
        ``report`` all call it. ``latest`` is the most recently recorded plan; ``plan`` prints
        the first 12 characters of an id in its header and, like a git commit, any prefix of
        at least :data:`PLAN_ID_MIN_PREFIX` characters that matches one plan names it.

        Raises
        ------
        InputError
            No plan has that id or prefix (or ``latest`` in an empty store), the prefix is
            shorter than :data:`PLAN_ID_MIN_PREFIX`, or several plans start with it (the
            message lists them).
        """
        ref = ref.strip()
        if ref == "latest":
            return self.latest_plan_id()
        with Session(self.engine) as s:
            if s.get(PlanRow, ref) is not None:
                return ref
            if len(ref) < PLAN_ID_MIN_PREFIX:
                raise InputError(f"no plan {ref!r} in {self._safe_url()} (a shortened id needs "
                                 f"at least {PLAN_ID_MIN_PREFIX} characters)")
            like = ref.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            ids = s.scalars(select(PlanRow.plan_id).where(PlanRow.plan_id.like(like, escape="\\"))
                            .order_by(PlanRow.plan_id).limit(6)).all()
        if not ids:
            raise InputError(f"no plan {ref!r} in {self._safe_url()}")
        if len(ids) > 1:
            shown = ", ".join(ids[:5]) + (", ..." if len(ids) > 5 else "")
            raise InputError(f"{ref!r} names several plans ({shown}); give more of the id")
        return str(ids[0])

    def latest_plan_id(self) -> str:
        """Id of the most recently recorded plan.

        Raises
        ------
        InputError
            The store holds no plan yet.
        """
        rows = self.list_plans(limit=1)
        if not rows:
            raise InputError(f"no plan recorded yet in {self._safe_url()}; run `carbonsched "
                             "plan` first")
        return str(rows[0]["plan_id"])

    def placements(self, plan_id: str) -> pd.DataFrame:
        """Job rows (state, reason, site, start, end, ...) of one plan."""
        with Session(self.engine) as s:
            rows = s.scalars(select(PlacementRow).where(PlacementRow.plan_id == plan_id)).all()
            return pd.DataFrame([{c: getattr(r, c) for c in
                                  ("job_id", "state", "reason", "site", "start", "end",
                                   "gpu_type", "gpus", "energy_kwh", "emissions_kg")}
                                 for r in rows])

    def forecasts(self, plan_id: str) -> pd.DataFrame:
        """Forecast rows of one plan."""
        with Session(self.engine) as s:
            rows = s.scalars(select(ForecastRow).where(ForecastRow.plan_id == plan_id)).all()
            return pd.DataFrame([{c: getattr(r, c) for c in
                                  ("site", "signal", "model", "issued_at", "ts", "mean",
                                   "lo_80", "hi_80", "lo_95", "hi_95", "p_surplus")}
                                 for r in rows])
