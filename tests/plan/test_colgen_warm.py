"""Multipliers and columns carried between rolling runs (issue 36 item 2): shifted exactly, a
warm solve's bound valid, a warm solve never worse than its start nor than a cold one when
the carried multipliers are useless, and the rolling planner keeping what the next run needs."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carbonsched.plan import PlanStatus, WarmStart, score_plan, solve_plan
from carbonsched.plan.colgen import job_classes, make_layout
from carbonsched.plan.colgen.warm import (
    CarriedDuals,
    carried_columns,
    carried_multipliers,
    shift_slots,
)
from carbonsched.plan.rolling import RollingPlanner
from carbonsched.plan.sets import compile_sets

from .builders import JobWrapper, SiteWrapper, problem
from .test_properties import clean, instances

PROPS = settings(max_examples=20, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
T0 = pd.Timestamp("2023-07-15T00:00Z")


def hours(first: int, n: int) -> pd.DatetimeIndex:
    return pd.date_range(T0 + pd.Timedelta(hours=first), periods=n, freq="h")


def test_shift_by_k_slots_drops_the_past_and_fills_the_end_from_the_nearest_kept_slot():
    old = np.array([[1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
                    [10.0, 20.0, 30.0, 40.0, 50.0, 60.0]])
    out, kept = shift_slots(old, hours(0, 6), hours(2, 6))     # the next run, k = 2
    assert kept == 4
    np.testing.assert_array_equal(out, [[3.0, 4.0, 5.0, 6.0, 6.0, 6.0],
                                        [30.0, 40.0, 50.0, 60.0, 60.0, 60.0]])
    # a trailing GPU-type axis moves with its slot
    cube = np.arange(12.0).reshape(1, 6, 2)
    out3, _ = shift_slots(cube, hours(0, 6), hours(3, 5))
    np.testing.assert_array_equal(out3[0], [[6, 7], [8, 9], [10, 11], [10, 11], [10, 11]])


def test_shift_at_the_limit_keeps_one_slot_and_past_it_carries_nothing():
    old = np.array([[1.0, 2.0, 3.0]])
    out, kept = shift_slots(old, hours(0, 3), hours(2, 3))     # k = T - 1: one slot shared
    assert kept == 1
    np.testing.assert_array_equal(out, [[3.0, 3.0, 3.0]])
    out, kept = shift_slots(old, hours(0, 3), hours(3, 3))     # k = T: none shared
    assert kept == 0
    np.testing.assert_array_equal(out, np.zeros((1, 3)))


def test_shift_fills_both_ends_and_breaks_a_tie_towards_the_earlier_slot():
    old = np.array([[7.0, 9.0]])
    out, _ = shift_slots(old, hours(2, 2), hours(0, 6))
    np.testing.assert_array_equal(out, [[7.0, 7.0, 7.0, 9.0, 9.0, 9.0]])
    gapped = pd.DatetimeIndex([T0, T0 + pd.Timedelta(hours=2)])
    out, _ = shift_slots(old, gapped, hours(0, 3))
    np.testing.assert_array_equal(out, [[7.0, 7.0, 9.0]])


def test_shift_refuses_values_that_do_not_match_their_slots():
    with pytest.raises(ValueError, match="values have 3 slots on axis 1, old_slots 2"):
        shift_slots(np.zeros((1, 3)), hours(0, 2), hours(1, 2))


def two_sites_two_types(n_hours: int = 4):
    sites = [SiteWrapper("a").gpus("H100", 4).gpus("A100", 2).obj(),
             SiteWrapper("b").gpus("H100", 2).obj()]
    jobs = [JobWrapper(f"j{k}").gpu_type("H100").gpus(2).hours(1).window(0, n_hours)
            .kw_per_gpu(1.0).obj() for k in range(4)]
    ci = {"a": [100.0, 300.0, 200.0, 50.0][:n_hours], "b": [250.0, 80.0, 90.0, 400.0][:n_hours]}
    return problem(sites, jobs, n_hours, ci=ci)


def carried_on(prob, lam_c, lam_p, lam_a, first_hour: int, sites=None, types=None,
               slot_minutes: int = 60) -> CarriedDuals:
    sets = compile_sets(prob)
    n_t = lam_p.shape[1]
    return CarriedDuals(
        slot=hours(first_hour, n_t), slot_minutes=slot_minutes,
        site=tuple(sites or sets.site), gpu_type=tuple(types or sets.gpu_type),
        lam_c=lam_c, lam_p=lam_p, lam_a=lam_a, job_id=np.array([], dtype=object),
        col_site=np.array([], dtype=object), col_start=pd.DatetimeIndex([], tz="UTC"),
        bound=0.0)


def test_multipliers_follow_sites_and_types_by_name_and_the_slots_by_time():
    prob = two_sites_two_types()
    sets = compile_sets(prob)
    lay = make_layout(sets, job_classes(sets))
    assert list(sets.site) == ["a", "b"] and list(sets.gpu_type) == ["A100", "H100"]
    n_t = len(sets.slot)
    # the previous run, one hour earlier, listed the sites and types the other way round and
    # had a site "c" this run does not plan
    lam_c = np.zeros((3, n_t, 2))
    lam_c[0, :, 0] = np.arange(n_t) + 1.0       # site b, H100
    lam_c[1, :, 1] = 100.0 + np.arange(n_t)     # site a, A100
    lam_p = np.zeros((3, n_t))
    lam_p[1] = 5.0
    cd = carried_on(prob, lam_c, lam_p, np.zeros((3, n_t)), -1, sites=("b", "a", "c"),
                    types=("H100", "A100"))
    (c, p, a), kept, why = carried_multipliers(sets, lay, cd)
    assert why == "" and kept == n_t - 1
    # shifted by one slot, the new last slot from the nearest kept one
    np.testing.assert_array_equal(c[1, :, 1], list(np.arange(2, n_t + 1.0)) + [n_t])
    np.testing.assert_array_equal(c[0, :, 0], list(101.0 + np.arange(n_t - 1)) + [99.0 + n_t])
    assert not c[0, :, 1].any() and not c[1, :, 0].any()
    np.testing.assert_array_equal(p, [[5.0] * n_t, [0.0] * n_t])
    assert not a.any()


def test_multipliers_of_another_slot_length_are_not_carried():
    prob = two_sites_two_types()
    sets = compile_sets(prob)
    lay = make_layout(sets, job_classes(sets))
    n_t = len(sets.slot)
    cd = carried_on(prob, np.ones((2, n_t, 2)), np.ones((2, n_t)), np.zeros((2, n_t)), 0,
                    slot_minutes=15)
    (c, _, _), kept, why = carried_multipliers(sets, lay, cd)
    assert kept == 0 and not c.any()
    assert why == "the previous run's slots are 15 min, this run's 60 min"


def test_columns_map_to_this_runs_class_representatives_and_drop_what_is_gone():
    prob = two_sites_two_types()
    sets = compile_sets(prob)
    cls = job_classes(sets)
    assert len(cls.rep) == 1                    # four identical jobs: one class
    rep = int(cls.rep[0])
    cd = replace(carried_on(prob, np.zeros((2, 1, 2)), np.zeros((2, 1)), np.zeros((2, 1)), 0),
                 job_id=np.array(["j3", "j1", "gone", "j2"], dtype=object),
                 col_site=np.array(["b", "a", "a", "a"], dtype=object),
                 col_start=pd.DatetimeIndex([T0 + pd.Timedelta(hours=1), T0, T0,
                                             T0 - pd.Timedelta(hours=1)]))
    cols = carried_columns(sets, cls, cd)
    # j3 at b in hour 1 and j1 at a in hour 0, both on the class's representative; the job
    # no longer planned and the start before the horizon are dropped
    np.testing.assert_array_equal(cols, [[rep, 0, 0], [rep, 1, 1]])


@pytest.fixture(scope="module")
def cold_run():
    prob = two_sites_two_types()
    res = solve_plan(prob, method="colgen", mip_gap=0.0, time_limit_s=60)
    assert res.carry is not None
    return prob, res


def test_useless_carried_multipliers_leave_the_cold_bound_and_say_so(cold_run):
    """Multipliers far above any price bound far below zero's Lagrangian: the guard starts
    the warm-up cold, so the bound is the cold solve's."""
    prob, cold = cold_run
    n_t = cold.carry.lam_p.shape[1]
    bad = replace(cold.carry, lam_c=np.full(cold.carry.lam_c.shape, 1e3),
                  lam_p=np.full((2, n_t), 1e3))
    res = solve_plan(prob, method="colgen", mip_gap=0.0, time_limit_s=60,
                     start=WarmStart(cold.placements, "run 1", duals=bad))
    assert "multipliers: cold: the previous run's multipliers" in res.solver.warm_start
    assert "not above the cold start's" in res.solver.warm_start
    assert res.solver.bound == pytest.approx(cold.solver.bound, rel=1e-6, abs=1e-9)
    assert res.totals["objective"] <= cold.totals["objective"] + 1e-9


