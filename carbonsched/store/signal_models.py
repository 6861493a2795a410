"""Tables of the provider signal cache (migration ``0004_signal_cache``).

``signal_cache`` holds one row per (provider, zone, signal, hour): the value (NULL when the provider
answered with ``null`` for that hour — the hour is *known missing*, never zero), whether the
provider flagged it as estimated, its emission-factor type and signal type, and when it was
fetched. ``signal_fetches`` logs every fetch attempt: the window asked, the requests sent, the
newest valued hour and its age at fetch time, and the error when it failed.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, Float, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from carbonsched.store.base import Base, UTCDateTime


class SignalCacheRow(Base):
    """One hourly value of one signal of one zone from one provider."""

    __tablename__ = "signal_cache"
    __table_args__ = (UniqueConstraint("provider", "zone", "signal", "ts",
                                       name="uq_signal_cache_key"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    provider: Mapped[str] = mapped_column(String(60))
    zone: Mapped[str] = mapped_column(String(100))
    signal: Mapped[str] = mapped_column(String(60))
    ts: Mapped[datetime] = mapped_column(UTCDateTime())
    value: Mapped[float | None] = mapped_column(Float, nullable=True)
    is_estimated: Mapped[bool] = mapped_column(Boolean, default=False)
    emission_factor_type: Mapped[str | None] = mapped_column(String(20), nullable=True)
    signal_type: Mapped[str | None] = mapped_column(String(40), nullable=True)
    fetched_at: Mapped[datetime] = mapped_column(UTCDateTime())


class SignalFetchRow(Base):
    """One fetch attempt of one (provider, zone, signal) window."""

    __tablename__ = "signal_fetches"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    provider: Mapped[str] = mapped_column(String(60), index=True)
    zone: Mapped[str] = mapped_column(String(100))
    signal: Mapped[str] = mapped_column(String(60))
    start: Mapped[datetime] = mapped_column(UTCDateTime())
    end: Mapped[datetime] = mapped_column(UTCDateTime())
    fetched_at: Mapped[datetime] = mapped_column(UTCDateTime())
    status: Mapped[str] = mapped_column(String(20))
    requests: Mapped[int] = mapped_column(Integer, default=0)
    hours_stored: Mapped[int] = mapped_column(Integer, default=0)
    newest_value_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    age_hours: Mapped[float | None] = mapped_column(Float, nullable=True)
    detail: Mapped[str | None] = mapped_column(Text, nullable=True)
