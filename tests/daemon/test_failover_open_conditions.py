"""Open conditions across a change of leader, with whole daemons (real agent loop, election on the Lease, the
planner memory in a ConfigMap on the fake Kubernetes API through the real kubernetes client, a shared simulated
cluster and clock), each replica telling its alerts through a notifier with the real per-window de-duplication:

* a condition the first leader told (every class's demand missing) is told again by the replica that takes over
  (nothing says the first leader's notifier delivered it), and that replica tells its end when the demand comes
  back;
* a condition that ended between the two leaders (the demand came back while nobody led) is resolved by the new
  leader, not forgotten;
* a stockout the first leader told is resolved by the new leader when the pool's back-off ends;
* with separate stores (nothing carries the record over: the control that shows the tests can fail) the new leader
  tells the ends of none of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from kubernetes import client as k8s

from actuators import SimulatedCluster
from agent.notify.recording import RecordingNotifier
from agent.state import InMemoryStateStore
from config.schema import Settings
from models import AlertEvent, AlertKind
from models.clock import SimulatedClock
from tests.daemon.conftest import RETRY
from tests.daemon.links import CuttableLink
from tests.daemon.scenario import ScenarioReplica, helios_settings, scenario_replica
from tests.fakes.kube_api import FakeKubeApi

POOL = "a100-on-demand"
# How long a condition goes unseen before its end is told (the configured 5m): the scenarios wait it out once or
# twice with two replicas electing every retry period, and a shorter one tells the same ends sooner.
RESOLVE_AFTER = timedelta(minutes=2)


@dataclass
class Pair:
    clock: SimulatedClock
    settings: Settings
    replicas: list[ScenarioReplica]
    told: dict[str, RecordingNotifier] = field(default_factory=dict)

    def play(self, duration: timedelta, alive: list[ScenarioReplica]) -> None:
        """Election every retry period, a tick every minute (and at once for a new leader)."""
        for _ in range(int(duration / RETRY)):
            self.clock.advance(RETRY)
            for replica in alive:
                step = replica.assembled.daemon.elect()
                if self.clock.now().second == 0 or step.became_leader:
                    replica.assembled.daemon.tick()

    def leader(self) -> ScenarioReplica:
        (leader,) = [r for r in self.replicas if r.assembled.elector.is_leader(self.clock.now())]
        return leader

    def events(self, replica: ScenarioReplica, kind: AlertKind, *, resolved: bool) -> list[AlertEvent]:
        return [e for e in self.told[replica.name].events if e.kind is kind and e.resolved is resolved]


def _pair(
    clock: SimulatedClock,
    kube_api: FakeKubeApi,
    link_to: Callable[[], CuttableLink],
    api_client_for: Callable[[str], k8s.ApiClient],
    shared: bool,
    stockout: bool = False,
) -> Pair:
    settings = helios_settings(kube_api.url)
    settings = settings.model_copy(
        update={"alerts": settings.alerts.model_copy(update={"resolve_after": RESOLVE_AFTER})}
    )
    cluster = SimulatedCluster(settings.pool_specs(), clock)
    if stockout:
        cluster.add_stockout(POOL, clock.now(), clock.now() + timedelta(seconds=30))  # over before a new leader
    pair = Pair(clock, settings, [])
    for name in ("leadtime-a", "leadtime-b"):
        state = None if shared else InMemoryStateStore(name)  # None: the ConfigMap both replicas share
        replica = scenario_replica(
            name, settings, clock, cluster, "enforce", api_client_for(link_to().url), state=state
        )
        pair.told[name] = RecordingNotifier(settings.alerts.dedup_window)
        replica.assembled.loop.agent.parts.notifier = pair.told[name]
        replica.assembled.daemon.refit()
        pair.replicas.append(replica)
    return pair


def _all_missing(pair: Pair) -> tuple[list[str], ScenarioReplica, ScenarioReplica]:
    """Every class's metrics missing for both replicas for 3 minutes: the classes, the leader that raised them and
    the other replica."""
    classes = sorted(f"demand class {c.name}" for c in pair.settings.demand_class_models())
    for replica in pair.replicas:
        replica.deps.metrics_down = True
    pair.play(timedelta(minutes=3), pair.replicas)
    first = pair.leader()
    (second,) = [r for r in pair.replicas if r is not first]
    return classes, first, second


@pytest.mark.slow
@pytest.mark.parametrize("shared", [True, False], ids=["configmap", "separate-stores"])
def test_a_new_leader_tells_open_conditions_again_and_their_end(
    clock: SimulatedClock,
    kube_api: FakeKubeApi,
    link_to: Callable[[], CuttableLink],
    api_client_for: Callable[[str], k8s.ApiClient],
    shared: bool,
) -> None:
    pair = _pair(clock, kube_api, link_to, api_client_for, shared)
    classes, first, second = _all_missing(pair)
    assert sorted(e.subject for e in pair.events(first, AlertKind.MISSING_DATA, resolved=False)) == classes

    pair.play(timedelta(minutes=1), [second])  # the leader dies; the other takes over within a lease and a tick
    assert pair.leader() is second
    raised_again = sorted(e.subject for e in pair.events(second, AlertKind.MISSING_DATA, resolved=False))
    second.deps.metrics_down = False
    pair.play(pair.settings.alerts.resolve_after + timedelta(minutes=2), [second])
    ended = sorted(e.subject for e in pair.events(second, AlertKind.MISSING_DATA, resolved=True))
    assert raised_again == classes  # told again, by the same ticks that then end them
    if not shared:  # it knew nothing of them
        return
    assert ended == classes
    (end, *_) = pair.events(second, AlertKind.MISSING_DATA, resolved=True)
    first_raised = pair.events(first, AlertKind.MISSING_DATA, resolved=False)[0].at
    assert end.details["first raised"] == first_raised.strftime("%Y-%m-%d %H:%M UTC")  # the predecessor's start


@pytest.mark.slow
@pytest.mark.parametrize("shared", [True, False], ids=["configmap", "separate-stores"])
def test_a_condition_that_ended_while_nobody_led_is_resolved_by_the_new_leader(
    clock: SimulatedClock,
    kube_api: FakeKubeApi,
    link_to: Callable[[], CuttableLink],
    api_client_for: Callable[[str], k8s.ApiClient],
    shared: bool,
) -> None:
    pair = _pair(clock, kube_api, link_to, api_client_for, shared)
    classes, _, second = _all_missing(pair)
    second.deps.metrics_down = False  # the demand is back before the new leader's first tick

    pair.play(pair.settings.alerts.resolve_after + timedelta(minutes=3), [second])
    assert pair.leader() is second
    ended = sorted(e.subject for e in pair.events(second, AlertKind.MISSING_DATA, resolved=True))
    assert ended == (classes if shared else [])


@pytest.mark.slow
@pytest.mark.parametrize("shared", [True, False], ids=["configmap", "separate-stores"])
def test_a_stockout_told_by_one_leader_is_resolved_by_the_next_when_its_back_off_ends(
    clock: SimulatedClock,
    kube_api: FakeKubeApi,
    link_to: Callable[[], CuttableLink],
    api_client_for: Callable[[str], k8s.ApiClient],
    shared: bool,
) -> None:
    pair = _pair(clock, kube_api, link_to, api_client_for, shared, stockout=True)
    pair.play(timedelta(minutes=1), pair.replicas)
    first = pair.leader()
    (second,) = [r for r in pair.replicas if r is not first]
    assert [e.subject for e in pair.events(first, AlertKind.STOCKOUT, resolved=False)] == [POOL]
    backoff_until = first.assembled.loop.agent.memory.backoff_until[POOL]

    pair.play(timedelta(minutes=5), [second])
    assert pair.leader() is second
    assert clock.now() < backoff_until
    pair.play(backoff_until - clock.now() + timedelta(minutes=2), [second])
    ended = [e.subject for e in pair.events(second, AlertKind.STOCKOUT, resolved=True)]
    assert ended == ([POOL] if shared else [])
