"""ENTSO-E Transparency Platform client (through ``entsoe-py``): mix, wind/solar, prices.

Generation per production type, day-ahead wind and solar forecasts, day-ahead prices.

Provider documentation: ENTSO-E Transparency Platform RESTful API
(https://transparency.entsoe.eu/content/static_content/Static%20content/web%20api/Guide.html):
``documentType=A75`` (actual generation per production type, 16.1.B&C), ``A69`` (day-ahead wind
and solar forecast, 14.1.D) and ``A44`` (day-ahead prices, 12.1.D); XML answers, parsed by
``entsoe-py`` (``EntsoePandasClient``). entsoe-py speaks ``requests``, not httpx: its session is a
:class:`requests.Session` subclass that sends the requests to the configured ``base_url`` (a
loopback replay in tests) and counts them; its ``timeout`` is the provider's ``timeout_s``.

Time convention (tested): ENTSO-E periods are UTC (``timeInterval`` with ``Z``), points at
``start + (position - 1) × resolution``; entsoe-py returns them in the area's local zone, which
:func:`get_entsoe` converts back to UTC. 15- and 30-minute points (mean power [MW]) are averaged
to hour-start hours (4 or 2 per hour).

Carbon intensity from the mix (``carbon_intensity_g_per_kwh``, DIRECT): production types are
grouped as Electricity Maps' ENTSO-E parser does (electricitymaps-contrib, ``parsers/ENTSOE.py``,
``ENTSOE_PARAMETER_GROUPS``; :data:`PSR_GROUP`) and weighted by the DACF paper's Table 1 direct
factors (Maji, Sitaraman, Shenoy, ACM e-Energy 2022, doi:10.1145/3538637.3538849; coal 760,
oil 406, gas 370, unknown 575, all others 0 gCO2eq/kWh). ``renewable_pct`` counts biomass,
geothermal, hydro, solar and wind; ``low_carbon_pct`` adds nuclear. Pumped-storage consumption
(``Actual Consumption``) is ignored; only ``Actual Aggregated`` generation counts.

Day-ahead prices are EUR/MWh; they become ``price_usd_per_mwh`` with ``eur_to_usd`` (providers
file, default :data:`carbonsched.adapters.signals.providers.EUR_TO_USD_2023`). Negative-price
hours are kept negative: they feed the green-surplus proxy
(:mod:`carbonsched.forecasts.green_surplus`).
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import requests

from carbonsched.adapters.signals._live import finish, hourly_mean
from carbonsched.errors import ProviderConfigError, ProviderError, ProviderUnavailableError

SOURCE = "entsoe"
PRODUCTION_URL = "https://web-api.tp.entsoe.eu/api"
"""The production endpoint entsoe-py calls (rewritten to the configured ``base_url``)."""

PSR_GROUP: dict[str, str] = {
    "B01": "biomass", "B17": "biomass",
    "B02": "coal", "B05": "coal", "B07": "coal", "B08": "coal",
    "B03": "gas", "B04": "gas",
    "B06": "oil",
    "B09": "geothermal",
    "B10": "hydro_storage", "B11": "hydro", "B12": "hydro",
    "B14": "nuclear",
    "B16": "solar",
    "B18": "wind", "B19": "wind",
    "B13": "unknown", "B15": "unknown", "B20": "unknown", "B25": "unknown",
}
"""ENTSO-E production type (PSR code) → fuel group (electricitymaps-contrib ENTSOE parser)."""

DIRECT_FACTORS_G_PER_KWH: dict[str, float] = {
    "coal": 760.0, "oil": 406.0, "gas": 370.0, "unknown": 575.0,
    "biomass": 0.0, "geothermal": 0.0, "hydro": 0.0, "hydro_storage": 0.0, "nuclear": 0.0,
    "solar": 0.0, "wind": 0.0,
}
"""Direct factors by group [gCO2eq/kWh]: DACF Table 1 (renewables and nuclear 0)."""

RENEWABLE = ("biomass", "geothermal", "hydro", "hydro_storage", "solar", "wind")
LOW_CARBON = (*RENEWABLE, "nuclear")


class _Session(requests.Session):
    """A requests session that sends entsoe-py's calls to ``base_url`` and counts them."""

    def __init__(self, base_url: str) -> None:
        super().__init__()
        self.base_url = base_url.rstrip("/")
        self.count = 0

    def request(self, method, url, *args, **kwargs):  # noqa: D102
        if isinstance(url, str) and url.startswith(PRODUCTION_URL):
            url = self.base_url + url[len(PRODUCTION_URL):]
        self.count += 1
        return super().request(method, url, *args, **kwargs)


