"""The one translation of the ``kubernetes`` client's failures into ``models.errors``, for every caller.

    HTTP 409                       -> KubernetesConflict     stale resourceVersion, or the name already exists
    HTTP 404                       -> KubernetesNotFound
    HTTP 401, 403                  -> KubernetesForbidden
    HTTP 429                       -> KubernetesThrottled    ``retry_after`` from the Retry-After header, else
                                                             from the Status body's ``details.retryAfterSeconds``
    HTTP 5xx, 408, no status;
    urllib3 and connection errors  -> KubernetesUnavailable  nothing usable came back: try again later
    HTTP 410                       -> KubernetesUnavailable  Gone, reason Expired: a list's continue token (or a
                                                             resourceVersion) is older than the history the API
                                                             server keeps; a new list, without it, answers
    HTTP 400, 422, any other       -> KubernetesInvalid      the request itself is refused

Every failed call answers a ``Status`` object (``kind: Status``, ``reason``, ``code``, ``message``, ``details``,
``details.retryAfterSeconds``) and a 429 may carry ``Retry-After`` in seconds (Kubernetes API concepts;
apimachinery ``metav1.Status``, ``StatusDetails``). A continue token expires when the API server compacts its
history (every 5 minutes by default), and a list continued with it answers 410 Gone ("Retrieving large results sets
in chunks": "the client will need to start from the beginning"): a request that can succeed when made again. The
client raises ``ApiException`` with ``status``, ``reason``, ``body`` and ``headers`` for an answer, and lets
urllib3's ``HTTPError`` (retries exhausted, timeouts) or an ``OSError`` through when none came.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError as Urllib3Error

from models.errors import (
    KubernetesApiError,
    KubernetesConflict,
    KubernetesForbidden,
    KubernetesInvalid,
    KubernetesNotFound,
    KubernetesThrottled,
    KubernetesUnavailable,
)

# What a call to the client raises when it fails: an answer that is not 2xx, or no answer.
CLIENT_ERRORS: tuple[type[Exception], ...] = (ApiException, Urllib3Error, OSError)

_BY_STATUS: dict[int, type[KubernetesApiError]] = {
    400: KubernetesInvalid,
    401: KubernetesForbidden,
    403: KubernetesForbidden,
    404: KubernetesNotFound,
    408: KubernetesUnavailable,
    409: KubernetesConflict,
    410: KubernetesUnavailable,
    422: KubernetesInvalid,
}

T = TypeVar("T")


def translate(exc: Exception) -> KubernetesApiError:
    """The ``models.errors`` class for a failure of the ``kubernetes`` client (see the table above)."""
    if not isinstance(exc, ApiException):
        return KubernetesUnavailable(None, f"{type(exc).__name__}: {exc}")
    status = int(exc.status) if exc.status else None
    reason = str(exc.reason or "").strip()
    detail = _text(exc.body)
    if status is None or status >= 500:
        return KubernetesUnavailable(status, reason or ("no status" if status is None else ""), detail)
    if status == 429:
        return KubernetesThrottled(status, reason, detail, retry_after(exc.headers, detail))
    return _BY_STATUS.get(status, KubernetesInvalid)(status, reason, detail)


def call(request: Callable[[], T]) -> T:
    """``request()``, with the client's failures raised as their ``models.errors`` class."""
    try:
        return request()
    except CLIENT_ERRORS as exc:
        raise translate(exc) from exc


def retry_after(headers: Mapping[str, str] | None, body: str = "") -> float | None:
    """Seconds to wait: the ``Retry-After`` header (delta-seconds), else ``details.retryAfterSeconds`` in the
    Status body; ``None`` when neither says (an HTTP-date is not used by the API server and is ignored)."""
    for name, value in (headers or {}).items():
        if name.lower() == "retry-after":
            try:
                seconds = float(str(value).strip())
            except ValueError:
                break
            if seconds >= 0:
                return seconds
            break
    details = _json(body).get("details")
    hint = details.get("retryAfterSeconds") if isinstance(details, dict) else None
    return float(hint) if isinstance(hint, int | float) and hint > 0 else None


def _text(body: object) -> str:
    if isinstance(body, bytes):
        return body.decode("utf-8", "replace")
    return "" if body is None else str(body)


def _json(body: str) -> dict[str, Any]:
    try:
        found = json.loads(body) if body else {}
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}
