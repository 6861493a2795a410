"""Modelled hourly grid signals for Chinese sites (no public hourly China series exists).

Every value this module returns is **modelled**, not measured: ``meta["signal_quality"]`` is
``"modelled"``. The model turns cited annual facts into a deterministic hourly profile; its
parameters, each with a source or an "assumption" label, live in
``data/china_grid_model.toml`` (package :mod:`carbonsched.data`).

Model (per province, per calendar year, hours labelled by their start, evaluated at mid-hour)
-----------------------------------------------------------------------------------------
1. **Solar**: ``S(t) = max(0, sin h(t)) × c(d)`` with ``h`` the solar elevation at the site
   (NOAA "General Solar Position Calculations", Spencer 1971 Fourier series; see
   :func:`solar_elevation_sin`) and ``c(d)`` a daily clearness factor (seeded AR(1), assumption).
2. **Wind**: ``W(t) = (1 + a_s cos 2π(doy − d_w)/N) (1 + a_d cos 2π(h_sol − h_w)/24) × w(d)``
   with a seasonal and a diurnal maximum (``h_sol`` local mean solar time) and a log-normal
   daily synoptic factor ``w(d)`` (seeded AR(1), assumption).
3. **Hydro**: ``H(t) = 1 + a_h cos 2π(doy − d_h)/N`` (wet-season maximum); nuclear constant.
4. **Low-carbon share** ``r(t) = g_w W/W̄ + g_s S/S̄ + g_h H/H̄ + g_n`` with ``g_*`` the annual
   generation shares of the province, so the annual mean of each term equals its share.
5. **Fossil share** ``φ(t) = max(1 − r(t), φ_min)``: thermal must-run keeps a floor ``φ_min``
   and low-carbon output above ``1 − φ_min`` is curtailed. ``φ_min`` is calibrated (bisection)
   so that the curtailed energy ``Σ max(r − (1 − φ_min), 0)`` equals ``(1 − u)`` of the year's
   wind + solar energy, ``u`` the cited utilisation rate (NEA 2023 monitoring report), within
   ``[fossil_floor_min, fossil_floor_max]``; where hydro alone exceeds the floor (Sichuan's wet
   season) the lower bound holds and the modelled curtailment exceeds the target (hydro spill).
6. **Carbon intensity** ``CI(t) = K φ(t)`` with ``K = EF / mean_year(φ)``: the calendar-year
   mean of the hourly series equals the official 2023 provincial factor ``EF`` (MEE & NBS
   Announcement 2025 No. 47) exactly, for every year modelled. ``K`` is the implied intensity
   of thermal generation and is reported in ``meta["notes"]`` as a plausibility check.
7. **Green surplus index** ``= clip(excess(t) / q, 0, 1)``, ``excess = max(r − (1 − φ_min), 0)``
   and ``q`` the 90th percentile of the positive excess: 0 when nothing would be curtailed,
   1 in the strongest curtailment hours (midday solar peaks and windy nights in the west).
8. **Weather**: ``T(t) = T̄ − A_s cos 2π(doy − d_c)/N + A_d cos 2π(h_sol − 15)/24 + ε(d)`` and
   ``RH(t) = RH̄ + B_s cos 2π(doy − d_m)/N − B_d cos 2π(h_sol − 15)/24`` (clipped to 5–100 %),
   with ``T̄`` the cited annual mean temperature and a de-meaned daily anomaly ``ε(d)``.

Random components are drawn from ``numpy.random.default_rng(crc32("<province>:<year>"))``, so the
output is the same on every machine and run, and any date (past or future) can be modelled.
The emission factors are CO2-only location-based provincial averages (they include
inter-provincial transfers and ignore green-power contracts).
"""

from __future__ import annotations

import math
import tomllib
import zlib
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np
import pandas as pd

from carbonsched.adapters.signals.registry import SIGNAL_COLUMNS
from carbonsched.domain import SignalQuality, Site
from carbonsched.errors import CatalogError, TimeAxisError
from carbonsched.timeaxis import require_aware

