"""The priced greedy's job order: most GPU-hours per feasible option first."""
from __future__ import annotations

import numpy as np

from carbonsched.plan import solve_plan
from carbonsched.plan.baselines import priced_greedy
from carbonsched.plan.colgen import least_flexible_first
from carbonsched.plan.sets import compile_sets

from .builders import JobWrapper, SiteWrapper, problem


def _ids(sets, order):
    return [sets.problem.jobs[k].id for k in order]


def test_order_is_work_per_option():
    """Hand-counted keys: GPU-hours / (allowed sites × start window)."""
    a = SiteWrapper("a").gpus("V", 4).obj()
    b = SiteWrapper("b").gpus("V", 4).obj()
    jobs = [
        JobWrapper("flex").gpu_type("V").gpus(1).hours(1).window(0, 4).obj(),   # 1 / 8
        JobWrapper("one-site").gpu_type("V").gpus(1).hours(1).window(0, 4).sites("a")
        .obj(),                                                                 # 1 / 4
        JobWrapper("gang").gpu_type("V").gpus(4).hours(2).window(0, 4).obj(),   # 8 / 6
        JobWrapper("tight").gpu_type("V").gpus(1).hours(1).window(2, 3).obj(),  # 1 / 2
        JobWrapper("tie").gpu_type("V").gpus(2).hours(1).window(0, 2).obj(),    # 2 / 4
    ]
    sets = compile_sets(problem([a, b], jobs, 4))
    # tight and tie both bring 0.5 GPU-hours per option: input order
    assert _ids(sets, least_flexible_first(sets)) == ["gang", "tight", "tie", "one-site",
                                                      "flex"]


def test_jobs_without_an_option_are_not_in_the_order():
    a = SiteWrapper("a").gpus("V", 1).obj()
    jobs = [JobWrapper("ok").gpu_type("V").window(0, 2).obj(),
            JobWrapper("too-big").gpu_type("V").gpus(2).window(0, 2).obj()]
    sets = compile_sets(problem([a], jobs, 2))
    order = least_flexible_first(sets)
    assert _ids(sets, order) == ["ok"]
    assert sorted(order.tolist()) == sorted(sets.placeable.tolist())


def test_the_options_counted_are_the_models_options():
    """The key's option count equals the compiled options per job, a deadline past the
    horizon and a residency-limited job included: the order is the one the counts give."""
    a = SiteWrapper("a").gpus("V", 2).obj()
    b = SiteWrapper("b").gpus("V", 2).obj()
    jobs = [JobWrapper("past").gpu_type("V").hours(2).window(1, 9).obj(),
            JobWrapper("resident").gpu_type("V").hours(1).window(0, 4).sites("b").obj(),
            JobWrapper("gang").gpu_type("V").gpus(2).hours(3).window(0, 5).obj()]
    sets = compile_sets(problem([a, b], jobs, 5))
    n_opt = np.bincount(sets.options[:, 0], minlength=len(jobs))
    work = sets.job_gpus * sets.job_dur
    key = -work / np.maximum(n_opt, 1)
    expected = sets.placeable[np.argsort(key[sets.placeable], kind="stable")]
    assert least_flexible_first(sets).tolist() == expected.tolist()
    assert n_opt.tolist() == [int(sets.job_sites[k].sum()) * max(
        int(sets.job_last[k] - sets.job_first[k] + 1), 0) for k in range(len(jobs))]


def one_gpu_two_hours():
    """One GPU, hours 0 (100 g/kWh) and 1 (200 g/kWh); two 1-GPU 1-hour jobs of 1 kW.

    "flex" may run in either hour, "tight" only in hour 0. Both fit only with tight in hour 0
    and flex in hour 1: 0.1 + 0.2 = 0.3 kg. Placed by size alone (a tie, so input order),
    flex takes the clean hour 0 and tight is left out: 0.1 kg + 1 GPU-hour × 10 × 0.2 kg =
    2.1 kg.
    """
    site = SiteWrapper("a").gpus("V", 1).obj()
    jobs = [JobWrapper("flex").gpu_type("V").window(0, 2).kw_per_gpu(1.0).obj(),
            JobWrapper("tight").gpu_type("V").window(0, 1).kw_per_gpu(1.0).obj()]
    return problem([site], jobs, 2, ci={"a": [100.0, 200.0]})


def test_least_flexible_first_places_what_size_order_leaves_out():
    sets = compile_sets(one_gpu_two_hours())
    zero_gpu_price = np.zeros((len(sets.site), len(sets.slot), len(sets.gpu_type)))
    by_size = priced_greedy(sets, sets.cost_per_kwh, zero_gpu_price, order=sets.placeable)
    assert [u.job_id for u in by_size.unplaced] == ["tight"]          # the instance bites
    assert abs(by_size.totals["objective"] - 2.1) < 1e-9
    res = priced_greedy(sets, sets.cost_per_kwh, zero_gpu_price,
                        order=least_flexible_first(sets))
    assert res.unplaced == []
    assert {p.job_id: p.start.hour for p in res.placements} == {"tight": 0, "flex": 1}
    assert abs(res.totals["objective"] - 0.3) < 1e-9


def _spy_orders(monkeypatch, max_jobs):
    """solve_colgen on one_gpu_two_hours(), recording the priced greedy's orders."""
    from carbonsched.plan.colgen import ColgenOptions, incumbents

    seen: list[list[str]] = []
    real = incumbents.priced_greedy

    def spy(sets, rank_kw, rank_gpu, order=None, prefilled=None):
        if prefilled is None:
            seen.append(_ids(sets, order))
        return real(sets, rank_kw, rank_gpu, order=order, prefilled=prefilled)

    monkeypatch.setattr(incumbents, "priced_greedy", spy)
    # one path (no staged solve): each order's priced greedy runs once
    res = solve_plan(one_gpu_two_hours(), method="colgen", mip_gap=0.0, time_limit_s=30,
                     colgen_options=ColgenOptions(both_orders_max_jobs=max_jobs,
                                                  short_first_share=0.0))
    assert res.unplaced == []
    assert abs(res.totals["objective"] - 0.3) < 1e-9
    return seen, res.solver.note


def test_column_generation_prices_greedy_in_both_orders_on_small_instances(monkeypatch):
    """At the job limit (2 jobs, limit 2) both orders run and both plans are candidates."""
    seen, note = _spy_orders(monkeypatch, 2)
    assert seen == [["tight", "flex"], ["flex", "tight"]]
    assert ", priced greedy 0.300, largest-first priced greedy 2.100, " in note


def test_column_generation_prices_greedy_least_flexible_first_only_above_the_limit(
        monkeypatch):
    seen, note = _spy_orders(monkeypatch, 1)
    assert seen == [["tight", "flex"]]
    assert ", priced greedy 0.300, " in note and "largest-first" not in note
