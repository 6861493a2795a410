"""The pieces every planning run shares, daily or rolling, from the cron or the CLI.

A run plans, records the plan in the store, updates the jobs submitted through the API, then
dispatches (:func:`finish_run`); its outcome (:class:`RunOutcome`) goes to the run record.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pandas as pd

from carbonsched.catalog import Catalog
from carbonsched.clock import Clock
from carbonsched.domain import Job, Workload

DispatchStep = Callable[..., Any]
"""``dispatch(store, plan_id, catalog, *, clock=...) -> outcome`` — the signature of
``carbonsched.dispatch.outbox.dispatch_plan``; the outcome is recorded (JSON) in the run record."""

DISPATCH_NOT_CONFIGURED = "dispatch: not configured"


@dataclass
class RunOutcome:
    """What one pipeline run produced (recorded in its run record)."""

    status: str
    """``succeeded``, ``infeasible`` (plan written, solver found no feasible plan) or
    ``dispatch_failed``."""
    plan_id: str | None
    solver_status: str | None
    dispatch: str


def finish_run(doc: dict[str, Any], service_store: Any, catalog: Catalog, clock: Clock,
               dispatch: Callable[..., Any] | None, metrics: Any,
               **dispatch_kw: Any) -> tuple[str, str, str]:
    """The end of a planning run, daily or rolling: solver metrics, then dispatch.

    A dispatch that raises does not lose the plan (it is stored already): the run is
    ``dispatch_failed`` and the error is in the run record.

    Parameters
    ----------
    doc
        The stored plan document.
    dispatch
        :func:`carbonsched.dispatch.outbox.dispatch_plan` or ``None`` (not configured).
    dispatch_kw
        Passed to ``dispatch`` (e.g. ``commit_before`` for a rolling run).

    Returns
    -------
    (str, str, str)
        Run status (``succeeded``, ``infeasible`` or ``dispatch_failed``), solver status, and
        the dispatch summary for the run record.
    """
    status = doc["solver"]["status"]
    if metrics is not None:
        metrics.solver_seconds.observe(doc["solver"]["seconds"])
        metrics.solver_status.labels(status=status).inc()
    run_status = "infeasible" if status in ("infeasible", "no_solution") else "succeeded"
    if dispatch is None:
        disp, outcome = DISPATCH_NOT_CONFIGURED, "not_configured"
    else:
        try:
            # dispatch_plan's clock is a callable returning "now" (the service's clock.now)
            res = dispatch(service_store.store, doc["plan_id"], catalog, clock=clock.now,
                           **dispatch_kw)
            res = res.to_dict() if hasattr(res, "to_dict") else res
            disp, outcome = "dispatch: " + json.dumps(res, default=str)[:4000], "ok"
        except Exception as exc:
            disp = f"dispatch failed: {type(exc).__name__}: {exc}"
            outcome, run_status = "failed", "dispatch_failed"
    if metrics is not None:
        metrics.dispatch_outcomes.labels(outcome=outcome).inc()
    return run_status, status, disp


def with_submitted_jobs(wl: Workload, service_store: Any, issued_at: pd.Timestamp,
                         horizon_hours: int) -> tuple[Workload, set[str]]:
    """Add the API's pending and planned jobs whose window overlaps the horizon."""
    end = issued_at + pd.Timedelta(hours=horizon_hours)
    have = {j.id for j in wl.jobs}
    extra: list[Job] = []
    for row in service_store.jobs(states=("Pending", "Planned")):
        job = job_from_spec(row["spec"])
        if job.id in have or job.deadline <= issued_at or job.earliest_start >= end:
            continue
        extra.append(job)
    return Workload(jobs=list(wl.jobs) + extra, inference=wl.inference), {j.id for j in extra}


def job_from_spec(spec: dict[str, Any]) -> Job:
    """A stored API job through the one job schema (minutes, pieces and preemptible kept).

    Raises
    ------
    pydantic.ValidationError
        The stored spec breaks the job schema.
    """
    from carbonsched.workload.schema import JobSpec

    return JobSpec.model_validate(spec).to_job()


def update_submitted(service_store: Any, doc: dict[str, Any], api_ids: set[str],
                      now: datetime) -> None:
    """Record in the service store where the plan put each job submitted through the API."""
    placed = {p["job_id"]: p for p in doc["placements"]}
    unplaced = {u["job_id"]: u for u in doc["unplaced"]}
    for jid in api_ids:
        if jid in placed:
            p = placed[jid]
            service_store.update_job(
                jid, state="Planned", reason="Placed", detail="", plan_id=doc["plan_id"],
                site=p["site"], start=pd.Timestamp(p["start"]).to_pydatetime(),
                end=pd.Timestamp(p["end"]).to_pydatetime(), energy_kwh=p["energy_kwh"],
                emissions_kg=p["emissions_kg"], reserved=False, updated_at=now)
        elif jid in unplaced:
            u = unplaced[jid]
            service_store.update_job(jid, state="Pending", reason=u["reason"],
                                     detail=u.get("detail", ""), plan_id=doc["plan_id"],
                                     site=None, start=None, end=None, reserved=False,
                                     updated_at=now)
