"""EIA-930 hourly generation by fuel (one balancing area), carbon intensity from the mix.

Input: a CSV with a UTC timestamp column (``timestamp``, or an unnamed first column) and the
EIA-930 fuel codes ``WND SUN WAT OIL NG COL NUC OTH`` as hourly mean generation [MW]
(U.S. EIA, "Hourly Electric Grid Monitor", form EIA-930, https://www.eia.gov/electricity/gridmonitor/).
An ``avg_CI`` column, if present, is only compared with our life-cycle recomputation.

Computed columns:

* ``carbon_intensity_g_per_kwh``: DIRECT (operational) intensity
  ``sum_f gen_f * EF_f / sum_f gen_f`` with :data:`DIRECT_FACTORS_G_PER_KWH` (Maji, Sitaraman,
  Shenoy, "DACF: Day-ahead Carbon Intensity Forecasting of Power Grids using Machine Learning",
  ACM e-Energy 2022, Table 1, doi:10.1145/3538637.3538849);
* ``carbon_intensity_lca_g_per_kwh``: life-cycle intensity with :data:`LCA_FACTORS_G_PER_KWH`
  (IPCC AR5 WG3 Annex III, 2014, median life-cycle factors, as used by the file's ``avg_CI``);
* ``renewable_pct`` = (WND + SUN + WAT) / total × 100 and ``low_carbon_pct`` = (WND + SUN +
  WAT + NUC) / total × 100. ``OTH`` (biomass, geothermal, storage, unknown) counts as neither.

Rules (tested in ``tests/adapters/test_eia930.py``):

* **negative generation** is invalid, not zero: an hour with any negative fuel value (e.g. hydro
  −900 MW, a pumped-storage or sign error) has NaN intensity and shares (a mix with a negative
  share has no defined intensity), counted with the fuels in ``meta["notes"]`` and
  ``meta["n_invalid_negative"]``; the raw generation columns keep the value as filed;
* **hour convention**: EIA-930 stamps mark the END of the hour (EIA, "About the EIA-930 data":
  "UTC Time at End of Hour"). A file whose timestamp header says ``End of Hour`` is moved onto
  hour starts here (stamp − 1 h; ``meta["time_convention"] = "hour-end"``); a file with a plain
  ``timestamp`` column does not say which convention it follows and is returned as stamped
  (``"unknown"``): the ``eia930-sustaindc`` files are aligned per balancing area and period by
  :func:`align_sustaindc` (:data:`SUSTAINDC_HOUR_END_SHIFT`);
* a row with any fuel missing (NaN), or with total generation <= 0, has NaN intensity and
  shares (a mix with a hole has no defined share) and is counted in the notes;
* a row whose total generation is below ``min_total_fraction`` (default 5 %) of the file's
  median total is an incomplete report (PJM 2022 has five such hours at ~0.3 % of the median,
  with a CI of ~46 g/kWh against a normal ~400): its derived values are NaN, counted in notes;
* timestamps must carry an offset (``+00:00``) or be ``MM/DD/YYYY`` with a ``(UTC)`` header;
  naive stamps are refused; duplicates, gaps, unreadable cells: see
  :mod:`carbonsched.adapters.signals._common`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
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
from carbonsched.adapters.signals.quality import Quarantine

SUSTAINDC_HOUR_END_SHIFT: dict[str, tuple[tuple[str | None, int], ...]] = {
    "AZPS": ((None, 1),),
    "BPAT": ((None, 1),),
    "CISO": ((None, 0), ("2022-06-13T18:00:00+00:00", 1)),
    "ERCO": ((None, 1),),
    "MISO": ((None, 1),),
    "NYIS": ((None, 1),),
    "PJM": ((None, 0),),
    "SOCO": ((None, 1),),
    "WAAT": ((None, 2),),
}
"""Hours to subtract from each ``eia930-sustaindc/<BA>_NG_avgCI_2022.csv`` stamp to reach the hour
START, per balancing area and period ``(first stamp of the period or None, hours)``. [h]

