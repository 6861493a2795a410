"""Grid-connection (facility) power caps: planned against the PUE's upper 95 % bound, recounted."""

from __future__ import annotations

import pandas as pd
import pytest

from carbonsched.domain import Placement, ReasonCode
from carbonsched.errors import InputError
from carbonsched.plan import (
    PlanResult,
    PlanStatus,
    SolverRecord,
    score_plan,
    site_hour_power,
    solve_plan,
)
from carbonsched.plan.sets import compile_sets

from .builders import JobWrapper, SiteWrapper, at, problem

# One site, 4 hours. PUE forecast 1.2 every hour; its 95 % upper bound 1.25, but 1.4 in the warm
# hour 2, which is also the cleanest (CI 50 g/kWh; hour 3: 100; hours 0, 1: 300, 200).
CI = {"a": [300.0, 200.0, 50.0, 100.0]}
PUE = {"a": 1.2}
PUE_HI = {"a": [1.25, 1.25, 1.4, 1.25]}


def site(facility_cap: float | None, it_cap: float = 100.0):
    w = SiteWrapper("a").gpus("H100", 200).cap_kw(it_cap)
    return (w.facility_cap_kw(facility_cap) if facility_cap is not None else w).obj()


def job(gpus: int):
    # 1 kW per GPU, 1 h, any start in hours 0..3
    return JobWrapper("j").gpus(gpus).hours(1).window(0, 4).obj()


def start_hour(res) -> int:
    (p,) = res.placements
    return int((p.start - at(0)) / pd.Timedelta(hours=1))


def test_facility_cap_binds_only_on_the_warm_hour() -> None:
    # 95 kW IT. Without a grid-connection cap: hour 2, 95 x 1.2 x 50 / 1000 = 5.7 kg.
    free = problem([site(None)], [job(95)], 4, ci=CI, pue=PUE, pue_hi=PUE_HI)
    res = solve_plan(free)
    assert res.status == PlanStatus.OPTIMAL and start_hour(res) == 2
    assert res.totals["emissions_kg"] == pytest.approx(5.7)
    # With 130 kW at the connection: hour 2 allows 130 / 1.4 = 92.86 kW of IT (< 95), the
    # others min(100, 130 / 1.25 = 104) = 100 kW. On the mean PUE hour 2 would fit
    # (95 x 1.2 = 114 <= 130): only the upper bound moves the job, to hour 3:
    # 95 x 1.2 x 100 / 1000 = 11.4 kg.
    capped = problem([site(130.0)], [job(95)], 4, ci=CI, pue=PUE, pue_hi=PUE_HI)
    sets = compile_sets(capped)
    assert sets.power_cap_kw[0].tolist() == pytest.approx([100.0, 100.0, 130 / 1.4, 100.0])
    res = solve_plan(capped)
    assert res.status == PlanStatus.OPTIMAL and start_hour(res) == 3
    assert res.totals["emissions_kg"] == pytest.approx(11.4)
    sc = score_plan(capped, res)
    assert (sc.power_cap_violations, sc.facility_cap_violations) == (0, 0)
    rows = {int((r["hour"] - at(0)) / pd.Timedelta(hours=1)): r
            for r in site_hour_power(capped, res)}
    assert rows[3]["it_power_kw"] == pytest.approx(95.0)
    assert rows[3]["it_headroom_kw"] == pytest.approx(5.0)
    assert rows[3]["facility_power_kw"] == pytest.approx(95 * 1.2)
    assert rows[3]["facility_power_hi95_kw"] == pytest.approx(95 * 1.25)
    assert rows[3]["facility_headroom_kw"] == pytest.approx(130 - 95 * 1.25)
    assert rows[2]["it_power_kw"] == 0.0 and rows[2]["facility_headroom_kw"] == 130.0
    assert [r["facility_power_cap_kw"] for r in site_hour_power(free, solve_plan(free))] == \
        [None] * 4


def test_every_policy_respects_the_facility_cap() -> None:
    from carbonsched.plan import agnostic_plan, greedy_plan

    capped = problem([site(130.0)], [job(95)], 4, ci=CI, pue=PUE, pue_hi=PUE_HI)
    assert start_hour(greedy_plan(capped)) == 3          # cleanest hour with room
    assert start_hour(agnostic_plan(capped)) == 0        # earliest hour with room
    for res in (greedy_plan(capped), agnostic_plan(capped)):
        assert score_plan(capped, res).facility_cap_violations == 0


