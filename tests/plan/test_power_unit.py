"""The power rows' right-hand side rounded down to the site's power unit (PlanSets.power_rhs_kw).

Hand-checked: every draw that may land at a site is a whole number of the unit, so the rounded
cap loses no plan; a draw that is not a whole number of watts keeps the cap as it is.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given

from carbonsched.domain import RunningWork
from carbonsched.errors import WorkloadError
from carbonsched.plan import solve_plan
from carbonsched.plan.sets import PlanSets, compile_sets

from .builders import JobWrapper, SiteWrapper, demand, problem
from .test_properties import PROPS, instances


def _job(name: str, gpus: int, kw: float, *sites: str):
    w = JobWrapper(name).gpu_type("V").gpus(gpus).hours(1).window(0, 2).kw_per_gpu(kw)
    return (w.sites(*sites) if sites else w).obj()


def test_cap_rounded_down_to_the_gcd_of_the_draws():
    # draws 0.8 and 1.2 kW: unit 0.4 kW; 4.76 kW allows 11 units (4.4 kW), not 11.9
    site = SiteWrapper("a").gpus("V", 20).cap_kw(4.76).obj()
    sets = compile_sets(problem([site], [_job("j1", 2, 0.4), _job("j2", 3, 0.4)], 2))
    assert sets.power_rhs_kw[0] == pytest.approx([4.4, 4.4])
    assert sets.power_cap_kw[0] == pytest.approx([4.76, 4.76])


def test_cap_just_at_a_multiple_is_kept():
    # 0.3 / 0.1 is 2.9999999999999996 in floating point: still three units
    site = SiteWrapper("a").gpus("V", 20).cap_kw(0.3).obj()
    sets = compile_sets(problem([site], [_job("j1", 1, 0.1)], 2))
    assert sets.power_rhs_kw[0] == pytest.approx([0.3, 0.3])


def test_cap_just_below_a_multiple_is_not_rounded_up():
    # a 10.2 kW gang (8 GPUs of 1.275 kW): 30.599995 kW holds two, not three (30.6)
    site = SiteWrapper("a").gpus("V", 24).cap_kw(30.599995).obj()
    sets = compile_sets(problem([site], [_job("j1", 8, 1.275)], 2))
    assert sets.power_rhs_kw[0] == pytest.approx([20.4, 20.4])


def test_draw_not_a_whole_number_of_milliwatts_keeps_the_cap():
    # 0.4000005 kW: 11 of them (4.4000055 kW) fit under 4.76, so a 0.4 kW unit would be wrong
    site = SiteWrapper("a").gpus("V", 20).cap_kw(4.76).obj()
    sets = compile_sets(problem([site], [_job("j1", 1, 0.4), _job("j2", 1, 0.4000005)], 2))
    assert sets.power_rhs_kw[0] == pytest.approx([4.76, 4.76])


def test_milliwatt_unit():
    # A100 and V100 of the workload table: 0.8125 and 0.4375 kW per GPU, unit 62.5 W
    site = SiteWrapper("a").gpus("V", 20).cap_kw(4.0).obj()
    sets = compile_sets(problem([site], [_job("j1", 1, 0.8125), _job("j2", 1, 0.4375)], 2))
    assert sets.power_rhs_kw[0] == pytest.approx([4.0, 4.0])           # 64 units exactly
    site = SiteWrapper("a").gpus("V", 20).cap_kw(4.05).obj()
    sets = compile_sets(problem([site], [_job("j1", 1, 0.8125), _job("j2", 1, 0.4375)], 2))
    assert sets.power_rhs_kw[0] == pytest.approx([4.0, 4.0])


def test_negative_draw_keeps_the_cap():
    # a demand with a negative draw is refused where it is built ...
    with pytest.raises(WorkloadError, match=r"power_per_gpu_kw must be a finite number > 0 "
                                            r"\[kW\], got -1"):
        demand("eu", 0, 1, gpu_type="V", kw=-1.0)
    # ... and one that got past it (fields set by hand) still leaves the cap as it is
    site = SiteWrapper("a").gpus("V", 4).cap_kw(3.0).latency("eu", 5).obj()
    inf = demand("eu", 0, 1, gpu_type="V", kw=1.0)
    object.__setattr__(inf, "power_per_gpu_kw", -1.0)
    sets = compile_sets(problem([site], [_job("j1", 2, 1.0)], 2, [inf]))
    assert sets.power_rhs_kw[0].tolist() == [3.0, 3.0]


def test_inference_draw_counts_in_the_unit():
    # a 2-GPU job of 1 kW per GPU alone: unit 2 kW, cap 3 -> 2; an inference GPU of 1 kW at
    # the site brings the unit to 1 kW, so 3 kW stays
    site = SiteWrapper("a").gpus("V", 4).cap_kw(3.0).latency("eu", 5).obj()
    job = _job("j1", 2, 1.0)
    assert compile_sets(problem([site], [job], 2)).power_rhs_kw[0].tolist() == [2.0, 2.0]
    inf = demand("eu", 0, 1, gpu_type="V", kw=1.0)
    assert compile_sets(problem([site], [job], 2, [inf])).power_rhs_kw[0].tolist() == [3.0, 3.0]


def test_unit_is_per_site_and_counts_only_jobs_allowed_there():
    a = SiteWrapper("a").gpus("V", 4).cap_kw(3.0).obj()
    b = SiteWrapper("b").gpus("V", 4).cap_kw(3.0).obj()
    jobs = [_job("j1", 2, 1.0), _job("j2", 1, 1.0, "b")]
    rhs = compile_sets(problem([a, b], jobs, 2)).power_rhs_kw
    assert rhs[:, 0].tolist() == [2.0, 3.0]


def test_running_work_is_subtracted_before_rounding():
    # 5 kW cap, 0.5 kW running in hour 0: 4.5 kW left -> 4 kW in 2 kW units; hour 1: 5 -> 4
    site = SiteWrapper("a").gpus("V", 8).cap_kw(5.0).obj()
    prob = problem([site], [_job("j1", 2, 1.0)], 2)
    prob.running = [RunningWork(site="a", gpu_type="V", gpus=1, it_power_kw=0.5,
                                end=prob.slots[1])]
    sets = compile_sets(prob)
    assert sets.power_cap_kw[0].tolist() == [4.5, 5.0]
    assert sets.power_rhs_kw[0].tolist() == [4.0, 4.0]


def test_rounded_cap_loses_no_plan_at_the_limit():
    # a 3.3 kW grid connection at PUE 1.1 allows 3.3 / 1.1 = 2.9999999999999996 kW of IT
    # power: three 1 kW jobs still run together in hour 0
    site = SiteWrapper("a").gpus("V", 3).cap_kw(10.0).facility_cap_kw(3.3).obj()
    jobs = [JobWrapper(f"j{k}").gpu_type("V").gpus(1).hours(1).window(0, 1).kw_per_gpu(1.0)
            .obj() for k in range(3)]
    prob = problem([site], jobs, 2, pue={"a": 1.1})
    assert compile_sets(prob).power_rhs_kw[0] == pytest.approx([3.0, 3.0])
    for method in ("milp", "colgen"):
        res = solve_plan(prob, method=method, mip_gap=0.0)
        assert len(res.placements) == 3, method
        assert np.isclose(res.solver.bound, res.totals["objective"]), method


@PROPS
@given(instances())
def test_rounding_never_changes_the_optimum(case):
    """The exact MILP's optimum is the same with the physical caps as the power rows."""
    prob, _ = case
    rounded = solve_plan(prob, method="milp", mip_gap=0.0)
    descriptor = PlanSets.__dict__["power_rhs_kw"]
    try:
        PlanSets.power_rhs_kw = property(lambda self: np.asarray(self.power_cap_kw, float))
        physical = solve_plan(prob, method="milp", mip_gap=0.0)
    finally:
        PlanSets.power_rhs_kw = descriptor
    assert rounded.totals["objective"] == pytest.approx(physical.totals["objective"],
                                                        rel=1e-6, abs=1e-6)
