"""Tenants' fair shares on a binding-load day of the ``global`` catalog (issue 37 item 3).

Run (one solver thread; the machine has 2 cores)::

    python bench/fair_shares.py --date 2023-07-15 --scale 3 --out bench/results/fair_shares.json

The catalog's demo day for ``--date`` (jobs of seven tenants, one per user area, as the demo
names them; the catalog's ``[tenants]`` give them unequal weights and three of them quotas) is
repeated ``--scale`` times (copies with new ids), so that the GPUs bind: the carbon-only plan
cannot place every job. The day is then planned through the daily pipeline with
``fairness = 1`` (strict weighted DRF; :mod:`carbonsched.plan.fairness`), which solves the
carbon-only plan first and reports the carbon cost of fairness against it.

Reported per tenant: weight, GPU-hours asked and placed, dominant share and its weighted-DRF
target, the relative deviation ``|share - target| / target``, quota met. Targets of the issue:
every tenant with demand within 5 % of its target, every quota met, carbon cost of fairness at
most 3 % of the carbon-only plan's emissions.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import time
from datetime import UTC, datetime
from pathlib import Path

from carbonsched.catalog import load_catalog
from carbonsched.domain import Workload
from carbonsched.pipeline.daily import run_daily_plan
from carbonsched.workload.files import demo_workload


def scaled_demo(catalog: str, date: str, scale: int) -> Workload:
    """The catalog's demo day repeated ``scale`` times (job ids suffixed ``-c<k>``)."""
    wl = demo_workload(load_catalog(catalog), date)
    jobs = [dataclasses.replace(j, id=f"{j.id}-c{k}") if k else j
            for k in range(scale) for j in wl.jobs]
    return Workload(jobs, list(wl.inference))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--date", default="2023-07-15")
    ap.add_argument("--catalog", default="global")
    ap.add_argument("--scale", type=int, default=3)
    ap.add_argument("--fairness", type=float, default=1.0)
    ap.add_argument("--time-limit", type=float, default=120.0)
    ap.add_argument("--data-dir", type=Path,
                    default=Path(os.environ.get("CARBONSCHED_SHARED_DATA", "../shared/data")))
    ap.add_argument("--out", type=Path, default=Path("bench/results/fair_shares.json"))
    args = ap.parse_args()
    wl = scaled_demo(args.catalog, args.date, args.scale)
    t0 = time.perf_counter()
    daily = run_daily_plan(args.date, args.catalog, workload=wl, data_dir=args.data_dir,
                           time_limit_s=args.time_limit, fairness=args.fairness)
    seconds = time.perf_counter() - t0
    doc = daily.document
    tot = doc["totals"]
    rows = []
    for r in doc.get("tenants", []):
        dev = (abs(r["dominant_share"] - r["target_share"]) / r["target_share"]
               if r["target_share"] > 0 else None)
        rows.append({**r, "deviation": dev})
    base = tot.get("carbon_only_emissions_kg") or 0.0
    cost = tot.get("fairness_cost_kg")
    out = {
        "date_utc": datetime.now(UTC).strftime("%Y-%m-%d %H:%M"),
        "machine": f"{os.cpu_count()} cores (shared), Python {platform.python_version()}, "
                   f"load {os.getloadavg()[0]:.1f}",
        "args": {k: str(v) for k, v in vars(args).items()},
        "jobs": len(wl.jobs), "placed": len(doc["placements"]),
        "unplaced": len(doc["unplaced"]), "seconds": round(seconds, 1),
        "solver": {k: doc["solver"][k] for k in ("status", "method", "mip_gap", "seconds")},
        "tenants": rows,
        "max_deviation": max((r["deviation"] for r in rows if r["deviation"] is not None),
                             default=None),
        "quotas_met": all(r["quota_met"] is not False for r in rows),
        "emissions_kg": tot["emissions_kg"], "carbon_only_emissions_kg": base,
        "fairness_cost_kg": cost,
        "fairness_cost_pct": 100.0 * cost / base if cost is not None and base else None,
        "notes": [n for n in doc["notes"] if n.startswith(("fairness", "domains"))],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({k: v for k, v in out.items() if k != "tenants"}, indent=1))
    for r in rows:
        dev = "-" if r["deviation"] is None else f"{100 * r['deviation']:.1f}%"
        print(f"{r['tenant']:<12} w {r['weight']:<4g} asked {r['demand_gpu_hours']:>8.1f} "
              f"placed {r['placed_gpu_hours']:>8.1f} share {r['dominant_share']:.4f} "
              f"target {r['target_share']:.4f} dev {dev:>6} quota {r['quota_met']}")


if __name__ == "__main__":
    main()
