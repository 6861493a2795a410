"""An id the service already holds is refused at submission, from every place it is held.

Before, ``POST /v1/jobs`` refused only ids of earlier API submissions. A job submitted under
the id of a workload-file job, a job dispatch holds or a job of the rolling state was stored
and acknowledged, then ended ``NameConflict`` at the next run (or was taken for the other job
by dispatch): the client learnt of it a run later. The current plan's ids are covered in
``test_api.py`` (a served plan).
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

import pytest
from sqlalchemy.orm import Session

from carbonsched.config import Settings
from carbonsched.service.runs import ids_in_use
from carbonsched.store import Store
from carbonsched.store.models import DispatchRow
from carbonsched.store.rolling_models import RollingJobRow
from carbonsched.store.service import ServiceStore

NOW = datetime(2023, 7, 15, 23, tzinfo=UTC)


def _job(jid: str) -> dict:
    return {"id": jid, "tenant": "t", "gpu_type": "A100", "gpus": 1, "duration_hours": 1,
            "power_per_gpu_kw": 0.5, "earliest_start": "2023-07-16T00:00:00Z",
            "deadline": "2023-07-17T00:00:00Z", "kind": "batch"}


@pytest.fixture
def db(tmp_path) -> ServiceStore:
    d = ServiceStore(Store(f"sqlite:///{tmp_path / 's.sqlite'}"))
    with Session(d.store.engine) as s:
        s.add(DispatchRow(
            key="disp#0", job_id="disp", piece=0, plan_id="p-dispatched-0001", site="s1",
            backend="slurm:de", state="Dispatched", reason="AwaitingSubmit", detail="",
            request_json="{}", planned_start=NOW, planned_end=NOW, attempts=0,
            created_at=NOW, updated_at=NOW))
        s.add(RollingJobRow(job_id="roll", spec_json=json.dumps(_job("roll")), state="Pending",
                            gpu_type="A100", gpus=1, updated_at=NOW))
        s.commit()
    return d


def test_each_place_an_id_is_held_is_named(db, tmp_path):
    wl = tmp_path / "jobs.json"
    wl.write_text(json.dumps({"jobs": [_job("filed")]}))
    s = Settings(workload_file=wl)
    held = ids_in_use(s, db, ["filed", "disp", "roll", "new-1"])
    assert held == {"filed": f"a job of the workload file {wl}",
                    "disp": "a job dispatch holds (from plan p-dispatched)",
                    "roll": "a job of the rolling state"}
    # just not held: an id that differs by one character is free
    assert ids_in_use(s, db, ["filed-", "dis", "roll2"]) == {}


def test_an_edited_workload_file_is_read_again(db, tmp_path):
    wl = tmp_path / "jobs.json"
    wl.write_text(json.dumps({"jobs": [_job("a")]}))
    s = Settings(workload_file=wl)
    assert set(ids_in_use(s, db, ["a", "b"])) == {"a"}
    wl.write_text(json.dumps({"jobs": [_job("b"), _job("c")]}))     # another size: re-read
    assert set(ids_in_use(s, db, ["a", "b"])) == {"b"}


def test_an_unreadable_workload_file_does_not_refuse_submissions(db, tmp_path, caplog):
    wl = tmp_path / "jobs.json"
    wl.write_text("{not json")
    with caplog.at_level(logging.WARNING, logger="carbonsched.service.runs"):
        held = ids_in_use(Settings(workload_file=wl), db, ["x", "disp"])
    assert held == {"disp": "a job dispatch holds (from plan p-dispatched)"}   # others checked
    assert "not checked against the workload file" in caplog.text
