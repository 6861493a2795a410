"""The cron: the plan -> dispatch pipeline once per local calendar day, or once per issue time.

Rule. The run of local day D (in the catalog's time zone) is due from D's configured wall-clock
time onwards and plans the date ``D + cron_plan_offset_days`` (day-ahead by default), issued at
that date's 00:00 UTC. A daily plan covers its whole UTC date from that issue time, so the run
must come at or before it: a cron time and offset whose run would come after it on any day (the
plan's first hours past when it is made) is refused when the cron is made
(:func:`check_daily_issue`). A run is keyed by its planning date and claimed with an ``INSERT``
(see :meth:`carbonsched.store.service.ServiceStore.claim_run`), so

* a DST change cannot make two runs (the fall-back hour repeats the wall-clock time, the key
  does not repeat) nor none (a wall-clock time that spring-forward skips is "past" at 03:00);
* a restart after downtime runs the one due day once on start-up, never once per missed
  trigger (only the newest due day is looked at);
* replicas that share one database run it once: only the holder of the leader's lease
  (:class:`~carbonsched.store.service.LeaderLease`) schedules, and the key refuses a second claim
  even if two processes tried;
* a replica that dies holding the day's run leaves a record whose lease runs out
  ``lease_s`` after its last heartbeat; the leader then takes the record over (the service's
  lease loop, :class:`carbonsched.service.loops.ServiceLoops`, asks for a tick at every renewal,
  :meth:`DailyCron.kick`), so the day is run within about ``lease_s * 4 / 3``, not hours later.

Several runs a day. A rolling service (``CARBONSCHED_ROLLING=true``) with
``CARBONSCHED_ROLLING_RUN_EVERY_HOURS`` = N < 24 runs once per *issue time*: 00:00 UTC and every
N hours after it (N divides 24, :func:`carbonsched.timeaxis.check_run_every_hours`). The run
issued at T is due from T on (it plans ``[T, T + H)`` on the forecasts issued at T and commits
what starts before T + N); its record is keyed by T
(:func:`carbonsched.store.service.run_key`), so the same guarantees hold per issue time: two
replicas run it once, a restart after downtime runs the newest due issue time once (the
missed ones are not replayed: their commit windows are past), and a run whose process died
is taken over once its lease ran out. The daily rule above is N = 24.

APScheduler fires :meth:`DailyCron.tick` at the configured local time (``CronTrigger`` in the
zone) and every ``cron_check_interval_s`` as a safety net; ``tick`` decides from the injected
clock alone (STYLE practice 15), so tests drive it through DST and downtime by moving the clock.

Each due run goes through the one run path, :func:`carbonsched.service.runs.claim_and_run`
(claim the planning date's record, run, finish the record; a failure recorded with its message
and traceback exactly as ``carbonsched plan --dispatch`` records it); the pipeline is
:func:`carbonsched.service.runs.planning_pipeline` (see :meth:`DailyCron.from_settings`). Its
dispatch step is injected (:data:`~carbonsched.service.runs.DispatchStep`); while none is
configured the run record says ``dispatch: not configured``.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections import Counter as _Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from carbonsched.catalog import Catalog, load_catalog
from carbonsched.clock import Clock
from carbonsched.config import MAX_PLAN_OFFSET_DAYS
from carbonsched.errors import CarbonschedError, InputError
from carbonsched.service.runs import DispatchStep, Pipeline, claim_and_run, planning_pipeline
from carbonsched.timeaxis import check_run_every_hours, day_start_utc, latest_issue_time

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


def _span(t: timedelta) -> str:
    """A duration as a person reads it: ``11 h``, ``30 min``, ``1 h 30 min``."""
    minutes = -(-int(t.total_seconds()) // 60)
    h, m = divmod(minutes, 60)
    return " ".join(p for p in (f"{h} h" if h else "", f"{m} min" if m else "") if p) or "0 min"


def _wall(t: timedelta) -> str:
    """A time of day given as the time since midnight (``19:00``; seconds only when not 0)."""
    total = int(t.total_seconds())
    hm = f"{total // 3600:02d}:{total % 3600 // 60:02d}"
    return hm if total % 60 == 0 else f"{hm}:{total % 60:02d}"


def check_daily_issue(zone: str, at: time, offset_days: int, today: date) -> None:
    """Refuse a daily cron whose run would come after the issue time of the plan it makes.

    The run of local day D, at ``at`` in ``zone``, plans D + ``offset_days`` from that date's
    00:00 UTC (:meth:`DailyCron.due_issue`). A run after that instant would issue a plan whose
    first hours are already past: placements there would start at once, in hours the plan did
    not price, on forecasts no run could fetch before them. Checked for every local day of the
    year from ``today`` (both sides of a DST change); a run exactly at the issue time is allowed.

    Raises
    ------
    InputError
        On some day the run comes after the issue time; the message names the settings, that
        day, how many hours would be past, and the latest ``CARBONSCHED_CRON_TIME`` and the
        least ``CARBONSCHED_CRON_PLAN_OFFSET_DAYS`` that would do.
    """
    tz = ZoneInfo(zone)
    worst, when = timedelta(0), None
    for i in range(367):
        d = today + timedelta(days=i)
        run = datetime.combine(d, at, tzinfo=tz).astimezone(UTC)
        issued = day_start_utc(d + timedelta(days=offset_days)).to_pydatetime()
        if run - issued > worst:
            worst, when = run - issued, (d, run, issued)
    if when is None:
        return
    day, run, issued = when
    since_midnight = timedelta(hours=at.hour, minutes=at.minute, seconds=at.second)
    fixes = []
    if since_midnight - worst >= timedelta(0):
        fixes.append(f"CARBONSCHED_CRON_TIME={_wall(since_midnight - worst)} or earlier")
    more = offset_days + -(-worst // timedelta(days=1))
    if more <= MAX_PLAN_OFFSET_DAYS:
        latest = since_midnight - worst + (more - offset_days) * timedelta(days=1)
        fixes.append(f"CARBONSCHED_CRON_PLAN_OFFSET_DAYS={more}" + (
            f" (with it, CARBONSCHED_CRON_TIME up to {_wall(latest)})"
            if latest < timedelta(days=1) else ""))
    raise InputError(
        f"the daily cron would issue its plans before it runs: CARBONSCHED_CRON_TIME="
        f"{_wall(since_midnight)} in {zone} (CARBONSCHED_CRON_TIMEZONE; empty: the catalog's "
        f"zone) with CARBONSCHED_CRON_PLAN_OFFSET_DAYS={offset_days}: the run of local day "
        f"{day.isoformat()} comes at {run:%Y-%m-%d %H:%M} UTC and plans "
        f"{(day + timedelta(days=offset_days)).isoformat()} from {issued:%Y-%m-%d %H:%M} UTC, "
        f"so the plan's first {_span(worst)} would be past when it is made (their placements "
        "would start at once, in hours the plan did not price, without live forecasts); set "
        + ", or ".join(fixes))


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


@dataclass(frozen=True)
class CronRule:
    """When runs fall due: the daily rule, or one run per issue time every N < 24 hours.

    The rule of the module docstring, apart from the cron that runs it, so that
    ``carbonsched plan --dispatch --rolling`` issues its run at the time the service's cron
    would (the same key: one run per issue time) and ``GET /v1/runs`` names the next run the
    cron claims.

    Attributes
    ----------
    zone
        IANA time zone of the daily run time.
    at
        Local wall-clock time of the daily run.
    offset_days
        The run of local day D plans D + ``offset_days`` (daily rule).
    every_hours
        24: the daily rule; 1, 2, 3, 4, 6, 8 or 12: one run per issue time, every this many
        hours from 00:00 UTC (``at`` and ``offset_days`` unused). [h]
    """

    zone: str
    at: time
    offset_days: int = 1
    every_hours: int = 24

    def __post_init__(self) -> None:
        check_run_every_hours(self.every_hours, "run_every_hours")

    @classmethod
    def from_settings(cls, settings: Any, catalog: Catalog | None = None) -> CronRule:
        """The service's rule: ``cron_*`` settings, the cadence when ``rolling``.

        The zone is ``cron_timezone``, else the catalog's (:func:`catalog_timezone`; default:
        loaded from ``settings.catalog``).
        """
        return cls(cron_zone(settings, catalog), settings.cron_time, settings.cron_plan_offset_days,
                   settings.rolling_run_every_hours if settings.rolling else 24)

    def due(self, now: datetime) -> tuple[date, date]:
        """``(local_day, planning_date)`` of the newest due day at ``now`` (daily rule)."""
        day = due_day(now, ZoneInfo(self.zone), self.at)
        return day, day + timedelta(days=self.offset_days)

    def due_issue(self, now: datetime) -> tuple[date, date, datetime]:
        """``(local_day, planning_date, issued_at)`` of the newest due run at ``now``.

        Daily (``every_hours`` = 24): :meth:`due`, issued at the planning date's 00:00 UTC.
        Every N < 24 hours: the newest issue time T <= ``now`` on the cadence, its UTC date and
        its local day in the zone.
        """
        if self.every_hours == 24:
            day, planning = self.due(now)
            return day, planning, day_start_utc(planning).to_pydatetime()
        t = latest_issue_time(now, self.every_hours).to_pydatetime()
        return t.astimezone(ZoneInfo(self.zone)).date(), t.date(), t

    def next_due(self, now: datetime) -> tuple[date, date, datetime]:
        """``(local_day, planning_date, issued_at)`` of the first run due after ``now``.

        :meth:`due_issue` at the moment the next run falls due: the next issue time of the
        cadence (N < 24), or the next local day's run time (daily rule). A run due at ``now``
        itself is the newest due one, not the next.
        """
        if self.every_hours < 24:
            nxt = latest_issue_time(now, self.every_hours).to_pydatetime()
            return self.due_issue(nxt + timedelta(hours=self.every_hours))
        day = due_day(now, ZoneInfo(self.zone), self.at) + timedelta(days=1)
        # fold 0: a run time that a DST change repeats falls due at its first occurrence; one
        # it skips maps past the gap, where the day is due as well
        return self.due_issue(datetime.combine(day, self.at, tzinfo=ZoneInfo(self.zone)))


def cron_zone(settings: Any, catalog: Catalog | None = None) -> str:
    """The cron's IANA zone: ``cron_timezone``, else the catalog's (:func:`catalog_timezone`).

    Parameters
    ----------
    settings
        :class:`carbonsched.config.Settings` (``cron_timezone``, ``catalog``).
    catalog
        The loaded catalog; loaded from ``settings.catalog`` when None.

    Returns
    -------
    str
        An IANA zone name (``Asia/Shanghai``).
    """
    return settings.cron_timezone or catalog_timezone(catalog or load_catalog(settings.catalog))


def check_cron_settings(settings: Any, zone: str, clock: Clock) -> None:
    """Refuse cron settings whose daily run would come after its plan's issue time.

    For ``carbonsched serve`` before it binds its port (:class:`DailyCron` checks it again when
    it is made): :func:`check_daily_issue` of ``cron_time`` and ``cron_plan_offset_days`` in
    ``zone``, for the daily cron (``rolling_run_every_hours`` 24 or no rolling; runs every
    N < 24 hours are issued at their own run time).

    Parameters
    ----------
    settings
        :class:`carbonsched.config.Settings` (``rolling``, ``rolling_run_every_hours``,
        ``cron_time``, ``cron_plan_offset_days``).
    zone
        The cron's IANA zone (:func:`cron_zone`).
    clock
        The clock whose local day is checked.

    Raises
    ------
    InputError
        As :func:`check_daily_issue`.
    """
    if settings.rolling and settings.rolling_run_every_hours < 24:
        return
    check_daily_issue(zone, settings.cron_time, settings.cron_plan_offset_days,
                      clock.now().astimezone(ZoneInfo(zone)).date())


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
        :class:`~carbonsched.store.service.LeaderLease`, or ``None`` (always leads).
    replica
        Name recorded with each run.
    check_interval_s
        Safety-net tick period. [s]
    lease_s
        The run records' lease (:meth:`~carbonsched.store.service.ServiceStore.claim_run`). [s]
    metrics
        :class:`~carbonsched.service.metrics.ServiceMetrics` or ``None``.
    startup_run
        Whether the day that was due when the cron was made (the catch-up after downtime) is
        run at start-up; off (``cron_startup_run = false``), only days whose run time comes
        after that are run.
    run_every_hours
        24 (default): the daily rule. 1, 2, 3, 4, 6, 8 or 12: one run per issue time, every
        this many hours from 00:00 UTC (the module docstring; ``at`` and ``offset_days`` are
        then unused). [h]
    stop
        The service's stop event (set when its shutdown begins): from then on :meth:`tick`
        begins no run; ``None``: an event never set.

    Raises
    ------
    TimeAxisError
        ``run_every_hours`` does not divide 24.
    InputError
        Daily: ``at`` and ``offset_days`` would run after the plan's issue time on some day
        (:func:`check_daily_issue`).
    """

    def __init__(self, store: Any, pipeline: Pipeline, clock: Clock, zone: str, at: time,
                 offset_days: int = 1, leader: Any = None, replica: str = "replica",
                 check_interval_s: float = 300.0, lease_s: float = 45.0,
                 metrics: Any = None, startup_run: bool = True,
                 run_every_hours: int = 24, stop: threading.Event | None = None) -> None:
        self.rule = CronRule(zone, at, offset_days, run_every_hours)
        self.run_every_hours = self.rule.every_hours
        if self.run_every_hours == 24:
            check_daily_issue(zone, at, offset_days, clock.now().astimezone(ZoneInfo(zone))
                              .date())
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
        self.lease = timedelta(seconds=lease_s)
        self.metrics = metrics
        self.startup_run = startup_run
        self.started_at = clock.now()
        self._skipped: str | None = None
        self.skipped_note = ""
        """What this process did not run because it was due before the start and the start-up
        run is off (``GET /v1/runs`` shows it under ``cron.skipped``); ``""`` when nothing."""
        self._busy = threading.Lock()
        self._scheduler: Any = None
        self.stop = stop or threading.Event()
        """The service's stop event: once set (shutdown began) :meth:`tick` begins no run."""

    @classmethod
    def from_settings(cls, settings: Any, store: Any, clock: Clock, *,
                      catalog: Catalog | None = None, dispatch: DispatchStep | None = None,
                      metrics: Any = None, on_plan: Callable[[str], None] | None = None,
                      leader: Any = None, replica: str = "replica",
                      stop: threading.Event | None = None) -> DailyCron:
        """The service's cron: the run path's pipeline with the ``cron_*`` settings.

        Parameters
        ----------
        settings
            :class:`~carbonsched.config.Settings`.
        store
            :class:`~carbonsched.store.service.ServiceStore`.
        clock
            The one clock.
        catalog
            The loaded catalog (its time zone is the cron's unless ``cron_timezone`` is set);
            default: loaded from ``settings.catalog``.
        dispatch, metrics, on_plan
            As for :func:`carbonsched.service.runs.planning_pipeline`.
        leader, replica, stop
            As for the constructor (``stop``: the service's stop event; the dispatch step
            should be bound to it too, :func:`carbonsched.service.runs.stoppable`).
        """
        pipeline = planning_pipeline(settings, store, clock, dispatch, metrics, on_plan)
        rule = CronRule.from_settings(settings, catalog)
        return cls(store, pipeline, clock, rule.zone, rule.at, rule.offset_days, leader,
                   replica, settings.cron_check_interval_s, settings.lease_s, metrics,
                   startup_run=settings.cron_startup_run, run_every_hours=rule.every_hours,
                   stop=stop)

    def due(self, now: datetime | None = None) -> tuple[date, date]:
        """``(local_day, planning_date)`` of the newest due run at ``now`` (default: clock)."""
        return self.rule.due(now or self.clock.now())

    def due_issue(self, now: datetime | None = None) -> tuple[date, date, datetime]:
        """The newest due run at ``now`` (default: the clock), the one :meth:`tick` claims.

        ``(local_day, planning_date, issued_at)``: :meth:`CronRule.due_issue`.
        """
        return self.rule.due_issue(now or self.clock.now())

    def next_due(self, now: datetime | None = None) -> tuple[date, date, datetime]:
        """The first run due after ``now`` (default: the clock), the next one :meth:`tick` claims.

        ``(local_day, planning_date, issued_at)``: :meth:`CronRule.next_due`.
        """
        return self.rule.next_due(now or self.clock.now())

    def _due_before_start(self, local_day: date) -> bool:
        """Whether ``local_day``'s run time came before this cron was made (start-up)."""
        due_at = datetime.combine(local_day, self.at, tzinfo=self.zone)
        return due_at < self.started_at

    def is_leader(self) -> bool:
        """Whether this replica runs the cron: it holds the lease, or takes or renews it now."""
        if self.leader is None:
            return True
        if self.leader.held:
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
        """Run the due day's pipeline if it has not run; return its run record or ``None``.

        The run goes through :func:`~carbonsched.service.runs.claim_and_run`; a run that fails
        is recorded there (``failed``, message and traceback) and its record returned here.
        Once the service's stop event is set (shutdown began) no run begins: ``None``, nothing
        claimed; the next process runs the due day.
        """
        if self.stop.is_set():
            log.info("cron: the service is stopping; no run begins (%s tick)", trigger)
            return None
        if not self._busy.acquire(blocking=False):
            return None
        try:
            if self.stop.is_set():   # set while the lock was taken
                return None
            if not self.is_leader():
                return None
            local_day, planning, issued = self.due_issue(self.clock.now())
            pdate = planning.isoformat()
            if self.run_every_hours < 24:
                before = issued < self.started_at
                pdate_key = issued.strftime("%Y-%m-%dT%H:%MZ")
            else:
                before, pdate_key = self._due_before_start(local_day), pdate
            if not self.startup_run and before and trigger != "manual":
                if self._skipped != pdate_key:
                    self._skipped = pdate_key
                    nxt = (f"{self.at.strftime('%H:%M')} {self.zone_name}"
                           if self.run_every_hours == 24 else
                           f"every {self.run_every_hours} h from 00:00 UTC")
                    self.skipped_note = (
                        f"run {pdate_key} was due before this process started and the "
                        "start-up run is off (CARBONSCHED_CRON_STARTUP_RUN=false): not run; "
                        f"the next run is at {nxt} (POST /v1/runs runs it now)")
                    log.info("cron: %s", self.skipped_note)
                return None
            # past the skip: this run, or a later one, runs (the note named an earlier run)
            self.skipped_note = ""
            try:
                out = claim_and_run(self.store, self.clock, self.pipeline, planning_date=pdate,
                                    issued_at=issued, trigger=trigger, replica=self.replica,
                                    lease=self.lease,
                                    local_day=local_day.isoformat(), metrics=self.metrics)
            except Exception:  # recorded and logged by claim_and_run; the cron carries on
                try:
                    return self.store.get_run(issued)
                except CarbonschedError as exc:   # the database is out too: the next tick
                    log.warning("cron: the run record of %s cannot be read (%s); the next "
                                "check retries", pdate, exc)
                    return None
            return None if out is None else self.store.get_run(issued)
        finally:
            self._busy.release()

    def kick(self, trigger: str = "lease") -> bool:
        """Ask for a tick now, in the cron's own scheduler thread, unless one is running.

        The service's lease loop calls this at each renewal of the lead, so that a new leader
        runs (or takes over) the due day's run at once instead of at the next safety-net check.

        Returns
        -------
        bool
            Whether a tick was scheduled.
        """
        if self._scheduler is None or self._busy.locked():
            return False
        self._scheduler.add_job(self.tick, id="kick", kwargs={"trigger": trigger},
                                replace_existing=True, misfire_grace_time=None)
        return True

    # --- APScheduler wiring -------------------------------------------------------------------
    def triggers(self) -> list[Any]:
        """The APScheduler triggers: the run's ``CronTrigger`` and the safety-net interval.

        Daily: at ``at`` in the cron's zone; every N < 24 hours: at each issue time
        (``hour=*/N``, minute 0, UTC).
        """
        from apscheduler.triggers.cron import CronTrigger
        from apscheduler.triggers.interval import IntervalTrigger

        if self.run_every_hours < 24:
            first: Any = CronTrigger(hour=f"*/{self.run_every_hours}", minute=0, second=0,
                                     timezone="UTC")
        else:
            first = CronTrigger(hour=self.at.hour, minute=self.at.minute, second=self.at.second,
                                timezone=self.zone)
        return [first,
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

    def shutdown(self, release: bool = True, wait: bool = False) -> None:
        """Stop the scheduler and (``release``) give up the lead.

        ``wait``: return only once a run in progress has ended (the caller bounds the wait).
        """
        sched, self._scheduler = self._scheduler, None
        if sched is not None:
            sched.shutdown(wait=wait)
        if release and self.leader is not None:
            self.leader.release()
