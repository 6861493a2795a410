"""The DACF day-ahead backtest: protocol, metrics, validation-based model selection, output.

Protocol (Maji, Sitaraman & Shenoy, "DACF", ACM e-Energy 2022, doi:10.1145/3538637.3538849):

* target: direct carbon intensity recomputed from the fuel mix with the paper's Table 1
  factors (:func:`carbonsched.adapters.signals.dacf.direct_ci_from_mix`);
* test: every day 2021-07-01 .. 2021-12-31 (184 days, 4416 h); at 00:00 UTC of each day a
  forecast of its 24 hourly values is issued from data strictly before the issue time plus
  day-ahead GFS weather and *published operator* forecasts for that day;
* selection: every candidate is fitted on data before :data:`VALIDATION_START` and forecasts
  the validation days 2021-01-01 .. 2021-06-30 under the same rules; ensembles of the best
  two and three candidates (ranked by validation mean MAPE, equal weights) and the stack of
  every candidate (``ens_stack``: the convex weights of least validation MAPE,
  :func:`mape_weights`, scored out of fold over alternate weeks, :func:`stacked_forecast`)
  join the candidates; the model with the lowest validation mean MAPE is ``selected`` —
  test results are never looked at;
* refit policy: each candidate is fitted on everything before 2021-07-01 and, during the test,
  refitted every :data:`REFIT_DAYS` days on everything before the issue time (expanding window,
  the cadence at which the daily path refits its models; ``refit_days=None`` keeps the first
  fit); the validation forecasts that select the model are made the same way, from a fit
  before 2021-01-01 refitted at the same cadence (:func:`validation_blocks`); its intervals
  (:data:`INTERVAL_SETTINGS`: split conformal on a 90-day holdout, then a rolling 56-day
  window with adaptive conformal inference, gamma 0.05, chosen on validation coverage) use
  only forecasts whose actual values were all known before the issue time, each made by the
  fit in force at its own issue time;
* validation forecasts are computed with :meth:`DayAheadModel.backcast` (the same point
  forecasts as day-by-day ``predict``, tested); test forecasts go through ``predict`` one day
  at a time;
* inputs per region: GFS weather (CISO, PJM, ERCO, ISNE, SE), CAISO OASIS solar/wind (CISO),
  ENTSO-E wind (SE; every SE model is also run without it, suffix ``-noop``), ENTSO-E solar/
  wind (DE; test period only: before it the models are trained on the *actual* solar and wind
  generation in their place — "perfect prog" (Klein, Lewis & Enger, J. Meteorology 16, 1959,
  doi:10.1175/1520-0469(1959)016<0672:OPOPFB>2.0.CO;2) — so DE's validation errors are
  optimistic; every DE model is also run without them, suffix ``-noop``).

Metrics (percentages 0..100; ``APE_t = |f_t - a_t| / |a_t| * 100`` over hours with a known,
non-zero actual):

* ``mape_mean``: mean of hourly APE over the test hours (the paper's "Mean");
* ``mape_daily_median`` / ``_p90`` / ``_p95``: median / 90th / 95th percentile (numpy's linear
  interpolation) over the test days of the daily MAPE (mean APE of the day's 24 hours) — the
  paper's other columns;
* ``mae``: mean absolute error [g/kWh];
* ``coverage_80`` / ``coverage_95``: share of hours with ``lo <= actual <= hi``.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from carbonsched.adapters.signals.dacf import (
    direct_ci_from_mix,
    read_dacf_mix,
    read_dacf_reference,
    read_dacf_region,
)
from carbonsched.errors import DataFormatError, ForecastError, InputError
from carbonsched.fileio import atomic_path, atomic_write_text
from carbonsched.forecasts.base import Forecaster
from carbonsched.forecasts.baselines import SeasonalNaive
from carbonsched.forecasts.dacf_models import (
    DayAheadEnsemble,
    DayAheadModel,
    HourlyOLS,
    LightGBMDayAhead,
    lagged_source_shares,
)

REGIONS: tuple[str, ...] = ("CISO", "PJM", "ERCO", "ISNE", "SE", "DE")
VALIDATION_START = pd.Timestamp("2021-01-01", tz="UTC")
TEST_START = pd.Timestamp("2021-07-01", tz="UTC")
TEST_END = pd.Timestamp("2022-01-01", tz="UTC")
#: Published mean MAPE [%] of DACF, Table 4 of the paper.
DACF_PUBLISHED_MAPE: dict[str, float] = {"CISO": 7.41, "PJM": 3.30, "ERCO": 8.05, "ISNE": 4.44,
                                         "SE": 6.47, "DE": 9.08}
BASELINE = "seasonal_naive"
PUBLISHED = "dacf_published"
#: The ensemble of every candidate with the weights of least validation MAPE
#: (:func:`mape_weights`); ``ens_stack-noop`` over the ``-noop`` candidates. Built from two
#: candidates on. Its validation MAPE, the basis of selection, is out of fold
#: (:func:`stacked_forecast` over alternate weeks, :data:`STACK_FOLD_DAYS`): scored on the
#: hours its weights were fitted on it would be the least by construction.
STACK = "ens_stack"
#: Stack weights at or below this are dropped (the LP's vertex puts most at exactly 0) and the
#: rest renormalised. [-]
STACK_MIN_WEIGHT = 1e-9
#: Length of the stack's cross-validation blocks: alternate blocks of this many validation
#: days form its two folds, so neighbouring (correlated) days fall in one fold. [d]
STACK_FOLD_DAYS = 7
INTERVAL_SETTINGS: dict[str, Any] = {"calib_days": 90, "window_days": 56, "aci_gamma": 0.05}
#: Refit cadence of the test [d]: weekly, as the daily path refits its site models
#: (:class:`carbonsched.forecasts.registry.ModelSchedule`).
REFIT_DAYS = 7
FORECAST_COLUMNS = ("region", "model", "issued_at", "ts", "actual", "mean", "lo_80", "hi_80",
                    "lo_95", "hi_95")


# --- metrics -----------------------------------------------------------------------------------
def _ape(actual: np.ndarray | pd.Series, forecast: np.ndarray | pd.Series) -> np.ndarray:
    a = np.asarray(actual, float)
    f = np.asarray(forecast, float)
    ok = np.isfinite(a) & np.isfinite(f) & (a != 0)
    out = np.full(a.shape, np.nan)
    out[ok] = np.abs(f[ok] - a[ok]) / np.abs(a[ok]) * 100.0
    return out


def mape_mean(actual: np.ndarray | pd.Series, forecast: np.ndarray | pd.Series) -> float:
    """Mean absolute percentage error over hours, the DACF paper's "Mean" [%].

    ``100 * mean_t |f_t - a_t| / |a_t|`` over hours with a finite, non-zero actual and a finite
    forecast. Shapes ``(n,)``.
    """
    return float(np.nanmean(_ape(actual, forecast)))


def daily_mapes(actual: pd.Series, forecast: pd.Series) -> pd.Series:
    """MAPE of each UTC day [%]: mean hourly APE of the day's hours, indexed by day.

    Parameters
    ----------
    actual, forecast
        Hourly series on the same tz-aware UTC index, shape ``(n,)``. [g/kWh]
    """
    ape = pd.Series(_ape(actual, forecast.reindex(actual.index)), index=actual.index)
    return ape.groupby(actual.index.floor("D")).mean().dropna()


def coverage(actual: np.ndarray | pd.Series, lo: np.ndarray | pd.Series,
             hi: np.ndarray | pd.Series) -> float:
    """Share of hours with ``lo <= actual <= hi`` [%], over hours with a finite actual."""
    a = np.asarray(actual, float)
    ok = np.isfinite(a)
    inside = (np.asarray(lo, float)[ok] <= a[ok]) & (a[ok] <= np.asarray(hi, float)[ok])
    return float(inside.mean() * 100.0)


def mae(actual: np.ndarray | pd.Series, forecast: np.ndarray | pd.Series) -> float:
    """Mean absolute error [unit of the series] over hours where both are finite."""
    d = np.abs(np.asarray(forecast, float) - np.asarray(actual, float))
    return float(np.nanmean(d))


def mape_weights(actual: np.ndarray | pd.Series, forecasts: np.ndarray) -> np.ndarray:
    """Convex weights of the forecasts whose weighted mean has the least mean APE.

    Minimises ``mean_t |sum_i w_i f_it - a_t| / |a_t|`` over ``w >= 0, sum_i w_i = 1`` on the
    hours with a finite, non-zero actual and every forecast finite: least absolute deviations
    as a linear program (Charnes, Cooper & Ferguson, *Management Science* 1(2), 1955,
    doi:10.1287/mnsc.1.2.138; one deviation variable per hour), solved to optimality by
    ``scipy.optimize.linprog`` with HiGHS. Every member alone and every equal-weight mean are
    feasible points, so on those hours the result's mean APE is at most any of theirs.

    Parameters
    ----------
    actual
        Observed values, shape ``(n,)``. [g/kWh]
    forecasts
        One row per candidate, shape ``(k, n)``. [g/kWh]

    Returns
    -------
    ndarray
        Weights, shape ``(k,)``, each in ``[0, 1]``, summing to 1. [-]

    Raises
    ------
    ForecastError
        Shapes other than ``(n,)`` and ``(k, n)``, no hour to fit on, or the LP not solved.
    """
    from scipy import sparse
    from scipy.optimize import linprog

    a = np.asarray(actual, float)
    f = np.asarray(forecasts, float)
    if a.ndim != 1 or f.ndim != 2 or f.shape[1] != a.shape[0] or f.shape[0] == 0:
        raise ForecastError(f"mape_weights: actual of shape {a.shape} and forecasts of shape "
                            f"{f.shape}; give actual as (n,) and forecasts as (k, n), one row "
                            "per candidate")
    ok = np.isfinite(a) & (a != 0) & np.isfinite(f).all(axis=0)
    if not ok.any():
        raise ForecastError("mape_weights: no hour with a finite, non-zero actual and every "
                            "forecast finite; give forecasts that overlap the actuals")
    a, f = a[ok], f[:, ok]
    k, n = f.shape
    # variables: the k weights, then one deviation e_t >= |w.f_t - a_t| per hour
    cost = np.concatenate([np.zeros(k), 1.0 / (np.abs(a) * n)])
    ft, eye = sparse.csr_matrix(f.T), sparse.identity(n, format="csr")
    a_ub = sparse.vstack([sparse.hstack([ft, -eye]), sparse.hstack([-ft, -eye])])
    a_eq = sparse.csr_matrix(np.concatenate([np.ones(k), np.zeros(n)])[None, :])
    res = linprog(cost, A_ub=a_ub, b_ub=np.concatenate([a, -a]), A_eq=a_eq, b_eq=[1.0],
                  bounds=[(0.0, None)] * (k + n), method="highs")
    if res.status != 0:
        raise ForecastError(f"mape_weights: the LP was not solved ({res.message})")
    w = np.clip(res.x[:k], 0.0, None)
    return w / w.sum()


def stacked_forecast(actual: np.ndarray | pd.Series, forecasts: np.ndarray,
                     folds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Stack weights on every hour, and each hour's stacked forecast out of its fold.

    The weights (:func:`mape_weights`) fitted on all hours are the stack's; the out-of-fold
    forecast of an hour uses weights fitted on the hours of every other fold only, so its
    error scores the stack out of sample, as every single candidate's validation error is
    (blocked cross-validation: Bergmeir & Benítez, *Information Sciences* 191, 2012,
    doi:10.1016/j.ins.2011.12.028).

    Parameters
    ----------
    actual, forecasts
        As :func:`mape_weights`'s: shapes ``(n,)`` and ``(k, n)``. [g/kWh]
    folds
        Fold of each hour, shape ``(n,)``, integers; at least two distinct values.

    Returns
    -------
    weights : ndarray
        Shape ``(k,)``, fitted on every hour. [-]
    out_of_fold : ndarray
        Shape ``(n,)``, NaN where a forecast is missing. [g/kWh]

    Raises
    ------
    ForecastError
        As :func:`mape_weights`; ``folds`` of another length, or a single fold.
    """
    a = np.asarray(actual, float)
    f = np.asarray(forecasts, float)
    folds = np.asarray(folds)
    if folds.shape != a.shape or len(np.unique(folds)) < 2:
        raise ForecastError(f"stacked_forecast: folds of shape {folds.shape} with "
                            f"{len(np.unique(folds))} distinct value(s) for actual of shape "
                            f"{a.shape}; give one fold per hour and at least two folds")
    out = np.full(a.shape, np.nan)
    for fold in np.unique(folds):
        mine = folds == fold
        w = mape_weights(np.where(mine, np.nan, a), f)
        out[mine] = (w @ f)[mine]
    return mape_weights(a, f), out


