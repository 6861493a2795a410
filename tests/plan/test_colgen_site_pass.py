"""Large-neighbourhood search by site (issue 13 item 1): site power couples the GPU types, so
a plan no type can improve alone is improved by re-planning everything one site runs."""

from __future__ import annotations

import numpy as np
import pytest

from carbonsched.plan import score_plan
from carbonsched.plan.colgen import job_classes, make_layout, site_pass, type_pass
from carbonsched.plan.result import PlanStatus, SolverRecord, build_plan_result
from carbonsched.plan.sets import compile_sets

from .builders import JobWrapper, SiteWrapper, at, problem
from .test_properties import clean

NONE = np.zeros((0, 3), dtype=np.int64)


def power_shared_by_two_types():
    """Site a: one V and one H GPU under a 2 kW IT cap, 2 hours, CI 10 then 100 g/kWh, PUE 1.

    ``v`` (1 V GPU at 2 kW, 1 h) and ``h`` (1 H GPU at 1 kW, 1 h) both fit either hour, but
    not the same hour (3 kW > 2 kW). ``v`` first, ``h`` second: 2 kWh × 0.01 + 1 kWh × 0.1 =
    0.12 kg; the other way round: 1 × 0.01 + 2 × 0.1 = 0.21 kg. From the 0.21 plan neither
    type can move alone (hour 0 has 1 kW left for ``v``'s 2, hour 1 has none for ``h``).
    Site b (one H GPU, CI 500 g/kWh) only gives the site pass a second site to try.
    """
    a = SiteWrapper("a").gpus("V", 1).gpus("H", 1).cap_kw(2.0).obj()
    b = SiteWrapper("b").gpus("H", 1).obj()
    jobs = [JobWrapper("v").gpu_type("V").gpus(1).hours(1).window(0, 2).sites("a")
            .kw_per_gpu(2.0).obj(),
            JobWrapper("h").gpu_type("H").gpus(1).hours(1).window(0, 2).sites("a")
            .kw_per_gpu(1.0).obj()]
    return problem([a, b], jobs, 2, ci={"a": [10.0, 100.0], "b": [500.0, 500.0]})


def _plan(sets, rec, placed):
    """A plan from ``{job id: (site index, start slot)}``."""
    ids = [j.id for j in sets.problem.jobs]
    chosen = np.array([(ids.index(j), s, t) for j, (s, t) in placed.items()],
                      dtype=np.int64).reshape(-1, 3)
    return build_plan_result(sets, chosen, np.zeros(sets.inf_sites.shape, dtype=np.int64),
                             PlanStatus.FEASIBLE, rec)


def _site_pass(sets, lay, cls, plan, seconds, said, rec, options=None):
    """The pass with zero duals, no LP support and no LP emissions (excess = the plan's)."""
    return site_pass(sets, lay, cls, np.zeros(lay.n_rows), NONE, np.zeros(len(sets.site)), plan,
                     1, seconds, 0.0, said.append, rec, options=options)


def _power_case(placed):
    """The two-type case with a plan from ``placed``: (prob, sets, cls, lay, rec, plan, said)."""
    prob = power_shared_by_two_types()
    sets, cls, lay = _setup(prob)
    rec = SolverRecord(name="highs", status=PlanStatus.FEASIBLE)
    return prob, sets, cls, lay, rec, _plan(sets, rec, placed), []


def _setup(prob):
    sets = compile_sets(prob)
    cls = job_classes(sets)
    return sets, cls, make_layout(sets, cls)


def test_the_site_pass_moves_two_types_no_type_pass_can_move_alone():
    prob, sets, cls, lay, rec, bad, said = _power_case({"v": (0, 1), "h": (0, 0)})
    assert bad.totals["objective"] == pytest.approx(0.21)
    assert type_pass(sets, lay, cls, np.zeros(lay.n_rows), NONE, NONE, bad, 1, 30.0, 0.0,
                     lambda _m: None, rec) is None
    out = _site_pass(sets, lay, cls, bad, 30.0, said, rec)
    assert out is not None and out.totals["objective"] == pytest.approx(0.12)
    starts = {p.job_id: (p.site, p.start) for p in out.placements}
    assert starts == {"v": ("a", at(0)), "h": ("a", at(1))}
    assert "re-planned site by site (1 site MIPs" in rec.note and "0.210 -> 0.120" in rec.note
    assert "site a: 0.210 -> 0.120" in said
    # its MIP proved the neighbourhood optimal: site a is not tried again after its own step
    assert sum(m.startswith("repair MIP") for m in said) == 1
    assert clean(score_plan(prob, out))       # capacity, both power caps, deadlines recounted


