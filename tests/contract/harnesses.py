"""One harness per Actuator implementation, so the same contract runs on each: the simulated cluster and the real
adapters on the fake Google APIs. A harness builds the actuator with one pool at ``INITIAL`` ready units, lets lead
time pass (``settle``), makes the pool's provider run out of capacity, refusing the call (``stockout``) or
accepting it and failing the new units afterwards (``late_stockout``), and can throw the adapter away and build a
new one on the same cloud state (``restarted``: what an agent restart does).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from actuators.base import Actuator
from actuators.cloud_tpu import CloudTpuQueuedResourceActuator
from actuators.gke_node_pool import GkeNodePoolActuator
from actuators.gke_tpu_slices import GkeTpuSliceActuator
from actuators.simulated import SimulatedCluster
from config.cloud import NodePoolMapping, QueuedResourceMapping, TpuSliceGroupMapping
from models import AcceleratorFamily, CapacityTier, PoolKind, PoolSpec
from models.clock import SimulatedClock
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.tpu_api import FakeTpuApi

POOL = "accel"
INITIAL = 2
START = datetime(2024, 5, 1, tzinfo=UTC)
CLUSTER = "projects/test-project/locations/us-central1/clusters/ml"


class Harness(ABC):
    actuator: Actuator
    clock: SimulatedClock

    @abstractmethod
    def settle(self) -> None:
        """Let the pool's lead time pass so requested units become ready."""

    def finish_operations(self) -> None:  # noqa: B027 - optional hook: nothing to finish by default
        """Cloud operations end; units they asked for may still be on their way."""

    def untouched_zones(self) -> int:
        """Zones of the pool a scale-up by two from ``INITIAL`` leaves alone: after a stockout in the zones it
        touched, a zone-aware adapter tries these before it refuses the pool."""
        return 0

    @abstractmethod
    def stockout(self) -> None:
        """The pool's provider has no more capacity."""

    @abstractmethod
    def late_stockout(self) -> None:
        """The provider accepts the next scale-up, then cannot create its units when lead time passes."""

    @abstractmethod
    def restarted(self) -> Actuator:
        """A new adapter on the same cloud state, as after an agent restart."""

    @abstractmethod
    def creates(self) -> int:
        """How many requests for more capacity reached the provider so far (to spot duplicates)."""

    def close(self) -> None:  # noqa: B027 - optional hook: nothing to close by default
        pass


class SimHarness(Harness):
    def __init__(self, kind: PoolKind) -> None:
        self.clock = SimulatedClock(START)
        family = AcceleratorFamily.GPU if kind is PoolKind.GPU_NODE_POOL else AcceleratorFamily.TPU
        spec = PoolSpec(POOL, kind, CapacityTier.ON_DEMAND, family, 8, 0, 10, 10.0, timedelta(minutes=10), ("c",))
        self.sim = SimulatedCluster([spec], self.clock, initial_units={POOL: INITIAL})
        self.actuator = self.sim
        self._late = False

    def settle(self) -> None:
        self.clock.advance(timedelta(minutes=10))
        if self._late:
            self.sim.fail_in_flight(POOL)
        self.sim.advance(self.clock.now())

    def late_stockout(self) -> None:
        self._late = True

    def stockout(self) -> None:
        self.sim.add_stockout(POOL, self.clock.now(), self.clock.now() + timedelta(hours=1))

    def restarted(self) -> Actuator:
        return self.sim  # the simulated cluster is the cloud: its state is what survives a restart

    def creates(self) -> int:
        return self.sim.scale_actions


class GkeNodePoolHarness(Harness):
    """A node pool in ``zones`` (a zonal cluster's one zone, or a regional cluster's three)."""

    def __init__(self, zones: tuple[str, ...] = ("us-central1-a", "us-central1-b")) -> None:
        self.clock = SimulatedClock(START)
        self.fake = FakeGkeApi().start()
        self.zones = zones
        self.fake.add_pool("a100", nodes=INITIAL, zones=zones)
        self.actuator = self.restarted()

    def restarted(self) -> Actuator:
        clients = google_clients(self.fake.url)
        mapping = NodePoolMapping(pool=POOL, node_pool="a100")
        return GkeNodePoolActuator(clients.gke, clients.migs, CLUSTER, [mapping], self.clock)

    def settle(self) -> None:
        self.fake.advance()

    def finish_operations(self) -> None:
        self.fake.finish_operations()

    def untouched_zones(self) -> int:
        return max(0, len(self.zones) - 2)

    def stockout(self) -> None:
        for zone in self.zones:  # one zone out is not the pool out: its share goes to the other zones
            self.fake.stockout(zone, mode="http")

    def late_stockout(self) -> None:
        for zone in self.zones:
            self.fake.stockout(zone, mode="operation")

    def creates(self) -> int:
        return self.fake.calls("POST", ":setSize") + self.fake.calls("POST", "/resize")

    def close(self) -> None:
        self.fake.stop()


