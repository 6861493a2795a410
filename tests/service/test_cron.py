"""The daily cron driven by one controllable clock: DST in the catalog's zone, downtime, failure.

The clock moves in the safety-net steps (5 min) and stops at every fire time of the real
APScheduler ``CronTrigger`` in between, calling ``tick`` as the scheduler would; the pipeline is
a recorder, so the test counts runs per local calendar day.
"""

from __future__ import annotations

import re
import time as _time
from collections import Counter
from datetime import UTC, date, datetime, time, timedelta
from types import SimpleNamespace
from zoneinfo import ZoneInfo

import pytest

from carbonsched.api.routes.runs import list_runs
from carbonsched.catalog import load_catalog
from carbonsched.clock import FixedClock, ManualClock
from carbonsched.config import Settings
from carbonsched.errors import InputError
from carbonsched.service import cron as cron_module
from carbonsched.service.cron import DailyCron, catalog_timezone, due_day
from carbonsched.service.runs import RunOutcome
from carbonsched.store import Store
from carbonsched.store.service import LeaderLease, ServiceStore

ZONE_NAME = catalog_timezone(load_catalog("global"))
ZONE = ZoneInfo(ZONE_NAME)
STEP = timedelta(minutes=5)


class Recorder:
    def __init__(self, clock, fail_on: set[str] = frozenset()) -> None:
        self.clock = clock
        self.calls: list[tuple[str, datetime, str]] = []
        self.fail_on = fail_on

    def __call__(self, pdate: str, issued_at: datetime, trigger: str) -> RunOutcome:
        self.calls.append((pdate, self.clock.now(), trigger))
        if pdate in self.fail_on:
            raise RuntimeError("solver exploded")
        return RunOutcome("succeeded", f"plan-{pdate}", "optimal", "dispatch: not configured")


@pytest.fixture
def db(tmp_path) -> ServiceStore:
    """A store whose leases follow the test's clock (``db.lease_clock = clock.now``)."""
    store = ServiceStore(Store(f"sqlite:///{tmp_path / 'cron.sqlite'}"))
    store.lease_clock = LeaseClock()
    return store


class LeaseClock:
    """The lease clock of :func:`db`: follows the clock given to ``make`` (set there)."""

    def __init__(self) -> None:
        self.clock = None

    def __call__(self) -> datetime:
        return self.clock.now() if self.clock is not None else datetime.now(UTC)


def make(db, clock, at=time(2, 30), rec=None, **kw) -> tuple[DailyCron, Recorder]:
    rec = rec or Recorder(clock)
    db.lease_clock.clock = clock
    cron = DailyCron(db, rec, clock, ZONE_NAME, at, offset_days=1,
                     leader=LeaderLease(db.engine, "test", 45.0, lease_clock=db.lease_clock),
                     replica="test", **kw)
    return cron, rec


def drive(cron: DailyCron, clock: ManualClock, until: datetime) -> None:
    """Move the clock to ``until`` in safety-net steps, firing the real CronTrigger too."""
    daily = cron.triggers()[0]
    prev = None
    while clock.now() < until:
        now = clock.now()
        fire = daily.get_next_fire_time(prev, now)
        nxt = min(now + STEP, until)
        if fire is not None and fire <= nxt:
            clock.set(fire)
            prev = fire
            cron.tick("scheduled")
            if fire == nxt:
                continue
        clock.set(nxt)
        cron.tick("check")


def local_days(calls) -> Counter:
    return Counter(t.astimezone(ZONE).date() if t.astimezone(ZONE).time() >= time(2, 30)
                   else t.astimezone(ZONE).date() - timedelta(days=1) for _, t, _ in calls)


def test_the_catalog_zone_has_dst():
    assert ZONE_NAME == "America/New_York"
    assert ZONE.utcoffset(datetime(2023, 1, 1)) != ZONE.utcoffset(datetime(2023, 7, 1))


