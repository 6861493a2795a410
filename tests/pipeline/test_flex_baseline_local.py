"""Prior-days baselines on the site's local clock (PJM Manual 11 section 10, NYISO and CAISO
CBLs are defined on local prevailing time): like days, weekday/weekend, excluded event days and
the hour shifts are the site's local ones, also across daylight-saving changes. Before, days
were UTC dates and prior days 24 UTC hours apart: a Friday-evening event at a New York site
(Saturday in UTC) was compared with Saturdays."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable
from types import SimpleNamespace

import pandas as pd
import pytest

from carbonsched.flex import GridAgreement, GridEvent, GridFlexError, prior_days_baseline
from carbonsched.pipeline.flex import event_baselines

NY, SHANGHAI = "America/New_York", "Asia/Shanghai"


def local_load(tz: str, first: str, last: str, kw: Callable[[pd.Timestamp], float]
               ) -> pd.Series:
    """Hourly load in UTC over ``[first, last)`` (UTC dates), ``kw(local time)`` each hour."""
    idx = pd.date_range(first, last, freq="h", tz="UTC", inclusive="left")
    return pd.Series([kw(t) for t in idx.tz_convert(tz)], index=idx)


def weekday_900_weekend_300(t: pd.Timestamp) -> float:
    return 900.0 if t.day_of_week < 5 else 300.0


def hour_of_day(t: pd.Timestamp) -> float:
    """100 kW + the local hour: a baseline's value names the local hour it was taken at."""
    return 100.0 + t.hour


def dates(*texts: str) -> tuple[dt.date, ...]:
    return tuple(dt.date.fromisoformat(t) for t in texts)


def test_a_friday_evening_event_at_a_us_site_is_compared_with_local_weekdays():
    # Friday 2026-07-17 20:00-22:00 EDT = Saturday 00:00-02:00 UTC. Before: the UTC date
    # (Saturday) made it a weekend event, and the "days" were Saturday/Friday-evening mixes:
    # 540 kW against a true Friday-evening load of 900 kW
    ev = GridEvent("us-ny", pd.Timestamp("2026-07-18T00:00Z"), pd.Timestamp("2026-07-18T02:00Z"),
                   target_fraction=0.2, id="fri")
    load = local_load(NY, "2026-06-01", "2026-07-18", weekday_900_weekend_300)
    b = prior_days_baseline(load, ev, "prior-days-mean", days=5, tz=NY)
    assert b.hours_kw == {ev.start: 900.0, ev.start + pd.Timedelta(hours=1): 900.0}
    # local dates: Thu..Mon, the weekend skipped, then the Friday before
    assert b.days == dates("2026-07-16", "2026-07-15", "2026-07-14", "2026-07-13", "2026-07-10")


@pytest.mark.parametrize(("start", "days"), [
    # Wednesday 18:00 EDT after the spring-forward (Sunday 2026-03-08): 22:00 UTC, while
    # 18:00 EST on 03-06..03-04 is 23:00 UTC. Before: 17:00 local on those days -> 117.4 kW
    ("2026-03-11T22:00Z", ("2026-03-10", "2026-03-09", "2026-03-06", "2026-03-05",
                           "2026-03-04")),
    # Wednesday 18:00 EST after the fall-back (Sunday 2026-11-01): 23:00 UTC, while 18:00 EDT
    # on 10-30..10-28 is 22:00 UTC. Before: 19:00 local on those days -> 118.6 kW
    ("2026-11-04T23:00Z", ("2026-11-03", "2026-11-02", "2026-10-30", "2026-10-29",
                           "2026-10-28")),
])
def test_after_a_daylight_saving_change_the_baseline_keeps_the_local_hours(start, days):
    t0 = pd.Timestamp(start)
    ev = GridEvent("us-ny", t0, t0 + pd.Timedelta(hours=2), target_fraction=0.2, id="dst")
    load = local_load(NY, "2026-01-01", "2026-12-31", hour_of_day)
    for method in ("prior-days-mean", "prior-days-high"):
        b = prior_days_baseline(load, ev, method, days=5, high_days=4, tz=NY)
        assert list(b.hours_kw.values()) == [118.0, 119.0]     # 18:00 and 19:00 local
        assert b.candidates == dates(*days)


def test_a_skipped_spring_forward_hour_skips_the_day_and_a_repeated_hour_takes_the_first():
    # Sunday 2026-03-15 02:00 EDT (06:00 UTC): 02:00 does not exist on Sunday 03-08, so that
    # weekend day is not eligible (before: 03-08 06:00 UTC = 01:00 EST was taken)
    ev = GridEvent("us-ny", pd.Timestamp("2026-03-15T06:00Z"), pd.Timestamp("2026-03-15T07:00Z"),
                   target_fraction=0.2, id="spring")
    load = local_load(NY, "2026-01-01", "2026-12-31", hour_of_day)
    b = prior_days_baseline(load, ev, "prior-days-mean", days=3, tz=NY)
    assert b.days == dates("2026-03-14", "2026-03-07", "2026-03-01")
    assert b.hours_kw == {ev.start: 102.0}
    # Saturday 2026-11-07 01:00 EST (06:00 UTC): the prior weekend day 11-01 has 01:00 twice,
    # 05:00 UTC (EDT, first) and 06:00 UTC (EST); the first is taken (before: 06:00 UTC)
    ev = GridEvent("us-ny", pd.Timestamp("2026-11-07T06:00Z"), pd.Timestamp("2026-11-07T07:00Z"),
                   target_fraction=0.2, id="fall")
    load[pd.Timestamp("2026-11-01T05:00Z")] = 500.0
    load[pd.Timestamp("2026-11-01T06:00Z")] = 600.0
    b = prior_days_baseline(load, ev, "prior-days-mean", days=1, tz=NY)
    assert b.days == dates("2026-11-01")
    assert b.hours_kw == {ev.start: 500.0}