def test_a_start_without_multipliers_names_the_cold_fallback(cold_run):
    prob, cold = cold_run
    res = solve_plan(prob, method="colgen", time_limit_s=30,
                     start=WarmStart(cold.placements, "run 1",
                                     duals_missing="run 1 was solved by the direct MILP"))
    assert res.solver.warm_start.endswith(
        "; multipliers: cold: run 1 was solved by the direct MILP")


@PROPS
@given(instances(), st.integers(0, 3), st.integers(0, 2**31 - 1))
def test_a_warm_solve_bound_is_valid_and_its_plan_no_worse_than_its_start(case, k, seed):
    """Any non-negative multipliers shifted by ``k`` slots, and the columns and plan of a
    cold solve: the warm bound stays below the direct MILP's optimum, the warm plan is
    clean and no worse than the plan it started from."""
    prob, _ = case
    exact = solve_plan(prob, method="milp", mip_gap=0.0)
    if exact.status != PlanStatus.OPTIMAL:
        return
    opt = exact.totals["objective"]
    tol = 1e-6 * max(1.0, abs(opt))
    cold = solve_plan(prob, method="colgen", mip_gap=0.0, time_limit_s=30)
    if cold.carry is None:
        return
    rng = np.random.default_rng(seed)
    c = cold.carry
    carried = replace(
        c, slot=c.slot - pd.Timedelta(hours=k),
        lam_c=c.lam_c * rng.uniform(0.0, 3.0, c.lam_c.shape)
        + rng.exponential(0.2, c.lam_c.shape) * rng.integers(0, 2),
        lam_p=c.lam_p + rng.exponential(0.2, c.lam_p.shape) * rng.integers(0, 2),
        lam_a=c.lam_a + rng.exponential(0.2, c.lam_a.shape) * rng.integers(0, 2))
    start = WarmStart(cold.placements, "a cold plan", duals=carried)
    res = solve_plan(prob, method="colgen", mip_gap=0.0, time_limit_s=30, start=start)
    assert "multipliers: " in res.solver.warm_start or not cold.placements
    assert clean(score_plan(prob, res))
    assert res.solver.bound is None or res.solver.bound <= opt + tol
    assert res.totals["objective"] >= opt - tol
    # never worse than its start (the cold plan, complete for this problem)
    assert res.totals["objective"] <= cold.totals["objective"] + tol


