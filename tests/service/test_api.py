"""Every route of a real `carbonsched serve` process over HTTP (uvicorn on loopback, httpx)."""

from __future__ import annotations

import time

import httpx
import numpy as np
import pandas as pd
import pytest
from sqlalchemy import text

from carbonsched.catalog import load_catalog
from carbonsched.store import Store
from tests.service.conftest import AS_OF, CATALOG, PLAN_DATE, Server, copy_db, mint

pytestmark = pytest.mark.shared_data

SECRET = "bootstrap-secret-token-do-not-log-7f3a"
MAX_JOBS = 5
MAX_BYTES = 20_000


class Api:
    def __init__(self, server: Server, tokens: dict[str, str]) -> None:
        self.server = server
        self.url = server.url
        self.tokens = tokens
        self.client = httpx.Client(base_url=server.url, timeout=30)

    def h(self, role: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[role]}"}

    def get(self, path: str, role: str | None = "read", **kw) -> httpx.Response:
        return self.client.get(path, headers=self.h(role) if role else {}, **kw)

    def post(self, path: str, body, role: str | None = "read", **kw) -> httpx.Response:
        return self.client.post(path, json=body, headers=self.h(role) if role else {}, **kw)


@pytest.fixture(scope="module")
def api(plan_db, tmp_path_factory) -> Api:
    d = tmp_path_factory.mktemp("api")
    url = copy_db(plan_db, d)
    tokens = {r: mint(url, r) for r in ("read", "submit", "admin")}
    srv = Server(url, ["--no-cron", "--as-of", AS_OF, "--catalog", CATALOG],
                 {"CARBONSCHED_MAX_JOBS_PER_REQUEST": str(MAX_JOBS),
                  "CARBONSCHED_MAX_REQUEST_BYTES": str(MAX_BYTES),
                  "CARBONSCHED_BOOTSTRAP_ADMIN_TOKEN": SECRET}, d / "serve.log")
    try:
        srv.wait_ready(90, "/readyz")
        yield Api(srv, tokens)
    finally:
        srv.stop()


def job(jid: str, **kw) -> dict:
    base = {"id": jid, "tenant": "t1", "gpu_type": "A100", "gpus": 4, "duration_hours": 3,
            "power_per_gpu_kw": 0.7, "earliest_start": "2023-07-15T00:00:00Z",
            "deadline": "2023-07-15T20:00:00Z"}
    return base | kw


def forecast(api: Api, site: str, signal: str) -> pd.Series:
    r = api.get(f"/v1/forecasts/{site}", params={"signal": signal})
    assert r.status_code == 200, r.text
    pts = r.json()["points"]
    return pd.Series([p["mean"] for p in pts],
                     index=pd.to_datetime([p["ts"] for p in pts], utc=True))


# --- health, readiness, metrics ----------
def test_health_ready_and_metrics(api):
    assert api.get("/healthz", role=None).json() == {"status": "ok", "checks": {}}
    ready = api.get("/readyz", role=None).json()
    assert ready["status"] == "ok" and ready["checks"]["store"] == "ok"
    assert ready["checks"]["cron"] == "disabled"
    plan_id = api.get("/v1/plans/latest").json()["plan_id"]
    assert ready["checks"]["plan"] == plan_id
    api.get("/v1/sites")
    m = api.get("/metrics", role=None)
    assert m.status_code == 200 and m.headers["content-type"].startswith("text/plain")
    text = m.text
    for name in ("carbonsched_plan_runs_total", "carbonsched_solver_seconds",
                 "carbonsched_dispatch_outcomes_total",
                 "carbonsched_http_request_duration_seconds_bucket"):
        assert name in text
    line = next(x for x in text.splitlines() if x.startswith(
        "carbonsched_http_request_duration_seconds_count") and 'route="/v1/sites"' in x)
    assert float(line.split()[-1]) >= 1


def test_secret_never_logged_and_bootstrap_token_is_admin(api):
    assert SECRET not in api.server.logs()
    assert "**********" in api.server.logs()
    r = api.client.get("/v1/runs", headers={"Authorization": f"Bearer {SECRET}"})
    assert r.status_code == 200


