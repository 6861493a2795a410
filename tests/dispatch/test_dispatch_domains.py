"""Network domains at dispatch (issue 37 item 2): a topology-bound gang carries its span to the
cluster: Slurm ``--switches=<max_domains>`` (sbatch(1), Slurm 22.05), Kueue topology-aware
scheduling annotations on its pod templates (``kueue.x-k8s.io/podset-required-topology`` for
one domain, ``podset-preferred-topology`` for more)."""

from __future__ import annotations

import os
import re
import subprocess
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from carbonsched.adapters.dispatch.kubernetes import (
    KUEUE_PREFERRED_TOPOLOGY,
    KUEUE_REQUIRED_TOPOLOGY,
    KubernetesAdapter,
)
from carbonsched.adapters.dispatch.slurm import SlurmAdapter
from carbonsched.catalog import load_catalog
from carbonsched.dispatch.outbox import (
    _request_from_row,
    _request_json,
    dispatch_plan,
    plan_requests,
)
from carbonsched.store.models import DispatchRow

from .helpers import one_plan

GLOBAL = load_catalog("global")


def _placement(job_id: str, gpus: int, max_domains: int | None, site: str = "ca-on-toronto",
               start: datetime | None = None, command: str = "") -> dict:
    start = start or datetime.now(UTC).replace(microsecond=0, second=0) + timedelta(days=2)
    p = {"job_id": job_id, "site": site, "start": start, "end": start + timedelta(hours=1),
         "gpu_type": "A100", "gpus": gpus, "command": command}
    if max_domains is not None:
        p["max_domains"] = max_domains
    return p


def _switches(argv: list[str]) -> list[str]:
    return [a for a in argv if a.startswith("--switches")]


@pytest.mark.parametrize(("gpus", "span", "expect"), [
    (16, 2, ["--switches=2"]),      # two nodes, at most two leaf switches
    (16, 1, ["--switches=1"]),
    (16, None, []),                 # no topology constraint: no hint
    (8, 1, []),                     # one node is in one domain anyway
])
def test_the_sbatch_line_carries_the_span(gpus, span, expect):
    (req,) = plan_requests(one_plan([_placement("j", gpus, span)]), GLOBAL)
    assert req.max_domains == span
    be = GLOBAL.site("ca-on-toronto").backend
    _tz, argv = SlurmAdapter(be.cluster, partition=be.partition).sbatch_argv(req)
    assert _switches(argv) == expect


def test_the_outbox_keeps_the_span():
    (req,) = plan_requests(one_plan([_placement("j", 16, 2)]), GLOBAL)
    back = _request_from_row(DispatchRow(key=req.key, request_json=_request_json(req)))
    assert back.max_domains == 2 and back == req


def _k8s_req(max_domains: int | None, nodes: int = 2):
    (req,) = plan_requests(one_plan([_placement("k", 16, max_domains)]), GLOBAL)
    import dataclasses

    return dataclasses.replace(req, site="us-pjm-ashburn", nodes=nodes)


def _pod_annotations(obj: dict) -> list[dict]:
    if obj["kind"] == "JobSet":
        return [rj["template"]["spec"]["template"].get("metadata", {}).get("annotations", {})
                for rj in obj["spec"]["replicatedJobs"]]
    return [obj["spec"]["template"].get("metadata", {}).get("annotations", {})]


@pytest.mark.parametrize(("workload", "span", "nodes", "expect"), [
    ("kueue", 1, 2, {KUEUE_REQUIRED_TOPOLOGY: "rack.example/leaf"}),
    ("kueue", 2, 2, {KUEUE_PREFERRED_TOPOLOGY: "rack.example/leaf"}),
    ("kueue", None, 2, {}),
    ("kueue", 1, 1, {}),            # one pod on one node: nothing to keep together
    ("jobset", 1, 2, {}),           # Kueue's annotations only where Kueue admits the object
])
def test_kueue_pods_carry_the_topology_request(workload, span, nodes, expect):
    a = KubernetesAdapter("ctx", "ns", workload=workload,
                          queue="q" if workload == "kueue" else None,
                          topology_label="rack.example/leaf")
    obj = a.manifest(_k8s_req(span, nodes))
    for ann in _pod_annotations(obj):
        got = {k: v for k, v in ann.items() if k.startswith("kueue.x-k8s.io/podset")}
        assert got == expect


def test_a_kueue_gang_with_its_topology_request_is_created_on_the_emulator(emulator_kubeconfig):
    """The JobSet of a same-domain gang, created through the API (the emulator serves the
    CRDs of ../shared/data/k8s-crds), comes back with the annotation on its pod template."""
    a = KubernetesAdapter("us-east-va", "carbonsched", kubeconfig=str(emulator_kubeconfig),
                          workload="kueue", queue="gpu-batch",
                          topology_label="cloud.provider.com/topology-block")
    import dataclasses

    req = dataclasses.replace(_k8s_req(1), job_id=f"dom-{uuid.uuid4().hex[:8]}")
    a.submit(req)
    try:
        from kubernetes import client, config

        api = client.CustomObjectsApi(config.new_client_from_config(
            str(emulator_kubeconfig), context="us-east-va"))
        from carbonsched.adapters.dispatch.kubernetes import job_name

        obj = api.get_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", "carbonsched",
                                               "jobsets", job_name(req.job_id, req.piece))
        assert [a_.get(KUEUE_REQUIRED_TOPOLOGY) for a_ in _pod_annotations(obj)] == [
            "cloud.provider.com/topology-block"]
    finally:
        a.cancel(req.key)


@pytest.mark.slurm
def test_a_gang_with_a_span_is_accepted_by_slurm_with_its_switches(store, settings, slurm_dir):
    """sbatch accepts ``--switches`` and slurmctld records it on the job (``scontrol show job``:
    ``Switches=2``), on the real cluster of the catalog's Toronto site."""
    prefix = uuid.uuid4().hex[:8]
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(days=2)
    doc = one_plan([_placement(f"{prefix}-span", 16, 2, start=start)])
    store.save_plan(doc)
    assert dispatch_plan(store, doc["plan_id"], settings=settings).counts == {"submitted": 1}
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    with Session(store.engine) as s:
        (row,) = s.scalars(select(DispatchRow)).all()
    job_id = row.backend_id.split(":")[1]
    env = {**os.environ, "SLURM_CONF": str(slurm_dir / "ontario" / "slurm.conf")}
    deadline = time.monotonic() + 120
    fields: dict[str, str] = {}
    while time.monotonic() < deadline:
        out = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True,
                             text=True, env=env)
        fields = dict(re.findall(r"(\w+)=(\S+)", out.stdout))
        if fields:
            break
        time.sleep(0.2)
    try:
        assert fields.get("Switches", "").split("@")[0] == "2", fields
        assert fields["NumNodes"].split("-")[0] == "2"
    finally:
        subprocess.run(["scancel", job_id], check=True, env=env)
