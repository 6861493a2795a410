"""Time the daily plan's forecasting stage: first run (models chosen and fitted) and cached.

Runs :func:`carbonsched.pipeline.daily.gather_forecasts` (load each site's signals, then
:func:`~carbonsched.pipeline.daily.forecast_site`) twice in one process for the same issue time;
the second run reuses the fitted model choices of the refit period (the process cache), as
the service and a second plan of the same week do. Loading is timed apart from forecasting.

Usage (project root)::

    flock /work/bench.lock python bench/forecast_stage.py --catalog global --date 2023-07-13 \
        --data-dir ../shared/data --out bench/results/forecast_stage.json
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import pandas as pd

from carbonsched.adapters.signals import load_site_signals
from carbonsched.catalog import load_catalog
from carbonsched.pipeline.daily import gather_forecasts
from carbonsched.timeaxis import day_start_utc


def main() -> None:
    """Parse the arguments, time two runs, print and write the JSON."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--catalog", default="global")
    ap.add_argument("--date", default="2023-07-13")
    ap.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    ap.add_argument("--hours", type=int, default=24)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    cat = load_catalog(a.catalog)
    issued = day_start_utc(a.date)
    timings: dict[str, float] = {}
    load_s = 0.0

    def timed_loader(site, data_dir, start, end):  # noqa: ANN001, ANN202 - loader contract
        nonlocal load_s
        t = time.perf_counter()
        out = load_site_signals(site, data_dir, start, end)
        load_s += time.perf_counter() - t
        return out

    models = {}
    for run in ("first_run", "cached"):
        load_s = 0.0
        t0 = time.perf_counter()
        fc, notes, _ = gather_forecasts(cat, a.data_dir, issued, a.hours, loader=timed_loader)
        total = time.perf_counter() - t0
        timings[f"{run}_total_s"] = round(total, 2)
        timings[f"{run}_loading_s"] = round(load_s, 2)
        timings[f"{run}_forecasting_s"] = round(total - load_s, 2)
        models = {sid: {sig: m["model"] for sig, m in f.models.items()} for sid, f in fc.items()}
    res = {"catalog": cat.name, "issued_at": issued.isoformat(), "horizon_hours": a.hours,
           "sites": len(models), **timings, "models": models,
           "load_average": os.getloadavg(), "measured_at": pd.Timestamp.now("UTC").isoformat()}
    print(json.dumps(res, indent=1))
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
