"""The one-GPU, one-slot jobs re-placed by an LP around the rest of a plan (colgen.unit_repack).

Hand-checked cases with PUE 1, no surplus and CI 100 g/kWh everywhere, so a 1 kW job-hour
costs 0.1 kg; a Hypothesis property over random instances (caps, facility caps, surplus,
inference): the repacked plan breaks no cap, window, residency rule or gang, and is never
worse than the plan it started from when the LP's vertex is integral.
"""

from __future__ import annotations

import re
import time
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given

from carbonsched.plan import colgen
from carbonsched.plan.baselines import greedy_from_sets
from carbonsched.plan.colgen import (
    ColgenOptions,
    job_classes,
    make_layout,
    repair_mip,
    unit_classes,
    unit_repack,
)
from carbonsched.plan.result import PlanStatus, build_plan_result, recount_violations
from carbonsched.plan.sets import compile_sets, enumerate_options
from carbonsched.plan.solve import diagnose_inference

from .builders import SiteWrapper, demand, problem
from .test_local import _job, _rec
from .test_properties import PROPS, instances


def _plan(sets, placed: dict[str, tuple[int, int]]):
    ids = [j.id for j in sets.problem.jobs]
    chosen = np.array([(ids.index(j), s, t) for j, (s, t) in placed.items()],
                      dtype=np.int64).reshape(-1, 3)
    alloc = np.zeros(sets.inf_sites.shape, dtype=np.int64)
    return build_plan_result(sets, chosen, alloc, PlanStatus.FEASIBLE, _rec())


def _repack(sets, plan, seconds: float = 30.0, options=None, status_out=None):
    cls = job_classes(sets)
    rec = _rec()
    return unit_repack(sets, make_layout(sets, cls), cls, plan, 1, seconds, lambda m: None,
                       rec, options=options, status_out=status_out), rec


def _chain():
    # two GPUs for 3 hours; "long" (2 h) holds one GPU at hours 0-1 and is not a one-slot job;
    # the one free GPU fits c only at hour 0, a at 0 or 1, b at 1 or 2: all three run only
    # as c@0, a@1, b@2 -- three jobs moved along a chain, which one-blocker ejection cannot do
    site = SiteWrapper("a").gpus("H100", 2).obj()
    jobs = [_job("long", 0, 3, hours=2), _job("a", 0, 2), _job("b", 1, 3), _job("c", 0, 1)]
    return compile_sets(problem([site], jobs, 3))


def test_left_out_one_slot_job_placed_along_a_chain_and_the_rest_kept():
    sets = _chain()
    start = _plan(sets, {"long": (0, 0), "a": (0, 0), "b": (0, 1)})
    assert start.totals["jobs_unplaced"] == 1
    new, rec = _repack(sets, start)
    pos = {p.job_id: (p.site, p.start.hour) for p in new.placements}
    assert pos == {"long": ("a", 0), "c": ("a", 0), "a": ("a", 1), "b": ("a", 2)}
    # 5 job-hours of 1 kW at 0.1 kg each, nothing unplaced
    assert new.totals["objective"] == pytest.approx(0.5)
    assert new.totals["jobs_unplaced"] == 0
    assert recount_violations(sets.problem, new) == {}
    assert ("one-slot repack: 3 one-GPU, one-slot jobs re-placed by an LP (3 classes, "
            "5 options") in rec.note
    # before: 4 job-hours (0.4 kg) and c's unplaced penalty (10 x the dirtiest kWh, 1.0 kg)
    assert rec.note.endswith("s): 1.400 -> 0.500 kg")
    assert "rounded down" not in rec.note


def test_the_fixed_rest_of_the_plan_stays_even_when_moving_it_would_pay():
    # CI 100, 100, 500: "long" at hour 1 runs hours 1-2 for 0.6 kg and would cost 0.2 kg at
    # hour 0, but it is not the repack's to move; the one-slot jobs fill around it: c@0, a@0,
    # b@1 (b@2 would cost 0.5 kg)
    site = SiteWrapper("a").gpus("H100", 2).obj()
    jobs = [_job("long", 0, 3, hours=2), _job("a", 0, 2), _job("b", 1, 3), _job("c", 0, 1)]
    sets = compile_sets(problem([site], jobs, 3, ci={"a": [100.0, 100.0, 500.0]}))
    new, _ = _repack(sets, _plan(sets, {"long": (0, 1)}))
    pos = {p.job_id: p.start.hour for p in new.placements}
    assert pos == {"long": 1, "a": 0, "b": 1, "c": 0}
    assert new.totals["objective"] == pytest.approx(0.9)


