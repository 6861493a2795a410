"""Job payloads on the wire (issue 33 items 1 and 4): what a job runs reaches its backend.

The adapters render the payload (a Slurm batch script on sbatch's stdin; a Kubernetes pod
spec), the outbox keeps it in the intent's request so a restarted dispatcher submits the same
thing, a job that names nothing to run is not submitted unless ``--placeholder``, and a real
script runs on the real local Slurm (``scripts/services.sh start_slurm global``) no earlier
than its planned start, leaving a file and an accounting record.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from carbonsched.adapters.dispatch.base import DispatchRequest, payload_problem
from carbonsched.adapters.dispatch.kubernetes import KubernetesAdapter
from carbonsched.adapters.dispatch.slurm import SlurmAdapter, parse_comment
from carbonsched.catalog import load_catalog
from carbonsched.dispatch.outbox import build_adapters, dispatch_plan, refresh_status
from carbonsched.domain import JobPayload
from carbonsched.store.models import DispatchRow
from carbonsched.workload.schema import JobSpec

from .helpers import one_plan, squeue_jobs

T0 = datetime(2027, 3, 14, 6, 30, tzinfo=UTC)
CATALOG = load_catalog("global")


def payload(**fields) -> JobPayload:
    """A payload as the job schema reads it (validated like a workload file's job)."""
    spec = JobSpec.model_validate({
        "id": "p", "gpu_type": fields.pop("gpu_type", "A100"), "gpus": fields.pop("gpus", 1),
        "duration_minutes": 60, "power_per_gpu_kw": 0.5,
        "earliest_start": "2027-03-14T00:00:00Z", "deadline": "2027-03-15T00:00:00Z",
        **fields})
    out = spec.to_job().payload
    assert out is not None
    return out


def req(p: JobPayload | None = None, **kw) -> DispatchRequest:
    base = dict(plan_id="p1", job_id="j1", piece=0, site="ca-on-toronto", start=T0,
                end=T0 + timedelta(hours=2), deadline=T0 + timedelta(hours=3),
                gpu_type="A100", gpus=1, payload=p)
    return DispatchRequest(**(base | kw))


# --- Slurm: the batch script and the sbatch line ------------------------------------------------

def test_a_script_gets_the_exports_after_its_interpreter_and_sbatch_lines():
    script = ("#!/bin/bash\n#SBATCH --open-mode=append\n# a comment\n\n"
              "set -e\necho \"$GREETING\"\n")
    a = SlurmAdapter("ontario", timezone=UTC)
    text = a.batch_script(req(payload(script=script, env={"GREETING": "hello world"})))
    lines = text.splitlines()
    assert lines[:4] == ["#!/bin/bash", "#SBATCH --open-mode=append", "# a comment", ""]
    assert lines[4] == "export GREETING='hello world'"          # the job's env, then ours
    assert lines[5:11] == ["export CARBONSCHED_JOB_ID=j1", "export CARBONSCHED_PLAN_ID=p1",
                           "export CARBONSCHED_PIECE=0", "export CARBONSCHED_PIECES=1",
                           "export CARBONSCHED_RESUME=0",
                           "export CARBONSCHED_PIECE_END=2027-03-14T08:30:00Z"]
    assert lines[11:] == ["set -e", 'echo "$GREETING"']
    assert "sleep" not in text


def test_a_command_with_args_runs_under_sh_with_only_the_named_environment():
    a = SlurmAdapter("ontario", timezone=UTC)
    text = a.batch_script(req(payload(command=["python3", "train.py"], args=["--lr", "3e-4 x"],
                                      env={"OMP_NUM_THREADS": "8"})))
    assert text.startswith("#!/bin/sh\nexport OMP_NUM_THREADS=8\nexport CARBONSCHED_JOB_ID=j1\n")
    assert text.endswith("python3 train.py --lr '3e-4 x'\n")


def test_script_path_is_read_on_the_submit_host_and_a_missing_one_is_refused(tmp_path):
    from carbonsched.errors import BackendRejectedError

    f = tmp_path / "train.sh"
    f.write_text("#!/bin/sh\n#SBATCH --open-mode=append\ntrue\n")
    a = SlurmAdapter("ontario", timezone=UTC)
    text = a.batch_script(req(payload(script_path=str(f))))
    assert text.splitlines()[:3] == ["#!/bin/sh", "#SBATCH --open-mode=append",
                                     "export CARBONSCHED_JOB_ID=j1"]
    with pytest.raises(BackendRejectedError, match=f"script_path {tmp_path}/gone.sh: cannot "
                       "read it on this submit host"):
        a.batch_script(req(payload(script_path=str(tmp_path / "gone.sh"))))


def test_account_partition_qos_workdir_and_image_reach_sbatch():
    a = SlurmAdapter("ontario", partition="gpu", account="svc", timezone=UTC)
    argv = a.sbatch_argv(req(payload(command="true", account="team-a", partition="a100",
                                     qos="low", workdir="/scratch/run",
                                     image="nvcr.io/nvidia/pytorch:24.05-py3")))[1]
    assert {"--account=team-a", "--partition=a100", "--qos=low", "--chdir=/scratch/run",
            "--container-image=nvcr.io/nvidia/pytorch:24.05-py3"} <= set(argv)
    assert "--account=svc" not in argv and "--partition=gpu" not in argv
    plain = a.sbatch_argv(req(payload(command="true")))[1]
    assert {"--account=svc", "--partition=gpu", "--chdir=/tmp"} <= set(plain)
    bundle = a.sbatch_argv(req(payload(command="true", image="/images/pytorch")))[1]
    assert "--container=/images/pytorch" in bundle


@pytest.mark.parametrize(("fields", "gres"), [
    ({}, "gpu:A100:1"),
    ({"mig_profile": "1g.10gb"}, "gpu:1g.10gb:1"),
    ({"gpu_milli": 250}, "shard:3"),        # 250/1000 of 10 shards, rounded up
    ({"gpu_milli": 1000}, "shard:10"),      # at the limit: the whole GPU's shards
    ({"gpu_milli": 1}, "shard:1"),          # never less than asked for
    # the catalog pool's shares_per_gpu, carried by the request: 250/1000 of 4 shares is 1,
    # 251 needs 2; 8 per GPU at 125 milli is exactly 1 (just at the limit), 126 is 2
    ({"gpu_milli": 250, "shares_per_gpu": 4}, "shard:1"),
    ({"gpu_milli": 251, "shares_per_gpu": 4}, "shard:2"),
    ({"gpu_milli": 125, "shares_per_gpu": 8}, "shard:1"),
    ({"gpu_milli": 126, "shares_per_gpu": 8}, "shard:2"),
])
def test_fractional_gpus_use_slurm_gres_names(fields, gres):
    a = SlurmAdapter("ontario", timezone=UTC)
    slice_ = {k: v for k, v in fields.items() if k != "shares_per_gpu"}
    r = req(payload(command="true", **slice_), **fields)     # the plan's slice, on the request
    assert f"--gres={gres}" in a.sbatch_argv(r)[1]


@pytest.mark.parametrize("shares", [0, 3, 7, 1001])
def test_a_request_refuses_shares_per_gpu_that_do_not_divide_a_gpu(shares):
    with pytest.raises(ValueError, match=f"shares_per_gpu must divide 1000, got {shares}"):
        req(payload(command="true", gpu_milli=250), gpu_milli=250, shares_per_gpu=shares)


@pytest.mark.parametrize("fields", [{"mig_profile": "1g.10gb"}, {"gpu_milli": 250}])
def test_a_slice_the_plan_did_not_give_asks_for_whole_gpus(fields):
    """The payload asks for a slice, but the request (the plan) gives a whole GPU: the
    backend is asked for what the plan booked, a whole GPU, never the payload's slice."""
    a = SlurmAdapter("ontario", timezone=UTC)
    assert "--gres=gpu:A100:1" in a.sbatch_argv(req(payload(command="true", **fields)))[1]
    k = KubernetesAdapter("ctx", "ns")
    (c,) = k.pod_spec(req(payload(command="true", **fields)))["containers"]
    assert c["resources"]["limits"] == {"nvidia.com/gpu": "1"}


# --- Kubernetes: the pod spec -------------------------------------------------------------------

def test_the_pod_runs_the_jobs_image_command_env_volumes_and_service_account():
    a = KubernetesAdapter("ctx", "ns")
    p = payload(image="ghcr.io/org/train:1.4", command="python3 train.py", args=["--x", "1"],
                workdir="/work", env={"A": "1"}, service_account="trainer",
                volumes=[{"name": "data", "mount_path": "/data", "claim": "datasets",
                          "read_only": True},
                         {"name": "scratch", "mount_path": "/scratch", "empty_dir": True}])
    spec = a.pod_spec(req(p, gpus=4))
    (c,) = spec["containers"]
    assert c["image"] == "ghcr.io/org/train:1.4"
    assert c["command"] == ["sh", "-c", "python3 train.py"] and c["args"] == ["sh", "--x", "1"]
    assert c["workingDir"] == "/work"
    assert [e["name"] for e in c["env"]][:2] == ["A", "CARBONSCHED_JOB_ID"]
    assert c["volumeMounts"] == [{"name": "data", "mountPath": "/data", "readOnly": True},
                                 {"name": "scratch", "mountPath": "/scratch"}]
    assert spec["volumes"] == [
        {"name": "data", "persistentVolumeClaim": {"claimName": "datasets", "readOnly": True}},
        {"name": "scratch", "emptyDir": {}}]
    assert spec["serviceAccountName"] == "trainer"
    assert c["resources"]["limits"] == {"nvidia.com/gpu": "4"}
    assert spec["restartPolicy"] == "Never"


def test_a_pod_template_is_used_whole_with_our_gpus_env_and_node_selector():
    a = KubernetesAdapter("ctx", "ns")
    tmpl = {"metadata": {"labels": {"team": "a"}}, "spec": {
        "containers": [{"name": "sidecar", "image": "busybox"},
                       {"name": "job", "image": "trainer:2", "env": [
                           {"name": "CARBONSCHED_PIECE", "value": "9"},
                           {"name": "KEEP", "value": "1"}],
                        "resources": {"limits": {"memory": "8Gi"}}}],
        "nodeSelector": {"zone": "a"}, "restartPolicy": "OnFailure"}}
    spec = a.pod_spec(req(payload(pod_template=tmpl), gpus=2))
    side, job = spec["containers"]
    assert "resources" not in side and "env" not in side
    assert job["resources"]["limits"] == {"memory": "8Gi", "nvidia.com/gpu": "2"}
    env = {e["name"]: e["value"] for e in job["env"]}
    assert env["KEEP"] == "1" and env["CARBONSCHED_PIECE"] == "0"   # ours cannot be overridden
    assert spec["nodeSelector"] == {"zone": "a", "nvidia.com/gpu.product": "A100"}
    assert spec["restartPolicy"] == "Never"
    assert tmpl["spec"]["containers"][1]["env"][0]["value"] == "9"  # the payload is not changed


def test_an_image_given_as_a_path_is_refused_by_the_kubernetes_adapter():
    """An OCI bundle path runs only on Slurm (``--container``): the planner keeps such a job off
    Kubernetes sites (tests/service/test_placement_book.py) and dispatch does not submit it
    there (``no_payload``); one that reaches the adapter anyway (a plan edited by hand) is
    refused before any API call. Before, the pod was created with the path as its image."""
    from carbonsched.errors import BackendRejectedError

    a = KubernetesAdapter("ctx", "ns", kubeconfig="/nonexistent/kubeconfig")
    r = req(payload(image="/opt/bundles/train", command="python3 train.py"))
    assert payload_problem(r, "kubernetes") == (
        "job j1: its image '/opt/bundles/train' is a path (an OCI bundle, run by Slurm's "
        "--container), not an image a Kubernetes pod can pull; give a registry image, or allow "
        "it only at Slurm sites (allowed_sites)")
    assert payload_problem(r, "slurm") is None
    with pytest.raises(BackendRejectedError) as exc:
        a.submit(r)
    assert exc.value.detail == (
        "job j1: field 'image': '/opt/bundles/train' is a path (an OCI bundle, which only "
        "Slurm's --container runs), not an image a pod can pull; give a registry image such "
        "as 'ghcr.io/org/train:1.4' (nothing was sent to the cluster)")
    # a pod template's container, written into a plan by hand past the job schema
    tmpl = {"spec": {"containers": [{"name": "job", "image": "/opt/bundles/train"}]}}
    with pytest.raises(BackendRejectedError, match=r"job j1: field 'pod_template': the pod "
                       r"template's spec.containers\[0\].image is '/opt/bundles/train', a path"):
        a.submit(req(JobPayload(pod_template=tmpl)))
    # the site's default image, for a job that gives only a command
    with pytest.raises(BackendRejectedError, match="job j1: the site's default image "
                       r"\(CARBONSCHED_K8S_IMAGE\): '/images/busybox' is a path"):
        KubernetesAdapter("ctx", "ns", image="/images/busybox").submit(
            req(payload(command="true")))
    # at the limit: a registry image is the pod's image
    (c,) = a.pod_spec(req(payload(image="ghcr.io/org/train:1.4", command="true")))["containers"]
    assert c["image"] == "ghcr.io/org/train:1.4"


def test_dispatch_does_not_submit_an_image_given_as_a_path_to_a_kubernetes_site(store):
    start = datetime.now(UTC).replace(microsecond=0, second=0) + timedelta(days=2)
    bundle = payload(image="/opt/bundles/train", command="python3 train.py").to_dict()
    doc = one_plan([{"job_id": "bundle-1", "site": "us-ny-newyork", "start": start,
                     "end": start + timedelta(hours=1), "gpu_type": "A100", "gpus": 2,
                     "payload": bundle}])
    store.save_plan(doc)
    s = dispatch_plan(store, doc["plan_id"], placeholder=False,
                      adapters={"us-ny-newyork": KubernetesAdapter("ctx", "ns")})
    (o,) = s.outcomes
    assert (o.action, o.reason) == ("no_payload", "NoPayload")
    assert "its image '/opt/bundles/train' is a path (an OCI bundle" in o.detail


@pytest.mark.parametrize(("fields", "limits"), [
    ({"mig_profile": "3g.40gb"}, {"nvidia.com/mig-3g.40gb": "1"}),
    ({"gpu_milli": 500}, {"nvidia.com/gpu.shared": "5"}),
    ({"gpu_milli": 1}, {"nvidia.com/gpu.shared": "1"}),
    ({"gpu_milli": 500, "shares_per_gpu": 4}, {"nvidia.com/gpu.shared": "2"}),
    ({"gpu_milli": 501, "shares_per_gpu": 4}, {"nvidia.com/gpu.shared": "3"}),
])
def test_fractional_gpus_use_the_device_plugins_resource_names(fields, limits):
    a = KubernetesAdapter("ctx", "ns")
    slice_ = {k: v for k, v in fields.items() if k != "shares_per_gpu"}
    (c,) = a.pod_spec(req(payload(command="true", **slice_), **fields))["containers"]
    assert c["resources"]["limits"] == limits


def test_a_placeholder_is_labelled_and_sleeps_and_a_job_without_payload_is_refused():
    a = KubernetesAdapter("ctx", "ns")
    m = a.manifest(req(None, placeholder=True))
    assert m["metadata"]["labels"]["carbonsched.io/placeholder"] == "true"
    assert m["spec"]["template"]["spec"]["containers"][0]["command"] == ["sh", "-c", "sleep 7200"]
    assert "carbonsched.io/placeholder" not in a.manifest(req(payload(command="true")))[
        "metadata"]["labels"]
    assert "names nothing to run" in payload_problem(req(None), "kubernetes")
    assert payload_problem(req(None, placeholder=True), "slurm") is None
    assert "runs an image with a command, not a batch script" in payload_problem(
        req(payload(script="#!/bin/sh\ntrue\n")), "kubernetes")
    assert "a Slurm site runs a script, script_path or command" in payload_problem(
        req(payload(image="busybox:1.36")), "slurm")
    argv = SlurmAdapter("o", timezone=UTC).sbatch_argv(req(None, placeholder=True))[1]
    (comment,) = [x.split("=", 1)[1] for x in argv if x.startswith("--comment=")]
    assert comment.endswith(" placeholder=1") and parse_comment(comment) == ("j1#0", "p1")


# --- the outbox and real Slurm -------------------------------------------------------------------

def _wait(check, what: str, deadline_s: float = 300.0):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        got = check()
        if got is not None and got is not False:
            return got
        time.sleep(0.5)
    raise AssertionError(f"timed out after {deadline_s:g} s waiting for {what}")


@pytest.mark.slurm
def test_a_job_without_payload_is_not_submitted_unless_placeholder(store, settings):
    prefix = uuid.uuid4().hex[:8]
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(days=2)
    doc = one_plan([{"job_id": f"{prefix}-none", "site": "ca-on-toronto", "start": start,
                     "end": start + timedelta(hours=1), "gpu_type": "V100", "gpus": 1}])
    store.save_plan(doc)
    s = dispatch_plan(store, doc["plan_id"], settings=settings, placeholder=False)
    assert s.counts == {"no_payload": 1}
    (o,) = s.outcomes
    assert (o.state, o.reason) == ("Planned", "NoPayload")
    assert "names nothing to run" in o.detail and "--placeholder" in o.detail
    assert any(n.startswith("1 of 1 placements were not submitted") for n in s.notes)
    conf = settings.slurm_conf_dir / "ontario" / "slurm.conf"
    assert not [j for j in squeue_jobs(conf) if prefix in j["name"]]
    with Session(store.engine) as ses:   # not in the outbox: a later run may still submit it
        assert ses.scalars(select(DispatchRow).where(DispatchRow.job_id == f"{prefix}-none")
                           ).first() is None
    s = dispatch_plan(store, doc["plan_id"], settings=settings, placeholder=True)
    assert s.counts == {"submitted": 1}
    assert any("placeholder 'sleep <planned seconds>'" in n for n in s.notes)
    (job,) = [j for j in squeue_jobs(conf) if prefix in j["name"]]
    assert "placeholder=1" in job["comment"]


@pytest.mark.slurm
def test_a_job_script_runs_on_real_slurm_at_its_planned_start(store, settings, tmp_path):
    """The target "a real command runs": a script dispatched through the outbox (kept across a
    failed first run, as after a restart) runs on the Slurm node no earlier than its planned
    start, writes what it was given, and the accounting records it."""
    prefix = uuid.uuid4().hex[:8]
    out = tmp_path / "out"
    out.mkdir()
    os.chmod(out, 0o777)
    script = ("#!/bin/bash\n#SBATCH --open-mode=append\nset -eu\n"
              f"f={out}/ran-$CARBONSCHED_PIECE.txt\n"
              'echo "piece=$CARBONSCHED_PIECE" > "$f.tmp"\n'
              'echo "job=$CARBONSCHED_JOB_ID" >> "$f.tmp"\n'
              'echo "greeting=$GREETING" >> "$f.tmp"\n'
              'echo "pwd=$(pwd)" >> "$f.tmp"\n'
              'echo "epoch=$(date -u +%s)" >> "$f.tmp"\n'
              'echo "home=${HOME:-unset}" >> "$f.tmp"\n'
              'mv "$f.tmp" "$f"\n')
    job = JobSpec.model_validate({
        "id": f"{prefix}-run", "gpu_type": "V100", "gpus": 1, "duration_minutes": 5,
        "power_per_gpu_kw": 0.4, "earliest_start": "2026-01-01T00:00:00Z",
        "deadline": "2199-01-01T00:00:00Z", "script": script, "workdir": str(out),
        "env": {"GREETING": "hello from the payload"}}).to_job()
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=20)
    doc = one_plan([{"job_id": job.id, "site": "ca-on-toronto", "start": start,
                     "end": start + timedelta(minutes=5), "gpu_type": "V100", "gpus": 1,
                     "payload": job.payload.to_dict()}])
    store.save_plan(doc)
    # first run: the controller cannot be reached (sbatch says so): the intent stays pending
    wrappers = tmp_path / "bin"
    wrappers.mkdir()
    (wrappers / "sbatch").write_text(
        "#!/bin/sh\necho 'sbatch: error: Batch job submission failed: Unable to contact slurm "
        "controller (connect failure)' >&2\nexit 1\n")
    (wrappers / "sbatch").chmod(0o755)
    path = os.environ["PATH"]
    os.environ["PATH"] = f"{wrappers}:{path}"
    try:
        first = dispatch_plan(store, doc["plan_id"], settings=settings, max_attempts=1,
                              sleep=lambda _: None, placeholder=False)
    finally:
        os.environ["PATH"] = path
    assert first.counts == {"unavailable": 1}
    with Session(store.engine) as ses:
        row = ses.scalars(select(DispatchRow).where(DispatchRow.key == f"{job.id}#0")).one()
        assert json.loads(row.request_json)["payload"] == job.payload.to_dict()
    # the next runs submit from the outbox's request, once the attempt whose outcome was
    # unknown has settled (the key looked up again first; the tool timeout, here 5 s)
    quick = settings.model_copy(update={"dispatch_backend_timeout_s": 5.0})

    def submitted():
        s = dispatch_plan(store, doc["plan_id"], settings=quick, placeholder=False)
        return s if s.counts != {"unavailable": 1} else None

    assert _wait(submitted, "the pending intent submitted", 120).counts == {"submitted": 1}
    ran = out / "ran-0.txt"
    _wait(ran.exists, f"{ran} written by the job")
    got = dict(line.split("=", 1) for line in ran.read_text().splitlines())
    assert got["piece"] == "0" and got["job"] == job.id
    assert got["greeting"] == "hello from the payload" and got["pwd"] == str(out)
    assert int(got["epoch"]) >= int(start.timestamp())     # never before its planned start
    # the script as the cluster holds it: ours, exports after the #SBATCH block
    conf = settings.slurm_conf_dir / "ontario" / "slurm.conf"
    (sj,) = [j for j in squeue_jobs(conf) if j["name"] == f"carbonsched-{job.id}-0"]
    # the accounting record: the job completed, started no earlier than planned
    adapters = build_adapters(CATALOG, settings=settings)

    def finished():
        recs = refresh_status(store, "global", plan_id=doc["plan_id"], adapters=adapters)
        r = recs.set_index("key").loc[f"{job.id}#0"]
        return r if r.state == "Succeeded" and r.actual_end is not None else None

    rec = _wait(finished, "the job's accounting record")
    assert rec.reason == "Completed"
    assert rec.backend_id == f"ontario:{sj['job_id']}"
    assert rec.actual_start.timestamp() >= start.timestamp()
    assert rec.actual_end >= rec.actual_start
    sacct = subprocess.run(["sacct", "-c", "-n", "-P", "-X", "-j", str(sj["job_id"]),
                            "-o", "JobID,JobName%200,State"],
                           env={**os.environ, "SLURM_CONF": str(conf), "TZ": "UTC"},
                           capture_output=True, text=True, check=True).stdout
    assert f"{sj['job_id']}|carbonsched-{job.id}-0|COMPLETED" in sacct.splitlines()


