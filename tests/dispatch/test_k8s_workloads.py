"""Kubernetes workload kinds (job, Kueue, JobSet, Volcano).

Three parts:

- the contract suite, per kind, against the project's emulator (``scripts/kube_emulator.py``,
  which validates every object against the real CRDs in ``../shared/data/k8s-crds``) and,
  unchanged, against a real cluster when ``CARBONSCHED_K8S_CONTEXT`` names a kubeconfig context
  (``KUBECONFIG`` or ``~/.kube/config``; namespace ``CARBONSCHED_K8S_NAMESPACE``, default
  ``carbonsched-contract``; Kueue LocalQueue ``CARBONSCHED_K8S_KUEUE_QUEUE``, default
  ``carbonsched``; Volcano Queue ``CARBONSCHED_K8S_VOLCANO_QUEUE``, default ``default``);
- emulator-only checks: runs to completion, cluster-side eviction and preemption (the emulator's
  test hook), CRD schema refusals, the Kueue webhook rule, the PAI-trace day's gangs;
- offline checks of the status mapping of each kind's conditions.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from carbonsched.adapters.dispatch.base import (
    CHECKPOINT_SIGNAL_LEAD_S,
    NEVER_RAN,
    DispatchRequest,
    WorkOutcome,
)
from carbonsched.adapters.dispatch.k8s_workloads import (
    HOLD_GATE,
    JOB,
    JOBSET,
    KUEUE_QUEUE_LABEL,
    KUEUE_WORKLOAD,
    RELEASED_PAST_STOP,
    RESOURCES,
    VOLCANO_JOB,
    parse_time,
    read_jobset,
    read_kueue,
    read_volcano,
    resource_for,
)
from carbonsched.adapters.dispatch.kubernetes import KubernetesAdapter, job_name
from carbonsched.domain import JobPayload, JobState, ReasonCode
from carbonsched.errors import BackendRejectedError

from .helpers import REAL_CLUSTER_SKIP, real_cluster

START = datetime.now(UTC).replace(microsecond=0) + timedelta(days=2)
NS = "carbonsched"
EMULATED = {"job": ("us-east-ny", None), "kueue": ("us-east-va", "gpu-batch"),
            "jobset": ("ap-tokyo", None), "volcano": ("ap-singapore", "default")}
"""Workload kind -> (context, queue) of the shipped ``global`` catalog's sites."""
KINDS = tuple(EMULATED)
POLL_S = 120.0  # a generous deadline for what the emulator does in about 1-2 s


def _req(job_id: str | None = None, **kw) -> DispatchRequest:
    base = dict(plan_id="plan-w", job_id=job_id or f"w-{uuid.uuid4().hex[:8]}", piece=0,
                site="us-ny-newyork", start=START, end=START + timedelta(hours=1),
                deadline=START + timedelta(hours=2), gpu_type="A100", gpus=4, nodes=2,
                payload=JobPayload(command="sleep 1"))
    base.update(kw)
    return DispatchRequest(**base)


@dataclass
class Target:
    """Where the contract suite runs: the emulator or a real cluster, for one workload kind."""

    kubeconfig: str | None
    context: str
    namespace: str
    workload: str
    queue: str | None
    emulator: bool

    def adapter(self, **kw) -> KubernetesAdapter:
        return KubernetesAdapter(self.context, self.namespace, kubeconfig=self.kubeconfig,
                                 workload=self.workload, queue=self.queue, **kw)

    def raw(self):
        from kubernetes import client, config

        return client.CustomObjectsApi(config.new_client_from_config(self.kubeconfig,
                                                                     context=self.context))

    def get(self, req: DispatchRequest) -> dict:
        res = resource_for(self.workload, req.nodes)
        return self.raw().get_namespaced_custom_object(
            res.group, res.version, self.namespace, res.plural, job_name(req.job_id, req.piece))

    def ours(self, req: DispatchRequest) -> list[dict]:
        """Every object of the kind carrying the request's key hash (exactly-once check)."""
        res = resource_for(self.workload, req.nodes)
        key_hash = self.adapter().metadata(req)["labels"]["carbonsched.io/key-hash"]
        sel = f"carbonsched.io/key-hash={key_hash}"
        return self.raw().list_namespaced_custom_object(
            res.group, res.version, self.namespace, res.plural, label_selector=sel)["items"]


def _served(t: Target) -> str | None:
    """None when the target serves the kind's API group, else why not."""
    from kubernetes.client.exceptions import ApiException

    res = resource_for(t.workload, 2)
    try:
        t.raw().list_namespaced_custom_object(res.group, res.version, t.namespace, res.plural,
                                              limit=1)
    except ApiException as exc:
        return f"{res.group}/{res.version} {res.plural} not served ({exc.status})"
    return None


@pytest.fixture(params=[(k, w) for k in KINDS for w in ("emulator", "real")],
                ids=lambda p: f"{p[0]}-{p[1]}")
def target(request) -> Target:
    kind, where = request.param
    if where == "emulator":
        kc = os.environ.get("CARBONSCHED_KUBECONFIG")
        if not kc:
            pytest.skip("CARBONSCHED_KUBECONFIG not set (scripts/test starts the emulator)")
        ctx, queue = EMULATED[kind]
        t = Target(kc, ctx, NS, kind, queue, True)
        why = _served(t)
        if why:
            pytest.skip(f"the emulator serves no {kind} CRDs: {why}; it reads them from "
                        "../shared/data/k8s-crds (set CARBONSCHED_SHARED_DATA or "
                        "CARBONSCHED_K8S_CRDS before start_kube_emulator)")
        return t
    real = real_cluster()
    if real is None:
        pytest.skip(f"the [{kind}-real] case {REAL_CLUSTER_SKIP}")
    kubeconfig, ctx = real
    queue = {"kueue": os.environ.get("CARBONSCHED_K8S_KUEUE_QUEUE", "carbonsched"),
             "volcano": os.environ.get("CARBONSCHED_K8S_VOLCANO_QUEUE", "default")}.get(kind)
    t = Target(kubeconfig, ctx,
               os.environ.get("CARBONSCHED_K8S_NAMESPACE", "carbonsched-contract"), kind, queue,
               False)
    why = _served(t)
    if why:
        pytest.skip(f"context {ctx!r} does not run {kind}: {why} (install its CRDs and "
                    "controller)")
    return t


def _poll(fn, until, what: str, deadline_s: float = POLL_S):
    t0 = time.monotonic()
    while True:
        v = fn()
        if until(v):
            return v
        if time.monotonic() - t0 > deadline_s:
            raise AssertionError(f"{what}: still {v!r} after {deadline_s} s")
        time.sleep(0.2)


def _gpus(pod_spec: dict) -> str:
    return pod_spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]


# -- the contract suite (emulator, and a real cluster with CARBONSCHED_K8S_CONTEXT) ----------------

def test_a_gang_lands_held_as_its_kind_exactly_once_and_is_released_once(target):
    a = target.adapter()
    req = _req()
    first = a.submit(req)
    try:
        assert (first.state, first.reason, first.raw_state) == (
            JobState.DISPATCHED, ReasonCode.SUBMITTED, "suspended")
        # a retry after a lost answer, from a fresh adapter (a restarted dispatcher)
        again = target.adapter().submit(req)
        assert again.backend_id == first.backend_id
        assert len(target.ours(req)) == 1
        obj = target.get(req)
        if target.workload == "job":  # an Indexed Job: one pod per node of the gang
            assert obj["kind"] == "Job" and obj["spec"]["suspend"] is True
            assert (obj["spec"]["completionMode"], obj["spec"]["completions"],
                    obj["spec"]["parallelism"]) == ("Indexed", 2, 2)
            assert _gpus(obj["spec"]["template"]["spec"]) == "2"
        elif target.workload in ("jobset", "kueue"):
            assert (obj["apiVersion"], obj["kind"]) == ("jobset.x-k8s.io/v1alpha2", "JobSet")
            assert obj["spec"]["suspend"] is True
            (rj,) = obj["spec"]["replicatedJobs"]
            assert rj["replicas"] == 2
            assert _gpus(rj["template"]["spec"]["template"]["spec"]) == "2"
            assert KUEUE_QUEUE_LABEL not in obj["metadata"]["labels"]  # held by carbonsched
        else:
            assert (obj["apiVersion"], obj["kind"]) == ("batch.volcano.sh/v1alpha1", "Job")
            spec = obj["spec"]
            assert (spec["minAvailable"], spec["schedulerName"], spec["queue"]) == (
                2, "volcano", target.queue)
            (task,) = spec["tasks"]
            assert task["replicas"] == 2 and _gpus(task["template"]["spec"]) == "2"
            assert task["template"]["spec"]["schedulingGates"] == [{"name": HOLD_GATE}]
        st = a.status([req.key])
        assert list(st) == [req.key] and st[req.key].begin == START
        assert a.release(req.key) is True
        assert a.release(req.key) is False  # idempotent
        after = a.status([req.key])[req.key]
        assert after.raw_state != "suspended" and after.state in (JobState.DISPATCHED,
                                                                   JobState.RUNNING)
        if target.workload == "kueue":
            assert target.get(req)["metadata"]["labels"][KUEUE_QUEUE_LABEL] == target.queue
    finally:
        assert a.cancel(req.key) is True
    assert a.status([req.key]) == {} and a.cancel(req.key) is False


def test_a_single_node_placement_is_a_job_under_kueue_and_job(target):
    if target.workload not in ("job", "kueue"):
        pytest.skip("JobSet and Volcano run every placement as their own kind")
    a = target.adapter()
    req = _req(gpus=2, nodes=1)
    a.submit(req)
    try:
        obj = target.get(req)
        assert (obj["apiVersion"], obj["kind"]) == ("batch/v1", "Job")
        assert obj["spec"]["suspend"] is True and _gpus(obj["spec"]["template"]["spec"]) == "2"
    finally:
        a.cancel(req.key)


def _pod_specs(obj: dict) -> list[dict]:
    """Every pod template's spec in a created object, whatever its kind."""
    spec = obj["spec"]
    if obj["kind"] == "JobSet":
        return [rj["template"]["spec"]["template"]["spec"] for rj in spec["replicatedJobs"]]
    if obj["apiVersion"] == VOLCANO_JOB.api_version:
        return [task["template"]["spec"] for task in spec["tasks"]]
    return [spec["template"]["spec"]]


def _fractional(job_id: str, **fields):
    from carbonsched.workload.schema import JobSpec

    return JobSpec.model_validate({
        "id": job_id, "gpu_type": "A100", "gpus": 1, "duration_minutes": 60,
        "power_per_gpu_kw": 0.2, "earliest_start": "2026-01-01T00:00:00Z",
        "deadline": "2199-01-01T00:00:00Z", **fields}).to_job().payload


SHARE_RESOURCE = "example.com/gpu-share"  # a cluster's own time-slicing resource name


@pytest.mark.parametrize("fields,limits", [
    ({"mig_profile": "1g.10gb", "command": "nvidia-smi -L"}, {"nvidia.com/mig-1g.10gb": "1"}),
    # ceil(250 * 4 / 1000) = 1 share; ceil(251 * 4 / 1000) = 2 (never less than asked)
    ({"gpu_milli": 250, "command": "nvidia-smi -L"}, {SHARE_RESOURCE: "1"}),
    ({"gpu_milli": 251, "command": "nvidia-smi -L"}, {SHARE_RESOURCE: "2"}),
    ({"mig_profile": "3g.40gb", "pod_template": {"spec": {"containers": [
        {"name": "sidecar", "image": "busybox:1.36"},
        {"name": "job", "image": "busybox:1.36", "command": ["nvidia-smi", "-L"]}]}}},
     {"nvidia.com/mig-3g.40gb": "1"}),
], ids=["mig", "milli-250", "milli-251", "mig-pod-template"])
def test_a_fractional_gpu_carries_the_clusters_resource_name_in_every_pod(target, fields,
                                                                          limits):
    """Issue 33 item 4 per kind: the object each kind creates (validated against its CRD) asks
    for the MIG slice or the configured shared-GPU resource, never a whole ``nvidia.com/gpu``."""
    a = target.adapter(gpu_share_resource=SHARE_RESOURCE)
    job_id = f"frac-{uuid.uuid4().hex[:8]}"
    pay = _fractional(job_id, **fields)
    req = _req(job_id, gpus=1, nodes=1, payload=pay, mig_profile=pay.mig_profile,
               gpu_milli=pay.gpu_milli,     # the plan's slice (plan_requests sets it)
               shares_per_gpu=4)            # the catalog pool's time-slicing replicas
    assert a.submit(req).state == JobState.DISPATCHED
    try:
        obj = target.get(req)
        assert obj["kind"] == {"job": "Job", "kueue": "Job", "jobset": "JobSet",
                               "volcano": "Job"}[target.workload]
        pods = _pod_specs(obj)
        assert pods
        for pod in pods:
            job = [c for c in pod["containers"] if c["name"] == "job"]
            assert len(job) == 1 and job[0]["resources"]["limits"] == limits
            assert all("resources" not in c for c in pod["containers"] if c["name"] != "job")
            assert pod["nodeSelector"] == {a.gpu_product_label: a.gpu_products.get("A100", "A100")}
    finally:
        a.cancel(req.key)


