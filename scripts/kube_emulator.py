"""A Kubernetes API emulator for the tests and the benchmark (project-owned, loopback only).

No kube-apiserver can be installed on the machines the tests run on, so this FastAPI server
answers the part of the Kubernetes API the dispatcher uses, for several emulated clusters at once
(one per kubeconfig context, under ``/clusters/<context>``):

- ``GET /version``; namespaces: ``GET/POST /api/v1/namespaces[/<ns>]``;
- ``batch/v1`` Jobs: ``POST``/``GET`` (with ``labelSelector`` equality terms) on
  ``/apis/batch/v1/namespaces/<ns>/jobs``, and ``GET``/``PATCH``/``DELETE`` on ``.../jobs/<name>``.

Like the real API server it validates every created or patched Job against the upstream OpenAPI
schema (``kubernetes-validate``, strict: unknown fields are refused) plus the checks the schema
cannot express (DNS-1123 names, label syntax, ``restartPolicy``), answers 404 for a missing
namespace, 409 AlreadyExists, 422 Invalid, fills ``uid``, ``resourceVersion``, ``generation`` and
``creationTimestamp``, and moves a released Job through ``active`` to ``succeeded`` (condition
``Complete``) or ``failed`` (``Failed``) — after ``--run-seconds`` (default 2 s), or failed when
the Job carries the annotation ``emulator.carbonsched.io/outcome: Failed``, or failed with reason
``DeadlineExceeded`` at ``spec.activeDeadlineSeconds`` when that is shorter than the run. A
suspended Job never starts. Errors are ``Status`` objects, as the official clients expect.

Run: ``python scripts/kube_emulator.py --port 57350 --catalog global --kubeconfig kc.yaml``
writes a kubeconfig with one context per Kubernetes site of the catalog (its namespace created)
and serves until killed.
"""

from __future__ import annotations

import argparse
import copy
import re
import threading
import uuid
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
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
OUTCOME = "emulator.carbonsched.io/outcome"


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


class Cluster:
    """One emulated cluster: namespaces and Jobs."""

    def __init__(self, name: str, run_seconds: float) -> None:
        self.name = name
        self.run_seconds = run_seconds
        self.namespaces: dict[str, dict[str, Any]] = {}
        self.jobs: dict[tuple[str, str], dict[str, Any]] = {}
        self.released: dict[tuple[str, str], datetime] = {}
        self.rv = 0

    def next_rv(self) -> str:
        self.rv += 1
        return str(self.rv)

    def add_namespace(self, ns: str) -> dict[str, Any]:
        if ns not in self.namespaces:
            self.namespaces[ns] = {"apiVersion": "v1", "kind": "Namespace", "metadata": {
                "name": ns, "uid": str(uuid.uuid4()), "resourceVersion": self.next_rv(),
                "creationTimestamp": _iso(_now())}, "status": {"phase": "Active"}}
        return self.namespaces[ns]

    def progress(self, key: tuple[str, str]) -> dict[str, Any]:
        """The Job with its status advanced to now (active -> succeeded/failed)."""
        job = self.jobs[key]
        if (job.get("spec") or {}).get("suspend"):
            return job
        st = job.setdefault("status", {})
        if any(c["type"] in ("Complete", "Failed") for c in st.get("conditions", [])):
            return job
        started = self.released.setdefault(key, _now())
        st.setdefault("startTime", _iso(started))
        now = _now()
        # activeDeadlineSeconds: a Job still running when it expires fails with DeadlineExceeded
        # (Kubernetes Job docs, "Job termination and cleanup")
        limit = (job.get("spec") or {}).get("activeDeadlineSeconds")
        run_s = self.run_seconds if limit is None else min(self.run_seconds, float(limit))
        if now - started < timedelta(seconds=run_s):
            st["active"] = 1
            return job
        fail = (job["metadata"].get("annotations") or {}).get(OUTCOME) == "Failed"
        done = started + timedelta(seconds=run_s)
        st["active"] = 0
        st["ready"] = 0
        if limit is not None and float(limit) < self.run_seconds:
            st["failed"] = 1
            st["conditions"] = [{"type": "Failed", "status": "True",
                                 "reason": "DeadlineExceeded",
                                 "message": "Job was active longer than specified deadline",
                                 "lastProbeTime": _iso(done), "lastTransitionTime": _iso(done)}]
        elif fail:
            st["failed"] = 1
            st["conditions"] = [{"type": "Failed", "status": "True",
                                 "reason": "BackoffLimitExceeded",
                                 "message": "Job has reached the specified backoff limit",
                                 "lastProbeTime": _iso(done), "lastTransitionTime": _iso(done)}]
        else:
            st["succeeded"] = 1
            st["completionTime"] = _iso(done)
            st["conditions"] = [{"type": "Complete", "status": "True",
                                 "lastProbeTime": _iso(done), "lastTransitionTime": _iso(done)}]
        job["metadata"]["resourceVersion"] = self.next_rv()
        return job


def _selector_matches(selector: str | None, labels: dict[str, str]) -> bool:
    if not selector:
        return True
    for term in selector.split(","):
        term = term.strip()
        if "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k.strip()) == v.strip():
                return False
        elif "=" in term:
            k, v = term.replace("==", "=").split("=", 1)
            if labels.get(k.strip()) != v.strip():
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


