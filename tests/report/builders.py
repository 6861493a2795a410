"""Small plan documents for the report tests (the keys ``carbonsched plan --out`` writes)."""

from __future__ import annotations

import uuid
from typing import Any


def plan_doc(date: str, catalog: str,
             jobs: list[tuple[str, str, str, str, str, int, float]],
             baseline: list[tuple[str, str, str, str, str, int, float]] | None = None,
             ) -> dict[str, Any]:
    """A plan document with placements (job_id, tenant, site, start, end, gpus, kW per GPU)."""

    def placements(rows):
        return [{"job_id": j, "site": s, "start": a, "end": b, "gpu_type": "A100", "gpus": g,
                 "energy_kwh": 0.0, "emissions_kg": 0.0} for j, _, s, a, b, g, _ in rows]

    doc: dict[str, Any] = {
        "plan_id": uuid.uuid4().hex, "date": date, "catalog": catalog,
        "signal_quality": "measured",
        "solver": {"name": "highs", "status": "optimal", "mip_gap": 0.0, "seconds": 0.1},
        "placements": placements(jobs), "inference": [], "unplaced": [],
        "workload": {"jobs": [{"job_id": j, "tenant": t, "kind": "batch", "gpu_type": "A100",
                               "gpus": g, "duration_hours": 1, "power_per_gpu_kw": kw}
                              for j, t, _, _, _, g, kw in jobs], "inference_power": []},
        "totals": {"energy_kwh": 0.0, "emissions_kg": 0.0, "baseline_emissions_kg": 0.0,
                   "surplus_absorbed_kwh": 0.0},
    }
    if baseline is not None:
        doc["baseline"] = {"placements": placements(baseline), "inference": [], "unplaced": []}
    return doc
