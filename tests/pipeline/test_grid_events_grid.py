"""Grid events are committed on the hourly grid: a finer plan grid is refused, naming both."""

from __future__ import annotations

import pandas as pd
import pytest

from carbonsched.errors import InputError
from carbonsched.flex import GridEvent
from carbonsched.pipeline.daily import run_daily_plan

CATALOG = "china-eastdata-westcompute"


def test_grid_events_on_a_15_minute_grid_are_refused_before_any_forecasting():
    # the commitment read each event hour's baseline from its first 15-minute slot only
    # (a job running 04:15-05:00 gave a baseline of 0 kW for the 04:00 hour)
    ev = GridEvent("cn-gz-guian", pd.Timestamp("2023-07-15T04:00Z"),
                   pd.Timestamp("2023-07-15T05:00Z"), target_fraction=0.5, id="ev")
    with pytest.raises(InputError, match=r"grid events are committed on the hourly grid; this "
                       r"plan's grid is 15-minute: plan the 1 grid event\(s\) with "
                       r"--slot-minutes 60"):
        run_daily_plan("2023-07-15", CATALOG, None, None, "highs", 5.0, 24, slot_minutes=15,
                       grid_events=[ev])


def test_commit_events_refuses_a_sub_hour_problem_and_takes_an_hourly_one():
    from carbonsched.pipeline.flex import commit_events
    from carbonsched.plan import solve_plan
    from tests.plan.builders import SiteWrapper, at, problem
    from tests.plan.test_slot_minutes import grid_problem

    site = SiteWrapper("a").gpus("H100", 4).obj()
    ev = GridEvent("a", at(4), at(5), target_fraction=0.5, id="ev")
    with pytest.raises(InputError, match="the problem's grid is 15-minute"):
        commit_events(grid_problem([site], [], 8, 15), [ev], solve_plan)
    # just at the limit: the hourly grid is committed
    assert len(commit_events(problem([site], [], 8), [ev], solve_plan).hours) == 1
