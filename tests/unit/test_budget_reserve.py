"""Scale-ups reserved against a budget other agents share before they are carried out: granted ones pass, the
rest are trimmed to the headroom or held with a budget skip and an alert; reservations of scale-ups not carried
out are released, the others kept until they expire."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from agent.budget_reserve import BudgetReserver
from agent.ledger import InMemoryLedger
from agent.ledger.reservations import ReservationRequest
from agent.planning.budget import Budget
from models import (
    ActionResult,
    ActionStatus,
    AlertKind,
    BudgetCut,
    CapacityPlan,
    DemandShare,
    PoolDecision,
    Resize,
    SkipReason,
)
from tests.unit.test_budget_enforcement import spec

NOW = datetime(2024, 1, 31, 14, tzinfo=UTC)  # 10 hours before the month ends: a unit at 10 USD/h adds 100 USD
END = datetime(2024, 2, 1, tzinfo=UTC)
TEAM = Budget("team-a", frozenset({"gpu", "gpu-east"}), monthly_cap_usd=1000.0, remote_pools=frozenset({"gpu-east"}))
POOLS = {"gpu": spec("gpu", 10.0), "free": spec("free", 0.0), "other": spec("other", 10.0)}


def resize(pool_id: str, from_units: int, to_units: int) -> Resize:
    return Resize(pool_id, from_units, to_units, "forecast", f"{pool_id}@{NOW.isoformat()}->{to_units}")


def reserver(ledger: InMemoryLedger, ttl: timedelta = timedelta(hours=1)) -> BudgetReserver:
    return BudgetReserver(ledger, [TEAM], POOLS, "cluster-west", ttl)


def other_agent_takes(ledger: InMemoryLedger, amount: float) -> None:
    ask = ReservationRequest(
        "team-a", ("gpu", "gpu-east"), NOW - timedelta(days=30), END, 1000.0, amount, "east", timedelta(hours=1)
    )
    assert ledger.reserve(ask, NOW).granted


def test_a_granted_scale_up_passes_unchanged_and_its_spend_is_reserved() -> None:
    ledger = InMemoryLedger()
    plan = CapacityPlan(NOW, resizes=(resize("gpu", 2, 6),), targets={"gpu": 6})
    reserved = reserver(ledger).reserve(NOW, plan)
    assert reserved.plan == plan and reserved.alerts == ()
    assert ledger.reserved("team-a", NOW) == pytest.approx(400.0)


def test_a_scale_up_beyond_the_shared_headroom_is_trimmed_with_a_skip_and_an_alert() -> None:
    ledger = InMemoryLedger()
    other_agent_takes(ledger, 750.0)
    plan = CapacityPlan(NOW, resizes=(resize("gpu", 2, 6), resize("other", 1, 3)), targets={"gpu": 6, "other": 3})
    reserved = reserver(ledger).reserve(NOW, plan)
    trimmed, untouched = reserved.plan.resizes
    assert (trimmed.to_units, trimmed.key) == (4, f"gpu@{NOW.isoformat()}->4")
    assert untouched == plan.resizes[1]  # no budget over it
    assert reserved.plan.targets == {"gpu": 4, "other": 3}
    [skip] = reserved.plan.skips
    assert skip.reason is SkipReason.BUDGET and "granted 2 of 4 more units" in skip.detail
    [alert] = reserved.alerts
    assert alert.kind is AlertKind.BUDGET_RESERVATION_REFUSED and "trimmed" in alert.summary
    assert ledger.reserved("team-a", NOW) == pytest.approx(950.0)


def test_a_scale_up_with_no_unit_of_headroom_left_is_held() -> None:
    ledger = InMemoryLedger()
    other_agent_takes(ledger, 950.0)
    plan = CapacityPlan(NOW, resizes=(resize("gpu", 2, 6),), targets={"gpu": 6})
    reserved = reserver(ledger).reserve(NOW, plan)
    assert reserved.plan.resizes == () and reserved.plan.targets == {"gpu": 2}
    assert "granted 0 of 4" in reserved.plan.skips[0].detail and "held" in reserved.alerts[0].summary
    assert ledger.reserved("team-a", NOW) == pytest.approx(950.0)


def test_reservations_of_scale_ups_not_carried_out_are_released_and_the_others_expire() -> None:
    ledger = InMemoryLedger()
    book = BudgetReserver(
        ledger,
        [Budget("b", frozenset({"gpu", "other", "east"}), monthly_cap_usd=1000.0, remote_pools=frozenset({"east"}))],
        POOLS,
        "w",
        timedelta(minutes=30),
    )
    ups = (resize("gpu", 2, 4), resize("other", 0, 3))
    book.reserve(NOW, CapacityPlan(NOW, resizes=ups))
    assert ledger.reserved("b", NOW) == pytest.approx(500.0)
    book.settle(
        [
            ActionResult(ups[0].key, "gpu", ActionStatus.STARTED, NOW),
            ActionResult(ups[1].key, "other", ActionStatus.RECORDED, NOW),
        ]
    )  # a dry-run bills nothing
    assert ledger.reserved("b", NOW) == pytest.approx(200.0)
    assert ledger.reserved("b", NOW + timedelta(minutes=30)) == 0.0


def test_scale_downs_and_free_pools_reserve_nothing() -> None:
    ledger = InMemoryLedger()
    free = Budget("team-a", frozenset({"gpu", "free", "east"}), monthly_cap_usd=0.0, remote_pools=frozenset({"east"}))
    plan = CapacityPlan(NOW, resizes=(resize("gpu", 6, 2), resize("free", 0, 5)))
    assert BudgetReserver(ledger, [free], POOLS, "w", timedelta(hours=1)).reserve(NOW, plan).plan == plan
    assert ledger.reserved("team-a", NOW) == 0.0


def test_a_trim_to_the_shared_headroom_is_written_into_the_pools_decision_record() -> None:
    # The planner wanted 7 units and its own cap allowed 6 (2 -> 6); the shared headroom allows 2 more: 4.
    ledger = InMemoryLedger()
    other_agent_takes(ledger, 750.0)
    share = DemandShare("train", 0.9, 56.0, 40.0, 56.0, 56.0)
    own = BudgetCut("team-a", "monthly", 1, "budget 'team-a' allows 4 of 5 more units")
    record = PoolDecision(
        "gpu", False, timedelta(minutes=10), 8, 0, 10, 2, (share,), 7, 0, 0, 7, 7, 6, budget_cuts=(own,)
    )  # fmt: skip
    plan = CapacityPlan(NOW, resizes=(resize("gpu", 2, 6),), targets={"gpu": 6}, decisions={"gpu": record})
    reserved = reserver(ledger).reserve(NOW, plan)
    decision = reserved.plan.decisions["gpu"]
    assert [(c.budget, c.cap, c.units) for c in decision.budget_cuts] == [
        ("team-a", "monthly", 1),
        ("team-a", "shared", 2),
    ]
    assert (decision.budgeted_units, decision.target_units) == (4, 4)
    [trimmed] = reserved.plan.resizes
    assert trimmed.reason == decision.why()
    assert trimmed.reason.endswith(
        "budget 'team-a' (monthly cap) -1: 6 -> budget 'team-a' (shared cap) -2: 4 -> target 4"
    )


def test_a_hard_stop_budget_reserves_a_scale_up_over_its_commit_horizon_only() -> None:
    ledger = InMemoryLedger()
    team = replace(TEAM, commit_horizon=timedelta(hours=2))
    plan = CapacityPlan(NOW, resizes=(resize("gpu", 2, 6),), targets={"gpu": 6})
    reserved = BudgetReserver(ledger, [team], POOLS, "cluster-west", timedelta(hours=1)).reserve(NOW, plan)
    assert reserved.plan == plan
    assert ledger.reserved("team-a", NOW) == pytest.approx(4 * 10.0 * 2)  # not 400 USD to the period end


SHARED = Budget("team-a", frozenset({"gpu", "gpu-east"}), monthly_cap_usd=1000.0, remote_pools=frozenset({"gpu-east"}))


def test_a_shared_budget_keeps_the_units_held_reserved_tick_after_tick_and_covers_the_scale_ups() -> None:
    ledger = InMemoryLedger()
    book = BudgetReserver(ledger, [SHARED], POOLS, "cluster-west", timedelta(hours=1))
    up = resize("gpu", 2, 4)
    book.reserve(NOW, CapacityPlan(NOW, resizes=(up,)))
    book.settle([ActionResult(up.key, "gpu", ActionStatus.STARTED, NOW)])
    book.commit(NOW, {"gpu": 4})
    assert ledger.reserved("team-a", NOW) == pytest.approx(4 * 100.0)  # the scale-up's own is covered: released
    later = NOW + timedelta(hours=2)  # long after any reservation of the scale-up would have expired
    for tick in range(1, 25):
        book.commit(NOW + tick * timedelta(minutes=5), {"gpu": 4})
    assert ledger.reserved("team-a", later) == pytest.approx(4 * 10.0 * 8)  # replaced, never piled up
    assert ledger.reserved("team-a", later + timedelta(hours=1)) == 0.0  # an agent that stops: they expire


def test_a_budget_no_other_agent_shares_reserves_no_standing_units() -> None:
    ledger = InMemoryLedger()
    alone = Budget("team-a", frozenset({"gpu"}), monthly_cap_usd=1000.0)
    book = BudgetReserver(ledger, [alone], POOLS, "cluster-west", timedelta(hours=1))
    up = resize("gpu", 2, 6)
    assert book.reserve(NOW, CapacityPlan(NOW, resizes=(up,))).plan.resizes == (up,)
    book.commit(NOW, {"gpu": 4})
    assert ledger.reserved("team-a", NOW) == 0.0  # neither the scale-up nor the units held
