"""Kubernetes workload kinds: the object each kind creates for a placement and how its status reads.

A Kubernetes site (catalog ``[sites.backend] workload``) runs each placement as one of:

``job``
    A ``batch/v1`` Job, created with ``spec.suspend: true`` and unsuspended at the planned start:
    one pod holding the whole gang, or for a multi-node gang an Indexed Job of ``nodes`` pods of
    ``gpus_per_node`` GPUs each (not gang-scheduled: see :func:`job_spec`).
``jobset``
    A JobSet (``jobset.x-k8s.io/v1alpha2``) with one replicated Job ``node`` of ``nodes``
    replicas, each one pod of ``gpus_per_node`` GPUs; held and released through
    ``spec.suspend`` like a Job (JobSet docs, "Suspend": https://jobset.sigs.k8s.io/docs/).
``kueue``
    A ``batch/v1`` Job (``nodes == 1``) or a JobSet (a multi-node gang) that Kueue admits against
    the LocalQueue ``queue``. See "Holding until the planned start under Kueue" below.
``volcano``
    A Volcano Job (``batch.volcano.sh/v1alpha1``): ``schedulerName: volcano``, ``queue``,
    ``minAvailable`` = the gang's pods (Volcano's PodGroup gang: no pod runs until all can) and
    one task ``node`` of ``nodes`` replicas. A Volcano Job has no ``suspend``: it is held with a
    pod scheduling gate, see below.

Holding until the planned start under Kueue
-------------------------------------------
carbonsched holds a placement until its planned start, and Kueue decides admission against quota.
Kueue manages a Job only once it carries the label ``kueue.x-k8s.io/queue-name`` (unless the
cluster sets ``manageJobsWithoutQueueName``; Kueue docs, "Run a Kubernetes Job" and "Manage Jobs
without queue name"), and Kueue's Job webhook accepts *adding* the queue name to an existing Job
while it is suspended (``spec.suspend`` must be true when the queue name is added: Kueue PR #414,
``job_webhook.go`` ``validateUpdate``). So the object is created suspended *without* the label
and the release at the planned start adds the label (the object stays suspended): Kueue then
creates the Workload, queues it, reserves quota, admits it (condition ``Admitted``) and
unsuspends the object. Quota is therefore held only from the planned start, and a start delayed
by Kueue's queue is visible (raw state ``queued``, the Workload's ``QuotaReserved`` message).

Rejected alternatives (same sources' issue trackers): an AdmissionCheck owned by carbonsched
(Kueue reserves the quota *before* checks run, so a job planned for tomorrow would hold quota all
day; "Admission Checks" concept page), and ``Workload.spec.active=false`` (the Workload is
created by Kueue after the Job, so it races admission, and deactivated Workloads have been
admitted then evicted: kueue#6711, #6719). Limitation: in a namespace where Kueue manages jobs
without a queue name, the unlabelled held Job is managed from creation; use a namespace Kueue does
not manage that way (``managedJobsNamespaceSelector``).

Holding a Volcano Job
---------------------
The task template carries the pod scheduling gate ``carbonsched.io/planned-start`` (Kubernetes
"Pod Scheduling Readiness", GA in 1.30:
https://kubernetes.io/docs/concepts/scheduling-eviction/pod-scheduling-readiness/): the API
server refuses to bind a gated pod, whatever the scheduler, so Volcano creates the pods and the
PodGroup but none runs. The release removes the gate from the Job's pods (selected by the label
``volcano.sh/job-name``, which Volcano sets on them); gates may be removed, never added, after a
pod is created. Pods Volcano re-creates (a restart after an eviction) are gated again and
released again by the next release pass. The same pod patch lowers each pod's
``activeDeadlineSeconds`` to the time left to the planned stop; a release after that stop leaves
the pods gated and marks the Job with :data:`RELEASED_PAST_STOP` (see
:meth:`~carbonsched.adapters.dispatch.kubernetes.KubernetesAdapter.release`).

Status
------
:func:`read_status` maps each kind's own conditions to a :class:`~carbonsched.domain.JobState` and
:class:`~carbonsched.domain.ReasonCode`, with the cluster's reason and message in ``detail``: Job
``Complete``/``Failed``; JobSet ``Completed``/``Failed``/``Suspended``; Volcano
``status.state.phase`` (Pending, Running, Completing, Completed, Restarting, Aborting, Aborted,
Terminating, Terminated, Failed); Kueue's Workload ``QuotaReserved``/``Admitted``/``Evicted``/
``Preempted``. An eviction or preemption is reported as ``Evicted``/``Preempted`` (state
Dispatched while the cluster requeues it, Failed when it ends the job), never as a success.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from carbonsched.adapters.dispatch.base import NEVER_RAN
from carbonsched.domain import JobState, ReasonCode

KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
VOLCANO_JOB_LABEL = "volcano.sh/job-name"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
"""The label JobSet puts on its child Jobs (kubernetes-sigs/jobset ``api/jobset/v1alpha2``)."""
HOLD_GATE = "carbonsched.io/planned-start"
"""The pod scheduling gate that holds a Volcano Job's pods until the planned start."""
RELEASED_PAST_STOP = "carbonsched.io/released-past-stop"
"""Annotation carbonsched puts on an object whose release or resume came after its planned stop
(the instant of that release, UTC), so that no pod of it ran then: a Volcano Job's pods are
left gated, a Job (or a JobSet's child Jobs) gets ``parallelism: 0``. It reads Failed/
``DeadlinePassed`` with raw state :data:`~carbonsched.adapters.dispatch.base.NEVER_RAN`
(:func:`read_volcano`, ``KubernetesAdapter.status``), never as a pause at its planned end."""
GANG_TASK = "node"
"""Name of the replicated Job (JobSet) and of the task (Volcano) that runs the gang's pods."""
DEFAULT_VOLCANO_QUEUE = "default"
"""Volcano's default Queue (created by Volcano's installation)."""

