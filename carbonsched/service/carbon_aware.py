"""The Carbon Aware SDK's WebAPI semantics on carbonsched's hourly carbon intensity.

The Green Software Foundation's Carbon Aware SDK (github.com/Green-Software-Foundation/
carbon-aware-sdk, WebAPI v1.5) answers "where and when is electricity cleanest?" from a data
source's points; this module gives its routes the same arithmetic on carbonsched's signals so
that SDK clients work unchanged (``carbonsched/api/routes/carbon_aware.py`` serves them):

* **Points** are intervals ``[t, t + d)`` with ``d`` one hour (the signals' step,
  :data:`POINT`). A point belongs to a query ``[start, end)`` when it overlaps it
  (``t < end`` and ``t + d > start``); a query without an end (``start == end``) takes the point
  that contains ``start`` (``t <= start < t + d``).
* **Emissions data** (``/emissions/bylocations``, ``bylocation``, ``bylocations/best``,
  ``average-carbon-intensity``) are the site's hourly carbon intensity from its catalog signal
  source (:func:`carbonsched.adapters.signals.load_site_signals`: measured, estimated or modelled
  as the catalog says), only for hours that have begun by the service's now: what has been
  observed. ``time`` defaults to now and ``toTime`` to ``time`` (the SDK's EmissionsAggregator).
  An hour begun by now whose carbon intensity the source lacks has no point (the SDK's shape has
  no place for a gap); :meth:`CarbonAwareService.observed_answer` names those hours per location
  (:class:`MissingHours`), which the routes put in a header.
* **Forecasts** (``/emissions/forecasts/current``) are the freshest carbon-intensity forecast
  issued at or before now: the stored plan's when it was issued at the current hour, else a
  forecast issued at the current hour by the daily pipeline's own forecasting
  (:func:`carbonsched.pipeline.daily.gather_forecasts`), computed once per site and hour and
  cached (:class:`ForecastBook`). ``/emissions/forecasts/batch`` issues one at each item's
  ``requestedAt`` hour the same way: the forecast the service would have issued then.
* **Windows** (:func:`rolling_average`): ``windowSize`` minutes; windows start at
  ``dataStartAt`` exactly (no rounding to the hour) and step by one point; each window's value is
  the time-weighted mean of the points it overlaps (:func:`average_over_period`, the SDK's
  ``AverageOverPeriod``), so ``windowSize=90`` gives 90-minute means. ``windowSize`` 0 (or none)
  gives the raw points; a window longer than the data gives no window (an empty
  ``forecastData``, as the SDK). Every window lies inside ``[dataStartAt, dataEndAt]`` (the
  SDK lets its first window pass ``dataEndAt`` when its filter keeps a point starting there).
* **Bad input** raises :class:`SdkInputError` (answered 400 with the SDK's
  ``ValidationProblemDetails``, its ``errors`` keyed by the SDK's parameter names); data that
  cannot be read or forecast raises :class:`SdkDataError` (answered 500, as the SDK answers a
  data-source failure, with the cause and a retry time).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from carbonsched.adapters.signals import load_site_signals
from carbonsched.catalog import Catalog
from carbonsched.domain import Site
from carbonsched.errors import CarbonschedError, InputError, UnknownSiteError
from carbonsched.pipeline.daily import gather_forecasts
from carbonsched.timeaxis import HOUR

log = logging.getLogger("carbonsched.api")

POINT = HOUR
"""Duration of one data point: carbonsched's signals and forecasts are hourly. [h]"""

MAX_QUERY_DAYS = 366
"""Longest ``[time, toTime)`` of one emissions-data query (split longer ones). [d]"""

MAX_BATCH_ITEMS = 100
"""Most items one batch request (``forecasts/batch``, ``average-carbon-intensity/batch``) may
carry: each forecast item may issue a forecast through the pipeline (about 1-3 s per site on
first use). [-]"""

FORECAST_CACHE_SIZE = 512
"""Issued forecasts (site x issue hour) kept in memory; the oldest computed go first. [-]"""

RETRY_AFTER_S = 3600
"""Retry time sent with a forecast that could not be issued: the next hour's issue. [s]"""


