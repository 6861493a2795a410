"""Provider clients over real HTTP against the loopback replay server (no internet).

Values are the real shared-data files reshaped into each provider's documented payload by
``replay_server.py``; every client must give back exactly the file's values, on hour-start UTC.
"""

from __future__ import annotations

import httpx
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

from carbonsched.adapters.http import (
    Fetcher,
    RateLimiter,
    RetryPolicy,
    make_client,
    redact_url,
    retry_after_s,
)
from carbonsched.adapters.signals import electricitymaps_api as em
from carbonsched.adapters.signals import watttime as wt
from carbonsched.adapters.signals.dacf import direct_ci_from_mix, read_dacf_mix
from carbonsched.adapters.signals.eia930 import read_eia930
from carbonsched.adapters.signals.eia_api import get_eia_api, read_eia_api
from carbonsched.adapters.signals.electricitymaps import read_electricitymaps
from carbonsched.adapters.signals.entsoe_api import (
    get_entsoe,
    get_entsoe_wind_solar_forecast,
    make_entsoe_client,
)
from carbonsched.adapters.signals.http_feed import FeedSpec, get_http_feed, read_http_feed
from carbonsched.adapters.signals.openmeteo import read_open_meteo
from carbonsched.adapters.signals.openmeteo_api import get_open_meteo, read_open_meteo_api
from carbonsched.adapters.signals.prices import read_prices
from carbonsched.adapters.signals.providers import EUR_TO_USD_2023, ProviderSpec
from carbonsched.errors import (
    ProviderConfigError,
    ProviderError,
    ProviderUnavailableError,
    TimeAxisError,
)

pytestmark = pytest.mark.shared_data

UTC = "UTC"
S23, E23 = pd.Timestamp("2023-06-01", tz=UTC), pd.Timestamp("2023-06-25", tz=UTC)


@pytest.fixture(scope="module")
def replay(shared_data):
    state = ReplayState(shared_data)
    state.coords = {(51.49, -0.16): "GB", (35.68, 139.81): "JP-TK"}
    state.feed_tz = {"CA-ON": "America/Toronto"}
    with ReplayServer(state) as server:
        yield server


@pytest.fixture(autouse=True)
def _reset(replay):
    replay.state.faults.clear()
    replay.state.hits.clear()
    yield
    replay.state.faults.clear()
    replay.state.eia_late.clear()


def fetcher(replay, name, headers=None, timeout_s=60.0, attempts=3, sleeps=None):
    return Fetcher(name, make_client(replay.url, headers=headers, timeout_s=timeout_s),
                   RetryPolicy(max_attempts=attempts, backoff_s=0.25, jitter_fraction=0.0),
                   sleep=(sleeps.append if sleeps is not None else (lambda s: None)))


def em_file(shared_data, zone):
    frame, _ = read_electricitymaps(
        shared_data / "sustain-cluster" / "carbon_intensity" / f"{zone}_2023_hourly.csv")
    return frame


# --------------------------------------------------------------------- Electricity Maps v3
def test_em_past_range_is_chunked_in_10_days_and_equals_the_file(replay, shared_data):
    f = fetcher(replay, "electricitymaps", {"auth-token": TOKEN})
    frame, meta = em.get_electricitymaps_api(f, "GB", S23, E23, "direct")
    assert meta["requests"] == 3 == f.requests == replay.state.hits["electricitymaps"]
    assert f.retries == 0
    assert len(frame) == 24 * 24 and frame.index.is_unique
    assert str(frame.index.tz) == UTC and frame.index[0] == S23
    ref = em_file(shared_data, "GB").loc[S23:E23 - pd.Timedelta(hours=1)]
    np.testing.assert_allclose(frame["carbon_intensity_g_per_kwh"],
                               ref["carbon_intensity_g_per_kwh"])
    assert meta["emission_factor_type"] == "direct" and meta["source"] == "electricitymaps"
    assert meta["newest_value_at"] == "2023-06-24T23:00:00+00:00"
    assert "hour start, UTC" in meta["time_convention"]


def test_em_lifecycle_and_estimated_flags_are_kept(replay, shared_data):
    f = fetcher(replay, "electricitymaps", {"auth-token": TOKEN})
    a, b = S23, S23 + pd.Timedelta(days=2)
    frame, meta = em.get_electricitymaps_api(f, "JP-TK", a, b, "lifecycle")
    ref = em_file(shared_data, "JP-TK").loc[a:b - pd.Timedelta(hours=1)]
    np.testing.assert_allclose(frame["carbon_intensity_lca_g_per_kwh"],
                               ref["carbon_intensity_lca_g_per_kwh"])
    assert frame["is_estimated"].all() and meta["emission_factor_type"] == "lifecycle"
    assert set(frame["estimation_method"]) == {"TIME_SLICER_AVERAGE"}
    assert any("48 of 48 hour(s) estimated" in n for n in meta["notes"])


