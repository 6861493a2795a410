"""A job that names nothing to run is refused where the service would never run it, and one
dispatch refused is told.

Before, ``POST /v1/jobs`` (and a reserved placement) stored such a job whatever the service's
dispatch did with it; a run planned it, dispatch refused it (``no_payload``) without an outbox
row, so the job stayed ``Planned`` with a start in the past, planned again by every run. Now a
service that dispatches without the placeholder refuses it with 422 naming what is missing and
stores nothing; and a run whose dispatch refuses an API job so records it ``Failed`` with
``NoPayload`` and dispatch's detail.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from starlette.testclient import TestClient

from carbonsched.api.app import create_app
from carbonsched.clock import FixedClock, ManualClock, parse_as_of
from carbonsched.config import Settings
from carbonsched.dispatch.outbox import dispatch_plan
from carbonsched.service.runs import execute_run
from carbonsched.store import Store
from carbonsched.store.service import ServiceStore
from tests.conftest import FIXTURES, shared_data_dir
from tests.service.conftest import AS_OF, CATALOG, copy_db

pytestmark = pytest.mark.shared_data

TOKEN = "cst_no-payload-" + "x" * 30
AUTH = {"Authorization": f"Bearer {TOKEN}"}
DISPATCHER = "carbonsched.dispatch.outbox:dispatch_plan"
REFUSED = ("job 'bare' names nothing to run (script, script_path, command, image or "
           "pod_template), so this service's dispatch (CARBONSCHED_DISPATCHER) would never "
           "submit it; give one in its spec (or a template that does), or turn the placeholder "
           "on (CARBONSCHED_DISPATCH_PLACEHOLDER=true) to run 'sleep <planned seconds>'")


def job(jid: str, **kw) -> dict:
    return {"id": jid, "tenant": "t1", "gpu_type": "A100", "gpus": 1, "duration_hours": 1,
            "power_per_gpu_kw": 0.7, "earliest_start": "2023-07-15T00:00:00Z",
            "deadline": "2023-07-15T20:00:00Z"} | kw


def app_client(plan_db, tmp_path, **settings) -> tuple[TestClient, ServiceStore]:
    s = Settings(database_url=copy_db(plan_db, tmp_path), catalog=CATALOG, cron_enabled=False,
                 as_of=parse_as_of(AS_OF), bootstrap_admin_token=TOKEN,
                 data_dir=shared_data_dir(), dispatch_loops=False, **settings)
    return TestClient(create_app(s, FixedClock(s.as_of))), ServiceStore(Store(
        s.resolved_database_url()))


def test_a_dispatching_service_refuses_a_job_that_names_nothing_to_run(plan_db, tmp_path):
    c, db = app_client(plan_db, tmp_path, dispatcher=DISPATCHER)
    with c:
        body = {"jobs": [job("cmd", command="python3 run.py"), job("bare"),
                         job("tmpl", template="batch-eval")]}
        r = c.post("/v1/jobs", json=body, headers=AUTH)
        assert r.status_code == 422, r.text
        assert r.json()["detail"] == [{"loc": ["body", "jobs", 1], "msg": REFUSED,
                                       "type": "value_error"}]
        # nothing of the request is stored, not even the jobs before the refused one
        assert [db.get_job(j) for j in ("cmd", "bare", "tmpl")] == [None] * 3
        assert c.get("/v1/jobs/cmd", headers=AUTH).status_code == 404
        # at the limit: a command alone, or a template that gives one, is accepted
        del body["jobs"][1]
        r = c.post("/v1/jobs", json=body, headers=AUTH)
        assert r.status_code == 201, r.text
        assert {d["id"] for d in r.json()["data"]} == {"cmd", "tmpl"}
        assert db.get_job("cmd") is not None and db.get_job("tmpl") is not None
        # a reservation is a stored job too; a query that books nothing is answered
        q = job("bare") | {"reserve": True}
        r = c.post("/v1/placements", json=q, headers=AUTH)
        assert r.status_code == 422 and r.json()["detail"][0]["msg"] == REFUSED, r.text
        assert r.json()["detail"][0]["loc"] == ["body"] and db.get_job("bare") is None
        r = c.post("/v1/placements", json=q | {"reserve": False}, headers=AUTH)
        assert r.status_code == 200, r.text
        # the document's example submission is one a dispatching service accepts
        doc = c.get("/openapi.json").json()
        example = doc["components"]["schemas"]["JobsCreate"]["examples"][0]
        r = c.post("/v1/jobs", json=example, headers=AUTH)
        assert r.status_code == 201, r.text
        rule = doc["paths"]["/v1/jobs"]["post"]["responses"]["422"]["description"]
        assert "a job that names nothing to run" in rule and "CARBONSCHED_DISPATCHER" in rule


@pytest.mark.parametrize("settings", [{"dispatcher": ""},
                                      {"dispatcher": DISPATCHER, "dispatch_placeholder": True}],
                         ids=["no-dispatcher", "placeholder"])
def test_a_job_naming_nothing_is_accepted_where_it_would_run(plan_db, tmp_path, settings):
    # no dispatch: the plan is the product; the placeholder: dispatch runs 'sleep'
    c, db = app_client(plan_db, tmp_path, **settings)
    with c:
        r = c.post("/v1/jobs", json={"jobs": [job("bare")]}, headers=AUTH)
        assert r.status_code == 201, r.text
        assert db.get_job("bare")["state"] in ("Planned", "Pending")


# -- after dispatch: a refusal that writes no outbox row is recorded ------------------------

def _api_row(jid: str, now: datetime, **payload) -> dict:
    # as POST /v1/jobs stored it before the refusal at submission (or with the placeholder on)
    spec = {"id": jid, "tenant": "t", "gpu_type": "A100", "gpus": 1, "duration_hours": 1,
            "power_per_gpu_kw": 0.8125, "earliest_start": "2023-07-10T02:00:00Z",
            "deadline": "2023-07-10T10:00:00Z", "kind": "batch"} | payload
    return {"job_id": jid, "tenant": "t", "spec_json": json.dumps(spec), "submitted_at": now,
            "updated_at": now, "reserved": False, "detail": "", "state": "Pending",
            "reason": "AwaitingPlan"}


def dry_dispatch(summaries: list):
    """A run's ``dispatch``: :func:`dispatch_plan` dry, on the fixture catalog's own cluster
    (nothing submitted), the placeholder off; each summary is appended to ``summaries``."""

    def dispatch(store, plan_id, catalog, *, clock, **kw):
        out = dispatch_plan(store, plan_id, catalog, dry_run=True, clock=clock,
                            settings=Settings(slurm_conf_dir=None, kubeconfig=None),
                            placeholder=False, **kw)
        summaries.append(out)
        return out.to_dict()

    return dispatch


@pytest.mark.parametrize("rolling", [False, True], ids=["daily", "rolling"])
def test_an_api_job_dispatch_refuses_for_no_payload_ends_failed(tmp_path, shared_data,
                                                                 rolling):
    url = f"sqlite:///{tmp_path / 's.sqlite'}"
    wl = tmp_path / "jobs.json"
    wl.write_text(json.dumps({"jobs": []}))
    s = Settings(catalog=str(FIXTURES / "catalog" / "frankfurt.toml"), data_dir=shared_data,
                 database_url=url, workload_file=wl, horizon_hours=48 if rolling else 24,
                 rolling=rolling, time_limit_s=30.0)
    db = ServiceStore(Store(url))
    clock = ManualClock(datetime(2023, 7, 9, 23, 0, tzinfo=UTC))
    db.add_jobs([_api_row("bare", clock.now()),
                 _api_row("cmd", clock.now(), command="python3 run.py")])
    summaries = []
    rec = execute_run(s, db, clock, planning_date="2023-07-10", trigger="test",
                      replica="r", dispatch=dry_dispatch(summaries))
    assert rec.status == "succeeded", rec
    acts = {o.job_id: o.action for o in summaries[0].outcomes}
    assert acts == {"bare": "no_payload", "cmd": "dry_run"}
    bare, cmd = db.get_job("bare"), db.get_job("cmd")
    # before: "bare" stayed Planned (its start in the past after the day), planned again by
    # every run until its deadline passed
    assert (bare["state"], bare["reason"]) == ("Failed", "NoPayload")
    assert bare["detail"] == (f"dispatch of plan {rec.plan_id} did not submit it: job bare "
                              "names nothing to run (script, script_path, command, image or "
                              "pod_template); give one in its spec (or a template that does), "
                              "or dispatch with --placeholder "
                              "(CARBONSCHED_DISPATCH_PLACEHOLDER=true) to run 'sleep <planned "
                              "seconds>'")
    assert (bare["plan_id"], bare["site"], bare["start"], bare["reserved"]) == (
        rec.plan_id, None, None, False)
    assert "1 job(s) submitted through the API ended Failed" in rec.notes and "bare" in rec.notes
    # at the limit: the job that names its command is planned, untouched
    assert (cmd["state"], cmd["reason"]) == ("Planned", "Placed")


def test_a_reservation_naming_nothing_is_refused_before_no_plan_yet(tmp_path):
    # before, a service with no plan answered 503 "no plan yet" to a reservation that names
    # nothing to run, and only a loaded plan revealed the 422. At the limit: a reservation
    # that names its command gets the 503
    s = Settings(database_url=f"sqlite:///{tmp_path / 'empty.sqlite'}", catalog=CATALOG,
                 cron_enabled=False, as_of=parse_as_of(AS_OF), bootstrap_admin_token=TOKEN,
                 data_dir=shared_data_dir(), dispatch_loops=False, dispatcher=DISPATCHER)
    with TestClient(create_app(s, FixedClock(s.as_of))) as c:
        r = c.post("/v1/placements", json=job("bare") | {"reserve": True}, headers=AUTH)
        assert r.status_code == 422 and r.json()["detail"][0]["msg"] == REFUSED, r.text
        r = c.post("/v1/placements", json=job("cmd", command="python3 run.py")
                   | {"reserve": True}, headers=AUTH)
        assert r.status_code == 503, r.text


def test_a_deferred_rolling_job_naming_nothing_stays_pending(tmp_path, shared_data):
    # before, dispatch refused an uncommitted (deferred) job for no payload: it ended Failed
    # while the rolling state kept it pending, planned by every later run. At the limit: a
    # committed one is refused as before
    url = f"sqlite:///{tmp_path / 's.sqlite'}"
    wl = tmp_path / "jobs.json"
    wl.write_text(json.dumps({"jobs": []}))
    s = Settings(catalog=str(FIXTURES / "catalog" / "frankfurt.toml"), data_dir=shared_data,
                 database_url=url, workload_file=wl, horizon_hours=48, rolling=True,
                 time_limit_s=30.0)
    db = ServiceStore(Store(url))
    clock = ManualClock(datetime(2023, 7, 9, 23, 0, tzinfo=UTC))
    later = _api_row("later", clock.now())
    spec = json.loads(later["spec_json"]) | {"earliest_start": "2023-07-11T06:00:00Z",
                                             "deadline": "2023-07-11T20:00:00Z"}
    later["spec_json"] = json.dumps(spec)
    db.add_jobs([_api_row("bare", clock.now()), later])
    summaries = []
    execute_run(s, db, clock, planning_date="2023-07-10", trigger="test", replica="r",
                dispatch=dry_dispatch(summaries))
    acts = {o.job_id: o.action for o in summaries[0].outcomes}
    assert acts == {"bare": "no_payload", "later": "not_committed"}
    assert (db.get_job("later")["state"], db.get_job("later")["reason"]) == (
        "Pending", "NotCommitted")
    assert db.get_job("bare")["state"] == "Failed"
