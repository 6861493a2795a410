"""Dispatch against the real Slurm clusters (and the Kubernetes emulator) of scripts/services.sh."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from carbonsched.adapters.dispatch.slurm import SlurmAdapter, parse_comment
from carbonsched.catalog import load_catalog
from carbonsched.config import Settings
from carbonsched.dispatch.outbox import (
    cancel_unit,
    dispatch_plan,
    dispatch_records,
    placement_nodes,
    reconcile,
    refresh_status,
)
from carbonsched.errors import TimeAxisError
from carbonsched.store import Store
from carbonsched.store.models import DispatchRow
from tests.scriptload import load_script

from .helpers import future_plan, private_root, squeue_jobs

pytestmark = pytest.mark.slurm
CLUSTERS = ("ontario", "saopaulo", "britain")
SITES = {s.id: s for s in load_catalog("global").sites}
ROOT = Path(__file__).resolve().parents[2]


def _ts(s: str) -> datetime:
    return pd.Timestamp(s).to_pydatetime()


def _ours(slurm_dir: Path, cluster: str, prefix: str) -> list[dict]:
    """Jobs on ``cluster`` whose dispatch key starts with ``prefix``."""
    out = []
    for j in squeue_jobs(slurm_dir / cluster / "slurm.conf"):
        c = parse_comment(j["comment"])
        if c and c[0].startswith(prefix):
            out.append({**j, "key": c[0], "plan": c[1]})
    return out


def _rows(store: Store) -> dict[str, DispatchRow]:
    with Session(store.engine) as s:
        return {r.key: r for r in s.scalars(select(DispatchRow))}


def test_real_global_plan_lands_once_on_every_cluster_and_namespace(
        global_plan_doc, any_store, settings, slurm_dir, emulator_kubeconfig, tmp_path):
    from kubernetes import client, config

    prefix = uuid.uuid4().hex[:8]
    doc = future_plan(global_plan_doc, prefix=prefix)
    any_store.save_plan(doc)
    n = len(doc["placements"])
    kinds = Counter(SITES[p["site"]].backend.kind for p in doc["placements"])
    assert kinds["slurm"] > 0 and kinds["kubernetes"] > 0

    first = dispatch_plan(any_store, doc["plan_id"], settings=settings)
    assert first.counts == {"submitted": n} and first.complete

    for cluster in CLUSTERS:
        expected = {f"{p['job_id']}#0": p for p in doc["placements"]
                    if SITES[p["site"]].backend.cluster == cluster}
        jobs = _ours(slurm_dir, cluster, prefix)
        assert Counter(j["key"] for j in jobs) == Counter(list(expected))  # each exactly once
        for j in jobs:
            p = expected[j["key"]]
            assert j["states"] == ["PENDING"] and j["cluster"] == cluster
            assert j["begin"] == _ts(p["start"])
            nodes = placement_nodes(SITES[p["site"]], p["job_id"], p["gpu_type"], p["gpus"])
            assert j["gres"] == f"gpu:{p['gpu_type']}:{p['gpus'] // nodes}"  # per node
            minutes = (_ts(p["end"]) - _ts(p["start"])).total_seconds() / 60
            assert j["time_limit_min"] == minutes
            assert j["plan"] == doc["plan_id"]

    # every Kubernetes placement at a plain-Job site is a valid (the emulator validated it),
    # held Job with one pod per node of the site's node shape (the other workload kinds:
    # tests/dispatch/test_k8s_workloads.py)
    batch: dict[str, client.BatchV1Api] = {}
    job_sites = [p for p in doc["placements"] if SITES[p["site"]].backend.kind == "kubernetes"
                 and SITES[p["site"]].backend.workload == "job"]
    assert job_sites, "the global plan places nothing at a plain-Job Kubernetes site"
    for p in job_sites:
        be = SITES[p["site"]].backend
        if be.context not in batch:
            batch[be.context] = client.BatchV1Api(config.new_client_from_config(
                str(emulator_kubeconfig), context=be.context))
        rows = _rows(any_store)
        name = rows[f"{p['job_id']}#0"].backend_id.rsplit("/", 1)[1]
        job = batch[be.context].read_namespaced_job(name, be.namespace)
        assert job.spec.suspend is True
        nodes = placement_nodes(SITES[p["site"]], p["job_id"], p["gpu_type"], p["gpus"])
        assert (job.spec.parallelism or 1) == nodes
        c = job.spec.template.spec.containers[0]
        assert c.resources.limits == {"nvidia.com/gpu": str(p["gpus"] // nodes)}
        assert job.spec.template.spec.node_selector == {"nvidia.com/gpu.product": p["gpu_type"]}
        assert job.metadata.labels["carbonsched.io/plan"] == doc["plan_id"]
        assert job.metadata.annotations["carbonsched.io/key"] == f"{p['job_id']}#0"
        assert job.metadata.uid and job.metadata.resource_version
        assert job.metadata.creation_timestamp is not None

    # the same plan again creates nothing new
    again = dispatch_plan(any_store, doc["plan_id"], settings=settings)
    assert again.counts == {"recorded": n}
    # even a store that lost its outbox finds every job on its backend by key
    fresh = Store(f"sqlite:///{tmp_path / 'fresh.db'}")
    fresh.save_plan(doc)
    lost = dispatch_plan(fresh, doc["plan_id"], settings=settings)
    assert lost.counts == {"reconciled": n}
    for cluster in CLUSTERS:
        keys = Counter(j["key"] for j in _ours(slurm_dir, cluster, prefix))
        assert all(v == 1 for v in keys.values())
    assert sum(len(_ours(slurm_dir, c, prefix)) for c in CLUSTERS) == kinds["slurm"]


def test_sigkill_between_submit_and_record_ends_with_the_job_once_and_recorded(
        global_plan_doc, tmp_path, settings, slurm_dir):
    prefix = uuid.uuid4().hex[:8]
    doc = future_plan(global_plan_doc, prefix=prefix)
    doc["placements"] = [p for p in doc["placements"]
                         if SITES[p["site"]].backend.kind == "slurm"]
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = Store(url)
    store.save_plan(doc)
    script = f"""