WORKLOAD_KINDS = ("job", "kueue", "jobset", "volcano")


@dataclass(frozen=True)
class Resource:
    """A namespaced API resource: group (``""`` for the core group), version, plural, kind."""

    group: str
    version: str
    plural: str
    kind: str

    @property
    def api_version(self) -> str:
        """``group/version`` (``version`` alone for the core group)."""
        return f"{self.group}/{self.version}" if self.group else self.version


JOB = Resource("batch", "v1", "jobs", "Job")
JOBSET = Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet")
VOLCANO_JOB = Resource("batch.volcano.sh", "v1alpha1", "jobs", "Job")
KUEUE_WORKLOAD = Resource("kueue.x-k8s.io", "v1beta1", "workloads", "Workload")
KUEUE_LOCALQUEUE = Resource("kueue.x-k8s.io", "v1beta1", "localqueues", "LocalQueue")

RESOURCES: dict[str, tuple[Resource, ...]] = {
    "job": (JOB,), "kueue": (JOB, JOBSET), "jobset": (JOBSET,), "volcano": (VOLCANO_JOB,)}
"""The resources each workload kind creates (and lists to find its objects)."""


def resource_for(workload: str, nodes: int) -> Resource:
    """The resource a placement of ``nodes`` nodes is created as under ``workload``."""
    if workload == "job":
        return JOB
    if workload == "kueue":
        return JOB if nodes == 1 else JOBSET
    if workload == "jobset":
        return JOBSET
    if workload == "volcano":
        return VOLCANO_JOB
    raise ValueError(f"unknown Kubernetes workload {workload!r}; give one of "
                     f"{', '.join(WORKLOAD_KINDS)}")