def test_an_optimal_plan_is_tried_once_per_site_and_left_alone():
    prob, sets, cls, lay, rec, best, said = _power_case({"v": (0, 0), "h": (0, 1)})
    # a long budget: every site's MIP proves its neighbourhood, so each is tried once
    assert _site_pass(sets, lay, cls, best, 60.0, said, rec) is None
    assert sum(m.startswith("repair MIP") for m in said) == 1   # site b runs nothing: no MIP
    assert "site by site" not in rec.note


def test_work_left_out_joins_every_site_neighbourhood():
    """A job that only fits site b is left out; site a, with the larger excess, goes first and
    its neighbourhood carries the left-out job: it is placed at b in that first step."""
    a = SiteWrapper("a").gpus("H", 1).obj()
    b = SiteWrapper("b").gpus("H", 1).obj()
    jobs = [JobWrapper("x").gpu_type("H").gpus(1).hours(1).window(0, 2).sites("b")
            .kw_per_gpu(1.0).obj(),
            JobWrapper("y").gpu_type("H").gpus(1).hours(1).window(0, 2).sites("a")
            .kw_per_gpu(1.0).obj()]
    prob = problem([a, b], jobs, 2, ci={"a": [100.0, 10.0], "b": [50.0, 50.0]})
    sets, cls, lay = _setup(prob)
    rec = SolverRecord(name="highs", status=PlanStatus.FEASIBLE)
    start = _plan(sets, rec, {"y": (0, 0)})                  # y at its dirty hour, x left out
    assert [u.job_id for u in start.unplaced] == ["x"]
    said: list[str] = []
    out = _site_pass(sets, lay, cls, start, 30.0, said, rec)
    # optimum: y at a's clean hour (0.01 kg), x at b (0.05 kg), found by site a's MIP
    assert out is not None and out.unplaced == []
    assert out.totals["objective"] == pytest.approx(0.06)
    steps = [m for m in said if m.startswith("site ")]
    assert steps[0].startswith("site a:") and steps[0].endswith("-> 0.060")
    assert clean(score_plan(prob, out))


def test_solve_colgen_runs_the_site_pass_when_no_repair_mip_follows(monkeypatch):
    """The large-instance path (too many fractional classes for a repair MIP), forced on the
    small instance: the plan is the optimum, recounted clean."""
    from carbonsched.plan.colgen import ColgenOptions, passes
    from carbonsched.plan.solve import solve_plan

    # the master-LP path alone (a staged solve's short path runs its own site pass first)
    opts = ColgenOptions(repair_max_classes=0, repair_all_classes=0, short_first_share=0.0)
    calls: list[float] = []
    real = passes.site_pass

    def spy(*args, **kw):
        calls.append(args[8])                    # the seconds given to the pass
        return real(*args, **kw)

    monkeypatch.setattr(passes, "site_pass", spy)
    prob = power_shared_by_two_types()
    res = solve_plan(prob, method="colgen", time_limit_s=20.0, mip_gap=0.0, colgen_options=opts)
    assert len(calls) == 1 and 0 < calls[0] <= opts.site_pass_share * 0.8 * 20.0
    assert res.totals["objective"] == pytest.approx(0.12)
    assert clean(score_plan(prob, res))


def _left_out_run(cap, prob, start_kg):
    """The pass from a plan running only ``y`` at (site 0, hour 0), the left-out cap at ``cap``.

    Returns the pass's plan and its ``site ...`` step messages.
    """
    from carbonsched.plan.colgen import ColgenOptions

    sets, cls, lay = _setup(prob)
    rec = SolverRecord(name="highs", status=PlanStatus.FEASIBLE)
    start = _plan(sets, rec, {"y": (0, 0)})
    assert start.totals["objective"] == pytest.approx(start_kg)
    said: list[str] = []
    out = _site_pass(sets, lay, cls, start, 30.0, said, rec,
                     ColgenOptions(site_pass_max_left_out=cap))
    return out, [m for m in said if m.startswith("site ")]


