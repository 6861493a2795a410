"""The start regret: the excess emissions of the starts a forecast picks, by hand."""

from __future__ import annotations

import numpy as np
import pytest

from carbonsched.errors import ForecastError
from carbonsched.forecasts.decision import start_regret


def test_start_regret_by_hand() -> None:
    actual = np.array([[300.0, 100.0, 200.0, 400.0]])
    # arrival 0, wait 2 h, 1-hour job: starts 0..2; the forecast ranks hour 2 cleanest
    fc = np.array([[310.0, 250.0, 150.0, 90.0]])
    excess, ideal = start_regret(fc, actual, wait_hours=2, lengths_hours=(1,), arrivals=(0,))
    assert (excess, ideal) == (100.0, 100.0)          # picked 200, best 100
    # a forecast with the right order but the wrong level has no regret
    assert start_regret(actual * 1.3 + 50, actual, 2, (1,), (0,)) == (0.0, 100.0)
    # a 2-hour job from arrival 1 with wait 1: starts 1..2, sums 300 and 600
    excess, ideal = start_regret(fc, actual, wait_hours=1, lengths_hours=(2,), arrivals=(1,))
    assert (excess, ideal) == (300.0, 300.0)          # forecast sums 400 vs 240: picks start 2
    # the window is cut at the horizon: arrival 3, 1 hour, only start 3
    assert start_regret(fc, actual, 24, (1,), (3,)) == (0.0, 400.0)


def test_windows_with_missing_actuals_are_left_out() -> None:
    actual = np.array([[300.0, 100.0, 200.0, 400.0], [300.0, np.nan, 200.0, 400.0]])
    fc = np.array([[310.0, 250.0, 150.0, 90.0]] * 2)
    assert start_regret(fc, actual, 2, (1,), (0,)) == (100.0, 100.0)
    # both rows: starts 2..3, actual 200 / 400, the forecast picks 3 (90 < 150)
    assert start_regret(fc, actual, 2, (1,), (2,)) == (400.0, 400.0)


@pytest.mark.parametrize("fc,act,kw,message", [
    (np.ones((2, 4)), np.ones((2, 5)), {}, r"forecast \(2, 4\) and actual \(2, 5\)"),
    (np.array([[1.0, np.nan]]), np.ones((1, 2)), {}, "non-finite"),
    (np.ones((1, 4)), np.ones((1, 4)), {"lengths_hours": (5,)}, "job length 5 h outside 1..4"),
    (np.ones((1, 4)), np.ones((1, 4)), {"lengths_hours": (2,), "arrivals": (3,)},
     "arrival 3 h leaves no 2-hour start"),
])
def test_bad_input_is_refused(fc, act, kw, message) -> None:
    with pytest.raises(ForecastError, match=message):
        start_regret(fc, act, **kw)
