"""Piece patterns as columns of column generation (issue 36 item 1): DP pricing, a bound over
piece plans, and plans with pieces recounted by ``score_plan``.

Expected costs are computed by hand or by brute force over every slot choice.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carbonsched.domain import Job
from carbonsched.plan import PlanStatus, score_plan, solve_plan
from carbonsched.plan.colgen import job_classes, lagrangian, make_layout
from carbonsched.plan.colgen.pieces import (
    piece_dp,
    piece_jobs,
    piece_lagrangian,
    piece_shape,
    price_pieces,
)
from carbonsched.plan.result import recount_violations
from carbonsched.plan.sets import best_piece_pattern, compile_sets

from .builders import JobWrapper, SiteWrapper, at, problem

PROPS = settings(max_examples=25, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
TOL_KG = 1e-6


def pjob(job_id: str = "p", minutes: int = 180, overhead: int = 10, pieces: int = 3,
         es: int = 0, dl: int = 8, gpus: int = 1, kw: float = 1.0) -> Job:
    return Job(id=job_id, tenant="t", gpu_type="H100", gpus=gpus, duration_minutes=minutes,
               power_per_gpu_kw=kw, earliest_start=at(es), deadline=at(dl),
               preemptible=pieces > 1, checkpoint_overhead_minutes=overhead, max_pieces=pieces)


def brute_force(hold, energy, first, last, n_decide, n, frac, k):
    """Cheapest choice of ``n`` slots in exactly ``k`` runs with gaps, by enumeration."""
    n_t = len(hold)
    best = np.inf
    for taken in itertools.combinations(range(first, n_t), n):
        runs = np.split(np.array(taken), np.flatnonzero(np.diff(taken) > 1) + 1)
        if len(runs) != k or taken[-1] > last or any(r[0] >= n_decide for r in runs):
            continue
        w = np.ones(n)
        w[-1] = frac
        best = min(best, float((hold[list(taken)] + w * energy[list(taken)]).sum()))
    return best


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_the_dp_finds_the_cheapest_pattern_of_every_site(data):
    n_t = data.draw(st.integers(3, 8))
    k = data.draw(st.integers(2, 3))
    n = data.draw(st.integers(k, max(k, n_t - k + 1)))
    rates = st.lists(st.floats(-5, 5, allow_nan=False), min_size=n_t, max_size=n_t)
    hold = np.array([data.draw(rates) for _ in range(2)])
    # negative energy rates too: absorption multipliers can make a slot pay
    energy = np.array([data.draw(rates) for _ in range(2)])
    first = data.draw(st.integers(0, 1))
    last = data.draw(st.integers(first, n_t - 1))
    n_decide = data.draw(st.integers(1, n_t))
    frac = data.draw(st.sampled_from([1.0, 0.5, 1 / 60]))
    best, _t, _h = piece_dp(hold[None], energy[None], np.array([first]), np.array([last]),
                            n_decide, np.array([n]), np.array([frac]), k)
    for s in range(2):
        want = brute_force(hold[s], energy[s], first, last, n_decide, n, frac, k)
        if np.isfinite(want):
            assert best[0, s] == pytest.approx(want, abs=1e-9)
        else:
            assert not np.isfinite(best[0, s])


def test_priced_patterns_at_zero_multipliers_match_the_direct_milps():
    # zero multipliers: the DP prices grid emissions, as enumerate_patterns does
    site = SiteWrapper("a").gpus("H100", 2).obj()
    ci = [100.0, 100.0, 900.0, 900.0, 100.0, 100.0, 900.0, 900.0]
    prob = problem([site], [pjob(pieces=2), pjob("q", minutes=120, overhead=30, pieces=3)], 8,
                   ci={"a": ci})
    sets = compile_sets(prob)
    priced, pats = price_pieces(sets, None, keep=1)
    assert sorted(piece_jobs(sets).tolist()) == [0, 1]
    for j in piece_jobs(sets):
        row = int(np.flatnonzero(priced.jobs == j)[0])
        job = prob.jobs[j]
        want = np.inf
        for k in range(2, job.max_pieces + 1):
            n, frac, last = piece_shape(sets, j, k)
            cost, _ = best_piece_pattern(job.it_power_kw * sets.cost_per_kwh,
                                         int(sets.job_first[j]), sets.n_horizon,
                                         np.array([last]), n, frac, k)
            want = min(want, float(cost.min()))
        assert priced.cost[row].min() == pytest.approx(want)
    # "p" in two pieces, [0, 2) and [4, 5:10): the pattern the direct MILP holds too
    assert pats.cost_kg[pats.job == 0].min() == pytest.approx(priced.cost[0].min())
    assert sets.patterns.cost_kg[sets.patterns.job == 0].min() == pytest.approx(
        priced.cost[0].min())
    # "q" is cheapest in two pieces of 2 h and 30 min, but a 30-minute resumed piece is all
    # restore (no work): the bound counts it (a relaxation), no pattern is made of it
    assert priced.cost[1].min() == pytest.approx(0.1 + 0.1 + 0.5 * 0.1)
    assert pats.cost_kg[pats.job == 1].min() > priced.cost[1].min() + 0.1


def around_a_rigid_job():
    """One GPU; a rigid job holds hours 2-3; the 4-hour preemptible job fits only around it.

    CI 100 g/kWh, PUE 1, 1 kW: in two pieces [0, 2) and [4, 6:10) the job emits 250 minutes
    × 1 kW × 0.1 kg/kWh = 0.41667 kg; whole, it can only start at 4 and run to 8 — past its
    deadline (7) — so it would be left out at 10 × the dirtiest GPU-hour (0.1 kg) × 4 h = 4 kg.
    The rigid job emits 2 × 0.1 = 0.2 kg.
    """
    site = SiteWrapper("a").gpus("H100", 1).obj()
    rigid = JobWrapper("rigid").hours(2).window(2, 4).kw_per_gpu(1.0).obj()
    prob = problem([site], [pjob(minutes=240, overhead=10, pieces=2, dl=7), rigid], 8,
                   ci={"a": [100.0] * 8})
    return prob, 250 / 60 * 0.1 + 0.2


def test_pieces_place_a_job_one_piece_cannot_and_the_bound_proves_it():
    prob, optimum = around_a_rigid_job()
    res = solve_plan(prob, method="colgen", mip_gap=0.0)
    assert recount_violations(prob, res) == {}
    assert {(p.job_id, p.piece, p.pieces) for p in res.placements} == {
        ("rigid", 0, 1), ("p", 0, 2), ("p", 1, 2)}
    assert res.totals["objective"] == pytest.approx(optimum)
    assert score_plan(prob, res).emissions_kg == pytest.approx(optimum)
    assert res.solver.bound is not None and res.solver.bound <= optimum + TOL_KG
    assert res.status == PlanStatus.OPTIMAL
    # the direct MILP holds one pattern per job, site and piece count, chosen on emissions
    # alone and only where cheaper than one piece: none here, so it leaves the rigid job out
    assert solve_plan(prob, method="milp", mip_gap=0.0).totals["objective"] == \
        pytest.approx(4 * 0.1 + 2.0)


def test_the_one_piece_lagrangian_is_no_bound_with_pieces():
    # clean, clean, dirty, dirty, clean, clean, dirty, dirty; 3 hours of work, 10-minute
    # restore: whole, the job takes at least one dirty hour (best 0.1 + 0.1 + 0.9 = 1.1 kg at
    # 1 kW, PUE 1); in two pieces 190 minutes at 100 g/kWh, 0.31667 kg. At zero multipliers
    # the one-piece Lagrangian is 1.1 kg, above that optimum; the piece term brings it to it.
    site = SiteWrapper("a").gpus("H100", 1).obj()
    ci = [100.0, 100.0, 900.0, 900.0, 100.0, 100.0, 900.0, 900.0]
    prob = problem([site], [pjob(pieces=2)], 8, ci={"a": ci})
    optimum = 190 / 60 * 0.1
    sets = compile_sets(prob)
    cls = job_classes(sets)
    lay = make_layout(sets, cls)
    n_s, n_t = sets.pue.shape
    lam = (np.zeros((n_s, n_t, len(sets.gpu_type))), np.zeros((n_s, n_t)), np.zeros((n_s, n_t)))
    one = lagrangian(sets, lay, *lam)[0]
    assert one == pytest.approx(1.1)
    assert one > optimum
    value, saving = piece_lagrangian(sets, lay, cls, lam)
    assert value == pytest.approx(optimum)
    assert saving.tolist() == pytest.approx([optimum - 1.1])


@st.composite
def piece_instances(draw):
    hours = draw(st.integers(5, 9))
    n_sites = draw(st.integers(1, 2))
    sites = [SiteWrapper(f"s{i}").gpus("H100", draw(st.integers(1, 3)))
             .cap_kw(draw(st.sampled_from([2.0, 3.0, 1e6]))).obj() for i in range(n_sites)]
    jobs = []
    for k in range(draw(st.integers(1, 4))):
        pieces = draw(st.sampled_from([1, 2, 2, 3, 3]))
        minutes = draw(st.sampled_from([60, 90, 120, 180, 180, 240]))
        need = -(-minutes // 60)
        if pieces > 1:
            # a window with room to pause: up to the horizon's end (or an hour past it)
            es = draw(st.integers(0, max(0, hours - need - 2)))
            dl = draw(st.integers(min(es + need + 2, hours), hours + 1))
        else:
            es = draw(st.integers(0, hours - 2))
            dl = draw(st.integers(es + 1, hours + 1))
        overhead = draw(st.sampled_from([1, 1, 10, 30])) if pieces > 1 else 0
        jobs.append(Job(id=f"j{k}", tenant="t", gpu_type="H100",
                        gpus=draw(st.integers(1, 2)), duration_minutes=minutes,
                        power_per_gpu_kw=draw(st.sampled_from([0.5, 1.0])),
                        earliest_start=at(es), deadline=at(0) + pd.Timedelta(hours=dl),
                        preemptible=pieces > 1, checkpoint_overhead_minutes=overhead,
                        max_pieces=pieces))
    # contrasted hours, so that pausing through a dirty one often pays
    ci_lists = st.lists(st.sampled_from([50.0, 100.0, 900.0]), min_size=hours,
                        max_size=hours)
    ci = {s.id: draw(ci_lists) for s in sites}
    surplus = {s.id: draw(st.lists(st.sampled_from([0.0, 0.0, 0.5, 2.0]), min_size=hours,
                                   max_size=hours)) for s in sites}
    pue = {s.id: draw(st.sampled_from([1.0, 1.3])) for s in sites}
    return problem(sites, jobs, hours, ci=ci, pue=pue, surplus=surplus)


@PROPS
@given(piece_instances())
def test_colgen_with_pieces_is_valid_and_bounded_by_the_direct_milp(prob):
    exact = solve_plan(prob, method="milp", mip_gap=0.0, time_limit_s=120)
    assert exact.status == PlanStatus.OPTIMAL
    opt = exact.totals["objective"]
    res = solve_plan(prob, method="colgen", mip_gap=0.0, time_limit_s=120)
    assert res.status in (PlanStatus.OPTIMAL, PlanStatus.FEASIBLE, PlanStatus.HEURISTIC)
    # valid, recounted from the placements alone: pieces, overhead, capacity, deadlines
    assert recount_violations(prob, res) == {}
    sc = score_plan(prob, res)
    assert sc.emissions_kg == pytest.approx(res.totals["emissions_kg"], abs=TOL_KG)
    # overhead: every resumed piece pays its job's restore minutes (gang count above is 0)
    for p in res.placements:
        job = next(j for j in prob.jobs if j.id == p.job_id)
        assert p.pieces <= job.max_pieces
        assert p.overhead_minutes == (job.checkpoint_overhead_minutes if p.piece else 0)
    # the bound covers piece plans: at most the direct MILP's optimum (whose patterns are a
    # subset), and the plan within its proven gap of that optimum
    assert res.solver.bound is not None
    assert res.solver.bound <= opt + TOL_KG * max(1.0, abs(opt))
    obj = res.totals["objective"]
    gap = res.solver.mip_gap
    if gap is None:          # an objective of 0 and a gap above 1e-6 kg: no relative gap
        assert obj == 0.0
        gap_kg = obj - res.solver.bound
    else:
        gap_kg = gap * abs(obj)
    assert obj - opt <= gap_kg + TOL_KG


def test_the_piece_phase_keeps_the_moves_plan_build_and_the_recount_out_of_its_budget(
        monkeypatch):
    """50k × 32 × 72 h ran 305.6 s on a 300 s limit: the moves' plan build and the recount
    after the phase had no time of their own (they scale with the jobs)."""
    from types import SimpleNamespace

    from carbonsched.plan.colgen import pieces
    from carbonsched.plan.colgen.budget import plan_overhead_s

    seen = {}
    real_phase, real_insert = pieces.piece_phase, pieces.insert_pieces

    def phase(sets, lay, cls, lams, plan, one, seconds, *a, **kw):
        seen["phase_s"], seen["sets"] = seconds, sets
        return real_phase(sets, lay, cls, lams, plan, one, seconds, *a, **kw)

    def insert(sets, plan, jobs, seconds):
        seen["insert_s"] = seconds
        return real_insert(sets, plan, jobs, seconds)

    monkeypatch.setattr(pieces, "piece_phase", phase)
    monkeypatch.setattr(pieces, "insert_pieces", insert)
    prob, optimum = around_a_rigid_job()
    res = solve_plan(prob, method="colgen", mip_gap=0.0, time_limit_s=30)
    assert res.totals["objective"] == pytest.approx(optimum)
    sets = seen["sets"]
    # the phase ends finish_s before the limit; the moves get half of it (a repair MIP
    # follows here) less the plan's build
    assert seen["phase_s"] <= 30 - pieces.finish_s(sets)
    assert seen["insert_s"] <= 0.5 * seen["phase_s"] - plan_overhead_s(sets) + 1e-9
    # the reserve grows with the jobs: 0.5 s up to 5,000, 1 s per 10,000 above
    for n, want in ((10, 0.5), (5_000, 0.5), (5_001, 0.5001), (50_000, 5.0)):
        assert pieces.finish_s(SimpleNamespace(placeable=np.arange(n))) == pytest.approx(want)
