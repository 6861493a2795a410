"""Solving: solver detection, typed outcomes, method choice and the public ``solve_plan``.

Raw PuLP and HiGHS status codes are read here and nowhere else; they leave this module only as
:class:`~carbonsched.plan.result.PlanStatus`. PuLP 3 reports ``LpStatusOptimal`` for a
time-limited incumbent (``sol_status`` ``LpSolutionIntegerFeasible``), so the status is decided
from the solution status and the solver's own model status, and the gap is recomputed as
(objective − bound) / |objective| from the solver's proven bound.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pulp

from carbonsched.domain import ReasonCode
from carbonsched.errors import InputError, SolverUnavailableError
from carbonsched.native import native_section
from carbonsched.plan.baselines import greedy_from_sets
from carbonsched.plan.colgen import ColgenOptions, solve_colgen
from carbonsched.plan.colgen.warm import PreviousRun
from carbonsched.plan.gap import relative_gap, within_gap
from carbonsched.plan.highs import highs_with_start
from carbonsched.plan.model import (
    PlanModel,
    build_model,
    integrality_issues,
    read_patterns,
    read_solution,
)
from carbonsched.plan.result import (
    PlanResult,
    PlanStatus,
    SolverRecord,
    build_plan_result,
    join_clauses,
    recount_violations,
)
from carbonsched.plan.sets import PlanningProblem, PlanSets, compile_sets
from carbonsched.plan.slices import sliced_options

log = logging.getLogger(__name__)

SOLVERS = ("highs", "cbc")
METHODS = ("auto", "milp", "colgen")
AUTO_MILP_MAX_OPTIONS = 20_000
"""For sub-hour grids, piece patterns or CBC, ``method="auto"`` builds the direct MILP up to
this many (job, site, start) options (on the hourly grid with HiGHS, up to
:data:`AUTO_COLGEN_MIN_OPTIONS`), and uses column generation above it (measured: PuLP
construction and the MILP's LP both grow past a minute beyond ~10^5 options; see
``bench/results/plan_scale.md``)."""

AUTO_COLGEN_MIN_OPTIONS = 2_000
"""``method="auto"`` on the hourly grid with HiGHS and no piece patterns: column generation
for the whole limit above this many options (the direct MILP up to it; elsewhere the direct
MILP up to :data:`AUTO_MILP_MAX_OPTIONS`). A day-sized instance at a binding load (~500 jobs,
12k options) is where the direct MILP is weakest: HiGHS alone ended such days at a 60-70 % gap
with work left out, and started from a 20 %-of-the-limit column-generation plan still at
18-33 % on five of the six hardest, where column generation for the whole limit — its last
repair MIP is the class-aggregated model over every option, symmetric jobs merged — ended at
0.5-17 % with 1,670 kg against 1,949 over the six (BENCHMARKS.md section 9.2)."""

AUTO_FOLLOWUP_MAX_OPTIONS = 400_000
"""``method="auto"``: after column generation, if the proven gap is above ``mip_gap``, the
direct MILP gets the rest of the budget when the instance has at most this many options."""
AUTO_FOLLOWUP_MIN_SECONDS = 5.0
"""The follow-up direct MILP runs only if, after its expected build and hand-over and
:data:`FINISH_MARGIN_S`, this much solver time is left. [s]"""
FINISH_MARGIN_S = 1.5
"""Seconds kept after the last solver call for reading the solution and building the plan."""
TRANSFER_S_PER_OPTION = 3e-5
"""Measured cost of PuLP's model hand-over to HiGHS and reading back, per option, on an idle
machine. [s]"""
BUILD_S_PER_OPTION = 5e-5
"""Cost of building the PuLP model, per option, used to decide whether the follow-up MILP has
time to run. Measured on the 2-core machine with both cores busy (load average 2.5-2.9):
1k x 16 x 48 at load 0.6, seed 3, 133,738 options built in 6.4-6.7 s
(``build_model``; 2026-12-01, docs/benchmarks/planner-log.md#planner-3-5). [s]"""
TRANSFER_PER_BUILD = 0.9
"""The hand-over (PuLP to HiGHS and back) against the build of the same model in the same
process: measured 4.9 s against a 6.4 s build (0.77, same run as :data:`BUILD_S_PER_OPTION`),
0.9 with a margin. The measured build scales the hand-over's estimate when the machine is
slower than :data:`TRANSFER_S_PER_OPTION` assumes. [-]"""

Progress = Callable[[str], None] | None


_BANNER_DONE = False


def _consume_highs_banner() -> None:
    """Create one HiGHS object with stdout sent to /dev/null.

    highspy 1.16 prints its copyright banner on stdout when the first ``Highs()`` of a process
    is constructed, before any option can silence it (ERGO-Code/HiGHS#1702, #2749); a command
    that writes JSON to stdout would be corrupted. The banner is printed once per process, so
    it is consumed here, once.
    """
    global _BANNER_DONE
    if _BANNER_DONE:
        return
    import sys

    import highspy

    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        _BANNER_DONE = True


CBC_PATH_ENV = "CARBONSCHED_CBC_PATH"
"""Environment variable naming a CBC binary to use instead of PuLP's bundled one."""

_PROBES: dict[tuple[str, str], str] = {}


def _probe_model() -> pulp.LpProblem:
    """Two binaries, one row: max x0 + 2 x1 s.t. x0 + x1 <= 1 (optimum x1 = 1, objective -2)."""
    lp = pulp.LpProblem("carbonsched_probe", pulp.LpMinimize)
    x0 = lp.add_variable("x0", 0, 1, cat=pulp.LpBinary)
    x1 = lp.add_variable("x1", 0, 1, cat=pulp.LpBinary)
    lp.setObjective(pulp.LpAffineExpression([(x0, -1.0), (x1, -2.0)]))
    lp.addConstraint(pulp.LpAffineExpression([(x0, 1.0), (x1, 1.0)]) <= 1, name="c0")
    return lp


def probe_solver(name: str) -> str:
    """Run a tiny real MILP with ``name``; return ``""`` if it solved right, else why not.

    The result is cached per process (and per :data:`CBC_PATH_ENV` value): a probe costs about
    10 ms with HiGHS and one short CBC process with CBC.
    """
    key = (name, os.environ.get(CBC_PATH_ENV, ""))
    if key in _PROBES:
        return _PROBES[key]
    lp = _probe_model()
    why = ""
    try:
        if name == "highs":
            try:
                import highspy  # noqa: F401
            except ImportError as exc:
                raise SolverUnavailableError("highs", f"highspy is not importable ({exc})") from exc
            try:
                _consume_highs_banner()
            except OSError:       # no usable file descriptor 1 (embedded interpreters)
                pass
            if not pulp.HiGHS(msg=False).available():
                raise SolverUnavailableError("highs", "PuLP's HiGHS interface is unavailable")
        out = run_milp(lp, name, 10.0, 0.0)
        if not (out.has_solution and out.objective is not None
                and abs(out.objective + 2.0) < 1e-6):
            why = f"the probe model gave status {out.raw}, objective {out.objective}"
    except SolverUnavailableError as exc:
        why = str(exc).split(": ", 1)[-1]
    except (pulp.PulpSolverError, OSError, ValueError, RuntimeError) as exc:
        why = f"{type(exc).__name__}: {exc}"
    _PROBES[key] = " ".join(why.split())
    return _PROBES[key]


def highs_available() -> bool:
    """True if HiGHS (highspy through PuLP) solves a tiny MILP right (:func:`probe_solver`)."""
    return probe_solver("highs") == ""


def _cbc(**kw) -> pulp.LpSolver:
    """PuLP's bundled CBC, or the binary named by :data:`CBC_PATH_ENV`.

    PuLP 3.3 deprecates ``PULP_CBC_CMD`` in favour of ``COIN_CMD`` with a separately installed
    CBC (PuLP 4.0); the bundled binary is what this project ships with, so the warning is
    silenced here and the migration is one line.
    """
    path = os.environ.get(CBC_PATH_ENV)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        if path:
            return pulp.COIN_CMD(path=path, **kw)
        return pulp.PULP_CBC_CMD(**kw)


def cbc_available() -> bool:
    """True if the CBC binary runs and solves a tiny MILP right (:func:`probe_solver`)."""
    return probe_solver("cbc") == ""


def resolve_solver(solver: str) -> tuple[str, str]:
    """Pick the solver to run: the requested one, or CBC when HiGHS is unusable.

    Returns
    -------
    name, note
        Solver to use and a note when a fallback happened.

    Raises
    ------
    InputError
        Unknown solver name.
    SolverUnavailableError
        The requested solver (and, for HiGHS, the CBC fallback) cannot run.
    """
    if solver not in SOLVERS:
        raise InputError(f"unknown solver {solver!r}; choose one of {', '.join(SOLVERS)}")
    if solver == "highs":
        if highs_available():
            return "highs", ""
        if cbc_available():
            why = probe_solver("highs") or "unusable"
            return "cbc", f"HiGHS (highspy) unavailable on this host ({why}); fell back to CBC"
        raise SolverUnavailableError(
            "highs", "highspy is not importable and the CBC fallback binary cannot run; "
            "install highspy (pip install highspy) or a working CBC")
    if cbc_available():
        return "cbc", ""
    if highs_available():
        why = probe_solver("cbc") or "unusable"
        return "highs", f"CBC cannot run on this host ({why}); fell back to HiGHS"
    raise SolverUnavailableError(
        "cbc", "the CBC binary cannot run on this host and HiGHS (highspy) is not usable "
        f"either; reinstall pulp and highspy, or set {CBC_PATH_ENV} to a working CBC")


@dataclass
class SolveOutcome:
    """What a MILP solve produced, before interpretation as a plan."""

    has_solution: bool
    proven: bool
    """Solver finished (optimal within its gap tolerance), not stopped by a limit."""
    infeasible: bool
    objective: float | None
    bound: float | None
    seconds: float
    raw: str
    """Solver status text, for the note."""
    start_accepted: bool | None = None
    """With a MIP start: whether HiGHS took its values (None: no start given)."""


_CBC_FLOAT = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"


def _parse_cbc_log(text: str) -> tuple[float | None, float | None]:
    """Objective and lower bound from a CBC log (``Objective value:``, ``Lower bound:``)."""
    obj = re.findall(r"Objective value:\s+" + _CBC_FLOAT, text)
    low = re.findall(r"Lower bound:\s+" + _CBC_FLOAT, text)
    return (float(obj[-1]) if obj else None, float(low[-1]) if low else None)


def run_milp(model: pulp.LpProblem, solver: str, time_limit_s: float, mip_gap: float,
             threads: int = 1, start: dict[pulp.LpVariable, float] | None = None
             ) -> SolveOutcome:
    """Solve a PuLP model with HiGHS or CBC under a time limit; read status and bound.

    Parameters
    ----------
    model
        The PuLP problem.
    solver
        ``"highs"`` or ``"cbc"`` (already resolved, see :func:`resolve_solver`).
    time_limit_s
        Wall-clock limit handed to the solver. [s]
    mip_gap
        Relative MIP gap at which the solver may stop. [-]
    threads
        Solver threads.
    start
        Optional MIP start: values of integer variables (HiGHS only; CBC ignores it).
    """
    t = time.perf_counter()
    if solver == "highs":
        kw = dict(msg=False, timeLimit=max(time_limit_s, 0.01), gapRel=mip_gap,
                  threads=threads)
        cmd = highs_with_start(start, **kw) if start else pulp.HiGHS(**kw)
        import highspy

        from carbonsched.plan.highs import mip_dual_bound, model_has_integers, reset_scheduler

        for attempt in (1, 2):
            try:
                model.solve(cmd)
            except pulp.PulpSolverError as exc:
                raise SolverUnavailableError("highs", str(exc)) from exc
            if (attempt == 1 and model.solverModel.getModelStatus()
                    == highspy.HighsModelStatus.kNotset):
                # refused by the thread's scheduler, set up by an earlier run with another
                # thread count (carbonsched.plan.highs): reset it and solve again
                reset_scheduler()
                continue
            break
        h = model.solverModel
        ms = h.getModelStatus()
        info = h.getInfo()
        has = info.primal_solution_status == 2  # kSolutionStatusFeasible
        proven = ms == highspy.HighsModelStatus.kOptimal
        infeasible = ms in (highspy.HighsModelStatus.kInfeasible,
                            highspy.HighsModelStatus.kUnboundedOrInfeasible)
        # the solver's copy (0.05 s at 135k columns; model.variables() sorts: 0.5 s)
        is_mip = model_has_integers(h)
        if is_mip:
            bound = mip_dual_bound(h, has_integers=True)   # -inf when the run proved none
        else:
            bound = float(info.objective_function_value) if proven else None
        if bound is not None and not np.isfinite(bound):
            bound = None
        obj = float(info.objective_function_value) if has else None
        if proven and has and bound is None:
            bound = obj        # solved in presolve: HiGHS reports no dual bound
        return SolveOutcome(has, proven and has, infeasible, obj, bound,
                            time.perf_counter() - t, h.modelStatusToString(ms),
                            getattr(cmd, "start_accepted", None))
    with tempfile.TemporaryDirectory() as tmp:
        logp = os.path.join(tmp, "cbc.log")
        cmd = _cbc(msg=False, timeLimit=max(time_limit_s, 1.0), gapRel=mip_gap,
                   threads=threads, logPath=logp)
        # PuLP's model and solution files too: it deletes them only after a run that worked
        cmd.tmpDir = tmp
        try:
            model.solve(cmd)
        except pulp.PulpSolverError as exc:
            raise SolverUnavailableError("cbc", str(exc)) from exc
        text = open(logp).read() if os.path.exists(logp) else ""
    st, sol = model.status, model.sol_status
    has = sol in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible)
    proven = sol == pulp.LpSolutionOptimal
    infeasible = st == pulp.LpStatusInfeasible or sol == pulp.LpSolutionInfeasible
    obj_log, bound = _parse_cbc_log(text)
    obj = pulp.value(model.objective) if has else None
    if proven and bound is None:
        bound = obj
    return SolveOutcome(has, proven, infeasible, float(obj) if obj is not None else None,
                        bound, time.perf_counter() - t,
                        f"{pulp.LpStatus[st]}/{pulp.LpSolution[sol]}")


