"""load_site_signals and the source registry."""

from __future__ import annotations

import math
import os
import shutil
import sys
import types
from pathlib import Path

import pandas as pd
import pytest

from carbonsched.adapters.signals import (
    SIGNAL_COLUMNS,
    SOURCES,
    SignalSource,
    build_registry,
    clear_cache,
    get_source,
    load_site_signals,
)
from carbonsched.adapters.signals import registry as reg
from carbonsched.domain import Backend, PueModel, SignalQuality, Site, SiteRole
from carbonsched.errors import CatalogError, DataFormatError, InputError, TimeAxisError


def make_site(zone: str, source: str, site_id: str = "s1", longitude: float = 0.0,
              timezone: str = "UTC", **meta: object) -> Site:
    return Site(
        id=site_id, name=site_id, role=SiteRole.GREEN_HUB, zone=zone, signal_source=source,
        latitude=0.0, longitude=longitude, timezone=timezone, gpus={}, it_power_cap_kw=1.0,
        pue=PueModel(), latency_ms={}, backend=Backend(kind="slurm"), meta=dict(meta),
    )


def utc(s: str) -> pd.Timestamp:
    return pd.Timestamp(s, tz="UTC")


@pytest.fixture
def data_dir(tmp_path: Path, fixtures_dir: Path) -> Path:
    """A small ../shared/data-like tree built from the hand-written fixtures."""
    sig = fixtures_dir / "signals"
    base = tmp_path / "sustain-cluster"
    for sub in ("carbon_intensity", "electricity_prices_usd_utc", "weather"):
        (base / sub).mkdir(parents=True)
    shutil.copy(sig / "em_small.csv", base / "carbon_intensity" / "TZ_2023_hourly.csv")
    (base / "electricity_prices_usd_utc" / "TZ_electricity_prices_2023.csv").write_text(
        "Datetime (UTC),Datetime (Local),Price (USD/MWh)\n"
        "2023-03-26 00:00:00+00:00,x,-1.5\n2023-03-26 01:00:00+00:00,x,20\n"
    )
    shutil.copy(sig / "openmeteo_fixed_offset.json", base / "weather" / "TZ_2023.json")
    (tmp_path / "epw").mkdir()
    shutil.copy(sig / "small.epw", tmp_path / "epw" / "small.epw")
    clear_cache()
    return tmp_path


def test_electricitymaps_window(data_dir: Path) -> None:
    frame, meta = load_site_signals(
        make_site("TZ", "electricitymaps"), data_dir, utc("2023-03-25 23:00"),
        utc("2023-03-26 06:00"),
    )
    # the weather file's wind and cloud reach the frame (issue 35 item 3: they were dropped)
    assert list(frame.columns) == [*SIGNAL_COLUMNS, "cloud_cover_pct", "wind_speed_m_per_s"]
    assert list(frame.index) == list(
        pd.date_range("2023-03-25 23:00", periods=7, freq="h", tz="UTC")
    )
    assert frame.index.name == "ts"
    ci = frame["carbon_intensity_g_per_kwh"].tolist()
    assert ci[1:3] == [100.5, 110.0] and ci[5] == 130.0
    for i in (0, 3, 4, 6):  # before the file, negative CI, gap, after the file
        assert math.isnan(ci[i])
    assert frame["carbon_intensity_estimated"].dtype == bool
    assert frame["carbon_intensity_estimated"].tolist() == [False, False, True] + [False] * 4
    assert frame["price_usd_per_mwh"].iloc[1:3].tolist() == [-1.5, 20.0]
    assert frame["price_usd_per_mwh"].iloc[3:].isna().all()
    temp = frame["temperature_c"].tolist()
    assert temp[1:3] == [5.0, 4.5] and temp[4] == 3.5 and math.isnan(temp[3])
    assert frame["relative_humidity_pct"].iloc[1] == 80.0
    assert meta["source"] == "electricitymaps"
    assert meta["zone"] == "TZ"
    assert meta["signal_quality"] == "measured"
    assert [Path(f).name for f in meta["files"]] == [
        "TZ_2023_hourly.csv", "TZ_electricity_prices_2023.csv", "TZ_2023.json"]
    assert "4 of 7 hour(s) without carbon intensity (NaN)" in meta["notes"]
    assert any(n.startswith("TZ_2023_hourly.csv: 1 identical duplicated") for n in meta["notes"])


