"""The end of ``tick-failed`` outlives the process that raised it. It was held in that process's memory alone: a
replica restarted after failing ticks (a crash, an OOM kill, a rollout) told their end never, and the alert stayed
open in Slack. The open failure is now saved with the open conditions of the planner memory, which the next leader
adopts and ends, as it does its predecessor's other conditions.

Whole daemons (the real agent loop, election on the Lease, the planner memory in a ConfigMap on the fake Kubernetes
API through the real kubernetes client, a shared simulated cluster and clock); a tick fails while the cloud answers
503 to every read (``TransientActuatorError`` raised through the loop)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import pytest
from kubernetes import client as k8s

from actuators import SimulatedCluster
from config.schema import Settings
from models import AlertEvent, AlertKind
from models.clock import SimulatedClock
from tests.daemon.conftest import RETRY
from tests.daemon.links import CuttableLink
from tests.daemon.scenario import ScenarioReplica, helios_settings, scenario_replica
from tests.fakes.kube_api import FakeKubeApi

SUBJECT = "replica/leadtime-a"
# How long after the last failed tick (or its adoption) the end is told (the configured 5m): a shorter one tells the
# same ends sooner, in fewer election rounds.
RESOLVE_AFTER = timedelta(minutes=2)
Start = Callable[[str], tuple[ScenarioReplica, CuttableLink]]


def _play(clock: SimulatedClock, alive: list[ScenarioReplica], duration: timedelta) -> None:
    """Election every retry period, a tick every minute (and at once for a new leader)."""
    for _ in range(int(duration / RETRY)):
        clock.advance(RETRY)
        for replica in alive:
            step = replica.assembled.daemon.elect()
            if clock.now().second == 0 or step.became_leader:
                replica.assembled.daemon.tick()


def _told(replica: ScenarioReplica, *, resolved: bool) -> list[AlertEvent]:
    return [
        e
        for e in replica.notifier.delivered
        if (e.kind, e.subject, e.resolved) == (AlertKind.TICK_FAILED, SUBJECT, resolved)
    ]


def _stored(replica: ScenarioReplica) -> set[tuple[AlertKind, str]]:
    """The open conditions of the planner memory in the ConfigMap, as a replica reads it."""
    memory = replica.assembled.loop.keeper._store.load()
    assert memory is not None
    return set(memory.open_conditions)


@pytest.fixture
def settings(kube_api: FakeKubeApi) -> Settings:
    settings = helios_settings(kube_api.url)
    return settings.model_copy(update={"alerts": settings.alerts.model_copy(update={"resolve_after": RESOLVE_AFTER})})


@pytest.fixture
def start(
    clock: SimulatedClock,
    settings: Settings,
    link_to: Callable[[], CuttableLink],
    api_client_for: Callable[[str], k8s.ApiClient],
) -> Start:
    cluster = SimulatedCluster(settings.pool_specs(), clock)

    def replica(name: str) -> tuple[ScenarioReplica, CuttableLink]:
        link = link_to()
        started = scenario_replica(name, settings, clock, cluster, "enforce", api_client_for(link.url))
        started.assembled.daemon.refit()
        return started, link

    return replica


def _failing_leader(clock: SimulatedClock, start: Start) -> tuple[ScenarioReplica, CuttableLink, datetime]:
    """leadtime-a leads, then three of its ticks fail: the replica, its link and its first failed tick."""
    first, link = start("leadtime-a")
    _play(clock, [first], timedelta(minutes=2))
    first.deps.cloud_down = True
    _play(clock, [first], timedelta(minutes=3))
    raised = _told(first, resolved=False)
    assert len(raised) == 3
    assert (AlertKind.TICK_FAILED, SUBJECT) in _stored(first)
    return first, link, raised[0].at


@pytest.mark.parametrize("restarted_as", ["leadtime-a", "leadtime-b"], ids=["same-pod", "new-pod"])
def test_a_replica_restarted_after_failing_ticks_has_their_end_told(
    clock: SimulatedClock, settings: Settings, start: Start, restarted_as: str
) -> None:
    """The process that failed is gone; the one that leads next (the same pod's container restarted, or a new pod
    that takes the Lease over once it lapses) tells the end of the failures it adopted, once."""
    _, _, first_failed = _failing_leader(clock, start)
    restarted, _ = start(restarted_as)  # the cloud answers again
    _play(clock, [restarted], timedelta(minutes=1))  # it leads once the lease has lapsed (15 s)
    assert restarted.assembled.elector.is_leader(clock.now())
    _play(clock, [restarted], settings.alerts.resolve_after + timedelta(minutes=2))

    [end] = _told(restarted, resolved=True)
    assert end.details["first raised"] == first_failed.strftime("%Y-%m-%d %H:%M UTC")
    assert "tick failed, pools held" in end.details["last told (warning)"]
    assert (AlertKind.TICK_FAILED, SUBJECT) not in _stored(restarted)
    _play(clock, [restarted], timedelta(minutes=10))
    assert len(_told(restarted, resolved=True)) == 1


def test_a_replica_whose_ticks_recover_tells_their_end_once_and_takes_it_out_of_the_memory(
    clock: SimulatedClock, settings: Settings, start: Start
) -> None:
    """The tracker only carries the failure it saves: the replica's own end, as before, and no second one."""
    first, _, _ = _failing_leader(clock, start)
    last_failed = _told(first, resolved=False)[-1].at
    first.deps.cloud_down = False
    _play(clock, [first], settings.alerts.resolve_after + timedelta(minutes=10))

    [end] = _told(first, resolved=True)
    assert end.at - last_failed == settings.alerts.resolve_after
    assert end.summary.startswith("Ticks no longer fail")
    assert (AlertKind.TICK_FAILED, SUBJECT) not in _stored(first)


def test_a_leader_that_loses_the_lease_with_its_failures_saved_leaves_their_end_to_the_next(
    clock: SimulatedClock, settings: Settings, start: Start
) -> None:
    """Cut off from the Kubernetes API it stops leading; the replica that takes over adopted the failures and tells
    their end, and the standby does not tell it a second time."""
    first, link, _ = _failing_leader(clock, start)
    second, _ = start("leadtime-b")
    first.deps.cloud_down = False
    link.cut()
    _play(clock, [first, second], timedelta(minutes=1))  # the lease lapses 15 s after the last renewal
    assert second.assembled.elector.is_leader(clock.now())
    _play(clock, [first, second], settings.alerts.resolve_after + timedelta(minutes=5))

    assert len(_told(second, resolved=True)) == 1
    assert _told(first, resolved=True) == []
