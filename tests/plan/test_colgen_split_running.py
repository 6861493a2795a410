"""The GPU-type split bound counts the GPUs that running work holds (issue 13).

Found by the Hypothesis property in ``test_colgen_tail.py``: with the installed GPU count as
capacity, the type's MIP let a job use a GPU still held by running work, and the capacity
price of that hour was taken off twice, so the "proven" bound exceeded the optimum.
"""

from __future__ import annotations

import numpy as np
import pytest

from carbonsched.domain import RunningWork
from carbonsched.plan import solve_plan
from carbonsched.plan.colgen import job_classes, make_layout, split_bound
from carbonsched.plan.sets import compile_sets

from .builders import JobWrapper, SiteWrapper, at, problem


def busy_first_hour():
    """One site, 1 H100 held by running work until 01:00; one 1-GPU, 1 kW, 1 h job in 0-2.

    CI 0 then 100 g/kWh, PUE 1. The job can only run at 01:00: 1 kWh × 0.1 = 0.1 kg
    (unplaced it would cost 10 × 0.1 kg/kWh × 1 kW × 1 h = 1 kg). Optimum 0.1 kg.
    """
    site = SiteWrapper("a").gpus("H100", 1).obj()
    job = JobWrapper("j").gpu_type("H100").gpus(1).hours(1).window(0, 2).kw_per_gpu(1.0).obj()
    prob = problem([site], [job], 2, ci={"a": [0.0, 100.0]})
    prob.running = [RunningWork(site="a", gpu_type="H100", gpus=1, it_power_kw=0.5,
                                end=at(1))]
    return prob


def test_the_optimum_waits_for_the_running_work():
    res = solve_plan(busy_first_hour(), method="milp", mip_gap=0.0)
    assert res.totals["objective"] == pytest.approx(0.1)
    assert res.placements[0].start == at(1)


@pytest.mark.parametrize("price_hour0", [0.0, 0.5, 3.0])
def test_split_bound_is_exact_and_never_above_the_optimum(price_hour0):
    sets = compile_sets(busy_first_hour())
    assert sets.gpu_cap[0, :2, 0].tolist() == [0, 1]
    lay = make_layout(sets, job_classes(sets))
    n_s, n_t = sets.pue.shape
    lam_c = np.zeros((n_s, n_t, 1))
    lam_c[0, 0, 0] = price_hour0     # any capacity price of the busy hour is valid
    sb = split_bound(sets, lay, lam_c, np.zeros((n_s, n_t)), np.zeros((n_s, n_t)),
                     upper=1.0, seconds=20, threads=1)
    # the type's MIP sees the GPU busy in hour 0 and places the job at 01:00: 0.1 kg; with
    # the installed count it placed it at 00:00 for 0 kg and added the price back (0.5 kg)
    assert sb.bound == pytest.approx(0.1)
