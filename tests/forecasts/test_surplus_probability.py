"""The probability of a green-surplus hour (issue 35 item 5): calibrated, honest, no look-ahead."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from carbonsched.errors import ForecastError
from carbonsched.evaluate.site_backtest import surplus_probability
from carbonsched.forecasts.registry import DEFAULT_SCHEDULE, SelectedForecaster
from carbonsched.forecasts.surplus_probability import (
    SurplusProbability,
    _logistic,
    surplus_features,
)
from carbonsched.forecasts.synthetic import synthetic_index
from carbonsched.notes import note_kind

T0 = pd.Timestamp("2023-01-02", tz="UTC")


def _window(days: int, rng: np.random.Generator, informative: bool) -> dict[str, np.ndarray]:
    """A validation window: ``days`` issues x 24 leads of forecasts, naive and the actual index.

    Informative: the actual is the model's forecast plus noise (a wet day is forecast wet);
    otherwise surplus hours come at two hours of the day (80 %, else 2 %) whatever was
    forecast: a pattern the hour-of-day climatology holds and two harmonics do not.
    """
    lead = np.tile(np.arange(24), days)
    hour = lead % 24
    issue = np.repeat(np.arange(days), 24)
    level = np.repeat(rng.uniform(-0.3, 0.5, days), 24)     # the day's wetness
    sun = np.clip(np.sin(np.pi * (hour - 6) / 12), 0, None)
    mean = np.clip(level * sun + rng.normal(0, 0.05, lead.size), 0, 1)
    if informative:
        actual = np.clip(mean + rng.normal(0, 0.1, lead.size), 0, 1)
    else:
        wet = np.where(np.isin(hour, (3, 15)), 0.8, 0.02)
        actual = np.where(rng.random(lead.size) < wet, rng.uniform(0.1, 1, lead.size), 0.0)
    naive = np.r_[np.zeros(24), actual[:-24]]               # yesterday's same hour
    return {"mean": mean, "naive": naive, "actual": actual, "hour": hour, "lead": lead,
            "issue": issue}


def _brier(p: np.ndarray, actual: np.ndarray) -> float:
    return float(np.mean((np.asarray(p, float) - (actual > 1e-9)) ** 2))


def test_an_informative_forecast_gets_the_logistic_model_and_beats_naive_out_of_sample() -> None:
    rng = np.random.default_rng(5)
    val, test = _window(28, rng, True), _window(200, rng, True)
    sp = SurplusProbability.fit(**val)
    assert sp.model == "logistic" and sp.note is None
    b = sp.brier  # cross-fitted on the window (computed, seed 5)
    assert b["logistic"] < b["hour-climatology"] < b["seasonal-naive"]
    assert b["logistic"] == pytest.approx(0.1885, abs=1e-3)
    assert b["hour-climatology"] == pytest.approx(0.2169, abs=1e-3)
    assert b["seasonal-naive"] == pytest.approx(0.4390, abs=1e-3)
    p = sp.predict(test["mean"], test["naive"], test["hour"], test["lead"])
    assert ((p >= 0) & (p <= 1)).all()
    skill = 1 - _brier(p, test["actual"]) / _brier(test["naive"] > 1e-9, test["actual"])
    assert skill == pytest.approx(0.562, abs=0.002)


def test_an_uninformative_forecast_falls_back_and_the_plan_says_so() -> None:
    rng = np.random.default_rng(5)
    sp = SurplusProbability.fit(**_window(28, rng, False))
    assert sp.model == "hour-climatology"
    assert sp.brier["hour-climatology"] == pytest.approx(0.0393, abs=1e-3)
    assert sp.brier["logistic"] == pytest.approx(0.0527, abs=1e-3)
    assert sp.note is not None and "used the hour-of-day climatology" in sp.note
    assert (f"Brier: logistic {sp.brier['logistic']:.4f}, naive calibrated "
            f"{sp.brier['naive-calibrated']:.4f}, their mean {sp.brier['calibrated-mean']:.4f}, "
            f"the hour-of-day climatology {sp.brier['hour-climatology']:.4f}") in sp.note
    assert note_kind(f"site-a: green surplus: {sp.note}") == "forecast fallback"
    d = sp.describe()
    assert d["model"] == "hour-climatology" and d["surplus_hours"] == sp.surplus_hours > 0


def _persistent(days: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Surplus hours that persist: an hour wet yesterday is wet today with probability 0.6, a
    dry one with 0.02, at any hour of the day; the model's point forecast is noise. Naive's yes
    is right 60 % of the time: its probability, not its yes/no, is what a plan can use."""
    lead = np.tile(np.arange(24), days)
    wet = np.zeros((days + 1, 24), bool)
    wet[0] = rng.random(24) < 0.1
    for d in range(1, days + 1):
        wet[d] = np.where(wet[d - 1], rng.random(24) < 0.6, rng.random(24) < 0.02)
    index = rng.uniform(0.1, 1, (days + 1, 24)) * wet
    return {"mean": np.clip(rng.normal(0.05, 0.05, lead.size), 0, 1),
            "naive": index[:-1].ravel(), "actual": index[1:].ravel(), "hour": lead % 24,
            "lead": lead, "issue": np.repeat(np.arange(days), 24)}


