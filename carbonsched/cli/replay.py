"""``carbonsched replay --jobs FILE|DIR``: a user's workload with the rolling horizon."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from carbonsched.cli.common import table

#: Label of the oracle's row (:data:`carbonsched.evaluate.replay.ORACLE_LABEL`, kept here so
#: that importing the CLI does not import pandas).
ORACLE_ROW = "oracle (bound, perfect foresight)"


@contextmanager
def replay_progress(console: Console, unit: str = "days") -> Iterator[Callable[[int, int], None]]:
    """A Rich progress bar on ``console`` fed by ``advance(done, total)``; quiet off a terminal.

    Shows ``done/total <unit>``, the elapsed time and Rich's estimate of the time left. When
    ``console`` is not a terminal (a log, a pipe) nothing is drawn: the results say the rest.
    """
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    if not console.is_terminal:
        yield lambda done, total: None
        return
    with Progress(TextColumn("replay"), BarColumn(), MofNCompleteColumn(),
                  TextColumn(unit), TimeElapsedColumn(), TextColumn("left"),
                  TimeRemainingColumn(), console=console, transient=False) as bar:
        task = bar.add_task("replay", total=None)

        def advance(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)
        yield advance


def _fmt(v: float | None, nd: int) -> str:
    return "-" if v is None else f"{v:.{nd}f}"


def trace_replay_table(res: dict[str, Any]) -> Table:
    """The table of :func:`carbonsched.evaluate.replay.run_replay`: one row per policy.

    Unplaced work (jobs, GPU-hours) sits next to the emissions, and the emissions with the
    unplaced work priced at each day's dirtiest site-hour next to the raw ones, so a policy that
    leaves work out does not look cleaner; the oracle's row is labelled as the bound it is.
    """
    t = table("policy", "kg CO2e", "unplaced jobs", "unplaced GPU-h", "kg CO2e incl. unplaced",
              "reduction % incl. unplaced", "oracle share", "surplus MWh", "deadline misses",
              "SLO viol.", "capacity viol.", "seconds",
              title=f"Replay {res['start']} .. {res['end']} ({res['days']} days); unplaced "
                    "work priced at the day's dirtiest site-hour")
    for name, p in res["policies"].items():
        t.add_row(ORACLE_ROW if name == "oracle" else name, f"{p['emissions_kg']:,.0f}",
                  f"{p.get('unplaced_jobs', 0):,}", f"{p['unplaced_gpu_hours']:,.1f}",
                  f"{p['emissions_with_unplaced_kg']:,.0f}",
                  _fmt(p["reduction_with_unplaced_pct"], 2), _fmt(p["oracle_share"], 3),
                  f"{p['surplus_absorbed_mwh']:,.1f}", str(p["deadline_misses"]),
                  str(p["slo_violations"]), str(p["capacity_violations"]),
                  f"{p['seconds']:,.0f}")
    return t


def run_and_print(jobs: Path, out_file: Path, catalog: str, data_dir: Path | None,
                  policies: tuple[str, ...] | None, horizon_hours: int, run_every_hours: int,
                  time_limit_s: float, mip_gap: float, progress: Callable[[str], None],
                  out: Console, err: Console, write_json: Callable[[Path, Any], None],
                  exogenous: str = "none") -> None:
    """Replay ``jobs`` (:func:`~carbonsched.evaluate.replay_jobs.run_jobs_replay`), write, print.

    A progress bar of the rolling runs on ``err`` when it is a terminal (:func:`replay_progress`).
    """
    from carbonsched.evaluate.replay_jobs import JOB_POLICIES, run_jobs_replay

    with replay_progress(err, "runs") as advance:
        res = run_jobs_replay(jobs, catalog, data_dir, policies or JOB_POLICIES, horizon_hours,
                              run_every_hours, time_limit_s, mip_gap, progress, advance=advance,
                              exogenous=exogenous)
    write_json(out_file, res)
    # ten columns, so that a terminal of ~120 shows every header whole: counts that belong
    # together share a column ("a / b")
    t = table("policy", "kg CO2e", "reduction %", "oracle share", "jobs placed / unplaced",
              "unplaced MWh", "with unplaced %", "deadline misses / capacity / SLO viol.",
              "runs time-limited / fallback", "planner s (longest run)",
              title=f"Rolling replay of {res['jobs']} jobs, {res['first_run']} .. "
                    f"{res['last_run']} (H = {res['horizon_hours']} h, a run every "
                    f"{res['run_every_hours']} h)")

    fmt = _fmt
    for name, p in res["policies"].items():
        t.add_row(ORACLE_ROW if name == "oracle" else name, f"{p['emissions_kg']:,.1f}",
                  fmt(p["reduction_pct"], 2), fmt(p["oracle_share"], 3),
                  f"{p['jobs_placed']} / {res['jobs'] - p['jobs_placed']}",
                  f"{p['unplaced_it_mwh']:.3f}", fmt(p["reduction_with_unplaced_pct"], 2),
                  f"{p['deadline_misses']} / {p['capacity_violations']} / "
                  f"{p['slo_violations']}",
                  f"{p['time_limited_runs']} / {p['fallback_runs']}",
                  f"{p['seconds']:,.1f} ({p['longest_run_s']:,.1f})")
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
    t = table("site", "MAPE %", "MAE g/kWh", "hours", "models (hours)", title=title)
    for sid, e in summary.items():
        t.add_row(sid, "-" if e["ci_mape_pct"] is None else f"{e['ci_mape_pct']:.2f}",
                  "-" if e["ci_mae_g_per_kwh"] is None else f"{e['ci_mae_g_per_kwh']:.1f}",
                  str(e["hours"]), ", ".join(f"{m} {h}" for m, h in e["models"].items()))
    return t
