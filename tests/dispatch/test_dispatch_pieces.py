"""Suspend and resume: a preemptible job's pieces on real Slurm and on the Kubernetes emulator.

Each piece is its own backend job; every piece gets the same ``CARBONSCHED_*`` environment so one
job script checkpoints and resumes; Slurm signals a pausing piece before its time limit and runs
a resumed piece only after its predecessor; a piece stopped at its planned end is ``Paused``,
not ``Failed``.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from carbonsched.adapters.dispatch.base import DispatchRequest
from carbonsched.adapters.dispatch.kubernetes import KubernetesAdapter
from carbonsched.adapters.dispatch.slurm import SlurmAdapter
from carbonsched.catalog import load_catalog
from carbonsched.config import Settings
from carbonsched.dispatch.outbox import (
    build_adapters,
    dispatch_plan,
    mark_paused,
    plan_requests,
    refresh_status,
    release_due,
)
from carbonsched.store.models import DispatchRow

FMT = "%Y-%m-%dT%H:%M:%SZ"
CATALOG = load_catalog("global")


def _doc(placements: list[dict]) -> dict:
    start = min(p["start"] for p in placements)
    return {"plan_id": uuid.uuid4().hex, "date": start[:10], "catalog": "global",
            "signal_quality": "measured",
            "solver": {"name": "t", "status": "optimal", "seconds": 0.0},
            "totals": {"energy_kwh": 0.0, "emissions_kg": 0.0, "baseline_emissions_kg": 0.0},
            "unplaced": [], "inference": [], "placements": placements}


def _piece(job_id: str, piece: int, site: str, gpu: str, start: datetime, end: datetime,
           **kw) -> dict:
    return {"job_id": job_id, "piece": piece, "site": site, "start": start.strftime(FMT),
            "end": end.strftime(FMT), "gpu_type": gpu, "gpus": 1, "energy_kwh": 1.0,
            "emissions_kg": 0.1, **kw}


def _req(piece: int, pieces: int, **kw) -> DispatchRequest:
    t0 = datetime(2030, 1, 2, 3, 0, tzinfo=UTC)
    base = dict(plan_id="p1", job_id="train-7", piece=piece, site="ca-on-toronto",
                start=t0 + timedelta(hours=3 * piece), end=t0 + timedelta(hours=3 * piece + 2),
                deadline=t0 + timedelta(days=2), gpu_type="A100", gpus=1, pieces=pieces)
    base.update(kw)
    return DispatchRequest(**base)


# -- the request and the command lines (no backend) ---------------------------------------------

def test_a_piece_outside_its_jobs_piece_count_is_refused_with_the_range():
    with pytest.raises(ValueError, match=r"piece 2 is outside 0\.\.1 \(the job runs in 2"):
        _req(2, 2)
    with pytest.raises(ValueError, match="checkpoint_overhead_s must be >= 0, got -60"):
        _req(0, 2, checkpoint_overhead_s=-60)
    assert _req(1, 2).resumes and not _req(1, 2).pauses  # the last piece: just inside the range
    # a request that does not say how many pieces treats its piece as the last
    assert _req(3, 0).pieces == 4 and not _req(3, 0).pauses


def test_every_piece_gets_the_same_environment_naming_its_place_in_the_job():
    first, last = _req(0, 3), _req(2, 3)
    assert first.job_env() == {
        "CARBONSCHED_JOB_ID": "train-7", "CARBONSCHED_PLAN_ID": "p1", "CARBONSCHED_PIECE": "0",
        "CARBONSCHED_PIECES": "3", "CARBONSCHED_RESUME": "0",
        "CARBONSCHED_PIECE_END": "2030-01-02T05:00:00Z"}
    assert last.job_env()["CARBONSCHED_RESUME"] == "1"
    assert last.job_env()["CARBONSCHED_PIECE_END"] == "2030-01-02T11:00:00Z"


def test_plan_requests_count_pieces_per_job_and_read_the_resume_overhead():
    t0 = datetime(2030, 1, 2, tzinfo=UTC)
    doc = _doc([
        _piece("a", 0, "gb-london", "A100", t0, t0 + timedelta(hours=2)),
        _piece("a", 1, "gb-london", "A100", t0 + timedelta(hours=5), t0 + timedelta(hours=6),
               overhead_minutes=10),
        _piece("b", 0, "gb-london", "A100", t0, t0 + timedelta(hours=1))])
    reqs = {r.key: r for r in plan_requests(doc, CATALOG)}
    assert (reqs["a#0"].pieces, reqs["a#1"].pieces, reqs["b#0"].pieces) == (2, 2, 1)
    assert (reqs["a#0"].checkpoint_overhead_s, reqs["a#1"].checkpoint_overhead_s) == (0, 600)
    assert reqs["a#0"].pauses and reqs["a#1"].resumes and not reqs["b#0"].pauses


def test_slurm_signals_only_pausing_pieces_and_exports_the_environment(tmp_path):
    a = SlurmAdapter("ontario", conf=tmp_path / "slurm.conf", timezone=UTC)
    _tz, argv0 = a.sbatch_argv(_req(0, 2))
    _tz, argv1 = a.sbatch_argv(_req(1, 2))
    _tz, whole = a.sbatch_argv(_req(0, 1))
    assert "--signal=B:USR1@120" in argv0
    assert not any(x.startswith("--signal") for x in argv1 + whole)
    assert "--time=120" in argv0
    rendered = a.render(_req(1, 2))
    assert "CARBONSCHED_RESUME=1" in rendered and "CARBONSCHED_PIECES=2" in rendered


def test_kubernetes_signals_a_pausing_piece_the_grace_before_its_end_and_stops_it_by_then():
    # as Slurm's --signal=B:USR1@120 before --time: SIGTERM (activeDeadlineSeconds) comes 120 s
    # before CARBONSCHED_PIECE_END and the pod's grace period ends at it. Before, the deadline
    # was the piece's whole length: SIGTERM at the end, the pod up to 120 s past it
    a = KubernetesAdapter("ctx", "ns", kubeconfig="/nonexistent")
    m0, m1 = a.manifest(_req(0, 2)), a.manifest(_req(1, 2))
    assert m0["spec"]["activeDeadlineSeconds"] == 2 * 3600 - 120
    assert m0["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 120
    assert m0["metadata"]["annotations"]["carbonsched.io/stop-at"] == "2030-01-02T04:58:00Z"
    env = {e["name"]: e["value"] for e in m0["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["CARBONSCHED_PIECE_END"] == "2030-01-02T05:00:00Z"   # unchanged: exit by then
    # the last piece may run to the job's deadline, like a job placed whole
    assert m1["spec"]["activeDeadlineSeconds"] == int(
        (_req(1, 2).deadline - _req(1, 2).start).total_seconds())
    assert "terminationGracePeriodSeconds" not in m1["spec"]["template"]["spec"]
    assert m1["metadata"]["annotations"]["carbonsched.io/stop-at"] == "2030-01-04T03:00:00Z"
    env = {e["name"]: e["value"] for e in m1["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["CARBONSCHED_RESUME"] == "1" and env["CARBONSCHED_PIECE"] == "1"


@pytest.mark.parametrize(("seconds", "deadline", "grace"), [
    (7200, 7080, 120),
    (241, 121, 120),
    (122, 2, 120),      # the shortest piece that gets the whole grace period after 2 s
    (121, 1, 120),      # ... after the least deadline (1 s: the API's positive integer)
    (120, 1, 119),      # a piece as short as the grace period: signalled at once, gone by its end
    (60, 1, 59),
    (1, 1, 0),
])
@pytest.mark.parametrize("workload", ["job", "kueue", "jobset", "volcano"])
def test_a_pausing_piece_is_gone_by_its_end_on_every_kind_down_to_the_shortest(
        workload, seconds, deadline, grace):
    a = KubernetesAdapter("ctx", "ns", kubeconfig="/nonexistent", workload=workload,
                          queue="q")
    for nodes in (1, 2):
        req = _req(0, 2, end=_req(0, 2).start + timedelta(seconds=seconds), gpus=2, nodes=nodes)
        m = a.manifest(req)
        if m["kind"] == "JobSet":
            job = m["spec"]["replicatedJobs"][0]["template"]["spec"]
            limit, pod = job["activeDeadlineSeconds"], job["template"]["spec"]
        elif m["apiVersion"].startswith("batch.volcano.sh"):
            pod = m["spec"]["tasks"][0]["template"]["spec"]
            limit = pod["activeDeadlineSeconds"]          # counted from the pod's start
        else:
            limit, pod = m["spec"]["activeDeadlineSeconds"], m["spec"]["template"]["spec"]
        assert (limit, pod["terminationGracePeriodSeconds"]) == (deadline, grace)
        assert limit >= 1 and limit + grace == seconds   # SIGKILL at the latest at the end
        assert m["metadata"]["annotations"]["carbonsched.io/stop-at"] == (
            req.start + timedelta(seconds=deadline)).strftime(FMT)


def test_the_planned_stop_of_an_object_made_before_it_was_annotated():
    # an object created by an earlier carbonsched has no stop-at annotation: its planned start
    # plus the deadline it was made with (a JobSet's in its replicated Job, which cannot change)
    a = KubernetesAdapter("ctx", "ns", kubeconfig="/nonexistent")
    ann = {"carbonsched.io/planned-start": "2030-01-02T03:00:00Z"}
    job = {"kind": "Job", "metadata": {"annotations": ann},
           "spec": {"activeDeadlineSeconds": 7200}}
    jobset = {"kind": "JobSet", "metadata": {"annotations": ann}, "spec": {"replicatedJobs": [
        {"template": {"spec": {"activeDeadlineSeconds": 60}}}]}}
    assert a.stop_at(job) == datetime(2030, 1, 2, 5, tzinfo=UTC)
    assert a.stop_at(jobset) == datetime(2030, 1, 2, 3, 1, tzinfo=UTC)
    assert a.stop_at({"kind": "Job", "metadata": {}, "spec": {}}) is None
    made = a.manifest(_req(0, 2))
    assert a.stop_at(made) == datetime(2030, 1, 2, 4, 58, tzinfo=UTC)


@pytest.mark.parametrize(("piece", "pieces", "ending", "relabelled"), [
    (0, 2, "TIMEOUT", True),            # a pausing piece at its time limit
    (0, 2, "DeadlineExceeded", True),   # the same on Kubernetes
    (1, 2, "TIMEOUT", False),           # the last piece timing out is a real failure
    (0, 1, "TIMEOUT", False),           # so is a job placed whole
    (0, 2, "DEADLINE", False),          # Slurm could not start it before --deadline
    (0, 2, "FAILED", False),            # a non-zero exit
])
def test_only_a_pausing_piece_stopped_at_its_end_is_paused(piece, pieces, ending, relabelled):
    req = _req(piece, pieces)
    row = DispatchRow(key=req.key, job_id=req.job_id, piece=piece, state="Failed",
                      reason="BackendFailed", request_json=json.dumps(
                          {"piece": piece, "pieces": pieces}))
    assert mark_paused(row, ending) is relabelled
    assert (row.state, row.reason) == (("Succeeded", "Paused") if relabelled
                                       else ("Failed", "BackendFailed"))
    if relabelled:
        assert row.detail.startswith(f"piece {piece + 1} of {pieces} stopped at its planned end")


# -- real Slurm and the Kubernetes emulator -------------------------------------------------------

@pytest.mark.slurm
def test_pieces_on_real_slurm_run_with_the_environment_and_resume_after_their_predecessor(
        store, settings, slurm_dir, tmp_path):
    prefix = uuid.uuid4().hex[:8]
    out = tmp_path / "env"
    out.mkdir()
    os.chmod(out, 0o777)
    now = datetime.now(UTC).replace(microsecond=0)
    later = now + timedelta(days=2)
    doc = _doc([
        _piece(f"{prefix}-t", 0, "ca-on-toronto", "A100", now, now + timedelta(hours=1),
               command=f"env | grep ^CARBONSCHED_ | sort > {out}/piece0.env; sleep 30"),
        _piece(f"{prefix}-t", 1, "ca-on-toronto", "A100", later, later + timedelta(hours=1),
               overhead_minutes=10, command="true")])
    store.save_plan(doc)
    assert dispatch_plan(store, doc["plan_id"], settings=settings).counts == {"submitted": 2}
    conf = slurm_dir / "ontario" / "slurm.conf"
    env = {**os.environ, "SLURM_CONF": str(conf)}
    listed = json.loads(subprocess.run(["squeue", "--json", "--states=all"], env=env,
                                       capture_output=True, text=True, check=True).stdout)
    ours = {j["name"]: j for j in listed["jobs"] if j["name"].startswith(f"carbonsched-{prefix}")}
    first, second = ours[f"carbonsched-{prefix}-t-0"], ours[f"carbonsched-{prefix}-t-1"]
    assert f"afterany:{first['job_id']}" in second["dependency"]
    for _ in range(240):
        if (out / "piece0.env").exists() and (out / "piece0.env").read_text():
            break
        time.sleep(0.25)
    got = dict(line.split("=", 1) for line in (out / "piece0.env").read_text().splitlines())
    assert got["CARBONSCHED_PIECE"] == "0" and got["CARBONSCHED_PIECES"] == "2"
    assert got["CARBONSCHED_RESUME"] == "0" and got["CARBONSCHED_JOB_ID"] == f"{prefix}-t"
    assert got["CARBONSCHED_PIECE_END"] == (now + timedelta(hours=1)).strftime(FMT)
    with Session(store.engine) as s:
        row = s.scalars(select(DispatchRow).where(DispatchRow.key == f"{prefix}-t#1")).one()
        assert json.loads(row.request_json)["checkpoint_overhead_s"] == 600


@pytest.mark.slurm
def test_a_job_dispatched_whole_is_not_run_again_by_a_later_plan_that_splits_it(
        store, settings, slurm_dir):
    # plan A dispatched job J whole (J#0); plan B splits J into two pieces: J#0 is A's, and
    # J#1, a key A never wrote, must not be submitted either (the job would run 1.5 times).
    # K is only in B, in two pieces: both are submitted (the rule takes back nothing else)
    prefix = uuid.uuid4().hex[:8]
    j, k = f"{prefix}-j", f"{prefix}-k"
    t0 = datetime.now(UTC).replace(microsecond=0, second=0, minute=0) + timedelta(days=2)
    h = timedelta(hours=1)
    a = _doc([_piece(j, 0, "ca-on-toronto", "A100", t0, t0 + 2 * h, command="true")])
    b = _doc([_piece(j, 0, "ca-on-toronto", "A100", t0, t0 + h, command="true"),
              _piece(j, 1, "ca-on-toronto", "A100", t0 + 3 * h, t0 + 4 * h, command="true"),
              _piece(k, 0, "ca-on-toronto", "A100", t0, t0 + h, command="true"),
              _piece(k, 1, "ca-on-toronto", "A100", t0 + 3 * h, t0 + 4 * h, command="true")])
    for doc in (a, b):
        store.save_plan(doc)
    assert dispatch_plan(store, a["plan_id"], settings=settings).counts == {"submitted": 1}
    second = dispatch_plan(store, b["plan_id"], settings=settings)
    assert second.counts == {"submitted": 2, "already_dispatched": 2}
    taken_back = {o.key: o for o in second.outcomes if o.action == "already_dispatched"}
    assert set(taken_back) == {f"{j}#0", f"{j}#1"}
    assert all(o.reason == "AlreadyDispatched" and a["plan_id"] in o.detail
               for o in taken_back.values())
    with Session(store.engine) as s:
        keys = set(s.scalars(select(DispatchRow.key).where(DispatchRow.job_id.in_([j, k]))))
    assert keys == {f"{j}#0", f"{k}#0", f"{k}#1"}
    conf = slurm_dir / "ontario" / "slurm.conf"
    listed = json.loads(subprocess.run(["squeue", "--json", "--states=all"],
                                       env={**os.environ, "SLURM_CONF": str(conf)},
                                       capture_output=True, text=True, check=True).stdout)
    names = sorted(x["name"] for x in listed["jobs"] if x["name"].startswith(
        f"carbonsched-{prefix}"))
    assert names == [f"carbonsched-{j}-0", f"carbonsched-{k}-0", f"carbonsched-{k}-1"]


@pytest.mark.slurm
def test_a_job_committed_by_its_first_piece_is_dispatched_whole_and_once(store, settings,
                                                                          slurm_dir):
    # plan B is dispatched with commit_before between J's pieces: J is committed whole (its
    # first piece starts before), as the rolling planner commits it, so no later plan is left
    # to run J#1. Plan C re-places J: every piece AlreadyDispatched. Plan D has K's second
    # piece past its deadline, for a K plan A dispatched whole: taken back too, not recorded
    # as D's failure (before: J#1 was never run; K#1 stayed a failed row of plan D)
    prefix = uuid.uuid4().hex[:8]
    j, k = f"{prefix}-j", f"{prefix}-k"
    h = timedelta(hours=1)
    t0 = datetime.now(UTC).replace(microsecond=0, second=0, minute=0) + timedelta(days=2)
    now = datetime.now(UTC).replace(microsecond=0)
    b = _doc([_piece(j, 0, "ca-on-toronto", "A100", t0, t0 + h, command="true"),
              _piece(j, 1, "ca-on-toronto", "A100", t0 + 30 * h, t0 + 31 * h, command="true")])
    c = _doc([_piece(j, 0, "ca-on-toronto", "A100", t0 + 2 * h, t0 + 3 * h, command="true"),
              _piece(j, 1, "ca-on-toronto", "A100", t0 + 30 * h, t0 + 31 * h, command="true")])
    a = _doc([_piece(k, 0, "ca-on-toronto", "A100", t0, t0 + 2 * h, command="true")])
    d = _doc([_piece(k, 0, "ca-on-toronto", "A100", t0, t0 + h, command="true"),
              _piece(k, 1, "ca-on-toronto", "A100", now + 3 * h, now + 4 * h, command="true",
                     deadline=(now + h).strftime(FMT))])
    for doc in (a, b, c, d):
        store.save_plan(doc)
    first = dispatch_plan(store, b["plan_id"], settings=settings, commit_before=t0 + 24 * h)
    assert first.counts == {"submitted": 2}
    again = dispatch_plan(store, c["plan_id"], settings=settings)
    assert again.counts == {"already_dispatched": 2}
    assert dispatch_plan(store, a["plan_id"], settings=settings).counts == {"submitted": 1}
    late = dispatch_plan(store, d["plan_id"], settings=settings)
    assert {o.key: o.action for o in late.outcomes} == {f"{k}#0": "already_dispatched",
                                                         f"{k}#1": "already_dispatched"}
    with Session(store.engine) as s:
        rows = {r.key: r.plan_id for r in s.scalars(select(DispatchRow).where(
            DispatchRow.job_id.in_([j, k])))}
    assert rows == {f"{j}#0": b["plan_id"], f"{j}#1": b["plan_id"], f"{k}#0": a["plan_id"]}
    # just at the limit: a job whose first piece starts at commit_before is not committed
    e = _doc([_piece(f"{prefix}-e", 0, "ca-on-toronto", "A100", t0 + 24 * h, t0 + 25 * h,
                     command="true")])
    store.save_plan(e)
    assert dispatch_plan(store, e["plan_id"], settings=settings,
                         commit_before=t0 + 24 * h).counts == {"not_committed": 1}


def test_a_kubernetes_piece_stopped_at_its_end_is_paused_and_a_whole_job_is_not(
        store, slurm_dir, emulator_kubeconfig):
    prefix = uuid.uuid4().hex[:8]
    now = datetime.now(UTC).replace(microsecond=0)
    one_s = now + timedelta(seconds=1)  # shorter than the emulator's 2 s run: stopped at its end
    later = now + timedelta(days=2)
    doc = _doc([
        _piece(f"{prefix}-p", 0, "de-frankfurt", "T4", now, one_s),
        _piece(f"{prefix}-p", 1, "de-frankfurt", "T4", later, later + timedelta(hours=1)),
        _piece(f"{prefix}-w", 0, "de-frankfurt", "T4", now, one_s,
               deadline=one_s.strftime(FMT))])
    store.save_plan(doc)
    settings = Settings(slurm_conf_dir=slurm_dir, kubeconfig=emulator_kubeconfig)
    assert dispatch_plan(store, doc["plan_id"], settings=settings,
                         clock=lambda: now).counts == {"submitted": 3}
    adapters = build_adapters(CATALOG, settings=settings)
    for a in adapters.values():   # released at its start (the wall clock may be past its stop)
        if isinstance(a, KubernetesAdapter):
            a.clock = lambda: now
    released = release_due(store, "global", adapters=adapters, clock=lambda: now)
    assert sorted(released) == [f"{prefix}-p#0", f"{prefix}-w#0"]
    time.sleep(2.5)
    recs = refresh_status(store, "global", plan_id=doc["plan_id"],
                          adapters=adapters).set_index("key")
    paused = recs.loc[f"{prefix}-p#0"]
    assert (paused.state, paused.reason) == ("Succeeded", "Paused")
    assert paused.detail.startswith("piece 1 of 2 stopped at its planned end (DeadlineExceeded)")
    whole = recs.loc[f"{prefix}-w#0"]
    assert (whole.state, whole.reason) == ("Failed", "DeadlinePassed")
    assert (recs.loc[f"{prefix}-p#1"].state, recs.loc[f"{prefix}-p#1"].reason) == (
        "Dispatched", "Submitted")



def test_a_dry_run_of_a_past_plan_says_which_placements_are_late_or_hopeless(
        store, slurm_dir, emulator_kubeconfig):
    now = datetime(2030, 6, 1, 12, 0, tzinfo=UTC)
    h = timedelta(hours=1)
    doc = _doc([
        # started 2 h ago, deadline still 1 h after a 1 h run from now: late, still runs
        _piece("late", 0, "gb-london", "A100", now - 2 * h, now - h,
               deadline=(now + 2 * h).strftime(FMT)),
        # a 1 h run from now ends exactly at its deadline: just in time, not hopeless
        _piece("edge", 0, "gb-london", "A100", now - h, now,
               deadline=(now + h).strftime(FMT)),
        # cannot end by its deadline any more
        _piece("gone", 0, "gb-london", "A100", now - 3 * h, now - 2 * h,
               deadline=(now - h).strftime(FMT)),
        _piece("fine", 0, "gb-london", "A100", now + h, now + 2 * h,
               deadline=(now + 3 * h).strftime(FMT))])
    store.save_plan(doc)
    settings = Settings(slurm_conf_dir=slurm_dir, kubeconfig=emulator_kubeconfig)
    dry = dispatch_plan(store, doc["plan_id"], settings=settings, dry_run=True,
                        clock=lambda: now)
    when = "(now 2030-06-01T12:00:00Z; the plan is for 2030-06-01)"
    assert dry.notes[-2:] == [
        f"1 of 4 placements can no longer end by their deadline {when}: they are recorded "
        "DeadlinePassed and not submitted; plan again for the current day",
        f"2 of 4 placements were planned to start before now {when}: the backend starts them "
        "at once, in other hours than the plan priced"]
    # a plan on time carries neither note
    on_time = dispatch_plan(store, doc["plan_id"], settings=settings, dry_run=True,
                            clock=lambda: now - 4 * h)
    assert not [n for n in on_time.notes if "before now" in n or "deadline" in n]
