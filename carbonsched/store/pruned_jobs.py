"""Tombstones of pruned jobs: a job id stays final after retention deletes the job's rows.

:func:`carbonsched.store.retention.prune` deletes a finished job's outbox units (its claim
on the id, ``<job>#0``), its API record and its rolling row once they are old. A workload
file planned every day still lists the job, and the API or an old plan may name the id
again: without its rows the id would read as new work (planned again, dispatched again, or
reported ``Failed/DeadlinePassed`` once more every ``keep_days``). So, in the transaction
that deletes the rows, prune writes one compact row per job id to ``pruned_jobs`` (id,
final state and reason, when it was pruned), and every entry point treats an id found there
as final under that id (:func:`final_under_id`): the daily and rolling runs do not plan a
workload file's job again, the API refuses the id (409), and dispatch writes no intent for
it. Tombstones go only :data:`TOMBSTONE_DAYS` days after their job's rows did
(:mod:`carbonsched.store.retention`).

Created by migration ``0027_pruned_jobs``; imported at the end of
:mod:`carbonsched.store.models` so that one ``Base.metadata`` knows the table.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import String, insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped, Session, mapped_column

from carbonsched.store.base import Base, UTCDateTime

TOMBSTONE_DAYS = 400
"""Days a tombstone outlives its job's rows (past the prune's cutoff): a workload file that
still lists a job more than this after it ended sees it as new again (never run: its
deadline is long past, so the planner ends it ``DeadlinePassed`` and dispatch refuses
it). [d]"""


class PrunedJobRow(Base):
    """One pruned job id: final under this id, whatever later names it."""

    __tablename__ = "pruned_jobs"

    job_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    state: Mapped[str] = mapped_column(String(20))
    """The job's final :class:`~carbonsched.domain.JobState` value when its rows went."""
    reason: Mapped[str] = mapped_column(String(40))
    """Its reason code then (``Completed``, ``DeadlinePassed``, ...)."""
    source: Mapped[str] = mapped_column(String(20))
    """The table whose rows held the id: ``dispatch_intents``, ``service_jobs`` or
    ``rolling_jobs`` (the first prune of the id writes the row)."""
    pruned_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
    """When prune deleted the job's rows (its ``now``). [UTC]"""


@dataclass(frozen=True)
class PrunedJob:
    """A tombstone as the entry points read it."""

    job_id: str
    state: str
    reason: str
    source: str
    pruned_at: datetime
    """[UTC]"""


def final_under_id(job_id: str, state: str, reason: str, where: str) -> str:
    """The one sentence every entry point says of a job id that is final in the store.

    Parameters
    ----------
    job_id
        The id.
    state, reason
        Its final state and reason code (``Succeeded``, ``Completed``).
    where
        What holds it final: ``"the store pruned its records on 2024-06-01"`` or
        ``"dispatched from plan 3f2a..."``.

    Returns
    -------
    str
        ``"job 'J' ended Succeeded (Completed); <where>: a job is final under its id, so it
        is not planned or dispatched again; give the job a new id to run it again"``.
    """
    return (f"job {job_id!r} ended {state} ({reason}); {where}: a job is final under its id, "
            "so it is not planned or dispatched again; give the job a new id to run it again")


def pruned_sentence(p: PrunedJob) -> str:
    """:func:`final_under_id` of a tombstone."""
    return final_under_id(p.job_id, p.state, p.reason,
                          f"the store pruned its records on {p.pruned_at:%Y-%m-%d} (retention)")


def pruned_jobs(engine: Any, job_ids: Collection[str],
                session: Session | None = None) -> dict[str, PrunedJob]:
    """The tombstones of ``job_ids``, by id (only the pruned ones).

    Parameters
    ----------
    engine
        The store's SQLAlchemy engine (or anything with ``.engine``).
    job_ids
        Ids to look up (bounded ``IN`` lists of 500).
    session
        Read in this session (its transaction) instead of a new one.
    """
    ids = sorted(set(job_ids))
    if not ids:
        return {}
    engine = getattr(engine, "engine", engine)

    def read(s: Session) -> dict[str, PrunedJob]:
        out: dict[str, PrunedJob] = {}
        for i in range(0, len(ids), 500):
            for r in s.scalars(select(PrunedJobRow).where(
                    PrunedJobRow.job_id.in_(ids[i:i + 500]))):
                out[r.job_id] = PrunedJob(r.job_id, r.state, r.reason, r.source, r.pruned_at)
        return out

    if session is not None:
        return read(session)
    with Session(engine) as s:
        return read(s)


def write_tombstones(s: Session, rows: Iterable[dict[str, Any]]) -> int:
    """Insert tombstones in ``s``'s transaction, leaving an id already there as it is.

    ``rows``: dicts of ``job_id``, ``state``, ``reason``, ``source``, ``pruned_at``.

    Returns
    -------
    int
        Tombstones written (ids not there before).
    """
    rows = list({r["job_id"]: r for r in rows}.values())
    if not rows:
        return 0
    have = set(pruned_jobs(s.get_bind(), [r["job_id"] for r in rows], session=s))
    fresh = [r for r in rows if r["job_id"] not in have]
    dialect = s.get_bind().dialect.name
    if dialect in ("postgresql", "sqlite"):
        if dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as dialect_insert
        else:
            from sqlalchemy.dialects.sqlite import insert as dialect_insert
        stmt = dialect_insert(PrunedJobRow).on_conflict_do_nothing(index_elements=["job_id"])
        for i in range(0, len(fresh), 1000):
            s.execute(stmt, fresh[i:i + 1000])
        return len(fresh)
    for r in fresh:  # other databases: one savepoint per row
        try:
            with s.begin_nested():
                s.execute(insert(PrunedJobRow), [r])
        except IntegrityError:
            continue
    return len(fresh)