@pytest.mark.parametrize("cap, first_step", [(2, "-> 0.160"), (1, "-> 1.110")])
def test_left_out_classes_past_the_cap_wait_those_that_may_run_at_the_site_first(
        cap, first_step):
    """Site a (one H GPU, CI 100 then 10 g/kWh) runs ``y`` at its dirty hour; ``z`` (site a
    only) and ``x`` (site b only, CI 50) are left out, at 10 × the dirtiest GPU-hour, 1 kg each.
    Site a goes first. With room for both left-out classes its MIP places all three: y and z
    at a (0.1 + 0.01 kg), x at b (0.05 kg), 0.16 kg. At a cap of one, ``z`` (it may run at a)
    is taken before ``x``: 0.11 kg + x's 1 kg, and site b's step then places ``x``."""
    a = SiteWrapper("a").gpus("H", 1).obj()
    b = SiteWrapper("b").gpus("H", 1).obj()
    jobs = [JobWrapper(j).gpu_type("H").gpus(1).hours(1).window(0, 2).sites(s)
            .kw_per_gpu(1.0).obj() for j, s in (("x", "b"), ("y", "a"), ("z", "a"))]
    prob = problem([a, b], jobs, 2, ci={"a": [100.0, 10.0], "b": [50.0, 50.0]})
    out, steps = _left_out_run(cap, prob, 2.1)
    assert steps[0].startswith("site a:") and steps[0].endswith(first_step)
    assert out is not None and out.unplaced == []
    assert out.totals["objective"] == pytest.approx(0.16)


def test_too_little_time_for_a_site_mip_starts_none():
    """1.6 s leaves less than a 0.5 s MIP after the 1.2 s kept for building and overrun."""
    prob, sets, cls, lay, rec, bad, said = _power_case({"v": (0, 1), "h": (0, 0)})
    assert _site_pass(sets, lay, cls, bad, 1.6, said, rec) is None
    assert not any(m.startswith("repair MIP") for m in said)
    # with 1.8 s the same step runs (0.6 s MIP) and finds the optimum
    out = _site_pass(sets, lay, cls, bad, 1.8, said, rec)
    assert out is not None and out.totals["objective"] == pytest.approx(0.12)


@pytest.mark.parametrize("jobs, seconds", [(100, 1.2), (10_000, 1.2), (10_001, 1.20012),
                                           (50_000, 6.0)])
def test_the_time_kept_after_a_pass_mip_grows_with_the_jobs_past_10k(jobs, seconds):
    from types import SimpleNamespace

    from carbonsched.plan.colgen import plan_overhead_s

    assert plan_overhead_s(SimpleNamespace(placeable=np.arange(jobs))) == pytest.approx(seconds)


def test_left_out_classes_past_the_cap_go_costliest_first():
    """Site a (two H GPUs, CI 100 then 10 g/kWh) runs ``y`` (1 GPU, hour 0 only); ``cheap``
    (1 GPU, 1 h: 1 kg to leave out) and ``dear`` (2 GPUs, 1 h: 2 kg) may both run only there,
    in either hour, and are left out. At a cap of one, ``dear`` joins the first neighbourhood:
    it runs alone in the clean hour, 0.1 + 0.02 + ``cheap``'s 1 kg = 1.12 kg (``cheap`` first
    would give 0.1 + 0.01 + ``dear``'s 2 kg = 2.11). The step proved its neighbourhood
    optimal and no other site changes the plan, so site a is not tried again."""
    a = SiteWrapper("a").gpus("H", 2).obj()
    jobs = [JobWrapper(j).gpu_type("H").gpus(g).hours(1).window(0, end).sites("a")
            .kw_per_gpu(1.0).obj() for j, g, end in (("cheap", 1, 2), ("dear", 2, 2),
                                                     ("y", 1, 1))]
    prob = problem([a], jobs, 2, ci={"a": [100.0, 10.0]})
    out, steps = _left_out_run(1, prob, 3.1)
    assert steps == ["site a: 3.100 -> 1.120"], steps
    assert out is not None and [u.job_id for u in out.unplaced] == ["cheap"]
    assert out.totals["objective"] == pytest.approx(1.12)
