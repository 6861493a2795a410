"""Electricity Maps CSV export (hourly, one zone, one year).

Provider documentation: Electricity Maps, "Data portal" CSV exports
(https://www.electricitymaps.com/data-portal), columns ``Datetime (UTC)``, ``Country``,
``Zone Name``, ``Zone Id``, ``Carbon Intensity gCO₂eq/kWh (direct)``,
``Carbon Intensity gCO₂eq/kWh (LCA)``, ``Low Carbon Percentage``, ``Renewable Percentage``,
``Data Source``, ``Data Estimated``, ``Data Estimation Method``.

Rules (tested in ``tests/adapters/test_electricitymaps.py``):

* ``Datetime (UTC)`` is UTC by the header; a stamp with an explicit offset is converted;
  ``MM/DD/YYYY`` stamps are read month first;
* missing cells stay NaN; missing hours are inserted as NaN rows with
  ``carbon_intensity_estimated = False`` (no provider flag) and counted in ``meta["notes"]``;
* a negative carbon intensity, or a percentage outside 0–100, is set to NaN and counted in
  ``meta["notes"]`` (physically impossible for a grid mix; the hour is then *missing*); a
  carbon intensity above 1,500 g/kWh is quarantined, and a file with more than 2 % of such rows
  is refused as being in another unit (lbs/MWh), naming lines and values;
* headers are read through the one alias table (``_common.HEADER_ALIASES``): the data portal's
  later names (``Life cycle``, ``CFE%``, ``RE%``) fill the same columns, an unknown header is
  refused naming it and the known ones;
* stamps mark the START of the hour (``meta["time_convention"] = "hour-start"``);
* identical duplicated rows are dropped; conflicting ones, a cut last line and an empty newest
  hour are quarantined with their reason (``meta["quarantined"]``, rules in
  :mod:`carbonsched.adapters.signals._common`);
* a missing column, an unparsable number, date or flag raises ``DataFormatError`` with the
  file, line and reason; a missing file raises ``DataFormatError`` too.

Note: the file's ``Zone Id`` may differ from the zone in its file name (for example
``DE-LU_2023_hourly.csv`` holds ``DE``, ``BR-SP`` holds ``BR-CS``); ``meta["zone_id"]`` reports
the provider's id.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from carbonsched.adapters.signals._common import (
    HEADER_ALIASES,
    NA_TOKENS,
    check_file,
    finalize,
    mask_out_of_range,
    parse_numeric,
    parse_timestamps,
    quarantine_implausible_ci,
    read_csv_cells,
    resolve_columns,
)
from carbonsched.adapters.signals.quality import Quarantine
from carbonsched.errors import DataFormatError

VARIABLE_MAP: dict[str, str] = {
    alias: col for col, aliases in HEADER_ALIASES["electricitymaps"].items() for alias in aliases
}
"""Provider column -> carbonsched column: a view of this format's entry in the one alias table
(:data:`carbonsched.adapters.signals._common.HEADER_ALIASES`), where new spellings go."""

NUMERIC_COLUMNS = (
    "carbon_intensity_g_per_kwh",
    "carbon_intensity_lca_g_per_kwh",
    "low_carbon_pct",
    "renewable_pct",
)
REQUIRED = ("ts", "carbon_intensity_g_per_kwh", "carbon_intensity_estimated")
OUTPUT_COLUMNS = (
    "carbon_intensity_g_per_kwh",
    "carbon_intensity_lca_g_per_kwh",
    "carbon_intensity_estimated",
    "estimation_method",
    "renewable_pct",
    "low_carbon_pct",
)

_TRUE = {"true", "1", "yes", "t"}
_FALSE = {"false", "0", "no", "f"}


def _parse_flag(values: pd.Series, path: Path, lines: np.ndarray) -> pd.Series:
    text = values.astype(str).str.strip().str.lower()
    is_true = text.isin(_TRUE)
    ok = is_true | text.isin(_FALSE) | text.isin({t.lower() for t in NA_TOKENS})
    if not ok.all():
        i = int(np.flatnonzero(~ok.to_numpy())[0])
        raise DataFormatError(
            path,
            f"column 'Data Estimated': cannot read {values.iloc[i]!r} as true/false",
            row=int(lines[i]),
        )
    return is_true.astype(bool)


def read_electricitymaps(path: str | Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read an Electricity Maps hourly CSV export.

    Parameters
    ----------
    path
        ``<ZONE>_<YEAR>_hourly.csv`` as exported by Electricity Maps.

    Returns
    -------
    data : DataFrame, shape (n_hours, 6)
        Index ``ts`` (tz-aware UTC, hourly, start of hour). Columns
        ``carbon_intensity_g_per_kwh`` [gCO2eq/kWh] (direct),
        ``carbon_intensity_lca_g_per_kwh`` [gCO2eq/kWh] (life cycle),
        ``carbon_intensity_estimated`` (bool, the provider's ``Data Estimated``),
        ``estimation_method`` (str, ``""`` where not estimated), ``renewable_pct`` [%],
        ``low_carbon_pct`` [%].
    meta : dict
        ``source``, ``file``, ``zone_id``, ``zone_name``, ``country``, ``data_source``
        (list of provider source strings), ``n_estimated``, ``estimation_methods``
        (method -> hours), ``notes`` (list of str).

    Raises
    ------
    DataFormatError
        Missing file, missing or unknown column, unparsable number, date or flag (file, line,
        reason), conflicting duplicated hours or hours off the hour, carbon intensity above
        the physical range in more than 2 % of the rows.
    """
    p = check_file(path)
    quarantine = Quarantine()
    cells, lines = read_csv_cells(p, quarantine)
    cells, provider = resolve_columns(cells, "electricitymaps", REQUIRED, p)
    notes: list[str] = []
    ts = parse_timestamps(cells["ts"], p, lines, "Datetime (UTC)", assume_utc=True)
    data = pd.DataFrame(index=ts)
    for c in NUMERIC_COLUMNS:
        if c in cells.columns:
            data[c] = parse_numeric(cells[c], p, lines, provider.get(c, c)).to_numpy()
        else:
            data[c] = np.nan
            notes.append(f"no column for {c}; left NaN")
    data["carbon_intensity_estimated"] = _parse_flag(
        cells["carbon_intensity_estimated"], p, lines
    ).to_numpy()
    method = cells["estimation_method"] if "estimation_method" in cells else pd.Series(
        [""] * len(cells)
    )
    data["estimation_method"] = [
        "" if m in NA_TOKENS else m for m in method.astype(str).str.strip()
    ]
    data = mask_out_of_range(
        data, ["carbon_intensity_g_per_kwh", "carbon_intensity_lca_g_per_kwh"], lines, notes
    )
    data = mask_out_of_range(data, ["renewable_pct", "low_carbon_pct"], lines, notes, 0, 100)
    data = quarantine_implausible_ci(
        data, ["carbon_intensity_g_per_kwh", "carbon_intensity_lca_g_per_kwh"], lines, p,
        quarantine, provider)
    stamps: dict[str, list] = {}
    data = finalize(data, lines, p, notes, quarantine=quarantine, stamps=stamps)
    if len(data) > 1 and np.isnan(data["carbon_intensity_g_per_kwh"].iloc[-1]):
        # the newest hour exported before its value was known: NaN (never filled here), and
        # recorded so that a plan built on it says so (not counted in the bad-row share)
        quarantine.add(int(lines[-1]), data.index[-1],
                       "empty newest hour: the last row has no carbon intensity")
    if (note := quarantine.note()) is not None:
        notes.append(note)
    data["carbon_intensity_estimated"] = (
        data["carbon_intensity_estimated"].astype("boolean").fillna(False).astype(bool)
    )
    data["estimation_method"] = data["estimation_method"].fillna("").astype(str)
    data = data[list(OUTPUT_COLUMNS)]

    def _unique(col: str) -> list[str]:
        if col not in cells:
            return []
        return sorted({v for v in cells[col].astype(str) if v not in NA_TOKENS})

    zone_ids = _unique("zone_id")
    meta: dict[str, Any] = {
        "source": "electricitymaps",
        "file": str(p),
        "zone_id": zone_ids[0] if len(zone_ids) == 1 else zone_ids,
        "zone_name": ", ".join(_unique("zone_name")),
        "country": ", ".join(_unique("country")),
        "data_source": _unique("data_source"),
        "n_estimated": int(data["carbon_intensity_estimated"].sum()),
        "estimation_methods": {
            str(k): int(v)
            for k, v in data.loc[data["estimation_method"] != "", "estimation_method"]
            .value_counts()
            .items()
        },
        "units": {
            "carbon_intensity_g_per_kwh": "gCO2eq/kWh",
            "carbon_intensity_lca_g_per_kwh": "gCO2eq/kWh",
            "renewable_pct": "%",
            "low_carbon_pct": "%",
        },
        "time_convention": "hour-start",
        **stamps,
        **quarantine.as_meta(),
        "notes": notes,
    }
    return data, meta
