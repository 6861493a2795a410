"""A replayed plan (issue 33 item 5): a past day's real signals and work moved onto a later day,
with no look-ahead, stated in the document; refused where it cannot mean anything."""

from __future__ import annotations

import pandas as pd
import pytest

from carbonsched.catalog import load_catalog
from carbonsched.domain import InferenceDemand, Job, Workload
from carbonsched.errors import InputError, TimeAxisError
from carbonsched.pipeline.daily import forecast_site, run_daily_plan
from carbonsched.pipeline.replayed import (
    ReplayedSignals,
    ReplayShift,
    replay_sentence,
    shift_workload,
)

SOURCE = "2023-07-15"
UTC = "UTC"


def _job(jid: str, start: str, hours: int = 4) -> Job:
    t = pd.Timestamp(start, tz=UTC)
    return Job(jid, "london", "A100", 1, duration_hours=1, power_per_gpu_kw=0.8,
               earliest_start=t, deadline=t + pd.Timedelta(hours=hours))


def test_the_target_day_must_follow_the_source_day():
    with pytest.raises(InputError, match=r"--replay-from 2023-07-15 is not before the day "
                       r"planned \(2023-07-15\).*--replay-from an earlier day"):
        ReplayShift.between(SOURCE, SOURCE)
    with pytest.raises(InputError, match="not before the day planned"):
        ReplayShift.between(SOURCE, "2023-07-14")
    with pytest.raises(TimeAxisError, match="--replay-from: date '15/07/2023' is not "
                       "YYYY-MM-DD"):
        ReplayShift.between("15/07/2023", "2023-07-16")
    one = ReplayShift.between(SOURCE, "2023-07-16")         # the shortest replay: one day
    assert one.shift_days == 1 and one.shift == pd.Timedelta(days=1)
    far = ReplayShift.between(SOURCE, "2026-12-04")
    assert far.shift_days == 1238
    assert far.describe() == {"source_date": SOURCE, "target_date": "2026-12-04",
                              "shift_days": 1238}
    text = replay_sentence({**far.describe(), "underlying_signal_quality": "measured"})
    assert text.startswith("signals: REPLAYED - the real signals (measured) and work of Saturday "
                           "2023-07-15, moved 1238 days forward onto Friday 2026-12-04")


def test_the_workload_moves_with_the_signals_and_must_be_the_source_days():
    shift = ReplayShift.between(SOURCE, "2023-07-20")
    wl = Workload([_job("a", "2023-07-15T03:00Z"), _job("b", "2023-07-15T23:00Z", 30)],
                  [InferenceDemand("london", pd.Timestamp("2023-07-15T05:00Z"), "T4", 2, 20.0,
                                   0.14)])
    moved = shift_workload(wl, shift, 24, "jobs.json")
    assert [j.id for j in moved.jobs] == ["a", "b"]                     # ids kept
    assert moved.jobs[0].earliest_start == pd.Timestamp("2023-07-20T03:00Z")
    assert moved.jobs[1].deadline == pd.Timestamp("2023-07-22T05:00Z")
    assert moved.inference[0].hour == pd.Timestamp("2023-07-20T05:00Z")
    assert (moved.jobs[0].gpus, moved.jobs[0].duration_minutes) == (1, 60)
    # just at the limit: the only job released in the horizon's last hour
    last = Workload([_job("z", "2023-07-15T23:00Z")], [])
    assert shift_workload(last, shift, 24, "jobs.json").jobs[0].earliest_start == \
        pd.Timestamp("2023-07-20T23:00Z")
    # known bad: released at the horizon's end (the next day), i.e. built for another day
    late = Workload([_job("z", "2023-07-16T00:00Z")], [])
    with pytest.raises(InputError, match=r"jobs.json: no job starts and no inference hour lies "
                       r"on the replayed day 2023-07-15 \(its work begins 2023-07-16T00:00:00"
                       r".*workload from-traces --date 2023-07-15"):
        shift_workload(late, shift, 24, "jobs.json")
    # a workload of the target day (not moved yet) is the same mistake
    with pytest.raises(InputError, match="no job starts"):
        shift_workload(Workload([_job("t", "2023-07-20T02:00Z")], []), shift, 24, "jobs.json")


