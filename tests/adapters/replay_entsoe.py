"""ENTSO-E routes of the replay server: A75 generation, A69 wind/solar, A44 prices (XML).

Documents are written from the ENTSO-E Transparency Platform's IEC 62325 schemas
(``GL_MarketDocument`` for A75/A69, ``Publication_MarketDocument`` for A44,
``Acknowledgement_MarketDocument`` for "No matching data found"), with only the elements
entsoe-py reads. Values (real, read at test time):

* A75: the DACF DE mix (2019-2021), as PT15M points alternating ±``JITTER`` MW around the hourly
  value, so each hour's mean is exact; the production types in ``state.entsoe_hourly_psr`` (if
  set) come as PT60M points instead (a zone publishing some fuels every 15 minutes and others
  hourly), and ``state.entsoe_drop`` maps a production type to hour starts it leaves out (a gap);
* A69: the DACF DE test period's ENTSO-E day-ahead solar and wind forecasts (2021 H2), PT60M;
* A44: the DE-LU 2023 USD prices converted back to EUR with ``EUR_TO_USD_2023``.

``offset`` > 0 answers "No matching data" (entsoe-py pages A44 in 100-document steps).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
from fastapi import FastAPI, Request
from fastapi.responses import Response

from carbonsched.adapters.signals.dacf import read_dacf_mix
from carbonsched.adapters.signals.prices import read_prices
from carbonsched.adapters.signals.providers import EUR_TO_USD_2023

KEY = "entsoe-test-key"
DE_LU = "10Y1001A1001A82H"
JITTER = 8.0
DACF_TO_PSR = {"biomass": "B01", "coal": "B05", "nat_gas": "B04", "geothermal": "B09",
               "hydro": "B11", "nuclear": "B14", "oil": "B06", "solar": "B16", "wind": "B19",
               "unknown": "B20"}

NO_DATA = """<?xml version="1.0" encoding="UTF-8"?>
<Acknowledgement_MarketDocument xmlns="urn:iec62325.351:tc57wg16:451-1:acknowledgementdocument:7:0">
  <mRID>ack</mRID><Reason><code>999</code>
  <text>No matching data found for Data item (replay)</text></Reason>
