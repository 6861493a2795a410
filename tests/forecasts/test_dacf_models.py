"""DACF day-ahead models: issue-time rule, exogenous alignment, time axis, features, intervals."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from carbonsched.errors import ForecastError, TimeAxisError
from carbonsched.forecasts.base import COLUMNS
from carbonsched.forecasts.dacf_models import (
    DacfSeasonalNaive,
    DayAheadEnsemble,
    HourlyOLS,
    LightGBMDayAhead,
    day_ahead_design,
    lagged_source_shares,
)

DAYS = 70
ISSUE = pd.Timestamp("2021-03-01 00:00", tz="UTC")


def synthetic(days: int = DAYS, seed: int = 0,
              ahead: int = 5) -> tuple[pd.Series, pd.DataFrame]:
    """CI that falls with a known 'wind forecast' plus a daily profile and noise.

    ``days`` of hourly data, the last ``ahead`` of them from :data:`ISSUE` on.
    """
    rng = np.random.default_rng(seed)
    idx = pd.date_range(ISSUE - pd.Timedelta(days=days - ahead), periods=days * 24, freq="h",
                        tz="UTC", name="ts")
    h = idx.hour.to_numpy()
    wind = 5 + 3 * np.sin(np.arange(len(idx)) / 17.0) + rng.normal(0, 0.5, len(idx))
    y = 400 + 60 * np.sin(2 * np.pi * h / 24) - 15 * wind + rng.normal(0, 5, len(idx))
    X = pd.DataFrame({"gfs_wind_speed_m_per_s": wind}, index=idx)
    # inputs of the optional feature groups (wind_trajectory, operator_change)
    X["gfs_temperature_k"] = 280 + 5 * np.sin(2 * np.pi * (h - 6) / 24)
    X["gfs_dswrf_w_per_m2"] = np.clip(600 * np.sin(2 * np.pi * (h - 6) / 24), 0, None)
    X["op_wind_mw"] = 200 * wind + rng.normal(0, 50, len(idx))
    X["lag24_share_wind"] = np.roll(wind, 24) / 20
    X["lag24_total_mw"] = 20000 + rng.normal(0, 500, len(idx))
    return pd.Series(y, index=idx, name="ci"), X


FEATURE_EXOG = ("gfs_wind_speed_m_per_s", "gfs_temperature_k", "gfs_dswrf_w_per_m2",
                "op_wind_mw", "lag24_share_wind", "lag24_total_mw")
BOTH = ("wind_trajectory", "operator_change")


def fitted(cls, **kw):
    y, X = synthetic()
    kw = dict(kw)  # the parametrised dicts are shared between tests
    exog = kw.pop("exog", ("gfs_wind_speed_m_per_s",))
    m = cls(exog=exog, calib_days=14, window_days=14, aci_gamma=0.05, **kw)
    m.fit(y[y.index < ISSUE], X[X.index < ISSUE])
    return m, y, X


MODELS = [(HourlyOLS, {}), (HourlyOLS, {"target": "ratio"}),
          (HourlyOLS, {"target": "ratio", "scale_free": True}),
          (LightGBMDayAhead, {"n_estimators": 30}),
          (LightGBMDayAhead, {"n_estimators": 30, "target": "ratio", "scale_free": True}),
          # the feature groups: the no-look-ahead, contract and backcast tests cover them too
          (HourlyOLS, {"target": "ratio", "scale_free": True, "ridge": 0.05,
                       "exog": FEATURE_EXOG, "features": BOTH}),
          (LightGBMDayAhead, {"n_estimators": 30, "target": "ratio", "scale_free": True,
                              "exog": FEATURE_EXOG, "features": BOTH}),
          (LightGBMDayAhead, {"n_estimators": 30, "exog": FEATURE_EXOG, "features": BOTH})]


@pytest.mark.parametrize(("cls", "kw"), MODELS)
def test_future_spike_cannot_reach_the_forecast(cls, kw):
    m, y, X = fitted(cls, **kw)
    day = ISSUE + pd.Timedelta(days=2)
    base = m.predict(day, 24, y=y, X=X)
    spiked = y.copy()
    spiked[spiked.index >= day] = 1e6  # the future, including the issue hour itself
    Xs = X.copy()
    Xs[Xs.index >= day + pd.Timedelta(hours=24)] = 1e3  # exog after the horizon
    again = m.predict(day, 24, y=spiked, X=Xs)
    pd.testing.assert_frame_equal(base, again)
    # ... while the past does matter: the same spike one hour earlier changes the forecast
    spiked.loc[day - pd.Timedelta(hours=1)] = 1e6
    assert not np.allclose(m.predict(day, 24, y=spiked, X=Xs)["mean"], base["mean"])


def test_exog_inside_horizon_is_read_at_its_own_hour():
    m, y, X = fitted(HourlyOLS)
    day = ISSUE + pd.Timedelta(days=1)
    base = m.predict(day, 24, y=y, X=X)
    X2 = X.copy()
    t = day + pd.Timedelta(hours=7)
    X2.loc[t, "gfs_wind_speed_m_per_s"] += 5.0
    out = m.predict(day, 24, y=y, X=X2)
    changed = ~np.isclose(out["mean"], base["mean"])
    assert list(out.index[changed]) == [t]  # lead 7 only (its dx feature tomorrow is past h 23)
    assert out.loc[t, "mean"] < base.loc[t, "mean"]  # more wind, lower CI


def test_exog_not_covering_horizon_is_caught():
    m, y, X = fitted(HourlyOLS)
    day = ISSUE + pd.Timedelta(days=1)
    short = X[X.index < day + pd.Timedelta(hours=23)]
    with pytest.raises(TimeAxisError, match=r"does not cover the horizon: 1 hour\(s\) missing, "
                                            r"first 2021-03-02T23:00:00\+00:00"):
        m.predict(day, 24, y=y, X=short)


def test_exog_shifted_by_one_hour_is_caught():
    """A weather file read one hour late no longer covers the fitted hours."""
    y, X = synthetic()
    late = X.copy()
    late.index = late.index + pd.Timedelta(hours=1)
    m = HourlyOLS(exog=("gfs_wind_speed_m_per_s",), calib_days=14)
    with pytest.raises(TimeAxisError, match=r"exogenous X \(fit\) does not cover.*first "
                                            r"2020-12-26T00:00:00\+00:00"):
        m.fit(y[y.index < ISSUE], late[late.index < ISSUE + pd.Timedelta(hours=1)])
    # and a half-hour shift is refused outright
    half = X.copy()
    half.index = half.index + pd.Timedelta(minutes=30)
    with pytest.raises(TimeAxisError, match="not on the hour"):
        m.fit(y[y.index < ISSUE], half)


def test_missing_exog_column_and_long_horizon():
    m, y, X = fitted(HourlyOLS)
    with pytest.raises(ForecastError, match="at most 24 h"):
        m.predict(ISSUE, 48, y=y, X=X)
    bad = HourlyOLS(exog=("nope",), calib_days=14)
    with pytest.raises(ForecastError, match=r"column\(s\) \['nope'\] not in X"):
        bad.fit(y[y.index < ISSUE], X[X.index < ISSUE])


def test_duplicated_hour_refused_gap_tolerated():
    m, y, X = fitted(HourlyOLS)
    dup = pd.concat([y.iloc[:100], y.iloc[99:100], y.iloc[100:]])
    with pytest.raises(TimeAxisError, match=r"1 duplicated timestamp\(s\), first"):
        m.predict(ISSUE, 24, y=dup, X=X)
    gappy = y.drop(y.index[(y.index >= ISSUE - pd.Timedelta(hours=5)) & (y.index < ISSUE)])
    out = m.predict(ISSUE, 24, y=gappy, X=X)
    assert np.isfinite(out.to_numpy()).all()  # features fill the gap from 24 h earlier
    naive = y.copy()
    naive.index = naive.index.tz_localize(None)
    with pytest.raises(TimeAxisError, match="naive"):
        m.predict(ISSUE, 24, y=naive, X=X)


def test_design_features_hand_checked():
    idx = pd.date_range("2021-01-01", periods=24 * 9, freq="h", tz="UTC")
    y = pd.Series(np.arange(len(idx), dtype=float), index=idx)
    X = pd.DataFrame({"gfs_wind_speed_m_per_s": np.arange(len(idx), dtype=float) / 10},
                     index=idx)
    T = pd.Timestamp("2021-01-09 00:00", tz="UTC")  # position 192
    f, target = day_ahead_design(y[y.index < T], X, pd.DatetimeIndex([T]),
                                 ("gfs_wind_speed_m_per_s",))
    r = f.iloc[5]  # t = T + 5 h, position 197
    assert r["lag_1"] == 191 and r["lag_24"] == 168 and r["mean24"] == pytest.approx(179.5)
    assert r["d1"] == 197 - 24 and r["d2"] == 197 - 48 and r["d7"] == 197 - 168
    assert r["gfs_wind_speed_m_per_s"] == pytest.approx(19.7)
    assert r["dx_gfs_wind_speed_m_per_s"] == pytest.approx(2.4)
    assert r["gfs_wind_speed_m_per_s_cubed"] == pytest.approx(19.7 ** 3)
    assert r["lead"] == 5 and r["hour"] == 5 and r["dow"] == T.day_of_week
    assert np.isnan(target).all()  # history was cut at T: targets unknown


@pytest.mark.parametrize(("cls", "kw"), MODELS)
def test_output_contract_and_interval_order(cls, kw):
    m, y, X = fitted(cls, **kw)
    out = m.predict(ISSUE + pd.Timedelta(days=1), 24, y=y, X=X)
    assert list(out.columns) == list(COLUMNS) and len(out) == 24
    assert str(out.index.tz) == "UTC"
    v = out[["lo_95", "lo_80", "mean", "hi_80", "hi_95"]].to_numpy()
    assert (np.diff(v, axis=1) >= 0).all()
    assert (out["hi_80"] > out["lo_80"]).all()


def test_model_learns_exog_effect():
    """OLS recovers the planted -15 g/kWh per m/s within a few percent of the level."""
    m, y, X = fitted(HourlyOLS)
    errs = []
    for k in range(3):
        day = ISSUE + pd.Timedelta(days=k)
        out = m.predict(day, 24, y=y, X=X)
        errs.append(np.abs(out["mean"] - y.reindex(out.index)) / y.reindex(out.index))
    assert float(np.mean(errs)) < 0.03


def test_ensemble_mean_is_member_average():
    y, X = synthetic()
    a = HourlyOLS(exog=("gfs_wind_speed_m_per_s",), calib_days=14)
    b = LightGBMDayAhead(exog=("gfs_wind_speed_m_per_s",), n_estimators=30, calib_days=14)
    e = DayAheadEnsemble([HourlyOLS(exog=("gfs_wind_speed_m_per_s",), calib_days=14),
                          LightGBMDayAhead(exog=("gfs_wind_speed_m_per_s",), n_estimators=30,
                                           calib_days=14)], calib_days=14)
    for m in (a, b, e):
        m.fit(y[y.index < ISSUE], X[X.index < ISSUE])
    ma = a.predict(ISSUE, 24, y=y, X=X)["mean"]
    mb = b.predict(ISSUE, 24, y=y, X=X)["mean"]
    me = e.predict(ISSUE, 24, y=y, X=X)["mean"]
    np.testing.assert_allclose(me, (ma + mb) / 2, rtol=1e-10)


def test_weighted_ensemble_mean_and_its_weights_checked():
    y, X = synthetic()
    ex = ("gfs_wind_speed_m_per_s",)
    a = HourlyOLS(exog=ex, calib_days=14)
    b = HourlyOLS(exog=ex, target="ratio", calib_days=14)
    for m in (a, b):
        m.fit(y[y.index < ISSUE], X[X.index < ISSUE])
    e = DayAheadEnsemble([a, b], weights=[0.25, 0.75], calib_days=14)
    e.fit(y[y.index < ISSUE], X[X.index < ISSUE])
    ma = a.predict(ISSUE, 24, y=y, X=X)["mean"]
    mb = b.predict(ISSUE, 24, y=y, X=X)["mean"]
    np.testing.assert_allclose(e.predict(ISSUE, 24, y=y, X=X)["mean"], 0.25 * ma + 0.75 * mb,
                               rtol=1e-10)
    # a sum off by 1e-7 is accepted, by 1e-5 refused; wrong length, negative, NaN refused
    DayAheadEnsemble([a, b], weights=[0.5, 0.5 + 1e-7])
    DayAheadEnsemble([a, b], weights=[0.0, 1.0])          # a weight of exactly 0 is one
    for bad, msg in (([0.5, 0.5 + 1e-5], "sum to 1"), ([1.0], r"shape \(1,\) for 2 member"),
                     ([1.5, -0.5], "at least 0"), ([np.nan, 1.0], "finite")):
        with pytest.raises(ForecastError, match=msg):
            DayAheadEnsemble([a, b], weights=bad)


def test_conformal_intervals_cover_about_80_percent():
    y, X = synthetic(days=150, seed=3)
    issue0 = ISSUE - pd.Timedelta(days=40)
    m = HourlyOLS(exog=("gfs_wind_speed_m_per_s",), calib_days=30, window_days=30,
                  aci_gamma=0.05)
    m.fit(y[y.index < issue0], X[X.index < issue0])
    inside = []
    for k in range(40):
        out = m.predict(issue0 + pd.Timedelta(days=k), 24, y=y, X=X)
        a = y.reindex(out.index)
        inside.append(((out["lo_80"] <= a) & (a <= out["hi_80"])).mean())
    assert 0.70 <= float(np.mean(inside)) <= 0.90


def test_aci_widens_after_misses():
    m, y, X = fitted(HourlyOLS)
    miss = pd.DataFrame({"issue": ISSUE, "lead": np.arange(24), "rel": 10.0})
    past = [(ISSUE + pd.Timedelta(days=k), k, miss.assign(issue=ISSUE + pd.Timedelta(days=k)))
            for k in range(3)]
    one = m._aci_alphas(past[:1])
    # every hour missed: alpha <- alpha + 0.05 * (target - 1), 95 % clipped at 0.005
    assert one[0] == pytest.approx(0.2 - 0.05 * 0.8)
    assert one[1] == pytest.approx(0.005)
    three = m._aci_alphas(past)
    assert three[0] < one[0]  # still missing (the window now holds some misses): wider again


@pytest.mark.parametrize("cls", [HourlyOLS, LightGBMDayAhead, DacfSeasonalNaive,
                                 DayAheadEnsemble])
def test_get_test_params_fit_and_predict(cls):
    y, _ = synthetic()
    for params in cls.get_test_params():
        m = cls(**params)
        m.fit(y[y.index < ISSUE])
        out = m.predict(ISSUE, 24, y=y)
        assert np.isfinite(out.to_numpy()).all()


def test_seasonal_naive_conformal_is_yesterday():
    y, _ = synthetic()
    m = DacfSeasonalNaive(calib_days=14).fit(y[y.index < ISSUE])
    out = m.predict(ISSUE, 24, y=y)
    np.testing.assert_allclose(out["mean"], y.reindex(out.index - pd.Timedelta(hours=24)))


@pytest.mark.parametrize(("cls", "kw"), MODELS)
def test_backcast_equals_day_by_day_predict(cls, kw):
    m, y, X = fitted(cls, **kw)
    issues = pd.date_range(ISSUE, periods=3, freq="D")
    bc = m.backcast(y, X, issues)
    for k, day in enumerate(issues):
        out = m.predict(day, 24, y=y, X=X)
        np.testing.assert_allclose(bc["mean"].iloc[24 * k: 24 * (k + 1)], out["mean"],
                                   rtol=1e-10)
    np.testing.assert_allclose(bc["actual"], y.reindex(pd.DatetimeIndex(bc["ts"])))


def test_lagged_source_shares_known_at_issue_time():
    idx = pd.date_range("2021-01-01", periods=72, freq="h", tz="UTC")
    mix = pd.DataFrame({"wind": 100.0, "nat_gas": 300.0}, index=idx)
    lag = lagged_source_shares(mix)
    t = pd.Timestamp("2021-01-02 05:00", tz="UTC")
    assert lag.loc[t, "lag24_share_wind"] == pytest.approx(0.25)
    assert lag.loc[t, "lag24_total_mw"] == pytest.approx(400.0)
    assert lag.index[-1] == idx[-1] + pd.Timedelta(hours=24)
    assert lag.iloc[:24].isna().all().all()
    # a spike at or after an issue time reaches only hours >= issue + 24 h, past the horizon
    T = pd.Timestamp("2021-01-02 00:00", tz="UTC")
    spiked = mix.copy()
    spiked.loc[spiked.index >= T, "wind"] = 1e6
    lag2 = lagged_source_shares(spiked)
    before = lag.index < T + pd.Timedelta(hours=24)
    pd.testing.assert_frame_equal(lag[before], lag2[before])


def test_ensemble_reuses_fitted_members(monkeypatch):
    y, X = synthetic()
    a = HourlyOLS(exog=("gfs_wind_speed_m_per_s",), calib_days=14)
    b = HourlyOLS(exog=("gfs_wind_speed_m_per_s",), target="ratio", calib_days=14)
    for m in (a, b):
        m.fit(y[y.index < ISSUE], X[X.index < ISSUE])
    calls = []
    orig = HourlyOLS._train_uncached
    monkeypatch.setattr(HourlyOLS, "_train_uncached",
                        lambda self, *args: calls.append(self) or orig(self, *args))
    e = DayAheadEnsemble([a, b], calib_days=14).fit(y[y.index < ISSUE], X[X.index < ISSUE])
    assert calls == []  # calibration and full fits of both members came from their memo
    a.fit(y[y.index < ISSUE - pd.Timedelta(days=1)], X[X.index < ISSUE])
    assert len(calls) == 2  # other data: refitted (calibration + full)
    assert np.isfinite(e.predict(ISSUE, 24, y=y, X=X).to_numpy()).all()


def _refit_pair(cls=HourlyOLS, days: int = 90, **kw):
    """Two models fitted alike on ``days`` of data, one refitting weekly, one never."""
    y, X = synthetic(days=days, ahead=20)
    ex = ("gfs_wind_speed_m_per_s",)
    once = cls(exog=ex, calib_days=14, window_days=14, aci_gamma=0.05, **kw)
    weekly = cls(exog=ex, calib_days=14, window_days=14, aci_gamma=0.05, refit_days=7, **kw)
    for m in (once, weekly):
        m.fit(y[y.index < ISSUE], X[X.index < ISSUE])
    return once, weekly, y, X


def _fresh(y, X, end, cls=HourlyOLS, **kw):
    m = cls(exog=("gfs_wind_speed_m_per_s",), calib_days=14, **kw)
    return m.fit(y[y.index < end], X[X.index < end])


@pytest.mark.parametrize(("cls", "kw"), [(HourlyOLS, {}), (LightGBMDayAhead,
                                                           {"n_estimators": 30})])
def test_refit_days_refits_on_everything_before_the_issue_at_its_cadence(cls, kw):
    once, weekly, y, X = _refit_pair(cls, **kw)
    day6, day7 = ISSUE + pd.Timedelta(days=6), ISSUE + pd.Timedelta(days=7)
    # six days after the fit: still the first fit
    pd.testing.assert_frame_equal(weekly.predict(day6, 24, y=y, X=X),
                                  once.predict(day6, 24, y=y, X=X))
    # seven days after: refitted on everything before day 7, as a model fitted there
    got = weekly.predict(day7, 24, y=y, X=X)["mean"]
    want = _fresh(y, X, day7, cls, **kw).predict(day7, 24, y=y, X=X)["mean"]
    np.testing.assert_allclose(got, want, rtol=1e-9)
    assert not np.allclose(got, once.predict(day7, 24, y=y, X=X)["mean"], rtol=1e-6)
    assert [g[0] for g in weekly._generations] == [ISSUE, day7]


def test_refit_residuals_stay_out_of_sample():
    once, weekly, y, X = _refit_pair()
    day7, day9 = ISSUE + pd.Timedelta(days=7), ISSUE + pd.Timedelta(days=9)
    weekly.predict(day7, 24, y=y, X=X)  # refits
    days = pd.date_range(ISSUE, periods=9, freq="D")
    got = {t: fr for t, _fp, fr in weekly._past_residuals(y, X, days)}
    want_once = {t: fr for t, _fp, fr in once._past_residuals(y, X, days)}
    fresh = _fresh(y, X, day7)
    want_fresh = {t: fr for t, _fp, fr in fresh._past_residuals(y, X, days)}
    for t in days:  # each day by the fit in force at its issue time, never by a later one
        want = want_once[t] if t < day7 else want_fresh[t]
        np.testing.assert_allclose(got[t]["rel"], want["rel"], rtol=1e-9)
    assert not np.allclose(got[ISSUE]["rel"], want_fresh[ISSUE]["rel"], rtol=1e-6)
    out = weekly.predict(day9, 24, y=y, X=X)
    assert (out["lo_80"] < out["mean"]).all() and (out["mean"] < out["hi_80"]).all()


def test_refit_reads_nothing_at_or_after_the_issue():
    day = ISSUE + pd.Timedelta(days=7)
    once, weekly, y, X = _refit_pair()
    base = weekly.predict(day, 24, y=y, X=X)
    _, weekly2, _, _ = _refit_pair()
    spiked = y.copy()
    spiked[spiked.index >= day] = 1e6
    Xs = X.copy()
    Xs[Xs.index >= day + pd.Timedelta(hours=24)] = 1e3
    pd.testing.assert_frame_equal(base, weekly2.predict(day, 24, y=spiked, X=Xs))
    _, weekly3, _, _ = _refit_pair()
    spiked.loc[day - pd.Timedelta(days=3)] = 1e6  # inside the refit's training data
    assert not np.allclose(weekly3.predict(day, 24, y=spiked, X=Xs)["mean"], base["mean"])


def test_ensemble_refits_from_its_members_refits(monkeypatch):
    y, X = synthetic(days=90, ahead=20)
    ex = ("gfs_wind_speed_m_per_s",)
    a = HourlyOLS(exog=ex, calib_days=14, refit_days=7)
    b = HourlyOLS(exog=ex, target="ratio", calib_days=14, refit_days=7)
    for m in (a, b):
        m.fit(y[y.index < ISSUE], X[X.index < ISSUE])
    day7 = ISSUE + pd.Timedelta(days=7)
    ma = a.predict(day7, 24, y=y, X=X)["mean"]
    mb = b.predict(day7, 24, y=y, X=X)["mean"]
    calls = []
    orig = HourlyOLS._train_uncached
    monkeypatch.setattr(HourlyOLS, "_train_uncached",
                        lambda self, *args: calls.append(self) or orig(self, *args))
    e = DayAheadEnsemble([a, b], calib_days=14, refit_days=7)
    e.fit(y[y.index < ISSUE], X[X.index < ISSUE])
    me = e.predict(day7, 24, y=y, X=X)["mean"]
    assert calls == []  # the members' first fits and their refits at day 7, from their memo
    np.testing.assert_allclose(me, (ma + mb) / 2, rtol=1e-10)


@pytest.mark.parametrize("bad", [0, -7])
def test_refit_days_below_one_refused(bad):
    with pytest.raises(ForecastError, match="refit_days must be at least 1"):
        HourlyOLS(refit_days=bad)
    assert HourlyOLS(refit_days=1).refit_days == 1  # at the limit


def _regime(days: int = 120, seed: int = 3) -> pd.Series:
    """Log-AR(1) day-on-day noise on a daily profile: a level-free process, hourly [g/kWh]."""
    rng = np.random.default_rng(seed)
    idx = pd.date_range("2021-01-01", periods=days * 24, freq="h", tz="UTC", name="ts")
    e = np.zeros(len(idx))
    for i in range(1, len(idx)):
        e[i] = 0.9 * e[i - 1] + rng.normal(0, 0.05)
    h = idx.hour.to_numpy()
    return pd.Series(300 * (1 + 0.3 * np.sin(2 * np.pi * h / 24)) * np.exp(e), index=idx)


@pytest.mark.parametrize(("cls", "kw"), [(HourlyOLS, {}), (LightGBMDayAhead, {"n_estimators": 30})])
def test_scale_free_ratio_model_scales_with_the_history(cls, kw):
    """A fitted scale-free model forecasts exactly c times as much from a history c times
    higher (every column: the interval quantiles are relative); the level-regressor ratio
    model fitted on the same data does not, which is what lets it extrapolate the ratio
    when a grid's level leaves the fitted range."""
    y = _regime()
    T = y.index[0] + pd.Timedelta(days=100)
    issue = T + pd.Timedelta(days=5)
    sf = cls(target="ratio", scale_free=True, calib_days=14, **kw).fit(y[y.index < T])
    lv = cls(target="ratio", calib_days=14, **kw).fit(y[y.index < T])
    for c in (0.25, 3.0):
        base = sf.predict(issue, 24, y=y)
        scaled = sf.predict(issue, 24, y=c * y)
        np.testing.assert_allclose(scaled.to_numpy(), c * base.to_numpy(), rtol=1e-9)
        moved = lv.predict(issue, 24, y=c * y)["mean"] / (c * lv.predict(issue, 24, y=y)["mean"])
        assert np.abs(moved - 1).max() > 1e-3  # the level model's ratio moves with the level


