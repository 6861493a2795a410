"""PUE from outdoor weather: a physical free-cooling/chiller model, its forecaster and calibration.

PUE (power usage effectiveness) = facility energy / IT energy, ISO/IEC 30134-2:2016 (The Green
Grid, White Paper #49, "PUE: A Comprehensive Examination of the Metric", 2012). Its hourly
variation at a site is driven by the cooling plant, which depends on the outdoor air:

* **Free cooling (economiser).** While the outdoor dry-bulb temperature is below the
  economiser limit, outside air (or a dry cooler) alone holds the IT inlet inside the ASHRAE
  recommended envelope of 18-27 °C (ASHRAE TC 9.9, *Thermal Guidelines for Data Processing
  Environments*, 5th ed., 2021); the chillers are off and only fans, pumps, UPS and power
  distribution losses remain: ``PUE = pue_min``.
* **Mechanical cooling.** Above the limit the chillers carry a growing share of the heat; their
  power rises roughly linearly with the temperature lift (the compressor work per unit heat
  grows with the condenser-evaporator temperature difference, Carnot bound COP = T_c/(T_h-T_c)),
  so ``PUE`` rises by ``mechanical_slope_per_c`` per °C above the limit.
* **Humidity penalty.** Above the limit, humid air lowers evaporative/adiabatic cooling
  effectiveness and adds dehumidification load, so ``PUE`` rises by ``humidity_slope`` per
  percentage point of relative humidity above ``humidity_ref_pct``.

This piecewise-linear form (a constant below a free-cooling temperature, a linear rise above)
is the shape of the published climate-driven PUE models, for example Depoorter, Oró & Salom,
"The location as an energy efficiency and renewable energy supply measure for data centres in
Europe", *Applied Energy* 140, 338-349, 2015, doi:10.1016/j.apenergy.2014.11.067, and of
operators' published seasonal PUE (Google, "Data center efficiency",
https://www.google.com/about/datacenters/efficiency/).

Model (``T`` outdoor dry-bulb [°C], ``RH`` relative humidity [%], ``x+ = max(x, 0)``)::

    PUE = min(pue_max, pue_min + s_T · (T - T_fc)+ + s_RH · (RH - RH_ref)+ · [T > T_fc])

Parameters are :class:`carbonsched.domain.PueModel`: the defaults (``pue_min`` 1.15,
``T_fc`` 18 °C = the ASHRAE recommended lower supply temperature, ``s_T`` 0.012/°C, ``s_RH``
0.0008/%, ``RH_ref`` 50 %, ``pue_max`` 1.8) are engineering defaults for an air-economised
hall, to be replaced by :func:`calibrate_pue_model` where a site supplies PUE telemetry.
"""

from __future__ import annotations

from dataclasses import asdict, replace
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import least_squares
from scipy.stats import norm

from carbonsched.domain import PueModel
from carbonsched.errors import ForecastError, InputError
from carbonsched.forecasts.base import Forecaster
from carbonsched.forecasts.baselines import INTERVAL_PROBS, empirical_quantiles

WEATHER_COLUMNS = ("temperature_c", "relative_humidity_pct")
CALIBRATED = ("pue_min", "free_cooling_below_c", "mechanical_slope_per_c", "humidity_slope")


def check_pue_model(params: PueModel) -> None:
    """Raise :class:`InputError` unless ``params`` is physically meaningful.

    ``pue_min >= 1`` (PUE is at least 1 by definition, ISO/IEC 30134-2), ``pue_max >=
    pue_min``, both slopes >= 0, ``0 <= humidity_ref_pct <= 100``.
    """
    problems = []
    if not params.pue_min >= 1.0:
        problems.append(f"pue_min = {params.pue_min} < 1 (PUE is at least 1)")
    if not params.pue_max >= params.pue_min:
        problems.append(f"pue_max = {params.pue_max} < pue_min = {params.pue_min}")
    if not params.mechanical_slope_per_c >= 0:
        problems.append(f"mechanical_slope_per_c = {params.mechanical_slope_per_c} < 0")
    if not params.humidity_slope >= 0:
        problems.append(f"humidity_slope = {params.humidity_slope} < 0")
    if not 0 <= params.humidity_ref_pct <= 100:
        problems.append(f"humidity_ref_pct = {params.humidity_ref_pct} outside 0..100 %")
    if problems:
        raise InputError("invalid PueModel: " + "; ".join(problems)
                         + "; fix the site's [pue] table in its catalog (regions/schema.md)")


