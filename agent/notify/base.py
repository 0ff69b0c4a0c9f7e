"""The Notifier interface. ``notify`` never raises for a delivery failure: an outage of the chat service must
not block or crash the loop. It returns whether the event was delivered (or deliberately suppressed)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from models import AlertEvent


class Notifier(Protocol):
    def notify(self, event: AlertEvent) -> bool: ...


@runtime_checkable
class Flushable(Protocol):
    """A notifier that holds undelivered alerts; the loop calls ``flush`` once a tick to retry them."""

    def flush(self) -> int: ...
