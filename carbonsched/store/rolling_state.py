"""The rolling runner's state in the store: pending work carried between the service's runs.

:class:`RollingStore` loads a :class:`~carbonsched.plan.rolling.RollingState` from the
``rolling_jobs`` table (:class:`~carbonsched.store.rolling_models.RollingJobRow`) before a run
and writes back what the run changed, so the cron carries jobs (with their own deadlines) from
one run to the next and committed work holds its capacity in later runs.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from datetime import datetime
from typing import Any

import pandas as pd
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from carbonsched.domain import (
    PAYLOAD_FIELDS,
    Job,
    JobState,
    Placement,
    ReasonCode,
    Unplaced,
    jsonable,
)
from carbonsched.plan.rolling import RollingState, RunResult
from carbonsched.store.rolling_models import RollingJobRow
from carbonsched.workload.schema import JobSpec, invalid_spec_detail


def job_spec(job: Job) -> dict[str, Any]:
    """A job as the job schema's fields (JSON-ready; :func:`job_from_spec` reads it back)."""
    return JobSpec.from_job(job).model_dump(mode="json")


def job_from_spec(spec: dict[str, Any]) -> Job:
    """The job of :func:`job_spec`, or of an API submission, through the one job schema."""
    return JobSpec.model_validate(spec).to_job()


def stored_job(spec: dict[str, Any]) -> tuple[Job, str]:
    """A stored job read back, and ``""`` or the ``InvalidSpec`` detail the schema now gives it.

    A spec stored before a rule of the schema tightened (a carriage return in a command, a
    false ``empty_dir``) is read without its payload fields, which those rules concern: its
    GPUs, power and times still hold capacity; it can no longer be dispatched. The detail
    (:func:`~carbonsched.workload.schema.invalid_spec_detail`) names the schema's first error.

    Raises
    ------
    pydantic.ValidationError
        The spec fails the schema without its payload too.
    """
    from pydantic import ValidationError

    try:
        return job_from_spec(spec), ""
    except ValidationError as exc:
        bare = {k: v for k, v in spec.items() if k not in PAYLOAD_FIELDS}
        return job_from_spec(bare), invalid_spec_detail(exc)


def _ts(v: datetime | None) -> pd.Timestamp | None:
    return None if v is None else pd.Timestamp(v).tz_convert("UTC")