SOURCE = "modelled-china"
PARAMS_RESOURCE = "china_grid_model.toml"

COLUMNS = (*SIGNAL_COLUMNS, "green_surplus_index")


# --- parameters -----------------------------------------------------------------------------

@lru_cache(maxsize=1)
def load_parameters() -> dict[str, Any]:
    """The model parameters from ``data/china_grid_model.toml``, values only.

    Returns
    -------
    dict
        ``{"model": {...}, "national": {...}, "provinces": {code: {...}}}`` with each
        ``{value, source}`` table replaced by its value.
    """
    text = resources.files("carbonsched.data").joinpath(PARAMS_RESOURCE).read_text("utf-8")
    raw = tomllib.loads(text)

    def values(table: dict[str, Any]) -> dict[str, Any]:
        return {k: (v["value"] if isinstance(v, dict) and "value" in v else v)
                for k, v in table.items()}

    return {
        "model": values(raw["model"]),
        "national": values(raw["national"]),
        "provinces": {code: values(t) for code, t in raw["provinces"].items()},
    }


def known_provinces() -> list[str]:
    """Province codes the model has parameters for (sorted)."""
    return sorted(load_parameters()["provinces"])


# --- solar geometry ---------------------------------------------------------------------------

def solar_elevation_sin(times_utc: pd.DatetimeIndex, latitude: float,
                        longitude: float) -> np.ndarray:
    """Sine of the solar elevation angle at the given instants. [-]

    NOAA Global Monitoring Laboratory, "General Solar Position Calculations"
    (https://gml.noaa.gov/grad/solcalc/solareqns.PDF), using the Fourier series of
    Spencer, J. W. (1971), "Fourier series representation of the position of the sun",
    Search 2(5):172, for the declination and the equation of time. Accuracy about 0.5°,
    ample for an hourly profile.

    Parameters
    ----------
    times_utc
        Instants, tz-aware, shape ``(n,)``.
    latitude, longitude
        Site position. [°N, °E]

    Returns
    -------
    ndarray
        ``sin(elevation)``, shape ``(n,)``; negative at night.
    """
    t = times_utc.tz_convert("UTC")
    days_in_year = np.where(t.is_leap_year, 366.0, 365.0)
    frac_hour = t.hour + t.minute / 60.0 + t.second / 3600.0
    gamma = 2.0 * np.pi / days_in_year * (t.day_of_year - 1 + (frac_hour - 12.0) / 24.0)
    eqtime_min = 229.18 * (0.000075 + 0.001868 * np.cos(gamma) - 0.032077 * np.sin(gamma)
                           - 0.014615 * np.cos(2 * gamma) - 0.040849 * np.sin(2 * gamma))
    decl = (0.006918 - 0.399912 * np.cos(gamma) + 0.070257 * np.sin(gamma)
            - 0.006758 * np.cos(2 * gamma) + 0.000907 * np.sin(2 * gamma)
            - 0.002697 * np.cos(3 * gamma) + 0.00148 * np.sin(3 * gamma))
    true_solar_min = frac_hour * 60.0 + eqtime_min + 4.0 * longitude
    hour_angle = np.radians(true_solar_min / 4.0 - 180.0)
    lat = math.radians(latitude)
    out = (math.sin(lat) * np.sin(decl) + math.cos(lat) * np.cos(decl) * np.cos(hour_angle))
    return np.asarray(out, dtype=float)


# --- the yearly model -------------------------------------------------------------------------

def _ar1(rng: np.random.Generator, n: int, phi: float) -> np.ndarray:
    """Unit-variance AR(1) series of length ``n``."""
    e = rng.standard_normal(n)
    x = np.empty(n)
    x[0] = e[0]
    s = math.sqrt(1.0 - phi * phi)
    for i in range(1, n):
        x[i] = phi * x[i - 1] + s * e[i]
    return x


