"""The Carbon Aware SDK's WebAPI, drop-in (Green Software Foundation, WebAPI v1.5).

Every route of the SDK's WebAPI with its paths, parameter names, operation ids, status codes
(400 ``ValidationProblemDetails`` on bad input, 204 on an empty answer) and response shapes, so
clients generated from the SDK's OpenAPI document work unchanged. A ``location`` is a site id or
one of the site's aliases (catalog field ``aliases``: cloud regions such as ``westus``), matched
case-insensitively. What each route answers from, and the window arithmetic, is
:mod:`carbonsched.service.carbon_aware`; docs/service.md has the route-by-route compatibility
table. The routes need a ``read`` token unless ``CARBONSCHED_SDK_PUBLIC`` is on (the SDK has no
authentication); ``/health`` never does.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Response
from fastapi.responses import JSONResponse, PlainTextResponse

from carbonsched.api.deps import SdkRole, State
from carbonsched.api.routes import ERRORS
from carbonsched.api.schemas import (
    CarbonIntensityBatchParametersDTO,
    CarbonIntensityDTO,
    EmissionsData,
    EmissionsDataDTO,
    EmissionsForecastBatchParametersDTO,
    EmissionsForecastDTO,
    Location,
    Time,
    ValidationProblemDetails,
)
from carbonsched.limits import MAX_NAME_CHARS
from carbonsched.service.carbon_aware import (
    MAX_BATCH_ITEMS,
    MAX_QUERY_DAYS,
    DataPoint,
    ForecastAnswer,
    ObservedAnswer,
    SdkDataError,
    SdkInputError,
    minutes_of,
    optimal,
    time_span,
)

router = APIRouter(tags=["carbon-aware-sdk"])

SDK_PREFIXES = ("/emissions/", "/locations", "/health")
"""Paths of the SDK's routes: their errors are the SDK's (400 problem details, not 422)."""

_AUTH = {k: v for k, v in ERRORS.items() if k in (401, 403, 413)}

# Rules that refuse (400) requests the OpenAPI document calls valid: each spans parameters or
# depends on the data (the catalog's names, the hours observed or forecast, now), so no schema
# can state it. Each operation's 400 response lists its own (tests/service/
# test_openapi_conformance.py accepts a schema-valid 400 only for a rule listed here).
UNKNOWN_LOCATION = "a location no site answers to (`GET /locations` lists the names)"
TIME_RULES = ("`toTime` without `time`", "`time` not before `toTime`",
              f"`time` .. `toTime` longer than {MAX_QUERY_DAYS} days")
PERIOD_RULES = ("`startTime` not before `endTime`",
                f"`startTime` .. `endTime` longer than {MAX_QUERY_DAYS} days",
                "a period whose hours are not all observed yet")
WINDOW_RULES = ("`dataStartAt` not before `dataEndAt`",
                "`dataStartAt` or `dataEndAt` outside the hours the forecast covers")


def _refused(*rules: str) -> dict[int | str, dict[str, Any]]:
    """The 400 response of an SDK route, naming the ``rules`` the schema cannot state."""
    return {400: {"model": ValidationProblemDetails, "description":
                  "Bad input: `errors` names each parameter and how to fix it. Also refused, "
                  "though the schema cannot state it: " + "; ".join(rules) + "."}}


_EMPTY: dict[int | str, dict[str, Any]] = {204: {"description": "No data in the range."}}
_DATA: dict[int | str, dict[str, Any]] = {
    500: {"model": ValidationProblemDetails,
          "description": "The signals could not be read or no forecast could be issued "
          "(`detail` says why; `Retry-After` when a later try may succeed)."}}

# A location must not be empty (the service answers "location is not set"): stated in the
# schema only, so that the SDK's 400 and its message stay (empty names among others are skipped)
Locations = Annotated[list[Annotated[str, Query(max_length=MAX_NAME_CHARS)]],
                      Query(max_length=100, description="Location names (site ids or aliases, "
                            "case-insensitive); repeat the parameter for several; at least "
                            "one not empty.",
                            json_schema_extra={"contains": {"type": "string", "minLength": 1}})]
OneLocation = Annotated[str, Query(max_length=MAX_NAME_CHARS,
                                   description="A site id or alias (case-insensitive).",
                                   json_schema_extra={"minLength": 1})]
WindowSize = Annotated[int | None, Query(ge=0, le=2**31 - 1, description="The workload's "
                                         "duration in minutes; 0 or none: the hourly points.")]


def is_sdk_path(path: str) -> bool:
    """Whether ``path`` is one of the SDK's routes."""
    return path.startswith(SDK_PREFIXES)


