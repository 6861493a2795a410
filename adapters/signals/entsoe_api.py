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
to hour-start hours (4 or 2 per hour) **per production type, on that type's own resolution**
(:func:`hourly_by_source`): a zone that publishes some types every 15 minutes and others hourly
keeps both. The mix of an hour is formed only when every published type has a value for it; an
hour with a type missing has no carbon intensity (NaN, counted), never the intensity of the part
that was published.

HTTP (tested against loopback servers): the requests go through a session with carbonsched's
rules (:class:`_Session`): a total deadline per call, ``Retry-After`` honoured on 429 and 503,
a cooldown shared by every call of the provider, the security token never in a log line.

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

import random
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pandas as pd
import requests

from carbonsched.adapters.http import (
    DEFAULT_CALL_DEADLINE_S,
    RETRY_AFTER_STATUSES,
    CallDeadline,
    DeadlineExceeded,
    ProviderGate,
    RetryPolicy,
    install_log_redaction,
    redact_url,
    register_secret,
    retry_after_s,
    run_bounded,
)
from carbonsched.adapters.signals._live import HOUR, finish, hourly_mean
from carbonsched.errors import (
    ProviderConfigError,
    ProviderError,
    ProviderUnavailableError,
    require_extra,
)

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
    """A requests session that sends entsoe-py's calls to ``base_url`` under carbonsched's rules.

    entsoe-py speaks ``requests``, so the rules of :class:`carbonsched.adapters.http.Fetcher`
    are applied here, per request: the provider's cooldown (:class:`~carbonsched.adapters.http.
    ProviderGate`, shared with nothing else: ENTSO-E is one account), a total deadline per call
    (the body read chunk by chunk in a worker thread, :func:`~carbonsched.adapters.http.
    run_bounded`), ``Retry-After`` on 429 and 503 with jitter, and retries of connection errors
    and timeouts with backoff; ``count`` counts the requests sent.
    """

    def __init__(self, base_url: str, gate: ProviderGate | None = None,
                 deadline_s: float = DEFAULT_CALL_DEADLINE_S, retry: RetryPolicy | None = None,
                 sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
                 rng: random.Random | None = None) -> None:
        super().__init__()
        self.base_url = base_url.rstrip("/")
        self.count = 0
        self.gate = gate or ProviderGate(SOURCE, clock=clock)
        self.deadline_s = deadline_s
        self.retry = retry or RetryPolicy()
        self.sleep = sleep
        self.clock = clock
        self.wall_clock = wall_clock
        self.rng = rng or random.Random()
        self.slept_s: list[float] = []

    def _wait(self, seconds: float) -> None:
        self.slept_s.append(seconds)
        self.sleep(seconds)

    def request(self, method, url, *args, **kwargs):  # noqa: D102, C901
        if isinstance(url, str) and url.startswith(PRODUCTION_URL):
            url = self.base_url + url[len(PRODUCTION_URL):]
        where = redact_url(requests.Request(method, url, params=kwargs.get("params"))
                           .prepare().url or url)
        deadline = CallDeadline(self.deadline_s, self.gate, self.clock)
        attempts = max(1, self.retry.max_attempts)
        last = ""
        for attempt in range(1, attempts + 1):
            hold = self.gate.cooldown_left()
            if hold > 0:
                if hold >= deadline.left():
                    raise ProviderUnavailableError(
                        SOURCE, f"{method} {where}: on hold for another {hold:.0f} s "
                        f"({self.gate.cooldown_reason}), longer than the "
                        f"{max(0.0, deadline.left()):.0f} s left of {deadline.what()}: not asked",
                        429 if "429" in self.gate.cooldown_reason else None)
                upto = self.gate.cooldown_until
                self._wait(hold)
                self.gate.served(upto)
            left = deadline.left()
            if left <= 0:
                raise ProviderUnavailableError(SOURCE, f"{method} {where}: {deadline.what()} is "
                                               "spent" + (f" (last: {last})" if last else ""))
            self.count += 1
            timeout = kwargs.get("timeout")
            call = {**kwargs, "stream": True,
                    "timeout": left if timeout is None else min(float(timeout), left)}

            def work(cancel: threading.Event, call=call) -> requests.Response:
                r = super(_Session, self).request(method, url, *args, **call)
                body = []
                for chunk in r.iter_content(65536):
                    if cancel.is_set():
                        r.close()
                        return r
                    body.append(chunk)
                r._content = b"".join(body)  # what Response.content does after a full read
                r._content_consumed = True
                return r

            try:
                response = run_bounded(work, left, "carbonsched-http-entsoe")
            except DeadlineExceeded:
                raise ProviderUnavailableError(
                    SOURCE, f"{method} {where}: no complete answer within {deadline.what()} "
                    f"(the server is too slow or drips its answer); attempt {attempt} of "
                    f"{attempts}") from None
            except (requests.Timeout, requests.ConnectionError) as exc:
                last = f"unreachable or timed out ({type(exc).__name__})"
                wait = None
            else:
                status = response.status_code
                wait = (retry_after_s(response, self.wall_clock())
                        if status in RETRY_AFTER_STATUSES else None)
                if wait is None:
                    return response  # entsoe-py raises for the status (mapped in _call)
                reason = f"HTTP {status} with Retry-After {wait:g} s"
                self.gate.cool_down(wait, reason)
                held_until = self.gate.cooldown_until
                if wait > self.retry.max_retry_after_s or wait >= deadline.left() \
                        or attempt == attempts:
                    raise ProviderUnavailableError(
                        SOURCE, f"{method} {where}: {reason}"
                        + (f" after {attempts} attempt(s)" if attempt == attempts else
                           f"; longer than the {max(0.0, deadline.left()):.0f} s left of "
                           f"{deadline.what()}") + "; entsoe is on hold until then", status)
            if attempt == attempts:
                raise ProviderUnavailableError(
                    SOURCE, f"{method} {where}: {last} after {attempts} attempt(s)")
            base = wait if wait is not None else self.retry.backoff(attempt)
            pause = base * (1.0 + self.retry.jitter_fraction * self.rng.random())
            if pause >= deadline.left():
                if wait is None or base >= deadline.left():
                    raise ProviderUnavailableError(
                        SOURCE, f"{method} {where}: {last or reason}; no time for try "
                        f"{attempt + 1} within {deadline.what()}")
                pause = base
            self._wait(pause)
            if wait is not None:
                self.gate.served(held_until)
        raise AssertionError("unreachable")  # pragma: no cover


