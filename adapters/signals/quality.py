"""Provenance and quality records shared by every signal reader and the daily forecast.

A reader (file or live client) returns ``(frame, meta)``; besides ``notes`` its ``meta`` carries
three provenance keys built with this module, so that what a reader set aside reaches the plan:

``time_convention``
    ``"hour-start"`` or ``"hour-end"``: what the provider's stamps mark, *before* the reader moved
    them onto hour starts (the frame itself is always hour-start UTC).
``quarantined``
    A list of :class:`QuarantinedRow` dicts ``{"line", "ts", "reason"}`` (``line`` 1-based, header
    = line 1, ``None`` for a live payload; ``ts`` ISO 8601 UTC or ``None``): single bad rows kept
    out of the frame instead of refusing the file. :func:`refuse_if_too_many` refuses a file whose
    share of quarantined rows exceeds :data:`MAX_BAD_ROW_SHARE`.
``n_quarantined``
    ``len(quarantined)``.

:func:`check_time_zone` (called by the registry, which knows the site's time zone and longitude)
refuses a file whose stamps look like local time under a UTC header: the DST fingerprint (the
hour the zone's clock skips missing, the hour it repeats twice), and, for a sun-driven series,
a daily renewable peak far from solar noon or later in the daylight-saving season than in
standard time (a DST-shaped one-hour shift).

The daily forecast then calls :func:`check_history` on a site's signal frame at its issue time:
it measures the age of the newest observation of every signal (``site_signal_age_hours`` of the
plan), runs plausibility checks on carbon intensity (flat lines, implausible jumps, gaps, missing
newest hours) and returns a :class:`HistoryCheck` whose ``notes`` go into the plan's ``notes``
and whose ``degraded_reasons`` degrade the site's ``site_signal_quality`` to ``degraded``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from carbonsched.errors import DataFormatError

MAX_BAD_ROW_SHARE = 0.02
"""Largest share of a file's data rows that may be quarantined before the whole file is refused.
[-] Two per cent is about a week of a year's hourly file: a single revision, a DST repeat or a cut
last line is far below it, a file with a systematic fault (a wrong offset on every row of a season,
a column shifted by one) is far above it."""

CI_RANGE_G_PER_KWH: tuple[float, float] = (0.0, 1500.0)
"""Physical range of a grid's hourly carbon intensity. [gCO2eq/kWh] A grid's average cannot exceed
its most emitting generator; the most carbon-intensive large stations of the industrialised
countries emitted 1.58 (Hazelwood, Victoria, closed 2017) and 1.56 t CO2/MWh (Edwardsport,
Indiana), the next 1.27 (WWF, "Dirty Thirty", 2005). The highest hourly values in the 41 real files
of 2022-2023 (``../shared/data``) are 740 (direct) and 798 (life cycle). A file in lbs/MWh reads
2.2046 times its g/kWh value, so a coal-heavy zone leaves the range; a low-carbon zone in lbs/MWh
can stay inside it (no range check can see that)."""

SOLAR_AMPLITUDE_MIN_PCT = 10.0
"""Smallest daily swing of the renewable share (first-harmonic amplitude of its mean diurnal
profile) at which a series counts as sun-driven for the time-zone checks. [percentage points]
Measured on the real files: AU-NSW, CL-SIC, US-CAL-CISO (Electricity Maps and EIA-930) and JP-TK
reach 10-23 points in every season, AU-VIC, DE-LU and GB in daylight-saving time only; wind-,
hydro- or demand-driven series (GB and DE-LU in winter, CA-ON, PJM, ERCO, SG, ZA) stay below
7.5, where the peak says nothing about the clock."""

SOLAR_NOON_MAX_H = 1.5
"""Largest distance between a sun-driven series' daily renewable peak and the site's mean solar
noon (``12:00 UTC - longitude / 15°``; the equation of time, within ±0.27 h, ignored). [h]
Measured on every sun-driven season of the real files: at most 0.71 h (AU-VIC 2023, daylight
saving; EIA-930 CISO 0.66 h); a file in local time under a UTC header is off by the zone's UTC
offset (JP-TK 9 h, CISO 7-8 h, AU-NSW 10-11 h, CL-SIC 3-4 h)."""

DST_SHIFT_MAX_H = 0.4
"""Largest amount by which a sun-driven series' daily renewable peak may come later (UTC) in the
daylight-saving season than in standard time. [h] The sun keeps no daylight-saving time: the
measured differences on the sun-driven files are -0.44 to +0.20 h (demand, which follows the
local clock, pulls the peak earlier in summer). The same Electricity Maps files shifted by one
hour in daylight-saving time only give +0.74 to +1.20 h."""

MIN_SEASON_HOURS = 720
"""Hours with a renewable share a season needs before its daily peak is measured (30 days). [h]"""

SIGNAL_AGE_THRESHOLD_HOURS: dict[str, float] = {"carbon_intensity_g_per_kwh": 6.0}
"""Age past which a signal's newest observation degrades the site's signal quality. [h]

