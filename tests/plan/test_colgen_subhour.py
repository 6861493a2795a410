"""Column generation on 15- and 30-minute grids (issue 36 item 1), and the repair MIP's check
of HiGHS's MIP-start results.

Colgen's plan is recounted by ``score_plan`` (capacity, power, deadlines, running work) and
compared with the direct MILP's optimum: within colgen's own proven gap, its bound never above
the optimum.
"""

from __future__ import annotations

from dataclasses import replace

import highspy
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carbonsched.plan import PlanStatus, compile_sets, score_plan, solve_plan
from carbonsched.plan.colgen.classes import job_classes
from carbonsched.plan.colgen.grid import inference_cells, inference_site_cost
from carbonsched.plan.colgen.layout import make_layout
from carbonsched.plan.colgen.repair_mip import START_CHECK_REL_TOL, repair, start_misvalued
from carbonsched.plan.sets import enumerate_options

from .benchload import load_bench
from .builders import T0, SiteWrapper, at, demand, minutes_job, signals
from .test_properties_horizon import clean, instances

M = pd.Timedelta(minutes=1)
TOL = 1e-6


def grid(prob, minutes: int):
    """The same instance on a grid of ``minutes`` (hourly signals and demand)."""
    n = len(prob.slots) * 60 // minutes
    slots = pd.date_range(prob.slots[0], periods=n, freq=f"{minutes}min", name="slot")
    return replace(prob, slots=slots, slot_minutes=minutes)


def check_against_milp(prob):
    """Colgen ran, its plan is clean, within its proven gap of the MILP optimum, bound below."""
    exact = solve_plan(prob, method="milp", mip_gap=0.0)
    assert exact.status == PlanStatus.OPTIMAL
    opt = exact.totals["objective"]
    res = solve_plan(prob, method="colgen", time_limit_s=60)
    # colgen ran (an empty model is optimal by definition and solved by nothing)
    assert res.solver.method == "colgen" or (
        res.solver.method == "none" and "nothing to decide" in res.solver.note), res.solver.note
    sc = score_plan(prob, res)
    assert clean(sc)
    assert np.isclose(res.totals["objective"], sc.objective, rtol=1e-9, atol=1e-9)
    obj, bound = res.totals["objective"], res.solver.bound
    assert obj >= opt - TOL * max(1.0, abs(opt))            # no plan beats the optimum
    if bound is not None:
        assert bound <= opt + TOL * max(1.0, abs(opt))       # a valid bound
        assert obj - opt <= (obj - bound) + TOL * max(1.0, abs(opt))   # within its gap
    return res, exact


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(instances(preemptible=False), st.sampled_from([15, 30]),
       st.lists(st.integers(0, 2), min_size=1, max_size=3))
def test_colgen_on_a_sub_hour_grid_is_valid_and_within_its_gap_of_the_milp(prob, minutes,
                                                                        inf_gpus):
    # hourly inference demand at the first site, held in every slot of its hour
    hours = len(prob.slots)
    site0 = prob.sites[0]
    sites = [replace(site0, latency_ms={"eu": 5.0})] + prob.sites[1:]
    dem = [demand("eu", h, g, kw=0.5) for h, g in enumerate(inf_gpus[:hours]) if g]
    cap = site0.gpus["H100"].count
    dem = [d for d in dem if d.gpus <= cap - 1]   # leaves room beside running work
    q = grid(replace(prob, sites=sites, inference=dem), minutes)
    check_against_milp(q)


def test_inference_holds_in_every_quarter_hour_in_colgen_too():
    # 2 GPUs; inference takes 1 in every slot of hour 0: a 2-GPU 30-minute job cannot start in
    # hour 0 (it could at 00:15 if the demand held only in the first slot); hour 0 is cleaner
    site = SiteWrapper("a").gpus("H100", 2).latency("eu", 5).obj()
    j = minutes_job("j", 30, at(0), at(2), gpus=2)
    hours = 2
    q = replace(grid_problem([site], [j], hours, ci={"a": [100.0, 300.0]}),
                inference=[demand("eu", 0, 1)])
    res, exact = check_against_milp(q)
    (p,) = res.placements
    assert at(1) <= p.start <= at(1) + 30 * M
    assert res.totals["objective"] == pytest.approx(exact.totals["objective"])
    assert res.totals["emissions_kg"] == pytest.approx(2 * 0.5 * 300 / 1000 + 0.1)


def grid_problem(sites, jobs, hours, slot_minutes=15, **sig):
    from carbonsched.plan import PlanningProblem

    n = hours * 60 // slot_minutes
    slots = pd.date_range(T0, periods=n, freq=f"{slot_minutes}min", name="slot")
    return PlanningProblem(sites=list(sites), jobs=list(jobs), inference=[], slots=slots,
                           signals=signals(sites, hours, **sig), slot_minutes=slot_minutes)


