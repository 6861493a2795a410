"""Plan a past day's real signals as if it were another day: the *replayed* plan.

The real data of the ``global`` and ``us-2022`` catalogs ends in 2023, so a plan of a day the data
covers lies in the past and can never be dispatched (every placement's deadline has passed). A
replayed plan moves a covered *source* day's signals and work forward by a whole number of days
onto a *target* day (``carbonsched plan --date TARGET --replay-from SOURCE``; the target defaults
to tomorrow), so the real grid of the source day can be planned and dispatched to today's
clusters:

* the signal history (carbon intensity, weather and so PUE, the green-surplus inputs) is read for
  the source period and its timestamps moved by :attr:`ReplayShift.shift`;
* the forecasts are issued at the target day's 00:00 UTC from the moved history *before* it, which
  is the real history before the source day's 00:00: no observation of the source day or later
  reaches a forecast (the same issue-time rule as every plan);
* the workload (a jobs file of the source day, e.g. ``carbonsched workload from-traces --date
  SOURCE``, or the catalog's demo day of the source day) is moved by the same shift; job ids stay
  as they are;
* the plan document says so: ``signal_quality: replayed``, a ``replay`` block (source and target
  day, the shift in days, the underlying quality) and a first note in words; ``plans show`` and
  ``carbonsched report`` repeat the sentence, and the report scores the plan on the source day's
  actual signals moved the same way.

The shift is whole days and keeps the UTC hour of day. It does not keep the weekday (a Saturday
can be replayed on a Friday): the forecasters use lags (24 h, 168 h), not calendar features, so a
moved history forecasts the same way whatever weekday it lands on; the weekdays are named in the
note so a reader sees it. A site's local clock differs from the source day's by an hour when
daylight saving time differs between the two days.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import date
from pathlib import Path
from typing import Any

import pandas as pd

from carbonsched.domain import InferenceDemand, Job, Site, Workload
from carbonsched.errors import InputError, TimeAxisError
from carbonsched.timeaxis import HOUR, day_start_utc

SIGNAL_QUALITY_REPLAYED = "replayed"
"""The plan document's ``signal_quality`` of a replayed plan."""


@dataclass(frozen=True)
class ReplayShift:
    """A source day moved onto a target day by whole days.

    Attributes
    ----------
    source
        00:00 UTC of the day whose real signals and work are replayed.
    target
        00:00 UTC of the day planned.
    """

    source: pd.Timestamp
    target: pd.Timestamp

    @classmethod
    def between(cls, source_date: str | date, target_date: str | date) -> ReplayShift:
        """The shift from ``source_date`` onto ``target_date`` (both ``YYYY-MM-DD``, UTC days).

        Raises
        ------
        InputError
            The target day is not after the source day (a replay moves a past day forward; at
            least one day).
        TimeAxisError
            A date is not ``YYYY-MM-DD``.
        """
        try:
            src = day_start_utc(source_date)
        except TimeAxisError as exc:
            raise TimeAxisError(f"--replay-from: {exc}") from exc
        tgt = day_start_utc(target_date)
        if tgt <= src:
            raise InputError(
                f"--replay-from {src:%Y-%m-%d} is not before the day planned ({tgt:%Y-%m-%d}): "
                "a replay moves a past day's real signals forward onto a later day; give "
                "--replay-from an earlier day the data covers (e.g. 2023-07-15) and --date the "
                "day to plan (default tomorrow)")
        return cls(src, tgt)

    @property
    def shift(self) -> pd.Timedelta:
        """``target - source``, a whole number of days."""
        return self.target - self.source

    @property
    def shift_days(self) -> int:
        """The shift in days. [d]"""
        return int(self.shift / pd.Timedelta(days=1))

    def describe(self) -> dict[str, Any]:
        """The plan document's ``replay`` block (without ``underlying_signal_quality``)."""
        return {"source_date": f"{self.source:%Y-%m-%d}",
                "target_date": f"{self.target:%Y-%m-%d}", "shift_days": self.shift_days}


