"""Signal clients that survive the network (issue 32 item 8), against real loopback HTTP servers.

The replay server (``replay_server.py``) answers each provider's documented requests and can drip
its answer, answer 429/503 with ``Retry-After`` in either form, or keep answering 429. Waits are
asserted as the delays the client *asked for* (an injected sleep that advances an injected
monotonic clock), never by sleeping; the one real-time assertion (the drip) uses a bound many
times the deadline.
"""

from __future__ import annotations

import base64
import logging
import random
import time
from datetime import UTC, datetime

import numpy as np
import pandas as pd
import pytest
from replay_entsoe import KEY as ENTSOE_KEY
from replay_server import EIA_KEY, TOKEN, WT_PASSWORD, WT_USER, ReplayServer, ReplayState

from carbonsched.adapters.http import (
    DEFAULT_CALL_DEADLINE_S,
    Fetcher,
    ProviderGate,
    RetryPolicy,
    make_client,
    redact_text,
    retry_after_s,
)
from carbonsched.adapters.signals import electricitymaps_api as em
from carbonsched.adapters.signals import watttime as wt
from carbonsched.adapters.signals.eia_api import get_eia_api
from carbonsched.adapters.signals.electricitymaps import read_electricitymaps
from carbonsched.adapters.signals.entsoe_api import get_entsoe, make_entsoe_client
from carbonsched.adapters.signals.live import LiveSignals
from carbonsched.adapters.signals.providers import EUR_TO_USD_2023, ProviderSpec, parse_providers
from carbonsched.catalog import load_catalog
from carbonsched.errors import ProviderUnavailableError
from carbonsched.pipeline.daily import stale_signals_note
from carbonsched.store import Store
from carbonsched.store.signal_cache import SignalCache

pytestmark = pytest.mark.shared_data

UTC_ = "UTC"
DAY = pd.Timestamp("2023-06-01", tz=UTC_), pd.Timestamp("2023-06-02", tz=UTC_)
ENV = {"ELECTRICITYMAPS_TOKEN": TOKEN, "WATTTIME_USERNAME": WT_USER,
       "WATTTIME_PASSWORD": WT_PASSWORD, "ENTSOE_API_KEY": ENTSOE_KEY, "EIA_API_KEY": EIA_KEY}
CATALOG = load_catalog("global")
GENEROUS_S = 15.0
"""Slack added to a deadline in the one wall-clock assertion (a loaded 2-core machine). [s]"""


class FakeTime:
    """A monotonic clock that an injected ``sleep`` advances (nothing really sleeps)."""

    def __init__(self) -> None:
        self.skipped = 0.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return time.monotonic() + self.skipped

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.skipped += seconds


@pytest.fixture(scope="module")
def replay(shared_data):
    state = ReplayState(shared_data)
    state.coords = {(round(s.latitude, 2), round(s.longitude, 2)): s.zone for s in CATALOG.sites}
    with ReplayServer(state) as server:
        yield server


@pytest.fixture(autouse=True)
def _reset(replay):
    st = replay.state
    st.faults.clear()
    st.hits.clear()
    st.fault_times.clear()
    st.retry_after, st.drip_s, st.drip_every_s = "1", 60.0, 0.2
    yield
    st.faults.clear()
    st.fault_times.clear()


def fetcher(replay, fake: FakeTime, *, deadline_s: float = DEFAULT_CALL_DEADLINE_S,
            attempts: int = 3, timeout_s: float = 10.0, now=None,
            gate: ProviderGate | None = None) -> Fetcher:
    return Fetcher("electricitymaps",
                   make_client(replay.url, headers={"auth-token": TOKEN}, timeout_s=timeout_s),
                   RetryPolicy(max_attempts=attempts, backoff_s=0.25), sleep=fake.sleep,
                   gate=gate, call_deadline_s=deadline_s, clock=fake.monotonic,
                   wall_clock=now or (lambda: datetime.now(UTC)), rng=random.Random(7))


def em_config(replay, **options):
    doc = {"providers": {"electricitymaps": {"kind": "electricitymaps", **options}},
           "sites": {s: {"carbon_intensity": "electricitymaps"}
                     for s in ("gb-london", "de-frankfurt", "jp-tk-tokyo")}}
    return parse_providers(doc).with_base_url(replay.url)


def live(replay, tmp_path, fake: FakeTime, clock: str, **options) -> LiveSignals:
    t = pd.Timestamp(clock, tz=UTC_)
    return LiveSignals(em_config(replay, **options),
                       SignalCache(Store(f"sqlite:///{tmp_path}/cache.db")), clock=lambda: t,
                       env=ENV, sleep=fake.sleep, monotonic=fake.monotonic)


