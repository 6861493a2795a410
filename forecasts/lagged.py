"""The time-lagged ensemble: a rolling run's carbon intensity from the day's issues before it.

A rolling run every ``e`` hours re-plans each pending job on a fresh forecast. Each issue hour
has its own model choice (:mod:`carbonsched.forecasts.registry`: the per-hour models are
fitted for the hour they serve), so four 6-hourly issues make four forecasts of the same target
hours from four models, and the plan moved with every revision. Measured on the PAI jobs of the
zone-month replays (BENCHMARKS 7b), a run every 6 h kept less of the oracle's reduction than a
run every 24 h, and the loss came from the forecasts alone: planned every 6 h on the 00:00 UTC
issue held for the day, the plans matched or beat the daily ones, while the forecasts issued at
06:00 and 12:00 UTC, held the same way, lost up to a quarter of the oracle's reduction.

The ensemble averages, target hour by target hour, the forecasts issued at ``t``, ``t − s``,
``t − 2s``, ... over the day before the run (``s = max(run every, 6 h)``, so at most four
members, one per 6-hour issue hour; a daily run has one member and is unchanged). Each member is
the forecast the model chosen for its own issue time makes from the history before that time
(never later data); a target hour takes the mean of the members whose horizon reaches it.
This is lagged average forecasting (Hoffman & Kalnay, "Lagged average forecasting, an
alternative to Monte Carlo forecasting", *Tellus A* 35(2), 1983, pp. 100-118): older issues are
staler but their errors are partly independent of the newest one's, so the mean has a smaller
error variance and the ranking of hours the plan acts on moves less between runs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from carbonsched.errors import ForecastError

HOUR = pd.Timedelta(hours=1)

#: Shortest spacing of the ensemble's issue times [h]: one member per 6-hour issue hour.
LAG_STEP_MIN_HOURS = 6
#: The span of issues averaged: the day before the run, every issue hour once. [h]
LAG_SPAN_HOURS = 24

#: Columns scaled with the point forecast (relative intervals, as the carbon-intensity model's).
INTERVAL_COLUMNS = ("lo_80", "hi_80", "lo_95", "hi_95")


def lagged_issue_times(issued_at: pd.Timestamp, run_every_hours: int | None
                       ) -> pd.DatetimeIndex:
    """Issue times of the time-lagged ensemble of a run at ``issued_at``, newest first.

    Parameters
    ----------
    issued_at
        The run's issue time (tz-aware UTC, on the hour).
    run_every_hours
        The rolling cadence [h] (a divisor of 24); ``None``: a single issue (no ensemble).

    Returns
    -------
    DatetimeIndex
        ``issued_at − k·s`` for ``k = 0, 1, ...`` while ``k·s < 24 h``, with
        ``s = max(run_every_hours, 6)``: one member at a daily cadence, two at 12 h, three at
        8 h, four at 6 h and below.

    Raises
    ------
    ForecastError
        A cadence that is not a whole number of hours in 1..24.
    """
    t = pd.Timestamp(issued_at)
    if run_every_hours is None:
        return pd.DatetimeIndex([t])
    if not (isinstance(run_every_hours, int | np.integer) and 1 <= run_every_hours <= 24):
        raise ForecastError(f"lagged ensemble: run_every_hours must be a whole number of hours "
                            f"in 1..24, got {run_every_hours!r}")
    step = max(int(run_every_hours), LAG_STEP_MIN_HOURS)
    n = -(-LAG_SPAN_HOURS // step)
    return pd.DatetimeIndex([t - k * step * HOUR for k in range(n)])


def lagged_mean(members: Sequence[pd.DataFrame], slots: pd.DatetimeIndex) -> pd.DataFrame:
    """Combine member forecasts into the ensemble's forecast on ``slots``.

    Parameters
    ----------
    members
        Forecast frames (contract columns ``mean``, ``lo_80``, ``hi_80``, ``lo_95``,
        ``hi_95``; index the target hours), the newest issue first; its horizon must cover
        ``slots``.
    slots
        The run's target hours, shape ``(H,)``.

    Returns
    -------
    DataFrame
        Shape ``(H, 5)`` on ``slots``: ``mean`` is the mean over the members that forecast each
        hour (the newest always does); the interval columns are the newest member's, scaled by
        ``mean / newest mean`` (its relative intervals kept around the ensemble's mean; where the
        newest mean is 0 they are its own). ``attrs`` are the newest member's, with
        ``lagged_members`` (members per slot, ``(H,)`` int).

    Raises
    ------
    ForecastError
        No member, or the newest does not cover ``slots``.
    """
    if not members:
        raise ForecastError("lagged ensemble: no member forecast to combine")
    newest = members[0].reindex(slots)
    if newest["mean"].isna().any():
        raise ForecastError(f"lagged ensemble: the newest forecast does not cover the run's "
                            f"{len(slots)} hours from {slots[0].isoformat()}")
    means = np.column_stack([m["mean"].reindex(slots).to_numpy(float) for m in members])
    count = np.isfinite(means).sum(axis=1)
    mean = np.nanmean(means, axis=1)
    base = newest["mean"].to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(base > 0, mean / base, 1.0)
    out = newest.copy()
    out["mean"] = mean
    for c in INTERVAL_COLUMNS:
        if c in out:
            out[c] = np.where(base > 0, out[c].to_numpy(float) * scale, out[c].to_numpy(float))
    out.attrs = dict(members[0].attrs)
    out.attrs["lagged_members"] = count.astype(int)
    return out
