"""The service's runs on the live providers: one provider client set per process, a run at a time.

With ``CARBONSCHED_PROVIDERS_FILE`` (:attr:`carbonsched.config.Settings.providers_file`) every
run of the service — daily and rolling, started by the cron, by ``POST /v1/runs`` or by
``carbonsched plan --dispatch`` — plans on the providers the file names, as ``carbonsched plan
--providers`` does: the signal history through the store's cache
(:meth:`carbonsched.adapters.signals.live.LiveSignals.load_site_signals`) and the forecasts the
providers publish (:meth:`~carbonsched.adapters.signals.live.LiveSignals.exogenous`), which
are kept in the store (:mod:`carbonsched.store.published_forecasts`).

One :class:`~carbonsched.adapters.signals.live.LiveSignals` serves the process (its HTTP
clients, login sessions, rate limits and ``Retry-After`` cooldowns are the provider's, not the
run's): :func:`service_providers` builds it once per providers file and database. Each run takes
it under a lock (one run plans on it at a time) and starts a new run budget
(:meth:`~carbonsched.adapters.signals.live.LiveSignals.begin_run`); its "now" is the service's
clock unless ``CARBONSCHED_PROVIDERS_NOW`` pins it. A provider that is down is the live path's
named fallback (a ``DEGRADED`` note and the stale signals; an ``exogenous forecasts: ...
UNAVAILABLE`` note), never a failed run; a providers file that cannot be read or credentials
that are missing are configuration errors, raised.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from carbonsched.clock import Clock


@dataclass
class RunLoaders:
    """What one run hands :func:`carbonsched.pipeline.daily.run_daily_plan`."""

    signal_loader: Callable[..., Any] | None = None
    """``loader(site, data_dir, start, end)``: the providers' history (``None``: the files)."""
    exogenous_loader: Callable[..., Any] | None = None
    """``exogenous(site, issued_at, horizon_hours, history_start)``: what the providers
    publish (``None``: history only)."""
    prefetch: Callable[[Any, pd.Timestamp, pd.Timestamp, int], str | None] | None = None
    """``prefetch(catalog, issued_at, next_issued_at, horizon_hours) -> note``: fetch and keep
    now the forecasts the next run will read (:meth:`ServiceProviders.prefetch`); ``None``:
    none."""


NO_PROVIDERS = RunLoaders()
"""A run without a providers file: the files, history only."""


