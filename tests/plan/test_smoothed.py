"""The smoothed Lagrangian dual (carbonsched.plan.colgen.smoothed) and the short-budget path of
column generation that uses it instead of a master LP (issue 13, 10k x 16 x 48 in 20 s).

The exact value computed beside the smoothed one is the Lagrangian of colgen (a valid bound
for any multipliers); the smoothed value lies between it and it less the entropy bias; the
gradient matches finite differences; the ascent never passes the optimum.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pulp
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from carbonsched.plan import PlanStatus, score_plan, solve_plan
from carbonsched.plan.colgen import ColgenOptions, job_classes, lagrangian, make_layout, multipliers
from carbonsched.plan.colgen import smoothed as sm
from carbonsched.plan.model import build_model
from carbonsched.plan.result import recount_violations
from carbonsched.plan.sets import compile_sets, enumerate_options

from .builders import JobWrapper, SiteWrapper, at, demand, minutes_job, problem
from .test_colgen_bound import two_gangs_three_gpus
from .test_properties import PROPS, clean, instances


def _setup(prob, weight_dtype: type = np.float64):
    """Sets, layout and an evaluator; double weights unless ``weight_dtype`` says otherwise
    (the formulas are checked in double, the ascent's single precision against them below)."""
    sets = compile_sets(prob)
    lay = make_layout(sets, job_classes(sets))
    return sets, lay, sm._Evaluator(sets, lay, weight_dtype)


def _random_x(ev, seed: int, scale: float = 0.05) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.abs(rng.normal(size=ev.n)) * scale


@PROPS
@given(inst=instances(), seed=st.integers(0, 10_000))
def test_exact_value_is_colgens_lagrangian_and_the_smoothed_one_within_its_bias(inst, seed):
    prob, _ = inst
    sets, lay, ev = _setup(prob)
    # a demand no site may serve makes the problem infeasible (solve_plan refuses it first)
    assume(bool(sets.inf_sites[lay.demands].any(axis=1).all()))
    x = _random_x(ev, seed)            # absorption multipliers where no row is: ignored
    mu = 0.01
    v_s, v_e, _ = ev(x, mu)
    lam_c, lam_p, lam_a = ev.split(x)
    lam_a = np.where(lay.absorb_row >= 0, lam_a, 0.0)
    assert v_e == pytest.approx(lagrangian(sets, lay, lam_c, lam_p, lam_a)[0], abs=1e-9)
    # softmin_mu >= min - mu log(#choices): per class its options + unplaced, per demand its
    # sites, per absorption variable its two bounds
    n_opts = np.bincount(job_classes(sets).of_job[enumerate_options(sets, lay.reps)[:, 0]],
                         minlength=len(lay.reps)) if len(lay.reps) else np.zeros(0)
    bias = mu * float((lay.mult * np.log(n_opts + 1.0)).sum())
    dem = lay.demands
    if len(dem):
        bias += mu * float((sets.inf_gpus[dem] * np.log(sets.inf_sites[dem].sum(1))).sum())
    bias += mu * math.log(2.0) * int((lay.absorb_row >= 0).sum())
    assert v_e - bias - 1e-9 <= v_s <= v_e + 1e-9


def _every_term():
    """Jobs ending partway through their last slot, surplus (absorption rows) at both sites,
    an inference demand, two GPU types: every term of the Lagrangian and its gradient."""
    sites = [SiteWrapper(s).gpus("H100", 3).gpus("A100", 2).cap_kw(3.0)
             .latency("eu", 10.0).obj() for s in ("a", "b")]
    jobs = [minutes_job("m90", 90, at(0), at(3), kw=0.7),
            minutes_job("m30", 30, at(0), at(2), gpus=2, kw=0.5),
            JobWrapper("h2").gpu_type("A100").gpus(1).hours(2).window(0, 3).kw_per_gpu(0.9)
            .obj()]
    return problem(sites, jobs, 3, [demand("eu", 1, 1, slo_ms=50.0, kw=0.6)],
                   ci={"a": [300.0, 120.0, 80.0], "b": [90.0, 250.0, 60.0]},
                   pue={"a": 1.2, "b": 1.4}, surplus={"a": [0.0, 1.5, 2.0], "b": [1.0, 0.0, 0.5]})


@pytest.mark.parametrize("build", [two_gangs_three_gpus, _every_term])
def test_gradient_matches_central_differences(build):
    sets, lay, ev = _setup(build())
    if build is _every_term:          # the instance holds what it is meant to
        assert (sets.job_last_frac < 1.0).sum() == 2
        assert (lay.absorb_row >= 0).sum() == 4 and len(lay.demands) == 1
    x = _random_x(ev, 3, scale=0.2)
    _, _, g = ev(x, 0.05)
    for k in range(ev.n):
        if k >= ev.n_c + ev.n_p and not (lay.absorb_row >= 0).ravel()[k - ev.n_c - ev.n_p]:
            assert g[k] == 0.0          # no absorption row: no multiplier to move
            continue
        h = 1e-3                        # smooth: central differences err O(h^2); an uncapped
        e = np.zeros(ev.n)              # power row's 1e9 kW rhs makes a small h cancel
        e[k] = h
        fd = (ev(x + e, 0.05)[0] - ev(x - e, 0.05)[0]) / (2 * h)
        assert g[k] == pytest.approx(fd, rel=1e-4, abs=1e-7)


def test_ascent_reaches_the_lp_value_and_its_bound_is_the_lagrangian_of_its_duals():
    # two 2-GPU jobs, 3 GPUs (test_colgen_bound): the LP places 1.5 jobs, 2.6 kg
    sets, lay, _ = _setup(two_gangs_three_gpus())
    res = sm.smoothed_ascent(sets, lay, 3.0, job_cost_kg=0.4)
    assert res.bound == pytest.approx(2.6, abs=2e-3)
    assert res.bound <= 2.6 + 1e-9
    assert lagrangian(sets, lay, *multipliers(sets, lay, res.duals))[0] == pytest.approx(
        res.bound, abs=1e-12)
    # the temperature came down as each one stalled
    assert len(res.temperatures) >= 2
    default = ColgenOptions()
    assert res.temperatures[1] == pytest.approx(res.temperatures[0] * default.smooth_mu_factor)
    assert res.temperatures[0] == pytest.approx(default.smooth_mu_start_rel * 0.4)


@pytest.mark.parametrize("cost", [0.0, -1.0, float("nan"), float("inf")])
def test_a_temperature_scale_that_is_not_positive_is_refused(cost):
    sets, lay, _ = _setup(two_gangs_three_gpus())
    with pytest.raises(ValueError, match=f"job_cost_kg must be positive, got {cost}"):
        sm.smoothed_ascent(sets, lay, 1.0, job_cost_kg=cost)


def test_the_temperature_scale_is_the_net_cost_per_job_unless_that_is_a_residue():
    from carbonsched.plan.colgen.lagrangian_dual import NET_COST_FLOOR, job_cost_scale

    sets, _, _ = _setup(two_gangs_three_gpus())
    n = len(sets.placeable)
    dirtiest = float(np.abs(sets.unplaced_cost[sets.placeable]).mean() / 10.0)
    assert n == 2 and dirtiest > 1e-3
    at_floor = NET_COST_FLOOR * dirtiest * n
    assert job_cost_scale(sets, 0.8) == pytest.approx(0.4)
    assert job_cost_scale(sets, at_floor) == at_floor / n            # just at the floor
    for residue in (at_floor * 0.999, 1e-113, 0.0, -3.0, float("nan"), float("inf")):
        assert job_cost_scale(sets, residue) == dirtiest, residue


def _lp_value(prob) -> float | None:
    """The LP relaxation of the full per-option model (every binary made continuous)."""
    m = build_model(compile_sets(prob))
    for v in m.lp.variables():
        v.cat = pulp.LpContinuous
    m.lp.solve(pulp.HiGHS(msg=False))
    return pulp.value(m.lp.objective) if pulp.LpStatus[m.lp.status] == "Optimal" else None


def test_the_lp_value_of_the_every_term_instance_is_reached():
    prob = _every_term()
    sets, lay, _ = _setup(prob)
    lp = _lp_value(prob)
    res = sm.smoothed_ascent(sets, lay, 3.0, job_cost_kg=0.1)
    assert res.bound <= lp + 1e-6
    assert res.bound == pytest.approx(lp, abs=2e-3 * max(1.0, abs(lp)))


@PROPS
@given(inst=instances())
def test_the_ascent_never_passes_the_lp_value(inst):
    # the Lagrangian dual's maximum is the LP's value (not the MILP's): a bound between
    # the two would be wrong and pass a comparison with the MILP
    prob, _ = inst
    sets, lay, _ = _setup(prob)
    assume(bool(sets.inf_sites[lay.demands].any(axis=1).all()))
    lp = _lp_value(prob)
    assume(lp is not None)
    res = sm.smoothed_ascent(sets, lay, 0.3, job_cost_kg=0.5)
    assert res.bound <= lp + 1e-6 * max(1.0, abs(lp))


def _short_at(per_job: float):
    # no warm-up: it reaches the LP's 2.6 kg itself on this instance; one path, no staged
    # solve (the budget alone decides which)
    opts = ColgenOptions(smooth_s_per_job=per_job, warmup_share=0.0, short_first_share=0.0)
    prob = two_gangs_three_gpus()
    return prob, solve_plan(prob, method="colgen", time_limit_s=60.0, mip_gap=0.0,
                            colgen_options=opts)


def test_a_budget_under_the_per_job_limit_takes_the_smoothed_dual():
    # 2 jobs, 60 s: short above 30 s per job
    prob, res = _short_at(30.001)
    assert ("short budget (60.0 s for 2 jobs over 2 slots, less than 60.0 s: 30001 ms per "
            "job per 48 slots): no master LP") in res.solver.note
    assert "priced greedy on the smoothed dual's multipliers" in res.solver.note
    assert res.solver.bound <= res.totals["objective"] + 1e-9
    # the smoothed dual reaches the LP's 2.6 kg; the GPU-type split then proves 4.4
    assert re.search(r"the bound is the smoothed Lagrangian dual's, 2\.600 kg "
                     r"\([0-9]+ L-BFGS-B evaluations", res.solver.note), res.solver.note
    assert res.solver.bound == pytest.approx(4.4)
    assert res.totals["objective"] == pytest.approx(4.4)
    assert recount_violations(prob, res) == {}


def test_a_budget_at_the_per_job_limit_solves_the_master():
    _, res = _short_at(30.0)
    assert "short budget" not in res.solver.note
    assert "column generation: 0 rounds" not in res.solver.note


@PROPS
@given(inst=instances())
def test_short_budget_plans_break_no_rule_and_bound_below_the_objective(inst):
    prob, _ = inst
    res = solve_plan(prob, method="colgen", time_limit_s=30.0, mip_gap=0.0,
                     colgen_options=ColgenOptions(smooth_s_per_job=1e6))
    if res.status == PlanStatus.INFEASIBLE or not prob.jobs:
        return
    if "nothing to decide" not in res.solver.note:
        assert "short budget (30.0 s for" in res.solver.note
    assert clean(score_plan(prob, res))
    placed = [p.job_id for p in res.placements]
    assert sorted(placed + [u.job_id for u in res.unplaced]) == sorted(j.id for j in prob.jobs)
    if res.solver.bound is not None:
        assert res.solver.bound <= res.totals["objective"] + 1e-6 * max(
            1.0, abs(res.totals["objective"]))


@PROPS
@given(inst=instances(), seed=st.integers(0, 10_000), mu=st.sampled_from([1e-3, 0.01, 0.05]))
def test_single_precision_weights_leave_the_bound_exact_and_the_rest_within_their_precision(
        inst, seed, mu):
    """The ascent's single-precision weights: the exact Lagrangian (the bound) and the chosen
    options are those of double weights to the last bit. The smoothed value differs by at most
    mu x 1e-6 per class: each class's term is mu x the log of a sum of weights, and each weight
    errs by its exponent times float32's 1.2e-7, small for the weights that make up the sum
    (demands and absorption are computed in double). The gradient differs by at most 1e-5 of
    the gross use it sums (``gross_use``; an absorption entry is a difference that may cancel
    to 0, so its own size is no scale)."""
    prob, _ = inst
    sets, lay, double = _setup(prob)
    assume(bool(sets.inf_sites[lay.demands].any(axis=1).all()))
    single = sm._Evaluator(sets, lay, sm.WEIGHT_DTYPES["single"])
    assert single.weight_dtype is np.float32
    x = _random_x(double, seed, scale=0.2)
    a, b = single(x, mu, want_opts=True), double(x, mu, want_opts=True)
    assert a[1] == b[1]
    assert sorted(map(tuple, a[3].tolist())) == sorted(map(tuple, b[3].tolist()))
    assert abs(a[0] - b[0]) <= mu * 1e-6 * float(lay.mult.sum()) + 1e-12
    # and the rounding of "use less capacity" in double, a few units of the capacity's last place
    floor = 1e-12 * (1.0 + double.gross_use(np.zeros(double.n)))
    assert (np.abs(a[2] - b[2]) <= 1e-5 * double.gross_use(b[2]) + floor).all()


@pytest.mark.parametrize("dtype, mu", [(np.float32, 1e-40), (np.float32, 0.0),
                                       (np.float64, 0.0), (np.float64, -1e-3),
                                       (np.float64, float("inf")), (np.float64, float("nan"))])
def test_a_temperature_the_weights_cannot_hold_is_refused(dtype, mu):
    sets, lay, ev = _setup(two_gangs_three_gpus(), dtype)
    x = np.zeros(ev.n)
    with pytest.raises(ValueError, match=f"outside what {np.dtype(dtype).name} weights resolve"):
        ev(x, mu)
    held = 1e-30 if dtype is np.float32 else 1e-40      # 1/mu below 3.4e38 / 1.8e308
    assert np.isfinite(ev(x, held)[0])


@pytest.mark.parametrize("weights", ["double", "single"])
def test_either_precision_climbs_to_the_lp_value_with_an_exact_bound(weights):
    # two 2-GPU jobs, 3 GPUs (test_colgen_bound): the LP places 1.5 jobs, 2.6 kg
    sets, lay, _ = _setup(two_gangs_three_gpus())
    res = sm.smoothed_ascent(sets, lay, 3.0, job_cost_kg=0.4,
                             options=ColgenOptions(smooth_weights=weights))
    assert res.bound == pytest.approx(2.6, abs=2e-3) and res.bound <= 2.6 + 1e-9
    assert lagrangian(sets, lay, *multipliers(sets, lay, res.duals))[0] == pytest.approx(
        res.bound, abs=1e-12)


@pytest.mark.parametrize("weights, dtype", [(None, np.float64), ("double", np.float64),
                                            ("single", np.float32)])
def test_the_ascent_evaluates_in_the_precision_the_options_name(weights, dtype, monkeypatch):
    seen = []

    class Spy(sm._Evaluator):
        def __init__(self, sets, lay, weight_dtype=np.float64):
            seen.append(weight_dtype)
            super().__init__(sets, lay, weight_dtype)

    sets, lay, _ = _setup(two_gangs_three_gpus())
    monkeypatch.setattr(sm, "_Evaluator", Spy)
    opts = None if weights is None else ColgenOptions(smooth_weights=weights)
    sm.smoothed_ascent(sets, lay, 0.5, job_cost_kg=0.4, options=opts)
    assert seen == [dtype]


@pytest.mark.parametrize("field, value", [("smooth_mu_min_rel", 0.0),
                                          ("smooth_mu_start_rel", -1.0),
                                          ("smooth_mu_min_rel", float("inf")),
                                          ("smooth_mu_factor", 1.0), ("smooth_mu_factor", 0.0),
                                          ("smooth_weights", "half")])
def test_temperature_options_that_would_not_end_or_not_fall_are_refused(field, value):
    with pytest.raises(ValueError, match=field):
        ColgenOptions(**{field: value})
    ColgenOptions(smooth_mu_min_rel=1e-12, smooth_mu_factor=0.999)     # just inside
    ColgenOptions(smooth_mu_start_rel=1e-5, smooth_mu_min_rel=1e-5)    # one temperature


def test_a_first_temperature_below_the_last_is_refused():
    with pytest.raises(ValueError, match="no temperature would be tried"):
        ColgenOptions(smooth_mu_start_rel=1e-6, smooth_mu_min_rel=1e-5)


@PROPS
@given(inst=instances(), seed=st.integers(0, 10_000))
def test_windows_of_one_class_price_as_the_whole_grid(inst, seed):
    """The evaluation prices each window of a group's classes only over the starts they allow
    (:data:`layout.WINDOW_ROWS`): windows of one class each and one window per group give
    the same smoothed and exact values, gradient and chosen options (each class's options lie
    in its window, so nothing is priced differently)."""
    prob, _ = inst
    sets, lay, _ = _setup(prob)
    assume(bool(sets.inf_sites[lay.demands].any(axis=1).all()))
    evs = []
    for rows in (1, 10**9):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(sm, "WINDOW_ROWS", rows)
            evs.append(sm._Evaluator(sets, lay, np.float64))
    one, whole = evs
    x = _random_x(one, seed, scale=0.2)
    a, b = one(x, 0.05, want_opts=True), whole(x, 0.05, want_opts=True)
    assert a[0] == pytest.approx(b[0], rel=1e-12, abs=1e-9)
    assert a[1] == pytest.approx(b[1], rel=1e-12, abs=1e-9)
    np.testing.assert_allclose(a[2], b[2], rtol=1e-12, atol=1e-9)
    assert sorted(map(tuple, a[3].tolist())) == sorted(map(tuple, b[3].tolist()))


@PROPS
@given(inst=instances(), seed=st.integers(0, 10_000))
def test_pricing_in_windows_of_one_class_is_pricing_on_the_whole_grid(inst, seed):
    """:func:`pricing.price` prices windows of classes over the starts they allow: windows of
    one class and one window per group give the same reduced costs, sites and starts."""
    from carbonsched.plan.colgen import pricing

    prob, _ = inst
    sets, lay, _ = _setup(prob)
    duals = -np.abs(np.random.default_rng(seed).normal(size=lay.n_rows)) * 0.1
    got = {}
    for rows in (1, 10**9):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(pricing, "WINDOW_ROWS", rows)
            for k in (1, 2):
                got[rows, k] = pricing.price(sets, lay, duals, lay.reps, k=k, chunk=10**9)
    for k in (1, 2):
        rc1, rc2 = got[1, k][0], got[10**9, k][0]
        np.testing.assert_array_equal(np.isfinite(rc1), np.isfinite(rc2))
        fin = np.isfinite(rc1)
        np.testing.assert_allclose(rc1[fin], rc2[fin], rtol=1e-12, atol=1e-12)
    # the best option: the first of equal ones in (site, start) order on both
    (rc1, s1, t1), (_, s2, t2) = got[1, 1], got[10**9, 1]
    fin = np.isfinite(rc1)
    assert (s1[fin] == s2[fin]).all() and (t1[fin] == t2[fin]).all()
    # every option priced is one the class may take
    ok = np.isfinite(rc1[:, 0])
    j = lay.reps[ok]
    assert (sets.job_first[j] <= t1[ok, 0]).all() and (t1[ok, 0] <= sets.job_last[j]).all()
    assert sets.job_sites[j, s1[ok, 0]].all()


def test_the_short_path_budget_grows_with_the_slots_past_48():
    """The per-job budget was measured on 48 hourly slots: a 96-slot grid (a 72 h rolling step
    with its tail) needs twice the budget before a master LP is tried; 48 slots or fewer, the
    per-job budget itself (just-at-the-limit: 48)."""
    from types import SimpleNamespace

    from carbonsched.plan.colgen.budget import short_path_s

    opt = ColgenOptions(smooth_s_per_job=3e-3)
    for slots, want in ((3, 30.0), (48, 30.0), (49, 30.0 * 49 / 48), (96, 60.0), (384, 240.0)):
        sets = SimpleNamespace(placeable=np.arange(10_000), pue=np.ones((16, slots)))
        assert short_path_s(sets, opt) == pytest.approx(want, rel=1e-12), slots


def _fleet_sets():
    from .test_colgen_monotone import loaded_fleet

    return _setup(loaded_fleet())[:2]


def test_the_ascent_keeps_earlier_best_iterates_newest_first_below_its_bound():
    sets, lay = _fleet_sets()
    opts = ColgenOptions(smooth_draws=2, smooth_draw_every=1)
    res = sm.smoothed_ascent(sets, lay, 30.0, job_cost_kg=1.0, options=opts)
    assert len(res.earlier) == 2
    values = [lagrangian(sets, lay, *multipliers(sets, lay, d))[0] for d in res.earlier]
    # best-so-far snapshots: each below the final bound, the newest the highest
    assert values[0] >= values[1]
    assert all(v < res.bound for v in values)
    # a snapshot every evaluation: the newest one is the best iterate before the final one
    assert res.evaluations > 2


def test_the_ascent_marks_its_best_iterate_at_doubling_evaluations():
    # every improving best iterate kept (draws every evaluation, no cap): the marks are the
    # ones at evaluations 1, 2, 4, 8, ... among them, newest first, below the final bound
    sets, lay = _fleet_sets()
    opts = ColgenOptions(smooth_draws=100_000, smooth_draw_every=1)
    res = sm.smoothed_ascent(sets, lay, 30.0, job_cost_kg=1.0, options=opts)
    assert res.evaluations >= 8
    assert 2 <= len(res.marks) <= int(np.log2(res.evaluations)) + 1
    values = [lagrangian(sets, lay, *multipliers(sets, lay, d))[0] for d in res.marks]
    assert values == sorted(values, reverse=True) and all(v < res.bound for v in values)
    for d in res.marks:
        assert any(np.array_equal(d, e) for e in res.earlier)
    # fewer than the every-evaluation snapshots: the doubling schedule, not each one
    assert len(res.marks) < len(res.earlier)
    capped = sm.smoothed_ascent(sets, lay, 30.0, job_cost_kg=1.0,
                                options=ColgenOptions(smooth_draws=1, smooth_draw_every=1))
    assert len(capped.marks) == 1      # the newest mark only
    off = sm.smoothed_ascent(sets, lay, 30.0, job_cost_kg=1.0,
                             options=ColgenOptions(smooth_draw_every=1,
                                                   smooth_marks_alone=False))
    assert off.marks == []


@pytest.mark.parametrize("draws", [0, 1])
def test_draws_are_capped_by_the_option(draws):
    sets, lay = _fleet_sets()
    opts = ColgenOptions(smooth_draws=draws, smooth_draw_every=1)
    res = sm.smoothed_ascent(sets, lay, 30.0, job_cost_kg=1.0, options=opts)
    assert len(res.earlier) == draws


def _best_by_hand(st, draws) -> float:
    """The least priced greedy objective over ``draws`` (row duals), computed here. [kg]"""
    from carbonsched.plan.baselines import priced_greedy
    from carbonsched.plan.colgen.grid import kw_slot_cost

    best = np.inf
    for duals in draws:
        lam_c, lam_p, lam_a = multipliers(st.sets, st.lay, duals)
        plan = priced_greedy(st.sets, kw_slot_cost(st.sets) + lam_p - st.sets.pue * lam_a,
                             lam_c, order=st.lff)
        best = min(best, plan.totals["objective"])
    return best


def test_the_short_path_prices_a_plan_on_each_earlier_iterate_and_keeps_the_best(monkeypatch):
    from carbonsched.plan.colgen import driver

    from .test_colgen_monotone import LIMIT_S, _opts, loaded_fleet

    label = "priced greedy on an earlier smoothed-dual iterate"
    seen = []
    real = driver._run_path

    def spy(st):
        res = real(st)
        seen.append(st)
        return res

    monkeypatch.setattr(driver, "_run_path", spy)
    prob = loaded_fleet()
    # a staged solve: the short path first (no master LP), then the master-LP path; no
    # warm-up, so the smoothed dual's multipliers price the plan however few evaluations a
    # loaded machine allows, and no time kept for the finish, so every draw fits (a priced
    # greedy of these 60 jobs takes milliseconds)
    opts = dict(smooth_draw_every=2, warmup_share=0.0, finish_s=0.0, finish_plain_s=0.0)
    res = solve_plan(prob, method="colgen", time_limit_s=LIMIT_S, mip_gap=0.0,
                     colgen_options=_opts(**opts))
    st, st2 = seen
    assert st.no_master and st.force_short and st.priced_by == "smoothed dual"
    assert not any(n == label for n, _ in st2.cands)   # the master path has its own duals
    assert 1 <= len(st.earlier_duals) <= ColgenOptions().smooth_draws
    found = [r for n, r in st.cands if n == label]
    assert len(found) == 1, [n for n, _ in st.cands]
    assert found[0].totals["objective"] == pytest.approx(_best_by_hand(st, st.earlier_duals),
                                                         rel=1e-12)
    assert recount_violations(prob, found[0]) == {}
    assert res.totals["objective"] <= found[0].totals["objective"] + 1e-9
    assert label in res.solver.note
    seen.clear()
    res = solve_plan(prob, method="colgen", time_limit_s=LIMIT_S, mip_gap=0.0,
                     colgen_options=_opts(**opts, smooth_draws=0))
    assert seen[0].earlier_duals == [] and label not in res.solver.note
    # under the short budget (3 s) the short path runs alone: it prices its doubling marks,
    # not its recent iterates, and with the marks off neither
    seen.clear()
    res = solve_plan(prob, method="colgen", time_limit_s=2.9, mip_gap=0.0,
                     colgen_options=_opts(**opts))
    (alone,) = seen
    assert alone.no_master and not alone.force_short and alone.earlier_duals
    assert alone.marked_duals and label in res.solver.note
    found = [r for n, r in alone.cands if n == label]
    assert len(found) == 1
    assert found[0].totals["objective"] == pytest.approx(
        _best_by_hand(alone, alone.marked_duals), rel=1e-12)
    # priced after the one-slot repack, which starts from the last iterate's plan
    names = [n for n, _ in alone.cands]
    assert names.index(label) > names.index("priced greedy")
    # (the repack itself: a plan the moves make from it later, when time allows, is after)
    assert all(names.index(n) < names.index(label) for n in names
               if n.endswith(" + one-slot repack"))
    seen.clear()
    res = solve_plan(prob, method="colgen", time_limit_s=2.9, mip_gap=0.0,
                     colgen_options=_opts(**opts, smooth_marks_alone=False))
    (alone,) = seen
    assert alone.marked_duals == [] and label not in res.solver.note


def test_with_repack_more_each_earlier_iterates_plan_is_a_candidate_of_both_paths(monkeypatch):
    # CARBONSCHED_CG_REPACK_MORE: the short path keeps every earlier iterate's priced greedy
    # plan, not only the best, and the master-LP path gets each as a start of its repacks
    from carbonsched.plan.colgen import driver

    from .test_colgen_monotone import LIMIT_S, _opts, loaded_fleet

    label = "priced greedy on an earlier smoothed-dual iterate"
    seen = []
    real = driver._run_path

    def spy(st):
        res = real(st)
        seen.append(st)
        return res

    monkeypatch.setattr(driver, "_run_path", spy)
    prob = loaded_fleet()
    opts = dict(smooth_draw_every=2, warmup_share=0.0, finish_s=0.0, finish_plain_s=0.0,
                repack_more=3)
    res = solve_plan(prob, method="colgen", time_limit_s=LIMIT_S, mip_gap=0.0,
                     colgen_options=_opts(**opts))
    st, st2 = seen
    assert st.no_master and st.force_short
    n = len(st.earlier_duals)
    assert n >= 1
    found = [(name, r) for name, r in st.cands if name.startswith(label)]
    # newest first, each while one more fits the time left (all of them, unless loaded)
    assert found and [name for name, _ in found] == [f"{label} ({k} of {n})"
                                                     for k in range(1, len(found) + 1)]
    for (_, plan), duals in zip(found, st.earlier_duals[:len(found)], strict=True):
        assert plan.totals["objective"] == pytest.approx(_best_by_hand(st, [duals]),
                                                         rel=1e-12)
        assert recount_violations(prob, plan) == {}
    # every short-path plan but its own and the carbon greedy is in the master-LP path
    carried = {name.removeprefix("short path: ") for name, _ in st2.cands
               if name.startswith("short path: ")}
    assert {name for name, _ in found} <= carried
    assert res.totals["objective"] <= min(r.totals["objective"] for _, r in found) + 1e-9
