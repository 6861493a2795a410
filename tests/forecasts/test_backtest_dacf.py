"""DACF backtest: metric definitions against hand-computed values, output shape, errors."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from carbonsched.errors import DataFormatError, ForecastError, InputError
from carbonsched.forecasts.backtest import (
    STACK,
    BacktestResult,
    RegionData,
    _validate,
    coverage,
    daily_mapes,
    mae,
    mape_mean,
    mape_weights,
    render_table,
    run_backtest,
    score,
    stacked_forecast,
    validation_blocks,
)
from carbonsched.forecasts.dacf_models import HourlyOLS


def test_mape_mean_hand_computed():
    # APE: |110-100|/100 = 10 %, |150-200|/200 = 25 %, actual 0 skipped, NaN skipped
    assert mape_mean([100, 200, 0, np.nan], [110, 150, 5, 1]) == pytest.approx(17.5)


def test_mape_weights_hand_computed():
    # 10 % over and 20 % under: 2/3 and 1/3 make every hour exact, the one zero-error weighting
    a = np.array([100.0, 250.0, 40.0, 310.0])
    w = mape_weights(a, np.stack([1.1 * a, 0.8 * a]))
    np.testing.assert_allclose(w, [2 / 3, 1 / 3], atol=1e-7)
    assert mape_mean(a, w @ np.stack([1.1 * a, 0.8 * a])) < 1e-5


def test_mape_weights_is_the_least_mape_on_the_simplex():
    rng = np.random.default_rng(7)
    a = rng.uniform(50, 500, 400)
    f = np.stack([a * rng.lognormal(0.05, 0.2, 400), a * rng.lognormal(-0.1, 0.1, 400),
                  a + rng.normal(0, 40, 400)])
    w = mape_weights(a, f)
    assert (w >= 0).all() and w.sum() == pytest.approx(1.0)
    best = mape_mean(a, w @ f)
    # every vertex, the equal mean and a grid of the simplex are no better (an LP optimum)
    grid = [np.array([i, j, 40 - i - j]) / 40 for i in range(41) for j in range(41 - i)]
    assert all(best <= mape_mean(a, g @ f) + 1e-9 for g in grid)
    assert best < min(mape_mean(a, x) for x in f) - 0.1   # the mix is worth something here


def test_mape_weights_reads_only_hours_every_input_has():
    a = np.array([100.0, 200.0, 0.0, np.nan, 150.0])
    f = np.stack([a * 1.1, a * 0.8])
    f[0, 2] = f[1, 3] = 1e9            # at hours with a zero or unknown actual: not read
    f[1, 4] = np.nan                   # a missing forecast: its hour is not read
    w = mape_weights(a, f)
    np.testing.assert_allclose(w, [2 / 3, 1 / 3], atol=1e-7)


def test_mape_weights_refuses_bad_shapes_and_no_hours():
    for f in (np.ones((2, 3)), np.ones(4), np.ones((2, 4, 1))):
        with pytest.raises(ForecastError, match=r"give actual as \(n,\) and forecasts as"):
            mape_weights(np.ones(4), f)
    with pytest.raises(ForecastError, match="no hour with a finite, non-zero actual"):
        mape_weights(np.array([0.0, np.nan]), np.ones((2, 2)))


def test_stacked_forecast_scores_each_fold_with_the_other_folds_weights():
    # fold 0: the first forecast is exact, fold 1: the second; out of fold each hour gets the
    # other fold's weights, so every hour is 20 % off (fitted in-fold it would be 0 %)
    a = np.array([100.0, 200.0, 300.0, 400.0, 100.0, 200.0, 300.0, 400.0])
    folds = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    f = np.stack([np.where(folds == 0, a, 1.2 * a), np.where(folds == 1, a, 0.8 * a)])
    w, oof = stacked_forecast(a, f, folds)
    np.testing.assert_allclose(oof[folds == 0], 0.8 * a[folds == 0], rtol=1e-7)
    np.testing.assert_allclose(oof[folds == 1], 1.2 * a[folds == 1], rtol=1e-7)
    assert mape_mean(a, oof) == pytest.approx(20.0, abs=1e-5)
    assert mape_mean(a, w @ f) < 20.0 - 1.0            # in sample: better than out of fold
    with pytest.raises(ForecastError, match="at least two folds"):
        stacked_forecast(a, f, np.zeros(8, int))
    with pytest.raises(ForecastError, match="one fold per hour"):
        stacked_forecast(a, f, folds[:7])


def test_mae_and_coverage_hand_computed():
    assert mae([100, 200], [110, 150]) == pytest.approx(30.0)
    a = [1.0, 2.0, 3.0, 4.0, np.nan]
    lo = [0.0, 2.5, 3.0, 0.0, 0.0]
    hi = [2.0, 3.0, 3.0, 3.9, 9.0]
    # inside: 1 in [0,2] yes; 2 in [2.5,3] no; 3 in [3,3] yes (bounds count); 4 > 3.9 no
    assert coverage(a, lo, hi) == pytest.approx(50.0)


def test_daily_mapes_and_percentiles_hand_computed():
    idx = pd.date_range("2021-07-01", periods=24 * 5, freq="h", tz="UTC")
    actual = pd.Series(100.0, index=idx)
    # day k has a constant error of k+1 % -> daily MAPEs 1, 2, 3, 4, 5
    err = np.repeat(np.arange(1, 6), 24).astype(float)
    fc = actual + err
    d = daily_mapes(actual, fc)
    assert d.tolist() == pytest.approx([1, 2, 3, 4, 5])
    assert d.index[0] == pd.Timestamp("2021-07-01", tz="UTC")
    frame = pd.DataFrame({"actual": actual, "mean": fc, "lo_80": fc - 2, "hi_80": fc + 2,
                          "lo_95": fc - 10, "hi_95": fc + 10})
    s = score(frame)
    assert s["mape_mean"] == pytest.approx(3.0)
    assert s["mape_daily_median"] == pytest.approx(3.0)
    assert s["mape_daily_p90"] == pytest.approx(4.6)  # linear: 4 + 0.6 * (5 - 4)
    assert s["mape_daily_p95"] == pytest.approx(4.8)
    assert s["mae"] == pytest.approx(3.0)
    assert s["coverage_80"] == pytest.approx(40.0)  # errors 1 and 2 are within +-2
    assert s["coverage_95"] == pytest.approx(100.0)


def _rows():
    base = {"mape_daily_median": 1.0, "mape_daily_p90": 2.0, "mape_daily_p95": 3.0,
            "mae": 4.0, "coverage_95": 95.0, "val_mape_mean": 5.0, "val_coverage_80": 80.0}
    return [
        {"region": "PJM", "model": "ols_level", "mape_mean": 3.1, "coverage_80": 79.5,
         "selected": True, "inputs": "gfs", **base},
        {"region": "PJM", "model": "dacf_published", "mape_mean": 3.3, "coverage_80": None,
         "selected": False, "inputs": "paper", **{**base, "coverage_95": None}},
    ]


def test_render_table_marks_selection_and_compares_with_dacf():
    md = render_table(_rows())
    assert "| PJM | ols_level | 3.10 | 3.30 | yes | 79.5 | 95.0 |" in md
    assert "| ols_level * | gfs | 3.10 |" in md
    assert "### PJM" in md


def test_result_writes_json_and_csv(tmp_path):
    fc = pd.DataFrame({"region": ["PJM"], "model": ["m"],
                       "issued_at": [pd.Timestamp("2021-07-01", tz="UTC")],
                       "ts": [pd.Timestamp("2021-07-01 05:00", tz="UTC")], "actual": [1.0],
                       "mean": [1.0], "lo_80": [0.5], "hi_80": [1.5], "lo_95": [0.1],
                       "hi_95": [2.0]})
    r = BacktestResult(_rows(), fc, {"x": 1})
    r.to_json(tmp_path / "r.json")
    r.to_csv(tmp_path / "f.csv")
    js = json.loads((tmp_path / "r.json").read_text())
    assert js["results"][0]["selected"] is True and js["results"][1]["coverage_80"] is None
    text = (tmp_path / "f.csv").read_text().splitlines()
    assert text[0] == "region,model,issued_at,ts,actual,mean,lo_80,hi_80,lo_95,hi_95"
    assert text[1].startswith("PJM,m,2021-07-01T00:00:00Z,2021-07-01T05:00:00Z,")


def test_run_backtest_refuses_unknown_names_and_missing_dir(tmp_path):
    with pytest.raises(InputError, match=r"unknown region\(s\) \['XX'\]"):
        run_backtest(tmp_path, regions=["XX"])
    with pytest.raises(InputError, match=r"unknown model\(s\) \['nope'\]"):
        run_backtest(tmp_path, models=["nope"])
    with pytest.raises(DataFormatError, match="not a directory"):
        run_backtest(tmp_path / "missing")
    with pytest.raises(InputError, match="refit_days must be at least 1 day"):
        run_backtest(tmp_path, refit_days=0)
    with pytest.raises(DataFormatError, match="not a directory"):  # 1 day: accepted
        run_backtest(tmp_path / "missing", refit_days=1)


@pytest.mark.slow
@pytest.mark.shared_data
def test_run_backtest_one_region_real_data(shared_data):
    r = run_backtest(shared_data / "dacf", regions=["PJM"], models=["ols_level"])
    models = [x["model"] for x in r.results]
    assert models == ["ols_level", "seasonal_naive", "dacf_published"]
    assert [x["selected"] for x in r.results] == [True, False, False]
    pub = r.results[2]
    assert pub["mape_mean"] == pytest.approx(3.30, abs=0.005)  # Table 4 of the paper
    assert pub["mape_daily_median"] == pytest.approx(2.71, abs=0.005)
    ols = r.results[0]
    assert ols["mape_mean"] < r.results[1]["mape_mean"]  # beats seasonal naive
    assert 70 < ols["coverage_80"] < 90
    f = r.forecasts
    assert len(f) == 3 * 4416
    assert (f.groupby("model")["issued_at"].nunique() == 184).all()
    # forecasts are issued at 00:00 UTC for the same day's hours
    lead = (pd.DatetimeIndex(f["ts"]) - pd.DatetimeIndex(f["issued_at"])) / pd.Timedelta(hours=1)
    assert lead.min() == 0 and lead.max() == 23
    assert r.meta["refit_days"] == 7 and "refit every 7 d" in r.meta["refit_policy"]
    assert "stack_weights" in r.meta["selection"]["PJM"]
    assert r.meta["selection"]["PJM"]["stack_weights"] == {}   # one candidate: no stack


@pytest.mark.slow
@pytest.mark.shared_data
def test_the_stack_is_a_weighted_mean_and_selection_reads_validation_only(shared_data):
    r = run_backtest(shared_data / "dacf", regions=["PJM"],
                     models=["ols_level", "ols_level_src", "ols_ratio_src"], n_jobs=1)
    by = {x["model"]: x for x in r.results}
    sel = r.meta["selection"]["PJM"]
    w = sel["stack_weights"][STACK]
    assert set(w) <= {"ols_level", "ols_level_src", "ols_ratio_src"}
    assert all(v > 0 for v in w.values()) and sum(w.values()) == pytest.approx(1.0, abs=1e-3)
    # selection is by the validation MAPE alone (the stack's scored out of fold)
    best = min((v["val_mape_mean"], k) for k, v in by.items() if v["val_mape_mean"])[1]
    assert sel["selected"] == best and by[best]["selected"]
    assert sum(v["selected"] for v in by.values()) == 1
    # its test forecast is the weighted mean of its members' (the same fits)
    f = r.forecasts.set_index(["model", "ts"])["mean"]
    mix = sum(v * f.loc[k].to_numpy() for k, v in w.items())
    np.testing.assert_allclose(f.loc[STACK].to_numpy(), mix, rtol=1e-5)


def test_validation_blocks_follow_the_test_refit_cadence():
    blocks = validation_blocks(7)
    assert blocks[0] == (pd.Timestamp("2021-01-01", tz="UTC"), pd.Timestamp("2021-01-08", tz="UTC"))
    # 181 validation days: 25 weeks, then a last block of 6 days ending where the test starts
    assert len(blocks) == 26
    assert blocks[-1] == (pd.Timestamp("2021-06-25", tz="UTC"),
                          pd.Timestamp("2021-07-01", tz="UTC"))
    assert all(a[1] == b[0] for a, b in zip(blocks, blocks[1:], strict=False))
    assert validation_blocks(None) == [(pd.Timestamp("2021-01-01", tz="UTC"),
                                        pd.Timestamp("2021-07-01", tz="UTC"))]


def _drifting_region() -> RegionData:
    """CI with a daily profile and a level that rises 1 g/kWh a day: a refit sees the drift."""
    idx = pd.date_range("2020-11-01", "2021-07-02", freq="h", tz="UTC", inclusive="left")
    days = (idx - idx[0]).days.to_numpy()
    rng = np.random.default_rng(3)
    y = pd.Series(300 + days + 40 * np.sin(2 * np.pi * idx.hour.to_numpy() / 24)
                  + rng.normal(0, 3, len(idx)), index=idx)
    return RegionData("SYN", y, None, [], [], pd.DataFrame())


def test_validation_forecasts_each_block_with_a_fit_on_data_before_it():
    data = _drifting_region()
    val = _validate(HourlyOLS(calib_days=0), data, refit_days=7)
    assert val["issued_at"].nunique() == 181 and len(val) == 181 * 24
    once = _validate(HourlyOLS(calib_days=0), data, refit_days=None)
    start, end = validation_blocks(7)[5]                      # 2021-02-05 .. 02-12
    issues = pd.date_range(start, end - pd.Timedelta(days=1), freq="D")
    fresh = HourlyOLS(calib_days=0)
    fresh.fit(data.y[data.y.index < start], None)             # nothing from the block itself
    want = fresh.backcast(data.y[data.y.index < pd.Timestamp("2021-07-01", tz="UTC")], None,
                          issues)
    got = val[val["issued_at"].isin(issues)].reset_index(drop=True)
    np.testing.assert_allclose(got["mean"].to_numpy(), want["mean"].to_numpy(), rtol=1e-9)
    # the one fit before 2021-01-01 forecasts the same block otherwise, and worse on the drift
    before = once[once["issued_at"].isin(issues)]
    assert np.abs(before["mean"].to_numpy() - got["mean"].to_numpy()).max() > 1.0
    assert mape_mean(val["actual"], val["mean"]) < mape_mean(once["actual"], once["mean"])
