"""``carbonsched store``: look after the store itself (``CARBONSCHED_DATABASE_URL``).

``store prune --keep-days N`` deletes what is older than N days and finished
(:mod:`carbonsched.store.retention`), ``--dry-run`` counts it, ``--vacuum`` compacts a SQLite
file afterwards. The service does the same once a day when ``CARBONSCHED_RETENTION_DAYS`` > 0.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from carbonsched.cli.common import table

store_app = typer.Typer(help="The store itself: retention (CARBONSCHED_DATABASE_URL).",
                        no_args_is_help=True)

SQLITE_NOTE = ("SQLite reuses the freed pages for new rows, but the file does not shrink until "
               "VACUUM: run `carbonsched store prune --keep-days N --vacuum` (it needs as much "
               "free disk as the file and holds the write lock meanwhile)")


def _mib(n: int) -> str:
    return f"{n / 2**20:,.1f} MiB"


def print_prune(result: Any, out: Any) -> None:
    """The table of rows deleted (or that a dry run would delete) per table."""
    what = "Would delete" if result.dry_run else "Deleted"
    t = table("table", "rows", title=f"{what}: finished and older than {result.keep_days} "
              f"day{'s' if result.keep_days != 1 else ''} (before "
              f"{result.cutoff.strftime('%Y-%m-%d %H:%M')} UTC)")
    for name, n in result.deleted.items():
        t.add_row(name, f"{n:,}")
    t.add_row("total", f"{result.total:,}")
    out.print(t)
    if result.tombstones:
        out.print(f"{result.tombstones:,} job id(s) whose rows "
                  f"{'would go' if result.dry_run else 'went'} stay final under their id "
                  "(pruned_jobs): runs, the API and dispatch never take them for new work",
                  highlight=False, soft_wrap=True)


@store_app.command("prune")
def prune_cmd(
    keep_days: Annotated[int | None, typer.Option(
        "--keep-days", help="Keep this many days (at least 1): delete what finished before "
        "now minus N days; a row exactly N days old stays. Default: CARBONSCHED_RETENTION_DAYS "
        "when above 0.", show_default=False)] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Count what would be deleted; delete nothing.")] = False,
    vacuum: Annotated[bool, typer.Option(
        "--vacuum", help="SQLite: afterwards rebuild the file without its free pages (VACUUM) "
        "so it shrinks; needs as much free disk as the file.")] = False,
) -> None:
    """Delete what is older than N days and finished; never pending or running work.

    Goes: terminal dispatch units (Succeeded, Failed, Cancelled) whose end and job deadline
    are older; ended rolling jobs and API jobs; plans that nothing kept references (never the
    newest plan of a catalog) with their placements, inference and forecasts; finished run
    records; ended grid events with their actions; booking ledger rows of pruned plans; signal
    fetch logs and published forecasts. A job id whose rows go stays final under its id (a
    tombstone in pruned_jobs, kept 400 days longer). Batches of rows, one transaction each; a
    second run after an interruption goes on where the first stopped.
    """
    from carbonsched.cli.common import err, errors, out

    with errors():
        from carbonsched.config import get_settings
        from carbonsched.errors import InputError
        from carbonsched.store import Store
        from carbonsched.store.retention import (
            check_keep_days,
            check_vacuum,
            prune,
            sqlite_file_bytes,
        )
        from carbonsched.store.retention import vacuum as run_vacuum

        settings = get_settings()
        if keep_days is None:
            if settings.retention_days <= 0:
                raise InputError("store prune needs --keep-days N (e.g. --keep-days 30), or "
                                 "CARBONSCHED_RETENTION_DAYS set above 0")
            keep_days = settings.retention_days
            source = "CARBONSCHED_RETENTION_DAYS"
        else:
            source = "--keep-days"
        check_keep_days(keep_days, source)
        store = Store(settings.resolved_database_url())
        if vacuum:
            check_vacuum(store)
        result = prune(store, keep_days, dry_run=dry_run)
        print_prune(result, out)
        if store.engine.dialect.name != "sqlite":
            return
        if dry_run:
            if vacuum:
                out.print("dry run: nothing deleted, VACUUM not run", highlight=False,
                          soft_wrap=True)
            return
        if vacuum:
            with err.status("VACUUM: rebuilding the file ..."):
                v = run_vacuum(store)
            out.print(f"VACUUM: {store._safe_url()} {_mib(v.before)} -> {_mib(v.after)}",
                      highlight=False, soft_wrap=True)
        elif result.total:
            size = sqlite_file_bytes(store)
            out.print((f"{_mib(size)} on disk; " if size is not None else "") + SQLITE_NOTE,
                      highlight=False, soft_wrap=True)
