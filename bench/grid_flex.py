"""Grid flexibility on the 2023 ``global`` replay: events at each zone's priciest hours (issue 38).

Events: for each site of ``global`` whose zone has a price file
(``sustain-cluster/electricity_prices_usd_utc/<ZONE>_electricity_prices_2023.csv``, USD/MWh;
GB has none), the top 0.5 % of the window's hours by day-ahead price; each such hour not yet
inside an event opens a 3-hour event starting at it (ties broken by time), announced 4 hours
ahead, asking 25 % below the baseline. Each event is replayed on a 48-hour horizon from its
day's 00:00 UTC: the PAI-trace workload of that day and the next
(:func:`carbonsched.workload.files.workload_from_traces`, seed ``seed + day index``, with
``clip_to_day=False``: each job keeps its own deadline, arrival + duration + slack, as in the
rolling replay of BENCHMARKS.md section 10, instead of being cut at midnight) planned on the
actual signals (carbon intensity, PUE from the actual weather, green surplus) — so without
forecast error — with the MILP; then :func:`carbonsched.pipeline.flex.commit_events` pins
the work started before the announcement, commits per hour ``min(25 % of baseline, the
band)`` and re-plans with
the commitment reserved. Baseline: the plan's own uncommitted load (``plan-uncommitted``).
An event in the first 4 hours of a day keeps its notice before the day (the plan is then taken
as made at the announcement). ``--preemptible-share`` marks a seeded share of the jobs
preemptible (:data:`PREEMPT_TERMS`).

Scored per event hour: reduction share ``(baseline − planned) / baseline`` (hours with a
baseline of 0 are counted apart), deadline misses and SLO violations of the committed plan
(:func:`carbonsched.plan.result.score_plan`, against the jobs' own deadlines), extra
emissions of the committed plan over the baseline plan, against the window's total: the
day-bounded plans (the day's jobs cut at midnight, 24 h) of every day in the window.

``--event-slo-ms``: every site's grid agreement lets inference be served within this latency
during an event (:attr:`carbonsched.flex.GridAgreement.event_slo_ms`), so the re-plan may serve
an edge site's areas from a farther site in the event's hours; the GPU-hours served beyond their
own SLO are counted per event.

``--caps``: the same days planned with and without GPU power caps
(:func:`carbonsched.pipeline.flex.plan_with_caps`: capped where that costs no placement):
facility energy, emissions and makespan (the last placement's end minus the day's start).

Run (repository root)::

    export CARBONSCHED_SHARED_DATA=../shared/data
    nice -n 19 python bench/grid_flex.py --start 2023-07-01 --end 2023-07-14 \\
        --out bench/results/grid-flex-2023-07.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from carbonsched.adapters.signals import load_site_signals
from carbonsched.catalog import load_catalog
from carbonsched.evaluate.replay import actual_signals, stack_site_frames
from carbonsched.flex import GridAgreement, GridEvent
from carbonsched.pipeline.daily import surplus_reference
from carbonsched.pipeline.flex import commit_events, plan_with_caps
from carbonsched.plan import PlanningProblem, score_plan, solve_plan
from carbonsched.plan.caps import load_power_caps
from carbonsched.timeaxis import hourly_slots
from carbonsched.workload.files import workload_from_traces

PREEMPT_TERMS = {"checkpoint_overhead_minutes": 10, "max_pieces": 4}
"""Terms of the jobs ``--preemptible-share`` marks preemptible: a 10-minute restore per resumed
piece and at most 4 pieces (a rule of this benchmark, not a published figure). [min], [-]"""

PRICES = "sustain-cluster/electricity_prices_usd_utc/{zone}_electricity_prices_2023.csv"


def zone_prices(data_dir: Path, zone: str) -> pd.Series | None:
    """Hourly day-ahead price of ``zone`` (UTC), or ``None`` without a file. [USD/MWh]"""
    path = data_dir / PRICES.format(zone=zone)
    if not path.is_file():
        return None
    f = pd.read_csv(path)
    return pd.Series(f["Price (USD/MWh)"].to_numpy(float),
                     index=pd.to_datetime(f["Datetime (UTC)"], utc=True)).sort_index()


def draw_events(data_dir: Path, start: str, end: str, share: float = 0.005, hours: int = 3,
                notice_h: float = 4.0, fraction: float = 0.25
                ) -> tuple[list[GridEvent], list[str]]:
    """Events at each zone's top ``share`` of hours in ``[start, end]`` (module docstring)."""
    cat = load_catalog("global")
    t0 = pd.Timestamp(start, tz="UTC")
    t1 = pd.Timestamp(end, tz="UTC") + pd.Timedelta(days=1)
    out: list[GridEvent] = []
    notes: list[str] = []
    for s in cat.sites:
        pr = zone_prices(data_dir, s.zone)
        if pr is None:
            notes.append(f"{s.id}: no price file for zone {s.zone}: no events")
            continue
        pr = pr[(pr.index >= t0) & (pr.index < t1)]
        n = max(1, int(round(share * len(pr))))
        top = pr.sort_values(ascending=False, kind="stable").index[:n]
        covered: set[pd.Timestamp] = set()
        for h in sorted(top):
            if h in covered:
                continue
            st = h
            ev = GridEvent(s.id, st, st + pd.Timedelta(hours=hours), target_fraction=fraction,
                           notice=pd.Timedelta(hours=notice_h),
                           id=f"{s.id}@{st:%Y-%m-%dT%H}")
            covered.update(ev.hours)
            out.append(ev)
    return out, notes


