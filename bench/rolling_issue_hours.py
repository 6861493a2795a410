"""Which issues' forecasts serve a 6-hourly rolling plan: fresh, held or the lagged ensemble.

A diagnostic of the zone-month replays (BENCHMARKS 7c). The PAI jobs of
:mod:`rolling_zone_months` on one ``global`` site per zone, replayed every ``--every`` hours by
:func:`carbonsched.evaluate.replay_jobs.run_jobs_replay` (``agnostic``, ``milp``, ``oracle``),
with ``milp``'s carbon-intensity forecast made one of these ways (``--modes``):

* ``fresh`` — the product's: the forecast issued at the run;
* ``lagged`` — the time-lagged ensemble (lagged average forecasting, Hoffman & Kalnay, *Tellus
  A* 35(2), 1983): the mean, target hour by target hour, of the forecasts the runs of the day
  before made (this run's and up to three earlier ones at 6 h; fewer at the first runs);
* ``hold:H`` — the forecast issued at the latest ``H``:00 UTC at or before the run (the first
  run's before the first ``H``:00), over the horizon plus 18 h, held for the runs until the
  next ``H``:00: the planner re-plans every 6 h on one forecast a day, so the modes differ only
  in the issue hour whose forecast is acted on.

The script substitutes the replay's forecast function (``replay_jobs.forecast_site``) for the
other modes; the product's code is unchanged. Command (BENCHMARKS 7c)::

    python bench/rolling_issue_hours.py --sites ca-on-toronto,de-frankfurt \\
        --months 2023-07,2023-01 --modes fresh,lagged,hold:0,hold:6,hold:12,hold:18 \\
        --out bench/results/rolling_issue_hours.json
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd

import carbonsched.evaluate.replay_jobs as replay_jobs
from carbonsched.workload.files import it_power_per_gpu_kw

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import rolling_zone_months as rzm  # noqa: E402

POLICIES = ("agnostic", "milp", "oracle")
PRODUCT_FORECAST = replay_jobs.forecast_site


def forecaster(mode: str):
    """The forecast function the replay calls for ``mode`` (see the module doc)."""
    if mode == "fresh":
        return PRODUCT_FORECAST
    if mode == "lagged":
        members: dict[str, list[pd.Series]] = {}

        def lagged(site, hist, t, h, meta, **kw: Any):
            fc = PRODUCT_FORECAST(site, hist, t, h, meta, **kw)
            ci = fc.signals["carbon_intensity_g_per_kwh"]
            kept = [m for m in members.get(site.id, []) if m.index[0] > t - pd.Timedelta(
                hours=24)]
            members[site.id] = [*kept, ci.copy()]
            stack = pd.concat(members[site.id], axis=1, sort=True).reindex(ci.index)
            fc.signals["carbon_intensity_g_per_kwh"] = stack.mean(axis=1).to_numpy()
            return fc

        return lagged
    if not mode.startswith("hold:"):
        raise ValueError(f"--modes entry {mode!r}: use fresh, lagged or hold:H (H in 0..23)")
    tail = mode.split(":", 1)[1]
    if not tail.isdigit() or not 0 <= int(tail) <= 23:
        raise ValueError(f"--modes entry {mode!r}: the held issue hour must be in 0..23")
    hour = int(tail)
    held: dict[str, Any] = {}

    def hold(site, hist, t, h, meta, **kw: Any):
        if t.hour == hour or site.id not in held:
            # 18 h more than the horizon, so the three runs it is held for are covered
            held[site.id] = PRODUCT_FORECAST(site, hist, t, h + 18, meta, **kw)
        fc = copy.copy(held[site.id])
        fc.signals = fc.signals[fc.signals.index >= t].iloc[:h]
        return fc

    return hold


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run every (site, month, mode) and write ``--out``; returns what was written."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sites", required=True, help="Comma-separated 'global' sites.")
    ap.add_argument("--months", required=True, help="Comma-separated months YYYY-MM.")
    ap.add_argument("--days", type=int, default=7, help="First N days of each month.")
    ap.add_argument("--every", type=int, default=6, help="Run interval [h].")
    ap.add_argument("--modes", default="fresh,lagged,hold:0,hold:6,hold:12,hold:18")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    data_dir = Path(os.environ.get("CARBONSCHED_SHARED_DATA", HERE.parent.parent / "shared"
                                   / "data"))
    rr = rzm._rolling_replay()
    modes = [m for m in args.modes.split(",") if m]
    try:
        for m in modes:
            forecaster(m)
        windows = [(m, *rzm.month_window(m, args.days)) for m in args.months.split(",") if m]
    except ValueError as e:
        ap.error(str(e))
    doc: dict[str, Any] = {"command": " ".join(["rolling_issue_hours.py", *(
        argv if argv is not None else sys.argv[1:])]), "every_hours": args.every,
        "load_average_before": os.getloadavg(), "rows": []}
    for month, start, end in windows:
        for s in [x for x in args.sites.split(",") if x]:
            cat, site = rr.ample_site_catalog(s, 10000)
            wl = rr.trace_jobs(data_dir, start, end, 24, site.id,
                               it_power_per_gpu_kw("A100", cat))
            row: dict[str, Any] = {"site": s, "month": month, "jobs": len(wl.jobs)}
            for mode in modes:
                replay_jobs.forecast_site = forecaster(mode)
                try:
                    t0 = time.perf_counter()
                    res = replay_jobs.run_jobs_replay(wl, cat, data_dir, policies=POLICIES,
                                                      horizon_hours=72,
                                                      run_every_hours=args.every)
                finally:
                    replay_jobs.forecast_site = PRODUCT_FORECAST
                row[mode] = rzm.cadence_result(res["policies"], time.perf_counter() - t0)
                print(f"{s} {month} {mode}: share {row[mode]['milp_share_of_oracle']}",
                      flush=True)
            doc["rows"].append(row)
            Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    doc["load_average_after"] = os.getloadavg()
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    return doc


if __name__ == "__main__":
    main()
