"""Fix-and-optimise by GPU type (issue 13): a type whose gangs the plan leaves out is first
re-planned alone, in the exact MIP over its own classes with every other type fixed."""

from __future__ import annotations

import numpy as np
import pytest

from carbonsched.plan import score_plan
from carbonsched.plan.baselines import greedy_from_sets
from carbonsched.plan.colgen import job_classes, make_layout, type_pass
from carbonsched.plan.result import PlanStatus, SolverRecord
from carbonsched.plan.sets import compile_sets

from .builders import JobWrapper, SiteWrapper, at, problem
from .test_properties import clean


def gang_behind_a_long_job():
    """Two V gangs on site a (2 V GPUs, 1 H100), one H100 job on site b (1 H100); 4 hours.

    CI at a: 10, 10, 100, 100 g/kWh; at b 50 g/kWh; PUE 1, 1 kW per GPU. ``long`` (2 V ×
    2 h, any start) is cheapest at 00:00 (4 kWh × 0.01 = 0.04 kg), which greedy takes first
    (earliest window first) — then ``fixed`` (2 V × 1 h, only 01:00) finds no V GPU and is
    left out: 2 GPU-hours at the penalty 10 × 0.1 kg/kWh × 1 kW = 1 kg per GPU-hour, 2 kg.
    ``h`` runs on b for 1 kWh × 0.05 = 0.05 kg. Greedy: 0.04 + 2 + 0.05 = 2.09 kg.
    Optimum: ``long`` at 02:00 (4 kWh × 0.1 = 0.4 kg), ``fixed`` at 01:00 (2 kWh × 0.01 =
    0.02 kg), ``h`` as before: 0.47 kg.
    """
    a = SiteWrapper("a").gpus("V", 2).gpus("H100", 1).obj()
    b = SiteWrapper("b").gpus("H100", 1).obj()
    jobs = [JobWrapper("long").gpu_type("V").gpus(2).hours(2).window(0, 4).kw_per_gpu(1.0).obj(),
            JobWrapper("h").gpu_type("H100").gpus(1).hours(1).window(0, 4).sites("b")
            .kw_per_gpu(1.0).obj(),
            JobWrapper("fixed").gpu_type("V").gpus(2).hours(1).window(1, 2).kw_per_gpu(1.0)
            .obj()]
    return problem([a, b], jobs, 4, ci={"a": [10.0, 10.0, 100.0, 100.0],
                                        "b": [50.0, 50.0, 50.0, 50.0]})


def test_the_type_alone_places_the_gang_greedy_left_out():
    prob = gang_behind_a_long_job()
    sets = compile_sets(prob)
    cls = job_classes(sets)
    lay = make_layout(sets, cls)
    plan = greedy_from_sets(sets)
    assert [u.job_id for u in plan.unplaced] == ["fixed"]
    assert plan.totals["objective"] == pytest.approx(2.09)
    h_before = [(p.site, p.start) for p in plan.placements if p.job_id == "h"]
    rec = SolverRecord(name="highs", status=PlanStatus.FEASIBLE)
    none = np.zeros((0, 3), dtype=np.int64)
    out = type_pass(sets, lay, cls, np.zeros(lay.n_rows), none, none, plan, 1, 30.0, 0.0,
                    lambda _msg: None, rec)
    assert out is not None
    assert out.unplaced == []
    assert out.totals["objective"] == pytest.approx(0.47)
    starts = {p.job_id: p.start for p in out.placements}
    assert starts["long"] == at(2) and starts["fixed"] == at(1)
    # the other type stayed where the plan put it
    assert [(p.site, p.start) for p in out.placements if p.job_id == "h"] == h_before
    assert "V re-planned alone" in rec.note and "2.090 -> 0.470" in rec.note
    assert clean(score_plan(prob, out))         # capacity, power, deadlines, gangs recounted


def test_a_plan_that_leaves_nothing_out_is_not_replanned_alone():
    prob = gang_behind_a_long_job()
    sets = compile_sets(prob)
    cls = job_classes(sets)
    lay = make_layout(sets, cls)
    best = type_pass(sets, lay, cls, np.zeros(lay.n_rows), np.zeros((0, 3), np.int64),
                     np.zeros((0, 3), np.int64), greedy_from_sets(sets), 1, 30.0, 0.0,
                     lambda _msg: None, SolverRecord(name="highs", status=PlanStatus.FEASIBLE))
    rec = SolverRecord(name="highs", status=PlanStatus.FEASIBLE)
    again = type_pass(sets, lay, cls, np.zeros(lay.n_rows), np.zeros((0, 3), np.int64),
                      np.zeros((0, 3), np.int64), best, 1, 30.0, 0.0, lambda _msg: None, rec)
    assert again is None                         # already optimal: no pass improves it
    assert "alone" not in rec.note
