"""Skill of the daily path's carbon-intensity forecast issued at 00:00, 06:00, 12:00 and 18:00 UTC.

For one site of a catalog, a forecast of 24 hours is issued every day of ``--from``..``--to``
at each of the four hours through :func:`carbonsched.pipeline.daily.select_forecast` (the model
choice of the issue's refit period, fitted on the history from ``--history-from`` strictly
before the period start; conditioned on the history before the issue) and scored against the
actual values, next to seasonal naive (the same hour the day before): MAPE [%] and skill
``1 - MAPE / MAPE_naive`` per issue hour, and the models used. Issue 35 item 1: on main the
00:00 fits were applied unchanged at the other hours.

Run (repository root, about a minute per site)::

    python bench/forecast_issue_hours.py --catalog global --site jp-tk-tokyo \\
        --history-from 2023-01-01 --from 2023-06-05 --to 2023-06-18
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd

from carbonsched.adapters.signals import load_site_signals
from carbonsched.catalog import load_catalog
from carbonsched.pipeline.daily import select_forecast

HOUR = pd.Timedelta(hours=1)
CI = "carbon_intensity_g_per_kwh"


def _mape(f: np.ndarray, a: np.ndarray) -> float:
    ok = np.isfinite(a) & np.isfinite(f) & (np.abs(a) > 1e-9)
    return float(100 * np.mean(np.abs(f[ok] - a[ok]) / np.abs(a[ok])))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--catalog", default="global")
    p.add_argument("--site", required=True)
    p.add_argument("--history-from", required=True)
    p.add_argument("--from", dest="start", required=True)
    p.add_argument("--to", dest="end", required=True)
    p.add_argument("--data-dir", default=os.environ.get("CARBONSCHED_SHARED_DATA",
                                                         "../shared/data"))
    p.add_argument("--out", type=Path)
    a = p.parse_args()
    site = load_catalog(a.catalog).site(a.site)
    end = pd.Timestamp(a.end, tz="UTC") + pd.Timedelta(days=2)
    frame, _ = load_site_signals(site, Path(a.data_dir), pd.Timestamp(a.history_from, tz="UTC"),
                                 end)
    y = frame[CI]
    days = pd.date_range(a.start, a.end, freq="D", tz="UTC")
    cache: dict = {}
    out = {}
    for hour in (0, 6, 12, 18):
        f, act, nv, models = [], [], [], set()
        for d in days:
            t = d + hour * HOUR
            fc, info, _ = select_forecast(site, CI, y[y.index < t], t, 24, cache)
            models.add(info["model"])
            ts = pd.date_range(t, periods=24, freq="h")
            f.append(fc["mean"].to_numpy(float))
            act.append(y.reindex(ts).to_numpy(float))
            nv.append(y.reindex(ts - 24 * HOUR).to_numpy(float))
        f_, a_, n_ = (np.concatenate(x) for x in (f, act, nv))
        m, mn = _mape(f_, a_), _mape(n_, a_)
        out[f"{hour:02d}:00"] = {"mape_pct": round(m, 3), "naive_mape_pct": round(mn, 3),
                                 "skill": round(1 - m / mn, 4), "models": sorted(models)}
        print(f"{hour:02d}:00 UTC  MAPE {m:6.2f} %  naive {mn:6.2f} %  skill {1 - m / mn:+.3f}  "
              f"{sorted(models)}", flush=True)
    if a.out:
        a.out.write_text(json.dumps({"site": a.site, "from": a.start, "to": a.end,
                                     "history_from": a.history_from, "by_issue_hour": out},
                                    indent=2))


if __name__ == "__main__":
    main()
