"""What a process that runs for days keeps stays bounded: model choices, fetch log, secrets.

The service plans every few hours for weeks: the model cache must hold one refit period's working
set (sites x signals x issue hours) and no superseded period, the providers' fetch log only the
newest fetches, and the redaction set only the WattTime token in use, not every one it had.
"""

from __future__ import annotations

from collections import OrderedDict
from types import SimpleNamespace

import httpx
import pandas as pd
import pytest

from carbonsched.adapters import http as cs_http
from carbonsched.adapters.http import Fetcher, redact_text
from carbonsched.adapters.signals import watttime as wt
from carbonsched.adapters.signals.live import FETCH_LOG_MAX, LiveSignals
from carbonsched.pipeline import daily


# ----------------------------------------------------------------------------- model choices
@pytest.fixture
def limit(monkeypatch):
    monkeypatch.setattr(daily, "_model_cache_limit", daily.MODEL_CACHE_SIZE)


def _day_of_hourly_runs(cache: OrderedDict, sites: int, day: int) -> int:
    """One day of hourly runs: every site, signal and issue hour looks its choice up; the
    choices fitted (misses)."""
    fits = 0
    period = pd.Timestamp("2026-12-07", tz="UTC")       # one refit period (a week)
    for hour in range(24):
        for site in range(sites):
            for signal in range(daily.SELECTED_SIGNALS):
                key = (f"s{site}", signal, period, 48, "h", hour, None)
                if cache.get(key) is None:
                    fits += 1
                    daily.remember_model(cache, key, object())
    return fits


def test_an_hourly_service_keeps_every_sites_choices_fitted_for_the_period(limit):
    sites = 5                                         # 5 x 3 x 24 = 360 choices: above 256
    assert daily.size_model_cache(sites, 1) == 2 * sites * 3 * 24
    cache: OrderedDict = OrderedDict()
    assert _day_of_hourly_runs(cache, sites, 0) == 360
    assert _day_of_hourly_runs(cache, sites, 1) == 0     # the next day: all still fitted


def test_the_old_bound_refits_every_choice_every_run(limit):
    # known-bad: with the fixed 256 the LRU dropped each choice before its hour came round
    cache: OrderedDict = OrderedDict()
    _day_of_hourly_runs(cache, 5, 0)
    assert len(cache) == daily.MODEL_CACHE_SIZE
    assert _day_of_hourly_runs(cache, 5, 1) == 360


def test_a_working_set_at_the_bound_is_kept_whole_and_one_more_is_not(limit):
    # daily runs of 42 sites: 2 x 42 x 3 = 252 <= 256 keeps the floor; 2 x 43 x 3 = 258 raises it
    assert daily.model_cache_size(42, 24) == daily.MODEL_CACHE_SIZE
    assert daily.model_cache_size(43, 24) == 258
    assert daily.model_cache_size(43, 2) == 2 * 43 * 3 * 12
    cache: OrderedDict = OrderedDict()
    for i in range(daily.MODEL_CACHE_SIZE):
        daily.remember_model(cache, i, i)
    assert list(cache) == list(range(daily.MODEL_CACHE_SIZE))
    daily.remember_model(cache, "one more", 0)
    assert len(cache) == daily.MODEL_CACHE_SIZE and 0 not in cache
    # sizing never lowers a bound another caller raised
    assert daily.size_model_cache(43, 1) == 2 * 43 * 3 * 24
    assert daily.size_model_cache(1, 24) == 2 * 43 * 3 * 24


def test_the_process_cache_drops_superseded_refit_periods(monkeypatch):
    cache: OrderedDict = OrderedDict()
    monkeypatch.setattr(daily, "_MODEL_CACHE", cache)
    last_week = pd.Timestamp("2023-07-10", tz="UTC")
    cache[("s", "ci", last_week, 48, "h", 0, None)] = object()
    issue = pd.Timestamp("2023-07-18T00:00Z")            # the next week's period
    monkeypatch.setattr(daily, "known_exogenous", lambda *a: (_ for _ in ()).throw(
        RuntimeError("stop after the prune")))
    idx = pd.date_range(issue - pd.Timedelta(days=10), issue, freq="h", inclusive="left")
    hist = pd.DataFrame({"carbon_intensity_g_per_kwh": 400.0 + (idx.hour * 7 + idx.day) % 90},
                        index=idx)
    site = SimpleNamespace(id="s", zone="z", timezone="UTC")
    with pytest.raises(RuntimeError, match="stop after the prune"):
        daily.forecast_site(site, hist, issue)
    assert cache == {}


# ----------------------------------------------------------------------------- fetch log
class _Cache:
    def log_fetch(self, **row):
        pass


def _fetches(n: int) -> LiveSignals:
    src = LiveSignals(SimpleNamespace(providers={}), _Cache())
    now = pd.Timestamp("2026-12-07T00:00Z")
    for i in range(n):
        src._log(SimpleNamespace(name="p"), "z", "ci", now, now, now, "ok", 1, i, None, None)
    return src


def test_the_fetch_log_keeps_the_newest_fetches_only():
    at = _fetches(FETCH_LOG_MAX)
    assert [r["hours_stored"] for r in at.fetch_log] == list(range(FETCH_LOG_MAX))
    over = _fetches(FETCH_LOG_MAX + 1)
    assert len(over.fetch_log) == FETCH_LOG_MAX
    assert over.fetch_log[0]["hours_stored"] == 1
    assert over.fetch_log[-1]["hours_stored"] == FETCH_LOG_MAX


# ----------------------------------------------------------------------------- WattTime tokens
def test_a_relogin_replaces_the_old_token_in_the_redaction_set():
    n = iter(range(100))

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"token": f"relogin-test-{next(n):04d}-abcdef"})

    client = httpx.Client(base_url="http://watttime.test", transport=httpx.MockTransport(answer))
    session = wt.WattTimeSession(Fetcher("watttime", client), "user", "pw-long-enough")
    first = session.login()
    assert first in cs_http._SECRETS
    for _ in range(5):
        session.login()
    assert session.logins == 6
    tokens = {s for s in cs_http._SECRETS if s.startswith("relogin-test-")}
    assert tokens == {session.token}
    assert redact_text(f"Bearer-less {session.token}") == "Bearer-less ***"
    assert "pw-long-enough" in cs_http._SECRETS          # the credentials stay secret
