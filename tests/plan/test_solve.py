"""Solver handling: fallback, unavailability, time limits, column generation."""

from __future__ import annotations

import dataclasses
import re
import time

import numpy as np
import pandas as pd
import pulp
import pytest
from hypothesis import HealthCheck, assume, given, settings

from carbonsched.errors import SolverUnavailableError
from carbonsched.plan import PlanStatus, score_plan, solve_plan
from carbonsched.plan import solve as solve_mod
from carbonsched.plan.highs import highs_with_start
from carbonsched.plan.solve import _parse_cbc_log, relative_gap

from .builders import JobWrapper, SiteWrapper, problem
from .test_properties import instances


def small():
    sites = [SiteWrapper("a").gpus("H100", 4).obj(), SiteWrapper("b").gpus("H100", 4).obj()]
    jobs = [JobWrapper("j2").gpus(2).window(0, 1).obj(),
            JobWrapper("j1").gpus(4).window(0, 3).obj()]
    return problem(sites, jobs, 3, ci={"a": [10, 100, 100], "b": [50, 50, 50]})


def mid_size(n_jobs: int = 60, n_sites: int = 3, hours: int = 16, seed: int = 3):
    """A random instance with binding capacity (generated, no shared data needed)."""
    rng = np.random.default_rng(seed)
    sites = [SiteWrapper(f"s{i}").gpus("H100", 6).gpus("A100", 4).cap_kw(9).obj()
             for i in range(n_sites)]
    jobs = []
    for k in range(n_jobs):
        es = int(rng.integers(0, hours - 3))
        dur = int(rng.integers(1, 4))
        jobs.append(JobWrapper(f"j{k}").gpu_type(["H100", "A100"][k % 2])
                    .gpus(int(rng.integers(1, 4))).hours(dur)
                    .window(es, min(hours, es + dur + int(rng.integers(0, 12)))).obj())
    ci = {s.id: list(rng.uniform(20, 600, hours)) for s in sites}
    return problem(sites, jobs, hours, ci=ci)


def test_cbc_is_the_fallback_when_highs_is_unusable(monkeypatch):
    monkeypatch.setattr(solve_mod, "highs_available", lambda: False)
    res = solve_plan(small())
    assert res.solver.name == "cbc"
    assert "fell back to CBC" in res.solver.note
    assert res.status == PlanStatus.OPTIMAL
    assert res.totals["emissions_kg"] == pytest.approx(0.14)


def test_cbc_directly_gives_the_same_optimum():
    res = solve_plan(small(), solver="cbc")
    assert res.solver.name == "cbc" and res.solver.note.startswith("solver status Optimal")
    assert res.totals["emissions_kg"] == pytest.approx(0.14)
    assert res.solver.bound == pytest.approx(0.14, abs=1e-6)


def test_no_usable_solver_is_named(monkeypatch):
    monkeypatch.setattr(solve_mod, "highs_available", lambda: False)
    monkeypatch.setattr(solve_mod, "cbc_available", lambda: False)
    with pytest.raises(SolverUnavailableError, match="solver 'highs' is unavailable: highspy"):
        solve_plan(small())
    with pytest.raises(SolverUnavailableError, match="solver 'cbc' is unavailable") as exc:
        solve_plan(small(), solver="cbc")
    assert exc.value.solver == "cbc"


def test_time_limited_run_is_never_called_optimal():
    prob = mid_size()
    res = solve_plan(prob, time_limit_s=0.02, mip_gap=0.0, method="milp")
    assert res.status in (PlanStatus.FEASIBLE, PlanStatus.HEURISTIC)
    assert res.status != PlanStatus.OPTIMAL
    sc = score_plan(prob, res)
    assert sc.capacity_violations == sc.power_cap_violations == sc.gang_violations == 0
    if res.status == PlanStatus.HEURISTIC:
        assert "greedy" in res.solver.note
    full = solve_plan(prob, time_limit_s=600, mip_gap=0.01, method="milp")
    assert full.status == PlanStatus.OPTIMAL and full.solver.mip_gap <= 0.01
    assert full.totals["objective"] <= res.totals["objective"] + 1e-9


