"""LiveSignals: the cache (never fetched twice, gaps only), freshness, degradation, the daily plan.

Real parts: the loopback replay server (uvicorn), SQLite and PostgreSQL stores, the real pipeline.
"""

from __future__ import annotations

import os
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from replay_entsoe import KEY as ENTSOE_KEY
from replay_server import (
    EIA_KEY,
    TOKEN,
    WT_PASSWORD,
    WT_USER,
    ReplayServer,
    ReplayState,
)
from sqlalchemy import create_engine, text

from carbonsched.adapters.signals.electricitymaps import read_electricitymaps
from carbonsched.adapters.signals.live import LiveSignals
from carbonsched.adapters.signals.providers import (
    ProviderSpec,
    Secret,
    credentials,
    load_providers,
    parse_providers,
)
from carbonsched.catalog import load_catalog
from carbonsched.errors import CatalogError, ProviderConfigError
from carbonsched.pipeline.daily import run_daily_plan
from carbonsched.regions import __file__ as regions_init
from carbonsched.store import Store
from carbonsched.store.signal_cache import SignalCache

pytestmark = pytest.mark.shared_data

UTC = "UTC"
PROVIDERS_GLOBAL = os.path.join(os.path.dirname(regions_init), "providers-global.toml")
ENV = {"ELECTRICITYMAPS_TOKEN": TOKEN, "WATTTIME_USERNAME": WT_USER,
       "WATTTIME_PASSWORD": WT_PASSWORD, "ENTSOE_API_KEY": ENTSOE_KEY, "EIA_API_KEY": EIA_KEY}
CATALOG = load_catalog("global")


@pytest.fixture(scope="module")
def replay(shared_data):
    state = ReplayState(shared_data)
    state.coords = {(round(s.latitude, 2), round(s.longitude, 2)): s.zone for s in CATALOG.sites}
    with ReplayServer(state) as server:
        yield server


@pytest.fixture(autouse=True)
def _reset(replay):
    replay.state.faults.clear()
    replay.state.hits.clear()
    replay.state.latest = None
    yield
    replay.state.faults.clear()
    replay.state.latest = None


def at(ts: str):
    t = pd.Timestamp(ts, tz=UTC)
    return lambda: t


def small_config(replay, **options):
    doc = {"providers": {"electricitymaps": {"kind": "electricitymaps", **options},
                         "open-meteo": {"kind": "open-meteo", **options}},
           "sites": {"gb-london": {"carbon_intensity": "electricitymaps",
                                   "weather": "open-meteo"}}}
    return parse_providers(doc).with_base_url(replay.url)


def live(replay, store, clock, cfg=None, **options):
    return LiveSignals(cfg or small_config(replay, **options), SignalCache(store), clock=clock,
                       env=ENV, sleep=lambda s: None)


def gb_file(shared_data):
    frame, _ = read_electricitymaps(
        shared_data / "sustain-cluster" / "carbon_intensity" / "GB_2023_hourly.csv")
    return frame


# --------------------------------------------------------------------- the cache
def test_never_fetched_twice_and_backfill_fetches_only_the_gap(replay, tmp_path, shared_data):
    store = Store(f"sqlite:///{tmp_path}/c.db")
    site = CATALOG.site("gb-london")
    src = live(replay, store, at("2023-07-15T00:10"))
    a, b = pd.Timestamp("2023-07-01", tz=UTC), pd.Timestamp("2023-07-15", tz=UTC)
    frame, meta = src.load_site_signals(site, None, a, b)
    assert src.requests_by_provider() == {"electricitymaps": 2, "open-meteo": 1}
    ref = gb_file(shared_data).loc[a:b - pd.Timedelta(hours=1)]
    np.testing.assert_allclose(frame["carbon_intensity_g_per_kwh"],
                               ref["carbon_intensity_g_per_kwh"])
    assert meta["source"] == "electricitymaps" and meta["origin"] == "providers"
    assert meta["degraded"] == []
    assert meta["providers"]["carbon_intensity"]["emission_factor_type"] == "direct"
    # the newest hour (23:00-24:00) ended 10 minutes before "now"
    assert meta["signal_age_hours"] == pytest.approx(10 / 60, abs=1e-5)
    # same window again: everything from the cache
    frame2, _ = src.load_site_signals(site, None, a, b)
    assert src.requests == 3
    pd.testing.assert_frame_equal(frame, frame2)
    # a new process on the same store, two days earlier added: only that gap is asked
    src2 = live(replay, store, at("2023-07-15T00:10"))
    src2.load_site_signals(site, None, a - pd.Timedelta(days=2), b)
    assert src2.requests_by_provider() == {"electricitymaps": 1, "open-meteo": 1}
    gaps = src2.fetch_log
    assert [(r["signal"], r["start"], r["end"]) for r in gaps] == [
        ("carbon_intensity", a - pd.Timedelta(days=2), a),
        ("weather", a - pd.Timedelta(days=2), a)]
    cached = SignalCache(store).fetches("electricitymaps")
    assert list(cached["status"]) == ["ok", "ok"] and cached["age_hours"].iloc[0] > 0