class SdkInputError(InputError):
    """Bad input to a Carbon Aware SDK route (answered 400, ValidationProblemDetails).

    Parameters
    ----------
    errors
        Parameter name (the SDK's: ``location``, ``dataStartAt``, ``[2].requestedAt``...) ->
        messages, each saying what is wrong and how to fix it.
    """

    def __init__(self, errors: dict[str, list[str]]) -> None:
        self.errors = errors
        super().__init__("; ".join(m for ms in errors.values() for m in ms))


class SdkDataError(CarbonschedError, RuntimeError):
    """Signals that could not be read, or a forecast that could not be issued (answered 500).

    Parameters
    ----------
    message
        What failed, for which site and time, and why.
    retry_after_s
        Seconds after which the same request may succeed (``None``: no retry will help until
        the data or configuration changes).
    """

    def __init__(self, message: str, retry_after_s: int | None = None) -> None:
        self.retry_after_s = retry_after_s
        super().__init__(message)


def _bad(name: str, message: str) -> SdkInputError:
    return SdkInputError({name: [message]})


@dataclass(frozen=True)
class DataPoint:
    """One value of the SDK's ``EmissionsData`` / ``EmissionsDataDTO``.

    Attributes
    ----------
    location
        The location name as the client sent it.
    time
        Start of the point or window (UTC).
    duration
        Its length.
    rating
        Carbon intensity (a window's time-weighted mean). [gCO2eq/kWh]
    """

    location: str
    time: pd.Timestamp
    duration: pd.Timedelta
    rating: float


@dataclass(frozen=True)
class MissingHours:
    """The hours of an observed-data query one location has no observed point for.

    Attributes
    ----------
    location
        The location name as the client sent it.
    hours
        Start (UTC) of each hour of the asked range that has begun by now and has no observed
        carbon intensity (NaN in, or absent from, the site's signal source), ascending.
    begun
        Hours of the asked range begun by now: those that could have been observed. [-]
    """

    location: str
    hours: tuple[pd.Timestamp, ...]
    begun: int

    def text(self) -> str:
        """One line for a person: ``westus: 3 of 24 hours missing (first 2024-01-01T05:...)``."""
        unit = "hour" if self.begun == 1 else "hours"
        return (f"{self.location}: {len(self.hours)} of {self.begun} {unit} missing "
                f"(first {self.hours[0].isoformat()})")


@dataclass(frozen=True)
class ObservedAnswer:
    """The observed points of an emissions-data query, and the hours it could not answer.

    Attributes
    ----------
    points
        The observed points, ordered by location (as given), then time (the SDK's
        ``EmissionsData``).
    missing
        One entry per location (as given, once each) with hours of the asked range begun by now
        and not observed; empty when every such hour has its point.
    """

    points: list[DataPoint]
    missing: tuple[MissingHours, ...] = ()


@dataclass(frozen=True)
class IssuedForecast:
    """A site's hourly carbon-intensity forecast as issued.

    Attributes
    ----------
    site
        Site id.
    issued_at
        Issue time (UTC, on the hour): the SDK's ``generatedAt``.
    points
        Mean forecast carbon intensity per hour, indexed by the hour's start (UTC),
        clipped at 0. [gCO2eq/kWh]
    origin
        ``issued_now`` (the pipeline, at the requested hour), ``plan`` (the stored plan's).
    source
        Which forecast: ``plan <id>`` or ``pipeline forecast issued <time>``.
    notes
        What the pipeline noted of this carbon-intensity forecast (:func:`ci_notes`: a model
        fallback, degraded or stale signals, missing hours); empty when none.
    """

    site: str
    issued_at: pd.Timestamp
    points: pd.Series
    origin: str
    source: str
    notes: tuple[str, ...] = ()