Ages count from the *start* of the newest observed hour to the issue time, so an up-to-date hourly
series has age 1 h. Carbon intensity drives the plan; its first forecast leads lean on the latest
observations (the ``last`` and ``mean24`` features of
:class:`carbonsched.forecasts.carbon_intensity.LeadRegression`), and real-time providers publish
within one to two hours (Electricity Maps' API, EIA-930's hourly grid monitor), so 6 h is three
times a normal delay. Other signals' ages are recorded and, past
:data:`NOTE_AGE_THRESHOLD_HOURS`, noted: weather and price feed PUE and green-surplus fallbacks
that already say so in the notes."""

NOTE_AGE_THRESHOLD_HOURS = 24.0
"""Age past which any other signal's newest observation is noted in the plan. [h]"""

AGE_COLUMNS: tuple[str, ...] = (
    "carbon_intensity_g_per_kwh",
    "renewable_pct",
    "price_usd_per_mwh",
    "temperature_c",
    "relative_humidity_pct",
)
"""Signals whose age :func:`signal_age_hours` reports (those present in the frame)."""

FLAT_LINE_HOURS = 24
"""Consecutive identical carbon-intensity values that make a flat line (a stuck meter or a
zero-filled export). [h] Measured on the 32 Electricity Maps files of 2022–2023: the longest run
of identical values is 14 h (BR-SP 2022), 5 h elsewhere."""

JUMP_LOW_FACTOR = 8.0
"""A carbon-intensity value below the trailing week's 1st percentile divided by this factor is an
implausible drop (e.g. ``63.25`` cut to ``6``). [-] Applied only where that percentile is at least
:data:`JUMP_MIN_P01_G_PER_KWH` (zones that really reach ~0, such as CA-ON, are not checked).
Jumps are *flagged* (noted), not quarantined: on the 41 real hourly files of 2022-2023 this rule
flags 3 hours, all in GB, whose hour-to-hour ratios of up to 21 occur in the provider's data, so a
jump alone does not prove a fault. A cut last line is quarantined by the reader instead
(:func:`carbonsched.adapters.signals._common.read_csv_cells`)."""

JUMP_HIGH_FACTOR = 4.0
"""A value above the trailing week's 99th percentile times this factor is a jump (flagged). [-]"""

JUMP_MIN_P01_G_PER_KWH = 20.0
"""Smallest trailing 1st percentile at which the low-jump check applies. [gCO2eq/kWh]"""

GAP_NOTE_HOURS = 24
"""A run of missing carbon-intensity hours at least this long inside the history is a gap that
degrades the site. [h]"""

RECENT_HOURS = 24
"""Window before the issue time in which any missing or quarantined hour degrades the site. [h]"""


@dataclass(frozen=True)
class QuarantinedRow:
    """One row a reader kept out of its frame.

    Attributes
    ----------
    line
        1-based line in the file (header = line 1); ``None`` for a live payload.
    ts
        The row's timestamp, ISO 8601 UTC, or ``None`` when it could not be read.
    reason
        Why, in words a person can act on.
    """

    line: int | None
    ts: str | None
    reason: str

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready ``{"line", "ts", "reason"}``."""
        return {"line": self.line, "ts": self.ts, "reason": self.reason}


@dataclass
class Quarantine:
    """The rows a reader sets aside, with their reasons (see the module docstring)."""

    rows: list[QuarantinedRow] = field(default_factory=list)

    def add(self, line: int | None, ts: pd.Timestamp | str | None, reason: str) -> None:
        """Record one quarantined row."""
        stamp = None if ts is None else (ts if isinstance(ts, str) else ts.isoformat())
        self.rows.append(QuarantinedRow(line, stamp, reason))

    def __len__(self) -> int:
        return len(self.rows)

    def note(self) -> str | None:
        """One sentence for ``meta["notes"]`` (counts by reason, first line); ``None`` if empty."""
        if not self.rows:
            return None
        kinds = Counter(r.reason.split(":")[0] for r in self.rows)
        first = self.rows[0]
        where = f"line {first.line}" if first.line is not None else first.ts
        return (f"{len(self.rows)} row(s) quarantined ("
                + "; ".join(f"{n} {k}" for k, n in kinds.items()) + f"), first {where}")

    def as_meta(self) -> dict[str, Any]:
        """``{"quarantined": [...], "n_quarantined": n}`` for a reader's meta."""
        return {"quarantined": [r.as_dict() for r in self.rows], "n_quarantined": len(self.rows)}