def pue_from_weather(
    temperature_c: pd.Series | np.ndarray,
    relative_humidity_pct: pd.Series | np.ndarray,
    params: PueModel,
) -> pd.Series:
    """Hourly PUE from outdoor weather with the free-cooling/chiller model (module docstring).

    Parameters
    ----------
    temperature_c
        Outdoor dry-bulb temperature, shape ``(n,)``. [°C]
    relative_humidity_pct
        Outdoor relative humidity, shape ``(n,)``. [%] (0-100)
    params
        Model parameters.

    Returns
    -------
    Series
        ``pue`` [-], shape ``(n,)``, on ``temperature_c``'s index when it is a Series; NaN
        where an input is NaN.

    Raises
    ------
    InputError
        Invalid ``params``, inputs of different lengths, or a humidity outside 0-100 %.
    """
    check_pue_model(params)
    index = temperature_c.index if isinstance(temperature_c, pd.Series) else None
    t = np.asarray(temperature_c, dtype=float)
    rh = np.asarray(relative_humidity_pct, dtype=float)
    if t.shape != rh.shape:
        raise InputError(f"pue_from_weather: temperature_c has shape {t.shape} but "
                         f"relative_humidity_pct has {rh.shape}; pass aligned series")
    bad = np.isfinite(rh) & ((rh < 0) | (rh > 100))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        label = index[i] if index is not None else None
        # a time index names the hour; any other index (or an array) the label or position
        where = (label.isoformat() if hasattr(label, "isoformat")
                 else f"index {label}" if label is not None else f"position {i}")
        raise InputError(f"relative_humidity_pct = {rh[i]} at {where} is outside 0-100 %; "
                         "pass relative humidity in percent")
    pue = _pue(t, rh, params.pue_min, params.free_cooling_below_c,
               params.mechanical_slope_per_c, params.humidity_slope, params.humidity_ref_pct,
               params.pue_max)
    return pd.Series(pue, index=index, name="pue")


def _pue(t: np.ndarray, rh: np.ndarray, pue_min: float, t_fc: float, s_t: float, s_rh: float,
         rh_ref: float, pue_max: float) -> np.ndarray:
    mech = t > t_fc
    with np.errstate(invalid="ignore"):
        p = (pue_min + s_t * np.maximum(t - t_fc, 0.0)
             + s_rh * np.maximum(rh - rh_ref, 0.0) * mech)
    p = np.minimum(p, pue_max)
    p[~(np.isfinite(t) & np.isfinite(rh))] = np.nan
    return p


def free_cooling_hours(temperature_c: pd.Series, params: PueModel) -> int:
    """Hours with the chillers off (``temperature_c <= free_cooling_below_c``). [h]"""
    return int((temperature_c.dropna() <= params.free_cooling_below_c).sum())


