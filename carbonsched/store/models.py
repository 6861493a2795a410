"""SQLAlchemy tables of the store: plans, job placements, inference placements, forecasts.

Timestamps are stored as UTC (``timestamptz`` on PostgreSQL; naive-UTC on SQLite, converted back to
tz-aware UTC on read by :class:`UTCDateTime`).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Float, ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from carbonsched.store.base import Base, UTCDateTime


class PlanRow(Base):
    """One daily plan (the JSON document is kept whole in ``plan_json``)."""

    __tablename__ = "plans"

    plan_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    date: Mapped[str] = mapped_column(String(10), index=True)
    catalog: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    signal_quality: Mapped[str] = mapped_column(String(20))
    solver_name: Mapped[str] = mapped_column(String(20))
    solver_status: Mapped[str] = mapped_column(String(20))
    mip_gap: Mapped[float | None] = mapped_column(Float, nullable=True)
    solve_seconds: Mapped[float] = mapped_column(Float)
    energy_kwh: Mapped[float] = mapped_column(Float)
    emissions_kg: Mapped[float] = mapped_column(Float)
    baseline_emissions_kg: Mapped[float] = mapped_column(Float)
    plan_json: Mapped[str] = mapped_column(Text)


class PlacementRow(Base):
    """A job's state in a plan: placed (site, start, end) or pending with a reason code."""

    __tablename__ = "placements"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    plan_id: Mapped[str] = mapped_column(ForeignKey("plans.plan_id", ondelete="CASCADE"),
                                         index=True)
    job_id: Mapped[str] = mapped_column(String(200), index=True)
    state: Mapped[str] = mapped_column(String(20))
    reason: Mapped[str] = mapped_column(String(40))
    site: Mapped[str | None] = mapped_column(String(100), nullable=True)
    start: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    end: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    gpu_type: Mapped[str | None] = mapped_column(String(40), nullable=True)
    gpus: Mapped[int | None] = mapped_column(Integer, nullable=True)
    energy_kwh: Mapped[float | None] = mapped_column(Float, nullable=True)
    emissions_kg: Mapped[float | None] = mapped_column(Float, nullable=True)


class InferenceRow(Base):
    """GPUs serving one user area's inference from one site in one hour."""

    __tablename__ = "inference_placements"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    plan_id: Mapped[str] = mapped_column(ForeignKey("plans.plan_id", ondelete="CASCADE"),
                                         index=True)
    area: Mapped[str] = mapped_column(String(100))
    hour: Mapped[datetime] = mapped_column(UTCDateTime())
    site: Mapped[str] = mapped_column(String(100))
    gpu_type: Mapped[str] = mapped_column(String(40))
    gpus: Mapped[int] = mapped_column(Integer)
    energy_kwh: Mapped[float] = mapped_column(Float)
    emissions_kg: Mapped[float] = mapped_column(Float)


class ForecastRow(Base):
    """One hourly forecast value of one signal at one site, as used by a plan."""

    __tablename__ = "forecasts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    plan_id: Mapped[str] = mapped_column(ForeignKey("plans.plan_id", ondelete="CASCADE"),
                                         index=True)
    site: Mapped[str] = mapped_column(String(100))
    signal: Mapped[str] = mapped_column(String(60))
    model: Mapped[str] = mapped_column(String(200))
    issued_at: Mapped[datetime] = mapped_column(UTCDateTime())
    ts: Mapped[datetime] = mapped_column(UTCDateTime())
    mean: Mapped[float] = mapped_column(Float)
    lo_80: Mapped[float] = mapped_column(Float)
    hi_80: Mapped[float] = mapped_column(Float)
    lo_95: Mapped[float] = mapped_column(Float)
    hi_95: Mapped[float] = mapped_column(Float)
    #: P(green-surplus index > 0) [-] on the index's rows (issue 35 item 5); else NULL
    p_surplus: Mapped[float | None] = mapped_column(Float, nullable=True)


# provider signal cache (issue 10); its own module keeps this file's merge small
from carbonsched.store.signal_models import SignalCacheRow, SignalFetchRow  # noqa: E402

__all__ = ["Base", "DispatchRow", "ForecastRow", "InferenceRow", "PlacementRow", "PlanRow",
           "SignalCacheRow", "SignalFetchRow", "UTCDateTime"]


class DispatchRow(Base):
    """One dispatch unit (job id, piece): the outbox intent and what its backend reports.

    Written before any submission (state ``Pending``, reason ``AwaitingSubmit``); the dispatcher
    then records the backend's id and the lifecycle it reports. ``key`` (``<job_id>#<piece>``) is
    unique: a job that appears in several successive plans is dispatched once, from the plan in
    ``plan_id``. ``actual_start``/``actual_end`` are the backend's (``times_source``: ``sacct``,
    ``squeue`` or ``job-status``), for the report export. A dispatcher claims the row
    (``lease_owner``, ``lease_expires_at``) before any side effect.
    """

    __tablename__ = "dispatch_intents"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    key: Mapped[str] = mapped_column(String(220), unique=True)
    job_id: Mapped[str] = mapped_column(String(200), index=True)
    piece: Mapped[int] = mapped_column(Integer)
    plan_id: Mapped[str] = mapped_column(String(64), index=True)
    site: Mapped[str] = mapped_column(String(100))
    backend: Mapped[str] = mapped_column(String(200))
    state: Mapped[str] = mapped_column(String(20), index=True)
    reason: Mapped[str] = mapped_column(String(40))
    detail: Mapped[str] = mapped_column(Text, default="")
    backend_id: Mapped[str | None] = mapped_column(String(300), nullable=True)
    request_json: Mapped[str] = mapped_column(Text)
    planned_start: Mapped[datetime] = mapped_column(UTCDateTime())
    planned_end: Mapped[datetime] = mapped_column(UTCDateTime())
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
    submitted_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    actual_start: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    # indexed (migration 0026_history_read_indexes): the report reads its period's runs
    actual_end: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True,
                                                        index=True)
    times_source: Mapped[str | None] = mapped_column(String(40), nullable=True)
    # migration 0007_outbox_leases: the claim and what makes a lookup before resubmission exact
    lease_owner: Mapped[str | None] = mapped_column(String(200), nullable=True, index=True)
    """The dispatcher holding the row (:mod:`carbonsched.dispatch.lease`); NULL when free."""
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    """When the claim lapses unless renewed (the database's clock)."""
    submit_attempted_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    """Written under the lease just before each submission: a pending row with it set may
    already exist on its backend, so it is looked up by key before any resubmission."""
    backend_submitted_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    """The submit time the backend reports (its own clock); bounds ``sacct`` queries."""
    duplicates: Mapped[str] = mapped_column(Text, default="")
    """Other backend ids found carrying this row's key (comma-separated); empty when none."""


# the service's tables (migration 0003_service)
from carbonsched.store import service_models as _service_models  # noqa: E402,F401,I001

# the rolling plan's carried work (migration 0005_rolling)
from carbonsched.store import rolling_models as _rolling_models  # noqa: E402,F401,I001


# grid events (issue 38); their own module keeps this file's merge small
from carbonsched.store.grid_models import GridActionRow, GridEventRow  # noqa: E402, F401

# tombstones of pruned jobs (migration 0027_pruned_jobs)
from carbonsched.store.pruned_jobs import PrunedJobRow  # noqa: E402, F401
