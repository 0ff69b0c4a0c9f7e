"""The daily report after a change of leader covers the day: the leader keeps its window's counts in the planner memory
the replicas share, and a replica that starts leading takes over those of the same window, each replica's counted once,
never those of a window already reported; the report says who led when.

Two real ``Daemon``s with their electors on the fake Kubernetes API (``elector_for``), each driving the daemon's real
``AgentLoopAdapter`` (the planner memory loaded at the first leader tick of a term, saved after each) around an agent
whose every tick as leader does one action and skips one pool; the memory in one ``InMemoryStateStore`` both replicas
view. One simulated clock; the test plays the scheduler, a minute at a time, and the report time."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, time, timedelta
from types import SimpleNamespace
from typing import cast

import pytest
from apscheduler.schedulers.background import BackgroundScheduler

from actuators import SimulatedCluster
from agent.daemon.adapters import AgentLoopAdapter, PoolStateRecorder
from agent.daemon.clock_watch import WallClockWatch
from agent.daemon.day_counts import REPLICAS_KEPT, DayRead
from agent.daemon.endpoints import EndpointServer
from agent.daemon.health import HealthState
from agent.daemon.lease import LeaseElector
from agent.daemon.metrics import DaemonMetrics
from agent.daemon.runtime import DaemonRuntime, Schedule
from agent.daemon.service import Daemon
from agent.loop import Agent, TickReport
from agent.notify import RecordingNotifier
from agent.planning import PlannerMemory
from agent.planning.memory import DayCounts, ReplicaCounts
from agent.state import InMemoryStateStore, StateStore
from agent.state.codec import decode, encode
from agent.state.keeper import merge
from models import (
    ActionResult,
    ActionStatus,
    AlertEvent,
    AlertKind,
    CapacityPlan,
    Skip,
    SkipReason,
    StateUnavailable,
)
from models.clock import SimulatedClock
from tests.daemon.conftest import DEADLINE, RETRY, T0, MakeElector
from tests.daemon.links import CuttableLink
from tests.daemon.replicas import POOL

MINUTE = timedelta(minutes=1)
REPORT_AT = T0.time()  # the daily report time the replicas' summaries are told, unless a test says otherwise


class CountingAgent:
    """An agent as the daemon's adapter drives it, whose every tick does one action (a resize done) and skips another
    pool (cooldown); ``acted``: when it acted. While ``failing``, its ticks raise it instead; ``during``: run inside
    each tick, before it acts (what happens meanwhile: another writer, the lease lost)."""

    def __init__(self) -> None:
        self.memory = PlannerMemory()
        self.pool_by_id: dict[str, object] = {}
        self.classes: list[object] = []
        self.drains = None
        self.conditions = SimpleNamespace(adopt=lambda *_: None)
        self.parts = SimpleNamespace(short_slices=None)
        self.budget_watch = SimpleNamespace(stand_by=lambda: None, restore=lambda _: None, waited=())
        # a leader that has not read its memory alerts once it has gone unread for the readiness bound: not here
        self.settings = SimpleNamespace(
            daemon=SimpleNamespace(ready_bound=lambda _: timedelta(days=1)), loop=SimpleNamespace(tick_interval=MINUTE)
        )
        self.acted: list[datetime] = []
        self.failing: Exception | None = None
        self.during: Callable[[], None] = lambda: None

    def watch(self, now: datetime, *, leading: bool = False) -> None:
        return None

    def run_once(self, now: datetime) -> TickReport:
        self.during()
        if self.failing is not None:
            raise self.failing
        self.acted.append(now)
        done = ActionResult(f"{POOL.pool_id}@{now.isoformat()}", POOL.pool_id, ActionStatus.DONE, now)
        plan = CapacityPlan(now, skips=(Skip("other", SkipReason.COOLDOWN, "changed lately"),))
        return TickReport(now, {}, {}, {}, plan, (done,))


@dataclass
class Replica:
    name: str
    daemon: Daemon
    elector: LeaseElector
    link: CuttableLink
    agent: CountingAgent
    notifier: RecordingNotifier
    loop: AgentLoopAdapter

    def reports(self) -> list[AlertEvent]:
        return [e for e in self.notifier.events if e.kind is AlertKind.DAILY_REPORT]


@dataclass
class Unreadable:
    """A replica's view of the memory whose reads fail while ``broken`` (the API answers 503 to its gets)."""

    inner: InMemoryStateStore
    broken: bool = True

    def load(self) -> PlannerMemory | None:
        if self.broken:
            raise StateUnavailable("ConfigMap leadtime/leadtime-state: get answered 503 Service Unavailable")
        return self.inner.load()

    def save(self, memory: PlannerMemory, now: datetime) -> None:
        self.inner.save(memory, now)


