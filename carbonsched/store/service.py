"""The service's use of the store: hashed tokens, submitted jobs, run records, the cron leader.

:class:`ServiceStore` wraps a :class:`~carbonsched.store.Store` (same engine, same migrations).
Reservations are written by :meth:`ServiceStore.reserve_job` only: under the lock row of the
plan's site (``booking_ledger``), after the caller's fit check against the reservations
committed there, so the database is the one arbiter of capacity across threads, processes and
replicas.
Run records are keyed by issue time (:func:`run_key`; a daily run is issued at its planning
date's 00:00 UTC, so it is one per date): claiming an issue time is an ``INSERT`` that the
primary key lets succeed once, whichever replica or process tries, so the pipeline is idempotent
by issue time on SQLite and PostgreSQL alike (several rolling runs a day each once). A claimed
record carries a lease (``owner``, ``heartbeat_at``, ``lease_expires_at``) that its owner renews
while it runs (:meth:`ServiceStore.renew_run`); a record still ``running`` whose lease expired
(its process died) is taken over by the next claim. :class:`LeaderLease` elects the one replica
that runs the cron and the dispatch loops, with a lease of the same kind in ``service_leases``.

Lease times are the database server's clock (``now()`` on PostgreSQL; the host's clock on
SQLite, which is one host), never the service's clock, which ``--as-of`` may pin; tests inject
a clock instead (``lease_clock``).

Every method maps a database that cannot be reached or that drops the connection to
:class:`~carbonsched.errors.StoreUnavailableError`, which names the database (URL without its
password) and what was being done; SQLAlchemy's own errors do not leave this module for that.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import logging
import secrets
import time
from collections.abc import Callable, Collection
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from sqlalchemy import delete, insert, select, text, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError, IntegrityError, InterfaceError, OperationalError
from sqlalchemy.orm import Session

from carbonsched.config import database_label
from carbonsched.errors import InputError, StoreUnavailableError
from carbonsched.limits import identifier_problem
from carbonsched.store import Store
from carbonsched.store.base import check_identifiers
from carbonsched.store.models import PlacementRow, PlanRow
from carbonsched.store.service_models import (
    BookingLedgerRow,
    LeaseRow,
    RunRow,
    ServiceJobRow,
    TokenRow,
)

log = logging.getLogger("carbonsched.store.service")

LeaseClock = Callable[[], datetime]
"""Returns the lease time "now" (tz-aware); ``None`` in its place means the database's clock."""

_F = TypeVar("_F", bound=Callable[..., Any])


def is_outage(exc: BaseException) -> bool:
    """Whether a SQLAlchemy error means the database cannot be reached or dropped the connection.

    ``OperationalError`` (connection refused, server closed the connection, SQLite cannot open
    its file), ``InterfaceError`` (a closed connection used), or any DBAPI error SQLAlchemy
    flagged ``connection_invalidated``
    (https://docs.sqlalchemy.org/en/20/core/pooling.html#dealing-with-disconnects).
    """
    return isinstance(exc, OperationalError | InterfaceError) or (
        isinstance(exc, DBAPIError) and bool(exc.connection_invalidated))


def unavailable(engine: Engine, doing: str, exc: BaseException) -> StoreUnavailableError:
    """The :class:`StoreUnavailableError` for ``exc`` raised while ``doing``."""
    orig = getattr(exc, "orig", None) or exc
    detail = " ".join(str(orig).split())[:300] or type(orig).__name__
    return StoreUnavailableError(database_label(engine.url), doing, detail)


def store_call(doing: str) -> Callable[[_F], _F]:
    """Decorate a method of an object with ``engine``: outages become the project's error.

    A database outage (:func:`is_outage`) raised by the method becomes
    :class:`StoreUnavailableError` saying ``doing``, formatted with the call's arguments.
    """

    def deco(fn: _F) -> _F:
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return fn(self, *args, **kwargs)
            except DBAPIError as exc:
                if not is_outage(exc):
                    raise
                bound = sig.bind(self, *args, **kwargs).arguments
                raise unavailable(self.engine, doing.format(**bound), exc) from exc

        wrapper.store_doing = doing  # type: ignore[attr-defined]  # checked by a test
        return wrapper  # type: ignore[return-value]

    return deco


