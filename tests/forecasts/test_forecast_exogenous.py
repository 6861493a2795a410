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
