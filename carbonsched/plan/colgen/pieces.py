r"""Piece patterns of preemptible jobs as columns of column generation, with a bound over them.

A preemptible job (``max_pieces >= 2``) may run at one site in :math:`k = 2 \ldots K_j` pieces:
:math:`k` runs of whole slots separated by at least one free slot, every run starting inside the
horizon, the first at or after the earliest start, the last ending by the deadline; every resumed
piece adds ``checkpoint_overhead_minutes`` of run time at full power, so :math:`k` pieces take
:math:`n_k = \lceil (m_j + (k - 1) o_j) / 60 \rceil` slots, the last charged its fraction
:math:`f_k` — the pattern set :func:`carbonsched.plan.sets.enumerate_patterns` draws its
(static, cheapest-per-site) columns from.

**Pricing.** Under non-negative multipliers :math:`\lambda = (\lambda^c, \lambda^p, \lambda^a)`
of the GPU capacity, power and absorption rows, a pattern's Lagrangian cost is a sum over the slots
it takes of :math:`h_{st} + w\,e_{st}` with the *hold* part
:math:`h_{st} = P_j \lambda^p_{st} + n_j \lambda^c_{s t g_j}` (capacity and power see the whole
gang in every slot) and the *energy* part :math:`e_{st} = P_j (k_{st} - \mathrm{PUE}_{st}
\lambda^a_{st})` (:math:`k_{st}` = PUE × CI / 1000 [kg/kWh]) weighted by :math:`w = 1`, or
:math:`f_k` in the last slot. The cheapest pattern of each (job, site, :math:`k`) is a shortest
path over the states (slot, slot taken or free, runs started, slots taken) — the dynamic
programme :func:`piece_dp`, vectorised over jobs and sites. Pricing a machine schedule by a DP
over time slots is the classic pricing problem of time-indexed column generation for scheduling
(van den Akker, Hoogeveen & van de Velde, "Parallel machine scheduling by column generation",
Operations Research 47(6), 1999, doi:10.1287/opre.47.6.862).

**Bound.** The Lagrangian relaxation of the capacity, power and absorption rows decomposes by
job: each takes its cheapest column under the multipliers — one-piece option, piece pattern, or
unplaced / deferred — so, for any :math:`\lambda \ge 0`,

.. math::

   L_{\mathrm{pieces}}(\lambda) = L(\lambda) + \sum_{j \text{ preemptible}}
   \min\bigl(0,\; \min_{p \ni j} \bar c_p(\lambda) - \min(\bar c_{c(j)}(\lambda), c^u_j)\bigr)

is a lower bound on the optimum over *every* plan whose preemptible jobs run in any pattern of
that set (weak duality: Geoffrion, "Lagrangean relaxation for integer programming", Math.
Programming Study 2, 1974, doi:10.1007/BFb0120690), where :math:`L` is
:func:`~carbonsched.plan.colgen.lagrangian_dual.lagrangian` (one piece only), :math:`\bar c_{c(j)}`
the cheapest one-piece option of the job's class and :math:`c^u_j` its unplaced cost. The DP
relaxes nothing the pattern set requires but the rule that every resumed piece does some work
(run time above its overhead) — a superset, so the bound stays valid. Since the direct MILP holds
a subset of these patterns (one per job, site and :math:`k`), the bound is also at most the
direct MILP's optimum. Column generation's other bounds (its master LP's value, the GPU-type split
MIPs, the repair MIP's dual bound) are over one-piece plans only and are not used when the
instance has preemptible jobs.

**Plan.** :func:`piece_phase` prices patterns under the best multipliers, adds them to
:attr:`PlanSets.patterns <carbonsched.plan.sets.PlanSets.patterns>` (the pool), and solves a
repair MIP (:func:`carbonsched.plan.model.build_model`) over the best plan's placements, the
preemptible jobs' best-priced one-piece options and every pattern of theirs, started from that
plan; the better of the two plans is kept.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import highspy
import numpy as np
import pandas as pd
import pulp

from carbonsched.plan.colgen.budget import plan_overhead_s
from carbonsched.plan.colgen.classes import Classes
from carbonsched.plan.colgen.lagrangian_dual import duals_from, lagrangian, multipliers
from carbonsched.plan.colgen.layout import Layout, usage
from carbonsched.plan.colgen.pricing import price, stack_options
from carbonsched.plan.colgen.state import ColgenState, Multipliers
from carbonsched.plan.colgen.status import add_note
from carbonsched.plan.gap import relative_gap, within_gap
from carbonsched.plan.highs import highs_with_start, reset_scheduler
from carbonsched.plan.local import movable, plan_arrays
from carbonsched.plan.model import build_model, integrality_issues, read_patterns, read_solution
from carbonsched.plan.result import PlanResult, PlanStatus, build_plan_result
from carbonsched.plan.sets import (
    SLOT,
    SLOT_MINUTES,
    PiecePatterns,
    PlanSets,
    option_costs,
    placement_positions,
)
from carbonsched.plan.slices import sliced_options

PIECE_SHARE = 0.15
"""Share of column generation's limit kept for the piece phase (pricing, the repair MIP) when
the instance has preemptible jobs. A design choice of this project, measured on 10k jobs × 16
sites × 72 h (BENCHMARKS.md section 17b). [-]"""
PIECE_MIN_S = 2.0
"""Least time the piece phase keeps, whatever the share. [s]"""
PIECE_S_PER_JOB = 4e-3
"""Time the piece phase keeps per preemptible job: its two DP passes (bound, moves) took 5-8 s
each for 2,930 jobs × 16 sites × 72 h on the shared 2-core machine at load average 15
(BENCHMARKS.md section 17b). [s]"""
PIECE_MAX_SHARE = 0.3
"""Most of the limit the piece phase keeps. [-]"""
REPAIR_OPTIONS_PER_JOB = 6
"""Best-priced one-piece options of each preemptible job in the piece repair MIP. [-]"""
PATTERNS_PER_JOB = 6
"""Priced piece patterns kept per preemptible job (the cheapest under the multipliers). [-]"""
CHUNK_JOBS = 64
"""Jobs priced per numpy block of the DP (memory: jobs × sites × pieces × slots per slot). [-]"""
REPAIR_CG_ROUNDS = 5
"""Rounds of column generation on the piece repair model's LP before its MIP. [-]"""
REPAIR_MIP_SHARE = 0.5
"""Share of the piece phase's time kept for the repair MIP itself. [-]"""
REPAIR_MAX_OPTIONS = 20_000
"""Largest piece repair MIP built, in one-piece options (about :data:`REPAIR_OPTIONS_PER_JOB`
+ 1 per job): above it the PuLP build alone would take most of the phase (5e-5 s per option,
:data:`carbonsched.plan.solve.BUILD_S_PER_OPTION`). [-]"""
BOUND_SHARE = 0.4
"""Share of the piece phase's time the bound may use for more than one multiplier set. [-]"""
RC_TOL_KG = 1e-9
"""A pattern prices out when its reduced cost is below minus this. [kg]"""
"""Jobs priced per numpy block of the DP (memory: jobs × sites × pieces × slots per slot). [-]"""


