"""``carbonsched signals check`` and ``carbonsched ingest``: the live providers from the shell.

``signals check`` asks every (provider, zone, signal group) the providers file binds for the last
hours before "now" (nothing is cached) and prints one table row each: reachable, authorised, zone
known, the newest value and its age. ``ingest`` backfills the cache for sites and a date range,
fetching only the hours the cache lacks. Both read credentials from the environment or the
secrets file (``regions/schema.md``); neither prints a credential.

Exit codes as every command: 0 success; 2 configuration (credentials, region, file); 3 a provider
or the database unavailable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import pandas as pd
import typer
from rich.markup import escape

from carbonsched.cli.common import table
from carbonsched.errors import (
    CarbonschedError,
    InputError,
    ProviderConfigError,
    ProviderError,
    ProviderUnavailableError,
)

signals_app = typer.Typer(help="Live signal providers: configuration check.",
                          no_args_is_help=True)

ProvidersFile = Annotated[Path, typer.Option(
    "--providers", envvar="CARBONSCHED_PROVIDERS_FILE",
    help="Providers file (TOML, regions/schema.md section 'Providers file').")]
BaseUrl = Annotated[str | None, typer.Option(
    "--base-url", envvar="CARBONSCHED_PROVIDERS_BASE_URL",
    help="Send every provider's requests to this URL instead (a local replay).")]
Now = Annotated[str | None, typer.Option(
    "--now", help="Pretend it is this UTC time (ISO 8601), e.g. to replay 2023. Default: now.")]


def _clock(now: str | None):
    if not now:
        from carbonsched.adapters.signals.live import utc_now

        return utc_now
    ts = pd.Timestamp(now)
    ts = ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")
    return lambda: ts


def live_signals(providers: Path, base_url: str | None = None, now: str | None = None,
                 database_url: str | None = None) -> Any:
    """A :class:`~carbonsched.adapters.signals.live.LiveSignals` on the configured store."""
    from carbonsched.adapters.signals.live import LiveSignals
    from carbonsched.adapters.signals.providers import load_providers
    from carbonsched.config import get_settings
    from carbonsched.store import Store
    from carbonsched.store.signal_cache import SignalCache

    cfg = load_providers(providers)
    if base_url:
        cfg = cfg.with_base_url(base_url)
    store = Store(database_url or get_settings().resolved_database_url())
    return LiveSignals(cfg, SignalCache(store), clock=_clock(now))


@signals_app.command("check")
def check(
    providers: ProvidersFile,
    catalog: Annotated[str | None, typer.Option(
        help="Catalog whose sites the file configures (default: CARBONSCHED_CATALOG, "
        "china-eastdata-westcompute).")] = None,
    base_url: BaseUrl = None,
    now: Now = None,
    hours: Annotated[int, typer.Option(help="Hours before now asked of each provider. [h]")]
    = 24,
) -> None:
    """Verify every configured provider: reachable, authorised, zone known; print a table.

    Sites of the file that the catalog lacks are named and not checked; a file none of whose
    sites is in the catalog is refused (exit 2): it was meant for another catalog.
    """
    from carbonsched.catalog import load_catalog
    from carbonsched.cli.common import err, errors, out
    from carbonsched.config import get_settings

    with errors():
        live = live_signals(providers, base_url, now)
        cat = load_catalog(catalog if catalog is not None else get_settings().catalog)
        t_now = live.clock().floor("h")
        start = t_now - pd.Timedelta(hours=hours)
        seen: dict[tuple[str, str, str], list[str]] = {}
        sites = {s.id: s for s in cat.sites}
        other = sorted(set(live.config.sites) - set(sites))
        if other and len(other) == len(live.config.sites):
            live.close()
            raise InputError(f"none of the {len(other)} site(s) of {providers} is in catalog "
                             f"{cat.name!r} ({', '.join(other[:8])}"
                             f"{', ...' if len(other) > 8 else ''}): give the catalog it "
                             "configures with --catalog")
        if other:
            err.print(f"[yellow]not checked[/]: {len(other)} site(s) of {escape(str(providers))} "
                      f"are not in catalog {cat.name!r}: {escape(', '.join(other))}",
                      highlight=False, soft_wrap=True)
        for sid, bindings in live.config.sites.items():
            if sid not in sites:
                continue
            for group, b in bindings.items():
                seen.setdefault((b.provider, b.zone or sites[sid].zone, group), []).append(sid)
        tbl = table(title=f"Signal providers at {t_now.isoformat()}")
        for col in ("provider", "kind", "zone", "signal", "sites", "status", "newest value",
                    "age h", "requests", "detail"):
            tbl.add_column(col, justify="right" if col in ("age h", "requests") else "left")
        worst = 0
        for (name, zone, group), site_ids in sorted(seen.items()):
            spec = live.config.providers[name]
            binding = live.config.sites[site_ids[0]][group]
            before = live.requests
            newest = age = ""
            try:
                frame, meta = live.fetch(binding, sites[site_ids[0]], zone, start, t_now)
                status, detail = "[green]ok[/]", "; ".join(meta.get("notes", []))[:80]
                if meta.get("newest_value_at"):
                    n = pd.Timestamp(meta["newest_value_at"])
                    newest = n.strftime("%Y-%m-%d %H:%M")
                    age = f"{(t_now - (n + pd.Timedelta(hours=1))) / pd.Timedelta(hours=1):.0f}"
                else:
                    status, detail = "[yellow]no data[/]", f"no value in the last {hours} h"
                    worst = max(worst, 1)
            except ProviderConfigError as exc:
                status, detail, worst = "[red]config[/]", exc.detail, max(worst, 2)
            except ProviderUnavailableError as exc:
                status, detail, worst = "[red]unavailable[/]", exc.detail, max(worst, 3)
            except (ProviderError, CarbonschedError) as exc:
                status, detail, worst = "[red]error[/]", str(exc), max(worst, 3)
            tbl.add_row(name, spec.kind, zone, group, ", ".join(site_ids), status, newest,
                        age, str(live.requests - before), escape(detail[:120]))
        live.close()
        out.print(tbl)
        if worst >= 2:
            raise typer.Exit(2 if worst == 2 else 3)


def ingest(
    site: Annotated[list[str], typer.Option("--site", help="Site id (repeat for several).")],
    date_from: Annotated[str, typer.Option("--from", help="First day, YYYY-MM-DD (UTC).")],
    date_to: Annotated[str, typer.Option("--to", help="Last day, YYYY-MM-DD (UTC), included.")],
    providers: ProvidersFile,
    catalog: Annotated[str, typer.Option(help="Catalog of the sites.")] = "global",
    base_url: BaseUrl = None,
    now: Now = None,
) -> None:
    """Backfill the signal cache for sites and days, fetching only the hours it lacks."""
    from carbonsched.adapters.signals.providers import GROUPS
    from carbonsched.catalog import load_catalog
    from carbonsched.cli.common import errors, out
    from carbonsched.timeaxis import day_start_utc

    with errors():
        cat = load_catalog(catalog)
        chosen = [cat.site(s) for s in site]
        start = day_start_utc(date_from)
        end = day_start_utc(date_to) + pd.Timedelta(days=1)
        if end <= start:
            raise typer.BadParameter(f"--to {date_to} is before --from {date_from}")
        live = live_signals(providers, base_url, now)
        fetch_end = min(end, live.clock().floor("h"))
        tbl = table(title=f"Ingest {start:%Y-%m-%d} .. {end:%Y-%m-%d} (end excluded)")
        for col in ("site", "signal", "provider", "zone", "gaps fetched", "requests",
                    "newest value", "status"):
            tbl.add_column(col)
        failed = 0
        noted: list[str] = []
        for s in chosen:
            for group, b in live.config.site(s.id).items():
                zone = b.zone or s.zone
                info = live.ensure(b, s, zone, start, fetch_end)
                newest = live.cache.newest(b.provider, zone, GROUPS[group][0])
                status = "[green]ok[/]" if info["error"] is None else \
                    f"[red]failed[/]: {escape(info['error'][:100])}"
                failed += info["error"] is not None
                noted.extend(f"{s.id}: {n}" for n in info["notes"])
                tbl.add_row(s.id, group, b.provider, zone, str(len(info["gaps"])),
                            str(info["requests"]),
                            "" if newest is None else newest.strftime("%Y-%m-%d %H:%M"),
                            status)
        live.close()
        out.print(tbl)
        for n in noted:   # what the providers' readers noted of the hours fetched
            out.print(f"[dim]note: {escape(n)}[/]", highlight=False, soft_wrap=True)
        if failed:
            raise typer.Exit(3)
