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

from carbonsched.errors import InputError, UnknownSiteError
from carbonsched.flex import (
    BaselineMethod,
    Commitment,
    GridAgreement,
    GridEvent,
    GridFlexError,
    PowerCapLevel,
    prior_days_baseline,
)
from carbonsched.limits import MAX_HORIZON_HOURS
from carbonsched.plan.flex import flex_band
from carbonsched.plan.result import PlanResult, score_plan, site_hour_power
from carbonsched.plan.sets import PlanningProblem, tiers_served
from carbonsched.timeaxis import HOUR


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
                  baseline_methods: dict[str, BaselineMethod] | None = None,
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
        ``{(site, hour): kW}`` facility baselines from history (:func:`event_baselines`);
        hours missing from it use the plan's own (``plan-uncommitted``).
    baseline_methods
        ``{site: method}`` the method ``baselines`` were computed with, as reported (default
        ``prior-days-mean``).
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
    InputError
        Events on a problem whose slots are shorter than an hour (each event hour's baseline,
        band and commitment are per hour of the hourly grid).
    """
    site_ids = [s.id for s in problem.sites]
    for ev in events:
        if ev.site not in site_ids:
            raise UnknownSiteError(ev.site, site_ids)
    if events and problem.slot_minutes != 60:
        raise InputError(f"grid events are committed on the hourly grid; the problem's grid "
                         f"is {problem.slot_minutes}-minute (plan it on 60-minute slots)")
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
                b = float(baselines[(ev.site, h)])
                method = BaselineMethod((baseline_methods or {}).get(
                    ev.site, BaselineMethod.PRIOR_DAYS_MEAN))
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
    relaxed, own_slo = event_slo_inference(problem, events, base)
    if own_slo:
        pinned = replace(pinned, inference=relaxed)
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
        tsc = score_plan(replace(problem, inference=relaxed, commitments=full), trial)
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
    # (inference against the event-time SLO its agreement allows in the event's hours)
    sc1 = score_plan(replace(problem, inference=relaxed, commitments=commitments), res)
    beyond = served_beyond_own_slo(problem, res, own_slo)
    for site_id, gpu_h in sorted(beyond.items()):
        notes.append(f"grid events: {gpu_h:g} inference GPU-hour(s) of areas near {site_id} "
                     "served beyond their own SLO during its events, within the agreement's "
                     "event_slo_ms")
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
            "inference_beyond_slo_gpu_hours": float(beyond.get(ev.site, 0.0)),
        })
    return CommittedPlan(committed_problem, res, problem, base, commitments, hours, events_out,
                         {"baseline": sc0, "committed": sc1}, notes)


def event_slo_inference(problem: PlanningProblem, events: list[GridEvent],
                        baseline: PlanResult) -> tuple[list[Any], dict[int, tuple[str, float]]]:
    """The problem's inference with the event-time SLO of each event's agreement applied.

    In each hour of an event at a site whose grid agreement gives ``event_slo_ms``, every
    inference demand of that hour that the baseline plan serves (in part) at the site, within
    the demand's own SLO, is held to ``max(slo_ms, event_slo_ms)`` instead, so the re-plan may
    serve it from a farther site. Demands the site does not serve keep their own SLO (the
    agreement loosens only the event site's load), as does every demand outside the events.

    Parameters
    ----------
    problem
        The problem (its ``inference`` and its sites' ``meta["grid_agreement"]``).
    events
        The events.
    baseline
        The plan without commitments (which demands each site serves).

    Returns
    -------
    inference, own
        The demands (same order) and ``{index: (event site, own slo_ms)}`` of those loosened.
    """
    sites = {s.id: s for s in problem.sites}
    inf = list(problem.inference)
    own: dict[int, tuple[str, float]] = {}
    served = {(ip.site, ip.area, ip.hour, ip.gpu_type) for ip in baseline.inference
              if ip.gpus > 0}
    for ev in events:
        site = sites.get(ev.site)
        ag = site.meta.get("grid_agreement") if site is not None else None
        if ag is None or ag.event_slo_ms is None:
            continue
        hours = set(ev.hours)
        for i, d in enumerate(inf):
            if d.hour not in hours or i in own or (ev.site, d.area, d.hour,
                                                   d.gpu_type) not in served:
                continue
            if site.latency_ms.get(d.area, float("inf")) <= d.slo_ms < ag.event_slo_ms:
                own[i] = (ev.site, d.slo_ms)
                inf[i] = replace(d, slo_ms=float(ag.event_slo_ms))
    return inf, own


def served_beyond_own_slo(problem: PlanningProblem, result: PlanResult,
                          own: dict[int, tuple[str, float]]) -> dict[str, float]:
    """GPU-hours of loosened demands served from sites beyond their own SLO, per event site.

    A plan merges the demand rows (tiers) of one area, hour and GPU type per site, so its GPUs
    are given back to the rows (:func:`~carbonsched.plan.sets.tiers_served`): tightest first,
    each row from the sites within its own SLO, which keeps the most GPUs within the rows' own
    SLOs that any assignment could; the GPUs left then go to rows with need left, anywhere.
    What a loosened row takes in that second pass is beyond its own SLO, counted at its event
    site. A row that was not loosened comes first at its own SLO like any other, since serving
    it beyond that would break the plan.

    Parameters
    ----------
    problem
        The problem with the demands' own SLOs.
    result
        The committed plan.
    own
        As returned by :func:`event_slo_inference`.

    Returns
    -------
    dict
        ``{event site: GPU-hours}`` (one hour per allocation: demands are hourly). [GPU·h]
    """
    if not own:
        return {}
    sites = {s.id: s for s in problem.sites}
    rows: dict[tuple[str, pd.Timestamp, str], list[int]] = {}
    for i, d in enumerate(problem.inference):
        rows.setdefault((d.area, d.hour, d.gpu_type), []).append(i)
    served: dict[tuple[str, pd.Timestamp, str], dict[str, int]] = {}
    for ip in result.inference:
        if ip.gpus > 0 and ip.site in sites:
            at = served.setdefault((ip.area, ip.hour, ip.gpu_type), {})
            at[ip.site] = at.get(ip.site, 0) + int(ip.gpus)
    out: dict[str, float] = {}
    for key, at in served.items():
        if not any(i in own for i in rows.get(key, [])):
            continue
        ds = sorted(rows[key], key=lambda i: problem.inference[i].slo_ms)   # tightest first
        names = sorted(at)
        latency_ms = np.array([sites[s].latency_ms.get(key[0], float("inf")) for s in names])
        within = latency_ms[None, :] <= np.array([problem.inference[i].slo_ms for i in ds])[:, None]
        # within every row's own SLO first (the most GPUs any assignment keeps within them),
        # then the rest anywhere: what a loosened row takes in that second pass is beyond
        given = tiers_served(np.array([problem.inference[i].gpus for i in ds]),
                             [within, np.ones_like(within)], np.array([at[s] for s in names]))
        for r, i in enumerate(ds):
            if i in own and (beyond := int(given[1, r].sum())):
                out[own[i][0]] = out.get(own[i][0], 0.0) + float(beyond)
    return out


def recorded_site_load(store: Any, site: str, t0: pd.Timestamp, t1: pd.Timestamp
                       ) -> pd.Series:
    """A site's recorded hourly facility power from the store's plans.

    Each hour in ``[t0, t1)`` takes ``facility_power_kw`` of the newest stored plan whose
    horizon holds it (``site_hours`` with ``in_horizon``): the plan of record, which dispatch
    carried out. A plan on a sub-hour grid gives the mean of its slots in the hour (power
    [kW] averaged over the hour is the hour's energy [kWh]). Hours no plan covered are absent
    (a baseline day with such an hour is not eligible). Only plans that can reach the period
    are read: those dated from :data:`~carbonsched.limits.MAX_HORIZON_HOURS` before ``t0``
    to ``t1``. Metered site power would replace it where telemetry exists (not yet).

    Parameters
    ----------
    store
        A :class:`carbonsched.store.Store`.
    site
        Site id.
    t0, t1
        The period. [tz-aware UTC]

    Returns
    -------
    pandas.Series
        Facility power indexed by hour start (UTC), sorted. [kW]
    """
    days = pd.date_range((t0 - pd.Timedelta(hours=MAX_HORIZON_HOURS)).floor("D"),
                         (t1 - HOUR).floor("D"), freq="D")
    summaries = [s for d in days for s in store.list_plans(d.strftime("%Y-%m-%d"))]
    summaries.sort(key=lambda s: (s["created_at"], s["plan_id"]), reverse=True)
    out: dict[pd.Timestamp, float] = {}
    for summary in summaries:                   # newest first: the first plan to cover wins
        doc = store.get_plan(summary["plan_id"])
        slots: dict[pd.Timestamp, list[float]] = {}
        for r in doc.get("site_hours", []):
            if r.get("site") != site or not r.get("in_horizon") \
                    or r.get("facility_power_kw") is None:
                continue
            slots.setdefault(pd.Timestamp(r["hour"]).floor("h"), []).append(
                float(r["facility_power_kw"]))
        for h, kw in slots.items():
            if t0 <= h < t1 and h not in out:
                out[h] = sum(kw) / len(kw)
    return pd.Series(out, dtype=float).sort_index()


def event_baselines(load_kw: dict[str, pd.Series], events: list[GridEvent],
                    agreements: dict[str, GridAgreement], timezones: dict[str, str]
                    ) -> tuple[dict[tuple[str, pd.Timestamp], float], dict[str, BaselineMethod],
                               list[str]]:
    """Baselines of events from recorded load, by each site's agreement.

    Sites whose agreement names ``plan-uncommitted`` (or that have no agreement) get none here
    (:func:`commit_events` then uses the plan's own load). For the others,
    :func:`carbonsched.flex.prior_days_baseline` on the site's local clock, with the
    agreement's ``baseline_days`` and ``baseline_high_days``; the days of the other events at
    the site are excluded: every local date one of their hours falls on.

    Parameters
    ----------
    load_kw
        ``{site: recorded facility power by hour}`` (:func:`recorded_site_load`). [kW]
    events
        The events.
    agreements
        ``{site: GridAgreement}``.
    timezones
        ``{site: IANA time zone}`` (the catalog's ``Site.timezone``): the clock whose days
        and hours the baseline is defined on.

    Returns
    -------
    baselines, methods, notes
        ``{(site, hour): kW}``, ``{site: method}`` for :func:`commit_events`, and one note per
        event saying which days its baseline averaged.

    Raises
    ------
    GridFlexError
        Too little history for an event, a site without a time zone in ``timezones``, or a
        bad series (named by :func:`~carbonsched.flex.prior_days_baseline`).
    """
    base: dict[tuple[str, pd.Timestamp], float] = {}
    methods: dict[str, BaselineMethod] = {}
    notes: list[str] = []
    for ev in events:
        ag = agreements.get(ev.site)
        if ag is None or ag.baseline_method is BaselineMethod.PLAN_UNCOMMITTED:
            continue
        tz = timezones.get(ev.site)
        if tz is None:
            raise GridFlexError(f"grid event {ev.id} at site {ev.site}: no time zone for the "
                                f"site; its {ag.baseline_method.value} baseline is defined on "
                                "the site's local days (give the catalog's Site.timezone)")
        others = {h.date() for e in events if e.site == ev.site and e.id != ev.id
                  for h in e.hours.tz_convert(tz)}
        empty = pd.Series(dtype=float, index=pd.DatetimeIndex([], tz="UTC"))
        pb = prior_days_baseline(load_kw.get(ev.site, empty), ev, ag.baseline_method,
                                 ag.baseline_days, ag.baseline_high_days, tz=tz,
                                 exclude_days=others)
        for h, kw in pb.hours_kw.items():
            base[(ev.site, h)] = kw
        methods[ev.site] = pb.method
        notes.append(f"grid event {ev.id}: {pb.method.value} baseline over "
                     f"{len(pb.days)} of {len(pb.candidates)} prior days "
                     f"({', '.join(str(d) for d in pb.days)}, local dates in {tz})")
    return base, methods, notes


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