def _plan_at(hour: int, gpus: int) -> PlanResult:
    p = Placement(job_id="j", site="a", start=at(hour), end=at(hour + 1), gpu_type="H100",
                  gpus=gpus, energy_kwh=0.0, emissions_kg=0.0)
    return PlanResult(status=PlanStatus.FEASIBLE,
                      solver=SolverRecord(name="hand", status="feasible"), placements=[p])


@pytest.mark.parametrize(("gpus", "facility_violations"), [(100, 0), (101, 1)])
def test_recount_counts_facility_cap_at_and_over_the_limit(gpus: int,
                                                           facility_violations: int) -> None:
    # hour 2 planned at PUE 1.3: 100 kW x 1.3 = 130 kW is exactly the cap (not a violation);
    # 101 kW x 1.3 = 131.3 kW is over it. The IT cap (200 kW) is never reached.
    pue_hi = {"a": [1.25, 1.25, 1.3, 1.25]}
    prob = problem([site(130.0, it_cap=200.0)], [job(gpus)], 4, ci=CI, pue=PUE, pue_hi=pue_hi)
    sc = score_plan(prob, _plan_at(2, gpus))
    assert sc.facility_cap_violations == facility_violations
    assert sc.power_cap_violations == 0 and sc.gang_violations == 0


def test_recount_on_actual_signals_uses_the_actual_pue() -> None:
    # scored on actuals (no pue_hi_95 column): 101 kW x 1.2 = 121.2 kW <= 130 kW, clean;
    # an actual PUE of 1.35 in that hour makes it 136.35 kW: one violation.
    prob = problem([site(130.0, it_cap=200.0)], [job(101)], 4, ci=CI, pue=PUE, pue_hi=PUE_HI)
    plan = _plan_at(2, 101)
    actual = problem([site(130.0, it_cap=200.0)], [job(101)], 4, ci=CI, pue=PUE).signals
    assert score_plan(prob, plan, signals=actual).facility_cap_violations == 0
    warm = problem([site(130.0, it_cap=200.0)], [job(101)], 4, ci=CI,
                   pue={"a": [1.2, 1.2, 1.35, 1.2]}).signals
    assert score_plan(prob, plan, signals=warm).facility_cap_violations == 1


def test_job_above_every_hours_facility_cap_is_refused_with_reason() -> None:
    # IT cap 1000 kW but 130 kW at the connection: at most 130 / 1.25 = 104 kW of IT in any hour
    prob = problem([site(130.0, it_cap=1000.0)], [job(110)], 4, ci=CI, pue=PUE, pue_hi=PUE_HI)
    res = solve_plan(prob)
    (u,) = res.unplaced
    assert u.reason == ReasonCode.EXCEEDS_POWER_CAP
    assert ("in its window (largest 104.0 kW, with facility power caps at the PUE's upper bound"
            in u.detail)


def test_upper_bound_below_the_point_forecast_is_refused() -> None:
    prob = problem([site(130.0)], [job(10)], 4, ci=CI, pue=PUE,
                   pue_hi={"a": [1.25, 1.1, 1.25, 1.25]})
    with pytest.raises(InputError, match=r"pue_hi_95 for site 'a' at 2023-07-15T01:00:00\+00:00 "
                                         r"is 1.1, below the PUE 1.2"):
        compile_sets(prob)


def test_power_precheck_looks_at_the_jobs_window_only() -> None:
    # 95 kW job allowed only in hour 2 (the warm hour: 130 / 1.4 = 92.9 kW); other hours allow
    # 100 kW but are outside its window -> refused as too big for the cap, not "needed by others"
    prob = problem([site(130.0, it_cap=1000.0)],
                   [JobWrapper("j").gpus(95).hours(1).window(2, 3).obj()], 4,
                   ci=CI, pue=PUE, pue_hi=PUE_HI)
    (u,) = solve_plan(prob).unplaced
    assert u.reason == ReasonCode.EXCEEDS_POWER_CAP
    assert "in its window (largest 92.9 kW, with facility power caps" in u.detail
