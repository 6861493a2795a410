"""The plan on screen: the header, the per-site table and the notes, grouped by kind."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from rich.markup import escape
from rich.table import Table

from carbonsched.cli.common import out


def print_plan(doc: dict[str, Any], summary: list[dict[str, Any]],
                all_notes: bool = False) -> None:
    """Print a plan document: its header, per-site table and notes (grouped unless asked)."""
    s = doc["solver"]
    gap = "-" if s["mip_gap"] is None else f"{100 * s['mip_gap']:.2f}%"
    out.print(f"[bold]Plan {doc['plan_id'][:12]}[/] for {doc['date']} · catalog "
              f"[cyan]{doc['catalog']}[/] · signals [yellow]{doc['signal_quality']}[/]")
    if doc.get("replay"):
        from carbonsched.pipeline.replayed import replay_sentence

        out.print(f"[bold magenta]{escape(replay_sentence(doc['replay']))}[/]", highlight=False,
                  soft_wrap=True)
    wl = doc.get("workload") or {}
    if wl.get("source") == "demo":
        out.print("[bold magenta]workload: DEMO[/] — the catalog's generated demo day, not real "
                  "jobs; give --jobs FILE to plan real work", highlight=False)
    out.print(f"solver {s['name']}: [bold]{s['status']}[/], MIP gap {gap}, "
              f"{s['seconds']:.1f} s")
    t = Table(title="Per site (forecast)", title_justify="left")
    for col, j in (("site", "left"), ("role", "left"), ("jobs", "right"),
                   ("job GPU-h", "right"), ("inference GPU-h", "right"), ("energy kWh", "right"),
                   ("emissions kg CO2e", "right")):
        t.add_column(col, justify=j)  # type: ignore[arg-type]
    for r in sorted(summary, key=lambda r: -r["energy_kwh"]):
        t.add_row(r["site"], r["role"], str(r["jobs"]), f"{r['job_gpu_hours']:,.0f}",
                  f"{r['inference_gpu_hours']:,.0f}",
                  f"{r['energy_kwh']:,.0f}", f"{r['emissions_kg']:,.1f}")
    out.print(t)
    if doc.get("tenants"):
        print_tenants(doc)
    tot = doc["totals"]
    base = tot["baseline_emissions_kg"]
    saved = base - tot["emissions_kg"]
    pct = 100 * saved / base if base else 0.0
    out.print(f"placed {len(doc['placements'])} jobs, {len(doc['unplaced'])} unplaced · "
              f"energy {tot['energy_kwh']:,.0f} kWh · emissions [bold]{tot['emissions_kg']:,.1f}"
              f"[/] kg CO2e vs carbon-agnostic baseline {base:,.1f} kg "
              + (f"([green]{saved:,.1f} kg saved, {pct:.1f}% less[/])" if saved >= 0 else
                 f"([red]{-saved:,.1f} kg more, {-pct:.1f}% more[/])"))
    if doc["unplaced"]:
        reasons: dict[str, int] = {}
        for u in doc["unplaced"]:
            reasons[u["reason"]] = reasons.get(u["reason"], 0) + 1
        out.print("unplaced by reason: " + ", ".join(f"{k} {v}" for k, v in reasons.items()))
    notes = doc.get("notes", [])
    if all_notes:
        for note in notes:
            # one physical line per note (the terminal wraps it): cron and CronJob logs are
            # read a note per line
            out.print(f"[dim]note: {escape(note)}[/]", highlight=False, soft_wrap=True)
        return
    shown = notes
    if wl.get("source") == "demo":   # said above, in the DEMO line
        shown = [n for n in notes if not n.startswith("workload: ")]
    if doc.get("replay"):            # said above, in the REPLAYED line
        shown = [n for n in shown if not n.startswith("signals: REPLAYED")]
    try:
        kinds = notes_by_kind(shown, doc.get("sites", []))
    except Exception:   # noqa: BLE001 - display only: the plan must still reach the store
        kinds = [NoteKind("other", 1, n) for n in shown]
    for k in kinds:
        out.print(f"[dim]note: {escape(note_line(k))}[/]", highlight=False, soft_wrap=True)
    if len(kinds) < len(notes):
        out.print(f"[dim]({len(notes)} notes as {len(kinds)} line(s), one per kind; "
                  "--all-notes (or --verbose) prints each)[/]", highlight=False,
                  soft_wrap=True)


@dataclass(frozen=True)
class NoteKind:
    """One line of the plan's notes on screen: a kind, how many notes it holds, their text."""

    kind: str
    count: int
    text: str