import os, signal
from pathlib import Path
from carbonsched.adapters.dispatch import slurm
from carbonsched.config import Settings
from carbonsched.dispatch.outbox import dispatch_plan
from carbonsched.store import Store

real_submit = slurm.SlurmAdapter.submit
def submit_then_die(self, req):
    job = real_submit(self, req)          # sbatch succeeded: the job exists on the cluster
    Path({str(tmp_path / 'submitted')!r}).write_text(req.key)
    os.kill(os.getpid(), signal.SIGKILL)  # ... and the process dies before recording it
slurm.SlurmAdapter.submit = submit_then_die
dispatch_plan(Store({url!r}), {doc['plan_id']!r}, settings=Settings(
    slurm_conf_dir={str(slurm_dir)!r}, dispatch_workers=1))
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    killed_key = (tmp_path / "submitted").read_text()
    rows = _rows(store)
    # the intents were written first (outbox); the killed submission is not recorded
    assert len(rows) == len(doc["placements"])
    assert rows[killed_key].state == "Pending" and rows[killed_key].backend_id is None
    on_backend = {j["key"]: j for c in CLUSTERS for j in _ours(slurm_dir, c, prefix)}
    assert killed_key in on_backend
    orphans = {k for k in on_backend if rows[k].backend_id is None}

    # the restart; a short backend timeout so the settle wait below is short
    restart = settings.model_copy(update={"dispatch_backend_timeout_s": 15.0,
                                          "dispatch_lease_s": 30.0})
    after = dispatch_plan(store, doc["plan_id"], settings=restart)
    # Backends are driven in parallel: another cluster's sbatch may have been in flight when
    # the process died. Such a unit (stamped submit_attempted_at, not on its cluster) is never
    # submitted again blind: the restart waits the backend timeout for it to land, then looks
    # again. Only those units may be left for the next run.
    stamped = {k for k, r in rows.items() if r.submit_attempted_at is not None}
    waiting = {o.key for o in after.outcomes if o.action == "unavailable"}
    assert waiting <= stamped - {killed_key} - set(on_backend), after.outcomes
    assert all("may still reach" in o.detail for o in after.outcomes
               if o.action == "unavailable")
    assert {o.key for o in after.outcomes if o.action == "reconciled"} == orphans
    submitted = after.counts["submitted"]
    if waiting:
        assert not after.complete
        time.sleep(restart.dispatch_backend_timeout_s + 2)
        again = dispatch_plan(store, doc["plan_id"], settings=restart)
        assert again.complete, again.outcomes
        submitted += again.counts["submitted"]
        orphans |= {o.key for o in again.outcomes if o.action == "reconciled"}
    else:
        assert after.complete
    assert submitted == len(doc["placements"]) - len(orphans)
    keys = Counter(j["key"] for c in CLUSTERS for j in _ours(slurm_dir, c, prefix))
    assert set(keys) == set(rows) and set(keys.values()) == {1}
    rows = _rows(store)
    on_backend = {j["key"]: j for c in CLUSTERS for j in _ours(slurm_dir, c, prefix)}
    for k, r in rows.items():
        cluster, job_id = r.backend_id.split(":")
        assert (r.state, r.reason) == ("Dispatched", "Submitted")
        assert on_backend[k]["cluster"] == cluster and on_backend[k]["job_id"] == int(job_id)


