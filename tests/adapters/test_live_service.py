"""The service's runs plan on the providers, and the providers' published forecasts are kept.

Issue 35: ``CARBONSCHED_PROVIDERS_FILE`` makes every run of the service (daily and rolling)
plan on the providers' history and published forecasts, an outage being a named fallback; each
fetched publication is kept in the store once, and a plan of a past issue time reads what was
published by then.

Real parts: the loopback replay server of ``test_live_exogenous`` (its fixtures, imported),
SQLite and PostgreSQL stores, the real run path (:func:`carbonsched.service.runs.execute_run`).
"""

from __future__ import annotations

from datetime import timedelta

import pandas as pd
import pytest
import test_live_exogenous as exo
from sqlalchemy import func, select
from test_live_exogenous import CATALOG, CI, ENV, OBSERVED_WEATHER_CAVEAT, WEATHER, T, live
from typer.testing import CliRunner

from carbonsched.clock import FixedClock
from carbonsched.config import Settings
from carbonsched.service.providers import service_providers
from carbonsched.service.runs import execute_run, planning_pipeline
from carbonsched.store import Store
from carbonsched.store.published_forecasts import published_forecasts
from carbonsched.store.service import ServiceStore
from carbonsched.store.signal_models import PublishedForecastRow

pytestmark = pytest.mark.shared_data

replay = exo.replay
"""The loopback replay server of test_live_exogenous (its clock at ``T``), reused."""
_reset = exo._reset
"""Its faults and hit counts cleared around every test (autouse)."""

HOUR = pd.Timedelta(hours=1)
PDATE = f"{T:%Y-%m-%d}"
USED = ["temperature_c", "wind_speed_m_per_s", "cloud_cover_pct"]
"""The weather forecasts London's carbon-intensity ridge reads (test_live_exogenous)."""


@pytest.fixture(scope="module")
def fleet(tmp_path_factory, replay):
    """A one-site London catalog and its providers file, written by ``catalog init``."""
    from carbonsched.cli.app import app

    d = tmp_path_factory.mktemp("fleet")
    src = d / "fleet.csv"
    src.write_text("id,role,name,latitude,longitude,timezone,zone,gpus,backend,aliases,"
                   "provider\nlon,edge,London edge,51.5,-0.12,Europe/London,GB,A100:6+T4:28:75,"
                   "kubernetes:eu-london/carbonsched,uksouth westeurope,electricitymaps:GB\n")
    r = CliRunner().invoke(app, ["catalog", "init", str(d / "mine.toml"), "--from", str(src)])
    assert r.exit_code == 0, r.output
    replay.state.coords[(51.5, -0.12)] = "GB"
    return d / "mine.toml", d / "providers-mine.toml"


@pytest.fixture
def credentials(monkeypatch):
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    for k in ("CARBONSCHED_DISPATCHER", "CARBONSCHED_CONFIG", "CARBONSCHED_PROVIDERS_FILE",
              "CARBONSCHED_PROVIDERS_BASE_URL", "CARBONSCHED_PROVIDERS_NOW"):
        monkeypatch.delenv(k, raising=False)


def _settings(fleet, tmp_path, replay, shared_data, providers: bool, **kw) -> Settings:
    catalog, prov = fleet
    extra = dict(providers_file=prov, providers_base_url=replay.url,
                 providers_now=T.to_pydatetime()) if providers else {}
    return Settings(catalog=str(catalog), database_url=f"sqlite:///{tmp_path / 'svc.db'}",
                    data_dir=shared_data, time_limit_s=20.0, **{**extra, **kw})


def _run(settings: Settings, now: pd.Timestamp = T, pdate: str = PDATE,
         ) -> tuple[dict, ServiceStore]:
    db = ServiceStore(Store(settings.resolved_database_url()))
    out = execute_run(settings, db, FixedClock(now.to_pydatetime()), planning_date=pdate,
                      trigger="cli", replica="test")
    assert out is not None and out.status == "succeeded", out
    return db.store.get_plan(out.plan_id), db


