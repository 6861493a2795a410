"""The explicit registry of dispatch adapters, keyed by backend kind.

Adapters are listed in :data:`ADAPTERS` (never registered by import side effects).
:class:`AdapterRegistry` refuses, when it is built, a kind listed twice and an adapter class that
lacks a required method (:data:`~carbonsched.adapters.dispatch.base.REQUIRED_METHODS`);
:meth:`AdapterRegistry.build_for_sites` refuses a site whose backend kind is not registered —
all at start-up, before anything is dispatched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from carbonsched.adapters.dispatch.base import REQUIRED_METHODS, DispatchAdapter
from carbonsched.adapters.dispatch.kubernetes import KubernetesAdapter
from carbonsched.adapters.dispatch.slurm import SlurmAdapter
from carbonsched.domain import Site
from carbonsched.errors import AdapterContractError, InputError


@dataclass(frozen=True)
class BackendConfig:
    """How this host reaches the backends (from the settings; see the README's Dispatch section).

    Attributes
    ----------
    slurm_conf_dir
        Folder with ``<cluster>/slurm.conf`` per cluster (``SLURM_CONF`` per cluster, no
        slurmdbd needed); None uses the host's configuration.
    slurm_use_clusters
        Pass ``--clusters=<cluster>`` (a slurmdbd knows every cluster).
    slurm_accounting
        ``jobcomp``, ``slurmdbd`` or ``none`` (see :class:`SlurmAdapter`).
    slurm_timezone
        IANA zone sbatch's wall times are written in; None is the host's zone.
    slurm_account
        ``--account`` for every submission; None leaves the user's default account.
    kubeconfig
        The kubeconfig with one context per Kubernetes site; None is ``$KUBECONFIG``.
    k8s_image
        Image of a container whose job names no image (and of the placeholder).
    k8s_gpu_share_resource
        Shared-GPU resource name on Kubernetes (``gpu_milli`` jobs; how many shares one GPU
        has is the catalog pool's ``shares_per_gpu``, carried by each request).
    k8s_topology_label
        Node label of the network-domain level for Kueue topology-aware scheduling.
    timeout_s
        Timeout of one backend call (an sbatch, squeue or sacct run; one API request). [s]
    extra
        Anything a custom adapter's factory needs.
    """

    slurm_conf_dir: Path | None = None
    slurm_use_clusters: bool = False
    slurm_accounting: str = "jobcomp"
    slurm_timezone: str | None = None
    slurm_account: str | None = None
    kubeconfig: Path | None = None
    k8s_image: str = "busybox:1.36"
    k8s_gpu_share_resource: str = "nvidia.com/gpu.shared"
    k8s_topology_label: str = "cloud.provider.com/topology-block"
    timeout_s: float = 30.0
    extra: dict[str, Any] = field(default_factory=dict)


Factory = Callable[[Site, BackendConfig], DispatchAdapter]


def _slurm(site: Site, cfg: BackendConfig) -> DispatchAdapter:
    cluster = site.backend.cluster or ""
    conf = None
    if cfg.slurm_conf_dir is not None:
        conf = cfg.slurm_conf_dir / cluster / "slurm.conf"
        if not conf.exists():
            raise InputError(f"site {site.id}: no slurm.conf for cluster {cluster!r} at {conf}; "
                             "set CARBONSCHED_SLURM_CONF_DIR to the folder holding "
                             "<cluster>/slurm.conf, or unset it to use --clusters")
    tz = None
    if cfg.slurm_timezone:
        try:
            tz = ZoneInfo(cfg.slurm_timezone)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise InputError(f"CARBONSCHED_SLURM_TIMEZONE {cfg.slurm_timezone!r} is not an IANA "
                             "zone (e.g. America/Toronto)") from exc
    return SlurmAdapter(cluster, partition=site.backend.partition, conf=conf,
                        use_clusters_flag=cfg.slurm_use_clusters, timezone=tz,
                        accounting=cfg.slurm_accounting, account=cfg.slurm_account,
                        timeout_s=cfg.timeout_s)


def _kubernetes(site: Site, cfg: BackendConfig) -> DispatchAdapter:
    return KubernetesAdapter(site.backend.context or "", site.backend.namespace or "default",
                             kubeconfig=cfg.kubeconfig, image=cfg.k8s_image,
                             gpu_share_resource=cfg.k8s_gpu_share_resource,
                             timeout_s=cfg.timeout_s, workload=site.backend.workload,
                             queue=site.backend.queue,
                             topology_label=cfg.k8s_topology_label)


@dataclass(frozen=True)
class AdapterSpec:
    """One registered backend kind: its adapter class (checked) and the factory from a site."""

    kind: str
    cls: type
    factory: Factory


ADAPTERS: tuple[AdapterSpec, ...] = (
    AdapterSpec("slurm", SlurmAdapter, _slurm),
    AdapterSpec("kubernetes", KubernetesAdapter, _kubernetes),
)
"""Every dispatch adapter, by backend kind (``[sites.backend] kind``)."""


class AdapterRegistry:
    """Backend kind -> adapter spec, checked when built.

    Raises
    ------
    AdapterContractError
        A kind listed twice, or a class missing a required method.
    """

    def __init__(self, specs: Iterable[AdapterSpec] = ADAPTERS) -> None:
        self._specs: dict[str, AdapterSpec] = {}
        for spec in specs:
            if spec.kind in self._specs:
                raise AdapterContractError(f"dispatch adapter kind {spec.kind!r} is registered "
                                           "twice; each backend kind has one adapter")
            missing = [m for m in REQUIRED_METHODS if not callable(getattr(spec.cls, m, None))]
            if missing:
                raise AdapterContractError(
                    f"dispatch adapter {spec.cls.__name__} for {spec.kind!r} lacks required "
                    f"method(s) {', '.join(missing)} (the contract: "
                    f"{', '.join(REQUIRED_METHODS)})")
            self._specs[spec.kind] = spec

    @property
    def kinds(self) -> tuple[str, ...]:
        """The registered backend kinds."""
        return tuple(self._specs)

    def spec(self, kind: str) -> AdapterSpec:
        """The spec of ``kind``.

        Raises
        ------
        AdapterContractError
            ``kind`` is not registered (the message lists those that are).
        """
        if kind not in self._specs:
            raise AdapterContractError(f"no dispatch adapter for backend kind {kind!r}; "
                                       f"registered: {', '.join(self.kinds)}")
        return self._specs[kind]

    def build_for_sites(self, sites: Iterable[Site],
                        config: BackendConfig) -> dict[str, DispatchAdapter]:
        """One adapter per site (sites sharing a backend share its adapter), built now.

        Raises
        ------
        AdapterContractError
            A site's backend kind is not registered.
        InputError
            A site's backend configuration is unusable on this host.
        """
        by_name: dict[str, DispatchAdapter] = {}
        out: dict[str, DispatchAdapter] = {}
        for site in sites:
            try:
                adapter = self.spec(site.backend.kind).factory(site, config)
            except AdapterContractError as exc:
                raise AdapterContractError(f"site {site.id}: {exc}") from exc
            out[site.id] = by_name.setdefault(adapter.name, adapter)
        return out


def default_registry() -> AdapterRegistry:
    """The registry of :data:`ADAPTERS`."""
    return AdapterRegistry(ADAPTERS)
