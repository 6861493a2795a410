"""The daily cron: the plan -> dispatch pipeline once per local calendar day.

Rule. The run of local day D (in the catalog's time zone) is due from D's configured wall-clock
time onwards and plans the date ``D + cron_plan_offset_days`` (day-ahead by default), issued at
that date's 00:00 UTC. A run is keyed by its planning date and claimed with an ``INSERT`` (see
:meth:`carbonsched.store.service.ServiceStore.claim_run`), so

* a DST change cannot make two runs (the fall-back hour repeats the wall-clock time, the key
  does not repeat) nor none (a wall-clock time that spring-forward skips is "past" at 03:00);
* a restart after downtime runs the one due day once on start-up, never once per missed
  trigger (only the newest due day is looked at);
* replicas that share one PostgreSQL run it once: only the holder of the advisory lock
  (:class:`~carbonsched.store.service.LeaderLock`) schedules, and the key refuses a second claim
  even if two processes tried.

APScheduler fires :meth:`DailyCron.tick` at the configured local time (``CronTrigger`` in the
zone) and every ``cron_check_interval_s`` as a safety net; ``tick`` decides from the injected
clock alone (STYLE practice 15), so tests drive it through DST and downtime by moving the clock.

The pipeline's dispatch step is injected (:data:`DispatchStep`); while none is configured the
run record says ``dispatch: not configured``.
"""

from __future__ import annotations

import importlib
import logging
import threading
import time as _time
import traceback
from collections import Counter as _Counter
from collections.abc import Callable
from datetime import date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pandas as pd

from carbonsched.catalog import Catalog, load_catalog
from carbonsched.clock import Clock
from carbonsched.errors import InputError
from carbonsched.service.runs import (
    DispatchStep,
    RunOutcome,
    finish_run,
    update_submitted,
    with_submitted_jobs,
)
from carbonsched.timeaxis import day_start_utc

log = logging.getLogger("carbonsched.service.cron")

STARTUP_DELAY_S = 2.0
"""Delay of the start-up run check after the scheduler starts. [s]"""


def load_dispatch_step(spec: str) -> DispatchStep | None:
    """Import a dispatch step named ``module:function``; ``""`` means none.

    Raises
    ------
    InputError
        The module or function cannot be imported.
    """
    if not spec:
        return None
    mod, _, fn = spec.partition(":")
    try:
        return getattr(importlib.import_module(mod), fn or "dispatch_plan")
    except (ImportError, AttributeError) as exc:
        raise InputError(f"dispatcher {spec!r} cannot be imported ({exc}); give "
                         "module:function, e.g. carbonsched.dispatch.outbox:dispatch_plan") from exc


def catalog_timezone(catalog: Catalog) -> str:
    """The catalog's time zone: the IANA zone most of its sites use (ties: the first site's)."""
    zones = [s.timezone for s in catalog.sites]
    counts = _Counter(zones)
    best = max(counts.values())
    return next(z for z in zones if counts[z] == best)


def due_day(now: datetime, zone: ZoneInfo, at: time) -> date:
    """The newest local day whose run time has passed at ``now``.

    Parameters
    ----------
    now
        Tz-aware instant.
    zone
        The cron's time zone.
    at
        Local wall-clock time of the daily run.
    """
    local = now.astimezone(zone)
    wall = local.time().replace(tzinfo=None, fold=0)
    return local.date() if wall >= at else local.date() - timedelta(days=1)


Pipeline = Callable[[str, datetime, str], RunOutcome]
"""``pipeline(planning_date, issued_at, trigger) -> RunOutcome``."""


