"""The forecaster contract (after sktime).

Public ``fit``/``predict`` validate; ``_fit``/``_predict`` compute.

Every forecaster in carbonsched

* fits on a tz-aware hourly UTC series ``y`` (plus an optional exogenous frame ``X``);
* predicts ``horizon_hours`` hourly values issued at ``issued_at`` using **only** observations
  strictly before ``issued_at`` (the base class cuts the history, so no subclass can leak future
  data) plus exogenous inputs that are known at issue time (day-ahead weather, published operator
  forecasts) indexed by the hour they are *for*;
* returns a frame indexed by ``ts`` (the horizon's hourly starts, UTC) with columns
  ``mean, lo_80, hi_80, lo_95, hi_95`` (statsforecast's names), ordered
  ``lo_95 <= lo_80 <= mean <= hi_80 <= hi_95``.

Exogenous inputs are aligned by timestamp, never by position: ``X`` must be hourly UTC and cover
every fitted hour and every forecast hour, or :class:`~carbonsched.errors.TimeAxisError` names the
first missing hour. Coverage is checked on the rows ``X`` really has, *before* any gap is filled:
at predict time every forecast hour needs a row with a value in every column (a day-ahead weather
or operator forecast with a hole is refused, never NaN-filled and shifted); at fit time every
fitted hour needs a row (values may be NaN there: the model drops or fills those samples).

Intervals: :class:`EmpiricalIntervals` calibrates them on held-out residuals by lead hour
(split-conformal, Vovk et al., *Algorithmic Learning in a Random World*, 2005,
doi:10.1007/b106715) rather than assuming Gaussian errors.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any, ClassVar, Self

import numpy as np
import pandas as pd

from carbonsched.errors import ForecastError, NotFittedError, TimeAxisError
from carbonsched.timeaxis import check_covers, ensure_hourly_utc, hourly_slots, require_aware

COLUMNS = ("mean", "lo_80", "hi_80", "lo_95", "hi_95")


class Forecaster(abc.ABC):
    """Base class of every forecaster; subclasses implement ``_fit`` and ``_predict``.

    Parameters
    ----------
    **params
        Hyper-parameters, stored in :attr:`params` and reported with the forecasts.
    """

    name: ClassVar[str] = "forecaster"
    requires_exog: ClassVar[bool] = False

    def __init__(self, **params: Any) -> None:
        self.params = params
        self._fitted = False
        self._y: pd.Series | None = None
        self._X: pd.DataFrame | None = None

    # --- public, validating -------------------------------------------------------------
    def fit(self, y: pd.Series, X: pd.DataFrame | None = None) -> Self:
        """Fit on history ``y`` (hourly UTC, ``(n,)``) and optional exogenous ``X`` ``(n, k)``.

        Raises
        ------
        TimeAxisError
            Naive, irregular or duplicated index; ``X`` not covering ``y``'s hours.
        ForecastError
            Fewer than 48 observed hours, or the model failed to fit.
        """
        y = ensure_hourly_utc(y, name=f"{self.name}: y")
        if y.notna().sum() < 48:
            raise ForecastError(f"{self.name}: need at least 48 observed hours to fit, "
                                f"got {int(y.notna().sum())}")
        X = self._check_exog(X, y.index, "fit")
        try:
            self._fit(y, X)
        except (ForecastError, TimeAxisError):
            raise
        except Warning:  # a warning raised as an error (the tests' filter) is the fault itself
            raise
        except Exception as exc:  # a library failure becomes a ForecastError with context
            raise ForecastError(f"{self.name}: fit failed: {exc}") from exc
        self._y, self._X, self._fitted = y, X, True
        return self

    def predict(
        self,
        issued_at: pd.Timestamp | str,
        horizon_hours: int = 24,
        y: pd.Series | None = None,
        X: pd.DataFrame | None = None,
    ) -> pd.DataFrame:
        """Forecast ``horizon_hours`` hours starting at ``issued_at``.

        Parameters
        ----------
        issued_at
            Issue time (tz-aware, on the hour). Only observations strictly before it are used.
        horizon_hours
            Number of hourly values. [h]
        y
            Observed history to condition on (defaults to the fitted one). Anything at or after
            ``issued_at`` is dropped before the model sees it.
        X
            Exogenous inputs indexed by the hour they are for; must cover the horizon.

        Returns
        -------
        DataFrame
            Shape ``(horizon_hours, 5)``, index ``ts`` (UTC), columns ``mean, lo_80, hi_80,
            lo_95, hi_95``; ``attrs`` holds ``model`` and ``issued_at``.

        Raises
        ------
        NotFittedError
            Before :meth:`fit`.
        TimeAxisError
            Naive ``issued_at``, off-hour issue time, ``X`` not covering the horizon.
        """
        if not self._fitted:
            raise NotFittedError(f"{self.name}: call fit() before predict()")
        issued_at = require_aware(issued_at, "issued_at")
        if issued_at != issued_at.floor("h"):
            raise TimeAxisError(f"issued_at {issued_at.isoformat()} is not on the hour")
        history = self._y if y is None else ensure_hourly_utc(y, name=f"{self.name}: y")
        assert history is not None
        history = history[history.index < issued_at]
        if history.notna().sum() == 0:
            raise ForecastError(f"{self.name}: no observations before {issued_at.isoformat()}")
        horizon = hourly_slots(issued_at, horizon_hours).rename("ts")
        if X is None:
            X = self._X
        if self.requires_exog or X is not None:
            X = self._check_exog(X, horizon, "predict")
        out = self._predict(history, horizon, X)
        return self._finish(out, horizon, issued_at)

    @classmethod
    def get_test_params(cls) -> list[dict[str, Any]]:
        """Parameter sets for the shared conformance check (cheap, valid settings)."""
        return [{}]

    # --- to implement -------------------------------------------------------------------
    @abc.abstractmethod
    def _fit(self, y: pd.Series, X: pd.DataFrame | None) -> None:
        """Fit on validated ``y`` (hourly UTC, may hold NaN) and aligned ``X``."""

    @abc.abstractmethod
    def _predict(
        self, history: pd.Series, horizon: pd.DatetimeIndex, X: pd.DataFrame | None
    ) -> pd.DataFrame:
        """Return a frame on ``horizon`` with at least ``mean`` (intervals optional)."""

    # --- helpers --------------------------------------------------------------------------
    def _check_exog(
        self, X: pd.DataFrame | None, index: pd.DatetimeIndex, stage: str
    ) -> pd.DataFrame | None:
        if X is None:
            if self.requires_exog:
                raise ForecastError(f"{self.name}: exogenous inputs X are required ({stage})")
            return None
        filled = ensure_hourly_utc(X, name=f"{self.name}: X")  # validates; inserts NaN rows
        # coverage is judged on the rows X really has, before any gap filling
        present = X.index  # instants: check_covers compares them in any zone
        if stage == "predict":
            present = present[X.notna().all(axis=1).to_numpy()]
        check_covers(present, index, f"{self.name}: exogenous X ({stage})")
        return filled.reindex(index)

    def _finish(
        self, out: pd.DataFrame, horizon: pd.DatetimeIndex, issued_at: pd.Timestamp
    ) -> pd.DataFrame:
        if "mean" not in out:
            raise ForecastError(f"{self.name}: _predict returned no 'mean'")
        out = out.reindex(horizon)
        if out["mean"].isna().any():
            raise ForecastError(f"{self.name}: forecast has NaN at "
                                f"{out.index[out['mean'].isna()][0].isoformat()}")
        for col in COLUMNS[1:]:
            if col not in out:
                out[col] = out["mean"]
        # Order the bounds without moving the point forecast: sorting all five columns
        # together would relabel a quantile as the mean when every bound lies on one side.
        mean = out[["mean"]].to_numpy(float)
        lo = np.minimum(np.sort(out[["lo_95", "lo_80"]].to_numpy(float), axis=1), mean)
        hi = np.maximum(np.sort(out[["hi_80", "hi_95"]].to_numpy(float), axis=1), mean)
        vals = np.hstack([lo, mean, hi])
        res = pd.DataFrame(vals, index=horizon,
                           columns=["lo_95", "lo_80", "mean", "hi_80", "hi_95"])[list(COLUMNS)]
        res.index.name = "ts"
        res.attrs.update(model=self.name, issued_at=issued_at)
        return res


@dataclass
class EmpiricalIntervals:
    """Prediction intervals from held-out residual quantiles by lead hour (split conformal).

    ``fit(residuals)`` takes a frame of out-of-sample residuals (actual - forecast) with a
    ``lead`` column (0-based hours after issue) and a ``residual`` column; ``apply(mean)`` adds
    ``lo_80, hi_80, lo_95, hi_95`` around a point forecast whose row ``i`` has lead ``i``.
    Multiplicative mode (``relative=True``) scales residuals by the forecast, which suits
    carbon intensity whose errors grow with its level.
    """

    relative: bool = True
    quantiles: dict[int, dict[str, float]] | None = None

    def fit(self, residuals: pd.DataFrame) -> Self:
        """Learn the 2.5/10/90/97.5 % residual quantiles per lead hour."""
        if residuals.empty:
            raise ForecastError("EmpiricalIntervals: no residuals to calibrate on")
        col = "rel_residual" if self.relative else "residual"
        q: dict[int, dict[str, float]] = {}
        for lead, grp in residuals.groupby("lead"):
            r = grp[col].dropna().to_numpy(float)
            if len(r) == 0:
                continue
            q[int(lead)] = {k: float(np.quantile(r, p)) for k, p in
                            (("lo_95", 0.025), ("lo_80", 0.10), ("hi_80", 0.90),
                             ("hi_95", 0.975))}
        pooled = residuals[col].dropna().to_numpy(float)
        q[-1] = {k: float(np.quantile(pooled, p)) for k, p in
                 (("lo_95", 0.025), ("lo_80", 0.10), ("hi_80", 0.90), ("hi_95", 0.975))}
        self.quantiles = q
        return self

    def apply(self, mean: pd.Series) -> pd.DataFrame:
        """Intervals around ``mean`` (shape ``(h,)``), row ``i`` at lead ``i``."""
        if self.quantiles is None:
            raise NotFittedError("EmpiricalIntervals: call fit() first")
        out = pd.DataFrame({"mean": mean})
        m = mean.to_numpy(float)
        for name in ("lo_80", "hi_80", "lo_95", "hi_95"):
            qs = np.array([self.quantiles.get(i, self.quantiles[-1])[name]
                           for i in range(len(mean))])
            out[name] = m * (1.0 + qs) if self.relative else m + qs
        return out


def fit_with_fallback(
    model: Forecaster, fallback: Forecaster, y: pd.Series, X: pd.DataFrame | None = None
) -> tuple[Forecaster, str | None]:
    """Fit ``model``; if it fails, fit ``fallback`` and return a note saying so.

    Returns
    -------
    (Forecaster, str or None)
        The fitted forecaster and ``None``, or the fitted fallback and a sentence for the plan.
    """
    try:
        return model.fit(y, X), None
    except ForecastError as exc:
        fallback.fit(y, None if not fallback.requires_exog else X)
        return fallback, f"{model.name} failed ({exc}); used {fallback.name}"