def refuse_if_too_many(path: str | Path, n_rows: int, quarantine: Quarantine,
                       max_share: float = MAX_BAD_ROW_SHARE) -> None:
    """Refuse a file whose quarantined share of ``n_rows`` data rows exceeds ``max_share``.

    Raises
    ------
    DataFormatError
        With the count, the share, the threshold and the first quarantined row's reason.
    """
    if n_rows <= 0 or len(quarantine) / n_rows <= max_share:
        return
    first = quarantine.rows[0]
    raise DataFormatError(
        Path(path),
        f"{len(quarantine)} of {n_rows} rows ({len(quarantine) / n_rows:.1%}) are bad, more than "
        f"the {max_share:.0%} carbonsched quarantines (first: {first.reason}); the file looks "
        "systematically wrong, fix or re-export it",
        row=first.line,
    )


def signal_age_hours(frame: pd.DataFrame, issued_at: pd.Timestamp,
                     columns: tuple[str, ...] = AGE_COLUMNS) -> dict[str, float | None]:
    """Age of the newest observation before ``issued_at`` of each signal in ``columns``. [h]

    The age runs from the start of the newest observed (non-NaN) hour to ``issued_at``; ``None``
    where the signal has no observation before it. Columns absent from ``frame`` are skipped.
    """
    hist = frame[frame.index < issued_at]
    out: dict[str, float | None] = {}
    for c in columns:
        if c not in hist:
            continue
        last = hist[c].last_valid_index()
        out[c] = None if last is None else float((issued_at - last) / pd.Timedelta(hours=1))
    return out


@dataclass
class HistoryCheck:
    """What :func:`check_history` found in one site's history.

    Attributes
    ----------
    frame
        The history with quarantined carbon-intensity hours set to NaN.
    age_hours
        Signal -> age of its newest observation [h] (``None``: no observation).
    notes
        Sentences for the plan's ``notes`` (each prefixed with the site id).
    degraded_reasons
        Short reasons that degrade the site's signal quality (empty: not degraded).
    n_quarantined
        Carbon-intensity hours set to NaN by the plausibility checks.
    """

    frame: pd.DataFrame
    age_hours: dict[str, float | None]
    notes: list[str] = field(default_factory=list)
    degraded_reasons: list[str] = field(default_factory=list)
    n_quarantined: int = 0


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """``(start, length)`` of each run of True in ``mask``."""
    out, start = [], None
    for i, m in enumerate(mask):
        if m and start is None:
            start = i
        elif not m and start is not None:
            out.append((start, i - start))
            start = None
    if start is not None:
        out.append((start, len(mask) - start))
    return out