def replay_sentence(replay: dict[str, Any]) -> str:
    """The one sentence that states a replay, for the plan's notes, ``plans show`` and the report.

    Parameters
    ----------
    replay
        A plan document's ``replay`` block (``source_date``, ``target_date``, ``shift_days``,
        optional ``underlying_signal_quality``).
    """
    src = pd.Timestamp(replay["source_date"])
    tgt = pd.Timestamp(replay["target_date"])
    under = replay.get("underlying_signal_quality")
    return (f"signals: REPLAYED - the real signals{f' ({under})' if under else ''} and work of "
            f"{src:%A %Y-%m-%d}, moved {replay['shift_days']} days forward onto {tgt:%A %Y-%m-%d} "
            "(forecasts issued from the history before the moved day only); this plans the past "
            "grid on today's clusters, not a forecast of the grid of "
            f"{tgt:%Y-%m-%d}")


def _shift_meta(meta: dict[str, Any], shift: pd.Timedelta) -> dict[str, Any]:
    """A reader's meta with the timestamps the history checks compare moved by ``shift``."""
    out = dict(meta)
    rows = []
    for q in meta.get("quarantined") or []:
        ts = q.get("ts")
        if ts:
            try:
                ts = (pd.Timestamp(ts) + shift).isoformat()
            except ValueError:
                pass
        rows.append({**q, "ts": ts})
    if "quarantined" in meta:
        out["quarantined"] = rows
    return out


class ReplayedSignals:
    """A signal loader that reads the source period and moves it onto the target period.

    Parameters
    ----------
    shift
        The replay.
    loader
        The loader replayed (``loader(site, data_dir, start, end) -> (frame, meta)``, the
        contract of :func:`carbonsched.adapters.signals.load_site_signals`, its default).
    """

    def __init__(self, shift: ReplayShift, loader: Any = None) -> None:
        self.replay = shift
        self.loader = loader

    def load_site_signals(self, site: Site, data_dir: Path | None, start: pd.Timestamp,
                          end: pd.Timestamp) -> tuple[pd.DataFrame, dict[str, Any]]:
        """The site's signals on ``[start, end)`` (target times), read at ``start - shift``.

        Returns
        -------
        (DataFrame, dict)
            The frame with its index moved by the shift; the meta with ``replay`` added and the
            quarantined rows' times moved.
        """
        from carbonsched.adapters.signals import load_site_signals

        d = self.replay.shift
        frame, meta = (self.loader or load_site_signals)(site, data_dir, start - d, end - d)
        frame = frame.copy()
        frame.index = frame.index + d
        meta = _shift_meta(meta, d)
        meta["replay"] = self.replay.describe()
        return frame, meta


def shift_workload(workload: Workload, shift: ReplayShift, horizon_hours: int,
                   where: str) -> Workload:
    """The source day's work moved onto the target day (job ids kept).

    Parameters
    ----------
    workload
        Jobs and inference demand of the source day.
    shift
        The replay.
    horizon_hours
        The plan's horizon: the work must have something released in the source day's horizon.
        [h]
    where
        What the workload is, for the message (a file path, ``the demo day``).

    Raises
    ------
    InputError
        No job's ``earliest_start`` and no inference hour lies in the source day's horizon (the
        file was built for another day, e.g. the target day).
    """
    lo, hi = shift.source, shift.source + horizon_hours * HOUR
    times = [j.earliest_start for j in workload.jobs] + [d.hour for d in workload.inference]
    if times and not any(lo <= t < hi for t in times):
        first = min(times)
        raise InputError(
            f"{where}: no job starts and no inference hour lies on the replayed day "
            f"{lo:%Y-%m-%d} (its work begins {first.isoformat()}); a replay moves the source "
            "day's work with its signals: build the workload of that day, e.g. `carbonsched "
            f"workload from-traces --date {lo:%Y-%m-%d} --out day.json`")
    d = shift.shift
    jobs: list[Job] = [replace(j, earliest_start=j.earliest_start + d, deadline=j.deadline + d)
                       for j in workload.jobs]
    inference: list[InferenceDemand] = [replace(x, hour=x.hour + d) for x in workload.inference]
    return Workload(jobs, inference)
