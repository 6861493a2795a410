"""A rolling run stopped after it saved its state is run again: finished once, never refused.

The run path saves the rolling state after dispatch and before the run record is finished. A
stop in between (SIGTERM, a crash, kill -9) left a record that says ``interrupted`` (run it
again now) or ``running`` until its lease ran out, while the run issued at the same time was
refused "not after the previous run" and recorded ``failed``. Now the run is finished from the
plan its state was saved from; a run issued before the newest run of the state (a missed
one) is refused, naming that run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import event, select
from sqlalchemy.orm import Session

from carbonsched.errors import InputError, Interrupted
from carbonsched.service.runs import claim_and_run, planning_pipeline
from carbonsched.store import Store
from carbonsched.store.models import DispatchRow
from carbonsched.store.rolling_models import RollingJobRow
from carbonsched.store.rolling_state import RollingStore
from carbonsched.store.service import ServiceStore
from tests.service.keyed_backend import KeyedBackend, dispatch_to, service_home
from tests.service.test_rolling_service import CATALOG, settings, workload

pytestmark = pytest.mark.shared_data

DAY1, DAY2 = datetime(2023, 7, 10, tzinfo=UTC), datetime(2023, 7, 11, tzinfo=UTC)
LEASE = timedelta(seconds=45)

API_SPEC = {"id": "api-1", "tenant": "t", "gpu_type": "A100", "gpus": 1, "duration_hours": 1,
            "power_per_gpu_kw": 0.8125, "earliest_start": "2023-07-10T12:00:00Z",
            "deadline": "2023-07-12T12:00:00Z", "kind": "batch"}


class StopAfterStateSaved:
    """Raise :class:`Interrupted` (as the CLI's SIGTERM handler does) right after the commit
    of the rolling state's write, once: the stop lands between the save and the run's end."""

    def __init__(self) -> None:
        self.armed = True

    def __enter__(self) -> StopAfterStateSaved:
        event.listen(Session, "after_flush", self._mark)
        event.listen(Session, "after_commit", self._stop)
        return self

    def __exit__(self, *exc: object) -> None:
        event.remove(Session, "after_flush", self._mark)
        event.remove(Session, "after_commit", self._stop)

    @staticmethod
    def _mark(session: Session, ctx: object) -> None:
        if any(isinstance(o, RollingJobRow) for o in [*session.new, *session.dirty]):
            session.info["rolling_saved"] = True

    def _stop(self, session: Session) -> None:
        if session.info.pop("rolling_saved", False) and self.armed:
            self.armed = False
            raise Interrupted(signal.SIGTERM)


def service(tmp_path, shared_data, name: str):
    """A rolling service on its own SQLite store and backend file, one API job submitted."""
    d, url, db, clock, backend = service_home(tmp_path, name, API_SPEC)
    pipe = planning_pipeline(settings(d, shared_data, url), db, clock,
                             dispatch_to(backend.path))
    return db, clock, pipe, backend


def run(db, clock, pipe, issued: datetime):
    return claim_and_run(db, clock, pipe, planning_date=f"{issued:%Y-%m-%d}", issued_at=issued,
                         trigger="scheduled", replica="r1", lease=LEASE)


def observed(db, backend) -> dict:
    """What the runs left, with plan ids as the position of the plan among the store's plans."""
    plans = sorted(p["plan_id"] for p in db.store.list_plans())
    order = {pid: n for n, pid in enumerate(
        sorted(plans, key=lambda pid: db.store.get_plan(pid)["issued_at"]))}
    rows = {r["job_id"]: (r["state"], r["reason"], r["site"], r["start"], r["end"],
                          r["pieces"], order[r["plan_id"]])
            for r in RollingStore(db.store).rows()}
    with Session(db.store.engine) as s:
        outbox = sorted((r.key, r.state, r.site, r.planned_start, order[r.plan_id])
                        for r in s.scalars(select(DispatchRow)))
    api = db.get_job("api-1")
    detail = api["detail"]
    for pid, n in order.items():
        detail = detail.replace(pid, f"<plan {n}>")
    return {"plans": len(plans), "rolling": rows, "outbox": outbox,
            "backend": {k: (j["site"], j["start"], order[j["plan_id"]])
                        for k, j in backend.jobs().items()},
            "submissions": backend.submissions(),
            "api": (api["state"], api["reason"], api["site"], api["start"], api["end"],
                    detail, order.get(api["plan_id"]))}


def test_a_run_stopped_after_its_state_was_saved_is_finished_as_an_uninterrupted_run(
        tmp_path, shared_data):
    # the reference: the same service, never stopped
    ref_db, ref_clock, ref_pipe, ref_backend = service(tmp_path, shared_data, "ref")
    assert run(ref_db, ref_clock, ref_pipe, DAY1).status == "succeeded"
    ref_day1 = observed(ref_db, ref_backend)

    db, clock, pipe, backend = service(tmp_path, shared_data, "stopped")
    with StopAfterStateSaved() as stop, pytest.raises(Interrupted):
        run(db, clock, pipe, DAY1)
    assert not stop.armed                          # it landed after the state's commit
    rec = db.get_run(DAY1)
    assert rec["status"] == "interrupted"
    first = {r["plan_id"] for r in RollingStore(db.store).rows()}
    assert len(first) == 1                         # the state is saved, from one plan
    assert rec["plan_id"] in first                 # which the record names since it was stored

    # a run issued before it is refused while it is unfinished, naming it and what to do
    with pytest.raises(InputError) as refused:
        run(db, clock, pipe, datetime(2023, 7, 9, tzinfo=UTC))
    msg = str(refused.value)
    assert "rolling run issued at 2023-07-09T00:00Z is before the newest run of the rolling " \
           "state, issued at 2023-07-10T00:00Z (interrupted" in msg
    assert "finish that run first" in msg

    # run again: finished from the saved plan, not planned again, not refused
    out = run(db, clock, pipe, DAY1)
    assert out is not None and out.status == "succeeded", out
    assert out.plan_id in first
    rec = db.get_run(DAY1)
    assert (rec["status"], rec["plan_id"], rec["attempts"]) == ("succeeded", out.plan_id, 2)
    assert "was stopped after it saved its rolling state" in rec["notes"]
    assert "finished from that plan, not planned again" in rec["notes"]

    day1 = observed(db, backend)
    assert day1 == ref_day1
    # the real values: one plan; the morning job committed and submitted once, at 05:00; the
    # evening job still pending with its tentative start on 07-11; the closed window ended
    assert day1["plans"] == 1
    assert day1["rolling"]["morning"][:2] == ("Dispatched", "Placed")
    assert day1["rolling"]["morning"][3] == datetime(2023, 7, 10, 5, tzinfo=UTC)
    assert day1["rolling"]["evening"][:2] == ("Pending", "NotCommitted")
    assert day1["rolling"]["evening"][3] >= DAY2
    assert day1["rolling"]["late-arrival"][:2] == ("Failed", "DeadlinePassed")
    keys = [k for k, *_ in day1["outbox"]]
    assert "morning#0" in keys and len(keys) == len(set(keys))
    assert set(day1["backend"]) == set(keys)
    assert set(day1["submissions"].values()) == {1}
    # the API job: committed at 12:00 and recorded as dispatch holds it, from the one plan
    assert "api-1#0" in keys
    assert day1["api"][:4] == ("Dispatched", "Submitted", "de-frankfurt",
                               datetime(2023, 7, 10, 12, tzinfo=UTC))
    assert day1["api"][-1] == 0

    # just at the limit: the same issue time once it is done is not run again (the record
    # says succeeded); nothing is planned, written or submitted
    assert run(db, clock, pipe, DAY1) is None
    assert observed(db, backend) == day1

    # the next run carries on from the finished run's state as from the uninterrupted one's
    for c in (clock, ref_clock):
        c.set(datetime(2023, 7, 10, 23, 0, tzinfo=UTC))
    assert run(ref_db, ref_clock, ref_pipe, DAY2).status == "succeeded"
    assert run(db, clock, pipe, DAY2).status == "succeeded"
    day2 = observed(db, backend)
    assert day2 == observed(ref_db, ref_backend)
    assert day2["rolling"]["evening"][:2] == ("Dispatched", "Placed")
    assert set(day2["submissions"].values()) == {1}


# `carbonsched plan --dispatch --rolling --date 2023-07-10` (its function, as the CLI's main
# runs it: SIGINT and SIGTERM raise Interrupted) on a clock pinned at 01:00 that day, so that
# dispatch submits the morning's work; with STOP_WITH, a real signal to itself right after the
# commit of the rolling state's write
PLAN_DISPATCH = """
import os, signal, sys
from datetime import UTC, datetime
from sqlalchemy import event
from sqlalchemy.orm import Session
from carbonsched.cli.interrupts import handle_signals, interrupted_line
from carbonsched.cli.service import plan_and_dispatch
from carbonsched.clock import ManualClock
from carbonsched.errors import Interrupted
from carbonsched.store.rolling_models import RollingJobRow

if os.environ.get("STOP_WITH"):
    SIG = getattr(signal, os.environ["STOP_WITH"])

    @event.listens_for(Session, "after_flush")
    def mark(session, ctx):
        if any(isinstance(o, RollingJobRow) for o in [*session.new, *session.dirty]):
            session.info["rolling_saved"] = True

    @event.listens_for(Session, "after_commit")
    def stop(session):
        if session.info.pop("rolling_saved", False):
            os.kill(os.getpid(), SIG)

catalog, jobs, data = sys.argv[1:4]
handle_signals()
try:
    code = plan_and_dispatch("2023-07-10", catalog, jobs, data, "highs", 30.0, 72, None,
                             rolling=True, clock=ManualClock(datetime(2023, 7, 10, 1,
                                                                      tzinfo=UTC)))
except Interrupted as exc:
    print(interrupted_line(exc), file=sys.stderr)
    sys.exit(exc.exit_code)
sys.exit(code)
"""


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGKILL"])
def test_cli_run_again_after_a_signal_after_the_state_was_saved(tmp_path, shared_data, sig):
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    backend = KeyedBackend(tmp_path / "backend.json")
    env = {**os.environ, "CARBONSCHED_DATABASE_URL": url, "KEYED_BACKEND_FILE":
           str(backend.path), "CARBONSCHED_DISPATCHER": "tests.service.keyed_backend:dispatch",
           "CARBONSCHED_LEASE_S": "1"}
    args = [CATALOG, workload(tmp_path), str(shared_data)]

    def plan_dispatch(**extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", PLAN_DISPATCH, *args],
                              capture_output=True, text=True, env={**env, **extra},
                              timeout=600)

    stopped = plan_dispatch(STOP_WITH=sig)
    db = ServiceStore(Store(url))
    rec = db.get_run("2023-07-10")
    if sig == "SIGTERM":
        assert stopped.returncode == 143, stopped.stderr[-2000:]
        assert "interrupted: SIGTERM; run 2023-07-10 recorded interrupted" in stopped.stderr
        assert rec["status"] == "interrupted"
    else:
        assert stopped.returncode == -signal.SIGKILL, stopped.stderr[-2000:]
        assert rec["status"] == "running"          # until its lease (1 s) runs out
        time.sleep(max(0.0, (rec["lease_expires_at"] - datetime.now(UTC)).total_seconds())
                   + 0.5)
    saved = {r["job_id"]: r for r in RollingStore(db.store).rows()}
    (plan_id,) = {r["plan_id"] for r in saved.values()}
    on_backend = backend.jobs()
    assert set(on_backend) == {"morning#0"}        # dispatched before the state was saved

    again = plan_dispatch()
    assert again.returncode == 0, again.stderr[-3000:]
    assert "was stopped after it saved its rolling state" in again.stderr
    rec = db.get_run("2023-07-10")
    assert (rec["status"], rec["plan_id"]) == ("succeeded", plan_id)
    assert [p["plan_id"] for p in db.store.list_plans("2023-07-10")] == [plan_id]
    rows = {r["job_id"]: r for r in RollingStore(db.store).rows()}
    assert rows == saved
    assert rows["morning"]["state"] == "Dispatched"
    assert rows["morning"]["start"] == datetime(2023, 7, 10, 5, tzinfo=UTC)
    assert rows["evening"]["state"] == "Pending"
    assert rows["late-arrival"]["state"] == "Failed"
    assert backend.jobs() == on_backend and backend.submissions() == {"morning#0": 1}
    with Session(db.store.engine) as s:
        assert [(r.key, r.plan_id, r.state) for r in s.scalars(select(DispatchRow))] == [
            ("morning#0", plan_id, "Dispatched")]

    # the same issue time once done: the CLI says so, as the cron's claim does; nothing new
    done = plan_dispatch()
    assert done.returncode == 0, done.stderr[-3000:]
    assert "planning date 2023-07-10 already has a run (succeeded" in done.stderr
    assert [p["plan_id"] for p in db.store.list_plans("2023-07-10")] == [plan_id]
    assert backend.submissions() == {"morning#0": 1}


def test_cli_refuses_a_missed_run_before_the_newest_one_naming_it(tmp_path, shared_data,
                                                                  monkeypatch):
    from typer.testing import CliRunner

    from carbonsched.cli.app import app

    url = f"sqlite:///{tmp_path / 'cli.sqlite'}"
    monkeypatch.setenv("CARBONSCHED_DATABASE_URL", url)
    monkeypatch.delenv("CARBONSCHED_DISPATCHER", raising=False)
    args = ["plan", "--dispatch", "--rolling", "--catalog", CATALOG, "--jobs",
            workload(tmp_path), "--data-dir", str(shared_data), "--hours", "72"]
    newer = CliRunner().invoke(app, [*args, "--date", "2023-07-11"])
    assert newer.exit_code == 0, newer.output
    db = ServiceStore(Store(url))
    state = RollingStore(db.store).rows()
    plans = db.store.list_plans()

    missed = CliRunner().invoke(app, [*args, "--date", "2023-07-10"])
    assert missed.exit_code == 2, missed.output
    text = " ".join(missed.stderr.split())
    assert ("rolling run issued at 2023-07-10T00:00Z is before the newest run of the rolling "
            "state, issued at 2023-07-11T00:00Z (succeeded, plan "
            f"{plans[0]['plan_id'][:12]})") in text
    assert "a missed rolling run is not run afterwards" in text
    assert "drop --date to run the run due now" in text
    # refused before a run record was claimed for it: nothing written
    assert db.get_run("2023-07-10") is None
    assert RollingStore(db.store).rows() == state and db.store.list_plans() == plans
