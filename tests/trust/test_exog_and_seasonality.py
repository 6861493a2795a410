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
