"""A budget paced on a forecast paces only the demand its own pools would serve: what a group's pools ahead of the
paced ones take (on-prem pools, shared among groups as the planner shares them, and cheaper pools outside the paced
budgets, such as a reserved pool) is not burst, in the plan and in the history profile alike."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pandas as pd
import pytest

from actuators import SimulatedCluster
from agent.burst_history import HourlyBurstProfile, burst_profile
from agent.ledger import InMemoryLedger
from agent.loop import Agent, AgentParts
from agent.notify import RecordingNotifier
from agent.planning import PlanInput, plan_capacity
from agent.planning.budget import Budget, BudgetSpend
from agent.planning.groups import demand_groups, single_class_groups
from agent.planning.pacing import BurstProfile, pace_needs
from agent.sources.trace import TraceSource, read_trace
from config import settings_from_mapping
from config.schema import PlannerSettings
from forecasting.factory import build_forecaster
from models import AcceleratorFamily, CapacityPlan, CapacityTier, DemandForecast, PoolKind, PoolSpec, PoolState
from models.clock import SimulatedClock
from tests.conftest import TraceWriter

NOW = datetime(2024, 1, 10, 6, 30, tzinfo=UTC)
STEP = timedelta(minutes=5)
HOURS_LEFT = (datetime(2024, 2, 1, tzinfo=UTC) - NOW) / timedelta(hours=1)


def _pool(pool_id: str, tier: CapacityTier, units: int, price: float, serves: tuple[str, ...]) -> PoolSpec:
    kind = PoolKind.ON_PREM if tier is CapacityTier.ON_PREM else PoolKind.GPU_NODE_POOL
    return PoolSpec(pool_id, kind, tier, AcceleratorFamily.GPU, 8, 0, units, price, timedelta(minutes=10), serves)


ONPREM = _pool("onprem", CapacityTier.ON_PREM, 8, 0.0, ("a", "b"))  # 64 GPUs for tenants a and b
SPOT_A = _pool("spot-a", CapacityTier.SPOT, 100, 8.0, ("a",))
SPOT_B = _pool("spot-b", CapacityTier.SPOT, 100, 8.0, ("b",))
SHARED = [ONPREM, SPOT_A, SPOT_B]
RESERVED = _pool("reserved", CapacityTier.RESERVED, 8, 4.0, ("a",))  # 64 GPUs, in no budget
SPOT = _pool("spot", CapacityTier.SPOT, 100, 8.0, ("a",))


def _spend(pools: frozenset[str], money_for: float) -> BudgetSpend:
    """A budget paced on a forecast with money for ``money_for`` chips of burst every hour to the period end, at the
    spot price of 1 USD per chip-hour."""
    budget = Budget("burst", pools, monthly_cap_usd=money_for * HOURS_LEFT, pacing="forecast")
    return BudgetSpend(budget, NOW, 0.0, 0.0)


def _history(values: dict[str, float], days: int = 3) -> pd.DataFrame:
    ds = pd.date_range(NOW - timedelta(days=days), NOW, freq=STEP, inclusive="left")
    return pd.concat([pd.DataFrame({"unique_id": name, "ds": ds, "y": y}) for name, y in values.items()])


def _plan(pools: list[PoolSpec], need: float, spend: BudgetSpend, profile: BurstProfile) -> CapacityPlan:
    return plan_capacity(
        PlanInput(
            now=NOW, tick=STEP, pools=pools,
            states={p.pool_id: PoolState(p.pool_id, NOW, 0, 0) for p in pools if p.kind is not PoolKind.ON_PREM},
            forecasts={"a": DemandForecast("a", NOW, STEP, {0.9: (need,) * 3}, need, "test")}, observed={"a": need},
            service_levels={"a": 0.9}, settings=PlannerSettings(), budgets=[spend], burst_profile=profile,
        )
    )  # fmt: skip


def test_the_profile_counts_a_shared_on_prem_pool_once_across_its_groups() -> None:
    groups = demand_groups(["a", "b"], SHARED)
    assert len(groups) == 2  # each tenant has a spot pool of its own: two groups, one on-prem pool
    by_id = {p.pool_id: p for p in SHARED}
    profile = burst_profile(_history({"a": 64.0, "b": 64.0}), groups, by_id)
    # 128 GPUs demanded, 64 on prem: 64 of burst an hour in all (it read 0 + 0, each group above the whole pool)
    hourly = profile.hourly_chips
    assert [a + b for a, b in zip(hourly["a"], hourly["b"], strict=True)] == pytest.approx([64.0] * 24)
    # the pool serves the dearest waiting first, as the planner fills it: then a is the burst
    dear_b = burst_profile(_history({"a": 64.0, "b": 64.0}), groups, by_id, priority={"b": 4.0})
    assert (dear_b.hourly_chips["a"][0], dear_b.hourly_chips["b"][0]) == pytest.approx((64.0, 0.0))


def test_the_profile_allocates_pools_ahead_that_only_some_groups_share_as_the_planner_does() -> None:
    # a may also use a reserved pool of its own (64 GPUs, in no budget); b only the shared on-prem pool. 100 + 64
    # GPUs demanded over 128 of room: a moves to its reserved pool to leave the on-prem pool to b where it can, and
    # the 36 GPUs of burst are b's alone
    reserved_a = _pool("reserved-a", CapacityTier.RESERVED, 8, 4.0, ("a",))
    pools = [*SHARED, reserved_a]
    groups = demand_groups(["a", "b"], pools)
    paced = {"spot-a", "spot-b"}
    profile = burst_profile(_history({"a": 100.0, "b": 64.0}), groups, {p.pool_id: p for p in pools}, paced=paced)
    assert (profile.hourly_chips["a"][0], profile.hourly_chips["b"][0]) == pytest.approx((0.0, 36.0))


def test_pacing_counts_a_shared_on_prem_pool_once_across_its_groups() -> None:
    groups = demand_groups(["a", "b"], SHARED)
    profile = BurstProfile({"a": (32.0,) * 24, "b": (32.0,) * 24})
    spend = _spend(frozenset({"spot-a", "spot-b"}), 6.4)  # money for a tenth of the 64 chips of burst
    paced = pace_needs(NOW, SHARED, groups, {"a": 64.0, "b": 64.0}, [spend], profile, {})
    # a on prem, b's 64 chips above it funded a tenth: 64 + 6.4 (it was 64 + 64, each group above the whole pool)
    assert paced == {"a": pytest.approx(64.0), "b": pytest.approx(6.4)}
    assert sum(paced.values()) == pytest.approx(64.0 + 6.4)


def test_a_step_a_sharing_group_has_no_value_for_is_not_counted_for_the_others() -> None:
    groups = demand_groups(["a", "b"], SHARED)
    history = _history({"a": 64.0, "b": 64.0})
    history.loc[(history["unique_id"] == "b") & (history["ds"] == NOW - timedelta(hours=25)), "y"] = np.nan
    # b is served first: a's burst is 64 at every step where b is known; where b is not, a's share is not known
    # (read as zero, b would have left the pool to a and a's burst read 0 at that step)
    profile = burst_profile(history, groups, {p.pool_id: p for p in SHARED}, priority={"b": 4.0})
    assert profile.hourly_chips["a"] == pytest.approx((64.0,) * 24)


def test_pacing_leaves_the_demand_a_pool_outside_the_budget_serves_first() -> None:
    pools = [RESERVED, SPOT]
    profile = BurstProfile({"a": (64.0,) * 24})
    spend = _spend(frozenset({"spot"}), 6.4)  # money for a tenth of the burst the profile expects
    # the reserved pool fills first and takes the whole need: the budget would spend nothing, nothing is paced
    assert _plan(pools, 64.0, spend, profile).resizes[0].to_units == 8  # it was 1 (the need paced 64 -> 6.4)
    groups = single_class_groups(["a"], pools)
    # above the reserved pool's 64 chips, the burst is paced: 64 + a tenth of 36
    assert pace_needs(NOW, pools, groups, {"a": 100.0}, [spend], profile, {}) == {"a": pytest.approx(67.6)}


def test_the_profile_measures_the_burst_above_a_pool_outside_the_paced_budgets() -> None:
    pools = [RESERVED, SPOT]
    groups = single_class_groups(["a"], pools)
    history = _history({"a": 100.0})
    budget = _spend(frozenset({"spot"}), 6.4).budget
    profiles = HourlyBurstProfile(groups, pools, timedelta(days=3), STEP, timedelta(minutes=1), [budget])
    profile = profiles.at(NOW, lambda start, end: (history, {}), None)
    assert profile is not None and profile.hourly_chips["a"] == pytest.approx((36.0,) * 24)
    # without the budgets, every cloud pool counts as paced: the burst is all of it (no on-prem pool here)
    assert burst_profile(history, groups, {p.pool_id: p for p in pools}).hourly_chips["a"][0] == pytest.approx(100.0)


def test_the_agent_paces_only_the_burst_above_a_pool_outside_its_paced_budgets(write_trace: TraceWriter) -> None:
    # A reserved pool (64 GPUs, in no budget) fills before a spot pool in a paced budget with money for the 36 GPUs
    # an hour above it to the period end. 100 GPUs demanded for the two days before the tick: the profile the agent
    # keeps is 36 an hour, the money covers it, and the spot pool takes the whole 36. Measured above nothing (the
    # reserved pool taken as burst), the profile read 100 an hour, the money looked to cover 43% and paced the 36 to 15.
    start = datetime(2024, 3, 5, 10, 0, tzinfo=UTC)
    hours_left = (datetime(2024, 4, 1, tzinfo=UTC) - start) / timedelta(hours=1)
    pool = {"kind": "gpu-node-pool", "chips_per_unit": 8, "min_units": 0, "lead_time": "10m", "serves": ["a"]}
    config: dict[str, Any] = {
        "demand_classes": [{"name": "a"}],
        "pools": [
            {**pool, "id": "reserved", "tier": "reserved", "max_units": 8, "price_per_chip_hour_usd": 0.5},
            {**pool, "id": "spot", "tier": "spot", "max_units": 20, "price_per_chip_hour_usd": 1.0},
        ],
        "budgets": [{"name": "burst", "pools": ["spot"], "monthly_cap_usd": 36.0 * 1.2 * hours_left,
                     "pacing": "forecast"}],
        "forecast": {"model": "persistence", "history": "2d", "step": "5m", "max_staleness": "10m"},
        "loop": {"tick_interval": "5m"},
        "ledger": {"backend": "memory"},
    }  # fmt: skip
    settings = settings_from_mapping(config, source="test config")
    clock = SimulatedClock(start)
    cluster = SimulatedCluster(settings.pool_specs(), clock, {"reserved": 8})
    trace = write_trace({"a": [100.0] * (12 * 48 + 1)}, start=(start - timedelta(hours=48)).isoformat())
    parts = AgentParts(
        TraceSource(read_trace(trace)), build_forecaster(settings.forecast), cluster, InMemoryLedger(),
        RecordingNotifier(),
    )  # fmt: skip
    report = Agent(settings, parts, holder="test").run_once(start)
    spot = report.plan.decisions["spot"]
    assert "budget pacing" not in spot.why()
    assert spot.need_chips == pytest.approx(36.0)
