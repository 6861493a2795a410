"""A month of real plans on the ``global`` catalog, reported in every format.

The plans are made by the real daily pipeline (:func:`carbonsched.pipeline.daily.run_daily_plan`) on
the real 2023 Electricity Maps, weather and job-trace data, with 5 % of each day's trace jobs and
a 5 s solver limit to keep the wall time down, and recorded in a real store (PostgreSQL when the
test command started it, else SQLite). The location-based total is then recomputed here
independently: IT energy from the stored placements, PUE from the raw Open-Meteo files through
the site's PUE model, and the hour's direct intensity read from the raw Electricity Maps CSVs
with the ``csv`` module.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections import defaultdict
from pathlib import Path

import openpyxl
import pandas as pd
import pytest

from carbonsched.catalog import load_catalog
from carbonsched.forecasts.pue import pue_from_weather
from carbonsched.pipeline.daily import run_daily_plan
from carbonsched.report import build_report, read_csv_sections, render
from carbonsched.store import Store
from carbonsched.workload.files import workload_from_traces

from .chromium import artefact_dir, open_page

pytestmark = [pytest.mark.slow, pytest.mark.shared_data]

FIRST, LAST = "2023-02-01", "2023-02-28"


@pytest.fixture(scope="module")
def month(shared_data, tmp_path_factory):
    url = os.environ.get("CARBONSCHED_TEST_POSTGRES_URL")
    if url:
        # its own database on the test server, so that parallel store tests are untouched
        from sqlalchemy import create_engine, make_url, text

        eng = create_engine(url, isolation_level="AUTOCOMMIT")
        with eng.connect() as c:
            c.execute(text("DROP DATABASE IF EXISTS carbonsched_report_month"))
            c.execute(text("CREATE DATABASE carbonsched_report_month"))
        eng.dispose()
        url = make_url(url).set(database="carbonsched_report_month").render_as_string(
            hide_password=False)
    else:
        url = f"sqlite:///{tmp_path_factory.mktemp('store') / 'month.db'}"
    store = Store(url)
    cat = load_catalog("global")
    docs = []
    for day in pd.date_range(FIRST, LAST, freq="D").strftime("%Y-%m-%d"):
        wl = workload_from_traces(shared_data, day, cat, seed=0, scale=0.05)
        daily = run_daily_plan(day, "global", wl, shared_data, time_limit_s=5.0)
        store.save_plan(daily.document, daily.forecasts)
        docs.append(daily.document)
    report = build_report(store, "global", shared_data, FIRST, LAST)
    return store, docs, report


def _raw_ci(shared_data: Path, zone: str) -> dict[str, float]:
    """Direct intensity by UTC hour ``YYYY-MM-DD HH:00:00`` from the raw CSV."""
    path = shared_data / "sustain-cluster" / "carbon_intensity" / f"{zone}_2023_hourly.csv"
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    col = rows[0].index("Carbon Intensity gCO₂eq/kWh (direct)")
    return {r[0]: float(r[col]) for r in rows[1:] if r[col] not in ("", "nan")}


def _raw_pue(shared_data: Path, site) -> dict[str, float]:
    """PUE by UTC hour from the raw Open-Meteo file (UTC = local standard time - offset)."""
    # the zone's 2023 Open-Meteo file (catalogs name zones; the readers find each year's file)
    raw = json.loads((shared_data / "sustain-cluster" / "weather" / f"{site.zone}_2023.json")
                     .read_text())
    off = pd.Timedelta(seconds=raw["utc_offset_seconds"])
    t = pd.to_datetime(raw["hourly"]["time"]) - off
    pue = pue_from_weather(pd.Series(raw["hourly"]["temperature_2m"], index=t, dtype=float),
                           pd.Series(raw["hourly"]["relative_humidity_2m"], index=t,
                                     dtype=float), site.pue)
    return {ts.strftime("%Y-%m-%d %H:%M:%S"): float(v) for ts, v in zip(t, pue, strict=True)}


def test_location_based_total_matches_independent_recomputation(month, shared_data):
    store, docs, report = month
    assert len(docs) == 28 and report.metadata["days_with_plans"] == 28
    cat = load_catalog("global")
    sites = {s.id: s for s in cat.sites}
    ci = {s.id: _raw_ci(shared_data, s.zone) for s in cat.sites}
    pue = {s.id: _raw_pue(shared_data, s) for s in cat.sites}
    it_kwh = 0.0
    loc_kg = 0.0
    by_site = defaultdict(float)
    gaps = 0
    for d in (store.get_plan(r["plan_id"]) for day in pd.date_range(FIRST, LAST).strftime(
            "%Y-%m-%d") for r in store.list_plans(day)[:1]):
        power = {j["job_id"]: j["gpus"] * j["power_per_gpu_kw"] for j in d["workload"]["jobs"]}
        inf = {(r["area"], r["gpu_type"], r.get("hour")): r["power_per_gpu_kw"]
               for r in d["workload"]["inference_power"]}
        work = [(p["site"], h, power[p["job_id"]])
                for p in d["placements"]
                for h in pd.date_range(p["start"], p["end"], freq="h", inclusive="left")]
        work += [(i["site"], pd.Timestamp(i["hour"]),
                  i["gpus"] * inf.get((i["area"], i["gpu_type"], i["hour"]),
                                      inf.get((i["area"], i["gpu_type"], None))))
                 for i in d["inference"] if i["gpus"]]
        for site, h, kw in work:
            key = h.strftime("%Y-%m-%d %H:%M:%S")
            it_kwh += kw
            if key not in ci[site]:
                gaps += 1
                continue
            kg = kw * pue[site].get(key, sites[site].pue.pue_min) * ci[site][key] / 1000.0
            loc_kg += kg
            by_site[site] += kg
    t = report.totals
    print(f"\nmonth {FIRST}..{LAST}: location-based {t['location_based_kg']:.3f} kg (report) vs "
          f"{loc_kg:.3f} kg (independent), IT {t['it_energy_kwh']:.1f} kWh, market-based "
          f"{t['market_based_kg']:.3f} / hourly {t['market_based_hourly_kg']:.3f} kg, avoided "
          f"{t['avoided_kg']:.3f} kg, gap hours {gaps}")
    assert loc_kg > 0
    assert t["it_energy_kwh"] == pytest.approx(it_kwh, rel=1e-9)
    assert t["location_based_kg"] == pytest.approx(loc_kg, rel=1e-3)
    got = report.frames["sites"].set_index("site")["location_based_kg"]
    for s, v in by_site.items():
        assert got[s] == pytest.approx(v, rel=1e-3), s
    # no instruments configured: market-based = location factor everywhere, flagged
    assert t["market_based_kg"] == pytest.approx(t["location_based_kg"], rel=1e-9)
    assert report.frames["sites"]["location_factor_flag"].all()
    # the counterfactual is scored and shown beside, never subtracted
    assert t["avoided_kg"] == pytest.approx(t["counterfactual_location_based_kg"]
                                            - t["location_based_kg"])
    assert t["avoided_kg"] > 0
    assert t["surplus_absorbed_mwh"] >= t["surplus_absorbed_occurred_mwh"] >= 0
    assert abs(t["plan_estimate_error_pct"]) < 50
    prov = report.metadata["provenance"]
    assert prov["hours"]["planned_share"] == 1.0
    assert prov["signals"]["jp-tk-tokyo"]["source"] == "electricitymaps"
    assert prov["grid_intensity_estimated_energy_share"] > 0  # JP-TK is all estimated


def test_every_format_carries_the_same_numbers(month, record_property):
    _, _, report = month
    out = artefact_dir("report-month")
    t = report.totals
    js = json.loads(render(report, "json"))
    assert set(js["totals"]) >= {"it_energy_kwh", "facility_energy_kwh", "location_based_kg",
                                 "market_based_kg", "market_based_hourly_kg",
                                 "cfe_hourly_share", "avoided_kg", "surplus_absorbed_mwh"}
    assert set(js["jobs"][0]) >= {"job_id", "site", "start", "end", "it_energy_kwh",
                                  "facility_energy_kwh", "location_based_kg", "market_based_kg",
                                  "sci_g_per_unit"}
    assert js["totals"]["location_based_kg"] == pytest.approx(t["location_based_kg"], rel=1e-6)
    assert sum(j["location_based_kg"] for j in js["jobs"]) == pytest.approx(
        t["location_based_kg"], rel=1e-6)
    assert all(j["sci_g_per_unit"] > 0 for j in js["jobs"])
    assert js["metadata"]["provenance"]["software"].startswith("carbonsched ")
    (out / "report.json").write_bytes(render(report, "json"))

    raw_csv = render(report, "csv")
    (out / "report.csv").write_bytes(raw_csv)
    assert raw_csv.startswith(b"# carbonsched sustainability report")
    tables = read_csv_sections(raw_csv)
    assert set(tables) == {"jobs", "sites", "tenants", "days", "instruments", "site_hours"}
    assert len(tables["days"]) == 28
    assert tables["tenants"]["location_based_kg"].sum() == pytest.approx(
        t["location_based_kg"], rel=1e-5)
    numeric = [c for c in tables["jobs"].columns if tables["jobs"][c].dtype.kind == "f"]
    units = tuple(report.metadata["units"])
    assert all(c.endswith(units) for c in numeric), numeric

    xlsx = render(report, "xlsx")
    (out / "report.xlsx").write_bytes(xlsx)
    wb = openpyxl.load_workbook(io.BytesIO(xlsx), read_only=True)
    assert wb.sheetnames == ["summary", "jobs", "sites", "tenants", "days", "instruments",
                             "site_hours"]
    summary = {(r[0], r[1]): r[2] for r in wb["summary"].iter_rows(min_row=2, values_only=True)}
    assert summary[("total", "location_based_kg")] == pytest.approx(t["location_based_kg"],
                                                                    rel=1e-6)

    page = out / "report.html"
    page.write_bytes(render(report, "html"))
    png = out / "report.png"
    dom = open_page(page, png, height=3600)
    print(f"\nartefact: screenshot {png}\nartefact: reports {out}")
    record_property("artefact", f"screenshot {png}; json, csv, xlsx, html in {out}")
    for cid in ("chart-hourly-ci", "chart-site", "chart-tenant", "chart-scope2", "chart-savings",
                "totals"):
        assert f'id="{cid}"' in dom, cid
    assert dom.count('class="site-hourly"') == report.frames["site_hours"]["site"].nunique()
    assert f'{t["location_based_kg"]:,.1f}' in dom
    assert f'{t["market_based_hourly_kg"]:,.1f}' in dom
