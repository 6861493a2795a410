"""One router per resource; :data:`ERRORS` documents the error responses every route shares."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from fastapi import HTTPException
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from carbonsched.api.schemas import ErrorPublic
from carbonsched.api.state import ServiceState
from carbonsched.domain import names_nothing_to_run, nothing_to_run
from carbonsched.service.placement import PlacementBook
from carbonsched.workload.schema import JobSpec

T = TypeVar("T", bound=JobSpec)

STORE_RETRY_AFTER_S = 5
"""``Retry-After`` of a 503 while the store is unreachable: a restarting PostgreSQL accepts
connections again within seconds, and the pool reconnects on the next request. [s]"""

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
             IDENTIFIER_RULE,
             "a `template` the catalog does not define (the message lists those it does)",
             "more than one of `script`, `script_path`, `command`; `pod_template` with "
             "`image`, `command`, `args`, `volumes`, `service_account` or `workdir`",
             "`gpu_milli` or `mig_profile` with `gpus` other than 1, or both given; a "
             "`mig_profile` the job's GPU type does not offer",
             "`env` names that are not shell names or start with `CARBONSCHED_`; a `script` "
             "not starting with `#!`; `args` without `command` or `image`; a `pod_template` "
             "without containers, with a field of another type than Kubernetes gives it, or "
             "with `metadata` other than `labels` and `annotations`; a volume without exactly "
             "one source",
             "lists or mappings given as text (a CSV cell) that are not JSON",
             "control characters in payload text (newlines and tabs are allowed in `script`, "
             "`command` and `args`; carriage returns, Windows line ends, are not); a "
             "relative `script_path`, `workdir` or mount path; a "
             "`script` over 64 KiB in UTF-8 bytes; `command` or `args` over 8192 characters "
             "in all; volume entries and pod templates that are not as documented")
"""The rules of a job that span fields, which no schema states
(:data:`carbonsched.workload.schema.JOB_RULES_SCHEMA` states the others)."""
NOTHING_TO_RUN_RULE = ("a job that names nothing to run (no `script`, `script_path`, `command`, "
                       "`image` or `pod_template`, of its own or from its `template`) while the "
                       "service dispatches its plans without the placeholder "
                       "(`CARBONSCHED_DISPATCHER` set, `CARBONSCHED_DISPATCH_PLACEHOLDER` off)")
"""The rule :func:`refuse_nothing_to_run` applies: a job dispatch would refuse (``no_payload``)."""


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


def with_catalog_template(spec: T, templates: Mapping[str, Mapping[str, Any]],
                          loc: tuple[str | int, ...]) -> T:
    """``spec`` with its catalog template applied (the job's fields win); as is without one.

    Parameters
    ----------
    spec
        A validated job spec (``JobCreate`` or a placement query).
    templates
        The service catalog's templates (:attr:`carbonsched.catalog.Catalog.templates`).
    loc
        Where the spec is in the request body, for the 422's ``loc`` (``("body", "jobs", 0)``).

    Raises
    ------
    fastapi.exceptions.RequestValidationError
        An unknown template (the message lists those the catalog defines) or a merged field
        the schema refuses: 422, the same message as a workload file's.
    """
    if spec.template is None:
        return spec
    data = spec.model_dump(mode="json", exclude_unset=True)
    try:
        return type(spec).model_validate(data, context={"templates": templates})
    except ValidationError as exc:
        raise RequestValidationError([{**e, "loc": (*loc, *e["loc"])}
                                      for e in exc.errors()]) from None


def refuse_nothing_to_run(state: ServiceState, specs: Sequence[JobSpec],
                          locs: Sequence[tuple[str | int, ...]]) -> None:
    """422 for the jobs that name nothing to run, when this service's dispatch would refuse them.

    Only while :attr:`ServiceState.refuses_nothing_to_run` (the service dispatches, the
    placeholder is off): such a job would be planned every run and never submitted. Call it
    with the catalog templates applied (:func:`with_catalog_template`) and before anything of
    the request is stored.

    Parameters
    ----------
    state
        The service state.
    specs
        The jobs of the request.
    locs
        Where each is in the request body, for the 422's ``loc`` (``("body", "jobs", 0)``).

    Raises
    ------
    fastapi.exceptions.RequestValidationError
        One entry per such job, with dispatch's words for the refusal
        (:func:`carbonsched.domain.nothing_to_run`) and the two ways out.
    """
    if not state.refuses_nothing_to_run:
        return
    errors = [{"loc": loc, "type": "value_error", "msg": nothing_to_run(
        repr(spec.id), "so this service's dispatch (CARBONSCHED_DISPATCHER) would never "
        "submit it", "turn the placeholder on (CARBONSCHED_DISPATCH_PLACEHOLDER=true) to run "
        "'sleep <planned seconds>'")}
        for spec, loc in zip(specs, locs, strict=True) if names_nothing_to_run(spec.to_job())]
    if errors:
        raise RequestValidationError(errors)


def require_book(state: ServiceState) -> PlacementBook:
    """The current plan's book, or 503 naming why there is none."""
    book = state.book
    if book is None:
        raise HTTPException(503, state.book_error or "no plan loaded yet")
    return book


def left_out_note(site: str, book: PlacementBook) -> str:
    """What an answer says of a catalog site that the plan of ``book`` left out."""
    return f"site {site!r} was left out of plan {book.plan_id} (see the plan's notes)"


def refuse_ids_in_use(state: ServiceState, ids: list[str], verb: str = "submit") -> None:
    """409 for the first of ``ids`` the service already holds outside its API jobs.

    Where it is held is :func:`carbonsched.service.runs.ids_in_use` (the workload file, the
    served plan, dispatch, the rolling state), or the id's job ended and the store pruned its
    records (:mod:`carbonsched.store.pruned_jobs`: final under its id). ``verb`` is
    ``"submit"`` or ``"reserve"``, for the message. Call it before anything of the request
    is stored.

    Raises
    ------
    HTTPException
        409 naming the id, where it is held and the fix.
    """
    from carbonsched.service.runs import ids_in_use
    from carbonsched.store.pruned_jobs import pruned_jobs, pruned_sentence

    # an id the store pruned (its job ended long ago) is final under it: not new work
    gone = pruned_jobs(state.db.store.engine, ids)
    first = next((i for i in ids if i in gone), None)
    if first is not None:
        raise HTTPException(409, f"{pruned_sentence(gone[first])} (nothing of this request "
                            "was stored)")
    book = state.book
    held = ids_in_use(state.settings, state.db, ids, book.plan_id if book is not None else None)
    taken = next((i for i in ids if i in held), None)
    if taken is not None:
        done = {"submit": "submitted", "reserve": "reserved"}[verb]
        raise HTTPException(409, f"job id {taken!r} is taken by {held[taken]}: a job {done} "
                            f"under it would never be planned as itself; {verb} it under a "
                            "new id (nothing of this request was stored)")