def diagnose_inference(sets: PlanSets, solver: str = "highs") -> tuple[str, str] | None:
    """Check that all inference demand can be served; name the family that fails.

    Returns ``None`` when it can, else ``(family, detail)`` with family ``"inference_slo"``
    (no site within the SLO has the GPU type), ``"gpu_capacity"`` (not enough GPUs within the
    SLO, alone or jointly) or ``"power_cap"`` (enough GPUs but not enough IT power).
    """
    prob = sets.problem
    for d, dem in enumerate(prob.inference):
        if dem.gpus > 0 and not sets.inf_sites[d].any():
            return ("inference_slo",
                    f"no site with {dem.gpu_type} is within {dem.slo_ms} ms of area "
                    f"{dem.area!r} (demand at {dem.hour.isoformat()})")
    for d, dem in enumerate(prob.inference):
        cap = sets.gpu_count[sets.inf_sites[d], sets.inf_gtype[d]].sum()
        if dem.gpus > cap:
            return ("gpu_capacity",
                    f"area {dem.area!r} at {dem.hour.isoformat()} needs {dem.gpus} "
                    f"{dem.gpu_type} within {dem.slo_ms} ms; only {int(cap)} exist there")
    active = np.flatnonzero(sets.inf_gpus > 0)
    if len(active) == 0:
        return None
    for with_power in (False, True):
        lp = pulp.LpProblem("inference_check", pulp.LpMinimize)
        y = {(int(d), int(s)): lp.add_variable(f"y{d}_{s}", 0, int(sets.inf_gpus[d]),
                                               cat=pulp.LpInteger)
             for d in active for s in np.flatnonzero(sets.inf_sites[d])}
        lp.setObjective(pulp.lpSum(y.values()))
        cells: dict[tuple, list] = {}
        pcells: dict[tuple, list] = {}
        for (d, s), v in y.items():
            cells.setdefault((s, int(sets.inf_hour[d]), int(sets.inf_gtype[d])), []).append(v)
            for t in sets.inf_slots(d):       # every slot of its hour (power after running work)
                pcells.setdefault((s, t), []).append((v, float(sets.inf_kw_per_gpu[d])))
        by_d: dict[int, list] = {}
        for (d, _s), v in y.items():
            by_d.setdefault(d, []).append(v)
        for d, vs in by_d.items():
            lp.addConstraint(pulp.lpSum(vs) == int(sets.inf_gpus[d]), name=f"serve{d}")
        for (s, t, g), vs in cells.items():
            lp.addConstraint(pulp.lpSum(vs) <= int(sets.gpu_count[s, g]), name=f"cap{s}_{t}_{g}")
        if with_power:
            rhs = sets.power_rhs_kw
            for (s, t), terms in pcells.items():
                lp.addConstraint(pulp.LpAffineExpression(terms) <= float(rhs[s, t]),
                                 name=f"pow{s}_{t}")
        out = run_milp(lp, solver, 30.0, 0.0)
        if not out.has_solution:
            if with_power:
                return ("power_cap", "inference demand within its SLOs exceeds the sites' IT "
                        "or facility power caps in at least one hour")
            return ("gpu_capacity", "inference demands competing for the same sites within "
                    "their SLOs need more GPUs than those sites have in at least one hour")
    return None


