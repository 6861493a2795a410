"""EnergyPlus weather files (EPW), e.g. climate.onebuilding.org TMYx typical years.

Format: U.S. DOE, *EnergyPlus Auxiliary Programs*, "Weather Converter Program", EPW data
dictionary: 8 header lines (``LOCATION,city,state,country,source,WMO,lat,lon,tz,elevation``
first, ``DATA PERIODS`` eighth), then one line per hour: ``year, month, day, hour (1..24),
minute, flags, dry bulb [°C], dew point [°C], relative humidity [%], station pressure [Pa],
...``. Missing-value codes: 99.9 (dry bulb, dew point), 999 (RH), 999999 (pressure) -> NaN.

Time rule: EPW hour ``h`` is the interval ``[h-1, h)`` in LOCAL STANDARD time (no DST) at the
header's offset (``LOCATION`` field 9, hours from UTC). It is returned labelled by its START
in UTC: ``ts = (h - 1) local standard - offset``. A typical year mixes source years per month,
so the rows' own year column is ignored and the file is laid onto the requested ``year``:

* every UTC hour of ``year`` is filled (8760, or 8784 in a leap year); UTC hours whose local
  standard time falls in the previous/next calendar year (e.g. 2023-01-01 00:00-06:00 UTC
  for UTC-7) take the typical year's Dec 31 / Jan 1 values of that month-day-hour
  (the typical year is treated as cyclic);
* **Feb 29**: in a leap ``year`` the typical year's Feb 28 values are used for Feb 29 (TMY
  files have no Feb 29; noted in ``meta["notes"]``); a file that has Feb 29 rows keeps them
  for leap years and drops them (noted) otherwise;
* a month-day-hour the file lacks stays NaN (noted).
"""

from __future__ import annotations

import calendar
import csv
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from carbonsched.adapters.signals._common import NA_TOKENS, check_file
from carbonsched.errors import DataFormatError

VARIABLE_MAP: dict[int, tuple[str, float]] = {
    6: ("temperature_c", 99.9),
    7: ("dew_point_c", 99.9),
    8: ("relative_humidity_pct", 999.0),
    9: ("pressure_pa", 999999.0),
}
"""EPW data field (0-based) -> (carbonsched column, missing-value code)."""

OUTPUT_COLUMNS = tuple(name for name, _ in VARIABLE_MAP.values())
N_HEADER_LINES = 8


def _header(path: Path, rows: list[list[str]]) -> dict[str, Any]:
    if not rows or not rows[0] or rows[0][0].strip().upper() != "LOCATION":
        raise DataFormatError(path, "first line must start with 'LOCATION' (not an EPW file)",
                              row=1)
    loc = rows[0]
    if len(loc) < 10:
        raise DataFormatError(path, f"LOCATION has {len(loc)} fields, expected 10", row=1)
    try:
        lat, lon, tz, elev = (float(loc[i]) for i in (6, 7, 8, 9))
    except ValueError as exc:
        raise DataFormatError(path, f"LOCATION latitude/longitude/time zone/elevation: {exc}",
                              row=1) from exc
    if not -12.0 <= tz <= 14.0:
        raise DataFormatError(path, f"LOCATION time zone {tz} h is outside -12..14", row=1)
    return {"city": loc[1].strip(), "state": loc[2].strip(), "country": loc[3].strip(),
            "data_source": loc[4].strip(), "wmo": loc[5].strip(), "latitude": lat,
            "longitude": lon, "tz_offset_hours": tz, "elevation_m": elev}


