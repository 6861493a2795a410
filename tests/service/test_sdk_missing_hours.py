"""The Carbon Aware SDK's observed-data routes say which hours they could not answer.

Before, ``/emissions/bylocations``, ``bylocation`` and ``bylocations/best`` dropped the hours
a site's signal source lacks (NaN, or absent) without a word: a client asking for a day got
fewer points and could not tell a gap from a shorter range. The bodies stay the SDK's; the
``X-Carbonsched-Missing`` header now names, per location, how many hours begun by now have no
point and the first of them (a 204 too), and a counter counts such answers. Hours after now are
not observed yet, so not missing. The signals here come from a loader whose gaps are known.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from fastapi import FastAPI
from starlette.testclient import TestClient

from carbonsched.api.routes.carbon_aware import router
from carbonsched.catalog import load_catalog
from carbonsched.clock import FixedClock
from carbonsched.service.carbon_aware import CarbonAwareService
from carbonsched.service.metrics import ServiceMetrics
from tests.service.conftest import CATALOG

NOW = pd.Timestamp("2024-01-01T22:30:00Z")
DAY = pd.Timestamp("2024-01-01T00:00:00Z")
HUB, EDGE, DARK = "cn-gs-qingyang", "cn-sh-qingpu", "cn-nm-horinger"  # EDGE: alias chinaeast2
NAN_HOURS = (5, 6)   # EDGE's source has NaN at 05:00 and 06:00 ...
ABSENT_HOURS = (20,)  # ... and no row at all for 20:00
MISSING_HEADER = "X-Carbonsched-Missing"


def loader(site, data_dir, t0, t1):
    """Hourly carbon intensity ``100 + hour of day``; EDGE's gaps as above, DARK all NaN."""
    idx = pd.date_range(t0, t1, freq="h", inclusive="left")
    ci = pd.Series(100.0 + idx.hour, index=idx)
    if site.id == EDGE:
        ci[ci.index.hour.isin(NAN_HOURS)] = np.nan
        ci = ci[~ci.index.hour.isin(ABSENT_HOURS)]
    if site.id == DARK:
        ci[:] = np.nan
    return pd.DataFrame({"carbon_intensity_g_per_kwh": ci}), {}


@pytest.fixture
def sdk(tmp_path):
    return CarbonAwareService(load_catalog(CATALOG), tmp_path, 24, loader=loader)


@pytest.fixture
def client(sdk):
    app = FastAPI()
    app.include_router(router)
    metrics = ServiceMetrics()
    app.state.svc = SimpleNamespace(settings=SimpleNamespace(sdk_public=True), sdk=sdk,
                                    clock=FixedClock(NOW.to_pydatetime()), metrics=metrics)
    with TestClient(app) as c:
        c.metrics = metrics
        yield c


def answers_counted(client) -> float:
    return client.metrics.registry.get_sample_value(
        "carbonsched_sdk_missing_hours_answers_total")


def hour(h: int) -> pd.Timestamp:
    return DAY + pd.Timedelta(hours=h)


def test_the_service_names_the_hours_begun_and_not_observed(sdk):
    # the whole day: 00:00 .. 22:00 have begun by 22:30 (23:00 has not: not missing)
    a = sdk.observed_answer(["chinaeast2", HUB], DAY, DAY + pd.Timedelta(days=1), NOW)
    assert [(m.location, m.hours, m.begun) for m in a.missing] == [
        ("chinaeast2", (hour(5), hour(6), hour(20)), 23)]
    assert a.missing[0].text() == ("chinaeast2: 3 of 23 hours missing "
                                   "(first 2024-01-01T05:00:00+00:00)")
    # the points are the emissions' as before: EDGE's 20 observed hours, then HUB's 23
    assert a.points == sdk.emissions(["chinaeast2", HUB], DAY, DAY + pd.Timedelta(days=1), NOW)
    assert [p.time.hour for p in a.points if p.location == "chinaeast2"] == [
        h for h in range(23) if h not in (5, 6, 20)]
    assert len([p for p in a.points if p.location == HUB]) == 23
    # a range clear of the gaps, or after now, misses nothing
    assert sdk.observed_answer([EDGE], hour(7), hour(12), NOW).missing == ()
    assert sdk.observed_answer([EDGE], hour(23), hour(24), NOW).missing == ()
    # a point query (no toTime) at a missing hour: one of one
    one = sdk.observed_answer([EDGE], hour(6) + pd.Timedelta(minutes=10), None, NOW).missing
    assert [(m.location, m.hours, m.begun) for m in one] == [(EDGE, (hour(6),), 1)]
    assert one[0].text() == f"{EDGE}: 1 of 1 hour missing (first 2024-01-01T06:00:00+00:00)"


def test_bylocations_says_the_missing_hours_and_keeps_the_body(client):
    r = client.get("/emissions/bylocations", params={
        "location": ["chinaeast2", HUB], "time": "2024-01-01T00:00:00Z",
        "toTime": "2024-01-02T00:00:00Z"})
    assert r.status_code == 200
    assert r.headers[MISSING_HEADER] == ("chinaeast2: 3 of 23 hours missing "
                                         "(first 2024-01-01T05:00:00+00:00)")
    body = r.json()
    assert body[0] == {"location": "chinaeast2", "time": "2024-01-01T00:00:00Z",
                       "rating": 100.0, "duration": "01:00:00"}
    assert len(body) == 20 + 23 and {p["time"][11:13] for p in body
                                     if p["location"] == "chinaeast2"}.isdisjoint(
        {"05", "06", "20"})
    assert answers_counted(client) == 1.0
    # every hour there: no header, nothing counted
    r = client.get("/emissions/bylocations", params={
        "location": [HUB], "time": "2024-01-01T00:00:00Z", "toTime": "2024-01-02T00:00:00Z"})
    assert r.status_code == 200 and len(r.json()) == 23 and MISSING_HEADER not in r.headers
    assert answers_counted(client) == 1.0


def test_bylocation_and_best_say_it_too_and_so_does_a_204(client):
    when = {"time": "2024-01-01T04:00:00Z", "toTime": "2024-01-01T08:00:00Z"}
    r = client.get("/emissions/bylocation", params={"location": EDGE, **when})
    assert [p["time"] for p in r.json()] == ["2024-01-01T04:00:00Z", "2024-01-01T07:00:00Z"]
    assert r.headers[MISSING_HEADER] == (f"{EDGE}: 2 of 4 hours missing "
                                         "(first 2024-01-01T05:00:00+00:00)")
    r = client.get("/emissions/bylocations/best", params={"location": [EDGE, DARK], **when})
    assert [(p["location"], p["rating"]) for p in r.json()] == [(EDGE, 104.0)]
    assert r.headers[MISSING_HEADER] == (
        f"{EDGE}: 2 of 4 hours missing (first 2024-01-01T05:00:00+00:00) | "
        f"{DARK}: 4 of 4 hours missing (first 2024-01-01T04:00:00+00:00)")
    # every hour missing: 204 without a body, and the header says why
    r = client.get("/emissions/bylocations", params={"location": [DARK], **when})
    assert (r.status_code, r.content) == (204, b"")
    assert r.headers[MISSING_HEADER] == (f"{DARK}: 4 of 4 hours missing "
                                         "(first 2024-01-01T04:00:00+00:00)")
    assert answers_counted(client) == 3.0
    # hours not begun yet are not missing: 204, no header
    r = client.get("/emissions/bylocation", params={"location": DARK,
                                                    "time": "2024-01-02T01:00:00Z"})
    assert r.status_code == 204 and MISSING_HEADER not in r.headers
