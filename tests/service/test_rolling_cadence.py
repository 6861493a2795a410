"""A rolling service that runs every few hours (issue 36 item 3): runs keyed by issue time,
exactly once per issue time across replicas and a killed run, commit before the next run.

The replicas share a real PostgreSQL database (``pg_db``); the cron's "now" is a
:class:`~carbonsched.clock.ManualClock` that the test moves through a simulated day, and the
leases run on the database's own clock. The killed run is a real process killed with SIGKILL.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time as _time
from datetime import UTC, datetime, time, timedelta

import pandas as pd
import pytest
from pydantic import ValidationError

from carbonsched.clock import ManualClock
from carbonsched.config import Settings
from carbonsched.errors import TimeAxisError
from carbonsched.service.cron import DailyCron
from carbonsched.service.runs import RunOutcome
from carbonsched.store import Store
from carbonsched.store.service import LeaderLease, ServiceStore, run_key
from carbonsched.timeaxis import check_run_every_hours, latest_issue_time

DAY = datetime(2023, 7, 15, tzinfo=UTC)
STEP = timedelta(minutes=5)


class Recorder:
    """A pipeline that records the issue times it ran (the cron's tests' recorder)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.calls: list[datetime] = []

    def __call__(self, pdate: str, issued_at: datetime, trigger: str) -> RunOutcome:
        self.calls.append(issued_at)
        return RunOutcome("succeeded", f"plan-{self.name}-{issued_at:%H}", "optimal",
                          "dispatch: not configured")


# --- the cadence setting ---------------------------------------------------------------------
@pytest.mark.parametrize("hours", [1, 2, 3, 4, 6, 8, 12, 24])
def test_every_divisor_of_a_day_is_a_cadence(hours):
    assert check_run_every_hours(hours) == hours
    assert Settings(rolling=True, rolling_run_every_hours=hours).rolling_run_every_hours == hours


@pytest.mark.parametrize("hours,near", [(0, 1), (5, 4), (7, 6), (25, 24), (48, 24)])
def test_a_cadence_that_does_not_divide_a_day_is_refused_naming_the_setting(hours, near):
    with pytest.raises(TimeAxisError) as info:
        check_run_every_hours(hours)
    msg = str(info.value)
    assert msg.startswith(f"CARBONSCHED_ROLLING_RUN_EVERY_HOURS = {hours} h is not a rolling "
                          "cadence")
    assert "one of 1, 2, 3, 4, 6, 8, 12, 24" in msg and msg.endswith(f"e.g. {near}")
    with pytest.raises(ValidationError, match="is not a rolling cadence"):
        Settings(rolling=True, rolling_run_every_hours=hours)


def test_several_runs_a_day_need_the_rolling_horizon():
    with pytest.raises(ValidationError, match="set CARBONSCHED_ROLLING=true"):
        Settings(rolling_run_every_hours=12)
    assert Settings(rolling_run_every_hours=24).rolling_run_every_hours == 24


def test_issue_times_and_keys():
    assert latest_issue_time(DAY + timedelta(hours=5, minutes=59), 6) == pd.Timestamp(DAY)
    assert latest_issue_time(DAY + timedelta(hours=6), 6) == pd.Timestamp(DAY) + \
        pd.Timedelta(hours=6)
    assert latest_issue_time(DAY - timedelta(minutes=1), 8) == pd.Timestamp(DAY) - \
        pd.Timedelta(hours=8)
    assert run_key(DAY + timedelta(hours=6)) == "2023-07-15T06:00Z"
    assert run_key("2023-07-15") == "2023-07-15T00:00Z"         # a date: its daily run
    assert run_key("2023-07-15T08:00:00+02:00") == "2023-07-15T06:00Z"


# --- two replicas, one database, a day at a 6-hour cadence ----------------------------------
def _replica(url: str, name: str, clock: ManualClock, leader: bool) -> tuple[DailyCron, Recorder]:
    db = ServiceStore(Store(url))
    rec = Recorder(name)
    lease = LeaderLease(db.engine, name, 45.0) if leader else None
    cron = DailyCron(db, rec, clock, "Europe/Berlin", time(6, 0), leader=lease, replica=name,
                     lease_s=45.0, run_every_hours=6)
    return cron, rec


