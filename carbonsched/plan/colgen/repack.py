"""The one-slot repack: every one-GPU, one-slot job re-placed by an LP around the rest."""

from __future__ import annotations

import time

import numpy as np

from carbonsched.plan.baselines import priced_greedy
from carbonsched.plan.colgen.classes import (
    Classes,
    least_flexible_first,
    plan_options,
    unit_classes,
)
from carbonsched.plan.colgen.layout import Layout
from carbonsched.plan.colgen.options import ColgenOptions
from carbonsched.plan.colgen.pricing import price, stack_options
from carbonsched.plan.colgen.repair_mip import repair
from carbonsched.plan.colgen.status import add_note
from carbonsched.plan.result import PlanResult, PlanStatus, SolverRecord, build_plan_result
from carbonsched.plan.sets import PlanSets, enumerate_options, placement_positions


def unit_repack(sets: PlanSets, lay: Layout, cls: Classes, plan: PlanResult, threads: int,
                seconds: float, say, rec: SolverRecord,
                prices: tuple[np.ndarray, np.ndarray] | None = None, greedy_s: float = 0.0,
                options: ColgenOptions | None = None,
                status_out: dict | None = None) -> PlanResult | None:
    """Re-place every one-GPU, one-slot job of ``plan`` by an LP, the rest of the plan fixed.

    With every other job's placement and the inference allocation fixed, these jobs form a
    transportation problem: each class sends its jobs to ``(site, slot)`` cells under the GPU
    capacity of each ``(site, slot, GPU type)``, plus the power and absorption rows. A
    transportation matrix is totally unimodular (Hoffman and Kruskal, "Integral boundary
    points of convex polyhedra", Annals of Mathematics Studies 38, 1956), so the simplex's
    vertex is integral unless a power row (kW coefficients) or a surplus limit binds; any
    value left fractional is rounded down (:func:`repair` with ``relax``), which keeps the
    plan feasible, and the note says so. These jobs are most of the work left out on a full
    fleet (10k x 16 x 48 at load 0.8, seed 4: 930 of the priced greedy's 1,001 left-out jobs),
    and a job of one slot fits any one-GPU hole: the objective of the one-slot part went from
    2,183.1 to 2,057.5 kg on the final plan of that instance (554 jobs left out), an integral
    vertex, in 6.0-7.1 s over every option at once and 2.1-2.6 s priced
    (docs/benchmarks/planner-log.md#planner-3-14).

    Parameters
    ----------
    sets, lay, cls
        Compiled sets, the master's row layout and the job classes.
    plan
        The plan to improve; its other placements and its inference allocation stay (but
        for a completion, see ``prices``).
    threads
        HiGHS threads.
    seconds
        Time limit of the LP and its pricing rounds; setting up the model and building the
        plan come on top (0.4-0.7 s at 10k jobs). [s]
    say
        Progress callback.
    rec
        Solver record whose note gets the repack's outcome.
    prices
        ``(rank_kw (S, T) [kg/kWh], rank_gpu (S, T, G) [kg/GPU·h])``: when the LP was
        fractional, the jobs its rounding left out are offered to a priced greedy
        (:func:`~carbonsched.plan.baselines.priced_greedy`) around the rounded plan, and the
        better of the two plans is returned (10k x 16 x 48 at load 0.3, seed 1: the rounding
        left the plan at 2,193.7 kg, from 2,134.9 before it; completed, 2,086.4). The
        completion allocates inference afresh (the LP's allocation stays otherwise); a
        completion that leaves inference short is not used. Default: no completion.
    greedy_s
        Time a priced greedy took in this solve: the completion runs only if that much of
        ``seconds`` is left after the LP. [s]
    options
        :attr:`ColgenOptions.repack_max_options`, :attr:`ColgenOptions.repack_s_per_option`,
        :attr:`ColgenOptions.repack_price_k` and the repair's settings (defaults when None).
    status_out
        If given and the LP was considered, gets ``"time_limited"``: True when no plan came
        back because of the time (the options within their cap but more than ``seconds``
        would solve, or the LP stopped at its limit), so that a longer limit could repack the
        same start; False when the options are over the cap or the LP ended otherwise. Left
        unset when there is nothing to re-place or the start serves too little inference.

    Returns
    -------
    PlanResult or None
        The repacked plan (a candidate: the caller keeps the best), or None if there is
        nothing to re-place, the start plan serves less inference than demanded (the LP keeps
        its inference allocation, so it would have no solution), the options are too many
        for the time, or the LP has no solution (stopped by the limit, or infeasible). The
        note of ``rec`` says which.
    """
    opt = ColgenOptions() if options is None else options
    unit_c = unit_classes(sets, cls)
    if len(unit_c) == 0:
        return None
    served = sum(ip.gpus for ip in plan.inference)
    demand = int(sets.inf_gpus.sum())
    if served < demand:
        add_note(rec, f"one-slot repack skipped: the plan it starts from serves {served} of "
                 f"{demand} inference GPU-hours, and the repack keeps its inference allocation")
        return None
    po = plan_options(sets, cls, plan)
    in_u = np.zeros(len(cls.rep), dtype=bool)
    in_u[unit_c] = True
    outside = ~in_u[cls.of_job[po[:, 0]]]
    fix_o, fix_n = np.unique(po[outside], axis=0, return_counts=True)
    opts = enumerate_options(sets, cls.rep[unit_c])
    n_opts = len(opts)
    n_jobs = int(lay.mult[unit_c].sum())
    what = f"{n_jobs} one-GPU, one-slot job{'s' if n_jobs != 1 else ''}"
    expected_s = opt.repack_s_per_option * n_opts
    if n_opts > opt.repack_max_options or expected_s > seconds:
        add_note(rec, f"one-slot repack skipped: {what}, {n_opts} options (at most "
              f"{opt.repack_max_options}), about {expected_s:.2f} s expected, {seconds:.2f} s "
              "available")
        if status_out is not None:
            status_out["time_limited"] = n_opts <= opt.repack_max_options
        return None
    if opt.repack_price_k > 0:
        # start from the plan's own options and each class's cheapest ones; the pricing
        # adds the others the LP needs
        rc, ss, tt = price(sets, lay, np.zeros(lay.n_rows), cls.rep[unit_c],
                           k=opt.repack_price_k, chunk=opt.price_chunk)
        opts = np.unique(np.concatenate([po[~outside], stack_options(cls.rep[unit_c], rc, ss, tt,
                                                              np.isfinite(rc))]), axis=0)
    tr = time.perf_counter()
    status: dict = {}
    out = repair(sets, lay, cls, fix_o.reshape(-1, 3), fix_n.astype(np.int64), unit_c,
                 lay.mult[unit_c], opts, threads, seconds, 0.0, say, start=plan, relax=True,
                 price_k=opt.repack_price_k, status_out=status, options=opt)
    took = time.perf_counter() - tr
    if out is None:
        why = status.get("status", "not run")
        add_note(rec, f"one-slot repack gave no plan: the LP over {what} has no solution "
              f"(HiGHS: {why}; limit {seconds:.1f} s)")
        if status_out is not None:
            status_out["time_limited"] = bool(status.get("time_limited"))
        return None
    chosen, alloc, integral, _ = out
    new = build_plan_result(sets, chosen, alloc, PlanStatus.FEASIBLE, rec)
    before, after = plan.totals["objective"], new.totals["objective"]
    caveats = []
    if not status.get("complete", False):
        caveats.append("pricing cut short by the limit, so not every option was offered")
    if not integral:
        caveats.append("its fractional values were rounded down")
        if prices is not None and seconds - took < greedy_s:
            caveats.append(f"no time to complete it ({max(seconds - took, 0.0):.1f} s left, a "
                           f"priced greedy took {greedy_s:.1f} s)")
        elif prices is not None:
            done = complete_plan(sets, new, *prices)
            if done is not None:
                was = {p.job_id for p in new.placements}
                now = {p.job_id for p in done.placements}
                short = "short" in done.solver.note      # inference it could not serve
                better = done.totals["objective"] < after and not short
                caveats.append(
                    f"a priced greedy around it placed {len(now - was)} left-out "
                    f"job{'s' if len(now - was) != 1 else ''}"
                    + (f" and dropped {len(was - now)}" if was - now else "")
                    + f" ({after:.3f} -> {done.totals['objective']:.3f} kg"
                    + (", inference short, not used" if short else
                       "" if better else ", not used") + ")")
                if better:
                    new, after = done, done.totals["objective"]
    if after >= before:
        caveats.append("no better, not used")
    add_note(rec, f"one-slot repack: {what} re-placed by an LP ({len(unit_c)} classes, "
          f"{n_opts} options, {took:.1f} s): {before:.3f} -> {after:.3f} kg"
          + "".join(f"; {c}" for c in caveats))
    say(f"one-slot repack: {before:.3f} -> {after:.3f} kg ({took:.1f} s"
        + "".join(f"; {c}" for c in caveats) + ")")
    return new