def note_line(k: NoteKind) -> str:
    """``"<kind> ×<count>: <text>"`` (``×1`` left out; notes of no known kind as they are)."""
    if k.kind == "other" and k.count == 1:
        return k.text
    return f"{k.kind}: {k.text}" if k.count == 1 else f"{k.kind} ×{k.count}: {k.text}"


NOTE_KINDS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(pattern)) for kind, pattern in (
        ("site left out", r"^site \S+ left out: "),
        ("solver", r"^solver|MIP gap|time limit|greedy"),
        ("workload", r"^workload: "),
        ("modelled signals", r"MODELLED, not measured"),
        ("grid-model calibration", r"fossil must-run floor|implied thermal intensity"),
        ("signal quality", r"quality degraded|observation is .* old|provider's estimate|"
                           r"quarantined|implausible|flat line|gap of|have no value"),
        ("missing data", r"hour\(s\) without|in any of the .* hour\(s\) loaded|^no .* file|"
                         r": no .* file|NaN"),
        ("forecast fallback", r"PUE: |model choice|seasonal naive|persistence|fallback"),
    ))
"""Kinds of plan notes on screen, the first pattern that matches a note's text decides; a note
no pattern matches is of kind ``other``. Display only: the plan document keeps every note."""


def notes_by_kind(notes: list[str], site_ids: list[str]) -> list[NoteKind]:
    """The plan's notes for the screen: one line per kind, with how many notes it holds.

    Each kind's notes are first condensed by :func:`grouped_site_notes` (a text several sites
    share named once, numbers that differ shown as their range); a kind's line joins what is
    left with ``" · "``. Kinds are listed in the order of their first note.

    Parameters
    ----------
    notes : list of str
        The plan's notes, in order.
    site_ids : list of str
        The plan's site ids.

    Returns
    -------
    list of NoteKind
        At most one per kind of :data:`NOTE_KINDS` (and ``other``).
    """
    by_kind: dict[str, list[str]] = {}
    for n in notes:
        kind = next((k for k, rx in NOTE_KINDS if rx.search(n)), "other")
        by_kind.setdefault(kind, []).append(n)
    return [NoteKind(kind, len(items), " · ".join(grouped_site_notes(items, site_ids)))
            for kind, items in by_kind.items()]


def grouped_site_notes(notes: list[str], site_ids: list[str]) -> list[str]:
    """The plan's notes for the screen: one line for a note that several sites share.

    Two passes over notes ``"<site>: <text>"`` of the plan's sites. First, a text other
    sites' notes repeat word for word (e.g. eight modelled Chinese sites without a price) is
    shown once, at its first place, as ``"sites a, b: <text>"`` (``"all 8 sites: <text>"``,
    ``"7 of 8 sites (all but c): <text>"`` when shorter). Then texts equal but for
    their numbers (each modelled site's calibration) are merged the same way, a number that
    differs shown as its range over the group (``"0.08–0.66"``), so the worst value stays on
    screen. Every other note is kept as it is, in order; the plan document keeps them all.

    Parameters
    ----------
    notes : list of str
        The plan's notes, in order.
    site_ids : list of str
        The plan's site ids; only these prefixes are grouped.

    Returns
    -------
    list of str
        At most ``len(notes)`` notes.
    """
    known = set(site_ids)

    def group(items: list[str], key) -> list[str]:
        by_key: dict[str, list[tuple[str, str]]] = {}
        for n in items:
            site, sep, text = n.partition(": ")
            if sep and site in known:
                by_key.setdefault(key(text), []).append((site, text))
        shown: list[str] = []
        done: set[str] = set()
        for n in items:
            site, sep, text = n.partition(": ")
            k = key(text) if sep and site in known else None
            members = by_key.get(k, []) if k is not None else []
            sites = list(dict.fromkeys(m[0] for m in members))
            if len(sites) < 2:
                shown.append(n)
            elif k not in done:
                done.add(k)
                shown.append(f"{_sites_label(sites, site_ids)}: "
                             f"{_merged(m[1] for m in members)}")
        return shown

    # the same text first; then the same text but for its numbers: the key is the text
    # between the numbers, so a number never matches a literal character
    return group(group(notes, lambda t: (t,)), lambda t: tuple(_NUMBER.split(t)[::2]))


