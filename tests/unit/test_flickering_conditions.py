"""A level condition that flickers (a class's newest sample stale on every other tick, a pool read that fails now
and then) is not told each way at every flicker: its end is told once it has gone unseen for ``alerts.resolve_after``,
at most once per ``alerts.dedup_window``, and a "resolved" held while Slack is down is dropped when the condition is
raised again, instead of arriving after the newer raise.

The tracker is fed ticks as the loop feeds it; the loop's own runs replay a trace on a simulated cluster, their alerts
posted through the Slack notifier to a local webhook receiver, as in ``test_resolved_conditions``."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from actuators import SimulatedCluster
from agent.alerts import missing_data_events
from agent.conditions import ConditionTracker
from agent.ledger import InMemoryLedger
from agent.loop import Agent, AgentParts
from agent.notify.recording import RecordingNotifier
from agent.notify.slack import SlackNotifier, build_slack_notifier
from agent.sources.trace import TraceSource, read_trace
from config import settings_from_mapping
from config.alerts import AlertSettings
from forecasting.factory import build_forecaster
from models import AlertKind
from models.clock import SimulatedClock
from tests.conftest import TraceWriter
from tests.fakes.slack_receiver import SlackReceiver
from tests.unit.test_missing_data_alerts import NOW, START, arrive, config

NAN = float("nan")
TRAIN_OUT = (
    "[WARNING] Metrics missing or stale: holding: demand class train - Holding pools: no trustworthy demand for train"
)
T0 = datetime(2024, 3, 5, 10, 0, tzinfo=UTC)


@pytest.fixture
def receiver() -> Iterator[SlackReceiver]:
    with SlackReceiver() as running:
        yield running


def _told(notifier: RecordingNotifier) -> list[str]:
    return [f"{'resolved' if e.resolved else e.severity} {e.at:%H:%M}" for e in notifier.events]


def _feed(tracker: ConditionTracker, notifier: RecordingNotifier, ticks: Mapping[int, bool]) -> None:
    """A tick at each minute of ``ticks``: a100's demand is missing at those whose value is True."""
    for minute, missing in sorted(ticks.items()):
        now = T0 + timedelta(minutes=minute)
        raised = missing_data_events({"a100": "the newest sample is stale"}, now) if missing else []
        for event in [*raised, *tracker.update(now, raised)]:
            notifier.notify(event)


def test_a_condition_missing_on_every_other_tick_is_told_once_per_window_and_never_resolved() -> None:
    tracker, notifier = (
        ConditionTracker(timedelta(minutes=5), timedelta(hours=1)),
        RecordingNotifier(timedelta(hours=1)),
    )
    _feed(tracker, notifier, {minute: minute % 2 == 0 for minute in range(120)})  # two hours of 1-minute ticks
    assert _told(notifier) == ["warning 10:00", "warning 11:00"]  # 120 messages, each way every minute, before
    assert tracker.active == ((AlertKind.MISSING_DATA, "demand class a100"),)


def test_an_end_is_told_once_the_condition_has_gone_unseen_for_resolve_after() -> None:
    tracker, notifier = (
        ConditionTracker(timedelta(minutes=5), timedelta(hours=1)),
        RecordingNotifier(timedelta(hours=1)),
    )
    # seen at 0 and 3; gone from 1 to 2 (not for long enough) and from 4
    _feed(tracker, notifier, {0: True, 1: False, 2: False, 3: True, **dict.fromkeys(range(4, 12), False)})
    assert _told(notifier) == ["warning 10:00", "resolved 10:08"]
    end = notifier.events[-1]
    assert end.summary == (
        "No longer holds, after 4m: raised 2024-03-05 10:00 UTC, last seen 2024-03-05 10:03 UTC, "
        "gone at 2024-03-05 10:04 UTC."
    )
    assert end.details["told at"] == "2024-03-05 10:08 UTC: an end is told once the condition has gone unseen for 5m"


def test_a_second_end_within_the_window_waits_for_the_window_and_is_told_if_the_condition_is_still_gone() -> None:
    tracker, notifier = (
        ConditionTracker(timedelta(minutes=5), timedelta(hours=1)),
        RecordingNotifier(timedelta(hours=1)),
    )
    # out at 0; back at 20 (told again: it had been gone for long), seen at 20 and 40 only, gone after 40
    ticks = {minute: minute in (0, 20, 40) for minute in range(0, 90)}
    _feed(tracker, notifier, ticks)
    assert _told(notifier) == ["warning 10:00", "resolved 10:05", "warning 10:20", "resolved 11:05"]
    end = notifier.events[-1]
    assert end.summary == (
        "No longer holds, after 21m: raised 2024-03-05 10:20 UTC, last seen 2024-03-05 10:40 UTC, "
        "gone at 2024-03-05 10:41 UTC."
    )
    assert end.details["told at"] == (
        "2024-03-05 11:05 UTC: the end before was told at 2024-03-05 10:05 UTC, and an end is told at most once per "
        "1h (alerts.dedup_window)"
    )
    assert tracker.active == ()


