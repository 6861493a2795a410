"""One router per resource; :data:`ERRORS` documents the error responses every route shares."""

from __future__ import annotations

from typing import Any

from fastapi import HTTPException

from carbonsched.api.schemas import ErrorPublic
from carbonsched.api.state import ServiceState
from carbonsched.service.placement import PlacementBook

ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorPublic, "description": "No bearer token, or an invalid one."},
    403: {"model": ErrorPublic, "description": "The token's role is too weak."},
    413: {"model": ErrorPublic, "description": "The request body is too large."},
    503: {"model": ErrorPublic, "description": "The store is unreachable (retry after the "
          "Retry-After header's seconds)."},
}
NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorPublic, "description": "No such site, job, plan or area."}}
NO_PLAN: dict[int | str, dict[str, Any]] = {
    503: {"model": ErrorPublic, "description": "No plan to answer from yet, or the store is "
          "unreachable (retry after the Retry-After header's seconds)."}}


def require_book(state: ServiceState) -> PlacementBook:
    """The current plan's book, or 503 naming why there is none."""
    book = state.book
    if book is None:
        raise HTTPException(503, state.book_error or "no plan loaded yet")
    return book
