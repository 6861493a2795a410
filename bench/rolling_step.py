"""The rolling step at fleet scale (issue 36 targets): running work, deferral, pieces, sub-hour.

Run (project root; one solver thread; prefix with ``nice -n 19`` on a shared machine)::

    python bench/rolling_step.py --jobs 10000 --sites 16 --hours 72 --running-share 0.2 \\
        --preemptible-share 0.3 --slot-minutes 15 --limit 120 --seeds 0 1 2 \\
        --out bench/results/rolling_step_10k_15min.json

Per seed, one rolling step as the service runs it (:func:`make_rolling_step`), on a real-trace
instance (:func:`carbonsched.plan.instances.make_instance`):

* ``J`` pending jobs whose earliest start is in the ``H``-hour horizon, their deadlines up
  to ``--tail-hours`` past its end (jobs that may start after the horizon are deferrable:
  the planner weighs them against their terminal value, and runs started in the horizon
  may end past it, on the continuation signals);
* ``--running-share`` of every site's GPUs of every type already running
  (:class:`~carbonsched.domain.RunningWork` holding GPUs and IT power until an end drawn
  uniformly in 1..``--running-max-hours`` hours, on the minute, so it ends off the grid);
* ``--preemptible-share`` of the jobs of two hours or more preemptible, in up to
  ``--max-pieces`` pieces with ``--checkpoint-minutes`` of restore per resumption;
* the horizon on a ``--slot-minutes`` grid (60, 30 or 15; signals and inference demand are
  hourly and hold in every slot of their hour).

Each seed is solved by :func:`carbonsched.plan.solve.solve_plan` (``--method``, default
``auto``) at ``--limit`` and its plan recounted by :func:`carbonsched.plan.result.score_plan`
(capacity, power, deadlines, gangs and pieces, inference SLO). Reported per seed: objective,
proven bound and gap, seconds, status, the method that ran and every fallback the solve
named (the method asked for vs the one that ran, the greedy plan, each clause of the
solver's note that says what it modelled differently or fell back to), the recount's
violations; then the median and worst over seeds. The JSON file (``runs`` and ``summary``)
is written after each seed, with a Markdown table next to it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd

from carbonsched.domain import Job, RunningWork
from carbonsched.plan import PlanningProblem, solve_plan
from carbonsched.plan.bench import format_gap, git_commit
from carbonsched.plan.bench import solve_fallbacks as fallbacks
from carbonsched.plan.instances import KW_PER_GPU, make_instance
from carbonsched.plan.result import score_plan

VIOLATIONS = ("capacity_violations", "power_cap_violations", "facility_cap_violations",
              "slo_violations", "deadline_misses", "gang_violations", "slice_violations")


def make_rolling_step(jobs: int, sites: int, hours: int, load: float = 0.3, seed: int = 0,
                      running_share: float = 0.2, preemptible_share: float = 0.3,
                      slot_minutes: int = 60, tail_hours: int = 24, running_max_hours: int = 24,
                      max_pieces: int = 3, checkpoint_minutes: int = 10,
                      data_dir: str | Path | None = None) -> PlanningProblem:
    """One rolling step's problem: pending jobs, running work, deferral, pieces (module doc).

    Parameters
    ----------
    jobs, sites, hours
        Pending jobs ``J``, sites ``S`` (≤ 16) and horizon ``H``. [-], [-], [h]
    load
        Share of the fleet's GPU-hours the batch work uses (before running work). [-]
    seed
        Instance seed (the jobs, capacities and the running work and preemptible draws).
    running_share
        Share of each site's GPUs of each type already running at the horizon start. [-]
    preemptible_share
        Share of the jobs of two hours or more made preemptible. [-]
    slot_minutes
        Slot grid: 60, 30 or 15. [min]
    tail_hours
        How far past the horizon end deadlines may lie (the instance is drawn over
        ``H + tail_hours`` hours and the jobs arriving in the horizon kept). [h]
    running_max_hours
        Running work ends uniformly in 1..this many hours, on the minute. [h]
    max_pieces, checkpoint_minutes
        Preemptible jobs' most pieces and restore time per resumption. [-], [min]
    data_dir
        Shared data directory (default ``$CARBONSCHED_SHARED_DATA``).

    Returns
    -------
    PlanningProblem
        ``J`` jobs (fewer only when the drawn instance has fewer arriving in the horizon),
        the horizon on the ``slot_minutes`` grid, signals over ``H + tail_hours`` hours.

    Raises
    ------
    ValueError
        A share outside [0, 1], or ``hours`` not a positive whole number.
    """
    for name, v in (("running_share", running_share), ("preemptible_share", preemptible_share)):
        if not 0.0 <= v <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {v}")
    if hours < 1:
        raise ValueError(f"hours must be >= 1, got {hours}")
    total_h = hours + max(int(tail_hours), 0)
    # draw enough jobs over H + tail hours that about J arrive in the horizon
    drawn = int(np.ceil(jobs * total_h / hours * 1.05)) + 10
    inst = make_instance(drawn, sites, total_h, load=load, seed=seed, data_dir=data_dir)
    t0 = inst.slots[0]
    end = t0 + pd.Timedelta(hours=hours)
    pending = [jb for jb in inst.jobs if jb.earliest_start < end][:jobs]
    rng = np.random.default_rng([seed, 36])
    pre = rng.random(len(pending)) < preemptible_share
    out_jobs: list[Job] = []
    for jb, p in zip(pending, pre, strict=True):
        if p and jb.duration_minutes >= 120:
            jb = replace(jb, preemptible=True, max_pieces=max_pieces,
                         checkpoint_overhead_minutes=checkpoint_minutes)
        out_jobs.append(jb)
    running: list[RunningWork] = []
    for site in inst.sites:
        for gtype, pool in site.gpus.items():
            held = int(round(running_share * pool.count))
            while held > 0:
                g = int(min(held, rng.integers(1, 9)))
                minutes = int(rng.integers(60, running_max_hours * 60 + 1))
                running.append(RunningWork(
                    site=site.id, gpu_type=gtype, gpus=g, it_power_kw=g * KW_PER_GPU,
                    end=t0 + pd.Timedelta(minutes=minutes),
                    job_id=f"run-{site.id}-{len(running)}"))
                held -= g
    slots = pd.date_range(t0, end, freq=f"{slot_minutes}min", inclusive="left", name="slot")
    inference = [d for d in inst.inference if d.hour < end]
    return PlanningProblem(sites=inst.sites, jobs=out_jobs, inference=inference, slots=slots,
                           signals=inst.signals, running=running, slot_minutes=slot_minutes)


def one_seed(args: argparse.Namespace, seed: int) -> dict:
    """Build and solve one seed's rolling step; recount the plan (module docstring)."""
    tb = time.perf_counter()
    problem = make_rolling_step(args.jobs, args.sites, args.hours, load=args.load, seed=seed,
                                running_share=args.running_share,
                                preemptible_share=args.preemptible_share,
                                slot_minutes=args.slot_minutes, tail_hours=args.tail_hours,
                                max_pieces=args.max_pieces,
                                checkpoint_minutes=args.checkpoint_minutes)
    build_s = time.perf_counter() - tb
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    res = solve_plan(problem, time_limit_s=args.limit, method=args.method, threads=1)
    seconds = time.perf_counter() - t0
    score = score_plan(problem, res)
    rec = res.solver
    end = problem.slots[-1] + problem.slot_length
    return {
        "jobs": len(problem.jobs), "sites": args.sites, "hours": args.hours,
        "slot_minutes": args.slot_minutes, "load": args.load, "seed": seed,
        "limit_s": args.limit, "method_asked": args.method,
        "running_items": len(problem.running),
        "running_gpus": int(sum(r.gpus for r in problem.running)),
        "fleet_gpus": int(sum(p.count for s in problem.sites for p in s.gpus.values())),
        "preemptible_jobs": int(sum(j.preemptible for j in problem.jobs)),
        "deferrable_jobs": int(sum(j.deadline > end for j in problem.jobs)),
        "build_instance_s": build_s, "seconds": seconds, "status": str(res.status),
        "method": rec.method, "objective": res.totals.get("objective"), "bound": rec.bound,
        "mip_gap": rec.mip_gap, "placed": len(res.placements), "unplaced": len(res.unplaced),
        "fallbacks": fallbacks(args.method, res), "note": rec.note,
        "recount_objective": score.objective,
        "violations": {k: int(getattr(score, k)) for k in VIOLATIONS},
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cores": os.cpu_count(), "python": platform.python_version(),
                    "load_average_before": [round(x, 2) for x in load_before],
                    "load_average_after": [round(x, 2) for x in os.getloadavg()]},
    }


