"""De-duplication of alerts, shared by every notifier: one message per condition per window, measured in event
time. A repeat is an event whose condition (kind and subject) was handled within the window at its severity or a
higher one (``AlertEvent.repeat_of_keys``): a higher severity is never a repeat of a lower one. An event older
than the last one handled of its key is a repeat too (it says nothing newer)."""

from __future__ import annotations

from datetime import datetime, timedelta

from models import AlertEvent


class DedupWindow:
    def __init__(self, window: timedelta) -> None:
        self.window = window
        self._handled: dict[str, datetime] = {}

    def is_repeat(self, event: AlertEvent) -> bool:
        for key in event.repeat_of_keys:
            last = self._handled.get(key)
            if last is not None and event.at - last < self.window:
                return True
        return False

    def handled(self, event: AlertEvent) -> None:
        """Record ``event`` as told (or deliberately not told): its repeats are quiet for the window. The end of a
        condition (``AlertEvent.resolved``) clears it, so that the condition is told at once if it comes back."""
        if event.resolved:
            for key in event.condition_keys:
                self._handled.pop(key, None)
        self._handled[event.dedup_key] = event.at

    def last_handled(self, event: AlertEvent) -> datetime | None:
        """When the last event of ``event``'s key that was handled happened, if any."""
        return self._handled.get(event.dedup_key)
