"""Readers for the DACF day-ahead carbon-intensity benchmark files.

The files come from the repository of Maji, Sitaraman & Shenoy, "DACF: Day-ahead Carbon
Intensity Forecasting of Power Grids using Machine Learning", ACM e-Energy 2022,
doi:10.1145/3538637.3538849 (Apache-2.0); see ``$CARBONSCHED_SHARED_DATA/README.md``.

Readers (each returns ``(data, meta)``, data on an hourly tz-aware UTC index named ``ts``,
every timestamp the start of its hour):

* :func:`read_dacf_mix` — ``<R>_2019_clean.csv``: hourly fuel mix [MW], 2019..2021.
  The file's ``carbon_intensity`` column is **not** the paper's and is dropped; recompute the
  direct CI with :func:`direct_ci_from_mix`.
* :func:`read_dacf_region` — ``<R>.csv``: 2020..2021 mix plus NCEP GFS day-ahead weather and
  the published operator forecasts, **re-aligned by timestamp** so that the value at index
  ``t`` is the forecast *for* hour ``t``.
* :func:`read_dacf_reference` — ``<R>_carbon_from_src_prod_forecasts_direct.csv`` (test
  period: actual direct CI and the paper's published forecast) and
  ``DE_src_prod_forecasts_test_period.csv`` (DE test period: ENTSO-E day-ahead solar/wind).

Alignment (checked on the files):

* GFS ``forecast_*`` columns of ``<R>.csv`` are laid out by issue time: row ``t`` holds the
  forecast for hour ``t + 24 h`` (DACF's code feeds each day's model the previous 24 rows;
  the GFS wind speed correlates with actual wind 0.55..0.87 at that offset and 0.16..0.48 at
  none). The reader moves each value to the hour it is for (index ``+24 h``).
* The operator forecasts of ``<R>.csv`` (CAISO OASIS solar/wind for CISO, ENTSO-E wind for SE)
  are laid out the same way: CISO's column at row ``t`` equals, value for value, the
  reference file's forecast at ``t + 24 h``, and it correlates with actual wind 0.945 at the
  24 h offset against 0.586 at none. They are therefore moved by ``+24 h`` too. (The data
  README's "aligned as they stand" holds for the reference file, not for ``CISO.csv``.)
* SE's wind forecast correlates ~0.98 with actual wind at that offset — higher than day-ahead
  wind forecasts usually reach; results that use it are also reported without it.
* Every other ``avg_*_production_forecast`` column is made by the paper's own models and is
  dropped (never an input).
* ``DE_src_prod_forecasts_test_period.csv``'s solar/wind are aligned as they stand
  (correlation with actual 0.996 / 0.977 at no offset). Their MW are on the same (about 4x,
  sums of four quarter-hours) scale as ``DE_2019_clean.csv``'s mix: the ratio of sums is
  1.02 (solar) and 0.99 (wind), so they are used without rescaling.

Time-axis rules (from :mod:`carbonsched.adapters.signals._common`): naive stamps of these
files are UTC (the columns are named ``UTC time``; SE's ``datetime`` is UTC too, its
``Local time`` is CET); ``MM/DD/YYYY HH:MM:SS`` is read month-first; identical duplicated
rows are dropped and noted, duplicates with different values raise
:class:`~carbonsched.errors.DataFormatError` naming both lines; missing hours become NaN
rows (never filled) and are noted in ``meta["notes"]``; negative generation is refused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from carbonsched.adapters.signals._common import (
    check_file,
    finalize,
    parse_numeric,
    parse_timestamps,
    read_csv_cells,
)
from carbonsched.errors import DataFormatError

#: Direct emission factors of the DACF paper, Table 1 [gCO2eq/kWh]; sources absent here
#: (nuclear, hydro, solar, wind, biomass, geothermal) count as 0. Source: Maji, Sitaraman &
#: Shenoy, ACM e-Energy 2022, doi:10.1145/3538637.3538849, Table 1.
DIRECT_FACTORS_G_PER_KWH: Mapping[str, float] = {
    "coal": 760.0,
    "oil": 406.0,
    "nat_gas": 370.0,
    "other": 575.0,
    "unknown": 575.0,
}

#: Every fuel-mix column the DACF files use [MW].
SOURCES: tuple[str, ...] = (
    "coal", "nat_gas", "oil", "nuclear", "hydro", "solar", "wind", "biomass", "geothermal",
    "other", "unknown",
)

#: GFS weather columns of ``<R>.csv`` -> carbonsched names (units in the names).
GFS_COLUMNS: Mapping[str, str] = {
    "forecast_avg_wind_speed_wMean": "gfs_wind_speed_m_per_s",
    "forecast_avg_temperature_wMean": "gfs_temperature_k",
    "forecast_avg_dewpoint_wMean": "gfs_dewpoint_k",
    "forecast_avg_dswrf_wMean": "gfs_dswrf_w_per_m2",
    "forecast_avg_precipitation_wMean": "gfs_precipitation_kg_per_m2",
}

#: Published operator forecasts allowed as inputs, per region [MW].
OPERATOR_FORECASTS: Mapping[str, Mapping[str, str]] = {
    "CISO": {"avg_solar_production_forecast": "op_solar_mw",
             "avg_wind_production_forecast": "op_wind_mw"},
    "SE": {"avg_wind_production_forecast": "op_wind_mw"},
    "DE": {"avg_solar_production_forecast": "op_solar_mw",
           "avg_wind_production_forecast": "op_wind_mw"},
}

#: Offset of the issue-time layout of ``<R>.csv``'s forecast columns: row ``t`` is for ``t+24h``.
FORECAST_ROW_OFFSET = pd.Timedelta(hours=24)

_TIME_COLUMNS = ("UTC time", "datetime")
_REGION_RE = re.compile(r"^([A-Z]+)")


def _region_of(path: Path) -> str:
    m = _REGION_RE.match(path.name)
    return m.group(1) if m else path.stem


def _read(path: str | Path) -> tuple[Path, pd.DataFrame, np.ndarray, str]:
    p = check_file(path)
    cells, lines = read_csv_cells(p)
    tcol = next((c for c in _TIME_COLUMNS if c in cells.columns), None)
    if tcol is None:
        raise DataFormatError(
            p, f"no time column: expected one of {list(_TIME_COLUMNS)}, found "
               f"{list(cells.columns)}", row=1)
    return p, cells, lines, tcol


def _numeric_frame(cells: pd.DataFrame, cols: list[str], index: pd.DatetimeIndex, p: Path,
                   lines: np.ndarray) -> pd.DataFrame:
    data = {c: parse_numeric(cells[c], p, lines, c).to_numpy() for c in cols}
    return pd.DataFrame(data, index=index)


def _refuse_negative(frame: pd.DataFrame, cols: list[str], p: Path, lines: np.ndarray) -> None:
    for c in cols:
        neg = (frame[c] < 0).to_numpy()
        if neg.any():
            i = int(np.flatnonzero(neg)[0])
            raise DataFormatError(
                p, f"column {c!r}: negative generation {frame[c].iloc[i]:g} MW; the DACF mix "
                   "holds hourly mean power >= 0 — fix or blank the cell", row=int(lines[i]))


def read_dacf_mix(path: str | Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read a ``<R>_2019_clean.csv`` fuel-mix file.

    Parameters
    ----------
    path
        File path. The time column is ``UTC time`` (``MM/DD/YYYY HH:MM:SS`` for the US
        regions, ISO 8601 with ``+00:00`` for DE) or ``datetime`` (SE, ISO 8601, UTC).

    Returns
    -------
    data : DataFrame
        Shape ``(n_hours, n_sources)``: one column per source present (names of
        :data:`SOURCES`) [MW], hourly UTC index ``ts``.
    meta : dict
        ``region``, ``path``, ``sources``, ``ignored_columns`` (``carbon_intensity`` — wrong
        in these files —, ``Local time``, weather columns), ``notes`` (duplicates, gaps).

    Raises
    ------
    DataFormatError
        Missing time column or no source column, unreadable cell or timestamp, conflicting
        duplicated hour, negative generation; the message names the file and line.
    """
    p, cells, lines, tcol = _read(path)
    sources = [c for c in SOURCES if c in cells.columns]
    if not sources:
        raise DataFormatError(p, f"no fuel-mix column (expected some of {list(SOURCES)}); "
                                 f"found {list(cells.columns)}", row=1)
    idx = parse_timestamps(cells[tcol], p, lines, tcol, assume_utc=True)
    frame = _numeric_frame(cells, sources, idx, p, lines)
    _refuse_negative(frame, sources, p, lines)
    notes: list[str] = []
    data = finalize(frame, lines, p, notes)
    ignored = [c for c in cells.columns if c not in sources and c != tcol and c != ""]
    meta = {"region": _region_of(p), "path": str(p), "sources": sources,
            "ignored_columns": ignored, "notes": notes}
    return data, meta


