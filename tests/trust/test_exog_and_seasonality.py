"""Issue 7 items 4 and 5: exogenous inputs checked before any fill; local-clock seasonality."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from carbonsched.errors import TimeAxisError
from carbonsched.forecasts.dacf_models import HourlyOLS
from tests.forecasts.test_dacf_models import ISSUE, synthetic


def _fitted():
    y, X = synthetic()
    m = HourlyOLS(exog=("gfs_wind_speed_m_per_s",), calib_days=14, window_days=14)
    m.fit(y[y.index < ISSUE], X[X.index < ISSUE])
    return m, y, X


def test_weather_lacking_an_hour_of_the_forecast_day_is_refused():
    m, y, X = _fitted()
    hole = X.drop(ISSUE + pd.Timedelta(hours=7))
    with pytest.raises(TimeAxisError, match=r"exogenous X \(predict\) does not cover the horizon: "
                                            r"1 hour\(s\) missing, first "
                                            r"2021-03-01T07:00:00\+00:00"):
        m.predict(ISSUE, 24, y=y, X=hole)


def test_weather_with_an_empty_value_in_the_forecast_day_is_refused():
    m, y, X = _fitted()
    nan = X.copy()
    nan.loc[ISSUE + pd.Timedelta(hours=23), "gfs_wind_speed_m_per_s"] = np.nan
    with pytest.raises(TimeAxisError, match=r"first 2021-03-01T23:00:00\+00:00"):
        m.predict(ISSUE, 24, y=y, X=nan)


def test_complete_weather_in_another_time_zone_is_aligned_by_instant():
    m, y, X = _fitted()
    ref = m.predict(ISSUE, 24, y=y, X=X)
    local = X.tz_convert("Europe/Berlin")
    pd.testing.assert_frame_equal(ref, m.predict(ISSUE, 24, y=y, X=local))
    assert str(ref.index.tz) == "UTC"


# ------------------------------------------------------ item 5: local-clock seasonality
from carbonsched.forecasts.baselines import SeasonalNaive  # noqa: E402
from carbonsched.forecasts.carbon_intensity import LeadRegression  # noqa: E402

BERLIN = "Europe/Berlin"


def _clock_following(start: str, days: int, tz: str = BERLIN, peak_local_hour: int = 19):
    """CI with a sharp evening peak at ``peak_local_hour`` on the local wall clock, every day."""
    idx = pd.date_range(pd.Timestamp(start, tz="UTC"), periods=days * 24, freq="h", tz="UTC")
    local_hour = idx.tz_convert(tz).hour.to_numpy()
    ci = 300.0 + 150.0 * (local_hour == peak_local_hour) + 40 * np.cos(
        2 * np.pi * (local_hour - peak_local_hour) / 24)
    return pd.Series(ci, index=idx, name="ci")


@pytest.mark.parametrize("issue", ["2023-03-26", "2023-03-27", "2023-10-29", "2023-10-30"])
@pytest.mark.parametrize("make", [lambda tz: SeasonalNaive(tz=tz),
                                  lambda tz: LeadRegression(tz=tz, train_days=28)],
                         ids=["seasonal-naive", "lead-ols"])
def test_peak_stays_at_the_same_local_hour_across_both_dst_changes(issue, make):
    y = _clock_following("2023-02-01" if issue.startswith("2023-03") else "2023-09-01", 70)
    t0 = pd.Timestamp(issue, tz="UTC")
    m = make(BERLIN).fit(y[y.index < t0])
    fc = m.predict(t0, 24, y=y)
    assert str(fc.index.tz) == "UTC"
    peak_utc = fc["mean"].idxmax()
    assert peak_utc.tz_convert(BERLIN).hour == 19, (issue, peak_utc)
    # the value there is the peak's (450 + cos term 40 = 490), not a shoulder hour's
    assert fc["mean"].max() == pytest.approx(490.0, abs=5.0)


@pytest.mark.parametrize("issue", ["2023-03-26", "2023-10-29"])
def test_utc_lags_would_move_the_peak_by_one_local_hour(issue):
    """On the change day, UTC lags put the peak at 20:00 (spring) / 18:00 (autumn) local."""
    y = _clock_following("2023-02-01" if issue.startswith("2023-03") else "2023-09-01", 70)
    t0 = pd.Timestamp(issue, tz="UTC")
    fc = SeasonalNaive().fit(y[y.index < t0]).predict(t0, 24, y=y)
    expected = 20 if issue.startswith("2023-03") else 18
    assert fc["mean"].idxmax().tz_convert(BERLIN).hour == expected


def test_zone_without_dst_is_unchanged_by_local_clock():
    y = _clock_following("2023-02-01", 60, tz="Asia/Tokyo")
    t0 = pd.Timestamp("2023-03-27", tz="UTC")
    a = SeasonalNaive(tz="Asia/Tokyo").fit(y[y.index < t0]).predict(t0, 24, y=y)
    b = SeasonalNaive().fit(y[y.index < t0]).predict(t0, 24, y=y)
    np.testing.assert_allclose(a["mean"].to_numpy(), b["mean"].to_numpy())
