"""bench/rolling_step.py: the rolling-step instance has what it claims; fallbacks are named."""

from __future__ import annotations

import pandas as pd
import pytest

from .benchload import load_bench


@pytest.mark.shared_data
def test_instance_has_running_work_pieces_deferral_and_the_grid(shared_data):
    rs = load_bench("rolling_step")
    p = rs.make_rolling_step(300, 4, 24, seed=3, running_share=0.2, preemptible_share=0.3,
                             slot_minutes=15, data_dir=shared_data)
    assert len(p.jobs) == 300 and p.slot_minutes == 15 and len(p.slots) == 96
    end = p.slots[0] + pd.Timedelta(hours=24)
    assert all(j.earliest_start < end for j in p.jobs)
    assert any(j.deadline > end for j in p.jobs)             # deferrable jobs with tails
    # running work holds the stated share of every site's GPUs of every type
    for s in p.sites:
        for g, pool in s.gpus.items():
            held = sum(r.gpus for r in p.running if r.site == s.id and r.gpu_type == g)
            assert held == round(0.2 * pool.count)
    assert all(p.slots[0] < r.end <= p.slots[0] + pd.Timedelta(hours=24) for r in p.running)
    long = [j for j in p.jobs if j.duration_minutes >= 120]
    pre = [j for j in long if j.preemptible]
    assert 0.15 < len(pre) / len(long) < 0.45
    assert all(j.max_pieces == 3 and j.checkpoint_overhead_minutes == 10 for j in pre)
    assert not any(j.preemptible for j in p.jobs if j.duration_minutes < 120)
    with pytest.raises(ValueError, match="running_share"):
        rs.make_rolling_step(10, 2, 24, running_share=1.01, data_dir=shared_data)
    rs.make_rolling_step(10, 2, 24, running_share=1.0, data_dir=shared_data)   # at the limit


def test_fallbacks_name_the_switch_the_greedy_plan_and_the_note():
    rs = load_bench("rolling_step")

    class Rec:
        method, greedy_unplaced = "milp", 4
        note = ("HiGHS; column generation plans 3 preemptible job(s) in one piece (piece "
                "patterns are modelled by the direct MILP only)")

    class Res:
        solver, status = Rec(), "heuristic"

    out = rs.fallbacks("colgen", Res())
    assert out[0] == "method: asked colgen, ran milp"
    assert out[1].startswith("greedy plan") and "4 job(s)" in out[1]
    assert out[2].startswith("column generation plans 3 preemptible") and len(out) == 3
    Rec.note, Res.status = "HiGHS", "optimal"
    assert rs.fallbacks("milp", Res()) == []


def test_summary_judges_the_worst_seed_and_counts_a_missing_bound_as_infinite():
    rs = load_bench("rolling_step")

    def run(seed, s, gap, fb=(), bad=0):
        return {"seed": seed, "seconds": s, "mip_gap": gap, "fallbacks": list(fb),
                "violations": {"capacity_violations": bad}}

    sm = rs.summarise([run(0, 50.0, 0.004), run(1, 70.0, 0.02, fb=["x"]), run(2, 40.0, 0.01)],
                      0.02)
    assert sm["seconds_median"] == 50.0 and sm["seconds_worst"] == 70.0
    assert sm["gap_worst"] == pytest.approx(0.02) and sm["target_met"]     # at the limit
    assert sm["fallback_runs"] == 1 and sm["violation_runs"] == 0
    sm = rs.summarise([run(0, 1.0, 0.0201), run(1, 1.0, None, bad=2)], 0.02)
    assert not sm["target_met"] and sm["gap_worst"] == float("inf")
    assert sm["violation_runs"] == 1