def test_a_late_provider_is_asked_again_for_the_tail_only(replay, tmp_path):
    store = Store(f"sqlite:///{tmp_path}/c.db")
    site = CATALOG.site("gb-london")
    a, b = pd.Timestamp("2023-07-14", tz=UTC), pd.Timestamp("2023-07-15", tz=UTC)
    replay.state.latest = pd.Timestamp("2023-07-14T19:00", tz=UTC)
    src = live(replay, store, at("2023-07-15T00:10"))
    frame, meta = src.load_site_signals(site, None, a, b)
    assert frame["carbon_intensity_g_per_kwh"].loc["2023-07-14T20:00":].isna().all()
    assert meta["signal_age_hours"] == pytest.approx(4 + 10 / 60)
    assert meta["newest_value_at"] == "2023-07-14T19:00:00+00:00"
    replay.state.latest = None
    src.load_site_signals(site, None, a, b)
    log = [r for r in src.fetch_log if r["signal"] == "carbon_intensity"]
    assert [(r["start"].hour, r["end"]) for r in log] == [(0, b), (20, b)]
    assert log[0]["age_hours"] == pytest.approx(4 + 10 / 60) and log[1]["hours_stored"] == 4


def test_provider_down_with_empty_cache_is_degraded_never_zero(replay, tmp_path):
    store = Store(f"sqlite:///{tmp_path}/c.db")
    replay.state.faults["electricitymaps"] = "500"
    src = live(replay, store, at("2023-07-15T00:10"), max_attempts=2)
    a, b = pd.Timestamp("2023-07-14", tz=UTC), pd.Timestamp("2023-07-15", tz=UTC)
    frame, meta = src.load_site_signals(CATALOG.site("gb-london"), None, a, b)
    assert frame["carbon_intensity_g_per_kwh"].isna().all()  # missing, never 0
    (d,) = meta["degraded"]
    assert d["site"] == "gb-london" and d["provider"] == "electricitymaps"
    assert d["missing_hours"] == 24 and d["missing_from"] == a.isoformat()
    assert "HTTP 500" in d["reason"] and d["last_good"] is None
    assert any(n.startswith("DEGRADED gb-london") for n in meta["notes"])
    assert SignalCache(store).fetches("electricitymaps")["status"].tolist() == ["failed"]


def test_what_a_providers_reader_notes_reaches_the_plan_not_only_the_fetch_log(replay,
                                                                              tmp_path):
    # WattTime's 5-minute points are averaged per hour: the reader says so. Before, the note
    # went to the fetch log only; now it is in the loader's notes (the plan's) for the hours
    # that run fetched, and a run served from the cache (nothing fetched) adds none
    cfg = parse_providers({"providers": {"watttime": {"kind": "watttime"}},
                           "sites": {"us-ny-newyork": {"carbon_intensity": {
                               "provider": "watttime", "zone": "NYISO_NYC"}}}}
                          ).with_base_url(replay.url)
    store = Store(f"sqlite:///{tmp_path}/c.db")
    src = live(replay, store, at("2023-07-15T00:10"), cfg=cfg)
    a, b = pd.Timestamp("2023-07-14", tz=UTC), pd.Timestamp("2023-07-15", tz=UTC)
    _, meta = src.load_site_signals(CATALOG.site("us-ny-newyork"), None, a, b)
    said = [n for n in meta["notes"] if n.startswith("watttime carbon_intensity for NYISO_NYC, ")]
    assert said == [f"watttime carbon_intensity for NYISO_NYC, {a.isoformat()} .. "
                    f"{b.isoformat()}: 12 points of 5 min averaged per hour"]
    assert src.fetch_log[-1]["detail"] == "12 points of 5 min averaged per hour"
    _, again = src.load_site_signals(CATALOG.site("us-ny-newyork"), None, a, b)
    assert [n for n in again["notes"] if n.startswith("watttime ")] == []


