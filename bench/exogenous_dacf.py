"""The daily path's carbon-intensity forecast with and without archived exogenous forecasts.

On a DACF region (``../shared/data/dacf/<R>.csv``: CI from the mix with the paper's factors, NCEP
GFS day-ahead weather and, for CISO and SE, the published operator wind/solar forecasts, each
published 24 h before its hour), a 24-hour forecast is issued at 00:00 UTC every day of
``--from``..``--to`` through :func:`carbonsched.pipeline.daily.select_forecast` (the model
choice of the refit period, fitted on the year before it), once history only and once with the
exogenous table (:func:`carbonsched.forecasts.exogenous.from_dacf_region`); MAPE [%] against
the actual CI, seasonal naive's (same hour the day before) and the models chosen. Issue 35
item 3.

Run (repository root, a few minutes per region-month on 2 shared cores)::

    python bench/exogenous_dacf.py --regions CISO,ERCO --from 2021-07-05 --to 2021-08-01
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from carbonsched.adapters.signals.dacf import direct_ci_from_mix, read_dacf_region
from carbonsched.catalog import load_catalog
from carbonsched.forecasts.exogenous import from_dacf_region
from carbonsched.pipeline.daily import select_forecast

HOUR = pd.Timedelta(hours=1)
CI = "carbon_intensity_g_per_kwh"
SITES = {"CISO": "us-ciso-sanjose", "ERCO": "us-erco-dallas"}


def _mape(f: np.ndarray, a: np.ndarray) -> float:
    ok = np.isfinite(a) & np.isfinite(f) & (np.abs(a) > 1e-9)
    return float(100 * np.mean(np.abs(f[ok] - a[ok]) / np.abs(a[ok])))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--regions", default="CISO,ERCO")
    p.add_argument("--from", dest="start", required=True)
    p.add_argument("--to", dest="end", required=True)
    p.add_argument("--data-dir", default=os.environ.get("CARBONSCHED_SHARED_DATA",
                                                         "../shared/data"))
    p.add_argument("--out", type=Path)
    a = p.parse_args()
    cat = load_catalog("us-2022")
    out: dict = {"from": a.start, "to": a.end, "issue": "00:00 UTC daily, 24 h", "regions": {}}
    for region in a.regions.split(","):
        frame, _ = read_dacf_region(Path(a.data_dir) / "dacf" / f"{region}.csv")
        y = direct_ci_from_mix(frame)
        table = from_dacf_region(frame, region)
        site = cat.site(SITES[region])
        days = pd.date_range(pd.Timestamp(a.start, tz="UTC"), pd.Timestamp(a.end, tz="UTC"))
        res: dict = {}
        for mode, exog in (("history only", None), ("with exogenous", table)):
            cache: dict = {}
            f, act, nv, models = [], [], [], Counter()
            t0 = time.perf_counter()
            for d in days:
                fc, info, _ = select_forecast(site, CI, y[y.index < d], d, 24, cache,
                                              exog=None if exog is None
                                              else exog[exog["issued_at"] <= d])
                ts = pd.date_range(d, periods=24, freq="h")
                f.append(fc["mean"].to_numpy(float))
                act.append(y.reindex(ts).to_numpy(float))
                nv.append(y.reindex(ts - 24 * HOUR).to_numpy(float))
                models[info["model"]] += 1
            fa, aa, na = np.concatenate(f), np.concatenate(act), np.concatenate(nv)
            m, mn = _mape(fa, aa), _mape(na, aa)
            res[mode] = {"mape_pct": round(m, 3), "naive_mape_pct": round(mn, 3),
                         "skill": round(1 - m / mn, 4), "models": dict(models.most_common()),
                         "seconds": round(time.perf_counter() - t0, 1)}
            print(region, mode, res[mode], flush=True)
        res["features"] = sorted(set(table["feature"]))
        res["caveat"] = table.attrs.get("caveat")
        out["regions"][region] = res
    text = json.dumps(out, indent=1)
    if a.out:
        a.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
