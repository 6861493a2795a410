"""A Kubernetes API emulator for the tests and the benchmark (project-owned, loopback only).

No kube-apiserver can be installed on the machines the tests run on, so this FastAPI server
answers the part of the Kubernetes API the dispatcher uses, for several emulated clusters at once
(one per kubeconfig context, under ``/clusters/<context>``):

- ``GET /version``; namespaces: ``GET/POST /api/v1/namespaces[/<ns>]``; API discovery
  ``GET /apis/<group>/<version>``;
- ``batch/v1`` Jobs, JobSets (``jobset.x-k8s.io/v1alpha2``), Volcano Jobs
  (``batch.volcano.sh/v1alpha1``), Kueue LocalQueues (``kueue.x-k8s.io/v1beta1``): ``POST``/``GET``
  (``labelSelector`` equality terms) on ``/apis/<group>/<version>/namespaces/<ns>/<plural>``,
  ``GET``/``PATCH`` (merge patch)/``DELETE`` on ``.../<plural>/<name>``; Kueue Workloads
  (``v1beta1`` and ``v1beta2``) and pods are read, listed and patched, made by the emulated
  controllers; pods are also deleted.

Validation, like the real API server: ``batch/v1`` Jobs against the upstream OpenAPI schema
(``kubernetes-validate``, strict); JobSets, Volcano Jobs, LocalQueues and the Workloads the
emulated Kueue makes against the **real CRDs'** ``openAPIV3Schema`` read by path from
:func:`crd_dir` (``../shared/data/k8s-crds``; never copied): unknown fields are refused with 400
(``fieldValidation=Strict``'s "strict decoding error"), invalid values with 422 in the API
server's words (``Unsupported value``, ``Required value``, ``Invalid value``), plus the checks
the projects' webhooks make (JobSet child Job names, Volcano ``minAvailable`` and queue, Kueue's
queue name only on a suspended object) and object-meta syntax. A kind whose CRD file is missing
answers 404, as on a cluster without the CRD. CEL rules are not evaluated.

Controllers (advanced on every request): a released Job runs ``--run-seconds`` (default 2 s; the
annotation ``emulator.carbonsched.io/run-seconds`` overrides it per object) then succeeds
(``Complete``), or fails with the annotation ``emulator.carbonsched.io/outcome: Failed``, or with
``DeadlineExceeded`` at ``activeDeadlineSeconds`` (a Job of ``parallelism: 0`` makes no pod
and ends only so); a running Job suspended again stops (``Suspended`` condition, pods gone) and
starts over when resumed, ``startTime`` reset, with the ``activeDeadlineSeconds`` it has then (a
patch may change it, also while it runs: a deadline lowered into the past ends it at that
patch, as the Job controller's sync on the update does); a JobSet likewise (``Suspended``,
``Completed``/``Failed``, ``terminalState``; its child Jobs made with it, suspended while it
is, as the JobSet controller makes them, each with its own deadline and parallelism, which a
patch may change);
**Kueue**: a suspended Job or JobSet carrying ``kueue.x-k8s.io/queue-name`` gets a Workload that is
admitted (``QuotaReserved``, ``Admitted``) when the LocalQueue exists, and the object is
unsuspended (a pending Workload's pod count follows its suspended Job's ``parallelism``, as Kueue
remakes a Workload no longer equivalent to its Job); **Volcano**: a Job's pods are made from its
tasks, gated pods stay Pending, the gang is scheduled once ``minAvailable`` pods are ungated
(``status.state.phase`` Pending -> Running -> Completed/Failed); each pod gets ``startTime`` when
it starts and ends on its own, ``Failed`` with reason ``DeadlineExceeded`` at its
``activeDeadlineSeconds`` counted from it (as the kubelet does; one lowered on a running pod
into the past ends it at that update, the kubelet's sync of the pod), and once none runs the
Job is ``Completed`` if ``minAvailable`` pods succeeded, else ``Failed`` (Volcano's rule without
lifecycle policies); a pod deleted from a Job is made again from its task's template (gated
when the template is), as Volcano's job controller syncs a Job missing a pod. A pod patch is
checked as the API server checks a pod update (the upstream Pod schema; gates only removed;
``activeDeadlineSeconds`` set when unset or lowered, within 1..2^31-1; no other ``spec``
field). Errors are ``Status`` objects, as the official clients expect.

Test hooks (emulator only): the annotation :data:`ADMIT_AT` on a Kueue-managed object keeps its
Workload pending (``QuotaReserved`` False, as for quota not yet free) until that instant, when
it is admitted and the object unsuspended (its ``startTime`` is that instant). The annotation
:data:`SCHEDULE_AT` on a Volcano Job keeps its ungated gang unscheduled (Job ``Pending``, no pod
bound) until that instant, when its pods start (their ``startTime`` is that instant).
``POST /clusters/<context>/emulator/evict`` with ``{"group",
"version", "plural", "namespace", "name", "reason", "message"}`` makes the cluster take an object
back (Kueue: ``Evicted``/``Preempted`` on the Workload, the object suspended again until
``{"action": "readmit", ...}``; Volcano: ``Restarting`` with ``PodEvicted``; JobSet/Job:
``Failed``).

Run: ``python scripts/kube_emulator.py --port 57350 --catalog global --kubeconfig kc.yaml``
writes a kubeconfig with one context per Kubernetes site of the catalog (its namespace, Kueue
LocalQueue and Volcano Queue created) and serves until killed.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import threading
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema
import uvicorn
import yaml
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from kubernetes_validate.utils import all_versions, major_minor, schema_contents
from referencing import Registry, Resource

K8S_VERSION = "1.30"
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
OUTCOME = "emulator.carbonsched.io/outcome"
RUN_SECONDS = "emulator.carbonsched.io/run-seconds"
"""Test hook: an object's own run time instead of ``--run-seconds`` (a Job that runs long
enough to be paused by a grid event)."""
ADMIT_AT = "emulator.carbonsched.io/admit-at"
"""Test hook: the instant (RFC 3339, UTC) before which the emulated Kueue does not admit the
object's Workload, as when the ClusterQueue's quota frees only then; it is admitted at that
instant (or at once when it is queued later)."""
SCHEDULE_AT = "emulator.carbonsched.io/schedule-at"
"""Test hook: the instant (RFC 3339, UTC) before which the emulated Volcano scheduler does not
bind a Volcano Job's gang, as when its Queue's resources free only then; its ungated pods start
at that instant (or when the gang is ungated, if later). Gated pods are never bound."""


@lru_cache(maxsize=8)
def _validator(kind: str, api_version: str) -> jsonschema.Validator:
    """A cached strict validator for ``kind`` (kubernetes-validate's schemas, loaded once)."""
    base = f"v{_schema_version(K8S_VERSION)}-local-strict"
    group = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    schema = schema_contents(f"kubernetes-json-schema/{base}/{kind.lower()}-{group}.json",
                             K8S_VERSION)
    defs = schema_contents(f"kubernetes-json-schema/{base}/_definitions.json", K8S_VERSION)
    registry = Resource.from_contents(defs) @ (Resource.from_contents(schema) @ Registry())
    return jsonschema.Draft202012Validator(schema, registry=registry)


def _schema_version(want: str) -> str:
    """The newest schema version kubernetes-validate ships that is not newer than ``want``."""
    return [v for v in all_versions() if major_minor(v) <= want][-1]


def _now() -> datetime:
    return datetime.now(UTC)


def _iso(ts: datetime) -> str:
    return ts.strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse(text: str | None) -> datetime | None:
    """An RFC 3339 instant (``...Z``) as a tz-aware datetime; None for None."""
    return None if not text else datetime.fromisoformat(text.replace("Z", "+00:00"))


def status_error(code: int, reason: str, message: str, name: str = "",
                 kind: str = "jobs", causes: list[dict] | None = None) -> JSONResponse:
    """A ``meta/v1 Status`` failure response."""
    details: dict[str, Any] = {"name": name, "group": "batch" if kind == "jobs" else "",
                               "kind": kind}
    if causes:
        details["causes"] = causes
    return JSONResponse(status_code=code, content={
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "details": details, "code": code})


def validate_job(obj: dict[str, Any]) -> list[str]:
    """Every problem the API server would report for this Job (empty when valid)."""
    problems = []
    try:
        v = _validator(obj.get("kind", ""), obj.get("apiVersion", ""))
    except Exception:  # noqa: BLE001 - unknown kind/apiVersion: the schema file is missing
        return [f"no schema for kind {obj.get('kind')!r} apiVersion {obj.get('apiVersion')!r}"]
    for err in sorted(v.iter_errors(obj), key=lambda e: list(e.absolute_path)):
        path = ".".join(str(p) for p in err.absolute_path) or "<root>"
        problems.append(f"{path}: {err.message[:200]}")
    meta = obj.get("metadata") or {}
    name = meta.get("name", "")
    if not name or len(name) > 63 or not DNS1123_LABEL.match(name):
        problems.append(f"metadata.name: Invalid value: {name!r}: a lowercase RFC 1123 label "
                        "(at most 63 characters) is required")
    for section in ("labels",):
        for k, val in (meta.get(section) or {}).items():
            prefix, _, short = k.rpartition("/")
            if (prefix and not DNS1123_SUBDOMAIN.match(prefix)) or len(short) > 63 \
                    or not LABEL_NAME.match(short):
                problems.append(f"metadata.labels: Invalid value: {k!r}: not a label key")
            if not isinstance(val, str) or len(val) > 63 or not LABEL_VALUE.match(val):
                problems.append(f"metadata.labels: Invalid value: {val!r}: a label value must "
                                "be at most 63 characters of [A-Za-z0-9._-] with alphanumeric "
                                "ends")
    tmpl = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
    if tmpl.get("restartPolicy") not in ("Never", "OnFailure"):
        problems.append("spec.template.spec.restartPolicy: Unsupported value: "
                        f"{tmpl.get('restartPolicy')!r}: supported values: \"OnFailure\", "
                        "\"Never\"")
    if not tmpl.get("containers"):
        problems.append("spec.template.spec.containers: Required value")
    return problems


MAX_INT32 = 2**31 - 1
POD_UPDATABLE = ("schedulingGates", "activeDeadlineSeconds")
"""The pod ``spec`` fields an update may change that the emulator models (the API server also
lets ``containers[*].image``, ``initContainers[*].image`` and additions to ``tolerations``
change; the emulator refuses those, which carbonsched never patches)."""


def pod_update_problems(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Every problem the API server reports for an update of pod ``old`` to ``new`` (empty when
    it is allowed), in its words (``pkg/apis/core/validation`` ``ValidatePodUpdate``).

    ``new`` is checked against the upstream Pod schema (``kubernetes-validate``, strict, as
    Jobs are); then the update rules: scheduling gates may be removed, never added (Pod
    Scheduling Readiness); ``spec.activeDeadlineSeconds`` may be set when unset, or lowered,
    never raised nor removed, and stays within 1..2147483647 (``ValidatePodSpec``; Kubernetes
    "Pods" concept page, "Pod update and replacement"); no other ``spec`` field may change.
    """
    problems = []
    v = _validator("Pod", "v1")
    for err in sorted(v.iter_errors(new), key=lambda e: list(e.absolute_path)):
        problems.append(f"{'.'.join(str(p) for p in err.absolute_path) or '<root>'}: "
                        f"{err.message[:200]}")
    if problems:
        return problems
    before = [g["name"] for g in old["spec"].get("schedulingGates") or []]
    after = [g["name"] for g in new["spec"].get("schedulingGates") or []]
    added = [g for g in after if g not in before]
    if added:
        problems.append("spec.schedulingGates: Forbidden: only deletion is allowed, but found "
                        f"new scheduling gate {added[0]!r}")
    was, now = old["spec"].get("activeDeadlineSeconds"), new["spec"].get("activeDeadlineSeconds")
    if now is None and was is not None:
        problems.append("spec.activeDeadlineSeconds: Invalid value: \"null\": must not update "
                        "from a positive integer to nil value")
    elif now is not None and not 1 <= now <= MAX_INT32:
        problems.append(f"spec.activeDeadlineSeconds: Invalid value: {now}: must be between 1 "
                        f"and {MAX_INT32}, inclusive")
    elif now is not None and was is not None and now > was:
        problems.append(f"spec.activeDeadlineSeconds: Invalid value: {now}: must be less than "
                        "or equal to previous value")
    if {k: v for k, v in new["spec"].items() if k not in POD_UPDATABLE} != {
            k: v for k, v in old["spec"].items() if k not in POD_UPDATABLE}:
        problems.append("spec: Forbidden: pod updates may not change fields other than "
                        "`spec.containers[*].image`, `spec.initContainers[*].image`, "
                        "`spec.activeDeadlineSeconds`, `spec.tolerations` (only additions to "
                        "existing tolerations), `spec.terminationGracePeriodSeconds` (allow it "
                        "to be set to 1 if it was previously negative)")
    return problems


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (also used for strategic-merge patches of plain fields)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


# -- the real CRDs -------------------------------------------------------------------------------

def crd_dir() -> Path:
    """Folder of the real CRDs (read by path, never copied).

    ``$CARBONSCHED_K8S_CRDS``, else ``$CARBONSCHED_SHARED_DATA/k8s-crds``, else
    ``../shared/data/k8s-crds`` beside the repository.
    """
    if os.environ.get("CARBONSCHED_K8S_CRDS"):
        return Path(os.environ["CARBONSCHED_K8S_CRDS"])
    if os.environ.get("CARBONSCHED_SHARED_DATA"):
        return Path(os.environ["CARBONSCHED_SHARED_DATA"]) / "k8s-crds"
    return Path(__file__).resolve().parents[1].parent / "shared" / "data" / "k8s-crds"


def structural(schema: Any) -> Any:
    """An ``openAPIV3Schema`` as JSON Schema with the API server's rules.

    ``nullable`` allows null; ``x-kubernetes-int-or-string`` is an integer or a string; an
    object with ``properties`` and neither ``additionalProperties`` nor
    ``x-kubernetes-preserve-unknown-fields`` refuses unknown fields (what the API server prunes,
    refused under ``fieldValidation=Strict``). CEL rules (``x-kubernetes-validations``) are not
    evaluated.
    """
    if isinstance(schema, list):
        return [structural(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: structural(v) for k, v in schema.items() if not k.startswith("x-kubernetes-")
           and k not in ("nullable", "description")}
    if schema.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out.setdefault("anyOf", [{"type": "integer"}, {"type": "string"}])
    if schema.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    if ("properties" in schema and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    return out


@lru_cache(maxsize=32)
def crd_validator(group: str, version: str, plural: str) -> tuple[str, jsonschema.Validator]:
    """(kind, validator) of the real CRD ``<group>_<plural>.yaml``, version ``version``.

    Raises
    ------
    FileNotFoundError
        The CRD file is not in :func:`crd_dir`.
    KeyError
        The CRD does not serve ``version``.
    """
    crd = yaml.safe_load((crd_dir() / f"{group}_{plural}.yaml").read_text())
    for v in crd["spec"]["versions"]:
        if v["name"] == version and v.get("served", True):
            schema = structural(v["schema"]["openAPIV3Schema"])
            schema.get("properties", {}).pop("status", None)  # the status subresource
            return crd["spec"]["names"]["kind"], jsonschema.Draft7Validator(schema)
    raise KeyError(f"{group}_{plural}.yaml serves no version {version!r}")


def _path(parts: Any) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "<root>"


def schema_problems(obj: dict[str, Any], validator: jsonschema.Validator) -> tuple[
        list[str], list[str]]:
    """(unknown fields, invalid values) of ``obj`` against a CRD schema, in the API server's
    words (``strict decoding error: unknown field "spec.x"``; ``spec.x: Unsupported value``)."""
    unknown, invalid = [], []
    body = {k: v for k, v in obj.items() if k != "status"}
    for err in sorted(validator.iter_errors(body), key=lambda e: _path(e.absolute_path)):
        path = _path(err.absolute_path)
        if err.validator == "additionalProperties":
            extra = sorted(set(err.instance) - set(err.schema.get("properties", {})))
            unknown += [f'unknown field "{path}.{k}"' if path != "<root>" else
                        f'unknown field "{k}"' for k in extra]
        elif err.validator == "enum":
            allowed = ", ".join(json.dumps(v) for v in err.validator_value)
            invalid.append(f"{path}: Unsupported value: {json.dumps(err.instance)}: "
                           f"supported values: {allowed}")
        elif err.validator == "required":
            missing = err.message.split("'")[1] if "'" in err.message else err.message
            invalid.append(f"{path}.{missing}: Required value" if path != "<root>"
                           else f"{missing}: Required value")
        elif err.validator == "type":
            invalid.append(f"{path}: Invalid value: {json.dumps(err.instance)[:60]}: {path} in "
                           f"body must be of type {err.validator_value}")
        elif err.validator in ("minimum", "maximum", "minLength", "maxLength", "pattern",
                               "minItems", "maxItems"):
            invalid.append(f"{path}: Invalid value: {json.dumps(err.instance)[:60]}: {path} in "
                           f"body should match the CRD's {err.validator} "
                           f"{json.dumps(err.validator_value)}")
        else:
            invalid.append(f"{path}: Invalid value: {err.message[:200]}")
    return unknown, invalid


def meta_problems(obj: dict[str, Any]) -> list[str]:
    """Object-meta checks the schema cannot express: the name and label syntax."""
    problems = []
    meta = obj.get("metadata") or {}
    name = meta.get("name", "")
    if not name or len(name) > 63 or not DNS1123_LABEL.match(name):
        problems.append(f"metadata.name: Invalid value: {name!r}: a lowercase RFC 1123 label "
                        "(at most 63 characters) is required")
    for k, val in (meta.get("labels") or {}).items():
        prefix, _, short = k.rpartition("/")
        if (prefix and not DNS1123_SUBDOMAIN.match(prefix)) or len(short) > 63 \
                or not LABEL_NAME.match(short):
            problems.append(f"metadata.labels: Invalid value: {k!r}: not a label key")
        if not isinstance(val, str) or len(val) > 63 or not LABEL_VALUE.match(val):
            problems.append(f"metadata.labels: Invalid value: {val!r}: a label value must be at "
                            "most 63 characters of [A-Za-z0-9._-] with alphanumeric ends")
    return problems


# -- resources ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Kind:
    """One served resource: its path parts, its kind and whether clients may create it."""

    group: str
    version: str
    plural: str
    kind: str
    creatable: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def store_key(self) -> tuple[str, str]:
        return (self.group, self.plural)


JOB = Kind("batch", "v1", "jobs", "Job")
JOBSET = Kind("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet")
VCJOB = Kind("batch.volcano.sh", "v1alpha1", "jobs", "Job")
WORKLOADS = (Kind("kueue.x-k8s.io", "v1beta1", "workloads", "Workload", creatable=False),
             Kind("kueue.x-k8s.io", "v1beta2", "workloads", "Workload", creatable=False))
LOCALQUEUE = Kind("kueue.x-k8s.io", "v1beta1", "localqueues", "LocalQueue")
POD = Kind("", "v1", "pods", "Pod", creatable=False)
KINDS = {(k.group, k.version, k.plural): k for k in (JOB, JOBSET, VCJOB, *WORKLOADS, LOCALQUEUE)}

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
VOLCANO_JOB_LABEL = "volcano.sh/job-name"
CLUSTER_QUEUE = "cluster-queue"
"""The one ClusterQueue every emulated LocalQueue points to (quota is not emulated)."""


def crd_kind_available(kind: Kind) -> str | None:
    """None when the CRD of ``kind`` can be read, else why not (``batch/v1`` is built in)."""
    if kind.group in ("batch", ""):
        return None
    try:
        crd_validator(kind.group, kind.version, kind.plural)
    except (OSError, KeyError) as exc:
        return f"{kind.api_version} {kind.plural}: CRD not installed ({exc})"
    return None


class Cluster:
    """One emulated cluster: namespaces, objects of every served kind, and the controllers'
    behaviour (Job, Kueue, JobSet, Volcano) advanced on every request."""

    def __init__(self, name: str, run_seconds: float) -> None:
        self.name = name
        self.run_seconds = run_seconds
        self.namespaces: dict[str, dict[str, Any]] = {}
        # (group, plural) -> {(namespace, name): object}
        self.objects: dict[tuple[str, str], dict[tuple[str, str], dict[str, Any]]] = {}
        self.released: dict[tuple[str, str, str, str], datetime] = {}
        self.pod_started: dict[str, datetime] = {}   # a Volcano pod's startTime, by its uid
        self.pod_ungated: dict[str, datetime] = {}   # when a Volcano pod was seen ungated
        # when a started pod's activeDeadlineSeconds was lowered: the kubelet syncs the pod on
        # that update, so a deadline lowered into the past ends it then, not before
        self.pod_deadline_set: dict[str, datetime] = {}
        self.gang_ungated: dict[tuple[str, str, str, str], datetime] = {}  # Volcano, unscheduled
        # when a started Job's activeDeadlineSeconds was last changed: the Job controller syncs
        # the Job on that update, so a deadline lowered into the past ends it then, not before
        self.deadline_set: dict[tuple[str, str, str, str], datetime] = {}
        self.volcano_queues = {"default"}
        self.held_evicted: set[str] = set()  # Workload uids kept out of re-admission
        self.rv = 0

    # -- storage
    def bucket(self, kind: Kind) -> dict[tuple[str, str], dict[str, Any]]:
        return self.objects.setdefault(kind.store_key, {})

    def next_rv(self) -> str:
        self.rv += 1
        return str(self.rv)

    def add_namespace(self, ns: str) -> dict[str, Any]:
        if ns not in self.namespaces:
            self.namespaces[ns] = {"apiVersion": "v1", "kind": "Namespace", "metadata": {
                "name": ns, "uid": str(uuid.uuid4()), "resourceVersion": self.next_rv(),
                "creationTimestamp": _iso(_now())}, "status": {"phase": "Active"}}
        return self.namespaces[ns]

    def store(self, kind: Kind, ns: str, obj: dict[str, Any]) -> dict[str, Any]:
        obj = copy.deepcopy(obj)
        obj["apiVersion"], obj["kind"] = kind.api_version, kind.kind
        obj.setdefault("metadata", {})
        obj["metadata"].update(namespace=ns, uid=str(uuid.uuid4()), resourceVersion=self.next_rv(),
                               generation=1, creationTimestamp=_iso(_now()))
        obj["status"] = {}
        self.bucket(kind)[(ns, obj["metadata"]["name"])] = obj
        return obj

    def by_owner(self, kind: Kind) -> dict[str, list[dict[str, Any]]]:
        """Objects of ``kind`` by the uid of each of their owners (one pass over the kind)."""
        out: dict[str, list[dict[str, Any]]] = {}
        for o in self.bucket(kind).values():
            for r in o["metadata"].get("ownerReferences") or []:
                out.setdefault(r.get("uid", ""), []).append(o)
        return out

    def owned_by(self, uid: str, kind: Kind) -> list[dict[str, Any]]:
        return [o for o in self.bucket(kind).values()
                if any(r.get("uid") == uid for r in o["metadata"].get("ownerReferences") or [])]

    def delete(self, kind: Kind, ns: str, name: str) -> dict[str, Any] | None:
        obj = self.bucket(kind).pop((ns, name), None)
        if obj is None:
            return None
        uid = obj["metadata"]["uid"]
        self.released.pop((kind.group, kind.plural, ns, name), None)
        self.deadline_set.pop((kind.group, kind.plural, ns, name), None)
        self.gang_ungated.pop((kind.group, kind.plural, ns, name), None)
        for owned_kind in (WORKLOADS[0], POD, JOB):  # garbage collection of owned objects
            for o in self.owned_by(uid, owned_kind):
                self.bucket(owned_kind).pop((ns, o["metadata"]["name"]), None)
                self.forget_pod(o)
        return obj

    def forget_pod(self, pod: dict[str, Any]) -> None:
        """Drop what the emulated kubelet and scheduler kept of a deleted pod."""
        for kept in (self.pod_started, self.pod_ungated, self.pod_deadline_set):
            kept.pop(pod["metadata"]["uid"], None)

    # -- controllers
    def reconcile(self) -> None:
        """Advance every controller to now (called before each request is answered)."""
        jobs_of = self.by_owner(JOB)   # a JobSet's child Jobs, once per pass (not per JobSet)
        for kind in (JOB, JOBSET):
            for (ns, name), obj in list(self.bucket(kind).items()):
                if any(r.get("kind") == "JobSet" for r in obj["metadata"].get(
                        "ownerReferences") or []):
                    continue  # a JobSet's child Job: the JobSet controller sets its status
                self._kueue(kind, ns, obj)
                if kind is JOB:
                    self._job(ns, name, obj)
                else:
                    self._jobset(ns, name, obj, jobs_of.get(obj["metadata"]["uid"], []))
        # the pods by owner, once per pass: looking them up per Volcano Job made every request
        # cost (Volcano Jobs x pods), which stalled a 10,000-placement dispatch (BENCHMARKS 5)
        pods_of = self.by_owner(POD)
        for (ns, name), obj in list(self.bucket(VCJOB).items()):
            self._volcano(ns, name, obj, pods_of.get(obj["metadata"]["uid"], []))

    def _run_outcome(self, key: tuple[str, str, str, str], obj: dict[str, Any],
                     limit: float | None = None, idle: bool = False,
                     limit_set: datetime | None = None) -> tuple[str, datetime, datetime]:
        """('running' | 'failed' | 'deadline' | 'succeeded', started, done) of a released
        object after ``run_seconds`` (failed with the annotation ``emulator.carbonsched.io/
        outcome: Failed``). ``idle``: it runs no pod (``parallelism: 0``), so it never
        completes and ends only at its deadline ``limit``. ``limit_set``: when the deadline
        was changed on the running object; one lowered into the past ends the run at that
        update (the Job controller's sync on it), never before."""
        started = self.released.setdefault(key, _now())
        own = (obj["metadata"].get("annotations") or {}).get(RUN_SECONDS)
        run_for = float("inf") if idle else float(own) if own else self.run_seconds
        run_s = run_for if limit is None else min(run_for, float(limit))
        if run_s == float("inf"):
            # no pod and no deadline: it never ends (timedelta cannot hold infinity)
            return "running", started, datetime.max.replace(tzinfo=UTC)
        done = started + timedelta(seconds=run_s)
        if limit is not None and float(limit) < run_for and limit_set is not None:
            done = max(done, limit_set)
        if _now() < done:
            return "running", started, done
        if limit is not None and float(limit) < run_for:
            return "deadline", started, done
        if (obj["metadata"].get("annotations") or {}).get(OUTCOME) == "Failed":
            return "failed", started, done
        return "succeeded", started, done

    def _job(self, ns: str, name: str, job: dict[str, Any]) -> None:
        """batch/v1 Job: a released Job runs, then succeeds (``Complete``) or fails.

        A running Job suspended again (``spec.suspend: true``) stops: its pods are deleted
        (``status.active`` 0) and it gets the condition ``Suspended`` (reason ``JobSuspended``);
        resumed, it gets ``Suspended`` False (``JobResumed``), ``status.startTime`` is reset to
        the resume and it runs its ``--run-seconds`` again (the pods start over; a real job
        restores its checkpoint). Kubernetes Job docs, "Suspending a Job".
        """
        st = job.setdefault("status", {})
        if any(c["type"] in ("Complete", "Failed") for c in st.get("conditions", [])):
            return
        if (job.get("spec") or {}).get("suspend"):
            key = ("batch", "jobs", ns, name)
            if key in self.released or st.get("startTime"):
                self.released.pop(key, None)
                self.deadline_set.pop(key, None)
                if st.get("active") or not any(c["type"] == "Suspended" and c["status"] == "True"
                                               for c in st.get("conditions", [])):
                    st["active"] = 0
                    t = _iso(_now())
                    st["conditions"] = [c for c in st.get("conditions", [])
                                        if c["type"] != "Suspended"] + [{
                        "type": "Suspended", "status": "True", "reason": "JobSuspended",
                        "message": "Job suspended", "lastProbeTime": t,
                        "lastTransitionTime": t}]
                    job["metadata"]["resourceVersion"] = self.next_rv()
            return
        # activeDeadlineSeconds: a Job still running when it expires fails with
        # DeadlineExceeded (Kubernetes Job docs, "Job termination and cleanup"); one of
        # parallelism 0 makes no pod and ends only so
        pods = _parallelism(job)
        key = ("batch", "jobs", ns, name)
        outcome, started, done = self._run_outcome(key, job,
                                                   job["spec"].get("activeDeadlineSeconds"),
                                                   idle=pods == 0,
                                                   limit_set=self.deadline_set.get(key))
        st.setdefault("startTime", _iso(started))
        if outcome == "running":
            st["active"] = pods
            return
        st["active"] = 0
        st["ready"] = 0
        t = _iso(done)
        if outcome == "deadline":
            st["failed"] = 1
            st["conditions"] = [{"type": "Failed", "status": "True", "reason": "DeadlineExceeded",
                                 "message": "Job was active longer than specified deadline",
                                 "lastProbeTime": t, "lastTransitionTime": t}]
        elif outcome == "failed":
            st["failed"] = 1
            st["conditions"] = [{"type": "Failed", "status": "True",
                                 "reason": "BackoffLimitExceeded",
                                 "message": "Job has reached the specified backoff limit",
                                 "lastProbeTime": t, "lastTransitionTime": t}]
        else:
            st["succeeded"] = int(job["spec"].get("completions") or 1)
            st["completionTime"] = t
            st["conditions"] = [{"type": "Complete", "status": "True", "lastProbeTime": t,
                                 "lastTransitionTime": t}]
        job["metadata"]["resourceVersion"] = self.next_rv()

    def _jobset(self, ns: str, name: str, js: dict[str, Any],
                children: list[dict[str, Any]]) -> None:
        """JobSet: ``Suspended`` while held; resumed, its Jobs run, then ``Completed`` or
        ``Failed`` (reason ``FailedJobs``), with ``terminalState``. ``children``: the Jobs it
        owns (:meth:`by_owner`); made with the JobSet, suspended while it is, as the JobSet
        controller makes them (``constructJob``: ``suspend`` is the JobSet's)."""
        st = js.setdefault("status", {})
        conds = st.setdefault("conditions", [])
        if any(c["type"] in ("Completed", "Failed") and c["status"] == "True" for c in conds):
            return
        rjobs = js["spec"]["replicatedJobs"]
        if js["spec"].get("suspend"):
            _set_condition(conds, "Suspended", "True", "SuspendedJobs", "jobset is suspended")
            st["replicatedJobsStatus"] = [{"name": r["name"], "ready": 0, "succeeded": 0,
                                           "failed": 0, "active": 0,
                                           "suspended": r.get("replicas", 1)} for r in rjobs]
            # a running JobSet suspended again: the JobSet controller suspends its child Jobs
            # (their pods deleted) and the run starts over when it is resumed
            self.released.pop(("jobset.x-k8s.io", "jobsets", ns, name), None)
            for child in children or self._make_children(ns, js):
                child["spec"]["suspend"] = True
                child.setdefault("status", {})["active"] = 0
                child["status"].pop("startTime", None)   # set again when it is resumed
                self.deadline_set.pop(("batch", "jobs", ns, child["metadata"]["name"]), None)
            return
        if not children:
            children = self._make_children(ns, js)
        for child in children:
            if child["spec"].get("suspend"):   # resumed: so are its child Jobs
                child["spec"]["suspend"] = False
        key = ("jobset.x-k8s.io", "jobsets", ns, name)
        # each child Job's own deadline and parallelism (the template's, unless patched on
        # the child: the JobSet's replicatedJobs cannot change); the gang ends at the first
        limits = [c["spec"]["activeDeadlineSeconds"] for c in children
                  if c["spec"].get("activeDeadlineSeconds") is not None]
        idle = all(_parallelism(c) == 0 for c in children)
        changed = [t for c in children if (t := self.deadline_set.get(
            ("batch", "jobs", ns, c["metadata"]["name"]))) is not None]
        outcome, started, done = self._run_outcome(key, js, min(limits) if limits else None,
                                                   idle=idle,
                                                   limit_set=max(changed) if changed else None)
        _set_condition(conds, "Suspended", "False", "ResumeJobs", "jobset is resumed",
                       at=started)
        n = {r["name"]: 0 if idle else r.get("replicas", 1) for r in rjobs}
        if outcome == "running":
            for child in children:   # the Job controller starts each child Job
                cst = child.setdefault("status", {})
                cst.setdefault("startTime", _iso(started))
                cst["active"] = _parallelism(child)
            st["replicatedJobsStatus"] = [{"name": k, "ready": v, "succeeded": 0, "failed": 0,
                                           "active": v, "suspended": 0} for k, v in n.items()]
            return
        ok = outcome == "succeeded"
        t = _iso(done)
        for child in children:  # each child Job ends the way the JobSet does
            child["status"] = {"active": 0, "startTime": _iso(started), "conditions": [
                {"type": "Complete", "status": "True", "lastTransitionTime": t} if ok else
                {"type": "Failed", "status": "True", "lastTransitionTime": t,
                 "reason": "DeadlineExceeded" if outcome == "deadline" else
                 "BackoffLimitExceeded",
                 "message": "Job was active longer than specified deadline"
                 if outcome == "deadline" else "Job has reached the specified backoff limit"}]}
        st["replicatedJobsStatus"] = [{"name": k, "ready": 0, "succeeded": v if ok else 0,
                                       "failed": 0 if ok else 1, "active": 0, "suspended": 0}
                                      for k, v in n.items()]
        if ok:
            _set_condition(conds, "Completed", "True", "AllJobsCompleted",
                           "jobset completed successfully", at=done)
            st["terminalState"] = "Completed"
        else:
            why = ("job was active longer than specified deadline" if outcome == "deadline"
                   else "job has reached the specified backoff limit")
            _set_condition(conds, "Failed", "True", "FailedJobs",
                           f"jobset failed due to one or more job failures: {why}", at=done)
            st["terminalState"] = "Failed"
        js["metadata"]["resourceVersion"] = self.next_rv()

    def _make_children(self, ns: str, js: dict[str, Any]) -> list[dict[str, Any]]:
        """The child Jobs ``<jobset>-<replicatedJob>-<index>`` of a JobSet, labelled
        ``jobset.sigs.k8s.io/jobset-name`` and ``replicatedjob-name`` (JobSet's labels), suspended
        as the JobSet is."""
        out = []
        name = js["metadata"]["name"]
        for r in js["spec"]["replicatedJobs"]:
            tmpl = r["template"]
            for i in range(r.get("replicas", 1)):
                child = {"metadata": {
                    "name": f"{name}-{r['name']}-{i}",
                    "labels": {**(tmpl.get("metadata") or {}).get("labels", {}),
                               "jobset.sigs.k8s.io/jobset-name": name,
                               "jobset.sigs.k8s.io/replicatedjob-name": r["name"]},
                    "ownerReferences": [{"apiVersion": JOBSET.api_version, "kind": "JobSet",
                                         "name": name, "uid": js["metadata"]["uid"],
                                         "controller": True}]},
                    "spec": {**copy.deepcopy(tmpl["spec"]),
                             "suspend": bool(js["spec"].get("suspend"))}}
                out.append(self.store(JOB, ns, child))
        return out

    def _kueue(self, kind: Kind, ns: str, obj: dict[str, Any]) -> None:
        """Kueue: a suspended object carrying ``kueue.x-k8s.io/queue-name`` gets a Workload,
        admitted at once when its LocalQueue exists (quota is not emulated; the test hook
        :data:`ADMIT_AT` makes it wait, as for quota) and then unsuspended; inadmissible
        (``QuotaReserved`` False) when it does not. A pending Workload follows its Job's
        ``parallelism`` (Kueue remakes a Workload no longer equivalent to its suspended Job)."""
        queue = (obj["metadata"].get("labels") or {}).get(QUEUE_LABEL)
        if not queue:
            return
        uid = obj["metadata"]["uid"]
        wls = self.owned_by(uid, WORKLOADS[0])
        if not wls:
            if not obj["spec"].get("suspend"):
                return
            wls = [self._make_workload(kind, ns, obj, queue)]
        wl = wls[0]
        conds = wl["status"].setdefault("conditions", [])
        if uid in self.held_evicted or _cond_true(conds, "Admitted") or _cond_true(
                conds, "Finished"):
            return
        if kind is JOB and wl["spec"]["podSets"][0]["count"] != _parallelism(obj):
            wl["spec"]["podSets"][0]["count"] = _parallelism(obj)
            wl["metadata"]["resourceVersion"] = self.next_rv()
        if (ns, queue) not in self.bucket(LOCALQUEUE):
            _set_condition(conds, "QuotaReserved", "False", "Inadmissible",
                           f"LocalQueue {queue} doesn't exist")
            return
        now = _now()
        admit_at = _parse((obj["metadata"].get("annotations") or {}).get(ADMIT_AT))
        if admit_at is not None and now < admit_at:
            _set_condition(conds, "QuotaReserved", "False", "Pending",
                           f"couldn't assign flavors to pod set main: insufficient unused "
                           f"quota in ClusterQueue {CLUSTER_QUEUE} (until {_iso(admit_at)})")
            return
        if admit_at is not None and admit_at > (_parse(wl["metadata"].get(
                "creationTimestamp")) or admit_at):
            now = admit_at   # admitted when the quota freed, whenever this pass runs
        _set_condition(conds, "QuotaReserved", "True", "QuotaReserved",
                       f"Quota reserved in ClusterQueue {CLUSTER_QUEUE}", at=now)
        _set_condition(conds, "Admitted", "True", "Admitted",
                       "The workload is admitted", at=now)
        for c in ("Evicted", "Preempted", "Requeued"):
            if _cond_true(conds, c):
                _set_condition(conds, c, "False", "QuotaReserved", "readmitted", at=now)
        wl["status"]["admission"] = {"clusterQueue": CLUSTER_QUEUE, "podSetAssignments": [
            {"name": ps["name"], "count": ps["count"], "flavors": {"nvidia.com/gpu":
                                                                   "default-flavor"}}
            for ps in wl["spec"]["podSets"]]}
        obj["spec"]["suspend"] = False
        self.released[(kind.group, kind.plural, ns, obj["metadata"]["name"])] = now
        obj["metadata"]["resourceVersion"] = self.next_rv()

    def _make_workload(self, kind: Kind, ns: str, obj: dict[str, Any],
                       queue: str) -> dict[str, Any]:
        """The Workload Kueue's job framework makes for a Job or JobSet (validated against the
        Workload CRD like any object)."""
        if kind is JOB:
            pod_sets = [{"name": "main", "count": obj["spec"].get("parallelism", 1),
                         "template": obj["spec"]["template"]}]
        else:
            pod_sets = [{"name": r["name"], "count": r.get("replicas", 1) * (
                r["template"]["spec"].get("parallelism", 1)),
                "template": r["template"]["spec"]["template"]}
                for r in obj["spec"]["replicatedJobs"]]
        name = obj["metadata"]["name"]
        wl_name = f"{kind.kind.lower()}-{name}"[:56] + "-" + obj["metadata"]["uid"][:5]
        wl = {"apiVersion": WORKLOADS[0].api_version, "kind": "Workload", "metadata": {
            "name": wl_name, "namespace": ns,
            "labels": {"kueue.x-k8s.io/job-uid": obj["metadata"]["uid"]},
            "ownerReferences": [{"apiVersion": kind.api_version, "kind": kind.kind,
                                 "name": name, "uid": obj["metadata"]["uid"],
                                 "controller": True, "blockOwnerDeletion": True}]},
            "spec": {"queueName": queue, "active": True, "podSets": pod_sets}}
        _, validator = crd_validator(*[WORKLOADS[0].group, WORKLOADS[0].version,
                                       WORKLOADS[0].plural])
        unknown, invalid = schema_problems(wl, validator)
        if unknown or invalid:  # the emulator's own fault: make it loud
            raise RuntimeError(f"emulated Kueue made an invalid Workload: {unknown + invalid}")
        return self.store(WORKLOADS[0], ns, wl)

    def _volcano(self, ns: str, name: str, job: dict[str, Any],
                 pods: list[dict[str, Any]]) -> None:
        """Volcano Job: pods made from the tasks (gated pods stay Pending); the gang starts once
        ``minAvailable`` pods are ungated, then each pod runs until it ends on its own
        (:meth:`_pod_end`: its ``--run-seconds``, or the kubelet stops it at its
        ``activeDeadlineSeconds`` counted from its ``startTime``), and the Job follows: Running
        while a pod runs; when none does, Completed if ``minAvailable`` pods succeeded, else
        Failed (reason ``PodFailed``), as Volcano's ``running`` state decides a Job without
        lifecycle policies (``maxRetry: 0``). ``pods``: the pods the Job owns (:meth:`by_owner`).
        """
        st = job.setdefault("status", {})
        state = st.setdefault("state", {"phase": "Pending"})
        if state["phase"] in ("Completed", "Failed", "Terminated", "Aborted"):
            return
        if not pods:
            pods = self._make_pods(ns, job)
            st["minAvailable"] = job["spec"].get("minAvailable", 0)
        else:   # a pod deleted: Volcano's SyncJob makes the Job's missing pods again
            pods = pods + self._make_pods(ns, job, {p["metadata"]["name"] for p in pods})
        now = _now()
        ungated = [p for p in pods if not p["spec"].get("schedulingGates")]
        for p in ungated:
            self.pod_ungated.setdefault(p["metadata"]["uid"], now)
        key = ("batch.volcano.sh", "jobs", ns, name)
        if key not in self.released:
            if len(ungated) < job["spec"].get("minAvailable", 0) or not ungated:
                self.gang_ungated.pop(key, None)
                st.update(pending=len(pods), running=0)
                return
            ready = self.gang_ungated.setdefault(key, now)
            at = _parse((job["metadata"].get("annotations") or {}).get(SCHEDULE_AT))
            if at is not None and now < at:   # the scheduler has not bound the gang yet
                st.update(pending=len(pods), running=0)
                return
            # bound when the gang was ungated, or when the test hook lets it (whenever this
            # pass runs)
            self.released[key] = ready if at is None else max(ready, at)
        started = self.released[key]
        ends: list[tuple[datetime, str]] = []
        for p in ungated:   # a pod ungated after the gang started starts when it is ungated
            uid = p["metadata"]["uid"]
            t0 = self.pod_started.setdefault(uid, max(started, self.pod_ungated[uid]))
            ends.append(self._pod_end(job, p, t0, now))
        conds = st.setdefault("conditions", [])
        if not any(c["status"] == "Running" for c in conds):
            conds.append({"status": "Running", "lastTransitionTime": _iso(started)})
        running = sum(1 for _, how in ends if how == "running")
        succeeded = sum(1 for _, how in ends if how == "succeeded")
        failed = [how for _, how in ends if how not in ("running", "succeeded")]
        if running or len(ends) < len(pods):
            state.update(phase="Running", lastTransitionTime=_iso(started))
            state.pop("reason", None)
            state.pop("message", None)
            st.update(pending=len(pods) - len(ends), running=running, succeeded=succeeded,
                      failed=len(failed))
            return
        done = max(t for t, _ in ends)
        phase = "Completed" if succeeded >= job["spec"].get("minAvailable", 0) else "Failed"
        state.update(phase=phase, lastTransitionTime=_iso(done))
        if phase == "Failed":
            state.update(reason="PodFailed",
                         message=f"task {GANG}: pod failed ({', '.join(sorted(set(failed)))})")
        conds.append({"status": phase, "lastTransitionTime": _iso(done)})
        st.update(pending=0, running=0, succeeded=succeeded, failed=len(failed))
        job["metadata"]["resourceVersion"] = self.next_rv()

    def _pod_end(self, job: dict[str, Any], pod: dict[str, Any], t0: datetime,
                 now: datetime) -> tuple[datetime, str]:
        """(when it ends, 'running' | 'succeeded' | 'failed' | 'deadline') of a Volcano Job's
        pod started at ``t0``, its ``status`` set as the kubelet sets it.

        It runs the Job's run time (``emulator.carbonsched.io/run-seconds``, else
        ``--run-seconds``); its own ``spec.activeDeadlineSeconds``, counted from its
        ``startTime`` (and read again at every pass: a patch may lower it while it runs), stops
        it earlier: phase ``Failed``, reason ``DeadlineExceeded`` and the kubelet's message
        (``pkg/kubelet/active_deadline.go``); one lowered into the past stops it at that update
        (the kubelet syncs the updated pod then), never before. The annotation
        ``emulator.carbonsched.io/outcome: Failed`` on the Job fails it at its run time.
        """
        own = (job["metadata"].get("annotations") or {}).get(RUN_SECONDS)
        run_for = float(own) if own else self.run_seconds
        limit = pod["spec"].get("activeDeadlineSeconds")
        end = t0 + timedelta(seconds=run_for if limit is None else min(run_for, float(limit)))
        lowered = self.pod_deadline_set.get(pod["metadata"]["uid"])
        if limit is not None and float(limit) < run_for and lowered is not None:
            end = max(end, lowered)
        status: dict[str, Any] = {"phase": "Running", "startTime": _iso(t0)}
        how = "running"
        if now >= end:
            if limit is not None and float(limit) < run_for:
                how = "deadline"
                status.update(phase="Failed", reason="DeadlineExceeded",
                              message="Pod was active on the node longer than the specified "
                                      "deadline")
            elif (job["metadata"].get("annotations") or {}).get(OUTCOME) == "Failed":
                how, status["phase"] = "failed", "Failed"
            else:
                how, status["phase"] = "succeeded", "Succeeded"
        pod["status"] = status
        return end, how

    def _make_pods(self, ns: str, job: dict[str, Any],
                   have: set[str] | frozenset[str] = frozenset()) -> list[dict[str, Any]]:
        """The pods of Volcano Job ``job``'s tasks (``<job>-<task>-<index>``) not in ``have``,
        made from each task's template as Volcano's job controller makes them."""
        out = []
        name = job["metadata"]["name"]
        for task in job["spec"]["tasks"]:
            tmpl = task["template"]
            for i in range(task.get("replicas", 1)):
                if f"{name}-{task['name']}-{i}" in have:
                    continue
                pod = {"metadata": {
                    "name": f"{name}-{task['name']}-{i}",
                    "labels": {**(tmpl.get("metadata") or {}).get("labels", {}),
                               VOLCANO_JOB_LABEL: name, "volcano.sh/task-spec": task["name"]},
                    "annotations": {"scheduling.k8s.io/group-name": name},
                    "ownerReferences": [{"apiVersion": VCJOB.api_version, "kind": "Job",
                                         "name": name, "uid": job["metadata"]["uid"],
                                         "controller": True}]},
                    "spec": {**copy.deepcopy(tmpl["spec"]),
                             "schedulerName": job["spec"].get("schedulerName", "volcano")}}
                out.append(self.store(POD, ns, pod))
                out[-1]["status"] = {"phase": "Pending"}
        return out

    # -- the test hook
    def evict(self, kind: Kind, ns: str, name: str, reason: str, message: str) -> str | None:
        """The cluster takes a running or admitted object back; None when there is none.

        Kueue-managed Job/JobSet: the Workload gets ``Evicted`` (and ``Preempted`` when the
        reason is ``Preempted``), loses ``Admitted``/``QuotaReserved`` and its admission, the
        object is suspended again and the Workload stays pending until :meth:`readmit`. JobSet /
        Job not managed by Kueue: ``Failed`` with the pod-eviction message. Volcano Job:
        ``Restarting`` with reason ``PodEvicted`` (its default ``PodEvicted -> RestartJob``
        policy); its pods are made again from the (gated) template.
        """
        obj = self.bucket(kind).get((ns, name))
        if obj is None:
            return None
        now = _now()
        self.released.pop((kind.group, kind.plural, ns, name), None)
        self.deadline_set.pop((kind.group, kind.plural, ns, name), None)
        self.gang_ungated.pop((kind.group, kind.plural, ns, name), None)
        if kind is VCJOB:
            for p in self.owned_by(obj["metadata"]["uid"], POD):
                self.bucket(POD).pop((ns, p["metadata"]["name"]), None)
                self.forget_pod(p)
            st = obj.setdefault("status", {})
            st["state"] = {"phase": "Restarting", "reason": "PodEvicted" if reason != "Preempted"
                           else "Preempted", "message": message,
                           "lastTransitionTime": _iso(now)}
            st["retryCount"] = st.get("retryCount", 0) + 1
            st["conditions"] = [c for c in st.get("conditions", []) if c["status"] != "Running"]
            self._make_pods(ns, obj)
            return "Restarting"
        wls = self.owned_by(obj["metadata"]["uid"], WORKLOADS[0])
        if wls:
            wl = wls[0]
            conds = wl["status"].setdefault("conditions", [])
            _set_condition(conds, "Evicted", "True", reason, message, at=now)
            if reason == "Preempted":
                _set_condition(conds, "Preempted", "True", "InClusterQueue", message, at=now)
            _set_condition(conds, "Admitted", "False", "NoReservation",
                           "The workload has no reservation", at=now)
            _set_condition(conds, "QuotaReserved", "False", "Pending", message, at=now)
            wl["status"].pop("admission", None)
            self.held_evicted.add(obj["metadata"]["uid"])
            obj["spec"]["suspend"] = True
            obj["status"] = {}
            return "Evicted"
        t = _iso(now)
        conds = obj.setdefault("status", {}).setdefault("conditions", [])
        if kind is JOBSET:
            _set_condition(conds, "Failed", "True", "FailedJobs", "jobset failed due to one or "
                           f"more job failures: pod evicted: {message}", at=now)
            obj["status"]["terminalState"] = "Failed"
        else:
            obj["status"].update(active=0, failed=1)
            conds.append({"type": "Failed", "status": "True", "reason": "PodFailurePolicy",
                          "message": f"pod evicted: {message}", "lastTransitionTime": t})
        return "Failed"

    def readmit(self, kind: Kind, ns: str, name: str) -> bool:
        obj = self.bucket(kind).get((ns, name))
        if obj is None or obj["metadata"]["uid"] not in self.held_evicted:
            return False
        self.held_evicted.discard(obj["metadata"]["uid"])
        return True


def _parallelism(job: dict[str, Any]) -> int:
    """A Job's ``spec.parallelism`` (1 when unset, as the API server defaults it)."""
    p = job["spec"].get("parallelism")
    return 1 if p is None else int(p)


def _cond_true(conds: list[dict[str, Any]], ctype: str) -> bool:
    return any(c.get("type") == ctype and c.get("status") == "True" for c in conds)


def _set_condition(conds: list[dict[str, Any]], ctype: str, status: str, reason: str,
                   message: str, at: datetime | None = None) -> None:
    """Set a ``metav1.Condition`` (its transition time moves only when the status changes)."""
    t = _iso(at or _now())
    for c in conds:
        if c["type"] == ctype:
            if c["status"] != status:
                c["lastTransitionTime"] = t
            c.update(status=status, reason=reason, message=message)
            return
    conds.append({"type": ctype, "status": status, "reason": reason, "message": message,
                  "lastTransitionTime": t})


GANG = "node"


_SELECTOR_TERM = re.compile(
    r"\s*(?:(?P<not>!)\s*(?P<absent>[^\s,!=()]+)"
    r"|(?P<key>[^\s,!=()]+)\s*(?:(?P<op>==|=|!=)\s*(?P<value>[^\s,!=()]*)"
    r"|\s(?P<setop>in|notin)\s*\((?P<values>[^()]*)\))?)\s*(?:,|$)")


def parse_selector(selector: str | None) -> list[tuple[str, str, frozenset[str]]]:
    """A label selector's requirements ``(key, operator, values)``, as the API server reads it.

    Equality (``k=v``, ``k==v``, ``k!=v``), set-based (``k in (a,b)``, ``k notin (a,b)``) and
    existence (``k``, ``!k``) terms joined by commas (apimachinery ``labels.Parse``); the
    operators are ``=``, ``!=``, ``in``, ``notin``, ``exists`` and ``!``. Empty: no
    requirement.

    Raises
    ------
    ValueError
        A term it cannot read (the API server answers 400 BadRequest).
    """
    out: list[tuple[str, str, frozenset[str]]] = []
    text, pos = (selector or "").strip(), 0
    while pos < len(text):
        m = _SELECTOR_TERM.match(text, pos)
        if m is None or m.end() == pos:
            raise ValueError(f"unable to parse requirement: {text[pos:]!r}")
        if m["absent"]:
            out.append((m["absent"], "!", frozenset()))
        elif m["op"]:
            out.append((m["key"], "!=" if m["op"] == "!=" else "=", frozenset([m["value"]])))
        elif m["setop"]:
            values = frozenset(v.strip() for v in m["values"].split(",") if v.strip())
            if not values:
                raise ValueError(f"unable to parse requirement: {m[0].strip()!r}: "
                                 "for 'in', 'notin' operators, values set can't be empty")
            out.append((m["key"], m["setop"], values))
        else:
            out.append((m["key"], "exists", frozenset()))
        pos = m.end()
    return out


def _selector_matches(selector: str | None, labels: dict[str, str]) -> bool:
    """Whether ``labels`` meet every requirement of ``selector`` (:func:`parse_selector`).

    ``!=`` and ``notin`` match a label that is absent, as in Kubernetes.

    Raises
    ------
    ValueError
        The selector cannot be read.
    """
    for key, op, values in parse_selector(selector):
        have = labels.get(key)
        if op in ("=", "in") and have not in values:
            return False
        if op in ("!=", "notin") and have in values:
            return False
        if op == "exists" and have is None:
            return False
        if op == "!" and have is not None:
            return False
    return True


def semantic_problems(kind: Kind, obj: dict[str, Any], c: Cluster,
                      check_queue: bool = False) -> list[str]:
    """What the projects' admission webhooks refuse that the CRD schema cannot say.

    ``check_queue``: the request adds ``kueue.x-k8s.io/queue-name`` (a create carrying it, or a
    patch adding it), which Kueue's webhook accepts only on a suspended object.
    """
    spec = obj.get("spec") or {}
    out: list[str] = []
    name = (obj.get("metadata") or {}).get("name", "")
    if kind is JOBSET:
        # JobSet webhook: every child Job name <jobset>-<replicatedJob>-<index> is a DNS-1035
        # label (kubernetes-sigs/jobset, jobset_webhook.go)
        for r in spec.get("replicatedJobs") or []:
            replicas = r.get("replicas", 1)
            last = max(replicas - 1, 0) if isinstance(replicas, int) else 0
            child = f"{name}-{r.get('name')}-{last}"
            if len(child) > 63 or not DNS1035_LABEL.match(child):
                out.append(f"spec.replicatedJobs: Invalid value: {child!r}: the Job names "
                           "<jobset>-<replicatedJob>-<index> must be DNS-1035 labels of at most "
                           "63 characters")
    if kind is VCJOB:
        # Volcano's job webhook (volcano-sh/volcano, admission/jobs/validate)
        total = sum(t.get("replicas", 0) for t in spec.get("tasks") or []
                    if isinstance(t.get("replicas", 0), int))
        min_available = spec.get("minAvailable", 0)
        if isinstance(min_available, int) and min_available > total:
            out.append("spec.minAvailable: Invalid value: job 'minAvailable' should not be "
                       f"greater than total replicas in tasks ({total})")
        queue = spec.get("queue", "default")
        if queue not in c.volcano_queues:
            out.append(f'spec.queue: Invalid value: unable to find job queue: queues.scheduling.'
                       f'volcano.sh "{queue}" not found')
        names = [t.get("name") for t in spec.get("tasks") or []]
        if len(set(names)) != len(names):
            out.append(f"spec.tasks: Invalid value: duplicated task name in {names}")
    if kind in (JOB, JOBSET) and check_queue and not spec.get("suspend"):
        out.append("spec.suspend: Invalid value: false: suspend should be true when adding the "
                   "queue name (Kueue's job webhook)")
    return out


def create_app(contexts: dict[str, list[str]], run_seconds: float = 2.0,
               queues: dict[str, dict[str, list]] | None = None) -> FastAPI:
    """The emulator app for ``{context: [namespaces]}``.

    ``queues``: ``{context: {"kueue": [(namespace, LocalQueue)], "volcano": [Queue]}}`` made
    at start (every Kueue LocalQueue points to one ClusterQueue; Volcano's ``default`` Queue
    always exists).
    """
    app = FastAPI(title="carbonsched Kubernetes API emulator")
    clusters = {c: Cluster(c, run_seconds) for c in contexts}
    for c, nss in contexts.items():
        for ns in nss:
            clusters[c].add_namespace(ns)
    for c, q in (queues or {}).items():
        if c not in clusters:
            continue
        for ns, lq in q.get("kueue", []):
            clusters[c].add_namespace(ns)
            clusters[c].store(LOCALQUEUE, ns, {"metadata": {"name": lq},
                                               "spec": {"clusterQueue": CLUSTER_QUEUE}})
        clusters[c].volcano_queues.update(q.get("volcano", []))
    lock = threading.Lock()
    app.state.clusters = clusters

    def cluster_or_404(name: str) -> Cluster | JSONResponse:
        if name not in clusters:
            return status_error(404, "NotFound", f"no emulated cluster {name!r}", kind="")
        return clusters[name]

    def kind_or_404(group: str, version: str, plural: str) -> Kind | JSONResponse:
        kind = KINDS.get((group, version, plural))
        why = "no such resource" if kind is None else crd_kind_available(kind)
        if kind is None or why:
            return status_error(404, "NotFound", f"the server could not find the requested "
                                f"resource ({group}/{version} {plural}: {why})", kind=plural)
        return kind

    @app.get("/clusters/{cluster}/version")
    def version(cluster: str) -> dict[str, str]:
        return {"major": "1", "minor": K8S_VERSION.split(".")[1],
                "gitVersion": f"v{K8S_VERSION}.0-carbonsched-emulator", "platform": "linux/amd64"}

    @app.get("/clusters/{cluster}/apis/{group}/{version}")
    def discovery(cluster: str, group: str, version: str) -> Any:
        kinds = [k for k in KINDS.values() if (k.group, k.version) == (group, version)
                 and crd_kind_available(k) is None]
        if not kinds:
            return status_error(404, "NotFound", "the server could not find the requested "
                                f"resource ({group}/{version})", kind="")
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion":
                f"{group}/{version}", "resources": [
                    {"name": k.plural, "singularName": k.kind.lower(), "namespaced": True,
                     "kind": k.kind, "verbs": ["create", "delete", "get", "list", "patch"]}
                    for k in kinds]}

    @app.get("/clusters/{cluster}/api/v1/namespaces/{ns}")
    def get_namespace(cluster: str, ns: str) -> Any:
        c = cluster_or_404(cluster)
        if isinstance(c, JSONResponse):
            return c
        if ns not in c.namespaces:
            return status_error(404, "NotFound", f'namespaces "{ns}" not found', ns,
                                "namespaces")
        return c.namespaces[ns]

    @app.post("/clusters/{cluster}/api/v1/namespaces", status_code=201)
    async def create_namespace(cluster: str, request: Request) -> Any:
        c = cluster_or_404(cluster)
        if isinstance(c, JSONResponse):
            return c
        body = await request.json()
        name = (body.get("metadata") or {}).get("name", "")
        with lock:
            if name in c.namespaces:
                return status_error(409, "AlreadyExists", f'namespaces "{name}" already exists',
                                    name, "namespaces")
            return c.add_namespace(name)

    # -- pods (made by the emulated Volcano controller; read, list, patch, delete)
    @app.get("/clusters/{cluster}/api/v1/namespaces/{ns}/pods")
    def list_pods(cluster: str, ns: str, labelSelector: str | None = None) -> Any:  # noqa: N803
        c = cluster_or_404(cluster)
        if isinstance(c, JSONResponse):
            return c
        try:
            parse_selector(labelSelector)
        except ValueError as exc:
            return status_error(400, "BadRequest", str(exc), kind="pods")
        with lock:
            c.reconcile()
            items = [copy.deepcopy(p) for (pns, _), p in c.bucket(POD).items() if pns == ns
                     and _selector_matches(labelSelector, p["metadata"].get("labels") or {})]
            return {"apiVersion": "v1", "kind": "PodList",
                    "metadata": {"resourceVersion": str(c.rv)}, "items": items}

    @app.patch("/clusters/{cluster}/api/v1/namespaces/{ns}/pods/{name}")
    async def patch_pod(cluster: str, ns: str, name: str, request: Request) -> Any:
        c = cluster_or_404(cluster)
        if isinstance(c, JSONResponse):
            return c
        patch = await request.json()
        with lock:
            c.reconcile()
            old = c.bucket(POD).get((ns, name))
            if old is None:
                return status_error(404, "NotFound", f'pods "{name}" not found', name, "pods")
            new = merge_patch(copy.deepcopy(old), patch)   # never a change to ``old`` itself
            for f in ("uid", "creationTimestamp", "name", "namespace", "ownerReferences"):
                if f in old["metadata"]:
                    new["metadata"][f] = copy.deepcopy(old["metadata"][f])
                else:
                    new["metadata"].pop(f, None)
            new["status"] = old.get("status") or {}
            problems = pod_update_problems(old, new)
            if problems:
                return status_error(422, "Invalid", f'Pod "{name}" is invalid: '
                                    + "; ".join(problems), name, "pods",
                                    causes=[{"reason": "FieldValueInvalid", "message": p}
                                            for p in problems])
            new["metadata"]["resourceVersion"] = c.next_rv()
            c.bucket(POD)[(ns, name)] = new
            uid = new["metadata"]["uid"]
            if uid in c.pod_started and new["spec"].get("activeDeadlineSeconds") != old[
                    "spec"].get("activeDeadlineSeconds"):
                # a started pod's deadline lowered: the kubelet syncs the pod on the update
                # and stops it then if startTime + the new deadline has passed
                c.pod_deadline_set[uid] = _now()
            c.reconcile()
            return new

    @app.delete("/clusters/{cluster}/api/v1/namespaces/{ns}/pods/{name}")
    def delete_pod(cluster: str, ns: str, name: str) -> Any:
        """Delete a pod (answered with the pod, as the API server does); a Volcano Job's
        controller makes it again from its task's template at the next pass."""
        c = cluster_or_404(cluster)
        if isinstance(c, JSONResponse):
            return c
        with lock:
            c.reconcile()
            pod = c.bucket(POD).pop((ns, name), None)
            if pod is None:
                return status_error(404, "NotFound", f'pods "{name}" not found', name, "pods")
            c.forget_pod(pod)
            return pod

    # -- the emulator-only test hooks (no real API server has these)
    @app.post("/clusters/{cluster}/emulator/evict")
    async def evict(cluster: str, request: Request) -> Any:
        """Body: ``{"group", "version", "plural", "namespace", "name", "reason", "message"}``;
        ``reason`` ``Preempted`` makes a preemption, anything else an eviction."""
        c = cluster_or_404(cluster)
        if isinstance(c, JSONResponse):
            return c
        b = await request.json()
        kind = KINDS.get((b.get("group", ""), b.get("version", ""), b.get("plural", "")))
        if kind is None:
            return status_error(404, "NotFound", f"no resource {b}", kind="")
        with lock:
            c.reconcile()
            if b.get("action") == "readmit":
                done = c.readmit(kind, b["namespace"], b["name"])
            else:
                done = c.evict(kind, b["namespace"], b["name"], b.get("reason", "Evicted"),
                               b.get("message", "evicted by the emulator's test hook"))
            if not done:
                return status_error(404, "NotFound", f'{kind.plural} "{b.get("name")}" not '
                                    "found (or not evicted)", b.get("name", ""), kind.plural)
            return {"result": done}

    # -- every served kind, generically
    base = "/clusters/{cluster}/apis/{group}/{version}/namespaces/{ns}/{plural}"

    @app.post(base, status_code=201)
    async def create(cluster: str, group: str, version: str, ns: str, plural: str,
                     request: Request) -> Any:
        c = cluster_or_404(cluster)
        if isinstance(c, JSONResponse):
            return c
        kind = kind_or_404(group, version, plural)
        if isinstance(kind, JSONResponse):
            return kind
        try:
            body = await request.json()
        except ValueError:
            return status_error(400, "BadRequest", "the body is not JSON")
        name = (body.get("metadata") or {}).get("name", "")
        if not kind.creatable:
            return status_error(405, "MethodNotAllowed", f"{plural} are made by the emulated "
                                "controller, not by clients", name, plural)
        if ns not in c.namespaces:
            return status_error(404, "NotFound", f'namespaces "{ns}" not found', ns,
                                "namespaces")
        meta_ns = (body.get("metadata") or {}).get("namespace")
        if meta_ns and meta_ns != ns:
            return status_error(400, "BadRequest", "the namespace of the provided object does "
                                "not match the namespace sent on the request", name)
        if (body.get("apiVersion"), body.get("kind")) != (kind.api_version, kind.kind):
            return status_error(400, "BadRequest", f"the object is {body.get('apiVersion')} "
                                f"{body.get('kind')}, not {kind.api_version} {kind.kind}", name)
        resp = _refusal(kind, body, c, name, adding_queue=QUEUE_LABEL in (
            (body.get("metadata") or {}).get("labels") or {}))
        if resp is not None:
            return resp
        with lock:
            if (ns, name) in c.bucket(kind):
                return status_error(409, "AlreadyExists",
                                    f'{plural}.{group} "{name}" already exists', name, plural)
            obj = c.store(kind, ns, body)
            if kind is JOB:
                obj["spec"].setdefault("parallelism", 1)
                obj["spec"].setdefault("completions", 1)
                obj["spec"].setdefault("completionMode", "NonIndexed")
            c.reconcile()
            return copy.deepcopy(obj)

    @app.get(base)
    def list_objects(cluster: str, group: str, version: str, ns: str, plural: str,
                     labelSelector: str | None = None) -> Any:  # noqa: N803
        c = cluster_or_404(cluster)
        if isinstance(c, JSONResponse):
            return c
        kind = kind_or_404(group, version, plural)
        if isinstance(kind, JSONResponse):
            return kind
        try:
            parse_selector(labelSelector)
        except ValueError as exc:
            return status_error(400, "BadRequest", str(exc), kind=plural)
        with lock:
            c.reconcile()
            items = [_as_version(o, kind) for (ons, _), o in c.bucket(kind).items()
                     if ons == ns and _selector_matches(labelSelector,
                                                        o["metadata"].get("labels") or {})]
            return {"apiVersion": kind.api_version, "kind": f"{kind.kind}List",
                    "metadata": {"resourceVersion": str(c.rv)}, "items": items}

    @app.get(base + "/{name}")
    def get_object(cluster: str, group: str, version: str, ns: str, plural: str,
                   name: str) -> Any:
        c = cluster_or_404(cluster)
        if isinstance(c, JSONResponse):
            return c
        kind = kind_or_404(group, version, plural)
        if isinstance(kind, JSONResponse):
            return kind
        with lock:
            c.reconcile()
            obj = c.bucket(kind).get((ns, name))
            if obj is None:
                return status_error(404, "NotFound", f'{plural}.{group} "{name}" not found',
                                    name, plural)
            return _as_version(obj, kind)

    @app.patch(base + "/{name}")
    async def patch_object(cluster: str, group: str, version: str, ns: str, plural: str,
                           name: str, request: Request) -> Any:
        c = cluster_or_404(cluster)
        if isinstance(c, JSONResponse):
            return c
        kind = kind_or_404(group, version, plural)
        if isinstance(kind, JSONResponse):
            return kind
        patch = await request.json()
        if isinstance(patch, list):
            return status_error(415, "UnsupportedMediaType",
                                "JSON patch is not emulated; use a merge patch", name)
        with lock:
            c.reconcile()
            old = c.bucket(kind).get((ns, name))
            if old is None:
                return status_error(404, "NotFound", f'{plural}.{group} "{name}" not found',
                                    name, plural)
            new = merge_patch(old, patch)
            for f in ("uid", "creationTimestamp", "name", "namespace"):
                new["metadata"][f] = old["metadata"][f]
            new["status"] = old.get("status") or {}
            check = {k: v for k, v in new.items() if k != "status"}
            check["metadata"] = {k: v for k, v in new["metadata"].items()
                                 if k in ("name", "namespace", "labels", "annotations")}
            resp = _refusal(kind, check, c, name, adding_queue=(
                QUEUE_LABEL in (new["metadata"].get("labels") or {})
                and QUEUE_LABEL not in (old["metadata"].get("labels") or {})))
            if resp is not None:
                return resp
            if kind is JOBSET and new["spec"].get("replicatedJobs") != old["spec"].get(
                    "replicatedJobs"):
                return status_error(422, "Invalid", f'JobSet.jobset.x-k8s.io "{name}" is '
                                    "invalid: spec.replicatedJobs: Invalid value: field is "
                                    "immutable", name, plural)
            if new.get("spec") != old.get("spec"):
                new["metadata"]["generation"] = old["metadata"].get("generation", 1) + 1
            new["metadata"]["resourceVersion"] = c.next_rv()
            c.bucket(kind)[(ns, name)] = new
            if kind is JOB and not new["spec"].get("suspend") and new["status"].get(
                    "startTime") and new["spec"].get("activeDeadlineSeconds") != old[
                    "spec"].get("activeDeadlineSeconds"):
                # a running Job's deadline changed (the field is mutable): the Job controller
                # syncs it on the update and ends it then if startTime + the new deadline has
                # passed (kubernetes pkg/controller/job, updateJob)
                c.deadline_set[(group, plural, ns, name)] = _now()
            if old["spec"].get("suspend") and not new["spec"].get("suspend"):
                c.released[(group, plural, ns, name)] = _now()
                st = new["status"]
                if kind is JOB and any(x["type"] == "Suspended" for x in st.get("conditions", [])):
                    # resumed after a suspension: startTime is reset (activeDeadlineSeconds
                    # counts again from here), the Suspended condition turns False
                    t = _iso(_now())
                    st["startTime"] = t
                    st["conditions"] = [x for x in st["conditions"]
                                        if x["type"] != "Suspended"] + [{
                        "type": "Suspended", "status": "False", "reason": "JobResumed",
                        "message": "Job resumed", "lastProbeTime": t, "lastTransitionTime": t}]
            c.reconcile()
            return _as_version(new, kind)

    @app.delete(base + "/{name}")
    def delete_object(cluster: str, group: str, version: str, ns: str, plural: str,
                      name: str) -> Any:
        c = cluster_or_404(cluster)
        if isinstance(c, JSONResponse):
            return c
        kind = kind_or_404(group, version, plural)
        if isinstance(kind, JSONResponse):
            return kind
        with lock:
            obj = c.delete(kind, ns, name)
        if obj is None:
            return status_error(404, "NotFound", f'{plural}.{group} "{name}" not found', name,
                                plural)
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "details": {"name": name, "group": group, "kind": plural,
                            "uid": obj["metadata"]["uid"]}}

    return app


def _as_version(obj: dict[str, Any], kind: Kind) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["apiVersion"] = kind.api_version
    return out


def _refusal(kind: Kind, body: dict[str, Any], c: Cluster, name: str,
             adding_queue: bool = False) -> JSONResponse | None:
    """The API server's answer to an invalid object (None when it is valid): 400 for unknown
    fields (``fieldValidation=Strict``), 422 for invalid values — checked against the real CRD
    (or, for ``batch/v1``, the upstream OpenAPI schema)."""
    qualified = f'{kind.kind}.{kind.group} "{name}"'
    if kind is JOB:
        problems = validate_job(body)
        unknown: list[str] = []
    else:
        _, validator = crd_validator(kind.group, kind.version, kind.plural)
        unknown, problems = schema_problems(body, validator)
        problems = meta_problems(body) + problems
    if unknown:
        return status_error(400, "BadRequest", f"{kind.kind} in version \"{kind.version}\" "
                            f"cannot be handled as a {kind.kind}: strict decoding error: "
                            + ", ".join(unknown), name, kind.plural)
    if not problems:  # the validating webhooks run after the schema checks passed
        problems = semantic_problems(kind, body, c, check_queue=adding_queue)
    if problems:
        return status_error(422, "Invalid", f"{qualified} is invalid: " + "; ".join(problems),
                            name, kind.plural,
                            causes=[{"reason": "FieldValueInvalid", "message": p}
                                    for p in problems])
    return None


def kubeconfig(contexts: dict[str, list[str]], server: str) -> dict[str, Any]:
    """A kubeconfig with one cluster, user and context per emulated context."""
    return {
        "apiVersion": "v1", "kind": "Config", "preferences": {},
        "current-context": next(iter(contexts), ""),
        "clusters": [{"name": c, "cluster": {"server": f"{server}/clusters/{c}"}}
                     for c in contexts],
        "users": [{"name": f"carbonsched-{c}", "user": {"token": "emulator"}} for c in contexts],
        "contexts": [{"name": c, "context": {"cluster": c, "user": f"carbonsched-{c}",
                                             "namespace": (nss or ["default"])[0]}}
                     for c, nss in contexts.items()],
    }


def catalog_contexts(catalog: str) -> dict[str, list[str]]:
    """{context: [namespaces]} of the Kubernetes sites of a catalog."""
    from carbonsched.catalog import load_catalog

    out: dict[str, list[str]] = {}
    for site in load_catalog(catalog).sites:
        if site.backend.kind == "kubernetes":
            out.setdefault(site.backend.context or "", [])
            if site.backend.namespace not in out[site.backend.context or ""]:
                out[site.backend.context or ""].append(site.backend.namespace or "default")
    return out


def catalog_queues(catalog: str) -> dict[str, dict[str, list]]:
    """{context: {"kueue": [(namespace, LocalQueue)], "volcano": [Queue]}} of a catalog."""
    from carbonsched.catalog import load_catalog

    out: dict[str, dict[str, list]] = {}
    for site in load_catalog(catalog).sites:
        b = site.backend
        if b.kind != "kubernetes" or b.workload not in ("kueue", "volcano") or not b.queue:
            continue
        q = out.setdefault(b.context or "", {"kueue": [], "volcano": []})
        q[b.workload].append((b.namespace or "default", b.queue) if b.workload == "kueue"
                             else b.queue)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description="carbonsched Kubernetes API emulator")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=57350)
    ap.add_argument("--catalog", default="global")
    ap.add_argument("--kubeconfig", type=Path, required=True)
    ap.add_argument("--run-seconds", type=float, default=2.0)
    args = ap.parse_args()
    contexts = catalog_contexts(args.catalog)
    args.kubeconfig.write_text(yaml.safe_dump(
        kubeconfig(contexts, f"http://{args.host}:{args.port}"), sort_keys=False))
    missing = [k.plural + "." + k.group for k in (JOBSET, VCJOB, *WORKLOADS, LOCALQUEUE)
               if crd_kind_available(k)]
    if missing:
        print(f"kube_emulator: CRDs not found in {crd_dir()} (set CARBONSCHED_K8S_CRDS): "
              f"{', '.join(missing)} are not served", flush=True)
    uvicorn.run(create_app(contexts, args.run_seconds, catalog_queues(args.catalog)),
                host=args.host, port=args.port,
                log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
