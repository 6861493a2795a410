"""One HTTP client factory for every signal provider (STYLE practice 10, after httpx).

:func:`make_client` builds an :class:`httpx.Client` with explicit timeouts and an injectable
transport (tests pass a transport or point ``base_url`` at a loopback replay server);
:class:`Fetcher` wraps it with what every provider call needs:

* **a total deadline per call** (:attr:`Fetcher.call_deadline_s`, default
  :data:`DEFAULT_CALL_DEADLINE_S`): an httpx timeout bounds each *read*, so a server that drips
  one byte a second would hold a call for as long as it likes. Each attempt runs in a worker
  thread that reads the body chunk by chunk; the caller waits at most the time left and then
  raises :class:`~carbonsched.errors.ProviderUnavailableError` (the worker stops at its next
  chunk, or at its read timeout, itself shortened to the time left). Retries, their waits and a
  ``Retry-After`` all spend the same deadline;
* **a total deadline per provider run** (:class:`ProviderGate`, ``run_deadline_s``, default
  :data:`DEFAULT_RUN_DEADLINE_S`): every call to one provider in one planning run spends one
  budget, so a provider that is slow for every zone cannot hold the run for zones × deadline;
* **bounded retries with exponential backoff** for idempotent calls only (every provider read is
  a ``GET``; a login ``POST``/``GET`` with credentials is tried once);
* **``Retry-After`` honoured on 429 and 503** in both of its forms (delta-seconds, and an
  HTTP-date in the IMF-fixdate, RFC 850 or asctime format; RFC 9110 §10.2.3 and §5.6.7), plus a
  jitter of up to :attr:`RetryPolicy.jitter_fraction` of the wait (never less than asked); a
  wait that does not fit in the time left fails the call at once instead of sleeping;
* **a provider-wide cooldown** (:class:`ProviderGate`): a ``Retry-After`` puts the whole provider
  (every zone, every signal) on hold until it has passed; a call made during the hold waits for
  its end if that fits in its deadline, and otherwise fails without sending a request;
* **a client-side rate limit** (:class:`RateLimiter`, a sliding window; WattTime's documented
  limit is 3,000 requests per 5 minutes);
* **a request counter** (:attr:`Fetcher.requests`) so tests and ``signals check`` can prove that
  a second run makes no provider request;
* **no credentials in messages or log lines**: :func:`redact_url` drops the values of
  :data:`SECRET_PARAMS` from every URL an error names, and :func:`install_log_redaction` (called by
  :func:`make_client`) rewrites every log record of the process — httpx logs each request URL at
  INFO, urllib3 and entsoe-py log theirs at DEBUG — so that no registered secret
  (:func:`register_secret`), secret query value or ``Authorization``/``auth-token`` header value
  reaches a handler.

Errors: a timeout, a refused connection, 5xx or 429 after the last attempt, a deadline spent or a
cooldown longer than the time left raise :class:`~carbonsched.errors.ProviderUnavailableError`;
any other 4xx raises :class:`~carbonsched.errors.ProviderError` with its ``status`` (providers
map 401/403 to :class:`~carbonsched.errors.ProviderConfigError` where that is what it means).
"""

from __future__ import annotations

import collections
import email.utils
import logging
import math
import random
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx

from carbonsched.errors import ProviderError, ProviderUnavailableError

DEFAULT_TIMEOUT_S = 20.0
"""Read/write/pool timeout of a provider request (each read, not the call). [s]"""

DEFAULT_CONNECT_TIMEOUT_S = 5.0
"""Connect timeout of a provider request. [s]"""

DEFAULT_CALL_DEADLINE_S = 60.0
"""Total time one provider call may take, its retries and waits included. [s] Three tries of a
normal answer (well under a second each) with their backoff fit many times; a daily run with a
provider that drips or stalls gives up on it after one minute and plans on the cache."""

DEFAULT_RUN_DEADLINE_S = 900.0
"""Total time all calls to one provider may take in one planning run. [s] A daily run asks each
provider about one request per zone and signal group (the hours since the last run); a first run
on an empty cache asks Electricity Maps 532 ten-day chunks for the global catalog (38 per zone and
group, a year of history), which 15 minutes allows at 1.7 s per request. A provider that needs
more is degraded, not waited for; backfill with ``carbonsched ingest`` (also one run: rerun it,
it fetches only what is missing) or raise ``run_deadline_s``."""