def problem(exc: SdkInputError | SdkDataError) -> JSONResponse:
    """The SDK's ``ValidationProblemDetails`` for an error (400 bad input, 500 data)."""
    if isinstance(exc, SdkInputError):
        body = {"type": "https://tools.ietf.org/html/rfc9110#section-15.5.1",
                "title": "One or more validation errors occurred.", "status": 400,
                "detail": str(exc), "errors": exc.errors}
        return JSONResponse(body, status_code=400)
    body = {"type": "https://tools.ietf.org/html/rfc9110#section-15.6.1",
            "title": "Carbon intensity data unavailable", "status": 500, "detail": str(exc),
            "errors": {}}
    headers = {"Retry-After": str(exc.retry_after_s)} if exc.retry_after_s else None
    return JSONResponse(body, status_code=500, headers=headers)


def _data(points: list[DataPoint]) -> list[EmissionsData]:
    return [EmissionsData(location=p.location, time=p.time, rating=p.rating,
                          duration=time_span(p.duration)) for p in points]


def _dto(p: DataPoint) -> EmissionsDataDTO:
    return EmissionsDataDTO(location=p.location, timestamp=p.time, duration=minutes_of(p.duration),
                            value=p.rating)


def _forecast(a: ForecastAnswer) -> EmissionsForecastDTO:
    return EmissionsForecastDTO(
        generatedAt=a.generated_at, requestedAt=a.requested_at, location=a.location,
        dataStartAt=a.data_start_at, dataEndAt=a.data_end_at, windowSize=a.window_minutes,
        optimalDataPoints=[_dto(p) for p in a.optimal],
        forecastData=[_dto(p) for p in a.forecast_data])


MISSING_HEADER = "X-Carbonsched-Missing"
"""Response header of the observed-data routes naming, per location, the hours missing."""


def missing_text(answer: ObservedAnswer) -> str:
    """The :data:`MISSING_HEADER` value of ``answer`` ("" when no hour is missing).

    One ``location: k of n hours missing (first <hour>)`` per location, joined by `` | ``,
    spelled in Latin-1 (:func:`header_text`) and cut to 4000 characters.
    """
    return header_text(" | ".join(m.text() for m in answer.missing))[:4000]


def _points(state: Any, response: Response, names: list[str], time: Time | None,
            to_time: Time | None, best: bool = False) -> list[EmissionsData] | Response:
    """The observed points (the lowest ones with ``best``); 204 when none.

    The hours missing go in :data:`MISSING_HEADER`, on a 204 too, and the answer is counted.
    """
    answer = state.sdk.observed_answer(names, time, to_time, state.clock.now())
    pts = optimal(answer.points) if best else answer.points
    out: Response = response if pts else Response(status_code=204)
    if answer.missing:
        state.metrics.sdk_missing_hours.inc()
        out.headers[MISSING_HEADER] = missing_text(answer)
    return _data(pts) if pts else out


@router.get("/emissions/bylocations/best", operation_id="GetBestEmissionsDataForLocationsByTime",
            response_model=list[EmissionsData],
            responses=_EMPTY | _refused(UNKNOWN_LOCATION, *TIME_RULES) | _DATA | _AUTH)
def best_by_locations(state: State, role: SdkRole, location: Locations, response: Response,
                      time: Time | None = None,
                      toTime: Time | None = None,  # noqa: N803 - the SDK's names
                      ) -> Any:
    """The lowest observed carbon intensity among the locations in [time, toTime).

    Hourly points [t, t+1h) that overlap the range; `time` defaults to now, `toTime` to `time`
    (the point containing it). Ties return every lowest point; none observed: 204. Hours begun
    by now that a location's source lacks are named in the `X-Carbonsched-Missing` header.
    `time` must be given with `toTime` and be before it (else 400).
    """
    return _points(state, response, location, time, toTime, best=True)


