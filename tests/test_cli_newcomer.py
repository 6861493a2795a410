"""A newcomer finds the result (issue 7, item 10): where the plan went, `plans list/show`, the
demo label, fast refusal of bad options, and a forecast from a carbon-intensity-only history."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from carbonsched.catalog import load_catalog
from carbonsched.cli.app import app
from carbonsched.cli.check import precheck
from carbonsched.cli.plan_view import NOTE_LINE_CHARS, short_line
from carbonsched.errors import InputError, TimeAxisError
from carbonsched.pipeline.daily import forecast_site

runner = CliRunner()


@pytest.fixture(autouse=True)
def _private_store(private_store):
    """Every test here on a store of its own (``tests/conftest.py``)."""


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_plan_says_where_it_was_recorded_and_plans_show_returns_it(tmp_path):
    out = tmp_path / "plan.json"
    r = runner.invoke(app, ["plan", "--date", "2026-11-30", "--out", str(out)])
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    pid = doc["plan_id"]
    text = _flat(r.output)
    assert f"plan written to {out}" in text
    assert (f"plan {pid[:12]} recorded in {tmp_path}/store.db; get it as JSON with "
            f"`carbonsched plans show {pid[:12]} --json`") in text
    # ... on one line as printed: a command broken over two lines cannot be copied
    hint = next(ln for ln in r.output.splitlines() if ln.startswith(f"plan {pid[:12]} recorded"))
    assert hint.endswith("list plans with `carbonsched plans list`")
    assert f"`carbonsched plans show {pid[:12]} --json`" in hint
    # electricity prices are not part of a carbon plan: not reported missing, on screen or in
    # the document (issue 34)
    assert not [n for n in doc["notes"] if "price" in n]
    assert "price" not in r.output
    # one line per kind of note, with its count; --all-notes prints all
    shown = [ln for ln in r.output.splitlines() if ln.startswith("note: ")]
    assert len(shown) <= 3 < len(doc["notes"])
    # each note one physical line, however long (not a terminal: a log is read per line)
    from carbonsched.notes import note_line, notes_by_kind

    kinds = notes_by_kind(doc["notes"][1:], doc["sites"])
    assert shown == [f"note: {short_line(note_line(k), NOTE_LINE_CHARS)}" for k in kinds]
    assert sum(k.count for k in kinds) == len(doc["notes"]) - 1
    # each line says its count, one note too, so the lines add up to the footer's total
    counts = [re.match(r"note: [a-z -]+ \((\d+) notes?\): ", ln) for ln in shown]
    assert all(counts), shown
    assert sum(int(m.group(1)) for m in counts) == len(doc["notes"]) - 1
    assert [k.kind for k in kinds] == ["modelled signals", "grid-model calibration"]
    # the saving against the baseline says what it is, with the document's numbers
    tot = doc["totals"]
    saved = tot["baseline_emissions_kg"] - tot["emissions_kg"]
    assert saved > 0
    assert (f"({saved:,.1f} kg saved, {100 * saved / tot['baseline_emissions_kg']:.1f}% less)"
            in _flat(r.output))
    # read back, the per-site table is the one `plan` printed: every site, idle ones too, with
    # its role
    back = runner.invoke(app, ["plans", "show", pid])
    assert back.exit_code == 0, back.output

    def table(text: str) -> list[str]:
        rows = [ln for ln in text.splitlines() if ln.startswith("│")]
        return sorted(" ".join(ln.split()) for ln in rows)

    assert table(back.output) == table(r.output)
    # no line ends in spaces (Rich pads a left-justified title to the table's width), so a log
    # or a paste has none: the per-site table's title is there, unpadded
    assert "Per site (forecast)" in r.output.splitlines()
    assert [ln for ln in (r.output + back.output).splitlines() if ln != ln.rstrip()] == []
    assert len(table(r.output)) == len(doc["sites"])
    assert set(doc["site_roles"]) == set(doc["sites"])
    assert max(len(ln) for ln in shown) > 150
    # every note counted once: those the lines sum, and the DEMO line's apart
    # (it read "(26 notes in 3 lines, one per kind; 1 more said above ...)": 27 in all,
    # which it left the reader to add up)
    assert (f"({len(doc['notes'])} notes in all: {len(doc['notes']) - 1} grouped by kind in the "
            f"{len(shown)} lines above, 1 in the DEMO line; --all-notes prints each one whole)"
            ) in text
    # the DEMO workload note is the DEMO line above the table, not a note again
    assert not any(ln.startswith("note: workload") for ln in shown)
    r = runner.invoke(app, ["plans", "show", pid, "--all-notes"])
    assert r.exit_code == 0, r.output
    assert len([ln for ln in r.output.splitlines() if ln.startswith("note: ")]) == \
        len(doc["notes"])
    n_sites = len(doc["sites"])
    assert f"note: modelled signals ({n_sites} notes): all {n_sites} sites: " in text
    # every site named once on the calibration line (per year and why merged)
    calib = next(ln for ln in shown if ln.startswith("note: grid-model calibration ("))
    for site in doc["sites"]:
        assert calib.count(f"{site}:") <= 1, calib
    # the demo workload is labelled, on screen and in the document
    assert "workload: DEMO" in text
    assert doc["workload"]["source"] == "demo" and len(doc["workload"]["jobs"]) == 30
    assert len(doc["workload"]["inference_power"]) > 0
    assert doc["notes"][0].startswith("workload: the catalog's generated DEMO day")
    # a second plan, then list and show
    r = runner.invoke(app, ["plan", "--date", "2026-12-01", "--no-store", "--out",
                            str(tmp_path / "p2.json")])
    assert r.exit_code == 0
    assert "recorded" not in r.output                                # --no-store
    r = runner.invoke(app, ["plans", "list", "--json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    assert [x["plan_id"] for x in rows] == [pid]
    assert rows[0]["date"] == "2026-11-30" and rows[0]["solver_status"] == "optimal"
    r = runner.invoke(app, ["plans", "show", "latest", "--json"])
    assert r.exit_code == 0
    assert json.loads(r.stdout) == doc
    r = runner.invoke(app, ["plans", "show", pid, "--json"])
    assert json.loads(r.stdout) == doc
    # the id as the header prints it (its first 12 characters) names the plan too
    r = runner.invoke(app, ["plans", "show", pid[:12], "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == doc
    r = runner.invoke(app, ["plans", "show", pid])
    assert r.exit_code == 0 and f"Plan {pid[:12]} for 2026-11-30" in r.output
    assert "workload: DEMO" in r.output
    r = runner.invoke(app, ["plans", "list"])
    assert pid in r.output and "2026-11-30" in r.output


def test_plans_show_unknown_or_empty_store_is_exit_2():
    r = runner.invoke(app, ["plans", "show", "latest"])
    assert r.exit_code == 2 and "no plan recorded yet" in _flat(r.output)
    r = runner.invoke(app, ["plans", "show", "nope"])
    assert r.exit_code == 2 and "no plan 'nope'" in r.output
    r = runner.invoke(app, ["plans", "show", "0c831765c6f9"])
    assert r.exit_code == 2 and "no plan '0c831765c6f9'" in r.output
    r = runner.invoke(app, ["plans", "list"])
    assert r.exit_code == 0 and "no plans recorded" in r.output
    r = runner.invoke(app, ["plans", "list", "--limit", "0"])
    assert r.exit_code == 2 and "--limit 0 must be >= 1" in r.output


def test_plan_without_store_or_out_says_the_plan_is_not_kept():
    r = runner.invoke(app, ["plan", "--date", "2026-11-30", "--no-store"])
    assert r.exit_code == 0
    assert "was neither recorded (--no-store) nor written; add --out plan.json" in \
        _flat(r.output)


def test_a_jobs_file_is_not_labelled_demo(tmp_path, fixtures_dir):
    out = tmp_path / "plan.json"
    r = runner.invoke(app, ["plan", "--date", "2023-07-15", "--no-store", "--jobs",
                            str(fixtures_dir / "workload" / "day.json"), "--out", str(out)])
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    assert doc["workload"]["source"] == "file" and len(doc["workload"]["jobs"]) == 2
    assert "DEMO" not in r.output and not any("DEMO" in n for n in doc["notes"])


BAD_OPTIONS = [
    (["--date", "2023-02-30"], "date '2023-02-30' is not YYYY-MM-DD (a calendar day)"),
    (["--date=2023-7-1"], "date '2023-7-1' is not YYYY-MM-DD"),
    (["--solver", "gurobi"], "unknown solver 'gurobi'; use --solver highs (default)"),
    (["--time-limit", "nan"], "solver time limit must be > 0 s, got nan"),
    (["--time-limit", "inf"], "solver time limit must be > 0 s, got inf"),
    (["--time-limit", "abc"], "--time-limit 'abc' is not a number of seconds"),
    (["--hours", "0"], "horizon of 0 h is outside 1..168 h"),
    (["--hours", "1.5"], "--hours '1.5' is not a whole number of hours"),
]


@pytest.mark.parametrize(("args", "message"), BAD_OPTIONS)
def test_bad_option_is_refused_in_under_a_second_before_heavy_imports(args, message):
    # the console script's own entry point, in a fresh interpreter: measured wall time and the
    # modules it loaded (pandas, pulp, sqlalchemy, typer's pydantic must not be among them)
    code = ("import sys, time; t = time.perf_counter()\n"
            "from carbonsched.cli.entry import main\n"
            f"sys.argv = ['carbonsched', 'plan', *{args!r}]\n"
            "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\n"
            "heavy = [m for m in ('pandas', 'pulp', 'sqlalchemy', 'pydantic', 'typer', 'numpy')"
            " if m in sys.modules]\n"
            "print(code, round(time.perf_counter() - t, 3), heavy)\n")
    best = None
    for _ in range(3):
        t = time.perf_counter()
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=60, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
        wall = time.perf_counter() - t
        best = wall if best is None else min(best, wall)
    code_, inner, heavy = r.stdout.split(" ", 2)
    assert code_ == "2" and heavy.strip() == "[]", r.stdout
    assert f"error: {message}" in r.stderr
    assert best < 1.0, f"refusal took {best:.2f} s (interpreter start included)"
    # and the same check runs inside the Typer command (in-process callers, CliRunner)
    assert message in (precheck(["plan", *args]) or "")


def test_precheck_lets_good_command_lines_through():
    assert precheck(["plan", "--date", "2023-07-15", "--solver", "cbc", "--time-limit", "5",
                     "--hours", "48"]) is None
    assert precheck(["plan", "--help"]) is None
    assert precheck(["replay", "--date", "nonsense"]) is None
    assert precheck([]) is None


def test_typer_path_refuses_the_same_values():
    r = runner.invoke(app, ["plan", "--no-store", "--time-limit", "inf"])
    assert r.exit_code == 2 and "solver time limit must be > 0 s, got inf" in r.output


# --- forecast_site with only the carbon-intensity column -------------------------------------

def _ci_only(days: int = 10) -> pd.DataFrame:
    idx = pd.date_range("2023-07-05", periods=24 * days, freq="h", tz="UTC")
    ci = 300 + 100 * np.sin(np.arange(len(idx)) * 2 * np.pi / 24)
    return pd.DataFrame({"carbon_intensity_g_per_kwh": ci}, index=idx)


def test_forecast_site_accepts_a_carbon_intensity_only_frame():
    # docs/signals.md: only carbon_intensity_g_per_kwh is required; this used to be a KeyError
    site = load_catalog("global").sites[0]
    fc = forecast_site(site, _ci_only(), pd.Timestamp("2023-07-15", tz="UTC"))
    assert len(fc.signals) == 24
    assert (fc.signals["pue"] == site.pue.pue_min).all()
    assert (fc.signals["green_surplus_kw"] == 0.0).all()
    assert any("PUE: no weather" in n for n in fc.notes)
    assert any("green surplus not forecast" in n for n in fc.notes)
    # the daily shape survives: peak near 06:00 UTC, trough near 18:00 UTC
    ci = fc.signals["carbon_intensity_g_per_kwh"]
    assert abs(int(ci.idxmax().hour) - 6) <= 1 and abs(int(ci.idxmin().hour) - 18) <= 1
    assert ci.max() == pytest.approx(400, abs=15) and ci.min() == pytest.approx(200, abs=15)


@pytest.mark.parametrize(("bad", "error", "message"), [
    (lambda f: f["carbon_intensity_g_per_kwh"], InputError,
     "must be a pandas DataFrame with a tz-aware hourly DatetimeIndex and a "
     "'carbon_intensity_g_per_kwh' column (docs/signals.md), got Series"),
    (lambda f: f.to_numpy(), InputError, "got ndarray"),
    (lambda f: f.rename(columns={"carbon_intensity_g_per_kwh": "ci"}), InputError,
     "lacks the column 'carbon_intensity_g_per_kwh' [g/kWh] (its columns: ci)"),
    (lambda f: f.astype(str), InputError, "column 'carbon_intensity_g_per_kwh' has dtype"),
    (lambda f: f.reset_index(drop=True), TimeAxisError, "index is a RangeIndex, not a "
     "DatetimeIndex"),
    (lambda f: f.tz_localize(None), TimeAxisError, "index is naive (no time zone)"),
])
def test_forecast_site_wrong_type_is_a_clear_error(bad, error, message):
    site = load_catalog("global").sites[0]
    with pytest.raises(error) as info:
        forecast_site(site, bad(_ci_only()), pd.Timestamp("2023-07-15", tz="UTC"))
    assert f"site {site.id}: " in str(info.value) and message in str(info.value)


def test_grouped_site_notes_keeps_order_and_groups_only_shared_site_notes():
    from carbonsched.notes import grouped_site_notes

    notes = ["workload: DEMO day",                      # not a site: kept as is
             "a: no price", "a: calibrated 0.4", "b: no price",
             "c: calibrated 0.4x",                      # differs by one character: kept
             "zz: no price",                            # unknown site: kept, not grouped
             "b: no price",                             # the same site twice: named once
             "c: no price: since 2023"]                 # ": " inside the text
    assert grouped_site_notes(notes, ["a", "b", "c"]) == [
        "workload: DEMO day", "sites a, b: no price", "a: calibrated 0.4",
        "c: calibrated 0.4x; no price: since 2023",     # one site's notes: named once
        "zz: no price"]
    # one site's note twice word for word (one per modelled year): shown once, its own name;
    # one site's notes that differ by a character are both kept, the site named once
    assert grouped_site_notes(["a: x", "b: y", "a: x"], ["a", "b"]) == ["a: x", "b: y"]
    assert grouped_site_notes(["a: x", "a: x."], ["a"]) == ["a: x; x."]
    assert grouped_site_notes(["a: x"], ["a"]) == ["a: x"]
    assert grouped_site_notes([], ["a"]) == []


def test_grouped_site_notes_merges_notes_equal_but_for_their_numbers():
    from carbonsched.notes import grouped_site_notes

    notes = ["a: EF 647.9 g/kWh (MEE 2023, CO2 only)", "a: 2025: floor 0.664, K = 834",
             "a: 2026: floor 0.633, K = 834",
             "b: EF 568.3 g/kWh (MEE 2023, CO2 only)", "b: 2025: floor 0.401, K = 944",
             "c: 2025: floor 0.08, K = 703 (target NOT met)",     # its own text: kept
             "c: s05 at 12 h", "c: s05 at 13 h",                  # one site's, merged too
             "a: v1.5 build 0.4x", "b: v1.5 build 0.5x"]          # numbers inside words
    assert grouped_site_notes(notes, ["a", "b", "c"]) == [
        # a number all the notes share is kept, one that differs is its range
        "sites a, b: EF 568.3–647.9 g/kWh (MEE 2023, CO2 only)",
        "sites a, b: 2025–2026: floor 0.401–0.664, K = 834–944",
        "c: 2025: floor 0.08, K = 703 (target NOT met); s05 at 12–13 h",
        "a: v1.5 build 0.4x", "b: v1.5 build 0.5x"]
    # the same numbers everywhere: the exact-text grouping, numbers kept
    assert grouped_site_notes(["a: K = 834", "b: K = 834"], ["a", "b"]) == ["sites a, b: K = 834"]


def test_grouped_site_notes_names_a_site_once_with_its_years_and_why():
    # one modelled site missing its target two years running (the Quick start's cn-sc-tianfu):
    # its years merged as ranges, its note of why joined to them, the other sites' line apart
    from carbonsched.notes import grouped_site_notes

    notes = ["a: 2025: floor 8.0%, curtailment 0.00% (on target)",
             "s: 2025: floor 8.0%, curtailment 45.26% (above its 2.42% target, by design)",
             "s: above its target by design: hydro spill",
             "a: 2026: floor 9.5%, curtailment 3.93% (on target)",
             "b: 2025: floor 66.4%, curtailment 1.00% (on target)",
             "s: 2026: floor 8.0%, curtailment 46.97% (above its 2.42% target, by design)"]
    assert grouped_site_notes(notes, ["a", "b", "s"]) == [
        "sites a, b: 2025–2026: floor 8.0–66.4%, curtailment 0.00–3.93% (on target)",
        "s: 2025–2026: floor 8.0%, curtailment 45.26–46.97% (above its 2.42% target, by design); "
        "above its target by design: hydro spill"]


@pytest.mark.parametrize("notes, shown", [
    # how bad a warning is stays on screen: the worst value is the range's end
    (["a: newest observation 30 h old", "b: newest observation 300 h old"],
     ["sites a, b: newest observation 30–300 h old"]),
    (["a: 1 of 24 hour(s) without CI", "b: 23 of 24 hour(s) without CI"],
     ["sites a, b: 1–23 of 24 hour(s) without CI"]),
    # signs and thousands separators are part of the number, ranges by value
    (["a: net -3.5 kW of 1,200", "b: net +2 kW of 980"],
     ["sites a, b: net -3.5–+2 kW of 980–1,200"]),
    # a literal '#' is text, not a number: nothing merged, nothing lost, no crash
    (["a: queue 5 slot", "b: queue # slot"], ["a: queue 5 slot", "b: queue # slot"]),
    (["b: queue # slot", "a: queue 5 slot"], ["b: queue # slot", "a: queue 5 slot"]),
    # dates, times, fractions, versions and ids with digits are text: they must match
    (["a: since 2023-07-15T00:00", "b: since 2023-07-16T00:00"],
     ["a: since 2023-07-15T00:00", "b: since 2023-07-16T00:00"]),
    (["a: via cn-east-2, 5/7 up", "b: via cn-east-3, 5/7 up"],
     ["a: via cn-east-2, 5/7 up", "b: via cn-east-3, 5/7 up"]),
    (["a: v1.2.3", "b: v1.2.4"], ["a: v1.2.3", "b: v1.2.4"]),
])
def test_grouped_site_notes_number_cases(notes, shown):
    from carbonsched.notes import grouped_site_notes

    assert grouped_site_notes(notes, ["a", "b"]) == shown


def test_plan_notes_are_printed_as_text_not_markup(monkeypatch):
    # a note is data: square brackets in it (units, a site's own words) are shown, never read
    # as Rich markup (which would drop "[kg]" and fail on a stray "[/x]")
    import io

    from rich.console import Console

    from carbonsched.cli import plan_view as cli

    buf = io.StringIO()
    monkeypatch.setattr(cli, "out", Console(file=buf, width=200))
    doc = {"plan_id": "p" * 32, "date": "2026-11-30", "catalog": "c", "signal_quality": "measured",
           "solver": {"name": "highs", "status": "optimal", "mip_gap": 0.0, "seconds": 1.0},
           "placements": [], "unplaced": [], "sites": ["a"],
           "totals": {"emissions_kg": 1.0, "baseline_emissions_kg": 2.0, "energy_kwh": 3.0},
           "notes": ["a: energy [kg] closed [/x] here"]}
    cli.print_plan(doc, [])
    assert "note: other (1 note): a: energy [kg] closed [/x] here" in buf.getvalue()


def test_plan_notes_are_printed_as_they_are_when_grouping_them_fails(monkeypatch):
    # display only: a fault in the grouping prints each note as it is, not under a kind
    import io

    from rich.console import Console

    from carbonsched.cli import plan_view as cli

    def broken(*args, **kwargs):
        raise ValueError("grouping failed")

    buf = io.StringIO()
    monkeypatch.setattr(cli, "out", Console(file=buf, width=200))
    monkeypatch.setattr(cli, "notes_by_kind", broken)
    notes = ["a: 3 hour(s) without temperature (NaN)", "site b left out: fewer than 48 hours"]
    doc = {"plan_id": "p" * 32, "date": "2026-11-30", "catalog": "c", "signal_quality": "measured",
           "solver": {"name": "highs", "status": "optimal", "mip_gap": 0.0, "seconds": 1.0},
           "placements": [], "unplaced": [], "sites": ["a", "b"],
           "totals": {"emissions_kg": 1.0, "baseline_emissions_kg": 2.0, "energy_kwh": 3.0},
           "notes": notes}
    cli.print_plan(doc, [])
    shown = [ln for ln in buf.getvalue().splitlines() if ln.startswith("note: ")]
    assert shown == [f"note: {n}" for n in notes]
    # the footer counts them as printed: one line per note, not per kind
    buf.truncate(0)
    buf.seek(0)
    demo = dict(doc, workload={"source": "demo"}, notes=["workload: DEMO jobs", *notes])
    cli.print_plan(demo, [])
    assert ("(3 notes in all: 2 one per line in the 2 lines above, 1 in the DEMO line; "
            "--all-notes prints each one whole)") in buf.getvalue()


def test_sites_label_names_the_shortest_way():
    from carbonsched.notes import _sites_label

    eight = [f"s{k}" for k in range(8)]
    assert _sites_label(eight, eight) == "all 8 sites"
    assert _sites_label(eight[:7], eight) == "7 of 8 sites (all but s7)"
    # at the limit: 5 of 8 (3 missing, 2 x 3 > 5) are named, 6 of 8 are not
    assert _sites_label(eight[:5], eight) == "sites s0, s1, s2, s3, s4"
    assert _sites_label(eight[:6], eight) == "6 of 8 sites (all but s6, s7)"
    # a short list is named: "all 3 sites" says less than "sites a, b, c"
    assert _sites_label(["a", "b", "c"], ["a", "b", "c"]) == "sites a, b, c"
    assert _sites_label(["a", "b", "c", "d"], ["a", "b", "c", "d"]) == "all 4 sites"


@pytest.mark.parametrize(("emissions", "words"), [
    (99.5, "(0.5 kg saved, 0.5% less)"),
    (100.0, "(0.0 kg saved, 0.0% less)"),                       # at the limit
    (100.5, "(0.5 kg more, 0.5% more)"),                        # a plan above its baseline
])
def test_the_saving_line_says_saved_or_more(tmp_path, monkeypatch, emissions, words):
    import io

    from rich.console import Console

    from carbonsched.cli import plan_view as cli

    r = runner.invoke(app, ["plan", "--no-store", "--out", str(tmp_path / "p.json")])
    assert r.exit_code == 0, r.output
    doc = json.loads((tmp_path / "p.json").read_text())
    doc["totals"] = dict(doc["totals"], emissions_kg=emissions, baseline_emissions_kg=100.0)
    buf = io.StringIO()
    monkeypatch.setattr(cli, "out", Console(file=buf, width=150))
    cli.print_plan(doc, [])
    assert words in _flat(buf.getvalue())


def test_every_table_of_the_cli_is_made_by_the_one_helper():
    """Every command's table comes from ``cli.common.table`` (its title is never padded)."""
    from pathlib import Path

    import carbonsched.cli as cli_package

    folder = Path(cli_package.__file__).parent
    direct = [p.name for p in folder.glob("*.py")
              if p.name != "common.py" and "Table(" in p.read_text()]
    assert direct == []
