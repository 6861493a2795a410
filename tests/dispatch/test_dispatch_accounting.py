"""Accounting that cannot be fooled (real Slurm): a recycled job id never brings an older job's
record, an ambiguous sbatch failure is resolved by looking the key up, a key submitted twice is
flagged, and a squeue that failed inside its JSON never reads as "no jobs"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from carbonsched.adapters.dispatch.base import dispatch_key, split_key
from carbonsched.adapters.dispatch.slurm import (
    JOB_NAME_MAX,
    SlurmAdapter,
    make_comment,
    parse_comment,
    slurm_job_name,
)
from carbonsched.config import Settings
from carbonsched.dispatch.outbox import dispatch_plan, refresh_status
from carbonsched.errors import BackendUnavailableError
from carbonsched.store import Store
from carbonsched.store.models import DispatchRow

from .helpers import PrivateCluster, one_plan, squeue_jobs

pytestmark = pytest.mark.slurm
HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def _rows(store: Store) -> dict[str, DispatchRow]:
    with Session(store.engine) as s:
        return {r.key: r for r in s.scalars(select(DispatchRow))}


def _jobs_with_key(conf: Path, key: str) -> list[dict]:
    return [j for j in squeue_jobs(conf) if (c := parse_comment(j["comment"])) and c[0] == key]


def test_job_names_name_one_key_within_slurms_limit():
    assert slurm_job_name("job-1", 0) == "carbonsched-job-1-0"
    long_a, long_b = "x" * 300 + "a", "x" * 300 + "b"
    na, nb = slurm_job_name(long_a, 3), slurm_job_name(long_b, 3)
    assert len(na) == JOB_NAME_MAX and len(nb) == JOB_NAME_MAX and na != nb
    assert na.endswith("-3")
    assert slurm_job_name("y" * 186, 0) == f"carbonsched-{'y' * 186}-0"  # at the limit: kept
    assert len(slurm_job_name("y" * 186, 0)) == JOB_NAME_MAX
    assert slurm_job_name("y" * 187, 0) != f"carbonsched-{'y' * 187}-0"  # one over: hashed
    assert split_key(dispatch_key("a#b", 2)) == ("a#b", 2)
    with pytest.raises(ValueError, match="does not end in #<piece number>"):
        split_key("no-piece")


@pytest.fixture
def recycle_cluster(slurm_dir):
    c = PrivateCluster(slurm_dir, "recycle", 95, {"A100": 4})
    c.start()
    yield c
    c.close()


def _wait_in_jobcomp(cluster: PrivateCluster, job_ids: set[int], deadline_s: float = 180) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        out = subprocess.run(["sacct", "-c", "-n", "-P", "-X", "-o", "JobID,State"],
                             env=cluster.env, capture_output=True, text=True).stdout
        done = {int(line.split("|")[0]) for line in out.splitlines()
                if line.split("|")[0].isdigit() and "COMPLETED" in line}
        if job_ids <= done:
            return
        time.sleep(0.5)
    raise AssertionError(f"jobs {job_ids} not completed within {deadline_s:g} s")


def test_a_recycled_job_id_never_brings_an_older_jobs_record(recycle_cluster, store):
    cluster = recycle_cluster
    prefix = uuid.uuid4().hex[:8]
    # the cluster's earlier life: someone's job, and a job under one of our names (a unit
    # dispatched from a store since restored from backup), both finished and in the records
    foreign = cluster.sbatch("--job-name=someone-else", "--gres=gpu:A100:1", "--wrap", "true")
    same_name = cluster.sbatch(f"--job-name={slurm_job_name(f'{prefix}-b', 0)}",
                               f"--comment={make_comment(f'{prefix}-b#0', 'old-plan')}",
                               "--gres=gpu:A100:1", "--wrap", "true")
    _wait_in_jobcomp(cluster, {foreign, same_name})
    # the controller is rebuilt without its state: job ids start again at 1
    cluster.stop_controller()
    cluster.start(lose_state=True)
    now = datetime.now(UTC).replace(microsecond=0)
    far = now + timedelta(days=2)
    doc = one_plan([
        {"job_id": f"{prefix}-a", "site": "ca-on-toronto", "start": far,
         "end": far + timedelta(hours=1), "gpu_type": "A100", "gpus": 1},
        {"job_id": f"{prefix}-b", "site": "ca-on-toronto", "start": far,
         "end": far + timedelta(hours=1), "gpu_type": "A100", "gpus": 1},
        # a job id holding sacct's default separator and --name's
        {"job_id": f"{prefix}-c,d|e", "site": "ca-on-toronto", "start": now,
         "end": now + timedelta(hours=1), "gpu_type": "A100", "gpus": 1, "command": "sleep 1"}])
    store.save_plan(doc)
    adapters = {"ca-on-toronto": SlurmAdapter("recycle", conf=cluster.conf, timeout_s=20)}
    assert dispatch_plan(store, doc["plan_id"], adapters=adapters, settings=Settings(
        dispatch_workers=1)).counts == {"submitted": 3}  # in order: a, b, c
    rows = _rows(store)
    a, b, c = (rows[f"{prefix}-{x}#0"] for x in ("a", "b", "c,d|e"))
    # the same ids as the old jobs (the premise of this test)
    assert {a.backend_id, b.backend_id} == {f"recycle:{foreign}", f"recycle:{same_name}"}
    assert a.backend_submitted_at is not None and b.backend_submitted_at is not None
    c_id = int(c.backend_id.split(":")[1])
    _wait_in_jobcomp(cluster, {c_id})  # c ran and finished
    # ... and the controller loses its state again: only the records remain
    cluster.stop_controller()
    cluster.start(lose_state=True)

    recs = refresh_status(store, "global", plan_id=doc["plan_id"], adapters=adapters)
    recs = recs.set_index("key")
    for x in "ab":  # lost: the old records under the same ids are someone else's, or older
        r = recs.loc[f"{prefix}-{x}#0"]
        assert (r.state, r.reason) == ("Failed", "Lost")
        assert pd_isna(r.actual_start) and pd_isna(r.actual_end)
        assert "accounting holds no job of this key submitted since" in r.detail
    r = recs.loc[f"{prefix}-c,d|e#0"]  # ours, finished: found in the records, its own times
    assert (r.state, r.reason, r.times_source) == ("Succeeded", "Completed", "sacct")
    assert c.backend_submitted_at <= r.actual_start <= r.actual_end


def pd_isna(v: object) -> bool:
    import pandas as pd

    return v is None or bool(pd.isna(v))


# -- ambiguous submissions -------------------------------------------------------------------


def _wrapper(tmp_path: Path, name: str, body: str) -> Path:
    d = tmp_path / "bin"
    d.mkdir(exist_ok=True)
    (d / name).write_text("#!/bin/sh\n" + body)
    (d / name).chmod(0o755)
    return d


def _plan(store: Store, prefix: str, n: int = 1) -> dict:
    far = datetime.now(UTC).replace(microsecond=0) + timedelta(days=2)
    doc = one_plan([{"job_id": f"{prefix}-{i}", "site": "ca-on-toronto", "start": far,
                     "end": far + timedelta(hours=1), "gpu_type": "V100", "gpus": 1}
                    for i in range(n)])
    store.save_plan(doc)
    return doc


@pytest.fixture
def ontario(slurm_dir) -> Path:
    return slurm_dir / "ontario" / "slurm.conf"


def test_an_sbatch_that_made_the_job_but_reported_a_refusal_is_recorded_not_rejected(
        store, ontario, tmp_path, monkeypatch):
    # sbatch retried a submission whose answer was lost; the retry is refused by the submit
    # limit that the first, accepted, attempt used up
    bin_dir = _wrapper(tmp_path, "sbatch", '/usr/bin/sbatch "$@" >/dev/null\n'
                       "echo 'sbatch: error: Batch job submission failed: Job violates "
                       "accounting/QOS policy (job submit limit, user'\"'\"'s size and/or time "
                       "limits)' >&2\nexit 1\n")
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    prefix = uuid.uuid4().hex[:8]
    doc = _plan(store, prefix)
    s = dispatch_plan(store, doc["plan_id"], max_attempts=1, adapters={
        "ca-on-toronto": SlurmAdapter("ontario", conf=ontario)})
    assert s.counts == {"reconciled": 1}
    key = f"{prefix}-0#0"
    (job,) = _jobs_with_key(ontario, key)
    row = _rows(store)[key]
    assert (row.state, row.reason, row.backend_id) == ("Dispatched", "Submitted",
                                                       f"ontario:{job['job_id']}")
    assert "Job violates accounting/QOS policy" in row.detail
    assert "found on the cluster by key" in row.detail


def test_an_sbatch_that_timed_out_after_the_job_was_made_is_resolved_by_key_at_once(
        store, ontario, tmp_path, monkeypatch):
    bin_dir = _wrapper(tmp_path, "sbatch", '/usr/bin/sbatch "$@" >/dev/null\nexec sleep 120\n')
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    prefix = uuid.uuid4().hex[:8]
    doc = _plan(store, prefix)
    s = dispatch_plan(store, doc["plan_id"], max_attempts=1, adapters={
        "ca-on-toronto": SlurmAdapter("ontario", conf=ontario, timeout_s=5)})
    assert s.counts == {"reconciled": 1} and s.complete
    key = f"{prefix}-0#0"
    (job,) = _jobs_with_key(ontario, key)
    row = _rows(store)[key]
    assert (row.state, row.backend_id) == ("Dispatched", f"ontario:{job['job_id']}")
    assert "sbatch timed out after 5 s" in row.detail


def test_a_key_submitted_twice_is_flagged_in_dispatch_and_status(
        store, ontario, slurm_dir, tmp_path, monkeypatch):
    # sbatch's own retry after a lost answer: the controller made the job twice
    # (the batch script comes on stdin: both submissions send it)
    bin_dir = _wrapper(tmp_path, "sbatch",
                       f'script=$(mktemp "{tmp_path}/sbatch.XXXXXX")\ncat > "$script"\n'
                       '/usr/bin/sbatch "$@" < "$script" >/dev/null\n'
                       'exec /usr/bin/sbatch "$@" < "$script"\n')
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    prefix = uuid.uuid4().hex[:8]
    doc = _plan(store, prefix, n=2)
    s = dispatch_plan(store, doc["plan_id"], adapters={
        "ca-on-toronto": SlurmAdapter("ontario", conf=ontario)})
    assert s.counts == {"submitted": 2}
    for o in s.outcomes:
        jobs = sorted(j["job_id"] for j in _jobs_with_key(ontario, o.key))
        assert len(jobs) == 2
        assert o.backend_id == f"ontario:{jobs[1]}" and o.duplicates == f"ontario:{jobs[0]}"
    assert any(n.startswith("duplicates on the backend:") and "cancel the extra jobs" in n
               for n in s.notes)
    monkeypatch.setenv("PATH", os.environ["PATH"].split(":", 1)[1])
    env = {**os.environ, "CARBONSCHED_DATABASE_URL": store.url,
           "CARBONSCHED_SLURM_CONF_DIR": str(slurm_dir)}
    cli = subprocess.run([sys.executable, "-m", "carbonsched.cli.app", "status", "--plan",
                          doc["plan_id"], "--catalog", "global"], env=env, capture_output=True,
                         text=True, cwd=ROOT, timeout=300)
    assert cli.returncode == 0, cli.stderr
    assert "2 jobs: 2 Dispatched · 2 with DUPLICATES on their backend" in cli.stdout
    assert cli.stderr.count("duplicate ") == 2 and "cancel the extra job(s)" in cli.stderr
    rows = json.loads(subprocess.run(
        [sys.executable, "-m", "carbonsched.cli.app", "status", "--plan", doc["plan_id"],
         "--no-refresh", "--json"], env=env, capture_output=True, text=True, cwd=ROOT,
        timeout=300).stdout)
    assert all(r["duplicates"].startswith("ontario:") for r in rows)


def test_a_failed_squeue_never_reads_as_no_jobs(store, ontario, slurm_dir, tmp_path,
                                                monkeypatch):
    failed = json.dumps({"meta": {}, "errors": [{
        "description": "Failed while looking for jobs", "error_number": -1,
        "error": "Unspecified error", "source": "slurm_load_jobs"}], "jobs": []})
    squeue_dir = _wrapper(tmp_path, "squeue", f"cat <<'EOF'\n{failed}\nEOF\nexit 0\n")
    # a dispatcher killed right after its sbatch: the job is on the cluster, not recorded
    prefix = uuid.uuid4().hex[:8]
    doc = _plan(store, prefix)
    spec = {"url": store.url, "plan_id": doc["plan_id"], "kill_after": 1,
            "out": str(tmp_path / "killed.json"),
            "settings": {"slurm_conf_dir": str(slurm_dir), "dispatch_workers": 1}}
    proc = subprocess.run([sys.executable, str(HERE / "run_dispatcher.py"), json.dumps(spec)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == -9, proc.stderr
    key = f"{prefix}-0#0"
    assert len(_jobs_with_key(ontario, key)) == 1 and _rows(store)[key].backend_id is None

    adapter = SlurmAdapter("ontario", conf=ontario)
    monkeypatch.setenv("PATH", f"{squeue_dir}:{os.environ['PATH']}")
    with pytest.raises(BackendUnavailableError, match="squeue could not list the jobs "
                       r"\(slurm_load_jobs: Failed while looking for jobs\)"):
        adapter.status()
    # the restart while squeue fails: nothing is submitted again
    s = dispatch_plan(store, doc["plan_id"], max_attempts=1, sleep=lambda _: None,
                      adapters={"ca-on-toronto": adapter}, settings=Settings())
    assert s.counts == {"unavailable": 1}
    assert "controller unreachable: squeue could not list the jobs" in s.outcomes[0].detail
    monkeypatch.setenv("PATH", os.environ["PATH"].split(":", 1)[1])
    assert len(_jobs_with_key(ontario, key)) == 1  # not submitted a second time
    s = dispatch_plan(store, doc["plan_id"], adapters={"ca-on-toronto": adapter})
    assert s.counts == {"reconciled": 1}
    (job,) = _jobs_with_key(ontario, key)
    assert _rows(store)[key].backend_id == f"ontario:{job['job_id']}"
