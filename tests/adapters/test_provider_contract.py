"""Contract suite against the REAL provider services (internet and credentials needed).

Each test is skipped unless its credentials are in the environment; Open-Meteo needs no key and
runs only with ``CARBONSCHED_CONTRACT_OPEN_METEO=1``. Run with ``pytest -m provider_contract``.
They check what the replay server assumes: payload shape, units, time convention.
"""

from __future__ import annotations

import os

import pandas as pd
import pytest

from carbonsched.adapters.http import Fetcher, make_client
from carbonsched.adapters.signals import electricitymaps_api as em
from carbonsched.adapters.signals import watttime as wt
from carbonsched.adapters.signals.eia_api import get_eia_api
from carbonsched.adapters.signals.entsoe_api import get_entsoe
from carbonsched.adapters.signals.openmeteo_api import get_open_meteo
from carbonsched.adapters.signals.providers import DEFAULT_BASE_URLS, ProviderSpec

pytestmark = pytest.mark.provider_contract


def need(*names: str) -> dict[str, str]:
    missing = [n for n in names if not os.environ.get(n)]
    if missing:
        pytest.skip(f"set {', '.join(missing)} to run the real-service contract test")
    return {n: os.environ[n] for n in names}


def window(days: int = 2):
    end = pd.Timestamp.now(tz="UTC").floor("h") - pd.Timedelta(hours=2)
    return end - pd.Timedelta(days=days), end


def test_electricitymaps_contract():
    env = need("ELECTRICITYMAPS_TOKEN")
    zone = os.environ.get("CARBONSCHED_CONTRACT_EM_ZONE", "DE")
    f = Fetcher("electricitymaps", make_client(DEFAULT_BASE_URLS["electricitymaps"],
                                               headers={"auth-token":
                                                        env["ELECTRICITYMAPS_TOKEN"]}))
    a, b = window()
    frame, meta = em.get_electricitymaps_api(f, zone, a, b, "direct")
    assert len(frame) > 0 and (frame.index == frame.index.floor("h")).all()
    assert frame["carbon_intensity_g_per_kwh"].dropna().between(0, 2000).all()


def test_watttime_contract():
    env = need("WATTTIME_USERNAME", "WATTTIME_PASSWORD")
    region = os.environ.get("CARBONSCHED_CONTRACT_WT_REGION", "CAISO_NORTH")
    f = Fetcher("watttime", make_client(DEFAULT_BASE_URLS["watttime"]))
    session = wt.WattTimeSession(f, env["WATTTIME_USERNAME"], env["WATTTIME_PASSWORD"])
    a, b = window(1)
    frame, meta = wt.get_watttime(session, region, a, b, "co2_moer")
    assert meta["units_in"] == "lbs_co2_per_mwh" and len(frame) > 0


def test_eia_contract():
    env = need("EIA_API_KEY")
    f = Fetcher("eia", make_client(DEFAULT_BASE_URLS["eia"]))
    end = pd.Timestamp.now(tz="UTC").floor("D") - pd.Timedelta(days=3)
    frame, _ = get_eia_api(f, env["EIA_API_KEY"], "PJM", end - pd.Timedelta(days=1), end)
    assert frame["carbon_intensity_g_per_kwh"].notna().sum() >= 20


def test_entsoe_contract():
    env = need("ENTSOE_API_KEY")
    spec = ProviderSpec("entsoe", "entsoe", DEFAULT_BASE_URLS["entsoe"])
    a, b = window(2)
    frame, _ = get_entsoe(spec, env["ENTSOE_API_KEY"], "DE_LU", "price", a, b, 1.08)
    assert frame["price_usd_per_mwh"].notna().sum() >= 24


def test_open_meteo_contract():
    if os.environ.get("CARBONSCHED_CONTRACT_OPEN_METEO") != "1":
        pytest.skip("set CARBONSCHED_CONTRACT_OPEN_METEO=1 to call the real Open-Meteo API")
    f = Fetcher("open-meteo", make_client(DEFAULT_BASE_URLS["open-meteo"]))
    a, b = window(1)
    frame, meta = get_open_meteo(f, 51.5, -0.12, a, b)
    assert len(frame) == 24 and frame["temperature_c"].between(-40, 50).all()
