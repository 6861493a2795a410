"""The Kubernetes adapter: a contract suite run against the project's API emulator and, when
``KUBECONFIG`` is set, against that real cluster; emulator-only checks of the API's behaviour."""

from __future__ import annotations

import os
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from carbonsched.adapters.dispatch.base import DispatchRequest
from carbonsched.adapters.dispatch.kubernetes import KubernetesAdapter, job_name
from carbonsched.config import Settings
from carbonsched.dispatch.outbox import dispatch_plan, refresh_status, release_due
from carbonsched.domain import JobPayload, JobState, ReasonCode
from carbonsched.errors import BackendRejectedError, BackendUnavailableError

from .helpers import REAL_CLUSTER_SKIP, real_cluster

START = datetime.now(UTC).replace(microsecond=0) + timedelta(days=2)


def _req(job_id: str, plan_id: str = "plan-k", **kw) -> DispatchRequest:
    base = dict(plan_id=plan_id, job_id=job_id, piece=0, site="us-ny-newyork", start=START,
                end=START + timedelta(hours=1), deadline=START + timedelta(hours=2),
                gpu_type="A100", gpus=2, payload=JobPayload(command="sleep 1"))
    base.update(kw)
    return DispatchRequest(**base)


@pytest.fixture(params=["emulator", "real"])
def target(request):
    """(kubeconfig, context, namespace) of the emulator or the real cluster (real_cluster)."""
    if request.param == "emulator":
        k = os.environ.get("CARBONSCHED_KUBECONFIG")
        if not k:
            pytest.skip("CARBONSCHED_KUBECONFIG not set (scripts/test starts the emulator)")
        return k, "us-east-ny", "carbonsched"
    real = real_cluster()
    if real is None:
        pytest.skip(f"the [real] case {REAL_CLUSTER_SKIP}")
    k, ctx = real
    return k, ctx, os.environ.get("CARBONSCHED_K8S_NAMESPACE", "carbonsched-contract")


def _raw(kubeconfig: str, context: str):
    from kubernetes import client, config

    return client.BatchV1Api(config.new_client_from_config(kubeconfig, context=context))


# -- the contract suite (emulator and real cluster) ---------------------------------------------

def test_submit_is_idempotent_and_held_until_released(target):
    kc, ctx, ns = target
    a = KubernetesAdapter(ctx, ns, kubeconfig=kc)
    req = _req(f"k-{uuid.uuid4().hex[:8]}")
    first = a.submit(req)
    try:
        assert (first.state, first.reason, first.raw_state) == (
            JobState.DISPATCHED, ReasonCode.SUBMITTED, "suspended")
        again = a.submit(req)  # a retried create: 409 on our own object is success
        assert again.backend_id == first.backend_id
        st = a.status([req.key])
        assert list(st) == [req.key] and st[req.key].begin == START
        assert a.release(req.key) is True
        assert a.status([req.key])[req.key].raw_state != "suspended"
        assert a.release(req.key) is False
    finally:
        assert a.cancel(req.key) is True
    assert a.status([req.key]) == {} and a.cancel(req.key) is False


def test_a_foreign_object_under_our_name_is_never_overwritten_or_deleted(target):
    kc, ctx, ns = target
    a = KubernetesAdapter(ctx, ns, kubeconfig=kc)
    req = _req(f"k-{uuid.uuid4().hex[:8]}")
    foreign = a.manifest(req)
    foreign["metadata"]["labels"] = {"team": "someone-else"}
    foreign["metadata"]["annotations"] = {}
    raw = _raw(kc, ctx)
    raw.create_namespaced_job(ns, foreign)
    try:
        with pytest.raises(BackendRejectedError, match="exists and is not ours") as exc:
            a.submit(req)
        assert exc.value.conflict
        assert a.cancel(req.key) is False
        assert a.status([req.key]) == {}
        kept = raw.read_namespaced_job(job_name(req.job_id, 0), ns)
        assert kept.metadata.labels == {"team": "someone-else"}
    finally:
        raw.delete_namespaced_job(job_name(req.job_id, 0), ns,
                                  propagation_policy="Background")