def test_a_pod_templates_labels_and_annotations_are_on_every_pod_the_cluster_keeps(target):
    """The job's ``pod_template.metadata`` reaches the pods of each kind's object, as the
    cluster keeps it (validated against the kind's CRD), carbonsched's own labels winning on a
    clash. Before, the template's metadata was dropped."""
    a = target.adapter()
    job_id = f"meta-{uuid.uuid4().hex[:8]}"
    pay = _fractional(job_id, pod_template={
        "metadata": {"labels": {"team": "vision", "app.kubernetes.io/managed-by": "them"},
                     "annotations": {"example.com/owner": "vision team"}},
        "spec": {"containers": [{"name": "job", "image": "busybox:1.36",
                                 "command": ["sleep", "1"]}]}})
    req = _req(job_id, payload=pay)
    assert a.submit(req).state == JobState.DISPATCHED
    try:
        obj = target.get(req)
        if obj["kind"] == "JobSet":
            pods = [rj["template"]["spec"]["template"] for rj in obj["spec"]["replicatedJobs"]]
        elif obj["apiVersion"] == VOLCANO_JOB.api_version:
            pods = [task["template"] for task in obj["spec"]["tasks"]]
        else:
            pods = [obj["spec"]["template"]]
        assert pods
        for pod in pods:
            labels = pod["metadata"]["labels"]
            assert labels["team"] == "vision"
            assert labels["app.kubernetes.io/managed-by"] == "carbonsched"
            assert pod["metadata"]["annotations"]["example.com/owner"] == "vision team"
        assert a.status([req.key])[req.key].state == JobState.DISPATCHED  # still ours
    finally:
        a.cancel(req.key)


def test_a_foreign_object_under_our_name_is_never_overwritten_or_deleted(target):
    a = target.adapter()
    req = _req()
    foreign = a.manifest(req)
    foreign["metadata"]["labels"] = {"team": "someone-else"}
    foreign["metadata"]["annotations"] = {}
    res = resource_for(target.workload, req.nodes)
    raw = target.raw()
    raw.create_namespaced_custom_object(res.group, res.version, target.namespace, res.plural,
                                        foreign)
    try:
        with pytest.raises(BackendRejectedError, match="exists and is not ours") as exc:
            a.submit(req)
        assert exc.value.conflict
        assert a.cancel(req.key) is False and a.release(req.key) is False
        assert a.status([req.key]) == {}
        assert target.get(req)["metadata"]["labels"] == {"team": "someone-else"}
    finally:
        raw.delete_namespaced_custom_object(res.group, res.version, target.namespace,
                                            res.plural, job_name(req.job_id, 0))


# -- emulator-only ---------------------------------------------------------------------------------

@pytest.fixture(params=KINDS)
def emu(request, emulator_kubeconfig) -> Target:
    ctx, queue = EMULATED[request.param]
    t = Target(str(emulator_kubeconfig), ctx, NS, request.param, queue, True)
    why = _served(t)
    if why:
        pytest.skip(f"the emulator serves no {request.param} CRDs: {why}")
    return t


def _server(t: Target) -> str:
    import yaml

    cfg = yaml.safe_load(open(t.kubeconfig))
    cluster = next(c["context"]["cluster"] for c in cfg["contexts"] if c["name"] == t.context)
    return next(c["cluster"]["server"] for c in cfg["clusters"] if c["name"] == cluster)


def _hook(t: Target, req: DispatchRequest, **body) -> dict:
    import httpx

    res = resource_for(t.workload, req.nodes)
    r = httpx.post(f"{_server(t)}/emulator/evict", json={
        "group": res.group, "version": res.version, "plural": res.plural,
        "namespace": t.namespace, "name": job_name(req.job_id, req.piece), **body})
    assert r.status_code == 200, r.text
    return r.json()


def test_each_kind_runs_a_released_gang_to_success_with_its_times(emu):
    a = emu.adapter()
    req = _req()
    a.submit(req)
    t0 = datetime.now(UTC).replace(microsecond=0)
    assert a.release(req.key)
    done = _poll(lambda: a.status([req.key])[req.key], lambda j: j.state in (
        JobState.SUCCEEDED, JobState.FAILED), f"{emu.workload} gang")
    assert (done.state, done.reason) == (JobState.SUCCEEDED, ReasonCode.COMPLETED), done
    assert t0 <= done.actual_start < done.actual_end
    if emu.workload == "kueue":  # Kueue admitted it: a Workload owned by the JobSet
        obj = emu.get(req)
        wls = [w for w in emu.raw().list_namespaced_custom_object(
            KUEUE_WORKLOAD.group, KUEUE_WORKLOAD.version, NS, KUEUE_WORKLOAD.plural)["items"]
            if w["metadata"]["ownerReferences"][0]["uid"] == obj["metadata"]["uid"]]
        (wl,) = wls
        assert wl["spec"]["queueName"] == "gpu-batch" and wl["spec"]["podSets"][0]["count"] == 2
        assert {c["type"] for c in wl["status"]["conditions"] if c["status"] == "True"} >= {
            "QuotaReserved", "Admitted"}
    a.cancel(req.key)


def test_a_cluster_side_eviction_is_reported_as_such_never_as_success(emu):
    a = emu.adapter()
    req = _req(payload=JobPayload(command="sleep 30"))
    a.submit(req)
    try:
        a.release(req.key)
        _poll(lambda: a.status([req.key])[req.key].state, lambda s: s is JobState.RUNNING,
              "running")
        reason = "Preempted" if emu.workload in ("kueue", "volcano") else "Evicted"
        _hook(emu, req, reason=reason, message="node drained for maintenance")
        got = a.status([req.key])[req.key]
        assert got.state is not JobState.SUCCEEDED
        if emu.workload == "kueue":  # requeued by Kueue: waiting, with the cluster's reason
            assert (got.state, got.reason, got.raw_state) == (
                JobState.DISPATCHED, ReasonCode.PREEMPTED, "evicted")
            assert "Preempted: node drained for maintenance" in got.detail
            assert a.release(req.key) is False  # Kueue's to readmit, not ours
            _hook(emu, req, action="readmit")
            again = _poll(lambda: a.status([req.key])[req.key],
                          lambda j: j.state is JobState.SUCCEEDED, "readmitted")
            assert again.reason is ReasonCode.COMPLETED
        elif emu.workload == "volcano":  # PodEvicted -> RestartJob; the new pods are gated
            assert (got.state, got.reason, got.raw_state) == (
                JobState.DISPATCHED, ReasonCode.PREEMPTED, "restarting")
            assert "Volcano restarts the job (Preempted: node drained" in got.detail
            assert a.release(req.key) is True  # the next release pass ungates them
            again = _poll(lambda: a.status([req.key])[req.key],
                          lambda j: j.state is JobState.SUCCEEDED, "restarted")
            assert again.reason is ReasonCode.COMPLETED
        else:  # a Job / JobSet without Kueue: the eviction fails it
            assert (got.state, got.reason) == (JobState.FAILED, ReasonCode.EVICTED)
            assert "pod evicted: node drained for maintenance" in got.detail
    finally:
        a.cancel(req.key)


def test_an_eviction_reaches_the_dispatch_record_a_user_reads(store, emulator_kubeconfig):
    from carbonsched.catalog import load_catalog
    from carbonsched.config import Settings
    from carbonsched.dispatch.outbox import (
        build_adapters,
        dispatch_plan,
        refresh_status,
        release_due,
    )

    from .helpers import one_plan

    start = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=1)
    doc = one_plan([{"job_id": f"{uuid.uuid4().hex[:8]}-kq", "site": "us-pjm-ashburn",
                     "start": start, "end": start + timedelta(hours=2), "gpu_type": "T4",
                     "gpus": 2, "command": "sleep 60"}])
    store.save_plan(doc)
    settings = Settings(kubeconfig=emulator_kubeconfig)
    assert dispatch_plan(store, doc["plan_id"], settings=settings).counts == {"submitted": 1}
    adapters = build_adapters(load_catalog("global"), settings=settings)
    assert adapters["us-pjm-ashburn"].name == "kubernetes:us-east-va/carbonsched[kueue]"
    key = doc["placements"][0]["job_id"] + "#0"
    assert key in release_due(store, "global", adapters=adapters, clock=lambda: start)
    t = Target(str(emulator_kubeconfig), "us-east-va", NS, "kueue", "gpu-batch", True)
    req = _req(job_id=doc["placements"][0]["job_id"], nodes=1, gpus=2)
    _poll(lambda: adapters["us-pjm-ashburn"].status([key])[key].state,
          lambda s: s is JobState.RUNNING, "admitted")
    _hook(t, req, reason="Preempted", message="a higher-priority workload")
    row = refresh_status(store, "global", plan_id=doc["plan_id"],
                         adapters=adapters).set_index("key").loc[key]
    assert (row.state, row.reason) == ("Dispatched", "Preempted")
    assert "Kueue evicted the workload (Preempted: a higher-priority workload)" in row.detail
    adapters["us-pjm-ashburn"].cancel(key)


def test_a_volcano_submission_reads_its_own_pods_not_every_pod_of_the_namespace(
        emulator_kubeconfig, monkeypatch):
    """A submission's status read asks for the new Job's pods only (label volcano.sh/job-name),
    so a plan's submissions stay linear in its Volcano Jobs (BENCHMARKS section 5: listing every
    pod per submission took 10,000 placements from 30 s to over 15 minutes); a full status pass
    still reads them all once."""
    t = Target(str(emulator_kubeconfig), *EMULATED["volcano"][:1], NS, "volcano",
               EMULATED["volcano"][1], True)
    if _served(t):
        pytest.skip("the emulator serves no Volcano CRDs")
    a = t.adapter()
    asked: list[str | None] = []
    real = a._our_pods

    def spy(job=None):
        asked.append(job)
        return real(job)

    monkeypatch.setattr(a, "_our_pods", spy)
    others = [_req(nodes=1, gpus=1) for _ in range(2)]
    req = _req(nodes=1, gpus=1)
    try:
        for r in [*others, req]:
            assert a.submit(r).state is JobState.DISPATCHED
        assert asked == [job_name(r.job_id, 0) for r in [*others, req]]
        asked.clear()
        st = a.status([r.key for r in [*others, req]])
        assert set(st) == {r.key for r in [*others, req]} and asked == [None]
    finally:
        for r in [*others, req]:
            a.cancel(r.key)


