"""Parsing helpers shared by the signal readers (private).

Every reader in :mod:`carbonsched.adapters.signals` follows the same rules, stated once here
and repeated in each reader's module docstring where they apply:

* **missing values stay missing**: empty cells and the tokens ``NA``, ``NaN``, ``nan``,
  ``null``, ``None``, ``N/A`` become NaN (never 0, never -1); hours absent from a file are
  inserted as NaN rows (:func:`carbonsched.timeaxis.ensure_hourly_utc`) and counted in
  ``meta["notes"]``;
* **unparsable input fails loudly**: a missing column, a cell that is not a number, or a
  timestamp that cannot be parsed raises :class:`~carbonsched.errors.DataFormatError` naming
  the file, the 1-based line (header = line 1) and the reason;
* **naive timestamps are refused** unless the provider's header declares the zone
  (``Datetime (UTC)``); timestamps with offsets (``+01:00``, ``Z``) are converted to UTC, so
  local times with DST offsets are handled row by row;
* ``MM/DD/YYYY`` dates (US providers) are read as month/day/year when a file's first timestamp
  has that shape; every row must then have it (a day-first date fails with its line);
* **duplicated timestamps**: exact duplicates (same stamp, same values) are dropped and counted
  in the notes. Duplicates with *conflicting* values are single bad rows, quarantined with their
  reason (:mod:`carbonsched.adapters.signals.quality`) rather than refusing the file:

  - a **repeated local hour at a DST fall-back** (two adjacent lines with one stamp and the next
    UTC hour absent: the exporter wrote the second 01:00 with the summer offset): the first line
    is kept, the repeat is quarantined and its true hour stays missing (NaN, counted);
  - otherwise a **revision** (the provider re-published the hour): the later line wins, the
    earlier one is quarantined, both lines named;

  a file whose quarantined share exceeds :data:`~carbonsched.adapters.signals.quality.
  MAX_BAD_ROW_SHARE` is still refused;
* a **cut last line** (no line end after it and fewer fields than the header, as a kill during
  a write leaves it) is quarantined: ``63.25`` cut to ``6`` would read as a valid number;
* timestamps off the hour raise ``DataFormatError`` naming the line;
* **headers are read through one alias table** (:data:`HEADER_ALIASES`, every file format in one
  place): a header is matched after :func:`normalize_header` (Unicode NFKC, so ``CO₂`` is ``CO2``;
  case and runs of spaces ignored), so an export whose spelling changed between releases still
  fills its column; a header the table does not know fails loudly (``DataFormatError`` on line 1
  naming the header and the known ones) instead of becoming a column of NaN;
* **carbon intensity must lie in** :data:`~carbonsched.adapters.signals.quality.
  CI_RANGE_G_PER_KWH` (0..1,500 g/kWh): a value above it is quarantined, and a file with more such
  rows than :data:`~carbonsched.adapters.signals.quality.MAX_BAD_ROW_SHARE` is refused as being in
  another unit (lbs/MWh reads 2.2 times g/kWh), the message naming file, lines and values.
"""

from __future__ import annotations

import csv
import re
import unicodedata
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from carbonsched.adapters.signals.quality import (
    CI_RANGE_G_PER_KWH,
    MAX_BAD_ROW_SHARE,
    Quarantine,
    refuse_if_too_many,
)
from carbonsched.errors import DataFormatError
from carbonsched.timeaxis import ensure_hourly_utc

NA_TOKENS = frozenset({"", "NA", "NaN", "nan", "NAN", "null", "NULL", "None", "N/A", "n/a"})
"""Cell texts read as a missing value."""

OFFSET_RE = re.compile(r"\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?\s*(?:Z|[+-]\d{2}(?::?\d{2})?)$")
"""An ISO 8601 stamp's UTC offset after its time (``Z``, ``+01:00``, ``-0500``, and ``+02``
as PostgreSQL writes ``timestamptz``); a date alone (``2023-01-01``) has none."""
_MDY_RE = re.compile(r"^\d{1,2}/\d{1,2}/\d{4}")
HALF_HOUR = pd.Timedelta(minutes=30)
_MDY_FORMATS = ("%m/%d/%Y %H:%M:%S", "%m/%d/%Y %H:%M", "%m/%d/%Y %I:%M:%S %p", "%m/%d/%Y")


