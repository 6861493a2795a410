"""One-job moves, insertions and ejections on the exact objective (carbonsched.plan.local).

Hand-checked cases with PUE 1 and 1 kW jobs, so a job-hour costs CI / 1000 kg; a Hypothesis
property over random instances: the moves never raise the objective, their predicted gain is
the recount's, and no cap, window, residency rule or gang is broken.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from carbonsched.errors import InputError
from carbonsched.plan import score_plan
from carbonsched.plan.baselines import greedy_from_sets
from carbonsched.plan.colgen import ColgenOptions, moves_hold_s, solve_colgen
from carbonsched.plan.local import descend, improve, movable, plan_arrays
from carbonsched.plan.result import PlanStatus, SolverRecord, build_plan_result, recount_violations
from carbonsched.plan.sets import compile_sets

from .builders import JobWrapper, SiteWrapper, at, demand, minutes_job, problem
from .test_properties import PROPS, clean, instances
from .test_properties_horizon import instances as horizon_instances
from .test_properties_slots import on_grid


def _rec() -> SolverRecord:
    return SolverRecord(name="highs", status=PlanStatus.FEASIBLE)


def _job(name: str, first: int, deadline: int, gpus: int = 1, kw: float = 1.0,
         hours: int = 1):
    return (JobWrapper(name).gpu_type("H100").gpus(gpus).hours(hours).window(first, deadline)
            .kw_per_gpu(kw).obj())


def _chosen(sets, placed: dict[str, tuple[int, int]]) -> np.ndarray:
    ids = [j.id for j in sets.problem.jobs]
    return np.array([(ids.index(j), s, t) for j, (s, t) in placed.items()],
                    dtype=np.int64).reshape(-1, 3)


def _no_inference(sets) -> np.ndarray:
    return np.zeros(sets.inf_sites.shape, dtype=np.int64)


def _positions(sets, chosen) -> dict[str, tuple[int, int]]:
    ids = [j.id for j in sets.problem.jobs]
    return {ids[j]: (s, t) for j, s, t in chosen.tolist()}


def _objective(sets, chosen) -> float:
    return build_plan_result(sets, chosen, _no_inference(sets), PlanStatus.FEASIBLE,
                             _rec()).totals["objective"]


def test_a_job_moves_to_the_cleaner_hour():
    # CI 500 then 100 g/kWh: 1 kWh at hour 0 is 0.5 kg, at hour 1 0.1 kg
    site = SiteWrapper("a").gpus("H100", 1).obj()
    sets = compile_sets(problem([site], [_job("j", 0, 2)], 2, ci={"a": [500.0, 100.0]}))
    mv = descend(sets, _chosen(sets, {"j": (0, 0)}), _no_inference(sets), 10.0)
    assert _positions(sets, mv.chosen) == {"j": (0, 1)}
    assert (mv.moved, mv.inserted, mv.ejected) == (1, 0, 0)
    assert mv.gain_kg == pytest.approx(0.4)
    assert _objective(sets, mv.chosen) == pytest.approx(0.1)


@pytest.mark.parametrize(("gpus", "cap_kw", "moves"), [
    (2, 2.0, True),          # GPUs and power exactly enough for both jobs at hour 1
    (1, 2.0, False),         # one GPU short
    (2, 1.999, False),       # 1 W short of the 2 kW both jobs draw
])
def test_a_move_needs_room(gpus, cap_kw, moves):
    # "k" must run at hour 1 (window [1, 2)); "j" at hour 0 would be 0.4 kg cheaper at hour 1
    site = SiteWrapper("a").gpus("H100", gpus).cap_kw(cap_kw).obj()
    sets = compile_sets(problem([site], [_job("k", 1, 2), _job("j", 0, 2)], 2,
                                ci={"a": [500.0, 100.0]}))
    mv = descend(sets, _chosen(sets, {"k": (0, 1), "j": (0, 0)}), _no_inference(sets), 10.0)
    assert _positions(sets, mv.chosen)["j"] == ((0, 1) if moves else (0, 0))
    assert mv.moved == int(moves)
    assert recount_violations(sets.problem, build_plan_result(
        sets, mv.chosen, _no_inference(sets), PlanStatus.FEASIBLE, _rec())) == {}


def test_surplus_is_priced_exactly():
    # hour 0: CI 300 with 0.5 kW of surplus -> (1 - 0.5) kWh x 0.3 = 0.15 kg; hour 1: CI 200,
    # 0.2 kg. On grid emissions alone (0.3 against 0.2) the job would stay at hour 1.
    site = SiteWrapper("a").gpus("H100", 1).obj()
    sets = compile_sets(problem([site], [_job("j", 0, 2)], 2, ci={"a": [300.0, 200.0]},
                                surplus={"a": [0.5, 0.0]}))
    mv = descend(sets, _chosen(sets, {"j": (0, 1)}), _no_inference(sets), 10.0)
    assert _positions(sets, mv.chosen) == {"j": (0, 0)}
    assert mv.gain_kg == pytest.approx(0.05)
    assert _objective(sets, mv.chosen) == pytest.approx(0.15)


def test_a_left_out_job_that_fits_is_placed():
    site = SiteWrapper("a").gpus("H100", 1).obj()
    sets = compile_sets(problem([site], [_job("j", 0, 2)], 2, ci={"a": [500.0, 100.0]}))
    before = _objective(sets, _chosen(sets, {}))
    mv = descend(sets, _chosen(sets, {}), _no_inference(sets), 10.0)
    assert _positions(sets, mv.chosen) == {"j": (0, 1)}
    assert mv.inserted == 1
    assert before == pytest.approx(float(sets.unplaced_cost[0]))
    assert mv.gain_kg == pytest.approx(before - 0.1)
    assert _objective(sets, mv.chosen) == pytest.approx(0.1)


def _blocked(flexible: bool):
    """One GPU, CI 200 / 100 / 150: ``u`` may run only at hour 1, where ``j`` sits; ``j`` may
    run in hours 0-2 (``flexible``) or only at hour 1."""
    site = SiteWrapper("a").gpus("H100", 1).obj()
    j = _job("j", 0, 3) if flexible else _job("j", 1, 2)
    return compile_sets(problem([site], [_job("u", 1, 2), j], 3,
                                ci={"a": [200.0, 100.0, 150.0]}))


def test_a_blocker_moves_out_of_the_way():
    sets = _blocked(flexible=True)
    start = _chosen(sets, {"j": (0, 1)})
    before = _objective(sets, start)            # u's penalty + 0.1
    mv = descend(sets, start, _no_inference(sets), 10.0)
    # j to its cheapest free hour (hour 2, 0.15 kg), u at hour 1 (0.1 kg)
    assert _positions(sets, mv.chosen) == {"u": (0, 1), "j": (0, 2)}
    assert mv.ejected == 1
    assert _objective(sets, mv.chosen) == pytest.approx(0.25)
    assert mv.gain_kg == pytest.approx(before - 0.25)


def test_a_blocker_with_nowhere_to_go_stays():
    sets = _blocked(flexible=False)
    start = _chosen(sets, {"j": (0, 1)})
    mv = descend(sets, start, _no_inference(sets), 10.0)
    assert _positions(sets, mv.chosen) == {"j": (0, 1)}
    assert (mv.moved, mv.inserted, mv.ejected, mv.gain_kg) == (0, 0, 0, 0.0)


def test_no_time_no_moves():
    site = SiteWrapper("a").gpus("H100", 1).obj()
    sets = compile_sets(problem([site], [_job("j", 0, 2)], 2, ci={"a": [500.0, 100.0]}))
    mv = descend(sets, _chosen(sets, {"j": (0, 0)}), _no_inference(sets), 0.0)
    assert mv.stopped_by_time and mv.moved == 0
    assert _positions(sets, mv.chosen) == {"j": (0, 0)}


def test_improve_returns_none_when_nothing_moves():
    site = SiteWrapper("a").gpus("H100", 1).obj()
    sets = compile_sets(problem([site], [_job("j", 0, 2)], 2, ci={"a": [500.0, 100.0]}))
    plan = build_plan_result(sets, _chosen(sets, {"j": (0, 1)}), _no_inference(sets),
                             PlanStatus.FEASIBLE, _rec())
    assert improve(sets, plan, 10.0, _rec()) is None


def test_plan_arrays_round_trip_with_inference():
    site = SiteWrapper("a").gpus("H100", 4).latency("eu", 5).obj()
    prob = problem([site], [_job("j", 0, 2)], 2, [demand("eu", 1, 2), demand("eu", 1, 1)])
    sets = compile_sets(prob)
    plan = greedy_from_sets(sets)
    chosen, alloc = plan_arrays(sets, plan)
    assert _positions(sets, chosen) == {"j": (0, 1)} or _positions(sets, chosen) == {"j": (0, 0)}
    # two demands of the same area, hour and type: 3 GPUs split 2 + 1 as demanded
    assert alloc[:, 0].tolist() == [2, 1]
    again = build_plan_result(sets, chosen, alloc, PlanStatus.FEASIBLE, _rec())
    assert again.totals["objective"] == pytest.approx(plan.totals["objective"])


def test_plan_arrays_rejects_more_inference_than_demanded():
    site = SiteWrapper("a").gpus("H100", 4).latency("eu", 5).obj()
    sets = compile_sets(problem([site], [], 2, [demand("eu", 1, 1)]))
    plan = build_plan_result(sets, np.zeros((0, 3), dtype=np.int64), np.array([[2]]),
                             PlanStatus.FEASIBLE, _rec())
    with pytest.raises(ValueError, match="1 GPUs more than demanded"):
        plan_arrays(sets, plan)


def test_plan_arrays_gives_slo_tiers_sites_within_their_slo():
    # three tiers of (eu, hour 0, H100), loosest listed first: a (2 ms) meets all three, b
    # (8 ms) the 10 and 50 ms tiers, c (30 ms) only the 50 ms one; one GPU at each site.
    # Given in input order, the 50 ms tier would take a's GPU and leave the 2 ms tier none
    sites = [SiteWrapper(n).gpus("H100", 1).latency("eu", ms).obj()
             for n, ms in (("a", 2.0), ("b", 8.0), ("c", 30.0))]
    sets = compile_sets(problem(sites, [], 1, [demand("eu", 0, 1, slo_ms=50.0),
                                               demand("eu", 0, 1, slo_ms=10.0),
                                               demand("eu", 0, 1, slo_ms=5.0)]))
    served = np.eye(3, dtype=np.int64)[::-1]        # demand 0 at c, 1 at b, 2 at a
    plan = build_plan_result(sets, np.zeros((0, 3), dtype=np.int64), served.copy(),
                             PlanStatus.FEASIBLE, _rec())
    plan.inference.sort(key=lambda i: i.site)       # a plan's order says nothing of tiers
    assert [i.site for i in plan.inference] == ["a", "b", "c"]
    alloc = plan_arrays(sets, plan)[1]
    assert alloc.tolist() == served.tolist()
    assert not (alloc & ~sets.inf_sites).any()


def test_plan_arrays_keeps_a_gpu_served_outside_every_slo_counted():
    # a GPU at c (30 ms) for a 10 ms demand has no row within its SLO: it is still given to
    # the demand, so the counts add up and the recount sees the breach
    sites = [SiteWrapper(n).gpus("H100", 1).latency("eu", ms).obj()
             for n, ms in (("a", 2.0), ("c", 30.0))]
    sets = compile_sets(problem(sites, [], 1, [demand("eu", 0, 2, slo_ms=10.0)]))
    plan = build_plan_result(sets, np.zeros((0, 3), dtype=np.int64), np.array([[1, 1]]),
                             PlanStatus.FEASIBLE, _rec())
    assert plan_arrays(sets, plan)[1].tolist() == [[1, 1]]
    assert recount_violations(sets.problem, plan) != {}


@pytest.mark.parametrize("second_kw", [1.0, 0.5])
def test_inference_tiers_of_one_key_must_share_their_power(second_kw):
    # the plan merges one (area, hour, GPU type) per site and the recount prices it at one
    # power per GPU: tiers at 0.5 and 1.0 kW are refused by name, at 0.5 and 0.5 compiled
    site = SiteWrapper("a").gpus("H100", 2).latency("eu", 5).obj()
    prob = problem([site], [], 1, [demand("eu", 0, 1, slo_ms=50.0, kw=0.5),
                                   demand("eu", 0, 1, slo_ms=10.0, kw=second_kw)])
    if second_kw == 0.5:
        assert compile_sets(prob).inf_kw_per_gpu.tolist() == [0.5, 0.5]
        return
    with pytest.raises(InputError, match=r"inference demands of area 'eu' at 2023-07-15T00:00:00"
                                         r"\+00:00 \(H100\) give 0\.5 and 1\.0 kW per GPU; .* give "
                                         r"them the same power_per_gpu_kw"):
        compile_sets(prob)


def test_plan_arrays_rejects_an_unknown_site():
    site = SiteWrapper("a").gpus("H100", 1).latency("eu", 5).obj()
    sets = compile_sets(problem([site], [], 1, [demand("eu", 0, 1)]))
    plan = build_plan_result(sets, np.zeros((0, 3), dtype=np.int64), np.array([[1]]),
                             PlanStatus.FEASIBLE, _rec())
    plan.inference[0] = dataclasses.replace(plan.inference[0], site="ghost")
    with pytest.raises(ValueError, match="'ghost'"):
        plan_arrays(sets, plan)


def test_plan_arrays_rejects_an_unknown_job():
    site = SiteWrapper("a").gpus("H100", 1).obj()
    sets = compile_sets(problem([site], [_job("j", 0, 2)], 2))
    plan = build_plan_result(sets, _chosen(sets, {"j": (0, 0)}), _no_inference(sets),
                             PlanStatus.FEASIBLE, _rec())
    plan.placements[0] = dataclasses.replace(plan.placements[0], job_id="ghost")
    with pytest.raises(ValueError, match="'ghost'"):
        plan_arrays(sets, plan)


def test_pieces_are_not_movable():
    site = SiteWrapper("a").gpus("H100", 1).obj()
    sets = compile_sets(problem([site], [_job("j", 0, 2)], 2))
    plan = build_plan_result(sets, _chosen(sets, {"j": (0, 0)}), _no_inference(sets),
                             PlanStatus.FEASIBLE, _rec())
    assert movable(sets, plan)
    plan.placements[0] = dataclasses.replace(plan.placements[0], pieces=2)
    assert not movable(sets, plan)
    assert improve(sets, plan, 10.0, _rec()) is None


@pytest.mark.parametrize(("ci_hour_1", "moves"), [
    (100.0, False),              # a tie: no move
    (100.0 - 2e-6, True),        # 2e-9 kg cheaper: more than MOVE_TOL_KG (1e-9)
    (100.0 - 5e-7, False),       # 5e-10 kg cheaper: within it
])
def test_a_move_must_gain_more_than_the_tolerance(ci_hour_1, moves):
    site = SiteWrapper("a").gpus("H100", 1).obj()
    sets = compile_sets(problem([site], [_job("j", 0, 2)], 2, ci={"a": [100.0, ci_hour_1]}))
    mv = descend(sets, _chosen(sets, {"j": (0, 0)}), _no_inference(sets), 10.0)
    assert mv.moved == int(moves)
    assert _positions(sets, mv.chosen) == {"j": (0, 1) if moves else (0, 0)}


@pytest.mark.parametrize(("over_kg", "inserted"), [(0.0, False), (2e-9, True)])
def test_an_insertion_must_cost_less_than_leaving_the_job_out(over_kg, inserted):
    # the job's only room costs 0.1 kg; its unplaced cost set to exactly that (a terminal
    # value, as for a job deferrable past the horizon) keeps it out, 2e-9 kg more places it
    site = SiteWrapper("a").gpus("H100", 1).obj()
    sets = compile_sets(problem([site], [_job("j", 1, 2)], 2, ci={"a": [500.0, 100.0]}))
    sets.unplaced_cost[0] = 0.1 + over_kg
    mv = descend(sets, _chosen(sets, {}), _no_inference(sets), 10.0)
    assert mv.inserted == int(inserted)
    assert _positions(sets, mv.chosen) == ({"j": (0, 1)} if inserted else {})


def test_a_blocker_may_move_to_a_start_overlapping_its_own():
    # 1 GPU, CI 100/100/100/200: u (1 h) only at hour 1, where j (2 h, starts 1 or 2) sits;
    # j's only other start overlaps its current hours, so it can move only once lifted out
    site = SiteWrapper("a").gpus("H100", 1).obj()
    sets = compile_sets(problem([site], [_job("u", 1, 2), _job("j", 1, 4, hours=2)], 4,
                                ci={"a": [100.0, 100.0, 100.0, 200.0]}))
    mv = descend(sets, _chosen(sets, {"j": (0, 1)}), _no_inference(sets), 10.0)
    assert _positions(sets, mv.chosen) == {"u": (0, 1), "j": (0, 2)}
    assert mv.ejected == 1
    assert _objective(sets, mv.chosen) == pytest.approx(0.1 + 0.3)


@pytest.mark.parametrize(("tries", "ejected"), [(1, 0), (2, 1)])
def test_ejections_try_the_cheapest_starts_first(monkeypatch, tries, ejected):
    # 1 GPU, CI 100/100/100/150/150; u (2 h, starts 1-3) is out; j (1 h) at hour 1 may also
    # start at 2, j3 (1 h) at hour 3 may also start at 4. u's cheapest start (1, blocker j)
    # fails: j has nowhere to go once u holds hours 1-2; the next (2, blocker j3) works: j3
    # to hour 4. So one try finds nothing, two find it.
    import carbonsched.plan.local as local

    monkeypatch.setattr(local, "EJECT_TRIES", tries)
    site = SiteWrapper("a").gpus("H100", 1).obj()
    sets = compile_sets(problem([site], [_job("u", 1, 5, hours=2), _job("j", 1, 3),
                                         _job("j3", 3, 5)], 5,
                                ci={"a": [100.0, 100.0, 100.0, 150.0, 150.0]}))
    mv = descend(sets, _chosen(sets, {"j": (0, 1), "j3": (0, 3)}), _no_inference(sets), 10.0)
    assert mv.ejected == ejected
    if ejected:
        assert _positions(sets, mv.chosen) == {"j": (0, 1), "u": (0, 2), "j3": (0, 4)}
        assert _objective(sets, mv.chosen) == pytest.approx(0.1 + 0.25 + 0.15)


def test_a_part_hour_last_slot_is_charged_its_share():
    # a 90-minute job on hourly slots, CI 100/300/100: from hour 1 it pays 0.3 + 0.5 x 0.1 =
    # 0.35 kg, from hour 0 0.1 + 0.5 x 0.3 = 0.25 kg
    site = SiteWrapper("a").gpus("H100", 1).obj()
    job = minutes_job("j", 90, at(0), at(3))
    sets = compile_sets(problem([site], [job], 3, ci={"a": [100.0, 300.0, 100.0]}))
    mv = descend(sets, _chosen(sets, {"j": (0, 1)}), _no_inference(sets), 10.0)
    assert _positions(sets, mv.chosen) == {"j": (0, 0)}
    assert mv.gain_kg == pytest.approx(0.1)
    assert _objective(sets, mv.chosen) == pytest.approx(0.25)


def test_out_of_time_places_nothing():
    # no time: neither the pass, nor the insertion of the left-out job, nor an ejection
    sets = _blocked(flexible=True)
    mv = descend(sets, _chosen(sets, {"j": (0, 1)}), _no_inference(sets), 0.0)
    assert mv.stopped_by_time
    assert (mv.moved, mv.inserted, mv.ejected) == (0, 0, 0)
    assert _positions(sets, mv.chosen) == {"j": (0, 1)}
    site = SiteWrapper("a").gpus("H100", 1).obj()       # a left-out job with room
    sets = compile_sets(problem([site], [_job("j", 0, 2)], 2))
    mv = descend(sets, _chosen(sets, {}), _no_inference(sets), 0.0)
    assert mv.stopped_by_time and mv.inserted == 0 and len(mv.chosen) == 0


@pytest.mark.parametrize(("limit_s", "held_s"), [
    (40.0, 4.0),                 # 10% of 40 s is exactly half the 8 s per-job time: kept
    (39.99, 0.0),                # just under half: nothing kept back
    (100.0, 8.0),                # the per-job time caps it
])
def test_moves_hold(limit_s, held_s):
    assert moves_hold_s(limit_s, 10_000) == pytest.approx(held_s)


@PROPS
@given(instances())
def test_moves_never_worsen_and_keep_every_constraint(case):
    prob, _ = case
    sets = compile_sets(prob)
    plan = greedy_from_sets(sets)
    out = improve(sets, plan, 10.0, _rec())
    if out is None:
        return
    better, mv = out
    assert mv.gain_kg > 0
    assert better.totals["objective"] == pytest.approx(plan.totals["objective"] - mv.gain_kg,
                                                       abs=1e-6)
    # the start may leave inference short (the greedy's first fit), never the moves
    assert recount_violations(prob, better) == recount_violations(prob, plan)
    if clean(score_plan(prob, plan)):
        assert clean(score_plan(prob, better))
    # a placed job leaves the plan only by deferral: it is deferrable and counted as deferred
    dropped = {p.job_id for p in plan.placements} - {p.job_id for p in better.placements}
    deferrable = {j.id for j, d in zip(prob.jobs, sets.deferrable, strict=True) if d}
    assert dropped <= deferrable
    assert len(dropped) <= mv.deferred


@PROPS
@given(horizon_instances(preemptible=False), st.sampled_from([15, 30, 60]))
def test_moves_are_exact_on_sub_hour_grids_with_tails_deferral_and_running_work(prob, minutes):
    q = on_grid(prob, minutes)
    sets = compile_sets(q)
    plan = greedy_from_sets(sets)
    out = improve(sets, plan, 10.0, _rec())
    if out is None:
        return
    better, mv = out
    assert better.totals["objective"] == pytest.approx(plan.totals["objective"] - mv.gain_kg,
                                                       abs=1e-6)
    assert mv.gain_kg > 0
    assert recount_violations(q, better) == recount_violations(q, plan)


@pytest.mark.parametrize("first_max_jobs", [0, ColgenOptions().moves_first_max_jobs])
def test_column_generation_names_the_moves_in_the_plan_note(monkeypatch, first_max_jobs):
    # every pass and the repair off, and the priced greedy replaced by the carbon greedy
    # (earliest start first: j takes hour 1, u is left out, 2.1 kg): the moves give 0.25
    from carbonsched.plan.colgen import incumbents

    opts = ColgenOptions(type_pass_share=0.0, site_pass_share=0.0, split_share=0.0,
                         repair_all_classes=0, repair_max_classes=0,
                         repack_max_options=0,    # it would place u as well (0.25 kg)
                         moves_first_max_jobs=first_max_jobs)   # 0: the final moves only
    monkeypatch.setattr(incumbents, "priced_greedy",
                        lambda sets, *a, **k: greedy_from_sets(sets))
    sets = _blocked(flexible=True)
    rec = _rec()
    said: list[str] = []
    res = solve_colgen(sets, 20.0, 1e-4, 1, rec, time.perf_counter(), progress=said.append,
                       options=opts)
    assert recount_violations(sets.problem, res) == {}
    assert res.totals["objective"] == pytest.approx(0.25)
    assert "plan from greedy + moves" in rec.note   # the first of the 2.1 kg plans
    assert any("1 by moving one job out of their way" in m for m in said)
    rec = _rec()
    res = solve_colgen(sets, 20.0, 1e-4, 1, rec, time.perf_counter(),
                       options=dataclasses.replace(opts, moves_share=0.0))
    assert res.totals["objective"] == pytest.approx(2.1)
    assert "moves" not in rec.note


@pytest.mark.parametrize(("under_kg", "deferred"), [(0.0, False), (2e-9, True)])
def test_a_placed_deferrable_job_is_deferred_when_its_terminal_value_is_cheaper(under_kg,
                                                                               deferred):
    # The wait job of the horizon tests (24 h, due at 48:00, every start inside the horizon
    # at 500 g/kWh): placed at 20:00 it costs 2 kWh x 0.5 = 1.0 kg. With its terminal value
    # set to 1.0 kg less MOVE_TOL_KG it stays (a tie within the tolerance); 2e-9 kg lower
    # still, the move defers it and the plan's objective falls to the terminal value.
    from carbonsched.plan.local import MOVE_TOL_KG

    site = SiteWrapper("a").gpus("H100", 1).obj()
    job = JobWrapper("wait").gpu_type("H100").hours(2).window(20, 48).kw_per_gpu(1.0).obj()
    sets = compile_sets(problem([site], [job], 24, ci={"a": [500.0] * 24}))
    assert sets.deferrable[0]
    sets.unplaced_cost[0] = 1.0 - MOVE_TOL_KG - under_kg
    chosen = _chosen(sets, {"wait": (0, 20)})
    assert _objective(sets, chosen) == pytest.approx(1.0)
    mv = descend(sets, chosen, _no_inference(sets), 10.0)
    assert mv.deferred == int(deferred)
    assert _positions(sets, mv.chosen) == ({} if deferred else {"wait": (0, 20)})
    if deferred:
        assert mv.gain_kg == pytest.approx(MOVE_TOL_KG + under_kg, abs=1e-12)
        res = build_plan_result(sets, mv.chosen, _no_inference(sets), PlanStatus.FEASIBLE,
                                _rec())
        assert [u.job_id for u in res.deferred] == ["wait"]
        assert res.totals["objective"] == pytest.approx(sets.unplaced_cost[0])
