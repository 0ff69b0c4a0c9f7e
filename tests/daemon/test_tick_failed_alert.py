"""A leader tick that fails is told as ``tick-failed`` on its replica whatever the error's class, and its end is
told once the ticks have stopped failing for ``alerts.resolve_after``. Two daemons against the fake Kubernetes API
and one simulated cluster, the loop made to raise (a tick that failed on metrics was told as ``missing-data``,
titled "Metrics missing or stale", and one that failed on the cloud as ``actuator-failure``: conditions of the loop's
tracker that the tracker ends, though none did; nothing ever told that the ticks had recovered)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

from actuators import SimulatedCluster
from agent.daemon.lease import LeaseElector
from agent.notify.slack_message import fallback_text
from models import AlertEvent, AlertKind, MetricsUnavailable, TransientActuatorError
from models.clock import SimulatedClock
from tests.daemon.links import CuttableLink
from tests.daemon.replicas import POOL, Fleet, Replica, make_replica

Make = Callable[[str], tuple[LeaseElector, CuttableLink]]
RESOLVE_AFTER = timedelta(minutes=5)  # alerts.resolve_after's default, the daemon's when not given


@pytest.fixture
def fleet(clock: SimulatedClock, elector_for: Make) -> Fleet:
    cluster = SimulatedCluster([POOL], clock, initial_units={POOL.pool_id: 1})
    fleet = Fleet(clock, cluster)
    for name in ("replica-a", "replica-b"):
        elector, link = elector_for(name)
        fleet.replicas.append(make_replica(name, elector, link, clock, cluster))
    return fleet


def _told(replica: Replica) -> list[AlertEvent]:
    return [e for e in replica.notifier.events if e.subject == f"replica/{replica.name}"]


@pytest.mark.parametrize(
    "error",
    [
        MetricsUnavailable("train", "Prometheus answered 503"),
        TransientActuatorError("a100", "GKE answered 503"),
        RuntimeError("unexpected"),
    ],
    ids=["metrics", "cloud", "other"],
)
def test_a_failing_tick_is_told_as_tick_failed_and_its_end_once_ticks_succeed(fleet: Fleet, error: Exception) -> None:
    a, _ = fleet.replicas
    fleet.run(timedelta(minutes=1))
    assert a.elector.is_leader(fleet.clock.now())
    a.loop.fail_with = error
    fleet.run(timedelta(minutes=3))
    raised = _told(a)
    assert len(raised) == 3
    assert {(e.kind, e.resolved) for e in raised} == {(AlertKind.TICK_FAILED, False)}
    assert type(error).__name__ in raised[0].summary and "pools held" in raised[0].summary
    assert fallback_text(raised[0]).startswith("[WARNING] Tick failed: pools held: replica/replica-a - ")
    last_failed = raised[-1].at

    a.loop.fail_with = None
    fleet.run(RESOLVE_AFTER - timedelta(minutes=1))  # ticks succeed, the failures not yet gone resolve_after
    assert len(_told(a)) == 3
    fleet.run(timedelta(minutes=3))
    [end] = _told(a)[3:]
    assert (end.kind, end.resolved) == (AlertKind.TICK_FAILED, True)
    assert end.at - last_failed == RESOLVE_AFTER
    assert end.details["last error"] == f"{type(error).__name__}: {error}"
    assert fallback_text(end).startswith("[RESOLVED] Resolved: Tick failed: pools held: replica/replica-a")


def test_ticks_that_fail_now_and_then_are_ended_once_after_the_last_failure(fleet: Fleet) -> None:
    a, _ = fleet.replicas
    fleet.run(timedelta(minutes=1))
    for _ in range(3):  # one tick in three fails
        a.loop.fail_with = RuntimeError("unexpected")
        fleet.run(timedelta(minutes=1))
        a.loop.fail_with = None
        fleet.run(timedelta(minutes=2))
    assert [e.resolved for e in _told(a)] == [False, False, False]
    fleet.run(RESOLVE_AFTER)
    assert [e.resolved for e in _told(a)] == [False, False, False, True]