def pod_template_metadata(pod_meta: Mapping[str, Mapping[str, str]]) -> dict[str, Any]:
    """A pod template's ``metadata``: ``pod_meta``'s non-empty ``labels`` and ``annotations``."""
    return {k: dict(v) for k, v in pod_meta.items() if k in ("labels", "annotations") and v}


def job_spec(pod_spec: dict[str, Any], pod_meta: Mapping[str, Mapping[str, str]],
             active_deadline_s: int, *, suspend: bool | None, pods: int = 1) -> dict[str, Any]:
    """A ``batch/v1`` JobSpec of ``pods`` pods running ``pod_spec`` (no retries).

    ``pod_meta`` is the pod template's ``labels`` and ``annotations``
    (:meth:`KubernetesAdapter.pod_metadata
    <carbonsched.adapters.dispatch.kubernetes.KubernetesAdapter.pod_metadata>`). ``pods > 1``
    (a multi-node gang on a plain ``job`` site) makes an Indexed Job with
    ``completions = parallelism = pods`` (Kubernetes Job docs, "Completion mode": each pod gets
    ``JOB_COMPLETION_INDEX`` 0..pods-1). A plain Job is not gang-scheduled: its pods may start
    at different times; sites that need all-or-nothing starts use ``jobset``, ``kueue`` or
    ``volcano``.
    """
    spec: dict[str, Any] = {}
    if suspend is not None:
        spec["suspend"] = suspend
    if pods > 1:
        spec.update({"completionMode": "Indexed", "completions": pods, "parallelism": pods})
    spec.update({"backoffLimit": 0, "activeDeadlineSeconds": active_deadline_s,
                 "template": {"metadata": pod_template_metadata(pod_meta), "spec": pod_spec}})
    return spec


def jobset_manifest(metadata: dict[str, Any], pod_spec: dict[str, Any],
                    pod_meta: Mapping[str, Mapping[str, str]], nodes: int,
                    active_deadline_s: int, job_labels: Mapping[str, str]) -> dict[str, Any]:
    """A held JobSet: replicated Job ``node`` of ``nodes`` one-pod Jobs, no restarts.

    Parameters
    ----------
    metadata
        The object's metadata (name, namespace, labels, annotations).
    pod_spec
        The pod each node runs (its GPU limits are the GPUs per node).
    pod_meta
        Labels and annotations of the pod template.
    nodes
        Nodes (pods) of the gang. [-]
    active_deadline_s
        Each child Job's ``activeDeadlineSeconds``. [s]
    job_labels
        Labels of the child Jobs' template (carbonsched's own; a job's pod template labels
        go to its pods only).
    """
    return {
        "apiVersion": JOBSET.api_version, "kind": JOBSET.kind, "metadata": metadata,
        "spec": {
            "suspend": True,
            "failurePolicy": {"maxRestarts": 0},
            "replicatedJobs": [{
                "name": GANG_TASK, "replicas": nodes,
                "template": {"metadata": {"labels": dict(job_labels)},
                             "spec": {"parallelism": 1, "completions": 1,
                                      **job_spec(pod_spec, pod_meta, active_deadline_s,
                                                 suspend=None)}}}],
        },
    }


def volcano_manifest(metadata: dict[str, Any], pod_spec: dict[str, Any],
                     pod_meta: Mapping[str, Mapping[str, str]], nodes: int, queue: str | None,
                     active_deadline_s: int) -> dict[str, Any]:
    """A Volcano Job for a gang of ``nodes`` pods, held by the scheduling gate :data:`HOLD_GATE`.

    ``minAvailable = nodes`` (the gang: Volcano starts none of the pods until all fit),
    ``maxRetry: 0`` (a failed pod fails the Job, as ``backoffLimit: 0`` does for a Job). The pod's
    ``activeDeadlineSeconds`` bounds the run from the pod's start. [s] The hold gate is added
    after the pod's own scheduling gates (a job's pod template may name some; the release
    removes only :data:`HOLD_GATE`). ``pod_meta``: labels and annotations of the pod template.
    """
    pod = copy.deepcopy(pod_spec)
    pod["schedulingGates"] = [g for g in pod.get("schedulingGates") or []
                              if g.get("name") != HOLD_GATE] + [{"name": HOLD_GATE}]
    pod["activeDeadlineSeconds"] = active_deadline_s
    return {
        "apiVersion": VOLCANO_JOB.api_version, "kind": VOLCANO_JOB.kind, "metadata": metadata,
        "spec": {
            "schedulerName": "volcano", "queue": queue or DEFAULT_VOLCANO_QUEUE,
            "minAvailable": nodes, "maxRetry": 0,
            "tasks": [{"name": GANG_TASK, "replicas": nodes,
                       "template": {"metadata": pod_template_metadata(pod_meta),
                                    "spec": pod}}],
        },
    }