def test_column_generation_on_mid_size_reports_a_valid_gap():
    prob = mid_size()
    exact = solve_plan(prob, time_limit_s=600, mip_gap=0.0, method="milp")
    assert exact.status == PlanStatus.OPTIMAL
    cg = solve_plan(prob, time_limit_s=600, mip_gap=0.01, method="colgen")
    assert cg.solver.method == "colgen"
    assert cg.solver.bound <= exact.totals["objective"] + 1e-6
    assert cg.solver.mip_gap == pytest.approx(relative_gap(cg.totals["objective"],
                                                           cg.solver.bound))
    sc = score_plan(prob, cg)
    assert sc.capacity_violations == sc.power_cap_violations == sc.gang_violations == 0
    assert cg.totals["objective"] >= exact.totals["objective"] - 1e-6
    assert cg.solver.mip_gap < 0.05


def test_auto_picks_milp_for_small_instances():
    assert solve_plan(small()).solver.method == "milp"


def test_gap_and_cbc_log_parsing():
    assert relative_gap(100.0, 99.0) == pytest.approx(0.01)
    assert relative_gap(100.0, 101.0) == 0.0
    assert relative_gap(None, 1.0) is None
    # a plan of objective 0 (all on surplus) has no relative gap: an absolute one within the
    # solver's 1e-6 kg counts as closed, just past it stays unknown
    assert relative_gap(0.0, -1e-6) == 0.0
    assert relative_gap(0.0, -1.1e-6) is None
    assert relative_gap(0.0, -0.5) is None
    log = ("Result - Stopped on time limit\n\nObjective value:                12.50000000\n"
           "Lower bound:                    12.000\nGap:                            0.04\n")
    assert _parse_cbc_log(log) == (12.5, 12.0)


def test_auto_runs_column_generation_then_the_milp_when_the_gap_is_open(monkeypatch):
    # The limits are generous so that a loaded machine (CI runs the suite on 2 cores, -n 2) only
    # makes the test slower, never changes its outcome: both solves stop at their gap long before.
    prob = mid_size()
    exact = solve_plan(prob, time_limit_s=600, mip_gap=0.0, method="milp")
    monkeypatch.setattr(solve_mod, "AUTO_MILP_MAX_OPTIONS", 0)
    res = solve_plan(prob, time_limit_s=600, mip_gap=0.01)
    assert res.solver.method in ("colgen", "colgen+milp")
    assert res.status == PlanStatus.OPTIMAL
    assert res.solver.mip_gap <= 0.01
    assert res.totals["objective"] <= exact.totals["objective"] * 1.01 + 1e-9
    assert res.solver.bound <= exact.totals["objective"] + 1e-6


def test_column_generation_without_highspy_uses_the_cbc_milp(monkeypatch):
    monkeypatch.setattr(solve_mod, "highs_available", lambda: False)
    res = solve_plan(small(), method="colgen")
    assert (res.solver.name, res.solver.method) == ("cbc", "milp")
    assert "column generation needs highspy" in res.solver.note
    assert res.totals["emissions_kg"] == pytest.approx(0.14)


def _unproven_colgen(monkeypatch):
    """The real column generation, its plan reported unproven (as when its time runs out)."""
    real = solve_mod.solve_colgen

    def solve(*a, **k):
        res = real(*a, **k)
        res.status = res.solver.status = PlanStatus.FEASIBLE
        return res

    monkeypatch.setattr(solve_mod, "solve_colgen", solve)
    monkeypatch.setattr(solve_mod, "AUTO_MILP_MAX_OPTIONS", 0)


