"""The plan on screen: the header, the per-site table and the notes, grouped by kind."""

from __future__ import annotations

from typing import Any

from rich.markup import escape

from carbonsched.cli.common import out, table
from carbonsched.notes import note_line, notes_by_kind
from carbonsched.pipeline.document import placed_words

ROUTINE_SOLVER_CLAUSES = ("solver status optimal",)
"""Clauses of a solver note that say only what the solver line shows already (lower case)."""


SOLVER_NOTE_CHARS = 240
"""Longest solver note printed by default; ``--all-notes`` prints it whole. [chars]"""

NOTE_LINE_CHARS = 320
"""Longest grouped note line printed by default (about four terminal lines); ``--all-notes``
prints each note whole. [chars]"""


def short_line(text: str, max_chars: int) -> str:
    """``text`` cut at the last clause boundary (``"; "``, ``" · "``) within ``max_chars``.

    A text that fits is returned as it is; a cut one ends with ``" … (--all-notes prints it
    whole)"``. With no boundary inside the limit the text is cut at ``max_chars``.
    """
    if len(text) <= max_chars:
        return text
    head = text[:max_chars]
    cut = max(head.rfind("; "), head.rfind(" · "))
    return (head[:cut] if cut > 0 else head).rstrip() + " … (--all-notes prints it whole)"


def solver_note(solver: dict[str, object], max_chars: int | None = None) -> str:
    """The plan's ``solver.note`` less its routine clauses (``""`` when nothing is left).

    The note names every fallback the solve took (greedy plan, direct MILP instead of column
    generation, a recount that failed, a time limit): the plan's reader is told it.

    Parameters
    ----------
    solver
        The plan document's ``solver`` block.
    max_chars
        Keep whole clauses up to this length (at least the first clause, cut) and say how many
        more there are; ``None``: every clause.
    """
    note = str(solver.get("note") or "")
    clauses = [c for c in (x.strip() for x in note.split("; "))
               if c and c.lower() not in ROUTINE_SOLVER_CLAUSES]
    text = "; ".join(clauses)
    if max_chars is None or len(text) <= max_chars:
        return text
    kept: list[str] = []
    for c in clauses:
        if kept and len("; ".join([*kept, c])) > max_chars:
            break
        kept.append(c if len(c) <= max_chars else c[:max_chars - 1] + "…")
    more = len(clauses) - len(kept)
    return "; ".join(kept) + (f" … ({more} more clause(s); --all-notes prints the whole note)"
                              if more else " (--all-notes prints the whole note)")


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
    said = solver_note(s, None if all_notes else SOLVER_NOTE_CHARS)
    if said:   # a fallback, a limit hit or a recount the solver's own line does not show
        out.print(f"[yellow]solver note: {escape(said)}[/]", highlight=False, soft_wrap=True)
    t = table(title="Per site (forecast)")
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
    out.print(f"placed {placed_words(doc['placements'])}, {len(doc['unplaced'])} unplaced · "
              f"energy {tot['energy_kwh']:,.0f} kWh · emissions [bold]{tot['emissions_kg']:,.1f}"
              f"[/] kg CO2e vs carbon-agnostic baseline {base:,.1f} kg "
              + (f"([green]{saved:,.1f} kg saved, {pct:.1f}% less[/])" if saved >= 0 else
                 f"([red]{-saved:,.1f} kg more, {-pct:.1f}% more[/])"))
    flex = doc.get("flexibility")
    if flex:
        evs = flex["events"]
        short = sum(e["shortfall_kwh"] for e in evs)
        asked = sum(e["target_shortfall_kwh"] for e in evs)
        colour = "red" if short > 1e-6 else ("yellow" if asked > 1e-6 else "green")
        out.print(f"grid events: {len(evs)} · committed [bold]{flex['offered_mwh']:.3f}[/] MWh "
                  f"of {flex['target_mwh']:.3f} MWh asked · delivered (as planned) "
                  f"{flex['delivered_mwh']:.3f} MWh · [{colour}]shortfall against the "
                  f"commitment {short:.1f} kWh, against the target {asked:.1f} kWh[/] · extra "
                  f"emissions {flex['extra_emissions_kg']:.2f} kg", highlight=False)
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
    said_in: list[str] = []          # the header lines that said a note already
    if wl.get("source") == "demo":   # said above, in the DEMO line
        shown = [n for n in notes if not n.startswith("workload: ")]
        said_in += ["DEMO"] if len(shown) < len(notes) else []
    if doc.get("replay"):            # said above, in the REPLAYED line
        before = len(shown)
        shown = [n for n in shown if not n.startswith("signals: REPLAYED")]
        said_in += ["REPLAYED"] if len(shown) < before else []
    per = "one per kind"
    try:
        lines = [note_line(k) for k in notes_by_kind(shown, doc.get("sites", []))]
    except Exception:   # noqa: BLE001 - display only: the plan must still reach the store
        lines, per = list(shown), "one per note"   # each note as it is: no kind was found
    for line in lines:
        out.print(f"[dim]note: {escape(short_line(line, NOTE_LINE_CHARS))}[/]",
                  highlight=False, soft_wrap=True)
    if len(lines) < len(notes) or any(len(ln) > NOTE_LINE_CHARS for ln in lines):
        # every note counted once: those the lines above sum, and those a header line said
        above = len(notes) - len(shown)
        where = " and ".join(said_in) + (" line" if len(said_in) == 1 else " lines")
        n_lines = f"{len(lines)} line" + ("" if len(lines) == 1 else "s")
        grouped = "grouped by kind" if per == "one per kind" else "one per line"
        head = (f"{len(notes)} note" + ("" if len(notes) == 1 else "s") + " in all: "
                f"{len(shown)} {grouped} in the {n_lines} above"
                + (f", {above} in the {where}" if above else ""))
        out.print(f"[dim]({head}; --all-notes prints each one whole)[/]",
                  highlight=False, soft_wrap=True)


def print_tenants(doc: dict[str, Any]) -> None:
    """Print the tenants' fair shares and the carbon cost of fairness (the "Tenants" table).

    Per tenant: weight, GPU-hours asked and placed, dominant share against its target, quota
    met; then the carbon cost of fairness against the carbon-only plan.
    """
    skipped = [r for r in doc["tenants"] if r.get("fair_applied") is False]
    title = ("Tenants (fairness not applied: shares as placed, not held to targets)"
             if skipped else "Tenants (fair shares)")
    t = table(title=title)
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
    if skipped:
        why = next((n for n in doc.get("notes", []) if n.startswith("fairness not applied")),
                   "fairness not applied: the plan's path does not model fair shares")
        out.print(f"[red]fairness not applied[/] for {len(skipped)} tenant(s): "
                  f"{escape(why.split(': ', 1)[-1])}", highlight=False, soft_wrap=True)
    if tot.get("fairness_cost_kg") is not None:
        base = tot.get("carbon_only_emissions_kg") or 0.0
        pct = 100 * tot["fairness_cost_kg"] / base if base else 0.0
        out.print(f"carbon cost of fairness: {tot['fairness_cost_kg']:+,.2f} kg CO2e "
                  f"({pct:+.2f}%) against the carbon-only plan ({base:,.1f} kg)",
                  highlight=False)
