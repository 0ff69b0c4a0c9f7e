"""``PrometheusSource``: demand history and accelerator activity from a Prometheus server.

Reads ``/api/v1/query_range`` through the session of a prometheus-api-client ``PrometheusConnect`` (its URL,
headers, auth, TLS settings, retries and timeout), in chunks below Prometheus' 11,000-points-per-series limit, on a
grid aligned to the step (multiples of the step since the epoch), so that chunks meet without duplicate or
missing steps. A step without a value is NaN in the frame, never 0. The request is made here rather than with
``custom_query_range``, which returns ``data.result`` alone and so drops the answer's ``warnings``.

Prometheus HTTP API, "Format overview": ``warnings`` are "errors that do not inhibit the request execution", and
the data may be incomplete (a remote-read store that failed, a Thanos or Cortex partial response). An answer with
warnings is logged once and the class is unavailable for that fetch, since a sum over part of the data reads low.
``infos`` (Prometheus 2.45+, e.g. "metric might not be a counter") are logged and do not fail anything.

``newest_each`` reads each class's demand at one instant (``/api/v1/query`` at the tick's time), for the loop's
observation of demand now: the grid's newest step can start up to a step earlier. Prometheus evaluates it on the
newest sample of each series within its lookback delta (``--query.lookback-delta``, 5 minutes by default) that is
not marked stale, and stamps it with the evaluation time; an empty answer is no value, never 0. Warnings, several
series, a result that is not an instant vector and failed requests make that class's instant value unavailable; a
malformed answer (a sample value that is not a number, a result not of the documented shape) is a
``MalformedAnswer``, told apart from a request that failed.

Whatever makes an answer untrustworthy becomes ``MetricsUnavailable`` naming the demand class and the query:
warnings, no series at all, a sample value that is not a number at all (Prometheus sends each value as a string, a
float literal or ``NaN``, ``+Inf``, ``-Inf``: text such as ``abc`` is told as itself, with its time and series, not
as NaN), a NaN newest value, a newest value that cannot be a demand (negative, infinite or
absurdly large), a newest value older than ``max_staleness``, several series where one was expected, a
``result`` that is not the documented matrix shape, HTTP errors (including refused credentials and "too many
points"), timeouts and connection failures. An implausible value before the newest is a gap (NaN), like a step
Prometheus left out. The client, the bearer token and the translation of failed requests (the vendor exception
types) are in ``agent.sources.prometheus_client``; the step grid and the checks on samples in
``agent.sources.prometheus_samples``.

Reading classes one by one, ``fetch_each`` and ``newest_each`` stop at a failure that is the server's rather than the
class's (no connection, a timeout, a server error after the retries): one instant query of ``vector(1)`` without
retries then tells whether Prometheus answers at all. When it does not, every class not yet read is held with a
reason naming the server's failure, without being asked: otherwise each class would go through its own retries
((retries + 1) x timeout, about 91 s with the defaults) before the tick could plan, enforce budgets or alert. When
the probe is answered, the failure was the class's own (a query too heavy to finish in time) and the next classes
are read. Inside a ``read_deadline`` (the loop gives its observation half a tick), the classes not read when the
time is up are held the same way, and each request's timeout and retries are cut to the time left.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Self

import pandas as pd
from prometheus_api_client import PrometheusConnect

from agent.sources.base import READ_DEADLINE_SETTING, read_deadline_setting, read_time_left
from agent.sources.node_label_hints import node_labels_hint
from agent.sources.prometheus_answer import checked_body, get_instant, get_range, matrix, vector
from agent.sources.prometheus_client import bearer_headers, call, connect, prometheus_duration
from agent.sources.prometheus_queries import no_data_hint
from agent.sources.prometheus_samples import (
    age_text,
    chunks,
    epoch_seconds,
    label_set,
    refuse_implausible,
    step_grid,
    step_seconds,
)
from config.prometheus import PrometheusSettings
from models import DemandClass, MetricSourceUnavailable, MetricsUnavailable
from models.errors import PrometheusServerFailure

log = logging.getLogger(__name__)
PROBE_QUERY = "vector(1)"


class PrometheusSource:
    """A MetricSource over Prometheus. ``queries`` maps a demand class name to PromQL returning one series."""

    def __init__(
        self,
        client: PrometheusConnect,
        queries: Mapping[str, str],
        max_staleness: timedelta,
        bearer_token_file: str | None = None,
        query_timeout: timedelta | None = None,
        max_points_per_query: int = 10_000,
        probe_client: PrometheusConnect | None = None,
    ) -> None:
        if max_points_per_query < 2:
            raise ValueError("max_points_per_query must be at least 2")
        self._client = client
        self._queries = dict(queries)
        self._max_staleness = max_staleness
        self._token_file = bearer_token_file
        self._query_timeout = query_timeout
        self._max_points = max_points_per_query
        self._probe_client = probe_client or client

    @classmethod
    def from_settings(
        cls, settings: PrometheusSettings, queries: Mapping[str, str], client: PrometheusConnect | None = None
    ) -> Self:
        return cls(
            client if client is not None else connect(settings),
            queries,
            max_staleness=settings.max_staleness,
            bearer_token_file=settings.bearer_token_file,
            query_timeout=settings.timeout,
            max_points_per_query=settings.max_points_per_query,
            probe_client=connect(settings, retries=0) if client is None else client,
        )

    @property
    def url(self) -> str:
        return str(self._client.url)

    def probe(self) -> None:
        """One instant query (``vector(1)``) without retries; raises ``MetricSourceUnavailable`` with the reason
        when Prometheus cannot be reached or refuses it, so that a one-shot command stops at once, before every
        class's queries have gone through their retries."""
        failure = self._probe_failure()
        if failure is not None:
            raise MetricSourceUnavailable(f"cannot use Prometheus at {self.url}: {failure}")

    def _probe_failure(self) -> str | None:
        """Why Prometheus does not answer one instant query of ``vector(1)`` without retries; None when it does."""
        try:
            self._probe_client.headers = bearer_headers(self._token_file, "*", PROBE_QUERY)
            call("*", PROBE_QUERY, lambda: get_instant(self._probe_client, {"query": PROBE_QUERY}))
        except MetricsUnavailable as exc:
            return exc.reason
        return None

    def instant(self, name: str, query: str, at: datetime) -> list[tuple[dict[str, str], float]]:
        """One instant query at ``at``: each series' labels and value (an empty list when there is none). Raises
        ``MetricsUnavailable`` for ``name`` when Prometheus cannot answer it, answers with warnings, or answers
        with something else than a vector (Prometheus HTTP API, "Instant vectors"); a failed request is told as the
        range reads tell it, with Prometheus' ``errorType`` and ``error``."""
        params: dict[str, Any] = {"query": query, "time": epoch_seconds(at)}
        if self._query_timeout:
            params["timeout"] = prometheus_duration(self._query_timeout)
        self._client.headers = bearer_headers(self._token_file, name, query)
        body = call(name, query, lambda: get_instant(self._client, params))
        samples = vector(name, query, body, checked_body(name, query, body))
        return [(labels, value) for labels, _, value in samples]

    def fetch(self, classes: Sequence[DemandClass], start: datetime, end: datetime, step: timedelta) -> pd.DataFrame:
        """Demand per class on the step grid; the first class without a trustworthy answer raises."""
        parts = [self.fetch_class(c, start, end, step) for c in classes]
        if not parts:
            return pd.DataFrame({"unique_id": [], "ds": [], "y": []})
        return pd.concat(parts, ignore_index=True)

    def fetch_each(
        self, classes: Sequence[DemandClass], start: datetime, end: datetime, step: timedelta
    ) -> tuple[pd.DataFrame, dict[str, MetricsUnavailable]]:
        """Every class that has a trustworthy answer, and why each of the others has none (so they can be held
        one by one instead of all together)."""
        return self._fetch_each(classes, start, end, step, history=False)

    def fetch_history(
        self, classes: Sequence[DemandClass], start: datetime, end: datetime, step: timedelta
    ) -> tuple[pd.DataFrame, dict[str, MetricsUnavailable]]:
        """``fetch_each`` for a replay or an export of the range: each class judged on the whole range, not on its
        newest value (``series`` with ``history``)."""
        return self._fetch_each(classes, start, end, step, history=True)

    def _fetch_each(
        self, classes: Sequence[DemandClass], start: datetime, end: datetime, step: timedelta, history: bool
    ) -> tuple[pd.DataFrame, dict[str, MetricsUnavailable]]:
        parts: list[pd.DataFrame] = []
        missing = self._read_each(classes, lambda c: parts.append(self.fetch_class(c, start, end, step, history)))
        frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame({"unique_id": [], "ds": [], "y": []})
        return frame, missing

    def newest_each(
        self, classes: Sequence[DemandClass], at: datetime
    ) -> tuple[dict[str, tuple[datetime, float]], dict[str, MetricsUnavailable]]:
        """Each class's demand at ``at`` (one instant query per class), with the time Prometheus gives it, and why
        each other class has none. A value is returned as read: the caller judges NaN and implausible values."""
        readings: dict[str, tuple[datetime, float]] = {}

        def read(demand_class: DemandClass) -> None:
            name = demand_class.name
            query = self._queries.get(name)
            if query is None:
                raise MetricsUnavailable(name, "no Prometheus query is configured")
            readings[name] = self.newest(name, query, at)

        return readings, self._read_each(classes, read)

    def newest_of(
        self, queries: Mapping[str, str], at: datetime, what: str
    ) -> tuple[dict[str, tuple[datetime, float]], dict[str, MetricsUnavailable]]:
        """Each named query's value at ``at`` (``newest``) and why each other has none, read one by one as
        ``newest_each`` reads classes: once the server has failed, or the read deadline has passed, the queries left
        are held without a request, the reason naming which (``what`` is read, for the message: "on-prem
        capacity")."""
        readings: dict[str, tuple[datetime, float]] = {}

        def read(name: str) -> None:
            readings[name] = self.newest(name, queries[name], at)

        return readings, self._read_named(list(queries), queries, read, what)

    def newest(self, name: str, query: str, at: datetime) -> tuple[datetime, float]:
        """One query's value at ``at``: Prometheus evaluates it on the newest sample of each series within its
        lookback delta (5 minutes by default) that is not marked stale. Raises ``MetricsUnavailable`` when there
        is no such value, when the answer has warnings or several series, or when the request fails."""
        params: dict[str, Any] = {"query": query, "time": epoch_seconds(at)}
        if self._query_timeout:
            params["timeout"] = prometheus_duration(self._query_timeout)
        self._client.headers = bearer_headers(self._token_file, name, query)
        body = call(name, query, lambda: get_instant(self._client, params))
        samples = vector(name, query, body, checked_body(name, query, body))
        if not samples:
            hint = _empty_answer_hint(query)
            raise MetricsUnavailable(
                name,
                f"Prometheus has no value at {at.isoformat()} (no sample within its lookback delta)"
                + (f"; {hint}" if hint else ""),
                query,
            )
        if len(samples) > 1:
            raise MetricsUnavailable(
                name,
                f"the query returned several series ({label_set(samples[0][0])}, {label_set(samples[1][0])}, ...) "
                "where one was expected; aggregate it, e.g. sum(...) or sum by () (...)",
                query,
            )
        _, stamp, value = samples[0]
        return datetime.fromtimestamp(stamp, UTC), value

    def fetch_class(
        self, demand_class: DemandClass, start: datetime, end: datetime, step: timedelta, history: bool = False
    ) -> pd.DataFrame:
        query = self._queries.get(demand_class.name)
        if query is None:
            known = ", ".join(sorted(self._queries)) or "none"
            raise MetricsUnavailable(demand_class.name, f"no Prometheus query is configured (configured: {known})")
        values = self.series(demand_class.name, query, start, end, step, history)
        return pd.DataFrame({"unique_id": demand_class.name, "ds": values.index, "y": values.to_numpy()})

    def series(
        self, name: str, query: str, start: datetime, end: datetime, step: timedelta, history: bool = False
    ) -> pd.Series:
        """One query's values on the step grid of [start, end), NaN where Prometheus had none; checked. A
        ``history`` read (a replay or an export of the range) is not judged by its newest value: a series that
        went stale or implausible before ``end`` keeps what it had as values and the rest as gaps, and only a
        range without any value is refused."""
        grid = step_grid(start, end, step)
        if len(grid) == 0:
            raise MetricsUnavailable(name, f"empty time range {start.isoformat()} .. {end.isoformat()}", query)
        headers = bearer_headers(self._token_file, name, query)
        labels: dict[str, str] | None = None
        samples: dict[int, float] = {}
        seconds = step_seconds(step)
        for chunk in chunks(grid, self._max_points):
            for metric, pairs in matrix(name, query, self._query_range(name, query, chunk, seconds, headers)):
                if labels is None:
                    labels = metric
                elif metric != labels:
                    raise MetricsUnavailable(
                        name,
                        f"the query returned several series ({label_set(labels)}, {label_set(metric)}, ...) where "
                        "one was expected; aggregate it, e.g. sum(...) or sum by () (...)",
                        query,
                    )
                samples.update(pairs)
        if not samples:
            hint = _empty_answer_hint(query)
            raise MetricsUnavailable(
                name, "Prometheus returned no data for the whole range" + (f" ({hint})" if hint else ""), query
            )
        refuse_implausible(name, query, samples, hold=not history)
        values = pd.Series(samples, dtype=float).reindex(grid.as_unit("s").asi8)
        values.index = grid
        if not history:
            self._check_newest(name, query, values, max(samples), end)
        elif values.isna().all():
            raise MetricsUnavailable(name, "every value in the range is NaN or not a demand", query)
        return values

    # -- internals -----------------------------------------------------------------------------------------
    def _read_each(
        self, classes: Sequence[DemandClass], read: Callable[[DemandClass], None]
    ) -> dict[str, MetricsUnavailable]:
        """``read`` each class in turn; why each failed. Once the server has failed, or the read deadline has
        passed, the classes left are held without a request (one without a query still says so)."""
        by_name = {c.name: c for c in classes}
        return self._read_named(list(by_name), self._queries, lambda name: read(by_name[name]), "demand")

    def _read_named(
        self, names: Sequence[str], queries: Mapping[str, str], read: Callable[[str], None], what: str
    ) -> dict[str, MetricsUnavailable]:
        """``read`` each name in turn; why each failed. Once the server has failed, or the read deadline has
        passed, the names left that have a query are held without a request. A request that timed out when the
        deadline had passed says so: its timeout was cut to the time left."""
        missing: dict[str, MetricsUnavailable] = {}
        down: str | None = None
        for name in names:
            if name in queries and (down := down or self._out_of_time(what)) is not None:
                missing[name] = MetricsUnavailable(name, down, queries[name])
                continue
            try:
                read(name)
            except PrometheusServerFailure as exc:
                late = self._out_of_time(what)
                missing[name] = exc if late is None else PrometheusServerFailure(name, _cut(late, exc), exc.query)
                down = late or self._server_down(exc, what)
            except MetricsUnavailable as exc:
                missing[name] = exc
        return missing

    def _out_of_time(self, what: str) -> str | None:
        left = read_time_left()
        if left is None or left[0] > 0:
            return None
        log.warning("prometheus reads out of time, the remaining %s queries are not sent url=%s", what, self.url)
        return (
            f"not queried: the time for reading {what} ({left[1].total_seconds():g} s) ran out; Prometheus at "
            f"{self.url} answers too slowly or not at all. That time is set by "
            f"{read_deadline_setting() or READ_DEADLINE_SETTING}"
        )

    def _server_down(self, failure: PrometheusServerFailure, what: str) -> str | None:
        """After a class failed for a reason of the server's: why the classes not yet read are not asked (the
        server's failure, confirmed by a probe that failed too, or the read deadline passed), or None when
        Prometheus answers the probe."""
        if (late := self._out_of_time(what)) is not None:
            return late
        probe = self._probe_failure()
        if probe is None:
            log.info(
                "prometheus answers a probe after a failed query; reading on class=%s reason=%r",
                failure.demand_class,
                failure.reason,
            )
            return None
        log.warning(
            "prometheus failing, the remaining classes are not queried this time url=%s class=%s reason=%r probe=%r",
            self.url,
            failure.demand_class,
            failure.reason,
            probe,
        )
        return (
            f"not queried: Prometheus at {self.url} is failing ({failure.reason}, reading class "
            f"{failure.demand_class!r}; a probe query of {PROBE_QUERY} failed too: {probe})"
        )

    def _query_range(
        self, name: str, query: str, chunk: pd.DatetimeIndex, step_s: int, headers: dict[str, str] | None
    ) -> list[dict[str, Any]]:
        params = {
            "query": query,
            "start": int(chunk[0].timestamp()),
            "end": int(chunk[-1].timestamp()),
            "step": str(step_s),
        }
        if self._query_timeout:
            params["timeout"] = prometheus_duration(self._query_timeout)
        self._client.headers = headers
        return checked_body(name, query, call(name, query, lambda: get_range(self._client, params)))

    def _check_newest(self, name: str, query: str, values: pd.Series, newest_returned: int, end: datetime) -> None:
        if math.isnan(values.get(pd.Timestamp(newest_returned, unit="s", tz=UTC), math.nan)):
            when = datetime.fromtimestamp(newest_returned, UTC).isoformat()
            raise MetricsUnavailable(name, f"the newest value Prometheus returned ({when}) is NaN", query)
        present = values.dropna()
        if present.empty:
            raise MetricsUnavailable(name, "every value in the range is NaN", query)
        age = pd.Timestamp(end) - present.index[-1]
        if age > pd.Timedelta(self._max_staleness):
            raise MetricsUnavailable(
                name,
                f"the newest value is stale: {present.index[-1].isoformat()} is {age_text(age)} before "
                f"{pd.Timestamp(end).isoformat()} (max_staleness {age_text(pd.Timedelta(self._max_staleness))})",
                query,
            )


def _cut(late: str, failure: PrometheusServerFailure) -> str:
    """The reason of a request that failed once the read deadline had passed: the deadline cut its timeout (and
    its retries) to the time left, so the time ran out, whatever the request's own failure says."""
    return late.replace("not queried: ", "not answered: ", 1) + f" (the request: {failure.reason})"


def _empty_answer_hint(query: str) -> str:
    """What an empty answer most likely means: a default demand query's exporter, or the node labels that
    kube-state-metrics exports only when allowlisted (a capacity query's pool selector)."""
    return no_data_hint(query) or node_labels_hint(query)


def no_usable_data(url: str, missing: Mapping[str, MetricsUnavailable], every_class: bool) -> MetricSourceUnavailable:
    """One line for classes that came back without usable data: which (the first few), and the first reason."""
    names = list(missing)
    shown = ", ".join(repr(n) for n in names[:3]) + (f" and {len(names) - 3} other class(es)" if len(names) > 3 else "")
    first = missing[names[0]]
    scope = "any demand class" if every_class else "demand class(es)"
    return MetricSourceUnavailable(f"Prometheus at {url} has no usable data for {scope}: {shown}: {first.reason}")
