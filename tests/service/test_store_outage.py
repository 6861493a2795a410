"""The API while its PostgreSQL is down: 503 with ``Retry-After``, never 500; 200 once it is back.

A PostgreSQL server of the test's own (``private_pg``, :mod:`scripts.private_postgres`)
serves one real `carbonsched serve`; the test stops it with ``pg_ctl stop`` mid-test and starts
it again. A NUL byte in any path parameter is refused with 422 on PostgreSQL too (it cannot
hold one, and used to answer 500).
"""

from __future__ import annotations

import time

import httpx
import pytest
from sqlalchemy.engine import URL, make_url

from carbonsched.store import Store
from tests.service.conftest import AS_OF, CATALOG, mint

ADMIN = "outage-test-admin-token-9b2c"


def _url_without_password(url: str) -> str:
    """The private server's URL without its placeholder password (the server trusts loopback),
    so that the message names the database as ``postgres@127.0.0.1``."""
    u = make_url(url)
    return URL.create(u.drivername, u.username, None, u.host, u.port,
                      u.database).render_as_string(hide_password=False)


def _503(r: httpx.Response) -> None:
    assert r.status_code == 503, (r.status_code, r.text)
    assert int(r.headers["Retry-After"]) >= 1
    assert "is unreachable" in r.json()["detail"] and "retry in" in r.json()["detail"]
    assert "postgres@127.0.0.1" in r.json()["detail"]


@pytest.mark.shared_data
def test_503_with_retry_after_while_postgres_is_down_then_200(plan_db, private_pg,
                                                              start_server):
    url = _url_without_password(private_pg.url)
    src = Store(f"sqlite:///{plan_db}")
    pid = src.latest_plan_id()
    dst = Store(url)
    dst.save_plan(src.get_plan(pid), src.forecasts(pid))
    dst.engine.dispose()
    token = mint(url, "submit")       # looked up in the store, not the bootstrap
    srv = start_server(url, "--no-cron", "--as-of", AS_OF, "--catalog", CATALOG,
                       env={"CARBONSCHED_BOOTSTRAP_ADMIN_TOKEN": ADMIN,
                            "CARBONSCHED_TOKEN_CACHE_S": "0"}, ready_path="/readyz")
    c = httpx.Client(base_url=srv.url, timeout=60)
    user = {"Authorization": f"Bearer {token}"}
    admin = {"Authorization": f"Bearer {ADMIN}"}
    job = {"id": "outage-1", "tenant": "t", "gpu_type": "A100", "gpus": 1,
           "duration_hours": 1, "power_per_gpu_kw": 0.3, "earliest_start":
           "2023-07-15T02:00:00Z", "deadline": "2023-07-15T20:00:00Z", "reserve": True}
    r = c.post("/v1/placements", json=job, headers=user)
    assert r.status_code == 200 and r.json()["reserved"], r.text
    # a NUL in a path parameter on PostgreSQL: refused before the store (was 500)
    for path in ("/v1/jobs/a%00b", "/v1/forecasts/a%00b", "/v1/plans/2023-07-1%00"):
        assert c.get(path, headers=admin).status_code == 422, path
    assert c.delete("/v1/tokens/%00", headers=admin).status_code == 422

    private_pg.stop()
    _503(c.get("/v1/jobs/outage-1", headers=user))                 # the token look-up fails
    _503(c.get("/v1/jobs/outage-1", headers=admin))                # the job look-up fails
    _503(c.post("/v1/placements", json=job | {"id": "outage-2"}, headers=admin))
    _503(c.post("/v1/jobs", json={"jobs": [{k: v for k, v in job.items() if k != "reserve"}
                                            | {"id": "outage-3"}]}, headers=admin))
    _503(c.get("/v1/tokens", headers=admin))
    assert c.get("/readyz").status_code == 503
    # answered from memory: still 200 without the store
    assert c.post("/v1/placements", json=job | {"id": "q", "reserve": False},
                  headers=admin).status_code == 200

    private_pg.start()
    deadline = time.monotonic() + 120
    while True:   # the pool reconnects on the next request
        r = c.get("/v1/jobs/outage-1", headers=user)
        if r.status_code == 200:
            break
        assert r.status_code == 503 and time.monotonic() < deadline, (r.status_code, r.text)
        time.sleep(0.5)
    assert r.json()["state"] == "Planned"                          # nothing acknowledged lost
    r = c.post("/v1/placements", json=job | {"id": "outage-2"}, headers=admin)
    assert r.status_code == 200 and r.json()["reserved"], r.text
    log = srv.logs()
    assert "Traceback" not in log, log[-4000:]
    assert "store unreachable on GET /v1/jobs/outage-1" in log