class DailyCron:
    """Runs the pipeline once per local calendar day (see the module docstring).

    Parameters
    ----------
    store
        :class:`~carbonsched.store.service.ServiceStore` (run records).
    pipeline
        The plan -> dispatch pipeline.
    clock
        The one clock.
    zone
        IANA time zone of the cron.
    at
        Local wall-clock time of the daily run.
    offset_days
        The run of local day D plans D + ``offset_days``.
    leader
        :class:`~carbonsched.store.service.LeaderLock`.
    replica
        Name recorded with each run.
    check_interval_s, stale_after_s
        Safety-net tick period and stale-run takeover age. [s]
    metrics
        :class:`~carbonsched.service.metrics.ServiceMetrics` or ``None``.
    """

    def __init__(self, store: Any, pipeline: Pipeline, clock: Clock, zone: str, at: time,
                 offset_days: int = 1, leader: Any = None, replica: str = "replica",
                 check_interval_s: float = 300.0, stale_after_s: float = 3 * 3600.0,
                 metrics: Any = None) -> None:
        self.store = store
        self.pipeline = pipeline
        self.clock = clock
        self.zone_name = zone
        self.zone = ZoneInfo(zone)
        self.at = at
        self.offset_days = offset_days
        self.leader = leader
        self.replica = replica
        self.check_interval_s = check_interval_s
        self.stale_after = timedelta(seconds=stale_after_s)
        self.metrics = metrics
        self._busy = threading.Lock()
        self._scheduler: Any = None

    def due(self, now: datetime | None = None) -> tuple[date, date]:
        """``(local_day, planning_date)`` of the newest due run at ``now`` (default: clock)."""
        day = due_day(now or self.clock.now(), self.zone, self.at)
        return day, day + timedelta(days=self.offset_days)

    def is_leader(self) -> bool:
        """Whether this replica runs the cron (tries to take the lead)."""
        if self.leader is None:
            return True
        try:
            got = self.leader.try_acquire()
        except Exception as exc:  # a dead database: not leader now, try again next tick
            log.warning("cron: leader check failed: %s", exc)
            got = False
        if self.metrics is not None:
            self.metrics.cron_leader.set(1 if got else 0)
        return got

    def tick(self, trigger: str = "scheduled") -> dict[str, Any] | None:
        """Run the due day's pipeline if it has not run; return its run record or ``None``."""
        if not self._busy.acquire(blocking=False):
            return None
        try:
            if not self.is_leader():
                return None
            now = self.clock.now()
            local_day, planning = self.due(now)
            pdate = planning.isoformat()
            existing = self.store.get_run(pdate)
            if existing is not None and existing["status"] != "running":
                return None
            issued_at = day_start_utc(pdate).to_pydatetime()
            if not self.store.claim_run(pdate, local_day.isoformat(), issued_at, trigger,
                                        self.replica, now, self.stale_after):
                return None
            log.info("cron: run for planning date %s (local day %s, %s) started", pdate,
                     local_day, trigger)
            return self._run(pdate, issued_at, trigger)
        finally:
            self._busy.release()

    def _run(self, pdate: str, issued_at: datetime, trigger: str) -> dict[str, Any]:
        try:
            out = self.pipeline(pdate, issued_at, trigger)
            self.store.finish_run(pdate, self.clock.now(), out.status, plan_id=out.plan_id,
                                  solver_status=out.solver_status, dispatch=out.dispatch)
            status = out.status
        except Exception as exc:
            log.error("cron: run for %s failed: %s", pdate, exc)
            detail = f"{type(exc).__name__}: {exc}"
            if not isinstance(exc, InputError):
                detail += "\n" + "".join(traceback.format_exception(exc)[-3:])
            self.store.finish_run(pdate, self.clock.now(), "failed", error=detail[:4000])
            status = "failed"
        if self.metrics is not None:
            self.metrics.plan_runs.labels(trigger=trigger, status=status).inc()
        return self.store.get_run(pdate)

    # --- APScheduler wiring -------------------------------------------------------------------
    def triggers(self) -> list[Any]:
        """The APScheduler triggers: the daily ``CronTrigger`` and the safety-net interval."""
        from apscheduler.triggers.cron import CronTrigger
        from apscheduler.triggers.interval import IntervalTrigger

        return [CronTrigger(hour=self.at.hour, minute=self.at.minute, second=self.at.second,
                            timezone=self.zone),
                IntervalTrigger(seconds=self.check_interval_s, timezone=self.zone)]

    def start(self, startup_tick: bool = True) -> None:
        """Start the background scheduler; a run missed while down runs once now."""
        from apscheduler.schedulers.background import BackgroundScheduler

        sched = BackgroundScheduler(timezone=self.zone)
        daily, safety = self.triggers()
        sched.add_job(self.tick, daily, id="daily", kwargs={"trigger": "scheduled"},
                      coalesce=True, max_instances=1, misfire_grace_time=3600)
        sched.add_job(self.tick, safety, id="safety-net", kwargs={"trigger": "check"},
                      coalesce=True, max_instances=1, misfire_grace_time=None)
        if startup_tick:
            # a moment after start-up, so that a process that fails to bind its port (and
            # shuts down at once) claims nothing
            sched.add_job(self.tick, "date", id="startup", kwargs={"trigger": "startup"},
                          run_date=datetime.now(self.zone) + timedelta(
                              seconds=STARTUP_DELAY_S), misfire_grace_time=None)
        sched.start()
        self._scheduler = sched

    def shutdown(self) -> None:
        """Stop the scheduler and give up the lead."""
        if self._scheduler is not None:
            self._scheduler.shutdown(wait=False)
            self._scheduler = None
        if self.leader is not None:
            self.leader.release()