def ci_notes(site_id: str, notes: Sequence[str]) -> tuple[str, ...]:
    """A site's carbon-intensity notes among a forecast's or plan's notes.

    Those :func:`~carbonsched.pipeline.daily.gather_forecasts` makes of the site's
    carbon-intensity forecast: its model choice or fallback, degraded signal quality, a stale
    or failed provider of that signal, and the readers' and history checks' notes on the
    signal (missing or invalid hours, the provider's estimates). Green-surplus, PUE, life-cycle
    and exogenous notes are not its.
    """
    own = (f"{site_id}: carbon intensity", f"{site_id}: signal quality degraded")

    def about_ci(n: str) -> bool:
        # a reader's or history check's note on the site's intensity, in any of its spellings
        # (column name, "carbon-intensity hours ... the provider's estimate"); not life-cycle
        body = n.removeprefix(f"{site_id}: ").lower()
        return (n.startswith(f"{site_id}: ") and "lca" not in body
                and any(w in body for w in ("carbon_intensity", "carbon intensity",
                                            "carbon-intensity")))

    return tuple(n for n in notes if n.startswith(own) or about_ci(n)
                 or (n.startswith(f"DEGRADED {site_id}:") and " carbon_intensity " in n))


@dataclass(frozen=True)
class ForecastAnswer:
    """One location's forecast with its windows (the SDK's ``EmissionsForecastDTO``).

    ``origin`` is the forecast's (``issued_now``, ``plan``) or ``plan_fallback``; ``note`` names
    a fallback (the stored plan's forecast answered because none could be issued at the current
    hour), empty otherwise; ``notes`` are the forecast's own (:attr:`IssuedForecast.notes`).
    """

    location: str
    requested_at: pd.Timestamp
    generated_at: pd.Timestamp
    data_start_at: pd.Timestamp
    data_end_at: pd.Timestamp
    window_minutes: int
    forecast_data: list[DataPoint]
    optimal: list[DataPoint]
    origin: str = ""
    note: str = ""
    notes: tuple[str, ...] = ()


# --- arithmetic ---------------------------------------------------------------------------------
def utc(ts: datetime | pd.Timestamp | str, name: str) -> pd.Timestamp:
    """A tz-aware instant as a UTC :class:`pandas.Timestamp`.

    Raises
    ------
    SdkInputError
        ``ts`` has no time zone (keyed ``name``).
    """
    t = pd.Timestamp(ts)
    if t.tzinfo is None:
        raise _bad(name, f"{name} {t.isoformat()} has no time zone; add 'Z' for UTC or an "
                         "offset such as +08:00")
    return t.tz_convert("UTC")


def overlapping(points: pd.Series, start: pd.Timestamp, end: pd.Timestamp,
                duration: pd.Timedelta = POINT) -> pd.Series:
    """The points ``[t, t + duration)`` that overlap ``[start, end)``.

    ``start == end`` selects the point containing ``start``.

    Parameters
    ----------
    points
        Values indexed by their start time (tz-aware, ascending).
    start, end
        Query bounds (tz-aware), ``end >= start``.
    duration
        Length of one point.

    Returns
    -------
    Series
        The selected points, NaN values dropped.
    """
    if points.empty:
        return points
    t = points.index
    if end == start:
        keep = (t <= start) & (t + duration > start)
    else:
        keep = (t < end) & (t + duration > start)
    return points[keep].dropna()


def average_over_period(points: pd.Series, start: pd.Timestamp, end: pd.Timestamp,
                        duration: pd.Timedelta = POINT) -> float:
    """Time-weighted mean of the points over ``[start, end)`` (the SDK's ``AverageOverPeriod``).

    Each point ``[t, t + duration)`` counts with the share of ``[start, end)`` it covers:
    ``Σ rating_i × |[t_i, t_i + d) ∩ [start, end)| / (end - start)``.

    Parameters
    ----------
    points
        Ratings indexed by start time (ascending, NaN = missing). [gCO2eq/kWh]
    start, end
        The period, ``end > start``.
    duration
        Length of one point.

    Returns
    -------
    float
        The mean. [gCO2eq/kWh]

    Raises
    ------
    SdkInputError
        The points do not cover every instant of ``[start, end)`` (keyed ``startTime``).
    """
    sel = overlapping(points, start, end, duration)
    covered = pd.Timedelta(0)
    total = 0.0
    for t, v in sel.items():
        part = min(t + duration, end) - max(t, start)
        covered += part
        total += float(v) * (part / (end - start))
    if len(sel) == 0 or covered < end - start:
        have = (f"{sel.index[0].isoformat()} .. {(sel.index[-1] + duration).isoformat()} with "
                f"{len(sel)} hourly point(s)" if len(sel) else "no point")
        raise _bad("startTime", f"period out of range: the data do not cover every hour of "
                                f"{start.isoformat()} .. {end.isoformat()} (there is {have}); "
                                "ask for a period whose hours have carbon intensity")
    return total


