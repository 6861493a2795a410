"""The one run path (``carbonsched.service.runs``) through every entry point.

The daily cron and ``carbonsched plan --dispatch`` record a failing run alike (status, message
and traceback); the ``--out`` plan file is written before anything is stored, so a dead
database loses nothing; a planning date runs once.
"""

from __future__ import annotations

import json
import time as time_mod
from datetime import UTC, datetime, time, timedelta

import pytest
from typer.testing import CliRunner

from carbonsched.cli.app import app
from carbonsched.clock import ManualClock
from carbonsched.config import Settings, get_settings
from carbonsched.service.cron import DailyCron
from carbonsched.service.runs import (
    RunOutcome,
    claim_and_run,
    execute_run,
    failure_detail,
    planning_pipeline,
)
from carbonsched.store import Store
from carbonsched.store.service import ServiceStore

CATALOG = "china-eastdata-westcompute"   # modelled signals: plans without the shared data
PDATE = "2023-07-17"
RECORDED = ("status", "plan_id", "solver_status", "dispatch", "error")

runner = CliRunner()


@pytest.fixture(autouse=True)
def _no_dispatcher(monkeypatch):
    """Runs here dispatch nothing (``scripts/test`` may configure a dispatcher)."""
    monkeypatch.delenv("CARBONSCHED_DISPATCHER", raising=False)
    monkeypatch.delenv("CARBONSCHED_CONFIG", raising=False)
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def _db(tmp_path, name: str) -> tuple[str, ServiceStore]:
    url = f"sqlite:///{tmp_path / name}"
    return url, ServiceStore(Store(url))


def _planner_raises(monkeypatch) -> list[str]:
    """Make the planner raise (as a solver crash would); returns the dates it was asked for."""
    calls: list[str] = []

    def exploding_planner(date, *args, **kwargs):
        calls.append(date)
        raise RuntimeError("solver exploded")

    monkeypatch.setattr("carbonsched.pipeline.daily.run_daily_plan", exploding_planner)
    return calls


def _cron_run(tmp_path, workload_file=None) -> dict:
    """The cron's run of PDATE (due at 00:00 UTC on the day before) on a store of its own."""
    url, db = _db(tmp_path, "cron.sqlite")
    s = Settings(catalog=CATALOG, database_url=url, workload_file=workload_file,
                 time_limit_s=20.0)
    clock = ManualClock(datetime(2023, 7, 16, 12, tzinfo=UTC))
    cron = DailyCron(db, planning_pipeline(s, db, clock), clock, "UTC", time(0, 0),
                     offset_days=1, replica="cron-test")
    rec = cron.tick("scheduled")
    assert rec is not None and rec["planning_date"] == PDATE
    return rec


def _cli_dispatch(tmp_path, monkeypatch, *args: str, db_name: str = "cli.sqlite"):
    url = f"sqlite:///{tmp_path / db_name}"
    monkeypatch.setenv("CARBONSCHED_DATABASE_URL", url)
    r = runner.invoke(app, ["plan", "--dispatch", "--date", PDATE, "--catalog", CATALOG,
                            "--time-limit", "20", *args])
    return r, ServiceStore(Store(url))


def _error(stderr: str) -> str:
    """The one ``error:`` line, unwrapped (Rich wraps long lines off a terminal)."""
    assert [ln.startswith("error:") for ln in stderr.splitlines()].count(True) == 1, stderr
    flat = " ".join(stderr.split())
    return flat[flat.index("error:"):]


def test_cron_and_plan_dispatch_record_a_crashing_run_alike(tmp_path, monkeypatch):
    _planner_raises(monkeypatch)
    cron_rec = _cron_run(tmp_path)
    r, db = _cli_dispatch(tmp_path, monkeypatch)
    assert r.exit_code == 1 and isinstance(r.exception, RuntimeError)  # raised, not swallowed
    cli_rec = db.get_run(PDATE)
    assert {k: cli_rec[k] for k in RECORDED} == {k: cron_rec[k] for k in RECORDED}
    assert cli_rec["status"] == "failed" and cli_rec["plan_id"] is None
    # the message and the end of the traceback: where it was raised, and from where
    err = cli_rec["error"]
    assert err.startswith("RuntimeError: solver exploded\n")
    assert 'File "' in err and "in exploding_planner" in err
    assert err.rstrip().endswith("RuntimeError: solver exploded")
    assert (cron_rec["trigger"], cli_rec["trigger"]) == ("scheduled", "cli")


