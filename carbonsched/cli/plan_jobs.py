"""``plans show --jobs``: the plan's jobs in the terminal, one row per placement."""

from __future__ import annotations

from typing import Any

from carbonsched.cli.common import out, table


def print_jobs(doc: dict[str, Any]) -> None:
    """Print a plan's jobs: start, end, site, GPUs and kg CO2e, then the unplaced ones.

    Rows are the document's ``placements`` in order of start (then job id), one per piece of
    a paused job; times are UTC, emissions the placement's share [kg CO2e]. Unplaced jobs
    follow with their reason, so every job of the plan is on screen.

    Parameters
    ----------
    doc : dict
        A plan document (``plans show --json``'s).
    """
    t = table(title=f"Jobs of plan {doc['plan_id'][:12]} (UTC)")
    for col, j in (("job", "left"), ("start", "left"), ("end", "left"), ("site", "left"),
                   ("GPUs", "right"), ("kWh", "right"), ("kg CO2e", "right")):
        t.add_column(col, justify=j, no_wrap=True)  # type: ignore[arg-type]
    for p in sorted(doc["placements"], key=lambda p: (p["start"], p["job_id"])):
        t.add_row(p["job_id"], _hm(p["start"]), _hm(p["end"]), p["site"],
                  f"{p['gpus']}× {p['gpu_type']}", f"{p['energy_kwh']:,.1f}",
                  f"{p['emissions_kg']:,.3f}")
    for u in doc.get("unplaced", []):
        t.add_row(u["job_id"], "unplaced", "", u.get("reason", ""), "", "", "")
    out.print(t)


def _hm(iso: str) -> str:
    """``2023-07-15T05:00:00Z`` as ``2023-07-15 05:00``."""
    return iso.replace("T", " ")[:16]