@dataclass
class ServiceProviders:
    """The process's live provider signals and the lock a run holds while it plans on them."""

    live: Any
    """:class:`~carbonsched.adapters.signals.live.LiveSignals`."""
    pinned_now: pd.Timestamp | None = None
    """``CARBONSCHED_PROVIDERS_NOW``, or ``None`` (the run's clock)."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    @contextmanager
    def run(self, clock: Clock) -> Iterator[RunLoaders]:
        """Plan one run on the providers: hold the lock, set "now", start a run budget.

        Parameters
        ----------
        clock
            The service's clock ("now" of the provider clients unless pinned).
        """
        with self.lock:
            pinned = self.pinned_now
            self.live.clock = ((lambda: pinned) if pinned is not None
                               else (lambda: pd.Timestamp(clock.now()).tz_convert("UTC")))
            self.live.begin_run()
            yield RunLoaders(self.live.load_site_signals, self.live.exogenous, self.prefetch)

    def prefetch(self, catalog: Any, issued_at: pd.Timestamp, next_issued_at: pd.Timestamp,
                 horizon_hours: int) -> str | None:
        """Fetch and keep now what the providers publish for the run issued at ``next_issued_at``.

        A run of the service starts at or after its issue time (a rolling run every few hours
        is due *at* it), when a forecast fetched then was published too late for it: the run
        reads the forecasts kept in the store published by its issue time
        (:meth:`~carbonsched.adapters.signals.live.LiveSignals.exogenous`). So that there are
        some, each run that was not ahead of its own issue time fetches, once it has planned,
        the forecasts of the next run's horizon and keeps them (published now, before that
        issue time): the next run then plans on forecasts at most one cadence old. Called
        within :meth:`run` (the lock held).

        Parameters
        ----------
        catalog
            The catalog planned (its sites).
        issued_at
            This run's issue time (tz-aware): nothing is fetched when the providers' "now" is
            not after it (this run fetched its own forecasts; so will the next).
        next_issued_at
            The next run's issue time (tz-aware).
        horizon_hours
            The next run's horizon. [h]

        Returns
        -------
        str or None
            The note for this run's plan (rows kept, and any provider that failed, named);
            ``None`` when nothing was fetched: the providers' "now" is not after
            ``issued_at`` (this run fetched its own), or not before ``next_issued_at``.
        """
        t = pd.Timestamp(next_issued_at).tz_convert("UTC")
        now = pd.Timestamp(self.live.clock()).tz_convert("UTC")
        if now <= pd.Timestamp(issued_at).tz_convert("UTC") or t <= now:
            return None
        rows = 0
        failed: list[str] = []
        for site in catalog.sites:
            # the archive (ENTSO-E) only over the horizon: its past is kept already
            table, info = self.live.exogenous(site, t, horizon_hours, t)
            rows += len(table)
            failed += [f"{site.id} {u['provider']} {u['what']} ({u['reason']})"
                       for u in info["unavailable"]]
        note = (f"published forecasts for the next run (issued at {t.isoformat()}) fetched "
                f"at {now.isoformat()} and kept: {rows} value(s)")
        if failed:
            note += (f"; {len(failed)} UNAVAILABLE, so the next run may plan those models on "
                     "history: " + "; ".join(failed))
        return note


_PROCESS: dict[tuple[str, str, str, str], ServiceProviders] = {}
_PROCESS_LOCK = threading.Lock()


def service_providers(settings: Any, store: Any) -> ServiceProviders | None:
    """The process's :class:`ServiceProviders` of ``settings.providers_file``, or ``None``.

    Built on first use and kept for the process, one per (providers file, base URL, pinned
    "now", database): every run of the process shares its clients, sessions and cooldowns.

    Parameters
    ----------
    settings
        :class:`~carbonsched.config.Settings` (``providers_file``, ``providers_base_url``,
        ``providers_now``).
    store
        The :class:`~carbonsched.store.Store` of the service: the signal cache and the kept
        published forecasts are in its database.

    Returns
    -------
    ServiceProviders or None
        ``None`` when no providers file is set (the runs read the files).

    Raises
    ------
    CatalogError
        The providers file is missing or malformed (named, with the fix).
    """
    if settings.providers_file is None:
        return None
    from carbonsched.adapters.signals.live import LiveSignals
    from carbonsched.adapters.signals.providers import load_providers
    from carbonsched.store.signal_cache import SignalCache

    path = Path(settings.providers_file).expanduser().resolve()
    now = settings.providers_now
    key = (str(path), settings.providers_base_url, "" if now is None else now.isoformat(),
           str(getattr(store, "url", id(store))))
    with _PROCESS_LOCK:
        held = _PROCESS.get(key)
        if held is None:
            cfg = load_providers(path)
            if settings.providers_base_url:
                cfg = cfg.with_base_url(settings.providers_base_url)
            pinned = None if now is None else pd.Timestamp(now).tz_convert("UTC")
            held = _PROCESS[key] = ServiceProviders(LiveSignals(cfg, SignalCache(store)),
                                                    pinned)
        return held


@contextmanager
def run_loaders(providers: ServiceProviders | None, clock: Clock) -> Iterator[RunLoaders]:
    """The loaders of one run: the providers' (:meth:`ServiceProviders.run`), or the files'."""
    if providers is None:
        yield NO_PROVIDERS
        return
    with providers.run(clock) as loaders:
        yield loaders
