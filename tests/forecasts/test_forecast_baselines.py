"""SeasonalNaive and Climatology against hand-computed values."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from carbonsched.errors import ForecastError, NotFittedError, TimeAxisError
from carbonsched.forecasts.baselines import (
    Climatology,
    SeasonalNaive,
    empirical_quantiles,
    seasonal_lookup,
)

T0 = pd.Timestamp("2023-05-01T00:00:00Z")
PROFILE = 100.0 + 10.0 * np.arange(24)  # 100, 110, ..., 330
OFFSETS = [0.0, 10.0, -10.0, 20.0]  # day 1..4


def four_days() -> pd.Series:
    """Day d = PROFILE + OFFSETS[d]: lag-24 differences are +10, -20, +30 (24 each)."""
    vals = np.concatenate([PROFILE + o for o in OFFSETS])
    return pd.Series(vals, index=pd.date_range(T0, periods=96, freq="h"))


ISSUE = T0 + pd.Timedelta(days=4)


def test_seasonal_naive_repeats_yesterday_with_quantile_intervals() -> None:
    f = SeasonalNaive(24).fit(four_days())
    out = f.predict(ISSUE, 24)
    # mean = day 4 = PROFILE + 20; 72 differences {-20 x24, +10 x24, +30 x24}:
    # q10 = sorted[7.1] = -20, q90 = sorted[63.9] = +30, q2.5 = -20, q97.5 = +30.
    np.testing.assert_allclose(out["mean"], PROFILE + 20)
    np.testing.assert_allclose(out["lo_80"], PROFILE + 0)
    np.testing.assert_allclose(out["hi_80"], PROFILE + 50)
    np.testing.assert_allclose(out["lo_95"], PROFILE + 0)
    np.testing.assert_allclose(out["hi_95"], PROFILE + 50)
    assert out.attrs["model"] == "seasonal-naive" and out.attrs["issued_at"] == ISSUE


def test_seasonal_naive_second_day_uses_lag_48_quantiles() -> None:
    f = SeasonalNaive(24).fit(four_days())
    out = f.predict(ISSUE, 36)
    # lead 24..35 repeat day 4 again (t - 48); lag-48 differences: -10 x24, +10 x24
    # -> q10 = -10, q90 = +10.
    np.testing.assert_allclose(out["mean"].iloc[24:], PROFILE[:12] + 20)
    np.testing.assert_allclose(out["lo_80"].iloc[24:], PROFILE[:12] + 10)
    np.testing.assert_allclose(out["hi_80"].iloc[24:], PROFILE[:12] + 30)


def test_seasonal_naive_falls_back_over_missing_hours() -> None:
    y = four_days()
    y.iloc[72 + 5] = np.nan  # day 4, 05:00 missing -> use day 3, 05:00
    out = SeasonalNaive(24).fit(y).predict(ISSUE, 24)
    assert out["mean"].iloc[5] == pytest.approx(PROFILE[5] - 10)
    assert out["mean"].iloc[6] == pytest.approx(PROFILE[6] + 20)


def test_seasonal_lookup_falls_back_to_last_value() -> None:
    hist = pd.Series([1.0, 2.0, np.nan], index=pd.date_range(T0, periods=3, freq="h"))
    hz = pd.date_range(T0 + pd.Timedelta(hours=3), periods=2, freq="h")
    # season 2: lead 0 -> t-2 = position 1 (2.0); lead 1 -> t-2 = position 2 (NaN) -> one
    # season further back, t-4 = position 0 (1.0).
    np.testing.assert_allclose(seasonal_lookup(hist, hz, 2), [2.0, 1.0])
    # nothing at any season back -> the last observation.
    only_last = pd.Series([np.nan, np.nan, 7.0], index=hist.index)
    np.testing.assert_allclose(seasonal_lookup(only_last, hz, 2, max_seasons=1), [7.0, 7.0])


def test_weekly_season() -> None:
    n = 24 * 21
    y = pd.Series(np.arange(n, dtype=float), index=pd.date_range(T0, periods=n, freq="h"))
    out = SeasonalNaive(168).fit(y).predict(T0 + pd.Timedelta(hours=n), 24)
    np.testing.assert_allclose(out["mean"], np.arange(n - 168, n - 144))
    # every lag-168 difference is exactly 168: both bounds lie above the point forecast, and
    # the mean must stay the seasonal-naive value (base._finish must not relabel it).
    np.testing.assert_allclose(out["hi_95"] - out["mean"], 168.0)
    np.testing.assert_allclose(out["lo_95"], out["mean"])


def test_climatology_is_the_hour_of_day_mean_of_the_window() -> None:
    f = Climatology(days=2).fit(four_days())
    out = f.predict(ISSUE, 24)
    # mean of day 3 and day 4 = PROFILE + 5. In-sample errors (day vs mean of up to 2
    # previous days): day 2: +10, day 3: -10 - 5 = -15, day 4: 20 - 0 = +20 (24 each)
    # -> q10 = -15, q90 = +20.
    np.testing.assert_allclose(out["mean"], PROFILE + 5)
    np.testing.assert_allclose(out["lo_80"], PROFILE - 10)
    np.testing.assert_allclose(out["hi_80"], PROFILE + 25)


def test_empirical_quantiles_values_and_error() -> None:
    q = empirical_quantiles(np.array([np.nan, *range(11)]))
    assert q == {"lo_95": 0.25, "lo_80": 1.0, "hi_80": 9.0, "hi_95": 9.75}
    with pytest.raises(ForecastError, match="no finite in-sample errors"):
        empirical_quantiles(np.array([np.nan]))


def test_bad_parameters_and_states() -> None:
    with pytest.raises(ForecastError, match="season_hours must be >= 1, got 0"):
        SeasonalNaive(0)
    with pytest.raises(ForecastError, match="days must be >= 1, got 0"):
        Climatology(0)
    with pytest.raises(NotFittedError, match="call fit"):
        SeasonalNaive().predict(ISSUE)
    with pytest.raises(TimeAxisError, match="naive"):
        SeasonalNaive().fit(four_days()).predict(pd.Timestamp("2023-05-05"))


def test_weekly_season_needs_enough_history() -> None:
    with pytest.raises(ForecastError, match="fit on at least 192 hours"):
        SeasonalNaive(168).fit(four_days())


def test_climatology_window_is_by_time_when_the_history_stops_early() -> None:
    # y ends 3 h before the issue time: the window is still the 2 days before the issue time
    # (day 3 and day 4), not the last 48 rows (which reached back into day 2).
    f = Climatology(days=2).fit(four_days())
    out = f.predict(ISSUE, 24, y=four_days().iloc[:-3])
    expected = PROFILE + 5.0
    expected[21:] = PROFILE[21:] - 10.0  # hours 21..23 only on day 3 (offset -10)
    np.testing.assert_allclose(out["mean"], expected)