def database_now(session: Session, lease_clock: LeaseClock | None = None) -> datetime:
    """The lease clock's "now": ``lease_clock()``, else the database server's time.

    PostgreSQL: ``now()`` (the transaction's start, one clock for every replica); SQLite (one
    host): the host's clock in UTC.
    """
    if lease_clock is not None:
        now = lease_clock()
    elif session.get_bind().dialect.name == "postgresql":
        now = session.execute(text("SELECT now()")).scalar_one()
    else:
        now = datetime.now(UTC)
    if now.tzinfo is None:
        raise ValueError(f"the lease clock returned naive {now!r}; it must be tz-aware")
    return now.astimezone(UTC)


ROLES = ("read", "submit", "admin")
"""Token roles, each including the ones before it (admin can submit, submit can read)."""

TOKEN_PREFIX = "cst_"

RETRYABLE = ("running", "interrupted")
"""Run statuses a claim can take over (once the lease or the retry time has run out)."""

LEADER_LEASE = "cron-leader"
"""Name of the lease the cron's leader holds in ``service_leases``."""


def hash_token(token: str) -> str:
    """SHA-256 hex digest of a token (tokens carry 256 random bits, so no salt or KDF is needed)."""
    return hashlib.sha256(token.encode()).hexdigest()


def role_allows(have: str, need: str) -> bool:
    """Whether role ``have`` includes role ``need`` (``read`` < ``submit`` < ``admin``)."""
    return ROLES.index(have) >= ROLES.index(need)


RUN_KEY_FORMAT = "%Y-%m-%dT%H:%MZ"
"""The run records' key: the issue time in UTC to the minute (sorts as time does)."""


