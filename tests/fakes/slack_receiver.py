"""A local stand-in for a Slack incoming webhook on 127.0.0.1: records what is posted, answers from a script.

Each scripted answer is (status, body, headers, delay_s, hold); without one it answers 200 ``ok`` like Slack does.
``hold`` is an event the answer waits for (a webhook that hangs until the test releases it, or the receiver stops),
so tests can observe a client blocked inside a request without measuring time.
Only posts to the webhook path are accepted (anything else gets 404 ``no_service``, as Slack answers).
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

WEBHOOK_PATH = "/services/T0LEADTIME/B0ALERTS/s3cr3tT0k3nN0tF0rL0gs"


@dataclass(frozen=True)
class Answer:
    status: int = 200
    body: str = "ok"
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    hold: threading.Event | None = None


class SlackReceiver:
    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self.script: deque[Answer] = deque()
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            disable_nagle_algorithm = True

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                payload = self.rfile.read(length)
                if self.path != WEBHOOK_PATH:
                    self._answer(Answer(404, "no_service"))
                    return
                with receiver._lock:
                    receiver.received.append(json.loads(payload))
                    answer = receiver.script.popleft() if receiver.script else Answer()
                if answer.delay_s:
                    receiver._stopping.wait(answer.delay_s)
                if answer.hold is not None:
                    while not (answer.hold.is_set() or receiver._stopping.is_set()):
                        answer.hold.wait(0.05)
                self._answer(answer)

            def _answer(self, answer: Answer) -> None:
                body = answer.body.encode()
                try:
                    self.send_response(answer.status)
                    self.send_header("Content-Type", "text/plain")
                    self.send_header("Content-Length", str(len(body)))
                    for key, value in answer.headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout); nothing to tell it

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._serve, name="slack-receiver", daemon=True)

    def _serve(self) -> None:
        self._server.serve_forever(poll_interval=0.05)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}{WEBHOOK_PATH}"

    def answer(self, *answers: Answer) -> None:
        with self._lock:
            self.script.extend(answers)

    def start(self) -> SlackReceiver:
        self._thread.start()
        return self

    def count(self) -> int:
        with self._lock:
            return len(self.received)

    def wait_for(self, count: int, timeout_s: float = 30.0) -> bool:
        """Block until ``count`` posts arrived (a generous bound, for a delivery thread); True if they did."""
        deadline = time.monotonic() + timeout_s
        while self.count() < count and time.monotonic() < deadline:
            self._stopping.wait(0.01)
        return self.count() >= count

    def stop(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> SlackReceiver:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()
