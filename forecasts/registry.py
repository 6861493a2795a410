"""One registry of candidate forecasters and an honest per-site model choice.

Every candidate follows the one contract of :mod:`carbonsched.forecasts.base`. For each site,
signal and UTC issue hour, :class:`SelectedForecaster` picks a model (:func:`choose`: for
carbon intensity a fixed combination of the two strongest families when it beats seasonal
naive, else the lowest error and start regret over the plan's horizon, each relative to
seasonal naive's) on a rolling validation window that
ends strictly before the fit's end (the refit period's start, itself at or before the issue
time), then calibrates conformal intervals on the chosen model's validation residuals by lead
bucket. It is itself a :class:`~carbonsched.forecasts.base.Forecaster`, so the daily plan, the
service and the site backtest use one path.

Schedule (:class:`ModelSchedule`, the defaults are what the daily plan uses)
---------------------------------------------------------------------------
* **Refit period**: models are refitted and re-chosen every ``refit_days`` = 7 days; a period
  starts at 00:00 UTC on a Monday (:meth:`ModelSchedule.period_start`). Every issue inside a
  period uses the models fitted at its start on the data strictly before it, conditioned at
  predict time on the history up to (not including) the issue time.
* **Issue hour**: a choice serves one UTC hour of day (``issue_hour``; the daily path keys its
  cache by it): its validation issues are made at that hour and its per-hour candidates (the
  DACF models, the per-hour ridge) are fitted on issues at that hour, because their leads are
  hours of the day. Applied unchanged at another hour they were out of phase (issue 35: the
  00:00 fit used at 06:00-18:00 in Tokyo, June 2023, was 17-28 % worse than seasonal naive);
  they now refuse (:class:`~carbonsched.errors.ForecastError`).
* **History**: up to ``history_days`` = 365 days before the period start, where the data has
  them (the weekly and yearly cycles); a candidate may use less (the per-lead OLS its own
  ``train_days``).
* **Validation**: the ``validation_days`` = 28 days before the period start (fewer on short
  histories, at least :data:`MIN_VALIDATION_DAYS`): every candidate is fitted on the data
  before the window, then issues a forecast at the issue hour of each window day from the
  history before that day, exactly as in service, for ``max(24, horizon_hours)`` leads. Only
  target hours before the period start are scored. Error: MAPE for carbon intensity and PUE,
  MAE for the green-surplus index (often 0, so MAPE is undefined).
* **Choice** (:func:`choose`, :data:`CRITERION`): a model qualifies only if its error over
  the validated leads beats naive's by the signal's margin (:data:`SIGNAL_SETTINGS`). For
  carbon intensity the fixed combination (:data:`COMBINATION_NOTE`) is chosen whenever it
  qualifies; otherwise every candidate and the mean of the two best (as the DACF backtest's
  ``ens_top2``) are scored on every validated lead (carbon intensity: error plus start regret,
  each relative to naive's) and the qualifying model with the lowest
  criterion is chosen, naive when none qualifies (ties to the earlier name, naive first). A
  combination that fails is just not chosen: before issue 35 it handed the choice to naive
  although another model had beaten naive on the same window.
* **Hours that matter**: the green-surplus index and PUE are chosen on the validation hours
  whose actual value is off the output bounds (surplus hours strictly between 0 and 1; PUE
  above the site's floor), where a forecast can be wrong and a decision turns on it; all hours
  when none is. Seasonal naive stays unless a model beats it there by the margin.
* **Long horizons**: day-ahead-only models (the DACF family, at most 24 h) serve leads 0-23;
  their later leads come from the best candidate able to forecast them (by error over every
  validated lead; seasonal naive always can), in validation as in service, named
  ``extended_by`` in :meth:`SelectedForecaster.describe`.

Intervals: split conformal (Vovk, Gammerman & Shafer, *Algorithmic Learning in a Random
World*, 2005, doi:10.1007/b106715) on the chosen model's validation residuals, pooled in lead
buckets. The residuals are made as stale as in service: the chosen model is refitted every
``refit_days`` inside the window (rolling origin) and each week of the window is forecast by
the fit made at its start (one fit for the whole window, 0-27 days stale, gave 80 % intervals
that covered 88-94 % in July 2023 on three global sites). Lead buckets
(:data:`LEAD_BUCKETS`): relative residuals ``actual / forecast - 1`` for carbon intensity
(errors grow with the level), additive ones for the index and PUE. The quantile
levels get the finite-sample correction ``ceil((n + 1) p) / n``; every bucket keeps its own
residuals' width, so its intervals cover at their level in that bucket (issue 35 item 4: a
bucket forced at least as wide as every earlier one took the width of the day's noisiest
hours, which fill the first half day, and over-covered; within the first day that rule had
already made July 2023's 80 % intervals cover 89-94 %).

Adaptive levels (issue 12 item 2; ``aci_gamma``, default :data:`ACI_GAMMA`): the validation
window's split-conformal bounds under-covered the following week on sites whose errors drift
(hydro, wind; 2023's 80 % intervals covered 75.8 % in São Paulo), so the miscoverage levels of
the 80 % and 95 % intervals adapt by adaptive conformal inference (Gibbs & Candès, "Adaptive
Conformal Inference Under Distribution Shift", NeurIPS 2021, arXiv:2106.00170; the step is
:func:`carbonsched.forecasts.aci.aci_step`, shared with the DACF models). The state is *not
stored*: it is recomputed at every issue time from the residuals known then, so the daily plan
(one issue a day, a fresh process) and the site backtest (sequential issues, cached models) get
the same intervals from the same history:

1. at fit time, the daily issues of the validation window are replayed in order
   (:func:`aci_replay`): each issue's intervals are rebuilt from the residuals of the
   ``validation_days`` days before it whose target hours precede it, at the current levels;
   the share of its realised residuals outside them *in each lead bucket* updates that
   bucket's levels by one ACI step (:attr:`SelectedForecaster.alphas_fit_`, shape
   ``(len(LEAD_BUCKETS), 2)``, from the 8th day on; issue 35 item 4: one pair of levels driven
   by the first day widened every later day with it);
2. at an issue time ``t`` inside the refit period, the period's earlier daily issues (same time
   of day) are re-forecast by the deployed model from the history before each of them, their
   residuals against the history before ``t`` appended (target hours at or after ``t`` are
   unknown and never read), and the replay continues over them
   (:attr:`SelectedForecaster.alphas_`);
3. the bounds at ``t`` are the conformal quantiles, at the adapted levels, of the residuals of
   the ``validation_days`` days before ``t`` (rolling: the period's realised residuals replace
   the oldest validation days).

The replay costs at most ``refit_days - 1`` re-forecasts per issue (memoised per earlier
issue on the exact history before it, so sequential issues of a period pay one each). Levels are
clipped to [0.02, 0.6] (80 %) and [0.005, 0.3] (95 %), the 95 % level at most the 80 % one, so
the intervals stay nested; the contract's ``_finish`` keeps them around the point forecast.
``aci_gamma=None`` gives the unadapted validation-window bounds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from carbonsched.errors import ForecastError, TimeAxisError
from carbonsched.forecasts.aci import ALPHA_TARGET, aci_step
from carbonsched.forecasts.base import Forecaster
from carbonsched.forecasts.baselines import Climatology, SeasonalNaive
from carbonsched.forecasts.carbon_intensity import (
    LeadRegression,
    fill_for_features,
    lead_features,
)
from carbonsched.forecasts.decision import start_regret
from carbonsched.forecasts.green_surplus import GreenSurplusForecaster, SurplusSeasonalNaive
from carbonsched.forecasts.localclock import local_wall_hours, to_local_clock
from carbonsched.forecasts.surplus_probability import SurplusProbability
from carbonsched.forecasts.synthetic import synthetic_index

HOUR = pd.Timedelta(hours=1)
DAY = pd.Timedelta(days=1)

#: Lead buckets [h] whose validation residuals are pooled for the intervals (start, end).
#: Half days in the first day (168 residuals per bucket of 6 h made the 95 % bounds noisy: 2023's
#: 95 % intervals covered 89-93 % in GB, DE-LU and PJM), then days, then longer spans.
LEAD_BUCKETS: tuple[tuple[int, int], ...] = ((0, 12), (12, 24), (24, 48), (48, 72), (72, 120),
                                             (120, 168))
#: Fewest validation days a choice is made on. [d]
MIN_VALIDATION_DAYS = 3
#: Fewest days of history before the validation window a candidate is fitted on. [d]
MIN_FIT_DAYS = 14
#: Hours of history handed to a generic candidate's predict during validation (every lag of
#: the registry's models lies within it). [h]
PREDICT_HISTORY_HOURS = 24 * 60
#: Step of adaptive conformal inference per replayed issue day (:mod:`carbonsched.forecasts.aci`;
#: the DACF backtest's value). [-]
ACI_GAMMA = 0.05
#: Fewest days of realised residuals before a replayed issue for its coverage to update the
#: levels. [d]
ACI_MIN_DAYS = 7
#: Levels of the interval bounds, in the contract's column names.
INTERVAL_LEVELS = {"lo_95": 0.025, "lo_80": 0.10, "hi_80": 0.90, "hi_95": 0.975}

SIGNALS = ("carbon_intensity_g_per_kwh", "green_surplus_index", "pue")
NAIVE = "seasonal-naive-24h"


def ensemble_name(members: Sequence[str]) -> str:
    """The name of the equal-weight mean of ``members``: ``ens(a+b)``, in the order given."""
    return f"ens({'+'.join(members)})"


def ensemble_members(name: str) -> tuple[str, ...]:
    """The members of an :func:`ensemble_name`; ``(name,)`` for a single model's name."""
    if name.startswith("ens(") and name.endswith(")"):
        return tuple(name[4:-1].split("+"))
    return (name,)


