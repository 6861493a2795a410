"""Column generation's proven bound (issue 13): never above the optimum, and stronger than
the LP where gangs do not fit a few GPUs."""

from __future__ import annotations

import highspy
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carbonsched.plan import PlanStatus, score_plan, solve_plan
from carbonsched.plan.colgen import (
    ColgenOptions,
    job_classes,
    lagrangian,
    make_layout,
    site_bound,
    split_bound,
)
from carbonsched.plan.sets import compile_sets

from .builders import JobWrapper, SiteWrapper, problem
from .test_properties import clean, instances

PROPS = settings(max_examples=25, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def two_gangs_three_gpus():
    """Two 2-GPU jobs that must both run in hours 0-1 on a site with 3 GPUs.

    CI 100 g/kWh, PUE 1, 1 kW per GPU: a placed job emits 2 kW × 2 h × 0.1 = 0.4 kg; the
    unplaced penalty is 10 × 0.1 kg/kWh × 1 kW = 1 kg per GPU-hour, 4 kg per job. Only one
    fits: optimum 0.4 + 4 = 4.4 kg. The LP places 1.5 jobs: 0.6 + 0.5 × 4 = 2.6 kg.
    """
    site = SiteWrapper("a").gpus("V", 3).obj()
    jobs = [JobWrapper(f"j{k}").gpu_type("V").gpus(2).hours(2).window(0, 2).kw_per_gpu(1.0)
            .obj() for k in range(2)]
    return problem([site], jobs, 2, ci={"a": [100.0, 100.0]})


def _colgen_reaching(prob, optimum, options=None):
    """Column generation's plan, checked to reach ``optimum`` as the direct MILP proves it."""
    exact = solve_plan(prob, method="milp", mip_gap=0.0)
    assert exact.totals["objective"] == pytest.approx(optimum)
    res = solve_plan(prob, method="colgen", mip_gap=0.0, time_limit_s=60,
                     colgen_options=options)
    assert res.totals["objective"] == pytest.approx(optimum)
    return res


def test_type_split_bound_proves_the_gang_that_does_not_fit():
    res = _colgen_reaching(two_gangs_three_gpus(), 4.4)
    assert res.solver.bound == pytest.approx(4.4)          # the LP's bound is 2.6
    assert res.status == PlanStatus.OPTIMAL
    assert "GPU-type split" in res.solver.note


def test_split_bound_by_hand():
    sets = compile_sets(two_gangs_three_gpus())
    lay = make_layout(sets, job_classes(sets))
    zero = np.zeros((1, 2, 1)), np.zeros((1, 2)), np.zeros((1, 2))
    # without multipliers the Lagrangian places both jobs: 0.8 kg
    assert lagrangian(sets, lay, *zero)[0] == pytest.approx(0.8)
    sb = split_bound(sets, lay, *zero, upper=4.4, seconds=30, threads=1)
    assert sb.lagrangian == pytest.approx(0.8)
    assert sb.bound == pytest.approx(4.4)
    # with the LP's capacity price (1 kg per GPU-hour... any λ ≥ 0 is valid) still exact
    lam_c = np.full((1, 2, 1), 1.0)
    sb = split_bound(sets, lay, lam_c, zero[1], zero[2], upper=4.4, seconds=30, threads=1)
    assert sb.bound == pytest.approx(4.4)


@PROPS
@given(instances(), st.integers(0, 2**31 - 1))
def test_bounds_never_exceed_the_optimum(case, seed):
    prob, _ = case
    exact = solve_plan(prob, method="milp", mip_gap=0.0)
    if exact.status != PlanStatus.OPTIMAL:
        return
    opt = exact.totals["objective"]
    tol = 1e-6 * max(1.0, abs(opt))
    res = solve_plan(prob, method="colgen", mip_gap=0.0, time_limit_s=60)
    assert res.status in (PlanStatus.OPTIMAL, PlanStatus.FEASIBLE, PlanStatus.HEURISTIC)
    # no capacity, power (IT and facility), deadline, gang or SLO is broken
    assert clean(score_plan(prob, res))
    assert res.totals["objective"] >= opt - tol
    assert res.solver.bound is None or res.solver.bound <= opt + tol
    assert res.solver.bound is None or res.solver.bound <= res.totals["objective"] + tol
    # both split bounds are valid for any multipliers, not only the master's duals
    sets = compile_sets(prob)
    if len(sets.placeable) == 0:
        return
    lay = make_layout(sets, job_classes(sets))
    rng = np.random.default_rng(seed)
    n_s, n_t = sets.pue.shape
    lam = (rng.exponential(0.2, (n_s, n_t, len(sets.gpu_type))) * rng.integers(0, 2),
           rng.exponential(0.2, (n_s, n_t)) * rng.integers(0, 2),
           rng.exponential(0.2, (n_s, n_t)) * rng.integers(0, 2))
    sb = split_bound(sets, lay, *lam, upper=opt, seconds=20, threads=1)
    assert sb.bound <= opt + tol
    assert sb.lagrangian <= sb.bound + tol
    raw = rng.normal(0.0, 1.0, lay.n_rows)
    assert site_bound(sets, lay, raw, upper=opt, seconds=20, threads=1).bound <= opt + tol


def two_types_one_power_cap():
    """A 2-GPU V job and a 3-GPU W job, both in hours 0-1, on a site whose 4 kW IT cap fits one.

    1 kW per GPU, CI 100 g/kWh, PUE 1: V emits 0.4 kg and W 0.6 kg placed; unplaced they cost
    4 and 6 kg: optimum 4.6 kg (W runs). The LP runs W and half of V: 2.8 kg; the GPU-type
    split relaxes power, so both fit there: 1.0 kg. The cap is a whole number of the site's
    1 kW power unit, so rounding it (:attr:`PlanSets.power_rhs_kw`) proves nothing either: only
    a MIP that keeps power and both types proves 4.6.
    """
    site = SiteWrapper("a").gpus("V", 2).gpus("W", 3).cap_kw(4.0).obj()
    jobs = [JobWrapper(f"j{t}").gpu_type(t).gpus(n).hours(2).window(0, 2).kw_per_gpu(1.0).obj()
            for t, n in (("V", 2), ("W", 3))]
    return problem([site], jobs, 2, ci={"a": [100.0, 100.0]})


def two_gangs_over_a_fractional_power_cap():
    """Two 2-GPU jobs of 1 kW per GPU in hours 0-1 on a site with a 3 kW IT cap.

    One job fits (2 kW), not both (4 kW): optimum 4.4 kg (one placed, 0.4; one left out, 4).
    Every draw there is a multiple of 2 kW, so the power row's right-hand side is 2 kW, not 3,
    and the LP cannot run a job and a half: its bound is the optimum.
    """
    site = SiteWrapper("a").gpus("V", 4).cap_kw(3.0).obj()
    jobs = [JobWrapper(f"j{k}").gpu_type("V").gpus(2).hours(2).window(0, 2).kw_per_gpu(1.0)
            .obj() for k in range(2)]
    return problem([site], jobs, 2, ci={"a": [100.0, 100.0]})


def test_power_cap_rounded_to_the_site_power_unit_gives_the_lp_the_optimum():
    prob = two_gangs_over_a_fractional_power_cap()
    sets = compile_sets(prob)
    assert sets.power_cap_kw[0].tolist() == [3.0, 3.0]     # the cap itself is unchanged
    assert sets.power_rhs_kw[0].tolist() == [2.0, 2.0]
    # neither the type split nor the repair MIP may lift it: the LP alone proves 4.4
    res = _colgen_reaching(prob, 4.4, ColgenOptions(split_share=0.0, repair_all_options=0))
    assert res.solver.bound == pytest.approx(4.4)
    assert "MIP over every class" not in res.solver.note


def test_repair_mip_over_the_whole_model_proves_the_power_coupled_optimum():
    res = _colgen_reaching(two_types_one_power_cap(), 4.6)
    assert res.solver.bound == pytest.approx(4.6)          # LP 2.8, type split <= 2.8
    assert res.status == PlanStatus.OPTIMAL
    assert "bound from the MIP over every class and option: 2.800 -> 4.600" in res.solver.note


def test_repair_bound_is_not_taken_when_the_mip_fixes_work():
    # over every class but not every option (the instance past repair_all_options) the
    # repair MIP is a restriction: its dual bound bounds nothing and is not reported
    res = solve_plan(two_types_one_power_cap(), method="colgen", mip_gap=0.0, time_limit_s=60,
                     colgen_options=ColgenOptions(repair_all_options=0))
    assert res.totals["objective"] == pytest.approx(4.6)
    assert res.solver.bound == pytest.approx(2.8)
    assert "MIP over every class" not in res.solver.note
    assert res.status != PlanStatus.OPTIMAL              # unproven: 4.6 against 2.8


def _int_model(lo: float, hi: float) -> highspy.Highs:
    """min −x over the integers lo ≤ x ≤ hi (x ≤ 5 via a row, so presolve has work)."""
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.addCols(1, np.array([-1.0]), np.array([lo]), np.array([hi]), 0, np.zeros(0, np.int32),
              np.zeros(0, np.int32), np.zeros(0))
    h.addRows(1, np.array([-highspy.kHighsInf]), np.array([5.0]), 1,
              np.array([0], np.int32), np.array([0], np.int32), np.array([1.0]))
    h.changeColsIntegrality(1, np.array([0], np.int32), np.array([1], np.uint8))
    return h


def test_mip_dual_bound_only_after_a_run_that_proved_one():
    """HiGHS leaves ``mip_dual_bound`` at 0.0 when a MIP never ran (or its run failed): for
    a MIP whose optimum is −5 that would read as a proof of 0.0 — refused."""
    from carbonsched.plan.highs import mip_dual_bound

    solved = _int_model(0.0, 10.0)
    solved.run()
    assert mip_dual_bound(solved) == pytest.approx(-5.0)
    never = _int_model(0.0, 10.0)
    assert float(never.getInfo().mip_dual_bound) == 0.0      # the trap: above the optimum
    assert mip_dual_bound(never) == -np.inf
    infeasible = _int_model(6.0, 10.0)                        # x ≥ 6 against x ≤ 5
    infeasible.run()
    assert mip_dual_bound(infeasible) == np.inf
    # no integer column: HiGHS leaves the MIP dual bound at 0.0 though the optimum is −5
    lp = _int_model(0.0, 10.0)
    lp.changeColsIntegrality(1, np.array([0], np.int32), np.array([0], np.uint8))
    lp.run()
    assert mip_dual_bound(lp) == pytest.approx(-5.0)
    # nothing to decide (status Empty): the objective offset is exact
    empty = highspy.Highs()
    empty.setOptionValue("output_flag", False)
    empty.changeObjectiveOffset(-2.5)
    empty.run()
    assert empty.getModelStatus() == highspy.HighsModelStatus.kModelEmpty
    assert mip_dual_bound(empty) == pytest.approx(-2.5)


def test_a_site_mip_that_did_not_run_proves_nothing(monkeypatch):
    """Site MIPs whose run did nothing (status Not Set, dual bound left at 0.0) leave each
    site at its Lagrangian. An assignment dual of 5 kg per job makes the site MIP's value
    negative (an option costs 0.4 − 5 kg): constant 2 × 5 + 2 × min(0, 4 − 5) = 8, site
    Lagrangian 2 × (−4.6) = −9.2, so the bound is −1.2 kg; taking the 0.0 as a proof gave
    8 + 0 = 8.0 kg, above the optimum (4.4 kg)."""
    from carbonsched.plan.colgen import bounds

    class NoRun(highspy.Highs):
        def run(self):
            return highspy.HighsStatus.kOk

    def fake(threads, time_limit_s):
        h = NoRun()
        h.setOptionValue("output_flag", False)
        return h

    sets = compile_sets(two_gangs_three_gpus())
    lay = make_layout(sets, job_classes(sets))
    raw = np.zeros(lay.n_rows)
    raw[lay.assign_row[lay.reps]] = 5.0
    real = site_bound(sets, lay, raw, upper=100.0, seconds=30, threads=1)
    assert real.lagrangian == pytest.approx(-1.2)
    assert real.bound == pytest.approx(3.4)        # one job fits: 8 − 4.6
    monkeypatch.setattr(bounds, "new_highs", fake)
    sb = site_bound(sets, lay, raw, upper=100.0, seconds=30, threads=1)
    assert sb.lagrangian == pytest.approx(-1.2)
    assert sb.bound == pytest.approx(-1.2)


def test_split_bound_counts_only_types_that_rose_by_the_least_amount():
    from carbonsched.plan.colgen import split_rises

    min_kg = ColgenOptions().split_note_min_kg

    lag = 118.607
    per_type = {"V100M16": (lag, lag + min_kg),          # at the limit: counts
                "P100": (143.9, 143.9 + 0.999 * min_kg),  # summation noise
                "A100": (50.0, 50.0)}
    assert split_rises(per_type) == [f"V100M16 {lag:.3f}->{lag + min_kg:.3f}"]
    assert split_rises({"P100": per_type["P100"]}) == []