def score(frame: pd.DataFrame) -> dict[str, float]:
    """All metrics of one model's hourly forecasts (columns ``actual, mean, lo_*, hi_*``; ts index).

    Returns
    -------
    dict
        ``mape_mean, mape_daily_median, mape_daily_p90, mape_daily_p95, mae, coverage_80,
        coverage_95`` (percentages 0..100, ``mae`` in g/kWh).
    """
    d = daily_mapes(frame["actual"], frame["mean"]).to_numpy()
    return {
        "mape_mean": mape_mean(frame["actual"], frame["mean"]),
        "mape_daily_median": float(np.percentile(d, 50)),
        "mape_daily_p90": float(np.percentile(d, 90)),
        "mape_daily_p95": float(np.percentile(d, 95)),
        "mae": mae(frame["actual"], frame["mean"]),
        "coverage_80": coverage(frame["actual"], frame["lo_80"], frame["hi_80"]),
        "coverage_95": coverage(frame["actual"], frame["lo_95"], frame["hi_95"]),
    }


# --- data --------------------------------------------------------------------------------------
@dataclass
class RegionData:
    """One region's inputs: target ``y`` [g/kWh], exogenous ``X`` and the test reference."""

    region: str
    y: pd.Series
    X: pd.DataFrame | None
    weather: list[str]
    operator: list[str]
    reference: pd.DataFrame