# -- status ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Reading:
    """What one object says: state, reason, raw state words, times and the cluster's detail."""

    state: JobState
    reason: ReasonCode
    raw: str
    start: datetime | None = None
    end: datetime | None = None
    detail: str = ""
    held: bool = False


def parse_time(v: Any) -> datetime | None:
    """A Kubernetes timestamp (RFC 3339) as a tz-aware datetime; None stays None."""
    if v is None or v == "":
        return None
    if isinstance(v, datetime):
        return v if v.tzinfo else v.replace(tzinfo=UTC)
    return datetime.fromisoformat(str(v).replace("Z", "+00:00"))


def true_conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The object's ``status.conditions`` whose status is True, by type."""
    return {c["type"]: c for c in ((obj.get("status") or {}).get("conditions") or [])
            if str(c.get("status")) == "True" and "type" in c}


def _why(cond: dict[str, Any]) -> str:
    reason, msg = cond.get("reason") or "", cond.get("message") or ""
    return f"{reason}: {msg}" if reason and msg else reason or msg


def _disruption(text: str) -> ReasonCode | None:
    low = text.lower()
    if "preempt" in low:
        return ReasonCode.PREEMPTED
    if "evict" in low or "disruption" in low:
        return ReasonCode.EVICTED
    return None


def read_job(obj: dict[str, Any]) -> Reading:
    """A ``batch/v1`` Job's state.

    From its conditions (``Complete``, ``Failed``), ``spec.suspend`` and
    ``status.active``/``startTime``.
    """
    spec, st = obj.get("spec") or {}, obj.get("status") or {}
    conds = true_conditions(obj)
    start = parse_time(st.get("startTime"))
    if "Complete" in conds:
        return Reading(JobState.SUCCEEDED, ReasonCode.COMPLETED, "complete", start,
                       parse_time(st.get("completionTime")
                                  or conds["Complete"].get("lastTransitionTime")))
    if "Failed" in conds:
        c = conds["Failed"]
        reason = (ReasonCode.DEADLINE_PASSED if c.get("reason") == "DeadlineExceeded"
                  else _disruption(_why(c)) or ReasonCode.BACKEND_FAILED)
        return Reading(JobState.FAILED, reason, "failed", start,
                       parse_time(c.get("lastTransitionTime")), detail=_why(c))
    if spec.get("suspend"):
        return Reading(JobState.DISPATCHED, ReasonCode.SUBMITTED, "suspended", held=True)
    if (st.get("active") or 0) > 0 or start is not None:
        return Reading(JobState.RUNNING, ReasonCode.STARTED, "active", start)
    return Reading(JobState.DISPATCHED, ReasonCode.SUBMITTED, "pending")