# --- security ----------
def test_401_without_or_with_a_bad_token(api):
    r = api.get("/v1/sites", role=None)
    assert r.status_code == 401
    assert r.headers["www-authenticate"].startswith("Bearer")
    assert "missing bearer token" in r.json()["detail"]
    r = api.client.get("/v1/sites", headers={"Authorization": "Bearer cst_nope"})
    assert r.status_code == 401 and "invalid or revoked" in r.json()["detail"]
    r = api.get("/emissions/forecasts/current", role=None, params={"location": "cn-gs-qingyang"})
    assert r.status_code == 401


def test_403_for_a_missing_role(api):
    r = api.post("/v1/jobs", {"jobs": [job("forbidden-1")]}, role="read")
    assert r.status_code == 403
    assert "role 'read' lacks 'submit'" in r.json()["detail"]
    r = api.post("/v1/placements", job("forbidden-2", reserve=True), role="read")
    assert r.status_code == 403 and "reserve: true needs role 'submit'" in r.json()["detail"]
    r = api.post("/v1/runs", None, role="submit")
    assert r.status_code == 403 and "lacks 'admin'" in r.json()["detail"]
    r = api.post("/v1/runs", None, role="admin")
    assert r.status_code == 409 and "--no-cron" in r.json()["detail"]


# --- placements ----------
def test_placement_is_the_cheapest_option_priced_on_the_plans_forecast(api):
    r = api.post("/v1/placements", job("q-1", alternatives=5))
    assert r.status_code == 200, r.text
    a = r.json()
    assert a["placed"] and a["reason"] == "Placed" and not a["reserved"]
    best, agn = a["recommended"], a["carbon_agnostic"]
    assert a["plan_id"] == api.get("/v1/plans/latest").json()["plan_id"]
    # never in the past of the pinned clock
    assert pd.Timestamp(best["start"]) >= pd.Timestamp(AS_OF).ceil("h")
    assert pd.Timestamp(best["end"]) - pd.Timestamp(best["start"]) == pd.Timedelta(hours=3)
    # next best options are dearer and at other sites
    assert len(a["alternatives"]) >= 1
    for alt in a["alternatives"]:
        assert alt["emissions_kg"] >= best["emissions_kg"] - 1e-9
        assert alt["site"] != best["site"]
    assert best["emissions_kg"] <= agn["emissions_kg"] + 1e-9
    assert a["saving_kg"] == pytest.approx(agn["emissions_kg"] - best["emissions_kg"], abs=1e-5)
    # the carbon-agnostic choice: the earliest start with room (2023-07-15 00:00)
    assert agn["start"] == "2023-07-15T00:00:00Z"
    # numbers recomputed from the forecasts the service exposes
    hours = pd.date_range(best["start"], periods=3, freq="h")
    ci = forecast(api, best["site"], "carbon_intensity").reindex(hours)
    pue = forecast(api, best["site"], "pue").reindex(hours)
    assert best["carbon_intensity_g_per_kwh"] == pytest.approx(ci.mean(), abs=1e-3)
    assert best["energy_kwh"] == pytest.approx(4 * 0.7 * pue.sum(), rel=1e-5)
    # surplus is absorbed first, so emissions never exceed the grid-only figure
    assert best["emissions_kg"] <= float((4 * 0.7 * pue * ci).sum() / 1000) + 1e-6


