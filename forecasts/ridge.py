"""A per-hour ridge regression on lagged values and calendar terms, fitted for one issue hour.

:class:`HourlyRidge` forecasts the value ``k`` hours after an issue time ``T`` (issued every day
at the same UTC hour ``issue_hour``) with one ridge regression per lead ``k``; since the issue
hour is fixed, each lead is one hour of the day, so this is a per-hour model (the direct
multi-horizon strategy: Ben Taieb et al., *Expert Systems with Applications* 39(8), 2012,
doi:10.1016/j.eswa.2012.01.039). Features of the target hour ``t = T + k``, all known at ``T``
(``m = k // 24 + 1``, the first whole day back that is observed):

==============  ==============================================================================
feature         definition
==============  ==============================================================================
``lag_d{j}``    ``y[t - 24·(m + j)]``, ``j = 0..6``: the same hour on the 7 latest observed days
``last``        ``y[T - 1 h]`` (the newest observation)
``mean24``      mean of the 24 hours before ``T`` (the level)
``dow_*``       day of the week of ``t`` (six indicators, Monday the base)
``doy_sin/cos`` first annual harmonic of the day of the year of ``t``
==============  ==============================================================================

The lags of one to seven days follow the day-ahead carbon-intensity literature's use of the
previous day and week (Maji et al., DACF, ACM e-Energy 2022, doi:10.1145/3538637.3538849).
Regularisation: ``sklearn.linear_model.Ridge`` on standardised features with the penalty
:data:`ALPHA` fixed in advance (not tuned per site or period). Gaps in the history are filled
for the features only (:func:`carbonsched.forecasts.carbon_intensity.fill_for_features`); rows
whose target is missing are left out of the fit.

A model fitted for one issue hour refuses to forecast from another (its leads would be other
hours of the day): :class:`carbonsched.forecasts.registry.SelectedForecaster` fits one per issue
hour. Point forecasts only, with the empirical relative residuals of the fit's last
``calib_fraction`` of issues as intervals (the registry calibrates its own).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from carbonsched.errors import ForecastError
from carbonsched.forecasts.base import Forecaster
from carbonsched.forecasts.carbon_intensity import fill_for_features

HOUR = pd.Timedelta(hours=1)
DAY = pd.Timedelta(days=1)
#: Ridge penalty on standardised features [-], fixed in advance: with ~365 daily samples and 17
#: features it shrinks little (the lags are strongly collinear, which is what it is for).
ALPHA = 10.0
#: Days of same-hour lags. [d]
LAG_DAYS = 7
FEATURES = (*(f"lag_d{j}" for j in range(LAG_DAYS)), "last", "mean24",
            *(f"dow_{d}" for d in range(1, 7)), "doy_sin", "doy_cos")


def ridge_features(filled: np.ndarray, issue_pos: np.ndarray, lead: int,
                   target_times: pd.DatetimeIndex) -> np.ndarray:
    """Feature matrix of :data:`FEATURES` for issues at ``issue_pos`` and one ``lead``.

    Parameters
    ----------
    filled
        Gap-filled hourly values, shape ``(n,)``; position ``i`` is hour ``i`` (UTC).
    issue_pos
        Positions of the issue times, shape ``(r,)``; only ``filled[:i]`` is read for issue
        position ``i``.
    lead
        Hours after the issue time (0-based). [h]
    target_times
        UTC times of the target hours, shape ``(r,)`` (the calendar terms).

    Returns
    -------
    ndarray
        Shape ``(r, len(FEATURES))``; NaN where a lag falls before the start of ``filled``.
    """
    n = len(filled)
    pad = np.concatenate([np.full(1, np.nan), filled])

    def at(pos: np.ndarray) -> np.ndarray:
        p = np.where((pos >= 0) & (pos < n), pos, -1)
        return pad[p + 1]

    t = issue_pos + lead
    m = lead // 24 + 1
    lags = [at(t - 24 * (m + j)) for j in range(LAG_DAYS)]
    last = at(issue_pos - 1)
    win = np.stack([at(issue_pos - j) for j in range(1, 25)], axis=1)
    seen = ~np.isnan(win)
    n_seen = seen.sum(axis=1)
    # the mean of the observed hours; NaN where none was (np.nanmean's value, without its
    # "Mean of empty slice" warning for issues at the start of the history)
    mean24 = np.where(seen, win, 0.0).sum(axis=1) / np.where(n_seen > 0, n_seen, 1)
    mean24[n_seen == 0] = np.nan
    dow = target_times.day_of_week.to_numpy()
    doy = 2 * np.pi * target_times.day_of_year.to_numpy(float) / 365.25
    cols = [*lags, last, mean24, *((dow == d).astype(float) for d in range(1, 7)),
            np.sin(doy), np.cos(doy)]
    return np.column_stack(cols)


Coefficients = tuple[np.ndarray, np.ndarray, np.ndarray, float]
"""One lead's fitted ridge: feature means, scales, coefficients (standardised) and intercept."""


