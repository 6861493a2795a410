"""Local-clock views of an hourly UTC series, for seasonal lags that follow people's clocks.

A grid's load, and so much of its carbon intensity, follows the clock on the wall: the evening
peak stays at 19:00 *local* across a daylight-saving change, i.e. it moves by one hour in UTC.
A seasonal lag of 24 UTC hours then puts tomorrow's peak one hour off for a day (a week for a
168 h lag). Forecasters that take a ``tz`` therefore work on the series re-indexed by local
wall-clock hours (:func:`to_local_clock`): position ``i`` is local hour ``i``, so "the same hour
yesterday" is the same wall-clock hour, 23 or 25 UTC hours back across a change.

Rules: a wall-clock hour skipped at the spring change has no value (NaN: the forecasters fill it
like any missing hour); the wall-clock hour repeated at the autumn change keeps its first (summer
time) occurrence; forecast hours are mapped back by their own wall-clock time
(:func:`local_wall_hours`), so both UTC hours of a repeated wall hour get its forecast.
"""

from __future__ import annotations

import pandas as pd

from carbonsched.errors import TimeAxisError


def local_wall_hours(index: pd.DatetimeIndex, tz: str) -> pd.DatetimeIndex:
    """Naive local wall-clock time of each (tz-aware) instant in ``index``.

    Raises
    ------
    TimeAxisError
        ``index`` is naive.
    """
    if index.tz is None:
        raise TimeAxisError("local_wall_hours: index is naive; give tz-aware UTC instants")
    return index.tz_convert(tz).tz_localize(None)


def to_local_clock(y: pd.Series, tz: str) -> pd.Series:
    """Re-index a tz-aware hourly series by contiguous naive local wall-clock hours.

    Parameters
    ----------
    y
        Hourly series on tz-aware instants, shape ``(n,)``.
    tz
        IANA zone of the clock, e.g. ``"Europe/Berlin"``.

    Returns
    -------
    Series
        Indexed by every wall-clock hour from the first to the last instant's (``n - 1`` hours
        across a spring change with the skipped hour NaN, ``n - 1`` across an autumn change with
        the repeated hour's first value).
    """
    wall = local_wall_hours(y.index, tz)
    s = pd.Series(y.to_numpy(), index=wall, name=y.name)
    s = s[~s.index.duplicated(keep="first")]
    full = pd.date_range(wall.min(), wall.max(), freq="h")
    return s.reindex(full)
