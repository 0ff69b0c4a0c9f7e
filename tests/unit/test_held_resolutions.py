"""While Slack is down, the end of a condition ("resolved") is held with the alerts before it; when the condition is
raised again before Slack returns, the held end is stale and dropped: posted after the newer raise, it would say the
condition ended while it holds, and clear its de-duplication so that the next tick posts the raise once more.

The Slack notifier posts to a local webhook receiver with the real slack_sdk client over HTTP; the loop replays a
trace on a simulated cluster, as in ``test_flickering_conditions``."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from actuators import SimulatedCluster
from agent.conditions import ConditionTracker
from agent.ledger import InMemoryLedger
from agent.loop import Agent, AgentParts
from agent.notify.slack import SlackNotifier, build_slack_notifier
from agent.sources.trace import TraceSource, read_trace
from config import settings_from_mapping
from config.alerts import AlertSettings
from forecasting.factory import build_forecaster
from models import AlertEvent, AlertKind, Severity
from models.clock import SimulatedClock
from tests.conftest import TraceWriter
from tests.fakes.slack_receiver import Answer, SlackReceiver
from tests.unit.test_missing_data_alerts import NOW, START, arrive, config

NAN = float("nan")
T0 = datetime(2024, 3, 5, 10, 0, tzinfo=UTC)
TRAIN_OUT = (
    "[WARNING] Metrics missing or stale: holding: demand class train - Holding pools: no trustworthy demand for train"
)


@pytest.fixture
def receiver() -> Iterator[SlackReceiver]:
    with SlackReceiver() as running:
        yield running


def _agent(trace: Path, clock: SimulatedClock, receiver: SlackReceiver) -> tuple[Agent, SlackNotifier]:
    """The loop on ``trace``, its alerts posted to ``receiver``, retried a second after Slack fails."""
    alerts = {"dedup_window": "1h", "outage_backoff": "1s"}
    loaded = settings_from_mapping({**config(), "alerts": alerts}, source="test config")
    slack = build_slack_notifier(
        AlertSettings.model_validate({**alerts, "request_timeout": "1s", "rate_limit_per_minute": 60}),
        clock,
        {"LEADTIME_SLACK_WEBHOOK_URL": receiver.url},
    )
    assert slack is not None
    cluster = SimulatedCluster(loaded.pool_specs(), clock, dict.fromkeys((p.id for p in loaded.pools), 0))
    parts = AgentParts(
        TraceSource(read_trace(trace)), build_forecaster(loaded.forecast), cluster, InMemoryLedger(), slack
    )
    return Agent(loaded, parts, holder="test"), slack


def _run(agent: Agent, clock: SimulatedClock, minutes: Sequence[int]) -> None:
    for minute in minutes:
        clock.set(NOW + timedelta(minutes=minute))
        arrive(agent, clock)
        agent.run_once(clock.now())


def test_a_resolution_held_while_slack_is_down_is_dropped_when_the_condition_is_raised_again(
    receiver: SlackReceiver, write_trace: TraceWriter
) -> None:
    # Slack is down from the first alert; train is out at 10:05, back at 10:15, out again from 10:40
    trace = write_trace({"train": [16.0] * 22 + [NAN] * 4 + [16.0] * 3 + [NAN] * 20, "serve": [16.0] * 49},
                        start=START.isoformat())  # fmt: skip
    receiver.answer(*[Answer(503, "service_unavailable")] * 100)
    clock = SimulatedClock(NOW)
    agent, slack = _agent(trace, clock, receiver)
    _run(agent, clock, range(0, 40, 5))
    # the raise keeps its place with the newest event of it, the end behind it
    assert [(e.resolved, f"{e.at:%H:%M}") for e in slack.pending] == [(False, "10:10"), (True, "10:15")]
    _run(agent, clock, [40])  # raised again, Slack still down: the held end is stale
    assert [(e.resolved, f"{e.at:%H:%M}") for e in slack.pending] == [(False, "10:40")]
    failed = len(receiver.received)
    receiver.script.clear()  # Slack is back (no post is under way between ticks)
    _run(agent, clock, [45, 50])
    delivered = receiver.received[failed:]
    assert [m["text"] for m in delivered] == [TRAIN_OUT]  # not the raise, then "Resolved", then the raise again
    assert delivered[0]["blocks"][-1]["elements"][0]["text"].startswith("missing-data · warning · 2024-03-05 10:45")


def test_a_resolution_held_behind_a_delivered_raise_is_dropped_by_a_repeat_of_the_raise(
    receiver: SlackReceiver,
) -> None:
    clock = SimulatedClock(T0)
    slack = build_slack_notifier(
        AlertSettings.model_validate({"request_timeout": "1s", "outage_backoff": "1s"}),
        clock,
        {"LEADTIME_SLACK_WEBHOOK_URL": receiver.url},
    )
    assert slack is not None
    out = AlertEvent(AlertKind.POOL_UNREADABLE, Severity.WARNING, T0, "a100", "HTTP 503 listing the pool")
    tracker = ConditionTracker(timedelta(minutes=5), timedelta(hours=1))
    assert slack.notify(out) and tracker.update(T0, [out]) == []  # delivered before Slack went down
    receiver.answer(Answer(503, "service_unavailable"))
    clock.set(T0 + timedelta(minutes=5))
    [end] = tracker.update(clock.now(), [])
    assert not slack.notify(end)  # tried, and held
    clock.set(T0 + timedelta(minutes=6))
    again = AlertEvent(AlertKind.POOL_UNREADABLE, Severity.WARNING, clock.now(), "a100", "HTTP 503 listing the pool")
    assert slack.notify(again)  # a repeat of the raise told at 10:00, within the window
    assert slack.pending == ()
    clock.set(T0 + timedelta(minutes=7))  # Slack is back
    assert slack.flush() == 0
    assert [m["text"][:20] for m in receiver.received] == ["[WARNING] Pool state", "[RESOLVED] Resolved:"]
    assert slack.delivered == 1  # the raise; the end was tried once, refused 503, and not posted after it


def test_a_resolution_held_while_slack_is_down_is_delivered_after_its_raise_when_nothing_came_back(
    receiver: SlackReceiver,
) -> None:
    clock = SimulatedClock(T0)
    slack = build_slack_notifier(
        AlertSettings.model_validate({"request_timeout": "1s", "outage_backoff": "1s"}),
        clock,
        {"LEADTIME_SLACK_WEBHOOK_URL": receiver.url},
    )
    assert slack is not None
    receiver.answer(*[Answer(503, "service_unavailable")] * 2)
    out = AlertEvent(AlertKind.POOL_UNREADABLE, Severity.WARNING, T0, "a100", "HTTP 503 listing the pool")
    tracker = ConditionTracker(timedelta(minutes=5), timedelta(hours=1))
    assert not slack.notify(out) and tracker.update(T0, [out]) == []
    clock.set(T0 + timedelta(minutes=5))
    [end] = tracker.update(clock.now(), [])
    assert not slack.notify(end)
    clock.set(T0 + timedelta(minutes=6))
    assert slack.flush() == 2
    assert [m["text"][:20] for m in receiver.received[2:]] == ["[WARNING] Pool state", "[RESOLVED] Resolved:"]