#: Modelled curtailment further than this from its target, 0.05 percentage points (a share of
#: the year's wind + solar energy) [-], is explained in a note of its own (the bound that held
#: the floor): the bisection meets a target inside the floor's bounds to ~1e-15, so a miss
#: means the floor hit a bound.
CURTAILMENT_TARGET_TOLERANCE = 0.0005


def _target_missed(curtailed: float, target: float, floor: float, floor_min: float,
                   floor_max: float) -> tuple[str, str]:
    """How the calibrated curtailment stands against its target, and why it misses it.

    ``curtailed`` and ``target`` are shares of the year's wind + solar energy, ``floor`` the
    calibrated fossil must-run floor and ``floor_min``/``floor_max`` its bounds, shares of
    demand [-]. Returns ``(label, why)``: the label goes in the year's note ("on target",
    "above its 2.42% target, by design", ...), ``why`` is a note of its own ("" on target)
    that names no year, so a site's years share it on screen.
    """
    if abs(curtailed - target) < CURTAILMENT_TARGET_TOLERANCE:
        return "on target", ""
    pct = f"{100 * target:.2f}%"
    if floor <= floor_min:
        return (f"above its {pct} target, by design",
                "modelled curtailment above its target by design: the modelled surplus "
                "includes hydro and nuclear spill, which the target (wind and solar only) does "
                "not, and the fossil must-run floor is already at its lower bound "
                "(fossil_floor_min in data/china_grid_model.toml)")
    if floor >= floor_max:
        return (f"below its {pct} target",
                "modelled curtailment below its target: too little wind + solar surplus to "
                "curtail that much, with the fossil must-run floor at its upper bound "
                "(fossil_floor_max in data/china_grid_model.toml)")
    # not reached by _calibrate_floor's bisection
    return (f"off its {pct} target",
            "modelled curtailment off its target: the fossil must-run floor's bisection did "
            "not converge inside its bounds")


def _calibrate_floor(r: np.ndarray, variable: np.ndarray, target: float,
                     floor_min: float, floor_max: float) -> float:
    """Fossil floor ``φ_min`` matching the target curtailment, clamped to the bounds.

    Solves ``Σ max(r − (1 − φ_min), 0) = target × Σ variable`` by bisection.
    """
    total = variable.sum()
    if target <= 0 or total <= 0:
        return floor_min

    def curtailed(f: float) -> float:
        return float(np.maximum(r - (1.0 - f), 0.0).sum() / total)

    lo, hi = floor_min, floor_max
    if curtailed(lo) >= target:
        return lo
    if curtailed(hi) <= target:
        return hi
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if curtailed(mid) < target:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


