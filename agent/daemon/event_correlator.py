"""Repeated Events become one Event with a count, the way Kubernetes' own recorders aggregate them.

client-go's ``EventCorrelator`` keys an Event on its source, involved object, type, reason and message; when the
same key is seen again it PATCHes the Event it created (``count`` + 1, ``lastTimestamp``) instead of creating a
new object, and keeps the keys it has seen in an LRU cache of 4096 entries. ``EventCorrelator.observe`` makes
that decision; it does no I/O. A patch that answers 404 (the Event expired, by default after an hour, or was
deleted) is followed by ``forget`` and a fresh create, as client-go does.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime

CACHE_SIZE = 4096  # client-go's maxLruCacheEntries


@dataclass(frozen=True)
class EventKey:
    """What makes two Events the same: the involved object, type, reason and message (one source: ours)."""

    namespace: str
    kind: str
    name: str
    uid: str
    type: str
    reason: str
    message: str


@dataclass(frozen=True)
class Seen:
    """The Event written for a key: its name, how often it happened and when first."""

    name: str
    count: int
    first: datetime


@dataclass(frozen=True)
class Correlation:
    """``previous`` is None: create a new Event. Otherwise patch ``previous.name`` to ``count``."""

    previous: Seen | None
    count: int
    first: datetime


class EventCorrelator:
    def __init__(self, size: int = CACHE_SIZE) -> None:
        self._size = size
        self._seen: OrderedDict[EventKey, Seen] = OrderedDict()

    def observe(self, key: EventKey, now: datetime) -> Correlation:
        seen = self._seen.get(key)
        if seen is None:
            return Correlation(None, 1, now)
        self._seen.move_to_end(key)
        return Correlation(seen, seen.count + 1, seen.first)

    def written(self, key: EventKey, name: str, correlation: Correlation) -> None:
        """Remember that the Event for ``key`` named ``name`` now has ``correlation.count``."""
        self._seen[key] = Seen(name, correlation.count, correlation.first)
        self._seen.move_to_end(key)
        while len(self._seen) > self._size:
            self._seen.popitem(last=False)

    def forget(self, key: EventKey) -> None:
        self._seen.pop(key, None)
