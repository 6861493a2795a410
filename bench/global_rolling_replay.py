"""The 2023 ``global`` replay with the rolling horizon (issue 14), beside the day-bounded one.

Workload: each day's trace jobs exactly as the day-bounded replay of BENCHMARKS.md section 4
builds them (:func:`carbonsched.workload.files.workload_from_traces`, seed ``seed + day index``,
``--workload-scale``), with one difference: ``clip_to_day=False``, so a job keeps its arrival
hour and its deadline (arrival + duration + slack) even when that is past midnight — the random
draws are the same, so the jobs, gangs, GPU types, sites and energy are the same. Inference
demand: the same per-hour demand. Jobs are replayed with
:func:`carbonsched.evaluate.replay_jobs.run_jobs_replay` (the code behind ``carbonsched replay
--jobs``): a run every ``--run-every-hours`` (or ``--every 6h``: the cadences the service
runs, 1-24 h dividing a day) with horizon ``--horizon-hours``; ``milp`` on
forecasts from the daily path (:func:`carbonsched.pipeline.daily.forecast_site`, models chosen per
refit week on up to a year of history), ``oracle`` the same rolling planner on the actual signals
with its horizon stretched to every known job's deadline, ``agnostic`` each job at arrival at its
home site.

``milp`` and ``oracle`` are sequential in time but independent of each other, so they run in two
processes (each also runs ``agnostic``, deterministic, for its reduction); the results are merged
and the oracle share recomputed on the sums over windows.

``--target-load L`` scales each day's jobs to the share ``L`` of the fleet's GPU-hours (as
``carbonsched replay --target-load``; :func:`year_workload`), for a binding load.

``--window-days N`` replays the first N days of each month as independent windows (each a
rolling replay of its own; the whole year as one rolling replay takes about 3 hours on 2 cores,
being sequential run after run). The day-bounded replay
(:func:`carbonsched.evaluate.replay.run_replay`, BENCHMARKS.md section 4's protocol) runs on the
same days in the same invocation, side by side.

Run (repository root; about 40 minutes on 2 cores for 12 windows of 7 days)::

    export CARBONSCHED_SHARED_DATA=../shared/data
    flock /work/bench.lock python bench/global_rolling_replay.py --start 2023-01-01 \\
        --end 2023-12-31 --window-days 7 --out bench/results/replay-2023-rolling.json
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd

from carbonsched.catalog import load_catalog
from carbonsched.config import Settings
from carbonsched.domain import Workload
from carbonsched.evaluate.replay import MAX_TARGET_LOAD, total_fleet_load
from carbonsched.evaluate.replay_jobs import run_jobs_replay
from carbonsched.plan import solve_plan
from carbonsched.workload.files import workload_from_traces

SERVICE_TIME_LIMIT_S = Settings.model_fields["time_limit_s"].default
"""The service's solver time limit of one run (``CARBONSCHED_TIME_LIMIT_S``). [s]"""
SERVICE_MIP_GAP = inspect.signature(solve_plan).parameters["mip_gap"].default
"""The relative MIP gap the service's runs use (``solve_plan``'s default). [-]"""


def year_workload(data_dir: Path, start: str, end: str, seed: int, scale: float,
                  clip_to_day: bool = False, target_load: float | None = None,
                  loads: list[float] | None = None) -> Workload:
    """Every day's trace workload of ``[start, end]`` in one (see the module docstring).

    With ``target_load`` each day's workload is drawn again at ``scale × target_load / load``,
    ``load`` being its share of the fleet's GPU-hours at ``scale``
    (:func:`carbonsched.evaluate.replay.total_fleet_load`), as ``carbonsched replay
    --target-load`` does: the same draws, a binding load (one rescale: job counts are whole
    and a redrawn day has other jobs, so the realised load is near the target, not at it).
    Each day's realised load is appended to ``loads`` when given. [-]
    """
    cat = load_catalog("global")
    jobs, inference = [], []
    for k, day in enumerate(pd.date_range(start, end, freq="D")):
        label = day.strftime("%Y-%m-%d")
        wl = workload_from_traces(data_dir, label, cat, seed=seed + k, scale=scale,
                                  clip_to_day=clip_to_day)
        load0 = total_fleet_load(wl, cat) if target_load is not None else 0.0
        if load0 > 0:
            wl = workload_from_traces(data_dir, label, cat, seed=seed + k,
                                      scale=scale * target_load / load0,
                                      clip_to_day=clip_to_day)
        if loads is not None:
            loads.append(total_fleet_load(wl, cat))
        jobs.extend(wl.jobs)
        inference.extend(wl.inference)
    return Workload(jobs=jobs, inference=inference)


