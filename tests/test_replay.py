"""Replay: plan on forecasts, score on the actual grid (two real days of the global catalog)."""

from __future__ import annotations

import pytest

from carbonsched.errors import InputError
from carbonsched.replay import plot_daily, run_replay


@pytest.fixture(scope="module")
def two_days(shared_data):
    # a third of each day's trace jobs: small enough to solve to a 0.1 % gap in seconds
    return run_replay("global", shared_data, "2023-07-02", "2023-07-03", seed=0,
                      time_limit_s=60.0, chunk_days=1, workload_scale=0.3)


@pytest.mark.shared_data
@pytest.mark.slow
def test_replay_policies_are_valid_and_ordered(two_days):
    pol = two_days["policies"]
    assert set(pol) == {"agnostic", "greedy", "milp", "oracle"}
    assert two_days["days"] == 2 and [d["date"] for d in two_days["daily"]] == [
        "2023-07-02", "2023-07-03"]
    for p in pol.values():
        assert p["capacity_violations"] == 0
        assert p["slo_violations"] == 0
        assert p["power_cap_violations"] == 0
        assert p["gang_violations"] == 0
        assert p["deadline_misses"] == 0
        assert p["fallback_days"] == 0
    # perfect foresight is the bound (to within the oracle's proven MIP gap, 0.1 %);
    # the planner beats the carbon-unaware baseline
    tol = 1e-3 * pol["oracle"]["emissions_kg"]
    assert pol["oracle"]["emissions_kg"] <= pol["milp"]["emissions_kg"] + tol
    assert pol["oracle"]["emissions_kg"] <= pol["greedy"]["emissions_kg"] + tol
    assert pol["milp"]["emissions_kg"] < pol["agnostic"]["emissions_kg"]
    assert pol["agnostic"]["reduction_pct"] == 0.0 and pol["oracle"]["oracle_share"] == 1.0
    a, m = pol["agnostic"]["emissions_kg"], pol["milp"]["emissions_kg"]
    assert pol["milp"]["reduction_pct"] == pytest.approx(100 * (a - m) / a, abs=1e-2)
    daily_total = sum(d["milp"] for d in two_days["daily"])
    assert daily_total == pytest.approx(m, abs=0.01)


@pytest.mark.shared_data
@pytest.mark.slow
def test_replay_plot(two_days, tmp_path):
    png = tmp_path / "daily.png"
    plot_daily(two_days, png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(("kw", "message"), [
    ({"policies": ("agnostic", "clairvoyant")}, "unknown policies.*clairvoyant"),
    ({"start": "2023-07-03", "end": "2023-07-01"}, "before --start"),
    ({"catalog": "china-eastdata-westcompute"}, "modelled signals"),
])
def test_replay_bad_input(kw, message, shared_data):
    args = {"catalog": "global", "data_dir": shared_data, "start": "2023-07-01",
            "end": "2023-07-01"} | kw
    with pytest.raises(InputError, match=message):
        run_replay(**args)
