"""Dispatch asks the backend for the GPU slice the plan booked, not the one the payload names.

A job with ``gpu_milli`` or ``mig_profile`` runs in a slice only at a pool that shares GPUs that
way (:func:`carbonsched.plan.slices.job_slice`); elsewhere the planner books it a whole GPU. The
request must then ask for a whole GPU: before, ``gpu_milli`` at a MIG site asked Slurm for
``shard:k`` and a profile the site's MIG model lacks asked for ``gpu:<profile>:1``, which the
cluster refuses although the plan had room.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from carbonsched.adapters.dispatch.base import DispatchRequest
from carbonsched.adapters.dispatch.kubernetes import KubernetesAdapter
from carbonsched.adapters.dispatch.slurm import SlurmAdapter
from carbonsched.catalog import Catalog
from carbonsched.dispatch.outbox import (
    _request_from_row,
    _request_json,
    placement_slice,
    plan_requests,
)
from carbonsched.domain import SignalQuality
from carbonsched.pipeline.daily import result_rows
from carbonsched.plan import score_plan, solve_plan
from carbonsched.plan.slices import job_slice
from carbonsched.store.models import DispatchRow
from tests.plan.builders import JobWrapper, SiteWrapper, problem

A40 = "A100-40GB"


def _sites():
    return [SiteWrapper("mig-site").gpus("A100", 1, sharing="mig", mig_model=A40).obj(),
            SiteWrapper("milli-site").gpus("A100", 1, sharing="milli").obj(),
            SiteWrapper("whole-site").gpus("A100", 1).obj()]


def _job(job_id: str, site: str, mig: str | None = None, milli: int | None = None):
    j = JobWrapper(job_id).gpu_type("A100").hours(1).window(0, 4).sites(site)
    return (j.mig(mig) if mig else j.milli(milli)).obj()


# (job, allowed site, mig_profile, gpu_milli) -> what the backend is asked for
CASES = [
    ("mig-at-mig", "mig-site", "1g.5gb", None, ("1g.5gb", None)),
    ("milli-at-milli", "milli-site", None, 250, (None, 250)),
    ("milli-at-mig", "mig-site", None, 250, (None, None)),        # a whole GPU
    ("mig-at-milli", "milli-site", "1g.5gb", None, (None, None)),  # a whole GPU
    ("mig-not-offered", "mig-site", "1g.20gb", None, (None, None)),  # an A100-80GB profile
    ("milli-at-whole", "whole-site", None, 250, (None, None)),
]


@pytest.fixture(scope="module")
def planned():
    sites = _sites()
    jobs = [_job(c[0], c[1], mig=c[2], milli=c[3]) for c in CASES]
    prob = problem(sites, jobs, 4)
    res = solve_plan(prob, method="milp")
    assert not res.unplaced and score_plan(prob, res).slice_violations == 0
    payload = {j.id: j.payload.to_dict() for j in jobs}
    rows = result_rows(res)["placements"]
    for r in rows:
        r["payload"] = payload[r["job_id"]]
    doc = {"plan_id": "p-slices", "placements": rows}
    cat = Catalog(name="t", description="t", signal_quality=SignalQuality.MEASURED,
                  areas={}, sites=sites)
    return prob, res, {r.job_id: r for r in plan_requests(doc, cat)}


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_the_request_carries_the_slice_the_planner_booked(planned, case):
    prob, res, reqs = planned
    job_id, _site, _mig, _milli, want = case
    r = reqs[job_id]
    assert (r.mig_profile, r.gpu_milli) == want
    # the planner's own rule agrees: a slice exactly where job_slice gives one
    job = next(j for j in prob.jobs if j.id == job_id)
    site = next(s for s in prob.sites if s.id == r.site)
    assert (job_slice(job, site) is not None) == (want != (None, None))


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_slurm_and_kubernetes_are_asked_for_what_the_plan_booked(planned, case):
    r = planned[2][case[0]]
    gres = SlurmAdapter("c", timezone=UTC).gres(r)
    limits = KubernetesAdapter("ctx", "ns").gpu_limits(r)
    want = case[4]
    if want == (None, None):
        assert (gres, limits) == ("gpu:A100:1", {"nvidia.com/gpu": "1"})
    elif want[0]:
        assert (gres, limits) == (f"gpu:{want[0]}:1", {f"nvidia.com/mig-{want[0]}": "1"})
    else:
        assert (gres, limits) == ("shard:3", {"nvidia.com/gpu.shared": "3"})


def test_the_outbox_keeps_the_plans_slice_and_reads_an_older_row_as_before(planned):
    reqs = planned[2]
    for r in reqs.values():     # a row written now reads back the same slice
        back = _request_from_row(DispatchRow(request_json=_request_json(r)))
        assert (back.mig_profile, back.gpu_milli) == (r.mig_profile, r.gpu_milli)
    # a row written before requests carried the slice: the payload's, as it was dispatched
    d = json.loads(_request_json(reqs["milli-at-mig"]))
    del d["mig_profile"], d["gpu_milli"]
    old = _request_from_row(DispatchRow(request_json=json.dumps(d)))
    assert (old.mig_profile, old.gpu_milli) == (None, 250)


def test_placement_slice_reads_gpu_index_and_mig_start():
    pay = {"payload": {"mig_profile": "1g.5gb"}}
    assert placement_slice(pay) == (None, None)                                 # no gpu_index
    assert placement_slice(pay | {"gpu_index": 0, "mig_start": 6}) == ("1g.5gb", None)
    milli = {"payload": {"gpu_milli": 1000}, "gpu_index": 3, "mig_start": None}
    assert placement_slice(milli) == (None, 1000)                               # at the limit
    assert placement_slice({"gpu_index": 0}) == (None, None)                    # no payload


def _request(**kw):
    t0 = datetime(2027, 1, 1, tzinfo=UTC)
    base = dict(plan_id="p", job_id="j", piece=0, site="s", start=t0,
                end=t0 + timedelta(hours=1), deadline=t0 + timedelta(hours=2),
                gpu_type="A100", gpus=1)
    return DispatchRequest(**(base | kw))


@pytest.mark.parametrize(("kw", "says"), [
    ({"mig_profile": "1g.5gb", "gpu_milli": 250}, "not both"),
    ({"gpu_milli": 250, "gpus": 2}, "gpus must be 1"),
    ({"gpu_milli": 0}, "1..1000"),
    ({"gpu_milli": 1001}, "1..1000"),
])
def test_a_request_refuses_a_slice_no_backend_could_give(kw, says):
    with pytest.raises(ValueError, match=says):
        _request(**kw)


@pytest.mark.parametrize("milli", [1, 1000])
def test_a_request_takes_a_share_at_either_limit(milli):
    assert _request(gpu_milli=milli).gpu_milli == milli


def _shares_on_each_gpu(sizes: list[int], shares_per_gpu: int, gpus: int = 1, hours: int = 4):
    """Plan ``sizes`` milli jobs (1 h each, any hour of ``hours``) on one milli pool and give
    the shares dispatch asks for, summed per (GPU, hour), with the plan and its requests."""
    site = SiteWrapper("milli-site").gpus("A100", gpus, sharing="milli",
                                          shares_per_gpu=shares_per_gpu).obj()
    jobs = [JobWrapper(f"m{i}").gpu_type("A100").hours(1).window(0, hours).sites("milli-site")
            .milli(m).obj() for i, m in enumerate(sizes)]
    prob = problem([site], jobs, hours)
    res = solve_plan(prob, method="milp")
    rows = result_rows(res)["placements"]
    pay = {j.id: j.payload.to_dict() for j in jobs}
    for r in rows:
        r["payload"] = pay[r["job_id"]]
    cat = Catalog(name="t", description="t", signal_quality=SignalQuality.MEASURED,
                  areas={}, sites=[site])
    reqs = plan_requests({"plan_id": "p-shares", "placements": rows}, cat)
    where = {r["job_id"]: r["gpu_index"] for r in rows}
    held: dict[tuple[int, datetime], int] = {}
    for q in reqs:
        assert q.gpu_milli is not None and q.shares_per_gpu == shares_per_gpu
        key = (where[q.job_id], q.start)
        held[key] = held.get(key, 0) + q.gpu_shares
    return held, prob, res, reqs


@pytest.mark.parametrize(("sizes", "shares", "fit"), [
    # 250 milli is 3 of 10 shares: three fit one GPU, a fourth would ask 12 of 10 shares
    ([250] * 4, 10, 3),
    # on 4 shares per GPU 250 milli is exactly one share (just at the limit): all four fit
    ([250] * 4, 4, 4),
    # 251 milli on 4 shares is 2 shares: two fit
    ([251] * 4, 4, 2),
    # 125 milli on 8 shares is exactly one share: eight fit
    ([125] * 8, 8, 8),
])
def test_the_plan_never_books_more_shares_on_a_gpu_than_dispatch_asks_of_it(sizes, shares, fit):
    """Issue 37 follow-up: the planner packed ``gpu_milli`` exactly (four 250-milli jobs on one
    GPU) while dispatch rounded each up to whole shards (``shard:3``), so the backend was asked
    for 12 of a GPU's 10 shards and one job waited past its window. The plan now books each
    job's whole shares (the catalog pool's ``shares_per_gpu``). Every job must run in the one
    hour a one-GPU pool offers, so the plan holds exactly as many as the shares allow."""
    held, prob, res, reqs = _shares_on_each_gpu(sizes, shares, hours=1)
    assert len(reqs) == fit and len(res.unplaced) == len(sizes) - fit
    assert score_plan(prob, res).slice_violations == 0
    assert max(held.values()) <= shares          # never more than the GPU's shares