def test_reserve_books_capacity_into_the_plan(api):
    site = "cn-gz-guian"
    window = {"allowed_sites": [site], "earliest_start": "2023-07-15T10:00:00Z",
              "deadline": "2023-07-15T12:00:00Z", "duration_hours": 2}
    pool = next(s for s in api.get("/v1/sites").json()["data"] if s["id"] == site)["gpus"]["A100"]

    def placed(gpus: int, jid: str = "probe") -> bool:
        r = api.post("/v1/placements", job(jid, gpus=gpus, **window))
        assert r.status_code == 200, r.text
        return r.json()["placed"]

    assert placed(1)
    # the largest gang that fits in the window (binary search over the gang sizes the site's
    # node shape can run: up to one node, or whole nodes; others are GangNotWholeNodes), then
    # what is left of the window (less than that gang's next size) in one-node gangs
    per_node = load_catalog(CATALOG).site(site).gpus["A100"].node_gpus
    sizes = [g for g in range(1, pool + 1) if g <= per_node or g % per_node == 0]

    def largest() -> int:
        lo, hi = -1, len(sizes) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if placed(sizes[mid]) else (lo, mid - 1)
        return sizes[lo] if lo >= 0 else 0

    name, rest = "reserved-max", 0
    while (gpus := largest()) > 0:
        r = api.post("/v1/placements", job(name, gpus=gpus, reserve=True, **window),
                     role="submit")
        assert r.status_code == 200 and r.json()["reserved"], r.text
        rest += 1
        name = f"reserved-rest-{rest}"
        assert rest <= pool
    # the window is now full: not even one GPU fits
    r = api.post("/v1/placements", job("probe-after", gpus=1, **window)).json()
    assert not r["placed"] and r["reason"] == "InsufficientCapacity"
    assert r["recommended"] is None
    # the reservation is a job in state Planned
    j = api.get("/v1/jobs/reserved-max").json()
    assert (j["state"], j["reason"], j["site"], j["source"]) == ("Planned", "Placed", site, "api")
    assert j["start"] == "2023-07-15T10:00:00Z"
    # the same id cannot be reserved twice
    r = api.post("/v1/placements", job("reserved-max", gpus=1, reserve=True), role="submit")
    assert r.status_code == 409 and "already exists" in r.json()["detail"]


def test_inference_placement_within_the_slo(api):
    q = {"kind": "inference", "area": "shanghai", "slo_ms": 30, "gpu_type": "A100", "gpus": 2,
         "start": "2023-07-15T08:00:00Z", "duration_hours": 2}
    a = api.post("/v1/placements", q).json()
    assert a["placed"] and a["area"] == "shanghai"
    sites = {s["id"]: s for s in api.get("/v1/sites").json()["data"]}
    assert a["recommended"]["latency_ms"] <= 30
    assert a["carbon_agnostic"]["latency_ms"] == min(
        o["latency_ms"] for o in [a["recommended"], a["carbon_agnostic"], *a["alternatives"]])
    assert a["recommended"]["site"] in sites
    assert a["recommended"]["emissions_kg"] <= a["carbon_agnostic"]["emissions_kg"] + 1e-9
    past = api.post("/v1/placements", q | {"start": "2023-07-14T08:00:00Z"}).json()
    assert past["reason"] == "DeadlinePassed" and "before the service's now" in past["detail"]
    # off the hour: refused as a workload file's inference hour is (before: rounded down)
    odd = api.post("/v1/placements", q | {"start": "2023-07-15T08:20:00Z"})
    assert odd.status_code == 422 and "is not on the hour" in odd.json()["message"]
    tight = api.post("/v1/placements", q | {"slo_ms": 0.5}).json()
    assert not tight["placed"] and "within 0.5 ms of shanghai" in tight["detail"]
    # the SLO bound is a workload file's (100 s): before, the API refused above 10 s what a
    # file accepts. At the limit: 100,000 ms accepted, just above refused
    assert api.post("/v1/placements", q | {"slo_ms": 100_000}).status_code == 200
    over = api.post("/v1/placements", q | {"slo_ms": 100_000.5})
    assert over.status_code == 422 and "slo_ms" in over.text


def test_unplaceable_jobs_say_why(api):
    r = api.post("/v1/placements", job("too-big", gpus=100_000)).json()
    assert (r["placed"], r["reason"]) == (False, "GangTooLarge")
    # 5 A100: more than a hub node's 4 and an edge node's 3, and whole nodes of neither
    r = api.post("/v1/placements", job("odd-gang", gpus=5)).json()
    assert (r["placed"], r["reason"]) == (False, "GangNotWholeNodes")
    assert "cn-nm-horinger: 4 per node" in r["detail"] and "at most 4 GPUs" in r["detail"]
    r = api.post("/v1/placements", job("gpu-x", gpu_type="TPUv9")).json()
    assert r["reason"] == "UnknownGpuType" and "TPUv9" in r["detail"]
    r = api.post("/v1/placements", job("late", earliest_start="2023-07-20T00:00:00Z",
                                       deadline="2023-07-20T10:00:00Z")).json()
    # after the plan's horizon: pending for a later plan (issue 14), not "no slot"
    assert r["reason"] == "DeferredPastHorizon"
    assert "current plan covers [2023-07-15T00:00:00Z" in r["detail"]
    r = api.post("/v1/placements", job("past", earliest_start="2023-07-14T00:00:00Z",
                                       deadline="2023-07-14T10:00:00Z")).json()
    assert r["reason"] == "DeadlinePassed"


