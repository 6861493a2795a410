"""A configurable slot grid (issue 14 item 3): 60-minute slots by default, 30 or 15 allowed.

Starts are decided on the grid, capacity and power hold in every slot, energy and emissions
count the minutes run; hourly signals and hourly inference demand hold in every slot of their
hour. Every expected number below is computed by hand from the signals the test sets.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from carbonsched.domain import Placement, ReasonCode
from carbonsched.errors import InputError, TimeAxisError
from carbonsched.plan import (
    PlanningProblem,
    agnostic_plan,
    compile_sets,
    greedy_plan,
    score_plan,
    site_hour_power,
    solve_plan,
)
from carbonsched.plan.result import PlanResult, PlanStatus, SolverRecord, recount_violations
from carbonsched.plan.sets import option_costs, slot_fraction

from .builders import T0, SiteWrapper, at, demand, minutes_job, signals

M = pd.Timedelta(minutes=1)


job = minutes_job


def grid_problem(sites, jobs, hours: int, slot_minutes: int = 15, inference=(),
                 **sig) -> PlanningProblem:
    """``hours`` of slots of ``slot_minutes`` from T0, on hourly signals."""
    n = hours * 60 // slot_minutes
    slots = pd.date_range(T0, periods=n, freq=f"{slot_minutes}min", name="slot")
    return PlanningProblem(sites=list(sites), jobs=list(jobs), inference=list(inference),
                           slots=slots, signals=signals(sites, hours, **sig),
                           slot_minutes=slot_minutes)


def test_slot_fraction_on_a_quarter_hour_grid():
    n, f = slot_fraction(np.array([90, 100, 15, 1, 60]), 15)
    assert n.tolist() == [6, 7, 1, 1, 4]
    assert f.tolist() == pytest.approx([1.0, 10 / 15, 1.0, 1 / 15, 1.0])


def test_a_90_minute_job_on_15_minute_slots_is_charged_exactly_1_5_hours():
    site = SiteWrapper("a").gpus("H100", 4).obj()
    ci = [400.0, 300.0, 200.0, 100.0, 500.0, 600.0]
    pue = [1.1, 1.2, 1.3, 1.4, 1.5, 1.6]
    # earliest 03:05 rounds up to 03:15; the deadline 04:45 leaves exactly that start
    j = job("j90", 90, at(3) + 5 * M, at(4) + 45 * M, gpus=2, kw=1.0)
    prob = grid_problem([site], [j], 6, ci={"a": ci}, pue={"a": pue})
    # by hand: 2 kW for 45 min in hour 3 (CI 100, PUE 1.4), 45 min in hour 4 (CI 500, PUE 1.5)
    energy = 2.0 * (0.75 * 1.4 + 0.75 * 1.5)                           # 4.35 kWh facility
    emissions = 2.0 * (0.75 * 1.4 * 100.0 + 0.75 * 1.5 * 500.0) / 1000  # 1.335 kg
    assert energy == pytest.approx(4.35) and emissions == pytest.approx(1.335)
    sets = compile_sets(prob)
    assert sets.slot_minutes == 15 and sets.slot_hours == 0.25
    assert sets.job_dur[0] == 6 and sets.job_last_frac[0] == 1.0
    assert sets.options.tolist() == [[0, 0, 13]]          # slot 13 = 03:15
    assert option_costs(sets, sets.options).tolist() == pytest.approx([emissions])
    for res in (solve_plan(prob), greedy_plan(prob), agnostic_plan(prob)):
        (p,) = res.placements
        assert (p.start, p.end) == (at(3) + 15 * M, at(4) + 45 * M)
        assert p.energy_kwh == pytest.approx(energy)
        assert p.emissions_kg == pytest.approx(emissions)
        assert res.totals["energy_kwh"] == pytest.approx(energy)
        assert res.totals["it_energy_kwh"] == pytest.approx(2.0 * 1.5)
        assert res.totals["emissions_kg"] == pytest.approx(emissions)
        sc = score_plan(prob, res)
        assert sc.energy_kwh == pytest.approx(energy)
        assert sc.emissions_kg == pytest.approx(emissions)
        assert recount_violations(prob, res) == {}
    assert solve_plan(prob).solver.objective == pytest.approx(emissions)
    rows = {r["hour"]: r for r in site_hour_power(prob, solve_plan(prob))}
    # a 15-minute row: the whole gang's power, a quarter hour of its energy
    assert rows[at(4) + 30 * M]["it_power_kw"] == 2.0
    assert rows[at(4) + 30 * M]["it_energy_kwh"] == pytest.approx(0.5)
    assert rows[at(4) + 45 * M]["it_power_kw"] == 0.0
    assert rows[at(3)]["it_energy_kwh"] == 0.0


def test_a_partial_last_quarter_hour_is_charged_its_minutes():
    site = SiteWrapper("a").gpus("H100", 1).obj()
    # 100 min from 00:15: 45 min of hour 0 (CI 200) and 55 min of hour 1 (CI 400)
    j = job("j", 100, at(0) + 15 * M, at(0) + 115 * M, kw=3.0)
    prob = grid_problem([site], [j], 3, ci={"a": [200.0, 400.0, 800.0]})
    (p,) = solve_plan(prob).placements
    assert (p.start, p.end) == (at(0) + 15 * M, at(1) + 55 * M)
    assert p.energy_kwh == pytest.approx(3.0 * 100 / 60)                      # 5 kWh
    assert p.emissions_kg == pytest.approx(3.0 * (0.75 * 200 + 55 / 60 * 400) / 1000)


@pytest.mark.parametrize("slot_minutes, start, kg", [
    (60, at(1), 0.75 * 200 / 1000),                            # 0.150 kg: the only hourly start
    (30, at(1) + 30 * M, (0.5 * 200 + 0.25 * 50) / 1000),      # 0.1125 kg
    (15, at(1) + 30 * M, (0.5 * 200 + 0.25 * 50) / 1000),
])
def test_a_finer_grid_finds_the_cleaner_start_that_straddles_two_hours(slot_minutes, start, kg):
    # a 45-minute job in [00:30, 02:15]; CI 300, 200, 50 by hour. Hourly starts: only 01:00
    # (02:00 would end 02:45). On 30/15-minute grids 01:30 runs 30 min at 200 and 15 at 50:
    # 112.5 g, beating 01:00 (150 g), 01:15 (150 g) and 00:30 (0.5 × 300 + 0.25 × 200 = 200 g)
    site = SiteWrapper("a").gpus("H100", 1).obj()
    j = job("j45", 45, at(0) + 30 * M, at(2) + 15 * M)
    prob = grid_problem([site], [j], 3, slot_minutes, ci={"a": [300.0, 200.0, 50.0]})
    for res in (solve_plan(prob), greedy_plan(prob)):
        (p,) = res.placements
        assert (p.start, p.end) == (start, start + 45 * M)
        assert p.emissions_kg == pytest.approx(kg)
        assert p.energy_kwh == pytest.approx(0.75)
        assert score_plan(prob, res).emissions_kg == pytest.approx(kg)
    assert solve_plan(prob).status == PlanStatus.OPTIMAL


def test_capacity_holds_per_quarter_hour_back_to_back_jobs_share_one_gpu():
    # one GPU, two 45-minute jobs in [00:00, 01:30]: back to back at 00:00 and 00:45 on the
    # 15-minute grid; on the hourly grid only 00:00 is a start, so one job is left out
    site = SiteWrapper("a").gpus("H100", 1).obj()
    jobs = [job("a", 45, at(0), at(1) + 30 * M), job("b", 45, at(0), at(1) + 30 * M)]
    ci = {"a": [100.0, 200.0]}
    prob = grid_problem([site], jobs, 2, ci=ci)
    res = solve_plan(prob)
    spans = sorted((p.start, p.end) for p in res.placements)
    assert spans == [(at(0), at(0) + 45 * M), (at(0) + 45 * M, at(1) + 30 * M)]
    # 45 min at 100, then 15 min at 100 + 30 min at 200
    assert res.totals["emissions_kg"] == pytest.approx((75 + 25 + 100) / 1000)
    assert recount_violations(prob, res) == {}
    gpu_rows = site_hour_power(prob, res)
    assert max(r["it_power_kw"] for r in gpu_rows) == 1.0      # never two at once
    hourly = grid_problem([site], jobs, 2, 60, ci=ci)
    res_h = solve_plan(hourly)
    assert len(res_h.placements) == 1
    assert [u.reason for u in res_h.unplaced] == [ReasonCode.INSUFFICIENT_CAPACITY]


def test_the_power_cap_holds_per_quarter_hour():
    # a 1.5 kW cap and two 1 kW jobs of 30 min in [00:00, 01:00]: they may not overlap
    site = SiteWrapper("a").gpus("H100", 4).cap_kw(1.5).obj()
    jobs = [job("a", 30, at(0), at(1)), job("b", 30, at(0), at(1))]
    prob = grid_problem([site], jobs, 1, ci={"a": [100.0]})
    res = solve_plan(prob)
    assert sorted(p.start for p in res.placements) == [at(0), at(0) + 30 * M]
    assert res.totals["emissions_kg"] == pytest.approx(2 * 0.5 * 100 / 1000)
    assert recount_violations(prob, res) == {}


def test_hourly_inference_holds_in_every_quarter_hour_of_its_hour():
    # 2 GPUs; inference takes 1 in every slot of hour 0, so a 2-GPU job of 30 min cannot
    # start in hour 0 (it could at 00:15 if the demand held only in the first slot)
    site = SiteWrapper("a").gpus("H100", 2).latency("eu", 5).obj()
    j = job("j", 30, at(0), at(2), gpus=2)
    prob = grid_problem([site], [j], 2, inference=[demand("eu", 0, 1)],
                        ci={"a": [100.0, 300.0]})
    for res in (solve_plan(prob), greedy_plan(prob)):
        (p,) = res.placements
        assert at(1) <= p.start <= at(1) + 30 * M          # every start in hour 1 costs 0.3 kg
        assert p.emissions_kg == pytest.approx(2 * 0.5 * 300 / 1000)
        (ip,) = res.inference
        assert ip.energy_kwh == pytest.approx(1.0)                          # 1 kW × 1 h
        assert ip.emissions_kg == pytest.approx(0.1)
        assert res.totals["emissions_kg"] == pytest.approx(0.4)
        assert recount_violations(prob, res) == {}
        assert score_plan(prob, res).emissions_kg == pytest.approx(0.4)


def test_green_surplus_is_absorbed_per_quarter_hour():
    # 2 kW of surplus in hour 0 absorbs all of a 1 kW, 30-minute job's 0.5 kWh
    site = SiteWrapper("a").gpus("H100", 1).obj()
    j = job("j", 30, at(0), at(2))
    prob = grid_problem([site], [j], 2, ci={"a": [100.0, 100.0]},
                        surplus={"a": [2.0, 0.0]})
    res = solve_plan(prob)
    (p,) = res.placements
    assert p.start < at(1) and p.emissions_kg == pytest.approx(0.0)
    assert res.totals["surplus_absorbed_kwh"] == pytest.approx(0.5)
    assert score_plan(prob, res).surplus_absorbed_kwh == pytest.approx(0.5)


@pytest.mark.parametrize("bad", [7, 0, 90, 45, -15, 15.0, True, "15"])
def test_an_invalid_slot_length_is_refused_naming_the_allowed_ones(bad):
    site = SiteWrapper("a").gpus("H100", 1).obj()
    with pytest.raises(InputError, match=r"slot length .* not allowed; choose one of "
                                         r"60, 30, 15 minutes"):
        PlanningProblem(sites=[site], jobs=[], inference=[],
                        slots=pd.date_range(T0, periods=4, freq="15min", name="slot"),
                        signals=signals([site], 1), slot_minutes=bad)


def test_slots_that_do_not_match_the_slot_length_are_refused():
    site = SiteWrapper("a").gpus("H100", 1).obj()
    hourly = pd.date_range(T0, periods=4, freq="h", name="slot")
    quarter = pd.date_range(T0, periods=8, freq="15min", name="slot")
    sig = signals([site], 4)

    def compile_with(slots, minutes):
        return compile_sets(PlanningProblem(sites=[site], jobs=[], inference=[], slots=slots,
                                            signals=sig, slot_minutes=minutes))

    with pytest.raises(TimeAxisError, match=r"consecutive 15-minute steps .* 2023-07-15T00:00:"
                                            r"00\+00:00 to 2023-07-15T01:00:00\+00:00 is "
                                            r"0 days 01:00:00"):
        compile_with(hourly, 15)
    with pytest.raises(TimeAxisError, match="planning slots must be consecutive hours"):
        compile_with(quarter, 60)
    with pytest.raises(TimeAxisError, match="consecutive 30-minute steps"):
        compile_with(quarter, 30)
    with pytest.raises(TimeAxisError, match=r"planning slot 2023-07-15T00:05:00\+00:00 is not "
                                            r"on the 15-minute grid"):
        compile_with(quarter + 5 * M, 15)
    # sub-hourly signals are not silently read at their hours only
    fine = signals([site], 1).reset_index()
    fine["slot"] = fine["slot"] + 15 * M
    with pytest.raises(InputError, match=r"timestamp 2023-07-15T00:15:00\+00:00 is not on the "
                                         r"hour; on a 15-minute slot grid signals are hourly"):
        compile_sets(PlanningProblem(sites=[site], jobs=[], inference=[], slots=quarter[:4],
                                     signals=fine.set_index(["site", "slot"]), slot_minutes=15))


def _placed(job_id: str, start: pd.Timestamp, minutes: int) -> Placement:
    return Placement(job_id=job_id, site="a", start=start, end=start + minutes * M,
                     gpu_type="H100", gpus=1, energy_kwh=0.0, emissions_kg=0.0)


def _plan(*placements: Placement) -> PlanResult:
    return PlanResult(status=PlanStatus.HEURISTIC,
                      solver=SolverRecord(name="hand", status=PlanStatus.HEURISTIC),
                      placements=list(placements))


def test_the_recount_checks_capacity_per_quarter_hour():
    site = SiteWrapper("a").gpus("H100", 1).cap_kw(1.0).obj()
    jobs = [job("a", 45, at(0), at(2)), job("b", 45, at(0), at(2))]
    prob = grid_problem([site], jobs, 2, ci={"a": [100.0, 200.0]})
    # known bad: b from 00:30 shares the 00:30 slot with a (00:00-00:45): one GPU cell over,
    # and one power cell (2 kW on a 1 kW cap)
    bad = _plan(_placed("a", at(0), 45), _placed("b", at(0) + 30 * M, 45))
    assert recount_violations(prob, bad) == {"capacity_violations": 1,
                                             "power_cap_violations": 1}
    # just at the limit: b from 00:45, back to back
    ok = _plan(_placed("a", at(0), 45), _placed("b", at(0) + 45 * M, 45))
    assert recount_violations(prob, ok) == {}
    sc = score_plan(prob, ok)
    assert sc.emissions_kg == pytest.approx((75 + 25 + 100) / 1000)
    assert sc.energy_kwh == pytest.approx(1.5)
    # off the 15-minute grid: a deadline miss (start 00:50)
    off = _plan(_placed("a", at(0), 45), _placed("b", at(0) + 50 * M, 45))
    assert recount_violations(prob, off) == {"deadline_misses": 1}
    # the same back-to-back plan on the hourly grid: b's 00:45 start is off that grid
    hourly = grid_problem([site], jobs, 2, 60, ci={"a": [100.0, 200.0]})
    assert recount_violations(hourly, ok) == {"deadline_misses": 1}


def test_preemptible_jobs_run_in_one_piece_on_a_sub_hour_grid_with_a_note():
    site = SiteWrapper("a").gpus("H100", 1).obj()
    j = job("p", 120, at(0), at(4), preemptible=True, checkpoint_overhead_minutes=10,
            max_pieces=3)
    # hours 0 and 2 clean, 1 and 3 dirty: pieces would pay; on 15-minute slots they are off
    prob = grid_problem([site], [j], 4, ci={"a": [50.0, 900.0, 50.0, 900.0]})
    res = solve_plan(prob)
    (p,) = res.placements
    assert p.pieces == 1 and p.end - p.start == 120 * M
    assert any("1 preemptible job(s) planned in one piece" in n and "15-minute grid" in n
               for n in res.notes)
    assert recount_violations(prob, res) == {}


def test_column_generation_runs_on_a_sub_hour_grid():
    # issue 36 item 1: no fallback to the direct MILP; the 45-minute job starts in the
    # cleaner hour, charged its 45 minutes
    site = SiteWrapper("a").gpus("H100", 1).obj()
    prob = grid_problem([site], [job("j", 45, at(0), at(1) + 45 * M)], 2,
                        ci={"a": [100.0, 50.0]})
    res = solve_plan(prob, method="colgen")
    assert res.solver.method == "colgen"
    assert "hourly grid only" not in res.solver.note
    (p,) = res.placements
    assert p.start == at(1) and p.emissions_kg == pytest.approx(0.75 * 50 / 1000)
    assert res.solver.bound == pytest.approx(0.75 * 50 / 1000)


def test_work_past_the_horizon_repeats_the_last_day_in_quarter_hours():
    # a 1-hour horizon (4 slots): a 90-minute job from 00:30 runs 60 min past the horizon on
    # the continued signals (the last day = the whole 1-hour horizon repeated)
    site = SiteWrapper("a").gpus("H100", 1).obj()
    j = job("j", 90, at(0) + 30 * M, at(3))
    prob = grid_problem([site], [j], 1, ci={"a": [120.0]})
    sets = compile_sets(prob)
    assert sets.n_horizon == 4 and sets.n_ext >= 8
    assert sets.ci_g_per_kwh[0, :8].tolist() == [120.0] * 8
    res = solve_plan(prob)
    (p,) = res.placements
    assert p.emissions_kg == pytest.approx(1.5 * 120 / 1000)
    assert recount_violations(prob, res) == {}


def test_the_placement_book_refuses_a_sub_hour_plan():
    from carbonsched.catalog import load_catalog
    from carbonsched.service.placement import PlacementBook

    doc = {"plan_id": "p15", "date": "2023-07-15", "issued_at": "2023-07-15T00:00:00Z",
           "horizon_hours": 24, "slot_minutes": 15, "placements": [], "inference": []}
    with pytest.raises(InputError, match="plan p15 is on a 15-minute slot grid; placement "
                                         "queries need an hourly plan"):
        PlacementBook(load_catalog("china-eastdata-westcompute"), doc, pd.DataFrame())
