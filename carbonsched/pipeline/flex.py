"""Commit a grid-flexibility band for announced events, keep it feasible, and account for it.

:func:`commit_events` takes a planning problem and the grid events announced for its horizon
(:class:`carbonsched.flex.GridEvent`) and:

1. solves the problem without commitments: the **baseline** of each event hour is that plan's
   facility power at the site (baseline method ``plan-uncommitted``,
   :class:`carbonsched.flex.BaselineMethod`; a ``prior-days-mean`` baseline can be given per
   event instead);
2. states the plan's flexibility band (:func:`carbonsched.plan.flex.flex_band`) at the event's
   notice and length; it first tries the full target (a re-plan with it reserved, kept when it
   loses nothing against the baseline plan), else **commits** per hour the lower of the
   event's target and what the band can deliver against the limit the planner enforces
   (facility power is planned against the PUE's upper bound):
   ``min(target, B − (IT − flex_it) × PUE_hi95)`` with ``B`` the baseline, ``IT`` the hour's
   IT power and ``flex_it`` its band. A commitment below the target is a **planned
   shortfall**, reported with its kW;
3. re-plans with the commitments (:attr:`carbonsched.plan.sets.PlanningProblem.commitments`):
   every commitment hour's facility power is held at or below ``baseline − commitment`` when
   work is placed, and the re-plan is re-scored (deadline misses, SLO violations,
   commitment violations);
4. accounts per event and hour: baseline, target, committed, planned power, delivered
   reduction (baseline − planned), shortfall against the commitment and against the target;
   per event the work delayed (jobs ending later than in the baseline plan, their IT kWh) and
   the extra emissions of the committed plan over the baseline plan.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from carbonsched.errors import UnknownSiteError
from carbonsched.flex import BaselineMethod, Commitment, GridEvent, PowerCapLevel
from carbonsched.plan.flex import flex_band
from carbonsched.plan.result import PlanResult, score_plan, site_hour_power
from carbonsched.plan.sets import PlanningProblem


@dataclass
class CommittedPlan:
    """The outcome of :func:`commit_events`.

    Attributes
    ----------
    problem
        The problem with its commitments.
    result
        The committed plan.
    baseline_problem, baseline_result
        The problem and plan without commitments.
    commitments
        One :class:`~carbonsched.flex.Commitment` per (event, hour), also where nothing can
        be shed (reduction 0: the re-plan may not move work into the window).
    hours
        One row per (event, hour): ``event_id``, ``site``, ``hour``, ``baseline_kw``,
        ``target_kw``, ``band_kw`` (what the band can deliver), ``committed_kw``,
        ``planned_kw``, ``delivered_kw``, ``shortfall_kw`` (committed − delivered, >= 0),
        ``target_shortfall_kw`` (target − delivered, >= 0) [kW].
    events
        One row per event: ``event_id``, ``site``, ``start``, ``end``, ``notice_hours``,
        ``baseline_method``, ``baseline_kwh``, ``committed_kwh``, ``delivered_kwh``,
        ``shortfall_kwh``, ``target_shortfall_kwh`` [kWh], ``min_reduction_fraction`` [-],
        ``delayed_jobs`` [-], ``delayed_it_kwh`` [kWh], ``extra_emissions_kg`` [kg] (the whole
        committed plan against the baseline plan, shared by the events of one solve).
    scores
        ``{"baseline": Score, "committed": Score}`` of both plans.
    notes
        What the user must read: planned shortfalls, unplaced work the commitment caused.
    """

    problem: PlanningProblem
    result: PlanResult
    baseline_problem: PlanningProblem
    baseline_result: PlanResult
    commitments: list[Commitment]
    hours: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    scores: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


Solve = Callable[[PlanningProblem], PlanResult]


def _site_hours(problem: PlanningProblem, result: PlanResult
                ) -> dict[tuple[str, pd.Timestamp], dict[str, Any]]:
    return {(r["site"], r["hour"]): r for r in site_hour_power(problem, result)}


def commit_events(problem: PlanningProblem, events: list[GridEvent], solve: Solve,
                  caps: list[PowerCapLevel] | None = None,
                  capped: set[str] | frozenset[str] = frozenset(),
                  baselines: dict[tuple[str, pd.Timestamp], float] | None = None,
                  baseline_result: PlanResult | None = None,
                  replan_at: pd.Timestamp | None = None,
                  probe_target: bool = True) -> CommittedPlan:
    """Commit a reduction for each event, re-plan with it reserved, and account for it.

    Parameters
    ----------
    problem
        The problem (its own ``commitments`` are kept and added to).
    events
        Announced events; hours outside the problem's horizon are left out (noted).
    solve
        Solves a problem, e.g. ``lambda p: solve_plan(p, time_limit_s=60)``.
    caps
        Cap levels for the band's ``cap`` lever; ``None``: no cap headroom.
    capped
        Jobs already planned at a cap.
    baselines
        ``{(site, hour): kW}`` facility baselines from history (``prior-days-mean``); hours
        missing from it use the plan's own (``plan-uncommitted``).
    baseline_result
        The plan without commitments when the caller has it (solved otherwise).
    replan_at
        When the re-plan happens (default: the latest announcement among ``events``): work
        the baseline plan started before it is pinned (:func:`pin_started`), so the re-plan
        never moves what already runs.
    probe_target
        Where the band gives less than the target, first re-plan with the full target
        reserved and keep it when the re-plan loses nothing against the baseline plan (no
        deadline miss, SLO violation, broken commitment or extra unplaced work): the MILP
        finds levers the band does not count (inference moved within its SLO, work moved
        between sites). Otherwise the band's commitment stands.

    Returns
    -------
    CommittedPlan

    Raises
    ------
    UnknownSiteError
        An event names a site that is not in the problem.
    """
    site_ids = [s.id for s in problem.sites]
    for ev in events:
        if ev.site not in site_ids:
            raise UnknownSiteError(ev.site, site_ids)
    base = baseline_result if baseline_result is not None else solve(problem)
    if replan_at is None and events:
        replan_at = max(ev.announced for ev in events)
    rows0 = _site_hours(problem, base)
    notes: list[str] = []
    horizon = set(problem.slots)
    commitments: list[Commitment] = list(problem.commitments)
    hours: list[dict[str, Any]] = []
    bands: dict[tuple[float, int], Any] = {}
    for ev in events:
        n_h = len(ev.hours)
        key = (ev.notice / pd.Timedelta(hours=1), n_h)
        if key not in bands:
            # commitments rest on the levers the re-plan reserves (hold, pause); the cap
            # headroom is stated in the band and applied at dispatch, on top
            bands[key] = flex_band(problem, base, key[0], n_h, None, capped)
        band = bands[key]
        left_out = [h for h in ev.hours if h not in horizon]
        if left_out:
            notes.append(f"grid event {ev.id}: {len(left_out)} hour(s) outside the plan's "
                         "horizon left out of the commitment")
        for h in ev.hours:
            if h not in horizon:
                continue
            r = rows0[(ev.site, h)]
            method = BaselineMethod.PLAN_UNCOMMITTED
            b = float(r["facility_power_kw"])
            if baselines is not None and (ev.site, h) in baselines:
                b, method = float(baselines[(ev.site, h)]), BaselineMethod.PRIOR_DAYS_MEAN
            target = min(ev.reduction_kw(b), b)
            # each hour's band assumes an event of this length starting in that hour,
            # announced with this notice: later than this event's announcement and ending
            # later, so it never counts more than this event can shed in that hour
            fl = band.flex_it_kw.get((ev.site, h), 0.0)
            deliverable = max(0.0, b - (float(r["it_power_kw"]) - fl) * float(r["pue_hi_95"]))
            committed = max(0.0, min(target, deliverable))
            hours.append({"event_id": ev.id, "site": ev.site, "hour": h, "baseline_kw": b,
                          "baseline_method": str(method), "target_kw": target,
                          "band_kw": deliverable, "committed_kw": committed})
            # every event hour is reserved, also with nothing to shed: the re-plan must not
            # move work into the window (a rebound the baseline plan did not have)
            commitments.append(Commitment(ev.site, h, h + pd.Timedelta(hours=1),
                                          committed, b, ev.id, method))
    pinned = pin_started(problem, base, replan_at) if replan_at is not None else problem
    committed_problem = replace(pinned, commitments=commitments)
    res = None
    sc0 = score_plan(problem, base)
    if probe_target and any(h["target_kw"] > h["committed_kw"] + 1e-9 for h in hours):
        # the MILP is the exact check: try the full target (levers the band does not count,
        # e.g. inference served from another site within its SLO, may deliver it) and keep it
        # only when nothing is lost against the baseline plan
        full = list(problem.commitments) + [
            Commitment(h["site"], h["hour"], h["hour"] + pd.Timedelta(hours=1),
                       h["target_kw"], h["baseline_kw"], h["event_id"],
                       BaselineMethod(h["baseline_method"])) for h in hours]
        trial_problem = replace(pinned, commitments=full)
        trial = solve(trial_problem)
        tsc = score_plan(replace(problem, commitments=full), trial)
        if (str(trial.status) in ("optimal", "feasible", "heuristic")
                and tsc.deadline_misses == 0 and tsc.slo_violations == 0
                and tsc.commitment_violations == 0
                and tsc.unplaced_gpu_hours <= sc0.unplaced_gpu_hours + 1e-6):
            for h in hours:
                h["committed_kw"] = h["target_kw"]
            commitments, committed_problem, res = full, trial_problem, trial
    if res is None:
        res = solve(committed_problem)
    rows1 = _site_hours(committed_problem, res)
    # scored against the jobs' own deadlines (not the pinned ones) with the commitments
    sc1 = score_plan(replace(problem, commitments=commitments), res)
    extra_kg = sc1.emissions_kg - sc0.emissions_kg
    for row in hours:
        planned = float(rows1[(row["site"], row["hour"])]["facility_power_kw"])
        delivered = row["baseline_kw"] - planned
        row.update({"planned_kw": planned, "delivered_kw": delivered,
                    "shortfall_kw": max(0.0, row["committed_kw"] - delivered),
                    "target_shortfall_kw": max(0.0, row["target_kw"] - delivered)})
    ends0 = _job_ends(base)
    ends1 = _job_ends(res)
    jobs = {j.id: j for j in problem.jobs}
    delayed = [j for j, e in ends1.items() if j in ends0 and e > ends0[j]]
    unplaced_more = sorted(set(ends0) - set(ends1))
    if unplaced_more:
        notes.append(f"grid events: {len(unplaced_more)} job(s) the baseline plan placed are "
                     f"not placed under the commitments (first: {unplaced_more[:3]}); they "
                     "are deferred or unplaced (see unplaced)")
    events_out = []
    for ev in events:
        hs = [r for r in hours if r["event_id"] == ev.id]
        if not hs:
            continue
        frac = [r["delivered_kw"] / r["baseline_kw"] for r in hs if r["baseline_kw"] > 0]
        short = sum(r["target_kw"] - r["committed_kw"] for r in hs)
        if short > 1e-6:
            notes.append(f"grid event {ev.id}: committed {sum(r['committed_kw'] for r in hs):.1f}"
                         f" kWh of the {sum(r['target_kw'] for r in hs):.1f} kWh asked: the band "
                         f"cannot give {short:.1f} kWh without missing a deadline or an SLO "
                         "(a planned shortfall)")
        missed = sum(r["shortfall_kw"] for r in hs)
        if missed > 1e-6:
            notes.append(f"grid event {ev.id}: commitment missed by {missed:.1f} kWh")
        events_out.append({
            "event_id": ev.id, "site": ev.site, "start": ev.start, "end": ev.end,
            "notice_hours": ev.notice / pd.Timedelta(hours=1),
            "baseline_method": hs[0]["baseline_method"],
            "baseline_kwh": sum(r["baseline_kw"] for r in hs),
            "target_kwh": sum(r["target_kw"] for r in hs),
            "committed_kwh": sum(r["committed_kw"] for r in hs),
            "delivered_kwh": sum(r["delivered_kw"] for r in hs),
            "shortfall_kwh": sum(r["shortfall_kw"] for r in hs),
            "target_shortfall_kwh": sum(r["target_shortfall_kw"] for r in hs),
            "min_reduction_fraction": min(frac) if frac else None,
            "delayed_jobs": sum(1 for j in delayed if _at(res, j) == ev.site
                                or _at(base, j) == ev.site),
            "delayed_it_kwh": float(sum(jobs[j].energy_kwh for j in delayed
                                        if _at(base, j) == ev.site)),
            "extra_emissions_kg": extra_kg,
        })
    return CommittedPlan(committed_problem, res, problem, base, commitments, hours, events_out,
                         {"baseline": sc0, "committed": sc1}, notes)


def pin_started(problem: PlanningProblem, result: PlanResult, at: pd.Timestamp
                ) -> PlanningProblem:
    """The problem with the work ``result`` started before ``at`` pinned where it runs.

    A one-piece job that started is pinned to its site, start and end (``earliest_start`` =
    its start, ``deadline`` = its end); a preemptible job keeps its deadline and may still be
    split (paused at a checkpoint) but starts where and when it started. Jobs not started are
    unchanged.

    Parameters
    ----------
    problem, result
        The problem and the plan being carried out.
    at
        The re-plan time. [UTC]

    Returns
    -------
    PlanningProblem
        A copy; the jobs are replaced, nothing else.
    """
    first: dict[str, Any] = {}
    last: dict[str, pd.Timestamp] = {}
    for p in result.placements:
        if p.job_id not in first or p.start < first[p.job_id].start:
            first[p.job_id] = p
        last[p.job_id] = max(last.get(p.job_id, p.end), p.end)
    jobs = []
    for j in problem.jobs:
        p = first.get(j.id)
        if p is None or p.start >= at:
            jobs.append(j)
        elif j.preemptible and j.max_pieces > 1:
            jobs.append(replace(j, earliest_start=p.start, allowed_sites=(p.site,)))
        else:
            jobs.append(replace(j, earliest_start=p.start, deadline=max(last[j.id], p.start),
                                allowed_sites=(p.site,)))
    return replace(problem, jobs=jobs)


def _job_ends(result: PlanResult) -> dict[str, pd.Timestamp]:
    out: dict[str, pd.Timestamp] = {}
    for p in result.placements:
        out[p.job_id] = max(out.get(p.job_id, p.end), p.end)
    return out


def _at(result: PlanResult, job_id: str) -> str | None:
    return next((p.site for p in result.placements if p.job_id == job_id), None)


def flexibility_block(cp: CommittedPlan) -> dict[str, Any]:
    """The plan document's ``flexibility`` block: events, hours and the period's MWh.

    Returns
    -------
    dict
        ``events`` and ``hours`` (see :class:`CommittedPlan`), ``offered_mwh`` (committed),
        ``delivered_mwh`` (delivered reduction, at most the commitment per hour, summed),
        ``target_mwh`` [MWh], ``extra_emissions_kg`` [kg], ``notes``.
    """
    offered = sum(r["committed_kw"] for r in cp.hours) / 1000.0
    delivered = sum(min(max(r["delivered_kw"], 0.0), r["committed_kw"])
                    for r in cp.hours) / 1000.0
    return {"events": cp.events, "hours": cp.hours, "offered_mwh": offered,
            "delivered_mwh": delivered,
            "target_mwh": sum(r["target_kw"] for r in cp.hours) / 1000.0,
            "extra_emissions_kg": (cp.scores["committed"].emissions_kg
                                   - cp.scores["baseline"].emissions_kg),
            "notes": list(cp.notes)}


def period_flexibility(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    """Per period: MWh offered, delivered and asked, shortfall, events met (over blocks).

    Parameters
    ----------
    blocks
        ``flexibility`` blocks (:func:`flexibility_block`) of the period's plans.

    Returns
    -------
    dict
        ``events`` [-], ``events_met`` (delivered ≥ committed in every hour) [-],
        ``offered_mwh``, ``delivered_mwh``, ``target_mwh``, ``shortfall_mwh`` [MWh].
    """
    hrs = [r for b in blocks for r in b["hours"]]
    evs = [e for b in blocks for e in b["events"]]
    return {"events": len(evs),
            "events_met": sum(1 for e in evs if e["shortfall_kwh"] <= 1e-6),
            "offered_mwh": float(np.sum([b["offered_mwh"] for b in blocks])),
            "delivered_mwh": float(np.sum([b["delivered_mwh"] for b in blocks])),
            "target_mwh": float(np.sum([b["target_mwh"] for b in blocks])),
            "shortfall_mwh": float(np.sum([r["shortfall_kw"] for r in hrs])) / 1000.0}


def plan_with_caps(problem: PlanningProblem, caps: list[PowerCapLevel], solve: Solve,
                   slack_factor: float | None = None
                   ) -> tuple[PlanningProblem, PlanResult, dict[str, Any], list[str]]:
    """Plan with GPU power caps where they cost no placement, else uncapped.

    Jobs are capped by :func:`carbonsched.plan.caps.choose_power_caps`; when the capped plan
    leaves more GPU-hours unplaced than the uncapped one (capped runs are longer and hold
    GPUs other work needed, on a capacity-bound day), the uncapped plan is kept and a note
    says so.

    Parameters
    ----------
    problem
        The problem, jobs uncapped.
    caps
        Cap levels.
    solve
        Solves a problem.
    slack_factor
        As for :func:`~carbonsched.plan.caps.choose_power_caps` (``None``: its default).

    Returns
    -------
    problem, result, choices, notes
        The problem planned (capped jobs or not), its plan, the caps applied per job id
        (empty when the uncapped plan is kept) and the notes for the plan.
    """
    from carbonsched.plan.caps import DEFAULT_SLACK_FACTOR, choose_power_caps

    jobs, choices = choose_power_caps(
        list(problem.jobs), caps,
        DEFAULT_SLACK_FACTOR if slack_factor is None else slack_factor)
    if not choices:
        return problem, solve(problem), {}, []
    capped_problem = replace(problem, jobs=jobs)
    capped = solve(capped_problem)
    lost = score_plan(capped_problem, capped).unplaced_gpu_hours
    if lost <= 1e-9:
        return capped_problem, capped, choices, [
            f"power caps: {len(choices)} job(s) run at a GPU power cap, slower and leaner "
            "(carbonsched/data/gpu_power_caps.toml)"]
    plain = solve(problem)
    kept = score_plan(problem, plain).unplaced_gpu_hours
    if lost <= kept + 1e-9:
        return capped_problem, capped, choices, [
            f"power caps: {len(choices)} job(s) run at a GPU power cap (the uncapped plan "
            f"leaves as much unplaced: {kept:.1f} GPU-h)"]
    return problem, plain, {}, [
        f"power caps: not applied — the capped plan leaves {lost:.1f} GPU-h unplaced against "
        f"{kept:.1f} uncapped (capped runs hold GPUs other work needs); every job runs "
        "uncapped"]