def test_a_fractional_lp_is_rounded_down_and_says_so():
    # 1 kW of power (a whole number of 0.2 kW power units) for two 0.6 kW one-slot jobs (one
    # class) and one of 0.8 kW; an unplaced GPU-hour costs the same whatever its draw, so the
    # LP fills the kW with 1/0.6 = 1.67 of the 0.6 kW jobs, and the plan gets one of them
    site = SiteWrapper("a").gpus("H100", 4).cap_kw(1.0).obj()
    jobs = [_job("j0", 0, 1, kw=0.6), _job("j1", 0, 1, kw=0.6), _job("k", 0, 1, kw=0.8)]
    sets = compile_sets(problem([site], jobs, 1))
    start = _plan(sets, {})
    new, rec = _repack(sets, start)
    assert [p.job_id for p in new.placements] == ["j0"]
    assert recount_violations(sets.problem, new) == {}
    assert "its fractional values were rounded down" in rec.note


@pytest.mark.parametrize(("factor", "runs"), [(1.0, True), (1.001, False)])
def test_the_repack_runs_only_when_its_expected_time_fits(factor, runs):
    sets = _chain()
    cls = job_classes(sets)
    n_opts = len(enumerate_options(sets, cls.rep[unit_classes(sets, cls)]))
    assert n_opts == 2 + 2 + 1              # a: starts 0, 1; b: 1, 2; c: 0
    start = _plan(sets, {"long": (0, 0), "a": (0, 0), "b": (0, 1)})
    new, rec = _repack(sets, start, seconds=0.5 * n_opts / factor,
                       options=ColgenOptions(repack_s_per_option=0.5))
    assert (new is not None) == runs
    if not runs:
        assert ("one-slot repack skipped: 3 one-GPU, one-slot jobs, 5 options (at most "
                "2000000), about 2.50 s expected, 2.50 s available") in rec.note


@pytest.mark.parametrize(("most", "runs"), [(5, True), (4, False), (0, False)])
def test_too_many_options_skip_the_repack(most, runs):
    sets = _chain()
    new, rec = _repack(sets, _plan(sets, {"long": (0, 0)}),
                       options=ColgenOptions(repack_max_options=most))
    assert (new is not None) == runs
    assert (f"5 options (at most {most})" in rec.note) == (not runs)


def test_solve_colgen_runs_no_repack_when_it_is_off():
    sets = _crowded()
    res = colgen.solve_colgen(sets, 30.0, 1e-4, 1, _rec(), time.perf_counter(),
                              options=ColgenOptions(repack_max_options=0))
    assert "one-slot repack" not in res.solver.note


def test_the_inference_allocation_stays_where_the_plan_put_it():
    # inference of 1 GPU in area "eu" at hour 0 may run at "dirty" (CI 900) or "clean" (CI 50);
    # the plan serves it at "dirty", where it would pay to move it; the repack keeps it there
    sites = [SiteWrapper(n).gpus("H100", 2).latency("eu", 5.0).obj() for n in ("dirty", "clean")]
    sets = compile_sets(problem(sites, [_job("j", 0, 1)], 1, [demand("eu", 0, 1, kw=1.0)],
                                ci={"dirty": [900.0], "clean": [50.0]}))
    alloc = np.zeros(sets.inf_sites.shape, dtype=np.int64)
    alloc[0, 0] = 1
    start = build_plan_result(sets, np.zeros((0, 3), dtype=np.int64), alloc,
                              PlanStatus.FEASIBLE, _rec())
    assert [(i.site, i.gpus) for i in start.inference] == [("dirty", 1)]
    new, _ = _repack(sets, start)
    assert [(i.site, i.gpus) for i in new.inference] == [("dirty", 1)]
    assert {p.job_id: p.site for p in new.placements} == {"j": "clean"}
    assert recount_violations(sets.problem, new) == {}


@pytest.mark.parametrize("flow", [False, True])
def test_both_master_layouts_give_the_same_repack(flow):
    sets = _crowded()
    cls = job_classes(sets)
    rec = _rec()
    new = unit_repack(sets, make_layout(sets, cls, flow=flow), cls, greedy_from_sets(sets), 1,
                      30.0, lambda m: None, rec)
    assert "rounded down" not in rec.note
    assert recount_violations(sets.problem, new) == {}
    cover, _ = _repack(sets, greedy_from_sets(sets))
    assert new.totals["objective"] == pytest.approx(cover.totals["objective"], rel=1e-9)