@pytest.mark.shared_data
def test_replayed_signals_are_the_source_days_moved_and_forecasts_never_see_them(shared_data):
    """The moved history equals the source history hour for hour, and the target day's forecast
    is the same when every observation from the source day's 00:00 on is wrecked: only the
    history before the (moved) issue time reaches it."""
    from carbonsched.adapters.signals import load_site_signals

    site = next(s for s in load_catalog("global").sites if s.id == "gb-london")
    shift = ReplayShift.between(SOURCE, "2026-12-04")
    issued = shift.target
    start, end = issued - pd.Timedelta(days=60), issued + pd.Timedelta(hours=24)
    moved, meta = ReplayedSignals(shift).load_site_signals(site, shared_data, start, end)
    src, _ = load_site_signals(site, shared_data, start - shift.shift, end - shift.shift)
    assert moved.index[0] >= start and moved.index[-1] < end
    hour = pd.Timestamp("2026-12-03T17:00Z")
    assert moved.at[hour, "carbon_intensity_g_per_kwh"] == \
        src.at[hour - shift.shift, "carbon_intensity_g_per_kwh"]
    assert meta["replay"] == shift.describe()

    def wrecked(site_, data_dir, a, b):
        frame, m = load_site_signals(site_, data_dir, a, b)
        frame = frame.copy()
        cols = frame.select_dtypes("number").columns
        frame.loc[frame.index >= shift.source, cols] = 9999.0
        return frame, m

    clean_fc = forecast_site(site, moved, issued, 24, meta, models={})
    bad, bad_meta = ReplayedSignals(shift, wrecked).load_site_signals(site, shared_data, start,
                                                                      end)
    assert (bad.loc[bad.index >= issued, "carbon_intensity_g_per_kwh"] == 9999.0).all()
    bad_fc = forecast_site(site, bad, issued, 24, bad_meta, models={})
    pd.testing.assert_frame_equal(clean_fc.signals, bad_fc.signals)
    assert clean_fc.signals.index[0] == issued
    assert clean_fc.signals["carbon_intensity_g_per_kwh"].between(10, 600).all()


def test_a_catalog_of_modelled_signals_is_not_replayed():
    with pytest.raises(InputError, match="catalog 'china-eastdata-westcompute' has modelled "
                       "signals, which plan any date: plan the day itself"):
        run_daily_plan("2026-12-04", replay_from=SOURCE)


@pytest.mark.shared_data
def test_a_source_day_the_data_does_not_cover_says_so(shared_data):
    with pytest.raises(InputError, match=r"no site has signals for 2026-12-04 \(replaying "
                       r"2019-01-01\); .*give --replay-from a day the data covers"):
        run_daily_plan("2026-12-04", "global", data_dir=shared_data, replay_from="2019-01-01")


@pytest.mark.shared_data
def test_run_daily_plan_replays_the_demo_day_onto_the_target_day(shared_data):
    daily = run_daily_plan("2026-12-04", "global", data_dir=shared_data, time_limit_s=60,
                           replay_from=SOURCE)
    doc = daily.document
    assert doc["date"] == "2026-12-04" and doc["signal_quality"] == "replayed"
    assert doc["replay"] == {"source_date": SOURCE, "target_date": "2026-12-04",
                             "shift_days": 1238, "underlying_signal_quality": "estimated"}
    assert doc["notes"][0] == replay_sentence(doc["replay"])
    assert doc["issued_at"] == "2026-12-04T00:00:00Z"
    assert doc["placements"]
    for p in doc["placements"]:
        assert "2026-12-04T00:00:00Z" <= p["start"] < "2026-12-05T00:00:00Z"
        assert p["deadline"] >= p["end"]
    # the work is the source day's demo day, moved: its ids name the source day
    assert all(j["job_id"].startswith("demo-20230715-") for j in doc["workload"]["jobs"])
    assert set(daily.forecasts["issued_at"]) == {pd.Timestamp("2026-12-04", tz=UTC)}


def test_plan_dispatch_refuses_a_replay_before_planning(private_store):
    from typer.testing import CliRunner

    from carbonsched.cli.app import app

    r = CliRunner().invoke(app, ["plan", "--catalog", "global", "--replay-from", SOURCE,
                                 "--dispatch"])
    assert r.exit_code == 2
    text = " ".join(r.output.split())
    assert ("--replay-from plans without --dispatch: plan the replayed day with `carbonsched "
            "plan --replay-from DAY`, then run `carbonsched dispatch`") in text