@pytest.mark.parametrize("start, change", [
    # spring forward: 2023-03-12 02:00 -> 03:00, so 02:30 does not exist that day
    (datetime(2023, 3, 10, 12, tzinfo=ZONE), date(2023, 3, 12)),
    # fall back: 2023-11-05 02:00 -> 01:00, so 01:00-02:00 happens twice
    (datetime(2023, 11, 3, 12, tzinfo=ZONE), date(2023, 11, 5)),
])
@pytest.mark.parametrize("at", [time(2, 30), time(1, 30)])
def test_one_run_per_local_day_across_dst(db, start, change, at):
    clock = ManualClock(start)
    cron, rec = make(db, clock, at=at)
    cron.tick("startup")   # the day before start (12:00 > run time): runs once now
    drive(cron, clock, start + timedelta(days=4))
    planning = Counter(p for p, _, _ in rec.calls)
    assert all(v == 1 for v in planning.values()), planning
    # local days run: the start day (its run time has passed) .. start + 4 days, each once,
    # each planning the next day
    first = start.date()
    want = {(first + timedelta(days=k + 1)).isoformat() for k in range(5)}
    assert set(planning) == want
    assert len(rec.calls) == 5
    # GET /v1/runs' next due run (DailyCron.next_due), asked one second before each run, is
    # that run, across the change too
    for p, t, _ in rec.calls[1:]:
        assert cron.next_due(t - timedelta(seconds=1))[1:] == (
            date.fromisoformat(p), datetime.fromisoformat(p).replace(tzinfo=UTC))
    by_pdate = {p: t for p, t, _ in rec.calls}
    run_on_change = by_pdate[(change + timedelta(days=1)).isoformat()].astimezone(ZONE)
    assert run_on_change.date() == change
    wall = run_on_change.time().replace(tzinfo=None, fold=0)
    if change.month == 3 and at == time(2, 30):
        # the skipped wall time: runs at the first moment after it, 03:00 EDT
        assert wall == time(3, 0)
    else:
        assert wall == at
    # the record says which local day and planning date
    rec_row = db.get_run((change + timedelta(days=1)).isoformat())
    assert rec_row["local_day"] == change.isoformat() and rec_row["status"] == "succeeded"
    assert rec_row["dispatch"] == "dispatch: not configured"


def test_fall_back_repeated_hour_does_not_run_twice(db):
    # 01:30 happens at 05:30Z (EDT) and again at 06:30Z (EST) on 2023-11-05
    clock = ManualClock(datetime(2023, 11, 5, 5, 0, tzinfo=UTC))
    cron, rec = make(db, clock, at=time(1, 30))
    db.claim_run("2023-11-05", "2023-11-04", datetime(2023, 11, 5, tzinfo=UTC), "seed", "x",
                 clock.now(), timedelta(hours=3))
    db.finish_run("2023-11-05", clock.now(), "succeeded")
    for minute in range(0, 180, 5):
        clock.set(datetime(2023, 11, 5, 5, 0, tzinfo=UTC) + timedelta(minutes=minute))
        cron.tick()
    assert [(p, t.isoformat()) for p, t, _ in rec.calls] == [
        ("2023-11-06", "2023-11-05T05:30:00+00:00")]


def test_restart_after_downtime_runs_the_missed_day_once(db):
    start = datetime(2023, 6, 1, 12, tzinfo=ZONE)
    clock = ManualClock(start)
    cron, rec = make(db, clock)
    drive(cron, clock, start + timedelta(days=1))
    # the first check runs 06-01's due run; 06-02 02:30 runs the next
    assert [(p, tr) for p, _, tr in rec.calls] == [("2023-06-02", "check"),
                                                   ("2023-06-03", "scheduled")]
    cron.shutdown()
    # down for three and a half days; a new process starts with the same store
    clock.set(start + timedelta(days=4, hours=6))
    cron2, rec2 = make(db, clock)
    cron2.tick("startup")
    assert [(p, tr) for p, _, tr in rec2.calls] == [("2023-06-06", "startup")]
    drive(cron2, clock, start + timedelta(days=5, hours=6))
    assert [p for p, _, _ in rec2.calls] == ["2023-06-06", "2023-06-07"]
    # nothing in between was made up: 06-04 and 06-05 were missed while down
    assert db.get_run("2023-06-04") is None and db.get_run("2023-06-05") is None
    assert local_days(rec.calls + rec2.calls) == Counter(
        {date(2023, 6, 1): 1, date(2023, 6, 2): 1, date(2023, 6, 5): 1, date(2023, 6, 6): 1})


