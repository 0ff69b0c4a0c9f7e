"""Alert delivery off the tick path: ``QueuedNotifier`` puts each alert on a bounded queue and returns at once; a
delivery thread of its own hands them to the notifier it wraps (Slack), which may block on the network, honour a
Retry-After, or hold alerts while Slack is down.

What it promises the loop: ``notify`` and ``flush`` never wait on the chat service, whatever it does (hangs, 429s,
refuses connections). What it promises people: de-duplication, the rate limit and the outage back-off of the
wrapped notifier still hold (they run on the delivery thread); alerts queued while Slack is down are sent when it
returns (the thread retries the wrapped notifier's pending alerts every ``retry_every``, and at once when the loop
calls ``flush``); when the queue is full the oldest alert is dropped, counted and logged; on shutdown ``close``
delivers what it can within a bounded deadline and says what it could not.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from datetime import timedelta
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from agent.notify.slack import build_slack_notifier
from config.alerts import AlertSettings
from models import AlertEvent
from models.clock import Clock

log = logging.getLogger(__name__)


class HoldingNotifier(Protocol):
    """A notifier that keeps what it could not deliver (``pending``) and retries it on ``flush``."""

    def notify(self, event: AlertEvent) -> bool: ...

    def flush(self) -> int: ...

    @property
    def pending(self) -> tuple[AlertEvent, ...]: ...

    @property
    def dropped(self) -> int:
        """Held alerts dropped, oldest first, because too many were held."""
        ...

    @property
    def rejected(self) -> int:
        """Alerts the chat service refused outright, never to be retried."""
        ...

    @property
    def webhook_refused(self) -> bool:
        """The chat service refuses the webhook itself: nothing gets through until it is replaced."""
        ...


class QueuedNotifier:
    def __init__(
        self,
        inner: HoldingNotifier,
        *,
        max_queued: int = 100,
        retry_every: timedelta = timedelta(seconds=1),
        name: str = "alert-delivery",
    ) -> None:
        if max_queued < 1:
            raise ValueError("max_queued must be at least 1")
        self._inner = inner
        self._max_queued = max_queued
        self._retry_s = retry_every.total_seconds()
        self._name = name
        self._queue: deque[AlertEvent] = deque()
        self._changed = threading.Condition()
        self._wake = False
        self._closing = False
        self._stopped = False
        self._busy = False
        self._in_flight = 0  # taken off the queue, not yet handed to the inner notifier
        self._holding = 0  # alerts the inner notifier keeps, as of the thread's last pass
        self._thread: threading.Thread | None = None
        self.dropped = 0

    def __repr__(self) -> str:
        return f"QueuedNotifier(queued={len(self._queue)}, dropped={self.dropped}, inner={self._inner!r})"

    # -- what the loop calls (never blocks on delivery) -------------------------------------------------------
    def notify(self, event: AlertEvent) -> bool:
        """Queue ``event`` for delivery; True when queued (False only after ``close``)."""
        dropped: AlertEvent | None = None
        with self._changed:
            if self._closing:
                log.warning("alert %s %s not queued: alert delivery has stopped", event.kind, event.subject)
                return False
            if len(self._queue) >= self._max_queued:
                dropped = self._queue.popleft()
                self.dropped += 1
            self._queue.append(event)
            self._wake = True
            self._start_locked()
            self._changed.notify_all()
        if dropped is not None:
            log.warning(
                "alert queue full (%d): dropped the oldest alert %s %s",
                self._max_queued,
                dropped.kind,
                dropped.subject,
                extra={"dropped_total": self.dropped},
            )
        return True

    def flush(self) -> int:
        """Ask the delivery thread to retry held alerts now. Sends nothing itself: returns 0 at once."""
        with self._changed:
            if self._thread is not None:
                self._wake = True
                self._changed.notify_all()
        return 0

    @property
    def dropped_total(self) -> int:
        """Alerts dropped because a queue was full: this one, or the alerts the wrapped notifier holds while Slack
        is down (the same loss to people, so counted together)."""
        return self.dropped + self._inner.dropped

    @property
    def rejected(self) -> int:
        """Alerts Slack refused outright (an invalid message): lost too, but not for a full queue."""
        return self._inner.rejected

    @property
    def webhook_refused(self) -> bool:
        """Slack refuses the webhook itself (403, 404, 410): every alert is held until it is replaced."""
        return self._inner.webhook_refused

    @property
    def queued(self) -> int:
        """Alerts not yet delivered: waiting in the queue, plus those the wrapped notifier holds."""
        with self._changed:
            return len(self._queue) + self._in_flight + self._holding

    def wait_idle(self, timeout: timedelta) -> bool:
        """Block until the queue is empty and no delivery is under way (or ``timeout`` passes); True if idle.
        For shutdown and tests; the loop never calls it."""
        deadline = time.monotonic() + timeout.total_seconds()
        with self._changed:
            while self._queue or self._busy or self._wake:
                left = deadline - time.monotonic()
                if left <= 0 or self._thread is None:
                    return not (self._queue or self._busy)
                self._changed.wait(left)
        return True

    def close(self, timeout: timedelta) -> bool:
        """Stop taking alerts, deliver the queued and held ones until ``timeout`` passes, stop the thread.
        True when nothing was left undelivered."""
        deadline = time.monotonic() + timeout.total_seconds()
        with self._changed:
            self._closing = True
            self._wake = True
            thread = self._thread
            self._changed.notify_all()
        if thread is not None:
            while thread.is_alive() and time.monotonic() < deadline:
                with self._changed:
                    self._wake = True
                    self._changed.notify_all()
                thread.join(min(self._retry_s, max(0.0, deadline - time.monotonic())))
        with self._changed:
            self._stopped = True  # past the deadline: the thread gives up after the delivery under way
            self._changed.notify_all()
            left = len(self._queue) + self._in_flight + self._holding
        still_running = thread is not None and thread.is_alive()
        if left or still_running:
            log.warning(
                "stopping with %d alert(s) undelivered%s after %s",
                left,
                " and a delivery still under way" if still_running else "",
                timeout,
            )
            return False
        return True

    # -- the delivery thread ----------------------------------------------------------------------------------
    def _start_locked(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._changed:
                if self._stopped:
                    return
                while not (self._queue or self._wake or self._closing):
                    if not self._changed.wait(self._retry_s) and self._holding:
                        break  # time to retry what the wrapped notifier holds
                batch = list(self._queue)
                self._queue.clear()
                self._in_flight = len(batch)
                self._wake = False
                self._busy = True
                closing = self._closing
            self._deliver(batch)
            with self._changed:
                self._busy = False
                self._changed.notify_all()
                if closing and not self._queue and not self._holding:
                    return
                if closing and not batch:
                    self._changed.wait(self._retry_s)  # held alerts: retry until close's deadline

    def _deliver(self, batch: list[AlertEvent]) -> None:
        for event in batch:
            self._guarded(functools.partial(self._inner.notify, event))
            with self._changed:
                self._in_flight -= 1
        if not batch:
            self._guarded(self._inner.flush)
        holding = len(self._inner.pending)
        with self._changed:
            self._holding = holding

    @staticmethod
    def _guarded(action: Callable[[], object]) -> None:
        try:
            action()
        except Exception as exc:  # noqa: BLE001 - the delivery thread must outlive any notifier failure
            log.warning("alert delivery failed (%s): %s", type(exc).__name__, exc)


def queued_slack_notifier(settings: AlertSettings, clock: Clock, environ: Mapping[str, str]) -> QueuedNotifier | None:
    """The Slack notifier of the settings behind a delivery queue, or ``None`` when no webhook URL is configured."""
    slack = build_slack_notifier(settings, clock, environ)
    if slack is None:
        return None
    return QueuedNotifier(slack, max_queued=settings.max_pending, name="slack-delivery")


class AlertQueueCollector(Collector):
    """``leadtime_alerts_queued`` (waiting or held), ``leadtime_alerts_dropped_total`` (a queue full),
    ``leadtime_alerts_rejected_total`` (refused by Slack) and ``leadtime_alerts_webhook_refused`` (1 while Slack
    refuses the webhook itself) for /metrics."""

    def __init__(self, notifier: QueuedNotifier) -> None:
        self._notifier = notifier

    def collect(self) -> Iterable[Metric]:
        queued = GaugeMetricFamily("leadtime_alerts_queued", "Alerts waiting for delivery or held while Slack is down.")
        queued.add_metric([], self._notifier.queued)
        dropped = CounterMetricFamily(
            "leadtime_alerts_dropped",
            "Alerts dropped, oldest first, because too many were waiting for delivery or held while Slack was down.",
        )
        dropped.add_metric([], self._notifier.dropped_total)
        rejected = CounterMetricFamily(
            "leadtime_alerts_rejected", "Alerts Slack refused (HTTP 400, an invalid message) and that were dropped."
        )
        rejected.add_metric([], self._notifier.rejected)
        refused = GaugeMetricFamily(
            "leadtime_alerts_webhook_refused",
            "1 while Slack refuses the alert webhook itself (HTTP 403, 404 or 410: channel archived or gone, webhook "
            "revoked): no alert gets through until the webhook is replaced and the agent restarted; else 0.",
        )
        refused.add_metric([], 1 if self._notifier.webhook_refused else 0)
        return [queued, dropped, rejected, refused]
