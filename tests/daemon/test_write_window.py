"""A resize reads the cloud before it writes, and the reads may take longer than the leader has left: the leader-only
guard opens a write window, and the adapters check right before each write that the leadership left covers the
write's time limit. Real electors on the fake Kubernetes API; the real GKE adapter and Google clients on the fake
GKE and Compute Engine API, and the real AWS adapters and boto3 on moto behind the AWS proxy, whose calls are made
to take simulated seconds."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest

from actuators import Actuator
from actuators.gke_node_pool import GkeNodePoolActuator
from agent.daemon.guard import LeaderOnlyActuator
from agent.daemon.lease import LeaseElector
from config.cloud import NodePoolMapping
from config.daemon import LeaderElectionSettings
from kube import Leases
from models import ActionStatus, TransientActuatorError
from models.clock import SimulatedClock
from tests.actuators.aws_adapters import asg_actuator, eks_actuator
from tests.contract.harnesses import CLUSTER
from tests.daemon.conftest import DEADLINE, LEASE
from tests.daemon.links import CuttableLink
from tests.fakes.aws_api import FakeAwsApi
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi

ZONES = ("us-central1-a", "us-central1-b")
WRITES = (":setSize", ":setAutoscaling", "/resize", "/deleteInstances")


class SlowGke(FakeGkeApi):
    """The fake GKE API, where the next request whose path contains a key of ``slow`` first runs its hook: the time
    that call takes in the cloud."""

    def __init__(self) -> None:
        super().__init__()
        self.slow: dict[str, Callable[[], None]] = {}

    def respond(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, Any]:
        hook = next((self.slow.pop(f) for f in list(self.slow) if f in path), None)
        if hook is not None:
            hook()
        return super().respond(method, path, headers, body)

    def writes(self) -> int:
        return sum(self.calls("POST", w) for w in WRITES)


@pytest.fixture
def gke() -> Iterator[SlowGke]:
    fake = SlowGke()
    fake.start()
    try:
        yield fake
    finally:
        fake.stop()


def _guarded(gke: FakeGkeApi, elector: LeaseElector, clock: SimulatedClock) -> LeaderOnlyActuator:
    clients = google_clients(gke.url)
    adapter = GkeNodePoolActuator(
        clients.gke, clients.migs, CLUSTER, [NodePoolMapping(pool="gpu", node_pool="a100")], clock
    )
    return LeaderOnlyActuator(adapter, elector, clock, LEASE - DEADLINE)  # as the daemon wires it


def test_a_resize_whose_reads_outlast_the_leadership_does_not_write_after_the_standby_took_over(
    gke: SlowGke, clock: SimulatedClock, elector_for: Callable[[str], tuple[LeaseElector, CuttableLink]]
) -> None:
    a, _ = elector_for("replica-a")
    b, _ = elector_for("replica-b")
    assert a.step(clock.now()).leading and not b.step(clock.now()).leading
    gke.add_pool("a100", nodes=4, zones=ZONES)  # 2 nodes in each zone
    taken_over: list[float] = []

    def gke_is_slow() -> None:  # 20 s in the GKE API; replica-a cannot reach the Kubernetes API meanwhile
        for _ in range(10):
            clock.advance(DEADLINE / 5)
            if b.step(clock.now()).became_leader:
                taken_over.append(clock.monotonic())
                # replica-b's first tick acts at once: 4 in each zone
                assert _guarded(gke, b, clock).resize("gpu", 8, "b-1").status is ActionStatus.STARTED
                gke.finish_operations()

    clock.advance(DEADLINE * 0.9)  # replica-a last renewed 9 s ago: it still leads when its resize starts
    gke.slow["/nodePools/a100"] = gke_is_slow  # replica-a's first read
    with pytest.raises(TransientActuatorError, match=r"leads for 0\.0s more"):
        _guarded(gke, a, clock).resize("gpu", 6, "a-1")

    assert taken_over and b.is_leader() and not a.is_leader()
    # replica-b's 4 + 4 stand: replica-a's stale 6 would have deleted two of the instances replica-b just asked for
    assert [m.target_size for m in gke.pools["a100"].migs] == [4, 4]
    assert not [i.name for m in gke.pools["a100"].migs for i in m.instances if i.action == "DELETING"]


def test_a_write_is_not_sent_when_the_leadership_left_is_shorter_than_its_time_limit(
    gke: SlowGke, clock: SimulatedClock, elector_for: Callable[[str], tuple[LeaseElector, CuttableLink]]
) -> None:
    a, _ = elector_for("replica-a")
    assert a.step(clock.now()).leading
    gke.add_pool("a100", nodes=2, zones=ZONES)
    guarded = _guarded(gke, a, clock)
    # The reads take 6 s: 4 s of leadership are left, and a write may take 5 s (lease_duration - renew_deadline).
    gke.slow["listManagedInstances"] = lambda: clock.advance(DEADLINE * 0.6)
    with pytest.raises(TransientActuatorError, match=r"leads for 4\.0s more, less than the 5s a write may take"):
        guarded.resize("gpu", 4, "a-1")
    assert a.is_leader()  # it still leads, but the write could not end before its renew deadline
    assert gke.writes() == 0
    assert [m.target_size for m in gke.pools["a100"].migs] == [1, 1]

    assert a.step(clock.now()).leading  # renewed: 10 s left, the next tick's write goes out
    result = guarded.resize("gpu", 4, "a-2")
    assert result.status is ActionStatus.STARTED
    assert [m.target_size for m in gke.pools["a100"].migs] == [2, 2]


def test_each_zone_write_of_a_resize_is_checked_on_its_own(
    gke: SlowGke, clock: SimulatedClock, elector_for: Callable[[str], tuple[LeaseElector, CuttableLink]]
) -> None:
    """A shrink deletes instances zone by zone: the leadership left is read again before each zone's write."""
    a, _ = elector_for("replica-a")
    assert a.step(clock.now()).leading
    gke.add_pool("a100", nodes=4, zones=ZONES)  # 2 + 2: going to 2 deletes one instance in each zone
    gke.slow["deleteInstances"] = lambda: clock.advance(DEADLINE * 0.6)  # the first zone's delete takes 6 s
    with pytest.raises(TransientActuatorError, match=r"leads for 4\.0s more"):
        _guarded(gke, a, clock).resize("gpu", 2, "a-1")
    assert gke.calls("POST", "/deleteInstances") == 1  # the second zone's was not sent
    assert sorted(m.target_size for m in gke.pools["a100"].migs) == [1, 2]


