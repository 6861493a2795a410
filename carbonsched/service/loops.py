"""The service's own loops: the leader's lease, start-up reconcile, release, status refresh.

:class:`ServiceLoops` runs inside ``carbonsched serve`` (one APScheduler
``BackgroundScheduler``, its jobs in parallel threads):

``lease`` (every ``lease_s / 3``, every replica)
    takes or renews the leader's lease (:class:`~carbonsched.store.service.LeaderLease`); on the
    leader it asks the cron for a tick (:meth:`~carbonsched.service.cron.DailyCron.kick`), so a
    new leader runs or takes over the due day's run at once; on every replica it reads the
    outbox's backlog into ``/metrics`` (``carbonsched_outbox_backlog``,
    ``carbonsched_outbox_oldest_pending_age_seconds``).

The dispatch loops, on the leader only, when ``dispatch_loops`` is on (by default when a
``dispatcher`` is configured):

``reconcile`` (on taking the lead, so at start-up, then every ``reconcile_interval_s``)
    finishes every outbox intent still pending (:func:`carbonsched.dispatch.outbox.reconcile`:
    a key its backend already has is recorded, the rest submitted); each success sets
    ``carbonsched_reconcile_last_success_timestamp_seconds``.
``release`` (every ``release_interval_s``, 60 s by default)
    releases held work whose planned start has come
    (:func:`carbonsched.dispatch.outbox.release_due`: suspended Kubernetes Jobs; Slurm holds
    by ``--begin`` itself).
``refresh`` (every ``status_refresh_s``)
    records what each backend reports (:func:`carbonsched.dispatch.outbox.refresh_backends`;
    the outbox is not read back).
``grid`` (every ``grid_event_interval_s``, and at once when an event is posted: :meth:`kick`)
    re-plans started grid events and takes their actions, resumes at their end
    (:func:`carbonsched.service.grid_events.apply_events`).

``prune`` (every hour, every replica; acts on the leader once a day), when
``CARBONSCHED_RETENTION_DAYS`` > 0: deletes what is older than that and finished
(:func:`carbonsched.store.retention.prune`, as ``carbonsched store prune`` does). The first
check of a process comes :data:`PRUNE_FIRST_DELAY_S` after its start, then one prune a day
(:data:`PRUNE_EVERY_S`); a failed prune is tried again at the next hourly check.

Each pass is counted in ``carbonsched_dispatch_loop_runs_total{loop, outcome}``. A database
that is down is an outcome (``store_unavailable``, one log line), never a dead loop; the next
pass tries again. Adapters are built per site: a site whose backend cannot be configured is
named in the log, counted in ``carbonsched_dispatch_loop_sites_unavailable`` and tried again at
the next pass, while the other sites' work goes on.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.exc import DBAPIError

from carbonsched.catalog import Catalog
from carbonsched.clock import Clock
from carbonsched.config import Settings
from carbonsched.errors import CarbonschedError, StoreUnavailableError
from carbonsched.store.service import ServiceStore, is_outage, unavailable

log = logging.getLogger("carbonsched.service.loops")

LOOPS = ("reconcile", "release", "refresh", "grid")
"""The dispatch loops, in the order a new leader runs them."""

PRUNE_CHECK_S = 3600.0
"""How often a replica checks whether the daily prune is due. [s]"""
PRUNE_EVERY_S = 86400.0
"""Time between two prunes of one leader. [s]"""
PRUNE_FIRST_DELAY_S = 600.0
"""Delay of a process's first prune check after start (the lead is settled by then). [s]"""


def dispatch_loops_enabled(settings: Settings) -> bool:
    """Whether the service runs the dispatch loops: ``dispatch_loops``, else a dispatcher is set."""
    if settings.dispatch_loops is not None:
        return settings.dispatch_loops
    return bool(settings.dispatcher)


