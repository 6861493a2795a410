"""Live site signals: provider clients behind the store's cache, with graceful degradation.

:class:`LiveSignals` is the provider-backed history source the daily pipeline can use instead of
files. Its :meth:`LiveSignals.load_site_signals` has exactly the signature and the return
contract of :func:`carbonsched.adapters.signals.registry.load_site_signals` (``docs/signals.md``):
it registers itself as the site's signal source in a one-entry registry and lets the registry
normalise the frame, so the seam in the pipeline is a single ``loader=`` argument.

For each signal group the site's providers file binds (:mod:`.providers`), a load

1. asks the cache (:class:`carbonsched.store.signal_cache.SignalCache`) which hours of the window
   before "now" (the injected clock) are not covered, and fetches only those gaps;
2. stores what came back up to the provider's newest valued hour (later hours stay gaps and are
   asked again next time: a *late* provider is retried, a *down* one is not waited for);
3. logs the fetch with the age of the newest value; ``meta["signal_age_hours"]`` is the age of the
   site's newest carbon-intensity hour at "now" (end of that hour to now) — what the plan reports
   as the site's signal age;
4. on a provider error (down, timing out, 5xx, 429 after retries, a deadline spent, a cooldown
   longer than the time left) records the group as **degraded** and **stale** —
   ``meta["degraded"]`` lists provider, group, reason, the missing hours and the newest cached
   hour with its age — and carries on with what the cache holds (the last good data). Missing
   hours stay NaN: the forecaster conditions on the last good data or falls back, the plan names
   the site and hours; nothing is read as zero. A configuration error (credentials, region
   outside the subscription) is not degradation: it is raised.

Time is bounded (:mod:`carbonsched.adapters.http`): each call has a total deadline (the provider's
``deadline_s``), and every call to one provider in one **run** spends one budget
(``run_deadline_s``; a run is every load of one window — the daily pipeline asks every site for
the same window — or what :meth:`LiveSignals.begin_run` starts). A ``Retry-After`` puts the whole
provider on hold (:class:`~carbonsched.adapters.http.ProviderGate`, one per provider, shared by
its zones and signal groups): its other zones are not asked before it has passed, or, when it
outlasts the time left, not at all in this run.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pandas as pd

from carbonsched.adapters.http import (
    Fetcher,
    ProviderGate,
    RateLimiter,
    RetryPolicy,
    make_client,
)
from carbonsched.adapters.signals.providers import (
    GROUPS,
    Binding,
    ProvidersConfig,
    ProviderSpec,
    ci_kind,
    credentials,
)
from carbonsched.adapters.signals.registry import SignalSource, load_site_signals
from carbonsched.domain import SignalQuality, Site
from carbonsched.errors import (
    ProviderConfigError,
    ProviderError,
    TimeAxisError,
    require_extra,
)

HOUR = pd.Timedelta(hours=1)
FETCH_LOG_MAX = 1000
"""Fetches :attr:`LiveSignals.fetch_log` keeps (the newest). [-]"""
SOURCE_NAME = "providers"


CI_FEATURE = "carbon_intensity_g_per_kwh"
"""Feature of a provider's own carbon-intensity forecast (of the kind the plan uses)."""
WEATHER_FEATURES: dict[str, str] = {
    "temperature_c": "temperature_c", "relative_humidity_pct": "relative_humidity_pct",
    "wind_speed_m_per_s": "wind_speed_m_per_s", "cloud_cover_pct": "cloud_cover_pct",
    "irradiance_w_per_m2": "irradiance_w_per_m2"}
"""Open-Meteo forecast column -> exogenous feature (every weather column the client reads)."""
EXOGENOUS_FEATURES = (*WEATHER_FEATURES.values(), "wind_mw", "solar_mw", CI_FEATURE)
"""Features :meth:`LiveSignals.exogenous` may return (names of
:data:`carbonsched.forecasts.exogenous.FEATURES`)."""
ENTSOE_PUBLICATION = ("Europe/Brussels", 18)
"""ENTSO-E day-ahead wind and solar forecasts are published by 18:00 Brussels time of the day
before delivery: Regulation (EU) No 543/2013, art. 14.1(d). [zone, h]"""


