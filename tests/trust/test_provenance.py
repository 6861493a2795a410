"""Issue 7 item 1: estimated share over existing hours, signal ages, degraded quality, notes."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from carbonsched.adapters.signals import load_site_signals
from carbonsched.adapters.signals.quality import SIGNAL_AGE_THRESHOLD_HOURS
from carbonsched.catalog import load_catalog
from carbonsched.cli.app import app
from carbonsched.pipeline.daily import HISTORY_DAYS, forecast_site, gather_forecasts
from tests.trust.datadir import keep_until, mirror

runner = CliRunner()
GLOBAL = load_catalog("global")
ISSUE = pd.Timestamp("2023-07-15", tz="UTC")


@pytest.fixture(autouse=True)
def _private_store(private_store):
    """Every test here on a store of its own (``tests/conftest.py``)."""


def _plan(args: list[str], out) -> dict:
    res = runner.invoke(app, ["plan", *args, "--out", str(out), "--no-store"])
    assert res.exit_code == 0, res.output
    return json.loads(out.read_text())


def _history(days=HISTORY_DAYS, end=ISSUE):
    idx = pd.date_range(ISSUE - pd.Timedelta(days=days), ISSUE + pd.Timedelta(hours=23),
                        freq="h", tz="UTC")
    ci = 300 + 50 * np.sin(2 * np.pi * idx.hour.to_numpy() / 24)
    f = pd.DataFrame({"carbon_intensity_g_per_kwh": ci, "carbon_intensity_estimated": False,
                      "renewable_pct": 40.0, "price_usd_per_mwh": 30.0, "temperature_c": 10.0,
                      "relative_humidity_pct": 50.0}, index=idx)
    f.loc[f.index >= end, "carbon_intensity_g_per_kwh"] = np.nan
    return f


def test_jp_tk_2022_01_03_is_estimated_in_the_plan(tmp_path, shared_data):
    # every JP-TK 2022 row is Data Estimated=true; the 54 days before 2022-01-01 have no rows
    plan = _plan(["--catalog", "global", "--data-dir", str(shared_data),
                  "--date", "2022-01-03"], tmp_path / "plan.json")
    assert plan["site_signal_quality"]["jp-tk-tokyo"] == "estimated"
    assert plan["signal_quality"] == "estimated"
    assert any("jp-tk-tokyo: 100 % of the 48 observed carbon-intensity hours" in n
               for n in plan["notes"]), plan["notes"]
    assert plan["site_signal_quality"]["de-frankfurt"] == "measured"


def test_in_we_within_its_first_56_days_is_estimated(shared_data):
    site = GLOBAL.site("jp-tk-tokyo")
    site = type(site)(**{**site.__dict__, "id": "in-we", "zone": "IN-WE"})
    issue = pd.Timestamp("2022-02-10", tz="UTC")  # day 40 of the data
    frame, meta = load_site_signals(site, shared_data, issue - pd.Timedelta(days=HISTORY_DAYS),
                                    issue + pd.Timedelta(hours=24))
    fc = forecast_site(site, frame, issue, 24, meta)
    assert fc.signal_quality == "estimated"
    assert any("100 % of the 960 observed" in n for n in fc.notes), fc.notes


def test_estimated_share_ignores_missing_hours_synthetic():
    h = _history()
    h.loc[h.index < ISSUE - pd.Timedelta(days=10), "carbon_intensity_g_per_kwh"] = np.nan
    h.loc[h.index >= ISSUE - pd.Timedelta(days=10), "carbon_intensity_estimated"] = True
    fc = forecast_site(GLOBAL.site("ca-on-toronto"), h, ISSUE)
    assert fc.signal_quality == "estimated"
    h2 = _history()
    h2.loc[h2.index >= ISSUE - pd.Timedelta(days=10), "carbon_intensity_estimated"] = True
    assert forecast_site(GLOBAL.site("ca-on-toronto"), h2, ISSUE).signal_quality == "measured"


def test_stale_de_lu_gives_a_30_h_age_degraded_quality_and_a_note(tmp_path, shared_data):
    data = mirror(shared_data, tmp_path / "data", {
        "sustain-cluster/carbon_intensity/DE-LU_2023_hourly.csv": keep_until("2023-07-13 18:00")})
    plan = _plan(["--catalog", "global", "--data-dir", str(data), "--date", "2023-07-15"],
                 tmp_path / "plan.json")
    assert plan["site_signal_age_hours"]["de-frankfurt"]["carbon_intensity_g_per_kwh"] == 30.0
    assert plan["site_signal_age_hours"]["gb-london"]["carbon_intensity_g_per_kwh"] == 1.0
    assert plan["site_signal_quality"]["de-frankfurt"] == "degraded"
    assert plan["site_signal_quality"]["gb-london"] == "measured"
    assert plan["signal_quality"] == "degraded"
    assert any(n.startswith("de-frankfurt: newest carbon_intensity_g_per_kwh observation is "
                            "30 h old") for n in plan["notes"]), plan["notes"]


@pytest.mark.parametrize(("hours_old", "quality"), [(6, "measured"), (7, "degraded"),
                                                    (10, "degraded")])
def test_age_threshold_both_sides(hours_old, quality):
    assert SIGNAL_AGE_THRESHOLD_HOURS["carbon_intensity_g_per_kwh"] == 6.0
    h = _history(end=ISSUE - pd.Timedelta(hours=hours_old - 1))
    fc = forecast_site(GLOBAL.site("gb-london"), h, ISSUE)
    assert fc.signal_age_hours["carbon_intensity_g_per_kwh"] == float(hours_old)
    assert fc.signal_age_hours["temperature_c"] == 1.0
    assert fc.signal_quality == quality
    assert any(f"{hours_old} h old" in n for n in fc.notes) == (quality == "degraded")


def test_reader_notes_reach_the_plan_notes(tmp_path, shared_data):
    def drop_row(text: str) -> str:
        return "".join(line for line in text.splitlines(keepends=True)
                       if not line.startswith("2023-07-10 05:00"))

    data = mirror(shared_data, tmp_path / "data", {
        "sustain-cluster/carbon_intensity/DE-LU_2023_hourly.csv": drop_row})
    cat = load_catalog("global")
    cat_de = type(cat)(**{**cat.__dict__, "sites": [cat.site("de-frankfurt")]})
    forecasts, notes, _ = gather_forecasts(cat_de, data, ISSUE, 24)
    assert ("de-frankfurt: DE-LU_2023_hourly.csv: 1 missing hour(s) inserted as NaN, first "
            "2023-07-10T05:00:00+00:00") in notes, notes
    assert forecasts["de-frankfurt"].signal_quality == "measured"  # 5 days back: not recent