def test_a_failed_run_is_recorded_with_its_error_and_not_repeated(db):
    clock = ManualClock(datetime(2023, 6, 1, 12, tzinfo=ZONE))
    rec = Recorder(clock, fail_on={"2023-06-02"})
    cron, _ = make(db, clock, rec=rec)
    cron.tick("startup")
    cron.tick("check")
    row = db.get_run("2023-06-02")
    assert row["status"] == "failed" and "RuntimeError: solver exploded" in row["error"]
    assert len(rec.calls) == 1


def test_a_running_record_whose_lease_ran_out_is_taken_over_once(db):
    clock = ManualClock(datetime(2023, 6, 1, 12, tzinfo=ZONE))
    issued = datetime(2023, 6, 2, tzinfo=UTC)
    cron, rec = make(db, clock, lease_s=45)
    assert db.claim_run("2023-06-02", "2023-06-01", issued, "scheduled", "dead-replica",
                        clock.now(), timedelta(seconds=45))
    clock.advance(timedelta(seconds=44))
    cron.tick()
    assert rec.calls == []   # within its lease: its owner may be running it
    clock.advance(timedelta(seconds=2))
    cron.tick()
    assert len(rec.calls) == 1
    row = db.get_run("2023-06-02")
    assert row["attempts"] == 2 and row["status"] == "succeeded" and row["replica"] == "test"
    assert row["error"].startswith("taken over: the previous attempt (dead-replica) stopped "
                                   "renewing its lease (last heartbeat 2023-06-01T")
    assert row["lease_expires_at"] is None      # finished: no lease left


def test_due_day_rule():
    at = time(6, 0)
    z = ZoneInfo("Asia/Shanghai")
    # 22:00Z is 06:00 the next day in Shanghai (UTC+8)
    assert due_day(datetime(2023, 7, 14, 22, 0, tzinfo=UTC), z, at) == date(2023, 7, 15)
    assert due_day(datetime(2023, 7, 14, 21, 59, tzinfo=UTC), z, at) == date(2023, 7, 14)


def test_apscheduler_wiring_runs_once_with_a_pinned_clock(db):
    clock = FixedClock(datetime(2023, 6, 1, 12, tzinfo=ZONE))
    cron, rec = make(db, clock, check_interval_s=0.2)
    cron.start()
    try:
        deadline = _time.monotonic() + 10
        while not rec.calls and _time.monotonic() < deadline:
            _time.sleep(0.05)
        _time.sleep(1.0)   # several safety-net ticks later
    finally:
        cron.shutdown()
    # exactly one run, by the start-up job or the first safety-net check, whichever came first
    assert [p for p, _, _ in rec.calls] == ["2023-06-02"]
    assert rec.calls[0][2] in ("startup", "check")