def test_cron_and_plan_dispatch_record_bad_input_alike(tmp_path, monkeypatch):
    # bad input (a workload file that is not there) is its message alone: it says how to fix it
    missing = tmp_path / "no-such-jobs.json"
    cron_rec = _cron_run(tmp_path, workload_file=missing)
    r, db = _cli_dispatch(tmp_path, monkeypatch, "--jobs", str(missing))
    assert r.exit_code == 2
    assert _error(r.stderr) == (f"error: {missing}: workload file not found; give an "
                                "existing .json or .csv file")
    cli_rec = db.get_run(PDATE)
    assert {k: cli_rec[k] for k in RECORDED} == {k: cron_rec[k] for k in RECORDED}
    assert cli_rec["status"] == "failed"
    assert cli_rec["error"] == (f"WorkloadError: {missing}: workload file not found; give an "
                                "existing .json or .csv file")


def test_a_second_call_for_the_same_date_does_nothing(tmp_path, monkeypatch):
    calls = _planner_raises(monkeypatch)
    url, db = _db(tmp_path, "s.sqlite")
    s = Settings(catalog=CATALOG, database_url=url)
    clock = ManualClock(datetime(2023, 7, 16, 12, tzinfo=UTC))
    kw = dict(planning_date=PDATE, trigger="cli", replica="r1")
    with pytest.raises(RuntimeError, match="solver exploded"):
        execute_run(s, db, clock, **kw)
    first = db.get_run(PDATE)
    clock.advance(timedelta(hours=6))      # past the stale-run age: a failed run stays failed
    assert execute_run(s, db, clock, **kw) is None
    assert calls == [PDATE] and db.get_run(PDATE) == first
    # the cron of that day finds the run there too
    cron = DailyCron(db, planning_pipeline(s, db, clock), clock, "UTC", time(0, 0),
                     offset_days=1)
    assert cron.tick() is None and calls == [PDATE]
    # and the command says so, the record on stdout; the date's run failed, so it exits 1
    # (before: 0, and a Kubernetes CronJob's restart marked the day's Job complete)
    monkeypatch.setenv("CARBONSCHED_DATABASE_URL", url)
    r = runner.invoke(app, ["plan", "--dispatch", "--date", PDATE, "--catalog", CATALOG])
    assert r.exit_code == 1, r.output
    assert f"planning date {PDATE} already has a run (failed, cli on r1); not run again" in \
        r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])["error"] == first["error"]
    assert calls == [PDATE]


def test_a_running_record_is_taken_over_by_the_command_when_its_lease_ran_out(tmp_path,
                                                                             monkeypatch):
    url, db = _db(tmp_path, "s.sqlite")
    clock = ManualClock(datetime(2023, 7, 16, 12, tzinfo=UTC))
    db.lease_clock = clock.now
    issued = datetime(2023, 7, 17, tzinfo=UTC)
    lease = timedelta(seconds=45)
    assert db.claim_run(PDATE, PDATE, issued, "scheduled", "dead", clock.now(), lease)

    def ok(pdate, issued_at, trigger):
        return RunOutcome("succeeded", "p1", "optimal", "dispatch: not configured")

    kw = dict(planning_date=PDATE, issued_at=issued, trigger="cli", replica="r2", lease=lease)
    clock.advance(lease)
    assert claim_and_run(db, clock, ok, **kw) is None     # at the limit: still the owner's
    clock.advance(timedelta(seconds=1))
    assert claim_and_run(db, clock, ok, **kw).plan_id == "p1"
    rec = db.get_run(PDATE)
    assert (rec["status"], rec["replica"], rec["attempts"]) == ("succeeded", "r2", 2)


