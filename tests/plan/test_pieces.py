"""Suspend and resume (issue 14): preemptible jobs in pieces, overhead counted, max_pieces kept.

Expected energies and emissions are computed by hand in each test from the signals it sets.
"""

from __future__ import annotations

import pandas as pd
import pytest

from carbonsched.domain import Job, Placement, jsonable
from carbonsched.plan import PlanStatus, compile_sets, score_plan, solve_plan
from carbonsched.plan.result import recount_violations
from carbonsched.plan.sets import best_piece_pattern

from .builders import JobWrapper, SiteWrapper, at, problem

M = pd.Timedelta(minutes=1)
H = pd.Timedelta(hours=1)


def pjob(job_id: str = "p", minutes: int = 180, overhead: int = 10, pieces: int = 3,
         es: int = 0, dl: int = 8, gpus: int = 1, kw: float = 1.0) -> Job:
    return Job(id=job_id, tenant="t", gpu_type="H100", gpus=gpus, duration_minutes=minutes,
               power_per_gpu_kw=kw, earliest_start=at(es), deadline=at(dl),
               preemptible=pieces > 1, checkpoint_overhead_minutes=overhead, max_pieces=pieces)


def test_a_preemptible_job_pauses_in_dirty_hours_and_its_overhead_is_counted():
    # clean, clean, dirty, dirty, clean, clean, dirty, dirty: 3 hours of work, 10-minute
    # restore: two pieces [0, 2) and [4, 5:10) beat every one-piece start (one dirty hour+)
    site = SiteWrapper("a").gpus("H100", 1).obj()
    ci = [100.0, 100.0, 900.0, 900.0, 100.0, 100.0, 900.0, 900.0]
    prob = problem([site], [pjob(pieces=2)], 8, ci={"a": ci}, pue={"a": 1.2})
    res = solve_plan(prob)
    p0, p1 = sorted(res.placements, key=lambda p: p.piece)
    assert (p0.start, p0.end, p0.piece, p0.pieces) == (at(0), at(2), 0, 2)
    assert (p1.start, p1.end, p1.piece, p1.pieces) == (at(4), at(5) + 10 * M, 1, 2)
    assert (p0.overhead_minutes, p0.overhead_kwh) == (0, 0.0)
    # by hand: 1 kW × 10 min × PUE 1.2 of restore at 04:00
    assert p1.overhead_minutes == 10 and p1.overhead_kwh == pytest.approx(1.0 * 10 / 60 * 1.2)
    # energy: 190 minutes at 1 kW × 1.2; emissions 100 g/kWh throughout
    assert p0.energy_kwh + p1.energy_kwh == pytest.approx(190 / 60 * 1.2)
    assert res.totals["emissions_kg"] == pytest.approx(190 / 60 * 1.2 * 100 / 1000)
    assert res.totals["overhead_kwh"] == pytest.approx(0.2)
    assert any("preemptible job(s) run in 2 pieces" in n for n in res.notes)
    assert recount_violations(prob, res) == {}
    assert score_plan(prob, res).emissions_kg == pytest.approx(res.totals["emissions_kg"])
    # dispatch reads the piece from the plan document
    assert [jsonable(p)["piece"] for p in (p0, p1)] == [0, 1]


@pytest.mark.parametrize("max_pieces", [2, 3, 4])
def test_never_more_pieces_than_max_pieces(max_pieces):
    # alternating clean and dirty hours: every extra piece saves a dirty hour, so the plan
    # uses exactly max_pieces pieces, never more
    site = SiteWrapper("a").gpus("H100", 1).obj()
    ci = [50.0, 900.0] * 8
    job = pjob(minutes=240, overhead=5, pieces=max_pieces, dl=16)
    res = solve_plan(problem([site], [job], 16, ci={"a": ci}))
    assert len(res.placements) == max_pieces
    assert sorted(p.piece for p in res.placements) == list(range(max_pieces))
    assert {p.pieces for p in res.placements} == {max_pieces}
    work = sum((p.end - p.start) / M - p.overhead_minutes for p in res.placements)
    assert work == 240
    assert recount_violations(problem([site], [job], 16, ci={"a": ci}), res) == {}