def entsoe_published_at(ts: pd.DatetimeIndex) -> pd.Series:
    """When ENTSO-E's day-ahead forecast of each hour ``ts`` was published (UTC).

    18:00 Brussels time of the day before the hour's Brussels day
    (:data:`ENTSOE_PUBLICATION`); DST-correct through the zone.
    """
    tz, hour = ENTSOE_PUBLICATION
    # calendar arithmetic on the wall clock (a DST day has 23 or 25 hours)
    local_day = pd.DatetimeIndex(ts).tz_convert(tz).tz_localize(None).normalize()
    pub = local_day - pd.Timedelta(days=1) + pd.Timedelta(hours=hour)
    return pd.Series(pub.tz_localize(tz).tz_convert("UTC"), index=ts)


def _empty_exogenous() -> pd.DataFrame:
    return pd.DataFrame({"feature": pd.Series(dtype=str),
                         "issued_at": pd.Series(dtype="datetime64[ns, UTC]"),
                         "ts": pd.Series(dtype="datetime64[ns, UTC]"),
                         "value": pd.Series(dtype=float)})


def utc_now() -> pd.Timestamp:
    """The wall clock, tz-aware UTC (the default clock)."""
    return pd.Timestamp(datetime.now(UTC))


class LiveSignals:
    """Provider-backed signal history with a cache in the store.

    Parameters
    ----------
    config
        The providers file (:func:`carbonsched.adapters.signals.providers.load_providers`).
    cache
        :class:`carbonsched.store.signal_cache.SignalCache`: the cached history, and the kept
        published forecasts (``keep_published``, ``read_published``).
    clock
        Returns "now" (tz-aware); only hours that ended before it are fetched.
    transport
        Injected httpx transport for every client (tests), default the network.
    sleep
        Injected sleep for retries, ``Retry-After`` waits, cooldowns and rate limits.
    env
        Environment to read credentials from (default ``os.environ``).
    monotonic
        Monotonic clock of deadlines and cooldowns (tests advance it with their ``sleep``). [s]
    wall_clock
        The current time (tz-aware ``datetime``), to read a ``Retry-After`` date against.
    """

    def __init__(self, config: ProvidersConfig, cache: Any,
                 clock: Callable[[], pd.Timestamp] = utc_now,
                 transport: httpx.BaseTransport | None = None,
                 sleep: Callable[[float], None] = time.sleep,
                 env: dict[str, str] | None = None,
                 monotonic: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.config = config
        self.cache = cache
        self.clock = clock
        self.transport = transport
        self.sleep = sleep
        self.env = env
        self.monotonic = monotonic
        self.wall_clock = wall_clock
        self._fetchers: dict[str, Fetcher] = {}
        self._sessions: dict[str, Any] = {}
        self._gates: dict[str, ProviderGate] = {}
        self._run_window: tuple[pd.Timestamp, pd.Timestamp] | None = None
        self.fetch_log: deque[dict[str, Any]] = deque(maxlen=FETCH_LOG_MAX)
        """This process's newest fetches, newest last (the store's ``signal_fetches`` keeps
        them all); bounded, as a service fetches for days."""

    # ------------------------------------------------------------------ time limits
    def gate(self, name: str) -> ProviderGate:
        """The cooldown and run budget of provider ``name`` (one per provider, all zones)."""
        if name not in self._gates:
            self._gates[name] = ProviderGate(
                name, self.config.providers[name].run_deadline_s, clock=self.monotonic)
        return self._gates[name]

    def begin_run(self) -> None:
        """Start a new run: every provider's run budget restarts (cooldowns stay)."""
        for g in self._gates.values():
            g.begin_run()

    # ------------------------------------------------------------------ clients
    def fetcher(self, name: str) -> Fetcher:
        """The (cached) fetcher of provider ``name``."""
        if name not in self._fetchers:
            spec = self.config.providers[name]
            headers = {}
            if spec.kind == "electricitymaps":
                headers["auth-token"] = credentials(spec, self.env)["token"].get()
            limiter = None
            if spec.kind == "watttime":
                from carbonsched.adapters.signals.watttime import RATE_LIMIT

                limiter = RateLimiter(*RATE_LIMIT, sleep=self.sleep)
            client = make_client(spec.base_url, headers=headers, timeout_s=spec.timeout_s,
                                 transport=self.transport)
            self._fetchers[name] = Fetcher(
                name, client, RetryPolicy(max_attempts=spec.max_attempts,
                                          backoff_s=float(spec.options.get("backoff_s", 0.5))),
                limiter, sleep=self.sleep, gate=self.gate(name), call_deadline_s=spec.deadline_s,
                clock=self.monotonic, wall_clock=self.wall_clock)
        return self._fetchers[name]

    def entsoe_client(self, spec: ProviderSpec) -> Any:
        """The (cached) entsoe-py client of ``spec`` (it speaks requests, not httpx)."""
        require_extra("entsoe", f"provider {spec.name!r} (kind entsoe)")
        from carbonsched.adapters.signals.entsoe_api import make_entsoe_client

        if spec.name not in self._sessions:
            token = credentials(spec, self.env)["token"].get()
            self._sessions[spec.name] = make_entsoe_client(
                spec.base_url, token, spec.timeout_s, spec.max_attempts,
                gate=self.gate(spec.name), deadline_s=spec.deadline_s, sleep=self.sleep,
                clock=self.monotonic, wall_clock=self.wall_clock,
                backoff_s=float(spec.options.get("backoff_s", 0.5)))
        return self._sessions[spec.name]

    def watttime_session(self, spec: ProviderSpec) -> Any:
        """The (cached) WattTime login session of ``spec``."""
        from carbonsched.adapters.signals import watttime as wt

        if spec.name not in self._sessions:
            creds = credentials(spec, self.env)
            self._sessions[spec.name] = wt.WattTimeSession(
                self.fetcher(spec.name), creds["username"].get(), creds["password"].get())
        return self._sessions[spec.name]

    @property
    def requests(self) -> int:
        """HTTP requests sent to every provider so far (every attempt counts)."""
        return sum(self.requests_by_provider().values())

    def requests_by_provider(self) -> dict[str, int]:
        """HTTP requests sent so far, by provider name (entsoe-py's session counted too)."""
        counts = {n: f.requests for n, f in self._fetchers.items()}
        for n, client in self._sessions.items():
            session = getattr(client, "session", None)
            if session is not None and hasattr(session, "count"):
                counts[n] = counts.get(n, 0) + session.count
        return counts

    def retries_by_provider(self) -> dict[str, int]:
        """Of :meth:`requests_by_provider`, the retried attempts, by provider name.

        The provider clients' own; entsoe-py's session does not retry.
        """
        return {n: f.retries for n, f in self._fetchers.items()}

    def close(self) -> None:
        """Close every client."""
        for f in self._fetchers.values():
            f.close()
        self._fetchers.clear()

    # ------------------------------------------------------------------ fetching
    def fetch(self, binding: Binding, site: Site | None, zone: str, start: pd.Timestamp,
              end: pd.Timestamp) -> tuple[pd.DataFrame, dict[str, Any]]:
        """One provider call for ``binding.group`` on ``[start, end)`` (no cache).

        Returns the client's ``(frame, meta)`` with the group's columns
        (:data:`.providers.GROUPS`), converted and hour-start UTC.
        """
        spec = self.config.providers[binding.provider]
        group = binding.group
        if spec.kind == "entsoe":
            from carbonsched.adapters.signals.entsoe_api import get_entsoe

            return get_entsoe(spec, "", zone, group, start, end,
                              eur_to_usd=self.config.eur_to_usd,
                              client=self.entsoe_client(spec))
        fetcher = self.fetcher(spec.name)
        if spec.kind == "electricitymaps":
            from carbonsched.adapters.signals import electricitymaps_api as em

            if group == "mix":
                return em.get_power_breakdown(fetcher, zone, start, end)
            eft = "lifecycle" if group == "carbon_intensity_lca" else str(
                spec.options.get("emission_factor_type", "direct"))
            frame, meta = em.get_electricitymaps_api(fetcher, zone, start, end, eft)
            if group == "carbon_intensity" and eft == "lifecycle":
                frame = frame.rename(columns={"carbon_intensity_lca_g_per_kwh":
                                              "carbon_intensity_g_per_kwh"})
            return frame, meta
        if spec.kind == "watttime":
            from carbonsched.adapters.signals import watttime as wt

            st = str(spec.options.get("signal_type", "co2_moer"))
            frame, meta = wt.get_watttime(self.watttime_session(spec), zone, start, end, st)
            # the plan's carbon-intensity column carries the configured kind; the kind is in
            # meta and check_plan_signal_kinds keeps one kind per plan
            frame = frame.rename(columns={wt.SIGNAL_COLUMN[st]: "carbon_intensity_g_per_kwh"})
            return frame, meta
        if spec.kind == "eia":
            from carbonsched.adapters.signals.eia_api import get_eia_api

            token = credentials(spec, self.env)["token"].get()
            return get_eia_api(fetcher, token, zone, start, end)
        if spec.kind == "open-meteo":
            from carbonsched.adapters.signals.openmeteo_api import get_open_meteo

            if site is None:
                raise ProviderConfigError(spec.name, "weather needs a site's coordinates")
            return get_open_meteo(fetcher, site.latitude, site.longitude, start, end)
        if spec.kind == "http-feed":
            from carbonsched.adapters.signals.http_feed import FeedSpec, get_http_feed

            o = spec.options
            feed = FeedSpec(spec.name, str(o.get("path", "/")), str(o.get("format", "csv")),
                            str(o.get("time_column", "time")), str(o.get("time_zone", "UTC")),
                            str(o.get("time_label", "start")), dict(o.get("columns", {})),
                            dict(o.get("scale", {})), str(o.get("records", "data")))
            return get_http_feed(fetcher, feed, zone, start, end)
        raise ProviderConfigError(spec.name, f"kind {spec.kind!r} has no client")

    def ensure(self, binding: Binding, site: Site | None, zone: str, start: pd.Timestamp,
               end: pd.Timestamp) -> dict[str, Any]:
        """Fetch the uncovered hours of ``[start, end)`` for ``binding`` into the cache.

        Returns
        -------
        dict
            ``requests`` made, ``gaps`` fetched, ``error`` (a provider error's message, or
            ``None``), ``newest_value_at``, ``notes`` (what the provider's reader noted of the
            hours fetched: values set to NaN, rows dropped, points averaged).

        Raises
        ------
        ProviderConfigError
            Credentials, region or configuration (never degraded silently).
        """
        spec = self.config.providers[binding.provider]
        columns = GROUPS[binding.group]
        primary = columns[0]
        gaps = self.cache.gaps(spec.name, zone, primary, start, end)
        out: dict[str, Any] = {"requests": 0, "gaps": gaps, "error": None,
                               "newest_value_at": None, "notes": []}
        for a, b in gaps:
            now = self.clock()
            before = self.requests_by_provider().get(spec.name, 0)
            try:
                frame, meta = self.fetch(binding, site, zone, a, b)
            except ProviderConfigError:
                raise
            except (ProviderError, TimeAxisError) as exc:
                sent = self.requests_by_provider().get(spec.name, 0) - before
                out["requests"] += sent
                out["error"] = str(exc)
                self._log(spec, zone, binding.group, a, b, now, "failed", sent, 0, None, str(exc))
                break
            sent = self.requests_by_provider().get(spec.name, 0) - before
            out["requests"] += sent
            newest = meta.get("newest_value_at")
            newest_ts = None if newest is None else pd.Timestamp(newest)
            upto = b if newest_ts is None else min(b, newest_ts + HOUR)
            if newest_ts is None:
                upto = a  # nothing valued came back: leave the whole window a gap
            n = self.cache.write(spec.name, zone, frame, columns, upto, now,
                                 meta.get("emission_factor_type"), meta.get("signal_type"), a)
            self._log(spec, zone, binding.group, a, b, now, "ok", sent, n, newest_ts,
                      "; ".join(meta.get("notes", []))[:2000] or None)
            out["notes"].extend(f"{spec.name} {binding.group} for {zone}, "
                                f"{a.isoformat()} .. {b.isoformat()}: {note}"
                                for note in meta.get("notes", []))
            out["newest_value_at"] = newest
        return out

    def _log(self, spec: ProviderSpec, zone: str, group: str, a: pd.Timestamp, b: pd.Timestamp,
             now: pd.Timestamp, status: str, requests: int, stored: int,
             newest: pd.Timestamp | None, detail: str | None) -> None:
        age = None if newest is None else (now - (newest + HOUR)) / HOUR
        row = dict(provider=spec.name, zone=zone, signal=group, start=a, end=b, fetched_at=now,
                   status=status, requests=requests, hours_stored=stored, newest_value_at=newest,
                   age_hours=age, detail=detail)
        self.fetch_log.append(row)
        self.cache.log_fetch(**row)

    # ------------------------------------------------------------------ the source
    def _load(self, site: Site, data_dir: Path, hours: pd.DatetimeIndex,
              ) -> tuple[pd.DataFrame, dict[str, Any]]:
        bindings = self.config.site(site.id)
        now = pd.Timestamp(self.clock()).tz_convert("UTC")
        fetch_end = min(hours[-1] + HOUR, now.floor("h"))
        out = pd.DataFrame(index=hours)
        notes: list[str] = []
        degraded: list[dict[str, Any]] = []
        provenance: dict[str, Any] = {}
        for group, b in bindings.items():
            spec = self.config.providers[b.provider]
            zone = b.zone or site.zone
            info = self.ensure(b, site, zone, hours[0], fetch_end)
            notes.extend(info["notes"])   # the reader's notes reach the plan, not only the log
            for col in GROUPS[group]:
                cached = self.cache.read(spec.name, zone, col, hours[0], hours[-1] + HOUR)
                out[col] = cached["value"].reindex(hours)
                if col == "carbon_intensity_g_per_kwh":
                    out["carbon_intensity_estimated"] = (
                        cached["is_estimated"].reindex(hours).astype("boolean").fillna(False)
                        .astype(bool))
            primary = GROUPS[group][0]
            newest = self.cache.newest(spec.name, zone, primary)
            eft = None
            if group.startswith("carbon_intensity"):
                rows = self.cache.read(spec.name, zone, primary, hours[0], hours[-1] + HOUR)
                efts = sorted(set(rows["emission_factor_type"].dropna()))
                eft = efts[0] if efts else None
            provenance[group] = {
                "provider": spec.name, "kind": spec.kind, "zone": zone,
                "requests": info["requests"], "newest_value_at":
                    None if newest is None else newest.isoformat(),
                "age_hours": None if newest is None else float((now - (newest + HOUR)) / HOUR),
                "emission_factor_type": eft,
                **({"ci_kind": ci_kind(self.config, b)} if group == "carbon_intensity" else {})}
            if info["error"] is not None:
                window = out.loc[(out.index < fetch_end), primary]
                missing = window.index[window.isna().to_numpy()]
                cached = int(window.notna().sum())
                stale_h = None if newest is None else float((now - (newest + HOUR)) / HOUR)
                degraded.append({
                    "site": site.id, "provider": spec.name, "signal": group, "zone": zone,
                    "reason": info["error"], "missing_hours": int(len(missing)),
                    "missing_from": None if not len(missing) else missing[0].isoformat(),
                    "missing_to": None if not len(missing) else
                    (missing[-1] + HOUR).isoformat(),
                    "last_good": None if newest is None else newest.isoformat(),
                    "stale": True, "cached_hours": cached, "stale_age_hours": stale_h})
                age = "none cached" if newest is None else (
                    f"newest cached hour {newest.isoformat()}, {stale_h:.1f} h old")
                notes.append(
                    f"DEGRADED {site.id}: {spec.name} {group} for {zone} failed ({info['error']}); "
                    f"planned on STALE cached signals ({cached} hour(s) from the cache, {age}); "
                    f"{len(missing)} hour(s) before {fetch_end.isoformat()} missing (NaN, never 0)"
                    f"; last good hour {newest.isoformat() if newest is not None else 'none'}")
        ci_newest = provenance.get("carbon_intensity", {}).get("newest_value_at")
        age = provenance.get("carbon_intensity", {}).get("age_hours")
        meta = {"origin": SOURCE_NAME, "zone": site.zone,
                "signal_quality": str(SignalQuality.MEASURED), "files": [], "notes": notes,
                "providers": provenance, "degraded": degraded,
                "stale": sorted({d["signal"] for d in degraded}),
                "newest_value_at": ci_newest, "signal_age_hours": age,
                "fetched_until": fetch_end.isoformat()}
        for c in ("carbon_intensity_g_per_kwh",):
            if c not in out:
                out[c] = np.nan
        return out, meta

    # ------------------------------------------------------------ published forecasts
    def exogenous(self, site: Site, issued_at: pd.Timestamp, horizon_hours: int,
                  history_start: pd.Timestamp) -> tuple[pd.DataFrame, dict[str, Any]]:
        """The day-ahead forecasts the site's providers publish, each with its publication time.

        What a forecaster issued at ``issued_at`` may read (issue 35 item 3), in the long
        layout of :mod:`carbonsched.forecasts.exogenous` (``feature``, ``issued_at``, ``ts``,
        ``value``; :data:`EXOGENOUS_FEATURES` names the features):

        * the site's ``weather`` provider, if it is Open-Meteo: its forecast of every hour of
          the horizon (:data:`carbonsched.adapters.signals.openmeteo_api.COLUMNS`), published
          when fetched (now, the injected clock);
        * the site's ``carbon_intensity`` provider, if it publishes a forecast (Electricity Maps
          ``/v3/carbon-intensity/forecast`` with the binding's emission-factor type, WattTime
          ``/v3/forecast`` with its signal type: the same kind as the history), published when
          fetched (WattTime: its ``generated_at`` when earlier);
        * an ENTSO-E provider bound to any group of the site: the day-ahead wind and solar
          forecast (``A69``) of the zone from ``history_start`` to the horizon's end, each day
          published at 18:00 Brussels time of the day before (the latest time Regulation (EU)
          No 543/2013 art. 14.1(d) allows), so past days are a true archive.

        Every row fetched is kept in the store with its publication time (the cache's
        ``keep_published``: :mod:`carbonsched.store.published_forecasts`; the same key twice
        is one row). For an issue time in the past (a re-plan of a past day, a backtest) the
        live forecasts are not fetched — what a provider publishes now a forecaster issued
        then could not have read — but read from the store: of each feature and hour of the
        horizon, the latest publication at or before ``issued_at`` (``info["sources"]`` says
        ``"from": "store"``). When the store keeps none, the forecast is named in
        ``info["not_used"]``.

        Parameters
        ----------
        site
            The site (its bindings in the providers file, coordinates, zone).
        issued_at
            The issue time of the plan (tz-aware).
        horizon_hours
            Hours forecast from ``issued_at``. [h]
        history_start
            First hour of the history the models are fitted on (the ENTSO-E archive's start).

        Returns
        -------
        (DataFrame, dict)
            The table (possibly empty) and ``info``: ``sources`` (provider, what, features,
            rows, ``from``: ``provider`` or ``store``), ``unavailable`` (provider, what,
            reason: an outage, a refusal or a malformed answer; the plan runs those models on
            history and says so) and
            ``not_used`` (provider, what, why).
        """
        from carbonsched.adapters.signals import electricitymaps_api as em
        from carbonsched.adapters.signals import watttime as wt
        from carbonsched.adapters.signals.entsoe_api import get_entsoe_wind_solar_forecast
        from carbonsched.adapters.signals.openmeteo_api import get_open_meteo

        issued_at = pd.Timestamp(issued_at).tz_convert("UTC")
        now = pd.Timestamp(self.clock()).tz_convert("UTC")
        end = issued_at + horizon_hours * HOUR
        bindings = self.config.site(site.id)
        parts: list[pd.DataFrame] = []
        info: dict[str, Any] = {"sources": [], "unavailable": [], "not_used": []}
        # (provider, what, live or archive, the fetch, the store's zone key, its features)
        jobs: list[tuple[ProviderSpec, str, str, Callable[[], pd.DataFrame], str,
                         list[str]]] = []

        def stamped(frame: pd.DataFrame, columns: dict[str, str],
                    published: pd.Timestamp | pd.Series) -> pd.DataFrame:
            out = []
            for col, feat in columns.items():
                if col not in frame:
                    continue
                v = frame[col].dropna()
                pub = (published.reindex(v.index).to_numpy()
                       if isinstance(published, pd.Series) else published)
                out.append(pd.DataFrame({"feature": feat, "issued_at": pub, "ts": v.index,
                                         "value": v.to_numpy(float)}))
            return pd.concat(out, ignore_index=True) if out else _empty_exogenous()

        weather = bindings.get("weather")
        if weather is not None and self.config.providers[weather.provider].kind == "open-meteo":
            spec = self.config.providers[weather.provider]

            def om(spec: ProviderSpec = spec) -> pd.DataFrame:
                frame, _ = get_open_meteo(self.fetcher(spec.name), site.latitude,
                                          site.longitude, issued_at, end)
                return stamped(frame, WEATHER_FEATURES, now)
            jobs.append((spec, "weather forecast", "live", om, site.id,
                         list(WEATHER_FEATURES.values())))
        ci = bindings["carbon_intensity"]
        spec = self.config.providers[ci.provider]
        zone = ci.zone or site.zone
        if spec.kind == "electricitymaps":
            eft = str(spec.options.get("emission_factor_type", "direct"))

            # each job binds its own provider (default arguments: the loop variables move on)
            def emf(spec: ProviderSpec = spec, zone: str = zone) -> pd.DataFrame:
                frame, meta = em.get_electricitymaps_forecast(self.fetcher(spec.name), zone,
                                                              eft)
                if em.CI_COLUMN[eft] not in frame:
                    raise ProviderError(spec.name, f"asked for the {eft} forecast of {zone}, "
                                        f"the answer is {meta.get('emission_factor_type')}")
                return stamped(frame, {em.CI_COLUMN[eft]: CI_FEATURE}, now)
            jobs.append((spec, "carbon-intensity forecast", "live", emf, zone, [CI_FEATURE]))
        elif spec.kind == "watttime":
            st = str(spec.options.get("signal_type", "co2_moer"))

            def wtf(spec: ProviderSpec = spec, zone: str = zone) -> pd.DataFrame:
                frame, meta = wt.get_watttime_forecast(self.watttime_session(spec), zone, st,
                                                       max(horizon_hours, 24))
                gen = meta.get("generated_at")
                pub = now
                if gen:
                    g = pd.Timestamp(gen)
                    g = g.tz_localize("UTC") if g.tzinfo is None else g.tz_convert("UTC")
                    pub = min(g, now)
                return stamped(frame, {wt.SIGNAL_COLUMN[st]: CI_FEATURE}, pub)
            jobs.append((spec, "carbon-intensity forecast", "live", wtf, zone, [CI_FEATURE]))
        for b in bindings.values():
            es = self.config.providers[b.provider]
            if es.kind != "entsoe":
                continue
            ezone = b.zone or site.zone

            def ws(es: ProviderSpec = es, ezone: str = ezone) -> pd.DataFrame:
                frame, _ = get_entsoe_wind_solar_forecast(self.entsoe_client(es), ezone,
                                                          history_start, end)
                wind = [c for c in ("wind_onshore_forecast_mw", "wind_offshore_forecast_mw")
                        if c in frame]
                if wind:
                    frame = frame.assign(wind_mw=frame[wind].sum(axis=1, min_count=1))
                return stamped(frame, {"wind_mw": "wind_mw", "solar_forecast_mw": "solar_mw"},
                               entsoe_published_at(frame.index))
            jobs.append((es, "wind and solar day-ahead forecast", "archive", ws, ezone,
                         ["wind_mw", "solar_mw"]))
            break  # one ENTSO-E area per site
        for spec, what, kind, job, key, feats in jobs:
            if kind == "live" and now > issued_at:
                kept = self.cache.read_published(spec.name, key, feats, issued_at, issued_at,
                                                 end)
                if len(kept):
                    newest = kept["published_at"].max()
                    parts.append(pd.DataFrame({
                        "feature": kept["feature"], "issued_at": kept["published_at"],
                        "ts": kept["ts"], "value": kept["value"]}))
                    info["sources"].append({
                        "provider": spec.name, "kind": spec.kind,
                        "what": f"{what} as kept in the store (latest published "
                                f"{newest.isoformat()})",
                        "features": sorted(set(kept["feature"])), "rows": int(len(kept)),
                        "from": "store"})
                    continue
                info["not_used"].append({
                    "provider": spec.name, "what": what,
                    "why": f"it would be fetched now ({now.isoformat()}), after the issue time "
                           f"{issued_at.isoformat()}: a forecaster issued then could not have "
                           "read it; the store keeps none published by then"})
                continue
            before = self.requests_by_provider().get(spec.name, 0)
            try:
                rows = job()
            except (ProviderError, ProviderConfigError, TimeAxisError) as exc:
                sent = self.requests_by_provider().get(spec.name, 0) - before
                info["unavailable"].append({"provider": spec.name, "what": what,
                                            "reason": str(exc)})
                self._log(spec, site.zone, f"exogenous: {what}", issued_at, end, now, "failed",
                          sent, 0, None, str(exc))
                continue
            rows = rows[rows["issued_at"] <= now]  # a value not yet published is not read
            # kept with its publication time, so a later plan of this issue time and the
            # backtests read what was knowable (issue 35)
            self.cache.keep_published(spec.name, key, rows, now)
            parts.append(rows)
            info["sources"].append({"provider": spec.name, "kind": spec.kind, "what": what,
                                    "features": sorted(set(rows["feature"])),
                                    "rows": int(len(rows)), "from": "provider"})
        table = pd.concat(parts, ignore_index=True) if parts else _empty_exogenous()
        return table, info

    def load_site_signals(self, site: Site, data_dir: str | Path | None,
                          start: pd.Timestamp | str, end: pd.Timestamp | str,
                          ) -> tuple[pd.DataFrame, dict[str, Any]]:
        """Hourly signals of ``site`` on ``[start, end)`` from its providers (cache first).

        Same contract as :func:`carbonsched.adapters.signals.registry.load_site_signals`
        (``data_dir`` is unused); ``meta`` adds ``providers`` (per group: provider, zone,
        requests, newest value and its age), ``degraded`` (see the module docstring; each entry
        ``stale`` with ``cached_hours`` and ``stale_age_hours``), ``stale`` (the signal groups
        planned on the cache alone), ``newest_value_at`` and ``signal_age_hours`` of the carbon
        intensity. A load with a window other than the previous one starts a new run
        (:meth:`begin_run`).
        """
        # one run per window: the daily pipeline asks every site for the same window, so a new
        # window is a new run (each provider's run budget restarts; cooldowns stay)
        window = (pd.Timestamp(start), pd.Timestamp(end))
        if window != self._run_window:
            self.begin_run()
            self._run_window = window
        # meta["source"] names the provider of the carbon intensity (as the file sources do);
        # meta["origin"] says it came through the provider clients
        ci_provider = self.config.site(site.id)["carbon_intensity"].provider
        src = SignalSource(ci_provider, SignalQuality.MEASURED, self._load,
                           "provider clients behind the signal cache")
        return load_site_signals(site, Path(data_dir or "."), start, end,
                                 registry={site.signal_source: src})
