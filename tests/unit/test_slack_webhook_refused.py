"""A webhook Slack refuses (HTTP 403, 404, 410: its channel archived or gone, the webhook revoked) silences every
alert with no retry that helps: the real slack_sdk client against the local webhook receiver shows that the error
saying what to do is logged whenever the cause becomes such a refusal, also after an outage that began otherwise,
and that /metrics says so for as long as it lasts."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import CollectorRegistry

from agent.notify.queued import AlertQueueCollector, QueuedNotifier
from agent.notify.slack import SlackNotifier, build_slack_notifier
from config.alerts import AlertSettings
from models import AlertEvent, AlertKind, Severity
from models.clock import SimulatedClock
from tests.fakes.slack_receiver import Answer, SlackReceiver

T0 = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
IDLE = timedelta(seconds=30)  # a generous bound for the delivery thread; the tests never measure time


@pytest.fixture
def receiver() -> Iterator[SlackReceiver]:
    with SlackReceiver() as running:
        yield running


@pytest.fixture
def clock() -> SimulatedClock:
    return SimulatedClock(T0)


def slack_notifier(url: str, clock: SimulatedClock, **overrides: object) -> SlackNotifier:
    settings = AlertSettings.model_validate({"request_timeout": "2s", "outage_backoff": "1m", **overrides})
    built = build_slack_notifier(settings, clock, {}, url=url)
    assert built is not None
    return built


def stockout(at: datetime) -> AlertEvent:
    return AlertEvent(AlertKind.STOCKOUT, Severity.WARNING, at, "h100", "No capacity for h100", {"zone": "a"})


def errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_refusal_after_a_blip_of_another_kind_is_logged_as_an_error_that_says_what_to_do(
    receiver: SlackReceiver, clock: SimulatedClock, caplog: pytest.LogCaptureFixture
) -> None:
    receiver.answer(Answer(503, "service_unavailable"), Answer(410, "channel_is_archived"), Answer(410, "gone"))
    slack = slack_notifier(receiver.url, clock)
    with caplog.at_level(logging.DEBUG, logger="agent.notify.slack"):
        assert not slack.notify(stockout(T0))  # the 503: an outage starts, logged as a warning
        assert errors(caplog) == [] and not slack.webhook_refused
        clock.advance(timedelta(minutes=1))
        assert slack.flush() == 0  # the 410: the outage goes on, its cause is now the webhook itself
        assert slack.webhook_refused
        clock.advance(timedelta(minutes=16))
        assert slack.flush() == 0  # refused again: already told
    assert receiver.count() == 3 and len(slack.pending) == 1
    [error] = errors(caplog)
    assert "Slack refuses the alert webhook (HTTP 410: channel_is_archived)" in error
    assert "the environment variable LEADTIME_SLACK_WEBHOOK_URL (alerts.slack_webhook_url_env" in error
    assert "the Secret leadtime-slack, key webhook-url" in error
    assert "kubectl -n leadtime rollout restart deployment/leadtime" in error
    assert "the 1 held now, and those raised meanwhile, are lost at the restart" in error
    assert "tried again every 0:16:00" in error
    clock.advance(timedelta(minutes=16))
    assert slack.flush() == 1  # Slack takes the webhook again (here: the channel back)
    assert not slack.webhook_refused


def test_the_error_names_the_file_the_url_comes_from(
    receiver: SlackReceiver, clock: SimulatedClock, caplog: pytest.LogCaptureFixture
) -> None:
    receiver.answer(Answer(403, "action_prohibited"))
    slack = slack_notifier(receiver.url, clock, slack_webhook_url_file="/etc/leadtime-slack/webhook-url")
    with caplog.at_level(logging.ERROR, logger="agent.notify.slack"):
        assert not slack.notify(stockout(T0))
    [error] = errors(caplog)
    assert "put its URL in the file /etc/leadtime-slack/webhook-url (alerts.slack_webhook_url_file)" in error
    assert "Secret" not in error  # the shipped manifests' Secret fills the environment variable, not this file


def test_each_time_the_cause_becomes_a_refusal_it_is_logged_again(
    receiver: SlackReceiver, clock: SimulatedClock, caplog: pytest.LogCaptureFixture
) -> None:
    """Refused, delivered once the channel is back, refused again: two errors, one per refusal."""
    receiver.answer(Answer(404, "channel_not_found"), Answer(200, "ok"), Answer(410, "channel_is_archived"))
    slack = slack_notifier(receiver.url, clock)
    with caplog.at_level(logging.ERROR, logger="agent.notify.slack"):
        assert not slack.notify(stockout(T0))
        clock.advance(timedelta(minutes=16))
        assert slack.flush() == 1
        assert not slack.notify(stockout(T0 + timedelta(hours=2)))  # a new window: posted, and refused
    assert [e.split(")")[0] for e in errors(caplog)] == [
        "Slack refuses the alert webhook (HTTP 404: channel_not_found",
        "Slack refuses the alert webhook (HTTP 410: channel_is_archived",
    ]


def test_metrics_say_the_webhook_is_refused_for_as_long_as_it_is(
    receiver: SlackReceiver, clock: SimulatedClock
) -> None:
    """Nothing is dropped while the webhook is refused, so the dropped counter stays 0: the gauge tells it."""
    receiver.answer(Answer(503, "service_unavailable"), *[Answer(410, "channel_is_archived")] * 2)
    queue = QueuedNotifier(slack_notifier(receiver.url, clock), retry_every=timedelta(hours=1))
    registry = CollectorRegistry()
    registry.register(AlertQueueCollector(queue))
    assert registry.get_sample_value("leadtime_alerts_webhook_refused") == 0
    queue.notify(stockout(T0))
    assert receiver.wait_for(1) and queue.wait_idle(IDLE)
    assert registry.get_sample_value("leadtime_alerts_webhook_refused") == 0  # a 503 says nothing of the webhook
    clock.advance(timedelta(minutes=1))
    queue.flush()
    assert receiver.wait_for(2) and queue.wait_idle(IDLE)
    assert registry.get_sample_value("leadtime_alerts_webhook_refused") == 1
    assert registry.get_sample_value("leadtime_alerts_queued") == 1
    assert registry.get_sample_value("leadtime_alerts_dropped_total") == 0
    clock.advance(timedelta(minutes=16))
    queue.flush()
    assert receiver.wait_for(3) and queue.wait_idle(IDLE)
    assert registry.get_sample_value("leadtime_alerts_webhook_refused") == 1  # refused again
    clock.advance(timedelta(minutes=16))
    queue.flush()
    assert receiver.wait_for(4) and queue.wait_idle(IDLE)
    assert registry.get_sample_value("leadtime_alerts_webhook_refused") == 0  # Slack took it
    assert registry.get_sample_value("leadtime_alerts_queued") == 0
    assert queue.close(IDLE)