def test_demo_jobs_carry_the_shipped_demo_command():
    from carbonsched.workload.files import demo_job_command, demo_workload

    jobs = demo_workload(CATALOG, "2027-03-14").jobs
    assert jobs and all(j.payload is not None and j.payload.command == demo_job_command()
                        for j in jobs)
    text = demo_job_command()
    assert text.startswith("#!/bin/sh") and "trap save USR1 TERM" in text
    assert "CARBONSCHED_PIECE_END" in text and "CARBONSCHED_RESUME" in text


def test_the_demo_command_checkpoints_on_sigterm_and_resumes(tmp_path):
    from carbonsched.workload.files import demo_job_command

    env = {"PATH": os.environ["PATH"], "CARBONSCHED_DEMO_DIR": str(tmp_path),
           "CARBONSCHED_JOB_ID": "demo-1", "CARBONSCHED_PIECE": "0", "CARBONSCHED_PIECES": "2",
           "CARBONSCHED_RESUME": "0",
           "CARBONSCHED_PIECE_END": (datetime.now(UTC) + timedelta(hours=1)).strftime(
               "%Y-%m-%dT%H:%M:%SZ")}
    proc = subprocess.Popen(["sh", "-c", demo_job_command()], env=env, stdout=subprocess.PIPE,
                            text=True)
    ckpt = Path(tmp_path) / "carbonsched-demo-demo-1.step"
    first = proc.stdout.readline()
    assert first.startswith("piece 0 of 2 of demo-1: from step 0 until")
    time.sleep(1.0)
    proc.terminate()
    assert proc.wait(timeout=60) == 0
    assert "checkpoint at step" in proc.stdout.read()
    saved = int(ckpt.read_text())
    resumed = subprocess.run(["sh", "-c", demo_job_command()], capture_output=True, text=True,
                             timeout=60, env=env | {
                                 "CARBONSCHED_RESUME": "1", "CARBONSCHED_PIECE": "1",
                                 "CARBONSCHED_PIECE_END": datetime.now(UTC).strftime(
                                     "%Y-%m-%dT%H:%M:%SZ")})
    assert resumed.returncode == 0
    assert f"from step {saved} until" in resumed.stdout     # continued from the checkpoint


def test_plans_show_counts_what_the_placements_run():
    from carbonsched.cli.plans import payload_line

    line = payload_line([
        {"payload": {"command": "true", "template": "batch-eval"}},
        {"payload": {"script": "#!/bin/sh\n", "mig_profile": "1g.10gb"}, "gpu_index": 0,
         "mig_start": 2},
        {"payload": {"script": "#!/bin/sh\n", "gpu_milli": 500}},   # planned on a whole GPU
        {"payload": {"pod_template": {"spec": {}}, "image": "x"}},
        {"payload": None}, {}])
    assert line == ("payloads of 6 placements: 1 command; 1 pod_template; 2 script; templates "
                    "batch-eval; 1 on a GPU slice (gpu_milli/mig_profile); 1 asking for a GPU "
                    "slice, planned on a whole GPU; 2 name nothing to run (dispatched only with "
                    "--placeholder); each one's in `plans show ID --json`")
