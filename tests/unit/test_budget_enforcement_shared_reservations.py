"""A monthly cap other agents share: what they keep reserved in the period (``BudgetSpend.committed_elsewhere_usd``)
counts in the overspend check and the shed, not in the trim (the ledger's reservations hold it) nor in spend; but a
cap it breaks grants no scale-up."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from agent.planning.budget import Budget, BudgetSpend
from agent.planning.enforcement import enforce_budgets, find_overspends
from models import AcceleratorFamily, CapacityTier, PoolKind, PoolSpec

NOW = datetime(2024, 3, 31, 14, 0, tzinfo=UTC)  # 10 hours before the month ends (UTC)
TICK = timedelta(minutes=1)
SPOT = PoolSpec("spot", PoolKind.GPU_NODE_POOL, CapacityTier.SPOT, AcceleratorFamily.GPU, 8, 0, 20, 10.0,
                timedelta(minutes=10), ("c",))  # fmt: skip
POOLS = {"spot": SPOT}
BUDGET = Budget("team", frozenset({"spot", "remote"}), monthly_cap_usd=1000.0, remote_pools=frozenset({"remote"}))
# spot's 4 units to the month's end: 4 x 10 USD x 10 h = 400 USD, on 100 USD recorded
ALONE = BudgetSpend(BUDGET, NOW, 100.0, 0.0)
SHARED = replace(ALONE, committed_elsewhere_usd=550.0)  # the other agent's units to the month's end


def test_the_overspend_counts_the_other_agents_reservations_and_says_how_much() -> None:
    assert find_overspends(NOW, [ALONE], POOLS, {"spot": 4}) == []
    [over] = find_overspends(NOW, [SHARED], POOLS, {"spot": 4})
    assert over.projected_usd == pytest.approx(1050.0)
    assert over.elsewhere_usd == pytest.approx(550.0)


def test_the_shed_counts_them_and_the_trim_does_not() -> None:
    # 2 of spot's units idle for the release window; a release saves 10 USD a unit-hour over 9 h 59 min
    alone = enforce_budgets(NOW, [ALONE], POOLS, {"spot": 4}, {"spot": 4}, {"spot": 2}, TICK)
    assert alone.shed == ()
    shared = enforce_budgets(NOW, [SHARED], POOLS, {"spot": 4}, {"spot": 4}, {"spot": 2}, TICK)
    assert [(s.pool_id, s.units, s.idle_units) for s in shared.shed] == [("spot", 1, 1)]
    assert shared.overspends[0].elsewhere_usd == pytest.approx(550.0)
    # within the cap counting them (950 USD), a scale-up is trimmed to the room this agent's own projection leaves
    # (500 USD: 5 units), as before: the ledger's reservation of it sees the other agent's share
    near = replace(ALONE, committed_elsewhere_usd=450.0)
    grown = enforce_budgets(NOW, [near], POOLS, {"spot": 4}, {"spot": 12}, {}, TICK)
    assert grown.targets == {"spot": 9}
    assert enforce_budgets(NOW, [ALONE], POOLS, {"spot": 4}, {"spot": 12}, {}, TICK).targets == {"spot": 9}
    assert grown.snapshots[0].spent_usd == pytest.approx(100.0)
    assert grown.shed == ()


def test_a_cap_the_other_agents_break_grants_no_scale_up() -> None:
    over = replace(ALONE, committed_elsewhere_usd=650.0)  # 1,150 USD projected with spot at 4
    out = enforce_budgets(NOW, [over], POOLS, {"spot": 4}, {"spot": 12}, {"spot": 2}, TICK)
    assert out.targets == {"spot": 4}
    assert out.trims[0].allowed_units == 4
    assert [(s.pool_id, s.units) for s in out.shed] == [("spot", 2)]  # 150 USD over, 99.83 USD saved a unit
