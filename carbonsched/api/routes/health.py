"""``/healthz``, ``/readyz`` and ``/metrics`` (no token needed)."""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from carbonsched.api.deps import State
from carbonsched.api.schemas import HealthPublic

router = APIRouter(tags=["health"])


@router.get("/healthz", operation_id="health", response_model=HealthPublic)
def healthz() -> HealthPublic:
    """Liveness: the process answers."""
    return HealthPublic(status="ok")


@router.get("/readyz", operation_id="ready", response_model=HealthPublic,
            responses={503: {"model": HealthPublic, "description": "Not ready."}})
def readyz(state: State) -> HealthPublic | JSONResponse:
    """Readiness: the store answers and a plan is loaded to answer placement queries from.

    ``degraded`` (still 200): answers come from the last plan loaded because the newest
    could not be loaded (``checks.plan_refresh`` says why; retried).
    """
    checks: dict = {}
    ok = True
    try:
        state.db.ping()
        checks["store"] = "ok"
    except Exception as exc:
        checks["store"] = f"unreachable: {type(exc).__name__}"
        ok = False
    if state.book is None:
        checks["plan"] = state.book_error or "none loaded"
        ok = False
    else:
        checks["plan"] = state.book.plan_id
        if state.book_error:   # still serving, from the last plan loaded: degraded, said
            checks["plan_refresh"] = state.book_error
    checks["cron"] = ("disabled" if state.cron is None else
                      "leader" if state.cron.leader is None or state.cron.leader.held
                      else "standby")
    status = "ok" if ok else "unavailable"
    if ok and "plan_refresh" in checks:
        status = "degraded"
    body = HealthPublic(status=status, checks=checks)
    return body if ok else JSONResponse(body.model_dump(), status_code=503)


@router.get("/metrics", operation_id="metrics",
            responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}},
                             "description": "Prometheus text exposition format."}})
def metrics(state: State) -> Response:
    """Prometheus metrics.

    Plan runs, solver seconds and status, dispatch outcomes, request latency.
    """
    return Response(generate_latest(state.metrics.registry), media_type=CONTENT_TYPE_LATEST)
