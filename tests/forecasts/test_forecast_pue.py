"""PUE model: hand-computed values, calibration recovers known parameters, forecaster."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

from carbonsched.domain import PueModel
from carbonsched.errors import ForecastError, InputError
from carbonsched.forecasts.base import fit_with_fallback
from carbonsched.forecasts.pue import (
    PueForecaster,
    calibrate_pue_model,
    free_cooling_hours,
    pue_from_weather,
)

IDX = pd.date_range("2023-07-01T00:00Z", periods=5, freq="h")


def test_pue_by_hand_with_default_parameters() -> None:
    t = pd.Series([10.0, 18.0, 28.0, 80.0, np.nan], index=IDX)
    rh = pd.Series([90.0, 90.0, 70.0, 100.0, 50.0], index=IDX)
    got = pue_from_weather(t, rh, PueModel())
    # 10 °C: free cooling, no humidity penalty -> 1.15; 18 °C: at the limit -> 1.15;
    # 28 °C, 70 %: 1.15 + 0.012*10 + 0.0008*20 = 1.286; 80 °C: capped at 1.8; NaN -> NaN
    np.testing.assert_allclose(got, [1.15, 1.15, 1.286, 1.8, np.nan])
    assert got.name == "pue" and got.index.equals(IDX)


def test_pue_accepts_arrays() -> None:
    got = pue_from_weather(np.array([20.0]), np.array([40.0]), PueModel())
    # 1.15 + 0.012 * 2, humidity below the reference
    np.testing.assert_allclose(got, [1.174])


def test_invalid_inputs_are_refused_with_the_fix() -> None:
    with pytest.raises(InputError, match=r"relative_humidity_pct = 120.0 at "
                                         r"2023-07-01T01:00:00\+00:00 is outside 0-100 %"):
        pue_from_weather(pd.Series([20.0, 20.0], index=IDX[:2]),
                         pd.Series([50.0, 120.0], index=IDX[:2]), PueModel())
    # a series on a plain integer index (a frame reset by the caller) is named by its label
    with pytest.raises(InputError, match=r"relative_humidity_pct = -0.5 at index 7 is outside"):
        pue_from_weather(pd.Series([20.0, 20.0], index=[6, 7]),
                         pd.Series([0.0, -0.5], index=[6, 7]), PueModel())
    with pytest.raises(InputError, match=r"pue_min = 0.9 < 1 \(PUE is at least 1\).*"
                                         r"fix the site's \[pue\] table"):
        pue_from_weather(np.array([1.0]), np.array([1.0]), PueModel(pue_min=0.9))
    with pytest.raises(InputError, match=r"temperature_c has shape \(2,\) but "
                                         r"relative_humidity_pct has \(1,\)"):
        pue_from_weather(np.array([1.0, 2.0]), np.array([1.0]), PueModel())


def test_free_cooling_hours() -> None:
    t = pd.Series([5.0, 18.0, 18.5, np.nan, 30.0], index=IDX)
    assert free_cooling_hours(t, PueModel()) == 2
    assert free_cooling_hours(t, PueModel(free_cooling_below_c=25.0)) == 3


def synthetic_telemetry(true: PueModel, n: int = 3000, noise: float = 0.005, seed: int = 1):
    rng = np.random.default_rng(seed)
    idx = pd.date_range("2023-01-01T00:00Z", periods=n, freq="h")
    w = pd.DataFrame({"temperature_c": rng.uniform(-5, 35, n),
                      "relative_humidity_pct": rng.uniform(20, 95, n)}, index=idx)
    pue = pue_from_weather(w["temperature_c"], w["relative_humidity_pct"], true)
    return w, pue + rng.normal(0, noise, n)


def test_calibration_recovers_known_parameters() -> None:
    true = PueModel(pue_min=1.10, free_cooling_below_c=15.0, mechanical_slope_per_c=0.02,
                    humidity_slope=0.0015, humidity_ref_pct=50.0, pue_max=2.0)
    w, measured = synthetic_telemetry(true)
    got = calibrate_pue_model(w, measured, PueModel(pue_max=2.0))
    assert got.pue_min == pytest.approx(1.10, abs=0.003)
    assert got.free_cooling_below_c == pytest.approx(15.0, abs=0.3)
    assert got.mechanical_slope_per_c == pytest.approx(0.02, abs=0.0005)
    assert got.humidity_slope == pytest.approx(0.0015, abs=0.0001)
    assert got.humidity_ref_pct == 50.0 and got.pue_max == 2.0  # held fixed


def test_calibration_errors() -> None:
    w, measured = synthetic_telemetry(PueModel(), n=30)
    with pytest.raises(InputError, match=r"weather lacks \['relative_humidity_pct'\]"):
        calibrate_pue_model(w[["temperature_c"]], measured)
    with pytest.raises(InputError, match=r"cannot fit \['pue_max'\]"):
        calibrate_pue_model(w, measured, fit=("pue_max",))
    with pytest.raises(InputError, match=r"only 20 hour\(s\) have both weather and measured "
                                         r"PUE; need at least 24"):
        calibrate_pue_model(w, measured.iloc[:20])


def test_forecaster_mean_and_weather_error_intervals_by_hand() -> None:
    w, _ = synthetic_telemetry(PueModel(), n=200, noise=0.0)
    exact = pue_from_weather(w["temperature_c"], w["relative_humidity_pct"], PueModel())
    f = PueForecaster(temperature_error_c=1.5).fit(exact, w)  # zero residuals
    issue = pd.Timestamp("2023-01-09T00:00Z")
    X = pd.DataFrame({"temperature_c": [28.0, 10.0], "relative_humidity_pct": [70.0, 70.0]},
                     index=pd.date_range(issue, periods=2, freq="h"))
    out = f.predict(issue, 2, X=X)
    z = norm.ppf(0.975) * 1.5
    np.testing.assert_allclose(out["mean"], [1.286, 1.15])
    np.testing.assert_allclose(out["hi_95"].iloc[0], 1.15 + 0.012 * (10 + z) + 0.016)
    np.testing.assert_allclose(out["lo_95"].iloc[0], 1.15 + 0.012 * (10 - z) + 0.016)
    # 10 °C: free cooling, 10 + 2.94 °C is still below 18 °C -> no spread
    np.testing.assert_allclose(out.iloc[1].to_numpy(), 1.15)


def test_forecaster_calibrates_on_telemetry() -> None:
    true = PueModel(pue_min=1.2, free_cooling_below_c=12.0, mechanical_slope_per_c=0.015)
    w, measured = synthetic_telemetry(true, n=1500)
    f = PueForecaster(calibrate=True).fit(measured, w)
    assert f.fitted_model_ is not None
    assert f.fitted_model_.free_cooling_below_c == pytest.approx(12.0, abs=0.5)
    assert f.fitted_model_.pue_min == pytest.approx(1.2, abs=0.005)


def test_forecaster_needs_weather_columns() -> None:
    w, measured = synthetic_telemetry(PueModel(), n=100)
    with pytest.raises(ForecastError, match=r"X lacks \['relative_humidity_pct'\]"):
        PueForecaster().fit(measured, w[["temperature_c"]])
    with pytest.raises(ForecastError, match=r"exogenous inputs X are required \(fit\)"):
        PueForecaster().fit(measured)
    with pytest.raises(InputError, match="temperature_error_c must be >= 0 °C, got -1"):
        PueForecaster(temperature_error_c=-1)


def test_fallback_to_the_default_model_when_calibration_fails() -> None:
    w, measured = synthetic_telemetry(PueModel(), n=100)
    w.iloc[20:] = np.nan  # weather known for 20 of the 100 telemetry hours
    model, note = fit_with_fallback(PueForecaster(calibrate=True), PueForecaster(), measured, w)
    assert isinstance(model, PueForecaster) and not model.calibrate
    assert note is not None and "only 20 hour(s) have both weather and measured PUE" in note
    assert model.fitted_model_ == PueModel()
