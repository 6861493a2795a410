"""The placement book agrees with the planner's own sets, and books capacity exactly."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carbonsched.catalog import Catalog, load_catalog
from carbonsched.domain import Job, JobPayload
from carbonsched.errors import InputError
from carbonsched.plan import PlanningProblem, compile_sets
from carbonsched.service.placement import Booking, PlacementBook

CAT = load_catalog("china-eastdata-westcompute")
T0 = pd.Timestamp("2023-07-15T00:00:00Z")
HOURS = 24


def _book(placements=(), cat=CAT, pue_hi=None, site_hours=(), running=()) -> PlacementBook:
    """A book over ``cat``; ``pue_hi``: the PUE's upper 95 % bound per hour (else the mean)."""
    slots = pd.date_range(T0, periods=HOURS, freq="h")
    rows = []
    for i, s in enumerate(cat.sites):
        for sig, base in (("carbon_intensity_g_per_kwh", 100.0 + 50 * i),
                          ("pue", 1.2), ("green_surplus_index", 0.0)):
            v = base + (10 * np.sin(np.arange(HOURS) / 3) if sig.startswith("carbon") else 0)
            v = np.broadcast_to(v, (HOURS,))
            hi = pue_hi if sig == "pue" and pue_hi is not None else v
            rows.append(pd.DataFrame({"site": s.id, "signal": sig, "model": "test",
                                      "issued_at": T0, "ts": slots, "mean": v, "lo_80": v,
                                      "hi_80": v, "lo_95": v, "hi_95": hi}))
    doc = {"plan_id": "p", "date": "2023-07-15", "issued_at": "2023-07-15T00:00:00Z",
           "horizon_hours": HOURS, "sites": cat.site_ids, "signal_quality": "modelled",
           "placements": list(placements), "inference": [], "site_hours": list(site_hours),
           "running": list(running)}
    return PlacementBook(cat, doc, pd.concat(rows, ignore_index=True))


BOOK = _book()
# two sites behind a 10 kW grid connection, planned against a PUE bound of 1.25, and 1.6 in the
# warm hours 10-15: 8 kW of IT then 6.25 kW, below their IT caps of 9.9 and 7.8 kW
CAPPED = Catalog(**{**CAT.__dict__, "sites": [
    replace(s, facility_power_cap_kw=10.0) if s.id in ("cn-nm-horinger", "cn-gs-qingyang")
    else s for s in CAT.sites]})
WARM = np.where((np.arange(HOURS) >= 10) & (np.arange(HOURS) < 16), 1.6, 1.25)
CAPPED_BOOK = _book(cat=CAPPED, pue_hi=WARM)
GPU_TYPES = CAT.gpu_types() + ["TPUv9"]


@st.composite
def jobs(draw):
    es = draw(st.integers(-30, 30))
    dur = draw(st.integers(1, 30))
    dl = es + draw(st.integers(0, 40))
    allowed = draw(st.lists(st.sampled_from(CAT.site_ids), max_size=3, unique=True))
    # what it runs: nothing (any backend), a batch script (Slurm only), an image and a
    # command (both), an OCI bundle path and a command (Slurm only), a command (both); the
    # catalog mixes Slurm and Kubernetes sites
    payload = draw(st.sampled_from([
        None, JobPayload(script="#!/bin/sh\ntrue\n"),
        JobPayload(image="registry.example/x:1", command=("python", "x.py")),
        JobPayload(image="/opt/bundles/x", command=("python", "x.py")),
        JobPayload(command="python x.py")]))
    return Job(id="j", tenant="t", gpu_type=draw(st.sampled_from(GPU_TYPES)),
               gpus=draw(st.integers(1, 40)), duration_hours=dur,
               power_per_gpu_kw=draw(st.sampled_from([0.3, 0.7, 3.0])),
               earliest_start=T0 + pd.Timedelta(hours=es),
               deadline=T0 + pd.Timedelta(hours=max(dl, es)), allowed_sites=tuple(allowed),
               payload=payload, max_domains=draw(st.sampled_from([None, 1, 2])))


@pytest.mark.parametrize("book", [BOOK, CAPPED_BOOK], ids=["it-caps", "grid-connection"])
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(job=jobs())
def test_job_options_match_the_planners_compiled_sets(book, job):
    reason, opts = book.job_options(job)
    sets = compile_sets(PlanningProblem(sites=book.sites, jobs=[job], inference=[],
                                        slots=book.slots, signals=book.signals))
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


