"""Reading HiGHS (highspy) safely: dual bounds only when proven, runs not refused.

Two traps of highspy 1.16.0, measured here (tests/plan/test_highs_threads.py,
tests/plan/test_colgen_bound.py):

* after a run that failed or never started (model status ``Not Set``, ``Solve error`` ...)
  ``getInfo().mip_dual_bound`` keeps its initial 0.0 — for a MIP with a negative optimum (the
  site and type subproblems of :mod:`carbonsched.plan.colgen`) that reads as a proof; a
  model without integer columns keeps it at 0.0 even when solved, and an empty one reports
  0.0 whatever its objective offset;
* each thread that runs HiGHS sets up a task scheduler with the first run's thread count; a
  later model on the same thread asking for another count is refused (``run()`` returns
  ``kError``, status ``Not Set``; HiGHS's log names ``Highs::resetThreadScheduler()`` as the
  remedy, ERGO-Code/HiGHS#2291).

Model statuses: HiGHS documentation, "HighsModelStatus"
(https://ergo-code.github.io/HiGHS/stable/structures/enums/#HighsModelStatus).
"""

from __future__ import annotations

import math

import highspy
import numpy as np
import pulp

_BOUND_STATUSES = frozenset({
    highspy.HighsModelStatus.kOptimal, highspy.HighsModelStatus.kTimeLimit,
    highspy.HighsModelStatus.kIterationLimit, highspy.HighsModelStatus.kSolutionLimit,
    highspy.HighsModelStatus.kInterrupt, highspy.HighsModelStatus.kObjectiveBound,
    highspy.HighsModelStatus.kObjectiveTarget})
"""Model statuses after which a MIP's ``mip_dual_bound`` is one HiGHS proved."""


def model_has_integers(h: highspy.Highs) -> bool:
    """Whether the model has integer columns (reads a copy of its LP: 0.05 s at 135k)."""
    return any(kind != highspy.HighsVarType.kContinuous for kind in h.getLp().integrality_)


def mip_dual_bound(h: highspy.Highs, has_integers: bool | None = None) -> float:
    """The lower bound HiGHS proved for the (minimising) model it last ran.

    Parameters
    ----------
    h
        A model after ``run()``.
    has_integers
        Whether the model has integer columns, when the caller knows (``None``: read from
        the model, a copy of its LP: 0.05 s at 135k columns).

    Returns
    -------
    float
        The dual bound, in the model's objective units; ``+inf`` when the model was proven
        infeasible; the objective when the model has no integer columns and was solved to
        optimality, or is empty (status ``Empty``: the objective offset); ``-inf`` when the
        run proved nothing (any status outside ``Optimal``, ``Time limit``, ``Iteration
        limit``, ``Solution limit``, ``Interrupt``, ``Objective bound``, ``Objective
        target``, or a non-finite value).
    """
    ms = h.getModelStatus()
    if ms == highspy.HighsModelStatus.kInfeasible:
        return math.inf
    if ms == highspy.HighsModelStatus.kModelEmpty:
        # no column: the optimum is the objective offset (HiGHS reports 0.0 whatever it is)
        return float(h.getLp().offset_)
    if not (model_has_integers(h) if has_integers is None else has_integers):
        v = float(h.getInfo().objective_function_value)
        return v if ms == highspy.HighsModelStatus.kOptimal and math.isfinite(v) else -math.inf
    if ms not in _BOUND_STATUSES:
        return -math.inf
    db = float(h.getInfo().mip_dual_bound)
    return db if math.isfinite(db) else -math.inf


def reset_scheduler() -> None:
    """Reset the calling thread's HiGHS task scheduler (the next run sets it up anew)."""
    reset = getattr(highspy.Highs, "resetThreadScheduler", None)
    if reset is None:                       # highspy before the per-thread scheduler
        highspy.Highs.resetGlobalScheduler(True)
    else:
        reset(True)


def run_highs(h: highspy.Highs) -> highspy.HighsStatus:
    """``h.run()``, and once more after :func:`reset_scheduler` if the run was refused.

    Within carbonsched every solve uses one thread, but a caller mixing thread counts on one
    thread (``solve_plan(threads=2)`` after a one-thread solve) would otherwise get master
    LPs and MIPs that never ran.

    Parameters
    ----------
    h
        A built model.

    Returns
    -------
    highspy.HighsStatus
        The status of the last run.
    """
    status = h.run()
    if (status == highspy.HighsStatus.kError
            and h.getModelStatus() == highspy.HighsModelStatus.kNotset):
        reset_scheduler()
        status = h.run()
    return status


def highs_with_start(start: dict[pulp.LpVariable, float], **kw) -> pulp.LpSolver:
    """PuLP's HiGHS interface, handing HiGHS a MIP start before it runs.

    ``start`` gives values of (some) integer variables; HiGHS completes a partial start by
    solving the sub-MIP with those values fixed (``setSolution`` with index/value arrays,
    highspy >= 1.8, the floor in ``pyproject.toml``;
    https://ergo-code.github.io/HiGHS/stable/guide/further/#mip-start). A start HiGHS cannot
    complete is ignored by it: the solve goes on as without one. The returned solver's
    ``start_accepted`` is False when ``setSolution`` refused the values outright.

    Parameters
    ----------
    start
        Values of (some) integer variables of the model to be solved. [-]
    **kw
        Options of :class:`pulp.HiGHS` (``msg``, ``timeLimit`` [s], ``gapRel`` [-], ...).

    Returns
    -------
    pulp.LpSolver
        A :class:`pulp.HiGHS` whose ``callSolver`` sets the start first.
    """
    class _WithStart(pulp.HiGHS):
        start_accepted: bool | None = None

        def callSolver(self, lp):
            # PuLP numbered the columns (var.index) when it built the HiGHS model
            idx = np.array([v.index for v in start], dtype=np.int32)
            val = np.array(list(start.values()), dtype=np.float64)
            st = lp.solverModel.setSolution(len(idx), idx, val)
            self.start_accepted = st != highspy.HighsStatus.kError
            lp.solverModel.run()

    return _WithStart(**kw)
