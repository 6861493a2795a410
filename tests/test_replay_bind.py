"""Replay where capacity binds (issue 13 item 3): target fleet load and the oracle's proof."""

from __future__ import annotations

import pytest

from carbonsched.catalog import load_catalog
from carbonsched.errors import InputError
from carbonsched.evaluate.replay import run_replay, total_fleet_load
from carbonsched.workload.files import fleet_load, workload_from_traces


@pytest.mark.shared_data
def test_target_load_scales_the_day_to_the_requested_share_of_fleet_gpu_hours(shared_data):
    res = run_replay("global", shared_data, "2023-07-02", "2023-07-02",
                     policies=("agnostic",), target_load=0.6)
    day = res["daily"][0]
    # job counts are whole: the realised load is near the target, not exact
    assert day["fleet_load"] == pytest.approx(0.6, abs=0.03)
    # the recorded load is fleet_load's per-type shares weighted by each type's GPU-hours
    cat = load_catalog("global")
    wl = workload_from_traces(shared_data, "2023-07-02", cat, seed=0, scale=1.0)
    per_type = fleet_load(wl, cat)
    caps = {t: sum(s.gpu_count(t) for s in cat.sites) * 24 for t in per_type}
    expect = sum(per_type[t] * caps[t] for t in caps) / sum(caps.values())
    assert total_fleet_load(wl, cat) == pytest.approx(expect)
    assert res["target_load"] == 0.6 and res["fleet_load_mean"] == day["fleet_load"]


@pytest.mark.parametrize("bad", [0.0, -0.2, 1.6])
def test_bad_target_load_is_refused(bad, shared_data):
    with pytest.raises(InputError, match=r"--target-load .* outside \(0, 1.5\]"):
        run_replay("global", shared_data, "2023-07-01", "2023-07-01", target_load=bad)


def test_bad_every_days_is_refused(shared_data):
    with pytest.raises(InputError, match="--every-days 0 must be at least 1"):
        run_replay("global", shared_data, "2023-07-01", "2023-07-01", every_days=0)


@pytest.mark.shared_data
@pytest.mark.slow
def test_an_oracle_stopped_by_its_time_limit_is_named_and_left_out(shared_data, monkeypatch):
    # the direct MILP alone: column generation (auto's route above 2,000 options) has a
    # Lagrangian bound even at 0.01 s
    from carbonsched.plan import solve as solve_mod

    monkeypatch.setattr(solve_mod, "AUTO_COLGEN_MIN_OPTIONS", 10**9)
    res = run_replay("global", shared_data, "2023-07-02", "2023-07-02",
                     policies=("agnostic", "milp", "oracle"), time_limit_s=10.0,
                     oracle_time_limit_s=0.01, target_load=0.6)
    assert res["daily"][0]["oracle_proven"] is False
    assert res["oracle_unproven_days"] == ["2023-07-02"]
    # the only day is not a bound: no share is claimed over proven days
    assert res["proven_days"] == 0 and res["milp_oracle_share_proven"] is None
    # stopped before any bound (the greedy start only): no bound to score against either
    assert res["daily"][0]["oracle_bound_kg"] is None
    assert res["oracle_no_bound_days"] == ["2023-07-02"] and res["oracle_bound_days"] == 0
    assert res["milp_share_of_oracle_bound"] is None


def _day(date, agn, grd, mlp, orc, bound, proven):
    """One replay day: emissions [kg] per policy, 1 kg of unplaced work priced in the scoring,
    the planner's objective = emissions + 2 kg (its penalty), and the oracle's bound."""
    row = {"date": date, "oracle_proven": proven, "oracle_bound_kg": bound}
    for p, v in (("agnostic", agn), ("greedy", grd), ("milp", mlp), ("oracle", orc)):
        row[p], row[f"{p}_unplaced_priced_kg"], row[f"{p}_work_mwh"] = v, 1.0, 1.0
        row[f"{p}_objective_kg"] = v + 2.0
    return row


def test_share_against_the_oracles_bound_is_hand_checked():
    from carbonsched.evaluate.replay import _oracle_accounting

    daily = [_day("2023-01-01", 100.0, 80.0, 70.0, 69.0, 70.9, True),
             _day("2023-01-08", 200.0, 150.0, 120.0, 118.0, 110.0, False),
             _day("2023-01-15", 50.0, 45.0, 40.0, 40.0, None, False)]
    out = _oracle_accounting(daily, ("agnostic", "greedy", "milp", "oracle"))
    # over the two days with a bound, in planner objective: agnostic 102 + 202 = 304,
    # milp 72 + 122 = 194, bound 70.9 + 110 = 180.9: (304 - 194) / (304 - 180.9)
    assert out["oracle_bound_days"] == 2
    assert out["oracle_no_bound_days"] == ["2023-01-15"]
    assert out["milp_share_of_oracle_bound"] == pytest.approx(round(110 / 123.1, 4))
    # greedy 82 + 152 = 234
    assert out["greedy_share_of_oracle_bound"] == pytest.approx(round(70 / 123.1, 4))
    # against the plan, over the one proven day, priced at one: (101 - 71) / (101 - 70)
    assert out["milp_oracle_share_proven"] == pytest.approx(round(30 / 31, 4))
    # at the limit: a bound equal to the agnostic objective leaves no reduction to share
    for r in daily[:2]:
        r["oracle_bound_kg"] = r["agnostic_objective_kg"]
    out = _oracle_accounting(daily, ("agnostic", "greedy", "milp", "oracle"))
    assert out["milp_share_of_oracle_bound"] is None


def test_a_milp_worse_than_agnostic_gets_a_negative_share():
    from carbonsched.evaluate.replay import _oracle_accounting

    out = _oracle_accounting([_day("2023-01-01", 100.0, 90.0, 110.0, 60.0, 61.0, True)],
                             ("agnostic", "milp", "oracle"))
    assert out["milp_share_of_oracle_bound"] == pytest.approx(round(-10 / 41, 4))


def test_no_day_with_a_bound_claims_no_share():
    from carbonsched.evaluate.replay import _oracle_accounting

    out = _oracle_accounting([_day("2023-01-15", 50.0, 45.0, 40.0, 40.0, None, False)],
                             ("agnostic", "milp", "oracle"))
    assert out["oracle_bound_days"] == 0 and out["milp_share_of_oracle_bound"] is None
    assert "greedy_share_of_oracle_bound" not in out


@pytest.mark.shared_data
@pytest.mark.slow
def test_a_solved_oracle_bounds_every_policys_objective_on_the_actual_signals(shared_data):
    res = run_replay("global", shared_data, "2023-07-02", "2023-07-02",
                     policies=("agnostic", "greedy", "milp", "oracle"), time_limit_s=30.0,
                     oracle_time_limit_s=60.0, target_load=0.2)
    day = res["daily"][0]
    bound = day["oracle_bound_kg"]
    assert bound is not None and res["oracle_no_bound_days"] == []
    # the bound is on the oracle's own objective, which every policy is scored in too
    for p in ("agnostic", "greedy", "milp", "oracle"):
        assert day[f"{p}_objective_kg"] >= bound - 1e-3
    share = ((day["agnostic_objective_kg"] - day["milp_objective_kg"])
             / (day["agnostic_objective_kg"] - bound))
    assert res["milp_share_of_oracle_bound"] == pytest.approx(round(share, 4))
    assert 0 < share <= 1
