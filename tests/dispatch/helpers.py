"""Helpers of the dispatch tests."""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from pathlib import Path

import pandas as pd


def future_plan(doc: dict, days_ahead: int = 2, prefix: str | None = None) -> dict:
    """``doc`` moved by whole days to start ``days_ahead`` days from today (UTC), with a new plan
    id and job ids made unique by ``prefix`` (the clusters are shared by the whole suite)."""
    doc = json.loads(json.dumps(doc))
    target = pd.Timestamp.now(tz="UTC").normalize() + pd.Timedelta(days=days_ahead)
    shift = target - pd.Timestamp(doc["date"], tz="UTC")
    prefix = prefix or uuid.uuid4().hex[:8]
    for p in doc["placements"]:
        p["job_id"] = f"{prefix}-{p['job_id']}"
        for k in ("start", "end", "deadline"):
            if p.get(k):
                p[k] = (pd.Timestamp(p[k]) + shift).strftime("%Y-%m-%dT%H:%M:%SZ")
    doc["plan_id"] = uuid.uuid4().hex
    doc["date"] = target.strftime("%Y-%m-%d")
    return doc


def squeue_jobs(conf: Path) -> list[dict]:
    """Every job of one cluster, as ``squeue --json`` lists it (normalised)."""
    from carbonsched.adapters.dispatch.slurm import parse_squeue_json

    out = subprocess.run(["squeue", "--json", "--states=all"], env={**os.environ,
                         "SLURM_CONF": str(conf)}, capture_output=True, text=True, check=True)
    return parse_squeue_json(json.loads(out.stdout))


def one_plan(placements: list[dict], catalog: str = "global") -> dict:
    """A plan document with only ``placements`` (each: job_id, site, start, end as datetimes,
    gpu_type, gpus, optional command)."""
    fmt = "%Y-%m-%dT%H:%M:%SZ"
    first = min(p["start"] for p in placements)
    return {"plan_id": uuid.uuid4().hex, "date": first.strftime("%Y-%m-%d"), "catalog": catalog,
            "signal_quality": "measured",
            "solver": {"name": "test", "status": "optimal", "seconds": 0.0},
            "totals": {"energy_kwh": 0.0, "emissions_kg": 0.0, "baseline_emissions_kg": 0.0},
            "unplaced": [], "inference": [],
            "placements": [{**p, "start": p["start"].strftime(fmt),
                            "end": p["end"].strftime(fmt), "energy_kwh": 1.0,
                            "emissions_kg": 0.1} for p in placements]}


def private_root(slurm_dir: Path) -> Path:
    """A folder for a test-owned Slurm cluster, inside the services' Slurm folder.

    ``services.sh down`` stops the daemons of every cluster there (``pc-*``), so a test run
    killed before a fixture's teardown leaves none running; the folder goes with the
    services' state. The name is short: slurmd's step sockets live below it, and a Unix
    socket's path has at most 107 bytes.
    """
    return slurm_dir / f"pc-{uuid.uuid4().hex[:6]}"


