"""DACF feature groups (wind_trajectory, operator_change): hand-computed values, what is read."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from test_dacf_models import BOTH, FEATURE_EXOG, ISSUE, synthetic  # tests/forecasts is on sys.path

from carbonsched.errors import ForecastError
from carbonsched.forecasts.backtest import CANDIDATES, EXTRA_FEATURES
from carbonsched.forecasts.dacf_models import (
    FEATURE_GROUPS,
    HourlyOLS,
    LightGBMDayAhead,
    day_ahead_design,
    feature_columns,
)

T = pd.Timestamp("2021-01-09 00:00", tz="UTC")
W = "gfs_wind_speed_m_per_s"
TK = "gfs_temperature_k"
SW = "gfs_dswrf_w_per_m2"
OPS = ("op_wind_mw", "lag24_share_wind", "lag24_total_mw")


def tiny() -> tuple[pd.Series, pd.DataFrame]:
    """Nine days of hours; the forecast day ``T .. T + 23 h`` and the day before it are set.

    Wind 2 m/s before ``T``; 3 m/s at leads 0..11, 1 m/s at leads 12..23; 9 m/s after the day.
    Temperature 270 K the day before, 280 K on the day. Irradiance 50 W/m2 for 10 hours the
    day before, 100 W/m2 for 10 hours on the day. Operator wind 300 MW; total 1000 MW 24 h
    earlier; wind share 24 h earlier 0.2 at leads 0..11, 0.1 at leads 12..23.
    """
    idx = pd.date_range("2021-01-01", periods=24 * 10, freq="h", tz="UTC")
    y = pd.Series(300.0, index=idx)
    pos = ((idx - T) // pd.Timedelta(hours=1)).to_numpy()
    on_day = (pos >= 0) & (pos < 24)
    X = pd.DataFrame(index=idx)
    X[W] = np.where(pos < 0, 2.0, np.where(pos < 12, 3.0, np.where(pos < 24, 1.0, 9.0)))
    X[TK] = np.where(on_day, 280.0, 270.0)
    X[SW] = np.where(on_day & (pos < 10), 100.0, np.where((pos >= -24) & (pos < -14), 50.0, 0.0))
    X["op_wind_mw"] = 300.0
    X["lag24_total_mw"] = 1000.0
    X["lag24_share_wind"] = np.where(on_day & (pos >= 12), 0.1, 0.2)
    return y[y.index < T], X


def _row(f: pd.DataFrame, lead: int) -> pd.Series:
    return f.iloc[lead]


def test_wind_trajectory_hand_computed():
    y, X = tiny()
    f, _ = day_ahead_design(y, X, pd.DatetimeIndex([T]), (W, TK, SW), ("wind_trajectory",))
    r0, r11, r22, r23 = (_row(f, k) for k in (0, 11, 22, 23))
    # lead 0: t-1 h and t-2 h are the forecasts for the hours before the issue (2 m/s)
    assert r0[f"{W}_prev1"] == 2 and r0[f"{W}_prev2"] == 2
    assert r0[f"{W}_next1"] == 3 and r0[f"{W}_next2"] == 3
    assert r0[f"{W}_mean3"] == pytest.approx(8 / 3)
    assert r11[f"{W}_next1"] == 1 and r11[f"{W}_next2"] == 1
    # t+1/t+2 stay within the day: NaN past lead 23, the 9 m/s after the day is never read
    assert r22[f"{W}_next1"] == 1 and np.isnan(r22[f"{W}_next2"])
    assert np.isnan(r23[f"{W}_next1"]) and np.isnan(r23[f"{W}_next2"])
    assert r23[f"{W}_mean3"] == pytest.approx(1.0)      # mean of t-1 and t only
    # day aggregates, the same at every lead
    for c, v in ((f"{W}_day_max", 3.0), (f"{W}_day_min", 1.0), (f"{W}_day_std", 1.0),
                 (f"{W}_cubed_day_mean", (12 * 27 + 12 * 1) / 24),          # 14
                 (f"dday_{W}_cubed_day_mean", 14.0 - 8.0),
                 (f"{TK}_day_mean", 280.0), (f"dday_{TK}_day_mean", 10.0),
                 (f"{SW}_day_sum", 1000.0), (f"dday_{SW}_day_sum", 500.0)):
        np.testing.assert_allclose(f[c], v, err_msg=c)
    assert sorted(c for c in f.columns if c not in day_ahead_design(
        y, X, pd.DatetimeIndex([T]), (W, TK, SW))[0].columns) == sorted(
        feature_columns("wind_trajectory", (W, TK, SW)))


def test_operator_change_hand_computed():
    y, X = tiny()
    f, _ = day_ahead_design(y, X, pd.DatetimeIndex([T]), OPS, ("operator_change",))
    # (op - share24 * tot24) / tot24: (300 - 200) / 1000 and (300 - 100) / 1000
    np.testing.assert_allclose(f["op_wind_change_share"].iloc[:12], 0.1)
    np.testing.assert_allclose(f["op_wind_change_share"].iloc[12:], 0.2)
    np.testing.assert_allclose(f["op_wind_change_share_day"], 150.0 / 1000.0)
    assert "op_solar_change_share" not in f  # no operator solar forecast: no solar column


def test_a_region_without_the_columns_gets_nothing():
    y, X = tiny()
    plain, _ = day_ahead_design(y, X, pd.DatetimeIndex([T]), (W, TK))
    # no operator columns (e.g. ERCO, PJM, ISNE): operator_change adds no column
    f, _ = day_ahead_design(y, X, pd.DatetimeIndex([T]), (W, TK), ("operator_change",))
    pd.testing.assert_frame_equal(f, plain)
    # no GFS columns (DE): wind_trajectory adds none either
    f2, _ = day_ahead_design(y, X, pd.DatetimeIndex([T]), OPS, ("wind_trajectory",))
    pd.testing.assert_frame_equal(f2, day_ahead_design(y, X, pd.DatetimeIndex([T]), OPS)[0])
    assert feature_columns("operator_change", (W, TK)) == []


def test_feature_groups_read_nothing_after_the_forecast_day():
    """X after T + 23 h and y at or after T cannot reach the design of the issue at T."""
    y, X = tiny()
    ex = (W, TK, SW, *OPS)
    f, _ = day_ahead_design(y, X, pd.DatetimeIndex([T]), ex, BOTH)
    Xp = X.copy()
    Xp[Xp.index >= T + pd.Timedelta(hours=24)] = 1e6
    yp = pd.concat([y, pd.Series(1e6, index=X.index[X.index >= T])])
    fp, _ = day_ahead_design(yp, Xp, pd.DatetimeIndex([T]), ex, BOTH)
    pd.testing.assert_frame_equal(f.drop(columns="issue"), fp.drop(columns="issue"))
    # ... while the forecast for T - 1 h (published before the issue) is read at lead 0
    Xb = X.copy()
    Xb.loc[T - pd.Timedelta(hours=1), W] = 5.0
    fb, _ = day_ahead_design(y, Xb, pd.DatetimeIndex([T]), ex, BOTH)
    assert fb[f"{W}_prev1"].iloc[0] == 5.0 and fb[f"{W}_prev2"].iloc[1] == 5.0


@pytest.mark.parametrize("bad", [("wind",), ("wind_trajectory", "nope"), "wind_trajectory"])
def test_unknown_or_malformed_feature_groups_refused(bad):
    y, X = tiny()
    with pytest.raises(ForecastError, match="unknown feature group|sequence of group names"):
        day_ahead_design(y, X, pd.DatetimeIndex([T]), (W,), bad)
    for cls in (HourlyOLS, LightGBMDayAhead):
        with pytest.raises(ForecastError, match="unknown feature group|sequence of group names"):
            cls(exog=(W,), features=bad)
    assert set(FEATURE_GROUPS) == {"wind_trajectory", "operator_change"}


@pytest.mark.parametrize("cls", [HourlyOLS, LightGBMDayAhead])
def test_the_forecast_reads_the_feature_groups(cls):
    """With wind_trajectory a change of the wind forecast at one hour reaches the other hours
    of the day (the day aggregates); without it only that hour moves. Fails if the groups
    were accepted but not computed or not used."""
    y, X = synthetic()
    kw = {"n_estimators": 60} if cls is LightGBMDayAhead else {}
    out = {}
    for name, feats in (("plain", ()), ("traj", ("wind_trajectory",))):
        m = cls(exog=(W,), calib_days=14, features=feats, **kw)
        m.fit(y[y.index < ISSUE], X[X.index < ISSUE])
        day = ISSUE + pd.Timedelta(days=1)
        base = m.predict(day, 24, y=y, X=X)["mean"]
        X2 = X.copy()
        X2.loc[day + pd.Timedelta(hours=7), W] += 8.0
        out[name] = ~np.isclose(m.predict(day, 24, y=y, X=X2)["mean"], base)
        assert m.params["features"] == m.features == feats
    assert out["plain"].sum() <= 1                   # lead 7 only (OLS), or nothing (trees)
    assert out["traj"].sum() >= 3                    # t-1/t+1 neighbours and the day terms


def test_operator_change_reaches_the_ols_regressors():
    m = HourlyOLS(exog=FEATURE_EXOG, target="ratio", scale_free=True, features=BOTH)
    y, X = synthetic()
    f, _ = day_ahead_design(y[y.index < ISSUE], X, pd.DatetimeIndex([ISSUE]), FEATURE_EXOG, BOTH)
    plain = HourlyOLS(exog=FEATURE_EXOG, target="ratio", scale_free=True)
    extra = m._design(f).shape[1] - plain._design(f).shape[1]
    lin = feature_columns("wind_trajectory", FEATURE_EXOG, linear=True) + feature_columns(
        "operator_change", FEATURE_EXOG, linear=True)
    assert extra == len(lin) == 5 + 2 + 2 + 2
    assert not any("next" in c for c in lin)         # no column NaN by construction


def test_backtest_x_candidates_read_both_groups_and_the_others_none():
    for name, (_cls, kw, src) in CANDIDATES.items():
        if name.endswith("_x"):
            assert kw["features"] == EXTRA_FEATURES == BOTH and src
        else:
            assert "features" not in kw