def check_file(path: str | Path) -> Path:
    """Return ``path`` as a :class:`Path`, raising ``DataFormatError`` if it is not a file."""
    p = Path(path)
    if not p.is_file():
        what = "is a directory, not a file" if p.is_dir() else "does not exist"
        raise DataFormatError(
            p, f"{what}; check the path (real data lives under $CARBONSCHED_SHARED_DATA)"
        )
    return p


def _stamp_or_none(text: str) -> pd.Timestamp | None:
    """Best-effort UTC reading of a stamp for a quarantine record (naive = UTC)."""
    try:
        t = pd.Timestamp(text)
    except (ValueError, TypeError):
        return None
    if pd.isna(t):
        return None
    return t.tz_localize("UTC") if t.tzinfo is None else t.tz_convert("UTC")


def read_csv_cells(
    path: Path, quarantine: Quarantine | None = None
) -> tuple[pd.DataFrame, np.ndarray]:
    """Read a CSV file as text cells.

    A last line without a line end and with fewer fields than the header (a write cut short) is
    left out and recorded in ``quarantine`` (when given; otherwise it is read as before, its
    missing fields empty).

    Returns
    -------
    cells : DataFrame
        One ``str`` column per header field, blank lines removed.
    lines : ndarray of int, shape (n,)
        1-based line number of each row in the file (header = line 1).

    Raises
    ------
    DataFormatError
        Empty file, undecodable bytes, or a row with more fields than the header.
    """
    try:
        with path.open(newline="", encoding="utf-8-sig") as fh:
            text = fh.read()
        rows = list(csv.reader(text.splitlines(keepends=True)))
    except UnicodeDecodeError as exc:
        raise DataFormatError(path, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    if not rows:
        raise DataFormatError(path, "empty file (no header)", row=1)
    header = [h.strip() for h in rows[0]]
    if (quarantine is not None and len(rows) > 2 and not text.endswith(("\n", "\r"))
            and 0 < len(rows[-1]) < len(header)):
        cut = rows.pop()
        quarantine.add(len(rows) + 1, _stamp_or_none(cut[0]),
                       f"truncated last line: {len(cut)} of {len(header)} fields and no line "
                       f"end (last field {cut[-1]!r} may be cut)")
    body, lines = [], []
    for i, row in enumerate(rows[1:], start=2):
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) > len(header):
            raise DataFormatError(
                path, f"{len(row)} fields but the header has {len(header)}", row=i
            )
        body.append([c.strip() for c in row] + [""] * (len(header) - len(row)))
        lines.append(i)
    cells = pd.DataFrame(body, columns=header, dtype=object)
    if cells.empty:
        raise DataFormatError(path, "no data rows after the header", row=2)
    return cells, np.asarray(lines, dtype=int)


HEADER_ALIASES: dict[str, dict[str, tuple[str, ...]]] = {
    "electricitymaps": {
        "ts": ("Datetime (UTC)",),
        "carbon_intensity_g_per_kwh": ("Carbon Intensity gCO₂eq/kWh (direct)",),
        "carbon_intensity_lca_g_per_kwh": ("Carbon Intensity gCO₂eq/kWh (LCA)",
                                           "Carbon intensity gCO₂eq/kWh (Life cycle)",
                                           "Carbon intensity gCO₂eq/kWh (lifecycle)"),
        "low_carbon_pct": ("Low Carbon Percentage", "Carbon-free energy percentage (CFE%)"),
        "renewable_pct": ("Renewable Percentage", "Renewable energy percentage (RE%)"),
        "carbon_intensity_estimated": ("Data Estimated",),
        "estimation_method": ("Data Estimation Method",),
        "zone_id": ("Zone Id",),
        "zone_name": ("Zone Name",),
        "country": ("Country",),
        "data_source": ("Data Source",),
    },
    "prices": {
        "ts": ("Datetime (UTC)",),
        "local_time": ("Datetime (Local)",),
        "price_usd_per_mwh": ("Price (USD/MWh)",),
    },
    "eia930": {
        "ts": ("timestamp", "", "Unnamed: 0", "UTC time", "UTC Time at End of Hour"),
        **{f"generation_{f.lower()}_mw": (f,) for f in
           ("WND", "SUN", "WAT", "OIL", "NG", "COL", "NUC", "OTH")},
        "file_avg_ci_lca_g_per_kwh": ("avg_CI",),
    },
}
"""Every provider header carbonsched reads: file format -> carbonsched column -> the provider's
spellings (the first is the one written in messages). Headers are compared after
:func:`normalize_header`, so spellings that differ only in case, spacing or Unicode subscripts
(``CO₂``/``CO2``) need no entry. Sources: the SustainCluster/Electricity Maps CSV exports and the
Electricity Maps data portal's later names (``Life cycle``, ``CFE%``, ``RE%``); the
SustainCluster price files; EIA-930 fuel codes and the EIA grid monitor's ``UTC Time at End of
Hour``. A new spelling is one more entry here, nowhere else."""


