import numpy as np
import pandas as pd
import pytest

from carbonsched.errors import TimeAxisError
from carbonsched.timeaxis import (
    check_covers,
    day_start_utc,
    ensure_hourly_utc,
    hourly_slots,
    require_aware,
)


def _series(idx, values=None):
    return pd.Series(np.arange(len(idx), dtype=float) if values is None else values, index=idx)


def test_naive_index_refused_with_hint():
    s = _series(pd.date_range("2023-01-01", periods=3, freq="h"))
    with pytest.raises(TimeAxisError, match=r"naive.*tz_localize\('UTC'\)"):
        ensure_hourly_utc(s, name="CA-ON")


def test_gap_becomes_nan_not_zero_and_nothing_shifts():
    idx = pd.DatetimeIndex(["2023-01-01 00:00", "2023-01-01 01:00", "2023-01-01 03:00"], tz="UTC")
    out = ensure_hourly_utc(_series(idx, [10.0, 11.0, 13.0]))
    assert list(out.index.hour) == [0, 1, 2, 3]
    assert out.iloc[3] == 13.0 and out.iloc[1] == 11.0
    assert np.isnan(out.iloc[2])
    assert out.index.freqstr == "h"


def test_gap_refused_when_not_filling():
    idx = pd.DatetimeIndex(["2023-01-01 00:00", "2023-01-01 02:00"], tz="UTC")
    with pytest.raises(TimeAxisError, match="1 missing hour.*2023-01-01T01:00:00"):
        ensure_hourly_utc(_series(idx), fill_gaps=False)


def test_duplicates_refused_by_default_and_rules():
    idx = pd.DatetimeIndex(["2023-01-01 00:00", "2023-01-01 01:00", "2023-01-01 01:00"], tz="UTC")
    s = _series(idx, [1.0, 2.0, 4.0])
    with pytest.raises(TimeAxisError, match="1 duplicated timestamp.*01:00"):
        ensure_hourly_utc(s, name="x")
    assert ensure_hourly_utc(s, duplicates="mean").tolist() == [1.0, 3.0]
    assert ensure_hourly_utc(s, duplicates="first").tolist() == [1.0, 2.0]


def test_other_time_zones_converted_to_utc():
    idx = pd.date_range("2023-07-01 08:00", periods=2, freq="h", tz="Asia/Shanghai")
    out = ensure_hourly_utc(_series(idx))
    assert out.index[0] == pd.Timestamp("2023-07-01 00:00", tz="UTC")


def test_off_hour_and_unsorted():
    idx = pd.DatetimeIndex(["2023-01-01 00:30"], tz="UTC")
    with pytest.raises(TimeAxisError, match="not on the hour"):
        ensure_hourly_utc(_series(idx))
    idx = pd.DatetimeIndex(["2023-01-01 01:00", "2023-01-01 00:00"], tz="UTC")
    assert ensure_hourly_utc(_series(idx, [5.0, 4.0])).tolist() == [4.0, 5.0]


def test_require_aware_and_day_start():
    with pytest.raises(TimeAxisError, match="naive"):
        require_aware("2023-07-15T00:00:00")
    assert require_aware("2023-07-15T08:00:00+08:00") == pd.Timestamp("2023-07-15", tz="UTC")
    assert day_start_utc("2023-07-15") == pd.Timestamp("2023-07-15", tz="UTC")
    with pytest.raises(TimeAxisError, match="not YYYY-MM-DD"):
        day_start_utc("15/07/2023x")


def test_slots_and_coverage():
    slots = hourly_slots(pd.Timestamp("2023-07-15", tz="UTC"), 24)
    assert len(slots) == 24 and slots.name == "slot"
    with pytest.raises(TimeAxisError, match="at least 1 hour"):
        hourly_slots(pd.Timestamp("2023-07-15", tz="UTC"), 0)
    with pytest.raises(TimeAxisError, match="1 hour.*missing, first 2023-07-15T23:00"):
        check_covers(slots[:-1], slots, "weather")


@pytest.mark.parametrize("bad", ["07/08/2023", "15/07/2023", "2023-07-15 13:00", "20230715",
                                 "2023-7-5"])
def test_day_start_refuses_anything_but_iso_day(bad):
    # 07/08/2023 used to be read silently as 8 July (US order); a plan for the wrong day
    with pytest.raises(TimeAxisError, match=r"is not YYYY-MM-DD; give e.g. 2023-07-15"):
        day_start_utc(bad)
    assert day_start_utc(" 2023-07-08 ") == pd.Timestamp("2023-07-08", tz="UTC")