def test_scale_free_forecast_stays_sane_after_a_level_shift():
    """Fitted at level 300, forecasting at level 900 (the history tripled from the fit's end):
    the scale-free model's MAPE is what it is at the fitted level, to 1e-9 (its features reach
    7 days back, so from the 8th day on they all come from the tripled history)."""
    y = _regime()
    T = y.index[0] + pd.Timedelta(days=100)
    m = HourlyOLS(target="ratio", scale_free=True, calib_days=14).fit(y[y.index < T])
    shifted = y.where(y.index < T, 3 * y)
    issues = [T + pd.Timedelta(days=d) for d in range(9, 19)]
    def mape(series):
        return np.mean([np.mean(np.abs(m.predict(t, 24, y=series)["mean"].to_numpy()
                                       / series.reindex(pd.date_range(t, periods=24, freq="h"))
                                       .to_numpy() - 1)) for t in issues])
    assert mape(shifted) == pytest.approx(mape(y), rel=1e-9)


@pytest.mark.parametrize("cls", [HourlyOLS, LightGBMDayAhead])
def test_scale_free_needs_the_ratio_target(cls):
    with pytest.raises(ForecastError, match="scale_free=True needs target='ratio'"):
        cls(scale_free=True)
    assert cls(scale_free=True, target="ratio").scale_free  # the one valid pairing
    assert not cls(target="ratio").scale_free