# --- 404 and 422 ----------
INF = {"kind": "inference", "area": "shanghai", "slo_ms": 30, "gpu_type": "A100", "gpus": 2,
       "start": "2023-07-15T08:00:00Z"}


@pytest.mark.parametrize("body, fragment", [
    # the job fields' messages are the job schema's, the same as a workload file's
    (job("n1", earliest_start="2023-07-15T00:00:00"),
     "earliest_start: timestamp '2023-07-15T00:00:00' is naive (no UTC offset)"),
    (job("n2", deadline="2023-07-14T00:00:00Z"), "deadline 2023-07-14T00:00:00+00:00 is before"),
    (job("n3", gpus=0), "gpus: must be 1..100000 GPUs, got 0; give a whole number of GPUs"),
    (job("n4", colour="red"), "colour: unknown field; remove it or use one of id, tenant"),
    (job("n5", kind="gaming"), "kind: unknown job kind 'gaming'; give 'training' or 'batch'"),
    # an inference query's fields: the workload file's inference rules and words (before:
    # pydantic's "Field required", and a start off the hour was rounded down)
    ({"kind": "inference", "area": "shanghai"},
     "slo_ms: is missing; give slo_ms for an inference query"),
    (INF | {"start": "2023-07-15T08:30:00Z"},
     "start: timestamp '2023-07-15T08:30:00Z' is not on the hour; plans use hourly slots; "
     "round it to the hour"),
    (INF | {"slo_ms": 100_000.5}, "slo_ms: must be a finite number > 0 and <= 100000 ms"),
    (INF | {"gpus": 0}, "gpus: must be 1..100000 GPUs, got 0; give a whole number of GPUs"),
    (INF | {"alternatives": 21}, "alternatives: must be 0..20 options, got 21"),
])
def test_422_names_the_field_and_the_problem(api, body, fragment):
    r = api.post("/v1/placements", body)
    assert r.status_code == 422
    assert fragment in r.json()["message"], r.json()["message"]
    assert isinstance(r.json()["detail"], list)


def test_404_unknown_site_area_job_plan(api):
    r = api.get("/v1/forecasts/nowhere")
    assert r.status_code == 404 and "unknown site 'nowhere'; known sites:" in r.json()["detail"]
    r = api.post("/v1/placements", job("x404", allowed_sites=["nowhere"]))
    assert r.status_code == 404 and "unknown site 'nowhere'" in r.json()["detail"]
    r = api.post("/v1/placements", {"kind": "inference", "area": "atlantis", "slo_ms": 20,
                                    "gpu_type": "A100", "gpus": 1,
                                    "start": "2023-07-15T08:00:00Z"})
    assert r.status_code == 404 and "'atlantis'" in r.json()["detail"]
    r = api.get("/v1/jobs/never-submitted")
    assert r.status_code == 404 and "no job 'never-submitted'" in r.json()["detail"]
    r = api.get("/v1/plans/2020-01-01")
    assert r.status_code == 404 and "no plan for 2020-01-01" in r.json()["detail"]


def test_request_limits(api):
    r = api.post("/v1/jobs", {"jobs": [job(f"lim-{i}") for i in range(MAX_JOBS + 1)]},
                 role="submit")
    assert r.status_code == 422 and f"at most {MAX_JOBS} are accepted" in r.json()["message"]
    big = {"jobs": [job(f"big-{i}", tenant="x" * 90) for i in range(200)]}
    r = api.post("/v1/jobs", big, role="submit")
    assert r.status_code == 413 and f"larger than {MAX_BYTES} bytes" in r.json()["detail"]
    # streamed without a Content-Length (chunked): counted as it arrives
    r = api.client.post("/v1/placements", content=iter([b"{" * 8000] * 4),
                        headers=api.h("read") | {"content-type": "application/json"})
    assert r.status_code == 413
    # the deployment's limit of jobs is in its OpenAPI document
    doc = api.client.get("/openapi.json").json()
    assert doc["components"]["schemas"]["JobsCreate"]["properties"]["jobs"]["maxItems"] == MAX_JOBS


