"""Baseline forecasters every model must beat: seasonal naive and hour-of-day climatology.

Both follow the contract of :mod:`carbonsched.forecasts.base` and compute their intervals from
their own in-sample errors (empirical quantiles, no Gaussian assumption).

References
----------
Hyndman, R.J. & Athanasopoulos, G., *Forecasting: Principles and Practice*, 3rd ed., OTexts,
2021, §5.2 "Some simple forecasting methods" (seasonal naive, mean method) and §5.5
"Distributional forecasts and prediction intervals" (intervals from empirical residuals).
https://otexts.com/fpp3/
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from carbonsched.errors import ForecastError
from carbonsched.forecasts.base import Forecaster
from carbonsched.forecasts.localclock import local_wall_hours, to_local_clock

#: Lower/upper probabilities of the two central intervals, in the contract's column names.
INTERVAL_PROBS: dict[str, float] = {"lo_95": 0.025, "lo_80": 0.10, "hi_80": 0.90, "hi_95": 0.975}


def empirical_quantiles(errors: np.ndarray | pd.Series) -> dict[str, float]:
    """2.5/10/90/97.5 % quantiles of ``errors`` (NaN ignored) keyed by interval column.

    Parameters
    ----------
    errors
        Additive forecast errors (actual - forecast), shape ``(n,)``. [unit of the series]

    Returns
    -------
    dict
        ``{"lo_95": q2.5, "lo_80": q10, "hi_80": q90, "hi_95": q97.5}`` (numpy's default
        linear interpolation, Hyndman & Fan 1996 type 7).

    Raises
    ------
    ForecastError
        If ``errors`` holds no finite value.
    """
    e = np.asarray(errors, dtype=float)
    e = e[np.isfinite(e)]
    if e.size == 0:
        raise ForecastError("no finite in-sample errors to calibrate the intervals on; "
                            "fit on a longer history with fewer gaps")
    return {k: float(np.quantile(e, p)) for k, p in INTERVAL_PROBS.items()}


def seasonal_lookup(history: pd.Series, horizon: pd.DatetimeIndex, season_hours: int,
                    max_seasons: int = 7, tz: str | None = None) -> pd.Series:
    """Value of the same position one (or more) seasons before each horizon hour.

    For horizon hour ``t`` at lead ``k`` (0-based hours after the first horizon hour, which is
    the issue time), the value is ``history[t - m·s]`` with ``m = ceil((k+1)/s)``, the smallest
    whole number of seasons that lands strictly before the issue time. A missing value falls
    back to ``t - (m+1)·s``, ... up to ``max_seasons`` seasons, then to the last observation.

    Parameters
    ----------
    history
        Hourly UTC series ending strictly before ``horizon[0]``, shape ``(n,)``.
    horizon
        Hourly UTC forecast hours, shape ``(h,)``.
    season_hours
        Season length. [h]
    max_seasons
        How many seasons back to look for a non-missing value.
    tz
        IANA zone: lags are taken in local wall-clock hours (the same local hour ``m`` seasons
        before; :mod:`carbonsched.forecasts.localclock`). ``None``: UTC hours.

    Returns
    -------
    Series
        Shape ``(h,)`` on ``horizon``.
    """
    s = pd.Timedelta(hours=season_hours)
    out = pd.Series(np.nan, index=horizon, dtype=float)
    if tz is not None:
        source = to_local_clock(history, tz)
        wall = local_wall_hours(horizon, tz)
        leads = ((wall - wall[0]) / pd.Timedelta(hours=1)).to_numpy().astype(int)
    else:
        source = history
        wall = horizon
        leads = np.arange(len(horizon))
    m0 = np.ceil((leads + 1) / season_hours).astype(int)
    for extra in range(max_seasons):
        need = out.isna().to_numpy()
        if not need.any():
            break
        src = wall[need] - s * (m0[need] + extra)
        out.iloc[np.flatnonzero(need)] = source.reindex(src).to_numpy(float)
    if out.isna().any():
        last = history.dropna()
        out = out.fillna(float(last.iloc[-1]))
    return out


class SeasonalNaive(Forecaster):
    """Seasonal naive: each hour repeats the same hour one season before the issue time.

    ``mean[t] = y[t - m·s]`` with ``m = ceil((lead+1)/s)``: for a 24 h horizon issued at 00:00
    and ``s = 24`` this is yesterday's profile repeated. Intervals are the empirical 2.5/10/90/
    97.5 % quantiles of the in-sample seasonal differences ``y[t] - y[t - m·s]`` (the
    forecaster's own historical errors), per ``m``; added to the mean (additive).

    Parameters
    ----------
    season_hours
        Season length [h]: 24 (daily profile) or 168 (weekly). Default 24.
    clip
        Optional ``(low, high)`` bounds for every output column (e.g. ``(0, 1)`` for an index).
    tz
        IANA zone whose clock the signal follows: seasons are counted in local wall-clock hours,
        so across a DST change the forecast peak stays at the same local hour
        (:mod:`carbonsched.forecasts.localclock`). ``None`` (default): UTC hours.

    Source: Hyndman & Athanasopoulos, FPP3 §5.2 (seasonal naive method).
    """

    name = "seasonal-naive"

    def __init__(self, season_hours: int = 24, clip: tuple[float, float] | None = None,
                 tz: str | None = None) -> None:
        if season_hours < 1:
            raise ForecastError(f"SeasonalNaive: season_hours must be >= 1, got {season_hours}")
        super().__init__(season_hours=season_hours, clip=clip, tz=tz)
        self.season_hours = int(season_hours)
        self.clip = clip
        self.tz = tz
        self._q: dict[int, dict[str, float]] = {}

    @classmethod
    def get_test_params(cls) -> list[dict[str, Any]]:
        """Return daily and weekly seasons."""
        return [{"season_hours": 24}, {"season_hours": 168}]

    def _fit(self, y: pd.Series, X: pd.DataFrame | None) -> None:
        self._q = {}
        if self.tz is not None:
            y = to_local_clock(y, self.tz)
        for m in (1, 2, 3, 4):
            lag = m * self.season_hours
            if lag >= len(y):
                break
            d = (y - y.shift(lag)).to_numpy(float)
            if np.isfinite(d).sum() >= 24:
                self._q[m] = empirical_quantiles(d)
        if not self._q:
            raise ForecastError(
                f"{self.name}: fewer than 24 hours with a value one season "
                f"({self.season_hours} h) earlier; fit on at least "
                f"{self.season_hours + 24} hours of history")

    def _predict(self, history: pd.Series, horizon: pd.DatetimeIndex,
                 X: pd.DataFrame | None) -> pd.DataFrame:
        mean = seasonal_lookup(history, horizon, self.season_hours, tz=self.tz)
        out = pd.DataFrame({"mean": mean})
        m = np.ceil((np.arange(len(horizon)) + 1) / self.season_hours).astype(int)
        mmax = max(self._q)
        for col in INTERVAL_PROBS:
            q = np.array([self._q[min(int(mi), mmax)][col] for mi in m])
            out[col] = mean.to_numpy(float) + q
        if self.clip is not None:
            out = out.clip(*self.clip)
        return out


class Climatology(Forecaster):
    """Hour-of-day mean of the last ``days`` days before the issue time.

    ``mean[t] = mean(y[d, hour(t)] for the last `days` days before issue)`` (NaN ignored).
    Intervals: empirical quantiles of the in-sample errors of that same rule, computed at
    fit time over every day of the fitted history (each day forecast from the ``days``
    days before it).

    Parameters
    ----------
    days
        Length of the averaging window. [d] Default 28.
    clip
        Optional ``(low, high)`` bounds for every output column.

    Source: Hyndman & Athanasopoulos, FPP3 §5.2 (mean method, by season).
    """

    name = "climatology"

    def __init__(self, days: int = 28, clip: tuple[float, float] | None = None) -> None:
        if days < 1:
            raise ForecastError(f"Climatology: days must be >= 1, got {days}")
        super().__init__(days=days, clip=clip)
        self.days = int(days)
        self.clip = clip
        self._q: dict[str, float] = {}

    @classmethod
    def get_test_params(cls) -> list[dict[str, Any]]:
        """Return a one-week and a four-week window."""
        return [{"days": 7}, {"days": 28}]

    def _profile(self, history: pd.Series, issued_at: pd.Timestamp) -> pd.Series:
        # the window is the `days` days before the issue time by timestamp, not the last rows:
        # a history that stops early must not reach further back
        tail = history[history.index >= issued_at - pd.Timedelta(days=self.days)]
        prof = tail.groupby(tail.index.hour).mean()
        return prof.reindex(range(24))

    def _fit(self, y: pd.Series, X: pd.DataFrame | None) -> None:
        # Rolling same-hour mean of the previous `days` days, strictly before each day.
        wide = y.to_frame("v").assign(day=y.index.floor("D"), hour=y.index.hour)
        tab = wide.pivot_table(index="day", columns="hour", values="v", aggfunc="mean",
                               dropna=False)
        clim = tab.shift(1).rolling(self.days, min_periods=1).mean()
        err = (tab - clim).to_numpy(float).ravel()
        self._q = empirical_quantiles(err)

    def _predict(self, history: pd.Series, horizon: pd.DatetimeIndex,
                 X: pd.DataFrame | None) -> pd.DataFrame:
        prof = self._profile(history, horizon[0])
        if prof.isna().any():
            prof = prof.fillna(float(history.dropna().iloc[-self.days * 24:].mean()))
        mean = pd.Series(prof.to_numpy(float)[horizon.hour], index=horizon)
        out = pd.DataFrame({"mean": mean})
        for col, q in self._q.items():
            out[col] = mean + q
        if self.clip is not None:
            out = out.clip(*self.clip)
        return out
