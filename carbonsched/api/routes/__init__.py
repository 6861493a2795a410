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
BAD_BODY: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorPublic, "description": "The body could not be read (not UTF-8 text)."}}
"""Of the routes that read a body: FastAPI answers 400 when it cannot decode it (JSON that
does not parse is 422, naming where)."""
IDENTIFIER_RULE = ("an identifier that is `.` or `..`, or holds a non-printable character "
                   "(Unicode's format, separator and unassigned characters beyond those the "
                   "pattern lists)")
"""The part of the identifier grammar (:func:`carbonsched.limits.identifier_problem`) that its
pattern in the document cannot state."""
JOB_RULES = ("a `deadline` before `earliest_start` plus the run time",
             "`duration_minutes` and `duration_hours` both given and disagreeing",
             IDENTIFIER_RULE)
"""The rules of a job that span fields, which no schema states
(:data:`carbonsched.workload.schema.JOB_RULES_SCHEMA` states the others)."""


def refused_422(*rules: str) -> dict[str, Any]:
    """``openapi_extra`` of a route whose 422 also refuses schema-valid requests by ``rules``.

    Parameters
    ----------
    rules
        Each rule, as the 422 response's description names it.
    """
    return {"responses": {"422": {"description": (
        "Validation error: `detail` names each field and how to fix it. Also refused, though "
        "the schema cannot state it: " + "; ".join(rules) + ".")}}}


def require_book(state: ServiceState) -> PlacementBook:
    """The current plan's book, or 503 naming why there is none."""
    book = state.book
    if book is None:
        raise HTTPException(503, state.book_error or "no plan loaded yet")
    return book
