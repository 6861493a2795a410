"""Dependencies of the routes: the service state and bearer-token roles.

The dependencies are ``async def``: a ``def`` dependency costs each request a hop to the thread
pool and back (BENCHMARKS.md section 6); the only blocking call, the store's token lookup on a
cache miss, runs in the thread pool.

Roles include each other: ``admin`` ⊇ ``submit`` ⊇ ``read``. No token or an unknown one is 401
(with ``WWW-Authenticate: Bearer``, RFC 6750); a token whose role is too weak is 403.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from carbonsched.api.state import ServiceState

bearer = HTTPBearer(auto_error=False, description="A token from `carbonsched token create`.")


def state_of(request: Request) -> ServiceState:
    """The running service's state, read straight from the request (no dependency)."""
    return request.app.state.svc


async def get_state(request: Request) -> ServiceState:
    """The running service's state (``async``: no thread-pool hop per request)."""
    return request.app.state.svc


State = Annotated[ServiceState, Depends(get_state)]


def require_role(need: str):  # noqa: ANN201
    """A dependency that returns the caller's role if it includes ``need``."""

    async def check(request: Request, creds: Annotated[HTTPAuthorizationCredentials | None,
                                                       Depends(bearer)] = None) -> str:
        state = state_of(request)
        if creds is None or not creds.credentials:
            raise HTTPException(status.HTTP_401_UNAUTHORIZED,
                                "missing bearer token; send 'Authorization: Bearer <token>' "
                                "(mint one with `carbonsched token create --role "
                                f"{need}`)", headers={"WWW-Authenticate": "Bearer"})
        hit, role = state.cached_role(creds.credentials)
        if not hit:  # the store is read in the thread pool, never on the event loop
            role = await run_in_threadpool(state.role_of, creds.credentials)
        if role is None:
            raise HTTPException(status.HTTP_401_UNAUTHORIZED,
                                "invalid or revoked bearer token",
                                headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})
        if not state.allows(role, need):
            raise HTTPException(status.HTTP_403_FORBIDDEN,
                                f"this token's role {role!r} lacks {need!r}; use a token made "
                                f"with `carbonsched token create --role {need}`")
        return role

    return check


ReadRole = Annotated[str, Depends(require_role("read"))]

_read = require_role("read")


async def sdk_role(request: Request, creds: Annotated[HTTPAuthorizationCredentials | None,
                                                      Depends(bearer)] = None) -> str:
    """The Carbon Aware SDK routes' access check.

    ``public`` with ``CARBONSCHED_SDK_PUBLIC``, else as :data:`ReadRole` (the SDK has no
    authentication; a reverse proxy in front of its clients can add the token).
    """
    if state_of(request).settings.sdk_public:
        return "public"
    return await _read(request, creds)


SdkRole = Annotated[str, Depends(sdk_role)]
SubmitRole = Annotated[str, Depends(require_role("submit"))]
AdminRole = Annotated[str, Depends(require_role("admin"))]
