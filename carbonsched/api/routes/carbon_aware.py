"""Carbon Aware SDK-compatible read routes (Green Software Foundation WebAPI).

Same paths, parameter names and response shapes as the SDK's WebAPI
(``casdk-docs/docs/tutorial-basics/carbon-aware-webapi.md`` in
Green-Software-Foundation/carbon-aware-sdk), so its generated clients work against
carbonsched. A ``location`` is a site id of the served catalog. Both routes answer from the
forecast the latest plan stored (the SDK's ``bylocations/best`` reads observed data; carbonsched
holds forecasts, and says so in the route's description). Ratings are gCO2eq/kWh.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Annotated

import numpy as np
import pandas as pd
from fastapi import APIRouter, HTTPException, Query

from carbonsched.api.deps import ReadRole, State
from carbonsched.api.routes import ERRORS, NO_PLAN, NOT_FOUND, require_book
from carbonsched.api.schemas import (
    EmissionsData,
    EmissionsDataDTO,
    EmissionsForecastDTO,
    Time,
)
from carbonsched.errors import InputError, UnknownSiteError
from carbonsched.service.placement import PlacementBook

router = APIRouter(prefix="/emissions", tags=["carbon-aware-sdk"],
                   responses=ERRORS | NOT_FOUND | NO_PLAN)

Locations = Annotated[list[Annotated[str, Query(min_length=1, max_length=100)]],
                      Query(min_length=1, max_length=100,
                            description="Site ids (repeat the parameter for several).")]


def _series(book: PlacementBook, site: str) -> pd.Series:
    if site not in book.catalog.site_ids:
        raise UnknownSiteError(site, book.catalog.site_ids)
    if site not in book.spos:
        raise HTTPException(404, f"site {site!r} was left out of plan {book.plan_id}")
    return pd.Series(book.ci[book.spos[site]], index=book.slots)


def _hours(minutes: int | None) -> int:
    return max(1, math.ceil((minutes or 60) / 60))


def _span(minutes: int) -> str:
    h, m = divmod(minutes, 60)
    return f"{h:02d}:{m:02d}:00"


def _range(start: datetime | None, end: datetime | None) -> tuple[pd.Timestamp | None,
                                                                  pd.Timestamp | None]:
    s = pd.Timestamp(start).tz_convert("UTC") if start is not None else None
    e = pd.Timestamp(end).tz_convert("UTC") if end is not None else None
    if s is not None and e is not None and e < s:
        raise InputError(f"the end {e.isoformat()} is before the start {s.isoformat()}")
    return s, e


@router.get("/bylocations/best", operation_id="getBestEmissionsDataForLocationsByTime",
            response_model=list[EmissionsData])
def best_by_locations(state: State, role: ReadRole, location: Locations,
                      time: Time | None = None,
                      toTime: Time | None = None,  # noqa: N803 - the SDK's name
                      duration: Annotated[int | None, Query(ge=1, le=10080)] = None,
                      ) -> list[EmissionsData]:
    """The lowest-carbon (location, time) among ``location`` in [``time``, ``toTime``].

    ``duration`` (minutes) rates a run of that length (mean over its hours). Answers from the
    latest plan's forecast, not from observed data.
    """
    book = require_book(state)
    start, end = _range(time, toTime)
    hours = _hours(duration)
    best: tuple[float, str, pd.Timestamp] | None = None
    for loc in location:
        ci = _series(book, loc)
        win = ci.rolling(hours).mean().shift(-(hours - 1)).dropna()
        if start is not None:
            win = win[win.index >= start.floor("h")]
        if end is not None:
            win = win[win.index + pd.Timedelta(hours=hours) <= end.ceil("h")]
        if len(win) and (best is None or float(win.min()) < best[0]):
            best = (float(win.min()), loc, win.idxmin())
    if best is None:
        raise HTTPException(404, f"no forecast hour in the requested range; the current plan "
                            f"covers {book.horizon_text()}")
    return [EmissionsData(location=best[1], time=best[2], rating=round(best[0], 3),
                          duration=_span(duration or 60))]


@router.get("/forecasts/current", operation_id="getCurrentForecastData",
            response_model=list[EmissionsForecastDTO])
def current_forecast(state: State, role: ReadRole, location: Locations,
                     dataStartAt: Time | None = None,  # noqa: N803
                     dataEndAt: Time | None = None,  # noqa: N803
                     windowSize: Annotated[int | None, Query(ge=1, le=10080)] = None,  # noqa: N803
                     ) -> list[EmissionsForecastDTO]:
    """The latest forecast per location and its optimal window of ``windowSize`` minutes.

    ``forecastData`` holds the mean carbon intensity of each window of ``windowSize`` minutes
    (hourly steps) starting in [``dataStartAt``, ``dataEndAt``]; ``optimalDataPoints`` the
    lowest one(s).
    """
    book = require_book(state)
    start, end = _range(dataStartAt, dataEndAt)
    hours = _hours(windowSize)
    size = windowSize or 60
    out = []
    for loc in location:
        ci = _series(book, loc)
        win = ci.rolling(hours).mean().shift(-(hours - 1)).dropna()
        if start is not None:
            win = win[win.index >= start.floor("h")]
        if end is not None:
            win = win[win.index + pd.Timedelta(hours=hours) <= end.ceil("h")]
        if not len(win):
            raise HTTPException(404, f"no {size}-minute window of {loc}'s forecast lies in the "
                                f"requested range; the current plan covers "
                                f"{book.horizon_text()}")
        data = [EmissionsDataDTO(location=loc, timestamp=t, duration=size, value=round(v, 3))
                for t, v in win.items()]
        vmin = float(win.min())
        opt = [d for d, v in zip(data, win.to_numpy(), strict=True) if np.isclose(v, vmin)]
        out.append(EmissionsForecastDTO(
            requestedAt=state.clock.now(), generatedAt=book.slots[0], location=loc,
            dataStartAt=start or book.slots[0],
            dataEndAt=end or book.slots[-1] + pd.Timedelta(hours=1), windowSize=size,
            optimalDataPoints=opt, forecastData=data))
    return out
