"""DACF backtest: metric definitions against hand-computed values, output shape, errors."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from carbonsched.errors import DataFormatError, InputError
from carbonsched.forecasts.backtest import (
    BacktestResult,
    coverage,
    daily_mapes,
    mae,
    mape_mean,
    render_table,
    run_backtest,
    score,
)


def test_mape_mean_hand_computed():
    # APE: |110-100|/100 = 10 %, |150-200|/200 = 25 %, actual 0 skipped, NaN skipped
    assert mape_mean([100, 200, 0, np.nan], [110, 150, 5, 1]) == pytest.approx(17.5)


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
