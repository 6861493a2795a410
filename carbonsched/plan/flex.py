"""The flexibility band of a plan: the IT power each site could shed in each hour, at a notice.

For an event of ``event_hours`` hours starting at hour ``h`` and announced ``notice_hours``
before it, each placement that occupies hour ``h`` at a site offers one lever, the first that
keeps the job's deadline (levers in this order):

``hold``
    The placement had not started when the event was announced (``start >= h - notice``):
    its start moves to the event's end, ``h + event_hours``; its whole gang power is shed. The
    job's end moves by the same amount and must stay at or before its deadline.
``pause``
    A preemptible job (``max_pieces`` > its pieces in the plan) running at ``h`` stops at a
    checkpoint when the event starts and resumes at its end, paying its
    ``checkpoint_overhead_minutes`` again: its end moves by ``event_hours`` + the overhead.
``cap``
    A job running uncapped lowers its GPUs' power limit to its type's deepest cap level
    (:func:`carbonsched.plan.caps.levels_for`) for the event: it sheds ``(1 - power_fraction)``
    of its power and its end moves by ``event_hours × (1 - 1 / time_factor)`` (the work the
    event's hours did not do, at the capped rate).

``serve_cap`` (only with ``caps``)
    Inference served at a site in hour ``h`` runs its GPUs at a cap level for the event: each
    capped serving GPU draws ``power_fraction`` of its power and answers ``1 / time_factor`` as
    many requests (per-request compute time × ``time_factor``), so the area keeps its throughput
    only on ``ceil(gpus × time_factor)`` GPUs: the extra GPUs must be idle at the site in that
    hour (its GPUs of the type less the plan's jobs, inference and running work there). It sheds
    ``gpus × kW − ceil(gpus × time_factor) × kW × power_fraction`` (the level that sheds most;
    none when rounding eats the saving). The latency cost is the compute part of each request ×
    ``time_factor`` (+6.8 % at the 0.6 cap, McDonald et al. 2022); the planner's ``slo_ms`` is
    the round-trip network latency, which the cap does not change, so no SLO is broken. Its
    action's ``job_id`` is ``inference:<area>`` (piece 0).

Work already running outside the plan (``RunningWork``) sheds nothing; inference sheds only by
``serve_cap`` (its SLO keeps it where it is).
The band at a site-hour is the sum over its placements: ``flex_it_kw``, and ``flex_facility_kw
= flex_it_kw × PUE``. Each hour's band assumes an event starting in that hour; levers of
different jobs are taken as independent (GPU capacity after the event is not re-checked here:
a commitment is made on the band and then reserved by re-planning, which checks everything).

:func:`recount_flex` recounts a stated band from the jobs' terms and the placements (used by
:func:`carbonsched.plan.result.score_plan`): a site-hour whose stated ``flex_it_kw`` exceeds the
recount is an over-promise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from carbonsched.flex import DEFAULT_NOTICE_HOURS, PowerCapLevel
from carbonsched.plan.caps import levels_for

DEFAULT_EVENT_HOURS = 3
"""Event length the band is stated for: the 3-hour windows of the Emerald AI / SRP
demonstration (arXiv:2507.00909) and of the issue-38 benchmark. [h]"""

LEVERS = ("hold", "pause", "cap", "serve_cap")
"""The levers, in the order they are tried for a placement."""


@dataclass(frozen=True)
class FlexAction:
    """One placement's lever for an event starting in one hour."""

    site: str
    hour: pd.Timestamp
    job_id: str
    piece: int
    lever: str
    """``hold``, ``pause``, ``cap`` or ``serve_cap`` (:data:`LEVERS`)."""
    shed_it_kw: float
    """IT power shed during the event. [kW]"""
    delay_minutes: float
    """How much later the job ends. [min]"""
    gpu_type: str = ""
    """GPU type of a ``serve_cap`` action's serving GPUs (empty for the other levers)."""


