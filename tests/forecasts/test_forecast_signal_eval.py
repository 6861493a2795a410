"""signal_eval: scores by hand on tiny frames, then one real zone and week."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from carbonsched.errors import InputError
from carbonsched.forecasts.baselines import SeasonalNaive
from carbonsched.forecasts.signal_eval import (
    available_zones,
    backtest_day_ahead,
    evaluate_ci,
    evaluate_pue,
    evaluate_surplus,
    point_scores,
    surplus_scores,
    zone_frame,
)


def frame(mean, actual, lo80=None, hi80=None) -> pd.DataFrame:
    mean, actual = np.asarray(mean, float), np.asarray(actual, float)
    lo80 = mean - 1 if lo80 is None else np.asarray(lo80, float)
    hi80 = mean + 1 if hi80 is None else np.asarray(hi80, float)
    return pd.DataFrame({"mean": mean, "actual": actual, "lo_80": lo80, "hi_80": hi80,
                         "lo_95": lo80 - 1, "hi_95": hi80 + 1})


def test_point_scores_by_hand() -> None:
    s = point_scores(frame([110, 90, 50, 7], [100, 100, 0, np.nan]))
    # MAPE over actual != 0: (10/100 + 10/100) / 2 = 10 %; MAE over 3 hours: (10+10+50)/3
    assert s["mape_pct"] == pytest.approx(10.0)
    assert s["mae"] == pytest.approx(70 / 3)
    assert s["coverage_80"] == 0.0 and s["n_hours"] == 3


def test_surplus_scores_by_hand() -> None:
    p = [0.9, 0.6, 0.2, 0.1]
    a = [1.0, 0.3, 0.7, 0.0]  # events (>= 0.5): 1, 0, 1, 0
    s = surplus_scores(frame(p, a), 0.5)
    assert s["brier"] == pytest.approx((0.01 + 0.36 + 0.64 + 0.01) / 4)
    assert s["mse_index"] == pytest.approx((0.01 + 0.09 + 0.25 + 0.01) / 4)
    assert s["precision"] == 0.5 and s["recall"] == 0.5  # TP 1, FP 1, FN 1
    assert s["surplus_share"] == 0.5
    none = surplus_scores(frame([0.1], [0.2]), 0.5)
    assert np.isnan(none["precision"]) and np.isnan(none["recall"])


def test_backtest_issues_at_midnight_and_uses_only_the_past() -> None:
    idx = pd.date_range("2023-01-01T00:00Z", periods=24 * 70, freq="h")
    y = pd.Series(np.arange(len(idx), dtype=float), index=idx)
    bt, fit_s = backtest_day_ahead(y, lambda: SeasonalNaive(24), weeks=[8], train_days=14)
    assert len(fit_s) == 1 and len(bt) == 7 * 24
    assert (bt["issued_at"].dt.hour == 0).all()
    assert bt["issued_at"].iloc[0] == pd.Timestamp("2023-02-26T00:00Z")
    # seasonal naive on a ramp: every forecast is exactly 24 h behind
    np.testing.assert_allclose(bt["actual"] - bt["mean"], 24.0)


def test_missing_data_dir_and_zone(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="carbon_intensity not found; pass the shared data"):
        available_zones(tmp_path)


@pytest.mark.shared_data
def test_zone_frame_columns(shared_data: Path) -> None:
    f = zone_frame(shared_data, "DE-LU")
    assert len(f) == 8760 and str(f.index.tz) == "UTC"
    for col in ("carbon_intensity_g_per_kwh", "renewable_pct", "price_usd_per_mwh",
                "temperature_c", "relative_humidity_pct"):
        assert col in f and f[col].notna().mean() > 0.99
    # DE-LU 2023: 292 negative day-ahead price hours (README: a usable surplus proxy)
    assert int((f["price_usd_per_mwh"] < 0).sum()) == 292
    with pytest.raises(InputError, match="XX_2023_hourly.csv not found; zones available: "):
        zone_frame(shared_data, "XX")


@pytest.mark.shared_data
def test_one_zone_one_week(shared_data: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ci = evaluate_ci(shared_data, ["DE-LU"], weeks=[20])
        sur = evaluate_surplus(shared_data, ["DE-LU"], weeks=[20])
    assert set(ci["model"]) == {"seasonal-naive-24h", "seasonal-naive-168h", "climatology-7d",
                                "ci-lead-ols"}
    assert (ci["n_hours"] == 168).all() and ci["mape_pct"].between(1, 60).all()
    assert set(sur["model"]) == {"surplus-seasonal-naive-24h", "green-surplus-lead-ols"}
    assert sur["brier"].between(0, 1).all()


@pytest.mark.shared_data
def test_pue_over_real_weather(shared_data: Path) -> None:
    p = evaluate_pue(shared_data, ["SG", "DE-LU"]).set_index("zone")
    # Singapore never drops to the 18 °C free-cooling limit; Frankfurt mostly does.
    assert p.loc["SG", "free_cooling_hours"] == 0
    assert p.loc["SG", "pue_min"] > 1.15
    assert p.loc["DE-LU", "free_cooling_hours"] > 0.7 * p.loc["DE-LU", "weather_hours"]
    assert p.loc["DE-LU", "pue_min"] == pytest.approx(1.15)
    # Open-Meteo labels are local time (UTC+8, UTC+1): the last 8 / 1 UTC hours of 2023
    # fall after the file's last local hour.
    assert p.loc["SG", "weather_hours"] == 8760 - 8
    assert p.loc["DE-LU", "weather_hours"] == 8760 - 1
    assert p.loc["SG", "param_free_cooling_below_c"] == 18.0