def test_no_follow_up_milp_when_its_expected_build_leaves_no_solver_time(monkeypatch):
    # 1 s per option expected for the build: far more than the 600 s limit, so the follow-up is
    # neither built nor solved (AUTO_FOLLOWUP_MIN_SECONDS keeps its 5 s)
    _unproven_colgen(monkeypatch)
    monkeypatch.setattr(solve_mod, "BUILD_S_PER_OPTION", 1.0)
    built = []
    monkeypatch.setattr(solve_mod, "build_model", lambda *a: built.append(a))
    res = solve_plan(mid_size(), time_limit_s=600, mip_gap=0.01)
    assert built == []
    assert res.solver.method == "colgen" and res.status == PlanStatus.FEASIBLE
    assert "no direct MILP after column generation: " in res.solver.note
    assert "of the 600 s limit left; its build and hand-over need about " in res.solver.note
    assert "the solver at least 5 s and reading the plan 1.5 s; the column-generation plan is " \
        "kept" in res.solver.note


def test_follow_up_milp_not_solved_when_its_build_was_slower_than_expected(monkeypatch):
    # the build measured (x 1e6 for the hand-over) leaves no solver time: the column-generation
    # plan is kept and the note says why, instead of overrunning the limit
    _unproven_colgen(monkeypatch)
    monkeypatch.setattr(solve_mod, "TRANSFER_PER_BUILD", 1e6)
    ran = []
    monkeypatch.setattr(solve_mod, "run_milp", lambda *a, **k: ran.append(a))
    res = solve_plan(mid_size(), time_limit_s=600, mip_gap=0.01)
    assert ran == []
    assert res.solver.method == "colgen" and res.status == PlanStatus.FEASIBLE
    assert "; then direct MILP: built in " in res.solver.note
    assert "s but not solved: with " in res.solver.note
    assert "were left, under the 5 s minimum; the column-generation plan is kept" in \
        res.solver.note
    assert res.solver.build_seconds > 0


def test_follow_up_milp_gets_the_limit_less_its_hand_over_and_the_finish_margin(monkeypatch):
    # margin and hand-over made tens of seconds, so that each one's subtraction shows through
    # a 5 s allowance for the scheduling of this process (no wall-clock budget is assumed)
    _unproven_colgen(monkeypatch)
    monkeypatch.setattr(solve_mod, "FINISH_MARGIN_S", 30.0)
    monkeypatch.setattr(solve_mod, "TRANSFER_S_PER_OPTION", 0.025)
    seen = {}
    real = solve_mod.run_milp

    def run(model, solver, time_limit_s, *a, **k):
        seen["limit"], seen["at"] = time_limit_s, time.perf_counter()
        return real(model, solver, time_limit_s, *a, **k)

    monkeypatch.setattr(solve_mod, "run_milp", run)
    prob = mid_size()
    n_opts = len(solve_mod.compile_sets(prob).options)
    assert solve_mod.TRANSFER_S_PER_OPTION * n_opts > 10, n_opts   # the hand-over shows
    t0 = time.perf_counter()
    res = solve_plan(prob, time_limit_s=600, mip_gap=0.01)
    assert res.solver.method == "colgen+milp"
    # build_seconds adds column generation's build to the MILP's: an upper estimate of the
    # hand-over the solver's limit was cut by
    handover = max(solve_mod.TRANSFER_S_PER_OPTION * n_opts,
                   solve_mod.TRANSFER_PER_BUILD * res.solver.build_seconds)
    # the time from t0 to the hand-over is at least what the solve counted as elapsed: the
    # limit never exceeds the budget less that, the margin and the per-option hand-over (5 s
    # for the moments between t0 and the solve's start and between its reading and "at")
    left = 600 - (seen["at"] - t0) - solve_mod.FINISH_MARGIN_S
    assert left - handover <= seen["limit"] <= left - \
        solve_mod.TRANSFER_S_PER_OPTION * n_opts + 5.0


def test_run_milp_reports_lp_and_presolved_mip_bounds():
    lp = pulp.LpProblem("lp", pulp.LpMinimize)
    x = lp.add_variable("x", 0, 4)
    lp += x
    lp += x >= 1.5
    out = solve_mod.run_milp(lp, "highs", 10.0, 0.0)
    assert out.proven and out.bound == pytest.approx(1.5) and out.objective == pytest.approx(1.5)
    mip = pulp.LpProblem("mip", pulp.LpMinimize)
    y = mip.add_variable("y", 0, 4, cat=pulp.LpInteger)
    mip += y
    mip += y >= 1.5                       # presolve rounds the bound up: solved there
    out = solve_mod.run_milp(mip, "highs", 10.0, 0.0)
    assert out.proven and out.objective == pytest.approx(2.0) and out.bound == pytest.approx(2.0)


