"""The HTTP side of reading Prometheus: the configured client (``connect``: CA file, timeout, retries with
back-off that end at the read deadline, each answer read within it however slowly it comes), each request's timeout
(``request_timeout``: inside a read deadline, every try's is cut to the time left), the bearer token read before
each request, durations as Prometheus parses them, and ``call``, which turns every way a request can fail into
``MetricsUnavailable`` (or ``PrometheusServerFailure`` when the server rather than the query failed) saying why. The
vendor exception types of prometheus-api-client and requests stay in this module (and in
``agent.sources.prometheus_answer``).
"""

from __future__ import annotations

import http.client
import io
import json
import math
import re
import socket
import time
from collections.abc import Callable
from contextvars import ContextVar
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, NamedTuple, Self
from urllib.parse import unquote

import requests
from prometheus_api_client import PrometheusConnect
from prometheus_api_client.exceptions import PrometheusApiClientException
from requests.adapters import DEFAULT_POOLBLOCK, HTTPAdapter
from urllib3 import PoolManager, ProxyManager
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import ConnectionPool, HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import (
    ConnectTimeoutError,
    MaxRetryError,
    NewConnectionError,
    ReadTimeoutError,
    ResponseError,
)
from urllib3.response import BaseHTTPResponse
from urllib3.util.retry import Retry
from urllib3.util.timeout import Timeout

from agent.sources.base import READ_DEADLINE_SETTING, read_deadline_setting, read_time_left
from config.prometheus import PrometheusSettings
from models import MetricsUnavailable
from models.errors import AnswerCutOff, NotPrometheusJson, PrometheusServerFailure

