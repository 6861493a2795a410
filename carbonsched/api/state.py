"""What one running service holds: settings, the clock, the store, the book, the cron, metrics."""

from __future__ import annotations

import gc
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from carbonsched.catalog import Catalog, load_catalog
from carbonsched.clock import Clock, SystemClock
from carbonsched.config import Settings
from carbonsched.service.carbon_aware import CarbonAwareService
from carbonsched.service.metrics import ServiceMetrics
from carbonsched.service.placement import PlacementBook
from carbonsched.service.tokens import TokenCache
from carbonsched.store import Store
from carbonsched.store.service import ServiceStore, hash_token, role_allows

log = logging.getLogger("carbonsched.api")


def freeze_heap() -> None:
    """Move every object alive now out of the garbage collector's reach (:func:`gc.freeze`).

    The service's long-lived heap (the plan document, its book, the libraries: ~175,000
    tracked objects with a 10,000-job plan) otherwise makes each full (generation 2) collection
    a 100-200 ms pause of every request, several times a minute under load (BENCHMARKS.md
    section 6). Frozen objects are still freed by reference counting; a new book unfreezes
    first, so a full collection can reclaim cycles of the book it replaces, then freezes again.
    See https://docs.python.org/3/library/gc.html#gc.freeze.
    """
    gc.unfreeze()
    gc.collect()
    gc.freeze()