def test_a_body_that_is_not_text_is_a_documented_400(api):
    doc = api.client.get("/openapi.json").json()
    for path in ("/v1/jobs", "/v1/placements"):
        r = api.client.post(path, content=b"\x80{", headers=api.h("submit") | {
            "content-type": "application/json"})
        assert r.status_code == 400 and r.json() == {
            "detail": "There was an error parsing the body"}
        assert doc["paths"][path]["post"]["responses"]["400"]["content"][
            "application/json"]["schema"] == {"$ref": "#/components/schemas/ErrorPublic"}


# --- jobs ----------
def test_submit_and_read_jobs(api):
    body = {"jobs": [job("sub-1", earliest_start="2023-07-15T08:00:00+08:00"),
                     job("sub-2", gpus=100_000)]}
    r = api.post("/v1/jobs", body, role="submit")
    assert r.status_code == 201, r.text
    out = {j["id"]: j for j in r.json()["data"]}
    assert out["sub-1"]["state"] == "Planned" and out["sub-1"]["site"]
    assert out["sub-2"]["state"] == "Pending" and out["sub-2"]["reason"] == "GangTooLarge"
    assert api.get("/v1/jobs/sub-2").json()["reason"] == "GangTooLarge"
    got = api.get("/v1/jobs/sub-1").json()
    assert got == out["sub-1"]
    # +08:00 earliest start honoured in UTC
    assert pd.Timestamp(got["start"]) >= pd.Timestamp("2023-07-15T00:00:00Z")
    r = api.post("/v1/jobs", {"jobs": [job("sub-1")]}, role="submit")
    assert r.status_code == 409 and "'sub-1' already exists" in r.json()["detail"]
    r = api.post("/v1/jobs", {"jobs": [job("dup"), job("dup")]}, role="submit")
    assert r.status_code == 422 and "appears twice" in r.json()["message"]
    # a job of the plan itself
    plan = api.get("/v1/plans/latest").json()
    p = plan["placements"][0]
    j = api.get(f"/v1/jobs/{p['job_id']}").json()
    assert (j["source"], j["state"], j["site"]) == ("plan", "Planned", p["site"])
    # its id cannot be submitted: before, the API job was stored and never planned as itself
    r = api.post("/v1/jobs", {"jobs": [job("fresh-1"), job(p["job_id"])]}, role="submit")
    assert r.status_code == 409, r.text
    assert r.json()["detail"].startswith(f"job id {p['job_id']!r} is taken by a job of the "
                                         f"current plan {plan['plan_id'][:12]}")
    assert api.get("/v1/jobs/fresh-1").status_code == 404        # nothing of it was stored
    r = api.post("/v1/placements", job(p["job_id"], reserve=True), role="submit")
    assert r.status_code == 409 and "is taken by a job of the current plan" in r.json()["detail"]
    assert "reserve it under a new id" in r.json()["detail"]


def test_a_job_naming_an_unknown_site_stores_nothing_of_its_request(api):
    # [good, bad]: before, the good job was stored (and booked) and then the request answered
    # 404, so the client's retry met 409; with no plan loaded the bad one was stored too and
    # stopped every later run. Now every job's sites are checked before any is stored
    body = {"jobs": [job("site-ok"), job("site-bad", allowed_sites=["mars-site"])]}
    r = api.post("/v1/jobs", body, role="submit")
    assert r.status_code == 404 and "mars-site" in r.json()["detail"], r.text
    assert api.get("/v1/jobs/site-ok").status_code == 404
    assert api.get("/v1/jobs/site-bad").status_code == 404
    r = api.post("/v1/jobs", {"jobs": [job("site-ok")]}, role="submit")
    assert r.status_code == 201, r.text


