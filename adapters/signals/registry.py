"""Site signals: one explicit registry of signal sources and :func:`load_site_signals`.

The contract of the returned frame and meta is ``docs/signals.md``. Sources are listed in
:data:`SOURCES` (no registration by import side effects); :func:`build_registry` refuses a
name registered twice and :func:`get_source` names the known sources when asked for an unknown
one.

Sources
-------
``electricitymaps`` (measured)
    ``sustain-cluster/carbon_intensity/<ZONE>_<YEAR>_hourly.csv`` for every UTC year that
    overlaps the window, joined with
    ``electricity_prices_usd_utc/<ZONE>_electricity_prices_<YEAR>.csv``
    and weather from ``site.meta["weather_file"]`` (Open-Meteo JSON or EPW, relative to the data
    dir) or else every ``weather/<ZONE>_*.json``; a price or default weather file that does not
    exist leaves its columns NaN (noted), a zone with no carbon-intensity file at all raises.
``eia930`` (measured)
    ``eia930-sustaindc/<BA>_NG_avgCI_<YEAR>.csv`` with ``BA = site.meta.get("balancing_area",
    site.zone)``; CI computed from the mix (:mod:`.eia930`); weather only from
    ``site.meta["weather_file"]``; no price (NaN).
``modelled-china`` (modelled)
    ``carbonsched.adapters.signals.china_modelled.load_signals(site, start, end)``, imported
    lazily; its frame is normalised onto the window like the others.

Parsed files are cached in-process (:func:`functools.lru_cache` keyed on path, size and
modification time), because a year replay calls this 365 times per site;
:func:`clear_cache` empties the cache.
"""

from __future__ import annotations

import copy
import importlib
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from carbonsched.adapters.signals.eia930 import (
    SUSTAINDC_HOUR_END_SHIFT,
    align_sustaindc,
    read_eia930,
)
from carbonsched.adapters.signals.electricitymaps import read_electricitymaps
from carbonsched.adapters.signals.epw import read_epw
from carbonsched.adapters.signals.openmeteo import read_open_meteo
from carbonsched.adapters.signals.prices import read_prices
from carbonsched.adapters.signals.quality import check_time_zone
from carbonsched.domain import SignalQuality, Site
from carbonsched.errors import CatalogError, DataFormatError, InputError, TimeAxisError
from carbonsched.timeaxis import ensure_hourly_utc, require_aware

SIGNAL_COLUMNS: tuple[str, ...] = (
    "carbon_intensity_g_per_kwh",
    "carbon_intensity_lca_g_per_kwh",
    "carbon_intensity_estimated",
    "renewable_pct",
    "low_carbon_pct",
    "price_usd_per_mwh",
    "temperature_c",
    "relative_humidity_pct",
)
"""Columns of every site-signal frame, in this order (``docs/signals.md``)."""

WEATHER_COLUMNS: tuple[str, ...] = ("temperature_c", "relative_humidity_pct", "cloud_cover_pct",
                                    "wind_speed_m_per_s", "irradiance_w_per_m2")
"""Weather columns the readers return (Open-Meteo files and API, EPW); every one a reader gives
reaches the frame (the temperature and humidity always, NaN when absent; the others when a
source has them): wind, cloud and irradiance are features of the forecasts
(:mod:`carbonsched.forecasts.exogenous`)."""

OPTIONAL_COLUMNS: tuple[str, ...] = ("green_surplus_index", *WEATHER_COLUMNS[2:])
"""Columns only some sources provide (kept when present)."""


def _copy_weather(out: pd.DataFrame, weather: pd.DataFrame) -> None:
    """Every :data:`WEATHER_COLUMNS` column of a weather reader's frame into ``out``."""
    for c in WEATHER_COLUMNS:
        if c in weather:
            out[c] = weather[c]


def _absent_note(frame: pd.DataFrame, col: str, what: str) -> str:
    """The note for a signal NaN in every hour loaded, saying what it means.

    Price only feeds the green-surplus index (:mod:`forecasts.green_surplus`); a source that
    models the index itself (the modelled Chinese grid) does not need it.
    """
    if (col == "price_usd_per_mwh" and "green_surplus_index" in frame
            and frame["green_surplus_index"].notna().all()):
        return (f"no price in any of the {len(frame)} hour(s) loaded: not needed, the source "
                "gives the green-surplus index itself")
    # not "the source has none": a measured source planned past its export, or a missing
    # yearly file, gives the same all-NaN column (its own note says which)
    return f"no {what} in any of the {len(frame)} hour(s) loaded (all NaN)"


