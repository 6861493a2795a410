"""One bad stored API job never stops a run: it ends Failed with its reason, the rest plan.

Before, an API job naming a site the catalog does not define (stored while no plan was
loaded, or before a catalog edit) made every later daily and rolling run fail on the
planner's refusal; an API job with the id of a workload-file job was silently dropped (daily)
or replaced by the file's job while its record said it was planned (rolling). Real pipeline,
Frankfurt fixture catalog, SQLite.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from carbonsched.clock import ManualClock
from carbonsched.service.runs import claim_and_run, planning_pipeline
from carbonsched.store import Store
from carbonsched.store.service import ServiceStore
from tests.service.test_rolling_service import settings

pytestmark = pytest.mark.shared_data


def _spec(jid: str, **kw) -> dict:
    return {"id": jid, "tenant": "t", "gpu_type": "A100", "gpus": 1, "duration_hours": 1,
            "power_per_gpu_kw": 0.8125, "earliest_start": "2023-07-10T02:00:00Z",
            "deadline": "2023-07-10T20:00:00Z", "kind": "batch", **kw}


@pytest.mark.parametrize("rolling", [False, True])
def test_bad_api_jobs_end_failed_and_the_run_plans_the_rest(tmp_path, shared_data, rolling):
    url = f"sqlite:///{tmp_path / 's.db'}"
    db = ServiceStore(Store(url))
    clock = ManualClock(datetime(2023, 7, 9, 23, 0, tzinfo=UTC))
    now = clock.now()
    specs = [_spec("api-good"), _spec("api-mars", allowed_sites=["mars-site"]),
             _spec("morning")]                        # "morning" is a job of the workload file
    db.add_jobs([{"job_id": s["id"], "tenant": "t", "spec_json": json.dumps(s),
                  "submitted_at": now, "updated_at": now, "reserved": False, "detail": "",
                  "state": "Pending", "reason": "AwaitingPlan"} for s in specs])
    s = settings(tmp_path, shared_data, url).model_copy(update={"rolling": rolling})
    out = claim_and_run(db, clock, planning_pipeline(s, db, clock), planning_date="2023-07-10",
                        issued_at=datetime(2023, 7, 10, tzinfo=UTC), trigger="scheduled",
                        replica="r1", lease=timedelta(minutes=5))
    assert out.status == "succeeded"          # before: the run failed (InputError)
    mars, clash, good = (db.get_job(j) for j in ("api-mars", "morning", "api-good"))
    assert (mars["state"], mars["reason"]) == ("Failed", "UnknownSite")
    assert mars["detail"].startswith("it names site(s) mars-site that catalog ")
    assert (clash["state"], clash["reason"]) == ("Failed", "NameConflict")
    assert good["state"] == "Planned" and good["reason"] == "Placed"
    doc = db.store.get_plan(out.plan_id)
    assert ("2 job(s) submitted through the API cannot be planned and ended Failed "
            "(UnknownSite: a site the catalog does not define; NameConflict: the id of a job "
            "of the workload file): api-mars (UnknownSite), morning (NameConflict)"
            ) in doc["notes"]
    placed = {p["job_id"] for p in doc["placements"]}
    assert {"api-good", "morning"} <= placed and "api-mars" not in placed
