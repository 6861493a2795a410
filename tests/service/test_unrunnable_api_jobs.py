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


def _rolling_service(tmp_path, shared_data, api_spec: dict):
    """A rolling service on the Frankfurt fixture holding one API job; ``run(day)`` runs the
    issue time 2023-07-<day> 00:00 (the clock one hour before)."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    db = ServiceStore(Store(url))
    clock = ManualClock(datetime(2023, 7, 9, 23, 0, tzinfo=UTC))
    now = clock.now()
    db.add_jobs([{"job_id": api_spec["id"], "tenant": "t", "spec_json": json.dumps(api_spec),
                  "submitted_at": now, "updated_at": now, "reserved": False, "detail": "",
                  "state": "Pending", "reason": "AwaitingPlan"}])
    s = settings(tmp_path, shared_data, url)
    pipe = planning_pipeline(s, db, clock)

    def run(day: int):
        clock.set(datetime(2023, 7, day - 1, 23, 0, tzinfo=UTC))
        return claim_and_run(db, clock, pipe, planning_date=f"2023-07-{day}",
                             issued_at=datetime(2023, 7, day, tzinfo=UTC),
                             trigger="scheduled", replica="r1", lease=timedelta(minutes=5))

    return db, s, run


def _set_rolling_spec(db: ServiceStore, job_id: str, spec: dict) -> None:
    """Rewrite the stored spec of ``job_id``'s row in the rolling state (``rolling_jobs``), as
    a spec stored before a catalog edit or a tightened schema rule would read."""
    from sqlalchemy import update

    from carbonsched.store.rolling_models import RollingJobRow

    with db.store.engine.begin() as c:
        c.execute(update(RollingJobRow).where(RollingJobRow.job_id == job_id).values(
            spec_json=json.dumps(spec)))


def test_a_rolling_jobs_lost_site_ends_it_where_it_waits_and_the_next_runs_plan(tmp_path,
                                                                               shared_data):
    # an API job deferred by run 1 waits in the rolling state; then the catalog loses its
    # site (simulated: its stored specs name one the catalog lacks). Before, every later run
    # failed (the planner refused the pending job); now run 2 ends it UnknownSite, in the
    # state and in its record, and plans the rest
    late = _spec("api-late", earliest_start="2023-07-11T06:00:00Z",
                 deadline="2023-07-12T20:00:00Z")
    db, _, run = _rolling_service(tmp_path, shared_data, late)
    assert run(10).status == "succeeded"
    assert db.get_job("api-late")["reason"] == "NotCommitted"      # waits in the state
    gone = {**late, "allowed_sites": ["mars-site"]}
    db.update_job("api-late", spec_json=json.dumps(gone))
    _set_rolling_spec(db, "api-late", gone)
    out = run(11)
    assert out.status == "succeeded"                                  # before: failed
    rec = db.get_job("api-late")
    assert (rec["state"], rec["reason"]) == ("Failed", "UnknownSite")
    doc = db.store.get_plan(out.plan_id)
    assert ("api-late", "UnknownSite") in [(e["job_id"], e["reason"])
                                          for e in doc["rolling"]["ended"]]


def test_an_api_job_that_holds_its_id_first_keeps_it_and_the_files_clash_is_said(tmp_path,
                                                                                shared_data):
    # rolling: the API job waits in the state under its id; the workload file then gains a
    # job with that id. The held (API) job keeps the id; the file's is ignored and said
    # (before: silently ignored). At the limit, run 1's file had no clash: nothing said
    late = _spec("dup-id", earliest_start="2023-07-11T06:00:00Z",
                 deadline="2023-07-12T20:00:00Z")
    db, s, run = _rolling_service(tmp_path, shared_data, late)
    first = run(10)
    said = [n for n in db.store.get_plan(first.plan_id)["notes"] if "share an id" in n]
    assert said == []
    path = s.workload_file
    doc = json.loads(open(path).read())
    doc["jobs"].append({**{k: v for k, v in late.items() if k != "kind"}, "gpus": 2})
    open(path, "w").write(json.dumps(doc))
    out = run(11)
    assert out.status == "succeeded"
    assert db.get_job("dup-id")["state"] in ("Pending", "Planned")   # not NameConflict
    notes = db.store.get_plan(out.plan_id)["notes"]
    assert ("1 new job(s) share an id with a different job the rolling state already holds, "
            "and were ignored (the held job keeps the id; submit the new one under another "
            "id): dup-id") in notes


@pytest.mark.parametrize(("edit", "reason", "says"), [
    ({"template": "gone"}, "UnusableTemplate",
     "its template no longer applies (catalog 'frankfurt', job evening, field 'template': "
     "unknown template 'gone'; the catalog defines: none"),
    ({"allowed_sites": ["mars-site"]}, "UnknownSite",
     "it names site(s) mars-site that catalog 'frankfurt' no longer defines"),
], ids=["template", "site"])
def test_a_waiting_file_job_a_catalog_edit_made_unplannable_ends_and_the_rest_plan(
        tmp_path, shared_data, edit, reason, says):
    # the workload file's "evening" waits in the rolling state after run 1; a catalog edit then
    # removes the template or a site it names (simulated on its stored spec). Before, every
    # later run failed on the planner's refusal (only API jobs' lost sites were ended); now
    # run 2 ends it with the reason and plans the rest
    from sqlalchemy import select, update

    from carbonsched.store.rolling_models import RollingJobRow

    db, _, run = _rolling_service(tmp_path, shared_data, _spec("api-ok"))
    assert run(10).status == "succeeded"
    with db.store.engine.begin() as c:
        row = c.execute(select(RollingJobRow).where(RollingJobRow.job_id == "evening")).one()
        assert row.state == "Pending"                                   # it waits
        c.execute(update(RollingJobRow).where(RollingJobRow.job_id == "evening").values(
            spec_json=json.dumps({**json.loads(row.spec_json), **edit})))
    out = run(11)
    assert out.status == "succeeded", out                              # before: failed
    doc = db.store.get_plan(out.plan_id)
    ended = {e["job_id"]: e for e in doc["rolling"]["ended"]}
    assert ended["evening"]["reason"] == reason
    assert ended["evening"]["detail"].startswith(says)
    assert "api-ok" not in ended                                        # the rest plan
    assert (f"1 waiting job(s) ended Failed: a catalog edit removed a site or template they "
            f"name (UnknownSite, UnusableTemplate), so no run could plan them: evening "
            f"({reason})") in doc["notes"]


def test_unplannable_pending_names_a_template_the_job_no_longer_fits():
    # a template still defined but changed so that, merged with the job, the schema refuses
    # it (gpu_milli on a 2-GPU gang) ends the job; the same template on a 1-GPU job still
    # applies (the limit); a job without a template is never looked at
    from dataclasses import replace

    from carbonsched.catalog import load_catalog
    from carbonsched.plan.rolling import RollingState
    from carbonsched.service.rolling import unplannable_pending
    from carbonsched.service.runs import job_from_spec as api_job
    from carbonsched.store.rolling_state import job_from_spec
    from tests.service.test_rolling_service import CATALOG

    cat = replace(load_catalog(CATALOG), templates={"shared": {"gpu_milli": 250}})
    st = RollingState()
    for jid, gpus, tmpl in (("gang", 2, "shared"), ("one", 1, "shared"), ("plain", 2, None)):
        spec = _spec(jid, gpus=gpus) | ({"template": tmpl} if tmpl else {})
        st.pending[jid] = job_from_spec(spec)
    assert api_job(_spec("x", template="shared")).payload is None   # API jobs: merged, no name
    (u,) = unplannable_pending(st, cat)
    assert (u.job_id, str(u.reason)) == ("gang", "UnusableTemplate")
    assert u.detail.startswith("its template no longer applies (catalog 'frankfurt', job gang, "
                               "field 'gpus': a job with gpu_milli asks for one slice")


def test_a_waiting_job_whose_stored_spec_the_schema_now_refuses_ends_and_the_rest_plan(
        tmp_path, shared_data):
    # a job deferred by run 1 waits in the rolling state; its stored spec then holds what a
    # tightened rule refuses (a carriage return in its command, accepted when it was stored).
    # Before, loading the rolling state raised and every later rolling run failed; now run 2
    # ends it InvalidSpec, in the state and in its record, and plans the rest
    late = _spec("api-late", earliest_start="2023-07-11T06:00:00Z",
                 deadline="2023-07-12T20:00:00Z", command="python3 run.py")
    db, _, run = _rolling_service(tmp_path, shared_data, late)
    assert run(10).status == "succeeded"
    assert db.get_job("api-late")["reason"] == "NotCommitted"
    old = {**late, "command": "python3 run.py\r\n"}
    _set_rolling_spec(db, "api-late", old)
    out = run(11)
    assert out.status == "succeeded"                                  # before: failed
    rec = db.get_job("api-late")
    assert (rec["state"], rec["reason"]) == ("Failed", "InvalidSpec")
    doc = db.store.get_plan(out.plan_id)
    ended = {e["job_id"]: e for e in doc["rolling"]["ended"]}
    assert ended["api-late"]["reason"] == "InvalidSpec"
    assert ended["api-late"]["detail"].startswith(
        "its stored spec no longer passes the job schema (field 'command': ")
    assert any(n.startswith("1 waiting job(s) ended Failed: their stored spec") and
               "api-late" in n for n in doc["notes"])