@pytest.mark.postgres
@pytest.mark.parametrize("leader", [True, False], ids=["leader-lease", "no-leader"])
def test_two_replicas_at_six_hours_run_each_issue_time_once(pg_db, leader):
    """Over a simulated day both replicas tick every 5 minutes (and at each issue time): 4
    runs, one per issue time, whoever ran them. Without a leader lease both claim each issue
    time and the key alone keeps it to one run."""
    clock = ManualClock(DAY - STEP)
    a, rec_a = _replica(pg_db, "a", clock, leader)
    b, rec_b = _replica(pg_db, "b", clock, leader)
    while clock.now() + STEP < DAY + timedelta(hours=24):   # 00:00, 00:05, ..., 23:55
        clock.advance(STEP)
        for cron in (a, b) if clock.now().minute % 10 else (b, a):
            cron.tick("check")
    runs = sorted(a.store.runs(), key=lambda r: r["run_key"])
    assert [r["run_key"] for r in runs] == [f"2023-07-15T{h:02d}:00Z" for h in (0, 6, 12, 18)]
    assert all(r["status"] == "succeeded" and r["attempts"] == 1 for r in runs)
    assert [r["planning_date"] for r in runs] == ["2023-07-15"] * 4
    assert sorted(rec_a.calls + rec_b.calls) == [DAY + timedelta(hours=h) for h in (0, 6, 12, 18)]
    if leader:   # one replica leads the whole day
        assert {len(rec_a.calls), len(rec_b.calls)} == {0, 4}
    for cron in (a, b):
        cron.store.engine.dispose()


_KILLED = r"""
import sys, time
from datetime import datetime, time as dtime
from carbonsched.clock import ManualClock
from carbonsched.service.cron import DailyCron
from carbonsched.store import Store
from carbonsched.store.service import ServiceStore

url, marker, now = sys.argv[1], sys.argv[2], datetime.fromisoformat(sys.argv[3])

def stuck(pdate, issued_at, trigger):
    open(marker, "w").write(issued_at.isoformat())
    time.sleep(600)   # killed here, mid-run

db = ServiceStore(Store(url))
DailyCron(db, stuck, ManualClock(now), "Europe/Berlin", dtime(6, 0), replica="doomed",
          lease_s=3.0, run_every_hours=6).tick("scheduled")
"""


@pytest.mark.postgres
def test_a_run_killed_mid_run_is_taken_over_once_not_repeated_not_lost(pg_db, tmp_path):
    """A replica is SIGKILLed while running the 06:00 run: the survivor takes that issue time
    over once its lease (3 s, database time) ran out, runs it once, and the next issue time is
    run as usual."""
    now = DAY + timedelta(hours=6, minutes=2)
    marker = tmp_path / "started"
    proc = subprocess.Popen([sys.executable, "-c", _KILLED, pg_db, str(marker), now.isoformat()],
                            env={**os.environ})
    try:
        deadline = _time.monotonic() + 180
        while not marker.exists() and _time.monotonic() < deadline and proc.poll() is None:
            _time.sleep(0.2)
        assert marker.read_text() == "2023-07-15T06:00:00+00:00"
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    clock = ManualClock(now)
    db = ServiceStore(Store(pg_db))
    row = db.get_run(DAY + timedelta(hours=6))
    assert (row["status"], row["replica"], row["attempts"]) == ("running", "doomed", 1)
    rec = Recorder("survivor")
    cron = DailyCron(db, rec, clock, "Europe/Berlin", time(6, 0), replica="survivor",
                     lease_s=3.0, run_every_hours=6)
    deadline = _time.monotonic() + 120      # the dead run's lease runs out 3 s after its beat
    while not rec.calls and _time.monotonic() < deadline:
        cron.tick("check")
        _time.sleep(0.5)
    assert rec.calls == [DAY + timedelta(hours=6)]
    row = db.get_run("2023-07-15T06:00Z")
    assert (row["status"], row["replica"], row["attempts"]) == ("succeeded", "survivor", 2)
    assert row["error"].startswith("taken over: the previous attempt (doomed) stopped "
                                   "renewing its lease")
    for _ in range(5):                       # not repeated
        cron.tick("check")
    clock.set(DAY + timedelta(hours=12))
    cron.tick("scheduled")                   # the next issue time: run once, as usual
    cron.tick("check")
    assert rec.calls == [DAY + timedelta(hours=6), DAY + timedelta(hours=12)]
    assert [r["run_key"] for r in db.runs()] == ["2023-07-15T12:00Z", "2023-07-15T06:00Z"]
    db.engine.dispose()


# --- the real rolling pipeline at a 6-hour cadence -------------------------------------------
CATALOG_JOBS = [
    # may start from 00:00, must end by 08:00: committed by the 00:00 run
    {"id": "morning", "gpu_type": "A100", "gpus": 2, "duration_hours": 3,
     "power_per_gpu_kw": 0.8125, "earliest_start": "2023-07-10T00:00:00Z",
     "deadline": "2023-07-10T08:00:00Z"},
    # arrives 18:00, may wait a day: placed after 06:00 by the first run, so re-planned
    {"id": "evening", "gpu_type": "A100", "gpus": 1, "duration_hours": 2,
     "power_per_gpu_kw": 0.8125, "earliest_start": "2023-07-10T18:00:00Z",
     "deadline": "2023-07-11T20:00:00Z"},
    # may start 07:00..10:00: only the 06:00 run commits it (its window is inside 06-12)
    {"id": "mid-morning", "gpu_type": "A100", "gpus": 1, "duration_hours": 1,
     "power_per_gpu_kw": 0.8125, "earliest_start": "2023-07-10T07:00:00Z",
     "deadline": "2023-07-10T11:00:00Z"},
]


