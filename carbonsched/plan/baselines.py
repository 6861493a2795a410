"""Baseline policies: carbon-agnostic first-fit and Carbon-Aware-SDK-style greedy best window.

Both return capacity-, power- and SLO-feasible plans (status ``heuristic``) scored with the same
emissions accounting as the MILP (:mod:`carbonsched.plan.result`), so policies compare on equal
terms. The greedy plan is also the planner's fallback when a solver returns no incumbent.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from carbonsched.domain import ReasonCode
from carbonsched.plan.result import PlanResult, PlanStatus, SolverRecord, build_plan_result
from carbonsched.plan.sets import PlanningProblem, PlanSets, compile_sets, window_cost

BASELINE_DEFINITION = (
    "carbon-agnostic first-fit: inference first, each demand from its lowest-latency sites "
    "within the SLO; then jobs in order of earliest start (ties: order in the workload), each at "
    "the earliest start time with GPUs and IT power left for its whole duration, ties broken by "
    "the first allowed site (the job's allowed_sites order, else catalog order); a job with no "
    "room in its window stays unplaced (baseline_unplaced); scored on the same forecast")
"""The carbon-agnostic baseline in one sentence: the README, the plan document and
:func:`agnostic_plan` all say this (a test checks that the README quotes it)."""


class Ledger:
    """Remaining GPUs per (site, slot, type) and IT power per (site, slot)."""

    def __init__(self, sets: PlanSets) -> None:
        n_t = len(sets.slot)
        self.sets = sets
        # GPUs left after running work (the planner's capacity, every slot of the axis)
        self.gpus = sets.gpu_cap.astype(np.int64).copy() if sets.gpu_cap.size else \
            np.repeat(sets.gpu_count[:, None, :], n_t, axis=1).astype(np.int64)
        self.kw = sets.power_cap_kw.astype(float).copy()

    def fits_windows(self, j: int) -> np.ndarray:
        """Boolean ``(S, T)``: start (s, t) has room for job ``j`` for its whole duration."""
        s = self.sets
        d = int(s.job_dur[j])
        ok = (self.gpus[:, :, s.job_gtype[j]] >= s.job_gpus[j]) & \
             (self.kw >= s.job_kw[j] - 1e-9)
        bad = np.concatenate([np.zeros((ok.shape[0], 1)), np.cumsum(~ok, axis=1)], axis=1)
        n_t = ok.shape[1]
        out = np.zeros_like(ok)
        if d <= n_t:
            out[:, :n_t - d + 1] = (bad[:, d:] - bad[:, :n_t - d + 1]) == 0
        return out

    def fits(self, j: int, site: int, start: int) -> bool:
        """Room for job ``j`` at ``site`` from slot ``start`` for its whole duration."""
        s = self.sets
        d = int(s.job_dur[j])
        return bool((self.gpus[site, start:start + d, s.job_gtype[j]] >= s.job_gpus[j]).all()
                    and (self.kw[site, start:start + d] >= s.job_kw[j] - 1e-9).all())

    def take_job(self, j: int, site: int, start: int) -> None:
        """Book job ``j``'s GPUs and IT power at ``site`` for its hours from slot ``start``."""
        s = self.sets
        d = int(s.job_dur[j])
        self.gpus[site, start:start + d, s.job_gtype[j]] -= s.job_gpus[j]
        self.kw[site, start:start + d] -= s.job_kw[j]

    def serve(self, d: int, site_order: np.ndarray) -> np.ndarray:
        """Serve demand ``d`` greedily over ``site_order``; return GPUs per site ``(S,)``."""
        s = self.sets
        t, g, kw = int(s.inf_hour[d]), int(s.inf_gtype[d]), float(s.inf_kw_per_gpu[d])
        need = int(s.inf_gpus[d])
        out = np.zeros(len(s.site), dtype=np.int64)
        if s.slots_per_hour > 1:
            # a sub-hour grid: the demand holds in every slot of its hour
            t = slice(t, t + s.slots_per_hour)
        for site in site_order:
            if need == 0:
                break
            by_power = int(np.floor(np.min(self.kw[site, t]) / kw + 1e-9)) if kw > 0 else need
            take = min(need, int(np.min(self.gpus[site, t, g])), by_power)
            if take > 0:
                out[site] = take
                need -= take
                self.gpus[site, t, g] -= take
                self.kw[site, t] -= take * kw
        return out