def _finish(sets: PlanSets, chosen: np.ndarray, alloc: np.ndarray, rec: SolverRecord,
            mip_gap: float, proven: bool, started: float,
            patterns: np.ndarray | None = None,
            domains: dict[str, tuple[int, ...]] | None = None) -> PlanResult:
    res = build_plan_result(sets, chosen, alloc, PlanStatus.FEASIBLE, rec,
                            chosen_patterns=patterns, domains=domains)
    obj = res.totals["objective"]
    rec.objective = obj
    rec.mip_gap = relative_gap(obj, rec.bound)
    within = within_gap(rec.mip_gap, mip_gap)
    status = PlanStatus.OPTIMAL if (proven and within) else PlanStatus.FEASIBLE
    rec.status = res.status = status
    rec.seconds = time.perf_counter() - started
    return res


def _fallback(sets: PlanSets, rec: SolverRecord, started: float, why: str) -> PlanResult:
    # deferring where the objective would: a job placed in a dirty hour of this horizon where
    # its terminal value says a later run does better would run there once dispatched
    res = greedy_from_sets(sets, defer=True)
    rec.status = res.status = PlanStatus.HEURISTIC
    rec.method = "greedy"
    rec.objective = res.totals["objective"]
    rec.mip_gap = relative_gap(rec.objective, rec.bound)
    # jobs the greedy order found no room for, though the pre-check let them through: an
    # exact solve with a longer limit may place them; the plan says how many
    left = sum(1 for u in res.unplaced
               if u.reason == ReasonCode.INSUFFICIENT_CAPACITY)
    rec.greedy_unplaced = left
    told = (f"the greedy plan leaves {left} job(s) unplaced that passed the pre-check; an "
            "exact solve with a longer --time-limit may place them" if left else
            "the greedy plan places every job that passed the pre-check"
            + (f" but the {len(res.deferred)} it deferred" if res.deferred else ""))
    rec.note = join_clauses(rec.note, why, "returned the greedy plan", told, res.solver.note)
    rec.seconds = time.perf_counter() - started
    res.solver = rec
    return res


