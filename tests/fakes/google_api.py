"""GoogleJsonServer: what the fake Google Cloud APIs share: the error body Google's REST APIs return, a request
log of (method, path), and fault injection (the next N matching requests fail with a chosen status and message).
"""

from __future__ import annotations

import json
from abc import abstractmethod
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.fakes.http_server import LocalJsonServer

Obj = dict[str, Any]
# The usual google.rpc.Code of each HTTP status (Google API errors: "HTTP Mapping"). FAILED_PRECONDITION and
# OUT_OF_RANGE are 400 too: an error raised with them names its code explicitly.
_STATUS = {400: "INVALID_ARGUMENT", 403: "PERMISSION_DENIED", 404: "NOT_FOUND", 409: "ALREADY_EXISTS"}
_STATUS |= {429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}


class GoogleApiError(Exception):
    """An error as Google's REST APIs send it: ``{"error": {"code", "message", "status"}}``; Compute Engine's also
    carry ``errors: [{"domain", "reason", "message"}]`` (``reason`` given), and an error may carry a
    ``google.rpc.ErrorInfo`` in ``details`` (``info`` given: its reason), as Compute Engine's concurrent operation
    quota error does (Compute Engine docs, "Concurrent operation quotas")."""

    def __init__(
        self, code: int, message: str, status: str | None = None, reason: str | None = None, info: str | None = None
    ) -> None:
        super().__init__(message)
        self.code, self.message, self.status = code, message, status or _STATUS.get(code, "UNKNOWN")
        self.reason, self.info = reason, info

    def body(self) -> Obj:
        error: Obj = {"code": self.code, "message": self.message, "status": self.status}
        if self.reason is not None:
            error["errors"] = [{"domain": "global", "reason": self.reason, "message": self.message}]
        if self.info is not None:
            detail = {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": self.info}
            error["details"] = [detail | {"domain": "compute.googleapis.com"}]
        return {"error": error}


class GoogleJsonServer(LocalJsonServer):
    """Subclasses implement ``route(method, path, query, body) -> JSON`` and raise ``GoogleApiError``."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[tuple[str, str]] = []  # (method, path without query)
        self._faults: list[list[Any]] = []  # [remaining, path fragment, the error]

    def fail_next(
        self,
        count: int = 1,
        status: int = 500,
        message: str = "injected fault",
        path: str = "",
        reason: str | None = None,
        info: str | None = None,
        method: str = "",
    ) -> None:
        """The next ``count`` requests whose path contains ``path`` (sent with ``method``, if given) answer ``status``
        with ``message`` (and the ``errors[].reason`` and ``ErrorInfo`` reason given)."""
        with self._lock:
            self._faults.append([count, path, GoogleApiError(status, message, reason=reason, info=info), method])

    def calls(self, method: str, fragment: str = "") -> int:
        with self._lock:
            return sum(1 for m, p in self.requests if m == method and fragment in p)

    def respond(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, Any]:
        parts = urlsplit(path)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        with self._lock:
            self.requests.append((method, parts.path))
            try:
                for fault in self._faults:
                    if fault[0] > 0 and fault[1] in parts.path and fault[3] in ("", method):
                        fault[0] -= 1
                        raise fault[2]
                return 200, self.route(method, parts.path, query, json.loads(body) if body else {})
            except GoogleApiError as exc:
                return exc.code, exc.body()

    @abstractmethod
    def route(self, method: str, path: str, query: dict[str, str], body: Obj) -> Obj:
        """The API's answer to one request; raise GoogleApiError for an error answer."""
