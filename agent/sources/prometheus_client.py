"""The HTTP side of reading Prometheus: the configured client (``connect``: CA file, timeout, retries with
back-off that end at the read deadline), the bearer token read before each request, durations as Prometheus parses
them, and ``call``, which turns every way a request can fail into ``MetricsUnavailable`` (or
``PrometheusServerFailure`` when the server rather than the query failed) saying why. The vendor exception types of
prometheus-api-client and requests stay in this module (and in ``agent.sources.prometheus_answer``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import requests
from prometheus_api_client import PrometheusConnect
from prometheus_api_client.exceptions import PrometheusApiClientException
from urllib3.connectionpool import ConnectionPool
from urllib3.exceptions import MaxRetryError, ResponseError
from urllib3.response import BaseHTTPResponse
from urllib3.util.retry import Retry

from agent.sources.base import read_time_left
from config.prometheus import PrometheusSettings
from models import MetricsUnavailable
from models.errors import PrometheusServerFailure

_STATUS = re.compile(r"HTTP Status Code (\d{3})")
_ERRNO = re.compile(r"\[Errno -?\d+\][^'\")]*")
RETRY_ON_STATUS = (429, 502, 503, 504, 500)


class _DeadlineRetry(Retry):
    """Retries that end once the read deadline (``agent.sources.base.read_deadline``) has passed, and whose waits
    (a server's ``Retry-After``, the back-off) stay within it: a wait that would reach the deadline ends the
    retries at once, with the answer in hand. urllib3 sleeps the whole ``Retry-After`` otherwise: a query-frontend
    asking for 20 s held a 3 s read for 20 s."""

    def is_exhausted(self) -> bool:
        left = read_time_left()
        return super().is_exhausted() or (left is not None and left[0] <= 0)

    def increment(
        self,
        method: str | None = None,
        url: str | None = None,
        response: BaseHTTPResponse | None = None,
        error: Exception | None = None,
        _pool: ConnectionPool | None = None,
        _stacktrace: TracebackType | None = None,
    ) -> Self:
        retry = super().increment(method, url, response, error, _pool, _stacktrace)
        left = read_time_left()
        if left is not None and retry._wait_s(response) >= left[0]:
            reason = error or ResponseError("the wait before the next try would outlast the time left for reading")
            raise MaxRetryError(_pool, url or "", reason) from reason  # type: ignore[arg-type]
        return retry

    def get_retry_after(self, response: BaseHTTPResponse) -> float | None:
        after = super().get_retry_after(response)
        return None if after is None else _within_deadline(after)

    def get_backoff_time(self) -> float:
        return _within_deadline(super().get_backoff_time())

    def _wait_s(self, response: BaseHTTPResponse | None) -> float:
        """How long urllib3 would wait before the next try: the server's ``Retry-After``, else the back-off."""
        if self.respect_retry_after_header and response is not None:
            after = Retry.get_retry_after(self, response)
            if after:
                return after
        return Retry.get_backoff_time(self)


def _within_deadline(wait_s: float) -> float:
    """``wait_s`` cut to the time left of the read deadline, if there is one."""
    left = read_time_left()
    return wait_s if left is None else max(0.0, min(wait_s, left[0]))


def connect(settings: PrometheusSettings, retries: int | None = None) -> PrometheusConnect:
    """A client for the configured server: CA file, timeout and a bounded number of retries with back-off
    (``retries`` overrides the configured number, e.g. 0 for a single reachability probe).

    The bearer token is not read here but before every request (``bearer_headers``), so a rotated (projected
    service-account) token is picked up without a restart.
    """
    session = requests.Session()
    if settings.ca_file:
        session.verify = settings.ca_file
    attempts = settings.retries if retries is None else retries
    retry = _DeadlineRetry(
        total=attempts,
        connect=attempts,
        read=attempts,
        status=attempts,
        backoff_factor=settings.retry_backoff_s,
        status_forcelist=RETRY_ON_STATUS,
        allowed_methods=frozenset({"GET", "POST"}),
        raise_on_status=False,
    )
    return PrometheusConnect(
        url=settings.url.rstrip("/"),
        session=session,
        retry=retry,
        timeout=settings.timeout.total_seconds(),
    )


def prometheus_duration(duration: timedelta) -> str:
    """A duration as Prometheus parses it: whole milliseconds. Prometheus 2.42 answers 400 bad_data to a
    fractional or exponent form such as ``2.5s`` or ``1e+06s`` (its duration syntax takes integers per unit)."""
    return f"{max(1, round(duration.total_seconds() * 1000))}ms"


def bearer_headers(token_file: str | None, name: str, query: str) -> dict[str, str] | None:
    """The ``Authorization`` header from ``token_file``, read at each request so that a rotated (projected
    service-account) token is picked up without a restart; None without a token file."""
    if not token_file:
        return None
    try:
        token = Path(token_file).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise MetricsUnavailable(name, f"cannot read the bearer token file: {exc}", query) from None
    if not token:
        raise MetricsUnavailable(name, f"the bearer token file {token_file} is empty", query)
    return {"Authorization": f"Bearer {token}"}


def call(name: str, query: str, request: Callable[[], Any]) -> Any:
    """Runs one request; every way it can fail becomes ``MetricsUnavailable`` saying why."""
    try:
        data = request()
    except PrometheusApiClientException as exc:
        message = str(exc)
        code = _status(message)
        failure = PrometheusServerFailure if code >= 500 or code == 429 else MetricsUnavailable
        raise failure(name, _http_reason(message), query) from None
    except requests.exceptions.SSLError as exc:
        raise MetricsUnavailable(name, f"TLS verification failed (check ca_file): {exc}", query) from None
    except requests.exceptions.Timeout:
        raise PrometheusServerFailure(name, "Prometheus did not answer in time (timeout)", query) from None
    except requests.exceptions.RetryError as exc:
        reason = f"Prometheus kept failing after the configured retries: {exc}"
        raise PrometheusServerFailure(name, reason, query) from None
    except requests.exceptions.ConnectionError as exc:
        reason = f"cannot connect to Prometheus: {_connection_reason(exc)}"
        raise PrometheusServerFailure(name, reason, query) from None
    except (requests.exceptions.RequestException, ValueError, KeyError, TypeError) as exc:
        raise MetricsUnavailable(name, f"malformed answer from Prometheus: {exc}", query) from None
    if not isinstance(data, list | dict):
        raise MetricsUnavailable(name, f"malformed answer from Prometheus: expected JSON, got {data!r:.80}", query)
    return data


def _status(message: str) -> int:
    match = _STATUS.search(message)
    return int(match.group(1)) if match else 0


def _http_reason(message: str) -> str:
    code = _status(message)
    if code in (401, 403):
        return f"Prometheus refused the credentials (HTTP {code}); check bearer_token_file"
    if code == 400 and "maximum resolution" in message:
        return f"Prometheus refused the range as too many points per series (HTTP 400): {message[:200]}"
    if code in {400, 422}:
        return f"Prometheus could not run the query (HTTP {code}): {message[:300]}"
    if code >= 500:
        return f"Prometheus answered with a server error (HTTP {code}) after the configured retries"
    return f"Prometheus answered HTTP {code or '?'}: {message[:300]}"


def _connection_reason(exc: Exception) -> str:
    """The operating system's reason (e.g. ``[Errno 111] Connection refused``) rather than urllib3's wrapping."""
    match = _ERRNO.search(str(exc))
    return match.group(0).rstrip("'\")") if match else str(exc)
