"""The Carbon Aware SDK drop-in, route by route, through a client built from the SDK's own
OpenAPI document (tests/service/sdk_client.py) against real `carbonsched serve` processes.

Every answer is checked against the SDK's schema for its route and status by the client; the
values are checked against the signals and the pipeline's forecasts computed here, independently
of the server. The service clock is pinned at 2023-07-14T23:00Z; the stored plan is for
2023-07-15 (issued 2023-07-15T00:00Z)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from importlib import resources

import httpx
import pandas as pd
import pytest

from carbonsched.catalog import load_catalog
from carbonsched.service.carbon_aware import CarbonAwareService
from tests.conftest import shared_data_dir
from tests.service.conftest import AS_OF, CATALOG, Server, copy_db, mint
from tests.service.sdk_client import SdkClient, spec_path

pytestmark = pytest.mark.shared_data

NOW = pd.Timestamp(AS_OF)
UTC = UTC
HUB, EDGE = "cn-gs-qingyang", "cn-sh-qingpu"   # EDGE has the alias chinaeast2
PLAN_ISSUED = pd.Timestamp("2023-07-15T00:00:00Z")


def t(s: str) -> datetime:
    return datetime.fromisoformat(s.replace("Z", "+00:00"))


def ts(s: str) -> pd.Timestamp:
    return pd.Timestamp(s)


@pytest.fixture(scope="module")
def servers(plan_db, tmp_path_factory):
    """A public server (CARBONSCHED_SDK_PUBLIC), a guarded one (the default) and one whose
    HUB cannot be forecast (its signal source has no file: the plan's forecast answers)."""
    d = tmp_path_factory.mktemp("sdk")
    out: dict[str, tuple[Server, str]] = {}
    broken = d / "broken.toml"
    toml = resources.files("carbonsched.regions").joinpath(f"{CATALOG}.toml").read_text()
    toml = toml.replace(f'id = "{HUB}"', f'id = "{HUB}"\naliases = ["nodata-region"]', 1)
    i = toml.index(f'id = "{HUB}"')
    old = 'signal_source = "modelled-china"'
    j = toml.index(old, i)  # HUB's signals from a provider file that does not exist
    broken.write_text(toml[:j] + 'signal_source = "electricitymaps"' + toml[j + len(old):])
    try:
        for name, catalog, env in (("public", CATALOG, {"CARBONSCHED_SDK_PUBLIC": "true"}),
                                   ("guarded", CATALOG, {}),
                                   ("broken", str(broken), {"CARBONSCHED_SDK_PUBLIC": "true"})):
            url = copy_db(plan_db, d / name)
            token = mint(url, "read")
            srv = Server(url, ["--no-cron", "--as-of", AS_OF, "--catalog", catalog], env,
                         d / f"{name}.log")
            srv.wait_ready(120, "/readyz")
            out[name] = (srv, token)
        yield out
    finally:
        for srv, _ in out.values():
            srv.stop()
        for srv, _ in out.values():
            assert "Traceback" not in srv.logs(), srv.logs()[-4000:]


@pytest.fixture(scope="module")
def sdk(servers):
    c = SdkClient(servers["public"][0].url)
    yield c
    c.close()


@pytest.fixture(scope="module")
def reference():
    """The signals and forecasts computed here, as the server should: same catalog, same data."""
    return CarbonAwareService(load_catalog(CATALOG), shared_data_dir(), 24)


def observed(reference, site: str, start: str, end: str) -> pd.Series:
    s = reference.catalog.site(site)
    return reference.observed(s, ts(start), ts(end), NOW)


def problem(r, *keys: str) -> str:
    assert r.status == 400, r.body
    assert r.body["status"] == 400 and r.body["title"]
    assert set(keys) <= set(r.body["errors"]), r.body["errors"]
    return " ".join(m for k in keys for m in r.body["errors"][k])


def test_the_client_is_built_from_the_sdks_document(sdk):
    assert spec_path().is_file()
    assert set(sdk.ops) == {
        "GetBestEmissionsDataForLocationsByTime", "GetEmissionsDataForLocationsByTime",
        "GetEmissionsDataForLocationByTime", "GetCurrentForecastData", "BatchForecastDataAsync",
        "GetAverageCarbonIntensity", "GetAverageCarbonIntensityBatch", "GetAllLocations"}
    with pytest.raises(TypeError, match="has no parameter"):
        sdk.call("GetEmissionsDataForLocationsByTime", location=["x"], duration=60)


def test_our_document_states_the_refusals_json_schema_can(sdk):
    """A refusal JSON Schema can state is in carbonsched's OpenAPI document (not the SDK's:
    there every field is optional) and matches the service: an empty location, a batch item
    without its required fields, more than 100 items; the SDK's 400 and message stay."""
    import jsonschema

    doc = sdk.http.get("/openapi.json").json()

    def valid(schema: dict, value: object) -> bool:
        root = {**schema, "components": doc["components"]}
        return jsonschema.Draft202012Validator(root).is_valid(value)

    def param(path: str, name: str = "location") -> dict:
        return next(p["schema"] for p in doc["paths"][path]["get"]["parameters"]
                    if p["name"] == name)

    def body(path: str) -> dict:
        return doc["paths"][path]["post"]["requestBody"]["content"]["application/json"][
            "schema"]

    when = {"time": "2023-07-14T10:00:00Z"}
    # an empty name is skipped: one of the names must be given, in the document and the service
    assert not valid(param("/emissions/bylocations"), [""])
    r = sdk.http.get("/emissions/bylocations", params={"location": "", **when})
    assert r.status_code == 400 and r.json()["errors"] == {"location": [
        "location is not set; give a site id or alias (GET /locations lists them)"]}
    assert valid(param("/emissions/bylocations"), ["", HUB])
    r = sdk.http.get("/emissions/bylocations", params={"location": ["", HUB], **when})
    assert r.status_code == 200 and [p["location"] for p in r.json()] == [HUB]
    assert not valid(param("/emissions/bylocation"), "")
    r = sdk.http.get("/emissions/bylocation", params={"location": "", **when})
    assert r.status_code == 400 and list(r.json()["errors"]) == ["location"]
    # batch items: the fields the service needs are required, not null, not empty
    item = {"requestedAt": "2023-07-14T12:00:00Z", "location": HUB}
    forecasts = body("/emissions/forecasts/batch")
    for bad, key in (({"location": HUB}, "[0].requestedAt"),
                     ({**item, "requestedAt": None}, "[0].requestedAt"),
                     ({**item, "location": ""}, "[0].location")):
        assert not valid(forecasts, [bad])
        r = sdk.http.post("/emissions/forecasts/batch", json=[bad])
        assert r.status_code == 400 and key in r.json()["errors"], r.text
    assert valid(forecasts, [item])
    average = body("/emissions/average-carbon-intensity/batch")
    period = {"location": HUB, "startTime": "2023-07-14T01:00:00Z",
              "endTime": "2023-07-14T03:00:00Z"}
    assert valid(average, [period]) and not valid(average, [{**period, "endTime": None}])
    # at most 100 items: 100 is the document's limit and the service's
    assert valid(average, [period] * 100) and not valid(average, [period] * 101)
    r = sdk.http.post("/emissions/average-carbon-intensity/batch", json=[period] * 101)
    assert r.status_code == 400 and "send at most 100 per request" in r.text
    r = sdk.http.post("/emissions/average-carbon-intensity/batch", json=[period] * 100)
    assert r.status_code == 200 and len(r.json()) == 100


# --- /locations and /health ----------
def test_locations_list_site_ids_and_aliases(sdk):
    r = sdk.call("GetAllLocations")
    assert r.status == 200
    cat = load_catalog(CATALOG)
    assert list(r.body) == cat.names()
    assert r.body["chinaeast2"] == {"latitude": cat.site(EDGE).latitude,
                                    "longitude": cat.site(EDGE).longitude, "name": EDGE}
    assert r.body[HUB]["name"] == HUB


def test_health_needs_no_token(servers):
    for name in ("public", "guarded"):
        r = httpx.get(servers[name][0].url + "/health", timeout=30)
        assert (r.status_code, r.text) == (200, "Healthy")


# --- emissions data (observed) ----------
def test_bylocations_hourly_points_half_open(sdk, reference):
    r = sdk.call("GetEmissionsDataForLocationsByTime", location=[HUB, "ChinaEast2"],
                 time=t("2023-07-14T10:30:00Z"), toTime=t("2023-07-14T13:00:00Z"))
    assert r.status == 200
    # [10:30, 13:00) overlaps the points 10:00, 11:00 and 12:00 (13:00 starts at the end)
    expect = []
    for name, site in ((HUB, HUB), ("ChinaEast2", EDGE)):
        ci = observed(reference, site, "2023-07-14T10:00Z", "2023-07-14T13:00Z")
        expect += [{"location": name, "time": f"2023-07-14T{h}:00:00Z",
                    "rating": pytest.approx(ci[ts(f"2023-07-14T{h}:00Z")], abs=1e-9),
                    "duration": "01:00:00"} for h in (10, 11, 12)]
    assert r.body == expect


def test_bylocation_point_queries_and_now(sdk, reference):
    r = sdk.call("GetEmissionsDataForLocationByTime", location="chinaeast2",
                 time=t("2023-07-14T10:59:00Z"))
    ci = observed(reference, EDGE, "2023-07-14T10:00Z", "2023-07-14T11:00Z")
    assert r.status == 200 and [(p["time"], p["rating"]) for p in r.body] == [
        ("2023-07-14T10:00:00Z", pytest.approx(ci.iloc[0]))]
    # no time: the point containing now (23:00, begun by the service's clock)
    r = sdk.call("GetEmissionsDataForLocationByTime", location=HUB)
    assert [p["time"] for p in r.body] == ["2023-07-14T23:00:00Z"]
    # hours that have not begun are not observed: 204, no body
    r = sdk.call("GetEmissionsDataForLocationByTime", location=HUB,
                 time=t("2023-07-15T01:00:00Z"), toTime=t("2023-07-15T05:00:00Z"))
    assert (r.status, r.body) == (204, None)
    r = sdk.call("GetEmissionsDataForLocationsByTime", location=[HUB],
                 time=t("2023-07-15T00:00:00Z"))
    assert r.status == 204


def test_best_is_the_lowest_point_of_all_locations(sdk, reference):
    locs = [HUB, "cn-nm-horinger", "CHINAEAST2"]
    r = sdk.call("GetBestEmissionsDataForLocationsByTime", location=locs,
                 time=t("2023-07-14T00:00:00Z"), toTime=t("2023-07-14T12:00:00Z"))
    assert r.status == 200
    series = {n: observed(reference, load_catalog(CATALOG).find_site(n).id,
                          "2023-07-14T00:00Z", "2023-07-14T12:00Z") for n in locs}
    low = min(s.min() for s in series.values())
    # every point at the lowest rating (the modelled signals repeat values: ties are kept)
    expect = [{"location": n, "time": h.strftime("%Y-%m-%dT%H:%M:%SZ"),
               "rating": pytest.approx(v), "duration": "01:00:00"}
              for n in locs for h, v in series[n].items() if v == low]
    assert len(expect) >= 1 and r.body == expect
    r = sdk.call("GetBestEmissionsDataForLocationsByTime", location=[HUB],
                 time=t("2023-07-16T00:00:00Z"), toTime=t("2023-07-16T12:00:00Z"))
    assert r.status == 204


@pytest.mark.parametrize(("params", "keys", "fragment"), [
    ({"location": ["atlantis"]}, ["location"], "unknown location 'atlantis'; known locations"),
    ({"location": [HUB], "toTime": t("2023-07-14T12:00:00Z")}, ["time"],
     "time must be defined if toTime is defined"),
    ({"location": [HUB], "time": t("2023-07-14T12:00:00Z"), "toTime": t("2023-07-14T12:00:00Z")},
     ["time"], "time must be before toTime"),
    ({"location": [HUB], "time": datetime(2023, 7, 14, 12)}, ["time"],
     "has no time zone; add 'Z' for UTC"),
    ({"location": [HUB], "time": t("2022-01-01T00:00:00Z"),
      "toTime": t("2023-01-03T00:00:00Z")}, ["toTime"], "at most 366 days"),
])
def test_bylocations_bad_input_is_400(sdk, params, keys, fragment):
    r = sdk.call("GetEmissionsDataForLocationsByTime", **params)
    assert fragment in problem(r, *keys)


def test_a_missing_location_is_400(sdk):
    r = sdk.http.get("/emissions/bylocations")
    assert r.status_code == 400 and r.json()["errors"] == {"location": ["location is not set"]}


def test_average_carbon_intensity_weights_partial_hours(sdk, reference):
    r = sdk.call("GetAverageCarbonIntensity", location="ChinaEast2",
                 startTime=t("2023-07-14T10:30:00Z"), endTime=t("2023-07-14T12:30:00Z"))
    ci = observed(reference, EDGE, "2023-07-14T10:00Z", "2023-07-14T13:00Z")
    assert r.status == 200
    assert r.body["location"] == "ChinaEast2"
    assert t(r.body["startTime"]) == t("2023-07-14T10:30:00Z")
    assert r.body["carbonIntensity"] == pytest.approx(
        (ci.iloc[0] * 30 + ci.iloc[1] * 60 + ci.iloc[2] * 30) / 120)
    # the hours after now are not observed: the period is not covered
    r = sdk.call("GetAverageCarbonIntensity", location=EDGE,
                 startTime=t("2023-07-14T22:00:00Z"), endTime=t("2023-07-15T01:00:00Z"))
    assert "period out of range" in problem(r, "startTime")
    r = sdk.http.get("/emissions/average-carbon-intensity", params={"location": EDGE})
    assert r.status_code == 400 and set(r.json()["errors"]) == {"startTime", "endTime"}


def test_average_carbon_intensity_batch(sdk, reference):
    body = [{"location": HUB, "startTime": "2023-07-14T01:00:00Z",
             "endTime": "2023-07-14T03:00:00Z"},
            {"location": HUB.upper(), "startTime": "2023-07-14T05:15:00+08:00",
             "endTime": "2023-07-14T06:15:00+08:00"}]
    r = sdk.call("GetAverageCarbonIntensityBatch", body=body)
    ci = observed(reference, HUB, "2023-07-13T21:00Z", "2023-07-14T03:00Z")
    assert r.status == 200
    assert [x["carbonIntensity"] for x in r.body] == pytest.approx([
        (ci[ts("2023-07-14T01:00Z")] + ci[ts("2023-07-14T02:00Z")]) / 2,
        (ci[ts("2023-07-13T21:00Z")] * 45 + ci[ts("2023-07-13T22:00Z")] * 15) / 60])
    assert [x["location"] for x in r.body] == [HUB, HUB.upper()]
    r = sdk.call("GetAverageCarbonIntensityBatch", body=[body[0], {**body[0], "location": EDGE}])
    assert "a batch covers one location" in problem(r, "location")
    r = sdk.call("GetAverageCarbonIntensityBatch", body=[body[0], {**body[0], "endTime": None}])
    assert problem(r, "[1].endTime") == "endTime is not set"
    assert sdk.call("GetAverageCarbonIntensityBatch", body=[]).body == []


# --- forecasts ----------
def pipeline_forecast(reference, site: str, issued: str) -> pd.Series:
    """The pipeline's forecast issued at ``issued``, computed in this process."""
    return reference.forecasts.issue(reference.catalog.site(site), ts(issued)).points


def issued_now_count(url: str) -> float:
    for line in httpx.get(url + "/metrics").text.splitlines():
        if line.startswith('carbonsched_sdk_forecasts_total{origin="issued_now"}'):
            return float(line.split()[-1])
    return 0.0


def test_forecast_current_is_issued_now_not_the_plans_day(sdk, reference, servers):
    before = issued_now_count(servers["public"][0].url)
    r = sdk.call("GetCurrentForecastData", location=[HUB, "chinaeast2"])
    assert r.status == 200 and "X-Carbonsched-Fallback" not in r.headers
    for f, site in zip(r.body, (HUB, EDGE), strict=True):
        # issued at the current hour (23:00 on the 14th), not the plan's 2023-07-15T00:00
        assert t(f["generatedAt"]) == t(AS_OF) and t(f["requestedAt"]) == t(AS_OF)
        fc = pipeline_forecast(reference, site, AS_OF)
        assert len(f["forecastData"]) == 24 and f["windowSize"] == 60
        assert t(f["dataStartAt"]) == t(AS_OF)
        assert t(f["dataEndAt"]) == t(AS_OF) + timedelta(hours=24)
        assert [t(p["timestamp"]) for p in f["forecastData"]] == list(fc.index)
        assert [p["value"] for p in f["forecastData"]] == pytest.approx(fc.to_list())
        assert {p["duration"] for p in f["forecastData"]} == {60}
        low = min(p["value"] for p in f["forecastData"])
        assert f["optimalDataPoints"] == [p for p in f["forecastData"] if p["value"] == low]
        assert low == pytest.approx(min(fc))
    assert [f["location"] for f in r.body] == [HUB, "chinaeast2"]
    assert issued_now_count(servers["public"][0].url) == before + 2


def test_forecast_windows(sdk, reference):
    fc = pipeline_forecast(reference, HUB, AS_OF)
    v = {k.strftime("%H:%M"): x for k, x in fc.items()}
    base = {"location": [HUB], "dataStartAt": t("2023-07-15T00:30:00Z"),
            "dataEndAt": t("2023-07-15T06:00:00Z")}
    # 90 minutes, off the hour: windows start 00:30, 01:30 ... 04:30 (ends at 06:00), each the
    # time-weighted mean of 30 + 60 minutes of hourly points, not two-hour means
    f = sdk.call("GetCurrentForecastData", **base, windowSize=90).body[0]
    assert f["windowSize"] == 90 and t(f["dataStartAt"]) == base["dataStartAt"]
    assert [p["timestamp"] for p in f["forecastData"]] == [
        f"2023-07-15T0{h}:30:00Z" for h in range(5)]
    expect = [(v[f"0{h}:00"] * 30 + v[f"0{h + 1}:00"] * 60) / 90 for h in range(5)]
    assert [p["value"] for p in f["forecastData"]] == pytest.approx(expect)
    two_hour = [(v[f"0{h}:00"] + v[f"0{h + 1}:00"]) / 2 for h in range(5)]
    assert [p["value"] for p in f["forecastData"]] != pytest.approx(two_hour)
    assert {p["duration"] for p in f["forecastData"]} == {90}
    assert f["optimalDataPoints"][0]["value"] == pytest.approx(min(expect))
    # windowSize 0: the raw hourly points overlapping the range (00:00 .. 05:00)
    f0 = sdk.call("GetCurrentForecastData", **base, windowSize=0).body[0]
    assert [p["value"] for p in f0["forecastData"]] == pytest.approx(
        [v[f"0{h}:00"] for h in range(6)])
    assert f0["windowSize"] == 60 and {p["duration"] for p in f0["forecastData"]} == {60}
    # one minute longer than the range: no window (200, empty), as the SDK
    f = sdk.call("GetCurrentForecastData", **base, windowSize=331).body[0]
    assert (f["forecastData"], f["optimalDataPoints"]) == ([], [])
    f = sdk.call("GetCurrentForecastData", **base, windowSize=330).body[0]
    assert [p["value"] for p in f["forecastData"]] == pytest.approx(
        [(v["00:00"] * 30 + sum(v[f"0{h}:00"] for h in range(1, 6)) * 60) / 330])
    # longer than the whole forecast (24 h), no range given
    f = sdk.call("GetCurrentForecastData", location=[HUB], windowSize=24 * 60 + 1).body[0]
    assert f["forecastData"] == []


@pytest.mark.parametrize(("params", "keys", "fragment"), [
    ({"dataStartAt": t("2023-07-18T00:00:00Z")}, ["dataStartAt"],
     "must be within the time range of the forecast"),
    ({"dataStartAt": t("2023-07-15T05:00:00Z"), "dataEndAt": t("2023-07-15T05:00:00Z")},
     ["dataStartAt"], "dataStartAt must be earlier than dataEndAt"),
    ({"dataEndAt": t("2023-07-15T23:00:01Z")}, ["dataEndAt"], "must be within"),
    ({"windowSize": -5}, ["windowSize"], "greater than or equal to 0"),
    ({"dataStartAt": datetime(2023, 7, 15, 1)}, ["dataStartAt"], "has no time zone"),
])
def test_forecast_bad_input_is_400(sdk, params, keys, fragment):
    r = sdk.call("GetCurrentForecastData", location=[HUB], **params)
    assert fragment in problem(r, *keys)


def test_forecast_batch_is_issued_at_requested_at(sdk, reference):
    item = {"requestedAt": "2023-07-14T12:20:00Z", "location": "ChinaNorth3",
            "dataStartAt": "2023-07-14T13:00:00Z", "dataEndAt": "2023-07-14T18:00:00Z",
            "windowSize": 120}
    r = sdk.call("BatchForecastDataAsync", body=[item, {**item, "windowSize": None}])
    assert r.status == 200
    fc = pipeline_forecast(reference, "cn-he-zhangjiakou", "2023-07-14T12:00:00Z")
    f = r.body[0]
    assert t(f["generatedAt"]) == t("2023-07-14T12:00:00Z")
    assert t(f["requestedAt"]) == t(item["requestedAt"]) and f["location"] == "ChinaNorth3"
    rolled = ((fc + fc.shift(-1)) / 2)["2023-07-14T13:00Z":"2023-07-14T16:00Z"]
    assert [p["value"] for p in f["forecastData"]] == pytest.approx(rolled.to_list())
    assert [t(p["timestamp"]) for p in f["forecastData"]] == list(rolled.index)
    assert len(r.body[1]["forecastData"]) == 5  # raw points 13:00 .. 17:00
    bad = [item, {**item, "requestedAt": None}, {**item, "requestedAt": "2023-07-15T02:00:00Z"}]
    r = sdk.call("BatchForecastDataAsync", body=bad[:2])
    assert problem(r, "[1].requestedAt") == "requestedAt is not set"
    r = sdk.call("BatchForecastDataAsync", body=[bad[2]])
    assert "is after now" in problem(r, "[0].requestedAt")
    r = sdk.http.post("/emissions/forecasts/batch", json=[{**item, "windowsize": 5}])
    assert r.status_code == 400 and "[0].windowsize" in r.json()["errors"]


# --- the fallback and its errors ----------
def test_a_forecast_that_cannot_be_issued_falls_back_to_the_plan_and_says_so(servers):
    srv, _ = servers["broken"]
    c = SdkClient(srv.url)
    try:
        r = c.call("GetCurrentForecastData", location=["NODATA-REGION"])
        assert r.status == 200
        note = r.headers["X-Carbonsched-Fallback"]
        assert f"no forecast of {HUB} could be issued at 2023-07-14T23:00:00+00:00" in note
        assert "answered from plan" in note
        f = r.body[0]
        assert t(f["generatedAt"]) == PLAN_ISSUED.to_pydatetime()
        assert len(f["forecastData"]) == 24
        metrics = httpx.get(srv.url + "/metrics").text
        assert 'carbonsched_sdk_forecasts_total{origin="plan_fallback"} 1.0' in metrics
        # signals that cannot be read: 500 problem details naming the cause (the SDK's
        # document lists no 500 for this route, though its exception filter answers one for
        # any data-source failure)
        r = c.http.get("/emissions/bylocation", params={"location": HUB,
                                                         "time": "2023-07-14T10:00:00Z"})
        assert r.status_code == 500 and f"the signals of {HUB}" in r.json()["detail"]
        c.validate(r.json(), {"$ref": "#/components/schemas/ValidationProblemDetails"},
                   "the 500 body")
        # a historical forecast that cannot be issued is bad input of that item
        r = c.call("BatchForecastDataAsync", body=[{"requestedAt": "2023-07-14T05:00:00Z",
                                                    "location": HUB}])
        assert f"no forecast of {HUB} could be issued" in problem(r, "[0].requestedAt")
        # the other sites are forecast as usual
        r = c.call("GetCurrentForecastData", location=[EDGE])
        assert t(r.body[0]["generatedAt"]) == t(AS_OF)
    finally:
        c.close()


# --- access ----------
def test_token_in_front_of_the_sdk_routes(servers):
    srv, token = servers["guarded"]
    r = httpx.get(srv.url + "/emissions/forecasts/current", params={"location": HUB})
    assert r.status_code == 401 and "missing bearer token" in r.json()["detail"]
    assert httpx.get(srv.url + "/locations").status_code == 401
    # what a reverse proxy in front of the SDK's clients adds
    c = SdkClient(srv.url, headers={"Authorization": f"Bearer {token}"})
    try:
        assert c.call("GetAllLocations").status == 200
        assert c.call("GetEmissionsDataForLocationByTime", location=EDGE).status == 200
    finally:
        c.close()
