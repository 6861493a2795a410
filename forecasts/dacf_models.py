"""Day-ahead carbon-intensity forecasters for the DACF protocol (issue at 00:00 UTC, 24 h).

Every model here is a :class:`~carbonsched.forecasts.base.Forecaster`: history is cut strictly
before ``issued_at`` by the base class, and exogenous inputs (day-ahead GFS weather, published
operator forecasts) are indexed by the hour they are *for*. The models share one feature
construction, :func:`day_ahead_design`, and one interval method (split conformal by lead hour,
optionally rolling), implemented in :class:`DayAheadModel`.

Features of a forecast issued at ``T`` for hour ``t = T + lead`` (``0 <= lead < 24``), all known
at ``T``:

* ``lag_k = y[T - k h]`` for ``k = 1..24`` (the last 24 observed hours), their mean ``mean24``;
* ``d1 = y[t - 24 h]``, ``d2 = y[t - 48 h]``, ``d7 = y[t - 168 h]`` (same hour 1, 2, 7 days
  earlier; all strictly before ``T`` for ``lead < 24``);
* calendar of ``t``: ``lead``, hour of day, day of week, first two annual harmonics;
* exogenous columns at ``t``, their change since ``t - 24 h`` (``dx_<col>``), and for wind
  speed its cube ``gfs_wind_speed_m_per_s_cubed`` [m3/s3] (wind power grows with the cube
  of the wind speed below rated speed; Burton et al., *Wind Energy Handbook*, 2nd ed.,
  Wiley 2011, §2.2, doi:10.1002/9781119992714).

Gaps in ``y`` are filled for *features only* by the value 24 h earlier, then the last value
(causal, never using later data); target hours that are missing are dropped from fitting.

Targets: ``"level"`` (``y[t]``) or ``"ratio"`` (``log(y[t] / d1)``, a forecast of the ratio to
the same hour yesterday, back-transformed as ``d1 * exp(pred)``).

Intervals: at fit time the last ``calib_days`` days are held out, the point model is fitted on
the rest and forecasts those days day-ahead; the relative residuals ``actual / mean - 1`` by
lead hour (pooled over leads within ±2 h) give the 2.5/10/90/97.5 % quantiles
(split conformal: Vovk, Gammerman & Shafer, *Algorithmic Learning in a Random World*, 2005,
doi:10.1007/b106715), then the model is refitted on everything. With ``window_days`` set, the
calibration set rolls: at each issue time it is the most recent ``window_days`` days of
out-of-sample residuals available before ``issued_at`` (the days forecast since the fit, topped
up with the latest held-out days). With ``aci_gamma`` set, the miscoverage levels themselves
adapt day by day (adaptive conformal inference: ``alpha <- alpha + gamma (alpha* - miss)``,
Gibbs & Candès, "Adaptive Conformal Inference Under Distribution Shift", NeurIPS 2021,
arXiv:2106.00170), which keeps the long-run coverage at the target under distribution shift.
Every residual used at an issue time comes from a forecast whose actual values were all
observed before that issue time.

Optional feature groups (:data:`FEATURE_GROUPS`, the ``features`` parameter of every model):
``"wind_trajectory"`` (the GFS wind forecast around ``t`` and over the forecast day,
:func:`wind_trajectory_features`) and ``"operator_change"`` (the operator's forecast against
the generation 24 h earlier, :func:`operator_change_features`); both read only exogenous rows
the protocol publishes at issue time.

Optional exogenous columns :func:`lagged_source_shares` (fuel-mix shares 24 h before the target
hour) are known at issue time because horizons are limited to 24 h.

Gap and error rules: a horizon above 24 h raises :class:`~carbonsched.errors.ForecastError`;
missing exogenous columns raise it too; naive, duplicated or uncovered time axes raise
:class:`~carbonsched.errors.TimeAxisError` in the base class.
"""

from __future__ import annotations

import abc
import warnings
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import statsmodels.api as sm

from carbonsched.errors import ForecastError, TimeAxisError, require_extra
from carbonsched.forecasts.aci import ALPHA_TARGET, aci_step
from carbonsched.forecasts.base import Forecaster
from carbonsched.timeaxis import ensure_hourly_utc, require_aware

HOUR = pd.Timedelta(hours=1)
DAY = pd.Timedelta(days=1)
LEADS = 24
_ALPHAS = ALPHA_TARGET  # miscoverage of the 80 % and 95 % intervals
_REFIT_MEMO_SIZE = 64  # fitted states kept per model with refits (over a year of weekly refits)


def _fill_for_features(y: pd.Series) -> pd.Series:
    """Causal gap filling for feature construction: value 24 h earlier, then last value."""
    return y.fillna(y.shift(24)).ffill()


