"""The service never replaces a plan it did not make without saying so, its start-up run follows
configuration, and a store's runs say their catalog (issue 34, item 5)."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

import pytest
from typer.testing import CliRunner

from carbonsched.api.schemas import RunPublic
from carbonsched.catalog import load_catalog
from carbonsched.clock import FixedClock, ManualClock
from carbonsched.config import Settings
from carbonsched.errors import InputError
from carbonsched.pipeline.daily import run_daily_plan
from carbonsched.service.runs import check_store_catalog, claim_and_run, planning_pipeline
from carbonsched.store import Store
from carbonsched.store.service import ServiceStore
from carbonsched.timeaxis import day_start_utc
from tests.service.test_cron import ZONE, make

DEFAULT = "china-eastdata-westcompute"


@pytest.fixture
def db(tmp_path) -> ServiceStore:
    from tests.service.test_cron import LeaseClock

    store = ServiceStore(Store(f"sqlite:///{tmp_path / 'runs.sqlite'}"))
    store.lease_clock = LeaseClock()
    return store


@pytest.mark.parametrize(("startup_run", "runs_now"), [(True, 1), (False, 0)])
def test_the_start_up_run_follows_configuration(db, startup_run, runs_now):
    start = datetime(2023, 7, 14, 12, tzinfo=ZONE)           # 12:00 > the 02:30 run time
    clock = ManualClock(start)
    cron, rec = make(db, clock, startup_run=startup_run)
    cron.tick("startup")
    cron.tick("check")                                       # the safety net does not either
    assert len(rec.calls) == runs_now
    if runs_now:
        assert rec.calls[0][2] == "startup" and db.get_run("2023-07-15")["trigger"] == "startup"
    else:
        assert db.get_run("2023-07-15") is None
    # the next day's run time, after start-up: run either way
    clock.set(datetime(2023, 7, 15, 2, 30, tzinfo=ZONE))
    cron.tick("scheduled")
    assert [c[0] for c in rec.calls][-1] == "2023-07-16"


def test_a_day_due_exactly_at_start_up_is_not_a_catch_up(db):
    """Just at the limit: started at the run time itself, the day is run with the start-up
    run off (its run time is not before the start)."""
    clock = ManualClock(datetime(2023, 7, 14, 2, 30, tzinfo=ZONE))
    cron, rec = make(db, clock, at=time(2, 30), startup_run=False)
    cron.tick("scheduled")
    assert [c[0] for c in rec.calls] == ["2023-07-15"]
    clock2 = ManualClock(datetime(2023, 7, 14, 2, 30, 1, tzinfo=ZONE))
    cron2, rec2 = make(db, clock2, at=time(2, 31), startup_run=False)
    cron2.tick("check")                                      # 02:31 has not come: nothing due
    assert rec2.calls == []


def test_a_run_replacing_a_plan_made_outside_the_service_says_so(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    pdate = "2026-12-04"
    mine = run_daily_plan(pdate, DEFAULT, time_limit_s=30).document   # as `carbonsched plan`
    db = ServiceStore(Store(url))
    db.store.save_plan(mine)
    other_day = run_daily_plan("2026-12-05", DEFAULT, time_limit_s=30).document
    db.store.save_plan(other_day)                                     # another date: not named
    settings = Settings(database_url=url, catalog=DEFAULT, time_limit_s=30)
    clock = FixedClock(datetime(2026, 12, 3, 23, tzinfo=UTC))
    out = claim_and_run(db, clock, planning_pipeline(settings, db, clock),
                        planning_date=pdate, issued_at=day_start_utc(pdate).to_pydatetime(),
                        trigger="startup", replica="test", lease=timedelta(seconds=45))
    rec = db.get_run(pdate)
    assert rec["catalog"] == DEFAULT and rec["plan_id"] == out.plan_id != mine["plan_id"]
    assert rec["notes"].startswith(f"this startup run's plan replaces plan(s) {mine['plan_id']} "
                                   f"for {pdate}, made outside the service")
    assert other_day["plan_id"] not in rec["notes"]
    assert "CARBONSCHED_CRON_STARTUP_RUN=false" in rec["notes"]
    public = RunPublic.model_validate(rec).model_dump()               # what GET /v1/runs lists
    assert public["notes"] == rec["notes"] and public["catalog"] == DEFAULT
    assert rec["notes"] in db.store.get_plan(out.plan_id)["notes"]
    # the service's own plan is not "made outside": a second run of the date names only mine
    assert db.store.get_plan(mine["plan_id"])["plan_id"] == mine["plan_id"]


def test_a_store_with_another_catalogs_runs_is_refused(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 's.db'}"
    db = ServiceStore(Store(url))
    now = datetime(2026, 12, 3, tzinfo=UTC)
    for pdate, cat in (("2026-12-01", "global"), ("2026-12-02", None)):
        issued = datetime.fromisoformat(pdate).replace(tzinfo=UTC)
        owner = db.claim_run(pdate, pdate, issued, "scheduled", "r", now, timedelta(seconds=45))
        db.finish_run(pdate, now, "succeeded", owner=owner,
                      **({"catalog": cat} if cat else {}))
    check_store_catalog(db, "global")              # its own catalog: fine
    with pytest.raises(InputError) as exc:
        check_store_catalog(db, DEFAULT)
    assert (f"the store {db.safe_url()} holds the runs of catalog(s) 'global' (1 run(s)), "
            f"not of '{DEFAULT}'") in str(exc.value)
    assert "give this catalog a store of its own (CARBONSCHED_DATABASE_URL)" in str(exc.value)
    # the command line refuses before planning, exit 2 with the message
    from carbonsched.cli.app import app
    from carbonsched.config import get_settings

    monkeypatch.setenv("CARBONSCHED_DATABASE_URL", url)
    get_settings.cache_clear()
    r = CliRunner().invoke(app, ["plan", "--dispatch", "--date", "2026-12-04"])
    get_settings.cache_clear()
    assert r.exit_code == 2, r.output
    assert "holds the runs of catalog(s) 'global'" in " ".join(r.output.split())
    assert db.get_run("2026-12-04") is None
    assert load_catalog(DEFAULT).name == DEFAULT


def test_a_start_up_run_left_out_is_said_and_an_operator_can_run_it(db):
    # before, the skip was only logged (GET /v1/runs did not say it), and POST /v1/runs
    # answered "run started" while its tick skipped the same run again
    from carbonsched.api.routes.runs import list_runs
    from carbonsched.service.metrics import ServiceMetrics

    clock = ManualClock(datetime(2023, 7, 14, 12, tzinfo=ZONE))   # after the 02:30 run time
    cron, rec = make(db, clock, startup_run=False)
    assert cron.skipped_note == ""
    cron.tick("startup")
    cron.tick("check")
    assert rec.calls == []
    assert cron.skipped_note == (
        "run 2023-07-15 was due before this process started and the start-up run is off "
        "(CARBONSCHED_CRON_STARTUP_RUN=false): not run; the next run is at 02:30 "
        f"{cron.zone_name} (POST /v1/runs runs it now)")

    class _State:
        pass

    state = _State()
    state.db, state.cron, state.metrics = db, cron, ServiceMetrics()
    assert list_runs(state, None, 100).cron["skipped"] == cron.skipped_note
    cron.tick("manual")                                      # what POST /v1/runs starts
    assert [(c[0], c[2]) for c in rec.calls] == [("2023-07-15", "manual")]
    assert db.get_run("2023-07-15")["trigger"] == "manual" and cron.skipped_note == ""
    assert "skipped" not in list_runs(state, None, 100).cron
    # left out again in a new process, and not run by hand: the next day's run clears the
    # note too (before, it kept naming the old run, and POST /v1/runs would run another)
    clock2 = ManualClock(datetime(2023, 7, 15, 12, tzinfo=ZONE))
    cron2, rec2 = make(db, clock2, startup_run=False)
    cron2.tick("startup")
    assert rec2.calls == [] and "run 2023-07-16 was due" in cron2.skipped_note
    clock2.set(datetime(2023, 7, 16, 2, 30, tzinfo=ZONE))
    cron2.tick("scheduled")
    assert [c[0] for c in rec2.calls] == ["2023-07-17"] and cron2.skipped_note == ""


@pytest.mark.parametrize("leads", [True, False])
def test_post_runs_on_a_standby_says_it_did_not_start(db, leads):
    # before, a standby replica answered "run started" while its tick, not the leader's,
    # returned at once: nothing ran. At the limit: the leader starts it
    from carbonsched.api.routes.runs import trigger_run

    class Lease:
        held = False

        def try_acquire(self):
            return leads

    clock = ManualClock(datetime(2023, 7, 14, 12, tzinfo=ZONE))
    cron, rec = make(db, clock)
    cron.leader = Lease()

    class _State:
        pass

    state = _State()
    state.db, state.cron = db, cron
    out = trigger_run(state, None)
    assert out.planning_date == "2023-07-15" and out.started is leads
    assert ("standby" in out.detail) is not leads