def test_a_missing_namespace_is_a_rejection_naming_it(target):
    kc, ctx, _ = target
    ns = f"nowhere-{uuid.uuid4().hex[:6]}"
    a = KubernetesAdapter(ctx, ns, kubeconfig=kc)
    with pytest.raises(BackendRejectedError, match=f"namespace '{ns}' does not exist"):
        a.submit(_req("k-ns"))


# -- the emulator's API behaviour ---------------------------------------------------------------

@pytest.fixture
def emulator(emulator_kubeconfig):
    return str(emulator_kubeconfig), "eu-frankfurt", "carbonsched"


def _server(kubeconfig: str, context: str) -> str:
    import yaml

    cfg = yaml.safe_load(open(kubeconfig))
    cluster = next(c["context"]["cluster"] for c in cfg["contexts"] if c["name"] == context)
    return next(c["cluster"]["server"] for c in cfg["clusters"] if c["name"] == cluster)


def test_emulator_refuses_invalid_jobs_with_422_and_fills_server_fields(emulator):
    import httpx

    kc, ctx, ns = emulator
    a = KubernetesAdapter(ctx, ns, kubeconfig=kc)
    # raw HTTP: the official client (v37) refuses unknown fields itself before sending
    url = f"{_server(kc, ctx)}/apis/batch/v1/namespaces/{ns}/jobs"
    bad = a.manifest(_req(f"k-{uuid.uuid4().hex[:8]}"))
    bad["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    bad["spec"]["template"]["spec"]["containers"][0]["gpus"] = 2  # not a Container field
    r = httpx.post(url, json=bad)
    assert r.status_code == 422 and r.json()["reason"] == "Invalid"
    assert "Unsupported value: 'Always'" in r.json()["message"]
    assert "Additional properties are not allowed ('gpus' was unexpected)" in r.json()["message"]
    bad = a.manifest(_req("k-bad"))
    bad["metadata"]["name"] = "Not_A_DNS_Label"
    r = httpx.post(url, json=bad)
    assert r.status_code == 422 and "a lowercase RFC 1123 label" in r.json()["message"]
    r = httpx.post(url.replace(f"/namespaces/{ns}/", "/namespaces/absent/"),
                   json=a.manifest(_req("k-absent")))
    assert r.status_code == 404 and r.json()["message"] == 'namespaces "absent" not found'
    raw = _raw(kc, ctx)
    ok = raw.create_namespaced_job(ns, a.manifest(_req(f"k-{uuid.uuid4().hex[:8]}")))
    assert len(ok.metadata.uid) == 36 and int(ok.metadata.resource_version) > 0
    assert ok.metadata.creation_timestamp is not None and ok.metadata.generation == 1
    raw.delete_namespaced_job(ok.metadata.name, ns)


def test_emulator_runs_released_jobs_to_succeeded_or_failed(emulator):
    kc, ctx, ns = emulator
    a = KubernetesAdapter(ctx, ns, kubeconfig=kc)
    ok, bad = _req(f"k-{uuid.uuid4().hex[:8]}"), _req(f"k-{uuid.uuid4().hex[:8]}")
    a.submit(ok)
    a.submit(bad)
    _raw(kc, ctx).patch_namespaced_job(job_name(bad.job_id, 0), ns, {"metadata": {
        "annotations": {"emulator.carbonsched.io/outcome": "Failed"}}})
    t0 = datetime.now(UTC).replace(microsecond=0)
    assert a.release(ok.key) and a.release(bad.key)
    assert a.status([ok.key])[ok.key].state is JobState.RUNNING
    time.sleep(2.5)
    st = a.status([ok.key, bad.key])
    assert (st[ok.key].state, st[ok.key].reason) == (JobState.SUCCEEDED, ReasonCode.COMPLETED)
    assert t0 <= st[ok.key].actual_start < st[ok.key].actual_end
    assert (st[bad.key].state, st[bad.key].reason) == (JobState.FAILED,
                                                       ReasonCode.BACKEND_FAILED)
    assert st[bad.key].actual_end is not None


def test_an_unreachable_api_server_is_backend_unavailable(tmp_path):
    import yaml

    kc = tmp_path / "kc.yaml"
    kc.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "dead",
        "clusters": [{"name": "dead", "cluster": {"server": "http://127.0.0.1:57399"}}],
        "users": [{"name": "u", "user": {"token": "x"}}],
        "contexts": [{"name": "dead", "context": {"cluster": "dead", "user": "u"}}]}))
    a = KubernetesAdapter("dead", "carbonsched", kubeconfig=kc, timeout_s=2)
    with pytest.raises(BackendUnavailableError, match="API server unreachable during create"):
        a.submit(_req("k-dead"))
    with pytest.raises(BackendUnavailableError, match="no usable kubeconfig context 'nope'"):
        KubernetesAdapter("nope", "x", kubeconfig=kc).status()