def _error(sets: PlanSets, rec: SolverRecord, violations: dict[str, int], detail: str,
           started: float) -> PlanResult:
    """No plan: the solver's solution failed the recount (status ``error``)."""
    rec.status = PlanStatus.ERROR
    rec.violations = dict(violations)
    rec.objective = rec.mip_gap = None
    rec.note = join_clauses(rec.note, "the solver's solution failed the recount: "
                            + detail + "; no plan was made from it")
    rec.seconds = time.perf_counter() - started
    reasons = {k: (ReasonCode.SOLVER_NO_SOLUTION, "the solver's solution failed the recount")
               for k in range(len(sets.problem.jobs))}
    return build_plan_result(sets, np.zeros((0, 3), dtype=np.int64),
                             np.zeros(sets.inf_sites.shape, dtype=np.int64),
                             PlanStatus.ERROR, rec, reasons)


def check_result(sets: PlanSets, res: PlanResult, started: float) -> PlanResult:
    """Recount a plan before it is called a plan; a broken one becomes status ``error``.

    Plans with status ``optimal``, ``feasible`` or ``heuristic`` are recounted by
    :func:`~carbonsched.plan.result.recount_violations` (each job at most once, window and
    horizon, GPU capacity, power cap, inference SLO); any violation turns the result into
    :func:`_error`. Other statuses are returned as they are.
    """
    if res.status not in (PlanStatus.OPTIMAL, PlanStatus.FEASIBLE, PlanStatus.HEURISTIC):
        return res
    from carbonsched.plan.domain_repair import with_domains

    placed = len(res.placements)
    res = with_domains(sets, res)
    if len(res.placements) < placed and res.solver is not None:
        # gangs left out after the proof: the plan is no longer the one the bound was for
        rec = res.solver
        rec.objective = res.totals["objective"]
        rec.mip_gap = relative_gap(rec.objective, rec.bound)
        if res.status == PlanStatus.OPTIMAL:
            res.status = rec.status = PlanStatus.FEASIBLE
    bad = recount_violations(sets.problem, res)
    if not bad:
        return res
    what = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in bad.items())
    return _error(sets, res.solver, bad, what, started)


def _infeasible(sets: PlanSets, rec: SolverRecord, family: str, detail: str,
                started: float) -> PlanResult:
    from carbonsched.domain import ReasonCode

    rec.status = PlanStatus.INFEASIBLE
    rec.infeasible_family = family
    rec.note = join_clauses(rec.note, detail)
    rec.seconds = time.perf_counter() - started
    reasons = {k: (ReasonCode.SOLVER_NO_SOLUTION, f"plan infeasible ({family})")
               for k in range(len(sets.problem.jobs))}
    res = build_plan_result(sets, np.zeros((0, 3), dtype=np.int64),
                            np.zeros(sets.inf_sites.shape, dtype=np.int64),
                            PlanStatus.INFEASIBLE, rec, reasons)
    return res