def test_submitted_jobs_join_the_next_plan_and_take_its_outcome(db):
    import json

    import pandas as pd

    from carbonsched.domain import Workload
    from carbonsched.service.runs import (
        end_expired_jobs,
        expired_submitted_jobs,
        update_submitted,
        with_submitted_jobs,
    )

    now = datetime(2023, 7, 15, 23, tzinfo=UTC)

    def spec(jid, es, dl):
        return {"id": jid, "tenant": "t", "gpu_type": "A100", "gpus": 2, "duration_hours": 2,
                "power_per_gpu_kw": 0.5, "earliest_start": es, "deadline": dl,
                "allowed_sites": [], "kind": "batch"}

    rows = [("in", "2023-07-16T02:00:00+08:00", "2023-07-16T12:00:00Z", "Pending"),
            ("gone", "2023-07-14T00:00:00Z", "2023-07-15T00:00:00Z", "Pending"),
            ("later", "2023-07-18T00:00:00Z", "2023-07-18T12:00:00Z", "Pending"),
            ("done", "2023-07-16T00:00:00Z", "2023-07-16T12:00:00Z", "Succeeded")]
    db.add_jobs([{"job_id": j, "tenant": "t", "spec_json": json.dumps(spec(j, es, dl)),
                  "state": st, "reason": "AwaitingPlan", "detail": "", "submitted_at": now,
                  "updated_at": now, "reserved": False} for j, es, dl, st in rows])
    wl, ids = with_submitted_jobs(Workload([], []), db,
                                   pd.Timestamp("2023-07-16T00:00:00Z"), 24)
    assert ids == {"in"} and [j.id for j in wl.jobs] == ["in"]
    assert wl.jobs[0].earliest_start == pd.Timestamp("2023-07-15T18:00:00Z")
    doc = {"plan_id": "p2", "placements": [{"job_id": "in", "site": "s1",
                                            "start": "2023-07-16T03:00:00Z",
                                            "end": "2023-07-16T05:00:00Z",
                                            "energy_kwh": 2.4, "emissions_kg": 0.3}],
           "unplaced": []}
    update_submitted(db, doc, ids, now)
    j = db.get_job("in")
    assert (j["state"], j["plan_id"], j["site"], j["emissions_kg"]) == ("Planned", "p2", "s1",
                                                                        0.3)
    doc2 = {"plan_id": "p3", "placements": [],
            "unplaced": [{"job_id": "in", "reason": "InsufficientCapacity", "detail": "full"}]}
    update_submitted(db, doc2, ids, now)
    j = db.get_job("in")
    assert (j["state"], j["reason"], j["site"]) == ("Pending", "InsufficientCapacity", None)
    # "gone" (deadline 2023-07-15 00:00, 2 h) can never run: it ends, where before it stayed
    # Pending/AwaitingPlan for ever; "in" and "later" do not. The rule is the rolling
    # planner's: its latest start (22:00) is before the run. At the limit: a run issued at
    # 22:01 ends it, one at 22:00 (it could still start then) does not. Before, a daily run
    # waited for the deadline itself, planning it (NoFeasibleSlot) in between
    t = pd.Timestamp("2023-07-16T00:00:00Z")
    expired = expired_submitted_jobs(db, t)
    assert [x.id for x in expired] == ["gone"]
    assert [x.id for x in expired_submitted_jobs(db, pd.Timestamp("2023-07-14T22:01Z"))] == \
        ["gone"]
    assert [x.id for x in expired_submitted_jobs(db, pd.Timestamp("2023-07-14T22:00Z"))] == []
    assert with_submitted_jobs(Workload([], []), db, pd.Timestamp("2023-07-14T22:01Z"),
                               24)[1] == {"in"}
    assert end_expired_jobs(db, expired, t, now) == ["gone"]
    g = db.get_job("gone")
    assert (g["state"], g["reason"]) == ("Failed", "DeadlinePassed")
    assert g["detail"] == ("it cannot finish by its deadline 2023-07-15T00:00:00+00:00: its "
                           "latest start 2023-07-14T22:00:00+00:00 is before the run issued "
                           "at 2023-07-16T00:00:00+00:00")
    assert [db.get_job(x)["state"] for x in ("in", "later", "done")] == \
        ["Pending", "Pending", "Succeeded"]
    # a job no longer pending when the run records is left as it is
    assert end_expired_jobs(db, expired, t, now) == []


