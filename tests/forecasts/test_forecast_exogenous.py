"""Exogenous forecasts on the daily path (issue 35 item 3): archived GFS weather, operator and
provider forecasts as features, aligned by publication time with no look-ahead."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from carbonsched.adapters.signals.dacf import (
    direct_ci_from_mix,
    read_dacf_reference,
    read_dacf_region,
)
from carbonsched.catalog import load_catalog
from carbonsched.errors import ForecastError, InputError
from carbonsched.forecasts.exogenous import (
    PublishedForecast,
    check_table,
    from_dacf_region,
    known_at,
)
from carbonsched.forecasts.ridge import HourlyRidgeExog
from carbonsched.pipeline.daily import FORECAST_HISTORY_DAYS, forecast_site, known_exogenous

CI = "carbon_intensity_g_per_kwh"
HOUR = pd.Timedelta(hours=1)
T0 = pd.Timestamp("2021-08-16 00:00", tz="UTC")  # a Monday: a refit period starts


@pytest.fixture(scope="module")
def ciso(shared_data):
    """CISO's CI (from the mix), its archived forecasts as one table and a history frame."""
    frame, _ = read_dacf_region(shared_data / "dacf" / "CISO.csv")
    table = from_dacf_region(frame, "CISO")
    ref, _ = read_dacf_reference(shared_data / "dacf" /
                                 "CISO_carbon_from_src_prod_forecasts_direct.csv")
    # the paper's published day-ahead CI forecast, issued at 00:00 UTC of its day: a
    # provider's own forecast (here an input only to test the alignment and the candidate)
    v = ref["dacf_forecast_g_per_kwh"].dropna()
    prov = pd.DataFrame({"feature": CI, "issued_at": v.index.floor("D"), "ts": v.index,
                         "value": v.to_numpy(float)})
    attrs = dict(table.attrs)
    table = check_table(pd.concat([table, prov], ignore_index=True))
    table.attrs.update(attrs)
    ci = direct_ci_from_mix(frame)
    # the archive has no observed weather: the history's weather is GFS's at its own hours
    wide = table.pivot_table(index="ts", columns="feature", values="value", aggfunc="last")
    mix = frame[["coal", "nat_gas", "oil", "nuclear", "hydro", "solar", "wind", "other"]]
    renewable = 100 * mix[["hydro", "solar", "wind"]].sum(axis=1) / mix.sum(axis=1)
    hist = pd.DataFrame({CI: ci, "renewable_pct": renewable.reindex(ci.index),
                         "temperature_c": wide["temperature_c"].reindex(ci.index),
                         "relative_humidity_pct": wide["relative_humidity_pct"].reindex(ci.index)})
    hist = hist[hist.index >= T0 - pd.Timedelta(days=FORECAST_HISTORY_DAYS)]
    site = load_catalog("us-2022").site("us-ciso-sanjose")
    return site, hist, table


def _run(site, hist, table, models):
    return forecast_site(site, hist, T0, 48, {"signal_quality": "measured"}, models=models,
                         exogenous=table)