def _kinds_planned(payload: JobPayload, allowed: tuple[str, ...] = ()) -> tuple:
    """(reason, backend kinds of the sites the planner's sets hold) of a one-GPU job, after
    checking that the book says the same."""
    job = Job(id="b", tenant="t", gpu_type="A100", gpus=1, duration_hours=1,
              power_per_gpu_kw=0.5, earliest_start=T0, deadline=T0 + pd.Timedelta(hours=12),
              allowed_sites=allowed, payload=payload)
    sets = compile_sets(PlanningProblem(sites=BOOK.sites, jobs=[job], inference=[],
                                        slots=BOOK.slots, signals=BOOK.signals))
    reason, opts = BOOK.job_options(job)
    assert reason == sets.reasons.get(0)
    kinds = {s.id: s.backend.kind for s in CAT.sites}
    return reason, {kinds[BOOK.sites[int(s)].id] for s in sets.options[:, 1]}


def test_an_image_given_as_a_path_is_planned_at_slurm_sites_only():
    """An OCI bundle path (Slurm's ``--container``) is no image a pod can pull. Before, such a
    job could be planned at a Kubernetes site, whose pod was then given a path as its image."""
    bundle = JobPayload(image="/opt/bundles/train", command="python3 train.py")
    assert bundle.runs_on("slurm") and not bundle.runs_on("kubernetes")
    assert _kinds_planned(bundle) == (None, {"slurm"})
    # at the limit: a registry image with the same command runs on both
    registry = JobPayload(image="ghcr.io/org/train:1.4", command="python3 train.py")
    assert registry.runs_on("kubernetes") and registry.runs_on("slurm")
    assert _kinds_planned(registry) == (None, {"slurm", "kubernetes"})


def test_an_image_given_as_a_path_no_allowed_site_runs_is_refused_saying_why():
    bundle = JobPayload(image="/opt/bundles/train", command="python3 train.py")
    reason, kinds = _kinds_planned(bundle, ("cn-sh-qingpu",))
    assert kinds == set()
    assert reason == ("NoPayload", (
        "the job gives command, image, which no allowed site's backend runs (cn-sh-qingpu "
        "(kubernetes)): its image '/opt/bundles/train' is a path (an OCI bundle), which only a "
        "Slurm site runs (--container), with a script, script_path or command; a Kubernetes "
        "site pulls an image from a registry; give a registry image such as "
        "'ghcr.io/org/train:1.4', or a command and allow a Slurm site (allowed_sites)"))
    # a bundle path without a command runs nowhere: Slurm needs what to run in it
    reason, kinds = _kinds_planned(JobPayload(image="/opt/bundles/train"))
    assert kinds == set() and reason[0] == "NoPayload"
    assert "its image '/opt/bundles/train' is a path (an OCI bundle)" in reason[1]


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


