"""Rolling-horizon replay on one site (issue 14's targets): DE-LU, 1-GPU PAI trace jobs.

Jobs: every GAIA PAI job (``job-traces/gaia_pai-100k.csv``) arriving in ``[start, end]`` (trace
day = day of year − 1, as :func:`carbonsched.workload.files.workload_from_traces` reads it), one
A100 each at ``it_power_per_gpu_kw("A100")``; arrival = the start of its arrival hour (UTC),
duration = ``min(max(1, ceil(length)), 24)`` whole hours (the planner's grid), waiting limit
``--wait-hours`` (deadline = arrival + wait + duration). Site: ``--site``, any site of the
``global`` catalog (default ``de-frankfurt``, zone DE-LU), replayed on its own zone's signals with
ample capacity (``--gpus`` A100, no power cap). Policies:
``agnostic``, rolling ``milp`` on forecasts, rolling ``oracle`` on actuals over every job's whole
waiting window, ``best-fixed`` (capacity-free ideal for non-preemptive jobs); and, for the
comparison the issue starts from, ``milp``/``oracle`` with a 24 h horizon (day-bounded).

Run (from the repository root)::

    flock /work/bench.lock python bench/rolling_replay.py --start 2023-07-01 --end 2023-07-31 \\
        --out bench/results/rolling_replay_july.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd

from carbonsched.catalog import load_catalog
from carbonsched.domain import GpuPool, Job, WorkKind, Workload
from carbonsched.evaluate.replay_jobs import run_jobs_replay
from carbonsched.evaluate.site_backtest import EXOGENOUS_MODES
from carbonsched.timeaxis import HOUR, day_start_utc
from carbonsched.workload.files import GAIA_FILE, it_power_per_gpu_kw


def trace_jobs(data_dir: Path, start: str, end: str, wait_hours: int, site: str,
               power_kw: float, whole_hours: bool = False, preemptible: bool = False,
               overhead_minutes: int = 10, max_pieces: int = 4) -> Workload:
    """The 1-GPU trace jobs arriving in ``[start, end]`` (see the module docstring)."""
    gaia = pd.read_csv(data_dir / GAIA_FILE)
    d0, d1 = day_start_utc(start), day_start_utc(end) + pd.Timedelta(days=1)
    t0 = 24 * (d0.day_of_year - 1)
    t1 = t0 + (d1 - d0) / HOUR
    sel = gaia[(gaia["arrival_time"] >= t0) & (gaia["arrival_time"] < t1)]
    sel = sel.sort_values("arrival_time", kind="stable").reset_index(drop=True)
    jobs = []
    for i, r in sel.iterrows():
        if whole_hours:   # the day-bounded replay's rounding (issue 14: +41 % job-hours)
            arrival = d0 + int(math.floor(r["arrival_time"] - t0)) * HOUR
            minutes = 60 * min(max(1, math.ceil(r["length"])), 24)
        else:             # the trace's own minutes
            arrival = d0 + pd.Timedelta(minutes=int(round((r["arrival_time"] - t0) * 60)))
            minutes = max(1, int(round(r["length"] * 60)))
        jobs.append(Job(id=f"pai-{i:05d}", tenant="pai", gpu_type="A100", gpus=1,
                        duration_minutes=minutes, power_per_gpu_kw=power_kw,
                        earliest_start=arrival,
                        deadline=arrival + pd.Timedelta(minutes=60 * wait_hours + minutes),
                        allowed_sites=(site,), kind=WorkKind.BATCH,
                        preemptible=preemptible,
                        checkpoint_overhead_minutes=overhead_minutes if preemptible else 0,
                        max_pieces=max_pieces if preemptible else 1))
    return Workload(jobs=jobs, inference=[])


def ample_site_catalog(site_id: str, gpus: int):
    """The ``global`` catalog reduced to ``site_id`` with ``gpus`` A100 and no power cap.

    Parameters
    ----------
    site_id : str
        A site of the ``global`` catalog (``regions/global.toml``).
    gpus : int
        A100 count of the ample pool. [GPUs]

    Returns
    -------
    tuple
        ``(catalog, site)``: the one-site catalog and the site as the catalog describes it.

    Raises
    ------
    ValueError
        ``site_id`` is not a site of the ``global`` catalog, or it has no A100 pool; the
        message lists the catalog's sites.
    """
    cat = load_catalog("global")
    ids = [s.id for s in cat.sites]
    if site_id not in ids:
        raise ValueError(f"--site {site_id!r} is not a site of the 'global' catalog; "
                         f"use one of: {', '.join(ids)}")
    site = cat.site(site_id)
    if "A100" not in site.gpus:
        raise ValueError(f"--site {site_id!r} has no A100 pool in the 'global' catalog; the "
                         f"PAI jobs run on A100s; use a site with one")
    ample = replace(site, gpus={"A100": GpuPool(gpus, site.gpus["A100"].board_power_w)},
                    it_power_cap_kw=1e9, facility_power_cap_kw=None)
    return replace(cat, sites=[ample]), site


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--site", default="de-frankfurt",
                    help="A site of the 'global' catalog; its zone's signals are replayed.")
    ap.add_argument("--start", default="2023-07-01")
    ap.add_argument("--end", default="2023-07-31")
    ap.add_argument("--wait-hours", type=int, default=24)
    ap.add_argument("--horizon-hours", type=int, default=72)
    ap.add_argument("--run-every-hours", type=int, default=24)
    ap.add_argument("--gpus", type=int, default=10000)
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--mip-gap", type=float, default=0.001)
    ap.add_argument("--whole-hours", action="store_true",
                    help="Round arrivals down and lengths up to whole hours (max 24 h), as the "
                         "day-bounded replay's trace jobs do.")
    ap.add_argument("--preemptible", action="store_true",
                    help="Jobs may run in up to --max-pieces pieces, each resumption paying "
                         "--overhead-minutes.")
    ap.add_argument("--overhead-minutes", type=int, default=10)
    ap.add_argument("--max-pieces", type=int, default=4)
    ap.add_argument("--policies", default="agnostic,milp,oracle,best-fixed")
    ap.add_argument("--no-day-bounded", action="store_true",
                    help="Skip the 24 h-horizon comparison run.")
    ap.add_argument("--exogenous", default="none", choices=EXOGENOUS_MODES,
                    help="exogenous forecasts milp's forecasts read (as the site backtest's)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    data_dir = Path(os.environ.get("CARBONSCHED_SHARED_DATA", "../shared/data"))
    try:
        cat, site = ample_site_catalog(args.site, args.gpus)
    except ValueError as e:
        ap.error(str(e))
    wl = trace_jobs(data_dir, args.start, args.end, args.wait_hours, site.id,
                    it_power_per_gpu_kw("A100", cat), args.whole_hours, args.preemptible,
                    args.overhead_minutes, args.max_pieces)
    policies = tuple(p for p in args.policies.split(",") if p)
    out: dict = {"start": args.start, "end": args.end, "jobs": len(wl.jobs),
                 "job_gpu_hours": round(sum(j.duration_hours for j in wl.jobs), 2),
                 "wait_hours": args.wait_hours, "whole_hours": args.whole_hours,
                 "preemptible": args.preemptible,
                 "overhead_minutes": args.overhead_minutes if args.preemptible else 0,
                 "max_pieces": args.max_pieces if args.preemptible else 1,
                 "horizon_hours": args.horizon_hours, "run_every_hours": args.run_every_hours,
                 "exogenous": args.exogenous,
                 "site": site.id, "zone": site.zone,
                 "gpus": args.gpus, "load_average_before": os.getloadavg()}
    t0 = time.perf_counter()
    out["rolling"] = run_jobs_replay(wl, cat, data_dir, policies=policies,
                                     horizon_hours=args.horizon_hours,
                                     run_every_hours=args.run_every_hours,
                                     time_limit_s=args.time_limit, mip_gap=args.mip_gap,
                                     progress=lambda m: print("rolling", m, flush=True),
                                     exogenous=args.exogenous)
    out["rolling_seconds"] = round(time.perf_counter() - t0, 1)
    if not args.no_day_bounded:
        t0 = time.perf_counter()
        out["day_bounded"] = run_jobs_replay(
            wl, cat, data_dir, policies=("agnostic", "milp", "oracle"), horizon_hours=24,
            run_every_hours=24, time_limit_s=args.time_limit, mip_gap=args.mip_gap,
            progress=lambda m: print("day-bounded", m, flush=True), exogenous=args.exogenous)
        out["day_bounded_seconds"] = round(time.perf_counter() - t0, 1)
    out["load_average_after"] = os.getloadavg()
    for part in ("rolling", "day_bounded"):
        if part in out:
            out[part].pop("placements", None)
            out[part].pop("runs", None)
    pol = out["rolling"]["policies"]
    summary = {name: {k: p[k] for k in ("emissions_kg", "reduction_pct", "oracle_share",
                                         "jobs_placed", "jobs_split", "pieces", "overhead_kwh",
                                         "time_limited_runs", "seconds")}
               for name, p in pol.items()}
    if "day_bounded" in out:
        summary.update({f"{n} (H=24)": {k: p[k] for k in ("emissions_kg", "reduction_pct",
                                                           "oracle_share", "jobs_placed")}
                        for n, p in out["day_bounded"]["policies"].items() if n != "agnostic"})
    out["targets"] = {}
    if "milp" in pol and "oracle" in pol:
        m, o = pol["milp"]["reduction_pct"], pol["oracle"]["reduction_pct"]
        out["targets"]["milp_within_8pct_of_oracle_reduction"] = (o - m) <= 0.08 * o
        out["targets"]["milp_over_oracle_reduction"] = round(m / o, 4) if o else None
    if "oracle" in pol and "best-fixed" in pol:
        out["targets"]["oracle_le_best_fixed_emissions"] = (
            pol["oracle"]["emissions_kg"] <= pol["best-fixed"]["emissions_kg"]
            * (1 + args.mip_gap))
    out["summary"] = summary
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({"summary": summary, "targets": out["targets"]}, indent=2))


if __name__ == "__main__":
    main()
