"""``carbonsched catalog init`` and ``carbonsched catalog check``: bring your own fleet.

``init`` writes a commented catalog TOML (and a providers file when rows name a live provider)
from a short CSV or ``--site`` flags; ``check`` validates a catalog and prints, per site, where
each signal comes from, the dates that can be planned and what is modelled or missing
(:mod:`carbonsched.pipeline.fleet`; walk-through in ``docs/your-fleet.md``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from carbonsched.cli.common import table


def catalog_init(
    out_file: Annotated[Path, typer.Argument(help="Catalog TOML to write, e.g. my-fleet.toml.")],
    from_csv: Annotated[Path | None, typer.Option(
        "--from", help="Fleet CSV: a header row, one row per site (and role=area rows for user "
        "areas); columns in docs/your-fleet.md.")] = None,
    site: Annotated[list[str] | None, typer.Option(
        "--site", help="One site as key=value pairs, e.g. \"id=tor role=green-hub "
        "latitude=43.7 longitude=-79.4 timezone=America/Toronto zone=CA-ON gpus=A100:16 "
        "backend=slurm:ontario\"; repeat per site.")] = None,
    name: Annotated[str | None, typer.Option(help="Catalog name (default: the file stem).")]
    = None,
    description: Annotated[str, typer.Option(help="What the fleet is.")] = "",
    providers_out: Annotated[Path | None, typer.Option(
        "--providers-out", help="Providers file to write when rows name a provider (default: "
        "providers-<name>.toml beside the catalog).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite existing files.")] = False,
) -> None:
    """Write a commented catalog TOML for your own sites (from a CSV or --site flags)."""
    from carbonsched.cli.common import err, errors, out
    from carbonsched.errors import InputError
    from carbonsched.fileio import atomic_write_text
    from carbonsched.pipeline.fleet import (
        fleet_catalog_toml,
        fleet_providers_toml,
        parse_site_flag,
        read_fleet_csv,
    )

    with errors():
        if out_file.suffix != ".toml":
            raise InputError(f"{out_file}: a catalog file ends in .toml; give e.g. "
                             f"{out_file.with_suffix('.toml')}")
        rows = read_fleet_csv(from_csv) if from_csv else []
        rows += [parse_site_flag(s, i) for i, s in enumerate(site or [], start=1)]
        if not rows:
            raise InputError("no site given; give --from FILE.csv or one --site per site "
                             "(docs/your-fleet.md)")
        cname = name or out_file.stem
        text = fleet_catalog_toml(rows, cname, description,
                                  str(from_csv) if from_csv else "--site flags")
        prov = fleet_providers_toml(rows, cname)
        prov_file = providers_out or out_file.with_name(f"providers-{cname}.toml")
        targets = [out_file] + ([prov_file] if prov else [])
        existing = [p for p in targets if p.exists()]
        if existing and not force:
            raise InputError(f"{', '.join(map(str, existing))} exists; give --force to "
                             "overwrite it or another file name")
        atomic_write_text(out_file, text)
        n = sum(1 for r in rows if r.get("role") != "area")
        out.print(f"catalog {cname!r} with {n} site(s) written to {out_file}", highlight=False)
        if prov:
            atomic_write_text(prov_file, prov)
            out.print(f"providers file written to {prov_file} (credentials from the "
                      "environment, docs/providers.md)", highlight=False)
        check = f"carbonsched catalog check {out_file}" + (
            f" --providers {prov_file}" if prov else "")
        err.print(f"next: `{check}`, then `carbonsched plan --catalog {out_file} --date "
                  "YYYY-MM-DD`", highlight=False, soft_wrap=True)


def catalog_check(
    catalog: Annotated[str, typer.Argument(help="Catalog name or TOML path.")],
    data_dir: Annotated[Path | None, typer.Option(
        "--data-dir", envvar="CARBONSCHED_DATA_DIR",
        help="Folder of the real public data (../shared/data layout).")] = None,
    providers: Annotated[Path | None, typer.Option(
        envvar="CARBONSCHED_PROVIDERS_FILE",
        help="Providers file: its sites take their signals from provider APIs.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the checks as JSON.")] = False,
) -> None:
    """Validate a catalog; per site: signals and where from, plannable dates, what is missing.

    Exit 0 when every site can be planned, 2 when the catalog is invalid or a site cannot be
    planned at all (the message says which and how to fix it).
    """
    from dataclasses import asdict

    from carbonsched.catalog import load_catalog
    from carbonsched.cli.common import errors, out, print_error
    from carbonsched.config import get_settings
    from carbonsched.pipeline.fleet import check_fleet, common_range

    with errors():
        cat = load_catalog(catalog)
        cfg = None
        if providers is not None:
            from carbonsched.adapters.signals.providers import load_providers

            cfg = load_providers(providers)
        ddir = data_dir or get_settings().data_dir
        checks = check_fleet(cat, ddir, cfg)
    first, last = common_range(checks)
    if as_json:
        typer.echo(json.dumps({"catalog": cat.name, "path": cat.path,
                               "sites": [asdict(c) for c in checks],
                               "common_first_date": first, "common_last_date": last}, indent=2))
    else:
        out.print(f"catalog [cyan]{escape(cat.name)}[/] ({escape(str(cat.path))}): valid, "
                  f"{len(cat.sites)} sites, {len(cat.areas)} user areas, signals "
                  f"{cat.signal_quality}", highlight=False)
        for c in checks:
            t = table("signal", "status", "from", title=f"{c.site_id} ({c.role}, zone {c.zone}, "
                      f"{c.source})")
            for s in c.signals:
                style = {"missing": "red", "partial": "yellow", "modelled": "magenta"}.get(
                    s.status, "")
                t.add_row(s.group, f"[{style}]{s.status}[/]" if style else s.status,
                          escape(s.detail))
            out.print(t)
            out.print(f"  plannable: {escape(c.plannable)}", highlight=False)
        if first:
            out.print(f"every site with data files can be planned from {first} to {last}"
                      if first <= last else
                      f"no date suits every site: the ranges do not overlap ({first} > {last})",
                      highlight=False)
    bad = [c for c in checks if c.problems]
    for c in bad:
        print_error(f"site {c.site_id} cannot be planned: {'; '.join(c.problems)}")
    if bad:
        raise typer.Exit(2)


def register(catalog_app: typer.Typer) -> None:
    """Add ``init`` and ``check`` to ``carbonsched catalog``."""
    catalog_app.command("init")(catalog_init)
    catalog_app.command("check")(catalog_check)
