"""``carbonsched grid-event``: announce grid events, list them, show one's actions, act once.

``add`` stores an event (the service's ``grid`` loop acts on it: pauses and holds at its start,
resumes and releases at its end); ``apply`` runs one such pass from this process, for a
deployment without ``carbonsched serve`` or to act at once. Same service calls as
``/v1/grid-events`` (:mod:`carbonsched.service.grid_events`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from carbonsched.cli.common import table

if TYPE_CHECKING:
    from carbonsched.dispatch.grid import GridPassSummary

grid_app = typer.Typer(help="Grid events: shed a site's power in a window, then resume "
                       "(CARBONSCHED_DATABASE_URL).", no_args_is_help=True)


def _store():
    from carbonsched.config import get_settings
    from carbonsched.store import Store

    return Store(get_settings().resolved_database_url())


def _now() -> datetime:
    return datetime.now(UTC)


@grid_app.command("add")
def add(
    site: Annotated[str, typer.Option(help="Catalog site id.")],
    start: Annotated[str, typer.Option(help="Start of the window, ISO 8601 with a zone, on "
                                       "the hour; 'now': the current hour's start.")],
    end: Annotated[str, typer.Option(help="End of the window (exclusive), ISO 8601 with a "
                                     "zone, on the hour.")],
    target_kw: Annotated[float | None, typer.Option(
        "--target-kw", help="IT power to shed. [kW]")] = None,
    target_fraction: Annotated[float | None, typer.Option(
        "--target-fraction", help="Share of the site's baseline power to shed, (0, 1].")]
    = None,
    notice_minutes: Annotated[float | None, typer.Option(
        help="How long before the start the event was announced, 0 to a year (527040). "
        "Default 240. [min]")] = None,
    catalog: Annotated[str | None, typer.Option(
        help="Catalog name or path the site is in (default CARBONSCHED_CATALOG).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the event as JSON.")] = False,
) -> None:
    """Store a grid event; the service (or `grid-event apply`) acts on it."""
    from carbonsched.catalog import load_catalog
    from carbonsched.cli.common import errors, out
    from carbonsched.flex import GridEvent, event_notice
    from carbonsched.service.grid_events import announce_event

    with errors():
        now = _now()
        # the event's rules and words are the API's and an event file's (carbonsched.flex)
        ev = GridEvent(site=site, end=end, target_kw=target_kw, target_fraction=target_fraction,
                       start=(now.replace(minute=0, second=0, microsecond=0) if start == "now"
                              else start),
                       **({} if notice_minutes is None else
                          {"notice": event_notice(notice_minutes)}))
        from carbonsched.config import get_settings

        d = announce_event(_store(), load_catalog(catalog or get_settings().catalog), ev, now,
                           "cli")
        if as_json:
            typer.echo(json.dumps(d, indent=2))
            return
        out.print(f"grid event {d['event_id']} at {d['site']}: {d['start']} to {d['end']}, "
                  "shed " + (f"{d['target_kw']:g} kW" if d["target_kw"] is not None
                             else f"{100 * d['target_fraction']:g} % of the baseline")
                  + f"; state {d['state']}. The service's grid loop acts on it (or run "
                  f"`carbonsched grid-event apply`); follow it with `carbonsched grid-event "
                  f"show {d['event_id']}`", highlight=False, soft_wrap=True)


@grid_app.command("list")
def list_(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
    = False,
) -> None:
    """List grid events, newest start first, with what was shed."""
    from carbonsched.cli.common import errors, out
    from carbonsched.service.grid_events import list_events

    with errors():
        rows = list_events(_store(), _now())
        if as_json:
            typer.echo(json.dumps(rows, indent=2))
            return
        if not rows:
            out.print("no grid events recorded; add one with `carbonsched grid-event add`",
                      soft_wrap=True)
            return
        t = table("event_id", "site", "start (UTC)", "end (UTC)", "state", "target kW",
                  "planned kW", "shortfall kW", "actions", title="Grid events")
        for r in rows:
            t.add_row(r["event_id"], r["site"], r["start"][:16], r["end"][:16], r["state"],
                      _kw(r["target_reduction_kw"]) if r["target_reduction_kw"] is not None
                      else (f"{r['target_kw']:g}" if r["target_kw"] is not None
                            else f"{100 * r['target_fraction']:g} %"),
                      _kw(r["planned_reduction_kw"]), _kw(r["shortfall_kw"]),
                      ", ".join(f"{k} {v}" for k, v in sorted(r["counts"].items())))
        out.print(t)


def _kw(v: float | None) -> str:
    return "-" if v is None else f"{v:,.1f}"


@grid_app.command("show")
def show(
    event_id: Annotated[str, typer.Argument(help="The event id (ge-...).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Show one event: the re-plan's choice and every action with its state."""
    from carbonsched.cli.common import errors, out
    from carbonsched.service.grid_events import show_event

    with errors():
        d = show_event(_store(), event_id, _now())
        if as_json:
            typer.echo(json.dumps(d, indent=2))
            return
        out.print(f"{d['event_id']} at {d['site']} {d['start']} to {d['end']}: {d['state']}; "
                  f"{d['detail'] or 'not re-planned yet (it has not started)'}",
                  highlight=False, soft_wrap=True)
        t = table("key", "action", "state", "backend id", "kW", "detail")
        for a in d["actions"]:
            t.add_row(a["key"], a["action"], a["state"], a["backend_id"] or "-",
                      f"{a['power_kw']:.1f}", a["detail"])
        out.print(t)