def target_load_error(value: float | None) -> str | None:
    """What is wrong with ``--target-load`` (``None`` when it is fine or not given)."""
    if value is None or 0.0 < value <= MAX_TARGET_LOAD:
        return None
    return (f"--target-load {value} is outside (0, {MAX_TARGET_LOAD}]: it is a share of the "
            "fleet's GPU-hours; a binding load is 0.8-1.0")


def _rolling(args: argparse.Namespace, start: str, end: str, policies: tuple[str, ...]
             ) -> dict[str, Any]:
    data_dir = Path(args.data_dir)
    loads: list[float] = []
    wl = year_workload(data_dir, start, end, args.seed + _day_index(args.start, start),
                       args.workload_scale, target_load=args.target_load, loads=loads)
    t0 = time.time()

    def progress(msg: str) -> None:
        print(f"[{start} {'+'.join(policies)}] {msg} ({time.time() - t0:,.0f} s)",
              file=sys.stderr, flush=True)

    res = run_jobs_replay(wl, "global", data_dir, policies, args.horizon_hours,
                          args.run_every_hours, args.time_limit, args.mip_gap, progress)
    res["wall_s"] = round(time.time() - t0, 1)
    res["fleet_load_by_day"] = [round(x, 3) for x in loads]
    res.pop("placements", None)
    return res


def _day_bounded(args: argparse.Namespace, start: str, end: str) -> dict[str, Any]:
    from carbonsched.evaluate.replay import run_replay

    t0 = time.time()
    res = run_replay("global", Path(args.data_dir), start, end,
                     ("agnostic", "greedy", "milp", "oracle"),
                     seed=args.seed + _day_index(args.start, start),
                     time_limit_s=args.time_limit, workers=1, chunk_days=7,
                     mip_gap=args.mip_gap, workload_scale=args.workload_scale,
                     target_load=args.target_load)
    print(f"[{start} day-bounded] done ({time.time() - t0:,.0f} s)", file=sys.stderr,
          flush=True)
    res["wall_s"] = round(time.time() - t0, 1)
    return res


def _day_index(first: str, day: str) -> int:
    return int((pd.Timestamp(day) - pd.Timestamp(first)) / pd.Timedelta(days=1))


def windows(start: str, end: str, days: int | None) -> list[tuple[str, str]]:
    """``[(start, end)]``: the whole period, or the first ``days`` days of each month in it."""
    if not days:
        return [(start, end)]
    out = []
    for m in pd.date_range(pd.Timestamp(start).replace(day=1), end, freq="MS"):
        a = max(m, pd.Timestamp(start))
        b = min(m + pd.Timedelta(days=days - 1), pd.Timestamp(end))
        if a <= b:
            out.append((a.strftime("%Y-%m-%d"), b.strftime("%Y-%m-%d")))
    return out


