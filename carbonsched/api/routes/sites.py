"""``GET /v1/sites``: the served catalog's sites."""

from __future__ import annotations

from fastapi import APIRouter

from carbonsched.api.deps import ReadRole, State
from carbonsched.api.routes import ERRORS
from carbonsched.api.schemas import SitePublic, SitesPublic

router = APIRouter(prefix="/v1", tags=["sites"], responses=ERRORS)


@router.get("/sites", operation_id="listSites", response_model=SitesPublic)
def list_sites(state: State, role: ReadRole) -> SitesPublic:
    """Every site of the catalog with its GPUs, power cap and signal quality."""
    quality = (state.book.plan.get("site_signal_quality", {}) if state.book else {})
    data = [SitePublic(
        id=s.id, name=s.name, role=str(s.role), zone=s.zone, timezone=s.timezone,
        latitude=s.latitude, longitude=s.longitude,
        gpus={k: p.count for k, p in s.gpus.items()}, it_power_cap_kw=s.it_power_cap_kw,
        green_surplus_max_kw=s.green_surplus_max_kw, backend=s.backend.kind,
        signal_quality=quality.get(s.id, str(state.catalog.signal_quality)))
        for s in state.catalog.sites]
    return SitesPublic(catalog=state.catalog.name, data=data, count=len(data))
