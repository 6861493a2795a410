"""The rolling runner's state in the store: pending work carried between the service's runs.

:class:`RollingStore` loads a :class:`~carbonsched.rolling.RollingState` from the
``rolling_jobs`` table (:class:`~carbonsched.store.rolling_models.RollingJobRow`) before a run
and writes back what the run changed, so the cron carries jobs (with their own deadlines) from
one run to the next and committed work holds its capacity in later runs.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pandas as pd
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from carbonsched.domain import Job, JobState, Placement, ReasonCode, Unplaced, WorkKind, jsonable
from carbonsched.rolling import RollingState, RunResult
from carbonsched.store.rolling_models import RollingJobRow


def job_spec(job: Job) -> dict[str, Any]:
    """A job as the workload file's fields (JSON-ready)."""
    return {"id": job.id, "tenant": job.tenant, "kind": str(job.kind), "gpu_type": job.gpu_type,
            "gpus": job.gpus, "duration_hours": job.duration_hours,
            "power_per_gpu_kw": job.power_per_gpu_kw,
            "earliest_start": jsonable(job.earliest_start), "deadline": jsonable(job.deadline),
            "allowed_sites": list(job.allowed_sites)}


def job_from_spec(spec: dict[str, Any]) -> Job:
    """The job of :func:`job_spec`."""
    return Job(id=spec["id"], tenant=spec["tenant"], gpu_type=spec["gpu_type"],
               gpus=int(spec["gpus"]), duration_hours=int(spec["duration_hours"]),
               power_per_gpu_kw=float(spec["power_per_gpu_kw"]),
               earliest_start=pd.Timestamp(spec["earliest_start"]).tz_convert("UTC"),
               deadline=pd.Timestamp(spec["deadline"]).tz_convert("UTC"),
               allowed_sites=tuple(spec.get("allowed_sites", ())),
               kind=WorkKind(spec.get("kind", "batch")))


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

    def load(self) -> RollingState:
        """The state as the last run left it (pending, committed and ended jobs)."""
        st = RollingState()
        with Session(self.engine) as s:
            for r in s.scalars(select(RollingJobRow)):
                job = job_from_spec(json.loads(r.spec_json))
                st.jobs[r.job_id] = job
                if r.state == JobState.PENDING:
                    st.pending[r.job_id] = job
                    if r.start is not None and r.site is not None:
                        st.tentative[r.job_id] = self._placement(r)
                elif r.state == JobState.DISPATCHED:
                    st.committed[r.job_id] = self._placement(r)
                else:
                    st.ended[r.job_id] = Unplaced(r.job_id, ReasonCode(r.reason), r.detail)
            last = s.scalar(select(func.max(RollingJobRow.issued_at)))
        st.last_issued_at = _ts(last)
        return st

    @staticmethod
    def _placement(r: RollingJobRow) -> Placement:
        return Placement(job_id=r.job_id, site=r.site or "", start=_ts(r.start),
                         end=_ts(r.end), gpu_type=r.gpu_type, gpus=r.gpus,
                         energy_kwh=float(r.energy_kwh or 0.0),
                         emissions_kg=float(r.emissions_kg or 0.0))

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
                p: Placement | None) -> RollingJobRow:
            job = state.jobs[jid]
            return RollingJobRow(
                job_id=jid, spec_json=json.dumps(job_spec(job)), state=state_, reason=reason,
                detail=detail, site=p.site if p else None, gpu_type=job.gpu_type, gpus=job.gpus,
                start=p.start.to_pydatetime() if p else None,
                end=p.end.to_pydatetime() if p else None,
                energy_kwh=p.energy_kwh if p else None,
                emissions_kg=p.emissions_kg if p else None, plan_id=plan_id, issued_at=t,
                updated_at=now)

        for jid in state.pending:
            rec = state.record(jid, run.issued_at)
            rows.append(row(jid, str(JobState.PENDING), str(rec.reason), rec.detail,
                            state.tentative.get(jid)))
        for p in run.committed:
            rows.append(row(p.job_id, str(JobState.DISPATCHED), str(ReasonCode.PLACED),
                            f"committed by the run issued at {run.issued_at.isoformat()}", p))
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
        with Session(self.engine) as s:
            return [{c: getattr(r, c) for c in (
                "job_id", "state", "reason", "detail", "site", "start", "end", "plan_id",
                "issued_at")} for r in s.scalars(q.order_by(RollingJobRow.job_id))]