def normalize_header(name: str) -> str:
    """A header as :data:`HEADER_ALIASES` compares it: NFKC, case-folded, single spaces, stripped.

    >>> normalize_header("Carbon Intensity  gCO₂eq/kWh (LCA)")
    'carbon intensity gco2eq/kwh (lca)'
    """
    return " ".join(unicodedata.normalize("NFKC", name).casefold().split())


def resolve_columns(
    cells: pd.DataFrame,
    fmt: str,
    required: Sequence[str],
    path: Path,
    first_column_is_time: bool = False,
) -> tuple[pd.DataFrame, dict[str, str]]:
    """Rename a file's columns to carbonsched names through :data:`HEADER_ALIASES` [``fmt``].

    Parameters
    ----------
    cells
        Text cells with the file's headers (:func:`read_csv_cells`).
    fmt
        The file format, a key of :data:`HEADER_ALIASES`.
    required
        carbonsched columns the file must have.
    path
        The file, for messages.
    first_column_is_time
        The first column is the timestamp whatever its header (a file written from a pandas
        index, whose index label may be anything), unless its header is a known one.

    Returns
    -------
    (DataFrame, dict)
        The cells with carbonsched column names, and carbonsched name -> the file's header.

    Raises
    ------
    DataFormatError
        On line 1: a header the table does not know (named, with the known ones and where to
        add a new spelling), two headers meaning one column, or a required column missing.
    """
    table = HEADER_ALIASES[fmt]
    lookup = {normalize_header(a): col for col, aliases in table.items() for a in aliases}
    provider: dict[str, str] = {}
    unknown: list[str] = []
    for i, h in enumerate(cells.columns):
        col = lookup.get(normalize_header(h))
        if col is None and i == 0 and first_column_is_time:
            col = "ts"
        if col is None:
            unknown.append(h)
            continue
        if col in provider:
            raise DataFormatError(path, f"columns {provider[col]!r} and {h!r} both mean {col}; "
                                  "keep one", row=1)
        provider[col] = h
    missing = [c for c in required if c not in provider]
    problems = []
    if missing:
        problems.append("missing column(s) " + "; ".join(
            f"{c} (provider name {' or '.join(repr(a) for a in table[c])})" for c in missing))
    if unknown:
        known = [a for aliases in table.values() for a in aliases if a]
        problems.append(
            f"unknown column(s) {', '.join(map(repr, unknown))} for a {fmt} file; known "
            f"columns: {', '.join(map(repr, known))} (case, spacing and subscripts ignored). "
            "If a provider renamed a column, add the new spelling to HEADER_ALIASES "
            f"in carbonsched/adapters/signals/_common.py")
    if problems:
        raise DataFormatError(path, "; ".join(problems) + f"; found {list(cells.columns)}",
                              row=1)
    return cells.rename(columns={h: c for c, h in provider.items()}), provider


def parse_numeric(
    values: pd.Series, path: Path, lines: np.ndarray, column: str
) -> pd.Series:
    """Parse text cells to float; NA tokens become NaN.

    Raises
    ------
    DataFormatError
        First cell that is neither a number nor an NA token, with its line.
    """
    text = values.astype(str).str.strip()
    na = text.isin(NA_TOKENS)
    num = pd.to_numeric(text.where(~na, None), errors="coerce")
    bad = num.isna() & ~na
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise DataFormatError(
            path, f"column {column!r}: cannot read {text.iloc[i]!r} as a number", row=int(lines[i])
        )
    return num.astype(float)


