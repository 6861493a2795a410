"""Open-Meteo forecast API client: hourly temperature and humidity at a site's coordinates.

Provider documentation: https://open-meteo.com/en/docs — ``GET /v1/forecast?latitude=&longitude=
&hourly=temperature_2m,relative_humidity_2m&timezone=GMT&start_date=&end_date=``; no key. The
answer has ``hourly.time`` (labels without offset), ``hourly.temperature_2m`` (°C),
``hourly.relative_humidity_2m`` (%), ``hourly_units`` and ``utc_offset_seconds``.

Time convention (tested): the client asks ``timezone=GMT``, so labels are UTC; the reader still
applies ``UTC = label - utc_offset_seconds`` (one fixed offset for the whole answer, as the file
reader :mod:`carbonsched.adapters.signals.openmeteo` documents) and refuses an answer without
``utc_offset_seconds``. Values are instantaneous at the label; each is used for the hour starting
there. ``null`` stays NaN; °F is converted to °C.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from carbonsched.adapters.http import Fetcher
from carbonsched.adapters.signals._live import as_float, finish
from carbonsched.errors import ProviderError

SOURCE = "open-meteo"
VARIABLES = {"temperature_2m": "temperature_c", "relative_humidity_2m": "relative_humidity_pct"}


def read_open_meteo_api(payload: dict[str, Any]) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Parse an Open-Meteo ``/v1/forecast`` answer into hour-start UTC temperature and humidity.

    Raises
    ------
    ProviderError
        No ``hourly.time``, no ``utc_offset_seconds``, lengths that differ, unknown units,
        a stamp off the hour.
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
    for var, col in VARIABLES.items():
        values = hourly.get(var)
        if values is None:
            raise ProviderError(SOURCE, f"answer has no hourly.{var}")
        if len(values) != len(times):
            raise ProviderError(SOURCE, f"hourly.{var} has {len(values)} values for "
                                f"{len(times)} times")
        v = as_float(values)
        unit = units.get(var)
        if col == "temperature_c" and unit == "°F":
            v = (v - 32.0) * 5.0 / 9.0
        elif unit not in (None, "°C", "%"):
            raise ProviderError(SOURCE, f"hourly_units.{var} {unit!r} is not understood")
        frame[col] = v
    frame["is_estimated"] = False
    frame, newest = finish(frame, SOURCE, "hourly", list(VARIABLES.values()))
    n_null = int(frame["temperature_c"].isna().sum())
    return frame, {
        "source": SOURCE, "zone": f"{payload.get('latitude')},{payload.get('longitude')}",
        "signal_type": "weather", "emission_factor_type": None, "newest_value_at": newest,
        "time_convention": f"labels at utc_offset_seconds={int(offset.total_seconds())}; "
                           "UTC = label - offset; value for the hour starting at the label",
        "notes": [f"{n_null} hour(s) with null temperature (NaN)"] if n_null else []}


def get_open_meteo(fetcher: Fetcher, latitude: float, longitude: float, start: pd.Timestamp,
                   end: pd.Timestamp) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Hourly temperature and humidity at (``latitude``, ``longitude``) for ``[start, end)``."""
    last = end - pd.Timedelta(hours=1)
    payload = fetcher.get_json("/v1/forecast", params={
        "latitude": f"{latitude:.4f}", "longitude": f"{longitude:.4f}",
        "hourly": ",".join(VARIABLES), "timezone": "GMT",
        "start_date": start.strftime("%Y-%m-%d"), "end_date": last.strftime("%Y-%m-%d")})
    frame, meta = read_open_meteo_api(payload)
    meta["requests"] = 1
    return frame[(frame.index >= start) & (frame.index < end)], meta
