"""A notifier that keeps what it was told, with per-window de-duplication like the real one."""

from __future__ import annotations

from datetime import timedelta

from agent.notify.dedup import DedupWindow
from models import AlertEvent


class RecordingNotifier:
    def __init__(self, dedup_window: timedelta = timedelta(hours=1)) -> None:
        self.dedup_window = dedup_window
        self.events: list[AlertEvent] = []
        self._told = DedupWindow(dedup_window)

    def notify(self, event: AlertEvent) -> bool:
        if self._told.is_repeat(event):
            return True
        self._told.handled(event)
        self.events.append(event)
        return True
