"""Domain objects: sites, work, placements and plans; lifecycle states and reason codes.

All timestamps are tz-aware UTC and label the start of their hour. Units are in the names.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np
import pandas as pd

from carbonsched.errors import WorkloadError
from carbonsched.limits import (
    DEFAULT_SHARES_PER_GPU,
    MAX_CHECKPOINT_OVERHEAD_MINUTES,
    MAX_DOMAINS,
    MAX_GPU_MILLI,
    MAX_PIECES,
    identifier_problem,
)
from carbonsched.timeaxis import require_aware


class SiteRole(StrEnum):
    """What a site is for."""

    GREEN_HUB = "green-hub"
    """Remote, renewable-rich; for latency-tolerant training and batch work."""
    EDGE = "edge"
    """Near users; for latency-critical inference."""


class SignalQuality(StrEnum):
    """Where a site's hourly signals come from."""

    MEASURED = "measured"
    """Real hourly history from a provider (Electricity Maps, EIA-930, ...)."""
    ESTIMATED = "estimated"
    """A provider's history in which most hours (> 50 %) are the provider's own estimates
    (Electricity Maps' ``Data Estimated`` flag), e.g. JP-TK and IN-WE."""
    MODELLED = "modelled"
    """A documented deterministic model built from cited facts (no public hourly series)."""
    DEGRADED = "degraded"
    """Measured or estimated history that is stale (newest carbon-intensity observation older
    than :data:`carbonsched.adapters.signals.quality.SIGNAL_AGE_THRESHOLD_HOURS`) or damaged
    (quarantined, missing or gap-filled hours near the issue time); the plan's ``notes`` say
    why."""


class JobState(StrEnum):
    """Lifecycle of a job (after Kueue's workload conditions)."""

    PENDING = "Pending"
    PLANNED = "Planned"
    DISPATCHED = "Dispatched"
    RUNNING = "Running"
    PAUSED = "Paused"
    """Started, then paused by a grid event (Slurm ``SUSPENDED``, a started Kubernetes Job with
    ``spec.suspend: true``) and not yet resumed; recorded by
    :func:`carbonsched.dispatch.outbox.refresh_status` only when the backend confirms it."""
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    CANCELLED = "Cancelled"


TERMINAL_STATES = frozenset({JobState.SUCCEEDED.value, JobState.FAILED.value,
                             JobState.CANCELLED.value})
"""The states a job or dispatch unit never leaves (``Succeeded``, ``Failed``, ``Cancelled``)."""


class ReasonCode(StrEnum):
    """Why a job is in its state; shown by the API and the report."""

    PLACED = "Placed"
    NO_FEASIBLE_SLOT = "NoFeasibleSlot"
    """No allowed site has the GPU type and a start inside the window within the horizon."""
    INSUFFICIENT_CAPACITY = "InsufficientCapacity"
    """Feasible in isolation but the GPUs were needed by other work."""
    EXCEEDS_POWER_CAP = "ExceedsPowerCap"
    """The job alone draws more IT power than every allowed site's cap."""
    GANG_TOO_LARGE = "GangTooLarge"
    """The gang needs more GPUs of its type than any allowed site has."""
    DOMAIN_TOO_SMALL = "DomainTooSmall"
    """The gang asks to stay in one network domain (``topology = "same-domain"``) or in at
    most ``max_domains`` of them, and no allowed site's domains of its GPU type can hold it
    (``nodes_per_domain`` in the catalog)."""
    GANG_NOT_WHOLE_NODES = "GangNotWholeNodes"
    """The gang is larger than one node's GPUs of its type and not a whole number of nodes at
    any allowed site large enough for it (node shape ``gpus_per_node`` in the catalog)."""
    UNKNOWN_GPU_TYPE = "UnknownGpuType"
    DATA_RESIDENCY = "DataResidency"
    """No allowed site (data residency) exists in the catalog."""
    DEADLINE_PASSED = "DeadlinePassed"
    """The deadline lies before the horizon starts (or before the job could end)."""
    DEFERRED_PAST_HORIZON = "DeferredPastHorizon"
    """State Pending: the job's deadline lies beyond the horizon and starting it after the
    horizon (its terminal value) is cheaper than any start inside it, or the horizon had no
    room; a later run plans it."""
    SOLVER_NO_SOLUTION = "SolverNoSolution"
    BACKEND_UNAVAILABLE = "BackendUnavailable"
    """The site's scheduler could not be reached; dispatch retries with backoff."""
    RELEASE_FAILED = "ReleaseFailed"
    """The release pass could not act on a held or released unit: releasing it at its planned
    start, or bounding it by its planned stop (Kueue), failed with the backend's own error or
    an input error (not an outage: that is ``BackendUnavailable``). Written at the head of the
    row's detail, which names the call and the error; the unit's state and reason are kept and
    the next release pass tries again."""
    # dispatch (carbonsched.dispatch.outbox, adapters/dispatch)
    AWAITING_SUBMIT = "AwaitingSubmit"
    """The dispatch intent is recorded (outbox) and not yet confirmed by the backend."""
    SUBMITTED = "Submitted"
    """The backend holds the job until its planned start (Slurm ``--begin``, a suspended Job)."""
    ALREADY_DISPATCHED = "AlreadyDispatched"
    """The same job (and piece) was dispatched from an earlier plan; never submitted again."""
    NOT_COMMITTED = "NotCommitted"
    """The placement starts at or after ``commit_before``; a later run (plan) decides it."""
    NO_PAYLOAD = "NoPayload"
    """The job names nothing the site's backend can run (no script or command; a script at a
    Kubernetes site): not submitted; ``dispatch --placeholder`` runs ``sleep`` instead."""
    REJECTED = "Rejected"
    """The backend refused the submission (invalid request, unknown partition or GPU type)."""
    NAME_CONFLICT = "NameConflict"
    """A foreign object (not carrying our labels for this job) holds the Job name; or a job of
    the service's workload file has the id of a job submitted through the API."""
    UNKNOWN_SITE = "UnknownSite"
    """The job names a site the catalog does not define (a job submitted before a catalog
    edit removed it): no run can plan it."""
    UNUSABLE_TEMPLATE = "UnusableTemplate"
    """The job names a template the catalog no longer defines, or whose fields the job schema
    now refuses merged with the job's own (a job waiting in the rolling state when a catalog
    edit changed it): no run can plan it."""
    INVALID_SPEC = "InvalidSpec"
    """A stored job the job schema now refuses (stored before a rule of the schema was
    tightened): no run can plan it."""
    STARTED = "Started"
    COMPLETED = "Completed"
    BACKEND_FAILED = "BackendFailed"
    """The backend ran the job and it failed (non-zero exit, timeout, node failure)."""
    CANCELLED = "Cancelled"
    LOST = "Lost"
    """The backend no longer knows a job it accepted (purged, or the cluster was rebuilt)."""
    PAUSED = "Paused"
    """A piece of a preemptible job stopped at its planned end (time limit); the next piece
    resumes it from its checkpoint."""
    GRID_EVENT_PAUSED = "GridEventPaused"
    """State ``Paused``: a grid event paused the running job (the detail names the event)."""
    GRID_EVENT_HELD = "GridEventHeld"
    """State ``Dispatched``: a grid event holds the job past its planned start until the
    event's end (the detail names the event)."""
    GRID_EVENT_RESUMED = "GridEventResumed"
    """State ``Running``: resumed (or released) after the grid event that paused (held) it."""
    EVICTED = "Evicted"
    """The cluster took the running or admitted job back (a Kueue Workload's ``Evicted``
    condition, pods evicted from a Volcano Job or a JobSet); the detail names the cluster's
    reason. Never counted as a success."""
    PREEMPTED = "Preempted"
    """The cluster preempted the job for higher-priority work (Kueue ``Preempted``, Volcano
    preemption); the detail names the cluster's reason."""