def run_key(issued: str | datetime) -> str:
    """The key of the run record issued at ``issued``: ``YYYY-MM-DDTHH:MMZ`` (UTC).

    Parameters
    ----------
    issued
        A tz-aware issue time; a key already; or a planning date ``YYYY-MM-DD``, which names
        the run issued at that date's 00:00 UTC (the daily run's issue time).

    Raises
    ------
    InputError
        A naive datetime, or text that is neither a date, a key nor an ISO 8601 time with a
        time zone.
    """
    if isinstance(issued, str):
        text_ = issued.strip()
        try:
            if len(text_) == 10:
                return datetime.fromisoformat(text_).strftime("%Y-%m-%d") + "T00:00Z"
            issued = datetime.fromisoformat(text_.replace("Z", "+00:00"))
        except ValueError as exc:
            raise InputError(f"run {issued!r} is neither a planning date (YYYY-MM-DD) nor an "
                             "issue time (e.g. 2023-07-15T06:00Z)") from exc
    if issued.tzinfo is None or issued.utcoffset() is None:
        raise InputError(f"run issue time {issued.isoformat()} has no time zone; give it in "
                         "UTC, e.g. 2023-07-15T06:00Z")
    return issued.astimezone(UTC).strftime(RUN_KEY_FORMAT)


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

    lease_clock
        The clock of the run records' leases (tests); ``None``: the database's clock.
    """

    def __init__(self, store: Store, lease_clock: LeaseClock | None = None) -> None:
        self.store = store
        self.engine = store.engine
        self.lease_clock = lease_clock

    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgresql`` (or another SQLAlchemy dialect name)."""
        return self.engine.dialect.name

    def safe_url(self) -> str:
        """The database as a person reads it (:func:`carbonsched.config.database_label`)."""
        return database_label(self.engine.url)

    @store_call("checking the connection")
    def ping(self) -> None:
        """Run ``SELECT 1``.

        Raises
        ------
        StoreUnavailableError
            The database cannot be reached.
        """
        with self.engine.connect() as conn:
            conn.execute(text("SELECT 1"))

    # --- tokens ---------------------------------------------------------------------------
    @store_call("storing a token")
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
                                 "give it with an offset, e.g. 2030-01-01T00:00:00Z")
            if expires_at <= now:
                raise InputError(f"token expiry {expires_at.isoformat()} is not after now "
                                 f"({now.isoformat()}); give a later time")
        token_id = secrets.token_hex(8)
        token = f"{TOKEN_PREFIX}{secrets.token_urlsafe(32)}"
        with Session(self.engine) as s, s.begin():
            s.add(TokenRow(token_id=token_id, token_sha256=hash_token(token), role=role,
                           name=name, created_at=now, expires_at=expires_at))
        return token_id, token

    @store_call("looking up a token")
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

    @store_call("listing the tokens")
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

    @store_call("revoking token {token_id}")
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
    @store_call("looking up the newest plan of {catalog}")
    def latest_plan_id(self, catalog: str) -> str | None:
        """Id of the newest plan of ``catalog``."""
        with Session(self.engine) as s:
            return s.scalars(select(PlanRow.plan_id).where(PlanRow.catalog == catalog)
                             .order_by(PlanRow.created_at.desc()).limit(1)).first()

    @store_call("reading the plan of {date}")
    def plan_for_date(self, catalog: str, date: str) -> dict[str, Any] | None:
        """The newest plan document of ``catalog`` for ``date`` (``YYYY-MM-DD``)."""
        with Session(self.engine) as s:
            row = s.scalars(select(PlanRow).where(PlanRow.catalog == catalog,
                                                  PlanRow.date == date)
                            .order_by(PlanRow.created_at.desc()).limit(1)).first()
            return None if row is None else json.loads(row.plan_json)

    @store_call("reading the jobs of plan {plan_id}")
    def plan_job_ids(self, plan_id: str, job_ids: Collection[str]) -> set[str]:
        """The jobs of ``job_ids`` plan ``plan_id`` holds (placed or not).

        Parameters
        ----------
        plan_id
            The plan.
        job_ids
            Jobs to look up (read 500 per ``IN`` list).

        Returns
        -------
        set of str
            The ids of ``job_ids`` with a placement row in the plan.
        """
        ids = sorted(set(job_ids))
        out: set[str] = set()
        with Session(self.engine) as s:
            for i in range(0, len(ids), 500):     # bounded IN lists
                out.update(s.scalars(select(PlacementRow.job_id).where(
                    PlacementRow.plan_id == plan_id, PlacementRow.job_id.in_(ids[i:i + 500]))))
        return out

    @store_call("reading job {job_id} of plan {plan_id}")
    def plan_job(self, plan_id: str, job_id: str) -> dict[str, Any] | None:
        """A job's row in a plan (state, reason, site, start, end), or ``None``.

        A job cut into pieces is one row: the first piece's site and start, the last piece's
        end, energy [kWh] and emissions [kg] summed, and ``detail`` naming the pieces.
        """
        with Session(self.engine) as s:
            rs = list(s.scalars(select(PlacementRow).where(
                PlacementRow.plan_id == plan_id, PlacementRow.job_id == job_id)))
        if not rs:
            return None
        rs.sort(key=lambda r: (r.start is None, r.start))
        out = {c: getattr(rs[0], c) for c in ("job_id", "state", "reason", "site", "start",
                                               "end", "gpu_type", "gpus", "energy_kwh",
                                               "emissions_kg", "plan_id")}
        out["detail"] = ""
        if len(rs) > 1:
            ends = [r.end for r in rs if r.end is not None]
            out["end"] = max(ends) if ends else None
            for c in ("energy_kwh", "emissions_kg"):
                vals = [getattr(r, c) for r in rs if getattr(r, c) is not None]
                out[c] = sum(vals) if vals else None
            sites = ", ".join(dict.fromkeys(r.site for r in rs if r.site))
            out["detail"] = f"in {len(rs)} pieces at {sites}"
        return out

    # --- submitted jobs ---------------------------------------------------------------------
    @store_call("storing submitted jobs")
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

    @store_call("booking a reservation")
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

    @store_call("withdrawing the jobs a refused request stored")
    def withdraw_jobs(self, rows: list[dict[str, Any]]) -> list[str]:
        """Delete submitted jobs exactly as they were stored, in one transaction.

        A row is deleted only while its ``state`` and ``updated_at`` are still those of
        ``rows`` (nothing, a run for one, has changed it since), and only while no run is in
        progress (a run record ``running`` under a live lease): such a run may have read the
        jobs already and would plan and dispatch them whatever their row, so they stand. A
        reservation deleted frees its capacity (no lock needed: nothing can be over-booked by
        it).

        Parameters
        ----------
        rows
            The ``service_jobs`` rows as :meth:`add_jobs` or :meth:`reserve_job` stored them
            (``job_id``, ``state``, ``updated_at``).

        Returns
        -------
        list of str
            The ids deleted, in the order of ``rows``; the others are left as they are.
        """
        gone: list[str] = []
        with Session(self.engine) as s, s.begin():
            live = s.scalar(select(RunRow.run_key).where(
                RunRow.status == "running",
                RunRow.lease_expires_at > database_now(s, self.lease_clock)).limit(1))
            if live is not None:
                return gone
            for r in rows:
                res = s.execute(delete(ServiceJobRow).where(
                    ServiceJobRow.job_id == r["job_id"], ServiceJobRow.state == r["state"],
                    ServiceJobRow.updated_at == r["updated_at"]))
                if res.rowcount:
                    gone.append(r["job_id"])
        return gone

    @store_call("reading job {job_id}")
    def get_job(self, job_id: str) -> dict[str, Any] | None:
        """A submitted job as a dict, or ``None`` (also for an id the grammar refuses)."""
        if identifier_problem(job_id, "job id") is not None:
            return None  # no such job can exist; PostgreSQL refuses to compare a NUL
        with Session(self.engine) as s:
            r = s.get(ServiceJobRow, job_id)
            return None if r is None else _job_dict(r)

    @store_call("reading the submitted jobs")
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

    @store_call("updating job {job_id}")
    def update_job(self, job_id: str, **values: Any) -> None:
        """Set columns of a submitted job."""
        with Session(self.engine) as s, s.begin():
            s.execute(update(ServiceJobRow).where(ServiceJobRow.job_id == job_id)
                      .values(**values))

    # --- run records --------------------------------------------------------------------------
    @store_call("claiming the run issued at {issued_at}")
    def claim_run(self, planning_date: str, local_day: str, issued_at: datetime, trigger: str,
                  replica: str, now: datetime, lease: timedelta) -> str | None:
        """Claim the run issued at ``issued_at`` under a lease; ``None`` when it is taken.

        The record's key is the issue time (:func:`run_key`): one run per issue time, so a
        daily run (issued at its date's 00:00 UTC) is one per date and a rolling service that
        runs every few hours has one per issue time. A new record is inserted ``running`` with
        ``lease_expires_at`` = lease time + ``lease``. A record still ``running`` whose lease
        expired (its owner died or lost the database longer than ``lease``), or ``interrupted``
        by an outage whose retry time (``lease_expires_at``) has come, is taken over once, its
        ``attempts`` counted; a ``running`` record with no lease (written before migration
        ``0009_run_heartbeat``) counts as expired. Any other status is final.

        Parameters
        ----------
        planning_date, local_day
            ``YYYY-MM-DD``: the UTC date of the issue and the cron's local day.
        issued_at
            The plan's issue time (tz-aware): the record's key.
        trigger, replica
            Recorded with the run.
        now
            The service's clock (``started_at``); the lease uses the lease clock.
        lease
            How long the claim holds without a renewal (:meth:`renew_run`).

        Returns
        -------
        str or None
            The claim's owner token (pass it to :meth:`renew_run` and :meth:`finish_run`), or
            ``None`` when another live claim holds the record or the run is over.

        Raises
        ------
        StoreUnavailableError
            The database cannot be reached.
        """
        key = run_key(issued_at)
        owner = f"{replica}/{secrets.token_hex(4)}"
        try:
            with Session(self.engine) as s, s.begin():
                t = database_now(s, self.lease_clock)
                s.add(RunRow(run_key=key, planning_date=planning_date, local_day=local_day,
                             issued_at=issued_at, trigger=trigger, replica=replica,
                             status="running", started_at=now, dispatch="", error="",
                             owner=owner, heartbeat_at=t, lease_expires_at=t + lease))
            return owner
        except IntegrityError:
            pass
        with Session(self.engine) as s, s.begin():
            t = database_now(s, self.lease_clock)
            old = s.get(RunRow, key)
            if old is None or old.status not in RETRYABLE or (
                    old.lease_expires_at is not None and old.lease_expires_at >= t):
                return None
            beat = old.heartbeat_at.isoformat() if old.heartbeat_at else "never"
            why = (f"taken over: the previous attempt ({old.replica}) stopped renewing its "
                   f"lease (last heartbeat {beat})" if old.status == "running" else
                   f"retried: the previous attempt ({old.replica}) was interrupted: "
                   f"{old.error}")
            res = s.execute(update(RunRow).where(
                RunRow.run_key == key, RunRow.status == old.status,
                RunRow.attempts == old.attempts,
                (RunRow.lease_expires_at < t) | RunRow.lease_expires_at.is_(None),
            ).values(status="running", replica=replica, trigger=trigger, started_at=now,
                     finished_at=None, attempts=RunRow.attempts + 1, owner=owner,
                     heartbeat_at=t, lease_expires_at=t + lease,
                     error=why[:4000]))
            return owner if res.rowcount else None

    @store_call("renewing the lease of the run of {key}")
    def renew_run(self, key: str | datetime, owner: str, lease: timedelta) -> bool:
        """Extend the lease of a ``running`` record held by ``owner``.

        Parameters
        ----------
        key
            The run's issue time, its key (:func:`run_key`) or, for a run issued at 00:00
            UTC, its planning date ``YYYY-MM-DD``.

        Returns
        -------
        bool
            ``False`` when the record is no longer ``owner``'s (finished, or taken over after
            the lease expired).

        Raises
        ------
        StoreUnavailableError
            The database cannot be reached.
        """
        return self._update_owned_run(key, owner, lease=lease)

    def _update_owned_run(self, key: str | datetime, owner: str,
                          lease: timedelta | None = None, **values: Any) -> bool:
        """Set ``values`` on the ``running`` record of ``key`` held by ``owner``, in one update.

        Parameters
        ----------
        key
            The run's issue time, its key (:func:`run_key`) or a planning date ``YYYY-MM-DD``.
        owner
            The claim's owner token.
        lease
            When given, the lease is renewed in the same transaction: ``heartbeat_at`` = the
            lease clock's now (:func:`database_now`), ``lease_expires_at`` = now + ``lease``.
        values
            Further columns of :class:`~carbonsched.store.models.RunRow` to set.

        Returns
        -------
        bool
            ``False`` when no record matched: not ``running`` any more, or not ``owner``'s.
        """
        with Session(self.engine) as s, s.begin():
            if lease is not None:
                t = database_now(s, self.lease_clock)
                values.update(heartbeat_at=t, lease_expires_at=t + lease)
            res = s.execute(update(RunRow).where(
                RunRow.run_key == run_key(key), RunRow.owner == owner,
                RunRow.status == "running").values(**values))
            return bool(res.rowcount)

    @store_call("recording the plan of the run of {key}")
    def record_run_plan(self, key: str | datetime, owner: str, plan_id: str) -> bool:
        """Name the stored plan of a ``running`` record held by ``owner``, before it is dispatched.

        A run stopped after this (a signal, a crash, a lost database) is finished from this
        plan when it is run again, never planned anew: its dispatch may have submitted units
        already (:func:`carbonsched.service.runs.saved_run`).

        Parameters
        ----------
        key
            The run's issue time, its key (:func:`run_key`) or, for a run issued at 00:00
            UTC, its planning date ``YYYY-MM-DD``.
        owner
            The claim's owner token.
        plan_id
            The plan the run stored.

        Returns
        -------
        bool
            ``False`` when the record is no longer ``owner``'s (taken over).

        Raises
        ------
        StoreUnavailableError
            The database cannot be reached.
        """
        return self._update_owned_run(key, owner, plan_id=plan_id)

    @store_call("recording the outcome of the run of {key}")
    def finish_run(self, key: str | datetime, now: datetime, status: str,
                   owner: str | None = None, retry_after: timedelta | None = None,
                   **values: Any) -> bool:
        """Record the outcome of a claimed run and end its lease.

        Parameters
        ----------
        key
            The run's issue time, its key (:func:`run_key`) or, for a run issued at 00:00
            UTC, its planning date ``YYYY-MM-DD``.
        status
            ``succeeded``, ``infeasible``, ``dispatch_failed``, ``failed`` (final) or
            ``interrupted`` (an outage: claimed again after ``retry_after``).
        owner
            The claim's owner token: the record is finished only while it is this claim's
            (``None``: whoever holds it).
        retry_after
            With ``interrupted``: how long until the run may be claimed again.
        values
            Further columns (``plan_id``, ``solver_status``, ``dispatch``, ``error``,
            ``catalog``, ``notes``).

        Returns
        -------
        bool
            ``False`` when the record was not ``owner``'s any more (taken over).

        Raises
        ------
        StoreUnavailableError
            The database cannot be reached.
        """
        q = update(RunRow).where(RunRow.run_key == run_key(key))
        if owner is not None:
            q = q.where(RunRow.owner == owner)
        with Session(self.engine) as s, s.begin():
            until = (None if retry_after is None
                     else database_now(s, self.lease_clock) + retry_after)
            res = s.execute(q.values(status=status, finished_at=now, lease_expires_at=until,
                                     **values))
            return bool(res.rowcount)

    @store_call("reading the run record of {key}")
    def get_run(self, key: str | datetime) -> dict[str, Any] | None:
        """The run record issued at ``key``, or ``None``.

        ``key`` is an issue time, a key (:func:`run_key`) or a planning date ``YYYY-MM-DD``,
        which names the run issued at its 00:00 UTC (the daily run).
        """
        with Session(self.engine) as s:
            r = s.get(RunRow, run_key(key))
            return None if r is None else _run_dict(r)

    @store_call("reading the runs stopped after they stored their plans, before {before}")
    def stopped_runs(self, after: datetime | None, before: datetime) -> list[dict[str, Any]]:
        """Retryable run records that name a plan, issued after ``after`` and before ``before``.

        Such a run was stopped after it stored its plan and named it in its record
        (:meth:`record_run_plan`), and may have dispatched part of it.

        Parameters
        ----------
        after
            Exclusive lower bound of the issue time (tz-aware), or ``None``: no bound.
        before
            Exclusive upper bound of the issue time (tz-aware).

        Returns
        -------
        list of dict
            The records (as :meth:`get_run`), oldest issue time first.

        Raises
        ------
        StoreUnavailableError
            The database cannot be reached.
        """
        q = select(RunRow).where(RunRow.status.in_(RETRYABLE), RunRow.plan_id.is_not(None),
                                 RunRow.run_key < run_key(before))
        if after is not None:
            q = q.where(RunRow.run_key > run_key(after))
        with Session(self.engine) as s:
            return [_run_dict(r) for r in s.scalars(q.order_by(RunRow.run_key))]

    @store_call("abandoning the run of {key}")
    def abandon_run(self, key: str | datetime, reason: str, now: datetime) -> dict[str, Any]:
        """Give up a stopped run for good: its record becomes ``abandoned`` (final).

        A run stopped after it stored its plan is finished from that plan when it is claimed
        again, and a rolling run issued later finishes it first
        (:func:`carbonsched.service.runs.finish_stopped_runs`). One that can never be
        finished (its plan lost, its rolling state impossible to save from it) would stop
        every later rolling run for good. An operator gives it up here, once, with a reason:
        no claim takes the record again and later runs plan on the rolling state as the newest
        run that saved it left it. The outbox is not touched: the units its dispatch wrote stay
        the claims of their jobs (submitted at most once by their keys), and later runs
        leave those jobs out and hold their running units' capacity
        (:func:`carbonsched.service.runs.without_dispatched_jobs`).

        Only a retryable record can be abandoned: ``interrupted``, or ``running`` whose
        lease ran out (``lease_expires_at`` before the database's time: its owner died). A
        ``running`` record under a live lease is a run going on, and is refused.

        Parameters
        ----------
        key
            The run's issue time, its key (:func:`run_key`) or, for a run issued at 00:00
            UTC, its planning date ``YYYY-MM-DD``.
        reason
            Why, in the operator's words (non-empty; kept in the record's ``error``).
        now
            The service's clock (``finished_at``).

        Returns
        -------
        dict
            The record as :meth:`get_run` gives it, now ``abandoned``.

        Raises
        ------
        InputError
            An empty reason; no record at ``key``; a final record; a ``running`` record whose
            lease is live. The message names the record and what to do.
        StoreUnavailableError
            The database cannot be reached.
        """
        k = run_key(key)
        why = " ".join(str(reason).split())
        if not why:
            raise InputError(f"abandoning run {k}: give a reason (--reason TEXT); it is "
                             "kept in the run's record")
        with Session(self.engine) as s, s.begin():
            t = database_now(s, self.lease_clock)
            old = s.get(RunRow, k)
            if old is None:
                raise InputError(f"no run record issued at {k}; `carbonsched runs list` "
                                 "shows the records and their keys")
            if old.status not in RETRYABLE:
                raise InputError(f"run {k} is {old.status}, which is final: only a stopped "
                                 "run (interrupted, or running with its lease run out) can be "
                                 "abandoned")
            live = old.lease_expires_at is not None and old.lease_expires_at >= t
            if old.status == "running" and live:
                raise InputError(
                    f"run {k} is running on {old.replica}: its lease runs until "
                    f"{old.lease_expires_at.isoformat()} (database time "
                    f"{t.isoformat()}); stop that process (its claim is given up), or wait "
                    "until its lease runs out, then abandon it")
            plan = f"; it had stored plan {old.plan_id}" if old.plan_id else ""
            text = (f"abandoned by an operator: {why}{plan} (was {old.status}: "
                    f"{old.error})")[:4000]
            # as claim_run: the record as read, and no lease renewed meanwhile (a slow owner)
            res = s.execute(update(RunRow).where(
                RunRow.run_key == k, RunRow.status == old.status,
                RunRow.attempts == old.attempts,
                (RunRow.lease_expires_at < t) | RunRow.lease_expires_at.is_(None)
                | (RunRow.status == "interrupted")).values(
                    status="abandoned", finished_at=now, lease_expires_at=None, owner=None,
                    error=text))
            if not res.rowcount:       # claimed, or its lease renewed, meanwhile
                raise InputError(f"run {k} was claimed (or its lease renewed) while it was "
                                 "being abandoned: it is running; `carbonsched runs list` "
                                 "shows who holds it")
            return _run_dict(s.get(RunRow, k))

    @store_call("reading the catalogs of the run records")
    def run_catalogs(self) -> dict[str, int]:
        """Catalog name -> number of run records that planned it.

        Records made before the catalog was recorded name none and are left out.
        """
        from sqlalchemy import func

        with Session(self.engine) as s:
            rows = s.execute(select(RunRow.catalog, func.count()).where(
                RunRow.catalog.is_not(None)).group_by(RunRow.catalog)).all()
        return {str(c): int(n) for c, n in rows}

    @store_call("reading the run records")
    def runs(self, limit: int = 100) -> list[dict[str, Any]]:
        """Run records, newest issue time first."""
        with Session(self.engine) as s:
            return [_run_dict(r) for r in s.scalars(
                select(RunRow).order_by(RunRow.run_key.desc()).limit(limit))]


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
        "run_key", "planning_date", "local_day", "issued_at", "trigger", "replica", "status",
        "started_at", "finished_at", "plan_id", "solver_status", "dispatch", "error", "attempts",
        "owner", "heartbeat_at", "lease_expires_at", "catalog", "notes")}