@pytest.fixture
def private_cluster(slurm_dir, tmp_path):
    """A fourth, test-owned Slurm cluster that the test may stop and start (ports 57391/57392)."""
    mod = load_script("scripts/slurm_conf.py")
    root = private_root(slurm_dir)
    d, node, devices = mod.write_cluster(
        root, "downtest", "ca-on-toronto", "global", {"A100": 16, "V100": 4},
        int(os.environ.get("CARBONSCHED_PORT_BASE", 57300)) + 91,
        int(os.environ.get("CARBONSCHED_PORT_BASE", 57300)) + 92,
        str(slurm_dir / "munge" / "munge.socket"), message_timeout_s=3)
    for dev in devices:
        os.mknod(dev, 0o666 | 0o020000, os.makedev(1, 3))
    env = {**os.environ, "SLURM_CONF": str(d / "slurm.conf")}

    def start(fresh: bool = False) -> None:
        subprocess.run(["slurmctld", *(["-i"] if fresh else [])], env=env, check=True)
        # after a restart the node is idle again once slurmd re-registers, on the controller's
        # next ping (SlurmdTimeout 60 s / 3): up to ~20 s, measured once at > 30 s in CI
        states = ""
        for _ in range(480):
            out = subprocess.run(["sinfo", "-h", "-o", "%t"], env=env, capture_output=True,
                                 text=True)
            states = out.stdout.strip() or out.stderr.strip()
            if out.returncode == 0 and "idle" in out.stdout:
                return
            time.sleep(0.25)
        raise RuntimeError(f"private cluster did not come up in 120 s (sinfo: {states!r}): "
                           f"{(d / 'slurmctld.log').read_text()}")

    def stop() -> None:
        pid = int((d / "slurmctld.pid").read_text())
        os.kill(pid, signal.SIGTERM)
        for _ in range(100):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)

    subprocess.run(["slurmctld", "-i"], env=env, check=True)
    subprocess.run(["slurmd", "-N", node], env=env, check=True)
    for _ in range(120):
        out = subprocess.run(["sinfo", "-h", "-o", "%t"], env=env, capture_output=True, text=True)
        if "idle" in out.stdout:
            break
        time.sleep(0.25)
    yield d / "slurm.conf", start, stop
    for f in ("slurmd.pid", "slurmctld.pid"):
        try:
            os.kill(int((d / f).read_text()), signal.SIGTERM)
        except (OSError, ValueError):
            pass
    time.sleep(0.5)
    subprocess.run(["rm", "-rf", str(root)], check=False)


