"""The report as a newcomer reads it (issue 34 item 4): scales, axes, headers, the no-instrument
sentence, the shipped instruments example, several formats from one computation."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from carbonsched.catalog import load_catalog
from carbonsched.cli.app import app
from carbonsched.report import build_report, render, to_dict
from carbonsched.report.instruments import load_market_config
from carbonsched.report.render import UTC_TIME, _time_ticks, column_label, read_csv_sections
from carbonsched.store import Store

from .builders import plan_doc
from .chromium import artefact_dir

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "instruments.toml"
JOBS = [("J-DE", "tenant-a", "de-site", "2023-07-03T10:00:00Z", "2023-07-03T14:00:00Z", 4, 0.5),
        ("J-GB", "tenant-b", "gb-site", "2023-07-03T10:00:00Z", "2023-07-03T12:00:00Z", 2, 1.0)]
UNITS = {"_kwh": "kWh", "_mwh": "MWh", "_kg": "kg CO2e", "_g_per_kwh": "g CO2e/kWh",
         "_share": "fraction 0..1"}


def _report(fixtures_dir, shared_data, instruments=None, jobs=JOBS):
    fx = fixtures_dir / "report"
    return build_report(None, fx / "two_markets.toml", shared_data, "2023-07-03", "2023-07-03",
                        instruments=instruments, plans=[plan_doc("2023-07-03", "two-markets",
                                                                 jobs)])


# ------------------------------------------------------------------ no instrument: a sentence
@pytest.mark.shared_data
def test_without_instruments_the_report_says_why_market_equals_location(fixtures_dir,
                                                                        shared_data):
    rep = _report(fixtures_dir, shared_data)
    t = rep.totals
    assert t["market_based_kg"] == pytest.approx(t["location_based_kg"], rel=1e-12)
    assert t["market_based_hourly_kg"] == pytest.approx(t["location_based_kg"], rel=1e-12)
    assert t["cfe_hourly_share"] == 0.0
    note = rep.metadata["market_based_note"]
    assert note.startswith("No contractual instrument is configured (no --instruments file): "
                           "market-based equals location-based "
                           f"({t['location_based_kg']:,.1f} kg CO2e)")
    assert "hourly carbon-free-energy score is 0" in note and "examples/instruments.toml" in note
    assert rep.metadata["notes"][0] == note  # first, in every format and on the terminal
    assert to_dict(rep)["metadata"]["notes"][0] == note
    assert f"# note: {note}" in render(rep, "csv").decode()
    page = render(rep, "html").decode()
    assert re.search(r'<p id="market-note" class="market-note">No contractual instrument',
                     page)


@pytest.mark.shared_data
def test_with_instruments_there_is_no_such_sentence(fixtures_dir, shared_data):
    rep = _report(fixtures_dir, shared_data, fixtures_dir / "report" / "instruments.toml")
    assert rep.metadata["market_based_note"] is None
    assert rep.totals["market_based_kg"] == pytest.approx(1.57)  # the hand-worked value
    assert rep.totals["cfe_hourly_share"] > 0
    assert 'id="market-note"' not in render(rep, "html").decode()


@pytest.mark.shared_data
def test_residual_mixes_without_instruments_get_the_other_sentence(fixtures_dir, shared_data,
                                                                   tmp_path):
    # at the limit: a file with site factors and not one [[instruments]] table
    f = tmp_path / "mixes.toml"
    f.write_text('[sites."de-site"]\nmarket = "DE"\nresidual_mix_g_per_kwh = 700.0\n'
                 'residual_mix_source = "test value"\n')
    rep = _report(fixtures_dir, shared_data, f)
    note = rep.metadata["market_based_note"]
    assert note.startswith(f"No contractual instrument is configured ({f} lists no "
                           "[[instruments]]): the market-based totals price all the energy at "
                           "each site's residual mix")
    assert rep.totals["market_based_kg"] != pytest.approx(rep.totals["location_based_kg"])


# ------------------------------------------------------------ the shipped instruments example
def test_the_example_instruments_file_loads_for_the_global_catalog():
    cfg = load_market_config(EXAMPLE, {s.id for s in load_catalog("global").sites})
    assert [i.id for i in cfg.instruments] == ["GO-DE-2023-07", "PPA-DE-WIND",
                                               "SUPPLIER-GB-2023"]
    assert [i.kind for i in cfg.instruments] == ["certificate", "ppa", "supplier"]
    assert cfg.sites["de-frankfurt"].residual_mix_g_per_kwh == 724.0
    ppa = cfg.instruments[1]
    # its hourly profile is the CSV next to it: every hour of July 2023
    prof = pd.read_csv(EXAMPLE.parent / "instruments_ppa_de.csv")
    assert len(prof) == 31 * 24 and (prof["energy_mwh"] >= 0).all()
    assert ppa.volume_mwh == pytest.approx(prof["energy_mwh"].sum(), rel=1e-9)


def test_docs_show_the_example_instruments_file_verbatim():
    doc = (ROOT / "docs" / "report.md").read_text()
    assert "examples/instruments.toml" in doc
    body = re.search(r"```toml\n(.*?)```", doc, flags=re.S)
    assert body, "docs/report.md has no TOML block of the instruments format"
    for key in ("residual_mix_g_per_kwh", "kind", "valid_from", "valid_to", "volume_mwh",
                "profile_csv", "factor_g_per_kwh", "sites", "source", "market"):
        assert key in body.group(1), key


@pytest.mark.shared_data
def test_the_example_instruments_file_reports_a_global_day(shared_data):
    doc = plan_doc("2023-07-03", "global", [
        ("J-DE", "tenant-a", "de-frankfurt", "2023-07-03T10:00:00Z", "2023-07-03T14:00:00Z",
         8, 0.7),
        ("J-GB", "tenant-b", "gb-london", "2023-07-03T10:00:00Z", "2023-07-03T12:00:00Z",
         8, 0.7)])
    rep = build_report(None, "global", shared_data, "2023-07-03", "2023-07-03",
                       instruments=EXAMPLE, plans=[doc])
    t = rep.totals
    assert rep.metadata["market_based_note"] is None
    sites = rep.frames["sites"].set_index("site")
    # DE: the certificates' 50 MWh cover the day's few kWh (2015 rule): market-based 0
    assert sites.loc["de-frankfurt", "market_based_kg"] == pytest.approx(0.0, abs=1e-9)
    # GB: no volume instrument, the supplier factor prices all of it: 210 g/kWh
    assert sites.loc["gb-london", "market_based_kg"] == pytest.approx(
        sites.loc["gb-london", "facility_energy_kwh"] * 0.210, rel=1e-6)
    assert t["market_based_kg"] < t["location_based_kg"]
    assert 0 < t["cfe_hourly_share"] <= 1


# ------------------------------------------------------------------- headers, axes, scales
@pytest.mark.parametrize(("name", "label"), [
    ("facility_energy_kwh", "Energy, facility (kWh)"),
    ("location_based_kg", "Location-based (kg CO2e)"),
    ("start", "Start (UTC)"),
    ("queue_wait_kwh", "Queue wait (kWh)"),              # not listed: from its suffix
    ("ci_direct_g_per_kwh", "Ci direct (g CO2e/kWh)"),   # the longest suffix wins, not _kwh
    ("idle_share", "Idle (fraction 0..1)"),
    ("odd_column", "Odd column"),                         # no unit: words only
])
def test_column_labels_are_words_with_units(name, label):
    assert column_label(name, UNITS) == label


def test_time_ticks_are_dates_and_hours_not_iso():
    day = pd.date_range("2023-07-03", periods=24, freq="h", tz="UTC")
    assert _time_ticks(day) == [(0, "Mon 3 Jul", True), (6, "06:00", False),
                                (12, "12:00", False), (18, "18:00", False)]
    month = pd.date_range("2023-07-01", periods=31 * 24, freq="h", tz="UTC")
    ticks = _time_ticks(month)
    assert all(major for _, _, major in ticks) and 10 <= len(ticks) <= 16
    assert ticks[0] == (0, "Sat 1 Jul", True)
    four = pd.date_range("2023-07-01", periods=4 * 24, freq="h", tz="UTC")  # past 3 days
    assert [label for _, label, _ in _time_ticks(four)] == ["Sat 1 Jul", "Sun 2 Jul",
                                                            "Mon 3 Jul", "Tue 4 Jul"]
    assert _time_ticks(pd.DatetimeIndex([], tz="UTC")) == []


@pytest.mark.shared_data
def test_html_in_chromium_one_scale_readable_axes_word_headers_no_sideways_scroll(
        fixtures_dir, shared_data, record_property):
    from tests.service.cdp import open_with_headers

    rep = _report(fixtures_dir, shared_data, fixtures_dir / "report" / "instruments.toml")
    page_html = render(rep, "html").decode()
    out = artefact_dir("report-html-front-door")
    page = out / "report.html"
    page.write_text(page_html)
    png = out / "report.png"
    measure = ("JSON.stringify({page: [document.documentElement.scrollWidth, innerWidth], "
               "boxes: [...document.querySelectorAll('.scroll, table')].map(e => "
               "[e.id || e.className, e.scrollWidth, e.clientWidth])})")
    loaded = open_with_headers(page.resolve().as_uri(), {}, png, width=1280, evaluate=measure)
    record_property("artefact", f"screenshot {png}")
    print(f"\nartefact: screenshot {png}")
    assert loaded.console_errors == []
    sizes = json.loads(loaded.value)
    assert sizes["page"][0] <= sizes["page"][1], sizes
    for name, scroll_w, client_w in sizes["boxes"]:
        assert scroll_w <= client_w + 1, (name, scroll_w, client_w)
    dom = loaded.dom
    # one scale for every site: the largest intensity and GPU-hours of any site
    sh = rep.frames["site_hours"]
    cmax, gmax = sh["ci_direct_g_per_kwh"].max(), sh["gpu_h"].max()
    svgs = re.findall(r'class="site-hourly" data-site="([^"]+)" data-ci-max="([^"]+)" '
                      r'data-gpu-h-max="([^"]+)"', dom)
    assert {s for s, _, _ in svgs} == {"de-site", "gb-site"}
    assert {(float(c), float(g)) for _, c, g in svgs} == {(round(cmax, 3), round(gmax, 3))}
    assert f"0–{cmax:,.0f} g CO2e/kWh" in dom
    # the time axis in dates and hours; no ISO instants anywhere a person reads
    assert dom.count(">Mon 3 Jul</text>") == 2 and dom.count(">12:00</text>") == 2
    text = re.sub(r"<[^>]+>", " ", re.sub(r"<(style|title)>.*?</\1>", " ", dom, flags=re.S))
    tables = re.findall(r"<table id=\"table-[^\"]+\">.*?</table>", dom, flags=re.S)
    assert tables
    for tb in tables:
        cells = re.findall(r"<t[hd][^>]*>([^<]*)</t[hd]>", tb)
        assert not [c for c in cells if UTC_TIME.match(c.strip())], "an ISO instant in a table"
        heads = re.findall(r"<th data-column=\"([^\"]+)\">([^<]*)</th>", tb)
        assert heads and all(label != col for col, label in heads
                             if "_" in col), heads  # no snake_case header left
    assert "Energy, facility (kWh)" in text and "2023-07-03 10:00" in text
    assert "period Mon 3 Jul 2023 00:00 to Tue 4 Jul 2023 00:00 UTC" in " ".join(text.split())
    # words are not broken inside (a site id, a tenant, a kind stays whole)
    assert loaded.value and all(w in text for w in ("de-site", "tenant-a", "certificate"))


# ------------------------------------------------------------------ several formats, one run
runner = CliRunner()


@pytest.mark.shared_data
def test_several_formats_from_one_computation(store_url, fixtures_dir, shared_data, tmp_path,
                                              monkeypatch):
    import carbonsched.report.build as build_mod

    fx = fixtures_dir / "report"
    Store(store_url).save_plan(plan_doc("2023-07-03", "two-markets", JOBS))
    calls = []
    real = build_mod.stored_plans   # read once per build_report

    def counted(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(build_mod, "stored_plans", counted)
    res = runner.invoke(app, ["report", "--from", "2023-07-03", "--to", "2023-07-03",
                              "--catalog", str(fx / "two_markets.toml"), "--data-dir",
                              str(shared_data), "--instruments", str(fx / "instruments.toml"),
                              "--format", "html,xlsx,csv", "--out", str(tmp_path / "r.html")])
    assert res.exit_code == 0, res.output
    assert len(calls) == 1  # computed once
    html_f, xlsx_f, csv_f = (tmp_path / f"r.{s}" for s in ("html", "xlsx", "csv"))
    assert all(p.exists() for p in (html_f, xlsx_f, csv_f))
    assert f"{html_f} (html), {xlsx_f} (xlsx), {csv_f} (csv)" in " ".join(res.output.split())
    # the same numbers in each
    csv_text = csv_f.read_text()
    total = float(re.search(r"# total market_based_hourly_kg: (\S+)", csv_text).group(1))
    assert total == pytest.approx(5.89, abs=0.01)
    summary = pd.read_excel(io.BytesIO(xlsx_f.read_bytes()), sheet_name="summary")
    row = summary[(summary["section"] == "total") & (summary["name"] == "market_based_hourly_kg")]
    assert float(row["value"].iloc[0]) == pytest.approx(total, rel=1e-6)
    assert f'data-total="market_based_hourly_kg"><th>Scope 2 market-based (hourly matching, ' \
           f'2025 draft)</th><td class="num">{total:,.1f}</td>' in html_f.read_text()
    sections = read_csv_sections(csv_text)
    assert set(sections["jobs"]["job_id"]) == {"J-DE", "J-GB"}


@pytest.mark.parametrize(("fmt", "message"), [
    ("html,pdf", "--format 'html,pdf': 'pdf' is not one of csv, json, html, xlsx"),
    ("html,html", "--format 'html,html' names html twice"),
    ("html,", "--format 'html,': '' is not one of"),
])
def test_bad_format_lists_are_refused_before_any_work(store_url, tmp_path, fmt, message):
    res = runner.invoke(app, ["report", "--from", "2023-07-03", "--to", "2023-07-03",
                              "--catalog", "global", "--format", fmt, "--out",
                              str(tmp_path / "r.html")])
    assert res.exit_code == 2 and message in " ".join(res.output.split()), res.output
    assert not list(tmp_path.glob("r.*"))


def test_one_format_writes_exactly_the_out_path(tmp_path):
    from carbonsched.cli.report import output_paths

    assert output_paths(tmp_path / "r.json", ["json"]) == {"json": tmp_path / "r.json"}
    assert output_paths(tmp_path / "r.2023", ["html", "csv"]) == {
        "html": tmp_path / "r.2023.html", "csv": tmp_path / "r.2023.csv"}
