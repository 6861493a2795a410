"""A job id the store pruned stays final: a static workload file does not bring it back.

Before, ``store prune`` (and the leader's daily prune) deleted a finished job's outbox units
and rolling row, and the next run of a service planning the same static workload file every
day saw the job's id as new: the rolling plan ended it ``Failed/DeadlinePassed`` (in the plan's
``rolling.ended``, the rolling state and the API's records) once more every ``keep_days``, and
a re-dispatch of a plan that placed it wrote a new outbox unit under the id. Now prune writes
a tombstone per pruned job id (``pruned_jobs``) in the transaction that deletes its rows, and
the runs, the API and dispatch treat the id as final under it, with one sentence.

SQLite store, the service's run path (cron, rolling planner) and dispatch with an in-memory
backend; the real DE-LU history (shared data).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, time, timedelta
from types import SimpleNamespace

import pytest
from fastapi import HTTPException
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from carbonsched.clock import ManualClock
from carbonsched.config import Settings
from carbonsched.dispatch.outbox import dispatch_plan
from carbonsched.service.cron import DailyCron
from carbonsched.service.runs import planning_pipeline
from carbonsched.store import Store
from carbonsched.store.models import DispatchRow
from carbonsched.store.pruned_jobs import PrunedJobRow, pruned_jobs, pruned_sentence
from carbonsched.store.retention import prune
from carbonsched.store.rolling_state import RollingStore
from carbonsched.store.service import ServiceStore
from tests.conftest import FIXTURES
from tests.service.keyed_backend import MemoryBackend

pytestmark = pytest.mark.shared_data

CATALOG = str(FIXTURES / "catalog" / "frankfurt.toml")
DONE_DEADLINE = datetime(2023, 7, 10, 8, tzinfo=UTC)
FINAL = "a job is final under its id"


def _spec(jid: str, start: str, deadline: str, hours: int = 2) -> dict:
    return {"id": jid, "gpu_type": "A100", "gpus": 1, "duration_hours": hours,
            "power_per_gpu_kw": 0.8125, "earliest_start": start, "deadline": deadline}


class Service:
    """A rolling service planning one static workload file every day at 00:00 UTC."""

    def __init__(self, tmp_path, shared_data, rolling: bool = True) -> None:
        jobs = [_spec("done", "2023-07-10T00:00:00Z", "2023-07-10T08:00:00Z"),
                # committed on 07-12: the newest rolling run then is after done's
                _spec("later", "2023-07-12T00:00:00Z", "2023-07-12T08:00:00Z"),
                # a new id of the file: planned whatever prune did
                _spec("fresh", "2023-07-13T00:00:00Z", "2023-07-13T12:00:00Z", 1)]
        path = tmp_path / "jobs.json"
        path.write_text(json.dumps({"jobs": jobs}))
        url = f"sqlite:///{tmp_path}/s.db"
        self.backend = MemoryBackend()
        self.db = ServiceStore(Store(url))
        self.clock = ManualClock(datetime(2023, 7, 9, 23, tzinfo=UTC))
        s = Settings(catalog=CATALOG, data_dir=shared_data, database_url=url,
                     workload_file=str(path), horizon_hours=48, rolling=rolling,
                     time_limit_s=30.0)
        self.pipe = planning_pipeline(s, self.db, self.clock, self.dispatch)
        self.cron = DailyCron(self.db, self.pipe, self.clock, "UTC", time(0, 0),
                              offset_days=1)

    def dispatch(self, store, plan_id, catalog, *, clock, commit_before=None):
        return dispatch_plan(store, plan_id, catalog, clock=clock, commit_before=commit_before,
                             adapters={"de-frankfurt": self.backend}, settings=Settings(),
                             placeholder=True)

    def run(self, day: int) -> dict:
        """The run for 2023-07-<day> (issued 00:00 UTC, run the evening before)."""
        self.clock.set(datetime(2023, 7, day - 1, 23, tzinfo=UTC))
        rec = self.cron.tick()
        assert rec is not None and rec["status"] == "succeeded", rec
        return self.db.store.get_plan(rec["plan_id"])

    def succeed(self, job_id: str) -> None:
        """Record the job ended on its backend, as the status refresh does."""
        with Session(self.db.engine) as s, s.begin():
            s.execute(update(DispatchRow).where(DispatchRow.job_id == job_id).values(
                state="Succeeded", reason="Completed",
                actual_start=datetime(2023, 7, 10, 1, tzinfo=UTC),
                actual_end=datetime(2023, 7, 10, 3, tzinfo=UTC)))

    def units(self) -> list[tuple[str, str, str]]:
        with Session(self.db.engine) as s:
            return sorted((r.key, r.state, r.reason) for r in s.scalars(select(DispatchRow)))


def _ended(doc: dict) -> list[tuple[str, str]]:
    return [(e["job_id"], e["reason"]) for e in doc["rolling"]["ended"]]


def _unplaced(doc: dict) -> list[tuple[str, str]]:
    return [(u["job_id"], u["reason"]) for u in doc.get("unplaced", [])]


def test_a_pruned_file_job_is_neither_failed_again_nor_dispatched_again(tmp_path, shared_data):
    svc = Service(tmp_path, shared_data)
    first = svc.run(10)
    assert first["rolling"]["committed"] == ["done"] and svc.backend.submits == ["done#0"]
    svc.succeed("done")
    svc.run(11)
    svc.run(12)
    # keep 1 day at 07-11 23:00 (the clock of the run for 07-12): done's unit (deadline
    # 07-10 08:00) and its rolling row go
    res = prune(svc.db.store, 1, now=svc.clock.now())
    assert res.deleted["dispatch_intents"] == 1 and res.deleted["rolling_jobs"] == 1

    doc = svc.run(13)
    # before the fix: rolling.ended == [("done", "DeadlinePassed")] and the rolling state
    # held done Failed/DeadlinePassed
    assert _ended(doc) == []
    assert "done" not in {r["job_id"] for r in RollingStore(svc.db.store).rows()}
    assert "done" not in {p["job_id"] for p in doc["placements"]}
    note = next(n for n in doc["notes"] if "workload file were not planned again" in n)
    assert ("job 'done' ended Succeeded (Completed); the store pruned its records on "
            "2023-07-11 (retention): " + FINAL) in note
    # known bad: a new id of the same file is still planned and dispatched
    assert doc["rolling"]["committed"] == ["fresh"]
    assert svc.backend.submits == ["done#0", "later#0", "fresh#0"]
    assert [k for k, _, _ in svc.units()] == ["fresh#0", "later#0"]
    # the tombstone: written with the rows' delete, with the state the outbox recorded
    stone = pruned_jobs(svc.db.store, ["done"])["done"]
    assert (stone.state, stone.reason, stone.source) == ("Succeeded", "Completed",
                                                         "dispatch_intents")
    assert res.tombstones == 1

    # dispatch: the first plan (which placed done) dispatched again writes no unit for it;
    # before, a new done#0 was written (Failed/DeadlinePassed, or submitted were it on time)
    again = svc.dispatch(svc.db.store, first["plan_id"], CATALOG, clock=svc.clock.now)
    (o,) = again.outcomes
    assert (o.key, o.action, o.state) == ("done#0", "pruned", "Succeeded")
    assert FINAL in o.detail and "give the job a new id" in o.detail
    assert [k for k, _, _ in svc.units()] == ["fresh#0", "later#0"]
    assert svc.backend.submits == ["done#0", "later#0", "fresh#0"]
    assert not again.nothing_submitted                   # nothing was asked of this run

    # the API: the id is refused with the same sentence
    from carbonsched.api.routes import refuse_ids_in_use

    state = SimpleNamespace(db=svc.db, settings=Settings(), book=None)
    with pytest.raises(HTTPException) as exc:
        refuse_ids_in_use(state, ["new-1", "done"])
    assert exc.value.status_code == 409
    assert FINAL in exc.value.detail and "'done'" in exc.value.detail
    refuse_ids_in_use(state, ["new-1"])                 # a new id is free

    # a later prune keeps the tombstone (and so the id final) for a long horizon
    later = prune(svc.db.store, 1, now=svc.clock.now() + timedelta(days=30))
    assert later.deleted["pruned_jobs"] == 0 and "done" in pruned_jobs(svc.db.store, ["done"])


@pytest.mark.parametrize("past_limit", [False, True])
def test_a_job_finished_exactly_keep_days_ago(tmp_path, shared_data, past_limit):
    """At the limit the rows stay (the rolling state keeps the id); a second later they go and
    the tombstone does: neither way does the next run end the job DeadlinePassed."""
    svc = Service(tmp_path, shared_data)
    svc.run(10)
    svc.succeed("done")
    svc.run(11)
    # done's latest time is its deadline: exactly 1 day before now is the cutoff
    now = DONE_DEADLINE + timedelta(days=1, seconds=1 if past_limit else 0)
    res = prune(svc.db.store, 1, now=now)
    assert res.deleted["dispatch_intents"] == (1 if past_limit else 0)
    assert [k for k, _, _ in svc.units()] == ([] if past_limit else ["done#0"])
    doc = svc.run(12)
    assert _ended(doc) == []            # before the fix, past the limit: DeadlinePassed
    assert set(pruned_jobs(svc.db.store, ["done"])) == ({"done"} if past_limit else set())
    assert "done" not in {p["job_id"] for p in doc["placements"]}
    assert svc.backend.submits[0] == "done#0" and svc.backend.submits.count("done#0") == 1


def test_the_daily_plan_does_not_report_a_finished_file_job_again(tmp_path, shared_data):
    """The daily plan reads the static file whole: a job dispatch holds as ended, or that the
    store pruned, is noted, not reported DeadlinePassed every day."""
    svc = Service(tmp_path, shared_data, rolling=False)
    svc.run(10)
    svc.succeed("done")
    assert "done" not in {u for u, _ in _unplaced(svc.run(11))}
    day12 = svc.run(12)
    assert "done" not in {u for u, _ in _unplaced(day12)}
    assert "fresh" in {p["job_id"] for p in day12["placements"]}     # a new id is planned
    prune(svc.db.store, 1, now=svc.clock.now())
    with Session(svc.db.engine) as s:
        assert s.get(PrunedJobRow, "done") is not None
    doc = svc.run(13)
    assert "done" not in {u for u, _ in _unplaced(doc)}
    assert "done" not in {p["job_id"] for p in doc["placements"]}
    # fresh, dispatched from day 12's plan and not ended, holds its GPU, not planned again
    assert "fresh" not in {p["job_id"] for p in doc["placements"]}
    assert [r["job_id"] for r in doc["running"]] == ["fresh"]
    assert svc.backend.submits.count("done#0") == 1
    assert svc.backend.submits.count("fresh#0") == 1


# --- a rolling row pruned while the outbox still holds its job ---------------------------------
LATE_START = datetime(2023, 7, 12, 23, tzinfo=UTC)
"""done's unit started late: on its backend past the next run's issue time (07-13 00:00)."""


def _set_unit(svc: Service, job_id: str, **values) -> None:
    with Session(svc.db.engine) as s, s.begin():
        s.execute(update(DispatchRow).where(DispatchRow.job_id == job_id).values(**values))


def test_a_rolling_row_pruned_while_its_unit_runs_leaves_the_job_live(tmp_path, shared_data):
    """The rolling row goes (its planned end and deadline are old) but dispatch still runs the
    job: no tombstone; the next run holds the job as running work, never as final."""
    svc = Service(tmp_path, shared_data)
    svc.run(10)
    _set_unit(svc, "done", state="Running", reason="Started", actual_start=LATE_START)
    svc.run(11)
    svc.run(12)
    res = prune(svc.db.store, 1, now=svc.clock.now())
    assert res.deleted["rolling_jobs"] == 1 and res.deleted["dispatch_intents"] == 0
    # before the fix: a tombstone ('done', 'Dispatched', 'Placed', 'rolling_jobs')
    assert pruned_jobs(svc.db.store, ["done"]) == {} and res.tombstones == 0

    doc = svc.run(13)
    assert "done" not in {p["job_id"] for p in doc["placements"]}
    assert not any("job 'done' ended" in n for n in doc["notes"])
    live = next(n for n in doc["notes"] if "dispatch holds them and they have not ended" in n)
    assert "job 'done' Running" in live
    # its unit holds its GPU past the run's start (it ends 07-13 01:00): running work
    assert [r["job_id"] for r in doc["running"]] == ["done"]
    assert svc.backend.submits.count("done#0") == 1

    # once it ended and its unit goes, the outbox's state is the tombstone's
    _set_unit(svc, "done", state="Succeeded", reason="Completed",
              actual_end=datetime(2023, 7, 13, 1, tzinfo=UTC))
    res = prune(svc.db.store, 1, now=datetime(2023, 7, 14, 2, tzinfo=UTC))
    assert res.deleted["dispatch_intents"] == 1
    stone = pruned_jobs(svc.db.store, ["done"])["done"]
    assert (stone.state, stone.reason, stone.source) == ("Succeeded", "Completed",
                                                         "dispatch_intents")


def test_a_live_job_is_not_final_whatever_tombstone_names_it(tmp_path, shared_data):
    """A tombstone a store already holds for a job dispatch still runs (written by an earlier
    prune) does not make the job final: the outbox is read first."""
    from carbonsched.dispatch.outbox import final_jobs
    from carbonsched.store.pruned_jobs import write_tombstones

    svc = Service(tmp_path, shared_data)
    svc.run(10)
    _set_unit(svc, "done", state="Running", reason="Started", actual_start=LATE_START)
    with Session(svc.db.engine) as s, s.begin():
        write_tombstones(s, [{"job_id": "done", "state": "Dispatched", "reason": "Placed",
                              "source": "rolling_jobs", "pruned_at": svc.clock.now()}])
    assert final_jobs(svc.db.store, ["done"]) == {}
    _set_unit(svc, "done", state="Succeeded", reason="Completed",
              actual_end=datetime(2023, 7, 13, 1, tzinfo=UTC))
    assert ("job 'done' ended Succeeded (Completed); dispatched from plan"
            in final_jobs(svc.db.store, ["done"])["done"])


@pytest.mark.parametrize("past_limit", [False, True])
def test_a_rolling_row_and_its_unit_at_the_cutoff(tmp_path, shared_data, past_limit):
    """The unit ended exactly ``keep_days`` before now: it stays (its job's claim) while the
    rolling row, older, goes without a tombstone; a second later the unit goes too and the
    tombstone carries its state, in the same pass as nothing else."""
    svc = Service(tmp_path, shared_data)
    svc.run(10)
    ended = datetime(2023, 7, 11, 2, tzinfo=UTC)
    _set_unit(svc, "done", state="Succeeded", reason="Completed",
              actual_start=datetime(2023, 7, 11, tzinfo=UTC), actual_end=ended)
    svc.run(11)
    svc.run(12)
    now = ended + timedelta(days=1, seconds=1 if past_limit else 0)
    res = prune(svc.db.store, 1, now=now)
    assert res.deleted["rolling_jobs"] == 1
    assert res.deleted["dispatch_intents"] == (1 if past_limit else 0)
    stones = pruned_jobs(svc.db.store, ["done"])
    if not past_limit:
        assert stones == {} and res.tombstones == 0
    else:
        assert (stones["done"].state, stones["done"].source) == ("Succeeded",
                                                                 "dispatch_intents")
        assert pruned_sentence(stones["done"]).startswith(
            "job 'done' ended Succeeded (Completed); the store pruned its records on 2023-07-12")
    doc = svc.run(13)
    assert "done" not in {p["job_id"] for p in doc["placements"]}
    assert _ended(doc) == []
    note = next(n for n in doc["notes"] if "workload file were not planned again" in n)
    assert "job 'done' ended Succeeded (Completed)" in note
    assert svc.backend.submits.count("done#0") == 1


def test_a_committed_rolling_row_never_dispatched_ends_planned(tmp_path, shared_data):
    """A rolling plan committed the job and nothing dispatched it: its tombstone says so
    (``Planned``), never ``Dispatched`` (as if a backend still ran it)."""
    svc = Service(tmp_path, shared_data)
    svc.run(10)
    with Session(svc.db.engine) as s, s.begin():
        s.execute(DispatchRow.__table__.delete().where(DispatchRow.job_id == "done"))
    svc.run(11)
    svc.run(12)
    res = prune(svc.db.store, 1, now=svc.clock.now())
    assert res.deleted["rolling_jobs"] == 1 and res.tombstones == 1
    stone = pruned_jobs(svc.db.store, ["done"])["done"]
    assert (stone.state, stone.reason, stone.source) == ("Planned", "Placed", "rolling_jobs")