@dataclass
class WarmStart:
    """A plan to start a solve from: the previous rolling run's placements (issue 36 item 2).

    A rolling run every ``run_every`` hours re-plans the jobs the previous run placed after
    its commit window; their placements keep their absolute (site, start), so on the new
    run's slot grid they are the previous plan shifted by ``run_every``. Jobs it does not
    place (new work) start unplaced; the solver completes the plan.

    Attributes
    ----------
    placements
        :class:`~carbonsched.domain.Placement` objects (``job_id``, ``site``, ``start``,
        ``pieces``) of the previous plan.
    source
        What the plan is, for the notes (e.g. ``the run issued at 2023-07-15T00:00Z``).
    duals
        The previous run's column-generation multipliers and column pool
        (:class:`~carbonsched.plan.colgen.warm.CarriedDuals`, its result's ``carry``), or
        ``None``; column generation starts its warm-up from them (the direct MILP has no
        use for them).
    duals_missing
        Why ``duals`` is ``None`` (e.g. ``the previous run was solved by the direct MILP``),
        for ``solver.warm_start``; empty: not said.
    """

    placements: list[Any]
    source: str
    duals: Any = None
    duals_missing: str = ""

    @property
    def label(self) -> str:
        """How the notes name the start: its source and number of placements."""
        return f"{self.source} ({len(self.placements)} placement(s))"


def start_label(start: Any) -> str:
    """How the notes name a MIP start: a :class:`WarmStart`'s label or a plan's objective."""
    if isinstance(start, WarmStart):
        return start.label
    return f"a plan of {start.totals['objective']:.3f} kg"


def warm_positions(sets: PlanSets, start: WarmStart) -> np.ndarray:
    """The warm start's one-piece placements that are options of ``sets``: ``(P, 3)`` positions.

    Placements of jobs no longer planned (committed, ended), in pieces, at a site or start
    that is not a feasible option now (e.g. before this run's issue time), are left out.

    Returns
    -------
    numpy.ndarray
        ``(P, 3)`` ``(job, site, start)`` positions, at most one per job. [-]
    """
    jpos = {jb.id: k for k, jb in enumerate(sets.problem.jobs)}
    spos = {name: i for i, name in enumerate(sets.site)}
    tpos = {t: i for i, t in enumerate(sets.slot)}
    rows: dict[int, tuple[int, int, int]] = {}
    for pl in start.placements:
        j = jpos.get(pl.job_id)
        if j is None or getattr(pl, "pieces", 1) > 1 or j in rows:
            continue
        rows[j] = (j, spos.get(pl.site, -1), tpos.get(pl.start, -1))
    cand = np.array(sorted(rows.values()), dtype=np.int64).reshape(-1, 3)
    opts = np.asarray(sets.options, dtype=np.int64).reshape(-1, 3)
    if not len(cand) or not len(opts):
        return np.zeros((0, 3), dtype=np.int64)
    # one integer key per (job, site, start), matched by a sorted search: a Python set of
    # every option took 1.0 s of a 3 s limit on 2,000 jobs x 8 sites x 72 h (165,807
    # options) on a loaded machine, time a cold solve does not spend
    n_s, n_t = len(sets.site), len(sets.slot)

    def key(a: np.ndarray) -> np.ndarray:
        return (a[:, 0] * n_s + a[:, 1]) * n_t + a[:, 2]

    have = np.sort(key(opts))
    k = key(cand)
    at = np.minimum(np.searchsorted(have, k), len(have) - 1)
    ok = (cand[:, 1] >= 0) & (cand[:, 2] >= 0) & (have[at] == k)
    return cand[ok]


def start_values(m: PlanModel, plan: PlanResult | WarmStart) -> dict[pulp.LpVariable, float]:
    """A MIP start for ``m`` from a plan's one-piece placements.

    Every job of the model gets its option binaries (1 for the plan's placement, 0 else) and
    its unplaced flag; jobs the plan runs in pieces, places twice or at a (site, start) that
    is not an option of ``m``, and inference and absorption variables, are left for the
    solver to complete.

    Parameters
    ----------
    m
        The built model (:func:`~carbonsched.plan.model.build_model`).
    plan
        A plan of the same problem (job ids, site names and slot starts are matched).

    Returns
    -------
    dict
        Variable -> value; empty when no placement of the plan is an option of ``m``.
    """
    sets = m.sets
    jpos = {jb.id: k for k, jb in enumerate(sets.problem.jobs)}
    spos = {name: i for i, name in enumerate(sets.site)}
    tpos = {t: i for i, t in enumerate(sets.slot)}
    pos = {(int(j), int(s_), int(t)): i for i, (j, s_, t) in enumerate(m.options.tolist())}
    placed: dict[int, int | None] = {}
    for pl in plan.placements:
        j = jpos.get(pl.job_id)
        if j is None:
            continue
        i = pos.get((j, spos.get(pl.site, -1), tpos.get(pl.start, -1)))
        placed[j] = None if (pl.pieces > 1 or i is None or j in placed) else i
    out: dict[pulp.LpVariable, float] = {}
    by_job: dict[int, list[int]] = {}
    for i, j in enumerate(m.options[:, 0].tolist()):
        by_job.setdefault(int(j), []).append(i)
    for j, u in m.u.items():
        if j in placed and placed[j] is None:
            continue                          # pieces or an unknown placement: not given
        i_on = placed.get(j)
        for i in by_job.get(j, []):
            out[m.x[i]] = 1.0 if i == i_on else 0.0
        out[u] = 0.0 if i_on is not None else 1.0
    return out if any(i is not None for i in placed.values()) else {}


