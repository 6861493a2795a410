"""The forecasts providers published, kept with their publication times (issue 35).

A provider's published forecast (Open-Meteo's weather forecast, Electricity Maps' and
WattTime's carbon-intensity forecasts, ENTSO-E's day-ahead wind and solar) is what a plan issued
at a given time could know. Fetched once and thrown away, it is lost to every later plan of a
past issue time and to every backtest; here each fetched value is kept in the
``published_forecasts`` table (migration ``0025_published_forecasts``), keyed by
(provider, zone, feature, published_at, ts), with the value and the time it was fetched.

* :func:`write_published` stores the rows of a fetch; the same key twice stores one row (the
  first value is kept: a publication does not change once published).
* :func:`published_forecasts` reads, for an issue time, the latest publication of each
  (provider, feature, hour) at or before that issue time: exactly what was knowable then.

Both run on SQLite and PostgreSQL (an ``INSERT ... ON CONFLICT DO NOTHING`` of each dialect).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import and_, func, select
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from carbonsched.errors import BackendUnavailableError, InputError
from carbonsched.store.signal_models import PublishedForecastRow

COLUMNS = ("provider", "zone", "feature", "published_at", "ts", "value", "fetched_at")
"""Columns of :func:`published_forecasts`' frame (times tz-aware UTC)."""

BATCH_ROWS = 4000
"""Rows per INSERT statement: 28,000 bind parameters over 7 columns, within SQLite's 32,766
(``SQLITE_MAX_VARIABLE_NUMBER`` since 3.32) and PostgreSQL's 65,535. [-]"""


def _utc(ts: Any, what: str) -> pd.Timestamp:
    t = pd.Timestamp(ts)
    if t.tzinfo is None:
        raise InputError(f"published forecasts: {what} {t} has no time zone; give it in UTC "
                         "(e.g. 2023-12-18T00:00Z)")
    return t.tz_convert("UTC")


def _unavailable(store: Any, exc: OperationalError, what: str) -> BackendUnavailableError:
    return BackendUnavailableError(
        f"database {store._safe_url()} failed while {what}: {' '.join(str(exc.orig).split())}")


def _insert(engine: Any, rows: list[dict[str, Any]]) -> Any:
    """One multi-row INSERT of the dialect that skips a row whose key is stored already."""
    if engine.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    return insert(PublishedForecastRow).values(rows).on_conflict_do_nothing(
        index_elements=["provider", "zone", "feature", "published_at", "ts"])


def write_published(store: Any, provider: str, zone: str, table: pd.DataFrame,
                    fetched_at: pd.Timestamp) -> int:
    """Keep the rows of one fetch of a provider's published forecast.

    Parameters
    ----------
    store
        A :class:`carbonsched.store.Store` (migrated).
    provider
        The provider's name in the providers file (e.g. ``open-meteo``).
    zone
        The grid zone of a grid forecast; the site id of a weather forecast.
    table
        Long rows ``feature``, ``issued_at`` (the publication time), ``ts`` (hour start),
        ``value`` in the feature's unit (:data:`carbonsched.forecasts.exogenous.FEATURES`);
        tz-aware times. Rows without a finite value are not kept.
    fetched_at
        When the rows were fetched (tz-aware).

    Returns
    -------
    int
        Rows newly stored (a key stored already counts 0: the first value is kept).

    Raises
    ------
    InputError
        A naive time.
    BackendUnavailableError
        The database failed.
    """
    if table is None or not len(table):
        return 0
    fetched = _utc(fetched_at, "fetched_at").to_pydatetime()
    v = table["value"].to_numpy(float)
    ok = np.isfinite(v)
    pub = pd.DatetimeIndex(table["issued_at"])[ok]
    ts = pd.DatetimeIndex(table["ts"])[ok]
    if pub.tz is None or ts.tz is None:
        raise InputError(f"published forecasts of {provider} {zone}: naive publication or hour "
                         "times; give them in UTC")
    pub, ts = pub.tz_convert("UTC"), ts.tz_convert("UTC")
    feats = table["feature"].to_numpy()[ok]
    rows = [dict(provider=provider, zone=zone, feature=str(f), published_at=p.to_pydatetime(),
                 ts=t.to_pydatetime(), value=float(x), fetched_at=fetched)
            for f, p, t, x in zip(feats, pub, ts, v[ok], strict=True)]
    if not rows:
        return 0
    # a fetch repeats its own key when two rows of it share one (a duplicated hour)
    rows = list({(r["feature"], r["published_at"], r["ts"]): r for r in rows}.values())
    stored = 0
    try:
        with store.engine.begin() as conn:
            for i in range(0, len(rows), BATCH_ROWS):
                # one statement per batch: its rowcount is the rows inserted, skips excluded
                res = conn.execute(_insert(store.engine, rows[i:i + BATCH_ROWS]))
                stored += max(res.rowcount, 0)
    except OperationalError as exc:
        raise _unavailable(store, exc, f"keeping the published forecasts of {provider} "
                                       f"{zone}") from exc
    return stored