def test_em_power_breakdown_shares(replay, shared_data):
    f = fetcher(replay, "electricitymaps", {"auth-token": TOKEN})
    frame, _ = em.get_power_breakdown(f, "GB", S23, S23 + pd.Timedelta(days=11))
    ref = em_file(shared_data, "GB").loc[S23:S23 + pd.Timedelta(days=11, hours=-1)]
    assert f.requests == 2
    np.testing.assert_allclose(frame["renewable_pct"], ref["renewable_pct"])
    np.testing.assert_allclose(frame["low_carbon_pct"], ref["low_carbon_pct"])


def test_em_nulls_stay_nan_and_conflicting_duplicates_raise():
    payload = {"zone": "XX", "data": [
        {"datetime": "2023-01-01T00:00:00.000Z", "carbonIntensity": None, "isEstimated": False,
         "emissionFactorType": "direct"},
        {"datetime": "2023-01-01T01:00:00.000Z", "carbonIntensity": 0, "isEstimated": True,
         "estimationMethod": "MODE_BREAKDOWN", "emissionFactorType": "direct"}]}
    frame, meta = em.read_electricitymaps_api(payload, "XX")
    assert np.isnan(frame["carbon_intensity_g_per_kwh"].iloc[0])
    assert frame["carbon_intensity_g_per_kwh"].iloc[1] == 0.0  # a real zero stays zero
    assert meta["newest_value_at"] == "2023-01-01T01:00:00+00:00"
    assert any("1 hour(s) with null" in n for n in meta["notes"])
    dup = {"zone": "XX", "data": [payload["data"][1], {**payload["data"][1],
                                                        "carbonIntensity": 5}]}
    with pytest.raises(ProviderError, match="returned twice with different values"):
        em.read_electricitymaps_api(dup, "XX")
    naive = {"zone": "XX", "data": [{**payload["data"][1], "datetime": "2023-01-01T01:00"}]}
    with pytest.raises(ProviderError, match="no UTC offset"):
        em.read_electricitymaps_api(naive, "XX")
    with pytest.raises(ProviderError, match="asked for zone 'YY'"):
        em.read_electricitymaps_api(payload, "YY")
    off = {"zone": "XX", "data": [{**payload["data"][1], "datetime": "2023-01-01T01:30Z"}]}
    with pytest.raises(TimeAxisError, match="not on the hour"):
        em.read_electricitymaps_api(off, "XX")


def test_em_forecast_endpoint(replay, shared_data):
    replay.state.now = pd.Timestamp("2023-07-15T00:00", tz=UTC)
    f = fetcher(replay, "electricitymaps", {"auth-token": TOKEN})
    frame, meta = em.get_electricitymaps_forecast(f, "GB")
    assert len(frame) == 24 and meta["is_forecast"]
    assert frame.index[0] == replay.state.now


def test_em_bad_token_and_unknown_zone_are_configuration_errors(replay):
    f = fetcher(replay, "electricitymaps", {"auth-token": "wrong"})
    with pytest.raises(ProviderConfigError, match="auth-token was rejected .HTTP 401.*"
                       "ELECTRICITYMAPS_TOKEN"):
        em.get_electricitymaps_api(f, "GB", S23, S23 + pd.Timedelta(days=1))
    assert f.requests == 1  # a 401 is not retried
    f = fetcher(replay, "electricitymaps", {"auth-token": TOKEN})
    with pytest.raises(ProviderConfigError, match="zone 'XX-NOPE' is not available"):
        em.get_electricitymaps_api(f, "XX-NOPE", S23, S23 + pd.Timedelta(days=1))


def test_500_is_retried_with_backoff_then_unavailable(replay):
    replay.state.faults["electricitymaps"] = "500"
    sleeps: list[float] = []
    f = fetcher(replay, "electricitymaps", {"auth-token": TOKEN}, sleeps=sleeps)
    with pytest.raises(ProviderUnavailableError, match="HTTP 500.*after 3 attempt"):
        em.get_electricitymaps_api(f, "GB", S23, S23 + pd.Timedelta(days=1))
    assert f.requests == 3 == replay.state.hits["electricitymaps"]
    assert f.retries == 2   # the first attempt is a call, the other two its retries
    assert sleeps == [0.25, 0.5]


