"""A stockout ends with its own back-off: the executor, on the real GKE adapter against the fake GKE API, backs a pool
off for a stockout while its changes were already failing; when that back-off ends, a scale-up still refused backs
the pool off again, now for changes that kept failing. The stockout condition holds through the first back-off only
and is resolved at the tick the second one starts, while the pool's actuator-failure holds on."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from actuators.gke_node_pool import GkeNodePoolActuator
from agent.conditions import ConditionTracker, still_holding
from agent.executor import execute
from agent.planning import PlannerMemory
from agent.planning.memory import BackoffReason
from config.cloud import NodePoolMapping
from models import AcceleratorFamily, AlertKind, CapacityPlan, CapacityTier, PoolKind, PoolSpec, Resize
from models.clock import SimulatedClock
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi

CLUSTER = "projects/test-project/locations/us-central1/clusters/ml"
T0 = datetime(2024, 5, 1, tzinfo=UTC)
LEAD = timedelta(minutes=10)
TICK = timedelta(minutes=1)
POOL = PoolSpec("gpu", PoolKind.GPU_NODE_POOL, CapacityTier.ON_DEMAND, AcceleratorFamily.GPU, 8, 0, 8, 24.0, LEAD,
                ("a",))  # fmt: skip
SPECS = {"gpu": POOL}
STOCKOUT = (AlertKind.STOCKOUT, "gpu")
FAILING = (AlertKind.ACTUATOR_FAILURE, "gpu")


def _scale_up(now: datetime) -> CapacityPlan:
    return CapacityPlan(now, (Resize("gpu", 2, 6, "32 chips queued", f"gpu@{now.isoformat()}"),))


def test_a_stockout_is_resolved_when_a_failing_changes_back_off_follows_its_own(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=2)
    clients = google_clients(gke_api.url)
    clock = SimulatedClock(T0)
    mappings = [NodePoolMapping(pool="gpu", node_pool="a100")]
    # the adapter leaves a zone out of capacity out of scale-ups for as long as the pool's back-off lasts
    actuator = GkeNodePoolActuator(clients.gke, clients.migs, CLUSTER, mappings, clock, zone_backoff=LEAD)
    tracker = ConditionTracker()

    def tick(plan: CapacityPlan, memory: PlannerMemory) -> tuple[PlannerMemory, list[str], set[tuple[AlertKind, str]]]:
        """Execute the plan and tell the tracker, as the agent loop does at the end of a tick: the memory after it,
        the conditions resolved, and those still holding."""
        clock.advance(plan.now - clock.now())
        done = execute(plan, actuator, SPECS, memory, plan.now)
        states = {s.pool_id: s for s in actuator.list_pools()}
        holding = still_holding(done.memory, states, plan.now)
        ended = tracker.update(plan.now, done.alerts, holding)
        return done.memory, [f"{e.kind} {e.subject}" for e in ended], holding

    gke_api.upgrade_nodes("a100")  # the scale-up is held while its nodes upgrade: the pool's changes start failing
    memory, ended, holding = tick(_scale_up(T0), PlannerMemory())
    assert (memory.failing_since, ended) == ({"gpu": T0}, [])
    gke_api.finish_operations()
    gke_api.stockout(mode="http")  # the next one finds the zone out of accelerators
    memory, ended, holding = tick(_scale_up(T0 + TICK), memory)
    until = T0 + TICK + LEAD
    assert (memory.backoff_until, memory.why_backed_off("gpu")) == ({"gpu": until}, BackoffReason.STOCKOUT)
    assert tracker.active == (STOCKOUT,)  # the failing count is not told before the lead time
    assert STOCKOUT in holding

    gke_api.restock()
    gke_api.upgrade_nodes("a100")  # another upgrade: when the back-off ends, the scale-up is refused again
    now = T0 + TICK
    while now < until - TICK:  # backed off: the planner asks nothing of the pool
        now += TICK
        memory, ended, holding = tick(CapacityPlan(now), memory)
        assert ended == [] and STOCKOUT in holding

    memory, ended, holding = tick(_scale_up(until), memory)
    assert memory.why_backed_off("gpu") is BackoffReason.FAILING_CHANGES  # failing for 11m, past the lead time
    assert memory.backoff_until == {"gpu": until + LEAD}
    assert ended == ["stockout gpu"]  # the stockout's back-off is over; this one is the failing changes'
    assert STOCKOUT not in holding and FAILING in holding
    assert tracker.active == (FAILING,)