@lru_cache(maxsize=64)
def _model_year(province: str, year: int, latitude: float, longitude: float,
                emission_factor: float) -> tuple[pd.DataFrame, tuple[str, ...]]:
    """All hours of one calendar year for one site (cached)."""
    params = load_parameters()
    m, p = params["model"], params["provinces"][province]
    idx = pd.date_range(f"{year}-01-01", f"{year + 1}-01-01", freq="h", tz="UTC",
                        inclusive="left", name="ts")
    n_days = len(idx) // 24
    n_year = float(n_days)
    mid = idx + pd.Timedelta(minutes=30)
    doy = mid.day_of_year.to_numpy(dtype=float) - 1 + mid.hour.to_numpy() / 24.0
    h_sol = np.mod(mid.hour.to_numpy() + mid.minute.to_numpy() / 60.0 + longitude / 15.0, 24.0)
    day = np.repeat(np.arange(n_days), 24)

    rng = np.random.default_rng(zlib.crc32(f"{province}:{year}".encode()))
    wind_daily = np.exp(m["wind_daily_sd"] * _ar1(rng, n_days, m["wind_daily_ar1"])
                        - 0.5 * m["wind_daily_sd"] ** 2)
    cloud = np.clip(m["cloud_daily_mean"] + m["cloud_daily_sd"]
                    * _ar1(rng, n_days, m["wind_daily_ar1"]), 0.0, 0.9)
    t_anom = m["temperature_daily_sd_c"] * _ar1(rng, n_days, m["wind_daily_ar1"])
    t_anom -= t_anom.mean()

    two_pi = 2.0 * np.pi
    solar = np.maximum(solar_elevation_sin(mid, latitude, longitude), 0.0) * (1.0 - cloud)[day]
    wind_season = np.cos(two_pi * (doy - p["wind_peak_doy"]) / n_year)
    wind_day = np.cos(two_pi * (h_sol - p["wind_peak_hour_solar"]) / 24.0)
    wind = ((1.0 + p["wind_seasonal_amplitude"] * wind_season)
            * (1.0 + p["wind_diurnal_amplitude"] * wind_day) * wind_daily[day])
    hydro = 1.0 + p["hydro_seasonal_amplitude"] * np.cos(two_pi * (doy - m["hydro_peak_doy"])
                                                          / n_year)
    r_wind = p["wind_generation_share"] * wind / wind.mean()
    r_solar = p["solar_generation_share"] * solar / solar.mean()
    r_hydro = p["hydro_generation_share"] * hydro / hydro.mean()
    r_nuc = np.full(len(idx), p["nuclear_generation_share"])
    r = r_wind + r_solar + r_hydro + r_nuc

    g_w, g_s = p["wind_generation_share"], p["solar_generation_share"]
    u_w = p["wind_utilisation_pct"] / 100.0
    u_s = p["solar_utilisation_pct"] / 100.0
    target = ((1 - u_w) * g_w + (1 - u_s) * g_s) / (g_w + g_s) if g_w + g_s > 0 else 0.0
    floor = _calibrate_floor(r, r_wind + r_solar, target, m["fossil_floor_min"],
                             m["fossil_floor_max"])
    fossil = np.maximum(1.0 - r, floor)
    k = emission_factor / fossil.mean()
    ci = k * fossil
    excess = np.maximum(r - (1.0 - floor), 0.0)
    pos = excess[excess > 0]
    q = float(np.quantile(pos, m["surplus_index_quantile"])) if len(pos) else 1.0
    gsi = np.clip(excess / q, 0.0, 1.0) if len(pos) else np.zeros(len(idx))
    low_carbon = 1.0 - fossil

    temp = (p["temperature_mean_c"]
            - p["temperature_seasonal_amplitude_c"]
            * np.cos(two_pi * (doy - m["temperature_coldest_doy"]) / n_year)
            + p["temperature_diurnal_amplitude_c"]
            * np.cos(two_pi * (h_sol - m["temperature_warmest_hour_solar"]) / 24.0)
            + t_anom[day])
    rh = np.clip(p["humidity_mean_pct"]
                 + p["humidity_seasonal_amplitude_pct"]
                 * np.cos(two_pi * (doy - m["humidity_wettest_doy"]) / n_year)
                 - p["humidity_diurnal_amplitude_pct"]
                 * np.cos(two_pi * (h_sol - m["temperature_warmest_hour_solar"]) / 24.0),
                 5.0, 100.0)

    frame = pd.DataFrame({
        "carbon_intensity_g_per_kwh": ci,
        "carbon_intensity_lca_g_per_kwh": np.nan,
        "carbon_intensity_estimated": False,
        "renewable_pct": 100.0 * np.clip(low_carbon - r_nuc, 0.0, 1.0),
        "low_carbon_pct": 100.0 * low_carbon,
        "price_usd_per_mwh": np.nan,
        "temperature_c": temp,
        "relative_humidity_pct": rh,
        "green_surplus_index": gsi,
    }, index=idx)
    curtailed = excess.sum() / max((r_wind + r_solar).sum(), 1e-12)
    on_target, missed = _target_missed(curtailed, target, floor, m["fossil_floor_min"],
                                       m["fossil_floor_max"])
    notes = (
        f"{year}: fossil must-run floor {100 * floor:.1f}% of demand, implied thermal intensity "
        f"K = {k:.0f} g/kWh, modelled curtailment {100 * curtailed:.2f}% of wind+solar "
        f"({on_target}), mean low-carbon share {100 * low_carbon.mean():.1f}%",
        *((missed,) if missed else ()),
    )
    return frame, notes