def test_a_large_overhead_keeps_the_job_whole():
    # the same signals as the first test with a 3-hour restore: resuming costs more than the
    # dirty hours it avoids, so the job runs in one piece
    site = SiteWrapper("a").gpus("H100", 1).obj()
    ci = [100.0, 100.0, 900.0, 900.0, 100.0, 100.0, 900.0, 900.0]
    res = solve_plan(problem([site], [pjob(overhead=180, pieces=3)], 8, ci={"a": ci}))
    (p,) = res.placements
    assert (p.piece, p.pieces, p.overhead_kwh) == (0, 1, 0.0)
    assert p.end - p.start == 3 * H


def test_a_job_that_is_not_preemptible_is_never_split():
    site = SiteWrapper("a").gpus("H100", 1).obj()
    ci = [100.0, 100.0, 900.0, 900.0, 100.0, 100.0, 900.0, 900.0]
    prob = problem([site], [pjob(pieces=1)], 8, ci={"a": ci})
    assert compile_sets(prob).patterns is not None and len(compile_sets(prob).patterns) == 0
    (p,) = solve_plan(prob).placements
    assert p.pieces == 1


def test_pieces_hold_capacity_in_every_hour_they_cover():
    # one GPU; the preemptible job wants hours 0-1 and 4-5; a rigid 1-hour job must run in
    # [4, 5): the pieces move around it and nothing overlaps
    site = SiteWrapper("a").gpus("H100", 1).obj()
    ci = [100.0, 100.0, 900.0, 900.0, 100.0, 100.0, 900.0, 100.0]
    rigid = JobWrapper("rigid").hours(1).window(4, 5).obj()
    prob = problem([site], [pjob(minutes=180, overhead=10, pieces=3), rigid], 8,
                   ci={"a": ci})
    res = solve_plan(prob)
    assert recount_violations(prob, res) == {}
    assert {p.job_id for p in res.placements} == {"p", "rigid"}
    busy = [p for p in res.placements if p.job_id == "p"]
    assert all(not (p.start < at(5) and p.end > at(4)) for p in busy)


def _piece(start_h: float, minutes: int, piece: int, pieces: int, overhead: int = 0,
           site: str = "a") -> Placement:
    start = at(0) + pd.Timedelta(hours=start_h)
    return Placement(job_id="p", site=site, start=start, end=start + minutes * M,
                     gpu_type="H100", gpus=1, energy_kwh=0.0, emissions_kg=0.0, piece=piece,
                     pieces=pieces, overhead_minutes=overhead)


@pytest.mark.parametrize(("pieces", "family"), [
    # fine: 120 + (70 - 10) = 180 minutes of work in two pieces
    ([_piece(0, 120, 0, 2), _piece(4, 70, 1, 2, 10)], None),
    # three pieces, max_pieces 2
    ([_piece(0, 60, 0, 3), _piece(2, 70, 1, 3, 10), _piece(4, 70, 2, 3, 10)], "gang"),
    # overlapping: the second starts in the first's last hour (and overfills its one GPU)
    ([_piece(0, 120, 0, 2), _piece(1, 70, 1, 2, 10)], "overlap"),
    # overhead not paid
    ([_piece(0, 120, 0, 2), _piece(4, 60, 1, 2, 0)], "gang"),
    # work short by 10 minutes
    ([_piece(0, 120, 0, 2), _piece(4, 60, 1, 2, 10)], "gang"),
    # two sites
    ([_piece(0, 120, 0, 2), _piece(4, 70, 1, 2, 10, site="b")], "gang"),
    # a piece starting after the horizon
    ([_piece(0, 120, 0, 2), _piece(8, 70, 1, 2, 10)], "deadline"),
])
def test_the_recount_checks_the_terms_of_pieces(pieces, family):
    sites = [SiteWrapper("a").gpus("H100", 1).obj(), SiteWrapper("b").gpus("H100", 1).obj()]
    prob = problem(sites, [pjob(pieces=2, dl=12)], 8)
    from carbonsched.plan import PlanResult, PlanStatus, SolverRecord

    res = PlanResult(status=PlanStatus.FEASIBLE,
                     solver=SolverRecord(name="t", status=PlanStatus.FEASIBLE),
                     placements=pieces)
    bad = recount_violations(prob, res)
    if family is None:
        assert bad == {}
    elif family == "gang":
        assert bad == {"gang_violations": 1}
    elif family == "overlap":
        assert bad == {"gang_violations": 1, "capacity_violations": 1}
    else:
        assert bad.get("deadline_misses") == 1


