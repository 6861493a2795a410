"""``carbonsched backtest --dataset sites``: the daily forecasting path scored per site."""

from __future__ import annotations

import json
from pathlib import Path

from carbonsched.cli.common import err, out, status_line, table, write_json


def _pct(v: float | None, nd: int = 2) -> str:
    return "-" if v is None else f"{v:.{nd}f}"


def site_backtest(out_file: Path, catalog: str, data_dir: Path, date_from: str, date_to: str,
                  sites: str | None, forecasts_out: Path | None, executor: str, workers: int,
                  scheduler_address: str | None, every_days: int = 1,
                  horizon_hours: int = 24, against: Path | None = None,
                  exogenous: str = "none") -> None:
    """Run :func:`carbonsched.evaluate.site_backtest.run_site_backtest` and print its table."""
    from carbonsched.evaluate.site_backtest import run_site_backtest, write_forecasts_csv

    ids = [s.strip() for s in sites.split(",") if s.strip()] if sites else None
    with status_line("site backtest") as progress:
        res, forecasts = run_site_backtest(catalog, data_dir, date_from, date_to, sites=ids,
                                           executor=executor, workers=workers,
                                           scheduler_address=scheduler_address,
                                           every_days=every_days, horizon_hours=horizon_hours,
                                           progress=progress, against=against,
                                           exogenous=exogenous)
    write_json(out_file, json.loads(json.dumps(res, default=str)))
    if forecasts_out:
        write_forecasts_csv(forecasts, forecasts_out)
    t = table("site", "signal", "MAPE %", "naive MAPE %", "MAE", "skill", "cov 80", "cov 95",
              "model", title=f"Site backtest {res['from']} .. {res['to']} ({res['days']} days, "
              f"issued 00:00 UTC, {res['horizon_hours']} h, every {res['every_days']} day(s), "
              f"catalog {res['catalog']})")
    for sid, by_signal in res["sites"].items():
        for signal, r in by_signal.items():
            model = next(iter(r["models"]), "-")
            t.add_row(sid, signal, _pct(r["mape_pct"]), _pct(r["naive_mape_pct"]),
                      _pct(r["mae"], 3), _pct(r["skill"], 3) + (" (MAE)" if r["skill_basis"]
                                                                  == "mae" else ""),
                      _pct(r["coverage_80"], 3), _pct(r["coverage_95"], 3), model)
    out.print(t)
    if horizon_hours > 24:
        ci = "carbon_intensity_g_per_kwh"
        buckets = list(res["mean_skill_by_lead"].get(ci, {}))
        lt = table("site", *(f"skill {b}" for b in buckets), *(f"cov 80/95 {b}" for b in buckets),
                   title="Carbon intensity by lead")
        for sid, by_signal in res["sites"].items():
            bl = by_signal.get(ci, {}).get("by_lead", {})
            lt.add_row(sid, *(_pct(bl.get(b, {}).get("skill"), 3) for b in buckets),
                       *(f"{_pct(bl.get(b, {}).get('coverage_80'), 3)}/"
                         f"{_pct(bl.get(b, {}).get('coverage_95'), 3)}" for b in buckets))
        out.print(lt)
    if res.get("against"):
        a = res["against"]
        at = table("site", "hours", "MAPE %", "provider MAPE %", "naive MAPE %", "skill",
                   "provider skill", "unmatched h",
                   title=f"Carbon intensity vs the published forecast in {a['file']} (same "
                         f"hours; {a['rows_used']} rows used, {a['rows_unused']} unused)")
        for sid, r in a["sites"].items():
            at.add_row(sid, str(r["hours"]), _pct(r["mape_pct"]), _pct(r["provider_mape_pct"]),
                       _pct(r["naive_mape_pct"]), _pct(r["skill"], 3),
                       _pct(r["provider_skill"], 3), str(r["unmatched_hours"]))
        out.print(at)
    if res.get("surplus_brier_skill"):
        out.print("green-surplus Brier skill (surplus hour yes/no) vs seasonal naive: "
                  + ", ".join(f"{k} {_pct(v, 3)}" for k, v in res["surplus_brier_skill"].items()))
    skills = ", ".join(f"{k} {_pct(v, 3)}" for k, v in res["mean_skill"].items())
    out.print(f"mean skill vs seasonal naive: {skills}")
    if res["notes"]:
        err.print(f"{len(res['notes'])} note(s) (fallbacks, days not scored) in {out_file}")
    err.print(f"results written to {out_file}"
              + (f"; hourly forecasts in {forecasts_out}" if forecasts_out else ""))
