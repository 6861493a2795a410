"""An API job's record follows it: whole over its pieces, out of ``Planned`` once dispatched.

Before, a job cut into pieces was recorded by its last piece (start, end, energy of that piece
alone), and a job stayed ``Planned`` after dispatch submitted it, so every later daily plan
whose horizon met its window placed it again (reserving capacity for work already on a
backend) and could turn it back to ``Pending``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pandas as pd
import pytest
from sqlalchemy.orm import Session

from carbonsched.domain import Workload
from carbonsched.service.runs import (
    job_spans,
    sync_dispatched_jobs,
    update_submitted,
    with_submitted_jobs,
)
from carbonsched.store import Store
from carbonsched.store.models import DispatchRow
from carbonsched.store.service import ServiceStore

NOW = datetime(2023, 7, 15, 23, tzinfo=UTC)


@pytest.fixture
def db(tmp_path) -> ServiceStore:
    return ServiceStore(Store(f"sqlite:///{tmp_path / 's.sqlite'}"))


def _spec(jid: str) -> dict:
    return {"id": jid, "tenant": "t", "gpu_type": "A100", "gpus": 2, "duration_hours": 4,
            "power_per_gpu_kw": 0.5, "earliest_start": "2023-07-16T00:00:00Z",
            "deadline": "2023-07-17T12:00:00Z", "allowed_sites": [], "kind": "batch",
            "preemptible": True}


def _add(db: ServiceStore, *ids: str, state: str = "Planned") -> None:
    db.add_jobs([{"job_id": j, "tenant": "t", "spec_json": json.dumps(_spec(j)),
                  "state": state, "reason": "Placed", "detail": "", "submitted_at": NOW,
                  "updated_at": NOW, "reserved": False, "plan_id": "p1"} for j in ids])


def _outbox(db: ServiceStore, job_id: str, piece: int, plan_id: str, state: str,
            submitted: bool, site: str = "s1", hours: tuple[int, int] = (2, 4)) -> None:
    t = pd.Timestamp("2023-07-16T00:00Z")
    with Session(db.store.engine) as s:
        s.add(DispatchRow(
            key=f"{job_id}#{piece}", job_id=job_id, piece=piece, plan_id=plan_id, site=site,
            backend="slurm:de", state=state, reason="Submitted" if submitted else
            "AwaitingSubmit", detail="", backend_id="de:42" if submitted else None,
            request_json="{}", planned_start=(t + pd.Timedelta(hours=hours[0])).to_pydatetime(),
            planned_end=(t + pd.Timedelta(hours=hours[1])).to_pydatetime(), attempts=1,
            created_at=NOW, updated_at=NOW, submit_attempted_at=NOW if submitted else None))
        s.commit()


def test_a_job_in_pieces_is_recorded_whole(db):
    # two pieces: 02:00-04:00 at s1 (1.0 kWh, 0.1 kg) and 08:00-10:00 at s2 (1.5, 0.2).
    # Before: the record held the last piece only (08:00, 1.5 kWh)
    _add(db, "J", state="Pending")
    doc = {"plan_id": "p2", "unplaced": [], "placements": [
        {"job_id": "J", "piece": 1, "site": "s2", "start": "2023-07-16T08:00:00Z",
         "end": "2023-07-16T10:00:00Z", "energy_kwh": 1.5, "emissions_kg": 0.2},
        {"job_id": "J", "piece": 0, "site": "s1", "start": "2023-07-16T02:00:00Z",
         "end": "2023-07-16T04:00:00Z", "energy_kwh": 1.0, "emissions_kg": 0.1}]}
    update_submitted(db, doc, {"J"}, NOW)
    j = db.get_job("J")
    assert (j["state"], j["site"], j["detail"]) == ("Planned", "s1", "in 2 pieces at s1, s2")
    assert (pd.Timestamp(j["start"]), pd.Timestamp(j["end"])) == (
        pd.Timestamp("2023-07-16T02:00Z"), pd.Timestamp("2023-07-16T10:00Z"))
    assert (j["energy_kwh"], j["emissions_kg"]) == pytest.approx((2.5, 0.3))
    # at the limit: one piece, no detail
    one = job_spans(doc["placements"][1:])["J"]
    assert (one["detail"], one["energy_kwh"]) == ("", 1.0)


def test_a_dispatched_job_is_not_planned_again_and_takes_its_outbox_state(db):
    # D: its first piece submitted from plan p1 -> not planned again, recorded Dispatched.
    # P: an intent written, not yet submitted (its backend down): dispatch drives that
    #    intent and never submits another plan's placement, so it is held too (before, the
    #    next plan placed it again): Dispatched/AwaitingSubmit.
    # R: submitted and running -> Running.
    # S: piece 0 succeeded, piece 1 still to submit -> Dispatched, never Succeeded (before:
    #    Succeeded, and never looked at again).
    # N: no outbox row (at the limit) -> planned again
    _add(db, "D", "P", "R", "S", "N")
    _outbox(db, "D", 0, "p1", "Dispatched", submitted=True)
    _outbox(db, "P", 0, "p1", "Pending", submitted=False)
    _outbox(db, "R", 0, "p1", "Running", submitted=True)
    _outbox(db, "R", 1, "p1", "Dispatched", submitted=True, site="s2", hours=(8, 10))
    _outbox(db, "S", 0, "p1", "Succeeded", submitted=True)
    _outbox(db, "S", 1, "p1", "Pending", submitted=False, site="s2", hours=(8, 10))
    t = pd.Timestamp("2023-07-16T00:00:00Z")
    _, ids = with_submitted_jobs(Workload([], []), db, t, 24)
    assert ids == {"N"}
    assert sync_dispatched_jobs(db, NOW) == 4
    d, p, r, s = (db.get_job(x) for x in ("D", "P", "R", "S"))
    assert (d["state"], d["plan_id"], d["site"]) == ("Dispatched", "p1", "s1")
    assert "dispatched from plan p1 to slurm:de as de:42" in d["detail"]
    assert (p["state"], p["reason"]) == ("Dispatched", "AwaitingSubmit")
    assert p["detail"] == "dispatched from plan p1 to slurm:de, awaiting submission"
    assert (r["state"], pd.Timestamp(r["end"])) == ("Running",
                                                    pd.Timestamp("2023-07-16T10:00Z"))
    assert (s["state"], s["reason"]) == ("Dispatched", "AwaitingSubmit")
    assert db.get_job("N")["state"] == "Planned"
    # a later plan that leaves N unplaced does not touch D (not among its API jobs)
    update_submitted(db, {"plan_id": "p2", "placements": [], "unplaced": [
        {"job_id": "N", "reason": "InsufficientCapacity", "detail": "full"}]}, ids, NOW)
    assert db.get_job("D")["state"] == "Dispatched"
    # nothing changed since: nothing recorded again
    assert sync_dispatched_jobs(db, NOW) == 0


def test_a_stored_jobs_template_is_not_applied_again():
    # the API stores the merged spec with its template's name; a run applied the template
    # again, so a catalog that since removed it (or changed it) stopped every run
    # (WorkloadError: unknown template). The stored fields are the job
    from carbonsched.pipeline.daily import apply_templates
    from carbonsched.service.runs import job_from_spec

    spec = {**_spec("T"), "template": "batch-eval", "command": ["python", "eval.py"],
            "image": "registry.example/eval:1"}
    job = job_from_spec(spec)
    assert job.payload is not None and job.payload.template is None
    assert job.payload.command == ("python", "eval.py")
    assert apply_templates([job], {}, "API jobs") == [job]     # no catalog templates at all


def test_a_run_plans_from_one_snapshot_of_the_api_jobs(db):
    # before, a daily run read the API's jobs three times (the unrunnable check, the jobs to
    # plan, the expired ones): a job stored between the first two reads, naming a site the
    # catalog lost, skipped the check and was planned, and the planner refused the whole run
    from carbonsched.config import Settings
    from carbonsched.service.runs import API_LIVE_STATES, _plan_daily

    _add(db, "early", state="Pending")
    real = db.jobs
    reads = []

    def jobs(*a, **k):
        rows = real(*a, **k)
        reads.append(k.get("states"))
        if len(reads) == 1:      # a submission lands just after the run's first read
            late = {**_spec("late"), "allowed_sites": ["mars-1"]}
            db.add_jobs([{"job_id": "late", "tenant": "t", "spec_json": json.dumps(late),
                          "state": "Pending", "reason": "AwaitingPlan", "detail": "",
                          "submitted_at": NOW, "updated_at": NOW, "reserved": False}])
        return rows

    db.jobs = jobs
    settings = Settings(catalog="china-eastdata-westcompute", time_limit_s=20)
    planned = _plan_daily(settings, db, Workload([], []), "2023-07-16",
                          pd.Timestamp("2023-07-16T00:00:00Z"))
    # the jobs to plan are read once; the live ones (whose running units hold capacity) apart
    assert reads == [("Pending", "Planned"), API_LIVE_STATES]
    assert planned.api_ids == {"early"}
    assert {p["job_id"] for p in planned.doc["placements"]} == {"early"}
    db.jobs = real
    assert db.get_job("late")["state"] == "Pending"      # the next run's


@pytest.mark.parametrize("bad", [{"command": "python train.py\r\n"},
                                 {"image": "registry.example/x:1", "volumes": [
                                     {"name": "d", "mount_path": "/d", "empty_dir": False}]}])
def test_a_stored_job_the_schema_now_refuses_ends_failed_and_the_run_goes_on(db, bad):
    # before, a job stored before a schema rule tightened (a carriage return in its command,
    # a false empty_dir) raised at read-back: every later run failed until the row was
    # deleted by hand. At the limit: the good job beside it is planned
    from carbonsched.config import Settings
    from carbonsched.service.runs import _plan_daily

    _add(db, "good", state="Pending")
    spec = {**_spec("old"), **bad}
    db.add_jobs([{"job_id": "old", "tenant": "t", "spec_json": json.dumps(spec),
                  "state": "Pending", "reason": "AwaitingPlan", "detail": "",
                  "submitted_at": NOW, "updated_at": NOW, "reserved": False}])
    settings = Settings(catalog="china-eastdata-westcompute", time_limit_s=20)
    planned = _plan_daily(settings, db, Workload([], []), "2023-07-16",
                          pd.Timestamp("2023-07-16T00:00:00Z"))
    assert planned.api_ids == {"good"}
    assert {p["job_id"] for p in planned.doc["placements"]} == {"good"}
    planned.record(db, NOW)
    old = db.get_job("old")
    field = "command" if "command" in bad else "volumes"
    assert (old["state"], old["reason"]) == ("Failed", "InvalidSpec")
    assert old["detail"].startswith(f"its stored spec no longer passes the job schema (field "
                                    f"{field!r}: ")
    assert any(n.startswith("1 job(s) submitted through the API cannot be planned") and
               "old (InvalidSpec)" in n for n in planned.doc["notes"])