def parse_timestamps(
    values: pd.Series, path: Path, lines: np.ndarray, column: str, assume_utc: bool
) -> pd.DatetimeIndex:
    """Parse timestamps to a tz-aware UTC index.

    Parameters
    ----------
    values
        Text cells, ISO 8601 (``2023-01-01 00:00:00``, ``2023-01-01T00:00+01:00``) or
        ``MM/DD/YYYY HH:MM[:SS]`` (detected from the first row).
    assume_utc
        ``True`` when the provider's header declares UTC (then naive stamps are UTC);
        otherwise naive stamps are refused.

    Raises
    ------
    DataFormatError
        Empty, unparsable or naive timestamp, or a mix of stamps with and without offset.
    """
    text = values.astype(str).str.strip()
    empty = text.isin(NA_TOKENS)
    if empty.any():
        i = int(np.flatnonzero(empty.to_numpy())[0])
        raise DataFormatError(path, f"column {column!r}: empty timestamp", row=int(lines[i]))
    has_offset = text.str.contains(OFFSET_RE)
    if has_offset.any() and not has_offset.all():
        i = int(np.flatnonzero((has_offset != has_offset.iloc[0]).to_numpy())[0])
        raise DataFormatError(
            path,
            f"column {column!r}: {text.iloc[i]!r} mixes timestamps with and without a UTC "
            "offset; give every row an offset or none",
            row=int(lines[i]),
        )
    if not has_offset.iloc[0] and not assume_utc:
        raise DataFormatError(
            path,
            f"column {column!r}: timestamp {text.iloc[0]!r} is naive (no time zone); "
            "carbonsched refuses naive time, give an offset such as '+00:00'",
            row=int(lines[0]),
        )
    if _MDY_RE.match(text.iloc[0]):
        parsed, hint = None, "MM/DD/YYYY HH:MM[:SS]"
        for fmt in _MDY_FORMATS:
            trial = pd.to_datetime(text, format=fmt, errors="coerce", utc=True)
            if not pd.isna(trial.iloc[0]):
                parsed = trial
                break
        if parsed is None:
            parsed = pd.to_datetime(text, format=_MDY_FORMATS[0], errors="coerce", utc=True)
    else:
        parsed, hint = pd.to_datetime(text, format="ISO8601", errors="coerce", utc=True), (
            "ISO 8601, e.g. 2023-01-01 00:00:00"
        )
    bad = pd.isna(parsed)
    if bad.any():
        i = int(np.flatnonzero(np.asarray(bad))[0])
        raise DataFormatError(
            path,
            f"column {column!r}: cannot read {text.iloc[i]!r} as a timestamp (expected {hint})",
            row=int(lines[i]),
        )
    return pd.DatetimeIndex(parsed, name="ts")