@dataclass
class FlexBand:
    """A plan's flexibility band, with the actions behind it.

    Attributes
    ----------
    notice_hours
        Notice the band assumes. [h]
    event_hours
        Event length the band assumes. [h]
    flex_it_kw
        ``{(site, hour): kW}`` IT power that could be shed. [kW]
    pue
        ``{(site, hour): PUE}`` the facility figure is computed with. [-]
    actions
        Every lever counted, per site-hour.
    """

    notice_hours: float
    event_hours: int
    flex_it_kw: dict[tuple[str, pd.Timestamp], float] = field(default_factory=dict)
    pue: dict[tuple[str, pd.Timestamp], float] = field(default_factory=dict)
    actions: list[FlexAction] = field(default_factory=list)
    caps: list[PowerCapLevel] = field(default_factory=list)
    """Cap levels the ``cap`` lever used (empty: none)."""
    capped: frozenset[str] = frozenset()
    """Jobs already planned at a cap (no cap lever for them)."""

    def facility_kw(self, site: str, hour: pd.Timestamp) -> float:
        """Facility power that could be shed at ``site`` in ``hour``: IT × PUE. [kW]"""
        key = (site, hour)
        return self.flex_it_kw.get(key, 0.0) * self.pue.get(key, 1.0)

    def by_lever(self) -> dict[tuple[str, pd.Timestamp, str], float]:
        """``{(site, hour, lever): kW}`` the band's IT power split by lever. [kW]"""
        out: dict[tuple[str, pd.Timestamp, str], float] = {}
        for a in self.actions:
            key = (a.site, a.hour, a.lever)
            out[key] = out.get(key, 0.0) + a.shed_it_kw
        return out


def _lever(job: Any, p: Any, hour: pd.Timestamp, notice: pd.Timedelta, event: pd.Timedelta,
           pieces: int, caps: list[PowerCapLevel] | None, capped: set[str]
           ) -> tuple[str, float, float] | None:
    """The first lever (name, shed kW, delay minutes) a placement offers, or ``None``."""
    kw = job.it_power_kw
    ev_end = hour + event
    if p.start >= hour - notice:
        delay = ev_end - p.start
        if p.end + delay <= job.deadline:
            return "hold", kw, delay.total_seconds() / 60.0
    if job.preemptible and pieces < job.max_pieces:
        delay = event + pd.Timedelta(minutes=job.checkpoint_overhead_minutes)
        if p.end + delay <= job.deadline:
            return "pause", kw, delay.total_seconds() / 60.0
    if caps and job.id not in capped:
        lv = levels_for(job.gpu_type, caps)
        if lv:
            deep = lv[-1]
            run = min(p.end, ev_end) - max(p.start, hour)     # the event's share of the run
            delay = run * (1.0 - 1.0 / deep.time_factor)
            if p.end + delay <= job.deadline:
                return "cap", kw * (1.0 - deep.power_fraction), delay.total_seconds() / 60.0
    return None


SERVING_PREFIX = "inference:"
"""``job_id`` prefix of a ``serve_cap`` action (``inference:<area>``)."""


def _idle_gpus(problem: Any, result: Any) -> dict[tuple[str, pd.Timestamp, str], int]:
    """GPUs of each (site, hour, type) no placement, inference or running work holds. [-]

    A placement holds its GPUs in every hour it overlaps (conservative for a part hour).
    """
    hours = problem.slots[problem.slots == problem.slots.floor("h")]
    one = pd.Timedelta(hours=1)
    used: dict[tuple[str, pd.Timestamp, str], float] = {}
    for p in result.placements:
        for h in pd.date_range(p.start.floor("h"), p.end, freq="h", inclusive="left"):
            if p.start < h + one and p.end > h:
                k = (p.site, h, p.gpu_type)
                used[k] = used.get(k, 0) + float(np.ceil(p.gpus))
    for ip in result.inference:
        k = (ip.site, ip.hour, ip.gpu_type)
        used[k] = used.get(k, 0) + ip.gpus
    for r in getattr(problem, "running", []) or []:
        for h in hours:
            if (r.start is None or r.start < h + one) and r.end > h:
                k = (r.site, h, r.gpu_type)
                used[k] = used.get(k, 0) + r.gpus
    out = {}
    for site in problem.sites:
        for t in site.gpus:
            for h in hours:
                out[(site.id, h, t)] = max(0, int(site.gpu_count(t) - used.get((site.id, h, t),
                                                                               0)))
    return out


