"""An on-prem pool whose capacity history read ran out of its share of the tick is not asked again at every tick.
A pool not read at the hourly refresh stays due and was read again at the next tick whose own (instant) capacity
read of it worked; when the 14-day range query itself hangs while the instant reads answer, every tick of the hour
asked it again and waited out the read's deadline, half of every tick. After a read that ran out of its time the
pool is now asked again no earlier than ``SLOW_READ_RETRY`` later, the wait doubling with each such read up to the
hourly refresh, whatever the quick reads say; a read that answers ends the wait.

A small local HTTP server stands in for Prometheus (``tests/test_profile_read_hung_prometheus``: the documented
instant vector and matrix shapes) and records every query; the capacity range queries are held unanswered while
``hang`` is set, the real prometheus-api-client and requests session talk to it. The counts are of requests sent."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import parse_qs, urlparse

import pytest

from agent.burst_history import SLOW_READ_RETRY
from agent.loop import Agent
from tests.fakes.http_server import serving
from tests.test_profile_read_hung_prometheus import CAPACITY, NOW, Stub, _agent, _Handler, _settings

TICK = timedelta(seconds=2)  # the settings' tick interval: the capacity history is read within 1 s


class _HangingRange(_Handler):
    """Answers every query as ``_Handler`` does, except the capacity range queries while ``hang`` is set; records
    each capacity query by its path in ``seen``."""

    hang: threading.Event
    seen: list[str]

    def do_GET(self) -> None:
        url = urlparse(self.path)
        query = parse_qs(url.query).get("query", [""])[-1]
        if query in CAPACITY.values():
            with self.stub.lock:
                self.seen.append(url.path)
        if url.path == "/api/v1/query_range" and query in CAPACITY.values() and self.hang.is_set():
            self.stub.released.wait()
            self.close_connection = True
            return
        super().do_GET()


@dataclass
class _Rig:
    agent: Agent
    stub: Stub
    hang: threading.Event
    seen: list[str]

    def count(self, path: str) -> int:
        """Capacity queries sent so far on ``path``."""
        with self.stub.lock:
            return self.seen.count(path)


RANGE, INSTANT = "/api/v1/query_range", "/api/v1/query"


@pytest.fixture
def rig() -> Iterator[_Rig]:
    state, hang, seen = Stub(answers=lambda query: True), threading.Event(), list[str]()
    hang.set()
    with serving(type("Handler", (_HangingRange,), {"stub": state, "hang": hang, "seen": seen})) as url:
        try:
            yield _Rig(_agent(_settings(url)), state, hang, seen)
        finally:
            state.released.set()


def test_a_hung_capacity_history_is_not_asked_again_at_every_tick(rig: _Rig, caplog: pytest.LogCaptureFixture) -> None:
    now = NOW + timedelta(minutes=1)
    with caplog.at_level(logging.WARNING, logger="agent.burst_history"):
        rig.agent.run_once(now)  # the hourly refresh: the first pool's range query hangs for the read's 1 s
    assert rig.count(RANGE) == 1
    assert f"read again no earlier than {(now + SLOW_READ_RETRY).isoformat()}" in caplog.text
    instant = rig.count(INSTANT)

    for _ in range(5):
        now += TICK
        rig.agent.run_once(now)

    assert rig.count(INSTANT) == instant + 5 * len(CAPACITY)  # every tick's quick read of each pool was sent
    assert rig.count(RANGE) == 1  # and the history was not asked again


def test_the_wait_doubles_and_a_read_that_answers_ends_it(rig: _Rig) -> None:
    start = NOW + timedelta(minutes=1)
    rig.agent.run_once(start)

    rig.agent.run_once(start + SLOW_READ_RETRY - TICK)
    assert rig.count(RANGE) == 1
    rig.agent.run_once(start + SLOW_READ_RETRY)  # hangs again: the next wait is twice as long
    assert rig.count(RANGE) == 2
    rig.agent.run_once(start + 3 * SLOW_READ_RETRY - TICK)
    assert rig.count(RANGE) == 2

    rig.hang.clear()
    rig.agent.run_once(start + 3 * SLOW_READ_RETRY)  # answered: each pool read over the history
    assert rig.count(RANGE) == 2 + len(CAPACITY)
    rig.agent.run_once(start + 3 * SLOW_READ_RETRY + TICK)
    assert rig.count(RANGE) == 2 + len(CAPACITY)  # nothing due any more
