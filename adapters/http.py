"""One HTTP client factory for every signal provider (STYLE practice 10, after httpx).

:func:`make_client` builds an :class:`httpx.Client` with explicit timeouts and an injectable
transport (tests pass a transport or point ``base_url`` at a loopback replay server);
:class:`Fetcher` wraps it with what every provider call needs:

* **bounded retries with exponential backoff** for idempotent calls only (every provider read is
  a ``GET``; a login ``POST``/``GET`` with credentials is tried once);
* **429 ``Retry-After`` honoured** (seconds or an HTTP date, RFC 9110 §10.2.3), capped by
  :attr:`RetryPolicy.max_retry_after_s` so a provider cannot stall a daily run for hours;
* **a client-side rate limit** (:class:`RateLimiter`, a sliding window; WattTime's documented
  limit is 3,000 requests per 5 minutes);
* **a request counter** (:attr:`Fetcher.requests`) so tests and ``signals check`` can prove that
  a second run makes no provider request;
* **no credentials in messages**: :func:`redact_url` drops ``api_key``, ``token``, ``securityToken``
  and ``password`` query values from every URL an error names.

Errors: a timeout, a refused connection, 5xx or 429 after the last attempt raise
:class:`~carbonsched.errors.ProviderUnavailableError`; any other 4xx raises
:class:`~carbonsched.errors.ProviderError` with its ``status`` (providers map 401/403 to
:class:`~carbonsched.errors.ProviderConfigError` where that is what it means).
"""

from __future__ import annotations

import collections
import email.utils
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx

from carbonsched.errors import ProviderError, ProviderUnavailableError

DEFAULT_TIMEOUT_S = 20.0
"""Read/write/pool timeout of a provider request. [s]"""

DEFAULT_CONNECT_TIMEOUT_S = 5.0
"""Connect timeout of a provider request. [s]"""

SECRET_PARAMS = frozenset({"api_key", "token", "securitytoken", "password", "auth-token"})
"""Query parameters whose values never appear in a message (compared case-insensitively)."""

USER_AGENT = "carbonsched (+https://github.com/carbonsched)"


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

    Parameters
    ----------
    base_url
        Provider root, e.g. ``https://api.electricitymap.org``; a loopback replay server in tests.
    headers
        Extra default headers (an auth token header, for example).
    timeout_s
        Read, write and pool timeout. [s]
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
    timeout = httpx.Timeout(timeout_s, connect=connect_timeout_s)
    hdrs = {"User-Agent": USER_AGENT, **dict(headers or {})}
    return httpx.Client(base_url=base_url, headers=hdrs, timeout=timeout, transport=transport,
                        auth=auth, follow_redirects=True)


def redact_url(url: str | httpx.URL) -> str:
    """``url`` with the values of :data:`SECRET_PARAMS` replaced by ``***``."""
    u = httpx.URL(str(url))
    params = [(k, "***" if k.lower() in SECRET_PARAMS else v) for k, v in u.params.multi_items()]
    return str(u.copy_with(params=params)) if params else str(u)


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
        Longest ``Retry-After`` honoured; a longer one fails the call at once. [s]
    """

    max_attempts: int = 3
    backoff_s: float = 0.5
    max_backoff_s: float = 30.0
    max_retry_after_s: float = 120.0

    def backoff(self, attempt: int) -> float:
        """Wait before try ``attempt + 1`` (``attempt`` is 1-based). [s]"""
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


def retry_after_s(response: httpx.Response, now: datetime | None = None) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait (delta-seconds or HTTP date), or ``None``."""
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


@dataclass
class Fetcher:
    """An httpx client plus retries, rate limit and a request counter, for one provider.

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
    requests
        HTTP requests sent so far (every attempt counts).
    """

    provider: str
    client: httpx.Client
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    limiter: RateLimiter | None = None
    sleep: Callable[[float], None] = time.sleep
    requests: int = 0
    slept_s: list[float] = field(default_factory=list)

    def request(self, method: str, url: str, *, idempotent: bool = True,
                **kwargs: Any) -> httpx.Response:
        """Send one request with retries; return a 2xx response.

        Parameters
        ----------
        method, url
            HTTP method and URL (relative to the client's ``base_url``).
        idempotent
            Retry on timeouts, connection errors, 5xx and 429 (never for a non-idempotent call).
        **kwargs
            Passed to :meth:`httpx.Client.request` (``params``, ``headers``, ...).

        Raises
        ------
        ProviderUnavailableError
            Timeout, connection error, 5xx or 429 after the last attempt, or a ``Retry-After``
            longer than the policy accepts.
        ProviderError
            Any other non-2xx status (``status`` set); the body's first 200 characters quoted.
        """
        attempts = self.retry.max_attempts if idempotent else 1
        last = ""
        for attempt in range(1, attempts + 1):
            if self.limiter is not None:
                self.limiter.acquire()
            self.requests += 1
            wait: float | None = None
            try:
                response = self.client.request(method, url, **kwargs)
            except httpx.TimeoutException as exc:
                last = (f"timed out ({type(exc).__name__}, timeout "
                        f"{self.client.timeout.read} s)")
                where = redact_url(exc.request.url) if exc.request else url
            except httpx.TransportError as exc:
                last = f"unreachable ({type(exc).__name__}: {exc})"
                where = redact_url(exc.request.url) if exc.request else url
            else:
                where = redact_url(response.request.url)
                status = response.status_code
                if status < 300:
                    return response
                body = " ".join(response.text.split())[:200]
                if status == 429:
                    wait = retry_after_s(response)
                    last = f"HTTP 429 (rate limited; Retry-After {wait} s): {body}"
                    if wait is not None and wait > self.retry.max_retry_after_s:
                        raise ProviderUnavailableError(
                            self.provider, f"GET {where}: {last}; longer than the "
                            f"{self.retry.max_retry_after_s} s this client waits", status)
                elif status >= 500:
                    last = f"HTTP {status}: {body}"
                else:
                    raise ProviderError(self.provider, f"{method} {where}: HTTP {status}: {body}",
                                        status)
            if attempt < attempts:
                pause = wait if wait is not None else self.retry.backoff(attempt)
                self.slept_s.append(pause)
                self.sleep(pause)
        raise ProviderUnavailableError(
            self.provider, f"{method} {where}: {last} after {attempts} attempt(s)",
            429 if last.startswith("HTTP 429") else None)

    def get_json(self, url: str, **kwargs: Any) -> Any:
        """``GET`` with retries, parsed as JSON.

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
                f"({exc}): {' '.join(response.text.split())[:200]}") from exc

    def close(self) -> None:
        """Close the client."""
        self.client.close()