def read_jobset(obj: dict[str, Any]) -> Reading:
    """A JobSet's state from its conditions ``Completed``, ``Failed`` and ``Suspended``.

    The start is the ``Suspended`` condition's last transition to False (the resume), the end
    the terminal condition's transition time (a JobSet has no start or completion time of its
    own).
    """
    spec = obj.get("spec") or {}
    all_conds = {c.get("type"): c for c in ((obj.get("status") or {}).get("conditions") or [])}
    conds = true_conditions(obj)
    resumed = all_conds.get("Suspended")
    start = (parse_time(resumed.get("lastTransitionTime"))
             if resumed is not None and str(resumed.get("status")) == "False" else None)
    if "Completed" in conds:
        return Reading(JobState.SUCCEEDED, ReasonCode.COMPLETED, "completed", start,
                       parse_time(conds["Completed"].get("lastTransitionTime")))
    if "Failed" in conds:
        c = conds["Failed"]
        reason = _disruption(_why(c)) or ReasonCode.BACKEND_FAILED
        return Reading(JobState.FAILED, reason, "failed", start,
                       parse_time(c.get("lastTransitionTime")), detail=_why(c))
    if spec.get("suspend"):
        return Reading(JobState.DISPATCHED, ReasonCode.SUBMITTED, "suspended", held=True)
    active = sum((r.get("active") or 0) + (r.get("ready") or 0)
                 for r in (obj.get("status") or {}).get("replicatedJobsStatus") or [])
    if active > 0 or start is not None:
        return Reading(JobState.RUNNING, ReasonCode.STARTED, "active", start)
    return Reading(JobState.DISPATCHED, ReasonCode.SUBMITTED, "pending")


VOLCANO_PHASES: dict[str, tuple[JobState, ReasonCode]] = {
    "Pending": (JobState.DISPATCHED, ReasonCode.SUBMITTED),
    "Running": (JobState.RUNNING, ReasonCode.STARTED),
    "Completing": (JobState.RUNNING, ReasonCode.STARTED),
    "Completed": (JobState.SUCCEEDED, ReasonCode.COMPLETED),
    "Restarting": (JobState.DISPATCHED, ReasonCode.EVICTED),
    "Aborting": (JobState.DISPATCHED, ReasonCode.EVICTED),
    "Aborted": (JobState.DISPATCHED, ReasonCode.EVICTED),
    "Terminating": (JobState.FAILED, ReasonCode.BACKEND_FAILED),
    "Terminated": (JobState.FAILED, ReasonCode.BACKEND_FAILED),
    "Failed": (JobState.FAILED, ReasonCode.BACKEND_FAILED),
}
"""Volcano ``status.state.phase`` -> state and reason (Volcano's JobPhase, volcano-sh/apis
``batch/v1alpha1/job.go``). Restarting, Aborting and Aborted mean the cluster took the pods back
(an eviction, a preemption or ``vcctl job suspend``): the Job is not over, and not a success;
the reason becomes Preempted when Volcano's reason or message says so."""


