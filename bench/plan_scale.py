"""Planner scale benchmark: real-trace instances, planner vs the straightforward PuLP model.

Run (one thread per solver; the machine has 2 cores)::

    python bench/plan_scale.py --out bench/results/plan_scale.json            # full matrix
    python bench/plan_scale.py --jobs 10000 --sites 16 --hours 48 --loads 0.3 \\
        --reference --out bench/results/plan_scale.json                       # one cell

The full matrix is 1k / 10k / 50k jobs × 8 / 16 sites × 24 / 48 h at loads 0.3 and 0.6, with
the reference model for instances up to ``--reference-max-jobs`` jobs (the reference needs
one PuLP variable per feasible option: about 9 million at 50k × 16 × 48). Results are
appended cell by cell to the JSON file (a list), and a Markdown table is written next to it.
Time limits: 60 s up to 10k jobs, 300 s for 50k (issue 4's stretch goal).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

from carbonsched.plan.bench import run_plan_benchmark


def _fmt(v, nd=2):
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.{nd}f}"
    return str(v)


def write_markdown(rows: list[dict], path: Path) -> None:
    rows = sorted(rows, key=lambda r: (r["jobs"], r["sites"], r["hours"], r["load"]))
    lines = [
        "# Planner scale benchmark",
        "",
        f"Machine: {os.cpu_count()} cores (shared), Python {platform.python_version()}, "
        "HiGHS 1.16 via highspy, one solver thread. Instances from the real traces "
        "(GAIA PAI arrivals and lengths, Alibaba GPU v2023 gang sizes and GPU models) and "
        "Electricity Maps 2023 hourly CI of the first S of 16 zones (see "
        "`carbonsched/plan/instances.py`). `gap` = (objective − bound) / objective with the "
        "bound proven by the solver (reference) or by the full LP / Lagrangian dual "
        "(planner). `machine load` = 1-minute load average when the cell finished (other "
        "engineers shared the 2 cores). Cells were appended by separate invocations of "
        "`python bench/plan_scale.py --jobs N --sites S --hours H --loads F [--reference] "
        "--out bench/results/plan_scale.json`; time limit 60 s up to 10k jobs, 300 s at 50k.",
        "",
        "| jobs | sites | hours | work load | planner s | gap | status | peak MB | "
        "reference s | ref gap | ref status | ref peak MB | s ratio | mem ratio | "
        "objective ratio | machine load | date |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ref = r.get("reference") or {}
        rat = r.get("ratios") or {}
        lines.append(
            f"| {r['jobs']} | {r['sites']} | {r['hours']} | {r['load']} | "
            f"{_fmt(r.get('seconds'), 1)} | {_fmt(r.get('mip_gap'), 4)} | {r.get('status')} | "
            f"{_fmt(r.get('peak_memory_mb'), 0)} | {_fmt(ref.get('seconds'), 1)} | "
            f"{_fmt(ref.get('mip_gap'), 4)} | {ref.get('status', 'not run')} | "
            f"{_fmt(ref.get('peak_memory_mb'), 0)} | {_fmt(rat.get('seconds'))} | "
            f"{_fmt(rat.get('peak_memory_mb'))} | {_fmt(rat.get('objective'), 3)} | "
            f"{r['machine']['load_average_1m']} | {r['machine']['date_utc']} |")
    lines += ["", "Notes per cell (planner, then reference):", ""]
    for r in rows:
        ref = r.get("reference") or {}
        lines.append(f"- {r['jobs']}×{r['sites']}×{r['hours']} @ {r['load']}: "
                     f"{r.get('note', '')} / {ref.get('note', 'not run')}")
    path.write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, nargs="+", default=[1000, 10000, 50000])
    ap.add_argument("--sites", type=int, nargs="+", default=[8, 16])
    ap.add_argument("--hours", type=int, nargs="+", default=[24, 48])
    ap.add_argument("--loads", type=float, nargs="+", default=[0.3, 0.6])
    ap.add_argument("--reference", action="store_true", default=False)
    ap.add_argument("--reference-max-jobs", type=int, default=10000)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("bench/results/plan_scale.json"))
    args = ap.parse_args()
    rows = json.loads(args.out.read_text()) if args.out.exists() else []
    for jobs in args.jobs:
        for sites in args.sites:
            for hours in args.hours:
                for load in args.loads:
                    limit = 60.0 if jobs <= 10000 else 300.0
                    reps = []
                    for _ in range(args.repeats):
                        reps.append(run_plan_benchmark(
                            jobs, sites, hours, load=load, seed=args.seed,
                            reference=args.reference and jobs <= args.reference_max_jobs,
                            time_limit_s=limit))
                    row = reps[0]
                    if len(reps) > 1:   # medians of the repeated measurements
                        for k in ("seconds", "build_seconds", "solve_seconds",
                                  "peak_memory_mb", "mip_gap"):
                            vals = [r[k] for r in reps if r.get(k) is not None]
                            row[k] = statistics.median(vals) if vals else None
                        row["repeats"] = len(reps)
                    rows.append(row)
                    args.out.write_text(json.dumps(rows, indent=1, default=float))
                    write_markdown(rows, args.out.with_suffix(".md"))
                    print(time.strftime("%H:%M:%S"), jobs, sites, hours, load,
                          row.get("status"), row.get("seconds"), row.get("mip_gap"),
                          (row.get("reference") or {}).get("status"), flush=True)


if __name__ == "__main__":
    main()
