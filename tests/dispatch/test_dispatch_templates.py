"""A job naming a catalog template, per backend kind (issue 33, Done-when "a template").

The shipped ``global`` catalog's ``llm-pretrain`` template (image, argv command, workdir, env) is
applied as planning applies it (:func:`carbonsched.workload.schema.apply_templates`, what
``carbonsched plan --jobs`` runs before the solve), carried in a plan placement's ``payload``
and turned into requests by :func:`carbonsched.dispatch.outbox.plan_requests`; each backend kind
then shows the template's fields with the job's own winning: the Slurm sbatch line and batch
script, and the pod template of each Kubernetes kind's object as the emulator keeps it (after
validating it against the kind's CRD).
"""

from __future__ import annotations

import shlex
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from carbonsched.adapters.dispatch.k8s_workloads import VOLCANO_JOB, resource_for
from carbonsched.adapters.dispatch.kubernetes import job_name
from carbonsched.catalog import load_catalog
from carbonsched.dispatch.outbox import build_adapters, plan_requests
from carbonsched.domain import JobState
from carbonsched.workload.schema import JobSpec, apply_templates

CAT = load_catalog("global")
SITES = {s.id: s for s in CAT.sites}
START = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) + timedelta(days=2)
FMT = "%Y-%m-%dT%H:%M:%SZ"
TEMPLATE = CAT.templates["llm-pretrain"]
OWN_WORKDIR = "/scratch/pretrain-7"
OWN_ENV = {"RUN_NAME": "pretrain-7", "NCCL_DEBUG": "INFO"}  # NCCL_DEBUG overrides the template's


def _site_of(kind: str, workload: str | None = None) -> str:
    return next(s.id for s in CAT.sites if s.backend.kind == kind
                and (workload is None or s.backend.workload == workload))


def _templated_plan(site: str) -> tuple[dict, str]:
    """A plan with one A100 job of ``template: llm-pretrain`` (workdir and one env overridden)
    placed at ``site``, the payload as planning writes it."""
    job_id = f"tmpl-{uuid.uuid4().hex[:8]}"
    spec = JobSpec.model_validate({
        "id": job_id, "gpu_type": "A100", "gpus": 1, "duration_hours": 1,
        "power_per_gpu_kw": 0.8, "earliest_start": START.strftime(FMT),
        "deadline": (START + timedelta(hours=6)).strftime(FMT),
        "template": "llm-pretrain", "workdir": OWN_WORKDIR, "env": OWN_ENV})
    (job,) = apply_templates([spec.to_job()], CAT.templates)
    placement = {"job_id": job_id, "site": site, "start": START.strftime(FMT),
                 "end": (START + timedelta(hours=1)).strftime(FMT), "gpu_type": "A100",
                 "gpus": 1, "energy_kwh": 0.8, "emissions_kg": 0.2,
                 "deadline": (START + timedelta(hours=6)).strftime(FMT),
                 "payload": job.payload.to_dict()}
    return {"plan_id": f"plan-{job_id}", "placements": [placement]}, job_id


def _expected_env() -> dict[str, str]:
    return {**TEMPLATE["env"], **OWN_ENV}


def test_the_template_and_the_jobs_own_fields_reach_the_placement_payload():
    doc, _ = _templated_plan(_site_of("slurm"))
    payload = doc["placements"][0]["payload"]
    assert payload["template"] == "llm-pretrain"
    assert payload["image"] == TEMPLATE["image"] and payload["command"] == TEMPLATE["command"]
    assert payload["workdir"] == OWN_WORKDIR  # the job's own field wins
    assert payload["env"] == _expected_env()  # env maps merged, the job's value wins


def test_slurm_sbatch_line_and_script_show_the_template_with_the_jobs_fields_winning(settings):
    site = _site_of("slurm")
    doc, job_id = _templated_plan(site)
    (req,) = plan_requests(doc, CAT)
    adapter = build_adapters(CAT, settings=settings)[site]
    _, argv = adapter.sbatch_argv(req)
    assert f"--chdir={OWN_WORKDIR}" in argv  # the job's workdir, not the template's /workspace
    assert f"--container-image={TEMPLATE['image']}" in argv  # pyxis, the template's image
    assert "--gres=gpu:A100:1" in argv and "--export=NONE" in argv
    script = adapter.batch_script(req)
    lines = script.splitlines()
    assert lines[0] == "#!/bin/sh"
    exports = {ln.split("=", 1)[0].removeprefix("export "): shlex.split(ln.split("=", 1)[1])[0]
               for ln in lines if ln.startswith("export ")}
    assert {k: exports[k] for k in _expected_env()} == _expected_env()
    assert exports["CARBONSCHED_JOB_ID"] == job_id
    assert lines[-1] == shlex.join(TEMPLATE["command"])  # the template's argv, as the body


@pytest.mark.parametrize("workload", ["job", "kueue", "jobset", "volcano"])
def test_each_kubernetes_kind_pod_template_shows_the_template_with_the_jobs_fields_winning(
        settings, workload):
    from kubernetes import client, config

    site = _site_of("kubernetes", workload)
    doc, job_id = _templated_plan(site)
    (req,) = plan_requests(doc, CAT)
    adapter = build_adapters(CAT, settings=settings)[site]
    assert adapter.submit(req).state == JobState.DISPATCHED
    try:
        be = SITES[site].backend
        res = resource_for(workload, req.nodes)
        api = client.CustomObjectsApi(config.new_client_from_config(
            str(settings.kubeconfig), context=be.context))
        obj = api.get_namespaced_custom_object(res.group, res.version, be.namespace,
                                               res.plural, job_name(job_id, 0))
        spec = obj["spec"]
        if obj["kind"] == "JobSet":
            pods = [rj["template"]["spec"]["template"]["spec"] for rj in spec["replicatedJobs"]]
        elif obj["apiVersion"] == VOLCANO_JOB.api_version:
            pods = [t["template"]["spec"] for t in spec["tasks"]]
        else:
            pods = [spec["template"]["spec"]]
        assert pods
        for pod in pods:
            (c,) = pod["containers"]
            assert c["image"] == TEMPLATE["image"]
            assert c["command"] == TEMPLATE["command"]  # an argv list is the exec form
            assert c["workingDir"] == OWN_WORKDIR
            env = {e["name"]: e["value"] for e in c["env"]}
            assert {k: env[k] for k in _expected_env()} == _expected_env()
            assert env["CARBONSCHED_JOB_ID"] == job_id
            assert c["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    finally:
        adapter.cancel(req.key)
