"""Day-ahead forecasts of hourly grid carbon intensity: a per-lead OLS on lagged values.

:class:`LeadRegression` regresses the value ``k`` hours after the issue time on features known
at issue time, with one ordinary-least-squares fit (minimum-norm, ``numpy.linalg.lstsq``) per
lead hour ``k``:

=========  =========================================================================
feature    definition (``T`` = issue time, ``t = T + k``, ``m_s = ceil((k+1)/s)``)
=========  =========================================================================
``last``   last observation ``y[T-1]`` (persistence; dominates the first leads)
``s24``    same hour on the latest observed day, ``y[t - 24·m_24]`` (daily profile)
``s168``   same hour of the week, ``y[t - 168·m_168]`` (weekday/weekend pattern)
``mean7``  mean of ``y[t - 24·(m_24 + j)]``, ``j = 0..6`` (the profile, de-noised)
``mean24`` mean of the 24 hours before ``T`` (level)
=========  =========================================================================

Every issue hour of the fitted history is a training sample (not only 00:00), so the model
serves any issue time; the coefficients depend on the lead, the diurnal shape is carried by
the features. This is the "direct" multi-horizon strategy with lagged-value features
(Ben Taieb et al., *Expert Systems with Applications* 39(8), 2012,
doi:10.1016/j.eswa.2012.01.039), and the lag set follows the day-ahead CI literature's use of
the previous day and week (Maji et al., DACF, ACM e-Energy 2022, doi:10.1145/3538637.3538849).

Intervals: split conformal on held-out residuals by lead (:class:`~carbonsched.forecasts.base.
EmpiricalIntervals`): the coefficients are first fitted on the earlier ``1 - calib_fraction`` of
the issue times, the relative residuals of the later issue times calibrate the intervals, then
the coefficients are refitted on all issue times.

Missing values: hours missing in the history are filled for the *features* only (same hour
1..7 days earlier, then the last value); rows whose *target* is missing are dropped from the fit.

Speed: a fit on 8 weeks takes 0.1-0.2 s on one core (2 x 48 OLS of ~1300 x 6); ``predict``
reads only the last ``history_hours`` of the history (~15 ms), so a year-long replay can refit
weekly and pass the latest ``y`` to each daily ``predict``.

Measured (``bench/results/signal_eval.md``: 16 Electricity Maps zones of 2023, 77 day-ahead
issues at 00:00 UTC over 11 held-out weeks, refitted on the 8 weeks before each): mean MAPE
12.3 % against 13.6 % for seasonal naive (24 h), 15.1 % for a 7-day climatology and 18.1 % for
seasonal naive (168 h); lowest MAPE in 13 of 16 zones. Interval coverage 0.77 (80 %) and 0.93
(95 %): slightly below nominal, as for the baselines (the weeks ahead differ from the weeks
the residuals came from).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from carbonsched.errors import ForecastError
from carbonsched.forecasts.base import EmpiricalIntervals, Forecaster
from carbonsched.forecasts.localclock import local_wall_hours, to_local_clock

FEATURES = ("const", "last", "s24", "s168", "mean7", "mean24")


def fill_for_features(y: pd.Series) -> pd.Series:
    """Fill missing hours for feature building: same hour 1..7 days earlier, then last value.

    Parameters
    ----------
    y
        Hourly series, shape ``(n,)``; may hold NaN.

    Returns
    -------
    Series
        Shape ``(n,)``; NaN only before the first observation.
    """
    f = y.copy()
    for j in range(1, 8):
        if not f.isna().any():
            break
        f = f.fillna(y.shift(24 * j))
    return f.ffill()


def lead_features(filled: np.ndarray, issue_pos: np.ndarray, lead: int) -> np.ndarray:
    """Feature matrix for issue positions ``issue_pos`` and one ``lead``.

    Parameters
    ----------
    filled
        Gap-filled hourly values, shape ``(n,)``; position ``i`` is hour ``i``.
    issue_pos
        Positions of the issue times, shape ``(r,)``; only ``filled[:i]`` is read for issue
        position ``i``.
    lead
        Hours after the issue time (0-based). [h]

    Returns
    -------
    ndarray
        Shape ``(r, 6)`` in the order of :data:`FEATURES`; NaN where a lag falls before the
        start of ``filled``. Missing ``s168`` falls back to ``s24``, ``mean7`` averages the
        days available, missing ``s24`` falls back to ``last``.
    """
    n = len(filled)
    pad = np.concatenate([np.full(1, np.nan), filled])  # pad[p + 1] = filled[p]; p=-1 -> NaN

    def at(pos: np.ndarray) -> np.ndarray:
        p = np.where((pos >= 0) & (pos < n), pos, -1)
        return pad[p + 1]

    t = issue_pos + lead
    m24 = (lead // 24) + 1
    m168 = (lead // 168) + 1
    last = at(issue_pos - 1)
    s24 = at(t - 24 * m24)
    s168 = at(t - 168 * m168)
    days = np.stack([at(t - 24 * (m24 + j)) for j in range(7)], axis=1)
    with np.errstate(all="ignore"):
        cnt = np.isfinite(days).sum(axis=1)
        mean7 = np.where(cnt > 0, np.nansum(days, axis=1) / np.maximum(cnt, 1), np.nan)
        win = np.stack([at(issue_pos - j) for j in range(1, 25)], axis=1)
        cw = np.isfinite(win).sum(axis=1)
        mean24 = np.where(cw > 0, np.nansum(win, axis=1) / np.maximum(cw, 1), np.nan)
    s24 = np.where(np.isfinite(s24), s24, last)
    s168 = np.where(np.isfinite(s168), s168, s24)
    mean7 = np.where(np.isfinite(mean7), mean7, s24)
    mean24 = np.where(np.isfinite(mean24), mean24, last)
    return np.column_stack([np.ones(len(issue_pos)), last, s24, s168, mean7, mean24])


class LeadRegression(Forecaster):
    """Per-lead OLS on lagged values (see the module docstring for features and sources).

    Parameters
    ----------
    max_lead_hours
        Leads with their own coefficients [h]; longer leads reuse the last lead's. Default 48.
    train_days
        Only the last ``train_days`` days of ``y`` are used to fit. [d] Default 56 (8 weeks).
    calib_fraction
        Share of the (latest) issue times held out to calibrate the intervals. Default 0.5
        (measured on the 16 zones: 80 %/95 % coverage 0.773/0.928, against 0.760/0.919 with
        0.25; the point forecast does not depend on it).
    relative_intervals
        Calibrate intervals on relative residuals (errors grow with the level, as for carbon
        intensity) or additive ones (an index in [0, 1]). Default True.
    clip
        ``(low, high)`` bounds for every output column; default ``(0, inf)`` (non-negative).
    history_hours
        Hours of history read at predict time. [h] Default 24·8 + 168 (covers every lag).
    tz
        IANA zone whose clock the signal follows: the series is re-indexed by local wall-clock
        hours before fitting and predicting, so ``s24``, ``s168`` and ``mean7`` are the same
        *local* hour on earlier days and the daily peak keeps its local hour across a DST change
        (:mod:`carbonsched.forecasts.localclock`). ``None`` (default): UTC hours.
    """

    name = "ci-lead-ols"

    def __init__(
        self,
        max_lead_hours: int = 48,
        train_days: int = 56,
        calib_fraction: float = 0.5,
        relative_intervals: bool = True,
        clip: tuple[float, float] = (0.0, float("inf")),
        history_hours: int = 24 * 8 + 168,
        tz: str | None = None,
    ) -> None:
        if max_lead_hours < 1:
            raise ForecastError(f"{self.name}: max_lead_hours must be >= 1, got {max_lead_hours}")
        if not 0.0 < calib_fraction < 1.0:
            raise ForecastError(
                f"{self.name}: calib_fraction must be in (0, 1), got {calib_fraction}")
        super().__init__(max_lead_hours=max_lead_hours, train_days=train_days,
                         calib_fraction=calib_fraction, relative_intervals=relative_intervals,
                         clip=clip, history_hours=history_hours, tz=tz)
        self.tz = tz
        self.max_lead_hours = int(max_lead_hours)
        self.train_days = int(train_days)
        self.calib_fraction = float(calib_fraction)
        self.relative_intervals = bool(relative_intervals)
        self.clip = clip
        self.history_hours = int(history_hours)
        self.coef_: np.ndarray | None = None  # (max_lead_hours, 6)
        self.intervals_: EmpiricalIntervals | None = None

    @classmethod
    def get_test_params(cls) -> list[dict[str, Any]]:
        """Return the default and a short-lead, short-window setting."""
        return [{}, {"max_lead_hours": 6, "train_days": 21}]

    # --- fitting ------------------------------------------------------------------------
    def _design(self, y: pd.Series) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Stack (issue_pos, lead) samples: features (r, L, 6), target (r, L), issue positions."""
        filled = fill_for_features(y).to_numpy(float)
        target = y.to_numpy(float)
        first = int(np.flatnonzero(np.isfinite(filled))[0])
        start = first + min(24, len(y) // 2)
        issue_pos = np.arange(start, len(y))
        L = self.max_lead_hours
        F = np.full((len(issue_pos), L, len(FEATURES)), np.nan)
        Y = np.full((len(issue_pos), L), np.nan)
        for k in range(L):
            F[:, k, :] = lead_features(filled, issue_pos, k)
            tp = issue_pos + k
            ok = tp < len(y)
            Y[ok, k] = target[tp[ok]]
        return F, Y, issue_pos

    def _ols(self, F: np.ndarray, Y: np.ndarray) -> np.ndarray:
        """One OLS per lead; a lead with too few rows gets the seasonal-naive coefficients."""
        naive = np.zeros(len(FEATURES))
        naive[FEATURES.index("s24")] = 1.0
        coef = np.tile(naive, (F.shape[1], 1))
        for k in range(F.shape[1]):
            Xk, yk = F[:, k, :], Y[:, k]
            ok = np.isfinite(yk) & np.isfinite(Xk).all(axis=1)
            if ok.sum() < 4 * len(FEATURES):
                continue
            # Lead 23 has s24 == last (both are y[T-1]), so the design can be rank-deficient:
            # numpy's SVD least squares gives the minimum-norm fit with the singular-value
            # cutoff eps * max(M, N) (numpy.linalg.lstsq, rcond=None). statsmodels' own pinv
            # cutoff changed in 0.15 and kept a near-zero singular value, which turned an exactly
            # periodic series into a 1.3 % error (tests/forecasts/test_forecast_green_surplus.py).
            coef[k] = np.linalg.lstsq(Xk[ok], yk[ok], rcond=None)[0]
        return coef

    def _fit(self, y: pd.Series, X: pd.DataFrame | None) -> None:
        y = y.iloc[-24 * self.train_days:]
        if self.tz is not None:
            y = to_local_clock(y, self.tz)
        F, Y, _ = self._design(y)
        n = F.shape[0]
        split = int(round(n * (1.0 - self.calib_fraction)))
        # Calibration rows must not have targets inside the fitting rows' future: drop the
        # fitting rows whose targets reach past the split (no look-ahead into the held-out).
        Yfit = Y[:split].copy()
        last_target = np.arange(split)[:, None] + np.arange(Y.shape[1])[None, :]
        Yfit[last_target >= split] = np.nan
        coef_fit = self._ols(F[:split], Yfit)
        pred = np.einsum("rlf,lf->rl", F[split:], coef_fit)
        res = pd.DataFrame({
            "lead": np.tile(np.arange(Y.shape[1]), n - split),
            "actual": Y[split:].ravel(),
            "forecast": pred.ravel(),
        }).dropna()
        res["residual"] = res["actual"] - res["forecast"]
        res = res[res["forecast"].abs() > 1e-9] if self.relative_intervals else res
        res["rel_residual"] = res["residual"] / res["forecast"]
        if res.empty:
            raise ForecastError(f"{self.name}: no held-out residuals to calibrate intervals; "
                                "fit on a longer history (at least 4 days)")
        self.intervals_ = EmpiricalIntervals(relative=self.relative_intervals).fit(res)
        self.coef_ = self._ols(F, Y)

    # --- predicting ---------------------------------------------------------------------
    def _point(self, history: pd.Series, horizon: pd.DatetimeIndex) -> pd.Series:
        assert self.coef_ is not None
        # Align by timestamp: the features read position len(hist) as the issue time, so the
        # window must end at the hour before it even when ``history`` stops earlier.
        if self.tz is not None:
            # positions are local wall-clock hours; each horizon hour's lead is its wall-clock
            # distance from the issue hour (23 or 25 UTC hours back is "yesterday" across DST)
            wall = local_wall_hours(horizon, self.tz)
            source = to_local_clock(history, self.tz)
            leads = ((wall - wall[0]) / pd.Timedelta(hours=1)).to_numpy().astype(int)
            end = wall[0] - pd.Timedelta(hours=1)
        else:
            source = history
            leads = np.arange(len(horizon))
            end = horizon[0] - pd.Timedelta(hours=1)
        window = pd.date_range(end=end, periods=self.history_hours, freq="h")
        hist = source.reindex(window)
        filled = fill_for_features(hist).to_numpy(float)
        pos = np.array([len(filled)])
        mean = np.empty(len(horizon))
        for i, k in enumerate(leads):
            f = lead_features(filled, pos, int(k))[0]
            mean[i] = f @ self.coef_[min(int(k), self.max_lead_hours - 1)]
        return pd.Series(mean, index=horizon)

    def _predict(self, history: pd.Series, horizon: pd.DatetimeIndex,
                 X: pd.DataFrame | None) -> pd.DataFrame:
        assert self.intervals_ is not None
        mean = self._point(history, horizon)
        if self.clip is not None:
            mean = mean.clip(*self.clip)
        out = self.intervals_.apply(mean)
        if self.clip is not None:
            out = out.clip(*self.clip)
        return out


def default_ci_forecaster(tz: str | None = None) -> Forecaster:
    """The carbon-intensity forecaster the planner uses by default.

    :class:`LeadRegression` with its defaults (8 weeks of history). Chosen on the measurement
    in ``bench/results/signal_eval.md`` (day-ahead issues at 00:00 UTC over 11 held-out weeks
    of the 16 Electricity Maps zones of 2023, each fitted on the 8 weeks before): mean MAPE
    12.3 % against 13.6 % for :class:`~carbonsched.forecasts.baselines.SeasonalNaive` (24 h),
    best in 13 of 16 zones (seasonal naive wins CA-ON and CL-SIC, climatology SG).

    Parameters
    ----------
    tz
        The site's IANA zone: lags in local wall-clock hours (a grid's load, hence much of its
        carbon intensity, follows people's clocks). ``None``: UTC lags, as measured above.

    Returns
    -------
    Forecaster
        An unfitted forecaster.
    """
    return LeadRegression(tz=tz)
