"""score_plan, the independent recount behind every "0 violations", shown known-bad plans.

One plan per constraint family with exactly one violation of that kind (the count asserted is
the right value, not just "> 0"), one plan that sits exactly at every limit and must count
nothing, and hand-computed emissions, energy and surplus. Together with ``test_model.py`` these
are the tests the mutation run of ``carbonsched/plan/result.py`` uses (docs/mutation.md).
"""

from __future__ import annotations

import pandas as pd
import pytest

from carbonsched.domain import InferencePlacement, Placement
from carbonsched.plan import PlanResult, PlanStatus, SolverRecord, score_plan
from carbonsched.plan.result import (
    VIOLATION_FIELDS,
    emissions_by_site_hour,
    recount_violations,
)

from .builders import JobWrapper, SiteWrapper, at, demand, problem

H = pd.Timedelta(hours=1)


def place(job_id: str, site: str, start: int, hours: int, gpus: int = 1,
          gpu_type: str = "H100") -> Placement:
    return Placement(job_id=job_id, site=site, start=at(start), end=at(start) + hours * H,
                     gpu_type=gpu_type, gpus=gpus, energy_kwh=0.0, emissions_kg=0.0)


def serve(area: str, hour: int, site: str, gpus: int, gpu_type: str = "H100"
          ) -> InferencePlacement:
    return InferencePlacement(area=area, hour=at(hour), site=site, gpu_type=gpu_type, gpus=gpus,
                              energy_kwh=0.0, emissions_kg=0.0)


def plan(placements=(), inference=()) -> PlanResult:
    return PlanResult(status=PlanStatus.FEASIBLE,
                      solver=SolverRecord(name="test", status=PlanStatus.FEASIBLE),
                      placements=list(placements), inference=list(inference))


def counts(prob, res) -> dict[str, int]:
    sc = score_plan(prob, res)
    return {f: getattr(sc, f) for f in VIOLATION_FIELDS}


ZERO = dict.fromkeys(VIOLATION_FIELDS, 0)


def only(field: str, n: int = 1) -> dict[str, int]:
    return {**ZERO, field: n}


@pytest.fixture
def sites():
    # a: 4 H100, 10 kW cap, 20 ms to "eu"; b: 4 H100 + 2 A100, 20 ms to "eu" ... see each test
    return [SiteWrapper("a").gpus("H100", 4).cap_kw(10.0).latency("eu", 20).obj(),
            SiteWrapper("b").gpus("H100", 4).gpus("A100", 2).cap_kw(10.0)
            .latency("eu", 80).obj()]


# --- one known-bad plan per family --------------------------------------------------------------

def test_gang_wrong_gpu_count_is_counted(sites):
    prob = problem(sites, [JobWrapper("j").gpus(2).hours(2).window(0, 6).obj()], 6)
    assert counts(prob, plan([place("j", "a", 0, 2, gpus=1)])) == only("gang_violations")


def test_gang_wrong_duration_is_counted(sites):
    prob = problem(sites, [JobWrapper("j").gpus(2).hours(2).window(0, 6).obj()], 6)
    assert counts(prob, plan([place("j", "a", 0, 3, gpus=2)])) == only("gang_violations")


def test_residency_site_not_allowed_is_counted(sites):
    prob = problem(sites, [JobWrapper("j").gpus(1).hours(1).sites("a").window(0, 6).obj()], 6)
    assert counts(prob, plan([place("j", "b", 0, 1)])) == only("gang_violations")
    # the allowed site is clean
    assert counts(prob, plan([place("j", "a", 0, 1)])) == ZERO


def test_gpu_type_mismatch_is_counted(sites):
    prob = problem(sites, [JobWrapper("j").gpu_type("A100").gpus(1).window(0, 6).obj()], 6)
    # the plan says H100 for an A100 job
    assert counts(prob, plan([place("j", "b", 0, 1, gpu_type="H100")])) == \
        only("gang_violations")


