"""Forecasts issued at any hour of the day, and an honest choice, on real shared-data series."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from carbonsched.adapters.signals import load_site_signals
from carbonsched.catalog import load_catalog
from carbonsched.errors import ForecastError
from carbonsched.forecasts.registry import NAIVE, SelectedForecaster, choose
from carbonsched.forecasts.ridge import HourlyRidge
from carbonsched.pipeline.daily import select_forecast

CI = "carbon_intensity_g_per_kwh"
HOUR = pd.Timedelta(hours=1)


def _ci(shared_data, catalog: str, site_id: str, start: str, end: str):
    site = load_catalog(catalog).site(site_id)
    frame, _ = load_site_signals(site, shared_data, pd.Timestamp(start, tz="UTC"),
                                 pd.Timestamp(end, tz="UTC"))
    return site, frame[CI]


def _mape(f: np.ndarray, a: np.ndarray) -> float:
    ok = np.isfinite(a) & (np.abs(a) > 1e-9)
    return float(100 * np.mean(np.abs(f[ok] - a[ok]) / np.abs(a[ok])))


def test_issues_at_00_06_12_and_18_utc_are_each_skilful(shared_data) -> None:
    # Tokyo 2023 (history from 1 January), the two refit periods from 5 June: issued at each
    # of the four hours every day, through the daily path's choice. Each issue hour gets its
    # own choice (validation issues and per-hour models at that hour). On main's code the
    # day-ahead member fitted on 00:00 issues was applied unchanged at the other hours: skill
    # over seasonal naive +35 % at 00:00 but -17 %, -25 % and -28 % at 06:00, 12:00 and 18:00
    # (MAPE 9.1-10.0 % against 7.8 %); here 55 %, 14 %, 4 % and 3 % (before the ratio OLS
    # took log ratios of its lags: 56, 16, 7 and 6 % on these 14 issues; over every week of
    # 2023 with a year of history its 12:00 UTC skill is 17 % either way, BENCHMARKS 8h).
    # Issue 35 item 1 asks for skill at every issue hour: positive, not a margin a 14-issue
    # sample of a short history can hold.
    site, y = _ci(shared_data, "global", "jp-tk-tokyo", "2023-01-01", "2023-06-20")
    cache: dict = {}
    days = pd.date_range("2023-06-05", "2023-06-18", freq="D", tz="UTC")
    skill = {}
    for hour in (0, 6, 12, 18):
        f, a, n = [], [], []
        for d in days:
            t = d + hour * HOUR
            fc, info, note = select_forecast(site, CI, y[y.index < t], t, 24, cache)
            assert note is None
            assert info["issue_hour_utc"] == hour
            ts = pd.date_range(t, periods=24, freq="h")
            f.append(fc["mean"].to_numpy(float))
            a.append(y.reindex(ts).to_numpy(float))
            n.append(y.reindex(ts - 24 * HOUR).to_numpy(float))  # seasonal naive (24 h)
        f, a, n = np.concatenate(f), np.concatenate(a), np.concatenate(n)
        skill[hour] = 1 - _mape(f, a) / _mape(n, a)
    # one choice per (period, issue hour)
    assert len(cache) == 2 * 4
    assert all(s > 0.0 for s in skill.values()), skill


def test_a_choice_refuses_an_issue_hour_it_was_not_fitted_for(shared_data) -> None:
    _, y = _ci(shared_data, "global", "gb-london", "2023-01-01", "2023-04-01")
    hist = y[y.index < pd.Timestamp("2023-03-06", tz="UTC")]
    sel = SelectedForecaster(candidates=("ci-lead-ols",), issue_hour=6).fit(hist)
    t = pd.Timestamp("2023-03-07T06:00Z")
    assert len(sel.predict(t, 24, y=y[y.index < t])) == 24
    with pytest.raises(ForecastError, match="issue_hour=12"):
        sel.predict(t + 6 * HOUR, 24, y=y)
    with pytest.raises(ForecastError, match="issue_hour must be an integer 0..23"):
        SelectedForecaster(issue_hour=24)


def test_the_fixed_combination_failing_against_naive_never_hands_the_choice_to_naive(
        shared_data) -> None:
    # Seattle (BPAT), period from 2022-03-07 on the 65 days of 2022 before it: the per-hour OLS
    # on the ratio is far off (MAPE > 1000 %; the combination of issue 35's first change,
    # which held it, failed against naive; the per-hour ridge of today's combination needs 51
    # issue days, so no combination forms), while the per-lead OLS (and its mean with naive)
    # beat naive's 15.7 % on the same window. main's registry then fell back to seasonal
    # naive, not to the choice by error.
    site, y = _ci(shared_data, "us-2022", "us-bpat-seattle", "2022-01-01", "2022-03-07")
    d = SelectedForecaster(tz=site.timezone).fit(y).describe()
    naive = d["naive_validation_error"]
    beat = [k for k, e in d["candidates"].items() if e < naive]
    assert beat, d["candidates"]
    assert d["model"] != NAIVE and d["model"] in beat
    assert d["validation_score"][d["model"]] == min(d["validation_score"][k] for k in beat)


def _case(seed: int = 0):
    rng = np.random.default_rng(seed)
    hours = np.arange(24)
    actual = np.array([300 + 100 * np.sin(2 * np.pi * (hours + rng.integers(0, 3)) / 24)
                       + rng.normal(0, 5, 24) for _ in range(20)])
    naive = actual * (1 + rng.normal(0, 0.2, actual.shape))     # ~16 % MAPE
    good = actual * (1 + rng.normal(0, 0.05, actual.shape))     # ~4 % MAPE
    high = actual * 1.3                                         # right order, 30 % too high
    return actual, {NAIVE: naive, "a": high, "b": high.copy(), "c": good}


def test_choose_takes_the_best_qualifying_model_when_the_combination_fails() -> None:
    actual, preds = _case()
    got = choose(preds, actual, "mape", 0.0, use_regret=True, combination=("a", "b"))
    assert got.errors["ens(a+b)"] > got.errors[NAIVE]          # the combination fails ...
    assert got.combination is False and got.name != NAIVE       # ... and naive is not the answer
    assert got.errors[got.name] < got.errors[NAIVE]
    assert got.scores[NAIVE] == pytest.approx(2.0)


def test_a_qualifying_combination_is_chosen_even_where_another_model_scores_lower() -> None:
    # member "b" alone (2 %) and "c" (about 4 %) have less validation error than the
    # combination (6 %), but the combination beats naive: it is deployed (issue 35: on the weeks
    # after each choice the fixed mean of the two strongest families beat the choice by the
    # criterion, BENCHMARKS 8d; the rule before chose "b" here)
    actual, preds = _case()
    preds["a"] = actual * 1.10
    preds["b"] = actual * 1.02
    got = choose(preds, actual, "mape", 0.0, use_regret=True, combination=("a", "b"))
    assert got.name == "ens(a+b)" and got.combination is True and got.members == ("a", "b")
    assert got.errors["b"] < got.errors["c"] < got.errors["ens(a+b)"] < got.errors[NAIVE]
    # at the margin's limit the combination does not qualify; just inside it does
    e, e0 = got.errors["ens(a+b)"], got.errors[NAIVE]
    at_limit = 1.0 - e / e0
    assert choose(preds, actual, "mape", at_limit + 1e-6, use_regret=True,
                  combination=("a", "b")).combination is False
    assert choose(preds, actual, "mape", at_limit - 1e-6, use_regret=True,
                  combination=("a", "b")).combination is True


def test_choose_margin_is_strict_at_the_limit() -> None:
    # exact binary fractions: naive 25 % MAPE, "c" 12.5 %; a margin of 0.5 puts "c" exactly at
    # the limit (12.5 < 0.5 * 25 is false), just below it "c" qualifies
    actual = np.full((5, 24), 64.0)
    preds = {NAIVE: actual * 1.25, "c": actual * 1.125}
    assert choose(preds, actual, "mape", 0.5, use_regret=False).name == NAIVE
    assert choose(preds, actual, "mape", 0.5 - 1e-9, use_regret=False).name == "c"
    with pytest.raises(ForecastError, match="must be among the candidates"):
        choose({"c": preds["c"]}, actual, "mape", 0.0, use_regret=False)


def test_hourly_ridge_reads_nothing_at_or_after_the_issue_and_batch_equals_predict(
        shared_data) -> None:
    _, y = _ci(shared_data, "global", "de-frankfurt", "2023-01-01", "2023-06-01")
    fit_end = pd.Timestamp("2023-05-01", tz="UTC")
    m = HourlyRidge(issue_hour=12).fit(y[y.index < fit_end])
    issues = pd.date_range("2023-05-02T12:00Z", periods=10, freq="D")
    batch = m.backcast(y, issues, 72)
    one = np.array([m.predict(t, 72, y=y[y.index < t])["mean"].to_numpy() for t in issues])
    np.testing.assert_allclose(batch, one, rtol=1e-10)
    poisoned = y.copy()
    poisoned[poisoned.index >= issues[3]] *= 10
    np.testing.assert_allclose(m.backcast(poisoned, issues[:4], 72), batch[:4], rtol=1e-12)
    with pytest.raises(ForecastError, match="fitted for issues at 12:00 UTC"):
        m.predict(issues[0] - 12 * HOUR, 24, y=y)


def test_ridge_features_of_an_issue_with_no_history_are_nan_without_a_warning() -> None:
    import warnings

    from carbonsched.forecasts.ridge import FEATURES, ridge_features

    filled = np.array([np.nan] * 30 + [300.0, 310.0, np.nan, 330.0] + [320.0] * 200)
    issues = pd.DatetimeIndex(["2023-01-01T00:00Z", "2023-01-02T00:00Z", "2023-01-02T11:00Z"])
    pos = np.array([0, 24, 35])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's "Mean of empty slice" would fail here
        F = ridge_features(filled, pos, 0, issues)
    mean24 = F[:, FEATURES.index("mean24")]
    # no observation before positions 0 and 24; position 35 sees 300, 310, 330 and 320 among the
    # 24 hours before it (positions 11..34)
    assert np.isnan(mean24[0]) and np.isnan(mean24[1])
    assert mean24[2] == pytest.approx((300.0 + 310.0 + 330.0 + 320.0) / 4)
