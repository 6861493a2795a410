"""The time-lagged ensemble of a rolling run's carbon-intensity forecast."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from carbonsched.errors import ForecastError
from carbonsched.forecasts.lagged import lagged_issue_times, lagged_mean
from tests.conftest import poison_future

T = pd.Timestamp("2023-07-13 06:00", tz="UTC")
H = pd.Timedelta(hours=1)


@pytest.mark.parametrize(("every", "offsets"), [
    (None, [0]), (24, [0]), (12, [0, 12]), (8, [0, 8, 16]), (6, [0, 6, 12, 18]),
    (4, [0, 6, 12, 18]), (1, [0, 6, 12, 18]),
])
def test_members_span_the_day_before_the_run(every, offsets):
    got = lagged_issue_times(T, every)
    assert list(got) == [T - k * H for k in offsets]


@pytest.mark.parametrize("every", [0, 25, -6, 1.5, "6"])
def test_a_cadence_outside_1_to_24_whole_hours_is_refused(every):
    with pytest.raises(ForecastError, match="run_every_hours must be a whole number"):
        lagged_issue_times(T, every)


def _frame(start, values, lo=0.9, hi=1.1):
    idx = pd.date_range(start, periods=len(values), freq="h")
    v = np.asarray(values, float)
    return pd.DataFrame({"mean": v, "lo_80": v * lo, "hi_80": v * hi, "lo_95": v * (lo - 0.1),
                         "hi_95": v * (hi + 0.1)}, index=idx)


def test_each_hour_is_the_mean_of_the_members_that_reach_it():
    slots = pd.date_range(T, periods=4, freq="h")
    newest = _frame(T, [100, 200, 300, 0])
    newest.attrs["model"] = "m0"
    # issued 2 h earlier, 4 h horizon: reaches the first two slots only
    older = _frame(T - 2 * H, [7, 7, 50, 100])
    out = lagged_mean([newest, older], slots)
    assert out["mean"].tolist() == [75.0, 150.0, 300.0, 0.0]
    assert out.attrs["lagged_members"].tolist() == [2, 2, 1, 1]
    assert out.attrs["model"] == "m0"
    # relative intervals kept around the new mean: 80 % bounds at 0.9 and 1.1 of it
    assert out["lo_80"].tolist()[:3] == pytest.approx([67.5, 135.0, 270.0])
    assert out["hi_95"].tolist()[:3] == pytest.approx([90.0, 180.0, 360.0])
    # a zero newest mean (just at the limit of a ratio): its own bounds, not a division by 0
    assert out["lo_80"].iloc[3] == 0.0 and out["hi_80"].iloc[3] == 0.0


def test_one_member_is_the_member_itself():
    slots = pd.date_range(T, periods=3, freq="h")
    newest = _frame(T, [120, 80, 95])
    out = lagged_mean([newest], slots)
    pd.testing.assert_frame_equal(out, newest)


def test_no_member_or_a_newest_short_of_the_horizon_is_refused():
    slots = pd.date_range(T, periods=3, freq="h")
    with pytest.raises(ForecastError, match="no member"):
        lagged_mean([], slots)
    with pytest.raises(ForecastError, match="does not cover the run's 3 hours"):
        lagged_mean([_frame(T, [1.0, 2.0])], slots)


@pytest.fixture(scope="module")
def frankfurt(shared_data):
    from carbonsched.adapters.signals import load_site_signals
    from carbonsched.catalog import load_catalog
    from carbonsched.pipeline.daily import FORECAST_HISTORY_DAYS

    site = load_catalog("global").site("de-frankfurt")
    frame, meta = load_site_signals(site, shared_data,
                                    T - pd.Timedelta(days=FORECAST_HISTORY_DAYS + 1),
                                    T + pd.Timedelta(days=4))
    return site, frame, meta


def test_a_6_hourly_run_averages_the_four_issues_of_the_day_before_it(frankfurt):
    from carbonsched.pipeline.daily import forecast_site

    site, frame, meta = frankfurt
    cache: dict = {}
    fc = forecast_site(site, frame, T, 72, meta, models=cache, run_every_hours=6)
    lag = fc.models["carbon_intensity_g_per_kwh"]["lagged_ensemble"]
    assert lag["issued_at"] == [(T - k * H).isoformat() for k in (0, 6, 12, 18)]
    assert lag["members_per_hour"] == {"min": 1, "max": 4}
    # recount: each member forecast on its own, at its own issue time, from the same frame
    members = [forecast_site(site, frame, T - k * H, 72, meta, models=cache)
               for k in (0, 6, 12, 18)]
    assert lag["models"] == [m.models["carbon_intensity_g_per_kwh"]["model"] for m in members]
    ci = pd.concat([m.signals["carbon_intensity_g_per_kwh"] for m in members], axis=1,
                   sort=True)
    expected = ci.reindex(fc.signals.index).mean(axis=1)
    np.testing.assert_allclose(fc.signals["carbon_intensity_g_per_kwh"].to_numpy(),
                               expected.to_numpy(), rtol=1e-12)
    # the last 18 hours are past the oldest member's horizon: fewer members, still a mean
    reach = ci.reindex(fc.signals.index).notna().sum(axis=1)
    assert reach.iloc[0] == 4 and reach.iloc[-1] == 1
    # the members disagree (else the ensemble would be a no-op and the recount could not fail)
    assert (ci.reindex(fc.signals.index).iloc[:54].std(axis=1) > 1.0).mean() > 0.5
    # the stored forecast is the one the plan used
    stored = fc.long[fc.long["signal"] == "carbon_intensity_g_per_kwh"]
    np.testing.assert_allclose(stored["mean"].to_numpy(),
                               fc.signals["carbon_intensity_g_per_kwh"].to_numpy(), rtol=1e-12)
    assert stored["model"].iloc[0].startswith("lagged ensemble of 4 issues")
    # the other signals are the newest issue's, unchanged
    pd.testing.assert_series_equal(fc.signals["pue"], members[0].signals["pue"])


def test_a_daily_cadence_is_the_issue_alone(frankfurt):
    from carbonsched.pipeline.daily import forecast_site

    site, frame, meta = frankfurt
    cache: dict = {}
    daily = forecast_site(site, frame, T, 48, meta, models=cache, run_every_hours=24)
    alone = forecast_site(site, frame, T, 48, meta, models=cache)
    pd.testing.assert_frame_equal(daily.signals, alone.signals)
    assert "lagged_ensemble" not in daily.models["carbon_intensity_g_per_kwh"]


def test_a_poisoned_future_changes_no_member(frankfurt):
    from carbonsched.pipeline.daily import forecast_site

    site, frame, meta = frankfurt
    poisoned = poison_future(frame, T)
    clean = forecast_site(site, frame, T, 72, meta, models={}, run_every_hours=6)
    dirty = forecast_site(site, poisoned, T, 72, meta, models={}, run_every_hours=6)
    pd.testing.assert_frame_equal(clean.signals, dirty.signals)
    pd.testing.assert_frame_equal(clean.long, dirty.long)
    assert clean.models == dirty.models