def test_a_failed_run_whose_record_cannot_be_read_is_no_traceback(db, caplog):
    # the run failed (recorded by claim_and_run) and the database then stopped answering:
    # the tick's read of the record raised into the scheduler (a traceback in its log). Now
    # the tick says so and returns; the next check retries
    from carbonsched.errors import StoreUnavailableError

    clock = ManualClock(datetime(2023, 6, 1, 2, 31, tzinfo=ZONE))
    cron, rec = make(db, clock, rec=Recorder(clock, fail_on={"2023-06-02"}))

    real = db.get_run

    def down(key):
        if not rec.calls:       # up while the run is claimed, down once it has failed
            return real(key)
        raise StoreUnavailableError("sqlite", "reading the run record", "disk I/O error",
                                    "check the disk")

    db.get_run = down
    with caplog.at_level("WARNING", logger="carbonsched.service.cron"):
        assert cron.tick("scheduled") is None
    assert [p for p, _, _ in rec.calls] == ["2023-06-02"]
    assert any("the run record of 2023-06-02 cannot be read" in r.getMessage()
               for r in caplog.records)


# --- GET /v1/runs: the next run the cron claims ------------------------------------------------
# Before, cron.next_due_planning_date was the daily rule's newest due day plus offset_days: in
# rolling mode it ignored the cadence (Shanghai zone, every 6 h, at 02:00Z it said 2026-07-16
# while the cron claims the runs of 2026-07-15), and in both modes it named the newest due run
# (often run already), not the next one. Now it and next_due_issue_time come from
# DailyCron.next_due, the cron's own rule at the moment the next run falls due.
ROLL_DAY = datetime(2026, 7, 15, tzinfo=UTC)


def _shanghai(db, clock: ManualClock, every: int) -> DailyCron:
    db.lease_clock.clock = clock
    return DailyCron(db, Recorder(clock), clock, "Asia/Shanghai", time(6, 0), offset_days=1,
                     replica="r", run_every_hours=every)


def _next(cron: DailyCron, db) -> tuple[str, str]:
    info = list_runs(SimpleNamespace(db=db, cron=cron), None, 100).cron
    return info["next_due_planning_date"], info["next_due_issue_time"]


def test_rolling_next_due_is_the_next_issue_time_the_cron_claims(db):
    clock = ManualClock(ROLL_DAY + timedelta(hours=2))
    cron = _shanghai(db, clock, 6)
    # the review's case: before, ("2026-07-16", no issue time)
    assert _next(cron, db) == ("2026-07-15", "2026-07-15T06:00:00Z")
    # at the limit: one second before 06:00 the next is 06:00; at 06:00 it is due now, so the
    # next is 12:00
    clock.set(ROLL_DAY + timedelta(hours=5, minutes=59, seconds=59))
    assert _next(cron, db) == ("2026-07-15", "2026-07-15T06:00:00Z")
    clock.set(ROLL_DAY + timedelta(hours=6))
    assert _next(cron, db) == ("2026-07-15", "2026-07-15T12:00:00Z")
    # 18:00Z (02:00 on 07-16 in Shanghai): the next is the following UTC day's 00:00 run
    clock.set(ROLL_DAY + timedelta(hours=18))
    assert _next(cron, db) == ("2026-07-16", "2026-07-16T00:00:00Z")


def test_what_the_rolling_cron_claims_next_is_what_was_said(db):
    clock = ManualClock(ROLL_DAY + timedelta(hours=2))
    cron = _shanghai(db, clock, 6)
    said = _next(cron, db)
    cron.tick("startup")                                  # the 00:00 run, due at start-up
    drive(cron, clock, ROLL_DAY + timedelta(hours=6, minutes=1))
    newest = db.runs()[0]
    assert (newest["planning_date"], f"{newest['issued_at']:%Y-%m-%dT%H:%M:%SZ}") == said
    assert [r["run_key"] for r in db.runs()] == ["2026-07-15T06:00Z", "2026-07-15T00:00Z"]


