"""Prior-days customer baselines of grid events (issue 38 item 2): CAISO/NAESB 10-in-10 and PJM's
High 4 of 5, computed from a site's recorded load, with hand-worked numbers; the agreement's
method carried into the commitment, the plan document and the report."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest

from carbonsched.flex import (
    BaselineMethod,
    GridAgreement,
    GridEvent,
    GridFlexError,
    agreement_from_mapping,
    prior_days_baseline,
)
from carbonsched.pipeline.flex import commit_events, event_baselines, flexibility_block
from carbonsched.plan import solve_plan
from carbonsched.report.flex import flexibility_section
from tests.plan.builders import JobWrapper, SiteWrapper, at, problem

# Monday 2023-07-10, 18:00-21:00 UTC; the five prior weekdays are 07-07 (Fri) .. 07-03 (Mon)
EVENT = GridEvent("a", pd.Timestamp("2023-07-10T18:00Z"), pd.Timestamp("2023-07-10T21:00Z"),
                  target_fraction=0.25, id="ev")
DAILY_KW = {"2023-07-07": 100.0, "2023-07-06": 80.0, "2023-07-05": 120.0,
            "2023-07-04": 90.0, "2023-07-03": 110.0,
            # a weekend between them, high enough to win if it were counted
            "2023-07-08": 500.0, "2023-07-09": 500.0}


def load(daily=DAILY_KW, ramp=True) -> pd.Series:
    """Hourly load: each day's value, + 1 kW per hour of the day from 18:00 (ramp)."""
    out = {}
    for day, kw in daily.items():
        for h in range(24):
            out[pd.Timestamp(f"{day}T{h:02d}:00Z")] = kw + (max(0, h - 18) if ramp else 0)
    return pd.Series(out).sort_index()


def test_ten_in_ten_style_mean_of_the_prior_like_days_hand_worked():
    b = prior_days_baseline(load(), EVENT, "prior-days-mean", days=5, tz="UTC")
    # (100 + 80 + 120 + 90 + 110) / 5 = 100 at 18:00; +1, +2 kW at 19:00, 20:00
    assert list(b.hours_kw.values()) == [100.0, 101.0, 102.0]
    assert b.days == (dt.date(2023, 7, 7), dt.date(2023, 7, 6), dt.date(2023, 7, 5),
                      dt.date(2023, 7, 4), dt.date(2023, 7, 3))       # the weekend skipped


def test_high_4_of_5_drops_the_lowest_day_hand_worked():
    b = prior_days_baseline(load(), EVENT, "prior-days-high", days=5, high_days=4, tz="UTC")
    # 07-06 (80 kW) dropped: (100 + 120 + 90 + 110) / 4 = 105
    assert list(b.hours_kw.values()) == [105.0, 106.0, 107.0]
    assert dt.date(2023, 7, 6) not in b.days and len(b.candidates) == 5
    # just at the limit: X = Y keeps every day (the mean)
    b5 = prior_days_baseline(load(), EVENT, "prior-days-high", days=5, high_days=5, tz="UTC")
    assert list(b5.hours_kw.values()) == [100.0, 101.0, 102.0]


def test_earlier_event_days_are_not_baseline_days():
    daily = {**DAILY_KW, "2023-06-30": 60.0}       # the Friday before 07-03
    b = prior_days_baseline(load(daily), EVENT, "prior-days-mean", days=5,
                            exclude_days={dt.date(2023, 7, 5)}, tz="UTC")
    # 07-05 out, 06-30 in: (100 + 80 + 90 + 110 + 60) / 5 = 88
    assert b.hours_kw[EVENT.start] == 88.0
    assert dt.date(2023, 6, 30) in b.days


def test_too_little_history_is_an_error_naming_the_days_found_and_the_fix():
    # just at the limit: exactly 5 weekdays recorded
    assert prior_days_baseline(load(), EVENT, "prior-days-mean", days=5, tz="UTC").hours_kw
    # known bad: a day with a missing event hour is not eligible -> 4 of 5
    gap = load().drop(pd.Timestamp("2023-07-04T19:00Z"))
    with pytest.raises(GridFlexError, match=r"needs 5 prior like days.*found 4 "
                       r"\(2023-07-07, 2023-07-06, 2023-07-05, 2023-07-03\).*plan-uncommitted"):
        prior_days_baseline(gap, EVENT, "prior-days-mean", days=5, tz="UTC")
    with pytest.raises(GridFlexError, match="needs 10 prior"):
        prior_days_baseline(load(), EVENT, "prior-days-mean", days=10, tz="UTC")


