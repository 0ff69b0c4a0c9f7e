"""The first tick's own fit reads the history within a refit's deadline, and holds every class when it is cut.

While no model has been fitted, a daemon's tick fits one itself, on ``forecast.history`` read in the tick. That read
lifted the tick's read deadline and set none of its own, unlike a refit beside the ticks (half of
``forecast.refit_interval``): a Prometheus that answered the tick's short reads but not the range queries over the
history held the first tick, under the lock every tick and refit takes, for each class's timeouts and retries in
turn (4 classes, a 2 s timeout and one retry: 20.6 s; 91 s a class with the defaults). The read now ends at the
same deadline a refit's does (1.4 s for the same tick with a 1 s deadline); cut there with no model fitted, every
class is held with the reason (``RefitReadCut``), alerted as missing data, and the next tick tries again.

The local Prometheus of ``test_refit_read_does_not_hold_ticks`` answers instant and range queries as the Prometheus
HTTP API reference documents them, and holds every range query over 12 hours or more (the history's) until the test
lets it go.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta

import pytest

from agent.notify import RecordingNotifier
from models import AlertKind
from models.clock import SimulatedClock
from tests.daemon.test_refit_read_does_not_hold_ticks import (
    CLASSES,
    HELD_AT_MOST_S,
    NOW,
    SlowOnLongRanges,
    _daemon,
    _Handler,
    _settings,
)
from tests.fakes.http_server import serving

# How long the test waits for the first tick: far past its 1 s deadline, and short of the time Prometheus holds a
# range query (HELD_AT_MOST_S): a tick that waited for Prometheus is still running then.
TICK_WAIT_S = HELD_AT_MOST_S * 0.75


@pytest.fixture
def prometheus() -> Iterator[tuple[str, SlowOnLongRanges]]:
    state = SlowOnLongRanges(hold=True)  # from the start: the first tick's history read is held
    try:
        with serving(type("Handler", (_Handler,), {"state": state})) as url:
            yield url, state
    finally:
        state.release.set()


def test_the_first_ticks_history_read_ends_at_the_refit_deadline_and_holds_every_class(
    prometheus: tuple[str, SlowOnLongRanges],
) -> None:
    url, state = prometheus
    clock = SimulatedClock(NOW)
    assembled = _daemon(_settings(url, "1s", "2s"), clock)  # a refit's read may take half of refit_interval: 1 s
    daemon, agent, metrics = assembled.daemon, assembled.loop.agent, assembled.metrics
    notifier = agent.parts.notifier
    assert isinstance(notifier, RecordingNotifier)
    daemon.elect()

    tick = threading.Thread(target=daemon.tick, daemon=True)
    tick.start()  # the first tick: no model fitted, so it fits one on the history it reads
    assert state.long_read.wait(HELD_AT_MOST_S), "the first tick never read the history"
    tick.join(TICK_WAIT_S)
    assert not tick.is_alive(), "the first tick waited for Prometheus to answer the history's range queries"
    assert not state.release.is_set()  # Prometheus still holds the read: the tick ended at its deadline

    assert agent.last_refit is None  # nothing fitted on a history cut short
    held = {e.subject: e for e in notifier.events if e.kind is AlertKind.MISSING_DATA}
    assert sorted(held) == [f"demand class {name}" for name in CLASSES]
    for name in CLASSES:
        why = held[f"demand class {name}"].details[name]
        assert why.startswith("forecast failed: the refit's history read (forecast.history 1d) did not finish"), why
        assert "within 1s, half of forecast.refit_interval: 4 of 4 classes not read" in why
    assert metrics.errors.labels("MetricsUnavailable")._value.get() == len(CLASSES)  # each class held, counted

    # Prometheus answers again: the next tick fits and forecasts.
    state.hold = False
    state.release.set()
    clock.advance(timedelta(seconds=1))
    daemon.tick()
    assert agent.last_refit == clock.now()
    assert metrics.model_fitted._value.get() == clock.now().timestamp()