RETRY_AFTER_STATUSES = frozenset({429, 503})
"""Statuses whose ``Retry-After`` is honoured (RFC 6585 §4 for 429, RFC 9110 §15.6.4 for 503)."""

SECRET_PARAMS = frozenset({"api_key", "apikey", "token", "securitytoken", "password",
                           "auth-token", "access_token"})
"""Query parameters whose values never appear in a message (compared case-insensitively)."""

USER_AGENT = "carbonsched (+https://github.com/carbonsched)"

_CHUNK = 65536


def make_client(
    base_url: str,
    *,
    headers: Mapping[str, str] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
    transport: httpx.BaseTransport | None = None,
    auth: httpx.Auth | tuple[str, str] | None = None,
) -> httpx.Client:
    """The one way carbonsched builds an HTTP client.

    Also installs the log redaction (:func:`install_log_redaction`) and registers the values of
    secret-bearing default headers (``auth-token``, ``Authorization``) as secrets.

    Parameters
    ----------
    base_url
        Provider root, e.g. ``https://api.electricitymap.org``; a loopback replay server in tests.
    headers
        Extra default headers (an auth token header, for example).
    timeout_s
        Read, write and pool timeout (each read; :class:`Fetcher` adds the call's deadline). [s]
    connect_timeout_s
        Connect timeout. [s]
    transport
        Injected transport (``httpx.MockTransport``, a custom one); ``None`` uses the network.
    auth
        httpx auth (basic credentials for a login call).

    Returns
    -------
    httpx.Client
        Close it (or use it as a context manager).
    """
    install_log_redaction()
    for name, value in (headers or {}).items():
        if name.lower() in _SECRET_HEADERS:
            register_secret(value)
    timeout = httpx.Timeout(timeout_s, connect=connect_timeout_s)
    hdrs = {"User-Agent": USER_AGENT, **dict(headers or {})}
    return httpx.Client(base_url=base_url, headers=hdrs, timeout=timeout, transport=transport,
                        auth=auth, follow_redirects=True)


# ---------------------------------------------------------------------------- redaction
_SECRET_HEADERS = frozenset({"auth-token", "authorization", "x-api-key"})
_SECRETS: set[str] = set()
_SECRETS_LOCK = threading.Lock()
MIN_SECRET_CHARS = 6
"""Shorter values are not registered as secrets (replacing them would garble log lines)."""

_PARAM_RE = re.compile(
    r"(?i)(?P<key>[?&;]?(?:" + "|".join(re.escape(p) for p in sorted(SECRET_PARAMS))
    + r")(?:['\"])?\s*[=:]\s*(?:['\"])?)(?P<value>[^&\s'\",;}\)]+)")
_HEADER_RE = re.compile(
    r"(?i)(?P<key>(?:authorization|auth-token|x-api-key)(?:['\"])?\s*[:=]\s*(?:['\"])?"
    r"(?:(?:bearer|basic)\s+)?)(?P<value>[^\s'\",;}\)]+)")


def register_secret(value: str | None) -> None:
    """Never let ``value`` appear in a log line of this process (see :func:`redact_text`).

    Values shorter than :data:`MIN_SECRET_CHARS` characters are ignored.
    """
    if value and len(value) >= MIN_SECRET_CHARS:
        with _SECRETS_LOCK:
            _SECRETS.add(value)


def replace_secret(old: str | None, new: str | None) -> None:
    """Register ``new`` and forget ``old`` (a re-login's token replaces the expired one).

    A process that logs in again for days would otherwise keep every token it ever had, and
    redact each of them in every log line.
    """
    register_secret(new)
    if old and old != new:
        with _SECRETS_LOCK:
            _SECRETS.discard(old)


def redact_text(text: str) -> str:
    """``text`` with every registered secret, secret query value and auth header value as ``***``.

    Parameters
    ----------
    text
        A log line, a message, a URL.

    Returns
    -------
    str
        The same text; unchanged when it holds no secret.
    """
    with _SECRETS_LOCK:
        secrets = sorted(_SECRETS, key=len, reverse=True)
    for s in secrets:
        if s in text:
            text = text.replace(s, "***")
    text = _PARAM_RE.sub(lambda m: m.group("key") + "***", text)
    return _HEADER_RE.sub(lambda m: m.group("key") + "***", text)