def test_a_release_that_fails_on_one_cluster_holds_back_only_its_own_rows(
        store, emulator_kubeconfig, tmp_path):
    import yaml

    from carbonsched.catalog import load_catalog
    from carbonsched.config import Settings
    from carbonsched.dispatch.outbox import build_adapters, dispatch_plan, release_due

    from .helpers import one_plan

    start = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=1)
    prefix = uuid.uuid4().hex[:8]
    doc = one_plan([{"job_id": f"{prefix}-{site[:3]}", "site": site, "start": start,
                     "end": start + timedelta(hours=2), "gpu_type": "T4", "gpus": 2,
                     "command": "sleep 60"} for site in ("us-pjm-ashburn", "de-frankfurt")])
    store.save_plan(doc)
    settings = Settings(kubeconfig=emulator_kubeconfig)
    assert dispatch_plan(store, doc["plan_id"], settings=settings).counts == {"submitted": 2}
    adapters = build_adapters(load_catalog("global"), settings=settings)
    dead = tmp_path / "dead.yaml"  # the Kueue site's API server is down during this pass
    dead.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "us-east-va",
        "clusters": [{"name": "d", "cluster": {"server": "http://127.0.0.1:9"}}],
        "users": [{"name": "u", "user": {"token": "x"}}],
        "contexts": [{"name": "us-east-va", "context": {"cluster": "d", "user": "u"}}]}))
    down = dict(adapters, **{"us-pjm-ashburn": KubernetesAdapter(
        "us-east-va", NS, kubeconfig=dead, workload="kueue", queue="gpu-batch", timeout_s=2)})
    keys = {s: f"{prefix}-{s[:3]}#0" for s in ("us-pjm-ashburn", "de-frankfurt")}
    assert release_due(store, "global", adapters=down, clock=lambda: start) == [
        keys["de-frankfurt"]]
    from carbonsched.dispatch.outbox import dispatch_records

    rec = dispatch_records(store, doc["plan_id"]).set_index("key")
    row = rec.loc[keys["us-pjm-ashburn"]]
    assert row.state == "Dispatched"
    assert row.detail.startswith("BackendUnavailable: release at the planned start failed at ")
    assert "retried in the next release pass" in row.detail and "unreachable" in row.detail
    # the next pass, with the cluster back, releases it
    assert release_due(store, "global", adapters=adapters, clock=lambda: start) == [
        keys["us-pjm-ashburn"]]
    for site, key in keys.items():
        adapters[site].cancel(key)


@pytest.mark.parametrize("site", ["us-pjm-ashburn", "jp-tk-tokyo", "sg-singapore"])
def test_a_pausing_piece_stopped_at_its_end_is_paused_on_every_kind(
        site, store, emulator_kubeconfig):
    """A preemptible job's first piece, stopped by activeDeadlineSeconds at its planned end, is
    recorded Succeeded/Paused (the JobSet's child Jobs and the Volcano Job's pods say
    DeadlineExceeded); a job placed whole stopped the same way is Failed/DeadlinePassed."""
    from carbonsched.catalog import load_catalog
    from carbonsched.config import Settings
    from carbonsched.dispatch.outbox import (
        build_adapters,
        dispatch_plan,
        refresh_status,
        release_due,
    )

    fmt = "%Y-%m-%dT%H:%M:%SZ"
    prefix = uuid.uuid4().hex[:8]
    now = datetime.now(UTC).replace(microsecond=0)
    one_s = now + timedelta(seconds=1)  # shorter than the emulator's 2 s run: stopped at its end
    # a piece as long as the checkpoint grace period: stopped 1 s after its release (the least
    # deadline), the grace (119 s) ending at its end; before, it ran its whole 120 s (the
    # emulator's 2 s run: Completed) and could keep its GPUs 120 s past its end
    grace = now + timedelta(seconds=CHECKPOINT_SIGNAL_LEAD_S)
    later = now + timedelta(days=2)

    def piece(job, n, start, end, **kw):
        return {"job_id": f"{prefix}-{job}", "piece": n, "site": site, "start": start.strftime(
            fmt), "end": end.strftime(fmt), "gpu_type": "T4", "gpus": 1, "energy_kwh": 1.0,
            "emissions_kg": 0.1, **kw}

    doc = {"plan_id": uuid.uuid4().hex, "date": now.strftime("%Y-%m-%d"), "catalog": "global",
           "signal_quality": "measured", "solver": {"name": "t", "status": "optimal",
                                                     "seconds": 0.0},
           "totals": {"energy_kwh": 0.0, "emissions_kg": 0.0, "baseline_emissions_kg": 0.0},
           "unplaced": [], "inference": [], "placements": [
               piece("p", 0, now, one_s), piece("p", 1, later, later + timedelta(hours=1)),
               piece("g", 0, now, grace), piece("g", 1, later, later + timedelta(hours=1)),
               piece("w", 0, now, one_s, deadline=one_s.strftime(fmt))]}
    store.save_plan(doc)
    settings = Settings(kubeconfig=emulator_kubeconfig)
    assert dispatch_plan(store, doc["plan_id"], settings=settings,
                         clock=lambda: now).counts == {"submitted": 5}
    adapters = build_adapters(load_catalog("global"), settings=settings)
    # released on time (the adapter's clock too): each runs a pod, stopped at its planned end;
    # on the wall clock a 1 s piece would be released after its stop and run none
    adapters[site].clock = lambda: now
    assert sorted(release_due(store, "global", adapters=adapters, clock=lambda: now)) == [
        f"{prefix}-g#0", f"{prefix}-p#0", f"{prefix}-w#0"]
    ended = [f"{prefix}-g#0", f"{prefix}-p#0", f"{prefix}-w#0"]
    recs = _poll(lambda: refresh_status(store, "global", plan_id=doc["plan_id"],
                                        adapters=adapters).set_index("key"),
                 lambda r: {r.loc[k].state for k in ended} <= {"Succeeded", "Failed"},
                 "pieces ended")
    for job in ("p", "g"):
        paused = recs.loc[f"{prefix}-{job}#0"]
        assert (paused.state, paused.reason) == ("Succeeded", "Paused"), paused.detail
        assert paused.detail.startswith(
            "piece 1 of 2 stopped at its planned end (DeadlineExceeded)")
    whole = recs.loc[f"{prefix}-w#0"]
    assert (whole.state, whole.reason) == ("Failed", "DeadlinePassed")
    for key in (f"{prefix}-p#0", f"{prefix}-p#1", f"{prefix}-g#0", f"{prefix}-g#1",
                f"{prefix}-w#0"):
        adapters[site].cancel(key)


def _stop_of(a: KubernetesAdapter, req: DispatchRequest) -> tuple[dict, list[dict]]:
    """The object of ``req`` and the Job specs that bound its run (its own, or its JobSet's
    child Jobs)."""
    raw = Target(a.kubeconfig, a.context, a.namespace, a.workload, None, True).raw()
    res = resource_for(a.workload, req.nodes)
    name = job_name(req.job_id, req.piece)
    obj = raw.get_namespaced_custom_object(res.group, res.version, NS, res.plural, name)
    if res is JOB:
        return obj, [obj["spec"]]
    return obj, [c["spec"] for c in raw.list_namespaced_custom_object(
        "batch", "v1", NS, "jobs", label_selector=f"jobset.sigs.k8s.io/jobset-name={name}")[
        "items"]]


@pytest.mark.parametrize(("left", "deadline"), [
    (600.0, 600),   # time left: the deadline is what is left, counted again from the resume
    (1.0, 1),       # just at the limit: the least deadline, its pods still run
    (0.9, None),    # less than that: no pod (parallelism 0), ended DeadlineExceeded at once
    (-3600.0, None),  # resumed an hour after its planned stop (the event outlasted the piece)
])
@pytest.mark.parametrize("workload", ["job", "jobset"])
def test_a_paused_piece_resumed_keeps_its_planned_stop(workload, left, deadline,
                                                       emulator_kubeconfig):
    """A pausing piece paused (a grid event) and resumed: Kubernetes resets ``startTime``, so
    ``activeDeadlineSeconds`` would count its whole length again from the resume and the piece
    run past its planned end, into the next piece's hours. The resume sets it to the time left
    to the planned stop (the grace period before the end); with none left no pod runs."""
    now = datetime.now(UTC).replace(microsecond=0)
    req = _req(start=now, end=now + timedelta(hours=1), deadline=now + timedelta(days=1),
               pieces=2, gpus=1, nodes=1, payload=JobPayload(command="sleep 3000"))
    stop = req.end - timedelta(seconds=CHECKPOINT_SIGNAL_LEAD_S)
    a = KubernetesAdapter(EMULATED[workload][0], NS, kubeconfig=str(emulator_kubeconfig),
                          workload=workload)
    a.submit(req)
    try:
        obj, _ = _stop_of(a, req)
        res = resource_for(workload, 1)
        long_run = {"metadata": {"annotations": {"emulator.carbonsched.io/run-seconds": "3000"}}}
        Target(a.kubeconfig, a.context, NS, workload, None, True).raw() \
            .patch_namespaced_custom_object(res.group, res.version, NS, res.plural,
                                            obj["metadata"]["name"], long_run)
        assert a.release(req.key)
        _poll(lambda: a.status([req.key])[req.key].state, lambda st: st is JobState.RUNNING,
              "running")
        assert a.pause(req.key).outcome is WorkOutcome.DONE
        a.clock = lambda: stop - timedelta(seconds=left)
        got = a.resume(req.key)
        assert got.outcome is WorkOutcome.DONE, got
        obj, specs = _stop_of(a, req)
        assert obj["spec"]["suspend"] is False and specs
        if deadline is not None:
            assert [(sp["activeDeadlineSeconds"], sp.get("parallelism", 1)) for sp in specs] \
                == [(deadline, 1)] * len(specs)
            assert f"activeDeadlineSeconds: {deadline} (the time left to its planned stop" \
                in got.detail
            assert a.status([req.key])[req.key].state is JobState.RUNNING
        else:
            assert [(sp["activeDeadlineSeconds"], sp["parallelism"]) for sp in specs] == [
                (1, 0)] * len(specs)
            assert "has passed: no pod runs and it ends DeadlineExceeded" in got.detail
            over = _poll(lambda: a.status([req.key])[req.key],
                         lambda j: j.state is JobState.FAILED, "ended at its deadline")
            assert over.reason is ReasonCode.DEADLINE_PASSED, over
        assert obj["metadata"]["annotations"]["carbonsched.io/stop-at"] == stop.strftime(
            "%Y-%m-%dT%H:%M:%SZ")
        # patched once: a second resume finds it running (or over)
        assert a.resume(req.key).outcome is (WorkOutcome.ALREADY if deadline is not None
                                             else WorkOutcome.ABSENT)
    finally:
        a.cancel(req.key)


def _runs(a: KubernetesAdapter, req: DispatchRequest) -> int:
    """Pods the object runs now: a Job's ``status.active``, a JobSet's active child Jobs."""
    obj, _ = _stop_of(a, req)
    st = obj.get("status") or {}
    if obj["kind"] == "JobSet":
        return sum(r.get("active") or 0 for r in st.get("replicatedJobsStatus") or [])
    return st.get("active") or 0


@pytest.mark.parametrize(("left", "deadline"), [
    (2.0, 2),       # released late, 2 s before its planned stop: 2 s to run, not its whole length
    (1.0, 1),       # just at the limit: the least deadline, its pods still run
    (0.9, None),    # less than that: no pod (parallelism 0), ended DeadlineExceeded at once
    (-3600.0, None),  # released an hour after its planned stop (a grid event's hold outlasted it)
])
@pytest.mark.parametrize(("workload", "nodes"), [
    ("job", 1), ("jobset", 1), ("kueue", 1), ("kueue", 2)])
