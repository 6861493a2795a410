"""Markdown tables of a ``carbonsched backtest --dataset sites`` results JSON (BENCHMARKS.md §7).

Usage::

    python bench/site_backtest_md.py r.json [more.json ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

CI = "carbon_intensity_g_per_kwh"


def _f(v: float | None, nd: int = 2, scale: float = 1.0) -> str:
    return "-" if v is None else f"{scale * v:.{nd}f}"


def _band(v: float | None, lo: float, hi: float) -> str:
    if v is None:
        return "-"
    mark = "" if lo <= v <= hi else " ✗"
    return f"{100 * v:.1f}{mark}"


def tables(res: dict) -> str:
    """Carbon-intensity table and index/PUE table for one results JSON."""
    out = [f"**{res['catalog']}**, issues {res['from']} .. {res['to']} every "
           f"{res.get('every_days', 1)} day(s) ({res.get('days_scored', res['days'])} days), "
           f"{res['seconds']} s wall.", "",
           "| site | CI MAPE % | naive MAPE % | skill % | cov 80 % | cov 95 % | models chosen "
           "(hours) |", "|---|---:|---:|---:|---:|---:|---|"]
    for sid, by in res["sites"].items():
        r = by[CI]
        models = ", ".join(f"{k} {v}" for k, v in list(r["models"].items())[:3])
        out.append(f"| {sid} | {_f(r['mape_pct'])} | {_f(r['naive_mape_pct'])} | "
                   f"{_f(r['skill'], 1, 100)} | {_band(r['coverage_80'], .78, .82)} | "
                   f"{_band(r['coverage_95'], .93, .97)} | {models} |")
    ms = res["mean_skill"]
    out += ["", f"Mean skill: carbon intensity {_f(ms.get(CI), 1, 100)} %, green-surplus index "
                f"{_f(ms.get('green_surplus_index'), 1, 100)} % (MAE), PUE "
                f"{_f(ms.get('pue'), 1, 100)} %.", "",
            "| site | index MAE | naive MAE | skill % | cov 80 % | cov 95 % | PUE MAPE % | "
            "naive % | skill % | cov 80 % | cov 95 % |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for sid, by in res["sites"].items():
        g, p = by.get("green_surplus_index", {}), by.get("pue", {})
        out.append(f"| {sid} | {_f(g.get('mae'), 4)} | {_f(g.get('naive_mae'), 4)} | "
                   f"{_f(g.get('skill'), 1, 100)} | {_band(g.get('coverage_80'), .78, .82)} | "
                   f"{_band(g.get('coverage_95'), .93, .97)} | {_f(p.get('mape_pct'))} | "
                   f"{_f(p.get('naive_mape_pct'))} | {_f(p.get('skill'), 1, 100)} | "
                   f"{_band(p.get('coverage_80'), .78, .82)} | "
                   f"{_band(p.get('coverage_95'), .93, .97)} |")
    return "\n".join(out)


if __name__ == "__main__":
    for path in sys.argv[1:]:
        print(tables(json.loads(Path(path).read_text())))
        print()
