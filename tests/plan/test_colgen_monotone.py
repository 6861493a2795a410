"""The planner is monotone in its time limit (issue 36, item 0).

Measured before: 10k jobs × 16 sites × 48 h at load 0.3, seed 1: 0.26 % at ``--time-limit 20``
(the short path: smoothed dual, no master LP) but 2.64 % at the default 60 s (the master-LP
path). A limit at or above the short path's now runs the short path first and keeps its plan
and bound, then the master-LP path in the rest: the result is structurally never worse than
the short path's, in objective or bound. These tests assert that structure (the second path
holds the first path's plan and bound), not timings.
"""

from __future__ import annotations

import numpy as np
import pytest

from carbonsched.plan import PlanStatus, score_plan, solve_plan
from carbonsched.plan.colgen import ColgenOptions, driver
from carbonsched.plan.result import recount_violations

from .builders import JobWrapper, SiteWrapper, problem
from .test_properties import clean

HOURS = 12
# 0.05 s per job: the short path's budget is 3 s for these 60 jobs, a 9 s limit is above it
PER_JOB_S = 0.05
LIMIT_S = 9.0


def loaded_fleet(n_jobs: int = 60, seed: int = 3):
    """Four sites, two GPU types, power caps that bind: 60 jobs of 1-4 GPUs over 12 h."""
    rng = np.random.default_rng(seed)
    sites = [SiteWrapper(s).gpus("H100", 6).gpus("A100", 4).cap_kw(4.0).obj()
             for s in ("a", "b", "c", "d")]
    jobs = []
    for k in range(n_jobs):
        dur = int(rng.integers(1, 5))
        earliest = int(rng.integers(0, HOURS - dur))
        deadline = int(rng.integers(earliest + dur, HOURS + 1))
        jobs.append(JobWrapper(f"j{k}").gpu_type("H100" if k % 3 else "A100")
                    .gpus(int(rng.integers(1, 5))).hours(dur).window(earliest, deadline)
                    .kw_per_gpu(float(rng.uniform(0.3, 0.7))).obj())
    ci = {s: list(rng.uniform(50, 500, HOURS)) for s in ("a", "b", "c", "d")}
    return problem(sites, jobs, HOURS, ci=ci)


def _opts(**kw) -> ColgenOptions:
    base = dict(smooth_s_per_job=PER_JOB_S)
    base.update(kw)
    return ColgenOptions(**base)


def _staged_solve():
    """The loaded fleet solved at ``LIMIT_S``: the short path first, then the master-LP path."""
    prob = loaded_fleet()
    return prob, solve_plan(prob, method="colgen", time_limit_s=LIMIT_S, mip_gap=0.0,
                            colgen_options=_opts())


@pytest.fixture
def paths(monkeypatch):
    """Each path run by column generation: (short?, its plan's objective, the record's bound)."""
    seen = []
    real = driver._run_path

    def spy(st):
        res = real(st)
        seen.append((st.short, res.totals["objective"], st.rec.bound))
        return res

    monkeypatch.setattr(driver, "_run_path", spy)
    return seen


def test_a_long_limit_runs_the_short_path_first_and_keeps_its_plan_and_bound(paths):
    prob = loaded_fleet()
    res = solve_plan(prob, method="colgen", time_limit_s=LIMIT_S, mip_gap=0.0,
                     colgen_options=_opts())
    # without the short path first there is one path, the master-LP one; 60 jobs: no job
    # threshold (before, the master-LP path ran alone below 2,000 jobs, and on the rolling
    # warm-start instances its 15 s plan was worse than the short path's 7.5 s one on 5 of 5
    # seeds, BENCHMARKS.md section 16)
    assert [short for short, _, _ in paths] == [True, False], res.solver.note
    (_, obj_short, bound_short), _ = paths
    assert bound_short is not None
    assert res.totals["objective"] <= obj_short + 1e-9
    assert res.solver.bound >= bound_short - 1e-9
    assert res.solver.bound <= res.totals["objective"] + 1e-6 * abs(res.totals["objective"])
    note = res.solver.note
    assert "the short path (smoothed dual, no master LP) ran first in" in note
    assert f"plan {obj_short:.3f} kg from" in note
    assert ("plan from the short path" in note) != ("plan from the master-LP path" in note)
    assert res.status in (PlanStatus.OPTIMAL, PlanStatus.FEASIBLE)
    # the plan returned is recounted from scratch and breaks no rule
    assert recount_violations(prob, res) == {}
    assert clean(score_plan(prob, res))