def log_ratio_to_d1(feats: pd.DataFrame, col: str) -> np.ndarray:
    """``log(feats[col] / feats["d1"])``, shape ``(r,)``; NaN where undefined (a value <= 0).

    The scale-free form of a lagged feature (:class:`HourlyOLS`, :class:`LightGBMDayAhead`).
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        v = np.log(feats[col].to_numpy(float) / feats["d1"].to_numpy(float))
    return np.where(np.isfinite(v), v, np.nan)


def check_scale_free(model: DayAheadModel) -> None:
    """Refuse ``scale_free`` without the ratio target (its features are ratios to ``d1``).

    Raises
    ------
    ForecastError
        ``model.scale_free`` with ``model.target != "ratio"``.
    """
    if model.scale_free and model.target != "ratio":
        raise ForecastError(f"{model.name}: scale_free=True needs target='ratio' (the "
                            f"features are ratios to d1), got target={model.target!r}")


def lagged_source_shares(mix: pd.DataFrame, lag_hours: int = 24) -> pd.DataFrame:
    """Fuel-mix shares and total generation ``lag_hours`` before each hour, as exogenous columns.

    ``lag24_share_<source>[t] = P_source[t - 24 h] / sum_s P_s[t - 24 h]`` and
    ``lag24_total_mw[t] = sum_s P_s[t - 24 h]``: for a forecast issued at ``T`` for a horizon
    of at most 24 h every value read comes from hours before ``T``, so these columns are known
    at issue time (the models refuse horizons above 24 h). They let a CI model see *why*
    yesterday's CI was what it was (wind or gas) next to today's weather forecast.

    Parameters
    ----------
    mix
        Hourly UTC fuel mix, shape ``(n, k)``. [MW]
    lag_hours
        Lag; must be at least the horizon. [h]

    Returns
    -------
    DataFrame
        Shape ``(n + lag_hours, k + 1)`` on the hours the values are *for*. [-] and [MW]
    """
    if lag_hours < 1:
        raise ForecastError(f"lag_hours must be >= 1, got {lag_hours}")
    total = mix.sum(axis=1, skipna=False)
    out = mix.div(total.where(total > 0), axis=0).add_prefix(f"lag{lag_hours}_share_")
    out[f"lag{lag_hours}_total_mw"] = total
    idx = pd.date_range(mix.index[0], mix.index[-1] + lag_hours * HOUR, freq="h", name="ts")
    out = out.reindex(idx).shift(lag_hours)
    return out


#: Optional feature groups of :func:`day_ahead_design` (the models' ``features`` parameter).
FEATURE_GROUPS: tuple[str, ...] = ("wind_trajectory", "operator_change")
_WIND, _TEMPERATURE, _DSWRF = "gfs_wind_speed", "gfs_temperature", "gfs_dswrf"
#: Sources of :func:`operator_change_features`: operator column ``op_<src>_mw`` [MW].
OPERATOR_SOURCES: tuple[str, ...] = ("solar", "wind")
_LAG_TOTAL = "lag24_total_mw"


def check_features(features: Sequence[str]) -> tuple[str, ...]:
    """Validated feature-group names, in the order given (duplicates dropped).

    Raises
    ------
    ForecastError
        A bare string instead of a sequence of names, or a name not in :data:`FEATURE_GROUPS`.
    """
    if isinstance(features, str):
        raise ForecastError(f"features must be a sequence of group names, got the string "
                            f"{features!r}; write ({features!r},)")
    out = tuple(dict.fromkeys(str(f) for f in features))
    bad = [f for f in out if f not in FEATURE_GROUPS]
    if bad:
        raise ForecastError(f"unknown feature group(s) {bad}; choose from {list(FEATURE_GROUPS)}")
    return out


def _by_day(a: np.ndarray) -> np.ndarray:
    """Rows of one forecast day each, shape ``(d, 24)`` (design rows are issue by issue)."""
    return a.reshape(-1, LEADS)


def _per_day(v: np.ndarray) -> np.ndarray:
    """A value per forecast day ``(d,)`` repeated over its 24 leads, shape ``(d * 24,)``."""
    return np.repeat(v, LEADS)


def _within_day(a: np.ndarray, k: int) -> np.ndarray:
    """``a`` at lead ``+ k`` of the same forecast day, NaN where ``lead + k > 23``."""
    A = _by_day(a)
    out = np.full(A.shape, np.nan)
    out[:, : LEADS - k] = A[:, k:]
    return out.ravel()


def feature_columns(group: str, exog: Sequence[str], linear: bool = False) -> list[str]:
    """Names of the columns feature group ``group`` adds for the exogenous columns ``exog``.

    Parameters
    ----------
    group
        One of :data:`FEATURE_GROUPS`.
    exog
        Exogenous columns the model reads.
    linear
        Only the columns :class:`HourlyOLS` takes as regressors: those defined for every lead
        and per-day levels (wind at ``t - 1 h``, its daily max, min, mean cube and change, the
        temperature and irradiance daily terms, both operator terms); the within-day
        neighbours ``t + 1``/``t + 2 h`` are NaN at the last leads by construction.

    Returns
    -------
    list of str
        Empty when the region lacks the columns the group reads.
    """
    check_features((group,))
    out: list[str] = []
    if group == "wind_trajectory":
        for c in exog:
            if c.startswith(_WIND):
                out += ([f"{c}_prev1", f"{c}_day_max", f"{c}_day_min", f"{c}_cubed_day_mean",
                         f"dday_{c}_cubed_day_mean"] if linear else
                        [f"{c}_prev1", f"{c}_prev2", f"{c}_next1", f"{c}_next2", f"{c}_mean3",
                         f"{c}_day_max", f"{c}_day_min", f"{c}_day_std",
                         f"{c}_cubed_day_mean", f"dday_{c}_cubed_day_mean"])
            elif c.startswith(_TEMPERATURE):
                out += [f"{c}_day_mean", f"dday_{c}_day_mean"]
            elif c.startswith(_DSWRF):
                out += [f"{c}_day_sum", f"dday_{c}_day_sum"]
    else:
        for src in OPERATOR_SOURCES:
            if {f"op_{src}_mw", f"lag24_share_{src}", _LAG_TOTAL} <= set(exog):
                out += [f"op_{src}_change_share", f"op_{src}_change_share_day"]
    return out


def wind_trajectory_features(X: pd.DataFrame, exog: Sequence[str],
                             ts: pd.DatetimeIndex) -> dict[str, np.ndarray]:
    """The GFS forecast around each target hour and over its forecast day ("wind_trajectory").

    For a forecast issued at ``T`` for hour ``t = T + lead`` and every exogenous column
    ``w = gfs_wind_speed*`` [m/s] (``W`` the 24 values of the forecast day ``T .. T + 23 h``,
    ``W'`` the same hours a day earlier, ``T - 24 h .. T - 1 h``):

    * ``<w>_prev1 = w[t - 1 h]``, ``<w>_prev2 = w[t - 2 h]`` [m/s]: read from ``X`` at those
      hours; for leads 0 and 1 these are the rows before ``T``, the forecasts published for
      those hours, which ``X`` holds at issue time (never an observation);
    * ``<w>_next1 = w[t + 1 h]``, ``<w>_next2 = w[t + 2 h]`` [m/s] within the forecast day:
      NaN where ``lead + 1`` (``+ 2``) passes 23 — the hour after the day is not read;
    * ``<w>_mean3``: mean of ``w`` at ``t - 1``, ``t``, ``t + 1 h`` over those defined (at lead
      23 the mean of ``t - 1`` and ``t``) [m/s];
    * per forecast day, repeated over its 24 leads: ``<w>_day_max = max W``, ``<w>_day_min =
      min W``, ``<w>_day_std = std W`` (population) [m/s], ``<w>_cubed_day_mean = mean W^3``
      [m3/s3] (wind power grows with the cube of the speed, see the module docstring) and
      ``dday_<w>_cubed_day_mean = mean W^3 - mean W'^3`` [m3/s3];
    * for ``gfs_temperature*`` ``c`` [K]: ``<c>_day_mean`` and ``dday_<c>_day_mean`` (its change
      against the day before) [K];
    * for ``gfs_dswrf*`` ``c`` [W/m2]: ``<c>_day_sum`` [W h/m2 over the day] and
      ``dday_<c>_day_sum`` (change against the day before).

    Rows read from ``X``: ``T - 24 h .. T + 23 h``, all day-ahead forecasts published by the
    issue time under the DACF protocol (GFS for the whole forecast day is known at ``T``; the
    rows before ``T`` are earlier forecasts). Nothing after the forecast day ``T + 23 h`` is
    read. A day aggregate is NaN when one of its 24 hours is (e.g. ``X`` cut at a horizon below
    24 h); LightGBM routes NaN, :class:`HourlyOLS` leaves such rows out of its fit.
    Columns other than these prefixes add nothing; a region without GFS columns gets none.

    Parameters
    ----------
    X
        Exogenous inputs by the hour they are for.
    exog
        Columns of ``X`` the model reads (only those are used).
    ts
        Target hours of the design, issue by issue, leads 0..23, shape ``(d * 24,)``.

    Returns
    -------
    dict
        Column name -> values, shape ``(d * 24,)`` each (names: :func:`feature_columns`).
    """
    out: dict[str, np.ndarray] = {}
    for c in exog:
        if not c.startswith((_WIND, _TEMPERATURE, _DSWRF)):
            continue
        x = X[c]
        now = x.reindex(ts).to_numpy(float)
        Wp = _by_day(x.reindex(ts - DAY).to_numpy(float))
        W = _by_day(now)
        if c.startswith(_WIND):
            prev1 = x.reindex(ts - HOUR).to_numpy(float)
            nxt1 = _within_day(now, 1)
            out[f"{c}_prev1"] = prev1
            out[f"{c}_prev2"] = x.reindex(ts - 2 * HOUR).to_numpy(float)
            out[f"{c}_next1"] = nxt1
            out[f"{c}_next2"] = _within_day(now, 2)
            trio = np.column_stack([prev1, now, nxt1])
            n_ok = np.isfinite(trio).sum(axis=1)
            with np.errstate(invalid="ignore", divide="ignore"):
                out[f"{c}_mean3"] = np.where(n_ok > 0, np.nansum(trio, axis=1) / n_ok, np.nan)
            out[f"{c}_day_max"] = _per_day(W.max(axis=1))
            out[f"{c}_day_min"] = _per_day(W.min(axis=1))
            out[f"{c}_day_std"] = _per_day(W.std(axis=1))
            m3 = (W ** 3).mean(axis=1)
            out[f"{c}_cubed_day_mean"] = _per_day(m3)
            out[f"dday_{c}_cubed_day_mean"] = _per_day(m3 - (Wp ** 3).mean(axis=1))
        elif c.startswith(_TEMPERATURE):
            out[f"{c}_day_mean"] = _per_day(W.mean(axis=1))
            out[f"dday_{c}_day_mean"] = _per_day(W.mean(axis=1) - Wp.mean(axis=1))
        else:
            out[f"{c}_day_sum"] = _per_day(W.sum(axis=1))
            out[f"dday_{c}_day_sum"] = _per_day(W.sum(axis=1) - Wp.sum(axis=1))
    return out


def operator_change_features(feats: dict[str, np.ndarray],
                             exog: Sequence[str]) -> dict[str, np.ndarray]:
    """The operator's forecast against the generation 24 h earlier ("operator_change").

    For each source ``s`` in :data:`OPERATOR_SOURCES` whose operator forecast ``op_<s>_mw``
    [MW], lagged share ``lag24_share_<s>`` [-] and ``lag24_total_mw`` [MW]
    (:func:`lagged_source_shares`) are all exogenous columns of the model, with
    ``tot = lag24_total_mw[t]`` and ``mw24 = lag24_share_<s>[t] * tot`` (the source's
    generation at ``t - 24 h``):

    * ``op_<s>_change_share = (op_<s>_mw[t] - mw24) / tot`` [-]: the change of the source's
      share the operator expects against the same hour yesterday;
    * ``op_<s>_change_share_day = mean_day(op_<s>_mw - mw24) / mean_day(tot)`` [-]: the same
      over the forecast day (means over its 24 leads), repeated over the leads.

    NaN where ``tot <= 0`` or an input is missing. What is read: the operator forecast at the
    target hour (published day-ahead, known at issue time under the DACF protocol) and the fuel
    mix at ``t - 24 h``, strictly before the issue time for every lead 0..23. A region without
    these columns (no operator forecast of ``s``) adds nothing for ``s``.

    Parameters
    ----------
    feats
        Design columns so far (the exogenous columns at the target hours among them), each of
        shape ``(d * 24,)``.
    exog
        Exogenous columns of the model.

    Returns
    -------
    dict
        Column name -> values, shape ``(d * 24,)`` each (names: :func:`feature_columns`).
    """
    out: dict[str, np.ndarray] = {}
    if _LAG_TOTAL not in exog:
        return out
    tot = np.asarray(feats[_LAG_TOTAL], float)
    tot = np.where(tot > 0, tot, np.nan)
    for src in OPERATOR_SOURCES:
        op, sh = f"op_{src}_mw", f"lag24_share_{src}"
        if op not in exog or sh not in exog:
            continue
        diff = np.asarray(feats[op], float) - np.asarray(feats[sh], float) * tot
        out[f"op_{src}_change_share"] = diff / tot
        out[f"op_{src}_change_share_day"] = _per_day(_by_day(diff).mean(axis=1)
                                                     / _by_day(tot).mean(axis=1))
    return out


def day_ahead_design(
    y: pd.Series,
    X: pd.DataFrame | None,
    issue_times: pd.DatetimeIndex,
    exog: Sequence[str] = (),
    features: Sequence[str] = (),
) -> tuple[pd.DataFrame, np.ndarray]:
    """Feature table of day-ahead forecasts issued at ``issue_times`` for leads 0..23.

    Parameters
    ----------
    y
        Hourly UTC history, shape ``(n,)``. Only values strictly before each issue time are
        read for that issue's features. [g/kWh]
    X
        Exogenous inputs indexed by the hour they are for, shape ``(m, k)``; rows for every
        target hour (and 24 h before it, for the ``dx_`` changes) are read.
    issue_times
        Issue times (tz-aware UTC, on the hour), shape ``(d,)``.
    exog
        Columns of ``X`` to use.
    features
        Optional feature groups (:data:`FEATURE_GROUPS`) added after the exogenous columns:
        ``"wind_trajectory"`` (:func:`wind_trajectory_features`; reads ``X`` from 24 h before
        each issue time to the end of its forecast day) and ``"operator_change"``
        (:func:`operator_change_features`). A group reads only columns in ``exog``; one whose
        columns the region lacks adds nothing.

    Returns
    -------
    features : DataFrame
        Shape ``(d * 24, p)``, rows ordered issue by issue, lead 0..23; index ``ts`` (target
        hours); the column ``issue`` holds each row's issue time.
    target : ndarray
        Shape ``(d * 24,)``: ``y`` at the target hours (NaN where unknown or after the data).

    Raises
    ------
    ForecastError
        Exogenous columns requested without ``X`` or missing from it; an unknown feature group.
    """
    groups = check_features(features)
    yf = _fill_for_features(y)
    y0 = y.index[0]
    n = len(y)
    vals = yf.to_numpy(float)
    raw = y.to_numpy(float)
    issue_pos = ((issue_times - y0) // HOUR).to_numpy(np.int64)
    lead = np.tile(np.arange(LEADS), len(issue_times))
    ip = np.repeat(issue_pos, LEADS)
    tp = ip + lead

    def take(arr: np.ndarray, pos: np.ndarray) -> np.ndarray:
        ok = (pos >= 0) & (pos < n)
        out = np.full(pos.shape, np.nan)
        out[ok] = arr[pos[ok]]
        return out

    feats: dict[str, np.ndarray] = {"lead": lead.astype(float)}
    lags = np.column_stack([take(vals, ip - k) for k in range(1, 25)])
    for k in range(1, 25):
        feats[f"lag_{k}"] = lags[:, k - 1]
    feats["mean24"] = lags.mean(axis=1)
    feats["d1"] = take(vals, tp - 24)
    feats["d2"] = take(vals, tp - 48)
    feats["d7"] = take(vals, tp - 168)
    ts = pd.DatetimeIndex(np.repeat(issue_times, LEADS)) + pd.to_timedelta(lead, unit="h")
    ts.name = "ts"
    feats["hour"] = ts.hour.to_numpy(float)
    feats["dow"] = ts.day_of_week.to_numpy(float)
    doy = 2 * np.pi * ts.day_of_year.to_numpy(float) / 365.25
    for h in (1, 2):
        feats[f"sin{h}"] = np.sin(h * doy)
        feats[f"cos{h}"] = np.cos(h * doy)
    if exog:
        if X is None:
            raise ForecastError(f"exogenous columns {list(exog)} requested but X is None")
        miss = [c for c in exog if c not in X.columns]
        if miss:
            raise ForecastError(f"exogenous column(s) {miss} not in X (has {list(X.columns)})")
        now = X[list(exog)].reindex(ts).to_numpy(float)
        prev = X[list(exog)].reindex(ts - DAY).to_numpy(float)
        for j, c in enumerate(exog):
            feats[c] = now[:, j]
            feats[f"dx_{c}"] = now[:, j] - prev[:, j]
            if c.startswith("gfs_wind_speed"):
                feats[f"{c}_cubed"] = now[:, j] ** 3
                feats[f"dx_{c}_cubed"] = now[:, j] ** 3 - prev[:, j] ** 3
    if "wind_trajectory" in groups and X is not None and exog:
        feats.update(wind_trajectory_features(X, exog, ts))
    if "operator_change" in groups and exog:
        feats.update(operator_change_features(feats, exog))
    out = pd.DataFrame(feats, index=ts)
    out["issue"] = np.repeat(issue_times, LEADS)
    return out, take(raw, tp)


class DayAheadModel(Forecaster):
    """Base of the day-ahead models: shared features, target transform and conformal intervals.

    Parameters
    ----------
    exog
        Exogenous columns of ``X`` to use (day-ahead weather, operator forecasts). Default none.
    target
        ``"level"`` or ``"ratio"`` (log ratio to the same hour yesterday).
    calib_days
        Days held out at the end of the fitted history to calibrate the intervals [d]; ``0``
        skips the calibration (point forecasts via :meth:`backcast` only).
    window_days
        Rolling calibration window [d]; ``None`` keeps the fit-time calibration (static).
    aci_gamma
        Step of adaptive conformal inference per day [-]; ``None`` keeps the nominal levels.
    issue_hour
        Hour of day (UTC) of the issue times used for fitting. [h]
    refit_days
        Refit cadence [d]: a forecast issued ``refit_days`` or more after the latest fit first
        refits the point model on everything before its issue time (expanding window; the
        interval calibration and adaptive levels carry on). ``None`` (default) never refits.
        Each past day's residual comes from the fit in force at its issue time, so the
        calibration stays out of sample across refits.
    features
        Optional feature groups of :func:`day_ahead_design` (:data:`FEATURE_GROUPS`), e.g.
        ``("wind_trajectory", "operator_change")``; default none.

    Raises
    ------
    ForecastError
        An unknown target or feature group, or ``refit_days`` below 1.
    """

    requires_exog: ClassVar[bool] = False
    max_horizon_hours: ClassVar[int] = LEADS

    def __init__(self, exog: Sequence[str] = (), target: str = "level", calib_days: int = 90,
                 window_days: int | None = None, aci_gamma: float | None = None,
                 issue_hour: int = 0, refit_days: int | None = None,
                 features: Sequence[str] = (), **params: Any) -> None:
        feature_groups = check_features(features)
        if target not in ("level", "ratio"):
            raise ForecastError(f"{self.name}: target must be 'level' or 'ratio', got {target!r}")
        if refit_days is not None and int(refit_days) < 1:
            raise ForecastError(f"{self.name}: refit_days must be at least 1 day or None, "
                                f"got {refit_days!r}")
        super().__init__(exog=tuple(exog), target=target, calib_days=calib_days,
                         window_days=window_days, aci_gamma=aci_gamma, issue_hour=issue_hour,
                         refit_days=refit_days, features=feature_groups, **params)
        self.exog = tuple(exog)
        self.features = feature_groups
        self.target = target
        self.calib_days = int(calib_days)
        self.window_days = window_days
        self.aci_gamma = aci_gamma
        self.issue_hour = int(issue_hour)
        self.refit_days = None if refit_days is None else int(refit_days)
        self._generations: list[tuple[pd.Timestamp, Any]] = []
        self._calib: pd.DataFrame | None = None
        self._fit_end: pd.Timestamp | None = None
        self._X_full: pd.DataFrame | None = None

    # --- point model, implemented by subclasses -------------------------------------------------
    @abc.abstractmethod
    def _fit_point(self, feats: pd.DataFrame, z: np.ndarray) -> Any:
        """Fit the point model on features ``(r, p)`` and transformed target ``(r,)``."""

    @abc.abstractmethod
    def _predict_point(self, state: Any, feats: pd.DataFrame) -> np.ndarray:
        """Transformed-target prediction ``(r,)`` for features ``(r, p)``."""

    # --- helpers ----------------------------------------------------------------------------------
    def _issues(self, start: pd.Timestamp, end: pd.Timestamp) -> pd.DatetimeIndex:
        """Issue times at ``issue_hour`` with the whole day inside ``[start, end)``."""
        first = start.floor("D") + pd.Timedelta(hours=self.issue_hour)
        if first < start:
            first += DAY
        days = pd.date_range(first, end - DAY, freq="D")
        return days

    def _state_at(self, t: pd.Timestamp) -> tuple[pd.Timestamp, Any]:
        """The fit in force at issue time ``t``: ``(end of its training data, state)``.

        The latest fit whose training data end at or before ``t`` (the first fit for earlier
        issue times).
        """
        for end, state in reversed(self._generations):
            if end <= t:
                return end, state
        return self._generations[0]

    def _maybe_refit(self, y: pd.Series, X: pd.DataFrame | None, t: pd.Timestamp) -> None:
        """Refit on everything before ``t`` when ``refit_days`` have passed since the latest fit."""
        if self.refit_days is None or not self._generations:
            return
        last = self._generations[-1][0]
        if t >= last + self.refit_days * DAY:
            self._generations.append((t, self._train(y, X, t)))

    def _check_issue_hour(self, t: pd.Timestamp) -> None:
        """Refuse an issue time at another hour than the one the model was fitted for.

        Its features pair each lead with one hour of the day (``lead`` and ``hour`` were equal
        up to the offset ``issue_hour`` in every training row), so a model fitted on 00:00
        issues and applied at 12:00 reads its coefficients twelve hours out of phase.
        """
        if t.hour != self.issue_hour:
            raise ForecastError(
                f"{self.name}: fitted for issues at {self.issue_hour:02d}:00 UTC, asked to "
                f"forecast from {t.isoformat()}; fit one with issue_hour={t.hour}")

    def _z(self, feats: pd.DataFrame, y_t: np.ndarray) -> np.ndarray:
        if self.target == "level":
            return y_t
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.log(y_t / feats["d1"].to_numpy(float))

    def _back(self, feats: pd.DataFrame, z: np.ndarray) -> np.ndarray:
        if self.target == "level":
            return z
        return feats["d1"].to_numpy(float) * np.exp(z)

    def _train(self, y: pd.Series, X: pd.DataFrame | None, end: pd.Timestamp) -> Any:
        """Fitted point-model state on data before ``end``, memoised by a hash of the inputs.

        The memo lets an ensemble reuse members that were already fitted on the same data.
        """
        yv = y[y.index < end]
        parts = [str(end).encode(), yv.index[0].isoformat().encode(), yv.to_numpy(float).tobytes()]
        if self.exog and X is not None:
            miss = [c for c in self.exog if c not in X.columns]
            if miss:
                raise ForecastError(f"exogenous column(s) {miss} not in X (has {list(X.columns)})")
            xv = X[list(self.exog)]
            parts.append(xv[xv.index < end].to_numpy(float).tobytes())
        key = hash(b"|".join(parts))
        memo = self.__dict__.setdefault("_train_memo", {})
        # keep the calibration fit and the full fit, and with refits every fit of a replay
        keep = 2 if self.refit_days is None else _REFIT_MEMO_SIZE
        if key not in memo:
            while len(memo) >= keep:
                memo.pop(next(iter(memo)))
            memo[key] = self._train_uncached(y, X, end)
        return memo[key]

    def _train_uncached(self, y: pd.Series, X: pd.DataFrame | None, end: pd.Timestamp) -> Any:
        issues = self._issues(y.index[0] + 7 * DAY, end)
        if len(issues) < 14:
            raise ForecastError(f"{self.name}: need at least 3 weeks of history to fit, "
                                f"got {len(issues) + 7} days")
        feats, y_t = day_ahead_design(y[y.index < end], X, issues, self.exog, self.features)
        z = self._z(feats, y_t)
        ok = np.isfinite(z)
        if self.exog:
            ok &= np.isfinite(feats[list(self.exog)].to_numpy(float)).all(axis=1)
        if ok.sum() < 14 * LEADS:
            raise ForecastError(f"{self.name}: fewer than 14 complete days (target and "
                                f"exogenous inputs) to fit on")
        return self._fit_point(feats[ok].drop(columns="issue"), z[ok])

    def _forecast(self, state: Any, y: pd.Series, X: pd.DataFrame | None,
                  issues: pd.DatetimeIndex,
                  design: tuple[pd.DataFrame, np.ndarray] | None = None,
                  ) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
        feats, y_t = (design if design is not None
                      else day_ahead_design(y, X, issues, self.exog, self.features))
        z = self._predict_point(state, feats.drop(columns="issue"))
        mean = self._back(feats, z)
        bad = ~np.isfinite(mean)
        if self.target == "ratio":
            bad |= ~(feats["d1"].to_numpy(float) > 0)
        if bad.any():  # d1 missing or 0 for a ratio model: fall back to yesterday's mean level
            mean[bad] = feats["mean24"].to_numpy(float)[bad]
        return feats, mean, y_t

    @staticmethod
    def _residual_frame(feats: pd.DataFrame, mean: np.ndarray, y_t: np.ndarray) -> pd.DataFrame:
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.where(mean > 0, y_t / mean - 1.0, np.nan)
        return pd.DataFrame({"issue": feats["issue"].to_numpy(), "lead": feats["lead"].to_numpy(),
                             "rel": rel}).dropna()

    @staticmethod
    def _quantiles(res: pd.DataFrame, alphas: np.ndarray = _ALPHAS) -> np.ndarray:
        """Relative-residual quantiles by lead, shape ``(24, 4)`` (lo_95, lo_80, hi_80, hi_95).

        ``alphas`` are the miscoverage levels of the 80 % and 95 % intervals (0.20, 0.05 unless
        adapted); residuals of leads within ±2 h are pooled.
        """
        a80, a95 = float(alphas[0]), float(alphas[1])
        levels = [a95 / 2, a80 / 2, 1 - a80 / 2, 1 - a95 / 2]
        out = np.empty((LEADS, 4))
        lead = res["lead"].to_numpy(int)
        rel = res["rel"].to_numpy(float)
        for h in range(LEADS):
            r = rel[np.abs(lead - h) <= 2]
            if len(r) < 20:
                r = rel
            out[h] = np.quantile(r, levels)
        return out

    def _window(self, past: list[tuple[pd.Timestamp, int, pd.DataFrame]],
                t: pd.Timestamp) -> pd.DataFrame:
        """Calibration residuals for an issue at ``t``.

        The last ``window_days`` days of out-of-sample residuals before ``t``: days forecast
        since the fit, topped up with the latest days of the fit-time holdout.
        """
        assert self._calib is not None
        if not self.window_days:
            return self._calib
        start = t - self.window_days * DAY
        frames = [fr for d, _, fr in past if start <= d < t]
        n_more = self.window_days - len(frames)
        if n_more > 0:
            hold = self._calib
            days = hold["issue"].drop_duplicates().sort_values().iloc[-n_more:]
            frames.insert(0, hold[hold["issue"].isin(days)])
        return pd.concat(frames)

    def _past_residuals(self, y: pd.Series, X: pd.DataFrame | None, issues: pd.DatetimeIndex
                        ) -> list[tuple[pd.Timestamp, int, pd.DataFrame]]:
        """Residuals of the day-ahead forecasts the fitted model makes for past ``issues``.

        Forecasts are cached by issue time with a fingerprint (hash) of every input they read
        (``y`` from 169 h before the issue to its end, ``X`` from 24 h before), so a replay
        computes each past day once and changed inputs are recomputed.
        """
        cache = self.__dict__.setdefault("_res_cache", {})
        yv = y.to_numpy(float)
        y0 = y.index[0]
        xv, x0 = None, None
        if self.exog and X is not None:
            xv, x0 = X[list(self.exog)].to_numpy(float), X.index[0]
        todo, fps = [], {}
        for t in issues:
            p = int((t - y0) // HOUR)
            parts = [str(self._state_at(t)[0]).encode(), yv[max(p - 169, 0): p + 24].tobytes()]
            if xv is not None:
                q = int((t - x0) // HOUR)
                parts.append(xv[max(q - 24, 0): q + 24].tobytes())
            fp = hash(b"".join(parts))
            hit = cache.get(t)
            fps[t] = fp
            if hit is None or hit[0] != fp:
                todo.append(t)
        if todo:
            by_fit: dict[pd.Timestamp, list[pd.Timestamp]] = {}
            for t in todo:  # each day forecast by the fit in force at its issue time
                by_fit.setdefault(self._state_at(t)[0], []).append(t)
            frames = []
            for end, days in by_fit.items():
                state = self._state_at(end)[1]
                feats, mean, y_t = self._forecast(state, y, X, pd.DatetimeIndex(days))
                frames.append(self._residual_frame(feats, mean, y_t))
            res = pd.concat(frames) if len(frames) > 1 else frames[0]
            for t, grp in res.groupby("issue"):
                cache[t] = (fps[t], grp)
            for t in todo:
                if t not in cache or cache[t][0] != fps[t]:
                    cache[t] = (fps[t], res.iloc[:0])
        return [(t, cache[t][0], cache[t][1]) for t in issues]

    def _aci_alphas(self, past: list[tuple[pd.Timestamp, int, pd.DataFrame]]) -> np.ndarray:
        """Adaptive conformal levels after the days in ``past`` (Gibbs & Candès 2021, Eq. 2).

        Day by day since the fit: ``alpha <- alpha + gamma * (target - miss)`` with ``miss``
        the share of that day's hours outside the interval it was given (computed from
        calibration residuals available before that day), separately for the 80 % and 95 %
        intervals (:func:`carbonsched.forecasts.aci.aci_step`: clipped to [0.02, 0.6] and
        [0.005, 0.3], the 95 % level at most the 80 % one). Memoised per day and input.
        """
        cache = self.__dict__.setdefault("_aci_cache", {})
        alphas = _ALPHAS.copy()
        w = self.window_days or 0
        for i, (t, _fp, fr) in enumerate(past):
            key = (t, tuple(np.round(alphas, 12)),
                   hash(tuple(p[1] for p in past[max(0, i - w): i + 1])))
            hit = cache.get(key)
            if hit is None:
                q = self._quantiles(self._window(past[:i], t), alphas)
                lead = fr["lead"].to_numpy(int)
                rel = fr["rel"].to_numpy(float)
                if len(rel):
                    miss80 = np.mean((rel < q[lead, 1]) | (rel > q[lead, 2]))
                    miss95 = np.mean((rel < q[lead, 0]) | (rel > q[lead, 3]))
                    hit = aci_step(alphas, np.array([miss80, miss95]), self.aci_gamma)
                else:
                    hit = alphas
                cache[key] = hit
            alphas = hit
        return alphas

    def backcast(self, y: pd.Series, X: pd.DataFrame | None,
                 issues: pd.DatetimeIndex) -> pd.DataFrame:
        """Point forecasts of the fitted model for many issue times at once (no intervals).

        Each issue's features read only ``y`` strictly before that issue time (lags, causal
        gap filling) and ``X`` at the target hours and 24 h before them, so the means equal
        those of :meth:`predict` issued day by day (tested) as long as no refit falls between
        them: every issue is forecast by the fit made by :meth:`fit` (``refit_days`` does not
        apply). Used for validation-based model selection, where only the point forecast
        matters.

        Returns
        -------
        DataFrame
            Columns ``issued_at, ts, actual, mean``; ``len(issues) * 24`` rows.
        """
        if not self._fitted:
            raise ForecastError(f"{self.name}: call fit() before backcast()")
        for t in issues:
            self._check_issue_hour(t)
        y = ensure_hourly_utc(y, name=f"{self.name}: y")
        feats, mean, y_t = self._forecast(self._state, y, X, issues)
        return pd.DataFrame({"issued_at": feats["issue"].to_numpy(), "ts": feats.index,
                             "actual": y_t, "mean": mean})

    # --- contract ---------------------------------------------------------------------------------
    def _fit(self, y: pd.Series, X: pd.DataFrame | None) -> None:
        end = y.index[-1] + HOUR
        calib = pd.DataFrame(columns=["issue", "lead", "rel"])
        if self.calib_days > 0:
            cut = end - self.calib_days * DAY
            state = self._train(y, X, cut)
            issues = self._issues(cut, end)
            if len(issues):
                feats, mean, y_t = self._forecast(state, y, X, issues)
                calib = self._residual_frame(feats, mean, y_t)
        if self.calib_days > 0 and len(calib) < LEADS:
            raise ForecastError(f"{self.name}: no held-out residuals to calibrate the intervals "
                                f"on; fit on a longer history or raise calib_days")
        self._state = self._train(y, X, end)
        self._generations = [(end, self._state)]
        self.__dict__["_res_cache"] = {}
        self.__dict__["_aci_cache"] = {}
        self._calib = calib if self.calib_days > 0 else None
        self._fit_end = end

    def predict(self, issued_at: pd.Timestamp | str, horizon_hours: int = 24,
                y: pd.Series | None = None, X: pd.DataFrame | None = None) -> pd.DataFrame:
        """Forecast ``horizon_hours`` (at most 24) hours from ``issued_at``; see the base class.

        ``X`` may also hold hours before ``issued_at`` (past day-ahead forecasts): the rolling
        calibration re-forecasts past days with them. Nothing at or after ``issued_at`` in
        ``y`` is read.

        Raises
        ------
        ForecastError
            ``horizon_hours`` above 24 (these are day-ahead models).
        """
        if horizon_hours > self.max_horizon_hours:
            raise ForecastError(f"{self.name}: day-ahead model forecasts at most {LEADS} h, "
                                f"asked for {horizon_hours}")
        t0 = require_aware(issued_at, "issued_at")
        self._check_issue_hour(t0)
        if X is not None:
            Xc = ensure_hourly_utc(X, name=f"{self.name}: X")
            self._X_full = Xc[Xc.index < t0 + horizon_hours * HOUR]
        else:
            self._X_full = self._X
        try:
            return super().predict(issued_at, horizon_hours, y, X)
        finally:
            self._X_full = None

    def _predict(self, history: pd.Series, horizon: pd.DatetimeIndex,
                 X: pd.DataFrame | None) -> pd.DataFrame:
        issue = horizon[0]
        Xall = self._X_full if self._X_full is not None else X
        y = history.reindex(pd.date_range(history.index[0], issue - HOUR, freq="h"))
        self._maybe_refit(y, Xall, issue)
        feats, mean, _ = self._forecast(self._state_at(issue)[1], y, Xall,
                                        pd.DatetimeIndex([issue]))
        mean = mean[: len(horizon)]
        if self._calib is None:
            raise ForecastError(f"{self.name}: fitted with calib_days=0, which gives point "
                                "forecasts only (backcast); refit with calib_days > 0")
        assert self._fit_end is not None
        past: list[tuple[pd.Timestamp, int, pd.DataFrame]] = []
        if self.window_days or self.aci_gamma:
            days = self._issues(self._fit_end, issue)
            if self.window_days and not self.aci_gamma:
                days = days[days >= issue - self.window_days * DAY]
            past = self._past_residuals(y, Xall, days) if len(days) else []
        alphas = self._aci_alphas(past) if self.aci_gamma else _ALPHAS
        q = self._quantiles(self._window(past, issue), alphas)[: len(horizon)]
        out = pd.DataFrame({"mean": mean}, index=horizon)
        for j, col in enumerate(("lo_95", "lo_80", "hi_80", "hi_95")):
            out[col] = mean * (1.0 + q[:, j])
        return out


class HourlyOLS(DayAheadModel):
    """One statsmodels OLS regression per lead hour (24 models).

    Regressors: constant, ``d1``, ``d2``, ``d7``, ``lag_1``, ``mean24``, day-of-week dummies,
    two annual harmonics, and the exogenous columns with their 24 h changes (wind speed also
    cubed); with ``features``, the groups' columns defined at every lead
    (:func:`feature_columns` with ``linear=True``). Ordinary least squares,
    ``statsmodels.regression.linear_model.OLS``.

    With ``scale_free`` (ratio target only) the lagged values enter as log ratios to ``d1``,
    ``log(d2 / d1)``, ``log(d7 / d1)``, ``log(lag_1 / d1)``, ``log(mean24 / d1)``, instead of
    as levels: the model is then a log-linear autoregression of the day-on-day ratio, and a
    fitted model applied to a history scaled by ``c > 0`` forecasts exactly ``c`` times as much
    (calendar and exogenous terms unchanged). Level regressors with a log-ratio target do not
    have that property: when the grid's level moves out of the range fitted on (a season's
    hydro or wind regime), their coefficients extrapolate the ratio. A row whose log ratio is
    undefined (a lag at or below 0) is left out of the fit; at forecast time that term is
    taken as 0 (ratio 1), and ``d1 <= 0`` falls back to ``mean24`` as for every ratio model.

    Parameters
    ----------
    ridge
        L2 penalty on standardised regressors (``0`` = plain OLS, via ``fit``; otherwise
        ``fit_regularized(L1_wt=0)``). [-]
    scale_free
        Lagged regressors as log ratios to ``d1`` (see above); requires ``target="ratio"``.
    **kw
        See :class:`DayAheadModel`.

    Raises
    ------
    ForecastError
        ``scale_free`` with a target other than ``"ratio"``.
    """

    name = "ols_hourly"
    _CALENDAR = ("sin1", "cos1", "sin2", "cos2")
    _BASE = ("d1", "d2", "d7", "lag_1", "mean24", *_CALENDAR)
    _RELATIVE = ("d2", "d7", "lag_1", "mean24")  # as log ratios to d1 when scale_free

    def __init__(self, ridge: float = 0.0, scale_free: bool = False, **kw: Any) -> None:
        super().__init__(ridge=ridge, scale_free=scale_free, **kw)
        self.ridge = float(ridge)
        self.scale_free = bool(scale_free)
        check_scale_free(self)

    @classmethod
    def get_test_params(cls) -> list[dict[str, Any]]:
        """Plain and ratio-target OLS with short calibration."""
        return [{"calib_days": 14}, {"calib_days": 14, "target": "ratio", "window_days": 14}]

    def _design(self, feats: pd.DataFrame) -> np.ndarray:
        cols = list(self._CALENDAR if self.scale_free else self._BASE)
        for e in self.exog:  # fixed order: the design may carry other models' columns too
            cols += [c for c in (e, f"dx_{e}", f"{e}_cubed", f"dx_{e}_cubed") if c in feats]
        for g in self.features:
            cols += [c for c in feature_columns(g, self.exog, linear=True) if c in feats]
        base = feats[cols].to_numpy(float)
        if self.scale_free:
            rel = np.column_stack([log_ratio_to_d1(feats, c) for c in self._RELATIVE])
            base = np.column_stack([rel, base])
        dow = feats["dow"].to_numpy(int)
        dummies = np.column_stack([(dow == k).astype(float) for k in range(1, 7)])
        return np.column_stack([np.ones(len(feats)), base, dummies])

    def _fit_point(self, feats: pd.DataFrame, z: np.ndarray) -> Any:
        A = self._design(feats)
        lead = feats["lead"].to_numpy(int)
        state = {}
        for h in range(LEADS):
            m = (lead == h) & np.isfinite(A).all(axis=1)
            a, b = A[m], z[m]
            mu = a.mean(axis=0)
            sd = a.std(axis=0)
            const = sd < 1e-12
            sd[const] = 1.0
            mu[0], sd[0] = 0.0, 1.0
            an = (a - mu) / sd
            keep = ~const
            keep[0] = True  # constant regressors (e.g. night-time irradiance) are dropped
            with warnings.catch_warnings():  # collinear regressors: pinv gives the min-norm fit
                warnings.simplefilter("ignore")
                if self.ridge > 0:
                    res = sm.OLS(b, an[:, keep]).fit_regularized(alpha=self.ridge, L1_wt=0.0)
                else:
                    res = sm.OLS(b, an[:, keep]).fit()
            beta = np.zeros(a.shape[1])
            beta[keep] = np.asarray(res.params, float)
            state[h] = (beta, mu, sd)
        return state

    def _predict_point(self, state: Any, feats: pd.DataFrame) -> np.ndarray:
        A = self._design(feats)
        A = np.where(np.isfinite(A), A, 0.0)
        lead = feats["lead"].to_numpy(int)
        out = np.empty(len(feats))
        for h in np.unique(lead):
            beta, mu, sd = state[int(h)]
            m = lead == h
            out[m] = ((A[m] - mu) / sd) @ beta
        return out


class LightGBMDayAhead(DayAheadModel):
    """One LightGBM gradient-boosted tree model over all leads (lead is a feature).

    LightGBM (Ke et al., NeurIPS 2017) with ``n_jobs=1`` and a fixed seed; features as in
    :func:`day_ahead_design`.

    With ``scale_free`` (ratio target only) every lagged value (``lag_1`` .. ``lag_24``,
    ``mean24``, ``d2``, ``d7``) enters as its log ratio to ``d1`` and ``d1`` itself is left
    out, as in :class:`HourlyOLS`: a fitted model applied to a history scaled by ``c > 0``
    forecasts exactly ``c`` times as much (calendar and exogenous features unchanged), and the
    trees split on day-on-day changes rather than on levels the fit may not have seen. A log
    ratio that is undefined (a lag at or below 0) is a missing value, which LightGBM routes by
    its learned default direction, in the fit and the forecast alike.

    Parameters
    ----------
    n_estimators, learning_rate, num_leaves, min_child_samples, subsample, colsample_bytree
        LightGBM hyper-parameters (see the LightGBM docs).
    scale_free
        Lagged features as log ratios to ``d1`` (see above); requires ``target="ratio"``.
    **kw
        See :class:`DayAheadModel`.

    Raises
    ------
    ForecastError
        ``scale_free`` with a target other than ``"ratio"``.
    """

    name = "lgbm"
    _RELATIVE = ("mean24", "d2", "d7")  # and every lag_k, as log ratios to d1 when scale_free

    def __init__(self, n_estimators: int = 400, learning_rate: float = 0.03,
                 num_leaves: int = 31, min_child_samples: int = 20, subsample: float = 0.8,
                 colsample_bytree: float = 0.8, scale_free: bool = False, **kw: Any) -> None:
        super().__init__(n_estimators=n_estimators, learning_rate=learning_rate,
                         num_leaves=num_leaves, min_child_samples=min_child_samples,
                         subsample=subsample, colsample_bytree=colsample_bytree,
                         scale_free=scale_free, **kw)
        self.scale_free = bool(scale_free)
        check_scale_free(self)
        self.lgb_params = dict(n_estimators=n_estimators, learning_rate=learning_rate,
                               num_leaves=num_leaves, min_child_samples=min_child_samples,
                               subsample=subsample, subsample_freq=1,
                               colsample_bytree=colsample_bytree, n_jobs=1, random_state=0,
                               verbose=-1)

    @classmethod
    def get_test_params(cls) -> list[dict[str, Any]]:
        """A small, fast model."""
        return [{"n_estimators": 20, "calib_days": 14}]

    def _inputs(self, feats: pd.DataFrame) -> pd.DataFrame:
        """The feature table the trees see: ``feats`` itself, or its scale-free form."""
        if not self.scale_free:
            return feats
        out = feats.copy()   # columns keep their order (LightGBM samples them by position)
        for c in feats.columns:
            if c.startswith("lag_") or c in self._RELATIVE:
                out[c] = log_ratio_to_d1(feats, c)
        return out.drop(columns=["d1"])

    def _fit_point(self, feats: pd.DataFrame, z: np.ndarray) -> Any:
        lgb = require_extra("lightgbm", "the LightGBM day-ahead forecaster (lgbm)")
        model = lgb.LGBMRegressor(**self.lgb_params)
        f = self._inputs(feats)
        cols = list(f.columns)
        model.fit(f.to_numpy(float), z)
        return model, cols

    def _predict_point(self, state: Any, feats: pd.DataFrame) -> np.ndarray:
        model, cols = state
        return np.asarray(model.predict(self._inputs(feats)[cols].to_numpy(float)), float)


class DayAheadEnsemble(DayAheadModel):
    """Weighted average of the member models' point forecasts, with its own conformal intervals.

    Parameters
    ----------
    members
        Day-ahead models (unfitted, or fitted: their fits are reused) whose back-transformed
        means are averaged. Their own interval settings are ignored.
    weights
        One weight per member, each at least 0, summing to 1 (within 1e-6), shape ``(k,)``
        [-]; default equal weights. The backtest's ``ens_stack`` takes them from
        :func:`carbonsched.forecasts.backtest.mape_weights`.
    **kw
        See :class:`DayAheadModel` (``target`` is not used: members keep theirs).

    Raises
    ------
    ForecastError
        No member; weights of another length than the members, negative, not finite or not
        summing to 1.
    """

    name = "ensemble"

    def __init__(self, members: Sequence[DayAheadModel], weights: Sequence[float] | None = None,
                 **kw: Any) -> None:
        if not members:
            raise ForecastError("DayAheadEnsemble: give at least one member")
        w = (np.full(len(members), 1.0 / len(members)) if weights is None
             else np.asarray(weights, float))
        if w.shape != (len(members),):
            raise ForecastError(f"DayAheadEnsemble: weights of shape {w.shape} for "
                                f"{len(members)} member(s); give one weight per member")
        if not np.isfinite(w).all() or (w < 0).any() or abs(w.sum() - 1.0) > 1e-6:
            raise ForecastError(f"DayAheadEnsemble: weights {w.round(6).tolist()} must be "
                                "finite, at least 0 and sum to 1")
        exog = tuple(dict.fromkeys(e for m in members for e in m.exog))
        kw.setdefault("exog", exog)
        kw.setdefault("features", tuple(dict.fromkeys(f for m in members for f in m.features)))
        super().__init__(members=[m.name for m in members],
                         weights=None if weights is None else w.tolist(), **kw)
        self.members = list(members)
        self.weights = w

    @classmethod
    def get_test_params(cls) -> list[dict[str, Any]]:
        """Two small members, equal weights and weighted."""
        return [{"members": [HourlyOLS(calib_days=14),
                             LightGBMDayAhead(n_estimators=20, calib_days=14)],
                 "calib_days": 14},
                {"members": [HourlyOLS(calib_days=14),
                             HourlyOLS(target="ratio", calib_days=14)],
                 "weights": [0.3, 0.7], "calib_days": 14}]

    def _fit_point(self, feats: pd.DataFrame, z: np.ndarray) -> Any:  # pragma: no cover
        raise NotImplementedError

    def _predict_point(self, state: Any, feats: pd.DataFrame) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError

    def _train(self, y: pd.Series, X: pd.DataFrame | None, end: pd.Timestamp) -> Any:
        return [m._train(y, X, end) for m in self.members]

    def _forecast(self, state: Any, y: pd.Series, X: pd.DataFrame | None,
                  issues: pd.DatetimeIndex,
                  design: tuple[pd.DataFrame, np.ndarray] | None = None,
                  ) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
        design = (design if design is not None
                  else day_ahead_design(y, X, issues, self.exog, self.features))
        means = [m._forecast(s, y, X, issues, design)[1]
                 for m, s in zip(self.members, state, strict=True)]
        return design[0], np.average(means, axis=0, weights=self.weights), design[1]


class DacfSeasonalNaive(DayAheadModel):
    """Yesterday's same hour (``mean[t] = y[t - 24 h]``), with the same conformal intervals.

    The project's :class:`carbonsched.forecasts.baselines.SeasonalNaive` is the baseline
    reported in the backtest; this variant exists to compare interval methods on equal terms.
    """

    name = "seasonal_naive_conformal"

    @classmethod
    def get_test_params(cls) -> list[dict[str, Any]]:
        """Short calibration."""
        return [{"calib_days": 14}]

    def _fit_point(self, feats: pd.DataFrame, z: np.ndarray) -> Any:
        return None

    def _predict_point(self, state: Any, feats: pd.DataFrame) -> np.ndarray:
        d1 = feats["d1"].to_numpy(float)
        return d1 if self.target == "level" else np.zeros(len(d1))


__all__ = [
    "FEATURE_GROUPS",
    "OPERATOR_SOURCES",
    "DacfSeasonalNaive",
    "DayAheadEnsemble",
    "DayAheadModel",
    "HourlyOLS",
    "LightGBMDayAhead",
    "TimeAxisError",
    "check_features",
    "day_ahead_design",
    "feature_columns",
    "lagged_source_shares",
    "operator_change_features",
    "wind_trajectory_features",
]
