"""Benchmark instances from the real traces, and the benchmark's JSON (tiny sizes)."""

from __future__ import annotations

import numpy as np
import pytest

from carbonsched.plan import compile_sets
from carbonsched.plan.bench import KEYS, run_plan_benchmark
from carbonsched.plan.instances import make_instance

pytestmark = pytest.mark.shared_data


def test_instance_uses_the_stated_share_of_gpu_hours(shared_data):
    prob = make_instance(400, 4, 24, load=0.3, seed=1, data_dir=shared_data)
    assert len(prob.jobs) == 400 and len(prob.sites) == 4 and len(prob.slots) == 24
    work = sum(j.gpus * j.duration_hours for j in prob.jobs)
    batch = sum(s.meta["batch_gpus"] for s in prob.sites)
    # capacity is rounded up per site and type (and a pool holds at least the largest gang),
    # so the work uses a little under the stated 0.3 of the batch GPU-hours
    assert 0.25 < work / (batch * 24) <= 0.3 + 1e-9
    sets = compile_sets(prob)
    assert sets.ci_g_per_kwh.shape == (4, 24) and (sets.ci_g_per_kwh > 0).all()
    # the first zone is CA-ON: low-carbon grid on 2023-07-15 (Electricity Maps export)
    assert prob.sites[0].zone == "CA-ON"
    assert 0 < sets.ci_g_per_kwh[0].mean() < 200
    again = make_instance(400, 4, 24, load=0.3, seed=1, data_dir=shared_data)
    assert [j.gpus for j in again.jobs] == [j.gpus for j in prob.jobs]
    assert np.allclose(compile_sets(again).ci_g_per_kwh, sets.ci_g_per_kwh)


def test_past_sixteen_sites_each_zone_gets_another_data_centre(shared_data):
    from carbonsched.plan.instances import MAX_SITES, ZONES

    prob = make_instance(300, 18, 24, load=0.3, seed=2, data_dir=shared_data)
    ids = [s.id for s in prob.sites]
    assert len(set(ids)) == 18 and ids[16].startswith("s16-") and ids[17].startswith("s17-")
    assert [s.zone for s in prob.sites[16:]] == list(ZONES)[:2]      # CA-ON and the next
    areas = {d.area for d in prob.inference}
    assert areas == set(list(ZONES)[:16])                            # one area per zone
    keys = [(d.area, d.hour, d.gpu_type) for d in prob.inference]
    assert len(keys) == len(set(keys))                               # no demand twice
    assert set(prob.sites[17].latency_ms) == areas
    sets = compile_sets(prob)
    assert np.allclose(sets.ci_g_per_kwh[16], sets.ci_g_per_kwh[0])  # the zone's signals
    assert make_instance(10, MAX_SITES, 24, seed=0, data_dir=shared_data).sites[-1].id \
        == f"s{MAX_SITES - 1:02d}-{list(ZONES)[-1]}"                 # just at the limit
    with pytest.raises(ValueError, match=f"sites must be 1..{MAX_SITES}"):
        make_instance(10, MAX_SITES + 1, 24, data_dir=shared_data)


def test_benchmark_json_has_every_key(shared_data):
    out = run_plan_benchmark(60, 2, 24, load=0.3, reference=True, seed=0,
                             data_dir=shared_data, time_limit_s=300)
    for k in ("jobs", "sites", "hours", "load", *KEYS):
        assert k in out and k in out["reference"]
    assert (out["jobs"], out["sites"], out["hours"], out["load"]) == (60, 2, 24, 0.3)
    assert out["status"] in ("optimal", "feasible")
    assert out["reference"]["status"] == "optimal"
    assert out["peak_memory_mb"] > 10
    # both solve the same instance: the planner is within its gap of the reference optimum
    ref = out["reference"]["objective"]
    assert out["objective"] <= ref * (1 + 0.01) + 1e-9
    assert out["bound"] <= ref + 1e-6


def test_the_bench_helpers_format_a_gap_and_name_the_commit(tmp_path):
    from carbonsched.plan.bench import format_gap, git_commit
    from carbonsched.plan.result import join_clauses

    assert [format_gap(g) for g in (None, float("inf"), 0.0025, 0.0)] == \
        ["—", "no bound", "0.25 %", "0.00 %"]
    assert git_commit(tmp_path) == "unknown"            # not a Git checkout
    assert join_clauses("a", "", None, "b") == "a; b" and join_clauses("", None) == ""


def test_solve_fallbacks_names_fallbacks_not_where_the_plan_came_from():
    """Known-bad (the rolling-step results): the provenance clauses named a greedy candidate
    and were listed as fallbacks."""
    from types import SimpleNamespace

    from carbonsched.plan.bench import solve_fallbacks

    note = ("column generation plans 2 preemptible job(s) in one piece; "
            "plan from priced greedy + moves (greedy 2.0, priced greedy 1.5); "
            "the short path (smoothed dual, no master LP) ran first in 29.0 s: plan 1.5 kg "
            "from priced greedy, bound 1.0 kg; no master LP solved in the budget: the plan is "
            "priced greedy on the warm-up's multipliers")
    res = SimpleNamespace(status="feasible",
                          solver=SimpleNamespace(method="colgen", note=note,
                                                 greedy_unplaced=None))
    assert solve_fallbacks("auto", res) == [
        "column generation plans 2 preemptible job(s) in one piece",
        "no master LP solved in the budget: the plan is priced greedy on the warm-up's "
        "multipliers"]
    assert solve_fallbacks("milp", res)[0] == "method: asked milp, ran colgen"