def test_configuration_errors_are_raised_not_degraded(replay, tmp_path):
    store = Store(f"sqlite:///{tmp_path}/c.db")
    src = LiveSignals(small_config(replay), SignalCache(store), clock=at("2023-07-15"),
                      env={**ENV, "ELECTRICITYMAPS_TOKEN": "wrong"})
    with pytest.raises(ProviderConfigError, match="auth-token was rejected"):
        src.load_site_signals(CATALOG.site("gb-london"), None, "2023-07-14T00:00Z",
                              "2023-07-15T00:00Z")
    with pytest.raises(CatalogError, match="site 'sg-singapore' has no .sites.sg-singapore."):
        src.load_site_signals(CATALOG.site("sg-singapore"), None, "2023-07-14T00:00Z",
                              "2023-07-15T00:00Z")


@pytest.mark.postgres
def test_cache_on_postgres(replay):
    url = os.environ.get("CARBONSCHED_TEST_POSTGRES_URL")
    if not url:
        pytest.skip("CARBONSCHED_TEST_POSTGRES_URL not set (scripts/test starts PostgreSQL)")
    # a database of its own, so the store tests' DROP TABLEs cannot race this test
    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        if not c.execute(text("SELECT 1 FROM pg_database WHERE datname='cs_signal_cache'")
                         ).scalar():
            c.execute(text("CREATE DATABASE cs_signal_cache"))
    own = url.rsplit("/", 1)[0] + "/cs_signal_cache"
    with create_engine(own).begin() as c:
        c.execute(text("DROP TABLE IF EXISTS signal_cache, signal_fetches, forecasts, "
                       "inference_placements, placements, plans, alembic_version CASCADE"))
    store = Store(own)
    src = live(replay, store, at("2023-07-15T00:10"))
    a, b = pd.Timestamp("2023-07-10", tz=UTC), pd.Timestamp("2023-07-15", tz=UTC)
    f1, _ = src.load_site_signals(CATALOG.site("gb-london"), None, a, b)
    n = src.requests
    f2, _ = live(replay, store, at("2023-07-15T00:10")).load_site_signals(
        CATALOG.site("gb-london"), None, a, b)
    assert n == 2 and replay.state.hits["electricitymaps"] == 1
    pd.testing.assert_frame_equal(f1, f2)
    with create_engine(own).connect() as c:
        kind = c.execute(text("SELECT data_type FROM information_schema.columns WHERE "
                              "table_name='signal_cache' AND column_name='ts'")).scalar()
    assert kind == "timestamp with time zone"


# --------------------------------------------------------------------- configuration
def test_providers_file_rules(monkeypatch, tmp_path):
    base = {"providers": {"em": {"kind": "electricitymaps"},
                          "wt": {"kind": "watttime", "signal_type": "co2_moer"},
                          "om": {"kind": "open-meteo"}}}
    with pytest.raises(CatalogError, match="kind 'nope' is not one of"):
        parse_providers({"providers": {"x": {"kind": "nope"}}})
    with pytest.raises(CatalogError, match="names provider 'zz', which has no .providers.zz."):
        parse_providers({**base, "sites": {"s": {"carbon_intensity": "zz"}}})
    with pytest.raises(CatalogError, match="a open-meteo provider supplies only weather"):
        parse_providers({**base, "sites": {"s": {"carbon_intensity": "om"}}})
    with pytest.raises(CatalogError, match="unknown signal group 'wind'"):
        parse_providers({**base, "sites": {"s": {"carbon_intensity": "em", "wind": "em"}}})
    with pytest.raises(CatalogError, match="holds a token; credentials belong in the env"):
        parse_providers({"providers": {"em": {"kind": "electricitymaps", "token": "x"}}})
    with pytest.raises(ProviderConfigError, match="site 'b' is fed a MARGINAL .* site 'a' an "
                       "AVERAGE"):
        parse_providers({**base, "sites": {"a": {"carbon_intensity": "em"},
                                           "b": {"carbon_intensity": "wt"}}})
    # all marginal is fine
    cfg = parse_providers({**base, "sites": {"b": {"carbon_intensity": "wt"}}})
    assert cfg.site("b")["carbon_intensity"].provider == "wt"
    with pytest.raises(CatalogError, match="providers file .*does not exist"):
        load_providers(tmp_path / "missing.toml")
    assert load_providers(PROVIDERS_GLOBAL).sites.keys() == set(CATALOG.site_ids)