# --------------------------------------------------------------------- a total deadline
def test_a_dripping_server_is_cut_at_the_call_deadline(replay):
    """Each read arrives within 0.2 s (the 10 s read timeout never fires); the call ends at its
    2 s deadline, not after the 60 s the server would drip, and is not retried past it."""
    replay.state.faults["electricitymaps"] = "drip"
    f = fetcher(replay, FakeTime(), deadline_s=2.0, timeout_s=10.0)
    t0 = time.monotonic()
    with pytest.raises(ProviderUnavailableError,
                       match=r"no complete answer within the 2 s deadline of this call .the "
                       r"server is too slow or drips its answer.; attempt 1 of 3"):
        em.get_electricitymaps_api(f, "GB", *DAY)
    elapsed = time.monotonic() - t0
    assert elapsed < 2.0 + GENEROUS_S < replay.state.drip_s
    assert replay.state.hits["electricitymaps"] == 1


def test_a_dripping_entsoe_answer_is_cut_at_the_call_deadline(replay):
    """The same deadline through entsoe-py's requests session."""
    replay.state.faults["entsoe"] = "drip"
    spec = ProviderSpec("entsoe", "entsoe", replay.url + "/api",
                        {"timeout_s": 10.0, "max_attempts": 3, "deadline_s": 2.0})
    t0 = time.monotonic()
    with pytest.raises(ProviderUnavailableError,
                       match=r"no complete answer within the 2 s deadline of this call"):
        get_entsoe(spec, ENTSOE_KEY, "DE_LU", "price", *DAY, EUR_TO_USD_2023)
    assert time.monotonic() - t0 < 2.0 + GENEROUS_S
    assert replay.state.hits["entsoe"] == 1


def test_the_run_budget_bounds_every_zone_of_a_provider(replay, tmp_path):
    """Three zones of one dripping provider: the first call spends its 1.5 s deadline, the second
    the 1 s left of the 2.5 s run budget, the third is not asked; all three plan on the cache."""
    replay.state.faults["electricitymaps"] = "drip"
    fake = FakeTime()
    src = live(replay, tmp_path, fake, "2023-06-02T00:10", deadline_s=1.5, run_deadline_s=2.5,
               max_attempts=1)
    t0 = time.monotonic()
    reasons = []
    for sid in ("gb-london", "de-frankfurt", "jp-tk-tokyo"):
        _, meta = src.load_site_signals(CATALOG.site(sid), None, *DAY)
        (d,) = meta["degraded"]
        reasons.append(d["reason"])
    assert time.monotonic() - t0 < 2.5 + GENEROUS_S
    assert replay.state.hits["electricitymaps"] == 2
    assert "within the 1.5 s deadline of this call" in reasons[0]
    assert "within the 2.5 s budget of this provider's run" in reasons[1]
    assert "the 2.5 s budget of this provider's run is spent" in reasons[2]
    # a new window is a new run: the provider is asked again
    replay.state.faults.clear()
    src.load_site_signals(CATALOG.site("gb-london"), None, DAY[0] - pd.Timedelta(days=1),
                          DAY[1])
    assert replay.state.hits["electricitymaps"] == 3


# --------------------------------------------------------------------- Retry-After
@pytest.mark.parametrize("status", ["503", "429"])
def test_retry_after_seconds_is_honoured_with_jitter(replay, status):
    replay.state.faults["electricitymaps"] = status
    replay.state.fault_times["electricitymaps"] = 1
    replay.state.retry_after = "7"
    fake = FakeTime()
    f = fetcher(replay, fake)
    frame, _ = em.get_electricitymaps_api(f, "GB", *DAY)
    assert len(frame) == 24 and replay.state.hits["electricitymaps"] == 2
    (asked,) = fake.slept
    assert 7.0 <= asked <= 7.0 * 1.1  # never less than asked, at most 10 % more
    assert asked != 7.0  # jittered (seeded)


@pytest.mark.parametrize("header, now", [
    ("Wed, 21 Oct 2015 07:28:07 GMT", "2015-10-21T07:28:00"),      # IMF-fixdate
    ("Wednesday, 21-Oct-15 07:28:07 GMT", "2015-10-21T07:28:00"),  # RFC 850
    ("Wed Oct 21 07:28:07 2015", "2015-10-21T07:28:00"),           # asctime
])
def test_retry_after_http_date_is_honoured(replay, header, now):
    replay.state.faults["electricitymaps"] = "503"
    replay.state.fault_times["electricitymaps"] = 1
    replay.state.retry_after = header
    fake = FakeTime()
    wall = pd.Timestamp(now, tz=UTC_).to_pydatetime()
    f = fetcher(replay, fake, now=lambda: wall)
    em.get_electricitymaps_api(f, "GB", *DAY)
    (asked,) = fake.slept
    assert 7.0 <= asked <= 7.7