def _replica(
    name: str, store: StateStore, elector_for: MakeElector, clock: SimulatedClock, report_at: time | None = REPORT_AT
) -> Replica:
    """A replica whose summary is told the daily report time ``report_at`` as the runtime tells it (None: not told)."""
    elector, link = elector_for(name)
    agent = CountingAgent()
    cluster = SimulatedCluster([POOL], clock, initial_units={POOL.pool_id: 1})
    loop = AgentLoopAdapter(cast(Agent, agent), PoolStateRecorder(cluster), store, elector, clock)
    notifier = RecordingNotifier(dedup_window=timedelta(0))
    daemon = Daemon(
        loop,
        elector,
        clock=clock,
        metrics=DaemonMetrics(),
        health=HealthState(max_tick_age=3 * MINUTE, max_tick_duration=10 * MINUTE),
        notifier=notifier,
        mode="enforce",
        contact_bound=DEADLINE,
    )
    if report_at is not None:
        daemon.summary.scheduled(report_at)
    return Replica(name, daemon, elector, link, agent, notifier, loop)


@pytest.fixture
def pair(clock: SimulatedClock, elector_for: MakeElector) -> tuple[Replica, Replica, InMemoryStateStore]:
    """Replicas A (leading, its first tick run) and B (standby), and the store of the memory they share."""
    store = InMemoryStateStore("replica-a")
    a = _replica("replica-a", store, elector_for, clock)
    b = _replica("replica-b", store.replica("replica-b"), elector_for, clock)
    assert a.daemon.elect().leading and not b.daemon.elect().leading
    a.daemon.tick()
    b.daemon.tick()
    return a, b, store


def _minutes(clock: SimulatedClock, n: int, leader: Replica, other: Replica, step: timedelta = MINUTE) -> None:
    """``n`` times ``step`` later, each replica's election round, the leader's first, then each one's tick."""
    for _ in range(n):
        clock.advance(step)
        for replica in (leader, other):
            replica.daemon.elect()
        assert leader.elector.is_leader(clock.now())
        for replica in (leader, other):
            replica.daemon.tick()


def _hand_over(clock: SimulatedClock, old: Replica, new: Replica) -> datetime:
    """``new`` takes the lease from ``old``, whose Lease API stops answering, and ticks as the leader; ``old``, its API
    back, ticks as a standby. When ``new`` took over."""
    old.link.cut()
    for _ in range(20):
        clock.advance(RETRY)
        old.daemon.elect()
        if (step := new.daemon.elect()).leading:
            break
    assert step.became_leader and step.new_term, step
    took = clock.now()
    new.daemon.tick()
    old.link.restore()
    assert not old.daemon.elect().leading
    old.daemon.tick()
    return took


def _report_time(a: Replica, b: Replica) -> AlertEvent:
    """Every replica runs the report job; the one report sent."""
    sent = [replica.daemon.daily_report() for replica in (a, b)]
    assert sent.count(True) == 1
    return (a if sent[0] else b).notifier.events[-1]