def rolling_average(points: pd.Series, window: pd.Timedelta, start: pd.Timestamp,
                    end: pd.Timestamp, duration: pd.Timedelta = POINT) -> pd.Series:
    """Means of windows of length ``window`` (the SDK's ``RollingAverage``).

    Windows ``[w, w + window)`` start at ``max(start, first point)`` and step by ``duration``;
    a window is kept when it ends by ``end`` and the points cover all of it. ``window == 0``
    returns the points that overlap ``[start, end)`` as they are.

    Parameters
    ----------
    points
        Ratings indexed by start time (ascending, hourly). [gCO2eq/kWh]
    window
        Window length (>= 0).
    start, end
        Bounds the windows lie in.
    duration
        Length of one point; also the step between windows.

    Returns
    -------
    Series
        Window means indexed by window start (empty when no window fits). [gCO2eq/kWh]
    """
    data = overlapping(points, start, end, duration)
    if window == pd.Timedelta(0) or data.empty:
        return data
    w = max(start, data.index[0])
    out: dict[pd.Timestamp, float] = {}
    while w + window <= end:
        try:
            out[w] = average_over_period(data, w, w + window, duration)
        except SdkInputError:  # a gap in the points: no window there
            pass
        w += duration
    return pd.Series(out, dtype=float)


def optimal(points: list[DataPoint]) -> list[DataPoint]:
    """The points of lowest rating (all of them on a tie), as the SDK's ``GetOptimalEmissions``."""
    if not points:
        return []
    best = min(p.rating for p in points)
    return [p for p in points if p.rating == best]


def window_minutes(value: int | None, name: str = "windowSize") -> int:
    """``windowSize`` in minutes: ``None`` is 0 (the raw points).

    Raises
    ------
    SdkInputError
        A negative value.
    """
    if value is None:
        return 0
    if value < 0:
        raise _bad(name, f"{name} {value} is negative; give the workload's duration in minutes "
                         "(0 or none: the hourly points themselves)")
    return int(value)


# --- the service -------------------------------------------------------------------------------
ForecastFn = Callable[[Site, pd.Timestamp], IssuedForecast]