def test_window_over_a_missing_year_is_nan_not_error(data_dir: Path) -> None:
    frame, meta = load_site_signals(make_site("TZ", "electricitymaps"), data_dir,
                                    "2024-06-01T00:00Z", "2024-06-01T03:00Z")
    assert len(frame) == 3 and frame["carbon_intensity_g_per_kwh"].isna().all()
    assert "no carbon-intensity file TZ_2024_hourly.csv: hours of 2024 NaN" in meta["notes"]


def test_weather_file_from_site_meta(data_dir: Path) -> None:
    site = make_site("TZ", "electricitymaps", weather_file="epw/small.epw")
    frame, meta = load_site_signals(site, data_dir, "2023-01-01T05:00Z", "2023-01-01T08:00Z")
    # EPW (UTC-7): 05:00 UTC = Dec 31 hour 23, 06:00 = hour 24, 07:00 = Jan 1 hour 1
    assert frame["temperature_c"].tolist() == [8.0, 7.0, 10.0]
    assert frame["relative_humidity_pct"].tolist() == [40.0, 45.0, 30.0]
    assert str(data_dir / "epw" / "small.epw") in meta["files"]


def test_bad_weather_file_suffix(data_dir: Path) -> None:
    site = make_site("TZ", "electricitymaps", weather_file="epw/small.txt")
    with pytest.raises(CatalogError, match="weather_file 'epw/small.txt' must be an Open-Meteo"):
        load_site_signals(site, data_dir, "2023-01-01T05:00Z", "2023-01-01T08:00Z")


def test_missing_named_weather_file(data_dir: Path) -> None:
    site = make_site("TZ", "electricitymaps", weather_file="epw/none.epw")
    with pytest.raises(DataFormatError, match="none.epw: does not exist"):
        load_site_signals(site, data_dir, "2023-01-01T05:00Z", "2023-01-01T08:00Z")


def test_unknown_zone_names_known_ones(data_dir: Path) -> None:
    with pytest.raises(DataFormatError) as err:
        load_site_signals(make_site("XX", "electricitymaps"), data_dir,
                          "2023-01-01T00:00Z", "2023-01-02T00:00Z")
    assert "no Electricity Maps file for zone 'XX' (site 's1'); zones with files: TZ" in str(
        err.value)


def test_unknown_source_names_known_ones(data_dir: Path) -> None:
    with pytest.raises(CatalogError) as err:
        load_site_signals(make_site("TZ", "watttime", site_id="edge-1"), data_dir,
                          "2023-01-01T00:00Z", "2023-01-02T00:00Z")
    assert str(err.value) == (
        "site 'edge-1': unknown signal source 'watttime'; known sources: eia930, "
        "electricitymaps, modelled-china"
    )
    with pytest.raises(CatalogError, match="known sources: eia930, electricitymaps"):
        get_source("nope")


def test_duplicate_registration_refused() -> None:
    with pytest.raises(InputError) as err:
        build_registry([*SOURCES, SOURCES[0]])
    assert str(err.value) == (
        "signal source 'electricitymaps' is registered twice (entries 0 and 3 of the source "
        "list); register each name once"
    )
    assert [s.name for s in SOURCES] == ["electricitymaps", "eia930", "modelled-china"]


def test_time_bounds(data_dir: Path) -> None:
    site = make_site("TZ", "electricitymaps")
    with pytest.raises(TimeAxisError, match="start 2023-01-01T00:00:00 is naive"):
        load_site_signals(site, data_dir, "2023-01-01T00:00", "2023-01-02T00:00Z")
    with pytest.raises(TimeAxisError, match="must be after start"):
        load_site_signals(site, data_dir, "2023-01-02T00:00Z", "2023-01-02T00:00Z")
    with pytest.raises(TimeAxisError, match="not on the hour"):
        load_site_signals(site, data_dir, "2023-01-02T00:30Z", "2023-01-03T00:00Z")