def test_a_new_leader_reports_the_actions_its_predecessor_did_that_day_once(
    clock: SimulatedClock, pair: tuple[Replica, Replica, InMemoryStateStore]
) -> None:
    a, b, _ = pair
    _minutes(clock, 5, a, b)
    took = _hand_over(clock, a, b)  # a rollout restarts the leader mid-day
    _minutes(clock, 3, b, a)
    report = _report_time(a, b)
    assert b.reports() == [report]
    acted = len(a.agent.acted) + len(b.agent.acted)
    assert len(a.agent.acted) == 6 and len(b.agent.acted) == 4
    assert report.summary.startswith(f"{acted} action(s), 0 error(s)")
    assert report.details["actions"] == f"done: {acted}"
    assert report.details["skips"] == f"cooldown: {acted}"
    assert report.details["led by"] == f"replica-a until {took:%H:%M}, replica-b since"


def test_a_pod_started_by_a_rollout_reports_the_day_since_the_last_report_time(
    clock: SimulatedClock, elector_for: MakeElector, pair: tuple[Replica, Replica, InMemoryStateStore]
) -> None:
    a, b, store = pair
    _minutes(clock, 3, a, b, step=timedelta(hours=1))
    new = _replica("replica-c", store.replica("replica-c"), elector_for, clock)  # the new release's pod
    assert not new.daemon.elect().leading
    assert a.daemon.stop_working(1.0) and a.daemon.release()  # the old leader stops and hands the lease over
    clock.advance(RETRY)
    assert new.daemon.elect().became_leader
    took = clock.now()
    new.daemon.tick()
    _minutes(clock, 2, new, b)
    report = _report_time(new, b)
    assert new.reports() == [report]
    assert report.details["window"].startswith(T0.isoformat())  # the day's, not since this pod started
    assert report.summary.startswith(
        f"{len(a.agent.acted) + len(new.agent.acted)} action(s), 0 error(s) in the last 3h"
    )
    assert (len(a.agent.acted), len(new.agent.acted)) == (4, 3)
    assert report.details["led by"] == f"replica-a until {took:%H:%M}, replica-c since"


def test_a_replica_leading_again_counts_the_others_actions_and_its_own_once(
    clock: SimulatedClock, pair: tuple[Replica, Replica, InMemoryStateStore]
) -> None:
    a, b, _ = pair
    _minutes(clock, 4, a, b)
    to_b = _hand_over(clock, a, b)
    _minutes(clock, 3, b, a)
    to_a = _hand_over(clock, b, a)  # A leads again: it holds its own counts of the day, and B's are in the memory
    _minutes(clock, 2, a, b)
    to_b_again = _hand_over(clock, a, b)
    _minutes(clock, 1, b, a)
    to_a_again = _hand_over(clock, b, a)
    _minutes(clock, 2, a, b)
    report = _report_time(a, b)
    assert a.reports() == [report]
    acted = len(a.agent.acted) + len(b.agent.acted)
    assert (len(a.agent.acted), len(b.agent.acted)) == (11, 6)
    assert report.summary.startswith(f"{acted} action(s), 0 error(s)")
    assert report.details["actions"] == f"done: {acted}"
    assert report.details["led by"] == (
        f"replica-a until {to_b:%H:%M}, replica-b until {to_a:%H:%M}, replica-a until {to_b_again:%H:%M}, "
        f"replica-b until {to_a_again:%H:%M}, replica-a since"
    )


def test_the_counts_of_a_window_already_reported_are_not_taken_over(
    clock: SimulatedClock, pair: tuple[Replica, Replica, InMemoryStateStore]
) -> None:
    a, b, store = pair
    _minutes(clock, 3, a, b, step=timedelta(hours=1))
    first = _report_time(a, b)  # A reports its day; its next tick would keep its new window's start in the memory
    assert a.reports() == [first] and first.summary.startswith("4 action(s)")
    window = json.loads(store.document or "{}")["day_counts"]
    assert window["since"] == T0.isoformat()  # the record of the day just reported
    reported_at = clock.now()
    took = _hand_over(clock, a, b)  # and it stops right after it: the memory still holds the day it reported
    _minutes(clock, 2, b, a)
    second = _report_time(a, b)
    assert b.reports() == [second]
    assert second.details["window"].startswith(reported_at.isoformat())
    assert second.summary.startswith(f"{len(b.agent.acted)} action(s), 0 error(s)")  # its own: A's were reported
    assert len(b.agent.acted) == 3
    assert second.details["led by"] == "replica-b"
    assert took > reported_at


