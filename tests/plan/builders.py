"""Fluent builders for planner tests (after Kueue's ``pkg/util/testing`` wrappers).

``SiteWrapper("a").gpus("H100", 8).cap_kw(10).latency("eu", 5).obj()`` builds a Site;
``JobWrapper("j1").gpus(2).hours(3).window(0, 6).obj()`` a Job with slots counted from T0;
``signals(sites, hours, ci={...}, pue={...}, surplus={...})`` the (site, slot) frame.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from carbonsched.domain import (
    Backend,
    GpuPool,
    InferenceDemand,
    Job,
    JobPayload,
    PueModel,
    Site,
    SiteRole,
)
from carbonsched.plan import PlanningProblem

T0 = pd.Timestamp("2023-07-15T00:00:00Z")
H = pd.Timedelta(hours=1)


def at(hour: int) -> pd.Timestamp:
    return T0 + hour * H


class SiteWrapper:
    def __init__(self, site_id: str) -> None:
        self._id = site_id
        self._gpus: dict[str, GpuPool] = {}
        self._cap = 1e9
        self._facility_cap: float | None = None
        self._lat: dict[str, float] = {}
        self._role = SiteRole.GREEN_HUB

    def gpus(self, gpu_type: str, count: int, board_power_w: float = 700.0,
             per_node: int | None = None, per_domain: int | None = None,
             sharing: str | None = None, mig_model: str | None = None,
             shares_per_gpu: int = 10) -> SiteWrapper:
        self._gpus[gpu_type] = GpuPool(count=count, board_power_w=board_power_w,
                                       gpus_per_node=per_node, nodes_per_domain=per_domain,
                                       sharing=sharing, mig_model=mig_model,
                                       shares_per_gpu=shares_per_gpu)
        return self

    def cap_kw(self, cap: float) -> SiteWrapper:
        self._cap = cap
        return self

    def facility_cap_kw(self, cap: float) -> SiteWrapper:
        self._facility_cap = cap
        return self

    def latency(self, area: str, ms: float) -> SiteWrapper:
        self._lat[area] = ms
        return self

    def edge(self) -> SiteWrapper:
        self._role = SiteRole.EDGE
        return self

    def obj(self) -> Site:
        return Site(id=self._id, name=self._id, role=self._role, zone="ZZ", signal_source="test",
                    latitude=0.0, longitude=0.0, timezone="UTC", gpus=dict(self._gpus),
                    it_power_cap_kw=self._cap, facility_power_cap_kw=self._facility_cap,
                    pue=PueModel(), latency_ms=dict(self._lat),
                    backend=Backend(kind="slurm", cluster=self._id))


class JobWrapper:
    def __init__(self, job_id: str) -> None:
        self._id = job_id
        self._type = "H100"
        self._gpus = 1
        self._hours = 1
        self._kw = 1.0
        self._es = 0
        self._dl = 24
        self._allowed: tuple[str, ...] = ()
        self._payload: JobPayload | None = None
        self._tenant = "t"
        self._domains: int | None = None

    def milli(self, gpu_milli: int) -> JobWrapper:
        """Part of one GPU in thousandths (``gpu_milli``)."""
        self._payload = JobPayload(gpu_milli=gpu_milli)
        return self

    def mig(self, profile: str) -> JobWrapper:
        """A MIG slice (``mig_profile``)."""
        self._payload = JobPayload(mig_profile=profile)
        return self

    def tenant(self, name: str) -> JobWrapper:
        self._tenant = name
        return self

    def max_domains(self, n: int | None) -> JobWrapper:
        self._domains = n
        return self

    def gpu_type(self, t: str) -> JobWrapper:
        self._type = t
        return self

    def gpus(self, n: int) -> JobWrapper:
        self._gpus = n
        return self

    def hours(self, h: int) -> JobWrapper:
        self._hours = h
        return self

    def kw_per_gpu(self, kw: float) -> JobWrapper:
        self._kw = kw
        return self

    def window(self, earliest: int, deadline: int) -> JobWrapper:
        self._es, self._dl = earliest, deadline
        return self

    def sites(self, *site_ids: str) -> JobWrapper:
        self._allowed = tuple(site_ids)
        return self

    def obj(self) -> Job:
        return Job(id=self._id, tenant=self._tenant, gpu_type=self._type, gpus=self._gpus,
                   duration_hours=self._hours, power_per_gpu_kw=self._kw,
                   earliest_start=at(self._es), deadline=at(self._dl),
                   allowed_sites=self._allowed, payload=self._payload,
                   max_domains=self._domains)


def demand(area: str, hour: int, gpus: int, slo_ms: float = 50.0, gpu_type: str = "H100",
           kw: float = 1.0) -> InferenceDemand:
    return InferenceDemand(area=area, hour=at(hour), gpu_type=gpu_type, gpus=gpus,
                           slo_ms=slo_ms, power_per_gpu_kw=kw)


def signals(sites: Sequence[Site], hours: int, ci: dict[str, Sequence[float]] | None = None,
            pue: dict[str, Sequence[float] | float] | None = None,
            surplus: dict[str, Sequence[float]] | None = None,
            default_ci: float = 100.0,
            pue_hi: dict[str, Sequence[float]] | None = None) -> pd.DataFrame:
    slots = pd.date_range(T0, periods=hours, freq="h", name="slot")
    rows = []
    for s in sites:
        c = np.asarray((ci or {}).get(s.id, [default_ci] * hours), dtype=float)
        p = (pue or {}).get(s.id, 1.0)
        p = np.full(hours, float(p)) if np.isscalar(p) else np.asarray(p, dtype=float)
        g = np.asarray((surplus or {}).get(s.id, [0.0] * hours), dtype=float)
        frame = pd.DataFrame({"site": s.id, "slot": slots, "carbon_intensity_g_per_kwh": c,
                              "pue": p, "green_surplus_kw": g})
        if pue_hi is not None:
            frame["pue_hi_95"] = np.asarray(pue_hi.get(s.id, p), dtype=float)
        rows.append(frame)
    return pd.concat(rows).set_index(["site", "slot"])


def problem(sites: Sequence[Site], jobs: Sequence[Job], hours: int,
            inference: Sequence[InferenceDemand] = (), **sig) -> PlanningProblem:
    return PlanningProblem(sites=list(sites), jobs=list(jobs), inference=list(inference),
                           slots=pd.date_range(T0, periods=hours, freq="h", name="slot"),
                           signals=signals(sites, hours, **sig))


def minutes_job(job_id: str, minutes: int, earliest: pd.Timestamp, deadline: pd.Timestamp,
                gpus: int = 1, kw: float = 1.0, **extra) -> Job:
    """An H100 job of ``minutes`` (``Job.duration_minutes``) on ``gpus`` GPUs of ``kw`` each."""
    return Job(id=job_id, tenant="t", gpu_type="H100", gpus=gpus, duration_minutes=minutes,
               power_per_gpu_kw=kw, earliest_start=earliest, deadline=deadline, **extra)