def test_cache_reuses_and_rereads_changed_file(data_dir: Path) -> None:
    site = make_site("TZ", "electricitymaps")
    args = (site, data_dir, "2023-03-26T00:00Z", "2023-03-26T02:00Z")
    load_site_signals(*args)
    misses = reg._cached_read.cache_info().misses
    frame, _ = load_site_signals(*args)
    assert reg._cached_read.cache_info().misses == misses  # nothing parsed again
    frame.loc[:, "carbon_intensity_g_per_kwh"] = -1.0  # callers cannot corrupt the cache
    frame, _ = load_site_signals(*args)
    assert frame["carbon_intensity_g_per_kwh"].iloc[0] == 100.5
    path = data_dir / "sustain-cluster" / "carbon_intensity" / "TZ_2023_hourly.csv"
    path.write_text(path.read_text().replace("100.5", "99.5"))
    os.utime(path, ns=(1, 1))
    frame, _ = load_site_signals(*args)
    assert frame["carbon_intensity_g_per_kwh"].iloc[0] == 99.5


def test_modelled_china_is_called_lazily(monkeypatch: pytest.MonkeyPatch, data_dir: Path) -> None:
    calls = []

    def load_signals(site: Site, start: pd.Timestamp, end: pd.Timestamp):
        calls.append((site.id, start, end))
        idx = pd.date_range(start, periods=2, freq="h", tz="UTC", name="ts")
        frame = pd.DataFrame({"carbon_intensity_g_per_kwh": [500.0, 480.0],
                              "green_surplus_index": [0.1, 0.2]}, index=idx)
        return frame, {"source": "modelled-china", "zone": "CN-NM",
                       "signal_quality": "modelled", "files": [], "notes": ["modelled"]}

    fake = types.ModuleType("carbonsched.adapters.signals.china_modelled")
    fake.load_signals = load_signals  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "carbonsched.adapters.signals.china_modelled", fake)
    frame, meta = load_site_signals(make_site("CN-NM", "modelled-china", site_id="hub"),
                                    data_dir, "2023-07-01T00:00Z", "2023-07-01T03:00Z")
    assert calls == [("hub", utc("2023-07-01 00:00"), utc("2023-07-01 03:00"))]
    assert list(frame.columns) == [*SIGNAL_COLUMNS, "green_surplus_index"]
    assert frame["carbon_intensity_g_per_kwh"].tolist()[:2] == [500.0, 480.0]
    assert math.isnan(frame["carbon_intensity_g_per_kwh"].iloc[2])
    assert frame["green_surplus_index"].tolist()[:2] == [0.1, 0.2]
    assert meta["signal_quality"] == "modelled" and meta["zone"] == "CN-NM"


def test_custom_registry() -> None:
    def load(site: Site, data_dir: Path, hours: pd.DatetimeIndex):
        return pd.DataFrame({"carbon_intensity_g_per_kwh": 1.0}, index=hours), {}

    custom = build_registry([SignalSource("const", SignalQuality.MODELLED, load, "test")])
    frame, meta = load_site_signals(make_site("Z", "const"), ".", "2023-01-01T00:00Z",
                                    "2023-01-01T02:00Z", registry=custom)
    assert frame["carbon_intensity_g_per_kwh"].tolist() == [1.0, 1.0]
    assert meta["signal_quality"] == "modelled" and meta["files"] == []


