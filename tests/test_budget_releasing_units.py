"""The units a tick marks as being released (``releasing_units``), which the other agents sharing a budget count as
shed already. On a pool with a node drainer (every GKE node pool) a release is carried out as drains of its nodes,
whose results are keyed ``<release key>/drain/<node>``: they were never found under the release's key, so such a
release marked nothing and both agents shed for one excess. Each drain accepted now marks its node, never more than
the release takes off the bill; a size change accepted marks all of that."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agent.budget_reserve_caps import Releasing, releasing_units
from models import ActionResult, ActionStatus, CapacityPlan, PoolState, Resize
from models.plan import drain_key

NOW = datetime(2024, 1, 15, 12, 10, tzinfo=UTC)
DONE, STARTED, FAILED, REJECTED = ActionStatus.DONE, ActionStatus.STARTED, ActionStatus.FAILED, ActionStatus.REJECTED


def _result(key: str, status: ActionStatus) -> ActionResult:
    return ActionResult(key, "west", status, NOW)


def _drains(release: str, *statuses: ActionStatus) -> list[ActionResult]:
    return [_result(drain_key(release, f"west-node-{i}"), s) for i, s in enumerate(statuses)]


@pytest.mark.parametrize(
    ("to_units", "results", "draining", "marked"),
    [
        (5, [_result("r1", DONE)], 0, 3),  # resized: what the release takes off the bill
        (5, [_result("r1", STARTED)], 0, 3),
        (5, [_result("r1", REJECTED)], 0, 0),
        (5, _drains("r1", STARTED, STARTED, DONE), 0, 3),  # drained: a node each
        (5, _drains("r1", STARTED, FAILED, STARTED), 0, 2),  # a drain refused marks nothing
        (5, _drains("r1", REJECTED), 0, 0),
        (7, _drains("r1", STARTED, STARTED), 0, 1),  # never more than the release takes off the bill
        (5, _drains("r10", STARTED, STARTED, STARTED), 0, 0),  # another release's drains
        (5, _drains("r1", STARTED, STARTED), 2, 4),  # beside the nodes draining since earlier ticks
        (5, [], 2, 2),
    ],
)
def test_a_release_marks_the_units_it_takes_off_the_bill(
    to_units: int, results: list[ActionResult], draining: int, marked: int
) -> None:
    state = PoolState("west", NOW, ready_units=8, target_units=8, draining_units=draining)
    plan = CapacityPlan(NOW, resizes=(Resize("west", 8, to_units, "budget team: shed", "r1"),))

    releasing = releasing_units(plan, results, {"west": state})
    assert releasing.started.get("west", 0) == marked - draining
    assert releasing.draining.get("west", 0) == draining


def test_a_scale_up_marks_nothing() -> None:
    state = PoolState("west", NOW, ready_units=4, target_units=4)
    plan = CapacityPlan(NOW, resizes=(Resize("west", 4, 6, "demand", "r1"),))

    assert releasing_units(plan, [_result("r1", DONE)], {"west": state}) == Releasing({})