def _window_sum(rate: np.ndarray, dur: int) -> np.ndarray:
    """Sum of ``rate`` over ``dur`` hours from each start along axis 1 (inf past the end)."""
    cum = np.concatenate([np.zeros_like(rate[:, :1]), np.cumsum(rate, axis=1)], axis=1)
    n_t = rate.shape[1]
    out = np.full(rate.shape, np.inf)
    if dur <= n_t:
        out[:, :n_t - dur + 1] = cum[:, dur:] - cum[:, :n_t - dur + 1]
    return out


def _run(sets: PlanSets, name: str, carbon_aware: bool, started: float,
         rank_kw: np.ndarray | None = None, rank_gpu: np.ndarray | None = None,
         order: np.ndarray | None = None, prefilled: np.ndarray | None = None,
         defer: bool = False) -> PlanResult:
    n_s, n_t = sets.pue.shape
    ledger = Ledger(sets)
    note = []
    rank_kw = sets.cost_per_kwh if rank_kw is None else rank_kw            # (S, T)
    rank_gpu = (np.zeros(ledger.gpus.shape) if rank_gpu is None else rank_gpu)  # (S, T, G)
    chosen = []
    # inference first: it must be served; carbon-aware serves cleanest sites first. Within an
    # hour the demands with the fewest eligible sites go first: tiers of one area under
    # different SLOs have nested site sets, and serving the strictest first never takes a GPU
    # only it could use (a loose tier first took the one 10 ms site and left the 10 ms tier
    # unserved, a recount SLO violation)
    alloc = np.zeros(sets.inf_sites.shape, dtype=np.int64)
    short = 0
    n_d = len(sets.inf_hour)
    for d in np.lexsort((np.arange(n_d), sets.inf_sites.sum(axis=1), sets.inf_hour)):
        elig = np.flatnonzero(sets.inf_sites[d])
        if carbon_aware:
            t, g = sets.inf_hour[d], sets.inf_gtype[d]
            per_gpu = sets.inf_kw_per_gpu[d] * rank_kw[elig, t] + rank_gpu[elig, t, g]
            sites_by = elig[np.argsort(per_gpu, kind="stable")]
        else:
            lat = np.array([sets.problem.sites[s].latency_ms.get(
                sets.problem.inference[d].area, np.inf) for s in elig])
            sites_by = elig[np.argsort(lat, kind="stable")]
        alloc[d] = ledger.serve(int(d), sites_by)
        short += int(sets.inf_gpus[d] - alloc[d].sum())
    if short:
        note.append(f"inference short by {short} GPU-hours (first-fit could not serve it)")
    placeable = sets.placeable
    # carbon-agnostic: first come (earliest start), first served; greedy: same order
    if order is None:
        order = placeable[np.lexsort((placeable, sets.job_first[placeable]))]
    # prefilled placements (after inference); those that no longer fit join the queue first
    bumped = []
    for j, site, start in (prefilled if prefilled is not None else []):
        if ledger.fits(int(j), int(site), int(start)):
            ledger.take_job(int(j), int(site), int(start))
            chosen.append((int(j), int(site), int(start)))
        else:
            bumped.append(int(j))
    if bumped:
        order = np.concatenate([np.array(bumped, dtype=np.int64), order])
    starts = np.arange(n_t)
    site_rank = np.zeros((len(sets.problem.jobs), n_s), dtype=np.int64)
    pos = {s: i for i, s in enumerate(sets.site)}
    for k, job in enumerate(sets.problem.jobs):
        if job.allowed_sites:
            ranked = [pos[s] for s in job.allowed_sites if s in pos]
            site_rank[k] = n_s
            site_rank[k, ranked] = np.arange(len(ranked))
        else:
            site_rank[k] = np.arange(n_s)
    wcost = {}
    reasons = {}
    deferrable = sets.deferrable if defer and len(sets.deferrable) else None
    n_deferred = 0
    for j in order:
        j = int(j)
        d = int(sets.job_dur[j])
        valid = (sets.job_sites[j][:, None] & (starts[None, :] >= sets.job_first[j])
                 & (starts[None, :] <= sets.job_last[j]))
        ok = valid & ledger.fits_windows(j)
        if not ok.any():
            reasons[j] = (ReasonCode.INSUFFICIENT_CAPACITY,
                          f"{name}: no allowed site-start with room left")
            continue
        ss, tt = np.nonzero(ok)
        if carbon_aware:
            g = int(sets.job_gtype[j])
            f = float(sets.job_last_frac[j])
            if (d, f, g) not in wcost:
                # energy is charged for the minutes run (last slot its fraction); the GPU
                # price for the whole gang in every occupied slot
                wcost[(d, f, g)] = (window_cost(rank_kw, d, f),
                                    _window_sum(rank_gpu[:, :, g], d))
            wk, wg = wcost[(d, f, g)]
            cost = sets.job_kw[j] * wk[ss, tt] + sets.job_gpus[j] * wg[ss, tt]
            key = np.lexsort((site_rank[j, ss], tt, cost))
            if deferrable is not None and deferrable[j] \
                    and cost[key[0]] >= sets.unplaced_cost[j]:
                # the Lagrangian choice: deferring (its terminal value) costs no more than
                # the best priced start with room, so a later run plans it
                n_deferred += 1
                continue
        else:
            key = np.lexsort((site_rank[j, ss], tt))
        best = key[0]
        site, start = int(ss[best]), int(tt[best])
        ledger.take_job(j, site, start)
        chosen.append((j, site, start))
    if n_deferred:
        note.append(f"{n_deferred} deferrable job(s) deferred: their terminal value was at "
                    "most their best priced start with room")
    rec = SolverRecord(name=name, status=PlanStatus.HEURISTIC, method=name,
                       note="; ".join(note))
    res = build_plan_result(sets, np.array(chosen, dtype=np.int64).reshape(-1, 3), alloc,
                            PlanStatus.HEURISTIC, rec, reasons)
    from carbonsched.plan.domain_repair import with_domains

    res = with_domains(sets, res)   # topology-bound gangs into their domains, first fit
    rec.objective = res.totals["objective"]
    rec.seconds = time.perf_counter() - started
    return res