Measured (``tests/adapters/test_eia930_alignment.py`` recomputes it): the generation-weighted
circular mean of solar generation (SUN, interval mid-points) against solar noon at each BA's
solar-fleet longitude, 2022, taking the stamps as hour starts: AZPS +1.68 h, BPAT +1.07, CISO +0.26
until 2022-06-13 17:00 and +0.89 after (the row 2022-06-13 18:00 is empty where the convention
changes: sunrise generation moves one row later from 2022-06-14), ERCO +1.07, MISO +1.00,
PJM +0.00, SOCO +0.88, WAAT +1.94. So PJM and CISO's first half are hour-start, the others
hour-ending (1 h), WAAT two hours late. NYIS has no solar to measure and gets EIA's documented
hour-ending convention. AZPS keeps +0.68 h after its shift: its solar includes Solana, a 280 MW
trough plant with six hours of storage that generates into the evening and night, so the centroid
of *its* generation sits after noon; the hour-ending reading (as the data README says) is the
convention, the residual is physical (the alignment test states this exception and bounds it)."""

FUELS = ("WND", "SUN", "WAT", "OIL", "NG", "COL", "NUC", "OTH")
"""EIA-930 fuel codes: wind, solar, hydro, oil, natural gas, coal, nuclear, other."""

RENEWABLE = ("WND", "SUN", "WAT")
LOW_CARBON = ("WND", "SUN", "WAT", "NUC")

DIRECT_FACTORS_G_PER_KWH: dict[str, float] = {
    "WND": 0.0, "SUN": 0.0, "WAT": 0.0, "NUC": 0.0,
    "OIL": 406.0, "NG": 370.0, "COL": 760.0, "OTH": 575.0,
}
"""Direct (combustion) emission factors [gCO2eq/kWh]: DACF paper Table 1 (Maji et al., ACM
e-Energy 2022, doi:10.1145/3538637.3538849): coal 760, oil 406, natural gas 370,
other/unknown 575, renewables and nuclear 0."""

LCA_FACTORS_G_PER_KWH: dict[str, float] = {
    "WND": 11.0, "SUN": 41.0, "WAT": 24.0, "NUC": 12.0,
    "OIL": 650.0, "NG": 490.0, "COL": 820.0, "OTH": 230.0,
}
"""Life-cycle emission factors [gCO2eq/kWh]: IPCC AR5 WG3 Annex III (2014) medians (wind 11,
solar 41 (utility PV), hydro 24, nuclear 12, gas 490 (combined cycle), coal 820); oil 650 and
other 230 as used by the SustainDC ``avg_CI`` column of these files."""

VARIABLE_MAP: dict[str, str] = {
    alias: col for col, aliases in HEADER_ALIASES["eia930"].items() for alias in aliases
}
"""Provider column -> carbonsched column (generation columns keep the EIA fuel code): a view of
the one alias table, :data:`carbonsched.adapters.signals._common.HEADER_ALIASES`."""

GEN_COLUMNS = tuple(f"generation_{f.lower()}_mw" for f in FUELS)
OUTPUT_COLUMNS = (
    "carbon_intensity_g_per_kwh",
    "carbon_intensity_lca_g_per_kwh",
    "carbon_intensity_estimated",
    "renewable_pct",
    "low_carbon_pct",
    "generation_total_mw",
    *GEN_COLUMNS,
)


def mix_intensity_g_per_kwh(
    generation_mw: pd.DataFrame, factors: Mapping[str, float]
) -> pd.Series:
    """Generation-weighted carbon intensity of a fuel mix.

    ``CI = sum_f gen_f * EF_f / sum_f gen_f`` (e.g. DACF, Maji et al. 2022, eq. 1).

    Parameters
    ----------
    generation_mw
        Shape (n, k): generation by fuel [MW] (or MWh per hour), columns = fuel codes.
    factors
        Emission factor by fuel code [gCO2eq/kWh]; must cover every column.

    Returns
    -------
    Series, shape (n,)
        [gCO2eq/kWh]; NaN where the total is <= 0 or any fuel is NaN.
    """
    missing = [c for c in generation_mw.columns if c not in factors]
    if missing:
        raise KeyError(f"no emission factor for fuel(s) {missing}; give one per fuel code")
    w = pd.Series({c: float(factors[c]) for c in generation_mw.columns})
    total = generation_mw.sum(axis=1, min_count=len(generation_mw.columns))
    emitted = generation_mw.mul(w, axis=1).sum(axis=1, min_count=len(generation_mw.columns))
    return (emitted / total).where(total > 0)


def read_eia930(
    path: str | Path,
    factors: Mapping[str, float] = DIRECT_FACTORS_G_PER_KWH,
    lca_factors: Mapping[str, float] = LCA_FACTORS_G_PER_KWH,
    min_total_fraction: float = 0.05,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read an EIA-930 fuel-mix CSV and compute direct and life-cycle carbon intensity.

    Parameters
    ----------
    path
        ``<BA>_NG_avgCI_<YEAR>.csv``-style file (see module docstring).
    factors
        Direct emission factors by EIA fuel code [gCO2eq/kWh]; default DACF Table 1.
    lca_factors
        Life-cycle emission factors [gCO2eq/kWh]; default IPCC AR5 WG3 Annex III.
    min_total_fraction
        Rows with total generation below this fraction of the file's median total are treated
        as incomplete reports (derived values NaN). [-]

    Returns
    -------
    data : DataFrame, shape (n_hours, 14)
        Index ``ts`` (tz-aware UTC, hourly, start of hour). Columns
        ``carbon_intensity_g_per_kwh`` [gCO2eq/kWh] (direct), ``carbon_intensity_lca_g_per_kwh``
        [gCO2eq/kWh], ``carbon_intensity_estimated`` (bool, always False: EIA-930 has no flag),
        ``renewable_pct`` [%], ``low_carbon_pct`` [%], ``generation_total_mw`` [MW] and
        ``generation_<fuel>_mw`` [MW] as in the file (negative values kept there).
    meta : dict
        ``source``, ``file``, ``balancing_area`` (from the file name), ``factors``,
        ``lca_factors``, ``n_invalid_negative`` (hours with a negative fuel), ``n_incomplete``,
        ``time_convention``, ``quarantined``, ``n_quarantined``,
        ``file_avg_ci_max_abs_diff_g_per_kwh`` (our LCA CI vs the file's ``avg_CI``), ``notes``.

    Raises
    ------
    DataFormatError
        Missing file or column, unparsable number or timestamp (file, line, reason),
        conflicting duplicates.
    KeyError
        ``factors`` or ``lca_factors`` lack a fuel code.
    """
    p = check_file(path)
    for name, table in (("factors", factors), ("lca_factors", lca_factors)):
        missing = [f for f in FUELS if f not in table]
        if missing:
            raise KeyError(f"{name} lack fuel code(s) {missing}; give one per code in {FUELS}")
    quarantine = Quarantine()
    cells, lines = read_csv_cells(p, quarantine)
    # a file written from a pandas index may carry any label on its first column
    cells, provider = resolve_columns(cells, "eia930", ("ts", *GEN_COLUMNS), p,
                                      first_column_is_time=True)
    notes: list[str] = []
    ts_col = provider.get("ts", "timestamp")
    ts = parse_timestamps(cells["ts"], p, lines, ts_col, assume_utc="UTC" in ts_col.upper())
    hour_end = "END OF HOUR" in ts_col.upper()
    if hour_end:
        ts = pd.DatetimeIndex(ts - pd.Timedelta(hours=1), name="ts")
        notes.append(f"stamps are {ts_col!r}: moved one hour back onto hour starts")
    gen = pd.DataFrame(index=ts)
    for c in GEN_COLUMNS:
        gen[c] = parse_numeric(cells[c], p, lines, provider.get(c, c)).to_numpy()
    if "file_avg_ci_lca_g_per_kwh" in cells:
        gen["file_avg_ci_lca_g_per_kwh"] = parse_numeric(
            cells["file_avg_ci_lca_g_per_kwh"], p, lines, "avg_CI"
        ).to_numpy()
    stamps: dict[str, list] = {}
    gen = finalize(gen, np.asarray(lines), p, notes, quarantine=quarantine, stamps=stamps)
    if (note := quarantine.note()) is not None:
        notes.append(note)

    raw = gen[list(GEN_COLUMNS)].set_axis(list(FUELS), axis=1)
    negative = raw < 0
    neg_hour = negative.any(axis=1)
    n_neg = int(neg_hour.sum())
    if n_neg:
        by_fuel = {f: int(n) for f, n in negative.sum().items() if n}
        first = neg_hour.idxmax()
        worst = raw.loc[first][negative.loc[first]]
        notes.append(
            f"{n_neg} hour(s) with negative generation ({by_fuel}): mix invalid, CI and shares "
            f"NaN (first {first.isoformat()}: "
            + ", ".join(f"{f} {v:g} MW" for f, v in worst.items()) + ")")
    mix = raw.where(~neg_hour, np.nan)
    total = mix.sum(axis=1, min_count=len(FUELS))
    has_hole = raw.isna().any(axis=1) & raw.notna().any(axis=1) & ~neg_hour
    if has_hole.any():
        notes.append(f"{int(has_hole.sum())} hour(s) with some fuels missing: CI and shares NaN")
    all_nan = raw.isna().all(axis=1)
    median_total = float(total[total > 0].median()) if (total > 0).any() else np.nan
    incomplete = (total <= 0) | (total < min_total_fraction * median_total)
    incomplete &= total.notna()
    if incomplete.any():
        notes.append(
            f"{int(incomplete.sum())} hour(s) with total generation <= 0 or below "
            f"{min_total_fraction:.0%} of the median ({median_total:.0f} MW) treated as "
            f"incomplete reports: CI and shares NaN (first {incomplete.idxmax().isoformat()})"
        )
    n_missing = int(all_nan.sum())
    if n_missing:
        notes.append(f"{n_missing} hour(s) without any generation data: NaN")
    valid = total.notna() & ~incomplete
    out = pd.DataFrame(index=gen.index)
    out["carbon_intensity_g_per_kwh"] = mix_intensity_g_per_kwh(mix, factors).where(valid)
    out["carbon_intensity_lca_g_per_kwh"] = mix_intensity_g_per_kwh(mix, lca_factors).where(
        valid
    )
    out["carbon_intensity_estimated"] = False
    out["renewable_pct"] = (100.0 * mix[list(RENEWABLE)].sum(axis=1) / total).where(valid)
    out["low_carbon_pct"] = (100.0 * mix[list(LOW_CARBON)].sum(axis=1) / total).where(valid)
    out["generation_total_mw"] = total.where(~all_nan)
    for c in GEN_COLUMNS:
        out[c] = gen[c]
    out.index.name = "ts"

    diff = np.nan
    if "file_avg_ci_lca_g_per_kwh" in gen:
        d = (out["carbon_intensity_lca_g_per_kwh"] - gen["file_avg_ci_lca_g_per_kwh"]).abs()
        diff = float(d.max()) if d.notna().any() else np.nan
    meta: dict[str, Any] = {
        "source": "eia930",
        "file": str(p),
        "balancing_area": p.name.split("_")[0],
        "factors": dict(factors),
        "lca_factors": dict(lca_factors),
        "n_invalid_negative": n_neg,
        "time_convention": "hour-end" if hour_end else "unknown",
        **stamps,
        **quarantine.as_meta(),
        "n_incomplete": int(incomplete.sum()),
        "file_avg_ci_max_abs_diff_g_per_kwh": diff,
        "units": {c: "MW" for c in GEN_COLUMNS}
        | {"carbon_intensity_g_per_kwh": "gCO2eq/kWh",
           "carbon_intensity_lca_g_per_kwh": "gCO2eq/kWh",
           "renewable_pct": "%", "low_carbon_pct": "%"},
        "notes": notes,
    }
    return out, meta


