"""Electricity Maps API v3 client: carbon intensity (past-range, history, forecast), mix.

Provider documentation: Electricity Maps API v3 (https://docs.electricitymaps.com/), endpoints
``GET /v3/carbon-intensity/past-range``, ``/v3/carbon-intensity/history`` (last 24 h),
``/v3/carbon-intensity/forecast`` and ``/v3/power-breakdown/past-range``; the token goes in the
``auth-token`` header. Each entry of ``data`` (or ``history``, ``forecast``) has ``zone``,
``carbonIntensity`` [gCO2eq/kWh] (``null`` when unknown), ``datetime`` (ISO 8601 UTC, ``Z``),
``updatedAt``, ``createdAt``, ``emissionFactorType`` (``lifecycle`` or ``direct``, chosen with
the ``emissionFactorType`` query parameter), ``isEstimated`` and ``estimationMethod``.

Time convention (tested in ``tests/adapters/test_live_providers.py``): ``datetime`` labels the
**start** of an hourly interval in **UTC**; nothing is shifted. Hourly past-range requests are
limited to 10 days: :func:`get_electricitymaps_api` cuts longer windows into 10-day chunks
(``end`` exclusive); an hour repeated at a chunk boundary with the same value is dropped, with a
different value raises :class:`~carbonsched.errors.ProviderError`.

Errors: 401 → :class:`~carbonsched.errors.ProviderConfigError` (token rejected); 403/404 for a
zone → ``ProviderConfigError`` naming the zone (outside the subscription or unknown).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from carbonsched.adapters.http import Fetcher
from carbonsched.adapters.signals._live import (
    as_float,
    chunks,
    finish,
    iso_z,
    mask_implausible_ci,
    utc_stamps,
)
from carbonsched.errors import ProviderConfigError, ProviderError

SOURCE = "electricitymaps"
MAX_PAST_RANGE = pd.Timedelta(days=10)
"""Longest hourly past-range request the API accepts (documented limit)."""

EMISSION_FACTOR_TYPES = ("direct", "lifecycle")
CI_COLUMN = {"direct": "carbon_intensity_g_per_kwh",
             "lifecycle": "carbon_intensity_lca_g_per_kwh"}
"""Frame column of each emission-factor type."""


def read_electricitymaps_api(payload: dict[str, Any], zone: str | None = None,
                             key: str = "data") -> tuple[pd.DataFrame, dict[str, Any]]:
    """Parse an Electricity Maps v3 carbon-intensity answer (past-range, history or forecast).

    Parameters
    ----------
    payload
        The decoded JSON: ``{"zone": ..., "data": [...]}`` (``history`` / ``forecast`` keys for
        those endpoints).
    zone
        The zone asked for; a payload for another zone raises.
    key
        ``data``, ``history`` or ``forecast``.

    Returns
    -------
    frame : DataFrame
        Index ``ts`` (UTC hour start); column ``carbon_intensity_g_per_kwh`` (direct) or
        ``carbon_intensity_lca_g_per_kwh`` (lifecycle), ``is_estimated`` (bool),
        ``estimation_method`` (str or None).
    meta : dict
        Provenance (see :mod:`carbonsched.adapters.signals._live`).

    Raises
    ------
    ProviderError
        A payload without ``key``, another zone, mixed emission-factor types, a bad stamp.
    """
    if not isinstance(payload, dict) or not isinstance(payload.get(key), list):
        raise ProviderError(SOURCE, f"answer has no {key!r} list: {str(payload)[:200]}")
    got_zone = payload.get("zone")
    if zone is not None and got_zone is not None and got_zone != zone:
        raise ProviderError(SOURCE, f"asked for zone {zone!r}, the answer is for {got_zone!r}")
    rows = payload[key]
    types = {r.get("emissionFactorType") for r in rows} - {None}
    if len(types) > 1:
        raise ProviderError(SOURCE, f"one answer mixes emission-factor types {sorted(types)}")
    eft = next(iter(types), payload.get("emissionFactorType", "lifecycle"))
    if eft not in EMISSION_FACTOR_TYPES:
        raise ProviderError(SOURCE, f"unknown emissionFactorType {eft!r}")
    col = CI_COLUMN[eft]
    idx = utc_stamps([r.get("datetime") for r in rows], SOURCE, f"{zone or got_zone} {key}")
    frame = pd.DataFrame({
        col: as_float(r.get("carbonIntensity") for r in rows),
        "is_estimated": np.array([bool(r.get("isEstimated", False)) for r in rows], dtype=bool),
        "estimation_method": [r.get("estimationMethod") for r in rows],
    }, index=idx)
    n_null = int(frame[col].isna().sum())
    notes = [f"{n_null} hour(s) with null carbonIntensity (kept NaN)"] if n_null else []
    frame = mask_implausible_ci(frame, SOURCE, f"{zone or got_zone} {key}", notes)
    frame, newest = finish(frame, SOURCE, f"{zone or got_zone} {key}", [col])
    n_est = int(frame["is_estimated"].sum())
    if n_est:
        methods = sorted({m for m in frame["estimation_method"].dropna()})
        notes.append(f"{n_est} of {len(frame)} hour(s) estimated by the provider"
                     + (f" ({', '.join(methods)})" if methods else ""))
    meta = {"source": SOURCE, "zone": got_zone or zone, "signal_type": "carbon_intensity",
            "emission_factor_type": eft, "newest_value_at": newest,
            "time_convention": "datetime = hour start, UTC (no shift)", "notes": notes,
            "is_forecast": key == "forecast"}
    return frame, meta


def read_power_breakdown(payload: dict[str, Any], zone: str | None = None
                         ) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Parse ``/v3/power-breakdown/past-range`` into renewable and low-carbon shares.

    ``renewablePercentage`` → ``renewable_pct``, ``fossilFreePercentage`` → ``low_carbon_pct``
    [%]; hour start, UTC.

    Raises
    ------
    ProviderError
        No ``data`` list or a bad stamp.
    """
    if not isinstance(payload, dict) or not isinstance(payload.get("data"), list):
        raise ProviderError(SOURCE, f"power breakdown has no 'data' list: {str(payload)[:200]}")
    rows = payload["data"]
    idx = utc_stamps([r.get("datetime") for r in rows], SOURCE, f"{zone} power breakdown")
    frame = pd.DataFrame({
        "renewable_pct": as_float(r.get("renewablePercentage") for r in rows),
        "low_carbon_pct": as_float(r.get("fossilFreePercentage") for r in rows),
        "is_estimated": np.array([bool(r.get("isEstimated", False)) for r in rows], dtype=bool),
    }, index=idx)
    frame, newest = finish(frame, SOURCE, f"{zone} power breakdown",
                           ["renewable_pct", "low_carbon_pct"])
    return frame, {"source": SOURCE, "zone": payload.get("zone", zone),
                   "signal_type": "power_breakdown", "emission_factor_type": None,
                   "newest_value_at": newest, "notes": [],
                   "time_convention": "datetime = hour start, UTC (no shift)"}


