"""Benchmark instances built from the real traces and real 2023 grid carbon intensity.

Every number that is not read from a file is a stated benchmark assumption (below), not a
cited fact; the files are read by path from ``$CARBONSCHED_SHARED_DATA`` and never copied.

Sources
-------
* Job arrivals (hour of day) and run lengths: GAIA PAI trace, ``job-traces/gaia_pai-100k.csv``
  (``arrival_time``, ``length`` in hours).
* Gang sizes: Alibaba GPU cluster trace v2023 (OpenB pods), ``num_gpu`` of pods with ≥ 1 GPU.
* GPU types and their fleet shares: Alibaba v2023 OpenB GPU node list (``model``, ``gpu``).
* Hourly carbon intensity (direct): Electricity Maps exports of 16 zones, 2023,
  ``sustain-cluster/carbon_intensity/<ZONE>_2023_hourly.csv``; green-surplus proxy from the
  same files' renewable percentage.

Assumptions (benchmark only)
----------------------------
* Window slack after the run: uniform 2..24 h (GAIA has no deadlines), clipped to the horizon.
* IT power per GPU including host share: 0.4 kW for every type.
* GPU capacity per type = that type's GPU-hours of work / (load × hours), spread with ±30 %
  jitter over as many (randomly chosen) sites as can each hold the type's largest gang; IT
  power cap = 85 % of the site's GPUs at full power, so both capacity and power can bind.
* PUE per site: constant 1.10..1.45 by a fixed per-site draw.
* Green surplus [kW] = 10 % of the power cap × max(0, renewable % − 60) / 40.
* Inference: one user area per site zone, 5 % of the fleet's batch GPUs per hour at peak
  with a diurnal profile, on the most common GPU type (present at every site, with each area's
  peak added to its own site), SLO 60 ms, latency 5 ms + 1 ms per 100 km great-circle
  distance.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pandas as pd

from carbonsched.domain import (
    Backend,
    GpuPool,
    InferenceDemand,
    Job,
    PueModel,
    Site,
    SiteRole,
)
from carbonsched.errors import DataFormatError
from carbonsched.plan.sets import PlanningProblem

ZONES: dict[str, tuple[float, float, str]] = {
    # zone: (latitude, longitude, role) of a representative city (own approximate coordinates)
    "CA-ON": (43.65, -79.38, "green-hub"), "BR-SP": (-23.55, -46.63, "green-hub"),
    "GB": (51.51, -0.13, "green-hub"), "US-CAL-CISO": (37.77, -122.42, "green-hub"),
    "US-NY-NYIS": (40.71, -74.01, "edge"), "US-MIDA-PJM": (39.95, -75.17, "edge"),
    "JP-TK": (35.68, 139.69, "edge"), "SG": (1.35, 103.82, "edge"),
    "DE-LU": (50.11, 8.68, "edge"), "AU-NSW": (-33.87, 151.21, "edge"),
    "AU-VIC": (-37.81, 144.96, "green-hub"), "CL-SIC": (-33.45, -70.67, "green-hub"),
    "IN-WE": (19.08, 72.88, "edge"), "KR": (37.57, 126.98, "edge"),
    "US-TEX-ERCO": (30.27, -97.74, "green-hub"), "ZA": (-26.20, 28.05, "edge"),
}
KW_PER_GPU = 0.4
INFERENCE_SHARE = 0.05
SLO_MS = 60.0


SITES_PER_ZONE = 4
"""Data centres per zone :func:`make_instance` builds at most (issue 36 asks 32 sites)."""

MAX_SITES = SITES_PER_ZONE * len(ZONES)
"""Most sites :func:`make_instance` builds (4 per zone of :data:`ZONES`)."""


def shared_data_dir(data_dir: str | Path | None = None) -> Path:
    """``data_dir``, else ``$CARBONSCHED_SHARED_DATA``, else ``../shared/data``."""
    if data_dir is not None:
        return Path(data_dir)
    root = Path(__file__).resolve().parents[2]
    return Path(os.environ.get("CARBONSCHED_SHARED_DATA", root.parent / "shared" / "data"))


def _read(path: Path, **kw) -> pd.DataFrame:
    if not path.exists():
        raise DataFormatError(path, "file not found; set CARBONSCHED_SHARED_DATA or --data-dir")
    return pd.read_csv(path, **kw)


def _latency_ms(a: tuple[float, float], b: tuple[float, float]) -> float:
    """5 ms + 1 ms per 100 km of great-circle distance (haversine, R = 6371 km)."""
    la1, lo1, la2, lo2 = map(math.radians, (a[0], a[1], b[0], b[1]))
    h = (math.sin((la2 - la1) / 2) ** 2
         + math.cos(la1) * math.cos(la2) * math.sin((lo2 - lo1) / 2) ** 2)
    km = 2 * 6371.0 * math.asin(math.sqrt(h))
    return 5.0 + km / 100.0


def make_instance(jobs: int, sites: int, hours: int, load: float = 0.3, seed: int = 0,
                  data_dir: str | Path | None = None, start: str = "2023-07-15",
                  inference: bool = True) -> PlanningProblem:
    """Build a benchmark planning problem from the real traces (see the module docstring).

    Parameters
    ----------
    jobs, sites, hours
        Number of jobs, sites and hourly slots. Sites take the Electricity Maps zones in
        :data:`ZONES` order; past the 16 zones a second (third, fourth) data centre per zone
        follows in the same order (its own id, capacity and PUE; the zone's signals), so
        ``sites`` ≤ :data:`MAX_SITES`. Inference demand is per zone (area).
    load
        Share of the fleet's GPU-hours the batch work uses. [-]
    seed
        Random seed (sampling of jobs and jitter).
    data_dir
        Shared data directory.
    start
        First day of the horizon (UTC, 2023).
    inference
        Include inference demand.

    Raises
    ------
    DataFormatError
        A trace or CI file is missing.
    ValueError
        ``sites`` not in 1..:data:`MAX_SITES` or ``load`` not in (0, 1].
    """
    if not 1 <= sites <= MAX_SITES:
        raise ValueError(f"sites must be 1..{MAX_SITES} ({SITES_PER_ZONE} per zone of the "
                         f"{len(ZONES)} zones), got {sites}")
    if not 0 < load <= 1:
        raise ValueError(f"load must be in (0, 1], got {load}")
    root = shared_data_dir(data_dir)
    rng = np.random.default_rng(seed)
    gaia = _read(root / "job-traces" / "gaia_pai-100k.csv")
    pods = _read(root / "job-traces" / "alibaba_gpu_v2023_openb_pod_list_default.csv")
    nodes = _read(root / "job-traces" / "alibaba_gpu_v2023_openb_node_list_gpu_node.csv")
    gangs = pods.loc[pods["num_gpu"] >= 1, "num_gpu"].to_numpy()
    share = nodes.groupby("model")["gpu"].sum()
    share = share[share >= 100].sort_values(ascending=False)
    types = list(share.index)
    p_type = (share / share.sum()).to_numpy()

    rows = rng.integers(0, len(gaia), size=jobs)
    arr = gaia["arrival_time"].to_numpy()[rows]
    length = gaia["length"].to_numpy()[rows]
    dur = np.clip(np.ceil(length), 1, max(1, hours // 2)).astype(int)
    day = rng.integers(0, max(1, hours // 24), size=jobs) if hours >= 48 else np.zeros(jobs, int)
    es = (np.floor(arr % 24).astype(int) + 24 * day) % hours
    slack = rng.integers(2, 25, size=jobs)
    es = np.minimum(es, hours - dur)
    dl = np.minimum(es + dur + slack, hours)
    g_idx = rng.choice(len(types), size=jobs, p=p_type)
    gpus = rng.choice(gangs, size=jobs)

    t0 = pd.Timestamp(start, tz="UTC")
    slots = pd.date_range(t0, periods=hours, freq="h", name="slot")
    zones = [list(ZONES)[i % len(ZONES)] for i in range(sites)]
    areas = list(dict.fromkeys(zones))    # one inference area per zone
    work_gh = np.array([np.sum((gpus * dur)[g_idx == k]) for k in range(len(types))], float)
    per_type_total = np.maximum(work_gh / (load * hours), 1.0)
    counts = np.zeros((sites, len(types)), dtype=int)
    for k in range(len(types)):
        gang = int(gpus[g_idx == k].max()) if (g_idx == k).any() else 1
        # a GPU type sits at as many sites as can each hold its largest gang
        n_at = sites if k == 0 else int(np.clip(per_type_total[k] // gang, 1, sites))
        at = rng.permutation(sites)[:n_at]
        share = rng.uniform(0.7, 1.3, size=n_at)
        counts[at, k] = np.maximum(np.ceil(per_type_total[k] * share / share.sum()), gang)
    # inference on top of batch capacity
    batch_counts = counts.copy()
    inf_total = INFERENCE_SHARE * counts.sum()
    # each area's peak inference fits at its own site (the most used type, at every site)
    counts[:, 0] += int(np.ceil(inf_total / sites))
    pue_draw = rng.uniform(1.10, 1.45, size=sites)

    site_objs, sig = [], []
    for i, z in enumerate(zones):
        lat, lon, role = ZONES[z]
        cap_kw = max(0.85 * counts[i].sum() * KW_PER_GPU, 8 * KW_PER_GPU)
        lat_ms = {a: round(_latency_ms((lat, lon), ZONES[a][:2]), 1) for a in areas}
        site_objs.append(Site(
            id=f"s{i:02d}-{z}", name=z, role=SiteRole(role), zone=z,
            signal_source="electricitymaps", latitude=lat, longitude=lon, timezone="UTC",
            gpus={t: GpuPool(count=int(counts[i, k]), board_power_w=300.0)
                  for k, t in enumerate(types) if counts[i, k] > 0},
            it_power_cap_kw=float(cap_kw), pue=PueModel(), latency_ms=lat_ms,
            backend=Backend(kind="slurm", cluster=f"c{i}"),
            meta={"batch_gpus": int(batch_counts[i].sum()),
                  "inference_gpus": int(counts[i].sum() - batch_counts[i].sum())}))
        ci_df = _read(root / "sustain-cluster" / "carbon_intensity" / f"{z}_2023_hourly.csv")
        ts = pd.to_datetime(ci_df["Datetime (UTC)"]).dt.tz_localize("UTC")
        ci_df.index = ts
        ci_df = ci_df[~ci_df.index.duplicated()].reindex(slots)
        ci = ci_df["Carbon Intensity gCO₂eq/kWh (direct)"].ffill().bfill().to_numpy(float)
        ren = ci_df["Renewable Percentage"].ffill().bfill().fillna(0).to_numpy(float)
        surplus = 0.10 * cap_kw * np.clip((ren - 60.0) / 40.0, 0, None)
        sig.append(pd.DataFrame({"site": site_objs[-1].id, "slot": slots,
                                 "carbon_intensity_g_per_kwh": ci,
                                 "pue": np.full(hours, pue_draw[i]),
                                 "green_surplus_kw": surplus}))
    signals = pd.concat(sig).set_index(["site", "slot"])

    job_objs = [
        Job(id=f"job-{k}", tenant=f"t{k % 7}", gpu_type=types[g_idx[k]], gpus=int(gpus[k]),
            duration_hours=int(dur[k]), power_per_gpu_kw=KW_PER_GPU,
            earliest_start=slots[es[k]], deadline=t0 + pd.Timedelta(hours=int(dl[k])))
        for k in range(jobs)
    ]
    demands = []
    if inference:
        per_area_hour = inf_total / len(areas)
        for z_i, z in enumerate(areas):
            for t, ts in enumerate(slots):
                diurnal = 0.6 + 0.4 * math.sin(2 * math.pi * ((t + 3 * z_i) % 24) / 24)
                n = int(round(per_area_hour * diurnal))
                if n > 0:
                    demands.append(InferenceDemand(area=z, hour=ts, gpu_type=types[0], gpus=n,
                                                   slo_ms=SLO_MS, power_per_gpu_kw=KW_PER_GPU))
    return PlanningProblem(sites=site_objs, jobs=job_objs, inference=demands, slots=slots,
                           signals=signals)
