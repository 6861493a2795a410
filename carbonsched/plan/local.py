r"""Local search on a plan: one-job moves and insertions priced on the exact objective.

The plans column generation rounds (:mod:`carbonsched.plan.colgen`) come from the priced greedy
(the Lagrangian heuristic): each job in turn takes its cheapest option under carbon *plus
shadow prices*, with the room the jobs before it left. Once the plan is built, many jobs can
move to a start that is cheaper in carbon alone and still has room — the shadow price that
steered them away was an LP price, not a conflict in this plan. :func:`descend` makes those
moves, one job at a time (a first-improvement descent over the move neighbourhood of the
generalised assignment problem: Osman, "Heuristics for the generalised assignment problem:
simulated annealing and tabu search approaches", OR Spektrum 17, 1995,
doi:10.1007/BF01720977), and inserts left-out jobs where one fits for less than their
unplaced penalty.

A move's value is the exact change of the plan's objective
(:func:`carbonsched.plan.result.build_plan_result`): each site-slot's emissions are
:math:`\max(0, L \cdot \mathrm{PUE} \cdot h - \text{surplus} \cdot h) \cdot CI / 1000` for its
IT load :math:`L` [kW] over a slot of :math:`h` hours
(:func:`~carbonsched.plan.result.emissions_by_site_hour`), convex in :math:`L`, so the cost of
a job at a start is the sum of the increments of its slots (the last one by the share of it
the job runs) at the loads the rest of the plan leaves. Room is the same ledger the greedy
plans use (GPUs per site, slot and type; IT power per site-slot within the physical caps), so
a move never breaks a cap, window, residency rule or gang.

Measured on the priced greedy plan of converged LP duals (10k × 16 × 48): at load 0.8,
seed 2, 5,925.6 → 5,820.9 kg (851 moves, 16 insertions after the first pass, 3 s); at 0.6,
seed 4, 3,483.2 → 3,464.8 kg (645 moves). In column generation, on the final plan
(docs/benchmarks/planner-log.md#planner-3-12): 10k at 0.8 seed 2, 5,687.5 → 5,644.9 kg after the
site-by-site search (372 moves, 3 left-out jobs placed where they fit, 5 by an ejection); 1k at
0.6 seed 2, 330.31 → 327.05 kg on the repair MIP's plan, whose options are the generated and
best-priced ones only.
Tried, not kept: a second job moved out of the way of a placed one (a chain of two moves,
tried for the jobs farthest from their cheapest start): one found in 15 s at 10k.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from carbonsched.plan.baselines import Ledger
from carbonsched.plan.result import PlanResult, PlanStatus, SolverRecord, build_plan_result
from carbonsched.plan.sets import PlanSets, inference_positions, placement_positions

MOVE_TOL_KG = 1e-9
"""A move or insertion is made only if it lowers the objective by more than this. [kg]"""

CHECK_EVERY = 256
"""Jobs between two reads of the clock."""

REBUILD_S_PER_PLACEMENT = 2e-4
"""Time :func:`improve` keeps per placement to rebuild the plan and leave the solve its finish:
building a 9,578-placement plan took 0.5 s (10k × 16 × 48, two processes on the 2 cores);
with half that kept, 50k × 16 × 48 at load 0.3 ended 1.2 s past its 300 s limit
(docs/benchmarks/planner-log.md#planner-3-12). [s]"""

EJECT_TRIES = 8
"""Blocker moves tried exactly per left-out job (at its cheapest starts first)."""


@dataclass
class Moves:
    """What :func:`descend` did."""

    chosen: np.ndarray
    """``(P, 3)`` ``(job, site, start)`` of the improved plan."""
    moved: int
    """Jobs moved to another site or start. [-]"""
    inserted: int
    """Left-out jobs placed where they fit. [-]"""
    ejected: int
    """Left-out jobs placed by moving one placed job out of their way. [-]"""
    gain_kg: float
    """Objective decrease predicted by the moves (equal to the recount's). [kg]"""
    rounds: int
    """Rounds started (moves, insertions, ejections); they stop at one that changes nothing,
    at ``max_rounds`` or when time runs out. [-]"""
    stopped_by_time: bool
    """Whether the time budget ended the search (a pass, the blocker check or the ejections
    cut short)."""
    deferred: int = 0
    """Placed deferrable jobs taken out of the plan because their terminal value is below
    every start with room, where they were included. [-]"""


def plan_arrays(sets: PlanSets, plan: PlanResult) -> tuple[np.ndarray, np.ndarray]:
    """A plan's ``(P, 3)`` ``(job, site, start)`` positions and ``(D, S)`` inference GPUs.

    Placements of one job in several pieces (preemptible patterns) are not positions; callers
    check :func:`movable` first.

    Raises
    ------
    ValueError
        If the plan serves an inference (area, hour, GPU type) with more GPUs than its
        demands ask for, or names a job or site the sets do not know.
    """
    chosen = placement_positions(sets, plan.placements)
    alloc = inference_positions(sets, plan.inference)
    return chosen, alloc


def movable(sets: PlanSets, plan: PlanResult) -> bool:
    """Whether :func:`descend` applies: no piece patterns (preemptible jobs run in pieces)."""
    return all(p.pieces <= 1 for p in plan.placements)


def descend(sets: PlanSets, chosen: np.ndarray, alloc: np.ndarray, seconds: float,
            max_rounds: int = 4) -> Moves:
    """Move placed jobs to cheaper starts with room, and insert left-out jobs where they fit.

    Each round first lifts out every placed job in turn (in position order), finds its
    cheapest start with room on the exact objective, and moves it there if that is cheaper
    by more than :data:`MOVE_TOL_KG` than where it was, or defers it (a deferrable job,
    :attr:`~carbonsched.plan.sets.PlanSets.deferrable`) when its terminal value is below both
    by more than that; then it tries every left-out job that
    pays an unplaced penalty (largest penalty first) at its cheapest start with room, placed
    if that costs less than the penalty (the moves free room: at 10k × 16 × 48, load 0.8,
    seed 2, 16 jobs fit after the first pass, none before); then each left-out job still out
    is tried with one placed job moved out of its way (an ejection: the blocker must cover
    every slot where the job lacks GPUs or power, and go to its own cheapest start with
    room; 6 more jobs placed on that seed). The gain of every step is exact, so the plan's
    objective falls by exactly ``gain_kg``.
    Rounds repeat until one makes no move, ``max_rounds`` is reached or ``seconds`` run out.

    Parameters
    ----------
    sets
        Compiled sets (hourly or sub-hour slots).
    chosen
        ``(P, 3)`` ``(job, site, start)`` of a plan feasible for the sets' caps.
    alloc
        ``(D, S)`` inference GPUs of that plan (kept as they are).
    seconds
        Time budget. [s]
    max_rounds
        Most passes over the placed jobs.

    Returns
    -------
    Moves
        The improved positions (same jobs plus the inserted ones) and counts.
    """
    t_start = time.perf_counter()
    n_s, n_t = sets.pue.shape
    sh = sets.slot_hours
    ledger = Ledger(sets)
    load = np.zeros((n_s, n_t))        # IT load per site-slot for the objective [kW]
    for d in range(len(alloc)):
        if not alloc[d].any():
            continue
        g, kw = int(sets.inf_gtype[d]), float(sets.inf_kw_per_gpu[d])
        for t in sets.inf_slots(d):
            ledger.gpus[:, t, g] -= alloc[d]
            ledger.kw[:, t] -= alloc[d] * kw
            load[:, t] += alloc[d] * kw
    fac_rate = sets.pue * sh                       # facility kWh per kW of IT load
    sur_kwh = sets.surplus_kw * sh
    kg_per_kwh = sets.ci_g_per_kwh / 1000.0
    at: dict[int, tuple[int, int]] = {}

    def put(j: int, s: int, t: int, sign: int) -> None:
        d = int(sets.job_dur[j])
        kw = float(sets.job_kw[j])
        if sign > 0:
            ledger.take_job(j, s, t)
        else:
            ledger.gpus[s, t:t + d, sets.job_gtype[j]] += sets.job_gpus[j]
            ledger.kw[s, t:t + d] += kw
        load[s, t:t + d - 1] += sign * kw
        load[s, t + d - 1] += sign * kw * float(sets.job_last_frac[j])

    for j, s, t in np.asarray(chosen, dtype=np.int64).reshape(-1, 3).tolist():
        put(j, s, t, +1)
        at[j] = (s, t)
    starts = np.arange(n_t)

    def allowed(j: int) -> np.ndarray:
        """Boolean ``(S, T)``: the job's allowed sites × its start window."""
        return (sets.job_sites[j][:, None] & (starts >= sets.job_first[j])
                & (starts <= sets.job_last[j]))

    def em(x: np.ndarray) -> np.ndarray:
        return np.maximum(x * fac_rate - sur_kwh, 0.0) * kg_per_kwh

    def cost(j: int, room: bool = True) -> np.ndarray:
        """Objective increase of job ``j`` at each (site, start) given ``load`` [kg].

        ``inf`` where the job is not allowed or (with ``room``) has no room.
        """
        d = int(sets.job_dur[j])
        kw = float(sets.job_kw[j])
        base = em(load)
        full = em(load + kw) - base
        last = em(load + kw * float(sets.job_last_frac[j])) - base
        out = np.full((n_s, n_t), np.inf)
        m = n_t - d + 1
        if m > 0:
            cum = np.concatenate([np.zeros((n_s, 1)), np.cumsum(full, axis=1)], axis=1)
            out[:, :m] = cum[:, d - 1:d - 1 + m] - cum[:, :m] + last[:, d - 1:d - 1 + m]
        ok = allowed(j)
        if room:
            ok &= ledger.fits_windows(j)
        return np.where(ok, out, np.inf)

    def eject_for(u: int, snap: dict, value: float) -> float:
        """Place job ``u`` by moving one placed job out of its way; the gain [kg].

        ``u`` is out of the plan; ``value`` is what leaving it out costs [kg] (its unplaced
        penalty or terminal value), and only starts cheaper than that are tried.

        Candidates are the placed jobs at an allowed site of ``u`` that cover every slot
        where ``u`` lacks GPUs (same type) or power at a start, with enough of both, and had
        another allowed start with room (with themselves lifted out) when the ejections
        began; the :data:`EJECT_TRIES` at ``u``'s cheapest starts are tried exactly (lift the
        blocker out, place ``u``, put the blocker at its cheapest start with room, which
        must not be where it was: that would be an insertion).
        """
        du, gu = int(sets.job_dur[u]), int(sets.job_gtype[u])
        ku, nu = float(sets.job_kw[u]), int(sets.job_gpus[u])
        first, last = int(sets.job_first[u]), min(int(sets.job_last[u]), n_t - du)
        if last < first:
            return 0.0
        ts = np.arange(first, last + 1)
        cu_free = cost(u, room=False)
        cand = []
        pj, ps, pt, pd_, pk, pg, pty, pmove = (snap[k] for k in ("j", "s", "t", "d", "kw", "g",
                                                                 "ty", "move"))
        for s in np.flatnonzero(sets.job_sites[u]).tolist():
            b = np.flatnonzero(ps == s)
            if not len(b):
                continue
            dk = ku - ledger.kw[s] - 1e-9          # > 0: power short in that slot [kW]
            dg = nu - ledger.gpus[s, :, gu]        # > 0: GPUs short
            bt, bend = pt[b][:, None], (pt[b] + pd_[b])[:, None]
            ok = np.ones((len(b), len(ts)), dtype=bool)
            short = np.zeros(len(ts), dtype=bool)
            for k in range(du):
                h = ts + k
                nk, ng = dk[h] > 0, dg[h] > 0
                short |= nk | ng
                cover = (bt <= h) & (bend > h)
                ok &= (~nk | (cover & (pk[b][:, None] >= dk[h])))
                ok &= (~ng | (cover & (pty[b][:, None] == gu) & (pg[b][:, None] >= dg[h])))
            ok &= short
            ok &= pmove[b][:, None] & (cu_free[s, ts] < value - MOVE_TOL_KG)
            bi, wi = np.nonzero(ok)
            cand.extend(zip(cu_free[s, ts[wi]].tolist(), [s] * len(bi), ts[wi].tolist(),
                            pj[b[bi]].tolist(), strict=True))
        best = None
        cand.sort()
        for _, s, t, j in cand[:EJECT_TRIES]:
            sj, tj = at[j]
            put(j, sj, tj, -1)
            here_j = cost(j, room=False)[sj, tj]
            cu = cost(u)[s, t]
            if np.isfinite(cu):
                put(u, s, t, +1)
                cj = cost(j)
                cj[sj, tj] = np.inf           # staying put is an insertion, not an ejection
                k = int(np.argmin(cj))
                if np.isfinite(cj.flat[k]):
                    delta = float(value - cu - (cj.flat[k] - here_j))
                    if delta > MOVE_TOL_KG and (best is None or delta > best[0]):
                        best = (delta, j, s, t, *divmod(k, n_t))
                put(u, s, t, -1)
            put(j, sj, tj, +1)
        if best is None:
            return 0.0
        delta, j, s, t, s2, t2 = best
        put(j, *at[j], -1)
        put(u, s, t, +1)
        at[u] = (s, t)
        put(j, s2, t2, +1)
        at[j] = (s2, t2)
        for job, (a, b) in ((j, (s2, t2)), (u, (s, t))):
            i = snap["pos"].get(job)
            if i is not None:
                ps[i], pt[i] = a, b
        return delta

    moved = inserted = ejected = deferred = rounds = 0
    gain = 0.0
    deferrable = sets.deferrable if len(sets.deferrable) else np.zeros(len(sets.job_dur), bool)
    stopped = False
    # placeable excludes the pre-check's rejects (sets.reasons): every one pays its penalty
    penalised = np.asarray(sets.placeable, dtype=np.int64)

    def out_of_time(n: int, every: int) -> bool:
        return n % every == 0 and time.perf_counter() - t_start > seconds
    for _ in range(max_rounds):
        rounds += 1
        changed = 0
        for n, j in enumerate(sorted(at)):
            if out_of_time(n, CHECK_EVERY):
                stopped = True
                break
            s0, t0 = at[j]
            put(j, s0, t0, -1)
            c = cost(j)
            here = c[s0, t0]
            k = int(np.argmin(c))
            if deferrable[j] and sets.unplaced_cost[j] < min(here, c.flat[k]) - MOVE_TOL_KG:
                # deferring (its terminal value) beats where it is and every start with room
                gain += float(here - sets.unplaced_cost[j])
                del at[j]
                deferred += 1
                changed += 1
                continue
            if c.flat[k] < here - MOVE_TOL_KG:
                s, t = divmod(k, n_t)
                gain += float(here - c.flat[k])
                moved += 1
                changed += 1
            else:
                s, t = s0, t0
            put(j, s, t, +1)
            at[j] = (s, t)
        # the moves may have made room for work left out
        left = penalised[[j not in at for j in penalised.tolist()]]
        for n, j in enumerate(left[np.argsort(-sets.unplaced_cost[left],
                                              kind="stable")].tolist()):
            if stopped or out_of_time(n, 16):
                stopped = True
                break
            c = cost(j)
            k = int(np.argmin(c))
            if c.flat[k] < sets.unplaced_cost[j] - MOVE_TOL_KG:
                s, t = divmod(k, n_t)
                put(j, s, t, +1)
                at[j] = (s, t)
                gain += float(sets.unplaced_cost[j] - c.flat[k])
                inserted += 1
                changed += 1
        # a left-out job placed by moving one placed job out of its way
        left = penalised[[j not in at for j in penalised.tolist()]]
        if len(left) and not stopped:
            pj = np.array(sorted(at), dtype=np.int64)
            pos = np.array([at[j] for j in pj.tolist()], dtype=np.int64).reshape(-1, 2)
            # whether each placed job has another allowed start with room, itself lifted out
            can_move = np.zeros(len(pj), dtype=bool)
            for i, (j, (s0, t0)) in enumerate(zip(pj.tolist(), pos.tolist(), strict=True)):
                if out_of_time(i, CHECK_EVERY):
                    stopped = True
                    break
                put(j, s0, t0, -1)
                room = ledger.fits_windows(j) & allowed(j)
                room[s0, t0] = False
                can_move[i] = room.any()
                put(j, s0, t0, +1)
            snap = {"j": pj, "s": pos[:, 0].copy(), "t": pos[:, 1].copy(),
                    "d": sets.job_dur[pj], "kw": sets.job_kw[pj], "g": sets.job_gpus[pj],
                    "ty": sets.job_gtype[pj], "pos": {j: i for i, j in enumerate(pj.tolist())},
                    "move": can_move}
            for n, u in enumerate([] if stopped else left[np.argsort(
                    -sets.unplaced_cost[left], kind="stable")].tolist()):
                if out_of_time(n, 16):
                    stopped = True
                    break
                g = eject_for(u, snap, float(sets.unplaced_cost[u]))
                if g > 0:
                    gain += g
                    ejected += 1
                    changed += 1
        if stopped or not changed:
            break
    out = np.array([(j, s, t) for j, (s, t) in sorted(at.items())],
                   dtype=np.int64).reshape(-1, 3)
    return Moves(chosen=out, moved=moved, inserted=inserted, ejected=ejected, gain_kg=gain,
                 rounds=rounds, stopped_by_time=stopped, deferred=deferred)


def improve(sets: PlanSets, plan: PlanResult, seconds: float, rec: SolverRecord
            ) -> tuple[PlanResult, Moves] | None:
    """:func:`descend` on a plan; the improved plan, or ``None`` if nothing moved.

    The improved plan is rebuilt and scored by :func:`build_plan_result` from its positions
    (so its totals are the recount's, not the moves' sum) with status ``feasible`` and the
    given solver record. ``seconds`` [s] covers the rebuild too: the moves get it less
    :data:`REBUILD_S_PER_PLACEMENT` per placement. Jobs still left out get the rebuild's
    reasons (``InsufficientCapacity``, or ``DeferredPastHorizon`` for a deferrable job), not
    the wording of the plan they came from.

    Returns
    -------
    tuple or None
        ``(plan, moves)``, or ``None`` when the plan has pieces (:func:`movable`), the budget
        does not cover the rebuild, or nothing moved.
    """
    if not movable(sets, plan):
        return None
    t0 = time.perf_counter()
    chosen, alloc = plan_arrays(sets, plan)
    budget = seconds - REBUILD_S_PER_PLACEMENT * len(chosen) - (time.perf_counter() - t0)
    if budget <= 0:
        return None
    mv = descend(sets, chosen, alloc, budget)
    if mv.moved + mv.inserted + mv.ejected + mv.deferred == 0:
        return None
    return build_plan_result(sets, mv.chosen, alloc, PlanStatus.FEASIBLE, rec), mv