class LeaderLease:
    """Leadership among replicas that share one database: a lease that expires.

    The leader holds the row ``name`` of ``service_leases`` until ``expires_at`` and renews it
    (:meth:`try_acquire`, every ``lease_s / 3`` in the service); any replica takes a lease that
    expired, so a leader that died, hangs or lost the database loses the lead ``lease_s`` after
    its last renewal, whatever became of its connections. Times are the database's
    (:func:`database_now`). The same on SQLite (several processes on one host) and PostgreSQL.

    Parameters
    ----------
    engine
        The store's engine.
    owner
        This replica's name (a random suffix is added, so two replicas given one name differ).
    lease_s
        Lease length. [s]
    name
        The lease's name.
    lease_clock
        Tests' clock; ``None``: the database's.
    """

    def __init__(self, engine: Engine, owner: str, lease_s: float, name: str = LEADER_LEASE,
                 lease_clock: LeaseClock | None = None) -> None:
        self.engine = engine
        self.owner = f"{owner}/{secrets.token_hex(4)}"
        self.lease = timedelta(seconds=lease_s)
        self.name = name
        self.lease_clock = lease_clock
        self._valid_until = 0.0  # time.monotonic() bound of the last renewal's lease

    @property
    def held(self) -> bool:
        """Whether this replica leads now (its last renewal's lease has not run out)."""
        return time.monotonic() < self._valid_until

    @store_call("taking or renewing the cron leader's lease")
    def try_acquire(self) -> bool:
        """Take the lead if it is free or expired, or renew it; ``True`` while leading.

        Raises
        ------
        StoreUnavailableError
            The database cannot be reached (the lead is then lost when the lease runs out).
        """
        t0 = time.monotonic()
        with Session(self.engine) as s, s.begin():
            t = database_now(s, self.lease_clock)
            res = s.execute(update(LeaseRow).where(
                LeaseRow.name == self.name,
                (LeaseRow.owner == self.owner) | (LeaseRow.expires_at < t),
            ).values(owner=self.owner, renewed_at=t, expires_at=t + self.lease))
            got = bool(res.rowcount)
        if not got:
            try:
                with Session(self.engine) as s, s.begin():
                    t = database_now(s, self.lease_clock)
                    s.add(LeaseRow(name=self.name, owner=self.owner, acquired_at=t,
                                   renewed_at=t, expires_at=t + self.lease))
                got = True
            except IntegrityError:
                got = False
        if got:
            if not self.held:
                log.info("lease %s taken by %s", self.name, self.owner)
            self._valid_until = t0 + self.lease.total_seconds()
        else:
            self._valid_until = 0.0
        return got

    def holder(self) -> dict[str, Any] | None:
        """The lease row (owner, acquired_at, renewed_at, expires_at), or ``None``."""
        with Session(self.engine) as s:
            r = s.get(LeaseRow, self.name)
            return None if r is None else {c: getattr(r, c) for c in (
                "owner", "acquired_at", "renewed_at", "expires_at")}

    def release(self) -> None:
        """Give up the lead (the lease row is deleted, so a standby takes it at once)."""
        if self._valid_until == 0.0:
            return
        self._valid_until = 0.0
        try:
            with Session(self.engine) as s, s.begin():
                s.execute(delete(LeaseRow).where(LeaseRow.name == self.name,
                                                 LeaseRow.owner == self.owner))
        except DBAPIError as exc:  # the lease then runs out by itself
            log.warning("lease %s not released (%s); it expires by itself", self.name, exc)