def check_history(frame: pd.DataFrame, issued_at: pd.Timestamp, site_id: str,
                  column: str = "carbon_intensity_g_per_kwh",
                  quarantined: list[dict[str, Any]] | None = None) -> HistoryCheck:
    """Plausibility checks and signal ages of a site's history at ``issued_at``.

    Checks on ``column`` (rows before ``issued_at`` only), each counted in a note:

    * **flat line**: :data:`FLAT_LINE_HOURS` or more identical consecutive values (an all-zero
      series included) are quarantined (NaN);
    * **jump**: a value below the trailing 168 h's 1st percentile / :data:`JUMP_LOW_FACTOR` (where
      that percentile is >= :data:`JUMP_MIN_P01_G_PER_KWH`) or above its 99th percentile ×
      :data:`JUMP_HIGH_FACTOR` is flagged in a note (kept);
    * **gap**: a run of >= :data:`GAP_NOTE_HOURS` missing hours inside the history (filled for the
      forecaster's features from earlier days) is noted and degrades the site;
    * **recent holes**: a missing or quarantined hour among the last :data:`RECENT_HOURS` before
      the newest observation degrades the site (the forecaster fills it from the same hour a day
      earlier); hours after the newest observation are noted (and judged by the age rule);
    * **reader quarantine**: rows the reader quarantined (``quarantined``, the reader meta's list)
      whose stamps fall inside the frame's window before ``issued_at`` degrade the site;
    * **age**: the newest observation older than :data:`SIGNAL_AGE_THRESHOLD_HOURS` degrades the
      site; other signals older than :data:`NOTE_AGE_THRESHOLD_HOURS` are noted.

    Returns
    -------
    HistoryCheck
    """
    out = frame.copy()
    past = out.index < issued_at
    notes: list[str] = []
    degraded: list[str] = []
    n_q = 0
    if column in out and past.any():
        y = out.loc[past, column].astype(float)
        vals = y.to_numpy()
        bad = np.zeros(len(vals), dtype=bool)
        # flat lines
        same = np.zeros(len(vals), dtype=bool)
        same[1:] = np.isfinite(vals[1:]) & (vals[1:] == vals[:-1])
        flat_runs = [(s - 1, n + 1) for s, n in _runs(same) if n + 1 >= FLAT_LINE_HOURS]
        for s, n in flat_runs:
            bad[s:s + n] = True
        if flat_runs:
            s, n = flat_runs[0]
            notes.append(
                f"{site_id}: {column}: {sum(n for _, n in flat_runs)} hour(s) in "
                f"{len(flat_runs)} flat line(s) of >= {FLAT_LINE_HOURS} identical values "
                f"quarantined (first {y.index[s].isoformat()}, value {vals[s]:g})")
        # jumps against the trailing week
        clean = y.where(~bad)
        p01 = clean.rolling(168, min_periods=48).quantile(0.01).shift(1).to_numpy()
        p99 = clean.rolling(168, min_periods=48).quantile(0.99).shift(1).to_numpy()
        with np.errstate(invalid="ignore"):
            low = (p01 >= JUMP_MIN_P01_G_PER_KWH) & (vals < p01 / JUMP_LOW_FACTOR)
            high = vals > p99 * JUMP_HIGH_FACTOR
        jump = (low | high) & ~bad & np.isfinite(vals)
        if jump.any():
            i = int(np.flatnonzero(jump)[0])
            notes.append(
                f"{site_id}: {column}: {int(jump.sum())} implausible jump(s) against the "
                f"trailing week flagged, values kept (first {y.index[i].isoformat()}: "
                f"{vals[i]:g}, week 1st-99th percentile {p01[i]:.4g}-{p99[i]:.4g})")
        n_q = int(bad.sum())
        if n_q:
            y = y.where(~bad)
            out.loc[past, column] = y.to_numpy()
            degraded.append(f"{n_q} carbon-intensity hour(s) quarantined")
        # gaps inside the history (between the first and the last observation)
        first, last = y.first_valid_index(), y.last_valid_index()
        if first is not None and last is not None:
            inner = y.loc[first:last]
            gaps = [(s, n) for s, n in _runs(inner.isna().to_numpy()) if n >= GAP_NOTE_HOURS]
            if gaps:
                s, n = max(gaps, key=lambda g: g[1])
                notes.append(
                    f"{site_id}: {column}: {len(gaps)} gap(s) of >= {GAP_NOTE_HOURS} h in the "
                    f"history, longest {n} h from {inner.index[s].isoformat()}; the forecaster "
                    "fills them from the same hour 1-7 days earlier")
                degraded.append(f"a {n} h gap in the carbon-intensity history")
            recent = y[y.index >= issued_at - pd.Timedelta(hours=RECENT_HOURS)]
            inner_recent = recent[recent.index <= last]
            n_inner = int(inner_recent.isna().sum())
            if n_inner:
                notes.append(
                    f"{site_id}: {column}: {n_inner} of the last {RECENT_HOURS} hour(s) before "
                    f"the issue time missing or quarantined (first "
                    f"{inner_recent.index[inner_recent.isna().to_numpy()][0].isoformat()}); "
                    "filled for the forecast from the same hour on earlier days")
                degraded.append(f"{n_inner} recent carbon-intensity hour(s) filled")
            n_trailing = int((recent.index > last).sum())
            if n_trailing:
                notes.append(
                    f"{site_id}: {column}: the {n_trailing} newest hour(s) before the issue time "
                    f"have no value (newest observation {last.isoformat()}); filled for the "
                    "forecast from the same hour on earlier days")
    window = [q for q in quarantined or []
              if q.get("ts") and out.index[0] <= pd.Timestamp(q["ts"]) < issued_at]
    if window:
        notes.append(f"{site_id}: {len(window)} row(s) of the history quarantined by the reader "
                     f"(first {window[0]['ts']}: {window[0]['reason']})")
        degraded.append(f"{len(window)} row(s) quarantined by the reader")
    ages = signal_age_hours(out, issued_at)
    for col, age in ages.items():
        limit = SIGNAL_AGE_THRESHOLD_HOURS.get(col)
        if age is None:
            continue
        if limit is not None and age > limit:
            notes.append(f"{site_id}: newest {col} observation is {age:g} h old at the issue time "
                         f"{issued_at.isoformat()} (threshold {limit:g} h): signal quality "
                         "degraded")
            degraded.append(f"{col} {age:g} h old")
        elif limit is None and age > NOTE_AGE_THRESHOLD_HOURS:
            notes.append(f"{site_id}: newest {col} observation is {age:g} h old at the issue time "
                         f"(over {NOTE_AGE_THRESHOLD_HOURS:g} h)")
    return HistoryCheck(out, ages, notes, degraded, n_q)


