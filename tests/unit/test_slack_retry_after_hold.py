"""A 429 that slack_sdk retried in place and that Slack answered with a 429 again holds the alert for the second
answer's Retry-After, counted from when that answer arrived: the wait slack_sdk already slept before its retry does
not count against it. Real slack_sdk client over HTTP against the local webhook receiver; slack_sdk's in-place wait
(``RateLimitErrorRetryHandler``, which sleeps Retry-After plus up to a second of jitter) runs on the test's clock."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from slack_sdk.http_retry import builtin_handlers

from agent.notify.slack import build_slack_notifier
from config.alerts import AlertSettings
from models import AlertEvent, AlertKind, Severity
from models.clock import SimulatedClock
from tests.fakes.slack_receiver import Answer, SlackReceiver

T0 = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)


@pytest.fixture
def receiver() -> Iterator[SlackReceiver]:
    with SlackReceiver() as running:
        yield running


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> SimulatedClock:
    """The test's clock, which slack_sdk's in-place wait before its retry advances (instead of sleeping)."""
    simulated = SimulatedClock(T0)
    slept = SimpleNamespace(sleep=lambda seconds: simulated.advance(timedelta(seconds=seconds)))
    monkeypatch.setattr(builtin_handlers, "time", slept)
    return simulated


def test_a_second_429_holds_the_alert_for_its_retry_after_from_when_it_arrived(
    receiver: SlackReceiver, clock: SimulatedClock
) -> None:
    receiver.answer(
        Answer(429, "rate_limited", {"Retry-After": "3"}), Answer(429, "rate_limited", {"Retry-After": "3"})
    )
    settings = AlertSettings.model_validate({"request_timeout": "1s", "max_retry_after": "5s"})
    slack = build_slack_notifier(settings, clock, {"LEADTIME_SLACK_WEBHOOK_URL": receiver.url})
    assert slack is not None
    sent_at = clock.monotonic()
    alert = AlertEvent(AlertKind.STOCKOUT, Severity.WARNING, T0, "a100-on-demand", "no capacity in us-central1-a")

    assert not slack.notify(alert)  # 429, retried in place after Retry-After, and 429 again
    assert receiver.count() == 2
    answered_at = clock.monotonic()
    assert 3.0 <= answered_at - sent_at < 4.0  # slack_sdk waited the first Retry-After before its retry
    assert slack.flush() == 0  # the next flush, at once: held (it posted a third time at once before)
    clock.advance(timedelta(seconds=2.9))
    assert slack.flush() == 0
    assert receiver.count() == 2
    clock.advance(timedelta(seconds=0.2))  # the second answer's Retry-After has passed since it arrived (not on its
    # very edge: slack_sdk's random jitter makes the times floats whose sum may round either side of it)
    assert slack.flush() == 1
    assert receiver.count() == 3
    assert slack.pending == ()