def _sum_policies(parts: list[dict[str, Any]], key: str = "policies") -> dict[str, Any]:
    tot: dict[str, dict[str, float]] = {}
    for r in parts:
        for p, v in r[key].items():
            t = tot.setdefault(p, {})
            for k in ("emissions_kg", "emissions_with_unplaced_kg", "unplaced_priced_kg",
                      "work_it_mwh", "unplaced_it_mwh", "energy_mwh", "deadline_misses",
                      "capacity_violations", "slo_violations", "power_cap_violations",
                      "time_limited_runs", "fallback_runs", "not_optimal_days",
                      "fallback_days", "seconds", "jobs_placed"):
                if k in v and v[k] is not None:
                    t[k] = t.get(k, 0) + v[k]
            if v.get("longest_run_s") is not None:                # the longest, not summed
                t["longest_run_s"] = max(t.get("longest_run_s", 0.0), v["longest_run_s"])
            for k in ("time_limited_run_times", "fallback_run_times"):   # named, not summed
                t[k] = t.get(k, []) + list(v.get(k) or [])
    base, orc = tot["agnostic"], tot.get("oracle")
    for v in tot.values():
        for k, sfx in (("emissions_kg", ""), ("emissions_with_unplaced_kg", "_with_unplaced")):
            v[f"reduction{sfx}_pct"] = round(100 * (base[k] - v[k]) / base[k], 3)
            v[f"oracle_share{sfx}"] = (None if orc is None or base[k] == orc[k] else
                                       round((base[k] - v[k]) / (base[k] - orc[k]), 4))
        v["kg_per_mwh_work"] = round(v["emissions_kg"] / v["work_it_mwh"], 3)
        for k in list(v):
            if isinstance(v[k], float):
                v[k] = round(v[k], 3)
    return tot


def _merge_errors(parts: list[dict[str, Any]], scope: str | None) -> dict[str, Any]:
    """Per-site MAPE/MAE over windows, weighted by the hours scored."""
    acc: dict[str, dict[str, float]] = {}
    for r in parts:
        fe = r["forecast_error"][scope] if scope else r["forecast_error"]
        for sid, e in fe.items():
            if e["ci_mape_pct"] is None:
                continue
            a = acc.setdefault(sid, {"hours": 0, "ape": 0.0, "ae": 0.0})
            a["hours"] += e["hours"]
            a["ape"] += e["ci_mape_pct"] * e["hours"]
            a["ae"] += e["ci_mae_g_per_kwh"] * e["hours"]
    return {sid: {"ci_mape_pct": round(a["ape"] / a["hours"], 3),
                  "ci_mae_g_per_kwh": round(a["ae"] / a["hours"], 3), "hours": int(a["hours"])}
            for sid, a in sorted(acc.items())}


