"""Carbon-intensity model choice rules scored on the weeks that follow their choice.

For each site of a catalog and each weekly refit period (Mondays, 00:00 UTC) in ``[--from,
--to]``, this script fits :class:`~carbonsched.forecasts.registry.SelectedForecaster` exactly as
the daily path does (``--horizon-hours`` leads, issued at ``--issue-hour`` UTC, default 00:00,
up to a year of history strictly before the period start) and records what its choice sees:
every candidate's validation forecasts on the 28-day window and the actual values. Then every
candidate is refitted on the history before the period start and issues the period's seven
daily forecasts (at the issue hour, each from the history before it), as deployed;
day-ahead-only candidates get their later leads from the same extension model as in the
registry.

Several choice rules are then applied to the same validation forecasts and scored on the
*following* week (held out from the choice): MAPE by lead bucket, skill over seasonal naive
(``1 - MAPE / MAPE_naive``, pooled over the site's hours) and start regret
(:func:`carbonsched.forecasts.decision.start_regret`, 1- and 3-hour jobs arriving at every hour
of the first day, 24-hour waiting window). Rules (:data:`RULES`): ``fitted`` is the choice the
fit made, by the code the records were made with (``records_code`` in the output);
``before`` is the rule of commit ``d34c4a5`` (the criterion over every lead, with the
combination of climatology, ``ci-lead-ols`` and ``ols_hourly_ratio`` as one more candidate);
``current`` is this checkout's :func:`carbonsched.forecasts.registry.choose` with the signal's
settings (on fresh records the script checks that it reproduces the fit's choice);
``-nocombo`` leaves the combination out; ``mape`` ranks on validation MAPE alone, ``score:w``
on MAPE ratio + ``w`` x start-regret ratio, ``@24`` on the first 24 leads only, ``split:w`` on
the first day's MAPE and the regret of the jobs arriving in it (leads 0-47); without
``-nocombo`` those score the combination as one more candidate. ``combo-margin:m`` takes the
combination only when its validation MAPE is below ``(1 - m)`` x naive's, else ``score:1``
over the single candidates and the best two.

Run (repository root; about 2 s per site-period on one core, 8 sites x 52 weeks in 7 min with
two workers; scoring the rules takes 2 min)::

    export CARBONSCHED_SHARED_DATA=../shared/data OMP_NUM_THREADS=1
    python bench/forecast_choice.py --catalog global --from 2023-01-02 --to 2023-12-25 \\
        --workers 2 --records-out /tmp/records.json --out r.json
    python bench/forecast_choice.py --records /tmp/records.json --out r2.json   # rules again
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import carbonsched.forecasts.registry as reg
from carbonsched.adapters.signals import load_site_signals
from carbonsched.catalog import load_catalog
from carbonsched.errors import ForecastError
from carbonsched.forecasts.decision import start_regret

CI = "carbon_intensity_g_per_kwh"
DAY = pd.Timedelta(days=1)
HOUR = pd.Timedelta(hours=1)
BUCKETS = ((0, 24), (24, 48), (48, 72), (72, 96))


def site_period(args: tuple[str, str, str, str, int, int]) -> dict[str, Any]:
    """Validation and held-out test forecasts of every candidate for one site-period."""
    catalog, site_id, period, data_dir, H, issue_hour = args
    site = load_catalog(catalog).site(site_id)
    P = pd.Timestamp(period, tz="UTC")
    frame, _ = load_site_signals(site, data_dir, P - 366 * DAY,
                                 P + 7 * DAY + (H + issue_hour) * HOUR)
    y = frame[CI]
    y_hist = y[(y.index < P) & (y.index >= P - reg.DEFAULT_SCHEDULE.history_days * DAY)]
    seen: dict[str, Any] = {}
    real_choose = reg.choose

    def capture(preds, actual, metric, margin, use_regret, combination=(), **kw):  # type: ignore[no-untyped-def]
        seen.update(preds={k: v.copy() for k, v in preds.items()}, actual=actual.copy(),
                    margin=margin, combination=tuple(combination))
        return real_choose(preds, actual, metric, margin, use_regret, combination, **kw)

    reg.choose = capture
    try:
        sf = reg.SelectedForecaster(CI, tz=site.timezone, horizon_hours=H,
                                    issue_hour=issue_hour).fit(y_hist)
    finally:
        reg.choose = real_choose
    val_actual = seen["actual"]
    names = list(seen["preds"])
    cands = {c.name: c for c in sf.candidates}
    longs = [k for k in names if cands[k].max_horizon_hours is None]
    ext = min(longs, key=lambda k: (np.nan_to_num(reg._error(seen["preds"][k], val_actual,
                                                              "mape"), nan=np.inf),
                                    names.index(k)))
    issues = pd.date_range(P + issue_hour * HOUR, periods=7, freq="D")
    ts = issues.repeat(H) + pd.to_timedelta(np.tile(np.arange(H), len(issues)), unit="h")
    test_actual = y.reindex(ts).to_numpy(float).reshape(len(issues), H)
    test: dict[str, np.ndarray] = {}
    for k in names:
        c = cands[k]
        m = c.make(site.timezone, sf.clip, issue_hour).fit(y_hist)
        h = min(H, c.max_horizon_hours or H)
        test[k] = reg._pad(np.clip(reg._point_forecasts(m, y, issues, h), *sf.clip), H)
    for k in names:
        test[k] = np.where(np.isnan(test[k]), test[ext], test[k])
    return {"site": site_id, "period": period, "issue_hour": issue_hour,
            "chosen": sf.chosen_, "names": names,
            "margin": seen["margin"], "combination": list(seen["combination"]),
            "val_preds": {k: v.tolist() for k, v in seen["preds"].items()},
            "val_actual": val_actual.tolist(),
            "test_preds": {k: v.tolist() for k, v in test.items()},
            "test_actual": test_actual.tolist()}


def _code() -> dict[str, str]:
    """The commit the records were made at (``fitted`` is that code's choice)."""
    import subprocess

    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--", "forecasts"],
                                    capture_output=True, text=True).stdout.strip())
    except (OSError, subprocess.CalledProcessError):
        return {}
    return {"commit": head, "forecasts_modified": str(dirty)}


