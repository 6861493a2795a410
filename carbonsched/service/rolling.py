"""One rolling step of the service: plan over ``H`` from the issue time, commit, carry the rest.

The service's run path (:func:`carbonsched.service.runs.execute_run` with
``CARBONSCHED_ROLLING=true``: the cron and ``carbonsched plan --dispatch --rolling``) calls
:func:`rolling_step` once per run:

1. load the carried state from the store (:class:`~carbonsched.store.rolling_state.RollingStore`)
   and add the new work: the configured workload and the jobs submitted through the API
   (``POST /v1/jobs``) that are not committed yet;
2. end the pending jobs whose deadline has passed (``DeadlinePassed``); committed work that
   overlaps the horizon holds its GPUs and power as the planner's running work
   (:meth:`carbonsched.plan.rolling.RollingPlanner.prepare`);
3. forecast and plan the horizon ``[issued_at, issued_at + H)`` with the daily plan's own code
   (:func:`carbonsched.pipeline.daily.run_daily_plan` with ``horizon_hours = H``), so the plan
   document, its notes and fallbacks, the stored forecasts and the dispatch path are the ones
   of every plan;
4. commit the placements that start before the next run (``issued_at + run_every``) and keep
   the others pending (:meth:`~carbonsched.plan.rolling.RollingPlanner.apply`); the document gets a
   ``rolling`` section (committed, deferred, ended with reasons, pinned running work) and the
   pinned stand-ins are removed from it, so that dispatch never sees them;
5. the run path stores the plan, writes the state back, updates the API jobs' states and
   dispatches with ``commit_before = issued_at + run_every``
   (:func:`carbonsched.dispatch.outbox.dispatch_plan`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from carbonsched.catalog import Catalog
from carbonsched.domain import Job, Workload, jsonable
from carbonsched.pipeline.daily import DailyPlan, run_daily_plan
from carbonsched.plan.rolling import RollingPlanner, RunResult
from carbonsched.store.rolling_state import RollingStore
from carbonsched.timeaxis import hourly_slots


@dataclass
class RollingStep:
    """What one rolling step produced (before it is stored)."""

    daily: DailyPlan
    run: RunResult
    planner: RollingPlanner
    rolling_store: RollingStore


def rolling_step(store: Any, catalog: Catalog, catalog_ref: str, pdate: str,
                 issued_at: pd.Timestamp, new_jobs: list[Job], workload: Workload,
                 data_dir: Any, solver: str, time_limit_s: float, horizon_hours: int,
                 run_every_hours: int = 24) -> RollingStep:
    """Plan one rolling step (see the module docstring); nothing is written yet.

    Parameters
    ----------
    store
        The :class:`~carbonsched.store.Store` holding ``rolling_jobs``.
    catalog, catalog_ref
        The catalog and the name or path ``run_daily_plan`` loads.
    pdate
        Planning date, ``YYYY-MM-DD``; the step is issued at ``issued_at`` (its 00:00 UTC).
    new_jobs
        Work to add as pending (ids already known are ignored).
    workload
        Its inference demand is planned in the horizon.
    data_dir, solver, time_limit_s
        As for :func:`carbonsched.pipeline.daily.run_daily_plan`.
    horizon_hours, run_every_hours
        ``H`` and the hours to the next run. [h]

    Raises
    ------
    InputError
        As :func:`~carbonsched.pipeline.daily.run_daily_plan`; a horizon shorter than the interval.
    """
    rs = RollingStore(store)
    rp = RollingPlanner(catalog.sites, horizon_hours=horizon_hours,
                        run_every_hours=run_every_hours, state=rs.load())
    rp.submit(new_jobs)
    t = pd.Timestamp(issued_at).tz_convert("UTC")
    jobs, running, ended = rp.prepare(t, hourly_slots(t, horizon_hours))
    inf = [d for d in workload.inference
           if t <= d.hour < t + pd.Timedelta(hours=horizon_hours)]
    daily = run_daily_plan(pdate, catalog_ref, Workload(jobs=jobs, inference=inf), data_dir,
                           solver, time_limit_s, horizon_hours, running=running)
    run = rp.apply(t, daily.problem, daily.result, ended)
    doc = daily.document
    held = sorted({r.job_id for r in daily.problem.running})
    doc["notes"] = list(doc.get("notes", [])) + run.notes
    doc["rolling"] = {
        "horizon_hours": horizon_hours, "run_every_hours": run_every_hours,
        "commit_before": jsonable(run.commit_before),
        "committed": sorted(p.job_id for p in run.committed),
        "deferred": [{"job_id": p.job_id, "start": jsonable(p.start)} for p in run.deferred],
        "ended": [jsonable(u) for u in run.ended],
        "still_pending": [jsonable(u) for u in run.still_pending],
        "running_held": held,
        "rule": "placements starting before commit_before are committed (dispatched); later "
                "ones stay pending and are planned again by the next run",
    }
    return RollingStep(daily, run, rp, rs)