def test_a_held_piece_released_late_keeps_its_planned_stop(workload, nodes, left, deadline,
                                                           emulator_kubeconfig):
    """A pausing piece released after its planned start (the release pass late, or a grid
    event's hold let go): the Job's ``startTime`` is set at the release (under Kueue, at the
    admission that follows at once on the emulator), so ``activeDeadlineSeconds`` counted its
    whole length from there and the piece ran past its planned end, over its next piece's hours.
    The release sets it to the time left to the planned stop (on a JobSet, its child Jobs'),
    and with none left no pod runs."""
    now = datetime.now(UTC).replace(microsecond=0)
    start = now - timedelta(hours=1)
    req = _req(start=start, end=start + timedelta(minutes=12), deadline=now + timedelta(days=1),
               pieces=2, gpus=nodes, nodes=nodes, payload=JobPayload(command="sleep 3000"))
    stop = req.end - timedelta(seconds=CHECKPOINT_SIGNAL_LEAD_S)   # 10 min after its start
    ctx, queue = EMULATED[workload]
    a = KubernetesAdapter(ctx, NS, kubeconfig=str(emulator_kubeconfig), workload=workload,
                          queue=queue)
    a.submit(req)
    try:
        obj, _ = _stop_of(a, req)
        res = resource_for(workload, nodes)
        long_run = {"metadata": {"annotations": {"emulator.carbonsched.io/run-seconds": "3000"}}}
        Target(a.kubeconfig, a.context, NS, workload, None, True).raw() \
            .patch_namespaced_custom_object(res.group, res.version, NS, res.plural,
                                            obj["metadata"]["name"], long_run)
        a.clock = lambda: stop - timedelta(seconds=left)
        assert a.release(req.key) is True
        obj, specs = _stop_of(a, req)
        assert specs and obj["metadata"]["annotations"]["carbonsched.io/stop-at"] == \
            stop.strftime("%Y-%m-%dT%H:%M:%SZ")
        if deadline is not None:
            assert [(sp["activeDeadlineSeconds"], sp.get("parallelism", 1)) for sp in specs] \
                == [(deadline, 1)] * len(specs)
            if workload == "kueue":   # queued to Kueue, which admitted and unsuspended it
                assert obj["metadata"]["labels"][KUEUE_QUEUE_LABEL] == queue
            running = _poll(lambda: a.status([req.key])[req.key],
                            lambda j: j.state is not JobState.DISPATCHED, "started")
            if deadline > 1:
                assert running.state is JobState.RUNNING and _runs(a, req) == nodes
            # the emulator ends it at its deadline: at the planned stop, not 600 s later
            over = _poll(lambda: a.status([req.key])[req.key],
                         lambda j: j.state is JobState.FAILED, "ended at its planned stop")
            assert over.reason is ReasonCode.DEADLINE_PASSED, over
            assert (over.actual_end - over.actual_start).total_seconds() == deadline
        else:
            assert [(sp["activeDeadlineSeconds"], sp["parallelism"]) for sp in specs] == [
                (1, 0)] * len(specs)
            if workload == "kueue":   # no pod runs: never queued to Kueue, takes no quota
                assert KUEUE_QUEUE_LABEL not in obj["metadata"]["labels"]
            over = _poll(lambda: a.status([req.key])[req.key],
                         lambda j: j.state is JobState.FAILED, "ended at once")
            assert over.reason is ReasonCode.DEADLINE_PASSED, over
            assert _runs(a, req) == 0
        assert obj["spec"]["suspend"] is False   # under Kueue: admitted and unsuspended
        assert a.release(req.key) is False       # released once
    finally:
        a.cancel(req.key)


@pytest.mark.parametrize("site", ["us-ny-newyork", "sg-singapore"])
def test_a_late_release_after_the_planned_stop_is_recorded_failed_never_ran(
        site, store, emulator_kubeconfig):
    """Through the release pass and the outbox: a pausing piece whose release comes after its
    planned stop runs no pod (it never ran over the next piece's hours) and is recorded
    Failed/DeadlinePassed, its work still owed; before, it was recorded Succeeded/Paused
    ("stopped at its planned end; piece 2 resumes from the checkpoint"), a checkpoint it never
    wrote, and the job showed no missing piece. A Job (``us-ny-newyork``) runs none with
    ``parallelism: 0``; a Volcano Job (``sg-singapore``) keeps its pods gated."""
    from carbonsched.catalog import load_catalog
    from carbonsched.config import Settings
    from carbonsched.dispatch.outbox import (
        build_adapters,
        dispatch_plan,
        refresh_status,
        release_due,
    )

    fmt = "%Y-%m-%dT%H:%M:%SZ"
    prefix = uuid.uuid4().hex[:8]
    start = datetime.now(UTC).replace(microsecond=0)
    nxt = start + timedelta(hours=2)
    late = start + timedelta(hours=1, minutes=30)    # the first piece ended at start + 1 h
    doc = {"plan_id": uuid.uuid4().hex, "date": start.strftime("%Y-%m-%d"), "catalog": "global",
           "signal_quality": "measured", "solver": {"name": "t", "status": "optimal",
                                                     "seconds": 0.0},
           "totals": {"energy_kwh": 0.0, "emissions_kg": 0.0, "baseline_emissions_kg": 0.0},
           "unplaced": [], "inference": [], "placements": [
               {"job_id": f"{prefix}-p", "piece": n, "site": site, "start": s.strftime(fmt),
                "end": (s + timedelta(hours=1)).strftime(fmt), "gpu_type": "A100", "gpus": 1,
                "energy_kwh": 1.0, "emissions_kg": 0.1,
                "deadline": (start + timedelta(days=1)).strftime(fmt)}
               for n, s in ((0, start), (1, nxt))]}
    store.save_plan(doc)
    settings = Settings(kubeconfig=emulator_kubeconfig)
    assert dispatch_plan(store, doc["plan_id"], settings=settings,
                         clock=lambda: start).counts == {"submitted": 2}
    adapters = build_adapters(load_catalog("global"), settings=settings)
    adapters[site].clock = lambda: late
    assert release_due(store, "global", adapters=adapters, clock=lambda: late) == [
        f"{prefix}-p#0"]
    a = adapters[site]
    name = job_name(f"{prefix}-p", 0)
    if a.workload == "job":
        obj = Target(str(emulator_kubeconfig), a.context, NS, "job", None, True).raw() \
            .get_namespaced_custom_object("batch", "v1", NS, "jobs", name)
        assert (obj["spec"]["parallelism"], obj["spec"]["activeDeadlineSeconds"]) == (0, 1)
    else:
        assert a.workload == "volcano"
        assert [(_gated(p), p["status"]["phase"]) for p in _pods_of(a, name)] == [
            (True, "Pending")]
    rec = _poll(lambda: refresh_status(store, "global", plan_id=doc["plan_id"],
                                       adapters=adapters).set_index("key").loc[f"{prefix}-p#0"],
                lambda r: r.state in ("Succeeded", "Failed"), "the piece over")
    assert (rec.state, rec.reason) == ("Failed", "DeadlinePassed"), rec.detail
    assert rec.detail.startswith("piece 1 of 2 never ran after its release or resume: "
                                 "released"), rec.detail
    assert "its work is still owed" in rec.detail
    for n in (0, 1):
        adapters[site].cancel(f"{prefix}-p#{n}")


def _pods_of(a: KubernetesAdapter, name: str) -> list[dict]:
    """The pods of Volcano Job ``name`` (label ``volcano.sh/job-name``), by name."""
    from kubernetes import client, config

    api = client.CoreV1Api(config.new_client_from_config(a.kubeconfig, context=a.context))
    pods = api.list_namespaced_pod(NS, label_selector=f"volcano.sh/job-name={name}").items
    return sorted((api.api_client.sanitize_for_serialization(p) for p in pods),
                  key=lambda p: p["metadata"]["name"])


def _gated(pod: dict) -> bool:
    return any(g["name"] == HOLD_GATE for g in pod["spec"].get("schedulingGates") or [])


@pytest.mark.parametrize(("left", "deadline"), [
    (2.0, 2),       # released late, 2 s before its planned stop: 2 s to run, not its whole length
    (1.0, 1),       # just at the limit: the least deadline, its pods still run
    (0.9, None),    # less than that: no pod may start (1 s would run past the stop): left gated
    (-3600.0, None),  # released an hour after its planned stop (a grid event's hold outlasted it)
])
@pytest.mark.parametrize("nodes", [1, 2])
def test_a_held_volcano_piece_released_late_keeps_its_planned_stop(nodes, left, deadline,
                                                                   emulator_kubeconfig):
    """A Volcano Job has no suspend: held by its pods' scheduling gate, each pod made with the
    piece's whole ``activeDeadlineSeconds``, counted from that pod's start. Released late, its
    pods ran that whole length from the release, past the planned stop (over the next piece's
    hours). The release sets each pod's deadline, in the patch that removes its gate, to the
    time left; with none left its pods stay gated and it reads stopped at its planned end."""
    now = datetime.now(UTC).replace(microsecond=0)
    start = now - timedelta(hours=1)
    req = _req(start=start, end=start + timedelta(minutes=12), deadline=now + timedelta(days=1),
               pieces=2, gpus=nodes, nodes=nodes, payload=JobPayload(command="sleep 3000"))
    stop = req.end - timedelta(seconds=CHECKPOINT_SIGNAL_LEAD_S)   # 10 min after its start
    ctx, queue = EMULATED["volcano"]
    a = KubernetesAdapter(ctx, NS, kubeconfig=str(emulator_kubeconfig), workload="volcano",
                          queue=queue)
    a.submit(req)
    name = job_name(req.job_id, req.piece)
    raw = Target(a.kubeconfig, ctx, NS, "volcano", queue, True).raw()
    try:
        raw.patch_namespaced_custom_object(
            VOLCANO_JOB.group, VOLCANO_JOB.version, NS, VOLCANO_JOB.plural, name,
            {"metadata": {"annotations": {"emulator.carbonsched.io/run-seconds": "3000"}}})
        # made held, each pod bounded by the piece's whole length (600 s) from its own start
        assert [(p["spec"]["activeDeadlineSeconds"], _gated(p)) for p in _pods_of(a, name)] \
            == [(600, True)] * nodes
        released_at = stop - timedelta(seconds=left)
        a.clock = lambda: released_at
        assert a.release(req.key) is True
        pods = _pods_of(a, name)
        if deadline is not None:
            assert [(p["spec"]["activeDeadlineSeconds"], _gated(p)) for p in pods] == [
                (deadline, False)] * nodes
            running = _poll(lambda: a.status([req.key])[req.key],
                            lambda j: j.state is not JobState.DISPATCHED, "started")
            if deadline > 1:
                assert running.state is JobState.RUNNING
                assert [p["status"]["phase"] for p in _pods_of(a, name)] == ["Running"] * nodes
            # the kubelet (emulated) stops each pod at its deadline from its own startTime: at
            # the planned stop, not 600 s later; the Job fails (its pods did), read as stopped
            over = _poll(lambda: a.status([req.key])[req.key],
                         lambda j: j.state is JobState.FAILED, "ended at its planned stop")
            assert (over.reason, over.raw_state) == (ReasonCode.DEADLINE_PASSED, "failed"), over
            assert (over.actual_end - over.actual_start).total_seconds() == deadline
            assert [(p["status"]["phase"], p["status"]["reason"],
                     parse_time(p["status"]["startTime"])) for p in _pods_of(a, name)] == [
                ("Failed", "DeadlineExceeded", over.actual_start)] * nodes
        else:
            # left gated: no pod is bound, none runs, none ever started
            assert [(p["spec"]["activeDeadlineSeconds"], _gated(p), p["status"]["phase"],
                     p["status"].get("startTime")) for p in pods] == [
                (600, True, "Pending", None)] * nodes
            over = a.status([req.key])[req.key]
            assert (over.state, over.reason, over.raw_state) == (
                JobState.FAILED, ReasonCode.DEADLINE_PASSED, NEVER_RAN), over
            assert (over.actual_start, over.actual_end) == (None, released_at.replace(
                microsecond=0))
            obj = raw.get_namespaced_custom_object(VOLCANO_JOB.group, VOLCANO_JOB.version, NS,
                                                   VOLCANO_JOB.plural, name)
            assert obj["metadata"]["annotations"][RELEASED_PAST_STOP] == released_at.strftime(
                "%Y-%m-%dT%H:%M:%SZ")
            assert obj["status"]["state"]["phase"] == "Pending"
            got = a.unhold(req.key, req.start, released_at)   # a grid event's release: no-op
            assert got.outcome is WorkOutcome.ALREADY, got
        obj = raw.get_namespaced_custom_object(VOLCANO_JOB.group, VOLCANO_JOB.version, NS,
                                               VOLCANO_JOB.plural, name)
        assert obj["metadata"]["annotations"]["carbonsched.io/stop-at"] == stop.strftime(
            "%Y-%m-%dT%H:%M:%SZ")
        assert a.release(req.key) is False       # released once
    finally:
        a.cancel(req.key)


