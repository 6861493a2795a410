"""``carbonsched report``: the sustainability report of a period (see carbonsched.report)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

DataDir = Annotated[Path | None, typer.Option(
    "--data-dir", envvar="CARBONSCHED_DATA_DIR",
    help="Folder of the real public data (../shared/data layout).")]


def report(
    date_from: Annotated[str, typer.Option("--from", help="First day, YYYY-MM-DD (UTC).")],
    date_to: Annotated[str, typer.Option("--to", help="Last day, YYYY-MM-DD (inclusive).")],
    out_file: Annotated[Path, typer.Option("--out", help="File to write.")],
    fmt: Annotated[str, typer.Option("--format", help="csv, json, html or xlsx.")] = "json",
    catalog: Annotated[str | None, typer.Option(
        help="Catalog name or TOML path (default: the stored plans' catalog).")] = None,
    data_dir: DataDir = None,
    instruments: Annotated[Path | None, typer.Option(
        help="Contractual instruments and residual-mix factors per site (TOML; see "
             "carbonsched.report.instruments).")] = None,
    telemetry: Annotated[Path | None, typer.Option(
        help="Power-telemetry export, CSV hour_utc,site,job_id,it_energy_kwh,source.")] = None,
) -> None:
    """Sustainability report: Scope 2 location- and market-based (both rules), SCI, savings."""
    # imported here: carbonsched.cli.app imports this module to register the command
    from carbonsched.cli.common import err, errors
    from carbonsched.config import get_settings
    from carbonsched.fileio import atomic_path
    from carbonsched.report import FORMATS, build_report, render
    from carbonsched.store import Store

    with errors():
        if fmt not in FORMATS:
            from carbonsched.errors import InputError

            raise InputError(f"--format {fmt!r} is not one of {', '.join(FORMATS)}")
        settings = get_settings()
        store = Store(settings.resolved_database_url())
        rep = build_report(store, catalog, data_dir or settings.data_dir, date_from, date_to,
                           instruments=instruments, telemetry=telemetry)
        data = render(rep, fmt)
        with atomic_path(out_file) as tmp:
            tmp.write_bytes(data)
        t = rep.totals
        err.print(f"report {date_from}..{date_to} written to {out_file} ({fmt}): "
                  f"location-based {t['location_based_kg']:,.1f} kg, market-based "
                  f"{t['market_based_kg']:,.1f} kg (2015) / {t['market_based_hourly_kg']:,.1f} kg "
                  f"(hourly), avoided {t['avoided_kg']:,.1f} kg", highlight=False)
        for n in rep.metadata["notes"]:
            err.print(f"note: {n}", highlight=False)
