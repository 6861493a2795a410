"""One identifier grammar for job ids, tenants and site ids, with one message at every entry point.

Each entry point (a workload file in JSON and CSV, the domain job, the API's request bodies and
path parameters through a real `carbonsched serve`, the service store, the plan store, a
catalog, a dispatch request) refuses ``a/b``, ``a\\nb``, a NUL and an id one character too long
with :func:`carbonsched.limits.identifier_problem`'s message, and accepts an id of exactly
:data:`carbonsched.limits.MAX_IDENTIFIER_CHARS` characters.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from urllib.parse import quote

import httpx
import pandas as pd
import pytest

from carbonsched.adapters.dispatch.base import DispatchRequest
from carbonsched.api.app import create_app
from carbonsched.catalog import load_catalog
from carbonsched.config import Settings
from carbonsched.domain import Job
from carbonsched.errors import CatalogError, InputError, WorkloadError
from carbonsched.limits import MAX_IDENTIFIER_CHARS, identifier_problem
from carbonsched.store import Store
from carbonsched.store.service import ServiceStore
from carbonsched.workload.files import read_workload
from tests.service.conftest import AS_OF, CATALOG, copy_db

BAD = {"slash": "a/b", "newline": "a\nb", "nul": "a\x00b",
       "too-long": "x" * (MAX_IDENTIFIER_CHARS + 1)}
LONGEST = "y" * MAX_IDENTIFIER_CHARS
NOW = datetime(2023, 7, 14, 23, tzinfo=UTC)
ADMIN = "identifiers-test-admin-token-77aa"


def spec(**kw) -> dict:
    return {"id": "j1", "tenant": "t1", "gpu_type": "A100", "gpus": 1, "duration_hours": 1,
            "power_per_gpu_kw": 0.5, "earliest_start": "2023-07-15T00:00:00Z",
            "deadline": "2023-07-15T20:00:00Z"} | kw


def message(value: str, what: str = "job id") -> str:
    msg = identifier_problem(value, what)
    assert msg is not None
    return msg


def test_the_grammar_and_its_message():
    for value in BAD.values():
        assert "give 1..100 printable characters without '/', '\\'" in message(value)
    assert message("a/b") == ("job id 'a/b' holds a path separator; give 1..100 printable "
                              "characters without '/', '\\', control or invisible characters, "
                              "not '.' or '..'")
    for ok in (LONGEST, "a", "train-llm 042", "日本-ジョブ", "job#1", "p%20q", "a.b"):
        assert identifier_problem(ok, "job id") is None, ok
    for bad in ("", ".", "..", " a", "a ", "a\\b", "a\u200bb", "a\x7fb", 42):
        assert identifier_problem(bad, "job id") is not None, bad


@pytest.mark.parametrize("name", list(BAD))
def test_workload_files_refuse_with_the_message(tmp_path, name):
    value = BAD[name]
    p = tmp_path / "jobs.json"
    p.write_text(json.dumps({"jobs": [spec(id=value)]}))
    with pytest.raises(InputError) as info:
        read_workload(p)
    assert message(value) in str(info.value)
    for field, what in (("tenant", "tenant"), ("allowed_sites", "site id")):
        p.write_text(json.dumps({"jobs": [spec(**{field: [value] if field == "allowed_sites"
                                                 else value})]}))
        with pytest.raises(InputError) as info:
            read_workload(p)
        assert message(value, what) in str(info.value)
    if name != "newline":    # a newline ends a CSV row: that file is refused for its shape
        c = tmp_path / "jobs.csv"
        row = {"kind": "batch"} | spec(id=value)
        c.write_text(",".join(row) + "\n" + ",".join(str(v) for v in row.values()) + "\n")
        with pytest.raises(InputError) as info:
            read_workload(c)
        assert message(value) in str(info.value)


def test_workload_files_accept_the_longest_id(tmp_path):
    p = tmp_path / "jobs.json"
    p.write_text(json.dumps({"jobs": [spec(id=LONGEST, tenant=LONGEST)]}))
    [job] = read_workload(p).jobs
    assert (job.id, job.tenant) == (LONGEST, LONGEST)


@pytest.mark.parametrize("name", list(BAD))
def test_the_domain_job_refuses_with_the_message(name):
    kw = dict(tenant="t", gpu_type="A100", gpus=1, duration_hours=1, power_per_gpu_kw=0.5,
              earliest_start=pd.Timestamp("2023-07-15T00:00Z"),
              deadline=pd.Timestamp("2023-07-15T05:00Z"))
    with pytest.raises(WorkloadError) as info:
        Job(id=BAD[name], **kw)
    assert str(info.value) == message(BAD[name])
    assert Job(id=LONGEST, **kw).id == LONGEST


def _row(job_id: str) -> dict:
    return {"job_id": job_id, "tenant": "t", "spec_json": "{}", "state": "Pending",
            "reason": "AwaitingPlan", "submitted_at": NOW, "updated_at": NOW}


def _plan(job_id: str, site: str = "cn-gz-guian") -> dict:
    return {"plan_id": f"p-{len(job_id)}-{abs(hash(job_id)) % 10**6}", "date": "2023-07-15",
            "catalog": CATALOG, "signal_quality": "modelled",
            "solver": {"name": "highs", "status": "optimal", "seconds": 0.1},
            "totals": {"energy_kwh": 1.0, "emissions_kg": 0.1, "baseline_emissions_kg": 0.2},
            "placements": [{"job_id": job_id, "site": site, "start": "2023-07-15T02:00:00Z",
                            "end": "2023-07-15T03:00:00Z", "gpu_type": "A100", "gpus": 1,
                            "energy_kwh": 1.0, "emissions_kg": 0.1}],
            "unplaced": [], "inference": []}


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ids.sqlite'}"
    return request.getfixturevalue("pg_db")


def test_the_stores_refuse_with_the_message_and_keep_the_longest(store_url):
    store = Store(store_url)
    db = ServiceStore(store)
    for value in BAD.values():
        with pytest.raises(InputError) as info:
            db.add_jobs([_row(value)])
        assert str(info.value) == message(value)
        with pytest.raises(InputError) as info:
            store.save_plan(_plan(value))
        assert str(info.value) == message(value)
        with pytest.raises(InputError) as info:
            store.save_plan(_plan("ok", site=value))
        assert str(info.value) == message(value, "site id")
        with pytest.raises(InputError) as info:
            db.reserve_job(_row(value) | {"plan_id": "p", "site": "s"}, NOW, lambda r: True)
        assert str(info.value) == message(value)
    assert db.jobs() == [] and store.list_plans() == []
    db.add_jobs([_row(LONGEST)])
    store.save_plan(_plan(LONGEST))
    assert db.get_job(LONGEST)["job_id"] == LONGEST
    assert LONGEST in set(store.placements(_plan(LONGEST)["plan_id"])["job_id"])
    store.engine.dispose()


@pytest.mark.parametrize("name", list(BAD))
def test_dispatch_requests_refuse_with_the_message(name):
    base = dict(plan_id="p1", piece=0, start=NOW, end=NOW + pd.Timedelta(hours=1),
                deadline=NOW + pd.Timedelta(hours=2), gpu_type="A100", gpus=1)
    with pytest.raises(InputError) as info:
        DispatchRequest(job_id=BAD[name], site="cn-gz-guian", **base)
    assert str(info.value) == message(BAD[name])
    with pytest.raises(InputError) as info:
        DispatchRequest(job_id="j1", site=BAD[name], **base)
    assert str(info.value) == message(BAD[name], "site id")
    assert DispatchRequest(job_id=LONGEST, site="cn-gz-guian", **base).key == f"{LONGEST}#0"


@pytest.mark.parametrize("name", ["slash", "newline", "too-long"])
def test_catalog_site_ids_refuse_with_the_message(tmp_path, name):
    from importlib import resources

    text = resources.files("carbonsched.regions").joinpath(f"{CATALOG}.toml").read_text()
    first = re.search(r'id = "([^"]+)"', text).group(1)
    bad = BAD[name].replace("\n", "\\n")
    (tmp_path / "c.toml").write_text(text.replace(f'id = "{first}"', f'id = "{bad}"', 1))
    with pytest.raises(CatalogError) as info:
        load_catalog(tmp_path / "c.toml")
    why, rule = message(BAD[name], "site id").split("; ", 1)
    assert f"field 'id': {why}; {rule}" in str(info.value)


# --- the API --------------------------------------------------------------------------------------

@pytest.mark.shared_data
def test_the_api_refuses_with_the_message_and_accepts_the_longest(plan_db, tmp_path,
                                                                  start_server):
    url = copy_db(plan_db, tmp_path / "db")
    srv = start_server(url, "--no-cron", "--as-of", AS_OF, "--catalog", CATALOG,
                       env={"CARBONSCHED_BOOTSTRAP_ADMIN_TOKEN": ADMIN})
    c = httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {ADMIN}"},
                     timeout=60)
    for value in BAD.values():
        for route, body in (("/v1/jobs", {"jobs": [spec(id=value)]}),
                            ("/v1/placements", spec(id=value, reserve=True))):
            r = c.post(route, json=body)
            assert r.status_code == 422, r.text
            assert message(value) in r.json()["message"], r.text
        r = c.post("/v1/jobs", json={"jobs": [spec(tenant=value)]})
        assert r.status_code == 422 and message(value, "tenant") in r.json()["message"]
        r = c.post("/v1/placements", json=spec(allowed_sites=[value]))
        assert r.status_code == 422 and message(value, "site id") in r.json()["message"]
        if "/" not in value:   # a '/' splits the path: no such route (404)
            r = c.get(f"/v1/jobs/{quote(value, safe='')}")
            assert r.status_code == 422 and message(value) in r.json()["message"], r.text
            r = c.get(f"/v1/forecasts/{quote(value, safe='')}")
            assert r.status_code == 422 and message(value, "site id") in r.json()["message"]
    r = c.post("/v1/jobs", json={"jobs": [spec(id=LONGEST, tenant=LONGEST)]})
    assert r.status_code == 201 and r.json()["data"][0]["id"] == LONGEST, r.text
    assert c.get(f"/v1/jobs/{LONGEST}").json()["id"] == LONGEST
    assert "Traceback" not in srv.logs()


def test_every_string_path_parameter_is_constrained(tmp_path):
    """No route lets a free-form string (a NUL, a newline) reach the store through its path."""
    app = create_app(Settings(database_url=f"sqlite:///{tmp_path / 'x.sqlite'}",
                              cron_enabled=False))
    doc = app.openapi()
    free = []
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            for p in op.get("parameters", []):
                schema = p.get("schema", {})
                if p["in"] == "path" and schema.get("type") == "string":
                    pattern = schema.get("pattern")
                    if pattern is None or re.search(pattern, "a\x00b") or \
                            re.search(pattern, "a\nb"):
                        free.append(f"{method.upper()} {path} {p['name']}")
    assert not free, free
