"""A notifier that keeps what it was told, with per-window de-duplication like the real one."""

from __future__ import annotations

from datetime import datetime, timedelta

from models import AlertEvent


class RecordingNotifier:
    def __init__(self, dedup_window: timedelta = timedelta(hours=1)) -> None:
        self.dedup_window = dedup_window
        self.events: list[AlertEvent] = []
        self._last_sent: dict[str, datetime] = {}

    def notify(self, event: AlertEvent) -> bool:
        for key in event.repeat_of_keys:
            last = self._last_sent.get(key)
            if last is not None and event.at - last < self.dedup_window:
                return True
        self._last_sent[event.dedup_key] = event.at
        self.events.append(event)
        return True
