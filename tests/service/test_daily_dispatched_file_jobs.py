"""A workload file's job dispatch holds and that has not ended is not planned again.

The daily (non-rolling) run plans the static workload file whole every day. Before, a job of
the file that an earlier day's plan dispatched and that still runs (its unit ``Dispatched``,
``Running`` or ``Paused`` on its cluster) was placed again by the next day's plan: the plan
booked its GPUs, power and emissions a second time (totals, the saving against the baseline,
the capacity left for other jobs), dispatch said ``already_dispatched`` for it, and once its
latest start passed the plan reported it ``Failed/DeadlinePassed`` while it ran. Now it is
left out with one note, and the units still running hold their GPUs and power in the new
horizon as the planner's running work (as a rolling run holds its committed pieces).

SQLite store, the service's run path (cron, daily planner), the real outbox with an in-memory
backend whose status refresh records what it reports; the real DE-LU history (shared data).
The catalog's one site has two A100s.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, time, timedelta

import pandas as pd
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from carbonsched.clock import ManualClock
from carbonsched.config import Settings
from carbonsched.dispatch.outbox import dispatch_plan, refresh_backends
from carbonsched.domain import JobState, ReasonCode
from carbonsched.service.cron import DailyCron
from carbonsched.service.runs import planning_pipeline
from carbonsched.store import Store
from carbonsched.store.models import DispatchRow
from carbonsched.store.service import ServiceStore
from tests.conftest import FIXTURES
from tests.service.keyed_backend import MemoryBackend

pytestmark = pytest.mark.shared_data

CATALOG = str(FIXTURES / "catalog" / "frankfurt.toml")
SITE = "de-frankfurt"
LIVE_NOTE = "job(s) of the workload file were not planned again: dispatch holds them"
DAY2 = datetime(2023, 7, 11, tzinfo=UTC)            # day 2's horizon start (its issue time)


def _spec(jid: str, start: str, deadline: str, hours: int, gpus: int = 1) -> dict:
    return {"id": jid, "gpu_type": "A100", "gpus": gpus, "duration_hours": hours,
            "power_per_gpu_kw": 0.8125, "earliest_start": start, "deadline": deadline}


def _ts(s: str) -> datetime:
    return pd.Timestamp(s).to_pydatetime()


class Service:
    """A daily service planning one workload file every day at 00:00 UTC (run the evening
    before), 48 h ahead, dispatching each plan to a
    :class:`~tests.service.keyed_backend.MemoryBackend`."""

    def __init__(self, tmp_path, shared_data, jobs: list[dict], rolling: bool = False,
                 dispatching: bool = True) -> None:
        self.path = tmp_path / "jobs.json"
        self.write(jobs)
        self.url = f"sqlite:///{tmp_path}/s.db"
        self.backend = MemoryBackend()
        self.db = ServiceStore(Store(self.url))
        self.clock = ManualClock(datetime(2023, 7, 9, 23, tzinfo=UTC))
        self.shared_data = shared_data
        self.outcomes: list[list[tuple[str, str]]] = []
        self.cron = self._cron(rolling, dispatching)

    def _cron(self, rolling: bool, dispatching: bool = True) -> DailyCron:
        s = Settings(catalog=CATALOG, data_dir=self.shared_data, database_url=self.url,
                     workload_file=str(self.path), horizon_hours=48, rolling=rolling,
                     time_limit_s=30.0)
        pipe = planning_pipeline(s, self.db, self.clock, self.dispatch if dispatching else None)
        return DailyCron(self.db, pipe, self.clock, "UTC", time(0, 0), offset_days=1)

    def reconfigure(self, rolling: bool = False) -> None:
        """From now on the service runs (rolling or daily) and dispatches, on the same store."""
        self.cron = self._cron(rolling)

    def write(self, jobs: list[dict]) -> None:
        self.path.write_text(json.dumps({"jobs": jobs}))

    def dispatch(self, store, plan_id, catalog, *, clock, commit_before=None):
        res = dispatch_plan(store, plan_id, catalog, clock=clock, commit_before=commit_before,
                            adapters={SITE: self.backend}, settings=Settings(),
                            placeholder=True)
        self.outcomes.append([(o.key, o.action) for o in res.outcomes])
        return res

    def refresh(self) -> None:
        """The status loop: record what the cluster reports."""
        refresh_backends(self.db.store, CATALOG, clock=self.clock.now,
                         adapters={SITE: self.backend})

    def run(self, day: int) -> dict:
        """The run for 2023-07-<day> (issued 00:00 UTC, run the evening before)."""
        self.clock.set(datetime(2023, 7, day - 1, 23, tzinfo=UTC))
        rec = self.cron.tick()
        assert rec is not None and rec["status"] == "succeeded", rec
        return self.db.store.get_plan(rec["plan_id"])

    def units(self) -> dict[str, str]:
        with Session(self.db.engine) as s:
            return {r.key: r.state for r in s.scalars(select(DispatchRow))}


def _placed(doc: dict) -> dict[str, dict]:
    return {p["job_id"]: p for p in doc["placements"]}


def _unplaced(doc: dict) -> dict[str, str]:
    return {u["job_id"]: u["reason"] for u in doc.get("unplaced", [])}


def _held(doc: dict) -> list[tuple[str, int, str | None, str]]:
    return [(r["job_id"], r["gpus"], r["start"], r["end"]) for r in doc.get("running", [])]


def _live_note(doc: dict) -> str:
    return next(n for n in doc["notes"] if LIVE_NOTE in n)


def test_a_running_file_job_is_not_planned_again_and_holds_its_gpus(tmp_path, shared_data):
    # train: a 30 h run of both GPUs, dispatched by day 1 and still running on day 2
    train = _spec("train", "2023-07-10T00:00:00Z", "2023-07-13T00:00:00Z", 30, gpus=2)
    svc = Service(tmp_path, shared_data, [train])
    day1 = svc.run(10)
    p1 = _placed(day1)["train"]
    start, end = _ts(p1["start"]), _ts(p1["end"])
    assert end > DAY2                            # it runs into day 2's horizon
    assert svc.backend.submits == ["train#0"]
    svc.clock.set(start + timedelta(minutes=5))
    svc.backend.report("train#0", JobState.RUNNING, ReasonCode.STARTED, start)
    svc.refresh()
    assert svc.units() == {"train#0": "Running"}

    # day 2: the file lists train still, and a new job of one GPU
    fresh = _spec("fresh", "2023-07-11T00:00:00Z", "2023-07-12T12:00:00Z", 4)
    svc.write([train, fresh])
    day2 = svc.run(11)
    # before the fix: train placed again (07-11 09:00 - 07-12 15:00, 63.3 kWh, 20.0 kg of
    # day 2's 67.4 kWh and 21.3 kg) and fresh placed 07-11 05:00 - 09:00, on a GPU train held
    assert set(_placed(day2)) == {"fresh"}
    pf = _placed(day2)["fresh"]
    assert day2["totals"]["energy_kwh"] == pytest.approx(pf["energy_kwh"])
    assert day2["totals"]["emissions_kg"] == pytest.approx(pf["emissions_kg"])
    assert day2["baseline"]["placed"] == 1      # the baseline plans the new work only
    # train's two GPUs are held from the horizon start to its planned end; fresh fits after
    assert _held(day2) == [("train", 2, "2023-07-11T00:00:00Z", p1["end"])]
    assert _ts(pf["start"]) >= end
    note = _live_note(day2)
    assert note.startswith(f"1 {LIVE_NOTE} and they have not ended (job 'train' Running, "
                           f"dispatched from plan {day1['plan_id'][:12]})")
    assert "held as running work" in note
    # dispatch: train is not asked for again (before: already_dispatched); fresh is submitted
    assert svc.outcomes[-1] == [("fresh#0", "submitted")]
    assert svc.backend.submits == ["train#0", "fresh#0"]

    # day 3: train's latest start (07-11 18:00) has passed while it runs: it is not reported
    # DeadlinePassed (before the fix it was), and nothing of it is held any more
    day3 = svc.run(12)
    assert "train" not in _unplaced(day3) and "train" not in _placed(day3)
    assert [h[0] for h in _held(day3)] == ["fresh"]
    assert "job 'train' Running" in _live_note(day3)


@pytest.mark.parametrize("case", ["ended", "running", "started-late"])
def test_a_unit_at_the_edge_of_day_2s_horizon(tmp_path, shared_data, case):
    """A 24 h job placed 07-10 00:00 - 07-11 00:00, day 2's horizon start exactly.

    ``ended``: its unit Succeeded at 07-11 00:00: final (the note of ended jobs), nothing
    held. ``running``: still Running as its planned end reaches the horizon start: left out,
    nothing held in the horizon (its span ends at its first slot). ``started-late``: Running
    since 07-10 01:00, an hour late, so it holds both GPUs until 07-11 01:00: day 2's first
    hour is not free for another two-GPU job.
    """
    edge = _spec("edge", "2023-07-10T00:00:00Z", "2023-07-11T00:00:00Z", 24, gpus=2)
    svc = Service(tmp_path, shared_data, [edge])
    day1 = svc.run(10)
    p1 = _placed(day1)["edge"]
    assert (p1["start"], p1["end"]) == ("2023-07-10T00:00:00Z", "2023-07-11T00:00:00Z")
    began = datetime(2023, 7, 10, 1 if case == "started-late" else 0, tzinfo=UTC)
    svc.clock.set(began)
    svc.backend.report("edge#0", JobState.RUNNING, ReasonCode.STARTED, began)
    if case == "ended":
        svc.backend.report("edge#0", JobState.SUCCEEDED, ReasonCode.COMPLETED, began, DAY2)
    svc.refresh()
    assert svc.units() == {"edge#0": "Succeeded" if case == "ended" else "Running"}

    # day 2: a two-GPU hour that would run first thing, were the GPUs free
    gang = _spec("gang", "2023-07-11T00:00:00Z", "2023-07-11T04:00:00Z", 1, gpus=2)
    svc.write([edge, gang])
    day2 = svc.run(11)
    # before the fix: edge unplaced DeadlinePassed on day 2 (running, started-late)
    assert "edge" not in _placed(day2) and "edge" not in _unplaced(day2)
    assert "gang" in _placed(day2)
    if case == "ended":
        assert not any(LIVE_NOTE in n for n in day2["notes"])
        assert any("job 'edge' ended Succeeded (Completed)" in n for n in day2["notes"])
        assert _held(day2) == []
    elif case == "running":
        assert "job 'edge' Running" in _live_note(day2)
        assert _held(day2) == []
    else:
        assert "job 'edge' Running" in _live_note(day2)
        assert _held(day2) == [("edge", 2, "2023-07-11T00:00:00Z", "2023-07-11T01:00:00Z")]
        assert _placed(day2)["gang"]["start"] >= "2023-07-11T01:00:00Z"


def test_a_new_or_undispatched_file_job_is_still_planned(tmp_path, shared_data):
    """Known bad: only what dispatch holds is left out. A job day 1's plan placed but nothing
    dispatched (the service ran without a dispatcher that day) and a new id of the file are
    planned on day 2, and dispatched; the job dispatched on day 2 is left out on day 3."""
    a = _spec("a", "2023-07-10T00:00:00Z", "2023-07-13T00:00:00Z", 2)
    svc = Service(tmp_path, shared_data, [a], dispatching=False)
    assert "a" in _placed(svc.run(10)) and svc.units() == {}
    svc.reconfigure()
    new = _spec("new", "2023-07-11T00:00:00Z", "2023-07-13T00:00:00Z", 1)
    svc.write([a, new])
    day2 = svc.run(11)
    placed = _placed(day2)
    assert set(placed) == {"a", "new"} and _held(day2) == []
    assert not any(LIVE_NOTE in n for n in day2["notes"])
    assert day2["totals"]["energy_kwh"] == pytest.approx(
        placed["a"]["energy_kwh"] + placed["new"]["energy_kwh"])
    assert svc.units() == {"a#0": "Dispatched", "new#0": "Dispatched"}
    day3 = svc.run(12)
    assert _placed(day3) == {}
    assert _live_note(day3).startswith(f"2 {LIVE_NOTE}")


def test_a_rolling_run_holds_a_file_job_a_daily_plan_dispatched(tmp_path, shared_data):
    """The same rule on the rolling path: a service switched from daily to rolling runs on
    its store; the rolling state does not hold the daily plan's dispatched job, dispatch
    does."""
    train = _spec("train", "2023-07-10T00:00:00Z", "2023-07-13T00:00:00Z", 30, gpus=2)
    svc = Service(tmp_path, shared_data, [train])
    day1 = svc.run(10)
    p1 = _placed(day1)["train"]
    start = _ts(p1["start"])
    svc.clock.set(start)
    svc.backend.report("train#0", JobState.RUNNING, ReasonCode.STARTED, start)
    svc.refresh()
    svc.reconfigure(rolling=True)
    day2 = svc.run(11)
    # before the fix: train committed again by the rolling plan (already_dispatched)
    assert "train" not in _placed(day2) and day2["rolling"]["committed"] == []
    assert _held(day2) == [("train", 2, "2023-07-11T00:00:00Z", p1["end"])]
    assert day2["rolling"]["running_held"] == ["train"]
    assert "job 'train' Running" in _live_note(day2)
    assert svc.backend.submits == ["train#0"]