# --------------------------------------------------------------- (a) the service's runs use them
def test_a_service_run_plans_on_the_providers_forecasts_and_keeps_them(
        fleet, tmp_path, replay, shared_data, credentials):
    s = _settings(fleet, tmp_path, replay, shared_data, providers=True)
    doc, db = _run(s)
    ci = doc["forecast_models"]["lon"][CI]
    assert ci["exogenous"]["features"] == USED and ci["exogenous"]["used"]
    assert ci["exogenous"]["source"] == ("providers: open-meteo weather forecast, "
                                         "electricitymaps carbon-intensity forecast")
    assert ci["exogenous_not_fitted"]["features"] == [CI]
    assert any(OBSERVED_WEATHER_CAVEAT in n for n in doc["notes"])
    exo = doc["provider_signals"]["lon"]["exogenous"]
    assert [(x["provider"], x["from"]) for x in exo["sources"]] == [
        ("open-meteo", "provider"), ("electricitymaps", "provider")]
    assert exo["unavailable"] == [] and exo["not_used"] == []
    assert doc["provider_signals"]["lon"]["origin"] == "providers"
    # what was fetched is kept: 24 hours of each weather feature at London, of the CI for GB
    kept = published_forecasts(db.store, "lon", None, T, T, T + 24 * HOUR)
    assert sorted(set(kept["feature"])) == sorted(WEATHER)
    assert (kept.groupby("feature").size() == 24).all() and (kept["published_at"] == T).all()
    em = published_forecasts(db.store, "GB", CI, T, T, T + 24 * HOUR)
    assert len(em) == 24 and set(em["provider"]) == {"electricitymaps"}
    # one provider client set per process: the next pipeline built here reuses it
    sp = service_providers(s, db.store)
    assert sp is service_providers(s, db.store)
    planning_pipeline(s, db, FixedClock(T.to_pydatetime()))
    assert service_providers(s, db.store) is sp


def test_the_same_run_without_the_setting_names_no_exogenous_feature(
        fleet, tmp_path, replay, shared_data, credentials):
    doc, db = _run(_settings(fleet, tmp_path, replay, shared_data, providers=False))
    for sig, m in doc["forecast_models"]["lon"].items():
        assert m.get("exogenous") is None and "exogenous_not_fitted" not in m, sig
    assert "provider_signals" not in doc
    assert sum(replay.state.hits.values()) == 0  # no provider was asked
    with db.store.engine.connect() as c:
        assert c.execute(select(func.count()).select_from(PublishedForecastRow)).scalar() == 0


# --------------------------------------------------------------- (b) an outage is a fallback
def test_a_weather_outage_in_a_rolling_service_run_is_a_named_fallback(
        fleet, tmp_path, replay, shared_data, credentials):
    replay.state.faults["open-meteo"] = "500"
    s = _settings(fleet, tmp_path, replay, shared_data, providers=True, rolling=True)
    doc, _ = _run(s)  # succeeded: not a failed run
    assert doc["rolling"]["horizon_hours"] == 24
    exo = doc["provider_signals"]["lon"]["exogenous"]
    assert [u["provider"] for u in exo["unavailable"]] == ["open-meteo"]
    notes = doc["notes"]
    note = next(n for n in notes if n.startswith("exogenous forecasts: "))
    assert note.startswith("exogenous forecasts: 1 provider forecast(s) UNAVAILABLE, so those "
                           "models ran on history: lon open-meteo weather forecast (")
    assert "HTTP 500" in note
    assert any(n.startswith("DEGRADED lon: open-meteo weather for ") for n in notes), notes
    ci = doc["forecast_models"]["lon"][CI]
    assert ci.get("exogenous") is None  # no weather: the models ran on history
    assert ci["exogenous_not_fitted"]["features"] == [CI]  # the CI forecast still came


def test_rolling_runs_due_at_their_issue_time_plan_on_forecasts_the_previous_run_kept(
        fleet, tmp_path, replay, shared_data, credentials):
    # a rolling run starts at (after) its issue time: a forecast fetched then was published
    # too late for it. The first run says so and keeps the next run's forecasts; the next run
    # plans on them (published before its issue time)
    s = _settings(fleet, tmp_path, replay, shared_data, providers=True, rolling=True,
                  providers_now=None)  # the providers' "now" is the service's clock
    late = pd.Timedelta(minutes=1)
    replay.state.now = T + late
    try:
        first, db = _run(s, now=T + late)
        exo = first["provider_signals"]["lon"]["exogenous"]
        assert exo["sources"] == []
        assert [u["provider"] for u in exo["not_used"]] == ["open-meteo", "electricitymaps"]
        assert f"published forecasts for the next run (issued at {T + 24 * HOUR:%Y-%m-%dT%H:%M:%S}"\
               f"+00:00) fetched at {T + late:%Y-%m-%dT%H:%M:%S}+00:00 and kept: " in \
               " ".join(first["notes"])
        kept = published_forecasts(db.store, "lon", None, T + 24 * HOUR, T + 24 * HOUR,
                                   T + 48 * HOUR)
        assert sorted(set(kept["feature"])) == sorted(WEATHER)
        assert (kept["published_at"] == T + late).all()
        replay.state.now = T + 24 * HOUR + late
        second, _ = _run(s, now=T + 24 * HOUR + late, pdate=f"{T + 24 * HOUR:%Y-%m-%d}")
    finally:
        replay.state.now = T
    exo = second["provider_signals"]["lon"]["exogenous"]
    assert [(x["provider"], x["from"]) for x in exo["sources"]] == [("open-meteo", "store")]
    ci = second["forecast_models"]["lon"][CI]
    assert ci["exogenous"]["features"] == USED
    assert ci["exogenous"]["source"].startswith("providers: open-meteo weather forecast as "
                                                "kept in the store (latest published "
                                                "2023-12-18T00:01:00+00:00)")