def test_daily_next_due_is_the_next_local_days_run(db):
    # 06:00 in Shanghai on 2026-07-15 is 22:00Z on 07-14; that run plans 2026-07-16
    due_at = ROLL_DAY - timedelta(hours=2)
    clock = ManualClock(due_at - timedelta(seconds=1))
    cron = _shanghai(db, clock, 24)
    # before: "2026-07-15", the day whose run was already due (and run) the day before
    assert _next(cron, db) == ("2026-07-16", "2026-07-16T00:00:00Z")
    drive(cron, clock, due_at + timedelta(minutes=1))     # the real CronTrigger fires it
    runs = db.runs()
    assert (runs[0]["planning_date"], f"{runs[0]['issued_at']:%Y-%m-%dT%H:%M:%SZ}") == (
        "2026-07-16", "2026-07-16T00:00:00Z")
    # at the limit: from 06:00 itself the next is the following local day's run
    clock.set(due_at)
    assert _next(cron, db) == ("2026-07-17", "2026-07-17T00:00:00Z")


# --- a plan issued before its run is refused --------------------------------------------------

NOW = datetime(2026, 12, 7, 12, tzinfo=UTC)


@pytest.mark.parametrize(("zone", "at", "offset", "late", "fixes"), [
    # New York 06:00, same-day plan: runs at 11:00Z in winter (10:00Z in summer), issues the
    # plan at 00:00Z: its first 11 h past. No cron time works same-day (00:00Z is 19:00 the
    # day before there): the least offset, and the latest time it allows
    ("America/New_York", time(6, 0), 0, "11 h",
     "set CARBONSCHED_CRON_PLAN_OFFSET_DAYS=1 (with it, CARBONSCHED_CRON_TIME up to 19:00)"),
    # Los Angeles 18:00, day-ahead: 02:00Z the next UTC day in winter (01:00Z in summer)
    ("America/Los_Angeles", time(18, 0), 1, "2 h",
     "set CARBONSCHED_CRON_TIME=16:00 or earlier, or CARBONSCHED_CRON_PLAN_OFFSET_DAYS=2"),
    # a minute past the latest time that works
    ("America/New_York", time(19, 1), 1, "1 min",
     "set CARBONSCHED_CRON_TIME=19:00 or earlier, or CARBONSCHED_CRON_PLAN_OFFSET_DAYS=2"),
    ("Asia/Shanghai", time(8, 0, 1), 0, "1 min",
     "set CARBONSCHED_CRON_TIME=08:00 or earlier, or CARBONSCHED_CRON_PLAN_OFFSET_DAYS=1"),
])
def test_a_cron_whose_run_comes_after_its_plans_issue_time_is_refused(
        db, zone, at, offset, late, fixes):
    # before: accepted, and every run issued a plan whose first hours were past (placements
    # there started at once, in hours the plan did not price; live forecasts skipped)
    with pytest.raises(InputError) as got:
        DailyCron(db, Recorder(FixedClock(NOW)), FixedClock(NOW), zone, at, offset_days=offset)
    msg = str(got.value)
    assert msg.startswith("the daily cron would issue its plans before it runs: "
                          f"CARBONSCHED_CRON_TIME={at.strftime('%H:%M')}")
    assert f"in {zone} (CARBONSCHED_CRON_TIMEZONE" in msg
    assert f"CARBONSCHED_CRON_PLAN_OFFSET_DAYS={offset}: the run of local day" in msg
    assert f"so the plan's first {late} would be past when it is made" in msg
    assert msg.endswith(fixes)