def test_site_without_the_gpu_type_is_counted(sites):
    prob = problem(sites, [JobWrapper("j").gpu_type("A100").gpus(1).window(0, 6).obj()], 6)
    # site a has no A100 at all: a gang violation, and one capacity cell over (1 > 0)
    c = counts(prob, plan([place("j", "a", 0, 1, gpu_type="A100")]))
    assert c == {**ZERO, "gang_violations": 1, "capacity_violations": 1}


def test_unknown_job_or_site_is_counted(sites):
    prob = problem(sites, [JobWrapper("j").window(0, 6).obj()], 6)
    assert counts(prob, plan([place("ghost", "a", 0, 1)])) == only("gang_violations")
    assert counts(prob, plan([place("j", "mars", 0, 1)])) == only("gang_violations")


def test_double_placement_is_counted(sites):
    prob = problem(sites, [JobWrapper("j").gpus(1).hours(1).window(0, 6).obj()], 6)
    assert counts(prob, plan([place("j", "a", 0, 1), place("j", "b", 3, 1)])) == \
        only("gang_violations")
    three = plan([place("j", "a", 0, 1), place("j", "b", 3, 1), place("j", "a", 4, 1)])
    assert counts(prob, three) == only("gang_violations", 2)


def test_start_before_earliest_start_is_counted(sites):
    prob = problem(sites, [JobWrapper("j").hours(2).window(2, 6).obj()], 6)
    assert counts(prob, plan([place("j", "a", 1, 2)])) == only("deadline_misses")


def test_end_after_deadline_is_counted(sites):
    prob = problem(sites, [JobWrapper("j").hours(2).window(0, 4).obj()], 6)
    assert counts(prob, plan([place("j", "a", 3, 2)])) == only("deadline_misses")


def test_running_past_the_horizon_is_allowed_starting_after_it_is_counted(sites):
    # window to hour 30, horizon 24 h: starting at 23 and ending at 25 is inside the window;
    # a start is decided inside the horizon, the run may continue past its end (issue 14)
    prob = problem(sites, [JobWrapper("j").hours(2).window(0, 30).obj()], 24)
    assert counts(prob, plan([place("j", "a", 23, 2)])) == ZERO
    # a start at or after the horizon end is not this plan's decision
    assert counts(prob, plan([place("j", "a", 24, 2)])) == only("deadline_misses")
    # past the deadline still counts, inside the horizon or not
    tight = problem(sites, [JobWrapper("j").hours(2).window(0, 24).obj()], 24)
    assert counts(tight, plan([place("j", "a", 23, 2)])) == only("deadline_misses")


def test_starting_before_the_horizon_is_counted(sites):
    # window opens an hour before the first slot; starting there is in the window, not the horizon
    job = JobWrapper("j").hours(2).window(0, 6).obj()
    job = type(job)(**{**job.__dict__, "earliest_start": at(-1)})
    prob = problem(sites, [job], 6)
    assert counts(prob, plan([place("j", "a", -1, 2)])) == only("deadline_misses")


def test_capacity_one_gpu_over_is_counted(sites):
    prob = problem(sites, [JobWrapper("j1").gpus(2).window(0, 6).obj(),
                           JobWrapper("j2").gpus(3).window(0, 6).obj()], 6)
    assert counts(prob, plan([place("j1", "a", 1, 1, gpus=2), place("j2", "a", 1, 1, gpus=3)])) \
        == only("capacity_violations")