def test_retry_after_forms_unit():
    now = pd.Timestamp("2015-10-21T07:28:00", tz=UTC_).to_pydatetime()
    assert retry_after_s({"Retry-After": " 120 "}, now) == 120.0
    assert retry_after_s({"Retry-After": "1.5"}, now) == 1.5
    assert retry_after_s({"Retry-After": "Wed, 21 Oct 2015 07:27:00 GMT"}, now) == 0.0  # past
    assert retry_after_s({"Retry-After": "soon"}, now) is None
    assert retry_after_s({}, now) is None


def test_a_retry_after_beyond_the_deadline_fails_at_once(replay):
    """Known bad: 20 s asked, 10 s left: no sleep, one request, the message says why. At the
    limit: 9 s of the 10 s is honoured (its jitter capped so as not to break the deadline)."""
    replay.state.faults["electricitymaps"] = "429"
    replay.state.retry_after = "20"
    fake = FakeTime()
    f = fetcher(replay, fake, deadline_s=10.0)
    with pytest.raises(ProviderUnavailableError,
                       match=r"HTTP 429 with Retry-After 20 s: .*longer than the \d+ s left of "
                       r"the 10 s deadline of this call; electricitymaps is on hold") as exc:
        em.get_electricitymaps_api(f, "GB", *DAY)
    assert fake.slept == [] and replay.state.hits["electricitymaps"] == 1
    assert exc.value.status == 429
    replay.state.retry_after = "9"
    replay.state.fault_times["electricitymaps"] = 1
    fake2 = FakeTime()
    em.get_electricitymaps_api(fetcher(replay, fake2, deadline_s=10.0), "GB", *DAY)
    (asked,) = fake2.slept
    assert 9.0 <= asked < 10.0


# --------------------------------------------------------------------- the provider's cooldown
def test_a_retry_after_holds_the_provider_for_its_other_zones(replay, tmp_path):
    """Zone GB gets 429 with Retry-After 20 on its only try; DE-LU, asked next, waits out the
    hold before its request instead of hitting the provider at once."""
    replay.state.faults["electricitymaps"] = "429"
    replay.state.fault_times["electricitymaps"] = 1
    replay.state.retry_after = "20"
    fake = FakeTime()
    src = live(replay, tmp_path, fake, "2023-06-02T00:10", max_attempts=1)
    _, gb = src.load_site_signals(CATALOG.site("gb-london"), None, *DAY)
    assert "Retry-After 20 s" in gb["degraded"][0]["reason"] and fake.slept == []
    _, de = src.load_site_signals(CATALOG.site("de-frankfurt"), None, *DAY)
    assert de["degraded"] == []
    assert fake.slept == [pytest.approx(20.0, abs=1.0)]  # the hold, before DE-LU's request
    assert replay.state.hits["electricitymaps"] == 2


def test_a_long_hold_is_not_waited_for_and_no_zone_is_asked(replay, tmp_path):
    """Known bad: a 600 s Retry-After against 60 s deadlines: the other zones are not asked at
    all in this run (they plan on the cache); once the hold has passed, they are."""
    replay.state.faults["electricitymaps"] = "429"
    replay.state.retry_after = "600"
    fake = FakeTime()
    src = live(replay, tmp_path, fake, "2023-06-02T00:10")
    reasons = [src.load_site_signals(CATALOG.site(s), None, *DAY)[1]["degraded"][0]["reason"]
               for s in ("gb-london", "de-frankfurt", "jp-tk-tokyo")]
    assert replay.state.hits["electricitymaps"] == 1 and fake.slept == []
    assert all("on hold for another" in r and "not asked" in r for r in reasons[1:])
    replay.state.faults.clear()
    fake.skipped += 601.0  # the hold has passed; the next day's run asks again
    _, meta = src.load_site_signals(CATALOG.site("de-frankfurt"), None, DAY[0],
                                    DAY[1] + pd.Timedelta(days=1))
    assert meta["degraded"] == [] and replay.state.hits["electricitymaps"] == 2


