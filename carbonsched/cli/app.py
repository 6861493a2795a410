"""The ``carbonsched`` command line (Typer + Rich).

Every command prints errors as one line ``error: <what, where, how to fix>`` and exits 2 on bad
input, 3 when a backend (database, solver, scheduler) is unavailable, 4 when ``plan`` produced an
infeasible plan or no solution (the plan is still written and printed), 1 on anything else.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from carbonsched.cli.common import (
    PlainFlagsGroup,
    err,
    errors,
    out,
    print_error,
    solver_chatter_to_stderr,
    status_line,
    table,
    tomorrow,
    write_json,
)
from carbonsched.cli.plan_view import print_plan
from carbonsched.errors import (
    InputError,
)

app = typer.Typer(
    help="carbonsched: carbon- and power-aware geo-distributed scheduling for AI compute.\n\n"
    "Forecasts each site's grid carbon intensity, green-power surplus and PUE day-ahead, "
    "places batch/training jobs and inference with a MILP, and records the plan.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    cls=PlainFlagsGroup,
)


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            v = version("carbonsched")
        except PackageNotFoundError:   # run from a source tree that was never installed
            v = "unknown (not installed; `pip install -e .`)"
        typer.echo(f"carbonsched {v}")
        raise typer.Exit(0)


@app.callback()
def _root(
    show_version: Annotated[bool, typer.Option(
        "--version", callback=_print_version, is_eager=True,
        help="Print carbonsched's version and exit.")] = False,
) -> None:
    """carbonsched: carbon- and power-aware geo-distributed scheduling for AI compute."""


workload_app = typer.Typer(help="Build and inspect workload (jobs + inference demand) files.",
                           no_args_is_help=True)
bench_app = typer.Typer(help="Benchmarks (not run by the test suite).", no_args_is_help=True)
catalog_app = typer.Typer(help="Site catalogs.", no_args_is_help=True)
app.add_typer(workload_app, name="workload")
app.add_typer(bench_app, name="bench")
app.add_typer(catalog_app, name="catalog")
from carbonsched.cli.plans import plans_app  # noqa: E402

app.add_typer(plans_app, name="plans")
from carbonsched.cli.runs import runs_app  # noqa: E402

app.add_typer(runs_app, name="runs")
from carbonsched.cli.signals import ingest as _ingest, signals_app  # noqa: E402, I001

app.add_typer(signals_app, name="signals")
from carbonsched.cli.grid_events import grid_app  # noqa: E402

app.add_typer(grid_app, name="grid-event")
from carbonsched.cli.store import store_app  # noqa: E402

app.add_typer(store_app, name="store")
app.command("ingest")(_ingest)

DataDir = Annotated[Path | None, typer.Option(
    "--data-dir", envvar="CARBONSCHED_DATA_DIR",
    help="Folder of the real public data (../shared/data layout).")]

@app.command()
def plan(
    date: Annotated[str, typer.Option(help="Day to plan, YYYY-MM-DD (UTC). Default: tomorrow "
                                      "(--rolling: the run due now).")]
    = "",
    catalog: Annotated[str | None, typer.Option(
        help="Catalog name (see `carbonsched catalog list`) or TOML path (default: "
        "CARBONSCHED_CATALOG, china-eastdata-westcompute).")] = None,
    jobs: Annotated[Path | None, typer.Option(
        help="Workload file (JSON or CSV, docs/workload.md). Default: the catalog's demo day.")]
    = None,
    data_dir: DataDir = None,
    solver: Annotated[str | None, typer.Option(
        help="MILP solver: highs or cbc (default: CARBONSCHED_SOLVER, highs).")] = None,
    time_limit: Annotated[float | None, typer.Option(
        help="Solver time limit (default: CARBONSCHED_TIME_LIMIT_S, 60). \\[s]")] = None,
    hours: Annotated[int | None, typer.Option(
        help="Planning horizon (default: CARBONSCHED_HORIZON_HOURS, 24). \\[h]")] = None,
    slot_minutes: Annotated[int, typer.Option(
        help="Slot grid of the planner: 60 (default), 30 or 15; starts are decided on it, "
        "each slot takes its hour's forecast, and energy and emissions count the minutes "
        "run on any grid. \\[min]")] = 60,
    out_file: Annotated[Path | None, typer.Option("--out", help="Write the plan JSON here.")]
    = None,
    fairness: Annotated[float | None, typer.Option(
        min=0.0, max=1.0, help="Tenants' fair shares against carbon when capacity binds: 0 "
        "carbon only, 1 strict weighted DRF over the catalog's \\[tenants] (default: "
        "CARBONSCHED_FAIRNESS, 0). \\[-]")] = None,
    store: Annotated[bool, typer.Option(
        help="Record forecasts and the plan in the store (CARBONSCHED_DATABASE_URL).")] = True,
    providers: Annotated[Path | None, typer.Option(
        envvar="CARBONSCHED_PROVIDERS_FILE", help="Providers file: fetch the signal history "
        "from provider APIs (cached in the store) instead of --data-dir files.")] = None,
    dispatch: Annotated[bool, typer.Option(
        "--dispatch", help="Run the service's plan -> dispatch pipeline once (idempotent by "
        "issue time), as `carbonsched serve`'s cron does; for system cron or a Kubernetes "
        "CronJob.")] = False,
    rolling: Annotated[bool, typer.Option(
        "--rolling", help="With --dispatch: one rolling step, the run the service's cron "
        "claims now: issued at the newest due issue time of the service's cadence (00:00 UTC "
        "and every N hours after it; N = 24: the daily cron's planning date), or at --date's "
        "00:00 UTC, refused when later than that. Plans --hours from the issue time, commits "
        "and dispatches only what starts before the next issue time (issue + N h) and carries "
        "the rest in the store.")]
    = False,
    all_notes: Annotated[bool, typer.Option(
        "--all-notes", "--verbose", help="Print every note of the plan as recorded; by "
        "default one line per kind of note, with its count (notes several sites share, e.g. "
        "the modelled grid's calibration, named once).")]
    = False,
    replay_from: Annotated[str, typer.Option(
        "--replay-from", help="REPLAY: plan --date (default tomorrow) on this past day's real "
        "signals and work (YYYY-MM-DD the data covers, e.g. 2023-07-15), moved forward by whole "
        "days, so a catalog of historical data can be dispatched; the plan says "
        "signal_quality 'replayed'. --jobs then gives that day's work (e.g. `workload "
        "from-traces --date` the same day).")] = "",
    grid_events: Annotated[Path | None, typer.Option(
        "--grid-events", help="Announced grid events (CSV, JSON or TOML: site, start, end, "
        "target_kw or target_fraction, notice_hours; docs/grid-flexibility.md): commit a "
        "reduction for each within the plan's flexibility band and re-plan with it "
        "reserved.")] = None,
    power_caps: Annotated[bool | None, typer.Option(
        "--power-caps/--no-power-caps", help="Run jobs whose window has room at a GPU power "
        "cap, slower and leaner (default: the setting CARBONSCHED_POWER_CAPS, off).")] = None,
) -> None:
    """Forecast, plan and record one day: the daily planning run.

    --catalog, --solver, --time-limit and --hours not given take their settings (CARBONSCHED_*,
    then CARBONSCHED_CONFIG), as the service's runs do. --jobs not given plans the catalog's
    demo day; `plan --dispatch` (the service's run path, for a cron) plans the service's
    workload (CARBONSCHED_WORKLOAD_FILE) and the API's jobs, as `serve` would.
    """
    with errors():
        from carbonsched.cli.check import check_plan_options
        from carbonsched.config import get_settings
        from carbonsched.errors import InputError

        settings = get_settings()
        catalog = catalog if catalog is not None else settings.catalog
        solver = solver if solver is not None else settings.solver
        time_limit = time_limit if time_limit is not None else settings.time_limit_s
        hours = hours if hours is not None else settings.horizon_hours
        bad = check_plan_options(date, solver, time_limit, hours)
        if bad:
            raise InputError(bad)
        from carbonsched.plan.sets import check_slot_minutes

        check_slot_minutes(slot_minutes)
        if dispatch and slot_minutes != 60:
            raise InputError(f"--slot-minutes {slot_minutes} is for plan-only runs; --dispatch "
                             "plans on the hourly grid (drop --slot-minutes or --dispatch)")
        if dispatch and replay_from.strip():
            raise InputError("--replay-from plans without --dispatch: plan the replayed day "
                             "with `carbonsched plan --replay-from DAY`, then run "
                             "`carbonsched dispatch` (the service's run path plans live days)")
        if dispatch and (grid_events is not None or power_caps is not None
                         or fairness is not None):
            raise InputError("--grid-events, --power-caps and --fairness plan without "
                             "--dispatch: plan with them, then run `carbonsched dispatch` (the "
                             "service's run path reads CARBONSCHED_FAIRNESS and "
                             "CARBONSCHED_POWER_CAPS)")
        events = None
        if grid_events is not None:
            from carbonsched.flex import read_grid_events

            events = read_grid_events(grid_events)
        if dispatch:
            from carbonsched.cli.service import plan_and_dispatch

            raise typer.Exit(plan_and_dispatch(date.strip(), catalog, jobs,
                                               data_dir, solver, time_limit, hours, out_file,
                                               rolling=rolling or None,
                                               providers_file=providers))
        if rolling:
            raise InputError("--rolling needs --dispatch (the rolling step carries work in "
                             "the store between runs)")
        from carbonsched.service.runs import plan_once

        day = date.strip() or tomorrow()
        loader = exo_loader = None
        if providers:
            from carbonsched.cli.signals import live_signals

            now = settings.providers_now
            live = live_signals(providers, settings.providers_base_url or None,
                                None if now is None else now.isoformat())
            # the history and the forecasts the providers publish (issue 35 item 3)
            loader, exo_loader = live.load_site_signals, live.exogenous
        # the plan reaches the file before the store, and the screen before the store's error,
        # so a dead database loses nothing
        with status_line("plan") as progress, solver_chatter_to_stderr():
            res = plan_once(settings, day, catalog=catalog, workload_file=jobs,
                            data_dir=data_dir, solver=solver, time_limit_s=time_limit,
                            horizon_hours=hours, slot_minutes=slot_minutes, progress=progress,
                            signal_loader=loader, exogenous_loader=exo_loader,
                            out_file=out_file, store=store,
                            replay_from=replay_from.strip() or None,
                            grid_events=events, power_caps=power_caps, fairness=fairness)
        daily = res.daily
        print_plan(daily.document, daily.summary, all_notes)
        pid = daily.document["plan_id"]
        if out_file:
            err.print(f"plan written to {out_file}", highlight=False)
        res.raise_store_error()
        if store:
            err.print(f"plan {pid[:12]} recorded in {res.stored_in}; get it as JSON "
                      f"with `carbonsched plans show {pid[:12]} --json`, list plans with "
                      "`carbonsched plans list`",
                      highlight=False, soft_wrap=True)  # a wrapped command breaks copy-paste
        elif not out_file:
            err.print(f"plan {pid[:12]} was neither recorded (--no-store) nor written; add "
                      "--out plan.json to keep it as JSON", highlight=False)
        status = daily.document["solver"]["status"]
        if status in ("infeasible", "no_solution", "error"):
            fam = daily.document["solver"].get("infeasible_family")
            print_error(f"the plan is {status}" + (f" ({fam})" if fam else "")
                        + "; see the plan's solver note and unplaced reasons")
            raise typer.Exit(4)


@workload_app.command("from-traces")
def workload_from_traces_cmd(
    date: Annotated[str, typer.Option(help="Day, YYYY-MM-DD (UTC).")],
    out_file: Annotated[Path, typer.Option("--out", help="Output file: .json or .csv.")],
    data_dir: DataDir = None,
    catalog: Annotated[str, typer.Option(help="Catalog the jobs are for.")] = "global",
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
) -> None:
    """Build one day's jobs and inference demand from the real job traces (by path)."""
    from carbonsched.catalog import load_catalog
    from carbonsched.config import get_settings
    from carbonsched.workload.files import workload_from_traces, write_workload

    with errors():
        ddir = data_dir or get_settings().data_dir
        wl = workload_from_traces(ddir, date, load_catalog(catalog), seed=seed)
        write_workload(wl, out_file)
        gpu_h = sum(j.gpus * j.duration_hours for j in wl.jobs)
        out.print(f"{len(wl.jobs)} jobs ({gpu_h:,} GPU-hours) and {len(wl.inference)} "
                  f"inference demands written to {out_file}")


@app.command()
def backtest(
    out_file: Annotated[Path, typer.Option("--out", help="Results JSON.")],
    dataset: Annotated[str, typer.Option(
        help="'dacf' (the DACF paper's protocol on its regions) or 'sites' (the daily plan's "
             "forecasting path on every site of --catalog).")] = "dacf",
    data_dir: Annotated[Path | None, typer.Option(
        "--data-dir", help="dacf: folder of the DACF files (../shared/data/dacf); sites: the "
             "shared data folder (../shared/data).")] = None,
    regions: Annotated[str | None, typer.Option(
        help="Comma-separated regions (default: CISO,PJM,ERCO,ISNE,SE,DE).")] = None,
    models: Annotated[str | None, typer.Option(
        help="Comma-separated model names (default: all).")] = None,
    forecasts_out: Annotated[Path | None, typer.Option(
        "--forecasts-out", help="Write every hourly forecast as CSV.")] = None,
    refit_days: Annotated[int | None, typer.Option(
        "--refit-days", help="dacf: refit every candidate every N days, of the test and of the "
             "validation half-year that selects the model, on all data before the refit "
             "(default 7; 0: fit once before each).")] = None,
    catalog: Annotated[str, typer.Option(help="sites: catalog (measured signals).")] = "global",
    date_from: Annotated[str | None, typer.Option(
        "--from", help="sites: first issue day, YYYY-MM-DD.")] = None,
    date_to: Annotated[str | None, typer.Option(
        "--to", help="sites: last issue day, YYYY-MM-DD (inclusive).")] = None,
    sites: Annotated[str | None, typer.Option(
        help="sites: comma-separated site ids (default: all).")] = None,
    executor: Annotated[str, typer.Option(help="sites: local or dask.")] = "local",
    workers: Annotated[int, typer.Option(help="sites: parallel processes.")] = 1,
    scheduler_address: Annotated[str | None, typer.Option(
        help="sites: Dask scheduler address (with --executor dask).")] = None,
    every: Annotated[int, typer.Option(
        help="sites: score every N-th day from --from (a stratified sample).")] = 1,
    horizon: Annotated[int, typer.Option(
        help="sites: hours forecast from each issue (1..168); scores also per lead bucket "
             "(0-24, 24-48, 48-72, 72-96 h).")] = 24,
    against: Annotated[Path | None, typer.Option(
        help="sites: a provider's published carbon-intensity forecast CSV (columns site or "
             "zone, issued_at, ts, carbon_intensity_g_per_kwh), scored next to the product's "
             "on the same hours.")] = None,
    exogenous: Annotated[str, typer.Option(
        help="sites: 'none' (history only), 'reanalysis' (the site's weather file used as if "
             "forecast 24 h ahead; optimistic, stated in the results), 'day-ahead-price' (the "
             "zone's day-ahead auction prices, each day's known from the day before; DE-LU and "
             "JP-TK) or 'reanalysis+day-ahead-price'.")] = "none",
) -> None:
    """Backtest day-ahead forecasts: the DACF protocol, or the daily path on a catalog's sites."""
    from carbonsched.config import get_settings
    from carbonsched.errors import InputError

    with errors():
        if dataset == "sites":
            from carbonsched.cli.backtest import site_backtest

            if refit_days is not None:
                raise InputError("--refit-days sets the DACF backtest's refits; the site "
                                 "backtest refits as the daily path does (weekly): drop it, "
                                 "or use --dataset dacf")

            if not date_from or not date_to:
                raise InputError("--dataset sites needs --from and --to, e.g. --from 2023-01-01 "
                                 "--to 2023-12-31")
            site_backtest(out_file, catalog, data_dir or get_settings().data_dir, date_from,
                          date_to, sites, forecasts_out, executor, workers, scheduler_address,
                          every, horizon, against, exogenous)
            return
        from carbonsched.forecasts.backtest import REFIT_DAYS, render_table, run_backtest

        if dataset != "dacf":
            raise InputError(f"unknown dataset {dataset!r}; choose 'dacf' or 'sites'")
        if against is not None:
            raise InputError("--against scores a published forecast next to the daily path's: "
                             "use it with --dataset sites")
        if exogenous != "none":
            raise InputError("--exogenous sets what the site backtest's forecasts read: use it "
                             "with --dataset sites (the DACF models read the archive's GFS "
                             "and operator forecasts already)")
        if refit_days is None:
            refit_days = REFIT_DAYS
        if refit_days < 0:
            raise InputError("--refit-days must be 0 (fit once before validation and once "
                             f"before the test) or a number of days >= 1, got {refit_days}")
        ddir = data_dir or (get_settings().data_dir / "dacf")
        regs = [r.strip() for r in regions.split(",")] if regions else None
        mods = [m.strip() for m in models.split(",")] if models else None
        with status_line("backtest") as progress:
            res = run_backtest(ddir, regions=regs, models=mods, progress=progress,
                               refit_days=refit_days or None)
        res.to_json(out_file)
        if forecasts_out:
            res.to_csv(forecasts_out)
        out.print(render_table(res.results))
        err.print(f"results written to {out_file}")


_TRACE_POLICIES = "agnostic,greedy,milp,oracle"


def replay_cadence(every: str | None, run_every_hours: int | None) -> int:
    """The rolling replay's cadence from ``--every`` (``6h``) or ``--run-every-hours`` (6). [h]

    Raises
    ------
    InputError
        Both given and different, or a cadence that does not divide a day.
    """
    from carbonsched.timeaxis import check_run_every_hours, parse_every

    if every is not None and run_every_hours is not None and \
            parse_every(every) != run_every_hours:
        raise InputError(f"--every {every} and --run-every-hours {run_every_hours} disagree; "
                         "give one of them")
    if every is not None:
        return parse_every(every)
    return check_run_every_hours(24 if run_every_hours is None else run_every_hours,
                                 "--run-every-hours")


@app.command()
def replay(
    out_file: Annotated[Path, typer.Option("--out", help="Results JSON.")],
    catalog: Annotated[str, typer.Option(help="Catalog with measured signals.")] = "global",
    data_dir: DataDir = None,
    start: Annotated[str, typer.Option(help="First day, YYYY-MM-DD.")] = "2023-01-01",
    end: Annotated[str, typer.Option(
        help="Last day, YYYY-MM-DD (inclusive); default a week from --start (7 days).")] = "",
    policies: Annotated[str, typer.Option(
        help="Comma-separated: agnostic,greedy,milp,oracle (with --jobs: agnostic,milp,"
             "oracle,best-fixed).")] = "agnostic,greedy,milp,oracle",
    seed: Annotated[int, typer.Option(help="Workload seed.")] = 0,
    time_limit: Annotated[float, typer.Option(help="Solver time limit per day. \\[s]")] = 30.0,
    plot: Annotated[Path | None, typer.Option(help="Write a PNG of daily emissions.")] = None,
    workers: Annotated[int, typer.Option(help="Parallel worker processes.")] = 2,
    workload_scale: Annotated[float, typer.Option(
        help="Multiplier on each day's trace job count (<1 subsamples).")] = 1.0,
    mip_gap: Annotated[float, typer.Option(
        help="Relative MIP gap at which milp and oracle stop.")] = 0.001,
    executor: Annotated[str, typer.Option(
        help="Where the days run: local (processes here) or dask (a Dask cluster).")] = "local",
    scheduler_address: Annotated[str | None, typer.Option(
        help="Dask scheduler to use with --executor dask, e.g. tcp://10.0.0.5:8786; "
             "without it a local Dask cluster of --workers processes is started.")] = None,
    jobs: Annotated[Path | None, typer.Option(
        help="Replay this jobs file or folder with the rolling horizon (policies agnostic,"
             "milp,oracle,best-fixed) instead of trace-built days.")] = None,
    horizon_hours: Annotated[int, typer.Option(help="Rolling horizon with --jobs. \\[h]")] = 72,
    run_every_hours: Annotated[int | None, typer.Option(
        help="Hours between rolling runs with --jobs (as --every). \\[h]")] = None,
    every: Annotated[str | None, typer.Option(
        help="Run cadence with --jobs, as the service runs (CARBONSCHED_ROLLING_RUN_EVERY_HOURS):"
             " 1h, 2h, 3h, 4h, 6h, 8h, 12h or 24h (default 24h).")] = None,
    target_load: Annotated[float | None, typer.Option(
        help="Scale each day's work to this share of the fleet's GPU-hours (0, 1.5].")] = None,
    oracle_time_limit: Annotated[float | None, typer.Option(
        help="The oracle's own time limit per day (default --time-limit). \\[s]")] = None,
    every_days: Annotated[int, typer.Option(help="Replay every N-th day (a sample).")] = 1,
    exogenous: Annotated[str, typer.Option(
        help="With --jobs: the exogenous forecasts milp's forecasts read, as backtest "
             "--dataset sites: none, reanalysis, day-ahead-price or "
             "reanalysis+day-ahead-price.")] = "none",
) -> None:
    """Replay a period: plan each day on forecasts, score every policy on the actual grid."""
    from carbonsched.config import get_settings
    from carbonsched.evaluate.executor import parse_executor
    from carbonsched.evaluate.replay import plot_daily, run_replay

    if jobs is not None:
        from carbonsched.cli.replay import run_and_print

        with errors(), solver_chatter_to_stderr():
            pols = tuple(p.strip() for p in policies.split(",") if p.strip())
            run_and_print(jobs, out_file, catalog, data_dir, None if policies == _TRACE_POLICIES
                          else pols, horizon_hours, replay_cadence(every, run_every_hours),
                          time_limit, mip_gap, lambda _: None, out, err, write_json,
                          exogenous=exogenous)
        return
    if exogenous != "none":
        with errors():
            raise InputError("--exogenous sets what the forecasts of a replay with --jobs "
                             "read; a replay of trace-built days forecasts from history only "
                             "(give --jobs FILE, or drop --exogenous)")
    if every is not None or run_every_hours is not None:
        with errors():
            raise InputError("--every and --run-every-hours set the rolling cadence of a "
                             "replay with --jobs; a replay of trace-built days plans each day "
                             "once (give --jobs FILE, or drop the cadence)")
    with errors():
        parse_executor(executor)  # refuse a bad name before the data load
        if scheduler_address and executor.strip().lower() != "dask":
            raise InputError("--scheduler-address needs --executor dask")
        ddir = data_dir or get_settings().data_dir
        pols = tuple(p.strip() for p in policies.split(",") if p.strip())
        if plot:
            from carbonsched.errors import require_extra

            require_extra("matplotlib", "replay --plot", "report")  # before hours of replay
        from carbonsched.cli.replay import replay_progress, trace_replay_table

        if not end.strip():
            from carbonsched.evaluate.replay import DEFAULT_REPLAY_DAYS

            err.print(f"replaying {DEFAULT_REPLAY_DAYS} days from {start} (no --end: a week; "
                      "give --end YYYY-MM-DD for a longer period)", highlight=False)
        with replay_progress(err) as advance, solver_chatter_to_stderr():
            res = run_replay(catalog, ddir, start, end.strip() or None, pols, seed, time_limit,
                             workers=workers, mip_gap=mip_gap, workload_scale=workload_scale,
                             executor=executor, scheduler_address=scheduler_address,
                             target_load=target_load, oracle_time_limit_s=oracle_time_limit,
                             every_days=every_days, advance=advance)
        write_json(out_file, res)
        if plot:
            plot_daily(res, plot)
            err.print(f"plot written to {plot}", highlight=False)
        out.print(trace_replay_table(res))
        if "oracle_unproven_days" in res:
            un, less = res["oracle_unproven_days"], res["oracle_less_work_days"]
            out.print(f"oracle not proven within 0.1 % on {len(un)} day(s): "
                      f"{', '.join(un) or 'none'}; oracle placed less work than milp on "
                      f"{len(less)} day(s): {', '.join(less) or 'none'}; milp share of the "
                      f"oracle's reduction over the other {res.get('proven_days', 0)} day(s): "
                      f"{_fmt(res.get('milp_oracle_share_proven'), 4)}")
            if "milp_share_of_oracle_bound" in res:
                nb = res["oracle_no_bound_days"]
                out.print(f"share of the reduction to the oracle's proven bound (planner "
                          f"objective on the actual signals) over {res['oracle_bound_days']} "
                          f"day(s): milp {_fmt(res['milp_share_of_oracle_bound'], 4)}, greedy "
                          f"{_fmt(res.get('greedy_share_of_oracle_bound'), 4)}"
                          + (f"; no bound on {len(nb)} day(s): {', '.join(nb)}" if nb else ""))
        if res.get("forecast_error"):
            from carbonsched.cli.replay import forecast_error_table

            out.print(forecast_error_table(
                res["forecast_error"], "Carbon-intensity forecast error milp acted on "
                "(24 hourly leads a day)"))
        fb = res.get("forecast_fallback_site_days", {})
        err.print(f"forecast fallbacks on {sum(fb.values())} site-day(s) "
                  f"({', '.join(f'{k} {v}' for k, v in fb.items()) or 'none'}): "
                  "see daily[].forecast_fallbacks")
        err.print(f"results written to {out_file}")


def _fmt(v: float | None, nd: int) -> str:
    return "-" if v is None else f"{v:.{nd}f}"


@bench_app.command("plan")
def bench_plan(
    out_file: Annotated[Path, typer.Option("--out", help="Results JSON.")],
    jobs: Annotated[int, typer.Option(help="Number of jobs.")] = 10_000,
    sites: Annotated[int, typer.Option(help="Number of sites (<= 16 real zones).")] = 16,
    hours: Annotated[int, typer.Option(help="Hourly slots.")] = 48,
    load: Annotated[float, typer.Option(help="Share of the fleet's GPU-hours the work uses.")]
    = 0.3,
    reference: Annotated[bool, typer.Option(
        help="Also solve the straightforward per-job-binary model, side by side.")] = False,
    seed: Annotated[int, typer.Option(help="Instance seed.")] = 0,
    time_limit: Annotated[float, typer.Option(help="Time limit per solve. \\[s]")] = 60.0,
    mip_gap: Annotated[float, typer.Option(help="Gap at which a solve may stop. \\[-]")] = 0.01,
    data_dir: DataDir = None,
) -> None:
    """Planner scale benchmark on an instance built from the real traces."""
    from carbonsched.config import get_settings
    from carbonsched.plan.bench import run_plan_benchmark

    with errors():
        ddir = data_dir or get_settings().data_dir
        with status_line("bench plan"), solver_chatter_to_stderr():
            res = run_plan_benchmark(jobs, sites, hours, load=load, reference=reference,
                                     seed=seed, data_dir=ddir, time_limit_s=time_limit,
                                     mip_gap=mip_gap)
        write_json(out_file, res)
        out.print_json(data={k: v for k, v in res.items() if not isinstance(v, (list, dict))})
        if "reference" in res:
            out.print("reference:")
            out.print_json(data={k: v for k, v in res["reference"].items()
                                 if not isinstance(v, (list, dict))})


@catalog_app.command("list")
def catalog_list() -> None:
    """List the shipped catalogs."""
    from carbonsched.catalog import list_catalogs, load_catalog

    t = table("catalog", "sites", "signals", "description")
    for name in list_catalogs():
        c = load_catalog(name)
        t.add_row(name, str(len(c.sites)), str(c.signal_quality), c.description)
    out.print(t)


@catalog_app.command("show")
def catalog_show(name: Annotated[str, typer.Argument(help="Catalog name or TOML path.")]) -> None:
    """Show a catalog's sites."""
    from carbonsched.catalog import load_catalog

    with errors():
        c = load_catalog(name)
        t = table("site", "role", "zone", "GPUs (nodes × GPUs per node)", "IT cap kW", "backend",
                  title=c.name)
        unshaped = []
        for s in c.sites:
            parts = []
            for k, p in s.gpus.items():
                if p.gpus_per_node is None:
                    unshaped.append(f"{s.id}/{k}")
                    parts.append(f"{p.count}×{k} (one node)")
                else:
                    parts.append(f"{p.count}×{k} ({p.count // p.gpus_per_node}×"
                                 f"{p.gpus_per_node})")
            be = s.backend.cluster or f"{s.backend.context}/{s.backend.namespace}"
            t.add_row(s.id, str(s.role), s.zone, ", ".join(parts), f"{s.it_power_cap_kw:,.0f}",
                      f"{s.backend.kind}:{be}")
        out.print(t)
        if unshaped:
            out.print(f"{len(unshaped)} GPU pool(s) declare no gpus_per_node and count as one "
                      f"node each: {', '.join(unshaped)} (regions/schema.md)")
        mig = [f"{s.id}/{k}" for s in c.sites for k, p in s.gpus.items() if p.sharing == "mig"]
        milli: dict[int, list[str]] = {}
        for s in c.sites:
            for k, p in s.gpus.items():
                if p.sharing == "milli":
                    milli.setdefault(p.shares_per_gpu, []).append(f"{s.id}/{k}")
        models = sorted({p.mig_model for s in c.sites for p in s.gpus.values()
                         if p.sharing == "mig"})
        if mig:
            out.print(f"MIG slices ({', '.join(models)}) for mig_profile jobs: {', '.join(mig)}")
        for shares, pools in sorted(milli.items()):
            out.print(f"gpu_milli shares (time-slicing, {shares} shares per GPU) for gpu_milli "
                      f"jobs: {', '.join(pools)}")


from carbonsched.cli.fleet import register as _register_fleet  # noqa: E402

_register_fleet(catalog_app)
from carbonsched.cli.report import report as _report  # noqa: E402

app.command("report")(_report)
from carbonsched.cli.dispatch import register as _register_dispatch  # noqa: E402

_register_dispatch(app)
from carbonsched.cli.service import register as _register_service  # noqa: E402

_register_service(app)


def main() -> None:
    """Run the CLI (the console script enters at :func:`carbonsched.cli.entry.main`)."""
    from carbonsched.cli.check import precheck

    bad = precheck(sys.argv[1:])
    if bad is not None:
        print_error(bad)
        sys.exit(2)
    from carbonsched.cli.interrupts import handle_signals, interrupted_line
    from carbonsched.errors import Interrupted

    try:
        handle_signals()   # SIGINT and SIGTERM raise Interrupted: every clean-up runs
        app()
    except Interrupted as exc:
        err.print(interrupted_line(exc), highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)


if __name__ == "__main__":
    main()
