"""The rolling plan's carried work: one row per job the rolling runner knows (``0005_rolling``).

Imported at the end of :mod:`carbonsched.store.models` so that one ``Base.metadata`` knows it.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Float, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from carbonsched.store.base import Base, UTCDateTime


class RollingJobRow(Base):
    """A job carried between rolling runs (:mod:`carbonsched.plan.rolling`).

    ``state``: ``Pending`` (not committed; ``site``/``start``/``end`` hold the latest tentative
    placement, if any), ``Dispatched`` (committed by the run issued at ``issued_at`` in plan
    ``plan_id``), or ``Failed`` (never runs; ``reason`` ``DeadlinePassed`` or a planner reason no
    later run can change). ``spec_json`` is the job itself (the workload file's fields).
    """

    __tablename__ = "rolling_jobs"
    # migration 0026_history_read_indexes: a run reads the committed work ending after it
    __table_args__ = (Index("ix_rolling_jobs_state_end", "state", "end"),)

    job_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    spec_json: Mapped[str] = mapped_column(Text)
    state: Mapped[str] = mapped_column(String(20), index=True)
    reason: Mapped[str] = mapped_column(String(40), default="")
    detail: Mapped[str] = mapped_column(Text, default="")
    site: Mapped[str | None] = mapped_column(String(100), nullable=True)
    gpu_type: Mapped[str] = mapped_column(String(100))
    gpus: Mapped[int] = mapped_column(Integer)
    start: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    end: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    energy_kwh: Mapped[float | None] = mapped_column(Float, nullable=True)
    emissions_kg: Mapped[float | None] = mapped_column(Float, nullable=True)
    pieces_json: Mapped[str | None] = mapped_column(Text, nullable=True)
    """The placement's pieces (one for a job placed whole), as JSON; ``start``/``end`` are the
    first piece's start and the last piece's end."""
    plan_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    issued_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True,
                                                       index=True)
    """Issue time of the run that last changed the row. [UTC]"""
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
