"""Which settled drains ``NodeDrains`` records for the planner memory (``NodeDrains.settled``, carried as
``PlannerMemory.drains_settled``): only drains it took over, which another replica may have stepped and so may
remember as its removals (``ForgetsDrains.forget_settled`` matches nothing else); never a drain it started and settled
itself, which no other replica stepped, whatever its end. A dry-run leader, whose would-be drains are all its own
(a new key at each tick), records none: it recorded each of them, 500 a pool at the former cap."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta

import pytest

from actuators import DryRunDrainer, SimulatedCluster
from agent.drains import NodeDrains
from models import ActionResult, ActionStatus, Resize
from models.clock import SimulatedClock
from tests.unit.test_forced_release import CHIPS, POOL, WINDOW

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
TAKEN_OVER = "gpu@2026-03-02T08:00:00+00:00->2/drain/n2"  # a drain another replica started


class _Drainer:
    """A drainer of nodes ``n1`` and ``n2``, both idle, whose drains take one step (STARTED) and settle with
    ``status`` at the next; ``listed``: the drains in progress the cluster records (``draining_nodes``)."""

    def __init__(self, status: ActionStatus) -> None:
        self._status = status
        self.listed: dict[str, str] = {}
        self._steps: dict[str, int] = {}

    def idle_nodes(self, pool_id: str, idle_for: timedelta) -> Sequence[str]:
        return [n for n in ("n1", "n2") if n not in self.listed]

    def pool_nodes(self, pool_id: str) -> Sequence[str]:
        return self.idle_nodes(pool_id, timedelta(0))

    def drain(self, pool_id: str, node: str, key: str, forced: bool = False) -> ActionResult:
        self._steps[key] = self._steps.get(key, 0) + 1
        if self._steps[key] == 1:
            self.listed[node] = key
            return ActionResult(key, pool_id, ActionStatus.STARTED, T0)
        self.listed.pop(node, None)
        return ActionResult(key, pool_id, self._status, T0)

    def draining_nodes(self, pool_id: str) -> Mapping[str, str]:
        return dict(self.listed)

    def cancel(self, pool_id: str, node: str, key: str) -> ActionResult:
        return ActionResult(key, pool_id, ActionStatus.REJECTED, T0)


@pytest.mark.parametrize("status", [ActionStatus.DONE, ActionStatus.FAILED, ActionStatus.REJECTED])
def test_a_drain_taken_over_is_recorded_when_settled_one_started_here_never(status: ActionStatus) -> None:
    """A drain taken over that ends rejected or failed may still be remembered by the replica that sent its removal
    (the cloud kept the unit when it was taken over, and this replica drained it as any drain): each end is
    recorded."""
    drainer = _Drainer(status)
    drainer.listed["n2"] = TAKEN_OVER
    drains = NodeDrains({"gpu": drainer}, timedelta(0))
    now = T0
    drains.observe({}, now)  # takes the drain of n2 over
    release = Resize("gpu", 3, 2, "idle", f"gpu@{now.isoformat()}->2")
    started = drains.scale_down(release, now, ["n1"]).results
    assert [r.status for r in started] == [ActionStatus.STARTED]
    ended: list[ActionResult] = []
    for _ in range(2):
        now += MINUTE
        drains.observe({}, now)
        ended += drains.continue_pending(now).results

    assert sorted((r.key, r.status) for r in ended if r.status is status) == sorted(
        [(started[0].key, status), (TAKEN_OVER, status)]
    )
    assert drains.pending == ()
    assert drains.settled(now) == {"gpu": {TAKEN_OVER: now}}  # the drain of n1 was recorded too


def test_a_dry_run_leader_records_no_drain_settled() -> None:
    """Seven nodes, six idle, a day of ticks each planning their release: every would-be drain is recorded
    (RECORDED, settled at once, a new key each time); none is in the planner memory's record (500 before)."""
    clock = SimulatedClock(T0)
    cluster = SimulatedCluster([POOL], clock, {"gpu": 7})
    drains = NodeDrains({"gpu": DryRunDrainer(cluster, clock)}, WINDOW)
    recorded = 0
    for _ in range(24 * 60):
        clock.advance(MINUTE)
        cluster.serve(clock.now(), {"a": float(CHIPS)})  # one node busy
        now = clock.now()
        drains.observe({}, now)
        outcome = drains.scale_down(Resize("gpu", 7, 1, "idle", f"gpu@{now.isoformat()}->1"), now)
        recorded += sum(r.status is ActionStatus.RECORDED for r in outcome.results)
    assert recorded > 8000  # six a tick once idle for the window
    assert drains.pending == ()
    assert drains.settled(clock.now()) == {}