def _slow_first(aws_api: FakeAwsApi, monkeypatch: pytest.MonkeyPatch, operation: str, hook: Callable[[], None]) -> None:
    """The proxy's next ``operation`` call (an EKS route's or an Auto Scaling Action) first runs ``hook``."""
    real = aws_api.handle
    pending = [hook]

    def handle(method: str, target: str, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, str], bytes]:
        if pending and (operation in body.decode(errors="replace") or operation in target):
            pending.pop()()
        return real(method, target, headers, body)

    monkeypatch.setattr(aws_api, "handle", handle)


@pytest.mark.parametrize("kind", ["eks", "asg"])
def test_an_aws_write_is_not_sent_when_the_reads_left_too_little_leadership(
    kind: str,
    aws_api: FakeAwsApi,
    monkeypatch: pytest.MonkeyPatch,
    clock: SimulatedClock,
    elector_for: Callable[[str], tuple[LeaseElector, CuttableLink]],
) -> None:
    a, _ = elector_for("replica-a")
    assert a.step(clock.now()).leading
    if kind == "eks":
        aws_api.add_nodegroup("ml", "p5", nodes=1)
        adapter: Actuator = eks_actuator(aws_api, clock)
        pool, write, first_read = "od", "UpdateNodegroupConfig", "/node-groups/p5"
    else:
        aws_api.add_group("gpu-spot", nodes=1)
        adapter = asg_actuator(aws_api, clock)
        pool, write, first_read = "spot", "SetDesiredCapacity", "DescribeAutoScalingGroups"
    guarded = LeaderOnlyActuator(adapter, a, clock, LEASE - DEADLINE)
    _slow_first(aws_api, monkeypatch, first_read, lambda: clock.advance(DEADLINE * 0.6))  # the reads take 6 s
    with pytest.raises(TransientActuatorError, match=r"leads for 4\.0s more"):
        guarded.resize(pool, 3, "a-1")
    assert aws_api.calls(write) == 0

    assert a.step(clock.now()).leading  # renewed: the next tick's write goes out
    assert guarded.resize(pool, 3, "a-2").status is ActionStatus.STARTED
    assert aws_api.calls(write) == 1


def test_a_lease_margin_longer_than_the_renew_deadline_still_leaves_the_leader_room_to_write(
    gke: SlowGke, clock: SimulatedClock, api_client_for: Callable[[str], Any], link_to: Callable[[], CuttableLink]
) -> None:
    """With lease_duration 30s and renew_deadline 10s, a time limit of the margin (20 s) would never be covered by the
    10 s a renewal gives: the limit is also at most renew_deadline - retry_period, which a leader renewing on time
    always has."""
    settings = LeaderElectionSettings.model_validate({"lease_duration": "30s", "renew_deadline": "10s"})
    assert settings.write_limit() == timedelta(seconds=8)
    elector = LeaseElector(
        Leases(api_client_for(link_to().url), timedelta(seconds=0.3)),
        name="leadtime",
        namespace="leadtime",
        identity="replica-a",
        lease_duration=settings.lease_duration,
        renew_deadline=settings.renew_deadline,
        monotonic=clock.monotonic,
    )
    assert elector.step(clock.now()).leading
    gke.add_pool("a100", nodes=1)
    clients = google_clients(gke.url)
    adapter = GkeNodePoolActuator(
        clients.gke, clients.migs, CLUSTER, [NodePoolMapping(pool="gpu", node_pool="a100")], clock
    )
    guarded = LeaderOnlyActuator(adapter, elector, clock, settings.write_limit())
    clock.advance(settings.retry_period)  # the next renewal is due: 8 s of leadership are left
    assert guarded.resize("gpu", 2, "a-1").status is ActionStatus.STARTED
    assert gke.calls("POST", "/resize") == 1