#: Registered candidates left out of the default choice: LightGBM costs 3-10 s per fit on a
#: year (2 shared cores), more than the other candidates together, and a refit period fits it
#: twice per site; pass ``candidates=`` to include it.
OPT_IN = frozenset({"lgbm"})


@dataclass(frozen=True)
class ModelSchedule:
    """When candidates are refitted and re-chosen, and on how much history.

    Attributes
    ----------
    refit_days
        Length of a refit period. [d]
    validation_days
        Length of the validation window before each period start. [d]
    history_days
        Most history used before a period start. [d]
    """

    refit_days: int = 7
    validation_days: int = 28
    history_days: int = 365

    #: Periods are anchored on this Monday (UTC), so they start on Mondays at 00:00.
    ANCHOR: ClassVar[pd.Timestamp] = pd.Timestamp("1970-01-05", tz="UTC")

    def period_start(self, issued_at: pd.Timestamp) -> pd.Timestamp:
        """Start of the refit period holding ``issued_at`` (<= ``issued_at``, 00:00 UTC)."""
        if issued_at.tzinfo is None:
            raise TimeAxisError(f"issued_at {issued_at} is naive; give a tz-aware UTC time")
        day = issued_at.tz_convert("UTC").floor("D")
        offset = ((day - self.ANCHOR) // DAY) % self.refit_days
        return day - int(offset) * DAY

    @property
    def load_days(self) -> int:
        """Days of history before an issue time that a forecast may read. [d]"""
        return self.history_days + self.refit_days


DEFAULT_SCHEDULE = ModelSchedule()


@dataclass(frozen=True)
class Candidate:
    """One registered candidate: a name and a factory of unfitted forecasters.

    Attributes
    ----------
    name
        Name reported in the plan (``forecast_models``) and the backtest.
    make
        ``make(tz, clip, issue_hour) -> Forecaster``: the site's zone, the output bounds and
        the UTC hour of day of the issues the model is fitted for and serves. [h]
    max_horizon_hours
        Longest horizon it forecasts [h]; ``None``: any.
    features
        What the model reads (named in the plan's ``forecast_models``).
    """

    name: str
    make: Callable[[str | None, tuple[float, float], int], Forecaster]
    max_horizon_hours: int | None = None
    features: tuple[str, ...] = ()


def _dacf(kind: str) -> Callable[[str | None, tuple[float, float], int], Forecaster]:
    def make(tz: str | None, clip: tuple[float, float], issue_hour: int) -> Forecaster:
        from carbonsched.forecasts.dacf_models import HourlyOLS, LightGBMDayAhead

        if kind == "ols":
            return HourlyOLS(calib_days=0, issue_hour=issue_hour)
        if kind == "ols_ratio":
            return HourlyOLS(calib_days=0, target="ratio", scale_free=True,
                             issue_hour=issue_hour)
        return LightGBMDayAhead(calib_days=0, n_estimators=200, issue_hour=issue_hour)
    return make


def _ridge(tz: str | None, clip: tuple[float, float], issue_hour: int) -> Forecaster:
    from carbonsched.forecasts.ridge import HourlyRidge

    return HourlyRidge(issue_hour=issue_hour, clip=clip)


_F_SN24 = ("y[t - 24 h·m] (local clock)",)
_F_SN168 = ("y[t - 168 h·m] (local clock)",)
_F_CLIM = ("hour-of-day mean of the last {d} days",)
_F_LEAD = ("last", "same hour 1 day back", "same hour 1 week back", "mean of the same hour "
           "1..7 days back", "mean of the 24 h before issue")
_F_DACF = ("lags 1..24 h", "same hour 1, 2, 7 days back", "lead", "hour", "day of week",
           "annual harmonics")
_F_RATIO = ("log ratio to the same hour 1 day back", "log ratios to that hour of: the same "
            "hour 2 and 7 days back, the last hour, the mean of the 24 h before issue",
            "lead", "day of week", "annual harmonics")
_F_RIDGE = ("same hour 1..7 days back", "last", "mean of the 24 h before issue",
            "day of week", "annual harmonic")


def registry(signal: str) -> list[Candidate]:
    """Candidates for ``signal``, seasonal naive first (it wins ties).

    Carbon intensity: seasonal naive (24 h and 168 h, local clock), climatology (28 d), the
    per-lead OLS default (:class:`LeadRegression`, 8 weeks), the per-hour ridge on lags of 1-7
    days and calendar terms (:class:`carbonsched.forecasts.ridge.HourlyRidge`, a year), and the
    DACF backtest's history-only models (per-hour OLS on the level, per-hour OLS of the log
    ratio to yesterday on log ratios of the lags (``scale_free``), LightGBM;
    :mod:`carbonsched.forecasts.dacf_models`; day-ahead only). The
    per-hour models are made for the issue hour they serve (``make``'s third argument).
    Green-surplus index and PUE: seasonal naive, climatology and the per-lead OLS.

    Raises
    ------
    ForecastError
        Unknown signal.
    """
    if signal == "carbon_intensity_g_per_kwh":
        return [
            Candidate(NAIVE, lambda tz, c, h: SeasonalNaive(24, tz=tz), None, _F_SN24),
            Candidate("seasonal-naive-168h", lambda tz, c, h: SeasonalNaive(168, tz=tz), None,
                      _F_SN168),
            Candidate("climatology-28d", lambda tz, c, h: Climatology(28), None,
                      (_F_CLIM[0].format(d=28),)),
            Candidate("ci-lead-ols", lambda tz, c, h: LeadRegression(tz=tz), None,
                      (*_F_LEAD, "(local clock)")),
            Candidate("ridge_hourly", _ridge, None, _F_RIDGE),
            Candidate("ols_hourly", _dacf("ols"), 24, _F_DACF),
            Candidate("ols_hourly_ratio", _dacf("ols_ratio"), 24, _F_RATIO),
            Candidate("lgbm", _dacf("lgbm"), 24, _F_DACF),
        ]
    if signal == "green_surplus_index":
        return [
            Candidate(NAIVE, lambda tz, c, h: SurplusSeasonalNaive(24), None,
                      ("y[t - 24 h·m]",)),
            Candidate("climatology-28d", lambda tz, c, h: Climatology(28, clip=c), None,
                      (_F_CLIM[0].format(d=28),)),
            Candidate("green-surplus-lead-ols", lambda tz, c, h: GreenSurplusForecaster(),
                      None, _F_LEAD),
        ]
    if signal == "pue":
        return [
            Candidate(NAIVE, lambda tz, c, h: SeasonalNaive(24, clip=c), None,
                      ("y[t - 24 h·m]",)),
            Candidate("climatology-7d", lambda tz, c, h: Climatology(7, clip=c), None,
                      (_F_CLIM[0].format(d=7),)),
            Candidate("pue-lead-ols", lambda tz, c, h: LeadRegression(
                relative_intervals=False, clip=c, train_days=28), None, _F_LEAD),
        ]
    raise ForecastError(f"no forecaster registry for signal {signal!r}; known: "
                        f"{', '.join(SIGNALS)}")


def exogenous_candidates(signal: str, exog: pd.DataFrame | None) -> list[Candidate]:
    """The candidates that read exogenous forecasts, for the features ``exog`` holds.

    Carbon intensity and the green-surplus index: the per-hour ridge with the exogenous
    forecasts of the target hour (:class:`carbonsched.forecasts.ridge.HourlyRidgeExog`);
    carbon intensity and PUE: the published forecast of the signal itself
    (:class:`carbonsched.forecasts.exogenous.PublishedForecast`: a provider's carbon-intensity
    forecast, the PUE model on forecast weather), a candidate to beat or to use. The ridge
    forecasts every lead the plain ridge does (a feature enters only the leads it was published
    for, so its later leads are the plain ridge's); the published forecast is day-ahead (24 h),
    its later leads from the extension model. None without ``exog``.
    """
    from carbonsched.forecasts.exogenous import PASSTHROUGH, PublishedForecast, features_present
    from carbonsched.forecasts.ridge import HourlyRidgeExog

    feats = features_present(exog, signal)
    if not feats:
        return []
    out = []
    ridge_feats = tuple(f for f in feats if f != "pue")
    if ridge_feats and signal != "pue":
        def ridge(tz: str | None, c: tuple[float, float], h: int) -> Forecaster:
            return HourlyRidgeExog(exog=exog, exog_features=ridge_feats, issue_hour=h, clip=c)
        out.append(Candidate("ridge_hourly_exog", ridge, None, (
            *_F_RIDGE, *(f"{f} forecast for the target hour, latest published by the issue "
                         "time" for f in ridge_feats))))
    own = PASSTHROUGH.get(signal)
    if own in feats:
        def published(tz: str | None, c: tuple[float, float], h: int) -> Forecaster:
            return PublishedForecast(own, exog=exog, clip=c)
        out.append(Candidate(f"published-{own}", published, 24, (
            f"{own} forecast for the target hour, latest published by the issue time "
            "(seasonal naive where none)",)))
    return out


def _leads(issues: pd.DatetimeIndex, H: int, tz: str | None
           ) -> tuple[pd.DatetimeIndex, pd.DatetimeIndex, np.ndarray]:
    """Target hours, their wall-clock times and wall-clock leads of every (issue, lead) pair."""
    ts = issues.repeat(H) + pd.to_timedelta(np.tile(np.arange(H), len(issues)), unit="h")
    if tz is None:
        return ts, ts, np.tile(np.arange(H), len(issues))
    wall = local_wall_hours(ts, tz)
    w0 = local_wall_hours(issues, tz).repeat(H)
    return ts, wall, ((wall - w0) // HOUR).to_numpy().astype(int)


def _batch_seasonal_naive(m: SeasonalNaive, y: pd.Series, issues: pd.DatetimeIndex,
                          H: int) -> np.ndarray:
    """:func:`seasonal_lookup` for many issues at once (every lag lands before its issue)."""
    ts, wall, leads = _leads(issues, H, m.tz)
    source = to_local_clock(y, m.tz) if m.tz is not None else y
    s = pd.Timedelta(hours=m.season_hours)
    m0 = np.ceil((leads + 1) / m.season_hours).astype(int)
    out = np.full(len(ts), np.nan)
    for extra in range(7):
        need = np.isnan(out)
        if not need.any():
            break
        src = wall[need] - s * (m0[need] + extra)
        out[need] = source.reindex(src).to_numpy(float)
    last = y.ffill().reindex(issues - HOUR).to_numpy(float).repeat(H)
    out = np.where(np.isnan(out), last, out)
    if m.clip is not None:
        out = np.clip(out, *m.clip)
    return out.reshape(len(issues), H)


def _batch_climatology(m: Climatology, y: pd.Series, issues: pd.DatetimeIndex,
                       H: int) -> np.ndarray:
    """Hour-of-day means of the ``days`` days before each (00:00 UTC) issue, at once."""
    tab = (y.to_frame("v").assign(day=y.index.floor("D"), hour=y.index.hour)
           .pivot_table(index="day", columns="hour", values="v", aggfunc="mean",
                        dropna=False).reindex(columns=range(24)))
    days = pd.date_range(tab.index.min(), issues.max(), freq="D")
    tab = tab.reindex(days)
    prof = tab.shift(1).rolling(m.days, min_periods=1).mean().reindex(issues)
    level = y.rolling(m.days * 24, min_periods=1).mean().reindex(issues - HOUR)
    prof = prof.fillna(pd.DataFrame(np.repeat(level.to_numpy()[:, None], 24, axis=1),
                                    index=prof.index, columns=prof.columns))
    hours = (issues.hour.to_numpy()[:, None] + np.arange(H)[None, :]) % 24
    out = np.take_along_axis(prof.to_numpy(float), hours, axis=1)
    if m.clip is not None:
        out = np.clip(out, *m.clip)
    return out


def _batch_lead_regression(m: LeadRegression, y: pd.Series, issues: pd.DatetimeIndex,
                           H: int) -> np.ndarray:
    """:meth:`LeadRegression._point` for many issues (gaps filled once over ``y``)."""
    assert m.coef_ is not None
    ts, wall, leads = _leads(issues, H, m.tz)
    source = to_local_clock(y, m.tz) if m.tz is not None else y
    w0 = local_wall_hours(issues, m.tz) if m.tz is not None else issues
    # contiguous up to the hour before the last issue, so positions are hours
    source = source.reindex(pd.date_range(source.index[0], w0[-1] - HOUR, freq="h"))
    filled = fill_for_features(source).to_numpy(float)
    pos = source.index.searchsorted(w0)
    leads = leads.reshape(len(issues), H)
    out = np.full((len(issues), H), np.nan)
    for k in np.unique(leads):
        F = lead_features(filled, pos, int(k))
        pk = F @ m.coef_[min(int(k), m.max_lead_hours - 1)]
        rows, cols = np.nonzero(leads == k)
        out[rows, cols] = pk[rows]
    if m.clip is not None:
        out = np.clip(out, *m.clip)
    return out


def _point_forecasts(model: Forecaster, y: pd.Series, issues: pd.DatetimeIndex,
                     horizon_hours: int, exog: pd.DataFrame | None = None) -> np.ndarray:
    """Point forecasts ``(len(issues), horizon_hours)`` of a fitted ``model`` from ``y``.

    Each issue reads only ``y`` strictly before it: the base class's predict cuts the history;
    the batch paths (seasonal naive, climatology, per-lead OLS, the DACF models'
    ``backcast``) read only lags before each issue (equal to ``predict`` issued one by one,
    up to the filling of gaps at the start of the per-lead OLS's window; tested).
    The exogenous candidates read ``exog`` (:mod:`carbonsched.forecasts.exogenous`), each issue
    only the values published at or before it.
    """
    from carbonsched.forecasts.dacf_models import DayAheadModel
    from carbonsched.forecasts.exogenous import PublishedForecast
    from carbonsched.forecasts.ridge import HourlyRidge, HourlyRidgeExog

    y = y[y.index < issues[-1]]
    if isinstance(model, HourlyRidgeExog | PublishedForecast):
        return model.backcast(y, issues, horizon_hours, exog=exog)
    if isinstance(model, DayAheadModel):
        b = model.backcast(y, None, issues)
        return b["mean"].to_numpy(float).reshape(len(issues), -1)[:, :horizon_hours]
    if isinstance(model, HourlyRidge):
        return model.backcast(y, issues, horizon_hours)
    if len(issues) > 1 and (issues == issues.floor("h")).all():
        if type(model) in (SeasonalNaive, SurplusSeasonalNaive):
            return _batch_seasonal_naive(model, y, issues, horizon_hours)  # type: ignore[arg-type]
        if type(model) is Climatology and (issues == issues.floor("D")).all():
            return _batch_climatology(model, y, issues, horizon_hours)  # type: ignore[arg-type]
        if type(model) in (LeadRegression, GreenSurplusForecaster):
            return _batch_lead_regression(model, y, issues, horizon_hours)  # type: ignore[arg-type]
    out = np.empty((len(issues), horizon_hours))
    for i, t in enumerate(issues):
        hist = y[(y.index < t) & (y.index >= t - PREDICT_HISTORY_HOURS * HOUR)]
        out[i] = model.predict(t, horizon_hours, y=hist)["mean"].to_numpy(float)
    return out


def _error(pred: np.ndarray, actual: np.ndarray, metric: str) -> float:
    """MAPE [%] (hours with |actual| > 1e-9) or MAE over the finite pairs; NaN if none."""
    ok = np.isfinite(pred) & np.isfinite(actual)
    if metric == "mape":
        ok &= np.abs(actual) > 1e-9
        if not ok.any():
            return float("nan")
        return float(100.0 * np.mean(np.abs(pred[ok] - actual[ok]) / np.abs(actual[ok])))
    if not ok.any():
        return float("nan")
    return float(np.mean(np.abs(pred[ok] - actual[ok])))


def conformal_bounds(residuals: np.ndarray, leads: np.ndarray,
                     alphas: np.ndarray = ALPHA_TARGET) -> np.ndarray:
    """Split-conformal residual quantiles per lead bucket, each from its own residuals.

    Parameters
    ----------
    residuals
        Out-of-sample residuals (relative or additive), shape ``(n,)``.
    leads
        Their leads [h], shape ``(n,)``.
    alphas
        Miscoverage ``(alpha_80, alpha_95)`` of the two intervals [-], shape ``(2,)`` for
        every bucket or ``(len(LEAD_BUCKETS), 2)`` per bucket (the bounds are the ``alpha / 2``
        and ``1 - alpha / 2`` quantiles); nominal ``(0.20, 0.05)`` unless adapted
        (:mod:`carbonsched.forecasts.aci`, :func:`aci_replay`).

    Returns
    -------
    ndarray
        Shape ``(len(LEAD_BUCKETS), 4)``: the ``lo_95, lo_80, hi_80, hi_95`` residual bounds
        per bucket (finite-sample level ``ceil((n + 1) p) / n`` for the upper bounds and its
        mirror for the lower ones; Vovk et al. 2005, doi:10.1007/b106715; Angelopoulos &
        Bates, arXiv:2107.07511, §1). Every bucket follows its own residuals, so its interval
        covers at the nominal level *in that bucket* (the marginal guarantee of split conformal
        holds per bucket because the bucket's calibration and forecast hours are the same
        leads). Until issue 35 the buckets from 24 h on were forced at least as wide as every
        earlier one: where the first half day is the noisy hours of the day (the sun, the
        morning ramp), that forced the later, mixed-hour buckets to the noisy hours' width and
        they over-covered (2023, every 28th day: 80 % intervals covered 88-94 % at 24-96 h in
        Washington and Singapore).
        A bucket with fewer than 24 residuals takes the previous bucket's (or all residuals').

    Raises
    ------
    ForecastError
        No finite residual, or ``alphas`` of another shape.
    """
    ok = np.isfinite(residuals)
    r_all, l_all = residuals[ok], leads[ok]
    if r_all.size == 0:
        raise ForecastError("no finite validation residuals to calibrate the intervals on")
    A = bucket_alphas(alphas)

    def q(r: np.ndarray, a: np.ndarray) -> np.ndarray:
        n = r.size
        out = []
        for p in (a[1] / 2, a[0] / 2, 1 - a[0] / 2, 1 - a[1] / 2):
            if p > 0.5:
                lvl = min(1.0, math.ceil((n + 1) * p) / n)
            else:
                lvl = max(0.0, 1.0 - min(1.0, math.ceil((n + 1) * (1 - p)) / n))
            out.append(float(np.quantile(r, lvl)))
        return np.array(out)

    table = np.empty((len(LEAD_BUCKETS), 4))
    for b, (a, e) in enumerate(LEAD_BUCKETS):
        m = (l_all >= a) & (l_all < e)
        if m.sum() >= 24:
            table[b] = q(r_all[m], A[b])
        else:
            table[b] = table[b - 1] if b else q(r_all, A[b])
    return table


def bucket_alphas(alphas: np.ndarray) -> np.ndarray:
    """Miscoverage levels ``(alpha_80, alpha_95)`` per lead bucket, ``(len(LEAD_BUCKETS), 2)``.

    ``alphas`` of shape ``(2,)`` is repeated for every bucket of :data:`LEAD_BUCKETS`; one of
    shape ``(len(LEAD_BUCKETS), 2)`` is returned as a float copy.

    Raises
    ------
    ForecastError
        Any other shape.
    """
    a = np.array(alphas, float)
    if a.shape == (2,):
        return np.tile(a, (len(LEAD_BUCKETS), 1))
    if a.shape != (len(LEAD_BUCKETS), 2):
        raise ForecastError(f"interval levels must have shape (2,) or ({len(LEAD_BUCKETS)}, 2) "
                            f"(alpha_80, alpha_95 per lead bucket), got {a.shape}")
    return a


def bucket_of(leads: np.ndarray) -> np.ndarray:
    """Index into :data:`LEAD_BUCKETS` of each lead [h] (the last bucket beyond 168 h)."""
    ends = np.array([e for _, e in LEAD_BUCKETS])
    return np.minimum(np.searchsorted(ends, leads, side="right"), len(LEAD_BUCKETS) - 1)


def window_bounds(res: np.ndarray, issues: pd.DatetimeIndex, t: pd.Timestamp,
                  window_days: int, alphas: np.ndarray) -> np.ndarray | None:
    """:func:`conformal_bounds` at ``alphas`` on the residuals known at ``t``.

    Parameters
    ----------
    res
        Residuals ``(len(issues), H)``; row ``i``, column ``h`` is the residual of the forecast
        issued at ``issues[i]`` for the hour ``issues[i] + h``.
    issues
        Their issue times (UTC).
    t
        The time the bounds are made at: only issues in ``[t - window_days, t)`` and target
        hours before ``t`` are used.
    window_days
        Length of the calibration window. [d]
    alphas
        Miscoverage levels ``(alpha_80, alpha_95)``.

    Returns
    -------
    ndarray or None
        Bounds as :func:`conformal_bounds`; ``None`` if fewer than 24 residuals are known.
    """
    H = res.shape[1]
    iss = pd.DatetimeIndex(issues).as_unit("ns").asi8
    t_ns = pd.Timestamp(t).as_unit("ns").value
    ts = iss[:, None] + np.arange(H)[None, :] * HOUR.value
    known = ((iss >= t_ns - window_days * DAY.value) & (iss < t_ns))[:, None] & (ts < t_ns)
    known &= np.isfinite(res)
    if known.sum() < 24:
        return None
    leads = np.broadcast_to(np.arange(H), res.shape)
    return conformal_bounds(res[known], leads[known], alphas)


def aci_replay(res: np.ndarray, issues: pd.DatetimeIndex, alphas: np.ndarray,
               gamma: float, window_days: int, first: int = 0) -> np.ndarray:
    """Adaptive conformal levels per lead bucket after replaying ``issues[first:]`` in order.

    At each replayed issue ``t_i`` the 80 % and 95 % intervals are rebuilt as in service
    (:func:`window_bounds`: the residuals of the ``window_days`` days before ``t_i`` whose
    target hours are before ``t_i``, at the current levels, containing the point forecast);
    for each lead bucket (:data:`LEAD_BUCKETS`) the share of that issue's realised residuals
    in the bucket outside them is the bucket's miss, and one ACI step
    (:func:`carbonsched.forecasts.aci.aci_step`) updates that bucket's levels only. Until issue
    35 one pair of levels followed the first 24 leads and applied to every bucket: a first
    day that under-covered widened the later days too, which then over-covered. An issue with
    fewer than :data:`ACI_MIN_DAYS` days of known residuals before it leaves the levels
    unchanged, a bucket without a realised residual leaves its own unchanged. Every value
    read is a residual whose target hour was observed before the issue time being forecast
    (the caller passes only those; the fit's window ends before its first issue).

    Parameters
    ----------
    res, issues
        As :func:`window_bounds`.
    alphas
        Levels before ``issues[first]``: shape ``(2,)`` (every bucket) or
        ``(len(LEAD_BUCKETS), 2)``.
    gamma
        ACI step [-]; ``0`` returns ``alphas`` unchanged (per bucket).
    window_days
        Calibration window. [d]
    first
        First replayed row.

    Returns
    -------
    ndarray
        ``(len(LEAD_BUCKETS), 2)``: ``(alpha_80, alpha_95)`` per bucket after the last issue.
    """
    a = bucket_alphas(alphas)
    if gamma <= 0:
        return a
    H = res.shape[1]
    b_of = bucket_of(np.arange(H))
    for i in range(first, len(issues)):
        t = issues[i]
        if t - issues[0] < ACI_MIN_DAYS * DAY:
            continue
        r = res[i]
        ok = np.isfinite(r)
        if not ok.any():
            continue
        q = window_bounds(res, issues, t, window_days, a)
        if q is None:
            continue
        q = q[b_of]
        lo80, hi80 = np.minimum(q[:, 1], 0.0), np.maximum(q[:, 2], 0.0)
        lo95, hi95 = np.minimum(q[:, 0], 0.0), np.maximum(q[:, 3], 0.0)
        tol = 1e-12
        out80 = (r < lo80 - tol) | (r > hi80 + tol)
        out95 = (r < lo95 - tol) | (r > hi95 + tol)
        for b in np.unique(b_of[ok]):
            m = ok & (b_of == b)
            a[b] = aci_step(a[b], np.array([out80[m].mean(), out95[m].mean()]), gamma)
    return a


SIGNAL_SETTINGS: dict[str, dict[str, Any]] = {
    "carbon_intensity_g_per_kwh": {"metric": "mape", "relative": True,
                                   "clip": (0.0, float("inf")), "margin": 0.0,
                                   "combination": (("ridge_hourly_exog", "ridge_hourly"),
                                                   ("ols_hourly_ratio",))},
    "green_surplus_index": {"metric": "mae", "relative": False, "clip": (0.0, 1.0),
                            "margin": 0.05},
    "pue": {"metric": "mape", "relative": False, "clip": (1.0, float("inf")), "margin": 0.05},
}
"""Per signal: validation metric, relative or additive intervals, output bounds, the
``margin`` by which a model must beat seasonal naive on validation to replace it and the
``combination`` chosen whenever it qualifies (:data:`COMBINATION_NOTE`): one tuple per member,
its alternatives in order of preference (the first that was fitted stands in, e.g. the ridge
with exogenous forecasts before its history-only twin).
The index and PUE get 5 %: their naive is hard to beat (PUE is a function of the weather,
which history alone forecasts little better than persistence) and a 28-day window's ranking is
noisy; without the margin, a 19-day sample of 2023 scored the index's choice 17-21 % worse than
naive (MAE) in GB and New York, where naive itself won most periods."""

COMBINATION_NOTE = """Carbon intensity is forecast by the equal-weight mean of the two strongest
per-hour model families whenever that mean beats seasonal naive on the validation window (every
validated lead): the per-hour ridge on lags of 1-7 days and calendar terms (``ridge_hourly``;
``ridge_hourly_exog``, the same family with the exogenous forecasts of the target hour, where the
site has them) and the per-hour OLS of the log ratio to the previous day on log ratios of the
lags (``ols_hourly_ratio``, scale-free; day-ahead only: its leads beyond 24 h come from the
extension model). Otherwise the choice by
the criterion applies (:func:`choose`). Equal weights, not weights fitted on the window: the
forecast-combination puzzle (Clemen, *Int. J. Forecasting* 5(4), 1989,
doi:10.1016/0169-2070(89)90012-5; Smith & Wallis, *Oxford Bull. Econ. Stat.* 71(3), 2009,
doi:10.1111/j.1468-0084.2008.00541.x). Measured on the weeks *after* each choice
(``bench/forecast_choice.py``, every week of 2023 on the ``global`` catalog and of 2022 on
``us-2022`` and five other EIA-930 areas, BENCHMARKS 8d): against the earlier rule (the
combination of three weaker families, 28-day climatology, ``ci-lead-ols`` and
``ols_hourly_ratio``, scored as one more candidate), day-ahead MAPE skill over seasonal naive
rose from 23.1 to 27.8 % (``global``, where the pair was picked), -1.8 to 0.3 % (``us-2022``)
and 3.2 to 6.6 % (the five areas); the rolling replays of section 7b kept 0.781 of the
oracle's reduction on average instead of 0.772 (daily runs) and 0.758 instead of 0.754 (every
6 h). ``combine=False`` leaves the combination out."""


def combination_members(signal: str, fitted: Iterable[str]) -> tuple[str, ...]:
    """The members of ``signal``'s fixed combination among the ``fitted`` candidate names.

    Each member is the first of its alternatives in :data:`SIGNAL_SETTINGS` that was fitted
    (``ridge_hourly_exog`` before ``ridge_hourly``); a member none of whose alternatives was
    fitted is left out (:func:`choose` forms the combination only from two or more).

    Parameters
    ----------
    signal
        A key of :data:`SIGNAL_SETTINGS`.
    fitted
        Names of the candidates fitted on this window (with finite validation forecasts), in
        any order.

    Returns
    -------
    tuple of str
        Member names, in the settings' order; empty when the signal has no combination.

    Raises
    ------
    ForecastError
        ``signal`` is not a key of :data:`SIGNAL_SETTINGS`.
    """
    if signal not in SIGNAL_SETTINGS:
        raise ForecastError(f"combination_members: unknown signal {signal!r}; known: "
                            f"{', '.join(SIGNAL_SETTINGS)}")
    have = set(fitted)
    out = []
    for alternatives in SIGNAL_SETTINGS[signal].get("combination") or ():
        name = next((n for n in alternatives if n in have), None)
        if name is not None:
            out.append(name)
    return tuple(out)


def _pad(p: np.ndarray, H: int) -> np.ndarray:
    """``p`` of shape ``(n, h)`` widened to ``(n, H)`` with NaN (leads a model does not reach)."""
    out = np.full((p.shape[0], H), np.nan)
    out[:, :min(H, p.shape[1])] = p[:, :H]
    return out


def _member_mean(parts: list[np.ndarray], fill: np.ndarray | None) -> np.ndarray:
    """Equal-weight mean of member forecasts of one shape ``(n, H)``, lead by lead.

    A member's leads beyond its horizon (NaN) take ``fill`` (the extension model's forecast),
    so every member counts at every lead; without ``fill`` they stay NaN.
    """
    stack = np.stack(parts)
    if fill is not None:
        stack = np.where(np.isnan(stack), fill[None], stack)
    return stack.mean(axis=0)


CRITERION = ("carbon intensity: the equal-weight mean of ridge_hourly (ridge_hourly_exog "
             "where fitted) and ols_hourly_ratio when it beats naive's validation error, else "
             "validation error / naive's + start regret / naive's over every lead of the "
             "plan's horizon; the index and PUE: error / naive's on the hours off the output "
             "bounds; only models whose error beats naive's by the signal's margin qualify")
"""The choice's criterion in words (the plan's ``forecast_models``)."""


@dataclass(frozen=True)
class Choice:
    """The outcome of :func:`choose`.

    Attributes
    ----------
    name
        The chosen model: a candidate, ``ens(a+b)`` (the best two) or the combination.
    members
        The candidates whose equal-weight mean it is (one for a single model).
    combination
        Whether it is the signal's fixed combination.
    preds
        Every scored forecast ``(n_issues, H)`` by name (the candidates' and the ensembles').
    errors, regrets, scores
        By name: validation error (MAPE [%] or MAE), start regret [%] (when scored) and the
        criterion (lower is better; naive's is 2 with regret, 1 without).
    """

    name: str
    members: tuple[str, ...]
    combination: bool
    preds: dict[str, np.ndarray]
    errors: dict[str, float]
    regrets: dict[str, float]
    scores: dict[str, float]


def choose(preds: dict[str, np.ndarray], actual: np.ndarray, metric: str, margin: float,
           use_regret: bool, combination: tuple[str, ...] = ()) -> Choice:
    """Choose among validation forecasts on the error and start regret the plan incurs.

    A model *qualifies* if its error over every lead of ``actual`` is below
    ``(1 - margin) * err_naive``. The signal's fixed ``combination`` (the equal-weight mean of
    its members that were fitted, when two or more were) is chosen whenever it qualifies
    (:data:`COMBINATION_NOTE`). Otherwise every candidate and the mean of the best two are
    scored on every lead by the criterion: ``err / err_naive`` plus, with ``use_regret``,
    ``regret / regret_naive`` (start regret of 1- and 3-hour jobs arriving at every lead with a
    24-hour waiting window, :func:`carbonsched.forecasts.decision.start_regret`). The
    qualifying model with the lowest criterion is chosen (ties to the earlier name, seasonal
    naive first), naive when none qualifies. A combination that does not qualify never hands
    the choice to naive (the fault fixed in issue 35).

    Parameters
    ----------
    preds
        Validation point forecasts by candidate name, each ``(n_issues, H)`` and finite,
        seasonal naive (:data:`NAIVE`) among them, in registry order.
    actual
        The actual values ``(n_issues, H)``; NaN where unknown (not scored).
    metric
        ``"mape"`` [%] or ``"mae"``.
    margin
        Share by which a model's error must beat naive's to qualify [-].
    use_regret
        Add the start-regret ratio to the criterion (carbon intensity).
    combination
        Names of the fixed combination's members (empty: none).

    Returns
    -------
    Choice

    Raises
    ------
    ForecastError
        Seasonal naive is not among ``preds``.
    """
    if NAIVE not in preds:
        raise ForecastError(f"choose: {NAIVE} must be among the candidates")
    preds = dict(preds)
    H = actual.shape[1]

    def regret(p: np.ndarray) -> float:
        lengths = [L for L in (1, 3) if L <= H]
        excess, ideal = start_regret(p, actual, lengths_hours=lengths,
                                     arrivals=range(max(1, H - 2)))
        return 100.0 * excess / ideal if ideal > 0 else 0.0

    err: dict[str, float] = {}
    reg: dict[str, float] = {}
    score: dict[str, float] = {}

    def add(name: str) -> None:
        e = err[name] = _error(preds[name], actual, metric)
        e0 = err[NAIVE] if name != NAIVE else e
        ratio = e / e0 if e0 > 0 else (1.0 if e <= 0 else np.inf)
        if use_regret:
            reg[name] = round(regret(preds[name]), 6)
            r0 = reg[NAIVE] if name != NAIVE else reg[name]
            ratio += reg[name] / r0 if r0 > 0 else (1.0 if reg[name] <= 0 else np.inf)
        score[name] = float(np.nan_to_num(ratio, nan=np.inf))

    def qualifies(k: str) -> bool:
        return k == NAIVE or (bool(np.isfinite(err[k])) and err[k] < (1.0 - margin) * err[NAIVE])

    add(NAIVE)
    for k in preds:
        if k != NAIVE:
            add(k)
    singles = list(preds)
    groups: dict[str, tuple[str, ...]] = {k: (k,) for k in singles}
    combo = tuple(n for n in combination if n in singles)
    combo_name = ensemble_name(combo)
    if len(combo) >= 2:
        if combo_name not in preds:
            preds[combo_name] = np.mean([preds[n] for n in combo], axis=0)
            add(combo_name)
        groups[combo_name] = combo
        if qualifies(combo_name):
            return Choice(combo_name, combo, True, preds,
                          {k: round(float(v), 6) for k, v in err.items()}, reg, score)
    ranked = sorted(singles, key=lambda k: (score[k], singles.index(k)))
    order = list(singles)
    if len(ranked) >= 2:
        a, b = ranked[:2]
        name = ensemble_name(sorted((a, b)))
        if name not in preds:
            preds[name] = (preds[a] + preds[b]) / 2.0
            add(name)
        groups[name] = (a, b)
        order.append(name)
    best = min((k for k in order if qualifies(k)), key=lambda k: (score[k], order.index(k)))
    return Choice(best, groups[best], False, preds,
                  {k: round(float(v), 6) for k, v in err.items()}, reg, score)


class SelectedForecaster(Forecaster):
    """The registry's best candidate for one signal, with conformal intervals (module doc).

    Parameters
    ----------
    signal
        One of :data:`SIGNALS`.
    tz
        The site's IANA zone (local-clock lags of the candidates that take one).
    clip
        ``(low, high)`` bounds of every output column; default per signal
        (:data:`SIGNAL_SETTINGS`).
    horizon_hours
        Horizon validated at fit time [h] (1..168); longer predictions reuse the last
        bucket's intervals.
    validation_days, history_days, refit_days
        See :class:`ModelSchedule`. [d]
    candidates
        Names of the registry's candidates to consider (default all but :data:`OPT_IN`);
        seasonal naive is always added.
    aci_gamma
        Step of the adaptive correction of the interval levels (:meth:`_adapted_bounds`);
        ``None``: the split-conformal bounds of the validation window, unadapted.
    combine
        Use the signal's fixed combination where it has one and it qualifies (carbon intensity,
        :data:`COMBINATION_NOTE`); ``False``: leave it out.
    issue_hour
        UTC hour of day of the issues the choice is fitted for and serves [h]: validation
        issues are made at that hour, the per-hour candidates are fitted for it, and
        :meth:`predict` refuses issue times at another hour (their leads would be other hours
        of the day). Default 0.
    exog
        Exogenous forecasts known at the fit (:mod:`carbonsched.forecasts.exogenous`): adds the
        candidates that read them (:func:`exogenous_candidates`); every issue, in validation
        and in service, reads only the values published at or before it. :meth:`predict`
        takes the table known at the issue time.
    """

    name = "selected"

    def __init__(self, signal: str = "carbon_intensity_g_per_kwh", tz: str | None = None,
                 clip: tuple[float, float] | None = None, horizon_hours: int = 24,
                 validation_days: int = DEFAULT_SCHEDULE.validation_days,
                 history_days: int = DEFAULT_SCHEDULE.history_days,
                 candidates: tuple[str, ...] | None = None,
                 refit_days: int = DEFAULT_SCHEDULE.refit_days,
                 aci_gamma: float | None = ACI_GAMMA, combine: bool = True,
                 issue_hour: int = 0, exog: pd.DataFrame | None = None) -> None:
        if signal not in SIGNAL_SETTINGS:
            raise ForecastError(f"SelectedForecaster: unknown signal {signal!r}; known: "
                                f"{', '.join(SIGNALS)}")
        if not 1 <= horizon_hours <= 168:
            raise ForecastError(f"SelectedForecaster: horizon_hours must be in 1..168, got "
                                f"{horizon_hours}")
        super().__init__(signal=signal, tz=tz, clip=clip, horizon_hours=horizon_hours,
                         validation_days=validation_days, history_days=history_days,
                         candidates=candidates, refit_days=refit_days, aci_gamma=aci_gamma,
                         combine=combine, issue_hour=issue_hour)
        if not (isinstance(issue_hour, int | np.integer) and 0 <= issue_hour <= 23):
            raise ForecastError(f"SelectedForecaster: issue_hour must be an integer 0..23 (the "
                                f"UTC hour of the issues it serves), got {issue_hour!r}")
        self.issue_hour = int(issue_hour)
        if aci_gamma is not None and not (math.isfinite(aci_gamma) and aci_gamma > 0):
            raise ForecastError(f"SelectedForecaster: aci_gamma must be a positive number or "
                                f"None (no adaptation), got {aci_gamma}")
        self.aci_gamma = aci_gamma
        self.combine = bool(combine)
        self.signal = signal
        self.tz = tz
        s = SIGNAL_SETTINGS[signal]
        self.metric: str = s["metric"]
        self.relative: bool = s["relative"]
        self.clip = tuple(clip) if clip is not None else s["clip"]
        self.horizon_hours = int(horizon_hours)
        self.validation_days = int(validation_days)
        self.history_days = int(history_days)
        self.refit_days = max(1, int(refit_days))
        allowed = set(candidates) | {NAIVE} if candidates else None
        self.exog = exog
        self.candidates = [c for c in registry(signal) + exogenous_candidates(signal, exog)
                           if (c.name in allowed if allowed is not None else c.name not in OPT_IN)]
        self._exog_now: pd.DataFrame | None = None
        self.exog_fallbacks_ = 0
        self.chosen_: str | None = None
        self.combined_ = False
        self.regret_: dict[str, float] = {}
        self.scores_: dict[str, float] = {}
        self.members_: list[tuple[Candidate, Forecaster]] = []
        self.extension_: tuple[Candidate, Forecaster] | None = None
        self.bounds_: np.ndarray | None = None
        self.validation_: dict[str, float] = {}
        self.skipped_: dict[str, str] = {}
        self.window_: tuple[pd.Timestamp, pd.Timestamp, int] | None = None
        self.res_: np.ndarray | None = None
        self.res_issues_: pd.DatetimeIndex | None = None
        self.surplus_probability_: SurplusProbability | None = None
        self.naive_: Forecaster | None = None
        self.alphas_fit_: np.ndarray = bucket_alphas(ALPHA_TARGET)
        self.alphas_: np.ndarray = bucket_alphas(ALPHA_TARGET)

    @classmethod
    def get_test_params(cls) -> list[dict[str, Any]]:
        """Carbon intensity with a cheap candidate set, and the green-surplus index."""
        return [{"candidates": ("ci-lead-ols", "ols_hourly"), "validation_days": 7},
                {"signal": "green_surplus_index", "validation_days": 7}]

    @classmethod
    def get_test_data(cls, seed: int = 0) -> tuple[pd.Series, pd.DataFrame | None]:
        """Carbon-intensity-like data (in [0, 1] values are fine for either signal)."""
        y, _ = synthetic_index(seed)
        return (0.2 + y).rename("y"), None

    # --- fitting ----------------------------------------------------------------------------
    def _fit(self, y: pd.Series, X: pd.DataFrame | None) -> None:
        end = y.index[-1] + HOUR
        y = y[y.index >= end - self.history_days * DAY]
        first_obs = y.first_valid_index()  # a frame may start with empty rows before its data
        y = y[y.index >= first_obs] if first_obs is not None else y
        days = int((end - y.index[0]) // DAY)
        val_days = min(self.validation_days, days - MIN_FIT_DAYS)
        if val_days < MIN_VALIDATION_DAYS:
            raise ForecastError(
                f"{self.name}: {days} days of history; a model choice needs at least "
                f"{MIN_FIT_DAYS + MIN_VALIDATION_DAYS} ({MIN_FIT_DAYS} to fit, "
                f"{MIN_VALIDATION_DAYS} to validate)")
        first = end.floor("D") - val_days * DAY + self.issue_hour * HOUR
        issues = pd.date_range(first, periods=val_days, freq="D")
        issues = issues[issues < end]
        H = max(24, self.horizon_hours)
        y_fit = y[y.index < issues[0]]
        ts = issues.repeat(H) + pd.to_timedelta(np.tile(np.arange(H), len(issues)), unit="h")
        actual = y.reindex(ts).to_numpy(float, copy=True)
        actual[ts >= end] = np.nan
        actual = actual.reshape(len(issues), H)
        preds: dict[str, np.ndarray] = {}
        fitted: dict[str, tuple[Candidate, Forecaster]] = {}
        self.skipped_ = {}
        for c in self.candidates:
            h = min(H, c.max_horizon_hours or H)
            try:
                m = self._make(c).fit(y_fit)
                p = _point_forecasts(m, y, issues, h, self.exog)
            except (ForecastError, ValueError, np.linalg.LinAlgError) as exc:
                self.skipped_[c.name] = str(exc)
                continue
            p = np.clip(p, *self.clip)
            if not np.isfinite(p).all():
                self.skipped_[c.name] = "non-finite validation forecasts"
                continue
            preds[c.name] = _pad(p, H)
            fitted[c.name] = (c, m)
        if NAIVE not in preds:
            raise ForecastError(f"{self.name}: seasonal naive could not be validated: "
                                f"{self.skipped_.get(NAIVE, 'not a candidate')}")
        # a day-ahead-only model serves the plan's later leads with the best long model (by
        # error over every validated lead): it is scored, and deployed, that way
        ext: tuple[Candidate, Forecaster] | None = None
        if any((c.max_horizon_hours or 168) < 168 for c, _ in fitted.values()):
            longs = [k for k in preds if fitted[k][0].max_horizon_hours is None]
            best = min(longs, key=lambda k: (np.nan_to_num(
                _error(preds[k], actual, self.metric), nan=np.inf), list(preds).index(k)))
            ext = fitted[best]
            for k, p in preds.items():
                preds[k] = np.where(np.isnan(p), preds[best], p)
        pool = combination_members(self.signal, preds) if self.combine else ()
        scored = actual
        if not self.relative:
            # the index and PUE sit on a bound for many hours (no surplus; PUE at its floor),
            # where every model is right and no decision turns: the choice is made on the
            # hours off the bounds (issue 35 item 5); naive stays unless beaten there
            lo, hi = self.clip
            scored = np.where((actual <= lo + 1e-9) | (actual >= hi - 1e-9), np.nan, actual)
            if not np.isfinite(scored).any():
                scored = actual
        naive_val = preds[NAIVE]
        pick = choose(preds, scored, self.metric, SIGNAL_SETTINGS[self.signal]["margin"],
                      use_regret=self.relative, combination=pool)
        choice, preds = pick.name, pick.preds
        self.combined_ = pick.combination
        self.regret_ = pick.regrets
        self.scores_ = pick.scores
        err = pick.errors
        members = [fitted[n] for n in pick.members]
        short = min((c.max_horizon_hours or 168) for c, _ in members)
        if short >= 168:
            ext = None
        pred = preds[choice].copy()
        # conformal calibration on residuals as stale as in service: the chosen model(s) are
        # refitted every refit_days inside the window (rolling origin), each fold forecast
        # only by the fit made at its start
        for f0 in range(self.refit_days, len(issues), self.refit_days):
            fold = issues[f0:f0 + self.refit_days]
            cut = y[y.index < fold[0]]
            parts = []
            for c, _ in members:
                m = self._make(c).fit(cut)
                hh = min(H, c.max_horizon_hours or H)
                parts.append(_pad(np.clip(_point_forecasts(m, y, fold, hh, self.exog),
                                          *self.clip), H))
            fill = None
            if ext is not None and short < H:
                m = self._make(ext[0]).fit(cut)
                fill = np.clip(_point_forecasts(m, y, fold, H, self.exog), *self.clip)
            pred[f0:f0 + len(fold)] = _member_mean(parts, fill)
        leads = np.broadcast_to(np.arange(H), pred.shape)
        with np.errstate(divide="ignore", invalid="ignore"):
            if self.relative:
                res = np.where(pred > 1e-9, actual / pred - 1.0, np.nan)
            else:
                res = actual - pred
        self.bounds_ = conformal_bounds(res.ravel(), leads.ravel())
        self.res_, self.res_issues_ = res, issues
        self.surplus_probability_ = None
        if self.signal == "green_surplus_index":
            # issue 35 item 5: the probability of a surplus hour, fitted on the same stale,
            # rolling-origin validation forecasts (module surplus_probability)
            self.surplus_probability_ = SurplusProbability.fit(
                pred.ravel(), naive_val.ravel(), actual.ravel(),
                ((self.issue_hour + leads) % 24).ravel(), leads.ravel(),
                np.broadcast_to(np.arange(len(issues))[:, None], pred.shape).ravel())
            self.naive_ = self._make(fitted[NAIVE][0]).fit(y)
        self.alphas_fit_ = (aci_replay(res, issues, ALPHA_TARGET, self.aci_gamma,
                                       self.validation_days)
                            if self.aci_gamma else bucket_alphas(ALPHA_TARGET))
        self.alphas_ = self.alphas_fit_.copy()
        self.__dict__["_issue_cache"] = {}
        # deployment: refit the chosen model(s) on all the history
        self.members_ = [(c, self._make(c).fit(y)) for c, _ in members]
        self.extension_ = (ext[0], self._make(ext[0]).fit(y)) if ext else None
        self.chosen_ = choice
        self.validation_ = {k: round(float(v), 6) for k, v in err.items()}
        self.window_ = (issues[0], end, len(issues))

    def _make(self, c: Candidate) -> Forecaster:
        return c.make(self.tz, self.clip, self.issue_hour)

    # --- predicting -------------------------------------------------------------------------
    def _means(self, history: pd.Series, issues: pd.DatetimeIndex, H: int) -> np.ndarray:
        """Point forecasts ``(len(issues), H)`` of the chosen model(s) (module doc).

        Each issue reads ``history`` strictly before it; the extension model serves the leads
        beyond the chosen model's horizon.
        """
        exog = self._exog_now if self._exog_now is not None else self.exog
        parts = []
        self.exog_fallbacks_ = 0
        for c, m in self.members_:
            h = min(H, c.max_horizon_hours or H)
            p = np.full((len(issues), H), np.nan)
            p[:, :h] = _point_forecasts(m, history, issues, h, exog)
            self.exog_fallbacks_ += int(getattr(m, "exog_fallbacks_", 0)
                                        or getattr(m, "fallbacks_", 0))
            parts.append(np.clip(p, *self.clip))
        fill = None
        if any(np.isnan(p).any() for p in parts):
            if self.extension_ is None:
                raise ForecastError(f"{self.name}: {self.chosen_} forecasts at most "
                                    f"{min(int(np.isfinite(p[0]).sum()) for p in parts)} h; "
                                    "no longer model was fitted")
            _, m = self.extension_
            fill = np.clip(_point_forecasts(m, history, issues, H, exog), *self.clip)
        return _member_mean(parts, fill)

    def _issue_means(self, history: pd.Series, d: pd.Timestamp, H: int) -> np.ndarray:
        """:meth:`_means` of one earlier issue ``d``, memoised on the history it reads.

        The forecast reads the :data:`PREDICT_HISTORY_HOURS` before ``d``; the key is ``d``
        with a hash of every value (and the first time) of that window, so the daily plan
        (history loaded per issue) and the backtest get the same means, and the next issues
        of a period reuse them.
        """
        h = history[(history.index < d) & (history.index >= d - PREDICT_HISTORY_HOURS * HOUR)]
        ex = self._exog_now if self._exog_now is not None else self.exog
        key = (d, H, str(h.index[0]) if len(h) else "", len(h),
               hash(h.to_numpy(float).tobytes()),
               0 if ex is None else hash((len(ex), ex["value"].to_numpy(float).tobytes())))
        cache = self.__dict__.setdefault("_issue_cache", {})
        hit = cache.get(key)
        if hit is None:
            try:
                hit = self._means(h, pd.DatetimeIndex([d]), H)[0]
            except (ForecastError, ValueError, IndexError):  # no usable history: not scored
                hit = np.full(H, np.nan)
            if len(cache) >= 64:
                cache.pop(next(iter(cache)))
            cache[key] = hit
        return hit

    def _adapted_bounds(self, history: pd.Series, t: pd.Timestamp) -> np.ndarray:
        """Residual bounds per lead bucket at issue time ``t``, adapted to realised coverage.

        The residual record is the validation window's (rolling-origin, out of sample) plus
        the realised residuals of this refit period's earlier daily issues at ``t``'s time of
        day (the deployed model's forecasts from ``history`` before each of them, against
        ``history`` before ``t``: only target hours before ``t`` count). ACI
        (:func:`aci_replay`) continues from the levels the validation window ended on
        (:attr:`alphas_fit_`) over those issues; the bounds are the conformal quantiles, at
        the adapted levels, of the residuals of the ``validation_days`` days before ``t``.
        """
        assert self.res_ is not None and self.res_issues_ is not None
        end = self.window_[1] if self.window_ is not None else t
        n_in = int((t - end) // DAY)
        res, issues = self.res_, self.res_issues_
        Hr = res.shape[1]
        if n_in > 0:
            inper = pd.DatetimeIndex([t - k * DAY for k in range(n_in, 0, -1)])
            pred = np.vstack([self._issue_means(history, d, Hr) for d in inper])
            ts = inper.repeat(Hr) + pd.to_timedelta(np.tile(np.arange(Hr), n_in), unit="h")
            actual = history.reindex(ts).to_numpy(float).reshape(n_in, Hr)
            with np.errstate(divide="ignore", invalid="ignore"):
                r_in = (np.where(pred > 1e-9, actual / pred - 1.0, np.nan) if self.relative
                        else actual - pred)
            res = np.vstack([res, r_in])
            issues = issues.append(inper)
        self.alphas_ = aci_replay(res, issues, self.alphas_fit_, self.aci_gamma or 0.0,
                                  self.validation_days, first=len(self.res_))
        q = window_bounds(res, issues, t, self.validation_days, self.alphas_)
        return q if q is not None else self.bounds_

    def predict(self, issued_at: pd.Timestamp | str, horizon_hours: int = 24,
                y: pd.Series | None = None, X: pd.DataFrame | None = None,
                exog: pd.DataFrame | None = None) -> pd.DataFrame:
        """:meth:`Forecaster.predict`, with the exogenous forecasts known at ``issued_at``.

        Parameters
        ----------
        exog
            The exogenous table (:mod:`carbonsched.forecasts.exogenous`) as known at the issue
            time (default: the fit's); each forecast reads only the values published at or
            before its own issue time.
        """
        self._exog_now = exog
        try:
            return super().predict(issued_at, horizon_hours, y=y, X=X)
        finally:
            self._exog_now = None

    def _predict(self, history: pd.Series, horizon: pd.DatetimeIndex,
                 X: pd.DataFrame | None) -> pd.DataFrame:
        assert self.bounds_ is not None
        H = len(horizon)
        t = horizon[0]
        if t.hour != self.issue_hour:
            raise ForecastError(
                f"{self.name}: the {self.signal} choice was fitted for issues at "
                f"{self.issue_hour:02d}:00 UTC and asked to forecast from {t.isoformat()}; fit "
                f"one with issue_hour={t.hour} (its per-hour models and validation are phased "
                "to the issue hour)")
        mean = self._means(history, pd.DatetimeIndex([t]), H)[0]
        fallbacks = self.exog_fallbacks_  # of this issue (the replay below recounts)
        bounds = self._adapted_bounds(history, t) if self.aci_gamma else self.bounds_
        self.exog_fallbacks_ = fallbacks
        q = bounds[bucket_of(np.arange(H))]
        cols = {"mean": mean}
        for j, col in enumerate(("lo_95", "lo_80", "hi_80", "hi_95")):
            cols[col] = np.clip(mean * (1.0 + q[:, j]) if self.relative else mean + q[:, j],
                                *self.clip)
        out = pd.DataFrame(cols, index=horizon)
        if self.surplus_probability_ is not None and self.naive_ is not None:
            naive = _point_forecasts(self.naive_, history, pd.DatetimeIndex([t]), H)[0]
            lead = np.arange(H)
            out.attrs["surplus_probability"] = self.surplus_probability_.predict(
                mean, np.clip(naive, *self.clip), (self.issue_hour + lead) % 24, lead)
        return out

    def _finish(self, out: pd.DataFrame, horizon: pd.DatetimeIndex,
                issued_at: pd.Timestamp) -> pd.DataFrame:
        res = super()._finish(out, horizon, issued_at)
        res.attrs["model"] = self.chosen_
        if "surplus_probability" in out.attrs:
            # P(index > 0) per hour [-], shape (h,): the contract's five columns stay as they are
            res.attrs["surplus_probability"] = out.attrs["surplus_probability"]
        return res

    def describe(self) -> dict[str, Any]:
        """The choice, for the plan's ``forecast_models`` block and the backtest.

        Returns
        -------
        dict
            ``model`` (chosen), ``metric`` (``mape`` [%] or ``mae``), ``validation_error``,
            ``naive_validation_error``, ``candidates`` (name -> validation error),
            ``skipped`` (name -> why), ``validation_from``/``validation_to`` (UTC),
            ``validation_issues``, ``extended_by`` (model of the leads beyond 24 h, if any),
            ``interval_alphas`` (lead bucket ``"start-end"`` [h] -> the miscoverage levels
            ``[alpha_80, alpha_95]`` of that bucket's intervals in the last prediction, adapted
            per bucket unless ``aci_gamma`` is ``None``), ``combination``
            (``True`` when the model is the signal's fixed combination), ``validation_regret``
            (candidate -> start regret [%] on the validation window, carbon intensity only),
            ``validation_score`` (candidate -> criterion, :func:`choose`; naive scores 2 with
            regret, 1 without), ``criterion`` (:data:`CRITERION`), ``issue_hour_utc``,
            ``features`` (each model used -> what it reads), ``exogenous`` and, for the
            green-surplus index, ``surplus_probability`` (the probability-of-surplus model and
            its validation Brier scores, :mod:`carbonsched.forecasts.surplus_probability`).
        """
        if self.window_ is None:
            raise ForecastError(f"{self.name}: call fit() before describe()")
        v0, v1, n = self.window_
        return {"model": self.chosen_, "metric": self.metric,
                "validation_error": self.validation_.get(self.chosen_ or ""),
                "naive_validation_error": self.validation_.get(NAIVE),
                "candidates": dict(self.validation_), "skipped": dict(self.skipped_),
                "validation_from": v0.isoformat(), "validation_to": v1.isoformat(),
                "validation_issues": n,
                "extended_by": self.extension_[0].name if self.extension_ else None,
                "interval_alphas": {f"{a}-{e}": [round(float(x), 4) for x in self.alphas_[b]]
                                    for b, (a, e) in enumerate(LEAD_BUCKETS)
                                    if a < max(24, self.horizon_hours)},
                "combination": self.combined_, "validation_regret": dict(self.regret_),
                "validation_score": dict(self.scores_), "criterion": CRITERION,
                "issue_hour_utc": self.issue_hour,
                "features": {c.name: self._features_used(c, m) for c, m in self.members_}
                | ({self.extension_[0].name: list(self.extension_[0].features)}
                   if self.extension_ else {}),
                "exogenous": self._exog_summary()} | (
                    {"surplus_probability": self.surplus_probability_.describe()}
                    if self.surplus_probability_ is not None else {})

    def _features_used(self, c: Candidate, m: Forecaster) -> list[str]:
        used = getattr(m, "used_features", None)
        if used is None:
            return list(c.features)
        # the exogenous ridge names only the forecasts some lead's regression reads
        keep = set(used())
        return [f for f in c.features if " forecast for the target hour" not in f
                or f.split(" ", 1)[0] in keep]

    def _exog_summary(self) -> dict[str, Any] | None:
        """Exogenous forecasts offered: features, source, caveat, hours forecast without them."""
        from carbonsched.forecasts.exogenous import features_present

        feats = features_present(self.exog, self.signal)
        if not feats:
            return None
        a = self.exog.attrs if self.exog is not None else {}
        return {"features": list(feats), "source": a.get("source"), "caveat": a.get("caveat"),
                "used": any(c.name in {x.name for x in exogenous_candidates(self.signal,
                                                                            self.exog)}
                            for c, _ in self.members_),
                "fallback_hours": int(getattr(self, "exog_fallbacks_", 0))}


__all__ = ["ACI_GAMMA", "DEFAULT_SCHEDULE", "LEAD_BUCKETS", "NAIVE", "SIGNAL_SETTINGS",
           "Candidate", "ModelSchedule", "combination_members", "ensemble_members",
           "ensemble_name", "exogenous_candidates",
           "SelectedForecaster", "aci_replay", "conformal_bounds", "registry", "window_bounds"]
