"""HiGHS's thread scheduler: a solve after a run with another thread count on one thread.

highspy 1.16.0 sets up one task scheduler per thread with the first run's thread count and
refuses (``kError``, model status ``Not Set``) a later model on that thread asking for
another; the planner resets it and runs again (:func:`carbonsched.plan.highs.run_highs`,
``solve.run_milp``).
"""

from __future__ import annotations

import highspy
import numpy as np
import pytest

from carbonsched.plan import PlanStatus, solve_plan
from carbonsched.plan.highs import reset_scheduler, run_highs
from carbonsched.plan.solve import probe_solver

from .test_colgen_bound import two_gangs_three_gpus


def _tiny(threads: int) -> highspy.Highs:
    """max x over the integers 0 ≤ x ≤ 3, with ``threads`` threads (optimum −3)."""
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", threads)
    h.addCols(1, np.array([-1.0]), np.array([0.0]), np.array([3.0]), 0,
              np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0))
    h.changeColsIntegrality(1, np.array([0], np.int32), np.array([1], np.uint8))
    return h


@pytest.fixture
def scheduler_of_two_threads():
    """This thread's HiGHS scheduler set up for 2 threads (the planner runs with 1), after
    the solver probe has run and been cached (as in a long-running process)."""
    assert probe_solver("highs") == ""
    reset_scheduler()
    assert _tiny(2).run() == highspy.HighsStatus.kOk
    if _tiny(1).run() != highspy.HighsStatus.kError:
        pytest.skip("this highspy does not refuse a second thread count")
    yield
    reset_scheduler()


def test_run_highs_runs_a_refused_model_again(scheduler_of_two_threads):
    h = _tiny(1)
    assert run_highs(h) == highspy.HighsStatus.kOk
    assert h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    assert h.getInfo().objective_function_value == pytest.approx(-3.0)


@pytest.mark.parametrize("method", ["colgen", "milp"])
def test_a_solve_after_a_run_with_another_thread_count(scheduler_of_two_threads, method):
    """Optimum 4.4 kg (one of the two gangs fits), proven, by HiGHS. Without the reset,
    column generation's master LP and MIPs never ran (status heuristic, bound 2.6) and the
    direct MILP's HiGHS run was refused (the plan fell back to CBC)."""
    res = solve_plan(two_gangs_three_gpus(), method=method, mip_gap=0.0, time_limit_s=60,
                     threads=1)
    assert res.solver.name == "highs"
    assert res.totals["objective"] == pytest.approx(4.4)
    assert res.solver.bound == pytest.approx(4.4)
    assert res.status == PlanStatus.OPTIMAL
    assert "Not Set" not in res.solver.note and "fell back" not in res.solver.note