def load_region(data_dir: str | Path, region: str) -> RegionData:
    """Read a region's DACF files into the target series, exogenous frame and reference.

    Raises
    ------
    DataFormatError
        A file is missing or malformed (file and line in the message).
    """
    d = Path(data_dir)
    mix, _ = read_dacf_mix(d / f"{region}_2019_clean.csv")
    y = direct_ci_from_mix(mix)
    ref, _ = read_dacf_reference(d / f"{region}_carbon_from_src_prod_forecasts_direct.csv")
    end = TEST_END + pd.Timedelta(hours=23)
    if region == "DE":
        test, _ = read_dacf_reference(d / "DE_src_prod_forecasts_test_period.csv")
        ops = ["op_solar_mw", "op_wind_mw"]
        stand_in = mix[["solar", "wind"]].rename(columns={"solar": "op_solar_mw",
                                                          "wind": "op_wind_mw"})
        X = pd.concat([stand_in[stand_in.index < TEST_START],
                       test.loc[test.index >= TEST_START, ops]])
        X = X.reindex(pd.date_range(y.index[0], end, freq="h", name="ts"))
        X = X.join(lagged_source_shares(mix).reindex(X.index))
        return RegionData(region, y, X, [], ops, ref)
    reg, meta = read_dacf_region(d / f"{region}.csv")
    cols = meta["weather_columns"] + meta["operator_columns"]
    X = reg[cols].reindex(pd.date_range(y.index[0], end, freq="h", name="ts"))
    X = X.join(lagged_source_shares(mix).reindex(X.index))
    return RegionData(region, y, X, meta["weather_columns"], meta["operator_columns"], ref)