def test_the_emulator_checks_a_pod_update_as_the_api_server_does(emulator_kubeconfig):
    """A pod update may lower ``spec.activeDeadlineSeconds`` (to 1 at the least) or keep it,
    never raise it, remove it or set it out of range, nor add a scheduling gate or change
    another ``spec`` field (``ValidatePodUpdate``; Kubernetes "Pods", "Pod update and
    replacement"); the patched pod is checked against the upstream Pod schema."""
    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException

    ctx, queue = EMULATED["volcano"]
    a = KubernetesAdapter(ctx, NS, kubeconfig=str(emulator_kubeconfig), workload="volcano",
                          queue=queue)
    req = _req(gpus=1, nodes=1)
    a.submit(req)
    core = client.CoreV1Api(config.new_client_from_config(a.kubeconfig, context=ctx))
    (pod,) = _pods_of(a, job_name(req.job_id, req.piece))
    name, made = pod["metadata"]["name"], pod["spec"]["activeDeadlineSeconds"]

    def patch(spec: dict) -> tuple[int, str]:
        try:
            got = core.patch_namespaced_pod(name, NS, {"spec": spec},
                                            _content_type="application/merge-patch+json")
        except ApiException as exc:
            return exc.status, json.loads(exc.body)["message"]
        return 200, str(got.spec.active_deadline_seconds)

    try:
        assert patch({"activeDeadlineSeconds": made + 1}) == (
            422, f'Pod "{name}" is invalid: spec.activeDeadlineSeconds: Invalid value: '
            f"{made + 1}: must be less than or equal to previous value")
        assert patch({"activeDeadlineSeconds": None})[1].endswith(
            "must not update from a positive integer to nil value")
        assert patch({"activeDeadlineSeconds": 0})[1].endswith(
            "Invalid value: 0: must be between 1 and 2147483647, inclusive")
        status, msg = patch({"activeDeadlineSeconds": "5"})
        assert status == 422 and "spec.activeDeadlineSeconds: '5' is not of type" in msg
        assert patch({"schedulingGates": [{"name": HOLD_GATE}, {"name": "x.io/more"}]})[1] \
            .endswith("Forbidden: only deletion is allowed, but found new scheduling gate "
                      "'x.io/more'")
        assert "pod updates may not change fields other than" in patch(
            {"restartPolicy": "OnFailure"})[1]
        assert patch({"activeDeadlineSeconds": made}) == (200, str(made))   # kept: allowed
        assert patch({"activeDeadlineSeconds": 1}) == (200, "1")            # lowered to 1
        (pod,) = _pods_of(a, job_name(req.job_id, req.piece))
        assert pod["spec"]["activeDeadlineSeconds"] == 1 and _gated(pod)
        assert pod["metadata"]["ownerReferences"][0]["kind"] == "Job"
    finally:
        a.cancel(req.key)


ADMIT_AT = "emulator.carbonsched.io/admit-at"
"""The emulator's test hook: Kueue admits the object's Workload at that instant, not before."""
SCHEDULE_AT = "emulator.carbonsched.io/schedule-at"
"""The emulator's test hook: Volcano binds the Volcano Job's ungated gang at that instant, not
before (its pods' ``startTime``)."""
FMT = "%Y-%m-%dT%H:%M:%SZ"


def _queued_piece(nodes: int, stop: datetime, admit_at: datetime
                  ) -> tuple[KubernetesAdapter, DispatchRequest]:
    """A pausing Kueue piece stopping at ``stop`` (10 min after its start), submitted held,
    whose Workload Kueue admits at ``admit_at`` (the emulator's hook), run long."""
    start = stop - timedelta(minutes=10)
    req = _req(start=start, end=start + timedelta(minutes=12), deadline=stop + timedelta(days=1),
               pieces=2, gpus=nodes, nodes=nodes, payload=JobPayload(command="sleep 3000"))
    assert req.end - timedelta(seconds=CHECKPOINT_SIGNAL_LEAD_S) == stop
    ctx, queue = EMULATED["kueue"]
    a = KubernetesAdapter(ctx, NS, kubeconfig=os.environ["CARBONSCHED_KUBECONFIG"],
                          workload="kueue", queue=queue)
    a.submit(req)
    res = resource_for("kueue", nodes)
    Target(a.kubeconfig, a.context, NS, "kueue", None, True).raw() \
        .patch_namespaced_custom_object(res.group, res.version, NS, res.plural,
                                        job_name(req.job_id, req.piece), {"metadata": {
                                            "annotations": {
                                                "emulator.carbonsched.io/run-seconds": "3000",
                                                ADMIT_AT: admit_at.strftime(FMT)}}})
    return a, req


def _started_at(a: KubernetesAdapter, req: DispatchRequest) -> list[str]:
    """``status.startTime`` of the Jobs that bound the run (the Job, or a JobSet's children)."""
    raw = Target(a.kubeconfig, a.context, a.namespace, a.workload, None, True).raw()
    obj, _ = _stop_of(a, req)
    if obj["kind"] == "Job":
        return [(obj.get("status") or {}).get("startTime")]
    return [(c.get("status") or {}).get("startTime") for c in raw.list_namespaced_custom_object(
        "batch", "v1", NS, "jobs", label_selector="jobset.sigs.k8s.io/jobset-name="
        f"{obj['metadata']['name']}")["items"]]


def _sleep_until(t: datetime) -> None:
    time.sleep(max(0.0, (t - datetime.now(UTC)).total_seconds()))


@pytest.mark.parametrize(("wait_s", "deadline"), [
    (4, 4),   # admitted 4 s after its release, 4 s before its stop: 4 s to run, not 8
    (7, 1),   # admitted exactly 1 s before its stop: the least deadline, its pods still run
])
@pytest.mark.parametrize("nodes", [1, 2])   # a Kueue Job; a Kueue JobSet (child Jobs bound)
def test_a_piece_kueue_admits_late_ends_at_its_planned_stop(nodes, wait_s, deadline,
                                                              emulator_kubeconfig):
    """Released 8 s before its planned stop, a pausing piece waits in Kueue's queue; the Job
    controller sets ``startTime`` at Kueue's admission, so the deadline set at the release
    (8 s) counted from there and the piece ran ``wait_s`` past its stop, into its next
    piece's hours. The release pass's bound lowers it to the stop less the admission: the run
    ends ``DeadlineExceeded`` at its planned stop."""
    release = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=1)
    stop = release + timedelta(seconds=8)
    admitted = release + timedelta(seconds=wait_s)
    a, req = _queued_piece(nodes, stop, admitted)
    try:
        a.clock = lambda: release
        assert a.release(req.key) is True
        _, specs = _stop_of(a, req)
        assert [sp["activeDeadlineSeconds"] for sp in specs] == [8] * len(specs)
        assert a.keep_planned_stops([req.key]) == {}      # queued, its stop ahead: untouched
        assert a.status([req.key])[req.key].state is JobState.DISPATCHED
        _sleep_until(admitted)
        a.clock = lambda: datetime.now(UTC)
        done = a.keep_planned_stops([req.key])           # the release pass after the admission
        passed = datetime.now(UTC)   # the pass's patch was made by now
        assert _started_at(a, req) == [admitted.strftime(FMT)] * len(specs)
        _, specs = _stop_of(a, req)
        assert [(sp["activeDeadlineSeconds"], sp.get("parallelism", 1)) for sp in specs] == [
            (deadline, 1)] * len(specs)
        assert f"activeDeadlineSeconds: {deadline} (started at {admitted.strftime(FMT)}: its " \
            "planned stop at" in done[req.key]
        assert a.keep_planned_stops([req.key]) == {}      # bounded once
        over = _poll(lambda: a.status([req.key])[req.key],
                     lambda j: j.state is JobState.FAILED, "ended at its planned stop")
        assert over.reason is ReasonCode.DEADLINE_PASSED, over
        assert over.actual_start == admitted
        # at its planned stop; a pass that came after the stop (a loaded machine) ends it at
        # once, at that pass (to the second the emulator writes), never a wait later
        assert over.actual_end == stop or stop < over.actual_end <= passed.replace(
            microsecond=0) + timedelta(seconds=1), (over.actual_end, stop, passed)
    finally:
        a.cancel(req.key)


@pytest.mark.parametrize("nodes", [1, 2])
def test_a_piece_still_queued_at_its_planned_stop_runs_no_pod(nodes, emulator_kubeconfig):
    """Known bad: released 100 s before its stop, the piece is still in Kueue's queue when its
    stop passes; Kueue admits it 8 s later. Before, it then ran its whole 100 s from the
    admission, all after its planned stop; now the release pass after the stop sets
    ``parallelism: 0`` and the least deadline on the queued Job (or its child Jobs), so when
    Kueue admits it no pod runs and it ends ``DeadlineExceeded`` at once."""
    now = datetime.now(UTC).replace(microsecond=0)
    stop = now - timedelta(seconds=30)
    admitted = now + timedelta(seconds=8)   # the pass below comes well before it
    a, req = _queued_piece(nodes, stop, admitted)
    try:
        a.clock = lambda: stop - timedelta(seconds=100)
        assert a.release(req.key) is True
        obj, specs = _stop_of(a, req)
        assert obj["spec"]["suspend"] is True and obj["metadata"]["labels"][KUEUE_QUEUE_LABEL]
        assert [sp["activeDeadlineSeconds"] for sp in specs] == [100] * len(specs)
        a.clock = lambda: datetime.now(UTC)               # the next pass: after its stop
        done = a.keep_planned_stops([req.key])
        assert "not admitted by Kueue by its planned stop: " in done[req.key]
        assert "parallelism: 0, activeDeadlineSeconds: 1" in done[req.key]
        obj, specs = _stop_of(a, req)
        assert obj["spec"]["suspend"] is True             # still queued: Kueue admits it
        assert [(sp["activeDeadlineSeconds"], sp["parallelism"]) for sp in specs] == [
            (1, 0)] * len(specs)
        assert a.keep_planned_stops([req.key]) == {}      # withdrawn once
        over = _poll(lambda: a.status([req.key])[req.key],
                     lambda j: j.state is JobState.FAILED, "ended at its admission")
        assert over.reason is ReasonCode.DEADLINE_PASSED, over
        assert (over.actual_start, over.actual_end) == (admitted,
                                                        admitted + timedelta(seconds=1))
        assert _runs(a, req) == 0
    finally:
        a.cancel(req.key)


def test_a_piece_admitted_after_its_stop_before_a_pass_ends_at_that_pass(emulator_kubeconfig):
    """The limit left: Kueue admits the piece after its stop and before any release pass saw it
    queued, so its pod starts; the next pass sets the least deadline, which has passed, and the
    Job controller ends it ``DeadlineExceeded`` at that pass, not its 100 s later."""
    now = datetime.now(UTC).replace(microsecond=0)
    stop = now - timedelta(seconds=30)
    admitted = now + timedelta(seconds=1)
    a, req = _queued_piece(1, stop, admitted)
    try:
        a.clock = lambda: stop - timedelta(seconds=100)
        assert a.release(req.key) is True
        _sleep_until(admitted)
        running = _poll(lambda: a.status([req.key])[req.key],
                        lambda j: j.state is not JobState.DISPATCHED, "admitted")
        assert running.state is JobState.RUNNING and _runs(a, req) == 1
        a.clock = lambda: datetime.now(UTC)
        done = a.keep_planned_stops([req.key])
        assert "after its planned stop at" in done[req.key]
        _, specs = _stop_of(a, req)
        assert [sp["activeDeadlineSeconds"] for sp in specs] == [1]
        over = _poll(lambda: a.status([req.key])[req.key],
                     lambda j: j.state is JobState.FAILED, "ended at the pass")
        assert over.reason is ReasonCode.DEADLINE_PASSED, over
        assert over.actual_start == admitted
        assert (over.actual_end - over.actual_start).total_seconds() < 100
    finally:
        a.cancel(req.key)


