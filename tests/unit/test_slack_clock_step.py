"""The Slack notifier's waits (outage back-off, rate limit) run on the monotonic clock: a wall-clock step (NTP, a
resumed VM) neither stretches nor cuts them. Real slack_sdk client over HTTP against the local webhook receiver."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from agent.notify.slack import SlackNotifier, build_slack_notifier
from config.alerts import AlertSettings
from models import AlertEvent, AlertKind, Severity
from tests.fakes.slack_receiver import Answer, SlackReceiver
from tests.fakes.stepping_clock import SteppingClock

T0 = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


@pytest.fixture
def receiver() -> Iterator[SlackReceiver]:
    with SlackReceiver() as running:
        yield running


def notifier(url: str, clock: SteppingClock, **overrides: object) -> SlackNotifier:
    settings = AlertSettings.model_validate({"request_timeout": "1s", **overrides})
    built = build_slack_notifier(settings, clock, {"LEADTIME_SLACK_WEBHOOK_URL": url})
    assert built is not None
    return built


def event(subject: str, clock: SteppingClock) -> AlertEvent:
    return AlertEvent(AlertKind.STOCKOUT, Severity.WARNING, clock.now(), subject, f"no capacity for {subject}", {})


@pytest.mark.parametrize("step", [timedelta(hours=-1), timedelta(hours=1)], ids=["back-1h", "forward-1h"])
def test_the_outage_back_off_lasts_its_length_whatever_the_wall_clock_does(
    receiver: SlackReceiver, step: timedelta
) -> None:
    clock = SteppingClock(T0)
    receiver.answer(Answer(503, "service_unavailable"))
    slack = notifier(receiver.url, clock, outage_backoff="1m")
    assert not slack.notify(event("pool-a", clock))
    clock.step(step)
    clock.run(timedelta(seconds=59))
    assert slack.flush() == 0  # a forward step does not cut the back-off short
    assert receiver.count() == 1
    clock.run(timedelta(seconds=1))
    assert slack.flush() == 1  # a backward step does not hold the alert for the step's length
    assert slack.notify(event("pool-b", clock))
    assert receiver.count() == 3
    assert slack.pending == ()


def test_the_rate_limit_refills_with_the_time_that_ran_not_the_wall_clock(receiver: SlackReceiver) -> None:
    clock = SteppingClock(T0)
    slack = notifier(receiver.url, clock, rate_limit_per_minute=2)
    assert slack.notify(event("pool-a", clock))
    assert slack.notify(event("pool-b", clock))
    assert not slack.notify(event("pool-c", clock))  # the bucket is empty
    clock.step(timedelta(hours=1))
    assert slack.flush() == 0  # a forward step adds no token: no time ran
    clock.step(timedelta(hours=-2))
    clock.run(timedelta(seconds=30))
    assert slack.flush() == 1  # half a minute ran: one token, whatever the wall clock says
    assert receiver.count() == 3
    assert slack.pending == ()