def read_dacf_region(path: str | Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read a ``<R>.csv`` file: mix, GFS day-ahead weather and allowed operator forecasts.

    Forecast columns are re-aligned **by timestamp**: the value in row ``t`` of the file is
    the forecast for hour ``t + 24 h`` (see the module docstring for the evidence), so it is
    placed at index ``t + 24 h``. The returned index therefore runs to 24 h past the last mix
    row; mix columns are NaN there, and forecast columns are NaN in the first 24 h.

    Parameters
    ----------
    path
        ``CISO.csv``, ``PJM.csv``, ``ERCO.csv``, ``ISNE.csv`` or ``SE.csv``.

    Returns
    -------
    data : DataFrame
        Mix columns [MW]; ``gfs_wind_speed_m_per_s`` [m/s], ``gfs_temperature_k`` [K],
        ``gfs_dewpoint_k`` [K], ``gfs_dswrf_w_per_m2`` (downward short-wave flux) [W/m2],
        ``gfs_precipitation_kg_per_m2`` [as in GFS]; ``op_solar_mw`` / ``op_wind_mw``
        (published operator forecasts, CISO and SE only) [MW]. Index ``ts``: the hour each
        value is for.
    meta : dict
        ``region``, ``path``, ``sources``, ``weather_columns``, ``operator_columns``,
        ``dropped_columns`` (the paper's model-made forecasts), ``forecast_offset_hours``
        (24), ``notes``.

    Raises
    ------
    DataFormatError
        Missing time, mix or GFS column; unreadable cell or timestamp; conflicting duplicate;
        negative generation (file and line in the message).
    """
    p, cells, lines, tcol = _read(path)
    region = _region_of(p)
    sources = [c for c in SOURCES if c in cells.columns]
    missing = [c for c in GFS_COLUMNS if c not in cells.columns]
    if not sources or missing:
        what = f"GFS column(s) {missing}" if missing else "fuel-mix columns"
        raise DataFormatError(p, f"missing {what}; found {list(cells.columns)} — is this a "
                                 "DACF <R>.csv file?", row=1)
    ops = {k: v for k, v in OPERATOR_FORECASTS.get(region, {}).items() if k in cells.columns}
    dropped = [c for c in cells.columns if c.startswith("avg_") and c not in ops]
    idx = parse_timestamps(cells[tcol], p, lines, tcol, assume_utc=True)
    frame = _numeric_frame(cells, sources + list(GFS_COLUMNS) + list(ops), idx, p, lines)
    _refuse_negative(frame, sources, p, lines)
    notes: list[str] = []
    frame = finalize(frame, lines, p, notes)
    mix = frame[sources]
    fc = frame[list(GFS_COLUMNS) + list(ops)].rename(columns={**GFS_COLUMNS, **ops})
    # The files end with a block of rows whose forecasts are all 0 (a GFS temperature of 0 K is
    # impossible): placeholders for hours past the data, read as missing.
    pad = (fc["gfs_temperature_k"] == 0).to_numpy()
    if pad.any():
        fc.loc[pad, :] = np.nan
        notes.append(f"{int(pad.sum())} row(s) with GFS temperature 0 K (placeholders, first "
                     f"at row time {fc.index[pad][0].isoformat()}) read as missing forecasts")
    fc.index = fc.index + FORECAST_ROW_OFFSET
    data = mix.join(fc, how="outer")
    data.index.name = "ts"
    data = data.asfreq("h")
    meta = {"region": region, "path": str(p), "sources": sources,
            "weather_columns": list(GFS_COLUMNS.values()), "operator_columns": list(ops.values()),
            "dropped_columns": dropped, "forecast_offset_hours": 24, "notes": notes}
    return data, meta


def read_dacf_reference(path: str | Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read a DACF test-period reference file.

    Parameters
    ----------
    path
        ``<R>_carbon_from_src_prod_forecasts_direct.csv`` or
        ``DE_src_prod_forecasts_test_period.csv``.

    Returns
    -------
    data : DataFrame
        ``carbon_intensity_g_per_kwh`` (actual direct CI) [g/kWh]; for the ``_direct`` files
        ``dacf_forecast_g_per_kwh`` (the paper's published day-ahead forecast, a reference to
        beat, never an input) [g/kWh]; for DE's test-period file ``op_solar_mw`` and
        ``op_wind_mw`` (ENTSO-E day-ahead, aligned as they stand) [MW]. The paper's model-made
        ``avg_*`` source forecasts are dropped.
    meta : dict
        ``region``, ``path``, ``kind`` (``"direct"`` or ``"de_test_period"``), ``notes``.

    Raises
    ------
    DataFormatError
        Missing ``carbon_intensity`` column, unreadable cell or timestamp, conflicting
        duplicate.
    """
    p, cells, lines, tcol = _read(path)
    region = _region_of(p)
    if "carbon_intensity" not in cells.columns:
        raise DataFormatError(p, f"missing column 'carbon_intensity'; found "
                                 f"{list(cells.columns)}", row=1)
    idx = parse_timestamps(cells[tcol], p, lines, tcol, assume_utc=True)
    if "carbon_from_src_forecasts" in cells.columns:
        kind = "direct"
        cols = {"carbon_intensity": "carbon_intensity_g_per_kwh",
                "carbon_from_src_forecasts": "dacf_forecast_g_per_kwh"}
    else:
        kind = "de_test_period"
        ops = OPERATOR_FORECASTS.get(region, {})
        cols = {"carbon_intensity": "carbon_intensity_g_per_kwh",
                **{k: v for k, v in ops.items() if k in cells.columns}}
    frame = _numeric_frame(cells, list(cols), idx, p, lines).rename(columns=cols)
    notes: list[str] = []
    data = finalize(frame, lines, p, notes)
    return data, {"region": region, "path": str(p), "kind": kind, "notes": notes}


def direct_ci_from_mix(frame: pd.DataFrame) -> pd.Series:
    """Direct carbon intensity of a fuel mix with the DACF paper's Table 1 factors.

    ``CI[t] = sum_s F_s * P_s[t] / sum_s P_s[t]`` over the source columns of ``frame``
    (names in :data:`SOURCES`; other columns are ignored), with ``F`` from
    :data:`DIRECT_FACTORS_G_PER_KWH` (coal 760, oil 406, natural gas 370, other/unknown 575,
    all others 0 gCO2eq/kWh). Source: Maji, Sitaraman & Shenoy, ACM e-Energy 2022,
    doi:10.1145/3538637.3538849, Table 1 and Eq. 1.

    Parameters
    ----------
    frame
        Shape ``(n, k)``: generation per source [MW] (any common unit: the scale cancels).

    Returns
    -------
    Series
        ``carbon_intensity_g_per_kwh``, shape ``(n,)`` [gCO2eq/kWh]; NaN where any source is
        NaN or total generation is 0.

    Raises
    ------
    DataFormatError
        If ``frame`` has no source column.
    """
    cols = [c for c in SOURCES if c in frame.columns]
    if not cols:
        raise DataFormatError("<frame>", f"no fuel-mix column among {list(frame.columns)}; "
                                         f"expected some of {list(SOURCES)}")
    gen = frame[cols].astype(float)
    total = gen.sum(axis=1, skipna=False)
    emis = sum(gen[c] * DIRECT_FACTORS_G_PER_KWH.get(c, 0.0) for c in cols)
    ci = (emis / total.where(total > 0)).rename("carbon_intensity_g_per_kwh")
    return ci