# --- candidates --------------------------------------------------------------------------------
SOURCE_LAG_PREFIX = "lag24_"

#: Feature groups of the ``_x`` candidates
#: (:data:`~carbonsched.forecasts.dacf_models.FEATURE_GROUPS`).
EXTRA_FEATURES: tuple[str, ...] = ("wind_trajectory", "operator_change")
#: LightGBM settings of the ``_x`` candidates, the same in every region: with up to 18 more
#: (correlated) columns, each tree samples half of them and a leaf needs 50 rows.
EXTRA_LGBM_PARAMS: dict[str, Any] = {"colsample_bytree": 0.5, "min_child_samples": 50}

CANDIDATES: dict[str, tuple[type[DayAheadModel], dict[str, Any], bool]] = {
    "ols_level": (HourlyOLS, {"target": "level"}, False),
    "ols_level_src": (HourlyOLS, {"target": "level"}, True),
    "ols_ratio_src": (HourlyOLS, {"target": "ratio", "scale_free": True}, True),
    "lgbm_level": (LightGBMDayAhead, {"target": "level"}, False),
    "lgbm_level_src": (LightGBMDayAhead, {"target": "level"}, True),
    "lgbm_ratio_src": (LightGBMDayAhead, {"target": "ratio", "scale_free": True}, True),
    "ols_ratio_src_x": (HourlyOLS, {"target": "ratio", "scale_free": True,
                                    "features": EXTRA_FEATURES, "ridge": 0.05}, True),
    "lgbm_level_src_x": (LightGBMDayAhead, {"target": "level", "features": EXTRA_FEATURES,
                                            **EXTRA_LGBM_PARAMS}, True),
    "lgbm_ratio_src_x": (LightGBMDayAhead, {"target": "ratio", "scale_free": True,
                                            "features": EXTRA_FEATURES, **EXTRA_LGBM_PARAMS},
                         True),
}
"""Base candidates: name -> (class, parameters, reads the 24 h-lagged fuel-mix shares
(:func:`~carbonsched.forecasts.dacf_models.lagged_source_shares`)). The ratio models are
``scale_free``: their lagged values enter as log ratios to yesterday's value at the same hour
(as the daily path's ``ols_hourly_ratio``). Every candidate also reads the region's day-ahead
weather and operator forecasts; in SE and DE a ``-noop`` variant reads no operator forecast.
The ``_x`` candidates add the feature groups :data:`EXTRA_FEATURES` ("wind_trajectory": the
GFS wind around each hour and over the forecast day, temperature and irradiance daily terms;
"operator_change": the operator's forecast against the generation 24 h earlier;
:func:`~carbonsched.forecasts.dacf_models.day_ahead_design`); a region without the columns a
group reads (DE has no GFS; only CISO, SE and DE have operator forecasts) gets nothing from it.
Their settings are one for all regions: LightGBM :data:`EXTRA_LGBM_PARAMS`, OLS ridge 0.05 on
standardised regressors (the OLS takes the groups' every-lead columns only). Which candidate,
ensemble or stack is used is decided per region on validation MAPE, as for the others.
Ensembles ``ens_top2``/``ens_top3`` of the best validation candidates and the stack
``ens_stack`` (:data:`STACK`) are added per region.
Interval settings: :data:`INTERVAL_SETTINGS` for all."""


