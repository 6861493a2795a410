"""``GET /v1/sites``: the served catalog's sites, and whether the served plan covers each."""

from __future__ import annotations

from fastapi import APIRouter

from carbonsched.api.deps import ReadRole, State
from carbonsched.api.routes import ERRORS, left_out_note
from carbonsched.api.schemas import SitePublic, SitesPublic

router = APIRouter(prefix="/v1", tags=["sites"], responses=ERRORS)


@router.get("/sites", operation_id="listSites", response_model=SitesPublic)
def list_sites(state: State, role: ReadRole) -> SitesPublic:
    """Every site of the catalog with its GPUs, power cap and signal quality.

    `signal_quality` is the served plan's for each site it covers (`in_plan: true`); a site
    the plan left out (its signals could not be read or forecast) has `in_plan: false`, no
    signal quality and a `note` naming the plan. With no plan loaded, `in_plan` is null,
    `signal_quality` the catalog's declared one and `detail` says why; `detail` also says when
    the newest plan could not be loaded and the last loaded one answers.
    """
    book = state.book
    if book is None:
        why = state.book_error or "no plan loaded yet"
        shown = {s.id: (str(state.catalog.signal_quality), None, "") for s in state.catalog.sites}
        detail = f"{why}; signal_quality is the catalog's declared quality"
    else:
        quality = book.plan.get("site_signal_quality", {})
        shown = {s.id: (quality.get(s.id), True, "") if s.id in book.spos
                 else (None, False, left_out_note(s.id, book)) for s in state.catalog.sites}
        detail = state.stale_book_note(book)
    data = [SitePublic(
        id=s.id, name=s.name, role=str(s.role), zone=s.zone, timezone=s.timezone,
        latitude=s.latitude, longitude=s.longitude,
        gpus={k: p.count for k, p in s.gpus.items()}, it_power_cap_kw=s.it_power_cap_kw,
        green_surplus_max_kw=s.green_surplus_max_kw, backend=s.backend.kind,
        signal_quality=shown[s.id][0], in_plan=shown[s.id][1], note=shown[s.id][2])
        for s in state.catalog.sites]
    return SitesPublic(catalog=state.catalog.name, data=data, count=len(data),
                       plan_id=book.plan_id if book else None, detail=detail)
