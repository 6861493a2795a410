"""``carbonsched signals check`` and ``carbonsched ingest`` against the loopback replay."""

from __future__ import annotations

import os

import pytest
from replay_entsoe import KEY as ENTSOE_KEY
from replay_server import EIA_KEY, TOKEN, WT_PASSWORD, WT_USER, ReplayServer, ReplayState
from typer.testing import CliRunner

from carbonsched.catalog import load_catalog
from carbonsched.cli.app import app
from carbonsched.config import get_settings
from carbonsched.regions import __file__ as regions_init

pytestmark = pytest.mark.shared_data
runner = CliRunner()
PROVIDERS = os.path.join(os.path.dirname(regions_init), "providers-global.toml")
NOW = "2023-07-15T00:10:00Z"


@pytest.fixture(scope="module")
def replay(shared_data):
    state = ReplayState(shared_data)
    state.coords = {(round(s.latitude, 2), round(s.longitude, 2)): s.zone
                    for s in load_catalog("global").sites}
    with ReplayServer(state) as server:
        yield server


@pytest.fixture(autouse=True)
def env(monkeypatch, tmp_path, replay):
    monkeypatch.setenv("CARBONSCHED_DATABASE_URL", f"sqlite:///{tmp_path}/store.db")
    for k, v in {"ELECTRICITYMAPS_TOKEN": TOKEN, "WATTTIME_USERNAME": WT_USER,
                 "WATTTIME_PASSWORD": WT_PASSWORD, "ENTSOE_API_KEY": ENTSOE_KEY,
                 "EIA_API_KEY": EIA_KEY}.items():
        monkeypatch.setenv(k, v)
    get_settings.cache_clear()
    replay.state.faults.clear()
    yield
    replay.state.faults.clear()
    get_settings.cache_clear()


def test_signals_check_prints_every_provider_zone_and_signal(replay):
    r = runner.invoke(app, ["signals", "check", "--providers", PROVIDERS, "--catalog", "global",
                            "--base-url", replay.url, "--now", NOW, "--hours", "6"])
    assert r.exit_code == 0, r.output
    rows = [line for line in r.output.splitlines() if "│" in line]
    # 8 EM mix rows + 6 EM CI + 2 WattTime + 8 weather + 6 feed prices + 1 ENTSO-E price
    ok = [line for line in rows if " ok " in line]
    assert len(ok) == 31
    assert any("watttime" in line and "NYISO_NYC" in line for line in ok)
    assert TOKEN not in r.output and WT_PASSWORD not in r.output


def test_signals_check_names_unavailable_and_misconfigured(replay, monkeypatch):
    replay.state.faults["open-meteo"] = "500"
    monkeypatch.setenv("WATTTIME_PASSWORD", "wrong")
    r = runner.invoke(app, ["signals", "check", "--providers", PROVIDERS, "--catalog", "global",
                            "--base-url", replay.url, "--now", NOW, "--hours", "3"])
    assert r.exit_code == 3, r.output
    assert "unavailable" in r.output and "config" in r.output
    assert "login refused" in " ".join(r.output.split()) and "wrong" not in r.output


def test_signals_check_refuses_a_file_meant_for_another_catalog(replay):
    # the default catalog (CARBONSCHED_CATALOG, else china-eastdata-westcompute) has none of
    # the global file's sites. Before: every site skipped, an empty table and exit 0
    before = sum(replay.state.hits.values())
    r = runner.invoke(app, ["signals", "check", "--providers", PROVIDERS, "--base-url",
                            replay.url, "--now", NOW, "--hours", "3"])
    assert r.exit_code == 2, r.output
    said = " ".join(r.output.split())
    assert "none of the 8 site(s) of " in said
    assert ("is in catalog 'china-eastdata-westcompute' (br-sp-saopaulo, ca-on-toronto, "
            "de-frankfurt") in said
    assert "give the catalog it configures with --catalog" in said
    assert sum(replay.state.hits.values()) == before      # nothing asked of the providers


def test_ingest_backfills_only_the_gaps(replay):
    args = ["ingest", "--providers", PROVIDERS, "--base-url", replay.url, "--now", NOW,
            "--site", "gb-london", "--site", "us-ny-newyork", "--from", "2023-07-01",
            "--to", "2023-07-03"]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    hits = sum(replay.state.hits.values())
    assert hits > 0
    again = runner.invoke(app, args)
    assert again.exit_code == 0, again.output
    assert sum(replay.state.hits.values()) == hits  # nothing fetched twice
    assert "2023-07-03 23:00" in again.output


def test_ingest_refuses_unknown_site_and_bad_providers_file(replay, tmp_path):
    r = runner.invoke(app, ["ingest", "--providers", PROVIDERS, "--site", "nowhere",
                            "--from", "2023-07-01", "--to", "2023-07-02"])
    assert r.exit_code == 2 and "unknown site 'nowhere'" in " ".join(r.output.split())
    bad = tmp_path / "p.toml"
    bad.write_text("[providers.em]\nkind = 'electricitymaps'\ntoken = 'x'\n")
    r = runner.invoke(app, ["signals", "check", "--providers", str(bad), "--catalog", "global"])
    assert r.exit_code == 2
    assert "credentials belong in the environment" in " ".join(r.output.split())
