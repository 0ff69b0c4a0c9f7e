"""The executor on a pool with drains in progress, on the simulated cluster: the planner sees the pool without its
draining nodes, while the cloud's target still counts them until each drain removes its node, so a scale-up is the
planned change applied to the cloud's target and never takes out a node the drainer did not empty; and no action
reaches a pool blocked after a permanent error."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta

import pytest

from actuators import SimulatedCluster
from agent.decision_events import decision_events
from agent.drains import NodeDrains
from agent.executor import Execution, execute
from agent.planning import PlannerMemory
from models import (
    AcceleratorFamily,
    ActionResult,
    ActionStatus,
    CapacityPlan,
    CapacityTier,
    PoolKind,
    PoolSpec,
    Resize,
)
from models.clock import SimulatedClock

T0 = datetime(2024, 1, 1, tzinfo=UTC)
WINDOW = timedelta(minutes=10)
CHIPS = 8
POOL = PoolSpec("gpu", PoolKind.GPU_NODE_POOL, CapacityTier.ON_DEMAND, AcceleratorFamily.GPU, CHIPS, 0, 20, 24.0,
                timedelta(minutes=10), ("a",))  # fmt: skip


class _BudgetedDrains:
    """The cluster's drains, with a disruption budget that says "not now" for every node in ``held``: such a drain
    stays started (the node cordoned, still in the pool and its target) and goes on every tick, as the Kubernetes
    drainer's does, until the budget lets it through and the cluster removes exactly that unit."""

    def __init__(self, cluster: SimulatedCluster) -> None:
        self._cluster = cluster
        self.held: set[str] = set()
        self._draining: dict[str, str] = {}

    def idle_nodes(self, pool_id: str, idle_for: timedelta) -> Sequence[str]:
        return [n for n in self._cluster.idle_nodes(pool_id, idle_for) if n not in self._draining]

    def pool_nodes(self, pool_id: str) -> Sequence[str]:
        return [n for n in self._cluster.pool_nodes(pool_id) if n not in self._draining]

    def drain(self, pool_id: str, node: str, key: str, forced: bool = False) -> ActionResult:
        if node in self.held:
            self._draining[node] = key
            return ActionResult(key, pool_id, ActionStatus.STARTED, T0, f"waiting for a disruption budget on {node}")
        self._draining.pop(node, None)
        return self._cluster.drain(pool_id, node, key, forced)

    def draining_nodes(self, pool_id: str) -> Mapping[str, str]:
        return dict(self._draining)

    def cancel(self, pool_id: str, node: str, key: str) -> ActionResult:
        """Uncordoned: the unit stays in the pool and serves again, idle."""
        if self._draining.pop(node, None) != key:
            return ActionResult(key, pool_id, ActionStatus.REJECTED, T0, f"no drain of {node} with key {key}")
        return ActionResult(key, pool_id, ActionStatus.DONE, T0, f"drain of {node} ended")


def _idle_pool(units: int) -> tuple[SimulatedCluster, SimulatedClock, _BudgetedDrains, NodeDrains]:
    """``units`` ready units, all idle for the stabilization window."""
    clock = SimulatedClock(T0)
    cluster = SimulatedCluster([POOL], clock, {"gpu": units})
    cluster.serve(clock.now(), {"a": 0.0})
    clock.advance(WINDOW)
    cluster.serve(clock.now(), {"a": 0.0})
    drainer = _BudgetedDrains(cluster)
    return cluster, clock, drainer, NodeDrains({"gpu": drainer}, WINDOW)


def _tick(
    cluster: SimulatedCluster, clock: SimulatedClock, drains: NodeDrains, memory: PlannerMemory, delta: int = 0
) -> tuple[Execution, int]:
    """One tick: observe as the loop does, then execute a change of ``delta`` units planned on what the planner
    sees (none: drains in progress go on). Returns the execution and the planned pool's target."""
    now = clock.now()
    seen, _ = drains.observe({s.pool_id: s for s in cluster.list_pools()}, now)
    planned = seen["gpu"].target_units
    resizes = (Resize("gpu", planned, planned + delta, "test", f"gpu@{now.isoformat()}->{planned + delta}"),)
    plan = CapacityPlan(now, resizes if delta else ())
    return execute(plan, cluster, {"gpu": POOL}, memory, now, drains), planned


def _restarted(drainer: _BudgetedDrains) -> NodeDrains:
    """The drains of an agent restarted (or newly elected): it takes over the drains in progress from the cluster's
    record, which does not say whether a release was forced, so none of them is taken back for a scale-up."""
    return NodeDrains({"gpu": drainer}, WINDOW)


