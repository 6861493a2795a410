"""Issue 7 item 11: a new year of data is just new files; replay reports fallbacks; coverage."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from carbonsched.adapters.signals import load_site_signals
from carbonsched.adapters.signals.coverage import END, START, coverage, coverage_markdown
from carbonsched.adapters.signals.registry import clear_cache
from carbonsched.catalog import load_catalog
from carbonsched.evaluate.replay import run_replay
from carbonsched.pipeline.daily import forecast_site
from tests.conftest import ROOT
from tests.trust.datadir import mirror

GLOBAL = load_catalog("global")


WEATHER_FALLBACK = re.compile(r"PUE: (no weather|weather persistence|modelled climatological)"
                              r"|PUE model choice failed")
"""A site's PUE note saying its weather was missing or not used (carbonsched.pipeline.daily);
not a model-choice note ("no model beat seasonal naive ..."), which uses the weather."""


def _add_2024(data, shared, zone):
    """Copies of the zone's 2023 CI and weather files relabelled 2024 (content shifted a year)."""
    ci = shared / "sustain-cluster" / "carbon_intensity" / f"{zone}_2023_hourly.csv"
    (data / "sustain-cluster" / "carbon_intensity" / f"{zone}_2024_hourly.csv").write_text(
        ci.read_text(encoding="utf-8").replace("2023-", "2024-"), encoding="utf-8")
    w = json.loads((shared / "sustain-cluster" / "weather" / f"{zone}_2023.json").read_text())
    w["hourly"]["time"] = [t.replace("2023-", "2024-") for t in w["hourly"]["time"]]
    (data / "sustain-cluster" / "weather" / f"{zone}_2024.json").write_text(json.dumps(w))


def test_global_catalog_pins_no_year():
    for s in GLOBAL.sites:
        pinned = (s.meta or {}).get("weather_file", "")
        assert not re.search(r"(19|20)\d\d", str(pinned)), (s.id, pinned)


@pytest.mark.parametrize("site_id", ["gb-london", "de-frankfurt"])
def test_2024_files_are_found_without_touching_the_catalog(site_id, tmp_path, shared_data):
    site = GLOBAL.site(site_id)
    data = mirror(shared_data, tmp_path / "data")
    _add_2024(data, shared_data, site.zone)
    clear_cache()
    issue = pd.Timestamp("2024-07-10", tz="UTC")
    frame, meta = load_site_signals(site, data, issue - pd.Timedelta(days=56),
                                    issue + pd.Timedelta(hours=24))
    assert frame["temperature_c"].notna().all()
    assert frame["carbon_intensity_g_per_kwh"].notna().all()
    assert any(f.endswith(f"weather/{site.zone}_2024.json") for f in meta["files"])
    fc = forecast_site(site, frame, issue, 24, meta)
    assert not any(WEATHER_FALLBACK.search(n) for n in fc.notes), fc.notes
    assert fc.signals["pue"].max() > site.pue.pue_min  # July weather, not the floor


def test_readers_cross_the_year_boundary(tmp_path, shared_data):
    site = GLOBAL.site("gb-london")
    data = mirror(shared_data, tmp_path / "data")
    _add_2024(data, shared_data, site.zone)
    clear_cache()
    t0 = pd.Timestamp("2023-12-20", tz="UTC")
    frame, meta = load_site_signals(site, data, t0, t0 + pd.Timedelta(days=20))
    assert len(frame) == 480
    assert frame["temperature_c"].notna().all()
    assert frame["carbon_intensity_g_per_kwh"].notna().all()
    ci_files = [f for f in meta["files"] if "carbon_intensity" in f]
    weather = [f for f in meta["files"] if "/weather/" in f]
    assert [f.rsplit("/", 1)[1] for f in ci_files] == ["GB_2023_hourly.csv", "GB_2024_hourly.csv"]
    assert sorted(f.rsplit("/", 1)[1] for f in weather) == ["GB_2023.json", "GB_2024.json"]


def test_readme_coverage_is_the_computed_one(shared_data):
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split(START, 1)[1].split(END, 1)[0].strip()
    assert block == coverage_markdown(shared_data)
    assert coverage(shared_data)["electricitymaps"]["JP-TK"] == [2022, 2023]
    assert coverage(shared_data)["eia930"]["CISO"] == [2022]


def test_coverage_follows_new_files(tmp_path, shared_data):
    data = mirror(shared_data, tmp_path / "data")
    _add_2024(data, shared_data, "GB")
    cov = coverage(data)
    assert cov["electricitymaps"]["GB"] == [2022, 2023, 2024]
    assert cov["weather (Open-Meteo)"]["GB"] == [2023, 2024]
    assert "| electricitymaps | 2022–2024 | GB |" in coverage_markdown(data)


def test_replay_reports_every_forecast_fallback_per_day_and_site(tmp_path, shared_data):
    # no DE-LU weather: Frankfurt's PUE takes the free-cooling floor each day, and says so
    data = mirror(shared_data, tmp_path / "data")
    (data / "sustain-cluster" / "weather" / "DE-LU_2023.json").unlink()
    clear_cache()
    res = run_replay("global", data, "2023-07-02", "2023-07-03", ("agnostic",), seed=0,
                     workers=1)
    for row in res["daily"]:
        fb = row["forecast_fallbacks"]
        assert "de-frankfurt: PUE: no weather: PUE at the model's free-cooling floor" in \
            fb["de-frankfurt"], fb
        assert "gb-london" not in fb or not any(WEATHER_FALLBACK.search(n)
                                                 for n in fb["gb-london"])
    assert res["forecast_fallback_site_days"]["de-frankfurt"] == 2
    assert any("site de-frankfurt: no weather file for this zone" in n for n in res["notes"])
    assert np.isfinite(res["policies"]["agnostic"]["emissions_kg"])