class DayProblems:
    """Each day's problem on actual signals, built once."""

    def __init__(self, data_dir: Path, start: str, end: str, seed: int, scale: float,
                 preemptible_share: float = 0.0):
        self.cat = load_catalog("global")
        self.data_dir, self.seed, self.scale = data_dir, seed, scale
        self.preemptible_share = preemptible_share
        self.days = [d.strftime("%Y-%m-%d") for d in pd.date_range(start, end, freq="D")]
        d0 = pd.Timestamp(start, tz="UTC")
        self.frames = {s.id: load_site_signals(s, data_dir, d0 - pd.Timedelta(days=35),
                                               pd.Timestamp(end, tz="UTC")
                                               + pd.Timedelta(days=2))[0]
                       for s in self.cat.sites}

    def _jobs(self, day: str, clip: bool) -> tuple[list[Any], list[Any]]:
        k = (pd.Timestamp(day) - pd.Timestamp(self.days[0])).days
        wl = workload_from_traces(self.data_dir, day, self.cat, seed=self.seed + k,
                                  scale=self.scale, clip_to_day=clip)
        jobs = list(wl.jobs)
        if self.preemptible_share > 0:
            # a seeded share of the jobs checkpoints (the traces' payload, the demo job, works
            # in steps, checkpoints and resumes): PREEMPT_TERMS
            rng = np.random.default_rng(self.seed + 1000 + k)
            pick = rng.random(len(jobs)) < self.preemptible_share
            jobs = [replace(j, preemptible=True, **PREEMPT_TERMS) if x else j
                    for j, x in zip(jobs, pick, strict=True)]
        return jobs, list(wl.inference)

    def problem(self, day: str, days: int = 1) -> PlanningProblem:
        """The day's problem (``days=1``: day-bounded jobs), or ``days`` days of jobs with
        their own deadlines (``clip_to_day=False``, the rolling replay's workload) on a
        ``24 × days``-hour horizon."""
        d = pd.Timestamp(day, tz="UTC")
        slots = hourly_slots(d, 24 * days)
        jobs, inference = [], []
        for i in range(days):
            j, inf = self._jobs((d + pd.Timedelta(days=i)).strftime("%Y-%m-%d"), days == 1)
            jobs += j
            inference += inf
        end = slots[-1] + pd.Timedelta(hours=1)
        jobs = [j for j in jobs if j.deadline <= end + pd.Timedelta(days=1)]
        act = {}
        for s in self.cat.sites:
            f = self.frames[s.id]
            hist = f[(f.index < d) & (f.index >= d - pd.Timedelta(days=28))]
            act[s.id] = actual_signals(s, f, slots, surplus_reference(hist, d))
        return PlanningProblem(list(self.cat.sites), jobs, inference, slots,
                               stack_site_frames(act))