def _target(cluster: SimulatedCluster) -> int:
    [state] = cluster.list_pools()
    return state.target_units


@pytest.mark.parametrize("held", [1, 2, 3])
@pytest.mark.parametrize("up", [1, 2, 4])
def test_a_scale_up_while_nodes_drain_grows_the_cloud_target_by_the_planned_change(held: int, up: int) -> None:
    cluster, clock, drainer, drains = _idle_pool(units=6)
    idle = list(cluster.idle_nodes("gpu", WINDOW))
    drainer.held = set(idle[:held])
    release, planned = _tick(cluster, clock, drains, PlannerMemory(), delta=-held)
    assert planned == 6
    assert [r.status for r in release.results] == [ActionStatus.STARTED] * held
    assert _target(cluster) == 6  # cordoned, still in the pool
    drains = _restarted(drainer)

    clock.advance(timedelta(minutes=1))
    grow, planned = _tick(cluster, clock, drains, release.memory, delta=up)
    assert planned == 6 - held  # the planner does not count the draining nodes
    assert grow.results[-1].status is ActionStatus.STARTED
    assert _target(cluster) == 6 + up  # none of the draining nodes was taken out by the resize
    assert cluster.ready_units() == {"gpu": 6}

    drainer.held.clear()  # the budget lets the drains through: each removes exactly its node
    clock.advance(timedelta(minutes=1))
    finished, _ = _tick(cluster, clock, drains, grow.memory)
    assert [r.status for r in finished.results] == [ActionStatus.DONE] * held
    assert _target(cluster) == 6 - held + up  # what the plans asked for


def test_no_resize_takes_the_pool_below_its_target_less_the_nodes_the_drainer_emptied() -> None:
    cluster, clock, drainer, drains = _idle_pool(units=8)
    idle = list(cluster.idle_nodes("gpu", WINDOW))
    drainer.held = set(idle[:3])
    memory = PlannerMemory()
    for delta, released in ((-3, ()), (1, ()), (0, idle[:1]), (2, ()), (0, idle[1:3]), (1, ())):
        if delta > 0:
            drains = _restarted(drainer)
        drainer.held -= set(released)
        before = _target(cluster)
        done, _ = _tick(cluster, clock, drains, memory, delta)
        memory = done.memory
        emptied = sum(1 for r in done.results if r.status is ActionStatus.DONE and "drained" in r.detail)
        assert emptied == len(released)
        assert _target(cluster) >= before - emptied
        assert _target(cluster) == before - emptied + max(delta, 0)
        clock.advance(timedelta(minutes=1))
    assert _target(cluster) == 8 - 3 + 1 + 2 + 1


@pytest.mark.parametrize(("units", "up", "sent", "waiting"), [(20, 3, 0, 3), (18, 3, 2, 1), (16, 3, 3, 0)])
def test_a_scale_up_while_nodes_drain_never_takes_the_cloud_target_above_max_units(
    units: int, up: int, sent: int, waiting: int
) -> None:
    cluster, clock, drainer, drains = _idle_pool(units=units)
    idle = list(cluster.idle_nodes("gpu", WINDOW))
    drainer.held = set(idle[:3])
    release, _ = _tick(cluster, clock, drains, PlannerMemory(), delta=-3)
    drains = _restarted(drainer)  # the drains go on: none is taken back
    clock.advance(timedelta(minutes=1))
    grow, planned = _tick(cluster, clock, drains, release.memory, delta=up)  # planned up to at most max_units
    assert planned + up <= POOL.max_units
    assert _target(cluster) == units + sent <= POOL.max_units
    result = grow.results[-1]
    assert result.status is (ActionStatus.REJECTED if sent == 0 else ActionStatus.STARTED)
    assert (grow.memory == release.memory) is (sent == 0)  # nothing sent, nothing changed
    if waiting:
        assert result.detail.endswith(
            f"gpu holds {units} units with 3 still draining and its max_units is 20: {waiting} of the planned {up} "
            "units wait for those drains to finish (a later plan buys them)"
        )
    else:
        assert "wait for those drains" not in result.detail

    drainer.held.clear()  # the drains end; the next plan buys what waited, on the target they leave
    clock.advance(timedelta(minutes=1))
    _tick(cluster, clock, drains, grow.memory)
    assert _target(cluster) == units + sent - 3
    clock.advance(timedelta(minutes=1))
    _tick(cluster, clock, drains, grow.memory, delta=waiting)
    assert _target(cluster) == units - 3 + up


