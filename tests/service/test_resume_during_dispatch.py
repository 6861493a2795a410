"""A run stopped during its dispatch is finished from the plan it stored, daily or rolling.

A run stores its plan, names it in its run record, dispatches it (the outbox writes every
intent, then submits them one by one), then -- rolling -- saves its rolling state. Stopped
in the middle of the dispatch (SIGTERM, kill -9, a lost database), some units are on their
clusters already. Run again, it is finished from that plan: dispatched again (the outbox
submits each unit once, by its key), then the rolling state saved from it and the API jobs
recorded. Planned again instead, a new plan (here: the service restarted with a catalog that
adds a London site) placed the same jobs elsewhere: the rolling state, the served plan and the
API job said London while the units ran in Frankfurt as the first plan put them.

In process, on SQLite, with a file-kept keyed backend standing in for the schedulers
(:mod:`tests.service.keyed_backend`); the run stopped by :class:`Interrupted` raised from the
backend's ``submit`` after its first submission.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import event, select
from sqlalchemy.orm import Session

from carbonsched.clock import ManualClock
from carbonsched.errors import Interrupted
from carbonsched.service.runs import planning_pipeline
from carbonsched.store.models import DispatchRow, PlanRow
from carbonsched.store.rolling_state import RollingStore
from carbonsched.store.service import ServiceStore
from tests.service.keyed_backend import KeyedBackend, dispatch_to, service_home
from tests.service.test_rolling_resume import API_SPEC, DAY1, DAY2, observed, run
from tests.service.test_rolling_service import CATALOG, settings

pytestmark = pytest.mark.shared_data

LONDON = """
[[sites]]
id = "gb-london"
name = "London"
role = "green-hub"
zone = "GB"
signal_source = "electricitymaps"
latitude = 51.494
longitude = -0.163
timezone = "Europe/London"
it_power_cap_kw = 7.0

[sites.gpus.A100]
count = 2
board_power_w = 400.0

[sites.pue]
pue_min = 1.12

[sites.latency_ms]
frankfurt = 15.0

[sites.backend]
kind = "slurm"
cluster = "london"
partition = "gpu"
"""


def with_london(tmp_path: Path) -> str:
    """The test catalog (same name) with a second A100 site in London: GB's cleaner hours."""
    path = tmp_path / "frankfurt-and-london.toml"
    path.write_text(Path(CATALOG).read_text() + LONDON)
    return str(path)


def at(hour: int, day: int = 10) -> datetime:
    return datetime(2023, 7, day, hour, tzinfo=UTC)


@dataclass
class Service:
    """A service on its own SQLite store and backend file, one API job submitted."""

    dir: Path
    url: str
    db: ServiceStore
    clock: ManualClock
    backend: KeyedBackend
    shared_data: Path

    @classmethod
    def make(cls, tmp_path: Path, shared_data: Path, name: str) -> Service:
        d, url, db, clock, backend = service_home(tmp_path, name, API_SPEC)
        return cls(d, url, db, clock, backend, shared_data)

    def pipe(self, *, rolling: bool, catalog: str = CATALOG, stop_after: int | None = None):
        """The run path as a (re)started process builds it."""
        s = settings(self.dir, self.shared_data, self.url).model_copy(
            update={"rolling": rolling, "catalog": catalog})
        return planning_pipeline(s, self.db, self.clock,
                                 dispatch_to(self.backend.path, stop_after))

    def outbox(self) -> list[tuple]:
        with Session(self.db.store.engine) as s:
            return sorted((r.key, r.state, r.site, r.planned_start, r.plan_id)
                          for r in s.scalars(select(DispatchRow)))


