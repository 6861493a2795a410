"""``/v1/tokens``: list, mint and revoke bearer tokens (role ``admin``).

The same store calls as ``carbonsched token list|create|revoke``. A revoked token is refused by
the replica that revoked it at once and by every other replica within
``CARBONSCHED_TOKEN_CACHE_S`` (:mod:`carbonsched.service.tokens`).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, HTTPException, Path
from starlette.concurrency import run_in_threadpool

from carbonsched.api.deps import AdminRole, State
from carbonsched.api.routes import ERRORS, NOT_FOUND, refused_422
from carbonsched.api.schemas import (
    TOKEN_ID_PATTERN,
    TokenCreate,
    TokenCreated,
    TokenPublic,
    TokensPublic,
)
from carbonsched.service.tokens import token_public

router = APIRouter(prefix="/v1", tags=["tokens"], responses=ERRORS)


@router.get("/tokens", operation_id="listTokens", response_model=TokensPublic)
def list_tokens(state: State, role: AdminRole) -> TokensPublic:
    """Every stored token: id, role, label, creation, expiry, revocation (never the token)."""
    now = state.wall.now()
    rows = [TokenPublic(**token_public(r, now)) for r in state.db.tokens()]
    return TokensPublic(data=rows, count=len(rows))


@router.post("/tokens", operation_id="createToken", status_code=201,
             response_model=TokenCreated,
             openapi_extra=refused_422("an `expires_at` not after now (the wall clock)"))
async def create_token(body: Annotated[TokenCreate, Body()], state: State,
                       role: AdminRole) -> TokenCreated:
    """Mint a token; the answer carries it once (only its hash is stored)."""
    now = state.wall.now()
    token_id, token = await run_in_threadpool(state.db.create_token, body.role, now,
                                              body.name, body.expires_at)
    row = next(r for r in await run_in_threadpool(state.db.tokens)
               if r["token_id"] == token_id)
    return TokenCreated(**token_public(row, now), token=token)


@router.delete("/tokens/{token_id}", operation_id="revokeToken", response_model=TokenPublic,
               responses=NOT_FOUND)
def revoke_token(token_id: Annotated[str, Path(pattern=TOKEN_ID_PATTERN,
                                               description="The token's id (16 hex digits, "
                                               "as GET /v1/tokens lists it).")],
                 state: State, role: AdminRole) -> TokenPublic:
    """Revoke a token: refused here at once, on every replica within the token cache's TTL."""
    now = state.wall.now()
    try:
        row = state.db.revoke_token(token_id, now)
    except KeyError:
        raise HTTPException(404, f"no token {token_id!r}; list them with GET /v1/tokens"
                            ) from None
    state.tokens.forget_token_id(token_id)
    return TokenPublic(**token_public(row, now))