def solve_milp(sets: PlanSets, solver: str, time_limit_s: float, mip_gap: float, threads: int,
               rec: SolverRecord, started: float, progress: Progress = None,
               min_solve_s: float = 0.0, start: PlanResult | WarmStart | None = None
               ) -> PlanResult | None:
    """Direct MILP: one binary per feasible (job, site, start), built in PuLP and solved.

    Parameters
    ----------
    sets
        The compiled planning sets.
    solver
        ``"highs"`` or ``"cbc"`` (resolved, see :func:`resolve_solver`).
    time_limit_s
        Wall-clock budget counted from ``started``; the solver gets what is left after the
        build and the expected hand-over to it (the larger of :data:`TRANSFER_S_PER_OPTION`
        per option and :data:`TRANSFER_PER_BUILD` x the measured build). [s]
    mip_gap
        Relative MIP gap at which the solver may stop. [-]
    threads
        Solver threads.
    rec
        The solver record filled in (times, bound, note).
    started
        ``time.perf_counter()`` value the budget counts from. [s]
    progress
        Optional callback for one-line progress messages.
    min_solve_s
        Least solver time worth starting; with less left the model is built but not solved.
        0 (the default) always solves, for at least 0.01 s. [s]
    start
        Optional plan handed to HiGHS as a MIP start (:func:`start_values`); the note says
        whether HiGHS took it. HiGHS may still end below it only when it cannot complete a
        partial start; :func:`solve_plan` keeps the better of the two plans.

    Returns
    -------
    PlanResult or None
        The plan; None when the solve was skipped for ``min_solve_s`` (the reason is appended
        to ``rec.note``).
    """
    tb = time.perf_counter()
    if progress:
        progress(f"building MILP over {len(sets.options)} options")
    m: PlanModel = build_model(sets)
    rec.build_seconds = time.perf_counter() - tb
    # PuLP hands the model to HiGHS column by column inside solve(); keep time for that
    transfer_s = max(TRANSFER_S_PER_OPTION * len(sets.options),
                     TRANSFER_PER_BUILD * rec.build_seconds)
    remaining = time_limit_s - (time.perf_counter() - started) - transfer_s
    if min_solve_s > 0 and remaining < min_solve_s:
        rec.note = join_clauses(rec.note, (
            f"built in {rec.build_seconds:.1f} s but not solved: with {transfer_s:.1f} s "
            f"expected for the hand-over to the solver, {max(remaining, 0):.1f} s of the limit "
            f"were left, under the {min_solve_s:g} s minimum"))
        if progress:
            progress(f"direct MILP built but not solved: {max(remaining, 0):.1f} s left")
        return None
    remaining = max(remaining, 0.01)
    if progress:
        progress(f"solving with {rec.name} (limit {remaining:.0f} s)")
    x0 = start_values(m, start) if start is not None and rec.name == "highs" else None
    out = run_milp(m.lp, rec.name, remaining, mip_gap, threads, start=x0)
    rec.solve_seconds = out.seconds
    rec.bound = out.bound
    seed = None
    if x0:
        seed = (f"started from {start_label(start)}"
                if out.start_accepted else
                f"the MIP start ({start_label(start)}) was refused by HiGHS; solved "
                "without it")
    if isinstance(start, WarmStart) and not (x0 and out.start_accepted):
        rec.warm_start = (f"cold: HiGHS refused the MIP start from {start.source}"
                          if x0 else f"cold: no placement of {start.source} is an option of "
                          "the model")
    rec.note = join_clauses(rec.note, seed, f"solver status {out.raw}")
    if out.infeasible:
        fam = diagnose_inference(sets, rec.name) or ("unknown", "solver reported infeasible")
        return _infeasible(sets, rec, fam[0], fam[1], started)
    if not out.has_solution:
        return _fallback(sets, rec, started, "no incumbent within the time limit")
    issues = integrality_issues(m)
    if issues:
        return _error(sets, rec, {"integrality": len(issues)}, "; ".join(issues), started)
    chosen, alloc = read_solution(m)
    given = None
    if m.domain_vars:
        from carbonsched.plan.domains import read_domains

        given = read_domains(m)
    res = _finish(sets, chosen, alloc, rec, mip_gap, out.proven, started, read_patterns(m),
                  domains=given)
    if given is not None:
        from carbonsched.plan.domain_repair import with_domains

        res = with_domains(sets, res, given)
    return res


def _nothing_to_decide(sets: PlanSets) -> bool:
    """No job has a feasible option and no inference demand needs a GPU."""
    return len(sets.options) == 0 and not (sets.inf_gpus > 0).any()