def test_inference_cells_and_costs_cover_every_slot_of_the_hour():
    site = SiteWrapper("a").gpus("H100", 4).latency("eu", 5).obj()
    q = replace(grid_problem([site], [], 2, ci={"a": [100.0, 300.0]}),
                inference=[demand("eu", 1, 2, kw=0.5)])
    sets = compile_sets(q)
    dem = np.array([0])
    k, t = inference_cells(sets, dem)
    assert k.tolist() == [0] * 4 and t.tolist() == [4, 5, 6, 7]
    per_kw = np.arange(sets.pue.size, dtype=float).reshape(sets.pue.shape)
    # 0.5 kW × (4 + 5 + 6 + 7)
    assert inference_site_cost(sets, dem, per_kw)[0, 0] == pytest.approx(0.5 * 22)


@pytest.mark.shared_data
@pytest.mark.parametrize("minutes", [15, 30])
def test_colgen_matches_the_milp_on_a_real_trace_rolling_step(shared_data, minutes):
    # running work, deferral past the horizon, inference, surplus: the rolling step's terms
    p = load_bench("rolling_step").make_rolling_step(80, 3, 12, seed=0, slot_minutes=minutes,
                                                     load=0.6, data_dir=shared_data)
    assert p.running and any(j.deadline > p.slots[-1] for j in p.jobs) and p.inference
    res, exact = check_against_milp(p)
    opt = exact.totals["objective"]
    assert res.totals["objective"] <= opt * (1 + 1e-3)
    assert res.solver.bound >= opt * (1 - 1e-2)


def _tiny_mip() -> tuple[highspy.Highs, np.ndarray]:
    """min 2 x0 + 3 x1 s.t. x0 + x1 >= 1, integer in [0, 1]: optimum 2."""
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    costs = np.array([2.0, 3.0])
    h.addCols(2, costs, np.zeros(2), np.ones(2), 0, np.zeros(0, np.int32),
              np.zeros(0, np.int32), np.zeros(0))
    h.addRows(1, np.array([1.0]), np.array([highspy.kHighsInf]), 2,
              np.array([0], np.int32), np.array([0, 1], np.int32), np.ones(2))
    h.changeColsIntegrality(2, np.arange(2, dtype=np.int32), np.ones(2, dtype=np.uint8))
    h.run()
    return h, costs


def test_start_check_accepts_a_consistent_run_and_refuses_a_misvalued_one():
    h, costs = _tiny_mip()
    assert start_misvalued(h, costs) == ""
    # just at the limit: the reported 2.0 against a value off by the tolerance
    at_limit = costs * (1 + 0.999 * START_CHECK_REL_TOL)
    assert start_misvalued(h, at_limit) == ""
    # beyond it (an objective offset lost: the solution is worth 1.5 kg more)
    msg = start_misvalued(h, costs + np.array([1.5, 0.0]))
    assert "reported objective 2 kg for a solution worth 3.5 kg" in msg


@pytest.mark.shared_data
def test_repair_from_a_start_is_not_fooled_by_presolve(shared_data):
    # HiGHS 1.16's presolve valued this greedy start without its objective offset and
    # returned it as Optimal (4.485 kg, bound 2.93) where the optimum is 3.563
    from carbonsched.plan.baselines import greedy_from_sets
    from carbonsched.plan.result import SolverRecord, build_plan_result

    p = load_bench("rolling_step").make_rolling_step(80, 3, 12, seed=0, slot_minutes=60, load=0.6,
                                       data_dir=shared_data)
    sets = compile_sets(p)
    cls = job_classes(sets)
    lay = make_layout(sets, cls)
    rep_c = np.arange(len(lay.reps))
    start = greedy_from_sets(sets)
    so: dict = {}
    chosen, alloc, proven, bound = repair(
        sets, lay, cls, np.zeros((0, 3), np.int64), np.zeros(0, np.int64), rep_c, lay.mult,
        enumerate_options(sets, lay.reps), 1, 120, 1e-4, lambda m: None, start=start,
        status_out=so)
    plan = build_plan_result(sets, chosen, alloc, PlanStatus.FEASIBLE,
                             SolverRecord(name="highs", status=PlanStatus.FEASIBLE))
    exact = solve_plan(p, method="milp", mip_gap=0.0)
    opt = exact.totals["objective"]
    assert plan.totals["objective"] < start.totals["objective"] - 0.1
    assert plan.totals["objective"] == pytest.approx(opt, rel=1e-3)
    assert bound is None or bound <= opt + 1e-6
    if so.get("start_misvalued"):        # the run was refused and solved again
        assert "reported objective" in so["start_misvalued"]