@pytest.mark.shared_data
def test_poisoned_future_leaves_every_forecast_unchanged(ciso):
    # every exogenous feature's values published after the issue time, and every observation
    # at or after it, are poisoned: the forecasts (means and bounds) of every signal and the
    # model choices are exactly the same
    site, hist, table = ciso
    models: dict = {}
    clean = _run(site, hist, table, models)
    later = table["issued_at"] > T0
    assert set(table.loc[later, "feature"]) == {
        "temperature_c", "relative_humidity_pct", "wind_speed_m_per_s", "irradiance_w_per_m2",
        "wind_mw", "solar_mw", CI}  # every feature has values the issue may not read
    bad = table.copy()
    # and a revision of every feature's every day, published at 01:00 UTC for that day's later
    # hours (as providers update their forecasts): after the 00:00 issues of its targets, it
    # may never be read, in fitting, validation or service
    rev = table[(table["ts"].dt.hour >= 1)].copy()
    rev["issued_at"] = rev["ts"].dt.floor("D") + HOUR
    rev = rev[rev["issued_at"] > rev["ts"] - 48 * HOUR]
    bad = pd.concat([bad, rev], ignore_index=True)
    later = bad["issued_at"] > T0
    late_or_rev = later.copy()
    late_or_rev.iloc[len(table):] = True
    bad.loc[late_or_rev, "value"] = bad.loc[late_or_rev, "value"] * 10 + 50
    rh = late_or_rev & (bad["feature"] == "relative_humidity_pct")
    bad.loc[rh, "value"] = 100 - (bad.loc[rh, "value"] - 50) / 10  # still in 0-100 %
    assert set(bad.loc[late_or_rev & ~later, "feature"]) == set(table["feature"])
    bad = check_table(bad)
    bad.attrs.update(table.attrs)
    bad_hist = hist.copy()
    bad_hist.loc[bad_hist.index >= T0] = bad_hist.loc[bad_hist.index >= T0] * 10 + 50
    poisoned = _run(site, bad_hist, bad, {})  # a fresh cache: the choices are refitted too
    pd.testing.assert_frame_equal(clean.signals, poisoned.signals)
    pd.testing.assert_frame_equal(clean.long, poisoned.long)
    for sig in (CI, "green_surplus_index", "pue"):
        assert clean.models[sig]["model"] == poisoned.models[sig]["model"]
        ex = clean.models[sig]["exogenous"]
        assert ex["source"].startswith("DACF archive")
    assert clean.models[CI]["exogenous"]["features"] == [
        "temperature_c", "wind_speed_m_per_s", "irradiance_w_per_m2", "wind_mw", "solar_mw", CI]
    assert clean.models["pue"]["exogenous"]["features"] == ["pue"]
    assert clean.models["green_surplus_index"]["exogenous"]["features"] == [
        "temperature_c", "wind_speed_m_per_s", "irradiance_w_per_m2", "wind_mw", "solar_mw"]
    # the plan's forecast_models names the features each model used: CISO, August 2021, the
    # archived forecasts are chosen for carbon intensity and PUE
    ci_feats = clean.models[CI]["features"]
    assert clean.models[CI]["exogenous"]["used"]
    assert any("wind_mw forecast for the target hour" in f
               for fs in ci_feats.values() for f in fs), ci_feats
    assert clean.models["pue"]["model"] == "published-pue"
    assert clean.models["pue"]["features"]["published-pue"] == [
        "pue forecast for the target hour, latest published by the issue time (seasonal naive "
        "where none)"]


@pytest.mark.shared_data
def test_values_published_by_the_issue_time_are_read(ciso):
    # the teeth of the test above: each feature's values published by the issue time for the
    # day ahead do move the forecast of a model that reads it
    site, hist, table = ciso
    y = hist[CI]
    y_fit = y[y.index < T0]
    day = (table["issued_at"] <= T0) & (table["ts"] >= T0) & (table["ts"] < T0 + 24 * HOUR)
    feats = ["temperature_c", "wind_speed_m_per_s", "irradiance_w_per_m2", "wind_mw",
             "solar_mw"]
    ridge = HourlyRidgeExog(exog=table, exog_features=tuple(feats), max_lead_hours=24).fit(y_fit)
    assert ridge.used_features() == tuple(feats)
    base = ridge.backcast(y_fit, pd.DatetimeIndex([T0]), 24, exog=table)
    for f in feats:
        moved = table.copy()
        sel = day & (moved["feature"] == f)
        assert sel.sum() == 24
        moved.loc[sel, "value"] = moved.loc[sel, "value"] * 3 + 100
        assert not np.allclose(ridge.backcast(y_fit, pd.DatetimeIndex([T0]), 24, exog=moved),
                               base), f
    pub = PublishedForecast(CI, exog=table).fit(y_fit)
    p = pub.backcast(y_fit, pd.DatetimeIndex([T0]), 24)[0]
    want = table[day & (table["feature"] == CI)].sort_values("ts")["value"].to_numpy()
    np.testing.assert_allclose(p, want)
    assert pub.fallbacks_ == 0
    # the site's PUE on the forecast weather is the PUE feature
    known = known_exogenous(site, table, T0)
    pue = PublishedForecast("pue", exog=known, clip=(1.0, np.inf)).fit(y_fit)
    assert np.isfinite(pue.backcast(y_fit, pd.DatetimeIndex([T0]), 24)).all()
    assert pue.fallbacks_ == 0