def calibrate_pue_model(
    weather: pd.DataFrame,
    measured_pue: pd.Series,
    initial: PueModel | None = None,
    fit: tuple[str, ...] = CALIBRATED,
) -> PueModel:
    """Fit PUE model parameters to measured PUE telemetry (nonlinear least squares).

    Minimises ``sum((pue_model(T, RH) - measured)^2)`` over the parameters named in ``fit``
    with :func:`scipy.optimize.least_squares` (trust-region reflective, bounds: ``pue_min``
    in [1, min(3, pue_max)], ``free_cooling_below_c`` in [-10, 40] °C, slopes in [0, 0.2]);
    the others keep their ``initial`` values (``humidity_ref_pct`` and ``pue_max`` are not
    identifiable separately from the slopes on ordinary telemetry).

    Parameters
    ----------
    weather
        Hourly frame with ``temperature_c`` [°C] and ``relative_humidity_pct`` [%], shape
        ``(n, k)``.
    measured_pue
        Measured hourly PUE [-], shape ``(m,)``; aligned to ``weather`` by timestamp.
    initial
        Starting point and fixed values; default :class:`PueModel()`.
    fit
        Names of the parameters to fit (subset of :data:`CALIBRATED`).

    Returns
    -------
    PueModel
        ``initial`` with the fitted parameters replaced.

    Raises
    ------
    InputError
        Missing weather columns, an unknown parameter name, or fewer than 24 hours where
        weather and telemetry are both known.
    ForecastError
        If the optimiser does not converge.
    """
    initial = initial or PueModel()
    check_pue_model(initial)
    missing = [c for c in WEATHER_COLUMNS if c not in weather]
    if missing:
        raise InputError(f"calibrate_pue_model: weather lacks {missing} (has "
                         f"{list(weather.columns)}); pass temperature_c and relative_humidity_pct")
    unknown = [f for f in fit if f not in CALIBRATED]
    if unknown:
        raise InputError(f"calibrate_pue_model: cannot fit {unknown}; choose from {CALIBRATED}")
    data = weather[list(WEATHER_COLUMNS)].join(measured_pue.rename("pue"), how="inner").dropna()
    if len(data) < 24:
        raise InputError(
            f"calibrate_pue_model: only {len(data)} hour(s) have both weather and measured PUE; "
            "need at least 24 (check that both are hourly UTC on the same hours)")
    t = data["temperature_c"].to_numpy(float)
    rh = data["relative_humidity_pct"].to_numpy(float)
    obs = data["pue"].to_numpy(float)
    base = asdict(initial)
    lo = {"pue_min": 1.0, "free_cooling_below_c": -10.0, "mechanical_slope_per_c": 0.0,
          "humidity_slope": 0.0}
    hi = {"pue_min": min(3.0, initial.pue_max), "free_cooling_below_c": 40.0,
          "mechanical_slope_per_c": 0.2, "humidity_slope": 0.2}
    scale = {"pue_min": 0.1, "free_cooling_below_c": 5.0, "mechanical_slope_per_c": 0.01,
             "humidity_slope": 0.001}
    x0 = np.array([np.clip(base[f], lo[f], hi[f]) for f in fit])

    def model(x: np.ndarray) -> np.ndarray:
        p = dict(base)
        p.update(zip(fit, x, strict=True))
        return _pue(t, rh, p["pue_min"], p["free_cooling_below_c"], p["mechanical_slope_per_c"],
                    p["humidity_slope"], p["humidity_ref_pct"], p["pue_max"])

    best = None
    # The hinge makes the cost piecewise smooth in free_cooling_below_c: start from a few
    # limits across the observed temperatures and keep the lowest cost.
    starts = [x0]
    if "free_cooling_below_c" in fit:
        j = fit.index("free_cooling_below_c")
        for q in (0.25, 0.5, 0.75):
            s = x0.copy()
            s[j] = float(np.clip(np.quantile(t, q), lo["free_cooling_below_c"],
                                 hi["free_cooling_below_c"]))
            starts.append(s)
    for s in starts:
        res = least_squares(lambda x: model(x) - obs, s,
                            bounds=([lo[f] for f in fit], [hi[f] for f in fit]),
                            x_scale=np.array([scale[f] for f in fit]), method="trf")
        if best is None or res.cost < best.cost:
            best = res
    assert best is not None
    if not best.success:
        raise ForecastError(f"calibrate_pue_model: least_squares did not converge: "
                            f"{best.message}")
    return replace(initial, **{f: float(v) for f, v in zip(fit, best.x, strict=True)})