@router.get("/emissions/bylocations", operation_id="GetEmissionsDataForLocationsByTime",
            response_model=list[EmissionsData],
            responses=_EMPTY | _refused(UNKNOWN_LOCATION, *TIME_RULES) | _DATA | _AUTH)
def by_locations(state: State, role: SdkRole, location: Locations, response: Response,
                 time: Time | None = None,
                 toTime: Time | None = None,  # noqa: N803
                 ) -> Any:
    """Observed hourly carbon intensity of each location in [time, toTime).

    Hours begun by the service's now, from each site's signal source; none: 204. Hours begun
    that a location's source lacks have no point and are named in the `X-Carbonsched-Missing`
    header. `time` must be given with `toTime` and be before it (else 400).
    """
    return _points(state, response, location, time, toTime)


@router.get("/emissions/bylocation", operation_id="GetEmissionsDataForLocationByTime",
            response_model=list[EmissionsData],
            responses=_EMPTY | _refused(UNKNOWN_LOCATION, *TIME_RULES) | _DATA | _AUTH)
def by_location(state: State, role: SdkRole, location: OneLocation, response: Response,
                time: Time | None = None,
                toTime: Time | None = None,  # noqa: N803
                ) -> Any:
    """Observed hourly carbon intensity of one location in [time, toTime); none: 204.

    Hours begun by now that the source lacks are named in the `X-Carbonsched-Missing` header.
    `time` must be given with `toTime` and be before it (else 400).
    """
    return _points(state, response, [location], time, toTime)


def _forecast_headers(response: Response, state: Any, answers: list[ForecastAnswer]) -> None:
    notes = [n for a in answers for n in ([a.note] if a.note else []) + list(a.notes)]
    for a in answers:
        state.metrics.sdk_forecasts.labels(origin=a.origin).inc()
    if notes:
        response.headers["X-Carbonsched-Fallback"] = header_text(" | ".join(notes))[:4000]


def header_text(text: str) -> str:
    """``text`` as an HTTP header value can carry it (Latin-1; HTTP/1.1, RFC 9110 5.5).

    Letters outside Latin-1 are spelled by their compatibility decomposition (NFKD) where one
    exists; anything else (a dash, an ellipsis, a maths sign) becomes ``?``.
    """
    import unicodedata

    return "".join(ch if ord(ch) < 256 else
                   (unicodedata.normalize("NFKD", ch).encode("latin-1", "ignore")
                    .decode("latin-1") or {"\u2013": "-", "\u2014": "-", "\u2026": "...",
                                           "\u2265": ">=", "\u2264": "<="}.get(ch, "?"))
                   for ch in text)


@router.get("/emissions/forecasts/current", operation_id="GetCurrentForecastData",
            response_model=list[EmissionsForecastDTO],
            responses=_refused(UNKNOWN_LOCATION, *WINDOW_RULES) | _DATA | _AUTH)
def current_forecast(state: State, role: SdkRole, location: Locations, response: Response,
                     dataStartAt: Time | None = None,  # noqa: N803
                     dataEndAt: Time | None = None,  # noqa: N803
                     windowSize: WindowSize = None,  # noqa: N803
                     ) -> list[EmissionsForecastDTO]:
    """The freshest forecast per location, averaged over windows of `windowSize` minutes.

    Issued at the current hour (the stored plan's when it was issued then, else the daily
    pipeline's forecasting, run once per site and hour). Windows start at `dataStartAt` exactly
    and step by one hour; `optimalDataPoints` are the lowest. A fallback to the stored plan's
    forecast, and the forecast's own fallbacks (a model fallback, degraded or stale signals), are
    named in the `X-Carbonsched-Fallback` header. `dataStartAt` must be before
    `dataEndAt`, both within the forecast's hours (else 400).
    """
    answers = state.sdk.current(location, dataStartAt, dataEndAt, windowSize,
                                state.clock.now(), state.book)
    _forecast_headers(response, state, answers)
    return [_forecast(a) for a in answers]