# --------------------------------------------------------------- (c) kept once per key
def test_a_second_identical_fetch_stores_no_second_row(replay, tmp_path):
    store = Store(f"sqlite:///{tmp_path}/c.db")
    _fetch_twice_keeps_one_row_per_key(replay, store)


@pytest.mark.postgres
def test_a_second_identical_fetch_stores_no_second_row_on_postgresql(replay, pg_db):
    _fetch_twice_keeps_one_row_per_key(replay, Store(pg_db))


def _fetch_twice_keeps_one_row_per_key(replay, store):
    site = CATALOG.site("gb-london")
    first, info = live(replay, store).exogenous(site, T, 24, T - 24 * HOUR)
    assert [x["from"] for x in info["sources"]] == ["provider", "provider"]
    assert len(first) == 24 * (len(WEATHER) + 1)
    with store.engine.connect() as c:
        n1 = c.execute(select(func.count()).select_from(PublishedForecastRow)).scalar()
    assert n1 == len(first)
    again, _ = live(replay, store).exogenous(site, T, 24, T - 24 * HOUR)  # same "now"
    pd.testing.assert_frame_equal(first, again)
    with store.engine.connect() as c:
        rows = c.execute(select(PublishedForecastRow.provider, PublishedForecastRow.zone,
                                PublishedForecastRow.feature, func.count())
                         .group_by(PublishedForecastRow.provider, PublishedForecastRow.zone,
                                   PublishedForecastRow.feature)).all()
    assert sorted(rows) == sorted([("electricitymaps", "GB", CI, 24)]
                                  + [("open-meteo", "gb-london", f, 24) for f in WEATHER])


# --------------------------------------------------------------- (d) a past issue reads the store
def test_a_plan_of_a_past_issue_time_reads_what_was_published_by_then(replay, tmp_path):
    store = Store(f"sqlite:///{tmp_path}/c.db")
    site = CATALOG.site("gb-london")
    fetched, _ = live(replay, store).exogenous(site, T, 24, T - 24 * HOUR)
    replay.state.hits.clear()
    # two hours later, re-planning the issue T: nothing is fetched, the kept rows are read
    later = live(replay, store, now=T + 2 * HOUR)
    table, info = later.exogenous(site, T, 24, T - 24 * HOUR)
    assert sum(replay.state.hits.values()) == 0 and info["not_used"] == []
    assert [(x["provider"], x["from"]) for x in info["sources"]] == [
        ("open-meteo", "store"), ("electricitymaps", "store")]
    assert info["sources"][0]["what"] == ("weather forecast as kept in the store (latest "
                                          "published 2023-12-18T00:00:00+00:00)")
    key = ["feature", "ts"]
    pd.testing.assert_frame_equal(
        table.sort_values(key).reset_index(drop=True),
        fetched.sort_values(key).reset_index(drop=True), check_dtype=False)
    # one second before the publication, nothing of it was knowable: not used, and named
    early, info = later.exogenous(site, T - pd.Timedelta(seconds=1), 24, T - 24 * HOUR)
    assert len(early) == 0 and info["sources"] == []
    assert [u["provider"] for u in info["not_used"]] == ["open-meteo", "electricitymaps"]
    assert info["not_used"][0]["why"].endswith("the store keeps none published by then")


def test_service_settings_read_the_providers_variables(monkeypatch, tmp_path):
    monkeypatch.setenv("CARBONSCHED_PROVIDERS_FILE", str(tmp_path / "p.toml"))
    monkeypatch.setenv("CARBONSCHED_PROVIDERS_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("CARBONSCHED_PROVIDERS_NOW", "2023-12-18T06:00")
    s = Settings()
    assert s.providers_file == tmp_path / "p.toml"
    assert s.providers_base_url == "http://127.0.0.1:9"
    assert pd.Timestamp(s.providers_now) == T + 6 * HOUR  # no zone: UTC, as --now
    assert s.providers_now.utcoffset() == timedelta(0)
    monkeypatch.setenv("CARBONSCHED_PROVIDERS_FILE", "")  # empty: unset, not the folder "."
    monkeypatch.setenv("CARBONSCHED_PROVIDERS_NOW", "")
    assert (Settings().providers_file, Settings().providers_now) == (None, None)