@pytest.mark.shared_data
def test_the_rolling_pipeline_every_six_hours_plans_from_each_issue_time(tmp_path,
                                                                          shared_data):
    """Two runs of the real pipeline, 00:00 and 06:00 UTC: each plans from its own issue
    time, commits (and dispatches) only what starts before the next run, and the second
    starts warm from the first's plan, saying so in its notes."""
    from carbonsched.dispatch.outbox import dispatch_plan
    from tests.conftest import FIXTURES

    jobs = tmp_path / "jobs.json"
    jobs.write_text(json.dumps({"jobs": CATALOG_JOBS}))
    url = f"sqlite:///{tmp_path / 'cadence.sqlite'}"
    s = Settings(catalog=str(FIXTURES / "catalog" / "frankfurt.toml"), data_dir=shared_data,
                 database_url=url, workload_file=str(jobs), horizon_hours=24, rolling=True,
                 rolling_run_every_hours=6, time_limit_s=30.0)
    db = ServiceStore(Store(url))
    clock = ManualClock(datetime(2023, 7, 10, 0, 3, tzinfo=UTC))
    dispatched: list = []

    def dry_dispatch(store, plan_id, catalog, *, clock, commit_before):
        out = dispatch_plan(store, plan_id, catalog, dry_run=True, clock=clock,
                            commit_before=commit_before,
                            settings=Settings(slurm_conf_dir=None, kubeconfig=None),
                            placeholder=True)
        dispatched.append((commit_before, {o.job_id: o.action for o in out.outcomes}))
        return out.to_dict()

    cron = DailyCron.from_settings(s, db, clock, dispatch=dry_dispatch, replica="r")
    assert cron.run_every_hours == 6
    rec1 = cron.tick()
    assert cron.tick() is None                          # the same issue time: not again
    clock.set(datetime(2023, 7, 10, 6, 3, tzinfo=UTC))
    rec2 = cron.tick()
    assert [rec1["run_key"], rec2["run_key"]] == ["2023-07-10T00:00Z", "2023-07-10T06:00Z"]
    p1, p2 = (db.store.get_plan(r["plan_id"]) for r in (rec1, rec2))
    assert p2["issued_at"] == "2023-07-10T06:00:00Z" and p2["run"]["issued_at"].startswith(
        "2023-07-10T06:00")
    assert min(h["hour"] for h in p2["site_hours"]) == "2023-07-10T06:00:00Z"
    assert p1["rolling"]["commit_before"] == "2023-07-10T06:00:00Z"
    assert p2["rolling"]["commit_before"] == "2023-07-10T12:00:00Z"
    assert "morning" in p1["rolling"]["committed"]
    assert "mid-morning" in p2["rolling"]["committed"]
    # the evening job starts after 12:00 or is deferred past the horizon: still pending
    assert "evening" not in p2["rolling"]["committed"]
    assert "evening" in ({d["job_id"] for d in p2["rolling"]["deferred"]}
                         | {u["job_id"] for u in p2["rolling"]["still_pending"]})
    # dispatch commits only what starts before the next run
    assert dispatched[0][0] == datetime(2023, 7, 10, 6, tzinfo=UTC)
    assert dispatched[1][0] == datetime(2023, 7, 10, 12, tzinfo=UTC)
    assert dispatched[1][1]["mid-morning"] == "dry_run"
    assert dispatched[1][1].get("evening", "not_committed") == "not_committed"
    assert "morning" not in dispatched[1][1]       # committed by the first run: held
    # warm or cold, and why, in the notes of each run
    assert p1["rolling"]["warm_start"] == "cold: the first rolling run (no previous plan)"
    assert p2["rolling"]["warm_start"].startswith(
        "warm: started from the plan of the run issued at 2023-07-10T00:00Z, shifted by 6 h")
    assert f"warm start: {p2['rolling']['warm_start']}" in p2["notes"]
    db.store.engine.dispose()


@pytest.mark.parametrize("issued", ["2023-07-10T06:30:00Z", "2023-07-11T00:00:00Z",
                                    "2023-07-09T23:00:00Z"])
def test_an_issue_time_off_the_hour_or_the_date_is_refused(issued):
    from carbonsched.errors import InputError
    from carbonsched.pipeline.daily import run_daily_plan

    with pytest.raises(InputError, match=r"is not a whole hour of 2023-07-10 \(UTC\); a run "
                                         r"is issued on the hour, e\.g\. 2023-07-10T06:00:00Z"):
        run_daily_plan("2023-07-10", "global", None, None, "highs", 10.0, 24,
                       issued_at=pd.Timestamp(issued))
