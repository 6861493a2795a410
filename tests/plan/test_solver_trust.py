"""Solver outcomes are checked, not trusted (issue 7, item 6).

Solutions are tampered with *after* a real HiGHS or CBC solve (a value set to 0.5, a job set
twice, a cell pushed over capacity): the planner must answer status ``error`` and make no plan.
A real CBC that cannot execute falls back to HiGHS with a note; no working solver is refused by
the probe, before anything else runs.
"""

from __future__ import annotations

import os
import stat

import numpy as np
import pytest

from carbonsched.errors import SolverUnavailableError
from carbonsched.plan import PlanStatus, score_plan, solve_plan
from carbonsched.plan import solve as solve_mod
from carbonsched.plan.solve import probe_solver, resolve_solver

from .builders import JobWrapper, SiteWrapper, problem
from .test_solve import mid_size


def small():
    sites = [SiteWrapper("a").gpus("H100", 4).obj(), SiteWrapper("b").gpus("H100", 4).obj()]
    jobs = [JobWrapper("j1").gpus(4).hours(2).window(0, 4).obj(),
            JobWrapper("j2").gpus(2).hours(1).window(0, 4).obj()]
    return problem(sites, jobs, 4, ci={"a": [100, 50, 10, 200], "b": [300, 300, 20, 20]})


def tamper(monkeypatch, change):
    """Run the real solver, then let ``change(model)`` alter the values it read back."""
    real_build = solve_mod.build_model
    real_run = solve_mod.run_milp
    built = {}

    def build(sets, options=None):
        built["m"] = real_build(sets, options)
        return built["m"]

    def run(lp, solver, time_limit_s, mip_gap, threads=1, start=None):
        out = real_run(lp, solver, time_limit_s, mip_gap, threads, start=start)
        if "m" in built and lp is built["m"].lp:
            change(built["m"])
        return out

    monkeypatch.setattr(solve_mod, "build_model", build)
    monkeypatch.setattr(solve_mod, "run_milp", run)


@pytest.mark.parametrize("solver", ["highs", "cbc"])
def test_fractional_value_is_an_error_not_a_plan(monkeypatch, solver):
    # today the 0.5 was read as "not chosen": j1 silently unplaced, status optimal
    def half(m):
        chosen = [v for v in m.x if (v.varValue or 0) > 0.5]
        chosen[0].varValue = 0.5

    tamper(monkeypatch, half)
    res = solve_plan(small(), solver=solver, method="milp")
    assert res.status == PlanStatus.ERROR
    assert res.placements == [] and res.inference == []
    assert res.solver.violations == {"integrality": 1}
    assert "= 0.5, not 0 or 1" in res.solver.note
    assert "failed the recount" in res.solver.note
    assert {u.reason for u in res.unplaced} == {"SolverNoSolution"}


def test_value_within_the_integrality_tolerance_is_read_as_whole(monkeypatch):
    def nearly(m):
        for v in m.x:
            if (v.varValue or 0) > 0.5:
                v.varValue = 1.0 - 5e-6
            else:
                v.varValue = 4e-6

    tamper(monkeypatch, nearly)
    res = solve_plan(small(), method="milp")
    assert res.status == PlanStatus.OPTIMAL
    assert len(res.placements) == 2
    assert res.totals["emissions_kg"] == pytest.approx(0.18)


def test_job_chosen_twice_is_an_error(monkeypatch):
    # today both options became placements: j2 placed twice, status optimal
    def twice(m):
        j2 = [i for i, (j, _, _) in enumerate(m.options) if j == 1]
        for i in j2:
            m.x[i].varValue = 0.0
        for i in j2[:2]:
            m.x[i].varValue = 1.0
        m.u[1].varValue = 0.0

    tamper(monkeypatch, twice)
    res = solve_plan(small(), method="milp")
    assert res.status == PlanStatus.ERROR
    assert res.solver.violations == {"gang_violations": 1}
    assert res.placements == []
    assert res.solver.objective is None and res.solver.mip_gap is None


def test_capacity_broken_by_the_solution_is_an_error(monkeypatch):
    # every j1 option at site a, hour 2 chosen together with j2 there: 6 GPUs on 4
    sites = [SiteWrapper("a").gpus("H100", 4).obj()]
    jobs = [JobWrapper("j1").gpus(4).window(0, 1).obj(), JobWrapper("j2").gpus(2).window(0, 1)
            .obj()]
    prob = problem(sites, jobs, 1)

    def crowd(m):
        for v in m.x:
            v.varValue = 1.0
        for v in m.u.values():
            v.varValue = 0.0

    tamper(monkeypatch, crowd)
    res = solve_plan(prob, method="milp")
    assert res.status == PlanStatus.ERROR
    assert res.solver.violations == {"capacity_violations": 1}
    assert "1 capacity violations" in res.solver.note


