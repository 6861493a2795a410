"""Grid flexibility in the planner: the band, commitments, power caps (issue 38 items 1, 2)."""

from __future__ import annotations

import dataclasses
import math

import pandas as pd
import pytest

from carbonsched.domain import Job
from carbonsched.flex import Commitment, GridAgreement, GridEvent, GridFlexError, PowerCapLevel
from carbonsched.plan import PlanStatus, score_plan, site_hour_power, solve_plan
from carbonsched.plan.caps import capped_job, choose_power_caps, load_power_caps
from carbonsched.plan.flex import FlexAction, flex_band, recount_flex

from .builders import JobWrapper, SiteWrapper, at, demand, minutes_job, problem

CAPS = load_power_caps()
# one site, 16 H100; hours 4..7 are the cleanest (10 g/kWh), the rest 100 g/kWh
CI = {"a": [100.0] * 4 + [10.0] * 4 + [100.0] * 16}


def ci(hours):
    return {"a": CI["a"][:hours]}


def site():
    return SiteWrapper("a").gpus("H100", 16).latency("eu", 5).obj()


def hours_of(res, job_id):
    return [(int((p.start - at(0)) / pd.Timedelta(hours=1)),
             int((p.end - at(0)) / pd.Timedelta(hours=1)))
            for p in res.placements if p.job_id == job_id]


# --- commitments are reserved and recounted ---------------------------------------------------

def test_a_commitment_keeps_site_power_in_its_window_under_the_limit():
    jobs = [JobWrapper("j1").gpus(4).hours(2).window(0, 24).obj(),
            JobWrapper("j2").gpus(4).hours(2).window(0, 24).obj()]
    free = problem([site()], jobs, 24, ci=CI)
    res = solve_plan(free)
    assert hours_of(res, "j1") == [(4, 6)] and hours_of(res, "j2") == [(4, 6)]
    # commit 4 kW below an 8 kW baseline in hours 4 and 5: at most 4 kW there
    com = [Commitment("a", at(4), at(6), reduction_kw=4.0, baseline_kw=8.0)]
    held = dataclasses.replace(free, commitments=com)
    res2 = solve_plan(held)
    assert res2.status == PlanStatus.OPTIMAL
    power = {r["hour"]: r["facility_power_kw"] for r in site_hour_power(held, res2)}
    assert power[at(4)] <= 4.0 + 1e-9 and power[at(5)] <= 4.0 + 1e-9
    sc = score_plan(held, res2)
    assert sc.commitment_violations == 0 and sc.deadline_misses == 0
    # the recount is independent of the solver: the plan made without the commitment breaks
    # it in both hours
    assert score_plan(held, res).commitment_violations == 2


def test_a_commitment_at_its_limit_is_kept_and_one_kw_over_is_counted():
    jobs = [JobWrapper("j1").gpus(4).hours(1).window(4, 5).obj()]
    p = problem([site()], jobs, 8, ci=ci(8))
    res = solve_plan(p)
    at_limit = dataclasses.replace(p, commitments=[Commitment("a", at(4), at(5), 4.0, 8.0)])
    assert score_plan(at_limit, res).commitment_violations == 0          # 4 kW == 8 - 4
    over = dataclasses.replace(p, commitments=[Commitment("a", at(4), at(5), 4.001, 8.0)])
    assert score_plan(over, res).commitment_violations == 1


# --- the band ---------------------------------------------------------------------------------

def test_the_band_holds_work_with_slack_and_not_work_without():
    jobs = [JobWrapper("slack").gpus(4).hours(2).window(0, 24).obj(),
            JobWrapper("tight").gpus(2).hours(2).window(4, 6).obj()]
    p = problem([site()], jobs, 24, ci=CI)
    res = solve_plan(p)
    band = flex_band(p, res, notice_hours=4, event_hours=3)
    assert band.flex_it_kw[("a", at(4))] == pytest.approx(4.0)        # slack held, tight not
    assert band.flex_it_kw[("a", at(5))] == pytest.approx(4.0)
    assert band.flex_it_kw[("a", at(7))] == 0.0
    assert {a.lever for a in band.actions} == {"hold"}
    assert recount_flex(p, res, band) == 0
    assert score_plan(p, res, flex=band).flex_overpromise == 0


def test_a_hold_exactly_to_the_deadline_counts_and_one_minute_short_does_not():
    # a 2 h run at 4..6; an event of 3 h from hour 4 holds it to 7..9: deadline 9 is the limit
    def band_for(deadline):
        j = minutes_job("j", 120, at(4), deadline, gpus=2)
        p = problem([site()], [j], 12, ci=ci(12))
        res = solve_plan(p)
        assert hours_of(res, "j") == [(4, 6)]
        return flex_band(p, res, 4, 3).flex_it_kw[("a", at(4))]
    assert band_for(at(9)) == pytest.approx(2.0)
    assert band_for(at(9) - pd.Timedelta(minutes=1)) == 0.0