def with_event_slo(p: PlanningProblem, event_slo_ms: float | None) -> PlanningProblem:
    """``p`` with every site's grid agreement allowing ``event_slo_ms`` during an event."""
    if event_slo_ms is None:
        return p
    sites = []
    for s in p.sites:
        ag = s.meta.get("grid_agreement")
        ag = replace(ag, event_slo_ms=event_slo_ms) if ag is not None else GridAgreement(
            s.id, event_slo_ms=event_slo_ms)
        sites.append(replace(s, meta={**s.meta, "grid_agreement": ag}))
    return replace(p, sites=sites)


def run_events(dp: DayProblems, events: list[GridEvent], time_limit: float,
               event_slo_ms: float | None = None) -> dict[str, Any]:
    """Replay each event on its day (module docstring); per event rows and a summary."""
    def solve(p):
        return solve_plan(p, time_limit_s=time_limit)

    by_day: dict[str, list[GridEvent]] = {}
    for ev in events:
        by_day.setdefault(ev.start.strftime("%Y-%m-%d"), []).append(ev)
    rows, total_kg, t_start = [], 0.0, time.perf_counter()
    for day in dp.days:
        p1 = dp.problem(day)
        total_kg += score_plan(p1, solve(p1)).emissions_kg
        if not by_day.get(day):
            continue
        # events are replayed on two days of work with their own deadlines (not cut at
        # midnight), so an evening event sees the slack the work really has
        p = with_event_slo(dp.problem(day, days=2), event_slo_ms)
        base = solve(p)
        for ev in by_day.get(day, []):
            cp = commit_events(p, [ev], solve, baseline_result=base)
            sc = cp.scores["committed"]
            (e,) = cp.events
            hrs = cp.hours
            shares = [h["delivered_kw"] / h["baseline_kw"] for h in hrs if h["baseline_kw"] > 0]
            rows.append({
                "event_id": ev.id, "site": ev.site, "start": ev.start.isoformat(),
                "baseline_kw": [round(h["baseline_kw"], 3) for h in hrs],
                "committed_kw": [round(h["committed_kw"], 3) for h in hrs],
                "planned_kw": [round(h["planned_kw"], 3) for h in hrs],
                "reduction_share": [round(h["delivered_kw"] / h["baseline_kw"], 4)
                                    if h["baseline_kw"] > 0 else None for h in hrs],
                "min_reduction_share": min(shares) if shares else None,
                "zero_baseline_hours": sum(1 for h in hrs if h["baseline_kw"] <= 0),
                "shortfall_kwh": e["shortfall_kwh"],
                "target_shortfall_kwh": e["target_shortfall_kwh"],
                "deadline_misses": sc.deadline_misses, "slo_violations": sc.slo_violations,
                "commitment_violations": sc.commitment_violations,
                "unplaced_gpu_hours_extra": sc.unplaced_gpu_hours
                - cp.scores["baseline"].unplaced_gpu_hours,
                "extra_emissions_kg": e["extra_emissions_kg"],
                "delayed_jobs": e["delayed_jobs"], "status": str(cp.result.status),
                "inference_beyond_slo_gpu_hours": e["inference_beyond_slo_gpu_hours"],
                "notes": cp.notes,
            })
            print(f"{ev.id}: shares {rows[-1]['reduction_share']} misses "
                  f"{sc.deadline_misses} slo {sc.slo_violations} extra "
                  f"{e['extra_emissions_kg']:.2f} kg", file=sys.stderr, flush=True)
    with_load = [r for r in rows if r["min_reduction_share"] is not None]
    extra = sum(r["extra_emissions_kg"] for r in rows)
    return {
        "events": rows,
        "summary": {
            "events": len(rows), "events_with_load": len(with_load),
            "events_at_25pct_every_hour": sum(1 for r in with_load
                                              if r["min_reduction_share"] >= 0.25 - 1e-9),
            "min_reduction_share": min((r["min_reduction_share"] for r in with_load),
                                       default=None),
            "deadline_misses": sum(r["deadline_misses"] for r in rows),
            "slo_violations": sum(r["slo_violations"] for r in rows),
            "commitment_violations": sum(r["commitment_violations"] for r in rows),
            "extra_emissions_kg": extra, "window_emissions_kg": total_kg,
            "inference_beyond_slo_gpu_hours": sum(r["inference_beyond_slo_gpu_hours"]
                                                  for r in rows),
            "event_slo_ms": event_slo_ms,
            "extra_emissions_share": extra / total_kg if total_kg else None,
            "seconds": time.perf_counter() - t_start,
        },
    }