def make_entsoe_client(base_url: str, api_key: str, timeout_s: float = 20.0,
                       max_attempts: int = 3, *, gate: ProviderGate | None = None,
                       deadline_s: float = DEFAULT_CALL_DEADLINE_S,
                       sleep: Callable[[float], None] = time.sleep,
                       clock: Callable[[], float] = time.monotonic,
                       wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
                       backoff_s: float = 0.5) -> Any:
    """An ``entsoe.EntsoePandasClient`` aimed at ``base_url`` under carbonsched's HTTP rules.

    Parameters
    ----------
    base_url
        The API root (``.../api``); a loopback replay in tests.
    api_key
        The security token (registered as a secret: never in a log line).
    timeout_s
        Read timeout of each request (capped by the time left of the call). [s]
    max_attempts
        Tries per call (connection errors, timeouts, 429/503 with ``Retry-After``).
    gate
        The provider's cooldown and run budget (a private one if ``None``).
    deadline_s
        Total time of one call. [s]
    sleep, clock, wall_clock
        Injected sleep, monotonic clock and wall clock (tests).
    backoff_s
        First backoff between tries. [s]

    Returns
    -------
    entsoe.EntsoePandasClient
        Its ``session.count`` counts requests. entsoe-py's own retry loop is switched off
        (``retry_count=1``): the session retries.
    """
    require_extra("entsoe", "the ENTSO-E provider")
    from entsoe import EntsoePandasClient

    install_log_redaction()
    register_secret(api_key)
    session = _Session(base_url, gate, deadline_s,
                       RetryPolicy(max_attempts=max_attempts, backoff_s=backoff_s), sleep,
                       clock, wall_clock)
    return EntsoePandasClient(api_key=api_key, session=session, retry_count=1,
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


def hourly_by_source(generation: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Average each production type to hour-start UTC on its own resolution.

    A zone may publish some production types every 15 minutes and others hourly; entsoe-py
    joins them on the union of their stamps, so the hourly ones are NaN at :15, :30 and :45.
    Resampling the joined frame on its finest step would count those as missing points and drop
    the hourly types from every hour. Here each column's resolution is the smallest step between
    *its own* points; sub-hourly points are averaged to the hour when at least half of them are
    present (:func:`carbonsched.adapters.signals._live.hourly_mean`), otherwise the hour is NaN
    for that type.

    Parameters
    ----------
    generation
        Mean power per production type [MW], tz-aware index.

    Returns
    -------
    (DataFrame, list of str)
        Hourly mean power per type [MW] on the union of hours, and notes naming the
        resolutions found.

    Raises
    ------
    ProviderError
        A type whose points are further apart than an hour or whose step does not divide one.
    """
    frame = generation.copy()
    frame.index = pd.DatetimeIndex(frame.index).tz_convert("UTC")
    frame = frame.sort_index()
    parts: dict[str, pd.Series] = {}
    by_period: dict[pd.Timedelta, list[str]] = {}
    notes: list[str] = []
    for col in frame.columns:
        s = frame[col].dropna()
        if s.empty:
            parts[col] = s
            continue
        steps = s.index.to_series().diff().dropna()
        period = steps.min() if len(steps) else HOUR
        if period > HOUR or HOUR % period != pd.Timedelta(0):
            raise ProviderError(SOURCE, f"production type {col!r}: points every {period} do not "
                                "divide an hour; carbonsched reads hourly or sub-hourly data")
        by_period.setdefault(period, []).append(str(col))
        if period < HOUR:
            hourly, n = hourly_mean(s.to_frame(col), period, SOURCE)
            notes.extend(x for x in n if "fewer than" in x)
            parts[col] = hourly[col]
        else:
            parts[col] = s
    out = pd.DataFrame(parts).sort_index()
    out.index = pd.DatetimeIndex(out.index, name="ts")
    for period, cols in sorted(by_period.items()):
        minutes = int(period.total_seconds() // 60)
        per_hour = int(HOUR / period)
        what = (f"{per_hour} points of {minutes} min averaged per hour" if per_hour > 1
                else "hourly")
        notes.append(f"{len(cols)} production type(s) at {minutes} min ({', '.join(cols)}): "
                     f"{what}")
    if len(by_period) > 1:
        notes.append("mixed resolutions: each production type averaged to the hour on its own "
                     "resolution before the mix is formed")
    return out, list(dict.fromkeys(notes))


def read_entsoe_generation(generation: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Carbon intensity and shares from entsoe-py's ``query_generation`` frame.

    Each production type is first averaged to the hour on its own resolution
    (:func:`hourly_by_source`); the mix of an hour is then formed only when **every** type the
    zone publishes in the answer has a value for it. An hour with a type missing keeps NaN
    intensity and shares (a gap stays a gap: a partial mix is never turned into a carbon
    intensity), counted in the notes with the types missing in the first such hour. A type with
    no value at all in the answer is left out of the mix (noted).

    Parameters
    ----------
    generation
        Columns: production-type names (``Fossil Gas``) or (name, ``Actual Aggregated`` /
        ``Actual Consumption``) pairs, index tz-aware; values mean power [MW].

    Returns
    -------
    frame : DataFrame
        Index ``ts`` (hour start, UTC): ``carbon_intensity_g_per_kwh`` [gCO2eq/kWh, direct],
        ``renewable_pct``, ``low_carbon_pct`` [%], ``generation_<group>_mw`` [MW] and
        ``is_estimated``.
    meta : dict
        Provenance; ``n_incomplete_hours`` counts the hours without a full mix.

    Raises
    ------
    ProviderError
        A production type with no group (named), or a resolution that does not divide an hour.
    """
    require_extra("entsoe", "the ENTSO-E provider")
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
    hourly, notes = hourly_by_source(gen.astype(float))
    silent = [c for c in hourly.columns if hourly[c].isna().all()]
    if silent:
        notes.append(f"production type(s) {', '.join(map(str, silent))} without any value: "
                     "left out of the mix")
    published = [c for c in hourly.columns if c not in silent]
    hourly = hourly[published].clip(lower=0.0)
    complete = hourly.notna().all(axis=1) if published else pd.Series(False, index=hourly.index)
    group_of = {c: PSR_GROUP[by_name[c]] for c in published}
    groups = pd.DataFrame(index=hourly.index)
    for g in dict.fromkeys(group_of.values()):
        members = [c for c, gg in group_of.items() if gg == g]
        groups[g] = hourly[members].sum(axis=1, min_count=len(members))
    total = groups.sum(axis=1, min_count=1)
    ok = complete & (total > 0)
    w = pd.Series({g: DIRECT_FACTORS_G_PER_KWH[g] for g in groups.columns}, dtype=float)
    frame = pd.DataFrame(index=groups.index)
    frame["carbon_intensity_g_per_kwh"] = (groups.mul(w, axis=1).sum(axis=1, min_count=1)
                                           / total).where(ok)
    ren = [g for g in RENEWABLE if g in groups]
    low = [g for g in LOW_CARBON if g in groups]
    frame["renewable_pct"] = (groups[ren].sum(axis=1) / total * 100).where(ok)
    frame["low_carbon_pct"] = (groups[low].sum(axis=1) / total * 100).where(ok)
    for g in groups.columns:
        frame[f"generation_{g}_mw"] = groups[g]
    frame["is_estimated"] = False
    n_incomplete = int((~complete).sum())
    if n_incomplete:
        first = complete.index[(~complete).to_numpy()][0]
        missing = [str(c) for c in published if pd.isna(hourly.at[first, c])]
        notes.append(f"{n_incomplete} hour(s) without every production type (first "
                     f"{first.isoformat()}: {', '.join(missing)} missing): carbon intensity and "
                     "shares NaN, never a partial mix")
    frame, newest = finish(frame, SOURCE, "generation", ["carbon_intensity_g_per_kwh"])
    return frame, {"source": SOURCE, "signal_type": "generation_per_type",
                   "emission_factor_type": "direct", "newest_value_at": newest, "notes": notes,
                   "n_incomplete_hours": n_incomplete,
                   "time_convention": "ENTSO-E periods UTC; points at start + (position-1) x "
                                      "resolution; each production type averaged to hour start "
                                      "on its own resolution"}


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
    require_extra("entsoe", "the ENTSO-E provider")
    from entsoe.mappings import lookup_area

    try:
        lookup_area(zone)
    except (ValueError, KeyError) as exc:
        raise ProviderConfigError(SOURCE, f"zone {zone!r} is not an ENTSO-E area code "
                                  "(e.g. DE_LU, FR, 10Y1001A1001A82H)") from exc
    client = client or make_entsoe_client(spec.base_url, api_key, spec.timeout_s,
                                          spec.max_attempts, deadline_s=spec.deadline_s)
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
    frame, notes = hourly_by_source(df.astype(float)) if len(df.columns) else (
        _to_utc_hourly(df.astype(float)))
    frame, newest = finish(frame, SOURCE, "wind and solar forecast", list(frame.columns))
    frame = frame[(frame.index >= start) & (frame.index < end)]
    return frame, {"source": SOURCE, "zone": zone, "signal_type": "wind_solar_forecast",
                   "emission_factor_type": None, "newest_value_at": newest, "notes": notes,
                   "is_forecast": True,
                   "time_convention": "ENTSO-E periods UTC; averaged to hour start"}
