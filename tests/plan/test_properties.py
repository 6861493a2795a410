"""Planner invariants on random small instances (Hypothesis), issue 4 item 4."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carbonsched.plan import (
    PlanStatus,
    agnostic_plan,
    greedy_plan,
    score_plan,
    solve_plan,
)
from carbonsched.plan.gap import ABS_GAP_KG

from .builders import JobWrapper, SiteWrapper, demand, problem, signals

TYPES = ("H100", "A100")
AREAS = ("eu", "us")
PROPS = settings(max_examples=25, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@st.composite
def instances(draw):
    hours = draw(st.integers(2, 6))
    n_sites = draw(st.integers(1, 3))
    sites = []
    for i in range(n_sites):
        w = SiteWrapper(f"s{i}")
        for t in TYPES:
            if draw(st.booleans()) or t == "H100":
                w = w.gpus(t, draw(st.integers(1, 6)))
        w = w.cap_kw(draw(st.sampled_from([2.0, 4.0, 8.0, 1e6])))
        facility = draw(st.sampled_from([None, None, 3.0, 6.0, 12.0]))
        if facility is not None:
            w = w.facility_cap_kw(facility)
        for a in AREAS:
            w = w.latency(a, draw(st.sampled_from([5.0, 20.0, 80.0])))
        sites.append(w.obj())
    jobs = []
    for k in range(draw(st.integers(0, 6))):
        es = draw(st.integers(0, hours - 1))
        dur = draw(st.integers(1, 3))
        dl = draw(st.integers(es + 1, hours + 1))
        jw = (JobWrapper(f"j{k}").gpu_type(draw(st.sampled_from(TYPES)))
              .gpus(draw(st.integers(1, 4))).hours(dur).window(es, dl)
              .kw_per_gpu(draw(st.sampled_from([0.5, 1.0]))))
        if draw(st.booleans()):
            jw = jw.sites(*draw(st.lists(st.sampled_from([s.id for s in sites]), min_size=1,
                                         max_size=2, unique=True)))
        jobs.append(jw.obj())
    inference = [demand(draw(st.sampled_from(AREAS)), draw(st.integers(0, hours - 1)),
                        draw(st.integers(1, 2)), slo_ms=draw(st.sampled_from([10.0, 50.0])),
                        kw=0.5)
                 for _ in range(draw(st.integers(0, 2)))]
    ci_lists = st.lists(st.floats(0, 800, allow_nan=False), min_size=hours, max_size=hours)
    ci = {s.id: draw(ci_lists) for s in sites}
    actual = {s.id: draw(ci_lists) for s in sites}
    pue = {s.id: draw(st.floats(1.0, 1.6)) for s in sites}
    # the upper bound of the PUE interval, >= the point forecast, warmer in some hours
    pue_hi = {s.id: [pue[s.id] + d for d in draw(st.lists(st.sampled_from([0.0, 0.05, 0.3]),
                                                          min_size=hours, max_size=hours))]
              for s in sites}
    surplus = {s.id: draw(st.lists(st.sampled_from([0.0, 0.0, 1.0, 3.0]), min_size=hours,
                                   max_size=hours)) for s in sites}
    prob = problem(sites, jobs, hours, inference, ci=ci, pue=pue, surplus=surplus, pue_hi=pue_hi)
    act = signals(sites, hours, ci=actual, pue=pue, surplus=surplus, pue_hi=pue_hi)
    return prob, act


def clean(score) -> bool:
    return (score.capacity_violations == score.power_cap_violations == score.slo_violations
            == score.deadline_misses == score.gang_violations == score.facility_cap_violations
            == 0)


@PROPS
@given(instances())
def test_every_plan_respects_the_constraints(case):
    prob, _ = case
    res = solve_plan(prob, mip_gap=0.0)
    if res.status == PlanStatus.INFEASIBLE:
        assert res.solver.infeasible_family in {"inference_slo", "gpu_capacity", "power_cap"}
        assert res.placements == [] and res.inference == []
        return
    assert res.status == PlanStatus.OPTIMAL
    assert clean(score_plan(prob, res))
    # the reported bound never exceeds the objective
    assert res.solver.bound <= res.totals["objective"] + 1e-6 * max(1.0, res.totals["objective"])
    placed = [p.job_id for p in res.placements]
    unplaced = [u.job_id for u in res.unplaced]
    assert len(placed) == len(set(placed))                      # at most once
    assert sorted(placed + unplaced) == sorted(j.id for j in prob.jobs)   # once or a reason
    assert all(u.reason for u in res.unplaced)
    for plan in (agnostic_plan(prob), greedy_plan(prob)):
        sc = score_plan(prob, plan)
        assert sc.capacity_violations == sc.power_cap_violations == 0
        assert sc.facility_cap_violations == 0
        assert sc.deadline_misses == sc.gang_violations == 0


@PROPS
@given(instances())
def test_optimised_plan_never_beaten_on_its_own_signals(case):
    prob, actual = case
    res = solve_plan(prob, mip_gap=0.0)
    if res.status == PlanStatus.INFEASIBLE:
        return
    mine = score_plan(prob, res).objective
    for other in (agnostic_plan(prob), greedy_plan(prob), greedy_plan(prob, signals=actual)):
        sc = score_plan(prob, other)
        if sc.slo_violations:                       # a baseline that could not serve inference
            continue
        assert mine <= sc.objective + 1e-6 * max(1.0, abs(sc.objective))
    # the oracle (optimised on the actuals) is not beaten on the actuals by any policy
    prob_act = type(prob)(prob.sites, prob.jobs, prob.inference, prob.slots, actual)
    oracle = solve_plan(prob_act, mip_gap=0.0)
    best = score_plan(prob, oracle, signals=actual).objective
    for plan in (res, greedy_plan(prob), agnostic_plan(prob)):
        sc = score_plan(prob, plan, signals=actual)
        if sc.slo_violations:
            continue
        assert best <= sc.objective + 1e-6 * max(1.0, abs(sc.objective))


@PROPS
@given(instances())
def test_milp_forecast_objective_not_worse_than_greedy(case):
    prob, _ = case
    res = solve_plan(prob, mip_gap=0.0)
    if res.status == PlanStatus.INFEASIBLE:
        return
    greedy = greedy_plan(prob)
    if score_plan(prob, greedy).slo_violations:
        return
    assert res.totals["objective"] <= greedy.totals["objective"] + 1e-6 * max(
        1.0, abs(greedy.totals["objective"]))
    assert np.isclose(res.totals["objective"], score_plan(prob, res).objective)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances())
def test_column_generation_matches_the_milp(case):
    prob, _ = case
    milp = solve_plan(prob, mip_gap=0.0, method="milp")
    if milp.status == PlanStatus.INFEASIBLE:
        return
    cg = solve_plan(prob, mip_gap=0.0, method="colgen")
    assert clean(score_plan(prob, cg))
    assert cg.totals["objective"] <= milp.totals["objective"] * 1.0 + 1e-6 or \
        cg.status != PlanStatus.OPTIMAL
    assert cg.solver.bound <= milp.totals["objective"] + 1e-6 * max(1, milp.totals["objective"])
    if cg.status == PlanStatus.OPTIMAL:
        # both are optimal only to the absolute gap HiGHS closes (mip_abs_gap 1e-6 kg):
        # Hypothesis found 0.00500006 kg against the MILP's 0.00500013
        assert np.isclose(cg.totals["objective"], milp.totals["objective"], rtol=1e-6,
                          atol=ABS_GAP_KG)