class ForecastBook:
    """Carbon-intensity forecasts issued at whole hours, computed once per site and hour.

    Parameters
    ----------
    catalog
        The served catalog.
    data_dir
        Folder of the signal data (the service's ``data_dir``).
    horizon_hours
        Hours each issued forecast covers. [h]
    loader
        The signal loader (default :func:`load_site_signals`, as the daily plan).
    """

    def __init__(self, catalog: Catalog, data_dir: Path, horizon_hours: int,
                 loader: Callable[..., Any] | None = None) -> None:
        self.catalog = catalog
        self.data_dir = data_dir
        self.horizon_hours = horizon_hours
        self.loader = loader
        self._cache: OrderedDict[tuple[str, pd.Timestamp], IssuedForecast | str] = OrderedDict()
        self._lock = threading.Lock()

    def issue(self, site: Site, issued_at: pd.Timestamp) -> IssuedForecast:
        """The forecast of ``site`` issued at ``issued_at`` (an hour), from the cache or computed.

        Computed by :func:`carbonsched.pipeline.daily.gather_forecasts` on the site alone:
        the daily plan's loading, history checks and model choice, using only observations
        before ``issued_at``. A failure is cached too (one attempt per site and hour).

        Raises
        ------
        SdkDataError
            The pipeline left the site out (its message says why), or the signals could not be
            read.
        """
        key = (site.id, issued_at)
        hit = self._cache.get(key)  # a cached forecast never waits for a computation
        if hit is None:
            with self._lock:  # one computation at a time: the machine's cores are few
                hit = self._cache.get(key)
                if hit is None:
                    hit = self._compute(site, issued_at)
                    self._cache[key] = hit
                    while len(self._cache) > FORECAST_CACHE_SIZE:
                        self._cache.popitem(last=False)
        if isinstance(hit, str):
            raise SdkDataError(hit, RETRY_AFTER_S)
        return hit

    def _compute(self, site: Site, issued_at: pd.Timestamp) -> IssuedForecast | str:
        one = dataclasses.replace(self.catalog, sites=[site])
        try:
            fcs, notes, _ = gather_forecasts(one, self.data_dir, issued_at, self.horizon_hours,
                                             loader=self.loader)
        except (InputError, OSError) as exc:
            msg = (f"no forecast of {site.id} could be issued at {issued_at.isoformat()}: the "
                   f"signals could not be read ({exc})")
            log.warning("%s", msg)
            return msg
        if site.id not in fcs:
            why = "; ".join(n for n in notes if site.id in n) or "no usable history"
            msg = f"no forecast of {site.id} could be issued at {issued_at.isoformat()}: {why}"
            log.warning("%s", msg)
            return msg
        ci = fcs[site.id].signals["carbon_intensity_g_per_kwh"]
        return IssuedForecast(site.id, issued_at, ci.astype(float).clip(lower=0.0),
                              "issued_now", f"pipeline forecast issued {issued_at.isoformat()}",
                              ci_notes(site.id, notes))