def test_a_dispatched_job_reads_its_state_from_the_outbox(api):
    # dispatch submitted disp-1 and its backend runs it: GET says Running, not Planned
    from datetime import UTC, datetime

    from sqlalchemy.orm import Session

    from carbonsched.store import Store
    from carbonsched.store.models import DispatchRow

    r = api.post("/v1/jobs", {"jobs": [job("disp-1")]}, role="submit")
    assert r.status_code == 201 and r.json()["data"][0]["state"] == "Planned", r.text
    assert api.get("/v1/jobs/disp-1").json()["state"] == "Planned"
    now = datetime(2023, 7, 15, 1, tzinfo=UTC)
    with Session(Store(api.server.db_url).engine) as s:
        s.add(DispatchRow(key="disp-1#0", job_id="disp-1", piece=0, plan_id="p-dispatched",
                          site="cn-gs-qingyang", backend="slurm:gs", state="Running",
                          reason="Started", detail="", backend_id="gs:7", request_json="{}",
                          planned_start=datetime(2023, 7, 15, 2, tzinfo=UTC),
                          planned_end=datetime(2023, 7, 15, 5, tzinfo=UTC), attempts=1,
                          created_at=now, updated_at=now, submit_attempted_at=now))
        s.commit()
    got = api.get("/v1/jobs/disp-1").json()
    assert (got["state"], got["reason"], got["plan_id"]) == ("Running", "Started",
                                                             "p-dispatched")
    assert got["detail"] == "dispatched from plan p-dispatched to slurm:gs as gs:7"


# --- plans, sites, forecasts ----------
def test_plans(api):
    latest = api.get("/v1/plans/latest").json()
    assert latest["date"] == PLAN_DATE and latest["catalog"] == CATALOG
    assert api.get(f"/v1/plans/{PLAN_DATE}").json() == latest
    r = api.get("/v1/plans/2023-13-45")
    assert r.status_code == 422 and "not a calendar date" in r.json()["message"]
    r = api.get("/v1/plans/15-07-2023")
    assert r.status_code == 422


def test_sites(api):
    s = api.get("/v1/sites").json()
    assert s["catalog"] == CATALOG and s["count"] == len(s["data"]) == 8
    hub = next(x for x in s["data"] if x["id"] == "cn-gs-qingyang")
    assert hub["role"] == "green-hub" and hub["signal_quality"] == "modelled"
    assert hub["in_plan"] is True and hub["note"] == ""
    assert s["plan_id"] == api.get("/v1/plans/latest").json()["plan_id"] and s["detail"] == ""


def test_sites_say_what_the_plan_left_out_and_when_there_is_no_plan(plan_db, start_server,
                                                                     tmp_path):
    """A site the served plan left out is not shown with the catalog's signal quality as if it
    had been planned: `in_plan` false, no quality, a note naming the plan. Without a plan the
    catalog's quality is shown, and the answer says there is no plan."""
    url = copy_db(plan_db, tmp_path / "db")
    store = Store(url)
    doc = store.get_plan(store.latest_plan_id())
    rows = store.forecasts(doc["plan_id"])
    with store.engine.begin() as conn:  # children first (SQLite enforces no cascade)
        for table in ("forecasts", "inference_placements", "placements", "plans"):
            conn.execute(text(f"DELETE FROM {table}"))  # noqa: S608 - the names above
    token = mint(url, "read")
    srv = start_server(url, "--no-cron", "--as-of", AS_OF, "--catalog", CATALOG,
                       env={"CARBONSCHED_BOOK_REFRESH_S": "0.5"})
    c = httpx.Client(base_url=srv.url, timeout=30, headers={"Authorization": f"Bearer {token}"})
    s = c.get("/v1/sites").json()
    cat = load_catalog(CATALOG)
    assert s["plan_id"] is None and s["detail"] == (
        f"no plan yet for catalog {CATALOG!r}; the daily run makes one (GET /v1/runs); "
        "signal_quality is the catalog's declared quality")
    assert {(x["signal_quality"], x["in_plan"], x["note"]) for x in s["data"]} == {
        (str(cat.signal_quality), None, "")}
    # the plan again, as if the pipeline could not read one site's signals: left out of it
    busy = {p["site"] for p in doc["placements"] + doc["inference"]}
    out = next(x for x in doc["sites"] if x not in busy)
    doc = {**doc, "plan_id": "d" * 32, "sites": [x for x in doc["sites"] if x != out],
           "site_signal_quality": {k: v for k, v in doc["site_signal_quality"].items()
                                   if k != out},
           "notes": [f"site {out} left out: no carbon intensity to forecast from", *doc["notes"]]}
    store.save_plan(doc, rows[rows["site"] != out])
    store.engine.dispose()
    s = _wait(lambda: (r := c.get("/v1/sites").json())["plan_id"] == doc["plan_id"] and r)
    assert s["detail"] == "" and s["count"] == len(cat.sites), s["detail"]
    by_id = {x["id"]: x for x in s["data"]}
    assert (by_id[out]["in_plan"], by_id[out]["signal_quality"], by_id[out]["note"]) == (
        False, None, f"site {out!r} was left out of plan {'d' * 32} (see the plan's notes)")
    for sid in doc["sites"]:
        assert (by_id[sid]["in_plan"], by_id[sid]["signal_quality"], by_id[sid]["note"]) == (
            True, doc["site_signal_quality"][sid], "")
    # the forecast route says the same of it
    r = c.get(f"/v1/forecasts/{out}")
    assert r.status_code == 404 and by_id[out]["note"] in r.text


