"""The service's use of the store: hashed tokens, submitted jobs, run records, the cron leader.

:class:`ServiceStore` wraps a :class:`~carbonsched.store.Store` (same engine, same migrations).
Reservations are written by :meth:`ServiceStore.reserve_job` only: under the lock row of the
plan's site (``booking_ledger``), after the caller's fit check against the reservations
committed there, so the database is the one arbiter of capacity across threads, processes and
replicas.
Run records are keyed by planning date: claiming a date is an ``INSERT`` that the primary key
lets succeed once, whichever replica or process tries, so the pipeline is idempotent by
planning date on SQLite and PostgreSQL alike. :class:`LeaderLock` elects the one replica that
runs the cron (a session-level PostgreSQL advisory lock; SQLite is single-node and always
leads).
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import insert, select, text, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from carbonsched.errors import InputError
from carbonsched.limits import identifier_problem
from carbonsched.store import Store
from carbonsched.store.base import check_identifiers
from carbonsched.store.models import PlacementRow, PlanRow
from carbonsched.store.service_models import BookingLedgerRow, RunRow, ServiceJobRow, TokenRow

ROLES = ("read", "submit", "admin")
"""Token roles, each including the ones before it (admin can submit, submit can read)."""

TOKEN_PREFIX = "cst_"

LEADER_LOCK_KEY = 0x63617262_6F6E
"""PostgreSQL advisory lock key of the cron leader ("carbon" in ASCII hex)."""


def hash_token(token: str) -> str:
    """SHA-256 hex digest of a token (tokens carry 256 random bits, so no salt or KDF is needed)."""
    return hashlib.sha256(token.encode()).hexdigest()


def role_allows(have: str, need: str) -> bool:
    """Whether role ``have`` includes role ``need`` (``read`` < ``submit`` < ``admin``)."""
    return ROLES.index(have) >= ROLES.index(need)


class DuplicateJobError(InputError):
    """A job id that is already known to the service."""

    def __init__(self, job_id: str) -> None:
        self.job_id = job_id
        super().__init__(f"job {job_id!r} already exists; job ids must be unique")


class ServiceStore:
    """Tokens, submitted jobs, run records and plan look-ups for the service.

    Parameters
    ----------
    store
        The migrated store.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self.engine = store.engine

    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgresql`` (or another SQLAlchemy dialect name)."""
        return self.engine.dialect.name

    def safe_url(self) -> str:
        """The database URL without its password."""
        return self.engine.url.render_as_string(hide_password=True)

    def ping(self) -> None:
        """Run ``SELECT 1`` (raises SQLAlchemy's error when the database is down)."""
        with self.engine.connect() as conn:
            conn.execute(text("SELECT 1"))

    # --- tokens ---------------------------------------------------------------------------
    def create_token(self, role: str, now: datetime, name: str = "",
                     expires_at: datetime | None = None) -> tuple[str, str]:
        """Mint a token; only its hash is stored.

        Parameters
        ----------
        role
            ``read``, ``submit`` or ``admin``.
        now
            Creation time (tz-aware).
        name
            A label, shown by :meth:`tokens`.
        expires_at
            The token is valid strictly before this instant (tz-aware); ``None``: no expiry.

        Returns
        -------
        (token_id, token)
            The token is shown once and never stored.

        Raises
        ------
        InputError
            Unknown role, or an expiry that is naive or not after ``now``.
        """
        if role not in ROLES:
            raise InputError(f"unknown role {role!r}; use one of {', '.join(ROLES)}")
        if expires_at is not None:
            if expires_at.tzinfo is None:
                raise InputError(f"token expiry {expires_at.isoformat()} has no time zone; "
                                 "give it with an offset, e.g. 2026-01-01T00:00:00Z")
            if expires_at <= now:
                raise InputError(f"token expiry {expires_at.isoformat()} is not after now "
                                 f"({now.isoformat()}); give a later time")
        token_id = secrets.token_hex(8)
        token = f"{TOKEN_PREFIX}{secrets.token_urlsafe(32)}"
        with Session(self.engine) as s, s.begin():
            s.add(TokenRow(token_id=token_id, token_sha256=hash_token(token), role=role,
                           name=name, created_at=now, expires_at=expires_at))
        return token_id, token

    def token_record(self, token: str, now: datetime) -> dict[str, Any] | None:
        """A token's ``token_id``, ``role`` and ``expires_at`` if it is valid at ``now``.

        Valid: stored, not revoked, and ``now`` strictly before its expiry (a token expiring
        exactly now is refused). ``None`` otherwise.
        """
        with Session(self.engine) as s:
            row = s.scalars(select(TokenRow).where(
                TokenRow.token_sha256 == hash_token(token))).first()
            if row is None or row.revoked_at is not None:
                return None
            if row.expires_at is not None and now >= row.expires_at:
                return None
            return {"token_id": row.token_id, "role": row.role, "expires_at": row.expires_at}

    def role_for_token(self, token: str, now: datetime | None = None) -> str | None:
        """The role of a valid token (:meth:`token_record`; ``now`` default the wall clock)."""
        rec = self.token_record(token, now or datetime.now(UTC))
        return None if rec is None else rec["role"]

    def tokens(self) -> list[dict[str, Any]]:
        """Every stored token (never the token itself), oldest first.

        Each dict has ``token_id``, ``role``, ``name``, ``created_at``, ``expires_at`` and
        ``revoked_at``.
        """
        with Session(self.engine) as s:
            return [{c: getattr(r, c) for c in ("token_id", "role", "name", "created_at",
                                                 "expires_at", "revoked_at")}
                    for r in s.scalars(select(TokenRow).order_by(TokenRow.created_at,
                                                                 TokenRow.token_id))]

    def revoke_token(self, token_id: str, now: datetime) -> dict[str, Any]:
        """Revoke a token by its id (idempotent: a revoked token keeps its first revocation).

        Returns
        -------
        dict
            The token's row as :meth:`tokens` gives it.

        Raises
        ------
        KeyError
            No token has this id.
        """
        with Session(self.engine) as s, s.begin():
            s.execute(update(TokenRow).where(TokenRow.token_id == token_id,
                                             TokenRow.revoked_at.is_(None))
                      .values(revoked_at=now))
        row = next((t for t in self.tokens() if t["token_id"] == token_id), None)
        if row is None:
            raise KeyError(token_id)
        return row

    # --- plans ----------------------------------------------------------------------------
    def latest_plan_id(self, catalog: str) -> str | None:
        """Id of the newest plan of ``catalog``."""
        with Session(self.engine) as s:
            return s.scalars(select(PlanRow.plan_id).where(PlanRow.catalog == catalog)
                             .order_by(PlanRow.created_at.desc()).limit(1)).first()

    def plan_for_date(self, catalog: str, date: str) -> dict[str, Any] | None:
        """The newest plan document of ``catalog`` for ``date`` (``YYYY-MM-DD``)."""
        with Session(self.engine) as s:
            row = s.scalars(select(PlanRow).where(PlanRow.catalog == catalog,
                                                  PlanRow.date == date)
                            .order_by(PlanRow.created_at.desc()).limit(1)).first()
            return None if row is None else json.loads(row.plan_json)

    def plan_job(self, plan_id: str, job_id: str) -> dict[str, Any] | None:
        """A job's row in a plan (state, reason, site, start, end), or ``None``."""
        with Session(self.engine) as s:
            r = s.scalars(select(PlacementRow).where(PlacementRow.plan_id == plan_id,
                                                     PlacementRow.job_id == job_id)).first()
            if r is None:
                return None
            return {c: getattr(r, c) for c in ("job_id", "state", "reason", "site", "start",
                                                "end", "gpu_type", "gpus", "energy_kwh",
                                                "emissions_kg", "plan_id")}

    # --- submitted jobs ---------------------------------------------------------------------
    def add_jobs(self, rows: list[dict[str, Any]]) -> None:
        """Insert submitted jobs (all or none).

        Raises
        ------
        DuplicateJobError
            A job id exists already.
        """
        for r in rows:  # before any query: PostgreSQL cannot even compare a NUL
            check_identifiers(r)
        ids = [r["job_id"] for r in rows]
        with Session(self.engine) as s, s.begin():
            known = s.scalars(select(ServiceJobRow.job_id).where(
                ServiceJobRow.job_id.in_(ids))).first()
            if known is not None:
                raise DuplicateJobError(known)
            s.add_all(ServiceJobRow(**r) for r in rows)
            try:
                s.flush()
            except IntegrityError as exc:
                raise DuplicateJobError(ids[0]) from exc

    def reserve_job(self, row: dict[str, Any], now: datetime,
                    fits: Callable[[list[dict[str, Any]]], bool],
                    window: tuple[datetime, datetime] | None = None
                    ) -> tuple[bool, list[dict[str, Any]]]:
        """Insert a reserved job if it still fits: the database is the arbiter of capacity.

        One transaction: take the lock row of ``(row["plan_id"], row["site"])`` in
        ``booking_ledger`` (PostgreSQL: an ``INSERT ... ON CONFLICT DO UPDATE`` of it, which
        holds its row lock until commit, https://www.postgresql.org/docs/current/sql-insert.html;
        SQLite: ``BEGIN IMMEDIATE``, its one write lock, with ``synchronous=FULL`` so the commit
        survives power loss), read the reservations committed at that site of that plan in
        ``window``, call ``fits(committed)`` and
        insert ``row`` only if it answers ``True``. Whoever holds the lock sees every
        reservation committed before it, on any replica, so no two can book the same free
        capacity; the reservation exists once this returns ``True`` (committed), never
        before.

        Parameters
        ----------
        row
            The job's ``service_jobs`` columns (``plan_id``, ``site``, ``start``, ``end``,
            ``reserved=True``, ...).
        now
            The ledger's update time.
        fits
            The capacity check, given the committed reservations (``job_id``, ``site``,
            ``start``, ``end``, ``spec``).
        window
            ``(start, end)`` of the hours the new booking takes: only reservations overlapping
            it are read (``None``: every reservation at the site).

        Returns
        -------
        (booked, committed)
            Whether ``row`` was inserted, and the reservations committed at the site (in the
            window) before it.

        Raises
        ------
        DuplicateJobError
            The job id exists already (nothing is written).
        """
        check_identifiers(row)  # the ORM's check (store.base), for this Core insert
        plan_id, site = row["plan_id"], row["site"]
        key = {"plan_id": plan_id, "site": site}
        is_sqlite = self.dialect == "sqlite"
        with self.engine.connect() as conn:
            if is_sqlite:
                conn.exec_driver_sql("PRAGMA synchronous=FULL")
                conn.exec_driver_sql("BEGIN IMMEDIATE")
            try:
                # one round trip: create the site's lock row or take it (an upsert locks the
                # row on PostgreSQL until commit), counting this booking (undone on rollback)
                upsert = (sqlite.insert if is_sqlite else postgresql.insert)(
                    BookingLedgerRow).values(**key, bookings=1, updated_at=now)
                conn.execute(upsert.on_conflict_do_update(
                    index_elements=["plan_id", "site"],
                    set_={"bookings": BookingLedgerRow.bookings + 1, "updated_at": now}))
                q = select(*(getattr(ServiceJobRow, c) for c in _BOOKED_COLUMNS)).where(
                    ServiceJobRow.plan_id == plan_id, ServiceJobRow.site == site,
                    ServiceJobRow.reserved.is_(True))
                if window is not None:   # only what shares an hour with the new booking
                    q = q.where(ServiceJobRow.start < window[1], ServiceJobRow.end > window[0])
                committed = [_booked_dict(r) for r in conn.execute(q)]
                if not fits(committed):
                    conn.rollback()
                    return False, committed
                conn.execute(insert(ServiceJobRow).values(**row))  # a duplicate id: 409
                conn.commit()
            except IntegrityError as exc:
                conn.rollback()
                raise DuplicateJobError(row["job_id"]) from exc
            except BaseException:
                conn.rollback()
                raise
            finally:
                if is_sqlite:
                    conn.exec_driver_sql("PRAGMA synchronous=NORMAL")
        return True, committed

    def get_job(self, job_id: str) -> dict[str, Any] | None:
        """A submitted job as a dict, or ``None`` (also for an id the grammar refuses)."""
        if identifier_problem(job_id, "job id") is not None:
            return None  # no such job can exist; PostgreSQL refuses to compare a NUL
        with Session(self.engine) as s:
            r = s.get(ServiceJobRow, job_id)
            return None if r is None else _job_dict(r)

    def jobs(self, states: tuple[str, ...] | None = None,
             plan_id: str | None = None, site: str | None = None,
             reserved: bool | None = None) -> list[dict[str, Any]]:
        """Submitted jobs, filtered by ``states``, ``plan_id``, ``site`` and ``reserved``."""
        q = select(ServiceJobRow)
        if states:
            q = q.where(ServiceJobRow.state.in_(states))
        if plan_id:
            q = q.where(ServiceJobRow.plan_id == plan_id)
        if site:
            q = q.where(ServiceJobRow.site == site)
        if reserved is not None:
            q = q.where(ServiceJobRow.reserved.is_(reserved))
        with Session(self.engine) as s:
            return [_job_dict(r) for r in s.scalars(q.order_by(ServiceJobRow.submitted_at))]

    def update_job(self, job_id: str, **values: Any) -> None:
        """Set columns of a submitted job."""
        with Session(self.engine) as s, s.begin():
            s.execute(update(ServiceJobRow).where(ServiceJobRow.job_id == job_id)
                      .values(**values))

    # --- run records --------------------------------------------------------------------------
    def claim_run(self, planning_date: str, local_day: str, issued_at: datetime, trigger: str,
                  replica: str, now: datetime, stale_after: timedelta) -> bool:
        """Claim the run of ``planning_date``; ``False`` when it exists already.

        A run still ``running`` after ``stale_after`` (its process died) is reclaimed once.
        """
        try:
            with Session(self.engine) as s, s.begin():
                s.add(RunRow(planning_date=planning_date, local_day=local_day,
                             issued_at=issued_at, trigger=trigger, replica=replica,
                             status="running", started_at=now, dispatch="", error=""))
            return True
        except IntegrityError:
            pass
        with Session(self.engine) as s, s.begin():
            res = s.execute(update(RunRow).where(
                RunRow.planning_date == planning_date, RunRow.status == "running",
                RunRow.started_at < now - stale_after,
            ).values(status="running", replica=replica, trigger=trigger, started_at=now,
                     attempts=RunRow.attempts + 1,
                     error="reclaimed: the previous attempt did not finish"))
            return bool(res.rowcount)

    def finish_run(self, planning_date: str, now: datetime, status: str, **values: Any) -> None:
        """Record the outcome of a claimed run."""
        with Session(self.engine) as s, s.begin():
            s.execute(update(RunRow).where(RunRow.planning_date == planning_date)
                      .values(status=status, finished_at=now, **values))

    def get_run(self, planning_date: str) -> dict[str, Any] | None:
        """The run record of ``planning_date``, or ``None``."""
        with Session(self.engine) as s:
            r = s.get(RunRow, planning_date)
            return None if r is None else _run_dict(r)

    def runs(self, limit: int = 100) -> list[dict[str, Any]]:
        """Run records, newest planning date first."""
        with Session(self.engine) as s:
            return [_run_dict(r) for r in s.scalars(
                select(RunRow).order_by(RunRow.planning_date.desc()).limit(limit))]


_BOOKED_COLUMNS = ("job_id", "site", "start", "end", "spec_json")
"""What the booking check reads of each committed reservation."""


def _booked_dict(r: Any) -> dict[str, Any]:
    return {"job_id": r.job_id, "site": r.site, "start": r.start, "end": r.end,
            "spec": json.loads(r.spec_json)}


def _job_dict(r: Any) -> dict[str, Any]:
    return {c: getattr(r, c) for c in (
        "job_id", "tenant", "state", "reason", "detail", "plan_id", "site", "start", "end",
        "energy_kwh", "emissions_kg", "reserved", "submitted_at", "updated_at")} | {
        "spec": json.loads(r.spec_json)}


def _run_dict(r: RunRow) -> dict[str, Any]:
    return {c: getattr(r, c) for c in (
        "planning_date", "local_day", "issued_at", "trigger", "replica", "status", "started_at",
        "finished_at", "plan_id", "solver_status", "dispatch", "error", "attempts")}


class LeaderLock:
    """Leadership among replicas that share one database.

    PostgreSQL: a session-level advisory lock (``pg_try_advisory_lock``) held on a dedicated
    connection for as long as this replica leads; it is released when the connection closes,
    so a dead replica's leadership passes to the next one that tries
    (https://www.postgresql.org/docs/current/explicit-locking.html#ADVISORY-LOCKS).
    SQLite: one node, so it always leads.
    """

    def __init__(self, engine: Engine, key: int = LEADER_LOCK_KEY) -> None:
        self.engine = engine
        self.key = key
        self._conn: Connection | None = None
        self.single_node = engine.dialect.name != "postgresql"

    @property
    def held(self) -> bool:
        """Whether this replica leads now."""
        return self.single_node or self._conn is not None

    def try_acquire(self) -> bool:
        """Take the lead if nobody holds it; ``True`` while this replica leads."""
        if self.held:
            return True
        conn = self.engine.connect()
        try:
            got = bool(conn.execute(text("SELECT pg_try_advisory_lock(:k)"),
                                    {"k": self.key}).scalar())
            conn.commit()
        except Exception:
            conn.close()
            raise
        if got:
            self._conn = conn
        else:
            conn.close()
        return got

    def release(self) -> None:
        """Give up the lead (closing the session releases the lock)."""
        if self._conn is not None:
            try:
                self._conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": self.key})
                self._conn.commit()
            finally:
                self._conn.close()
                self._conn = None
