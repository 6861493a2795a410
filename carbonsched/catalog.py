"""Site catalogs: TOML files that list a fleet's sites and the user areas they serve.

The schema, with the unit of every field, is ``regions/schema.md``. Shipped catalogs are package
data of :mod:`carbonsched.regions` and are read with :mod:`importlib.resources`; any other TOML
file can be given by path.

Every validation failure raises :class:`~carbonsched.errors.CatalogError` whose message names the
file, the site (id and position) and the field, and says how to fix it.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from importlib import resources
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from carbonsched.domain import (
    GPU_SHARING,
    MIG_PROFILES,
    PAYLOAD_FIELDS,
    Backend,
    GpuPool,
    PueModel,
    SignalQuality,
    Site,
    SiteRole,
    Tenant,
    mig_models,
)
from carbonsched.errors import CatalogError, UnknownSiteError
from carbonsched.flex import GridFlexError, agreement_from_mapping
from carbonsched.limits import (
    DEFAULT_SHARES_PER_GPU,
    IDENTIFIER_RULE,
    MAX_GPU_TYPE_CHARS,
    MAX_NAME_CHARS,
    SHARES_PER_GPU_CHOICES,
    identifier_problem,
)

SIGNAL_SOURCES = ("electricitymaps", "eia930", "modelled-china")
"""Values of ``signal_source`` (see ``docs/signals.md``)."""

BACKEND_KINDS = ("slurm", "kubernetes")

K8S_WORKLOADS = ("job", "kueue", "jobset", "volcano")
"""What a Kubernetes site runs a placement as (``[sites.backend] workload``): a ``batch/v1`` Job,
a Job or JobSet admitted by Kueue, a JobSet, a Volcano Job (docs/dispatch.md)."""

QUEUE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
"""A Kueue LocalQueue or Volcano Queue name: a DNS-1123 subdomain (Kubernetes object names), and
at most 63 characters since Kueue carries it as the label value ``kueue.x-k8s.io/queue-name``."""

ALIAS_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
"""What a site alias may be: a name such as a cloud region (``westus``, ``us-east-1``,
``europe-west4``): letters, digits, ``.``, ``_`` and ``-``, starting with a letter or digit."""


FIBRE_KM_PER_MS = 204.0
"""Speed of light in silica fibre, c / 1.468 (group index of ITU-T G.652 single-mode fibre at
1550 nm) ≈ 204 km/ms; the "1 ms of round trip per 100 km of fibre" rule of thumb. [km/ms]"""

ROUTE_FACTOR = 1.5
"""Fibre path length / great-circle distance (assumption; real routes follow roads, rails and
landing stations and are longer than the geodesic). [-]"""

FIXED_RTT_MS = 1.0
"""Fixed round-trip overhead for switching and the metro access network (assumption; the 2023
national target is 1 ms within a city, NDRC et al. 实施意见, hubs.md [S5]). [ms]"""

EARTH_RADIUS_KM = 6371.0088
"""Mean Earth radius (IUGG). [km]"""


@dataclass(frozen=True)
class UserArea:
    """A metropolitan area whose users send latency-critical inference requests.

    Attributes
    ----------
    id, name
        Identifier used in the sites' ``latency_ms`` tables, and a display name.
    latitude, longitude
        Area centre. [°]
    timezone
        IANA time zone; the diurnal demand shape is written in this local time.
    demand_weight
        Share of the fleet's inference demand from this area, relative to the other areas. [-]
    """

    id: str
    name: str
    latitude: float
    longitude: float
    timezone: str
    demand_weight: float = 1.0


@dataclass(frozen=True)
class Catalog:
    """A site catalog.

    Attributes
    ----------
    name, description
        Catalog name (the file stem) and what it describes.
    signal_quality
        ``measured`` when every site has real hourly history, ``modelled`` otherwise.
    areas
        User areas by id.
    sites
        Sites in file order.
    path
        The file read (``None`` for catalogs built in code).
    templates
        Job templates by name (``[templates.NAME]``): payload fields a job refers to with
        ``template: NAME`` (:data:`carbonsched.domain.PAYLOAD_FIELDS`; their values are
        checked by the job schema when a job uses them).
    """

    name: str
    description: str
    signal_quality: SignalQuality
    areas: dict[str, UserArea]
    sites: list[Site]
    path: str | None = field(default=None, compare=False)
    templates: dict[str, dict[str, Any]] = field(default_factory=dict, compare=False)
    tenants: dict[str, Tenant] = field(default_factory=dict, compare=False)
    """Tenants by name (``[tenants.NAME]``): weights and guaranteed quotas for fair sharing
    when capacity binds (:class:`carbonsched.domain.Tenant`)."""

    def find_site(self, name: str) -> Site:
        """The site named ``name``: its id, or one of its aliases, matched case-insensitively.

        An exact id wins; otherwise ids and aliases are compared with :meth:`str.casefold`
        (the Carbon Aware SDK matches location names case-insensitively). Aliases are unique
        across the catalog, case-insensitively (checked at load), so a match is unambiguous
        unless two site ids differ only in case.

        Raises
        ------
        UnknownSiteError
            No site has that id or alias, or the name matches two site ids that differ only in
            case; the message lists the known names.
        """
        for s in self.sites:
            if s.id == name:
                return s
        key = name.casefold()
        hits = [s for s in self.sites
                if s.id.casefold() == key or any(a.casefold() == key for a in s.aliases)]
        if len(hits) == 1:
            return hits[0]
        raise UnknownSiteError(name, self.names())

    def names(self) -> list[str]:
        """Every name a site answers to: the site ids, then the aliases, in file order."""
        return [s.id for s in self.sites] + [a for s in self.sites for a in s.aliases]

    def site(self, site_id: str) -> Site:
        """The site with id ``site_id``.

        Raises
        ------
        UnknownSiteError
            If the catalog has no such site; the message lists the known ids.
        """
        for s in self.sites:
            if s.id == site_id:
                return s
        raise UnknownSiteError(site_id, [s.id for s in self.sites])

    @property
    def site_ids(self) -> list[str]:
        """Site ids in file order."""
        return [s.id for s in self.sites]

    def gpu_types(self) -> list[str]:
        """Sorted GPU types present at any site."""
        return sorted({t for s in self.sites for t in s.gpus})

    def sites_with_role(self, role: SiteRole | str) -> list[Site]:
        """Sites of one role (``green-hub`` or ``edge``)."""
        return [s for s in self.sites if s.role == SiteRole(role)]


def great_circle_km(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """Great-circle distance between two points on a sphere (haversine formula). [km]

    Sinnott, R. W. (1984), "Virtues of the Haversine", Sky and Telescope 68(2):159, with the
    mean Earth radius 6371.0088 km.
    """
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dp, dl = p2 - p1, math.radians(lon2 - lon1)
    a = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * EARTH_RADIUS_KM * math.asin(min(1.0, math.sqrt(a)))


def fibre_rtt_ms(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """Assumed round-trip latency between two points. [ms]

    ``RTT = 2 × d_gc × ROUTE_FACTOR / FIBRE_KM_PER_MS + FIXED_RTT_MS``, with ``d_gc`` the
    great-circle distance [km]. This is the rule the shipped catalogs' latency tables were
    computed with (rounded to 0.1 ms); see ``regions/schema.md``.
    """
    d = great_circle_km(lat1, lon1, lat2, lon2)
    return 2.0 * d * ROUTE_FACTOR / FIBRE_KM_PER_MS + FIXED_RTT_MS


# --- schema -----------------------------------------------------------------------------------

_NUM = (int, float)

# field -> (python types, required, description used in "how to fix")
_SITE_FIELDS: dict[str, tuple[tuple[type, ...], bool, str]] = {
    "id": ((str,), True, "a unique string such as 'cn-nx-zhongwei'"),
    "name": ((str,), True, "a display name"),
    "role": ((str,), True, "'green-hub' or 'edge'"),
    "zone": ((str,), True, "the grid zone id, e.g. 'CA-ON' or 'CN-NX'"),
    "signal_source": ((str,), True, "one of " + ", ".join(SIGNAL_SOURCES)),
    "latitude": (_NUM, True, "degrees north, -90..90"),
    "longitude": (_NUM, True, "degrees east, -180..180"),
    "timezone": ((str,), True, "an IANA time zone such as 'Asia/Shanghai'"),
    "gpus": ((dict,), True, "a table [sites.gpus.<TYPE>] with count and board_power_w"),
    "it_power_cap_kw": (_NUM, True, "the IT power cap in kW, > 0"),
    "facility_power_cap_kw": (_NUM, False, "the grid-connection cap on facility power in kW, > 0"),
    "pue": ((dict,), True, "a table [sites.pue] with the fields of PueModel"),
    "latency_ms": ((dict,), True, "a table [sites.latency_ms] of <area> = round-trip ms"),
    "backend": ((dict,), True, "a table [sites.backend] with kind and its fields"),
    "green_surplus_max_kw": (_NUM, False, "kW of curtailable green power absorbable, >= 0"),
    "province": ((str,), False, "a province code such as 'CN-NX'"),
    "annual_emission_factor_g_per_kwh": (_NUM, False, "the official annual factor in g/kWh, > 0"),
    "emission_factor_source": ((str,), False, "the citation of the emission factor"),
    "weather_file": ((str,), False, "a path relative to the data dir"),
    "residency_group": ((str,), False, "a jurisdiction label such as 'eu' or 'cn-northwest'"),
    "notes": ((str,), False, "free text"),
    "aliases": ((list,), False, "a list of other names such as [\"westus\", \"us-west-1\"]"),
    "grid_agreement": ((dict,), False, "a table [sites.grid_agreement] with target_fraction "
                       "or target_kw, notice_hours, baseline_method, ... "
                       "(docs/grid-flexibility.md)"),
}
_META_FIELDS = ("emission_factor_source", "weather_file", "residency_group", "notes")

_AREA_FIELDS: dict[str, tuple[tuple[type, ...], bool, str]] = {
    "name": ((str,), True, "a display name"),
    "latitude": (_NUM, True, "degrees north, -90..90"),
    "longitude": (_NUM, True, "degrees east, -180..180"),
    "timezone": ((str,), True, "an IANA time zone"),
    "demand_weight": (_NUM, False, "a relative weight >= 0"),
}

_TOP_FIELDS = ("name", "description", "signal_quality", "areas", "sites", "templates",
               "tenants")


class _Ctx:
    """Builds error messages that name the file, the site and the field."""

    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, where: str, problem: str, fix: str) -> CatalogError:
        return CatalogError(f"{self.path}: {where}: {problem}; {fix} (see regions/schema.md)")


# numeric field -> (lowest, highest, unit): every number is checked to be finite and within
# these bounds at load (issue 7); the lower bounds of most fields are checked, with their own
# message, where the field is parsed (None here). The upper bounds are far above any real site
# (10 GW of IT, a million GPUs of one type, 10 kW per board) and keep sums and products finite.
_LIMITS: dict[str, tuple[float | None, float, str]] = {
    "latitude": (None, math.inf, "°"),     # range checked by _check_latlon
    "longitude": (None, math.inf, "°"),
    "demand_weight": (None, 1e6, "-"),
    "it_power_cap_kw": (None, 1e7, "kW"),
    "facility_power_cap_kw": (None, 1e7, "kW"),
    "green_surplus_max_kw": (None, 1e7, "kW"),
    "annual_emission_factor_g_per_kwh": (None, 3000.0, "g/kWh"),
    "count": (None, 1_000_000, "GPUs"),
    "board_power_w": (None, 10_000.0, "W"),
    "gpus_per_node": (None, 1024, "GPUs"),
    "nodes_per_domain": (None, 100_000, "nodes"),
    "weight": (None, 1e6, "-"),
    "quota_gpu_hours_per_day": (None, 24e6, "GPU·h/d"),
    "pue_min": (None, 5.0, "-"),
    "pue_max": (None, 5.0, "-"),
    "free_cooling_below_c": (-60.0, 60.0, "°C"),
    "mechanical_slope_per_c": (None, 1.0, "1/°C"),
    "humidity_slope": (None, 1.0, "1/%"),
    "humidity_ref_pct": (0.0, 100.0, "%"),
    "latency_ms": (None, 10_000.0, "ms"),
}


def _check_type(ctx: _Ctx, where: str, key: str, value: Any, types: tuple[type, ...],
                hint: str) -> None:
    ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
    if not ok:
        raise ctx.fail(where, f"field {key!r} has type {type(value).__name__} ({value!r})",
                       f"give {hint}")
    if isinstance(value, int | float) and not isinstance(value, bool):
        lo, hi, unit = _LIMITS.get(key.split(".")[0], (None, math.inf, "-"))
        if not math.isfinite(value):
            raise ctx.fail(where, f"field {key!r} is {value} [{unit}], not a finite number",
                           f"give {hint}")
        if value > hi or (lo is not None and value < lo):
            rng = (f"outside {lo:g}..{hi:g} {unit}" if lo is not None
                   else f"above the largest accepted {hi:g} {unit}")
            raise ctx.fail(where, f"field {key!r} = {value:g} [{unit}] is {rng}",
                           f"give {hint}")


_Spec = Mapping[str, tuple[tuple[type, ...], bool, str]]


def _check_fields(ctx: _Ctx, where: str, table: dict[str, Any], spec: _Spec) -> None:
    for key, (types, required, hint) in spec.items():
        if key not in table:
            if required:
                raise ctx.fail(where, f"missing field {key!r}", f"add {key} = {hint}")
            continue
        _check_type(ctx, where, key, table[key], types, hint)
    unknown = sorted(set(table) - set(spec))
    if unknown:
        raise ctx.fail(where, f"unknown field(s) {', '.join(map(repr, unknown))}",
                       f"remove or rename them; known fields: {', '.join(spec)}")


def _check_timezone(ctx: _Ctx, where: str, tz: str) -> None:
    try:
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ctx.fail(where, f"field 'timezone' {tz!r} is not an IANA time zone",
                       "give a name such as 'Asia/Shanghai' or 'Europe/Berlin'") from exc


def _check_latlon(ctx: _Ctx, where: str, lat: float, lon: float) -> None:
    if not -90.0 <= lat <= 90.0:
        raise ctx.fail(where, f"field 'latitude' {lat} is outside -90..90", "give degrees north")
    if not -180.0 <= lon <= 180.0:
        raise ctx.fail(where, f"field 'longitude' {lon} is outside -180..180",
                       "give degrees east")


def _parse_area(ctx: _Ctx, area_id: str, raw: Any) -> UserArea:
    where = f"area {area_id!r}"
    if len(area_id) > MAX_NAME_CHARS:
        raise ctx.fail(where, f"the area id is {len(area_id)} characters long",
                       f"give at most {MAX_NAME_CHARS} (the store's area column)")
    if not isinstance(raw, dict):
        raise ctx.fail(where, "is not a table", f"write it as [areas.{area_id}]")
    _check_fields(ctx, where, raw, _AREA_FIELDS)
    _check_latlon(ctx, where, raw["latitude"], raw["longitude"])
    _check_timezone(ctx, where, raw["timezone"])
    weight = float(raw.get("demand_weight", 1.0))
    if weight < 0:
        raise ctx.fail(where, f"field 'demand_weight' is negative ({weight})", "give a weight >= 0")
    return UserArea(id=area_id, name=raw["name"], latitude=float(raw["latitude"]),
                    longitude=float(raw["longitude"]), timezone=raw["timezone"],
                    demand_weight=weight)


def _parse_gpus(ctx: _Ctx, where: str, raw: dict[str, Any]) -> dict[str, GpuPool]:
    if not raw:
        raise ctx.fail(where, "field 'gpus' is empty",
                       "add at least one [sites.gpus.<TYPE>] table with count and board_power_w")
    pools = {}
    for gpu_type, pool in raw.items():
        w = f"{where}, field 'gpus.{gpu_type}'"
        if len(gpu_type) > MAX_GPU_TYPE_CHARS:
            raise ctx.fail(w, f"the GPU type name is {len(gpu_type)} characters long",
                           f"give at most {MAX_GPU_TYPE_CHARS} (the store's gpu_type column)")
        if not isinstance(pool, dict):
            raise ctx.fail(w, "is not a table", "give count and board_power_w")
        spec: _Spec = {"count": ((int,), True, "a whole number of GPUs >= 0"),
                "board_power_w": (_NUM, True, "the board power per GPU in W, > 0"),
                "gpus_per_node": ((int,), False, "the GPUs of this type on one node, >= 1 "
                                  "(8 on an HGX A100/H100 board)"),
                "nodes_per_domain": ((int,), False, "the nodes per network domain, >= 1"),
                "sharing": ((str,), False, "how one GPU is shared: \"milli\" (time-slicing "
                            "/ MPS shares) or \"mig\" (MIG partitions)"),
                "mig_model": ((str,), False, "the MIG table row, e.g. \"A100-40GB\""),
                "shares_per_gpu": ((int,), False, "the shares one GPU is cut into on the "
                                   "site's scheduler (Slurm shards per GPU, time-slicing "
                                   "replicas), a divisor of 1000")}
        _check_fields(ctx, w, pool, spec)
        if pool["count"] < 0:
            raise ctx.fail(w, f"count is negative ({pool['count']})", "give a count >= 0")
        if pool["board_power_w"] <= 0:
            raise ctx.fail(w, f"board_power_w must be > 0, got {pool['board_power_w']}",
                           "give the vendor's board power in W")
        _check_node_shape(ctx, w, pool)
        sharing, mig_model = _check_sharing(ctx, w, gpu_type, pool)
        pools[gpu_type] = GpuPool(count=pool["count"], board_power_w=float(pool["board_power_w"]),
                                  gpus_per_node=pool.get("gpus_per_node"),
                                  nodes_per_domain=pool.get("nodes_per_domain"),
                                  sharing=sharing, mig_model=mig_model,
                                  shares_per_gpu=_check_shares(ctx, w, pool, sharing))
    return pools


def _check_sharing(ctx: _Ctx, where: str, gpu_type: str, pool: dict[str, Any]
                   ) -> tuple[str | None, str | None]:
    """``sharing`` is one of :data:`GPU_SHARING`; ``mig`` needs a MIG table row of the type.

    ``mig_model`` defaults to the type's one MIG table row (``H100``); a type standing for
    several rows (``A100``: 40 or 80 GB) must name one.
    """
    sharing = pool.get("sharing")
    mig_model = pool.get("mig_model")
    if sharing is None:
        if mig_model is not None:
            raise ctx.fail(where, "mig_model is given without sharing = \"mig\"",
                           "add sharing = \"mig\" or remove mig_model")
        return None, None
    if sharing not in GPU_SHARING:
        raise ctx.fail(where, f"sharing {sharing!r} is not one of {', '.join(GPU_SHARING)}",
                       "give sharing = \"milli\" (time-slicing / MPS shares) or \"mig\" "
                       "(MIG partitions), or leave it out (whole GPUs only)")
    if sharing == "milli":
        if mig_model is not None:
            raise ctx.fail(where, "mig_model is given with sharing = \"milli\"",
                           "remove mig_model, or give sharing = \"mig\"")
        return sharing, None
    rows = list(mig_models(gpu_type))
    if not rows:
        raise ctx.fail(where, f"sharing = \"mig\" but GPU type {gpu_type!r} has no MIG "
                       f"(MIG GPUs: {', '.join(MIG_PROFILES)})",
                       "give sharing = \"milli\" for time-slicing, or leave sharing out")
    if mig_model is None:
        if len(rows) > 1:
            raise ctx.fail(where, f"GPU type {gpu_type!r} stands for several MIG models "
                           f"({', '.join(rows)})",
                           f"add mig_model = \"{rows[0]}\" (or the one the site has)")
        mig_model = rows[0]
    if mig_model not in rows:
        raise ctx.fail(where, f"mig_model {mig_model!r} is not a MIG model of GPU type "
                       f"{gpu_type!r}", f"give one of {', '.join(rows)}")
    return sharing, mig_model


def _check_shares(ctx: _Ctx, where: str, pool: dict[str, Any], sharing: str | None) -> int:
    """``shares_per_gpu``: only with ``sharing = "milli"``, a divisor of 1000."""
    shares = pool.get("shares_per_gpu")
    if shares is None:
        return DEFAULT_SHARES_PER_GPU
    if sharing != "milli":
        raise ctx.fail(where, "shares_per_gpu is given without sharing = \"milli\"",
                       "add sharing = \"milli\" or remove shares_per_gpu")
    if shares not in SHARES_PER_GPU_CHOICES:
        raise ctx.fail(where, f"shares_per_gpu must divide 1000, got {shares}",
                       "give the site's shards per GPU (Slurm's per-node shard Count over "
                       "the node's GPUs; time-slicing replicas), one of "
                       f"{', '.join(map(str, SHARES_PER_GPU_CHOICES))}; a cluster cut "
                       "otherwise needs its count changed to one of these first")
    return int(shares)


def _check_node_shape(ctx: _Ctx, where: str, pool: dict[str, Any]) -> None:
    """``gpus_per_node`` and ``nodes_per_domain`` are >= 1 and the count is whole nodes."""
    for key in ("gpus_per_node", "nodes_per_domain"):
        if key in pool and pool[key] < 1:
            raise ctx.fail(where, f"{key} must be >= 1, got {pool[key]}",
                           f"give {key} >= 1 or leave it out")
    per_node = pool.get("gpus_per_node")
    if per_node is None:
        if "nodes_per_domain" in pool:
            raise ctx.fail(where, "nodes_per_domain is given without gpus_per_node",
                           "add gpus_per_node (the GPUs on one node) or remove nodes_per_domain")
        return
    count = pool["count"]
    if count % per_node:
        near = sorted({count // per_node * per_node, -(-count // per_node) * per_node} - {0})
        raise ctx.fail(where, f"count {count} is not a whole number of nodes of "
                       f"gpus_per_node = {per_node} GPUs",
                       f"give a count that is a multiple of {per_node} (such as "
                       f"{' or '.join(map(str, near))}), or the node shape the site really has")


def _parse_pue(ctx: _Ctx, where: str, raw: dict[str, Any]) -> PueModel:
    spec: _Spec = {f.name: (_NUM, False, f"a number in {_LIMITS[f.name][2]}")
                   for f in fields(PueModel)}
    _check_fields(ctx, f"{where}, field 'pue'", raw, spec)
    pue = PueModel(**{k: float(v) for k, v in raw.items()})
    w = f"{where}, field 'pue'"
    if pue.pue_min < 1.0:
        raise ctx.fail(w, f"pue_min {pue.pue_min} is below 1", "PUE is facility/IT power >= 1")
    if pue.pue_max < pue.pue_min:
        raise ctx.fail(w, f"pue_max {pue.pue_max} is below pue_min {pue.pue_min}",
                       "give pue_max >= pue_min")
    if pue.mechanical_slope_per_c < 0 or pue.humidity_slope < 0:
        raise ctx.fail(w, "a slope is negative", "give slopes >= 0")
    return pue


def _parse_backend(ctx: _Ctx, where: str, raw: dict[str, Any]) -> Backend:
    w = f"{where}, field 'backend'"
    kind = raw.get("kind")
    if kind not in BACKEND_KINDS:
        raise ctx.fail(w, f"unknown backend kind {kind!r}",
                       f"give kind = one of {', '.join(map(repr, BACKEND_KINDS))}")
    spec: _Spec
    if kind == "slurm":
        spec = {"kind": ((str,), True, "'slurm'"),
                "cluster": ((str,), True, "the Slurm cluster name (sacctmgr show cluster)"),
                "partition": ((str,), False, "a Slurm partition name")}
    else:
        spec = {"kind": ((str,), True, "'kubernetes'"),
                "context": ((str,), True, "the kubeconfig context name"),
                "namespace": ((str,), True, "the Kubernetes namespace for the jobs"),
                "workload": ((str,), False, "one of " + ", ".join(map(repr, K8S_WORKLOADS))),
                "queue": ((str,), False, "the Kueue LocalQueue or Volcano Queue name")}
    _check_fields(ctx, w, raw, spec)
    if kind == "kubernetes":
        _check_k8s_workload(ctx, w, raw)
    return Backend(**raw)


def _check_k8s_workload(ctx: _Ctx, where: str, raw: dict[str, Any]) -> None:
    workload = raw.get("workload", "job")
    if workload not in K8S_WORKLOADS:
        raise ctx.fail(where, f"unknown workload {workload!r}",
                       f"give workload = one of {', '.join(map(repr, K8S_WORKLOADS))}")
    queue = raw.get("queue")
    if workload == "kueue" and queue is None:
        raise ctx.fail(where, "workload 'kueue' needs field 'queue'",
                       "add queue = the name of the Kueue LocalQueue in the namespace "
                       "(kubectl get localqueues -n <namespace>)")
    if queue is not None and workload not in ("kueue", "volcano"):
        raise ctx.fail(where, f"field 'queue' applies to workload 'kueue' or 'volcano', not "
                       f"{workload!r}", "remove queue, or set workload = 'kueue' or 'volcano'")
    if queue is not None and (len(queue) > 63 or not QUEUE_NAME.match(queue)):
        raise ctx.fail(where, f"field 'queue' {queue!r} is not a queue name ({len(queue)} "
                       "characters)", "give at most 63 lowercase letters, digits, '-' and '.', "
                       "starting and ending with a letter or digit")


def _nonneg(ctx: _Ctx, where: str, key: str, value: float, strict: bool = False) -> None:
    if value < 0 or (strict and value == 0):
        op = "> 0" if strict else ">= 0"
        raise ctx.fail(where, f"field {key!r} must be {op}, got {value}",
                       f"give a non-negative {key}" if not strict else f"give {key} {op}")


def _parse_aliases(ctx: _Ctx, where: str, raw: list[Any]) -> tuple[str, ...]:
    out: list[str] = []
    for k, alias in enumerate(raw):
        w = f"{where}, field 'aliases[{k}]'"
        if not isinstance(alias, str):
            raise ctx.fail(w, f"is a {type(alias).__name__} ({alias!r})",
                           "give each alias as a string such as \"westus\"")
        if len(alias) > MAX_NAME_CHARS:
            raise ctx.fail(w, f"alias {alias[:20]!r}... is {len(alias)} characters long",
                           f"give at most {MAX_NAME_CHARS}")
        if not ALIAS_PATTERN.fullmatch(alias):
            raise ctx.fail(w, f"alias {alias!r} is not a name",
                           "use letters, digits, '.', '_' and '-', starting with a letter or "
                           "digit (a cloud region name such as 'westus' or 'us-east-1')")
        out.append(alias)
    return tuple(out)


def _check_alias_names(ctx: _Ctx, sites: list[Site]) -> None:
    """Aliases are unique across the catalog and differ from every site id (case-insensitively)."""
    owner: dict[str, str] = {}  # casefolded name -> "site id" or "alias of site"
    for s in sites:
        owner.setdefault(s.id.casefold(), f"the id of site {s.id!r}")
    for i, s in enumerate(sites):
        for a in s.aliases:
            key = a.casefold()
            if key in owner:
                raise ctx.fail(f"site {s.id!r} (sites[{i}]), field 'aliases'",
                               f"alias {a!r} is already {owner[key]} (names are compared "
                               "case-insensitively)",
                               "give every alias once in the catalog, different from every "
                               "site id")
            owner[key] = f"an alias of site {s.id!r}"


def _parse_site(ctx: _Ctx, i: int, raw: Any, areas: dict[str, UserArea]) -> Site:
    if not isinstance(raw, dict):
        raise ctx.fail(f"sites[{i}]", "is not a table", "write each site as [[sites]]")
    sid = raw.get("id")
    where = f"site {sid!r} (sites[{i}])" if isinstance(sid, str) else f"sites[{i}]"
    _check_fields(ctx, where, raw, _SITE_FIELDS)
    bad = identifier_problem(sid, "site id")
    if bad is not None:  # the one identifier grammar (carbonsched.limits), its own message
        raise ctx.fail(where, f"field 'id': {bad.removesuffix('; ' + IDENTIFIER_RULE)}",
                       IDENTIFIER_RULE)
    try:
        role = SiteRole(raw["role"])
    except ValueError as exc:
        raise ctx.fail(where, f"unknown role {raw['role']!r}",
                       "give role = 'green-hub' or 'edge'") from exc
    if raw["signal_source"] not in SIGNAL_SOURCES:
        raise ctx.fail(where, f"unknown signal_source {raw['signal_source']!r}",
                       f"give one of {', '.join(map(repr, SIGNAL_SOURCES))}")
    _check_latlon(ctx, where, raw["latitude"], raw["longitude"])
    _check_timezone(ctx, where, raw["timezone"])
    gpus = _parse_gpus(ctx, where, raw["gpus"])
    _nonneg(ctx, where, "it_power_cap_kw", raw["it_power_cap_kw"], strict=True)
    _nonneg(ctx, where, "green_surplus_max_kw", raw.get("green_surplus_max_kw", 0.0))
    fac = raw.get("facility_power_cap_kw")
    if fac is not None:
        _nonneg(ctx, where, "facility_power_cap_kw", fac, strict=True)
    ef = raw.get("annual_emission_factor_g_per_kwh")
    if ef is not None:
        _nonneg(ctx, where, "annual_emission_factor_g_per_kwh", ef, strict=True)
    if raw["signal_source"] == "modelled-china" and "province" not in raw:
        raise ctx.fail(where, "signal_source 'modelled-china' needs field 'province'",
                       "add province = a code such as 'CN-NX' (see data/china_grid_model.toml)")
    latency = raw["latency_ms"]
    if role == SiteRole.EDGE and not latency:
        raise ctx.fail(where, "an edge site has no latency table",
                       "add [sites.latency_ms] with the round-trip ms to the areas it serves")
    lat_ms: dict[str, float] = {}
    for area, ms in latency.items():
        if area not in areas:
            raise ctx.fail(where, f"field 'latency_ms' names unknown area {area!r}",
                           f"define [areas.{area}] or use one of {', '.join(sorted(areas))}")
        _check_type(ctx, where, f"latency_ms.{area}", ms, _NUM, "round-trip ms")
        if ms < 0:
            raise ctx.fail(where, f"field 'latency_ms.{area}' is negative ({ms})",
                           "give the round-trip latency in ms, >= 0")
        lat_ms[area] = float(ms)
    return Site(
        id=str(sid), name=raw["name"], role=role, zone=raw["zone"],
        signal_source=raw["signal_source"], latitude=float(raw["latitude"]),
        longitude=float(raw["longitude"]), timezone=raw["timezone"], gpus=gpus,
        it_power_cap_kw=float(raw["it_power_cap_kw"]),
        facility_power_cap_kw=None if fac is None else float(fac),
        pue=_parse_pue(ctx, where, raw["pue"]),
        latency_ms=lat_ms, backend=_parse_backend(ctx, where, raw["backend"]),
        green_surplus_max_kw=float(raw.get("green_surplus_max_kw", 0.0)),
        province=raw.get("province"),
        annual_emission_factor_g_per_kwh=None if ef is None else float(ef),
        meta={k: raw[k] for k in _META_FIELDS if k in raw}
        | _parse_agreement(ctx, where, str(sid), raw.get("grid_agreement")),
        aliases=_parse_aliases(ctx, where, raw.get("aliases", [])),
    )


def _parse_agreement(ctx: Any, where: str, sid: str, raw: Any) -> dict[str, Any]:
    """``{"grid_agreement": GridAgreement}`` from ``[sites.grid_agreement]``, or ``{}``."""
    if raw is None:
        return {}
    try:
        return {"grid_agreement": agreement_from_mapping(sid, raw)}
    except GridFlexError as exc:
        raise ctx.fail(where, f"[sites.grid_agreement]: {exc}",
                       "see the example agreement in docs/grid-flexibility.md") from None


def parse_catalog(data: dict[str, Any], path: str, name: str) -> Catalog:
    """Validate a parsed catalog (the TOML document as a dict) and build a :class:`Catalog`.

    Parameters
    ----------
    data
        The TOML document.
    path
        File name used in error messages.
    name
        Catalog name (the file stem).

    Raises
    ------
    CatalogError
        On any schema violation; the message names the file, the site and the field.
    """
    ctx = _Ctx(path)
    unknown = sorted(set(data) - set(_TOP_FIELDS))
    if unknown:
        raise ctx.fail("top level", f"unknown key(s) {', '.join(map(repr, unknown))}",
                       f"known keys: {', '.join(_TOP_FIELDS)}")
    hints = {"description": "add description = \"...\"",
             "signal_quality": "add signal_quality = \"measured\" or \"modelled\"",
             "areas": "add at least one [areas.<id>] table",
             "sites": "add at least one [[sites]] table"}
    for key, hint in hints.items():
        if key not in data:
            raise ctx.fail("top level", f"missing key {key!r}", hint)
    try:
        quality = SignalQuality(data["signal_quality"])
    except ValueError as exc:
        raise ctx.fail("top level", f"unknown signal_quality {data['signal_quality']!r}",
                       "give 'measured' or 'modelled'") from exc
    if not isinstance(data["areas"], dict) or not data["areas"]:
        raise ctx.fail("top level", "no user areas", "add at least one [areas.<id>] table")
    areas = {aid: _parse_area(ctx, aid, raw) for aid, raw in data["areas"].items()}
    if not isinstance(data["sites"], list) or not data["sites"]:
        raise ctx.fail("top level", "no sites", "add at least one [[sites]] table")
    sites: list[Site] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(data["sites"]):
        site = _parse_site(ctx, i, raw, areas)
        if site.id in seen:
            raise ctx.fail(f"site {site.id!r} (sites[{i}])",
                           f"duplicate site id (also sites[{seen[site.id]}])",
                           "give every site a unique id")
        seen[site.id] = i
        sites.append(site)
    _check_alias_names(ctx, sites)
    measured_only = all(s.signal_source != "modelled-china" for s in sites)
    if quality == SignalQuality.MEASURED and not measured_only:
        raise ctx.fail("top level", "signal_quality is 'measured' but a site uses "
                       "signal_source 'modelled-china'", "set signal_quality = 'modelled'")
    templates = _parse_templates(ctx, data.get("templates", {}))
    tenants = _parse_tenants(ctx, data.get("tenants", {}), sites)
    return Catalog(name=data.get("name", name), description=data["description"],
                   signal_quality=quality, areas=areas, sites=sites, path=path,
                   templates=templates, tenants=tenants)


def _named_tables(ctx: _Ctx, raw: Any, section: str,
                  noun: str) -> list[tuple[str, str, dict[str, Any]]]:
    """The ``[<section>.NAME]`` tables of a catalog section as ``(name, where, table)``.

    Raises
    ------
    CatalogError
        (via ``ctx.fail``) when the section is not a table, a name breaks the identifier
        grammar or an entry is not a table; each message says where and how to fix it.
    """
    if not isinstance(raw, dict):
        raise ctx.fail("top level", f"{section} is not a table",
                       f"write [{section}.<name>] tables")
    out = []
    for tname, table in raw.items():
        where = f"{noun} {tname!r}"
        msg = identifier_problem(tname, noun if noun == "tenant" else f"{noun} name")
        if msg is not None:
            raise ctx.fail(where, msg, "rename the table")
        if not isinstance(table, dict):
            raise ctx.fail(where, "is not a table", f"write [{section}.{tname}] with fields")
        out.append((tname, where, table))
    return out


def _parse_tenants(ctx: _Ctx, raw: Any, sites: list[Site]) -> dict[str, Tenant]:
    """``[tenants.NAME]`` tables: ``weight`` > 0 and ``quota_gpu_hours_per_day`` by GPU type.

    A type's quotas together may not exceed what the catalog's GPUs of that type give in a
    day (count × 24 GPU-hours): a guarantee the sites cannot keep is refused.
    """
    types = {g: 24.0 * sum(s.gpu_count(g) for s in sites) for s in sites for g in s.gpus}
    out: dict[str, Tenant] = {}
    for tname, where, table in _named_tables(ctx, raw, "tenants", "tenant"):
        _check_fields(ctx, where, table, {
            "weight": ((int, float), False, "the tenant's weight in fair sharing, > 0"),
            "quota_gpu_hours_per_day": ((dict,), False, "a table of GPU type = GPU-hours "
                                        "per day")})
        weight = float(table.get("weight", 1.0))
        if weight <= 0:
            raise ctx.fail(where, f"weight must be > 0, got {weight:g}",
                           "give a positive weight (1 = an equal share)")
        quota: dict[str, float] = {}
        for g, v in table.get("quota_gpu_hours_per_day", {}).items():
            key = f"quota_gpu_hours_per_day.{g}"
            _check_type(ctx, where, key, v, (int, float), "GPU-hours per day, >= 0")
            if g not in types:
                raise ctx.fail(where, f"quota for GPU type {g!r}, which no site has",
                               f"use one of {', '.join(sorted(types))}")
            if v < 0:
                raise ctx.fail(where, f"field {key!r} = {v:g} [GPU·h/d] is negative",
                               "give GPU-hours per day >= 0")
            quota[g] = float(v)
        out[tname] = Tenant(name=tname, weight=weight, quota_gpu_hours_per_day=quota)
    for g, day in types.items():
        total = sum(t.quota_gpu_hours_per_day.get(g, 0.0) for t in out.values())
        if total > day + 1e-9:
            raise ctx.fail("tenants", f"quotas of {g} add up to {total:g} GPU-hours per day, "
                           f"above the {day:g} the catalog's {g} GPUs give (count x 24)",
                           "lower the quotas: a guarantee must fit the GPUs")
    return out


def _parse_templates(ctx: _Ctx, raw: Any) -> dict[str, dict[str, Any]]:
    """``[templates.NAME]`` tables: names under the identifier grammar, payload fields only."""
    out: dict[str, dict[str, Any]] = {}
    for tname, where, table in _named_tables(ctx, raw, "templates", "template"):
        unknown = sorted(set(table) - set(PAYLOAD_FIELDS) - {"template"})
        if "template" in table or unknown:
            bad = ", ".join(map(repr, unknown or ["template"]))
            raise ctx.fail(where, f"unknown field(s) {bad}",
                           f"a template sets payload fields only: "
                           f"{', '.join(f for f in PAYLOAD_FIELDS if f != 'template')}")
        out[tname] = dict(table)
    return out


PROVIDERS_PREFIX = "providers-"
"""File-name prefix of the providers files shipped beside the catalogs."""


def list_catalogs() -> list[str]:
    """Names of the catalogs shipped in :mod:`carbonsched.regions` (sorted).

    ``providers-<catalog>.toml`` files beside them are providers files (which API feeds which
    signal of a catalog's sites, ``regions/schema.md``), not catalogs, and are not listed.
    """
    root = resources.files("carbonsched.regions")
    return sorted(p.name.removesuffix(".toml") for p in root.iterdir()
                  if p.name.endswith(".toml") and not p.name.startswith(PROVIDERS_PREFIX))


def load_catalog(name_or_path: str | Path) -> Catalog:
    """Load and validate a site catalog.

    Parameters
    ----------
    name_or_path
        A shipped catalog name (see :func:`list_catalogs`, e.g. ``"china-eastdata-westcompute"``)
        or the path of a TOML file.

    Returns
    -------
    Catalog

    Raises
    ------
    CatalogError
        Unknown name, unreadable file, TOML syntax error, or any schema violation.
    """
    text_path = str(name_or_path)
    p = Path(text_path)
    if p.suffix == ".toml" or p.exists() or "/" in text_path:
        if not p.is_file():
            raise CatalogError(f"{p}: catalog file not found; give an existing TOML file or one "
                               f"of the shipped catalogs: {', '.join(list_catalogs())}")
        raw_bytes = p.read_bytes()
        where, stem = str(p), p.stem
    else:
        res = resources.files("carbonsched.regions").joinpath(f"{text_path}.toml")
        if not res.is_file():
            raise CatalogError(f"unknown catalog {text_path!r}; shipped catalogs: "
                               f"{', '.join(list_catalogs())}, or give a path to a TOML file")
        raw_bytes = res.read_bytes()
        where, stem = f"carbonsched/regions/{text_path}.toml", text_path
    try:
        data = tomllib.loads(raw_bytes.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise CatalogError(f"{where}: not valid TOML ({exc}); fix the syntax") from exc
    return parse_catalog(data, where, stem)