def align_sustaindc(frame: pd.DataFrame, balancing_area: str) -> pd.DataFrame:
    """Move an ``eia930-sustaindc`` frame onto hour starts with :data:`SUSTAINDC_HOUR_END_SHIFT`.

    Each period's stamps are shifted back by its hours; where two periods meet, the earlier
    period's hour wins and an hour no period covers is NaN. A BA not in the table is returned
    unchanged (its convention is unknown: the caller notes it).

    Returns
    -------
    DataFrame
        Hourly UTC frame, index ``ts`` = hour start; ``attrs["alignment"]`` describes the shift.
    """
    periods = SUSTAINDC_HOUR_END_SHIFT.get(balancing_area)
    if periods is None:
        return frame
    starts = [pd.Timestamp(s) if s else frame.index[0] for s, _ in periods]
    ends = starts[1:] + [frame.index[-1] + pd.Timedelta(hours=1)]
    out: pd.DataFrame | None = None
    for (_, shift), a, b in zip(periods, starts, ends, strict=True):
        part = frame[(frame.index >= a) & (frame.index < b)]
        part = part.set_axis(part.index - pd.Timedelta(hours=shift))
        out = part if out is None else out.combine_first(part)
    assert out is not None
    full = pd.date_range(out.index[0], out.index[-1], freq="h", tz="UTC", name="ts")
    out = out.reindex(full)
    out.attrs["alignment"] = ", ".join(
        f"{'from ' + s if s else 'all'}: stamps - {h} h" for s, h in periods)
    return out
