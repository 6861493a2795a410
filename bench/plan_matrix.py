"""Issue 13's planner matrix: five instance seeds per cell, median and worst, reference beside.

Run (project root; one solver thread; each solve in its own subprocess)::

    python bench/plan_matrix.py --out bench/results/plan_matrix.json --lock /work/bench.lock

Cells (16 sites × 48 h, real-trace instances of :mod:`carbonsched.plan.instances`), each with
its target — the target must hold for the worst of the seeds:

========  =====  ==========  ==========
jobs      load   time limit  proven gap
========  =====  ==========  ==========
10,000    0.3    20 s        ≤ 0.5 %
10,000    0.6    60 s        ≤ 1 %
10,000    0.8    60 s        ≤ 1 %
1,000     0.6    60 s        ≤ 1 %
50,000    0.3    300 s       ≤ 1 %
========  =====  ==========  ==========

Issue 36 asks for every cell at 20 s *and* at the default 60 s, and for the 72-hour horizon:
``--limit 60`` runs the cells at that limit instead of their own, ``--hours 72`` on 72 hourly
slots; runs are kept per (jobs, load, hours, limit), so one results file holds them all. A
cell on 48 h is judged on the stricter of its gap target above and issue 36's for its limit,
on another horizon on issue 36's where it has one (:data:`OTHER_TARGETS`: 10k jobs on 48 h at
60 s ≤ 0.5 % at every load, on 72 h at 60 s ≤ 1 %), else on the gap target above.

``--cells 10000:0.6 1000:0.6`` picks cells, ``--seeds`` the seeds (default 0..4),
``--reference-seeds`` the seeds that also run the straightforward PuLP model (default all;
it is skipped above ``--reference-max-jobs``, as its 9 million binaries at 50k exceed the
memory allowance). ``--lock FILE`` takes an exclusive ``flock`` on FILE around each solve so
that benchmarks of people sharing the machine do not overlap. Every run records the 1, 5
and 15 min load averages before and after it. Results are written after each run (JSON list
of runs plus a per-cell summary) and as a Markdown table next to the JSON.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import platform
import shlex
import statistics
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from carbonsched.plan.bench import format_gap, git_commit, run_plan_benchmark

CELLS = {  # (jobs, load): (time limit [s], gap target [-])
    (10000, 0.3): (20.0, 0.005),
    (10000, 0.6): (60.0, 0.01),
    (10000, 0.8): (60.0, 0.01),
    (1000, 0.6): (60.0, 0.01),
    (50000, 0.3): (300.0, 0.01),
}


OTHER_TARGETS = {  # (jobs, hours, time limit [s]): gap target [-] (issue 36)
    (10000, 48, 60.0): 0.005,
    (10000, 72, 60.0): 0.01,
}


def cell_target(jobs: int, load: float, hours: int, limit_s: float) -> float:
    """Gap target of a cell run on ``hours`` slots with ``limit_s`` (module docstring). [-]"""
    own_target = CELLS[(jobs, load)][1]
    other = OTHER_TARGETS.get((jobs, hours, float(limit_s)))
    if other is None:
        return own_target
    return min(own_target, other) if hours == 48 else other


def _key(r: dict) -> tuple:
    """(jobs, load, hours, limit) of a run; older runs without the last two: 48 h, own limit."""
    return (r["jobs"], r["load"], r.get("hours", 48),
            float(r.get("time_limit_s") or CELLS[(r["jobs"], r["load"])][0]))


@contextmanager
def _locked(path: Path | None):
    if path is None:
        yield
        return
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def summarise(runs: list[dict]) -> list[dict]:
    """Median and worst time and gap per cell, and whether the target holds for the worst."""
    out = []
    keys = sorted({_key(r) for r in runs}, key=lambda k: (k[2], k[3], k[0], k[1]))
    for jobs, load, hours, limit in keys:
        target = cell_target(jobs, load, hours, limit)
        rs = [r for r in runs if _key(r) == (jobs, load, hours, limit)]
        secs = [r["seconds"] for r in rs if r.get("seconds") is not None]
        gaps = [r["mip_gap"] if r.get("mip_gap") is not None else float("inf") for r in rs]
        refs = [r["reference"] for r in rs if r.get("reference")]
        ref_gaps = [x["mip_gap"] for x in refs if x.get("mip_gap") is not None]
        timed = bool(secs) and len(secs) == len(rs)     # every run recorded its time
        out.append({
            "jobs": jobs, "load": load, "hours": hours, "time_limit_s": limit,
            "gap_target": target,
            "seeds": [r["seed"] for r in rs],
            "seconds_median": statistics.median(secs) if secs else None,
            "seconds_worst": max(secs) if secs else None,
            "gap_median": statistics.median(gaps), "gap_worst": max(gaps),
            # the "<= 60 s" / "<= 5 min": no grace over the limit
            "gap_met": max(gaps) <= target + 1e-12,
            "timed": timed,
            "time_met": timed and max(secs) <= limit,
            "reference_runs": len(refs),
            "reference_statuses": [x.get("status") for x in refs],
            "reference_gap_median": statistics.median(ref_gaps) if ref_gaps else None,
            "load_average_1m": [r["machine"]["load_average_1m"] for r in rs],
        })
        out[-1]["target_met"] = out[-1]["gap_met"] and out[-1]["time_met"]
    return out


def _met(c: dict) -> str:
    """``yes``, or ``no`` with what failed: the worst seed's gap, its time, or both."""
    if c["target_met"]:
        return "yes"
    why = [w for w, ok in (("gap", c["gap_met"]),
                           ("time" if c["timed"] else "no time recorded", c["time_met"]))
           if not ok]
    return f"no ({', '.join(why)})"


