"""Tables of the provider signal cache (migration ``0004_signal_cache``).

``signal_cache`` holds one row per (provider, zone, signal, hour): the value (NULL when the provider
answered with ``null`` for that hour — the hour is *known missing*, never zero), whether the
provider flagged it as estimated, its emission-factor type and signal type, and when it was
fetched. ``signal_fetches`` logs every fetch attempt: the window asked, the requests sent, the
newest valued hour and its age at fetch time, and the error when it failed.
``published_forecasts`` keeps every value of every forecast a provider published that a run
fetched, with its publication time (:mod:`carbonsched.store.published_forecasts`).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, Float, Index, Integer, String, Text, UniqueConstraint
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


class PublishedForecastRow(Base):
    """One value of a forecast a provider published: what was knowable, and from when.

    Keyed by (``provider``, ``zone``, ``feature``, ``published_at``, ``ts``); a second fetch of
    the same publication stores nothing new (migration ``0025_published_forecasts``).
    ``zone`` is the grid zone of a grid forecast (a carbon-intensity or wind and solar
    forecast) and the site id of a weather forecast (asked at the site's coordinates).
    """

    __tablename__ = "published_forecasts"
    __table_args__ = (UniqueConstraint("provider", "zone", "feature", "published_at", "ts",
                                       name="uq_published_forecasts_key"),
                      Index("ix_published_forecasts_lookup", "zone", "feature", "ts"))

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    provider: Mapped[str] = mapped_column(String(60))
    zone: Mapped[str] = mapped_column(String(100))
    feature: Mapped[str] = mapped_column(String(60))
    published_at: Mapped[datetime] = mapped_column(UTCDateTime())
    ts: Mapped[datetime] = mapped_column(UTCDateTime())
    value: Mapped[float] = mapped_column(Float)
    fetched_at: Mapped[datetime] = mapped_column(UTCDateTime())
