"""The NodeDrainer contract, on the simulated cluster and on KubernetesNodeDrainer (fake Kubernetes API) removing
nodes through GkeNodePoolActuator (fake GKE and Compute Engine APIs): idleness needs the whole window, a drained
node leaves its pool and the pool shrinks by exactly one, a repeated key does nothing more."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from actuators.base import Actuator, NodeDrainer
from actuators.gke_node_pool import GkeNodePoolActuator
from actuators.kubernetes_drain import KubernetesNodeDrainer
from actuators.simulated import SimulatedCluster
from config.cloud import NodePoolMapping
from kube import KubernetesApi
from models import AcceleratorFamily, ActionResult, ActionStatus, CapacityTier, PoolKind, PoolSpec
from models.clock import SimulatedClock
from tests.fakes import kube_objects as objs
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi

POOL = "a100"
WINDOW = timedelta(minutes=10)
START = datetime(2024, 5, 1, tzinfo=UTC)


class DrainHarness:
    """Three ready nodes, one busy with accelerator work, two idle from ``START``."""

    drainer: NodeDrainer
    actuator: Actuator
    clock: SimulatedClock

    def observe(self) -> None:
        """One tick of observation (the simulator serves demand; the real drainer looks at pods)."""

    def close(self) -> None:
        pass


class SimDrainHarness(DrainHarness):
    def __init__(self) -> None:
        self.clock = SimulatedClock(START)
        spec = PoolSpec(POOL, PoolKind.GPU_NODE_POOL, CapacityTier.ON_DEMAND, AcceleratorFamily.GPU, 8, 0, 10, 30.0,
                        timedelta(minutes=5), ("train",))  # fmt: skip
        self.sim = SimulatedCluster([spec], self.clock, initial_units={POOL: 3})
        self.drainer = self.actuator = self.sim

    def observe(self) -> None:
        self.sim.serve(self.clock.now(), {"train": 8.0})


class RealDrainHarness(DrainHarness):
    def __init__(self) -> None:
        self.clock = SimulatedClock(START)
        self.gke = FakeGkeApi().start()
        self.kube = FakeKubeApi(clock=self.clock.now).start()  # evicted pods shut down as the clock advances
        self.gke.add_pool("a100", nodes=3)
        names = [i.name for m in self.gke.pools["a100"].migs for i in m.instances]
        for name in names:
            self.kube.put("nodes", objs.node(name, "a100"))
            self.kube.put("pods", objs.pod(f"agent-{name}", name, namespace="kube-system", owner_kind="DaemonSet"))
        self.kube.put("pods", objs.pod("trainer", names[0], accelerators=8, owner_kind="Job"))
        self.kube.put("pods", objs.mirror_pod(f"proxy-{names[1]}", names[1]))
        clients = google_clients(self.gke.url)
        self.actuator = GkeNodePoolActuator(
            clients.gke, clients.migs, "projects/test-project/locations/us-central1/clusters/ml",
            [NodePoolMapping(pool=POOL, node_pool="a100")], self.clock,
        )  # fmt: skip
        from kubernetes import client as k8s

        configuration = k8s.Configuration()
        configuration.host = self.kube.url
        self.api_client = k8s.ApiClient(configuration)
        self.drainer = KubernetesNodeDrainer(
            KubernetesApi(self.api_client),
            self.clock,
            {POOL: "a100"},
            self.actuator,
        )

    def close(self) -> None:
        self.api_client.close()
        self.kube.stop()
        self.gke.stop()


HARNESSES = {"simulated": SimDrainHarness, "kubernetes-on-gke": RealDrainHarness}


@pytest.fixture(params=sorted(HARNESSES))
def harness(request: pytest.FixtureRequest) -> Iterator[DrainHarness]:
    built = HARNESSES[request.param]()
    try:
        yield built
    finally:
        built.close()


def _drain_to_the_end(h: DrainHarness, node: str, key: str, forced: bool = False) -> ActionResult:
    """Continue the drain with the same key, a minute apart, while it reports itself started (its evicted pods
    shutting down) and the clock is still within its timeout."""
    result = h.drainer.drain(POOL, node, key, forced)
    for _ in range(15):
        if result.status is not ActionStatus.STARTED:
            break
        h.clock.advance(timedelta(minutes=1))
        result = h.drainer.drain(POOL, node, key, forced)
    return result


def _target(h: DrainHarness) -> tuple[int, int]:
    (state,) = h.actuator.list_pools()
    return state.ready_units, state.target_units


def test_idle_nodes_need_the_whole_window(harness: DrainHarness) -> None:
    harness.observe()
    assert harness.drainer.idle_nodes(POOL, WINDOW) == []
    harness.clock.advance(WINDOW - timedelta(seconds=1))
    harness.observe()
    assert harness.drainer.idle_nodes(POOL, WINDOW) == []
    harness.clock.advance(timedelta(seconds=1))
    harness.observe()
    assert len(harness.drainer.idle_nodes(POOL, WINDOW)) == 2


def test_a_drained_node_leaves_and_the_pool_shrinks_by_exactly_one(harness: DrainHarness) -> None:
    harness.observe()
    harness.drainer.idle_nodes(POOL, WINDOW)
    harness.clock.advance(WINDOW)
    harness.observe()
    node = harness.drainer.idle_nodes(POOL, WINDOW)[0]
    result = harness.drainer.drain(POOL, node, "drain-1")
    if result.status is ActionStatus.STARTED:  # cordoned and empty: a real drainer removes it at its next step
        result = harness.drainer.drain(POOL, node, "drain-1")
    assert (result.status, result.key) == (ActionStatus.DONE, "drain-1")
    assert _target(harness)[1] == 2
    assert harness.drainer.drain(POOL, node, "drain-1") == result
    assert _target(harness)[1] == 2
    harness.observe()
    assert len(harness.drainer.idle_nodes(POOL, WINDOW)) == 1  # the other idle node; the drained one is gone


def test_pool_nodes_list_idle_nodes_first_and_a_busy_one_drains_too(harness: DrainHarness) -> None:
    harness.observe()
    idle = harness.drainer.idle_nodes(POOL, timedelta(0))
    nodes = harness.drainer.pool_nodes(POOL)
    assert len(idle) == 2 and list(nodes[:2]) == list(idle) and len(nodes) == 3
    busy = nodes[2]
    result = _drain_to_the_end(harness, busy, "forced-1", forced=True)  # its pod is evicted and shuts down first
    assert (result.status, result.key) == (ActionStatus.DONE, "forced-1")
    assert _target(harness)[1] == 2
    harness.observe()
    assert len(harness.drainer.pool_nodes(POOL)) == 2
