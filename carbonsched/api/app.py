"""The FastAPI application of ``carbonsched serve``.

:func:`create_app` builds the app around a :class:`~carbonsched.api.state.ServiceState`: routers
per resource under ``/v1``, the Carbon Aware SDK's WebAPI (``/emissions``, ``/locations``,
``/health``; its errors are 400 problem details), ``/healthz``,
``/readyz``, ``/metrics`` and the plan page ``/ui``; error handlers that turn the typed errors of
:mod:`carbonsched.errors` into 404/409/422 with the error's message, and a store that cannot
be reached (any SQLAlchemy connection-level error, a backend-unavailable error) into 503 with
``Retry-After``; a request-size limit and request-latency metrics as pure ASGI middleware.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DisconnectionError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from carbonsched.api.routes import (
    STORE_RETRY_AFTER_S,
    carbon_aware,
    forecasts,
    grid_events,
    health,
    jobs,
    placements,
    plans,
    runs,
    sites,
    tokens,
    ui,
)
from carbonsched.api.state import ServiceState
from carbonsched.clock import Clock, SystemClock
from carbonsched.config import Settings
from carbonsched.errors import (
    BackendUnavailableError,
    InputError,
    StoreUnavailableError,
    UnknownSiteError,
)
from carbonsched.service.carbon_aware import SdkDataError, SdkInputError
from carbonsched.store.service import DuplicateJobError

log = logging.getLogger("carbonsched.api")

API_VERSION = "1.0.0"

STORE_DOWN_ERRORS = (OperationalError, InterfaceError, DisconnectionError, PoolTimeoutError)
"""SQLAlchemy errors that mean "the database cannot be reached now", not "this request is
wrong" (https://docs.sqlalchemy.org/en/20/core/exceptions.html)."""


def _sdk_errors(errors: list[dict[str, Any]]) -> SdkInputError:
    """Request-validation errors as the SDK's ``errors`` (keyed by its parameter names)."""
    out: dict[str, list[str]] = {}
    for e in errors:
        loc = [p for p in e.get("loc", ()) if p not in ("query", "body")]
        key = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")
        key = key or "body"
        kind, got = str(e.get("type", "")), e.get("input")
        if kind == "missing":
            msg = f"{key} is not set"
        elif kind == "timezone_aware":
            msg = (f"{key} {got!r} has no time zone; add 'Z' for UTC or an offset such as "
                   "+08:00")
        elif kind.startswith(("datetime_", "date_")):
            msg = (f"{key} {got!r} is not a date-time; give ISO 8601 such as "
                   "2022-03-01T15:30:00Z")
        else:
            msg = f"{key}: {e.get('msg')} (got {got!r})"
        out.setdefault(key, []).append(msg)
    return SdkInputError(out)


def _validation_payload(errors: list[dict[str, Any]]) -> dict[str, Any]:
    parts = []
    clean = []
    for e in errors:
        loc = ".".join(str(p) for p in e.get("loc", ()))
        parts.append(f"{loc}: {e.get('msg')}")
        clean.append({"loc": list(e.get("loc", ())), "msg": str(e.get("msg")),
                      "type": str(e.get("type", "value_error"))})
    return {"detail": clean, "message": "; ".join(parts)}


class BodyLimit:
    """Refuse request bodies above ``max_bytes`` with 413 (declared or streamed)."""

    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        """ASGI entry point."""
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            return await self._reject(send)
        if declared is not None:
            return await self.app(scope, receive, send)
        # no Content-Length (chunked): buffer up to the limit, then replay to the app
        chunks: list[bytes] = []
        seen = 0
        more = True
        while more:
            msg = await receive()
            if msg["type"] != "http.request":
                break
            chunks.append(msg.get("body", b""))
            seen += len(chunks[-1])
            if seen > self.max_bytes:
                return await self._reject(send)
            more = msg.get("more_body", False)
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _reject(self, send: Callable) -> None:
        body = (b'{"detail":"request body larger than ' + str(self.max_bytes).encode()
                + b' bytes (CARBONSCHED_MAX_REQUEST_BYTES); split the request"}')
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


class Timing:
    """Observe each request's latency by method, route template and status."""

    def __init__(self, app: Any, metrics_of: Callable[[], Any]) -> None:
        self.app = app
        self.metrics_of = metrics_of

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        """ASGI entry point."""
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        t0 = time.perf_counter()
        status = {"code": 500}

        async def capture(msg: dict) -> None:
            if msg["type"] == "http.response.start":
                status["code"] = msg["status"]
            await send(msg)

        try:
            await self.app(scope, receive, capture)
        finally:
            route = scope.get("route")
            path = getattr(route, "path", None) or "unmatched"
            m = self.metrics_of()
            if m is not None:
                m.request_seconds.labels(method=scope["method"], route=path,
                                         status=str(status["code"])).observe(
                    time.perf_counter() - t0)


