"""Column generation end to end: the phases in order, on one explicit state."""

from __future__ import annotations

import pickle
import time

from carbonsched.errors import InputError
from carbonsched.plan.colgen.bounds import split_bounds
from carbonsched.plan.colgen.classes import count_options
from carbonsched.plan.colgen.incumbents import early_moves, final_moves, incumbents, repack
from carbonsched.plan.colgen.master import (
    build_master,
    final_crossover,
    master_rounds,
    refine_bound,
    warm_up,
)
from carbonsched.plan.colgen.options import ColgenOptions
from carbonsched.plan.colgen.passes import run_passes
from carbonsched.plan.colgen.repair_mip import repair_incumbent
from carbonsched.plan.colgen.state import ColgenState
from carbonsched.plan.colgen.status import plan_status
from carbonsched.plan.gap import relative_gap
from carbonsched.plan.result import PlanResult, SolverRecord
from carbonsched.plan.sets import PlanSets


def solve_colgen(sets: PlanSets, time_limit_s: float, mip_gap: float, threads: int,
                 rec: SolverRecord, started: float, progress=None,
                 cg_share: float | None = None,
                 options: ColgenOptions | None = None) -> PlanResult:
    """Column generation to the exact LP bound, then a repair MIP (package docstring).

    Phases, each on the shared :class:`~carbonsched.plan.colgen.state.ColgenState`: warm-up
    (classes, greedy plan, Lagrangian warm-up, or on a short budget the smoothed dual),
    master rounds, refinement of the bound, the final crossover, incumbent selection
    (priced greedy plans and LP roundings), the one-slot repack and early moves, the passes
    (site, GPU type), the split bounds, the repair MIP and the finish (final moves, status,
    note).

    Parameters
    ----------
    sets
        Compiled sets.
    time_limit_s
        Budget of the whole solve, counted from ``started``. [s]
    mip_gap
        Relative gap at which the repair MIP may stop. [-]
    threads
        HiGHS threads.
    rec
        Solver record to fill (``bound``, ``mip_gap``, seconds, status, note).
    started
        ``time.perf_counter()`` at the start of the solve.
    progress
        Optional callback for one-line progress messages.
    cg_share
        Share of the budget column generation may use before the repair starts; default
        :attr:`ColgenOptions.cg_share`. [-]
    options
        The tunables; default :class:`ColgenOptions` () (the environment is not read here:
        :meth:`ColgenOptions.from_env` is the caller's).

    Returns
    -------
    PlanResult
        ``optimal`` only if the LP converged, the repair MIP finished and the gap to the best
        proven bound (the LP's, the GPU-type split's, or the dual bound of a repair MIP over
        the whole model) is within ``mip_gap``; ``feasible`` otherwise; ``heuristic`` (greedy
        plan) if the repair found nothing.

    Raises
    ------
    InputError
        The sets are on a sub-hour slot grid (column generation prices hourly slots only).
    """
    if getattr(sets, "slot_minutes", 60) != 60:
        raise InputError(
            f"column generation supports the hourly slot grid only, not {sets.slot_minutes}-"
            "minute slots; use method 'milp' (solve_plan's 'auto' and 'colgen' do so with a "
            "plan note)")
    opt = ColgenOptions() if options is None else options
    st = ColgenState(sets=sets, time_limit_s=time_limit_s, mip_gap=mip_gap, threads=threads,
                     rec=rec, started=started, opt=opt,
                     cg_share=opt.cg_share if cg_share is None else cg_share,
                     progress=progress)
    if rec.name != "highs":
        st.note("column generation always uses HiGHS (highspy); CBC has no in-process LP "
                "interface")
        rec.name = "highs"
    warm_up(st)
    build_master(st)
    master_rounds(st)
    refine_bound(st)
    final_crossover(st)
    incumbents(st)
    repack(st)
    early_moves(st)
    run_passes(st)
    split_bounds(st)
    st.say(f"LP {'converged' if st.converged else 'stopped'} after {st.it} rounds "
           f"({time.perf_counter() - st.ts:.1f} s): {int(st.residual.sum())} jobs of "
           f"{int((st.residual > 0).sum())} classes left by the LP's integral part")
    if opt.dump_state:   # debugging aid: the state before the repair
        _dump_state(st, opt.dump_state)
    # incumbent 4: repair MIP over the residual classes and the fixed classes that share a
    # binding cell with them, started from the best plan so far
    repair_incumbent(st)
    final_moves(st)
    return finish(st)


def _dump_state(st: ColgenState, path: str) -> None:
    """Pickle the state before the repair (pool, LP values, duals, candidates) to ``path``."""
    with open(path, "wb") as fh:
        pickle.dump({"pool": st.pool, "xo": st.xo, "duals": st.duals,
                     "residual": st.residual, "fixed_opts": st.fixed_opts,
                     "fixed_counts": st.fixed_counts,
                     "cands": [(n, r.totals["objective"]) for n, r in st.cands],
                     "bound": st.rec.bound}, fh)


def finish(st: ColgenState) -> PlanResult:
    """The incumbent of least objective, with its gap, status, timings and the plan note.

    Returns
    -------
    PlanResult
        The chosen plan, its solver record filled (objective, bound, gap, status, seconds).
    """
    rec = st.rec
    name, res = st.best()
    rec.solve_seconds = time.perf_counter() - st.ts + st.warm_s   # warm-up, masters, repair
    res.solver = rec
    rec.objective = res.totals["objective"]
    rec.mip_gap = relative_gap(rec.objective, rec.bound)
    status = plan_status(name, rec.mip_gap, st.mip_gap, st.converged, st.rep_proven)
    rec.status = res.status = status
    st.note(f"column generation: {st.it} rounds, {len(st.pool)} columns of "
            f"{count_options(st.sets)} options, {len(st.lay.reps)} classes; plan from {name} ("
            + ", ".join(f"{n} {r.totals['objective']:.3f}" for n, r in st.cands) + ")")
    rec.seconds = time.perf_counter() - st.started
    return res
