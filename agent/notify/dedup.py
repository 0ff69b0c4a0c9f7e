"""De-duplication of alerts, shared by every notifier: one message per condition per window, measured in event
time. A repeat is an event whose condition (kind and subject) was handled within the window at its severity or a
higher one (``AlertEvent.repeat_of_keys``): a higher severity is never a repeat of a lower one.

An event older than the last one handled of its key says that the wall clock was stepped back since (NTP, a VM
resumed with a wrong clock): the time between them is measured on the monotonic clock instead, so it is a repeat
only if that one was handled less than a window ago. Event time alone kept a condition told while the clock was
ahead silent for the step's length on top of the window (6 h ahead: a condition still holding 2 h after the
correction was not told again, with a window of 1 h). The step is logged, once per key.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from models import AlertEvent

log = logging.getLogger(__name__)


class DedupWindow:
    def __init__(self, window: timedelta, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.window = window
        self._monotonic = monotonic
        self._handled: dict[str, tuple[datetime, float]] = {}  # key -> the event time handled, the monotonic time then
        self._stepped: set[str] = set()  # keys whose step back was logged, until handled again

    def is_repeat(self, event: AlertEvent) -> bool:
        for key in event.repeat_of_keys:
            handled = self._handled.get(key)
            if handled is None:
                continue
            last, handled_at = handled
            if event.at >= last:
                if event.at - last < self.window:
                    return True
                continue
            since = timedelta(seconds=self._monotonic() - handled_at)
            self._tell_step(key, last, event, since)
            if since < self.window:
                return True
        return False

    def handled(self, event: AlertEvent) -> None:
        """Record ``event`` as told (or deliberately not told): its repeats are quiet for the window. The end of a
        condition (``AlertEvent.resolved``) clears it, so that the condition is told at once if it comes back."""
        if event.resolved:
            for key in event.condition_keys:
                self._handled.pop(key, None)
                self._stepped.discard(key)
        self._handled[event.dedup_key] = (event.at, self._monotonic())
        self._stepped.difference_update(event.repeat_of_keys)

    def last_handled(self, event: AlertEvent) -> datetime | None:
        """When the last event of ``event``'s key that was handled happened, if any."""
        handled = self._handled.get(event.dedup_key)
        return None if handled is None else handled[0]

    def _tell_step(self, key: str, last: datetime, event: AlertEvent, since: timedelta) -> None:
        if key in self._stepped:
            return
        self._stepped.add(key)
        log.warning(
            "alert %s %s at %s is %s older than the last one handled (%s), %s ago by the monotonic clock: the wall "
            "clock was stepped back since (NTP, a resumed VM; check the node's time sync); it is told again once "
            "%s has passed since then on the monotonic clock",
            event.kind,
            event.subject,
            event.at.isoformat(timespec="seconds"),
            last - event.at,
            last.isoformat(timespec="seconds"),
            since,
            self.window,
            extra={"step_s": (last - event.at).total_seconds()},
        )
