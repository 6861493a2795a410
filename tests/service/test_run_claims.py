"""A run takes its side effects only while its claim holds, and in an order a crash can't
turn into lost work.

* A rolling run records its rolling state ("committed") only once dispatch wrote its intents:
  before, a dispatch that failed (or a process that died before it) left the jobs recorded
  as dispatched with no intent anywhere: never run, and their capacity held for ever.
* An outage met while dispatching interrupts the run (retried once its lease runs out);
  before, it was recorded final as ``dispatch_failed`` and never retried.
* A run whose record another replica took over stops before its next side effect; before, it
  stored its plan, recorded its state and dispatched alongside the other.

Real pipeline on the Frankfurt fixture catalog, SQLite stores.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from carbonsched.clock import ManualClock
from carbonsched.errors import StoreUnavailableError
from carbonsched.service.runs import claim_and_run, planning_pipeline
from carbonsched.store import Store
from carbonsched.store.rolling_state import RollingStore
from carbonsched.store.service import ServiceStore
from tests.service.test_rolling_service import settings

pytestmark = pytest.mark.shared_data

ISSUED = datetime(2023, 7, 10, tzinfo=UTC)


def _run(tmp_path, shared_data, dispatch, db=None):
    url = f"sqlite:///{tmp_path / 's.db'}"
    db = db or ServiceStore(Store(url))
    clock = ManualClock(datetime(2023, 7, 9, 23, 0, tzinfo=UTC))
    pipe = planning_pipeline(settings(tmp_path, shared_data, url), db, clock, dispatch)
    out = claim_and_run(db, clock, pipe, planning_date="2023-07-10", issued_at=ISSUED,
                        trigger="scheduled", replica="r1", lease=timedelta(minutes=5))
    return out, db


def _states(db) -> dict[str, str]:
    return {r["job_id"]: r["state"] for r in RollingStore(db.store).rows()}


def test_a_failed_dispatch_leaves_the_rolling_state_unadvanced(tmp_path, shared_data):
    def broken(store, plan_id, catalog, *, clock, commit_before):
        raise RuntimeError("adapter for site de-fra could not be built")

    out, db = _run(tmp_path, shared_data, broken)
    assert out.status == "dispatch_failed"
    # before: "morning" read Dispatched although no intent was ever written
    assert "Dispatched" not in _states(db).values()
    rec = db.get_run("2023-07-10")
    assert rec["status"] == "dispatch_failed"
    assert ("the rolling state was not advanced (dispatch failed): the next run plans this "
            "run's work again") in rec["notes"]


def test_a_dispatch_that_works_advances_it(tmp_path, shared_data):
    # at the limit: dispatch returns (nothing to submit) -> the state is recorded
    def fine(store, plan_id, catalog, *, clock, commit_before):
        return {"counts": {}}

    out, db = _run(tmp_path, shared_data, fine)
    assert out.status == "succeeded" and _states(db)["morning"] == "Dispatched"


def test_an_outage_while_dispatching_interrupts_the_run_for_a_retry(tmp_path, shared_data):
    def outage(store, plan_id, catalog, *, clock, commit_before):
        raise StoreUnavailableError("sqlite", "writing intents", "disk I/O error", "retry")

    with pytest.raises(StoreUnavailableError):
        _run(tmp_path, shared_data, outage)
    db = ServiceStore(Store(f"sqlite:///{tmp_path / 's.db'}"))
    assert db.get_run("2023-07-10")["status"] == "interrupted"   # before: dispatch_failed
    assert "Dispatched" not in _states(db).values()


def test_a_run_taken_over_stops_before_its_next_side_effect(tmp_path, shared_data):
    db = ServiceStore(Store(f"sqlite:///{tmp_path / 's.db'}"))
    called = []

    def dispatch(store, plan_id, catalog, *, clock, commit_before):
        called.append(plan_id)
        return {"counts": {}}

    db.renew_run = lambda key, owner, lease: False     # another replica holds the record now
    out, _ = _run(tmp_path, shared_data, dispatch, db)
    assert out is None
    assert db.store.list_plans() == [] and called == [] and _states(db) == {}