@pytest.mark.shared_data
@pytest.mark.parametrize("minutes", [15, 30])
def test_lagrangian_bounds_the_sub_hour_optimum_and_the_smoothed_dual_agrees(shared_data,
                                                                              minutes):
    # weak duality on the quarter-hour grid: for any multipliers >= 0 the Lagrangian (and
    # the smoothed dual's exact value, computed apart) is at most the MILP optimum
    from carbonsched.plan.colgen import lagrangian
    from carbonsched.plan.colgen import smoothed as sm

    p = load_bench("rolling_step").make_rolling_step(80, 3, 12, seed=1, slot_minutes=minutes,
                                                     load=0.6, data_dir=shared_data)
    opt = solve_plan(p, method="milp", mip_gap=0.0).totals["objective"]
    sets = compile_sets(p)
    lay = make_layout(sets, job_classes(sets))
    ev = sm._Evaluator(sets, lay)
    for seed in range(5):
        x = np.abs(np.random.default_rng(seed).normal(size=ev.n)) * 0.02 * seed
        _, v_e, _ = ev(x, 0.01)
        lam_c, lam_p, lam_a = ev.split(x)
        lam_a = np.where(lay.absorb_row >= 0, lam_a, 0.0)
        value = lagrangian(sets, lay, lam_c, lam_p, lam_a)[0]
        assert v_e == pytest.approx(value, abs=1e-9)
        assert value <= opt + 1e-9
    # at zero multipliers on a loose instance the Lagrangian is close to the optimum
    assert lagrangian(sets, lay, *(np.zeros_like(a) for a in ev.split(np.zeros(ev.n))))[0] \
        >= 0.5 * opt


def test_smoothed_gradient_sees_inference_in_every_quarter_hour():
    # a demand in hour 1 at two sites, surplus in its quarter hours: the gradient of the
    # smoothed dual in the multipliers of every quarter hour of that hour is the finite
    # difference (it would be 0 in the 2nd-4th if the demand held only in the first slot)
    from carbonsched.plan.colgen import smoothed as sm

    sites = [SiteWrapper(s).gpus("H100", 3).cap_kw(3.0).latency("eu", 10.0).obj()
             for s in ("a", "b")]
    jobs = [minutes_job("m45", 45, at(0), at(2), kw=0.7)]
    q = replace(grid_problem(sites, jobs, 2, ci={"a": [300.0, 120.0], "b": [90.0, 250.0]},
                             surplus={"a": [0.0, 1.5], "b": [1.0, 0.5]}),
                inference=[demand("eu", 1, 2, slo_ms=50.0, kw=0.6)])
    sets = compile_sets(q)
    lay = make_layout(sets, job_classes(sets))
    ev = sm._Evaluator(sets, lay)
    x = np.abs(np.random.default_rng(3).normal(size=ev.n)) * 0.2
    _, _, g = ev(x, 0.05)
    n_s, n_t, n_g = ev.shape
    ks = []
    for s in range(n_s):
        for t in range(4, 8):           # the quarter hours of hour 1
            ks += [(s * n_t + t) * n_g, ev.n_c + s * n_t + t]
            if lay.absorb_row[s, t] >= 0:
                ks.append(ev.n_c + ev.n_p + s * n_t + t)
    for k in ks:
        h = 1e-3
        e = np.zeros(ev.n)
        e[k] = h
        fd = (ev(x + e, 0.05)[0] - ev(x - e, 0.05)[0]) / (2 * h)
        assert g[k] == pytest.approx(fd, rel=1e-4, abs=1e-7)


def test_refused_mip_runs_are_counted_once_per_phase_in_the_note():
    # a site pass may refuse dozens of presolved runs: one clause per phase, counted, naming
    # the first refusal's values (the note is read by a person)
    from carbonsched.plan import PlanStatus
    from carbonsched.plan.colgen.repair_mip import note_start_misvalued
    from carbonsched.plan.result import SolverRecord

    rec = SolverRecord(name="highs", status=PlanStatus.FEASIBLE, note="column generation: ok")
    note_start_misvalued(rec, {}, "site by site")                  # nothing refused: no clause
    assert rec.note == "column generation: ok"
    for k in range(3):
        note_start_misvalued(rec, {"start_misvalued": f"HiGHS reported objective {k} kg for "
                                   f"a solution worth {k + 1} kg"}, "site by site")
    note_start_misvalued(rec, {"start_misvalued": "HiGHS reported objective 7 kg for a "
                               "solution worth 8 kg"}, "repair MIP")
    clauses = rec.note.split("; ")
    assert clauses == [
        "column generation: ok",
        "site by site: 3 MIP run(s) refused and solved again without presolve (HiGHS's "
        "presolve mis-valued the start, first: HiGHS reported objective 0 kg for a "
        "solution worth 1 kg)",
        "repair MIP: 1 MIP run(s) refused and solved again without presolve (HiGHS's presolve "
        "mis-valued the start, first: HiGHS reported objective 7 kg for a solution worth "
        "8 kg)"]