def test_preemptible_work_pauses_and_running_work_gives_cap_headroom():
    # both started before the announcement (notice 4 h before hour 6): not held
    pre = minutes_job("pre", 8 * 60, at(0), at(20), gpus=4, preemptible=True, max_pieces=3,
                      checkpoint_overhead_minutes=10)
    solid = minutes_job("solid", 8 * 60, at(0), at(10), gpus=2)
    p = problem([site()], [pre, solid], 24, ci={"a": [10.0] * 8 + [100.0] * 16})
    res = solve_plan(p)
    assert hours_of(res, "pre") == [(0, 8)] and hours_of(res, "solid") == [(0, 8)]
    band = flex_band(p, res, notice_hours=4, event_hours=3, caps=CAPS)
    acts = {(a.job_id, a.lever): a for a in band.actions if a.hour == at(6)}
    assert set(acts) == {("pre", "pause"), ("solid", "cap")}
    assert acts[("pre", "pause")].shed_it_kw == pytest.approx(4.0)
    # the deepest level: (1 - 0.808) of 2 kW; the job ends 2 h x (1 - 1/1.068) later (8 -> 8.13
    # h, within its 10 h deadline)
    assert acts[("solid", "cap")].shed_it_kw == pytest.approx(2.0 * (1 - 0.808))
    assert acts[("solid", "cap")].delay_minutes == pytest.approx(120 * (1 - 1 / 1.068))
    assert band.flex_it_kw[("a", at(6))] == pytest.approx(4.0 + 0.384)
    assert score_plan(p, res, flex=band).flex_overpromise == 0
    # without cap levels, no cap headroom
    assert flex_band(p, res, 4, 3).flex_it_kw[("a", at(6))] == pytest.approx(4.0)


def test_a_small_serving_pool_sheds_nothing_by_caps():
    # 4 serving GPUs: the same throughput needs ceil(4 × 1.068) = 5 at 0.808 (4.04 kW > 4 kW)
    # or ceil(4 × 1.034) = 5 at 0.901 (4.505 kW): rounding eats the saving
    p = problem([site()], [], 6, inference=[demand("eu", h, 4) for h in range(6)], ci=ci(6))
    res = solve_plan(p)
    band = flex_band(p, res, 4, 3, caps=CAPS)
    assert all(v == 0.0 for v in band.flex_it_kw.values())
    assert flex_band(p, res, 4, 3).flex_it_kw[("a", at(0))] == 0.0     # no caps: no lever


@pytest.mark.parametrize(("gpus_at_site", "shed_kw"), [
    (32, 28 - 30 * 0.808),     # 4 idle: the 0.6 cap, 30 GPUs keep the throughput: 3.76 kW
    (30, 28 - 30 * 0.808),     # just at the limit: exactly the 2 idle GPUs it needs
    (29, 28 - 29 * 0.901),     # 1 idle: only the 0.8 cap fits (29 GPUs): 1.871 kW
    (28, 0.0),                 # none idle: serving GPUs cannot be capped
])
def test_serving_caps_shed_what_the_curve_leaves_once_throughput_is_kept(gpus_at_site, shed_kw):
    s = SiteWrapper("a").gpus("H100", gpus_at_site).latency("eu", 5).obj()
    p = problem([s], [], 6, inference=[demand("eu", h, 28) for h in range(6)], ci=ci(6))
    res = solve_plan(p)
    band = flex_band(p, res, 4, 3, caps=CAPS)
    for h in range(6):
        assert band.flex_it_kw[("a", at(h))] == pytest.approx(shed_kw)
        assert band.by_lever().get(("a", at(h), "serve_cap"), 0.0) == pytest.approx(shed_kw)
    assert recount_flex(p, res, band) == 0
    assert score_plan(p, res, flex=band).flex_overpromise == 0


def _served(sites, demands, alloc, hours=1):
    """A plan serving ``demands`` as ``alloc`` ((D, S) GPUs), no jobs."""
    import numpy as np

    from carbonsched.plan.result import SolverRecord, build_plan_result
    from carbonsched.plan.sets import compile_sets

    p = problem(sites, [], hours, inference=demands, ci=ci(hours))
    sets = compile_sets(p)
    rec = SolverRecord(name="test", status=PlanStatus.FEASIBLE, build_seconds=0.0,
                       solve_seconds=0.0)
    return p, build_plan_result(sets, np.zeros((0, 3), dtype=np.int64), np.array(alloc),
                                PlanStatus.FEASIBLE, rec)