def _table(path: Path, rows: list[list[str]]) -> pd.DataFrame:
    """Data lines -> frame indexed by (month, day, hour_ending) with the output columns."""
    recs, lines = [], []
    for i, row in enumerate(rows[N_HEADER_LINES:], start=N_HEADER_LINES + 1):
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) < 10:
            raise DataFormatError(path, f"{len(row)} fields, expected at least 10", row=i)
        try:
            month, day, hour = int(row[1]), int(row[2]), int(row[3])
        except ValueError as exc:
            raise DataFormatError(path, f"month/day/hour not integers: {row[1:4]}",
                                  row=i) from exc
        if not (1 <= month <= 12 and 1 <= hour <= 24
                and 1 <= day <= calendar.monthrange(2000, month)[1]):
            raise DataFormatError(
                path, f"no such month/day/hour {month}/{day} hour {hour} (hours are 1..24)",
                row=i)
        vals = []
        for field, (name, code) in VARIABLE_MAP.items():
            text = row[field].strip()
            if text in NA_TOKENS:
                vals.append(np.nan)
                continue
            try:
                v = float(text)
            except ValueError as exc:
                raise DataFormatError(path, f"{name}: cannot read {text!r} as a number",
                                      row=i) from exc
            vals.append(np.nan if v >= code else v)
        recs.append((month, day, hour, *vals))
        lines.append(i)
    if not recs:
        raise DataFormatError(path, "no data lines after the 8 header lines",
                              row=N_HEADER_LINES + 1)
    table = pd.DataFrame(recs, columns=["month", "day", "hour", *OUTPUT_COLUMNS])
    table["line"] = lines
    dup = table.duplicated(["month", "day", "hour"], keep=False)
    if dup.any():
        d = table[dup]
        first = d.iloc[0]
        same = d[(d.month == first.month) & (d.day == first.day) & (d.hour == first.hour)]
        if not same[list(OUTPUT_COLUMNS)].nunique(dropna=False).le(1).all():
            raise DataFormatError(
                path, f"{int(first.month)}/{int(first.day)} hour {int(first.hour)} appears on "
                f"lines {int(same.line.iloc[0])} and {int(same.line.iloc[1])} with different "
                "values", row=int(same.line.iloc[1]))
        table = table.drop_duplicates(["month", "day", "hour"])
    return table.set_index(["month", "day", "hour"]).drop(columns="line")


def read_epw(path: str | Path, year: int) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read an EPW typical-year file and lay it onto the UTC hours of ``year``.

    Parameters
    ----------
    path
        ``.epw`` file.
    year
        Calendar year (UTC) to produce.

    Returns
    -------
    data : DataFrame, shape (8760 or 8784, 4)
        Index ``ts`` (tz-aware UTC, hourly, start of hour, all hours of ``year``). Columns
        ``temperature_c`` [°C] (dry bulb), ``dew_point_c`` [°C], ``relative_humidity_pct`` [%],
        ``pressure_pa`` [Pa] (station pressure).
    meta : dict
        ``source`` (``"epw"``), ``file``, ``city``, ``state``, ``country``, ``data_source``,
        ``wmo``, ``latitude``, ``longitude``, ``tz_offset_hours``, ``elevation_m``, ``year``,
        ``notes``.

    Raises
    ------
    DataFormatError
        Missing file, not an EPW header, a data line with too few fields, an impossible
        date/hour or an unreadable number (file, line, reason), conflicting duplicate hours.
    """
    p = check_file(path)
    try:
        with p.open(newline="", encoding="utf-8-sig", errors="strict") as fh:
            rows = list(csv.reader(fh))
    except UnicodeDecodeError:
        with p.open(newline="", encoding="latin-1") as fh:  # some EPWs carry Latin-1 names
            rows = list(csv.reader(fh))
    head = _header(p, rows)
    table = _table(p, rows)
    notes: list[str] = []
    idx = pd.date_range(pd.Timestamp(year=year, month=1, day=1, tz="UTC"),
                        pd.Timestamp(year=year + 1, month=1, day=1, tz="UTC"),
                        freq="h", inclusive="left", name="ts")
    local_std = idx.tz_localize(None) + pd.Timedelta(hours=head["tz_offset_hours"])
    month, day, hour = local_std.month, local_std.day, local_std.hour + 1
    has_feb29 = bool(((table.index.get_level_values(0) == 2)
                      & (table.index.get_level_values(1) == 29)).any())
    feb29 = (month == 2) & (day == 29)
    if feb29.any() and not has_feb29:
        day = np.where(feb29, 28, day)
        notes.append(f"{year} is a leap year: Feb 29 takes the typical year's Feb 28 values")
    if has_feb29 and not calendar.isleap(year):
        notes.append(f"Feb 29 rows of the file dropped ({year} is not a leap year)")
    keys = pd.MultiIndex.from_arrays([month, day, hour], names=["month", "day", "hour"])
    data = table.reindex(keys)
    data.index = idx
    missing = data.isna().all(axis=1)
    if missing.any():
        notes.append(f"{int(missing.sum())} hour(s) not in the file: NaN "
                     f"(first {idx[missing.to_numpy()][0].isoformat()})")
    meta: dict[str, Any] = {
        "source": "epw", "file": str(p), **head, "year": int(year),
        "units": {"temperature_c": "°C", "dew_point_c": "°C",
                  "relative_humidity_pct": "%", "pressure_pa": "Pa"},
        "time_convention": "hour-end",  # of the provider's stamps (frame: hour start)
        "notes": notes,
    }
    return data[list(OUTPUT_COLUMNS)], meta