# ---------------------------------------------------------------------------- time zone
def diurnal_peak(values: pd.Series) -> tuple[float, float]:
    """Hour (UTC) of the first harmonic's maximum of the mean diurnal profile, and its amplitude.

    Parameters
    ----------
    values
        An hourly series on a tz-aware UTC index (NaN ignored).

    Returns
    -------
    (float, float)
        Peak hour in ``[0, 24)`` [h] and amplitude (half the peak-to-trough swing of the first
        harmonic) in the series' unit.
    """
    prof = values.groupby(values.index.hour).mean().reindex(range(24)).to_numpy(float)
    h = np.arange(24)
    v = prof - np.nanmean(prof)
    c = np.nansum(v * np.cos(2 * np.pi * h / 24))
    s = np.nansum(v * np.sin(2 * np.pi * h / 24))
    return float((np.degrees(np.arctan2(s, c)) / 15.0) % 24.0), float(np.hypot(c, s) / 12.0)


def _wrap(hours: float) -> float:
    return (hours + 12.0) % 24.0 - 12.0


def _hhmm(hour: float) -> str:
    m = int(round(hour * 60)) % (24 * 60)
    return f"{m // 60:02d}:{m % 60:02d}"


def dst_transitions(tz: str, start: pd.Timestamp, end: pd.Timestamp,
                    ) -> list[tuple[pd.Timestamp, pd.Timedelta, pd.Timedelta]]:
    """UTC-offset changes of ``tz`` on ``[start, end]``: ``(first UTC hour after, old, new)``."""
    hours = pd.date_range(start.floor("h"), end.floor("h"), freq="h", tz="UTC")
    if len(hours) < 2:
        return []
    offsets = hours.tz_convert(tz).tz_localize(None) - hours.tz_localize(None)
    change = np.flatnonzero(offsets[1:] != offsets[:-1]) + 1
    return [(hours[i], offsets[i - 1], offsets[i]) for i in change]


