"""A provider's published carbon-intensity forecast, scored next to the product's (issue 35 item 6).

``carbonsched backtest --dataset sites --against FILE`` reads a CSV of forecasts someone else
published (Electricity Maps, WattTime, an operator, a grid model) and scores it on the same
hours as the daily path's own forecasts, against the same actuals and the same seasonal naive.

File format (:func:`read_provider_forecast`; one row per forecast hour, header required)
-------------------------------------------------------------------------------------
``site`` *or* ``zone``
    The catalog's site id, or the grid zone of the catalog's sites (every site in that zone
    gets the row).
``issued_at``
    When the forecast was published: ISO 8601 with a UTC offset (``2023-07-14T00:00:00Z``).
``ts``
    The start of the hour forecast, ISO 8601 with a UTC offset, on the hour, not before
    ``issued_at``.
``carbon_intensity_g_per_kwh``
    The forecast value, >= 0. [gCO2eq/kWh]

Other columns are ignored. Matching: each product forecast (issued at ``t``, for hour ``ts``)
is compared with the provider's forecast for ``ts`` with the latest ``issued_at`` at or before
``t`` — what had been published when the product issued its own. Hours either forecast misses,
or without an actual, are not scored for either; the result counts them.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from carbonsched.catalog import Catalog
from carbonsched.errors import DataFormatError

CI = "carbon_intensity_g_per_kwh"
VALUE_COLUMN = CI
"""The value column of an ``--against`` file. [gCO2eq/kWh]"""
TIME_COLUMNS = ("issued_at", "ts")
"""The time columns of an ``--against`` file (ISO 8601 with a UTC offset)."""
FORMAT_HINT = ("columns: site (or zone), issued_at, ts, carbon_intensity_g_per_kwh; times ISO "
               "8601 with a UTC offset such as 2023-07-14T00:00:00Z (docs/forecasts.md)")


def _time(path: Path, line: int, col: str, text: str) -> pd.Timestamp:
    try:
        t = pd.Timestamp(text)
    except (ValueError, TypeError):
        raise DataFormatError(path, f"column {col!r}: {text!r} is not an ISO 8601 time; "
                              f"{FORMAT_HINT}", line) from None
    if t is pd.NaT or pd.isna(t):
        raise DataFormatError(path, f"column {col!r} is empty; {FORMAT_HINT}", line)
    if t.tzinfo is None:
        raise DataFormatError(path, f"column {col!r}: {text!r} has no UTC offset; write it "
                              "with one, e.g. 2023-07-14T00:00:00Z", line)
    return t.tz_convert("UTC")


def read_provider_forecast(path: str | Path, catalog: Catalog) -> pd.DataFrame:
    """Read and check a published carbon-intensity forecast CSV (module doc for the format).

    Parameters
    ----------
    path
        The CSV file.
    catalog
        The backtest's catalog: ``site`` values must be its site ids, ``zone`` values the zones
        of its sites.

    Returns
    -------
    DataFrame
        Columns ``site``, ``issued_at``, ``ts`` (tz-aware UTC) and ``provider_mean``
        [gCO2eq/kWh], one row per site and forecast (a ``zone`` row once per site in it), and
        ``line`` (the row's line in the file, header = 1).

    Raises
    ------
    DataFormatError
        The file cannot be opened or is empty, lacks a column, or a row has a bad time, a
        target hour off the hour or before its issue time, a value that is not a number >= 0,
        an unknown site or zone, or repeats an earlier row's (site, issued_at, ts); the message
        names the file, the line and the column and says how to fix it.
    """
    path = Path(path)
    try:
        fh = open(path, newline="", encoding="utf-8-sig")
    except OSError as exc:
        raise DataFormatError(path, f"cannot open the --against file ({exc.strerror}); give a "
                              f"CSV with {FORMAT_HINT}") from None
    with fh:
        reader = csv.DictReader(fh)
        header = [h.strip() for h in (reader.fieldnames or [])]
        reader.fieldnames = header
        if not header:
            raise DataFormatError(path, f"the file is empty; {FORMAT_HINT}", 1)
        key = "site" if "site" in header else "zone" if "zone" in header else None
        missing = [c for c in (*TIME_COLUMNS, VALUE_COLUMN) if c not in header]
        if key is None:
            missing.insert(0, "site (or zone)")
        if missing:
            raise DataFormatError(path, f"missing column(s) {', '.join(missing)} (the header "
                                  f"has: {', '.join(header)}); {FORMAT_HINT}", 1)
        site_ids = [s.id for s in catalog.sites]
        zones: dict[str, list[str]] = {}
        for s in catalog.sites:
            zones.setdefault(s.zone, []).append(s.id)
        rows: list[tuple[str, pd.Timestamp, pd.Timestamp, float, int]] = []
        seen: dict[tuple[str, pd.Timestamp, pd.Timestamp], int] = {}
        for line, r in enumerate(reader, start=2):
            name = (r.get(key) or "").strip()
            if key == "site":
                if name not in site_ids:
                    raise DataFormatError(path, f"column 'site': {name!r} is not a site of "
                                          f"catalog {catalog.name} ({', '.join(site_ids)})", line)
                targets = [name]
            else:
                if name not in zones:
                    raise DataFormatError(path, f"column 'zone': {name!r} is not the zone of a "
                                          f"site of catalog {catalog.name} "
                                          f"({', '.join(sorted(zones))})", line)
                targets = zones[name]
            issued = _time(path, line, "issued_at", (r.get("issued_at") or "").strip())
            ts = _time(path, line, "ts", (r.get("ts") or "").strip())
            if ts != ts.floor("h"):
                raise DataFormatError(path, f"column 'ts': {ts.isoformat()} is not on the hour; "
                                      "give the start of the hour forecast", line)
            if ts < issued.floor("h"):
                raise DataFormatError(path, f"column 'ts': {ts.isoformat()} is before the "
                                      f"row's issued_at {issued.isoformat()}; a forecast is for "
                                      "a later hour (swapped columns?)", line)
            text = (r.get(VALUE_COLUMN) or "").strip()
            try:
                v = float(text)
            except ValueError:
                raise DataFormatError(path, f"column {VALUE_COLUMN!r}: {text!r} is not a number "
                                      "[gCO2eq/kWh]", line) from None
            if not np.isfinite(v) or v < 0:
                raise DataFormatError(path, f"column {VALUE_COLUMN!r}: {text!r} is not a finite "
                                      "number >= 0 [gCO2eq/kWh]", line)
            for sid in targets:
                k = (sid, issued, ts)
                if k in seen:
                    raise DataFormatError(path, f"repeats line {seen[k]}'s forecast for site "
                                          f"{sid}, issued_at {issued.isoformat()}, ts "
                                          f"{ts.isoformat()}; keep one", line)
                seen[k] = line
                rows.append((sid, issued, ts, v, line))
    if not rows:
        raise DataFormatError(path, f"no forecast rows after the header; {FORMAT_HINT}", 2)
    return pd.DataFrame(rows, columns=["site", "issued_at", "ts", "provider_mean", "line"])


def score_against(forecasts: pd.DataFrame, provider: pd.DataFrame) -> dict[str, Any]:
    """Score the provider's forecast next to the product's and naive's on the same hours.

    Parameters
    ----------
    forecasts
        The site backtest's hourly forecasts (:data:`carbonsched.evaluate.site_backtest.
        FORECAST_COLUMNS` plus ``actual``): the chosen rows are the product's, the others
        seasonal naive's.
    provider
        :func:`read_provider_forecast`'s frame.

    Returns
    -------
    dict
        ``sites`` {site: {``hours``, ``mape_pct``, ``provider_mape_pct``, ``naive_mape_pct``,
        ``skill``, ``provider_skill`` (``1 - MAPE / MAPE_naive``), ``mae``, ``provider_mae``
        [gCO2eq/kWh], ``unmatched_hours`` (product hours the provider did not forecast by
        then)}}, ``rows_used`` and ``rows_unused`` (provider rows never matched, e.g. issued
        after the product's issue time or for hours not backtested), ``rule`` (in words).
    """
    f = forecasts[forecasts["signal"] == CI].copy()
    for col in ("issued_at", "ts"):
        f[col] = pd.to_datetime(f[col], utc=True).dt.as_unit("ns")
    prod = f[f["chosen"]][["site", "issued_at", "ts", "mean", "actual"]]
    naive = f[~f["chosen"]][["site", "issued_at", "ts", "mean"]].rename(
        columns={"mean": "naive_mean"})
    prod = prod.merge(naive, on=["site", "issued_at", "ts"], how="left")
    pv = provider.rename(columns={"issued_at": "provider_issued_at"})
    for col in ("provider_issued_at", "ts"):
        pv[col] = pd.to_datetime(pv[col], utc=True).dt.as_unit("ns")
    pv = pv.sort_values("provider_issued_at")
    used: set[int] = set()
    out: dict[str, Any] = {}
    for sid, g in prod.groupby("site", sort=False):
        p = pv[pv["site"] == sid]
        g = g.sort_values("issued_at")
        # the latest provider forecast of each hour published at or before the product's issue
        m = pd.merge_asof(g, p[["ts", "provider_issued_at", "provider_mean", "line"]],
                          left_on="issued_at", right_on="provider_issued_at", by="ts",
                          direction="backward")
        ok = m[["mean", "actual", "naive_mean", "provider_mean"]].notna().all(axis=1)
        ok &= m["actual"].abs() > 1e-9
        used.update(int(x) for x in m.loc[ok, "line"])
        s = m[ok]

        def mape(col: str, d: pd.DataFrame = s) -> float | None:
            if not len(d):
                return None
            return float(100.0 * ((d[col] - d["actual"]).abs() / d["actual"].abs()).mean())

        mp, mq, mn = mape("mean"), mape("provider_mean"), mape("naive_mean")
        out[str(sid)] = {
            "hours": int(len(s)), "unmatched_hours": int(m["provider_mean"].isna().sum()),
            "mape_pct": mp, "provider_mape_pct": mq, "naive_mape_pct": mn,
            "skill": None if mp is None or not mn else 1.0 - mp / mn,
            "provider_skill": None if mq is None or not mn else 1.0 - mq / mn,
            "mae": float((s["mean"] - s["actual"]).abs().mean()) if len(s) else None,
            "provider_mae": (float((s["provider_mean"] - s["actual"]).abs().mean())
                             if len(s) else None)}
    lines = set(int(x) for x in provider["line"])
    return {"sites": out, "rows_used": len(used), "rows_unused": len(lines - used),
            "rule": "each product forecast (issued t, hour ts) against the provider's latest "
                    "forecast of ts issued at or before t; hours scored only where both, "
                    "naive and the actual exist"}


__all__ = ["FORMAT_HINT", "read_provider_forecast", "score_against"]