def planning_pipeline(settings: Any, service_store: Any, clock: Clock,
                      dispatch: DispatchStep | None = None, metrics: Any = None,
                      on_plan: Callable[[str], None] | None = None) -> Pipeline:
    """The plan -> dispatch pipeline the cron and ``carbonsched plan --dispatch`` run.

    Forecast and plan the date (:func:`carbonsched.pipeline.daily.run_daily_plan`) with the
    configured workload plus the jobs submitted through the API, record plan and forecasts in
    the store, update the submitted jobs' states, then dispatch (or record that dispatch is not
    configured).

    Parameters
    ----------
    settings
        :class:`~carbonsched.config.Settings`.
    service_store
        :class:`~carbonsched.store.service.ServiceStore`.
    clock
        The one clock (handed to the dispatch step).
    dispatch
        ``dispatch(store, plan_id, catalog, *, clock=...)`` or ``None``.
    metrics
        :class:`~carbonsched.service.metrics.ServiceMetrics` or ``None``.
    on_plan
        Called with the new plan id once it is stored (the API reloads its book).
    """
    from carbonsched.pipeline.daily import run_daily_plan
    from carbonsched.workload.files import demo_workload, read_workload

    catalog = load_catalog(settings.catalog)

    def run(pdate: str, issued_at: datetime, trigger: str) -> RunOutcome:
        t0 = _time.perf_counter()
        wl = (read_workload(settings.workload_file) if settings.workload_file
              else demo_workload(catalog, pdate))
        if settings.rolling:
            from carbonsched.service.rolling import run_rolling

            return run_rolling(settings, service_store, catalog, wl, pdate, issued_at,
                               trigger, clock, dispatch, metrics, on_plan)
        wl, api_ids = with_submitted_jobs(wl, service_store, pd.Timestamp(issued_at),
                                           settings.horizon_hours)
        daily = run_daily_plan(pdate, settings.catalog, wl, settings.data_dir, settings.solver,
                               settings.time_limit_s, settings.horizon_hours)
        doc = daily.document
        doc["run"] = {"planning_date": pdate, "issued_at": issued_at.isoformat(),
                      "trigger": trigger, "api_jobs": len(api_ids)}
        service_store.store.save_plan(doc, daily.forecasts)
        update_submitted(service_store, doc, api_ids, clock.now())
        if on_plan is not None:
            on_plan(doc["plan_id"])
        run_status, status, disp = finish_run(doc, service_store, catalog, clock, dispatch,
                                              metrics)
        log.info("pipeline: plan %s for %s (%s) in %.1f s; %s", doc["plan_id"], pdate, status,
                 _time.perf_counter() - t0, disp)
        return RunOutcome(run_status, doc["plan_id"], status, disp)

    return run