# --- choice rules -----------------------------------------------------------------------------
def _mape(p: np.ndarray, a: np.ndarray) -> float:
    return reg._error(p, a, "mape")


def _regret(p: np.ndarray, a: np.ndarray, arrivals: Any = None) -> float:
    H = a.shape[1]
    ex, ideal = start_regret(p, a, lengths_hours=(1, 3),
                             arrivals=arrivals if arrivals is not None else range(max(1, H - 2)))
    return 100.0 * ex / ideal if ideal > 0 else 0.0


def _memo(memo: dict, key: tuple, f: Any) -> float:
    if key not in memo:
        memo[key] = f()
    return memo[key]


def rule_scores(vp: dict[str, np.ndarray], va: np.ndarray, rule: str,
                memo: dict) -> dict[str, float]:
    """Criterion per name (lower is better) under ``rule`` (``memo``: per-record cache)."""
    n = reg.NAIVE
    h = int(rule.split("@")[1]) if "@" in rule else va.shape[1]
    a = va[:, :h]
    e = {k: _memo(memo, ("e", k, h), lambda p=p: _mape(p[:, :h], a)) for k, p in vp.items()}
    if rule.startswith("mape"):
        return {k: e[k] / e[n] for k in vp}
    if rule.startswith("split"):
        # error on the first day; start regret of the first day's arrivals (leads 0-47)
        w = float(rule.split(":")[1])
        a48 = va[:, :48]
        r48 = {k: _memo(memo, ("r48", k), lambda p=p: _regret(p[:, :48], a48, range(24)))
               for k, p in vp.items()}
        e24 = {k: _memo(memo, ("e", k, 24), lambda p=p: _mape(p[:, :24], va[:, :24]))
               for k, p in vp.items()}
        return {k: e24[k] / e24[n] + w * r48[k] / max(r48[n], 1e-9) for k in vp}
    r = {k: _memo(memo, ("r", k, h), lambda p=p: _regret(p[:, :h], a)) for k, p in vp.items()}
    w = float(rule.split(":")[1].split("@")[0]) if ":" in rule else 1.0
    return {k: e[k] / e[n] + w * r[k] / max(r[n], 1e-9) for k in vp}


#: The combination before this rule (d34c4a5), scored as one more candidate.
BEFORE_COMBINATION = ("climatology-28d", "ci-lead-ols", "ols_hourly_ratio")