def test_the_heartbeat_keeps_a_long_run_its_own(tmp_path):
    """A run longer than its lease keeps its record: the heartbeat renews it meanwhile."""
    import threading

    url, db = _db(tmp_path, "s.sqlite")
    clock = ManualClock(datetime(2023, 7, 16, 12, tzinfo=UTC))
    issued = datetime(2023, 7, 17, tzinfo=UTC)
    lease = timedelta(seconds=0.6)
    inside, release = threading.Event(), threading.Event()
    beats: list = []

    def slow(pdate, issued_at, trigger):
        inside.set()
        # three leases long, watching the heartbeat move the lease on
        while not release.wait(0.05):
            beats.append(db.get_run(PDATE)["lease_expires_at"])
        return RunOutcome("succeeded", "p1", "optimal", "dispatch: not configured")

    t = threading.Thread(target=lambda: claim_and_run(
        db, clock, slow, planning_date=PDATE, issued_at=issued, trigger="cli", replica="r1",
        lease=lease))
    t.start()
    assert inside.wait(60)
    deadline = time_mod.monotonic() + 60
    while len(set(beats)) < 4 and time_mod.monotonic() < deadline:
        time_mod.sleep(0.05)
    # another process finds a live lease every time it tries
    assert db.claim_run(PDATE, PDATE, issued, "check", "r2", clock.now(), lease) is None
    release.set()
    t.join(60)
    assert len(set(beats)) >= 4, beats                  # renewed again and again
    rec = db.get_run(PDATE)
    assert (rec["status"], rec["replica"], rec["attempts"]) == ("succeeded", "r1", 1)


def test_a_catalog_that_cannot_be_loaded_claims_nothing(tmp_path, monkeypatch):
    r, db = _cli_dispatch(tmp_path, monkeypatch, "--catalog", "atlantis")
    assert r.exit_code == 2 and "atlantis" in _error(r.stderr)
    assert db.get_run(PDATE) is None       # the date can still be planned


def test_a_failure_the_dead_store_cannot_record_is_still_raised(tmp_path, caplog):
    url, db = _db(tmp_path, "s.sqlite")
    clock = ManualClock(datetime(2023, 7, 16, 12, tzinfo=UTC))

    def crash(pdate, issued_at, trigger):
        raise RuntimeError("solver exploded")

    def dead(*args, **kwargs):
        raise ConnectionError("database gone")

    db.finish_run = dead
    with pytest.raises(RuntimeError, match="solver exploded"):
        claim_and_run(db, clock, crash, planning_date=PDATE,
                      issued_at=datetime(2023, 7, 17, tzinfo=UTC), trigger="cli",
                      replica="r", lease=timedelta(seconds=45))
    assert ("the failure could not be recorded (database gone); the record stays 'running' "
            "until its lease runs out (45 s)") in caplog.text
    assert ServiceStore(Store(url)).get_run(PDATE)["status"] == "running"   # taken over later


def test_failure_detail_is_message_then_traceback_and_cut():
    try:
        raise RuntimeError("x" * 5000)
    except RuntimeError as exc:
        detail = failure_detail(exc)
    assert detail.startswith("RuntimeError: xxx") and len(detail) == 4000