def test_credentials_from_env_or_secrets_file_and_never_shown(monkeypatch, tmp_path):
    spec = ProviderSpec("em", "electricitymaps", "http://x")
    monkeypatch.delenv("ELECTRICITYMAPS_TOKEN", raising=False)
    monkeypatch.delenv("CARBONSCHED_SECRETS_FILE", raising=False)
    with pytest.raises(ProviderConfigError, match=r"no token: set \$ELECTRICITYMAPS_TOKEN or "
                       r"\[em\] token in the secrets file"):
        credentials(spec, {})
    secrets = tmp_path / "secrets.toml"
    secrets.write_text('[em]\ntoken = "from-file"\n')
    monkeypatch.setenv("CARBONSCHED_SECRETS_FILE", str(secrets))
    creds = credentials(spec, {})
    assert creds["token"].get() == "from-file"
    assert "from-file" not in repr(creds) and str(Secret("abc")) == "Secret('***')"
    assert credentials(spec, {"ELECTRICITYMAPS_TOKEN": "env"})["token"].get() == "env"


# --------------------------------------------------------------------- the daily plan
@pytest.mark.slow
def test_global_daily_plan_on_providers_then_again_then_degraded(replay, tmp_path, shared_data):
    """Done-when of issue 10: every global site fed by provider clients (replay), a second run
    makes no provider request, and a run with one provider answering 500 and another timing out
    still plans and names the degraded sites and hours."""
    store = Store(f"sqlite:///{tmp_path}/cache.db")
    cfg = load_providers(PROVIDERS_GLOBAL).with_base_url(replay.url)
    src = LiveSignals(cfg, SignalCache(store), clock=at("2023-07-15T00:10"), env=ENV,
                      sleep=lambda s: None)
    plan = run_daily_plan("2023-07-15", "global", data_dir=shared_data,
                          signal_loader=src.load_site_signals)
    first = src.requests_by_provider()
    # a request the loaded test machine timed out and the client retried is one more attempt:
    # the counts below are of calls (first attempts)
    retried = src.retries_by_provider()
    calls = {n: k - retried.get(n, 0) for n, k in first.items()}
    # the forecasting path reads FORECAST_HISTORY_DAYS (372) of history (issue 12: models are
    # chosen on up to a year): 10-day chunks, 38 per zone and group (6 zones, 8 sites);
    # WattTime: login + 12 x 32-day chunks x 2 groups; ENTSO-E: 2 yearly chunks x 2 groups
    from carbonsched.pipeline.daily import FORECAST_HISTORY_DAYS

    chunks = -(-FORECAST_HISTORY_DAYS // 10)
    assert chunks == 38
    assert calls == {"electricitymaps": chunks * (6 + 8),
                     "watttime": 1 + 2 * -(-FORECAST_HISTORY_DAYS // 32), "open-meteo": 8,
                     "prices-feed": 6, "entsoe": 4}
    assert plan.document["degraded"] == [] and len(plan.document["sites"]) == 8
    fresh = plan.document["provider_signals"]
    assert fresh["gb-london"]["signal_age_hours"] == pytest.approx(10 / 60, abs=1e-5)
    assert fresh["us-ny-newyork"]["providers"]["carbon_intensity"]["provider"] == "watttime"
    assert fresh["us-ny-newyork"]["providers"]["carbon_intensity"]["ci_kind"] == "average"
    assert sum(replay.state.hits.values()) == sum(first.values())
    # same day again: nothing asked of any provider
    again = run_daily_plan("2023-07-15", "global", data_dir=shared_data,
                           signal_loader=src.load_site_signals)
    assert src.requests_by_provider() == first
    assert sum(replay.state.hits.values()) == sum(first.values())
    assert again.document["totals"] == plan.document["totals"]
    # the same values read from the files give the same plan
    files = run_daily_plan("2023-07-15", "global", data_dir=shared_data)
    for k, v in files.document["totals"].items():
        assert plan.document["totals"][k] == pytest.approx(v, rel=1e-9, abs=1e-9)

    # next day: Electricity Maps answers 500, Open-Meteo is too slow
    replay.state.faults.update({"electricitymaps": "500", "open-meteo": "timeout"})
    replay.state.slow_s = 1.5
    fast = {n: replace(p, options={**p.options, "timeout_s": 0.5, "max_attempts": 2})
            for n, p in cfg.providers.items()}
    cfg2 = replace(cfg, providers=fast)
    src2 = LiveSignals(cfg2, SignalCache(store), clock=at("2023-07-16T00:10"), env=ENV,
                       sleep=lambda s: None)
    day2 = run_daily_plan("2023-07-16", "global", data_dir=shared_data,
                          signal_loader=src2.load_site_signals)
    doc = day2.document
    assert doc["solver"]["status"] in ("optimal", "feasible") and len(doc["sites"]) == 8
    degraded = {(d["site"], d["signal"]): d for d in doc["degraded"]}
    em_sites = {"ca-on-toronto", "br-sp-saopaulo", "gb-london", "jp-tk-tokyo", "sg-singapore",
                "de-frankfurt"}
    assert {s for s, g in degraded if g == "carbon_intensity"} == em_sites
    assert {s for s, g in degraded if g == "weather"} == set(CATALOG.site_ids)
    d = degraded[("gb-london", "carbon_intensity")]
    assert (d["missing_from"], d["missing_to"], d["missing_hours"]) == (
        "2023-07-15T00:00:00+00:00", "2023-07-16T00:00:00+00:00", 24)
    assert (d["planned_from"], d["planned_to"]) == ("2023-07-16T00:00:00+00:00",
                                                    "2023-07-17T00:00:00+00:00")
    assert d["last_good"] == "2023-07-14T23:00:00+00:00" and "HTTP 500" in d["reason"]
    # the age of the newest value feeds the plan: a day and 10 minutes for the EM sites
    age = {s: v["signal_age_hours"] for s, v in doc["provider_signals"].items()}
    assert age["gb-london"] == pytest.approx(24 + 10 / 60, abs=1e-5)
    assert age["us-ny-newyork"] == pytest.approx(10 / 60, abs=1e-5)
    w = degraded[("us-ny-newyork", "weather")]
    # the history window is a year (FORECAST_HISTORY_DAYS = 372, issue 12): from 2022-07-09.
    # The weather archive the replay server serves is 2023 only, so the 176 days of 2022 (4,224
    # hours) come back empty on every fetch and are never cached; the other 28 hours are 2023's
    # uncached tail before the planned day, which the timed-out fetch could not fill
    hours_2022 = int((pd.Timestamp("2023-01-01", tz=UTC) - pd.Timestamp("2022-07-09", tz=UTC))
                     / pd.Timedelta(hours=1))
    assert hours_2022 == 4224
    assert "timed out" in w["reason"]
    assert (w["missing_from"], w["missing_to"], w["missing_hours"]) == (
        "2022-07-09T00:00:00+00:00", "2023-07-16T00:00:00+00:00", hours_2022 + 28)
    assert (w["planned_from"], w["planned_to"]) == ("2023-07-16T00:00:00+00:00",
                                                    "2023-07-17T00:00:00+00:00")
    assert ("us-ny-newyork", "carbon_intensity") not in degraded  # WattTime answered
    assert any(n.startswith("DEGRADED gb-london: electricitymaps carbon_intensity")
               for n in doc["notes"])
    # counted and named in one line of the plan's notes (issue 32 item 8)
    stale = [n for n in doc["notes"] if n.startswith("signals: STALE")]
    assert stale == [stale[0]] and stale[0].startswith(
        f"signals: STALE for 8 site(s) ({len(doc['degraded'])} signal group(s)): ")
    assert ("gb-london carbon_intensity (electricitymaps: newest cached "
            "2023-07-14T23:00:00+00:00, 24.2 h old)") in stale[0]
    assert all(x["stale"] for x in doc["degraded"])
    # 2 tries per failing call, nothing else
    assert src2.requests_by_provider()["electricitymaps"] == 6 * 2 + 8 * 2
    assert src2.requests_by_provider()["open-meteo"] == 8 * 2
