"""FakePrometheusApi: the range-query and instant-query endpoints of Prometheus, answering with demand a test sets
and changes.

The real prometheus-api-client (through ``PrometheusSource``) queries it over HTTP. ``demand`` maps a label value
(a namespace or ClusterQueue, as the default queries select them) to the value every step reports; a query that
names none of them returns no series (which the source turns into ``MetricsUnavailable``, never zero). Values are
served for the whole requested range on its step grid, so the newest sample is always fresh. ``queries`` logs
every query asked, range and instant alike.

The answer has the documented shape of a range query (Prometheus HTTP API, "Range queries" and "Range vectors"):
``{"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {...}, "values": [[<unix time>,
"<value>"], ...]}]}}``, each value a string as Prometheus formats floats (``-50``, ``1000000000000``, ``+Inf``,
``NaN``; see ``_promql_float``).

``/api/v1/query`` answers an instant query (Prometheus HTTP API, "Instant queries" and "Instant vectors"):
``{"status": "success", "data": {"resultType": "vector", "result": [{"metric": {...}, "value": [<unix time>,
"<value>"]}]}}``, the time being the evaluation time, ``time`` (RFC 3339 or Unix seconds; "Optional", "current
server time is used if the time parameter is omitted"). Prometheus keeps times to the millisecond and writes them
as Unix seconds with up to three decimals (util/jsonutil's ``MarshalTimestamp``). A label in ``demand`` is
answered with its value, as the range endpoint answers it on each step; a query naming none is answered with no
series. ``vector(<number>)`` (the source's probe) is answered as Prometheus evaluates it: one series without
labels. Both endpoints take their parameters from the URL of a GET or from the form body of a POST
("application/x-www-form-urlencoded", "URL-encode these parameters directly in the request body").

``set_result`` replaces the range query's ``result`` list for one label value verbatim, to serve a malformed
answer. An instant query of that label is answered as Prometheus would answer it on the same series: when the
``result`` is a well-formed matrix, each series' newest sample at or before ``time`` and less than
``LOOKBACK_DELTA`` (Prometheus' default ``--query.lookback-delta``, 5 minutes) older than it, stamped with
``time``, its value as given (so a value that is not a number stays one); a series without such a sample is left
out. A ``result`` that is not a well-formed matrix is served verbatim, malformed for the instant read as for the
range read.
"""

from __future__ import annotations

import math
import re
import threading
import time
from datetime import datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

import numpy as np

from tests.fakes.http_server import LocalJsonServer

LOOKBACK_DELTA = 300.0
"""Prometheus' ``--query.lookback-delta`` default, seconds: how far back an instant query looks for a sample."""
_VECTOR_LITERAL = re.compile(r"\s*vector\(\s*([-+]?(?:[0-9.]+(?:[eE][-+]?[0-9]+)?|Inf|NaN))\s*\)\s*")


