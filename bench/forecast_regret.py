"""Start regret and MAPE of the carbon-intensity forecast: the combination vs the choice by MAPE.

For each ``site:YYYY-MM`` of the ``global`` catalog (Electricity Maps 2023 hourly data), a
forecast is issued at 00:00 UTC of every day of the month for ``--horizon-hours`` (72) leads,
exactly as the daily path does (:func:`carbonsched.pipeline.daily.select_forecast`: the model
choice of the issue's weekly refit period, fitted on up to a year of history strictly before the
period start, conditioned on the history before the issue). Four forecasts side by side:

* ``combination`` — :class:`~carbonsched.forecasts.registry.SelectedForecaster` as shipped
  (carbon intensity: the fixed equal-weight combination, ``COMBINATION_NOTE``);
* ``mape-choice`` — the same with ``combine=False``: the candidate or top-two ensemble with the
  lowest validation MAPE (the rule before this change);
* ``ci-lead-ols`` and ``seasonal-naive-24h`` alone (same refit schedule), as references.

Scores on the actual values: the start regret (:func:`carbonsched.forecasts.decision.
start_regret`; 1- and 3-hour jobs arriving at every hour of the first day, waiting up to
``--wait-hours``), pooled over the month, and the MAPE of the first 24 leads.

Run (repository root; about 1-2 minutes per site-month on one core)::

    export CARBONSCHED_SHARED_DATA=../shared/data
    python bench/forecast_regret.py --out bench/results/forecast_regret.json \\
        de-frankfurt:2023-07 gb-london:2023-02 ...
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from carbonsched.adapters.signals import load_site_signals
from carbonsched.catalog import load_catalog
from carbonsched.forecasts.baselines import SeasonalNaive
from carbonsched.forecasts.carbon_intensity import LeadRegression
from carbonsched.forecasts.decision import start_regret
from carbonsched.forecasts.registry import DEFAULT_SCHEDULE, SelectedForecaster

CI = "carbon_intensity_g_per_kwh"
MODES = ("combination", "mape-choice", "ci-lead-ols", "seasonal-naive-24h")


def _make(mode: str, tz: str, horizon: int) -> Any:
    if mode == "combination":
        return SelectedForecaster(CI, tz=tz, horizon_hours=horizon)
    if mode == "mape-choice":
        return SelectedForecaster(CI, tz=tz, horizon_hours=horizon, combine=False)
    if mode == "ci-lead-ols":
        return LeadRegression(tz=tz)
    return SeasonalNaive(24, tz=tz)


def site_month(site_id: str, month: str, data_dir: Path, horizon: int, wait: int
               ) -> dict[str, Any]:
    """Scores of every mode on one site-month (module docstring)."""
    cat = load_catalog("global")
    site = cat.site(site_id)
    m0 = pd.Timestamp(f"{month}-01", tz="UTC")
    m1 = m0 + pd.offsets.MonthBegin(1)
    frame, _ = load_site_signals(site, data_dir, m0 - pd.Timedelta(days=DEFAULT_SCHEDULE.load_days),
                                 m1 + pd.Timedelta(hours=horizon))
    y = frame[CI]
    issues = pd.date_range(m0, m1 - pd.Timedelta(days=1), freq="D")
    ts = issues.repeat(horizon) + pd.to_timedelta(np.tile(np.arange(horizon), len(issues)), "h")
    actual = y.reindex(ts).to_numpy(float).reshape(len(issues), horizon)
    out: dict[str, Any] = {"site": site_id, "zone": site.zone, "month": month, "modes": {}}
    for mode in MODES:
        fc = np.empty_like(actual)
        models: dict[str, int] = {}
        fitted: dict[pd.Timestamp, Any] = {}
        for i, t in enumerate(issues):
            period = DEFAULT_SCHEDULE.period_start(t)
            if period not in fitted:
                y_fit = y[(y.index < period)
                          & (y.index >= period - pd.Timedelta(days=DEFAULT_SCHEDULE.history_days))]
                fitted = {period: _make(mode, site.timezone, horizon).fit(y_fit)}
            p = fitted[period].predict(t, horizon, y=y[y.index < t])
            fc[i] = p["mean"].to_numpy(float)
            name = p.attrs.get("model", mode)
            models[name] = models.get(name, 0) + 1
        excess, ideal = start_regret(fc, actual, wait_hours=wait)
        with np.errstate(invalid="ignore", divide="ignore"):
            ape = np.abs(fc[:, :24] - actual[:, :24]) / np.abs(actual[:, :24])
        ok = np.isfinite(ape) & (np.abs(actual[:, :24]) > 1e-9)
        out["modes"][mode] = {"regret_excess": excess, "regret_ideal": ideal,
                              "regret_pct": round(100 * excess / ideal, 3),
                              "mape_24h_pct": round(100 * float(ape[ok].mean()), 3),
                              "models": models}
    return out


def markdown(rows: list[dict[str, Any]]) -> str:
    """A table: start regret (and MAPE) per site-month and mode, and the pooled means."""
    head = "| site | month | " + " | ".join(f"{m} regret % (MAPE %)" for m in MODES) + " |"
    lines = [head, "|" + "---|" * (2 + len(MODES))]
    for r in rows:
        cells = [f"{r['modes'][m]['regret_pct']:.2f} ({r['modes'][m]['mape_24h_pct']:.1f})"
                 for m in MODES]
        lines.append(f"| {r['site']} | {r['month']} | " + " | ".join(cells) + " |")
    mean = [np.mean([r["modes"][m]["regret_pct"] for r in rows]) for m in MODES]
    mape = [np.mean([r["modes"][m]["mape_24h_pct"] for r in rows]) for m in MODES]
    lines.append("| **mean** | | " + " | ".join(f"**{a:.2f}** ({b:.1f})"
                                                 for a, b in zip(mean, mape, strict=True)) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("site_months", nargs="+", help="site:YYYY-MM of the global catalog")
    ap.add_argument("--data-dir", default=os.environ.get("CARBONSCHED_SHARED_DATA",
                                                         "../shared/data"))
    ap.add_argument("--horizon-hours", type=int, default=72)
    ap.add_argument("--wait-hours", type=int, default=24)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    rows = []
    for k, sm in enumerate(a.site_months, 1):
        site_id, month = sm.split(":")
        rows.append(site_month(site_id, month, Path(a.data_dir), a.horizon_hours,
                               a.wait_hours))
        r = rows[-1]["modes"]
        print(f"{k}/{len(a.site_months)} {sm}: " + ", ".join(
            f"{m} {r[m]['regret_pct']:.2f} %" for m in MODES), file=sys.stderr, flush=True)
    res = {"site_months": rows, "horizon_hours": a.horizon_hours, "wait_hours": a.wait_hours,
           "seconds": round(time.perf_counter() - t0, 1), "machine": platform.platform(),
           "load_average": os.getloadavg()}
    Path(a.out).write_text(json.dumps(res, indent=1))
    Path(a.out).with_suffix(".md").write_text(markdown(rows) + "\n")
    print(markdown(rows))


if __name__ == "__main__":
    main()