def test_the_release_pass_keeps_a_queued_kueue_piece_within_its_stop(store,
                                                                     emulator_kubeconfig):
    """Through the release pass and the outbox: a pausing Kueue piece released before its stop
    is still queued when the stop passes; the next release pass withdraws it (no pod when
    Kueue admits it), says so in the row, and the piece, which ran nothing, is recorded
    Failed/DeadlinePassed, its work still owed (before: Succeeded/Paused, stopped at its
    planned end, a checkpoint it never wrote)."""
    from carbonsched.catalog import load_catalog
    from carbonsched.config import Settings
    from carbonsched.dispatch.outbox import (
        build_adapters,
        dispatch_plan,
        dispatch_records,
        refresh_status,
        release_due,
    )

    site, prefix = "us-pjm-ashburn", uuid.uuid4().hex[:8]
    now = datetime.now(UTC).replace(microsecond=0)
    start = now - timedelta(hours=1)
    stop = start + timedelta(hours=1) - timedelta(seconds=CHECKPOINT_SIGNAL_LEAD_S)
    doc = {"plan_id": uuid.uuid4().hex, "date": start.strftime("%Y-%m-%d"), "catalog": "global",
           "signal_quality": "measured", "solver": {"name": "t", "status": "optimal",
                                                     "seconds": 0.0},
           "totals": {"energy_kwh": 0.0, "emissions_kg": 0.0, "baseline_emissions_kg": 0.0},
           "unplaced": [], "inference": [], "placements": [
               {"job_id": f"{prefix}-p", "piece": n, "site": site, "start": s.strftime(FMT),
                "end": (s + timedelta(hours=1)).strftime(FMT), "gpu_type": "A100", "gpus": 1,
                "energy_kwh": 1.0, "emissions_kg": 0.1,
                "deadline": (start + timedelta(days=1)).strftime(FMT)}
               for n, s in ((0, start), (1, start + timedelta(hours=2)))]}
    store.save_plan(doc)
    settings = Settings(kubeconfig=emulator_kubeconfig)
    assert dispatch_plan(store, doc["plan_id"], settings=settings,
                         clock=lambda: start).counts == {"submitted": 2}
    adapters = build_adapters(load_catalog("global"), settings=settings)
    raw = Target(str(emulator_kubeconfig), EMULATED["kueue"][0], NS, "kueue", None, True).raw()
    name = job_name(f"{prefix}-p", 0)
    admitted = now + timedelta(seconds=2)
    raw.patch_namespaced_custom_object("batch", "v1", NS, "jobs", name, {"metadata": {
        "annotations": {ADMIT_AT: admitted.strftime(FMT)}}})
    before = stop - timedelta(minutes=5)
    adapters[site].clock = lambda: before
    assert release_due(store, "global", adapters=adapters, clock=lambda: before) == [
        f"{prefix}-p#0"]
    adapters[site].clock = lambda: datetime.now(UTC)
    assert release_due(store, "global", adapters=adapters) == []
    obj = raw.get_namespaced_custom_object("batch", "v1", NS, "jobs", name)
    assert (obj["spec"]["suspend"], obj["spec"]["parallelism"],
            obj["spec"]["activeDeadlineSeconds"]) == (True, 0, 1)
    row = dispatch_records(store, doc["plan_id"]).set_index("key").loc[f"{prefix}-p#0"]
    assert row.detail.startswith("bounded by its planned stop at "), row.detail
    assert f"jobs/{name} not admitted by Kueue by its planned stop: parallelism: 0" in row.detail
    rec = _poll(lambda: refresh_status(store, "global", plan_id=doc["plan_id"],
                                       adapters=adapters).set_index("key").loc[f"{prefix}-p#0"],
                lambda r: r.state in ("Succeeded", "Failed"), "the piece over")
    assert (rec.state, rec.reason) == ("Failed", "DeadlinePassed"), rec.detail
    assert rec.detail.startswith("piece 1 of 2 never ran after its release or resume: "
                                 "released or resumed at "), rec.detail
    assert "its work is still owed" in rec.detail
    for n in (0, 1):
        adapters[site].cancel(f"{prefix}-p#{n}")


def _waiting_gang(nodes: int, stop: datetime, scheduled: datetime
                  ) -> tuple[KubernetesAdapter, DispatchRequest, str]:
    """A pausing Volcano piece stopping at ``stop`` (10 min after its start), submitted held,
    whose gang Volcano schedules at ``scheduled`` (the emulator's hook), run long; with the
    Volcano Job's name."""
    start = stop - timedelta(minutes=10)
    req = _req(start=start, end=start + timedelta(minutes=12), deadline=stop + timedelta(days=1),
               pieces=2, gpus=nodes, nodes=nodes, payload=JobPayload(command="sleep 3000"))
    assert req.end - timedelta(seconds=CHECKPOINT_SIGNAL_LEAD_S) == stop
    ctx, queue = EMULATED["volcano"]
    a = KubernetesAdapter(ctx, NS, kubeconfig=os.environ["CARBONSCHED_KUBECONFIG"],
                          workload="volcano", queue=queue)
    a.submit(req)
    name = job_name(req.job_id, req.piece)
    Target(a.kubeconfig, ctx, NS, "volcano", queue, True).raw().patch_namespaced_custom_object(
        VOLCANO_JOB.group, VOLCANO_JOB.version, NS, VOLCANO_JOB.plural, name, {"metadata": {
            "annotations": {"emulator.carbonsched.io/run-seconds": "3000",
                            SCHEDULE_AT: scheduled.strftime(FMT)}}})
    return a, req, name


@pytest.mark.parametrize(("wait_s", "deadline"), [
    (4, 4),   # scheduled 4 s after its release, 4 s before its stop: 4 s to run, not 8
    (7, 1),   # scheduled exactly 1 s before its stop: the least deadline, its pods still run
])
@pytest.mark.parametrize("nodes", [1, 2])
def test_a_volcano_gang_scheduled_late_ends_at_its_planned_stop(nodes, wait_s, deadline,
                                                               emulator_kubeconfig):
    """Released 8 s before its planned stop, a pausing piece's gang waits for Volcano to
    schedule it; the kubelet sets each pod's ``startTime`` when it takes the bound pod, so the
    deadline the release set (8 s) counted from there and the gang ran ``wait_s`` past its
    stop, into its next piece's hours. The release pass lowers each started pod's deadline to
    the stop less its start: the pods end ``DeadlineExceeded`` at the planned stop."""
    release = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=1)
    stop = release + timedelta(seconds=8)
    scheduled = release + timedelta(seconds=wait_s)
    a, req, name = _waiting_gang(nodes, stop, scheduled)
    try:
        a.clock = lambda: release
        assert a.release(req.key) is True
        assert [(p["spec"]["activeDeadlineSeconds"], _gated(p)) for p in _pods_of(a, name)] \
            == [(8, False)] * nodes
        assert a.keep_planned_stops([req.key]) == {}      # waiting, its stop ahead: untouched
        assert a.status([req.key])[req.key].state is JobState.DISPATCHED
        _sleep_until(scheduled)
        a.clock = lambda: datetime.now(UTC)
        done = a.keep_planned_stops([req.key])           # the release pass after the binding
        passed = datetime.now(UTC)   # the pass's patches were made by now
        pods = _pods_of(a, name)
        assert [(parse_time(p["status"]["startTime"]), p["spec"]["activeDeadlineSeconds"])
                for p in pods] == [(scheduled, deadline)] * nodes
        assert done[req.key].startswith(f"jobs/{name} scheduled by Volcano: pod {name}-")
        assert done[req.key].count(f"activeDeadlineSeconds: {deadline} (started at "
                                   f"{scheduled.strftime(FMT)}: its planned stop at "
                                   f"{stop.strftime(FMT)} less its start)") == nodes
        assert a.keep_planned_stops([req.key]) == {}      # bounded once
        over = _poll(lambda: a.status([req.key])[req.key],
                     lambda j: j.state is JobState.FAILED, "ended at its planned stop")
        assert (over.reason, over.raw_state) == (ReasonCode.DEADLINE_PASSED, "failed"), over
        assert over.actual_start == scheduled
        # at its planned stop; a pass that came after the stop (a loaded machine) ends it at
        # once, at that pass (to the second the emulator writes), never a wait later
        assert over.actual_end == stop or stop < over.actual_end <= passed.replace(
            microsecond=0) + timedelta(seconds=1), (over.actual_end, stop, passed)
        assert [(p["status"]["phase"], p["status"]["reason"]) for p in _pods_of(a, name)] == [
            ("Failed", "DeadlineExceeded")] * nodes
    finally:
        a.cancel(req.key)


@pytest.mark.parametrize("early_s", [0.0, 0.5])   # the pass at the stop; less than 1 s before
@pytest.mark.parametrize("nodes", [1, 2])
def test_a_volcano_gang_unscheduled_at_its_planned_stop_never_runs(nodes, early_s,
                                                                   emulator_kubeconfig):
    """The limit: released 100 s before its stop, the gang is still unscheduled when the
    release pass comes at its stop (or less than the least deadline before it), and Volcano
    would bind it exactly at the stop. Before, its pods then ran their 100 s, all after the
    planned stop; now the pass annotates the Job released-past-stop and deletes its pods,
    which Volcano makes again from the template, gated: no pod runs, it reads
    Failed/DeadlinePassed, never ran, and no later release ungates it."""
    stop = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=3)
    a, req, name = _waiting_gang(nodes, stop, stop)     # scheduled exactly at its stop
    try:
        a.clock = lambda: stop - timedelta(seconds=100)
        assert a.release(req.key) is True
        assert [(p["spec"]["activeDeadlineSeconds"], _gated(p)) for p in _pods_of(a, name)] \
            == [(100, False)] * nodes
        at = stop - timedelta(seconds=early_s)
        a.clock = lambda: at
        done = a.keep_planned_stops([req.key])
        assert done[req.key].startswith(
            f"jobs/{name} not scheduled by Volcano by its planned stop at "
            f"{stop.strftime(FMT)}: annotated {RELEASED_PAST_STOP}; pods {name}-"), done
        assert a.keep_planned_stops([req.key]) == {}      # withdrawn once
        assert a.release(req.key) is False                # and never released again
        _sleep_until(stop + timedelta(seconds=2))        # past the instant Volcano would bind
        pods = _pods_of(a, name)
        assert [(_gated(p), p["status"]["phase"], p["status"].get("startTime"))
                for p in pods] == [(True, "Pending", None)] * nodes
        over = a.status([req.key])[req.key]
        assert (over.state, over.reason, over.raw_state) == (
            JobState.FAILED, ReasonCode.DEADLINE_PASSED, NEVER_RAN), over
        assert (over.actual_start, over.actual_end) == (None, at.replace(microsecond=0))
    finally:
        a.cancel(req.key)


def test_a_volcano_gang_scheduled_after_its_stop_before_a_pass_ends_at_that_pass(
        emulator_kubeconfig):
    """The limit left: Volcano binds the gang after its stop and before any release pass saw
    it waiting, so its pods start; the next pass sets the least deadline, which has passed,
    and the kubelet stops each pod ``DeadlineExceeded`` at that pass (its sync of the updated
    pod), not 100 s later."""
    now = datetime.now(UTC).replace(microsecond=0)
    stop = now - timedelta(seconds=30)
    scheduled = now + timedelta(seconds=3)   # after the release below
    a, req, name = _waiting_gang(2, stop, scheduled)
    try:
        a.clock = lambda: stop - timedelta(seconds=100)
        assert a.release(req.key) is True
        _sleep_until(scheduled)
        running = _poll(lambda: a.status([req.key])[req.key],
                        lambda j: j.state is not JobState.DISPATCHED, "scheduled")
        assert running.state is JobState.RUNNING
        _sleep_until(scheduled + timedelta(seconds=3))   # well past startTime + 1 s
        a.clock = lambda: datetime.now(UTC)
        pass_at = datetime.now(UTC)
        done = a.keep_planned_stops([req.key])
        passed = datetime.now(UTC)
        assert done[req.key].count("after its planned stop at") == 2, done
        assert [p["spec"]["activeDeadlineSeconds"] for p in _pods_of(a, name)] == [1, 1]
        over = _poll(lambda: a.status([req.key])[req.key],
                     lambda j: j.state is JobState.FAILED, "ended at the pass")
        assert over.reason is ReasonCode.DEADLINE_PASSED, over
        assert over.actual_start == scheduled
        # stopped at the pass (the kubelet's sync of the update), not at its startTime + 1 s
        # before it, nor its 100 s later
        assert pass_at.replace(microsecond=0) <= over.actual_end <= passed.replace(
            microsecond=0) + timedelta(seconds=1), (over.actual_end, pass_at, passed)
    finally:
        a.cancel(req.key)