class ServiceState:
    """The service's parts, built once at start-up (see :func:`carbonsched.api.app.create_app`).

    Parameters
    ----------
    settings
        The service settings.
    clock
        The one clock.
    dispatch
        The pipeline's dispatch step, or ``None`` (run records say "not configured").
    stop
        The event that asks the background work to stop (``carbonsched serve`` sets it as soon
        as it is signalled); default a new one, set by :meth:`stop`.
    """

    def __init__(self, settings: Settings, clock: Clock,
                 dispatch: Callable[..., Any] | None = None,
                 stop: threading.Event | None = None) -> None:
        self.settings = settings
        self.clock = clock
        self.dispatch = dispatch
        self.catalog: Catalog = load_catalog(settings.catalog)
        self.store = Store(settings.resolved_database_url())
        self.db = ServiceStore(self.store)
        self.metrics = ServiceMetrics()
        self.sdk = CarbonAwareService(self.catalog, settings.data_dir, settings.sdk_forecast_hours)
        self.replica = settings.replica_name or f"{socket.gethostname()}:{os.getpid()}"
        self.book: PlacementBook | None = None
        self.book_error: str = ""
        self._book_lock = threading.Lock()
        self.tokens = TokenCache(settings.token_cache_s, settings.token_cache_max_entries)
        self.wall: Clock = SystemClock()
        """The clock of token expiry: the wall clock, whatever ``--as-of`` pins."""
        self._boot_hash = (hash_token(settings.bootstrap_admin_token.get_secret_value())
                           if settings.bootstrap_admin_token else None)
        self.cron: Any = None
        self.loops: Any = None
        self.leader: Any = None
        self._stop = stop or threading.Event()
        self._refresher: threading.Thread | None = None
        self.stuck: list[str] = []
        """What was still running when :meth:`stop` gave up waiting (``[]``: nothing)."""

    @property
    def refuses_nothing_to_run(self) -> bool:
        """Whether this service's dispatch would refuse a job that names nothing to run.

        True when its runs dispatch their plans (a dispatch step, ``CARBONSCHED_DISPATCHER``)
        without the placeholder (``CARBONSCHED_DISPATCH_PLACEHOLDER`` off): such a job would
        be planned, refused by dispatch (``no_payload``) and never run, so the API refuses it
        at submission.
        """
        dispatches = self.dispatch is not None or bool(self.settings.dispatcher)
        return dispatches and not self.settings.dispatch_placeholder

    # --- tokens -----------------------------------------------------------------------------
    def cached_role(self, token: str) -> tuple[bool, str | None]:
        """A token's role if it is known without the store.

        ``(True, role)`` from the cache or the bootstrap token, ``(True, None)`` for a token
        refused within the cache's TTL, else ``(False, None)``; never blocks, so it is safe on
        the event loop.
        """
        h = hash_token(token)
        if self._boot_hash is not None and h == self._boot_hash:
            return True, "admin"
        return self.tokens.get(h)

    def role_of(self, token: str) -> str | None:
        """The role of a bearer token, or ``None`` (the store, then cached: :class:`TokenCache`).

        Raises
        ------
        sqlalchemy.exc.OperationalError
            The store is unreachable (the API answers 503).
        """
        hit, role = self.cached_role(token)
        if hit:
            return role
        now = self.wall.now()
        rec = self.db.token_record(token, now)
        h = hash_token(token)
        if rec is None:
            self.tokens.put_invalid(h)
            return None
        left = None if rec["expires_at"] is None else \
            (rec["expires_at"] - now).total_seconds()
        self.tokens.put_valid(h, rec["role"], rec["token_id"], left)
        return rec["role"]

    @staticmethod
    def allows(have: str, need: str) -> bool:
        """Whether role ``have`` includes ``need``."""
        return role_allows(have, need)

    # --- the book ---------------------------------------------------------------------------
    def refresh_book(self, force: bool = False) -> PlacementBook | None:
        """Load the newest plan (if it changed) and re-apply reservations."""
        with self._book_lock:
            try:
                pid = self.db.latest_plan_id(self.catalog.name)
                if pid is None:
                    self.book = None
                    self.book_error = (f"no plan yet for catalog {self.catalog.name!r}; the "
                                       "daily run makes one (GET /v1/runs)")
                    return None
                book = self.book
                fresh = book is None or book.plan_id != pid or force
                if fresh:
                    book = PlacementBook(self.catalog, self.store.get_plan(pid),
                                         self.store.forecasts(pid))
                book.set_reservations(self.db.jobs(plan_id=pid, reserved=True))
                # the error goes before the book is served: an answer from the new book must
                # not carry the old error (the heap freeze below takes a while)
                self.book_error = ""
                self.metrics.plan_refresh_failing.set(0)
                self.book = book
                if fresh:
                    freeze_heap()
                return book
            except Exception as exc:  # keep answering from the last good book, and say so
                self.book_error = (f"the newest plan could not be loaded ({exc}); retried every "
                                   f"{self.settings.book_refresh_s:g} s")
                self.metrics.plan_refresh_failing.set(1)
                log.warning("book refresh failed: %s", exc)
                return self.book

    def stale_book_note(self, book: PlacementBook) -> str:
        """What an answer from ``book`` must say when a newer plan could not be loaded."""
        if not self.book_error or self.book is not book:
            return ""
        return f"answered from plan {book.plan_id}, the last loaded: {self.book_error}"

    def _refresh_loop(self) -> None:
        while not self._stop.wait(self.settings.book_refresh_s):
            self.refresh_book()

    def start(self) -> None:
        """Load the book, start the refresher, (if enabled) the cron, and the service loops.

        The loops (:class:`~carbonsched.service.loops.ServiceLoops`) hold the leader's lease
        the cron and the dispatch loops run under.
        """
        from carbonsched.service.loops import ServiceLoops
        from carbonsched.store.service import LeaderLease

        self.refresh_book()
        self._refresher = threading.Thread(target=self._refresh_loop, name="book-refresh",
                                           daemon=True)
        self._refresher.start()
        self.leader = LeaderLease(self.store.engine, self.replica, self.settings.lease_s)
        if self.settings.cron_enabled:
            from carbonsched.service.cron import DailyCron
            from carbonsched.service.runs import stoppable

            self.cron = DailyCron.from_settings(
                self.settings, self.db, self.clock, catalog=self.catalog,
                dispatch=stoppable(self.dispatch, self._stop), metrics=self.metrics,
                on_plan=lambda _pid: self.refresh_book(), leader=self.leader,
                replica=self.replica, stop=self._stop)
            log.info("cron: daily run at %s %s; start-up run %s (CARBONSCHED_CRON_STARTUP_RUN)",
                     self.cron.at.strftime("%H:%M"), self.cron.zone_name,
                     "on: a day due while the service was down runs now"
                     if self.settings.cron_startup_run else "off")
            self.cron.start()
        self.loops = ServiceLoops(self.settings, self.db, self.catalog, self.clock,
                                  self.metrics, self.leader, cron=self.cron, stop=self._stop)
        self.loops.start()

    def stop(self) -> list[str]:
        """Stop the loops, the cron and the refresher; give up the lead.

        The stop event is set first: a dispatch pass in progress begins no submission after it
        and leaves its other units pending and unclaimed (those in flight finish and are
        recorded). The passes and the cron's run in progress are waited for, up to
        ``settings.shutdown_timeout_s``; what still runs then is named in :attr:`stuck` and the
        log, and left behind (the caller exits the process: a run record it held is taken over
        once its lease runs out).

        Returns
        -------
        list of str
            :attr:`stuck`: ``"service loops"``, ``"cron"`` (``[]`` when everything ended).
        """
        self._stop.set()
        parts = [(name, fn) for name, fn in (
            ("service loops", None if self.loops is None else
             lambda: self.loops.stop(wait=True)),
            ("cron", None if self.cron is None else
             lambda: self.cron.shutdown(release=False, wait=True))) if fn is not None]
        waits = [threading.Thread(target=fn, name=f"stopping {name}", daemon=True)
                 for name, fn in parts]
        for t in waits:
            t.start()
        deadline = time.monotonic() + self.settings.shutdown_timeout_s
        for t in waits:
            t.join(max(0.0, deadline - time.monotonic()))
        self.stuck = [name for (name, _), t in zip(parts, waits, strict=True) if t.is_alive()]
        if self.stuck:
            log.error("shutdown: %s still running after %g s (CARBONSCHED_SHUTDOWN_TIMEOUT_S): "
                      "left behind; a run it holds is taken over once its lease runs out "
                      "(%g s)", " and ".join(self.stuck), self.settings.shutdown_timeout_s,
                      self.settings.lease_s)
        if self.leader is not None:
            self.leader.release()
        self.store.engine.dispose()
        return self.stuck