def agnostic_plan(problem: PlanningProblem) -> PlanResult:
    """Carbon-unaware baseline: first come, first served, earliest start, first allowed site.

    Exactly :data:`BASELINE_DEFINITION`. Jobs in order of earliest start each take the earliest
    start with room, ties broken by the first allowed site (the job's ``allowed_sites`` order,
    else catalog order). When capacity does not bind this is "each job at its earliest start at
    its first allowed site"; when it binds, a job may start later than its earliest start, and a
    job with no room left in its window is unplaced (``InsufficientCapacity``, listed as the
    plan's ``baseline_unplaced``). Inference is served from the lowest-latency sites within its
    SLO.

    Returns
    -------
    PlanResult
        Status ``heuristic``, method ``agnostic``.
    """
    t = time.perf_counter()
    return _run(compile_sets(problem, columns=False), "agnostic", carbon_aware=False,
                started=t)


def greedy_plan(problem: PlanningProblem, signals: pd.DataFrame | None = None) -> PlanResult:
    """Carbon-aware greedy: each job to its best window, repaired to capacity.

    Each job (in order of earliest start) ranks its allowed (site, start) options by the
    window's summed marginal rate PUE × CI / 1000 [kg/kWh] — the Carbon Aware SDK's best-window
    query ("emissions/forecasts/current" with a window duration, docs at
    https://carbon-aware-sdk.greensoftware.foundation), extended across sites — and takes the best
    one that still has GPUs and power left; none left means ``InsufficientCapacity``. Inference
    is served from the cleanest SLO-feasible sites first. Green surplus is not modelled by the
    greedy choice (it is by the score).

    Parameters
    ----------
    problem
        The planning problem.
    signals
        Signals to decide on instead of ``problem.signals`` (e.g. a forecast).

    Returns
    -------
    PlanResult
        Status ``heuristic``, method ``greedy``; totals use the signals decided on. With
        tenants and a fairness above 0 the plan says fairness was not applied
        (:func:`carbonsched.plan.fairness.fairness_not_applied`: the greedy order ignores
        fair shares).
    """
    t = time.perf_counter()
    res = _run(compile_sets(problem, signals, columns=False), "greedy", carbon_aware=True,
               started=t)
    if getattr(problem, "tenants", None) and getattr(problem, "fairness", 0.0) > 0:
        from carbonsched.plan.fairness import fairness_not_applied

        res = fairness_not_applied(problem, res, "the greedy plan (greedy_plan) orders jobs by "
                                   "carbon alone and does not model fair shares")
    return res