def create_app(contexts: dict[str, list[str]], run_seconds: float = 2.0) -> FastAPI:
    """The emulator app for ``{context: [namespaces]}``."""
    app = FastAPI(title="carbonsched Kubernetes API emulator")
    clusters = {c: Cluster(c, run_seconds) for c in contexts}
    for c, nss in contexts.items():
        for ns in nss:
            clusters[c].add_namespace(ns)
    lock = threading.Lock()
    app.state.clusters = clusters

    def cluster_or_404(name: str) -> Cluster | JSONResponse:
        if name not in clusters:
            return status_error(404, "NotFound", f"no emulated cluster {name!r}", kind="")
        return clusters[name]

    @app.get("/clusters/{cluster}/version")
    def version(cluster: str) -> dict[str, str]:
        return {"major": "1", "minor": K8S_VERSION.split(".")[1],
                "gitVersion": f"v{K8S_VERSION}.0-carbonsched-emulator", "platform": "linux/amd64"}

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

    @app.post("/clusters/{cluster}/apis/batch/v1/namespaces/{ns}/jobs", status_code=201)
    async def create_job(cluster: str, ns: str, request: Request) -> Any:
        c = cluster_or_404(cluster)
        if isinstance(c, JSONResponse):
            return c
        try:
            body = await request.json()
        except ValueError:
            return status_error(400, "BadRequest", "the body is not JSON")
        name = (body.get("metadata") or {}).get("name", "")
        if ns not in c.namespaces:
            return status_error(404, "NotFound", f'namespaces "{ns}" not found', ns,
                                "namespaces")
        meta_ns = (body.get("metadata") or {}).get("namespace")
        if meta_ns and meta_ns != ns:
            return status_error(400, "BadRequest", "the namespace of the provided object does "
                                "not match the namespace sent on the request", name)
        problems = validate_job(body)
        if problems:
            return status_error(422, "Invalid", f'Job.batch "{name}" is invalid: '
                                + "; ".join(problems), name,
                                causes=[{"reason": "FieldValueInvalid", "message": p}
                                        for p in problems])
        with lock:
            if (ns, name) in c.jobs:
                return status_error(409, "AlreadyExists", f'jobs.batch "{name}" already exists',
                                    name)
            obj = copy.deepcopy(body)
            obj.setdefault("metadata", {})
            obj["metadata"].update(namespace=ns, uid=str(uuid.uuid4()),
                                   resourceVersion=c.next_rv(), generation=1,
                                   creationTimestamp=_iso(_now()))
            obj["spec"].setdefault("parallelism", 1)
            obj["spec"].setdefault("completions", 1)
            obj["spec"].setdefault("completionMode", "NonIndexed")
            obj["status"] = {}
            c.jobs[(ns, name)] = obj
            return c.progress((ns, name))

    @app.get("/clusters/{cluster}/apis/batch/v1/namespaces/{ns}/jobs")
    def list_jobs(cluster: str, ns: str, labelSelector: str | None = None) -> Any:  # noqa: N803
        c = cluster_or_404(cluster)
        if isinstance(c, JSONResponse):
            return c
        with lock:
            items = [c.progress(k) for k, j in c.jobs.items() if k[0] == ns and
                     _selector_matches(labelSelector, j["metadata"].get("labels") or {})]
            return {"apiVersion": "batch/v1", "kind": "JobList",
                    "metadata": {"resourceVersion": str(c.rv)}, "items": items}

    @app.get("/clusters/{cluster}/apis/batch/v1/namespaces/{ns}/jobs/{name}")
    def get_job(cluster: str, ns: str, name: str) -> Any:
        c = cluster_or_404(cluster)
        if isinstance(c, JSONResponse):
            return c
        with lock:
            if (ns, name) not in c.jobs:
                return status_error(404, "NotFound", f'jobs.batch "{name}" not found', name)
            return c.progress((ns, name))

    @app.patch("/clusters/{cluster}/apis/batch/v1/namespaces/{ns}/jobs/{name}")
    async def patch_job(cluster: str, ns: str, name: str, request: Request) -> Any:
        c = cluster_or_404(cluster)
        if isinstance(c, JSONResponse):
            return c
        patch = await request.json()
        with lock:
            if (ns, name) not in c.jobs:
                return status_error(404, "NotFound", f'jobs.batch "{name}" not found', name)
            old = c.jobs[(ns, name)]
            if isinstance(patch, list):
                return status_error(415, "UnsupportedMediaType",
                                    "JSON patch is not emulated; use a merge patch", name)
            new = merge_patch(old, patch)
            for f in ("uid", "creationTimestamp", "name", "namespace"):
                new["metadata"][f] = old["metadata"][f]
            check = {k: v for k, v in new.items() if k != "status"}
            check["metadata"] = {k: v for k, v in new["metadata"].items()}
            problems = validate_job(check)
            if problems:
                return status_error(422, "Invalid", f'Job.batch "{name}" is invalid: '
                                    + "; ".join(problems), name)
            if new.get("spec") != old.get("spec"):
                new["metadata"]["generation"] = old["metadata"].get("generation", 1) + 1
            new["metadata"]["resourceVersion"] = c.next_rv()
            c.jobs[(ns, name)] = new
            if old["spec"].get("suspend") and not new["spec"].get("suspend"):
                c.released[(ns, name)] = _now()
            return c.progress((ns, name))

    @app.delete("/clusters/{cluster}/apis/batch/v1/namespaces/{ns}/jobs/{name}")
    def delete_job(cluster: str, ns: str, name: str) -> Any:
        c = cluster_or_404(cluster)
        if isinstance(c, JSONResponse):
            return c
        with lock:
            if (ns, name) not in c.jobs:
                return status_error(404, "NotFound", f'jobs.batch "{name}" not found', name)
            obj = c.jobs.pop((ns, name))
            c.released.pop((ns, name), None)
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "details": {"name": name, "group": "batch", "kind": "jobs",
                            "uid": obj["metadata"]["uid"]}}

    return app


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
    uvicorn.run(create_app(contexts, args.run_seconds), host=args.host, port=args.port,
                log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