class ServiceLoops:
    """The leader's lease and the dispatch loops of one service replica (module docstring).

    Parameters
    ----------
    settings
        ``lease_s``, ``dispatch_loops``, ``release_interval_s``, ``status_refresh_s``,
        ``reconcile_interval_s`` and the backends' settings.
    service_store
        The service's store (the outbox is in its :class:`~carbonsched.store.Store`).
    catalog
        The catalog whose sites' backends the loops drive.
    clock
        The service's clock (planned starts are compared with it).
    metrics
        :class:`~carbonsched.service.metrics.ServiceMetrics`.
    leader
        :class:`~carbonsched.store.service.LeaderLease` shared with the cron.
    cron
        :class:`~carbonsched.service.cron.DailyCron` to kick on the leader, or ``None``.
    build_adapter
        ``build_adapter(site) -> adapter``; default: the adapter registry with the settings.
    stop
        Set when the service is asked to stop: a reconcile pass begins no submission after it
        (:func:`carbonsched.dispatch.outbox.reconcile`), its units left pending and unclaimed.
    """

    def __init__(self, settings: Settings, service_store: ServiceStore, catalog: Catalog,
                 clock: Clock, metrics: Any, leader: Any, cron: Any = None,
                 build_adapter: Callable[[Any], Any] | None = None,
                 stop: threading.Event | None = None) -> None:
        self.settings = settings
        self.db = service_store
        self.catalog = catalog
        self.clock = clock
        self.metrics = metrics
        self.leader = leader
        self.cron = cron
        self.dispatch_on = dispatch_loops_enabled(settings)
        self._build = build_adapter or self._registry_adapter
        self.adapters: dict[str, Any] = {}
        self.sites_unavailable: dict[str, str] = {}
        """Site id -> why its adapter could not be built (retried every pass)."""
        self.last_outcome: dict[str, str] = {}
        """Loop -> outcome of its last pass (``ok``, ``store_unavailable``, ``failed: ...``)."""
        self.last_reconcile: datetime | None = None
        self._outbox = threading.Lock()  # one outbox pass at a time on this replica
        self.last_prune: float | None = None
        """``time.monotonic()`` of this process's last successful prune."""
        self._scheduler: Any = None
        self.stop_event = stop or threading.Event()

    # --- the scheduler ----------------------------------------------------------------------
    def start(self) -> None:
        """Start the jobs; the first lease pass runs at once."""
        from apscheduler.schedulers.background import BackgroundScheduler

        sched = BackgroundScheduler(timezone="UTC")
        every = dict(coalesce=True, max_instances=1, misfire_grace_time=None)
        sched.add_job(self.lease_pass, "interval", seconds=self.settings.lease_s / 3,
                      id="lease", next_run_time=datetime.now().astimezone(), **every)
        if self.dispatch_on:
            for loop, period in (("reconcile", self.settings.reconcile_interval_s),
                                 ("release", self.settings.release_interval_s),
                                 ("refresh", self.settings.status_refresh_s),
                                 ("grid", self.settings.grid_event_interval_s)):
                sched.add_job(self.run_loop, "interval", seconds=period, id=loop, args=[loop],
                              **every)
        if self.settings.retention_days > 0:
            sched.add_job(self.prune_pass, "interval", seconds=PRUNE_CHECK_S, id="prune",
                          next_run_time=datetime.now().astimezone() + timedelta(
                              seconds=PRUNE_FIRST_DELAY_S), **every)
        sched.start()
        self._scheduler = sched
        log.info("service loops: lease every %.1f s; dispatch loops %s", self.settings.lease_s / 3,
                 f"on (release every {self.settings.release_interval_s:g} s, refresh every "
                 f"{self.settings.status_refresh_s:g} s, reconcile every "
                 f"{self.settings.reconcile_interval_s:g} s and on taking the lead)"
                 if self.dispatch_on else "off (no dispatcher; CARBONSCHED_DISPATCH_LOOPS)")

    def stop(self, wait: bool = False) -> None:
        """Stop the jobs (the lease is released by the caller).

        Parameters
        ----------
        wait
            Return only once the passes running now have ended (the caller bounds the wait:
            :meth:`carbonsched.api.state.ServiceState.stop`).
        """
        self.stop_event.set()
        sched, self._scheduler = self._scheduler, None
        if sched is not None:
            sched.shutdown(wait=wait)

    # --- the lease ----------------------------------------------------------------------------
    def lease_pass(self) -> bool:
        """Take or renew the lead, read the backlog, and on the leader start what is due.

        Returns
        -------
        bool
            Whether this replica leads.
        """
        was = self.leader.held
        try:
            got = bool(self.leader.try_acquire())
            self._count("lease", "ok")
        except CarbonschedError as exc:
            got = False
            self._count("lease", "store_unavailable")
            log.warning("lease: %s", exc)
        self.metrics.cron_leader.set(1 if got else 0)
        if was and not got:
            log.warning("lease: this replica lost the lead")
        self.observe()
        if got:
            if not was and self.dispatch_on and self._scheduler is not None:
                # a new leader (the start-up of a single replica too) reconciles first
                self._scheduler.add_job(self.run_loop, id="reconcile-now", args=["reconcile"],
                                        replace_existing=True, misfire_grace_time=None)
            if self.cron is not None:
                self.cron.kick("lease" if was else "startup")
        return got

    def observe(self) -> None:
        """Read the outbox's backlog into the gauges (any replica; a dead store leaves them)."""
        from carbonsched.dispatch.backlog import outbox_backlog

        try:
            b = outbox_backlog(self.db.store)
        except DBAPIError as exc:
            if not is_outage(exc):
                raise
            log.warning("outbox backlog: %s", unavailable(self.db.engine, "reading the outbox",
                                                           exc))
            return
        self.metrics.outbox_backlog.set(b.pending)
        self.metrics.outbox_oldest_pending_age.set(b.oldest_age_s(self.clock.now()))
        self.metrics.outbox_observed.set(time.time())

    # --- the dispatch loops -----------------------------------------------------------------
    def run_loop(self, loop: str) -> str:
        """One pass of ``loop`` (one of :data:`LOOPS`) if this replica leads.

        Returns
        -------
        str
            The outcome: ``ok``, ``standby`` (not the leader: nothing done),
            ``store_unavailable`` or ``failed: <error>``.
        """
        if loop not in LOOPS:
            raise ValueError(f"unknown loop {loop!r}; one of {', '.join(LOOPS)}")
        if not self.leader.held:
            return "standby"
        with self._outbox:
            try:
                getattr(self, f"_{loop}")(self._adapters())
                outcome = "ok"
            except DBAPIError as exc:
                if not is_outage(exc):
                    outcome = f"failed: {type(exc).__name__}: {exc}"
                    log.exception("%s loop failed", loop)
                else:
                    outcome = "store_unavailable"
                    log.warning("%s loop: %s; next pass in its interval", loop,
                                unavailable(self.db.engine, f"the {loop} loop", exc))
            except StoreUnavailableError as exc:
                outcome = "store_unavailable"
                log.warning("%s loop: %s", loop, exc)
            except CarbonschedError as exc:
                outcome = f"failed: {exc}"
                log.warning("%s loop: %s", loop, exc)
            except Exception as exc:  # a bug: logged with its traceback, the loop goes on
                outcome = f"failed: {type(exc).__name__}: {exc}"
                log.exception("%s loop failed", loop)
        self.last_outcome[loop] = outcome
        self._count(loop, outcome.split(":")[0])
        self.observe()
        return outcome

    def _reconcile(self, adapters: dict[str, Any]) -> None:
        from carbonsched.dispatch.outbox import reconcile

        summary = reconcile(self.db.store, self.catalog, clock=self.clock.now,
                            adapters=adapters, settings=self.settings, max_attempts=1,
                            stop=self.stop_event)
        self.last_reconcile = self.clock.now()
        self.metrics.reconcile_last_success.set(time.time())
        if summary.outcomes:
            log.info("reconcile: %s", summary.counts)

    def _release(self, adapters: dict[str, Any]) -> None:
        from carbonsched.dispatch.outbox import release_due

        keys = release_due(self.db.store, self.catalog, clock=self.clock.now, adapters=adapters)
        if keys:
            self.metrics.released.inc(len(keys))
            log.info("release: %d held job(s) released at their planned start: %s", len(keys),
                     ", ".join(keys[:20]) + (" ..." if len(keys) > 20 else ""))

    def kick(self, loop: str) -> None:
        """Run ``loop`` once now, in the scheduler's threads (the leader only acts)."""
        if loop not in LOOPS:
            raise ValueError(f"unknown loop {loop!r}; one of {', '.join(LOOPS)}")
        if self._scheduler is not None and self.dispatch_on:
            self._scheduler.add_job(self.run_loop, id=f"{loop}-now", args=[loop],
                                    replace_existing=True, misfire_grace_time=None)

    def _grid(self, adapters: dict[str, Any]) -> None:
        from carbonsched.service.grid_events import apply_events

        summary = apply_events(self.db.store, self.catalog, adapters, self.settings,
                               self.clock.now)
        counted = summary.taken + [(a.event_id, a.key, a.action, a.outcome)
                                   for a in summary.skipped]
        for _event_id, key, action, outcome in counted:
            self.metrics.grid_actions.labels(
                action=action, backend=summary.backends.get(key, "none"), outcome=outcome).inc()
        if counted or summary.planned or summary.ended:
            log.info("grid events: %s", summary.to_dict())
        for event_id, key, action, why in summary.retry + summary.failed:
            log.warning("grid event %s: %s of %s not taken yet: %s", event_id, action, key, why)
        for a in summary.load_not_shed:
            log.warning("grid event %s: %s of %s skipped (%s: %s): its %.1f kW is not shed",
                        a.event_id, a.action, a.key, a.outcome, a.why, a.power_kw)

    def _refresh(self, adapters: dict[str, Any]) -> None:
        from carbonsched.dispatch.outbox import refresh_backends

        # records only: the outbox is not read back (its history would be, every pass)
        refresh_backends(self.db.store, self.catalog, clock=self.clock.now, adapters=adapters)

    # --- retention ----------------------------------------------------------------------------
    def prune_pass(self) -> str:
        """Prune the store once a day on the leader (``CARBONSCHED_RETENTION_DAYS`` > 0).

        Returns
        -------
        str
            ``off`` (retention is 0), ``standby`` (not the leader), ``not_due`` (pruned less
            than :data:`PRUNE_EVERY_S` ago), ``ok``, ``store_unavailable`` or
            ``failed: <error>``.
        """
        days = self.settings.retention_days
        if days <= 0:
            return "off"
        if not self.leader.held:
            return "standby"
        if self.last_prune is not None and time.monotonic() - self.last_prune < PRUNE_EVERY_S:
            return "not_due"
        from carbonsched.store.retention import prune

        try:
            result = prune(self.db.store, days, now=self.clock.now())
            outcome = "ok"
            self.last_prune = time.monotonic()
            log.info("prune: %d row(s) older than %d days deleted (%s)", result.total, days,
                     ", ".join(f"{t} {n}" for t, n in result.deleted.items() if n)
                     or "nothing to delete")
        except DBAPIError as exc:
            if not is_outage(exc):
                outcome = f"failed: {type(exc).__name__}: {exc}"
                log.exception("prune failed")
            else:
                outcome = "store_unavailable"
                log.warning("prune: %s; tried again within the hour",
                            unavailable(self.db.engine, "pruning the store", exc))
        except CarbonschedError as exc:
            outcome = ("store_unavailable" if isinstance(exc, StoreUnavailableError)
                       else f"failed: {exc}")
            log.warning("prune: %s", exc)
        except Exception as exc:  # a bug: logged with its traceback, the service goes on
            outcome = f"failed: {type(exc).__name__}: {exc}"
            log.exception("prune failed")
        self.last_outcome["prune"] = outcome
        self._count("prune", outcome.split(":")[0])
        return outcome

    # --- adapters -----------------------------------------------------------------------------
    def _registry_adapter(self, site: Any) -> Any:
        from carbonsched.adapters.dispatch.registry import default_registry
        from carbonsched.dispatch.outbox import backend_config

        return default_registry().build_for_sites([site], backend_config(self.settings))[site.id]

    def _adapters(self) -> dict[str, Any]:
        """The adapters of every site that can be built (the others named and retried)."""
        for site in self.catalog.sites:
            if site.id in self.adapters:
                continue
            try:
                self.adapters[site.id] = self._build(site)
            except CarbonschedError as exc:
                if self.sites_unavailable.get(site.id) != str(exc):
                    log.warning("dispatch loops: site %s left out until its backend can be "
                                "configured: %s", site.id, exc)
                self.sites_unavailable[site.id] = str(exc)
            else:
                self.sites_unavailable.pop(site.id, None)
        self.metrics.loop_sites_unavailable.set(len(self.sites_unavailable))
        return dict(self.adapters)

    def _count(self, loop: str, outcome: str) -> None:
        self.metrics.loop_runs.labels(loop=loop, outcome=outcome).inc()

    def status(self) -> dict[str, Any]:
        """What ``/readyz`` shows of the loops: on or off, last outcomes, sites left out."""
        if not self.dispatch_on:
            return {"dispatch_loops": "off"}
        return {"dispatch_loops": "on", "last": dict(self.last_outcome),
                "last_reconcile": (self.last_reconcile.isoformat()
                                   if self.last_reconcile else None),
                "sites_unavailable": dict(self.sites_unavailable)}

