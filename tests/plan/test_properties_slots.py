"""Planner invariants on a 15-minute slot grid (Hypothesis; issue 14 item 3).

On random small instances (minutes, tails past the horizon, deferral, running work): the plan
keeps every constraint in every quarter hour, its totals are the independent recount's, energy
counts the minutes run; and, without green surplus, the 15-minute optimum is never worse than
the hourly one (every hourly start is a quarter-hour start and every hourly-feasible plan is
feasible per quarter hour; jobs only the finer grid can start are counted at their unplaced
cost). With surplus it may be: surplus is power, and absorbing it per
quarter hour is the finer, truer account (a 30-minute 2 kW run in an hour with 1 kW of surplus
absorbs 0.5 kWh, not the whole 1 kWh an hourly slot would credit).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from carbonsched.plan import (
    PlanStatus,
    agnostic_plan,
    compile_sets,
    greedy_plan,
    score_plan,
    solve_plan,
)

from .test_properties_horizon import PROPS, clean, instances

M = pd.Timedelta(minutes=1)


def on_grid(prob, minutes: int, surplus: bool = True):
    """The same instance on a grid of ``minutes`` (hourly signals), optionally without surplus."""
    n = len(prob.slots) * 60 // minutes
    slots = pd.date_range(prob.slots[0], periods=n, freq=f"{minutes}min", name="slot")
    sig = prob.signals.copy()
    if not surplus:
        sig["green_surplus_kw"] = 0.0
    return replace(prob, slots=slots if minutes != 60 else prob.slots, signals=sig,
                   slot_minutes=minutes)


@PROPS
@given(instances(preemptible=False), st.sampled_from([15, 30]))
def test_no_constraint_is_broken_on_a_sub_hour_grid(prob, minutes):
    q = on_grid(prob, minutes)
    res = solve_plan(q, mip_gap=0.0)
    assert res.status == PlanStatus.OPTIMAL
    sc = score_plan(q, res)
    assert clean(sc)
    assert np.isclose(res.totals["objective"], sc.objective, rtol=1e-9, atol=1e-9)
    assert np.isclose(res.totals["energy_kwh"], sc.energy_kwh, rtol=1e-9, atol=1e-9)
    assert np.isclose(res.totals["emissions_kg"], sc.emissions_kg, rtol=1e-9, atol=1e-9)
    jobs = {j.id: j for j in q.jobs}
    step = pd.Timedelta(minutes=minutes)
    for p in res.placements:
        job = jobs[p.job_id]
        assert p.end - p.start == job.duration_minutes * M      # the minutes, not rounded up
        assert (p.start - q.slots[0]) % step == pd.Timedelta(0)
        assert job.earliest_start <= p.start and p.end <= job.deadline
    assert sorted([p.job_id for p in res.placements] + [u.job_id for u in res.unplaced]) == \
        sorted(jobs)
    for plan in (agnostic_plan(q), greedy_plan(q)):
        assert clean(score_plan(q, plan))


@PROPS
@given(instances(preemptible=False))
def test_a_quarter_hour_grid_is_never_worse_than_the_hourly_one(prob):
    h, q = on_grid(prob, 60, surplus=False), on_grid(prob, 15, surplus=False)
    hourly = solve_plan(h, mip_gap=0.0)
    quarter = solve_plan(q, mip_gap=0.0)
    assert hourly.status == quarter.status == PlanStatus.OPTIMAL
    # a job the hourly pre-check rejects (no whole-hour start in its window) may have a
    # quarter-hour start: the hourly plan, with such jobs left out at their cost, is a
    # quarter-hour plan, so the quarter-hour optimum is at most that
    sh, sq = compile_sets(h, columns=False), compile_sets(q, columns=False)
    assert set(sq.reasons) <= set(sh.reasons)
    extra = sum(float(sq.unplaced_cost[k]) for k in set(sh.reasons) - set(sq.reasons))
    bound = hourly.totals["objective"] + extra
    assert quarter.totals["objective"] <= bound + 1e-6 * max(1.0, abs(bound))