def test_capacity_is_counted_in_every_hour_not_just_the_first(sites):
    # j1 holds 3 GPUs for hours 0-2; j2 adds 2 in hour 2 only: one cell (a, 2, H100) is over
    prob = problem(sites, [JobWrapper("j1").gpus(3).hours(3).kw_per_gpu(0.1).window(0, 6).obj(),
                           JobWrapper("j2").gpus(2).hours(1).kw_per_gpu(0.1).window(0, 6).obj()],
                   6)
    res = plan([place("j1", "a", 0, 3, gpus=3), place("j2", "a", 2, 1, gpus=2)])
    assert counts(prob, res) == only("capacity_violations")
    # and a job over capacity for its whole 3 hours is three cells
    prob = problem(sites, [JobWrapper("j").gpus(5).hours(3).kw_per_gpu(0.1).window(0, 6).obj()],
                   6)
    c = counts(prob, plan([place("j", "a", 0, 3, gpus=5)]))
    assert c["capacity_violations"] == 3


def test_power_one_kw_over_is_counted(sites):
    # 11 kW on a 10 kW cap (2 GPUs at 5.5 kW), capacity fine
    prob = problem(sites, [JobWrapper("j").gpus(2).kw_per_gpu(5.5).window(0, 6).obj()], 6)
    assert counts(prob, plan([place("j", "a", 0, 1, gpus=2)])) == only("power_cap_violations")


def test_power_is_counted_in_every_hour(sites):
    prob = problem(sites, [JobWrapper("j1").gpus(1).hours(4).kw_per_gpu(6.0).window(0, 6).obj(),
                           JobWrapper("j2").gpus(1).hours(2).kw_per_gpu(6.0).window(0, 6).obj()],
                   6)
    res = plan([place("j1", "a", 0, 4), place("j2", "a", 2, 2)])
    assert counts(prob, res) == only("power_cap_violations", 2)


def test_inference_outside_its_slo_is_counted(sites):
    prob = problem(sites, [], 6, inference=[demand("eu", 1, 2, slo_ms=50)])
    # b is 80 ms from eu, the SLO is 50 ms
    assert counts(prob, plan(inference=[serve("eu", 1, "b", 2)])) == only("slo_violations")
    assert counts(prob, plan(inference=[serve("eu", 1, "a", 2)])) == ZERO


def test_inference_tiers_of_one_area_hour_are_checked_as_an_assignment(sites):
    # two demands of eu in hour 1: a loose one (100 ms) and a strict one (50 ms); a is 20 ms
    # away, b 80 ms. The placements merge them per site, so the recount must ask whether some
    # assignment meets both SLOs, not hold every site to one demand's SLO.
    prob = problem(sites, [], 6, inference=[demand("eu", 1, 1, slo_ms=100),
                                            demand("eu", 1, 1, slo_ms=50)])
    assert counts(prob, plan(inference=[serve("eu", 1, "a", 1), serve("eu", 1, "b", 1)])) \
        == ZERO                                   # strict from a, loose from b
    assert counts(prob, plan(inference=[serve("eu", 1, "a", 2)])) == ZERO
    # both from b: the strict demand has no GPU within 50 ms
    assert counts(prob, plan(inference=[serve("eu", 1, "b", 2)])) == only("slo_violations")


def test_inference_short_or_unserved_is_counted(sites):
    prob = problem(sites, [], 6, inference=[demand("eu", 1, 3, slo_ms=50),
                                            demand("eu", 2, 1, slo_ms=50)])
    # 2 of 3 GPUs served in hour 1, nothing in hour 2: two demands short
    assert counts(prob, plan(inference=[serve("eu", 1, "a", 2)])) == only("slo_violations", 2)


def test_inference_for_an_unknown_demand_or_site_is_counted(sites):
    prob = problem(sites, [], 6, inference=[demand("eu", 1, 1, slo_ms=50)])
    assert counts(prob, plan(inference=[serve("eu", 1, "a", 1), serve("eu", 3, "a", 1)])) == \
        only("slo_violations")
    assert counts(prob, plan(inference=[serve("eu", 1, "a", 1), serve("eu", 1, "mars", 1)])) \
        == only("slo_violations")


