"""A job's own pod template (``pod_template``) on its way to the cluster.

- the types :mod:`carbonsched.adapters.dispatch.k8s_podspec` checks are the real PodSpec's: the
  one the JobSet CRD of ``../shared/data/k8s-crds`` embeds (read by path, never copied), and what
  the check refuses that PodSpec refuses too;
- the template's ``metadata.labels`` and ``annotations`` reach the pods of every workload kind,
  carbonsched's own winning on a clash, and each kind's object still validates against its real
  schema (the CRDs; ``batch/v1`` Job against kubernetes-validate's), offline through the
  emulator's own validators (``scripts/kube_emulator.py``);
- a template that reaches the adapter without the job schema (a plan written by hand) is that
  unit's refusal, naming the job and the field, never an exception out of the adapter.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta

import pytest

from carbonsched.adapters.dispatch.base import DispatchRequest
from carbonsched.adapters.dispatch.k8s_podspec import (
    BOOLEAN,
    CONTAINER,
    INTEGER,
    OBJECT,
    OBJECTS,
    POD_SPEC,
    QUANTITIES,
    STRING,
    STRING_MAP,
    STRINGS,
    Field,
    pod_template_problem,
)
from carbonsched.adapters.dispatch.kubernetes import (
    KUEUE_REQUIRED_TOPOLOGY,
    MANAGED_BY,
    KubernetesAdapter,
)
from carbonsched.domain import JobPayload
from carbonsched.errors import BackendRejectedError
from tests.scriptload import load_script

T0 = datetime(2027, 3, 14, 6, 0, tzinfo=UTC)
CONTAINERS = [{"name": "job", "image": "busybox:1.36"}]
TEMPLATE = {
    "metadata": {"labels": {"team": "vision", MANAGED_BY: "someone-else"},
                 "annotations": {"example.com/owner": "vision team",
                                 KUEUE_REQUIRED_TOPOLOGY: "their-own-level"}},
    "spec": {"containers": [{"name": "job", "image": "busybox:1.36",
                             "env": [{"name": "N", "value": "8"}],
                             "resources": {"limits": {"memory": "8Gi"}}}],
             "nodeSelector": {"zone": "a"},
             "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
             "schedulingGates": [{"name": "example.com/quota"}]}}
"""A template carbonsched accepts, whose label and annotation clash with carbonsched's own."""

BAD = {
    "nodeSelector-list": {"spec": {"containers": CONTAINERS, "nodeSelector": ["zone-a"]}},
    "tolerations-map": {"spec": {"containers": CONTAINERS, "tolerations": {"key": "gpu"}}},
    "affinity-list": {"spec": {"containers": CONTAINERS, "affinity": ["zone-a"]}},
    "volumes-map": {"spec": {"containers": CONTAINERS, "volumes": {"name": "data"}}},
    "limits-list": {"spec": {"containers": [{**CONTAINERS[0],
                                             "resources": {"limits": ["nvidia.com/gpu"]}}]}},
    "env-map": {"spec": {"containers": [{**CONTAINERS[0], "env": {"N": "8"}}]}},
    "labels-int": {"metadata": {"labels": {"team": 7}}, "spec": {"containers": CONTAINERS}},
    "annotations-list": {"metadata": {"annotations": ["a"]}, "spec": {"containers": CONTAINERS}},
}
"""Templates of the wrong types (the job schema refuses each: tests/workload/test_schema.py)."""


def _req(template: dict, nodes: int = 1, **kw) -> DispatchRequest:
    return DispatchRequest(**{
        "plan_id": "p1", "job_id": "tmpl-1", "piece": 0, "site": "us-ny-newyork",
        "start": T0, "end": T0 + timedelta(hours=1), "deadline": T0 + timedelta(hours=2),
        "gpu_type": "A100", "gpus": 8 * nodes, "nodes": nodes,
        "payload": JobPayload(pod_template=template), **kw})


@pytest.fixture(scope="module")
def emu():
    """``scripts/kube_emulator.py`` as a module: its validators of the real schemas."""
    mod = load_script("scripts/kube_emulator.py", register=True)
    if not (mod.crd_dir() / "jobset.x-k8s.io_jobsets.yaml").exists():
        pytest.skip(f"the real CRDs are not at {mod.crd_dir()} (set CARBONSCHED_SHARED_DATA or "
                    "CARBONSCHED_K8S_CRDS)")
    return mod


