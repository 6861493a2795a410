"""Hourly day-ahead electricity prices in USD/MWh (SustainCluster ``electricity_prices_usd_utc``).

Input columns: ``Datetime (UTC)`` (stamps with ``+00:00``), ``Datetime (Local)`` (ignored;
the UTC column is authoritative), ``Price (USD/MWh)``. Negative prices are real (surplus
renewable hours) and are kept.

Rules (tested in ``tests/adapters/test_prices.py``):

* **half-hour-aligned series**: zones whose market hour starts on the local hour in a
  half-hour time zone (IN-WE, UTC+05:30: stamps ``00:30 UTC``, ``01:30 UTC``, ...) are moved
  onto UTC hours by time weighting: the UTC hour ``[h, h+1)`` takes half of the interval
  starting at ``h-30min`` and half of the one starting at ``h+30min``; the price is the mean
  of the two (NaN if either is missing). Noted in ``meta["notes"]``. Any other offset from the
  hour raises ``DataFormatError``;
* missing cells stay NaN; missing hours become NaN rows; identical duplicates are dropped,
  conflicting ones raise; a missing column or unparsable number/date raises
  ``DataFormatError`` with file, line and reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from carbonsched.adapters.signals._common import (
    HEADER_ALIASES,
    check_file,
    finalize,
    parse_numeric,
    parse_timestamps,
    read_csv_cells,
    resolve_columns,
)

VARIABLE_MAP: dict[str, str] = {
    alias: col for col, aliases in HEADER_ALIASES["prices"].items() for alias in aliases
}
"""Provider column -> carbonsched column (a view of the one alias table,
:data:`carbonsched.adapters.signals._common.HEADER_ALIASES`)."""


def read_prices(path: str | Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read an hourly electricity price CSV.

    Parameters
    ----------
    path
        ``<ZONE>_electricity_prices_<YEAR>.csv``.

    Returns
    -------
    data : DataFrame, shape (n_hours, 1)
        Index ``ts`` (tz-aware UTC, hourly, start of hour); column ``price_usd_per_mwh``
        [USD/MWh].
    meta : dict
        ``source`` (``"prices"``), ``file``, ``zone`` (from the file name), ``n_negative``
        (hours with a negative price), ``notes``.

    Raises
    ------
    DataFormatError
        Missing file or column, unparsable number or timestamp, conflicting duplicates,
        stamps off the hour other than a uniform half-hour shift (file, line, reason).
    """
    p = check_file(path)
    cells, lines = read_csv_cells(p)
    cells, _ = resolve_columns(cells, "prices", ("ts", "price_usd_per_mwh"), p)
    notes: list[str] = []
    ts = parse_timestamps(cells["ts"], p, lines, "Datetime (UTC)", assume_utc=True)
    price = parse_numeric(cells["price_usd_per_mwh"], p, lines, "Price (USD/MWh)").to_numpy()
    data = pd.DataFrame({"price_usd_per_mwh": price}, index=ts)
    stamps: dict[str, list] = {}
    data = finalize(data, lines, p, notes, half_hour=True, stamps=stamps)
    meta: dict[str, Any] = {
        "source": "prices",
        "file": str(p),
        "zone": p.name.split("_electricity_prices")[0],
        "n_negative": int((data["price_usd_per_mwh"] < 0).sum()),
        "units": {"price_usd_per_mwh": "USD/MWh"},
        "time_convention": "hour-start",  # of the provider's stamps (frame: hour start)
        **stamps,
        "notes": notes,
    }
    return data, meta
