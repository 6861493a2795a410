"""An API job dispatch holds and that has not ended holds its GPUs in the next day's plan.

The daily run plans the API's ``Pending`` and ``Planned`` jobs; one an earlier day's plan
dispatched is not among them. Before, that was all: its units still running on the cluster held
nothing in the next day's plan, which booked the same GPUs for other work (here a new two-GPU
job placed at 05:00 on 07-11 on GPUs the API's 30 h training job held until 07-11 06:00+). Now
its running units are the planner's running work, as a workload file's are
(:func:`carbonsched.service.runs.without_dispatched_api_jobs`), with one note.

SQLite store, the service's daily run path, the real outbox with the in-memory backend of
:mod:`tests.service.test_daily_dispatched_file_jobs`; the real DE-LU history (shared data).
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from carbonsched.domain import JobState, ReasonCode
from tests.service.test_daily_dispatched_file_jobs import (
    DAY2,
    Service,
    _held,
    _placed,
    _spec,
    _ts,
)

pytestmark = pytest.mark.shared_data

API_NOTE = "job(s) submitted through the API were not planned again: dispatch holds them"


def _submit(svc: Service, spec: dict) -> None:
    now = svc.clock.now()
    svc.db.add_jobs([{"job_id": spec["id"], "tenant": "t", "spec_json": json.dumps(spec),
                      "submitted_at": now, "updated_at": now, "reserved": False,
                      "detail": "", "state": "Pending", "reason": "AwaitingPlan"}])


@pytest.mark.parametrize(("train_gpus", "fresh_gpus"), [(2, 2), (1, 1)])
def test_a_running_api_job_holds_its_gpus_in_the_next_days_plan(tmp_path, shared_data,
                                                                 train_gpus, fresh_gpus):
    """(2, 2): the new job needs both GPUs, so it waits for the API job's end. (1, 1), at the
    limit: the API job holds one GPU of two, and the new one-GPU job starts beside it."""
    # a 30 h API job, dispatched by day 1's plan and still running on day 2
    train = _spec("train", "2023-07-10T00:00:00Z", "2023-07-13T00:00:00Z", 30, gpus=train_gpus)
    keep = _spec("keep", "2023-07-10T00:00:00Z", "2023-07-10T02:00:00Z", 1)
    svc = Service(tmp_path, shared_data, [keep])
    _submit(svc, train)
    day1 = svc.run(10)
    p1 = _placed(day1)["train"]
    start, end = _ts(p1["start"]), _ts(p1["end"])
    assert end > DAY2 and "train#0" in svc.backend.submits
    svc.clock.set(start + timedelta(minutes=5))
    svc.backend.report("train#0", JobState.RUNNING, ReasonCode.STARTED, start)
    svc.refresh()

    # day 2: a new job of the file, due soon: it would start at once were the GPUs free
    fresh = _spec("fresh", "2023-07-11T00:00:00Z", "2023-07-12T12:00:00Z", 4, gpus=fresh_gpus)
    svc.write([keep, fresh])
    day2 = svc.run(11)
    assert svc.db.get_job("train")["state"] == "Running"
    assert "train" not in _placed(day2)
    # before the fix: nothing held, and fresh placed on GPUs train runs on
    assert _held(day2) == [("train", train_gpus, "2023-07-11T00:00:00Z", p1["end"])]
    if train_gpus + fresh_gpus > 2:         # no room beside it: fresh waits for its end
        assert _ts(_placed(day2)["fresh"]["start"]) >= end
    note = next(n for n in day2["notes"] if API_NOTE in n)
    assert note.startswith(f"1 {API_NOTE} and they have not ended (job 'train' Running, "
                           f"dispatched from plan {day1['plan_id'][:12]})")
    assert svc.backend.submits.count("train#0") == 1


def test_an_ended_api_job_holds_nothing(tmp_path, shared_data):
    """Known bad: an API job whose unit ended is final, holds nothing, and is not noted as
    running."""
    train = _spec("train", "2023-07-10T00:00:00Z", "2023-07-13T00:00:00Z", 30, gpus=2)
    keep = _spec("keep", "2023-07-10T00:00:00Z", "2023-07-10T02:00:00Z", 1)
    svc = Service(tmp_path, shared_data, [keep])
    _submit(svc, train)
    p1 = _placed(svc.run(10))["train"]
    start = _ts(p1["start"])
    svc.clock.set(start + timedelta(minutes=5))
    svc.backend.report("train#0", JobState.RUNNING, ReasonCode.STARTED, start)
    svc.backend.report("train#0", JobState.FAILED, ReasonCode.BACKEND_FAILED, start,
                       start + timedelta(minutes=4))
    svc.refresh()
    fresh = _spec("fresh", "2023-07-11T00:00:00Z", "2023-07-12T12:00:00Z", 4, gpus=2)
    svc.write([keep, fresh])
    day2 = svc.run(11)
    assert svc.db.get_job("train")["state"] == "Failed"
    assert _held(day2) == [] and not any(API_NOTE in n for n in day2["notes"])
    assert _placed(day2)["fresh"]["start"] < p1["end"]


def test_an_api_job_named_like_a_dispatched_file_job_neither_takes_its_claim_nor_holds_twice(
        tmp_path, shared_data):
    """Known bad: the file's job 'train' runs (dispatched by day 1); an API job submitted
    under the same id is a NameConflict. Its record must not take the file job's claim (by
    id alone it would read Running, from the file job's plan) and the running units are held
    once, as the file's job's."""
    train = _spec("train", "2023-07-10T00:00:00Z", "2023-07-13T00:00:00Z", 30, gpus=2)
    svc = Service(tmp_path, shared_data, [train])
    day1 = svc.run(10)
    p1 = _placed(day1)["train"]
    start = _ts(p1["start"])
    svc.clock.set(start + timedelta(minutes=5))
    svc.backend.report("train#0", JobState.RUNNING, ReasonCode.STARTED, start)
    svc.refresh()
    _submit(svc, {**train, "gpus": 1})
    day2 = svc.run(11)
    assert _held(day2) == [("train", 2, "2023-07-11T00:00:00Z", p1["end"])]
    assert not any(API_NOTE in n for n in day2["notes"])
    api = svc.db.get_job("train")
    assert (api["state"], api["reason"]) == ("Failed", "NameConflict")
    assert api["plan_id"] != day1["plan_id"]