def test_a_reservation_is_held_to_the_grid_connection_commitments_and_running_work():
    # before, the book held reservations to each site's static IT cap only: 9.9 kW at Horinger,
    # where the planner allows 10 kW / 1.6 = 6.25 kW of IT in the warm hours, 8 kW otherwise.
    # A 7 kW job was offered (and its reservation committed) at 10:00, over the grid connection
    # by 7 x 1.6 - 10 = 1.2 kW
    site = "cn-nm-horinger"
    s, g = CAPPED_BOOK.spos[site], CAPPED_BOOK.gpos["A100"]
    assert CAPPED_BOOK.cap_kw[s, :17].tolist() == pytest.approx([8.0] * 10 + [6.25] * 6 + [8.0])
    job = Job(id="w", tenant="t", gpu_type="A100", gpus=8, duration_hours=2,
              power_per_gpu_kw=0.875, earliest_start=T0 + pd.Timedelta(hours=9),
              deadline=T0 + pd.Timedelta(hours=24), allowed_sites=(site,))
    a = CAPPED_BOOK.place_job(job, T0.to_pydatetime())
    starts = [o["start"] for o in [a["recommended"], *a["alternatives"]]]
    assert a["placed"] and starts == ["2023-07-15T16:00:00Z"]  # the first 2 h clear of 10-15
    for t in range(9, 16):                        # the arbiter refuses every warm start too
        assert not CAPPED_BOOK.fits_with(Booking(s, t, t + 2, g, 8, 7.0), [])
    assert CAPPED_BOOK.fits_with(Booking(s, 16, 18, g, 8, 7.0), [])
    # just at the limit: 6.25 kW fits the warm hours exactly, 6.26 does not
    assert CAPPED_BOOK.fits_with(Booking(s, 10, 16, g, 8, 6.25), [])
    assert not CAPPED_BOOK.fits_with(Booking(s, 10, 16, g, 8, 6.26), [])
    at_limit = Job(**{**job.__dict__, "power_per_gpu_kw": 6.25 / 8, "duration_minutes": 360,
                      "earliest_start": T0 + pd.Timedelta(hours=10),
                      "deadline": T0 + pd.Timedelta(hours=16)})
    a = CAPPED_BOOK.place_job(at_limit, T0.to_pydatetime())
    assert a["placed"] and a["recommended"]["start"] == "2023-07-15T10:00:00Z"
    # a commitment (facility power <= 5 kW at 16:00) and running work (2 kW and 4 GPUs at
    # 17:00-18:30) are the plan's too: free IT power 5 / 1.25 = 4 kW and 8 - 2 = 6 kW there
    rows = [{"site": site, "hour": "2023-07-15T16:00:00Z", "commit_limit_kw": 5.0},
            {"site": site, "hour": "2023-07-15T17:00:00Z", "commit_limit_kw": None}]
    held = [{"job_id": "r0", "site": site, "gpu_type": "A100", "gpus": 4, "it_power_kw": 2.0,
             "start": "2023-07-15T17:00:00Z", "end": "2023-07-15T18:30:00Z"}]
    book = _book(cat=CAPPED, pue_hi=WARM, site_hours=rows, running=held)
    assert book.free_kw[s, 15:20].tolist() == pytest.approx([6.25, 4.0, 6.0, 6.0, 8.0])
    # a query's window inside the horizon leaves the caps past it as the planner has them
    # (before, it wrote the commitment into the grid caps the tail and empty windows read)
    book.job_options(Job(**{**job.__dict__, "earliest_start": T0 + pd.Timedelta(hours=15),
                            "deadline": T0 + pd.Timedelta(hours=18)}))
    assert book._grid_cap_kw[s, 15:18].tolist() == pytest.approx([6.25, 8.0, 8.0])
    assert book.free_gpus[s, 15:20, g].tolist() == [12, 12, 8, 8, 12]
    a = book.place_job(job, T0.to_pydatetime())
    assert a["placed"] and a["recommended"]["start"] == "2023-07-15T19:00:00Z"
    assert not book.fits_with(Booking(s, 16, 18, g, 8, 7.0), [])
    # the running work's GPUs: 8 of 12 free at 17:00 and 18:00 (at the limit), not 9
    assert book.fits_with(Booking(s, 17, 19, g, 8, 1.0), [])
    assert not book.fits_with(Booking(s, 17, 19, g, 9, 1.0), [])
    # running slices: three on GPU 5 hold that one GPU while any runs (before: three GPUs),
    # one on GPU 6 its own; each draws its own power
    slices = [{"job_id": f"m{i}", "site": site, "gpu_type": "A100", "gpus": 1,
               "it_power_kw": 0.1, "start": f"2023-07-15T{h:02d}:00:00Z",
               "end": f"2023-07-15T{h + 2:02d}:00:00Z", "gpu_index": gpu}
              for i, (h, gpu) in enumerate([(2, 5), (2, 5), (3, 5), (3, 6), (7, 5)])]
    book = _book(cat=CAPPED, pue_hi=WARM, running=slices)
    # GPU 5: 02-05 and 07-09, not the gap between (as the planner holds it)
    assert book.free_gpus[s, 1:10, g].tolist() == [12, 11, 10, 10, 12, 12, 11, 11, 12]
    assert book.it_kw[s, 1:6].tolist() == pytest.approx([0.0, 0.2, 0.4, 0.2, 0.0])


@pytest.mark.shared_data
def test_the_daily_pipeline_hands_running_work_to_the_book(shared_data):
    # before, the plan document did not carry the running work the planner held, so a book of
    # a rolling plan offered GPUs that work still held: the Frankfurt fixture's two A100s,
    # one held until 03:30 by running work, are both free from 04:00 only
    from carbonsched.domain import RunningWork, Workload
    from carbonsched.pipeline.daily import run_daily_plan
    from tests.conftest import FIXTURES

    cat = load_catalog(FIXTURES / "catalog" / "frankfurt.toml")
    t0 = pd.Timestamp("2023-07-10T00:00:00Z")
    held = RunningWork(site="de-frankfurt", gpu_type="A100", gpus=1, it_power_kw=0.5,
                       end=t0 + pd.Timedelta(minutes=210), job_id="earlier")
    daily = run_daily_plan("2023-07-10", str(FIXTURES / "catalog" / "frankfurt.toml"),
                           Workload(jobs=[], inference=[]), shared_data, time_limit_s=10,
                           running=[held])
    assert daily.document["running"] == [{
        "job_id": "earlier", "site": "de-frankfurt", "gpu_type": "A100", "gpus": 1,
        "it_power_kw": 0.5, "start": None, "end": "2023-07-10T03:30:00Z", "gpu_index": None}]
    book = PlacementBook(cat, daily.document, daily.forecasts)
    g = book.gpos["A100"]
    assert book.free_gpus[0, :5, g].tolist() == [1, 1, 1, 1, 2]
    assert book.it_kw[0, :5].tolist() == pytest.approx([0.5] * 4 + [0.0])
    gang = Job(id="two", tenant="t", gpu_type="A100", gpus=2, duration_hours=1,
               power_per_gpu_kw=0.5, earliest_start=t0, deadline=t0 + pd.Timedelta(hours=5))
    a = book.place_job(gang, t0.to_pydatetime())
    assert a["placed"] and a["recommended"]["start"] == "2023-07-10T04:00:00Z"