def piece_jobs(sets: PlanSets) -> np.ndarray:
    """Placeable jobs that may run in pieces (``max_pieces >= 2``) on the hourly grid, ``(P,)``.

    Empty on a sub-hour grid, where preemptible jobs are planned in one piece
    (:func:`carbonsched.plan.sets.enumerate_patterns`).
    """
    if sets.slot_minutes != SLOT_MINUTES:
        return np.zeros(0, dtype=np.int64)
    jobs = sets.placeable
    return np.array([j for j in jobs if sets.problem.jobs[int(j)].max_pieces >= 2],
                    dtype=np.int64)


def piece_reserve_s(sets: PlanSets, time_limit_s: float) -> float:
    """Seconds of column generation's limit kept for :func:`piece_phase` (0 without pieces).

    ``max(PIECE_MIN_S, PIECE_SHARE × limit, PIECE_S_PER_JOB × preemptible jobs)``, at most
    ``PIECE_MAX_SHARE × limit``. [s]
    """
    n = len(piece_jobs(sets))
    if not n:
        return 0.0
    want = max(PIECE_MIN_S, PIECE_SHARE * time_limit_s, PIECE_S_PER_JOB * n)
    return min(want, PIECE_MAX_SHARE * time_limit_s)


def piece_shape(sets: PlanSets, j: int, k: int) -> tuple[int, float, int]:
    """Slots, last-slot share and latest final slot of job ``j`` in ``k`` pieces.

    Returns
    -------
    n_slots, frac, last_slot
        ``ceil((duration + (k - 1) × overhead) / 60)`` slots [-], the share of the last one
        charged [-] and the latest slot the final one may be (ends by the deadline) [-].
    """
    job = sets.problem.jobs[int(j)]
    minutes = job.duration_minutes + (k - 1) * job.checkpoint_overhead_minutes
    n = -(-minutes // SLOT_MINUTES)
    frac = (minutes - SLOT_MINUTES * (n - 1)) / SLOT_MINUTES
    dl_slots = (job.deadline - sets.slot[0]) / SLOT
    last = int(np.floor(dl_slots - frac + 1e-9))
    return int(n), float(frac), min(last, sets.n_ext - 1)


def piece_dp(hold: np.ndarray, energy: np.ndarray, first: np.ndarray, last: np.ndarray,
             n_decide: int, n_slots: np.ndarray, frac: np.ndarray, k: int
             ) -> tuple[np.ndarray, np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
    """Cheapest ``k``-run pattern per job and site (dynamic programme over slots).

    States after slot ``t``: slot ``t`` taken (``IN``) or free (``OUT``), runs started
    ``r <= k`` and slots taken ``m <= n``. A run starts only from ``OUT`` (so runs are
    separated by at least one free slot), at or after ``first`` and before ``n_decide``; the
    job's ``n``-th slot, charged ``frac`` of its energy, is at most ``last``.

    Parameters
    ----------
    hold
        Cost of holding a slot (capacity and power multipliers), shape ``(B, S, T)``. [kg]
    energy
        Cost of a whole slot's energy, shape ``(B, S, T)``, ``+inf`` where the job may not run
        at the site. [kg]
    first, last
        First slot a run may start in and latest final slot, per job, ``(B,)``. [-]
    n_decide
        Runs start before this slot (the horizon); they may continue past it. [-]
    n_slots, frac
        Slots to take and the share of the last one charged, per job, ``(B,)``. [-]
    k
        Runs (pieces). [-]

    Returns
    -------
    best, best_t, history
        Cost ``(B, S)`` (``+inf`` where impossible), the final slot of the best pattern
        ``(B, S)`` and, per slot from ``min(first)``, the choices (``IN`` came by continuing;
        ``OUT`` came from ``IN``) that :func:`backtrack` reads.
    """
    n_b, n_s, n_t = energy.shape
    n_max = int(n_slots.max())
    inf = np.inf
    m_idx = np.arange(1, n_max + 1)
    w = np.where(m_idx[None, :] == n_slots[:, None], frac[:, None], 1.0)     # (B, n)
    beyond = m_idx[None, :] > n_slots[:, None]                                # (B, n)
    final = np.arange(n_max + 1)[None, :] == n_slots[:, None]                 # (B, n + 1)
    cur_in = np.full((n_b, n_s, k + 1, n_max + 1), inf)
    cur_out = np.full_like(cur_in, inf)
    cur_out[:, :, 0, 0] = 0.0
    best = np.full((n_b, n_s), inf)
    best_t = np.full((n_b, n_s), -1, dtype=np.int64)
    bi = np.arange(n_b)
    t_lo = int(first.min())
    t_hi = int(min(n_t, max(int(last.max()) + 1, 0)))
    history = []
    for t in range(t_lo, t_hi):
        c = hold[:, :, t, None] + energy[:, :, t, None] * w[:, None, :]      # (B, S, n)
        c = np.where(beyond[:, None, :] | ~np.isfinite(c), inf, c)[:, :, None, :]
        cont = cur_in[..., :-1] + c
        new = np.full_like(cont, inf)
        if t < n_decide:
            new[:, :, 1:, :] = cur_out[:, :, :-1, :-1] + c
            new[t < first] = inf
        took_cont = cont <= new
        nxt_in = np.full_like(cur_in, inf)
        nxt_in[..., 1:] = np.where(took_cont, cont, new)
        # the final slot must be early enough to end by the deadline
        kill = (t > last)[:, None] & final
        nxt_in = np.where(kill[:, None, None, :], inf, nxt_in)
        from_in = cur_in < cur_out
        nxt_out = np.where(from_in, cur_in, cur_out)
        history.append((took_cont, from_in))
        done = nxt_in[bi, :, k, n_slots]                                     # (B, S)
        better = done < best
        best = np.where(better, done, best)
        best_t = np.where(better, t, best_t)
        cur_in, cur_out = nxt_in, nxt_out
    return best, best_t, history


def backtrack(history: list[tuple[np.ndarray, np.ndarray]], t_lo: int, b: int, s: int,
              t_end: int, k: int, n: int) -> np.ndarray:
    """Taken slots, in time order, of the pattern :func:`piece_dp` ended at ``t_end``.

    Parameters
    ----------
    history
        :func:`piece_dp`'s choices; ``t_lo`` is the slot of its first entry.
    b, s
        Job (in the DP's block) and site position.
    t_end, k, n
        Final slot, runs and slots of the pattern.
    """
    t, r, m, state_in = t_end, k, n, True
    slots = []
    while m > 0:
        took_cont, from_in = history[t - t_lo]
        if state_in:
            slots.append(t)
            if took_cont[b, s, r, m - 1]:
                m -= 1
            else:
                r, m, state_in = r - 1, m - 1, False
        else:
            state_in = bool(from_in[b, s, r, m])
        t -= 1
    return np.array(slots[::-1], dtype=np.int64)


def slot_rates(sets: PlanSets, jobs: np.ndarray, lam: Multipliers | None
               ) -> tuple[np.ndarray, np.ndarray]:
    """Hold and energy costs of each job at each site and slot, ``(P, S, T)`` each. [kg]

    ``hold = P_j λp + n_j λc[g_j]``, ``energy = P_j (PUE × CI / 1000 − PUE × λa)`` (``+inf``
    at sites the job may not use); with ``lam`` None the multipliers are 0 (grid emissions).
    """
    kw = sets.job_kw[jobs][:, None, None]
    cost = sets.cost_per_kwh[None]
    if lam is None:
        hold = np.zeros((len(jobs),) + sets.pue.shape)
        energy = kw * cost
    else:
        lam_c, lam_p, lam_a = lam
        hold = (kw * lam_p[None]
                + sets.job_gpus[jobs][:, None, None] * np.moveaxis(
                    lam_c[:, :, sets.job_gtype[jobs]], 2, 0))
        energy = kw * (cost - sets.pue[None] * lam_a[None])
    energy = np.where(sets.job_sites[jobs][:, :, None], energy, np.inf)
    return hold, energy


@dataclass
class PricedPieces:
    """The cheapest piece pattern of each preemptible job at each site under multipliers.

    Attributes
    ----------
    jobs
        Job positions, ``(P,)``.
    cost
        Lagrangian cost of the cheapest pattern over ``k = 2 .. max_pieces``, ``(P, S)``,
        ``+inf`` where none fits. [kg]
    k, t_end
        Its piece count and final slot, ``(P, S)``.
    """

    jobs: np.ndarray
    cost: np.ndarray
    k: np.ndarray
    t_end: np.ndarray


def price_pieces(sets: PlanSets, lam: Multipliers | None, jobs: np.ndarray | None = None,
                 keep: int = 0) -> tuple[PricedPieces, PiecePatterns]:
    """Price the piece patterns of ``jobs`` (default :func:`piece_jobs`) under ``lam``.

    Parameters
    ----------
    sets
        Compiled sets.
    lam
        Multipliers ``(λc (S, T, G), λp (S, T), λa (S, T))`` [kg per GPU-hour, per kWh], or
        None for grid emissions only.
    jobs
        Preemptible job positions.
    keep
        Patterns to return per job (its cheapest (site, ``k``) pairs whose pieces each do some
        work), 0 for none.

    Returns
    -------
    PricedPieces, PiecePatterns
        The per-site minima, and the kept patterns with their grid emissions as ``cost_kg``.
    """
    jobs = piece_jobs(sets) if jobs is None else np.asarray(jobs, dtype=np.int64)
    n_s = sets.pue.shape[0]
    best = np.full((len(jobs), n_s), np.inf)
    best_k = np.zeros((len(jobs), n_s), dtype=np.int64)
    best_te = np.full((len(jobs), n_s), -1, dtype=np.int64)
    cand: list[list[tuple[float, int, int, np.ndarray]]] = [[] for _ in jobs]
    k_max = np.array([sets.problem.jobs[int(j)].max_pieces for j in jobs], dtype=np.int64)
    for k in range(2, int(k_max.max(initial=1)) + 1):
        rows = np.flatnonzero(k_max >= k)
        if not len(rows):
            break
        shape = np.array([piece_shape(sets, int(jobs[r]), k) for r in rows]).reshape(-1, 3)
        n_k, f_k, last_k = shape[:, 0].astype(np.int64), shape[:, 1], shape[:, 2].astype(
            np.int64)
        first = sets.job_first[jobs[rows]]
        fits = last_k - first + 1 >= n_k + k - 1
        rows, n_k, f_k, last_k, first = (a[fits] for a in (rows, n_k, f_k, last_k, first))
        order = np.argsort(n_k, kind="stable")
        for c0 in range(0, len(order), CHUNK_JOBS):
            blk = order[c0: c0 + CHUNK_JOBS]
            r = rows[blk]
            hold, energy = slot_rates(sets, jobs[r], lam)
            val, te, hist = piece_dp(hold, energy, first[blk], last_k[blk], sets.n_horizon,
                                     n_k[blk], f_k[blk], k)
            better = val < best[r]
            best[r] = np.where(better, val, best[r])
            best_k[r] = np.where(better, k, best_k[r])
            best_te[r] = np.where(better, te, best_te[r])
            if keep <= 0:
                continue
            t_lo = int(first[blk].min())
            for i, row in enumerate(r):
                for s in np.flatnonzero(np.isfinite(val[i])):
                    cand[row].append((float(val[i, s]), int(s), k,
                                      backtrack(hist, t_lo, i, int(s), int(te[i, s]), k,
                                                int(n_k[blk][i]))))
    priced = PricedPieces(jobs, best, best_k, best_te)
    return priced, _patterns_of(sets, jobs, cand, keep)


def _patterns_of(sets: PlanSets, jobs: np.ndarray,
                 cand: list[list[tuple[float, int, int, np.ndarray]]], keep: int
                 ) -> PiecePatterns:
    """The ``keep`` cheapest valid patterns per job, as :class:`PiecePatterns`."""
    out_j, out_s, out_c, out_p = [], [], [], []
    cost = sets.cost_per_kwh
    for j, cs in zip(jobs.tolist(), cand, strict=True):
        job = sets.problem.jobs[j]
        o = job.checkpoint_overhead_minutes
        kw = float(sets.job_kw[j])
        kept = 0
        for _v, s, k, taken in sorted(cs, key=lambda c: c[0]):
            if kept >= keep:
                break
            n, frac, _last = piece_shape(sets, j, k)
            runs = np.split(taken, np.flatnonzero(np.diff(taken) > 1) + 1)
            pieces = []
            for q, r in enumerate(runs):
                run_min = SLOT_MINUTES * len(r) if q < len(runs) - 1 else \
                    SLOT_MINUTES * (len(r) - 1) + int(round(frac * SLOT_MINUTES))
                pieces.append((int(r[0]), int(run_min), o if q else 0))
            if len(pieces) != k or len(taken) != n or any(m <= ov for _t, m, ov in pieces):
                continue
            w = np.ones(n)
            w[-1] = frac
            out_j.append(j)
            out_s.append(s)
            out_c.append(float(kw * (cost[s, taken] * w).sum() * sets.slot_hours))
            out_p.append(pieces)
            kept += 1
    return PiecePatterns(np.array(out_j, dtype=np.int64), np.array(out_s, dtype=np.int64),
                         np.array(out_c, dtype=float), out_p)


def piece_lagrangian(sets: PlanSets, lay: Layout, cls: Classes, lam: Multipliers,
                     priced: PricedPieces | None = None) -> tuple[float, np.ndarray]:
    r"""The Lagrangian bound over piece plans at multipliers ``lam`` (module docstring).

    Parameters
    ----------
    sets, lay, cls
        Compiled sets, the master's row layout and the job classes.
    lam
        Non-negative multipliers of the capacity ``(S, T, G)``, power and absorption
        ``(S, T)`` rows. [kg per GPU-hour, kg per kWh]
    priced
        The piece prices under ``lam`` (default: computed).

    Returns
    -------
    value, saving
        :math:`L_{\mathrm{pieces}}(\lambda)` [kg] — a valid lower bound on every plan whose
        preemptible jobs run whole or in patterns of the set the module docstring defines —
        and each preemptible job's term :math:`\min(0, \ldots) \le 0`, ``(P,)``. [kg]
    """
    lam_c, lam_p, lam_a = lam
    value = lagrangian(sets, lay, lam_c, lam_p, lam_a)[0]
    if priced is None:
        priced, _ = price_pieces(sets, lam)
    jobs = priced.jobs
    if not len(jobs):
        return float(value), np.zeros(0)
    c = cls.of_job[jobs]
    rc, _s, _t = price(sets, lay, duals_from(lay, lam_c, lam_p, lam_a), lay.reps, k=1)
    one = np.minimum(rc[c, 0], sets.unplaced_cost[lay.reps[c]].astype(float))
    saving = np.minimum(0.0, priced.cost.min(axis=1, initial=np.inf) - one)
    return float(value + saving.sum()), saving


def append_patterns(sets: PlanSets, new: PiecePatterns) -> np.ndarray:
    """Add ``new`` patterns not already held to :attr:`PlanSets.patterns` (the column pool).

    Existing positions are kept (plans refer to patterns by position).

    Returns
    -------
    numpy.ndarray
        Positions in ``sets.patterns`` of every pattern of ``new`` (added or already held).
    """
    pats = sets.patterns
    have = {} if pats is None else {
        (int(j), int(s), tuple(p)): i
        for i, (j, s, p) in enumerate(zip(pats.job, pats.site, pats.pieces, strict=True))}
    pos, add = [], []
    for i, (j, s, p) in enumerate(zip(new.job, new.site, new.pieces, strict=True)):
        key = (int(j), int(s), tuple(p))
        if key not in have:
            have[key] = (0 if pats is None else len(pats)) + len(add)
            add.append(i)
        pos.append(have[key])
    if add:
        idx = np.array(add, dtype=np.int64)
        old = pats if pats is not None else PiecePatterns(
            np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), [])
        sets.patterns = PiecePatterns(
            np.concatenate([old.job, new.job[idx]]), np.concatenate([old.site, new.site[idx]]),
            np.concatenate([old.cost_kg, new.cost_kg[idx]]),
            list(old.pieces) + [new.pieces[i] for i in add])
    return np.array(pos, dtype=np.int64)


@dataclass
class PiecePhase:
    """What :func:`piece_phase` did, for the plan note.

    Attributes
    ----------
    bound
        Best Lagrangian bound over piece plans (``-inf`` if none). [kg]
    bound_from
        Which multipliers gave it.
    one_piece_bound
        Column generation's bound over one-piece plans (not valid with pieces). [kg]
    patterns
        Patterns priced and added to the pool.
    repaired
        Whether the repair MIP's plan replaced the incumbent.
    note
        One clause for the plan note.
    """

    bound: float
    bound_from: str
    one_piece_bound: float | None
    patterns: int
    repaired: bool
    note: str


def piece_phase(sets: PlanSets, lay: Layout, cls: Classes,
                multipliers: list[tuple[str, Multipliers]], plan: PlanResult,
                one_piece_bound: float | None, seconds: float, mip_gap: float,
                threads: int = 1) -> tuple[PlanResult, PiecePhase]:
    """Bound over piece plans, priced patterns and a piece repair MIP after column generation.

    Parameters
    ----------
    sets, lay, cls
        Compiled sets (their ``patterns`` gain the priced patterns), the master's row layout
        and the job classes.
    multipliers
        ``(label, (λc, λp, λa))`` candidates (the best bound's, the refined ones, the last
        master's); the bound is the best :func:`piece_lagrangian` over them.
    plan
        Column generation's best (one-piece) plan.
    one_piece_bound
        Its bound over one-piece plans, for the note. [kg]
    seconds
        Budget of the phase. [s]
    mip_gap
        Relative gap at which the repair MIP may stop. [-]
    threads
        HiGHS threads.

    Returns
    -------
    PlanResult, PiecePhase
        The better of ``plan`` and the repair MIP's plan (status and solver record left to the
        caller), and what the phase did.
    """
    t0 = time.perf_counter()
    jobs = piece_jobs(sets)
    best_v, best_name, best_lam = -np.inf, "none", None
    # the one-piece Lagrangian orders the candidates; the piece term is priced for as many
    # as the time allows (at least one)
    cands = []
    for name, lam in multipliers:
        if lam is not None:
            cands.append((lagrangian(sets, lay, *lam)[0], name, lam))
    cands.sort(key=lambda c: -c[0])
    new_pats = 0
    n_repair = len(sets.placeable) * (REPAIR_OPTIONS_PER_JOB + 1)
    keep = PATTERNS_PER_JOB if n_repair <= REPAIR_MAX_OPTIONS else 0   # the MIP's columns
    for i, (_v1, name, lam) in enumerate(cands):
        if i and time.perf_counter() - t0 > BOUND_SHARE * seconds:
            break
        # one DP pass prices the bound's piece term and the patterns added to the pool
        priced, pats = price_pieces(sets, lam, jobs, keep=keep if i == 0 else 0)
        v, _ = piece_lagrangian(sets, lay, cls, lam, priced)
        if i == 0:
            new_pats = len(pats)
            append_patterns(sets, pats)
        if v > best_v:
            best_v, best_name, best_lam = v, name, lam
    t_bound = time.perf_counter() - t0
    repaired = False
    moved = 0
    whys = []
    risky = (np.isfinite(sets.commit_limit_kw).any() if sets.commit_limit_kw.size else False) \
        or bool(sliced_options(sets, sets.options).any())
    left = seconds - (time.perf_counter() - t0)
    if len(jobs) and not risky and left > 0.2:
        share = 0.5 if n_repair <= REPAIR_MAX_OPTIONS else 1.0   # the rest for the MIP
        # the moves' plan is built after their last block: its time is kept out of theirs
        alt, moved = insert_pieces(sets, plan, jobs, share * left - plan_overhead_s(sets))
        if alt is not None and alt.totals["objective"] < plan.totals["objective"] - 1e-9:
            plan, repaired = alt, True
        else:
            moved = 0
    elif risky:
        whys.append("no piece moves: the instance has grid-flexibility commitments or "
                    "shared GPUs (the piece repair MIP models them)")
    left = seconds - (time.perf_counter() - t0)
    if (len(jobs) and sets.patterns is not None and len(sets.patterns) and left > 0.5
            and n_repair <= REPAIR_MAX_OPTIONS):
        alt, why = repair_pieces(sets, lay, cls, best_lam, plan, jobs, left, mip_gap, threads)
        if why:
            whys.append(why)
        if alt is not None and alt.totals["objective"] < plan.totals["objective"] - 1e-9:
            plan, repaired = alt, True
    elif len(jobs) and n_repair > REPAIR_MAX_OPTIONS:
        whys.append(f"no piece repair MIP: {len(sets.placeable)} jobs, above the "
                    f"{REPAIR_MAX_OPTIONS // (REPAIR_OPTIONS_PER_JOB + 1)} it is built for")
    elif len(jobs):
        whys.append(f"no piece repair MIP: {max(left, 0):.1f} s left")
    why = "; ".join(whys)
    n_runs = sum(1 for p in plan.placements if p.pieces > 1 and p.piece == 0)
    whys.append(f"piece phase {time.perf_counter() - t0:.1f} s of {max(seconds, 0):.1f} s "
                f"(bound {t_bound:.1f} s)")
    why = "; ".join(whys)
    note = (f"piece patterns: {len(jobs)} preemptible job(s); {new_pats} pattern(s) priced "
            f"under the {best_name} multipliers, "
            f"{0 if sets.patterns is None else len(sets.patterns)} in the pool; bound over "
            "piece plans " + (f"{best_v:.3f} kg (Lagrangian, {best_name} multipliers)"
                              if np.isfinite(best_v) else "none")
            + ("" if one_piece_bound is None else
               f", the one-piece bound {one_piece_bound:.3f} kg is not used")
            + f"; {n_runs} job(s) run in pieces"
            + (f"; {moved} job(s) moved into pieces around the rest of the plan" if moved
               else "")
            + ("; the piece phase improved the plan" if repaired else "")
            + (f"; {why}" if why else ""))
    return plan, PiecePhase(best_v, best_name, one_piece_bound, new_pats, repaired, note)


def repair_pieces(sets: PlanSets, lay: Layout, cls: Classes, lam: Multipliers | None,
                  plan: PlanResult, jobs: np.ndarray, seconds: float, mip_gap: float,
                  threads: int = 1) -> tuple[PlanResult | None, str]:
    """Repair MIP over the plan's placements, the preemptible jobs' columns and their patterns.

    The model (:func:`~carbonsched.plan.model.build_model`) holds every one-piece placement of
    ``plan`` (each job may keep it or leave), for each preemptible job and each job the plan
    leaves out :data:`REPAIR_OPTIONS_PER_JOB` best-priced one-piece options under ``lam``, and
    every pattern in :attr:`PlanSets.patterns` of the jobs modelled; HiGHS starts from
    ``plan``.

    Returns
    -------
    PlanResult or None, str
        The MIP's plan (None when it found none) and a clause for the note ("" if fine).
    """
    t0 = time.perf_counter()
    placed = placement_positions(sets, [p for p in plan.placements if p.pieces == 1])
    in_pieces = plan_patterns(sets, plan)
    opts = [placed]
    # the preemptible jobs and the jobs the plan leaves out (pieces may make room for them)
    free = np.union1d(jobs, np.setdiff1d(sets.placeable, np.concatenate(
        [placed[:, 0], np.array(sorted(in_pieces), dtype=np.int64)])))
    if lam is not None and len(free):
        reps = lay.reps[np.unique(cls.of_job[free])]
        rc, ss, tt = price(sets, lay, duals_from(lay, *lam), reps, k=REPAIR_OPTIONS_PER_JOB)
        by_rep = stack_options(reps, rc, ss, tt, np.isfinite(rc))
        rep_of = lay.reps[cls.of_job[free]]
        for j, r in zip(free.tolist(), rep_of.tolist(), strict=True):
            o = by_rep[by_rep[:, 0] == r].copy()
            o[:, 0] = j
            opts.append(o)
    pats = sets.patterns
    with_pat = np.unique(pats.job) if pats is not None else np.zeros(0, np.int64)
    # a preemptible job with patterns but neither a placement nor a priced option: its
    # cheapest one-piece options keep it in the model
    opts = np.unique(np.concatenate(opts), axis=0)
    missing = np.setdiff1d(with_pat, opts[:, 0])
    if len(missing):
        mine = sets.options[np.isin(sets.options[:, 0], missing)]
        opts = np.unique(np.concatenate([opts, mine]), axis=0)
    rounds = 0
    t_round = 0.0
    while True:
        t_b = time.perf_counter()
        m = build_model(sets, opts)
        left = seconds - (time.perf_counter() - t0)
        # column generation on the repair model's LP: its duals price new patterns
        if (rounds >= REPAIR_CG_ROUNDS or not len(jobs)
                or left < REPAIR_MIP_SHARE * seconds + t_round):
            break
        lam_lp, pi = lp_duals(m, threads, max(left - REPAIR_MIP_SHARE * seconds, 0.1))
        if lam_lp is None:
            break
        priced, pats = price_pieces(sets, lam_lp, jobs, keep=PATTERNS_PER_JOB)
        rc = priced.cost.min(axis=1, initial=np.inf) - pi[priced.jobs]
        pats = _subset(pats, np.isin(pats.job, priced.jobs[rc < -RC_TOL_KG]))
        before = len(sets.patterns) if sets.patterns is not None else 0
        append_patterns(sets, pats)
        rounds += 1
        t_round = time.perf_counter() - t_b
        if (len(sets.patterns) if sets.patterns is not None else 0) == before:
            break
    if left < 0.2:
        return None, f"no piece repair MIP: its build took {time.perf_counter() - t0:.1f} s"
    start = {}
    pos = {tuple(o): i for i, o in enumerate(m.options.tolist())}
    on = {int(j): pos.get((int(j), int(s), int(t))) for j, s, t in placed}
    for i, x in enumerate(m.x):
        start[x] = 1.0 if on.get(int(m.options[i, 0])) == i else 0.0
    held = np.flatnonzero(np.isin(sets.patterns.job, m.options[:, 0]))
    z_of = {int(p): i for i, p in enumerate(held.tolist())} if len(m.z) else {}
    for z in m.z:
        start[z] = 0.0
    for p in in_pieces.values():
        if p in z_of:
            start[m.z[z_of[p]]] = 1.0
    for j, u in m.u.items():
        start[u] = 0.0 if (on.get(j) is not None or in_pieces.get(j) in z_of) else 1.0
    cmd = highs_with_start(start, msg=False, timeLimit=max(left, 0.1), gapRel=mip_gap,
                           threads=threads)
    for attempt in (1, 2):
        m.lp.solve(cmd)
        if (attempt == 1 and m.lp.solverModel.getModelStatus()
                == highspy.HighsModelStatus.kNotset):
            reset_scheduler()
            continue
        break
    h = m.lp.solverModel
    if h.getInfo().primal_solution_status != 2 or integrality_issues(m):
        status = h.modelStatusToString(h.getModelStatus())
        return None, f"the piece repair MIP found no plan ({status})"
    chosen, alloc = read_solution(m)
    res = build_plan_result(sets, chosen, alloc, PlanStatus.FEASIBLE, plan.solver,
                            chosen_patterns=read_patterns(m))
    return res, ""


def plan_patterns(sets: PlanSets, plan: PlanResult) -> dict[int, int]:
    """Pattern position in :attr:`PlanSets.patterns` of each job ``plan`` runs in pieces.

    Jobs whose pieces match no pattern of the pool are left out of the map.
    """
    jpos = {jb.id: k for k, jb in enumerate(sets.problem.jobs)}
    spos = {name: i for i, name in enumerate(sets.site)}
    t0 = sets.slot[0]
    runs: dict[int, list] = {}
    for p in plan.placements:
        if p.pieces > 1 and p.job_id in jpos:
            runs.setdefault(jpos[p.job_id], []).append(p)
    pats = sets.patterns
    if not runs or pats is None:
        return {}
    index = {(int(j), int(s), tuple(pc)): i
             for i, (j, s, pc) in enumerate(zip(pats.job, pats.site, pats.pieces, strict=True))}
    out = {}
    for j, ps in runs.items():
        ps = sorted(ps, key=lambda p: p.start)
        key = (j, spos.get(ps[0].site, -1),
               tuple((int(round((p.start - t0) / SLOT)), int(round((p.end - p.start)
                                                                  / pd.Timedelta(minutes=1))),
                      int(p.overhead_minutes)) for p in ps))
        if key in index:
            out[j] = index[key]
    return out


def _subset(p: PiecePatterns, keep: np.ndarray) -> PiecePatterns:
    """The patterns of ``p`` where ``keep`` (boolean ``(len(p),)``)."""
    idx = np.flatnonzero(keep)
    return PiecePatterns(p.job[idx], p.site[idx], p.cost_kg[idx], [p.pieces[i] for i in idx])


def lp_duals(m, threads: int, seconds: float
             ) -> tuple[Multipliers | None, np.ndarray]:
    """Multipliers and assignment duals of the LP relaxation of a built model.

    Parameters
    ----------
    m
        A :class:`~carbonsched.plan.model.PlanModel`.
    threads
        HiGHS threads.
    seconds
        Time limit of the LP. [s]

    Returns
    -------
    multipliers, pi
        ``(λc (S, T, G), λp (S, T), λa (S, T))`` = ``max(0, -dual)`` of the capacity, power
        and absorption rows [kg per GPU-hour, kg per kWh] (0 where a row was left out), and
        the assignment rows' duals per job ``(J,)`` [kg]; ``(None, empty)`` when the LP was
        not solved to optimality.
    """
    sets = m.sets
    n_s, n_t = sets.pue.shape
    lam_c = np.zeros((n_s, n_t, len(sets.gpu_type)))
    lam_p = np.zeros((n_s, n_t))
    lam_a = np.zeros((n_s, n_t))
    pi = np.zeros(len(sets.job_gpus))
    m.lp.solve(pulp.HiGHS(mip=False, msg=False, timeLimit=seconds, threads=threads))
    if m.lp.solverModel.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return None, pi
    for c in m.lp.constraints():
        name, d = c.name, c.pi or 0.0
        head, _, rest = name.partition("_")
        if name.startswith("assign"):
            pi[int(name[6:])] = d
        elif head.startswith("cap") and rest:
            s_, t_, g_ = (int(x) for x in (head[3:],) + tuple(rest.split("_")))
            lam_c[s_, t_, g_] = max(0.0, -d)
        elif head.startswith("pow"):
            lam_p[int(head[3:]), int(rest)] = max(0.0, -d)
        elif head.startswith("absorb"):
            lam_a[int(head[6:]), int(rest)] = max(0.0, -d)
    return (lam_c, lam_p, lam_a), pi


def insert_pieces(sets: PlanSets, plan: PlanResult, jobs: np.ndarray, seconds: float
                  ) -> tuple[PlanResult | None, int]:
    """Move preemptible jobs into piece patterns that fit around the rest of ``plan``.

    A large-neighbourhood step on piece columns: for each preemptible job (placed whole, or
    left out), the cheapest pattern (:func:`piece_dp` on grid emissions, ``k = 2 ..
    max_pieces``) among the slots where its gang and power still fit beside every other
    placement and the inference of ``plan`` (running work is already off the capacities); if
    it costs less than the job's placement (or its unplaced cost), the job moves to it. Jobs
    are priced in blocks against the usage at the block's start and each move is re-checked
    against the usage at its turn. Absorbed surplus is not priced (the moves are then kept
    only when the exact objective of the whole plan falls, by the caller).

    Parameters
    ----------
    sets
        Compiled sets; the patterns moved to are added to ``sets.patterns``.
    plan
        A plan of one-piece placements.
    jobs
        Preemptible job positions.
    seconds
        Budget; blocks not priced in it are left as they are. [s]

    Returns
    -------
    PlanResult or None, int
        The plan with the moves (None when nothing moved or ``plan`` has pieces) and the
        number of jobs moved.
    """
    t0 = time.perf_counter()
    if not len(jobs) or not movable(sets, plan):
        return None, 0
    chosen, alloc = plan_arrays(sets, plan)
    n_s, n_t = sets.pue.shape
    g_used, kw_used = usage(sets, chosen, np.ones(len(chosen), dtype=np.int64))
    for d, s_ in zip(*np.nonzero(alloc), strict=True):
        for t in sets.inf_slots(int(d)):
            g_used[s_, t, sets.inf_gtype[d]] += alloc[d, s_]
            kw_used[s_, t] += alloc[d, s_] * sets.inf_kw_per_gpu[d]
    cap_g = sets.gpu_cap.astype(float)
    cap_kw = sets.power_rhs_kw.astype(float)
    row_of = {int(j): i for i, j in enumerate(chosen[:, 0].tolist())}
    cur = np.where(np.isin(jobs, chosen[:, 0]), 0.0, sets.unplaced_cost[jobs])
    placed_rows = np.array([row_of.get(int(j), -1) for j in jobs])
    have = placed_rows >= 0
    cur[have] = option_costs(sets, chosen[placed_rows[have]])
    keep = np.ones(len(chosen), dtype=bool)
    moves: list[tuple[int, int, list[tuple[int, int, int]]]] = []
    for c0 in range(0, len(jobs), CHUNK_JOBS):
        if time.perf_counter() - t0 > seconds:
            break
        blk = np.arange(c0, min(c0 + CHUNK_JOBS, len(jobs)))
        jb = jobs[blk]
        # own usage of each job's current placement, given back before pricing it
        own_g = np.zeros((len(blk), n_s, n_t))
        own_kw = np.zeros((len(blk), n_s, n_t))
        for i, r in enumerate(placed_rows[blk]):
            if r >= 0:
                j, s_, t = chosen[r]
                d = int(sets.job_dur[j])
                own_g[i, s_, t: t + d] = sets.job_gpus[j]
                own_kw[i, s_, t: t + d] = sets.job_kw[j]
        free_g = cap_g[:, :, sets.job_gtype[jb]].transpose(2, 0, 1) \
            - g_used[:, :, sets.job_gtype[jb]].transpose(2, 0, 1) + own_g
        free_kw = cap_kw[None] - kw_used[None] + own_kw
        fits = ((free_g >= sets.job_gpus[jb][:, None, None])
                & (free_kw >= sets.job_kw[jb][:, None, None] - 1e-9))
        hold = np.where(fits, 0.0, np.inf)
        _h, energy = slot_rates(sets, jb, None)
        best = np.full(len(blk), np.inf)
        best_pat: list = [None] * len(blk)
        k_max = np.array([sets.problem.jobs[int(j)].max_pieces for j in jb])
        for k in range(2, int(k_max.max()) + 1):
            rows = np.flatnonzero(k_max >= k)
            shape = np.array([piece_shape(sets, int(jb[r]), k) for r in rows]).reshape(-1, 3)
            n_k = shape[:, 0].astype(np.int64)
            f_k = shape[:, 1]
            last_k = shape[:, 2].astype(np.int64)
            first = sets.job_first[jb[rows]]
            ok = last_k - first + 1 >= n_k + k - 1
            rows, n_k, f_k, last_k, first = (a[ok] for a in (rows, n_k, f_k, last_k, first))
            if not len(rows):
                continue
            val, te, hist = piece_dp(hold[rows], energy[rows], first, last_k, sets.n_horizon,
                                     n_k, f_k, k)
            for i, r in enumerate(rows):
                s_ = int(np.argmin(val[i]))
                if val[i, s_] < best[r] - 1e-12 and np.isfinite(val[i, s_]):
                    taken = backtrack(hist, int(first.min()), i, s_, int(te[i, s_]), k,
                                      int(n_k[i]))
                    pieces = _pieces_of(taken, float(f_k[i]),
                                        sets.problem.jobs[int(jb[r])]
                                        .checkpoint_overhead_minutes)
                    if pieces is not None and len(pieces) == k:
                        best[r] = val[i, s_]
                        best_pat[r] = (s_, pieces, taken)
        for i in np.argsort(best - cur[blk]):
            j = int(jb[i])
            if best_pat[i] is None or best[i] >= cur[blk][i] - 1e-9:
                continue
            s_, pieces, taken = best_pat[i]
            g = sets.job_gtype[j]
            r = placed_rows[blk][i]
            own_g1 = np.zeros(n_t)
            own_kw1 = np.zeros(n_t)
            if r >= 0 and chosen[r, 1] == s_:
                own_g1 = own_g[i, s_]
                own_kw1 = own_kw[i, s_]
            if ((cap_g[s_, taken, g] - g_used[s_, taken, g] + own_g1[taken]
                 < sets.job_gpus[j]).any()
                    or (cap_kw[s_, taken] - kw_used[s_, taken] + own_kw1[taken]
                        < sets.job_kw[j] - 1e-9).any()):
                continue                       # an earlier move of the block took the room
            if r >= 0:
                _j, s0, t_0 = chosen[r]
                d = int(sets.job_dur[j])
                g_used[s0, t_0: t_0 + d, g] -= sets.job_gpus[j]
                kw_used[s0, t_0: t_0 + d] -= sets.job_kw[j]
                keep[r] = False
            g_used[s_, taken, g] += sets.job_gpus[j]
            kw_used[s_, taken] += sets.job_kw[j]
            moves.append((j, s_, pieces))
    if not moves:
        return None, 0
    new = PiecePatterns(np.array([m[0] for m in moves], dtype=np.int64),
                        np.array([m[1] for m in moves], dtype=np.int64),
                        np.array([_pattern_cost(sets, m[0], m[1], m[2]) for m in moves]),
                        [m[2] for m in moves])
    pos = append_patterns(sets, new)
    res = build_plan_result(sets, chosen[keep], alloc, PlanStatus.FEASIBLE, plan.solver,
                            chosen_patterns=pos)
    return res, len(moves)


def _pieces_of(taken: np.ndarray, frac: float, overhead_min: int
               ) -> list[tuple[int, int, int]] | None:
    """``(start, minutes, overhead)`` runs of taken slots, or None if a piece does no work."""
    runs = np.split(taken, np.flatnonzero(np.diff(taken) > 1) + 1)
    pieces = []
    for q, r in enumerate(runs):
        run_min = SLOT_MINUTES * len(r) if q < len(runs) - 1 else \
            SLOT_MINUTES * (len(r) - 1) + int(round(frac * SLOT_MINUTES))
        pieces.append((int(r[0]), int(run_min), overhead_min if q else 0))
    if any(m <= ov for _t, m, ov in pieces):
        return None
    return pieces


def _pattern_cost(sets: PlanSets, j: int, s: int, pieces: list[tuple[int, int, int]]
                  ) -> float:
    """Grid emissions of a pattern (its last slot charged its share), as ``cost_kg``. [kg]"""
    cost = sets.cost_per_kwh
    total = 0.0
    for t, minutes, _o in pieces:
        n = -(-minutes // SLOT_MINUTES)
        w = np.ones(n)
        w[-1] = (minutes - SLOT_MINUTES * (n - 1)) / SLOT_MINUTES
        total += float((cost[s, t: t + n] * w).sum())
    return float(sets.job_kw[j]) * total * sets.slot_hours


FINISH_S = 0.5
"""Fewest seconds of the limit the piece phase leaves for what follows it (:func:`finish_s`). [s]"""

FINISH_S_PER_10K = 1.0
"""Seconds per 10,000 placeable jobs the piece phase leaves for what follows it: the solve's
recount of the plan (:func:`carbonsched.plan.solve.check_result`) and its hand-over. Measured
on the 50k × 32 × 72 h rolling step, seed 0: the phase ended 1.4 s past the limit and the solve
returned 4.2 s later (305.6 s on a 300 s limit; BENCHMARKS.md section 17d). [s]"""


def finish_s(sets: PlanSets) -> float:
    """Seconds the piece phase leaves at the end of the limit. [s]

    ``max(FINISH_S, FINISH_S_PER_10K × placeable jobs / 10,000)``.
    """
    return max(FINISH_S, FINISH_S_PER_10K * len(sets.placeable) / 10_000)


def finish_pieces(states: list[ColgenState], plan: PlanResult, time_limit_s: float
                  ) -> PlanResult:
    """The piece phase after column generation's paths: bound, patterns, repair MIP, status.

    Runs :func:`piece_phase` with the multipliers of every path (the best bound's, the refined
    ones and the last master's) in the time left of ``time_limit_s``, then replaces the
    record's bound by the Lagrangian bound over piece plans (column generation's own bounds
    cover one-piece plans only), recomputes the gap and sets the status: ``optimal`` when the
    gap is within ``mip_gap`` (the bound is proven for any multipliers), ``heuristic`` for an
    unproven greedy plan left as it was, ``feasible`` otherwise.

    Parameters
    ----------
    states
        The paths' states, in the order they ran (the last one's record is filled).
    plan
        Column generation's plan.
    time_limit_s
        The whole solve's limit, counted from ``states[-1].started``. [s]

    Returns
    -------
    PlanResult
        The plan, its record holding the bound over piece plans.
    """
    st = states[-1]
    sets, rec = st.sets, st.rec
    lams: list[tuple[str, Multipliers]] = []
    for i, s in enumerate(states):
        path = "" if len(states) == 1 else ("short path's " if i == 0 else "master path's ")
        lams += [(path + "best-bound", s.best_lam), (path + "refined", s.refined_lam)]
        if s.good is not None and s.lay is not None:
            lams.append((path + "last master's", multipliers(sets, s.lay,
                                                             s.good.duals)))
    left = time_limit_s - (time.perf_counter() - st.started) - finish_s(sets)
    st.say(f"piece patterns: pricing and repair in {max(left, 0):.1f} s")
    one = rec.bound
    out, ph = piece_phase(sets, st.lay, st.cls, lams, plan, one, left, st.mip_gap,
                          st.threads)
    rec.bound = ph.bound if np.isfinite(ph.bound) else None
    rec.objective = out.totals["objective"]
    rec.mip_gap = relative_gap(rec.objective, rec.bound)
    proven = within_gap(rec.mip_gap, st.mip_gap)
    if proven:
        status = PlanStatus.OPTIMAL
    elif plan.status == PlanStatus.HEURISTIC and not ph.repaired:
        status = PlanStatus.HEURISTIC
    else:
        status = PlanStatus.FEASIBLE
    add_note(rec, ph.note)
    out.solver = rec
    if out.carry is None:
        out.carry = plan.carry   # what the next rolling run starts from (colgen/warm.py)
    rec.status = out.status = status
    rec.seconds = time.perf_counter() - st.started
    return out
