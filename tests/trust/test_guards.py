"""Issue 7 item 14: tests that kill the mutants of carbonsched/timeaxis.py and forecasts/base.py.

Time zones are asserted, not only instants (``==`` on tz-aware timestamps compares instants, so a
skipped conversion to UTC passes it); exogenous inputs are checked to align by timestamp; the
48-hour history boundary is tested on both sides. ``scripts/mutate.py`` runs the mutants.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest

from carbonsched.errors import ForecastError, NotFittedError, TimeAxisError
from carbonsched.forecasts.base import COLUMNS, EmpiricalIntervals, Forecaster, fit_with_fallback
from carbonsched.timeaxis import (
    HOUR,
    check_covers,
    day_start_utc,
    ensure_hourly_utc,
    hourly_slots,
    require_aware,
    to_local,
)

T0 = pd.Timestamp("2023-07-15", tz="UTC")


def _utc(x) -> str:
    return str(x.tz if hasattr(x, "tz") else x.tzinfo)


# ---------------------------------------------------------------------------- timeaxis
def test_require_aware_converts_to_utc_and_names_what():
    t = require_aware("2023-07-15T08:00:00+08:00", "issue")
    assert _utc(t) == "UTC" and t.hour == 0
    t2 = require_aware(dt.datetime(2023, 7, 15, 2, tzinfo=dt.timezone(dt.timedelta(hours=2))))
    assert _utc(t2) == "UTC" and t2.hour == 0
    with pytest.raises(TimeAxisError, match=r"^issue 2023-07-15T00:00:00 is naive"):
        require_aware("2023-07-15T00:00:00", "issue")


def test_day_start_is_utc_midnight_of_the_utc_day():
    d = day_start_utc("2023-07-15")
    assert _utc(d) == "UTC" and d == pd.Timestamp("2023-07-15 00:00", tz="UTC")
    assert _utc(day_start_utc(dt.date(2023, 7, 15))) == "UTC"
    late = day_start_utc(pd.Timestamp("2023-07-15 23:00", tz="America/New_York"))
    assert late == pd.Timestamp("2023-07-16", tz="UTC") and _utc(late) == "UTC"
    with pytest.raises(TimeAxisError, match="date '2023-02-30' is not YYYY-MM-DD"):
        day_start_utc("2023-02-30")


def test_hourly_slots_utc_named_and_bounded():
    s = hourly_slots(pd.Timestamp("2023-07-15 02:00", tz="Europe/Berlin"), 1)
    assert len(s) == 1 and _utc(s) == "UTC" and s[0] == T0 and s.name == "slot"
    assert s.freqstr == "h"
    assert (hourly_slots(T0, 3) - T0).tolist() == [pd.Timedelta(0), HOUR, 2 * HOUR]
    with pytest.raises(TimeAxisError, match="horizon must be at least 1 hour, got -1"):
        hourly_slots(T0, -1)
    with pytest.raises(TimeAxisError, match="naive"):
        hourly_slots(pd.Timestamp("2023-07-15"), 2)


def test_ensure_hourly_utc_converts_and_leaves_the_input_alone():
    idx = pd.date_range("2023-07-15 02:00", periods=3, freq="h", tz="Europe/Berlin")
    s = pd.Series([1.0, 2.0, 3.0], index=idx)
    out = ensure_hourly_utc(s)
    assert _utc(out.index) == "UTC" and out.index[0] == T0 and out.index[0].hour == 0
    assert _utc(s.index) == "Europe/Berlin"  # the input is not modified
    assert out.index.freqstr == "h" and out.tolist() == [1.0, 2.0, 3.0]
    frame = ensure_hourly_utc(s.to_frame("v"))
    assert _utc(frame.index) == "UTC"


def test_ensure_hourly_utc_messages_count_and_name():
    with pytest.raises(TimeAxisError, match=r"^z: index must be a DatetimeIndex, got RangeIndex"):
        ensure_hourly_utc(pd.Series([1.0]), name="z")
    with pytest.raises(TimeAxisError, match=r"^z: no data"):
        ensure_hourly_utc(pd.Series([], index=pd.DatetimeIndex([], tz="UTC"), dtype=float),
                          name="z")
    off = pd.DatetimeIndex(["2023-01-01 00:00", "2023-01-01 00:30", "2023-01-01 01:15"], tz="UTC")
    with pytest.raises(TimeAxisError, match=r"2 timestamp\(s\) not on the hour, first "
                                            r"2023-01-01T00:30:00\+00:00"):
        ensure_hourly_utc(pd.Series([1.0, 2.0, 3.0], index=off))
    dup = pd.DatetimeIndex(["2023-01-01 00:00"] * 3 + ["2023-01-01 01:00"], tz="UTC")
    with pytest.raises(TimeAxisError, match=r"2 duplicated timestamp\(s\)"):
        ensure_hourly_utc(pd.Series([1.0, 2.0, 3.0, 4.0], index=dup))
    gap = pd.DatetimeIndex(["2023-01-01 00:00", "2023-01-01 03:00"], tz="UTC")
    with pytest.raises(TimeAxisError, match=r"2 missing hour\(s\), first 2023-01-01T01:00"):
        ensure_hourly_utc(pd.Series([1.0, 2.0], index=gap), fill_gaps=False)


def test_ensure_hourly_utc_sorts_before_duplicates_and_keeps_the_index_name():
    idx = pd.DatetimeIndex(["2023-01-01 02:00", "2023-01-01 00:00", "2023-01-01 00:00",
                            "2023-01-01 01:00"], tz="UTC", name="ts")
    s = pd.Series([3.0, 1.0, 5.0, 2.0], index=idx)
    assert ensure_hourly_utc(s, duplicates="first").tolist() == [1.0, 2.0, 3.0]
    assert ensure_hourly_utc(s, duplicates="mean").tolist() == [3.0, 2.0, 3.0]
    gap = pd.DatetimeIndex(["2023-01-01 00:00", "2023-01-01 02:00"], tz="UTC", name="ts")
    out = ensure_hourly_utc(pd.Series([1.0, 2.0], index=gap))
    assert out.index.name == "ts" and len(out) == 3 and np.isnan(out.iloc[1])


def test_to_local_and_check_covers():
    t = to_local(T0, "Asia/Tokyo")
    assert _utc(t) == "Asia/Tokyo" and t.hour == 9
    slots = hourly_slots(T0, 4)
    check_covers(slots.tz_convert("Asia/Tokyo"), slots, "w")  # instants, any zone: no raise
    with pytest.raises(TimeAxisError, match=r"^w does not cover the horizon: 2 hour\(s\) "
                                            r"missing, first 2023-07-15T02:00"):
        check_covers(slots[:2], slots, "w")


# ------------------------------------------------------------------------ forecasts/base
class Echo(Forecaster):
    """Mean = X['x'] at each hour if given, else the last observation; width 1 each side."""

    name = "echo"

    def _fit(self, y, X):
        self.n_fit = len(y)

    def _predict(self, history, horizon, X):
        self.horizon_name = horizon.name
        mean = X["x"].to_numpy(float) if X is not None else np.full(len(horizon),
                                                                     history.dropna().iloc[-1])
        return pd.DataFrame({"mean": mean, "lo_80": mean - 1, "hi_80": mean + 1}, index=horizon)


class NeedsX(Echo):
    name = "needs-x"
    requires_exog = True


def _y(hours: int, end=T0, value=None):
    idx = pd.date_range(end=end - HOUR, periods=hours, freq="h", tz="UTC")
    return pd.Series(np.arange(hours, dtype=float) if value is None else value, index=idx)


def _x(start, hours, tz="UTC"):
    idx = pd.date_range(start, periods=hours, freq="h", tz="UTC")
    return pd.DataFrame({"x": 1000.0 + np.arange(hours)}, index=idx.tz_convert(tz))


def test_fit_needs_48_observed_hours_both_sides_of_the_boundary():
    y = _y(60)
    y.iloc[:13] = np.nan  # 47 observed
    with pytest.raises(ForecastError, match="echo: need at least 48 observed hours to fit, got 47"):
        Echo().fit(y)
    y.iloc[12] = 5.0  # 48 observed
    assert Echo().fit(y).n_fit == 60


def test_predict_uses_only_hours_before_the_issue_time():
    y = _y(72, end=T0 + 3 * HOUR)  # runs past the issue time
    m = Echo().fit(_y(72))
    fc = m.predict(T0, 3, y=y)
    assert fc["mean"].tolist() == [float(y[T0 - HOUR])] * 3
    assert list(fc.columns) == list(COLUMNS) and fc.index.name == "ts"
    assert _utc(fc.index) == "UTC" and fc.index[0] == T0 and len(fc) == 3
    assert fc.attrs["model"] == "echo" and fc.attrs["issued_at"] == T0
    assert _utc(fc.attrs["issued_at"]) == "UTC"
    # lo_95/hi_95 absent from _predict: filled with the mean, then ordered around it
    assert (fc["lo_95"] <= fc["lo_80"]).all() and (fc["hi_95"] >= fc["hi_80"]).all()
    m0 = fc["mean"].iloc[0]
    assert fc.iloc[0].tolist() == [m0, m0, m0, m0 - 1, m0 + 1]


def test_predict_validates_issue_time_and_state():
    with pytest.raises(NotFittedError, match="echo: call fit"):
        Echo().predict(T0, 3)
    m = Echo().fit(_y(60))
    with pytest.raises(TimeAxisError, match="naive"):
        m.predict(pd.Timestamp("2023-07-15"), 3)
    with pytest.raises(TimeAxisError, match=r"issued_at 2023-07-15T00:30:00\+00:00 is not on"):
        m.predict(T0 + pd.Timedelta(minutes=30), 3)
    with pytest.raises(ForecastError, match=r"echo: no observations before 2023-07-12"):
        m.predict(T0 - pd.Timedelta(days=3), 3)
    fc = m.predict(pd.Timestamp("2023-07-15 02:00", tz="Europe/Berlin"), 2)
    assert _utc(fc.index) == "UTC" and fc.index[0] == T0


def test_exog_is_aligned_by_timestamp_not_position():
    m = NeedsX().fit(_y(60), _x(T0 - 60 * HOUR, 60))
    X = _x(T0 - 10 * HOUR, 40, tz="Asia/Tokyo")  # starts before the horizon, another zone
    fc = m.predict(T0, 4, X=X)
    assert fc["mean"].tolist() == [1010.0, 1011.0, 1012.0, 1013.0]
    shuffled = X.sample(frac=1.0, random_state=0)
    assert m.predict(T0, 4, X=shuffled)["mean"].tolist() == [1010.0, 1011.0, 1012.0, 1013.0]


def test_exog_required_and_checked_on_both_stages():
    with pytest.raises(ForecastError, match=r"needs-x: exogenous inputs X are required \(fit\)"):
        NeedsX().fit(_y(60))
    with pytest.raises(TimeAxisError, match=r"exogenous X \(fit\) does not cover.*first "
                                            r"2023-07-12T12:00"):
        NeedsX().fit(_y(60), _x(T0 - 59 * HOUR, 59))
    m = NeedsX().fit(_y(60), _x(T0 - 60 * HOUR, 60))
    # the fitted X stops at the issue time: it does not cover the horizon
    with pytest.raises(TimeAxisError, match=r"exogenous X \(predict\) does not cover.*first "
                                            r"2023-07-15T00:00"):
        m.predict(T0, 2)
    # fit tolerates NaN values on rows that exist; predict does not
    x = _x(T0 - 60 * HOUR, 64)
    x.iloc[5, 0] = np.nan
    assert NeedsX().fit(_y(60), x.iloc[:60]).n_fit == 60
    x.iloc[61, 0] = np.nan
    with pytest.raises(TimeAxisError, match=r"first 2023-07-15T01:00"):
        m.predict(T0, 3, X=x)
    assert m.predict(T0, 1, X=x)["mean"].tolist() == [1060.0]


class Broken(Echo):
    name = "broken"

    def _fit(self, y, X):
        raise np.linalg.LinAlgError("singular matrix")


class NanOut(Echo):
    name = "nan-out"

    def _predict(self, history, horizon, X):
        return pd.DataFrame({"mean": [1.0, np.nan]}, index=horizon)


class Unordered(Echo):
    name = "unordered"

    def _predict(self, history, horizon, X):
        return pd.DataFrame({"mean": [10.0], "lo_80": [12.0], "hi_80": [8.0], "lo_95": [7.0],
                             "hi_95": [9.0]}, index=horizon)


class NoMean(Echo):
    name = "no-mean"

    def _predict(self, history, horizon, X):
        return pd.DataFrame({"lo_80": [1.0]}, index=horizon)


def test_fit_failures_and_bad_outputs_are_forecast_errors():
    with pytest.raises(ForecastError, match="broken: fit failed: singular matrix"):
        Broken().fit(_y(60))
    with pytest.raises(ForecastError, match=r"nan-out: forecast has NaN at 2023-07-15T01:00"):
        NanOut().fit(_y(60)).predict(T0, 2)
    with pytest.raises(ForecastError, match="no-mean: _predict returned no 'mean'"):
        NoMean().fit(_y(60)).predict(T0, 1)
    fc = Unordered().fit(_y(60)).predict(T0, 1)
    # mean kept; each pair sorted, then clamped to the mean: lo [7, 12] -> 7, 10; hi [8, 9] -> 10
    assert fc.iloc[0].tolist() == [10.0, 10.0, 10.0, 7.0, 10.0]


def test_fit_with_fallback_says_what_it_did():
    m, note = fit_with_fallback(Echo(), Broken(), _y(60))
    assert isinstance(m, Echo) and note is None and m._fitted
    m, note = fit_with_fallback(Broken(), Echo(), _y(60))
    assert isinstance(m, Echo) and note == ("broken failed (broken: fit failed: singular "
                                            "matrix); used echo")
    x = _x(T0 - 60 * HOUR, 60)
    m, note = fit_with_fallback(Broken(), NeedsX(), _y(60), x)
    assert isinstance(m, NeedsX) and m._X is not None


def test_empirical_intervals_by_lead_relative_and_additive():
    res = pd.DataFrame({"lead": [0] * 5 + [1] * 5,
                        "residual": [-2.0, -1.0, 0.0, 1.0, 2.0, -4.0, -2.0, 0.0, 2.0, 4.0]})
    res["rel_residual"] = res["residual"] / 10.0
    add = EmpiricalIntervals(relative=False).fit(res)
    out = add.apply(pd.Series([100.0, 100.0, 100.0]))
    assert out["lo_95"].tolist()[:2] == pytest.approx([98.1, 96.2])
    assert out["hi_80"].tolist()[:2] == pytest.approx([101.6, 103.2])
    assert out["hi_95"].iloc[2] == pytest.approx(100 + np.quantile(res["residual"], 0.975))
    rel = EmpiricalIntervals(relative=True).fit(res).apply(pd.Series([200.0, 200.0]))
    assert rel["lo_95"].tolist() == pytest.approx([200 * (1 - 0.19), 200 * (1 - 0.38)])
    with pytest.raises(ForecastError, match="no residuals"):
        EmpiricalIntervals().fit(res.iloc[:0])
    with pytest.raises(NotFittedError):
        EmpiricalIntervals().apply(pd.Series([1.0]))
    assert Echo.get_test_params() == [{}] and Echo(a=1).params == {"a": 1}


class Reversed(Echo):
    """Returns its rows in reverse order plus one row before the horizon."""

    name = "reversed"

    def _predict(self, history, horizon, X):
        idx = horizon[::-1].append(pd.DatetimeIndex([horizon[0] - HOUR]))
        return pd.DataFrame({"mean": (idx - T0) / HOUR}, index=idx)


def test_outputs_are_aligned_to_the_horizon_by_timestamp():
    fc = Reversed().fit(_y(60)).predict(T0, 3)
    assert fc["mean"].tolist() == [0.0, 1.0, 2.0]


def test_default_horizon_and_the_horizon_handed_to_predict():
    m = Echo().fit(_y(60))
    fc = m.predict(T0)
    assert len(fc) == 24 and fc.index[-1] == T0 + 23 * HOUR
    assert m.horizon_name == "ts"


def test_optional_exog_is_checked_when_given():
    m = Echo().fit(_y(60))
    with pytest.raises(TimeAxisError, match=r"echo: exogenous X \(predict\) does not cover"):
        m.predict(T0, 4, X=_x(T0, 2))
    assert m.predict(T0, 2, X=_x(T0 - HOUR, 3))["mean"].tolist() == [1001.0, 1002.0]


def test_empirical_intervals_are_relative_by_default():
    res = pd.DataFrame({"lead": [0] * 5, "residual": [-2.0, -1.0, 0.0, 1.0, 2.0]})
    res["rel_residual"] = res["residual"] / 10.0
    out = EmpiricalIntervals().fit(res).apply(pd.Series([200.0]))
    assert out["lo_95"].iloc[0] == pytest.approx(200 * (1 - 0.19))


class TooShort(Echo):
    name = "too-short"

    def _fit(self, y, X):
        raise ForecastError("too-short: needs a week")


def test_forecast_errors_of_a_fit_pass_through_unwrapped():
    m = TooShort()
    with pytest.raises(ForecastError, match=r"^too-short: needs a week$"):
        m.fit(_y(60))
    with pytest.raises(NotFittedError):
        m.predict(T0, 1)


def test_empirical_intervals_ignore_missing_residuals_and_use_single_ones():
    res = pd.DataFrame({"lead": [0, 1, 1, 1, 1, 1],
                        "residual": [5.0, 1.0, 2.0, np.nan, 3.0, 4.0]})
    out = EmpiricalIntervals(relative=False).fit(res).apply(pd.Series([100.0, 100.0, 100.0]))
    assert out.iloc[0][["lo_95", "lo_80", "hi_80", "hi_95"]].tolist() == [105.0] * 4
    assert out["lo_95"].iloc[1] == pytest.approx(100 + np.quantile([1, 2, 3, 4], 0.025))
    pooled = [5.0, 1.0, 2.0, 3.0, 4.0]
    assert out["hi_95"].iloc[2] == pytest.approx(100 + np.quantile(pooled, 0.975))
    assert np.isfinite(out.to_numpy()).all()