def test_the_release_pass_keeps_a_late_volcano_gang_within_its_stop(store,
                                                                   emulator_kubeconfig):
    """Through the release pass and the outbox: a pausing Volcano piece released before its
    stop is still unscheduled when the stop passes; the next release pass withdraws it (no pod
    runs whenever Volcano would bind it), says so in the row, and the piece, which ran
    nothing, is recorded Failed/DeadlinePassed, its work still owed."""
    from carbonsched.catalog import load_catalog
    from carbonsched.config import Settings
    from carbonsched.dispatch.outbox import (
        build_adapters,
        dispatch_plan,
        dispatch_records,
        refresh_status,
        release_due,
    )

    site, prefix = "sg-singapore", uuid.uuid4().hex[:8]
    now = datetime.now(UTC).replace(microsecond=0)
    start = now - timedelta(hours=1)
    stop = start + timedelta(hours=1) - timedelta(seconds=CHECKPOINT_SIGNAL_LEAD_S)
    doc = {"plan_id": uuid.uuid4().hex, "date": start.strftime("%Y-%m-%d"), "catalog": "global",
           "signal_quality": "measured", "solver": {"name": "t", "status": "optimal",
                                                     "seconds": 0.0},
           "totals": {"energy_kwh": 0.0, "emissions_kg": 0.0, "baseline_emissions_kg": 0.0},
           "unplaced": [], "inference": [], "placements": [
               {"job_id": f"{prefix}-p", "piece": n, "site": site, "start": s.strftime(FMT),
                "end": (s + timedelta(hours=1)).strftime(FMT), "gpu_type": "A100", "gpus": 1,
                "energy_kwh": 1.0, "emissions_kg": 0.1,
                "deadline": (start + timedelta(days=1)).strftime(FMT)}
               for n, s in ((0, start), (1, start + timedelta(hours=2)))]}
    store.save_plan(doc)
    settings = Settings(kubeconfig=emulator_kubeconfig)
    assert dispatch_plan(store, doc["plan_id"], settings=settings,
                         clock=lambda: start).counts == {"submitted": 2}
    adapters = build_adapters(load_catalog("global"), settings=settings)
    a = adapters[site]
    assert a.workload == "volcano"
    raw = Target(str(emulator_kubeconfig), a.context, NS, "volcano", None, True).raw()
    name = job_name(f"{prefix}-p", 0)
    raw.patch_namespaced_custom_object(
        VOLCANO_JOB.group, VOLCANO_JOB.version, NS, VOLCANO_JOB.plural, name, {"metadata": {
            "annotations": {SCHEDULE_AT: (now + timedelta(seconds=5)).strftime(FMT)}}})
    before = stop - timedelta(minutes=5)
    a.clock = lambda: before
    assert release_due(store, "global", adapters=adapters, clock=lambda: before) == [
        f"{prefix}-p#0"]
    assert [(_gated(p), p["spec"]["activeDeadlineSeconds"]) for p in _pods_of(a, name)] == [
        (False, 300)]
    a.clock = lambda: datetime.now(UTC)
    assert release_due(store, "global", adapters=adapters) == []
    row = dispatch_records(store, doc["plan_id"]).set_index("key").loc[f"{prefix}-p#0"]
    assert row.detail.startswith("bounded by its planned stop at "), row.detail
    assert f"jobs/{name} not scheduled by Volcano by its planned stop at " in row.detail
    assert [(_gated(p), p["status"]["phase"]) for p in _pods_of(a, name)] == [
        (True, "Pending")]
    rec = _poll(lambda: refresh_status(store, "global", plan_id=doc["plan_id"],
                                       adapters=adapters).set_index("key").loc[f"{prefix}-p#0"],
                lambda r: r.state in ("Succeeded", "Failed"), "the piece over")
    assert (rec.state, rec.reason) == ("Failed", "DeadlinePassed"), rec.detail
    assert rec.detail.startswith("piece 1 of 2 never ran after its release or resume: "
                                 "released at "), rec.detail
    assert "its work is still owed" in rec.detail
    for n in (0, 1):
        adapters[site].cancel(f"{prefix}-p#{n}")


def _api_requests(a: KubernetesAdapter) -> list[tuple[str, str, int | None]]:
    """Record each HTTP request the adapter's API client sends from now on, at its transport
    (urllib3's pool manager): ``(method, path without the namespace prefix, items listed)``,
    items being the length of a list answer's ``items`` (None for any other answer)."""
    a._custom()
    pm = a._core.api_client.rest_client.pool_manager
    sent: list[tuple[str, str, int | None]] = []
    real = pm.request

    def request(method, url, *args, **kw):
        r = real(method, url, *args, **kw)
        try:
            items = len(json.loads(r.data)["items"])
        except (ValueError, KeyError, TypeError):
            items = None
        sent.append((method, url.split("?")[0].split(f"/namespaces/{a.namespace}/")[-1], items))
        return r

    pm.request = request
    return sent


def _lists(sent: list[tuple[str, str, int | None]]) -> list[str]:
    """The collections listed (a GET without an object's name), in order."""
    return [path for method, path, _ in sent if method == "GET" and "/" not in path]


PASS_N = 20


@pytest.mark.parametrize(("workload", "nodes", "listed"), [
    ("kueue", 2, ["jobs", "jobsets", "jobs"]),   # our Jobs and JobSets; every child Job once
    ("kueue", 1, ["jobs", "jobsets"]),
    ("volcano", 2, ["jobs", "pods"]),            # our Volcano Jobs; our pods once
])
def test_a_release_pass_over_many_pieces_lists_each_kind_once(workload, nodes, listed,
                                                              emulator_kubeconfig):
    """The release pass (every minute) bounds each released piece by its planned stop. Known
    bad: under Kueue it listed each JobSet's child Jobs with a call of its own, twice for one
    still queued at its stop, so a site with N live JobSets cost N (2N) list calls a minute.
    Now one pass over 20 pieces still queued (or unscheduled) at their stop lists each kind
    once, however many pieces, reads no object one by one, and writes only the bounds: each
    piece withdrawn as with one piece (no pod runs whenever it is admitted or scheduled)."""
    now = datetime.now(UTC).replace(microsecond=0)
    stop = now - timedelta(seconds=30)
    later = now + timedelta(hours=1)            # Kueue admits, Volcano binds, only then
    made = [_queued_piece(nodes, stop, later) if workload == "kueue"
            else _waiting_gang(nodes, stop, later)[:2] for _ in range(PASS_N)]
    a, reqs = made[0][0], [r for _, r in made]
    keys = [r.key for r in reqs]
    try:
        a.clock = lambda: stop - timedelta(seconds=100)
        for r in reqs:
            assert a.release(r.key) is True
        a.clock = lambda: datetime.now(UTC)     # the next pass: after their stop
        sent = _api_requests(a)
        done = a.keep_planned_stops(keys)
        assert set(done) == set(keys), done
        if workload == "kueue":
            assert all("not admitted by Kueue by its planned stop: " in d
                       and "parallelism: 0, activeDeadlineSeconds: 1" in d
                       for d in done.values()), done
            writes = PASS_N * (1 + (nodes if nodes > 1 else 0))   # the object, child Jobs
            assert [m for m, _, _ in sent if m != "GET"] == ["PATCH"] * writes
        else:
            assert all(" not scheduled by Volcano by its planned stop at " in d
                       for d in done.values()), done
            assert sorted(m for m, _, _ in sent if m != "GET") == (
                ["DELETE"] * (PASS_N * nodes) + ["PATCH"] * PASS_N)   # pods; the annotation
        assert _lists(sent) == listed, sent
        assert [s for s in sent if s[0] == "GET" and "/" in s[1]] == []   # no read one by one
        sent.clear()
        assert a.keep_planned_stops(keys) == {}           # withdrawn once
        assert _lists(sent) == listed and [m for m, _, _ in sent if m != "GET"] == [], sent
        if workload == "kueue":
            for r in reqs:
                _, specs = _stop_of(a, r)
                assert [(sp["activeDeadlineSeconds"], sp["parallelism"]) for sp in specs] == [
                    (1, 0)] * len(specs)
    finally:
        for k in keys:
            a.cancel(k)


def test_a_status_read_of_many_jobsets_stopped_at_their_deadline_lists_child_jobs_once(
        emulator_kubeconfig):
    """A JobSet's ``Failed`` condition does not say why; the status read tells a run stopped
    at its deadline by its child Jobs. Known bad: it listed each failed JobSet's child Jobs
    with a call of its own. Now a read of 8 JobSets, each released after its planned stop
    (no pod runs, its child Jobs end ``DeadlineExceeded``), lists JobSets and Jobs once
    each, and every one still reads Failed/DeadlinePassed, never ran."""
    ctx, _ = EMULATED["jobset"]
    a = KubernetesAdapter(ctx, NS, kubeconfig=str(emulator_kubeconfig), workload="jobset")
    now = datetime.now(UTC).replace(microsecond=0)
    reqs = [_req(start=now, end=now + timedelta(hours=1), deadline=now + timedelta(days=1),
                 pieces=2, gpus=2, nodes=2) for _ in range(8)]
    try:
        for r in reqs:
            a.submit(r)
        a.clock = lambda: now + timedelta(hours=2)    # after their planned stop
        for r in reqs:
            assert a.release(r.key) is True
        keys = [r.key for r in reqs]
        _poll(lambda: a.status(keys), lambda st: all(
            j.state is JobState.FAILED for j in st.values()) and len(st) == len(keys), "over")
        sent = _api_requests(a)
        st = a.status(keys)
        assert {(j.state, j.reason, j.raw_state) for j in st.values()} == {
            (JobState.FAILED, ReasonCode.DEADLINE_PASSED, NEVER_RAN)} and set(st) == set(keys)
        assert _lists(sent) == ["jobsets", "jobs"] and len(sent) == 2, sent
    finally:
        for r in reqs:
            a.cancel(r.key)


@pytest.mark.parametrize(("workload", "nodes", "most"), [
    ("job", 1, 1), ("kueue", 1, 1),
    ("kueue", 2, 5),       # its child Jobs carry its key hash: 2, the JobSet, 2 to bound
    ("volcano", 2, 3),     # the Volcano Job, its 2 pods
])
def test_a_release_reads_its_own_object_not_every_object_of_the_namespace(
        workload, nodes, most, emulator_kubeconfig):
    """The release pass releases each due key in turn (and asks again each minute for one
    still queued). Known bad: each release listed every object of ours in the namespace to
    find its own, so a pass over N keys read N x N objects. Now a release lists by the key's
    hash: among 20 held pieces, each release reads a few objects of its own, however many
    others there are, and releases its piece once."""
    ctx, queue = EMULATED[workload]
    a = KubernetesAdapter(ctx, NS, kubeconfig=str(emulator_kubeconfig), workload=workload,
                          queue=queue)
    now = datetime.now(UTC).replace(microsecond=0)
    reqs = [_req(start=now, end=now + timedelta(hours=1), deadline=now + timedelta(days=1),
                 gpus=nodes, nodes=nodes) for _ in range(PASS_N)]
    try:
        for r in reqs:
            a.submit(r)
        a.clock = lambda: now
        sent = _api_requests(a)
        for r in reqs:
            before = len(sent)
            assert a.release(r.key) is True
            mine = sent[before:]
            assert sum(n or 0 for _, _, n in mine) <= most, mine
            assert len(_lists(mine)) <= len(RESOURCES[workload]) + (nodes > 1), mine
        assert [a.release(r.key) for r in reqs] == [False] * PASS_N   # released once
    finally:
        for r in reqs:
            a.cancel(r.key)


def _post(t: Target, body: dict):
    import httpx

    g, v = body["apiVersion"].split("/")
    plural = "jobsets" if body["kind"] == "JobSet" else "jobs"
    return httpx.post(f"{_server(t)}/apis/{g}/{v}/namespaces/{t.namespace}/{plural}", json=body)


class _Bad(KubernetesAdapter):
    """An adapter whose objects carry a field their CRD does not have."""

    def manifest(self, req):
        m = super().manifest(req)
        if m["kind"] == "JobSet":
            m["spec"]["replicatedJobs"][0]["gpusPerNode"] = req.gpus_per_node
        else:
            m["spec"]["gang"] = req.nodes
        return m


@pytest.mark.parametrize("kind", ["jobset", "volcano", "kueue"])
def test_an_object_its_crd_refuses_is_a_rejection_with_the_crds_message(
        kind, emulator_kubeconfig):
    ctx, queue = EMULATED[kind]
    bad = _Bad(ctx, NS, kubeconfig=emulator_kubeconfig, workload=kind, queue=queue)
    where = "spec.replicatedJobs[0].gpusPerNode" if kind != "volcano" else "spec.gang"
    with pytest.raises(BackendRejectedError, match="create refused \\(400\\).*strict decoding "
                       f'error: unknown field "{where}"'.replace("[", "\\[").replace("]", "\\]")):
        bad.submit(_req())
    ok = KubernetesAdapter(ctx, NS, kubeconfig=emulator_kubeconfig, workload=kind, queue=queue)
    assert bad.status() == ok.status()  # nothing was created by the refused request


