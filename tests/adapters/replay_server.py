"""A local replay of the signal providers' HTTP APIs, on loopback, for tests (never the internet).

A real HTTP server (FastAPI app under uvicorn, in a thread) answers the documented requests of
Electricity Maps v3, WattTime v3, EIA API v2, Open-Meteo, ENTSO-E (XML) and a generic CSV feed.
Payloads are written by this module from each provider's documented response schema; the values
come from the real 2023 (EIA: 2022) files in ``$CARBONSCHED_SHARED_DATA``, read at test time and
reshaped (never committed):

* Electricity Maps past-range/forecast/power-breakdown ← ``sustain-cluster/carbon_intensity``
  (``null`` where the file is empty, ``isEstimated``/``estimationMethod`` from the file); more
  than 10 days per request answers 400 like the real API;
* WattTime ← the same direct CI, g/kWh → lbs/MWh (÷ 0.45359237), as twelve 5-minute points per
  hour alternating ±``WT_JITTER`` lbs/MWh (their mean is the hour's value);
* EIA ← ``eia930-sustaindc/<BA>_NG_avgCI_2022.csv``, stamped hour-ENDING, paged at
  ``EIA_PAGE_ROWS`` rows;
* Open-Meteo ← ``sustain-cluster/weather/<ZONE>_2023.json`` (UTC when asked ``timezone=GMT``):
  the asked variables the archive has (temperature, humidity, wind speed in km/h, cloud cover;
  it has no short-wave radiation, which is left out of the answer), its actual weather served
  as the forecast of every hour;
* the feed ← ``electricity_prices_usd_utc`` as CSV with local-time stamps and offsets.

Faults are switched per provider (``state.faults[provider] = "500" | "timeout" | "429" | "503"
| "drip" | "401" | "403"``, for ``state.fault_times[provider]`` requests when set, else until
cleared); ``state.hits`` counts requests per provider:

* ``429`` and ``503`` carry ``Retry-After: state.retry_after`` (delta-seconds or an HTTP-date);
* ``drip`` answers 200 at once and then sends one byte every ``state.drip_every_s`` for
  ``state.drip_s`` seconds (each read is quick, the answer is not: an httpx read timeout never
  fires);
* EIA pages like the API: ``state.eia_page_rows`` rows per answer, in the order the ``sort``
  parameters ask; rows that the asked order leaves tied come in an order that differs from one
  request to the next (as a database without a total order gives them). ``state.faults["eia"] =
  "short"`` answers an empty page after the first one (total unchanged), ``"conflict"`` revises
  the value of the row before each later page's offset and repeats it at the top of that page.
  ``state.eia_late[fuel] = t`` leaves out that fuel's rows from hour ``t`` on (published late).
"""

from __future__ import annotations

import base64
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse

from carbonsched.adapters.signals.eia930 import FUELS, read_eia930
from carbonsched.adapters.signals.electricitymaps import read_electricitymaps
from carbonsched.adapters.signals.openmeteo import read_open_meteo
from carbonsched.adapters.signals.prices import read_prices
from carbonsched.ports import free_port

TOKEN = "em-test-token"
WT_USER, WT_PASSWORD = "wt-user", "wt-pass"
EIA_KEY = "eia-test-key"
ENTSOE_KEY = "entsoe-test-key"
WT_JITTER = 3.0
EIA_PAGE_ROWS = 1000
LB_G = 453.59237

WT_REGIONS = {"NYISO_NYC": "US-NY-NYIS", "PJM_DC": "US-MIDA-PJM", "CAISO_NORTH": "US-CAL-CISO"}
"""WattTime region → the zone whose file feeds it."""
WT_SUBSCRIBED = {"NYISO_NYC", "PJM_DC"}
"""Regions the replay's account may read (others answer 403)."""


