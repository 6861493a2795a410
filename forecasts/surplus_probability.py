"""Calibrated probability of a green-surplus hour (issue 35 item 5).

A plan that weighs surplus hours needs the *probability* that an hour has surplus (green-surplus
index > 0). Read from the index forecast's quantiles (the conformal bounds clipped at 0), it put
0.5-0.975 on hours that turned out dry, and its Brier score was 0.9-1.8 times *worse* than
seasonal naive's yes/no on the `global` sites (BENCHMARKS §8b). Here the probability is fitted
as an event forecast of its own, on the same rolling-origin validation window the index model
was chosen on (no look-ahead: every row is a forecast issued before the window's end for an
hour before it), from five candidates:

``seasonal-naive``
    yesterday's same hour was a surplus hour: 0 or 1 (the reference of the Brier skill);
``hour-climatology``
    the window's share of surplus hours at that UTC hour of day, ``(k + 1/2) / (n + 1)``
    (the Jeffreys prior's posterior mean, so an hour never seen wet is not given 0);
``naive-calibrated``
    seasonal naive's yes/no calibrated: the window's share of surplus hours among the hours
    naive said yes to, and among those it said no to, each ``(k + 1/2) / (n + 1)`` (the
    reliability of a binary forecast, Murphy & Winkler, *J. Roy. Stat. Soc. C* 26(1), 1977;
    two parameters, so it holds where a window has few surplus hours);
``logistic``
    logistic regression of the event on the index model's point forecast, whether it and
    naive forecast surplus, naive's index, two harmonics of the target's hour of day and the
    lead in days: logistic-regression model output statistics (Hamill, Whitaker & Wei,
    *Mon. Wea. Rev.* 132(6), 2004, doi:10.1175/1520-0493(2004)132<1434:ERIMFS>2.0.CO;2;
    Platt scaling), L2-regularised (scikit-learn, ``C`` = :data:`LOGISTIC_C`);
``calibrated-mean``
    the mean of the two calibrated probabilities, ``naive-calibrated`` and ``logistic``. Its
    Brier score is at most the mean of theirs (the score is convex in the probability), so it
    gains where a short window cannot tell two close candidates apart (forecast combination;
    Bates & Granger, *Oper. Res. Q.* 20(4), 1969).

Each is scored by its Brier score (Brier, *Mon. Wea. Rev.* 78(1), 1950) *out of sample*: the
window's issues are cut into two contiguous halves and each half is forecast by the candidate
fitted on the other (blocked cross-fitting, so the logistic model's in-sample fit cannot win by
itself). The lowest score is used (ties to the simpler, in the order above), refitted on the
whole window. When no calibrated model (``naive-calibrated``, ``logistic``, ``calibrated-mean``)
beats the references, the plan says which reference it used instead
(:attr:`SurplusProbability.note`); a window without a surplus hour (or with nothing but) gives
the climatology and no note: there was no event to forecast.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from carbonsched.errors import ForecastError

#: Index above which an hour is a surplus hour. [-]
SURPLUS_EPS = 1e-9
#: Inverse L2 regularisation of the logistic model (scikit-learn's default; the features are
#: standardised). [-]
LOGISTIC_C = 1.0
#: Candidates, simplest first (ties go to the earlier).
PROBABILITY_MODELS = ("seasonal-naive", "hour-climatology", "naive-calibrated", "logistic",
                      "calibrated-mean")
#: The references a calibrated model has to beat, as the plan's note names them when none does.
REFERENCES = {"seasonal-naive": "seasonal naive's yes/no",
              "hour-climatology": "the hour-of-day climatology"}


def surplus_features(mean: np.ndarray, naive: np.ndarray, hour: np.ndarray,
                     lead: np.ndarray) -> np.ndarray:
    """Features of the logistic model, shape ``(n, 9)``.

    Parameters
    ----------
    mean
        The index model's point forecast [-], shape ``(n,)``.
    naive
        Seasonal naive's index forecast [-], shape ``(n,)``.
    hour
        UTC hour of day of the target hour [h], shape ``(n,)``.
    lead
        Hours after the issue [h], shape ``(n,)``.
    """
    w = 2 * np.pi * np.asarray(hour, float) / 24.0
    return np.column_stack([mean, mean > SURPLUS_EPS, naive, naive > SURPLUS_EPS,
                            np.sin(w), np.cos(w), np.sin(2 * w), np.cos(2 * w),
                            np.asarray(lead, float) / 24.0]).astype(float)


def _naive_calibration(event: np.ndarray, naive_yes: np.ndarray) -> np.ndarray:
    """Jeffreys-smoothed surplus share when naive says no and yes, shape ``(2,)``."""
    yes = naive_yes.astype(bool)
    return np.array([(event[~yes].sum() + 0.5) / ((~yes).sum() + 1.0),
                     (event[yes].sum() + 0.5) / (yes.sum() + 1.0)])


def _climatology(event: np.ndarray, hour: np.ndarray) -> np.ndarray:
    """Jeffreys-smoothed surplus share per UTC hour of day, shape ``(24,)``."""
    k = np.bincount(hour, weights=event, minlength=24)
    n = np.bincount(hour, minlength=24)
    return (k + 0.5) / (n + 1.0)


@dataclass
class SurplusProbability:
    """The chosen probability-of-surplus model of one site and refit period (module doc).

    Attributes
    ----------
    model
        One of :data:`PROBABILITY_MODELS`.
    brier
        Cross-fitted validation Brier score per candidate [-] (empty without events).
    hours, surplus_hours
        Validation hours scored and those with surplus.
    """

    model: str = "hour-climatology"
    brier: dict[str, float] = field(default_factory=dict)
    hours: int = 0
    surplus_hours: int = 0
    _clim: np.ndarray = field(default_factory=lambda: np.full(24, 0.5))
    _naive_p: np.ndarray = field(default_factory=lambda: np.full(2, 0.5))
    _lr: Any = None

    @classmethod
    def fit(cls, mean: np.ndarray, naive: np.ndarray, actual: np.ndarray, hour: np.ndarray,
            lead: np.ndarray, issue: np.ndarray) -> SurplusProbability:
        """Choose and fit the probability on a validation window's forecasts.

        Parameters
        ----------
        mean, naive, actual
            The index model's and seasonal naive's forecasts and the actual index [-], each
            ``(n,)``; rows with a non-finite value are left out.
        hour
            UTC hour of day of each target hour [h], integers 0..23, ``(n,)``.
        lead
            Lead [h], ``(n,)``.
        issue
            Position of each row's issue in the window (orders the two folds), ``(n,)``.

        Raises
        ------
        ForecastError
            Shapes differ, or an hour outside 0..23.
        """
        arrs = [np.asarray(a) for a in (mean, naive, actual, hour, lead, issue)]
        if len({a.shape for a in arrs}) != 1 or arrs[0].ndim != 1:
            raise ForecastError("SurplusProbability.fit: mean, naive, actual, hour, lead and "
                                f"issue must be 1-D of one length, got {[a.shape for a in arrs]}")
        mean, naive, actual, hour, lead, issue = arrs
        ok = np.isfinite(mean) & np.isfinite(naive) & np.isfinite(actual)
        mean, naive, actual, lead, issue = (a[ok].astype(float) for a in
                                            (mean, naive, actual, lead, issue))
        hour = hour[ok].astype(int)
        if ((hour < 0) | (hour > 23)).any():
            raise ForecastError("SurplusProbability.fit: hour of day outside 0..23")
        event = (actual > SURPLUS_EPS).astype(float)
        out = cls(hours=int(event.size), surplus_hours=int(event.sum()))
        out._clim = _climatology(event, hour) if event.size else np.full(24, 0.5)
        if event.size == 0 or event.min() == event.max():
            return out  # nothing to forecast: the (smoothed) climatology
        X = surplus_features(mean, naive, hour, lead)
        cut = np.median(np.unique(issue))
        oof = {m: np.full(event.size, np.nan) for m in PROBABILITY_MODELS}
        for test in (issue < cut, issue >= cut):
            train = ~test
            if not test.any() or not train.any():
                continue
            oof["seasonal-naive"][test] = X[test, 3]
            clim = _climatology(event[train], hour[train])
            oof["hour-climatology"][test] = clim[hour[test]]
            oof["naive-calibrated"][test] = _naive_calibration(
                event[train], X[train, 3])[X[test, 3].astype(int)]
            oof["logistic"][test] = (_logistic(X[train], event[train]).predict_proba(X[test])[:, 1]
                                     if event[train].min() < event[train].max()
                                     else clim[hour[test]])
            oof["calibrated-mean"][test] = 0.5 * (oof["logistic"][test]
                                                  + oof["naive-calibrated"][test])
        if not all(np.isfinite(p).all() for p in oof.values()):
            return out   # one issue in the window: no two folds to score on, the climatology
        out.brier = {m: float(np.mean((p - event) ** 2)) for m, p in oof.items()}
        out.model = min(PROBABILITY_MODELS, key=lambda m: (out.brier[m],
                                                           PROBABILITY_MODELS.index(m)))
        if out.model in ("logistic", "calibrated-mean"):
            out._lr = _logistic(X, event)
        out._naive_p = _naive_calibration(event, X[:, 3])
        return out

    def predict(self, mean: np.ndarray, naive: np.ndarray, hour: np.ndarray,
                lead: np.ndarray) -> np.ndarray:
        """Probability that each hour is a surplus hour [-], shape ``(n,)``, in [0, 1].

        Parameters are as :meth:`fit`'s (forecasts for the hours to come).
        """
        hour = np.asarray(hour, int)
        yes = (np.asarray(naive, float) > SURPLUS_EPS).astype(int)
        if self.model == "seasonal-naive":
            return yes.astype(float)
        if self.model == "naive-calibrated":
            return self._naive_p[yes]
        if self.model in ("logistic", "calibrated-mean") and self._lr is not None:
            X = surplus_features(np.asarray(mean, float), np.asarray(naive, float), hour, lead)
            p = self._lr.predict_proba(X)[:, 1]
            return p if self.model == "logistic" else 0.5 * (p + self._naive_p[yes])
        return self._clim[hour]

    @property
    def note(self) -> str | None:
        """Why the plan's surplus probability is not the calibrated model's, or ``None``."""
        if self.model not in REFERENCES or not self.brier:
            return None
        used = REFERENCES[self.model]
        return (f"surplus-hour probability fallback: no calibrated model beat {used} on "
                f"validation (Brier: logistic {self.brier['logistic']:.4f}, naive calibrated "
                f"{self.brier['naive-calibrated']:.4f}, their mean "
                f"{self.brier['calibrated-mean']:.4f}, {used} {self.brier[self.model]:.4f}; "
                f"{self.surplus_hours} surplus hours of {self.hours}); used {used}")

    def describe(self) -> dict[str, Any]:
        """``model``, ``validation_brier`` (candidate -> Brier), ``hours``, ``surplus_hours``."""
        return {"model": self.model,
                "validation_brier": {k: round(v, 6) for k, v in self.brier.items()},
                "hours": self.hours, "surplus_hours": self.surplus_hours}


def _logistic(X: np.ndarray, event: np.ndarray) -> Any:
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), LogisticRegression(C=LOGISTIC_C, max_iter=1000)
                         ).fit(X, event.astype(int))


__all__ = ["LOGISTIC_C", "PROBABILITY_MODELS", "REFERENCES", "SURPLUS_EPS",
           "SurplusProbability", "surplus_features"]