def per_window(wins: list[tuple[str, str]], rm: list[dict[str, Any]],
               rd: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per window: its policies with the oracle share (recomputed here, since the
    milp replay has no oracle of its own and the oracle is added after), and its milp runs.

    ``rm`` are the milp replays with the oracle's policy merged in, ``rd`` the day-bounded
    replays (empty when skipped).
    """
    return [{"window": w, "rolling": _sum_policies([m]), "milp_runs": m.get("runs"),
             "fleet_load_by_day": m.get("fleet_load_by_day"),
             "day_bounded": d["policies"] if d else None,
             "agnostic_identical": m["agnostic_identical"],
             "milp_notes": m["notes"], "oracle_notes": m["oracle_notes"],
             "forecast_fallbacks": m["forecast_fallbacks"],
             "filled_signal_hours": m["filled_signal_hours"],
             "day_bounded_oracle_unproven": (d or {}).get("oracle_unproven_days")}
            for w, m, d in zip(wins, rm, rd or [None] * len(wins), strict=True)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--start", default="2023-01-01")
    ap.add_argument("--end", default="2023-12-31")
    ap.add_argument("--window-days", type=int, default=0,
                    help="Replay only the first N days of each month, each window on its own "
                         "(0: the whole period as one rolling replay).")
    ap.add_argument("--data-dir", default=os.environ.get("CARBONSCHED_SHARED_DATA",
                                                         "../shared/data"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workload-scale", type=float, default=0.5)
    ap.add_argument("--target-load", type=float, default=None,
                    help="scale each day's jobs to this share of the fleet's GPU-hours, as "
                         "`carbonsched replay --target-load` does (a binding load: 0.8-1.0; "
                         "near, not exact: the realised loads are in per_window)")
    ap.add_argument("--horizon-hours", type=int, default=72)
    ap.add_argument("--run-every-hours", type=int, default=24)
    ap.add_argument("--every", default=None,
                    help="run cadence as the service runs: 1h 2h 3h 4h 6h 8h 12h or 24h "
                         "(overrides --run-every-hours)")
    ap.add_argument("--time-limit", type=float, default=SERVICE_TIME_LIMIT_S,
                    help="solver time limit of one run [s] (default: the service's, "
                         f"{SERVICE_TIME_LIMIT_S:g})")
    ap.add_argument("--mip-gap", type=float, default=SERVICE_MIP_GAP,
                    help=f"relative MIP gap (default: the service's, {SERVICE_MIP_GAP:g})")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--no-day-bounded", action="store_true",
                    help="Skip the day-bounded replay of the same days.")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    why = target_load_error(args.target_load)
    if why:
        ap.error(why)
    if args.every is not None:   # the service's cadences only (a divisor of a day)
        from carbonsched.timeaxis import parse_every

        args.run_every_hours = parse_every(args.every)
    t0 = time.time()
    wins = windows(args.start, args.end, args.window_days)
    with ProcessPoolExecutor(args.workers) as pool:
        fm = [pool.submit(_rolling, args, a, b, ("agnostic", "milp")) for a, b in wins]
        fo = [pool.submit(_rolling, args, a, b, ("agnostic", "oracle")) for a, b in wins]
        fd = [] if args.no_day_bounded else [pool.submit(_day_bounded, args, a, b)
                                             for a, b in wins]
        rm, ro, rd = ([f.result() for f in fm], [f.result() for f in fo],
                      [f.result() for f in fd])
    for m, o in zip(rm, ro, strict=True):
        m["policies"]["oracle"] = o["policies"]["oracle"]
        m["oracle_runs"], m["oracle_notes"] = o["runs"], o["notes"]
        m["agnostic_identical"] = abs(m["policies"]["agnostic"]["emissions_kg"]
                                      - o["policies"]["agnostic"]["emissions_kg"]) < 1e-6
    out = {"command": " ".join(sys.argv), "date_utc": pd.Timestamp.now("UTC").isoformat(),
           "machine": f"{os.cpu_count()} cores, load average at the end {os.getloadavg()}",
           "windows": wins, "days": sum(_day_index(a, b) + 1 for a, b in wins),
           "workload_scale": args.workload_scale, "target_load": args.target_load,
           "seed": args.seed,
           "jobs": sum(r["jobs"] for r in rm), "horizon_hours": args.horizon_hours,
           "run_every_hours": args.run_every_hours, "time_limit_s": args.time_limit,
           "mip_gap": args.mip_gap, "wall_s": round(time.time() - t0, 1),
           "rolling": _sum_policies(rm),
           "day_bounded": _sum_policies(rd) if rd else None,
           "forecast_error_rolling_committed": _merge_errors(rm, "committed"),
           "forecast_error_rolling_horizon": _merge_errors(rm, "horizon"),
           "forecast_error_day_bounded": _merge_errors(rd, None) if rd else None,
           "per_window": per_window(wins, rm, rd)}
    Path(args.out).write_text(json.dumps(out, indent=1, default=str))
    keys = ("emissions_kg", "reduction_pct", "oracle_share", "reduction_with_unplaced_pct",
            "oracle_share_with_unplaced", "kg_per_mwh_work", "work_it_mwh", "unplaced_it_mwh",
            "deadline_misses", "capacity_violations", "slo_violations", "time_limited_runs",
            "fallback_runs", "longest_run_s")
    for p, v in out["rolling"].items():   # the runs that did not end as planned, named
        for k, what in (("time_limited_run_times", "stopped at the time limit"),
                        ("fallback_run_times", "fell back to the greedy plan")):
            if v.get(k):
                print(f"rolling {p}: {len(v[k])} run(s) {what}: {', '.join(v[k])}")
    for name in ("rolling", "day_bounded"):
        if out[name]:
            print(name, json.dumps({p: {k: v.get(k) for k in keys} for p, v in
                                    out[name].items()}, indent=1))


if __name__ == "__main__":
    main()
