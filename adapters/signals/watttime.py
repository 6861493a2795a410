"""WattTime API v3 client: login with bearer-token renewal, historical and forecast signals.

Provider documentation: WattTime API v3 (https://docs.watttime.org/). ``GET /login`` with HTTP
basic credentials answers ``{"token": ...}`` (valid 30 minutes); data calls send
``Authorization: Bearer <token>``. ``GET /v3/historical?region=&start=&end=&signal_type=`` (at most
32 days per request) and ``GET /v3/forecast?region=&signal_type=&horizon_hours=`` answer
``{"data": [{"point_time": ISO 8601 with offset, "value": number}], "meta": {"region",
"signal_type", "units", "data_point_period_seconds", "generated_at" (forecast), "warnings"}}``.

Rules (tested in ``tests/adapters/test_live_providers.py``):

* **signal types are kept apart**: ``co2_moer`` (marginal) and ``co2_aoer`` (average) land in
  different frame columns (``marginal_carbon_intensity_g_per_kwh`` /
  ``carbon_intensity_g_per_kwh``) and ``meta["emission_factor_type"]`` says ``marginal`` or
  ``average``; :func:`carbonsched.adapters.signals.providers.check_plan_signal_kinds` refuses a
  plan that mixes them;
* **units at the edge**: ``lbs_co2_per_mwh`` → g/kWh by ``× 453.59237 / 1000`` (1 lb = 453.59237 g,
  NIST SP 811 / the international yard and pound agreement of 1959; 1 MWh = 1000 kWh); a payload in
  other units raises;
* **time convention**: ``point_time`` is the **start** of a 5-minute interval; points are
  averaged to hour-start UTC hours (an hour with fewer than half its 12 points is NaN);
* a 401 on a data call logs in again once (token expired) and retries; a 401 on login is a
  :class:`~carbonsched.errors.ProviderConfigError` (credentials); a **403 for a region** is a
  ``ProviderConfigError`` naming the region (outside the subscription).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

import httpx
import pandas as pd

from carbonsched.adapters.http import Fetcher, register_secret, replace_secret
from carbonsched.adapters.signals._live import (
    as_float,
    chunks,
    finish,
    hourly_mean,
    iso_z,
    mask_implausible_ci,
    utc_stamps,
)
from carbonsched.errors import ProviderConfigError, ProviderError

SOURCE = "watttime"
GRAMS_PER_POUND = 453.59237
"""Grams per avoirdupois pound (exact by definition, 1959). [g/lb]"""

LBS_PER_MWH_TO_G_PER_KWH = GRAMS_PER_POUND / 1000.0
"""lbs CO2/MWh → g CO2/kWh: × 453.59237 g/lb ÷ 1000 kWh/MWh. [(g/kWh)/(lb/MWh)]"""

MAX_HISTORICAL_RANGE = pd.Timedelta(days=32)
"""Longest ``/v3/historical`` request (documented limit)."""

SIGNAL_KIND = {"co2_moer": "marginal", "co2_aoer": "average"}
"""WattTime signal type → emission-factor kind."""

SIGNAL_COLUMN = {"co2_moer": "marginal_carbon_intensity_g_per_kwh",
                 "co2_aoer": "carbon_intensity_g_per_kwh"}
"""WattTime signal type → frame column (a marginal signal never lands in the average column)."""

RATE_LIMIT = (3000, 300.0)
"""Documented limit: 3,000 requests per 5 minutes. [requests, s]"""


def read_watttime(payload: dict[str, Any], region: str | None = None,
                  signal_type: str | None = None) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Parse a WattTime v3 ``historical`` or ``forecast`` answer into hour-start g/kWh.

    Raises
    ------
    ProviderError
        No ``data``/``meta``, another region or signal type than asked, unknown units or
        signal type, a bad stamp, or a point period that does not divide an hour.
    """
    if not isinstance(payload, dict) or not isinstance(payload.get("data"), list):
        raise ProviderError(SOURCE, f"answer has no 'data' list: {str(payload)[:200]}")
    meta_in = payload.get("meta") or {}
    st = meta_in.get("signal_type", signal_type)
    if st not in SIGNAL_KIND:
        raise ProviderError(SOURCE, f"signal_type {st!r} is not one of {sorted(SIGNAL_KIND)}")
    if signal_type is not None and st != signal_type:
        raise ProviderError(SOURCE, f"asked for {signal_type}, the answer is {st}")
    got_region = meta_in.get("region", region)
    if region is not None and got_region != region:
        raise ProviderError(SOURCE, f"asked for region {region!r}, the answer is {got_region!r}")
    units = meta_in.get("units", "lbs_co2_per_mwh")
    if units != "lbs_co2_per_mwh":
        raise ProviderError(SOURCE, f"units {units!r}: only lbs_co2_per_mwh is understood")
    period_s = int(meta_in.get("data_point_period_seconds", 300))
    if period_s <= 0 or 3600 % period_s:
        raise ProviderError(SOURCE, f"data_point_period_seconds {period_s} does not divide an hour")
    rows = payload["data"]
    idx = utc_stamps([r.get("point_time") for r in rows], SOURCE, f"{got_region} {st}")
    col = SIGNAL_COLUMN[st]
    points = pd.DataFrame({col: as_float(r.get("value") for r in rows) * LBS_PER_MWH_TO_G_PER_KWH},
                          index=idx).sort_index()
    points = points[~points.index.duplicated(keep="first")]
    frame, notes = hourly_mean(points, pd.Timedelta(seconds=period_s), SOURCE)
    frame = frame.reindex(frame.index.floor("h").unique()) if len(frame) else frame
    frame["is_estimated"] = False
    frame = mask_implausible_ci(frame, SOURCE, f"{got_region} {st}", notes)
    frame, newest = finish(frame, SOURCE, f"{got_region} {st}", [col])
    notes.extend(str(w) for w in meta_in.get("warnings") or [])
    meta = {"source": SOURCE, "zone": got_region, "signal_type": st,
            "emission_factor_type": SIGNAL_KIND[st], "newest_value_at": newest,
            "generated_at": meta_in.get("generated_at"), "units_in": units,
            "time_convention": f"point_time = start of a {period_s // 60}-minute interval, UTC; "
                               "averaged to hour start",
            "notes": notes}
    return frame, meta


