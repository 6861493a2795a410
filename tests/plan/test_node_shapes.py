"""Gangs as the cluster sees them (issue 33 item 2): a gang larger than one node runs on whole
nodes of the site's node shape (``gpus_per_node``), or not at that site; every planner path and
the recount agree."""

from __future__ import annotations

import pytest

from carbonsched.domain import GpuPool, Placement, ReasonCode
from carbonsched.plan import agnostic_plan, greedy_plan, score_plan, solve_plan
from carbonsched.plan.result import PlanResult, PlanStatus, SolverRecord
from carbonsched.plan.sets import compile_sets

from .builders import JobWrapper, SiteWrapper, at, problem


@pytest.mark.parametrize(("gpus", "nodes"), [
    (1, 1), (7, 1), (8, 1),           # one node, up to the node's 8 GPUs (just at the limit)
    (16, 2), (24, 3), (32, 4),         # whole nodes
    (9, None), (12, None), (17, None),  # larger than a node, not whole nodes (9: just above)
    (40, None), (0, None),             # more than the pool; no GPUs
])
def test_gang_nodes_of_an_8_gpu_node_pool(gpus, nodes):
    assert GpuPool(count=32, board_power_w=400.0, gpus_per_node=8).gang_nodes(gpus) == nodes


def test_a_pool_without_a_node_shape_is_one_node():
    pool = GpuPool(count=20, board_power_w=400.0)
    assert pool.node_gpus == 20
    assert [pool.gang_nodes(g) for g in (1, 12, 20, 21)] == [1, 1, 1, None]


def _sites():
    # a: 16 H100 in 2 nodes of 8 (the cleaner site); b: 12 H100 in 3 nodes of 4
    return [SiteWrapper("a").gpus("H100", 16, per_node=8).obj(),
            SiteWrapper("b").gpus("H100", 12, per_node=4).obj()]


def _clean_a(hours: int = 4) -> dict[str, list[float]]:
    return {"a": [50.0] * hours, "b": [500.0] * hours}


def test_a_gang_goes_only_where_the_node_shape_cuts_it():
    jobs = [JobWrapper("twelve").gpus(12).kw_per_gpu(0.5).obj(),   # a: 12 > 8, not 2 nodes
            JobWrapper("six").gpus(6).kw_per_gpu(0.5).obj(),       # a: one node; b: 6 > 4
            JobWrapper("sixteen").gpus(16).kw_per_gpu(0.5).window(1, 4).obj()]
    prob = problem(_sites(), jobs, 4, ci=_clean_a())
    sets = compile_sets(prob, columns=False)
    assert sets.job_sites.tolist() == [[False, True], [True, False], [True, False]]
    for plan in (solve_plan(prob, method="milp"), solve_plan(prob, method="colgen"),
                 solve_plan(prob), greedy_plan(prob), agnostic_plan(prob)):
        got = {p.job_id: p.site for p in plan.placements}
        assert got == {"twelve": "b", "six": "a", "sixteen": "a"}, plan.solver
        sc = score_plan(prob, plan)
        assert (sc.gang_violations, sc.capacity_violations) == (0, 0)


def test_a_gang_no_allowed_site_can_cut_is_refused_with_its_reason():
    jobs = [JobWrapper("ten").gpus(10).obj(),          # a: 10 > 8; b: 10 > 4, not 4s
            JobWrapper("ten-at-b").gpus(10).sites("b").obj(),
            JobWrapper("twelve-at-a").gpus(12).sites("a").obj(),
            JobWrapper("twenty").gpus(20).obj(),       # more than any pool: GangTooLarge
            JobWrapper("eight").gpus(8).obj()]
    prob = problem(_sites(), jobs, 4, ci=_clean_a())
    for plan in (solve_plan(prob), greedy_plan(prob)):
        reasons = {u.job_id: u.reason for u in plan.unplaced}
        assert reasons == {"ten": ReasonCode.GANG_NOT_WHOLE_NODES,
                           "ten-at-b": ReasonCode.GANG_NOT_WHOLE_NODES,
                           "twelve-at-a": ReasonCode.GANG_NOT_WHOLE_NODES,
                           "twenty": ReasonCode.GANG_TOO_LARGE}
        detail = {u.job_id: u.detail for u in plan.unplaced}
        assert detail["ten"] == (
            "gang of 10 H100 is larger than one node and not a whole number of nodes at any "
            "allowed site large enough (a: 8 per node, b: 4 per node); give a multiple of 4 or "
            "a multiple of 8, or at most 8 GPUs")
        assert "(a: 8 per node)" in detail["twelve-at-a"]
        assert [p.job_id for p in plan.placements] == ["eight"]


def test_the_recount_counts_a_gang_placed_across_part_of_a_node():
    prob = problem(_sites(), [JobWrapper("twelve").gpus(12).obj()], 4, ci=_clean_a())
    rec = SolverRecord(name="test", status=PlanStatus.FEASIBLE)
    bad = PlanResult(status=PlanStatus.FEASIBLE, solver=rec,
                     placements=[Placement("twelve", "a", at(0), at(1), "H100", 12, 1.0, 1.0)])
    good = PlanResult(status=PlanStatus.FEASIBLE, solver=rec,
                      placements=[Placement("twelve", "b", at(0), at(1), "H100", 12, 1.0, 1.0)])
    assert score_plan(prob, bad).gang_violations == 1
    assert score_plan(prob, good).gang_violations == 0


def test_without_node_shapes_planning_is_unchanged():
    # the same sites without gpus_per_node: each pool is one node, every gang up to it fits
    sites = [SiteWrapper("a").gpus("H100", 16).obj(), SiteWrapper("b").gpus("H100", 12).obj()]
    jobs = [JobWrapper("twelve").gpus(12).kw_per_gpu(0.5).obj(),
            JobWrapper("ten").gpus(10).kw_per_gpu(0.5).obj()]
    prob = problem(sites, jobs, 4, ci=_clean_a())
    plan = solve_plan(prob)
    assert {p.job_id: p.site for p in plan.placements} == {"twelve": "a", "ten": "a"}
    assert not plan.unplaced