def _redact_record(record: logging.LogRecord) -> None:
    try:
        message = record.getMessage()
    except Exception:  # noqa: BLE001 - a malformed record is the logging module's to report
        return
    clean = redact_text(message)
    if clean != message:
        record.msg, record.args = clean, None
    if record.exc_info and not record.exc_text:
        text = logging.Formatter().formatException(record.exc_info)
        clean = redact_text(text)
        if clean != text:
            record.exc_text = clean


_INSTALLED = False


def install_log_redaction() -> None:
    """Redact every log record of the process (idempotent).

    Wraps the log-record factory (:func:`logging.setLogRecordFactory`): each record is
    formatted once and, if it holds a secret (:func:`redact_text`), its message is replaced by
    the redacted text (and its ``args`` dropped); a traceback holding one gets a redacted
    ``exc_text``. A factory sees the records of every logger (httpx, httpcore, urllib3,
    entsoe-py) before any filter or handler, which a logger filter would not.
    """
    global _INSTALLED
    if _INSTALLED:
        return
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        _redact_record(record)
        return record

    logging.setLogRecordFactory(factory)
    _INSTALLED = True


def redact_url(url: str | httpx.URL) -> str:
    """``url`` with the values of :data:`SECRET_PARAMS` replaced by ``***``."""
    u = httpx.URL(str(url))
    params = [(k, "***" if k.lower() in SECRET_PARAMS else v) for k, v in u.params.multi_items()]
    return redact_text(str(u.copy_with(params=params)) if params else str(u))


# ---------------------------------------------------------------------------- policy
@dataclass
class RetryPolicy:
    """How an idempotent provider call is retried.

    Attributes
    ----------
    max_attempts
        Tries in all (1 = no retry).
    backoff_s
        First wait; doubles on each retry. [s]
    max_backoff_s
        Longest wait between tries. [s]
    max_retry_after_s
        Longest ``Retry-After`` honoured even when the deadline would allow more; a longer one
        fails the call at once (and holds the provider for it). [s]
    jitter_fraction
        Each wait is lengthened by a uniform random share in ``[0, jitter_fraction]`` of itself,
        so that clients told the same ``Retry-After`` do not return together (AWS Architecture
        Blog, "Exponential Backoff and Jitter", 2015). [-]
    """

    max_attempts: int = 3
    backoff_s: float = 0.5
    max_backoff_s: float = 30.0
    max_retry_after_s: float = 3600.0
    jitter_fraction: float = 0.1

    def backoff(self, attempt: int) -> float:
        """Wait before try ``attempt + 1`` (``attempt`` is 1-based), jitter excluded. [s]"""
        return min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1))


@dataclass
class RateLimiter:
    """At most ``max_requests`` per ``period_s`` (sliding window), blocking until allowed.

    Attributes
    ----------
    max_requests
        Requests allowed in any window of ``period_s``.
    period_s
        Window length. [s]
    clock, sleep
        Injected monotonic clock and sleep (tests drive them).
    """

    max_requests: int
    period_s: float
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    _sent: collections.deque[float] = field(default_factory=collections.deque, repr=False)
    waited_s: float = 0.0

    def acquire(self) -> None:
        """Block until one more request fits in the window, then count it."""
        now = self.clock()
        while self._sent and now - self._sent[0] >= self.period_s:
            self._sent.popleft()
        if len(self._sent) >= self.max_requests:
            wait = self.period_s - (now - self._sent[0])
            if wait > 0:
                self.waited_s += wait
                self.sleep(wait)
            now = self.clock()
            self._sent.popleft()
        self._sent.append(now)


