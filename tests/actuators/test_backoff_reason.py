"""Why a pool is backed off: the executor, on the real GKE adapter against the fake GKE API, backs a pool out of
capacity off as a stockout and a pool whose scale-ups kept failing past its lead time as failing changes; the planner
memory keeps the reason through its stored document (a document without reasons, from an older release, reads as
stockouts) and the keeper's merge, and ``leadtime_pool_backoff_until_seconds`` carries it as its ``reason`` label,
which the alert rules tell apart (tests/deploy/monitoring_rules_test.yaml)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from actuators.gke_node_pool import GkeNodePoolActuator
from agent.daemon.metrics import BackoffCollector
from agent.executor import execute
from agent.planning import PlannerMemory
from agent.planning.memory import BackoffReason
from agent.state.codec import decode, encode
from agent.state.keeper import merge
from config.cloud import NodePoolMapping
from models import AcceleratorFamily, AlertKind, CapacityPlan, CapacityTier, PoolKind, PoolSpec, Resize
from models.clock import SimulatedClock
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi

CLUSTER = "projects/test-project/locations/us-central1/clusters/ml"
T0 = datetime(2024, 5, 1, tzinfo=UTC)
LEAD = timedelta(minutes=10)
TICK = timedelta(minutes=1)
SPECS = {
    pool: PoolSpec(pool, PoolKind.GPU_NODE_POOL, tier, AcceleratorFamily.GPU, 8, 0, 8, price, LEAD, ("a",))
    for pool, tier, price in (("spot", CapacityTier.SPOT, 9.0), ("on-demand", CapacityTier.ON_DEMAND, 24.0))
}


def _scale_up(pool: str, now: datetime) -> CapacityPlan:
    return CapacityPlan(now, (Resize(pool, 2, 6, "32 chips queued", f"{pool}@{now.isoformat()}"),))


def _exported(memory: PlannerMemory, clock: SimulatedClock) -> dict[tuple[str, str], float]:
    """The back-off gauge's series on a /metrics page, by pool and reason."""
    registry = CollectorRegistry()
    registry.register(BackoffCollector(lambda: memory, clock))
    (family,) = [
        f
        for f in text_string_to_metric_families(generate_latest(registry).decode())
        if f.name == "leadtime_pool_backoff_until_seconds"
    ]
    return {(s.labels["pool"], s.labels["reason"]): s.value for s in family.samples}


def _backed_off(gke_api: FakeGkeApi, clock: SimulatedClock) -> PlannerMemory:
    """An upgrade of its nodes holds the on-demand pool's scale-up at every tick for its lead time; once it ends, the
    spot pool's zone is out of accelerators."""
    gke_api.add_pool("a100-spot", nodes=2, zones=("us-central1-b",))
    gke_api.add_pool("a100", nodes=2)
    clients = google_clients(gke_api.url)
    mappings = [
        NodePoolMapping(pool="spot", node_pool="a100-spot"),
        NodePoolMapping(pool="on-demand", node_pool="a100"),
    ]
    actuator = GkeNodePoolActuator(clients.gke, clients.migs, CLUSTER, mappings, clock)
    gke_api.upgrade_nodes("a100")
    memory = PlannerMemory()
    for minute in range(11):
        now = T0 + minute * TICK
        done = execute(_scale_up("on-demand", now), actuator, SPECS, memory, now)
        memory = done.memory
    assert [a.kind for a in done.alerts] == [AlertKind.ACTUATOR_FAILURE]
    gke_api.finish_operations()
    gke_api.stockout("us-central1-b", mode="http")
    done = execute(_scale_up("spot", now), actuator, SPECS, memory, now)
    assert [a.kind for a in done.alerts] == [AlertKind.STOCKOUT]
    return done.memory


def test_each_back_off_is_exported_with_its_reason(gke_api: FakeGkeApi) -> None:
    clock = SimulatedClock(T0 + LEAD)
    memory = _backed_off(gke_api, clock)
    assert memory.why_backed_off("spot") is BackoffReason.STOCKOUT
    assert memory.why_backed_off("on-demand") is BackoffReason.FAILING_CHANGES
    expected = {
        ("on-demand", "failing-changes"): (T0 + 2 * LEAD).timestamp(),
        ("spot", "stockout"): (T0 + 2 * LEAD).timestamp(),
    }
    assert _exported(memory, clock) == expected
    clock.advance(2 * LEAD)
    assert _exported(memory, clock) == {}  # both ended


def test_the_reasons_are_kept_in_the_stored_memory_and_an_older_document_reads_as_stockouts(
    gke_api: FakeGkeApi,
) -> None:
    clock = SimulatedClock(T0 + LEAD)
    memory = _backed_off(gke_api, clock)
    text = encode(memory, T0 + LEAD, "leadtime-0")
    assert json.loads(text)["backoff_reason"] == {"on-demand": "failing-changes", "spot": "stockout"}
    restored = decode(text)
    assert restored == memory
    assert _exported(restored, clock) == _exported(memory, clock)

    older = json.loads(text)
    del older["backoff_reason"]  # saved by a release that kept no reason: every back-off it made was a stockout
    assert {p: decode(json.dumps(older)).why_backed_off(p) for p in SPECS} == dict.fromkeys(SPECS, "stockout")
    newer = json.loads(text)
    newer["backoff_reason"]["on-demand"] = "a-reason-of-a-later-release"  # left out, not a reason to drop the memory
    read = decode(json.dumps(newer))
    assert read.backoff_until == memory.backoff_until
    assert (read.why_backed_off("on-demand"), read.why_backed_off("spot")) == ("stockout", "stockout")


def test_a_merged_back_off_keeps_the_reason_of_the_back_off_kept() -> None:
    base = PlannerMemory().back_off("on-demand", T0, BackoffReason.STOCKOUT)
    ours = base.back_off("on-demand", T0 + 2 * LEAD, BackoffReason.FAILING_CHANGES)
    theirs = base.back_off("on-demand", T0 + LEAD, BackoffReason.STOCKOUT)
    merged = merge(base, ours, theirs)
    assert (merged.backoff_until["on-demand"], merged.why_backed_off("on-demand")) == (
        T0 + 2 * LEAD,
        BackoffReason.FAILING_CHANGES,
    )
    merged = merge(base, theirs, ours)  # the same, seen from the other replica
    assert merged.why_backed_off("on-demand") is BackoffReason.FAILING_CHANGES
    assert merge(base, base, PlannerMemory()) == PlannerMemory()  # the back-off lifted in the store: reason too
