"""The daily plan says when the greedy fallback made it, also when it placed every job."""

from __future__ import annotations

from carbonsched.catalog import load_catalog
from carbonsched.pipeline.daily import run_daily_plan
from carbonsched.plan import solve as solve_mod
from carbonsched.workload.files import demo_workload

CATALOG = "china-eastdata-westcompute"


def _no_incumbent_for_the_plans_milp(monkeypatch) -> None:
    """The plan's MILP returns no incumbent; the pre-checks' own small models solve as usual."""
    real_build, real_run = solve_mod.build_model, solve_mod.run_milp
    built = []

    def build(sets, options=None):
        built.append(real_build(sets, options))
        return built[-1]

    def no_incumbent(lp, solver, time_limit_s, mip_gap, threads=1, start=None):
        # the plan's MILP only (the pre-checks solve small models of their own)
        if not any(lp is m.lp for m in built):
            return real_run(lp, solver, time_limit_s, mip_gap, threads, start=start)
        out = real_run(lp, solver, 0.01, mip_gap, threads, start=start)
        out.has_solution, out.proven, out.objective = False, False, None
        return out

    monkeypatch.setattr(solve_mod, "build_model", build)
    monkeypatch.setattr(solve_mod, "run_milp", no_incumbent)


def test_a_greedy_plan_that_places_every_job_still_says_it_is_the_fallbacks(monkeypatch):
    wl = demo_workload(load_catalog(CATALOG), "2023-07-15")
    _no_incumbent_for_the_plans_milp(monkeypatch)
    # 30 jobs: the direct MILP, whose run gives no incumbent here
    doc = run_daily_plan("2023-07-15", CATALOG, wl, None, "highs", 5.0, 24).document
    assert doc["solver"]["method"] == "greedy" and doc["solver"]["greedy_unplaced"] == 0
    assert doc["unplaced"] == []
    said = [n for n in doc["notes"] if n.startswith("solver: no incumbent")]
    # before: nothing was said when the greedy fallback left no job unplaced
    assert said == ["solver: no incumbent within --time-limit 5 s; the plan is the greedy "
                    "fallback's (no optimality claimed)"]


def test_a_rolling_run_says_the_greedy_fallback_once(monkeypatch, tmp_path):
    # the daily path's "solver: no incumbent ..." note and the rolling run's own sentences of
    # the same fallback were both in the document: said twice. The run's time-limit and other
    # notes stay
    import pandas as pd

    from carbonsched.service.rolling import rolling_step
    from carbonsched.store import Store

    wl = demo_workload(load_catalog(CATALOG), "2023-07-15")
    _no_incumbent_for_the_plans_milp(monkeypatch)
    step = rolling_step(Store(f"sqlite:///{tmp_path / 's.db'}"), load_catalog(CATALOG), CATALOG,
                        "2023-07-15", pd.Timestamp("2023-07-15T00:00Z"), wl.jobs, wl, None,
                        "highs", 5.0, 24, 24)
    notes = step.daily.document["notes"]
    assert step.daily.result.solver.method == "greedy"
    assert [n for n in notes if "greedy" in n] == [
        "solver: no incumbent within --time-limit 5 s; the plan is the greedy fallback's (no "
        "optimality claimed)"]
    assert any(n.startswith("warm start: ") for n in notes)
