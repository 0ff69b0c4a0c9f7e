"""Alert delivery off the tick path: the real slack_sdk client on the delivery thread against the local webhook
receiver, made to hang and to answer 429. What the loop calls returns while the receiver still holds the request
(observed with events, not measured in time), and the message arrives later."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from prometheus_client import CollectorRegistry
from slack_sdk.http_retry import builtin_handlers

from agent.notify.queued import AlertQueueCollector, QueuedNotifier, queued_slack_notifier
from agent.notify.slack import build_slack_notifier
from config.alerts import AlertSettings
from models import AlertEvent, AlertKind, Severity
from models.clock import SimulatedClock
from tests.fakes.slack_receiver import Answer, SlackReceiver

T0 = datetime(2024, 3, 5, 10, 0, tzinfo=UTC)
IDLE = timedelta(seconds=30)  # a generous bound for the delivery thread; the tests never measure time


@pytest.fixture
def receiver() -> Iterator[SlackReceiver]:
    with SlackReceiver() as running:
        yield running


@pytest.fixture
def clock() -> SimulatedClock:
    return SimulatedClock(T0)


@pytest.fixture
def hold() -> Iterator[threading.Event]:
    """Released at the end of the test (or after a minute) so a hanging request never outlives it."""
    released = threading.Event()
    backstop = threading.Timer(60.0, released.set)
    backstop.start()
    yield released
    released.set()
    backstop.cancel()


def queued(url: str, clock: SimulatedClock, max_queued: int = 100, **overrides: object) -> QueuedNotifier:
    settings = AlertSettings.model_validate({"request_timeout": "60s", **overrides})
    slack = build_slack_notifier(settings, clock, {"LEADTIME_SLACK_WEBHOOK_URL": url})
    assert slack is not None
    return QueuedNotifier(slack, max_queued=max_queued)


def event(subject: str, at: datetime = T0) -> AlertEvent:
    return AlertEvent(AlertKind.STOCKOUT, Severity.WARNING, at, subject, "no capacity", {"pool": "tpu-v5e"})


def subjects(receiver: SlackReceiver) -> list[str]:
    return [m["blocks"][1]["text"]["text"].split("\n")[0].strip("*") for m in receiver.received]


def returns(call: Callable[[], object]) -> object:
    """Run ``call`` on a helper thread; a call that blocked on Slack would fail here instead of hanging."""
    result: list[object] = []
    helper = threading.Thread(target=lambda: result.append(call()), daemon=True)
    helper.start()
    helper.join(IDLE.total_seconds())
    assert result, "the call blocked"
    return result[0]


def test_notify_returns_while_slack_hangs_and_the_message_arrives_later(
    receiver: SlackReceiver, clock: SimulatedClock, hold: threading.Event
) -> None:
    receiver.answer(Answer(hold=hold))
    slack = queued(receiver.url, clock)
    assert slack.notify(event("first")) is True
    assert receiver.wait_for(1)  # the delivery thread is inside the request now, and stays there
    assert returns(lambda: slack.notify(event("second"))) is True
    assert returns(slack.flush) == 0  # what the loop calls once a tick
    assert not hold.is_set() and receiver.count() == 1  # both returned while Slack still held the first post
    hold.set()
    assert receiver.wait_for(2)
    assert slack.wait_idle(IDLE)
    assert subjects(receiver) == ["first", "second"]
    assert slack.close(IDLE)


def test_a_429_is_waited_out_on_the_delivery_thread_not_in_notify(
    receiver: SlackReceiver, clock: SimulatedClock, hold: threading.Event, monkeypatch: pytest.MonkeyPatch
) -> None:
    sleeping = threading.Event()
    waits: list[float] = []

    def sleep(seconds: float) -> None:  # the SDK's Retry-After sleep, held until the test lets it go
        waits.append(seconds)
        sleeping.set()
        hold.wait()

    monkeypatch.setattr(builtin_handlers, "time", SimpleNamespace(sleep=sleep))
    receiver.answer(Answer(429, "rate_limited", {"Retry-After": "2"}))
    slack = queued(receiver.url, clock, max_retry_after="5s")
    assert slack.notify(event("limited")) is True
    assert sleeping.wait(IDLE.total_seconds())  # the thread honours Retry-After ...
    assert receiver.count() == 1 and not hold.is_set()  # ... while notify has long returned
    hold.set()
    assert receiver.wait_for(2)
    assert slack.wait_idle(IDLE)
    assert len(waits) == 1 and 2.0 <= waits[0] < 3.0
    assert subjects(receiver) == ["limited", "limited"]
    assert slack.queued == 0


def test_alerts_queued_while_slack_is_down_are_sent_when_it_returns(
    receiver: SlackReceiver, clock: SimulatedClock
) -> None:
    receiver.answer(Answer(500, "internal_error"))
    slack = queued(receiver.url, clock, outage_backoff="1m")
    assert slack.notify(event("a")) and slack.notify(event("b"))
    assert slack.wait_idle(IDLE)
    assert receiver.count() == 1  # one try, then the back-off holds both
    assert slack.queued == 2
    clock.advance(timedelta(minutes=1))
    slack.flush()
    assert receiver.wait_for(3)
    assert slack.wait_idle(IDLE)
    assert subjects(receiver)[1:] == ["a", "b"]
    assert slack.queued == 0


def test_dedup_and_the_rate_limit_still_hold(receiver: SlackReceiver, clock: SimulatedClock) -> None:
    slack = queued(receiver.url, clock, rate_limit_per_minute=2, dedup_window="1h")
    for name in ("p0", "p1", "p0", "p2", "p3"):
        slack.notify(event(name))
    assert slack.wait_idle(IDLE)
    assert subjects(receiver) == ["p0", "p1"]  # the third p0 is a duplicate; p2 and p3 wait for tokens
    clock.advance(timedelta(seconds=30))
    slack.flush()
    assert slack.wait_idle(IDLE) and receiver.wait_for(3)
    clock.advance(timedelta(minutes=1))
    slack.flush()
    assert receiver.wait_for(4) and slack.wait_idle(IDLE)
    slack.notify(event("p0", at=T0 + timedelta(minutes=2)))  # still within the dedup window
    assert slack.close(IDLE)
    assert subjects(receiver) == ["p0", "p1", "p2", "p3"]


def test_a_full_queue_drops_the_oldest_counts_and_logs_it(
    receiver: SlackReceiver, clock: SimulatedClock, hold: threading.Event, caplog: pytest.LogCaptureFixture
) -> None:
    receiver.answer(Answer(hold=hold))
    slack = queued(receiver.url, clock, max_queued=2)
    registry = CollectorRegistry()
    registry.register(AlertQueueCollector(slack))
    slack.notify(event("e0"))
    assert receiver.wait_for(1)  # e0 is being delivered; the queue fills behind it
    with caplog.at_level(logging.WARNING, logger="agent.notify.queued"):
        for i in range(1, 5):
            assert slack.notify(event(f"e{i}")) is True
    assert slack.dropped == 2
    assert registry.get_sample_value("leadtime_alerts_dropped_total") == 2
    assert registry.get_sample_value("leadtime_alerts_queued") == 3  # e3 and e4, and e0 under way
    assert [r.getMessage() for r in caplog.records] == [
        "alert queue full (2): dropped the oldest alert stockout e1",
        "alert queue full (2): dropped the oldest alert stockout e2",
    ]
    hold.set()
    assert receiver.wait_for(3) and slack.wait_idle(IDLE)
    assert subjects(receiver) == ["e0", "e3", "e4"]


def test_alerts_dropped_while_slack_is_down_are_counted(receiver: SlackReceiver, clock: SimulatedClock) -> None:
    """Each alert reaches the delivery thread (the queue never fills); the alerts held while Slack is down do."""
    receiver.answer(Answer(500, "internal_error"))
    slack = queued(receiver.url, clock, outage_backoff="1m", max_pending=2)
    registry = CollectorRegistry()
    registry.register(AlertQueueCollector(slack))
    for i in range(5):
        slack.notify(event(f"e{i}"))
        assert slack.wait_idle(IDLE)
    assert registry.get_sample_value("leadtime_alerts_dropped_total") == 3
    assert (slack.dropped, slack.dropped_total) == (0, 3)
    assert registry.get_sample_value("leadtime_alerts_queued") == 2
    clock.advance(timedelta(minutes=1))
    slack.flush()
    assert receiver.wait_for(3) and slack.wait_idle(IDLE)
    assert subjects(receiver) == ["e0", "e3", "e4"]  # e0 tried once when Slack answered 500, then dropped


def test_alerts_slack_refuses_are_counted_apart_from_dropped_ones(
    receiver: SlackReceiver, clock: SimulatedClock
) -> None:
    receiver.answer(Answer(400, "invalid_blocks"))
    slack = queued(receiver.url, clock)
    registry = CollectorRegistry()
    registry.register(AlertQueueCollector(slack))
    slack.notify(event("refused"))
    slack.notify(event("fine"))
    assert receiver.wait_for(2) and slack.wait_idle(IDLE)
    assert registry.get_sample_value("leadtime_alerts_rejected_total") == 1
    assert registry.get_sample_value("leadtime_alerts_dropped_total") == 0
    assert slack.queued == 0


def test_close_delivers_what_is_queued_and_then_takes_no_more(receiver: SlackReceiver, clock: SimulatedClock) -> None:
    slack = queued(receiver.url, clock)
    for name in ("a", "b", "c"):
        slack.notify(event(name))
    assert slack.close(IDLE) is True
    assert subjects(receiver) == ["a", "b", "c"]
    assert slack.notify(event("late")) is False


def test_close_gives_up_at_its_deadline_while_slack_hangs(
    receiver: SlackReceiver, clock: SimulatedClock, hold: threading.Event, caplog: pytest.LogCaptureFixture
) -> None:
    receiver.answer(Answer(hold=hold))
    slack = queued(receiver.url, clock)
    slack.notify(event("stuck"))
    slack.notify(event("behind"))
    assert receiver.wait_for(1)
    with caplog.at_level(logging.WARNING, logger="agent.notify.queued"):
        assert slack.close(timedelta(milliseconds=100)) is False
    assert not hold.is_set()  # close returned on its own deadline, not because Slack answered
    assert "stopping with 2 alert(s) undelivered and a delivery still under way" in caplog.text


def test_the_daemon_gets_slack_behind_a_queue_only_with_a_webhook_url(receiver: SlackReceiver) -> None:
    clock = SimulatedClock(T0)
    settings = AlertSettings(max_pending=7)
    assert queued_slack_notifier(settings, clock, {}) is None
    slack = queued_slack_notifier(settings, clock, {"LEADTIME_SLACK_WEBHOOK_URL": receiver.url})
    assert isinstance(slack, QueuedNotifier)
    slack.notify(event("wired"))
    assert slack.close(IDLE)
    assert subjects(receiver) == ["wired"]
