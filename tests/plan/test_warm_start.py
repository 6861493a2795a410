"""Warm starts (issue 36 item 2): a solve started from a previous plan is never worse than it,
on the direct MILP (a HiGHS MIP start) and on column generation (a candidate plan), and says
warm or cold, and why, in ``solver.warm_start``."""

from __future__ import annotations

import pandas as pd
import pytest

from carbonsched.plan import WarmStart, score_plan, solve_plan
from carbonsched.plan.instances import make_instance

pytestmark = pytest.mark.shared_data


@pytest.fixture(scope="module")
def problem(shared_data):
    return make_instance(400, 4, 24, load=0.3, seed=1, data_dir=shared_data)


@pytest.fixture(scope="module")
def good(problem):
    """A plan proven within 0.1 % (the start)."""
    res = solve_plan(problem, time_limit_s=120.0, mip_gap=0.001, method="milp")
    assert str(res.status) in ("optimal", "feasible")
    return res


def test_milp_starts_from_the_previous_plan_and_says_so(problem, good):
    start = WarmStart(good.placements, "the plan of run 1")
    res = solve_plan(problem, time_limit_s=60.0, method="milp", start=start)
    n = sum(p.pieces == 1 for p in good.placements)
    assert res.solver.warm_start == (f"warm: started from the plan of run 1: {n} of its "
                                     f"{len(good.placements)} placement(s) are options of this run")
    assert f"started from the plan of run 1 ({len(good.placements)} placement(s))" in \
        res.solver.note
    assert res.totals["objective"] <= good.totals["objective"] * (1 + 1e-9) + 1e-9
    # the plan the solver returns is recounted from the problem, not taken on trust
    assert score_plan(problem, res).emissions_kg == pytest.approx(
        res.totals["emissions_kg"], rel=1e-6)


def test_colgen_takes_the_previous_plan_as_a_candidate(problem, good):
    """At a limit too short for column generation to find a plan as good by itself, the warm
    start keeps it from ending worse than the previous plan."""
    start = WarmStart(good.placements, "the plan of run 1")
    res = solve_plan(problem, time_limit_s=3.0, method="colgen", start=start)
    assert res.solver.warm_start.startswith("warm: started from the plan of run 1")
    assert "warm start: the plan of run 1 + priced greedy" in res.solver.note
    assert res.totals["objective"] <= good.totals["objective"] * (1 + 1e-6)


def test_a_start_with_nothing_to_offer_is_cold_and_says_why(problem, good):
    later = [p.__class__(**{**p.__dict__, "start": p.start + pd.Timedelta(days=30)})
             for p in good.placements[:5]]
    res = solve_plan(problem, time_limit_s=30.0, method="milp",
                     start=WarmStart(later, "a stale plan"))
    assert res.solver.warm_start == ("cold: none of the 5 placement(s) of a stale plan is an "
                                     "option of this run (committed, ended, in pieces or "
                                     "outside the horizon)")
    cold = solve_plan(problem, time_limit_s=30.0, method="milp")
    assert cold.solver.warm_start == ""