class FakePrometheusApi(LocalJsonServer):
    name = "fake-prometheus"

    def __init__(self, port: int = 0) -> None:
        super().__init__(port)
        self.demand: dict[str, float] = {}
        self.results: dict[str, Any] = {}
        self.queries: list[str] = []
        self._state = threading.Lock()

    def start(self) -> FakePrometheusApi:
        super().start()
        return self

    def set_demand(self, label_value: str, value: float) -> None:
        with self._state:
            self.demand[label_value] = value

    def set_result(self, label_value: str, result: Any) -> None:
        """Answer range queries naming ``label_value`` with this ``result`` as it is, whatever its shape; instant
        queries with its newest samples (see the module's docstring)."""
        with self._state:
            self.results[label_value] = result

    def respond(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, Any]:
        parts = urlsplit(path)
        args = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        if method == "POST" and body:
            args |= {k: v[-1] for k, v in parse_qs(body.decode()).items()}
        if parts.path == "/api/v1/query_range":
            return self._range(args)
        if parts.path == "/api/v1/query":
            return self._instant(args)
        return 404, {"status": "error", "errorType": "not_found", "error": f"unknown path {parts.path}"}

    def _lookup(self, query: str) -> tuple[float | None, Any]:
        with self._state:
            self.queries.append(query)
            value = next((v for key, v in self.demand.items() if f'"{key}"' in query), None)
            raw = next((r for key, r in self.results.items() if f'"{key}"' in query), None)
        return value, raw

    def _range(self, args: dict[str, str]) -> tuple[int, Any]:
        query = args.get("query", "")
        start, end, step = float(args["start"]), float(args["end"]), float(args["step"])
        value, raw = self._lookup(query)
        result: Any = []
        if raw is not None:
            result = raw
        elif value is not None:
            stamps = range(math.ceil(start), math.floor(end) + 1, int(step))
            result = [{"metric": {}, "values": [[t, _promql_float(value)] for t in stamps]}]
        return 200, {"status": "success", "data": {"resultType": "matrix", "result": result}}

    def _instant(self, args: dict[str, str]) -> tuple[int, Any]:
        query = args.get("query", "")
        try:
            at = _eval_time(args.get("time"))
        except ValueError:
            error = f'invalid parameter "time": cannot parse "{args.get("time")}" to a valid timestamp'
            return 400, {"status": "error", "errorType": "bad_data", "error": error}
        value, raw = self._lookup(query)
        literal = _VECTOR_LITERAL.fullmatch(query)
        result: Any = []
        if raw is not None:
            result = _newest_samples(raw, at)
        elif value is not None:
            result = [{"metric": {}, "value": [_json_time(at), _promql_float(value)]}]
        elif literal is not None:
            result = [{"metric": {}, "value": [_json_time(at), _promql_float(float(literal.group(1)))]}]
        return 200, {"status": "success", "data": {"resultType": "vector", "result": result}}


def _eval_time(text: str | None) -> float:
    """The evaluation time of an instant query, Unix seconds to the millisecond: ``time`` as Unix seconds (with
    decimals) or RFC 3339, the current time when it is omitted (Prometheus HTTP API, "Instant queries")."""
    if text is None or text == "":
        return round(time.time(), 3)
    try:
        seconds = float(text)
    except ValueError:
        seconds = datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    if not math.isfinite(seconds):
        raise ValueError(text)
    return round(seconds, 3)


def _json_time(seconds: float) -> int | float:
    """A time as Prometheus writes it: Unix seconds, with the milliseconds as decimals when there are any."""
    return int(seconds) if seconds == int(seconds) else seconds


def _newest_samples(result: Any, at: float) -> Any:
    """An instant query's ``result`` over the series of a range ``result``: each series' newest sample in
    (``at`` - lookback delta, ``at``], stamped ``at``; ``result`` verbatim when it is not a well-formed matrix."""
    if not isinstance(result, list):
        return result
    vector: list[dict[str, Any]] = []
    for series in result:
        metric = series.get("metric") if isinstance(series, dict) else None
        values = series.get("values") if isinstance(series, dict) else None
        if not isinstance(metric, dict) or not isinstance(values, list):
            return result
        newest: tuple[float, Any] | None = None
        for pair in values:
            if not isinstance(pair, list) or len(pair) != 2 or isinstance(pair[0], bool):
                return result
            try:
                stamp = float(pair[0])
            except (TypeError, ValueError):
                return result
            if at - LOOKBACK_DELTA < stamp <= at and (newest is None or stamp >= newest[0]):
                newest = (stamp, pair[1])
        if newest is not None:
            vector.append({"metric": metric, "value": [_json_time(at), newest[1]]})
    return vector


def _promql_float(value: float) -> str:
    """A sample value as Prometheus writes it: util/jsonutil's MarshalFloat uses strconv.AppendFloat(f, 'f', -1, 64)
    (shortest positional form), and writes +Inf, -Inf and NaN by name."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return str(np.format_float_positional(value, trim="-"))
