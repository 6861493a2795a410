"""Grid flexibility: agreements, events, commitments and GPU power-cap levels (the data model).

Grids ask data centres to give power back when the grid is stressed: a site signs a *grid
agreement* (event windows announced with notice, a target reduction against a baseline, a
penalty per kWh of shortfall), the operator announces a *grid event*, and the plan *commits* a
reduction for the event's window and reserves it when it places work. The planner also
states, per site and hour, how much IT power it could shed at a given notice (``flex_it_kw``
in a plan's ``site_hours``), one lever of which is lowering GPU power caps: a job may run at
one of its GPU type's *cap levels* (:class:`PowerCapLevel`), slower and leaner.

All powers are site (facility) kW at the meter unless the name says ``it``; all timestamps
are tz-aware UTC and must lie on the hour (the plan's slot grid).

References
----------
- Emerald AI, Oracle, NVIDIA, SRP, "Turning AI Data Centers into Grid-Interactive Assets",
  arXiv:2507.00909 (2025): a 25 % cut of cluster power for 3 h on 256 GPUs.
- CAISO, "Baseline Accuracy Work Group" (2017) and NAESB WEQ-015: the 10-in-10 baseline
  (mean load of the same hours over the prior 10 eligible days), the default here.
- PJM Manual 11 (Energy & Ancillary Services Market Operations), section 10, Customer Baseline
  Load: the weekday "High 4 of 5" CBL (the 4 of the 5 most recent eligible like days with the
  highest load over the event hours, averaged hour by hour; days with an event excluded;
  looked for within 45 days). NYISO's "Average Day" CBL (the 5 highest of 10 like days) is the
  same rule with other numbers.

These baselines are defined on the market's local clock (PJM's and NYISO's in Eastern
Prevailing Time, CAISO's in Pacific Prevailing Time): a weekday is a local weekday and "the
same hours" are the same local hours of the prior days, across a daylight-saving change.
:func:`prior_days_baseline` therefore works on the site's own IANA zone (``Site.timezone``
in the catalog), not on UTC dates.
"""

from __future__ import annotations

import csv
import json
import math
import tomllib
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pandas as pd

from carbonsched.errors import InputError
from carbonsched.limits import (
    EARLIEST_YEAR,
    LATEST_YEAR,
    MAX_SLO_MS,
    check_identifier,
    identifier_problem,
)
from carbonsched.timeaxis import require_aware

DEFAULT_BASELINE_DAYS = 10
"""Prior days averaged by the ``prior-days-mean`` baseline: CAISO's and NAESB's "10-in-10"
customer baseline (mean of the same hours over the 10 prior eligible days). [days]"""

DEFAULT_BASELINE_HIGH_DAYS = 4
"""Days kept by ``prior-days-high`` out of ``baseline_days`` (PJM's weekday "High 4 of 5" CBL,
Manual 11 section 10, with ``baseline_days = 5``). [days]"""

BASELINE_LOOKBACK_DAYS = 45
"""How far back the prior like days are looked for: PJM's 45-calendar-day CBL window (Manual
11 section 10); CAISO's 10-in-10 also looks back 45 days. [days]"""

MAX_EVENT_SLO_MS = MAX_SLO_MS
"""Largest event-time SLO an agreement accepts: the largest inference SLO
(:data:`carbonsched.limits.MAX_SLO_MS`, 100 s). [ms]"""

DEFAULT_NOTICE_HOURS = 4.0
"""Notice given before an event when an agreement or event file does not say: the day-of
"4 hours ahead" notice of the issue-38 benchmark (and of many US demand-response programmes,
e.g. PJM's 2-hour and CAISO's day-of notices lie below it). [h]"""

MAX_NOTICE_MINUTES = 366 * 24 * 60
"""Longest notice a grid event may carry: a year (527,040 min). [min]"""

NOTICE_UNITS = {"minutes": ("min", 1.0), "hours": ("h", 60.0)}
"""How an event's notice may be given: ``notice_minutes`` (the CLI and the API) or
``notice_hours`` (an event file): unit -> (symbol, minutes per unit)."""


class GridFlexError(InputError):
    """A grid agreement, event, commitment or power-cap table that cannot be used.

    The message names the item (site, event id, file and row) and how to fix it.
    """


