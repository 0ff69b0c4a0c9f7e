"""The Notifier contract, on RecordingNotifier (simulations, tests) and on SlackNotifier (the real slack_sdk client
against a local webhook receiver): an alert is delivered once, one per alert key per de-duplication window measured
in event time, other keys are not held back by it, and the same key goes out again once the window has passed."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest

from agent.notify import Notifier, RecordingNotifier
from agent.notify.slack import build_slack_notifier
from config.alerts import AlertSettings
from models import AlertEvent, AlertKind, Severity
from models.clock import SimulatedClock
from tests.fakes.slack_receiver import SlackReceiver

T0 = datetime(2024, 3, 5, 10, 0, tzinfo=UTC)
WINDOW = timedelta(minutes=30)

# A harness: the notifier, and the subjects of what was delivered so far, in order.
Harness = tuple[Notifier, Callable[[], list[str]]]


@pytest.fixture(params=["recording", "slack"])
def harness(request: pytest.FixtureRequest) -> Iterator[Harness]:
    if request.param == "recording":
        recorder = RecordingNotifier(dedup_window=WINDOW)
        yield recorder, lambda: [e.subject for e in recorder.events]
        return
    with SlackReceiver() as receiver:
        settings = AlertSettings.model_validate({"request_timeout": "2s", "dedup_window": "30m"})
        slack = build_slack_notifier(settings, SimulatedClock(T0), {"LEADTIME_SLACK_WEBHOOK_URL": receiver.url})
        assert slack is not None
        yield slack, lambda: [m["blocks"][1]["text"]["text"].split("\n")[0].strip("*") for m in receiver.received]


def _event(subject: str, after: timedelta = timedelta(0), kind: AlertKind = AlertKind.STOCKOUT) -> AlertEvent:
    return AlertEvent(kind, Severity.WARNING, T0 + after, subject, "no capacity in us-central1-a", {"pool": "a100"})


def test_an_alert_is_delivered_once(harness: Harness) -> None:
    notifier, delivered = harness
    assert notifier.notify(_event("team-a"))
    assert delivered() == ["team-a"]


def test_one_alert_per_key_per_window_in_event_time(harness: Harness) -> None:
    notifier, delivered = harness
    assert notifier.notify(_event("team-a"))
    assert notifier.notify(_event("team-a", timedelta(minutes=29)))  # a duplicate is handled, not delivered
    assert notifier.notify(_event("team-b", timedelta(minutes=29)))  # another key is not held back
    overspend = _event("team-a", timedelta(minutes=29), AlertKind.PROJECTED_OVERSPEND)
    assert notifier.notify(overspend)  # nor another kind of alert on the same subject
    assert notifier.notify(_event("team-a", WINDOW))  # the window has passed
    assert delivered() == ["team-a", "team-b", "team-a", "team-a"]


def test_an_alert_older_than_the_last_one_of_its_key_is_a_duplicate(harness: Harness) -> None:
    notifier, delivered = harness
    assert notifier.notify(_event("team-a", timedelta(minutes=10)))
    assert notifier.notify(_event("team-a"))
    assert delivered() == ["team-a"]