_STATUS = re.compile(r"HTTP Status Code (\d{3})")
_ERRNO = re.compile(r"\[Errno -?\d+\][^'\")]*")
RETRY_ON_STATUS = (429, 502, 503, 504, 500)
# The client waits this much longer than the timeout it sends Prometheus, so that a query Prometheus gives up on is
# answered with Prometheus' reason (503 errorType timeout) rather than cut by the client first.
READ_TIMEOUT_MARGIN_S = 0.5
# Inside a read deadline: no retry is started with less time left than this (too short for an answer), and no try
# waits less than the shortest timeout.
MIN_TRY_S = 0.1
MIN_TIMEOUT_S = 0.01
_READ_TIMEOUT = re.compile(r"read timeout=([0-9.]+)")
_CONNECT_TIMEOUT = re.compile(r"connect timeout=([0-9.]+)")
_TIMEOUT_PARAM = re.compile(r"(?<=[?&])timeout=([^&#]*)")
_UNIT_S = {"y": 365 * 86400.0, "w": 7 * 86400.0, "d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
_DURATION = re.compile(r"(\d+y)?(\d+w)?(\d+d)?(\d+h)?(\d+m)?(\d+s)?(\d+ms)?")
# The query's timeout (milliseconds) the last try of the request made in this context sent Prometheus when the read
# deadline cut it, else None (``query_timeout_within_deadline``): Prometheus' timeout answer to it is the deadline's.
_TIMEOUT_CUT_TO: ContextVar[int | None] = ContextVar("prometheus_timeout_cut_to", default=None)


class _Tries(NamedTuple):
    """What the tries of the request made in this context met inside a read deadline. ``unanswered`` and
    ``unconnected``: the tries before the last that waited their whole timeout (prometheus.timeout and the margin)
    with the deadline still ahead (``_DeadlineRetry.increment``), for an answer or for a connection, each with the
    longest such timeout (seconds, None if not known): prometheus.timeout or the network, not the deadline, failed
    them. ``received``: the bytes of an answer all tries read (``_DeadlineReads``); none means Prometheus answered
    no try."""

    unanswered: int = 0
    unanswered_s: float | None = None
    unconnected: int = 0
    unconnected_s: float | None = None
    received: int = 0


_TRIES: ContextVar[_Tries | None] = ContextVar("prometheus_tries", default=None)
_URL = re.compile(r"https?://\S+|/api/v1/[^\s'\")]+")


class _DeadlineRetry(Retry):
    """Retries that end once less than ``MIN_TRY_S`` is left before the read deadline
    (``agent.sources.base.read_deadline``), and whose waits (a server's ``Retry-After``, the back-off) stay within
    it: a wait that would leave less than that ends the retries at once, with the answer in hand. urllib3 sleeps the
    whole ``Retry-After`` otherwise: a query-frontend asking for 20 s held a 3 s read for 20 s. Each retry's timeout
    is cut to the time left by ``DeadlineTimeout``."""

    def is_exhausted(self) -> bool:
        left = read_time_left()
        return super().is_exhausted() or (left is not None and left[0] < MIN_TRY_S)

    def increment(
        self,
        method: str | None = None,
        url: str | None = None,
        response: BaseHTTPResponse | None = None,
        error: Exception | None = None,
        _pool: ConnectionPool | None = None,
        _stacktrace: TracebackType | None = None,
    ) -> Self:
        tries = len(self.history) + 1
        timed_out = _timed_out_answer(response) if response is not None and response.status == 503 else None
        if timed_out is not None and not _queued_out(timed_out):
            raise GaveUp(_pool, url, ResponseError("Prometheus' own query timeout"), tries)
        try:
            retry = super().increment(method, url, response, error, _pool, _stacktrace)
        except MaxRetryError as exc:
            raise GaveUp(_pool, url, exc.reason, tries) from exc.reason
        left = read_time_left()
        if left is not None and retry._wait_s(response) > left[0] - MIN_TRY_S:
            reason = error or ResponseError("the wait before the next try would outlast the time left for reading")
            raise GaveUp(_pool, url, reason, tries) from reason
        if left is not None:  # at least MIN_TRY_S is left here, or the wait check above gave up
            _waited_whole_timeout(error)
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


def _waited_whole_timeout(error: Exception | None) -> None:
    """Count a try that timed out, reading or connecting, with the read deadline still ahead, another try to follow:
    it waited its whole timeout (the deadline cuts a try's to the time left, and one cut so times out at the
    deadline, with no time for another), so a longer deadline would not have read it. A refused or unresolved
    connection (``NewConnectionError``, a ``ConnectTimeoutError`` to urllib3) waited nothing."""
    tries = _TRIES.get() or _Tries()
    if isinstance(error, ReadTimeoutError):
        waited = _longest(_READ_TIMEOUT.search(str(error)), tries.unanswered_s)
        _TRIES.set(tries._replace(unanswered=tries.unanswered + 1, unanswered_s=waited))
    elif isinstance(error, ConnectTimeoutError) and not isinstance(error, NewConnectionError):
        waited = _longest(_CONNECT_TIMEOUT.search(str(error)), tries.unconnected_s)
        _TRIES.set(tries._replace(unconnected=tries.unconnected + 1, unconnected_s=waited))


def _longest(timeout: re.Match[str] | None, before: float | None) -> float | None:
    """The longer of a try's timeout (found in its error, if there) and the longest before it (None if none)."""
    waited = float(timeout.group(1)) if timeout else None
    return max((w for w in (waited, before) if w is not None), default=None)


class DeadlineTimeout(Timeout):
    """The connect and read timeout of each try of a request made inside a read deadline: the request's own
    (``timeout``, None for none), cut to the time left before the deadline (``by``, monotonic) when the try connects
    and again when it waits for the answer; at least ``MIN_TIMEOUT_S``. urllib3 hands one timeout to the first try
    and every retry (``Timeout.clone``): a number cut to the time left when the request was first sent let each retry
    wait all of it past the deadline (a hanging server held a 2 s read 3 s with a 1.5 s timeout)."""

    def __init__(self, timeout: float | None, by: float) -> None:
        super().__init__(connect=timeout, read=timeout)
        self._timeout, self._by = timeout, by

    def __repr__(self) -> str:
        return f"{type(self).__name__}(timeout={self._timeout!r}, left={self._left():.3f})"

    def clone(self) -> DeadlineTimeout:
        return DeadlineTimeout(self._timeout, self._by)

    @property
    def connect_timeout(self) -> float:
        return self._left()

    @property
    def read_timeout(self) -> float:
        return self._left()

    def _left(self) -> float:
        left = self._by - time.monotonic()
        return max(MIN_TIMEOUT_S, left if self._timeout is None else min(self._timeout, left))


def request_timeout(timeout: float | None) -> float | DeadlineTimeout | None:
    """The timeout to send a request with: ``timeout`` (seconds, None for none) outside a read deadline; inside one,
    a ``DeadlineTimeout`` that cuts each try's to the time left."""
    left = read_time_left()
    return timeout if left is None else DeadlineTimeout(timeout, time.monotonic() + left[0])


class _DeadlineReads(io.RawIOBase):
    """The socket reads of one answer made inside a read deadline (``by``, monotonic): each waits at most the try's
    read timeout (``per_read``, None for none) and the time left, and none starts once the deadline has passed. The
    read timeout alone bounds each socket read, not the answer: a server sending a byte every quarter of a second,
    each read well within the timeout, held a read with a 2 s deadline 17 s, as long as it kept sending."""

    def __init__(self, raw: io.RawIOBase, sock: socket.socket, by: float, per_read: float | None) -> None:
        super().__init__()
        self._raw, self._sock, self._by, self._per_read = raw, sock, by, per_read
        self.answering = False
        self.received = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        left = self._by - time.monotonic()
        if left <= 0:
            raise AnswerCutOff(self.answering, self.received)
        self._sock.settimeout(left if self._per_read is None else min(self._per_read, left))
        try:
            count = self._raw.readinto(buffer)
        except TimeoutError:
            if self._by - time.monotonic() <= 0:
                raise AnswerCutOff(self.answering, self.received) from None
            raise
        if count:
            self.received += count
            tries = _TRIES.get() or _Tries()
            _TRIES.set(tries._replace(received=tries.received + count))
        return count

    def close(self) -> None:
        self._raw.close()
        super().close()


class _DeadlineResponse(http.client.HTTPResponse):
    """An answer read inside a read deadline ends by the deadline (``_DeadlineReads``), its status line, headers and
    body alike; outside one it is read as http.client reads it."""

    def __init__(
        self, sock: socket.socket, debuglevel: int = 0, method: str | None = None, url: str | None = None
    ) -> None:
        super().__init__(sock, debuglevel, method, url)
        left = read_time_left()
        self._reads: _DeadlineReads | None = None
        if left is not None:
            raw = self.fp.detach()  # the socket's reader, nothing buffered yet
            self._reads = _DeadlineReads(raw, sock, time.monotonic() + left[0], sock.gettimeout())
            self.fp = io.BufferedReader(self._reads)

    def begin(self) -> None:
        super().begin()
        if self._reads is not None:
            self._reads.answering = True


class _HTTPConnection(HTTPConnection):
    response_class = _DeadlineResponse


class _HTTPSConnection(HTTPSConnection):
    response_class = _DeadlineResponse


class _HTTPPool(HTTPConnectionPool):
    ConnectionCls = _HTTPConnection

    def urlopen(self, method: str, url: str, *args: Any, **kwargs: Any) -> BaseHTTPResponse:
        return super().urlopen(method, query_timeout_within_deadline(url), *args, **kwargs)


class _HTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection

    def urlopen(self, method: str, url: str, *args: Any, **kwargs: Any) -> BaseHTTPResponse:
        return super().urlopen(method, query_timeout_within_deadline(url), *args, **kwargs)


def query_timeout_within_deadline(url: str) -> str:
    """``url`` with the query's timeout it sends Prometheus (its ``timeout`` parameter) cut to the time left before
    the read deadline when less is left, in whole milliseconds rounded down (``prometheus_duration``'s form), at
    least 1ms. urllib3 sends each try, the first and every retry, through here, so each is cut to the time left when
    it is sent: sent whole, Prometheus evaluated a query the client had given up on for the rest of its timeout
    (5000ms sent with 1.5 s left, and again to each retry)."""
    _TIMEOUT_CUT_TO.set(None)
    left = read_time_left()
    match = _TIMEOUT_PARAM.search(url) if left is not None else None
    asked = _duration_s(unquote(match.group(1))) if match is not None else None
    if left is None or match is None or asked is None:
        return url
    left_ms = max(1, math.floor(left[0] * 1000))
    if left_ms >= asked * 1000:
        return url
    _TIMEOUT_CUT_TO.set(left_ms)
    return f"{url[: match.start(1)]}{left_ms}ms{url[match.end(1) :]}"


def _duration_s(text: str) -> float | None:
    """Seconds of a duration as Prometheus parses its ``timeout`` parameter (a number of seconds, or units such as
    ``1m30s`` or ``2500ms``); None for another text, which is sent as it is."""
    try:
        return float(text)
    except ValueError:
        pass
    match = _DURATION.fullmatch(text)
    if match is None or not text:
        return None
    return sum(int(count) * _UNIT_S[unit] for count, unit in re.findall(r"(\d+)(ms|[ywdhms])", text))


class _DeadlineAdapter(HTTPAdapter):
    """requests' adapter whose connections read each answer within the read deadline (``_DeadlineResponse``), also
    through an HTTP proxy (a SOCKS proxy's connections are its own)."""

    _POOLS: ClassVar[dict[str, type[HTTPConnectionPool]]] = {"http": _HTTPPool, "https": _HTTPSPool}

    def init_poolmanager(
        self, connections: int, maxsize: int, block: bool = DEFAULT_POOLBLOCK, **pool_kwargs: Any
    ) -> None:
        super().init_poolmanager(connections, maxsize, block, **pool_kwargs)
        self._bound(self.poolmanager)

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        return self._bound(super().proxy_manager_for(proxy, **proxy_kwargs))

    def _bound(self, manager: PoolManager) -> PoolManager:
        if type(manager) in (PoolManager, ProxyManager):
            manager.pool_classes_by_scheme = dict(self._POOLS)
        return manager


class GaveUp(MaxRetryError):
    """urllib3's ``MaxRetryError`` with the number of tries made (requests wraps it in its ``ConnectionError``)."""

    def __init__(self, pool: ConnectionPool | None, url: str | None, reason: Exception | None, tries: int) -> None:
        super().__init__(pool, url or "", reason)  # type: ignore[arg-type]
        self.tries = tries


class PrometheusErrorAnswer(PrometheusApiClientException):
    """An answer other than 200, with its body (Prometheus' ``errorType`` and ``error``), the tries made and the
    ``Retry-After`` it carried."""

    def __init__(self, code: int, body: bytes, tries: int, retry_after: str | None) -> None:
        super().__init__(f"HTTP Status Code {code} ({body[:300]!r})")
        self.code, self.body, self.tries, self.retry_after = code, body, tries, retry_after


def error_of(body: bytes) -> tuple[str, str] | None:
    """``errorType`` and ``error`` of a Prometheus error answer (Prometheus HTTP API, "Format overview"); None
    for a body that is not one (a proxy's page)."""
    try:
        answer = json.loads(body)
    except ValueError:
        return None
    if not isinstance(answer, dict):
        return None
    error_type, error = answer.get("errorType"), answer.get("error")
    return (str(error_type or "unknown"), str(error or "")) if error_type or error else None


def _timed_out_answer(response: BaseHTTPResponse) -> tuple[str, str] | None:
    """A 503's ``errorType`` and ``error`` when it is Prometheus' own query timeout (``errorType: timeout``,
    web/api/v1/api.go), else None. The body is read here, decoded (Prometheus gzips it), and kept on the response
    (``data``) for the caller."""
    error = error_of(response.read(decode_content=True, cache_content=True) or b"")
    return error if error is not None and error[0] == "timeout" else None


def _queued_out(error: tuple[str, str]) -> bool:
    """Whether a timeout answer is the query's wait for a free slot rather than its evaluation: Prometheus runs at
    most --query.max-concurrency queries at once (default 20) and answers one that waited its whole timeout in the
    queue "query timed out in query queue" (promql/engine.go, ``contextErr(err, "query queue")``). The server was
    busy, so the query is retried; one that timed out evaluating would time out again, so it is not."""
    return error[0] == "timeout" and "query queue" in error[1]


def _deadline_while_selecting(error: tuple[str, str]) -> bool:
    """Whether an error answer is the query's timeout reached while Prometheus selected its series: 422
    ``errorType: execution``, "expanding series: context deadline exceeded" (promql/engine.go wraps the storage's
    error in "expanding series"; web/api/v1/api.go answers an error it does not classify as ``execution``, 422).
    The same query times out the same way again, as one that ran out of time evaluating."""
    return error[0] == "execution" and "context deadline exceeded" in error[1]


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
    client = PrometheusConnect(
        url=settings.url.rstrip("/"),
        session=session,
        retry=retry,
        timeout=settings.timeout.total_seconds() + READ_TIMEOUT_MARGIN_S,
    )
    # in place of the adapter the client mounted, with the same retries: each answer is read within the read deadline
    session.mount(client.url, _DeadlineAdapter(max_retries=retry))
    return client


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
    """Runs one request; every way it can fail becomes ``MetricsUnavailable`` saying why (never with the request's
    URL, which holds the whole query)."""
    _TIMEOUT_CUT_TO.set(None)
    _TRIES.set(_Tries())
    try:
        data = request()
    except PrometheusErrorAnswer as exc:
        failure = PrometheusServerFailure if exc.code >= 500 or exc.code == 429 else MetricsUnavailable
        raise failure(name, _answer_reason(exc), query) from None
    except NotPrometheusJson as exc:
        raise MetricsUnavailable(name, _not_json_reason(exc), query) from None
    except PrometheusApiClientException as exc:
        message = str(exc)
        code = _status(message)
        failure = PrometheusServerFailure if code >= 500 or code == 429 else MetricsUnavailable
        raise failure(name, _http_reason(message), query) from None
    except requests.exceptions.SSLError as exc:
        reason = f"TLS verification failed (check ca_file): {_without_url(str(exc))}"
        raise MetricsUnavailable(name, reason, query) from None
    except (requests.exceptions.Timeout, requests.exceptions.ConnectionError) as exc:
        raise PrometheusServerFailure(name, _unanswered_reason(exc), query) from None
    except (requests.exceptions.RequestException, ValueError, KeyError, TypeError) as exc:
        reason = f"malformed answer from Prometheus: {_without_url(str(exc))}"
        raise MetricsUnavailable(name, reason, query) from None
    if not isinstance(data, list | dict):
        raise MetricsUnavailable(name, f"malformed answer from Prometheus: expected JSON, got {data!r:.80}", query)
    return data


def _unanswered_reason(exc: requests.exceptions.RequestException) -> str:
    """Why no answer came: no connection, or none within the read timeout, with the tries made. A timeout once the
    read deadline has passed is the deadline's: it cut the try's timeout to the time left (or ended an answer still
    coming in), and the reason says so, with the deadline and the setting to raise (``_deadline_advice``)."""
    gave_up = next((arg for arg in exc.args if isinstance(arg, MaxRetryError)), None)
    cause: object = gave_up.reason if gave_up is not None else (exc.args[0] if exc.args else exc)
    tries = gave_up.tries if isinstance(gave_up, GaveUp) else 1
    tried = f", tried {tries} times" if tries > 1 else ""
    deadline = _passed_deadline_s()
    cut = _cut_off(exc)
    if cut is not None and cut.received and deadline is not None:
        coming = "its body was" if cut.answering else "its status line and headers were"
        return (
            f"Prometheus' answer did not arrive in time: it had begun ({cut.received} bytes read) but {coming} still "
            f"coming in when the read deadline ({deadline:g} s) ended the read; {_deadline_advice()}"
        )
    if isinstance(cause, ReadTimeoutError) or isinstance(exc, requests.exceptions.ReadTimeout):
        timeout = _READ_TIMEOUT.search(str(cause))
        within = f"within {round(float(timeout.group(1)), 1):g} s" if timeout else "in time"
        if deadline is not None:
            sent = "the last try" if tries > 1 else "it"
            return (
                f"the read deadline ({deadline:g} s) ended the read: Prometheus did not answer {within} (read "
                f"timeout{tried}), the time left when {sent} was sent; {_deadline_advice(tries, connected=True)}"
            )
        return f"Prometheus did not answer {within} (read timeout{tried})"
    if isinstance(cause, NewConnectionError):  # a ConnectTimeoutError to urllib3, but refused or unresolved
        return f"cannot connect to Prometheus: {_connection_reason(cause)}"
    if isinstance(cause, ConnectTimeoutError) or isinstance(exc, requests.exceptions.ConnectTimeout):
        if deadline is not None:
            return (
                f"the read deadline ({deadline:g} s) ended the read: no connection to Prometheus within the time "
                f"left{tried}; {_deadline_advice(tries, connected=False)}"
            )
        return f"cannot connect to Prometheus: no connection within the timeout{tried}"
    if isinstance(cause, ResponseError):
        return f"Prometheus kept failing after the configured retries: {cause}"
    return f"cannot connect to Prometheus: {_connection_reason(cause if isinstance(cause, Exception) else exc)}"


def _deadline_advice(tries: int = 1, connected: bool = True) -> str:
    """What a person does when the read deadline ended a read of ``tries`` tries, the last of which had
    (``connected``) or had not a connection: raise the setting the deadline comes from (``read_deadline_setting``:
    loop.read_deadline for a tick's reads, loop.tick_interval for a read within a share of the tick), not
    prometheus.timeout; but prometheus.timeout when an earlier try waited all of it with the deadline still ahead, as
    each try of a server slower than it does (a longer deadline only makes room for more tries that time out).

    Unless Prometheus sent a byte of an answer to some try, neither setting is sure to help: a server that never
    answers fails every try however long each waits, so the reason says first that Prometheus answered none, and
    what to check. When no try connected, and some waited their whole timeout for a connection with the deadline
    still ahead, Prometheus is unreachable (its packets dropped), and no setting helps."""
    met = _TRIES.get() or _Tries()
    setting = read_deadline_setting() or READ_DEADLINE_SETTING
    if met.received:
        whole = _waited_whole_text(met.unanswered, met.unanswered_s, "waited")
        return f"{whole}: raise prometheus.timeout" if met.unanswered else f"raise {setting}, not prometheus.timeout"
    if connected or met.unanswered:
        whole = _waited_whole_text(met.unanswered, met.unanswered_s, "waited", margin=False)
        slow = f"raise prometheus.timeout: {whole}" if met.unanswered else f"raise {setting}"
        none = (
            "Prometheus sent no byte of an answer" if tries == 1 else f"Prometheus answered none of the {tries} tries"
        )
        return (
            f"{none}: it may be hung or overloaded (check its /-/ready and its query log); if it is only slow, {slow}"
        )
    if met.unconnected:
        unconnected = _waited_whole_text(met.unconnected, met.unconnected_s, "found no connection within", margin=False)
        return (
            f"{unconnected}: Prometheus is unreachable from the agent (check the address, NetworkPolicies); a longer "
            "deadline will not help"
        )
    return f"raise {setting}, not prometheus.timeout"


def _waited_whole_text(count: int, timeout_s: float | None, what: str, margin: bool = True) -> str:
    """``count`` earlier tries that ``what`` their whole timeout (``timeout_s``: prometheus.timeout and the margin)
    with the read deadline still ahead."""
    tries = f"an earlier try {what} its" if count == 1 else f"{count} earlier tries each {what} their"
    made_of = f": prometheus.timeout and {READ_TIMEOUT_MARGIN_S:g} s more" if margin else ""
    how_long = "" if timeout_s is None else f" ({timeout_s:g} s{made_of})"
    return f"{tries} whole timeout{how_long} with the read deadline still ahead"


def _passed_deadline_s() -> float | None:
    """The read deadline (seconds given to the reads) once it has passed; None before it, or outside one."""
    left = read_time_left()
    return left[1].total_seconds() if left is not None and left[0] <= 0 else None


def _cut_off(exc: BaseException) -> AnswerCutOff | None:
    """The ``AnswerCutOff`` that ``exc`` wraps (urllib3 and requests wrap it in their timeouts), if any."""
    seen: set[int] = set()
    todo: list[object] = [exc]
    while todo:
        error = todo.pop()
        if not isinstance(error, BaseException) or id(error) in seen:
            continue
        seen.add(id(error))
        if isinstance(error, AnswerCutOff):
            return error
        todo.extend((error.__cause__, error.__context__, getattr(error, "reason", None), *error.args))
    return None


def _answer_reason(exc: PrometheusErrorAnswer) -> str:
    """An answer other than 200, with Prometheus' ``errorType`` and ``error`` (or a proxy's words) quoted."""
    code, error = exc.code, error_of(exc.body)
    text = " ".join(exc.body.decode("utf-8", "replace").split())[:120]
    said = f': errorType {error[0]}, "{error[1][:300]}"' if error else (f": {text}" if text else "")
    if code in (401, 403):
        return f"Prometheus refused the credentials (HTTP {code}); check bearer_token_file{said}"
    tried = f", tried {exc.tries} time{'s' if exc.tries > 1 else ''}"
    after = f", asked to retry after {exc.retry_after} s" if exc.retry_after else ""
    if error is not None and _queued_out(error):
        return (
            f"Prometheus was busy (HTTP {code}{tried}{after}){said}: its query queue was full, the query waiting its "
            "whole timeout for a free slot while --query.max-concurrency queries ran (default 20); read again at the "
            "next tick. If it lasts, raise Prometheus' --query.max-concurrency or lighten the other queries it runs "
            "(dashboards, rules)"
        )
    timed_out = error is not None and (error[0] == "timeout" or _deadline_while_selecting(error))
    cut_to = _TIMEOUT_CUT_TO.get()
    left = read_time_left()
    if timed_out and cut_to is not None and left is not None:
        return (
            f"Prometheus could not finish the query within the {cut_to}ms left before the read deadline "
            f"({left[1].total_seconds():g} s) (HTTP {code}){said}; the read deadline cut the query's timeout sent to "
            f"Prometheus to the time left: {_deadline_advice()}, or simplify the query"
        )
    if timed_out:
        return (
            f"Prometheus could not finish the query within its timeout (HTTP {code}){said}; not retried, as it "
            "would time out again: simplify the query (a shorter range, fewer series), or raise prometheus.timeout "
            "(the query's timeout sent to Prometheus) and, above it, Prometheus' --query.timeout (default 2m)"
        )
    if code == 404:
        return (
            f"Prometheus answered HTTP 404{said}; there is no Prometheus HTTP API under prometheus.url: set it to the "
            "server's base URL, the part before /api/v1/query (for Grafana Mimir or Cortex, with their /prometheus "
            "prefix)"
        )
    if code == 400 and "maximum resolution" in said:
        return f"Prometheus refused the range as too many points per series (HTTP 400){said}"
    if code in {400, 422}:
        return f"Prometheus could not run the query (HTTP {code}){said}"
    if code >= 500:
        return f"Prometheus answered with a server error (HTTP {code}){tried}{after}{said}"
    if code == 429:
        return f"Prometheus refused the query as one too many (HTTP 429){tried}{after}{said}"
    return f"Prometheus answered HTTP {code}{said}"


def _not_json_reason(exc: NotPrometheusJson) -> str:
    """A 200 answer that is not JSON: what it was, and the two likely causes of an HTML page."""
    what = exc.content_type.split(";")[0].strip().lower()
    where = f", after a redirect to {exc.redirected_to}" if exc.redirected_to else ""
    if "html" not in what:
        return f"malformed answer from Prometheus: the body is not JSON ({what or 'no Content-Type'}, HTTP 200{where})"
    title = f' titled "{exc.title}"' if exc.title else ""
    return (
        f"the answer is not Prometheus' JSON but an HTML page{title} (HTTP 200{where}): a sign-in page of a proxy "
        "in front of Prometheus wants credentials (set prometheus.bearer_token_file to a token it accepts), or "
        "prometheus.url is not the server's base URL, the part before /api/v1/query"
    )


def _without_url(text: str) -> str:
    return _URL.sub("<url>", text)


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
    """The operating system's reason (e.g. ``[Errno 111] Connection refused``) rather than urllib3's wrapping,
    which names the request's URL."""
    match = _ERRNO.search(str(exc))
    return match.group(0).rstrip("'\")") if match else _without_url(str(exc))