def complete_plan(sets: PlanSets, plan: PlanResult, rank_kw: np.ndarray, rank_gpu: np.ndarray
                  ) -> PlanResult | None:
    """``plan`` with the placeable jobs it leaves out offered to a priced greedy around it.

    Parameters
    ----------
    sets
        Compiled sets.
    plan
        The plan to complete (a rounded-down repack).
    rank_kw, rank_gpu
        The greedy's prices, ``(S, T)`` [kg/kWh] and ``(S, T, G)`` [kg/GPU·h]
        (:func:`~carbonsched.plan.baselines.priced_greedy`).

    Notes
    -----
    Its placements are the greedy's prefill (those that no longer fit after the greedy's own
    inference allocation go back to its queue first); the left-out jobs follow in
    :func:`least_flexible_first` order. The result is a candidate: the caller compares.

    Returns
    -------
    PlanResult or None
        The completed plan, or None if ``plan`` leaves no placeable job out.
    """
    part = placement_positions(sets, plan.placements)
    placed = np.zeros(len(sets.job_gpus), dtype=bool)
    placed[part[:, 0]] = True
    lff = least_flexible_first(sets)
    rest = lff[~placed[lff]]
    if len(rest) == 0:
        return None
    return priced_greedy(sets, rank_kw, rank_gpu, order=rest, prefilled=part)