def test_controller_down_retries_with_backoff_then_completes_once(
        global_plan_doc, store, private_cluster):
    conf, start, stop = private_cluster
    prefix = uuid.uuid4().hex[:8]
    doc = future_plan(global_plan_doc, prefix=prefix)
    doc["placements"] = [p for p in doc["placements"] if p["site"] == "ca-on-toronto"]
    n = len(doc["placements"])
    store.save_plan(doc)
    adapters = {"ca-on-toronto": SlurmAdapter("downtest", partition="gpu", conf=conf,
                                              timeout_s=20)}
    settings = Settings(dispatch_backoff_s=0.5)
    stop()

    # the whole run with the controller down: retried with backoff, left pending
    delays: list[float] = []
    down = dispatch_plan(store, doc["plan_id"], adapters=adapters, settings=settings,
                         sleep=delays.append, max_attempts=3)
    assert delays == [0.5, 1.0] and down.retries == 2
    assert not down.complete and down.counts == {"unavailable": n}
    for r in _rows(store).values():
        assert (r.state, r.reason, r.attempts) == ("Pending", "BackendUnavailable", 3)
        assert "slurm:downtest: controller unreachable" in r.detail
        assert r.backend_id is None
    cli = subprocess.run([sys.executable, "-m", "carbonsched.cli.app", "status", "--no-refresh",
                          "--json"], env={**os.environ, "CARBONSCHED_DATABASE_URL": store.url},
                         capture_output=True, text=True, cwd=ROOT)
    assert {r["reason"] for r in json.loads(cli.stdout)} == {"BackendUnavailable"}

    # the next run: the controller comes back during the backoff; dispatch completes, once
    seen: list[set[str]] = []

    def sleep_and_restart(delay: float) -> None:
        seen.append({r.reason for r in _rows(store).values()})
        if len(seen) == 1:
            start()

    back = dispatch_plan(store, doc["plan_id"], adapters=adapters, settings=settings,
                         sleep=sleep_and_restart, max_attempts=6)
    assert seen[0] == {"BackendUnavailable"}
    assert back.complete and back.counts == {"submitted": n}
    jobs = [j for j in squeue_jobs(conf) if (c := parse_comment(j["comment"]))
            and c[0].startswith(prefix)]
    assert len(jobs) == n and len({j["comment"] for j in jobs}) == n
    assert {(r.state, r.reason) for r in _rows(store).values()} == {("Dispatched", "Submitted")}
    # and a reconcile pass (the service's start-up) finds nothing left to do
    assert reconcile(store, "global", adapters=adapters, settings=settings).outcomes == []