# --- MIP start (the direct MILP seeded with a plan) ------------------------------------------

def _start_in_highs(sets, plan, tmp_path):
    """Hand ``plan`` to HiGHS as a MIP start on the full model; return HiGHS's log."""
    from carbonsched.plan.model import build_model

    m = build_model(sets)
    x0 = solve_mod.start_values(m, plan)
    log = tmp_path / "highs.log"
    # stop at the first solution HiGHS finds itself: the log then holds its verdict on the start
    # threads=1 as every solve here: HiGHS keeps one thread pool per process
    cmd = highs_with_start(x0, msg=False, threads=1, output_flag=True, log_to_console=False,
                           log_file=str(log), mip_max_improving_sols=1)
    cmd.createAndConfigureSolver(m.lp)
    cmd.buildSolverModel(m.lp)
    cmd.callSolver(m.lp)
    return m, x0, log.read_text()


def test_mip_start_is_the_plan_in_the_solvers_own_objective(tmp_path):
    from carbonsched.plan.baselines import greedy_from_sets

    sets = solve_mod.compile_sets(mid_size())
    plan = greedy_from_sets(sets)
    assert 0 < len(plan.placements) < len(sets.problem.jobs)     # some work left out too
    m, x0, text = _start_in_highs(sets, plan, tmp_path)
    got = re.search(r"MIP start solution is feasible: objective value is ([-+0-9.eE]+)", text)
    assert got, text[-2000:]
    # the same plan, priced by the solver: every placement and unplaced flag mapped right
    assert float(got.group(1)) == pytest.approx(plan.totals["objective"], rel=1e-7)
    assert sum(v for k, v in x0.items() if k.name.startswith("x")) == len(plan.placements)
    assert sum(v for k, v in x0.items() if k.name.startswith("u")) == \
        len(sets.problem.jobs) - len(plan.placements)


def test_mip_start_leaves_out_jobs_it_cannot_map_and_is_empty_without_placements():
    from carbonsched.plan.baselines import greedy_from_sets
    from carbonsched.plan.model import build_model

    sets = solve_mod.compile_sets(mid_size())
    plan = greedy_from_sets(sets)
    m = build_model(sets)
    moved = plan.placements[0]
    plan.placements[0] = dataclasses.replace(moved, start=moved.start + pd.Timedelta(days=30))
    x0 = solve_mod.start_values(m, plan)
    j = [jb.id for jb in sets.problem.jobs].index(moved.job_id)
    assert m.u[j] not in x0                       # an option the model does not have: not given
    assert len([k for k in x0 if k.name.startswith("u")]) == len(sets.problem.jobs) - 1
    plan.placements = []
    assert solve_mod.start_values(m, plan) == {}


def test_auto_starts_the_follow_up_milp_from_the_column_generation_plan(monkeypatch):
    # generous limits (see above): both solves stop at their gap, never at the limit
    prob = mid_size()
    exact = solve_plan(prob, time_limit_s=600, mip_gap=0.0, method="milp")
    _unproven_colgen(monkeypatch)
    # the day-sized route (2,000 < options <= AUTO_MILP_MAX_OPTIONS), not the one above it
    monkeypatch.setattr(solve_mod, "AUTO_MILP_MAX_OPTIONS", 10**9)
    monkeypatch.setattr(solve_mod, "AUTO_COLGEN_MIN_OPTIONS", 0)
    starts = []
    real = solve_mod.run_milp

    def run(*a, **k):
        starts.append(k.get("start"))
        return real(*a, **k)

    monkeypatch.setattr(solve_mod, "run_milp", run)
    res = solve_plan(prob, time_limit_s=600, mip_gap=1e-4)
    assert res.solver.method == "colgen+milp", res.solver.note
    assert len(starts) == 1 and starts[0]                       # the MILP got a start
    assert re.search(r"then direct MILP: started from a plan of [0-9.]+ kg; solver status",
                     res.solver.note)
    assert res.status == PlanStatus.OPTIMAL
    assert res.totals["objective"] == pytest.approx(exact.totals["objective"], rel=1e-4)


