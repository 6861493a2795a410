"""Warm vs cold rolling step (issue 36 item 2): a 6-hourly step started from the previous plan.

Run (one solver thread; prefix with ``nice -n 19`` on a shared machine)::

    python bench/rolling_warm_start.py --jobs 2000 --sites 8 --hours 72 --every 6 \\
        --seeds 0 1 2 --limit 30 --out bench/results/rolling_warm_start.json

Per seed, on a real-trace instance (:func:`carbonsched.plan.instances.make_instance`, covering
``hours + every`` hours): run 1 is a cold rolling step at ``T0`` (``--limit``); it commits what
starts before ``T0 + every``. Run 2, issued at ``T0 + every``, plans the same problem (running
work held, the rest pending) side by side in one process:

* cold at ``limit × f`` and warm (started from run 1's plan of the re-planned jobs and its
  column-generation multipliers and columns, :meth:`RollingPlanner.warm_start
  <carbonsched.plan.rolling.RollingPlanner.warm_start>`) at ``limit × f``, for each ``f`` of
  ``--fractions`` (default 0.1 0.25 0.5 1);
* each plan's gap is measured against the best bound any of those solves proved (so the
  plans are compared on one scale): ``gap_best = (objective − best bound) / objective``;
* the cold reference is the cold step at the full limit; the warm time *at the same gap* is
  the solver time of the shortest warm solve whose ``gap_best`` is at most the reference's;
  the same is reported for cold solves at the shorter limits (does the warm start or the
  shorter limit give the speed?).

The JSON file (a list, one row per seed) and a Markdown table next to it are written; the
summary gives the median and worst ratio over seeds. Target (issue 36): warm ≤ 25 % of cold.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from carbonsched.plan import PlanningProblem, solve_plan
from carbonsched.plan.bench import format_gap
from carbonsched.plan.instances import make_instance
from carbonsched.plan.rolling import RollingPlanner
from carbonsched.plan.solve import WarmStart
from carbonsched.timeaxis import hourly_slots


def _solve(problem: PlanningProblem, limit: float, start: WarmStart | None) -> dict:
    t0 = time.perf_counter()
    res = solve_plan(problem, time_limit_s=limit, start=start)
    return {"limit_s": limit, "seconds": time.perf_counter() - t0,
            "objective": res.totals["objective"], "bound": res.solver.bound,
            "gap": res.solver.mip_gap, "status": str(res.status),
            "method": res.solver.method, "warm_start": res.solver.warm_start}


def run2_problem(jobs: int, sites: int, hours: int, every: int, load: float, seed: int,
                 limit: float):
    """Run 1 cold at ``limit``; returns run 2's problem, the planner, run 1, its seconds, T0."""
    inst = make_instance(jobs, sites, hours + every, load=load, seed=seed)
    t0 = inst.slots[0]
    rp = RollingPlanner(inst.sites, planner=lambda p: solve_plan(p, time_limit_s=limit),
                        horizon_hours=hours, run_every_hours=every)
    rp.submit(inst.jobs)
    tr = time.perf_counter()
    run1 = rp.step(t0, inst.signals, inst.inference)
    run1_s = time.perf_counter() - tr
    t1 = t0 + pd.Timedelta(hours=every)
    slots = hourly_slots(t1, hours)
    pending, running, _ = rp.prepare(t1, slots)
    inf = [d for d in inst.inference if t1 <= d.hour < slots[-1] + pd.Timedelta(hours=1)]
    problem = PlanningProblem(sites=inst.sites, jobs=pending, inference=inf, slots=slots,
                              signals=inst.signals, running=running)
    return problem, rp, run1, run1_s, t0