@router.post("/emissions/forecasts/batch", operation_id="BatchForecastDataAsync",
             response_model=list[EmissionsForecastDTO],
             responses=_refused(UNKNOWN_LOCATION, "a `requestedAt` after now",
                            "a `requestedAt` the data cannot forecast from",
                            *WINDOW_RULES) | _DATA | _AUTH)
def batch_forecast(state: State, role: SdkRole,
                   body: Annotated[list[EmissionsForecastBatchParametersDTO],
                                   Body(json_schema_extra={"maxItems": MAX_BATCH_ITEMS})],
                   ) -> list[EmissionsForecastDTO]:
    """Historical forecasts: each item's forecast as issued at its `requestedAt` hour.

    Issued by the daily pipeline's forecasting from the observations before then (cached),
    scoped and windowed as `/emissions/forecasts/current`. An item's `requestedAt` must be in
    the past, at an hour the data can forecast from (else 400).
    """
    state.sdk.check_batch(body)
    now = state.clock.now()
    return [_forecast(state.sdk.historical(item.model_dump(), k, now))
            for k, item in enumerate(body)]


@router.get("/emissions/average-carbon-intensity", operation_id="GetAverageCarbonIntensity",
            response_model=CarbonIntensityDTO,
            responses=_refused(UNKNOWN_LOCATION, *PERIOD_RULES) | _DATA | _AUTH)
def average_carbon_intensity(state: State, role: SdkRole, location: OneLocation,
                             startTime: Time,  # noqa: N803
                             endTime: Time,  # noqa: N803
                             ) -> CarbonIntensityDTO:
    """Time-weighted mean observed carbon intensity of [startTime, endTime) at a location.

    Partial hours count by the share of the period they cover; a period the observed hours do
    not cover, or a `startTime` not before `endTime`, is 400.
    """
    value = state.sdk.average(location, startTime, endTime, state.clock.now())
    return CarbonIntensityDTO(location=location, startTime=startTime, endTime=endTime,
                              carbonIntensity=value)


@router.post("/emissions/average-carbon-intensity/batch",
             operation_id="GetAverageCarbonIntensityBatch",
             response_model=list[CarbonIntensityDTO],
             responses=_refused(UNKNOWN_LOCATION, "items naming more than one site",
                            *PERIOD_RULES) | _DATA | _AUTH)
def average_carbon_intensity_batch(
        state: State, role: SdkRole,
        body: Annotated[list[CarbonIntensityBatchParametersDTO],
                        Body(json_schema_extra={"maxItems": MAX_BATCH_ITEMS})],
) -> list[CarbonIntensityDTO]:
    """The mean observed carbon intensity of each item's period, for one location.

    As the SDK, a batch covers a single location (names that resolve to one site); items of
    several locations are 400.
    """
    state.sdk.check_batch(body)
    now = state.clock.now()
    named = [(k, i.location) for k, i in enumerate(body) if i.location]
    sites = {state.sdk.resolve([n], f"[{k}].location")[0].id for k, n in named}
    if len(sites) > 1:
        raise SdkInputError({"location": [
            f"a batch covers one location; this one names {len(sites)} sites "
            f"({', '.join(sorted(sites))}); send one batch per location"]})
    return [CarbonIntensityDTO(location=i.location, startTime=i.startTime, endTime=i.endTime,
                               carbonIntensity=state.sdk.average(i.location, i.startTime,
                                                                 i.endTime, now, f"[{k}]."))
            for k, i in enumerate(body)]


@router.get("/locations", operation_id="GetAllLocations", response_model=dict[str, Location],
            responses=_EMPTY | _AUTH)
def all_locations(state: State, role: SdkRole) -> Any:
    """Every location name (site ids and aliases) with its position and site (`name`)."""
    locs = state.sdk.locations()
    return locs if locs else Response(status_code=204)


@router.get("/health", operation_id="CarbonAwareHealth", response_class=PlainTextResponse,
            responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}},
                             "description": "`Healthy` (the SDK's health check)."}})
def health() -> PlainTextResponse:
    """The SDK's liveness probe: `Healthy` while the process answers (no token needed)."""
    return PlainTextResponse("Healthy")