@pytest.mark.parametrize("case", ["two sites", "two tiers at one site", "two GPU types"])
def test_every_serving_pool_is_capped_once_and_the_recount_agrees(case):
    # the recount kept one placement per (site, hour, area), without the GPU type, and took
    # a second action of one area and hour as a repeat: a band of 28 GPUs serving at each of
    # two sites was counted over-promised, and so were two tiers or two GPU types at a site
    if case == "two sites":
        sites = [SiteWrapper(n).gpus("H100", 32).latency("eu", 5).obj() for n in "ab"]
        demands, alloc = [demand("eu", 0, 56)], [[28, 28]]
        pools = {("a", "H100"): 28, ("b", "H100"): 28}
    elif case == "two tiers at one site":
        sites = [SiteWrapper("a").gpus("H100", 64).latency("eu", 5).obj()]
        demands = [demand("eu", 0, 14, slo_ms=50.0), demand("eu", 0, 14, slo_ms=10.0)]
        alloc, pools = [[14], [14]], {("a", "H100"): 28}
    else:
        sites = [SiteWrapper("a").gpus("H100", 32).gpus("A100", 32).latency("eu", 5).obj()]
        demands = [demand("eu", 0, 28), demand("eu", 0, 28, gpu_type="A100")]
        alloc, pools = [[28], [28]], {("a", "H100"): 28, ("a", "A100"): 28}
    p, res = _served(sites, demands, alloc)
    band = flex_band(p, res, 4, 3, caps=CAPS)
    acts = sorted((a.site, a.gpu_type, a.shed_it_kw) for a in band.actions)
    # each pool of 28 GPUs with 4 idle: the 0.6 cap keeps the throughput on 30, as above
    assert acts == sorted((s, g, pytest.approx(n - 30 * 0.808)) for (s, g), n in pools.items())
    assert recount_flex(p, res, band) == 0
    assert score_plan(p, res, flex=band).flex_overpromise == 0
    # known bad, at the limit: one pool's action stated twice is one too many
    band.actions.append(band.actions[0])
    band.flex_it_kw[(band.actions[0].site, at(0))] += band.actions[0].shed_it_kw
    assert recount_flex(p, res, band) == 1


def test_the_recount_catches_serving_caps_that_need_gpus_the_site_does_not_have():
    s = SiteWrapper("a").gpus("H100", 29).latency("eu", 5).obj()      # 1 idle GPU
    p = problem([s], [], 6, inference=[demand("eu", h, 28) for h in range(6)], ci=ci(6))
    res = solve_plan(p)
    band = flex_band(p, res, 4, 3, caps=CAPS)
    # known bad: the 0.6 cap's 3.76 kW needs 2 idle GPUs; the site has 1
    band.flex_it_kw[("a", at(2))] = 28 - 30 * 0.808
    band.actions = [a if a.hour != at(2) else dataclasses.replace(a, shed_it_kw=28 - 30 * 0.808)
                    for a in band.actions]
    assert recount_flex(p, res, band) == 1
    # known bad: the same serving GPUs counted twice in one hour
    band2 = flex_band(p, res, 4, 3, caps=CAPS)
    (a3,) = [a for a in band2.actions if a.hour == at(3)]
    band2.actions.append(a3)
    band2.flex_it_kw[("a", at(3))] *= 2
    assert recount_flex(p, res, band2) == 1
    # a band stated without cap levels cannot carry a serve_cap action
    band3 = flex_band(p, res, 4, 3)
    band3.actions.append(dataclasses.replace(a3))
    band3.flex_it_kw[("a", at(3))] = a3.shed_it_kw
    assert recount_flex(p, res, band3) == 1


def test_the_recount_catches_a_band_that_promises_what_deadlines_cannot_give():
    jobs = [JobWrapper("tight").gpus(2).hours(2).window(4, 6).obj()]
    p = problem([site()], jobs, 12, ci=ci(12))
    res = solve_plan(p)
    band = flex_band(p, res, 4, 3, caps=CAPS)
    assert band.flex_it_kw[("a", at(4))] == 0.0        # no slack: nothing to shed
    # a band that holds it anyway (the job would end at 9, after its deadline 6)
    band.flex_it_kw[("a", at(4))] = 2.0
    band.actions.append(FlexAction("a", at(4), "tight", 0, "hold", 2.0, 180.0))
    assert recount_flex(p, res, band) == 1
    assert score_plan(p, res, flex=band).flex_overpromise == 1
    # and one that claims more than the hour's own work draws (inference never sheds)
    band2 = flex_band(p, res, 4, 3, caps=CAPS)
    band2.flex_it_kw[("a", at(5))] = 5.0
    assert recount_flex(p, res, band2) == 1


# --- power caps -------------------------------------------------------------------------------