def test_a_site_east_of_utc_uses_its_local_day_and_local_event_days():
    # Monday 2026-07-13 06:00-08:00 CST (Asia/Shanghai, UTC+8) = Sunday 07-12 22:00-24:00 UTC.
    # Before: a weekend event by its UTC date, compared with Sunday/Monday-morning mixes
    ev = GridEvent("cn-gs", pd.Timestamp("2026-07-12T22:00Z"), pd.Timestamp("2026-07-13T00:00Z"),
                   target_fraction=0.2, id="mon")
    load = local_load(SHANGHAI, "2026-06-01", "2026-07-14", weekday_900_weekend_300)
    b = prior_days_baseline(load, ev, "prior-days-mean", days=5, tz=SHANGHAI)
    assert list(b.hours_kw.values()) == [900.0, 900.0]
    assert b.days == dates("2026-07-10", "2026-07-09", "2026-07-08", "2026-07-07", "2026-07-06")
    # an earlier event on Wednesday 07-08 07:00 local (07-07 23:00 UTC) excludes the local
    # 07-08, not the UTC date 07-07
    other = GridEvent("cn-gs", pd.Timestamp("2026-07-07T23:00Z"),
                      pd.Timestamp("2026-07-08T00:00Z"), target_fraction=0.2, id="wed")
    ag = GridAgreement("cn-gs", baseline_method="prior-days-mean", baseline_days=5)
    base, _methods, notes = event_baselines({"cn-gs": load}, [ev, other], {"cn-gs": ag},
                                            {"cn-gs": SHANGHAI})
    assert [base[("cn-gs", h)] for h in ev.hours] == [900.0, 900.0]
    (note,) = [n for n in notes if n.startswith("grid event mon:")]
    assert "(2026-07-10, 2026-07-09, 2026-07-07, 2026-07-06, 2026-07-03, local dates in " \
        "Asia/Shanghai)" in note


def test_a_utc_site_is_unchanged_up_to_an_event_ending_at_midnight():
    # just at the limit: Friday 2026-07-17 22:00-24:00 UTC at a UTC site, the window ending on
    # the next UTC date: the same days and kW as the 24-hour UTC shift gave
    ev = GridEvent("eu", pd.Timestamp("2026-07-17T22:00Z"), pd.Timestamp("2026-07-18T00:00Z"),
                   target_fraction=0.2, id="utc")
    load = local_load("UTC", "2026-06-01", "2026-07-18", weekday_900_weekend_300)
    b = prior_days_baseline(load, ev, "prior-days-mean", days=5, tz="UTC")
    assert list(b.hours_kw.values()) == [900.0, 900.0]
    assert b.days == dates("2026-07-16", "2026-07-15", "2026-07-14", "2026-07-13", "2026-07-10")
    # a weekend load that differs: a Saturday event still takes Saturdays and Sundays only
    sat = GridEvent("eu", pd.Timestamp("2026-07-18T22:00Z"), pd.Timestamp("2026-07-19T00:00Z"),
                    target_fraction=0.2, id="sat")
    b = prior_days_baseline(load, sat, "prior-days-mean", days=2, tz="UTC")
    assert (b.days, list(b.hours_kw.values())) == (dates("2026-07-12", "2026-07-11"),
                                                   [300.0, 300.0])


def test_the_plans_history_reaches_the_45th_local_day_across_a_fall_back():
    # Thursday 2026-11-05 18:00 EST (23:00 UTC); its 45th prior day, Monday 09-21 18:00 EDT, is
    # 22:00 UTC: 45 days and 1 hour before. Only that hour is recorded; the plan's history
    # window reaches it (before: it began 45 x 24 h before the event and missed it)
    from carbonsched.pipeline.daily import history_baselines
    from tests.plan.builders import SiteWrapper

    ag = GridAgreement("a", baseline_method="prior-days-mean", baseline_days=1)
    site = dataclasses.replace(SiteWrapper("a").gpus("H100", 8).obj(), timezone=NY,
                               meta={"grid_agreement": ag})
    ev = GridEvent("a", pd.Timestamp("2026-11-05T23:00Z"), pd.Timestamp("2026-11-06T00:00Z"),
                   target_fraction=0.2, id="thu")
    recorded = pd.Series({pd.Timestamp("2026-09-21T22:00Z"): 777.0})

    def history(_site, t0, t1):
        return recorded[(recorded.index >= t0) & (recorded.index < t1)]

    base, _m, notes = history_baselines(SimpleNamespace(sites=[site]), [ev], history)
    assert base == {("a", ev.start): 777.0}, notes


def test_a_bad_or_missing_time_zone_is_refused_by_name():
    ev = GridEvent("a", pd.Timestamp("2026-07-17T20:00Z"), pd.Timestamp("2026-07-17T21:00Z"),
                   target_fraction=0.2, id="ev")
    load = local_load("UTC", "2026-07-01", "2026-07-18", weekday_900_weekend_300)
    with pytest.raises(GridFlexError, match="'Mars/Olympus' is not an IANA time zone"):
        prior_days_baseline(load, ev, days=5, tz="Mars/Olympus")
    ag = GridAgreement("a", baseline_method="prior-days-mean", baseline_days=5)
    with pytest.raises(GridFlexError, match="grid event ev at site a: no time zone"):
        event_baselines({"a": load}, [ev], {"a": ag}, {})