def serving_cap(gpus: int, kw_per_gpu: float, levels: list[PowerCapLevel], idle: int
                ) -> tuple[float, int] | None:
    """The serving-cap lever of ``gpus`` serving GPUs: (shed kW, extra GPUs), or ``None``.

    At each level the same throughput needs ``ceil(gpus × time_factor)`` GPUs, each drawing
    ``power_fraction × kw_per_gpu``; the level with the largest positive saving whose extra
    GPUs fit in ``idle`` is chosen.

    Parameters
    ----------
    gpus
        Serving GPUs. [-]
    kw_per_gpu
        IT power per serving GPU uncapped. [kW]
    levels
        The GPU type's cap levels (:func:`carbonsched.plan.caps.levels_for`).
    idle
        Idle GPUs of the type at the site in the hour. [-]

    Returns
    -------
    (float, int) or None
        IT power shed [kW] and the idle GPUs it takes [-]; ``None`` when no level saves.
    """
    best = None
    for lv in levels:
        need = int(np.ceil(gpus * lv.time_factor - 1e-9))
        shed = gpus * kw_per_gpu - need * kw_per_gpu * lv.power_fraction
        if need - gpus <= idle and shed > 1e-9 and (best is None or shed > best[0]):
            best = (float(shed), need - gpus)
    return best


def flex_band(problem: Any, result: Any, notice_hours: float = DEFAULT_NOTICE_HOURS,
              event_hours: int = DEFAULT_EVENT_HOURS,
              caps: list[PowerCapLevel] | None = None,
              capped: set[str] | frozenset[str] = frozenset()) -> FlexBand:
    """The IT (and facility) power a plan could shed per site and hour (module docstring).

    Parameters
    ----------
    problem
        The :class:`~carbonsched.plan.sets.PlanningProblem` the plan was made for.
    result
        The plan (:class:`~carbonsched.plan.result.PlanResult`).
    notice_hours
        Notice before an event. [h]
    event_hours
        Event length. [h]
    caps
        Cap levels for the ``cap`` lever (:func:`carbonsched.plan.caps.load_power_caps`);
        ``None``: no cap headroom.
    capped
        Ids of jobs already planned at a cap (no further cap headroom is counted).

    Returns
    -------
    FlexBand
        One entry per (site, hour) of the horizon (0 where nothing can be shed).

    Raises
    ------
    ValueError
        ``notice_hours < 0`` or ``event_hours < 1``.
    """
    if not notice_hours >= 0 or int(event_hours) != event_hours or event_hours < 1:
        raise ValueError(f"notice_hours must be >= 0 and event_hours a whole number >= 1, got "
                         f"{notice_hours!r}, {event_hours!r}")
    notice = pd.Timedelta(hours=float(notice_hours))
    event = pd.Timedelta(hours=int(event_hours))
    jobs = {j.id: j for j in problem.jobs}
    pieces: dict[str, int] = {}
    for p in result.placements:
        pieces[p.job_id] = pieces.get(p.job_id, 0) + 1
    signals = problem.signals
    band = FlexBand(float(notice_hours), int(event_hours), caps=list(caps or []),
                    capped=frozenset(capped))
    hours = problem.slots[problem.slots == problem.slots.floor("h")]
    for site in problem.sites:
        pue = signals.xs(site.id, level="site")["pue"] if site.id in \
            signals.index.get_level_values("site") else None
        for h in hours:
            key = (site.id, h)
            band.flex_it_kw[key] = 0.0
            band.pue[key] = float(pue.get(h, site.pue.pue_min)) if pue is not None \
                else site.pue.pue_min
    in_horizon = set(hours)
    for p in result.placements:
        job = jobs.get(p.job_id)
        if job is None:
            continue
        for h in pd.date_range(p.start.floor("h"), p.end, freq="h", inclusive="left"):
            if h not in in_horizon or not (p.start < h + pd.Timedelta(hours=1) and p.end > h):
                continue
            lv = _lever(job, p, h, notice, event, pieces[p.job_id], caps, set(capped))
            if lv is None:
                continue
            name, kw, delay = lv
            band.flex_it_kw[(p.site, h)] = band.flex_it_kw.get((p.site, h), 0.0) + kw
            band.actions.append(FlexAction(p.site, h, p.job_id, p.piece, name, kw, delay))
    if caps:
        idle = _idle_gpus(problem, result)
        kw_per = {(d.area, d.hour, d.gpu_type): d.power_per_gpu_kw for d in problem.inference}
        serving = serving_gpus(result)
        for (site, hour, area, gpu_type), gpus in sorted(
                serving.items(), key=lambda kv: (kv[0][0], kv[0][1], -kv[1], kv[0][2:])):
            key = (site, hour, gpu_type)
            kw = kw_per.get((area, hour, gpu_type))
            if hour not in in_horizon or kw is None or gpus <= 0:
                continue
            got = serving_cap(gpus, kw, levels_for(gpu_type, caps), idle.get(key, 0))
            if got is None:
                continue
            shed, extra = got
            idle[key] = idle.get(key, 0) - extra
            band.flex_it_kw[(site, hour)] = band.flex_it_kw.get((site, hour), 0.0) + shed
            band.actions.append(FlexAction(site, hour, SERVING_PREFIX + area, 0, "serve_cap",
                                           shed, 0.0, gpu_type=gpu_type))
    return band


