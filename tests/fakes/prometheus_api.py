"""FakePrometheusApi: the range-query endpoint of Prometheus, answering with demand a test sets and changes.

The real prometheus-api-client (through ``PrometheusSource``) queries it over HTTP. ``demand`` maps a label value
(a namespace or ClusterQueue, as the default queries select them) to the value every step reports; a query that
names none of them returns no series (which the source turns into ``MetricsUnavailable``, never zero). Values are
served for the whole requested range on its step grid, so the newest sample is always fresh. ``queries`` logs
every query asked.
"""

from __future__ import annotations

import math
import threading
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.fakes.http_server import LocalJsonServer


class FakePrometheusApi(LocalJsonServer):
    name = "fake-prometheus"

    def __init__(self, port: int = 0) -> None:
        super().__init__(port)
        self.demand: dict[str, float] = {}
        self.queries: list[str] = []
        self._state = threading.Lock()

    def start(self) -> FakePrometheusApi:
        super().start()
        return self

    def set_demand(self, label_value: str, value: float) -> None:
        with self._state:
            self.demand[label_value] = value

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
        result: list[dict[str, Any]] = []
        if value is not None:
            stamps = range(math.ceil(start), math.floor(end) + 1, int(step))
            result = [{"metric": {}, "values": [[t, f"{value:g}"] for t in stamps]}]
        return 200, {"status": "success", "data": {"resultType": "matrix", "result": result}}
