"""The Notifier interface. ``notify`` never raises for a delivery failure: an outage of the chat service must
not block or crash the loop. It returns whether the event was delivered (or deliberately suppressed)."""

from __future__ import annotations

from typing import Protocol

from models import AlertEvent


class Notifier(Protocol):
    def notify(self, event: AlertEvent) -> bool: ...