def check_time_zone(frame: pd.DataFrame, stamps: dict[str, Any], path: str | Path, tz: str,
                    longitude: float, column: str = "renewable_pct") -> list[str]:
    """Refuse a signal file whose stamps look like local time under a UTC header.

    Two checks, documented in ``docs/reliability.md`` (*Signal providers and files*):

    1. **DST fingerprint** (any zone with daylight-saving time): local wall-clock time written
       under a UTC header misses the hour the zone's clock skips at each spring change and
       repeats the hour it repeats at each autumn change. When *every* change of ``tz`` inside
       the file shows it (within one hour, for hour-end files), the file is refused; a single
       change showing it is noted.
    2. **Solar shape** (a sun-driven series only: the renewable share swings at least
       :data:`SOLAR_AMPLITUDE_MIN_PCT` points a day in a season of at least
       :data:`MIN_SEASON_HOURS`): its daily peak must lie within :data:`SOLAR_NOON_MAX_H` of the
       site's mean solar noon in every season, and must not come more than
       :data:`DST_SHIFT_MAX_H` later in the daylight-saving season than in standard time (a
       DST-shaped one-hour shift).

    Parameters
    ----------
    frame
        The file's hourly frame (hour start, UTC; after any hour-convention alignment).
    stamps
        The reader's ``repeated_hours``, ``repeated_lines`` and ``inserted_hours``
        (:func:`carbonsched.adapters.signals._common.finalize`).
    path
        The file, for messages.
    tz
        The site's IANA time zone.
    longitude
        The site's longitude, east positive. [°]
    column
        The share whose daily shape is checked. [%]

    Returns
    -------
    list of str
        Notes (a partial fingerprint; seasons too short or not sun-driven are silent).

    Raises
    ------
    DataFormatError
        Naming the file, the rows (lines of the repeated hours, the missing hours, the season's
        first and last hour) and the values (peak hours, amplitude, solar noon).
    """
    notes: list[str] = []
    if frame.empty:
        return notes
    first, last = frame.index[0], frame.index[-1]
    changes = dst_transitions(tz, first, last)
    inserted = {pd.Timestamp(t) for t in stamps.get("inserted_hours", [])}
    repeated = [pd.Timestamp(t) for t in stamps.get("repeated_hours", [])]
    rep_lines = list(stamps.get("repeated_lines", []))
    one = pd.Timedelta(hours=1)
    found: list[str] = []
    for t, old, new in changes:
        label = t + (old if new > old else new)
        window = {label - one, label, label + one}
        if new > old:
            hit = sorted(window & inserted)
            if hit:
                found.append(f"hour {hit[0].isoformat()} missing where {tz} skips "
                             f"{label.strftime('%Y-%m-%d %H:%M')}")
        else:
            hit_i = [i for i, r in enumerate(repeated) if r in window]
            if hit_i:
                i = hit_i[0]
                found.append(f"hour {repeated[i].isoformat()} twice (line {rep_lines[i]} "
                             f"repeats it) where {tz} repeats "
                             f"{label.strftime('%Y-%m-%d %H:%M')}")
    if changes and len(found) == len(changes):
        raise DataFormatError(
            Path(path), f"the timestamps look like local wall-clock time ({tz}) under a UTC "
            f"header: at every daylight-saving change in the file the clock's fingerprint shows "
            f"({'; '.join(found)}); re-export the file in UTC, or with a UTC offset on every "
            "stamp", row=rep_lines[0] if rep_lines else None)
    if found:
        notes.append(f"{'; '.join(found)}: one of the {len(changes)} daylight-saving changes "
                     f"of {tz} in the file looks like local time; the others do not, so the file "
                     "is read as UTC")
    if column not in frame or frame[column].notna().sum() < MIN_SEASON_HOURS:
        return notes
    y = frame[column].astype(float)
    hours = y.index
    offsets = hours.tz_convert(tz).tz_localize(None) - hours.tz_localize(None)
    dst = np.asarray(offsets > offsets.min()) if len(changes) else np.zeros(len(y), bool)
    noon = (12.0 - longitude / 15.0) % 24.0
    seasons = {"daylight-saving time": dst, "standard time": ~dst} if dst.any() else {
        "the file": np.ones(len(y), bool)}
    peaks: dict[str, float] = {}
    for name, mask in seasons.items():
        part = y[mask].dropna()
        if len(part) < MIN_SEASON_HOURS:
            continue
        peak, amp = diurnal_peak(part)
        if amp < SOLAR_AMPLITUDE_MIN_PCT:
            continue
        peaks[name] = peak
        off = _wrap(peak - noon)
        if abs(off) > SOLAR_NOON_MAX_H:
            raise DataFormatError(
                Path(path), f"{column} peaks at {_hhmm(peak)} UTC on average in {name} "
                f"({len(part)} hourly rows from {part.index[0].isoformat()} to "
                f"{part.index[-1].isoformat()}, daily swing {amp:.1f} points), {off:+.1f} h "
                f"from the site's solar noon ({_hhmm(noon)} UTC at longitude {longitude:g}°); "
                f"a sun-driven share peaks within {SOLAR_NOON_MAX_H:g} h of it, so the stamps "
                "look shifted (local time under a UTC header?); re-export the file in UTC")
    if len(peaks) == 2:
        shift = _wrap(peaks["daylight-saving time"] - peaks["standard time"])
        if shift > DST_SHIFT_MAX_H:
            d, st = y[dst].dropna(), y[~dst].dropna()
            raise DataFormatError(
                Path(path), f"{column} peaks {shift:.2f} h later in daylight-saving time "
                f"({_hhmm(peaks['daylight-saving time'])} UTC over {len(d)} rows from "
                f"{d.index[0].isoformat()}) than in standard time "
                f"({_hhmm(peaks['standard time'])} UTC over {len(st)} rows from "
                f"{st.index[0].isoformat()}); the sun keeps no daylight-saving time (at most "
                f"{DST_SHIFT_MAX_H:g} h allowed): the stamps look shifted by one hour while "
                f"{tz} keeps summer time (local time under a UTC header?); re-export the file "
                "in UTC")
    return notes
