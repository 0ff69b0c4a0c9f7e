"""When a pool's changes stop failing: the executor, on the real GKE adapter against the fake GKE API, forgets since
when a pool's changes keep failing once a lead time (at least 10 minutes) has passed without a failure, counted from
the last one or from the end of the back-off the failures caused, so that a refusal days after a single other one
is not told as changes failing for days, nor backs the pool off; the count outlasts ticks that ask nothing of the
pool, and a pool whose scale-up still fails when its back-off ends is told and backed off again at once. The
condition told for it resolves once its changes stop failing."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from actuators.gke_node_pool import GkeNodePoolActuator
from agent.conditions import still_holding
from agent.executor import Execution, execute
from agent.planning import PlannerMemory
from agent.state.codec import decode, encode
from config.cloud import NodePoolMapping
from models import (
    AcceleratorFamily,
    ActionStatus,
    AlertKind,
    CapacityPlan,
    CapacityTier,
    PoolKind,
    PoolSpec,
    Resize,
    Severity,
)
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


def _actuator(gke_api: FakeGkeApi) -> GkeNodePoolActuator:
    clients = google_clients(gke_api.url)
    return GkeNodePoolActuator(
        clients.gke, clients.migs, CLUSTER, [NodePoolMapping(pool="gpu", node_pool="a100")], SimulatedClock(T0)
    )


def _scale_up(now: datetime) -> CapacityPlan:
    return CapacityPlan(now, (Resize("gpu", 2, 6, "32 chips queued", f"gpu@{now.isoformat()}"),))


def _nothing(now: datetime) -> CapacityPlan:
    return CapacityPlan(now)


def test_one_refusal_then_nothing_asked_for_two_days_leaves_the_next_refusal_a_new_count(gke_api: FakeGkeApi) -> None:
    gke_api.add_pool("a100", nodes=2)
    gke_api.upgrade_nodes("a100")  # every change of the pool is held until the upgrade of its nodes ends
    actuator = _actuator(gke_api)
    first = execute(_scale_up(T0), actuator, SPECS, PlannerMemory(), T0)
    assert [r.status for r in first.results] == [ActionStatus.FAILED]
    assert (first.alerts, first.memory.failing_since) == ((), {"gpu": T0})
    memory, now = first.memory, T0
    while now < T0 + LEAD - TICK:  # the need is gone: nothing is asked of the pool
        now += TICK
        memory = execute(_nothing(now), actuator, SPECS, memory, now).memory
        assert memory.failing_since == {"gpu": T0}  # a lead time has not passed yet
    now += TICK
    memory = execute(_nothing(now), actuator, SPECS, memory, now).memory
    assert (memory.failing_since, memory.last_failure) == ({}, {})  # a whole lead time with no failure

    later = T0 + timedelta(days=2)  # one more refusal, the first in two days
    done = execute(_scale_up(later), actuator, SPECS, memory, later)
    assert [r.status for r in done.results] == [ActionStatus.FAILED]
    assert done.alerts == ()
    assert done.memory.failing_since == {"gpu": later}
    assert not done.memory.in_backoff("gpu", later)


def test_a_stale_count_read_back_from_the_stored_memory_is_not_continued(gke_api: FakeGkeApi) -> None:
    """No tick ran in between (a leader that took over from the saved memory): the refusal still starts a count of
    its own, as the earlier failure is more than a lead time old."""
    gke_api.add_pool("a100", nodes=2)
    gke_api.upgrade_nodes("a100")
    actuator = _actuator(gke_api)
    first = execute(_scale_up(T0), actuator, SPECS, PlannerMemory(), T0)
    later = T0 + timedelta(days=2)
    memory = decode(encode(first.memory, T0, "leadtime-0"))
    assert memory.last_failure == {"gpu": T0}
    done = execute(_scale_up(later), actuator, SPECS, memory, later)
    assert done.alerts == ()
    assert (done.memory.failing_since, done.memory.last_failure) == ({"gpu": later}, {"gpu": later})
    assert not done.memory.in_backoff("gpu", later)
    # saved by a release that did not record the last failure: taken as when the count began, as stale
    older = json.loads(encode(first.memory, T0, "leadtime-0"))
    del older["last_failure"]
    memory = decode(json.dumps(older))
    assert (memory.failing_since, memory.failed_last("gpu")) == ({"gpu": T0}, T0)
    done = execute(_scale_up(later), actuator, SPECS, memory, later)
    assert (done.alerts, done.memory.failing_since) == ((), {"gpu": later})


def test_a_refusal_that_lasts_is_told_after_the_lead_time_though_some_ticks_asked_nothing(
    gke_api: FakeGkeApi,
) -> None:
    gke_api.add_pool("a100", nodes=2)
    gke_api.upgrade_nodes("a100")
    actuator = _actuator(gke_api)
    memory = PlannerMemory()
    done: Execution | None = None
    for minute in range(11):  # the scale-up is asked every tick but at minutes 4 to 6 (the need dipped)
        now = T0 + minute * TICK
        plan = _nothing(now) if 4 <= minute <= 6 else _scale_up(now)
        done = execute(plan, actuator, SPECS, memory, now)
        memory = done.memory
        if minute < 10:
            assert done.alerts == ()
            assert memory.failing_since == {"gpu": T0}
    assert done is not None
    (alert,) = done.alerts
    assert (alert.kind, alert.severity, alert.subject) == (AlertKind.ACTUATOR_FAILURE, Severity.WARNING, "gpu")
    assert "kept failing for 10m" in alert.summary and "backing off 10m" in alert.summary
    assert memory.in_backoff("gpu", T0 + LEAD)


def test_a_scale_up_still_refused_when_its_back_off_ends_is_told_and_backed_off_again_and_stops_holding_once_gone(
    gke_api: FakeGkeApi,
) -> None:
    gke_api.add_pool("a100", nodes=2)
    gke_api.upgrade_nodes("a100")
    actuator = _actuator(gke_api)
    condition = (AlertKind.ACTUATOR_FAILURE, "gpu")

    def tick(plan: CapacityPlan, memory: PlannerMemory) -> tuple[Execution, bool]:
        """Execute the plan; and whether the pool's actuator-failure still holds after it, as the agent loop asks
        before it tells a condition's end."""
        done = execute(plan, actuator, SPECS, memory, plan.now)
        states = {s.pool_id: s for s in actuator.list_pools()}
        return done, condition in still_holding(done.memory, states, plan.now)

    memory = PlannerMemory()
    for minute in range(11):
        done, holding = tick(_scale_up(T0 + minute * TICK), memory)
        memory = done.memory
    assert [a.kind for a in done.alerts] == [AlertKind.ACTUATOR_FAILURE] and holding
    until = memory.backoff_until["gpu"]
    assert until == T0 + 2 * LEAD
    now = T0 + LEAD
    while now < until - TICK:  # backed off: the planner asks nothing of the pool, and the count stays
        now += TICK
        done, holding = tick(_nothing(now), memory)
        memory = done.memory
        assert holding and memory.failing_since == {"gpu": T0}

    done, holding = tick(_scale_up(until), memory)  # the back-off ends, the upgrade has not: told again at once
    memory = done.memory
    (alert,) = done.alerts
    assert "kept failing for 20m" in alert.summary and "backing off 10m" in alert.summary
    assert memory.backoff_until["gpu"] == until + LEAD and holding

    gke_api.finish_operations()  # the upgrade ends, and the need with it: nothing is asked of the pool any more
    now, ticks = until, 0
    while holding and ticks < 60:
        now, ticks = now + TICK, ticks + 1
        done, holding = tick(_nothing(now), memory)
        memory = done.memory
    assert not holding and memory.failing_since == {}
    assert now == until + 2 * LEAD  # the end of the second back-off, then a lead time without a failure