class PrivateCluster:
    """A test-owned Slurm cluster (one controller, one node) the test may stop, restart and
    rebuild with its state lost (job ids then start again at 1, as after a controller rebuilt
    without its StateSaveLocation), on ports ``CARBONSCHED_PORT_BASE + offset`` and ``+1``."""

    def __init__(self, slurm_dir: Path, name: str, offset: int, gpus: dict[str, int]) -> None:
        from tests.scriptload import load_script

        mod = load_script("scripts/slurm_conf.py")
        base = int(os.environ.get("CARBONSCHED_PORT_BASE", 57300))
        self.root = private_root(slurm_dir)
        self.dir, self.node, devices = mod.write_cluster(
            self.root, name, "ca-on-toronto", "global", gpus, base + offset, base + offset + 1,
            str(slurm_dir / "munge" / "munge.socket"), message_timeout_s=3)
        for dev in devices:
            os.mknod(dev, 0o666 | 0o020000, os.makedev(1, 3))
        self.conf = self.dir / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf), "TZ": "UTC"}

    def _wait_idle(self) -> None:
        import time

        for _ in range(480):
            out = subprocess.run(["sinfo", "-h", "-o", "%t"], env=self.env, capture_output=True,
                                 text=True)
            if out.returncode == 0 and "idle" in out.stdout:
                return
            time.sleep(0.25)
        raise RuntimeError(f"private cluster not idle after 120 s: "
                           f"{(self.dir / 'slurmctld.log').read_text()[-2000:]}")

    def start(self, *, lose_state: bool = False) -> None:
        """Start the controller (and the node's slurmd when it is not running)."""
        if lose_state:
            subprocess.run(["rm", "-rf", str(self.dir / "state")], check=True)
            (self.dir / "state").mkdir()
        subprocess.run(["slurmctld", "-i"], env=self.env, check=True)
        if not self._alive("slurmd.pid"):
            subprocess.run(["slurmd", "-N", self.node], env=self.env, check=True)
        self._wait_idle()

    def _alive(self, pidfile: str) -> bool:
        try:
            os.kill(int((self.dir / pidfile).read_text()), 0)
            return True
        except (OSError, ValueError):
            return False

    def stop_controller(self) -> None:
        import signal
        import time

        pid = int((self.dir / "slurmctld.pid").read_text())
        os.kill(pid, signal.SIGTERM)
        for _ in range(200):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)

    def sbatch(self, *args: str) -> int:
        out = subprocess.run(["sbatch", "--parsable", "--output=/dev/null", "--chdir=/tmp",
                              *args], env=self.env, capture_output=True, text=True, check=True)
        return int(out.stdout.strip().split(";")[0])

    def close(self) -> None:
        import signal
        import time

        for f in ("slurmd.pid", "slurmctld.pid"):
            try:
                os.kill(int((self.dir / f).read_text()), signal.SIGTERM)
            except (OSError, ValueError):
                pass
        time.sleep(0.5)
        subprocess.run(["rm", "-rf", str(self.root)], check=False)


def poll(fn, until, what: str, timeout_s: float, every_s: float = 0.5):
    """``fn()`` again every ``every_s`` until ``until(value)``; its value, or AssertionError
    naming ``what`` and the last value after ``timeout_s`` (a generous limit, not a budget)."""
    t0 = time.monotonic()
    while True:
        v = fn()
        if until(v):
            return v
        if time.monotonic() - t0 > timeout_s:
            raise AssertionError(f"{what}: still {v!r} after {timeout_s} s")
        time.sleep(every_s)


#: How to point the Kubernetes contract suites at a real cluster.
REAL_CLUSTER_HOW = ("set CARBONSCHED_K8S_CONTEXT to a context of KUBECONFIG (or ~/.kube/config), "
                    "or KUBECONFIG alone for its current context")
#: What the real-cluster cases of the Kubernetes contract suites say when they skip.
REAL_CLUSTER_SKIP = (f"runs against a real cluster only: {REAL_CLUSTER_HOW} (the [emulator] "
                     "case ran against the emulator; see docs/dispatch.md, 'Contract suite')")


def real_cluster() -> tuple[str | None, str] | None:
    """``(kubeconfig, context)`` of the real cluster the contract suites run against, or None.

    Set by ``CARBONSCHED_K8S_CONTEXT`` (a context of ``KUBECONFIG``, else of
    ``~/.kube/config``) or by ``KUBECONFIG`` alone (its current context); neither: None, and the
    real cases skip with :data:`REAL_CLUSTER_SKIP`. ``kubeconfig`` None means the client's
    default file.
    """
    kubeconfig = os.environ.get("KUBECONFIG") or None
    context = os.environ.get("CARBONSCHED_K8S_CONTEXT")
    if not context and not kubeconfig:
        return None
    if not context:
        from kubernetes import config

        context = config.list_kube_config_contexts(kubeconfig)[1]["name"]
    return kubeconfig, context
