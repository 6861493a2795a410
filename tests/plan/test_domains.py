"""Network domains (issue 37 item 2): a topology-bound gang stays inside one domain (or at most
``max_domains``), domain capacity holds in every hour, every planner path agrees and the recount
checks it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from carbonsched.domain import GpuPool, Job, Placement, ReasonCode
from carbonsched.errors import WorkloadError
from carbonsched.plan import agnostic_plan, greedy_plan, score_plan, solve_plan
from carbonsched.plan.result import PlanResult, PlanStatus, SolverRecord, recount_violations

from .builders import JobWrapper, SiteWrapper, at, problem


def _site():
    # 32 H100 on 4 nodes of 8, 3 nodes per domain: domain 0 = 3 nodes (24 GPUs), 1 = 1 node (8)
    return SiteWrapper("a").gpus("H100", 32, per_node=8, per_domain=3).obj()


@pytest.mark.parametrize(("count", "per_domain", "nodes"), [
    (32, 3, (3, 1)), (32, 4, (4,)), (32, 1, (1, 1, 1, 1)), (32, None, (4,)), (24, 3, (3,)),
])
def test_domain_nodes_cut_the_pool(count, per_domain, nodes):
    pool = GpuPool(count=count, board_power_w=700.0, gpus_per_node=8, nodes_per_domain=per_domain)
    assert pool.domain_nodes == nodes


@pytest.mark.parametrize(("gpus", "need"), [(8, 1), (16, 1), (24, 1), (32, 2), (12, None)])
def test_domains_needed(gpus, need):
    pool = GpuPool(count=32, board_power_w=700.0, gpus_per_node=8, nodes_per_domain=3)
    assert pool.domains_needed(gpus) == need


def test_two_same_domain_gangs_never_share_hours_they_cannot_fit():
    """Both 16-GPU gangs fit the pool's 32 GPUs at once, but only one fits a domain at a time:
    the second runs an hour later, each inside one domain, on every planner path."""
    jobs = [JobWrapper(f"g{i}").gpus(16).max_domains(1).window(0, 2).obj() for i in range(2)]
    prob = problem([_site()], jobs, 4, ci={"a": [50.0, 100.0, 200.0, 300.0]})
    free = problem([_site()], [dataclasses.replace(j, max_domains=None) for j in jobs], 4,
                   ci={"a": [50.0, 100.0, 200.0, 300.0]})
    assert {p.start for p in solve_plan(free).placements} == {at(0)}   # without the constraint
    for plan in (solve_plan(prob, method="milp"), solve_plan(prob, method="colgen"),
                 solve_plan(prob), greedy_plan(prob), agnostic_plan(prob)):
        starts = sorted(p.start for p in plan.placements)
        if plan.solver.method in ("milp",):
            assert starts == [at(0), at(1)], plan.solver
        for p in plan.placements:
            assert len(p.domains) == 2 and len(set(p.domains)) == 1     # 2 nodes, one domain
        assert len({p.start for p in plan.placements}) == len(plan.placements)
        sc = score_plan(prob, plan)
        assert (sc.domain_violations, sc.capacity_violations, sc.gang_violations) == (0, 0, 0)


def test_a_span_of_two_domains_and_a_gang_no_domain_holds():
    jobs = [JobWrapper("wide").gpus(32).max_domains(2).obj(),
            JobWrapper("same32").gpus(32).max_domains(1).obj()]
    prob = problem([_site()], jobs, 4)
    plan = solve_plan(prob, method="milp")
    assert [(p.job_id, p.domains) for p in plan.placements] == [("wide", (0, 0, 0, 1))]
    [u] = plan.unplaced
    assert (u.job_id, u.reason) == ("same32", ReasonCode.DOMAIN_TOO_SMALL)
    assert "must stay in one network domain" in u.detail and "a: 3 node(s)" in u.detail
    assert score_plan(prob, plan).domain_violations == 0


def test_a_site_whose_domains_hold_the_gang_is_chosen_over_a_cleaner_one():
    # b is cleaner but its domains are single nodes: a 16-GPU same-domain gang runs at a only
    sites = [_site(), SiteWrapper("b").gpus("H100", 32, per_node=8, per_domain=1).obj()]
    jobs = [JobWrapper("g").gpus(16).max_domains(1).obj(),
            JobWrapper("free").gpus(16).obj()]
    prob = problem(sites, jobs, 2, ci={"a": [500.0, 500.0], "b": [50.0, 50.0]})
    plan = solve_plan(prob)
    assert {p.job_id: p.site for p in plan.placements} == {"g": "a", "free": "b"}


def _plan(*placements: Placement) -> PlanResult:
    return PlanResult(status=PlanStatus.HEURISTIC, solver=SolverRecord("x", PlanStatus.HEURISTIC),
                      placements=list(placements))


def _pl(job: Job, hour: int, domains: tuple[int, ...]) -> Placement:
    return Placement(job_id=job.id, site="a", start=at(hour),
                     end=at(hour) + pd.Timedelta(minutes=job.duration_minutes),
                     gpu_type="H100", gpus=job.gpus, energy_kwh=0.0, emissions_kg=0.0,
                     domains=domains)


def test_the_recount_checks_domains_known_bad_and_just_at_the_limit():
    g16 = JobWrapper("g16").gpus(16).max_domains(1).obj()     # 2 nodes
    g8 = JobWrapper("g8").gpus(8).max_domains(1).obj()        # 1 node
    h16 = JobWrapper("h16").gpus(16).max_domains(1).obj()
    prob = problem([_site()], [g16, g8, h16], 2)
    # just at the limit: 2 + 1 nodes fill domain 0's 3 nodes in hour 0; h16 split 1+1? no: hour 1
    ok = _plan(_pl(g16, 0, (0, 0)), _pl(g8, 0, (0,)), _pl(h16, 1, (0, 0)))
    assert score_plan(prob, ok).domain_violations == 0
    assert recount_violations(prob, ok) == {}
    # known bad: a same-domain gang split over two domains
    assert score_plan(prob, _plan(_pl(g16, 0, (0, 1)))).domain_violations == 1
    # known bad: no domains at all, a wrong node count, a domain the pool lacks
    for doms in ((), (0,), (0, 0, 0), (2, 2)):
        assert score_plan(prob, _plan(_pl(g16, 0, doms))).domain_violations == 1
    # known bad: a domain over its GPUs in an hour (4 nodes in domain 0's 3)
    over = _plan(_pl(g16, 0, (0, 0)), _pl(h16, 0, (0, 0)))
    assert score_plan(prob, over).domain_violations == 1
    assert recount_violations(prob, over) == {"domain_violations": 1}
    # known bad: the 1-node domain holds one node, not two gangs of one node each in one hour
    g8b = JobWrapper("g8b").gpus(8).max_domains(1).obj()
    prob2 = problem([_site()], [g8, g8b], 2)
    assert score_plan(prob2, _plan(_pl(g8, 0, (1,)), _pl(g8b, 0, (1,)))).domain_violations == 1
    assert score_plan(prob2, _plan(_pl(g8, 0, (1,)), _pl(g8b, 1, (1,)))).domain_violations == 0


def test_a_span_above_max_domains_is_counted():
    wide = JobWrapper("wide").gpus(32).max_domains(2).obj()
    prob = problem([SiteWrapper("a").gpus("H100", 32, per_node=8, per_domain=1).obj()], [wide], 2)
    assert score_plan(prob, _plan(_pl(wide, 0, (0, 0, 1, 2)))).domain_violations == 1
    # 4 single-node domains: a span of 2 cannot hold 4 nodes; pre-check refuses it
    [u] = solve_plan(prob).unplaced
    assert u.reason == ReasonCode.DOMAIN_TOO_SMALL


def test_topology_gangs_run_in_one_piece():
    with pytest.raises(WorkloadError, match="runs in one piece; set max_pieces = 1"):
        Job(id="p", tenant="t", gpu_type="H100", gpus=8, duration_hours=2,
            power_per_gpu_kw=1.0, earliest_start=at(0), deadline=at(10), preemptible=True,
            max_pieces=2, max_domains=1)
    with pytest.raises(WorkloadError, match=r"max_domains must be a whole number in 1\.\.1024"):
        JobWrapper("z").max_domains(0).obj()
    assert JobWrapper("edge").max_domains(1024).obj().max_domains == 1024


def test_a_plan_without_room_in_any_domain_unplaces_the_gang_with_a_reason():
    """The fallback path (a plan whose placements carry no domains): first fit, and a gang no
    domain holds is left unplaced, named, with the totals recomputed."""
    from carbonsched.plan.domain_repair import with_domains
    from carbonsched.plan.sets import compile_sets

    jobs = [JobWrapper(f"g{i}").gpus(16).max_domains(1).window(0, 1).obj() for i in range(2)]
    prob = problem([_site()], jobs, 1)
    sets = compile_sets(prob)
    res = agnostic_plan(dataclasses.replace(prob, jobs=[dataclasses.replace(j, max_domains=None)
                                                        for j in jobs]))
    res.placements = [dataclasses.replace(p, domains=()) for p in res.placements]
    assert len(res.placements) == 2
    out = with_domains(sets, res)
    assert [p.job_id for p in out.placements] == ["g0"]
    assert [(u.job_id, u.reason) for u in out.unplaced] == [
        ("g1", ReasonCode.INSUFFICIENT_CAPACITY)]
    assert "no network domain had room" in out.unplaced[0].detail
    assert out.totals["jobs_placed"] == 1.0
    assert np.isclose(out.totals["emissions_kg"], score_plan(prob, out).emissions_kg)
    assert any("left unplaced" in n for n in out.notes)


def test_unplacing_a_gang_keeps_each_inference_tier_served_as_it_was(monkeypatch):
    """Two demands of one (area, hour, GPU type), 1 GPU each, the 10 ms one served at the 5 ms
    site only: the plan rebuilt after a gang is dropped gives each demand row its own GPU
    within its SLO (it gave both to the last row), and serves where the plan did."""
    from carbonsched.plan import domain_repair
    from carbonsched.plan.domain_repair import with_domains
    from carbonsched.plan.sets import compile_sets

    rebuilt = []
    real = domain_repair.build_plan_result
    monkeypatch.setattr(domain_repair, "build_plan_result",
                        lambda sets, chosen, alloc, *a, **k: rebuilt.append(alloc.copy())
                        or real(sets, chosen, alloc, *a, **k))

    from .builders import demand

    jobs = [JobWrapper(f"g{i}").gpus(16).max_domains(1).window(0, 1).obj() for i in range(2)]
    serve = [SiteWrapper("near").gpus("L4", 1).latency("eu", 5.0).obj(),
             SiteWrapper("far").gpus("L4", 1).latency("eu", 20.0).obj()]
    prob = problem([_site(), *serve], jobs, 1,
                   [demand("eu", 0, 1, slo_ms=50.0, gpu_type="L4", kw=0.5),
                    demand("eu", 0, 1, slo_ms=10.0, gpu_type="L4", kw=0.5)])
    sets = compile_sets(prob)
    res = agnostic_plan(dataclasses.replace(prob, jobs=[dataclasses.replace(j, max_domains=None)
                                                        for j in jobs]))
    res.placements = [dataclasses.replace(p, domains=()) for p in res.placements]
    assert sorted((i.site, i.gpus) for i in res.inference) == [("far", 1), ("near", 1)]
    out = with_domains(sets, res)
    assert [p.job_id for p in out.placements] == ["g0"]
    (alloc,) = rebuilt
    assert alloc.sum(axis=1).tolist() == [1, 1]             # each row its own GPU
    assert not (alloc.astype(bool) & ~sets.inf_sites).any()  # within its SLO
    assert sorted((i.site, i.gpus, i.energy_kwh) for i in out.inference) == sorted(
        (i.site, i.gpus, i.energy_kwh) for i in res.inference)
    assert recount_violations(prob, out) == {}
    assert np.isclose(out.totals["emissions_kg"], score_plan(prob, out).emissions_kg)


def test_a_day_too_large_for_the_direct_milp_plans_domains_by_column_generation(monkeypatch):
    """Above the size ``auto`` gives the direct MILP, domains do not force it (at 10k jobs it ran
    four times its limit and ended on the greedy plan): column generation plans the gangs without
    domain rows, they are put in domains after, and a gang left out is not called optimal."""
    import carbonsched.plan.solve as solve_mod

    monkeypatch.setattr(solve_mod, "AUTO_MILP_MAX_OPTIONS", 0)   # "too large" for this test
    jobs = [JobWrapper(f"g{i}").gpus(16).max_domains(1).window(0, 1).obj() for i in range(2)]
    prob = problem([_site()], jobs, 1)           # both fit the 32 GPUs, only one a domain
    res = solve_plan(prob)
    assert res.solver.method == "colgen" and "too large here" in res.solver.note
    assert [p.job_id for p in res.placements] == ["g0"]
    assert [(u.job_id, u.reason) for u in res.unplaced] == [
        ("g1", ReasonCode.INSUFFICIENT_CAPACITY)]
    assert res.status == PlanStatus.FEASIBLE and res.solver.status == PlanStatus.FEASIBLE
    assert res.solver.objective == pytest.approx(res.totals["objective"])
    assert res.solver.bound is not None and res.solver.mip_gap is not None
    assert res.solver.mip_gap == pytest.approx(
        (res.totals["objective"] - res.solver.bound) / abs(res.totals["objective"]))
    sc = score_plan(prob, res)
    assert (sc.domain_violations, sc.capacity_violations) == (0, 0)
    explicit = solve_plan(prob, method="colgen")   # asked for by name below that size: the MILP
    assert explicit.solver.method == "milp" and len(explicit.placements) == 1
