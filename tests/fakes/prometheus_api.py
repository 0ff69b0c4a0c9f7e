"""FakePrometheusApi: the range-query endpoint of Prometheus, answering with demand a test sets and changes.

The real prometheus-api-client (through ``PrometheusSource``) queries it over HTTP. ``demand`` maps a label value
(a namespace or ClusterQueue, as the default queries select them) to the value every step reports; a query that
names none of them returns no series (which the source turns into ``MetricsUnavailable``, never zero). Values are
served for the whole requested range on its step grid, so the newest sample is always fresh. ``queries`` logs
every query asked.

The answer has the documented shape of a range query (Prometheus HTTP API, "Range queries" and "Range vectors"):
``{"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {...}, "values": [[<unix time>,
"<value>"], ...]}]}}``, each value a string as Prometheus formats floats (``-50``, ``1000000000000``, ``+Inf``,
``NaN``; see ``_promql_float``).
``set_result`` replaces the ``result`` list for one label value verbatim, to serve a malformed answer.
"""

from __future__ import annotations

import math
import threading
from typing import Any
from urllib.parse import parse_qs, urlsplit

import numpy as np

from tests.fakes.http_server import LocalJsonServer


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
        """Answer queries naming ``label_value`` with this ``result`` as it is, whatever its shape."""
        with self._state:
            self.results[label_value] = result

    def respond(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, Any]:
        parts = urlsplit(path)
        args = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        if method == "POST" and body:
            args |= {k: v[-1] for k, v in parse_qs(body.decode()).items()}
        if parts.path != "/api/v1/query_range":
            return 404, {"status": "error", "errorType": "not_found", "error": f"unknown path {parts.path}"}
        query = args.get("query", "")
        start, end, step = float(args["start"]), float(args["end"]), float(args["step"])
        with self._state:
            self.queries.append(query)
            value = next((v for key, v in self.demand.items() if f'"{key}"' in query), None)
            raw = next((r for key, r in self.results.items() if f'"{key}"' in query), None)
        result: Any = []
        if raw is not None:
            result = raw
        elif value is not None:
            stamps = range(math.ceil(start), math.floor(end) + 1, int(step))
            result = [{"metric": {}, "values": [[t, _promql_float(value)] for t in stamps]}]
        return 200, {"status": "success", "data": {"resultType": "matrix", "result": result}}


def _promql_float(value: float) -> str:
    """A sample value as Prometheus writes it: util/jsonutil's MarshalFloat uses strconv.AppendFloat(f, 'f', -1, 64)
    (shortest positional form), and writes +Inf, -Inf and NaN by name."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return str(np.format_float_positional(value, trim="-"))
