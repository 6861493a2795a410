"""The shared conformance check every forecaster passes (after sktime's ``check_estimator``).

:func:`check_forecaster` runs, for each parameter set of ``cls.get_test_params()``, the
checks of the contract in :mod:`carbonsched.forecasts.base` on a synthetic hourly series:

* ``predict`` before ``fit`` raises :class:`~carbonsched.errors.NotFittedError`;
* ``fit`` returns the forecaster itself and accepts NaN gaps in ``y``;
* the output has shape ``(h, 5)``, columns ``mean, lo_80, hi_80, lo_95, hi_95``, index ``ts``
  equal to the ``h`` hourly UTC starts from the issue time, no NaN, and
  ``lo_95 <= lo_80 <= mean <= hi_80 <= hi_95``;
* a naive or off-the-hour issue time raises :class:`~carbonsched.errors.TimeAxisError`;
* **issue-time rule**: a huge spike planted at and after the issue time in the ``y`` passed
  to ``predict`` changes nothing, nor do such values planted in the stored fitted history;
* exogenous ``X`` shifted by one hour, or ending one hour before the horizon does, raises
  :class:`~carbonsched.errors.TimeAxisError`;
* two identical calls give identical forecasts.

The forecasters checked are :data:`FORECASTERS` plus the concrete forecasters defined in the
modules of :data:`OPTIONAL_MODULES` that are installed (:func:`all_forecasters`).

Test data: a class may define a ``get_test_data(seed) -> (y, X)`` classmethod; otherwise
:data:`TEST_DATA` picks a generator by class, and the default is a positive daily-and-weekly
seasonal series shaped like grid carbon intensity, with hourly weather in ``X`` when the
forecaster requires exogenous inputs.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from carbonsched.errors import ForecastError, NotFittedError, TimeAxisError
from carbonsched.forecasts.base import COLUMNS, Forecaster
from carbonsched.forecasts.baselines import Climatology, SeasonalNaive
from carbonsched.forecasts.carbon_intensity import LeadRegression
from carbonsched.forecasts.green_surplus import GreenSurplusForecaster, SurplusSeasonalNaive
from carbonsched.forecasts.pue import PueForecaster
from carbonsched.forecasts.registry import SelectedForecaster
from carbonsched.forecasts.synthetic import (
    START,
    synthetic_index,
    synthetic_level,
    synthetic_pue,
    synthetic_weather,
)

#: Every forecaster of this package, checked by ``tests/forecasts/test_conformance.py``.
FORECASTERS: list[type[Forecaster]] = [
    SeasonalNaive,
    Climatology,
    LeadRegression,
    GreenSurplusForecaster,
    SurplusSeasonalNaive,
    PueForecaster,
    SelectedForecaster,
]

#: Modules whose forecasters are checked too once they exist (written by other engineers).
OPTIONAL_MODULES: tuple[str, ...] = ("carbonsched.forecasts.dacf_models",)

ISSUE = START + pd.Timedelta(hours=24 * 63)
SPIKE = 1e6


def all_forecasters() -> list[type[Forecaster]]:
    """:data:`FORECASTERS` plus the concrete public forecasters of :data:`OPTIONAL_MODULES`.

    A module of :data:`OPTIONAL_MODULES` that does not exist yet is skipped; any other import
    error propagates (a broken module must fail the test, not vanish from it).
    """
    out = list(FORECASTERS)
    for name in OPTIONAL_MODULES:
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue
            raise
        for _, obj in inspect.getmembers(mod, inspect.isclass):
            if (issubclass(obj, Forecaster) and obj.__module__ == name
                    and not inspect.isabstract(obj) and not obj.__name__.startswith("_")
                    and obj not in out):
                out.append(obj)
    return out


#: Test-data generator by class (classes may instead define ``get_test_data``).
TEST_DATA: dict[type[Forecaster], Callable[..., tuple[pd.Series, pd.DataFrame | None]]] = {
    GreenSurplusForecaster: synthetic_index,
    SurplusSeasonalNaive: synthetic_index,
    PueForecaster: synthetic_pue,
}


def data_for(cls: type[Forecaster], seed: int = 0) -> tuple[pd.Series, pd.DataFrame | None]:
    """``(y, X)`` for ``cls``: its ``get_test_data``, else :data:`TEST_DATA`, else level data.

    ``X`` is returned only when the forecaster requires exogenous inputs or its own
    ``get_test_data`` supplies it.
    """
    getter = getattr(cls, "get_test_data", None)
    if callable(getter):
        return getter(seed)
    y, X = TEST_DATA.get(cls, synthetic_level)(seed)
    return y, (X if cls.requires_exog else None)


class ConformanceError(AssertionError):
    """A forecaster breaks the contract; the message names the class, parameters and check."""


def _fail(cls: type[Forecaster], params: dict[str, Any], check: str, detail: str) -> None:
    raise ConformanceError(f"{cls.__name__}({params}) fails '{check}': {detail}")


def _expect_raises(cls: type[Forecaster], params: dict[str, Any], check: str,
                   exc: type[BaseException], fn: Callable[[], Any]) -> None:
    try:
        fn()
    except exc:
        return
    except Exception as other:  # noqa: BLE001 - report what was raised instead
        _fail(cls, params, check, f"raised {type(other).__name__}: {other}, "
                                  f"expected {exc.__name__}")
    _fail(cls, params, check, f"did not raise {exc.__name__}")


def check_forecaster(cls: type[Forecaster], horizons: tuple[int, ...] = (24, 36)) -> list[str]:
    """Run the conformance checks on ``cls`` for every ``cls.get_test_params()``.

    Parameters
    ----------
    cls
        A :class:`~carbonsched.forecasts.base.Forecaster` subclass.
    horizons
        Horizons to predict [h]; those above the class attribute ``max_horizon_hours`` (for a
        day-ahead-only model that declares one) are skipped.

    Returns
    -------
    list of str
        The names of the checks passed, for each parameter set (``"<params>: <check>"``).

    Raises
    ------
    ConformanceError
        At the first failed check, naming the class, the parameters and the check.
    """
    limit = getattr(cls, "max_horizon_hours", None)
    if limit is not None:
        horizons = tuple(h for h in horizons if h <= limit) or (int(limit),)
    passed: list[str] = []
    for params in cls.get_test_params():
        passed += _check_params(cls, params, horizons)
    return passed


def _check_params(cls: type[Forecaster], params: dict[str, Any],
                  horizons: tuple[int, ...]) -> list[str]:
    passed: list[str] = []
    y, X = data_for(cls)
    tag = f"{params}"

    f = cls(**params)
    _expect_raises(cls, params, "NotFittedError before fit", NotFittedError,
                   lambda: f.predict(ISSUE, 24, X=X))
    passed.append(f"{tag}: not fitted")

    if f.fit(y, X) is not f:
        _fail(cls, params, "fit returns self", "fit() did not return the forecaster")
    passed.append(f"{tag}: fit returns self")

    for h in horizons:
        try:
            out = f.predict(ISSUE, h, X=X)
        except ForecastError as exc:
            _fail(cls, params, f"predict {h} h", f"{exc} (a model limited to shorter horizons "
                  "declares the class attribute max_horizon_hours)")
        want = pd.date_range(ISSUE, periods=h, freq="h")
        if out.shape != (h, 5) or tuple(out.columns) != COLUMNS:
            _fail(cls, params, "output shape", f"got {out.shape} {list(out.columns)}")
        if not out.index.equals(want) or out.index.name != "ts" or str(out.index.tz) != "UTC":
            _fail(cls, params, "output index", f"got {out.index[:2]} name {out.index.name}")
        if out.isna().any().any():
            _fail(cls, params, "no NaN", f"NaN in {out.columns[out.isna().any()].tolist()}")
        v = out[["lo_95", "lo_80", "mean", "hi_80", "hi_95"]].to_numpy()
        if not (np.diff(v, axis=1) >= -1e-12).all():
            _fail(cls, params, "interval ordering", "lo_95<=lo_80<=mean<=hi_80<=hi_95 broken")
    passed.append(f"{tag}: output shape, index, ordering")

    _expect_raises(cls, params, "naive issue time refused", TimeAxisError,
                   lambda: f.predict(ISSUE.tz_localize(None), 24, X=X))
    _expect_raises(cls, params, "off-hour issue time refused", TimeAxisError,
                   lambda: f.predict(ISSUE + pd.Timedelta(minutes=30), 24, X=X))
    passed.append(f"{tag}: issue time validated")

    # Issue-time rule: observations at or after the issue time must not matter.
    clean = f.predict(ISSUE, 24, y=y[y.index < ISSUE], X=X)
    spiked = y.copy()
    spiked[spiked.index >= ISSUE] = SPIKE
    dirty = f.predict(ISSUE, 24, y=spiked, X=X)
    if not np.allclose(clean.to_numpy(), dirty.to_numpy(), rtol=0, atol=1e-9):
        _fail(cls, params, "issue-time rule", "a spike at/after the issue time changed the "
              "forecast (future data leaks into predict)")
    again = f.predict(ISSUE, 24, y=y, X=X)
    if not np.array_equal(again.to_numpy(), f.predict(ISSUE, 24, y=y, X=X).to_numpy()):
        _fail(cls, params, "deterministic", "two identical predict calls differ")
    # ... nor may _predict read the fitted history behind the base class's back: plant
    # implausible values (10 x the maximum) at/after the issue time in the stored fitted
    # series, leaving the fitted parameters as they are; the forecast must not move.
    g = cls(**params).fit(y, X)
    before = g.predict(ISSUE, 24, X=X)
    odd = y.copy()
    odd[odd.index >= ISSUE] = 10.0 * float(np.nanmax(np.abs(y.to_numpy(float)))) + 1.0
    g._y = odd
    after = g.predict(ISSUE, 24, X=X)
    if not np.allclose(before.to_numpy(), after.to_numpy(), rtol=0, atol=1e-9):
        _fail(cls, params, "issue-time rule", "values at/after the issue time in the fitted "
              "history changed the forecast (_predict reads the fitted series directly)")
    passed.append(f"{tag}: issue-time rule, deterministic")

    # Exogenous inputs aligned by timestamp and covering the horizon.
    # Exogenous inputs aligned by timestamp and covering the horizon: X cut to the
    # horizon and shifted by one hour (either way) misses an hour of it.
    Xh = X if X is not None else synthetic_weather(0)
    Xh = Xh[(Xh.index >= ISSUE) & (Xh.index < ISSUE + pd.Timedelta(hours=24))]
    for hours in (1, -1):
        shifted = Xh.copy()
        shifted.index = shifted.index + pd.Timedelta(hours=hours)
        _expect_raises(cls, params, f"X shifted by {hours:+d} h caught", TimeAxisError,
                       partial(f.predict, ISSUE, 24, X=shifted))
    _expect_raises(cls, params, "X short of the horizon caught", TimeAxisError,
                   lambda: f.predict(ISSUE, 24, X=Xh.iloc[:-1]))
    passed.append(f"{tag}: exogenous alignment")

    # NaN gaps in the fitted history.
    gappy = y.copy()
    gappy.iloc[200:206] = np.nan
    gappy.iloc[::37] = np.nan
    g = cls(**params).fit(gappy, X)
    out = g.predict(ISSUE, 24, X=X)
    if out.isna().any().any():
        _fail(cls, params, "NaN gaps in history", "forecast holds NaN after a gappy fit")
    passed.append(f"{tag}: NaN gaps")
    return passed
