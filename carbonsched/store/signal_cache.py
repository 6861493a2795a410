"""The provider signal cache: hourly values by (provider, zone, signal, hour), never fetched twice.

:class:`SignalCache` reads and writes the ``signal_cache`` and ``signal_fetches`` tables of a
:class:`carbonsched.store.Store` (migration ``0004_signal_cache``). An hour is *covered* when a row
exists for it, whether its value is a number or NULL (the provider said "no value": a known gap,
planned around, never read as zero). :meth:`SignalCache.gaps` returns the uncovered windows, which
are all that a backfill or a daily run fetches.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import and_, delete, insert, select
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from carbonsched.errors import BackendUnavailableError
from carbonsched.store.signal_models import SignalCacheRow, SignalFetchRow

HOUR = pd.Timedelta(hours=1)


def _py(ts: pd.Timestamp) -> datetime:
    return pd.Timestamp(ts).tz_convert("UTC").to_pydatetime()


class SignalCache:
    """Cached provider values in the store's database.

    Parameters
    ----------
    store
        A :class:`carbonsched.store.Store` (already migrated).
    """

    def __init__(self, store: Any) -> None:
        self.store = store
        self.engine = store.engine

    def _unavailable(self, exc: OperationalError, what: str) -> BackendUnavailableError:
        return BackendUnavailableError(
            f"database {self.store._safe_url()} failed while {what}: "
            f"{' '.join(str(exc.orig).split())}")

    def read(self, provider: str, zone: str, signal: str, start: pd.Timestamp,
             end: pd.Timestamp) -> pd.DataFrame:
        """Cached rows of one signal on ``[start, end)``.

        Returns
        -------
        DataFrame
            Index ``ts`` (UTC hour start, covered hours only); columns ``value`` (NaN for a
            provider null), ``is_estimated``, ``emission_factor_type``, ``signal_type``,
            ``fetched_at``.
        """
        q = select(SignalCacheRow.ts, SignalCacheRow.value, SignalCacheRow.is_estimated,
                   SignalCacheRow.emission_factor_type, SignalCacheRow.signal_type,
                   SignalCacheRow.fetched_at).where(and_(
                       SignalCacheRow.provider == provider, SignalCacheRow.zone == zone,
                       SignalCacheRow.signal == signal, SignalCacheRow.ts >= _py(start),
                       SignalCacheRow.ts < _py(end))).order_by(SignalCacheRow.ts)
        try:
            with Session(self.engine) as s:
                rows = s.execute(q).all()
        except OperationalError as exc:
            raise self._unavailable(exc, f"reading cached {provider} {zone} {signal}") from exc
        cols = ["ts", "value", "is_estimated", "emission_factor_type", "signal_type",
                "fetched_at"]
        frame = pd.DataFrame(rows, columns=cols)
        idx = pd.DatetimeIndex(pd.to_datetime(frame["ts"], utc=True), name="ts")
        frame = frame.drop(columns="ts").set_index(idx)
        frame["value"] = frame["value"].astype(float)
        frame["is_estimated"] = frame["is_estimated"].astype(bool)
        return frame

    def gaps(self, provider: str, zone: str, signal: str, start: pd.Timestamp,
             end: pd.Timestamp) -> list[tuple[pd.Timestamp, pd.Timestamp]]:
        """Uncovered windows ``[a, b)`` of ``[start, end)``, in order (empty: nothing to fetch)."""
        if end <= start:
            return []
        hours = pd.date_range(start, end, freq="h", inclusive="left")
        have = self.read(provider, zone, signal, start, end).index
        missing = hours.difference(have)
        out: list[tuple[pd.Timestamp, pd.Timestamp]] = []
        for t in missing:
            if out and out[-1][1] == t:
                out[-1] = (out[-1][0], t + HOUR)
            else:
                out.append((t, t + HOUR))
        return out

    def write(self, provider: str, zone: str, frame: pd.DataFrame, signals: Iterable[str],
              upto: pd.Timestamp, fetched_at: pd.Timestamp, emission_factor_type: str | None,
              signal_type: str | None, start: pd.Timestamp) -> int:
        """Store the hours ``[start, upto)`` of ``frame``'s ``signals`` (missing hours as NULL).

        Hours at or after ``upto`` (after the provider's newest value, or in the future) are not
        stored, so they stay gaps and are asked again next time. Returns rows written.
        """
        if upto <= start:
            return 0
        hours = pd.date_range(start, upto, freq="h", inclusive="left")
        sub = frame.reindex(hours)
        est = (sub["is_estimated"].astype("boolean").fillna(False).astype(bool)
               if "is_estimated" in sub else pd.Series(False, index=hours))
        rows = []
        signals = list(signals)
        for signal in signals:
            values = sub[signal].to_numpy(float) if signal in sub else np.full(len(hours), np.nan)
            for t, v, e in zip(hours, values, est.to_numpy(), strict=True):
                rows.append(dict(provider=provider, zone=zone, signal=signal, ts=_py(t),
                                 value=None if not np.isfinite(v) else float(v),
                                 is_estimated=bool(e),
                                 emission_factor_type=emission_factor_type,
                                 signal_type=signal_type, fetched_at=_py(fetched_at)))
        try:
            with Session(self.engine) as s, s.begin():
                s.execute(delete(SignalCacheRow).where(and_(
                    SignalCacheRow.provider == provider, SignalCacheRow.zone == zone,
                    SignalCacheRow.signal.in_(signals), SignalCacheRow.ts >= _py(start),
                    SignalCacheRow.ts < _py(upto))))
                if rows:
                    s.execute(insert(SignalCacheRow), rows)
        except OperationalError as exc:
            raise self._unavailable(exc, f"caching {provider} {zone}") from exc
        return len(rows)

    def log_fetch(self, **fields: Any) -> None:
        """Record one fetch attempt (columns of ``signal_fetches``)."""
        for k in ("start", "end", "fetched_at", "newest_value_at"):
            if fields.get(k) is not None:
                fields[k] = _py(fields[k])
        try:
            with Session(self.engine) as s, s.begin():
                s.add(SignalFetchRow(**fields))
        except OperationalError as exc:
            raise self._unavailable(exc, "logging a fetch") from exc

    def fetches(self, provider: str | None = None) -> pd.DataFrame:
        """The fetch log, oldest first (optionally of one provider)."""
        q = select(SignalFetchRow).order_by(SignalFetchRow.id)
        if provider:
            q = q.where(SignalFetchRow.provider == provider)
        cols = ("provider", "zone", "signal", "start", "end", "fetched_at", "status",
                "requests", "hours_stored", "newest_value_at", "age_hours", "detail")
        with Session(self.engine) as s:
            return pd.DataFrame([{c: getattr(r, c) for c in cols} for r in s.scalars(q)],
                                columns=list(cols))

    def newest(self, provider: str, zone: str, signal: str) -> pd.Timestamp | None:
        """Start of the newest cached hour with a value, or ``None``."""
        q = select(SignalCacheRow.ts).where(and_(
            SignalCacheRow.provider == provider, SignalCacheRow.zone == zone,
            SignalCacheRow.signal == signal, SignalCacheRow.value.is_not(None))
        ).order_by(SignalCacheRow.ts.desc()).limit(1)
        with Session(self.engine) as s:
            ts = s.execute(q).scalar()
        return None if ts is None else pd.Timestamp(ts).tz_convert("UTC")

    # ------------------------------------------------------------ published forecasts
    def keep_published(self, provider: str, zone: str, table: pd.DataFrame,
                       fetched_at: pd.Timestamp) -> int:
        """Keep one fetch of a provider's published forecast; returns rows newly stored.

        :func:`carbonsched.store.published_forecasts.write_published` on this cache's store
        (``table``: ``feature``, ``issued_at`` = publication time, ``ts``, ``value``).
        """
        from carbonsched.store.published_forecasts import write_published

        return write_published(self.store, provider, zone, table, fetched_at)

    def read_published(self, provider: str, zone: str, features: list[str],
                       issued_at: pd.Timestamp, start: pd.Timestamp,
                       end: pd.Timestamp) -> pd.DataFrame:
        """The kept forecasts of ``provider`` for ``zone`` knowable at ``issued_at``.

        :func:`carbonsched.store.published_forecasts.published_forecasts` (the latest
        publication at or before ``issued_at`` of each feature and hour of ``[start, end)``).
        """
        from carbonsched.store.published_forecasts import published_forecasts

        return published_forecasts(self.store, zone, features, issued_at, start, end,
                                   provider=provider)