def fit_ridge(F: np.ndarray, y: np.ndarray, alpha: float) -> Coefficients:
    """Ridge regression of ``y`` on standardised ``F``, as plain arrays.

    Parameters
    ----------
    F
        Features, shape ``(r, p)``, all finite.
    y
        Targets, shape ``(r,)``, in the signal's unit.
    alpha
        Penalty on the standardised features [-].

    Returns
    -------
    tuple
        ``(mean, scale, coef, intercept)`` of shapes ``(p,)``, ``(p,)``, ``(p,)`` and a float;
        a constant feature's scale is 1 (``sklearn``'s ``StandardScaler`` convention).
    """
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    mdl = make_pipeline(StandardScaler(), Ridge(alpha=alpha))
    mdl.fit(F, y)
    sc, rg = mdl[0], mdl[1]
    return (sc.mean_, np.where(sc.scale_ > 0, sc.scale_, 1.0), rg.coef_, float(rg.intercept_))


def apply_ridge(coefs: Coefficients, F: np.ndarray) -> np.ndarray:
    """Predictions of a :func:`fit_ridge` fit on ``F`` ``(r, p)``: shape ``(r,)``."""
    mu, sd, coef, b = coefs
    return ((F - mu) / sd) @ coef + b


def backcast_inputs(y: pd.Series, issues: pd.DatetimeIndex) -> tuple[np.ndarray, np.ndarray]:
    """Gap-filled history up to the last issue and each issue's position in it.

    The filling reads only earlier hours (same hour on earlier days, then the last value), so
    one pass serves every issue: issue ``i`` reads positions before its own.

    Returns
    -------
    (ndarray, ndarray)
        ``filled`` of shape ``(n,)`` (hour ``i`` after ``y``'s first) and ``pos`` of shape
        ``(len(issues),)``.
    """
    src = y.reindex(pd.date_range(y.index[0], issues[-1] - HOUR, freq="h"))
    filled = fill_for_features(src).to_numpy(float)
    return filled, ((issues - src.index[0]) // HOUR).to_numpy(np.int64)


@dataclass(frozen=True)
class TrainingIssues:
    """The daily training issues of a per-hour ridge fit (:meth:`HourlyRidge._training_issues`).

    Attributes
    ----------
    filled
        Gap-filled history for the features, shape ``(n,)``.
    target
        The history itself (NaN kept), shape ``(n,)``.
    issues
        Issue times, one a day at the model's issue hour (UTC).
    pos
        Position of each issue in ``filled``, shape ``(len(issues),)``.
    """

    filled: np.ndarray
    target: np.ndarray
    issues: pd.DatetimeIndex
    pos: np.ndarray

    def target_at(self, lead: int) -> np.ndarray:
        """Observed value ``lead`` hours after each issue, NaN past the history's end."""
        tp = self.pos + lead
        n = len(self.target)
        return np.where(tp < n, self.target[np.minimum(tp, n - 1)], np.nan)


class HourlyRidge(Forecaster):
    """Per-hour ridge regression for issues at one UTC hour (module docstring).

    Parameters
    ----------
    issue_hour
        UTC hour of day of the issue times it is fitted for and serves. [h] Default 0.
    max_lead_hours
        Leads with their own coefficients [h] (later leads reuse those of the last lead at the
        same hour of the day). Default 96.
    train_days
        Days of history (before the fit end) whose issues are training samples. [d] Default 365.
    alpha
        Ridge penalty on standardised features [-]. Default :data:`ALPHA`.
    clip
        ``(low, high)`` bounds of every output column. Default ``(0, inf)``.
    """

    name = "ridge_hourly"

    def __init__(self, issue_hour: int = 0, max_lead_hours: int = 96, train_days: int = 365,
                 alpha: float = ALPHA, clip: tuple[float, float] = (0.0, float("inf"))) -> None:
        if not 0 <= int(issue_hour) <= 23:
            raise ForecastError(f"{self.name}: issue_hour must be 0..23 (UTC), got {issue_hour}")
        if max_lead_hours < 24 or max_lead_hours % 24:
            raise ForecastError(f"{self.name}: max_lead_hours must be a positive multiple of "
                                f"24, got {max_lead_hours}")
        if not alpha > 0:
            raise ForecastError(f"{self.name}: alpha must be > 0, got {alpha}")
        super().__init__(issue_hour=issue_hour, max_lead_hours=max_lead_hours,
                         train_days=train_days, alpha=alpha, clip=clip)
        self.issue_hour = int(issue_hour)
        self.max_lead_hours = int(max_lead_hours)
        self.train_days = int(train_days)
        self.alpha = float(alpha)
        self.clip = clip
        self.models_: list[Coefficients] = []
        self.rel_q_: np.ndarray | None = None

    @classmethod
    def get_test_params(cls) -> list[dict[str, Any]]:
        """The default and a short-history setting."""
        return [{}, {"train_days": 30, "max_lead_hours": 48}]

    def _coef_lead(self, k: int) -> int:
        if k < self.max_lead_hours:
            return k
        return k - 24 * ((k - self.max_lead_hours) // 24 + 1)

    def _check_issue(self, t: pd.Timestamp) -> None:
        if t.hour != self.issue_hour or t.minute or t.second:
            raise ForecastError(
                f"{self.name}: fitted for issues at {self.issue_hour:02d}:00 UTC, asked to "
                f"forecast from {t.isoformat()}; fit one for that issue hour (the leads of a "
                "per-hour model are hours of the day)")

    def _training_issues(self, y: pd.Series) -> TrainingIssues:
        """The training issues of a fit on ``y`` (the one preamble of every ridge's fit)."""
        end = y.index[-1] + HOUR
        y = y[y.index >= end - (self.train_days + LAG_DAYS + 1) * DAY]
        first = y.index[0].floor("D") + (LAG_DAYS + 1) * DAY + self.issue_hour * HOUR
        issues = pd.date_range(first, end - HOUR, freq="D")
        return TrainingIssues(fill_for_features(y).to_numpy(float), y.to_numpy(float), issues,
                              ((issues - y.index[0]) // HOUR).to_numpy(np.int64))

    def _fit(self, y: pd.Series, X: pd.DataFrame | None) -> None:
        tr = self._training_issues(y)
        filled, issues, pos = tr.filled, tr.issues, tr.pos
        if len(issues) < 3 * len(FEATURES):
            raise ForecastError(f"{self.name}: {len(issues)} issue days of history after the "
                                f"{LAG_DAYS + 1} days of lags; at least {3 * len(FEATURES)} "
                                "needed")
        self.models_ = []
        rel = []
        n_cal = max(1, len(issues) // 5)
        for k in range(self.max_lead_hours):
            F = ridge_features(filled, pos, k, issues + k * HOUR)
            yk = tr.target_at(k)
            ok = np.isfinite(yk) & np.isfinite(F).all(axis=1)
            if ok.sum() < 2 * len(FEATURES):
                raise ForecastError(f"{self.name}: lead {k} h has {int(ok.sum())} complete "
                                    f"training rows; at least {2 * len(FEATURES)} needed")
            coefs = fit_ridge(F[ok], yk[ok], self.alpha)
            self.models_.append(coefs)
            cal = ok.copy()
            cal[:-n_cal] = False
            if cal.any():
                p = apply_ridge(coefs, F[cal])  # in-sample: rough; the registry recalibrates
                with np.errstate(divide="ignore", invalid="ignore"):
                    rel.append(np.where(np.abs(p) > 1e-9, yk[cal] / p - 1.0, np.nan))
        r = np.concatenate(rel) if rel else np.zeros(1)
        r = r[np.isfinite(r)]
        self.rel_q_ = np.quantile(r if r.size else np.zeros(1), [0.025, 0.10, 0.90, 0.975])

    def backcast(self, y: pd.Series, issues: pd.DatetimeIndex, horizon_hours: int) -> np.ndarray:
        """Point forecasts ``(len(issues), horizon_hours)`` from ``y`` strictly before each issue.

        Raises
        ------
        ForecastError
            Not fitted, or an issue time not at the fitted ``issue_hour``.
        """
        if not self.models_:
            raise ForecastError(f"{self.name}: call fit() before backcast()")
        for t in issues:
            self._check_issue(t)
        filled, pos = backcast_inputs(y, issues)
        out = np.full((len(issues), horizon_hours), np.nan)
        for k in range(horizon_hours):
            F = ridge_features(filled, pos, k, issues + k * HOUR)
            out[:, k] = apply_ridge(self.models_[self._coef_lead(k)], F)
        if self.clip is not None:
            out = np.clip(out, *self.clip)
        return out

    def _predict(self, history: pd.Series, horizon: pd.DatetimeIndex,
                 X: pd.DataFrame | None) -> pd.DataFrame:
        t = horizon[0]
        self._check_issue(t)
        mean = self.backcast(history, pd.DatetimeIndex([t]), len(horizon))[0]
        if not np.isfinite(mean).all():
            raise ForecastError(f"{self.name}: the history before {t.isoformat()} lacks the "
                                f"{LAG_DAYS} days of lags a forecast needs")
        assert self.rel_q_ is not None
        q = self.rel_q_
        out = pd.DataFrame({"mean": mean, "lo_95": mean * (1 + q[0]), "lo_80": mean * (1 + q[1]),
                            "hi_80": mean * (1 + q[2]), "hi_95": mean * (1 + q[3])},
                           index=horizon)
        return out.clip(*self.clip) if self.clip is not None else out


#: Least share of a lead's training issues, from the first that has an exogenous feature
#: (published by the issue time) on, that must have it for the lead's model to use it. [-]
MIN_EXOG_SHARE = 0.9
#: Least number of a lead's training issues with an exogenous feature for the lead's model to
#: use it: eight weeks of daily issues, the per-lead OLS's training window
#: (:class:`carbonsched.forecasts.carbon_intensity.LeadRegression`). [issues]
MIN_EXOG_ISSUES = 56


def _enough_exog(have: np.ndarray) -> bool:
    """Whether a lead's training issues (in time order) have an exogenous feature often enough.

    ``have``: shape ``(n,)``, whether each issue had the feature. From the first issue that had
    it on, at least :data:`MIN_EXOG_SHARE` of the issues and at least :data:`MIN_EXOG_ISSUES`.
    """
    hits = np.flatnonzero(have)
    if len(hits) < MIN_EXOG_ISSUES:
        return False
    return bool(have[hits[0]:].mean() >= MIN_EXOG_SHARE)


class HourlyRidgeExog(HourlyRidge):
    """:class:`HourlyRidge` plus exogenous forecasts of the target hour (issue 35 item 3).

    At lead ``k`` the features are :data:`FEATURES` plus, for each of ``exog_features``, the
    latest value for the target hour ``T + k`` published at or before the issue time ``T``
    (:func:`carbonsched.forecasts.exogenous.known_at`; nothing later is read). A feature enters a
    lead's regression only if at least :data:`MIN_EXOG_SHARE` of its training issues from the
    first that had it on had it, and at least :data:`MIN_EXOG_ISSUES` did (a forecast published
    12 h ahead never enters leads beyond 12 h at 00:00 issues; a source that began half a year
    into the training window enters from its first months on); the lead's regression is fitted
    on the issues that have all its features. Each lead also keeps the plain ridge; an issue
    missing an exogenous value its lead uses is forecast by it, counted in
    :attr:`exog_fallbacks_` (the plan names the count).

    Parameters
    ----------
    exog
        The exogenous table (:mod:`carbonsched.forecasts.exogenous`) known at the fit, for
        training; :meth:`backcast` takes a newer one.
    exog_features
        Features to read (:data:`carbonsched.forecasts.exogenous.FEATURES`).
    **kwargs
        As :class:`HourlyRidge`.
    """

    name = "ridge_hourly_exog"

    def __init__(self, exog: pd.DataFrame | None = None, exog_features: tuple[str, ...] = (),
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.params.update(exog_features=tuple(exog_features))
        self.exog = exog
        self.exog_features = tuple(exog_features)
        self.lead_exog_: list[tuple[tuple[str, ...], Coefficients | None]] = []
        self.exog_fallbacks_ = 0

    @classmethod
    def get_test_params(cls) -> list[dict[str, Any]]:
        """Without exogenous features (the conformance data has none): the plain ridge."""
        return [{"train_days": 30, "max_lead_hours": 24}]

    def _exog_cube(self, table: pd.DataFrame | None, issues: pd.DatetimeIndex, H: int,
                   feats: tuple[str, ...]) -> np.ndarray:
        """Exogenous values known at each issue, shape ``(len(issues), H, len(feats))``."""
        from carbonsched.forecasts.exogenous import known_at

        out = np.full((len(issues), H, len(feats)), np.nan)
        if table is None or not feats:
            return out
        rep = issues.repeat(H)
        leads = np.tile(np.arange(H), len(issues))
        for j, f in enumerate(feats):
            out[:, :, j] = known_at(table, f, rep, leads).reshape(len(issues), H)
        return out

    def _fit(self, y: pd.Series, X: pd.DataFrame | None) -> None:
        super()._fit(y, X)
        tr = self._training_issues(y)
        self.lead_exog_ = []
        cube = self._exog_cube(self.exog, tr.issues, self.max_lead_hours, self.exog_features)
        for k in range(self.max_lead_hours):
            F = ridge_features(tr.filled, tr.pos, k, tr.issues + k * HOUR)
            E = cube[:, k, :]
            yk = tr.target_at(k)
            base = np.isfinite(yk) & np.isfinite(F).all(axis=1)
            incl = tuple(f for j, f in enumerate(self.exog_features)
                         if _enough_exog(np.isfinite(E[base, j])))
            if not incl:
                self.lead_exog_.append(((), None))
                continue
            cols = [self.exog_features.index(f) for f in incl]
            G = np.hstack([F, E[:, cols]])
            ok = base & np.isfinite(G).all(axis=1)
            if ok.sum() < 2 * G.shape[1]:
                self.lead_exog_.append(((), None))
                continue
            self.lead_exog_.append((incl, fit_ridge(G[ok], yk[ok], self.alpha)))

    def used_features(self) -> tuple[str, ...]:
        """Exogenous features some lead's regression uses (fitted)."""
        return tuple(f for f in self.exog_features
                     if any(f in incl for incl, _ in self.lead_exog_))

    def backcast(self, y: pd.Series, issues: pd.DatetimeIndex, horizon_hours: int,
                 exog: pd.DataFrame | None = None) -> np.ndarray:
        """As :meth:`HourlyRidge.backcast`, with the exogenous values known at each issue.

        Parameters
        ----------
        exog
            The exogenous table to read (default: the one given at construction); only values
            published at or before each issue are read.
        """
        out = super().backcast(y, issues, horizon_hours)
        table = exog if exog is not None else self.exog
        filled, pos = backcast_inputs(y, issues)
        self.exog_fallbacks_ = 0
        cube = self._exog_cube(table, issues, horizon_hours, self.exog_features)
        for k in range(horizon_hours):
            incl, coefs = self.lead_exog_[self._coef_lead(k)] if self.lead_exog_ else ((), None)
            if coefs is None:
                continue
            F = ridge_features(filled, pos, k, issues + k * HOUR)
            cols = [self.exog_features.index(f) for f in incl]
            G = np.hstack([F, cube[:, k, cols]])
            ok = np.isfinite(G).all(axis=1)
            self.exog_fallbacks_ += int((~ok).sum())
            p = apply_ridge(coefs, G[ok])
            out[ok, k] = np.clip(p, *self.clip) if self.clip is not None else p
        return out


__all__ = ["ALPHA", "FEATURES", "MIN_EXOG_SHARE", "Coefficients", "HourlyRidge",
           "HourlyRidgeExog", "TrainingIssues", "apply_ridge", "backcast_inputs", "fit_ridge",
           "ridge_features"]