def finalize(
    frame: pd.DataFrame,
    lines: np.ndarray,
    path: Path,
    notes: list[str],
    half_hour: bool = False,
    quarantine: Quarantine | None = None,
    stamps: dict[str, list[str]] | None = None,
) -> pd.DataFrame:
    """Apply the duplicate, on-the-hour and gap rules; return an hourly UTC frame.

    ``frame`` is indexed by tz-aware UTC timestamps in file order; ``lines`` gives each row's
    line. Exact duplicates are dropped, conflicting ones are quarantined (DST repeat: the first
    wins; revision: the later wins; see the module docstring) into ``quarantine`` (a fresh one
    if ``None``), gaps become NaN rows; each action is counted in ``notes``.

    With ``half_hour=True`` (numeric frames only), a series whose every stamp is at ``:30``
    (hourly data of a half-hour time zone such as Asia/Kolkata, UTC+05:30) is moved onto the
    UTC hours: the hour ``[h, h+1)`` gets the mean of the values stamped ``h-30min`` and
    ``h+30min`` (the time-weighted mean of two half-overlapping hourly intervals, and the
    linear interpolation of instantaneous values); NaN if either is missing.

    When ``stamps`` is a dict, it receives ``repeated_hours`` (each stamp found on more than
    one line) and ``inserted_hours`` (each hour absent from the file), ISO 8601 UTC, with
    ``repeated_lines``: what the time-zone check
    (:func:`carbonsched.adapters.signals.quality.check_time_zone`) reads.

    Raises
    ------
    DataFormatError
        Conflicting duplicates (both lines named) or a timestamp off the hour.
    """
    idx = frame.index
    if stamps is not None:
        rep = idx.duplicated(keep="first")
        stamps["repeated_hours"] = [t.isoformat() for t in idx[rep]]
        stamps["repeated_lines"] = [int(x) for x in np.asarray(lines)[rep]]
        if len(idx) and not (half_hour and (idx.minute == 30).all()):
            full = pd.date_range(idx.min(), idx.max(), freq="h")
            stamps["inserted_hours"] = [t.isoformat() for t in full.difference(idx)]
        else:
            stamps["inserted_hours"] = []
    if half_hour and len(idx) and (idx.minute == 30).all() and (idx.second == 0).all():
        out = finalize(frame.set_axis(idx + HALF_HOUR), lines, path, notes,
                       quarantine=quarantine)
        nxt = out.shift(-1, freq="h").reindex(out.index.union(out.index - pd.Timedelta("1h")))
        cur = out.reindex(nxt.index)
        avg = (cur + nxt) / 2.0
        avg = avg.loc[idx.min().floor("h"): idx.max().floor("h")]
        avg.index = pd.DatetimeIndex(avg.index, freq="h", name="ts")
        notes.append(
            "stamps at :30 (hourly data of a half-hour time zone): each UTC hour is the mean "
            "of the values stamped 30 min before and after its start"
        )
        return avg
    off = idx != idx.floor("h")
    if off.any():
        i = int(np.flatnonzero(off)[0])
        raise DataFormatError(
            path,
            f"timestamp {idx[i].isoformat()} is not on the hour; carbonsched reads hourly data",
            row=int(lines[i]),
        )
    own = quarantine if quarantine is not None else Quarantine()
    n_q0 = len(own)
    dup = idx.duplicated(keep=False)
    if dup.any():
        work = frame.assign(_line=lines)
        keep = np.ones(len(frame), dtype=bool)
        pos_of_line = {int(ln): i for i, ln in enumerate(lines)}
        present = set(idx)
        n_dropped = 0
        for ts, grp in work[dup].groupby(level=0, sort=False):
            vals = grp.drop(columns="_line")
            glines = [int(x) for x in grp["_line"]]
            kept = 0
            for j in range(1, len(vals)):
                a, b = vals.iloc[kept].to_numpy(), vals.iloc[j].to_numpy()
                same = all((pd.isna(x) and pd.isna(y)) or x == y
                           for x, y in zip(a, b, strict=True))
                if same:
                    keep[pos_of_line[glines[j]]] = False
                    n_dropped += 1
                    continue
                adjacent = pos_of_line[glines[j]] == pos_of_line[glines[kept]] + 1
                if adjacent and (ts + pd.Timedelta(hours=1)) not in present:
                    keep[pos_of_line[glines[j]]] = False
                    own.add(glines[j], ts,
                            f"repeated local hour at a DST fall-back: {ts.isoformat()} on lines "
                            f"{glines[kept]} and {glines[j]} with the next hour absent; the first "
                            "is kept, the repeat's true hour stays missing")
                else:
                    keep[pos_of_line[glines[kept]]] = False
                    own.add(glines[kept], ts,
                            f"conflicting duplicate: {ts.isoformat()} on lines {glines[kept]} and "
                            f"{glines[j]} with different values; the later revision (line "
                            f"{glines[j]}) wins")
                    kept = j
        frame = frame[keep]
        lines = lines[keep]
        if n_dropped:
            notes.append(f"{n_dropped} identical duplicated row(s) dropped")
    if quarantine is None and len(own) > n_q0:
        note = own.note()
        if note:
            notes.append(note)
    refuse_if_too_many(path, len(frame) + len(own), own)
    n_before = len(frame)
    out = ensure_hourly_utc(frame, name=str(path), duplicates="refuse", fill_gaps=True)
    out.index.name = "ts"
    if len(out) != n_before:
        missing = out.index.difference(frame.index)
        notes.append(
            f"{len(missing)} missing hour(s) inserted as NaN, first {missing[0].isoformat()}"
        )
    return out