Loader = Callable[[Site, Path, pd.DatetimeIndex], tuple[pd.DataFrame, dict[str, Any]]]


@dataclass(frozen=True)
class SignalSource:
    """A registered signal source.

    Attributes
    ----------
    name
        The value of ``site.signal_source`` that selects it.
    quality
        ``measured`` or ``modelled``.
    load
        ``load(site, data_dir, hours) -> (frame, meta)``; ``hours`` is the window's hourly
        UTC index; the frame may cover more or fewer hours (it is reindexed afterwards).
    description
        One line for people.
    """

    name: str
    quality: SignalQuality
    load: Loader
    description: str


# ---------------------------------------------------------------------------- file cache
@lru_cache(maxsize=512)
def _cached_read(
    reader: str, path: str, mtime_ns: int, size: int, year: int | None
) -> tuple[pd.DataFrame, dict[str, Any]]:
    if reader == "electricitymaps":
        return read_electricitymaps(path)
    if reader == "eia930":
        return read_eia930(path)
    if reader == "prices":
        return read_prices(path)
    if reader == "open-meteo":
        return read_open_meteo(path)
    if reader == "epw":
        assert year is not None
        return read_epw(path, year=year)
    raise ValueError(f"no reader {reader!r}")  # pragma: no cover - internal


