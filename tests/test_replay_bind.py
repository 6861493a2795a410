"""Replay where capacity binds (issue 13 item 3): target fleet load and the oracle's proof."""

from __future__ import annotations

import pytest

from carbonsched.catalog import load_catalog
from carbonsched.errors import InputError
from carbonsched.replay import run_replay, total_fleet_load
from carbonsched.workload import fleet_load, workload_from_traces


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
def test_an_oracle_stopped_by_its_time_limit_is_named_and_left_out(shared_data):
    res = run_replay("global", shared_data, "2023-07-02", "2023-07-02",
                     policies=("agnostic", "milp", "oracle"), time_limit_s=10.0,
                     oracle_time_limit_s=0.01, target_load=0.6)
    assert res["daily"][0]["oracle_proven"] is False
    assert res["oracle_unproven_days"] == ["2023-07-02"]
    # the only day is not a bound: no share is claimed over proven days
    assert res["proven_days"] == 0 and res["milp_oracle_share_proven"] is None
    # stopped before any bound (the greedy start only): no bound to score against either
    assert res["daily"][0]["oracle_gap_kg"] is None
    assert res["oracle_no_bound_days"] == ["2023-07-02"] and res["oracle_bound_days"] == 0
    assert res["milp_share_of_oracle_bound"] is None


def _day(date, agn, grd, mlp, orc, gap_kg, proven):
    row = {"date": date, "oracle_proven": proven, "oracle_gap_kg": gap_kg}
    for p, v in (("agnostic", agn), ("greedy", grd), ("milp", mlp), ("oracle", orc)):
        row[p], row[f"{p}_unplaced_priced_kg"], row[f"{p}_work_mwh"] = v, 1.0, 1.0
    return row


def test_share_against_the_oracles_bound_is_hand_checked():
    from carbonsched.replay import _oracle_accounting

    daily = [_day("2023-01-01", 100.0, 80.0, 70.0, 69.0, 0.0, True),
             _day("2023-01-08", 200.0, 150.0, 120.0, 118.0, 8.0, False),
             _day("2023-01-15", 50.0, 45.0, 40.0, 40.0, None, False)]
    out = _oracle_accounting(daily, ("agnostic", "greedy", "milp", "oracle"))
    # scored against the bound over the two days with one (the unplaced 1 kg each cancels):
    # agnostic 302, milp 192, oracle less its gap 69 + 1 + 118 + 1 − 8 = 181
    assert out["oracle_bound_days"] == 2
    assert out["oracle_no_bound_days"] == ["2023-01-15"]
    assert out["milp_share_of_oracle_bound"] == pytest.approx(round(110 / 121, 4))
    assert out["greedy_share_of_oracle_bound"] == pytest.approx(round(70 / 121, 4))
    # against the plan, over the one proven day: (101 − 71) / (101 − 70)
    assert out["milp_oracle_share_proven"] == pytest.approx(round(30 / 31, 4))
    # at the limit: with no gap left the bound share is the share against the oracle's plan
    for r in daily[:2]:
        r["oracle_gap_kg"] = 0.0
    out = _oracle_accounting(daily, ("agnostic", "greedy", "milp", "oracle"))
    assert out["milp_share_of_oracle_bound"] == pytest.approx(round(110 / 113, 4))


def test_no_day_with_a_bound_claims_no_share():
    from carbonsched.replay import _oracle_accounting

    out = _oracle_accounting([_day("2023-01-15", 50.0, 45.0, 40.0, 40.0, None, False)],
                             ("agnostic", "milp", "oracle"))
    assert out["oracle_bound_days"] == 0 and out["milp_share_of_oracle_bound"] is None
    assert "greedy_share_of_oracle_bound" not in out