def quarantine_implausible_ci(
    frame: pd.DataFrame,
    columns: Sequence[str],
    lines: np.ndarray,
    path: Path,
    quarantine: Quarantine,
    names: Mapping[str, str] | None = None,
    high: float = CI_RANGE_G_PER_KWH[1],
) -> pd.DataFrame:
    """Quarantine carbon-intensity values above ``high``; refuse a file with too many.

    A value above the physical range (:data:`~carbonsched.adapters.signals.quality.
    CI_RANGE_G_PER_KWH`) is a single bad row (set to NaN, recorded in ``quarantine`` with its
    line and value). More of them than :data:`~carbonsched.adapters.signals.quality.
    MAX_BAD_ROW_SHARE` of the rows is a file in another unit, refused.

    Parameters
    ----------
    frame
        Values by row, in file order (before :func:`finalize`). [gCO2eq/kWh]
    columns
        Carbon-intensity columns to check (those present).
    lines
        1-based file line of each row.
    path
        The file.
    quarantine
        Receives the bad rows.
    names
        carbonsched column -> the file's header, for messages.
    high
        Upper bound. [gCO2eq/kWh]

    Returns
    -------
    DataFrame
        ``frame`` with the implausible values NaN.

    Raises
    ------
    DataFormatError
        More than the share allowed: names the file, the count, the first lines and values,
        the range, and the likely unit (lbs/MWh when the values divided by 2.2046 fit).
    """
    out = frame.copy()
    names = names or {}
    for c in columns:
        if c not in out:
            continue
        vals = out[c].to_numpy(float)
        bad = np.flatnonzero(vals > high)
        if not len(bad):
            continue
        header = names.get(c, c)
        n = len(vals)
        if len(bad) / max(n, 1) > MAX_BAD_ROW_SHARE:
            first = ", ".join(f"line {int(lines[i])}: {vals[i]:g}" for i in bad[:5])
            in_lbs = vals[np.isfinite(vals)] * LBS_PER_MWH_TO_G_PER_KWH
            hint = (" The values divided by 2.2046 lie in the range: the file looks like lbs/MWh "
                    "(WattTime's and eGRID's unit); convert it to g/kWh (x 0.45359237)"
                    if len(in_lbs) and in_lbs.max() <= high else
                    " Check the file's unit (kg/MWh equals g/kWh; t/MWh and lbs/MWh do not)")
            raise DataFormatError(
                path, f"column {header!r}: {len(bad)} of {n} rows ({len(bad) / n:.1%}) above "
                f"{high:g} g/kWh, the physical range of a grid's carbon intensity (0..{high:g}); "
                f"first {first}.{hint}", row=int(lines[bad[0]]))
        for i in bad:
            quarantine.add(int(lines[i]), out.index[i],
                           f"implausible carbon intensity: {header} = {vals[i]:g} g/kWh on line "
                           f"{int(lines[i])}, above the physical range 0..{high:g}")
        out.iloc[bad, out.columns.get_loc(c)] = np.nan
    return out


LBS_PER_MWH_TO_G_PER_KWH = 453.59237 / 1000.0
"""lbs/MWh -> g/kWh (1 lb = 453.59237 g exactly, 1959 international pound). [(g/kWh)/(lb/MWh)]"""


def mask_out_of_range(
    frame: pd.DataFrame,
    columns: Sequence[str],
    lines: np.ndarray,
    notes: list[str],
    low: float = 0.0,
    high: float = np.inf,
) -> pd.DataFrame:
    """Replace values outside ``[low, high]`` in ``columns`` by NaN and note how many.

    ``lines`` are the file lines of ``frame``'s rows (same order), used in the note.
    """
    out = frame.copy()
    for c in columns:
        bad = ((out[c] < low) | (out[c] > high)).to_numpy()
        if bad.any():
            first = int(lines[np.flatnonzero(bad)[0]])
            notes.append(
                f"{int(bad.sum())} value(s) of {c} outside [{low:g}, {high:g}] set to NaN "
                f"(first on line {first})"
            )
            out.loc[bad, c] = np.nan
    return out