def test_power_broken_by_the_solution_is_an_error(monkeypatch):
    sites = [SiteWrapper("a").gpus("H100", 8).cap_kw(10.0).obj()]
    jobs = [JobWrapper("j1").gpus(2).kw_per_gpu(3.0).window(0, 1).obj(),
            JobWrapper("j2").gpus(2).kw_per_gpu(3.0).window(0, 1).obj()]
    prob = problem(sites, jobs, 1)

    def crowd(m):
        for v in m.x:
            v.varValue = 1.0
        for v in m.u.values():
            v.varValue = 0.0

    tamper(monkeypatch, crowd)
    res = solve_plan(prob, method="milp")
    assert res.status == PlanStatus.ERROR
    assert res.solver.violations == {"power_cap_violations": 1}


def test_unserved_inference_from_the_solver_is_an_error(monkeypatch):
    from .builders import demand

    sites = [SiteWrapper("a").gpus("H100", 4).latency("eu", 5).obj()]
    prob = problem(sites, [], 2, inference=[demand("eu", 0, 3)])

    def short(m):
        for v in m.y.values():
            v.varValue = 1.0

    tamper(monkeypatch, short)
    res = solve_plan(prob, method="milp")
    assert res.status == PlanStatus.ERROR
    assert res.solver.violations == {"slo_violations": 1}


@pytest.mark.parametrize("solver", ["highs", "cbc"])
def test_nothing_to_decide_is_optimal_with_zero_objective_and_bound(solver):
    sites = [SiteWrapper("a").gpus("H100", 4).obj()]
    for jobs in ([], [JobWrapper("huge").gpus(8).obj()]):     # none, or only pre-check rejects
        res = solve_plan(problem(sites, jobs, 3), solver=solver)
        assert res.status == PlanStatus.OPTIMAL
        assert res.solver.objective == 0.0 and res.solver.bound == 0.0
        assert res.solver.mip_gap == 0.0
        assert res.solver.name == solver
        assert "nothing to decide" in res.solver.note
        assert [u.reason for u in res.unplaced] == (["GangTooLarge"] if jobs else [])


def _solved_without_incumbent(monkeypatch, prob):
    """``solve_plan(method="milp")`` whose MILP returns no incumbent within the limit.

    The solver is asked with the limit it would get but returns nothing (HiGHS at 0.01 s may
    or may not find one on a loaded machine), so the greedy fallback makes the plan.
    """
    real_run = solve_mod.run_milp

    def no_incumbent(lp, solver, time_limit_s, mip_gap, threads=1, start=None):
        out = real_run(lp, solver, 0.01, mip_gap, threads, start=start)
        out.has_solution, out.proven, out.objective = False, False, None
        return out

    monkeypatch.setattr(solve_mod, "run_milp", no_incumbent)
    res = solve_plan(prob, method="milp", time_limit_s=1.0)
    monkeypatch.undo()
    return res


def test_no_incumbent_says_greedy_and_how_many_it_left_unplaced(monkeypatch):
    prob = mid_size(n_jobs=40, hours=10, seed=2)
    res = _solved_without_incumbent(monkeypatch, prob)
    assert res.status == PlanStatus.HEURISTIC
    assert res.solver.method == "greedy"           # it said "milp" before
    left = [u.job_id for u in res.unplaced if u.reason == "InsufficientCapacity"]
    assert res.solver.greedy_unplaced == len(left) > 0
    assert f"leaves {len(left)} job(s) unplaced" in res.solver.note
    sc = score_plan(prob, res)
    assert sc.capacity_violations == sc.power_cap_violations == sc.gang_violations == 0
    # the MILP with a longer limit places jobs the greedy fallback left unplaced
    # (measured: greedy leaves 5 unplaced, the MILP places all 40 in about 8 s)
    full = solve_plan(prob, method="milp", time_limit_s=600)
    assert full.status in (PlanStatus.OPTIMAL, PlanStatus.FEASIBLE)
    assert len(left) == 5 and full.unplaced == []
    assert set(left) <= {p.job_id for p in full.placements}


