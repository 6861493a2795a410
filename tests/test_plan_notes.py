"""Quiet, honest notes (issue 34, item 4): only the signals a plan uses are reported missing, and
the screen shows one line per kind of note, counted; ``--verbose`` / ``--all-notes`` every note."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from carbonsched.cli.app import app
from carbonsched.cli.plan_view import NOTE_LINE_CHARS, short_line
from carbonsched.notes import note_line, notes_by_kind
from carbonsched.pipeline.daily import plan_uses

runner = CliRunner()


def test_global_plan_reports_no_price_and_one_line_per_kind(shared_data, tmp_path, monkeypatch):
    monkeypatch.setenv("CARBONSCHED_DATA_DIR", str(shared_data))
    out = tmp_path / "p.json"
    r = runner.invoke(app, ["plan", "--catalog", "global", "--date", "2023-07-15", "--no-store",
                            "--out", str(out)], terminal_width=200)
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    # electricity prices are not part of a carbon plan: no file, hour or age of them is a note
    assert not [n for n in doc["notes"] if "price" in n]
    # what the plan does use and lacks is still said: half of the temperature history
    temp = [n for n in doc["notes"] if "without temperature (NaN)" in n]
    assert len(temp) == len(doc["sites"]) == 8
    shown = [ln for ln in r.output.splitlines() if ln.startswith("note: ")]
    assert doc["notes"][0].startswith("workload: ")       # the DEMO line says it on screen
    kinds = notes_by_kind(doc["notes"][1:], doc["sites"])
    assert shown == [f"note: {short_line(note_line(k), NOTE_LINE_CHARS)}" for k in kinds]
    assert sum(k.count for k in kinds) == len(doc["notes"]) - 1
    assert len(shown) == len({k.kind for k in kinds}) <= 3
    missing = next(ln for ln in shown if ln.startswith("note: missing data (8 notes): "))
    assert "4252 of 8952 hour(s) without temperature (NaN)" in missing
    # every note counted once: those the lines sum, and the DEMO line's apart
    said = " ".join(r.output.split())
    # (it read "(26 notes in 3 lines, one per kind; 1 more said above ...)": 27 in all,
    # which it left the reader to add up)
    assert (f"({len(doc['notes'])} notes in all: {len(doc['notes']) - 1} grouped by kind in the "
            f"{len(shown)} lines above, 1 in the DEMO line; --all-notes prints each one whole)"
            ) in said
    r = runner.invoke(app, ["plan", "--catalog", "global", "--date", "2023-07-15", "--no-store",
                            "--verbose"], terminal_width=200)
    assert len([ln for ln in r.output.splitlines() if ln.startswith("note: ")]) == \
        len(doc["notes"])


def test_plan_uses_tells_price_notes_from_the_others():
    assert not plan_uses("no price file GB_electricity_prices_2023.csv: price NaN for 2023")
    assert not plan_uses("4248 of 8952 hour(s) without price (NaN)")
    assert not plan_uses("a: newest price_usd_per_mwh observation is 49 h old at the issue time")
    assert plan_uses("4252 of 8952 hour(s) without temperature (NaN)")
    assert plan_uses("no weather file for this zone: temperature and humidity NaN")
    assert plan_uses("PUE: weather persistence (same hour, latest day)")    # no "price" in it


def test_notes_by_kind_counts_every_kind_and_keeps_unknown_notes_as_other():
    notes = ["a: 10 of 20 hour(s) without temperature (NaN)",
             "b: 12 of 20 hour(s) without temperature (NaN)",
             "site c left out: fewer than 48 hours",
             "a: something new"]
    kinds = notes_by_kind(notes, ["a", "b", "c"])
    assert [(k.kind, k.count) for k in kinds] == [("missing data", 2), ("site left out", 1),
                                                  ("other", 1)]
    assert kinds[0].text == "sites a, b: 10–12 of 20 hour(s) without temperature (NaN)"
    assert [note_line(k) for k in kinds] == [
        "missing data (2 notes): sites a, b: 10–12 of 20 hour(s) without temperature (NaN)",
        "site left out (1 note): site c left out: fewer than 48 hours",
        "other (1 note): a: something new"]


def test_a_note_line_at_the_limit_is_kept_and_one_over_it_is_cut_and_footed(monkeypatch):
    import io

    from rich.console import Console

    from carbonsched.cli import plan_view as cli

    at = "a" * (NOTE_LINE_CHARS - 10) + "; " + "b" * 8            # exactly the limit
    assert len(at) == NOTE_LINE_CHARS and short_line(at, NOTE_LINE_CHARS) == at
    over = at + "c"
    assert short_line(over, NOTE_LINE_CHARS) == ("a" * (NOTE_LINE_CHARS - 10)
                                                 + " … (--all-notes prints it whole)")
    # one note of one kind, too long: cut on screen, and the footer says --all-notes
    buf = io.StringIO()
    monkeypatch.setattr(cli, "out", Console(file=buf, width=1000))
    monkeypatch.setattr(cli, "notes_by_kind", lambda notes, sites: [notes[0]])
    monkeypatch.setattr(cli, "note_line", lambda k: k)
    doc = {"plan_id": "p" * 32, "date": "2026-11-30", "catalog": "c", "signal_quality": "measured",
           "solver": {"name": "highs", "status": "optimal", "mip_gap": 0.0, "seconds": 1.0},
           "placements": [], "unplaced": [], "sites": [],
           "totals": {"emissions_kg": 1.0, "baseline_emissions_kg": 2.0, "energy_kwh": 3.0},
           "notes": [over]}
    cli.print_plan(doc, [])
    text = buf.getvalue()
    assert "note: " + "a" * (NOTE_LINE_CHARS - 10) + " … (--all-notes prints it whole)" in text
    assert ("(1 note in all: 1 grouped by kind in the 1 line above; --all-notes prints each one "
            "whole)") in text