class WorkKind(StrEnum):
    """Kind of batch work (both latency-tolerant)."""

    TRAINING = "training"
    BATCH = "batch"


def milli_shares(gpu_milli: int, shares_per_gpu: int) -> int:
    """Whole shares a ``gpu_milli`` job asks of one GPU: ``ceil(gpu_milli × S / 1000)``.

    Rounded up, so a job never gets less than it asked (250 milli on ``S = 10`` shares per GPU
    is 3 shares, 300 milli). Slurm ``--gres=shard:<k>``
    (https://slurm.schedmd.com/gres.html#Sharding), Kubernetes ``<resource>: <k>`` (NVIDIA
    device plugin time-slicing ``replicas``).

    Parameters
    ----------
    gpu_milli
        The job's share of one GPU, 1..1000. [1/1000 GPU]
    shares_per_gpu
        ``S``, the shares one GPU is cut into (:attr:`GpuPool.shares_per_gpu`). [-]

    Returns
    -------
    int
        Shares, 1..``S``. [-]
    """
    return -(-int(gpu_milli) * int(shares_per_gpu) // MAX_GPU_MILLI)


@dataclass(frozen=True)
class GpuPool:
    """GPUs of one type at a site, and the shape of the nodes that carry them.

    Attributes
    ----------
    count
        Number of GPUs. [-]
    board_power_w
        Board power per GPU at full load (vendor TDP/TBP). [W]
    gpus_per_node
        GPUs of this type on each node (the cluster's node shape, e.g. 8 on an HGX/DGX A100 or
        H100 board); ``None`` when the catalog does not say: the whole pool is then taken as
        one node (a gang of up to ``count`` GPUs runs on one node, as before node shapes were
        declared). ``count`` is a whole number of nodes (checked at catalog load). [-]
    nodes_per_domain
        Nodes per network domain (a leaf switch, an NVLink/InfiniBand island); the pool's
        nodes are cut into domains of this many nodes, the last one holding the rest
        (:attr:`domain_nodes`). ``None`` when not given: the whole pool is one domain. A gang
        with a topology constraint (:attr:`Job.max_domains`) is placed only within that many
        domains (:mod:`carbonsched.plan.domains`). [-]
    sharing
        How the site shares one GPU between jobs (:data:`GPU_SHARING`): ``"milli"``
        (time-slicing / MPS shares, a job's ``gpu_milli`` thousandths, at most 1000 on one
        GPU), ``"mig"`` (MIG partitions in the valid layouts of ``mig_model``), or ``None``
        (no sharing: a fractional job takes a whole GPU).
    mig_model
        The MIG table row (:data:`MIG_PROFILES`, e.g. ``"A100-40GB"``) whose profiles and
        placements the pool's GPUs are cut into; only with ``sharing = "mig"``.
    shares_per_gpu
        With ``sharing = "milli"``: the whole shares one GPU is cut into on the site's
        scheduler (Slurm's shards per GPU: gres.conf's per-node shard ``Count`` over the
        node's GPUs; or the NVIDIA device plugin's time-slicing ``replicas``), a divisor of
        1000
        (:data:`carbonsched.limits.SHARES_PER_GPU_CHOICES`). A ``gpu_milli`` job asks for
        :meth:`milli_shares` of them, and the planner packs it as that many shares
        (:meth:`booked_milli`), so the plan never puts more shares on a GPU than the backend
        has. [-]
    """

    count: int
    board_power_w: float
    gpus_per_node: int | None = None
    nodes_per_domain: int | None = None
    sharing: str | None = None
    mig_model: str | None = None
    shares_per_gpu: int = DEFAULT_SHARES_PER_GPU

    def milli_shares(self, gpu_milli: int) -> int:
        """Whole shares a ``gpu_milli`` job asks of one of this pool's GPUs. [-]

        :func:`milli_shares` with :attr:`shares_per_gpu`.
        """
        return milli_shares(gpu_milli, self.shares_per_gpu)

    def booked_milli(self, gpu_milli: int) -> int:
        """The milli the planner books for a ``gpu_milli`` job: its shares in milli.

        ``milli_shares(gpu_milli) × 1000 / S``, exact because ``S`` divides 1000; the jobs on
        one GPU then sum to at most 1000 exactly when their shares sum to at most ``S``.

        Parameters
        ----------
        gpu_milli
            The job's share of one GPU, 1..1000. [1/1000 GPU]

        Returns
        -------
        int
            Booked share, ``gpu_milli`` ≤ result ≤ 1000. [1/1000 GPU]
        """
        return self.milli_shares(gpu_milli) * (MAX_GPU_MILLI // self.shares_per_gpu)

    @property
    def node_gpus(self) -> int:
        """GPUs on one node: ``gpus_per_node``, or the whole pool when no shape is given. [-]"""
        return self.gpus_per_node if self.gpus_per_node is not None else self.count

    def gang_nodes(self, gpus: int) -> int | None:
        """Nodes a gang of ``gpus`` GPUs spans in this pool, or ``None`` when it cannot run.

        A gang of at most one node's GPUs runs on one node; a larger gang runs on
        ``gpus / gpus_per_node`` whole nodes and must be a whole number of them (a gang's
        GPUs are split evenly over its nodes, Slurm ``--nodes N --gres=gpu:<type>:<G>`` per
        node); it must also fit in the pool.

        Parameters
        ----------
        gpus
            Gang size. [-]

        Returns
        -------
        int or None
            Node count [-]; ``None`` when the gang exceeds the pool or is larger than one node
            and not a whole number of nodes.
        """
        node = self.node_gpus
        if gpus < 1 or gpus > self.count or node < 1:
            return None
        if gpus <= node:
            return 1
        return gpus // node if gpus % node == 0 else None

    @property
    def domain_nodes(self) -> tuple[int, ...]:
        """Nodes in each network domain, in domain order, shape ``(M,)``. [-]

        ``count / node_gpus`` nodes cut into domains of ``nodes_per_domain`` nodes (the last
        domain holds the remainder); one domain of every node when ``nodes_per_domain`` is not
        given.
        """
        nodes = max(self.count // max(self.node_gpus, 1), 1)
        k = self.nodes_per_domain or nodes
        full, rest = divmod(nodes, k)
        return (k,) * full + ((rest,) if rest else ())

    def domains_needed(self, gpus: int) -> int | None:
        """Fewest network domains a gang of ``gpus`` GPUs can run in here. [-]

        ``ceil(nodes / nodes_per_domain)`` of the gang's nodes (:meth:`gang_nodes`); ``None``
        when the gang cannot run in the pool at all.
        """
        nodes = self.gang_nodes(gpus)
        if nodes is None:
            return None
        sizes = sorted(self.domain_nodes, reverse=True)
        left, used = nodes, 0
        for k in sizes:
            if left <= 0:
                break
            left -= k
            used += 1
        return used if left <= 0 else None


@dataclass(frozen=True)
class Tenant:
    """A tenant of the catalog: its weight in fair sharing and its guaranteed quotas.

    In the spirit of Kueue's ClusterQueue (``nominalQuota`` guaranteed, the rest borrowed
    under fair sharing; https://kueue.sigs.k8s.io/docs/concepts/cluster_queue/): when
    capacity binds, the planner first gives each tenant its quota (up to its demand), then
    shares the rest by weighted dominant-resource fairness (Ghodsi et al., "Dominant Resource
    Fairness", NSDI 2011; :mod:`carbonsched.plan.fairness`).

    Attributes
    ----------
    name
        Tenant id, as in the jobs' ``tenant`` field.
    weight
        Weight in weighted DRF: a tenant of weight 2 gets twice the dominant share of a
        tenant of weight 1 when both want more. [-]
    quota_gpu_hours_per_day
        Guaranteed GPU-hours per day by GPU type (``{"A100": 96.0}``); scaled to the
        planning horizon (× horizon hours / 24). [GPU·h/d]
    """

    name: str
    weight: float = 1.0
    quota_gpu_hours_per_day: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class PueModel:
    """Parameters of a site's PUE model (see ``carbonsched.forecasts.pue``).

    Attributes
    ----------
    pue_min
        PUE in full free cooling (fans, power distribution losses only). [-]
    free_cooling_below_c
        Outdoor dry-bulb [°C] below which the chillers are off (economiser only).
    mechanical_slope_per_c
        PUE increase per °C above the free-cooling limit (chiller load). [1/°C]
    humidity_slope
        PUE increase per unit relative humidity above ``humidity_ref_pct`` when above the
        free-cooling limit (evaporative/dehumidification penalty). [1/%]
    humidity_ref_pct
        Reference relative humidity. [%]
    pue_max
        Cap on modelled PUE. [-]
    """

    pue_min: float = 1.15
    free_cooling_below_c: float = 18.0
    mechanical_slope_per_c: float = 0.012
    humidity_slope: float = 0.0008
    humidity_ref_pct: float = 50.0
    pue_max: float = 1.8


@dataclass(frozen=True)
class Backend:
    """The scheduler that runs a site's work.

    Attributes
    ----------
    kind
        ``"slurm"`` or ``"kubernetes"``.
    cluster
        Slurm cluster name (``kind="slurm"``).
    context, namespace
        Kubernetes context and namespace (``kind="kubernetes"``).
    partition
        Slurm partition, optional.
    workload
        What a Kubernetes site runs a placement as (``kind="kubernetes"``): ``"job"`` (a
        ``batch/v1`` Job, the default), ``"kueue"`` (a Job — a JobSet for a multi-node gang —
        admitted by Kueue through ``queue``), ``"jobset"`` (a JobSet) or ``"volcano"`` (a Volcano
        ``batch.volcano.sh/v1alpha1`` Job). See docs/dispatch.md.
    queue
        The Kueue LocalQueue (``workload="kueue"``, required) or the Volcano Queue
        (``workload="volcano"``, default ``"default"``).
    """

    kind: str
    cluster: str | None = None
    context: str | None = None
    namespace: str | None = None
    partition: str | None = None
    workload: str = "job"
    queue: str | None = None


@dataclass(frozen=True)
class Site:
    """A data-centre site in a catalog; see ``regions/schema.md`` for every field."""

    id: str
    name: str
    role: SiteRole
    zone: str
    signal_source: str
    latitude: float
    longitude: float
    timezone: str
    gpus: dict[str, GpuPool]
    it_power_cap_kw: float
    pue: PueModel
    latency_ms: dict[str, float]
    backend: Backend
    green_surplus_max_kw: float = 0.0
    """Green power the site has contracted to absorb when the grid would curtail it (for
    example a direct-supply or curtailment-absorption agreement). The hourly absorbable power is
    ``green_surplus_index × green_surplus_max_kw``. [kW]"""
    facility_power_cap_kw: float | None = None
    """Grid-connection cap on facility power (IT × PUE); ``None`` where only the IT cap
    (PDU/UPS) binds. The planner keeps IT power × the PUE forecast's upper 95 % bound within it
    in every hour. [kW]"""
    province: str | None = None
    annual_emission_factor_g_per_kwh: float | None = None
    """Official annual average grid emission factor, where one is cited. [g/kWh]"""
    meta: dict[str, Any] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()
    """Other names of the site, such as the cloud regions in its grid zone (``westus``,
    ``uksouth``); the Carbon Aware SDK routes accept them, matched case-insensitively."""

    def gpu_count(self, gpu_type: str) -> int:
        """GPUs of ``gpu_type`` at this site (0 if none). [-]"""
        pool = self.gpus.get(gpu_type)
        return pool.count if pool else 0

    def gang_nodes(self, gpu_type: str, gpus: int) -> int | None:
        """Nodes a gang of ``gpus`` GPUs of ``gpu_type`` spans here. [-]

        :meth:`GpuPool.gang_nodes` of the site's pool; ``None`` when the site lacks the type or
        the gang cannot be cut into its nodes.
        """
        pool = self.gpus.get(gpu_type)
        return pool.gang_nodes(gpus) if pool else None


def gang_shape_reason(gpus: int, gpu_type: str, sites: list[Site]) -> tuple[ReasonCode, str]:
    """The reason a gang cannot run at any of ``sites``.

    It is larger than one node and not a whole number of nodes at any of them
    (:meth:`GpuPool.gang_nodes`).

    Parameters
    ----------
    gpus
        Gang size. [-]
    gpu_type
        The gang's GPU type.
    sites
        The allowed sites whose pool of ``gpu_type`` is large enough for the gang.

    Returns
    -------
    (ReasonCode, str)
        :attr:`ReasonCode.GANG_NOT_WHOLE_NODES` and a message naming each site's node shape
        and the gang sizes that would run there.
    """
    shapes = sorted({s.gpus[gpu_type].node_gpus for s in sites if gpu_type in s.gpus})
    per_site = ", ".join(f"{s.id}: {s.gpus[gpu_type].node_gpus} per node"
                         for s in sites if gpu_type in s.gpus)
    sizes = " or ".join(f"a multiple of {n}" for n in shapes)
    return (ReasonCode.GANG_NOT_WHOLE_NODES,
            f"gang of {gpus} {gpu_type} is larger than one node and not a whole number of nodes "
            f"at any allowed site large enough ({per_site}); give {sizes}, or at most "
            f"{max(shapes, default=0)} GPUs")


def domains_hold(site: Site, job: Job) -> bool:
    """Whether ``job.max_domains`` network domains of ``site`` can hold the gang."""
    need = site.gpus[job.gpu_type].domains_needed(job.gpus)
    return need is not None and need <= (job.max_domains or need)


def runs_at(site: Site, job: Job) -> bool:
    """Whether ``site``'s backend can run what ``job`` names (:meth:`JobPayload.runs_on`)."""
    return job.payload is None or job.payload.runs_on(site.backend.kind)


def payload_reason(job: Job, sites: list[Site]) -> tuple[ReasonCode, str]:
    """The reason ``job``'s payload can run at none of ``sites`` (their backends' kinds).

    Returns
    -------
    (ReasonCode, str)
        :attr:`ReasonCode.NO_PAYLOAD` and a message naming what the job gives, each site's
        backend and what to change.
    """
    p = job.payload
    gives = ", ".join(k for k in ("script", "script_path", "command", "image", "pod_template")
                      if p is not None and getattr(p, k))
    at = ", ".join(f"{s.id} ({s.backend.kind})" for s in sites)
    if p is not None and p.bundle_image:
        return (ReasonCode.NO_PAYLOAD,
                f"the job gives {gives}, which no allowed site's backend runs ({at}): its image "
                f"{p.image!r} is a path (an OCI bundle), which only a Slurm site runs "
                "(--container), with a script, script_path or command; a Kubernetes site pulls "
                "an image from a registry; give a registry image such as "
                "'ghcr.io/org/train:1.4', or a command and allow a Slurm site (allowed_sites)")
    return (ReasonCode.NO_PAYLOAD,
            f"the job gives {gives}, which no allowed site's backend runs ({at}): a Slurm "
            "site runs a script, script_path or command; a Kubernetes site an image, a command "
            "or a pod_template; give what the site runs, or allow sites that run it "
            "(allowed_sites)")


def names_nothing_to_run(job: Job) -> bool:
    """Whether ``job`` names nothing to run (no payload, or one without what runs)."""
    return job.payload is None or not job.payload.runs_something


def nothing_to_run(job_id: str, consequence: str, fix: str) -> str:
    """What is said of a job that names nothing to run: the one text for every place.

    Dispatch's refusal (outcome ``no_payload``), the job's ``Failed``/``NoPayload`` record and
    the API's 422 at submission all say it this way.

    Parameters
    ----------
    job_id
        The job, as the message shows it (quoted or not).
    consequence
        What follows for the job here (``""`` for none), after a comma.
    fix
        The way out besides giving a payload (the placeholder, as the caller turns it on).

    Returns
    -------
    str
        ``job ID names nothing to run (script, script_path, command, image or pod_template)
        [, CONSEQUENCE]; give one in its spec (or a template that does), or FIX``.
    """
    then = f", {consequence}" if consequence else ""
    return (f"job {job_id} names nothing to run (script, script_path, command, image or "
            f"pod_template){then}; give one in its spec (or a template that does), or {fix}")


def domain_reason(job: Job, sites: list[Site]) -> tuple[ReasonCode, str]:
    """The reason a topology-bound gang cannot run at any of ``sites``.

    Parameters
    ----------
    job
        The gang, with :attr:`Job.max_domains` set.
    sites
        The allowed sites whose pool of the job's GPU type can hold the gang's nodes.

    Returns
    -------
    (ReasonCode, str)
        :attr:`ReasonCode.DOMAIN_TOO_SMALL` and a message naming each site's domain shape and
        how many domains the gang would need there.
    """
    per_site = []
    for s in sites:
        pool = s.gpus[job.gpu_type]
        need = pool.domains_needed(job.gpus)
        per_site.append(f"{s.id}: {pool.nodes_per_domain or len(pool.domain_nodes)} node(s) "
                        f"of {pool.node_gpus} GPUs per domain, needs "
                        f"{'-' if need is None else need}")
    span = "one network domain" if job.max_domains == 1 else \
        f"at most {job.max_domains} network domains"
    return (ReasonCode.DOMAIN_TOO_SMALL,
            f"gang of {job.gpus} {job.gpu_type} must stay in {span}, and no allowed site's "
            f"domains can hold it ({'; '.join(per_site)}); allow more domains (max_domains), "
            "a smaller gang, or a site with larger domains")


def minutes_from_hours(hours: float, what: str = "duration_hours") -> int:
    """Whole minutes of a duration given in (possibly fractional) hours.

    Raises
    ------
    WorkloadError
        ``hours`` is not a finite number or not a whole number of minutes (within 1e-6 min).
    """
    try:
        if isinstance(hours, bool):
            raise TypeError
        minutes = float(hours) * 60.0
    except (TypeError, ValueError) as exc:
        raise WorkloadError(f"{what} must be a number of hours, got {hours!r}") from exc
    if not np.isfinite(minutes) or abs(minutes - round(minutes)) > 1e-6:
        raise WorkloadError(f"{what} = {hours!r} h is not a whole number of minutes; give "
                            "duration_minutes instead (e.g. 1.5 h = 90 min)")
    return int(round(minutes))


PAYLOAD_FIELDS = ("template", "script", "script_path", "command", "args", "workdir", "env",
                  "account", "partition", "qos", "image", "volumes", "service_account",
                  "pod_template", "gpu_milli", "mig_profile")
"""The payload fields of the job schema, in its order (``docs/workload.md``, "Payload
fields"); also the fields a catalog ``[templates.NAME]`` table may set."""

MIG_PROFILES: dict[str, tuple[str, ...]] = {
    "A30": ("1g.6gb", "1g.6gb+me", "2g.12gb", "2g.12gb+me", "4g.24gb"),
    "A100-40GB": ("1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
    "A100-80GB": ("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb",
                  "7g.80gb"),
    "H100": ("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    "H100-94GB": ("1g.12gb", "1g.12gb+me", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb",
                  "7g.94gb"),
    "H200": ("1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"),
}
"""MIG GPU instance profiles per GPU model (``<compute slices>g.<memory>gb``, ``+me`` with the
media extensions). Source: NVIDIA Multi-Instance GPU User Guide, "Supported MIG Profiles"
(https://docs.nvidia.com/datacenter/tesla/mig-user-guide/#supported-mig-profiles), tables for
A30 24GB, A100 40GB/80GB, H100 80GB (SXM5/PCIe), H100 94GB (NVL) and H200 141GB. A catalog
type is looked up by :func:`mig_profiles`; GPUs without MIG (T4, V100, L4, ...) have none."""

MIG_ALIASES: dict[str, tuple[str, ...]] = {
    "A100": ("A100-40GB", "A100-80GB"),
    "H800": ("H100",),
    "H100-80GB": ("H100",),
    "H200-141GB": ("H200",),
}
"""Catalog GPU type names that stand for MIG table rows: ``A100`` (the shipped catalogs do not
say 40 or 80 GB) takes the profiles of both; the H800 is the export variant of the H100 SXM5
80GB with the same MIG geometry (NVIDIA H800 datasheet)."""


GPU_SHARING = ("milli", "mig")
"""Ways a site may share one GPU between jobs (``sharing`` of a catalog GPU pool): ``milli``
shares (NVIDIA device-plugin time-slicing or MPS; Slurm shard GRES) and ``mig`` partitions
(NVIDIA Multi-Instance GPU)."""


def mig_compute_slices(profile: str) -> int:
    """Compute slices of a MIG profile: the ``N`` of ``Ng.<memory>gb``. [-]

    Raises
    ------
    ValueError
        The name does not start with ``<N>g.``.
    """
    head = profile.split(".", 1)[0]
    if not head.endswith("g") or not head[:-1].isdigit():
        raise ValueError(f"MIG profile {profile!r} does not start with '<N>g.' (e.g. 1g.10gb)")
    return int(head[:-1])


def mig_full_compute(gpu_type: str) -> int:
    """Compute slices of a whole GPU of ``gpu_type`` (7 on A100/H100/H200, 4 on A30). [-]

    The largest profile of the type (``7g.40gb``, ``4g.24gb``); 0 when the type has no MIG.
    """
    return max((mig_compute_slices(p) for p in mig_profiles(gpu_type)), default=0)


def mig_models(gpu_type: str) -> tuple[str, ...]:
    """The :data:`MIG_PROFILES` rows a GPU type stands for (``A100``: both A100 rows). [-]

    Parameters
    ----------
    gpu_type
        A catalog GPU type (``A100``, ``H800``) or a table row (``A100-80GB``); any case.
    """
    rows = {k.upper(): k for k in MIG_PROFILES}
    aliases = {k.upper(): v for k, v in MIG_ALIASES.items()}
    key = gpu_type.strip().upper()
    return aliases.get(key, (rows[key],) if key in rows else ())


def mig_profiles(gpu_type: str) -> tuple[str, ...]:
    """The MIG profiles a GPU type offers (:data:`MIG_PROFILES`); empty when it has no MIG.

    Parameters
    ----------
    gpu_type
        A catalog GPU type (``A100``, ``H100``) or a table row (``A100-80GB``); any case.
    """
    out: list[str] = []
    for n in mig_models(gpu_type):
        out += [p for p in MIG_PROFILES[n] if p not in out]
    return tuple(out)


@dataclass(frozen=True)
class JobPayload:
    """What a job runs, and how it asks for a slice of a GPU on the wire.

    Validated by the job schema (:class:`carbonsched.workload.schema.JobSpec`); rendered by the
    dispatch adapters (a Slurm batch script, a Kubernetes pod spec). Every field is optional;
    see ``docs/workload.md`` ("Payload fields") for their meaning per backend.

    Attributes
    ----------
    template
        Name of the catalog template (``[templates.NAME]``) the job's fields were laid over.
    script, script_path
        Slurm batch script: inline text, or a path on the cluster's submit host.
    command
        Shell text (run by ``sh -c`` / as the batch script's body) or an argv list (exec form).
    args
        Arguments after ``command`` (Kubernetes ``args``; appended, quoted, on Slurm).
    workdir
        Working directory (Slurm ``--chdir``, Kubernetes ``workingDir``).
    env
        Environment the job names, and only that (names never ``CARBONSCHED_*``).
    account, partition, qos
        Slurm ``--account``, ``--partition``, ``--qos``.
    image
        Container image: a registry reference (Kubernetes container image; Slurm pyxis
        ``--container-image``) or an OCI bundle's absolute path (Slurm ``--container`` only,
        :attr:`bundle_image`).
    volumes
        Kubernetes volumes with their mounts: dicts ``{name, mount_path, read_only,
        host_path | claim | config_map | secret | empty_dir}``.
    service_account
        Kubernetes ``serviceAccountName``.
    pod_template
        A full Kubernetes PodTemplateSpec (``{"metadata": ..., "spec": ...}``) used instead of the
        pod carbonsched would build.
    gpu_milli
        Thousandths of one GPU (1..1000) the job needs instead of whole GPUs. [1/1000 GPU]
    mig_profile
        A MIG profile (``1g.10gb``) the job runs on instead of whole GPUs.
    """

    template: str | None = None
    script: str | None = None
    script_path: str | None = None
    command: str | tuple[str, ...] | None = None
    args: tuple[str, ...] = ()
    workdir: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    account: str | None = None
    partition: str | None = None
    qos: str | None = None
    image: str | None = None
    volumes: tuple[Any, ...] = ()
    service_account: str | None = None
    pod_template: Any = None
    gpu_milli: int | None = None
    mig_profile: str | None = None

    def __hash__(self) -> int:
        import json

        return hash(json.dumps(self.to_dict(), sort_keys=True))

    @property
    def env_map(self) -> dict[str, str]:
        """``env`` as a dict (in the order given)."""
        return dict(self.env)

    @property
    def runs_something(self) -> bool:
        """True when the payload names what to run (script, path, command, image or pod)."""
        return any((self.script, self.script_path, self.command, self.image,
                    self.pod_template))

    @property
    def bundle_image(self) -> bool:
        """True when ``image`` is an OCI bundle's absolute path, not a reference a pod can pull.

        Slurm runs such an image with ``--container``; Kubernetes cannot (:meth:`runs_on`).
        """
        return bool(self.image and self.image.startswith("/"))

    def runs_on(self, kind: str) -> bool:
        """Whether a backend of ``kind`` (``slurm``, ``kubernetes``) can run this payload.

        Slurm runs a ``script``, ``script_path`` or ``command`` (in the ``image`` when given:
        pyxis's ``--container-image`` for a reference, ``--container`` for a bundle path);
        Kubernetes an ``image``, a ``command`` (in the site's default image) or a
        ``pod_template``, never a script (a ``script_path`` is a file on the submit host) nor
        an image given as a path (:attr:`bundle_image`: a file on a Slurm node, not something
        a kubelet can pull). A payload that names nothing to run runs anywhere (dispatch
        decides: a placeholder or a refusal).
        """
        if not self.runs_something:
            return True
        if kind == "slurm":
            return bool(self.script or self.script_path or self.command)
        if kind == "kubernetes":
            return not (self.script or self.script_path or self.bundle_image)
        return True

    @property
    def fractional(self) -> bool:
        """True when the job asks for part of a GPU (``gpu_milli`` or ``mig_profile``)."""
        return self.gpu_milli is not None or self.mig_profile is not None

    def to_dict(self) -> dict[str, Any]:
        """The fields that are set, JSON-ready (lists for tuples, ``env`` as a mapping)."""
        out: dict[str, Any] = {}
        for name in PAYLOAD_FIELDS:
            v = getattr(self, name)
            if v is None or v == ():
                continue
            if name == "env":
                v = dict(v)
            elif isinstance(v, tuple):
                v = list(v)
            out[name] = v
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> JobPayload | None:
        """The payload of :meth:`to_dict`'s output (None for None or an empty mapping).

        Raises
        ------
        WorkloadError
            An unknown field (the names are :data:`PAYLOAD_FIELDS`).
        """
        if not data:
            return None
        unknown = sorted(set(data) - set(PAYLOAD_FIELDS))
        if unknown:
            raise WorkloadError(f"unknown payload field(s) {', '.join(unknown)}; known: "
                                f"{', '.join(PAYLOAD_FIELDS)}")
        kw = dict(data)
        if isinstance(kw.get("command"), list):
            kw["command"] = tuple(kw["command"])
        for name in ("args", "volumes"):
            if name in kw:
                kw[name] = tuple(kw[name] or ())
        if "env" in kw:
            kw["env"] = tuple((str(k), str(v)) for k, v in dict(kw["env"] or {}).items())
        return cls(**kw)


@dataclass(frozen=True, init=False)
class Job:
    """A latency-tolerant batch or training job: a gang of GPUs for a number of minutes.

    Attributes
    ----------
    id, tenant
        Identifiers; any string (the planner never uses them in solver names).
    gpu_type
        GPU model the job needs, as in the site inventories.
    gpus
        Gang size: all GPUs at one site at once, or none. [-]
    duration_minutes
        Run time, authoritative. [min] The constructor also takes ``duration_hours`` (hours,
        fractions allowed when they make whole minutes: 1.5 h = 90 min); read it back as the
        float property :attr:`duration_hours`.
    power_per_gpu_kw
        IT power per GPU while running, including host share. [kW]
    earliest_start, deadline
        Window (tz-aware UTC, any instant): the job starts at or after ``earliest_start`` and
        ends by ``deadline``.
    allowed_sites
        Sites the job may run at (data residency); empty means any site.
    kind
        ``training`` or ``batch``.
    preemptible
        The job can be suspended and resumed from a checkpoint (run in pieces at one site).
    checkpoint_overhead_minutes
        Time each resumption (piece after the first) spends restoring its checkpoint before
        doing work, at the job's full power. [min]
    max_pieces
        Most pieces the job may run in (1 = never split; > 1 needs ``preemptible``). [-]
    payload
        What the job runs (:class:`JobPayload`); None when the job names nothing to run. Not
        part of the job's equality: the planner never reads it.
    max_domains
        Most network domains (NVLink/InfiniBand islands, ``nodes_per_domain`` in the
        catalog) the gang may span; 1 is ``topology = "same-domain"`` in the job schema.
        ``None`` (default): no topology constraint. A gang with one runs in one piece. [-]
    """

    id: str
    tenant: str
    gpu_type: str
    gpus: int
    duration_minutes: int
    power_per_gpu_kw: float
    earliest_start: pd.Timestamp
    deadline: pd.Timestamp
    allowed_sites: tuple[str, ...] = ()
    kind: WorkKind = WorkKind.BATCH
    preemptible: bool = False
    checkpoint_overhead_minutes: int = 0
    max_pieces: int = 1
    payload: JobPayload | None = field(default=None, compare=False)
    max_domains: int | None = None

    def __init__(self, id: str, tenant: str, gpu_type: str, gpus: int,
                 duration_hours: float | None = None, power_per_gpu_kw: float | None = None,
                 earliest_start: pd.Timestamp | None = None,
                 deadline: pd.Timestamp | None = None, allowed_sites: tuple[str, ...] = (),
                 kind: WorkKind = WorkKind.BATCH, *, duration_minutes: int | None = None,
                 preemptible: bool = False, checkpoint_overhead_minutes: int = 0,
                 max_pieces: int | None = None, payload: JobPayload | None = None,
                 max_domains: int | None = None) -> None:
        if duration_minutes is None and duration_hours is None:
            raise WorkloadError(f"job {id}: give duration_minutes or duration_hours")
        if duration_minutes is not None and duration_hours is not None:
            if abs(duration_minutes - float(duration_hours) * 60.0) > 1e-6:
                raise WorkloadError(
                    f"job {id}: duration_minutes {duration_minutes} and duration_hours "
                    f"{duration_hours} disagree; give one of them")
        if duration_minutes is None:
            duration_minutes = minutes_from_hours(duration_hours, f"job {id}: duration_hours")
        if power_per_gpu_kw is None or earliest_start is None or deadline is None:
            raise WorkloadError(
                f"job {id}: power_per_gpu_kw, earliest_start and deadline are required")
        if max_pieces is None:
            max_pieces = 1
        for name, value in (("id", id), ("tenant", tenant), ("gpu_type", gpu_type),
                            ("gpus", gpus), ("duration_minutes", duration_minutes),
                            ("power_per_gpu_kw", power_per_gpu_kw),
                            ("earliest_start", earliest_start), ("deadline", deadline),
                            ("allowed_sites", tuple(allowed_sites)), ("kind", kind),
                            ("preemptible", bool(preemptible)),
                            ("checkpoint_overhead_minutes", checkpoint_overhead_minutes),
                            ("max_pieces", max_pieces), ("payload", payload),
                            ("max_domains", max_domains)):
            object.__setattr__(self, name, value)
        self.__post_init__()

    def __post_init__(self) -> None:
        for what, value in (("job id", self.id), ("tenant", self.tenant),
                            *(("site id", s) for s in self.allowed_sites)):
            msg = identifier_problem(value, what)
            if msg is not None:
                raise WorkloadError(msg)
        object.__setattr__(self, "earliest_start", require_aware(self.earliest_start,
                                                                 f"job {self.id} earliest_start"))
        object.__setattr__(self, "deadline", require_aware(self.deadline,
                                                           f"job {self.id} deadline"))
        if self.gpus < 1:
            raise WorkloadError(f"job {self.id}: gpus must be >= 1, got {self.gpus}")
        if isinstance(self.duration_minutes, bool) or int(self.duration_minutes) != \
                self.duration_minutes or self.duration_minutes < 1:
            raise WorkloadError(
                f"job {self.id}: duration_minutes must be a whole number >= 1, got "
                f"{self.duration_minutes}")
        object.__setattr__(self, "duration_minutes", int(self.duration_minutes))
        if not _positive(self.power_per_gpu_kw):
            raise WorkloadError(f"job {self.id}: power_per_gpu_kw must be a finite number > 0 "
                                f"[kW], got {_shown(self.power_per_gpu_kw)}")
        if self.deadline < self.earliest_start:
            raise WorkloadError(f"job {self.id}: deadline is before earliest_start")
        o = self.checkpoint_overhead_minutes
        if isinstance(o, bool) or int(o) != o or not 0 <= o <= MAX_CHECKPOINT_OVERHEAD_MINUTES:
            raise WorkloadError(
                f"job {self.id}: checkpoint_overhead_minutes must be a whole number in "
                f"0..{MAX_CHECKPOINT_OVERHEAD_MINUTES}, got {o!r}")
        k = self.max_pieces
        if isinstance(k, bool) or int(k) != k or not 1 <= k <= MAX_PIECES:
            raise WorkloadError(
                f"job {self.id}: max_pieces must be a whole number in 1..{MAX_PIECES}, "
                f"got {k!r}")
        if k > 1 and not self.preemptible:
            raise WorkloadError(
                f"job {self.id}: max_pieces {k} > 1 needs preemptible = true (a job that "
                "cannot checkpoint runs in one piece)")
        object.__setattr__(self, "checkpoint_overhead_minutes", int(o))
        object.__setattr__(self, "max_pieces", int(k))
        n = self.max_domains
        if n is not None:
            if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not \
                    1 <= n <= MAX_DOMAINS:
                raise WorkloadError(
                    f"job {self.id}: max_domains must be a whole number in 1..{MAX_DOMAINS} "
                    f"(1 = topology \"same-domain\"), got {n!r}")
            if k > 1:
                raise WorkloadError(
                    f"job {self.id}: a gang with a topology constraint (max_domains {n}) runs "
                    f"in one piece; set max_pieces = 1 or drop the topology constraint")
            object.__setattr__(self, "max_domains", int(n))

    @property
    def duration_hours(self) -> float:
        """Run time in hours (``duration_minutes / 60``, may be fractional). [h]"""
        return self.duration_minutes / 60.0

    @property
    def gpu_share(self) -> float:
        """Share of one GPU the job asks for. [-]

        1, ``gpu_milli / 1000``, or a MIG profile's compute slices over the whole GPU's
        (``1g.10gb`` on an A100: 1/7).
        """
        pl = self.payload
        if pl is None or not pl.fractional:
            return 1.0
        if pl.gpu_milli is not None:
            return pl.gpu_milli / 1000.0
        full = mig_full_compute(self.gpu_type)
        return mig_compute_slices(pl.mig_profile) / full if full else 1.0

    @property
    def it_power_kw(self) -> float:
        """IT power of the whole gang while running. [kW]

        A fractional job (``gpu_milli`` or ``mig_profile``) draws its share of one GPU's power,
        ``power_per_gpu_kw × gpu_share`` (an assumption of this project: a shared GPU's draw
        split in proportion to the shares, idle power not modelled, as for whole GPUs).
        """
        return self.gpus * self.power_per_gpu_kw * self.gpu_share

    @property
    def energy_kwh(self) -> float:
        """IT energy of the whole run (one piece, no checkpoint overhead). [kWh]"""
        return self.it_power_kw * self.duration_hours


@dataclass(frozen=True)
class InferenceDemand:
    """Latency-critical inference demand of one user area in one hour.

    Attributes
    ----------
    area
        User area id, as in the sites' ``latency_ms`` tables.
    hour
        Start of the hour (tz-aware UTC).
    gpu_type, gpus
        GPUs needed in that hour. [-]
    slo_ms
        Latency SLO: serve only from sites with round-trip latency <= this. [ms]
    power_per_gpu_kw
        IT power per serving GPU. [kW]
    """

    area: str
    hour: pd.Timestamp
    gpu_type: str
    gpus: int
    slo_ms: float
    power_per_gpu_kw: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "hour", require_aware(self.hour, f"inference {self.area} hour"))
        if self.gpus < 0:
            raise WorkloadError(f"inference {self.area}: gpus must be >= 0")
        for name, unit in (("power_per_gpu_kw", "kW"), ("slo_ms", "ms")):
            if not _positive(getattr(self, name)):
                raise WorkloadError(f"inference {self.area} at {self.hour.isoformat()}: {name} "
                                    f"must be a finite number > 0 [{unit}], got "
                                    f"{_shown(getattr(self, name))}")


def _shown(value: object) -> str:
    """A value for a message: numbers plainly (``nan``, not ``np.float64(nan)``), else repr."""
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        return f"{float(value):g}"
    return repr(value)


def _positive(value: object) -> bool:
    """Whether ``value`` is a finite real number > 0 (NaN, ±inf, text and booleans are not)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        return False
    return math.isfinite(float(value)) and float(value) > 0


@dataclass(frozen=True)
class Placement:
    """Where and when a job runs, with its forecast energy and emissions."""

    job_id: str
    site: str
    start: pd.Timestamp
    end: pd.Timestamp
    gpu_type: str
    gpus: int
    energy_kwh: float
    """Facility energy (IT × PUE). [kWh]"""
    emissions_kg: float
    """Forecast emissions net of absorbed green surplus. [kg CO2eq]"""
    piece: int = 0
    """Index of this piece of a preemptible job, 0..pieces-1 in time order (0 for a job
    placed whole); dispatch keys its unit ``<job_id>#<piece>``."""
    pieces: int = 1
    """How many pieces the job runs in under this plan. [-]"""
    overhead_minutes: int = 0
    """Checkpoint-restore time at the start of this piece (0 for piece 0). [min]"""
    overhead_kwh: float = 0.0
    """Facility energy of that overhead, included in ``energy_kwh``. [kWh]"""
    gpu_index: int | None = None
    """For a fractional job on a site that shares GPUs: which GPU of the site's pool of its
    type (0-based) carries its slice for its whole run; ``None`` for whole GPUs (and for a
    fractional job given a whole GPU). [-]"""
    mig_start: int | None = None
    """For a MIG slice: its first memory slice on that GPU (the placement start of
    ``nvidia-smi mig -lgipp``); ``None`` otherwise. [-]"""
    domains: tuple[int, ...] = ()
    """Network domain (0-based, of the site's pool of the GPU type) of each node of a gang with
    a topology constraint (:attr:`Job.max_domains`), one entry per node; empty for every other
    job."""


@dataclass(frozen=True)
class RunningWork:
    """Work already running (or committed to start) that holds GPUs and power until ``end``.

    The planner subtracts it from GPU capacity and the power caps in every slot it still
    occupies (from the horizon start up to ``end``, rounded up to the slot grid); its own
    emissions are not part of the plan's.

    Attributes
    ----------
    site
        Site id (must be in the problem's sites).
    gpu_type
        GPU type it uses.
    gpus
        GPUs it holds. [-]
    it_power_kw
        IT power it draws while running. [kW]
    end
        When it releases them (tz-aware). [UTC]
    job_id
        Optional id, for messages.
    start
        Optional start (tz-aware); slots before it are not held. Default: held from the
        horizon start.
    gpu_index
        For a slice (a MIG instance or a milli share) committed earlier: the GPU of the pool
        it holds (:attr:`Placement.gpu_index`); ``None`` for whole GPUs. Slices on one GPU
        hold that one GPU, and a new slice may share it where its layout has room.
    mig_start
        Memory slice the MIG instance starts at (:attr:`Placement.mig_start`).
    mig_profile
        The slice's MIG profile (with ``gpu_index``, at a MIG pool).
    gpu_milli
        The slice's milli share (with ``gpu_index``, at a milli pool). [1/1000 GPU]
    domains
        Network domain per node of a topology-bound gang (:attr:`Placement.domains`); the
        gang holds those domains' GPUs.
    """

    site: str
    gpu_type: str
    gpus: int
    it_power_kw: float
    end: pd.Timestamp
    job_id: str = ""
    start: pd.Timestamp | None = None
    gpu_index: int | None = None
    mig_start: int | None = None
    mig_profile: str | None = None
    gpu_milli: int | None = None
    domains: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        what = f"running work {self.job_id or self.site!r}"
        object.__setattr__(self, "end", require_aware(self.end, f"{what} end"))
        if self.start is not None:
            object.__setattr__(self, "start", require_aware(self.start, f"{what} start"))
        if self.gpus < 0:
            raise WorkloadError(f"{what}: gpus must be >= 0, got {self.gpus}")
        if not self.it_power_kw >= 0:
            raise WorkloadError(f"{what}: it_power_kw must be >= 0, got {self.it_power_kw}")
        if self.gpu_index is not None:
            if self.gpu_index < 0 or self.gpus != 1:
                raise WorkloadError(
                    f"{what}: a slice holds one GPU at gpu_index >= 0; got gpus={self.gpus}, "
                    f"gpu_index={self.gpu_index} (drop gpu_index for whole-GPU work)")
            if (self.mig_profile is None) == (self.gpu_milli is None):
                raise WorkloadError(
                    f"{what}: a slice at gpu_index {self.gpu_index} needs exactly one of "
                    "mig_profile (with mig_start) or gpu_milli")
            if self.mig_profile is not None and self.mig_start is None:
                raise WorkloadError(f"{what}: MIG slice {self.mig_profile} without mig_start")
            if self.gpu_milli is not None and not 1 <= self.gpu_milli <= 1000:
                raise WorkloadError(f"{what}: gpu_milli must be 1..1000, got {self.gpu_milli}")
        object.__setattr__(self, "domains", tuple(int(d) for d in self.domains))


@dataclass(frozen=True)
class InferencePlacement:
    """GPUs serving one area's inference from one site in one hour."""

    area: str
    hour: pd.Timestamp
    site: str
    gpu_type: str
    gpus: int
    energy_kwh: float
    emissions_kg: float


@dataclass(frozen=True)
class Unplaced:
    """A job the plan does not place, with the reason."""

    job_id: str
    reason: ReasonCode
    detail: str = ""


@dataclass
class Workload:
    """A day's work: batch/training jobs and inference demand."""

    jobs: list[Job]
    inference: list[InferenceDemand]


def jsonable(obj: Any) -> Any:
    """Convert dataclasses, timestamps and enums to JSON-ready values (UTC ISO 8601)."""
    if hasattr(obj, "__dataclass_fields__"):
        return {k: jsonable(v) for k, v in asdict(obj).items()}
    if isinstance(obj, pd.Timestamp):
        return obj.tz_convert("UTC").strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(obj, StrEnum):
        return str(obj)
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, float):
        return round(obj, 6)
    return obj