def apply_rule(rec: dict[str, Any], rule: str) -> tuple[str, np.ndarray]:
    """The name chosen under ``rule`` and its test forecasts ``(7, H)``."""
    vp = {k: np.asarray(v) for k, v in rec["val_preds"].items()}
    tp = {k: np.asarray(v) for k, v in rec["test_preds"].items()}
    va = np.asarray(rec["val_actual"])
    groups = {k: (k,) for k in vp}
    combo = rec["combination"] if not rule.endswith("-nocombo") else []
    base = rule.removesuffix("-nocombo")
    if base == "before":
        # the rule of d34c4a5: the criterion over every lead, the combination of three
        # families one more candidate scored on it
        combo, base = list(BEFORE_COMBINATION), "score:1"
    if base == "fitted":
        # the choice the fit made when the records were taken (the code of that run)
        nm = rec["chosen"]
        members = reg.ensemble_members(nm)
        return nm, np.mean([tp[m] for m in members], axis=0)
    if base == "current":
        # this checkout's rule (registry.choose and the signal's settings)
        combo = list(reg.combination_members(CI, vp)) if combo else []
        ch = reg.choose(vp, va, "mape", rec["margin"], True, tuple(combo))
        return ch.name, np.mean([tp[m] for m in ch.members], axis=0)
    memo = rec.setdefault("_memo", {})
    if base.startswith("combo-margin:"):
        # the combination when its validation error beats naive's by the margin given, else
        # the criterion over the single candidates and the best two (as "score:1-nocombo")
        m = float(base.split(":")[1])
        cm = [c for c in (reg.combination_members(CI, vp) if combo else ()) if c in vp]
        if len(cm) >= 2:
            pc = np.mean([vp[c] for c in cm], axis=0)
            if _mape(pc, va) < (1 - m) * _memo(memo, ("e", reg.NAIVE, va.shape[1]),
                                              lambda: _mape(vp[reg.NAIVE], va)):
                return reg.ensemble_name(cm), np.mean([tp[c] for c in cm], axis=0)
        combo, base = [], "score:1"
    s = rule_scores(vp, va, base, memo)
    ranked = sorted(vp, key=lambda k: (s[k], list(vp).index(k)))
    a, b = ranked[:2]
    nm = reg.ensemble_name(sorted((a, b)))
    vp[nm] = (vp[a] + vp[b]) / 2
    groups[nm] = (a, b)
    cm = [c for c in combo if c in rec["names"]]
    if len(cm) >= 2:
        cn = reg.ensemble_name(cm)
        vp[cn] = np.mean([vp[c] for c in cm], axis=0)
        groups[cn] = tuple(cm)
    s = rule_scores(vp, va, base, memo)
    e = {k: _memo(memo, ("e", k, va.shape[1]), lambda p=p: _mape(p, va)) for k, p in vp.items()}
    ok = [k for k in vp if k == reg.NAIVE or e[k] < (1 - rec["margin"]) * e[reg.NAIVE]]
    best = min(ok, key=lambda k: (s[k], list(vp).index(k)))
    return best, np.mean([tp[m] for m in groups[best]], axis=0)


def score(records: list[dict[str, Any]], rules: list[str]) -> dict[str, Any]:
    """Per site and rule: MAPE and skill by bucket, start regret on the first day."""
    out: dict[str, Any] = {}
    sites = sorted({r["site"] for r in records}, key=[r["site"] for r in records].index)
    for site in sites:
        recs = [r for r in records if r["site"] == site]
        A = np.concatenate([np.asarray(r["test_actual"]) for r in recs])
        naive = np.concatenate([np.asarray(r["test_preds"][reg.NAIVE]) for r in recs])
        row: dict[str, Any] = {"periods": len(recs)}
        for rule in ["naive", *rules]:
            if rule == "naive":
                F, chosen = naive, {}
            else:
                F_parts, chosen = [], {}
                for r in recs:
                    nm, f = apply_rule(r, rule)
                    F_parts.append(f)
                    chosen[nm] = chosen.get(nm, 0) + 1
                F = np.concatenate(F_parts)
            cell: dict[str, Any] = {"chosen": chosen}
            for a, b in BUCKETS:
                if b > A.shape[1]:
                    break
                m, m0 = _mape(F[:, a:b], A[:, a:b]), _mape(naive[:, a:b], A[:, a:b])
                cell[f"mape_{a}_{b}"] = m
                cell[f"skill_{a}_{b}"] = 1 - m / m0
            ok = np.isfinite(A[:, :48]).all(axis=1)
            ex, ideal = start_regret(F[ok, :48], A[ok, :48], arrivals=range(24))
            cell["regret_0_24"] = 100 * ex / ideal
            row[rule] = cell
        out[site] = row
    return out


def table(sc: dict[str, Any], rules: list[str]) -> str:
    lines = ["| rule | " + " | ".join(sc) + " | mean skill 0-24 | mean 24-48 | 48-72 | 72-96 |"
             " regret < naive |", "|---" * (len(sc) + 6) + "|"]
    for rule in rules:
        cells, sk = [], {b: [] for b in BUCKETS}
        below = 0
        for row in sc.values():
            c = row[rule]
            cells.append(f"{100 * c['skill_0_24']:.1f} ({c['regret_0_24']:.1f})")
            for a, b in BUCKETS:
                if f"skill_{a}_{b}" in c:
                    sk[(a, b)].append(c[f"skill_{a}_{b}"])
            below += c["regret_0_24"] < row["naive"]["regret_0_24"]
        means = [f"{100 * np.mean(v):.1f}" if v else "" for v in sk.values()]
        lines.append(f"| {rule} | " + " | ".join(cells) + " | " + " | ".join(means)
                     + f" | {below}/{len(sc)} |")
    naive_cells = [f"({row['naive']['regret_0_24']:.1f})" for row in sc.values()]
    lines.append("| naive regret | " + " | ".join(naive_cells) + " |" + " |" * 5)
    return "\n".join(lines)