@pytest.fixture(scope="module")
def pod_template_schema(emu) -> dict:
    """The JobSet CRD's PodTemplateSpec (``v1alpha2``), as the emulator validates it."""
    import yaml

    crd = yaml.safe_load((emu.crd_dir() / "jobset.x-k8s.io_jobsets.yaml").read_text())
    (v,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha2"]
    rj = v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["replicatedJobs"]
    return rj["items"]["properties"]["template"]["properties"]["spec"]["properties"]["template"]


def _kind_of(schema: dict):
    """The :class:`~carbonsched.adapters.dispatch.k8s_podspec.Kind` a CRD property has."""
    t = schema.get("type")
    if t == "array":
        return {"object": OBJECTS, "string": STRINGS}[schema["items"]["type"]]
    if t == "object" and "additionalProperties" in schema:
        extra = schema["additionalProperties"]
        return QUANTITIES if extra.get("x-kubernetes-int-or-string") else {
            "string": STRING_MAP}[extra["type"]]
    return {"object": OBJECT, "string": STRING, "integer": INTEGER, "boolean": BOOLEAN}[t]


def _agrees(fields: dict[str, Field], props: dict, path: str) -> list[str]:
    out = []
    for name, f in fields.items():
        if name not in props:
            out.append(f"{path}.{name}: not in the CRD")
            continue
        real = props[name]
        if _kind_of(real) is not f.kind:
            out.append(f"{path}.{name}: {f.kind.words}, the CRD says {_kind_of(real).words}")
        inner = real.get("items", real).get("properties", {})
        out += _agrees(f.fields, inner, f"{path}.{name}")
    return out


def test_the_checked_types_are_the_real_podspecs(pod_template_schema):
    """Every field of the table has the JobSet CRD's type, to the nesting the table checks,
    and the table knows every field of the CRD's PodSpec and Container."""
    spec = pod_template_schema["properties"]["spec"]
    container = spec["properties"]["containers"]["items"]
    assert _agrees(POD_SPEC, spec["properties"], "spec") == []
    assert set(POD_SPEC) == set(spec["properties"])
    assert set(CONTAINER) == set(container["properties"])
    meta = pod_template_schema["properties"]["metadata"]["properties"]
    assert _kind_of(meta["labels"]) is STRING_MAP and _kind_of(meta["annotations"]) is STRING_MAP


@pytest.mark.parametrize("name", BAD)
def test_what_the_check_refuses_the_real_podspec_refuses(emu, pod_template_schema, name):
    import jsonschema

    validator = jsonschema.Draft7Validator(emu.structural(pod_template_schema))
    assert pod_template_problem(BAD[name]) is not None
    assert list(validator.iter_errors(BAD[name])), f"the CRD accepts {name}"
    # at the limit: the same template with each field of its type passes both
    assert pod_template_problem(TEMPLATE) is None
    assert list(validator.iter_errors(TEMPLATE)) == []


def _pods(obj: dict) -> list[dict]:
    """Every pod template of an object, whatever its kind."""
    if obj["kind"] == "JobSet":
        return [rj["template"]["spec"]["template"] for rj in obj["spec"]["replicatedJobs"]]
    if "tasks" in obj["spec"]:
        return [t["template"] for t in obj["spec"]["tasks"]]
    return [obj["spec"]["template"]]


@pytest.mark.parametrize(("workload", "nodes", "kind"), [
    ("job", 1, "Job"), ("job", 2, "Job"), ("kueue", 1, "Job"), ("kueue", 2, "JobSet"),
    ("jobset", 2, "JobSet"), ("volcano", 2, "Volcano")])
def test_the_templates_labels_and_annotations_reach_every_kinds_pods(emu, workload, nodes,
                                                                     kind):
    """Before, only the template's spec was read: its metadata was dropped without a word."""
    a = KubernetesAdapter("ctx", "carbonsched", workload=workload,
                          queue="q" if workload in ("kueue", "volcano") else None,
                          topology_label="rack.example/leaf")
    req = _req(TEMPLATE, nodes, max_domains=1 if workload == "kueue" else None)
    obj = a.manifest(req)
    ours = a.metadata(req)["labels"]
    for pod in _pods(obj):
        labels, ann = pod["metadata"]["labels"], pod["metadata"]["annotations"]
        assert labels["team"] == "vision"
        assert labels[MANAGED_BY] == "carbonsched"        # carbonsched's own label wins
        assert labels["carbonsched.io/key-hash"] == ours["carbonsched.io/key-hash"]
        assert ann["example.com/owner"] == "vision team"
        # the Kueue topology request is carbonsched's (the plan's span), the template's not
        assert ann[KUEUE_REQUIRED_TOPOLOGY] == ("rack.example/leaf" if (workload, nodes) == (
            "kueue", 2) else "their-own-level")
        gates = [g["name"] for g in pod["spec"].get("schedulingGates", [])]
        assert gates[0] == "example.com/quota"            # the template's gate is kept
    # the object the API server would be sent still validates against its real schema
    if kind == "Job":
        assert emu.validate_job(obj) == []
    else:
        group, version = obj["apiVersion"].split("/")
        plural = "jobsets" if kind == "JobSet" else "jobs"
        _, validator = emu.crd_validator(group, version, plural)
        assert emu.schema_problems(obj, validator) == ([], [])
    assert TEMPLATE["metadata"]["labels"][MANAGED_BY] == "someone-else"  # the payload unchanged


def test_a_template_without_metadata_gives_the_pods_carbonscheds_labels_only():
    a = KubernetesAdapter("ctx", "carbonsched")
    tmpl = {"spec": {"containers": CONTAINERS}}
    (pod,) = _pods(a.manifest(_req(tmpl)))
    assert pod["metadata"] == {"labels": {MANAGED_BY: "carbonsched", "carbonsched.io/key-hash":
                                          a.metadata(_req(tmpl))["labels"][
                                              "carbonsched.io/key-hash"]}}


@pytest.mark.parametrize("workload", ["job", "jobset", "volcano"])
@pytest.mark.parametrize("name", BAD)
def test_a_template_the_adapter_cannot_build_is_refused_naming_the_job_and_field(workload,
                                                                                 name):
    """Before, ``nodeSelector: [...]`` raised a TypeError out of ``submit`` (and of
    ``dispatch_plan``, every pass); now it is this unit's refusal, before any API call (the
    adapter has no kubeconfig here: a call would fail otherwise)."""
    a = KubernetesAdapter("no-such-context", "carbonsched", workload=workload,
                          queue="q" if workload == "volcano" else None,
                          kubeconfig="/nonexistent/kubeconfig")
    why = pod_template_problem(BAD[name])
    with pytest.raises(BackendRejectedError) as exc:
        a.submit(_req(BAD[name], 2))
    assert exc.value.detail == (f"job tmpl-1: field 'pod_template': {why[0]}; {why[1]} (nothing "
                                "was sent to the cluster)")
    assert not exc.value.conflict
    with pytest.raises(BackendRejectedError):
        a.render(_req(BAD[name], 2))


def test_any_other_error_building_a_manifest_is_a_refusal_naming_the_job():
    class Broken(KubernetesAdapter):
        def pod_spec(self, req, gpus_per_pod=None):
            raise KeyError("containers")

    a = Broken("ctx", "carbonsched")
    with pytest.raises(BackendRejectedError, match=r"refused tmpl-1#0: job tmpl-1: field "
                       r"'pod_template': no job manifest can be built from it \(KeyError: "
                       r"'containers'\); fix the job's pod_template \(nothing was sent to the "
                       r"cluster\)$"):
        a.submit(_req(copy.deepcopy(TEMPLATE)))


def test_a_dry_run_reports_the_unit_it_would_refuse_and_renders_the_others(store):
    """``dispatch --dry-run`` renders what it can and reports the unit whose manifest cannot be
    built as ``rejected`` with the same detail; before, the TypeError ended the dry run."""
    from carbonsched.dispatch.outbox import dispatch_plan

    from .helpers import one_plan

    start = datetime.now(UTC).replace(microsecond=0, second=0) + timedelta(days=2)
    doc = one_plan([{"job_id": f"dry-{name}", "site": "us-ny-newyork", "start": start,
                     "end": start + timedelta(hours=1), "gpu_type": "A100", "gpus": 2,
                     "payload": {"pod_template": tmpl}}
                    for name, tmpl in (("ok", TEMPLATE), ("bad", BAD["nodeSelector-list"]))])
    store.save_plan(doc)
    s = dispatch_plan(store, doc["plan_id"], dry_run=True, placeholder=False,
                      adapters={"us-ny-newyork": KubernetesAdapter("ctx", "carbonsched")})
    assert s.counts == {"dry_run": 1, "rejected": 1}
    ok, bad = sorted(s.outcomes, key=lambda o: o.job_id, reverse=True)
    assert '"team": "vision"' in ok.rendered
    why = pod_template_problem(BAD["nodeSelector-list"])
    assert (bad.job_id, bad.reason, bad.rendered) == ("dry-bad", "Rejected", "")
    assert bad.detail == (f"job dry-bad: field 'pod_template': {why[0]}; {why[1]} (nothing was "
                          "sent to the cluster)")