@dataclass
class ReplayState:
    """Switchable behaviour and counters of the replay server."""

    data_dir: Path
    faults: dict[str, str] = field(default_factory=dict)
    hits: Counter = field(default_factory=Counter)
    slow_s: float = 3.0
    now: pd.Timestamp | None = None
    latest: pd.Timestamp | None = None
    """Newest hour Electricity Maps has published (a late provider); ``None``: all of it."""
    tokens_issued: int = 0
    expire_next_token: bool = False
    valid_tokens: set[str] = field(default_factory=set)
    fault_times: dict[str, int] = field(default_factory=dict)
    retry_after: str = "1"
    drip_s: float = 60.0
    drip_every_s: float = 0.2
    eia_page_rows: int = EIA_PAGE_ROWS
    eia_late: dict[str, pd.Timestamp] = field(default_factory=dict)
    """Fuel -> the first hour start whose row EIA has not published yet (a late fuel)."""
    stop: threading.Event = field(default_factory=threading.Event)


def _z(ts: pd.Timestamp) -> str:
    return ts.strftime("%Y-%m-%dT%H:%M:%S.000Z")


@lru_cache(maxsize=64)
def _em_frame(data_dir: str, zone: str) -> pd.DataFrame:
    parts = []
    for y in (2022, 2023):
        p = Path(data_dir) / "sustain-cluster" / "carbon_intensity" / f"{zone}_{y}_hourly.csv"
        if p.is_file():
            frame, _ = read_electricitymaps(p)
            parts.append(frame)
    if not parts:
        raise KeyError(zone)
    return pd.concat(parts).sort_index()


@lru_cache(maxsize=64)
def _weather(data_dir: str, zone: str) -> pd.DataFrame:
    frame, _ = read_open_meteo(Path(data_dir) / "sustain-cluster" / "weather" / f"{zone}_2023.json")
    return frame


@lru_cache(maxsize=64)
def _prices(data_dir: str, zone: str) -> pd.DataFrame:
    p = Path(data_dir) / "sustain-cluster" / "electricity_prices_usd_utc" / \
        f"{zone}_electricity_prices_2023.csv"
    frame, _ = read_prices(p)
    return frame


@lru_cache(maxsize=16)
def _eia(data_dir: str, ba: str) -> pd.DataFrame:
    frame, _ = read_eia930(Path(data_dir) / "eia930-sustaindc" / f"{ba}_NG_avgCI_2022.csv")
    return frame


def _window(request: Request, start_key: str = "start", end_key: str = "end"):
    q = request.query_params
    return (pd.Timestamp(q[start_key]).tz_convert("UTC"),
            pd.Timestamp(q[end_key]).tz_convert("UTC"))


def _num(v: Any) -> Any:
    return None if v is None or (isinstance(v, float) and not np.isfinite(v)) else float(v)


