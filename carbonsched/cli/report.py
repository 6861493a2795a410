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
    out_file: Annotated[Path, typer.Option(
        "--out", help="File to write; with several formats each gets this path with its own "
        "suffix (report.html -> report.html, report.xlsx, report.csv).")],
    fmt: Annotated[str, typer.Option(
        "--format", help="csv, json, html or xlsx, or several comma-separated (e.g. "
        "html,xlsx,csv): the report is computed once and written in each.")] = "json",
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
        fmts = parse_formats(fmt, FORMATS)
        targets = output_paths(out_file, fmts)
        if "xlsx" in fmts:
            from carbonsched.errors import require_extra

            require_extra("openpyxl", "the report's xlsx format", "report")  # before the work
        settings = get_settings()
        store = Store(settings.resolved_database_url())
        rep = build_report(store, catalog, data_dir or settings.data_dir, date_from, date_to,
                           instruments=instruments, telemetry=telemetry)
        for f, path in targets.items():  # one report, rendered in each format
            data = render(rep, f)
            with atomic_path(path) as tmp:
                tmp.write_bytes(data)
        t = rep.totals
        written = ", ".join(f"{p} ({f})" for f, p in targets.items())
        err.print(f"report {date_from}..{date_to} written to {written}: "
                  f"location-based {t['location_based_kg']:,.1f} kg, market-based "
                  f"{t['market_based_kg']:,.1f} kg (2015) / {t['market_based_hourly_kg']:,.1f} kg "
                  f"(hourly), avoided {t['avoided_kg']:,.1f} kg", highlight=False)
        if "fair_shares" in rep.frames:
            pct = t.get("fairness_cost_pct")
            err.print(f"fair shares: {t['fair_tenants_within_5pct']} of "
                      f"{t['fair_tenants_with_target']} tenant-day(s) within 5 % of their "
                      f"target, {t['fair_quotas_missed']} quota(s) missed, carbon cost of "
                      f"fairness {t['fairness_cost_kg']:+,.2f} kg"
                      + (f" ({pct:+.2f} %)" if pct is not None else "")
                      + (f"; fairness not applied for {t['fairness_not_applied_tenants']} "
                         "tenant-day(s)" if t["fairness_not_applied_tenants"] else ""),
                      highlight=False)
        for n in rep.metadata["notes"]:
            err.print(f"note: {n}", highlight=False)


def parse_formats(value: str, known: tuple[str, ...]) -> list[str]:
    """The formats of ``--format``: one, or several comma-separated, in the order given.

    Raises
    ------
    InputError
        An unknown or empty format, or one given twice.
    """
    from carbonsched.errors import InputError

    fmts = [f.strip().lower() for f in value.split(",")]
    bad = [f for f in fmts if f not in known]
    if bad:
        what = "" if len(fmts) == 1 else f": {', '.join(repr(b) for b in bad)}"
        raise InputError(f"--format {value!r}{what} is not one of {', '.join(known)} "
                         "(several, comma-separated: e.g. --format html,xlsx,csv)")
    dup = sorted({f for f in fmts if fmts.count(f) > 1})
    if dup:
        raise InputError(f"--format {value!r} names {', '.join(dup)} twice; give each once")
    return fmts


def output_paths(out_file: Path, fmts: list[str]) -> dict[str, Path]:
    """Where each format goes: ``out_file`` itself for one format, else its path per suffix.

    With several formats ``report.html`` becomes ``report.html``, ``report.xlsx``, ... (a
    suffix that is not a format is kept: ``r.2023`` -> ``r.2023.html``).
    """
    if len(fmts) == 1:
        return {fmts[0]: out_file}
    base = out_file.with_suffix("") if out_file.suffix.lstrip(".").lower() in (
        "csv", "json", "html", "xlsx") else out_file
    return {f: base.with_name(f"{base.name}.{f}") for f in fmts}