def test_429_retry_after_is_honoured(replay):
    replay.state.faults["electricitymaps"] = "429"
    sleeps: list[float] = []
    f = fetcher(replay, "electricitymaps", {"auth-token": TOKEN}, attempts=2, sleeps=sleeps)
    with pytest.raises(ProviderUnavailableError, match="429") as exc:
        em.get_electricitymaps_api(f, "GB", S23, S23 + pd.Timedelta(days=1))
    assert sleeps == [1.0] and exc.value.status == 429


def test_slow_answer_hits_the_timeout(replay):
    replay.state.faults["open-meteo"] = "timeout"
    replay.state.slow_s = 2.0
    f = fetcher(replay, "open-meteo", timeout_s=0.5, attempts=2)
    with pytest.raises(ProviderUnavailableError, match=r"timed out .*0\.5 s.*after 2 attempt"):
        get_open_meteo(f, 51.494, -0.163, S23, S23 + pd.Timedelta(days=1))


# --------------------------------------------------------------------- WattTime v3
def test_watttime_converts_lbs_per_mwh_and_averages_5_minute_points(replay, shared_data):
    f = fetcher(replay, "watttime")
    session = wt.WattTimeSession(f, WT_USER, WT_PASSWORD)
    frame, meta = wt.get_watttime(session, "NYISO_NYC", S23, E23, "co2_aoer")
    ref = em_file(shared_data, "US-NY-NYIS").loc[S23:E23 - pd.Timedelta(hours=1)]
    # 12 points per hour at CI/0.45359237 +- 3 lbs/MWh: the hourly mean is the file's g/kWh
    np.testing.assert_allclose(frame["carbon_intensity_g_per_kwh"],
                               ref["carbon_intensity_g_per_kwh"], rtol=1e-12)
    assert meta["emission_factor_type"] == "average" and meta["signal_type"] == "co2_aoer"
    assert "5-minute" in meta["time_convention"] and session.logins == 1
    assert wt.LBS_PER_MWH_TO_G_PER_KWH == pytest.approx(0.45359237)


def test_watttime_marginal_lands_in_its_own_column(replay):
    f = fetcher(replay, "watttime")
    session = wt.WattTimeSession(f, WT_USER, WT_PASSWORD)
    frame, meta = wt.get_watttime(session, "PJM_DC", S23, S23 + pd.Timedelta(days=1), "co2_moer")
    assert "marginal_carbon_intensity_g_per_kwh" in frame
    assert "carbon_intensity_g_per_kwh" not in frame and meta["emission_factor_type"] == "marginal"


def test_watttime_renews_an_expired_token(replay):
    f = fetcher(replay, "watttime")
    session = wt.WattTimeSession(f, WT_USER, WT_PASSWORD)
    wt.get_watttime(session, "NYISO_NYC", S23, S23 + pd.Timedelta(days=1), "co2_aoer")
    replay.state.expire_next_token = True
    frame, _ = wt.get_watttime(session, "NYISO_NYC", S23, S23 + pd.Timedelta(days=1), "co2_aoer")
    assert session.logins == 2 and len(frame) == 24


def test_watttime_region_outside_subscription_names_the_region(replay):
    session = wt.WattTimeSession(fetcher(replay, "watttime"), WT_USER, WT_PASSWORD)
    with pytest.raises(ProviderConfigError, match="region 'CAISO_NORTH' is outside"):
        wt.get_watttime(session, "CAISO_NORTH", S23, S23 + pd.Timedelta(days=1))
    bad = wt.WattTimeSession(fetcher(replay, "watttime"), WT_USER, "wrong")
    with pytest.raises(ProviderConfigError, match="login refused .HTTP 401. for user 'wt-user'"):
        wt.get_watttime(bad, "NYISO_NYC", S23, S23 + pd.Timedelta(days=1))


