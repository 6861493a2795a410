"""The planner: places batch/training jobs and inference on sites and hours, minimising kg CO2e.

Public API::

    PlanningProblem(sites, jobs, inference, slots, signals, running=[])
        # running: carbonsched.domain.RunningWork(site, gpu_type, gpus, it_power_kw, end)
    solve_plan(problem, solver="highs", time_limit_s=60.0, mip_gap=0.01, method="auto",
               threads=1, progress=None) -> PlanResult
    agnostic_plan(problem) -> PlanResult            # carbon-unaware baseline
    greedy_plan(problem, signals=None) -> PlanResult  # Carbon-Aware-SDK-style best window
    score_plan(problem, result, signals=None) -> Score  # recomputed from placements only

Modules, in the order the data flows: ``sets`` (problem → integer-indexed sets, pre-check
reason codes, feasible options), ``model`` (the PuLP MILP, one ``define_*`` per constraint
family), ``solve`` (solver detection, typed outcomes, method choice), ``colgen`` (column
generation over job classes for fleet-scale instances, built directly in HiGHS), ``baselines``
(agnostic, greedy, priced greedy), ``result`` (PlanResult, Score, emissions accounting),
``instances`` and ``bench`` (the scale benchmark on the real traces).

Time (issue 14): jobs are in minutes (``Job.duration_minutes``) on an hourly grid, charged
for the minutes they run; starts are decided inside the horizon (``slots``) and may run past
it on continued signals (``sets.CONTINUATION_RULE``); a job whose deadline lies beyond the
horizon may be deferred (``ReasonCode.DEFERRED_PAST_HORIZON``, ``PlanResult.deferred``) at its
terminal value (``sets.TERMINAL_VALUE_RULE``); a preemptible job may run in pieces
(``Placement.piece``, ``pieces``, ``overhead_minutes``, ``overhead_kwh``). ``PlanResult.notes``
names what a plan assumed about the horizon's end.

Status semantics: ``optimal`` = optimality within ``mip_gap`` proven by a bound (never a
time-limited incumbent whose gap is above it); ``feasible`` = a plan with its proven gap;
``heuristic`` = a baseline or the greedy fallback; ``infeasible`` = inference demand that no
plan can serve (``solver.infeasible_family`` says which family); ``error`` = the solver's
solution failed the recount (a value that is not whole, a job twice, a capacity, power or SLO
row broken; ``solver.violations``), so no plan was made from it; ``no_solution`` is reserved
for a solver outcome with nothing to return.
"""

from carbonsched.plan.baselines import agnostic_plan, greedy_plan
from carbonsched.plan.result import (
    PlanResult,
    PlanStatus,
    Score,
    SolverRecord,
    score_plan,
    site_hour_power,
)
from carbonsched.plan.sets import (
    CONTINUATION_RULE,
    TERMINAL_VALUE_RULE,
    UNPLACED_PENALTY_FACTOR,
    PlanningProblem,
    compile_sets,
)
from carbonsched.plan.solve import WarmStart, resolve_solver, solve_plan

__all__ = [
    "CONTINUATION_RULE",
    "TERMINAL_VALUE_RULE",
    "UNPLACED_PENALTY_FACTOR",
    "PlanResult",
    "PlanStatus",
    "PlanningProblem",
    "Score",
    "SolverRecord",
    "WarmStart",
    "agnostic_plan",
    "compile_sets",
    "greedy_plan",
    "resolve_solver",
    "score_plan",
    "site_hour_power",
    "solve_plan",
]