def test_a_rolling_run_stopped_during_dispatch_is_finished_from_its_plan(tmp_path, shared_data):
    london = with_london(tmp_path)
    # the reference: the same service, never stopped
    ref = Service.make(tmp_path, shared_data, "ref")
    assert run(ref.db, ref.clock, ref.pipe(rolling=True), DAY1).status == "succeeded"
    want = observed(ref.db, ref.backend)
    # the real values: the morning job and the API job committed in Frankfurt at 05:00 and
    # 12:00, each submitted once; the evening job still pending
    assert want["rolling"]["morning"][:4] == ("Dispatched", "Placed", "de-frankfurt", at(5))
    assert want["rolling"]["api-1"][:4] == ("Dispatched", "Placed", "de-frankfurt", at(12))
    assert want["rolling"]["evening"][:2] == ("Pending", "NotCommitted")
    assert want["backend"] == {"morning#0": ("de-frankfurt", at(5).isoformat(), 0),
                               "api-1#0": ("de-frankfurt", at(12).isoformat(), 0)}
    assert want["submissions"] == {"morning#0": 1, "api-1#0": 1}
    assert want["api"][:4] == ("Dispatched", "Submitted", "de-frankfurt", at(12))

    svc = Service.make(tmp_path, shared_data, "stopped")
    with pytest.raises(Interrupted):
        run(svc.db, svc.clock, svc.pipe(rolling=True, stop_after=1), DAY1)
    (plan,) = [p["plan_id"] for p in svc.db.store.list_plans()]
    stopped = svc.db.get_run(DAY1)
    assert stopped["status"] == "interrupted"
    assert RollingStore(svc.db.store).rows() == []    # stopped before the state was saved
    assert [k for k, *_ in svc.outbox()] == ["api-1#0", "morning#0"]   # both intents written
    assert len(svc.backend.jobs()) == 1                # one unit is on its cluster already

    # the process restarts with London in its catalog: a plan made now would put the morning
    # job in London and leave the API job pending for 07-12 (London); run again, the run is
    # finished from the plan it stored instead
    out = run(svc.db, svc.clock, svc.pipe(rolling=True, catalog=london), DAY1)
    assert out is not None and out.status == "succeeded", out
    got = observed(svc.db, svc.backend)
    assert got == want
    assert [p["plan_id"] for p in svc.db.store.list_plans()] == [plan] == [out.plan_id]
    # the stopped attempt's record named the plan it stored, before dispatching it
    assert stopped["plan_id"] == plan
    rec = svc.db.get_run(DAY1)
    assert (rec["status"], rec["plan_id"], rec["attempts"]) == ("succeeded", plan, 2)
    assert ("was stopped after it stored its plan, before its record was finished (plan "
            f"{plan[:12]}): finished from that plan, not planned again") in rec["notes"]
    assert [(k, st, site, start) for k, st, site, start, _ in svc.outbox()] == [
        ("api-1#0", "Dispatched", "de-frankfurt", at(12)),
        ("morning#0", "Dispatched", "de-frankfurt", at(5))]

    # the next run, both on the London catalog, carries on from the state alike
    for s in (svc, ref):
        s.clock.set(datetime(2023, 7, 10, 23, 0, tzinfo=UTC))
    assert run(ref.db, ref.clock, ref.pipe(rolling=True, catalog=london), DAY2).status \
        == "succeeded"
    assert run(svc.db, svc.clock, svc.pipe(rolling=True, catalog=london), DAY2).status \
        == "succeeded"
    day2 = observed(svc.db, svc.backend)
    assert day2 == observed(ref.db, ref.backend)
    assert day2["rolling"]["morning"][:4] == ("Dispatched", "Placed", "de-frankfurt", at(5))
    assert set(day2["submissions"].values()) == {1}


def served(svc: Service) -> dict:
    """What a daily run left: the served plan's placements, the outbox, backend and API job."""
    plans = [p["plan_id"] for p in svc.db.store.list_plans()]
    doc = svc.db.store.get_plan(svc.db.latest_plan_id("frankfurt"))
    api = svc.db.get_job("api-1")
    return {"plans": len(plans),
            "placements": {p["job_id"]: (p["site"], p["start"]) for p in doc["placements"]},
            "unplaced": sorted(u["job_id"] for u in doc["unplaced"]),
            "outbox": [(k, st, site, start) for k, st, site, start, _ in svc.outbox()],
            "outbox_plans": {pid == doc["plan_id"] for *_, pid in svc.outbox()},
            "backend": {k: (j["site"], j["start"]) for k, j in svc.backend.jobs().items()},
            "submissions": svc.backend.submissions(),
            "api": (api["state"], api["reason"], api["site"], api["start"],
                    api["plan_id"] == doc["plan_id"])}