def test_watttime_forecast_and_units_refused():
    with pytest.raises(ProviderError, match="units 'kg_co2_per_mwh'"):
        wt.read_watttime({"data": [], "meta": {"signal_type": "co2_moer",
                                                "units": "kg_co2_per_mwh"}})
    payload = {"data": [{"point_time": f"2023-01-01T00:{m:02d}:00+00:00", "value": 100.0}
                        for m in range(0, 60, 5)][:5],
               "meta": {"signal_type": "co2_moer", "region": "X", "units": "lbs_co2_per_mwh",
                        "data_point_period_seconds": 300}}
    frame, meta = wt.read_watttime(payload, "X")
    # 5 of 12 points: under half the hour -> NaN, counted
    assert np.isnan(frame["marginal_carbon_intensity_g_per_kwh"].iloc[0])
    assert any("fewer than 50%" in n for n in meta["notes"])


# --------------------------------------------------------------------- EIA v2
def test_eia_hour_ending_is_shifted_and_pages_are_followed(replay, shared_data):
    f = fetcher(replay, "eia")
    a, b = pd.Timestamp("2022-06-01", tz=UTC), pd.Timestamp("2022-06-08", tz=UTC)
    frame, meta = get_eia_api(f, EIA_KEY, "PJM", a, b)
    # (7 d + the week before, FUEL_LOOKBACK) x 24 h x 8 fuels = 2688 rows at 1000 per page
    assert meta["requests"] == 3
    assert frame.index[0] == a and len(frame) == 168
    ref, _ = read_eia930(shared_data / "eia930-sustaindc" / "PJM_NG_avgCI_2022.csv")
    ref = ref.loc[a:b - pd.Timedelta(hours=1)]
    np.testing.assert_allclose(frame["carbon_intensity_g_per_kwh"],
                               ref["carbon_intensity_g_per_kwh"], rtol=1e-6)
    np.testing.assert_allclose(frame["renewable_pct"], ref["renewable_pct"], rtol=1e-6)
    assert "hour ENDING" in meta["time_convention"]


@pytest.mark.parametrize("late_from_h", [0, 2, 3])
def test_eia_a_fuel_not_published_yet_leaves_a_gap_not_zero_mw(replay, shared_data,
                                                                late_from_h):
    # before, a short gap fetch (00:00-03:00) in which PJM's coal rows were not published yet
    # counted coal as 0 MW (as for a BA without coal) and cached a far too clean intensity.
    # Late from 02:00: 00:00 and 01:00 are whole; from 03:00 (at the limit): all three are
    a, b = pd.Timestamp("2022-06-08", tz=UTC), pd.Timestamp("2022-06-08T03:00", tz=UTC)
    replay.state.eia_late["COL"] = a + pd.Timedelta(hours=late_from_h)
    frame, meta = get_eia_api(fetcher(replay, "eia"), EIA_KEY, "PJM", a, b)
    ref, _ = read_eia930(shared_data / "eia930-sustaindc" / "PJM_NG_avgCI_2022.csv")
    ref = ref.loc[a:b - pd.Timedelta(hours=1), "carbon_intensity_g_per_kwh"]
    ci = frame["carbon_intensity_g_per_kwh"]
    assert list(ci.index) == list(ref.index) and ref.min() > 100
    np.testing.assert_allclose(ci.iloc[:late_from_h], ref.iloc[:late_from_h], rtol=1e-6)
    assert ci.iloc[late_from_h:].isna().all()
    newest = None if late_from_h == 0 else (a + pd.Timedelta(hours=late_from_h - 1)).isoformat()
    assert meta["newest_value_at"] == newest


def test_eia_bad_key_and_unknown_fuels():
    rows = [{"period": "2022-01-01T01", "respondent": "X", "fueltype": f, "value": v,
             "value-units": "megawatthours"} for f, v in
            (("NG", "100"), ("SUN", None), ("BAT", "5"), ("WND", "100"))]
    frame, meta = read_eia_api(rows, "X")
    assert frame.index[0] == pd.Timestamp("2022-01-01T00:00", tz=UTC)
    assert np.isnan(frame["carbon_intensity_g_per_kwh"].iloc[0])  # SUN null -> no mix
    assert any("BAT counted as OTH" in n for n in meta["notes"])
    with pytest.raises(ProviderError, match="asked for 'Y'"):
        read_eia_api(rows, "Y")


def test_eia_rejected_key(replay):
    with pytest.raises(ProviderConfigError, match="api_key rejected .HTTP 403.; set EIA_API_KEY"):
        get_eia_api(fetcher(replay, "eia"), "nope", "PJM", pd.Timestamp("2022-06-01", tz=UTC),
                    pd.Timestamp("2022-06-02", tz=UTC))


