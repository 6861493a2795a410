"""Tenants and fair shares (issue 37 item 3): weighted DRF on a hand-worked example, quotas met,
fairness traded against carbon, and the recount of quotas."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from carbonsched.domain import Placement, Tenant
from carbonsched.errors import InputError
from carbonsched.plan import score_plan, solve_plan
from carbonsched.plan.fairness import quota_shortfalls, weighted_drf
from carbonsched.plan.result import PlanResult, PlanStatus, SolverRecord

from .builders import JobWrapper, SiteWrapper, at, problem


def test_weighted_drf_on_a_hand_worked_three_tenant_example():
    """Capacity 100 A100-h and 60 H100-h; a (w 1) asks (80, 0), b (w 2) asks (40, 60), c (w 1)
    asks (60, 30). Dominant shares of the demands: a 0.8 (A100), b 1.0 (H100), c 0.6 (A100).
    Filling at level s: A100 use 100 s + 80 s + 100 s, H100 use 120 s + 50 s; H100 runs out
    first at s = 60/170 = 6/17, freezing b (share 2 s = 12/17) and c (share 6/17); a goes on
    alone on the A100 left, 100 - (80 + 100) 6/17 = 620/17 A100-h, share 31/85."""
    alloc = weighted_drf(np.array([[80.0, 0.0], [40.0, 60.0], [60.0, 30.0]]),
                         np.array([100.0, 60.0]), np.array([1.0, 2.0, 1.0]))
    expect = np.array([[620 / 17, 0.0], [480 / 17, 720 / 17], [600 / 17, 300 / 17]])
    assert np.allclose(alloc, expect, rtol=0, atol=1e-9)
    shares = (alloc / np.array([100.0, 60.0])).max(axis=1)
    assert np.allclose(shares, [31 / 85, 12 / 17, 6 / 17], rtol=0, atol=1e-12)
    assert np.allclose(alloc.sum(axis=0), [100.0, 60.0])         # both resources used up


def test_weighted_drf_gives_a_tenant_no_more_than_it_asks():
    alloc = weighted_drf(np.array([[10.0], [100.0]]), np.array([60.0]), np.array([5.0, 1.0]))
    assert np.allclose(alloc, [[10.0], [50.0]])


@pytest.mark.parametrize("bad", [
    (np.array([[1.0]]), np.array([1.0, 2.0]), np.array([1.0])),
    (np.array([[-1.0]]), np.array([1.0]), np.array([1.0])),
    (np.array([[1.0]]), np.array([1.0]), np.array([0.0])),
])
def test_weighted_drf_refuses_bad_input(bad):
    with pytest.raises(ValueError, match="weighted_drf"):
        weighted_drf(*bad)


def _binding(fairness: float, quota_z: float = 0.0):
    """One 8-GPU site for 12 hours (96 GPU-h); x, y, z each ask 12 jobs of 2 GPUs x 2 h (48
    GPU-h); the earlier hours are cleaner, so the carbon-only plan is indifferent to tenants."""
    site = SiteWrapper("a").gpus("H100", 8, per_node=8).obj()
    jobs = [JobWrapper(f"{t}{i}").tenant(t).gpus(2).hours(2).window(0, 12).obj()
            for t in ("x", "y", "z") for i in range(12)]
    prob = problem([site], jobs, 12, ci={"a": [50.0 + 40.0 * h for h in range(12)]})
    tenants = {"x": Tenant("x", 1.0), "y": Tenant("y", 2.0),
               "z": Tenant("z", 1.0, {"H100": quota_z} if quota_z else {})}
    return dataclasses.replace(prob, tenants=tenants, fairness=fairness)


def test_strict_fairness_holds_the_weighted_shares_and_the_quota():
    prob = _binding(1.0, quota_z=64.0)   # 64 GPU-h/day over 12 h: 32 GPU-h guaranteed to z
    plan = solve_plan(prob, method="milp")
    rows = {r["tenant"]: r for r in plan.tenants}
    # z's quota first (32 GPU-h); the other 64 by weighted DRF over what is still asked:
    # x (w 1) 48, y (w 2) 48, z (w 1) 16 -> level 1/4: x 16, y 32, z 16 (z's demand met)
    assert {t: r["placed_gpu_hours"] for t, r in rows.items()} == {"x": 16.0, "y": 32.0,
                                                                   "z": 48.0}
    assert rows["z"]["quota_met"] is True and rows["z"]["quota_gpu_hours"] == 32.0
    assert np.isclose(rows["y"]["target_share"], 32 / 96)
    assert np.isclose(rows["y"]["dominant_share"], 32 / 96)
    assert rows["x"]["quota_met"] is None
    sc = score_plan(prob, plan)
    assert (sc.quota_shortfalls, sc.capacity_violations) == (0, 0)
    assert plan.totals["fairness_cost_kg"] >= -1e-6
    assert any(n.startswith("fairness: 3 tenant(s)") for n in plan.notes)


def test_fairness_zero_is_the_carbon_only_plan_and_tenants_are_unused():
    prob = _binding(0.0, quota_z=64.0)
    plan = solve_plan(prob, method="milp")
    assert plan.tenants == [] and "fairness_cost_kg" not in plan.totals


def test_fairness_trades_shares_for_carbon():
    """x's jobs draw 4x the power of y's per GPU: the carbon-only plan fills the 48 GPU-h with
    y's jobs; strict fairness (equal weights) gives x half, fairness 0.5 a quarter, each at a
    carbon cost, the larger share the larger cost."""
    site = SiteWrapper("a").gpus("H100", 4, per_node=4).obj()
    jobs = ([JobWrapper(f"y{i}").tenant("y").gpus(4).hours(1).kw_per_gpu(0.5).window(0, 12)
             .obj() for i in range(12)]
            + [JobWrapper(f"x{i}").tenant("x").gpus(4).hours(1).kw_per_gpu(2.0).window(0, 12)
               .obj() for i in range(12)])
    base = problem([site], jobs, 12)
    tenants = {"x": Tenant("x", 1.0), "y": Tenant("y", 1.0)}
    plain = solve_plan(base, method="milp")
    assert {p.job_id[0] for p in plain.placements} == {"y"}
    costs, x_hours = {}, {}
    for phi in (0.5, 1.0):
        plan = solve_plan(dataclasses.replace(base, tenants=tenants, fairness=phi),
                          method="milp")
        costs[phi] = plan.totals["fairness_cost_kg"]
        x_hours[phi] = {r["tenant"]: r["placed_gpu_hours"] for r in plan.tenants}["x"]
        assert np.isclose(plan.totals["carbon_only_emissions_kg"],
                          plain.totals["emissions_kg"])
        assert np.isclose(costs[phi], plan.totals["emissions_kg"] - plain.totals["emissions_kg"])
    assert x_hours == {0.5: 12.0, 1.0: 24.0}
    # 100 g/kWh, PUE 1: each x job-hour instead of a y one adds 4 x (2.0 - 0.5) kWh = 0.6 kg
    assert np.isclose(costs[0.5], 3 * 0.6) and np.isclose(costs[1.0], 6 * 0.6)


@pytest.mark.parametrize("bad", [-0.1, 1.5, "high", True])
def test_fairness_outside_zero_to_one_is_refused(bad):
    with pytest.raises(InputError, match="fairness .* is not a number in 0..1"):
        dataclasses.replace(_binding(0.0), fairness=bad)


def _placed(job_id: str, hours: int) -> Placement:
    return Placement(job_id=job_id, site="a", start=at(0), end=at(0) + pd.Timedelta(hours=hours),
                     gpu_type="H100", gpus=2, energy_kwh=0.0, emissions_kg=0.0)


def test_the_recount_checks_quotas_known_bad_and_just_at_the_limit():
    prob = _binding(1.0, quota_z=16.0)     # 16 GPU-h/day over 12 h: 8 GPU-h guaranteed to z
    plan = PlanResult(status=PlanStatus.HEURISTIC, solver=SolverRecord("x", PlanStatus.HEURISTIC))
    plan.placements = [_placed("z0", 2), _placed("z1", 2)]          # 2 x 4 = 8 GPU-h: at it
    assert quota_shortfalls(prob, plan) == []
    assert score_plan(prob, plan).quota_shortfalls == 0
    plan.placements = [_placed("z0", 2)]                              # 4 GPU-h: short
    assert quota_shortfalls(prob, plan) == [("z", "H100", 8.0, 4.0)]
    assert score_plan(prob, plan).quota_shortfalls == 1


def test_a_warm_start_reaches_the_fair_plan():
    # the rolling step passes the previous plan; tenants with fair shares must not drop it
    from carbonsched.plan import WarmStart

    prob = _binding(1.0, quota_z=64.0)
    first = solve_plan(prob, method="milp")
    again = solve_plan(prob, method="milp", start=WarmStart(first.placements, "run 1"))
    assert again.solver.warm_start.startswith("warm: started from run 1"), \
        again.solver.warm_start
    rows = {r["tenant"]: r["placed_gpu_hours"] for r in again.tenants}
    assert rows == {"x": 16.0, "y": 32.0, "z": 48.0}


# ------------------------------------------------- a plan made without the fair-share rows

def test_a_greedy_plan_says_fairness_was_not_applied_and_counts_the_tenants():
    from carbonsched.plan import greedy_plan

    prob = _binding(1.0, quota_z=64.0)
    plan = greedy_plan(prob)
    assert plan.solver.method == "greedy"
    assert [r["fair_applied"] for r in plan.tenants] == [False, False, False]
    assert plan.totals["fairness_not_applied_tenants"] == 3
    [note] = [n for n in plan.notes if n.startswith("fairness not applied:")]
    assert "the greedy plan (greedy_plan)" in note and "3 tenant(s)" in note
    # the shares shown are the greedy plan's own placements, whatever the targets say
    placed = {r["tenant"]: r["placed_gpu_hours"] for r in plan.tenants}
    assert sum(placed.values()) == sum(p.gpus * (p.end - p.start) / pd.Timedelta(hours=1)
                                       for p in plan.placements)


def test_a_fair_solve_that_falls_back_to_greedy_names_the_fallback_not_the_fair_shares():
    from carbonsched.plan.baselines import greedy_from_sets
    from carbonsched.plan.fairness import solve_fair
    from carbonsched.plan.sets import compile_sets

    def fall_back(p, **kw):
        if p.fair_targets is None:           # the carbon-only plan: the real MILP
            return solve_plan(p, method="milp", time_limit_s=kw["time_limit_s"])
        return greedy_from_sets(compile_sets(p, columns=False))   # what _fallback returns

    prob = _binding(1.0, quota_z=64.0)
    plan = solve_fair(prob, fall_back, 60.0)
    assert plan.solver.method == "greedy"
    assert plan.totals["fairness_not_applied_tenants"] == 3
    assert not any(n.startswith("fairness: ") for n in plan.notes)
    [note] = [n for n in plan.notes if n.startswith("fairness not applied:")]
    assert "fell back to the greedy plan" in note
    rows = {r["tenant"]: r for r in plan.tenants}
    assert not any(r["fair_applied"] for r in rows.values())
    # the targets are the fair allocation (z's 32 GPU-h quota, then x 16, y 32, z 16)
    assert np.isclose(rows["y"]["target_share"], 32 / 96)


def test_the_cli_tenants_table_shows_fairness_not_applied():
    from carbonsched.cli.common import out
    from carbonsched.cli.plan_view import print_tenants

    row = {"tenant": "x", "weight": 1.0, "demand_gpu_hours": 48.0, "placed_gpu_hours": 40.0,
           "dominant_share": 0.42, "target_share": 0.17, "dominant_gpu_type": "H100",
           "quota_gpu_hours": 0.0, "quota_met": None}
    doc = {"tenants": [dict(row, fair_applied=False), dict(row, tenant="y",
                                                           fair_applied=False)],
           "totals": {}, "notes": ["fairness not applied: the fair plan fell back to the "
                                   "greedy plan (heuristic), which does not model fair shares"]}
    with out.capture() as cap:
        print_tenants(doc)
    text = cap.get()
    assert "Tenants (fairness not applied" in text
    assert "fairness not applied for 2 tenant(s): the fair plan fell back to the greedy" in text
    with out.capture() as cap:
        print_tenants({"tenants": [dict(row, fair_applied=True)], "totals": {}})
    assert "Tenants (fair shares)" in cap.get() and "not applied" not in cap.get()


# ------------------------------------------------- targets over what each tenant can reach

def test_reachable_drf_with_one_group_is_weighted_drf_and_exact():
    from carbonsched.plan.fairness import reachable_drf

    d = np.array([[48.0], [48.0], [48.0]])
    # z's 32 GPU-h floor first, then x (w 1) and y (w 2) and z (w 1) by level: 16, 32, 16
    got = reachable_drf(d, np.array([[True]]), np.array([96.0]), np.array([1.0, 2.0, 1.0]),
                        floor=np.array([0.0, 0.0, 32.0]))
    assert np.allclose(got, [[16.0], [32.0], [48.0]], rtol=0, atol=1e-9)
    d = np.array([[10.0], [100.0]])
    assert np.allclose(reachable_drf(d, np.array([[True, True]]), np.array([30.0, 30.0]),
                                     np.array([5.0, 1.0])),
                       weighted_drf(d, np.array([60.0]), np.array([5.0, 1.0])), atol=1e-9)


def test_reachable_drf_caps_a_tenant_at_the_sites_its_residency_allows():
    """Sites a (40 GPU-h) and b (20). x (w 2) may use b only, y (w 1) either, z (w 2) either.
    Per type x would get 2/5 of 60 = 24, more than b holds. Filling: x 2s, y s, z 2s with
    x <= 20: s = 10 freezes x at 20; y and z go on over a's 40 less what they hold: y 40/3,
    z 80/3 at s = 40/3 (y s, z 2s: 3s = 40)."""
    from carbonsched.plan.fairness import reachable_drf

    dem = np.array([[100.0, 0.0], [0.0, 100.0], [0.0, 100.0]])    # groups: {b}, {a, b}
    reach = np.array([[False, True], [True, True]])
    got = reachable_drf(dem, reach, np.array([40.0, 20.0]), np.array([2.0, 1.0, 2.0]))
    assert np.allclose(got.sum(axis=1), [20.0, 40 / 3, 80 / 3], rtol=0, atol=1e-7)
    assert np.allclose(got, [[20.0, 0.0], [0.0, 40 / 3], [0.0, 80 / 3]], atol=1e-7)


@pytest.mark.parametrize("bad", [
    (np.array([[1.0]]), np.array([[True, True]]), np.array([1.0]), np.array([1.0])),
    (np.array([[-1.0]]), np.array([[True]]), np.array([1.0]), np.array([1.0])),
    (np.array([[1.0]]), np.array([[True]]), np.array([1.0]), np.array([0.0])),
])
def test_reachable_drf_refuses_bad_input(bad):
    from carbonsched.plan.fairness import reachable_drf

    with pytest.raises(ValueError, match="reachable_drf"):
        reachable_drf(*bad)


def test_residency_makes_the_fair_target_what_the_tenant_can_reach_and_the_plan_meets_it():
    """a: 4 H100, b: 2, ten hours (40 and 20 GPU-h). x (weight 2) may run at b only, y
    (weight 1) anywhere; both ask more than there is. Per type (all sites) x's target would be
    2/3 of 60 = 40 GPU-h, twice what b holds; over what x can reach it is 20 (all of b) and y's
    40: the plan meets both exactly."""
    sites = [SiteWrapper("a").gpus("H100", 4, per_node=4).obj(),
             SiteWrapper("b").gpus("H100", 2, per_node=2).obj()]
    jobs = ([JobWrapper(f"x{i}").tenant("x").gpus(2).hours(2).window(0, 10).sites("b").obj()
             for i in range(10)]
            + [JobWrapper(f"y{i}").tenant("y").gpus(2).hours(2).window(0, 10).obj()
               for i in range(15)])
    prob = dataclasses.replace(problem(sites, jobs, 10), fairness=1.0,
                               tenants={"x": Tenant("x", 2.0), "y": Tenant("y", 1.0)})
    plan = solve_plan(prob, method="milp")
    rows = {r["tenant"]: r for r in plan.tenants}
    assert {t: r["placed_gpu_hours"] for t, r in rows.items()} == {"x": 20.0, "y": 40.0}
    assert np.isclose(rows["x"]["target_share"], 20 / 60)
    assert np.isclose(rows["y"]["target_share"], 40 / 60)
    for r in rows.values():
        assert np.isclose(r["dominant_share"], r["target_share"])


# ------------------------------------------------- targets of whole jobs (DRF Algorithm 1)

def _three_tenants_of_whole_jobs():
    """One site of 4 GPUs for 6 hours (24 GPU-h). a (w 1): 4 jobs of 1 GPU x 3 h; b (w 2): 10
    jobs of 1 GPU x 2 h; c (w 1): 2 jobs of 1 GPU x 4 h; every window the whole horizon."""
    tenant = np.array([0] * 4 + [1] * 10 + [2] * 2)
    slots = np.array([3] * 4 + [2] * 10 + [4] * 2)
    return tenant, np.ones(16), slots, np.ones((16, 1), bool), np.zeros(16, int), 6 - slots


def test_job_by_job_drf_on_a_hand_worked_three_tenant_example_of_indivisible_jobs():
    """DRF Algorithm 1, share = GPU-h / weight, ties to the first tenant:
    (0, 0, 0) a -> 3; (3, 0, 0) b -> 2 [1]; (3, 1, 0) c -> 4; b -> 4 [2]; b -> 6 [3];
    (3, 3, 4) a (tie, first) -> 6; (6, 3, 4) b -> 8 [4]; (6, 4, 4) b (tie, first) -> 10 [5];
    (6, 5, 4) c -> 8: all 24 GPU-h given, no job fits any more. a 6, b 10, c 8 GPU-h
    (shares 1/4, 5/12, 1/3). c's second 4-hour job needs the other jobs moved (the greedy
    packing leaves no 4 free hours on one GPU; the rows c+b, c+b, a+a, b+b+b do)."""
    from carbonsched.plan.fairness import job_by_job_drf

    tenant, gpus, slots, sites, first, last = _three_tenants_of_whole_jobs()
    held, at = job_by_job_drf(tenant, gpus, slots, sites, first, last, np.full((1, 6), 4.0),
                              np.array([1.0, 2.0, 1.0]), total_capacity=24.0)
    assert held.tolist() == [6.0, 10.0, 8.0]
    given = at[:, 0] >= 0
    assert np.bincount(tenant[given], minlength=3).tolist() == [2, 5, 2]
    use = np.zeros(6)
    for k in np.flatnonzero(given):
        use[at[k, 1]:at[k, 1] + slots[k]] += gpus[k]
    assert use.tolist() == [4.0] * 6                    # a packing: never over the 4 GPUs


def test_the_continuous_target_is_out_of_reach_and_the_job_by_job_one_is_met():
    """Known-bad for water-filling: on the example above the continuous weighted DRF level
    gives a 6, b 12, c 6 GPU-h, but c's jobs are 4 GPU-h each (any plan gives it 0, 4 or 8: at
    best 33 % off). The job-by-job targets (6, 10, 8) are a packing: the plan meets each."""
    from carbonsched.plan.fairness import fair_targets, reachable_drf

    site = SiteWrapper("a").gpus("H100", 4, per_node=4).obj()
    jobs = ([JobWrapper(f"a{i}").tenant("a").gpus(1).hours(3).window(0, 6).obj()
             for i in range(4)]
            + [JobWrapper(f"b{i}").tenant("b").gpus(1).hours(2).window(0, 6).obj()
               for i in range(10)]
            + [JobWrapper(f"c{i}").tenant("c").gpus(1).hours(4).window(0, 6).obj()
               for i in range(2)])
    base = problem([site], jobs, 6, ci={"a": [50.0 + 40.0 * h for h in range(6)]})
    prob = dataclasses.replace(base, fairness=1.0, tenants={
        "a": Tenant("a", 1.0), "b": Tenant("b", 2.0), "c": Tenant("c", 1.0)})
    carbon = solve_plan(base, method="milp")
    ft, alloc, cap, binding = fair_targets(prob, carbon)
    assert binding == ["H100"] and cap.tolist() == [24.0]
    # the continuous level over the same 24 GPU-h (six hours of four GPUs, one group)
    level = reachable_drf(np.array([[12.0], [20.0], [8.0]]), np.ones((1, 6), dtype=bool),
                          np.full(6, 4.0), np.array([1.0, 2.0, 1.0]))
    assert np.allclose(level[:, 0], [6.0, 12.0, 6.0], atol=1e-6)
    assert ft.target_gpu_hours[:, 0].tolist() == [6.0, 10.0, 8.0]
    plan = solve_plan(prob, method="milp")
    rows = {r["tenant"]: r for r in plan.tenants}
    assert {t: r["placed_gpu_hours"] for t, r in rows.items()} == {"a": 6.0, "b": 10.0,
                                                                   "c": 8.0}
    for r in rows.values():
        assert np.isclose(r["dominant_share"], r["target_share"], rtol=0, atol=1e-9)
    assert np.isclose(rows["c"]["target_share"], 8 / 24)


def test_job_by_job_drf_just_at_the_limit():
    """One job of 2 GPUs x 3 slots (6 GPU-h) ending at the horizon's last slot: given when
    exactly 2 GPUs are free in each of its slots and exactly 6 GPU-h of capacity is left; not
    with one GPU fewer in one slot, nor with the capacity a hair under 6 GPU-h."""
    from carbonsched.plan.fairness import job_by_job_drf

    def run(free, cap):
        return job_by_job_drf(np.array([0]), np.array([2.0]), np.array([3]),
                              np.array([[True]]), np.array([2]), np.array([2]),
                              np.array([free], dtype=float), np.array([1.0]),
                              total_capacity=cap)

    held, at = run([0, 0, 2, 2, 2], 6.0)
    assert held.tolist() == [6.0] and at.tolist() == [[0, 2]]
    assert run([0, 0, 2, 1, 2], 6.0)[0].tolist() == [0.0]           # one GPU short
    assert run([0, 0, 2, 2, 2], 6.0 - 1e-3)[0].tolist() == [0.0]    # capacity short


def test_job_by_job_drf_gives_the_floors_first():
    """The example above with a guaranteed 9 GPU-h: a gets three jobs first (3, 6, 9); the
    rest is filled on shares above the floors, (held - floor) / weight: (0, 0, 0) a (tie,
    first) -> 12, its last job [3]; b -> 2 [1]; c -> 4 [4]; b -> 4 [2]; b -> 6 [3]; b -> 8 [4]:
    24 GPU-h given (rows a+a, a+a, c+b, b+b+b). a 12, b 8, c 4. Without the floor a gets 6."""
    from carbonsched.plan.fairness import job_by_job_drf

    tenant, gpus, slots, sites, first, last = _three_tenants_of_whole_jobs()
    held, _at = job_by_job_drf(tenant, gpus, slots, sites, first, last, np.full((1, 6), 4.0),
                               np.array([1.0, 2.0, 1.0]), floor=np.array([9.0, 0.0, 0.0]),
                               total_capacity=24.0)
    assert held.tolist() == [12.0, 8.0, 4.0]


@pytest.mark.parametrize("bad, what", [
    (dict(job_tenant=np.array([0, 1])), "disagree"),                  # shapes
    (dict(job_tenant=np.array([3])), "tenant position is outside 0..0"),
    (dict(job_slots=np.array([0])), "at least one slot"),
    (dict(free_gpus=np.array([[-1.0, 2.0]])), "free GPUs"),
    (dict(weights=np.array([0.0])), "weights"),
    (dict(job_gpu_hours=np.array([-1.0])), "job_gpu_hours"),
])
def test_job_by_job_drf_refuses_bad_input(bad, what):
    from carbonsched.plan.fairness import job_by_job_drf

    kw = dict(job_tenant=np.array([0]), job_gpus=np.array([1.0]), job_slots=np.array([1]),
              job_sites=np.array([[True]]), job_first=np.array([0]), job_last=np.array([1]),
              free_gpus=np.array([[1.0, 1.0]]), weights=np.array([1.0]))
    with pytest.raises(ValueError, match=f"job_by_job_drf: .*{what}"):
        job_by_job_drf(**{**kw, **bad})
