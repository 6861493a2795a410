"""A stopped run that can never be finished is given up by an operator, once.

A rolling run issued at T that stored its plan, dispatched part of it and was stopped is
finished from that plan by the next run (:func:`carbonsched.service.runs.finish_stopped_runs`).
When that plan is gone (a restore from an older backup, a table emptied by hand) it can never be
finished, and before ``carbonsched runs abandon`` every later rolling run was refused for good
(``RunBlockedError``, exit 3, the same message at every issue time): the service planned
nothing until someone edited the database. Now an operator gives T up with a reason; the next
run plans on the rolling state as the last finished run left it, and does not place again (nor
book twice) the jobs whose units T's dispatch recorded: they stay the claims of their jobs.

In process, on SQLite, with the file-kept keyed backend (:mod:`tests.service.keyed_backend`);
the CLI in a subprocess on the same store.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import event, text

from carbonsched.errors import InputError, Interrupted, RunBlockedError
from carbonsched.store import Store
from carbonsched.store.rolling_state import RollingStore
from carbonsched.store.service import ServiceStore
from tests.service.test_resume_during_dispatch import Service, at
from tests.service.test_rolling_resume import DAY1, DAY2, run
from tests.service.test_stopped_before_next_run import EVE, stopped_during_dispatch

T0 = datetime(2023, 7, 10, 6, 0, tzinfo=UTC)


def _lose_plan(db: ServiceStore, plan_id: str) -> None:
    """The plan's rows gone from the store, as after a restore from an older backup."""
    with db.store.engine.begin() as c:
        for table in ("placements", "inference_placements", "forecasts", "plans"):
            c.execute(text(f"DELETE FROM {table} WHERE plan_id = :p"), {"p": plan_id})


def _records(tmp_path, start: datetime = T0) -> tuple[ServiceStore, list[datetime]]:
    """A store whose lease clock is the test's: one record per status the rule tells apart."""
    now = [start]
    db = ServiceStore(Store(f"sqlite:///{tmp_path / 's.db'}"), lease_clock=lambda: now[0])
    lease = timedelta(minutes=10)
    for hour, status in ((0, "succeeded"), (6, "running"), (12, "interrupted")):
        issued = datetime(2023, 7, 10, hour, tzinfo=UTC)
        owner = db.claim_run("2023-07-10", "2023-07-10", issued, "scheduled", "r1", now[0],
                             lease)
        assert owner
        db.record_run_plan(issued, owner, f"plan-{hour:02d}")
        if status != "running":
            db.finish_run(issued, now[0], status, owner, retry_after=timedelta(hours=1)
                          if status == "interrupted" else None, error="store unavailable")
    return db, now


def test_abandon_refuses_what_is_not_a_stopped_run_and_takes_one_that_is(tmp_path):
    db, now = _records(tmp_path)
    with pytest.raises(InputError, match=r"no run record issued at 2023-07-11T00:00Z; "
                       r"`carbonsched runs list`"):
        db.abandon_run("2023-07-11", "plan lost", now[0])
    with pytest.raises(InputError, match=r"run 2023-07-10T00:00Z is succeeded, which is final"):
        db.abandon_run("2023-07-10", "plan lost", now[0])
    with pytest.raises(InputError, match="give a reason"):
        db.abandon_run("2023-07-10T12:00Z", "  \n ", now[0])

    # running under a live lease: refused, at the limit too (the lease's last instant)
    key = datetime(2023, 7, 10, 6, tzinfo=UTC)
    until = db.get_run(key)["lease_expires_at"]
    now[0] = until
    with pytest.raises(InputError, match=r"run 2023-07-10T06:00Z is running on r1: its lease "
                       r"runs until .*stop that process"):
        db.abandon_run(key, "plan lost", now[0])
    assert db.get_run(key)["status"] == "running"
    # a microsecond after it, its owner is dead: taken
    now[0] = until + timedelta(microseconds=1)
    rec = db.abandon_run(key, "plan lost in the restore of 07-10", now[0])
    assert (rec["status"], rec["plan_id"], rec["owner"], rec["lease_expires_at"]) == (
        "abandoned", "plan-06", None, None)
    assert rec["error"].startswith("abandoned by an operator: plan lost in the restore of "
                                   "07-10; it had stored plan plan-06 (was running: ")
    # final: no claim takes it again, and it cannot be abandoned twice
    assert db.claim_run("2023-07-10", "2023-07-10", key, "scheduled", "r2", now[0],
                        timedelta(minutes=10)) is None
    with pytest.raises(InputError, match="is abandoned, which is final"):
        db.abandon_run(key, "again", now[0])

    # interrupted (an outage; its retry time not come yet): nobody holds it, so it is taken
    rec = db.abandon_run("2023-07-10T12:00Z", "gave up", now[0])
    assert rec["status"] == "abandoned" and "(was interrupted: store unavailable)" in rec["error"]
    assert db.stopped_runs(None, datetime(2023, 7, 11, tzinfo=UTC)) == []