def test_held_jobs_are_released_at_their_planned_start_and_times_recorded(
        store, slurm_dir, emulator_kubeconfig):
    prefix = uuid.uuid4().hex[:8]
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=1)
    fmt = "%Y-%m-%dT%H:%M:%SZ"
    doc = {"plan_id": uuid.uuid4().hex, "date": start.strftime("%Y-%m-%d"), "catalog": "global",
           "signal_quality": "measured", "solver": {"name": "t", "status": "optimal",
                                                     "seconds": 0.0},
           "totals": {"energy_kwh": 0.0, "emissions_kg": 0.0, "baseline_emissions_kg": 0.0},
           "unplaced": [], "inference": [],
           "placements": [{"job_id": f"{prefix}-fra", "site": "de-frankfurt",
                           "start": start.strftime(fmt),
                           "end": (start + timedelta(hours=2)).strftime(fmt),
                           "gpu_type": "T4", "gpus": 3, "energy_kwh": 1.0,
                           "emissions_kg": 0.1}]}
    store.save_plan(doc)
    settings = Settings(slurm_conf_dir=slurm_dir, kubeconfig=emulator_kubeconfig)
    assert dispatch_plan(store, doc["plan_id"], settings=settings).counts == {"submitted": 1}
    from carbonsched.catalog import load_catalog
    from carbonsched.dispatch.outbox import build_adapters

    adapters = build_adapters(load_catalog("global"), settings=settings)
    key = f"{prefix}-fra#0"
    assert release_due(store, "global", adapters=adapters,
                       clock=lambda: start - timedelta(seconds=1)) == []
    assert key in release_due(store, "global", adapters=adapters, clock=lambda: start)
    time.sleep(2.5)
    recs = refresh_status(store, "global", plan_id=doc["plan_id"], adapters=adapters)
    row = recs.set_index("key").loc[key]
    assert (row.state, row.reason, row.times_source) == ("Succeeded", "Completed", "job-status")
    assert row.actual_start < row.actual_end


def test_a_jobs_payload_is_the_pod_the_cluster_keeps(target):
    """Issue 33: the Job created carries the job's image, command, env, volumes, service account
    and MIG resource, as the API server stores it (and validates it, on a real cluster)."""
    from carbonsched.workload.schema import JobSpec

    kc, ctx, ns = target
    a = KubernetesAdapter(ctx, ns, kubeconfig=kc)
    payload = JobSpec.model_validate({
        "id": "p", "gpu_type": "A100", "gpus": 1, "duration_minutes": 60,
        "power_per_gpu_kw": 0.5, "earliest_start": "2026-01-01T00:00:00Z",
        "deadline": "2199-01-01T00:00:00Z", "image": "busybox:1.36",
        "command": ["sh", "-c", "echo $GREETING"], "env": {"GREETING": "hi"},
        "workdir": "/tmp", "mig_profile": "1g.10gb",
        "volumes": [{"name": "scratch", "mount_path": "/scratch", "empty_dir": True}]}
    ).to_job().payload
    # the plan gave it the slice it asks for (plan_requests sets it from the placement)
    req = _req(f"payload-{uuid.uuid4().hex[:6]}", gpus=1, payload=payload,
               mig_profile=payload.mig_profile)
    try:
        assert a.submit(req).state == JobState.DISPATCHED
        kept = _raw(kc, ctx).read_namespaced_job(job_name(req.job_id, 0), ns).spec.template.spec
        (c,) = kept.containers
        assert (c.image, c.command, c.working_dir) == ("busybox:1.36",
                                                         ["sh", "-c", "echo $GREETING"], "/tmp")
        env = {e.name: e.value for e in c.env}
        assert env["GREETING"] == "hi" and env["CARBONSCHED_JOB_ID"] == req.job_id
        assert c.resources.limits == {"nvidia.com/mig-1g.10gb": "1"}
        assert [(m.name, m.mount_path) for m in c.volume_mounts] == [("scratch", "/scratch")]
        assert kept.volumes[0].name == "scratch" and kept.volumes[0].empty_dir is not None
    finally:
        a.cancel(req.key)


