"""EIA API v2 client: EIA-930 hourly net generation by fuel for one balancing authority.

Provider documentation: U.S. EIA Open Data API v2 (https://www.eia.gov/opendata/documentation.php),
route ``GET /v2/electricity/rto/fuel-type-data/data/`` with ``api_key``, ``frequency=hourly``,
``data[0]=value``, ``facets[respondent][]=<BA>``, ``start``/``end`` as ``YYYY-MM-DDTHH``,
``sort[0][column]=period``, ``offset`` and ``length`` (at most 5,000 rows per answer). The answer is
``{"response": {"total", "frequency", "dateFormat", "data": [{"period", "respondent",
"fueltype", "type-name", "value", "value-units": "megawatthours"}]}}``; values may be strings or
``null``.

Time convention (tested): with ``frequency=hourly`` the ``period`` is **UTC** and labels the hour
**ending** at it (EIA-930 reports hour-ending data; ``local-hourly`` would carry the BA's offset).
:func:`read_eia_api` shifts every stamp back one hour to the hour start.

Pagination (tested against a loopback server that pages like the API): the client asks for a
**stable order** — ``sort`` by ``period``, ``respondent`` and ``fueltype``, a total order on the
rows' key — because an order by ``period`` alone leaves the eight fuel rows of an hour in any
order, and a page boundary inside an hour can then repeat one row and skip another. It follows
``offset`` until the ``total`` the first answer states and refuses what it cannot trust, with
:class:`~carbonsched.errors.ProviderError` (the fetch is then degraded, the hours stay gaps and are
asked again next run):

* a **short read**: an empty page before ``total`` rows, or fewer distinct rows than ``total``
  once every page is read (a repeat at a page boundary hides a missing row);
* a **conflicting repeat**: one key (``period``, ``respondent``, ``fueltype``) twice with
  different values — never summed; an identical repeat is dropped and counted;
* a ``total`` that changes between pages (the data changed while it was read).

Carbon intensity comes from the mix with the same documented factors as the file reader
(:data:`carbonsched.adapters.signals.eia930.DIRECT_FACTORS_G_PER_KWH`, DACF Table 1; and
:data:`~carbonsched.adapters.signals.eia930.LCA_FACTORS_G_PER_KWH`, IPCC AR5). Fuel codes outside
the eight of EIA-930's original set (``BAT``, ``GEO``, ``PS``, ``SNB``, ...) are added to ``OTH``
and named in the notes.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from carbonsched.adapters.http import Fetcher
from carbonsched.adapters.signals._live import HOUR, as_float, finish
from carbonsched.adapters.signals.eia930 import (
    DIRECT_FACTORS_G_PER_KWH,
    FUELS,
    LCA_FACTORS_G_PER_KWH,
    LOW_CARBON,
    RENEWABLE,
    mix_intensity_g_per_kwh,
)
from carbonsched.errors import ProviderConfigError, ProviderError

SOURCE = "eia"
ROUTE = "/v2/electricity/rto/fuel-type-data/data/"
PAGE_ROWS = 5000
"""Rows per answer (the API's maximum)."""


FUEL_LOOKBACK = pd.Timedelta(days=7)
"""Hours before a fetch window also asked for, to learn which fuels the BA reports. A fuel with
no row in the window and the week before it is one the BA does not have (0 MW); a fuel with rows
in that week but none for an hour of the window is a value not reported yet, and leaves that
hour's mix missing (a gap, asked again next run), never 0 MW, as a hole inside a window always
was. A week: EIA-930's own data lag is hours to a day or two; a BA reports each of its fuels
every hour (0 MW when idle), so a fuel with no row in a week is one it does not have."""

KEY_FIELDS = ("period", "respondent", "fueltype")
"""The fields that identify one row of ``fuel-type-data`` (its sort order, too)."""


def _number(v: Any) -> float | None:
    if v is None or v == "":
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def drop_repeats(rows: list[dict[str, Any]], pages: list[int] | None = None,
                 ) -> tuple[list[dict[str, Any]], int]:
    """Drop identical repeats of a row key; refuse a key repeated with a different value.

    Parameters
    ----------
    rows
        ``fuel-type-data`` rows (every page joined), in the order read.
    pages
        The 1-based page each row came from (for the message), or ``None``.

    Returns
    -------
    (list of dict, int)
        The rows with each key once (first copy kept), and how many identical repeats were
        dropped.

    Raises
    ------
    ProviderError
        A key (:data:`KEY_FIELDS`) with two different values; both values (and pages) named.
    """
    seen: dict[tuple[Any, ...], int] = {}
    out: list[dict[str, Any]] = []
    dropped = 0
    for i, r in enumerate(rows):
        key = tuple(r.get(k) for k in KEY_FIELDS)
        j = seen.get(key)
        if j is None:
            seen[key] = i
            out.append(r)
            continue
        a, b = _number(rows[j].get("value")), _number(r.get("value"))
        if a != b:
            where = (f" (pages {pages[j]} and {pages[i]})" if pages is not None else
                     f" (rows {j + 1} and {i + 1})")
            raise ProviderError(
                SOURCE, f"period {key[0]} respondent {key[1]} fuel {key[2]} answered twice with "
                f"different values, {rows[j].get('value')!r} and {r.get('value')!r}{where}; "
                "refusing to sum or pick one (the data changed while it was read, or the order "
                "was not stable)")
        dropped += 1
    return out, dropped


def read_eia_api(rows: list[dict[str, Any]], respondent: str | None = None,
                 keep_from: pd.Timestamp | None = None,
                 ) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Parse EIA-930 fuel-type rows (all pages joined) into an hour-start UTC frame.

    A fuel with no row at all is one the BA does not have (0 MW); one with rows but none for an
    hour leaves that hour's mix missing. ``keep_from``: the hours before it (hour start, UTC)
    only tell which fuels the BA reports (:data:`FUEL_LOOKBACK`) and are not returned.

    Returns
    -------
    frame : DataFrame
        ``generation_<fuel>_mw`` for the eight fuels, ``carbon_intensity_g_per_kwh`` (direct),
        ``carbon_intensity_lca_g_per_kwh``, ``renewable_pct``, ``low_carbon_pct``,
        ``is_estimated`` (False: EIA-930 has no flag).
    meta : dict
        Provenance.

    Raises
    ------
    ProviderError
        Rows of another respondent, a period that is not ``YYYY-MM-DDTHH``, units that are
        not megawatthours, a key repeated with a different value (:func:`drop_repeats`).
    """
    notes: list[str] = []
    rows, n_repeats = drop_repeats(rows)
    if n_repeats:
        notes.append(f"{n_repeats} identical repeated row(s) dropped")
    if not rows:
        empty = pd.DataFrame(columns=["carbon_intensity_g_per_kwh"],
                             index=pd.DatetimeIndex([], tz="UTC", name="ts"))
        return empty, {"source": SOURCE, "zone": respondent, "signal_type": "fuel_mix",
                       "emission_factor_type": "direct", "newest_value_at": None,
                       "notes": ["no rows"], "time_convention": "hour ending, UTC → hour start"}
    df = pd.DataFrame(rows)
    for col in ("period", "respondent", "fueltype", "value"):
        if col not in df:
            raise ProviderError(SOURCE, f"rows have no {col!r} field: {rows[0]}")
    others = sorted(set(df["respondent"]) - {respondent}) if respondent else []
    if others:
        raise ProviderError(SOURCE, f"asked for {respondent!r}, rows for {others}")
    units = set(df.get("value-units", pd.Series(["megawatthours"])).dropna())
    if units - {"megawatthours"}:
        raise ProviderError(SOURCE, f"value-units {sorted(units)}: expected megawatthours")
    try:
        ending = pd.to_datetime(df["period"], format="%Y-%m-%dT%H", utc=True)
    except ValueError as exc:
        raise ProviderError(SOURCE, f"period is not YYYY-MM-DDTHH (UTC, hourly): {exc}") from exc
    df["ts"] = ending - HOUR
    df["value"] = as_float(None if v in (None, "") else v for v in df["value"])
    extra = sorted(set(df["fueltype"]) - set(FUELS))
    if extra:
        notes.append(f"fuel codes {', '.join(extra)} counted as OTH")
        df.loc[df["fueltype"].isin(extra), "fueltype"] = "OTH"
    # a null value stays missing (sum with min_count=1): a mix with a hole has no intensity
    wide = df.groupby(["ts", "fueltype"])["value"].sum(min_count=1).unstack("fueltype")
    gen = wide.reindex(columns=list(FUELS))
    absent = [f for f in FUELS if f not in wide.columns]
    gen[absent] = 0.0  # a BA without that fuel reports no row for it
    gen = gen.clip(lower=0.0)
    if keep_from is not None:
        gen = gen[gen.index >= keep_from]
    total = gen.sum(axis=1, min_count=len(FUELS))
    frame = pd.DataFrame(index=gen.index)
    for f in FUELS:
        frame[f"generation_{f.lower()}_mw"] = gen[f]
    frame["carbon_intensity_g_per_kwh"] = mix_intensity_g_per_kwh(gen, DIRECT_FACTORS_G_PER_KWH)
    frame["carbon_intensity_lca_g_per_kwh"] = mix_intensity_g_per_kwh(gen, LCA_FACTORS_G_PER_KWH)
    frame["renewable_pct"] = (gen[list(RENEWABLE)].sum(axis=1) / total * 100).where(total > 0)
    frame["low_carbon_pct"] = (gen[list(LOW_CARBON)].sum(axis=1) / total * 100).where(total > 0)
    frame["is_estimated"] = False
    frame.index = pd.DatetimeIndex(frame.index, name="ts")
    frame, newest = finish(frame, SOURCE, f"{respondent} fuel mix", ["carbon_intensity_g_per_kwh"])
    n_nan = int(frame["carbon_intensity_g_per_kwh"].isna().sum())
    if n_nan:
        notes.append(f"{n_nan} hour(s) with a missing fuel value: carbon intensity NaN")
    return frame, {"source": SOURCE, "zone": respondent, "signal_type": "fuel_mix",
                   "emission_factor_type": "direct", "newest_value_at": newest, "notes": notes,
                   "time_convention": "period = hour ENDING, UTC; shifted back 1 h to hour start"}


def get_eia_api(fetcher: Fetcher, api_key: str, respondent: str, start: pd.Timestamp,
                end: pd.Timestamp) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Hourly fuel mix and carbon intensity of ``respondent`` for hour starts in ``[start, end)``.

    The hour starting at ``t`` is EIA's period ``t + 1 h`` (hour ending), so the request asks
    ``start + 1 h`` .. ``end`` (both inclusive in the API), and the :data:`FUEL_LOOKBACK` before
    it to learn the BA's fuels, and follows ``offset`` pages in a stable order until the stated
    ``total`` (see the module docstring).

    Raises
    ------
    ProviderConfigError
        403 (bad ``api_key``).
    ProviderError
        A short read, a conflicting repeat, a total that changes between pages, a page without
        ``total`` (see the module docstring).
    """
    params: dict[str, Any] = {
        "api_key": api_key, "frequency": "hourly", "data[0]": "value",
        "facets[respondent][]": respondent,
        # the week before too: which fuels the BA reports (FUEL_LOOKBACK)
        "start": (start - FUEL_LOOKBACK + HOUR).strftime("%Y-%m-%dT%H"),
        "end": end.strftime("%Y-%m-%dT%H"),
        "length": PAGE_ROWS,
    }
    for i, column in enumerate(KEY_FIELDS):  # a total order: pages neither repeat nor skip
        params[f"sort[{i}][column]"] = column
        params[f"sort[{i}][direction]"] = "asc"
    rows: list[dict[str, Any]] = []
    page_of: list[int] = []
    offset, total, pages = 0, None, 0
    while total is None or offset < total:
        try:
            answer = fetcher.get_json(ROUTE, params={**params, "offset": offset})
        except ProviderError as exc:
            if exc.status in (401, 403):
                raise ProviderConfigError(
                    SOURCE, f"api_key rejected (HTTP {exc.status}); set EIA_API_KEY") from exc
            raise
        pages += 1
        resp = answer.get("response") if isinstance(answer, dict) else None
        if not isinstance(resp, dict) or not isinstance(resp.get("data"), list):
            raise ProviderError(SOURCE, f"answer has no response.data: {str(answer)[:200]}")
        try:
            stated = int(resp["total"])
        except (KeyError, TypeError, ValueError):
            raise ProviderError(SOURCE, f"page {pages} states no total ({resp.get('total')!r}); "
                                "cannot tell when the pages end") from None
        if total is not None and stated != total:
            raise ProviderError(SOURCE, f"{respondent}: the stated total changed from {total} to "
                                f"{stated} rows at page {pages} (offset {offset}): the data "
                                "changed while it was read; it is asked again next run")
        total = stated
        page = resp["data"]
        if not page:
            if offset < total:
                raise ProviderError(
                    SOURCE, f"{respondent}: short read: page {pages} (offset {offset}) is empty "
                    f"but the answer states {total} rows; {offset} read. The hours stay gaps "
                    "and are asked again next run")
            break
        rows.extend(page)
        page_of.extend([pages] * len(page))
        offset += len(page)
    rows, n_repeats = drop_repeats(rows, page_of)
    if total is not None and len(rows) < total:
        raise ProviderError(
            SOURCE, f"{respondent}: short read: {len(rows)} distinct rows of the {total} stated "
            f"({n_repeats} repeated across {pages} page(s), so as many are missing: the order "
            "was not stable across pages); asked again next run")
    frame, meta = read_eia_api(rows, respondent, keep_from=start)
    meta["requests"] = pages
    if n_repeats:
        meta["notes"].append(f"{n_repeats} identical row(s) repeated across pages dropped")
    frame = frame[(frame.index >= start) & (frame.index < end)]
    return frame, meta