def _crowded(n_jobs: int = 40):
    # 3 sites x 6 hours, 2 GPUs each, CI rising from west to east and over the day: many
    # one-slot jobs compete for the clean cells, some left out
    sites = [SiteWrapper(f"s{i}").gpus("H100", 2).obj() for i in range(3)]
    rng = np.random.default_rng(7)
    jobs = []
    for k in range(n_jobs):
        first = int(rng.integers(0, 5))
        jobs.append(_job(f"j{k}", first, int(rng.integers(first + 1, 7)),
                         kw=float(rng.choice([0.5, 1.0]))))
    jobs.append(_job("long", 0, 6, hours=3))
    ci = {f"s{i}": [100.0 * (i + 1) + 40.0 * t for t in range(6)] for i in range(3)}
    return compile_sets(problem(sites, jobs, 6, ci=ci))


def test_pricing_reaches_the_lp_over_every_option():
    sets = _crowded()
    start = greedy_from_sets(sets)
    out = {}
    for k in (0, 1):
        new, rec = _repack(sets, start, options=ColgenOptions(repack_price_k=k))
        assert "rounded down" not in rec.note
        assert recount_violations(sets.problem, new) == {}
        out[k] = new.totals["objective"]
    assert out[1] == pytest.approx(out[0], rel=1e-9)
    assert out[0] < start.totals["objective"] - 0.1


def test_a_pricing_round_cut_short_keeps_the_last_lp_solved(monkeypatch):
    sets = _crowded()
    start = greedy_from_sets(sets)
    opts = ColgenOptions(repack_price_k=1)
    runs = []
    real = repair_mip.run_highs

    def first_only(h):
        runs.append(h.getNumCol())
        if len(runs) > 1:                    # every later round hits its time limit at once
            h.setOptionValue("time_limit", float(h.getRunTime()))
        return real(h)

    monkeypatch.setattr(repair_mip, "run_highs", first_only)
    new, rec = _repack(sets, start, options=opts)
    assert len(runs) == 2                      # the pricing found columns, their LP stopped
    assert recount_violations(sets.problem, new) == {}
    assert "pricing cut short by the limit" in rec.note and "no solution" not in rec.note
    # the plan is the first LP's: the same as with no option ever priced in
    monkeypatch.setattr(repair_mip, "run_highs", real)
    first, first_rec = _repack(sets, start, options=replace(opts, repack_rc_tol=np.inf))
    assert new.totals["objective"] == pytest.approx(first.totals["objective"], rel=1e-12)
    assert "pricing cut short" not in first_rec.note
    full, _ = _repack(sets, start, options=replace(opts, repack_rc_tol=1e-6))
    assert full.totals["objective"] < new.totals["objective"] - 1e-6


def test_no_lp_solved_in_time_is_noted(monkeypatch):
    sets = _crowded()
    real = repair_mip.run_highs

    def stopped(h):
        h.setOptionValue("time_limit", float(h.getRunTime()))
        return real(h)

    monkeypatch.setattr(repair_mip, "run_highs", stopped)
    so: dict = {}
    new, rec = _repack(sets, greedy_from_sets(sets), seconds=7.0, status_out=so)
    assert new is None
    assert so["time_limited"] is True           # a longer limit may repack this start
    assert re.search(r"one-slot repack gave no plan: the LP over \d+ one-GPU, one-slot jobs has "
                     r"no solution \(HiGHS: Time limit reached; limit 7\.0 s\)", rec.note)


@pytest.mark.parametrize(("max_options", "s_per_option", "limited"), [
    (10, 0.0, False),         # over the option cap: no limit repacks it
    (10**6, 1.0, True),       # within the cap, about n_opts s expected, more than 30 s given
])
def test_a_skipped_repack_says_whether_the_time_was_why(max_options, s_per_option, limited):
    sets = _crowded()
    cls = job_classes(sets)
    n_opts = len(enumerate_options(sets, cls.rep[unit_classes(sets, cls)]))
    assert n_opts > 30       # over a cap of 10, and n_opts x 1 s over the 30 s limit
    so: dict = {}
    opts = ColgenOptions(repack_max_options=max_options, repack_s_per_option=s_per_option)
    new, rec = _repack(sets, greedy_from_sets(sets), options=opts, status_out=so)
    assert new is None and "one-slot repack skipped" in rec.note
    assert so["time_limited"] is limited