def test_inference_at_a_site_without_the_type_is_counted(sites):
    prob = problem(sites, [], 6, inference=[demand("eu", 1, 1, slo_ms=100, gpu_type="A100")])
    c = counts(prob, plan(inference=[serve("eu", 1, "a", 1, gpu_type="A100")]))
    assert c == {**ZERO, "slo_violations": 1, "capacity_violations": 1}


def test_inference_load_counts_for_capacity_and_power(sites):
    prob = problem(sites, [JobWrapper("j").gpus(3).kw_per_gpu(3.0).window(0, 6).obj()], 6,
                   inference=[demand("eu", 0, 2, slo_ms=50, kw=0.5)])
    res = plan([place("j", "a", 0, 1, gpus=3)], [serve("eu", 0, "a", 2)])
    # 3 + 2 = 5 GPUs > 4; 9 + 1 = 10 kW is exactly the cap (not over)
    assert counts(prob, res) == only("capacity_violations")
    prob = problem(sites, [JobWrapper("j").gpus(3).kw_per_gpu(3.0).window(0, 6).obj()], 6,
                   inference=[demand("eu", 0, 1, slo_ms=50, kw=1.5)])
    res = plan([place("j", "a", 0, 1, gpus=3)], [serve("eu", 0, "a", 1)])
    assert counts(prob, res) == only("power_cap_violations")     # 9 + 1.5 = 10.5 kW


# --- exactly at every limit: nothing to count ----------------------------------------------------

def test_a_plan_exactly_at_every_limit_counts_nothing(sites):
    jobs = [
        # starts at its earliest start and ends at its deadline, which is the horizon's end
        JobWrapper("edge").gpus(2).hours(3).kw_per_gpu(2.5).window(3, 6).obj(),
        # together with "edge": 4 of 4 GPUs and 10.0 of 10.0 kW at site a in hours 3-5
        JobWrapper("fill").gpus(2).hours(3).kw_per_gpu(2.5).window(3, 6).obj(),
        JobWrapper("resident").gpus(4).hours(1).sites("b").window(0, 1).obj(),
    ]
    prob = problem(sites, jobs, 6, inference=[demand("eu", 0, 4, slo_ms=20, kw=2.5)])
    res = plan([place("edge", "a", 3, 3, gpus=2), place("fill", "a", 3, 3, gpus=2),
                place("resident", "b", 0, 1, gpus=4)],
               [serve("eu", 0, "a", 4)])          # latency 20 ms == SLO 20 ms; 4 GPUs, 10 kW
    assert counts(prob, res) == ZERO
    assert recount_violations(prob, res) == {}
    sc = score_plan(prob, res)
    assert sc.unplaced_gpu_hours == 0.0
    assert sc.energy_kwh == pytest.approx(10 * 3 + 4 * 1 + 10)


def test_recount_names_each_family_it_finds(sites):
    prob = problem(sites, [JobWrapper("j").gpus(2).kw_per_gpu(5.5).window(0, 2).obj()], 6)
    res = plan([place("j", "a", 0, 1, gpus=2), place("j", "a", 1, 2, gpus=2)])
    # placed twice (gang 1) and the second for 2 h instead of 1 (gang 1); it ends at 3 >
    # deadline 2 (1 miss); 11 kW > 10 kW in hours 0 and 1 (load counted for the job's own
    # duration from each start: 2 cells)
    assert recount_violations(prob, res) == {"gang_violations": 2, "deadline_misses": 1,
                                             "power_cap_violations": 2}


# --- emissions, energy and surplus by hand -------------------------------------------------------