# --------------------------------------------------------------------- Open-Meteo
def test_open_meteo_values_equal_the_file_in_utc(replay, shared_data):
    f = fetcher(replay, "open-meteo")
    frame, meta = get_open_meteo(f, 35.677, 139.807, S23, E23)
    ref, _ = read_open_meteo(shared_data / "sustain-cluster" / "weather" / "JP-TK_2023.json")
    ref = ref.loc[S23:E23 - pd.Timedelta(hours=1)]
    np.testing.assert_allclose(frame["temperature_c"], ref["temperature_c"])
    np.testing.assert_allclose(frame["relative_humidity_pct"], ref["relative_humidity_pct"])
    assert frame.index[0] == S23


def test_open_meteo_offsets_and_missing_offset():
    payload = {"utc_offset_seconds": 3600, "hourly": {
        "time": ["2023-01-01T01:00", "2023-01-01T02:00"], "temperature_2m": [50.0, None],
        "relative_humidity_2m": [80, 81]}, "hourly_units": {"temperature_2m": "°F"}}
    frame, _ = read_open_meteo_api(payload)
    assert frame.index[0] == pd.Timestamp("2023-01-01T00:00", tz=UTC)
    assert frame["temperature_c"].iloc[0] == pytest.approx(10.0)
    assert np.isnan(frame["temperature_c"].iloc[1])
    with pytest.raises(ProviderError, match="no utc_offset_seconds"):
        read_open_meteo_api({"hourly": payload["hourly"]})


# --------------------------------------------------------------------- ENTSO-E
def entsoe_spec(replay, timeout_s=60.0):
    """A one-attempt ENTSO-E spec on the replay server; the timeout is generous: a loaded
    machine (the suite on two workers) can take seconds to answer on loopback."""
    return ProviderSpec("entsoe", "entsoe", replay.url + "/api",
                        {"timeout_s": timeout_s, "max_attempts": 1})


def test_entsoe_ci_from_15_minute_mix_equals_the_dacf_recomputation(replay, shared_data):
    a, b = pd.Timestamp("2021-07-01", tz=UTC), pd.Timestamp("2021-07-04", tz=UTC)
    frame, meta = get_entsoe(entsoe_spec(replay), ENTSOE_KEY, "DE_LU", "carbon_intensity", a, b,
                             EUR_TO_USD_2023)
    mix, _ = read_dacf_mix(shared_data / "dacf" / "DE_2019_clean.csv")
    ref = direct_ci_from_mix(mix.loc[a:b - pd.Timedelta(hours=1)])
    assert len(frame) == 72 and frame.index[0] == a
    np.testing.assert_allclose(frame["carbon_intensity_g_per_kwh"], ref, rtol=1e-9)
    assert meta["emission_factor_type"] == "direct" and meta["requests"] == 1
    assert any("4 points of 15 min" in n for n in meta["notes"])


def test_entsoe_prices_in_usd_with_negative_hours(replay, shared_data):
    frame, meta = get_entsoe(entsoe_spec(replay), ENTSOE_KEY, "DE_LU", "price", S23, E23,
                             EUR_TO_USD_2023)
    ref, _ = read_prices(shared_data / "sustain-cluster" / "electricity_prices_usd_utc"
                         / "DE-LU_electricity_prices_2023.csv")
    ref = ref.loc[S23:E23 - pd.Timedelta(hours=1), "price_usd_per_mwh"]
    np.testing.assert_allclose(frame["price_usd_per_mwh"], ref, atol=0.006 * EUR_TO_USD_2023)
    assert meta["n_negative"] == int((ref < 0).sum()) > 0


def test_entsoe_day_ahead_wind_and_solar(replay, shared_data):
    client = make_entsoe_client(replay.url + "/api", ENTSOE_KEY, 10.0, 1)
    a, b = pd.Timestamp("2021-08-01", tz=UTC), pd.Timestamp("2021-08-03", tz=UTC)
    frame, meta = get_entsoe_wind_solar_forecast(client, "DE_LU", a, b)
    raw = pd.read_csv(shared_data / "dacf" / "DE_src_prod_forecasts_test_period.csv")
    raw.index = pd.to_datetime(raw["UTC time"], utc=True)
    ref = raw.loc[a:b - pd.Timedelta(hours=1)]
    assert len(frame) == 48 and frame.index[0] == a and meta["is_forecast"]
    np.testing.assert_allclose(frame["solar_forecast_mw"], ref["avg_solar_production_forecast"],
                               atol=1e-3)
    np.testing.assert_allclose(frame["wind_onshore_forecast_mw"],
                               ref["avg_wind_production_forecast"], atol=1e-3)


