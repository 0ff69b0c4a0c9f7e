"""While the agent's own release is being drained, what the operator sees of a budget matches what the shed acts on:
the snapshot's projection (the projected-spend gauge, the summary) and the projected-overspend alert count the nodes
being drained as billing one more tick, as the shed does, not to the period's end. Counted to its end, each tick the
drains ran projected 38,616 USD against a cap of 24,530 and raised a critical alert saying nothing could be shed,
while the shed (rightly) released nothing more. The grant still counts them to the period's end
(``test_budget_shed_own_drains``: their take-back is given up)."""

from __future__ import annotations

import pytest

from agent.budget_watch import BudgetWatch
from agent.ledger import InMemoryLedger
from agent.planning.budget import BudgetSpend
from config import settings_from_mapping
from models import AlertEvent, AlertKind, PoolState
from tests.unit.test_budget_shed_own_drains import NOW, SPENT, TICK, UNIT_TO_MONTH_END, plan, state

ONE_TICK_USD = 8.0 * TICK.total_seconds() / 3600.0  # one unit billed one more tick, 8 USD a unit-hour


def _watch(cap_usd: float) -> tuple[BudgetWatch, BudgetSpend]:
    settings = settings_from_mapping(
        {
            "demand_classes": [{"name": "train"}],
            "pools": [
                {
                    "id": "west",
                    "kind": "gpu-node-pool",
                    "chips_per_unit": 8,
                    "max_units": 16,
                    "lead_time": "10m",
                    "price_per_unit_hour_usd": 8.0,
                    "serves": ["train"],
                },
            ],
            "budgets": [{"name": "team", "pools": ["west"], "monthly_cap_usd": cap_usd}],
        }
    )
    watch = BudgetWatch(settings, {p.pool_id: p for p in settings.pool_specs()}, InMemoryLedger(), tick=TICK)
    return watch, BudgetSpend(watch.budgets[0], NOW, SPENT, 0.0)


def _overspends(cap_usd: float, pool: PoolState) -> list[AlertEvent]:
    watch, spend = _watch(cap_usd)
    out = plan(pool)  # made under the same budget: 'team' over west, a cap of 5 units to the month's end
    events = watch.alerts(NOW, out, [spend], {"west": pool}, [])
    return [e for e in events if e.kind is AlertKind.PROJECTED_OVERSPEND]


@pytest.mark.parametrize(
    "pool", [state(5, 3, draining=3), state(5, 3, draining=3, takeable=3)], ids=["drains-running", "takeable"]
)
def test_the_projection_while_a_release_is_drained_is_the_sheds(pool: PoolState) -> None:
    # the tick after releasing 3 of 8 units: the shed releases nothing more, 5 units to the month's end and the 3
    # being drained one more tick (38,616.00 USD before: all 8 to the month's end)
    out = plan(pool)
    assert out.resizes == ()
    [snapshot] = out.budgets
    assert snapshot.projected_usd == pytest.approx(SPENT + 5 * UNIT_TO_MONTH_END + 3 * ONE_TICK_USD)
    assert _overspends(SPENT + 5 * UNIT_TO_MONTH_END + 20.0, pool) == []


def test_an_overspend_beside_nodes_being_drained_says_they_are_being_drained() -> None:
    # 5 busy units and 3 being drained under a cap that pays for 4 units: nothing idle can go, and the alert tells
    # the drains under way, projecting them one more tick (it said "nothing can be shed" of all 8 to the month's end)
    pool = state(5, 0, draining=3)
    cap = SPENT + 4 * UNIT_TO_MONTH_END + 20.0
    [event] = _overspends(cap, pool)
    projected = SPENT + 5 * UNIT_TO_MONTH_END + 3 * ONE_TICK_USD
    assert f"Projected {projected:,.2f} USD against a monthly cap of {cap:,.2f} USD" in event.summary
    assert "Scale-ups are stopped; 3 nodes released earlier are still being drained." in event.summary
    assert "nothing can" not in event.summary
    assert event.details["shedding"] == (
        "3 nodes released earlier are still being drained (billed until their drains end); no other unit can go "
        "safely now (no unit idle long enough, or at minimum)"
    )