def _variants(data: RegionData, names: Sequence[str]) -> dict[str, tuple[str, list[str]]]:
    """Candidate key -> (base candidate, exogenous columns)."""
    out: dict[str, tuple[str, list[str]]] = {}
    src = [c for c in (data.X.columns if data.X is not None else [])
           if c.startswith(SOURCE_LAG_PREFIX)]
    for n in names:
        extra = src if CANDIDATES[n][2] else []
        out[n] = (n, data.weather + data.operator + extra)
        if data.operator and data.region in ("SE", "DE"):
            out[f"{n}-noop"] = (n, data.weather + extra)
    return out


def _make(key: str, cands: dict[str, tuple[str, list[str]]], **over: Any) -> DayAheadModel:
    base, ex = cands[key]
    cls, kw, _ = CANDIDATES[base]
    m = cls(exog=ex, **kw, **{**INTERVAL_SETTINGS, **over})
    m.name = key
    return m


def _replay(model: Forecaster, data: RegionData, start: pd.Timestamp, end: pd.Timestamp,
            fit_end: pd.Timestamp, region: str, name: str) -> pd.DataFrame:
    """Fit on data before ``fit_end`` and issue one 24 h forecast at 00:00 of each day."""
    y_fit = data.y[data.y.index < fit_end]
    exog = getattr(model, "exog", ())
    X = data.X[list(exog)] if (exog and data.X is not None) else None
    model.fit(y_fit, None if X is None else X[X.index < fit_end])
    rows = []
    for day in pd.date_range(start, end - pd.Timedelta(days=1), freq="D"):
        fc = model.predict(day, 24, y=data.y[data.y.index < day],
                           X=None if X is None else X[X.index < day + pd.Timedelta(days=1)])
        fc = fc.reset_index()
        fc.insert(0, "issued_at", day)
        rows.append(fc)
    out = pd.concat(rows, ignore_index=True)
    out["actual"] = data.y.reindex(pd.DatetimeIndex(out["ts"])).to_numpy()
    out.insert(0, "model", name)
    out.insert(0, "region", region)
    return out[list(FORECAST_COLUMNS)]


def _metrics(fc: pd.DataFrame) -> dict[str, float]:
    return score(fc.set_index("ts"))


# --- result ------------------------------------------------------------------------------------
@dataclass
class BacktestResult:
    """Outcome of :func:`run_backtest`.

    Attributes
    ----------
    results
        One dict per (region, model): ``region, model, mape_mean, mape_daily_median,
        mape_daily_p90, mape_daily_p95, mae, coverage_80, coverage_95, selected`` plus
        ``val_mape_mean`` (validation mean MAPE, the basis of selection) and ``inputs`` (what
        the model reads).
    forecasts
        Long frame ``region, model, issued_at, ts, actual, mean, lo_80, hi_80, lo_95, hi_95``
        (test period, every model and DACF's published forecast).
    meta
        Protocol, refit policy, selection per region, timings [s].
    """

    results: list[dict[str, Any]]
    forecasts: pd.DataFrame
    meta: dict[str, Any] = field(default_factory=dict)

    def to_json(self, path: str | Path) -> None:
        """Write ``{"results": [...], "meta": {...}}`` as JSON."""
        atomic_write_text(path, json.dumps({"results": self.results, "meta": self.meta},
                                           indent=2, default=str) + "\n")

    def to_csv(self, path: str | Path) -> None:
        """Write :attr:`forecasts` as CSV, timestamps in UTC ISO 8601."""
        f = self.forecasts.copy()
        for c in ("issued_at", "ts"):
            f[c] = pd.DatetimeIndex(f[c]).strftime("%Y-%m-%dT%H:%M:%SZ")
        with atomic_path(path) as tmp:
            f.to_csv(tmp, index=False, float_format="%.4f")


def validation_blocks(refit_days: int | None) -> list[tuple[pd.Timestamp, pd.Timestamp]]:
    """The validation half-year cut where the test's refit cadence would refit: ``[start, end)``.

    The test fits on everything before :data:`TEST_START` and refits every ``refit_days`` days
    from it; validation does the same from :data:`VALIDATION_START`, so the forecasts that
    select a model are made by fits as old as the test's are. ``None``: one block (one fit).

    Returns
    -------
    list of (Timestamp, Timestamp)
        Consecutive blocks covering 2021-01-01 .. 2021-07-01 (UTC); each starts at 00:00 and
        is ``refit_days`` days long but the last, which ends at :data:`TEST_START`.
    """
    if refit_days is None:
        return [(VALIDATION_START, TEST_START)]
    starts = list(pd.date_range(VALIDATION_START, TEST_START, freq=f"{refit_days}D",
                                inclusive="left"))
    return list(zip(starts, starts[1:] + [TEST_START], strict=True))