def test_caps_change_energy_and_duration_as_their_curve_says():
    (deep,) = [c for c in CAPS if c.cap_fraction == 0.6]
    assert deep.energy_factor == pytest.approx(1 - 0.137, abs=5e-4)   # McDonald et al. 2022
    j = minutes_job("j", 600, at(0), at(48), gpus=8, kw=0.7)
    c = capped_job(j, deep)
    assert c.duration_minutes == math.ceil(600 * 1.068) == 641
    assert c.power_per_gpu_kw == pytest.approx(0.7 * 0.808)
    # planned: the energy the plan counts follows the curve (within the minute of rounding)
    s = SiteWrapper("a").gpus("H100", 16).obj()
    e = {}
    for name, job in (("free", j), ("capped", c)):
        p = problem([s], [job], 48)
        res = solve_plan(p)
        e[name] = score_plan(p, res).energy_kwh
        assert score_plan(p, res).deadline_misses == 0
    assert e["capped"] / e["free"] == pytest.approx(deep.energy_factor, abs=0.002)


def test_choose_power_caps_caps_only_where_the_window_has_room():
    table = load_power_caps()
    # 100 min at 0.6: 107 min; slack factor 2 needs a window of 214 min
    at_limit = minutes_job("ok", 100, at(0), at(0) + pd.Timedelta(minutes=214))
    short = minutes_job("mild", 100, at(0), at(0) + pd.Timedelta(minutes=213))
    # at 0.8: 104 min -> 208 min window; one minute less: no cap
    none = minutes_job("none", 100, at(0), at(0) + pd.Timedelta(minutes=207))
    jobs, chosen = choose_power_caps([at_limit, short, none], table)
    assert chosen["ok"].level.cap_fraction == 0.6 and jobs[0].duration_minutes == 107
    assert chosen["mild"].level.cap_fraction == 0.8 and jobs[1].duration_minutes == 104
    assert "none" not in chosen and jobs[2] is none
    with pytest.raises(GridFlexError, match="slack_factor"):
        choose_power_caps([at_limit], table, slack_factor=0.99)


def test_a_cap_table_that_saves_no_energy_is_refused(tmp_path):
    bad = tmp_path / "caps.toml"
    bad.write_text('[[levels]]\ngpu_type = "*"\ncap_fraction = 0.8\npower_fraction = 0.95\n'
                   'time_factor = 1.06\nsource = "x"\n')
    with pytest.raises(GridFlexError, match=r"caps.toml: \[\[levels\]\] 1 .*saves no energy"):
        load_power_caps(bad)
    edge = tmp_path / "edge.toml"   # energy factor 0.999: just saves
    edge.write_text('[[levels]]\ngpu_type = "*"\ncap_fraction = 0.8\npower_fraction = 0.9\n'
                    'time_factor = 1.11\nsource = "x"\n')
    assert load_power_caps(edge)[0].energy_factor == pytest.approx(0.999)
    with pytest.raises(GridFlexError, match="time_factor"):
        PowerCapLevel("*", 0.8, 0.9, 0.99)


# --- the data model's validators --------------------------------------------------------------

def test_grid_event_validators_known_bad_and_at_the_limit():
    ok = GridEvent("a", at(1), at(4), target_fraction=1.0, notice=pd.Timedelta(0))
    assert ok.reduction_kw(80.0) == 80.0 and ok.announced == at(1)
    with pytest.raises(GridFlexError, match="target_fraction"):
        GridEvent("a", at(1), at(4), target_fraction=1.0001)
    with pytest.raises(GridFlexError, match="exactly one of target_kw"):
        GridEvent("a", at(1), at(4))
    with pytest.raises(GridFlexError, match="not on the hour"):
        GridEvent("a", at(1) + pd.Timedelta(minutes=30), at(4), target_kw=5)
    with pytest.raises(GridFlexError, match="end .* is not after start"):
        GridEvent("a", at(4), at(4), target_kw=5)
    with pytest.raises(GridFlexError, match="notice_minutes .* must be a finite number >= 0"):
        GridEvent("a", at(1), at(4), target_kw=5, notice=pd.Timedelta(minutes=-1))
    with pytest.raises(GridFlexError, match="reduction_kw"):
        Commitment("a", at(1), at(2), reduction_kw=10.001, baseline_kw=10.0)
    assert Commitment("a", at(1), at(2), reduction_kw=10.0, baseline_kw=10.0).limit_kw == 0.0
    ag = GridAgreement("a", max_event_hours=3)
    assert ag.event(at(2), 3).target_fraction == 0.25
    with pytest.raises(GridFlexError, match="longer than max_event_hours"):
        ag.event(at(2), 4)


def test_job_domain_unchanged_by_capping():
    j = JobWrapper("j").gpus(2).hours(3).obj()
    c = capped_job(j, CAPS[0])
    assert isinstance(c, Job) and (c.id, c.gpus, c.deadline) == (j.id, j.gpus, j.deadline)