@pytest.mark.parametrize(("day_g_per_kwh", "defers"), [
    (500.0, True),    # every start in the horizon emits 50 times the terminal value
    (10.0, False),    # just at the limit: the start emits the terminal value's 1/1.05: placed
])
def test_the_greedy_fallback_defers_where_the_objective_would_and_says_so(monkeypatch,
                                                                           day_g_per_kwh,
                                                                           defers):
    # a job deferrable past the 24 h horizon (window to hour 48) whose cleanest start left in
    # the horizon emits more than its terminal value: the MILP defers it; so must its fallback,
    # or the plan runs it in a dirty hour once dispatched (the fallback placed every job)
    site = SiteWrapper("a").gpus("H100", 1).obj()
    day = [day_g_per_kwh] * 24
    day[2:4] = [10.0, 10.0]
    prob = problem([site], [JobWrapper("wait").hours(2).window(20, 48).obj()], 24,
                   ci={"a": day})
    res = _solved_without_incumbent(monkeypatch, prob)
    assert (res.status, res.solver.method) == (PlanStatus.HEURISTIC, "greedy")
    assert [u.job_id for u in res.deferred] == (["wait"] if defers else [])
    assert len(res.placements) == (0 if defers else 1)
    assert ("1 deferrable job(s) deferred" in res.solver.note) == defers
    assert ("places every job that passed the pre-check but the 1 it deferred"
            in res.solver.note) == defers
    # what the MILP itself does on the same problem
    exact = solve_plan(prob, method="milp")
    assert [u.job_id for u in exact.deferred] == [u.job_id for u in res.deferred]


def _bad_binary(tmp_path, kind: str) -> str:
    p = tmp_path / "cbc"
    if kind == "not-executable":
        p.write_text("#!/bin/sh\nexit 0\n")
        p.chmod(0o644)
    elif kind == "exec-format":
        p.write_bytes(b"\x7fELF\x02\x01\x01garbage-not-a-real-binary")
        p.chmod(0o755)
    else:  # runs but writes no solution
        p.write_text("#!/bin/sh\nexit 1\n")
        p.chmod(p.stat().st_mode | stat.S_IXUSR)
    return str(p)


@pytest.mark.parametrize("kind", ["exec-format", "crashes", "not-executable"])
def test_cbc_that_cannot_execute_falls_back_to_highs_with_a_note(tmp_path, monkeypatch, kind):
    monkeypatch.setenv(solve_mod.CBC_PATH_ENV, _bad_binary(tmp_path, kind))
    assert probe_solver("cbc") != ""
    name, note = resolve_solver("cbc")
    assert name == "highs"
    assert note.startswith("CBC cannot run on this host (") and "fell back to HiGHS" in note
    res = solve_plan(small(), solver="cbc")
    assert res.solver.name == "highs" and res.status == PlanStatus.OPTIMAL
    assert "fell back to HiGHS" in res.solver.note
    assert res.totals["emissions_kg"] == pytest.approx(0.18)


@pytest.mark.parametrize("kind", ["exec-format", "crashes", "not-executable"])
def test_a_cbc_run_that_fails_leaves_no_files_behind(tmp_path, monkeypatch, kind):
    # PuLP writes the model to the temporary directory and deletes it only after a run that
    # worked: each failed probe left a "<uuid>-pulp.mps" in /tmp
    import tempfile

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    monkeypatch.setenv(solve_mod.CBC_PATH_ENV, _bad_binary(tmp_path, kind))
    # PuLP's error, or the OS's when the binary cannot start (the probe catches both)
    with pytest.raises((SolverUnavailableError, OSError)):
        solve_mod.run_milp(solve_mod._probe_model(), "cbc", 10.0, 0.0)
    assert list(tmp.iterdir()) == []


def test_a_working_cbc_named_by_path_is_used(monkeypatch):
    # PuLP's bundled binary, named without constructing the deprecated PULP_CBC_CMD
    from pulp.apis.coin_api import pulp_cbc_path as path

    assert os.access(path, os.X_OK)
    monkeypatch.setenv(solve_mod.CBC_PATH_ENV, path)
    res = solve_plan(small(), solver="cbc")
    assert res.solver.name == "cbc" and res.status == PlanStatus.OPTIMAL
    assert res.totals["emissions_kg"] == pytest.approx(0.18)


def test_no_working_solver_is_refused_by_the_probe(tmp_path, monkeypatch):
    monkeypatch.setenv(solve_mod.CBC_PATH_ENV, _bad_binary(tmp_path, "exec-format"))
    monkeypatch.setattr(solve_mod, "highs_available", lambda: False)
    with pytest.raises(SolverUnavailableError, match=r"solver 'cbc' is unavailable: the CBC "
                       r"binary cannot run on this host and HiGHS \(highspy\) is not usable"):
        resolve_solver("cbc")
    with pytest.raises(SolverUnavailableError, match="solver 'highs' is unavailable"):
        resolve_solver("highs")


def test_probe_solves_a_real_model():
    assert probe_solver("highs") == ""
    assert probe_solver("cbc") == ""
    assert np.isclose(solve_plan(small(), solver="cbc").totals["emissions_kg"], 0.18)
