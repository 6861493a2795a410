"""The time axis: tz-aware UTC, hourly, each timestamp labelling the *start* of its interval.

Every series that enters a forecaster or the planner passes through :func:`ensure_hourly_utc`.
Local time appears only at the edges (a site's clock, Slurm's ``--begin``, what a person reads).

Rules (stated once, used everywhere):

* naive timestamps are refused (:class:`~carbonsched.errors.TimeAxisError`), as in pvlib
  ("times must be localized");
* timestamps not on the hour are refused;
* duplicated timestamps are refused by default; ``duplicates="mean"`` averages them, ``"first"``
  keeps the first (used by readers whose provider documents repeated hours);
* missing hours are inserted as NaN (never 0, never -1) so that nothing is silently shifted;
* an unsorted index is sorted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import date, datetime
from typing import Literal

import pandas as pd

from carbonsched.errors import TimeAxisError

HOUR = pd.Timedelta(hours=1)

_ISO_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")

DuplicateRule = Literal["refuse", "mean", "first"]


def require_aware(ts: pd.Timestamp | datetime | str, what: str = "timestamp") -> pd.Timestamp:
    """Return ``ts`` as a UTC :class:`pandas.Timestamp`, refusing naive input.

    Parameters
    ----------
    ts
        A tz-aware timestamp, or an ISO 8601 string with an offset (``Z`` or ``+08:00``).
    what
        Name used in the error message.

    Raises
    ------
    TimeAxisError
        If ``ts`` has no time zone.
    """
    t = pd.Timestamp(ts)
    if t.tzinfo is None:
        raise TimeAxisError(
            f"{what} {t.isoformat()} is naive (no time zone); give it in UTC, "
            "e.g. '2023-07-15T00:00:00Z', or with an offset such as '+08:00'"
        )
    return t.tz_convert("UTC")


def day_start_utc(day: date | str) -> pd.Timestamp:
    """00:00 UTC of a calendar day given as a date or ``YYYY-MM-DD``.

    Strings must be exactly ``YYYY-MM-DD`` (ISO 8601 calendar date): ``07/08/2023`` is
    ambiguous (US or European order) and ``2023-07-15 13:00`` is not a day, so both are refused
    rather than guessed.

    Raises
    ------
    TimeAxisError
        A string that is not ``YYYY-MM-DD`` or not a real calendar day.
    """
    if isinstance(day, str) and not _ISO_DAY.fullmatch(day.strip()):
        raise TimeAxisError(f"date {day!r} is not YYYY-MM-DD; give e.g. 2023-07-15")
    try:
        d = pd.Timestamp(day.strip() if isinstance(day, str) else day)
    except (ValueError, TypeError) as exc:
        raise TimeAxisError(f"date {day!r} is not YYYY-MM-DD") from exc
    if d.tzinfo is not None:
        d = d.tz_convert("UTC").tz_localize(None)
    return pd.Timestamp(d.date()).tz_localize("UTC")


def hourly_slots(start: pd.Timestamp, hours: int) -> pd.DatetimeIndex:
    """The planning slots: ``hours`` hourly starts from ``start`` (tz-aware UTC), named ``slot``."""
    start = require_aware(start, "slot start")
    if hours <= 0:
        raise TimeAxisError(f"horizon must be at least 1 hour, got {hours}")
    return pd.date_range(start, periods=hours, freq="h", name="slot")


def ensure_hourly_utc(
    data: pd.Series | pd.DataFrame,
    name: str = "series",
    duplicates: DuplicateRule = "refuse",
    fill_gaps: bool = True,
) -> pd.Series | pd.DataFrame:
    """Validate and normalise a series or frame to an hourly tz-aware UTC index.

    Parameters
    ----------
    data
        Series or frame indexed by timestamps, shape ``(n,)`` or ``(n, k)``.
    name
        Name used in error messages (a file name, a zone id).
    duplicates
        Rule for repeated timestamps: ``"refuse"`` (default) raises, ``"mean"`` averages them,
        ``"first"`` keeps the first.
    fill_gaps
        Insert missing hours as NaN (``True``, default); with ``False`` a gap raises.

    Returns
    -------
    Series or DataFrame
        Same data on a sorted ``DatetimeIndex`` in UTC with ``freq='h'``.

    Raises
    ------
    TimeAxisError
        Naive or non-datetime index, timestamps off the hour, refused duplicates or gaps.
    """
    idx = data.index
    if not isinstance(idx, pd.DatetimeIndex):
        raise TimeAxisError(f"{name}: index must be a DatetimeIndex, got {type(idx).__name__}")
    if idx.tz is None:
        raise TimeAxisError(
            f"{name}: timestamps are naive (no time zone); localize them first, "
            "e.g. index.tz_localize('UTC') if they are UTC"
        )
    out = data.copy()
    out.index = idx.tz_convert("UTC")
    if len(out) == 0:
        raise TimeAxisError(f"{name}: no data")
    off = out.index[out.index != out.index.floor("h")]
    if len(off):
        raise TimeAxisError(
            f"{name}: {len(off)} timestamp(s) not on the hour, first {off[0].isoformat()}; "
            "resample to hourly first"
        )
    if not out.index.is_monotonic_increasing:
        out = out.sort_index(kind="stable")
    dup = out.index.duplicated(keep="first")
    if dup.any():
        if duplicates == "refuse":
            first = out.index[dup][0]
            raise TimeAxisError(
                f"{name}: {int(dup.sum())} duplicated timestamp(s), first {first.isoformat()}; "
                "remove them or choose a duplicates rule ('mean' or 'first')"
            )
        if duplicates == "mean":
            out = out.groupby(level=0).mean()
        else:
            out = out[~dup]
    full = pd.date_range(out.index[0], out.index[-1], freq="h", name=out.index.name)
    if len(full) != len(out):
        if not fill_gaps:
            missing = full.difference(out.index)
            raise TimeAxisError(
                f"{name}: {len(missing)} missing hour(s), first {missing[0].isoformat()}"
            )
        out = out.reindex(full)
    else:
        out.index = full
    return out


def to_local(ts: pd.Timestamp, tz: str) -> pd.Timestamp:
    """Convert a UTC timestamp to a site's IANA time zone (for display and ``--begin``)."""
    return require_aware(ts).tz_convert(tz)