@dataclass
class ProviderGate:
    """What every call to one provider shares: its cooldown and its run's time budget.

    One gate per provider account (all its zones and signal groups); :class:`Fetcher` and the
    ENTSO-E session consult it before each request.

    Attributes
    ----------
    provider
        The provider's name, for messages.
    run_deadline_s
        Total time the calls of one run may take (:data:`DEFAULT_RUN_DEADLINE_S`). [s]
    clock
        Monotonic clock (injected in tests). [s]
    cooldown_until
        Clock time before which the provider is not asked (set by a ``Retry-After``). [s]
    cooldown_reason
        What set the cooldown (status and ``Retry-After``), for messages.
    """

    provider: str
    run_deadline_s: float = DEFAULT_RUN_DEADLINE_S
    clock: Callable[[], float] = time.monotonic
    cooldown_until: float = -math.inf
    cooldown_reason: str = ""
    _run_started: float | None = field(default=None, repr=False)

    def begin_run(self) -> None:
        """Start a new run: the run budget restarts at the next call (the cooldown stays)."""
        self._run_started = None

    def run_left(self) -> float:
        """Seconds left of this run's budget (the run starts at its first call). [s]"""
        now = self.clock()
        if self._run_started is None:
            self._run_started = now
        return self.run_deadline_s - (now - self._run_started)

    def cooldown_left(self) -> float:
        """Seconds until the provider may be asked again (0 when it may). [s]"""
        return max(0.0, self.cooldown_until - self.clock())

    def cool_down(self, seconds: float, reason: str) -> None:
        """Hold every call to the provider for ``seconds`` (a longer hold already set stays)."""
        until = self.clock() + seconds
        if until > self.cooldown_until:
            self.cooldown_until, self.cooldown_reason = until, reason

    def served(self, upto: float) -> None:
        """A caller has slept until clock time ``upto``: lift a hold that ends by then.

        With a real sleep the hold has expired anyway; with an injected sleep (tests) this keeps
        the gate's time consistent with the time the caller was told had passed.
        """
        if self.cooldown_until <= upto:
            self.cooldown_until, self.cooldown_reason = -math.inf, ""


@dataclass
class CallDeadline:
    """The time left to one call: its own deadline and its provider's run budget, the smaller.

    Attributes
    ----------
    seconds
        The call's own deadline. [s]
    gate
        The provider's gate (its run budget), or ``None``.
    clock
        Monotonic clock. [s]
    """

    seconds: float
    gate: ProviderGate | None = None
    clock: Callable[[], float] = time.monotonic
    _at: float = field(default=0.0, repr=False)

    def __post_init__(self) -> None:
        self._at = self.clock() + self.seconds

    def left(self) -> float:
        """Seconds left (may be negative). [s]"""
        own = self._at - self.clock()
        return min(own, self.gate.run_left()) if self.gate is not None else own

    def what(self) -> str:
        """Which limit binds, in words (``the 60 s deadline of this call``)."""
        own = self._at - self.clock()
        if self.gate is not None and self.gate.run_left() < own:
            return f"the {self.gate.run_deadline_s:g} s budget of this provider's run"
        return f"the {self.seconds:g} s deadline of this call"


def retry_after_s(response: httpx.Response | Mapping[str, str] | Any,
                  now: datetime | None = None) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait, or ``None`` when absent or unreadable.

    Both forms of RFC 9110 §10.2.3 are read: delta-seconds (``120``; a decimal such as ``1.5`` is
    accepted too) and an HTTP-date in each format of RFC 9110 §5.6.7 (IMF-fixdate
    ``Sun, 06 Nov 1994 08:49:37 GMT``, obsolete RFC 850 ``Sunday, 06-Nov-94 08:49:37 GMT`` and
    asctime ``Sun Nov  6 08:49:37 1994``, all read by :func:`email.utils.parsedate_to_datetime`).
    A date in the past gives 0.

    Parameters
    ----------
    response
        An httpx or requests response, or a headers mapping.
    now
        The wall clock (tz-aware) a date is measured from; default the current UTC time.
    """
    headers = getattr(response, "headers", response)
    value = headers.get("Retry-After") if headers is not None else None
    if value is None:
        return None
    value = value.strip()
    if re.fullmatch(r"\d+(?:\.\d+)?", value):
        return float(value)
    when = _http_date(value)
    if when is None:
        return None
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def _http_date(value: str) -> datetime | None:
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        when = None
    if when is None:
        return None
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


class DeadlineExceeded(Exception):
    """Raised inside :func:`run_bounded` when the caller's time is up (internal signal)."""


def run_bounded(work: Callable[[threading.Event], Any], seconds: float, name: str) -> Any:
    """Run ``work(cancel)`` in a worker thread and wait at most ``seconds`` for it.

    ``work`` must check ``cancel.is_set()`` between the chunks it reads and stop when it is; its
    exception is re-raised here.

    Raises
    ------
    DeadlineExceeded
        ``seconds`` passed first (``cancel`` is then set; the worker ends at its next check or
        its own read timeout).
    """
    box: dict[str, Any] = {}
    done = threading.Event()
    cancel = threading.Event()

    def target() -> None:
        try:
            box["value"] = work(cancel)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=target, name=name, daemon=True).start()
    if not done.wait(max(0.0, seconds)):
        cancel.set()
        raise DeadlineExceeded
    if "error" in box:
        raise box["error"]
    return box["value"]