def test_emissions_energy_and_surplus_by_hand():
    s = [SiteWrapper("a").gpus("H100", 8).obj()]
    jobs = [JobWrapper("j").gpus(4).hours(2).kw_per_gpu(1.0).window(0, 4).obj(),
            JobWrapper("k").gpus(2).hours(1).kw_per_gpu(1.0).window(0, 4).obj()]
    prob = problem(s, jobs, 4, ci={"a": [100, 200, 300, 400]}, pue={"a": 1.5},
                   surplus={"a": [0.0, 3.0, 0.0, 0.0]})
    res = plan([place("j", "a", 0, 2, gpus=4)])
    sc = score_plan(prob, res)
    # facility 4 kW x 1.5 = 6 kWh per hour; hour 1 absorbs 3 kWh of surplus
    assert sc.energy_kwh == pytest.approx(12.0)
    assert sc.surplus_absorbed_kwh == pytest.approx(3.0)
    assert sc.emissions_kg == pytest.approx((6 * 100 + (6 - 3) * 200) / 1000)
    # k is unplaced: 2 GPU-hours, penalised in the objective
    assert sc.unplaced_gpu_hours == pytest.approx(2.0)
    from carbonsched.plan import compile_sets

    pen = compile_sets(prob).penalty_per_gpu_hour
    assert pen > 0
    assert sc.objective == pytest.approx(sc.emissions_kg + 2.0 * pen)
    # other signals (e.g. the actual grid) are used when given
    actual = prob.signals.copy()
    actual["carbon_intensity_g_per_kwh"] = 10.0
    assert score_plan(prob, res, actual).emissions_kg == pytest.approx((6 + 3) * 10 / 1000)


def test_pre_check_rejects_are_not_penalised():
    s = [SiteWrapper("a").gpus("H100", 2).obj()]
    jobs = [JobWrapper("big").gpus(8).hours(1).window(0, 4).obj()]     # GangTooLarge
    prob = problem(s, jobs, 4)
    sc = score_plan(prob, plan())
    assert sc.unplaced_gpu_hours == pytest.approx(8.0)
    assert sc.objective == pytest.approx(0.0)


def test_emissions_by_site_hour_shares():
    import numpy as np

    fac, ab, em = emissions_by_site_hour(np.array([[2.0, 4.0]]), np.array([[1.5, 1.0]]),
                                         np.array([[100.0, 50.0]]), np.array([[1.0, 10.0]]))
    assert fac.tolist() == [[3.0, 4.0]]
    assert ab.tolist() == [[1.0, 4.0]]
    assert em.tolist() == [[pytest.approx(0.2), pytest.approx(0.0)]]


def test_build_plan_result_shares_absorbed_surplus_pro_rata():
    # two jobs share a site-hour with 3 kW of surplus: each job's emissions are its share of
    # the site-hour's facility energy (README "How emissions are shared")
    from carbonsched.plan import compile_sets
    from carbonsched.plan.result import build_plan_result

    s = [SiteWrapper("a").gpus("H100", 8).obj()]
    jobs = [JobWrapper("j").gpus(3).window(0, 2).obj(), JobWrapper("k").gpus(1).window(0, 2).obj()]
    prob = problem(s, jobs, 2, ci={"a": [100, 100]}, pue={"a": 1.0}, surplus={"a": [2.0, 0.0]})
    sets = compile_sets(prob)
    rec = SolverRecord(name="t", status=PlanStatus.FEASIBLE)
    import numpy as np

    res = build_plan_result(sets, np.array([[0, 0, 0], [1, 0, 0]]),
                            np.zeros((0, 1), dtype=np.int64), PlanStatus.FEASIBLE, rec)
    by = {p.job_id: p for p in res.placements}
    # 4 kWh facility, 2 absorbed, 2 x 100 g = 0.2 kg; shared 3:1
    assert res.totals["emissions_kg"] == pytest.approx(0.2)
    assert by["j"].emissions_kg == pytest.approx(0.15)
    assert by["k"].emissions_kg == pytest.approx(0.05)
    assert by["j"].energy_kwh == pytest.approx(3.0)
    assert res.totals["surplus_absorbed_kwh"] == pytest.approx(2.0)
    assert res.totals["jobs_placed"] == 2.0 and res.totals["jobs_unplaced"] == 0.0


# --- several violations of one kind in one plan are all counted ---------------------------------