def solve_plan(problem: PlanningProblem, solver: str = "highs", time_limit_s: float = 60.0,
               mip_gap: float = 0.01, method: str = "auto", threads: int = 1,
               progress: Progress = None,
               colgen_options: ColgenOptions | None = None,
               start: WarmStart | None = None) -> PlanResult:
    """Plan jobs and inference on sites and hours, minimising forecast emissions.

    Parameters
    ----------
    problem
        Sites, jobs, inference demand, slots and forecast signals.
    solver
        ``"highs"`` (default; falls back to CBC when highspy is unusable) or ``"cbc"``.
    time_limit_s
        Wall-clock budget of the whole solve (build + solve). [s]
    mip_gap
        Relative gap at which the solver may stop; a plan is called ``optimal`` only when its
        proven gap is within it. [-]
    method
        ``"milp"`` (direct PuLP model), ``"colgen"`` (column generation with an exact LP bound,
        then a repair MIP), or ``"auto"``: the MILP up to :data:`AUTO_COLGEN_MIN_OPTIONS`
        options on the hourly grid with HiGHS and no piece patterns (otherwise up to
        :data:`AUTO_MILP_MAX_OPTIONS`), column generation for the whole limit above. It is
        followed — when its proven gap is still above
        ``mip_gap`` and the instance has at most :data:`AUTO_FOLLOWUP_MAX_OPTIONS` options — by
        the direct MILP in the remaining time, started from column generation's plan (a MIP
        start, :func:`start_values`; better plan and better bound kept); the follow-up is
        skipped, with a note, when its expected build and hand-over would leave the solver
        less than :data:`AUTO_FOLLOWUP_MIN_SECONDS`.
    threads
        Solver threads.
    progress
        Optional callback receiving one-line progress messages.
    colgen_options
        Tunables of column generation; default: read from the ``CARBONSCHED_CG_*``
        environment variables (:meth:`~carbonsched.plan.colgen.ColgenOptions.from_env`) when
        column generation runs.
    start
        A warm start (:class:`WarmStart`, the previous rolling run's plan): the direct MILP
        starts from it (a MIP start) and column generation takes it as a candidate plan that
        its later phases improve. ``solver.warm_start`` records ``warm: <what>`` or
        ``cold: <why>``; ``None`` (default): ``cold: no previous plan``.

    Returns
    -------
    PlanResult
        ``optimal`` only when optimality within ``mip_gap`` is proven:
        (objective − bound) / |objective| ≤ ``mip_gap``, the bound being the solver's (direct
        MILP) or column generation's (see :func:`~carbonsched.plan.colgen.solve_colgen`), the
        larger when both ran — each a proven lower bound whether or not its run was stopped
        by the limit;
        ``feasible`` with its gap otherwise; ``heuristic`` when no incumbent was found (greedy
        plan); ``infeasible`` with ``solver.infeasible_family`` when inference cannot be served.

    Raises
    ------
    InputError
        Unknown solver or method, bad signals or duplicate ids.
    ValueError
        An unknown or invalid ``CARBONSCHED_CG_*`` variable, when column generation runs
        without ``colgen_options``.
    SolverUnavailableError
        No usable solver.
    """
    # a SIGTERM while planning ends the process at once (a handler would wait for the solver)
    with native_section():
        return _solve_plan(problem, solver, time_limit_s, mip_gap, method, threads, progress,
                           colgen_options, start)


