"""``carbonsched replay --jobs FILE|DIR``: a user's workload with the rolling horizon."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table


def run_and_print(jobs: Path, out_file: Path, catalog: str, data_dir: Path | None,
                  policies: tuple[str, ...] | None, horizon_hours: int, run_every_hours: int,
                  time_limit_s: float, mip_gap: float, progress: Callable[[str], None],
                  out: Console, err: Console, write_json: Callable[[Path, Any], None]) -> None:
    """Replay ``jobs`` (:func:`~carbonsched.evaluate.replay_jobs.run_jobs_replay`), write, print."""
    from carbonsched.evaluate.replay_jobs import JOB_POLICIES, run_jobs_replay

    res = run_jobs_replay(jobs, catalog, data_dir, policies or JOB_POLICIES, horizon_hours,
                          run_every_hours, time_limit_s, mip_gap, progress)
    write_json(out_file, res)
    t = Table("policy", "kg CO2e", "reduction %", "oracle share", "jobs placed",
              "unplaced MWh", "with unplaced %", "deadline misses", "capacity viol.", "SLO viol.",
              "time-limited runs", "fallback runs", "seconds",
              title=f"Rolling replay of {res['jobs']} jobs, {res['first_run']} .. "
                    f"{res['last_run']} (H = {res['horizon_hours']} h, a run every "
                    f"{res['run_every_hours']} h)")

    def fmt(v: float | None, nd: int) -> str:
        return "-" if v is None else f"{v:.{nd}f}"

    for name, p in res["policies"].items():
        t.add_row(name, f"{p['emissions_kg']:,.1f}", fmt(p["reduction_pct"], 2),
                  fmt(p["oracle_share"], 3), str(p["jobs_placed"]),
                  f"{p['unplaced_it_mwh']:.3f}", fmt(p["reduction_with_unplaced_pct"], 2),
                  str(p["deadline_misses"]), str(p["capacity_violations"]),
                  str(p["slo_violations"]),
                  str(p["time_limited_runs"]), str(p["fallback_runs"]),
                  f"{p['seconds']:,.1f}")
    out.print(t)
    if res["forecast_error"]["committed"]:
        out.print(forecast_error_table(
            res["forecast_error"]["committed"],
            "Carbon-intensity forecast error milp acted on (hours before each next run)"))
    filled = {k: v for k, v in res["filled_signal_hours"].items() if v}
    err.print(f"actual signal hours interpolated for scoring: "
              f"{', '.join(f'{k} {v}' for k, v in filled.items()) or 'none'}")
    sites = sorted({f['site'] for f in res["forecast_fallbacks"]})
    err.print(f"forecast fallbacks in {len(res['forecast_fallbacks'])} run-site(s) "
              f"({', '.join(sites) or 'none'}): see forecast_fallbacks")
    for name, p in res["policies"].items():
        for key, what in (("time_limited_run_times", "stopped at the time limit (kept the "
                           "solver's best plan)"), ("fallback_run_times", "fell back to the "
                           "greedy plan")):
            times = p.get(key) or []
            if times:
                shown = ", ".join(times[:5]) + (f" and {len(times) - 5} more" if len(times) > 5
                                                else "")
                err.print(f"{name}: {len(times)} of {res['runs_count']} run(s) {what}: "
                          f"{shown} (issue times; see notes)")
    err.print(f"results written to {out_file}")


def forecast_error_table(summary: dict[str, dict[str, Any]], title: str) -> Table:
    """A table of :func:`carbonsched.evaluate.replay.forecast_error_summary`.

    Per site: MAPE [%], MAE [g/kWh], hours scored and the models used (hours each).
    """
    t = Table("site", "MAPE %", "MAE g/kWh", "hours", "models (hours)", title=title)
    for sid, e in summary.items():
        t.add_row(sid, "-" if e["ci_mape_pct"] is None else f"{e['ci_mape_pct']:.2f}",
                  "-" if e["ci_mae_g_per_kwh"] is None else f"{e['ci_mae_g_per_kwh']:.1f}",
                  str(e["hours"]), ", ".join(f"{m} {h}" for m, h in e["models"].items()))
    return t