def test_a_limit_under_the_short_budget_runs_the_short_path_alone(paths):
    res = solve_plan(loaded_fleet(), method="colgen", time_limit_s=2.9, mip_gap=0.0,
                     colgen_options=_opts())
    assert [short for short, _, _ in paths] == [True]
    assert "ran first" not in res.solver.note


def test_at_the_short_budget_the_short_path_runs_first(paths):
    # a limit just at the short path's budget (60 jobs x 0.05 s) is no longer short: the
    # short path runs first, in half of it
    res = solve_plan(loaded_fleet(), method="colgen", time_limit_s=60 * PER_JOB_S,
                     mip_gap=0.0, colgen_options=_opts())
    assert [short for short, _, _ in paths][0] is True
    assert "the short path (smoothed dual, no master LP) ran first in" in res.solver.note


def test_a_short_path_proven_optimal_is_returned_without_the_master_path(paths):
    """Nothing is left to prove: the master-LP path is not started (2 jobs, bound = plan)."""
    from .test_colgen_bound import two_gangs_three_gpus

    prob = two_gangs_three_gpus()
    res = solve_plan(prob, method="colgen", time_limit_s=60.0, mip_gap=0.0,
                     colgen_options=ColgenOptions(smooth_s_per_job=30.0, warmup_share=0.0,
                                                  short_first_passes=True))
    assert [short for short, _, _ in paths] == [True], res.solver.note
    assert "proven optimal: the master-LP path is not started" in res.solver.note
    assert res.solver.bound == pytest.approx(res.totals["objective"])
    assert res.status == PlanStatus.OPTIMAL
    assert recount_violations(prob, res) == {}


def test_gap_at_the_long_limit_is_no_worse_than_at_the_short_one():
    prob = loaded_fleet()
    short = solve_plan(prob, method="colgen", time_limit_s=2.5, mip_gap=0.0,
                       colgen_options=_opts())
    long = solve_plan(prob, method="colgen", time_limit_s=LIMIT_S, mip_gap=0.0,
                      colgen_options=_opts())
    # generous margin: the short path inside the long solve had 3 s, not 2.5 s
    assert long.solver.mip_gap <= short.solver.mip_gap + 0.01
    assert long.solver.bound >= short.solver.bound - 0.01 * abs(short.totals["objective"])


def test_too_little_left_after_the_short_path_returns_its_plan_and_says_so(paths):
    # a tail of 0.1 s per job is 6 s here: twice it is more than the 9 s limit less the short
    # path's time, so the master-LP path is not started
    prob = loaded_fleet()
    res = solve_plan(prob, method="colgen", time_limit_s=LIMIT_S, mip_gap=0.0,
                     colgen_options=_opts(tail_s_per_job=0.1))
    assert [short for short, _, _ in paths] == [True]
    assert "too little for the master-LP path: the short path's plan is returned" \
        in res.solver.note
    assert res.totals["objective"] == pytest.approx(paths[0][1])
    assert recount_violations(prob, res) == {}


