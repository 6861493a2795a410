"""GHG Protocol Scope 2: the market-based method under two rules, on hourly consumption rows.

Sources
-------
* GHG Protocol (2015), *Scope 2 Guidance*, ch. 6 (market-based method), ch. 7 (Scope 2 Quality
  Criteria: an instrument is claimed once, in its own market, for consumption in its vintage);
  Table 6.3 (emission-factor hierarchy: instruments, supplier-specific factor, residual mix,
  other grid-average factors). Annual matching: an instrument's volume meets the market's
  consumption anywhere inside its validity period.
* GHG Protocol (October 2025), *Scope 2 Public Consultation* draft: instruments matched to
  consumption hour by hour inside the same grid boundary; consumption not matched uses the
  residual-mix factor or, where none exists, a fossil factor (grid-average factors are no longer
  allowed for unmatched energy); PPAs are matched by their hourly generation.

Both functions take the same consumption rows (any granularity below site-hour: job-hours) and
allocate pro rata to each row's energy, so the per-job numbers add up to the site totals.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from carbonsched.report.instruments import MarketConfig

RULE_2015 = "GHG Protocol Scope 2 Guidance (2015): annual matching within the instrument's market"
RULE_HOURLY = ("GHG Protocol Scope 2 public consultation (Oct 2025): hourly matching within the "
               "grid boundary; unmatched energy at the residual mix, else a fossil factor")

FALLBACK_LOCATION_2015 = "location factor (no residual mix configured)"
FALLBACK_LOCATION_HOURLY = ("location factor (no residual mix or fossil factor configured; "
                            "not allowed by the hourly rule)")


def _eligible(rows: pd.DataFrame, market: pd.Series, inst, period: tuple) -> np.ndarray:
    ok = (market.to_numpy() == inst.market)
    if inst.sites:
        ok &= rows["site"].isin(inst.sites).to_numpy()
    h = rows["hour"]
    ok &= ((h >= inst.valid_from) & (h < inst.valid_to)).to_numpy()
    ok &= ((h >= period[0]) & (h < period[1])).to_numpy()
    return ok


def _period_volume_mwh(inst, period: tuple[pd.Timestamp, pd.Timestamp]) -> tuple[float, str]:
    """Volume an instrument brings to the report period, and how it was prorated. [MWh]"""
    t0, t1 = max(inst.valid_from, period[0]), min(inst.valid_to, period[1])
    if t1 <= t0:
        return 0.0, "validity outside the report period"
    if inst.profile_mwh is not None:
        p = inst.profile_mwh
        return float(p[(p.index >= t0) & (p.index < t1)].sum()), "profile inside the period"
    share = (t1 - t0) / (inst.valid_to - inst.valid_from)
    if share >= 1.0:
        return inst.volume_mwh, "whole volume (validity inside the period)"
    return inst.volume_mwh * share, f"prorated by time: {100 * share:.2f} % of its validity"


def _fallback(rows: pd.DataFrame, remaining: np.ndarray, config: MarketConfig, zones: dict,
              hourly: bool) -> tuple[np.ndarray, np.ndarray]:
    """Emissions of unmatched energy and the basis used per row. [kg], [str]"""
    kg = np.zeros(len(rows))
    basis = np.empty(len(rows), dtype=object)
    loc = rows["location_g_per_kwh"].to_numpy(float)
    for sid in rows["site"].unique():
        m = (rows["site"] == sid).to_numpy()
        f = config.site(sid, zones.get(sid, sid))
        if f.residual_mix_g_per_kwh is not None:
            kg[m] = remaining[m] * f.residual_mix_g_per_kwh / 1000.0
            basis[m] = "residual mix"
        elif hourly and f.fossil_g_per_kwh is not None:
            kg[m] = remaining[m] * f.fossil_g_per_kwh / 1000.0
            basis[m] = "fossil factor"
        else:
            kg[m] = remaining[m] * loc[m] / 1000.0
            basis[m] = FALLBACK_LOCATION_HOURLY if hourly else FALLBACK_LOCATION_2015
    return kg, basis


def market_based(rows: pd.DataFrame, config: MarketConfig, zones: dict[str, str],
                 period: tuple[pd.Timestamp, pd.Timestamp], hourly: bool
                 ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Market-based emissions of consumption rows under one rule.

    Parameters
    ----------
    rows
        Columns ``site``, ``hour`` (UTC), ``facility_energy_kwh`` [kWh] and
        ``location_g_per_kwh`` [gCO2e/kWh] (the hour's location factor, NaN where unknown).
    config
        Site factors and instruments (:func:`carbonsched.report.instruments.load_market_config`).
    zones
        Site id -> grid zone (the default market).
    period
        Report period ``[from, to)``; instruments count only inside it.
    hourly
        ``False``: 2015 annual matching; ``True``: hourly matching (October 2025 draft).

    Returns
    -------
    per_row : DataFrame, same index as ``rows``
        ``covered_kwh`` (by volume instruments), ``cfe_kwh`` (covered by zero-emission
        instruments), ``supplier_kwh``, ``unmatched_kwh``, ``market_kg``, ``unmatched_basis``.
    usage : DataFrame
        One row per instrument: ``instrument``, ``kind``, ``market``, ``rule``,
        ``volume_in_period_mwh``, ``volume_basis``, ``used_mwh``, ``unused_mwh`` (capped:
        volume that met no consumption, not carried over), ``emissions_kg``.
    """
    n = len(rows)
    energy = rows["facility_energy_kwh"].to_numpy(float)
    remaining = energy.copy()
    covered = np.zeros(n)
    cfe = np.zeros(n)
    supplier = np.zeros(n)
    kg = np.zeros(n)
    market = rows["site"].map(lambda s: config.site(s, zones.get(s, s)).market)
    hours = rows["hour"]
    usage = []
    ordered = ([i for i in config.instruments if i.kind != "supplier"]
               + [i for i in config.instruments if i.kind == "supplier"])
    for inst in ordered:
        ok = _eligible(rows, market, inst, period)
        if inst.kind == "supplier":
            take = np.where(ok, remaining, 0.0)
            supplier += take
            kg += take * inst.factor_g_per_kwh / 1000.0
            remaining -= take
            usage.append(dict(instrument=inst.id, kind=inst.kind, market=inst.market,
                              rule=inst.rule_hourly if hourly else inst.rule_2015,
                              volume_in_period_mwh=np.nan, volume_basis="factor, no volume",
                              used_mwh=take.sum() / 1000.0, unused_mwh=0.0,
                              emissions_kg=float((take * inst.factor_g_per_kwh).sum() / 1000.0)))
            continue
        vol, vbasis = _period_volume_mwh(inst, period)
        if hourly:
            idx = pd.DatetimeIndex(sorted(set(hours[ok]))) if ok.any() else pd.DatetimeIndex([])
            if inst.profile_mwh is not None:
                p = inst.profile_mwh
                in_period = p[(p.index >= period[0]) & (p.index < period[1])]
                vol = float(in_period.sum())
            else:
                in_period = inst.hourly_volume_mwh(pd.date_range(
                    max(inst.valid_from, period[0]), min(inst.valid_to, period[1]),
                    freq="h", inclusive="left"))
                vol = float(in_period.sum())
            avail_kwh = (in_period.reindex(idx).fillna(0.0) * 1000.0)
            rem = pd.Series(np.where(ok, remaining, 0.0), index=rows.index)
            demand = rem.groupby(hours.to_numpy()).sum()
            demand = demand.reindex(idx).fillna(0.0)
            used_h = np.minimum(avail_kwh.to_numpy(), demand.to_numpy())
            frac_h = pd.Series(np.divide(used_h, demand.to_numpy(),
                                         out=np.zeros(len(idx)), where=demand.to_numpy() > 0),
                               index=idx)
            frac = hours.map(frac_h).fillna(0.0).to_numpy() * ok
            used = float(used_h.sum())
            vbasis = ("hourly profile" if inst.profile_mwh is not None else
                      "flat over its validity hours (no hourly granularity)")
        else:
            demand_total = float(remaining[ok].sum())
            used = min(vol * 1000.0, demand_total)
            frac = np.where(ok, used / demand_total if demand_total > 0 else 0.0, 0.0)
        take = remaining * frac
        covered += take
        if inst.factor_g_per_kwh == 0.0:
            cfe += take
        kg += take * inst.factor_g_per_kwh / 1000.0
        remaining -= take
        usage.append(dict(instrument=inst.id, kind=inst.kind, market=inst.market,
                          rule=inst.rule_hourly if hourly else inst.rule_2015,
                          volume_in_period_mwh=vol, volume_basis=vbasis,
                          used_mwh=used / 1000.0, unused_mwh=max(vol - used / 1000.0, 0.0),
                          emissions_kg=float(take.sum() * inst.factor_g_per_kwh / 1000.0)))
    remaining = np.clip(remaining, 0.0, None)
    fb_kg, basis = _fallback(rows, remaining, config, zones, hourly)
    basis = np.where(remaining > 0, basis, "covered")
    out = pd.DataFrame({"covered_kwh": covered, "cfe_kwh": cfe, "supplier_kwh": supplier,
                        "unmatched_kwh": remaining, "market_kg": kg + fb_kg,
                        "unmatched_basis": basis}, index=rows.index)
    cols = ["instrument", "kind", "market", "rule", "volume_in_period_mwh", "volume_basis",
            "used_mwh", "unused_mwh", "emissions_kg"]
    return out, pd.DataFrame(usage, columns=cols)
