"""Reading a Prometheus ``/api/v1/query_range`` or ``/api/v1/query`` answer whole: the request made through the
client's own session (``custom_query_range`` and ``custom_query`` return ``data.result`` alone and so drop the
answer's ``warnings``), the checks on the answer's envelope, and the documented matrix and vector shapes of its
result. An answer without a ``data.result`` list, a result not of those shapes and a sample value that is not a
number are a ``MalformedAnswer``: Prometheus answered, with something that is not data. Used by
``agent.sources.prometheus``.
"""

from __future__ import annotations

import logging
import math
import re
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import requests
from prometheus_api_client import PrometheusConnect

from agent.sources.prometheus_client import PrometheusErrorAnswer, request_timeout
from agent.sources.prometheus_samples import label_set
from models import MalformedAnswer, MetricsUnavailable
from models.errors import NotPrometheusJson

log = logging.getLogger("agent.sources.prometheus")
_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)


def get_range(client: PrometheusConnect, params: dict[str, Any]) -> Any:
    """One ``query_range`` request made as ``PrometheusConnect.custom_query_range`` makes it (same session, method,
    headers, auth, certificates and timeout), returning the whole JSON answer instead of ``data.result``."""
    return _get(client, "/api/v1/query_range", params)


def get_instant(client: PrometheusConnect, params: dict[str, Any]) -> Any:
    """One instant ``query`` request, made like ``get_range``; the whole JSON answer."""
    return _get(client, "/api/v1/query", params)


def _get(client: PrometheusConnect, path: str, params: dict[str, Any]) -> Any:
    """Inside a read deadline, the timeout of each try, the first and every retry, is cut to the time left (at least
    10 ms; ``request_timeout``)."""
    session = client._session
    timeout = getattr(client, "_timeout", None)
    timeout = request_timeout(None if timeout is None else float(timeout))
    response = session.request(
        method=getattr(client, "_method", "GET"),
        url=f"{client.url}{path}",
        params=params,
        verify=session.verify,
        headers=client.headers,
        auth=getattr(client, "auth", None),
        cert=session.cert,
        timeout=timeout,
    )
    if response.status_code != 200:
        # A 503's body may have been read already, to tell Prometheus' own timeout (``_DeadlineRetry``): kept as data.
        body = response.content or getattr(response.raw, "data", None) or b""
        tries = len(getattr(getattr(response.raw, "retries", None), "history", ())) + 1
        raise PrometheusErrorAnswer(response.status_code, bytes(body), tries, response.headers.get("Retry-After"))
    try:
        return response.json()
    except ValueError:
        raise _not_json(response) from None


def _not_json(response: requests.Response) -> NotPrometheusJson:
    """What a 200 answer that is not JSON was: its type, its HTML title, and where a redirect led (scheme, host, port
    and path: the query of a sign-in URL may carry the request's, which holds the whole query)."""
    title = _TITLE.search(response.text[:4096])
    redirected = ""
    if response.history:
        final = urlsplit(response.url)
        port = f":{final.port}" if final.port else ""  # without any user:password@ the location named
        redirected = f"{final.scheme}://{final.hostname}{port}{final.path}"
    text = " ".join(title.group(1).split())[:80] if title else ""
    return NotPrometheusJson(response.headers.get("Content-Type", ""), text, redirected)


def checked_body(name: str, query: str, body: Any) -> list[Any]:
    """``data.result`` of a range or instant query's answer; its ``warnings`` make the class unavailable, its
    ``infos`` are logged only. Shape: Prometheus HTTP API, "Format overview"."""
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, dict) or "result" not in data:  # not a query's answer (a proxy's JSON): a read that failed
        raise MetricsUnavailable(name, f"malformed answer from Prometheus: no data.result (got {body!r:.80})", query)
    # an empty result comes as null from some Go servers (GMP's frontend, Cortex's query-frontend): no value, as []
    result = [] if data["result"] is None else data["result"]
    if not isinstance(result, list):
        raise MalformedAnswer(
            name, f"malformed answer from Prometheus: data.result is not a list (got {body!r:.80})", query
        )
    infos = _messages(body.get("infos"))
    if infos:
        log.info("prometheus infos class=%s infos=%r query=%r", name, infos, query)
    warnings = _messages(body.get("warnings"))
    if warnings:
        log.warning("prometheus warnings, data may be partial class=%s warnings=%r query=%r", name, warnings, query)
        raise MetricsUnavailable(
            name,
            "Prometheus answered with warnings, so the data may be partial (a store or remote read that failed, "
            f"a partial response): {'; '.join(warnings)[:300]}",
            query,
        )
    return result


