"""Two daemons against the fake Kubernetes API and one simulated cluster: only the leader acts, takeovers happen
in time and never overlap, and every failure of a tick is survived, counted and alerted."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timedelta

import pytest

from actuators import SimulatedCluster
from agent.daemon.lease import LeaseElector
from models import AlertKind, MetricsUnavailable, TransientActuatorError
from models.clock import SimulatedClock
from tests.daemon.conftest import DEADLINE, LEASE, RETRY
from tests.daemon.links import CuttableLink
from tests.daemon.replicas import POOL, TICK, Fleet, Replica, make_replica

Make = Callable[[str], tuple[LeaseElector, CuttableLink]]


@pytest.fixture
def fleet(clock: SimulatedClock, elector_for: Make) -> Fleet:
    cluster = SimulatedCluster([POOL], clock, initial_units={POOL.pool_id: 1})
    fleet = Fleet(clock, cluster)
    for name in ("replica-a", "replica-b"):
        elector, link = elector_for(name)
        fleet.replicas.append(make_replica(name, elector, link, clock, cluster))
    return fleet


def _gauge(replica: Replica, name: str, labels: dict[str, str] | None = None) -> float | None:
    return replica.metrics.registry.get_sample_value(name, labels or {})


def test_exactly_one_replica_acts_and_the_standby_stays_ready(fleet: Fleet) -> None:
    a, b = fleet.replicas
    fleet.run(timedelta(minutes=5))
    assert fleet.overlap == []
    assert len(a.loop.acted_at) == 5  # the first tick (at takeover) found the pool at target
    assert b.loop.acted_at == []
    assert fleet.cluster.scale_actions == 5
    assert _gauge(a, "leadtime_is_leader") == 1
    assert _gauge(b, "leadtime_is_leader") == 0
    assert _gauge(b, "leadtime_ticks_total", {"role": "standby", "outcome": "ok"}) == 5
    assert b.health.readiness(fleet.clock.now()).ready
    assert a.health.readiness(fleet.clock.now()).ready
    assert _gauge(a, "leadtime_decisions_total", {"pool": "a100", "action": "scale-up", "status": "done"}) == 3


def test_killed_leader_is_replaced_within_lease_duration_plus_one_tick(fleet: Fleet) -> None:
    a, b = fleet.replicas
    fleet.run(timedelta(minutes=2))
    assert a.loop.acted_at
    died_at = fleet.clock.now()
    a.alive = False  # the process is gone: no release, no more renewals
    fleet.run(timedelta(minutes=2))
    assert fleet.overlap == []
    assert b.loop.acted_at, "the standby never took over"
    assert b.loop.acted_at[0] - died_at <= LEASE + TICK
    assert b.loop.acted_at[0] - died_at >= LEASE - RETRY
    assert b.daemon.summary is not None


def test_leader_cut_off_from_the_api_stops_acting_before_the_other_starts(fleet: Fleet) -> None:
    a, b = fleet.replicas
    fleet.run(timedelta(minutes=1))
    a.link.cut()
    cut_at = fleet.clock.now()
    fleet.run(timedelta(minutes=3, seconds=30))
    assert fleet.overlap == []
    assert b.loop.acted_at
    assert all(t < cut_at + DEADLINE for t in a.loop.acted_at)
    assert max(a.loop.acted_at) < b.loop.acted_at[0]
    assert b.loop.acted_at[0] - cut_at <= LEASE + TICK
    # the cut-off replica alerted about it, counted the API errors, and became unready (not dead)
    kinds = [e.kind for e in a.notifier.events]
    assert AlertKind.LEADERSHIP_LOST in kinds
    assert (_gauge(a, "leadtime_errors_total", {"error": "KubernetesApiUnavailable"}) or 0) >= 60
    assert not a.health.readiness(fleet.clock.now()).ready
    assert "unreachable" in a.health.readiness(fleet.clock.now()).detail

    a.link.restore()  # it recovers on its own, as a ready standby
    fleet.run(timedelta(minutes=2))
    assert a.health.readiness(fleet.clock.now()).ready
    assert fleet.overlap == []
    assert max(a.loop.acted_at) < cut_at + DEADLINE


def test_a_slow_tick_that_outlives_leadership_is_refused_its_write(fleet: Fleet, clock: SimulatedClock) -> None:
    a, _ = fleet.replicas
    fleet.run(timedelta(seconds=RETRY.total_seconds()))
    assert a.elector.is_leader(clock.now())
    units = fleet.cluster.paid_units()[POOL.pool_id]
    acted = len(a.loop.acted_at)
    a.loop.target = lambda now: units + 1
    a.loop.during_tick = lambda: clock.advance(DEADLINE)  # the tick outlasts the renew deadline
    a.daemon.tick()
    assert len(a.loop.acted_at) == acted
    assert fleet.cluster.paid_units()[POOL.pool_id] == units
    assert _gauge(a, "leadtime_errors_total", {"error": "TransientActuatorError"}) == 1


def test_a_tick_that_runs_past_the_bound_fails_liveness_until_it_returns(fleet: Fleet, clock: SimulatedClock) -> None:
    a, _ = fleet.replicas
    fleet.run(timedelta(seconds=RETRY.total_seconds()))
    seen: list[tuple[bool, str]] = []

    def stuck() -> None:  # what /healthz says while the tick hangs, before and after the bound
        seen.append((a.health.liveness(clock.now()).ready, ""))
        clock.advance(11 * TICK)
        alive = a.health.liveness(clock.now())
        seen.append((alive.ready, alive.detail))

    a.loop.during_tick = stuck
    a.daemon.tick()
    assert seen[0] == (True, "")
    assert seen[1][0] is False and "a tick has been running 660s" in seen[1][1]
    assert a.health.liveness(clock.now()).ready  # it returned: alive again


@pytest.mark.parametrize(
    ("error", "kind", "label"),
    [
        (MetricsUnavailable("train", "Prometheus answered 503"), AlertKind.TICK_FAILED, "MetricsUnavailable"),
        (TransientActuatorError("a100", "GKE answered 503"), AlertKind.TICK_FAILED, "TransientActuatorError"),
        (RuntimeError("unexpected"), AlertKind.TICK_FAILED, "RuntimeError"),
    ],
)
def test_a_failing_tick_holds_the_pools_alerts_and_recovers(
    fleet: Fleet, error: Exception, kind: AlertKind, label: str
) -> None:
    a, _ = fleet.replicas
    fleet.run(timedelta(minutes=1))
    units = fleet.cluster.paid_units()[POOL.pool_id]
    acted = len(a.loop.acted_at)
    a.loop.fail_with = error
    fleet.run(timedelta(minutes=4))
    assert fleet.cluster.paid_units()[POOL.pool_id] == units  # held
    assert len(a.loop.acted_at) == acted
    assert [e.kind for e in a.notifier.events].count(kind) == 4
    assert _gauge(a, "leadtime_errors_total", {"error": label}) == 4
    assert not a.health.readiness(fleet.clock.now()).ready
    a.loop.fail_with = None  # the dependency is back
    fleet.run(timedelta(minutes=1))
    assert len(a.loop.acted_at) == acted + 1
    assert a.health.readiness(fleet.clock.now()).ready


class _BrokenNotifier:
    def __init__(self) -> None:
        self.calls = 0

    def notify(self, event: object) -> bool:
        self.calls += 1
        raise ConnectionError("chat service unreachable")


def test_an_unreachable_notifier_never_stops_the_daemon(fleet: Fleet) -> None:
    a, _ = fleet.replicas
    broken = _BrokenNotifier()
    a.daemon._notifier = broken
    a.loop.fail_with = MetricsUnavailable("train", "no samples")
    fleet.run(timedelta(minutes=2))
    assert broken.calls == 3  # the tick at takeover and two scheduled ones
    assert _gauge(a, "leadtime_errors_total", {"error": "ConnectionError"}) == 3
    a.loop.fail_with = None
    fleet.run(timedelta(minutes=1))
    assert a.health.readiness(fleet.clock.now()).ready


def test_both_replicas_refit_and_a_failed_refit_is_survived(fleet: Fleet) -> None:
    a, b = fleet.replicas
    for replica in (a, b):
        replica.daemon.refit()
    assert a.loop.refits
    assert b.loop.refits  # the standby keeps its models warm
    b.loop.refit = lambda now: (_ for _ in ()).throw(ValueError("singular matrix"))  # type: ignore[method-assign]
    b.daemon.refit()
    assert _gauge(b, "leadtime_errors_total", {"error": "ValueError"}) == 1
    assert _gauge(b, "leadtime_refit_duration_seconds_count") == 2


def test_daily_report_summarises_the_day_and_starts_afresh(fleet: Fleet) -> None:
    a, b = fleet.replicas
    fleet.run(timedelta(minutes=3))
    assert a.daemon.daily_report()
    assert not b.daemon.daily_report()  # the standby skips it: one report a day, the leader's
    report_a = next(e for e in a.notifier.events if e.kind is AlertKind.DAILY_REPORT)
    assert report_a.summary == "3 action(s), 0 error(s) in the last 3m"  # its 3-minute window
    assert report_a.details["actions"] == "done: 3"
    assert not any(e.kind is AlertKind.DAILY_REPORT for e in b.notifier.events)
    a.daemon.daily_report()
    last = [e for e in a.notifier.events if e.kind is AlertKind.DAILY_REPORT][-1]
    assert last.details["actions"] == "none"


def test_a_stop_waits_a_bounded_time_for_a_stuck_tick_then_lets_the_lease_lapse_and_the_tick_cannot_write(
    fleet: Fleet,
) -> None:
    a, b = fleet.replicas
    fleet.run(timedelta(minutes=1))
    assert a.elector.is_leader(fleet.clock.now())
    units = fleet.cluster.paid_units()[POOL.pool_id]
    acted = len(a.loop.acted_at)
    entered, gate = threading.Event(), threading.Event()

    def hang() -> None:
        entered.set()
        gate.wait(30)

    a.loop.target = lambda now: units + 1
    a.loop.during_tick = hang
    stuck = threading.Thread(target=a.daemon.tick, daemon=True)
    stuck.start()
    assert entered.wait(10)
    assert a.daemon.stop_working(timeout=0.2) is False  # it did not wait for ever
    assert a.daemon.release() is False  # a tick still runs: the lease is not handed over, it lapses
    stopped = fleet.clock.now()
    a.alive = False  # its election stops with its scheduler
    took_over: list[datetime] = []
    fleet.run(LEASE + 2 * RETRY, lambda now: took_over.extend([now] if b.elector.is_leader(now) else []))
    assert took_over and took_over[0] - stopped >= LEASE - RETRY  # the standby waited the lease duration
    assert not a.elector.is_leader(fleet.clock.now())
    gate.set()
    stuck.join(10)
    assert len(a.loop.acted_at) == acted  # the tick that outlived its leadership wrote nothing
    assert fleet.cluster.paid_units()[POOL.pool_id] == units
    assert fleet.overlap == []


def test_stop_working_lets_no_new_tick_start_and_release_hands_over(fleet: Fleet) -> None:
    a, b = fleet.replicas
    fleet.run(timedelta(minutes=1))
    acted = len(a.loop.acted_at)
    a.daemon.stop_working()
    a.daemon.tick()
    assert len(a.loop.acted_at) == acted
    assert a.daemon.release()
    a.alive = False
    fleet.run(timedelta(seconds=2 * RETRY.total_seconds()))
    assert b.elector.is_leader(fleet.clock.now())