@pytest.mark.parametrize(("kw", "words"), [
    ({"method": "prior-days-median"}, "is not one of"),
    ({"method": "plan-uncommitted"}, "not computed from history"),
    ({"method": "prior-days-high", "days": 5, "high_days": 6}, "keeps 1..5 of the 5 days"),
    ({"method": "prior-days-high", "days": 5, "high_days": 0}, "keeps 1..5"),
    ({"days": 0}, "whole number in 1..45"),
])
def test_a_bad_method_or_count_is_refused_by_name(kw, words):
    with pytest.raises(GridFlexError, match=words):
        prior_days_baseline(load(), EVENT, tz="UTC", **kw)


def test_bad_recorded_load_is_refused_with_where():
    s = load()
    with pytest.raises(GridFlexError, match="tz-aware"):
        prior_days_baseline(s.tz_convert(None), EVENT, tz="UTC")
    with pytest.raises(GridFlexError, match="off the hour.*2023-07-03T00:30"):
        prior_days_baseline(pd.concat([s, pd.Series({pd.Timestamp("2023-07-03T00:30Z"): 1.0})]),
                            EVENT, days=5, tz="UTC")
    neg = s.copy()
    neg[pd.Timestamp("2023-07-05T18:00Z")] = -1.0
    with pytest.raises(GridFlexError, match="negative or infinite at 2023-07-05T18:00"):
        prior_days_baseline(neg, EVENT, days=5, tz="UTC")


def test_an_agreement_validates_its_method_and_high_days():
    with pytest.raises(GridFlexError, match="baseline_method 'ten-in-ten' is not one of"):
        agreement_from_mapping("a", {"target_fraction": 0.25, "baseline_method": "ten-in-ten"})
    with pytest.raises(GridFlexError, match="baseline_high_days must be a whole number in "
                       r"1..baseline_days \(5\)"):
        GridAgreement("a", baseline_method="prior-days-high", baseline_days=5,
                      baseline_high_days=6)
    ok = agreement_from_mapping("a", {"target_fraction": 0.25, "baseline_method":
                                      "prior-days-high", "baseline_days": 5,
                                      "baseline_high_days": 5})
    assert ok.baseline_method is BaselineMethod.PRIOR_DAYS_HIGH


def test_the_agreements_baseline_reaches_the_commitment_and_the_report():
    # a 24 h problem on 2023-07-10 (builders start at at(0)); one site, one slack job running
    # 18..20 in the baseline plan would be found by the planner; the baseline is history's
    site = SiteWrapper("a").gpus("H100", 16).obj()
    jobs = [JobWrapper("slack").gpus(4).hours(2).window(0, 24).obj()]
    p = problem([site], jobs, 24, ci={"a": [100.0] * 24})
    ev = GridEvent("a", at(18), at(21), target_kw=10.0, id="ev")
    day = at(0)
    daily = {str((day - pd.Timedelta(days=k)).date()): 40.0 + k for k in range(1, 31)}
    history = load(daily, ramp=False)
    ag = GridAgreement("a", baseline_method="prior-days-high", baseline_days=5,
                       baseline_high_days=4)
    baselines, methods, notes = event_baselines({"a": history}, [ev], {"a": ag},
                                               {"a": "UTC"})
    # 2023-07-15 is a Saturday: the 5 prior weekend days are 07-09, 07-08, 07-02, 07-01, 06-25
    # at 46, 47, 53, 54, 60 kW; the highest 4: (60 + 54 + 53 + 47) / 4 = 53.5
    want = 53.5
    assert [baselines[("a", h)] for h in ev.hours] == [want] * 3
    assert methods == {"a": BaselineMethod.PRIOR_DAYS_HIGH}
    assert "prior-days-high baseline over 4 of 5 prior days" in notes[0]
    cp = commit_events(p, [ev], solve_plan, baselines=baselines, baseline_methods=methods)
    assert [h["baseline_kw"] for h in cp.hours] == [want] * 3
    assert {h["baseline_method"] for h in cp.hours} == {"prior-days-high"}
    # nothing planned in the window may exceed baseline - 10 kW; delivered = baseline - planned
    for h in cp.hours:
        assert h["delivered_kw"] == pytest.approx(want - h["planned_kw"])
        assert h["shortfall_kw"] == pytest.approx(max(0.0, h["committed_kw"] - h["delivered_kw"]))
    doc = {"plan_id": "p1", "flexibility": flexibility_block(cp), "site_hours": []}
    frames, totals, _notes = flexibility_section([doc], at(0), at(24))
    (row,) = frames["flex_events"].to_dict(orient="records")
    assert row["baseline_method"] == "prior-days-high"
    assert row["baseline_kwh"] == pytest.approx(3 * want)
    assert row["shortfall_kwh"] == pytest.approx(sum(h["shortfall_kw"] for h in cp.hours))