def test_every_violation_is_counted_not_just_whether_there_is_one(sites):
    prob = problem(sites, [JobWrapper("j1").gpus(2).hours(1).window(2, 4).obj(),
                           JobWrapper("j2").gpus(2).hours(1).window(2, 4).obj(),
                           JobWrapper("j3").gpus(1).hours(1).window(0, 6).obj()], 6,
                   inference=[demand("eu", 1, 1, slo_ms=50), demand("eu", 2, 1, slo_ms=50)])
    res = plan([place("ghost", "a", 0, 1),                      # unknown job: gang 1
                place("j1", "a", 0, 1, gpus=1),                 # wrong gang, too early
                place("j2", "a", 5, 1, gpus=1),                 # wrong gang, too late
                place("j3", "a", 1, 1)],
               [serve("eu", 1, "b", 1), serve("eu", 2, "b", 1),   # both outside the SLO
                serve("eu", 4, "a", 1)])                        # no such demand
    assert counts(prob, res) == {**ZERO, "gang_violations": 3, "deadline_misses": 2,
                                 "slo_violations": 3}


def test_inference_at_a_site_with_no_latency_to_the_area_is_outside_the_slo():
    s = [SiteWrapper("a").gpus("H100", 4).latency("eu", 5).obj(),
         SiteWrapper("far").gpus("H100", 4).obj()]                   # no latency entry for eu
    prob = problem(s, [], 3, inference=[demand("eu", 0, 1, slo_ms=500)])
    assert counts(prob, plan(inference=[serve("eu", 0, "far", 1)])) == only("slo_violations")


def test_demands_with_the_same_key_are_summed():
    s = [SiteWrapper("a").gpus("H100", 8).latency("eu", 5).obj()]
    prob = problem(s, [], 3, inference=[demand("eu", 0, 2), demand("eu", 0, 3)])
    assert counts(prob, plan(inference=[serve("eu", 0, "a", 5)])) == ZERO
    assert counts(prob, plan(inference=[serve("eu", 0, "a", 4)])) == only("slo_violations")


def test_load_of_a_placement_starting_before_the_horizon_counts_from_the_first_slot():
    s = [SiteWrapper("a").gpus("H100", 4).obj()]
    job = JobWrapper("early").gpus(3).hours(2).window(0, 6).obj()
    job = type(job)(**{**job.__dict__, "earliest_start": at(-1)})
    prob = problem(s, [job, JobWrapper("k").gpus(2).window(0, 6).obj()], 6)
    # early runs [-1, 1): 3 GPUs in slot 0; k adds 2 in slot 0 -> one capacity cell over
    res = plan([place("early", "a", -1, 2, gpus=3), place("k", "a", 0, 1, gpus=2)])
    assert counts(prob, res) == {**ZERO, "deadline_misses": 1, "capacity_violations": 1}


def test_power_within_the_tolerance_of_the_cap_is_not_counted():
    s = [SiteWrapper("a").gpus("H100", 8).cap_kw(10.0).obj()]
    # 10.000001 kW on a 10 kW cap is exactly at the 1e-6 kW tolerance: not counted
    assert 10.0 + 1e-6 == 10.000001
    prob = problem(s, [JobWrapper("j").gpus(1).kw_per_gpu(10.000001).window(0, 2).obj()], 2)
    assert counts(prob, plan([place("j", "a", 0, 1, gpus=1)])) == ZERO
    prob = problem(s, [JobWrapper("j").gpus(1).kw_per_gpu(10.0000011).window(0, 2).obj()], 2)
    assert counts(prob, plan([place("j", "a", 0, 1, gpus=1)])) == only("power_cap_violations")


