"""Jobs get only what they need: secrets planted in the dispatcher's environment reach neither
a Slurm job (its environment as the job sees it, the environment the controller saved for a held
job, its script), nor the sbatch process, nor a Kubernetes Job."""

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
from sqlalchemy.engine import make_url

from carbonsched.store import Store

from .helpers import one_plan

pytestmark = pytest.mark.slurm
ROOT = Path(__file__).resolve().parents[2]
JOB_ENV = {"CARBONSCHED_JOB_ID", "CARBONSCHED_PLAN_ID", "CARBONSCHED_PIECE",
           "CARBONSCHED_PIECES", "CARBONSCHED_RESUME", "CARBONSCHED_PIECE_END"}


def _wait_for(path: Path, deadline_s: float = 300) -> str:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if path.exists() and path.stat().st_size:
            time.sleep(0.2)  # the job is still writing
            return path.read_text()
        time.sleep(0.25)
    raise AssertionError(f"{path} was not written within {deadline_s:g} s")


def test_no_planted_secret_reaches_any_job_or_the_sbatch_process(
        pg_db, slurm_dir, emulator_kubeconfig, tmp_path):
    tag = uuid.uuid4().hex[:10]
    secrets = {"CARBONSCHED_BOOTSTRAP_ADMIN_TOKEN": f"s3cret-admin-{tag}",
               "ELECTRICITYMAPS_TOKEN": f"s3cret-em-{tag}",
               "ENTSOE_API_KEY": f"s3cret-entsoe-{tag}",
               "SOME_PROVIDER_API_KEY": f"s3cret-provider-{tag}"}
    db_password = f"s3cret-db-{tag}"
    # the test server trusts loopback: the URL with a password is a working one
    url = make_url(pg_db).set(password=db_password).render_as_string(hide_password=False)
    out = tmp_path / "out"
    out.mkdir()
    os.chmod(out, 0o777)
    wrappers = tmp_path / "bin"
    wrappers.mkdir()
    (wrappers / "sbatch").write_text(
        f"#!/bin/sh\nenv > {out}/sbatch-env-$$.txt\nexec /usr/bin/sbatch \"$@\"\n")
    (wrappers / "sbatch").chmod(0o755)

    now = datetime.now(UTC).replace(microsecond=0)
    prefix = f"sec-{tag}"
    doc = one_plan([
        {"job_id": f"{prefix}-now", "site": "ca-on-toronto", "start": now,
         "end": now + timedelta(hours=1), "gpu_type": "V100", "gpus": 1,
         "command": f"env > {out}/job-env.txt"},
        {"job_id": f"{prefix}-held", "site": "ca-on-toronto", "start": now + timedelta(days=2),
         "end": now + timedelta(days=2, hours=1), "gpu_type": "V100", "gpus": 1},
        {"job_id": f"{prefix}-k8s", "site": "us-ny-newyork", "start": now + timedelta(days=2),
         "end": now + timedelta(days=2, hours=1), "gpu_type": "A100", "gpus": 1}])
    Store(pg_db).save_plan(doc)
    env = {**os.environ, **secrets, "CARBONSCHED_DATABASE_URL": url,
           "CARBONSCHED_SLURM_CONF_DIR": str(slurm_dir),
           "CARBONSCHED_KUBECONFIG": str(emulator_kubeconfig),
           "PATH": f"{wrappers}:{os.environ['PATH']}"}
    run = subprocess.run([sys.executable, "-m", "carbonsched.cli.app", "dispatch", "--plan",
                          doc["plan_id"], "--json"], env=env, capture_output=True, text=True,
                         cwd=ROOT, timeout=600)
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)
    assert summary["counts"] == {"submitted": 3}
    ids = {o["job_id"]: o["backend_id"] for o in summary["outcomes"]}
    planted = [*secrets.values(), db_password]

    def clean(text: str, where: str) -> None:
        for s in planted:
            assert s not in text, f"a planted secret reached {where}"

    # the running job's own environment: carbonsched's variables, nothing of the dispatcher's
    job_env = _wait_for(out / "job-env.txt")
    clean(job_env, "the Slurm job's environment")
    names = {line.split("=", 1)[0] for line in job_env.splitlines() if "=" in line}
    assert JOB_ENV <= names
    assert f"CARBONSCHED_JOB_ID={prefix}-now" in job_env.splitlines()
    assert not names & {"CARBONSCHED_DATABASE_URL", "CARBONSCHED_SLURM_CONF_DIR",
                        "CARBONSCHED_KUBECONFIG", *secrets}
    # the environment and script the controller keeps for the held job
    held_id = int(ids[f"{prefix}-held"].split(":")[1])
    saved = slurm_dir / "ontario" / "state" / f"hash.{held_id % 10}" / f"job.{held_id}"
    saved_env = (saved / "environment").read_bytes().decode(errors="replace")
    clean(saved_env, "the held job's saved environment")
    clean((saved / "script").read_bytes().decode(errors="replace"), "the held job's script")
    assert f"CARBONSCHED_JOB_ID={prefix}-held" in (saved / "script").read_text(errors="replace")
    # the sbatch process itself ran with a minimal environment
    dumps = sorted(out.glob("sbatch-env-*.txt"))
    assert len(dumps) == 2
    for d in dumps:
        text = d.read_text()
        clean(text, "the sbatch process")
        assert {line.split("=", 1)[0] for line in text.splitlines() if "=" in line} <= {
            "PATH", "SLURM_CONF", "TZ", "LC_ALL", "PWD", "SHLVL", "_"}  # the shell adds the last
    # the Kubernetes Job carries the environment the workload declares, and nothing else
    from kubernetes import client, config

    api = client.BatchV1Api(config.new_client_from_config(str(emulator_kubeconfig),
                                                          context="us-east-ny"))
    name = ids[f"{prefix}-k8s"].rsplit("/", 1)[1]
    job = api.api_client.sanitize_for_serialization(
        api.read_namespaced_job(name, "carbonsched"))
    clean(json.dumps(job), "the Kubernetes Job")
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert {e["name"] for e in container["env"]} == JOB_ENV
    assert "envFrom" not in container