# --- public API -------------------------------------------------------------------------------

def load_signals(site: Site, start: pd.Timestamp, end: pd.Timestamp
                 ) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Modelled hourly signals of a Chinese site on ``[start, end)``.

    Parameters
    ----------
    site
        A catalog site with ``province`` set to a code in ``data/china_grid_model.toml`` (e.g.
        ``"CN-NX"``). Its ``annual_emission_factor_g_per_kwh``, when set, is the annual mean the
        carbon intensity is scaled to; otherwise the table's official 2023 factor is used.
    start, end
        Tz-aware timestamps on the hour, ``start < end``. Any dates.

    Returns
    -------
    frame : DataFrame
        Index ``ts`` (hourly, UTC, hour starts), the columns of ``docs/signals.md``:
        ``carbon_intensity_g_per_kwh`` [g/kWh], ``carbon_intensity_lca_g_per_kwh`` (NaN),
        ``carbon_intensity_estimated`` (False: modelled status is in ``meta``),
        ``renewable_pct`` and ``low_carbon_pct`` [%], ``price_usd_per_mwh`` (NaN),
        ``temperature_c`` [°C], ``relative_humidity_pct`` [%], ``green_surplus_index`` [0–1].
    meta : dict
        ``source="modelled-china"``, ``zone``, ``signal_quality="modelled"``, ``files`` (the
        parameter table), ``notes`` (calibration per year).

    Raises
    ------
    TimeAxisError
        Naive ``start``/``end``, not on the hour, or ``end <= start``.
    CatalogError
        The site has no province, or one the model has no parameters for.
    """
    t0 = require_aware(start, "start")
    t1 = require_aware(end, "end")
    for name, t in (("start", t0), ("end", t1)):
        if t != t.floor("h"):
            raise TimeAxisError(f"{name} {t.isoformat()} is not on the hour; give e.g. "
                                f"{t.floor('h').isoformat()}")
    if t1 <= t0:
        raise TimeAxisError(f"end {t1.isoformat()} must be after start {t0.isoformat()}")
    params = load_parameters()
    province = site.province
    if province is None or province not in params["provinces"]:
        raise CatalogError(
            f"site {site.id!r}: province {province!r} has no parameters in "
            f"data/{PARAMS_RESOURCE}; set the site's province to one of "
            f"{', '.join(known_provinces())} or add a [provinces.<code>] table with sources")
    ef = site.annual_emission_factor_g_per_kwh
    if ef is None:
        ef = float(params["provinces"][province]["emission_factor_g_per_kwh"])
    frames, notes = [], [
        "MODELLED, not measured: hourly shape from solar geometry, capacity shares and "
        "assumptions in data/china_grid_model.toml; the calendar-year mean equals the annual "
        f"emission factor {ef} g/kWh (MEE & NBS 2023, CO2 only)",
    ]
    last = (t1 - pd.Timedelta(hours=1)).year
    for year in range(t0.year, last + 1):
        f, n = _model_year(province, year, round(site.latitude, 4), round(site.longitude, 4),
                           float(ef))
        frames.append(f)
        notes.extend(n)
    frame = pd.concat(frames).loc[t0:t1 - pd.Timedelta(hours=1)].copy()
    frame.index.name = "ts"
    frame.index.freq = "h"
    meta = {
        "source": SOURCE,
        "zone": site.zone,
        "signal_quality": str(SignalQuality.MODELLED),
        "files": [f"carbonsched/data/{PARAMS_RESOURCE}"],
        "notes": notes,
    }
    return frame, meta