def test_unplaced_gpu_hours_sum_every_unplaced_job():
    s = [SiteWrapper("a").gpus("H100", 2).obj()]
    jobs = [JobWrapper("u1").gpus(2).hours(3).window(0, 6).obj(),
            JobWrapper("u2").gpus(1).hours(4).window(0, 6).obj(),
            JobWrapper("big").gpus(8).hours(2).window(0, 6).obj()]    # pre-check reject
    prob = problem(s, jobs, 6)
    sc = score_plan(prob, plan())
    assert sc.unplaced_gpu_hours == pytest.approx(6 + 4 + 16)
    from carbonsched.plan import compile_sets

    pen = compile_sets(prob).penalty_per_gpu_hour
    assert sc.objective == pytest.approx(pen * (6 + 4))


# --- build_plan_result: placements, inference and totals by hand -------------------------------

def _built(unplaced_reason=None):
    import numpy as np

    from carbonsched.plan import compile_sets
    from carbonsched.plan.result import build_plan_result

    s = [SiteWrapper("a").gpus("H100", 8).latency("eu", 5).obj()]
    jobs = [JobWrapper("j").gpus(1).hours(2).kw_per_gpu(0.5).window(0, 4).obj(),
            JobWrapper("u1").gpus(2).hours(3).window(0, 4).obj(),
            JobWrapper("u2").gpus(1).hours(2).window(0, 4).obj(),
            JobWrapper("big").gpus(9).hours(1).window(0, 4).obj()]
    prob = problem(s, jobs, 4, ci={"a": [100, 200, 300, 400]}, pue={"a": [1.0, 1.5, 2.0, 1.2]},
                   inference=[demand("eu", 2, 1, kw=0.25)])
    sets = compile_sets(prob)
    rec = SolverRecord(name="t", status=PlanStatus.FEASIBLE)
    res = build_plan_result(sets, [[0, 0, 1]], np.array([[1]]), PlanStatus.FEASIBLE, rec,
                            unplaced_reason)
    return sets, res


def test_build_plan_result_by_hand():
    sets, res = _built()
    (p,) = res.placements
    # j: 0.5 kW in hours 1 and 2 (PUE 1.5, 2.0; CI 200, 300)
    assert (p.start, p.end, p.gpus) == (at(1), at(3), 1)
    assert p.energy_kwh == pytest.approx(0.5 * (1.5 + 2.0))
    # hour 2 is shared with 0.25 kW of inference: emissions per IT kWh is PUE x CI there
    assert p.emissions_kg == pytest.approx(0.5 * (1.5 * 200 + 2.0 * 300) / 1000)
    (i,) = res.inference
    assert (i.site, i.gpus, i.hour) == ("a", 1, at(2))
    assert i.energy_kwh == pytest.approx(0.25 * 2.0)
    assert i.emissions_kg == pytest.approx(0.25 * 2.0 * 300 / 1000)
    t = res.totals
    assert t["it_energy_kwh"] == pytest.approx(0.5 * 2 + 0.25)
    assert t["energy_kwh"] == pytest.approx(0.5 * 3.5 + 0.5)
    assert t["emissions_kg"] == pytest.approx(p.emissions_kg + i.emissions_kg)
    assert t["unplaced_gpu_hours"] == pytest.approx(6 + 2 + 9)
    assert t["objective"] == pytest.approx(t["emissions_kg"] + sets.penalty_per_gpu_hour * 8)
    assert (t["jobs_placed"], t["jobs_unplaced"]) == (1.0, 3.0)
    reasons = {u.job_id: (str(u.reason), u.detail) for u in res.unplaced}
    assert reasons["u1"] == ("InsufficientCapacity",
                             "feasible alone, but the GPUs or power were needed by other work")
    assert reasons["big"][0] == "GangTooLarge"


def test_build_plan_result_uses_the_reasons_it_is_given():
    from carbonsched.domain import ReasonCode

    _, res = _built({1: (ReasonCode.SOLVER_NO_SOLUTION, "why"), 3: (ReasonCode.PLACED, "no")})
    reasons = {u.job_id: (str(u.reason), u.detail) for u in res.unplaced}
    assert reasons["u1"] == ("SolverNoSolution", "why")
    assert reasons["u2"][0] == "InsufficientCapacity"
    assert reasons["big"][0] == "GangTooLarge"          # the pre-check reason wins