def test_known_at_reads_the_latest_value_published_by_each_issue():
    t0 = pd.Timestamp("2023-01-02", tz="UTC")
    ts = t0 + 5 * HOUR
    table = check_table(pd.DataFrame({
        "feature": "wind_mw",
        "issued_at": [t0 - 30 * HOUR, t0 - 6 * HOUR, t0, t0 + HOUR],
        "ts": [ts] * 4, "value": [1.0, 2.0, 3.0, 4.0]}))
    issues = pd.DatetimeIndex([t0 - 31 * HOUR, t0 - 7 * HOUR, t0 - HOUR, t0, t0 + 2 * HOUR])
    leads = ((ts - issues) // HOUR).to_numpy()
    np.testing.assert_array_equal(known_at(table, "wind_mw", issues, leads),
                                  [np.nan, 1.0, 2.0, 3.0, 4.0])
    assert np.isnan(known_at(table, "solar_mw", issues, leads)).all()


@pytest.mark.parametrize(("table", "needle"), [
    (pd.DataFrame({"feature": ["wind_mw"], "issued_at": [pd.Timestamp("2023-01-01")],
                   "ts": [pd.Timestamp("2023-01-01", tz="UTC")], "value": [1.0]}),
     "column 'issued_at' is naive"),
    (pd.DataFrame({"feature": ["gust"], "issued_at": [pd.Timestamp("2023-01-01", tz="UTC")],
                   "ts": [pd.Timestamp("2023-01-01", tz="UTC")], "value": [1.0]}),
     "unknown feature(s) gust"),
    (pd.DataFrame({"feature": ["wind_mw"], "ts": [pd.Timestamp("2023-01-01", tz="UTC")],
                   "value": [1.0]}), "missing column(s) issued_at"),
])
def test_bad_tables_are_refused(table, needle):
    with pytest.raises(InputError) as ei:
        check_table(table)
    assert needle in str(ei.value)


@pytest.mark.parametrize(("published_days", "refused"), [(9, False), (8, True)])
def test_a_published_forecast_is_judged_only_on_hours_it_forecast(published_days, refused):
    # validation over 10 issues: a forecast published for 9 of them (90 %, the limit) is
    # judged; for 8 (80 %) it is refused, since its score would be seasonal naive's on the
    # rest. One issue (the forecast served) is never refused: its gaps fall back, counted
    idx = pd.date_range("2023-01-01", periods=24 * 40, freq="h", tz="UTC")
    y = pd.Series(200 + 50 * np.sin(np.arange(len(idx)) * 2 * np.pi / 24), idx)
    issues = pd.date_range("2023-01-30", periods=10, freq="D", tz="UTC")
    days = issues[:published_days]
    ts = days.repeat(24) + pd.to_timedelta(np.tile(np.arange(24), len(days)), unit="h")
    table = check_table(pd.DataFrame({"feature": CI, "issued_at": ts.floor("D"), "ts": ts,
                                      "value": 300.0}))
    pub = PublishedForecast(CI, exog=table).fit(y[y.index < issues[0]])
    if refused:
        with pytest.raises(ForecastError, match=r"published for 80 % of the 240 hours of these "
                                                r"10 issues \(at least 90 % needed"):
            pub.backcast(y, issues, 24)
    else:
        p = pub.backcast(y, issues, 24)
        assert (p[:published_days] == 300.0).all() and pub.fallbacks_ == 24
    one = pub.backcast(y, issues[-1:], 24)  # the last day was never published
    np.testing.assert_allclose(one[0], y.reindex(issues[-1] + (np.arange(24) - 24) * HOUR))
    assert pub.fallbacks_ == 24


# --- day-ahead auction prices ------------------------------------------------------------------
def _prices(zone_hours: list[str]) -> pd.Series:
    idx = pd.DatetimeIndex(zone_hours, tz="UTC")
    return pd.Series(np.arange(1.0, len(idx) + 1), index=idx)


@pytest.mark.parametrize(("zone", "hours", "published"), [
    # DE-LU: delivery days in Berlin time, published 14:00 local the day before (CET / CEST)
    ("DE-LU", ["2023-01-10 22:00", "2023-01-10 23:00", "2023-07-10 21:00", "2023-07-10 22:00"],
     ["2023-01-09 13:00", "2023-01-10 13:00", "2023-07-09 12:00", "2023-07-10 12:00"]),
    # the night DST begins (26 March 2023, 02:00 CET -> 03:00 CEST): 25 March's prices were
    # published on 24 March at 14:00 CET, 26 March's on the 25th at 14:00 CET, 27 March's on the
    # 26th at 14:00 CEST
    ("DE-LU", ["2023-03-25 22:00", "2023-03-25 23:00", "2023-03-26 21:00", "2023-03-26 22:00"],
     ["2023-03-24 13:00", "2023-03-25 13:00", "2023-03-25 13:00", "2023-03-26 12:00"]),
    # JP-TK: delivery days in Tokyo time (UTC+9), published 12:00 JST the day before
    ("JP-TK", ["2023-01-10 14:00", "2023-01-10 15:00"], ["2023-01-09 03:00", "2023-01-10 03:00"]),
])
def test_day_ahead_prices_are_published_the_day_before_their_delivery_day(zone, hours,
                                                                          published):
    from carbonsched.forecasts.exogenous import DAY_AHEAD_AUCTIONS, from_day_ahead_auction

    t = from_day_ahead_auction(_prices(hours), DAY_AHEAD_AUCTIONS[zone], "test file")
    assert list(t["feature"].unique()) == ["day_ahead_price_usd_per_mwh"]
    got = dict(zip(t["ts"], t["issued_at"], strict=True))
    want = dict(zip(pd.DatetimeIndex(hours, tz="UTC"), pd.DatetimeIndex(published, tz="UTC"),
                    strict=True))
    assert got == want
    assert DAY_AHEAD_AUCTIONS[zone].market in t.attrs["source"]


@pytest.mark.parametrize(("ts", "pub"), [
    # winter: 10 January (CET) published 9 January 14:00 CET = 13:00 UTC
    ("2023-01-10 22:00", "2023-01-09 13:00"),
    # summer: 10 July (CEST) published 9 July 14:00 CEST = 12:00 UTC, so an issue at exactly
    # 12:00 UTC reads the next delivery day's last hour, 33 h ahead
    ("2023-07-10 21:00", "2023-07-09 12:00"),
])
def test_a_day_ahead_price_is_read_from_its_publication_on_and_not_before(ts, pub):
    from carbonsched.forecasts.exogenous import DAY_AHEAD_AUCTIONS, from_day_ahead_auction

    ts, pub = pd.Timestamp(ts, tz="UTC"), pd.Timestamp(pub, tz="UTC")
    t = from_day_ahead_auction(pd.Series([42.0], index=pd.DatetimeIndex([ts])),
                               DAY_AHEAD_AUCTIONS["DE-LU"], "test file")
    assert t["issued_at"].tolist() == [pub]
    issues = pd.DatetimeIndex([pub - HOUR, pub, pub + HOUR])
    lead = ((ts - issues) // HOUR).to_numpy()
    assert (issues + pd.to_timedelta(lead, unit="h") == ts).all()  # every issue asks for ts
    got = known_at(t, "day_ahead_price_usd_per_mwh", issues, lead)
    assert np.isnan(got[0])  # an hour before the publication
    np.testing.assert_array_equal(got[1:], [42.0, 42.0])  # at it and after


def test_day_ahead_prices_refuse_a_naive_index_and_a_bad_publication_time():
    from carbonsched.forecasts.exogenous import DayAheadAuction, from_day_ahead_auction

    naive = pd.Series([1.0], index=pd.DatetimeIndex(["2023-01-10 22:00"]))
    with pytest.raises(InputError, match="tz-aware index"):
        from_day_ahead_auction(naive, DayAheadAuction("m", "Europe/Berlin", "14:00"), "f")
    for bad in ("2pm", "25:00", "14:75", "24:00", "1400", "14:00:00"):
        with pytest.raises(InputError, match="published_local must be HH:MM"):
            DayAheadAuction("m", "Europe/Berlin", bad)
    with pytest.raises(InputError, match="unknown time zone 'Mars/Olympus'"):
        DayAheadAuction("m", "Mars/Olympus", "14:00")
    # the limits of a day are accepted
    for ok in ("00:00", "23:59"):
        assert DayAheadAuction("m", "Europe/Berlin", ok).published_local == ok


@pytest.fixture(scope="module")
def frankfurt(shared_data):
    from carbonsched.adapters.signals import load_site_signals
    from carbonsched.evaluate.site_backtest import site_exogenous

    site = load_catalog("global").site("de-frankfurt")
    t0 = pd.Timestamp("2023-07-10", tz="UTC")  # a Monday
    frame, _ = load_site_signals(site, shared_data, t0 - pd.Timedelta(days=FORECAST_HISTORY_DAYS),
                                 t0 + pd.Timedelta(days=4))
    table = site_exogenous(frame, "day-ahead-price", site.zone)
    hist = frame[frame.index < t0 + pd.Timedelta(days=4)]
    return site, t0, hist, table


@pytest.mark.shared_data
def test_day_ahead_prices_published_after_the_issue_never_reach_the_daily_path(frankfurt):
    # Frankfurt, 10 July 2023, 00:00 UTC: the prices of 10 July (Berlin time) were published on
    # 9 July; those of 11 July at 12:00 UTC on the 10th, after the issue. Poison every price
    # published after the issue and every observation at or after it: every forecast and every
    # model choice is the same
    site, t0, hist, table = frankfurt
    later = table["issued_at"] > t0
    assert later.any() and (~later & (table["ts"] >= t0)).sum() == 22  # 00:00-21:59 UTC known
    clean = forecast_site(site, hist[hist.index < t0], t0, 48, {"signal_quality": "measured"},
                          models={}, exogenous=table)
    bad = table.copy()
    bad.loc[later, "value"] = bad.loc[later, "value"] * 10 + 500
    bad = check_table(bad)
    bad.attrs.update(table.attrs)
    bad_hist = hist.copy()
    num = bad_hist.select_dtypes("number").columns
    bad_hist.loc[bad_hist.index >= t0, num] = bad_hist.loc[bad_hist.index >= t0, num] * 10 + 50
    poisoned = forecast_site(site, bad_hist, t0, 48, {"signal_quality": "measured"}, models={},
                             exogenous=bad)
    pd.testing.assert_frame_equal(clean.signals, poisoned.signals)
    pd.testing.assert_frame_equal(clean.long, poisoned.long)
    for sig in (CI, "green_surplus_index"):
        assert clean.models[sig]["model"] == poisoned.models[sig]["model"]
        assert clean.models[sig]["exogenous"]["features"] == ["day_ahead_price_usd_per_mwh"]
    # the prices are read: the 2023 price file covers half of the year of training issues,
    # and the ridge fits its price terms on the issues since the file begins
    assert clean.models[CI]["exogenous"]["used"]


@pytest.mark.shared_data
def test_day_ahead_prices_published_by_the_issue_move_a_model_that_reads_them(frankfurt):
    # the teeth of the test above: the prices known at the issue do reach the forecast
    site, t0, hist, table = frankfurt
    y_fit = hist.loc[hist.index < t0, CI]
    ridge = HourlyRidgeExog(exog=table, exog_features=("day_ahead_price_usd_per_mwh",),
                            max_lead_hours=48).fit(y_fit)
    assert ridge.used_features() == ("day_ahead_price_usd_per_mwh",)
    base = ridge.backcast(y_fit, pd.DatetimeIndex([t0]), 48, exog=table)
    known = (table["issued_at"] <= t0) & (table["ts"] >= t0)
    moved = table.copy()
    moved.loc[known, "value"] = moved.loc[known, "value"] * 3 + 100
    again = ridge.backcast(y_fit, pd.DatetimeIndex([t0]), 48, exog=moved)
    changed = ~np.isclose(again, base)
    assert changed[0, :22].all()  # every hour whose price was published by the issue
    assert not changed[0, 22:].any()  # later hours: their prices were not out yet


@pytest.mark.shared_data
def test_the_priced_ridge_is_the_plain_ridge_past_the_leads_its_prices_reach(frankfurt):
    # the exogenous ridge was declared day-ahead: chosen, it handed leads 24-95 to the extension
    # model, so a feature published for 22 hours changed the forecast two and three days out
    from carbonsched.forecasts.registry import exogenous_candidates
    from carbonsched.forecasts.ridge import HourlyRidge

    site, t0, hist, table = frankfurt
    y_fit = hist.loc[hist.index < t0, CI]
    (cand,) = [c for c in exogenous_candidates(CI, table) if c.name == "ridge_hourly_exog"]
    assert cand.max_horizon_hours is None  # forecasts every lead itself
    clip = (0.0, 2000.0)
    priced = cand.make(None, clip, 0).fit(y_fit)
    plain = HourlyRidge(issue_hour=0, clip=clip).fit(y_fit)
    issues = pd.DatetimeIndex([t0])
    p, q = priced.backcast(y_fit, issues, 96, exog=table), plain.backcast(y_fit, issues, 96)
    assert np.isfinite(p).all()
    assert not np.isclose(p[0, :22], q[0, :22]).any()  # the prices published by the issue
    np.testing.assert_allclose(p[0, 22:], q[0, 22:], rtol=1e-9)  # none published that far


@pytest.mark.parametrize(("have", "enough"), [
    ([False] * 100 + [True] * 56, True),    # a source that began late: 56 issues, every one
    ([False] * 100 + [True] * 55, False),   # one issue short of eight weeks
    ([True] * 9 + [False] + [True] * 50, True),    # 59 of 60 since the first: 0.98
    ([True] * 54 + [False] * 6 + [True] * 2, True),    # 56 of 62 since the first: 0.903
    ([True] * 54 + [False] * 7 + [True] * 2, False),   # 56 of 63: 0.889, under 0.9
    ([True] * 63 + [False] * 7, True),    # 63 of 70: exactly 0.9
])
def test_an_exogenous_feature_enters_a_lead_from_its_first_issue_on(have, enough):
    from carbonsched.forecasts.ridge import _enough_exog

    assert _enough_exog(np.array(have)) is enough