def _solve_plan(problem: PlanningProblem, solver: str, time_limit_s: float, mip_gap: float,
                method: str, threads: int, progress: Progress,
                colgen_options: ColgenOptions | None, start: WarmStart | None) -> PlanResult:
    """:func:`solve_plan`'s work, under :func:`~carbonsched.native.native_section`."""
    started = time.perf_counter()
    if method not in METHODS:
        raise InputError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    if time_limit_s <= 0:
        raise InputError(f"time_limit_s must be > 0, got {time_limit_s}")
    from carbonsched.plan.fairness import fairness_wanted, solve_fair

    if fairness_wanted(problem):
        # tenants with fair shares or quotas: the carbon-only plan, then the fair plan
        return solve_fair(problem, solve_plan, time_limit_s, solver=solver, mip_gap=mip_gap,
                          method=method, threads=threads, progress=progress,
                          colgen_options=colgen_options, start=start)
    name, note = resolve_solver(solver)
    sets = compile_sets(problem)
    auto = method == "auto"
    if auto:
        method = "milp" if len(sets.options) <= AUTO_MILP_MAX_OPTIONS else "colgen"
        if (method == "milp" and len(sets.options) > AUTO_COLGEN_MIN_OPTIONS
                and sets.slot_minutes == 60 and name == "highs"
                and (sets.patterns is None or not len(sets.patterns))):
            method = "colgen"
    if method == "colgen":
        from carbonsched.plan.domains import needs_domain_model

        domains = needs_domain_model(sets)
        by_size = auto and len(sets.options) > AUTO_MILP_MAX_OPTIONS
        why = ("network domains (topology-bound gangs)" if domains and not by_size else
               "tenant fair shares" if getattr(problem, "fair_targets", None) is not None
               else None)
        if why:
            note = join_clauses(note, f"{why} are modelled by the direct MILP only; "
                                f"solved it over {len(sets.options)} options")
            method = "milp"
        elif domains:
            # too large for the direct MILP in its limit: column generation without domain
            # rows (a relaxation, so its bound stays valid), the gangs put in domains after
            note = join_clauses(note, (
                f"network domains are modelled by the direct MILP only, too large here "
                f"({len(sets.options)} options); column generation planned the topology-bound "
                f"gangs without them and they were put into their domains after the solve "
                f"(first fit, a gang no domain holds left unplaced and named)"))
    if method == "colgen" and not highs_available():
        note = join_clauses(note, "column generation needs highspy; solved the direct "
                            "MILP with CBC instead")
        method = "milp"
    whole_gpu_bound = False
    if method == "colgen":
        sliced = sliced_options(sets, sets.options)
        whole_gpu_bound = bool(sliced.any())
        if whole_gpu_bound:
            # hook for issue 37: the layout columns live in the direct MILP only
            n_fr = len(np.unique(sets.options[sliced, 0]))
            note = join_clauses(note, f"column generation plans {n_fr} fractional "
                                "job(s) at sites that share GPUs as whole GPUs (slice "
                                "layouts are modelled by the direct MILP only); their "
                                "slices are packed onto GPUs after the solve")
    rec = SolverRecord(name=name, status=PlanStatus.NO_SOLUTION, method=method, note=note)
    warm = None
    if start is not None:
        warm = warm_positions(sets, start)
        if not len(warm):
            rec.warm_start = (f"cold: none of the {len(start.placements)} placement(s) of "
                              f"{start.source} is an option of this run (committed, ended, "
                              "in pieces or outside the horizon)")
            warm = None
        else:
            rec.warm_start = (f"warm: started from {start.source}: {len(warm)} of its "
                              f"{len(start.placements)} placement(s) are options of this run")
    if _nothing_to_decide(sets):
        # an empty model: optimal by definition, on every solver (the solvers disagree on
        # what an empty model's status is, so none is asked)
        rec.method = "none"
        rec.note = join_clauses(note, "nothing to decide: no job has a feasible "
                                "option and no inference demand needs a GPU")
        res = build_plan_result(sets, np.zeros((0, 3), dtype=np.int64),
                                np.zeros(sets.inf_sites.shape, dtype=np.int64),
                                PlanStatus.OPTIMAL, rec)
        rec.status = PlanStatus.OPTIMAL
        rec.objective = res.totals["objective"]
        rec.bound = rec.objective
        rec.mip_gap = 0.0
        rec.seconds = time.perf_counter() - started
        return check_result(sets, res, started)
    fam = diagnose_inference(sets, name)
    if fam is not None:
        return _infeasible(sets, rec, fam[0], fam[1], started)
    if method == "milp":
        if warm is not None and name != "highs":
            rec.warm_start = f"cold: {name} takes no MIP start (HiGHS does)"
        direct = solve_milp(sets, name, time_limit_s - FINISH_MARGIN_S, mip_gap, threads, rec,
                            started, progress, start=start if warm is not None else None)
        if direct is None:
            raise RuntimeError("solve_milp skipped a solve with min_solve_s = 0")
        return check_result(sets, direct, started)
    if colgen_options is None:
        colgen_options = ColgenOptions.from_env(os.environ)
    carried = None if start is None else start.duals
    if start is not None and carried is None:
        why = start.duals_missing or "the previous run carried none"
        rec.warm_start = join_clauses(
            rec.warm_start, f"multipliers: cold: {why}")
    res = solve_colgen(sets, time_limit_s, mip_gap, threads, rec, started, progress,
                       options=colgen_options,
                       previous=PreviousRun(warm, start.source if start is not None else "",
                                            carried))
    if whole_gpu_bound:
        # the bound is over fractional jobs as whole GPUs: slices can do better, so no proof
        if res.status == PlanStatus.OPTIMAL:
            res.status = rec.status = PlanStatus.FEASIBLE
        rec.bound = rec.mip_gap = None
        rec.note = join_clauses(rec.note, (
            "no bound reported: column generation's bound counts fractional jobs as whole "
            "GPUs, which the slice layouts can beat"))
    left = time_limit_s - (time.perf_counter() - started)
    expected_s = (BUILD_S_PER_OPTION + TRANSFER_S_PER_OPTION) * len(sets.options)
    if not (auto and res.status != PlanStatus.OPTIMAL
            and len(sets.options) <= AUTO_FOLLOWUP_MAX_OPTIONS):
        return check_result(sets, res, started)
    if left - FINISH_MARGIN_S - expected_s < AUTO_FOLLOWUP_MIN_SECONDS:
        rec.note = join_clauses(rec.note, (
            f"no direct MILP after column generation: {max(left, 0):.1f} s of the "
            f"{time_limit_s:g} s limit left; its build and hand-over need about "
            f"{expected_s:.1f} s, the solver at least {AUTO_FOLLOWUP_MIN_SECONDS:g} s and "
            f"reading the plan {FINISH_MARGIN_S:g} s; the column-generation plan is kept"))
        if progress:
            progress(f"no direct MILP after column generation: {max(left, 0):.1f} s left")
        return check_result(sets, res, started)
    # the LP bound can be weak on small instances (gangs, short windows): spend the rest
    # of the budget on the direct MILP, keep the better plan and the better bound
    if progress:
        gap = "no bound" if rec.mip_gap is None else f"gap {100 * rec.mip_gap:.2f} %"
        progress(f"column generation: {gap}; direct MILP with the remaining {left:.0f} s")
    rec2 = SolverRecord(name=name, status=PlanStatus.NO_SOLUTION, method="milp")
    alt = solve_milp(sets, name, time_limit_s - FINISH_MARGIN_S, mip_gap, threads, rec2,
                     started, None, min_solve_s=AUTO_FOLLOWUP_MIN_SECONDS, start=res)
    if alt is None:                          # slower build than expected: not solved
        rec.note = (f"{rec.note}; then direct MILP: {rec2.note}; the column-generation plan "
                    "is kept")
        rec.build_seconds += rec2.build_seconds
        rec.seconds = time.perf_counter() - started
        return check_result(sets, res, started)
    bound = max(b for b in (rec.bound, rec2.bound, -np.inf) if b is not None)
    best = alt if (alt.status in (PlanStatus.OPTIMAL, PlanStatus.FEASIBLE)
                   and alt.totals["objective"] < res.totals["objective"]) else res
    if best.carry is None:                   # the next rolling run's start: column generation's
        best.carry = res.carry
    out = best.solver
    out.bound = bound if np.isfinite(bound) else None
    out.mip_gap = relative_gap(best.totals["objective"], out.bound)
    out.method = "colgen+milp"
    out.build_seconds = rec.build_seconds + rec2.build_seconds
    out.solve_seconds = rec.solve_seconds + rec2.solve_seconds
    out.note = f"{rec.note}; then direct MILP: {rec2.note}"
    if out is rec2:   # what the solve started from is column generation's record
        out.warm_start = join_clauses(rec.warm_start, rec2.warm_start)
    # both bounds are proven lower bounds whether or not their solver finished, so the best
    # plan within mip_gap of the larger one is proven (the rule of
    # carbonsched.plan.colgen.status.plan_status): two time-limited runs can prove it together
    if within_gap(out.mip_gap, mip_gap):
        best.status = out.status = PlanStatus.OPTIMAL
    elif best.status != PlanStatus.HEURISTIC:
        best.status = out.status = PlanStatus.FEASIBLE
    out.seconds = time.perf_counter() - started
    return check_result(sets, best, started)