@pytest.mark.parametrize("url, names", [
    ("postgresql+psycopg2://x@127.0.0.1:1/x", "database postgresql+psycopg2://x@127.0.0.1:1/x "
                                              "is unreachable"),
    # the password never reaches the message
    ("postgresql+psycopg2://x:s3cret@127.0.0.1:1/x", "database postgresql+psycopg2://x:***@"
                                                     "127.0.0.1:1/x is unreachable"),
    # a SQLite file is named by its path, as the user would type it
    ("sqlite:///{tmp}/a-folder", "database {tmp}/a-folder is unreachable"),
])
def test_plan_out_is_written_when_the_store_is_unreachable(tmp_path, monkeypatch, url, names):
    (tmp_path / "a-folder").mkdir()       # a SQLite "file" that is a folder: cannot be opened
    monkeypatch.setenv("CARBONSCHED_DATABASE_URL", url.format(tmp=tmp_path))
    out = tmp_path / "plan.json"
    r = runner.invoke(app, ["plan", "--date", "2026-11-30", "--catalog", CATALOG,
                            "--time-limit", "20", "--out", str(out)])
    assert r.exit_code == 3, r.output
    doc = json.loads(out.read_text())
    assert doc["catalog"] == CATALOG and doc["date"] == "2026-11-30"
    assert _error(r.stderr).startswith(f"error: {names.format(tmp=tmp_path)}")
    assert "s3cret" not in r.stderr + r.stdout
    assert f"plan written to {out}" in " ".join(r.stderr.split())
    assert doc["plan_id"][:12] in r.stdout          # the plan was shown before the error


def test_plan_dispatch_out_is_written_before_the_store_fails(tmp_path, monkeypatch):
    from sqlalchemy.exc import OperationalError

    def disk_gone(self, plan, forecasts):
        raise OperationalError("INSERT INTO plans", {}, Exception("disk I/O error"))

    monkeypatch.setattr(Store, "_save_plan", disk_gone)
    out = tmp_path / "plan.json"
    r, db = _cli_dispatch(tmp_path, monkeypatch, "--out", str(out))
    assert r.exit_code == 3, r.output
    doc = json.loads(out.read_text())
    assert doc["run"] == {"planning_date": PDATE, "issued_at": "2023-07-17T00:00:00+00:00",
                          "trigger": "cli", "api_jobs": 0}
    assert _error(r.stderr) == (
        f"error: database {tmp_path / 'cli.sqlite'} is unreachable (recording plan "
        f"{doc['plan_id']}: disk I/O error); the plan is written to {out}; once the database "
        f"is back, run `carbonsched plan --dispatch --date {PDATE}` again (it takes the date's "
        "run record over 45 s after this run's last heartbeat)")
    rec = db.get_run(PDATE)
    # an outage is not final: the date is claimed again once the retry time has come
    assert rec["status"] == "interrupted" and rec["error"].startswith(
        f"StoreUnavailableError: database {tmp_path / 'cli.sqlite'} ")
    assert rec["lease_expires_at"] > rec["finished_at"]


SUMMARY: dict = {}
"""What :func:`summary_dispatch` answers (set by the test)."""


def summary_dispatch(store, plan_id, catalog, *, clock, **kw):
    """A dispatch step (``CARBONSCHED_DISPATCHER``) answering :data:`SUMMARY` for the plan."""
    return {**SUMMARY, "plan_id": plan_id}