def check_covers(index: pd.DatetimeIndex, needed: Iterable[pd.Timestamp], name: str) -> None:
    """Raise :class:`TimeAxisError` unless ``index`` contains every timestamp in ``needed``.

    Both are compared as instants (an index in another zone is converted to UTC first).
    """
    needed_idx = pd.DatetimeIndex(list(needed))
    missing = needed_idx.difference(index)
    if len(missing):
        raise TimeAxisError(
            f"{name} does not cover the horizon: {len(missing)} hour(s) missing, "
            f"first {missing[0].isoformat()}"
        )


RUN_EVERY_HOURS = (1, 2, 3, 4, 6, 8, 12, 24)
"""The cadences a rolling run may have: the whole hours that divide a day, so every day has
the same issue times (00:00 UTC and each ``every`` hours after it). [h]"""


def check_run_every_hours(hours: int, where: str = "CARBONSCHED_ROLLING_RUN_EVERY_HOURS") -> int:
    """``hours`` if it is a rolling cadence of :data:`RUN_EVERY_HOURS`, else a clear error.

    Parameters
    ----------
    hours
        Hours from one run to the next. [h]
    where
        The setting or option that gave it (named in the error).

    Raises
    ------
    TimeAxisError
        ``hours`` is not 1, 2, 3, 4, 6, 8, 12 or 24.
    """
    if isinstance(hours, bool) or int(hours) != hours or int(hours) not in RUN_EVERY_HOURS:
        near = min(RUN_EVERY_HOURS, key=lambda h: (abs(h - float(hours)), h))
        raise TimeAxisError(
            f"{where} = {hours!r} h is not a rolling cadence: runs are issued at 00:00 UTC and "
            "every N hours after it, so N must divide 24 — one of "
            f"{', '.join(map(str, RUN_EVERY_HOURS))}; e.g. {near}")
    return int(hours)


def latest_issue_time(now: pd.Timestamp | datetime, every_hours: int) -> pd.Timestamp:
    """The newest issue time of the cadence at or before ``now`` (tz-aware). [UTC]"""
    every = pd.Timedelta(hours=check_run_every_hours(every_hours, "every_hours"))
    t = require_aware(now, "now").tz_convert("UTC")
    day = t.floor("D")
    return day + ((t - day) // every) * every


_EVERY = re.compile(r"^\s*(\d+)\s*(h|hours?|d|days?)?\s*$", re.IGNORECASE)


def parse_every(text: str | int, where: str = "--every") -> int:
    """A run cadence given as ``6h``, ``6`` (hours) or ``1d``, in hours, checked.

    Parameters
    ----------
    text
        The cadence as typed (``6h``, ``12 hours``, ``1d``) or a whole number of hours.
    where
        The option that gave it (named in the error).

    Returns
    -------
    int
        Hours from one run to the next, one of :data:`RUN_EVERY_HOURS`. [h]

    Raises
    ------
    TimeAxisError
        Not a number of hours or days, or not a divisor of a day
        (:func:`check_run_every_hours`).
    """
    if isinstance(text, int):
        return check_run_every_hours(text, where)
    m = _EVERY.match(str(text))
    if m is None:
        raise TimeAxisError(f"{where} {text!r} is not a run cadence; give whole hours such as "
                            f"6h (or 1d), one of {', '.join(f'{h}h' for h in RUN_EVERY_HOURS)}")
    n = int(m.group(1)) * (24 if (m.group(2) or "h").lower().startswith("d") else 1)
    return check_run_every_hours(n, where)
