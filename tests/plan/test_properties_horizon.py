"""Planner invariants with minutes, tails past the horizon, deferral, running work and pieces
(Hypothesis; issue 14 item 4).

On random small instances: no capacity, power-cap, grid-connection, deadline or gang
constraint is broken in any hour a placement occupies (tail hours and pieces included, running
work added); every job is placed once (or in at most ``max_pieces`` pieces) or has a reason;
energy counts the minutes run; the plan's objective is the independent recount's.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carbonsched.domain import Job, ReasonCode, RunningWork
from carbonsched.plan import PlanStatus, agnostic_plan, greedy_plan, score_plan, solve_plan
from carbonsched.plan.gap import ABS_GAP_KG

from .builders import SiteWrapper, at, problem

PROPS = settings(max_examples=30, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
M = pd.Timedelta(minutes=1)


@st.composite
def instances(draw, preemptible: bool = True):
    hours = draw(st.integers(3, 8))
    n_sites = draw(st.integers(1, 2))
    sites = []
    for i in range(n_sites):
        w = SiteWrapper(f"s{i}").gpus("H100", draw(st.integers(1, 4)))
        w = w.cap_kw(draw(st.sampled_from([2.0, 4.0, 1e6])))
        facility = draw(st.sampled_from([None, None, 5.0]))
        if facility is not None:
            w = w.facility_cap_kw(facility)
        sites.append(w.obj())
    jobs = []
    for k in range(draw(st.integers(1, 5))):
        es_min = draw(st.integers(-60, 60 * (hours - 1)))
        minutes = draw(st.integers(15, 60 * (hours + 3)))
        slack = draw(st.integers(0, 60 * (hours + 4)))
        pre = preemptible and draw(st.booleans())
        jobs.append(Job(
            id=f"j{k}", tenant="t", gpu_type="H100", gpus=draw(st.integers(1, 3)),
            duration_minutes=minutes, power_per_gpu_kw=draw(st.sampled_from([0.5, 1.0])),
            earliest_start=at(0) + es_min * M, deadline=at(0) + (es_min + minutes + slack) * M,
            preemptible=pre, max_pieces=draw(st.integers(2, 3)) if pre else 1,
            checkpoint_overhead_minutes=draw(st.sampled_from([0, 10, 30])) if pre else 0))
    running = [RunningWork(site=s.id, gpu_type="H100", gpus=1, it_power_kw=0.5,
                           end=at(0) + draw(st.integers(1, 60 * hours)) * M)
               for s in sites if draw(st.booleans())]
    ci_lists = st.lists(st.floats(0, 800, allow_nan=False), min_size=hours, max_size=hours)
    prob = problem(sites, jobs, hours, ci={s.id: draw(ci_lists) for s in sites},
                   pue={s.id: draw(st.floats(1.0, 1.5)) for s in sites},
                   surplus={s.id: draw(st.lists(st.sampled_from([0.0, 0.0, 2.0]),
                                                min_size=hours, max_size=hours))
                            for s in sites})
    prob.running = running
    return prob


def clean(score) -> bool:
    return (score.capacity_violations == score.power_cap_violations == score.slo_violations
            == score.deadline_misses == score.gang_violations == score.facility_cap_violations
            == 0)


@PROPS
@given(instances())
def test_no_constraint_is_broken_with_minutes_tails_and_pieces(prob):
    res = solve_plan(prob, mip_gap=0.0)
    assert res.status == PlanStatus.OPTIMAL
    sc = score_plan(prob, res)
    assert clean(sc)
    assert np.isclose(res.totals["objective"], sc.objective, rtol=1e-9, atol=1e-9)
    assert np.isclose(res.totals["energy_kwh"], sc.energy_kwh, rtol=1e-9, atol=1e-9)
    by_job: dict[str, list] = {}
    for p in res.placements:
        by_job.setdefault(p.job_id, []).append(p)
    jobs = {j.id: j for j in prob.jobs}
    for job_id, ps in by_job.items():
        job = jobs[job_id]
        assert len(ps) <= job.max_pieces
        work = sum((p.end - p.start) / M - p.overhead_minutes for p in ps)
        assert work == job.duration_minutes            # the minutes, not rounded up
        assert all(p.end <= job.deadline and p.start >= job.earliest_start for p in ps)
        assert all(p.start < prob.slots[-1] + pd.Timedelta(hours=1) for p in ps)
    unplaced = [u.job_id for u in res.unplaced]
    assert sorted(set(by_job) | set(unplaced)) == sorted(jobs)
    assert not set(by_job) & set(unplaced)
    horizon_end = prob.slots[-1] + pd.Timedelta(hours=1)
    for u in res.unplaced:
        if u.reason == ReasonCode.DEFERRED_PAST_HORIZON:
            # only a job that may still start after the horizon is deferred
            job = jobs[u.job_id]
            assert job.deadline - job.duration_minutes * M >= horizon_end
    for plan in (agnostic_plan(prob), greedy_plan(prob)):
        assert clean(score_plan(prob, plan))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances(preemptible=False))
def test_column_generation_agrees_with_the_milp_on_minutes_and_tails(prob):
    milp = solve_plan(prob, mip_gap=0.0, method="milp")
    cg = solve_plan(prob, mip_gap=0.0, method="colgen")
    assert clean(score_plan(prob, cg))
    tol = 1e-6 * max(1.0, abs(milp.totals["objective"]))
    assert cg.solver.bound <= milp.totals["objective"] + tol
    assert milp.totals["objective"] <= cg.totals["objective"] + tol
    if cg.status == PlanStatus.OPTIMAL:
        # both are optimal only to the absolute gap HiGHS closes (mip_abs_gap 1e-6 kg):
        # Hypothesis found 0.00500006 kg against the MILP's 0.00500013
        assert np.isclose(cg.totals["objective"], milp.totals["objective"], rtol=1e-6,
                          atol=ABS_GAP_KG)