def test_a_persistent_surplus_gets_naive_calibrated_and_beats_naive_out_of_sample() -> None:
    rng = np.random.default_rng(4)
    val, test = _persistent(28, rng), _persistent(200, rng)
    sp = SurplusProbability.fit(**val)
    assert sp.model == "naive-calibrated" and sp.note is None   # a calibrated model: no fallback
    b = sp.brier  # cross-fitted on the window (computed, seed 4)
    assert b["naive-calibrated"] < b["logistic"] < b["seasonal-naive"] < b["hour-climatology"]
    assert b["naive-calibrated"] == pytest.approx(0.0359, abs=1e-3)
    assert b["seasonal-naive"] == pytest.approx(0.0432, abs=1e-3)
    # the probability is the window's surplus share after naive's no and yes, Jeffreys-smoothed
    yes = val["naive"] > 1e-9
    wet = val["actual"] > 1e-9
    p = sp.predict(test["mean"], test["naive"], test["hour"], test["lead"])
    after_yes = p[test["naive"] > 1e-9]
    assert np.allclose(after_yes, (wet[yes].sum() + 0.5) / (yes.sum() + 1))
    assert np.allclose(p[test["naive"] <= 1e-9], (wet[~yes].sum() + 0.5) / ((~yes).sum() + 1))
    skill = 1 - _brier(p, test["actual"]) / _brier(test["naive"] > 1e-9, test["actual"])
    assert skill == pytest.approx(0.2055, abs=0.002)


def test_calibrated_mean_is_chosen_and_predicts_the_mean_of_the_two_calibrated_models() -> None:
    rng = np.random.default_rng(10)
    val, test = _persistent(28, rng), _persistent(200, rng)
    sp = SurplusProbability.fit(**val)
    assert sp.model == "calibrated-mean" and sp.note is None
    b = sp.brier  # cross-fitted on the window (computed, seed 10)
    assert b["calibrated-mean"] < b["naive-calibrated"] < b["logistic"] < b["seasonal-naive"]
    assert b["calibrated-mean"] == pytest.approx(0.0360, abs=1e-3)
    args = (test["mean"], test["naive"], test["hour"], test["lead"])
    p = sp.predict(*args)
    # the fit's own logistic model and naive's calibration, averaged
    lr = _logistic(surplus_features(val["mean"], val["naive"], val["hour"], val["lead"]),
                   (val["actual"] > 1e-9).astype(float))
    yes = val["naive"] > 1e-9
    wet = val["actual"] > 1e-9
    naive_p = np.where(test["naive"] > 1e-9, (wet[yes].sum() + 0.5) / (yes.sum() + 1),
                       (wet[~yes].sum() + 0.5) / ((~yes).sum() + 1))
    lr_p = lr.predict_proba(surplus_features(*args))[:, 1]
    np.testing.assert_allclose(p, 0.5 * (lr_p + naive_p))
    assert not np.allclose(lr_p, naive_p)               # two different probabilities averaged
    skill = 1 - _brier(p, test["actual"]) / _brier(test["naive"] > 1e-9, test["actual"])
    assert skill == pytest.approx(0.2264, abs=0.002)


def test_a_window_of_one_issue_cannot_be_cross_fitted_and_gives_the_climatology() -> None:
    w = _persistent(1, np.random.default_rng(4))
    w["actual"][:2] = (0.5, 0.0)                        # an event and a non-event
    w["actual"][2:] = 0.0
    sp = SurplusProbability.fit(**w)
    assert sp.model == "hour-climatology" and sp.brier == {} and sp.note is None
    assert sp.hours == 24 and sp.surplus_hours == 1


