"""Replicas for daemon tests: a Daemon per identity, sharing one simulated cluster and one simulated clock, with
its elector talking to the fake Kubernetes API through its own cuttable link. ``Fleet.run`` plays the scheduler:
every round is one election period; ticks come every tick interval and at once when a replica becomes leader."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from actuators import SimulatedCluster
from agent.daemon.guard import LeaderOnlyActuator
from agent.daemon.health import HealthState
from agent.daemon.lease import LeaseElector
from agent.daemon.metrics import DaemonMetrics
from agent.daemon.service import Daemon
from agent.notify import RecordingNotifier
from models import AcceleratorFamily, CapacityTier, PoolKind, PoolSpec
from models.clock import SimulatedClock
from tests.daemon.conftest import DEADLINE, RETRY
from tests.daemon.fake_loop import FakeAgentLoop
from tests.daemon.links import CuttableLink

TICK = timedelta(seconds=60)
POOL = PoolSpec(
    pool_id="a100",
    kind=PoolKind.GPU_NODE_POOL,
    tier=CapacityTier.ON_DEMAND,
    family=AcceleratorFamily.GPU,
    chips_per_unit=8,
    min_units=0,
    max_units=10,
    price_per_unit_hour_usd=29.36,
    lead_time=timedelta(0),
    serves=("train",),
)


def alternating_target(now: datetime) -> int:
    """1, 2, 1, 2 ... by minute: every tick of a leader changes the pool, so every act is visible."""
    return 1 + int(now.timestamp() // 60) % 2


@dataclass
class Replica:
    name: str
    daemon: Daemon
    loop: FakeAgentLoop
    elector: LeaseElector
    link: CuttableLink
    metrics: DaemonMetrics
    health: HealthState
    notifier: RecordingNotifier
    alive: bool = True
    tick_requested: bool = False


@dataclass
class Fleet:
    clock: SimulatedClock
    cluster: SimulatedCluster
    replicas: list[Replica] = field(default_factory=list)
    overlap: list[datetime] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.started = self.clock.now()

    def run(self, duration: timedelta, on_round: Callable[[datetime], None] | None = None) -> None:
        rounds = int(duration / RETRY)
        for _ in range(rounds):
            self.clock.advance(RETRY)
            now = self.clock.now()
            for replica in self.alive:
                replica.daemon.elect()
            scheduled = (now - self.started).total_seconds() % TICK.total_seconds() == 0
            for replica in self.alive:
                if scheduled or replica.tick_requested:
                    replica.tick_requested = False
                    replica.daemon.tick()
            leaders = [r for r in self.replicas if r.elector.is_leader(now)]
            if len(leaders) > 1:
                self.overlap.append(now)
            if on_round is not None:
                on_round(now)

    @property
    def alive(self) -> list[Replica]:
        return [r for r in self.replicas if r.alive]


def make_replica(
    name: str,
    elector: LeaseElector,
    link: CuttableLink,
    clock: SimulatedClock,
    cluster: SimulatedCluster,
    mode: str = "enforce",
) -> Replica:
    metrics = DaemonMetrics()
    health = HealthState(max_tick_age=3 * TICK, max_tick_duration=10 * TICK)
    notifier = RecordingNotifier(dedup_window=timedelta(0))
    loop = FakeAgentLoop(LeaderOnlyActuator(cluster, elector, clock), POOL.pool_id, alternating_target, name=name)
    daemon = Daemon(
        loop,
        elector,
        clock=clock,
        metrics=metrics,
        health=health,
        notifier=notifier,
        mode=mode,
        contact_bound=DEADLINE,
    )
    replica = Replica(name, daemon, loop, elector, link, metrics, health, notifier)
    daemon.set_on_became_leader(lambda: setattr(replica, "tick_requested", True))
    return replica