def test_the_dynamic_programme_by_hand():
    import numpy as np

    # 4 slots of 1, 2 pieces, rate: 1 9 1 1 9 → slots 0 and 2, 3 (frac 1) cost 3
    rate = np.array([[1.0, 9.0, 1.0, 1.0, 9.0]])
    cost, taken = best_piece_pattern(rate, 0, 5, np.array([4]), 3, 1.0, 2)
    assert cost[0] == 3.0 and taken[0].tolist() == [0, 2, 3]
    # the last slot at half weight: 0, then 2, 3 with slot 3 half → 1 + 1 + 0.5
    cost, taken = best_piece_pattern(rate, 0, 5, np.array([4]), 3, 0.5, 2)
    assert cost[0] == 2.5
    # runs must start in the first 2 slots (the horizon): 0 | 2.. is not allowed
    cost, _ = best_piece_pattern(rate, 0, 2, np.array([4]), 3, 1.0, 2)
    assert not np.isfinite(cost[0])


def test_column_generation_plans_pieces_and_proves_a_bound_over_them():
    # the first test's instance: two pieces [0, 2) and [4, 5:10) beat every one-piece start
    site = SiteWrapper("a").gpus("H100", 1).obj()
    ci = [100.0, 100.0, 900.0, 900.0, 100.0, 100.0, 900.0, 900.0]
    prob = problem([site], [pjob(pieces=2)], 8, ci={"a": ci})
    res = solve_plan(prob, method="colgen")
    p0, p1 = sorted(res.placements, key=lambda p: p.piece)
    assert (p0.start, p0.end, p1.start, p1.end) == (at(0), at(2), at(4), at(5) + 10 * M)
    assert recount_violations(prob, res) == {}
    # by hand: 190 minutes at 1 kW × PUE 1 (the builders' default) at 100 g/kWh
    kg = 190 / 60 * 1.0 * 100 / 1000
    assert res.totals["objective"] == pytest.approx(kg)
    # the bound covers piece plans: at most the optimum, and here it proves it
    assert res.solver.bound is not None and res.solver.bound <= kg + 1e-9
    assert res.status == PlanStatus.OPTIMAL
    assert "bound over piece plans" in res.solver.note
    assert "in one piece" not in res.solver.note


def test_dispatch_keys_each_piece_of_the_plan_document():
    from carbonsched.catalog import load_catalog
    from carbonsched.dispatch.outbox import plan_requests

    cat = load_catalog("global")
    sid = cat.site_ids[0]
    gtype = next(iter(cat.sites[0].gpus))
    site = SiteWrapper(sid).gpus(gtype, 4).obj()
    job = Job(id="p", tenant="t", gpu_type=gtype, gpus=1, duration_minutes=180,
              power_per_gpu_kw=1.0, earliest_start=at(0), deadline=at(8), preemptible=True,
              checkpoint_overhead_minutes=10, max_pieces=2)
    res = solve_plan(problem([site], [job], 8,
                             ci={sid: [100.0, 100.0, 900.0, 900.0, 100.0, 100.0, 900.0, 900.0]}))
    doc = {"plan_id": "x", "placements": [jsonable(p) for p in res.placements]}
    reqs = plan_requests(doc, cat)
    assert [(r.key, r.start, r.end) for r in reqs] == [
        ("p#0", at(0).to_pydatetime(), at(2).to_pydatetime()),
        ("p#1", at(4).to_pydatetime(), (at(5) + 10 * M).to_pydatetime())]
