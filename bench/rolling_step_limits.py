"""One rolling step's run 2 solved cold at several limits: is a longer limit's plan no worse?

Run (one solver thread; issue 36 item 0 at the rolling step's scale)::

    python bench/rolling_step_limits.py --jobs 10000 --sites 16 --hours 72 --every 6 \\
        --seeds 0 1 2 3 4 --limits 6 15 30 --cache /tmp/run2 --out r.json

Per seed, run 2 of :mod:`rolling_warm_start` (run 1 cold at ``--run1-limit`` on a real-trace
instance, then the problem issued ``--every`` hours later with run 1's committed work running)
is solved cold at each of ``--limits``; each row gives the plan, its proven bound and gap and
the planner's note. Run 2 depends on run 1's plan, which depends on the machine, so it is
pickled in ``--cache`` on first use and read from there after: two arms of a planner option
run side by side on the same problems, e.g. ``CARBONSCHED_CG_SMOOTH_MARKS=0`` and ``=1`` in
two processes at once (build the cache first with ``--limits`` left empty). The JSON file is a
list of rows; the summary prints each seed's plans by limit and the longer-limit plans above a
shorter one's.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import time
from datetime import UTC, datetime
from pathlib import Path

from rolling_warm_start import run2_problem

from carbonsched.plan import solve_plan


def load_run2(cache: Path, jobs: int, sites: int, hours: int, every: int, load: float,
              seed: int, run1_limit: float):
    """Run 2's problem for ``seed``: from ``cache`` if there, else built (run 1) and saved."""
    path = cache / f"run2_j{jobs}_s{sites}_h{hours}_e{every}_l{load:g}_r{run1_limit:g}_{seed}.pkl"
    if path.exists():
        with path.open("rb") as f:
            return pickle.load(f)
    problem = run2_problem(jobs, sites, hours, every, load, seed, run1_limit)[0]
    cache.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("wb") as f:
        pickle.dump(problem, f)
    tmp.replace(path)
    return problem


def main() -> None:
    """Command line (module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--sites", type=int, default=16)
    ap.add_argument("--hours", type=int, default=72)
    ap.add_argument("--every", type=int, default=6)
    ap.add_argument("--load", type=float, default=0.3)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--run1-limit", type=float, default=60.0)
    ap.add_argument("--limits", type=float, nargs="*", default=[6.0, 15.0, 30.0])
    ap.add_argument("--cache", type=Path, required=True)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    rows = []
    for seed in a.seeds:
        problem = load_run2(a.cache, a.jobs, a.sites, a.hours, a.every, a.load, seed,
                            a.run1_limit)
        for limit in a.limits:
            t = time.perf_counter()
            res = solve_plan(problem, time_limit_s=limit)
            rows.append({
                "seed": seed, "limit_s": limit, "seconds": time.perf_counter() - t,
                "objective": res.totals["objective"], "bound": res.solver.bound,
                "gap": res.solver.mip_gap, "status": str(res.status),
                "pending": len(problem.jobs), "running": len(problem.running),
                "env": {k: v for k, v in os.environ.items() if k.startswith("CARBONSCHED_CG_")},
                "load_average_1m": os.getloadavg()[0],
                "date_utc": datetime.now(UTC).isoformat(timespec="seconds"),
                "note": res.solver.note})
            print(f"seed {seed} limit {limit:g} s: {rows[-1]['objective']:,.2f} kg "
                  f"(bound {res.solver.bound or float('nan'):,.2f}) in "
                  f"{rows[-1]['seconds']:.1f} s", flush=True)
            if a.out:
                a.out.write_text(json.dumps(rows, indent=1, default=str) + "\n")
    worse = [(r["seed"], r["limit_s"]) for r in rows
             for q in rows if q["seed"] == r["seed"] and q["limit_s"] < r["limit_s"]
             and r["objective"] > q["objective"] + 1e-9]
    print(f"a longer limit's plan above a shorter one's: {len(set(worse))} of "
          f"{len(rows)} solves {sorted(set(worse))}")


if __name__ == "__main__":
    main()
