"""``GET /v1/runs`` and ``POST /v1/runs``: the daily pipeline's run records."""

from __future__ import annotations

import threading
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query

from carbonsched.api.deps import AdminRole, ReadRole, State
from carbonsched.api.routes import ERRORS
from carbonsched.api.schemas import ErrorPublic, RunPublic, RunsPublic, RunTriggered

router = APIRouter(prefix="/v1", tags=["runs"], responses=ERRORS)


@router.get("/runs", operation_id="listRuns", response_model=RunsPublic)
def list_runs(state: State, role: ReadRole,
              limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> RunsPublic:
    """Run records (one per issue time), newest first, and this replica's cron state.

    ``cron.next_due_planning_date`` and ``cron.next_due_issue_time`` (UTC) name the first run
    that falls due after now, the run the cron claims then (daily: the next local day's run
    time; rolling every N < 24 hours: the next issue time of the cadence). ``cron.skipped``
    names a run due before this process started that it did not run because the start-up run
    is off (``CARBONSCHED_CRON_STARTUP_RUN=false``).
    """
    runs = [RunPublic(**r) for r in state.db.runs(limit)]
    cron = state.cron
    info: dict = {"enabled": cron is not None}
    if cron is not None:
        _, planning, issued = cron.next_due()
        info |= {"leader": bool(cron.leader is None or cron.leader.held),
                 "timezone": cron.zone_name, "at": cron.at.isoformat(),
                 "next_due_planning_date": planning.isoformat(),
                 "next_due_issue_time": issued.strftime("%Y-%m-%dT%H:%M:%SZ")}
        if cron.skipped_note:
            info["skipped"] = cron.skipped_note
    return RunsPublic(data=runs, count=len(runs), cron=info)


@router.post("/runs", operation_id="triggerRun", status_code=202, response_model=RunTriggered,
             responses={409: {"model": ErrorPublic, "description": "The cron is disabled."}})
def trigger_run(state: State, role: AdminRole) -> RunTriggered:
    """Run the due day's pipeline now if it has not run (idempotent by planning date)."""
    cron = state.cron
    if cron is None:
        raise HTTPException(409, "the cron is disabled on this replica (--no-cron); run "
                            "`carbonsched plan --dispatch` instead")
    _, planning, issued = cron.due_issue()
    pdate = planning.isoformat()
    if not cron.is_leader():   # its tick would not run: say so rather than "started"
        return RunTriggered(planning_date=pdate, started=False,
                            detail="this replica is a standby: the replica holding the "
                            "leader's lease runs the pipeline; send POST /v1/runs to it, or "
                            "wait for its next check")
    existing = state.db.get_run(issued)
    if existing is not None:
        what = pdate if cron.run_every_hours == 24 else existing["run_key"]
        return RunTriggered(planning_date=pdate, started=False,
                            detail=f"the run for {what} exists ({existing['status']})")
    threading.Thread(target=cron.tick, kwargs={"trigger": "manual"}, daemon=True).start()
    return RunTriggered(planning_date=pdate, started=True,
                        detail="run started; poll GET /v1/runs")
