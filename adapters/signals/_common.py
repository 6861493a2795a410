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
* timestamps off the hour raise ``DataFormatError`` naming the line.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from carbonsched.adapters.signals.quality import Quarantine, refuse_if_too_many
from carbonsched.errors import DataFormatError
from carbonsched.timeaxis import ensure_hourly_utc

NA_TOKENS = frozenset({"", "NA", "NaN", "nan", "NAN", "null", "NULL", "None", "N/A", "n/a"})
"""Cell texts read as a missing value."""

_OFFSET_RE = re.compile(r"(?:Z|[+-]\d{2}:?\d{2})$")
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


def rename_columns(
    cells: pd.DataFrame,
    mapping: Mapping[str, str],
    required: Sequence[str],
    path: Path,
) -> pd.DataFrame:
    """Rename provider columns through ``mapping`` and check that ``required`` names exist.

    ``mapping`` maps provider column names (several spellings may map to one name) to
    carbonsched names; unmapped columns are kept under their provider name.

    Raises
    ------
    DataFormatError
        A required column is missing (line 1, with the columns found).
    """
    out = cells.rename(columns=dict(mapping))
    missing = [c for c in required if c not in out.columns]
    if missing:
        wanted = {c: [k for k, v in mapping.items() if v == c] for c in missing}
        raise DataFormatError(
            path,
            "missing column(s) "
            + "; ".join(f"{c} (provider name {' or '.join(map(repr, wanted[c]))})"
                        for c in missing)
            + f"; found {list(cells.columns)}",
            row=1,
        )
    return out


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
    has_offset = text.str.contains(_OFFSET_RE)
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

    Raises
    ------
    DataFormatError
        Conflicting duplicates (both lines named) or a timestamp off the hour.
    """
    idx = frame.index
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
