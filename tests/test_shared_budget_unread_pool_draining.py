"""A pool that cannot be read is kept reserved in a shared budget at the larger of the units the agent last read it
at and those the ledger last recorded it billing, the same rule as the planner's projection
(``agent.planning.budget_caps.known_units``): the agent's last read is the pool's target, which leaves out nodes
still draining that the ledger charged and the pool still bills."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent.budget_watch import BudgetWatch
from agent.ledger import InMemoryLedger
from agent.planning.budget_caps import units_now
from config import settings_from_mapping
from models import CapacityPlan, PoolState
from tests import shared_budget_rig as rig

START = datetime(2024, 1, 15, 12, tzinfo=UTC)
MONTH_END = datetime(2024, 2, 1, tzinfo=UTC)


def test_an_unread_pool_with_nodes_draining_stays_reserved_at_the_units_it_was_billed() -> None:
    settings = settings_from_mapping(rig.shared_budget_config("west", "east", monthly_cap_usd=1e6), source="west")
    pools = {p.pool_id: p for p in settings.pool_specs()}
    ledger = InMemoryLedger()
    watch = BudgetWatch(settings, pools, ledger, "west")
    # west asked 3 -> 1: its target is 1, but two nodes are still draining, so it bills (and the ledger charges) 3
    draining = PoolState("west", START, 1, 1, draining_units=2)
    assert draining.billed_units == 3
    watch.observe(START, {"west": draining}, last_read={"west": 1})
    watch.acted(START, CapacityPlan(START), [], {"west": draining})
    unread = START + timedelta(minutes=1)
    spends = watch.observe(unread, {}, last_read={"west": 1})  # the read fails; the agent last read target 1
    watch.acted(unread, CapacityPlan(unread), [], {})
    hours_left = (MONTH_END - unread) / timedelta(hours=1)
    reserved_units = ledger.reserved("team", unread) / (rig.UNIT_HOUR_USD * hours_left)
    planner_units = units_now(spends, pools, {}, {"west": 1})["west"]
    assert planner_units == 3
    assert reserved_units == pytest.approx(planner_units)
