"""A newer plan the API cannot load is a stated, retried state, not a silent stale answer.

Before, `carbonsched serve` kept answering from the last plan it had loaded with only a log
line: /readyz said ``ok`` and every placement answer looked current. Now /readyz is
``degraded`` (200) naming why, the ``detail`` of each placement answer, of ``/v1/sites`` and
of ``/v1/forecasts/{site}`` says which plan answered and why, the gauge
``carbonsched_plan_refresh_failing`` is 1, and the refresher retries: once the plan can be
loaded, all of them clear. Real server on loopback, httpx.
"""

from __future__ import annotations

import time

import httpx
import pytest
from sqlalchemy import text

from carbonsched.api.state import ServiceState
from carbonsched.clock import FixedClock, parse_as_of
from carbonsched.config import Settings
from carbonsched.store import Store
from tests.conftest import shared_data_dir
from tests.service.conftest import AS_OF, CATALOG, copy_db, mint

pytestmark = pytest.mark.shared_data

QUERY = {"id": "stale-q", "tenant": "t1", "gpu_type": "A100", "gpus": 4, "duration_hours": 3,
         "power_per_gpu_kw": 0.7, "earliest_start": "2023-07-15T00:00:00Z",
         "deadline": "2023-07-15T20:00:00Z"}


def _wait(pred, timeout: float = 30.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = pred()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError("condition not met in time")


def test_an_unloadable_newer_plan_is_said_in_readyz_placements_and_metrics(
        plan_db, start_server, tmp_path):
    url = copy_db(plan_db, tmp_path / "db")
    token = mint(url, "read")
    srv = start_server(url, "--no-cron", "--as-of", AS_OF, "--catalog", CATALOG,
                       env={"CARBONSCHED_BOOK_REFRESH_S": "0.5"}, ready_path="/readyz")
    c = httpx.Client(base_url=srv.url, timeout=30,
                     headers={"Authorization": f"Bearer {token}"})
    first = c.get("/readyz").json()
    assert first["status"] == "ok" and "plan_refresh" not in first["checks"]
    old = first["checks"]["plan"]
    # a newer plan whose document cannot be read (its JSON cut short in the store)
    store = Store(url)
    doc = store.get_plan(old)
    doc["plan_id"] = "e" * 32
    store.save_plan(doc, store.forecasts(old))
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE plans SET plan_json = '{\"cut' WHERE plan_id = :p"),
                     {"p": doc["plan_id"]})
    ready = _wait(lambda: (r := c.get("/readyz").json())["status"] == "degraded" and r)
    assert ready["checks"]["plan"] == old
    assert ready["checks"]["plan_refresh"].startswith("the newest plan could not be loaded (")
    assert ready["checks"]["plan_refresh"].endswith("retried every 0.5 s")
    ans = c.post("/v1/placements", json=QUERY).json()
    assert ans["plan_id"] == old
    note = f"answered from plan {old}, the last loaded: {ready['checks']['plan_refresh']}"
    assert f"answered from plan {old}, the last loaded: the newest plan could not be " \
           "loaded (" in ans["detail"] and ans["detail"].endswith(note)
    # the sites and the forecasts answer from the same book, and say so alike
    sites = c.get("/v1/sites").json()
    assert (sites["plan_id"], sites["detail"]) == (old, note)
    fc = c.get("/v1/forecasts/cn-gs-qingyang").json()
    assert (fc["plan_id"], fc["detail"]) == (old, note)
    assert "carbonsched_plan_refresh_failing 1.0" in c.get("/metrics").text
    # mended: the retry loads it and every sign clears
    store.save_plan(doc, store.forecasts(old))
    ready = _wait(lambda: (r := c.get("/readyz").json())["status"] == "ok" and r)
    assert ready["checks"]["plan"] == doc["plan_id"] and "plan_refresh" not in ready["checks"]
    assert "answered from plan" not in c.post("/v1/placements", json=QUERY).json()["detail"]
    assert c.get("/v1/sites").json()["detail"] == ""
    assert c.get("/v1/forecasts/cn-gs-qingyang").json()["detail"] == ""
    assert "carbonsched_plan_refresh_failing 0.0" in c.get("/metrics").text


def test_a_loaded_plan_is_never_served_with_the_error_it_ends(plan_db, tmp_path, monkeypatch):
    """The refresher clears the error before it serves the book it loaded: while the heap is
    frozen (a slow step), an answer from the new book said "answered from plan <new>, the last
    loaded: <the error the load just ended>"."""
    s = Settings(database_url=copy_db(plan_db, tmp_path), catalog=CATALOG, cron_enabled=False,
                 as_of=parse_as_of(AS_OF), data_dir=shared_data_dir(), dispatcher="",
                 dispatch_loops=False)
    state = ServiceState(s, FixedClock(s.as_of))
    state.book_error = "the newest plan could not be loaded (cut short); retried every 2 s"
    said: list[tuple[str | None, str]] = []
    monkeypatch.setattr("carbonsched.api.state.freeze_heap", lambda: said.append(
        (state.book.plan_id if state.book else None,
         state.stale_book_note(state.book) if state.book else "")))
    book = state.refresh_book()
    assert book is not None and said == [(book.plan_id, "")] and state.book_error == ""
    state.store.engine.dispose()
