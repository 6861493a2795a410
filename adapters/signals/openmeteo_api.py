"""Open-Meteo forecast API client: hourly weather at a site's coordinates.

Provider documentation: https://open-meteo.com/en/docs — ``GET /v1/forecast?latitude=&longitude=
&hourly=temperature_2m,relative_humidity_2m,wind_speed_10m,cloud_cover,shortwave_radiation
&timezone=GMT&start_date=&end_date=``; no key. The answer has ``hourly.time`` (labels without
offset), one list per variable (``temperature_2m`` °C, ``relative_humidity_2m`` %,
``wind_speed_10m`` km/h by default, ``cloud_cover`` %, ``shortwave_radiation`` W/m² as the mean
of the preceding hour), ``hourly_units`` and ``utc_offset_seconds``. The variables and their unit
conversions are the file reader's (:data:`carbonsched.adapters.signals.openmeteo.VARIABLE_MAP`,
:data:`~carbonsched.adapters.signals.openmeteo.UNITS_TO_SI`): nothing the file reader keeps is
dropped here. Temperature and humidity are required; a missing other variable stays NaN, noted.

Time convention (tested): the client asks ``timezone=GMT``, so labels are UTC; the reader still
applies ``UTC = label - utc_offset_seconds`` (one fixed offset for the whole answer, as the file
reader :mod:`carbonsched.adapters.signals.openmeteo` documents) and refuses an answer without
``utc_offset_seconds``. Values are instantaneous at the label; each is used for the hour starting
there, except the short-wave irradiance, a mean of the hour before its label, which is moved to
the start of that hour (:func:`~carbonsched.adapters.signals.openmeteo.to_hour_start`). ``null``
stays NaN; units are converted at the edge (°F → °C, km/h → m/s).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from carbonsched.adapters.http import Fetcher
from carbonsched.adapters.signals._live import as_float, finish
from carbonsched.adapters.signals.openmeteo import UNITS_TO_SI, VARIABLE_MAP, to_hour_start
from carbonsched.errors import ProviderError

SOURCE = "open-meteo"
VARIABLES = {"temperature_2m": "temperature_c", "relative_humidity_2m": "relative_humidity_pct",
             "wind_speed_10m": "wind_speed_m_per_s", "cloud_cover": "cloud_cover_pct",
             "shortwave_radiation": "irradiance_w_per_m2"}
"""Variables asked of ``/v1/forecast`` -> column (current names; the older spellings the file
reader also knows are read when an answer uses them)."""
REQUIRED = ("temperature_c", "relative_humidity_pct")
"""Columns an answer must have (the PUE model's inputs)."""
COLUMNS = tuple(VARIABLES.values())
"""Columns of :func:`read_open_meteo_api`'s frame (every one, NaN where absent)."""


def read_open_meteo_api(payload: dict[str, Any]) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Parse an Open-Meteo ``/v1/forecast`` answer into hour-start UTC weather.

    Returns
    -------
    frame : DataFrame
        Index ``ts`` (UTC hour start); columns :data:`COLUMNS` (``temperature_c`` [°C],
        ``relative_humidity_pct`` [%], ``wind_speed_m_per_s`` [m/s], ``cloud_cover_pct`` [%],
        ``irradiance_w_per_m2`` [W/m2]) and ``is_estimated``.
    meta : dict
        Provenance (:mod:`carbonsched.adapters.signals._live`).

    Raises
    ------
    ProviderError
        No ``hourly.time``, no ``utc_offset_seconds``, no temperature or humidity, lengths
        that differ, unknown units, a stamp off the hour.
    """
    if not isinstance(payload, dict) or not isinstance(payload.get("hourly"), dict):
        raise ProviderError(SOURCE, f"answer has no 'hourly' object: {str(payload)[:200]}")
    if "utc_offset_seconds" not in payload:
        raise ProviderError(SOURCE, "answer has no utc_offset_seconds; cannot place its labels "
                            "in UTC")
    hourly = payload["hourly"]
    times = hourly.get("time")
    if not isinstance(times, list):
        raise ProviderError(SOURCE, "answer has no hourly.time list")
    try:
        labels = pd.to_datetime(times, format="%Y-%m-%dT%H:%M")
    except ValueError as exc:
        raise ProviderError(SOURCE, f"hourly.time label not YYYY-MM-DDTHH:MM: {exc}") from exc
    offset = pd.Timedelta(seconds=int(payload["utc_offset_seconds"]))
    idx = pd.DatetimeIndex(labels - offset).tz_localize("UTC")
    units = payload.get("hourly_units") or {}
    frame = pd.DataFrame(index=idx)
    notes: list[str] = []
    for var, col in VARIABLE_MAP.items():
        values = hourly.get(var)
        if values is None or col in frame:
            continue
        if len(values) != len(times):
            raise ProviderError(SOURCE, f"hourly.{var} has {len(values)} values for "
                                f"{len(times)} times")
        conv = UNITS_TO_SI[col]
        unit = units.get(var, next(iter(conv)))
        if unit not in conv:
            raise ProviderError(SOURCE, f"hourly_units.{var} {unit!r} is not one of "
                                f"{sorted(conv)}")
        frame[col] = conv[unit](as_float(values))
    for col in REQUIRED:
        if col not in frame:
            var = next(v for v, c in VARIABLES.items() if c == col)
            raise ProviderError(SOURCE, f"answer has no hourly.{var}")
    for col in COLUMNS:
        if col not in frame:
            notes.append(f"no {col} in the answer (NaN)")
            frame[col] = float("nan")
    frame = to_hour_start(frame[list(COLUMNS)])
    frame["is_estimated"] = False
    frame, newest = finish(frame, SOURCE, "hourly", list(REQUIRED))
    n_null = int(frame["temperature_c"].isna().sum())
    if n_null:
        notes.append(f"{n_null} hour(s) with null temperature (NaN)")
    return frame, {
        "source": SOURCE, "zone": f"{payload.get('latitude')},{payload.get('longitude')}",
        "signal_type": "weather", "emission_factor_type": None, "newest_value_at": newest,
        "time_convention": f"labels at utc_offset_seconds={int(offset.total_seconds())}; "
                           "UTC = label - offset; value for the hour starting at the label",
        "notes": notes}


def get_open_meteo(fetcher: Fetcher, latitude: float, longitude: float, start: pd.Timestamp,
                   end: pd.Timestamp) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Hourly weather (:data:`COLUMNS`) at (``latitude``, ``longitude``) for ``[start, end)``.

    The last day asked is the day of ``end`` itself, so the preceding-hour irradiance of the
    last hour is in the answer.
    """
    last = end
    payload = fetcher.get_json("/v1/forecast", params={
        "latitude": f"{latitude:.4f}", "longitude": f"{longitude:.4f}",
        "hourly": ",".join(VARIABLES), "timezone": "GMT",
        "start_date": start.strftime("%Y-%m-%d"), "end_date": last.strftime("%Y-%m-%d")})
    frame, meta = read_open_meteo_api(payload)
    meta["requests"] = 1
    return frame[(frame.index >= start) & (frame.index < end)], meta
