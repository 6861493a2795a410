"""A rolling run stopped after it stored its plan is finished before the next issue time plans.

The cron claims only the newest due issue time. A rolling run issued at T that stored and named
its plan, dispatched part of it and was stopped before it saved the rolling state (kill -9, a
lost node, a restart after T + N), and that nobody ran again before T + N, was left behind: the
run issued at T + N planned on the state as of before T, so it planned T's jobs again (the API
job T committed at 07-10 12:00 and dispatched was committed again at 07-11 11:00, a placement
that is not what runs, while the real unit held nothing in its plan), and T was refused for good
as a run before the newest one. Now T + N finishes T first, from T's plan (one code path with
the resume of T itself), then plans on T's state; a T that another replica holds under a live
lease is not taken over: T + N waits for it (retried after its lease) instead of planning.

In process, on SQLite, with the file-kept keyed backend (:mod:`tests.service.keyed_backend`);
T stopped by :class:`Interrupted` from the backend's ``submit`` after its first submission.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from carbonsched.errors import Interrupted, RunBlockedError
from carbonsched.store.rolling_state import RollingStore
from tests.service.test_resume_during_dispatch import Service, at
from tests.service.test_rolling_resume import DAY1, DAY2, observed, run

pytestmark = pytest.mark.shared_data

EVE = datetime(2023, 7, 10, 23, 0, tzinfo=UTC)
"""When the cron claims the run issued at DAY2 (07-11 00:00), nobody having run DAY1 again."""


def stopped_during_dispatch(tmp_path, shared_data, name: str) -> Service:
    """A service whose run issued at DAY1 stopped after submitting one unit of its plan."""
    svc = Service.make(tmp_path, shared_data, name)
    with pytest.raises(Interrupted):
        run(svc.db, svc.clock, svc.pipe(rolling=True, stop_after=1), DAY1)
    rec = svc.db.get_run(DAY1)
    assert rec["status"] == "interrupted" and rec["plan_id"]
    assert RollingStore(svc.db.store).rows() == []       # stopped before its state was saved
    # one unit on its cluster already (which of the two the pool's threads took first varies)
    assert len(list(svc.backend.jobs())) == 1
    assert set(svc.backend.jobs()) <= {"morning#0", "api-1#0"}
    return svc


def reference(tmp_path, shared_data) -> Service:
    """The same service, never stopped: DAY1 then DAY2, as the cron runs them."""
    ref = Service.make(tmp_path, shared_data, "ref")
    assert run(ref.db, ref.clock, ref.pipe(rolling=True), DAY1).status == "succeeded"
    ref.clock.set(EVE)
    assert run(ref.db, ref.clock, ref.pipe(rolling=True), DAY2).status == "succeeded"
    return ref


def test_the_next_run_finishes_a_run_stopped_during_dispatch_before_it_plans(
        tmp_path, shared_data):
    ref = reference(tmp_path, shared_data)
    want = observed(ref.db, ref.backend)
    # the real values: api-1 committed at DAY1's run, 07-10 12:00 (plan 0), the evening job at
    # DAY2's run, 07-11 11:00 (plan 1); each unit submitted once
    assert want["rolling"]["api-1"][:4] == ("Dispatched", "Placed", "de-frankfurt", at(12))
    assert want["rolling"]["api-1"][-1] == 0
    assert want["rolling"]["morning"][:4] == ("Dispatched", "Placed", "de-frankfurt", at(5))
    assert want["rolling"]["evening"][:4] == ("Dispatched", "Placed", "de-frankfurt",
                                              at(11, day=11))
    assert want["submissions"] == {"morning#0": 1, "api-1#0": 1, "evening#0": 1}

    svc = stopped_during_dispatch(tmp_path, shared_data, "stopped")
    (t_plan,) = [p["plan_id"] for p in svc.db.store.list_plans()]
    # nobody runs DAY1 again: the cron claims the newest due issue time, DAY2
    svc.clock.set(EVE)
    out = run(svc.db, svc.clock, svc.pipe(rolling=True), DAY2)
    assert out is not None and out.status == "succeeded", out
    got = observed(svc.db, svc.backend)
    assert got == want
    # the job DAY1 dispatched is committed where and when it runs, from DAY1's plan, not
    # placed again by DAY2's plan (before: committed at 07-11 11:00 from plan 1)
    assert got["rolling"]["api-1"][:4] == ("Dispatched", "Placed", "de-frankfurt", at(12))
    assert got["rolling"]["api-1"][-1] == 0
    assert set(got["submissions"].values()) == {1}
    doc = svc.db.store.get_plan(out.plan_id)
    assert sorted(p["job_id"] for p in doc["placements"]) == ["evening"]
    assert doc["placements"] == ref.db.store.get_plan(
        ref.db.get_run(DAY2)["plan_id"])["placements"]
    # DAY1 finished from its plan, its record done with the resumed note; DAY2 succeeded
    t_rec = svc.db.get_run(DAY1)
    assert (t_rec["status"], t_rec["plan_id"], t_rec["attempts"]) == ("succeeded", t_plan, 2)
    assert ("was stopped after it stored its plan, before its record was finished (plan "
            f"{t_plan[:12]}): finished from that plan, not planned again") in t_rec["notes"]
    n_rec = svc.db.get_run(DAY2)
    assert (n_rec["status"], n_rec["plan_id"]) == ("succeeded", out.plan_id)
    assert RollingStore(svc.db.store).last_run()[0] == DAY2
    assert len(svc.db.store.list_plans()) == 2


def test_the_next_run_does_not_take_over_a_stopped_run_another_replica_holds(
        tmp_path, shared_data):
    ref = reference(tmp_path, shared_data)
    svc = stopped_during_dispatch(tmp_path, shared_data, "held")
    svc.db.lease_clock = svc.clock.now            # leases on the test's clock
    svc.clock.set(EVE)
    # another replica took DAY1 over and is finishing it: its lease runs until 07-11 00:00
    other = svc.db.claim_run("2023-07-10", "2023-07-10", DAY1, "lease", "r2", svc.clock.now(),
                             timedelta(hours=1))
    assert other
    state, backend = RollingStore(svc.db.store).rows(), svc.backend.submissions()

    with pytest.raises(RunBlockedError) as blocked:
        run(svc.db, svc.clock, svc.pipe(rolling=True), DAY2)
    msg = str(blocked.value)
    assert ("rolling run issued at 2023-07-11T00:00Z is not planned yet: the run issued at "
            "2023-07-10T00:00Z stopped after it stored plan") in msg
    assert "is held by r2 (running" in msg and "tried again after its lease" in msg
    # DAY2 planned nothing, wrote nothing, submitted nothing; DAY1 stays the other replica's
    assert len(svc.db.store.list_plans()) == 1
    assert RollingStore(svc.db.store).rows() == state and svc.backend.submissions() == backend
    t_rec = svc.db.get_run(DAY1)
    assert (t_rec["status"], t_rec["owner"], t_rec["attempts"]) == ("running", other, 2)
    n_rec = svc.db.get_run(DAY2)
    assert n_rec["status"] == "interrupted" and n_rec["plan_id"] is None
    assert "RunBlockedError" in n_rec["error"]

    # the other replica died: once its lease ran out, DAY2's retry finishes DAY1, then plans
    svc.clock.set(datetime(2023, 7, 11, 0, 30, tzinfo=UTC))
    out = run(svc.db, svc.clock, svc.pipe(rolling=True), DAY2)
    assert out is not None and out.status == "succeeded", out
    got, want = observed(svc.db, svc.backend), observed(ref.db, ref.backend)
    assert got["rolling"] == want["rolling"] and got["submissions"] == want["submissions"]
    assert got["rolling"]["api-1"][:4] == ("Dispatched", "Placed", "de-frankfurt", at(12))
    assert svc.db.get_run(DAY1)["status"] == "succeeded"
