"""Kubernetes adapter: one workload object per placement, with the official ``kubernetes`` client.

Each Kubernetes site names a kubeconfig context, a namespace and a workload kind
(``[sites.backend]``): a ``batch/v1`` Job (the default, described here), a Job or JobSet admitted
by Kueue, a JobSet, or a Volcano Job — the objects, how each is held until its planned start and
how its status reads are in :mod:`carbonsched.adapters.dispatch.k8s_workloads`. Every kind is
created, read, listed, patched and deleted through the generic API (``CustomObjectsApi``, with
``fieldValidation=Strict``: an unknown field is refused, never dropped). A Job:

- requests ``nvidia.com/gpu: <gpus>`` as a limit (the NVIDIA device plugin's resource) and selects
  nodes of the GPU type with ``nodeSelector {nvidia.com/gpu.product: <type>}`` (the label NVIDIA's
  GPU feature discovery sets; configurable);
- carries labels ``app.kubernetes.io/managed-by=carbonsched``, ``carbonsched.io/key-hash`` (the
  dispatch key hashed: label values allow 63 characters), ``carbonsched.io/job``,
  ``carbonsched.io/piece`` and ``carbonsched.io/plan``; the exact ids are annotations
  (``carbonsched.io/key``, ``carbonsched.io/job-id``, ``carbonsched.io/plan-id``);
- is created with ``spec.suspend: true`` (held: no pod is made) and released at its planned start
  by :meth:`KubernetesAdapter.release` (the service calls
  :func:`carbonsched.dispatch.outbox.release_due` every minute). ``activeDeadlineSeconds`` bounds
  the run to the placement's deadline, or for a pausing piece of a preemptible job to
  :data:`~carbonsched.adapters.dispatch.base.CHECKPOINT_SIGNAL_LEAD_S` before its planned end
  (:meth:`KubernetesAdapter.active_deadline_s`), so that the pod, told to checkpoint by SIGTERM
  then, is gone by that end; a release or resume later than planned sets it to the time left to
  that stop (:data:`A_STOP`), never the whole length again, and a run Kueue admits, or a gang
  Volcano schedules, after a wait in its queue gets its stop less its start
  (:meth:`KubernetesAdapter.keep_planned_stops`).

A create that answers 409 AlreadyExists (a retry after a lost response, a second dispatcher) is a
success only when the object there carries our labels *and* our key for this job; otherwise it is a
foreign object, reported as :class:`~carbonsched.errors.BackendRejectedError` with
``conflict=True`` and never overwritten or deleted. Source: Kubernetes API conventions
(https://github.com/kubernetes/community/blob/master/contributors/devel/sig-architecture/api-conventions.md),
Job suspension (https://kubernetes.io/docs/concepts/workloads/controllers/job/#suspending-a-job).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Collection
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from carbonsched.adapters.dispatch.base import (
    CHECKPOINT_SIGNAL_LEAD_S,
    NEVER_RAN,
    BackendJob,
    DispatchRequest,
    WorkAction,
    WorkOutcome,
    short_hash,
)
from carbonsched.adapters.dispatch.k8s_podspec import BUNDLE_FIX, pod_template_problem
from carbonsched.adapters.dispatch.k8s_workloads import (
    HOLD_GATE,
    JOB,
    JOBSET,
    JOBSET_NAME_LABEL,
    KUEUE_QUEUE_LABEL,
    KUEUE_WORKLOAD,
    RELEASED_PAST_STOP,
    RESOURCES,
    VOLCANO_JOB,
    VOLCANO_JOB_LABEL,
    WORKLOAD_KINDS,
    Reading,
    Resource,
    job_spec,
    jobset_manifest,
    parse_time,
    read_job,
    read_jobset,
    read_kueue,
    read_volcano,
    resource_for,
    volcano_manifest,
)
from carbonsched.domain import JobState, ReasonCode
from carbonsched.errors import BackendError, BackendRejectedError, BackendUnavailableError

MANAGED_BY = "app.kubernetes.io/managed-by"
OWNER = "carbonsched"
L_KEY_HASH = "carbonsched.io/key-hash"
L_JOB = "carbonsched.io/job"
L_PIECE = "carbonsched.io/piece"
L_PLAN = "carbonsched.io/plan"
A_KEY = "carbonsched.io/key"
A_JOB = "carbonsched.io/job-id"
A_PLAN = "carbonsched.io/plan-id"
A_START = "carbonsched.io/planned-start"
A_END = "carbonsched.io/planned-end"
A_STOP = "carbonsched.io/stop-at"
"""Annotation: the instant the run is stopped as planned (UTC), the planned start +
:meth:`KubernetesAdapter.active_deadline_s`; a late release (:meth:`KubernetesAdapter.release`)
keeps it. A grid event's hold or pause moves it, with :data:`A_END`, by the event's delay
(the ``end_by`` of :meth:`KubernetesAdapter.unhold` and :meth:`KubernetesAdapter.resume`)."""
MIN_ACTIVE_DEADLINE_S = 1
"""The least ``activeDeadlineSeconds`` carbonsched sets: the Job API's own bound (the field
"must be a positive integer", Job API reference). [s]"""
GPU_RESOURCE = "nvidia.com/gpu"
GPU_SHARED_RESOURCE = "nvidia.com/gpu.shared"
"""Default resource of a ``gpu_milli`` job: the NVIDIA device plugin's time-slicing with
``renameByDefault: true`` (k8s-device-plugin README, "Shared Access to GPUs")."""
L_PLACEHOLDER = "carbonsched.io/placeholder"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
KUEUE_REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
"""Pod-template annotation asking Kueue to admit the whole PodSet inside one domain of the
named topology level (Kueue TAS; the Workload CRD's ``podSetTopologyRequest.required``)."""
KUEUE_PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"
"""Pod-template annotation asking Kueue to pack the PodSet into as few domains of the named
level as it can (``podSetTopologyRequest.preferred``)."""
TOPOLOGY_LABEL = "cloud.provider.com/topology-block"
"""Default node label of the network-domain level (the label of Kueue's TAS examples);
``Settings.k8s_topology_label`` names the cluster's own."""


def label_value(text: str) -> str:
    """``text`` made a valid label value (<= 63 of ``[A-Za-z0-9._-]``, alphanumeric ends)."""
    v = re.sub(r"[^A-Za-z0-9._-]", "-", text)
    if len(v) > 63:
        v = v[:52] + "-" + short_hash(text, 10)
    return v.strip("-_.") or short_hash(text, 10)


def job_name(job_id: str, piece: int) -> str:
    """The Job's name: DNS-1123, <= 63 characters, unique per key through a hash suffix."""
    slug = re.sub(r"[^a-z0-9-]", "-", job_id.lower()).strip("-")[:40].strip("-")
    return f"cs-{slug}-{piece}-{short_hash(f'{job_id}#{piece}', 8)}".replace("--", "-")


def _volume(v: dict[str, Any]) -> dict[str, Any]:
    """A pod volume from a payload volume (host_path, claim, config_map, secret, empty_dir)."""
    out: dict[str, Any] = {"name": v["name"]}
    if v.get("host_path"):
        out["hostPath"] = {"path": v["host_path"]}
    elif v.get("claim"):
        out["persistentVolumeClaim"] = {"claimName": v["claim"],
                                        **({"readOnly": True} if v.get("read_only") else {})}
    elif v.get("config_map"):
        out["configMap"] = {"name": v["config_map"]}
    elif v.get("secret"):
        out["secret"] = {"secretName": v["secret"]}
    else:
        out["emptyDir"] = {}
    return out


def _iso(ts: datetime) -> str:
    return ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class KubernetesAdapter:
    """Dispatch to one namespace of one Kubernetes cluster (a kubeconfig context).

    Parameters
    ----------
    context, namespace
        The kubeconfig context and the namespace of the site's workloads.
    kubeconfig
        Path of the kubeconfig; None uses ``$KUBECONFIG`` or ``~/.kube/config``.
    image
        Container image of a job that names a command but no image, and of the placeholder.
    gpu_product_label
        Node label whose value is the GPU type.
    gpu_products
        GPU type -> label value, when the catalog's names differ from the cluster's
        (``{"A100": "NVIDIA-A100-SXM4-80GB"}``); identity otherwise.
    timeout_s
        Timeout of each API call. [s]
    gpu_share_resource
        The shared-GPU resource name for ``gpu_milli`` jobs (:meth:`gpu_limits`); how many
        shares one GPU offers is the catalog pool's ``shares_per_gpu``, carried by each
        request.
    workload
        What each placement runs as: ``"job"``, ``"kueue"``, ``"jobset"`` or ``"volcano"``
        (:mod:`carbonsched.adapters.dispatch.k8s_workloads`).
    queue
        The Kueue LocalQueue (``workload="kueue"``) or Volcano Queue (``workload="volcano"``).
    clock
        The instant now (tz-aware), for the time a released or resumed run has left
        (:meth:`release`, :meth:`resume`); default the wall clock, which is the one
        ``activeDeadlineSeconds`` counts on.

    Raises
    ------
    ValueError
        An unknown ``workload``, or ``"kueue"`` without a ``queue``.
    """

    kind = "kubernetes"

    def __init__(self, context: str, namespace: str, *, kubeconfig: str | Path | None = None,
                 image: str = "busybox:1.36", gpu_product_label: str = GPU_PRODUCT_LABEL,
                 gpu_products: dict[str, str] | None = None, timeout_s: float = 10.0,
                 gpu_share_resource: str = GPU_SHARED_RESOURCE,
                 workload: str = "job", queue: str | None = None,
                 topology_label: str = TOPOLOGY_LABEL,
                 clock: Callable[[], datetime] | None = None) -> None:
        if workload not in WORKLOAD_KINDS:
            raise ValueError(f"unknown Kubernetes workload {workload!r}; give one of "
                             f"{', '.join(WORKLOAD_KINDS)}")
        if workload == "kueue" and not queue:
            raise ValueError("workload 'kueue' needs the LocalQueue name (queue)")
        self.context = context
        self.namespace = namespace
        self.kubeconfig = str(kubeconfig) if kubeconfig else None
        self.workload = workload
        self.queue = queue
        self.topology_label = topology_label
        # sites sharing a namespace but not a workload kind must not share an adapter
        self.name = f"kubernetes:{context}/{namespace}" + (
            "" if workload == "job" else f"[{workload}]")
        self.image = image
        self.gpu_product_label = gpu_product_label
        self.gpu_products = gpu_products or {}
        self.timeout_s = timeout_s
        self.gpu_share_resource = gpu_share_resource
        self.clock = clock or (lambda: datetime.now(UTC))
        self._api: Any = None
        self._core: Any = None
        self._lock = threading.Lock()

    # -- plumbing -------------------------------------------------------------------------------
    def _custom(self) -> Any:
        """The generic API (``CustomObjectsApi``: any group, version and plural, plain dicts)."""
        with self._lock:
            if self._api is None:
                from carbonsched.errors import require_extra

                require_extra("kubernetes.client", "dispatch to Kubernetes")
                from kubernetes import client, config
                from kubernetes.config.config_exception import ConfigException

                try:
                    api_client = config.new_client_from_config(
                        config_file=self.kubeconfig, context=self.context)
                except (ConfigException, OSError, TypeError) as exc:
                    raise BackendUnavailableError(
                        f"{self.name}: no usable kubeconfig context {self.context!r} "
                        f"({self.kubeconfig or '$KUBECONFIG or ~/.kube/config'}): {exc}; set "
                        "CARBONSCHED_KUBECONFIG to a kubeconfig with that context; "
                        "`carbonsched dispatch --dry-run` prints the manifests without "
                        "one") from exc
                api_client.configuration.retries = 0
                api_client.rest_client.pool_manager.connection_pool_kw["retries"] = 0
                self._api = client.CustomObjectsApi(api_client)
                self._core = client.CoreV1Api(api_client)
            return self._api

    def _pods(self) -> Any:
        self._custom()
        return self._core

    def _call(self, what: str, fn: Any, *args: Any, key: str = "", **kw: Any) -> Any:
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            return fn(*args, _request_timeout=self.timeout_s, **kw)
        except ApiException as exc:
            msg = _status_message(exc)
            if exc.status in (None, 0) or exc.status >= 500 or exc.status == 429:
                raise BackendUnavailableError(
                    f"{self.name}: API server failed {what} ({exc.status}): {msg}") from exc
            if exc.status in (401, 403):
                raise BackendRejectedError(
                    self.name, key, f"{what} forbidden ({exc.status}): {msg}; grant the service "
                    "account the Role in docs/dispatch.md (create, get, list, patch, delete on "
                    f"the {self.workload} workload's resources)") from exc
            raise _Api(exc.status, msg) from exc
        except (HTTPError, OSError) as exc:
            raise BackendUnavailableError(
                f"{self.name}: API server unreachable during {what}: "
                f"{type(exc).__name__}: {str(exc)[:200]}") from exc

    # -- contract -------------------------------------------------------------------------------
    def gpu_limits(self, req: DispatchRequest, gpus_per_pod: int | None = None
                   ) -> dict[str, str]:
        """The container's GPU limits: whole GPUs, a MIG slice or GPU shares.

        The slice is the plan's (:attr:`DispatchRequest.mig_profile`, ``gpu_milli``), not the
        payload's. ``nvidia.com/gpu: <n>`` for whole GPUs; ``nvidia.com/mig-<profile>: 1``
        for a ``mig_profile`` (the NVIDIA device plugin's ``mixed`` MIG strategy, which names one
        resource per profile); ``<gpu_share_resource>: <k>`` for ``gpu_milli``, ``k`` =
        :attr:`DispatchRequest.gpu_shares` (the device plugin's time-slicing with
        ``renameByDefault: true`` offers ``nvidia.com/gpu.shared``, ``replicas`` per GPU: the
        catalog pool's ``shares_per_gpu``, and the plan booked exactly these shares). Source:
        NVIDIA k8s-device-plugin README, "Shared Access to GPUs" and "MIG support".
        """
        if req.mig_profile:
            return {f"nvidia.com/mig-{req.mig_profile}": "1"}
        if req.gpu_milli:
            return {self.gpu_share_resource: str(req.gpu_shares)}
        return {GPU_RESOURCE: str(req.gpus if gpus_per_pod is None else gpus_per_pod)}

    def pod_spec(self, req: DispatchRequest, gpus_per_pod: int | None = None) -> dict[str, Any]:
        """The pod spec every workload kind runs ``req`` with (a plain dict).

        Built from the job's payload: its ``image`` (else this adapter's default image),
        ``command`` (shell text runs as ``sh -c``; a list is the exec form) and ``args``,
        ``workdir``, ``env``, ``volumes`` and ``service_account``; or, when the job gives a
        full ``pod_template``, that template's spec. Either way carbonsched sets what the plan
        decides: the GPU limits (:meth:`gpu_limits`) and ``nodeSelector`` of the container
        named ``job`` (else the first), the piece's ``CARBONSCHED_*`` variables (after the
        job's own; they cannot be overridden), ``restartPolicy: Never`` and, for a pausing
        piece, the checkpoint grace period (:meth:`checkpoint_grace_s`). A placeholder runs
        ``sleep <planned seconds>``.

        Parameters
        ----------
        req
            The placement.
        gpus_per_pod
            GPUs each pod requests as ``nvidia.com/gpu`` limits; default ``req.gpus`` (one pod
            holds the whole gang). A multi-pod workload passes ``req.gpus_per_node``. [-]
        """
        import copy

        p = req.payload
        product = self.gpu_products.get(req.gpu_type, req.gpu_type)
        env = [{"name": k, "value": v} for k, v in {**req.user_env(),
                                                   **req.job_env()}.items()]
        if p is not None and p.pod_template:
            pod_spec: dict[str, Any] = copy.deepcopy(dict(p.pod_template.get("spec") or {}))
            containers = pod_spec["containers"]
            main = next((c for c in containers if c.get("name") == "job"), containers[0])
            main["env"] = [e for e in (main.get("env") or [])
                           if e.get("name") not in {x["name"] for x in env}] + env
        else:
            main = {"name": "job", "image": (p and p.image) or self.image, "env": env}
            if p is not None and isinstance(p.command, tuple):
                main["command"] = list(p.command)
                if p.args:
                    main["args"] = list(p.args)
            elif p is not None and p.command:
                main["command"] = ["sh", "-c", p.command]
                if p.args:   # "$0" is the first argument after the text (sh(1))
                    main["args"] = ["sh", *p.args]
            elif p is not None and p.args:
                main["args"] = list(p.args)
            elif req.placeholder or p is None:
                main["command"] = ["sh", "-c", f"sleep {req.duration_s}"]
            if p is not None and p.workdir:
                main["workingDir"] = p.workdir
            if p is not None and p.volumes:
                main["volumeMounts"] = [{"name": v["name"], "mountPath": v["mount_path"],
                                         **({"readOnly": True} if v.get("read_only") else {})}
                                        for v in p.volumes]
            pod_spec = {"containers": [main]}
            if p is not None and p.volumes:
                pod_spec["volumes"] = [_volume(v) for v in p.volumes]
            if p is not None and p.service_account:
                pod_spec["serviceAccountName"] = p.service_account
        resources = main.setdefault("resources", {})
        resources["limits"] = {**(resources.get("limits") or {}),
                               **self.gpu_limits(req, gpus_per_pod)}
        pod_spec["restartPolicy"] = "Never"
        pod_spec["nodeSelector"] = {**(pod_spec.get("nodeSelector") or {}),
                                    self.gpu_product_label: product}
        grace = self.checkpoint_grace_s(req)
        if grace is not None:
            # a pausing piece is stopped the grace period before its planned end (SIGTERM:
            # write the checkpoint) and is gone by that end
            pod_spec["terminationGracePeriodSeconds"] = grace
        return pod_spec

    def checkpoint_grace_s(self, req: DispatchRequest) -> int | None:
        """The pod's ``terminationGracePeriodSeconds`` of a pausing piece; None for any other.

        :data:`CHECKPOINT_SIGNAL_LEAD_S` (as Slurm's ``--signal=B:USR1@<lead>``): the time
        from SIGTERM, when :meth:`active_deadline_s` stops the run, to the piece's planned end.
        A piece shorter than that plus :data:`MIN_ACTIVE_DEADLINE_S` gets what is left after
        the least deadline (a 120 s piece: 119 s), so that the grace never runs past the end. [s]
        """
        if not req.pauses:
            return None
        return max(0, min(CHECKPOINT_SIGNAL_LEAD_S, req.duration_s - MIN_ACTIVE_DEADLINE_S))

    def active_deadline_s(self, req: DispatchRequest) -> int:
        """Run-time bound from release (``activeDeadlineSeconds``). [s]

        A pausing piece: its duration less :meth:`checkpoint_grace_s`, never below
        :data:`MIN_ACTIVE_DEADLINE_S`: SIGTERM comes the grace period before the planned end
        (``CARBONSCHED_PIECE_END``) and the pod is gone by it, as Slurm signals
        ``--signal=B:USR1@<lead>`` before its ``--time`` limit. Any other piece: to the
        placement's deadline (at least its duration).

        The timer starts when a held Job is released and restarts when a suspended Job is
        resumed (Kubernetes Job docs, "Suspending a Job": ``startTime`` is reset);
        :meth:`release` and :meth:`resume` therefore set it to the time left to
        :meth:`stop_at` (:meth:`_run_bound`).
        """
        grace = self.checkpoint_grace_s(req)
        if grace is not None:
            return max(req.duration_s - grace, MIN_ACTIVE_DEADLINE_S)
        return max(int((req.deadline - req.start).total_seconds()), req.duration_s)

    def metadata(self, req: DispatchRequest) -> dict[str, Any]:
        """The object's metadata: name, namespace, our labels and the exact ids as annotations."""
        return {
            "name": job_name(req.job_id, req.piece),
            "namespace": self.namespace,
            "labels": {MANAGED_BY: OWNER, L_KEY_HASH: short_hash(req.key, 16),
                       L_JOB: label_value(req.job_id), L_PIECE: str(req.piece),
                       L_PLAN: label_value(req.plan_id),
                       **({L_PLACEHOLDER: "true"} if req.placeholder else {})},
            "annotations": {A_KEY: req.key, A_JOB: req.job_id, A_PLAN: req.plan_id,
                            A_START: _iso(req.start), A_END: _iso(req.end),
                            A_STOP: _iso(req.start + timedelta(
                                seconds=self.active_deadline_s(req)))},
        }

    def _pod_labels(self, req: DispatchRequest) -> dict[str, str]:
        return {MANAGED_BY: OWNER, L_KEY_HASH: short_hash(req.key, 16)}

    def pod_metadata(self, req: DispatchRequest) -> dict[str, dict[str, str]]:
        """The pod template's labels and annotations: the job's, then carbonsched's.

        The job's ``pod_template.metadata`` ``labels`` and ``annotations`` (empty without a
        template), with carbonsched's own pod labels (``app.kubernetes.io/managed-by``,
        ``carbonsched.io/key-hash``) over them: carbonsched's win on a clash, as do the Kueue
        topology annotations :meth:`topology_annotations` adds.
        """
        p = req.payload
        meta = ((p.pod_template or {}).get("metadata") or {}) if p is not None else {}
        ours = self._pod_labels(req)
        out = {"labels": {**ours, **{k: v for k, v in (meta.get("labels") or {}).items()
                                     if k not in ours}},
               "annotations": dict(meta.get("annotations") or {})}
        return {k: v for k, v in out.items() if v}

    def manifest(self, req: DispatchRequest) -> dict[str, Any]:
        """The object :meth:`submit` creates for ``req`` under this site's workload kind.

        A ``batch/v1`` Job (``job``; ``kueue`` with ``nodes == 1``), a JobSet (``jobset``;
        ``kueue`` with ``nodes > 1``) or a Volcano Job (``volcano``), held (module docstring of
        :mod:`~carbonsched.adapters.dispatch.k8s_workloads`). A plain dict, as sent.

        Raises
        ------
        BackendRejectedError
            The job's payload cannot be made into a manifest: a ``pod_template`` whose fields
            have the wrong type (``pod_template_problem`` of
            :mod:`~carbonsched.adapters.dispatch.k8s_podspec`: a template that did not pass the
            job schema, e.g. in a plan written by hand), an image given as a path (an OCI
            bundle, which only Slurm runs; the planner places such a job at Slurm sites only),
            or any other error building it. The message names the job and the field; nothing
            is sent to the cluster.
        """
        template = req.payload.pod_template if req.payload is not None else None
        what = "payload" if template is None else "pod_template"
        if template is not None and (why := pod_template_problem(template)) is not None:
            raise BackendRejectedError(
                self.name, req.key, f"job {req.job_id}: field 'pod_template': {why[0]}; "
                f"{why[1]} (nothing was sent to the cluster)")
        image = (req.payload.image if req.payload is not None else None) or self.image
        if template is None and image.startswith("/"):
            named = ("field 'image'" if req.payload is not None and req.payload.image else
                     "the site's default image (CARBONSCHED_K8S_IMAGE)")
            raise BackendRejectedError(
                self.name, req.key, f"job {req.job_id}: {named}: {image!r} is a path (an OCI "
                "bundle, which only Slurm's --container runs), not an image a pod can pull; "
                f"{BUNDLE_FIX} (nothing was sent to the cluster)")
        try:
            return self._manifest(req)
        except (TypeError, ValueError, KeyError, AttributeError, IndexError) as exc:
            raise BackendRejectedError(
                self.name, req.key, f"job {req.job_id}: field {what!r}: no {self.workload} "
                f"manifest can be built from it ({type(exc).__name__}: {exc}); fix the job's "
                f"{what} (nothing was sent to the cluster)") from exc

    def _manifest(self, req: DispatchRequest) -> dict[str, Any]:
        res = resource_for(self.workload, req.nodes)
        deadline_s = self.active_deadline_s(req)
        pod = self.pod_spec(req, req.gpus_per_node)
        meta = self.pod_metadata(req)
        if res is JOB:
            return self._topology({"apiVersion": JOB.api_version, "kind": JOB.kind,
                                   "metadata": self.metadata(req),
                                   "spec": job_spec(pod, meta, deadline_s, suspend=True,
                                                    pods=req.nodes)}, req)
        if res is JOBSET:
            return self._topology(jobset_manifest(self.metadata(req), pod, meta, req.nodes,
                                                  deadline_s, self._pod_labels(req)), req)
        return volcano_manifest(self.metadata(req), pod, meta, req.nodes, self.queue,
                                deadline_s)

    def topology_annotations(self, req: DispatchRequest) -> dict[str, str]:
        """Kueue topology-aware scheduling annotations of a topology-bound gang's pods.

        ``kueue.x-k8s.io/podset-required-topology: <topology_label>`` for ``max_domains == 1``
        (every pod of the PodSet in one domain of that level), ``podset-preferred-topology``
        for a larger span (Kueue has no count of domains: it packs into as few as it can; the
        plan's domain rows hold the count). Only on a ``kueue`` site with a gang of more than
        one node; empty otherwise. Source: Kueue, "Topology Aware Scheduling"
        (https://kueue.sigs.k8s.io/docs/concepts/topology_aware_scheduling/), and the
        annotation names in the Workload CRD (``podSetTopologyRequest``).
        """
        if self.workload != "kueue" or not req.max_domains or req.nodes < 2:
            return {}
        key = KUEUE_REQUIRED_TOPOLOGY if req.max_domains == 1 else KUEUE_PREFERRED_TOPOLOGY
        return {key: self.topology_label}

    def _topology(self, obj: dict[str, Any], req: DispatchRequest) -> dict[str, Any]:
        """``obj`` with :meth:`topology_annotations` on each pod template it holds."""
        ann = self.topology_annotations(req)
        if not ann:
            return obj

        def walk(node: Any) -> None:
            if isinstance(node, dict):
                tmpl = node.get("template")
                if isinstance(tmpl, dict) and "containers" in (tmpl.get("spec") or {}):
                    meta = tmpl.setdefault("metadata", {})
                    meta["annotations"] = {**(meta.get("annotations") or {}), **ann}
                for v in node.values():
                    walk(v)
            elif isinstance(node, list):
                for v in node:
                    walk(v)

        walk(obj)
        return obj

    def render(self, req: DispatchRequest) -> str:
        """The manifest as JSON (what :meth:`submit` creates)."""
        return json.dumps(self.manifest(req), indent=2)

    def submit(self, req: DispatchRequest) -> BackendJob:
        """Create the object (held); on 409 accept it only if it is ours for the same key.

        The manifest is built first (:meth:`manifest`): a payload it cannot be built from is
        refused (:class:`~carbonsched.errors.BackendRejectedError`) before any call.
        """
        body = self.manifest(req)
        api = self._custom()
        res = resource_for(self.workload, req.nodes)
        name = body["metadata"]["name"]
        try:
            obj = self._call("create", api.create_namespaced_custom_object, res.group,
                             res.version, self.namespace, res.plural, body,
                             field_validation="Strict", key=req.key)
        except _Api as exc:
            if exc.status == 409:
                existing = self._read(res, name)
                if existing is not None and _owner_key(existing) == req.key:
                    return self._backend_jobs([existing])[req.key]
                raise BackendRejectedError(
                    self.name, req.key, f"{res.kind} {self.namespace}/{name} exists and is not "
                    "ours for this job (labels/annotation differ); it is left untouched",
                    conflict=True) from exc
            if exc.status == 404:
                raise BackendRejectedError(
                    self.name, req.key, f"namespace {self.namespace!r} does not exist in "
                    f"context {self.context!r}, or the cluster does not serve "
                    f"{res.api_version} {res.plural} (install its CRD): {exc.message}") from exc
            raise BackendRejectedError(
                self.name, req.key, f"{res.kind} ({res.api_version}) create refused "
                f"({exc.status}): {exc.message}") from exc
        return self._backend_jobs([obj])[req.key]

    def _read(self, res: Resource, name: str) -> dict[str, Any] | None:
        api = self._custom()
        try:
            return self._call("read", api.get_namespaced_custom_object, res.group, res.version,
                              self.namespace, res.plural, name)
        except _Api as exc:
            if exc.status == 404:
                return None
            raise BackendError(f"{self.name}: read {res.plural}/{name} failed ({exc.status}): "
                               f"{exc.message}") from exc

    def _list(self, res: Resource, selector: str = f"{MANAGED_BY}={OWNER}",
              missing_ok: bool = True) -> list[dict[str, Any]]:
        api = self._custom()
        try:
            out = self._call("list", api.list_namespaced_custom_object, res.group, res.version,
                             self.namespace, res.plural, label_selector=selector)
        except _Api as exc:
            if exc.status == 404 and missing_ok:
                return []
            raise BackendError(f"{self.name}: list {res.api_version} {res.plural} failed "
                               f"({exc.status}): {exc.message}") from exc
        return list(out.get("items") or [])

    def _objects(self) -> list[tuple[Resource, dict[str, Any]]]:
        return [(res, o) for res in RESOURCES[self.workload] for o in self._list(res)]

    def status(self, keys: Collection[str] | None = None) -> dict[str, BackendJob]:
        """Our objects in the namespace by key.

        One list call per resource with our label selector; Kueue's Workloads and Volcano's
        pods are listed too for those kinds.
        """
        want = set(keys) if keys is not None else None
        objs = [o for _, o in self._objects()
                if (k := _owner_key(o)) is not None and (want is None or k in want)]
        return self._backend_jobs(objs)

    def _backend_jobs(self, objs: list[dict[str, Any]]) -> dict[str, BackendJob]:
        """BackendJobs of our objects, reading Kueue Workloads / Volcano pods when needed."""
        workloads: dict[str, dict[str, Any]] = {}
        gated: dict[str, bool] = {}
        deadline: set[str] = set()
        if self.workload == "kueue" and any(
                KUEUE_QUEUE_LABEL in (o["metadata"].get("labels") or {}) for o in objs):
            for wl in self._list(KUEUE_WORKLOAD, selector=""):
                for ref in wl["metadata"].get("ownerReferences") or []:
                    workloads[ref.get("uid", "")] = wl
        if self.workload == "volcano" and objs:
            # one object (a submission, a read): its own pods only, never every pod of the
            # namespace, which made a plan's submissions quadratic in its Volcano Jobs
            gated, deadline = self._volcano_pods(
                objs[0]["metadata"]["name"] if len(objs) == 1 else None)
        out = {}
        readings = [self._reading(obj, workloads, gated) for obj in objs]
        # the child Jobs of every JobSet that failed for a reason it does not say: one list
        children = self._jobset_children([
            obj["metadata"]["name"] for obj, r in zip(objs, readings, strict=True)
            if obj.get("kind") == JOBSET.kind and r.state is JobState.FAILED
            and r.reason is not ReasonCode.DEADLINE_PASSED and obj["metadata"]["name"]
            not in deadline])
        for obj, r in zip(objs, readings, strict=True):
            meta = obj["metadata"]
            if r.state is JobState.FAILED and r.reason is not ReasonCode.DEADLINE_PASSED and (
                    meta["name"] in deadline or any(
                        read_job(c).reason is ReasonCode.DEADLINE_PASSED
                        for c in children.get(meta["name"], []))):
                # stopped by activeDeadlineSeconds: a pausing piece's planned stop (the outbox
                # records it Paused), or a run past its deadline
                r = Reading(JobState.FAILED, ReasonCode.DEADLINE_PASSED, "failed", r.start,
                            r.end, detail=f"activeDeadlineSeconds reached ({r.detail})")
            ann = meta.get("annotations") or {}
            past = parse_time(ann.get(RELEASED_PAST_STOP))
            if past is not None and r.state is JobState.FAILED and \
                    r.reason is ReasonCode.DEADLINE_PASSED and r.raw != NEVER_RAN:
                # released or resumed after its planned stop with parallelism 0: no pod ran
                r = Reading(JobState.FAILED, ReasonCode.DEADLINE_PASSED, NEVER_RAN, r.start,
                            r.end or past, detail=f"released or resumed at {_iso(past)}, after "
                            f"its planned stop at {ann.get(A_STOP, '?')}: parallelism 0, no "
                            "pod ran (DeadlineExceeded)")
            out[ann.get(A_KEY, "")] = BackendJob(
                key=ann.get(A_KEY, ""), plan_id=ann.get(A_PLAN, ""),
                backend_id=f"{self.context}/{self.namespace}/{meta['name']}", state=r.state,
                reason=r.reason, raw_state=r.raw, actual_start=r.start, actual_end=r.end,
                begin=parse_time(ann.get(A_START)), detail=r.detail)
        return out

    def _reading(self, obj: dict[str, Any], workloads: dict[str, dict[str, Any]],
                 gated: dict[str, bool]) -> Reading:
        kind, name = obj.get("kind"), obj["metadata"]["name"]
        if obj.get("apiVersion") == VOLCANO_JOB.api_version:
            return read_volcano(obj, gated.get(name, True))
        r = read_jobset(obj) if kind == JOBSET.kind else read_job(obj)
        if self.workload != "kueue":
            return r
        labelled = KUEUE_QUEUE_LABEL in (obj["metadata"].get("labels") or {})
        return read_kueue(r, labelled, self.queue or "",
                          workloads.get(obj["metadata"].get("uid", "")))

    def _volcano_pods(self, job: str | None = None) -> tuple[dict[str, bool], set[str]]:
        """Gated Volcano Jobs and those stopped at their deadline, from their pods.

        ``job`` names the one Volcano Job to read (its pods only, by the label
        ``volcano.sh/job-name``); None reads every pod of ours in the namespace.

        Returns ``{job name: True while any of its pods carries HOLD_GATE}`` and the Jobs
        with a pod the kubelet stopped at ``activeDeadlineSeconds`` (pod ``status.reason``
        ``DeadlineExceeded``, Kubernetes Pod lifecycle docs).
        """
        gated: dict[str, bool] = {}
        deadline: set[str] = set()
        for pod in self._our_pods(job):
            name = (pod["metadata"].get("labels") or {}).get(VOLCANO_JOB_LABEL)
            if name:
                gated[name] = gated.get(name, False) or _has_gate(pod)
                if (pod.get("status") or {}).get("reason") == "DeadlineExceeded":
                    deadline.add(name)
        return gated, deadline

    def _jobset_children(self, jobsets: Collection[str]) -> dict[str, list[dict[str, Any]]]:
        """The child Jobs of the JobSets named ``jobsets``, by JobSet name, in one list call.

        The JobSet controller labels each child Job ``jobset.sigs.k8s.io/jobset-name`` with its
        JobSet's name. One JobSet: its own children (``jobset-name=<name>``); more: every Job
        carrying the label (the existence selector), grouped here, so that a pass over N
        JobSets makes one list call, not N. A JobSet with no child Job maps to ``[]``; none
        named: ``{}``, no call.

        Raises
        ------
        BackendError
            The Jobs could not be listed.
        """
        want = set(jobsets)
        if not want:
            return {}
        out: dict[str, list[dict[str, Any]]] = {name: [] for name in want}
        sel = f"{JOBSET_NAME_LABEL}={next(iter(want))}" if len(want) == 1 else JOBSET_NAME_LABEL
        for job in self._list(JOB, selector=sel):
            name = (job["metadata"].get("labels") or {}).get(JOBSET_NAME_LABEL)
            if name in out:
                out[name].append(job)
        return out

    def _our_pods(self, job: str | None = None) -> list[dict[str, Any]]:
        core = self._pods()
        sel = f"{MANAGED_BY}={OWNER}" + (f",{VOLCANO_JOB_LABEL}={job}" if job else "")
        try:
            res = self._call("list pods", core.list_namespaced_pod, self.namespace,
                             label_selector=sel)
        except _Api as exc:
            raise BackendError(f"{self.name}: list pods failed ({exc.status}): "
                               f"{exc.message}") from exc
        return [core.api_client.sanitize_for_serialization(p) for p in (res.items or [])]

    def _find(self, key: str) -> tuple[Resource, dict[str, Any]] | None:
        """Our object of ``key`` and its resource; None when there is none.

        Listed by its key hash (``carbonsched.io/key-hash``, which :func:`_owner_key` checks
        too), so the cluster answers with this key's objects only, never every object of
        ours: the release pass calls this once per key due, and reading every object each
        time made a pass quadratic in the namespace's objects. The resources of the workload
        kind are listed in turn until it is found.
        """
        sel = f"{MANAGED_BY}={OWNER},{L_KEY_HASH}={short_hash(key, 16)}"
        for res in RESOURCES[self.workload]:
            for obj in self._list(res, selector=sel):
                if _owner_key(obj) == key:
                    return res, obj
        return None

    def cancel(self, key: str) -> bool:
        """Delete our object with this key (background propagation); False if there is none."""
        found = self._find(key)
        if found is None:
            return False
        res, obj = found
        api = self._custom()
        name = obj["metadata"]["name"]
        try:
            self._call("delete", api.delete_namespaced_custom_object, res.group, res.version,
                       self.namespace, res.plural, name, propagation_policy="Background")
        except _Api as exc:
            if exc.status == 404:
                return False
            raise BackendError(f"{self.name}: delete {res.plural}/{name} failed: "
                               f"{exc.message}") from exc
        return True

    def release(self, key: str) -> bool:
        """Release our held object with this key; False when it is not held or not ours.

        ``job``/``jobset``: unsuspend. ``kueue``: add the label ``kueue.x-k8s.io/queue-name``
        (the object stays suspended; Kueue admits and unsuspends it). ``volcano``: remove the
        scheduling gate from the Job's pods.

        Whenever it comes (the release pass on time or late, or a grid event's unhold), the
        run is bounded by the time left to its planned stop (:meth:`_run_bound`), never by its
        whole ``activeDeadlineSeconds`` counted from the release: a pausing piece released
        late still stops the checkpoint grace period before its planned end, before its next
        piece starts, and any other piece by its deadline. One released after its planned stop
        runs no pod and ends ``DeadlineExceeded`` at once, annotated :data:`RELEASED_PAST_STOP`
        (read raw :data:`~carbonsched.adapters.dispatch.base.NEVER_RAN`: recorded Failed, its
        work still owed), as :meth:`resume` does.

        Under Kueue the bound is set with the queue label; the Job controller sets
        ``startTime`` when Kueue admits the Workload and unsuspends the object, so this
        deadline counts from the admission: after a wait in Kueue's queue,
        :meth:`keep_planned_stops` (the release pass) lowers it to the planned stop less the
        admission, or makes a run still queued at its stop run no pod. A Kueue object whose
        stop has passed at its release is not queued at all: carbonsched unsuspends it with
        ``parallelism: 0`` (Kueue ignores an object without the label), so it takes no quota.
        A Volcano Job (no suspend; each pod's deadline counts from that pod's own start) is
        bounded pod by pod, and one past its stop is left gated (:meth:`_ungate`); a gang
        Volcano schedules after a wait is bounded by :meth:`keep_planned_stops` likewise.

        Raises
        ------
        BackendError
            The cluster refused a patch, or a JobSet's child Jobs (which carry the bound) do
            not exist yet; the release pass records it and tries again.
        """
        return self._release(key)[0]

    def _moved_stop(self, obj: dict[str, Any], end_by: datetime | None
                    ) -> tuple[datetime | None, dict[str, str], str]:
        """The run's stop with its planned end moved to ``end_by`` (a grid event's delay).

        A piece whose stop is at or before its planned end (:data:`A_STOP`, :data:`A_END`: a
        pausing piece, stopped the checkpoint grace before its end) keeps that grace before
        ``end_by``: both move by ``end_by - planned end``. Nothing moves when ``end_by`` is
        None or not later than the planned end, or for a piece whose stop is its deadline
        (past its end: ``end_by`` is capped by that deadline already).

        Returns
        -------
        stop : datetime or None
            The stop to bound the run by (:meth:`stop_at` when not moved).
        annotations : dict
            :data:`A_STOP` and :data:`A_END` to write with the patch that starts the run
            (empty when not moved).
        said : str
            The move, for the action's detail (empty when not moved).
        """
        stop = self.stop_at(obj)
        end = parse_time((obj["metadata"].get("annotations") or {}).get(A_END))
        if end_by is None or stop is None or end is None:
            return stop, {}, ""
        end_by = end_by.astimezone(UTC).replace(microsecond=0)
        if end_by <= end or stop > end:
            return stop, {}, ""
        new = stop + (end_by - end)
        return new, {A_STOP: _iso(new), A_END: _iso(end_by)}, (
            f"its planned stop moved from {_iso(stop)} to {_iso(new)} (its planned end from "
            f"{_iso(end)} to {_iso(end_by)}, by the grid event's delay)")

    def _release(self, key: str, end_by: datetime | None = None) -> tuple[bool, str]:
        """:meth:`release`, with what was patched (the text :meth:`unhold` reports).

        ``end_by``: the planned end moved by a grid event's hold (:meth:`_moved_stop`).
        """
        found = self._find(key)
        if found is None:
            return False, ""
        res, obj = found
        name = obj["metadata"]["name"]
        if res is VOLCANO_JOB:
            return self._ungate(key, name, obj, end_by)
        if not self._reading(obj, {}, {}).held:
            return False, ""
        kueue = self.workload == "kueue"
        if kueue and KUEUE_QUEUE_LABEL in (obj["metadata"].get("labels") or {}):
            return False, ""
        stop, moved, said_move = self._moved_stop(obj, end_by)
        bound, said, over = self._run_bound(res, obj, key, "release", stop=stop)
        patch: dict[str, Any] = {"spec": {"suspend": False, **bound}}
        if kueue and not over:
            # Kueue unsuspends it when it admits its Workload (startTime is set then)
            patch = {"metadata": {"labels": {KUEUE_QUEUE_LABEL: self.queue}}, "spec": bound}
            said = f"labelled {KUEUE_QUEUE_LABEL}: {self.queue}" + (f"; {said}" if said else "")
        elif kueue:
            # no pod runs: unsuspended by carbonsched, never queued to Kueue (no quota needed)
            said = f"not queued to Kueue; patched spec.suspend: false; {said}"
        else:
            said = "patched spec.suspend: false" + (f"; {said}" if said else "")
        ann = self._start_annotations(obj, stop, moved, over)
        if ann:
            patch.setdefault("metadata", {})["annotations"] = ann
        if said_move:
            said = f"{said_move}; {said}"
        api = self._custom()
        try:
            self._call("release", api.patch_namespaced_custom_object, res.group, res.version,
                       self.namespace, res.plural, name, patch,
                       _content_type="application/merge-patch+json", key=key)
        except _Api as exc:
            raise BackendError(f"{self.name}: release of {res.plural}/{name} refused "
                               f"({exc.status}): {exc.message}") from exc
        return True, f"{res.plural}/{name} {said}"

    def _start_annotations(self, obj: dict[str, Any], stop: datetime | None,
                           moved: dict[str, str], over: bool) -> dict[str, str]:
        """Annotations the patch that starts a run writes.

        The moved stop and end (:meth:`_moved_stop`); :data:`A_STOP` on an object made before
        carbonsched wrote it; :data:`RELEASED_PAST_STOP` (this instant) when no pod runs.
        """
        ann = dict(moved)
        if stop is not None and not moved and not (
                obj["metadata"].get("annotations") or {}).get(A_STOP):
            ann[A_STOP] = _iso(stop)
        if over:
            ann[RELEASED_PAST_STOP] = _iso(self.clock())
        return ann

    def keep_planned_stops(self, keys: Collection[str]) -> dict[str, str]:
        """Bound by its planned stop each of our runs that waited in a queue after its release.

        Kueue: :meth:`_keep_kueue_stops`; Volcano: :meth:`_keep_volcano_stops`. Other
        workloads: nothing to do (the release itself bounds the run, which starts then).

        A pass (every minute) costs a fixed number of list calls however many keys it is
        given: Kueue lists our Jobs and JobSets, and when a JobSet needs them the child Jobs
        of all of them, once each (:meth:`_jobset_children`); Volcano lists our Volcano Jobs
        and our pods once each. Only the patches and deletes that bound a run are per object.

        Parameters
        ----------
        keys
            Dispatch keys released (their planned start has come).

        Returns
        -------
        dict
            Key -> what was patched, for the keys patched now.

        Raises
        ------
        BackendError
            The cluster refused a patch or a delete, or could not be listed (the next pass
            tries again).
        """
        if not keys:
            return {}
        if self.workload == "kueue":
            return self._keep_kueue_stops(keys)
        if self.workload == "volcano":
            return self._keep_volcano_stops(keys)
        return {}

    def _keep_kueue_stops(self, keys: Collection[str]) -> dict[str, str]:
        """Bound by its planned stop each of our Kueue runs queued at its release.

        Under Kueue a release only queues the object; the Job controller sets ``startTime``
        when Kueue admits the Workload and unsuspends it, so the deadline set at the release
        (the time then left to :meth:`stop_at`) counts from the admission: a wait in Kueue's
        queue would lengthen the run past its planned stop by that wait, a pausing piece into
        its next piece's hours. Each pass therefore looks at our labelled objects of ``keys``:

        - admitted: ``activeDeadlineSeconds`` (of the Job, or of each of a JobSet's child Jobs)
          is lowered to the planned stop less its ``startTime`` wherever it ends later
          (:meth:`_run_bound` with ``started``): the field may change on a running Job, and the
          Job controller syncs the Job on the change, ending it then if the new deadline has
          passed (Kubernetes ``pkg/controller/job``, ``updateJob``). It ends
          ``DeadlineExceeded`` at its planned stop, or, admitted after the stop, at once;
        - still queued when its stop has passed: ``parallelism: 0`` and the least deadline,
          on the Job or its child Jobs (allowed on a suspended Job; Kueue remakes the pending
          Workload of a Job with zero pods): whenever Kueue admits it, no pod runs and it ends
          ``DeadlineExceeded`` at once.

        Kueue's own limit, the label ``kueue.x-k8s.io/max-exec-time-seconds`` (the Workload's
        ``spec.maximumExecutionTimeSeconds``), is not used: it also counts from the admission
        and may not change while the Workload is admitted (the Workload CRD's rule). A run
        admitted between two passes runs until the next pass at most past its stop.

        Parameters
        ----------
        keys
            Dispatch keys released (their planned start has come).

        Returns
        -------
        dict
            Key -> what was patched, for the keys patched now.

        Raises
        ------
        BackendError
            The cluster refused a patch or could not be listed (the next pass tries again).
        """
        want, out = set(keys), {}
        api = self._custom()
        live = [(res, obj, key) for res, obj in self._objects()
                if (key := _owner_key(obj)) in want
                and KUEUE_QUEUE_LABEL in (obj["metadata"].get("labels") or {})
                and self._reading(obj, {}, {}).state not in (
                    JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)]
        # the child Jobs of every live JobSet, listed once for the pass when one needs them
        # (never once per JobSet: a pass comes every minute)
        kids: dict[str, list[dict[str, Any]]] | None = None

        def children(res: Resource, obj: dict[str, Any]) -> list[dict[str, Any]] | None:
            nonlocal kids
            if res is not JOBSET:
                return None
            if kids is None:
                kids = self._jobset_children([o["metadata"]["name"] for r, o, _ in live
                                              if r is JOBSET])
            return kids.get(obj["metadata"]["name"], [])

        for res, obj, key in live:
            name = obj["metadata"]["name"]
            queued = bool((obj.get("spec") or {}).get("suspend"))
            if queued:
                stop = self.stop_at(obj)
                if stop is None or (stop - self.clock()).total_seconds() >= \
                        MIN_ACTIVE_DEADLINE_S or self._withdrawn(res, obj,
                                                                 children(res, obj)):
                    continue
            bound, said, _ = self._run_bound(res, obj, key, "bound", started=not queued,
                                             children=children(res, obj))
            patch: dict[str, Any] = {"spec": bound}
            if queued:   # no pod runs whenever Kueue admits it
                patch["metadata"] = {"annotations": {RELEASED_PAST_STOP: _iso(self.clock())}}
            if bound or queued:
                try:
                    self._call("bound", api.patch_namespaced_custom_object, res.group,
                               res.version, self.namespace, res.plural, name, patch,
                               _content_type="application/merge-patch+json", key=key)
                except _Api as exc:
                    raise BackendError(f"{self.name}: bound of {res.plural}/{name} refused "
                                       f"({exc.status}): {exc.message}") from exc
            if said:
                out[key] = (f"{res.plural}/{name} " + ("not admitted by Kueue by its planned "
                            "stop: " if queued else "admitted by Kueue: ") + said)
        return out

    def _keep_volcano_stops(self, keys: Collection[str]) -> dict[str, str]:
        """Bound by its planned stop each of our released Volcano gangs scheduled late.

        The release removes the pods' scheduling gate and sets each pod's
        ``activeDeadlineSeconds`` to the time then left to :meth:`stop_at`; that deadline
        counts from the pod's ``status.startTime``, which the kubelet sets when it takes the
        pod Volcano bound (Pod API reference), so a wait for Volcano to schedule the gang
        (its PodGroup) would lengthen the run past its planned stop by that wait. Each pass
        therefore looks at our released Volcano Jobs of ``keys`` (no pod gated, not over):

        - pods started: each running pod's deadline is lowered to the planned stop less its
          ``startTime`` wherever it ends later (at least :data:`MIN_ACTIVE_DEADLINE_S`). The
          API server lets a pod update lower the field, never raise or remove it
          (``ValidatePodUpdate``), and the kubelet stops the pod ``DeadlineExceeded`` when
          its start + the deadline has passed, at once for one started at or after its stop.
          A pod of the gang not started yet gets the least deadline once the stop has
          passed (it ends as it starts);
        - no pod started when its stop has passed: the Job is annotated
          :data:`RELEASED_PAST_STOP` (this pass's instant), then its pods, none bound to a
          node's kubelet yet, are deleted. Volcano's job controller makes a Job's missing
          pods again from its task's template (``SyncJob`` on the ``PodEvicted`` event of a
          deletion, without lifecycle policies), which carries :data:`HOLD_GATE`, so they are
          gated and none is ever bound; the Job reads Failed/``DeadlinePassed``, raw
          :data:`~carbonsched.adapters.dispatch.base.NEVER_RAN` (:func:`read_volcano`), as a
          Kueue run still queued at its stop does, and a later release leaves it
          (:meth:`_ungate`). A pass after a partial withdrawal deletes the pods left.

        A gang still waiting with its stop ahead is left as it is (its release bounded it by
        the time left then). A gang scheduled between two passes runs until the next pass at
        most past its stop.

        Raises
        ------
        BackendError
            A pod patch or delete, or the annotation, was refused (a pod gone meanwhile, 404,
            is skipped).
        """
        want, out = set(keys), {}
        jobs = [o for o in self._list(VOLCANO_JOB) if _owner_key(o) in want]
        if not jobs:
            return {}
        pods_of: dict[str, list[dict[str, Any]]] = {}
        for pod in self._our_pods(jobs[0]["metadata"]["name"] if len(jobs) == 1 else None):
            job = (pod["metadata"].get("labels") or {}).get(VOLCANO_JOB_LABEL)
            if job:
                pods_of.setdefault(job, []).append(pod)
        for obj in jobs:
            key, name = _owner_key(obj) or "", obj["metadata"]["name"]
            pods = pods_of.get(name, [])
            started = [p for p in pods if (p.get("status") or {}).get("startTime")]
            waiting = [p for p in pods if not _has_gate(p) and p not in started]
            if (obj["metadata"].get("annotations") or {}).get(RELEASED_PAST_STOP):
                if waiting and not started:   # a withdrawal cut short: its pods left
                    gone = self._delete_pods(key, waiting)
                    if gone:
                        out[key] = (f"{VOLCANO_JOB.plural}/{name} past its planned stop: pods "
                                    f"{', '.join(gone)} deleted (made again gated: none runs)")
                continue
            if not pods or any(_has_gate(p) for p in pods) or read_volcano(obj, False).state in (
                    JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED):
                continue   # held (its release bounds it), none made yet, or over
            stop = self.stop_at(obj)
            if stop is None:
                continue
            now = self.clock()
            past = (stop - now).total_seconds() < MIN_ACTIVE_DEADLINE_S
            if not started:
                if past:
                    out[key] = self._withdraw_gang(key, obj, stop, waiting)
                continue
            said = self._bound_started_pods(key, pods, stop, past)
            if said:
                out[key] = f"{VOLCANO_JOB.plural}/{name} scheduled by Volcano: {said}"
        return out

    def _bound_started_pods(self, key: str, pods: list[dict[str, Any]], stop: datetime,
                            past: bool) -> str:
        """Lower each running pod's deadline to ``stop`` less its start; what was patched.

        ``past``: the stop has passed, so a pod not started yet gets the least deadline. The
        text is empty when nothing was patched.

        Raises
        ------
        BackendError
            A pod patch was refused (one gone meanwhile is skipped).
        """
        core = self._pods()
        said = []
        for pod in pods:
            st = pod.get("status") or {}
            if st.get("phase") in ("Succeeded", "Failed"):
                continue
            since = parse_time(st.get("startTime"))
            if since is None and not past:
                continue   # not started yet: the next pass bounds it from its start
            left = MIN_ACTIVE_DEADLINE_S if since is None else int(
                (stop - since).total_seconds())
            want = max(left, MIN_ACTIVE_DEADLINE_S)
            had = (pod.get("spec") or {}).get("activeDeadlineSeconds")
            if had is not None and int(had) <= want:
                continue   # it ends by its stop already
            pname = pod["metadata"]["name"]
            try:
                self._call("bound", core.patch_namespaced_pod, pname, self.namespace,
                           {"spec": {"activeDeadlineSeconds": want}},
                           _content_type="application/merge-patch+json", key=key)
            except _Api as exc:
                if exc.status == 404:
                    continue
                raise BackendError(f"{self.name}: bound of pod {pname} refused "
                                   f"({exc.status}): {exc.message}") from exc
            said.append(
                f"pod {pname} activeDeadlineSeconds: {want} (" + (
                    f"not started, after its planned stop at {_iso(stop)}: it ends "
                    "DeadlineExceeded as it starts)" if since is None else
                    f"started at {_iso(since)}: its planned stop at {_iso(stop)} less its "
                    "start)" if left >= MIN_ACTIVE_DEADLINE_S else
                    f"started at {_iso(since)}, after its planned stop at {_iso(stop)}: it "
                    "ends DeadlineExceeded at once)"))
        return "; ".join(said)

    def _withdraw_gang(self, key: str, obj: dict[str, Any], stop: datetime,
                       pods: list[dict[str, Any]]) -> str:
        """Keep a gang Volcano has not scheduled by its planned stop from ever running.

        :data:`RELEASED_PAST_STOP` first (a retry reads it), then the pods deleted
        (:meth:`_keep_volcano_stops`); what was done.

        Raises
        ------
        BackendError
            The annotation or a delete was refused.
        """
        name, now = obj["metadata"]["name"], self.clock()
        ann = {RELEASED_PAST_STOP: _iso(now)}
        if not (obj["metadata"].get("annotations") or {}).get(A_STOP):
            ann[A_STOP] = _iso(stop)
        self._annotate_volcano_job(name, ann, key, verb="bound")
        gone = self._delete_pods(key, pods)
        return (f"{VOLCANO_JOB.plural}/{name} not scheduled by Volcano by its planned stop at "
                f"{_iso(stop)}: annotated {RELEASED_PAST_STOP}; pods {', '.join(gone) or '-'} "
                "deleted (Volcano makes them again from its task's template, gated: none "
                "runs); it reads Failed/DeadlinePassed, never ran")

    def _delete_pods(self, key: str, pods: list[dict[str, Any]]) -> list[str]:
        """Delete ``pods`` (one gone already is skipped); the names deleted.

        Raises
        ------
        BackendError
            A delete was refused.
        """
        core, gone = self._pods(), []
        for pod in pods:
            pname = pod["metadata"]["name"]
            try:
                self._call("bound", core.delete_namespaced_pod, pname, self.namespace, key=key)
            except _Api as exc:
                if exc.status == 404:
                    continue
                raise BackendError(f"{self.name}: delete of pod {pname} refused "
                                   f"({exc.status}): {exc.message}") from exc
            gone.append(pname)
        return gone

    def _withdrawn(self, res: Resource, obj: dict[str, Any],
                   children: list[dict[str, Any]] | None = None) -> bool:
        """True when a queued object runs no pod whenever Kueue admits it.

        ``parallelism: 0`` on the Job, or on every child Job of a JobSet (``children``, as
        listed by :meth:`_jobset_children`; None lists them).
        """
        if res is not JOBSET:
            return (obj.get("spec") or {}).get("parallelism") == 0
        if children is None:
            children = self._jobset_children([obj["metadata"]["name"]])[obj["metadata"]["name"]]
        return bool(children) and all((c.get("spec") or {}).get("parallelism") == 0
                                      for c in children)

    # -- grid events (PausesWork) -----------------------------------------------------------
    @property
    def pauses_running(self) -> bool:
        """Whether running work can be paused: ``job`` and ``jobset`` (``spec.suspend``).

        Not Kueue (its Workload's ``spec.active: false`` would evict it; not modelled here) nor
        Volcano (no suspend field; ``vcctl job suspend`` makes a bus Command that aborts the
        pods).
        """
        return self.workload in ("job", "jobset")

    def _suspend(self, key: str, value: bool, verb: str,
                 end_by: datetime | None = None) -> WorkAction:
        found = self._find(key)
        if found is None:
            return WorkAction(WorkOutcome.ABSENT, None, f"{self.name} has no object of key {key}")
        res, obj = found
        name = obj["metadata"]["name"]
        bid = f"{self.context}/{self.namespace}/{name}"
        r = self._reading(obj, {}, {})
        if r.state in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED):
            return WorkAction(WorkOutcome.ABSENT, bid, f"{res.kind} is {r.raw}: nothing to {verb}")
        if bool((obj.get("spec") or {}).get("suspend")) is value:
            return WorkAction(WorkOutcome.ALREADY, bid, "spec.suspend is already "
                              f"{str(value).lower()}: not patched again")
        if value and r.state is not JobState.RUNNING:
            return WorkAction(WorkOutcome.WRONG_STATE, bid, f"{res.kind} is {r.raw}, not running")
        patch: dict[str, Any] = {"spec": {"suspend": value}}
        said = f"patched spec.suspend: {str(value).lower()}"
        if not value:
            patch, said = self._resume_patch(res, obj, key, end_by)
        api = self._custom()
        try:
            self._call(verb, api.patch_namespaced_custom_object, res.group, res.version,
                       self.namespace, res.plural, name, patch,
                       _content_type="application/merge-patch+json", key=key)
        except _Api as exc:
            raise BackendError(f"{self.name}: {verb} of {res.plural}/{name} refused "
                               f"({exc.status}): {exc.message}") from exc
        return WorkAction(WorkOutcome.DONE, bid, f"{res.plural}/{name} {said}")

    def stop_at(self, obj: dict[str, Any]) -> datetime | None:
        """When ``obj``'s run is stopped as planned (tz-aware); None when it does not say.

        Its :data:`A_STOP` annotation; for an object made before carbonsched wrote it, its
        planned start (:data:`A_START`) + the ``activeDeadlineSeconds`` it was made with (a
        JobSet's in its replicated Job's template, which cannot change; a Volcano Job's in its
        task's pod template).
        """
        ann = obj["metadata"].get("annotations") or {}
        if ann.get(A_STOP):
            return parse_time(ann[A_STOP])
        spec = obj.get("spec") or {}
        if obj.get("kind") == JOBSET.kind:
            spec = (((spec.get("replicatedJobs") or [{}])[0].get("template") or {})
                    .get("spec") or {})
        elif obj.get("apiVersion") == VOLCANO_JOB.api_version:
            spec = (((spec.get("tasks") or [{}])[0].get("template") or {}).get("spec") or {})
        start, limit = parse_time(ann.get(A_START)), spec.get("activeDeadlineSeconds")
        return None if start is None or limit is None else start + timedelta(seconds=int(limit))

    def _resume_patch(self, res: Resource, obj: dict[str, Any], key: str,
                      end_by: datetime | None = None) -> tuple[dict[str, Any], str]:
        """The merge patch that resumes ``obj`` with the time its run has left, and what it says.

        ``spec.suspend: false`` with :meth:`_run_bound`'s bound by its stop, moved by the
        pause when ``end_by`` is later than its planned end (:meth:`_moved_stop`), and the
        annotations of :meth:`_start_annotations`.
        """
        stop, moved, said_move = self._moved_stop(obj, end_by)
        bound, said, over = self._run_bound(res, obj, key, "resume", stop=stop)
        patch: dict[str, Any] = {"spec": {"suspend": False, **bound}}
        ann = self._start_annotations(obj, stop, moved, over)
        if ann:
            patch["metadata"] = {"annotations": ann}
        return patch, ((f"{said_move}; " if said_move else "") + "patched spec.suspend: false"
                       + (f"; {said}" if said else ""))

    def _run_bound(self, res: Resource, obj: dict[str, Any], key: str, verb: str,
                   started: bool = False, stop: datetime | None = None,
                   children: list[dict[str, Any]] | None = None
                   ) -> tuple[dict[str, int], str, bool]:
        """Bound the run of ``obj``, about to start (released or resumed), by its planned stop.

        Unsuspending a Job sets (or, after a pause, resets) its ``startTime``, from which
        ``activeDeadlineSeconds`` counts (Kubernetes Job docs, "Suspending a Job"): left as made,
        a piece started late would run its whole length from that start, past its planned end
        (a pausing piece into its next piece's hours) and any other past its deadline. The
        deadline is set to the time left to :meth:`stop_at` on :attr:`clock` (rounded down).
        When less than :data:`MIN_ACTIVE_DEADLINE_S` is left, the run is over: ``parallelism:
        0`` (no pod is made) and the least deadline, so that the Job ends ``DeadlineExceeded``
        at once, as at its planned stop. A JobSet's child Jobs are patched here (its
        ``replicatedJobs`` cannot change; the JobSet controller makes them, suspended, with the
        JobSet and leaves their deadline and parallelism as they are when it unsuspends them).

        ``started``: the run has started already (Kueue admitted it after its release), so
        the deadline counts from each Job's own ``status.startTime``, not from now: it is set
        to the stop less that start wherever the deadline it has ends later (the field may
        change on a running Job, whose controller ends it at once when the new deadline has
        passed); a Job started at or after its stop gets the least deadline and ends at once.
        Its ``parallelism`` is left as admitted (Kueue checks it against the admission). A
        Job not started yet, or already bounded, is left as it is.

        Parameters
        ----------
        res, obj
            The object's resource and the object as read.
        key
            Its dispatch key (for errors).
        verb
            ``"release"``, ``"resume"`` or ``"bound"`` (for errors).
        started
            Bound a run that has started (each Job's ``status.startTime``), not one about
            to start.
        stop
            The stop to bound it by, when a grid event moved it (:meth:`_moved_stop`);
            default :meth:`stop_at`.
        children
            A JobSet's child Jobs as listed for a whole pass (:meth:`_jobset_children`);
            None lists them.

        Returns
        -------
        bound : dict
            The fields to merge into a Job's own ``spec`` (empty for a JobSet, whose child Jobs
            were patched, for an object that does not say when it stops, and for a started run
            already within its stop).
        said : str
            What was bounded, for the action's detail (empty when nothing was).
        over : bool
            True when its planned stop has passed (no pod runs; ``started``: it started at or
            after its stop).

        Raises
        ------
        BackendError
            A child Job's patch was refused, or a JobSet has no child Jobs yet to carry the
            bound (it is left held; the next pass tries again).
        """
        stop = self.stop_at(obj) if stop is None else stop
        if stop is None:
            return {}, "", False
        if res is not JOBSET:
            bound, said, over = self._bound_of(obj, stop, started)
            return bound, said, over
        api = self._custom()
        name = obj["metadata"]["name"]
        if children is None:
            children = self._jobset_children([name])[name]
        if not children:
            raise BackendError(
                f"{self.name}: {verb} of jobsets/{name} not made: it has no child Jobs yet to "
                f"carry its bound (its planned stop at {_iso(stop)}); the JobSet controller "
                "makes them with the JobSet, so check that it runs in the cluster; tried again "
                "in the next pass")
        saids, over = [], False
        for child in children:
            bound, said, child_over = self._bound_of(child, stop, started)
            over = over or child_over
            if not bound:
                continue
            cname = child["metadata"]["name"]
            try:
                self._call(verb, api.patch_namespaced_custom_object, JOB.group, JOB.version,
                           self.namespace, JOB.plural, cname, {"spec": bound},
                           _content_type="application/merge-patch+json", key=key)
            except _Api as exc:
                raise BackendError(f"{self.name}: {verb} of jobs/{cname} (of jobsets/{name}) "
                                   f"refused ({exc.status}): {exc.message}") from exc
            saids.append(said)
        if not saids:
            return {}, "", over
        said = saids[0] if len(set(saids)) == 1 else "; ".join(saids)
        return {}, f"its child Jobs {said}", over

    def _bound_of(self, job: dict[str, Any], stop: datetime, started: bool
                  ) -> tuple[dict[str, int], str, bool]:
        """One Job's bound by ``stop`` (:meth:`_run_bound`).

        The ``spec`` fields to merge, what they say and whether the stop has passed;
        ``({}, "", over)`` when nothing is to change.
        """
        if not started:
            left = int((stop - self.clock()).total_seconds())
            if left >= MIN_ACTIVE_DEADLINE_S:
                return ({"activeDeadlineSeconds": left}, f"activeDeadlineSeconds: {left} (the "
                        f"time left to its planned stop at {_iso(stop)})", False)
            return ({"parallelism": 0, "activeDeadlineSeconds": MIN_ACTIVE_DEADLINE_S},
                    f"parallelism: 0, activeDeadlineSeconds: {MIN_ACTIVE_DEADLINE_S} (its "
                    f"planned stop at {_iso(stop)} has passed: no pod runs and it ends "
                    "DeadlineExceeded)", True)
        spec, st = job.get("spec") or {}, job.get("status") or {}
        since = parse_time(st.get("startTime"))
        if since is None or spec.get("suspend"):
            return {}, "", False   # not started yet: its release or resume bounds it
        limit = spec.get("activeDeadlineSeconds")
        left = int((stop - since).total_seconds())
        over = left < MIN_ACTIVE_DEADLINE_S
        want = max(left, MIN_ACTIVE_DEADLINE_S)
        if limit is not None and int(limit) <= want:
            return {}, "", over    # it ends by its stop already
        if not over:
            said = (f"activeDeadlineSeconds: {want} (started at {_iso(since)}: its planned "
                    f"stop at {_iso(stop)} less its start)")
        else:
            said = (f"activeDeadlineSeconds: {want} (started at {_iso(since)}, after its "
                    f"planned stop at {_iso(stop)}: it ends DeadlineExceeded at once)")
        return {"activeDeadlineSeconds": want}, said, over

    def pause(self, key: str) -> WorkAction:
        """Suspend a running Job or JobSet (``spec.suspend: true``).

        The Job controller deletes its active pods (SIGTERM, then the pod's grace period to
        checkpoint) and sets the ``Suspended`` condition; resuming recreates them and resets
        ``status.startTime`` (so ``activeDeadlineSeconds`` restarts: :meth:`resume` sets it to
        the time left). Kubernetes Job docs, "Suspending a Job". Kueue and Volcano workloads:
        ``UNSUPPORTED`` (see :attr:`pauses_running`).
        """
        if not self.pauses_running:
            return WorkAction(WorkOutcome.UNSUPPORTED, None,
                              f"a {self.workload} workload is not paused by carbonsched "
                              "(Kueue: set the Workload's spec.active to false; Volcano: "
                              "vcctl job suspend)")
        return self._suspend(key, True, "pause")

    def resume(self, key: str, end_by: datetime | None = None) -> WorkAction:
        """Unsuspend a Job or JobSet paused by :meth:`pause` (``ALREADY`` when not suspended).

        With ``activeDeadlineSeconds`` set to the time its run has left (:meth:`_resume_patch`)
        to its stop: ``end_by``, the planned end moved by the pause (the grid pass's
        :func:`~carbonsched.dispatch.grid.moved_end`), moves :data:`A_STOP` and :data:`A_END`
        in the same patch (:meth:`_moved_stop`), so a resumed pausing piece runs what it had
        left, is told to checkpoint the grace period before its moved end and is gone by it,
        and no resumed run outlasts its deadline. Past even that stop, no pod runs.
        """
        if not self.pauses_running:
            return WorkAction(WorkOutcome.UNSUPPORTED, None,
                              f"a {self.workload} workload is not paused by carbonsched")
        return self._suspend(key, False, "resume", end_by)

    def hold(self, key: str) -> WorkAction:
        """Keep a held object held: nothing to patch (it is created held).

        The release loop (:func:`carbonsched.dispatch.outbox.release_due`) skips a key a grid
        event holds, so it stays suspended (gated, for Volcano) past its planned start.
        ``WRONG_STATE`` when it has already been released.
        """
        found = self._find(key)
        if found is None:
            return WorkAction(WorkOutcome.ABSENT, None, f"{self.name} has no object of key {key}")
        res, obj = found
        bid = f"{self.context}/{self.namespace}/{obj['metadata']['name']}"
        if res is VOLCANO_JOB:
            gated, _ = self._volcano_pods(obj["metadata"]["name"])
            r = read_volcano(obj, gated.get(obj["metadata"]["name"], True))
        else:
            r = self._reading(obj, {}, {})
        if not r.held:
            return WorkAction(WorkOutcome.WRONG_STATE, bid, f"{res.kind} is {r.raw}, no longer "
                              "held: it has been released")
        return WorkAction(WorkOutcome.DONE, bid, f"{res.kind} kept held (not released at its "
                          "planned start while the event lasts)")

    def unhold(self, key: str, planned_start: datetime, now: datetime,
               end_by: datetime | None = None) -> WorkAction:
        """Release a held object whose planned start has passed (:meth:`release`).

        One whose start is still ahead is left to the release loop. ``end_by``, the planned
        end moved by the hold (:func:`~carbonsched.dispatch.grid.moved_end`), moves
        :data:`A_STOP` and :data:`A_END` in the patch that releases it (:meth:`_moved_stop`),
        and the run is bounded by the moved stop: a piece held past its planned stop runs its
        whole length after the event, within its deadline and before its next piece.
        """
        if planned_start > now:
            return WorkAction(WorkOutcome.DONE, None, "left held: the release loop releases it "
                              f"at its planned start {_iso(planned_start)}")
        found = self._find(key)
        bid = (f"{self.context}/{self.namespace}/{found[1]['metadata']['name']}"
               if found is not None else None)
        done, said = self._release(key, end_by)
        if done:
            return WorkAction(WorkOutcome.DONE, bid,
                              f"released (its planned start has passed): {said}")
        return WorkAction(WorkOutcome.ALREADY if found is not None else WorkOutcome.ABSENT, bid,
                          "not held any more: not released again")

    def _annotate_volcano_job(self, name: str, annotations: dict[str, str], key: str,
                              verb: str = "release") -> None:
        """Merge ``annotations`` into Volcano Job ``name`` (a release's or a bound's record).

        ``verb`` names the step in errors.

        Raises
        ------
        BackendError
            The API server refused the patch (its status and message).
        """
        try:
            self._call(verb, self._custom().patch_namespaced_custom_object,
                       VOLCANO_JOB.group, VOLCANO_JOB.version, self.namespace,
                       VOLCANO_JOB.plural, name, {"metadata": {"annotations": annotations}},
                       _content_type="application/merge-patch+json", key=key)
        except _Api as exc:
            raise BackendError(f"{self.name}: {verb} of {VOLCANO_JOB.plural}/{name} "
                               f"refused ({exc.status}): {exc.message}") from exc

    def _ungate(self, key: str, name: str, obj: dict[str, Any],
                end_by: datetime | None = None) -> tuple[bool, str]:
        """Release Volcano Job ``name``, bounded pod by pod by its planned stop (or left gated).

        :data:`HOLD_GATE` is removed from its gated pods, each bounded by the time left to its
        planned stop; past that stop, they are left gated.

        A Volcano Job has no suspend and no deadline of its own: each pod's
        ``spec.activeDeadlineSeconds`` counts from that pod's ``startTime`` (Pod API reference:
        "duration in seconds the pod may be active on the node relative to StartTime"), so a
        pod made with the piece's whole length and released late would run that whole length
        from the release, past its planned stop (a pausing piece into its next piece's hours).
        The patch that removes the gate therefore also sets the pod's
        ``activeDeadlineSeconds`` to the time left to :meth:`stop_at` on :attr:`clock`
        (rounded down; never above what the pod has: Kubernetes allows a pod update to set the
        field when unset or to lower it, never to raise it -- Kubernetes "Pods" concept page,
        "Pod update and replacement"; ``ValidatePodUpdate``: "must be less than or equal to
        previous value"). The kubelet sets ``startTime`` when it takes the bound pod, so a
        wait for the gang to be scheduled after the release would lengthen the run by that
        wait: :meth:`keep_planned_stops` (the release pass) lowers each started pod's deadline
        to the stop less its start, and withdraws a gang still unscheduled at its stop.

        When less than :data:`MIN_ACTIVE_DEADLINE_S` is left, no pod may start: the least
        deadline (1 s) would still run each pod past the stop. The pods are left gated (the API
        server binds no gated pod) and the Job is annotated :data:`RELEASED_PAST_STOP` with
        this release's instant, so that it reads Failed/``DeadlinePassed``, never ran (raw
        :data:`~carbonsched.adapters.dispatch.base.NEVER_RAN`), as a Job ended
        ``DeadlineExceeded`` with ``parallelism: 0`` does. ``end_by``: the planned end moved by
        a grid event's hold (:meth:`_moved_stop`), written on the Volcano Job first.
        It is not deleted, which is how :meth:`cancel` ends a Volcano
        Job: the status read would then find nothing and record the piece ``Lost``.

        Returns
        -------
        released : bool
            False when the Job is over, already marked past its stop, or has no gated pod.
        said : str
            What was patched, for the action's detail.

        Raises
        ------
        BackendError
            The cluster refused a pod patch or the annotation (a pod Volcano replaced meanwhile,
            404, is skipped: its replacement is gated and released by the next pass).
        """
        if (obj["metadata"].get("annotations") or {}).get(RELEASED_PAST_STOP) or read_volcano(
                obj, False).state in (JobState.SUCCEEDED, JobState.FAILED):
            return False, ""
        pods = [p for p in self._our_pods(name) if _has_gate(p)]
        if not pods:
            return False, ""
        stop, moved, said_move = self._moved_stop(obj, end_by)
        now = self.clock()
        left = None if stop is None else int((stop - now).total_seconds())
        if moved and left is not None and left >= MIN_ACTIVE_DEADLINE_S:
            # the moved stop first: a retry after a partial release reads it (and moves it
            # again from there by the same rule, never twice by the delay)
            self._annotate_volcano_job(name, moved, key)
        if stop is not None and left is not None and left < MIN_ACTIVE_DEADLINE_S:
            ann = {RELEASED_PAST_STOP: _iso(now), **moved}
            if not (obj["metadata"].get("annotations") or {}).get(A_STOP):
                ann[A_STOP] = _iso(stop)
            self._annotate_volcano_job(name, ann, key)
            return True, (f"{VOLCANO_JOB.plural}/{name} left gated: "
                          + (f"{said_move}; " if said_move else "")
                          + f"its planned stop at {_iso(stop)} has passed, so none of its "
                          f"{len(pods)} pods runs; annotated {RELEASED_PAST_STOP}, it reads "
                          "Failed/DeadlinePassed, never ran")
        core = self._pods()
        released: list[str] = []
        bounds: set[int] = set()
        for pod in pods:
            spec: dict[str, Any] = {"schedulingGates": [
                g for g in pod["spec"].get("schedulingGates") or []
                if g.get("name") != HOLD_GATE] or None}
            if left is not None:
                had = pod["spec"].get("activeDeadlineSeconds")
                spec["activeDeadlineSeconds"] = left if had is None else min(left, int(had))
                bounds.add(spec["activeDeadlineSeconds"])
            pname = pod["metadata"]["name"]
            try:
                self._call("release", core.patch_namespaced_pod, pname, self.namespace,
                           {"spec": spec}, _content_type="application/merge-patch+json",
                           key=key)
            except _Api as exc:
                if exc.status == 404:  # Volcano replaced the pod meanwhile: the next pass
                    continue
                raise BackendError(f"{self.name}: release of pod {pname} refused "
                                   f"({exc.status}): {exc.message}") from exc
            released.append(pname)
        if not released:
            return False, ""
        said = f"scheduling gate removed from pods {', '.join(released)}"
        if said_move:
            said = f"{said_move}; {said}"
        if bounds and stop is not None:
            said += (f"; activeDeadlineSeconds: {', '.join(str(b) for b in sorted(bounds))} "
                     + (f"(the time left to its planned stop at {_iso(stop)})"
                        if bounds == {left} else f"(kept: not above it, though {left} s are "
                        f"left to its planned stop at {_iso(stop)})"))
        return True, f"{VOLCANO_JOB.plural}/{name} {said}"


def _has_gate(pod: dict[str, Any]) -> bool:
    return any(g.get("name") == HOLD_GATE for g in (pod.get("spec") or {}).get(
        "schedulingGates") or [])


class _Api(Exception):
    def __init__(self, status: int, message: str) -> None:
        self.status = status
        self.message = message
        super().__init__(f"{status}: {message}")


def _status_message(exc: Any) -> str:
    try:
        return str(json.loads(exc.body).get("message", exc.reason))[:400]
    except (TypeError, ValueError, AttributeError):
        return str(exc.reason or exc)[:400]


def _owner_key(obj: dict[str, Any]) -> str | None:
    """Our dispatch key when ``obj`` carries our labels and a matching key hash; else None."""
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    key = (meta.get("annotations") or {}).get(A_KEY)
    if labels.get(MANAGED_BY) != OWNER or key is None:
        return None
    if labels.get(L_KEY_HASH) != short_hash(key, 16):
        return None
    return key