@pytest.mark.parametrize(
    ("units", "up", "taken", "bought"), [(20, 3, 3, 0), (10, 2, 2, 0), (10, 5, 3, 2), (19, 4, 3, 1)]
)
def test_a_scale_up_takes_back_the_idle_nodes_being_drained_and_buys_only_the_rest(
    units: int, up: int, taken: int, bought: int
) -> None:
    cluster, clock, drainer, drains = _idle_pool(units=units)
    idle = list(cluster.idle_nodes("gpu", WINDOW))
    drainer.held = set(idle[:3])
    release, _ = _tick(cluster, clock, drains, PlannerMemory(), delta=-3)
    clock.advance(timedelta(minutes=1))
    grow, planned = _tick(cluster, clock, drains, release.memory, delta=up)
    assert planned == units - 3
    result = grow.results[-1]  # after the drains' own steps
    back = idle[3 - taken : 3][::-1]  # the latest drains started first
    assert f"took back {taken} draining units ({', '.join(back)}): uncordoned, they serve at once" in result.detail
    assert "wait for those drains" not in result.detail
    assert result.status is (ActionStatus.STARTED if bought else ActionStatus.DONE)
    assert grow.memory.last_change["gpu"] == (clock.now(), +1)
    assert result.taken_back == tuple(back)
    resize = Resize("gpu", planned, planned + up, "test", result.key)
    events = decision_events(CapacityPlan(clock.now(), (resize,)), grow.results, recommend=False)
    cancelled = [(e.subject, e.message) for e in events if e.reason == "DrainCancelled"]
    change = f"from {planned} to {planned + up} units"
    assert cancelled == [(n, f"drain ended, uncordoned to serve again: pool gpu scales up {change}") for n in back]
    assert _target(cluster) == units + bought <= POOL.max_units
    assert sorted(drainer.draining_nodes("gpu")) == sorted(set(idle[:3]) - set(back))
    assert sorted(p.node for p in drains.pending) == sorted(set(idle[:3]) - set(back))

    seen, _ = drains.observe({s.pool_id: s for s in cluster.list_pools()}, clock.now())
    assert seen["gpu"].target_units == units + bought - (3 - taken)  # the nodes taken back count again
    assert set(back) <= set(seen["gpu"].idle_nodes)  # idle from now: released again only after the window


def test_the_drains_of_a_forced_release_are_not_taken_back() -> None:
    """A budget's hard stop drains what the money no longer pays for: demand coming back buys anew (the planner
    weighs the budget), it does not end those drains."""
    cluster, clock, drainer, drains = _idle_pool(units=6)
    drainer.held = set(cluster.idle_nodes("gpu", WINDOW))
    now = clock.now()
    drains.observe({s.pool_id: s for s in cluster.list_pools()}, now)
    stop = Resize("gpu", 6, 4, "budget hard stop", f"gpu@{now.isoformat()}->4", forced=True)
    stopped = execute(CapacityPlan(now, (stop,)), cluster, {"gpu": POOL}, PlannerMemory(), now, drains)
    assert [r.status for r in stopped.results] == [ActionStatus.STARTED] * 2
    clock.advance(timedelta(minutes=1))
    grow, planned = _tick(cluster, clock, drains, stopped.memory, delta=1)
    assert planned == 4
    assert "took back" not in grow.results[-1].detail
    assert grow.results[-1].taken_back == ()
    assert (_target(cluster), len(drains.pending)) == (7, 2)


def test_a_blocked_pool_is_neither_resized_nor_drained() -> None:
    cluster, clock, _, drains = _idle_pool(units=4)
    memory = PlannerMemory().block("gpu", "permission compute.instanceGroupManagers.update denied")
    now = clock.now()
    drains.observe({s.pool_id: s for s in cluster.list_pools()}, now)
    up = Resize("gpu", 4, 6, "test", f"gpu@{now.isoformat()}->6")
    down = Resize("gpu", 4, 2, "test", f"gpu@{now.isoformat()}->2", forced=True)
    for resize in (up, down):
        done = execute(CapacityPlan(now, (resize,)), cluster, {"gpu": POOL}, memory, now, drains)
        [result] = done.results
        assert (result.key, result.status) == (resize.key, ActionStatus.REJECTED)
        assert result.detail == (
            "gpu is blocked after a permanent error (permission compute.instanceGroupManagers.update denied); "
            "nothing is sent to it until the cause is fixed and the pool is unblocked"
        )
        assert done.memory == memory
    assert (cluster.scale_actions, _target(cluster), drains.pending) == (0, 4, ())