def test_abandon_loses_to_an_owner_that_renews_its_lease_meanwhile(tmp_path):
    """A slow owner (a GC pause, a partition) renews its lease between abandon's read and its
    update: the run is going on, so abandon is refused and the record stays the owner's
    (before: the update matched on status and attempts alone and abandoned a live run)."""
    db, now = _records(tmp_path)
    key = datetime(2023, 7, 10, 6, tzinfo=UTC)
    owner = db.get_run(key)["owner"]
    now[0] = db.get_run(key)["lease_expires_at"] + timedelta(seconds=1)   # lease ran out

    renewed = []

    def renew_first(conn, cursor, statement, params, context, executemany):
        if (statement.startswith("UPDATE pipeline_runs") and "abandoned" in str(params)
                and not renewed):
            renewed.append(db.renew_run(key, owner, timedelta(minutes=10)))

    event.listen(db.engine, "before_cursor_execute", renew_first)
    with pytest.raises(InputError, match="was claimed \\(or its lease renewed\\) while it "
                       "was being abandoned: it is running"):
        db.abandon_run(key, "plan lost", now[0])
    event.remove(db.engine, "before_cursor_execute", renew_first)
    assert renewed == [True]
    rec = db.get_run(key)
    assert (rec["status"], rec["owner"]) == ("running", owner)
    assert rec["lease_expires_at"] == now[0] + timedelta(minutes=10)


def test_a_rolling_run_that_cannot_be_finished_is_abandoned_and_the_next_run_plans(
        tmp_path, shared_data):
    svc = stopped_during_dispatch(tmp_path, shared_data, "lost")
    (t_plan,) = [p["plan_id"] for p in svc.db.store.list_plans()]
    # DAY1's dispatch wrote both committed units' intents, submitted the file's morning job
    # and was stopped: the API job's intent waits in the outbox, its record still Pending
    assert [(k, st) for k, st, *_ in svc.outbox()] == [("api-1#0", "Pending"),
                                                       ("morning#0", "Pending")]
    assert list(svc.backend.jobs()) == ["morning#0"]
    assert svc.db.get_job("api-1")["state"] == "Pending"
    _lose_plan(svc.db, t_plan)
    svc.db.lease_clock = svc.clock.now            # leases (and retry times) on the test's clock
    svc.clock.set(EVE)

    # before: every later run is refused, each retry again, and says how to get out
    for _ in range(2):
        with pytest.raises(RunBlockedError) as blocked:
            run(svc.db, svc.clock, svc.pipe(rolling=True), DAY2)
        svc.clock.set(svc.clock.now() + timedelta(minutes=1))   # after DAY2's retry time
    msg = str(blocked.value)
    assert "cannot be finished from it" in msg and "no longer holds" in msg
    assert "give it up: `carbonsched runs abandon 2023-07-10T00:00Z --reason TEXT`" in msg
    assert svc.db.store.list_plans() == []

    rec = svc.db.abandon_run(DAY1, "plan lost in a restore", svc.clock.now())
    assert rec["status"] == "abandoned"
    out = run(svc.db, svc.clock, svc.pipe(rolling=True), DAY2)
    assert out is not None and out.status == "succeeded", out
    doc = svc.db.store.get_plan(out.plan_id)
    # the jobs whose claims DAY1's dispatch wrote are not placed again (the API job's record
    # said Pending: before, a run would have placed it a second time); the evening job is new
    assert [p["job_id"] for p in doc["placements"]] == ["evening"]
    notes = " ".join(doc["notes"])
    assert ("1 job(s) of the workload file were not planned again: dispatch holds them and "
            "they have not ended (job 'morning' Dispatched, dispatched from plan "
            f"{t_plan[:12]})") in notes
    assert ("1 job(s) submitted through the API were not planned again: dispatch holds them "
            "and they have not ended (job 'api-1' Dispatched, dispatched from plan "
            f"{t_plan[:12]})") in notes
    # DAY2's dispatch drove the waiting intent as DAY1 placed it: each unit submitted once
    assert svc.backend.submissions() == {"morning#0": 1, "api-1#0": 1, "evening#0": 1}
    assert svc.backend.jobs()["api-1#0"]["start"] == at(12).isoformat()
    api = svc.db.get_job("api-1")               # its record follows the outbox from now on
    assert (api["state"], api["plan_id"]) == ("Dispatched", t_plan)
    assert RollingStore(svc.db.store).last_run()[0] == DAY2
    assert svc.db.get_run(DAY1)["status"] == "abandoned"
    # the same issue time is not run again: the cron's claim sees it final
    assert run(svc.db, svc.clock, svc.pipe(rolling=True), DAY1) is None