def test_counts_that_cannot_be_kept_fail_no_tick(
    clock: SimulatedClock, pair: tuple[Replica, Replica, InMemoryStateStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b, _ = pair

    def refused(counts: DayCounts) -> bool:
        raise RuntimeError("not encodable")

    monkeypatch.setattr(a.loop, "keep_day", refused)
    _minutes(clock, 2, a, b)
    assert a.daemon.daily_report()
    assert a.reports()[0].summary.startswith("3 action(s), 0 error(s)")  # its ticks went on; its own report counts


def test_a_failed_tick_whose_counts_cannot_be_handed_over_still_alerts(
    clock: SimulatedClock, pair: tuple[Replica, Replica, InMemoryStateStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, _, _ = pair

    def unreadable() -> DayRead:
        raise RuntimeError("the term's read of the memory is gone")

    monkeypatch.setattr(a.loop, "day_read", unreadable)
    a.agent.failing = RuntimeError("cloud API refused")
    clock.advance(MINUTE)
    assert a.daemon.elect().leading
    a.daemon.tick()  # the counts are not kept; the failed tick is counted and alerted on all the same
    (failed,) = [e for e in a.notifier.events if e.kind is AlertKind.TICK_FAILED]
    assert "cloud API refused" in failed.summary + str(failed.details)
    assert a.daemon.daily_report()
    assert a.reports()[0].summary.startswith("1 action(s), 1 error(s)")


@pytest.mark.parametrize("read_again", [False, True])
def test_a_new_leader_that_cannot_read_the_memory_reports_its_own_counts_and_says_the_rest_is_missing(
    clock: SimulatedClock, elector_for: MakeElector, read_again: bool
) -> None:
    store = InMemoryStateStore("replica-a")
    a = _replica("replica-a", store, elector_for, clock)
    view = Unreadable(store.replica("replica-b"))
    b = _replica("replica-b", view, elector_for, clock)
    assert a.daemon.elect().leading and not b.daemon.elect().leading
    _minutes(clock, 4, a, b)
    took = _hand_over(clock, a, b)
    _minutes(clock, 2, b, a)
    view.broken = not read_again  # the API answers again: the next tick reads the memory and takes the day over
    _minutes(clock, 2, b, a)
    report = _report_time(a, b)
    assert b.reports() == [report]
    if read_again:
        assert report.summary.startswith(f"{len(a.agent.acted) + len(b.agent.acted)} action(s)")
        assert len(b.agent.acted) == 2 and "not in it" not in report.details
        assert report.details["led by"] == f"replica-a until {took:%H:%M}, replica-b since"
        return
    assert b.agent.acted == []  # a leader that has not read the memory acts on nothing (its errors are counted)
    assert report.summary.startswith("0 action(s), 5 error(s)")
    assert report.summary.endswith(
        f"; the day before {took:%H:%M} UTC is not in it (the planner memory could not be read)"
    )
    assert report.details["not in it"].startswith(f"what other replicas counted before {took:%H:%M} UTC")


def test_the_counts_go_round_the_codec_and_a_memory_without_them_reads_as_none_kept() -> None:
    counts = DayCounts(
        T0,
        (("replica-a", T0), ("replica-b", T0 + MINUTE)),
        {
            "replica-a": ReplicaCounts({"done": 3}, {"cooldown": 40}, {"MetricsUnavailable": 1}),
            "replica-b": ReplicaCounts(),
        },
    )
    memory = PlannerMemory(blocked={"a100": "403"}, day_counts=counts)
    assert decode(encode(memory, T0, "replica-a")) == memory
    older = json.loads(encode(memory, T0, "replica-a"))
    del older["day_counts"]  # saved by a release that does not keep them: same version
    assert decode(json.dumps(older)) == PlannerMemory(blocked={"a100": "403"})
    broken = json.loads(encode(memory, T0, "replica-a"))
    broken["day_counts"]["replicas"]["replica-a"]["actions"]["done"] = -3
    assert decode(json.dumps(broken)) == PlannerMemory(blocked={"a100": "403"})  # none kept, the rest read


def test_a_leader_whose_ticks_fail_leaves_its_errors_to_the_next_leader(
    clock: SimulatedClock, pair: tuple[Replica, Replica, InMemoryStateStore]
) -> None:
    a, b, store = pair
    _minutes(clock, 2, a, b)
    a.agent.failing = RuntimeError("cloud API refused")  # every tick as leader fails from now on, for an hour
    _minutes(clock, 60, a, b)
    stored = store.load()
    assert stored is not None and stored.day_counts is not None
    (kept,) = (c for name, c in stored.day_counts.replicas.items() if name.startswith("replica-a@"))
    assert kept.errors == {"RuntimeError": 60}  # kept at its 15th, 30th, 45th and 60th failed tick
    _hand_over(clock, a, b)
    _minutes(clock, 2, b, a)
    report = _report_time(a, b)
    assert b.reports() == [report]
    assert report.summary.startswith(f"{len(a.agent.acted) + len(b.agent.acted)} action(s), 60 error(s)")
    assert report.details["errors"] == "RuntimeError: 60"
    assert len(a.agent.acted) == 3


def _restart(old: Replica, store: StateStore, elector_for: MakeElector, clock: SimulatedClock) -> Replica:
    """``old``'s container stops (handing the lease over) and starts again in the same pod: the same identity."""
    assert old.daemon.stop_working(1.0) and old.daemon.release()
    new = _replica(old.name, store, elector_for, clock)
    clock.advance(RETRY)
    assert new.daemon.elect().became_leader
    new.daemon.tick()
    return new


def test_a_leader_restarted_in_the_same_pod_reports_what_its_earlier_runs_did(
    clock: SimulatedClock, elector_for: MakeElector, pair: tuple[Replica, Replica, InMemoryStateStore]
) -> None:
    a, b, store = pair
    runs = [a]
    _minutes(clock, 5, a, b)
    for _ in range(REPLICAS_KEPT + 2):  # more runs than the record keeps apart: the earliest are added up
        runs.append(_restart(runs[-1], store, elector_for, clock))
        _minutes(clock, 2, runs[-1], b)
    report = _report_time(runs[-1], b)
    assert runs[-1].reports() == [report]
    acted = sum(len(run.agent.acted) for run in runs)
    assert acted == 6 + 3 * (REPLICAS_KEPT + 2)
    assert report.summary.startswith(f"{acted} action(s), 0 error(s)")
    assert report.details["actions"] == f"done: {acted}"
    assert report.details["led by"] == "replica-a"
    stored = store.load()
    assert stored is not None and stored.day_counts is not None
    assert len(stored.day_counts.replicas) <= REPLICAS_KEPT


def _runtime(replica: Replica, clock: SimulatedClock, report_at: time) -> tuple[DaemonRuntime, EndpointServer]:
    """The daemon's runtime around ``replica``'s daemon, its daily report at ``report_at``, and its endpoints."""
    schedule = Schedule(MINUTE, timedelta(hours=1), RETRY, timedelta(seconds=1), f"{report_at:%H:%M}")
    endpoints = EndpointServer("127.0.0.1", 0, HealthState(max_tick_age=MINUTE), DaemonMetrics(), clock)
    return DaemonRuntime(replica.daemon, schedule, endpoints, clock=clock), endpoints


def _start(made: tuple[DaemonRuntime, EndpointServer], monkeypatch: pytest.MonkeyPatch) -> None:
    """The runtime's start (its endpoints, an election round, its jobs added), its scheduler and wall-clock watch
    kept from running (the test plays the scheduler on the simulated clock); its endpoints stopped after it."""
    runtime, endpoints = made
    monkeypatch.setattr(BackgroundScheduler, "start", lambda self, paused=False: None)
    monkeypatch.setattr(WallClockWatch, "start", lambda self: None)
    try:
        runtime.start()
    finally:
        endpoints.stop()


@pytest.mark.parametrize("by_runtime", [False, True])
def test_a_pod_started_in_the_hour_before_the_report_time_takes_over_the_day(
    clock: SimulatedClock, elector_for: MakeElector, by_runtime: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    report_at = (T0 + timedelta(hours=2)).time()
    store = InMemoryStateStore("replica-a")
    a = _replica("replica-a", store, elector_for, clock, report_at)
    b = _replica("replica-b", store.replica("replica-b"), elector_for, clock, report_at)
    assert a.daemon.elect().leading and not b.daemon.elect().leading
    _minutes(clock, 2, a, b, step=timedelta(hours=1))
    _report_time(a, b)
    reported_at = clock.now()
    _minutes(clock, 23, a, b, step=timedelta(hours=1))
    _minutes(clock, 10, a, b)  # 50 minutes before the next report time, a rollout starts the new release's pod
    new = _replica("replica-c", store.replica("replica-c"), elector_for, clock, None if by_runtime else report_at)
    if by_runtime:  # the daemon's runtime tells the summary the configured report time when it starts
        _start(_runtime(new, clock, report_at), monkeypatch)
    assert not new.daemon.elect().leading
    assert a.daemon.stop_working(1.0) and a.daemon.release()
    clock.advance(RETRY)
    assert new.daemon.elect().became_leader
    took = clock.now()
    new.daemon.tick()
    _minutes(clock, 49, new, b)
    report = _report_time(new, b)
    assert new.reports() == [report]
    acted = len([at for at in a.agent.acted if at > reported_at]) + len(new.agent.acted)
    assert (acted, len(new.agent.acted)) == (33 + 50, 50)
    assert report.details["window"].startswith(reported_at.isoformat())
    assert report.summary.startswith(f"{acted} action(s), 0 error(s) in the last day")
    assert report.details["led by"] == f"replica-a until {took:%H:%M}, replica-c since"


def _hours(clock: SimulatedClock, n: int, replica: Replica) -> None:
    for _ in range(n):
        clock.advance(timedelta(hours=1))
        assert replica.daemon.elect().leading
        replica.daemon.tick()


def _renewing(clock: SimulatedClock, minutes: int, replica: Replica) -> None:
    """``minutes`` minutes of the leader's election rounds, without a tick."""
    for _ in range(minutes):
        clock.advance(MINUTE)
        assert replica.daemon.elect().leading


def test_a_pod_whose_runtime_starts_just_after_the_report_time_takes_over_no_day_already_reported(
    clock: SimulatedClock, elector_for: MakeElector, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The new pod's daemon (its summary) is built half a second before the report time, its runtime started (the
    endpoints served, an election round, the jobs added) a second after it: its report job first runs the next day,
    so the day the leader reported at that time is not its own to report again."""
    store = InMemoryStateStore("replica-a")
    a = _replica("replica-a", store, elector_for, clock)
    assert a.daemon.elect().leading
    a.daemon.tick()
    _hours(clock, 23, a)
    _renewing(clock, 59, a)
    clock.advance(timedelta(seconds=59.5))
    new = _replica("replica-c", store.replica("replica-c"), elector_for, clock, None)  # told by its runtime
    runtime = _runtime(new, clock, REPORT_AT)
    clock.advance(timedelta(seconds=0.5))
    assert a.daemon.elect().leading
    assert a.daemon.daily_report()  # the old leader reports the day at the report time and stops
    assert a.reports()[-1].summary.startswith("24 action(s), 0 error(s) in the last day")
    assert a.daemon.stop_working(1.0) and a.daemon.release()
    clock.advance(timedelta(seconds=1))
    _start(runtime, monkeypatch)  # its election round takes the lease the old leader handed over
    assert new.elector.is_leader(clock.now())
    new.daemon.tick()
    _hours(clock, 23, new)
    _renewing(clock, 59, new)
    clock.advance(timedelta(seconds=59))  # the next report time: its report job's first run
    assert new.daemon.elect().leading
    assert new.daemon.daily_report()
    report = new.reports()[-1]
    assert len(new.agent.acted) == 24
    assert report.summary.startswith("24 action(s), 0 error(s) in the last day")  # its own alone
    assert report.details["actions"] == "done: 24"
    assert report.details["led by"] == "replica-c"


def test_a_crash_looping_leader_does_not_make_a_replica_that_leads_again_count_its_own_twice(
    clock: SimulatedClock, elector_for: MakeElector, pair: tuple[Replica, Replica, InMemoryStateStore]
) -> None:
    """B, alive all along, leads after A; then the pod of B's successor restarts every minute while leading, more runs
    than the record keeps apart, and B leads again: its run is kept apart, the superseded runs added up."""
    a, b, store = pair
    _minutes(clock, 2, a, b)
    _hand_over(clock, a, b)
    _minutes(clock, 2, b, a)
    _hand_over(clock, b, a)  # A takes over, then restarts in a crash loop
    runs = [a]
    for _ in range(REPLICAS_KEPT + 4):
        runs.append(_restart(runs[-1], store, elector_for, clock))
        _minutes(clock, 1, runs[-1], b)
    stored = store.load()
    assert stored is not None and stored.day_counts is not None
    assert len(stored.day_counts.replicas) == REPLICAS_KEPT  # some of A's runs added up
    _hand_over(clock, runs[-1], b)  # B leads again
    _minutes(clock, 2, b, runs[-1])
    report = _report_time(runs[-1], b)
    assert b.reports() == [report]
    acted = sum(len(run.agent.acted) for run in runs) + len(b.agent.acted)
    assert len(b.agent.acted) == 3 + 3
    assert report.summary.startswith(f"{acted} action(s), 0 error(s)")
    assert report.details["actions"] == f"done: {acted}"
    assert report.details["skips"] == f"cooldown: {acted}"


@pytest.mark.parametrize(("told", "first_day"), [(True, True), (True, False), (False, False)])
def test_a_pod_started_after_a_report_time_takes_over_no_day_already_reported(
    clock: SimulatedClock, elector_for: MakeElector, told: bool, first_day: bool
) -> None:
    """The leader reports its window and stops before its next tick: the memory still holds the window reported
    (since the leader's start on the deployment's first day, else since the report time before). A pod started since
    takes none of it over, told the report time (as the runtime tells it) or not (it then takes over a window only
    when it began less than a day before its own start, less ``WINDOW_SLACK``)."""
    report_at = (T0 + 3 * timedelta(hours=1)).time()
    store = InMemoryStateStore("replica-a")
    a = _replica("replica-a", store, elector_for, clock, report_at if told else None)
    assert a.daemon.elect().leading
    a.daemon.tick()
    if not first_day:  # the first day reported; the next one's window is kept
        _hours(clock, 3, a)
        assert a.daemon.daily_report()
        _hours(clock, 21, a)
    _hours(clock, 3, a)
    assert a.daemon.daily_report()
    day = a.reports()[-1]
    assert day.summary.startswith(("4" if first_day else "24") + " action(s)")
    assert a.daemon.stop_working(1.0) and a.daemon.release()  # before its next tick keeps the new window's start
    kept = store.load()
    assert kept is not None and kept.day_counts is not None
    assert day.details["window"].startswith(kept.day_counts.since.isoformat())
    clock.advance(timedelta(hours=2))
    new = _replica("replica-c", store.replica("replica-c"), elector_for, clock, report_at if told else None)
    assert new.daemon.elect().became_leader
    new.daemon.tick()
    _hours(clock, 2, new)
    assert new.daemon.daily_report()
    report = new.reports()[-1]
    assert report.summary.startswith("3 action(s), 0 error(s) in the last 2h")  # its own alone
    assert report.details["led by"] == "replica-c"


def _once(action: Callable[[], None]) -> Callable[[], None]:
    """``action`` at the next tick only."""
    done = False

    def during() -> None:
        nonlocal done
        if not done:
            done = True
            action()

    return during


def test_counts_are_not_saved_over_a_memory_another_wrote_in_the_tick(
    clock: SimulatedClock, pair: tuple[Replica, Replica, InMemoryStateStore]
) -> None:
    """The tick's save of what it changed answers 409 (an operator edited the memory meanwhile): the counts wait for
    the next tick's save, which merges the edit first, rather than being saved over it."""
    a, _, store = pair

    def operator_blocks() -> None:
        operator = store.replica("operator")
        stored = operator.load()
        assert stored is not None
        operator.save(replace(stored, blocked={"other": "blocked by hand"}), clock.now())
        a.agent.memory = replace(a.agent.memory, last_change={POOL.pool_id: (clock.now(), 1)})  # what the tick did

    a.agent.during = _once(operator_blocks)
    clock.advance(MINUTE)
    assert a.daemon.elect().leading
    saves = store.saves
    a.daemon.tick()  # its save conflicts: the store keeps the operator's memory
    assert a.loop.keeper.failing and store.saves == saves + 1  # the operator's alone
    saved = decode(store.document or "")
    assert saved.blocked == {"other": "blocked by hand"} and saved.last_change == {}
    assert saved.day_counts is not None
    (before,) = saved.day_counts.replicas.values()
    assert before.actions == {"done": 1}  # the pair's first tick's: not this one's
    clock.advance(MINUTE)
    assert a.daemon.elect().leading
    a.daemon.tick()  # the edit merged, then saved with the counts
    saved = decode(store.document or "")
    assert saved.blocked == {"other": "blocked by hand"} and set(saved.last_change) == {POOL.pool_id}
    assert saved.day_counts is not None
    (after,) = saved.day_counts.replicas.values()
    assert after.actions == {"done": 3} and len(a.agent.acted) == 3


def test_a_leader_that_lost_the_lease_in_the_tick_saves_no_counts(
    clock: SimulatedClock, pair: tuple[Replica, Replica, InMemoryStateStore]
) -> None:
    a, _, store = pair
    clock.advance(MINUTE)
    assert a.daemon.elect().leading
    saves = store.saves
    a.agent.during = _once(lambda: clock.advance(DEADLINE))  # a tick slow past its renew deadline: it no longer leads
    a.daemon.tick()
    assert len(a.agent.acted) == 2 and not a.elector.is_leader(clock.now())
    assert store.saves == saves  # neither the tick's memory nor its counts: another replica may lead now


def test_the_counts_kept_merge_as_the_side_that_changed_them() -> None:
    """Another replica saved counts since this one last read the memory: they are kept when this one's are as read,
    this one's are kept when it changed them (``agent.state.keeper.merge``)."""
    read = PlannerMemory(day_counts=DayCounts(T0, (("replica-a", T0),), {"replica-a@x": ReplicaCounts({"done": 1})}))
    theirs = PlannerMemory(day_counts=DayCounts(T0, (("replica-b", T0),), {"replica-b@y": ReplicaCounts({"done": 2})}))
    ours = PlannerMemory(day_counts=DayCounts(T0, (("replica-a", T0),), {"replica-a@x": ReplicaCounts({"done": 3})}))
    assert merge(read, read, theirs).day_counts == theirs.day_counts
    assert merge(read, ours, theirs).day_counts == ours.day_counts