@pytest.mark.parametrize("slo_ms", [10.0, 30.0])
def test_a_start_plan_short_on_inference_skips_the_repack_and_says_so(slo_ms):
    # inference of 1 GPU in area "eu" at hour 0, the site 20 ms away: with a 30 ms SLO the
    # start plan could serve it and does not; with 10 ms nobody can. Either way the LP, which
    # keeps the start's inference allocation, would have no solution: it is not built
    site = SiteWrapper("a").gpus("H100", 2).latency("eu", 20.0).obj()
    sets = compile_sets(problem([site], [_job("j", 0, 1)], 1,
                                [demand("eu", 0, 1, slo_ms=slo_ms)]))
    new, rec = _repack(sets, _plan(sets, {"j": (0, 0)}))
    assert new is None
    assert ("one-slot repack skipped: the plan it starts from serves 0 of 1 inference "
            "GPU-hours, and the repack keeps its inference allocation") in rec.note
    assert "no solution" not in rec.note


def test_a_start_plan_serving_all_inference_is_repacked():
    # the same site with the SLO met and the start serving the demand: the repack runs
    site = SiteWrapper("a").gpus("H100", 2).latency("eu", 20.0).obj()
    sets = compile_sets(problem([site], [_job("j", 0, 1)], 1,
                                [demand("eu", 0, 1, slo_ms=30.0)]))
    alloc = np.zeros(sets.inf_sites.shape, dtype=np.int64)
    alloc[0, 0] = 1
    start = build_plan_result(sets, np.zeros((0, 3), dtype=np.int64), alloc,
                              PlanStatus.FEASIBLE, _rec())
    new, rec = _repack(sets, start)
    assert new is not None, rec.note
    assert [p.job_id for p in new.placements] == ["j"]
    assert [(i.site, i.gpus) for i in new.inference] == [("a", 1)]


def test_two_demands_of_one_area_hour_and_type_keep_one_gpu_each():
    # Hypothesis found it: two identical inference demands (eu, hour 0, H100, 1 GPU), served by
    # the start plan at s0 and s1; the LP's fixed allocation gave the first demand both GPUs
    # and the second none, so the LP had no solution
    sites = [SiteWrapper(f"s{i}").gpus("H100", 1).latency("eu", 5.0).obj() for i in range(3)]
    sets = compile_sets(problem(sites, [_job("j0", 0, 1, kw=0.5), _job("j1", 0, 1, kw=0.5)], 1,
                                [demand("eu", 0, 1, slo_ms=10.0, kw=0.5),
                                 demand("eu", 0, 1, slo_ms=10.0, kw=0.5)]))
    start = greedy_from_sets(sets)
    assert sum(i.gpus for i in start.inference) == 2
    new, rec = _repack(sets, start)
    assert new is not None, rec.note
    assert recount_violations(sets.problem, new) == {}
    assert sorted((i.site, i.gpus) for i in new.inference) == sorted(
        (i.site, i.gpus) for i in start.inference)


def test_two_slo_tiers_of_one_area_hour_and_type_keep_their_sites():
    # Hypothesis found it: demands (us, hour 0, H100, 1 GPU) at SLO 50 ms and at 10 ms, listed
    # in that order; s0 (5 ms) meets both, s1 (20 ms) only the 50 ms one. The start plan serves
    # one GPU at each; the LP's fixed allocation gave s0's GPU to the first (50 ms) demand, left
    # the 10 ms one only s1, which breaks its SLO, and the LP had no solution
    sites = [SiteWrapper("s0").gpus("H100", 1).latency("us", 5.0).obj(),
             SiteWrapper("s1").gpus("H100", 1).latency("us", 20.0).obj()]
    sets = compile_sets(problem(sites, [_job(f"j{i}", 0, 1, kw=0.5) for i in range(2)], 2,
                                [demand("us", 0, 1, slo_ms=50.0, kw=0.5),
                                 demand("us", 0, 1, slo_ms=10.0, kw=0.5)]))
    start = greedy_from_sets(sets)
    assert sorted((i.site, i.gpus) for i in start.inference) == [("s0", 1), ("s1", 1)]
    new, rec = _repack(sets, start)
    assert new is not None, rec.note
    assert recount_violations(sets.problem, new) == {}
    assert sorted((i.site, i.gpus) for i in new.inference) == [("s0", 1), ("s1", 1)]


def test_solve_colgen_uses_the_repack(monkeypatch):
    sets = _crowded()
    res = colgen.solve_colgen(sets, 30.0, 1e-4, 1, _rec(), time.perf_counter())
    assert "one-GPU, one-slot jobs re-placed by an LP" in res.solver.note
    assert recount_violations(sets.problem, res) == {}


