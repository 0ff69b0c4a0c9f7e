"""A budget pool nobody knows the units of (never read, no record in the ledger: a pool newly added whose permission
is not granted yet) is counted, in a budget with a commit_horizon (whose hard stop can release the units granted), at
its max_units over each scale-up's hold only, not to the end of the period: the budget's other pools grow as long as
the cap pays for them and for the unknown pool at its most while the units granted cannot be given back. Where that
still trims a scale-up, the skip and a warning of the budget name the pool, the USD kept back and the scale-ups
trimmed. (Without a commit_horizon it is counted to the period's end:
tests/unit/test_budget_unknown_pool_commitment.py.)

gpu costs 8 USD a unit-hour and is read at 4 units; h100, 80 USD a unit-hour up to 10 units, is unknown. A gpu
scale-up holds its units 21 minutes (lead time 10m + idle window 10m + one 1m tick): h100 at 10 units over it is
10 x 80 x 0.35 = 280 USD. On January 15 at 12:00 the month has 396 hours left: gpu's 4 units cost 12,672 USD to its
end and each more unit 3,168 USD. The budgets' commit horizon (31 days) reaches past the month's end, so the units
held are counted to its end as without one.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agent.budget_watch import BudgetWatch
from agent.ledger import InMemoryLedger
from agent.planning import PlanInput, plan_capacity
from agent.planning.budget import Budget, BudgetSpend
from config import settings_from_mapping
from config.schema import PlannerSettings, Settings
from models import AlertKind, CapacityPlan, PoolState, Severity, SkipReason
from tests.unit.test_planner import forecast, pool

NOW = datetime(2024, 1, 15, 12, tzinfo=UTC)
TICK = timedelta(minutes=1)
HORIZON = timedelta(days=31)
POOLS = [pool("gpu", hi=10), pool("h100", price=80.0, hi=10)]
STATES = {"gpu": PoolState("gpu", NOW, 4, 4)}
TIGHT_CAP = 12_672.0 + 6 * 3_168.0 + 100.0  # pays for gpu at 10 units, but not with h100's 280 USD kept back
_SPEC = {"kind": "gpu-node-pool", "chips_per_unit": 8, "max_units": 10, "lead_time": "10m", "serves": ["a"]}


def _plan(spend: BudgetSpend) -> CapacityPlan:
    return plan_capacity(
        PlanInput(
            now=NOW,
            tick=TICK,
            pools=POOLS,
            states=STATES,
            forecasts={"a": forecast("a", [80.0] * 4)},  # 10 gpu units wanted
            observed={"a": 80.0},
            service_levels={"a": 0.9},
            settings=PlannerSettings(),
            budgets=[spend],
            last_read_units={},
        )
    )


def _settings(monthly_cap_usd: float, commit_horizon: str | None = None) -> Settings:
    budget: dict[str, object] = {"name": "team", "pools": ["gpu", "h100"], "monthly_cap_usd": monthly_cap_usd}
    if commit_horizon is not None:
        budget["commit_horizon"] = commit_horizon
    return settings_from_mapping(
        {
            "demand_classes": [{"name": "a"}],
            "pools": [
                {**_SPEC, "id": "gpu", "price_per_unit_hour_usd": 8.0},
                {**_SPEC, "id": "h100", "price_per_unit_hour_usd": 80.0},
            ],
            "budgets": [budget],
        }
    )


def _gpu_to(plan: CapacityPlan) -> int | None:
    return next((r.to_units for r in plan.resizes if r.pool_id == "gpu"), None)


def test_an_unknown_pool_does_not_hold_the_other_pools_scale_ups_to_the_period_end() -> None:
    # counted at its max_units to the month's end (316,800 USD) it left none of the 50,000 USD cap: gpu stayed at 4
    plan = _plan(
        BudgetSpend(
            Budget("team", frozenset({"gpu", "h100"}), monthly_cap_usd=50_000.0, commit_horizon=HORIZON), NOW, 0.0, 0.0
        )
    )
    assert _gpu_to(plan) == 10
    assert not [s for s in plan.skips if s.reason is SkipReason.BUDGET]


def test_the_unknown_pool_at_its_max_units_over_the_hold_still_trims_and_the_skip_says_by_how_much() -> None:
    plan = _plan(
        BudgetSpend(
            Budget("team", frozenset({"gpu", "h100"}), monthly_cap_usd=TIGHT_CAP, commit_horizon=HORIZON), NOW, 0.0, 0.0
        )
    )
    assert _gpu_to(plan) == 9  # 19,108 - 280 USD pays for 5 more units, not 6
    [skip] = [s for s in plan.skips if s.pool_id == "gpu" and s.reason is SkipReason.BUDGET]
    assert "allows 5 of 6 more units" in skip.detail
    assert "counting h100, not read and with no record of what it holds, at its max_units over the 21m" in skip.detail
    assert "280.00 USD of the room kept back" in skip.detail


def test_the_budget_warns_naming_the_unknown_pool_the_usd_kept_back_and_the_scale_ups_trimmed() -> None:
    settings = _settings(TIGHT_CAP, commit_horizon="31d")
    watch = BudgetWatch(settings, {p.pool_id: p for p in settings.pool_specs()}, InMemoryLedger(), tick=TICK)
    spends = watch.observe(NOW, STATES, {})
    alerts = watch.alerts(NOW, _plan(spends[0]), spends, STATES, [])
    [event] = [a for a in alerts if a.kind is AlertKind.POOL_UNREADABLE]
    assert event.severity is Severity.WARNING
    assert event.subject == "budget team: h100 not known"
    assert event.details["pools not known"] == "h100"
    assert event.details["room kept back"] == "280.00 USD (at max_units over 21m)"
    assert event.details["scale-ups trimmed"] == "gpu 4->9 instead of ->10"
    # with room for gpu and h100 at its most over the hold, nothing is trimmed and nothing is told
    roomy = _settings(50_000.0, commit_horizon="31d")
    watch = BudgetWatch(roomy, {p.pool_id: p for p in roomy.pool_specs()}, InMemoryLedger(), tick=TICK)
    spends = watch.observe(NOW, STATES, {})
    alerts = watch.alerts(NOW, _plan(spends[0]), spends, STATES, [])
    assert not [a for a in alerts if a.kind is AlertKind.POOL_UNREADABLE]
