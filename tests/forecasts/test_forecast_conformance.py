"""Every forecaster of carbonsched.forecasts passes the shared conformance check."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd
import pytest

from carbonsched.errors import ForecastError
from carbonsched.forecasts.base import Forecaster
from carbonsched.forecasts.baselines import SeasonalNaive
from carbonsched.forecasts.testing import (
    FORECASTERS,
    ISSUE,
    ConformanceError,
    all_forecasters,
    check_forecaster,
    data_for,
    synthetic_level,
)


@pytest.mark.parametrize("cls", all_forecasters(), ids=lambda c: c.__name__)
def test_conformance(cls: type[Forecaster]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        passed = check_forecaster(cls)
    # 7 checks per parameter set (6 without the NaN-gap refit: never).
    assert len(passed) == 7 * len(cls.get_test_params())


def test_list_holds_every_own_forecaster() -> None:
    names = {c.__name__ for c in FORECASTERS}
    assert names == {"SeasonalNaive", "Climatology", "LeadRegression", "GreenSurplusForecaster",
                     "SurplusSeasonalNaive", "PueForecaster", "SelectedForecaster"}
    assert all_forecasters()[: len(FORECASTERS)] == FORECASTERS


def test_synthetic_data_is_what_the_check_promises() -> None:
    y, X = synthetic_level()
    assert len(y) == 24 * 70 and str(y.index.tz) == "UTC"
    assert X is not None and list(X.columns) == ["temperature_c", "relative_humidity_pct"]
    y_idx, X_idx = data_for(
        __import__("carbonsched.forecasts.green_surplus", fromlist=["x"]).GreenSurplusForecaster)
    assert X_idx is None and y_idx.between(0, 1).all()


# --- the check must catch broken forecasters ---------------------------------------------
class _ReadsFittedFuture(SeasonalNaive):
    """Leaks: reads the fitted series behind the base class's back."""

    def _predict(self, history, horizon, X):
        out = super()._predict(history, horizon, X)
        assert self._y is not None
        return out + float(self._y.iloc[-1])


class _SkipsValidation(SeasonalNaive):
    """Overrides predict and forgets to refuse naive issue times."""

    def predict(self, issued_at, horizon_hours=24, y=None, X=None):
        t = pd.Timestamp(issued_at)
        if t.tzinfo is None:
            t = t.tz_localize("UTC")
        return super().predict(t, horizon_hours, y, X)


class _UsesPositionalX(SeasonalNaive):
    """Takes X but aligns it by position (overrides the base check)."""

    def _check_exog(self, X, index, stage):
        return None if X is None else X.iloc[: len(index)].set_axis(index)


class _NaNAfterGaps(SeasonalNaive):
    """Breaks on NaN gaps in the fitted history."""

    def _fit(self, y, X):
        if y.isna().any():
            raise ForecastError("cannot handle gaps")
        super()._fit(y, X)


@pytest.mark.parametrize(("cls", "check"), [
    (_ReadsFittedFuture, "issue-time rule"),
    (_SkipsValidation, "naive issue time refused"),
    (_UsesPositionalX, "X shifted by +1 h caught"),
])
def test_check_catches_broken_forecasters(cls: type[Forecaster], check: str) -> None:
    with pytest.raises(ConformanceError, match=re.escape(f"fails '{check}'")):
        check_forecaster(cls)


def test_check_reports_failed_fit_on_gaps() -> None:
    with pytest.raises(ForecastError, match="cannot handle gaps"):
        check_forecaster(_NaNAfterGaps)


def test_spike_after_issue_is_really_dropped() -> None:
    y, _ = synthetic_level()
    f = SeasonalNaive(24).fit(y)
    spiked = y.copy()
    spiked[spiked.index >= ISSUE] = 1e6
    a = f.predict(ISSUE, 24, y=spiked)
    assert np.allclose(a["mean"].to_numpy(),
                       y[(y.index >= ISSUE - pd.Timedelta(hours=24)) & (y.index < ISSUE)])


def test_max_horizon_attribute_limits_the_horizons() -> None:
    class _DayAheadOnly(SeasonalNaive):
        max_horizon_hours = 24

        def _predict(self, history, horizon, X):
            if len(horizon) > 24:
                raise ForecastError("at most 24 h")
            return super()._predict(history, horizon, X)

    assert len(check_forecaster(_DayAheadOnly)) == 14