@PROPS
@given(instances())
def test_repack_never_breaks_a_rule_nor_worsens_an_integral_plan(inst):
    prob, _ = inst
    sets = compile_sets(prob)
    if diagnose_inference(sets) is not None:   # solve_plan reports such a problem infeasible
        return
    start = greedy_from_sets(sets)
    new, rec = _repack(sets, start)
    if new is None:
        # nothing to re-place, or a start short on inference, which the repack keeps
        served = sum(i.gpus for i in start.inference)
        assert (not len(unit_classes(sets, job_classes(sets)))
                or served < int(sets.inf_gpus.sum())), rec.note
        return
    assert recount_violations(sets.problem, new) == {}
    assert new.totals["jobs_placed"] + new.totals["jobs_unplaced"] == len(prob.jobs)
    if "rounded down" not in rec.note:
        assert new.totals["objective"] <= start.totals["objective"] + 1e-6


def test_a_fractional_lp_rounded_down_is_completed_by_a_priced_greedy():
    # 1 kW at hour 0: the LP fills it with 1/0.6 = 1.67 of the 0.6 kW one-slot jobs, the
    # rounding keeps one (0.6 kW) and leaves 0.4 kW, where the two-slot 0.4 kW job "long"
    # (not the repack's: it stays left out) fits; the completion places it
    site = SiteWrapper("a").gpus("H100", 4).cap_kw(1.0).obj()
    jobs = [_job("j0", 0, 1, kw=0.6), _job("j1", 0, 1, kw=0.6),
            _job("long", 0, 2, kw=0.4, hours=2)]
    sets = compile_sets(problem([site], jobs, 2))
    cls = job_classes(sets)
    lay = make_layout(sets, cls)
    n_s, n_t = sets.pue.shape
    prices = (sets.cost_per_kwh, np.zeros((n_s, n_t, len(sets.gpu_type))))
    runs = {}
    for label, p in (("plain", None), ("completed", prices)):
        rec = _rec()
        runs[label] = (unit_repack(sets, lay, cls, _plan(sets, {}), 1, 30.0, lambda m: None,
                                   rec, prices=p), rec)
    plain, _ = runs["plain"]
    done, rec = runs["completed"]
    assert sorted(p.job_id for p in plain.placements) == ["j0"]
    assert sorted(p.job_id for p in done.placements) == ["j0", "long"]
    assert recount_violations(sets.problem, done) == {}
    # "long": 0.4 kW x 2 h x 0.1 kg/kWh placed instead of its unplaced penalty
    pen_long = float(sets.unplaced_cost[2])
    assert pen_long > 0.08
    assert done.totals["objective"] == pytest.approx(plain.totals["objective"] - pen_long
                                                     + 0.08)
    assert (f"a priced greedy around it placed 1 left-out job ({plain.totals['objective']:.3f} "
            f"-> {done.totals['objective']:.3f} kg)") in rec.note


def test_completion_is_none_when_the_plan_leaves_nothing_out():
    sets = _chain()
    full = _plan(sets, {"long": (0, 0), "c": (0, 0), "a": (0, 1), "b": (0, 2)})
    n_s, n_t = sets.pue.shape
    assert colgen.complete_plan(sets, full, sets.cost_per_kwh,
                                np.zeros((n_s, n_t, len(sets.gpu_type)))) is None


@pytest.mark.parametrize(("name", "gap", "status"), [
    ("greedy", 0.02, PlanStatus.HEURISTIC),
    ("greedy + one-slot repack", 0.02, PlanStatus.HEURISTIC),
    ("greedy + one-slot repack", None, PlanStatus.HEURISTIC),
    ("greedy + one-slot repack", 0.01, PlanStatus.OPTIMAL),    # at the limit
    ("priced greedy + one-slot repack", 0.02, PlanStatus.FEASIBLE),
    ("greedyish", 0.02, PlanStatus.FEASIBLE),
    ("site by site", None, PlanStatus.FEASIBLE),               # no bound
    ("site by site", 0.0, PlanStatus.OPTIMAL),
    # at the limit, whether or not the LP converged or the repair MIP finished: every bound
    # reported is valid, so the gap is a proof (as HiGHS's mip_rel_gap); before, such plans
    # were "feasible", which a rolling run counts as stopped at its time limit
    ("site by site", 0.01, PlanStatus.OPTIMAL),
    ("site by site", 0.0100001, PlanStatus.FEASIBLE),          # just past it
])
def test_plan_status_marks_the_plain_greedy_lineage_heuristic(name, gap, status):
    assert colgen.plan_status(name, gap, 0.01) == status

