"""The service prunes the store once a day on its leader when CARBONSCHED_RETENTION_DAYS > 0.

:class:`~carbonsched.service.loops.ServiceLoops` adds an hourly ``prune`` job that acts on the
leader once a day; with the setting at 0 (the default) there is no job and nothing is deleted.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from carbonsched.clock import ManualClock
from carbonsched.config import Settings
from carbonsched.service.loops import PRUNE_EVERY_S, ServiceLoops
from carbonsched.service.metrics import ServiceMetrics
from carbonsched.store import Store
from carbonsched.store.service import ServiceStore
from carbonsched.store.signal_models import SignalFetchRow

NOW = datetime.now(UTC).replace(microsecond=0)


class Leader:
    """A leader's lease that this replica holds (or not)."""

    def __init__(self, held: bool = True) -> None:
        self.held = held

    def try_acquire(self) -> bool:
        return self.held


def _loops(tmp_path, days: int, held: bool = True) -> ServiceLoops:
    db = ServiceStore(Store(f"sqlite:///{tmp_path}/s.db"))
    with Session(db.engine) as s, s.begin():
        for age in (40, 2):
            at = NOW - timedelta(days=age)
            s.add(SignalFetchRow(provider="p", zone="z", signal="carbon", start=at, end=at,
                                 fetched_at=at, status="ok"))
    return ServiceLoops(Settings(retention_days=days), db, None, ManualClock(NOW),
                        ServiceMetrics(), Leader(held))


def _fetches(loops: ServiceLoops) -> int:
    with Session(loops.db.engine) as s:
        return len(s.scalars(select(SignalFetchRow.id)).all())


def test_the_leader_prunes_once_a_day_when_retention_is_set(tmp_path):
    loops = _loops(tmp_path, 30)
    assert loops.prune_pass() == "ok"
    assert _fetches(loops) == 1                      # the 40-day-old fetch went
    assert loops.prune_pass() == "not_due"           # once a day
    loops.last_prune = time.monotonic() - PRUNE_EVERY_S - 1
    assert loops.prune_pass() == "ok"
    assert loops.metrics.loop_runs.labels(loop="prune", outcome="ok")._value.get() == 2


def test_a_standby_replica_does_not_prune(tmp_path):
    loops = _loops(tmp_path, 30, held=False)
    assert loops.prune_pass() == "standby"
    assert _fetches(loops) == 2


def test_retention_0_prunes_nothing(tmp_path):
    loops = _loops(tmp_path, 0)
    assert loops.prune_pass() == "off"
    assert _fetches(loops) == 2


@pytest.mark.parametrize(("days", "job"), [(30, True), (0, False)])
def test_the_prune_job_is_scheduled_only_when_retention_is_set(tmp_path, days, job):
    loops = _loops(tmp_path, days)
    loops.start()
    try:
        assert (loops._scheduler.get_job("prune") is not None) is job
    finally:
        loops.stop()