def test_rolling_horizon_dispatches_each_job_once_across_successive_plans(
        global_plan_doc, store, settings, slurm_dir):
    prefix = uuid.uuid4().hex[:8]
    a = future_plan(global_plan_doc, prefix=prefix)
    a["placements"] = [p for p in a["placements"] if SITES[p["site"]].backend.kind == "slurm"]
    starts = sorted(_ts(p["start"]) for p in a["placements"])
    cut = starts[len(starts) // 2]
    early = {f"{p['job_id']}#0" for p in a["placements"] if _ts(p["start"]) < cut}
    store.save_plan(a)
    first = dispatch_plan(store, a["plan_id"], settings=settings, commit_before=cut)
    assert first.counts == {"submitted": len(early),
                            "not_committed": len(a["placements"]) - len(early)}
    # the next plan re-plans the same jobs: the uncommitted ones move one hour later
    b = json.loads(json.dumps(a))
    b["plan_id"] = uuid.uuid4().hex
    for p in b["placements"]:
        if f"{p['job_id']}#0" not in early:
            for k in ("start", "end"):
                p[k] = (_ts(p[k]) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    store.save_plan(b)
    second = dispatch_plan(store, b["plan_id"], settings=settings)
    assert {o.key for o in second.outcomes if o.action == "already_dispatched"} == early
    assert all(o.reason == "AlreadyDispatched" and a["plan_id"] in o.detail
               for o in second.outcomes if o.action == "already_dispatched")
    assert second.counts["submitted"] == len(a["placements"]) - len(early)
    jobs = {j["key"]: j for c in CLUSTERS for j in _ours(slurm_dir, c, prefix)}
    assert len(jobs) == len(a["placements"])
    for p in b["placements"]:
        key = f"{p['job_id']}#0"
        assert jobs[key]["plan"] == (a if key in early else b)["plan_id"]
        assert jobs[key]["begin"] == _ts(p["start"])
    recs = dispatch_records(store, b["plan_id"])
    assert len(recs) == len(b["placements"])  # the plan's status shows the earlier plan's jobs
    assert set(recs.loc[recs.plan_id == a["plan_id"], "key"]) == early


def test_placements_past_their_deadline_are_recorded_not_submitted(
        global_plan_doc, store, settings, slurm_dir):
    prefix = uuid.uuid4().hex[:8]
    doc = future_plan(global_plan_doc, prefix=prefix)
    store.save_plan(doc)
    late = datetime.now(UTC) + timedelta(days=10)
    s = dispatch_plan(store, doc["plan_id"], settings=settings, clock=lambda: late)
    assert s.counts == {"deadline_passed": len(doc["placements"])}
    assert all(not _ours(slurm_dir, c, prefix) for c in CLUSTERS)
    r = next(iter(_rows(store).values()))
    assert (r.state, r.reason) == ("Failed", "DeadlinePassed")
    assert "is after the deadline" in r.detail
    with pytest.raises(TimeAxisError, match="commit_before .* is naive"):
        dispatch_plan(store, doc["plan_id"], settings=settings,
                      commit_before=datetime(2030, 1, 1))
    with pytest.raises(TimeAxisError, match="clock returned naive"):
        dispatch_plan(store, doc["plan_id"], settings=settings, clock=datetime.now)


def test_backend_rejection_is_recorded_with_slurms_reason(global_plan_doc, store, settings,
                                                          slurm_dir):
    prefix = uuid.uuid4().hex[:8]
    doc = future_plan(global_plan_doc, prefix=prefix)
    doc["placements"] = [p for p in doc["placements"] if p["site"] == "gb-london"][:1]
    doc["placements"][0]["gpu_type"] = "H100"  # britain has no H100
    store.save_plan(doc)
    s = dispatch_plan(store, doc["plan_id"], settings=settings)
    assert s.counts == {"rejected": 1}
    r = next(iter(_rows(store).values()))
    assert (r.state, r.reason) == ("Failed", "Rejected")
    assert "Requested node configuration is not available" in r.detail


def test_status_records_actual_start_and_end_from_sacct_and_cancel(store, settings, slurm_dir):
    prefix = uuid.uuid4().hex[:8]
    now = datetime.now(UTC).replace(microsecond=0)
    fmt = "%Y-%m-%dT%H:%M:%SZ"
    doc = {"plan_id": uuid.uuid4().hex, "date": now.strftime("%Y-%m-%d"), "catalog": "global",
           "signal_quality": "measured", "solver": {"name": "test", "status": "optimal",
                                                     "seconds": 0.0},
           "totals": {"energy_kwh": 0.0, "emissions_kg": 0.0, "baseline_emissions_kg": 0.0},
           "unplaced": [], "inference": [],
           "placements": [
               {"job_id": f"{prefix}-now", "site": "ca-on-toronto", "start": now.strftime(fmt),
                "end": (now + timedelta(hours=1)).strftime(fmt), "gpu_type": "A100", "gpus": 2,
                "energy_kwh": 1.0, "emissions_kg": 0.1, "command": "sleep 2"},
               {"job_id": f"{prefix}-later", "site": "ca-on-toronto",
                "start": (now + timedelta(days=3)).strftime(fmt),
                "end": (now + timedelta(days=3, hours=1)).strftime(fmt), "gpu_type": "V100",
                "gpus": 1, "energy_kwh": 1.0, "emissions_kg": 0.1}]}
    store.save_plan(doc)
    assert dispatch_plan(store, doc["plan_id"], settings=settings).counts == {"submitted": 2}
    adapters = {"ca-on-toronto": SlurmAdapter("ontario", partition="gpu",
                                              conf=slurm_dir / "ontario" / "slurm.conf")}
    for _ in range(120):
        recs = refresh_status(store, "global", plan_id=doc["plan_id"], adapters=adapters)
        row = recs.set_index("key").loc[f"{prefix}-now#0"]
        if row.state == "Succeeded":
            break
        time.sleep(0.5)
    assert (row.state, row.reason, row.times_source) == ("Succeeded", "Completed", "sacct")
    assert now - timedelta(seconds=5) <= row.actual_start <= row.actual_end
    assert 1 <= (row.actual_end - row.actual_start).total_seconds() <= 30
    # the finished unit keeps its record (before: rewritten Cancelled); the later one cancels
    assert cancel_unit(store, "global", f"{prefix}-now", adapters=adapters) == "already-ended"
    assert cancel_unit(store, "global", f"{prefix}-later", adapters=adapters) == "cancelled"
    recs = refresh_status(store, "global", plan_id=doc["plan_id"], adapters=adapters)
    later = recs.set_index("key").loc[f"{prefix}-later#0"]
    assert (later.state, later.reason) == ("Cancelled", "Cancelled")
    assert recs.set_index("key").loc[f"{prefix}-now#0"].state == "Succeeded"
    assert [j["states"][0] for j in _ours(slurm_dir, "ontario", f"{prefix}-later")] == \
        ["CANCELLED"]


@pytest.mark.parametrize("zone", ["America/Toronto", "Asia/Kolkata"])
def test_begin_is_exact_on_real_slurm_across_dst_with_the_host_zone_set(
        store, settings, slurm_dir, monkeypatch, zone):
    monkeypatch.setenv("TZ", zone)  # the host zone sbatch's wall times are written in
    prefix = uuid.uuid4().hex[:8]
    fmt = "%Y-%m-%dT%H:%M:%SZ"
    instants = [datetime(2027, 11, 7, 5, 30, tzinfo=UTC),   # 01:30 EDT (Toronto)
                datetime(2027, 11, 7, 6, 30, tzinfo=UTC),   # 01:30 EST: same wall time
                datetime(2027, 3, 14, 6, 30, tzinfo=UTC),   # 01:30 EST
                datetime(2027, 3, 14, 7, 30, tzinfo=UTC)]   # 03:30 EDT (02:30 does not exist)
    doc = {"plan_id": uuid.uuid4().hex, "date": "2027-03-14", "catalog": "global",
           "signal_quality": "measured", "solver": {"name": "t", "status": "optimal",
                                                     "seconds": 0.0},
           "totals": {"energy_kwh": 0.0, "emissions_kg": 0.0, "baseline_emissions_kg": 0.0},
           "unplaced": [], "inference": [],
           "placements": [{"job_id": f"{prefix}-{i}", "site": "ca-on-toronto",
                           "start": t.strftime(fmt),
                           "end": (t + timedelta(hours=1)).strftime(fmt), "gpu_type": "V100",
                           "gpus": 1, "energy_kwh": 1.0, "emissions_kg": 0.1}
                          for i, t in enumerate(instants)]}
    store.save_plan(doc)
    dry = dispatch_plan(store, doc["plan_id"], settings=settings, dry_run=True)
    if zone == "America/Toronto":
        walls = [o.rendered.split("--begin=")[1].split()[0] for o in dry.outcomes]
        assert walls == ["2027-11-07T01:30:00", "2027-11-07T01:30:00", "2027-03-14T01:30:00",
                         "2027-03-14T03:30:00"]
    assert dispatch_plan(store, doc["plan_id"], settings=settings).counts == {"submitted": 4}
    jobs = {j["key"]: j for j in _ours(slurm_dir, "ontario", prefix)}
    for i, t in enumerate(instants):
        assert jobs[f"{prefix}-{i}#0"]["begin"] == t


def test_an_intent_left_pending_is_not_retried_past_its_deadline(store, slurm_dir, tmp_path):
    mod = load_script("scripts/slurm_conf.py")
    base = int(os.environ.get("CARBONSCHED_PORT_BASE", 57300))
    d, _, _ = mod.write_cluster(tmp_path, "nowhere", "ca-on-toronto", "global", {"A100": 16},
                                base + 93, base + 94, str(slurm_dir / "munge" / "munge.socket"),
                                message_timeout_s=2)  # no daemon ever listens there
    prefix = uuid.uuid4().hex[:8]
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=2)
    fmt = "%Y-%m-%dT%H:%M:%SZ"
    doc = {"plan_id": uuid.uuid4().hex, "date": start.strftime("%Y-%m-%d"), "catalog": "global",
           "signal_quality": "measured", "solver": {"name": "t", "status": "optimal",
                                                     "seconds": 0.0},
           "totals": {"energy_kwh": 0.0, "emissions_kg": 0.0, "baseline_emissions_kg": 0.0},
           "unplaced": [], "inference": [],
           "placements": [{"job_id": f"{prefix}-a", "site": "ca-on-toronto",
                           "start": start.strftime(fmt),
                           "end": (start + timedelta(hours=1)).strftime(fmt),
                           "gpu_type": "A100", "gpus": 1, "energy_kwh": 1.0,
                           "emissions_kg": 0.1}]}
    store.save_plan(doc)
    adapters = {"ca-on-toronto": SlurmAdapter("nowhere", conf=d / "slurm.conf", timeout_s=20)}
    s1 = dispatch_plan(store, doc["plan_id"], adapters=adapters, sleep=lambda _: None,
                       max_attempts=1)
    assert s1.counts == {"unavailable": 1}
    later = start + timedelta(hours=3)
    s2 = reconcile(store, "global", adapters=adapters, clock=lambda: later,
                   sleep=lambda _: None, max_attempts=1)
    assert s2.counts == {"deadline_passed": 1}
    r = next(iter(_rows(store).values()))
    assert (r.state, r.reason, r.attempts) == ("Failed", "DeadlinePassed", 2)
    assert "is after the deadline" in r.detail and "not submitted" in r.detail
    with pytest.raises(Exception, match="no dispatch adapter for site"):
        dispatch_plan(store, doc["plan_id"], adapters={}, dry_run=True)