class BaselineMethod(StrEnum):
    """How the baseline an event's reduction is measured against is computed."""

    PRIOR_DAYS_MEAN = "prior-days-mean"
    """Mean site power of the same hours over the ``baseline_days`` prior days (CAISO/NAESB
    "10-in-10"); needs the site's metered (or replayed) history."""
    PRIOR_DAYS_HIGH = "prior-days-high"
    """Mean site power of the same hours over the ``baseline_high_days`` of the
    ``baseline_days`` prior like days with the highest load in the event's hours (PJM's
    "High 4 of 5", NYISO's "5 of 10"); needs the site's recorded history."""
    PLAN_UNCOMMITTED = "plan-uncommitted"
    """The site power the plan would draw in the window without the commitment (the same
    problem solved without the reservation); needs no history, but the operator must accept a
    baseline the site computes itself (document it in the agreement)."""


def _hour_aligned(ts: Any, what: str) -> pd.Timestamp:
    t = require_aware(ts, what)
    if t != t.floor("h"):
        raise GridFlexError(f"{what} {t.isoformat()} is not on the hour: events and commitments "
                            "use the plan's hourly slots; round it to a whole hour (UTC)")
    return t.tz_convert("UTC")


def _finite(value: Any, what: str, *, low: float, high: float = math.inf,
            low_open: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise GridFlexError(f"{what} must be a number, got {value!r}")
    v = float(value)
    if not math.isfinite(v) or v < low or (low_open and v == low) or v > high:
        lo = f"> {low:g}" if low_open else f">= {low:g}"
        hi = "" if high == math.inf else f" and <= {high:g}"
        raise GridFlexError(f"{what} must be a finite number {lo}{hi}, got {value!r}")
    return v


def _site_id(site: Any, what: str) -> str:
    msg = identifier_problem(site, f"{what} site") if isinstance(site, str) else \
        f"{what} site must be a site id (text), got {site!r}"
    if msg is not None:
        raise GridFlexError(msg)
    return site


# --- a grid event's rules: the one source for every entry point ----------------------------------
# GridEvent checks its fields with these; the CLI (`carbonsched grid-event add`), the API
# (POST /v1/grid-events, carbonsched.api.schemas.GridEventCreate), an event file
# (read_grid_events) and the store (which takes a GridEvent) therefore accept the same events
# and refuse a bad one with the same sentence.

_YEARS = f"{EARLIEST_YEAR}..{LATEST_YEAR}"


def _number(value: Any) -> Any:
    """A number, or numeric text (a CSV cell, a JSON string), as a float.

    A whole number too large for a float is infinite (refused as not finite); anything else is
    returned as is.
    """
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return value
    try:
        return float(value.strip() if isinstance(value, str) else value)
    except ValueError:
        return value
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def event_site(value: Any) -> str:
    """A grid event's site id, under the one identifier grammar.

    A whole number is taken as its text and blanks at either end are removed, as the job
    schema reads an id.

    Raises
    ------
    InputError
        :func:`carbonsched.limits.identifier_problem`'s message for a ``site id``.
    """
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        value = str(value).strip()
    return check_identifier(value, "site id")


def event_time(value: Any, what: str) -> pd.Timestamp:
    """A grid event's ``start`` or ``end`` in UTC: with a zone, in the supported years, on the hour.

    Parameters
    ----------
    value
        ISO 8601 text with a zone (``2026-07-01T17:00:00Z``), or a tz-aware datetime.
    what
        The field, for the message (``start``, ``end``).

    Raises
    ------
    GridFlexError
        Not a date-time; no zone; a year outside
        :data:`~carbonsched.limits.EARLIEST_YEAR`..:data:`~carbonsched.limits.LATEST_YEAR` as
        written (what the OpenAPI document's pattern states) or in UTC (what is stored); not
        on the hour (in UTC: the plan's slots).
    """
    t = value
    if isinstance(value, str):
        try:
            t = datetime.fromisoformat(value.strip())
        except ValueError:
            pass
    if not isinstance(t, datetime):
        raise GridFlexError(f"{what} {value!r} is not a date-time; give ISO 8601 with a zone, "
                            "such as 2026-07-01T17:00:00Z")
    shown = repr(value) if isinstance(value, str) else t.isoformat()
    if t.utcoffset() is None:
        raise GridFlexError(f"{what} {shown} has no time zone; add 'Z' for UTC or an offset "
                            "such as +08:00")
    utc = None
    if EARLIEST_YEAR <= t.year <= LATEST_YEAR:
        utc = pd.Timestamp(t).tz_convert("UTC")
    if utc is None or not EARLIEST_YEAR <= utc.year <= LATEST_YEAR:
        said = "" if utc is None else f" ({utc.isoformat()} in UTC)"
        raise GridFlexError(f"{what} {shown}{said} is outside the supported years {_YEARS}; "
                            f"give a time in the years {_YEARS}")
    if utc != utc.floor("h"):
        raise GridFlexError(f"{what} {utc.isoformat()} is not on the hour; events use the "
                            "plan's hourly slots: round it to a whole hour (UTC)")
    return utc


def event_window(start: Any, end: Any) -> tuple[pd.Timestamp, pd.Timestamp]:
    """A grid event's window in UTC: :func:`event_time` each, ``end`` after ``start``.

    Raises
    ------
    GridFlexError
        A time :func:`event_time` refuses, or an ``end`` not after ``start``.
    """
    s, e = event_time(start, "start"), event_time(end, "end")
    if e <= s:
        raise GridFlexError(f"end {e.isoformat()} is not after start {s.isoformat()}; give an "
                            "end at least an hour after the start (the window is start to end, "
                            "end excluded)")
    return s, e


def event_target_kw(value: Any) -> float:
    """A grid event's ``target_kw``: a finite number > 0 (numeric text read). [kW]"""
    return _finite(_number(value), "target_kw [kW]", low=0, low_open=True)


def event_target_fraction(value: Any) -> float:
    """A grid event's ``target_fraction``: a finite number in (0, 1] (numeric text read). [-]"""
    return _finite(_number(value), "target_fraction [-]", low=0, high=1, low_open=True)


def event_targets(target_kw: Any, target_fraction: Any) -> tuple[float | None, float | None]:
    """Exactly one of ``target_kw`` and ``target_fraction``, the given one checked.

    Raises
    ------
    GridFlexError
        Both or neither given; the given one out of its range.
    """
    if (target_kw is None) == (target_fraction is None):
        said = ("both target_kw and target_fraction are given" if target_kw is not None
                else "neither target_kw nor target_fraction is given")
        raise GridFlexError(f"{said}; give exactly one of target_kw (kW below the baseline) "
                            "and target_fraction (share of the baseline, 0 < f <= 1)")
    if target_kw is not None:
        return event_target_kw(target_kw), None
    return None, event_target_fraction(target_fraction)


def event_notice(value: Any, unit: str = "minutes") -> pd.Timedelta:
    """How long before its start a grid event was announced: 0 to a year.

    Parameters
    ----------
    value
        A number (or numeric text) of ``unit``, or a :class:`~datetime.timedelta` (checked as
        minutes).
    unit
        ``minutes`` (``notice_minutes`` of the CLI and the API) or ``hours`` (``notice_hours``
        of an event file): the field the message names.

    Raises
    ------
    GridFlexError
        Not a finite number in 0..:data:`MAX_NOTICE_MINUTES` min.
    """
    if isinstance(value, timedelta):
        value, unit = pd.Timedelta(value) / pd.Timedelta(minutes=1), "minutes"
    symbol, per = NOTICE_UNITS[unit]
    v = _finite(_number(value), f"notice_{unit} [{symbol}] (how long before the start the "
                "event was announced, at most a year)", low=0, high=MAX_NOTICE_MINUTES / per)
    return pd.Timedelta(minutes=v * per)


@dataclass(frozen=True)
class GridEvent:
    """A grid operator's request to reduce a site's power in a window.

    Attributes
    ----------
    site
        Site id (as in the catalog).
    start, end
        The window, on the hour, ``start < end``, in the years 1970..2200 (ISO 8601 text with
        a zone is read). [UTC]
    target_kw
        Reduction asked, in site (facility) power below the baseline. [kW]
    target_fraction
        Reduction asked as a share of the baseline, in (0, 1]. Exactly one of ``target_kw``
        and ``target_fraction`` is given. [-]
    notice
        How long before ``start`` the event was announced, 0 to a year.
    id
        Event id, for reports and idempotent handling (default ``<site>@<start ISO>``).

    Raises
    ------
    GridFlexError
        ``"grid event at site <site>: <sentence>"``, the sentence of the rule broken
        (:func:`event_site`, :func:`event_window`, :func:`event_targets`,
        :func:`event_notice`): every entry point's words for it.
    """

    site: str
    start: pd.Timestamp
    end: pd.Timestamp
    target_kw: float | None = None
    target_fraction: float | None = None
    notice: pd.Timedelta = pd.Timedelta(hours=DEFAULT_NOTICE_HOURS)
    id: str = ""

    def __post_init__(self) -> None:
        what = f"grid event {self.id or ''}".strip()
        try:
            site = event_site(self.site)
        except InputError as exc:
            raise GridFlexError(f"{what}: {exc}") from None
        try:
            start, end = event_window(self.start, self.end)
            target_kw, target_fraction = event_targets(self.target_kw, self.target_fraction)
            notice = event_notice(self.notice)
        except InputError as exc:
            raise GridFlexError(f"{what} at site {site}: {exc}") from None
        for name, value in (("site", site), ("start", start), ("end", end),
                            ("target_kw", target_kw), ("target_fraction", target_fraction),
                            ("notice", notice)):
            object.__setattr__(self, name, value)
        if not self.id:
            object.__setattr__(self, "id", f"{site}@{start.strftime('%Y-%m-%dT%H:%MZ')}")

    @property
    def announced(self) -> pd.Timestamp:
        """When the event was announced: ``start - notice``. [UTC]"""
        return self.start - self.notice

    @property
    def hours(self) -> pd.DatetimeIndex:
        """The window's hourly slots (each labels the start of its hour). [UTC]"""
        return pd.date_range(self.start, self.end, freq="h", inclusive="left")

    def reduction_kw(self, baseline_kw: float) -> float:
        """The reduction asked against ``baseline_kw``: ``target_kw`` or the share. [kW]"""
        if self.target_kw is not None:
            return float(self.target_kw)
        return float(self.target_fraction or 0.0) * max(0.0, float(baseline_kw))


@dataclass(frozen=True)
class GridAgreement:
    """A site's flexible-load agreement with its grid operator or utility.

    Attributes
    ----------
    site
        Site id.
    target_kw, target_fraction
        The reduction an event asks by default (exactly one), in facility kW below the
        baseline or as a share of it. [kW] / [-]
    notice_hours
        Least notice the operator gives before an event. [h]
    max_event_hours
        Longest event window the agreement allows. [h]
    baseline_method
        How the baseline is computed (:class:`BaselineMethod`).
    baseline_days
        Prior like days (Y) of ``prior-days-mean`` and ``prior-days-high``. [days]
    baseline_high_days
        Days kept (X, the highest) by ``prior-days-high``, ``1 <= X <= baseline_days``; unused
        by the other methods. [days]
    shortfall_penalty_per_kwh
        Paid per kWh of reduction committed but not delivered. [currency/kWh]
    credit_per_kwh
        Earned per kWh of reduction delivered (up to the commitment). [currency/kWh]
    currency
        ISO 4217 code of the money amounts.
    event_slo_ms
        The latency SLO inference served at this site may be held to *during an event*
        (``None``: its own SLO, always). In an event hour, a demand the site could serve within
        its own SLO may be served from any site within ``event_slo_ms`` of its area, so the
        re-plan can move serving load away; the plan counts and names the GPU-hours served
        beyond their own SLO. Must be at least the demands' own SLO to loosen anything. [ms]
    """

    site: str
    target_kw: float | None = None
    target_fraction: float | None = 0.25
    notice_hours: float = DEFAULT_NOTICE_HOURS
    max_event_hours: float = 4.0
    baseline_method: BaselineMethod = BaselineMethod.PLAN_UNCOMMITTED
    baseline_days: int = DEFAULT_BASELINE_DAYS
    baseline_high_days: int = DEFAULT_BASELINE_HIGH_DAYS
    shortfall_penalty_per_kwh: float = 0.0
    credit_per_kwh: float = 0.0
    currency: str = "USD"
    event_slo_ms: float | None = None

    def __post_init__(self) -> None:
        what = "grid agreement"
        _site_id(self.site, what)
        where = f"{what} of site {self.site}"
        if self.target_kw is not None and self.target_fraction is not None:
            raise GridFlexError(f"{where}: give one of target_kw and target_fraction, not both")
        if self.target_kw is None and self.target_fraction is None:
            raise GridFlexError(f"{where}: give target_kw [kW] or target_fraction [-]")
        if self.target_kw is not None:
            object.__setattr__(self, "target_kw", _finite(
                self.target_kw, f"{where}: target_kw [kW]", low=0, low_open=True))
        else:
            object.__setattr__(self, "target_fraction", _finite(
                self.target_fraction, f"{where}: target_fraction [-]", low=0, high=1,
                low_open=True))
        object.__setattr__(self, "notice_hours", _finite(
            self.notice_hours, f"{where}: notice_hours [h]", low=0, high=24 * 7))
        object.__setattr__(self, "max_event_hours", _finite(
            self.max_event_hours, f"{where}: max_event_hours [h]", low=0, high=24,
            low_open=True))
        try:
            object.__setattr__(self, "baseline_method", BaselineMethod(self.baseline_method))
        except ValueError:
            raise GridFlexError(
                f"{where}: baseline_method {self.baseline_method!r} is not one of "
                f"{[m.value for m in BaselineMethod]}") from None
        d = self.baseline_days
        if isinstance(d, bool) or not isinstance(d, int) or not 1 <= d <= 90:
            raise GridFlexError(f"{where}: baseline_days must be a whole number in 1..90, "
                                f"got {d!r}")
        x = self.baseline_high_days
        if self.baseline_method is BaselineMethod.PRIOR_DAYS_HIGH and (
                isinstance(x, bool) or not isinstance(x, int) or not 1 <= x <= d):
            raise GridFlexError(f"{where}: baseline_high_days must be a whole number in "
                                f"1..baseline_days ({d}) for prior-days-high (e.g. 4 of 5, "
                                f"PJM's High 4 of 5), got {x!r}")
        for name in ("shortfall_penalty_per_kwh", "credit_per_kwh"):
            object.__setattr__(self, name, _finite(getattr(self, name),
                                                   f"{where}: {name}", low=0))
        if self.event_slo_ms is not None:
            object.__setattr__(self, "event_slo_ms", _finite(
                self.event_slo_ms, f"{where}: event_slo_ms [ms] (the latency inference may be "
                "served at during an event)", low=0, high=MAX_EVENT_SLO_MS, low_open=True))

    def event(self, start: Any, hours: int, *, id: str = "") -> GridEvent:
        """An event of this agreement's default target starting at ``start`` for ``hours``.

        Raises
        ------
        GridFlexError
            ``hours`` longer than ``max_event_hours``.
        """
        if hours > self.max_event_hours:
            raise GridFlexError(f"grid agreement of site {self.site}: an event of {hours} h "
                                f"is longer than max_event_hours {self.max_event_hours:g}")
        s = _hour_aligned(start, f"grid event at site {self.site} start")
        return GridEvent(self.site, s, s + pd.Timedelta(hours=hours), self.target_kw,
                         self.target_fraction, pd.Timedelta(hours=self.notice_hours), id)


def agreement_from_mapping(site: str, raw: dict[str, Any]) -> GridAgreement:
    """A :class:`GridAgreement` from a catalog's ``[sites.grid_agreement]`` table.

    Raises
    ------
    GridFlexError
        Unknown keys (named, with the known ones), or values the agreement refuses.
    """
    known = {"target_kw", "target_fraction", "notice_hours", "max_event_hours",
             "baseline_method", "baseline_days", "baseline_high_days",
             "shortfall_penalty_per_kwh", "event_slo_ms",
             "credit_per_kwh", "currency"}
    extra = sorted(set(raw) - known)
    if extra:
        raise GridFlexError(f"[sites.grid_agreement] of site {site}: unknown keys {extra}; "
                            f"known: {sorted(known)}")
    kw = dict(raw)
    if "target_kw" in kw and "target_fraction" not in kw:
        kw["target_fraction"] = None
    return GridAgreement(site=site, **kw)


@dataclass(frozen=True)
class Commitment:
    """A reduction the plan commits to deliver at a site in a window (and reserves).

    The plan keeps site (facility) power in every hour of the window at or below
    ``baseline_kw - reduction_kw`` (:attr:`limit_kw`).

    Attributes
    ----------
    site
        Site id.
    start, end
        The window, on the hour. [UTC]
    reduction_kw
        Committed reduction of facility power below the baseline. [kW]
    baseline_kw
        The baseline it is measured against (mean over the window). [kW]
    event_id
        The event it answers (empty for a commitment made on a forecast).
    baseline_method
        How ``baseline_kw`` was computed.
    """

    site: str
    start: pd.Timestamp
    end: pd.Timestamp
    reduction_kw: float
    baseline_kw: float
    event_id: str = ""
    baseline_method: BaselineMethod = BaselineMethod.PLAN_UNCOMMITTED

    def __post_init__(self) -> None:
        what = f"commitment {self.event_id}".strip()
        _site_id(self.site, what)
        start = _hour_aligned(self.start, f"{what} start")
        end = _hour_aligned(self.end, f"{what} end")
        if end <= start:
            raise GridFlexError(f"{what} at site {self.site}: end must be after start")
        object.__setattr__(self, "start", start)
        object.__setattr__(self, "end", end)
        b = _finite(self.baseline_kw, f"{what} at site {self.site}: baseline_kw [kW]", low=0)
        r = _finite(self.reduction_kw, f"{what} at site {self.site}: reduction_kw [kW]",
                    low=0, high=b)
        object.__setattr__(self, "baseline_kw", b)
        object.__setattr__(self, "reduction_kw", r)
        object.__setattr__(self, "baseline_method", BaselineMethod(self.baseline_method))

    @property
    def limit_kw(self) -> float:
        """Most facility power the site may draw in the window: baseline − reduction. [kW]"""
        return self.baseline_kw - self.reduction_kw

    @property
    def hours(self) -> pd.DatetimeIndex:
        """The window's hourly slots. [UTC]"""
        return pd.date_range(self.start, self.end, freq="h", inclusive="left")


@dataclass(frozen=True)
class PowerCapLevel:
    """One GPU power-cap level and its energy–time trade-off, relative to running uncapped.

    Attributes
    ----------
    gpu_type
        GPU type it applies to, or ``"*"`` for any type without its own rows.
    cap_fraction
        The power limit as a share of the board power (``nvidia-smi -pl``). [-]
    power_fraction
        Mean IT power drawn at this cap / uncapped. [-]
    time_factor
        Run time at this cap / uncapped (>= 1). [-]
    source
        Where the numbers come from (paper, measurement, or "interpolated between ...").
    """

    gpu_type: str
    cap_fraction: float
    power_fraction: float
    time_factor: float
    source: str = ""

    def __post_init__(self) -> None:
        where = f"power-cap level {self.gpu_type}@{self.cap_fraction!r}"
        object.__setattr__(self, "cap_fraction", _finite(
            self.cap_fraction, f"{where}: cap_fraction [-]", low=0, high=1, low_open=True))
        object.__setattr__(self, "power_fraction", _finite(
            self.power_fraction, f"{where}: power_fraction [-]", low=0, high=1, low_open=True))
        object.__setattr__(self, "time_factor", _finite(
            self.time_factor, f"{where}: time_factor [-]", low=1, high=4))

    @property
    def energy_factor(self) -> float:
        """IT energy at this cap / uncapped: ``power_fraction * time_factor``. [-]"""
        return self.power_fraction * self.time_factor

    @property
    def label(self) -> str:
        """Short name, e.g. ``cap60`` for a 60 % cap (``""`` when uncapped)."""
        return "" if self.cap_fraction >= 1.0 else f"cap{round(self.cap_fraction * 100)}"


@dataclass(frozen=True)
class PriorDaysBaseline:
    """A baseline computed from a site's recorded load (:func:`prior_days_baseline`).

    Attributes
    ----------
    method
        ``prior-days-mean`` or ``prior-days-high``.
    hours_kw
        ``{hour: kW}`` the baseline of each event hour. [kW]
    days
        The prior days averaged, most recent first: local dates on the site's clock (the
        event's local start date less whole days).
    candidates
        The ``baseline_days`` like days looked at, most recent first (``days`` is all of
        them for ``prior-days-mean``).
    """

    method: BaselineMethod
    hours_kw: dict[pd.Timestamp, float]
    days: tuple[Any, ...]
    candidates: tuple[Any, ...]


def _site_zone(tz: Any, where: str) -> ZoneInfo:
    """The site's IANA zone, or a :class:`GridFlexError` naming it."""
    try:
        if not isinstance(tz, str):
            raise TypeError(tz)
        return ZoneInfo(tz)
    except (ValueError, KeyError, TypeError, OSError):
        raise GridFlexError(f"{where}: time zone {tz!r} is not an IANA time zone such as "
                            "'America/New_York'; give the site's timezone from the catalog"
                            ) from None


def prior_days_baseline(load_kw: pd.Series, event: GridEvent,
                        method: BaselineMethod | str = BaselineMethod.PRIOR_DAYS_MEAN,
                        days: int = DEFAULT_BASELINE_DAYS,
                        high_days: int = DEFAULT_BASELINE_HIGH_DAYS, *, tz: str,
                        exclude_days: Any = (), like_days: bool = True,
                        lookback_days: int = BASELINE_LOOKBACK_DAYS) -> PriorDaysBaseline:
    """The customer baseline of an event from the site's recorded hourly load.

    Days and hours are the site's local ones (``tz``), as the ISOs define their baselines
    (PJM Manual 11 section 10, NYISO's and CAISO's CBLs on their local prevailing time): the
    event's *day* is the local date of its start, and candidate day ``k`` (1 ..
    ``lookback_days``) is that date less ``k`` calendar days, each event hour moved to the same
    local wall-clock time on it and converted back to UTC (so across a daylight-saving change
    an 18:00 event is compared with 18:00 on the prior days, 23 or 25 UTC hours apart). The
    prior days are the most recent ``days`` candidates that are *like* the event's day
    (Monday-Friday for a weekday event, Saturday or Sunday for a weekend one, by the local
    date, when ``like_days``), touch no date in ``exclude_days`` (local dates of earlier
    events, as every ISO excludes them) with any moved hour, and have a recorded load in
    every moved hour. ``prior-days-mean`` (CAISO/NAESB 10-in-10) averages all of them hour by
    hour; ``prior-days-high`` (PJM's High 4 of 5) keeps the ``high_days`` with the highest
    load summed over the window's hours (ties: the more recent) and averages those.

    Daylight-saving days: a local hour that does not exist on a candidate day (the hour
    skipped at spring-forward) makes that day ineligible, as a missing recorded hour does, so
    every baseline hour averages the same days; a local hour that occurs twice on a candidate
    day (fall-back) is taken at its first occurrence (daylight time). An event on a fall-back
    day whose window holds both occurrences of an hour compares both with that one local hour
    of the prior days. In UTC (or any zone without daylight saving) this is a shift of
    ``24 k`` hours.

    Parameters
    ----------
    load_kw
        The site's recorded facility power, indexed by the start of each hour (tz-aware
        UTC). Missing hours (absent or NaN) make their day ineligible. [kW]
    event
        The event (its window's hours are the baseline's hours).
    method
        ``prior-days-mean`` or ``prior-days-high`` (:class:`BaselineMethod`).
    days
        Like days looked at (Y). [days]
    high_days
        Days kept by ``prior-days-high`` (X), ``1 <= X <= days``. [days]
    tz
        The site's IANA time zone (``Site.timezone``), whose clock defines days and hours.
    exclude_days
        Local dates (``datetime.date``, on ``tz``'s clock) not eligible (earlier event days).
    like_days
        Only days of the event day's type (weekday / weekend) are eligible.
    lookback_days
        How far back days are looked for (:data:`BASELINE_LOOKBACK_DAYS`). [days]

    Returns
    -------
    PriorDaysBaseline

    Raises
    ------
    GridFlexError
        An unknown method or one that needs no history (``plan-uncommitted``), ``days`` or
        ``high_days`` out of range, a ``tz`` that is not an IANA zone, a load series that is
        not tz-aware, not on the hour or has negative or infinite values, or fewer than
        ``days`` eligible days within ``lookback_days`` (the message names the event, the days
        found and how to fix it).
    """
    where = f"grid event {event.id} at site {event.site}"
    try:
        m = BaselineMethod(method)
    except ValueError:
        raise GridFlexError(f"{where}: baseline method {method!r} is not one of "
                            f"{[x.value for x in BaselineMethod]}") from None
    if m is BaselineMethod.PLAN_UNCOMMITTED:
        raise GridFlexError(f"{where}: plan-uncommitted is the plan's own load, not computed "
                            "from history; give prior-days-mean or prior-days-high")
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= lookback_days:
        raise GridFlexError(f"{where}: baseline days must be a whole number in "
                            f"1..{lookback_days}, got {days!r}")
    if m is BaselineMethod.PRIOR_DAYS_HIGH and (
            isinstance(high_days, bool) or not isinstance(high_days, int)
            or not 1 <= high_days <= days):
        raise GridFlexError(f"{where}: prior-days-high keeps 1..{days} of the {days} days, got "
                            f"{high_days!r}")
    zone = _site_zone(tz, where)
    idx = load_kw.index
    if not isinstance(idx, pd.DatetimeIndex) or idx.tz is None:
        raise GridFlexError(f"{where}: the recorded load must be indexed by tz-aware UTC hours")
    idx = idx.tz_convert("UTC")
    if (idx != idx.floor("h")).any():
        raise GridFlexError(f"{where}: the recorded load has timestamps off the hour (first "
                            f"{idx[idx != idx.floor('h')][0].isoformat()}); give hourly means "
                            "labelled by the start of each hour")
    vals = pd.Series(pd.to_numeric(load_kw.to_numpy(), errors="coerce"), index=idx)
    bad = vals[(vals < 0) | ~vals.isna() & ~vals.abs().lt(float("inf"))]
    if len(bad):
        raise GridFlexError(f"{where}: the recorded load is negative or infinite at "
                            f"{bad.index[0].isoformat()} ({bad.iloc[0]!r} kW)")
    vals = vals[~vals.index.duplicated(keep="last")].dropna()
    excluded = set(exclude_days)
    hours = list(event.hours)
    walls = event.hours.tz_convert(zone).tz_localize(None)     # local wall-clock times
    event_day = walls[0].date()
    first = [True] * len(walls)             # a repeated (fall-back) hour: its first occurrence
    chosen: list[tuple[Any, list[float]]] = []
    for k in range(1, lookback_days + 1):
        moved_walls = walls - pd.Timedelta(days=k)             # calendar days on the wall clock
        day = moved_walls[0].date()
        if like_days and (day.weekday() >= 5) != (event_day.weekday() >= 5):
            continue
        if excluded & {w.date() for w in moved_walls}:
            continue
        moved = moved_walls.tz_localize(zone, ambiguous=first, nonexistent="NaT")
        if moved.isna().any():              # a local hour skipped at spring-forward
            continue
        got = [vals.get(h) for h in moved.tz_convert("UTC")]
        if any(v is None for v in got):
            continue
        chosen.append((day, [float(v) for v in got]))
        if len(chosen) == days:
            break
    if len(chosen) < days:
        found = ", ".join(str(d) for d, _ in chosen) or "none"
        local_end = event.end.tz_convert(zone)
        raise GridFlexError(
            f"{where}: the {m.value} baseline needs {days} prior "
            f"{'like ' if like_days else ''}days with recorded load in every hour of "
            f"{walls[0]:%H:%M}-{local_end:%H:%M} {tz} ({event.start:%H:%M}-{event.end:%H:%M} "
            f"UTC) within {lookback_days} days before {event_day} (local), found "
            f"{len(chosen)} ({found}); record more history, lower baseline_days, or name "
            "plan-uncommitted in the site's grid agreement")
    keep = chosen
    if m is BaselineMethod.PRIOR_DAYS_HIGH:
        # highest total over the window first; among equals the more recent (stable sort)
        keep = sorted(chosen, key=lambda c: -sum(c[1]))[:high_days]
        keep = [c for c in chosen if c in keep]
    out = {h: float(sum(c[1][i] for c in keep) / len(keep)) for i, h in enumerate(hours)}
    return PriorDaysBaseline(m, out, tuple(d for d, _ in keep), tuple(d for d, _ in chosen))


def read_grid_events(path: str | Path) -> list[GridEvent]:
    """Grid events from a CSV or JSON file.

    CSV columns: ``site,start,end`` and one of ``target_kw``/``target_fraction``, optional
    ``notice_hours`` and ``id``; JSON: a list of objects with the same keys.

    Raises
    ------
    GridFlexError
        A missing file, a row the event refuses (file and row named), duplicate ids.
    """
    p = Path(path)
    if not p.is_file():
        raise GridFlexError(f"grid events file {p} does not exist")
    rows: list[tuple[int, dict[str, Any]]]
    if p.suffix.lower() == ".json":
        try:
            data = json.loads(p.read_text())
        except json.JSONDecodeError as e:
            raise GridFlexError(f"{p}: not JSON ({e}); give a list of event objects") from None
        if not isinstance(data, list):
            raise GridFlexError(f"{p}: give a JSON list of event objects")
        rows = [(i + 1, r) for i, r in enumerate(data)]
    elif p.suffix.lower() == ".toml":
        data = tomllib.loads(p.read_text()).get("events", [])
        rows = [(i + 1, r) for i, r in enumerate(data)]
    else:
        with p.open(newline="") as f:
            rows = [(i + 2, {k: v for k, v in r.items() if v not in ("", None)})
                    for i, r in enumerate(csv.DictReader(f))]
    out: list[GridEvent] = []
    seen: set[str] = set()
    for row, r in rows:
        where = f"{p}, {'line' if p.suffix.lower() == '.csv' else 'event'} {row}"
        if not isinstance(r, dict):
            raise GridFlexError(f"{where}: an event is an object with site, start, end")
        missing = [k for k in ("site", "start", "end") if k not in r]
        if missing:
            raise GridFlexError(f"{where}: missing {missing}")
        try:   # the event's own rules read the cells (numbers as text too)
            ev = GridEvent(
                site=r["site"], start=r["start"], end=r["end"],
                target_kw=r.get("target_kw"), target_fraction=r.get("target_fraction"),
                notice=event_notice(r.get("notice_hours", DEFAULT_NOTICE_HOURS), "hours"),
                id=str(r.get("id", "")))
        except (InputError, ValueError, TypeError) as e:
            raise GridFlexError(f"{where}: {e}") from None
        if ev.id in seen:
            raise GridFlexError(f"{where}: duplicate event id {ev.id}; give each event its "
                                "own id")
        seen.add(ev.id)
        out.append(ev)
    return out
