"""The report's flexibility section: the proof that committed grid reductions were delivered.

Built from the ``flexibility`` blocks of the period's plan documents
(:func:`carbonsched.pipeline.flex.flexibility_block`) and their ``site_hours`` band:

* ``flex_events``: per event the baseline, target, committed and delivered energy, the
  shortfall against the commitment and against the target, the lowest hourly reduction share,
  the work delayed (jobs, IT kWh) and the extra emissions of the committed plan;
* ``flex_hours``: per event and hour (the delivery interval) the baseline, target, committed,
  planned and delivered power and both shortfalls;
* totals per period: events, events met, MWh of flexibility stated in the band
  (``flex_band_mwh``: the plans' ``flex_facility_kw`` summed over their horizon hours in the
  period), offered (committed), asked and delivered, shortfall, extra emissions.

Delivered reduction is the baseline minus the committed plan's facility power (the plan's
figure; measured site power would replace it where telemetry covers the hour — not yet).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

EVENT_COLUMNS = ("plan_id", "event_id", "site", "start", "end", "notice_hours",
                 "baseline_method", "baseline_kwh", "target_kwh", "committed_kwh",
                 "delivered_kwh", "shortfall_kwh", "target_shortfall_kwh",
                 "min_reduction_share", "delayed_jobs", "delayed_it_kwh", "extra_emissions_kg")
"""Columns of the ``flex_events`` frame (units in the suffixes)."""
HOUR_COLUMNS = ("plan_id", "event_id", "site", "hour", "baseline_method", "baseline_kw",
                "target_kw", "committed_kw", "planned_kw", "delivered_kw", "shortfall_kw",
                "target_shortfall_kw")
"""Columns of the ``flex_hours`` frame."""
FLEX_TABLES = ("flex_events", "flex_hours")
"""The section's tables, present in a report only when a plan of the period committed one."""

RULE = ("delivered = baseline − the committed plan's facility power per event hour; "
        "shortfall = committed − delivered where positive (target shortfall: asked − "
        "delivered); offered = committed MWh; band = the plans' flex_facility_kw over their "
        "horizon hours (docs/grid-flexibility.md)")
"""How the section's figures are computed (the report's ``rules`` block)."""


def flexibility_section(docs: list[dict[str, Any]], t0: pd.Timestamp, t1: pd.Timestamp,
                        in_force: dict[pd.Timestamp, str] | None = None
                        ) -> tuple[dict[str, pd.DataFrame], dict[str, Any], list[str]] | None:
    """Frames, totals and notes of the flexibility section, or ``None`` without events.

    Parameters
    ----------
    docs
        The period's plan documents, and the lookback's (their hours and events in force in
        the period count).
    t0, t1
        The period ``[t0, t1)``. [UTC]
    in_force
        Hour start [UTC] -> id of the plan in force then
        (:class:`carbonsched.report.build.PlansInForce`). Plans whose horizons overlap state
        an hour's band, and may state an event, more than once: the band of an hour comes
        from the plan in force then, and an event from the plan in force at its start (else
        the last plan that states it). ``None``: every plan's own hours.

    Returns
    -------
    (frames, totals, notes) or None
        ``frames``: ``flex_events`` and ``flex_hours`` (columns :data:`EVENT_COLUMNS`,
        :data:`HOUR_COLUMNS`); ``totals``: ``flex_events``, ``flex_events_met`` [-],
        ``flex_band_mwh``, ``flex_offered_mwh``, ``flex_target_mwh``,
        ``flex_delivered_mwh``, ``flex_shortfall_mwh`` [MWh], ``flex_extra_emissions_kg``
        [kg]; ``notes``: one per event that missed its commitment, with its shortfall.
        ``None`` when no plan of the period carries a ``flexibility`` block.
    """
    blocks = [(d["plan_id"], d["flexibility"]) for d in docs if d.get("flexibility")]
    if not blocks:
        return None
    t0, t1 = pd.Timestamp(t0), pd.Timestamp(t1)
    force = in_force or {}

    def in_force_at(pid: str, at: Any) -> bool:
        holder = force.get(pd.Timestamp(at).floor("h"))
        return holder is None or holder == pid

    # each event once: from the plan in force at its start, else the last block that states it
    event_plan: dict[str, str] = {}
    settled: set[str] = set()
    for pid, b in blocks:
        for e in b["events"]:
            if e["event_id"] in settled or not (
                    pd.Timestamp(e["start"]) < t1 and pd.Timestamp(e["end"]) > t0):
                continue    # settled, or outside the period (a lookback plan's own event)
            event_plan[e["event_id"]] = pid
            if force.get(pd.Timestamp(e["start"]).floor("h")) == pid:
                settled.add(e["event_id"])
    ev_rows, hr_rows = [], []
    for pid, b in blocks:
        for e in b["events"]:
            if event_plan.get(e["event_id"]) != pid:
                continue
            ev_rows.append({"plan_id": pid, **{k: e.get(k) for k in EVENT_COLUMNS
                                               if k not in ("plan_id", "min_reduction_share")},
                            "min_reduction_share": e.get("min_reduction_fraction")})
        for h in b["hours"]:
            if event_plan.get(h.get("event_id")) != pid:   # its event's rows only
                continue
            hr_rows.append({"plan_id": pid, **{k: h.get(k) for k in HOUR_COLUMNS
                                               if k != "plan_id"}})
    counted = set(event_plan.values())
    events = pd.DataFrame(ev_rows, columns=list(EVENT_COLUMNS))
    hours = pd.DataFrame(hr_rows, columns=list(HOUR_COLUMNS))
    band_kwh = 0.0
    for d in docs:
        for r in d.get("site_hours", []):
            if r.get("in_horizon") and r.get("flex_facility_kw") is not None and \
                    t0 <= pd.Timestamp(r["hour"]) < t1 and in_force_at(d["plan_id"], r["hour"]):
                band_kwh += float(r["flex_facility_kw"])
    delivered = (hours["delivered_kw"].clip(lower=0).combine(hours["committed_kw"], min)
                 if len(hours) else pd.Series(dtype=float))
    totals = {
        "flex_events": int(len(events)),
        "flex_events_met": int((events["shortfall_kwh"] <= 1e-6).sum()),
        "flex_band_mwh": band_kwh / 1000.0,
        "flex_offered_mwh": float(hours["committed_kw"].sum()) / 1000.0,
        "flex_target_mwh": float(hours["target_kw"].sum()) / 1000.0,
        "flex_delivered_mwh": float(delivered.sum()) / 1000.0,
        "flex_shortfall_mwh": float(hours["shortfall_kw"].sum()) / 1000.0,
        "flex_extra_emissions_kg": float(sum(b.get("extra_emissions_kg", 0.0)
                                             for pid, b in blocks if pid in counted)),
    }
    notes = [f"grid event {e['event_id']} at {e['site']}: commitment missed by "
             f"{e['shortfall_kwh']:.1f} kWh of {e['committed_kwh']:.1f} kWh committed"
             for e in ev_rows if e["shortfall_kwh"] > 1e-6]
    return {"flex_events": events, "flex_hours": hours}, totals, notes
