"""An EKS node group busy with an update someone else started between the agent's read and its own update: EKS
refuses the agent's ``UpdateNodegroupConfig`` because the node group is not ACTIVE. That passes once the other update
ends, so the pool is held and tried again next tick, never blocked with a critical alert until a person unblocks it,
whichever error code carries the refusal. boto3 against moto behind the proxy of ``tests.fakes.aws_api``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent.executor import execute
from agent.planning import PlannerMemory
from models import (
    AcceleratorFamily,
    ActionStatus,
    CapacityPlan,
    CapacityTier,
    PoolKind,
    PoolSpec,
    Resize,
    Severity,
    TransientActuatorError,
)
from models.clock import SimulatedClock
from tests.actuators.aws_adapters import eks_actuator
from tests.fakes.aws_api import NOT_ACTIVE_MESSAGE, FakeAwsApi

T0 = datetime(2024, 5, 1, tzinfo=UTC)
OD = PoolSpec("od", PoolKind.GPU_NODE_POOL, CapacityTier.ON_DEMAND, AcceleratorFamily.GPU, 8, 0, 16, 98.32,
              timedelta(minutes=10), ("training",))  # fmt: skip
REFUSALS = [("ResourceInUseException", 409), ("ClientException", 400)]


def _busy_before_the_write(aws_api: FakeAwsApi, code: str, status: int) -> None:
    """The node group reads ACTIVE; an operator's update starts just before the agent's update arrives."""
    aws_api.answer_busy_with(code, status)

    def operator_update() -> None:
        aws_api.start_update("ml", "p5")

    aws_api.before_next("UpdateNodegroupConfig", operator_update)


@pytest.mark.parametrize(("code", "status"), REFUSALS)
def test_an_update_refused_while_the_node_group_is_not_active_is_retried(
    aws_api: FakeAwsApi, code: str, status: int
) -> None:
    group = aws_api.add_nodegroup("ml", "p5", nodes=1)
    actuator = eks_actuator(aws_api, SimulatedClock(T0))
    _busy_before_the_write(aws_api, code, status)

    with pytest.raises(TransientActuatorError, match=f"{code}: {NOT_ACTIVE_MESSAGE}") as refused:
        actuator.resize("od", 3, "while-busy")
    assert "will retry" in str(refused.value)
    assert aws_api.calls("UpdateNodegroupConfig") == 1
    assert aws_api.group(group)["DesiredCapacity"] == 1

    aws_api.finish_operations()  # the other update is over: the next tick's change goes through
    assert actuator.resize("od", 3, "after-busy").status is ActionStatus.STARTED
    assert aws_api.group(group)["DesiredCapacity"] == 3


@pytest.mark.parametrize(("code", "status"), REFUSALS)
def test_the_executor_holds_a_busy_node_group_without_blocking_it(aws_api: FakeAwsApi, code: str, status: int) -> None:
    """The executor records the failed resize, raises no critical alert and does not block the pool: the next
    tick's resize is sent and carried out."""
    group = aws_api.add_nodegroup("ml", "p5", nodes=1)
    clock = SimulatedClock(T0)
    actuator = eks_actuator(aws_api, clock)
    _busy_before_the_write(aws_api, code, status)

    plan = CapacityPlan(T0, (Resize("od", 1, 3, "16 chips queued", "od@t0"),))
    first = execute(plan, actuator, {"od": OD}, PlannerMemory(), T0)
    assert [(r.status, code in (r.error or "")) for r in first.results] == [(ActionStatus.FAILED, True)]
    assert [a for a in first.alerts if a.severity is Severity.CRITICAL] == []
    assert "od" not in first.memory.blocked

    aws_api.finish_operations()
    clock.advance(timedelta(minutes=1))
    now = clock.now()
    second = execute(CapacityPlan(now, (Resize("od", 1, 3, "16 chips queued", "od@t1"),)), actuator, {"od": OD},
                     first.memory, now)  # fmt: skip
    assert [r.status for r in second.results] == [ActionStatus.STARTED]
    assert aws_api.group(group)["DesiredCapacity"] == 3