def build_app(state: ReplayState) -> FastAPI:
    """The replay application over ``state``."""
    app = FastAPI()
    dd = str(state.data_dir)

    def fault(provider: str) -> Response | None:
        state.hits[provider] += 1
        f = state.faults.get(provider)
        if f is not None and provider in state.fault_times:
            state.fault_times[provider] -= 1
            if state.fault_times[provider] <= 0:
                del state.fault_times[provider]
                state.faults.pop(provider, None)
        if f == "drip":
            def drip():
                yield b"{"
                end = time.monotonic() + state.drip_s
                while time.monotonic() < end and not state.stop.is_set():
                    time.sleep(state.drip_every_s)
                    yield b" "
                yield b"}"
            return StreamingResponse(drip(), media_type="application/json")
        if f == "503":
            return PlainTextResponse("maintenance (replayed)", status_code=503,
                                     headers={"Retry-After": state.retry_after})
        if f == "500":
            return PlainTextResponse("internal error (replayed)", status_code=500)
        if f == "timeout":
            time.sleep(state.slow_s)
            return PlainTextResponse("too late", status_code=200)
        if f == "429":
            return JSONResponse({"error": "rate limited"}, status_code=429,
                                headers={"Retry-After": state.retry_after})
        if f in ("401", "403"):
            return JSONResponse({"error": "replayed " + f}, status_code=int(f))
        return None

    # ------------------------------------------------------------ Electricity Maps v3
    def em_auth(request: Request) -> Response | None:
        if request.headers.get("auth-token") != TOKEN:
            return JSONResponse({"error": "Invalid auth-token"}, status_code=401)
        return None

    @app.get("/v3/carbon-intensity/past-range")
    def em_past_range(request: Request):
        if (r := fault("electricitymaps")) or (r := em_auth(request)):
            return r
        zone = request.query_params["zone"]
        start, end = _window(request)
        if end - start > pd.Timedelta(days=10):
            return JSONResponse({"error": "range exceeds 10 days for hourly data"},
                                status_code=400)
        try:
            frame = _em_frame(dd, zone)
        except KeyError:
            return JSONResponse({"error": f"Zone '{zone}' not found"}, status_code=404)
        eft = request.query_params.get("emissionFactorType", "lifecycle")
        col = "carbon_intensity_g_per_kwh" if eft == "direct" else \
            "carbon_intensity_lca_g_per_kwh"
        sub = frame[(frame.index >= start) & (frame.index < end)]
        if state.latest is not None:
            sub = sub[sub.index <= state.latest]
        data = [{"zone": zone, "carbonIntensity": _num(v), "datetime": _z(ts),
                 "updatedAt": _z(ts + pd.Timedelta(hours=2)), "createdAt": _z(ts),
                 "emissionFactorType": eft, "isEstimated": bool(est),
                 "estimationMethod": "TIME_SLICER_AVERAGE" if est else None}
                for ts, v, est in zip(sub.index, sub[col].to_numpy(float),
                                      sub["carbon_intensity_estimated"].to_numpy(bool),
                                      strict=True)]
        return {"zone": zone, "data": data}

    @app.get("/v3/power-breakdown/past-range")
    def em_breakdown(request: Request):
        if (r := fault("electricitymaps")) or (r := em_auth(request)):
            return r
        zone = request.query_params["zone"]
        start, end = _window(request)
        if end - start > pd.Timedelta(days=10):
            return JSONResponse({"error": "range exceeds 10 days"}, status_code=400)
        frame = _em_frame(dd, zone)
        sub = frame[(frame.index >= start) & (frame.index < end)]
        if state.latest is not None:
            sub = sub[sub.index <= state.latest]
        data = [{"zone": zone, "datetime": _z(ts), "renewablePercentage": _num(r),
                 "fossilFreePercentage": _num(lc), "isEstimated": bool(est)}
                for ts, r, lc, est in zip(sub.index, sub["renewable_pct"].to_numpy(float),
                                          sub["low_carbon_pct"].to_numpy(float),
                                          sub["carbon_intensity_estimated"].to_numpy(bool),
                                          strict=True)]
        return {"zone": zone, "data": data}

    @app.get("/v3/carbon-intensity/forecast")
    def em_forecast(request: Request):
        if (r := fault("electricitymaps")) or (r := em_auth(request)):
            return r
        zone = request.query_params["zone"]
        now = (state.now or pd.Timestamp("2023-07-15", tz="UTC")).floor("h")
        frame = _em_frame(dd, zone)
        eft = request.query_params.get("emissionFactorType", "lifecycle")
        col = "carbon_intensity_g_per_kwh" if eft == "direct" else \
            "carbon_intensity_lca_g_per_kwh"
        h = int(request.query_params.get("horizonHours", 24))
        sub = frame[(frame.index >= now) & (frame.index < now + pd.Timedelta(hours=h))]
        # the actual intensity served as the forecast, plus state.em_forecast_bias [g/kWh]
        bias = float(state.__dict__.get("em_forecast_bias", 0.0))
        return {"zone": zone, "forecast": [
            {"carbonIntensity": _num(v + bias), "datetime": _z(ts)}
            for ts, v in sub[col].items()],
            "updatedAt": _z(now), "emissionFactorType": eft}

    # ------------------------------------------------------------ WattTime v3
    @app.get("/login")
    def wt_login(request: Request):
        if r := fault("watttime"):
            return r
        auth = request.headers.get("authorization", "")
        ok = auth == "Basic " + base64.b64encode(f"{WT_USER}:{WT_PASSWORD}".encode()).decode()
        if not ok:
            return JSONResponse({"error": "invalid credentials"}, status_code=401)
        state.tokens_issued += 1
        token = f"wt-token-{state.tokens_issued}"
        state.valid_tokens.add(token)
        return {"token": token}

    def wt_check(request: Request, region: str) -> Response | None:
        auth = request.headers.get("authorization", "")
        token = auth.removeprefix("Bearer ")
        if token not in state.valid_tokens:
            return JSONResponse({"error": "token expired"}, status_code=401)
        if state.expire_next_token:
            state.expire_next_token = False
            state.valid_tokens.discard(token)
            return JSONResponse({"error": "token expired"}, status_code=401)
        if region not in WT_SUBSCRIBED:
            return JSONResponse({"error": "Unauthorized", "message":
                                 "Your account does not have access to this region"},
                                status_code=403)
        return None

    def wt_points(region: str, signal_type: str, start: pd.Timestamp, end: pd.Timestamp):
        frame = _em_frame(dd, WT_REGIONS[region])
        col = "carbon_intensity_g_per_kwh" if signal_type == "co2_aoer" else \
            "carbon_intensity_lca_g_per_kwh"
        sub = frame.loc[(frame.index >= start) & (frame.index < end), col]
        data = []
        for ts, v in sub.items():
            for k in range(12):
                val = None if not np.isfinite(v) else v / (LB_G / 1000) + (
                    WT_JITTER if k % 2 else -WT_JITTER)
                data.append({"point_time": (ts + pd.Timedelta(minutes=5 * k)).isoformat(),
                             "value": val})
        return data

    @app.get("/v3/historical")
    def wt_historical(request: Request):
        if r := fault("watttime"):
            return r
        region = request.query_params["region"]
        if r := wt_check(request, region):
            return r
        st = request.query_params.get("signal_type", "co2_moer")
        start, end = _window(request)
        return {"data": wt_points(region, st, start, end),
                "meta": {"region": region, "signal_type": st, "units": "lbs_co2_per_mwh",
                         "data_point_period_seconds": 300, "warnings": []}}

    @app.get("/v3/forecast")
    def wt_forecast(request: Request):
        if r := fault("watttime"):
            return r
        region = request.query_params["region"]
        if r := wt_check(request, region):
            return r
        st = request.query_params.get("signal_type", "co2_moer")
        now = (state.now or pd.Timestamp("2023-07-15", tz="UTC")).floor("h")
        h = int(request.query_params.get("horizon_hours", 24))
        return {"data": wt_points(region, st, now, now + pd.Timedelta(hours=h)),
                "meta": {"region": region, "signal_type": st, "units": "lbs_co2_per_mwh",
                         "data_point_period_seconds": 300, "generated_at": now.isoformat(),
                         "warnings": []}}

    # ------------------------------------------------------------ EIA v2
    @app.get("/v2/electricity/rto/fuel-type-data/data/")
    def eia(request: Request):
        mode = state.faults.get("eia")
        if mode not in ("short", "conflict") and (r := fault("eia")):
            return r
        if mode in ("short", "conflict"):
            state.hits["eia"] += 1
        q = request.query_params
        if q.get("api_key") != EIA_KEY:
            return JSONResponse({"error": {"code": "API_KEY_INVALID"}}, status_code=403)
        ba = q["facets[respondent][]"]
        try:
            frame = _eia(dd, ba)
        except Exception:  # noqa: BLE001 - unknown BA: EIA answers 200 with nothing
            return {"response": {"total": 0, "data": []}}
        first = pd.Timestamp(q["start"] + ":00", tz="UTC")
        last = pd.Timestamp(q["end"] + ":00", tz="UTC")
        rows = []
        ending_all = frame.index + pd.Timedelta(hours=1)
        sub = frame[(ending_all >= first) & (ending_all <= last)]
        for ts, row in zip(sub.index, sub.to_dict("records"), strict=True):
            ending = ts + pd.Timedelta(hours=1)
            for f in FUELS:
                if f in state.eia_late and ts >= state.eia_late[f]:
                    continue          # not published yet: no row at all
                v = row[f"generation_{f.lower()}_mw"]
                rows.append({"period": ending.strftime("%Y-%m-%dT%H"), "respondent": ba,
                             "fueltype": f, "type-name": f,
                             "value": None if not np.isfinite(v) else str(round(v, 3)),
                             "value-units": "megawatthours"})
        offset = int(q.get("offset", 0))
        # the asked order; ties in an order that changes from one request to the next
        keys = [q[f"sort[{i}][column]"] for i in range(8) if f"sort[{i}][column]" in q]
        tiebreak = random.Random(offset)
        rows.sort(key=lambda r: (*(r[k] for k in keys), tiebreak.random()))
        length = min(int(q.get("length", 5000)), state.eia_page_rows)
        page = rows[offset:offset + length]
        if mode == "short" and offset > 0:
            page = []
        elif mode == "conflict" and offset > 0:
            revised = {**rows[offset - 1], "value": str(float(rows[offset - 1]["value"] or 0)
                                                         + 111.0)}
            page = [revised, *page[:-1]]
        return {"response": {"total": str(len(rows)), "frequency": "hourly",
                             "dateFormat": "YYYY-MM-DD\"T\"HH24", "data": page}}

    # ------------------------------------------------------------ Open-Meteo
    @app.get("/v1/forecast")
    def open_meteo(request: Request):
        if r := fault("open-meteo"):
            return r
        q = request.query_params
        lat, lon = float(q["latitude"]), float(q["longitude"])
        zone = state.__dict__.setdefault("coords", {}).get((round(lat, 2), round(lon, 2)))
        if zone is None:
            return JSONResponse({"error": True, "reason": "no replay data at these coordinates"},
                                status_code=400)
        frame = _weather(dd, zone)
        start = pd.Timestamp(q["start_date"], tz="UTC")
        end = pd.Timestamp(q["end_date"], tz="UTC") + pd.Timedelta(days=1)
        idx = pd.date_range(start, end, freq="h", inclusive="left")
        sub = frame.reindex(idx)
        # the asked variables the archive has, in the API's units (wind in km/h, its default)
        have = {"temperature_2m": ("temperature_c", "°C", 1.0),
                "relative_humidity_2m": ("relative_humidity_pct", "%", 1.0),
                "wind_speed_10m": ("wind_speed_m_per_s", "km/h", 3.6),
                "cloud_cover": ("cloud_cover_pct", "%", 1.0)}
        asked = q.get("hourly", "temperature_2m,relative_humidity_2m").split(",")
        state.__dict__.setdefault("open_meteo_asked", []).append(asked)
        hourly: dict[str, Any] = {"time": [t.strftime("%Y-%m-%dT%H:%M") for t in idx]}
        units = {"time": "iso8601"}
        for var in asked:
            if var in have:
                col, unit, k = have[var]
                hourly[var] = [_num(v * k) for v in sub[col]]
                units[var] = unit
        return {"latitude": lat, "longitude": lon, "utc_offset_seconds": 0, "timezone": "GMT",
                "hourly_units": units, "hourly": hourly}

    # ------------------------------------------------------------ generic CSV feed (prices)
    @app.get("/feed/{zone}.csv")
    def feed(zone: str, request: Request):
        if r := fault("feed"):
            return r
        start, end = _window(request, "from", "to")
        try:
            frame = _prices(dd, zone)
        except Exception:  # noqa: BLE001
            return PlainTextResponse("unknown zone", status_code=404)
        sub = frame[(frame.index >= start) & (frame.index < end)]
        tz = state.__dict__.get("feed_tz", {}).get(zone, "UTC")
        lines = ["time,price"]
        for ts, v in sub["price_usd_per_mwh"].items():
            lines.append(f"{ts.tz_convert(tz).isoformat()},{'' if not np.isfinite(v) else v}")
        return PlainTextResponse("\n".join(lines) + "\n", media_type="text/csv")

    # ------------------------------------------------------------ ENTSO-E (XML)
    from replay_entsoe import add_entsoe_routes

    add_entsoe_routes(app, state, fault)
    return app


class ReplayServer:
    """Run :func:`build_app` under uvicorn in a thread on 127.0.0.1."""

    def __init__(self, state: ReplayState, port: int | None = None) -> None:
        self.state = state
        self.port = port or free_port()
        config = uvicorn.Config(build_app(state), host="127.0.0.1", port=self.port,
                                log_level="warning", access_log=False)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        """Base URL."""
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ReplayServer:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("replay server did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.state.stop.set()
        self.server.should_exit = True
        self.thread.join(timeout=10)