def test_auto_keeps_the_plain_milp_below_the_colgen_size_and_off_the_hourly_grid(monkeypatch):
    from .builders import T0, minutes_job
    from .test_slot_minutes import grid_problem

    monkeypatch.setattr(solve_mod, "AUTO_COLGEN_MIN_OPTIONS", 0)
    for kw in ({"solver": "cbc"}, {}):            # asked for, and as HiGHS's fallback
        if not kw:
            monkeypatch.setattr(solve_mod, "highs_available", lambda: False)
        res = solve_plan(small(), **kw)           # CBC: no column generation, no start
        assert res.solver.name == "cbc"
        assert res.solver.method == "milp" and "column generation" not in res.solver.note
    monkeypatch.undo()
    monkeypatch.setattr(solve_mod, "AUTO_COLGEN_MIN_OPTIONS", 0)
    job = minutes_job("q", 45, T0, T0 + pd.Timedelta(hours=3))
    res = solve_plan(grid_problem([SiteWrapper("a").gpus("H100", 1).obj()], [job], 3))
    assert res.solver.method == "milp" and "column generation" not in res.solver.note
    monkeypatch.undo()
    monkeypatch.setattr(solve_mod, "AUTO_COLGEN_MIN_OPTIONS", 10**9)
    assert solve_plan(mid_size()).solver.method == "milp"


@pytest.mark.parametrize("above", [True, False])
def test_auto_gives_column_generation_the_whole_limit_above_its_size(monkeypatch, above):
    # a day-sized instance between AUTO_COLGEN_MIN_OPTIONS and AUTO_MILP_MAX_OPTIONS: column
    # generation for the whole limit (no share kept for a direct MILP); at the size exactly,
    # the direct MILP
    prob = mid_size()
    n = len(solve_mod.compile_sets(prob).options)
    assert n <= solve_mod.AUTO_MILP_MAX_OPTIONS
    monkeypatch.setattr(solve_mod, "AUTO_COLGEN_MIN_OPTIONS", n - 1 if above else n)
    given = []
    real = solve_mod.solve_colgen

    def spy(sets, time_limit_s, *a, **k):
        given.append(time_limit_s)
        return real(sets, time_limit_s, *a, **k)

    monkeypatch.setattr(solve_mod, "solve_colgen", spy)
    res = solve_plan(prob, time_limit_s=45.0, mip_gap=0.01)
    assert given == ([45.0] if above else [])
    assert res.solver.method.startswith("colgen" if above else "milp")


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(case=instances())
def test_property_a_greedy_plan_is_a_mip_start_priced_at_its_own_objective(
        case, tmp_path_factory):
    # random instances (IT and facility caps, gangs, residency, windows), without inference
    # and surplus, so the start gives every discrete variable and no continuous one: HiGHS
    # judges it feasible and prices it at the plan's own objective
    from carbonsched.plan.baselines import greedy_from_sets

    prob, _ = case
    sig = prob.signals.copy()
    sig["green_surplus_kw"] = 0.0
    prob = dataclasses.replace(prob, inference=[], signals=sig)
    sets = solve_mod.compile_sets(prob)
    plan = greedy_from_sets(sets)
    assume(len(plan.placements) > 0)
    _, _, text = _start_in_highs(sets, plan, tmp_path_factory.mktemp("start"))
    assert re.search(r"Assessing feasibility of MIP solution .*: feasible\n", text), text[-3000:]
    got = re.search(r"MIP start solution is feasible: objective value is ([-+0-9.eE]+)", text)
    if got:                                   # not printed when presolve empties the model
        assert float(got.group(1)) == pytest.approx(plan.totals["objective"], rel=1e-7,
                                                     abs=1e-9)