# ------------------------------------------------------------------ real data
@pytest.mark.shared_data
def test_real_de_lu_day(shared_data: Path) -> None:
    clear_cache()
    frame, meta = load_site_signals(make_site("DE-LU", "electricitymaps"), shared_data,
                                    "2023-03-26T00:00Z", "2023-03-27T00:00Z")
    assert frame.shape == (24, 10)  # SIGNAL_COLUMNS, cloud cover and wind speed
    first = frame.iloc[0]
    assert first["cloud_cover_pct"] == 94.0  # the file: 94 %, 16.5 km/h
    assert first["wind_speed_m_per_s"] == pytest.approx(16.5 / 3.6)
    assert first["carbon_intensity_g_per_kwh"] == 149.02
    assert first["carbon_intensity_lca_g_per_kwh"] == 196.35
    assert first["price_usd_per_mwh"] == pytest.approx(42.50751)
    assert first["temperature_c"] == 7.6  # Open-Meteo label 2023-03-26T01:00 at +01:00
    assert frame.notna().all().all()
    assert meta["signal_quality"] == "measured" and len(meta["files"]) == 3


@pytest.mark.shared_data
def test_real_gb_across_new_year(shared_data: Path) -> None:
    frame, meta = load_site_signals(make_site("GB", "electricitymaps"), shared_data,
                                    "2022-12-31T22:00Z", "2023-01-01T02:00Z")
    assert frame["carbon_intensity_g_per_kwh"].tolist() == [76.30, 62.81, 62.55, 65.09]
    assert frame["price_usd_per_mwh"].isna().all()  # no GB price file
    assert frame["temperature_c"].iloc[:2].isna().all()  # weather file starts 2023
    assert "no price file GB_electricity_prices_2023.csv: price NaN for 2023" in meta["notes"]


@pytest.mark.shared_data
def test_real_eia930_with_epw(shared_data: Path) -> None:
    # the site's clock is checked against the file (a sun-driven series peaks near solar noon)
    site = make_site("CISO", "eia930", longitude=-121.93, timezone="America/Los_Angeles",
                     weather_file="eia930-sustaindc/USA_CA_San.Jose-Mineta.epw")
    frame, meta = load_site_signals(site, shared_data, "2022-01-01T00:00Z", "2022-01-01T02:00Z")
    total = 3130 + 1367 + 2304 + 44 + 6764 + 19 + 2265 + 189
    assert frame["carbon_intensity_g_per_kwh"].iloc[0] == pytest.approx(
        (44 * 406 + 6764 * 370 + 19 * 760 + 189 * 575) / total)
    assert frame["carbon_intensity_lca_g_per_kwh"].iloc[0] == pytest.approx(222.29592090536002)
    assert frame["price_usd_per_mwh"].isna().all()
    assert frame["temperature_c"].notna().all()
    assert meta["source"] == "eia930" and meta["signal_quality"] == "measured"


def test_missing_data_dir_is_named_with_the_fix(tmp_path: Path) -> None:
    # it used to report "no Electricity Maps file for zone ...; zones with files: none"
    missing = tmp_path / "nope"
    with pytest.raises(DataFormatError) as err:
        load_site_signals(make_site("TZ", "electricitymaps"), missing,
                          "2023-01-01T00:00Z", "2023-01-02T00:00Z")
    assert str(err.value) == (
        f"{missing}: data folder for site 's1' (electricitymaps signals) does not exist; pass "
        "--data-dir or set CARBONSCHED_DATA_DIR to the folder laid out like ../shared/data")


@pytest.mark.parametrize("price, gsi, note", [
    # never given, and the source models the green-surplus index: not a gap
    ([math.nan] * 3, [0.1, 0.2, 0.3],
     "no price in any of the 3 hour(s) loaded: not needed, the source gives the "
     "green-surplus index itself"),
    # never given, and the index has a gap of its own: the plain note
    ([math.nan] * 3, [0.1, math.nan, 0.3], "no price in any of the 3 hour(s) loaded (all NaN)"),
    ([math.nan] * 3, None, "no price in any of the 3 hour(s) loaded (all NaN)"),
])
def test_a_signal_nan_in_every_hour_says_what_it_means(price, gsi, note) -> None:
    frame = pd.DataFrame({"price_usd_per_mwh": price})
    if gsi is not None:
        frame["green_surplus_index"] = gsi
    assert reg._absent_note(frame, "price_usd_per_mwh", "price") == note
    frame["temperature_c"] = math.nan
    assert reg._absent_note(frame, "temperature_c", "temperature") == \
        "no temperature in any of the 3 hour(s) loaded (all NaN)"