SLICES = TpuSliceGroupMapping(
    pool=POOL, group="v5e", machine_type="ct5lp-hightpu-4t", tpu_topology="4x4", zone="us-central1-a"
)


class GkeTpuSliceHarness(Harness):
    def __init__(self) -> None:
        self.clock = SimulatedClock(START)
        self.fake = FakeGkeApi().start()
        for i in range(INITIAL):
            self.fake.add_pool(f"v5e-{i}", nodes=SLICES.hosts_per_slice, zones=("us-central1-a",))
        self.actuator = self.restarted()

    def restarted(self) -> Actuator:
        return GkeTpuSliceActuator(google_clients(self.fake.url).gke, CLUSTER, [SLICES], self.clock)

    def settle(self) -> None:
        self.fake.advance()

    def finish_operations(self) -> None:
        self.fake.finish_operations()

    def stockout(self) -> None:
        self.fake.stockout("us-central1-a", mode="http")

    def late_stockout(self) -> None:
        self.fake.stockout("us-central1-a", mode="operation")

    def creates(self) -> int:
        return self.fake.calls("POST", "/nodePools")

    def close(self) -> None:
        self.fake.stop()


QUEUED = QueuedResourceMapping(
    pool=POOL, group="v5e", zone="us-central2-b", accelerator_type="v5litepod-8", runtime_version="v2", chips=8
)
QUEUED_LEAD = timedelta(minutes=10)


class QueuedResourceHarness(Harness):
    """Queued resources that may wait one lead time for resources: a stocked-out zone fails them when it is over."""

    def __init__(self) -> None:
        self.clock = SimulatedClock(START)
        self.fake = FakeTpuApi().start()
        self.fake.clock = self.clock.now
        self.actuator = self.restarted()
        self.actuator.resize(POOL, INITIAL, "seed")
        self.settle()
        self.actuator = self.restarted()
        self._seeded = self.creates()

    def restarted(self) -> Actuator:
        tpu = google_clients(self.fake.url).tpu
        return CloudTpuQueuedResourceActuator(tpu, "test-project", [QUEUED], self.clock, {POOL: QUEUED_LEAD})

    def settle(self) -> None:
        self.clock.advance(QUEUED_LEAD)
        self.fake.advance()  # waiting for resources -> provisioning (or failed, stocked out past its valid-until)
        self.fake.advance()  # provisioning -> active

    def stockout(self) -> None:
        self.fake.stockout(mode="http")

    def late_stockout(self) -> None:
        self.fake.stockout(mode="wait")

    def creates(self) -> int:
        return self.fake.calls("POST", "/queuedResources") - getattr(self, "_seeded", 0)

    def close(self) -> None:
        self.fake.stop()


HARNESSES: dict[str, Callable[[], Harness]] = {
    "simulated-node-pool": lambda: SimHarness(PoolKind.GPU_NODE_POOL),
    "simulated-slice-group": lambda: SimHarness(PoolKind.TPU_SLICE_GROUP),
    "gke-node-pool": GkeNodePoolHarness,
    "gke-node-pool-one-zone": lambda: GkeNodePoolHarness(("us-central1-a",)),
    "gke-node-pool-three-zones": lambda: GkeNodePoolHarness(("us-central1-a", "us-central1-b", "us-central1-c")),
    "gke-tpu-slices": GkeTpuSliceHarness,
    "cloud-tpu-queued-resources": QueuedResourceHarness,
}


def _aws(name: str) -> Harness:
    from tests.contract import aws_harnesses  # imports this module: load it only when an AWS harness is built

    built: Harness = getattr(aws_harnesses, name)()
    return built


HARNESSES["aws-auto-scaling-group"] = lambda: _aws("AutoScalingGroupHarness")
HARNESSES["aws-eks-nodegroup"] = lambda: _aws("EksNodegroupHarness")