def _wait(pred, timeout: float = 30.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if got := pred():
            return got
        time.sleep(0.2)
    raise AssertionError("condition not met in time")


@pytest.mark.parametrize("signal", ["carbon_intensity", "green_surplus", "pue"])
def test_forecasts_with_intervals(api, signal):
    f = api.get("/v1/forecasts/cn-gs-qingyang", params={"signal": signal}).json()
    assert f["signal"] == signal and len(f["points"]) == 24
    assert f["issued_at"] == "2023-07-15T00:00:00Z" and f["signal_quality"] == "modelled"
    assert f["model"]
    for p in f["points"]:
        assert p["lo_95"] <= p["lo_80"] + 1e-9 <= p["mean"] + 2e-9 <= p["hi_80"] + 3e-9
        assert p["hi_80"] <= p["hi_95"] + 1e-9
    r = api.get("/v1/forecasts/cn-gs-qingyang", params={"signal": "wind"})
    assert r.status_code == 422 and "signal" in r.json()["message"]


# --- Carbon Aware SDK: tests/service/test_carbon_aware_sdk.py ----------


# --- OpenAPI ----------
OPERATION_IDS = {
    "createPlacement", "submitJobs", "getJob", "getLatestPlan", "getPlanByDate", "listSites",
    "getSiteForecast", "listRuns", "triggerRun", "health", "ready", "metrics",
    # the Carbon Aware SDK's own operation ids (its OpenAPI document)
    "GetBestEmissionsDataForLocationsByTime", "GetEmissionsDataForLocationsByTime",
    "GetEmissionsDataForLocationByTime", "GetCurrentForecastData", "BatchForecastDataAsync",
    "GetAverageCarbonIntensity", "GetAverageCarbonIntensityBatch", "GetAllLocations",
    "CarbonAwareHealth", "listTokens", "createToken", "revokeToken",
    # grid events (issue 38)
    "createGridEvent", "listGridEvents", "getGridEvent"}


def test_openapi_operation_ids_and_examples(api):
    doc = api.client.get("/openapi.json").json()
    ops = {op["operationId"] for path in doc["paths"].values() for op in path.values()}
    assert ops == OPERATION_IDS
    missing = [name for name, s in doc["components"]["schemas"].items()
               if "examples" not in s and name not in ("HTTPValidationError", "ValidationError")
               and not name.startswith(("Annotated", "Body_"))]
    assert not missing, missing
    assert np.all([doc["paths"][p] for p in ("/v1/placements", "/emissions/bylocations/best")])


def test_every_example_names_sites_a_shipped_catalog_has(api):
    """An operator copies an example to try a route: a site no shipped catalog has (the grid
    event examples named ``us-az-phoenix``) is refused as unknown."""
    from carbonsched.catalog import load_catalog

    known = {s.id for name in ("global", "us-2022", "china-eastdata-westcompute")
             for s in load_catalog(name).sites}
    doc = api.client.get("/openapi.json").json()
    named: list[tuple[str, str]] = []

    def walk(where: str, v) -> None:
        if isinstance(v, dict):
            for k, x in v.items():
                if k in ("site", "sites", "allowed_sites") and isinstance(x, str | list):
                    named.extend((where, s) for s in ([x] if isinstance(x, str) else x)
                                 if isinstance(s, str))
                else:
                    walk(where, x)
        elif isinstance(v, list):
            for x in v:
                walk(where, x)

    for name, schema in doc["components"]["schemas"].items():
        walk(name, schema.get("examples", []))
    assert len(named) >= 5                 # the walk reads the examples (they name sites)
    assert [(w, s) for w, s in named if s not in known] == []