def serving_gpus(result: Any) -> dict[tuple[str, pd.Timestamp, str, str], int]:
    """A plan's serving GPUs per ``(site, hour, area, GPU type)``. [-]

    A plan has one inference placement per demand row and site, so one area can be served
    at a site by several rows (SLO tiers) and of several GPU types: a serving cap applies
    to all GPUs of one type serving the area there, which are one pool. ``result`` is a
    :class:`~carbonsched.plan.result.PlanResult` (its ``inference``).
    """
    out: dict[tuple[str, pd.Timestamp, str, str], int] = {}
    for ip in result.inference:
        k = (ip.site, ip.hour, ip.area, ip.gpu_type)
        out[k] = out.get(k, 0) + int(ip.gpus)
    return out


def recount_flex(problem: Any, result: Any, band: FlexBand, tol_kw: float = 1e-6) -> int:
    """Site-hours whose stated ``flex_it_kw`` is more than the jobs' terms allow.

    Every action behind the band is re-checked against the job it names and the placement it
    acts on: the placement exists and occupies the hour at that site; ``hold`` only for a
    placement not started at the announcement; ``pause`` only for a preemptible job with a
    piece to spare; ``cap`` only at a level the job's type has; the shed power at most the
    gang's; the job's new end (its end + the lever's delay, recomputed here) at or before its
    deadline; each placement counted once per hour. A site-hour over-promises when its
    stated ``flex_it_kw`` exceeds the sum of its valid actions, or the IT power of this plan's
    jobs (and, with cap levels, its serving GPUs) in that hour (running work never sheds). A
    ``serve_cap`` action is re-derived from the serving GPUs it names and the idle GPUs of its
    site-hour, each idle GPU taken once.

    Parameters
    ----------
    problem, result
        The problem and plan the band was stated for.
    band
        The stated band.
    tol_kw
        Tolerance. [kW]

    Returns
    -------
    int
        Over-promising site-hours. [-]
    """
    notice = pd.Timedelta(hours=band.notice_hours)
    event = pd.Timedelta(hours=band.event_hours)
    jobs = {j.id: j for j in problem.jobs}
    by_key = {(p.job_id, p.piece): p for p in result.placements}
    pieces: dict[str, int] = {}
    for p in result.placements:
        pieces[p.job_id] = pieces.get(p.job_id, 0) + 1
    valid: dict[tuple[str, pd.Timestamp], float] = {}
    seen: set[tuple] = set()
    # serve_cap: the serving GPUs and idle GPUs of this plan, recomputed
    idle = _idle_gpus(problem, result) if band.caps else {}
    serving = serving_gpus(result)
    kw_per = {(d.area, d.hour, d.gpu_type): d.power_per_gpu_kw for d in problem.inference}
    for a in band.actions:
        if a.lever == "serve_cap":
            area = a.job_id[len(SERVING_PREFIX):]
            gpus = serving.get((a.site, a.hour, area, a.gpu_type))
            kw_g = kw_per.get((area, a.hour, a.gpu_type))
            mark = (a.job_id, a.site, a.hour, a.gpu_type)    # one pool, shed once
            if (gpus is None or kw_g is None or not a.job_id.startswith(SERVING_PREFIX)
                    or mark in seen or not band.caps):
                continue
            key = (a.site, a.hour, a.gpu_type)
            got = serving_cap(gpus, kw_g, levels_for(a.gpu_type, band.caps),
                              idle.get(key, 0))
            if got is None:
                continue
            idle[key] = idle.get(key, 0) - got[1]     # idle GPUs are taken once
            seen.add(mark)
            valid[(a.site, a.hour)] = valid.get((a.site, a.hour), 0.0) + min(a.shed_it_kw,
                                                                             got[0])
            continue
        job, p = jobs.get(a.job_id), by_key.get((a.job_id, a.piece))
        if job is None or p is None or p.site != a.site or (a.job_id, a.piece, a.hour) in seen:
            continue
        h = a.hour
        if not (p.start < h + pd.Timedelta(hours=1) and p.end > h):
            continue
        if a.lever == "hold":
            ok = p.start >= h - notice and p.end + (h + event - p.start) <= job.deadline
            kw = job.it_power_kw
        elif a.lever == "pause":
            ok = (job.preemptible and pieces[a.job_id] < job.max_pieces
                  and p.end + event + pd.Timedelta(minutes=job.checkpoint_overhead_minutes)
                  <= job.deadline)
            kw = job.it_power_kw
        elif a.lever == "cap":
            # the deepest level the type allows bounds what a cap can shed
            ok, kw = False, 0.0
            if a.job_id not in band.capped and job.it_power_kw > 0:
                frac = 1.0 - a.shed_it_kw / job.it_power_kw
                lv = levels_for(job.gpu_type, band.caps)
                fit = [c for c in lv if c.power_fraction <= frac + 1e-9]
                if fit:
                    c = max(fit, key=lambda c: c.power_fraction)
                    run = min(p.end, h + event) - max(p.start, h)
                    ok = p.end + run * (1.0 - 1.0 / c.time_factor) <= job.deadline
                    kw = job.it_power_kw * (1.0 - c.power_fraction)
        else:
            ok, kw = False, 0.0
        if ok:
            seen.add((a.job_id, a.piece, h))
            valid[(a.site, h)] = valid.get((a.site, h), 0.0) + min(a.shed_it_kw, kw)
    # the plan's own job power per site-hour bounds any band
    load: dict[tuple[str, pd.Timestamp], float] = {}
    for p in result.placements:
        job = jobs.get(p.job_id)
        if job is None:
            continue
        for h in pd.date_range(p.start.floor("h"), p.end, freq="h", inclusive="left"):
            if p.start < h + pd.Timedelta(hours=1) and p.end > h:
                load[(p.site, h)] = load.get((p.site, h), 0.0) + job.it_power_kw
    if band.caps:       # serving GPUs may shed by serve_cap
        for ip in result.inference:
            kw_g = kw_per.get((ip.area, ip.hour, ip.gpu_type), 0.0)
            load[(ip.site, ip.hour)] = load.get((ip.site, ip.hour), 0.0) + ip.gpus * kw_g
    over = 0
    for key, kw in band.flex_it_kw.items():
        if kw > min(valid.get(key, 0.0), load.get(key, 0.0)) + tol_kw:
            over += 1
    return int(over)


def band_rows(band: FlexBand) -> dict[tuple[str, pd.Timestamp], dict[str, float]]:
    """The band as ``site_hours`` fields per ``(site, hour)``. [kW]

    Returns
    -------
    dict
        ``{(site, hour): {flex_it_kw, flex_facility_kw, flex_hold_kw, flex_pause_kw,
        flex_cap_kw}}``.
    """
    levers = band.by_lever()
    out = {}
    for key, kw in band.flex_it_kw.items():
        site, hour = key
        out[key] = {"flex_it_kw": float(kw), "flex_facility_kw": band.facility_kw(site, hour),
                    **{f"flex_{lv}_kw": float(levers.get((site, hour, lv), 0.0))
                       for lv in LEVERS}}
    return out


def shed_mwh(band: FlexBand) -> float:
    """Facility energy the band offers over its hours (each hour's band for one hour). [MWh]"""
    return float(np.sum([band.facility_kw(s, h) for s, h in band.flex_it_kw])) / 1000.0