# --------------------------------------------------------------------- stale, and said so
def test_the_plan_proceeds_on_the_cache_marked_stale_and_says_so(replay, tmp_path, shared_data):
    fake = FakeTime()
    store_dir = tmp_path
    day1 = live(replay, store_dir, fake, "2023-06-02T00:10")
    a = DAY[0]
    day1.load_site_signals(CATALOG.site("gb-london"), None, a, DAY[1])
    replay.state.faults["electricitymaps"] = "drip"
    day2 = live(replay, store_dir, fake, "2023-06-03T00:10", deadline_s=1.5)
    frame, meta = day2.load_site_signals(CATALOG.site("gb-london"), None, a,
                                         DAY[1] + pd.Timedelta(days=1))
    (d,) = meta["degraded"]
    assert d["stale"] is True and d["cached_hours"] == 24 and d["missing_hours"] == 24
    assert d["last_good"] == "2023-06-01T23:00:00+00:00"
    assert d["stale_age_hours"] == pytest.approx(24 + 10 / 60)
    assert meta["stale"] == ["carbon_intensity"]
    ref, _ = read_electricitymaps(shared_data / "sustain-cluster" / "carbon_intensity"
                                  / "GB_2023_hourly.csv")
    np.testing.assert_allclose(frame["carbon_intensity_g_per_kwh"].iloc[:24],
                               ref.loc[a:DAY[1] - pd.Timedelta(hours=1),
                                       "carbon_intensity_g_per_kwh"])
    assert frame["carbon_intensity_g_per_kwh"].iloc[24:].isna().all()  # missing, never 0
    (note,) = [n for n in meta["notes"] if n.startswith("DEGRADED gb-london")]
    assert ("planned on STALE cached signals (24 hour(s) from the cache, newest cached hour "
            "2023-06-01T23:00:00+00:00, 24.2 h old)") in note
    summary = stale_signals_note(meta["degraded"] + [{**d, "site": "de-frankfurt",
                                                      "last_good": None}])
    assert summary.startswith("signals: STALE for 2 site(s) (2 signal group(s)): a provider "
                              "failed or could not be reached in time")
    assert "gb-london carbon_intensity (electricitymaps: newest cached " \
           "2023-06-01T23:00:00+00:00, 24.2 h old)" in summary
    assert "de-frankfurt carbon_intensity (electricitymaps: nothing cached)" in summary
    assert stale_signals_note([]) is None


# --------------------------------------------------------------------- no secret in a log line
def test_no_secret_in_any_log_record(replay, caplog):
    caplog.set_level(logging.DEBUG)
    fake = FakeTime()
    em.get_electricitymaps_api(fetcher(replay, fake), "GB", *DAY)
    plain = Fetcher("eia", make_client(replay.url), sleep=fake.sleep, clock=fake.monotonic)
    get_eia_api(plain, EIA_KEY, "PJM", pd.Timestamp("2022-06-01", tz=UTC_),
                pd.Timestamp("2022-06-02", tz=UTC_))
    session = wt.WattTimeSession(Fetcher("watttime", make_client(replay.url)), WT_USER,
                                 WT_PASSWORD)
    wt.get_watttime(session, "NYISO_NYC", *DAY, "co2_aoer")
    client = make_entsoe_client(replay.url + "/api", ENTSOE_KEY, 10.0, 1)
    spec = ProviderSpec("entsoe", "entsoe", replay.url + "/api", {"max_attempts": 1})
    get_entsoe(spec, ENTSOE_KEY, "DE_LU", "price", *DAY, EUR_TO_USD_2023, client=client)
    # a failing call logs too (httpx logs the 503 with its URL)
    replay.state.faults["eia"] = "503"
    with pytest.raises(ProviderUnavailableError) as exc:
        get_eia_api(Fetcher("eia", make_client(replay.url), RetryPolicy(max_attempts=1)),
                    EIA_KEY, "PJM", *DAY)
    secrets = [TOKEN, EIA_KEY, ENTSOE_KEY, WT_PASSWORD, session.token,
               base64.b64encode(f"{WT_USER}:{WT_PASSWORD}".encode()).decode()]
    lines = [logging.Formatter("%(name)s %(message)s").format(r) for r in caplog.records]
    leaks = [(s, line) for line in lines for s in secrets if s and s in line]
    assert leaks == []
    assert EIA_KEY not in str(exc.value)
    # the lines were logged (and redacted), not lost
    assert any(r.name == "httpx" and "api_key=***" in r.getMessage() for r in caplog.records)
    assert any("securityToken=***" in line or "'securityToken': '***'" in line
               for line in lines)


def test_redact_text_patterns():
    assert redact_text("GET /x?api_key=abc123&a=1") == "GET /x?api_key=***&a=1"
    assert redact_text("Authorization: Bearer abc.def") == "Authorization: Bearer ***"
    assert redact_text("{'securityToken': 'zz9'}") == "{'securityToken': '***'}"
    assert redact_text("nothing here") == "nothing here"