</Acknowledgement_MarketDocument>"""


def _t(ts: pd.Timestamp) -> str:
    return ts.strftime("%Y-%m-%dT%H:%MZ")


@lru_cache(maxsize=2)
def _mix(data_dir: str) -> pd.DataFrame:
    frame, _ = read_dacf_mix(Path(data_dir) / "dacf" / "DE_2019_clean.csv")
    return frame


@lru_cache(maxsize=2)
def _prices(data_dir: str) -> pd.Series:
    frame, _ = read_prices(Path(data_dir) / "sustain-cluster" / "electricity_prices_usd_utc"
                           / "DE-LU_electricity_prices_2023.csv")
    return frame["price_usd_per_mwh"] / EUR_TO_USD_2023


def _xml(kind: str, series: list[str], start: pd.Timestamp, end: pd.Timestamp) -> str:
    root = "Publication_MarketDocument" if kind == "A44" else "GL_MarketDocument"
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<{root}><mRID>replay</mRID>'
            f"<type>{kind}</type><time_Period.timeInterval><start>{_t(start)}</start>"
            f"<end>{_t(end)}</end></time_Period.timeInterval>{''.join(series)}</{root}>")


def _generation(data_dir: str, start: pd.Timestamp, end: pd.Timestamp,
                hourly_psr: frozenset[str] = frozenset(),
                drop: dict[str, list[pd.Timestamp]] | None = None) -> str | None:
    mix = _mix(data_dir)
    sub = mix[(mix.index >= start) & (mix.index < end)]
    if sub.empty:
        return None
    series = []
    for col, psr in DACF_TO_PSR.items():
        per_hour = 1 if psr in hourly_psr else 4
        gone = set((drop or {}).get(psr, []))
        pts = []
        pos = 1
        for ts, v in zip(sub.index, sub[col].to_numpy(float), strict=True):
            for k in range(per_hour):
                if ts not in gone:  # a left-out point: no Point at that position (a gap)
                    q = (v + (JITTER if k % 2 else -JITTER) if per_hour > 1 else v) \
                        if np.isfinite(v) else float("nan")
                    pts.append(f"<Point><position>{pos}</position><quantity>{q:.3f}</quantity>"
                               "</Point>")
                pos += 1
        p_start, p_end = sub.index[0], sub.index[-1] + pd.Timedelta(hours=1)
        res = "PT60M" if per_hour == 1 else "PT15M"
        series.append(
            f"<TimeSeries><mRID>{psr}</mRID><businessType>A01</businessType>"
            f'<inBiddingZone_Domain.mRID codingScheme="A01">{DE_LU}</inBiddingZone_Domain.mRID>'
            "<quantity_Measure_Unit.name>MAW</quantity_Measure_Unit.name>"
            f"<curveType>A01</curveType><MktPSRType><psrType>{psr}</psrType></MktPSRType>"
            f"<Period><timeInterval><start>{_t(p_start)}</start><end>{_t(p_end)}</end>"
            f"</timeInterval><resolution>{res}</resolution>{''.join(pts)}</Period></TimeSeries>")
    return _xml("A75", series, start, end)


@lru_cache(maxsize=2)
def _wind_solar(data_dir: str) -> pd.DataFrame:
    raw = pd.read_csv(Path(data_dir) / "dacf" / "DE_src_prod_forecasts_test_period.csv")
    idx = pd.DatetimeIndex(pd.to_datetime(raw["UTC time"], utc=True))
    return pd.DataFrame({"B16": raw["avg_solar_production_forecast"].to_numpy(float),
                         "B19": raw["avg_wind_production_forecast"].to_numpy(float)}, index=idx)


def _wind_solar_doc(data_dir: str, start: pd.Timestamp, end: pd.Timestamp) -> str | None:
    frame = _wind_solar(data_dir)
    sub = frame[(frame.index >= start) & (frame.index < end)]
    if sub.empty:
        return None
    series = []
    for psr in sub.columns:
        pts = "".join(f"<Point><position>{i + 1}</position><quantity>{v:.3f}</quantity></Point>"
                      for i, v in enumerate(sub[psr].to_numpy(float)))
        series.append(
            f"<TimeSeries><mRID>{psr}</mRID><businessType>A94</businessType>"
            f'<inBiddingZone_Domain.mRID codingScheme="A01">{DE_LU}</inBiddingZone_Domain.mRID>'
            "<quantity_Measure_Unit.name>MAW</quantity_Measure_Unit.name>"
            f"<curveType>A01</curveType><MktPSRType><psrType>{psr}</psrType></MktPSRType>"
            f"<Period><timeInterval><start>{_t(sub.index[0])}</start>"
            f"<end>{_t(sub.index[-1] + pd.Timedelta(hours=1))}</end></timeInterval>"
            f"<resolution>PT60M</resolution>{pts}</Period></TimeSeries>")
    return _xml("A69", series, start, end)


def _price_doc(data_dir: str, start: pd.Timestamp, end: pd.Timestamp) -> str | None:
    prices = _prices(data_dir)
    sub = prices[(prices.index >= start) & (prices.index < end)].dropna()
    if sub.empty:
        return None
    series = []
    for day, day_prices in sub.groupby(sub.index.floor("D")):
        pts = "".join(
            f"<Point><position>{int((ts - day) / pd.Timedelta(hours=1)) + 1}</position>"
            f"<price.amount>{v:.2f}</price.amount></Point>" for ts, v in day_prices.items())
        series.append(
            f"<TimeSeries><mRID>{day:%Y%m%d}</mRID><businessType>A62</businessType>"
            f'<in_Domain.mRID codingScheme="A01">{DE_LU}</in_Domain.mRID>'
            "<currency_Unit.name>EUR</currency_Unit.name>"
            "<price_Measure_Unit.name>MWH</price_Measure_Unit.name><curveType>A01</curveType>"
            f"<Period><timeInterval><start>{_t(day)}</start>"
            f"<end>{_t(day + pd.Timedelta(days=1))}</end></timeInterval>"
            f"<resolution>PT60M</resolution>{pts}</Period></TimeSeries>")
    return _xml("A44", series, start, end)


def add_entsoe_routes(app: FastAPI, state, fault) -> None:
    """Mount ``GET /api`` (the Transparency Platform's single endpoint)."""

    @app.get("/api")
    def entsoe(request: Request):
        if r := fault("entsoe"):
            return r
        q = request.query_params
        if q.get("securityToken") != KEY:
            return Response("<html><body>Unauthorized</body></html>", status_code=401,
                            media_type="text/html")
        start = pd.to_datetime(q["periodStart"], format="%Y%m%d%H%M", utc=True)
        end = pd.to_datetime(q["periodEnd"], format="%Y%m%d%H%M", utc=True)
        doc_type = q.get("documentType")
        body = None
        if int(q.get("offset", 0)) == 0:
            if doc_type == "A75":
                body = _generation(str(state.data_dir), start, end,
                                   frozenset(getattr(state, "entsoe_hourly_psr", ())),
                                   getattr(state, "entsoe_drop", None))
            elif doc_type == "A69":
                body = _wind_solar_doc(str(state.data_dir), start, end)
            elif doc_type == "A44":
                body = _price_doc(str(state.data_dir), start, end)
        # exactly "text/xml" (no charset): entsoe-py looks for "No matching data" only then
        return Response((body or NO_DATA).encode(), headers={"Content-Type": "text/xml"})