def test_the_two_reported_cases_name_the_day_and_the_utc_times():
    with pytest.raises(InputError, match=re.escape(
            "the run of local day 2026-12-07 comes at 2026-12-07 11:00 UTC and plans "
            "2026-12-07 from 2026-12-07 00:00 UTC")):
        cron_module.check_daily_issue("America/New_York", time(6, 0), 0, date(2026, 12, 7))
    # Los Angeles 18:00 day-ahead, checked on a summer day (01:00Z, 1 h past): the year ahead
    # holds the winter, where it is worse (02:00Z from the first day of standard time)
    with pytest.raises(InputError, match=re.escape(
            "the run of local day 2027-11-07 comes at 2027-11-08 02:00 UTC and plans "
            "2027-11-08 from 2027-11-08 00:00 UTC, so the plan's first 2 h")):
        cron_module.check_daily_issue("America/Los_Angeles", time(18, 0), 1, date(2027, 7, 1))
    # 17:00 is past only in winter (01:00Z), 16:00 never
    with pytest.raises(InputError, match="first 1 h would be past"):
        cron_module.check_daily_issue("America/Los_Angeles", time(17, 0), 1, date(2027, 7, 1))
    cron_module.check_daily_issue("America/Los_Angeles", time(16, 0), 1, date(2027, 7, 1))


@pytest.mark.parametrize(("zone", "at", "offset"), [
    ("America/New_York", time(19, 0), 1),   # 00:00Z in winter: issued exactly at the run
    ("Asia/Shanghai", time(8, 0), 0),       # 00:00Z every day (no DST): exactly at the run
    ("America/Los_Angeles", time(16, 0), 1),  # the latest day-ahead time in Los Angeles
    ("America/Los_Angeles", time(18, 0), 2),
    ("America/New_York", time(6, 0), 1),    # the defaults in the global catalog's zone
    ("Asia/Shanghai", time(6, 0), 1),       # the shipped defaults (default catalog's zone)
])
def test_a_cron_whose_run_comes_at_or_before_its_issue_time_is_accepted(db, zone, at, offset):
    cron = DailyCron(db, Recorder(FixedClock(NOW)), FixedClock(NOW), zone, at,
                     offset_days=offset)
    for day in range(400):  # and indeed: no run of the year comes after its issue time
        now = datetime.combine(date(2026, 12, 7) + timedelta(days=day), at,
                               tzinfo=ZoneInfo(zone)) + timedelta(seconds=1)
        _, _, issued = cron.due_issue(now)
        assert issued >= now - timedelta(seconds=1)


def test_the_shipped_default_settings_make_their_cron(db):
    s = Settings()
    assert (s.cron_time, s.cron_plan_offset_days, s.cron_timezone) == (time(6, 0), 1, "")
    cron = DailyCron.from_settings(s, db, FixedClock(NOW))
    assert (cron.zone_name, cron.at, cron.offset_days) == ("Asia/Shanghai", time(6, 0), 1)
    cron = DailyCron.from_settings(Settings(catalog="global"), db, FixedClock(NOW))
    assert cron.zone_name == "America/New_York"


def test_runs_every_n_hours_are_issued_at_their_run_and_not_checked(db):
    s = Settings(catalog="global", rolling=True, rolling_run_every_hours=6,
                 cron_plan_offset_days=0)
    cron_module.check_cron_settings(s, "America/New_York", FixedClock(NOW))
    with pytest.raises(InputError, match="CARBONSCHED_CRON_PLAN_OFFSET_DAYS=0: the run"):
        cron_module.check_cron_settings(Settings(catalog="global", cron_plan_offset_days=0),
                            "America/New_York", FixedClock(NOW))


@pytest.mark.parametrize("trigger", ["startup", "check", "scheduled", "manual"])
def test_a_tick_after_the_stop_event_begins_no_run(db, trigger):
    """Shutdown began (the service's stop event set) as a tick fired: no run is claimed or
    planned (it would outlive CARBONSCHED_SHUTDOWN_TIMEOUT_S); the next process runs it."""
    import threading

    clock = ManualClock(datetime(2023, 6, 1, 12, tzinfo=ZONE))
    stop = threading.Event()
    cron, rec = make(db, clock, stop=stop)
    stop.set()
    assert cron.tick(trigger) is None
    assert rec.calls == [] and db.get_run("2023-06-02") is None
    # the same store, a new process (its own stop event not set): the due day runs
    cron2, rec2 = make(db, clock)
    assert cron2.tick("startup")["status"] == "succeeded"
    assert [p for p, _, _ in rec2.calls] == ["2023-06-02"]