def one_seed(jobs: int, sites: int, hours: int, every: int, load: float, seed: int,
             limit: float, fractions: list[float]) -> dict:
    """Run 1 cold, then run 2 cold and warm at each fraction of the limit (module docstring)."""
    problem, rp, run1, run1_s, t0 = run2_problem(jobs, sites, hours, every, load, seed, limit)
    pending, running = problem.jobs, problem.running
    start = rp.warm_start()    # run 1's plan and its multipliers and columns (colgen.warm)
    if start is None:
        raise SystemExit(f"seed {seed}: run 1 left nothing to re-plan")
    start = WarmStart(start.placements,
                      f"run 1 (issued {t0:%Y-%m-%dT%H:%MZ}), shifted by {every} h",
                      duals=start.duals, duals_missing=start.duals_missing)
    cold, warm = [], []
    for f in fractions:
        cold.append(_solve(problem, limit * f, None))
        warm.append(_solve(problem, limit * f, start))
    bounds = [r["bound"] for r in cold + warm if r["bound"] is not None]
    best = max(bounds) if bounds else None
    for r in cold + warm:
        r["gap_best"] = (None if best is None else
                         (r["objective"] - best) / max(abs(r["objective"]), 1e-9))
    ref = cold[fractions.index(max(fractions))]

    def first_at(rows: list[dict]) -> dict | None:
        ok = [r for r in rows if r["gap_best"] is not None
              and r["gap_best"] <= ref["gap_best"] + 1e-9]
        return min(ok, key=lambda r: r["seconds"]) if ok else None

    w, c = first_at(warm), first_at(cold[:-1] + [ref])
    return {
        "jobs": jobs, "sites": sites, "hours": hours, "every_hours": every, "load": load,
        "seed": seed, "limit_s": limit, "run1_seconds": run1_s,
        "run1_status": str(run1.result.status), "committed_run1": len(run1.committed),
        "pending_run2": len(pending), "running_run2": len(running),
        "warm_placements": len(start.placements), "best_bound": best,
        "warm_multipliers": start.duals is not None,
        "cold_ref": ref, "cold": cold, "warm": warm,
        "warm_same_gap": w, "cold_same_gap": c,
        "warm_ratio": None if w is None else w["seconds"] / ref["seconds"],
        "cold_short_ratio": None if c is None else c["seconds"] / ref["seconds"],
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{os.cpu_count()} cores (shared), load {os.getloadavg()[0]:.1f}, "
                   f"Python {platform.python_version()}",
    }


def write_markdown(rows: list[dict], path: Path) -> None:
    """The table of ``rows`` and the median / worst ratios over seeds."""
    lines = ["# Rolling step: warm vs cold", "",
             "| seed | pending | running | warm placements | cold s (limit) | cold gap_best | "
             "warm s at same gap | warm/cold | cold s at same gap (shorter limit) | "
             "cold-short/cold | warm status |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    def secs(x: dict | None) -> str:
        return "not reached" if x is None else f"{x['seconds']:.1f}"

    def ratio(v: float | None) -> str:
        return "—" if v is None else f"{v:.2f}"

    for r in rows:
        w, c, ref = r["warm_same_gap"], r["cold_same_gap"], r["cold_ref"]
        lines.append(
            f"| {r['seed']} | {r['pending_run2']} | {r['running_run2']} | "
            f"{r['warm_placements']} | {ref['seconds']:.1f} ({ref['limit_s']:g}) | "
            f"{format_gap(ref['gap_best'])} | {secs(w)} | {ratio(r['warm_ratio'])} | {secs(c)} | "
            f"{ratio(r['cold_short_ratio'])} | {(w or r['warm'][-1])['warm_start'][:60]} |")
    ratios = [r["warm_ratio"] for r in rows if r["warm_ratio"] is not None]
    if ratios:
        lines += ["", f"warm/cold at the same gap: median {statistics.median(ratios):.2f}, "
                  f"worst {max(ratios):.2f} over {len(ratios)} seed(s) "
                  f"({len(rows) - len(ratios)} seed(s) where no warm solve reached it)"]
    path.write_text("\n".join(lines) + "\n")


def main() -> None:
    """Command line (module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--sites", type=int, default=8)
    ap.add_argument("--hours", type=int, default=72)
    ap.add_argument("--every", type=int, default=6)
    ap.add_argument("--load", type=float, default=0.3)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--limit", type=float, default=30.0)
    ap.add_argument("--fractions", type=float, nargs="+", default=[0.1, 0.25, 0.5, 1.0])
    ap.add_argument("--out", type=Path, default=Path("bench/results/rolling_warm_start.json"))
    a = ap.parse_args()
    rows = []
    for seed in a.seeds:
        row = one_seed(a.jobs, a.sites, a.hours, a.every, a.load, seed, a.limit,
                       sorted(a.fractions))
        rows.append(row)
        print(json.dumps({k: row[k] for k in ("seed", "warm_ratio", "cold_short_ratio")}
                         | {"cold_gap": row["cold_ref"]["gap_best"]}), flush=True)
        a.out.write_text(json.dumps(rows, indent=1, default=str) + "\n")
        write_markdown(rows, a.out.with_suffix(".md"))


if __name__ == "__main__":
    main()
