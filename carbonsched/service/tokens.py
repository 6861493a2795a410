"""Bearer tokens as the service checks them: a bounded, short-lived cache in front of the store.

:class:`TokenCache` keeps, per replica, the verdicts of recent store look-ups: a valid token's
role for at most ``ttl_s`` (and never past the token's own expiry), an unknown, revoked or
expired token's refusal for ``ttl_s`` too. Revoking a token in the store therefore takes effect
on every replica within ``ttl_s`` (``CARBONSCHED_TOKEN_CACHE_S``), and at once on the replica
that revoked it. Both halves are LRU maps of at most ``max_entries`` entries
(``CARBONSCHED_TOKEN_CACHE_MAX_ENTRIES``): a client sending endless random tokens costs the
service one store look-up each, never unbounded memory.

Token validity is judged on the wall clock (UTC), not on the service's planning clock, which
``--as-of`` may pin in the past.
"""

from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from carbonsched.errors import InputError

DURATION_UNITS_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
"""Units of a token lifetime given as ``<number><unit>`` (``90d``, ``12h``). [s]"""


class TokenCache:
    """Verdicts of token look-ups: LRU-bounded, each for at most ``ttl_s``.

    Parameters
    ----------
    ttl_s
        Longest time a verdict is reused before the store is asked again. [s]
    max_entries
        Most valid tokens, and separately most refused tokens, held; the least recently used
        is dropped first. [-]
    monotonic
        The clock of the TTLs (:func:`time.monotonic`; injected in tests). [s]
    """

    def __init__(self, ttl_s: float, max_entries: int,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        if max_entries < 1:
            raise InputError(f"token cache size {max_entries} must be >= 1")
        self.ttl_s = float(ttl_s)
        self.max_entries = int(max_entries)
        self._mono = monotonic
        self._lock = threading.Lock()
        self._valid: OrderedDict[str, tuple[str, str, float]] = OrderedDict()
        self._invalid: OrderedDict[str, float] = OrderedDict()

    def get(self, token_hash: str) -> tuple[bool, str | None]:
        """A fresh verdict: ``(True, role)``, ``(True, None)`` (refused) or ``(False, None)``."""
        now = self._mono()
        with self._lock:
            hit = self._valid.get(token_hash)
            if hit is not None:
                if now < hit[2]:
                    self._valid.move_to_end(token_hash)
                    return True, hit[0]
                del self._valid[token_hash]
            until = self._invalid.get(token_hash)
            if until is not None:
                if now < until:
                    self._invalid.move_to_end(token_hash)
                    return True, None
                del self._invalid[token_hash]
        return False, None

    def put_valid(self, token_hash: str, role: str, token_id: str,
                  valid_for_s: float | None = None) -> None:
        """Remember a valid token's role for ``ttl_s``, or less if it expires sooner. [s]"""
        ttl = self.ttl_s if valid_for_s is None else max(0.0, min(self.ttl_s, valid_for_s))
        with self._lock:
            self._invalid.pop(token_hash, None)
            self._valid[token_hash] = (role, token_id, self._mono() + ttl)
            self._valid.move_to_end(token_hash)
            while len(self._valid) > self.max_entries:
                self._valid.popitem(last=False)

    def put_invalid(self, token_hash: str) -> None:
        """Remember that a token was refused, for ``ttl_s``."""
        with self._lock:
            self._valid.pop(token_hash, None)
            self._invalid[token_hash] = self._mono() + self.ttl_s
            self._invalid.move_to_end(token_hash)
            while len(self._invalid) > self.max_entries:
                self._invalid.popitem(last=False)

    def forget_token_id(self, token_id: str) -> None:
        """Drop a token's verdict (after this replica revoked it)."""
        with self._lock:
            for h in [h for h, v in self._valid.items() if v[1] == token_id]:
                del self._valid[h]

    def sizes(self) -> tuple[int, int]:
        """Entries held: ``(valid, refused)``. [-]"""
        with self._lock:
            return len(self._valid), len(self._invalid)


def parse_lifetime(text: str) -> timedelta:
    """A token lifetime ``<number><unit>`` with unit ``s``, ``m``, ``h``, ``d`` or ``w``.

    Raises
    ------
    InputError
        Not of that form, or not positive.
    """
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", text or "")
    if m is None or float(m.group(1)) <= 0:
        raise InputError(f"token lifetime {text!r} is not a positive <number><unit>; give "
                         "e.g. 90d, 12h, 30m (units s, m, h, d, w)")
    return timedelta(seconds=float(m.group(1)) * DURATION_UNITS_S[m.group(2)])


def token_public(row: dict[str, Any], now: datetime) -> dict[str, Any]:
    """A stored token's row with ``active``: not revoked and ``now`` before its expiry."""
    exp = row.get("expires_at")
    return row | {"active": row.get("revoked_at") is None and (exp is None or now < exp)}