def read_cached(
    reader: str, path: str | Path, year: int | None = None
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Parse ``path`` with ``reader`` once per process (re-read if the file changes).

    The frame is shared between calls: treat it as read-only (pandas copy-on-write makes
    derived frames independent). ``meta`` is a fresh copy on every call.
    """
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise DataFormatError(
            p, "does not exist; check the path (real data lives under $CARBONSCHED_SHARED_DATA)"
        ) from None
    frame, meta = _cached_read(reader, str(p), st.st_mtime_ns, st.st_size, year)
    return frame, copy.deepcopy(meta)


def clear_cache() -> None:
    """Forget every parsed file (and every time-zone check of one)."""
    _cached_read.cache_clear()
    _cached_tz_check.cache_clear()


@lru_cache(maxsize=512)
def _cached_tz_check(reader: str, path: str, mtime_ns: int, size: int, tz: str,
                     longitude: float, align_ba: str | None) -> tuple[str, ...]:
    frame, meta = read_cached(reader, path)
    if align_ba is not None and meta.get("time_convention") != "hour-end":
        frame = align_sustaindc(frame, align_ba)
    return tuple(check_time_zone(frame, meta, path, tz, longitude))


def time_zone_notes(site: Site, reader: str, path: str | Path,
                    align_ba: str | None = None) -> list[str]:
    """Run :func:`~carbonsched.adapters.signals.quality.check_time_zone` on a file for ``site``.

    Cached per file (path, size, modification time) and site clock (time zone, longitude), as
    the parse is.

    Raises
    ------
    DataFormatError
        The file's stamps look like local time under a UTC header (see the check).
    """
    st = os.stat(path)
    return list(_cached_tz_check(reader, str(path), st.st_mtime_ns, st.st_size, site.timezone,
                                 float(site.longitude), align_ba))


# ----------------------------------------------------------------------------- helpers
def _years(hours: pd.DatetimeIndex) -> range:
    return range(hours[0].year, hours[-1].year + 1)


def _notes_of(meta: Mapping[str, Any], path: str | Path) -> list[str]:
    return [f"{Path(path).name}: {n}" for n in meta.get("notes", [])]


def _resolve(data_dir: Path, name: str | os.PathLike[str]) -> Path:
    p = Path(name)
    return p if p.is_absolute() else data_dir / p


def _weather(
    site: Site, data_dir: Path, hours: pd.DatetimeIndex, default: list[Path],
    files: list[str], notes: list[str],
) -> pd.DataFrame | None:
    """Weather on ``hours`` from the site's ``weather_file`` or the ``default`` files."""
    named = site.meta.get("weather_file") if site.meta else None
    parts: list[pd.DataFrame] = []
    if named:
        path = _resolve(data_dir, named)
        if path.suffix.lower() == ".epw":
            for y in _years(hours):
                frame, meta = read_cached("epw", path, year=y)
                parts.append(frame)
                notes.extend(_notes_of(meta, path))
        elif path.suffix.lower() == ".json":
            frame, meta = read_cached("open-meteo", path)
            parts.append(frame)
            notes.extend(_notes_of(meta, path))
        else:
            raise CatalogError(
                f"site {site.id!r}: weather_file {str(named)!r} must be an Open-Meteo .json "
                "or an EnergyPlus .epw file"
            )
        files.append(str(path))
    else:
        existing = [p for p in default if p.is_file()]
        if not existing:
            notes.append("no weather file for this zone: temperature and humidity NaN")
            return None
        for path in existing:
            frame, meta = read_cached("open-meteo", path)
            parts.append(frame)
            files.append(str(path))
            notes.extend(_notes_of(meta, path))
    combined = parts[0]
    for extra in parts[1:]:
        combined = combined.combine_first(extra)
    return combined.reindex(hours)


def _empty(hours: pd.DatetimeIndex) -> pd.DataFrame:
    out = pd.DataFrame(index=hours)
    for c in SIGNAL_COLUMNS:
        out[c] = False if c == "carbon_intensity_estimated" else np.nan
    return out


# ----------------------------------------------------------------------------- loaders
_MIX_COLUMNS = ("carbon_intensity_g_per_kwh", "carbon_intensity_lca_g_per_kwh", "renewable_pct",
                "low_carbon_pct")


def _fill_from_yearly_files(
    out: pd.DataFrame, hours: pd.DatetimeIndex, path_for_year: Any, reader: str, label: str,
    files: list[str], notes: list[str], with_estimated_flag: bool = False,
    quarantined: list[dict[str, Any]] | None = None,
    transform: Callable[[pd.DataFrame, dict[str, Any]], pd.DataFrame] | None = None,
    site: Site | None = None, align_ba: str | None = None,
) -> bool:
    """Copy the carbon-intensity and mix columns of each year's file into ``out`` on ``hours``.

    A year without a file leaves its hours NaN and adds a note. The reader's quarantined rows
    are appended to ``quarantined`` (each with its ``file``). ``transform(frame, meta)``, if
    given, re-aligns a parsed file before use (EIA-930 hour conventions). With ``site``, each
    file's stamps are checked against the site's clock (:func:`time_zone_notes`; ``align_ba``
    names the EIA-930 alignment the check applies first). Returns whether any file existed.
    """
    found = False
    for y in _years(hours):
        path = path_for_year(y)
        if not path.is_file():
            notes.append(f"no {label} file {path.name}: hours of {y} NaN")
            continue
        found = True
        frame, meta = read_cached(reader, path)
        if site is not None:
            notes.extend(f"{path.name}: {n}" for n in time_zone_notes(site, reader, path,
                                                                      align_ba))
        if transform is not None:
            frame = transform(frame, meta)
        if quarantined is not None:
            quarantined.extend({**q, "file": path.name} for q in meta.get("quarantined", []))
        sub = frame.reindex(hours)
        inside = sub.index.isin(frame.index)
        for c in _MIX_COLUMNS:
            out.loc[inside, c] = sub.loc[inside, c]
        if with_estimated_flag:
            out.loc[inside, "carbon_intensity_estimated"] = (
                sub.loc[inside, "carbon_intensity_estimated"].astype(bool))
        files.append(str(path))
        notes.extend(_notes_of(meta, path))
    return found


def _load_electricitymaps(
    site: Site, data_dir: Path, hours: pd.DatetimeIndex
) -> tuple[pd.DataFrame, dict[str, Any]]:
    zone = site.zone
    base = data_dir / "sustain-cluster"
    ci_dir = base / "carbon_intensity"
    out = _empty(hours)
    files: list[str] = []
    notes: list[str] = []
    quarantined: list[dict[str, Any]] = []
    found = _fill_from_yearly_files(
        out, hours, lambda y: ci_dir / f"{zone}_{y}_hourly.csv", "electricitymaps",
        "carbon-intensity", files, notes, with_estimated_flag=True, quarantined=quarantined,
        site=site)
    if not found:
        zones = sorted({p.name.rsplit("_", 2)[0] for p in ci_dir.glob("*_hourly.csv")})
        if not any(ci_dir.glob(f"{zone}_*_hourly.csv")):
            raise DataFormatError(
                ci_dir / f"{zone}_<YEAR>_hourly.csv",
                f"no Electricity Maps file for zone {zone!r} (site {site.id!r}); zones with "
                f"files: {', '.join(zones) if zones else 'none'}",
            )
    price_dir = base / "electricity_prices_usd_utc"
    for y in _years(hours):
        path = price_dir / f"{zone}_electricity_prices_{y}.csv"
        if not path.is_file():
            notes.append(f"no price file {path.name}: price NaN for {y}")
            continue
        frame, meta = read_cached("prices", path)
        sub = frame["price_usd_per_mwh"].reindex(hours)
        out["price_usd_per_mwh"] = out["price_usd_per_mwh"].fillna(sub)
        files.append(str(path))
        notes.extend(_notes_of(meta, path))
    weather = _weather(site, data_dir, hours,
                       sorted((base / "weather").glob(f"{zone}_*.json")), files, notes)
    if weather is not None:
        _copy_weather(out, weather)
    return out, {"files": files, "notes": notes, "quarantined": quarantined,
                 "time_convention": "hour-start"}


def _load_eia930(
    site: Site, data_dir: Path, hours: pd.DatetimeIndex
) -> tuple[pd.DataFrame, dict[str, Any]]:
    ba = (site.meta or {}).get("balancing_area", site.zone)
    folder = data_dir / "eia930-sustaindc"
    out = _empty(hours)
    files: list[str] = []
    notes: list[str] = []
    quarantined: list[dict[str, Any]] = []

    def align(frame: pd.DataFrame, meta: dict[str, Any]) -> pd.DataFrame:
        if meta.get("time_convention") == "hour-end":
            return frame  # the reader already moved the stamps
        return align_sustaindc(frame, ba)

    found = _fill_from_yearly_files(
        out, hours, lambda y: folder / f"{ba}_NG_avgCI_{y}.csv", "eia930", "EIA-930",
        files, notes, quarantined=quarantined, transform=align, site=site, align_ba=ba)
    if ba in SUSTAINDC_HOUR_END_SHIFT:
        shift = ", ".join(f"{'from ' + s if s else 'all'} -{h} h"
                          for s, h in SUSTAINDC_HOUR_END_SHIFT[ba])
        notes.append(f"EIA-930 {ba} stamps aligned to hour starts ({shift}; measured against "
                     "solar noon, see eia930.SUSTAINDC_HOUR_END_SHIFT)")
    else:
        notes.append(f"EIA-930 {ba}: hour convention not measured; stamps used as hour starts")
    if not found and not any(folder.glob(f"{ba}_NG_avgCI_*.csv")):
        bas = sorted({p.name.split("_")[0] for p in folder.glob("*_NG_avgCI_*.csv")})
        raise DataFormatError(
            folder / f"{ba}_NG_avgCI_<YEAR>.csv",
            f"no EIA-930 file for balancing area {ba!r} (site {site.id!r}); areas with files: "
            f"{', '.join(bas) if bas else 'none'}",
        )
    notes.append("EIA-930 has no price: price NaN")
    if (site.meta or {}).get("weather_file"):
        weather = _weather(site, data_dir, hours, [], files, notes)
        if weather is not None:
            _copy_weather(out, weather)
    else:
        notes.append("no weather_file in site.meta: temperature and humidity NaN")
    return out, {"files": files, "notes": notes, "quarantined": quarantined,
                 "time_convention": "aligned per BA"}


def _load_modelled_china(
    site: Site, data_dir: Path, hours: pd.DatetimeIndex
) -> tuple[pd.DataFrame, dict[str, Any]]:
    module = importlib.import_module("carbonsched.adapters.signals.china_modelled")
    end = hours[-1] + pd.Timedelta(hours=1)
    frame, meta = module.load_signals(site, hours[0], end)
    frame = ensure_hourly_utc(frame, name=f"modelled-china signals of {site.id}")
    return frame.reindex(hours), dict(meta)


SOURCES: tuple[SignalSource, ...] = (
    SignalSource("electricitymaps", SignalQuality.MEASURED, _load_electricitymaps,
                 "Electricity Maps CSV export + prices + Open-Meteo weather"),
    SignalSource("eia930", SignalQuality.MEASURED, _load_eia930,
                 "EIA-930 fuel mix, carbon intensity computed with DACF direct factors"),
    SignalSource("modelled-china", SignalQuality.MODELLED, _load_modelled_china,
                 "documented deterministic model of carbonsched.adapters.signals.china_modelled"),
)
"""The registered signal sources (the one explicit list)."""


def build_registry(sources: Iterable[SignalSource]) -> dict[str, SignalSource]:
    """Index ``sources`` by name.

    Raises
    ------
    InputError
        A name registered twice (both positions named).
    """
    registry: dict[str, SignalSource] = {}
    position: dict[str, int] = {}
    for i, src in enumerate(sources):
        if src.name in registry:
            raise InputError(
                f"signal source {src.name!r} is registered twice (entries {position[src.name]} "
                f"and {i} of the source list); register each name once"
            )
        registry[src.name] = src
        position[src.name] = i
    return registry


REGISTRY: dict[str, SignalSource] = build_registry(SOURCES)


def get_source(name: str, registry: Mapping[str, SignalSource] | None = None) -> SignalSource:
    """The registered source ``name``.

    Raises
    ------
    CatalogError
        Unknown name; the message lists the known sources.
    """
    reg = REGISTRY if registry is None else registry
    try:
        return reg[name]
    except KeyError:
        raise CatalogError(
            f"unknown signal source {name!r}; known sources: {', '.join(sorted(reg))}"
        ) from None


def load_site_signals(
    site: Site,
    data_dir: str | Path,
    start: pd.Timestamp | str,
    end: pd.Timestamp | str,
    registry: Mapping[str, SignalSource] | None = None,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Hourly signals of ``site`` on ``[start, end)`` (the contract of ``docs/signals.md``).

    Parameters
    ----------
    site
        The site; ``site.signal_source`` selects the source, ``site.zone`` the zone/BA,
        ``site.meta["weather_file"]`` (optional) a weather file relative to ``data_dir``.
    data_dir
        Folder laid out like ``../shared/data``.
    start, end
        Tz-aware window bounds on the hour, ``end > start``; ``end`` excluded.
    registry
        Sources to dispatch on (default :data:`REGISTRY`).

    Returns
    -------
    frame : DataFrame, shape (hours in [start, end), 8 or 9)
        Index ``ts`` (UTC, hourly, start of hour), columns :data:`SIGNAL_COLUMNS` (and
        ``green_surplus_index`` where the source models it); NaN where the source lacks an hour.
    meta : dict
        ``source``, ``zone``, ``signal_quality`` (``"measured"``/``"modelled"``), ``files``
        (paths read), ``notes``.

    Raises
    ------
    TimeAxisError
        Naive bounds, bounds off the hour, or ``end <= start``.
    CatalogError
        Unknown ``site.signal_source`` (known sources named), or a bad ``weather_file``.
    DataFormatError
        A file that cannot be read, a zone with no file at all, or (measured sources) a
        ``data_dir`` that does not exist.
    """
    t0 = require_aware(start, "start")
    t1 = require_aware(end, "end")
    for name, t in (("start", t0), ("end", t1)):
        if t != t.floor("h"):
            raise TimeAxisError(f"{name} {t.isoformat()} is not on the hour")
    if t1 <= t0:
        raise TimeAxisError(
            f"end {t1.isoformat()} must be after start {t0.isoformat()} (window is [start, end))"
        )
    try:
        src = get_source(site.signal_source, registry)
    except CatalogError as exc:
        raise CatalogError(f"site {site.id!r}: {exc}") from None
    if src.quality == SignalQuality.MEASURED and not Path(data_dir).is_dir():
        raise DataFormatError(
            Path(data_dir).absolute(),
            f"data folder for site {site.id!r} ({src.name} signals) does not exist; pass "
            "--data-dir or set CARBONSCHED_DATA_DIR to the folder laid out like ../shared/data",
        )
    hours = pd.date_range(t0, t1, freq="h", inclusive="left", name="ts")
    raw, raw_meta = src.load(site, Path(data_dir), hours)
    frame = raw.reindex(hours)
    for c in SIGNAL_COLUMNS:
        if c not in frame:
            frame[c] = False if c == "carbon_intensity_estimated" else np.nan
    frame["carbon_intensity_estimated"] = (
        frame["carbon_intensity_estimated"].astype("boolean").fillna(False).astype(bool)
    )
    cols = list(SIGNAL_COLUMNS) + [c for c in OPTIONAL_COLUMNS if c in frame]
    frame = frame[cols]
    for c in cols:
        if c != "carbon_intensity_estimated":
            frame[c] = frame[c].astype(float)
    frame.index.name = "ts"
    notes = list(dict.fromkeys(raw_meta.get("notes", [])))
    for col, what in (("carbon_intensity_g_per_kwh", "carbon intensity"),
                      ("price_usd_per_mwh", "price"), ("temperature_c", "temperature")):
        n_missing = int(frame[col].isna().sum())
        if 0 < n_missing < len(frame):
            notes.append(f"{n_missing} of {len(frame)} hour(s) without {what} (NaN)")
        elif n_missing:
            notes.append(_absent_note(frame, col, what))
    meta: dict[str, Any] = {
        **{k: v for k, v in raw_meta.items() if k not in ("files", "notes")},
        "source": src.name,
        "zone": raw_meta.get("zone", site.zone),
        "signal_quality": str(raw_meta.get("signal_quality", src.quality)),
        "files": list(dict.fromkeys(str(f) for f in raw_meta.get("files", []))),
        "notes": notes,
    }
    return frame, meta