@dataclass
class Fetcher:
    """An httpx client plus deadline, retries, cooldown, rate limit and a request counter.

    Attributes
    ----------
    provider
        The provider's name, for messages.
    client
        From :func:`make_client`.
    retry
        Retry policy for idempotent calls.
    limiter
        Optional client-side rate limit.
    sleep
        Injected sleep (tests pass a recorder).
    gate
        The provider's shared cooldown and run budget (one per provider; a private one if
        ``None``).
    call_deadline_s
        Total time of one call, retries and waits included. [s]
    clock
        Monotonic clock for deadlines and cooldowns. [s]
    wall_clock
        The current time, tz-aware, to read a ``Retry-After`` date against.
    rng
        Random source of the jitter (seed it in tests).
    requests
        HTTP requests sent so far (every attempt counts).
    retries
        Of ``requests``, attempts after the first of a call (a timeout, a transport error, a
        5xx or 429 retried).
    slept_s
        Every wait, in order (backoff, ``Retry-After``, cooldown). [s]
    """

    provider: str
    client: httpx.Client
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    limiter: RateLimiter | None = None
    sleep: Callable[[float], None] = time.sleep
    gate: ProviderGate | None = None
    call_deadline_s: float = DEFAULT_CALL_DEADLINE_S
    clock: Callable[[], float] = time.monotonic
    wall_clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    rng: random.Random = field(default_factory=random.Random)
    requests: int = 0
    retries: int = 0
    slept_s: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.gate is None:
            self.gate = ProviderGate(self.provider, clock=self.clock)

    def _wait(self, seconds: float) -> None:
        self.slept_s.append(seconds)
        self.sleep(seconds)

    def _unavailable(self, method: str, where: str, detail: str,
                     status: int | None = None) -> ProviderUnavailableError:
        return ProviderUnavailableError(self.provider, f"{method} {where}: {detail}", status)

    def _send(self, method: str, url: str, left: float, **kwargs: Any) -> httpx.Response:
        """One attempt, bounded by ``left`` seconds in all (headers and body)."""
        t = self.client.timeout
        timeout = httpx.Timeout(
            connect=_cap(t.connect, left), read=_cap(t.read, left), write=_cap(t.write, left),
            pool=_cap(t.pool, left))

        def work(cancel: threading.Event) -> httpx.Response:
            with self.client.stream(method, url, timeout=timeout, **kwargs) as r:
                if r.is_stream_consumed:  # an in-memory answer (a mock transport): complete
                    r.read()
                    return r
                raw = []
                for chunk in r.iter_raw(_CHUNK):
                    if cancel.is_set():
                        return r  # abandoned: the caller has given up
                    raw.append(chunk)
                return httpx.Response(r.status_code, headers=r.headers, content=b"".join(raw),
                                      request=r.request, extensions=r.extensions)

        return run_bounded(work, left, f"carbonsched-http-{self.provider}")

    def request(self, method: str, url: str, *, idempotent: bool = True,
                **kwargs: Any) -> httpx.Response:
        """Send one request with retries, within the call's deadline; return a 2xx response.

        Parameters
        ----------
        method, url
            HTTP method and URL (relative to the client's ``base_url``).
        idempotent
            Retry on timeouts, connection errors, 5xx and 429 (never for a non-idempotent call).
        **kwargs
            Passed to :meth:`httpx.Client.stream` (``params``, ``headers``, ``auth``, ...).

        Raises
        ------
        ProviderUnavailableError
            Timeout, connection error, 5xx or 429 after the last attempt; the call's deadline
            or the run's budget spent (the message says which, and how long it was); a
            ``Retry-After`` or a provider cooldown longer than the time left (no request sent
            during a cooldown).
        ProviderError
            Any other non-2xx status (``status`` set); the body's first 200 characters quoted.
        """
        assert self.gate is not None
        deadline = CallDeadline(self.call_deadline_s, self.gate, self.clock)
        attempts = self.retry.max_attempts if idempotent else 1
        where = redact_url(httpx.URL(str(self.client.base_url)).join(url))
        last = ""
        status: int | None = None
        held_until = -math.inf
        for attempt in range(1, attempts + 1):
            hold = self.gate.cooldown_left()
            if hold > 0:
                if hold >= deadline.left():
                    raise self._unavailable(
                        method, where, f"{self.provider} is on hold for another {hold:.0f} s "
                        f"({self.gate.cooldown_reason}), longer than the "
                        f"{max(0.0, deadline.left()):.0f} s left of {deadline.what()}: not "
                        "asked", 429 if "429" in self.gate.cooldown_reason else None)
                upto = self.gate.cooldown_until
                self._wait(hold)
                self.gate.served(upto)
            left = deadline.left()
            if left <= 0:
                raise self._unavailable(method, where, f"{deadline.what()} is spent"
                                        + (f" (last: {last})" if last else ""), status)
            if self.limiter is not None:
                self.limiter.acquire()
            self.requests += 1
            self.retries += attempt > 1
            wait: float | None = None
            try:
                response = self._send(method, url, left, **kwargs)
            except DeadlineExceeded:
                raise self._unavailable(
                    method, where, f"no complete answer within {deadline.what()} (the "
                    "server is too slow or drips its answer); attempt "
                    f"{attempt} of {attempts}") from None
            except httpx.TimeoutException as exc:
                last = (f"timed out ({type(exc).__name__}, timeout "
                        f"{self.client.timeout.read} s)")
                where = redact_url(exc.request.url) if exc.request else where
                status = None
            except httpx.TransportError as exc:
                last = f"unreachable ({type(exc).__name__}: {redact_text(str(exc))})"
                where = redact_url(exc.request.url) if exc.request else where
                status = None
            else:
                where = redact_url(response.request.url)
                status = response.status_code
                if status < 300:
                    return response
                body = redact_text(" ".join(response.text.split())[:200])
                if status in RETRY_AFTER_STATUSES:
                    wait = retry_after_s(response, self.wall_clock())
                    if wait is not None:
                        reason = f"HTTP {status} with Retry-After {wait:g} s"
                        self.gate.cool_down(wait, reason)
                        held_until = self.gate.cooldown_until
                        if wait > self.retry.max_retry_after_s or wait >= deadline.left():
                            cap = min(self.retry.max_retry_after_s, max(0.0, deadline.left()))
                            raise self._unavailable(
                                method, where, f"{reason}: {body}; longer than the {cap:.0f} s "
                                f"left of {deadline.what()}; {self.provider} is on hold until "
                                "then", status)
                    last = (f"HTTP {status}" + (" (rate limited)" if status == 429 else "")
                            + (f"; Retry-After {wait:g} s" if wait is not None else "")
                            + f": {body}")
                elif status >= 500:
                    last = f"HTTP {status}: {body}"
                else:
                    raise ProviderError(self.provider, f"{method} {where}: HTTP {status}: {body}",
                                        status)
            if attempt < attempts:
                base = wait if wait is not None else self.retry.backoff(attempt)
                pause = base * (1.0 + self.retry.jitter_fraction * self.rng.random())
                if pause >= deadline.left():
                    if wait is not None and base < deadline.left():
                        pause = base  # the jitter must not break a deadline the wait fits
                    else:
                        raise self._unavailable(
                            method, where, f"{last}; no time for try {attempt + 1} within "
                            f"{deadline.what()}", status)
                self._wait(pause)
                if wait is not None:
                    self.gate.served(held_until)
        raise self._unavailable(method, where, f"{last} after {attempts} attempt(s)",
                                status if status in (429, 503) or (status or 0) >= 500
                                else None)

    def get_json(self, url: str, **kwargs: Any) -> Any:
        """``GET`` with retries and deadline, parsed as JSON.

        Raises
        ------
        ProviderError
            The body is not JSON (quoted).
        """
        response = self.request("GET", url, **kwargs)
        try:
            return response.json()
        except ValueError as exc:
            raise ProviderError(
                self.provider, f"GET {redact_url(response.request.url)}: the answer is not JSON "
                f"({exc}): {redact_text(' '.join(response.text.split())[:200])}") from exc

    def close(self) -> None:
        """Close the client."""
        self.client.close()


def _cap(value: float | None, left: float) -> float:
    """``value`` capped at ``left`` (``None``, no timeout, becomes ``left``). [s]"""
    left = max(left, 0.001)
    return left if value is None else min(value, left)
