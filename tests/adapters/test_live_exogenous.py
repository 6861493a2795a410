"""The live daily path reads the forecasts its providers publish (issue 35 item 3).

Real parts: the loopback replay server (uvicorn) answering in the providers' response shapes
(Open-Meteo, Electricity Maps, WattTime, ENTSO-E XML), a SQLite signal cache, the real pipeline.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from replay_entsoe import KEY as ENTSOE_KEY
from replay_server import TOKEN, WT_PASSWORD, WT_USER, ReplayServer, ReplayState

from carbonsched.adapters.signals import load_site_signals
from carbonsched.adapters.signals.live import EXOGENOUS_FEATURES, LiveSignals, entsoe_published_at
from carbonsched.adapters.signals.openmeteo import read_open_meteo
from carbonsched.adapters.signals.openmeteo_api import COLUMNS, read_open_meteo_api
from carbonsched.adapters.signals.providers import parse_providers
from carbonsched.catalog import load_catalog
from carbonsched.forecasts.exogenous import FEATURES, check_table
from carbonsched.pipeline.daily import (
    FORECAST_HISTORY_DAYS,
    OBSERVED_WEATHER_CAVEAT,
    exogenous_note,
    forecast_site,
    gather_forecasts,
    live_exogenous,
)
from carbonsched.store import Store
from carbonsched.store.signal_cache import SignalCache

pytestmark = pytest.mark.shared_data

UTC = "UTC"
CI = "carbon_intensity_g_per_kwh"
HOUR = pd.Timedelta(hours=1)
T = pd.Timestamp("2023-12-18", tz=UTC)  # a Monday: a refit period starts
ENV = {"ELECTRICITYMAPS_TOKEN": TOKEN, "WATTTIME_USERNAME": WT_USER,
       "WATTTIME_PASSWORD": WT_PASSWORD, "ENTSOE_API_KEY": ENTSOE_KEY}
CATALOG = load_catalog("global")
WEATHER = ("temperature_c", "relative_humidity_pct", "wind_speed_m_per_s", "cloud_cover_pct")
DACF_POISONED = {"temperature_c", "relative_humidity_pct", "wind_speed_m_per_s",
                 "irradiance_w_per_m2", "wind_mw", "solar_mw", CI, "pue"}
"""Features tests/forecasts/test_forecast_exogenous.py poisons (its first assertion)."""
PRICE_POISONED = {"day_ahead_price_usd_per_mwh"}
"""The auction price, poisoned by the Frankfurt tests of test_forecast_exogenous.py."""


@pytest.fixture(scope="module")
def replay(shared_data):
    state = ReplayState(shared_data)
    state.coords = {(round(s.latitude, 2), round(s.longitude, 2)): s.zone for s in CATALOG.sites}
    state.now = T
    with ReplayServer(state) as server:
        yield server


@pytest.fixture(autouse=True)
def _reset(replay):
    replay.state.faults.clear()
    replay.state.hits.clear()
    yield
    replay.state.faults.clear()


def config(replay):
    doc = {"providers": {"electricitymaps": {"kind": "electricitymaps"},
                         "watttime": {"kind": "watttime", "signal_type": "co2_aoer"},
                         "entsoe": {"kind": "entsoe"},
                         "open-meteo": {"kind": "open-meteo"}},
           "sites": {"gb-london": {"carbon_intensity": "electricitymaps", "mix": "electricitymaps",
                                   "weather": "open-meteo"},
                     "us-ny-newyork": {"carbon_intensity": {"provider": "watttime",
                                                            "zone": "NYISO_NYC"},
                                       "weather": "open-meteo"},
                     "de-frankfurt": {"carbon_intensity": "electricitymaps",
                                      "price": {"provider": "entsoe", "zone": "DE_LU"}}}}
    return parse_providers(doc).with_base_url(replay.url)


def live(replay, store, now=T):
    return LiveSignals(config(replay), SignalCache(store), clock=lambda: now, env=ENV,
                       sleep=lambda s: None)


# --------------------------------------------------------------- weather: nothing dropped
def test_open_meteo_client_and_file_loader_keep_wind_and_cloud(replay, tmp_path, shared_data):
    # the kind of loss: a weather column a reader returns that the signal frame drops. The live
    # client asks for every variable the file reader maps, and the loader keeps every one
    site = CATALOG.site("gb-london")
    src = live(replay, Store(f"sqlite:///{tmp_path}/c.db"))
    frame, _ = src.load_site_signals(site, None, T - 48 * HOUR, T)
    ref, _ = read_open_meteo(shared_data / "sustain-cluster" / "weather" / "GB_2023.json")
    ref = ref.reindex(frame.index)
    assert replay.state.open_meteo_asked[-1] == [
        "temperature_2m", "relative_humidity_2m", "wind_speed_10m", "cloud_cover",
        "shortwave_radiation"]
    for c in WEATHER:  # km/h on the wire, m/s in the frame
        np.testing.assert_allclose(frame[c].to_numpy(float), ref[c].to_numpy(float), atol=1e-9)
    assert frame["wind_speed_m_per_s"].notna().all() and frame["cloud_cover_pct"].notna().all()
    files, _ = load_site_signals(site, shared_data, T - 48 * HOUR, T)
    for c in ("wind_speed_m_per_s", "cloud_cover_pct"):
        np.testing.assert_allclose(files[c].to_numpy(float), ref[c].to_numpy(float))


def test_short_wave_irradiance_is_put_on_the_hour_it_averages():
    # Open-Meteo's shortwave_radiation is the mean of the hour BEFORE its label
    payload = {"latitude": 51.5, "longitude": -0.1, "utc_offset_seconds": 3600,
               "hourly_units": {"time": "iso8601", "temperature_2m": "°F",
                                "relative_humidity_2m": "%", "wind_speed_10m": "km/h",
                                "shortwave_radiation": "W/m²"},
               "hourly": {"time": ["2023-07-17T01:00", "2023-07-17T02:00", "2023-07-17T03:00"],
                          "temperature_2m": [50.0, 59.0, None],
                          "relative_humidity_2m": [80, 70, 60],
                          "wind_speed_10m": [36.0, 18.0, 0.0],
                          "shortwave_radiation": [0.0, 120.0, 300.0]}}
    frame, meta = read_open_meteo_api(payload)
    assert list(frame.index) == list(pd.date_range("2023-07-17 00:00", periods=3, freq="h",
                                                   tz=UTC))
    assert list(frame.columns[:len(COLUMNS)]) == list(COLUMNS)
    np.testing.assert_allclose(frame["irradiance_w_per_m2"], [120.0, 300.0, np.nan])
    np.testing.assert_allclose(frame["wind_speed_m_per_s"], [10.0, 5.0, 0.0])
    np.testing.assert_allclose(frame["temperature_c"], [10.0, 15.0, np.nan])
    assert frame["cloud_cover_pct"].isna().all()
    assert "no cloud_cover_pct in the answer (NaN)" in meta["notes"]


# --------------------------------------------------------------- what the providers publish
def test_provider_forecasts_with_their_publication_times(replay, tmp_path, shared_data):
    src = live(replay, Store(f"sqlite:///{tmp_path}/c.db"))
    # Electricity Maps and Open-Meteo, fetched at the issue time: published then
    table, info = src.exogenous(CATALOG.site("gb-london"), T, 24, T - 30 * 24 * HOUR)
    table = check_table(table)
    assert info["unavailable"] == [] and info["not_used"] == []
    # one request each, to its own provider's client
    assert src.requests_by_provider() == {"open-meteo": 1, "electricitymaps": 1}
    assert replay.state.hits["open-meteo"] == 1 and replay.state.hits["electricitymaps"] == 1
    assert [s["provider"] for s in info["sources"]] == ["open-meteo", "electricitymaps"]
    assert sorted(set(table["feature"])) == sorted([*WEATHER, CI])
    assert set(table["feature"]) <= set(EXOGENOUS_FEATURES) <= set(FEATURES)
    assert (table["issued_at"] == T).all()
    em = table[table["feature"] == CI].set_index("ts")["value"]
    assert list(em.index) == list(pd.date_range(T, periods=24, freq="h"))
    hist, _ = load_site_signals(CATALOG.site("gb-london"), shared_data, T, T + 24 * HOUR)
    np.testing.assert_allclose(em.to_numpy(), hist[CI].to_numpy())  # the replay's "forecast"
    # WattTime (average signal, lbs/MWh on the wire): its generated_at, g/kWh in the table
    wt, info = src.exogenous(CATALOG.site("us-ny-newyork"), T, 24, T - 30 * 24 * HOUR)
    wt = check_table(wt)
    w = wt[wt["feature"] == CI]
    assert len(w) == 24 and (w["issued_at"] == T).all()
    ny, _ = load_site_signals(CATALOG.site("us-ny-newyork"), shared_data, T, T + 24 * HOUR)
    np.testing.assert_allclose(w["value"].to_numpy(), ny[CI].to_numpy(), rtol=1e-9)
    # ENTSO-E's day-ahead wind and solar: an archive, each day published at 18:00 Brussels
    # time the day before (16:00 UTC in summer, 17:00 UTC in winter: across the DST change)
    t0 = pd.Timestamp("2021-11-01", tz=UTC)
    src2 = live(replay, Store(f"sqlite:///{tmp_path}/d.db"), now=t0)
    de, info = src2.exogenous(CATALOG.site("de-frankfurt"), t0, 24, t0 - 10 * 24 * HOUR)
    de = check_table(de)
    live_ones = {s["what"] for s in info["sources"]}
    assert "wind and solar day-ahead forecast" in live_ones
    assert set(de.loc[de["feature"].isin(["wind_mw", "solar_mw"]), "feature"]) == {
        "wind_mw", "solar_mw"}
    pub = de[de["feature"] == "wind_mw"].set_index("ts")["issued_at"]
    assert pub[pd.Timestamp("2021-10-30 12:00", tz=UTC)] == pd.Timestamp(
        "2021-10-29 16:00", tz=UTC)
    assert pub[pd.Timestamp("2021-10-31 23:00", tz=UTC)] == pd.Timestamp(
        "2021-10-31 17:00", tz=UTC)  # 00:00 CET of Nov 1st: published Oct 31st 18:00 CET
    assert pub.index.min() == t0 - 10 * 24 * HOUR and (pub <= t0).all()
    # not yet published by "now": Nov 1st's hours (published Oct 31st 17:00 UTC) are in, the
    # 2nd's (Nov 1st 17:00 UTC) are not
    assert pub.index.max() == pd.Timestamp("2021-11-01 22:00", tz=UTC)
    raw = pd.read_csv(shared_data / "dacf" / "DE_src_prod_forecasts_test_period.csv")
    raw.index = pd.DatetimeIndex(pd.to_datetime(raw["UTC time"], utc=True))
    v = de[de["feature"] == "wind_mw"].set_index("ts")["value"]
    np.testing.assert_allclose(v, raw.loc[v.index, "avg_wind_production_forecast"])


def test_entsoe_publication_time_rule():
    ts = pd.DatetimeIndex(["2023-03-26 21:59", "2023-03-26 22:00", "2023-01-01 00:00"],
                          tz=UTC).floor("h")
    got = entsoe_published_at(ts)
    # 2023-03-26 21:00 UTC is 23:00 CEST on the 26th: published the 25th 18:00 CET (17:00 UTC);
    # 22:00 UTC is 00:00 CEST on the 27th: published the 26th 18:00 CEST (16:00 UTC)
    assert list(got) == [pd.Timestamp("2023-03-25 17:00", tz=UTC),
                         pd.Timestamp("2023-03-26 16:00", tz=UTC),
                         pd.Timestamp("2022-12-31 17:00", tz=UTC)]


# --------------------------------------------------------------- the plan reads them
def _one_site(site_id):
    return dataclasses.replace(CATALOG, sites=[CATALOG.site(site_id)])


def test_live_plan_uses_the_provider_forecasts_and_says_when_one_is_down(replay, tmp_path,
                                                                       shared_data):
    store = Store(f"sqlite:///{tmp_path}/c.db")
    src = live(replay, store)
    prov: dict = {}
    fcs, notes, _ = gather_forecasts(_one_site("gb-london"), None, T, 24, loader=
                                     src.load_site_signals, provenance=prov,
                                     exogenous=src.exogenous)
    fc = fcs["gb-london"]
    ci = fc.models[CI]
    ex = ci["exogenous"]
    assert ex["features"] == ["temperature_c", "wind_speed_m_per_s", "cloud_cover_pct"]
    assert ex["caveat"] == OBSERVED_WEATHER_CAVEAT
    assert ex["source"] == ("providers: open-meteo weather forecast, electricitymaps "
                            "carbon-intensity forecast")
    # London, December 2023: the ridge on the weather forecasts (fitted, so it takes the
    # history-only ridge's place in the combination; here it also beats it on validation) is in
    # the chosen combination; the plan names the forecasts it reads
    assert ci["model"] == "ens(ridge_hourly_exog+ols_hourly_ratio)" and ex["used"]
    assert ci["combination"] is True
    assert ci["candidates"]["ridge_hourly_exog"] < ci["candidates"]["ridge_hourly"]
    assert [f for f in ci["features"]["ridge_hourly_exog"] if "target hour" in f] == [
        f"{f} forecast for the target hour, latest published by the issue time"
        for f in ("temperature_c", "wind_speed_m_per_s", "cloud_cover_pct")]
    # the provider's own forecast, fetched today, has no past issue to be fitted or validated
    # on: not used, and the plan says so
    assert ci["exogenous_not_fitted"]["features"] == [CI]
    assert any(n.startswith(f"gb-london: carbon intensity: {CI} forecast(s) read at the issue "
                            "time were not used: none was published before the refit period's "
                            "start (2023-12-18T00:00:00+00:00)") for n in notes), notes
    gs = fc.models["green_surplus_index"]
    assert gs["exogenous"]["features"] == ["temperature_c", "wind_speed_m_per_s",
                                           "cloud_cover_pct"]
    assert gs["model"] == "ridge_hourly_exog" and gs["exogenous"]["used"]
    # the PUE model on the forecast weather has no archive of past forecasts: named, unused
    assert fc.models["pue"]["exogenous_not_fitted"]["features"] == ["pue"]
    assert any(OBSERVED_WEATHER_CAVEAT in n for n in notes)
    assert prov["exogenous"]["gb-london"]["unavailable"] == []
    assert exogenous_note(prov["exogenous"]) is None

    # Open-Meteo down: the history is cached (no weather request), the forecast fails; the
    # plan runs on history for the weather and says so, counted and named
    replay.state.faults["open-meteo"] = "500"
    src2 = live(replay, store)
    prov2: dict = {}
    fcs2, _, _ = gather_forecasts(_one_site("gb-london"), None, T, 24,
                                  loader=src2.load_site_signals, provenance=prov2,
                                  exogenous=src2.exogenous)
    m2 = fcs2["gb-london"].models[CI]
    assert m2.get("exogenous") is None  # no weather: the models ran on history
    assert m2["exogenous_not_fitted"]["features"] == [CI]  # the provider's CI forecast came
    assert "exogenous_not_fitted" not in fcs2["gb-london"].models["pue"]  # no weather at all
    assert fcs2["gb-london"].models["green_surplus_index"].get("exogenous") is None
    note = exogenous_note(prov2["exogenous"])
    assert note.startswith("exogenous forecasts: 1 provider forecast(s) UNAVAILABLE, so those "
                           "models ran on history: gb-london open-meteo weather forecast (")
    assert "HTTP 500" in note


def test_forecasts_fetched_after_the_issue_time_are_not_used(replay, tmp_path):
    src = live(replay, Store(f"sqlite:///{tmp_path}/c.db"), now=T + 2 * HOUR)
    table, info = src.exogenous(CATALOG.site("gb-london"), T, 24, T - 24 * HOUR)
    assert len(table) == 0 and info["unavailable"] == []
    assert [u["provider"] for u in info["not_used"]] == ["open-meteo", "electricitymaps"]
    assert "after the issue time" in info["not_used"][0]["why"]
    note = exogenous_note({"gb-london": info})
    assert note.startswith("exogenous forecasts: 2 not used: gb-london open-meteo weather "
                           "forecast (it would be fetched now")


# --------------------------------------------------------------- no look-ahead, live features
def test_poisoned_future_of_every_live_feature_changes_nothing(replay, tmp_path, shared_data):
    site = CATALOG.site("gb-london")
    src = live(replay, Store(f"sqlite:///{tmp_path}/c.db"))
    start = T - pd.Timedelta(days=FORECAST_HISTORY_DAYS)
    hist, meta = src.load_site_signals(site, None, start, T + 24 * HOUR)
    published, info = src.exogenous(site, T, 24, start)
    table = live_exogenous(site, hist, T, published, info)
    live_feats = set(table["feature"])
    assert live_feats == {*WEATHER, CI}
    # every feature of the exogenous table is poisoned by this test, the DACF one or the price one
    assert live_feats | DACF_POISONED | PRICE_POISONED == set(FEATURES)
    clean = forecast_site(site, hist, T, 24, meta, models={}, exogenous=table)
    # revisions published after the issue time, of every live feature, for the horizon and
    # (as if re-published) for every past hour; and every observation at or after T
    late = table.copy()
    late["issued_at"] = T + HOUR
    late["value"] = late["value"] * 10 + 50
    rh = late["feature"] == "relative_humidity_pct"
    late.loc[rh, "value"] = 100 - (late.loc[rh, "value"] - 50) / 10
    bad = check_table(pd.concat([table, late], ignore_index=True))
    bad.attrs.update(table.attrs)
    assert set(bad.loc[bad["issued_at"] > T, "feature"]) == live_feats
    bad_hist = hist.copy()
    num = bad_hist.select_dtypes("number").columns
    bad_hist.loc[bad_hist.index >= T, num] = bad_hist.loc[bad_hist.index >= T, num] * 10 + 50
    poisoned = forecast_site(site, bad_hist, T, 24, meta, models={}, exogenous=bad)
    pd.testing.assert_frame_equal(clean.signals, poisoned.signals)
    pd.testing.assert_frame_equal(clean.long, poisoned.long)
    for sig in (CI, "green_surplus_index", "pue"):
        assert clean.models[sig]["model"] == poisoned.models[sig]["model"]
        assert clean.models[sig].get("exogenous") == poisoned.models[sig].get("exogenous")
    # the teeth: each weather feature the chosen ridge reads, revised AT the issue time, does
    # move the carbon-intensity and green-surplus forecasts
    assert clean.models[CI]["model"] == "ens(ridge_hourly_exog+ols_hourly_ratio)"
    for f in ("temperature_c", "wind_speed_m_per_s", "cloud_cover_pct"):
        moved = table.copy()
        sel = (moved["feature"] == f) & (moved["ts"] >= T)
        assert sel.sum() == 24
        moved.loc[sel, "value"] = moved.loc[sel, "value"] * 1.5 + 5
        moved.attrs.update(table.attrs)
        changed = forecast_site(site, hist, T, 24, meta, models={}, exogenous=moved)
        for sig in (CI, "green_surplus_index"):
            assert not np.allclose(changed.signals[sig], clean.signals[sig]), (f, sig)


# --------------------------------------------------------------- carbonsched plan --providers
def test_carbonsched_plan_with_providers_reads_their_forecasts(replay, tmp_path, monkeypatch,
                                                               private_store):
    # a one-site catalog and its providers file, written by `catalog init`; the plan command
    # against the loopback replay, on the replayed clock
    import json

    from typer.testing import CliRunner

    from carbonsched.cli.app import app

    runner = CliRunner()
    src = tmp_path / "fleet.csv"
    src.write_text("id,role,name,latitude,longitude,timezone,zone,gpus,backend,aliases,"
                   "provider\nlon,edge,London edge,51.5,-0.12,Europe/London,GB,A100:6+T4:28:75,"
                   "kubernetes:eu-london/carbonsched,uksouth westeurope,electricitymaps:GB\n")
    r = runner.invoke(app, ["catalog", "init", str(tmp_path / "mine.toml"), "--from", str(src)])
    assert r.exit_code == 0, r.output
    replay.state.coords[(51.5, -0.12)] = "GB"
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("CARBONSCHED_PROVIDERS_BASE_URL", replay.url)
    monkeypatch.setenv("CARBONSCHED_PROVIDERS_NOW", T.isoformat())
    out = tmp_path / "plan.json"
    r = runner.invoke(app, ["plan", "--date", f"{T:%Y-%m-%d}", "--catalog",
                            str(tmp_path / "mine.toml"), "--providers",
                            str(tmp_path / "providers-mine.toml"), "--no-store", "--out",
                            str(out)], terminal_width=200)
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    exo = doc["provider_signals"]["lon"]["exogenous"]
    assert [s["provider"] for s in exo["sources"]] == ["open-meteo", "electricitymaps"]
    assert exo["unavailable"] == [] and exo["not_used"] == []
    ci = doc["forecast_models"]["lon"][CI]
    assert ci["exogenous"]["features"] == ["temperature_c", "wind_speed_m_per_s",
                                           "cloud_cover_pct"]
    assert ci["exogenous_not_fitted"]["features"] == [CI]
    assert any(OBSERVED_WEATHER_CAVEAT in n for n in doc["notes"])