def published_forecasts(store: Any, zone: str, feature: str | list[str] | None,
                        issued_at: pd.Timestamp, start: pd.Timestamp, end: pd.Timestamp,
                        provider: str | None = None) -> pd.DataFrame:
    """What a forecaster issued at ``issued_at`` could read of the kept provider forecasts.

    For each (provider, feature, hour ``ts`` in ``[start, end)``), the latest publication at or
    before ``issued_at`` (``published_at <= issued_at``: a value published one second later
    is not returned), whenever it was fetched. For the backtests and the re-plan of a past
    issue time (:meth:`carbonsched.adapters.signals.live.LiveSignals.exogenous`).

    Parameters
    ----------
    store
        A :class:`carbonsched.store.Store` (migrated).
    zone
        The grid zone (grid forecasts) or the site id (weather forecasts), as written.
    feature
        One feature name, several, or ``None`` for every feature kept for ``zone``.
    issued_at
        The issue time (tz-aware).
    start, end
        The hours asked for, ``[start, end)`` (tz-aware hour starts).
    provider
        Only this provider's publications (``None``: every provider's, each on its own rows).

    Returns
    -------
    DataFrame
        Columns :data:`COLUMNS`, one row per (provider, feature, ts), sorted by provider,
        feature and ts; empty when nothing was published by ``issued_at``. ``value`` is in the
        feature's unit (:data:`carbonsched.forecasts.exogenous.FEATURES`).

    Raises
    ------
    InputError
        A naive time.
    BackendUnavailableError
        The database failed.
    """
    t = _utc(issued_at, "issued_at").to_pydatetime()
    a = _utc(start, "start").to_pydatetime()
    b = _utc(end, "end").to_pydatetime()
    P = PublishedForecastRow
    cond = [P.zone == zone, P.ts >= a, P.ts < b, P.published_at <= t]
    if isinstance(feature, str):
        cond.append(P.feature == feature)
    elif feature is not None:
        cond.append(P.feature.in_(list(feature)))
    if provider is not None:
        cond.append(P.provider == provider)
    latest = (select(P.provider, P.feature, P.ts, func.max(P.published_at).label("pub"))
              .where(and_(*cond)).group_by(P.provider, P.feature, P.ts).subquery())
    q = (select(P.provider, P.zone, P.feature, P.published_at, P.ts, P.value, P.fetched_at)
         .join(latest, and_(P.provider == latest.c.provider, P.feature == latest.c.feature,
                            P.ts == latest.c.ts, P.published_at == latest.c.pub))
         .where(P.zone == zone).order_by(P.provider, P.feature, P.ts))
    try:
        with Session(store.engine) as s:
            rows = s.execute(q).all()
    except OperationalError as exc:
        raise _unavailable(store, exc, f"reading the published forecasts of {zone}") from exc
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    for c in ("published_at", "ts", "fetched_at"):
        frame[c] = pd.to_datetime(frame[c], utc=True)
    frame["value"] = frame["value"].astype(float)
    return frame