def run_caps(dp: DayProblems, time_limit: float) -> dict[str, Any]:
    """Each day planned uncapped and with caps: energy, emissions, makespan."""
    table = load_power_caps()
    rows = []
    for day in dp.days:
        p = dp.problem(day)
        out: dict[str, Any] = {"date": day}
        chosen: dict[str, Any] = {}
        for name in ("uncapped", "capped"):
            if name == "uncapped":
                prob, res = p, solve_plan(p, time_limit_s=time_limit)
            else:
                prob, res, chosen, _notes = plan_with_caps(
                    p, table, lambda q: solve_plan(q, time_limit_s=time_limit))
            sc = score_plan(prob, res)
            end = max((pl.end for pl in res.placements), default=p.slots[0])
            out[name] = {"facility_kwh": sc.energy_kwh, "emissions_kg": sc.emissions_kg,
                         "makespan_h": (end - p.slots[0]) / pd.Timedelta(hours=1),
                         "deadline_misses": sc.deadline_misses,
                         "unplaced_gpu_hours": sc.unplaced_gpu_hours}
        out["capped_jobs"] = len(chosen)
        out["jobs"] = len(p.jobs)
        rows.append(out)
        print(f"caps {day}: {out}", file=sys.stderr, flush=True)
    tot = {k: {m: sum(r[k][m] for r in rows) for m in ("facility_kwh", "emissions_kg",
                                                         "deadline_misses",
                                                         "unplaced_gpu_hours")}
           for k in ("uncapped", "capped")}
    mk = [r["capped"]["makespan_h"] / r["uncapped"]["makespan_h"] - 1 for r in rows
          if r["uncapped"]["makespan_h"] > 0]
    return {"days": rows, "totals": tot,
            "energy_saved_share": 1 - tot["capped"]["facility_kwh"]
            / tot["uncapped"]["facility_kwh"],
            "emissions_saved_share": 1 - tot["capped"]["emissions_kg"]
            / tot["uncapped"]["emissions_kg"],
            "makespan_longer_max_share": max(mk, default=0.0),
            "makespan_longer_mean_share": sum(mk) / len(mk) if mk else 0.0,
            "capped_jobs": sum(r["capped_jobs"] for r in rows),
            "jobs": sum(r["jobs"] for r in rows)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--start", default="2023-07-01")
    ap.add_argument("--end", default="2023-07-14")
    ap.add_argument("--data-dir", type=Path, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--preemptible-share", type=float, default=0.0,
                    help="share of jobs marked preemptible (PREEMPT_TERMS)")
    ap.add_argument("--caps", action="store_true", help="also run the power-cap comparison")
    ap.add_argument("--no-events", action="store_true")
    ap.add_argument("--event-slo-ms", type=float, default=None,
                    help="every site's agreement lets inference be served within this "
                    "latency during an event (GridAgreement.event_slo_ms) [ms]")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)
    from carbonsched.config import get_settings

    ddir = a.data_dir or get_settings().data_dir
    dp = DayProblems(ddir, a.start, a.end, a.seed, a.scale, a.preemptible_share)
    result: dict[str, Any] = {"window": [a.start, a.end], "seed": a.seed, "scale": a.scale,
                              "preemptible_share": a.preemptible_share}
    if not a.no_events:
        events, notes = draw_events(ddir, a.start, a.end)
        result["event_notes"] = notes
        result.update(run_events(dp, events, a.time_limit, a.event_slo_ms))
    if a.caps:
        result["caps"] = run_caps(dp, a.time_limit)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(result, indent=1, default=str) + "\n")
    print(json.dumps(result.get("summary", {}), indent=1))
    if "caps" in result:
        print(json.dumps({k: v for k, v in result["caps"].items() if k != "days"}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