class PueForecaster(Forecaster):
    """Hourly PUE forecast from a day-ahead weather forecast in ``X``.

    ``mean = pue_from_weather(X.temperature_c, X.relative_humidity_pct, pue_model)``.
    Intervals combine (i) the weather forecast error, as a normal error of standard deviation
    ``temperature_error_c`` on the temperature pushed through the (monotone) model, and
    (ii) the empirical 2.5/10/90/97.5 % quantiles of the in-sample residuals of measured PUE
    (``y`` given to :meth:`fit`) minus the model; quantiles are added, which is conservative.

    Parameters
    ----------
    pue_model
        Model parameters (the site's ``Site.pue``). Default :class:`PueModel()`.
    calibrate
        Fit the parameters to ``y`` with :func:`calibrate_pue_model` during :meth:`fit`
        (for sites with PUE telemetry). Default False.
    temperature_error_c
        Standard deviation of the day-ahead temperature forecast error. [°C] Default 1.5,
        the order of the day-1 2 m temperature RMSE of global NWP models (ECMWF Technical
        Memoranda, "Evaluation of ECMWF forecasts", annual series).
    """

    name = "pue-weather"
    requires_exog = True

    def __init__(self, pue_model: PueModel | None = None, calibrate: bool = False,
                 temperature_error_c: float = 1.5) -> None:
        if temperature_error_c < 0:
            raise InputError(f"PueForecaster: temperature_error_c must be >= 0 °C, "
                             f"got {temperature_error_c}")
        pue_model = pue_model or PueModel()
        check_pue_model(pue_model)
        super().__init__(pue_model=pue_model, calibrate=calibrate,
                         temperature_error_c=temperature_error_c)
        self.pue_model = pue_model
        self.calibrate = bool(calibrate)
        self.temperature_error_c = float(temperature_error_c)
        self.fitted_model_: PueModel | None = None
        self._q: dict[str, float] = {}

    @classmethod
    def get_test_params(cls) -> list[dict[str, Any]]:
        """Return the default model and a calibrating one."""
        return [{}, {"calibrate": True, "temperature_error_c": 1.0}]

    @staticmethod
    def _weather(X: pd.DataFrame | None, stage: str) -> pd.DataFrame:
        if X is None:
            raise ForecastError(f"PueForecaster: weather X is required ({stage})")
        missing = [c for c in WEATHER_COLUMNS if c not in X]
        if missing:
            raise InputError(f"PueForecaster ({stage}): X lacks {missing} (has "
                             f"{list(X.columns)}); pass the weather forecast with "
                             "temperature_c [°C] and relative_humidity_pct [%]")
        return X[list(WEATHER_COLUMNS)].interpolate(limit=6, limit_area="inside")

    def _fit(self, y: pd.Series, X: pd.DataFrame | None) -> None:
        w = self._weather(X, "fit")
        model = self.pue_model
        if self.calibrate:
            model = calibrate_pue_model(w, y, model)
        self.fitted_model_ = model
        resid = y - pue_from_weather(w["temperature_c"], w["relative_humidity_pct"], model)
        self._q = empirical_quantiles(resid)

    def _predict(self, history: pd.Series, horizon: pd.DatetimeIndex,
                 X: pd.DataFrame | None) -> pd.DataFrame:
        assert self.fitted_model_ is not None
        w = self._weather(X, "predict")
        t, rh = w["temperature_c"], w["relative_humidity_pct"]
        out = pd.DataFrame({"mean": pue_from_weather(t, rh, self.fitted_model_)})
        for col, p in INTERVAL_PROBS.items():
            dt = float(norm.ppf(p)) * self.temperature_error_c
            out[col] = pue_from_weather(t + dt, rh, self.fitted_model_) + self._q[col]
        return out.clip(lower=1.0)