def test_a_daily_run_stopped_during_dispatch_is_finished_from_its_plan(tmp_path, shared_data):
    london = with_london(tmp_path)
    ref = Service.make(tmp_path, shared_data, "ref")
    assert run(ref.db, ref.clock, ref.pipe(rolling=False), DAY1).status == "succeeded"
    want = served(ref)
    # the real values: every job in Frankfurt, each unit submitted once from the served plan
    assert want["placements"] == {"morning": ("de-frankfurt", "2023-07-10T05:00:00Z"),
                                  "api-1": ("de-frankfurt", "2023-07-10T12:00:00Z"),
                                  "evening": ("de-frankfurt", "2023-07-11T10:00:00Z")}
    assert want["backend"] == {"morning#0": ("de-frankfurt", at(5).isoformat()),
                               "api-1#0": ("de-frankfurt", at(12).isoformat()),
                               "evening#0": ("de-frankfurt", at(10, day=11).isoformat())}
    assert want["submissions"] == {"morning#0": 1, "api-1#0": 1, "evening#0": 1}
    assert want["outbox_plans"] == {True}
    assert want["api"] == ("Dispatched", "Submitted", "de-frankfurt", at(12), True)

    svc = Service.make(tmp_path, shared_data, "stopped")
    with pytest.raises(Interrupted):
        run(svc.db, svc.clock, svc.pipe(rolling=False, stop_after=1), DAY1)
    (plan,) = [p["plan_id"] for p in svc.db.store.list_plans()]
    stopped = svc.db.get_run(DAY1)
    assert stopped["status"] == "interrupted"
    assert len(svc.backend.jobs()) == 1

    # restarted with London in its catalog; a plan made now would serve London placements
    out = run(svc.db, svc.clock, svc.pipe(rolling=False, catalog=london), DAY1)
    assert out is not None and out.status == "succeeded", out
    got = served(svc)
    assert got == want
    assert got["plans"] == 1 and out.plan_id == plan == stopped["plan_id"]
    assert "finished from that plan, not planned again" in svc.db.get_run(DAY1)["notes"]


def test_a_run_stopped_before_its_plan_was_stored_is_planned_again(tmp_path, shared_data):
    """Nothing is dispatched before the plan is stored and named: planning again is right."""
    london = with_london(tmp_path)
    svc = Service.make(tmp_path, shared_data, "stopped")

    def stop(session: Session, ctx: object, instances: object) -> None:
        if any(isinstance(o, PlanRow) for o in session.new):
            raise Interrupted(15)

    event.listen(Session, "before_flush", stop)
    try:
        with pytest.raises(Interrupted):
            run(svc.db, svc.clock, svc.pipe(rolling=True), DAY1)
    finally:
        event.remove(Session, "before_flush", stop)
    rec = svc.db.get_run(DAY1)
    assert (rec["status"], rec["plan_id"]) == ("interrupted", None)
    assert svc.db.store.list_plans() == [] and svc.outbox() == [] and svc.backend.jobs() == {}

    out = run(svc.db, svc.clock, svc.pipe(rolling=True, catalog=london), DAY1)
    assert out is not None and out.status == "succeeded", out
    assert "not planned again" not in svc.db.get_run(DAY1)["notes"]
    # planned on the London catalog: the morning job committed and submitted in London
    rows = {r["job_id"]: r for r in RollingStore(svc.db.store).rows()}
    assert (rows["morning"]["state"], rows["morning"]["site"], rows["morning"]["start"]) == (
        "Dispatched", "gb-london", at(5))
    assert svc.backend.jobs()["morning#0"]["site"] == "gb-london"
    assert set(svc.backend.submissions().values()) == {1}
