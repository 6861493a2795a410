"""What the cluster does to a running job, on the real local Slurm (issue 33, Done-when
"a cluster-side eviction" for the Slurm backend).

A job requeued by an administrator (``scontrol requeue``), requeued because its node went down
(``scontrol update nodename=... state=down``) or cancelled by someone else (``scancel``) is
recorded as what it is, with Slurm's words in the detail, in the dispatch record a user reads
(``refresh_status``) and in the accounting read once the controller forgets the job; never as a
job held until its start, and never as a success. Preemption needs a ``PreemptType`` the test
clusters do not configure: its mapping is checked offline.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from carbonsched.adapters.dispatch.slurm import (
    SlurmAdapter,
    accounting_job,
    backend_job,
    slurm_job_name,
)
from carbonsched.dispatch.outbox import dispatch_plan, refresh_status
from carbonsched.domain import JobState, ReasonCode

from .helpers import one_plan, poll

SITE, CLUSTER = "ca-on-toronto", "ontario"
POLL_S = 180.0  # generous: the controller starts a due job within its scheduling interval


def _slurm(settings, *argv: str) -> str:
    env = {**os.environ, "SLURM_CONF": str(settings.slurm_conf_dir / CLUSTER / "slurm.conf")}
    return subprocess.run(list(argv), env=env, check=True, capture_output=True,
                          text=True).stdout


def _record(store, plan_id: str, key: str):
    return refresh_status(store, "global", plan_id=plan_id).set_index("key").loc[key]


def _poll(fn, until, what: str):
    return poll(fn, until, what, POLL_S, 1.0)


@pytest.fixture
def running(store, settings):
    """A one-GPU job dispatched to the ontario cluster and running: (plan id, key, Slurm id)."""
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=3)
    job_id = f"evict-{uuid.uuid4().hex[:8]}"
    doc = one_plan([{"job_id": job_id, "site": SITE, "start": start,
                     "end": start + timedelta(minutes=30), "gpu_type": "A100", "gpus": 1,
                     "command": "sleep 900"}])
    store.save_plan(doc)
    assert dispatch_plan(store, doc["plan_id"], settings=settings).counts == {"submitted": 1}
    key = f"{job_id}#0"
    row = _poll(lambda: _record(store, doc["plan_id"], key), lambda r: r.state == "Running",
                "the job starting")
    assert row.reason == "Started" and row.actual_start is not None
    slurm_id = row.backend_id.split(":", 1)[1]
    yield doc["plan_id"], key, slurm_id, job_id
    subprocess.run(["scancel", slurm_id], env={
        **os.environ, "SLURM_CONF": str(settings.slurm_conf_dir / CLUSTER / "slurm.conf")},
        capture_output=True)


def _acct(settings, job_id: str) -> dict:
    a = SlurmAdapter(CLUSTER, conf=settings.slurm_conf_dir / CLUSTER / "slurm.conf")
    since = datetime.now(UTC) - timedelta(hours=1)
    (line,) = [r for r in a.sacct([slurm_job_name(job_id, 0)], since)]
    return line


def test_an_admin_requeue_is_evicted_and_pending_again_never_held_for_its_start(
        store, settings, running):
    plan_id, key, slurm_id, job_id = running
    _slurm(settings, "scontrol", "requeue", slurm_id)
    row = _poll(lambda: _record(store, plan_id, key), lambda r: r.state != "Running",
                "the requeue")
    assert (row.state, row.reason) == ("Dispatched", "Evicted")
    assert "requeued by the cluster 1 time(s)" in row.detail and "pending again" in row.detail
    assert row.actual_start is not None  # the run that happened stays on the record
    # the job-completion file now has a line per run: the last is the job, the first its requeue
    _slurm(settings, "scancel", slurm_id)
    line = _poll(lambda: _acct(settings, job_id), lambda r: r["state"] == "CANCELLED",
                 "the cancel in the accounting")
    assert line["runs"] == ["PENDING"]
    job = accounting_job(CLUSTER, key, line)
    assert (job.state, job.reason) == (JobState.CANCELLED, ReasonCode.CANCELLED)
    assert "not by carbonsched" in job.detail and "before: PENDING" in job.detail


def test_a_node_failure_requeues_the_job_and_says_so(store, settings, running):
    plan_id, key, slurm_id, job_id = running
    node = _slurm(settings, "squeue", "-h", "-j", slurm_id, "-o", "%N").strip()
    assert node.startswith("ontario-n")
    try:
        _slurm(settings, "scontrol", "update", f"nodename={node}", "state=down",
               "reason=carbonsched-test-fan-failure")
        row = _poll(lambda: _record(store, plan_id, key), lambda r: r.state != "Running",
                    "the node failure")
    finally:
        subprocess.run(["scontrol", "update", f"nodename={node}", "state=resume"], env={
            **os.environ, "SLURM_CONF": str(settings.slurm_conf_dir / CLUSTER / "slurm.conf")},
            capture_output=True)
    assert (row.state, row.reason) == ("Dispatched", "Evicted")
    assert "requeued by the cluster 1 time(s)" in row.detail
    # the accounting's one line so far is the failed run: never a success
    assert accounting_job(CLUSTER, key, _acct(settings, job_id)).reason is ReasonCode.BACKEND_FAILED
    _slurm(settings, "scancel", slurm_id)
    line = _poll(lambda: _acct(settings, job_id), lambda r: r["state"] == "CANCELLED",
                 "the cancel in the accounting")
    assert line["runs"] == ["NODE_FAIL"]
    assert "before: NODE_FAIL" in accounting_job(CLUSTER, key, line).detail


def test_a_cancel_by_someone_else_is_cancelled_on_the_cluster_not_a_success(
        store, settings, running):
    plan_id, key, slurm_id, _ = running
    # Slurm keeps times to the second and reads start == end of a cancelled job as "never
    # started": cancel only once the job has run into its second second, so the case is not
    # ambiguous (a job cancelled within its first second: docs/dispatch.md, known limits)
    started = _record(store, plan_id, key).actual_start
    while datetime.now(UTC) < started.to_pydatetime() + timedelta(seconds=2):
        time.sleep(0.2)
    _slurm(settings, "scancel", slurm_id)
    row = _poll(lambda: _record(store, plan_id, key), lambda r: r.state != "Running",
                "the cancel")
    assert (row.state, row.reason) == ("Cancelled", "Cancelled")
    assert ("cancelled on the cluster (scancel by a user or an administrator), not by "
            "carbonsched (Slurm CANCELLED") in row.detail
    assert row.actual_start is not None and row.actual_end is not None


def _sq(states, reason="None", restarts=0):
    return {"job_id": 7, "cluster": CLUSTER, "states": states, "comment":
            "carbonsched key=j%230 plan=p", "begin": None, "start": None, "end": None,
            "submit": None, "state_reason": reason, "restarts": restarts}


@pytest.mark.parametrize("states,reason,restarts,state,code,said", [
    (["PREEMPTED"], "None", 0, JobState.FAILED, ReasonCode.PREEMPTED,
     "preempted by the cluster (Slurm PREEMPTED)"),
    (["NODE_FAIL"], "NodeDown", 0, JobState.FAILED, ReasonCode.BACKEND_FAILED,
     "a node of the job failed (Slurm NODE_FAIL; Slurm reason: NodeDown)"),
    (["PENDING"], "BeginTime", 0, JobState.DISPATCHED, ReasonCode.SUBMITTED, "BeginTime"),
    # just at the limit: one requeue is enough to be an eviction
    (["PENDING"], "BeginTime", 1, JobState.DISPATCHED, ReasonCode.EVICTED,
     "requeued by the cluster 1 time(s) (scontrol requeue, a node failure or a preemption); "
     "pending again (Slurm reason: BeginTime)"),
    (["RUNNING"], "None", 2, JobState.RUNNING, ReasonCode.STARTED,
     "requeued by the cluster 2 time(s) (scontrol requeue, a node failure or a preemption); "
     "running again"),
    (["COMPLETED"], "None", 0, JobState.SUCCEEDED, ReasonCode.COMPLETED, ""),
])
def test_slurm_states_map_with_what_the_cluster_did(states, reason, restarts, state, code,
                                                    said):
    job = backend_job(CLUSTER, _sq(states, reason, restarts))
    assert (job.state, job.reason, job.detail) == (state, code, said)