def _get(fetcher: Fetcher, path: str, zone: str, params: dict[str, str]) -> dict[str, Any]:
    try:
        return fetcher.get_json(path, params={"zone": zone, **params})
    except ProviderError as exc:
        if exc.status == 401:
            raise ProviderConfigError(
                SOURCE, "the auth-token was rejected (HTTP 401); set ELECTRICITYMAPS_TOKEN or "
                "the secrets file's [electricitymaps] token") from exc
        if exc.status in (403, 404):
            raise ProviderConfigError(
                SOURCE, f"zone {zone!r} is not available to this token (HTTP {exc.status}): "
                "check the zone id and the subscription's zones") from exc
        raise


def get_electricitymaps_api(fetcher: Fetcher, zone: str, start: pd.Timestamp,
                            end: pd.Timestamp, emission_factor_type: str = "direct",
                            ) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Hourly carbon intensity of ``zone`` on ``[start, end)`` from past-range, 10-day chunks.

    Parameters
    ----------
    fetcher
        From :func:`carbonsched.adapters.http.make_client` with the ``auth-token`` header.
    zone
        Electricity Maps zone id (``DE``, ``US-MIDA-PJM``).
    start, end
        Tz-aware hour bounds; ``end`` excluded.
    emission_factor_type
        ``direct`` or ``lifecycle``.

    Returns
    -------
    (DataFrame, dict)
        As :func:`read_electricitymaps_api`; ``meta["requests"]`` counts the chunks.
    """
    if emission_factor_type not in EMISSION_FACTOR_TYPES:
        raise ProviderConfigError(SOURCE, f"emission_factor_type {emission_factor_type!r} is "
                                  f"not one of {', '.join(EMISSION_FACTOR_TYPES)}")
    frames, notes = [], []
    meta: dict[str, Any] = {}
    parts = chunks(start, end, MAX_PAST_RANGE)
    for a, b in parts:
        payload = _get(fetcher, "/v3/carbon-intensity/past-range", zone,
                       {"start": iso_z(a), "end": iso_z(b),
                        "emissionFactorType": emission_factor_type})
        frame, meta = read_electricitymaps_api(payload, zone)
        if meta["emission_factor_type"] != emission_factor_type:
            raise ProviderError(SOURCE, f"asked for {emission_factor_type} factors, got "
                                f"{meta['emission_factor_type']}")
        frames.append(frame[(frame.index >= a) & (frame.index < b)])
        notes.extend(meta["notes"])
    col = CI_COLUMN[emission_factor_type]
    frame = pd.concat(frames) if frames else pd.DataFrame(columns=[col, "is_estimated"])
    frame, newest = finish(frame, SOURCE, f"{zone} past-range", [col])
    meta.update(newest_value_at=newest, notes=notes, requests=len(parts), zone=zone,
                emission_factor_type=emission_factor_type)
    return frame, meta


def get_electricitymaps_forecast(fetcher: Fetcher, zone: str,
                                 emission_factor_type: str = "direct",
                                 ) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The provider's carbon-intensity forecast for ``zone`` (``/v3/carbon-intensity/forecast``)."""
    payload = _get(fetcher, "/v3/carbon-intensity/forecast", zone,
                   {"emissionFactorType": emission_factor_type})
    return read_electricitymaps_api(payload, zone, key="forecast")


