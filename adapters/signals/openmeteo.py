"""Open-Meteo hourly JSON (forecast or historical-weather API response).

Provider documentation: https://open-meteo.com/en/docs (``hourly``, ``hourly_units``,
``timezone``, ``utc_offset_seconds``).

Time rule (what the files contain, checked on all 16 SustainCluster 2023 files):
``hourly.time`` holds local wall-clock labels WITHOUT offset, but the API applies ONE fixed
offset, ``utc_offset_seconds``, to the whole series: the offset valid *when the request was
made*, with no DST switch inside the series (Open-Meteo maintainers in open-meteo/open-meteo
issues #261, #488 and #1255). The SustainCluster files show exactly that: 8760 labels
``2023-01-01T00:00`` .. ``2023-12-31T23:00`` one hour apart with no gap and no repeat, so
``GB_2023.json`` contains ``2023-03-26T01:00`` (a non-existent hour in Europe/London) and a single
``2023-10-29T01:00``; the mean diurnal temperature peak keeps its label hour across the DST
dates (no 1 h jump); and ``utc_offset_seconds`` is winter time for Europe (GB 0, DE-LU +3600) but
summer time for North America (US-NY -14400, US-CAL -25200) — the offsets of the request date,
not of the data. Hence:

* with ``utc_offset_seconds`` present: ``UTC = label - utc_offset_seconds`` for every row (no
  non-existent or repeated hours can occur); the ``timezone`` name is reported in ``meta``
  only;
* without it (a hand-made file naming only an IANA ``timezone``): labels are wall-clock time
  of that zone; a repeated label (autumn) is resolved in file order, first occurrence =
  daylight time, second = standard time; a label that does not exist (spring gap), or a
  repeated hour that appears only once, raises ``DataFormatError`` naming the line;
* labels with an explicit offset or ``Z`` are converted as they are.

Half-hour zones (Asia/Kolkata, +05:30) give stamps at :30 UTC; each UTC hour then takes the
mean of the values 30 min before and after its start (linear interpolation of the
instantaneous Open-Meteo values).

Units are converted at the edge from ``hourly_units``: wind km/h, m/s, mph or kn -> m/s,
temperature °F -> °C. ``null`` values stay NaN.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from carbonsched.adapters.signals._common import OFFSET_RE, check_file, finalize
from carbonsched.errors import DataFormatError

VARIABLE_MAP: dict[str, str] = {
    "temperature_2m": "temperature_c",
    "relative_humidity_2m": "relative_humidity_pct",
    "relativehumidity_2m": "relative_humidity_pct",
    "cloudcover": "cloud_cover_pct",
    "cloud_cover": "cloud_cover_pct",
    "windspeed_10m": "wind_speed_m_per_s",
    "wind_speed_10m": "wind_speed_m_per_s",
    "shortwave_radiation": "irradiance_w_per_m2",
}
"""Open-Meteo variable -> carbonsched column: the one mapping of the file reader and the live
client (:mod:`carbonsched.adapters.signals.openmeteo_api`)."""

PRECEDING_HOUR_MEAN = frozenset({"irradiance_w_per_m2"})
"""Columns whose Open-Meteo value at label ``L`` is the mean over the hour *before* ``L``
(``shortwave_radiation``: "preceding hour mean", https://open-meteo.com/en/docs); the others
are instantaneous at the label. :func:`to_hour_start` moves them to the hour they describe."""

OUTPUT_COLUMNS = ("temperature_c", "relative_humidity_pct", "cloud_cover_pct",
                  "wind_speed_m_per_s")

UNITS_TO_SI: dict[str, dict[str, Any]] = {
    # unit text -> function to the carbonsched unit
    "wind_speed_m_per_s": {
        "km/h": lambda v: v / 3.6, "kmh": lambda v: v / 3.6, "m/s": lambda v: v,
        "ms": lambda v: v, "mph": lambda v: v * 0.44704, "kn": lambda v: v * 0.514444,
    },
    "temperature_c": {"°C": lambda v: v, "°F": lambda v: (v - 32.0) * 5.0 / 9.0},
    "relative_humidity_pct": {"%": lambda v: v},
    "cloud_cover_pct": {"%": lambda v: v},
    "irradiance_w_per_m2": {"W/m²": lambda v: v, "W/m2": lambda v: v},
}
"""Unit conversions (1 km/h = 1/3.6 m/s; 1 mph = 0.44704 m/s; 1 kn = 1852/3600 m/s)."""


def to_hour_start(frame: pd.DataFrame) -> pd.DataFrame:
    """Put each :data:`PRECEDING_HOUR_MEAN` column on the start of the hour it describes.

    Parameters
    ----------
    frame
        Hourly frame on a tz-aware UTC index (each stamp an Open-Meteo label).

    Returns
    -------
    DataFrame
        The same frame; a preceding-hour mean labelled ``L`` now stands at ``L - 1 h`` (the
        first label's value has no hour in the frame and is dropped; the last hour is NaN).
    """
    out = frame.copy()
    for c in PRECEDING_HOUR_MEAN & set(out.columns):
        out[c] = out[c].shift(-1, freq="h").reindex(out.index)
    return out


def _to_utc(
    labels: list[Any], doc: dict[str, Any], path: Path, lines: np.ndarray
) -> tuple[pd.DatetimeIndex, str]:
    raw = pd.Series([str(x) if x is not None else "" for x in labels])
    bad = raw.eq("")
    # utc=True: stamps with offsets may carry two across a DST change (naive ones are read
    # as they are below; this parse only finds the unparsable)
    parsed = pd.to_datetime(raw, format="ISO8601", errors="coerce", utc=True)
    bad |= parsed.isna()
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise DataFormatError(
            path, f"hourly.time[{i}] = {labels[i]!r} is not an ISO 8601 time",
            row=int(lines[i]),
        )
    has_offset = raw.str.contains(OFFSET_RE)
    if has_offset.any() and not has_offset.all():
        i = int(np.flatnonzero((has_offset != has_offset.iloc[0]).to_numpy())[0])
        raise DataFormatError(
            path, f"hourly.time[{i}] = {labels[i]!r} mixes times with and without a UTC "
            "offset; give every time an offset or none", row=int(lines[i]))
    if has_offset.all():
        return pd.DatetimeIndex(pd.to_datetime(raw, format="ISO8601", utc=True), name="ts"), (
            "labels carry their offset"
        )
    naive = pd.DatetimeIndex(pd.to_datetime(raw, format="ISO8601"))
    if "utc_offset_seconds" in doc:
        off = doc["utc_offset_seconds"]
        if not isinstance(off, int | float) or isinstance(off, bool):
            raise DataFormatError(path, f"utc_offset_seconds = {off!r} is not a number")
        idx = (naive - pd.Timedelta(seconds=float(off))).tz_localize("UTC")
        return pd.DatetimeIndex(idx, name="ts"), (
            f"labels are local time at the fixed offset utc_offset_seconds={int(off)} "
            f"(timezone {doc.get('timezone')!r}, no DST switch inside an Open-Meteo series)"
        )
    tzname = doc.get("timezone")
    if not tzname:
        raise DataFormatError(
            path, "hourly.time has no offset and the file has neither utc_offset_seconds nor "
            "timezone; carbonsched refuses naive time (request the data with timezone=GMT)",
            row=int(lines[0]),
        )
    # wall-clock labels of an IANA zone: repeated hours resolved in file order
    try:
        gone = naive.tz_localize(tzname, ambiguous="NaT", nonexistent="NaT").isna()
        # with non-existent hours shifted, only the ambiguous (repeated) hours stay NaT
        amb = gone & naive.tz_localize(tzname, ambiguous="NaT",
                                        nonexistent="shift_forward").isna()
    except Exception as exc:  # unknown zone name
        raise DataFormatError(
            path, f"timezone {tzname!r} is not an IANA time zone: {exc}"
        ) from exc
    nonexistent = gone & ~amb
    if nonexistent.any():
        i = int(np.flatnonzero(nonexistent)[0])
        raise DataFormatError(
            path,
            f"hourly.time[{i}] = {labels[i]!r} does not exist in {tzname!r} (skipped by the "
            "DST change); the file is not wall-clock time of that zone: give "
            "utc_offset_seconds or request the data with timezone=GMT",
            row=int(lines[i]),
        )
    counts = pd.Series(naive).map(pd.Series(naive).value_counts()).to_numpy()
    single = amb & (counts == 1)
    if single.any():
        i = int(np.flatnonzero(single)[0])
        raise DataFormatError(
            path,
            f"hourly.time[{i}] = {labels[i]!r} is a repeated (DST) hour in {tzname!r} but "
            "appears once, so daylight and standard time cannot be told apart; give "
            "utc_offset_seconds or request the data with timezone=GMT",
            row=int(lines[i]),
        )
    first = ~pd.Series(naive).duplicated(keep="first").to_numpy()  # 1st -> DST, 2nd -> std
    idx = naive.tz_localize(tzname, ambiguous=first, nonexistent="raise")
    return pd.DatetimeIndex(idx.tz_convert("UTC"), name="ts"), (
        f"labels are wall-clock time of {tzname!r}; repeated hours resolved in file order"
    )


def _time_item_lines(text: str, n: int) -> np.ndarray:
    """1-based line of each string in ``hourly.time`` (for error messages); 0 if not found."""
    out = np.zeros(n, dtype=int)
    m = re.search(r'"hourly"\s*:\s*\{', text)
    start = m.end() if m else 0
    m = re.compile(r'"time"\s*:\s*\[').search(text, start)
    if not m:
        return out
    end = text.find("]", m.end())
    pos, line = m.end(), text.count("\n", 0, m.end()) + 1
    for k, item in enumerate(re.finditer(r'"[^"]*"|null', text[m.end():end])):
        if k >= n:
            break
        line += text.count("\n", pos, m.end() + item.start())
        pos = m.end() + item.start()
        out[k] = line
    return out


def read_open_meteo(path: str | Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read an Open-Meteo hourly JSON response.

    Parameters
    ----------
    path
        JSON file with ``hourly`` (``time`` plus variables) and ``hourly_units``.

    Returns
    -------
    data : DataFrame, shape (n_hours, 4)
        Index ``ts`` (tz-aware UTC, hourly, start of hour). Columns ``temperature_c`` [°C],
        ``relative_humidity_pct`` [%], ``cloud_cover_pct`` [%], ``wind_speed_m_per_s`` [m/s]
        (NaN for a variable the file lacks, with a note), and ``irradiance_w_per_m2``
        [W/m2] when the file has ``shortwave_radiation`` (moved to the hour it averages,
        :func:`to_hour_start`).
    meta : dict
        ``source`` (``"open-meteo"``), ``file``, ``latitude``, ``longitude``, ``elevation_m``,
        ``timezone``, ``utc_offset_seconds``, ``time_rule`` (how labels were read), ``notes``.

    Raises
    ------
    DataFormatError
        Missing file, invalid JSON (with its line), no ``hourly.time``, arrays of different
        lengths, non-numeric values, unknown units, an unreadable or non-existent local time
        (file, line, reason), conflicting duplicated hours.
    """
    p = check_file(path)
    text = p.read_text(encoding="utf-8")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataFormatError(p, f"invalid JSON: {exc.msg}", row=exc.lineno) from exc
    hourly = doc.get("hourly") if isinstance(doc, dict) else None
    if not isinstance(hourly, dict) or not isinstance(hourly.get("time"), list):
        raise DataFormatError(p, "no 'hourly.time' array; request hourly variables")
    if not hourly["time"]:
        raise DataFormatError(p, "'hourly.time' is empty")
    units = doc.get("hourly_units", {}) or {}
    n = len(hourly["time"])
    lines = _time_item_lines(text, n)
    ts, rule = _to_utc(hourly["time"], doc, p, lines)
    notes: list[str] = []
    data = pd.DataFrame(index=ts)
    for key, col in VARIABLE_MAP.items():
        if key not in hourly or col in data:
            continue
        values = hourly[key]
        if not isinstance(values, list) or len(values) != n:
            raise DataFormatError(
                p, f"hourly.{key} has {len(values) if isinstance(values, list) else 'no'} "
                f"values but hourly.time has {n}"
            )
        arr = pd.to_numeric(pd.Series(values, dtype=object), errors="coerce")
        bad = arr.isna() & pd.Series([v is not None for v in values])
        if bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            raise DataFormatError(
                p, f"hourly.{key}[{i}] = {values[i]!r} is not a number (time {hourly['time'][i]})"
            )
        unit = units.get(key)
        conv = UNITS_TO_SI[col]
        if unit is None:
            unit = next(iter(conv))
            notes.append(f"no unit for {key} in hourly_units; assumed {unit}")
        if unit not in conv:
            raise DataFormatError(
                p, f"hourly_units.{key} = {unit!r} is not one of {sorted(conv)}"
            )
        data[col] = conv[unit](arr.astype(float).to_numpy())
    for col in OUTPUT_COLUMNS:
        if col not in data:
            data[col] = np.nan
            notes.append(f"no variable for {col}; left NaN")
    data = data[[*OUTPUT_COLUMNS, *(c for c in data if c not in OUTPUT_COLUMNS)]]
    data = to_hour_start(finalize(data, lines, p, notes, half_hour=True))
    meta: dict[str, Any] = {
        "source": "open-meteo",
        "file": str(p),
        "latitude": doc.get("latitude"),
        "longitude": doc.get("longitude"),
        "elevation_m": doc.get("elevation"),
        "timezone": doc.get("timezone"),
        "utc_offset_seconds": doc.get("utc_offset_seconds"),
        "time_rule": rule,
        "units": {"temperature_c": "°C", "relative_humidity_pct": "%",
                  "cloud_cover_pct": "%", "wind_speed_m_per_s": "m/s",
                  "irradiance_w_per_m2": "W/m2"},
        "time_convention": "hour-start",  # of the provider's stamps (frame: hour start)
        "notes": notes,
    }
    return data, meta
