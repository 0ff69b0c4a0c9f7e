"""Where alerts go when the daemon runs: Slack with a webhook URL, else the log only, which the start says (and why)
and /metrics shows; the log then keeps the promise Slack keeps, one message per condition per ``dedup_window``,
with the same de-duplication (a higher severity is never taken for a repeat of a lower one)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import CollectorRegistry

from agent.commands.run import alert_notifier, export_alert_sink
from agent.notify.log import LogNotifier
from agent.notify.queued import QueuedNotifier
from config.alerts import AlertSettings
from models import AlertEvent, AlertKind, Severity
from models.clock import SimulatedClock
from tests.fakes.slack_receiver import WEBHOOK_PATH, SlackReceiver

T0 = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
SECRET = WEBHOOK_PATH.rsplit("/", 1)[-1]


@pytest.fixture
def receiver() -> Iterator[SlackReceiver]:
    with SlackReceiver() as running:
        yield running


def held(subject: str, minute: int, severity: Severity = Severity.WARNING) -> AlertEvent:
    return AlertEvent(
        AlertKind.MISSING_DATA,
        severity,
        T0 + timedelta(minutes=minute),
        subject,
        f"Holding pools: no demand for {subject}",
    )


def alert_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage().split(" Holding")[0] for r in caplog.records if r.name == "leadtime.alerts"]


def test_the_log_writes_one_line_per_condition_per_window_not_one_per_tick(caplog: pytest.LogCaptureFixture) -> None:
    """A class held for two hours, raised every one-minute tick, beside another class held for ten minutes."""
    notifier = LogNotifier(dedup_window=timedelta(hours=1))
    with caplog.at_level(logging.INFO, logger="leadtime.alerts"):
        for minute in range(120):
            assert notifier.notify(held("demand class a", minute))
            if minute < 10:
                assert notifier.notify(held("demand class b", minute))
    assert alert_lines(caplog) == [
        "alert kind=missing-data subject=demand class a",
        "alert kind=missing-data subject=demand class b",
        "alert kind=missing-data subject=demand class a",  # minute 60: the window has passed
    ]


def test_the_log_never_takes_a_higher_severity_for_a_repeat(caplog: pytest.LogCaptureFixture) -> None:
    notifier = LogNotifier(dedup_window=timedelta(hours=1))
    with caplog.at_level(logging.INFO, logger="leadtime.alerts"):
        notifier.notify(held("demand class a", 0))
        notifier.notify(held("demand class a", 5, Severity.CRITICAL))  # worse: told at once
        notifier.notify(held("demand class a", 6))  # the warning again: the critical covers it
    assert [r.levelno for r in caplog.records if r.name == "leadtime.alerts"] == [logging.WARNING, logging.ERROR]


def test_without_a_webhook_url_the_start_says_alerts_go_to_the_log_only_and_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The shipped Secret is optional: a missing Secret or key leaves the variable unset."""
    with caplog.at_level(logging.INFO, logger="agent.commands.run"):
        notifier, queue = alert_notifier(AlertSettings(), SimulatedClock(T0), {})
    assert isinstance(notifier, LogNotifier) and queue is None
    assert notifier.dedup_window == timedelta(hours=1)
    [said] = [r for r in caplog.records if r.name == "agent.commands.run"]
    assert said.levelno == logging.WARNING
    message = said.getMessage()
    assert message.startswith("alerts go to the log only, not to Slack: no webhook URL in the environment variable ")
    assert "LEADTIME_SLACK_WEBHOOK_URL (alerts.slack_webhook_url_env; the shipped manifests fill it from the" in message
    assert "Secret leadtime-slack, key webhook-url), which is unset or empty" in message
    assert "one log line per condition per 1:00:00" in message


def test_a_renamed_variable_is_named_in_the_warning(caplog: pytest.LogCaptureFixture) -> None:
    """``alerts.slack_webhook_url_env`` renamed, the Deployment still filling the shipped variable."""
    settings = AlertSettings(slack_webhook_url_env="TEAM_ALERTS_WEBHOOK")
    environ = {"LEADTIME_SLACK_WEBHOOK_URL": f"https://hooks.slack.com{WEBHOOK_PATH}"}
    with caplog.at_level(logging.INFO, logger="agent.commands.run"):
        notifier, queue = alert_notifier(settings, SimulatedClock(T0), environ)
    assert isinstance(notifier, LogNotifier) and queue is None
    [said] = [r.getMessage() for r in caplog.records if r.name == "agent.commands.run"]
    assert "no webhook URL in the environment variable TEAM_ALERTS_WEBHOOK (alerts.slack_webhook_url_env)" in said


def test_with_a_webhook_url_the_start_says_alerts_go_to_slack_without_the_url(
    receiver: SlackReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="agent.commands.run"):
        notifier, queue = alert_notifier(
            AlertSettings(), SimulatedClock(T0), {"LEADTIME_SLACK_WEBHOOK_URL": receiver.url}
        )
    assert isinstance(queue, QueuedNotifier) and notifier is queue
    [said] = [r for r in caplog.records if r.name == "agent.commands.run"]
    assert said.levelno == logging.INFO
    assert said.getMessage().startswith(
        "alerts go to Slack, to the incoming webhook whose URL is in the environment variable "
        "LEADTIME_SLACK_WEBHOOK_URL"
    )
    assert SECRET not in said.getMessage()
    assert queue.close(timedelta(seconds=5))


@pytest.mark.parametrize(("sink", "other"), [("log", "slack"), ("slack", "log")])
def test_metrics_say_where_alerts_go(sink: str, other: str) -> None:
    registry = CollectorRegistry()
    export_alert_sink(registry, sink)
    assert registry.get_sample_value("leadtime_alerts_sink", {"sink": sink}) == 1
    assert registry.get_sample_value("leadtime_alerts_sink", {"sink": other}) == 0