class CarbonAwareService:
    """What the Carbon Aware SDK routes answer from (see the module docstring).

    Parameters
    ----------
    catalog
        The served catalog (sites, their aliases and signal sources).
    data_dir
        Folder of the signal data.
    forecast_hours
        Horizon of forecasts issued on request. [h]
    loader
        Signal loader (default :func:`load_site_signals`).
    """

    def __init__(self, catalog: Catalog, data_dir: Path, forecast_hours: int,
                 loader: Callable[..., Any] | None = None) -> None:
        self.catalog = catalog
        self.data_dir = Path(data_dir)
        self.loader = loader or load_site_signals
        self.forecasts = ForecastBook(catalog, self.data_dir, forecast_hours, loader)

    # --- locations ------------------------------------------------------------------------
    def resolve(self, names: Sequence[str], key: str = "location") -> list[Site]:
        """The sites named (ids or aliases, case-insensitively), in order.

        Raises
        ------
        SdkInputError
            No name, an empty one, or a name no site answers to (keyed ``key``; the message
            lists the known names).
        """
        names = [n for n in names if n]  # the SDK skips empty names
        if not names:
            raise _bad(key, f"{key} is not set; give a site id or alias (GET /locations "
                            "lists them)")
        out = []
        for n in names:
            try:
                out.append(self.catalog.find_site(n))
            except UnknownSiteError:
                raise _bad(key, f"unknown location {n!r}; known locations (site ids and "
                                f"aliases, case-insensitive): "
                                f"{', '.join(self.catalog.names())}") from None
        return out

    def locations(self) -> dict[str, dict[str, Any]]:
        """Every name a site answers to -> its latitude, longitude and site id (``name``)."""
        out = {}
        for n in self.catalog.names():  # ids first, then aliases
            s = self.catalog.find_site(n)
            out[n] = {"latitude": s.latitude, "longitude": s.longitude, "name": s.id}
        return out

    # --- emissions data (observed) --------------------------------------------------------
    def observed(self, site: Site, start: pd.Timestamp, end: pd.Timestamp,
                 now: pd.Timestamp) -> pd.Series:
        """Hourly carbon intensity of ``site`` for the hours of ``[start, end]`` begun by ``now``.

        Returns
        -------
        Series
            Ratings indexed by hour start (UTC), NaN-free, possibly empty. [gCO2eq/kWh]

        Raises
        ------
        SdkDataError
            The site's signals could not be read.
        """
        t0 = start.floor("h")
        t1 = min(max(end, start).floor("h"), now.floor("h")) + POINT
        if t1 <= t0:
            return pd.Series(dtype=float, index=pd.DatetimeIndex([], tz="UTC"))
        try:
            frame, _ = self.loader(self.catalog.site(site.id), self.data_dir, t0, t1)
        except (InputError, OSError) as exc:
            raise SdkDataError(f"the signals of {site.id} for {t0.isoformat()} .. "
                               f"{t1.isoformat()} could not be read: {exc}") from exc
        ci = frame["carbon_intensity_g_per_kwh"].astype(float)
        ci.index = pd.DatetimeIndex(ci.index).tz_convert("UTC")
        return ci[ci.index <= now].dropna()

    def _range(self, start: datetime | None, end: datetime | None, now: pd.Timestamp,
               start_key: str = "time", end_key: str = "toTime"
               ) -> tuple[pd.Timestamp, pd.Timestamp]:
        if end is not None and start is None:
            raise _bad(start_key, f"{start_key} must be defined if {end_key} is defined")
        s = utc(start, start_key) if start is not None else now
        e = utc(end, end_key) if end is not None else s
        if end is not None and s >= e:
            raise _bad(start_key, f"{start_key} must be before {end_key} (got "
                                  f"{s.isoformat()} and {e.isoformat()})")
        if e - s > pd.Timedelta(days=MAX_QUERY_DAYS):
            raise _bad(end_key, f"{start_key} .. {end_key} spans {(e - s).days} days; ask for "
                                f"at most {MAX_QUERY_DAYS} days per request")
        return s, e

    def observed_answer(self, names: Sequence[str], time: datetime | None,
                        to_time: datetime | None, now: datetime) -> ObservedAnswer:
        """The observed points of every location in ``[time, toTime)``, and the hours missing.

        ``time`` defaults to now and ``toTime`` to ``time`` (the point containing it). The
        points are :meth:`emissions`'; an hour is missing at a location when it overlaps the
        range, has begun by ``now`` and has no observed point there (hours after now are not
        observed yet, not missing).

        Raises
        ------
        SdkInputError
            As :meth:`emissions`.
        SdkDataError
            As :meth:`observed`.
        """
        n = utc(now, "now")
        sites = self.resolve(names)
        s, e = self._range(time, to_time, n)
        hours = pd.date_range(s.floor("h"), e.floor("h"), freq=POINT)
        asked = overlapping(pd.Series(0.0, index=hours), s, e).index
        begun = asked[asked <= n]
        points: list[DataPoint] = []
        missing: dict[str, MissingHours] = {}
        for name, site in zip([x for x in names if x], sites, strict=True):
            pts = overlapping(self.observed(site, s, e, n), s, e)
            points += [DataPoint(name, t, POINT, float(v)) for t, v in pts.items()]
            gap = begun.difference(pts.index)
            if len(gap):
                missing.setdefault(name, MissingHours(name, tuple(gap), len(begun)))
        return ObservedAnswer(points, tuple(missing.values()))

    def emissions(self, names: Sequence[str], time: datetime | None,
                  to_time: datetime | None, now: datetime) -> list[DataPoint]:
        """The observed points of every location in ``[time, toTime)`` (``bylocations``).

        ``time`` defaults to now and ``toTime`` to ``time`` (the point containing it).
        Ordered by location (as given), then time. Hours without an observed point are left
        out; :meth:`observed_answer` also says which.

        Raises
        ------
        SdkInputError
            Unknown location, ``toTime`` without ``time``, ``time >= toTime``, a naive time or
            a range longer than :data:`MAX_QUERY_DAYS`.
        """
        return self.observed_answer(names, time, to_time, now).points

    def best(self, names: Sequence[str], time: datetime | None, to_time: datetime | None,
             now: datetime) -> list[DataPoint]:
        """The lowest-rated observed point(s) among the locations (``bylocations/best``)."""
        return optimal(self.emissions(names, time, to_time, now))

    def average(self, name: str | None, start: datetime | None, end: datetime | None,
                now: datetime, prefix: str = "") -> float:
        """Time-weighted mean observed carbon intensity of ``[start, end)`` at one location.

        Raises
        ------
        SdkInputError
            A missing parameter, ``startTime >= endTime``, or a period the observed hours do
            not cover (keys prefixed with ``prefix``, e.g. ``[1].``).
        """
        n = utc(now, "now")
        missing = {f"{prefix}{k}": [f"{k} is not set"] for k, v in
                   (("location", name), ("startTime", start), ("endTime", end)) if not v}
        if missing:
            raise SdkInputError(missing)
        assert name is not None and start is not None and end is not None
        try:
            site = self.resolve([name])[0]
            s, e = self._range(start, end, n, "startTime", "endTime")
            return average_over_period(self.observed(site, s, e, n), s, e)
        except SdkInputError as exc:
            raise SdkInputError({prefix + k: v for k, v in exc.errors.items()}) from None

    def check_batch(self, items: Sequence[Any]) -> None:
        """Refuse a batch of more than :data:`MAX_BATCH_ITEMS` items.

        Raises
        ------
        SdkInputError
            Too many items.
        """
        if len(items) > MAX_BATCH_ITEMS:
            raise _bad("items", f"{len(items)} items in one batch; send at most "
                                f"{MAX_BATCH_ITEMS} per request")

    # --- forecasts ------------------------------------------------------------------------
    def current_forecast(self, site: Site, now: pd.Timestamp,
                         plan: IssuedForecast | None) -> tuple[IssuedForecast, str]:
        """The freshest forecast of ``site`` at ``now``, and a fallback note ("" if none).

        The stored plan's when it was issued at the current hour; else one issued at the
        current hour by the pipeline (cached per hour); when that fails, the plan's if its
        hours reach past now, with a note naming why.

        Raises
        ------
        SdkDataError
            No forecast could be issued and the plan (if any) has none past now.
        """
        hour = now.floor("h")
        if plan is not None and plan.issued_at == hour:
            return plan, ""
        try:
            return self.forecasts.issue(site, hour), ""
        except SdkDataError as exc:
            if plan is not None and len(plan.points) and plan.points.index[-1] + POINT > now:
                return plan, (f"{exc}; answered from {plan.source} issued "
                              f"{plan.issued_at.isoformat()}")
            raise

    def windows(self, name: str, fc: IssuedForecast, start: datetime | None,
                end: datetime | None, window_size: int | None, requested_at: pd.Timestamp,
                prefix: str = "", note: str = "") -> ForecastAnswer:
        """Scope a forecast to ``[dataStartAt, dataEndAt]`` and average it over windows.

        ``dataStartAt`` defaults to the first point, ``dataEndAt`` to the end of the last one;
        each must lie within the forecast (the SDK's ``EmissionsForecast.Validate``).

        Raises
        ------
        SdkInputError
            ``dataStartAt``/``dataEndAt`` outside the forecast or not in order, a negative
            ``windowSize`` (keys prefixed with ``prefix``).
        """
        minutes = window_minutes(window_size, f"{prefix}windowSize")
        pts = fc.points.dropna()
        if pts.empty:
            raise SdkDataError(f"{fc.source} has no point for {fc.site}", RETRY_AFTER_S)
        lo, hi = pts.index[0], pts.index[-1] + POINT
        s = utc(start, f"{prefix}dataStartAt") if start is not None else lo
        e = utc(end, f"{prefix}dataEndAt") if end is not None else hi
        errors: dict[str, list[str]] = {}
        span = f"'{lo.isoformat()}' through '{hi.isoformat()}' ({fc.source})"
        if s >= e:
            errors.setdefault(f"{prefix}dataStartAt", []).append(
                f"dataStartAt must be earlier than dataEndAt (got {s.isoformat()} and "
                f"{e.isoformat()})")
        if not lo <= s <= hi:
            errors.setdefault(f"{prefix}dataStartAt", []).append(
                f"dataStartAt {s.isoformat()} must be within the time range of the forecast, "
                f"{span}")
        if not lo <= e <= hi:
            errors.setdefault(f"{prefix}dataEndAt", []).append(
                f"dataEndAt {e.isoformat()} must be within the time range of the forecast, "
                f"{span}")
        if errors:
            raise SdkInputError(errors)
        if minutes > (e - s) / pd.Timedelta(minutes=1):
            rolled = pd.Series(dtype=float)  # no window of that length fits (nor overflows)
        else:
            rolled = rolling_average(pts, pd.Timedelta(minutes=minutes), s, e)
        step = pd.Timedelta(minutes=minutes) if minutes else POINT
        data = [DataPoint(name, t, step, float(v)) for t, v in rolled.items()]
        return ForecastAnswer(name, requested_at, fc.issued_at, s, e,
                              minutes or int(POINT / pd.Timedelta(minutes=1)), data,
                              optimal(data), "plan_fallback" if note else fc.origin, note,
                              fc.notes)

    def plan_forecast(self, book: Any, site: Site) -> IssuedForecast | None:
        """The stored plan's carbon-intensity forecast of ``site`` (``None`` without one)."""
        if book is None or site.id not in book.spos:
            return None
        ci = np.clip(np.asarray(book.ci[book.spos[site.id]], dtype=float), 0.0, None)
        issued = pd.Timestamp(book.plan.get("issued_at") or book.slots[0]).tz_convert("UTC")
        return IssuedForecast(site.id, issued, pd.Series(ci, index=book.slots), "plan",
                              f"plan {book.plan_id}",
                              ci_notes(site.id, book.plan.get("notes", [])))

    def current(self, names: Sequence[str], start: datetime | None, end: datetime | None,
                window_size: int | None, now: datetime, book: Any) -> list[ForecastAnswer]:
        """``/emissions/forecasts/current``: one answer per location, in order.

        Raises
        ------
        SdkInputError
            As :meth:`resolve` and :meth:`windows`.
        SdkDataError
            As :meth:`current_forecast`.
        """
        n = utc(now, "now")
        sites = self.resolve(names)
        window_minutes(window_size)
        out = []
        for name, site in zip([x for x in names if x], sites, strict=True):
            fc, note = self.current_forecast(site, n, self.plan_forecast(book, site))
            out.append(self.windows(name, fc, start, end, window_size, n, note=note))
        return out

    def historical(self, item: dict[str, Any], k: int, now: datetime) -> ForecastAnswer:
        """One ``/emissions/forecasts/batch`` item: the forecast issued at its ``requestedAt``.

        Issued at ``requestedAt`` floored to the hour, from the observations before then.

        Raises
        ------
        SdkInputError
            A missing ``requestedAt`` or ``location``, a ``requestedAt`` after now, or the
            errors of :meth:`windows` (keys ``[k].name``); a forecast that cannot be issued at
            that time (the data do not reach it) is bad input here too.
        """
        n = utc(now, "now")
        p = f"[{k}]."
        missing = {f"{p}{f}": [f"{f} is not set"] for f in ("requestedAt", "location")
                   if not item.get(f)}
        if missing:
            raise SdkInputError(missing)
        requested = utc(item["requestedAt"], f"{p}requestedAt")
        if requested > n:
            raise _bad(f"{p}requestedAt", f"requestedAt {requested.isoformat()} is after now "
                                          f"({n.isoformat()}); historical forecasts are "
                                          "issued in the past (use /emissions/forecasts/"
                                          "current for now)")
        site = self.resolve([item["location"]], f"{p}location")[0]
        try:
            fc = self.forecasts.issue(site, requested.floor("h"))
        except SdkDataError as exc:
            raise _bad(f"{p}requestedAt", str(exc)) from None
        return self.windows(item["location"], fc, item.get("dataStartAt"),
                            item.get("dataEndAt"), item.get("windowSize"), requested, p)


def time_span(d: pd.Timedelta) -> str:
    """A duration as .NET's ``TimeSpan`` text (``hh:mm:ss``, days as ``d.hh:mm:ss``)."""
    secs = int(d.total_seconds())
    days, rest = divmod(secs, 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    return (f"{days}." if days else "") + f"{h:02d}:{m:02d}:{s:02d}"


def minutes_of(d: pd.Timedelta) -> int:
    """Whole minutes of a duration (the SDK's ``EmissionsDataDTO.duration``). [min]"""
    return int(math.floor(d / pd.Timedelta(minutes=1)))