def greedy_from_sets(sets: PlanSets, defer: bool = False) -> PlanResult:
    """Greedy plan on already compiled sets (the solver's fallback, column generation's start).

    Parameters
    ----------
    sets
        Compiled sets.
    defer
        Defer a job deferrable past the horizon (:attr:`~carbonsched.plan.sets.PlanSets.
        deferrable`) whose best start with room emits at least its terminal value, as the
        MILP's objective would (the plan note counts them); else place every job that fits.

    Returns
    -------
    PlanResult
        Status ``heuristic``, method ``greedy``; deferred jobs are unplaced with reason
        ``DeferredPastHorizon``.
    """
    return _run(sets, "greedy", carbon_aware=True, started=time.perf_counter(), defer=defer)


def priced_greedy(sets: PlanSets, rank_kw: np.ndarray, rank_gpu: np.ndarray,
                  order: np.ndarray | None = None, prefilled: np.ndarray | None = None
                  ) -> PlanResult:
    """Greedy with shadow prices: options ranked by kW × Σ ``rank_kw`` + GPUs × Σ ``rank_gpu``.

    With Lagrangian multipliers of the capacity and power rows added to the carbon rate this
    is the classic Lagrangian heuristic (Fisher, "The Lagrangian relaxation method for solving
    integer programming problems", Management Science 27, 1981, doi:10.1287/mnsc.27.1.1).
    As in the Lagrangian the bound comes from, a deferrable job
    (:attr:`~carbonsched.plan.sets.PlanSets.deferrable`) whose best priced start with room
    costs at least its terminal value (``sets.unplaced_cost``) is deferred, not placed; the
    plan note counts them. Measured on the 10k × 16 × 72 h rolling step (BENCHMARKS.md
    section 17d), placing them anyway left the priced greedy plan 24 % above the bound
    instead of 3 %.

    Parameters
    ----------
    rank_kw
        Price per kWh of IT energy, shape ``(S, T)``. [kg/kWh]
    rank_gpu
        Price per GPU-hour, shape ``(S, T, G)``. [kg/GPU·h]
    order
        Job positions in processing order (default: earliest start first).
    prefilled
        ``(P, 3)`` ``(job, site, start)`` placed right after inference, in this order, where
        they still fit (e.g. a rounded LP solution); the others are placed first by price.
        ``order`` must not repeat these jobs.
    """
    return _run(sets, "priced-greedy", carbon_aware=True, started=time.perf_counter(),
                rank_kw=rank_kw, rank_gpu=rank_gpu, order=order, prefilled=prefilled,
                defer=True)