def read_volcano(obj: dict[str, Any], gated: bool) -> Reading:
    """A Volcano Job's state from ``status.state`` (phase, reason, message).

    A Job carbonsched marked :data:`RELEASED_PAST_STOP` (released after its planned stop, its
    pods left gated) whose phase shows no run (``Pending``, ``Restarting``, ``Aborting``,
    ``Aborted``) reads Failed, ``DeadlinePassed``, raw
    :data:`~carbonsched.adapters.dispatch.base.NEVER_RAN`, ended at that release: none of its
    pods ran, so a pausing piece is not recorded as stopped at its planned end (it wrote no
    checkpoint; its work is still owed).

    Parameters
    ----------
    obj
        The Volcano Job.
    gated
        True when its pods still carry :data:`HOLD_GATE` (or none exist yet): held by
        carbonsched.

    Returns
    -------
    Reading
        Its state, reason, raw phase and times.
    """
    st = obj.get("status") or {}
    state = st.get("state") or {}
    phase = state.get("phase") or "Pending"
    why = ": ".join(x for x in (state.get("reason"), state.get("message")) if x)
    times = {c.get("status"): parse_time(c.get("lastTransitionTime"))
             for c in st.get("conditions") or []}
    start = times.get("Running")
    end = next((times[p] for p in ("Completed", "Failed", "Terminated") if times.get(p)), None)
    past = parse_time(((obj.get("metadata") or {}).get("annotations") or {}).get(
        RELEASED_PAST_STOP))
    if past is not None and VOLCANO_PHASES.get(phase, VOLCANO_PHASES["Pending"])[0] \
            is JobState.DISPATCHED:
        return Reading(JobState.FAILED, ReasonCode.DEADLINE_PASSED, NEVER_RAN, None, past,
                       detail=f"released at {past:%Y-%m-%dT%H:%M:%SZ}, after its planned stop: "
                              "its pods were left gated (or deleted and made again gated) "
                              "and none ran (DeadlineExceeded)")
    if phase not in VOLCANO_PHASES:
        return Reading(JobState.DISPATCHED, ReasonCode.SUBMITTED, phase.lower(), start,
                       detail=f"unknown Volcano phase {phase!r}: {why}")
    job_state, reason = VOLCANO_PHASES[phase]
    if reason is ReasonCode.EVICTED:
        reason = _disruption(why) or reason
        detail = (f"Volcano {phase.lower()} the job" if phase != "Restarting"
                  else "Volcano restarts the job") + (f" ({why})" if why else "")
        return Reading(job_state, reason, phase.lower(), start, None, detail, held=gated)
    if job_state is JobState.FAILED:
        reason = _disruption(why) or reason
        return Reading(job_state, reason, phase.lower(), start, end or parse_time(
            state.get("lastTransitionTime")), detail=why)
    if job_state is JobState.SUCCEEDED:
        return Reading(job_state, reason, "completed", start,
                       end or parse_time(state.get("lastTransitionTime")))
    if phase == "Pending" and gated:
        return Reading(JobState.DISPATCHED, ReasonCode.SUBMITTED, "suspended", held=True)
    return Reading(job_state, reason, phase.lower(), start, detail=why)


def read_kueue(obj_reading: Reading, labelled: bool, queue: str,
               workload: dict[str, Any] | None) -> Reading:
    """A Kueue-managed Job or JobSet's state: the object's own reading, refined by its Workload.

    Parameters
    ----------
    obj_reading
        :func:`read_job` or :func:`read_jobset` of the object.
    labelled
        True once the object carries ``kueue.x-k8s.io/queue-name`` (released to Kueue).
    queue
        The LocalQueue (for the detail).
    workload
        The Workload Kueue made for the object (owner reference), None if none (yet).
    """
    if obj_reading.state in (JobState.SUCCEEDED, JobState.FAILED):
        return obj_reading
    if not labelled:
        return obj_reading  # held by carbonsched: Kueue does not see it yet
    conds = true_conditions(workload) if workload else {}
    if "Admitted" in conds and obj_reading.raw != "suspended":
        return obj_reading
    if "Evicted" in conds or "Preempted" in conds:
        c = conds.get("Preempted") or conds["Evicted"]
        ev = conds.get("Evicted") or c
        reason = (ReasonCode.PREEMPTED if "Preempted" in conds or ev.get("reason") == "Preempted"
                  else ReasonCode.EVICTED)
        return Reading(JobState.DISPATCHED, reason, "evicted", obj_reading.start,
                       detail=f"Kueue evicted the workload ({_why(ev)}); it waits in "
                       f"LocalQueue {queue!r} to be admitted again")
    if workload is None:
        return Reading(JobState.DISPATCHED, ReasonCode.SUBMITTED, "queued",
                       detail=f"released to Kueue LocalQueue {queue!r}; no Workload yet")
    qr = next((c for c in (workload.get("status") or {}).get("conditions") or []
               if c.get("type") == "QuotaReserved"), None)
    why = _why(qr) if qr else "waiting for quota"
    return Reading(JobState.DISPATCHED, ReasonCode.SUBMITTED, "queued",
                   detail=f"queued in Kueue LocalQueue {queue!r}: {why}")