def test_raise_for_status_and_as_dict():
    from carbonsched.errors import InfeasiblePlanError

    res = plan()
    assert res.raise_for_status() is res
    res.status = PlanStatus.INFEASIBLE
    res.solver.note = "area eu needs 9 H100"
    with pytest.raises(InfeasiblePlanError) as info:
        res.raise_for_status()
    assert (info.value.family, info.value.detail) == ("unknown", "area eu needs 9 H100")
    res.solver.infeasible_family = "gpu_capacity"
    with pytest.raises(InfeasiblePlanError, match=r"infeasible \(gpu_capacity\)"):
        res.raise_for_status()
    sc = score_plan(problem([SiteWrapper("a").gpus("H100", 1).obj()], [], 1), plan())
    assert sc.as_dict() == {"emissions_kg": 0.0, "energy_kwh": 0.0,
                            "surplus_absorbed_kwh": 0.0, **ZERO, "unplaced_gpu_hours": 0.0,
                            "objective": 0.0, "quota_shortfalls": 0}


def test_order_of_bad_entries_does_not_change_the_counts(sites):
    prob = problem(sites, [JobWrapper("j1").gpus(2).hours(2).window(0, 30).obj(),
                           JobWrapper("j2").gpus(2).hours(2).window(0, 30).obj()], 24,
                   inference=[demand("eu", 1, 1, slo_ms=50), demand("eu", 2, 1, slo_ms=50)])
    # two starts after the horizon, then an unknown job; an unknown demand first, then two
    # outside the SLO
    res = plan([place("j1", "a", 24, 2, gpus=2), place("j2", "b", 24, 2, gpus=2),
                place("ghost", "a", 0, 1)],
               [serve("eu", 5, "a", 1), serve("eu", 1, "b", 1), serve("eu", 2, "b", 1)])
    assert counts(prob, res) == {**ZERO, "deadline_misses": 2, "gang_violations": 1,
                                 "slo_violations": 3}
    res.placements.reverse()
    res.inference.reverse()
    assert counts(prob, res) == {**ZERO, "deadline_misses": 2, "gang_violations": 1,
                                 "slo_violations": 3}


def test_an_unknown_entry_does_not_stop_the_count(sites):
    prob = problem(sites, [JobWrapper("j").gpus(2).window(0, 6).obj()], 6,
                   inference=[demand("eu", 1, 1, slo_ms=50)])
    # a wrong gang first, then an unknown job: two gang violations
    res = plan([place("j", "a", 0, 1, gpus=1), place("ghost", "a", 0, 1)])
    assert counts(prob, res)["gang_violations"] == 2
    # an unknown demand first, then the real one served right: only the unknown one counts
    res = plan(inference=[serve("eu", 5, "a", 1), serve("eu", 1, "a", 1)])
    assert counts(prob, res) == only("slo_violations")


def test_placement_energy_covers_its_own_hours():
    import numpy as np

    from carbonsched.plan import compile_sets
    from carbonsched.plan.result import build_plan_result

    s = [SiteWrapper("a").gpus("H100", 8).obj()]
    prob = problem(s, [JobWrapper("j").gpus(2).hours(2).kw_per_gpu(1.0).window(0, 4).obj()], 4,
                   pue={"a": [1.1, 1.2, 1.3, 1.4]})
    res = build_plan_result(compile_sets(prob), [[0, 0, 2]], np.zeros((0, 1), dtype=np.int64),
                            PlanStatus.FEASIBLE, SolverRecord(name="t", status=PlanStatus.FEASIBLE))
    assert res.placements[0].energy_kwh == pytest.approx(2.0 * (1.3 + 1.4))
