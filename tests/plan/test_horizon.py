"""Jobs in minutes and across days (issue 14): partial slots, tails past the horizon, deferral
past it with its terminal value, and running work that holds capacity.

Every expected number below is computed by hand in the test from the signals it sets.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from carbonsched.domain import Job, ReasonCode, RunningWork
from carbonsched.errors import InputError, TimeAxisError, UnknownSiteError
from carbonsched.plan import (
    PlanningProblem,
    agnostic_plan,
    compile_sets,
    greedy_plan,
    score_plan,
    site_hour_power,
    solve_plan,
)
from carbonsched.plan.result import recount_violations
from carbonsched.plan.sets import CONTINUATION_RULE, continue_signal, option_costs
from carbonsched.workload.files import read_workload

from . import builders
from .builders import T0, JobWrapper, SiteWrapper, at, problem, signals

M = pd.Timedelta(minutes=1)


def minutes_job(job_id: str, minutes: int, earliest: pd.Timestamp, deadline: pd.Timestamp,
                gpus: int = 2, **extra) -> Job:
    return builders.minutes_job(job_id, minutes, earliest, deadline, gpus=gpus, **extra)


# --- 1. minutes, not hours ---------------------------------------------------------------------

def test_a_90_minute_job_is_charged_exactly_90_minutes():
    site = SiteWrapper("a").gpus("H100", 4).obj()
    ci = [400.0, 300.0, 200.0, 100.0, 500.0, 600.0]
    pue = [1.1, 1.2, 1.3, 1.4, 1.5, 1.6]
    # earliest 02:20 rounds up to 03:00; the deadline 04:30 leaves exactly that start
    job = minutes_job("j90", 90, at(2) + 20 * M, at(4) + 30 * M, gpus=2, kw=1.0)
    prob = problem([site], [job], 6, ci={"a": ci}, pue={"a": pue})
    # by hand: 2 kW for 60 min in slot 3 and 30 min in slot 4
    energy = 2.0 * (1.0 * 1.4 + 0.5 * 1.5)                          # 4.3 kWh facility
    emissions = 2.0 * (1.0 * 1.4 * 100.0 + 0.5 * 1.5 * 500.0) / 1000  # 1.03 kg
    sets = compile_sets(prob)
    assert sets.job_dur[0] == 2 and sets.job_last_frac[0] == 0.5
    assert option_costs(sets, sets.options).tolist() == pytest.approx([emissions])
    for res in (solve_plan(prob), greedy_plan(prob), agnostic_plan(prob)):
        (p,) = res.placements
        assert (p.start, p.end) == (at(3), at(4) + 30 * M)
        assert p.energy_kwh == pytest.approx(energy)
        assert p.emissions_kg == pytest.approx(emissions)
        assert res.totals["energy_kwh"] == pytest.approx(energy)
        assert res.totals["emissions_kg"] == pytest.approx(emissions)
        sc = score_plan(prob, res)
        assert sc.energy_kwh == pytest.approx(energy)
        assert sc.emissions_kg == pytest.approx(emissions)
        assert recount_violations(prob, res) == {}
    assert solve_plan(prob).solver.objective == pytest.approx(emissions)
    rows = {r["hour"]: r for r in site_hour_power(prob, solve_plan(prob))}
    # the caps see the whole gang in both hours, the energy only the minutes run
    assert rows[at(4)]["it_power_kw"] == 2.0 and rows[at(4)]["it_energy_kwh"] == 1.0
    assert rows[at(3)]["facility_energy_kwh"] == pytest.approx(2.0 * 1.4)


def test_the_planner_prefers_the_cheaper_partial_slot():
    # 30 minutes of the last slot cost half: 90 min from 0 (100 + 0.5 × 1000) beats from 2
    # (1000 + 0.5 × 100) although both touch one dirty hour
    site = SiteWrapper("a").gpus("H100", 1).obj()
    job = minutes_job("j", 90, at(0), at(6), gpus=1)
    prob = problem([site], [job], 6, ci={"a": [100, 1000, 1000, 100, 1000, 1000]})
    (p,) = solve_plan(prob).placements
    assert p.start == at(0) and p.emissions_kg == pytest.approx((100 + 500) / 1000)


def test_workload_files_take_minutes_fractions_and_any_instant(tmp_path):
    doc = {"jobs": [
        {"id": "m", "gpu_type": "H100", "gpus": 1, "duration_minutes": 95,
         "power_per_gpu_kw": 1.0, "earliest_start": "2023-07-15T08:20:00+02:00",
         "deadline": "2023-07-15T12:00:00Z"},
        {"id": "h", "gpu_type": "H100", "gpus": 1, "duration_hours": 1.5,
         "power_per_gpu_kw": 1.0, "earliest_start": "2023-07-15T06:07:30Z",
         "deadline": "2023-07-15T12:00:00Z", "preemptible": True,
         "checkpoint_overhead_minutes": 10, "max_pieces": 3}]}
    path = tmp_path / "w.json"
    path.write_text(json.dumps(doc))
    m, h = read_workload(path).jobs
    assert m.duration_minutes == 95 and m.earliest_start == pd.Timestamp("2023-07-15T06:20Z")
    assert h.duration_minutes == 90 and h.duration_hours == 1.5
    assert h.earliest_start == pd.Timestamp("2023-07-15T06:07:30Z")
    assert (h.preemptible, h.checkpoint_overhead_minutes, h.max_pieces) == (True, 10, 3)
    csv_path = tmp_path / "w.csv"
    csv_path.write_text(
        "kind,id,gpu_type,gpus,duration_hours,duration_minutes,power_per_gpu_kw,"
        "earliest_start,deadline,preemptible,max_pieces\n"
        "batch,c,H100,1,2.25,,1.0,2023-07-15T00:45:00Z,2023-07-15T06:00:00Z,true,2\n")
    (c,) = read_workload(csv_path).jobs
    assert c.duration_minutes == 135 and c.preemptible and c.max_pieces == 2


@pytest.mark.parametrize(("edit", "message"), [
    ({"duration_hours": 0.01}, "'duration_hours': 0.01 h is not a whole number of minutes"),
    ({"duration_hours": None}, "'duration_minutes': is missing"),
    ({"duration_minutes": 90}, "'duration_hours': 2 h disagrees with duration_minutes 90"),
    ({"duration_minutes": 1.5, "duration_hours": None}, "'duration_minutes': expected a whole"),
    ({"max_pieces": 2}, "'max_pieces': max_pieces 2 > 1 on a job that is not preemptible"),
    ({"preemptible": "maybe"}, "'preemptible': expected true or false"),
    ({"checkpoint_overhead_minutes": -1}, "'checkpoint_overhead_minutes': must be 0..1440"),
    ({"earliest_start": "2023-07-15T08:20:00"}, "is naive"),
])
def test_workload_minute_fields_are_checked(tmp_path, edit, message):
    rec = {"id": "x", "gpu_type": "H100", "gpus": 1, "duration_hours": 2,
           "power_per_gpu_kw": 1.0, "earliest_start": "2023-07-15T08:00:00Z",
           "deadline": "2023-07-15T12:00:00Z"}
    rec.update(edit)
    rec = {k: v for k, v in rec.items() if v is not None}
    path = tmp_path / "w.json"
    path.write_text(json.dumps({"jobs": [rec]}))
    with pytest.raises(Exception, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_workload(path)


# --- 2. never cut a deadline; run past the horizon ---------------------------------------------

def test_continuation_repeats_the_last_forecast_day():
    arr = np.arange(30, dtype=float)[None, :]
    out = continue_signal(arr, 30 + 26)
    assert out[0, 30:54].tolist() == list(range(6, 30))      # the last 24 slots again
    assert out[0, 54:].tolist() == [6, 7]
    short = continue_signal(np.array([[1.0, 2.0, 3.0]]), 8)
    assert short[0].tolist() == [1, 2, 3, 1, 2, 3, 1, 2]


def test_a_deadline_beyond_the_horizon_is_never_cut():
    # horizon 6 h, 3-hour job due at hour 30: the cleanest start is the last hour of the
    # horizon (slot 5: 10 g/kWh); it runs on into hours 6 and 7, which repeat slots 0 and 1
    # (a 6-hour horizon repeats all of itself)
    site = SiteWrapper("a").gpus("H100", 1).obj()
    job = JobWrapper("late").hours(3).window(0, 30).obj()
    ci = [500.0, 500.0, 500.0, 500.0, 500.0, 10.0]
    prob = problem([site], [job], 6, ci={"a": ci})
    res = solve_plan(prob)
    (p,) = res.placements
    assert (p.start, p.end) == (at(5), at(8))
    assert p.emissions_kg == pytest.approx((10 + 500 + 500) / 1000)
    assert res.totals["jobs_past_horizon"] == 1
    assert any(CONTINUATION_RULE in n for n in res.notes)
    assert recount_violations(prob, res) == {}
    tail = [r for r in site_hour_power(prob, res) if not r["in_horizon"]]
    assert [r["hour"] for r in tail] == [at(6), at(7)]
    assert all(r["it_power_kw"] == 1.0 for r in tail)


def test_a_job_arriving_at_18_waits_for_the_next_days_clean_window():
    # 48-hour horizon, the job arrives at 18:00 with a 24-hour waiting limit; the clean hours
    # are 11:00-14:00 each day: it starts at 11:00 the next day, not at once, not unplaced
    site = SiteWrapper("a").gpus("H100", 8).obj()
    day = [400.0] * 24
    day[11:14] = [50.0, 40.0, 50.0]
    job = JobWrapper("evening").hours(2).window(18, 18 + 24 + 2).obj()
    prob = problem([site], [job], 48, ci={"a": day * 2})
    (p,) = solve_plan(prob).placements
    assert p.start == at(24 + 11) and p.end == at(24 + 13)


def test_a_cheaper_start_after_the_horizon_defers_the_job():
    # 24-hour horizon: the job arrives at 20:00, due at 48:00; every start with room inside
    # the horizon covers dirty hours, the continued day has 10 g/kWh at 02:00-04:00
    site = SiteWrapper("a").gpus("H100", 1).obj()
    day = [500.0] * 24
    day[2:4] = [10.0, 10.0]
    job = JobWrapper("wait").hours(2).window(20, 48).obj()
    prob = problem([site], [job], 24, ci={"a": day})
    res = solve_plan(prob)
    assert res.placements == []
    (u,) = res.unplaced
    assert u.reason == ReasonCode.DEFERRED_PAST_HORIZON
    assert [d.job_id for d in res.deferred] == ["wait"]
    sets = compile_sets(prob)
    # terminal value: the start at 26:00 (continued 02:00 and 03:00) × 1.05
    assert sets.unplaced_cost[0] == pytest.approx(1.0 * (10 + 10) / 1000 * 1.05)
    assert res.totals["objective"] == pytest.approx(sets.unplaced_cost[0])
    assert any("deferred past the horizon" in n for n in res.notes)


def test_a_deadline_before_the_horizon_is_deadline_passed():
    site = SiteWrapper("a").gpus("H100", 1).obj()
    gone = JobWrapper("gone").hours(1).window(0, 3).obj()
    gone = type(gone)(**{**gone.__dict__, "earliest_start": at(-5), "deadline": at(-1)})
    short = JobWrapper("short").hours(3).window(0, 3).obj()
    short = type(short)(**{**short.__dict__, "earliest_start": at(-2), "deadline": at(2)})
    res = solve_plan(problem([site], [gone, short], 6))
    by = {u.job_id: u for u in res.unplaced}
    assert by["gone"].reason == ReasonCode.DEADLINE_PASSED
    assert "before the horizon starts" in by["gone"].detail
    assert by["short"].reason == ReasonCode.DEADLINE_PASSED
    assert "would end after its deadline" in by["short"].detail


def test_a_five_day_job_runs_in_one_piece_with_capacity_on_every_hour():
    # 72-hour horizon, 8 GPUs; a 120-hour 8-GPU training job and a 10-hour 4-GPU job that
    # must run inside [60, 80): the training job cannot overlap it in any hour, so it starts
    # after it and runs 120 hours on, 118 of them past the horizon
    site = SiteWrapper("a").gpus("H100", 8).obj()
    train = JobWrapper("train").gpus(8).hours(120).window(0, 300).obj()
    batch = JobWrapper("batch").gpus(4).hours(10).window(60, 80).obj()
    ci = [100.0 + t for t in range(72)]        # earlier is cleaner: the job wants hour 0
    prob = problem([site], [train, batch], 72, ci={"a": ci})
    res = solve_plan(prob)
    by = {p.job_id: p for p in res.placements}
    assert set(by) == {"train", "batch"}
    tr, b = by["train"], by["batch"]
    assert tr.end - tr.start == pd.Timedelta(hours=120)
    assert tr.start >= b.end and tr.start < at(72) and tr.end > at(72 + 100)
    assert recount_violations(prob, res) == {}
    # the recount sees every hour: the same placement moved onto the batch job is caught
    moved = type(tr)(**{**tr.__dict__, "start": at(0), "end": at(120)})
    res.placements = [moved, b]
    assert recount_violations(prob, res) == {"capacity_violations": 10}


def test_running_work_holds_capacity_and_power():
    site = SiteWrapper("a").gpus("H100", 4).cap_kw(6.0).obj()
    job = JobWrapper("new").gpus(4).hours(2).window(0, 6).obj()
    ci = [10.0, 20.0, 30.0, 40.0, 50.0, 60.0]
    running = [RunningWork(site="a", gpu_type="H100", gpus=2, it_power_kw=2.0,
                           end=at(2) + 30 * M, job_id="old")]
    prob = problem([site], [job], 6, ci={"a": ci})
    prob.running = running
    res = solve_plan(prob)
    (p,) = res.placements
    # 2 GPUs are held until 02:30, i.e. in slots 0, 1 and 2: the 4-GPU job starts at 3
    assert p.start == at(3)
    assert recount_violations(prob, res) == {}
    assert any("running work" in n for n in res.notes)
    early = type(p)(**{**p.__dict__, "start": at(0), "end": at(2)})
    res.placements = [early]
    assert recount_violations(prob, res) == {"capacity_violations": 2}
    # power alone: a 2-GPU job fits the GPUs left but not the 6 kW cap (2 + 2×3 kW)
    hot = JobWrapper("hot").gpus(2).kw_per_gpu(3.0).hours(1).window(0, 6).obj()
    prob2 = problem([site], [hot], 6, ci={"a": ci})
    prob2.running = running
    (q,) = solve_plan(prob2).placements
    assert q.start == at(3)
    for res in (greedy_plan(prob2), agnostic_plan(prob2)):
        assert res.placements[0].start == at(3)


def test_running_work_is_validated():
    site = SiteWrapper("a").gpus("H100", 4).obj()
    base = problem([site], [JobWrapper("j").obj()], 6)

    def with_running(r):
        return PlanningProblem(sites=base.sites, jobs=base.jobs, inference=[],
                               slots=base.slots, signals=base.signals, running=[r])

    with pytest.raises(UnknownSiteError, match="mars"):
        compile_sets(with_running(RunningWork(site="mars", gpu_type="H100", gpus=1,
                                              it_power_kw=1.0, end=at(3))))
    with pytest.raises(InputError, match="uses GPU type 'A100', which the site does not"):
        compile_sets(with_running(RunningWork(site="a", gpu_type="A100", gpus=1,
                                              it_power_kw=1.0, end=at(3))))
    with pytest.raises(TimeAxisError, match="running work 'old' end .* naive"):
        RunningWork(site="a", gpu_type="H100", gpus=1, it_power_kw=1.0,
                    end=pd.Timestamp("2023-07-15T03:00"), job_id="old")
    with pytest.raises(InputError, match="RunningWork entries"):
        compile_sets(with_running({"site": "a"}))


def test_daily_plan_signals_frame_unchanged_by_the_tail():
    # the signal frame stays the horizon's; only the compiled arrays are extended
    site = SiteWrapper("a").gpus("H100", 1).obj()
    prob = problem([site], [JobWrapper("j").hours(3).window(0, 30).obj()], 6)
    sets = compile_sets(prob)
    assert len(prob.signals) == 6 and sets.n_horizon == 6 and sets.n_ext == 8
    assert sets.slot[0] == T0 and len(signals([site], 6)) == 6


@pytest.mark.parametrize("suffix", [".json", ".csv"])
def test_minutes_and_preemption_fields_round_trip(tmp_path, suffix):
    from carbonsched.domain import Workload
    from carbonsched.workload.files import write_workload

    jobs = [minutes_job("a", 95, at(0) + 20 * M, at(6) + 5 * M),
            minutes_job("b", 240, at(1), at(30), preemptible=True,
                        checkpoint_overhead_minutes=15, max_pieces=4)]
    path = write_workload(Workload(jobs=jobs, inference=[]), tmp_path / f"w{suffix}")
    back = read_workload(path).jobs
    assert [(j.id, j.duration_minutes, j.earliest_start, j.deadline, j.preemptible,
             j.checkpoint_overhead_minutes, j.max_pieces) for j in back] == \
        [(j.id, j.duration_minutes, j.earliest_start, j.deadline, j.preemptible,
          j.checkpoint_overhead_minutes, j.max_pieces) for j in jobs]


@pytest.mark.parametrize("share_of_terminal, defers", [
    (10.0, True),            # every start with room costs ten times the terminal value
    (1.0 + 1e-9, True),      # just above the limit: deferring is cheaper by a hair
    (1.0 - 1e-9, False),     # just below it: the start is cheaper, the job is placed
])
def test_the_priced_greedy_defers_a_job_whose_best_priced_start_costs_its_terminal_value(
        share_of_terminal, defers):
    # The Lagrangian heuristic's choice per deferrable job is the cheapest of its priced
    # starts and its terminal value (deferring), as in the Lagrangian the bound comes from.
    # Every slot is priced so that the job's 2-hour window costs share × terminal value.
    from carbonsched.plan.baselines import priced_greedy

    site = SiteWrapper("a").gpus("H100", 1).obj()
    day = [500.0] * 24
    day[2:4] = [10.0, 10.0]
    job = JobWrapper("wait").hours(2).window(20, 48).obj()
    sets = compile_sets(problem([site], [job], 24, ci={"a": day}))
    terminal = sets.unplaced_cost[0]
    assert sets.deferrable[0] and terminal == pytest.approx(1.0 * (10 + 10) / 1000 * 1.05)
    rank_kw = np.full(sets.pue.shape, share_of_terminal * terminal / (2 * sets.job_kw[0]))
    rank_gpu = np.zeros((*sets.pue.shape, sets.gpu_count.shape[1]))
    res = priced_greedy(sets, rank_kw, rank_gpu)
    assert [u.job_id for u in res.deferred] == (["wait"] if defers else [])
    assert len(res.placements) == (0 if defers else 1)
    assert ("deferrable job(s) deferred" in res.solver.note) == defers
    # the carbon-aware greedy baseline is unchanged: it places every job that fits
    assert len(greedy_plan(problem([site], [job], 24, ci={"a": day})).placements) == 1
