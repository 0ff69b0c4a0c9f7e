"""What reading an EKS node group costs once it has a long history of updates, with boto3 against moto behind the
proxy of ``tests.fakes.aws_api``: its update list (every update it ever had, a few thousand after a year of
scale-ups) is read only while the node group is ``UPDATING``, and the agent's own update is asked about first."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from models import ActionStatus
from models.clock import SimulatedClock
from tests.actuators.aws_adapters import eks_actuator
from tests.fakes.aws_api import FakeAwsApi

T0 = datetime(2026, 3, 2, tzinfo=UTC)
HISTORY = 1_000  # settled updates: ten pages of ListUpdates


def _reads(fake: FakeAwsApi) -> tuple[int, int]:
    return fake.calls("ListUpdates"), fake.calls("DescribeUpdate")


def _cost(fake: FakeAwsApi, before: tuple[int, int]) -> tuple[int, int]:
    now = _reads(fake)
    return now[0] - before[0], now[1] - before[1]


def test_an_active_node_group_is_read_without_its_update_history(aws_api: FakeAwsApi) -> None:
    aws_api.add_nodegroup("ml", "p5", nodes=1)
    aws_api.add_settled_updates("ml", "p5", HISTORY)
    clock = SimulatedClock(T0)
    actuator = eks_actuator(aws_api, clock)  # a (re)started agent
    for _ in range(3):
        before = _reads(aws_api)
        (state,) = actuator.list_pools()
        assert state.in_flight_operation is None
        assert _cost(aws_api, before) == (0, 0)
        clock.advance(timedelta(minutes=1))


def test_the_agents_own_update_is_found_without_paging(aws_api: FakeAwsApi) -> None:
    aws_api.add_nodegroup("ml", "p5", nodes=1)
    aws_api.add_settled_updates("ml", "p5", HISTORY)
    clock = SimulatedClock(T0)
    actuator = eks_actuator(aws_api, clock)
    grown = actuator.resize("od", 3, "up")
    assert grown.status is ActionStatus.STARTED

    before = _reads(aws_api)
    (state,) = actuator.list_pools()  # UPDATING: the update just started is asked about, and is still running
    assert state.in_flight_operation is not None and state.in_flight_operation in grown.detail
    assert _cost(aws_api, before) == (0, 1)
    waiting = actuator.resize("od", 4, "up-more")  # its own update: waited for, not a failure
    assert waiting.status is ActionStatus.REJECTED and "still in progress" in waiting.detail

    aws_api.finish_operations()
    before = _reads(aws_api)
    (state,) = actuator.list_pools()  # ACTIVE again: nothing is looked for
    assert state.in_flight_operation is None
    assert _cost(aws_api, before) == (0, 0)
    assert actuator.resize("od", 4, "up-more").status is ActionStatus.STARTED
    assert aws_api.calls("UpdateNodegroupConfig") == 2


def test_a_restarted_agent_finds_the_update_in_progress_once_and_stops_there(aws_api: FakeAwsApi) -> None:
    aws_api.add_nodegroup("ml", "p5", nodes=1)
    aws_api.add_settled_updates("ml", "p5", HISTORY)
    clock = SimulatedClock(T0)
    first = eks_actuator(aws_api, clock).resize("od", 3, "up")

    after = eks_actuator(aws_api, clock)  # restarted while the update runs: it is on the last page
    before = _reads(aws_api)
    (state,) = after.list_pools()
    assert state.in_flight_operation is not None and state.in_flight_operation in first.detail
    assert _cost(aws_api, before) == (HISTORY // 100 + 1, HISTORY + 1)
    before = _reads(aws_api)
    after.list_pools()  # the settled ones are remembered
    assert _cost(aws_api, before) == (HISTORY // 100 + 1, 1)