def _sites_label(sites: list[str], site_ids: list[str]) -> str:
    """``"all 8 sites"``, ``"7 of 8 sites (all but c)"`` or ``"sites a, b"``, the shortest."""
    every, named = list(dict.fromkeys(site_ids)), set(sites)
    missing = [x for x in every if x not in named]
    n = len(every)
    if not missing and n >= 4:
        return f"all {n} sites"
    if len(sites) >= 4 and 2 * len(missing) < len(sites):
        return f"{len(sites)} of {n} sites (all but {', '.join(missing)})"
    return f"sites {', '.join(sites)}"


def _merged(texts) -> str:
    """Texts equal but for their numbers, as one: a number that differs becomes its range."""
    texts = list(texts)
    if len(set(texts)) == 1:
        return texts[0]
    pieces = [_NUMBER.split(t) for t in texts]     # text, number, text, ..., text
    out = []
    for i, piece in enumerate(pieces[0]):
        if i % 2 == 0:
            out.append(piece)
            continue
        values = [p[i] for p in pieces]
        lo = min(values, key=_number)
        hi = max(values, key=_number)
        out.append(lo if _number(lo) == _number(hi) else f"{lo}–{hi}")
    return "".join(out)


def _number(text: str) -> float:
    return float(text.replace(",", ""))


_NUMBER = re.compile(r"(?<![\w.:/-])([-+]?\d+(?:,\d{3})*(?:\.\d+)?)(?!\w|[.,:/-]\d)")
"""A number standing alone in a note (not part of a word such as ``CO2`` or ``s05``, nor of a
date or a dotted version such as ``2023-07-15`` or ``1.2.3``)."""


def print_tenants(doc: dict[str, Any]) -> None:
    """Print the tenants' fair shares and the carbon cost of fairness (the "Tenants" table).

    Per tenant: weight, GPU-hours asked and placed, dominant share against its target, quota
    met; then the carbon cost of fairness against the carbon-only plan.
    """
    t = Table(title="Tenants (fair shares)", title_justify="left")
    for col, j in (("tenant", "left"), ("weight", "right"), ("GPU-h asked", "right"),
                   ("GPU-h placed", "right"), ("dominant share", "right"),
                   ("fair target", "right"), ("quota GPU-h", "right"), ("quota met", "left")):
        t.add_column(col, justify=j)  # type: ignore[arg-type]
    for r in doc["tenants"]:
        met = "-" if r.get("quota_met") is None else ("yes" if r["quota_met"] else "[red]no[/]")
        t.add_row(r["tenant"], f"{r['weight']:g}", f"{r['demand_gpu_hours']:,.0f}",
                  f"{r['placed_gpu_hours']:,.0f}", f"{100 * r['dominant_share']:.1f}%",
                  f"{100 * r['target_share']:.1f}%", f"{r['quota_gpu_hours']:,.0f}", met)
    out.print(t)
    tot = doc["totals"]
    if tot.get("fairness_cost_kg") is not None:
        base = tot.get("carbon_only_emissions_kg") or 0.0
        pct = 100 * tot["fairness_cost_kg"] / base if base else 0.0
        out.print(f"carbon cost of fairness: {tot['fairness_cost_kg']:+,.2f} kg CO2e "
                  f"({pct:+.2f}%) against the carbon-only plan ({base:,.1f} kg)",
                  highlight=False)