def test_scale_free_trees_see_log_ratios_to_yesterday_and_no_level():
    """The scale-free LightGBM's features: every lag as log(lag / d1), d1 left out, the other
    columns as they were and in their order; a lag at or below 0 is a missing value."""
    m = LightGBMDayAhead(target="ratio", scale_free=True)
    feats = pd.DataFrame({"lead": [0.0, 1.0], "lag_1": [200.0, 0.0], "mean24": [100.0, 50.0],
                          "d1": [100.0, 50.0], "d2": [50.0, 100.0], "d7": [100.0, 25.0],
                          "hour": [0.0, 1.0], "gfs_wind_speed_m_per_s": [3.0, 4.0]})
    out = m._inputs(feats)
    assert list(out.columns) == ["lead", "lag_1", "mean24", "d2", "d7", "hour",
                                 "gfs_wind_speed_m_per_s"]
    np.testing.assert_allclose(out["lag_1"], [np.log(2.0), np.nan])
    np.testing.assert_allclose(out["mean24"], [0.0, 0.0])
    np.testing.assert_allclose(out["d2"], [np.log(0.5), np.log(2.0)])
    np.testing.assert_allclose(out["d7"], [0.0, np.log(0.5)])
    pd.testing.assert_series_equal(out["gfs_wind_speed_m_per_s"], feats["gfs_wind_speed_m_per_s"])
    assert LightGBMDayAhead(target="ratio")._inputs(feats) is feats  # off: unchanged
