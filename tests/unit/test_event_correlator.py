"""EventCorrelator: the same involved object, type, reason and message is one Event whose count grows (patched),
anything else a new Event; the cache is bounded and forgets the oldest key first, as client-go's LRU does."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from agent.daemon.event_correlator import EventCorrelator, EventKey

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
KEY = EventKey("default", "Node", "node-1", "node-1", "Warning", "DrainBlocked", "waiting for web")


def _write(correlator: EventCorrelator, key: EventKey, at: datetime, name: str = "node-1.abc") -> int:
    seen = correlator.observe(key, at)
    correlator.written(key, seen.previous.name if seen.previous else name, seen)
    return seen.count


def test_repeats_of_one_key_patch_one_event_with_a_growing_count_and_the_first_time_kept() -> None:
    correlator = EventCorrelator()
    first = correlator.observe(KEY, T0)
    assert (first.previous, first.count, first.first) == (None, 1, T0)
    correlator.written(KEY, "node-1.abc", first)
    second = correlator.observe(KEY, T0 + timedelta(minutes=1))
    assert second.previous is not None and second.previous.name == "node-1.abc"
    assert (second.count, second.first) == (2, T0)
    correlator.written(KEY, "node-1.abc", second)
    assert correlator.observe(KEY, T0 + timedelta(minutes=2)).count == 3


def test_an_observation_not_written_does_not_count() -> None:
    correlator = EventCorrelator()
    correlator.observe(KEY, T0)  # the create failed: nothing was written
    assert correlator.observe(KEY, T0 + timedelta(minutes=1)).previous is None


def test_a_different_message_reason_type_or_object_is_another_event() -> None:
    correlator = EventCorrelator()
    _write(correlator, KEY, T0)
    for other in (
        replace(KEY, message="waiting for db"),
        replace(KEY, reason="DrainFinished"),
        replace(KEY, type="Normal"),
        replace(KEY, name="node-2", uid="node-2"),
        replace(KEY, namespace="leadtime"),
    ):
        assert correlator.observe(other, T0).previous is None


def test_the_cache_is_bounded_and_evicts_the_least_recently_seen_key() -> None:
    correlator = EventCorrelator(size=2)
    a, b, c = (replace(KEY, message=m) for m in "abc")
    _write(correlator, a, T0)
    _write(correlator, b, T0)
    _write(correlator, a, T0 + timedelta(minutes=1))  # a is now the most recent
    _write(correlator, c, T0 + timedelta(minutes=2))  # evicts b
    assert correlator.observe(b, T0).previous is None
    assert correlator.observe(a, T0).count == 3
    assert correlator.observe(c, T0).count == 2


def test_a_forgotten_key_starts_a_new_event() -> None:
    correlator = EventCorrelator()
    _write(correlator, KEY, T0)
    correlator.forget(KEY)
    assert correlator.observe(KEY, T0 + timedelta(hours=2)).previous is None