def test_naive_calibrated_never_gives_0_or_1_even_where_naive_never_said_yes() -> None:
    w = _persistent(28, np.random.default_rng(2))
    w["naive"] = np.zeros_like(w["naive"])              # naive never says yes in the window
    sp = SurplusProbability.fit(**w)
    sp.model = "naive-calibrated"
    p = sp.predict(np.zeros(2), np.array([0.0, 0.5]), np.array([0, 1]), np.array([1, 2]))
    wet = int((w["actual"] > 1e-9).sum())
    assert p[1] == 0.5                                   # (0 + 1/2) / (0 + 1): no evidence
    assert p[0] == pytest.approx((wet + 0.5) / (w["actual"].size + 1))


def test_a_window_without_surplus_gives_the_smoothed_climatology_without_a_note() -> None:
    w = _window(28, np.random.default_rng(1), True)
    w["actual"] = np.zeros_like(w["actual"])
    sp = SurplusProbability.fit(**w)
    assert sp.model == "hour-climatology" and sp.brier == {} and sp.note is None
    p = sp.predict(w["mean"][:24], w["naive"][:24], w["hour"][:24], w["lead"][:24])
    np.testing.assert_allclose(p, 0.5 / 29)  # Jeffreys: (0 + 1/2) / (28 + 1)


def test_bad_inputs_name_what_is_wrong() -> None:
    w = _window(3, np.random.default_rng(1), True)
    with pytest.raises(ForecastError, match="1-D of one length"):
        SurplusProbability.fit(**{**w, "lead": w["lead"][:-1]})
    with pytest.raises(ForecastError, match="outside 0..23"):
        SurplusProbability.fit(**{**w, "hour": w["hour"] + 1})


def _index(seed: int, days: int) -> pd.Series:
    y = synthetic_index(seed, 24 * days)[0]
    return y.set_axis(pd.date_range(T0, periods=len(y), freq="h"))


def test_the_daily_choice_beats_naive_where_the_quantile_reading_did_not() -> None:
    # issue 35 item 5's fault: P(surplus) read from the index's quantiles (mass at 0) scored
    # worse than naive's yes/no; the calibrated probability scores better (computed, seed 2)
    y = _index(2, 100)
    p_cal, p_q, p_n, event, models = [], [], [], [], {}
    for t in pd.date_range(y.index[24 * 70], y.index[24 * 97], freq="D"):
        period = DEFAULT_SCHEDULE.period_start(t)
        if period not in models:
            models[period] = SelectedForecaster("green_surplus_index").fit(y[y.index < period])
        f = models[period].predict(t, 24, y=y)
        p_cal.append(f.attrs["surplus_probability"])
        p_q.append(surplus_probability(f))  # no p_surplus column: read from the quantiles
        p_n.append(y.reindex(f.index - pd.Timedelta(days=1)).to_numpy() > 1e-9)
        event.append(y.reindex(f.index).to_numpy() > 1e-9)
    p_cal, p_q, p_n, ev = (np.concatenate(a).astype(float) for a in (p_cal, p_q, p_n, event))
    bn = float(np.mean((p_n - ev) ** 2))
    skill_cal = 1 - float(np.mean((p_cal - ev) ** 2)) / bn
    skill_q = 1 - float(np.mean((p_q - ev) ** 2)) / bn
    assert skill_q < 0 < skill_cal
    assert skill_cal == pytest.approx(0.458, abs=0.002)
    assert skill_q == pytest.approx(-1.076, abs=0.002)
    d = models[period].describe()["surplus_probability"]
    assert set(d["validation_brier"]) == {"seasonal-naive", "hour-climatology",
                                          "naive-calibrated", "logistic", "calibrated-mean"}


def test_the_probability_reads_nothing_at_or_after_the_issue_time() -> None:
    y = _index(3, 60)
    issue = y.index[24 * 57]
    period = DEFAULT_SCHEDULE.period_start(issue)
    a = SelectedForecaster("green_surplus_index").fit(y[y.index < period])
    pa = a.predict(issue, 48, y=y).attrs["surplus_probability"]
    poisoned = y.copy()
    poisoned[poisoned.index >= issue] = 1.0 - poisoned[poisoned.index >= issue]
    b = SelectedForecaster("green_surplus_index").fit(poisoned[poisoned.index < period])
    np.testing.assert_array_equal(pa, b.predict(issue, 48, y=poisoned).attrs["surplus_probability"])
    assert pa.shape == (48,) and ((pa >= 0) & (pa <= 1)).all()