def _plan_doc(pid: str, day: str, kw: float, hours: range) -> dict:
    return {"plan_id": pid, "date": day, "catalog": "global", "signal_quality": "measured",
            "solver": {"name": "test", "status": "optimal", "seconds": 0.0},
            "totals": {"energy_kwh": 0.0, "emissions_kg": 0.0, "baseline_emissions_kg": 0.0},
            "unplaced": [], "inference": [], "placements": [],
            "site_hours": [{"site": s, "hour": f"{day}T{h:02d}:00:00Z", "in_horizon": True,
                            "facility_power_kw": kw} for s in ("a", "b") for h in hours]
            + [{"site": "a", "hour": f"{day}T23:00:00Z", "in_horizon": False,
                "facility_power_kw": 999.0}]}


def test_recorded_load_is_the_newest_plan_of_each_hour_from_a_real_store(tmp_path):
    from carbonsched.pipeline.flex import recorded_site_load
    from carbonsched.store import Store

    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    store.save_plan(_plan_doc("old", "2023-07-03", 10.0, range(0, 12)))
    store.save_plan(_plan_doc("new", "2023-07-03", 20.0, range(6, 18)))
    s = recorded_site_load(store, "a", pd.Timestamp("2023-07-03T00:00Z"),
                           pd.Timestamp("2023-07-04T00:00Z"))
    # hours 0..5 only the old plan, 6..17 the new one wins; 23:00 outside both horizons
    assert s.to_dict() == {**{pd.Timestamp(f"2023-07-03T{h:02d}:00Z"): 10.0 for h in range(6)},
                           **{pd.Timestamp(f"2023-07-03T{h:02d}:00Z"): 20.0
                              for h in range(6, 18)}}


def test_a_site_without_history_falls_back_to_plan_uncommitted_with_a_note():
    import dataclasses
    from types import SimpleNamespace

    from carbonsched.errors import StoreUnavailableError
    from carbonsched.pipeline.daily import history_baselines

    site = dataclasses.replace(SiteWrapper("a").gpus("H100", 8).obj(), meta={
        "grid_agreement": GridAgreement("a", baseline_method="prior-days-mean",
                                        baseline_days=5)})
    other = SiteWrapper("b").gpus("H100", 8).obj()           # no agreement: never asked
    cat = SimpleNamespace(sites=[site, other])
    ev = GridEvent(site.id, EVENT.start, EVENT.end, target_fraction=0.25, id="ev1")
    ev_b = GridEvent("b", EVENT.start, EVENT.end, target_fraction=0.25, id="ev2")
    b, m, notes = history_baselines(cat, [ev, ev_b], None)
    assert (b, m) == ({}, {})
    assert [n for n in notes if f"grid events at {site.id}" in n and "prior-days-mean" in n
            and "plan-uncommitted" in n and "no recorded load" in n]

    def down(*_a):
        raise StoreUnavailableError("sqlite:///x", "reading plans", "gone", "start it")

    _b, _m, notes = history_baselines(cat, [ev], down)
    assert any("gone" in n and "plan-uncommitted" in n for n in notes)
    # enough history: the baseline and its method
    b, m, notes = history_baselines(cat, [ev], lambda *_a: load())
    assert [b[(site.id, h)] for h in ev.hours] == [100.0, 101.0, 102.0]
    assert m == {site.id: BaselineMethod.PRIOR_DAYS_MEAN}


def test_recorded_load_of_a_sub_hour_plan_is_the_hours_mean_and_old_plans_are_not_read(
        tmp_path):
    # a 15-minute plan: 10, 20, 30, 40 kW in the four slots of 03:00 -> 25 kW for the hour.
    # Before, each slot was taken as an hour of its own (03:15, 03:30, 03:45 keys). A plan
    # dated more than a week before the period cannot reach it: it is not read at all (at the
    # limit: 7 days before is read)
    from carbonsched.pipeline.flex import recorded_site_load
    from carbonsched.store import Store

    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    doc = _plan_doc("q", "2023-07-03", 0.0, [])
    doc["site_hours"] = [{"site": "a", "hour": f"2023-07-03T03:{m:02d}:00Z", "in_horizon": True,
                          "facility_power_kw": kw} for m, kw in ((0, 10.0), (15, 20.0),
                                                                 (30, 30.0), (45, 40.0))]
    store.save_plan(doc)
    s = recorded_site_load(store, "a", pd.Timestamp("2023-07-03T00:00Z"),
                           pd.Timestamp("2023-07-04T00:00Z"))
    assert s.to_dict() == {pd.Timestamp("2023-07-03T03:00Z"): 25.0}
    read: list[str] = []
    real = store.get_plan
    store.get_plan = lambda pid: (read.append(pid), real(pid))[1]
    store.save_plan(_plan_doc("week", "2023-07-03", 5.0, [0]))
    store.save_plan(_plan_doc("older", "2023-07-02", 5.0, [0]))
    recorded_site_load(store, "a", pd.Timestamp("2023-07-10T00:00Z"),
                       pd.Timestamp("2023-07-11T00:00Z"))
    assert sorted(read) == ["q", "week"]
