"""Tables of grid events (issue 38): the events and every action taken on one.

Created by migration ``0021_grid_events``; imported at the end of
:mod:`carbonsched.store.models` so that one ``Base.metadata`` knows them.

``grid_events`` holds what was asked (site, window, target) and what the re-plan found
(baseline, reduction planned, shortfall). ``grid_event_actions`` holds one row per
``(event_id, key, action)`` — a dispatch unit (``<job_id>#<piece>``) and what is done to it
(``pause``, ``hold``, then ``resume``, ``release``) — unique, so an action is written once, claimed
(``owner``, ``lease_expires_at``) before its side effect and marked ``done`` after: a retry or a
second actor finds the row and never acts twice.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Float, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from carbonsched.store.base import Base, UTCDateTime


class GridEventRow(Base):
    """One grid event: reduce a site's power in a window by a target."""

    __tablename__ = "grid_events"

    event_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    site: Mapped[str] = mapped_column(String(100), index=True)
    start: Mapped[datetime] = mapped_column(UTCDateTime())
    end: Mapped[datetime] = mapped_column(UTCDateTime())
    target_kw: Mapped[float | None] = mapped_column(Float, nullable=True)
    """IT power to shed. [kW]"""
    target_fraction: Mapped[float | None] = mapped_column(Float, nullable=True)
    """Share of the baseline to shed. [-]"""
    notice_s: Mapped[float] = mapped_column(Float, default=0.0)
    """How long before the start the event was announced. [s]"""
    source: Mapped[str] = mapped_column(String(200), default="")
    """Who announced it (``api:<role>``, ``cli``), for the record."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    planned_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    """When the actions were chosen (the re-plan); NULL until the event starts."""
    baseline_kw: Mapped[float | None] = mapped_column(Float, nullable=True)
    """Peak planned IT power of the work dispatched to the site in the window. [kW]"""
    target_reduction_kw: Mapped[float | None] = mapped_column(Float, nullable=True)
    """The reduction asked, in kW (``target_kw`` or ``target_fraction x baseline_kw``). [kW]"""
    planned_reduction_kw: Mapped[float | None] = mapped_column(Float, nullable=True)
    """IT power of the work the actions pause or hold, as the re-plan chose them: kept when an
    action is later skipped (its row says so). [kW]"""
    shortfall_kw: Mapped[float | None] = mapped_column(Float, nullable=True)
    """``max(0, target - planned)``: what the re-plan could not shed without missing a deadline
    or running a piece into its job's next piece; a skipped action is not added (``grid-event
    apply`` says what it leaves unshed). [kW]"""
    detail: Mapped[str] = mapped_column(Text, default="")
    """What a person should know: the re-plan's choices and what it left alone, and why."""
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    """When every resume/release action was done (or none was needed)."""


class GridActionRow(Base):
    """One action on one dispatch unit for one event, claimed before it is taken."""

    __tablename__ = "grid_event_actions"
    __table_args__ = (UniqueConstraint("event_id", "key", "action",
                                       name="uq_grid_event_actions_event_key_action"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    event_id: Mapped[str] = mapped_column(ForeignKey("grid_events.event_id",
                                                     ondelete="CASCADE"), index=True)
    key: Mapped[str] = mapped_column(String(220), index=True)
    """The dispatch unit (``<job_id>#<piece>``)."""
    action: Mapped[str] = mapped_column(String(20))
    """``pause`` (running preemptible work), ``hold`` (work not yet started), ``resume`` (of a
    pause), ``release`` (of a hold)."""
    site: Mapped[str] = mapped_column(String(100))
    backend_id: Mapped[str | None] = mapped_column(String(300), nullable=True)
    gpus: Mapped[int] = mapped_column(Integer, default=0)
    power_kw: Mapped[float] = mapped_column(Float, default=0.0)
    """IT power of the unit (its GPUs x the GPU type's IT power). [kW]"""
    state: Mapped[str] = mapped_column(String(20), index=True)
    """``planned``, ``claimed`` (an actor holds it), ``done``, ``skipped`` (nothing to do on
    the backend: the unit ended, or the backend cannot do it; the detail says which),
    ``failed`` (after the retries)."""
    owner: Mapped[str | None] = mapped_column(String(200), nullable=True)
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    detail: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
    done_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
