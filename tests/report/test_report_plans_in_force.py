"""The report counts each hour and each job from the plan in force then.

A rolling service stores one plan per issue time, several a day; a daily plan may reach 48 h
or be re-run. Before, the report read only the newest plan of each date (a rolling day's
earlier runs, and the jobs they committed, were lost) and counted an inference hour once per
plan whose horizon held it. Fleet: ``tests/fixtures/report/two_markets.toml``; 0.5 kW per GPU.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from carbonsched.report import build_report
from carbonsched.report.build import PlansInForce
from carbonsched.report.flex import flexibility_section
from carbonsched.store import Store

from .builders import plan_doc

DAY = "2023-07-03"

pytestmark = pytest.mark.shared_data


@pytest.fixture(scope="module")
def fx(fixtures_dir):
    return fixtures_dir / "report"


def _run(issued: str, jobs, horizon: int = 24, inference_hours=(), knows=(), ended=()):
    """A rolling run of DAY issued at ``issued`` (HH) with jobs and 2 inference GPUs per hour."""
    doc = plan_doc(DAY, "two-markets", jobs)
    t = pd.Timestamp(f"{DAY}T{issued}:00:00Z")
    doc["issued_at"] = t.isoformat().replace("+00:00", "Z")
    doc["horizon_hours"] = horizon
    doc["inference"] = [{"area": "metro", "hour": (t + pd.Timedelta(hours=h)).isoformat(),
                         "site": "de-site", "gpu_type": "A100", "gpus": 2,
                         "energy_kwh": 0.0, "emissions_kg": 0.0}
                        for h in inference_hours]
    doc["workload"]["inference_power"] = [{"area": "metro", "gpu_type": "A100",
                                           "power_per_gpu_kw": 0.5}]
    doc["workload"]["jobs"] += [{"job_id": j, "tenant": "a", "kind": "batch",
                                 "gpu_type": "A100", "gpus": 4, "duration_hours": 1,
                                 "power_per_gpu_kw": 0.5} for j in knows]
    doc["rolling"] = {"horizon_hours": horizon, "run_every_hours": 12,
                      "committed": [], "deferred": [], "still_pending": [], "running_held": [],
                      "ended": [{"job_id": j, "reason": "Cancelled"} for j in ended]}
    return doc


def _store(tmp_path, docs):
    store = Store(f"sqlite:///{tmp_path}/s.db")
    for d in docs:            # stored in this order: the list's last is the newest
        store.save_plan(d)
    return store


def test_a_rolling_days_runs_each_count_the_work_they_committed(fx, shared_data, tmp_path):
    # run 00:00 commits J (02:00-05:00, 4 GPUs) and places P at 15:00 (pending); run 12:00
    # re-places P at 16:00-18:00. Inference: 2 GPUs every hour of each run's 24 h horizon.
    # Before, only run 12:00 was read: J was lost and hours 00..11 had no inference
    r0 = _run("00", [("J", "a", "de-site", f"{DAY}T02:00:00Z", f"{DAY}T05:00:00Z", 4, 0.5),
                     ("P", "a", "de-site", f"{DAY}T15:00:00Z", f"{DAY}T17:00:00Z", 4, 0.5)],
              inference_hours=range(24))
    r12 = _run("12", [("P", "a", "de-site", f"{DAY}T16:00:00Z", f"{DAY}T18:00:00Z", 4, 0.5)],
               inference_hours=range(24))
    rep = build_report(_store(tmp_path, [r0, r12]), fx / "two_markets.toml", shared_data,
                       DAY, DAY)
    jobs = rep.frames["jobs"].set_index("job_id")
    assert jobs.loc["J", "plan_id"] == r0["plan_id"]
    assert (jobs.loc["P", "plan_id"], jobs.loc["P", "start"]) == (r12["plan_id"],
                                                                  f"{DAY}T16:00:00Z")
    inference = jobs.loc[[f"inference:metro:{DAY}"]].set_index("plan_id")["it_energy_kwh"]
    # 24 hours of the day, each once: 12 from each run, 2 GPUs x 0.5 kW
    assert inference.to_dict() == pytest.approx({r0["plan_id"]: 12 * 2 * 0.5,
                                                 r12["plan_id"]: 12 * 2 * 0.5})
    # J 3 h + P 2 h at 4 GPUs, + inference
    assert rep.totals["it_energy_kwh"] == pytest.approx(0.5 * 4 * (3 + 2) + 24 * 2 * 0.5)


def test_an_inference_hour_two_days_plans_hold_is_counted_once(fx, shared_data):
    # day 1's 48 h plan holds inference for day 2 too; day 2's plan is in force there.
    # At the limit: day 2's hour 23 is held by day 2 only (day 1's horizon ends at its 00:00)
    d1 = _run("00", [], horizon=48, inference_hours=range(48))
    d2 = plan_doc("2023-07-04", "two-markets", [])
    d2.update(issued_at="2023-07-04T00:00:00Z", horizon_hours=24,
              inference=[{"area": "metro", "hour": f"2023-07-04T{h:02d}:00:00Z",
                          "site": "de-site", "gpu_type": "A100", "gpus": 3,
                          "energy_kwh": 0.0, "emissions_kg": 0.0}
                         for h in range(24)])
    d2["workload"]["inference_power"] = [{"area": "metro", "gpu_type": "A100",
                                          "power_per_gpu_kw": 0.5}]
    rep = build_report(None, fx / "two_markets.toml", shared_data, "2023-07-04", "2023-07-04",
                       plans=[d1, d2])
    # before: 24 h x (2 + 3) GPUs; now day 2's own 3 GPUs in each of its hours
    assert rep.totals["it_energy_kwh"] == pytest.approx(24 * 3 * 0.5)


@pytest.mark.parametrize(("knows", "ended", "counted"), [
    (("P",), (), False),   # the later run re-planned P and left it unplaced: it did not run
    ((), ("P",), False),   # ... or ended it (cancelled): it did not run
    ((), (), True),        # a later plan that never heard of P does not replace its placement
])
def test_a_job_re_planned_away_before_its_start_is_not_counted(fx, shared_data, knows, ended,
                                                               counted):
    r0 = _run("00", [("P", "a", "de-site", f"{DAY}T15:00:00Z", f"{DAY}T17:00:00Z", 4, 0.5),
                     ("K", "a", "de-site", f"{DAY}T01:00:00Z", f"{DAY}T02:00:00Z", 2, 0.5)])
    r12 = _run("12", [], knows=knows, ended=ended)
    rep = build_report(None, fx / "two_markets.toml", shared_data, DAY, DAY, plans=[r0, r12])
    jobs = set(rep.frames["jobs"]["job_id"])
    assert ("P" in jobs) is counted and "K" in jobs
    said = [n for n in rep.metadata["notes"] if "re-planned away" in n]
    assert said == ([] if counted else [
        "1 job(s) re-planned away before they started (a later plan in force at their "
        "planned start did not run them then) not counted: P"])


def test_a_job_placed_at_the_next_runs_issue_hour_belongs_to_the_next_run(fx, shared_data):
    # at the limit: P starts at 12:00, the hour run 12:00 is issued, which knows P and leaves
    # it unplaced: not counted; a start at 11:00 is in run 00:00's force: counted from it
    for start, counted in (("12", False), ("11", True)):
        r0 = _run("00", [("P", "a", "de-site", f"{DAY}T{start}:00:00Z",
                          f"{DAY}T{int(start) + 1}:00:00Z", 4, 0.5),
                         ("K", "a", "de-site", f"{DAY}T01:00:00Z", f"{DAY}T02:00:00Z", 2, 0.5)])
        r12 = _run("12", [], knows=("P",))
        rep = build_report(None, fx / "two_markets.toml", shared_data, DAY, DAY,
                           plans=[r0, r12])
        jobs = rep.frames["jobs"].set_index("job_id")
        assert ("P" in jobs.index) is counted
        if counted:
            assert jobs.loc["P", "start"] == f"{DAY}T11:00:00Z"


def test_a_re_run_of_the_days_plan_replaces_the_first(fx, shared_data, tmp_path):
    # same issue time: the plan stored last is in force at every hour; the first run's job
    # the re-run re-placed counts from the re-run
    a = _run("00", [("J", "a", "de-site", f"{DAY}T02:00:00Z", f"{DAY}T03:00:00Z", 4, 0.5)],
             inference_hours=range(24))
    b = _run("00", [("J", "a", "gb-site", f"{DAY}T04:00:00Z", f"{DAY}T05:00:00Z", 4, 0.5)],
             inference_hours=range(24))
    rep = build_report(_store(tmp_path, [a, b]), fx / "two_markets.toml", shared_data, DAY, DAY)
    jobs = rep.frames["jobs"].set_index("job_id")
    assert (jobs.loc["J", "plan_id"], jobs.loc["J", "site"]) == (b["plan_id"], "gb-site")
    inference = jobs.loc[[f"inference:metro:{DAY}"]]
    assert inference["plan_id"].tolist() == [b["plan_id"]]
    assert inference["it_energy_kwh"].sum() == pytest.approx(24 * 2 * 0.5)


def test_plans_in_force_rank_by_issue_time_then_order_stored():
    a, b, c = _run("12", []), _run("00", [], horizon=48), _run("12", [])
    force = PlansInForce.of([a, b, c])
    t = pd.Timestamp(f"{DAY}T00:00Z")
    assert force.hour[t] == b["plan_id"]
    assert force.hour[t + pd.Timedelta(hours=12)] == c["plan_id"]          # c stored after a
    assert force.hour[t + pd.Timedelta(hours=35)] == c["plan_id"]          # c's last hour
    assert force.hour[t + pd.Timedelta(hours=36)] == b["plan_id"]          # b's 48 h reach on
    assert t + pd.Timedelta(hours=48) not in force.hour
    assert [d["plan_id"] for d in force.newest_of_each_date([a, b, c])] == [c["plan_id"]]


def test_the_flexibility_band_and_an_event_are_counted_once_across_overlapping_plans():
    # two runs state the band of hour 13 and the same event; the run in force counts
    def with_flex(doc, kw):
        doc["site_hours"] = [{"site": "de-site", "hour": f"{DAY}T13:00:00Z", "in_horizon": True,
                              "flex_facility_kw": kw}]
        doc["flexibility"] = {"extra_emissions_kg": kw, "hours": [], "events": [{
            "event_id": "E1", "site": "de-site", "start": f"{DAY}T13:00:00Z",
            "end": f"{DAY}T14:00:00Z", "shortfall_kwh": 0.0, "committed_kwh": kw}]}
        return doc

    r0, r12 = with_flex(_run("00", []), 100.0), with_flex(_run("12", []), 40.0)
    t0, t1 = pd.Timestamp(f"{DAY}T00:00Z"), pd.Timestamp(f"{DAY}T00:00Z") + pd.Timedelta(days=1)
    frames, totals, _ = flexibility_section([r0, r12], t0, t1, PlansInForce.of([r0, r12]).hour)
    assert totals["flex_band_mwh"] == pytest.approx(0.040)
    assert frames["flex_events"]["plan_id"].tolist() == [r12["plan_id"]]
    assert totals["flex_extra_emissions_kg"] == pytest.approx(40.0)
    # without the plans in force (every plan's own hours): both, as before
    _, both, _ = flexibility_section([r0, r12], t0, t1)
    assert both["flex_band_mwh"] == pytest.approx(0.140)
    # an event outside the period (at the limit: starting at its end) is not the period's
    r12["flexibility"]["events"].append({
        "event_id": "E2", "site": "de-site", "start": t1.isoformat(),
        "end": (t1 + pd.Timedelta(hours=1)).isoformat(), "shortfall_kwh": 0.0,
        "committed_kwh": 1.0})
    r12["flexibility"]["hours"].append({
        "event_id": "E2", "site": "de-site", "hour": t1.isoformat(), "committed_kw": 9.0,
        "target_kw": 9.0, "delivered_kw": 0.0, "shortfall_kw": 9.0})
    frames, totals, _ = flexibility_section([r0, r12], t0, t1,
                                            PlansInForce.of([r0, r12]).hour)
    assert frames["flex_events"]["event_id"].tolist() == ["E1"]
    # nor are its hours: before, they were kept, counted in the offered and shortfall MWh
    assert frames["flex_hours"].empty and totals["flex_offered_mwh"] == 0.0


def test_the_plans_own_estimate_counts_the_work_counted_inside_the_period(fx, shared_data):
    # day 2's plan: J2 estimated at 4 kg; day 1's (the report's lookback) at 10 kg for J1 on
    # day 1 and 8 kg for JC, 22:00-02:00, half of it inside day 2. Before, the estimate was
    # every plan's whole total: 4 + (10 + 8) = 22 kg
    d1 = plan_doc("2023-07-02", "two-markets", [
        ("J1", "a", "de-site", "2023-07-02T10:00:00Z", "2023-07-02T12:00:00Z", 4, 0.5),
        ("JC", "a", "de-site", "2023-07-02T22:00:00Z", "2023-07-03T02:00:00Z", 4, 0.5)])
    d2 = plan_doc(DAY, "two-markets", [
        ("J2", "a", "de-site", f"{DAY}T12:00:00Z", f"{DAY}T14:00:00Z", 4, 0.5)])
    for doc, kgs in ((d1, (10.0, 8.0)), (d2, (4.0,))):
        for p, kg in zip(doc["placements"], kgs, strict=True):
            p["emissions_kg"] = kg
        doc["totals"]["emissions_kg"] = sum(kgs)
    rep = build_report(None, fx / "two_markets.toml", shared_data, DAY, DAY, plans=[d1, d2])
    assert rep.totals["plan_estimate_kg"] == pytest.approx(4.0 + 8.0 * 2 / 4)


def test_forecast_surplus_is_absorbed_once_per_site_hour_across_plans(fx, shared_data,
                                                                      tmp_path):
    # hour 13 at de-site (10 kW of surplus at most; forecast index 0.25: 2.5 kW, PUE 1.0):
    # J from run 00:00 (4 GPUs x 0.5 kW = 2 kWh) and inference from run 12:00 (2 GPUs: 1 kWh).
    # Absorbed min(2.5, 2 + 1) = 2.5 kWh; before, each plan's min: 2 + 1 = 3 kWh
    cat = tmp_path / "two_markets.toml"
    cat.write_text((fx / "two_markets.toml").read_text().replace(
        "green_surplus_max_kw = 0.0", "green_surplus_max_kw = 10.0", 1))
    r0 = _run("00", [("J", "a", "de-site", f"{DAY}T13:00:00Z", f"{DAY}T14:00:00Z", 4, 0.5)])
    r12 = _run("12", [], inference_hours=[1])
    store = Store(f"sqlite:///{tmp_path}/s.db")
    for doc in (r0, r12):
        issued = pd.Timestamp(doc["issued_at"])
        ts = pd.date_range(issued, periods=24, freq="h")
        store.save_plan(doc, pd.DataFrame([
            {"site": "de-site", "signal": sig, "model": "test", "issued_at": issued, "ts": t,
             "mean": v, "lo_80": v, "hi_80": v, "lo_95": v, "hi_95": v}
            for sig, v in (("green_surplus_index", 0.25), ("pue", 1.0)) for t in ts]))
    rep = build_report(store, cat, shared_data, DAY, DAY)
    assert rep.totals["surplus_absorbed_mwh"] == pytest.approx(2.5 / 1000.0)


def test_a_re_run_drops_a_job_it_no_longer_holds_a_later_issue_does_not(fx, shared_data):
    # J (02:00) is in run A only. A re-run of the same issue time without J replaces A: J is
    # not counted; a run issued at 01:00 that never heard of J leaves A's placement live
    a = _run("00", [("J", "a", "de-site", f"{DAY}T02:00:00Z", f"{DAY}T03:00:00Z", 4, 0.5),
                    ("K", "a", "de-site", f"{DAY}T00:00:00Z", f"{DAY}T01:00:00Z", 2, 0.5)])
    for issued, counted in (("00", False), ("01", True)):
        b = _run(issued, [("K", "a", "de-site", f"{DAY}T00:00:00Z", f"{DAY}T01:00:00Z", 2,
                           0.5)] if issued == "00" else [])
        rep = build_report(None, fx / "two_markets.toml", shared_data, DAY, DAY, plans=[a, b])
        assert ("J" in set(rep.frames["jobs"]["job_id"])) is counted


@pytest.mark.parametrize(("drop", "said"), [
    (None, None),                                             # every hour known: no note
    ("hour", "de-site 1 h without data"),                     # at the limit: one hour
    ("all", "de-site 24 h: its data has no green-surplus index, price or renewable share"),
])
def test_an_unknown_actual_surplus_is_named_not_silently_zero(fx, shared_data, tmp_path,
                                                              monkeypatch, drop, said):
    import carbonsched.report.build as build

    real = build.load_site_signals

    def load(site, data_dir, t0, t1):
        frame, meta = real(site, data_dir, t0, t1)
        cols = [c for c in ("green_surplus_index", "price_usd_per_mwh", "renewable_pct")
                if c in frame]
        if drop == "all":
            frame = frame.drop(columns=cols)
        elif drop == "hour":
            frame.loc[pd.Timestamp(f"{DAY}T05:00Z"), cols] = np.nan
        return frame, meta

    monkeypatch.setattr(build, "load_site_signals", load)
    cat = tmp_path / "two_markets.toml"
    cat.write_text((fx / "two_markets.toml").read_text().replace(
        "green_surplus_max_kw = 0.0", "green_surplus_max_kw = 10.0", 1))
    r0 = _run("00", [("J", "a", "de-site", f"{DAY}T02:00:00Z", f"{DAY}T05:00:00Z", 4, 0.5)])
    rep = build_report(None, cat, shared_data, DAY, DAY, plans=[r0])
    notes = [n for n in rep.metadata["notes"] if n.startswith("actual green surplus unknown")]
    assert notes == ([] if said is None else [
        "actual green surplus unknown, counted as none (the surplus that occurred and the "
        f"plans' actual-signal figure are lower bounds there): {said}"])


@pytest.mark.parametrize("n_notes", [0, 1, 5, 6])
def test_the_signal_readers_notes_reach_the_report(fx, shared_data, monkeypatch, n_notes):
    # before, the report read each site's actual signals and dropped what the reader noted of
    # them (missing hours, quarantined rows, clock checks): a plan said it, the report did not.
    # At the limit: five notes are listed whole, a sixth is counted; a price note is not ours
    import carbonsched.report.build as build

    real = build.load_site_signals

    def load(site, data_dir, t0, t1):
        frame, meta = real(site, data_dir, t0, t1)
        said = [f"{k + 1} hour(s) of carbon intensity quarantined" for k in range(n_notes)]
        return frame, {**meta, "notes": [*said, "no price file X.csv: price NaN for 2023"]}

    monkeypatch.setattr(build, "load_site_signals", load)
    r0 = _run("00", [("J", "a", "de-site", f"{DAY}T02:00:00Z", f"{DAY}T05:00:00Z", 4, 0.5)])
    rep = build_report(None, fx / "two_markets.toml", shared_data, DAY, DAY, plans=[r0])
    notes = [n for n in rep.metadata["notes"] if n.startswith("actual signals of")]
    if n_notes == 0:
        assert notes == []
        return
    listed = "; ".join(f"{k + 1} hour(s) of carbon intensity quarantined"
                       for k in range(min(n_notes, 5)))
    more = "; and 1 more" if n_notes == 6 else ""
    start = (pd.Timestamp(DAY) - pd.Timedelta(days=build.HISTORY_DAYS)).date()
    assert notes == [f"actual signals of de-site (electricitymaps, read {start} .. {DAY}: the "
                     f"period and the {build.HISTORY_DAYS} days before it, the green-surplus "
                     f"reference): {listed}{more}"]
