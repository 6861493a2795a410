"""Fractional GPUs in the planner: MIG layouts, milli shares and their recount (issue 37).

Each rule has a known-bad case and one just at its limit; planner tests assert the real
placements (which GPU, which MIG start) and check them against the layout rules directly,
not only through :func:`score_plan`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from carbonsched.domain import Placement
from carbonsched.plan import PlanResult, PlanStatus, SolverRecord, score_plan, solve_plan
from carbonsched.plan.result import site_hour_power
from carbonsched.plan.slices import (
    MIG_PLACEMENTS,
    mig_fits,
    mig_layout_valid,
    mig_layouts,
    milli_kinds,
    milli_layouts,
)

from .builders import JobWrapper, SiteWrapper, at, problem

H = pd.Timedelta(hours=1)
A40 = "A100-40GB"


# ------------------------------------------------------------------------------ MIG layouts

@pytest.mark.parametrize("counts", [
    {"1g.5gb": 7},                                   # seven compute slices, seven starts
    {"4g.20gb": 1, "3g.20gb": 1},                    # 4g at 0, 3g at 4
    {"3g.20gb": 2},
    {"2g.10gb": 3, "1g.5gb": 1},                     # 2g at 0, 2, 4; 1g.5gb at 6
    {"1g.10gb": 4},                                  # 1g.10gb at 0, 2, 4, 6
    {"2g.10gb": 3, "1g.10gb": 1},                    # 2g at 0, 2, 4; 1g.10gb at 6-7
    {"7g.40gb": 1},
    {"1g.5gb+me": 1, "1g.5gb": 6},
])
def test_a_just_valid_mig_layout_is_accepted(counts):
    assert mig_layout_valid(A40, counts)


@pytest.mark.parametrize("counts", [
    {"1g.5gb": 8},                 # no eighth start for 1g.5gb
    {"4g.20gb": 2},                # 4g.20gb only at memory slice 0
    {"3g.20gb": 2, "1g.5gb": 1},   # 3 + 3 + 1 = 7 compute, but no memory slice left
    {"7g.40gb": 1, "1g.5gb": 1},
    {"1g.5gb+me": 2},              # media extensions go to one instance
    {"2g.10gb": 4},                # 2g.10gb starts at 0, 2 or 4 only
    {"4g.20gb": 1, "2g.10gb": 2},  # compute 8 > 7
])
def test_a_known_invalid_mig_layout_is_refused(counts):
    assert not mig_layout_valid(A40, counts)


def test_mig_placements_are_checked_start_by_start():
    assert mig_fits(A40, [("4g.20gb", 0), ("3g.20gb", 4)]) == []
    assert mig_fits(A40, [("1g.5gb", 6)]) == []
    assert mig_fits(A40, [("1g.5gb", 7)]) == [
        "1g.5gb cannot start at memory slice 7 on A100-40GB (valid starts [0, 1, 2, 3, 4, 5, 6])"]
    assert mig_fits(A40, [("3g.20gb", 0), ("2g.10gb", 2)]) == [
        "2g.10gb@2 overlaps memory slice 2"]
    assert mig_fits("A30", [("2g.12gb", 0), ("2g.12gb", 2)]) == []
    assert mig_fits("A30", [("2g.12gb", 0), ("2g.12gb", 2), ("1g.6gb", 3)]) != []


def test_every_mig_model_has_placements_for_each_profile():
    from carbonsched.domain import MIG_PROFILES

    for model, profiles in MIG_PROFILES.items():
        assert set(MIG_PLACEMENTS[model]) == set(profiles)
    assert mig_layouts(A40, ("1g.5gb", "3g.20gb")) == ((7, 0), (4, 1), (0, 2))


def test_milli_layouts_never_hold_more_than_1000():
    sizes = (160, 320, 470, 810)
    lays = milli_layouts(sizes)
    assert lays and all(sum(n * s for n, s in zip(v, sizes, strict=True)) <= 1000 for v in lays)
    assert (0, 3, 0, 0) in lays          # 3 × 320 = 960: just under the limit
    assert (0, 0, 2, 0) in lays          # 2 × 470 = 940
    assert (1, 0, 0, 1) in lays          # 160 + 810 = 970
    assert milli_layouts((500,)) == ((2,),)     # exactly 1000
    assert milli_layouts((501,)) == ((1,),)


def test_many_milli_sizes_are_rounded_up_never_down():
    milli = np.arange(50, 1000, 7)
    k, sizes, step = milli_kinds(milli)
    assert step > 1 and (k >= milli).all() and (k - milli < step).all()
    assert len(milli_layouts(sizes)) <= 400


# ------------------------------------------------------------------------------ the planner

def mig_site(n: int = 1, cap: float = 1e9):
    return SiteWrapper("a").gpus("A100", n, sharing="mig", mig_model=A40).cap_kw(cap).obj()


def milli_site(n: int = 1, cap: float = 1e9, shares_per_gpu: int = 1000):
    """A time-slicing pool; 1000 shares per GPU books ``gpu_milli`` exactly (the packing
    tests' sizes), the catalog default of 10 rounds up to tenths (a test below)."""
    return SiteWrapper("b").gpus("A100", n, sharing="milli",
                                 shares_per_gpu=shares_per_gpu).cap_kw(cap).obj()


def frac(job_id: str, hours: int = 1, window=(0, 1), mig: str | None = None,
         milli: int | None = None, kw: float = 1.0):
    j = JobWrapper(job_id).gpu_type("A100").hours(hours).window(*window).kw_per_gpu(kw)
    return (j.mig(mig) if mig else j.milli(milli)).obj()


def by_gpu_hour(res) -> dict[tuple, list]:
    out: dict[tuple, list] = {}
    for p in res.placements:
        if p.gpu_index is None:
            continue
        for h in range(int((p.end - p.start) / H)):
            out.setdefault((p.site, p.start + h * H, p.gpu_index), []).append(p)
    return out


def test_seven_mig_slices_share_one_gpu_where_rounding_placed_one():
    prob = problem([mig_site(1)], [frac(f"n{i}", mig="1g.5gb") for i in range(7)], 2)
    res = solve_plan(prob, method="milp")
    assert len(res.placements) == 7 and not res.unplaced
    assert sorted(p.mig_start for p in res.placements) == list(range(7))
    assert {p.gpu_index for p in res.placements} == {0}
    assert score_plan(prob, res).slice_violations == 0


def test_a_layout_that_sums_to_the_gpus_but_has_no_valid_placement_leaves_work_out():
    # compute: 4 × 3 + 2 × 1 = 14 = 2 GPUs × 7, yet two GPUs hold 3g+3g and 3g+3g (12/7 of a
    # GPU's work) or 3g+3g and 3g+4×1g (11/7): the two 1g.5gb stay out, the most work placed
    jobs = [frac(f"big{i}", mig="3g.20gb") for i in range(4)]
    jobs += [frac(f"small{i}", mig="1g.5gb") for i in range(2)]
    prob = problem([mig_site(2)], jobs, 2)
    res = solve_plan(prob, method="milp")
    assert sorted(u.job_id for u in res.unplaced) == ["small0", "small1"]
    assert sorted((p.gpu_index, p.mig_start) for p in res.placements) == [
        (0, 0), (0, 4), (1, 0), (1, 4)]
    for (_site, _h, _g), ps in by_gpu_hour(res).items():
        assert mig_fits(A40, [("3g.20gb", p_.mig_start) for p_ in ps]) == []
    assert score_plan(prob, res).slice_violations == 0


def test_a_fractional_job_never_puts_a_gpu_over_1000_milli():
    rng = np.random.default_rng(7)
    sizes = [810, 470, 320, 160, 650, 230, 460, 590]
    jobs = [frac(f"p{i}", hours=int(rng.integers(1, 4)), window=(0, 8),
                 milli=int(rng.choice(sizes))) for i in range(24)]
    prob = problem([milli_site(4)], jobs, 8)
    res = solve_plan(prob, method="milp")
    cells = by_gpu_hour(res)
    assert cells
    milli = {p.job_id: j.payload.gpu_milli for j in prob.jobs for p in res.placements
             if p.job_id == j.id}
    assert max(sum(milli[p.job_id] for p in ps) for ps in cells.values()) <= 1000
    assert all(0 <= gi < 4 for (_s, _h, gi) in cells)
    sc = score_plan(prob, res)
    assert sc.slice_violations == sc.capacity_violations == 0


def test_milli_shares_pack_to_the_limit_and_no_further():
    # one GPU, one hour: 600 + 400 = 1000 fit, the 500 does not (and leaving out the
    # smaller share costs less: the plan places the most GPU work)
    prob = problem([milli_site(1)], [frac("a", milli=600), frac("b", milli=400),
                                     frac("c", milli=500)], 1)
    res = solve_plan(prob, method="milp")
    assert sorted(p.job_id for p in res.placements) == ["a", "b"]
    assert [u.job_id for u in res.unplaced] == ["c"]


def test_whole_gpu_jobs_and_slices_share_the_pool():
    whole = JobWrapper("w").gpu_type("A100").gpus(1).window(0, 1).obj()
    prob = problem([milli_site(2)], [whole, frac("a", milli=600), frac("b", milli=400),
                                     frac("c", milli=500)], 1)
    res = solve_plan(prob, method="milp")
    assert sorted(p.job_id for p in res.placements) == ["a", "b", "w"]
    w = next(p for p in res.placements if p.job_id == "w")
    assert w.gpu_index is None and w.gpus == 1


def test_a_fractional_job_draws_its_share_of_the_gpus_power():
    # 1 kW cap, 1 kW per GPU: four quarter-GPU jobs fit in one hour (0.25 kW each)
    prob = problem([milli_site(4, cap=1.0)], [frac(f"q{i}", milli=250) for i in range(5)], 1)
    res = solve_plan(prob, method="milp")
    assert len(res.placements) == 4
    assert res.placements[0].energy_kwh == pytest.approx(0.25)
    rows = site_hour_power(prob, res)
    assert rows[0]["it_power_kw"] == pytest.approx(1.0)
    assert rows[0]["sliced_gpus"] == 1 and rows[0]["slices_used"] == {"gpu_milli": 1000}
    assert rows[0]["stranded_gpus"] == 0.0


def test_a_milli_share_is_booked_as_its_whole_shares():
    # 10 shares per GPU: 250 milli is booked as 300, so three share one GPU and a fourth
    # takes another (before, four were packed on one GPU and dispatch asked 12 of 10 shards)
    prob = problem([milli_site(4, shares_per_gpu=10)],
                   [frac(f"q{i}", milli=250) for i in range(4)], 1)
    res = solve_plan(prob, method="milp")
    assert len(res.placements) == 4 and score_plan(prob, res).slice_violations == 0
    rows = site_hour_power(prob, res)
    assert rows[0]["sliced_gpus"] == 2 and rows[0]["slices_used"] == {"gpu_milli": 1200}
    # energy stays the job's own share (250 milli of a 1 kW GPU), not the booked 300
    assert res.placements[0].energy_kwh == pytest.approx(0.25)


def test_site_hours_show_stranded_capacity_of_a_fractional_job_on_a_whole_gpu():
    site = SiteWrapper("c").gpus("A100", 1).obj()          # no sharing: a whole GPU
    prob = problem([site], [frac("x", milli=250)], 1)
    res = solve_plan(prob, method="milp")
    assert res.placements[0].gpu_index is None
    row = site_hour_power(prob, res)[0]
    assert row["stranded_gpus"] == pytest.approx(0.75) and row["sliced_gpus"] == 0


def test_colgen_packs_fractional_jobs_after_the_solve_and_says_so():
    jobs = [frac(f"n{i}", hours=2, window=(0, 6), mig="1g.5gb") for i in range(9)]
    prob = problem([mig_site(2)], jobs, 6)
    res = solve_plan(prob, method="colgen")
    assert "as whole GPUs" in res.solver.note
    assert score_plan(prob, res).slice_violations == 0
    assert all(p.gpu_index is not None for p in res.placements)


def test_column_generation_claims_no_bound_over_whole_gpus_for_fractional_jobs():
    # one shared GPU holds four quarter-GPU jobs; planned as whole GPUs only one fits, so a
    # bound over whole GPUs (0.775 kg) lies above the optimum with slices (0.1 kg)
    prob = problem([milli_site(1)], [frac(f"q{i}", milli=250) for i in range(4)], 1)
    best = solve_plan(prob, method="milp")
    assert len(best.placements) == 4 and best.solver.status == PlanStatus.OPTIMAL
    res = solve_plan(prob, method="colgen")
    assert res.solver.bound is None and res.solver.mip_gap is None
    assert res.status == PlanStatus.FEASIBLE and "no bound reported" in res.solver.note
    assert score_plan(prob, res).slice_violations == 0
    auto = solve_plan(prob, method="auto")     # the direct MILP proves it
    assert auto.totals["objective"] == pytest.approx(best.totals["objective"])


# ------------------------------------------------------------------------------ the recount

def slice_at(job_id: str, site: str, gpu_index: int | None, mig_start: int | None = None,
             hour: int = 0) -> Placement:
    return Placement(job_id=job_id, site=site, start=at(hour), end=at(hour) + H,
                     gpu_type="A100", gpus=1, energy_kwh=0.0, emissions_kg=0.0,
                     gpu_index=gpu_index, mig_start=mig_start)


def plan(placements) -> PlanResult:
    return PlanResult(status=PlanStatus.FEASIBLE,
                      solver=SolverRecord(name="test", status=PlanStatus.FEASIBLE),
                      placements=list(placements))


def test_the_recount_refuses_milli_over_1000_on_one_gpu_and_accepts_1000():
    prob = problem([milli_site(2)], [frac("a", milli=600), frac("b", milli=400),
                                     frac("c", milli=500)], 1)
    at_limit = plan([slice_at("a", "b", 0), slice_at("b", "b", 0), slice_at("c", "b", 1)])
    sc = score_plan(prob, at_limit)
    assert (sc.slice_violations, sc.capacity_violations) == (0, 0)
    over = plan([slice_at("a", "b", 0), slice_at("b", "b", 1), slice_at("c", "b", 0)])
    assert score_plan(prob, over).slice_violations == 1


def test_the_recount_refuses_a_known_invalid_mig_layout():
    jobs = [frac("x", mig="3g.20gb"), frac("y", mig="3g.20gb"), frac("z", mig="1g.5gb")]
    prob = problem([mig_site(2)], jobs, 1)
    valid = plan([slice_at("x", "a", 0, 0), slice_at("y", "a", 0, 4), slice_at("z", "a", 1, 6)])
    assert score_plan(prob, valid).slice_violations == 0
    # 3g + 3g + 1g: 7 compute slices, but the 1g.5gb overlaps the second 3g.20gb
    bad = plan([slice_at("x", "a", 0, 0), slice_at("y", "a", 0, 4), slice_at("z", "a", 0, 6)])
    assert score_plan(prob, bad).slice_violations == 1
    off_grid = plan([slice_at("x", "a", 0, 2)])            # 3g.20gb starts at 0 or 4 only
    assert score_plan(prob, off_grid).slice_violations == 1


def test_the_recount_counts_gpus_carrying_slices_against_the_pool():
    whole = JobWrapper("w").gpu_type("A100").gpus(2).window(0, 1).obj()
    prob = problem([milli_site(2)], [whole, frac("a", milli=100)], 1)
    w = Placement(job_id="w", site="b", start=at(0), end=at(1), gpu_type="A100", gpus=2,
                  energy_kwh=0.0, emissions_kg=0.0)
    sc = score_plan(prob, plan([w, slice_at("a", "b", 0)]))
    assert (sc.capacity_violations, sc.slice_violations) == (1, 0)
    outside = score_plan(prob, plan([slice_at("a", "b", 2)]))
    assert outside.slice_violations == 1            # GPU 2 of a 2-GPU pool


def test_a_gang_whole_gpus_and_slices_share_a_mig_pool_hour_by_hour():
    # 16 A100 on 8-GPU nodes: a gang of 8, seven one-GPU jobs and eight 1g.5gb slices in one
    # hour need 8 + 7 + 2 = 17 GPUs; leaving one 1g.5gb out (1/7 of a GPU-hour) makes 16
    site = SiteWrapper("a").gpus("A100", 16, per_node=8, sharing="mig", mig_model=A40).obj()
    gang = JobWrapper("gang").gpu_type("A100").gpus(8).window(0, 1).obj()
    ones = [JobWrapper(f"one{i}").gpu_type("A100").window(0, 1).obj() for i in range(7)]
    slices = [frac(f"s{i}", mig="1g.5gb") for i in range(8)]
    prob = problem([site], [gang, *ones, *slices], 1)
    res = solve_plan(prob, method="milp")
    assert [u.job_id for u in res.unplaced if u.job_id.startswith("s")] == [
        u.job_id for u in res.unplaced] and len(res.unplaced) == 1
    assert {p.gpu_index for p in res.placements if p.job_id.startswith("s")} == {0}
    sc = score_plan(prob, res)
    assert (sc.capacity_violations, sc.gang_violations, sc.slice_violations) == (0, 0, 0)


def test_a_slice_no_gpu_can_keep_for_its_whole_run_is_left_out_and_named():
    # one A100-40GB. Hour 0: 4g.20gb (memory 0-3) beside a 2g.10gb that runs two hours, so the
    # 2g.10gb must start at memory slice 4. Hour 1: 2g.10gb + 3g.20gb + 2g.10gb is a valid
    # layout (3g at 4, the 2g at 0 and 2) but not with the running 2g.10gb kept at 4: each hour
    # holds, the hours together do not, and a MIG instance is not moved while it runs
    jobs = [frac("x", window=(0, 1), mig="4g.20gb"), frac("y", hours=2, window=(0, 2),
                                                          mig="2g.10gb"),
            frac("w", window=(1, 2), mig="3g.20gb"), frac("v", window=(1, 2), mig="2g.10gb")]
    prob = problem([mig_site(1)], jobs, 2)
    res = solve_plan(prob, method="milp")
    assert [u.job_id for u in res.unplaced] == ["v"]
    assert res.unplaced[0].reason == "InsufficientCapacity"
    assert "no GPU slice stayed free for its whole run" in res.unplaced[0].detail
    assert any(n.startswith("slices: 1 fractional job(s) left unplaced") for n in res.notes)
    assert {p.job_id: p.mig_start for p in res.placements} == {"x": 0, "y": 4, "w": 0}
    assert score_plan(prob, res).slice_violations == 0


def test_slices_already_cut_are_moved_to_make_room_before_a_job_is_left_out():
    # 2g.10gb hours 0-1, 3g.20gb hours 1-2, 4g.20gb hour 2: one GPU holds them only with the
    # 2g at 0 and the 3g at 4 (the 4g.20gb may start at 0 only); placed one by one from the
    # top, the 3g.20gb would take 0 and leave the 4g.20gb out
    jobs = [frac("a", hours=2, window=(0, 2), mig="2g.10gb"),
            frac("b", hours=2, window=(1, 3), mig="3g.20gb"),
            frac("c", window=(2, 3), mig="4g.20gb")]
    prob = problem([mig_site(1)], jobs, 3)
    res = solve_plan(prob, method="milp")
    assert not res.unplaced
    starts = {p.job_id: p.mig_start for p in res.placements}
    assert starts["c"] == 0 and starts["b"] == 4 and starts["a"] in (0, 2)
    assert score_plan(prob, res).slice_violations == 0


def test_a_slice_never_takes_a_gpu_in_an_hour_whole_gpu_work_needs():
    # 2 GPUs. Hour 0: b (900) and a (300) need two GPUs; hour 1: a and the whole job w. The
    # 100-milli d (hours 0-1) fits beside b in hour 0, but b's GPU is idle in hour 1, where w
    # and a's GPU already hold both: d must go beside a
    jobs = [frac("a", hours=2, window=(0, 2), milli=300), frac("b", window=(0, 1), milli=900),
            frac("d", hours=2, window=(0, 2), milli=100),
            JobWrapper("w").gpu_type("A100").window(1, 2).obj()]
    prob = problem([milli_site(2)], jobs, 2)
    res = solve_plan(prob, method="milp")
    assert res.status in ("optimal", "feasible") and not res.unplaced
    at_gpu = {p.job_id: p.gpu_index for p in res.placements}
    assert at_gpu["d"] == at_gpu["a"] != at_gpu["b"] and at_gpu["w"] is None
    assert score_plan(prob, res).capacity_violations == 0


def test_a_slice_no_gpu_keeps_at_the_solvers_start_moves_to_another_in_its_window():
    # as the test above, but v may also run in hour 2 (dearer: the solver chose hour 1, where
    # the running 2g.10gb at memory slice 4 leaves no room for it beside the 3g.20gb)
    jobs = [frac("x", window=(0, 1), mig="4g.20gb"), frac("y", hours=2, window=(0, 2),
                                                          mig="2g.10gb"),
            frac("w", window=(1, 2), mig="3g.20gb"), frac("v", window=(1, 3), mig="2g.10gb")]
    prob = problem([mig_site(1)], jobs, 3, ci={"a": [100.0, 50.0, 200.0]})
    res = solve_plan(prob, method="milp")
    assert not res.unplaced
    v = next(p for p in res.placements if p.job_id == "v")
    assert v.start == at(2) and v.gpu_index == 0
    assert any(n.startswith("slices: 1 fractional job(s) moved") for n in res.notes)
    assert score_plan(prob, res).slice_violations == 0


# ------------------------------------------------- slices and topology-bound gangs: one book

def two_domain_site(sharing: str = "milli"):
    # 16 A100 on nodes of 8, one node per domain: domain 0 = GPUs 0-7, domain 1 = GPUs 8-15
    return SiteWrapper("b").gpus("A100", 16, per_node=8, per_domain=1, sharing=sharing,
                                 mig_model=A40 if sharing == "mig" else None).obj()


def gang8(job_id: str = "gang", hours: int = 1):
    return JobWrapper(job_id).gpu_type("A100").gpus(8).hours(hours).max_domains(1) \
        .window(0, hours).obj()


@pytest.mark.parametrize("how", ["milp", "colgen", "greedy"])
def test_a_slice_never_takes_a_gpu_of_the_domain_a_same_domain_gang_fills(how):
    """The fault seen on ca-on-toronto / gb-london: the slice took GPU 0 and the gang
    domain 0, nine GPUs in an eight-GPU domain. One book: the slice goes to domain 1."""
    from carbonsched.plan import greedy_plan

    prob = problem([two_domain_site()], [gang8(), frac("s", milli=300)], 1)
    res = greedy_plan(prob) if how == "greedy" else solve_plan(prob, method=how)
    assert not res.unplaced, res.unplaced
    got = {p.job_id: p for p in res.placements}
    assert got["gang"].domains == (0,)
    assert got["s"].gpu_index == 8            # the first GPU of domain 1
    sc = score_plan(prob, res)
    assert (sc.domain_violations, sc.slice_violations, sc.capacity_violations) == (0, 0, 0)


def test_two_gangs_fill_both_domains_and_the_slice_waits_for_an_hour_with_room():
    # both domains full with gangs in hour 0; the slice may run in hours 0-1: hour 1 only
    jobs = [gang8("g0"), gang8("g1"), frac("s", window=(0, 2), milli=300)]
    prob = problem([two_domain_site()], jobs, 2, ci={"b": [10.0, 500.0]})
    res = solve_plan(prob, method="milp")
    got = {p.job_id: p for p in res.placements}
    assert sorted(got["g0"].domains + got["g1"].domains) == [0, 1]
    assert got["s"].start == at(1)
    assert score_plan(prob, res).domain_violations == 0


def test_the_recount_counts_a_gpu_carrying_slices_in_its_domain_with_the_gangs():
    jobs = [gang8(), frac("s", milli=300), frac("t", milli=300)]
    prob = problem([two_domain_site()], jobs, 1)
    g = Placement(job_id="gang", site="b", start=at(0), end=at(1), gpu_type="A100", gpus=8,
                  energy_kwh=0.0, emissions_kg=0.0, domains=(0,))
    # just at the limit: the slices on GPU 8 (domain 1) beside the gang in domain 0
    ok = plan([g, slice_at("s", "b", 8), slice_at("t", "b", 15)])
    assert score_plan(prob, ok).domain_violations == 0
    # known bad: a slice on GPU 7, the ninth GPU of domain 0 in that hour
    bad = plan([g, slice_at("s", "b", 7), slice_at("t", "b", 8)])
    sc = score_plan(prob, bad)
    assert (sc.domain_violations, sc.capacity_violations) == (1, 0)
    # two slices on one GPU count one GPU of its domain
    one = plan([g, slice_at("s", "b", 7), slice_at("t", "b", 7)])
    assert score_plan(prob, one).domain_violations == 1


def test_an_unplaced_fractional_job_counts_its_share_of_a_gpu_not_a_whole_gpu():
    # one A100 for one hour: 600 + 300 milli fit, the 500 does not (0.5 GPU-h left out)
    jobs = [frac("a", milli=600), frac("b", milli=300), frac("c", milli=500),
            frac("m", hours=2, window=(0, 2), mig="3g.20gb")]
    prob = problem([milli_site(1)], jobs[:3], 1)
    res = solve_plan(prob, method="milp")
    assert [u.job_id for u in res.unplaced] == ["c"]
    assert res.totals["unplaced_gpu_hours"] == pytest.approx(0.5)
    assert score_plan(prob, res).unplaced_gpu_hours == pytest.approx(0.5)
    # a 3g.20gb left out for two hours: 3 of 7 compute slices x 2 h
    mig = problem([mig_site(1)], [jobs[3], frac("w", hours=2, window=(0, 2), mig="7g.40gb")], 2)
    res = solve_plan(mig, method="milp")
    assert [u.job_id for u in res.unplaced] == ["m"]
    assert res.totals["unplaced_gpu_hours"] == pytest.approx(2 * 3 / 7)
    assert score_plan(mig, res).unplaced_gpu_hours == pytest.approx(2 * 3 / 7)


def test_running_slices_over_the_booked_shares_do_not_fail_the_plan():
    """Four 250-milli slices committed on one GPU when milli was packed exactly (before the
    pool's shares were booked) hold 4 x 300 = 1200 booked milli under 10 shares per GPU. They
    are not this plan's: it plans around them (a new slice goes to the other GPU) and its
    recount does not refuse it; before, every plan failed the recount until they ended."""
    from carbonsched.domain import RunningWork
    from carbonsched.plan.result import recount_violations
    from tests.plan.builders import at

    for method in ("milp", "colgen"):
        prob = problem([milli_site(2, shares_per_gpu=10)], [frac("new", milli=250, window=(0, 2))],
                       2)
        prob.running = [RunningWork(site="b", gpu_type="A100", gpus=1, it_power_kw=0.25,
                                    end=at(2), job_id=f"old{i}", start=at(0), gpu_index=0,
                                    gpu_milli=250) for i in range(4)]
        res = solve_plan(prob, method=method)
        assert [p.job_id for p in res.placements] == ["new"], method
        assert res.placements[0].gpu_index == 1          # not onto the over-full GPU 0
        assert recount_violations(prob, res) == {}, method
