"""On-prem room from observed capacity: the planner fills an on-prem pool only up to its units that can take work now,
so demand its down or cordoned nodes would run goes to the next eligible pool; capacity that cannot be read is never
zero (the pool is planned on its ``max_units``), and each shortfall or failed read is told, naming the pool."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta

import pytest

from agent.onprem_capacity import OnPremReading, onprem_capacity_events, read_onprem
from agent.planning import PlanInput, plan_capacity
from config.schema import PlannerSettings
from models import (
    AcceleratorFamily,
    AlertKind,
    CapacityPlan,
    CapacityTier,
    MetricsUnavailable,
    PoolKind,
    PoolSpec,
    PoolState,
    Severity,
)

NOW = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)
# 40 on-prem 8-GPU nodes, then a spot pool and an on-demand pool of 8-GPU nodes, all serving "train"
ONPREM = PoolSpec(
    "onprem", PoolKind.ON_PREM, CapacityTier.ON_PREM, AcceleratorFamily.GPU, 8, 40, 40, 0.0, timedelta(0), ("train",)
)
SPOT = PoolSpec(
    "spot", PoolKind.GPU_NODE_POOL, CapacityTier.SPOT, AcceleratorFamily.GPU, 8, 0, 48, 8.8, timedelta(minutes=10),
    ("train",),
)  # fmt: skip
ON_DEMAND = PoolSpec(
    "on-demand", PoolKind.GPU_NODE_POOL, CapacityTier.ON_DEMAND, AcceleratorFamily.GPU, 8, 0, 20, 29.4,
    timedelta(minutes=10), ("train",),
)  # fmt: skip
POOLS = (ONPREM, SPOT, ON_DEMAND)


def _plan(demand: float, onprem_units: Mapping[str, int]) -> CapacityPlan:
    states = {p.pool_id: PoolState(p.pool_id, NOW, 0, 0) for p in (SPOT, ON_DEMAND)}
    return plan_capacity(
        PlanInput(
            now=NOW,
            tick=timedelta(minutes=1),
            pools=POOLS,
            states=states,
            forecasts={},
            observed={"train": demand},
            service_levels={"train": 0.9},
            settings=PlannerSettings(),
            onprem_units=onprem_units,
        )
    )


@pytest.mark.parametrize(
    ("onprem_units", "onprem_chips", "cloud"),
    [
        ({}, 300.0, {}),  # not read: planned on max_units (320 chips hold the 300)
        ({"onprem": 40}, 300.0, {}),
        ({"onprem": 30}, 240.0, {"spot": 8}),  # 10 nodes down: 60 GPUs burst, 8 spot nodes
        ({"onprem": 0}, 0.0, {"spot": 38}),  # all down: 300 GPUs in the cloud
        ({"onprem": 44}, 300.0, {}),  # more nodes than configured: the pool is planned at its max_units
    ],
)
def test_an_on_prem_pool_takes_demand_up_to_its_ready_units(
    onprem_units: dict[str, int], onprem_chips: float, cloud: dict[str, int]
) -> None:
    plan = _plan(300.0, onprem_units)
    assert plan.decisions["onprem"].need_chips == onprem_chips
    assert {r.pool_id: r.to_units for r in plan.resizes} == cloud
    assert all(r.pool_id != "onprem" for r in plan.resizes)  # an on-prem pool is never resized


def test_what_spot_cannot_hold_goes_on_to_on_demand() -> None:
    # 480 GPUs with 10 on-prem nodes ready: 80 on-prem, 384 (48 nodes) on spot, the last 16 (2 nodes) on-demand
    plan = _plan(480.0, {"onprem": 10})
    assert plan.decisions["onprem"].need_chips == 80.0
    assert {r.pool_id: r.to_units for r in plan.resizes} == {"spot": 48, "on-demand": 2}


class _Readings:
    """A capacity source answering given values, or failing as a whole."""

    def __init__(self, values: Mapping[str, float], problems: Mapping[str, str] | None = None, fail: bool = False):
        self.values, self.problems, self.fail = dict(values), dict(problems or {}), fail

    def ready_units(self, pools: Sequence[PoolSpec], at: datetime) -> tuple[dict[str, float], dict[str, str]]:
        if self.fail:
            raise MetricsUnavailable("on-prem capacity", "cannot connect to Prometheus: [Errno 111] Connection refused")
        return dict(self.values), dict(self.problems)


@pytest.mark.parametrize(
    ("value", "units", "problem"),
    [
        (30.0, 30, None),
        (29.9, 29, None),  # part of a node takes no work
        (52.0, 40, None),  # at most max_units
        (0.0, 0, None),
        (math.nan, None, "nan"),
        (-1.0, None, "-1"),
        (math.inf, None, "inf"),
    ],
)
def test_a_reading_that_is_not_a_unit_count_is_a_problem_never_a_number(
    value: float, units: int | None, problem: str | None
) -> None:
    reading = read_onprem(_Readings({"onprem": value}), POOLS, NOW)
    if units is None:
        assert reading.units == {}
        assert problem is not None and problem in reading.problems["onprem"]
    else:
        above = {"onprem": value} if math.floor(value) > 40 else {}  # a read above max_units is kept for a warning
        assert reading == OnPremReading({"onprem": units}, {}, above)


def test_a_source_that_fails_leaves_every_on_prem_pool_unread_and_no_source_reads_nothing() -> None:
    failed = read_onprem(_Readings({}, fail=True), POOLS, NOW)
    assert failed.units == {} and "Connection refused" in failed.problems["onprem"]
    assert read_onprem(None, POOLS, NOW) == OnPremReading()
    assert read_onprem(_Readings({"spot": 3.0}), POOLS, NOW) == OnPremReading()  # cloud pools are not its to read


def test_a_short_pool_is_told_with_its_missing_units_and_where_its_demand_goes() -> None:
    (short,) = onprem_capacity_events(OnPremReading({"onprem": 30}), POOLS, NOW)
    assert (short.kind, short.severity, short.subject) == (AlertKind.ONPREM_CAPACITY, Severity.WARNING, "onprem")
    assert short.summary == (
        "On-prem pool onprem has 30 of its 40 units ready and schedulable: 10 missing (80 chips); demand above them "
        "goes to spot, on-demand"
    )
    assert short.details["missing_units"] == "10"
    (dark,) = onprem_capacity_events(OnPremReading({"onprem": 0}), POOLS, NOW)
    assert dark.severity is Severity.CRITICAL
    assert onprem_capacity_events(OnPremReading({"onprem": 40}), POOLS, NOW) == []


def test_a_failed_read_is_told_as_planned_on_max_units() -> None:
    (unread,) = onprem_capacity_events(OnPremReading(problems={"onprem": "no value"}), POOLS, NOW)
    assert (unread.kind, unread.severity) == (AlertKind.ONPREM_CAPACITY, Severity.WARNING)
    assert "planning on its configured 40 units" in unread.summary and unread.details == {"error": "no value"}