def test_the_rolling_planner_keeps_the_multipliers_for_the_next_run():
    sites = [SiteWrapper("a").gpus("H100", 4).obj(), SiteWrapper("b").gpus("H100", 4).obj()]
    jobs = [JobWrapper(f"j{k}").gpu_type("H100").gpus(2).hours(2).window(0, 10)
            .kw_per_gpu(1.0).obj() for k in range(6)]
    ci = {"a": [300.0, 250.0, 200.0, 100.0, 80.0, 90.0, 120.0, 60.0, 70.0, 300.0],
          "b": [90.0, 400.0, 350.0, 300.0, 60.0, 50.0, 200.0, 250.0, 40.0, 100.0]}
    prob = problem(sites, jobs, 10, ci=ci)
    rp = RollingPlanner(sites, planner=lambda p, start=None: solve_plan(
        p, method="colgen", time_limit_s=30, start=start), horizon_hours=6,
        run_every_hours=2, warm=True)
    rp.submit(prob.jobs)
    first = rp.step(prob.slots[0], prob.signals)
    assert first.result.solver.warm_start == ""
    assert rp.state.carried is not None and rp.state.carried_missing == ""
    assert rp.state.carried.slot[0] == prob.slots[0]
    later = rp.step(prob.slots[2], prob.signals)
    assert later.result.solver.warm_start.startswith(
        "warm: started from the plan of the run issued at 2023-07-15T00:00Z, shifted by 2 h")
    # shifted by 2 slots; on this uncongested toy the shifted prices bound below zero's, so
    # the guard starts the warm-up cold and says so
    assert ("; multipliers: cold: the previous run's multipliers (5 of 7 slots kept, 2 new "
            "ones from the nearest kept slot) bound ") in later.result.solver.warm_start
    assert "not above the cold start's" in later.result.solver.warm_start
    # a direct-MILP run carries none, and the next run names that as its cold fallback
    rp.planner = lambda p, start=None: solve_plan(p, method="milp", time_limit_s=30,
                                                  start=start)
    rp.step(prob.slots[4], prob.signals)
    assert rp.state.carried is None
    assert rp.state.carried_missing == (
        "the run issued at 2023-07-15T04:00Z was solved by milp, which has no "
        "column-generation multipliers")


def test_the_service_keeps_multipliers_in_process_and_names_the_cold_fallback(tmp_path,
                                                                               cold_run):
    """The service reloads its rolling state from the store every run; the multipliers live
    in an in-process cache keyed by database, catalog and issue time. A run whose
    predecessor's multipliers are not there (a restart, another replica) starts them cold
    and says why."""
    from carbonsched.plan.rolling import RollingState
    from carbonsched.service.rolling import keep_carried, take_carried, warm_start
    from carbonsched.store import Store

    _, cold = cold_run
    store = Store(f"sqlite:///{tmp_path / 'carried.sqlite'}")
    t0 = T0
    keep_carried(store, "frankfurt", t0, cold.carry)
    state = RollingState(last_issued_at=t0,
                         tentative={p.job_id: [p] for p in cold.placements})
    take_carried(store, "frankfurt", state)
    start, _ = warm_start(state, 6)
    assert start.duals is cold.carry and start.duals_missing == ""
    # after a restart (another process: the cache is empty) or on another catalog: cold
    other = RollingState(last_issued_at=t0, tentative=dict(state.tentative))
    take_carried(store, "another-catalog", other)
    start, _ = warm_start(other, 6)
    assert start.duals is None
    assert start.duals_missing == (
        "the multipliers of the run issued at 2023-07-15T00:00Z are not in this process (it "
        "ran before a restart, on another replica, or without column generation); only its "
        "plan is carried")
    store.engine.dispose()