RULES = ["fitted", "before", "current", "current-nocombo", "mape-nocombo", "mape@24-nocombo",
         "score:1@24-nocombo", "score:0.5@24-nocombo", "split:1-nocombo", "split:0.5-nocombo",
         "score:1", "score:1@24", "combo-margin:0.05", "combo-margin:0.1", "combo-margin:0.2"]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--catalog", default="global")
    ap.add_argument("--data-dir", default=os.environ.get("CARBONSCHED_SHARED_DATA",
                                                         "../shared/data"))
    ap.add_argument("--from", dest="start", help="first period (a Monday)")
    ap.add_argument("--to", dest="end", help="last period")
    ap.add_argument("--every-weeks", type=int, default=1)
    ap.add_argument("--sites", default=None, help="comma-separated site ids (default all)")
    ap.add_argument("--horizon-hours", type=int, default=96)
    ap.add_argument("--issue-hour", type=int, default=0, choices=range(24), metavar="0..23",
                    help="UTC hour of the issues (the choice is fitted for it, as the daily "
                         "path fits one per issue hour)")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--records", default=None,
                    help="score the records of an earlier run (its --records-out) instead of "
                         "fitting again")
    ap.add_argument("--records-out", default=None,
                    help="write every site-period's forecasts here (about 20 MB per site-year)")
    ap.add_argument("--out", required=True, help="scores (JSON; the table beside it as .md)")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    if a.records:
        records = json.loads(Path(a.records).read_text())["records"]
    else:
        if not (a.start and a.end):
            ap.error("--from and --to are needed unless --records is given")
        cat = load_catalog(a.catalog)
        sites = a.sites.split(",") if a.sites else [s.id for s in cat.sites]
        periods = pd.date_range(a.start, a.end, freq=f"{7 * a.every_weeks}D")
        if any(p.day_of_week != 0 for p in periods):
            ap.error("--from must be a Monday (refit periods start on Mondays)")
        jobs = [(a.catalog, s, str(p.date()), a.data_dir, a.horizon_hours, a.issue_hour)
                for s in sites for p in periods]
        records = []
        with ProcessPoolExecutor(a.workers) as ex:
            try:
                for k, rec in enumerate(ex.map(site_period, jobs), 1):
                    records.append(rec)
                    print(f"{k}/{len(jobs)} {rec['site']} {rec['period']} chose "
                          f"{rec['chosen']}", file=sys.stderr, flush=True)
            except ForecastError as e:
                # e.g. a first period too close to the start of the data
                done = (f"after {records[-1]['site']} {records[-1]['period']}" if records
                        else "at the first site-period")
                ap.exit(2, f"{ap.prog}: error: the forecast stopped {done}: {e}; every "
                           "period needs that history before it: move --from later\n")
    mismatch = (None if a.records else
                [(r["site"], r["period"]) for r in records
                 if apply_rule(r, "current")[0] != r["chosen"]])
    # on records made at d34c4a5 this must be every period (the rule is reproduced exactly)
    before_same = sum(apply_rule(r, "before")[0] == r["chosen"] for r in records)
    sc = score(records, RULES)
    md = table(sc, RULES)
    for r in records:
        r.pop("_memo", None)
    fitted_by = {}
    if a.records:
        fitted_by = json.loads(Path(a.records).read_text()).get("code", {})
    res = {"scores": sc, "current_mismatches": mismatch, "rules": RULES,
           "periods": len(records),
           "before_equals_fitted": before_same, "seconds": round(time.perf_counter() - t0, 1),
           "machine": platform.platform(), "load_average": os.getloadavg(),
           "argv": sys.argv[1:], "records_from": a.records, "records_code": fitted_by}
    Path(a.out).write_text(json.dumps(res, indent=1))
    if a.records_out:
        Path(a.records_out).write_text(json.dumps({"records": records, "code": _code()}))
    Path(a.out).with_suffix(".md").write_text(md + "\n")
    print(md)
    print(f"'before' equals the fit's choice in {before_same}/{len(records)} periods")
    if not a.records:
        print(f"current rule reproduces the fit's choice: {len(records) - len(mismatch)}/"
              f"{len(records)}")


if __name__ == "__main__":
    main()