def test_crd_values_are_checked_with_known_bad_and_just_at_the_limit_cases(emulator_kubeconfig):
    vol = Target(str(emulator_kubeconfig), "ap-singapore", NS, "volcano", "default", True)
    js = Target(str(emulator_kubeconfig), "ap-tokyo", NS, "jobset", None, True)
    m = vol.adapter().manifest(_req())
    m["spec"]["policies"] = [{"event": "NodeOnFire", "action": "RestartJob"}]
    r = _post(vol, m)
    assert r.status_code == 422 and r.json()["reason"] == "Invalid"
    # the enum is the CRD's own (batch.volcano.sh_jobs.yaml)
    assert ('spec.policies[0].event: Unsupported value: "NodeOnFire": supported values: "*", '
            '"PodPending", "PodRunning", "PodFailed", "PodEvicted"') in r.json()["message"]
    m = vol.adapter().manifest(_req())
    m["spec"]["minAvailable"] = 3  # the gang has 2 pods
    r = _post(vol, m)
    assert r.status_code == 422 and "job 'minAvailable' should not be greater than total " \
        "replicas in tasks (2)" in r.json()["message"]
    m = vol.adapter().manifest(_req())
    m["spec"]["minAvailable"] = 2  # exactly the gang: accepted
    m["metadata"]["name"] = limit_name = f"lim-{uuid.uuid4().hex[:8]}"
    assert _post(vol, m).status_code == 201
    m = vol.adapter().manifest(_req())
    m["spec"]["queue"] = "nowhere"
    r = _post(vol, m)
    assert r.status_code == 422 and 'queues.scheduling.volcano.sh "nowhere" not found' in \
        r.json()["message"]
    m = js.adapter().manifest(_req())
    m["spec"]["replicatedJobs"][0]["replicas"] = "two"
    r = _post(js, m)
    assert r.status_code == 422 and ('spec.replicatedJobs[0].replicas: Invalid value: "two": '
                                     "spec.replicatedJobs[0].replicas in body must be of type "
                                     "integer") in r.json()["message"]
    # JobSet's child Job names <jobset>-node-<index> are DNS-1035 labels of <= 63 characters
    m = js.adapter().manifest(_req())
    name = f"j{uuid.uuid4().hex}".ljust(63 - len("-node-1"), "j")
    m["metadata"]["name"] = name
    assert _post(js, m).status_code == 201  # 63 exactly
    m["metadata"]["name"] = name + "j"
    r = _post(js, m)
    assert r.status_code == 422 and "must be DNS-1035 labels of at most 63" in r.json()["message"]
    js.raw().delete_namespaced_custom_object(JOBSET.group, JOBSET.version, NS, JOBSET.plural,
                                             name)
    vol.raw().delete_namespaced_custom_object(VOLCANO_JOB.group, VOLCANO_JOB.version, NS,
                                              VOLCANO_JOB.plural, limit_name)


def test_kueue_takes_the_queue_name_only_on_a_suspended_object_and_reports_a_missing_queue(
        emulator_kubeconfig):
    t = Target(str(emulator_kubeconfig), "us-east-va", NS, "kueue", "gpu-batch", True)
    m = t.adapter().manifest(_req(nodes=1))
    m["spec"]["suspend"] = False
    m["metadata"]["labels"][KUEUE_QUEUE_LABEL] = "gpu-batch"
    r = _post(t, m)
    assert r.status_code == 422 and "suspend should be true when adding the queue name" in \
        r.json()["message"]
    lost = KubernetesAdapter("us-east-va", NS, kubeconfig=emulator_kubeconfig, workload="kueue",
                             queue="no-such-queue")
    req = _req()
    lost.submit(req)
    assert lost.release(req.key)
    got = lost.status([req.key])[req.key]
    assert (got.state, got.reason, got.raw_state) == (JobState.DISPATCHED, ReasonCode.SUBMITTED,
                                                      "queued")
    assert got.detail == ("queued in Kueue LocalQueue 'no-such-queue': Inadmissible: LocalQueue "
                          "no-such-queue doesn't exist")
    lost.cancel(req.key)


def test_the_pai_trace_day_gangs_land_as_each_kind_validated_against_its_crd(
        global_plan_doc, emulator_kubeconfig):
    """Every multi-GPU gang of the PAI-trace day on ``global`` as a multi-node workload of each
    kind. Node shape: 2 GPUs per node (an assumption until the catalogs declare node shapes);
    the planner places the day's gangs on the Slurm hubs and Frankfurt, so each gang is
    re-targeted to the Kueue, JobSet and Volcano sites. The emulator refuses any object its CRD
    does not accept, so each create is the validation."""
    from .helpers import future_plan

    doc = future_plan(global_plan_doc)
    gangs = [p for p in doc["placements"] if p["gpus"] >= 4]
    assert len(gangs) >= 5  # the day has gangs of 4 and 8 GPUs
    for kind in ("kueue", "jobset", "volcano"):
        t = Target(str(emulator_kubeconfig), *EMULATED[kind][:1], NS, kind, EMULATED[kind][1],
                   True)
        a = t.adapter()
        reqs = []
        for p in gangs:
            reqs.append(DispatchRequest(
                plan_id=doc["plan_id"], job_id=p["job_id"], piece=0, site="us-ny-newyork",
                start=datetime.fromisoformat(p["start"].replace("Z", "+00:00")),
                end=datetime.fromisoformat(p["end"].replace("Z", "+00:00")),
                deadline=datetime.fromisoformat((p.get("deadline") or p["end"]).replace(
                    "Z", "+00:00")), gpu_type=p["gpu_type"], gpus=p["gpus"],
                nodes=p["gpus"] // 2))
        for r in reqs:
            assert a.submit(r).raw_state == "suspended"
        for r in reqs:
            obj = t.get(r)
            if kind == "volcano":
                assert obj["spec"]["minAvailable"] == r.nodes == obj["spec"]["tasks"][0][
                    "replicas"]
            else:
                assert obj["kind"] == "JobSet"
                assert obj["spec"]["replicatedJobs"][0]["replicas"] == r.nodes
            assert a.release(r.key)
        if kind == "kueue":
            wls = t.raw().list_namespaced_custom_object(
                KUEUE_WORKLOAD.group, KUEUE_WORKLOAD.version, NS, KUEUE_WORKLOAD.plural)["items"]
            owners = {w["metadata"]["ownerReferences"][0]["name"]: w for w in wls}
            for r in reqs:
                wl = owners[job_name(r.job_id, 0)]
                assert wl["spec"]["podSets"][0]["count"] == r.nodes
                assert any(c["type"] == "Admitted" and c["status"] == "True"
                           for c in wl["status"]["conditions"])
        st = a.status([r.key for r in reqs])
        # released gangs run; the emulator runs each for 2 s, so on a loaded machine an early one
        # may already be over by the time the last is released (no wall-clock budget here)
        assert set(st) == {r.key for r in reqs}
        assert {v.state for v in st.values()} <= {JobState.RUNNING, JobState.SUCCEEDED}, st
        for r in reqs:
            a.cancel(r.key)


# -- offline: the status mapping -------------------------------------------------------------------

def _cond(t, s="True", reason="R", message="", at="2027-01-01T00:00:00Z"):
    return {"type": t, "status": s, "reason": reason, "message": message,
            "lastTransitionTime": at}


@pytest.mark.parametrize(("phase", "reason", "state", "code"), [
    ("Pending", "", JobState.DISPATCHED, ReasonCode.SUBMITTED),
    ("Running", "", JobState.RUNNING, ReasonCode.STARTED),
    ("Completing", "", JobState.RUNNING, ReasonCode.STARTED),
    ("Completed", "", JobState.SUCCEEDED, ReasonCode.COMPLETED),
    ("Restarting", "PodEvicted", JobState.DISPATCHED, ReasonCode.EVICTED),
    ("Aborted", "Preempted", JobState.DISPATCHED, ReasonCode.PREEMPTED),
    ("Aborting", "", JobState.DISPATCHED, ReasonCode.EVICTED),
    ("Terminated", "PodEvicted", JobState.FAILED, ReasonCode.EVICTED),
    ("Failed", "PodFailed", JobState.FAILED, ReasonCode.BACKEND_FAILED),
])
def test_every_volcano_phase_maps_to_a_state_and_reason(phase, reason, state, code):
    obj = {"status": {"state": {"phase": phase, "reason": reason, "message": "m",
                                "lastTransitionTime": "2027-01-01T01:00:00Z"},
                      "conditions": [{"status": "Running",
                                      "lastTransitionTime": "2027-01-01T00:00:00Z"}]}}
    r = read_volcano(obj, gated=False)
    assert (r.state, r.reason) == (state, code)
    if state is JobState.SUCCEEDED:
        assert r.end == datetime(2027, 1, 1, 1, tzinfo=UTC)
    if reason:
        assert reason in r.detail


@pytest.mark.parametrize(("phase", "state"), [
    ("Pending", JobState.FAILED), ("Restarting", JobState.FAILED),
    ("Aborted", JobState.FAILED),
    ("Running", JobState.RUNNING), ("Completed", JobState.SUCCEEDED)])
def test_a_volcano_job_released_past_its_stop_reads_never_ran_unless_it_ran(phase, state):
    """Marked :data:`RELEASED_PAST_STOP` (its pods left gated): Failed, DeadlinePassed, raw
    :data:`NEVER_RAN` (before: raw ``failed``, which the outbox took for a pausing piece's
    stop at its planned end) while Volcano shows no run; a phase that shows a run is the
    cluster's word."""
    obj = {"metadata": {"annotations": {RELEASED_PAST_STOP: "2027-01-01T02:00:00Z"}},
           "status": {"state": {"phase": phase}}}
    r = read_volcano(obj, gated=True)
    assert r.state is state
    if state is JobState.FAILED:
        assert (r.reason, r.raw, r.start, r.end) == (
            ReasonCode.DEADLINE_PASSED, NEVER_RAN, None, datetime(2027, 1, 1, 2, tzinfo=UTC))
        assert not r.held and "and none ran (DeadlineExceeded)" in r.detail


def test_jobset_and_kueue_conditions_map_with_the_clusters_reason():
    js = {"spec": {"suspend": False}, "status": {"conditions": [
        _cond("Suspended", "False", "ResumeJobs", at="2027-01-01T00:00:00Z"),
        _cond("Failed", "True", "FailedJobs", "jobset failed: pod evicted",
              at="2027-01-01T00:05:00Z")]}}
    r = read_jobset(js)
    assert (r.state, r.reason) == (JobState.FAILED, ReasonCode.EVICTED)
    assert (r.start, r.end) == (datetime(2027, 1, 1, tzinfo=UTC),
                                datetime(2027, 1, 1, 0, 5, tzinfo=UTC))
    held = read_jobset({"spec": {"suspend": True}, "status": {}})
    assert held.held and held.raw == "suspended"
    # released to Kueue, Workload evicted for a reason other than preemption
    wl = {"status": {"conditions": [_cond("Evicted", "True", "PodsReadyTimeout", "too slow"),
                                    _cond("Admitted", "False")]}}
    r = read_kueue(held, True, "q", wl)
    assert (r.state, r.reason, r.raw) == (JobState.DISPATCHED, ReasonCode.EVICTED, "evicted")
    assert "PodsReadyTimeout: too slow" in r.detail
    # a finished object wins over a stale Workload condition: success is the object's word
    done = read_jobset({"spec": {}, "status": {"conditions": [_cond("Completed")]}})
    assert read_kueue(done, True, "q", wl).state is JobState.SUCCEEDED
    assert read_kueue(held, False, "q", None).held  # not yet given to Kueue: carbonsched's hold


def test_resources_per_kind_and_adapter_names_keep_kinds_apart():
    assert resource_for("kueue", 1) is JOB and resource_for("kueue", 2) is JOBSET
    assert resource_for("volcano", 1) is VOLCANO_JOB and resource_for("jobset", 1) is JOBSET
    with pytest.raises(ValueError, match="unknown Kubernetes workload 'mpi'"):
        KubernetesAdapter("c", "ns", workload="mpi")
    with pytest.raises(ValueError, match="needs the LocalQueue name"):
        KubernetesAdapter("c", "ns", workload="kueue")
    assert KubernetesAdapter("c", "ns").name == "kubernetes:c/ns"
    assert KubernetesAdapter("c", "ns", workload="jobset").name == "kubernetes:c/ns[jobset]"
    rendered = json.loads(KubernetesAdapter("c", "ns", workload="volcano").render(_req()))
    assert rendered["spec"]["queue"] == "default" and rendered["spec"]["maxRetry"] == 0