@grid_app.command("apply")
def apply(
    catalog: Annotated[str | None, typer.Option(
        help="Catalog name or path of the sites (default CARBONSCHED_CATALOG).")] = None,
    event_id: Annotated[str | None, typer.Option("--event", help="Only this event.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the pass as JSON.")] = False,
) -> None:
    """Run one pass now: re-plan started events, pause/hold, resume/release at their end.

    Counts the actions taken, found done (an earlier attempt's) and skipped (the backend could
    not take them; each named with why). Exit 3 when an action is left for a later pass because
    its backend is unreachable, 1 when one failed after its retries, 2 when a pause or hold was
    skipped while its job may still draw power (the event sheds less than its re-plan planned).
    """
    from carbonsched.catalog import load_catalog
    from carbonsched.cli.common import errors, out
    from carbonsched.config import get_settings
    from carbonsched.dispatch.outbox import build_adapters
    from carbonsched.service.grid_events import apply_events, show_event

    with errors():
        settings = get_settings()
        cat = load_catalog(catalog or settings.catalog)
        store = _store()
        summary = apply_events(store, cat, build_adapters(cat, settings=settings), settings,
                               _now, event_id=event_id)
        d = summary.to_dict()
        if as_json:
            typer.echo(json.dumps(d, indent=2))
        else:
            for line in pass_lines(summary, lambda e: show_event(store, e, _now())):
                out.print(line, highlight=False, soft_wrap=True)
        if d["retry"]:
            raise typer.Exit(3)
        if d["failed"]:
            raise typer.Exit(1)
        if summary.load_not_shed:
            raise typer.Exit(2)


SKIPPED_SHOWN = 10
"""How many skipped actions ``grid-event apply`` names, one line each."""


def pass_lines(summary: GridPassSummary, event: Callable[[str], dict[str, Any]]) -> list[str]:
    """What ``grid-event apply`` prints about one pass (plain text).

    Parameters
    ----------
    summary
        The pass (:func:`carbonsched.dispatch.grid.grid_pass`).
    event
        Event id -> the event as :func:`carbonsched.service.grid_events.show_event` gives it;
        read only for an event with a pause or hold skipped while its job may still draw power.

    Returns
    -------
    list of str
        The counts (taken, found done, settled at the event's end when any, skipped, left for
        the next pass, failed, ended); each skipped action with why (the first
        :data:`SKIPPED_SHOWN`); each action left or failed with why; and per event with load
        not shed, its kW against the re-plan's figures (the event's ``planned_reduction_kw``
        and ``shortfall_kw`` are the re-plan's and do not count a skipped action).
    """
    n: dict[str, int] = {}
    for *_, outcome in summary.taken:
        n[outcome] = n.get(outcome, 0) + 1
    parts = [f"{len(summary.planned)} re-planned", f"{n.get('done', 0)} action(s) taken",
             f"{n.get('already', 0)} found done"]
    if n.get("settled"):
        parts.append(f"{n['settled']} settled at the event's end")
    parts += [f"{len(summary.skipped)} skipped", f"{len(summary.retry)} left for the next pass",
              f"{len(summary.failed)} failed", f"{len(summary.ended)} ended"]
    lines = ["grid events: " + ", ".join(parts)]
    for a in summary.skipped[:SKIPPED_SHOWN]:
        what = ("NOT SHED, " if a.load_not_shed else "") + a.outcome
        lines.append(f"  skipped {a.event_id} {a.action} {a.key} ({what}, {a.power_kw:.1f} kW): "
                     f"{a.why}")
    if len(summary.skipped) > SKIPPED_SHOWN:
        lines.append(f"  ... and {len(summary.skipped) - SKIPPED_SHOWN} more skipped; "
                     "`carbonsched grid-event show EVENT` lists every action")
    for event_id, key, action, why in summary.retry + summary.failed:
        lines.append(f"  {event_id} {action} {key}: {why}")
    unshed: dict[str, list[float]] = {}
    for a in summary.load_not_shed:
        unshed.setdefault(a.event_id, []).append(a.power_kw)
    for event_id, kws in unshed.items():
        ev = event(event_id)
        planned, short = ev["planned_reduction_kw"] or 0.0, ev["shortfall_kw"] or 0.0
        target = ev["target_reduction_kw"] or 0.0
        # what is shed now: the re-plan's reduction less the skipped draws (a re-plan that
        # shed more than asked may still meet the target)
        now_short = max(0.0, target - (planned - sum(kws)))
        lines.append(f"  {event_id}: {sum(kws):.1f} kW of the {planned:.1f} kW its re-plan "
                     f"chose to shed is not shed ({len(kws)} pause or hold skipped in this "
                     f"pass); its recorded shortfall ({short:.1f} kW) is the re-plan's figure "
                     f"and does not count it: {now_short:.1f} kW short of the "
                     f"{target:.1f} kW asked")
    return lines