def summarise(runs: list[dict], target: float | None = None) -> dict:
    """Median and worst over seeds of seconds and gap; the target judged on the worst.

    A run without a proven gap counts as an infinite gap; ``target_met`` is None without a
    target.
    """
    secs = [r["seconds"] for r in runs]
    gaps = [float("inf") if r.get("mip_gap") is None else r["mip_gap"] for r in runs]
    worst = max(gaps) if gaps else None
    return {
        "seeds": [r["seed"] for r in runs],
        "seconds_median": statistics.median(secs) if secs else None,
        "seconds_worst": max(secs) if secs else None,
        "gap_median": statistics.median(gaps) if gaps else None, "gap_worst": worst,
        "gap_target": target,
        "target_met": None if target is None or worst is None else bool(worst <= target),
        "fallback_runs": sum(bool(r["fallbacks"]) for r in runs),
        "violation_runs": sum(any(r["violations"].values()) for r in runs),
    }


def write_markdown(doc: dict, path: Path) -> None:
    """The summary line and one row per seed, fallbacks and violations named."""
    s, a = doc["summary"], doc["args"]
    lines = [f"# Rolling step: {a['jobs']} jobs × {a['sites']} sites × {a['hours']} h, "
             f"{a['slot_minutes']}-minute grid", "",
             f"Commit `{doc['commit']}`; {100 * a['running_share']:.0f} % of the fleet running, "
             f"{100 * a['preemptible_share']:.0f} % of the jobs ≥ 2 h preemptible, load "
             f"{a['load']}, limit {a['limit']:.0f} s, method {a['method']}. Gap = "
             "(objective − proven bound) / objective.", "",
             "| seeds | s median | s worst | gap median | gap worst | target | met | "
             "runs with fallbacks | runs with violations |",
             "|---|---|---|---|---|---|---|---|---|",
             f"| {', '.join(map(str, s['seeds']))} | {s['seconds_median']:.1f} | "
             f"{s['seconds_worst']:.1f} | {format_gap(s['gap_median'])} | "
             f"{format_gap(s['gap_worst'])} | "
             f"{format_gap(s['gap_target'])} | {s['target_met']} | {s['fallback_runs']} | "
             f"{s['violation_runs']} |", "",
             "| seed | jobs | running GPUs / fleet | preemptible | deferrable | s | status | "
             "method | objective | bound | gap | violations | fallbacks | "
             "load avg before → after |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in doc["runs"]:
        bad = ", ".join(f"{k} {v}" for k, v in r["violations"].items() if v) or "none"
        fb = "<br>".join(r["fallbacks"]) or "none"
        obj, bnd = r["objective"], r["bound"]
        m = r["machine"]
        lines.append(
            f"| {r['seed']} | {r['jobs']} | {r['running_gpus']} / {r['fleet_gpus']} | "
            f"{r['preemptible_jobs']} | {r['deferrable_jobs']} | {r['seconds']:.1f} | "
            f"{r['status']} | {r['method']} | {'—' if obj is None else f'{obj:.1f}'} | "
            f"{'—' if bnd is None else f'{bnd:.1f}'} | {format_gap(r['mip_gap'])} | {bad} | {fb} | "
            f"{m['load_average_before'][0]} → {m['load_average_after'][0]} |")
    path.write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> dict:
    """Parse the command line, run every seed, write JSON and Markdown; return the document."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=10000)
    ap.add_argument("--sites", type=int, default=16)
    ap.add_argument("--hours", type=int, default=72)
    ap.add_argument("--load", type=float, default=0.3)
    ap.add_argument("--running-share", type=float, default=0.2)
    ap.add_argument("--preemptible-share", type=float, default=0.3)
    ap.add_argument("--slot-minutes", type=int, default=60, choices=(15, 30, 60))
    ap.add_argument("--tail-hours", type=int, default=24)
    ap.add_argument("--max-pieces", type=int, default=3)
    ap.add_argument("--checkpoint-minutes", type=int, default=10)
    ap.add_argument("--limit", type=float, default=60.0, help="solver time limit [s]")
    ap.add_argument("--method", default="auto", choices=("auto", "milp", "colgen"))
    ap.add_argument("--target", type=float, default=None,
                    help="proven-gap target judged on the worst seed, e.g. 0.01")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--out", type=Path, default=Path("bench/results/rolling_step.json"))
    args = ap.parse_args(argv)
    doc = {"args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
           "commit": git_commit(), "runs": [], "summary": {}}
    for seed in args.seeds:
        row = one_seed(args, seed)
        doc["runs"].append(row)
        doc["summary"] = summarise(doc["runs"], args.target)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(doc, indent=1, default=float))
        write_markdown(doc, args.out.with_suffix(".md"))
        print(time.strftime("%H:%M:%S"), f"seed {seed}", row["status"], row["method"],
              f"{row['seconds']:.1f} s", format_gap(row["mip_gap"]), row["fallbacks"],
              row["violations"], flush=True)
    return doc


if __name__ == "__main__":
    main()
