"""The solver's note reaches the reader of a plan: every fallback it names, on screen.

``solver.note`` names the fallbacks a solve took (a greedy plan, the direct MILP instead of
column generation, a recount that failed, a time limit). Before, ``plan`` and ``plans show``
printed the solver's status line only, so a plan made by a fallback looked like any other.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from carbonsched.cli.app import app
from carbonsched.cli.plan_view import SOLVER_NOTE_CHARS, solver_note

runner = CliRunner()

FALLBACK = "column generation needs highspy; solved the direct MILP"


def test_solver_note_drops_only_what_the_status_line_says():
    assert solver_note({"note": "solver status Optimal"}) == ""
    assert solver_note({"note": ""}) == "" and solver_note({}) == ""
    assert solver_note({"note": f"{FALLBACK}; solver status Optimal"}) == FALLBACK


def test_a_long_note_is_cut_by_whole_clauses_and_says_how_to_read_it_whole():
    a, b = "a" * 100, "b" * 100
    at_limit = f"{a}; {'c' * (SOLVER_NOTE_CHARS - 102)}"          # exactly the limit: whole
    assert len(at_limit) == SOLVER_NOTE_CHARS
    assert solver_note({"note": at_limit}, SOLVER_NOTE_CHARS) == at_limit
    over = f"{a}; {b}; {'c' * 100}"                                 # 304 chars: two clauses
    assert solver_note({"note": over}, SOLVER_NOTE_CHARS) == (
        f"{a}; {b} … (1 more clause(s); --all-notes prints the whole note)")
    assert solver_note({"note": over}) == over
    one = "d" * 300                                                 # one clause, cut
    assert solver_note({"note": one}, SOLVER_NOTE_CHARS) == (
        "d" * (SOLVER_NOTE_CHARS - 1) + "… (--all-notes prints the whole note)")


@pytest.mark.usefixtures("private_store")
def test_plans_show_prints_the_solver_note(tmp_path):
    from carbonsched.config import get_settings
    from carbonsched.store import Store

    out = tmp_path / "plan.json"
    r = runner.invoke(app, ["plan", "--date", "2026-11-30", "--no-store", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "solver note:" not in r.output          # "solver status Optimal" only
    doc = json.loads(out.read_text())
    doc["plan_id"] = "f" * 32
    doc["solver"]["note"] = f"{FALLBACK}; solver status Optimal"
    Store(get_settings().database_url.get_secret_value()).save_plan(doc)
    shown = runner.invoke(app, ["plans", "show", doc["plan_id"]])
    assert shown.exit_code == 0, shown.output
    assert f"solver note: {FALLBACK}" in " ".join(shown.output.split())