def create_app(settings: Settings, clock: Clock | None = None,
               dispatch: Callable[..., Any] | None = None,
               stop: threading.Event | None = None) -> FastAPI:
    """Build the service.

    Parameters
    ----------
    settings
        Service settings.
    clock
        The one clock (default the system clock; ``--as-of`` pins it).
    dispatch
        The pipeline's dispatch step (``dispatch_plan(store, plan_id, catalog, *, clock)``);
        ``None``: the run records say "dispatch: not configured".
    stop
        Set to ask the background work to stop (``carbonsched serve`` sets it when signalled,
        before the requests in progress are drained); default: set at the lifespan's end
        (:meth:`~carbonsched.api.state.ServiceState.stop`).
    """
    clock = clock or SystemClock()
    holder: dict[str, ServiceState] = {}

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state = ServiceState(settings, clock, dispatch, stop)
        app.state.svc = state
        holder["state"] = state
        state.start()
        log.info("carbonsched serve: catalog %s, store %s, clock %r, cron %s",
                 state.catalog.name, state.db.safe_url(), clock,
                 "on" if state.cron else "off")
        try:
            yield
        finally:
            state.stop()

    app = FastAPI(
        title="carbonsched", version=API_VERSION, lifespan=lifespan,
        description="Carbon- and power-aware placement of AI compute: placement queries "
        "against the current plan, submitted jobs, plans, sites and forecasts (`/v1`), "
        "the Carbon Aware SDK's WebAPI (`/emissions`, `/locations`, `/health`), health and "
        "metrics. Every `/v1` route needs `Authorization: Bearer <token>` (`carbonsched token "
        "create --role read|submit|admin`), and so do `/emissions` and `/locations` unless "
        "CARBONSCHED_SDK_PUBLIC is on. Times are tz-aware; answers are UTC.")
    for r in (placements, jobs, plans, sites, forecasts, runs, tokens, grid_events,
              carbon_aware, health, ui):
        app.include_router(r.router)

    def _unavailable(detail: str, retry_after_s: int) -> JSONResponse:
        return JSONResponse({"detail": detail}, status_code=503,
                            headers={"Retry-After": str(retry_after_s)})

    @app.exception_handler(BackendUnavailableError)
    async def _backend_down(_: Request, exc: BackendUnavailableError) -> JSONResponse:
        retry = int(getattr(exc, "retry_after_s", STORE_RETRY_AFTER_S))
        return _unavailable(str(exc), retry)

    def _retry_hint() -> str:
        return (f"retry in {STORE_RETRY_AFTER_S} s (a reservation retried under the same job id "
                "answers 409 if the first one was stored)")

    @app.exception_handler(StoreUnavailableError)
    async def _store_unavailable(request: Request, exc: StoreUnavailableError) -> JSONResponse:
        log.warning("store unreachable on %s %s: %s: %s", request.method, request.url.path,
                    exc.doing, exc.detail)
        return _unavailable(f"the store ({exc.url}) is unreachable ({exc.doing}: {exc.detail}); "
                            f"{_retry_hint()}", STORE_RETRY_AFTER_S)

    async def _store_down(request: Request, exc: Exception) -> JSONResponse:
        state = holder.get("state")
        where = state.db.safe_url() if state is not None else "the store"
        orig = getattr(exc, "orig", None) or exc
        reason = " ".join(str(orig).split())[:300]
        log.warning("store unreachable on %s %s: %s", request.method, request.url.path,
                    reason)
        return _unavailable(f"the store ({where}) is unreachable: {reason}; {_retry_hint()}",
                            STORE_RETRY_AFTER_S)

    for exc_type in STORE_DOWN_ERRORS:
        app.add_exception_handler(exc_type, _store_down)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        if carbon_aware.is_sdk_path(request.url.path):  # the SDK answers 400 problem details
            return carbon_aware.problem(_sdk_errors(list(exc.errors())))
        return JSONResponse(_validation_payload(list(exc.errors())), status_code=422)

    @app.exception_handler(SdkInputError)
    async def _sdk_input(_: Request, exc: SdkInputError) -> JSONResponse:
        return carbon_aware.problem(exc)

    @app.exception_handler(SdkDataError)
    async def _sdk_data(_: Request, exc: SdkDataError) -> JSONResponse:
        log.warning("carbon aware SDK route: %s", exc)
        return carbon_aware.problem(exc)

    @app.exception_handler(UnknownSiteError)
    async def _unknown(_: Request, exc: UnknownSiteError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=404)

    @app.exception_handler(DuplicateJobError)
    async def _dup(_: Request, exc: DuplicateJobError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=409)

    @app.exception_handler(InputError)
    async def _input(_: Request, exc: InputError) -> JSONResponse:
        return JSONResponse(_validation_payload([{"loc": ["request"], "msg": str(exc),
                                                  "type": "value_error"}]), status_code=422)

    base_openapi = app.openapi

    def openapi() -> dict[str, Any]:
        """The document, with this deployment's limit of jobs per ``POST /v1/jobs``.

        Without the 422 FastAPI lists on the SDK's routes: they answer 400 instead.
        """
        if app.openapi_schema is None:
            doc = base_openapi()
            for path, ops in doc["paths"].items():
                if carbon_aware.is_sdk_path(path):
                    for op in ops.values():
                        op["responses"].pop("422", None)
            jobs = doc["components"]["schemas"]["JobsCreate"]["properties"]["jobs"]
            jobs["maxItems"] = settings.max_jobs_per_request
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    app.add_middleware(Timing, metrics_of=lambda: getattr(holder.get("state"), "metrics",
                                                          None))
    app.add_middleware(BodyLimit, max_bytes=settings.max_request_bytes)
    return app