def test_a_unit_whose_manifest_cannot_be_built_is_refused_and_the_others_are_dispatched(
        store, emulator_kubeconfig):
    """A plan whose one placement carries a pod template the job schema would refuse (here
    written into the plan by hand: ``nodeSelector`` a list where Kubernetes wants a map). Before,
    building its pod raised a TypeError out of ``dispatch_plan``: the pass stopped, and every
    later pass stopped at the same unit, so nothing of the plan reached the cluster. Now that unit
    is refused (``Failed/Rejected``, the detail naming the job and the field), the others are
    submitted, and the next pass records them all without an error."""
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    from carbonsched.store.models import DispatchRow

    from .helpers import one_plan

    prefix = uuid.uuid4().hex[:8]
    pod = {"metadata": {"labels": {"team": "vision"}},
           "spec": {"containers": [{"name": "job", "image": "busybox:1.36"}]}}
    bad = {"spec": {"containers": [{"name": "job", "image": "busybox:1.36"}],
                    "nodeSelector": ["zone-a"]}}
    start = START.replace(second=0)
    doc = one_plan([{"job_id": f"{prefix}-{name}", "site": "us-ny-newyork", "start": start,
                     "end": start + timedelta(hours=1), "gpu_type": "A100", "gpus": 2,
                     "payload": payload}
                    for name, payload in (("cmd", {"command": "sleep 1"}),
                                          ("bad", {"pod_template": bad}),
                                          ("pod", {"pod_template": pod}))])
    store.save_plan(doc)
    settings = Settings(kubeconfig=emulator_kubeconfig, dispatch_backoff_s=0.01)
    a = KubernetesAdapter("us-east-ny", "carbonsched", kubeconfig=str(emulator_kubeconfig))
    try:
        s = dispatch_plan(store, doc["plan_id"], settings=settings,
                          adapters={"us-ny-newyork": a}, placeholder=False)
        assert s.counts == {"rejected": 1, "submitted": 2}
        (o,) = [o for o in s.outcomes if o.action == "rejected"]
        assert (o.job_id, o.state, o.reason) == (f"{prefix}-bad", "Failed", "Rejected")
        assert o.detail == (
            f"job {prefix}-bad: field 'pod_template': the pod template's spec.nodeSelector is "
            "['zone-a'], not a map of strings to strings; give it as JSON like "
            "{\"disktype\": \"ssd\"} (nothing was sent to the cluster)")
        found = a.status()
        assert {f"{prefix}-cmd#0", f"{prefix}-pod#0"} <= set(found)
        assert f"{prefix}-bad#0" not in found
        kept = _raw(str(emulator_kubeconfig), "us-east-ny").read_namespaced_job(
            job_name(f"{prefix}-pod", 0), "carbonsched")
        assert kept.spec.template.metadata.labels["team"] == "vision"
        # the next pass: nothing raises, every unit recorded as the first pass left it
        again = dispatch_plan(store, doc["plan_id"], settings=settings,
                              adapters={"us-ny-newyork": a}, placeholder=False)
        assert again.counts == {"recorded": 3}
        with Session(store.engine) as ses:
            row = ses.scalars(select(DispatchRow).where(
                DispatchRow.key == f"{prefix}-bad#0")).one()
        assert (row.state, row.reason, row.backend_id) == ("Failed", "Rejected", None)
        assert "field 'pod_template'" in row.detail
    finally:
        for name in ("cmd", "pod"):
            a.cancel(f"{prefix}-{name}#0")
