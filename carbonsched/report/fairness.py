"""The report's fair-shares section: per plan (day) and tenant, the share against its target.

Built from the ``tenants`` rows and totals of the period's plan documents, planned with
``fairness`` above 0 (:func:`carbonsched.plan.fairness.solve_fair`):

* ``fair_shares``: per plan and tenant the weight, GPU-hours asked and placed, dominant share
  and its weighted-DRF target, the deviation ``|share - target| / target``, the guaranteed
  quota and whether it was met, and whether the plan applied the fair shares at all
  (``fair_applied``: false when it fell back to a path without them);
* ``fair_days``: per plan the carbon-only plan's emissions, the fair plan's, the carbon cost of
  fairness in kg and as a share of the carbon-only plan's, and the tenants whose fair shares
  were not applied;
* totals per period: ``fairness_cost_kg``, ``carbon_only_emissions_kg``,
  ``fair_tenants_within_5pct`` and ``fair_tenants_with_target`` [-], ``fair_quotas_missed``
  [-], ``fairness_not_applied_tenants`` [-].

The figures are the plans' own (emissions on the signals they were planned on), like the
plans' other figures in the report; the section does not recompute them.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

SHARE_COLUMNS = ("plan_id", "date", "tenant", "weight", "demand_gpu_h", "placed_gpu_h",
                 "dominant_share", "target_share", "deviation_share", "dominant_gpu_type",
                 "quota_gpu_h", "quota_met", "fair_applied")
"""Columns of the ``fair_shares`` frame (units in the suffixes)."""
DAY_COLUMNS = ("plan_id", "date", "tenants", "carbon_only_emissions_kg", "emissions_kg",
               "fairness_cost_kg", "fairness_cost_pct", "fairness_not_applied_tenants")
"""Columns of the ``fair_days`` frame."""
FAIR_TABLES = ("fair_shares", "fair_days")
"""The section's tables, present only when a plan of the period was planned with tenants."""
WITHIN = 0.05
"""Relative deviation of a dominant share from its target counted as met: the issue's target
(BENCHMARKS.md section 15: every tenant with demand within 5 %). [-]"""

RULE = ("dominant share = a tenant's placed GPU-hours / the binding type's shared GPU-hours, "
        "largest over the binding types; target = the same share of the weighted-DRF "
        "allocation over what the tenant's residency groups reach; carbon cost of fairness = "
        "the fair plan's emissions - the carbon-only plan's (both the plan's own figures); "
        "fair_applied false: the plan fell back to a path without fair-share rows "
        "(docs/plan.md, 'Tenants and fair shares')")
"""How the section's figures are computed (the report's ``rules`` block)."""


def fairness_section(docs: list[dict[str, Any]]
                     ) -> tuple[dict[str, pd.DataFrame], dict[str, Any], list[str]] | None:
    """Frames, totals and notes of the fair-shares section, or ``None`` without tenants.

    Parameters
    ----------
    docs
        The period's plan documents.

    Returns
    -------
    (frames, totals, notes) or None
        ``frames``: ``fair_shares`` and ``fair_days`` (columns :data:`SHARE_COLUMNS`,
        :data:`DAY_COLUMNS`); ``totals``: ``fairness_cost_kg``, ``carbon_only_emissions_kg``
        [kg CO2e], ``fairness_cost_pct`` [%], ``fair_tenants_with_target``,
        ``fair_tenants_within_5pct``, ``fair_quotas_missed``, ``fairness_not_applied_tenants``
        [-]; ``notes``: one per plan whose fair shares were not applied and one per missed
        quota. ``None`` when no plan of the period carries ``tenants`` rows.
    """
    plans = [d for d in docs if d.get("tenants")]
    if not plans:
        return None
    share_rows, day_rows, notes = [], [], []
    for d in plans:
        tot = d.get("totals", {})
        for r in d["tenants"]:
            target = float(r["target_share"])
            share_rows.append({
                "plan_id": d["plan_id"], "date": d["date"], "tenant": r["tenant"],
                "weight": float(r["weight"]), "demand_gpu_h": float(r["demand_gpu_hours"]),
                "placed_gpu_h": float(r["placed_gpu_hours"]),
                "dominant_share": float(r["dominant_share"]), "target_share": target,
                "deviation_share": (abs(float(r["dominant_share"]) - target) / target
                                    if target > 0 else None),
                "dominant_gpu_type": r.get("dominant_gpu_type"),
                "quota_gpu_h": float(r["quota_gpu_hours"]), "quota_met": r.get("quota_met"),
                "fair_applied": r.get("fair_applied", True)})
            if r.get("quota_met") is False:
                notes.append(f"fair shares {d['date']}: tenant {r['tenant']!r} quota of "
                             f"{float(r['quota_gpu_hours']):.1f} GPU-h not met "
                             f"({float(r['placed_gpu_hours']):.1f} GPU-h placed)")
        base = tot.get("carbon_only_emissions_kg")
        cost = tot.get("fairness_cost_kg")
        skipped = int(tot.get("fairness_not_applied_tenants") or sum(
            1 for r in d["tenants"] if r.get("fair_applied") is False))
        day_rows.append({
            "plan_id": d["plan_id"], "date": d["date"], "tenants": len(d["tenants"]),
            "carbon_only_emissions_kg": base, "emissions_kg": tot.get("emissions_kg"),
            "fairness_cost_kg": cost,
            "fairness_cost_pct": 100.0 * cost / base if cost is not None and base else None,
            "fairness_not_applied_tenants": skipped})
        if skipped:
            notes.append(f"fair shares {d['date']}: fairness not applied for {skipped} "
                         "tenant(s): the plan fell back to a path without fair-share rows; "
                         "their shares are as placed")
    shares = pd.DataFrame(share_rows, columns=list(SHARE_COLUMNS))
    days = pd.DataFrame(day_rows, columns=list(DAY_COLUMNS))
    with_target = shares["deviation_share"].notna()
    base = float(days["carbon_only_emissions_kg"].fillna(0.0).sum())
    cost = float(days["fairness_cost_kg"].fillna(0.0).sum())
    totals = {
        "fairness_cost_kg": cost,
        "carbon_only_emissions_kg": base,
        "fairness_cost_pct": 100.0 * cost / base if base else None,
        "fair_tenants_with_target": int(with_target.sum()),
        "fair_tenants_within_5pct": int(
            (shares.loc[with_target, "deviation_share"] <= WITHIN + 1e-12).sum()),
        "fair_quotas_missed": int((shares["quota_met"] == False).sum()),  # noqa: E712
        "fairness_not_applied_tenants": int(days["fairness_not_applied_tenants"].sum()),
    }
    return {"fair_shares": shares, "fair_days": days}, totals, notes
