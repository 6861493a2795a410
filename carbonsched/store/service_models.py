"""Tables the service adds to the store: API tokens, submitted jobs, run records, leases, bookings.

Imported at the end of :mod:`carbonsched.store.models` so that one ``Base.metadata`` knows every
table; created by migration ``0003_service`` (the booking ledger and token expiry by
``0006_bookings_tokens``; the run records' lease columns and the ``service_leases`` table by
``0009_run_heartbeat``).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, Float, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from carbonsched.store.base import Base, UTCDateTime


class TokenRow(Base):
    """A bearer token: only its SHA-256 digest is stored, never the token."""

    __tablename__ = "api_tokens"

    token_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    token_sha256: Mapped[str] = mapped_column(String(64), unique=True, index=True)
    role: Mapped[str] = mapped_column(String(20))
    name: Mapped[str] = mapped_column(String(200), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    """Valid strictly before this instant; ``None``: no expiry."""


class ServiceJobRow(Base):
    """A job submitted through the API (``POST /v1/jobs`` or a reserved placement)."""

    __tablename__ = "service_jobs"
    __table_args__ = (Index("ix_service_jobs_plan_site", "plan_id", "site"),)

    job_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(200))
    spec_json: Mapped[str] = mapped_column(Text)
    state: Mapped[str] = mapped_column(String(20))
    reason: Mapped[str] = mapped_column(String(40))
    detail: Mapped[str] = mapped_column(Text, default="")
    plan_id: Mapped[str | None] = mapped_column(String(64), nullable=True, index=True)
    site: Mapped[str | None] = mapped_column(String(100), nullable=True)
    start: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    end: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    energy_kwh: Mapped[float | None] = mapped_column(Float, nullable=True)
    emissions_kg: Mapped[float | None] = mapped_column(Float, nullable=True)
    reserved: Mapped[bool] = mapped_column(Boolean, default=False)
    submitted_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())


class RunRow(Base):
    """One run of the plan -> dispatch pipeline, keyed by its issue time (one per issue time).

    A daily run is issued at its planning date's 00:00 UTC, so it has one key per date; a
    rolling service that runs every few hours has one key per issue time
    (``CARBONSCHED_ROLLING_RUN_EVERY_HOURS``).
    """

    __tablename__ = "pipeline_runs"

    run_key: Mapped[str] = mapped_column(String(20), primary_key=True)
    """The issue time in UTC, ``YYYY-MM-DDTHH:MMZ`` (:func:`carbonsched.store.service.run_key`)."""
    planning_date: Mapped[str] = mapped_column(String(10), index=True)
    """The UTC date of the issue time, ``YYYY-MM-DD``."""
    local_day: Mapped[str] = mapped_column(String(10))
    issued_at: Mapped[datetime] = mapped_column(UTCDateTime())
    trigger: Mapped[str] = mapped_column(String(20))
    replica: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(20))
    started_at: Mapped[datetime] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    plan_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    solver_status: Mapped[str | None] = mapped_column(String(20), nullable=True)
    dispatch: Mapped[str] = mapped_column(Text, default="")
    error: Mapped[str] = mapped_column(Text, default="")
    attempts: Mapped[int] = mapped_column(Integer, default=1)
    owner: Mapped[str | None] = mapped_column(String(200), nullable=True)
    """The claim holding the record while it is ``running`` (replica and a random suffix)."""
    heartbeat_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    """The owner's last renewal of its lease (database time)."""
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    """After this instant (database time) a ``running`` record is taken over."""
    catalog: Mapped[str | None] = mapped_column(String(200), nullable=True)
    """The catalog the run planned (``None`` on records made before it was recorded)."""
    notes: Mapped[str] = mapped_column(Text, default="", server_default="")
    """What a person should know about the run, e.g. a plan made outside the service that the
    run's plan replaced as the served plan."""


class LeaseRow(Base):
    """A named lease (``cron-leader``): who holds it and until when (database time)."""

    __tablename__ = "service_leases"

    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    owner: Mapped[str] = mapped_column(String(200))
    acquired_at: Mapped[datetime] = mapped_column(UTCDateTime())
    renewed_at: Mapped[datetime] = mapped_column(UTCDateTime())
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())


class BookingLedgerRow(Base):
    """The lock row of one site of one plan: reservations there are checked and written under it.

    :meth:`carbonsched.store.service.ServiceStore.reserve_job` takes this row with an upsert that
    holds its row lock until commit (PostgreSQL; SQLite's ``BEGIN IMMEDIATE`` locks the whole
    database), re-checks
    the fit against the reservations committed at the site and only then inserts the job, so
    two replicas can never both book the last free capacity. ``bookings`` counts the
    reservations committed through it.
    """

    __tablename__ = "booking_ledger"

    plan_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    site: Mapped[str] = mapped_column(String(100), primary_key=True)
    bookings: Mapped[int] = mapped_column(Integer, default=0)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