def test_a_refused_mip_start_is_said_in_the_note(monkeypatch):
    import highspy

    from carbonsched.plan.baselines import greedy_from_sets
    from carbonsched.plan.result import SolverRecord

    monkeypatch.setattr(highspy.Highs, "setSolution",
                        lambda self, *a: highspy.HighsStatus.kError)
    sets = solve_mod.compile_sets(mid_size())
    plan = greedy_from_sets(sets)
    rec = SolverRecord(name="highs", status=PlanStatus.NO_SOLUTION, method="milp")
    res = solve_mod.solve_milp(sets, "highs", 600, 0.01, 1, rec, time.perf_counter(),
                               start=plan)
    assert (f"the MIP start (a plan of {plan.totals['objective']:.3f} kg) was refused by HiGHS;"
            " solved without it; solver status Optimal") in res.solver.note
    assert "started from" not in res.solver.note


@pytest.mark.parametrize("gap, status", [(0.0099, PlanStatus.OPTIMAL),
                                         (0.0101, PlanStatus.FEASIBLE)])
def test_follow_up_proves_the_plan_with_either_bound_when_both_runs_hit_their_limit(
        monkeypatch, gap, status):
    # column generation and the direct MILP each stopped by its limit (reported feasible):
    # their bounds are still proven, so the better plan within mip_gap of the larger bound is
    # optimal; here column generation's bound is lowered to 5 % under its plan (still a
    # bound) and the MILP's set to leave the best plan 0.99 % (just within the 1 % asked) or
    # 1.01 % (just past it) above it
    real_cg = solve_mod.solve_colgen

    def weak_colgen(*a, **k):
        res = real_cg(*a, **k)
        res.status = res.solver.status = PlanStatus.FEASIBLE
        res.solver.bound = res.totals["objective"] * 0.95
        return res

    monkeypatch.setattr(solve_mod, "solve_colgen", weak_colgen)
    monkeypatch.setattr(solve_mod, "AUTO_MILP_MAX_OPTIONS", 0)
    real = solve_mod.solve_milp
    seen = {}

    def time_limited(sets, name, limit, mip_gap, threads, rec, *a, **k):
        alt = real(sets, name, limit, mip_gap, threads, rec, *a, **k)
        best_kg = min(alt.totals["objective"], k["start"].totals["objective"])
        seen["cg_bound"] = k["start"].solver.bound
        rec.bound = best_kg * (1 - gap)
        alt.status = rec.status = PlanStatus.FEASIBLE
        return alt

    monkeypatch.setattr(solve_mod, "solve_milp", time_limited)
    res = solve_plan(mid_size(), time_limit_s=600, mip_gap=0.01)
    assert res.solver.method == "colgen+milp", res.solver.note
    assert seen["cg_bound"] is not None
    assert seen["cg_bound"] < res.solver.bound            # the MILP's bound is the larger
    assert res.solver.mip_gap == pytest.approx(gap, rel=1e-6)
    assert res.status == res.solver.status == status


def test_a_warm_solve_whose_follow_up_milp_wins_keeps_saying_it_was_warm(monkeypatch):
    # the follow-up MILP's plan is kept (column generation's is made to look worse); the
    # record returned is the MILP's, and what the solve started from must not be lost with it
    from carbonsched.plan.solve import WarmStart

    prob = mid_size()
    first = solve_plan(prob, time_limit_s=600, mip_gap=0.01)
    real = solve_mod.solve_colgen

    def worse(*a, **k):
        res = real(*a, **k)
        res.status = res.solver.status = PlanStatus.FEASIBLE
        res.totals["objective"] += 1000.0
        return res

    monkeypatch.setattr(solve_mod, "solve_colgen", worse)
    monkeypatch.setattr(solve_mod, "AUTO_MILP_MAX_OPTIONS", 0)
    monkeypatch.setattr(solve_mod, "AUTO_COLGEN_MIN_OPTIONS", 0)
    res = solve_plan(prob, time_limit_s=600, mip_gap=0.01,
                     start=WarmStart(first.placements, source="the previous run"))
    assert res.solver.method == "colgen+milp", res.solver.note
    assert res.solver.note.count("then direct MILP") == 1
    assert res.solver.warm_start.startswith("warm: started from the previous run: "), \
        res.solver.warm_start
