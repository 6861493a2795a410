"""The 2023 ``global`` replay with the rolling horizon (issue 14), beside the day-bounded one.

Workload: each day's trace jobs exactly as the day-bounded replay of BENCHMARKS.md section 4
builds them (:func:`carbonsched.workload.workload_from_traces`, seed ``seed + day index``,
``--workload-scale``), with one difference: ``clip_to_day=False``, so a job keeps its arrival
hour and its deadline (arrival + duration + slack) even when that is past midnight — the random
draws are the same, so the jobs, gangs, GPU types, sites and energy are the same. Inference
demand: the same per-hour demand. Jobs are replayed with
:func:`carbonsched.replay_jobs.run_jobs_replay` (the code behind ``carbonsched replay --jobs``):
a run every ``--run-every-hours`` with horizon ``--horizon-hours``; ``milp`` on forecasts from
the daily path (:func:`carbonsched.pipeline.forecast_site`, models chosen per refit week on up
to a year of history), ``oracle`` the same rolling planner on the actual signals with its
horizon stretched to every known job's deadline, ``agnostic`` each job at arrival at its home
site.

``milp`` and ``oracle`` are sequential in time but independent of each other, so they run in two
processes (each also runs ``agnostic``, deterministic, for its reduction); the results are merged
and the oracle share recomputed.

Run (repository root; about an hour on 2 cores)::

    export CARBONSCHED_SHARED_DATA=../shared/data
    flock /work/bench.lock python bench/global_rolling_replay.py --start 2023-01-01 \\
        --end 2023-12-31 --out bench/results/replay-2023-rolling.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd

from carbonsched.catalog import load_catalog
from carbonsched.domain import Workload
from carbonsched.replay_jobs import run_jobs_replay
from carbonsched.workload import workload_from_traces


def year_workload(data_dir: Path, start: str, end: str, seed: int, scale: float,
                  clip_to_day: bool = False) -> Workload:
    """Every day's trace workload of ``[start, end]`` in one (see the module docstring)."""
    cat = load_catalog("global")
    jobs, inference = [], []
    for k, day in enumerate(pd.date_range(start, end, freq="D")):
        wl = workload_from_traces(data_dir, day.strftime("%Y-%m-%d"), cat, seed=seed + k,
                                  scale=scale, clip_to_day=clip_to_day)
        jobs.extend(wl.jobs)
        inference.extend(wl.inference)
    return Workload(jobs=jobs, inference=inference)


def _run(args: argparse.Namespace, policies: tuple[str, ...]) -> dict[str, Any]:
    data_dir = Path(args.data_dir)
    wl = year_workload(data_dir, args.start, args.end, args.seed, args.workload_scale)
    t0 = time.time()

    def progress(msg: str) -> None:
        print(f"[{'+'.join(policies)}] {msg} ({time.time() - t0:,.0f} s)", file=sys.stderr,
              flush=True)

    res = run_jobs_replay(wl, "global", data_dir, policies, args.horizon_hours,
                          args.run_every_hours, args.time_limit, args.mip_gap, progress)
    res["wall_s"] = round(time.time() - t0, 1)
    res["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--start", default="2023-01-01")
    ap.add_argument("--end", default="2023-12-31")
    ap.add_argument("--data-dir", default=os.environ.get("CARBONSCHED_SHARED_DATA",
                                                         "../shared/data"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workload-scale", type=float, default=0.5)
    ap.add_argument("--horizon-hours", type=int, default=72)
    ap.add_argument("--run-every-hours", type=int, default=24)
    ap.add_argument("--time-limit", type=float, default=20.0)
    ap.add_argument("--mip-gap", type=float, default=0.002)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    t0 = time.time()
    with ProcessPoolExecutor(2) as pool:
        fm = pool.submit(_run, args, ("agnostic", "milp"))
        fo = pool.submit(_run, args, ("agnostic", "oracle"))
        rm, ro = fm.result(), fo.result()
    pol = {**rm["policies"], "oracle": ro["policies"]["oracle"]}
    a_m, a_o = rm["policies"]["agnostic"], ro["policies"]["agnostic"]
    same_base = abs(a_m["emissions_kg"] - a_o["emissions_kg"]) < 1e-6
    base, orc = a_m["emissions_kg"], pol["oracle"]["emissions_kg"]
    base_u, orc_u = a_m["emissions_with_unplaced_kg"], pol["oracle"]["emissions_with_unplaced_kg"]
    for v in pol.values():
        v["oracle_share"] = None if base == orc else round(
            (base - v["emissions_kg"]) / (base - orc), 4)
        v["oracle_share_with_unplaced"] = None if base_u == orc_u else round(
            (base_u - v["emissions_with_unplaced_kg"]) / (base_u - orc_u), 4)
    out = {"command": " ".join(sys.argv), "date_utc": pd.Timestamp.now("UTC").isoformat(),
           "machine": f"{os.cpu_count()} cores, load average {os.getloadavg()}",
           "start": args.start, "end": args.end, "workload_scale": args.workload_scale,
           "seed": args.seed, "jobs": rm["jobs"], "horizon_hours": args.horizon_hours,
           "run_every_hours": args.run_every_hours, "time_limit_s": args.time_limit,
           "mip_gap": args.mip_gap, "wall_s": round(time.time() - t0, 1),
           "process_wall_s": {"milp": rm["wall_s"], "oracle": ro["wall_s"]},
           "peak_rss_mb": {"milp": rm["peak_rss_mb"], "oracle": ro["peak_rss_mb"]},
           "agnostic_identical_in_both_processes": same_base, "policies": pol,
           "forecast_error": rm["forecast_error"],
           "forecast_fallbacks": rm["forecast_fallbacks"],
           "filled_signal_hours": rm["filled_signal_hours"],
           "runs": {"milp": rm["runs"], "oracle": ro["runs"]},
           "notes": {"milp": rm["notes"], "oracle": ro["notes"]}}
    Path(args.out).write_text(json.dumps(out, indent=1, default=str))
    print(json.dumps({k: {kk: v[kk] for kk in ("emissions_kg", "reduction_pct", "oracle_share",
                                               "reduction_with_unplaced_pct", "jobs_placed",
                                               "deadline_misses", "capacity_violations",
                                               "time_limited_runs", "fallback_runs", "seconds")}
                      for k, v in pol.items()}, indent=1))


if __name__ == "__main__":
    main()
