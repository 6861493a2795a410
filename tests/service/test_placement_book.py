"""The placement book agrees with the planner's own sets, and books capacity exactly."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carbonsched.catalog import load_catalog
from carbonsched.domain import Job, JobPayload
from carbonsched.errors import InputError
from carbonsched.plan import PlanningProblem, compile_sets
from carbonsched.service.placement import PlacementBook

CAT = load_catalog("china-eastdata-westcompute")
T0 = pd.Timestamp("2023-07-15T00:00:00Z")
HOURS = 24


def _book(placements=(), cat=CAT) -> PlacementBook:
    slots = pd.date_range(T0, periods=HOURS, freq="h")
    rows = []
    for i, s in enumerate(cat.sites):
        for sig, base in (("carbon_intensity_g_per_kwh", 100.0 + 50 * i),
                          ("pue", 1.2), ("green_surplus_index", 0.0)):
            v = base + (10 * np.sin(np.arange(HOURS) / 3) if sig.startswith("carbon") else 0)
            rows.append(pd.DataFrame({"site": s.id, "signal": sig, "model": "test",
                                      "issued_at": T0, "ts": slots, "mean": v, "lo_80": v,
                                      "hi_80": v, "lo_95": v, "hi_95": v}))
    doc = {"plan_id": "p", "date": "2023-07-15", "issued_at": "2023-07-15T00:00:00Z",
           "horizon_hours": HOURS, "sites": cat.site_ids, "signal_quality": "modelled",
           "placements": list(placements), "inference": []}
    return PlacementBook(cat, doc, pd.concat(rows, ignore_index=True))


BOOK = _book()
GPU_TYPES = CAT.gpu_types() + ["TPUv9"]


@st.composite
def jobs(draw):
    es = draw(st.integers(-30, 30))
    dur = draw(st.integers(1, 30))
    dl = es + draw(st.integers(0, 40))
    allowed = draw(st.lists(st.sampled_from(CAT.site_ids), max_size=3, unique=True))
    # what it runs: nothing (any backend), a batch script (Slurm only), an image and a
    # command (Kubernetes), a command (both); the catalog mixes Slurm and Kubernetes sites
    payload = draw(st.sampled_from([
        None, JobPayload(script="#!/bin/sh\ntrue\n"),
        JobPayload(image="registry.example/x:1", command=("python", "x.py")),
        JobPayload(command="python x.py")]))
    return Job(id="j", tenant="t", gpu_type=draw(st.sampled_from(GPU_TYPES)),
               gpus=draw(st.integers(1, 40)), duration_hours=dur,
               power_per_gpu_kw=draw(st.sampled_from([0.3, 0.7, 3.0])),
               earliest_start=T0 + pd.Timedelta(hours=es),
               deadline=T0 + pd.Timedelta(hours=max(dl, es)), allowed_sites=tuple(allowed),
               payload=payload, max_domains=draw(st.sampled_from([None, 1, 2])))


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(job=jobs())
def test_job_options_match_the_planners_compiled_sets(job):
    reason, opts = BOOK.job_options(job)
    sets = compile_sets(PlanningProblem(sites=BOOK.sites, jobs=[job], inference=[],
                                        slots=BOOK.slots, signals=BOOK.signals))
    if 0 in sets.reasons:
        assert reason == sets.reasons[0]
        assert len(opts) == 0
    else:
        assert reason is None
        assert sorted(map(tuple, opts.tolist())) == sorted(map(tuple, sets.options.tolist()))


def test_a_script_or_a_topology_the_site_cannot_hold_is_refused_as_the_planner_does():
    # before, the book placed a batch script at a Kubernetes site (dispatch then refused it)
    # and a same-domain 16-GPU gang at Toronto, whose domains hold 8 GPUs (the planner said
    # DomainTooSmall): the client saw a reservation the next run undid
    script = Job(id="s", tenant="t", gpu_type="A100", gpus=1, duration_hours=1,
                 power_per_gpu_kw=0.5, earliest_start=T0, deadline=T0 + pd.Timedelta(hours=12),
                 allowed_sites=("cn-sh-qingpu",), payload=JobPayload(script="#!/bin/sh\n"))
    reason, opts = BOOK.job_options(script)
    assert reason[0] == "NoPayload" and len(opts) == 0
    assert "cn-sh-qingpu (kubernetes)" in reason[1]
    # at the limit: the same script allowed at a Slurm site too is placed there only
    both = Job(**{**script.__dict__, "allowed_sites": ("cn-sh-qingpu", "cn-nm-horinger")})
    reason, opts = BOOK.job_options(both)
    assert reason is None and {BOOK.sites[int(s)].id for s in opts[:, 1]} == {"cn-nm-horinger"}


def test_the_planner_places_a_payload_only_where_its_backend_runs_it():
    # before, a batch script with no allowed_sites could be planned at a Kubernetes site,
    # whose dispatch then refused it (NoPayload): its capacity planned for nothing
    kinds = {s.id: s.backend.kind for s in CAT.sites}
    for payload, kind in ((JobPayload(script="#!/bin/sh\ntrue\n"), "slurm"),
                          (JobPayload(image="registry.example/x:1"), "kubernetes")):
        job = Job(id="p", tenant="t", gpu_type="A100", gpus=1, duration_hours=1,
                  power_per_gpu_kw=0.5, earliest_start=T0,
                  deadline=T0 + pd.Timedelta(hours=12), payload=payload)
        sets = compile_sets(PlanningProblem(sites=BOOK.sites, jobs=[job], inference=[],
                                            slots=BOOK.slots, signals=BOOK.signals))
        assert {kinds[BOOK.sites[int(s)].id] for s in sets.options[:, 1]} == {kind}
    # a command runs on both (at the limit: nothing is taken away)
    job = Job(id="c", tenant="t", gpu_type="A100", gpus=1, duration_hours=1,
              power_per_gpu_kw=0.5, earliest_start=T0, deadline=T0 + pd.Timedelta(hours=12),
              payload=JobPayload(command="python x.py"))
    sets = compile_sets(PlanningProblem(sites=BOOK.sites, jobs=[job], inference=[],
                                        slots=BOOK.slots, signals=BOOK.signals))
    assert {kinds[BOOK.sites[int(s)].id] for s in sets.options[:, 1]} == {"slurm",
                                                                          "kubernetes"}


@pytest.mark.parametrize("max_domains", [1, 2])
def test_a_gang_its_domains_cannot_hold_is_refused_as_the_planner_does(max_domains):
    # Toronto's A100 domains hold one node of 8 GPUs: a 16-GPU gang needs 2 domains. Before,
    # the book placed it "same-domain" (the planner: DomainTooSmall). At the limit: allowed 2
    # domains, both place it
    book = _book(cat=load_catalog("global"))
    gang = Job(id="g", tenant="t", gpu_type="A100", gpus=16, duration_hours=1,
               power_per_gpu_kw=0.5, earliest_start=T0, deadline=T0 + pd.Timedelta(hours=12),
               allowed_sites=("ca-on-toronto",), max_domains=max_domains)
    reason, opts = book.job_options(gang)
    sets = compile_sets(PlanningProblem(sites=book.sites, jobs=[gang], inference=[],
                                        slots=book.slots, signals=book.signals))
    assert reason == sets.reasons.get(0)
    assert (reason is not None and reason[0] == "DomainTooSmall") == (max_domains == 1)
    assert (len(opts) > 0) == (max_domains == 2)


def test_plan_placements_and_reservations_take_capacity():
    site = CAT.site("cn-gz-guian")
    pool = site.gpus["A100"].count
    # the plan holds all but 2 A100s at 10:00-12:00
    p = {"job_id": "p1", "site": site.id, "start": "2023-07-15T10:00:00Z",
         "end": "2023-07-15T12:00:00Z", "gpu_type": "A100", "gpus": pool - 2,
         "energy_kwh": (pool - 2) * 0.01 * 1.2 * 2, "emissions_kg": 0.0}
    book = _book([p])
    s = book.spos[site.id]
    g = book.gpos["A100"]
    assert book.free_gpus[s, 10, g] == 2 and book.free_gpus[s, 9, g] == pool
    assert book.it_kw[s, 10] == pytest.approx((pool - 2) * 0.01)
    j = Job(id="r", tenant="t", gpu_type="A100", gpus=2, duration_hours=2,
            power_per_gpu_kw=0.01, earliest_start=T0 + pd.Timedelta(hours=10),
            deadline=T0 + pd.Timedelta(hours=12), allowed_sites=(site.id,))
    a = book.place_job(j, T0.to_pydatetime())
    assert a["placed"] and a["recommended"]["start"] == "2023-07-15T10:00:00Z"
    book.add_reservation("r", book.booking_of_answer(j, a))
    assert book.free_gpus[s, 10, g] == 0
    again = book.place_job(Job(**{**j.__dict__, "id": "r2", "gpus": 1}), T0.to_pydatetime())
    assert again["reason"] == "InsufficientCapacity"
    book.release("r")
    assert book.free_gpus[s, 10, g] == 2


def test_a_minute_placement_books_its_partial_hours():
    # a 150-minute placement 02:00-04:30 holds its GPUs and power in hour 4 too (before the
    # fix the end was rounded down: hour 4 looked free), and its IT power is the plan's
    # facility energy over 2.5 hours at PUE 1.2
    site = CAT.site("cn-gz-guian")
    pool = site.gpus["A100"].count
    kw = (pool - 1) * 0.01
    p = {"job_id": "m1", "site": site.id, "start": "2023-07-15T02:00:00Z",
         "end": "2023-07-15T04:30:00Z", "gpu_type": "A100", "gpus": pool - 1,
         "energy_kwh": kw * 1.2 * 2.5, "emissions_kg": 0.0}
    book = _book([p])
    s, g = book.spos[site.id], book.gpos["A100"]
    assert [int(book.free_gpus[s, t, g]) for t in (1, 2, 3, 4, 5)] == [pool, 1, 1, 1, pool]
    assert [book.it_kw[s, t] for t in (1, 2, 3, 4, 5)] == pytest.approx([0, kw, kw, kw, 0])
    # a start inside an hour (02:45-03:15) holds both hours it touches, at its own power
    q = {**p, "job_id": "m2", "start": "2023-07-15T02:45:00Z", "end": "2023-07-15T03:15:00Z",
         "gpus": 1, "energy_kwh": 0.01 * 1.2 * 0.5}
    book2 = _book([q])
    assert [int(book2.free_gpus[s, t, g]) for t in (1, 2, 3, 4)] == [pool, pool - 1,
                                                                      pool - 1, pool]
    assert book2.it_kw[s, 2] == pytest.approx(0.01)


def test_emissions_are_the_plans_accounting():
    j = Job(id="e", tenant="t", gpu_type="A100", gpus=2, duration_hours=3,
            power_per_gpu_kw=0.5, earliest_start=T0, deadline=T0 + pd.Timedelta(hours=24))
    a = BOOK.place_job(j, T0.to_pydatetime())
    best = a["recommended"]
    s = BOOK.spos[best["site"]]
    t = BOOK.tpos[pd.Timestamp(best["start"])]
    # no surplus: kW x PUE x CI / 1000 over the three hours
    want = float((1.0 * BOOK.pue[s, t:t + 3] * BOOK.ci[s, t:t + 3]).sum() / 1000)
    assert best["emissions_kg"] == pytest.approx(want, rel=1e-6)
    # the cheapest over every site and start
    costs = [(1.0 * BOOK.pue[k, u:u + 3] * BOOK.ci[k, u:u + 3]).sum() / 1000
             for k in range(len(BOOK.sites)) if BOOK.count[k, BOOK.gpos["A100"]] >= 2
             for u in range(HOURS - 2)]
    assert best["emissions_kg"] == pytest.approx(min(costs), rel=1e-6)


def test_a_plan_with_work_where_the_catalog_has_no_site_or_gpu_type_is_refused():
    # before: that work was dropped from the ledger, so the book offered the GPUs and power
    # the plan already uses (the report refuses the same plan, UnknownSiteError)
    site = CAT.sites[0]
    gtype = next(iter(site.gpus))
    ok = {"job_id": "ok", "site": site.id, "start": T0.isoformat(),
          "end": (T0 + pd.Timedelta(hours=1)).isoformat(), "gpu_type": gtype, "gpus": 1,
          "energy_kwh": 1.0}
    assert _book([ok]).plan_id == "p"                       # known site and type: booked
    # a type another site has but this one lacks is refused too (it would be booked against a
    # count of 0 there)
    elsewhere = next(g for s in CAT.sites for g in s.gpus if g not in site.gpus)
    for bad, named in ((dict(ok, site="mars-site"), f"mars-site ({gtype})"),
                       (dict(ok, gpu_type="TPUv9"), f"{site.id} (TPUv9)"),
                       (dict(ok, gpu_type=elsewhere), f"{site.id} ({elsewhere})")):
        with pytest.raises(InputError, match=r"plan p places work at 1 site/GPU type\(s\) "
                                             rf"catalog .* no longer has: {re.escape(named)}"):
            _book([ok, bad])
