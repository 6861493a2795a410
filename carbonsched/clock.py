"""The one clock of the service (STYLE practice 15).

The cron, the service's "now" (placement queries never start work in the past) and dispatch
deadlines read one :class:`Clock` object. ``carbonsched serve --as-of TIME`` pins it
(:class:`FixedClock`), so a catalog whose data is historical can be served as of a past day;
tests drive DST changes and downtime by moving a :class:`ManualClock`.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Protocol

from carbonsched.errors import TimeAxisError


def require_aware_datetime(value: datetime, what: str) -> datetime:
    """``value`` converted to UTC; a naive datetime is refused.

    Raises
    ------
    TimeAxisError
        ``value`` has no time zone.
    """
    if value.tzinfo is None or value.utcoffset() is None:
        raise TimeAxisError(f"{what} {value.isoformat()} has no time zone; give it with an "
                            "offset, e.g. 2023-07-15T06:00:00+00:00")
    return value.astimezone(UTC)


class Clock(Protocol):
    """Anything with ``now() -> datetime`` (tz-aware UTC)."""

    def now(self) -> datetime:  # pragma: no cover - protocol
        """The current time, tz-aware UTC."""
        ...


class SystemClock:
    """The machine's clock, in UTC."""

    def now(self) -> datetime:
        """The current time, tz-aware UTC."""
        return datetime.now(UTC)

    def __repr__(self) -> str:
        return "SystemClock()"


class FixedClock:
    """A clock pinned at one instant (``carbonsched serve --as-of``)."""

    def __init__(self, at: datetime) -> None:
        self.at = require_aware_datetime(at, "--as-of")

    def now(self) -> datetime:
        """The pinned instant."""
        return self.at

    def __repr__(self) -> str:
        return f"FixedClock({self.at.isoformat()})"


class ManualClock:
    """A clock that tests set and advance (thread-safe)."""

    def __init__(self, at: datetime) -> None:
        self._at = require_aware_datetime(at, "clock start")
        self._lock = threading.Lock()

    def now(self) -> datetime:
        """The clock's current instant."""
        with self._lock:
            return self._at

    def set(self, at: datetime) -> None:
        """Move the clock to ``at`` (forwards or backwards)."""
        at = require_aware_datetime(at, "clock time")
        with self._lock:
            self._at = at

    def advance(self, delta: timedelta) -> datetime:
        """Move the clock forward by ``delta`` and return the new instant."""
        with self._lock:
            self._at = self._at + delta
            return self._at


def parse_as_of(text: str) -> datetime:
    """Parse ``--as-of``: ISO 8601 with a time zone (``Z`` accepted).

    Raises
    ------
    TimeAxisError
        Not ISO 8601, or no time zone.
    """
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise TimeAxisError(f"--as-of {text!r} is not an ISO 8601 time; e.g. "
                            "2023-07-15T06:00:00Z") from exc
    return require_aware_datetime(value, "--as-of")
