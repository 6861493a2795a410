"""The Carbon Aware SDK's window arithmetic (carbonsched.service.carbon_aware), hand-computed.

Points are [t, t + 1 h); windows start at dataStartAt exactly and step by one point; a window's
value is the time-weighted mean of the points it overlaps (the SDK's RollingAverage and
AverageOverPeriod, src/CarbonAware/src/Extensions/EmissionsDataExtensions.cs)."""

from __future__ import annotations

import pandas as pd
import pytest

from carbonsched.service.carbon_aware import (
    DataPoint,
    SdkInputError,
    average_over_period,
    optimal,
    overlapping,
    rolling_average,
    time_span,
    window_minutes,
)

T0 = pd.Timestamp("2023-07-15T00:00:00Z")
# six hourly points 00:00 .. 05:00 (the data end at 06:00)
POINTS = pd.Series([10.0, 20.0, 30.0, 40.0, 50.0, 60.0],
                   index=pd.date_range(T0, periods=6, freq="h"))


def at(hhmm: str) -> pd.Timestamp:
    return pd.Timestamp(f"2023-07-15T{hhmm}:00Z")


def minutes(m: int) -> pd.Timedelta:
    return pd.Timedelta(minutes=m)


def test_points_are_half_open_hours():
    # [01:00, 02:00) holds the 01:00 point only: the 02:00 point starts at the end
    assert overlapping(POINTS, at("01:00"), at("02:00")).to_dict() == {at("01:00"): 20.0}
    # a query without an end takes the point containing its start
    assert overlapping(POINTS, at("01:59"), at("01:59")).to_dict() == {at("01:00"): 20.0}
    assert overlapping(POINTS, at("02:00"), at("02:00")).to_dict() == {at("02:00"): 30.0}
    # off the hour: the points overlapping [00:30, 02:30) are 00:00, 01:00 and 02:00
    assert list(overlapping(POINTS, at("00:30"), at("02:30"))) == [10.0, 20.0, 30.0]
    assert overlapping(POINTS, at("06:00"), at("06:00")).empty


def test_window_of_90_minutes_averages_90_minutes_not_two_hours():
    w = rolling_average(POINTS, minutes(90), T0, T0 + pd.Timedelta(hours=6))
    # [00:00, 01:30) = (10*60 + 20*30) / 90; the last window [04:00, 05:30) ends before 06:00
    expect = {at(f"0{h}:00"): (POINTS.iloc[h] * 60 + POINTS.iloc[h + 1] * 30) / 90
              for h in range(5)}
    assert w.to_dict() == pytest.approx(expect)
    assert w.iloc[0] == pytest.approx(13.3333333)
    assert w.iloc[0] != pytest.approx(15.0)  # the two-hour mean of 10 and 20


def test_windows_off_the_hour_start_where_asked():
    w = rolling_average(POINTS, minutes(60), at("00:30"), at("03:30"))
    assert w.to_dict() == pytest.approx({at("00:30"): 15.0, at("01:30"): 25.0,
                                         at("02:30"): 35.0})


def test_window_size_zero_gives_the_raw_points():
    w = rolling_average(POINTS, minutes(0), at("00:30"), at("02:30"))
    assert w.to_dict() == {at("00:00"): 10.0, at("01:00"): 20.0, at("02:00"): 30.0}


def test_window_longer_than_the_data_gives_no_window_and_equal_gives_one():
    end = T0 + pd.Timedelta(hours=6)
    assert rolling_average(POINTS, minutes(361), T0, end).empty
    assert rolling_average(POINTS, minutes(360), T0, end).to_dict() == {T0: 35.0}
    # windows stay inside [start, end]
    w = rolling_average(POINTS, minutes(120), T0, at("03:00"))
    assert w.to_dict() == {T0: 15.0, at("01:00"): 25.0}


def test_a_gap_in_the_points_drops_the_windows_over_it():
    gap = POINTS.copy()
    gap.iloc[2] = float("nan")  # 02:00 missing
    w = rolling_average(gap, minutes(60), T0, T0 + pd.Timedelta(hours=6))
    assert list(w.index.hour) == [0, 1, 3, 4, 5]
    w = rolling_average(gap, minutes(120), T0, T0 + pd.Timedelta(hours=6))
    assert w.to_dict() == {T0: 15.0, at("03:00"): 45.0, at("04:00"): 55.0}


def test_average_over_period_weights_partial_hours():
    # 00:30 .. 02:30 = (10*30 + 20*60 + 30*30) / 120
    assert average_over_period(POINTS, at("00:30"), at("02:30")) == pytest.approx(20.0)
    assert average_over_period(POINTS, at("00:45"), at("01:15")) == pytest.approx(15.0)
    assert average_over_period(POINTS, T0, T0 + pd.Timedelta(hours=6)) == pytest.approx(35.0)


@pytest.mark.parametrize(("start", "end"), [
    (pd.Timedelta(hours=5, minutes=30), pd.Timedelta(hours=6, minutes=30)),
    (pd.Timedelta(0), pd.Timedelta(hours=6, minutes=1)),  # one minute past the data
    (pd.Timedelta(minutes=-1), pd.Timedelta(hours=1))])   # one minute before it
def test_average_over_period_refuses_uncovered_periods(start, end):
    with pytest.raises(SdkInputError, match="period out of range") as err:
        average_over_period(POINTS, T0 + start, T0 + end)
    assert list(err.value.errors) == ["startTime"]


def test_optimal_returns_every_tie():
    pts = [DataPoint("a", at("00:00"), minutes(60), 5.0), DataPoint("b", at("01:00"),
                                                                    minutes(60), 3.0),
           DataPoint("c", at("02:00"), minutes(60), 3.0)]
    assert [p.location for p in optimal(pts)] == ["b", "c"]
    assert optimal([]) == []


def test_time_span_and_window_minutes():
    assert time_span(minutes(60)) == "01:00:00"
    assert time_span(minutes(90)) == "01:30:00"
    assert time_span(pd.Timedelta(days=1, hours=2)) == "1.02:00:00"
    assert window_minutes(None) == 0 and window_minutes(0) == 0 and window_minutes(90) == 90
    with pytest.raises(SdkInputError, match="windowSize -1 is negative"):
        window_minutes(-1)
