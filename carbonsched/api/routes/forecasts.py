"""``GET /v1/forecasts/{site}``: the forecast the latest plan used, with its intervals."""

from __future__ import annotations

from typing import Annotated, Literal

import pandas as pd
from fastapi import APIRouter, HTTPException, Query

from carbonsched.api.deps import ReadRole, State
from carbonsched.api.routes import (
    ERRORS,
    IDENTIFIER_RULE,
    NO_PLAN,
    NOT_FOUND,
    left_out_note,
    refused_422,
    require_book,
)
from carbonsched.api.schemas import ForecastPoint, ForecastPublic, SiteIdPath
from carbonsched.errors import UnknownSiteError
from carbonsched.service.placement import SIGNALS

router = APIRouter(prefix="/v1", tags=["forecasts"], responses=ERRORS | NOT_FOUND | NO_PLAN)


@router.get("/forecasts/{site}", operation_id="getSiteForecast", response_model=ForecastPublic,
            openapi_extra=refused_422(IDENTIFIER_RULE))
def site_forecast(site: SiteIdPath, state: State,
                  role: ReadRole,
                  signal: Annotated[Literal["carbon_intensity", "green_surplus", "pue"],
                                    Query(description="Which signal.")] = "carbon_intensity",
                  ) -> ForecastPublic:
    """Hourly forecast of one signal at one site.

    Point and 80 %/95 % intervals, with the model and the site's signal quality. `detail`
    says when the newest plan could not be loaded and the last loaded one answers.
    """
    if site not in state.catalog.site_ids:
        raise UnknownSiteError(site, state.catalog.site_ids)
    book = require_book(state)
    try:
        rows = book.forecast(site, signal)
    except UnknownSiteError as exc:
        raise HTTPException(404, left_out_note(site, book)) from exc
    stored, unit = SIGNALS[signal]
    pts = [ForecastPoint(ts=r.ts, mean=r.mean, lo_80=r.lo_80, hi_80=r.hi_80, lo_95=r.lo_95,
                         hi_95=r.hi_95) for r in rows.itertuples(index=False)]
    return ForecastPublic(
        site=site, signal=signal, stored_signal=stored, unit=unit,
        model=str(rows["model"].iloc[0]) if len(rows) else "none",
        issued_at=pd.Timestamp(rows["issued_at"].iloc[0]) if len(rows) else None,
        signal_quality=book.plan.get("site_signal_quality", {}).get(site),
        plan_id=book.plan_id, points=pts, detail=state.stale_book_note(book))
