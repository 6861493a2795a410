"""How far dispatch is behind: the outbox's pending intents, for the service's metrics.

An intent is pending from the moment it is written (``Pending/AwaitingSubmit``) until its
backend has it (or it is refused, or its deadline passed); a backend that cannot be reached
keeps it pending (``Pending/BackendUnavailable``) until a reconcile pass submits it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from carbonsched.domain import JobState
from carbonsched.store import Store
from carbonsched.store.models import DispatchRow


@dataclass(frozen=True)
class OutboxBacklog:
    """The outbox's pending intents at one instant."""

    pending: int
    """Intents written and not yet on their backend. [-]"""
    oldest_created_at: datetime | None
    """When the oldest of them was written (tz-aware UTC), or ``None`` when there is none."""

    def oldest_age_s(self, now: datetime) -> float:
        """Age of the oldest pending intent at ``now`` (tz-aware), 0 when none is pending. [s]"""
        if self.oldest_created_at is None:
            return 0.0
        return max(0.0, (now - self.oldest_created_at).total_seconds())


def outbox_backlog(store: Store) -> OutboxBacklog:
    """Count the pending intents of the outbox and find the oldest.

    Raises
    ------
    sqlalchemy.exc.DBAPIError
        The database failed (the caller classifies outages).
    """
    with Session(store.engine) as s:
        n, oldest = s.execute(select(func.count(DispatchRow.id), func.min(DispatchRow.created_at))
                              .where(DispatchRow.state == JobState.PENDING.value)).one()
    if oldest is not None:
        # min() bypasses the column type on SQLite (a string there); read it back as UTC
        oldest = DispatchRow.__table__.c.created_at.type.process_result_value(
            _as_datetime(oldest), store.engine.dialect)
    return OutboxBacklog(int(n or 0), oldest)


def _as_datetime(value: datetime | str) -> datetime:
    return value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