@dataclass
class WattTimeSession:
    """Bearer-token holder: logs in on first use and again after a 401.

    Attributes
    ----------
    fetcher
        The data fetcher (its client's base URL is the API root).
    username, password
        Credentials (never logged).
    logins
        How many logins were made.
    """

    fetcher: Fetcher
    username: str
    password: str = field(repr=False)
    token: str | None = field(default=None, repr=False)
    logins: int = 0

    def __post_init__(self) -> None:
        register_secret(self.password)  # never in a log line, nor its basic-auth encoding
        register_secret(base64.b64encode(f"{self.username}:{self.password}".encode()).decode())

    def login(self) -> str:
        """``GET /login`` with basic credentials; store and return the token.

        Raises
        ------
        ProviderConfigError
            401/403 on login (credentials wrong).
        """
        try:
            answer = self.fetcher.request(
                "GET", "/login", idempotent=False,
                auth=httpx.BasicAuth(self.username, self.password)).json()
        except ProviderError as exc:
            if exc.status in (401, 403):
                raise ProviderConfigError(
                    SOURCE, f"login refused (HTTP {exc.status}) for user {self.username!r}: "
                    "check WATTTIME_USERNAME / WATTTIME_PASSWORD") from exc
            raise
        token = answer.get("token") if isinstance(answer, dict) else None
        if not token:
            raise ProviderError(SOURCE, "login answered without a token")
        old, self.token = self.token, str(token)
        replace_secret(old, self.token)   # the expired token is no secret to keep any more
        self.logins += 1
        return self.token

    def get(self, path: str, params: dict[str, Any], region: str) -> Any:
        """Authorised ``GET``; one fresh login and retry after a 401.

        Raises
        ------
        ProviderConfigError
            403 for ``region`` (outside the subscription).
        """
        for attempt in (1, 2):
            token = self.token or self.login()
            try:
                return self.fetcher.get_json(path, params=params,
                                             headers={"Authorization": f"Bearer {token}"})
            except ProviderError as exc:
                if exc.status == 401 and attempt == 1:
                    self.token = None
                    continue
                if exc.status == 403:
                    raise ProviderConfigError(
                        SOURCE, f"region {region!r} is outside this account's subscription "
                        f"(HTTP 403 on {path}); use a region the plan covers or upgrade the "
                        "plan") from exc
                raise
        raise ProviderError(SOURCE, "token rejected twice")  # pragma: no cover


def get_watttime(session: WattTimeSession, region: str, start: pd.Timestamp, end: pd.Timestamp,
                 signal_type: str = "co2_moer") -> tuple[pd.DataFrame, dict[str, Any]]:
    """Hourly ``signal_type`` of ``region`` on ``[start, end)`` from ``/v3/historical``.

    Windows longer than 32 days are requested in chunks.
    """
    if signal_type not in SIGNAL_KIND:
        raise ProviderConfigError(SOURCE, f"signal_type {signal_type!r} is not one of "
                                  f"{sorted(SIGNAL_KIND)}")
    frames, notes = [], []
    meta: dict[str, Any] = {}
    parts = chunks(start, end, MAX_HISTORICAL_RANGE)
    for a, b in parts:
        payload = session.get("/v3/historical", {"region": region, "start": iso_z(a),
                                                 "end": iso_z(b), "signal_type": signal_type},
                              region)
        frame, meta = read_watttime(payload, region, signal_type)
        frames.append(frame[(frame.index >= a) & (frame.index < b)])
        notes.extend(meta["notes"])
    frame, newest = finish(pd.concat(frames), SOURCE, f"{region} {signal_type}",
                           [SIGNAL_COLUMN[signal_type]])
    meta.update(newest_value_at=newest, notes=list(dict.fromkeys(notes)), requests=len(parts))
    return frame, meta


def get_watttime_forecast(session: WattTimeSession, region: str,
                          signal_type: str = "co2_moer", horizon_hours: int = 24,
                          ) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The provider's forecast of ``signal_type`` for ``region`` (``/v3/forecast``), hourly."""
    payload = session.get("/v3/forecast", {"region": region, "signal_type": signal_type,
                                           "horizon_hours": horizon_hours}, region)
    frame, meta = read_watttime(payload, region, signal_type)
    meta["is_forecast"] = True
    return frame, meta
