"""A floating-point warning in carbonsched's own code fails the test that raised it
(pyproject's ``error::RuntimeWarning:carbonsched``), wherever the module lives in the tree, and
a forecaster's fit does not turn it into a fallback."""

from __future__ import annotations

import warnings

import pandas as pd
import pytest

from carbonsched.forecasts.base import Forecaster


@pytest.mark.parametrize("module", ["carbonsched.plan.colgen.smoothed",
                                    "carbonsched.forecasts.pue", "carbonsched.adapters.http"])
def test_a_runtime_warning_from_our_modules_is_an_error(module):
    with pytest.raises(RuntimeWarning, match="invalid value"):
        warnings.warn_explicit("invalid value encountered in multiply", RuntimeWarning,
                               "x.py", 1, module=module)


def test_a_runtime_warning_from_elsewhere_is_not():
    # the filters as the ini file set them (none added here): numpy's own is recorded, ours
    # raises
    with warnings.catch_warnings(record=True) as seen:
        warnings.warn_explicit("invalid value (elsewhere)", RuntimeWarning, "x.py", 1,
                               module="numpy.core", registry={})
        with pytest.raises(RuntimeWarning):
            warnings.warn_explicit("invalid value (ours)", RuntimeWarning, "x.py", 1,
                                   module="carbonsched.plan.local", registry={})
    assert [str(w.message) for w in seen] == ["invalid value (elsewhere)"]


class _LogOfZero(Forecaster):
    name = "log-of-zero"

    def _fit(self, y, X):
        # numpy attributes a floating-point warning to the calling module: one of ours
        warnings.warn_explicit("divide by zero encountered in log", RuntimeWarning,
                               "pue.py", 1, module="carbonsched.forecasts.pue")

    def _predict(self, issued_at, horizon_hours, y, X):     # pragma: no cover - never fitted
        raise AssertionError


def test_a_forecasters_fit_lets_the_warning_through_not_a_forecast_error():
    y = pd.Series(1.0, index=pd.date_range("2023-01-01", periods=72, freq="h", tz="UTC"))
    with pytest.raises(RuntimeWarning, match="divide by zero"):
        _LogOfZero().fit(y)
