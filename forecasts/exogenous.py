"""Exogenous forecasts (weather, operator and provider forecasts) aligned by issue time.

Issue 35 item 3: day-ahead weather forecasts (temperature, wind, irradiance), operator wind and
solar forecasts and providers' own carbon-intensity forecasts become features of the daily
path's models where a site has them. Every value carries the time it was **published**, and a
model issued at ``T`` reads, for a target hour ``t``, only the latest value for ``t`` published
at or before ``T`` (:func:`known_at`): what a forecaster running at ``T`` could have had. Nothing
published later is ever read, in fitting, validation or service (no look-ahead; tested by
poisoning every later value).

The table (:data:`COLUMNS`, long format, one row per feature, publication and target hour)
------------------------------------------------------------------------------------------
``feature``
    One of :data:`FEATURES` (units in the names).
``issued_at``
    When the value was published (tz-aware UTC).
``ts``
    The hour it is for (UTC, the start of the hour).
``value``
    The forecast value, in the feature's unit.

``attrs["source"]`` names where the values come from and ``attrs["caveat"]`` (if any) what a
reader must know about them (reanalysis in place of an archived forecast is optimistic); both
reach the plan's notes and ``forecast_models``.

Sources (:func:`from_issue_layout`): an archive laid out by target hour with a fixed publication
lead (DACF's GFS and operator columns: the forecast for ``t`` was made 24 h before it,
``../shared/data/README``), or a series of actual weather used as if forecast (``lead = 24 h``,
with the caveat). :func:`from_day_ahead_auction`: a day-ahead market's clearing prices, each
day's published once, the day before delivery (:data:`DAY_AHEAD_AUCTIONS`): a marginal gas
plant sets a high price, wind and solar a low one, so the price a market has already cleared
for tomorrow carries tomorrow's carbon intensity.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from carbonsched.errors import ForecastError, InputError
from carbonsched.forecasts.base import Forecaster

HOUR = pd.Timedelta(hours=1)
COLUMNS = ("feature", "issued_at", "ts", "value")
FEATURES: dict[str, str] = {
    "temperature_c": "forecast air temperature at 2 m [°C]",
    "relative_humidity_pct": "forecast relative humidity at 2 m [%]",
    "wind_speed_m_per_s": "forecast wind speed [m/s]",
    "cloud_cover_pct": "forecast total cloud cover [%]",
    "irradiance_w_per_m2": "forecast downward short-wave irradiance [W/m2]",
    "wind_mw": "operator's forecast of wind generation [MW]",
    "solar_mw": "operator's forecast of solar generation [MW]",
    "carbon_intensity_g_per_kwh": "provider's forecast of carbon intensity [g/kWh]",
    "day_ahead_price_usd_per_mwh": "the day-ahead auction's clearing price for the hour "
                                   "[USD/MWh], published the day before delivery",
    "pue": "the site's PUE model on the forecast temperature and humidity [-]",
}
"""Features an exogenous table may hold, with their meaning and unit."""
SIGNAL_FEATURES: dict[str, tuple[str, ...]] = {
    "carbon_intensity_g_per_kwh": ("temperature_c", "wind_speed_m_per_s", "cloud_cover_pct",
                                   "irradiance_w_per_m2", "wind_mw", "solar_mw",
                                   "carbon_intensity_g_per_kwh", "day_ahead_price_usd_per_mwh"),
    "green_surplus_index": ("temperature_c", "wind_speed_m_per_s", "cloud_cover_pct",
                            "irradiance_w_per_m2", "wind_mw", "solar_mw",
                            "day_ahead_price_usd_per_mwh"),
    "pue": ("pue",),
}
"""Features each signal's models may read (the PUE through the site's PUE model)."""
PASSTHROUGH: dict[str, str] = {"carbon_intensity_g_per_kwh": "carbon_intensity_g_per_kwh",
                               "pue": "pue"}
"""Signal -> the feature that is itself a forecast of it (a candidate to beat or to use)."""


def empty() -> pd.DataFrame:
    """An exogenous table with no rows."""
    return pd.DataFrame({"feature": pd.Series(dtype=str),
                         "issued_at": pd.Series(dtype="datetime64[ns, UTC]"),
                         "ts": pd.Series(dtype="datetime64[ns, UTC]"),
                         "value": pd.Series(dtype=float)})


def check_table(table: pd.DataFrame, what: str = "exogenous forecasts") -> pd.DataFrame:
    """Validate an exogenous table and return it with ns UTC times, sorted.

    Raises
    ------
    InputError
        A missing column, an unknown feature, a naive or empty publication or target time.
        Non-numeric values are dropped (a value nobody published).
    """
    missing = [c for c in COLUMNS if c not in table.columns]
    if missing:
        raise InputError(f"{what}: missing column(s) {', '.join(missing)}; a table has "
                         f"{', '.join(COLUMNS)} (carbonsched.forecasts.exogenous)")
    unknown = sorted(set(table["feature"]) - set(FEATURES))
    if unknown:
        raise InputError(f"{what}: unknown feature(s) {', '.join(map(str, unknown))}; known: "
                         f"{', '.join(FEATURES)}")
    out = table[list(COLUMNS)].copy()
    for col in ("issued_at", "ts"):
        t = pd.to_datetime(out[col])
        if getattr(t.dt, "tz", None) is None:
            raise InputError(f"{what}: column {col!r} is naive; give tz-aware UTC times")
        if t.isna().any():
            raise InputError(f"{what}: column {col!r} has an empty time at row "
                             f"{int(np.flatnonzero(t.isna().to_numpy())[0])}")
        out[col] = t.dt.tz_convert("UTC").dt.as_unit("ns")
    out["value"] = pd.to_numeric(out["value"], errors="coerce").astype(float)
    out = out.dropna(subset=["value"]).sort_values(["issued_at", "ts"], kind="stable")
    out.attrs.update(table.attrs)
    return out.reset_index(drop=True)


def from_issue_layout(frame: pd.DataFrame, features: Mapping[str, str],
                      published_hours: int, source: str, caveat: str | None = None
                      ) -> pd.DataFrame:
    """An exogenous table from columns laid out by target hour, each published a fixed time ahead.

    Parameters
    ----------
    frame
        Hourly frame (tz-aware UTC index: the hour each value is *for*).
    features
        Column of ``frame`` -> feature name (:data:`FEATURES`).
    published_hours
        How long before its target hour each value was published [h] (DACF's archive: 24).
    source, caveat
        Stored in ``attrs`` (the plan names them).

    Returns
    -------
    DataFrame
        The long table (:data:`COLUMNS`).
    """
    parts = []
    for col, feat in features.items():
        if col not in frame:
            continue
        v = frame[col].dropna()
        ts = pd.DatetimeIndex(v.index).tz_convert("UTC").as_unit("ns")
        parts.append(pd.DataFrame({"feature": feat, "issued_at": ts - published_hours * HOUR,
                                   "ts": ts, "value": v.to_numpy(float)}))
    out = pd.concat(parts, ignore_index=True) if parts else empty()
    out.attrs.update(source=source, caveat=caveat, published_hours=published_hours)
    return check_table(out)


@dataclass(frozen=True)
class DayAheadAuction:
    """When a day-ahead market publishes the prices of a delivery day.

    Attributes
    ----------
    market
        The market and its source, for the plan's notes.
    timezone
        IANA time zone of the market's delivery days.
    published_local
        Local time on the day before delivery by which the whole day's prices are public,
        ``"HH:MM"`` (taken later than the market's announced publication, never earlier).

    Raises
    ------
    InputError
        ``published_local`` not a time of day ``HH:MM`` (00:00-23:59), or an unknown time zone.
    """

    market: str
    timezone: str
    published_local: str

    def __post_init__(self) -> None:
        import re
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        m = re.fullmatch(r"(\d{2}):(\d{2})", self.published_local)
        if m is None or int(m[1]) > 23 or int(m[2]) > 59:
            raise InputError(f"{self.market}: published_local must be HH:MM, a time of day "
                             f"00:00-23:59, got {self.published_local!r}")
        try:
            ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise InputError(f"{self.market}: unknown time zone {self.timezone!r}; give an IANA "
                             "name such as 'Europe/Berlin'") from None

    @property
    def published_hh_mm(self) -> tuple[int, int]:
        """The publication time of day, ``(hours, minutes)``."""
        hh, mm = self.published_local.split(":")
        return int(hh), int(mm)


DAY_AHEAD_AUCTIONS: dict[str, DayAheadAuction] = {
    "DE-LU": DayAheadAuction(
        "EPEX SPOT / SDAC day-ahead auction, DE-LU bidding zone", "Europe/Berlin", "14:00"),
    "JP-TK": DayAheadAuction("JEPX day-ahead (spot) market, Tokyo area", "Asia/Tokyo", "12:00"),
}
"""Zones (Electricity Maps codes) whose price file in ``../shared/data/sustain-cluster`` holds a
day-ahead auction's prices, with the publication rule. DE-LU: the single day-ahead coupling
closes its order books at 12:00 CET on the day before delivery and publishes results from about
12:45 (EPEX SPOT, "Day-ahead auction", epexspot.com; the file's prices come from RTE's eco2mix
market data, "donneesMarche"); 14:00 leaves margin for a late decoupling. JP-TK: JEPX's spot
market closes bids at 10:00 JST on the day before delivery and publishes results about half an
hour later (JEPX, "Trading guide"; the file is JEPX's spot_<fiscal year>.csv); 12:00 leaves
margin. Which market each file holds is taken from the upstream project's price-collection
scripts (green-dcc), not from the shared data's README, which calls every price file hourly
day-ahead prices; the other zones' files are real-time prices by those scripts (Singapore's
USEP, Ontario's HOEP) or of unknown kind, and are not offered."""


def from_day_ahead_auction(prices: pd.Series, auction: DayAheadAuction,
                           source: str) -> pd.DataFrame:
    """An exogenous table of day-ahead prices, each published the day before its delivery day.

    The price for hour ``t`` (UTC) belongs to the delivery day ``D`` = the local date of ``t`` in
    ``auction.timezone``; it is published at ``D - 1`` ``auction.published_local`` local time
    (daylight saving time as it applied then), converted to UTC.

    Parameters
    ----------
    prices
        Hourly prices [USD/MWh], tz-aware index (the hour each price is *for*); NaN dropped.
    auction
        The market's publication rule (:data:`DAY_AHEAD_AUCTIONS`).
    source
        Stored in ``attrs`` (the plan names it, with ``auction.market``).

    Returns
    -------
    DataFrame
        The long table (:data:`COLUMNS`), feature ``day_ahead_price_usd_per_mwh``.

    Raises
    ------
    InputError
        A naive index (a bad publication time or time zone is refused by
        :class:`DayAheadAuction` itself).
    """
    v = prices.dropna()
    idx = pd.DatetimeIndex(v.index)
    if idx.tz is None:
        raise InputError(f"{source}: day-ahead prices need a tz-aware index (UTC)")
    hh, mm = auction.published_hh_mm
    # the delivery day's date on the market's wall clock, then the wall-clock publication time
    # on the day before (naive arithmetic: a day is a calendar day, 23 or 25 h across a DST
    # change); tz_localize applies that moment's UTC offset
    day = idx.tz_convert(auction.timezone).tz_localize(None).normalize()
    wall = day - pd.Timedelta(days=1) + pd.Timedelta(hours=hh, minutes=mm)
    published = wall.tz_localize(auction.timezone, ambiguous=False,
                                 nonexistent="shift_forward").tz_convert("UTC")
    out = pd.DataFrame({"feature": "day_ahead_price_usd_per_mwh",
                        "issued_at": published.as_unit("ns"),
                        "ts": idx.tz_convert("UTC").as_unit("ns"),
                        "value": v.to_numpy(float)})
    out.attrs.update(source=f"{source} ({auction.market})", caveat=None,
                     published_local=auction.published_local, timezone=auction.timezone)
    return check_table(out)


def known_at(table: pd.DataFrame, feature: str, issues: pd.DatetimeIndex,
             lead_hours: int | np.ndarray) -> np.ndarray:
    """The latest value of ``feature`` for hour ``issue + lead`` published at or before each issue.

    This is the one place exogenous values are read: no value published after an issue time
    reaches a forecast made at it.

    Parameters
    ----------
    table
        An exogenous table (:func:`check_table`'s output).
    feature
        The feature.
    issues
        Issue times (UTC), shape ``(n,)``.
    lead_hours
        Lead of the target hour [h]: one for all issues, or shape ``(n,)``.

    Returns
    -------
    ndarray
        Shape ``(n,)``; NaN where nothing for that hour had been published by the issue time.
    """
    issues = pd.DatetimeIndex(issues).tz_convert("UTC").as_unit("ns")
    n = len(issues)
    lead = np.broadcast_to(np.asarray(lead_hours, dtype=np.int64), (n,))
    out = np.full(n, np.nan)
    t = table[table["feature"] == feature]
    if not len(t) or not n:
        return out
    q = pd.DataFrame({"issued_at": issues, "ts": issues + pd.to_timedelta(lead, unit="h"),
                      "row": np.arange(n)}).sort_values("issued_at", kind="stable")
    q["ts"] = q["ts"].dt.as_unit("ns")
    r = t[["issued_at", "ts", "value"]].sort_values("issued_at", kind="stable")
    m = pd.merge_asof(q, r, on="issued_at", by="ts", direction="backward",
                      allow_exact_matches=True)
    out[m["row"].to_numpy()] = m["value"].to_numpy(float)
    return out


def features_present(table: pd.DataFrame | None, signal: str) -> tuple[str, ...]:
    """The features of ``signal`` (:data:`SIGNAL_FEATURES`) that ``table`` holds, in order."""
    if table is None or not len(table):
        return ()
    have = set(table["feature"])
    return tuple(f for f in SIGNAL_FEATURES.get(signal, ()) if f in have)


def relative_humidity_pct(temperature_c: np.ndarray, dewpoint_c: np.ndarray) -> np.ndarray:
    """Relative humidity from temperature and dew point (Magnus formula). [%]

    ``RH = 100 exp(a Td / (b + Td) - a T / (b + T))`` with ``a = 17.625``, ``b = 243.04 °C``
    (Alduchov & Eskridge, *J. Appl. Meteor.* 35(4), 1996,
    doi:10.1175/1520-0450(1996)035<0601:IMFAOS>2.0.CO;2), clipped to [0, 100].
    """
    a, b = 17.625, 243.04
    t, td = np.asarray(temperature_c, float), np.asarray(dewpoint_c, float)
    return np.clip(100.0 * np.exp(a * td / (b + td) - a * t / (b + t)), 0.0, 100.0)


DACF_SOURCE = ("DACF archive (../shared/data/dacf/<R>.csv): NCEP GFS day-ahead weather over the "
               "region and, for CISO and SE, the published operator wind/solar forecasts")
SE_WIND_CAVEAT = ("SE's archived wind forecast tracks actual wind more closely (correlation up to "
                  "~0.99) than day-ahead wind forecasts usually do (../shared/data/README): "
                  "report results also without it")


def from_dacf_region(frame: pd.DataFrame, region: str = "") -> pd.DataFrame:
    """The exogenous table of a DACF ``<R>.csv`` frame, re-aligned to the hour each value is for.

    ``frame`` is :func:`carbonsched.adapters.signals.dacf.read_dacf_region`'s. GFS
    temperature and dew point [K] become ``temperature_c`` and ``relative_humidity_pct``
    (:func:`relative_humidity_pct`), wind speed and short-wave flux ``wind_speed_m_per_s`` and
    ``irradiance_w_per_m2``, the operator forecasts ``wind_mw`` and ``solar_mw``; every value
    published 24 h before its hour (the archive's layout, ``../shared/data/README``).
    """
    f = pd.DataFrame(index=frame.index)
    if "gfs_temperature_k" in frame:
        f["temperature_c"] = frame["gfs_temperature_k"] - 273.15
        if "gfs_dewpoint_k" in frame:
            f["relative_humidity_pct"] = relative_humidity_pct(
                f["temperature_c"].to_numpy(float), frame["gfs_dewpoint_k"].to_numpy(float)
                - 273.15)
    for src, dst in (("gfs_wind_speed_m_per_s", "wind_speed_m_per_s"),
                     ("gfs_dswrf_w_per_m2", "irradiance_w_per_m2"), ("op_wind_mw", "wind_mw"),
                     ("op_solar_mw", "solar_mw")):
        if src in frame:
            f[dst] = frame[src]
    caveat = SE_WIND_CAVEAT if region.upper() == "SE" and "wind_mw" in f else None
    return from_issue_layout(f, {c: c for c in f.columns}, 24, source=DACF_SOURCE,
                             caveat=caveat)


MIN_PUBLISHED_SHARE = 0.9
"""Least share of a validation's hours a published forecast must cover to be judged [-]; the
same bar as an exogenous feature's share of training issues
(:data:`carbonsched.forecasts.ridge.MIN_EXOG_SHARE`)."""


class PublishedForecast(Forecaster):
    """Someone else's published forecast of the signal itself, as a candidate (issue 35 item 3).

    The mean at lead ``k`` is the latest value of ``feature`` for the target hour published at
    or before the issue time (:func:`known_at`); where none had been published, the same hour
    on the latest observed day (seasonal naive, UTC), counted in :attr:`fallbacks_`. Point
    forecasts; the registry calibrates the intervals.

    A batch of issues (the registry's validation) must rest on the published forecast, not on
    its fallback: with less than ``min_share`` of its hours published, :meth:`backcast` raises,
    so a forecast with no archive (a provider's live forecast fetched today) is never chosen
    for scoring as well as naive on hours it did not forecast. One issue (the forecast served)
    is never refused: its missing hours fall back, counted.

    Parameters
    ----------
    feature
        The feature that forecasts the signal (:data:`PASSTHROUGH`).
    exog
        The exogenous table known at the fit; :meth:`backcast` takes a newer one.
    clip
        ``(low, high)`` bounds of the output.
    min_share
        Least share of a batch's (issue, lead) hours that must have a published value [-].
        Default :data:`MIN_PUBLISHED_SHARE`.
    """

    name = "published-forecast"

    def __init__(self, feature: str = "carbon_intensity_g_per_kwh",
                 exog: pd.DataFrame | None = None,
                 clip: tuple[float, float] = (0.0, float("inf")),
                 min_share: float | None = None) -> None:
        if feature not in FEATURES:
            raise ForecastError(f"{self.name}: unknown feature {feature!r}; known: "
                                f"{', '.join(FEATURES)}")
        min_share = MIN_PUBLISHED_SHARE if min_share is None else min_share
        if not 0.0 <= min_share <= 1.0:
            raise ForecastError(f"{self.name}: min_share must be in 0..1, got {min_share}")
        super().__init__(feature=feature, clip=clip, min_share=min_share)
        self.feature = feature
        self.exog = exog
        self.clip = clip
        self.min_share = float(min_share)
        self.fallbacks_ = 0

    @classmethod
    def get_test_params(cls) -> list[dict[str, Any]]:
        """No table: every hour from the seasonal-naive fallback."""
        return [{}]

    def _fit(self, y: pd.Series, X: pd.DataFrame | None) -> None:
        return None

    def backcast(self, y: pd.Series, issues: pd.DatetimeIndex, horizon_hours: int,
                 exog: pd.DataFrame | None = None) -> np.ndarray:
        """Point forecasts ``(len(issues), horizon_hours)``; reads ``y`` before each issue only."""
        table = exog if exog is not None else self.exog
        issues = pd.DatetimeIndex(issues)
        out = np.full((len(issues), horizon_hours), np.nan)
        y = y.dropna()
        self.fallbacks_ = 0
        cube = (known_at(table, self.feature, issues.repeat(horizon_hours),
                         np.tile(np.arange(horizon_hours), len(issues)))
                .reshape(len(issues), horizon_hours) if table is not None
                else np.full((len(issues), horizon_hours), np.nan))
        share = float(np.isfinite(cube).mean()) if cube.size else 0.0
        if len(issues) > 1 and share < self.min_share:
            raise ForecastError(
                f"{self.name}: {self.feature} was published for {100 * share:.0f} % of the "
                f"{cube.size} hours of these {len(issues)} issues (at least "
                f"{100 * self.min_share:.0f} % needed to judge it; a forecast without an "
                "archive of its past issues cannot be validated)")
        for k in range(horizon_hours):
            v = cube[:, k].copy()
            miss = ~np.isfinite(v)
            if miss.any():
                m = k // 24 + 1
                back = y.reindex(issues[miss] + (k - 24 * m) * HOUR).to_numpy(float)
                last = y.reindex(issues[miss] - HOUR).to_numpy(float)
                prev = np.array([y[y.index < t].iloc[-1] if (y.index < t).any() else np.nan
                                 for t in issues[miss]]) if np.isnan(back).any() else back
                v[miss] = np.where(np.isfinite(back), back, np.where(np.isfinite(last), last,
                                                                     prev))
                self.fallbacks_ += int(miss.sum())
            out[:, k] = v
        return np.clip(out, *self.clip) if self.clip is not None else out

    def _predict(self, history: pd.Series, horizon: pd.DatetimeIndex,
                 X: pd.DataFrame | None) -> pd.DataFrame:
        mean = self.backcast(history, pd.DatetimeIndex([horizon[0]]), len(horizon))[0]
        return pd.DataFrame({"mean": mean}, index=horizon)


__all__ = ["COLUMNS", "DACF_SOURCE", "FEATURES", "MIN_PUBLISHED_SHARE", "PASSTHROUGH",
           "SIGNAL_FEATURES",
           "PublishedForecast", "check_table", "empty", "features_present", "from_dacf_region",
           "from_issue_layout", "known_at", "relative_humidity_pct"]
