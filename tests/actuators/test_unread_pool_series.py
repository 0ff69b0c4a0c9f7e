"""A pool that cannot be read has no unit or back-off series from the instrumented actuator while it is unread: the
real GKE adapter, against the fake GKE API, reads two pools over three zones, one of them refused (403) at one read.
Its failed units, per-zone units and zone back-offs are removed for that read, instead of their last values exported
on, the other pool's stay, and they come back from its first read after."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from actuators.gke_node_pool import GkeNodePoolActuator
from actuators.instrumented import InstrumentedActuator
from config.cloud import NodePoolMapping
from models.clock import SimulatedClock
from tests.contract.harnesses import CLUSTER
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
ZONES = ("us-central1-a", "us-central1-b", "us-central1-c")
DENIED = "Required 'container.clusters.get' permission for 'projects/test-project/locations/us-central1/clusters/ml'."
SERIES = (
    "leadtime_pool_ready_units",
    "leadtime_pool_target_units",
    "leadtime_pool_failed_units",
    "leadtime_pool_zone_units",
    "leadtime_pool_zone_backoff_until_seconds",
)


def _exported(registry: CollectorRegistry) -> dict[str, dict[tuple[str, ...], float]]:
    """The unit and back-off series on a /metrics page, by pool, then zone and state where they have them."""
    out: dict[str, dict[tuple[str, ...], float]] = {name: {} for name in SERIES}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            if sample.name in out:
                labels = sample.labels
                key = (labels["pool"], *(labels[k] for k in ("zone", "state") if k in labels))
                out[sample.name][key] = sample.value
    return out


def _pools(exported: dict[str, dict[tuple[str, ...], float]]) -> dict[str, set[str]]:
    return {name: {key[0] for key in series} for name, series in exported.items()}


def test_an_unread_pool_has_no_unit_or_back_off_series_until_it_is_read_again(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=6, zones=ZONES)
    gke_api.add_pool("h100", nodes=1)
    clock = SimulatedClock(T0)
    clients = google_clients(gke_api.url)
    mappings = [NodePoolMapping(pool="a100", node_pool="a100"), NodePoolMapping(pool="h100", node_pool="h100")]
    registry = CollectorRegistry()
    actuator = InstrumentedActuator(GkeNodePoolActuator(clients.gke, clients.migs, CLUSTER, mappings, clock), registry)
    gke_api.stockout("us-central1-a", mode="http")
    actuator.resize("a100", 9, "up")  # zone a is out of capacity: backed off, the others take its share
    actuator.list_pools()
    read = _exported(registry)
    assert _pools(read) == {name: {"a100", "h100"} for name in SERIES}
    assert (
        read["leadtime_pool_zone_backoff_until_seconds"][("a100", "us-central1-a")]
        == (T0 + timedelta(minutes=30)).timestamp()
    )
    assert read["leadtime_pool_zone_units"][("a100", "us-central1-b", "target")] == 4.0

    gke_api.fail_next(1, 403, DENIED, path="/nodePools/a100")
    assert [s.pool_id for s in actuator.list_pools()] == ["h100"]
    assert list(actuator.unread_pools()) == ["a100"]
    unread = _exported(registry)
    assert _pools(unread) == {name: {"h100"} for name in SERIES}
    assert {name: {k: v for k, v in series.items() if k[0] == "h100"} for name, series in read.items()} == unread

    actuator.list_pools()
    assert _exported(registry) == read  # read again: every series is back, at the values read
