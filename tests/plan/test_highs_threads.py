"""HiGHS's per-process thread scheduler: a solve after a run with another thread count.

highspy 1.16.0 sets up one scheduler per process with the first run's thread count and
refuses (``kError``, model status ``Not Set``) a later model asking for another; the planner
resets it and runs again (:func:`carbonsched.plan.colgen.run_highs`, ``solve.run_milp``).
"""

from __future__ import annotations

import highspy
import numpy as np
import pytest

from carbonsched.plan import PlanStatus, solve_plan

from .test_colgen_bound import two_gangs_three_gpus


def _tiny_run(threads: int) -> highspy.HighsStatus:
    """max x over the integers 0 ≤ x ≤ 3, with ``threads`` threads."""
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", threads)
    h.addCols(1, np.array([-1.0]), np.array([0.0]), np.array([3.0]), 0,
              np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0))
    h.changeColsIntegrality(1, np.array([0], np.int32), np.array([1], np.uint8))
    return h.run()


@pytest.fixture
def scheduler_of_two_threads():
    """The process's HiGHS scheduler set up for 2 threads (the planner runs with 1)."""
    highspy.Highs.resetGlobalScheduler(True)
    assert _tiny_run(2) == highspy.HighsStatus.kOk
    # the trap this guards against: a one-thread model is now refused
    assert _tiny_run(1) == highspy.HighsStatus.kError
    yield
    highspy.Highs.resetGlobalScheduler(True)


@pytest.mark.parametrize("method", ["colgen", "milp"])
def test_a_solve_after_a_run_with_another_thread_count(scheduler_of_two_threads, method):
    """Optimum 4.4 kg (one of the two gangs fits), proven; without the reset column
    generation's master and MIPs never ran and the direct MILP had no incumbent."""
    res = solve_plan(two_gangs_three_gpus(), method=method, mip_gap=0.0, time_limit_s=60,
                     threads=1)
    assert res.totals["objective"] == pytest.approx(4.4)
    assert res.solver.bound == pytest.approx(4.4)
    assert res.status == PlanStatus.OPTIMAL
    assert "Not Set" not in res.solver.note
