"""When a level condition clears, one INFO "resolved" message names it and how long it lasted, and a recurrence is
told again at once, even within the de-duplication window. A tick that fails, or a pool whose state a tick could
not read, resolves nothing: only a tick that evaluated the condition and found it gone does.

The loop runs on a replayed trace and a simulated cluster, its alerts posted through the Slack notifier to a local
webhook receiver, as in ``test_missing_data_alerts``."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from actuators import SimulatedCluster
from agent.conditions import ConditionTracker
from agent.ledger import InMemoryLedger
from agent.loop import Agent, AgentParts
from agent.notify.recording import RecordingNotifier
from agent.notify.slack import build_slack_notifier
from agent.notify.slack_message import blocks
from agent.planning.memory import Condition
from agent.sources.trace import TraceSource, read_trace
from config import settings_from_mapping
from config.alerts import AlertSettings
from forecasting.factory import build_forecaster
from models import ActuatorError, AlertEvent, AlertKind, PoolState, Severity, TransientActuatorError
from models.clock import SimulatedClock
from tests.conftest import TraceWriter
from tests.fakes.slack_receiver import SlackReceiver
from tests.unit.test_missing_data_alerts import NOW, START, arrive, config

NAN = float("nan")
TRAIN_OUT = (
    "[WARNING] Metrics missing or stale: holding: demand class train - Holding pools: no trustworthy demand for train"
)


class FlakyCluster(SimulatedCluster):
    """The simulated cluster, whose pool reads fail outright at the instants in ``fail_at`` (the tick fails)."""

    fail_at: frozenset[datetime] = frozenset()

    def list_pools(self) -> Sequence[PoolState]:
        if self._clock.now() in self.fail_at:
            raise TransientActuatorError("*", "the cloud API timed out")
        return super().list_pools()


@pytest.fixture
def receiver() -> Iterator[SlackReceiver]:
    with SlackReceiver() as running:
        yield running


def _agent(trace: Path, clock: SimulatedClock, receiver: SlackReceiver) -> tuple[Agent, FlakyCluster]:
    loaded = settings_from_mapping(config(), source="test config")
    slack = build_slack_notifier(
        AlertSettings.model_validate({"request_timeout": "1s", "dedup_window": "1h", "rate_limit_per_minute": 60}),
        clock,
        {"LEADTIME_SLACK_WEBHOOK_URL": receiver.url},
    )
    assert slack is not None
    cluster = FlakyCluster(loaded.pool_specs(), clock, dict.fromkeys((p.id for p in loaded.pools), 0))
    source = TraceSource(read_trace(trace))
    parts = AgentParts(source, build_forecaster(loaded.forecast), cluster, InMemoryLedger(), slack)
    return Agent(loaded, parts, holder="test"), cluster


def _run(agent: Agent, clock: SimulatedClock, minutes: range) -> dict[str, str]:
    """Tick every 5 minutes; what each tick said: the classes held, or that it failed."""
    said = {}
    for minute in minutes:
        clock.set(NOW + timedelta(minutes=minute))
        arrive(agent, clock)
        try:
            said[f"{clock.now():%H:%M}"] = ",".join(sorted(agent.run_once(clock.now()).problems))
        except ActuatorError:
            said[f"{clock.now():%H:%M}"] = "tick failed"
    return said


def test_missing_data_that_clears_is_resolved_once_and_told_again_when_it_comes_back_within_the_window(
    receiver: SlackReceiver, write_trace: TraceWriter
) -> None:
    # train's value covers 9:45-9:50 (stale from 10:05), is missing 9:50-10:10, back 10:10-10:25, missing after
    trace = write_trace(
        {"train": [16.0] * 22 + [NAN] * 4 + [16.0] * 3 + [NAN] * 20, "serve": [16.0] * 49}, start=START.isoformat()
    )
    clock = SimulatedClock(NOW)
    agent, _ = _agent(trace, clock, receiver)
    said = _run(agent, clock, range(0, 50, 5))
    assert said == {
        "10:00": "", "10:05": "train", "10:10": "train", "10:15": "", "10:20": "", "10:25": "", "10:30": "",
        "10:35": "", "10:40": "train", "10:45": "train",
    }  # fmt: skip
    texts = [m["text"] for m in receiver.received]
    assert texts == [
        TRAIN_OUT,
        "[RESOLVED] Resolved: Metrics missing or stale: holding: demand class train - No longer holds, after 10m: "
        "raised 2024-03-05 10:05 UTC, last seen 2024-03-05 10:10 UTC, gone at 2024-03-05 10:15 UTC.",
        TRAIN_OUT,  # 35 minutes after the first, within the hour's window: told again, its end having cleared it
    ]
    resolved = receiver.received[1]["blocks"]
    assert resolved[0]["text"]["text"] == ":white_check_mark: Resolved: Metrics missing or stale: holding"
    assert resolved[-1]["elements"][0]["text"].startswith("missing-data · resolved · 2024-03-05 10:15:00 UTC")


def test_a_tick_that_fails_resolves_nothing_and_a_condition_is_resolved_once_it_is_gone(
    receiver: SlackReceiver, write_trace: TraceWriter
) -> None:
    # train is missing from 9:50 to 10:20; the ticks at 10:10 and 10:15 fail (the pools cannot be listed)
    trace = write_trace({"train": [16.0] * 22 + [NAN] * 6 + [16.0] * 10, "serve": [16.0] * 38}, start=START.isoformat())
    clock = SimulatedClock(NOW)
    agent, cluster = _agent(trace, clock, receiver)
    cluster.fail_at = frozenset({NOW + timedelta(minutes=10), NOW + timedelta(minutes=15)})
    said = _run(agent, clock, range(0, 40, 5))
    assert said == {
        "10:00": "", "10:05": "train", "10:10": "tick failed", "10:15": "tick failed", "10:20": "train",
        "10:25": "", "10:30": "", "10:35": "",
    }  # fmt: skip
    texts = [m["text"] for m in receiver.received]
    assert texts == [
        TRAIN_OUT,
        "[RESOLVED] Resolved: Metrics missing or stale: holding: demand class train - No longer holds, after 20m: "
        "raised 2024-03-05 10:05 UTC, last seen 2024-03-05 10:20 UTC, gone at 2024-03-05 10:25 UTC.",
    ]


def test_a_stockout_is_resolved_when_its_back_off_ends_and_not_before(
    receiver: SlackReceiver, write_trace: TraceWriter
) -> None:
    # serve needs 2 units from 10:00; its pool is out of capacity until 10:07 and backs off 10 minutes (its lead time)
    trace = write_trace({"train": [16.0] * 40, "serve": [16.0] * 40}, start=START.isoformat())
    clock = SimulatedClock(NOW)
    agent, cluster = _agent(trace, clock, receiver)
    cluster.add_stockout("serve-pool", NOW, NOW + timedelta(minutes=7))
    _run(agent, clock, range(0, 25, 5))
    texts = [m["text"] for m in receiver.received]
    assert texts == [
        "[WARNING] Capacity stockout: serve-pool - No capacity for serve-pool; backing off 10m and using the next pool",
        "[RESOLVED] Resolved: Capacity stockout: serve-pool - No longer holds, after 10m: raised 2024-03-05 10:00 UTC, "
        "last seen 2024-03-05 10:05 UTC, gone at 2024-03-05 10:10 UTC.",
    ]
    assert {s.pool_id: s.target_units for s in cluster.list_pools()}["serve-pool"] == 2  # bought once it ended


T0 = datetime(2024, 3, 5, 10, 0, tzinfo=UTC)


def _event(kind: AlertKind, subject: str, minute: int, severity: Severity = Severity.WARNING) -> AlertEvent:
    return AlertEvent(kind, severity, T0 + timedelta(minutes=minute), subject, f"{kind} of {subject}")


def _ticks(
    tracker: ConditionTracker,
    ticks: Mapping[int, Sequence[AlertEvent]],
    holding: Collection[Condition] = (),
    unknown: Collection[Condition] = (),
) -> list[str]:
    """Feed the tracker a tick per minute; what it resolved, as "minute kind subject"."""
    told = []
    for minute, raised in sorted(ticks.items()):
        for event in tracker.update(T0 + timedelta(minutes=minute), raised, holding, unknown):
            assert event.resolved and event.severity is Severity.INFO and event.at == T0 + timedelta(minutes=minute)
            told.append(f"{minute} {event.kind} {event.subject}")
    return told


def test_one_off_events_are_never_resolved() -> None:
    tracker = ConditionTracker()
    threshold = _event(AlertKind.BUDGET_THRESHOLD, "budget team: 80% of cap", 0)
    trimmed = _event(AlertKind.BUDGET_RESERVATION_REFUSED, "pool a100", 0)
    assert _ticks(tracker, {0: [threshold, trimmed], 1: [], 2: []}) == []
    assert tracker.active == ()


def test_a_condition_that_turns_critical_is_one_condition_resolved_once() -> None:
    tracker = ConditionTracker()
    warning = _event(AlertKind.POOL_UNREADABLE, "a100", 0)
    critical = _event(AlertKind.POOL_UNREADABLE, "a100", 1, Severity.CRITICAL)
    assert _ticks(tracker, {0: [warning], 1: [critical], 2: [], 6: []}) == ["6 pool-unreadable a100"]


def test_a_condition_still_holding_or_not_evaluated_is_not_resolved() -> None:
    tracker = ConditionTracker()
    stockout = _event(AlertKind.STOCKOUT, "a100", 0)
    drain = _event(AlertKind.ACTUATOR_FAILURE, "idle nodes of h100", 0)
    held = {(AlertKind.STOCKOUT, "a100")}
    unread = {(AlertKind.ACTUATOR_FAILURE, "idle nodes of h100")}
    assert _ticks(tracker, {0: [stockout, drain], 1: [], 2: []}, holding=held, unknown=unread) == []
    # the stockout ends when the memory says so; the drain's alert, raised last at 0, once unseen for 5 minutes
    assert _ticks(tracker, {3: [], 4: [], 5: []}) == ["3 stockout a100", "5 actuator-failure idle nodes of h100"]


def test_a_replica_that_stops_leading_forgets_its_conditions_without_resolving_them() -> None:
    tracker = ConditionTracker()
    _ticks(tracker, {0: [_event(AlertKind.MISSING_DATA, "demand class a", 0)]})
    tracker.forget()
    assert _ticks(tracker, {10: []}) == []


def test_a_notifier_tells_a_condition_again_within_the_window_once_its_end_was_handled() -> None:
    notifier = RecordingNotifier(dedup_window=timedelta(hours=1))
    out = _event(AlertKind.POOL_UNREADABLE, "a100", 0, Severity.CRITICAL)
    tracker = ConditionTracker()
    tracker.update(out.at, [out])
    assert tracker.update(T0 + timedelta(minutes=1), []) == []  # gone, but not yet for alerts.resolve_after
    [end] = tracker.update(T0 + timedelta(minutes=5), [])
    again = _event(AlertKind.POOL_UNREADABLE, "a100", 30)  # a warning now: the critical is forgotten too
    for event in (out, _event(AlertKind.POOL_UNREADABLE, "a100", 1), end, again, again):
        notifier.notify(event)
    assert [(e.severity, e.resolved, e.at.minute) for e in notifier.events] == [
        (Severity.CRITICAL, False, 0),
        (Severity.INFO, True, 5),
        (Severity.WARNING, False, 30),
    ]
    assert blocks(end)[0]["text"]["text"] == ":white_check_mark: Resolved: Pool state unreadable: holding"
    assert end.details["last told (critical)"] == "pool-unreadable of a100"