@pytest.mark.parametrize(("present", "period"), [(1, 7), (1, 12), (10, 20), (1, 30)])
def test_a_condition_that_comes_and_goes_slower_than_resolve_after_posts_a_few_messages_per_window(
    present: int, period: int
) -> None:
    tracker, notifier = (
        ConditionTracker(timedelta(minutes=5), timedelta(hours=1)),
        RecordingNotifier(timedelta(hours=1)),
    )
    _feed(tracker, notifier, {minute: minute % period < present for minute in range(180)})  # three hours
    told = notifier.events
    ends = [e.at for e in told if e.resolved]
    assert all(later - earlier >= timedelta(hours=1) for earlier, later in itertools.pairwise(ends))
    for hour in range(3):  # a raise and an end per hour once the first hour has told both, instead of one per flicker
        start = T0 + timedelta(hours=hour)
        assert len([e for e in told if start <= e.at < start + timedelta(hours=1)]) <= (3 if hour == 0 else 2)
    assert [e.resolved for e in told] == [i % 2 == 1 for i in range(len(told))]  # raise, end, raise, end...


def test_a_tracker_that_forgets_its_conditions_forgets_the_ends_it_told() -> None:
    tracker, notifier = (
        ConditionTracker(timedelta(minutes=5), timedelta(hours=1)),
        RecordingNotifier(timedelta(hours=1)),
    )
    _feed(tracker, notifier, {0: True, 5: False, 10: True})
    tracker.forget()  # a replica that lost the lead and took it back: its ends before say nothing of now
    _feed(tracker, notifier, {11: True, 20: False})
    assert _told(notifier) == ["warning 10:00", "resolved 10:05", "warning 10:10", "resolved 10:20"]


# -- the loop, its settings and Slack ---------------------------------------------------------------------------


def _agent(
    trace: Path, clock: SimulatedClock, receiver: SlackReceiver, alerts: Mapping[str, Any]
) -> tuple[Agent, SlackNotifier]:
    loaded = settings_from_mapping({**config(), "alerts": dict(alerts)}, source="test config")
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


def _run(agent: Agent, clock: SimulatedClock, minutes: Sequence[int]) -> dict[str, str]:
    said = {}
    for minute in minutes:
        clock.set(NOW + timedelta(minutes=minute))
        arrive(agent, clock)
        said[f"{clock.now():%H:%M}"] = ",".join(sorted(agent.run_once(clock.now()).problems))
    return said


def test_the_loop_tells_an_end_once_gone_for_alerts_resolve_after(
    receiver: SlackReceiver, write_trace: TraceWriter
) -> None:
    # train's demand is missing at the 10:05 and 10:10 ticks, back from 10:15
    trace = write_trace({"train": [16.0] * 22 + [NAN] * 4 + [16.0] * 20, "serve": [16.0] * 46}, start=START.isoformat())
    clock = SimulatedClock(NOW)
    agent, _ = _agent(trace, clock, receiver, {"dedup_window": "1h", "resolve_after": "15m"})
    said = _run(agent, clock, range(0, 35, 5))
    assert [at for at, held in said.items() if held] == ["10:05", "10:10"]
    assert [m["text"] for m in receiver.received] == [
        TRAIN_OUT,
        "[RESOLVED] Resolved: Metrics missing or stale: holding: demand class train - No longer holds, after 10m: "
        "raised 2024-03-05 10:05 UTC, last seen 2024-03-05 10:10 UTC, gone at 2024-03-05 10:15 UTC.",
    ]
    assert receiver.received[1]["blocks"][-1]["elements"][0]["text"].startswith(
        "missing-data · resolved · 2024-03-05 10:25:00 UTC"  # told once unseen for 15 minutes, not at 10:15
    )


def test_the_loop_tells_one_end_per_alerts_dedup_window(receiver: SlackReceiver, write_trace: TraceWriter) -> None:
    # train's demand is missing at 10:05-10:10 and 10:40-10:45, back at 10:15 and from 10:50
    trace = write_trace(
        {"train": [16.0] * 22 + [NAN] * 4 + [16.0] * 3 + [NAN] * 4 + [16.0] * 20, "serve": [16.0] * 53},
        start=START.isoformat(),
    )
    clock = SimulatedClock(NOW)
    agent, _ = _agent(trace, clock, receiver, {"dedup_window": "45m"})
    said = _run(agent, clock, range(0, 70, 5))
    assert [at for at, held in said.items() if held] == ["10:05", "10:10", "10:40", "10:45"]
    texts = [m["text"] for m in receiver.received]
    assert texts == [
        TRAIN_OUT,
        "[RESOLVED] Resolved: Metrics missing or stale: holding: demand class train - No longer holds, after 10m: "
        "raised 2024-03-05 10:05 UTC, last seen 2024-03-05 10:10 UTC, gone at 2024-03-05 10:15 UTC.",
        TRAIN_OUT,  # back 25 minutes after its end: told again, within the window of the first
        "[RESOLVED] Resolved: Metrics missing or stale: holding: demand class train - No longer holds, after 10m: "
        "raised 2024-03-05 10:40 UTC, last seen 2024-03-05 10:45 UTC, gone at 2024-03-05 10:50 UTC.",
    ]
    assert receiver.received[3]["blocks"][-1]["elements"][0]["text"].startswith(
        "missing-data · resolved · 2024-03-05 11:00:00 UTC"  # a window after the first end, not at 10:50
    )