def _validate(model: DayAheadModel, data: RegionData,
              refit_days: int | None = REFIT_DAYS) -> pd.DataFrame:
    """Point-forecast every validation day (00:00 UTC) as the test forecasts its days.

    Each block of :func:`validation_blocks` is forecast by a fit on everything before the
    block's start (expanding window), as the test's refits are; ``refit_days=None`` fits once,
    before :data:`VALIDATION_START`.
    """
    ex = list(model.exog)
    X = data.X[ex] if ex and data.X is not None else None
    y_known = data.y[data.y.index < TEST_START]
    parts = []
    for start, end in validation_blocks(refit_days):
        model.fit(data.y[data.y.index < start], None if X is None else X[X.index < start])
        issues = pd.date_range(start, end - pd.Timedelta(days=1), freq="D")
        parts.append(model.backcast(y_known, X, issues))
    return pd.concat(parts, ignore_index=True)


def _run_region(data_dir: str | Path, region: str, names: Sequence[str],
                say: Callable[[str], None], refit_days: int | None = REFIT_DAYS,
                ) -> tuple[list[dict[str, Any]], list[pd.DataFrame], dict[str, Any], float]:
    t0 = time.perf_counter()
    data = load_region(data_dir, region)
    say(f"{region}: data loaded ({len(data.y)} h)")
    cands = _variants(data, names)
    val: dict[str, pd.DataFrame] = {}
    for key in cands:
        val[key] = _validate(_make(key, cands, calib_days=0), data, refit_days)
        say(f"{region}: validation {key}: MAPE "
            f"{mape_mean(val[key]['actual'], val[key]['mean']):.2f}")
    vmape = {k: mape_mean(v["actual"], v["mean"]) for k, v in val.items()}
    ranked = sorted(vmape, key=lambda k: vmape[k])
    ens = {f"ens_top{k}": ranked[:k] for k in (2, 3) if len(ranked) >= k}
    noop_keys = [k for k in cands if k.endswith("-noop")]
    if noop_keys:
        r2 = [k for k in ranked if k in noop_keys]
        ens.update({f"ens_top{k}-noop": r2[:k] for k in (2, 3) if len(r2) >= k})
    weights: dict[str, list[float]] = {k: [1.0 / len(m)] * len(m) for k, m in ens.items()}
    # a stack needs two candidates; with one it is that candidate
    pools = {k: v for k, v in ((STACK, list(cands)), (f"{STACK}-noop", noop_keys))
             if len(v) >= 2}
    actual = val[ranked[0]]["actual"].to_numpy(float)
    days = (pd.DatetimeIndex(val[ranked[0]]["ts"]) - VALIDATION_START).days.to_numpy()
    folds = (days // STACK_FOLD_DAYS) % 2      # alternate weeks
    for key, members in ens.items():
        mean = np.average([val[m]["mean"].to_numpy() for m in members], axis=0,
                          weights=weights[key])
        vmape[key] = mape_mean(actual, mean)
    for key, pool in pools.items():
        w, oof = stacked_forecast(actual, np.stack([val[m]["mean"].to_numpy(float)
                                                    for m in pool]), folds)
        keep = w > STACK_MIN_WEIGHT
        ens[key] = [m for m, k in zip(pool, keep, strict=True) if k]
        weights[key] = (w[keep] / w[keep].sum()).tolist()
        vmape[key] = mape_mean(actual, oof)    # out of fold, as every candidate's
    selected = min(vmape, key=lambda k: vmape[k])
    sel_meta: dict[str, Any] = {
        "selected": selected,
        "validation_mape_mean": {k: round(v, 3) for k, v in vmape.items()},
        "ensembles": ens,
        "stack_weights": {k: dict(zip(ens[k], (round(x, 6) for x in weights[k]), strict=True))
                          for k in pools},
    }
    if noop_keys:
        pool = noop_keys + [k for k in ens if k.endswith("-noop")]
        sel_meta["selected_without_operator_forecast"] = min(pool, key=lambda k: vmape[k])
    results: list[dict[str, Any]] = []
    forecasts: list[pd.DataFrame] = []
    # test: fit on everything before 2021-07-01, refit every refit_days during the test
    fitted: dict[str, DayAheadModel] = {}
    for key in list(cands) + list(ens):
        if key in ens:  # members are the fitted candidates: their fits are reused
            m = DayAheadEnsemble([fitted[k] for k in ens[key]], weights=weights[key],
                                 **INTERVAL_SETTINGS, refit_days=refit_days)
        else:
            m = fitted[key] = _make(key, cands, refit_days=refit_days)
        m.name = key
        fc = _replay(m, data, TEST_START, TEST_END, TEST_START, region, key)
        forecasts.append(fc)
        results.append({"region": region, "model": key, **_metrics(fc),
                        "selected": key == selected, "val_mape_mean": vmape[key],
                        "inputs": "+".join(_input_kinds(m.exog)) or "history"})
        say(f"{region}: test {key}: MAPE {results[-1]['mape_mean']:.2f}")
    sn = SeasonalNaive(season_hours=24)
    sn.name = BASELINE
    fc = _replay(sn, data, TEST_START, TEST_END, TEST_START, region, BASELINE)
    forecasts.append(fc)
    results.append({"region": region, "model": BASELINE, **_metrics(fc), "selected": False,
                    "val_mape_mean": None, "inputs": "history"})
    pub = _published(data, region)
    forecasts.append(pub)
    results.append({"region": region, "model": PUBLISHED, **_metrics(pub), "coverage_80": None,
                    "coverage_95": None, "selected": False, "val_mape_mean": None,
                    "inputs": "paper", "published_table4": DACF_PUBLISHED_MAPE[region]})
    secs = time.perf_counter() - t0
    say(f"{region}: done in {secs:.0f} s, selected {selected}")
    return results, forecasts, sel_meta, secs


def _run_region_quiet(args: tuple[str, str, list[str], int | None]) -> tuple[Any, ...]:
    return _run_region(args[0], args[1], args[2], lambda _m: None, args[3])


def run_backtest(
    data_dir: str | Path,
    regions: Sequence[str] | None = None,
    models: Sequence[str] | None = None,
    progress: Callable[[str], None] | None = None,
    n_jobs: int | None = None,
    refit_days: int | None = REFIT_DAYS,
) -> BacktestResult:
    """Run the DACF day-ahead backtest (see the module docstring for the protocol).

    Parameters
    ----------
    data_dir
        Directory with the DACF files (``$CARBONSCHED_SHARED_DATA/dacf``).
    regions
        Subset of :data:`REGIONS` (default all six).
    models
        Subset of the candidate names (:data:`CANDIDATES`; ``-noop`` variants follow their
        base). Default all. The seasonal-naive baseline and DACF's published forecast are
        always reported.
    progress
        Optional callable receiving status lines (per step with one worker, per region with
        more).
    n_jobs
        Worker processes, one region each (default ``min(2, cpu count, regions)``); every
        worker's numerical libraries run one thread.
    refit_days
        Refit cadence [d] of the test and of the validation forecasts that select the model
        (default :data:`REFIT_DAYS`); ``None`` fits once before each.

    Returns
    -------
    BacktestResult

    Raises
    ------
    InputError
        Unknown region or model name, or ``refit_days`` below 1.
    DataFormatError
        A DACF file is missing or malformed.
    """
    say = progress or (lambda _msg: None)
    regions = list(regions) if regions else list(REGIONS)
    bad = [r for r in regions if r not in REGIONS]
    if bad:
        raise InputError(f"unknown region(s) {bad}; choose from {list(REGIONS)}")
    names = list(models) if models else list(CANDIDATES)
    bad = [m for m in names if m not in CANDIDATES]
    if bad:
        raise InputError(f"unknown model(s) {bad}; choose from {list(CANDIDATES)}")
    if refit_days is not None and refit_days < 1:
        raise InputError(f"refit_days must be at least 1 day (or None: no refit), "
                         f"got {refit_days}")
    if not Path(data_dir).is_dir():
        raise DataFormatError(data_dir, "not a directory; give the DACF data directory, e.g. "
                                        "../shared/data/dacf")
    if n_jobs is None:
        n_jobs = min(2, os.cpu_count() or 1, len(regions))
    meta: dict[str, Any] = {
        "protocol": "issue 00:00 UTC daily, 24 h; test 2021-07-01..2021-12-31; validation "
                    "2021-01-01..2021-06-30 (fit before 2021-01-01, refitted as the test "
                    "is); selection = lowest validation mean MAPE",
        "refit_policy": ("fit on all data before 2021-07-01; "
                         + ("no refit during the test" if refit_days is None else
                            f"refit every {refit_days} d during the test on all data before "
                            "the issue time")
                         + "; rolling, adaptive interval calibration on forecasts whose "
                           "actuals are known before each issue time, each by the fit in "
                           "force at its issue time"),
        "refit_days": refit_days,
        "interval_settings": INTERVAL_SETTINGS,
        "n_jobs": n_jobs, "selection": {}, "seconds": {},
    }
    t_all = time.perf_counter()
    if n_jobs > 1:
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        ctx = mp.get_context("spawn")
        with ProcessPoolExecutor(max_workers=n_jobs, mp_context=ctx) as pool:
            futs = {r: pool.submit(_run_region_quiet, (str(data_dir), r, names, refit_days))
                    for r in regions}
            outs = {}
            for r in regions:
                outs[r] = futs[r].result()
                say(f"{r}: done in {outs[r][3]:.0f} s, selected {outs[r][2]['selected']}")
    else:
        outs = {r: _run_region(data_dir, r, names, say, refit_days) for r in regions}
    results: list[dict[str, Any]] = []
    forecasts: list[pd.DataFrame] = []
    for r in regions:
        res, fcs, sel, secs = outs[r]
        results += res
        forecasts += fcs
        meta["selection"][r] = sel
        meta["seconds"][r] = round(secs, 1)
    meta["seconds"]["total"] = round(time.perf_counter() - t_all, 1)
    return BacktestResult(results, pd.concat(forecasts, ignore_index=True), meta)


def _input_kinds(cols: Sequence[str]) -> list[str]:
    kinds = []
    if any(c.startswith("gfs_") for c in cols):
        kinds.append("gfs")
    if any(c.startswith("op_") for c in cols):
        kinds.append("operator")
    return kinds


def _published(data: RegionData, region: str) -> pd.DataFrame:
    ref = data.reference
    ref = ref[(ref.index >= TEST_START) & (ref.index < TEST_END)]
    if len(ref) != 24 * 184:
        raise ForecastError(f"{region}: reference file has {len(ref)} test hours, expected 4416")
    f = ref["dacf_forecast_g_per_kwh"].to_numpy(float)
    out = pd.DataFrame({
        "region": region, "model": PUBLISHED, "issued_at": ref.index.floor("D"), "ts": ref.index,
        "actual": data.y.reindex(ref.index).to_numpy(), "mean": f,
        "lo_80": np.nan, "hi_80": np.nan, "lo_95": np.nan, "hi_95": np.nan})
    return out


def render_table(results: Sequence[dict[str, Any]]) -> str:
    """Markdown: a summary (selected model vs DACF per region) and one table per region.

    Parameters
    ----------
    results
        :attr:`BacktestResult.results` (or the ``results`` list of its JSON).

    Returns
    -------
    str
        Markdown text; ``*`` marks the selected model; percentages with two decimals.
    """
    regions = list(dict.fromkeys(r["region"] for r in results))
    lines = ["| region | selected model | mean MAPE % | DACF mean MAPE % | beats DACF | "
             "80% coverage % | 95% coverage % |", "|---|---|---:|---:|:---:|---:|---:|"]
    for reg in regions:
        rows = [r for r in results if r["region"] == reg]
        sel = next((r for r in rows if r["selected"]), None)
        pub = next((r for r in rows if r["model"] == PUBLISHED), None)
        if sel is None or pub is None:
            continue
        beats = "yes" if sel["mape_mean"] <= pub["mape_mean"] else "no"
        lines.append(f"| {reg} | {sel['model']} | {sel['mape_mean']:.2f} | "
                     f"{pub['mape_mean']:.2f} | {beats} | {sel['coverage_80']:.1f} | "
                     f"{sel['coverage_95']:.1f} |")
    out = ["\n".join(lines)]

    def fmt(v: Any, nd: int = 2) -> str:
        return "–" if v is None or (isinstance(v, float) and not np.isfinite(v)) else f"{v:.{nd}f}"

    for reg in regions:
        rows = [r for r in results if r["region"] == reg]
        t = [f"### {reg}", "",
             "| model | inputs | mean MAPE % | daily median % | daily p90 % | daily p95 % | "
             "MAE g/kWh | cov 80 % | cov 95 % | validation MAPE % |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for r in rows:
            star = " *" if r["selected"] else ""
            cov = (r["coverage_80"], r["coverage_95"]) if r["model"] != PUBLISHED else (None, None)
            t.append(f"| {r['model']}{star} | {r.get('inputs', '')} | {fmt(r['mape_mean'])} | "
                     f"{fmt(r['mape_daily_median'])} | {fmt(r['mape_daily_p90'])} | "
                     f"{fmt(r['mape_daily_p95'])} | {fmt(r['mae'])} | {fmt(cov[0], 1)} | "
                     f"{fmt(cov[1], 1)} | {fmt(r.get('val_mape_mean'))} |")
        out.append("\n".join(t))
    return "\n\n".join(out) + "\n"
