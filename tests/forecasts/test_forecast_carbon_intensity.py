"""LeadRegression: features by hand, exact fits on exact structure, NaN handling, speed."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from carbonsched.errors import ForecastError
from carbonsched.forecasts.base import fit_with_fallback
from carbonsched.forecasts.baselines import SeasonalNaive
from carbonsched.forecasts.carbon_intensity import (
    FEATURES,
    LeadRegression,
    default_ci_forecaster,
    fill_for_features,
    lead_features,
)
from carbonsched.forecasts.testing import synthetic_level

T0 = pd.Timestamp("2023-03-01T00:00:00Z")


def test_lead_features_by_hand() -> None:
    filled = np.arange(400, dtype=float)
    f0 = lead_features(filled, np.array([300]), 0)[0]
    # last = 299, s24 = 300-24, s168 = 300-168, mean7 = mean(300-24j, j=1..7) = 204,
    # mean24 = mean(276..299) = 287.5
    np.testing.assert_allclose(f0, [1, 299, 276, 132, 204, 287.5])
    f30 = lead_features(filled, np.array([300]), 30)[0]
    # t = 330, m24 = 2: s24 = 282, s168 = 162, mean7 = mean(330-24(2+j)) = 330-120 = 210
    np.testing.assert_allclose(f30, [1, 299, 282, 162, 210, 287.5])
    assert FEATURES == ("const", "last", "s24", "s168", "mean7", "mean24")


def test_lead_features_fall_back_before_the_start() -> None:
    filled = np.arange(30, dtype=float)
    f = lead_features(filled, np.array([30]), 0)[0]
    # s168 lies before the start -> s24 = 6; mean7 only has day 1 (=6); mean24 = mean(6..29)
    np.testing.assert_allclose(f, [1, 29, 6, 6, 6, 17.5])


def test_fill_for_features_uses_same_hour_yesterday_then_last() -> None:
    y = pd.Series(np.arange(60, dtype=float), index=pd.date_range(T0, periods=60, freq="h"))
    y.iloc[[11, 30, 59]] = np.nan
    f = fill_for_features(y)
    assert f.iloc[30] == 6.0 and f.iloc[59] == 35.0  # same hour one day earlier
    assert f.iloc[11] == 10.0  # nothing 24 h earlier -> last value
    y.iloc[35] = np.nan  # 59 -> 35 (NaN) -> 11 (NaN) -> last value 58
    assert fill_for_features(y).iloc[59] == 58.0


def periodic(days: int = 30, level: float = 1.0) -> pd.Series:
    h = np.arange(24 * days)
    y = level * (300 + 100 * np.sin(2 * np.pi * h / 24) + 20 * np.cos(2 * np.pi * h / 12))
    return pd.Series(y, index=pd.date_range(T0, periods=len(h), freq="h"))


def test_exact_daily_profile_is_reproduced() -> None:
    y = periodic()
    issue = y.index[-1] + pd.Timedelta(hours=1)
    out = LeadRegression().fit(y).predict(issue, 48)
    np.testing.assert_allclose(out["mean"], np.r_[y.iloc[-24:], y.iloc[-24:]], atol=1e-6)
    # zero held-out error -> zero-width intervals
    np.testing.assert_allclose(out["hi_95"] - out["lo_95"], 0.0, atol=1e-6)


def test_forecast_scales_with_the_series() -> None:
    # OLS with intercept is scale-equivariant and the intervals are relative: 2y -> 2x.
    y, _ = synthetic_level(3)
    issue = pd.Timestamp("2023-04-20T00:00:00Z")
    a = LeadRegression().fit(y).predict(issue, 24)
    b = LeadRegression().fit(2 * y).predict(issue, 24)
    np.testing.assert_allclose(b.to_numpy(), 2 * a.to_numpy(), rtol=1e-6)


def test_beats_seasonal_naive_on_ar_noise() -> None:
    # AR(1) deviations around a daily profile: the last value carries information that
    # yesterday's profile does not, so the first leads must be better than seasonal naive.
    y, _ = synthetic_level(5, n=24 * 90)
    issues = pd.date_range("2023-04-25T00:00Z", periods=20, freq="D")
    train = y[y.index < issues[0]]
    m, s = LeadRegression().fit(train), SeasonalNaive(24).fit(train)
    err_m = err_s = 0.0
    for t in issues:
        a = y.reindex(pd.date_range(t, periods=6, freq="h")).to_numpy()
        err_m += np.abs(m.predict(t, 6, y=y)["mean"].to_numpy() - a).mean()
        err_s += np.abs(s.predict(t, 6, y=y)["mean"].to_numpy() - a).mean()
    # AR(1) with phi = 0.8: expected ratio ~0.6 over leads 0..5 (sqrt(1 - phi^(2k+2)) / sqrt 2)
    assert err_m < 0.75 * err_s


def test_nan_gaps_in_history_at_fit_and_predict() -> None:
    y = periodic()
    y.iloc[100:130] = np.nan  # a 30 h outage
    y.iloc[-3:] = np.nan  # the last three hours before issue are missing
    issue = y.index[-1] + pd.Timedelta(hours=1)
    out = LeadRegression().fit(y).predict(issue, 24)
    assert np.isfinite(out.to_numpy()).all()
    clean = periodic()
    np.testing.assert_allclose(out["mean"], clean.iloc[-24:], rtol=0.02)


def test_intervals_cover_about_nominal_on_stationary_noise() -> None:
    y, _ = synthetic_level(11, n=24 * 120)
    train = y.iloc[: 24 * 70]
    m = LeadRegression().fit(train)
    hits80 = hits95 = n = 0
    for t in pd.date_range(train.index[-1] + pd.Timedelta(hours=1), periods=40, freq="D"):
        fc = m.predict(t, 24, y=y)
        a = y.reindex(fc.index)
        hits80 += int(((a >= fc["lo_80"]) & (a <= fc["hi_80"])).sum())
        hits95 += int(((a >= fc["lo_95"]) & (a <= fc["hi_95"])).sum())
        n += 24
    assert 0.72 <= hits80 / n <= 0.88
    assert 0.90 <= hits95 / n <= 0.99


def test_train_days_limits_the_history_used() -> None:
    y = periodic(60)
    noisy = y.copy()
    noisy.iloc[: 24 * 30] += np.random.default_rng(0).normal(0, 50, 24 * 30)
    a = LeadRegression(train_days=28).fit(noisy)
    b = LeadRegression(train_days=28).fit(y)
    np.testing.assert_allclose(a.coef_, b.coef_)


def test_parameter_errors() -> None:
    with pytest.raises(ForecastError, match="max_lead_hours must be >= 1, got 0"):
        LeadRegression(max_lead_hours=0)
    with pytest.raises(ForecastError, match=r"calib_fraction must be in \(0, 1\), got 1.0"):
        LeadRegression(calib_fraction=1.0)


def test_fallback_when_the_model_fails() -> None:
    class _Diverges(LeadRegression):
        def _fit(self, y, X):
            raise np.linalg.LinAlgError("SVD did not converge")

    y = periodic()
    model, note = fit_with_fallback(_Diverges(), SeasonalNaive(24), y)
    assert isinstance(model, SeasonalNaive)
    assert note == ("ci-lead-ols failed (ci-lead-ols: fit failed: SVD did not converge); "
                    "used seasonal-naive")
    model, note = fit_with_fallback(LeadRegression(), SeasonalNaive(24), y)
    assert isinstance(model, LeadRegression) and note is None


def test_too_short_history_is_a_forecast_error() -> None:
    y = periodic(2).iloc[:40]
    with pytest.raises(ForecastError, match="need at least 48 observed hours to fit, got 40"):
        LeadRegression().fit(y)


def test_default_is_the_measured_winner() -> None:
    assert isinstance(default_ci_forecaster(), LeadRegression)


def test_history_ending_before_the_issue_time_is_aligned_by_timestamp() -> None:
    # the last 3 hours before issue are absent from y (not NaN rows: absent). Reading the
    # history by position put the issue time 3 h early and shifted the whole profile by 3 h.
    y = periodic()
    issue = y.index[-1] + pd.Timedelta(hours=1)
    m = LeadRegression().fit(y)
    full = m.predict(issue, 24)
    short = m.predict(issue, 24, y=y.iloc[:-3])
    expected = y.iloc[-24:].to_numpy()
    np.testing.assert_allclose(full["mean"], expected, atol=1e-6)
    # the 3 missing hours are filled from the day before (same hour): still the exact profile
    np.testing.assert_allclose(short["mean"], expected, atol=1e-6)
    with pytest.raises(ForecastError, match="forecast has NaN"):
        m.predict(issue + pd.Timedelta(days=30), 24, y=y)  # history a month stale