class RollingStore:
    """Reads and writes the rolling state (``rolling_jobs``) of a :class:`~carbonsched.store.Store`.

    Parameters
    ----------
    store
        The store (migrated to ``0005_rolling`` or later).
    """

    def __init__(self, store: Any) -> None:
        self.store = store
        self.engine = store.engine

    def holds(self, job_ids: Collection[str],
              states: Collection[str] | None = None) -> set[str]:
        """The jobs of ``job_ids`` the rolling state holds (pending, committed or ended).

        ``states``: only those in these row states (``Pending``, ``Dispatched`` for committed,
        ``Failed`` for ended); ``None``: any.
        """
        ids = sorted(set(job_ids))
        out: set[str] = set()
        with Session(self.engine) as s:
            for i in range(0, len(ids), 500):     # bounded IN lists
                q = select(RollingJobRow.job_id).where(RollingJobRow.job_id.in_(ids[i:i + 500]))
                if states is not None:
                    q = q.where(RollingJobRow.state.in_(sorted(states)))
                out.update(s.scalars(q))
        return out

    def load(self, as_of: datetime | pd.Timestamp | None = None,
             job_ids: Collection[str] = ()) -> RollingState:
        """The state as the last run left it: what a run issued at ``as_of`` needs, or all.

        With ``as_of``, the rows a run reads: every pending job, every committed job whose
        placement ends after ``as_of`` (it holds capacity in the run's horizon:
        :func:`~carbonsched.plan.rolling.running_work`), and the rows of ``job_ids`` in any
        state (the run's new jobs: an id the state holds is then found exactly, with its job,
        however old). Committed work over before ``as_of`` and ended jobs, the state's growing
        history, are not read (indexed queries: a run's load costs what it uses). Without
        ``as_of``, every row (pending, committed and ended).
        """
        st = RollingState()
        with Session(self.engine) as s:
            if as_of is None:
                rows = list(s.scalars(select(RollingJobRow)))
            else:
                t = pd.Timestamp(as_of).to_pydatetime()
                rows = list(s.scalars(select(RollingJobRow).where(
                    (RollingJobRow.state == str(JobState.PENDING))
                    | ((RollingJobRow.state == str(JobState.DISPATCHED))
                       & (RollingJobRow.end > t)))))
                seen = {r.job_id for r in rows}
                rows += [r for r in self._rows_of(s, job_ids) if r.job_id not in seen]
            for r in rows:
                self._read(st, r)
            last = s.scalar(select(func.max(RollingJobRow.issued_at)))
        st.last_issued_at = _ts(last)
        return st

    def last_run(self) -> tuple[pd.Timestamp | None, str | None]:
        """The issue time of the newest run whose state is saved, and the plan that run made.

        A run's :meth:`save` stamps every row it writes with its issue time and plan id in one
        transaction, so the newest stamp names the run the state is as of: the whole of its
        decisions are saved, or none.

        Returns
        -------
        (pandas.Timestamp or None, str or None)
            The issue time (UTC) and plan id; ``(None, None)`` before the first saved run.
        """
        with Session(self.engine) as s:
            row = s.execute(select(RollingJobRow.issued_at, RollingJobRow.plan_id)
                            .where(RollingJobRow.issued_at.is_not(None))
                            .order_by(RollingJobRow.issued_at.desc()).limit(1)).first()
        return (None, None) if row is None else (_ts(row[0]), row[1])

    def held_jobs(self, job_ids: Collection[str]) -> dict[str, Job]:
        """The jobs of ``job_ids`` the rolling state holds (pending, committed or ended)."""
        with Session(self.engine) as s:
            return {r.job_id: stored_job(json.loads(r.spec_json))[0]
                    for r in self._rows_of(s, job_ids)}

    @staticmethod
    def _rows_of(s: Session, job_ids: Collection[str]) -> list[RollingJobRow]:
        """The rows of ``job_ids`` (by primary key, in bounded ``IN`` lists)."""
        ids = sorted(set(job_ids))
        return [r for i in range(0, len(ids), 500) for r in s.scalars(
            select(RollingJobRow).where(RollingJobRow.job_id.in_(ids[i:i + 500])))]

    def _read(self, st: RollingState, r: RollingJobRow) -> None:
        """Put a row into ``st``: its job, and it as pending, committed or ended."""
        job, refused = stored_job(json.loads(r.spec_json))
        st.jobs[r.job_id] = job
        if r.state == JobState.PENDING:
            st.pending[r.job_id] = job
            if refused:     # ended by the next run (InvalidSpec)
                st.unreadable[r.job_id] = refused
            if r.pieces_json:
                st.tentative[r.job_id] = self._pieces(r)
        elif r.state == JobState.DISPATCHED:
            st.committed[r.job_id] = self._pieces(r)
        else:
            st.ended[r.job_id] = Unplaced(r.job_id, ReasonCode(r.reason), r.detail)

    @staticmethod
    def _pieces(r: RollingJobRow) -> list[Placement]:
        out = []
        for d in json.loads(r.pieces_json or "[]"):
            d = dict(d)
            d["start"], d["end"] = _ts(d["start"]), _ts(d["end"])
            out.append(Placement(**d))
        return out

    def save(self, state: RollingState, run: RunResult, plan_id: str | None,
             now: datetime) -> None:
        """Write every pending job and what ``run`` committed or ended (one transaction).

        Parameters
        ----------
        state
            The state after the run.
        run
            The run's result.
        plan_id
            The stored plan the run made.
        now
            Time of the write (tz-aware).
        """
        t = run.issued_at.to_pydatetime()
        rows: list[RollingJobRow] = []

        def row(jid: str, state_: str, reason: str, detail: str,
                ps: list[Placement] | None) -> RollingJobRow:
            job = state.jobs[jid]
            ps = sorted(ps or [], key=lambda p: p.start)
            return RollingJobRow(
                job_id=jid, spec_json=json.dumps(job_spec(job)), state=state_, reason=reason,
                detail=detail, site=ps[0].site if ps else None, gpu_type=job.gpu_type,
                gpus=job.gpus, start=ps[0].start.to_pydatetime() if ps else None,
                end=ps[-1].end.to_pydatetime() if ps else None,
                energy_kwh=sum(p.energy_kwh for p in ps) if ps else None,
                emissions_kg=sum(p.emissions_kg for p in ps) if ps else None,
                pieces_json=json.dumps([jsonable(p) for p in ps]) if ps else None,
                plan_id=plan_id, issued_at=t, updated_at=now)

        for jid in state.pending:
            rec = state.record(jid, run.issued_at)
            rows.append(row(jid, str(JobState.PENDING), str(rec.reason), rec.detail,
                            state.tentative.get(jid)))
        for jid in sorted({p.job_id for p in run.committed}):
            rows.append(row(jid, str(JobState.DISPATCHED), str(ReasonCode.PLACED),
                            f"committed by the run issued at {run.issued_at.isoformat()}",
                            state.committed[jid]))
        for u in run.ended:
            rows.append(row(u.job_id, str(JobState.FAILED), str(u.reason), u.detail, None))
        with Session(self.engine) as s, s.begin():
            for r in rows:
                s.merge(r)

    def rows(self, states: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
        """The ``rolling_jobs`` rows as dicts, optionally in ``states``, by job id."""
        q = select(RollingJobRow)
        if states:
            q = q.where(RollingJobRow.state.in_(states))
        cols = ("job_id", "state", "reason", "detail", "site", "start", "end", "plan_id",
                "issued_at")
        with Session(self.engine) as s:
            return [{c: getattr(r, c) for c in cols}
                    | {"pieces": len(json.loads(r.pieces_json or "[]"))}
                    for r in s.scalars(q.order_by(RollingJobRow.job_id))]
