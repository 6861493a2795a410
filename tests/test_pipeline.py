"""One planning day's forecasting step, on synthetic histories with known answers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from carbonsched.catalog import load_catalog
from carbonsched.errors import ForecastError
from carbonsched.forecasts.base import Forecaster
from carbonsched.pipeline.daily import forecast_site, prune_model_cache

ISSUE = pd.Timestamp("2023-07-15", tz="UTC")
SITE = load_catalog("global").site("ca-on-toronto")


def _history(days=56, spike_after_issue=False):
    idx = pd.date_range(ISSUE - pd.Timedelta(days=days), ISSUE + pd.Timedelta(hours=23),
                        freq="h", tz="UTC")
    hour = idx.hour.to_numpy()
    ci = 100 + 20 * np.sin(2 * np.pi * hour / 24)
    f = pd.DataFrame({"carbon_intensity_g_per_kwh": ci, "renewable_pct": 40.0,
                      "price_usd_per_mwh": 30.0, "temperature_c": 10.0,
                      "relative_humidity_pct": 50.0}, index=idx)
    if spike_after_issue:
        f.loc[f.index >= ISSUE, "carbon_intensity_g_per_kwh"] = 1e6
        f.loc[f.index >= ISSUE, "temperature_c"] = 45.0
    return f


class _Broken(Forecaster):
    name = "broken"

    def _fit(self, y, X):
        raise np.linalg.LinAlgError("singular matrix")

    def _predict(self, history, horizon, X):  # pragma: no cover - never fitted
        raise AssertionError


def test_forecast_site_known_profile_and_columns():
    fc = forecast_site(SITE, _history(), ISSUE)
    s = fc.signals
    assert list(s.index) == list(pd.date_range(ISSUE, periods=24, freq="h"))
    # a perfectly periodic history is forecast to within 2 g/kWh (2 % of its level)
    expected = 100 + 20 * np.sin(2 * np.pi * np.arange(24) / 24)
    assert np.abs(s["carbon_intensity_g_per_kwh"].to_numpy() - expected).max() < 2.0
    # 10 degC and 50 % RH are below the free-cooling limit: PUE at its floor
    assert s["pue"].to_numpy() == pytest.approx(np.full(24, SITE.pue.pue_min))
    assert (s["green_surplus_kw"] >= 0).all()
    assert (s["green_surplus_kw"] <= SITE.green_surplus_max_kw + 1e-9).all()
    assert set(fc.long["signal"]) == {"carbon_intensity_g_per_kwh", "green_surplus_index", "pue"}
    assert fc.signal_quality == "measured"


def test_future_rows_in_history_change_nothing():
    clean = forecast_site(SITE, _history(), ISSUE).signals
    spiked = forecast_site(SITE, _history(spike_after_issue=True), ISSUE).signals
    pd.testing.assert_frame_equal(clean, spiked)


def test_failed_fit_falls_back_to_baseline_and_says_so():
    fc = forecast_site(SITE, _history(), ISSUE, ci_model=_Broken())
    assert any("broken failed" in n and "seasonal-naive" in n for n in fc.notes), fc.notes
    expected = 100 + 20 * np.sin(2 * np.pi * np.arange(24) / 24)
    assert fc.signals["carbon_intensity_g_per_kwh"].to_numpy() == pytest.approx(expected)


def test_stale_or_short_history_is_refused_with_the_site_named():
    h = _history()
    with pytest.raises(ForecastError, match="ca-on-toronto: newest carbon-intensity"):
        forecast_site(SITE, h[h.index < ISSUE - pd.Timedelta(days=3)], ISSUE)
    with pytest.raises(ForecastError, match="ca-on-toronto: fewer than 48 hours"):
        forecast_site(SITE, h[h.index >= ISSUE - pd.Timedelta(hours=30)], ISSUE)


def test_cached_models_are_reused_within_a_refit_period_not_refitted():
    # 2023-07-15 (Saturday) and 07-16 (Sunday) share the refit period starting Monday 07-10;
    # Monday 07-17 starts the next one, whose models are fitted anew
    cache: dict = {}
    forecast_site(SITE, _history(days=70), ISSUE, models=cache)
    fitted = dict(cache)
    assert {k[:3] for k in fitted} == {
        (SITE.id, s, pd.Timestamp("2023-07-10", tz="UTC"))
        for s in ("carbon_intensity_g_per_kwh", "green_surplus_index", "pue")}
    forecast_site(SITE, _history(days=70), ISSUE + pd.Timedelta(days=1), models=cache)
    assert len(cache) == 3 and all(cache[k] is v for k, v in fitted.items())
    monday = ISSUE + pd.Timedelta(days=2)
    forecast_site(SITE, _history(days=72), monday, models=cache)
    assert len(cache) == 6
    assert {k[2] for k in cache} == {pd.Timestamp("2023-07-10", tz="UTC"), monday}


def test_prune_model_cache_keeps_one_fit_per_period():
    # a replay prunes before each run: the earlier period's choices go, the current period's
    # (fitted on a Saturday, reused on the Sunday) stay the same objects, the explicit "ci" stays
    cache: dict = {"ci": "explicit model"}
    forecast_site(SITE, _history(days=70), ISSUE, models=cache)
    fitted = {k: v for k, v in cache.items() if k != "ci"}
    sunday = ISSUE + pd.Timedelta(days=1)
    assert prune_model_cache(cache, sunday) == 0
    assert all(cache[k] is v for k, v in fitted.items())
    monday = ISSUE + pd.Timedelta(days=2)
    assert prune_model_cache(cache, monday) == 3
    assert cache == {"ci": "explicit model"}
    # just before the period boundary nothing is dropped
    forecast_site(SITE, _history(days=70), ISSUE, models=cache)
    assert prune_model_cache(cache, monday - pd.Timedelta(minutes=1)) == 0 and len(cache) == 4


def test_weather_persistence_is_aligned_by_hour_despite_missing_recent_hours():
    # hot afternoons: 25 degC + 10 sin, peak at 06 UTC; the 3 h before issue have no weather
    h = _history()
    hour = h.index.hour.to_numpy()
    h["temperature_c"] = 25.0 + 10.0 * np.sin(2 * np.pi * hour / 24)
    h.loc[(h.index >= ISSUE - pd.Timedelta(hours=3)), ["temperature_c",
                                                      "relative_humidity_pct"]] = np.nan
    fc = forecast_site(SITE, h, ISSUE)
    # slot t takes the weather of t - 1 day (or t - 2 days where that hour is missing), so
    # PUE at 06 UTC is that of 35 degC, at 18 UTC that of 15 degC (free cooling: the floor)
    m = SITE.pue
    expected_06 = min(m.pue_max, m.pue_min + m.mechanical_slope_per_c * (35.0 - 18.0))
    assert fc.signals["pue"].iloc[6] == pytest.approx(expected_06, abs=1e-9)
    assert fc.signals["pue"].iloc[18] == pytest.approx(m.pue_min)
    assert fc.signals["pue"].idxmax() == ISSUE + pd.Timedelta(hours=6)


def test_run_daily_plan_without_data_dir_uses_the_settings(monkeypatch, tmp_path):
    # data_dir=None used to end in "TypeError: expected str, bytes or os.PathLike object"
    from carbonsched.config import get_settings
    from carbonsched.errors import DataFormatError
    from carbonsched.pipeline.daily import run_daily_plan

    monkeypatch.setenv("CARBONSCHED_DATA_DIR", str(tmp_path / "nowhere"))
    get_settings.cache_clear()
    try:
        with pytest.raises(DataFormatError, match=r"nowhere: data folder for site "
                                                  r"'ca-on-toronto' \(electricitymaps"):
            run_daily_plan("2023-07-15", "global")
    finally:
        get_settings.cache_clear()


def test_no_surplus_proxy_inputs_means_zero_surplus_and_a_note():
    # no price and no renewable share: the index cannot be built; this used to raise an
    # InputError out of forecast_site and abort the whole plan for one site's proxy
    h = _history()
    h["renewable_pct"] = np.nan
    h["price_usd_per_mwh"] = np.nan
    fc = forecast_site(SITE, h, ISSUE)
    assert (fc.signals["green_surplus_kw"] == 0.0).all()
    assert any(n.startswith("ca-on-toronto: green surplus not forecast (green_surplus_index: "
                            "the frame has no values") for n in fc.notes), fc.notes
    assert fc.signals["carbon_intensity_g_per_kwh"].notna().all()


def test_pue_is_forecast_by_the_chosen_model_with_conformal_intervals():
    h = _history()
    h["temperature_c"] = 28.0  # above the 18 degC free-cooling limit: chillers run
    fc = forecast_site(SITE, h, ISSUE)
    pue = fc.long[fc.long["signal"] == "pue"].iloc[0]
    # a constant past PUE: pue_min + slope x (28 - 18) = 1.12 + 0.012 x 10, every model exact,
    # every validation residual 0: zero-width intervals, and the tie goes to seasonal naive
    assert pue["mean"] == pytest.approx(1.12 + 0.012 * 10, abs=1e-9)
    assert pue["hi_95"] == pytest.approx(pue["mean"]) and pue["lo_95"] == pytest.approx(
        pue["mean"])
    assert fc.models["pue"]["model"] == "seasonal-naive-24h"
    assert fc.models["pue"]["validation_error"] == 0.0
    # noisy weather: the validation residuals give the intervals their width
    rng = np.random.default_rng(0)
    h["temperature_c"] = 28.0 + rng.normal(0.0, 2.0, len(h))
    fc = forecast_site(SITE, h, ISSUE)
    p = fc.long[fc.long["signal"] == "pue"]
    assert ((p["hi_80"] - p["lo_80"]) > 0.01).all()
    assert ((p["hi_95"] - p["lo_95"]) >= (p["hi_80"] - p["lo_80"]) - 1e-12).all()
    assert fc.models["pue"]["metric"] == "mape"


def test_poisoned_future_gives_the_same_forecast_and_model_choice(shared_data):
    # real DE-LU data; everything at/after the issue time replaced by garbage (huge, negative,
    # missing) must change neither the forecasts nor the models chosen on validation
    from carbonsched.adapters.signals import load_site_signals
    from carbonsched.pipeline.daily import FORECAST_HISTORY_DAYS

    site = load_catalog("global").site("de-frankfurt")
    issue = pd.Timestamp("2023-07-13", tz="UTC")  # a Thursday: period from Monday 07-10
    frame, meta = load_site_signals(site, shared_data,
                                    issue - pd.Timedelta(days=FORECAST_HISTORY_DAYS),
                                    issue + pd.Timedelta(days=2))
    poisoned = frame.copy()
    future = poisoned.index >= issue
    rng = np.random.default_rng(0)
    for col in poisoned.columns:
        if pd.api.types.is_numeric_dtype(poisoned[col]) and poisoned[col].dtype != bool:
            poisoned.loc[future, col] = rng.choice([1e6, -50.0, np.nan], future.sum())
    clean = forecast_site(site, frame, issue, 24, meta, models={})
    dirty = forecast_site(site, poisoned, issue, 24, meta, models={})
    pd.testing.assert_frame_equal(clean.signals, dirty.signals)
    pd.testing.assert_frame_equal(clean.long, dirty.long)
    assert clean.models == dirty.models
    ci = clean.models["carbon_intensity_g_per_kwh"]
    assert ci["refit_from"] == "2023-07-10T00:00:00+00:00"
    assert ci["validation_to"] == "2023-07-10T00:00:00+00:00"
    assert ci["validation_issues"] == 28
    # never worse than seasonal naive on validation
    assert ci["validation_error"] <= ci["naive_validation_error"]
    assert set(clean.models) == {"carbon_intensity_g_per_kwh", "green_surplus_index", "pue"}


def test_a_72_h_horizon_is_forecast_with_intervals_per_lead_bucket():
    # the rolling planner's horizon: leads beyond 24 h come from a model able to reach them
    h = _history(days=70)
    rng = np.random.default_rng(1)
    h["carbon_intensity_g_per_kwh"] *= 1.0 + rng.normal(0.0, 0.05, len(h))
    fc = forecast_site(SITE, h, ISSUE, horizon_hours=72, models={})
    assert len(fc.signals) == 72 and fc.signals.notna().all().all()
    ci = fc.long[fc.long["signal"] == "carbon_intensity_g_per_kwh"].reset_index(drop=True)
    v = ci[["lo_95", "lo_80", "mean", "hi_80", "hi_95"]].to_numpy()
    assert (np.diff(v, axis=1) >= -1e-9).all()
    rel = ((ci["hi_95"] - ci["lo_95"]) / ci["mean"]).to_numpy()
    # one width per lead bucket, its own residuals' (issue 35 item 4); the noise is 5 % at every
    # lead, so every bucket's 95 % interval is about 2 x 1.96 x 5 % wide, none forced wider
    from carbonsched.forecasts.registry import LEAD_BUCKETS

    for a, e in LEAD_BUCKETS[:4]:
        assert np.ptp(rel[a:e]) < 1e-9
        assert 0.19 < rel[a] < 0.24
    assert fc.models["carbon_intensity_g_per_kwh"]["validation_issues"] == 28