def _messages(value: object) -> list[str]:
    if not value:
        return []
    items = value if isinstance(value, list) else [value]
    return list(dict.fromkeys(str(item) for item in items))


def matrix(name: str, query: str, results: list[Any]) -> list[tuple[dict[str, str], dict[int, float]]]:
    """Labels and samples (epoch second -> value) of each series of a range query's ``result``.

    The shape is the documented one of ``resultType: matrix`` (Prometheus HTTP API, "Range vectors"): a list of
    ``{"metric": {label: value}, "values": [[<unix time>, "<value as string>"], ...]}``. Anything else is a
    malformed answer for this class alone.
    """
    series = []
    for i, result in enumerate(results):
        metric = (result.get("metric") or {}) if isinstance(result, dict) else None
        values = (result.get("values") or []) if isinstance(result, dict) else None
        if not isinstance(metric, dict) or not isinstance(values, list):
            raise MalformedAnswer(
                name,
                f"malformed answer from Prometheus: result[{i}] is not a series with 'metric' and 'values' "
                f"(got {result!r:.80})",
                query,
            )
        samples: dict[int, float] = {}
        for j, pair in enumerate(values):
            stamp = _stamp(pair)
            if stamp is None:
                raise MalformedAnswer(
                    name,
                    f"malformed answer from Prometheus: result[{i}].values[{j}] is not [time, value] "
                    f"(got {pair!r:.80})",
                    query,
                )
            samples[stamp] = _number(name, query, metric, stamp, pair[1])
        series.append(({str(k): str(v) for k, v in metric.items()}, samples))
    return series


def vector(name: str, query: str, body: Any, results: list[Any]) -> list[tuple[dict[str, str], float, float]]:
    """Labels, time (epoch seconds) and value of each series of an instant query's ``result``.

    The shape is the documented one of ``resultType: vector`` (Prometheus HTTP API, "Instant vectors"): a list of
    ``{"metric": {label: value}, "value": [<unix time>, "<value as string>"]}``; the time is the query's evaluation
    time. A scalar or string result, or anything else, is a malformed answer for this class alone.
    """
    kind = body.get("data", {}).get("resultType", "vector")
    if kind != "vector":
        raise MetricsUnavailable(
            name, f"the query returned a {kind}, not an instant vector; it must return one series", query
        )
    samples = []
    for i, result in enumerate(results):
        metric = (result.get("metric") or {}) if isinstance(result, dict) else None
        pair = result.get("value") if isinstance(result, dict) else None
        at = _time(pair)
        if not isinstance(metric, dict) or at is None or not isinstance(pair, list | tuple):
            raise MalformedAnswer(
                name,
                f"malformed answer from Prometheus: result[{i}] is not a sample with 'metric' and 'value' "
                f"(got {result!r:.80})",
                query,
            )
        samples.append(({str(k): str(v) for k, v in metric.items()}, at, _number(name, query, metric, at, pair[1])))
    return samples


def _stamp(pair: object) -> int | None:
    stamp = _time(pair)
    return round(stamp) if stamp is not None else None


def _time(pair: object) -> float | None:
    if not isinstance(pair, list | tuple) or len(pair) != 2 or isinstance(pair[0], bool):
        return None
    try:
        stamp = float(pair[0])
    except (TypeError, ValueError):
        return None
    return stamp if math.isfinite(stamp) else None


def _number(name: str, query: str, metric: dict[Any, Any], at: float, text: object) -> float:
    """A sample value. Prometheus sends each as a string holding a float literal, ``NaN``, ``+Inf`` or ``-Inf``
    (HTTP API, "Expression query result formats"); these keep their meaning (NaN is a gap, an infinity is refused as
    not a demand). Any other value (``"abc"``, an empty string, ``null``, ``true``) is a malformed answer for this
    class, told as itself with its time and series: read as NaN, it was reported as "the newest value is NaN",
    sending one to look for a NaN in the query."""
    if not isinstance(text, bool):
        try:
            return float(str(text))
        except ValueError:
            pass
    shown = repr(text) if len(repr(text)) <= 40 else repr(text)[:37] + "..."
    series = f" of the series {label_set({str(k): str(v) for k, v in metric.items()})}" if metric else ""
    when = datetime.fromtimestamp(at, UTC).isoformat()
    raise MalformedAnswer(
        name, f"malformed answer from Prometheus: value {shown} at {when}{series} is not a number", query
    )