@pytest.mark.parametrize(("summary", "code", "outcome", "said"), [
    ({"complete": True, "nothing_submitted": False, "counts": {"submitted": 3}}, 0, "ok", None),
    ({"complete": False, "nothing_submitted": False,
      "counts": {"submitted": 2, "unavailable": 1}}, 3, "incomplete",
     "dispatch left units pending (2 submitted, 1 unavailable): the service's dispatch loops "
     "retry them, or run `carbonsched dispatch {pid}` again"),
    ({"complete": True, "nothing_submitted": False, "counts": {"rejected": 1, "submitted": 2}},
     2, "rejected", "dispatch: a backend refused 1 unit(s) (1 rejected, 2 submitted); "
     "`carbonsched status {pid}` names them and why"),
    ({"complete": True, "nothing_submitted": True, "counts": {"deadline_passed": 4}}, 2,
     "nothing_submitted", "dispatch submitted nothing: none of the units asked for is on its "
     "backend (4 deadline_passed); `carbonsched status {pid}` says why"),
])
def test_plan_dispatch_exits_as_dispatch_does_and_the_run_says_why(tmp_path, monkeypatch,
                                                                    summary, code, outcome,
                                                                    said):
    # before, `plan --dispatch` exited 0 whatever dispatch did (units left pending, refused,
    # nothing submitted), the run's notes said nothing of it and the metric counted "ok"
    from carbonsched.service.metrics import ServiceMetrics
    from carbonsched.service.runs import finish_run

    SUMMARY.clear()
    SUMMARY.update(summary)
    url, db = _db(tmp_path, "s.sqlite")
    monkeypatch.setenv("CARBONSCHED_DATABASE_URL", url)
    monkeypatch.setenv("CARBONSCHED_DISPATCHER", f"{__name__}:summary_dispatch")
    get_settings.cache_clear()
    r = runner.invoke(app, ["plan", "--dispatch", "--date", PDATE, "--catalog", CATALOG,
                            "--time-limit", "20"])
    assert r.exit_code == code, r.output
    rec = db.get_run(PDATE)
    assert rec["status"] == "succeeded"
    want = "" if said is None else said.format(pid=rec["plan_id"][:12])
    assert (rec["notes"] or "") == want
    if said:
        assert f"notes: {want}" in r.stderr
    # the metric names the outcome
    metrics = ServiceMetrics()
    doc = db.store.get_plan(rec["plan_id"])
    finish_run(doc, db, None, ManualClock(datetime(2023, 7, 16, tzinfo=UTC)), summary_dispatch,
               metrics)
    assert metrics.dispatch_outcomes.labels(outcome=outcome)._value.get() == 1
    # a second call finds the run done and dispatches its plan again (what is still pending:
    # the outbox submits exactly once), exiting by that outcome; before, 0 with units pending
    again = runner.invoke(app, ["plan", "--dispatch", "--date", PDATE, "--catalog", CATALOG])
    assert again.exit_code == code and "not run again" in again.stderr
    assert f"plan {rec['plan_id'][:12]} dispatched again (what was still pending): " \
           f"{outcome}" in again.stderr
    SUMMARY["complete"], SUMMARY["counts"] = True, {"submitted": 3}   # the retry finished it
    SUMMARY["nothing_submitted"] = False
    assert runner.invoke(app, ["plan", "--dispatch", "--date", PDATE, "--catalog",
                               CATALOG]).exit_code == 0


def test_plan_dispatch_on_a_date_another_process_runs_exits_3(tmp_path, monkeypatch):
    # before: exit 0 "nothing to do now", so a CronJob restart inside the dead run's lease
    # marked the day's Job complete and nothing ran the date again
    url, db = _db(tmp_path, "s.sqlite")
    issued = datetime(2023, 7, 17, tzinfo=UTC)
    assert db.claim_run(PDATE, PDATE, issued, "cli", "elsewhere", datetime.now(UTC),
                        timedelta(minutes=5))
    monkeypatch.setenv("CARBONSCHED_DATABASE_URL", url)
    r = runner.invoke(app, ["plan", "--dispatch", "--date", PDATE, "--catalog", CATALOG])
    assert r.exit_code == 3, r.output
    assert f"planning date {PDATE} is being run by elsewhere" in r.stderr
    assert "run this again after its lease (exit 3)" in r.stderr


def test_a_unit_refused_by_an_earlier_dispatch_still_reads_rejected():
    # before, dispatching a plan again turned its refused units into "recorded": the verdict
    # read ok and a CronJob's restart cleared the exit 2. At the limit: a unit recorded
    # Submitted is ok
    from carbonsched.service.runs import dispatch_verdict

    def summary(reason):
        return {"plan_id": "p" * 12, "complete": True, "nothing_submitted": False,
                "counts": {"recorded": 2},
                "outcomes": [{"action": "recorded", "reason": "Submitted", "backend_id": "1"},
                             {"action": "recorded", "reason": reason, "backend_id": None}]}

    assert dispatch_verdict(summary("Rejected")) == (
        "rejected", "dispatch: a backend refused 1 unit(s) (1 recorded, 1 rejected); "
        "`carbonsched status pppppppppppp` names them and why")
    assert dispatch_verdict(summary("Submitted")) == ("ok", "")
