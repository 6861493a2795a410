"""The registry and the per-site model choice: honest, never worse than naive, calibrated."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from carbonsched.errors import ForecastError, TimeAxisError
from carbonsched.forecasts.baselines import Climatology, SeasonalNaive
from carbonsched.forecasts.carbon_intensity import LeadRegression
from carbonsched.forecasts.green_surplus import GreenSurplusForecaster
from carbonsched.forecasts.registry import (
    DEFAULT_SCHEDULE,
    LEAD_BUCKETS,
    ModelSchedule,
    SelectedForecaster,
    _point_forecasts,
    bucket_of,
    combination_members,
    conformal_bounds,
    registry,
)
from carbonsched.forecasts.testing import synthetic_index, synthetic_level

T0 = pd.Timestamp("2023-01-02", tz="UTC")


def _level(days: int = 70, seed: int = 0) -> pd.Series:
    y, _ = synthetic_level(seed, 24 * days)
    return y.set_axis(pd.date_range(T0, periods=len(y), freq="h"))


def test_schedule_periods_start_on_monday_at_or_before_the_issue() -> None:
    s = ModelSchedule()
    assert s.period_start(pd.Timestamp("2023-07-15 13:00", tz="UTC")) == pd.Timestamp(
        "2023-07-10", tz="UTC")
    monday = pd.Timestamp("2023-07-17", tz="UTC")
    assert s.period_start(monday) == monday
    assert ModelSchedule(refit_days=1).period_start(monday + pd.Timedelta(hours=5)) == monday
    assert DEFAULT_SCHEDULE.load_days == 372
    with pytest.raises(TimeAxisError, match="naive"):
        s.period_start(pd.Timestamp("2023-07-15"))


def test_registry_has_seasonal_naive_first_and_refuses_unknown_signals() -> None:
    for signal in ("carbon_intensity_g_per_kwh", "green_surplus_index", "pue"):
        assert registry(signal)[0].name == "seasonal-naive-24h"
    names = [c.name for c in registry("carbon_intensity_g_per_kwh")]
    assert {"ci-lead-ols", "ols_hourly", "ols_hourly_ratio", "lgbm", "climatology-28d",
            "seasonal-naive-168h"} <= set(names)
    with pytest.raises(ForecastError, match="no forecaster registry for signal 'co2'"):
        registry("co2")
    with pytest.raises(ForecastError, match="unknown signal 'co2'"):
        SelectedForecaster("co2")
    with pytest.raises(ForecastError, match="horizon_hours must be in 1..168, got 169"):
        SelectedForecaster(horizon_hours=169)


def test_too_short_a_history_says_how_much_is_needed() -> None:
    with pytest.raises(ForecastError, match="10 days of history; a model choice needs at least "
                                            r"17 \(14 to fit, 3 to validate\)"):
        SelectedForecaster().fit(_level(10))


def test_empty_rows_before_the_data_start_shrink_the_validation_window() -> None:
    # a data set starting 23 days before the fit end, loaded with a year of empty rows before
    # it (a new zone): validated on the 9 days after the 14 it needs to fit
    y = _level(23)
    padded = y.reindex(pd.date_range(y.index[0] - pd.Timedelta(days=300), y.index[-1],
                                     freq="h"))
    d = SelectedForecaster(candidates=("ci-lead-ols",)).fit(padded).describe()
    assert d["validation_issues"] == 9


@pytest.mark.parametrize("make,tz", [
    (lambda tz: SeasonalNaive(24, tz=tz), "Europe/Berlin"),
    (lambda tz: SeasonalNaive(168, tz=tz), "America/New_York"),
    (lambda tz: Climatology(28), None),
    (lambda tz: LeadRegression(tz=tz), "Europe/Berlin"),
    (lambda tz: LeadRegression(tz=tz), None),
])
def test_batch_validation_forecasts_equal_predict_issue_by_issue(make, tz) -> None:
    # across the spring DST change in Europe (2023-03-26) and the US (2023-03-12)
    y = _level(100)
    issues = pd.date_range("2023-03-05", "2023-04-05", freq="D", tz="UTC")
    m = make(tz).fit(y[y.index < issues[0]])
    got = _point_forecasts(m, y, issues, 48)
    want = np.array([m.predict(t, 48, y=y[y.index < t])["mean"].to_numpy() for t in issues])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-8)


def test_batch_validation_forecasts_of_the_surplus_model_equal_predict() -> None:
    y, _ = synthetic_index(1, 24 * 70)
    issues = pd.date_range(y.index[0] + pd.Timedelta(days=40), periods=20, freq="D")
    m = GreenSurplusForecaster().fit(y[y.index < issues[0]])
    got = _point_forecasts(m, y, issues, 24)
    want = np.array([m.predict(t, 24, y=y[y.index < t])["mean"].to_numpy() for t in issues])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)


def test_conformal_bounds_use_the_finite_sample_level_per_bucket() -> None:
    # 99 residuals 1..99 at lead 0..5: the upper 90 % bound is the ceil(100 x 0.9)/99-quantile
    r = np.arange(1.0, 100.0)
    b = conformal_bounds(r, np.zeros(99, int))
    assert b[0, 2] == pytest.approx(np.quantile(r, 90 / 99))
    assert b[0, 1] == pytest.approx(np.quantile(r, 1 - 90 / 99))
    # a later bucket with narrower residuals keeps its own width (issue 35 item 4: forced as
    # wide as the first half day's, it over-covered); a bucket without residuals takes the
    # previous bucket's
    leads = np.r_[np.zeros(99, int), np.full(99, 30)]
    b = conformal_bounds(np.r_[r - 50, (r - 50) / 10], leads)
    k = bucket_of(np.array([30]))[0]
    assert LEAD_BUCKETS[k] == (24, 48)
    assert b[k, 3] == pytest.approx(b[0, 3] / 10) and b[k, 0] == pytest.approx(b[0, 0] / 10)
    np.testing.assert_array_equal(b[k + 1], b[k])
    # per-bucket levels: a bucket at alpha_80 = 0.4 gets the 80 % quantile as its upper bound
    alphas = np.tile([0.2, 0.05], (len(LEAD_BUCKETS), 1))
    alphas[0] = [0.4, 0.05]
    b = conformal_bounds(r, np.zeros(99, int), alphas)
    assert b[0, 2] == pytest.approx(np.quantile(r, 80 / 99))
    with pytest.raises(ForecastError, match=r"shape \(2,\) or"):
        conformal_bounds(r, np.zeros(99, int), np.ones(3))
    # within the first day each bucket keeps its own residuals' width
    leads = np.r_[np.zeros(99, int), np.full(99, 13)]
    b = conformal_bounds(np.r_[r - 50, (r - 50) / 10], leads)
    assert b[1, 3] == pytest.approx(b[0, 3] / 10)
    with pytest.raises(ForecastError, match="no finite validation residuals"):
        conformal_bounds(np.array([np.nan]), np.array([0]))


def test_the_choice_uses_no_data_at_or_after_the_fit_end() -> None:
    y = _level(70)
    end = y.index[24 * 63]
    a = SelectedForecaster(candidates=("ci-lead-ols", "ols_hourly")).fit(y[y.index < end])
    poisoned = y.copy()
    poisoned[poisoned.index >= end] = 1e6
    b = SelectedForecaster(candidates=("ci-lead-ols", "ols_hourly"))
    b.fit(poisoned[poisoned.index < end])
    assert a.describe() == b.describe()
    pd.testing.assert_frame_equal(a.predict(end, 24, y=y), b.predict(end, 24, y=poisoned))


def test_a_flat_series_is_not_forecast_worse_than_naive() -> None:
    # a gas-dominated grid: 450 g/kWh plus independent noise, no daily cycle
    rng = np.random.default_rng(3)
    idx = pd.date_range(T0, periods=24 * 84, freq="h")
    y = pd.Series(450.0 + rng.normal(0.0, 5.0, len(idx)), index=idx)
    fit_end = idx[24 * 70]
    sel = SelectedForecaster(tz="Europe/Berlin").fit(y[y.index < fit_end])
    d = sel.describe()
    assert d["validation_error"] <= d["naive_validation_error"]
    naive = SeasonalNaive(24, tz="Europe/Berlin").fit(y[y.index < fit_end])
    issues = pd.date_range(fit_end, periods=14, freq="D")
    act = np.array([y.reindex(pd.date_range(t, periods=24, freq="h")).to_numpy()
                    for t in issues])

    def mape(m):
        p = np.array([m.predict(t, 24, y=y)["mean"].to_numpy() for t in issues])
        return float(np.mean(np.abs(p - act) / act))

    assert mape(sel) <= mape(naive)
    # an exactly constant series: every candidate is exact and naive wins the tie
    flat = pd.Series(300.0, index=idx[: 24 * 40])
    s2 = SelectedForecaster().fit(flat)
    assert s2.describe()["model"] == "seasonal-naive-24h"
    out = s2.predict(flat.index[-1] + pd.Timedelta(hours=1), 24)
    assert (out.to_numpy() == 300.0).all()


@pytest.mark.parametrize("signal", ["carbon_intensity_g_per_kwh", "green_surplus_index"])
def test_intervals_are_monotone_contain_the_point_and_widen_to_168_h(signal) -> None:
    y = _level(90) if signal.startswith("carbon") else synthetic_index(2, 24 * 90)[0]
    y = y.set_axis(pd.date_range(T0, periods=len(y), freq="h"))
    issue = y.index[24 * 80]
    sel = SelectedForecaster(signal, horizon_hours=168).fit(y[y.index < issue])
    out = sel.predict(issue, 168, y=y)
    d = sel.describe()
    if signal == "green_surplus_index" and d["model"] != "seasonal-naive-24h":
        # the index's choice must beat naive on validation by the 5 % margin
        assert d["validation_error"] < 0.95 * d["naive_validation_error"]
    v = out[["lo_95", "lo_80", "mean", "hi_80", "hi_95"]].to_numpy()
    assert (np.diff(v, axis=1) >= -1e-12).all()
    if signal.startswith("carbon"):  # relative intervals: width / level never shrinks
        rel = ((out["hi_95"] - out["lo_95"]) / out["mean"]).to_numpy()
        # one width per lead bucket, its own residuals' (issue 35 item 4: no forced widening)
        for a, e in LEAD_BUCKETS:
            assert np.ptp(rel[a:e]) < 1e-9
        assert out.attrs["model"] == sel.describe()["model"]


def test_a_day_ahead_choice_is_extended_to_a_week_by_a_longer_model() -> None:
    y = _level(90)
    issue = y.index[24 * 80]
    sel = SelectedForecaster(candidates=("ols_hourly",)).fit(y[y.index < issue])
    d = sel.describe()
    if d["model"] in ("ols_hourly", "ens(ols_hourly+seasonal-naive-24h)",
                      "ens(seasonal-naive-24h+ols_hourly)"):
        assert d["extended_by"] == "seasonal-naive-24h"
    out = sel.predict(issue, 72, y=y)
    assert out.notna().all().all() and len(out) == 72


COMBO = "ens(ridge_hourly+ols_hourly_ratio)"


def test_carbon_intensity_is_the_equal_weight_combination_lead_by_lead() -> None:
    # each member refitted here on the same history: leads 0-23 are the mean of the two;
    # beyond 24 h the day-ahead member's leads come from the extension model (the best long
    # model by validation error), so both members count at every lead
    from carbonsched.forecasts.dacf_models import HourlyOLS
    from carbonsched.forecasts.ridge import HourlyRidge

    y = _level(200)
    issue = y.index[24 * 190]
    hist = y[y.index < issue]
    sel = SelectedForecaster(horizon_hours=72, tz="Europe/Berlin").fit(hist)
    d = sel.describe()
    assert d["model"] == COMBO and d["combination"] is True and d["extended_by"] == "ridge_hourly"
    # chosen because it beats naive's error over every lead, whatever the others score
    assert d["validation_error"] < d["naive_validation_error"]
    assert set(d["features"]) == {"ols_hourly_ratio", "ridge_hourly"}
    ridge = HourlyRidge().fit(hist).predict(issue, 72, y=y)["mean"].to_numpy()
    member = HourlyOLS(calib_days=0, target="ratio", scale_free=True).fit(hist)
    ratio = _point_forecasts(member, y, pd.DatetimeIndex([issue]), 24)[0]
    out = sel.predict(issue, 72, y=y)["mean"].to_numpy()
    np.testing.assert_allclose(out[:24], (ridge[:24] + ratio) / 2, rtol=1e-9)
    np.testing.assert_allclose(out[24:], ridge[24:], rtol=1e-9)
    # combine=False: the combination is not offered
    plain = SelectedForecaster(horizon_hours=72, tz="Europe/Berlin", combine=False).fit(hist)
    assert plain.describe()["model"] != COMBO and plain.describe()["combination"] is False
    assert COMBO not in plain.describe()["candidates"]


def test_a_combination_that_fails_against_naive_gives_way_to_the_best_qualifying_model() -> None:
    # 90 days: the per-hour OLS on the ratio (annual harmonics on 62 days) is far off on
    # validation, so the combination holding it is worse than naive; the choice is then the
    # best model that beats naive (main fell back to naive here when the members' check left
    # fewer than two), never naive while another model beat it
    y = _level(100)
    d = SelectedForecaster(horizon_hours=72).fit(y[y.index < y.index[24 * 90]]).describe()
    naive = d["candidates"]["seasonal-naive-24h"]
    assert d["candidates"]["ols_hourly_ratio"] > 1.5 * naive
    assert d["candidates"][COMBO] > naive and d["combination"] is False
    ok = [k for k, e in d["candidates"].items() if e < naive]
    assert ok and d["model"] in ok
    assert d["validation_score"][d["model"]] == min(d["validation_score"][k] for k in ok)


def test_the_combination_needs_two_members() -> None:
    y = _level(70)
    # only one member of the pair among the candidates: no combination, the criterion applies
    one = SelectedForecaster(candidates=("ci-lead-ols", "ols_hourly_ratio")).fit(y)
    assert "ols_hourly_ratio" in one.describe()["candidates"]
    assert one.describe()["combination"] is False
    assert not any(k.count("+") == 0 and k.startswith("ens(")
                   for k in one.describe()["candidates"])
    two = SelectedForecaster(candidates=("ols_hourly_ratio", "ridge_hourly")).fit(_level(100))
    assert COMBO in two.describe()["candidates"]
    # an exactly repeating day: naive is exact (validation MAPE 0), nothing beats it, so naive
    # stays (the tie goes to naive too; on 60 days the ridge is not fitted: no combination)
    idx = pd.date_range(T0, periods=24 * 60, freq="h")
    daily = pd.Series(300.0 + 50.0 * np.sin(2 * np.pi * idx.hour / 24), index=idx)
    s = SelectedForecaster().fit(daily)
    assert s.describe()["model"] == "seasonal-naive-24h"
    assert s.describe()["combination"] is False
    assert s.describe()["naive_validation_error"] == pytest.approx(0.0, abs=1e-9)


def test_the_combinations_members_prefer_the_exogenous_ridge_where_fitted() -> None:
    ci = "carbon_intensity_g_per_kwh"
    both = ("seasonal-naive-24h", "ridge_hourly", "ridge_hourly_exog", "ols_hourly_ratio")
    assert combination_members(ci, both) == ("ridge_hourly_exog", "ols_hourly_ratio")
    assert combination_members(ci, both[:2] + both[3:]) == ("ridge_hourly", "ols_hourly_ratio")
    # the exogenous ridge alone is the ridge member too; a member with no fitted alternative
    # is left out (one member: choose forms no combination)
    assert combination_members(ci, ("ridge_hourly_exog", "ols_hourly_ratio")) == (
        "ridge_hourly_exog", "ols_hourly_ratio")
    assert combination_members(ci, ("seasonal-naive-24h", "ols_hourly_ratio")) == (
        "ols_hourly_ratio",)
    assert combination_members("pue", both) == ()
    # the settings' order and preference, whatever the order of the fitted names
    assert combination_members(ci, ("ols_hourly_ratio", "ridge_hourly", "ridge_hourly_exog")) == (
        "ridge_hourly_exog", "ols_hourly_ratio")
    with pytest.raises(ForecastError, match="unknown signal 'co2'"):
        combination_members("co2", both)


def test_the_index_is_chosen_on_the_hours_off_its_bounds() -> None:
    # an index at 0 on most hours (no surplus) and 1 on some: the validation error is naive's
    # MAE on the hours strictly between 0 and 1 only (where a forecast can be wrong), not
    # diluted by the hours every model gets right
    from carbonsched.forecasts.green_surplus import SurplusSeasonalNaive

    y, _ = synthetic_index(2, 24 * 60)
    y = y.where(y > 0.3, 0.0).where(y < 0.8, 1.0)
    sel = SelectedForecaster("green_surplus_index", validation_days=14).fit(y)
    d = sel.describe()
    end = y.index[-1] + pd.Timedelta(hours=1)
    issues = pd.date_range(end.floor("D") - pd.Timedelta(days=14), periods=14, freq="D")
    naive = _point_forecasts(SurplusSeasonalNaive(24).fit(y[y.index < issues[0]]), y, issues,
                             24).ravel()
    ts = issues.repeat(24) + pd.to_timedelta(np.tile(np.arange(24), 14), unit="h")
    act = y.reindex(ts).to_numpy()
    off = (act > 1e-9) & (act < 1 - 1e-9)
    assert 0 < off.sum() < 0.8 * off.size
    assert d["naive_validation_error"] == pytest.approx(np.abs(naive[off] - act[off]).mean(),
                                                         rel=1e-6)
    assert d["naive_validation_error"] > np.abs(naive - act).mean()
    assert "off the output bounds" in d["criterion"]


def test_an_ensemble_name_gives_back_its_members():
    from carbonsched.forecasts.registry import ensemble_members, ensemble_name

    name = ensemble_name(("ridge_hourly", "ols_hourly_ratio"))
    assert name == "ens(ridge_hourly+ols_hourly_ratio)"
    assert ensemble_members("ens(ridge_hourly+ols_hourly_ratio)") == ("ridge_hourly",
                                                                      "ols_hourly_ratio")
    assert ensemble_members("seasonal-naive-24h") == ("seasonal-naive-24h",)
    assert ensemble_members("ens(") == ("ens(",)   # not an ensemble's name: itself