def test_a_job_the_state_carries_that_an_abandoned_run_dispatched_is_not_planned_again(
        tmp_path, shared_data):
    """DAY1 carries the evening job as waiting; DAY2 commits it, its dispatch writes the
    claim, and DAY2 is stopped before it saves the state, loses its plan and is given up. The
    next run plans on DAY1's state, which still carries the evening job."""
    svc = Service.make(tmp_path, shared_data, "carried")
    assert run(svc.db, svc.clock, svc.pipe(rolling=True), DAY1).status == "succeeded"
    assert [r["state"] for r in RollingStore(svc.db.store).rows()
            if r["job_id"] == "evening"] == ["Pending"]
    svc.clock.set(EVE)
    with pytest.raises(Interrupted):
        run(svc.db, svc.clock, svc.pipe(rolling=True, stop_after=0), DAY2)
    d2 = svc.db.get_run(DAY2)
    (claim,) = [(k, st, site, start) for k, st, site, start, pid in svc.outbox()
                if k == "evening#0"]
    assert claim[1] == "Pending" and claim[3] >= DAY2
    _lose_plan(svc.db, d2["plan_id"])
    svc.db.lease_clock = svc.clock.now
    svc.clock.set(datetime(2023, 7, 11, 1, tzinfo=UTC))
    svc.db.abandon_run(DAY2, "plan lost", svc.clock.now())

    t3 = datetime(2023, 7, 11, 1, tzinfo=UTC)
    out = run(svc.db, svc.clock, svc.pipe(rolling=True), t3)
    assert out is not None and out.status == "succeeded", out
    doc = svc.db.store.get_plan(out.plan_id)
    # before the fix: placed again by this plan (a second booking; the unit runs as DAY2's
    # claim says) and committed again in the state
    assert "evening" not in {p["job_id"] for p in doc["placements"]}
    assert doc["rolling"]["committed"] == []
    ended = {u["job_id"]: u["reason"] for u in doc["rolling"]["ended"]}
    assert ended == {"evening": "AlreadyDispatched"}
    row = next(r for r in RollingStore(svc.db.store).rows() if r["job_id"] == "evening")
    assert (row["state"], row["reason"]) == ("Failed", "AlreadyDispatched")
    assert "job 'evening' Dispatched" in " ".join(doc["notes"])
    # the claim is driven as DAY2 placed it, once
    assert svc.backend.submissions() == {"morning#0": 1, "api-1#0": 1, "evening#0": 1}
    assert svc.backend.jobs()["evening#0"]["start"] == claim[3].isoformat()


def _cli(url: str, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, CARBONSCHED_DATABASE_URL=url, COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "carbonsched.cli", "runs", *args], env=env,
                          capture_output=True, text=True, timeout=120)


def test_cli_lists_runs_and_abandons_a_stopped_one(tmp_path):
    # the CLI's lease clock is the database's (the host's): the records are made on it
    db, _ = _records(tmp_path, datetime.now(UTC))
    url = str(db.store.engine.url)
    listed = _cli(url, "list")
    assert listed.returncode == 0, listed.stderr
    assert "2023-07-10T12:00Z" in listed.stdout and "interrupted" in listed.stdout
    # the interrupted run is named; the running one is not: its lease is live (a run going on)
    assert ("1 run(s) stopped after storing a plan (2023-07-10T12:00Z):"
            in " ".join(listed.stdout.split()))

    refused = _cli(url, "abandon", "2023-07-10", "--reason", "x")
    assert refused.returncode == 2
    assert "run 2023-07-10T00:00Z is succeeded, which is final" in refused.stderr
    missing = _cli(url, "abandon", "2023-07-10T12:00Z")
    assert missing.returncode == 2 and "--reason" in missing.stderr

    done = _cli(url, "abandon", "2023-07-10T12:00Z", "--reason", "plan lost")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "abandoned"
    assert "run 2023-07-10T12:00Z abandoned: no claim runs it again" in done.stderr
    assert "plan plan-12's dispatch recorded stay on their clusters" in " ".join(
        done.stderr.split())
    assert db.get_run("2023-07-10T12:00Z")["status"] == "abandoned"
    # the lease of the running record (10 min) is live on the host's clock: refused
    live = _cli(url, "abandon", "2023-07-10T06:00Z", "--reason", "x")
    assert live.returncode == 2 and "is running on r1" in live.stderr
