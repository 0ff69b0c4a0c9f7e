"""Reservations are for budgets other agents share (``remote_pools``). A budget no other agent spends from is held
to its cap by the planner alone and reserves nothing: a scale-up's reservation, priced to the period's end, would
stay for ``reservation_ttl`` after a release took its units, and a pool released and grown again within the hour
would be counted twice. In a shared budget the units held are reserved every tick, and once a release's units stop
billing, the next tick reserves them no more: growing again is granted as the first time was."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from agent.budget_watch import BudgetWatch
from agent.ledger import InMemoryLedger
from agent.ledger.reservations import ReservationRequest
from agent.ledger.sqlite import SqliteLedger
from config import settings_from_mapping
from config.schema import Settings
from models import ActionResult, ActionStatus, AlertEvent, AlertKind, CapacityPlan, PoolState, Resize

T0 = datetime(2026, 12, 4, tzinfo=UTC)
PRICE = 8.8  # USD a node-hour
PER_UNIT = PRICE * 28 * 24  # a node priced to the end of December, from the 4th: 5,913.60 USD
CAP = 20_000.0  # room for 3 nodes to the period's end, not for 4
POOL = "spot"


def _settings(budget: Mapping[str, Any]) -> Settings:
    return settings_from_mapping(
        {
            "demand_classes": [{"name": "train"}],
            "pools": [
                {
                    "id": POOL,
                    "kind": "gpu-node-pool",
                    "tier": "spot",
                    "chips_per_unit": 8,
                    "max_units": 6,
                    "price_per_unit_hour_usd": PRICE,
                    "lead_time": "10m",
                    "serves": ["train"],
                }
            ],
            "budgets": [{"name": "burst", "pools": [POOL], "monthly_cap_usd": CAP, **budget}],
        }
    )


@pytest.fixture(params=["memory", "sqlite"])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[InMemoryLedger | SqliteLedger]:
    if request.param == "memory":
        yield InMemoryLedger()
        return
    sqlite = SqliteLedger(tmp_path / "ledger.sqlite")
    try:
        yield sqlite
    finally:
        sqlite.close()


def _tick(watch: BudgetWatch, now: datetime, units: int, grow_to: int | None) -> tuple[int, list[AlertEvent]]:
    """One tick of the loop's money side on a pool read at ``units`` (ready), asked to grow to ``grow_to``: the
    target the reservations leave it and the alerts they raise."""
    state = PoolState(POOL, now, units, units)
    states = {POOL: state}
    spends = watch.observe(now, states)
    assert all(s.spent_period_usd < CAP for s in spends)
    resizes = () if grow_to is None else (Resize(POOL, units, grow_to, "forecast", f"{POOL}@{now}->{grow_to}"),)
    plan = CapacityPlan(now, resizes=resizes, targets={POOL: units if grow_to is None else grow_to})
    reserved = watch.reserve(now, plan)
    done = [ActionResult(r.key, POOL, ActionStatus.STARTED, now) for r in reserved.plan.resizes]
    watch.acted(now, reserved.plan, done, states)
    return reserved.plan.targets[POOL], list(reserved.alerts)


def _grown_and_released(watch: BudgetWatch, start: datetime) -> list[tuple[int, list[AlertEvent]]]:
    """Grown 0 -> 2, released (read at 0), grown again, released, grown again: a tick every 10 minutes, all within
    the hour."""
    ticks = [start + timedelta(minutes=10 * i) for i in range(5)]
    outcomes = [_tick(watch, ticks[0], 0, 2)]
    _tick(watch, ticks[1], 0, None)
    outcomes.append(_tick(watch, ticks[2], 0, 2))
    _tick(watch, ticks[3], 0, None)
    outcomes.append(_tick(watch, ticks[4], 0, 2))
    return outcomes


def test_a_budget_no_other_agent_shares_reserves_nothing(ledger: InMemoryLedger | SqliteLedger) -> None:
    settings = _settings({})
    watch = BudgetWatch(settings, {p.pool_id: p for p in settings.pool_specs()}, ledger, tick=timedelta(minutes=10))

    outcomes = _grown_and_released(watch, T0)

    assert [target for target, _ in outcomes] == [2, 2, 2]  # each time 2 of the 3 nodes the cap has room for
    assert [a.kind for _, alerts in outcomes for a in alerts] == []  # no "shared with other agents" to refuse
    assert ledger.reserved("burst", T0 + timedelta(minutes=40)) == 0.0


def test_a_shared_budget_no_longer_reserves_the_units_a_release_took(ledger: InMemoryLedger | SqliteLedger) -> None:
    settings = _settings({"remote_pools": ["elsewhere"]})
    watch = BudgetWatch(settings, {p.pool_id: p for p in settings.pool_specs()}, ledger, tick=timedelta(minutes=10))

    assert _tick(watch, T0, 0, 2) == (2, [])
    assert ledger.reserved("burst", T0) == pytest.approx(2 * PER_UNIT)  # held for the other agents to see
    _tick(watch, T0 + timedelta(minutes=10), 2, None)
    assert ledger.reserved("burst", T0 + timedelta(minutes=10)) == pytest.approx(2 * (PER_UNIT - PRICE / 6))
    released = T0 + timedelta(minutes=20)
    _tick(watch, released, 0, None)  # the release's nodes are gone: billed no more
    assert ledger.reserved("burst", released) == 0.0

    outcomes = _grown_and_released(watch, released + timedelta(minutes=10))

    assert [target for target, _ in outcomes] == [2, 2, 2]
    assert [a.kind for _, alerts in outcomes for a in alerts] == []
    last = released + timedelta(minutes=50)  # the last scale-up's 2 nodes, reserved from then: 70 minutes after T0
    assert ledger.reserved("burst", last) == pytest.approx(2 * (PER_UNIT - PRICE * 70 / 60))


def test_a_shared_budget_still_refuses_what_another_agent_took(ledger: InMemoryLedger | SqliteLedger) -> None:
    """The reservations still do their work where the budget is shared: 2 of the 3 nodes' room reserved by another
    agent leaves room for 1."""
    settings = _settings({"remote_pools": ["elsewhere"]})
    watch = BudgetWatch(settings, {p.pool_id: p for p in settings.pool_specs()}, ledger, tick=timedelta(minutes=10))
    period = (datetime(2026, 12, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC))
    other = ReservationRequest("burst", (POOL, "elsewhere"), *period, CAP, 2 * PER_UNIT, "east", timedelta(hours=1))
    assert ledger.reserve(other, T0).granted

    target, alerts = _tick(watch, T0, 0, 2)

    assert target == 1
    assert [a.kind for a in alerts] == [AlertKind.BUDGET_RESERVATION_REFUSED]