def test_entsoe_errors(replay):
    with pytest.raises(ProviderConfigError, match="security token rejected"):
        get_entsoe(entsoe_spec(replay), "wrong", "DE_LU", "price", S23, E23, 1.0)
    with pytest.raises(ProviderConfigError, match="'XX' is not an ENTSO-E area code"):
        get_entsoe(entsoe_spec(replay), ENTSOE_KEY, "XX", "price", S23, E23, 1.0)
    replay.state.faults["entsoe"] = "500"
    with pytest.raises(ProviderUnavailableError, match="HTTP 500"):
        get_entsoe(entsoe_spec(replay), ENTSOE_KEY, "DE_LU", "price", S23, E23, 1.0)


# --------------------------------------------------------------------- generic feed
FEED = FeedSpec("prices-feed", "/feed/{zone}.csv?from={start}&to={end}", "csv", "time",
                "UTC", "start", {"price_usd_per_mwh": "price"})


def test_feed_converts_local_stamps_with_offsets(replay, shared_data):
    frame, meta = get_http_feed(fetcher(replay, "feed"), FEED, "CA-ON", S23, E23)
    ref, _ = read_prices(shared_data / "sustain-cluster" / "electricity_prices_usd_utc"
                         / "CA-ON_electricity_prices_2023.csv")
    ref = ref.loc[S23:E23 - pd.Timedelta(hours=1), "price_usd_per_mwh"]
    np.testing.assert_allclose(frame["price_usd_per_mwh"], ref)
    assert frame.index[0] == S23


def test_feed_rules():
    spec = FeedSpec("f", "/", "csv", "t", "Europe/Berlin", "end", {"renewable_pct": "re"},
                    {"renewable_pct": 100.0})
    body = "t,re\n2023-01-01 01:30,0.5\n2023-01-01 02:00,0.7\n2023-01-01 02:30,\n"
    frame, meta = read_http_feed(body, spec)
    # Berlin +01:00 in winter; labels are interval ENDs (01:30 ends the 01:00-01:30 local
    # interval = 00:00 UTC); 30-minute rows averaged per hour; the empty cell stays NaN
    assert frame.index[0] == pd.Timestamp("2023-01-01T00:00", tz=UTC)
    assert frame["renewable_pct"].iloc[0] == pytest.approx(60.0)
    assert np.isnan(frame["renewable_pct"].iloc[1])
    with pytest.raises(ProviderError, match="the feed must give UTC offsets"):
        read_http_feed("t,re\n2023-03-26 02:30,0.5\n", spec)
    with pytest.raises(ProviderError, match=r"no column\(s\) \['re'\]"):
        read_http_feed("t,x\n2023-01-01 01:00,1\n", spec)
    with pytest.raises(ProviderError, match="'abc' is not a number"):
        read_http_feed("t,re\n2023-01-01 01:00,abc\n", spec)
    with pytest.raises(ProviderConfigError, match="columns mapping is empty"):
        FeedSpec("f", "/", columns={})


# --------------------------------------------------------------------- http plumbing
def test_rate_limiter_sliding_window():
    now = [0.0]
    waits: list[float] = []

    def sleep(s):
        waits.append(s)
        now[0] += s

    lim = RateLimiter(3, 300.0, clock=lambda: now[0], sleep=sleep)
    for _ in range(3):
        lim.acquire()
        now[0] += 1.0
    lim.acquire()  # 4th within 5 min waits until the first leaves the window
    assert waits == [pytest.approx(297.0)]
    assert wt.RATE_LIMIT == (3000, 300.0)


def test_retry_after_http_date_and_redaction():
    r = httpx.Response(429, headers={"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"})
    now = pd.Timestamp("2015-10-21T07:27:30", tz=UTC).to_pydatetime()
    assert retry_after_s(r, now) == pytest.approx(30.0)
    assert "secret" not in redact_url("http://x/y?api_key=secret&a=1")
    assert "a=1" in redact_url("http://x/y?api_key=secret&a=1")


def test_injectable_transport_is_used():
    calls = []

    def handler(request):
        calls.append(str(request.url))
        return httpx.Response(200, json={"ok": True})

    f = Fetcher("x", make_client("http://provider.test", transport=httpx.MockTransport(handler)))
    assert f.get_json("/a", params={"token": "t"}) == {"ok": True}
    assert calls == ["http://provider.test/a?token=t"]
    assert f.client.timeout.connect == 5.0 and f.client.timeout.read == 20.0