def make_entsoe_client(base_url: str, api_key: str, timeout_s: float = 20.0,
                       max_attempts: int = 3) -> Any:
    """An ``entsoe.EntsoePandasClient`` aimed at ``base_url`` with explicit timeout and retries.

    entsoe-py retries connection errors itself (``retry_count``); its ``session.count`` counts
    requests.
    """
    from entsoe import EntsoePandasClient

    session = _Session(base_url)
    return EntsoePandasClient(api_key=api_key, session=session, retry_count=max_attempts,
                              retry_delay=0, timeout=timeout_s)


def _call(what: str, zone: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
    from entsoe.exceptions import NoMatchingDataError

    try:
        return fn(*args, **kwargs)
    except NoMatchingDataError:
        return None
    except (requests.Timeout, requests.ConnectionError) as exc:
        raise ProviderUnavailableError(SOURCE, f"{what} for {zone}: unreachable or timed out "
                                       f"({type(exc).__name__})") from exc
    except requests.HTTPError as exc:
        status = exc.response.status_code if exc.response is not None else None
        if status in (401, 403):
            raise ProviderConfigError(SOURCE, f"{what} for {zone}: security token rejected "
                                      f"(HTTP {status}); set ENTSOE_API_KEY") from exc
        if status is not None and (status >= 500 or status == 429):
            raise ProviderUnavailableError(SOURCE, f"{what} for {zone}: HTTP {status}",
                                           status) from exc
        raise ProviderError(SOURCE, f"{what} for {zone}: HTTP {status}", status) from exc
    except (ValueError, KeyError, AttributeError) as exc:
        raise ProviderError(SOURCE, f"{what} for {zone}: unreadable answer ({exc})") from exc


def _to_utc_hourly(frame: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    frame = frame.copy()
    frame.index = pd.DatetimeIndex(frame.index).tz_convert("UTC")
    frame = frame.sort_index()
    steps = frame.index.to_series().diff().dropna()
    period = steps.min() if len(steps) else pd.Timedelta(hours=1)
    if period < pd.Timedelta(hours=1):
        return hourly_mean(frame, period, SOURCE)
    return frame, []


def read_entsoe_generation(generation: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Carbon intensity and shares from entsoe-py's ``query_generation`` frame.

    Parameters
    ----------
    generation
        Columns: production-type names (``Fossil Gas``) or (name, ``Actual Aggregated`` /
        ``Actual Consumption``) pairs, index tz-aware; values mean power [MW].

    Raises
    ------
    ProviderError
        A production type with no group (named).
    """
    from entsoe.mappings import PSRTYPE_MAPPINGS

    by_name = {v: k for k, v in PSRTYPE_MAPPINGS.items()}
    gen = generation
    if isinstance(gen.columns, pd.MultiIndex):
        keep = [c for c in gen.columns if "Actual Consumption" not in c]
        gen = gen[keep]
        gen.columns = [next(x for x in c if x in by_name) for c in gen.columns]
    unknown = [c for c in gen.columns if by_name.get(c) not in PSR_GROUP]
    if unknown:
        raise ProviderError(SOURCE, f"production type(s) {unknown} have no fuel group")
    gen, notes = _to_utc_hourly(gen.astype(float))
    groups = gen.T.groupby([PSR_GROUP[by_name[c]] for c in gen.columns]).sum(min_count=1).T
    groups = groups.clip(lower=0.0)
    total = groups.sum(axis=1, min_count=1)
    w = pd.Series({g: DIRECT_FACTORS_G_PER_KWH[g] for g in groups.columns})
    frame = pd.DataFrame(index=groups.index)
    frame["carbon_intensity_g_per_kwh"] = (groups.mul(w, axis=1).sum(axis=1, min_count=1)
                                           / total).where(total > 0)
    ren = [g for g in RENEWABLE if g in groups]
    low = [g for g in LOW_CARBON if g in groups]
    frame["renewable_pct"] = (groups[ren].sum(axis=1) / total * 100).where(total > 0)
    frame["low_carbon_pct"] = (groups[low].sum(axis=1) / total * 100).where(total > 0)
    for g in groups.columns:
        frame[f"generation_{g}_mw"] = groups[g]
    frame["is_estimated"] = False
    frame, newest = finish(frame, SOURCE, "generation", ["carbon_intensity_g_per_kwh"])
    return frame, {"source": SOURCE, "signal_type": "generation_per_type",
                   "emission_factor_type": "direct", "newest_value_at": newest, "notes": notes,
                   "time_convention": "ENTSO-E periods UTC; points at start + (position-1) x "
                                      "resolution; sub-hourly averaged to hour start"}


def read_entsoe_prices(prices: pd.Series, eur_to_usd: float) -> tuple[pd.DataFrame,
                                                                        dict[str, Any]]:
    """Hour-start UTC ``price_usd_per_mwh`` (and ``price_eur_per_mwh``) from day-ahead prices."""
    frame, notes = _to_utc_hourly(pd.DataFrame({"price_eur_per_mwh": prices.astype(float)}))
    frame["price_usd_per_mwh"] = frame["price_eur_per_mwh"] * eur_to_usd
    frame["is_estimated"] = False
    frame, newest = finish(frame, SOURCE, "day-ahead prices", ["price_usd_per_mwh"])
    n_neg = int((frame["price_usd_per_mwh"] < 0).sum())
    if n_neg:
        notes.append(f"{n_neg} negative-price hour(s) (kept: green-surplus proxy)")
    return frame, {"source": SOURCE, "signal_type": "day_ahead_price",
                   "emission_factor_type": None, "newest_value_at": newest, "notes": notes,
                   "n_negative": n_neg, "eur_to_usd": eur_to_usd,
                   "time_convention": "ENTSO-E periods UTC, hour start"}


def get_entsoe(spec: Any, api_key: str, zone: str, group: str, start: pd.Timestamp,
               end: pd.Timestamp, eur_to_usd: float, client: Any = None,
               ) -> tuple[pd.DataFrame, dict[str, Any]]:
    """One signal group of ENTSO-E bidding zone ``zone`` (``DE_LU``, ``FR``, or an EIC code).

    ``group``: ``carbon_intensity`` or ``mix`` (generation per type) or ``price``.

    Raises
    ------
    ProviderConfigError
        An unknown area code, a rejected token.
    ProviderUnavailableError
        Unreachable, timed out, 5xx.
    """
    from entsoe.mappings import lookup_area

    try:
        lookup_area(zone)
    except (ValueError, KeyError) as exc:
        raise ProviderConfigError(SOURCE, f"zone {zone!r} is not an ENTSO-E area code "
                                  "(e.g. DE_LU, FR, 10Y1001A1001A82H)") from exc
    client = client or make_entsoe_client(spec.base_url, api_key, spec.timeout_s,
                                          spec.max_attempts)
    before = client.session.count
    if group == "price":
        series = _call("day-ahead prices", zone, client.query_day_ahead_prices, zone,
                       start=start, end=end)
        if series is None:
            series = pd.Series(dtype=float, index=pd.DatetimeIndex([], tz="UTC"))
        frame, meta = read_entsoe_prices(series, eur_to_usd)
    else:
        gen = _call("generation per type", zone, client.query_generation, zone, start=start,
                    end=end)
        if gen is None or gen.empty:
            frame = pd.DataFrame({"carbon_intensity_g_per_kwh": [], "renewable_pct": [],
                                  "low_carbon_pct": []},
                                 index=pd.DatetimeIndex([], tz="UTC", name="ts"))
            meta = {"source": SOURCE, "signal_type": "generation_per_type",
                    "emission_factor_type": "direct", "newest_value_at": None,
                    "notes": ["no matching data"]}
        else:
            frame, meta = read_entsoe_generation(gen)
    meta.update(zone=zone, requests=client.session.count - before)
    return frame[(frame.index >= start) & (frame.index < end)], meta


def get_entsoe_wind_solar_forecast(client: Any, zone: str, start: pd.Timestamp,
                                   end: pd.Timestamp) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Day-ahead wind and solar forecast [MW] of ``zone``, hour-start UTC (``A69``).

    Columns ``solar_forecast_mw``, ``wind_onshore_forecast_mw``, ``wind_offshore_forecast_mw``
    (those the area publishes).
    """
    df = _call("wind and solar forecast", zone, client.query_wind_and_solar_forecast, zone,
               start=start, end=end)
    if df is None:
        df = pd.DataFrame(index=pd.DatetimeIndex([], tz="UTC"))
    names = {"Solar": "solar_forecast_mw", "Wind Onshore": "wind_onshore_forecast_mw",
             "Wind Offshore": "wind_offshore_forecast_mw"}
    df = df.rename(columns=names)[[c for c in names.values() if c in df.rename(columns=names)]]
    frame, notes = _to_utc_hourly(df.astype(float))
    frame, newest = finish(frame, SOURCE, "wind and solar forecast", list(frame.columns))
    frame = frame[(frame.index >= start) & (frame.index < end)]
    return frame, {"source": SOURCE, "zone": zone, "signal_type": "wind_solar_forecast",
                   "emission_factor_type": None, "newest_value_at": newest, "notes": notes,
                   "is_forecast": True,
                   "time_convention": "ENTSO-E periods UTC; averaged to hour start"}