def _s(v) -> str:
    return "—" if v is None else f"{v:.2f}"


def write_markdown(runs: list[dict], summary: list[dict], path: Path, commit: str,
                   command: str) -> None:
    """Per-cell summary and per-run table; ``command`` is the command line that ran them."""
    lines = [
        "# Planner matrix", "",
        f"Commit `{commit}`, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, HiGHS via highspy, one solver thread. Command: "
        f"`{command}`. Gap = (objective − proven bound) / objective.", "",
        "| cell | limit | target | seeds | s median | s worst | gap median | gap worst | "
        "target met | reference (statuses, median gap) | load avg 1m per run |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in summary:
        lines.append(
            f"| {c['jobs']} × 16 × {c['hours']} @ {c['load']} | {c['time_limit_s']:.0f} s | "
            f"{format_gap(c['gap_target'])} | {len(c['seeds'])} | {_s(c['seconds_median'])} | "
            f"{_s(c['seconds_worst'])} | {format_gap(c['gap_median'])} | "
            f"{format_gap(c['gap_worst'])} | "
            f"{_met(c)} | "
            f"{', '.join(map(str, c['reference_statuses'])) or 'not run'}; "
            f"{format_gap(c['reference_gap_median'])} | "
            f"{', '.join(str(x) for x in c['load_average_1m'])} |")
    lines += ["", "| jobs | load | hours | limit | seed | s | gap | status | objective | bound | "
              "ref s | ref status | ref gap | ref objective | load avg before → after |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        ref = r.get("reference") or {}
        m = r["machine"]
        obj = r.get("objective")
        bnd = r.get("bound")
        robj = ref.get("objective")
        lines.append(
            f"| {r['jobs']} | {r['load']} | {r.get('hours', 48)} | "
            f"{_key(r)[3]:.0f} s | {r['seed']} | {_s(r.get('seconds'))} | "
            f"{format_gap(r.get('mip_gap'))} | {r.get('status')} | "
            f"{'—' if obj is None else f'{obj:.2f}'} | {'—' if bnd is None else f'{bnd:.2f}'} | "
            f"{_s(ref.get('seconds'))} | {ref.get('status', 'not run')} | "
            f"{format_gap(ref.get('mip_gap'))} | {'—' if robj is None else f'{robj:.2f}'} | "
            f"{m.get('load_average_before')} → {m.get('load_average_after')} |")
    path.write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", nargs="+", default=[f"{j}:{f}" for j, f in CELLS],
                    help="jobs:load pairs, e.g. 10000:0.6")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--reference-seeds", type=int, nargs="*", default=None,
                    help="seeds that also run the reference model (default: all)")
    ap.add_argument("--reference-max-jobs", type=int, default=10000)
    ap.add_argument("--hours", type=int, default=48, help="horizon [h] (hourly slots)")
    ap.add_argument("--limit", type=float, default=None,
                    help="time limit of every cell [s] (default: each cell's own)")
    ap.add_argument("--lock", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=Path("bench/results/plan_matrix.json"))
    args = ap.parse_args()
    doc = json.loads(args.out.read_text()) if args.out.exists() else {"runs": []}
    runs = doc["runs"]
    commit = git_commit()
    for cell in args.cells:
        jobs_s, load_s = cell.split(":")
        jobs, load = int(jobs_s), float(load_s)
        if (jobs, load) not in CELLS:
            known = ", ".join(f"{j}:{f}" for j, f in CELLS)
            raise SystemExit(f"unknown cell {cell}; cells: {known}")
        limit = CELLS[(jobs, load)][0] if args.limit is None else args.limit
        target = cell_target(jobs, load, args.hours, limit)
        for seed in args.seeds:
            ref = (jobs <= args.reference_max_jobs
                   and (args.reference_seeds is None or seed in args.reference_seeds))
            with _locked(args.lock):
                row = run_plan_benchmark(jobs, 16, args.hours, load=load, seed=seed,
                                         reference=ref, time_limit_s=limit, mip_gap=target)
            row.update(commit=commit, hours=args.hours, time_limit_s=float(limit))
            runs = [r for r in runs if not (_key(r) == _key(row)
                                            and r["seed"] == seed)] + [row]
            summary = summarise(runs)
            args.out.write_text(json.dumps({"runs": runs, "summary": summary}, indent=1,
                                           default=float))
            write_markdown(runs, summary, args.out.with_suffix(".md"), commit,
                           "python bench/plan_matrix.py " + shlex.join(sys.argv[1:]))
            print(time.strftime("%H:%M:%S"), jobs, load, args.hours, limit, seed,
                  row.get("status"),
                  row.get("seconds"), row.get("mip_gap"),
                  (row.get("reference") or {}).get("status"), row["machine"], flush=True)


if __name__ == "__main__":
    main()
