"""Polyak refinement of the master's multipliers (issue 13): valid, and as the hand count."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest

from carbonsched.plan import PlanStatus, solve_plan
from carbonsched.plan.colgen import (
    ColgenOptions,
    job_classes,
    lagrangian,
    lagrangian_warmup,
    make_layout,
)
from carbonsched.plan.sets import compile_sets

from .builders import JobWrapper, SiteWrapper, problem
from .test_colgen_bound import two_gangs_three_gpus


def _sets():
    sets = compile_sets(two_gangs_three_gpus())
    return sets, make_layout(sets, job_classes(sets))


def test_one_polyak_step_reaches_the_lp_value_by_hand():
    """Two 2-GPU, 2-hour jobs on 3 GPUs (0.4 kg placed, 4 kg left out; LP 2.6 kg).

    At λ = 0 both jobs are placed: L = 0.8, subgradient 4 − 3 = 1 GPU in each hour, norm 2.
    Polyak's step towards 2.6: (2.6 − 0.8) / 2 = 0.9 kg per GPU-hour. At λ = 0.9 a job costs
    0.4 + 2 GPUs × 2 h × 0.9 = 4.0 placed (= left out), so L = 2 × 4.0 − 0.9 × 3 × 2 = 2.6.
    """
    sets, lay = _sets()
    zero = np.zeros((1, 2, 1)), np.zeros((1, 2)), np.zeros((1, 2))
    one = lagrangian_warmup(sets, lay, 2.6, seconds=10, max_iter=1, start=zero)
    assert one.bound == pytest.approx(0.8)
    two = lagrangian_warmup(sets, lay, 2.6, seconds=10, max_iter=2, start=zero)
    assert two.bound == pytest.approx(2.6)
    # the best multipliers are returned as row duals (HiGHS sign: −λ on the capacity rows)
    assert -two.duals[lay.cap_base: lay.pow_base] == pytest.approx([0.9, 0.9])


def test_refinement_starts_from_the_given_multipliers():
    sets, lay = _sets()
    at = np.full((1, 2, 1), 0.9), np.zeros((1, 2)), np.zeros((1, 2))
    assert lagrangian(sets, lay, *at)[0] == pytest.approx(2.6)
    ref = lagrangian_warmup(sets, lay, 2.6, seconds=10, max_iter=1, start=at)
    assert ref.bound == pytest.approx(2.6)
    # negative multipliers are not valid ones: projected to zero, where L = 0.8
    neg = np.full((1, 2, 1), -5.0), np.full((1, 2), -1.0), np.zeros((1, 2))
    assert lagrangian_warmup(sets, lay, 2.6, seconds=10, max_iter=1,
                             start=neg).bound == pytest.approx(0.8)
    # a target above the dual optimum overshoots; the best bound seen is kept, never above it
    far = lagrangian_warmup(sets, lay, 10.0, seconds=10, max_iter=20, start=at)
    assert 2.6 - 1e-9 <= far.bound <= 2.6 + 1e-9


def _crowded():
    """Twelve jobs of 1-4 GPUs on two 4-GPU sites, 6 h, power-capped, CI rising and falling."""
    sites = [SiteWrapper(s).gpus("V", 4).cap_kw(2.5).obj() for s in ("a", "b")]
    rng = np.random.default_rng(3)
    jobs = [JobWrapper(f"j{k}").gpu_type("V").gpus(int(rng.integers(1, 5)))
            .hours(int(rng.integers(1, 4))).window(0, 6).kw_per_gpu(0.5).obj()
            for k in range(12)]
    return problem(sites, jobs, 6, ci={"a": [100, 80, 60, 60, 80, 100],
                                       "b": [50, 70, 90, 90, 70, 50]})


@pytest.mark.parametrize("method", ["smoothed", "subgradient"])
def test_refinement_when_column_generation_stops_early(method):
    """Column generation stopped after its first master (no time for another, forced here):
    the bound is refined, named in the note, and stays below the proven optimum."""
    prob = _crowded()
    exact = solve_plan(prob, method="milp", mip_gap=0.0)
    assert exact.status == PlanStatus.OPTIMAL
    opts = ColgenOptions(refine_method=method,
                         round_growth=1e9,        # never time for a second master
                         split_share=0.0,         # the bound is the refined one
                         warmup_share=0.0,        # a first master far from the LP
                         short_first_share=0.0)   # the master-LP path alone
    res = solve_plan(prob, method="colgen", mip_gap=0.0, time_limit_s=60, colgen_options=opts)
    assert "bound refined from" in res.solver.note
    assert res.solver.bound <= exact.totals["objective"] + 1e-6
    assert res.totals["objective"] >= exact.totals["objective"] - 1e-6
    # the refined multipliers also price a greedy plan: a candidate, named with its value,
    # feasible, so never below the optimum
    m = re.search(r"priced greedy on the refined multipliers (-?[0-9.]+)", res.solver.note)
    assert m, res.solver.note
    assert float(m.group(1)) >= exact.totals["objective"] - 1e-3
    # the refinement starts from the master's duals (about -7.6 kg: the first master is far
    # from the LP here) and returns the Lagrangian value at its last multipliers: what the method
    # guarantees is a valid bound (never above the optimum) that is no worse than its start.
    # Where the ascent stops is not pinned: it moves with the BLAS threads and the SciPy
    # version (3.162-3.300 kg of the optimum's 3.300 were measured).
    refined = re.search(r"bound refined from (-?[0-9.]+) to (-?[0-9.]+) by (.*?) \(column",
                        res.solver.note)
    assert refined, res.solver.note
    start, value = float(refined.group(1)), float(refined.group(2))
    assert start < value <= exact.totals["objective"] + 1e-6
    if method == "smoothed":
        assert refined.group(3).startswith("the smoothed dual from the last master's duals")
    else:
        assert refined.group(3) == "60 subgradient steps"
    # without the refinement there are no refined multipliers and no such candidate
    plain = solve_plan(prob, method="colgen", mip_gap=0.0, time_limit_s=60,
                       colgen_options=replace(opts, refine_rounds=0))
    assert "bound refined from" not in plain.solver.note
    assert "refined multipliers" not in plain.solver.note


def test_no_master_in_the_budget_plans_priced_greedy_without_rounding(monkeypatch):
    """A master cut before it solves leaves no LP to round: the rounding (priced greedy
    again, seconds at 10k jobs) is skipped and named; the plan stays valid, above the bound."""
    import highspy

    from carbonsched.plan import score_plan
    from carbonsched.plan.colgen import master

    from .test_properties import clean

    class CutMaster(highspy.Highs):
        """The master as HiGHS leaves it when its time limit strikes first."""

        def getModelStatus(self):
            return highspy.HighsModelStatus.kTimeLimit

    real = master.new_highs
    made: list[object] = []

    def first_is_cut(threads, time_limit_s):
        if made:                                  # only the master is cut
            return real(threads, time_limit_s)
        h = CutMaster()
        h.setOptionValue("output_flag", False)
        made.append(h)
        return h

    monkeypatch.setattr(master, "new_highs", first_is_cut)
    prob = two_gangs_three_gpus()
    # the master-LP path alone: its first HiGHS model is the master
    res = solve_plan(prob, method="colgen", mip_gap=0.0, time_limit_s=60,
                     colgen_options=ColgenOptions(short_first_share=0.0))
    note = res.solver.note
    assert "master LP stopped" in note and "no master LP solved in the budget" in note
    assert "LP rounding" not in note and "LP floor" not in note
    assert res.totals["objective"] == pytest.approx(4.4)      # one gang placed, one left out
    assert res.solver.bound <= 4.4 + 1e-9
    assert clean(score_plan(prob, res))