def test_the_second_master_starts_from_the_short_paths_plan_and_smoothed_options(monkeypatch):
    """Not the warm-up's visited options: at 72 slots that master did not solve in its time."""
    seeds = []
    real_build = driver.build_master

    def spy_build(st):
        seeds.append((st.short, np.unique(np.concatenate(st.seeds), axis=0), st))
        real_build(st)

    monkeypatch.setattr(driver, "build_master", spy_build)
    prob, res = _staged_solve()
    assert [short for short, _, _ in seeds] == [True, False], res.solver.note
    (_, first, st1), (_, second, _) = seeds
    assert st1.short_pool is not None and len(st1.short_pool)
    as_set = {tuple(r) for r in second.tolist()}
    # fewer columns than the short path's seeds, and every one of the kinds the fix names
    assert len(second) < len(first)
    assert {tuple(r) for r in st1.short_pool.tolist()} <= as_set
    assert f"its first master over {len(second)} columns" in res.solver.note
    # the short path's plan is among them: every placement's (representative, site, start)
    from carbonsched.plan.colgen.classes import plan_options

    short_plan = next(r for n, r in st1.cands if n == st1.best()[0])
    assert {tuple(r) for r in plan_options(st1.sets, st1.cls, short_plan).tolist()} <= as_set
    assert recount_violations(prob, res) == {}


@pytest.mark.parametrize("passes", [False, True])
def test_the_staged_short_path_leaves_its_passes_to_the_master_path(monkeypatch, passes):
    # by default the short path of a staged solve stops after its plan and repack, and only the
    # master-LP path runs the passes and moves (the 6-8 s they took go to its master: 10k x 16 x
    # 72 at load 0.8, worst seed 2.02 -> 1.32 %, BENCHMARKS.md section 3); short_first_passes
    # runs them in both
    ran = []
    real = driver.run_passes

    def spy(st):
        ran.append(st.force_short)
        return real(st)

    monkeypatch.setattr(driver, "run_passes", spy)
    prob = loaded_fleet()
    res = solve_plan(prob, method="colgen", time_limit_s=LIMIT_S, mip_gap=0.0,
                     colgen_options=_opts(short_first_passes=passes))
    assert "the short path (smoothed dual, no master LP) ran first in" in res.solver.note
    assert ran == ([True, False] if passes else [False]), res.solver.note
    assert recount_violations(prob, res) == {}


def test_the_master_path_repacks_the_best_plan_the_short_path_did_not_repack(monkeypatch):
    """In a staged solve the master-LP path's one-slot repack starts from the best plan the
    short path's repack neither started from nor produced (repacking that again gained
    nothing in 62 of 62 staged solves of the 10k-job matrix)."""
    from carbonsched.plan.colgen.incumbents import REPACKED, plan_key

    calls = []
    real = driver.repack

    def spy(st):
        before = list(st.cands)
        real(st)
        calls.append((st.force_short, before, st.cands[len(before):]))

    monkeypatch.setattr(driver, "repack", spy)
    prob, res = _staged_solve()
    assert [short for short, _, _ in calls] == [True, False], res.solver.note
    (_, before1, made1), (_, before2, made2) = calls
    assert len(made1) == 1 and len(made2) == 1, res.solver.note

    def objective(c):
        return c[1].totals["objective"]

    # the short path repacks its best plan
    start1 = next(c for c in before1 if c[0] == made1[0][0].removesuffix(REPACKED))
    assert objective(start1) == min(objective(c) for c in before1)
    done = {plan_key(start1[1]), plan_key(made1[0][1])}
    # the master-LP path holds the short path's best plan other than its own and those
    short_plan = next(r for n, r in before2 if n.startswith(f"{driver.SHORT_PATH}: "))
    runner_up = min((c for c in before1 if plan_key(c[1]) not in done | {plan_key(short_plan)}),
                    key=objective)
    assert any(n == f"{driver.SHORT_PATH}: {runner_up[0]}" for n, _ in before2)
    # it repacks the best plan not in ``done`` (the short path's next best or one of its
    # own), never one of those again; the note names the start when the best is in ``done``
    # (the common case; which plan is best depends on where the short path's ascent stops)
    start2 = next(c for c in before2 if c[0] == made2[0][0].removesuffix(REPACKED))
    assert plan_key(start2[1]) not in done
    assert objective(start2) == min(objective(c) for c in before2
                                    if plan_key(c[1]) not in done)
    best2 = min(before2, key=objective)
    said = f"one-slot repack from {start2[0]} ({objective(start2):.3f} kg), the best plan not"
    assert (said in res.solver.note) == (plan_key(best2[1]) in done), res.solver.note
    assert recount_violations(prob, res) == {}
    assert clean(score_plan(prob, res))
