"""The green-surplus proxy and its forecasters against hand-computed values."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from carbonsched.errors import InputError
from carbonsched.forecasts.green_surplus import (
    GreenSurplusForecaster,
    SurplusSeasonalNaive,
    green_surplus_index,
    price_score,
    renewable_score,
)
from carbonsched.forecasts.testing import synthetic_index

IDX = pd.date_range("2023-06-01T00:00Z", periods=6, freq="h")


def test_price_score_by_hand() -> None:
    p = pd.Series([-5.0, 0.0, 5.0, 10.0, 20.0, np.nan], index=IDX)
    np.testing.assert_allclose(price_score(p, 10.0), [1, 1, 0.5, 0, 0, np.nan])
    np.testing.assert_allclose(price_score(p, 20.0), [1, 1, 0.75, 0.5, 0, np.nan])


def test_price_score_refuses_non_positive_threshold() -> None:
    with pytest.raises(InputError, match=r"near_zero_price_usd_per_mwh must be > 0 USD/MWh, "
                                         r"got 0.0; pass for example 10.0"):
        price_score(pd.Series([1.0]), 0.0)


def test_renewable_score_by_hand() -> None:
    ref = pd.Series(np.arange(1.0, 101.0))  # F(x) = x / 100 on 1..100
    x = pd.Series([50.0, 90.0, 92.5, 95.0, 100.0, np.nan], index=IDX)
    # (F - 0.9) / 0.1: 50 -> 0, 90 -> 0, 92.5 -> F=0.92 -> 0.2, 95 -> 0.5, 100 -> 1
    np.testing.assert_allclose(renewable_score(x, 0.9, ref), [0, 0, 0.2, 0.5, 1, np.nan],
                               atol=1e-12)


def test_renewable_score_errors() -> None:
    with pytest.raises(InputError, match=r"renewable_quantile must be in \(0, 1\), got 1.0"):
        renewable_score(pd.Series([1.0]), 1.0)
    with pytest.raises(InputError, match="the reference renewable_pct has no value"):
        renewable_score(pd.Series([np.nan]))


def test_index_is_the_max_of_the_two_scores_and_nan_only_where_both_are() -> None:
    frame = pd.DataFrame({
        "price_usd_per_mwh": [-1.0, 5.0, 50.0, np.nan, 50.0, np.nan],
        "renewable_pct": [10.0, 96.0, 99.0, 95.0, np.nan, np.nan],
    }, index=IDX)
    ref = pd.Series(np.arange(1.0, 101.0))
    idx = green_surplus_index(frame, reference=ref)
    # price: 1, 0.5, 0, NaN, 0, NaN; renewable: 0, 0.6, 0.9, 0.5, NaN, NaN
    np.testing.assert_allclose(idx, [1.0, 0.6, 0.9, 0.5, 0.0, np.nan], atol=1e-12)
    assert idx.name == "green_surplus_index"


def test_price_only_and_renewable_only_frames() -> None:
    p = pd.DataFrame({"price_usd_per_mwh": [-3.0, 2.5]}, index=IDX[:2])
    np.testing.assert_allclose(green_surplus_index(p), [1.0, 0.75])
    r = pd.DataFrame({"renewable_pct": np.arange(1.0, 101.0)},
                     index=pd.date_range("2023-01-01T00:00Z", periods=100, freq="h"))
    got = green_surplus_index(r)
    assert got.iloc[:90].eq(0).all() and got.iloc[-1] == 1.0
    assert got.iloc[94] == pytest.approx(0.5)


def test_modelled_index_is_used_as_it_stands() -> None:
    frame = pd.DataFrame({"green_surplus_index": [0.2, 1.3, -0.1],
                          "price_usd_per_mwh": [-100.0, -100.0, -100.0]}, index=IDX[:3])
    np.testing.assert_allclose(green_surplus_index(frame), [0.2, 1.0, 0.0])


def test_frame_without_any_input_is_refused() -> None:
    frame = pd.DataFrame({"carbon_intensity_g_per_kwh": [300.0]}, index=IDX[:1])
    with pytest.raises(InputError, match=r"no values in any of 'green_surplus_index', "
                                         r"'price_usd_per_mwh', 'renewable_pct' \(columns: "
                                         r"\['carbon_intensity_g_per_kwh'\]\)"):
        green_surplus_index(frame)


def test_forecasts_stay_in_unit_interval() -> None:
    y, _ = synthetic_index(2)
    issue = pd.Timestamp("2023-05-01T00:00Z")
    for f in (GreenSurplusForecaster(), SurplusSeasonalNaive()):
        out = f.fit(y[y.index < issue]).predict(issue, 48, y=y)
        assert (out.to_numpy() >= 0).all() and (out.to_numpy() <= 1).all()
        assert (out["lo_95"] <= out["mean"]).all() and (out["mean"] <= out["hi_95"]).all()


def test_forecaster_learns_a_recurring_midday_surplus() -> None:
    # index 1 from 10:00 to 13:59 every day, 0 otherwise -> forecast it exactly.
    idx = pd.date_range("2023-04-01T00:00Z", periods=24 * 40, freq="h")
    y = pd.Series(((idx.hour >= 10) & (idx.hour < 14)).astype(float), index=idx)
    out = GreenSurplusForecaster().fit(y).predict(idx[-1] + pd.Timedelta(hours=1), 24)
    expected = ((out.index.hour >= 10) & (out.index.hour < 14)).astype(float)
    np.testing.assert_allclose(out["mean"], expected, atol=1e-6)
    out_b = SurplusSeasonalNaive().fit(y).predict(idx[-1] + pd.Timedelta(hours=1), 24)
    np.testing.assert_allclose(out_b["mean"], expected)