def get_electricitymaps_history(fetcher: Fetcher, zone: str,
                                emission_factor_type: str = "direct",
                                ) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The last 24 hours of ``zone`` (``/v3/carbon-intensity/history``)."""
    payload = _get(fetcher, "/v3/carbon-intensity/history", zone,
                   {"emissionFactorType": emission_factor_type})
    return read_electricitymaps_api(payload, zone, key="history")


def get_power_breakdown(fetcher: Fetcher, zone: str, start: pd.Timestamp, end: pd.Timestamp,
                        ) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Hourly renewable and low-carbon shares of ``zone`` on ``[start, end)``, 10-day chunks."""
    frames = []
    meta: dict[str, Any] = {}
    parts = chunks(start, end, MAX_PAST_RANGE)
    for a, b in parts:
        payload = _get(fetcher, "/v3/power-breakdown/past-range", zone,
                       {"start": iso_z(a), "end": iso_z(b)})
        frame, meta = read_power_breakdown(payload, zone)
        frames.append(frame[(frame.index >= a) & (frame.index < b)])
    frame, newest = finish(pd.concat(frames), SOURCE, f"{zone} power breakdown",
                           ["renewable_pct", "low_carbon_pct"])
    meta.update(newest_value_at=newest, requests=len(parts), zone=zone)
    return frame, meta
