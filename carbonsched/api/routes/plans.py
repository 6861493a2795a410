"""``GET /v1/plans/latest`` and ``GET /v1/plans/{date}``: plan documents."""

from __future__ import annotations

from datetime import date as _date
from typing import Annotated

from fastapi import APIRouter, HTTPException, Path

from carbonsched.api.deps import ReadRole, State
from carbonsched.api.routes import ERRORS, NOT_FOUND
from carbonsched.api.schemas import PlanPublic
from carbonsched.errors import InputError

router = APIRouter(prefix="/v1/plans", tags=["plans"], responses=ERRORS | NOT_FOUND)


@router.get("/latest", operation_id="getLatestPlan", response_model=PlanPublic)
def latest_plan(state: State, role: ReadRole) -> PlanPublic:
    """The newest plan of the served catalog (the ``carbonsched plan --out`` document)."""
    pid = state.db.latest_plan_id(state.catalog.name)
    if pid is None:
        raise HTTPException(404, f"no plan yet for catalog {state.catalog.name!r}")
    return PlanPublic.model_validate(state.store.get_plan(pid))


@router.get("/{date}", operation_id="getPlanByDate", response_model=PlanPublic)
def plan_by_date(date: Annotated[str, Path(pattern=r"^\d{4}-\d{2}-\d{2}$",
                                           json_schema_extra={"format": "date"},
                                           examples=["2023-07-15"])],
                 state: State, role: ReadRole) -> PlanPublic:
    """The newest plan for a date (``YYYY-MM-DD``, the UTC day planned)."""
    try:
        _date.fromisoformat(date)
    except ValueError as exc:
        raise InputError(f"date {date!r} is not a calendar date; use YYYY-MM-DD") from exc
    doc = state.db.plan_for_date(state.catalog.name, date)
    if doc is None:
        raise HTTPException(404, f"no plan for {date} in catalog {state.catalog.name!r}")
    return PlanPublic.model_validate(doc)
