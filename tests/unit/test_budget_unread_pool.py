"""A pool whose state could not be read, as the budgets see it: counted at the units the ledger last recorded it
holding (not at its max_units), and no hard stop of its budget started until every pool of it is read again."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agent.budget_watch import BudgetWatch
from agent.conditions import ConditionTracker
from agent.ledger import InMemoryLedger
from agent.notify.recording import RecordingNotifier
from agent.notify.slack_message import blocks
from agent.planning import PlanInput, plan_capacity
from agent.planning.budget import BudgetSpend
from agent.planning.enforcement import find_overspends
from config import settings_from_mapping
from config.schema import PlannerSettings, Settings
from models import AlertKind, CapacityPlan, PoolState, SkipReason
from tests.unit.test_planner import forecast

NOW = datetime(2024, 1, 31, 14, tzinfo=UTC)  # 10 hours before the month ends
TICK = timedelta(minutes=1)
_POOL = {"kind": "gpu-node-pool", "chips_per_unit": 8, "max_units": 10, "lead_time": "10m"}


def _settings(budget: Mapping[str, Any]) -> Settings:
    return settings_from_mapping(
        {
            "demand_classes": [{"name": "a"}, {"name": "b"}],
            "pools": [
                {**_POOL, "id": "a100", "price_per_unit_hour_usd": 30.0, "serves": ["a"]},
                {**_POOL, "id": "h100", "price_per_unit_hour_usd": 80.0, "serves": ["b"]},
            ],
            "budgets": [{"name": "team", "pools": ["a100", "h100"], **budget}],
        }
    )


def _watch(settings: Settings) -> BudgetWatch:
    """A watch whose ledger saw both pools a tick ago: 4 a100 units (30 USD an hour) and 1 h100 unit (80 USD)."""
    watch = BudgetWatch(settings, {p.pool_id: p for p in settings.pool_specs()}, InMemoryLedger(), tick=TICK)
    before = NOW - TICK
    watch.observe(before, {"a100": PoolState("a100", before, 4, 4), "h100": PoolState("h100", before, 1, 1)})
    return watch


def _plan(
    settings: Settings,
    states: Mapping[str, PoolState],
    spends: list[BudgetSpend],
    now: datetime,
    demand: tuple[float, float] = (32.0, 8.0),
) -> CapacityPlan:
    a, b = demand
    return plan_capacity(
        PlanInput(
            now=now,
            tick=TICK,
            pools=settings.pool_specs(),
            states=states,
            forecasts={"a": forecast("a", [a] * 4), "b": forecast("b", [b] * 4)},
            observed={"a": a, "b": b},
            service_levels={"a": 0.9, "b": 0.9},
            settings=PlannerSettings(),
            budgets=spends,
        )
    )


def test_a_pool_not_read_this_tick_is_projected_at_its_last_recorded_units() -> None:
    # 200 USD an hour with h100's 1 unit: 3.33 spent + 2,000 to the period end, within the 3,000 USD cap. At its
    # max_units h100 alone would project 8,000 more: one failed read was an overspend that is not there.
    settings = _settings({"monthly_cap_usd": 3000.0})
    watch = _watch(settings)
    a100 = {"a100": PoolState("a100", NOW, 4, 4)}
    spends = watch.observe(NOW, a100)  # h100 could not be read
    assert find_overspends(NOW, spends, watch.pools, {"a100": 4}) == []
    assert [s.last_units for s in spends] == [{"h100": 1}]
    plan = _plan(settings, a100, spends, NOW)
    assert not any(s.reason is SkipReason.BUDGET for s in plan.skips)
    [snapshot] = plan.budgets
    assert snapshot.projected_usd < 3000.0


def test_a_hard_stop_waits_for_a_tick_that_reads_every_pool_of_its_budget() -> None:
    # 3.33 USD spent of a 7 USD cap (a100's minute, charged, and h100's, counted until it is read again): the next
    # two ticks of 4 a100 units and 1 h100 unit cost 6.67, 3 more than is left. With h100 unread nothing busy is
    # forced out; the tick that reads it again decides the stop.
    settings = _settings({"monthly_cap_usd": 7.0, "commit_horizon": "2h"})
    watch = _watch(settings)
    a100 = {"a100": PoolState("a100", NOW, 4, 4)}
    held = _plan(settings, a100, watch.observe(NOW, a100), NOW)
    assert not any(r.forced for r in held.resizes)
    [waits] = [s.detail for s in held.skips if s.pool_id == "h100" and "hard stop" in s.detail]
    assert "hard stop not started: the money left is 3.00 USD short" in waits
    assert "counted at its last recorded 1 units" in waits and "or until 2024-01-31 14:09 UTC" in waits
    assert waits in [h.detail for h in held.decisions["h100"].holds]

    later = NOW + TICK
    both = {"a100": PoolState("a100", later, 4, 4), "h100": PoolState("h100", later, 1, 1)}
    stopped = _plan(settings, both, watch.observe(later, both), later)
    assert any(r.forced for r in stopped.resizes)
    assert not any("hard stop not started" in s.detail for s in stopped.skips)


def _unread_for(settings: Settings, hours: int) -> tuple[BudgetWatch, list[BudgetSpend]]:
    """A watch that read 4 a100 units and 10 h100 units (30 and 80 USD an hour) every 5 minutes for 6 hours up to
    ``NOW``, h100 not in the last ``hours``; and the spend it hands the planner at ``NOW``, h100 still unread."""
    watch = BudgetWatch(settings, {p.pool_id: p for p in settings.pool_specs()}, InMemoryLedger(), tick=TICK)
    at = NOW - timedelta(hours=6)
    while at < NOW:
        states = {"a100": PoolState("a100", at, 4, 4)}
        if at < NOW - timedelta(hours=hours):
            states["h100"] = PoolState("h100", at, 10, 10)
        watch.observe(at, states)
        at += timedelta(minutes=5)
    return watch, watch.observe(NOW, {"a100": PoolState("a100", NOW, 4, 4)})


def test_an_unread_pool_is_counted_in_the_spend_from_its_last_record_so_other_pools_do_not_take_its_money() -> None:
    # 6 hours of 4 a100 units (720 USD) and 10 h100 units (4,800): 5,520 USD whether or not h100 was read in the
    # last 3 hours. The 10 hours left at 920 USD an hour project 14,720 of the 15,000 USD cap: a100 may not grow
    # (a unit costs 300 to the period end). Counting h100 only from its next read, 2,400 USD less was seen spent
    # and a100 went 4->10, to be over the cap by 1,517 USD as soon as h100 was read again.
    settings = _settings({"monthly_cap_usd": 15000.0})
    pools = {p.pool_id: p for p in settings.pool_specs()}
    a100 = {"a100": PoolState("a100", NOW, 4, 4)}
    spent = {}
    for hours in (0, 3):
        watch, spends = _unread_for(settings, hours)
        [spend] = spends
        spent[hours] = spend.spent_period_usd
        assert spend.unread_since == {"h100": NOW - timedelta(hours=hours, minutes=5)}
        plan = _plan(settings, a100, spends, NOW, demand=(80.0, 80.0))
        assert not [r for r in plan.resizes if r.pool_id == "a100" and r.is_scale_up]
        assert any(s.pool_id == "a100" and s.reason is SkipReason.BUDGET for s in plan.skips)
        later = NOW + TICK
        both = {"a100": PoolState("a100", later, 4, 4), "h100": PoolState("h100", later, 10, 10)}
        [read_again] = watch.observe(later, both)  # the ledger charges the gap: the spend only moves by a tick
        assert read_again.spent_period_usd - spend.spent_period_usd == pytest.approx((120 + 800) / 60)
        assert find_overspends(later, [read_again], pools, {"a100": 4, "h100": 10}) == []
    assert spent[3] == pytest.approx(spent[0]) == pytest.approx(720.0 + 4800.0)


def test_a_hard_stop_waits_for_an_unread_pool_only_unread_stop_wait_then_runs_on_the_pools_read() -> None:
    # h100 was last read at 13:59 and stays unreadable (a 403 can last days). The stop waits 10 minutes from that
    # record (unread_stop_wait), then releases a100's busy units, h100 held at its last recorded unit.
    settings = _settings({"monthly_cap_usd": 7.0, "commit_horizon": "2h", "unread_stop_wait": "10m"})
    watch = _watch(settings)
    until = NOW - TICK + timedelta(minutes=10)
    at, units = NOW, 4
    forced_at = None
    while forced_at is None and at < NOW + timedelta(minutes=15):
        a100 = {"a100": PoolState("a100", at, units, units)}
        plan = _plan(settings, a100, watch.observe(at, a100), at)
        stop = [r for r in plan.resizes if r.forced]
        if stop:
            forced_at = at
            [release] = stop
            assert (release.pool_id, release.from_units, release.to_units) == ("a100", 4, 0)
            [kept] = [s.detail for s in plan.skips if s.pool_id == "h100" and "hard stop" in s.detail]
            assert "its state could not be read" in kept and "keeping its units" in kept
        else:
            [waits] = [s.detail for s in plan.skips if s.pool_id == "h100" and "hard stop" in s.detail]
            assert f"or until {until:%Y-%m-%d %H:%M} UTC: the stop then runs on the pools read" in waits
        at += TICK
    assert forced_at == until


def test_a_deferred_hard_stop_is_alerted_once_per_budget_and_outage_saying_until_when_and_its_end() -> None:
    # raised every tick while the stop waits; a notifier tells it once per window, and the tracker its end
    settings = _settings({"monthly_cap_usd": 7.0, "commit_horizon": "2h"})
    watch = _watch(settings)
    notifier = RecordingNotifier(dedup_window=timedelta(hours=1))
    conditions = ConditionTracker(resolve_after=TICK)  # an end told at the first tick that finds it gone

    def tick(at: datetime, states: dict[str, PoolState]) -> None:
        spends = watch.observe(at, states)
        raised = watch.alerts(at, _plan(settings, states, spends, at), spends, states, ())
        for event in [*raised, *conditions.update(at, raised)]:
            notifier.notify(event)

    for minute in range(5):  # h100 unread since its record at 13:59
        at = NOW + minute * TICK
        tick(at, {"a100": PoolState("a100", at, 4, 4)})
    at = NOW + 5 * TICK  # read again, then unreadable again from 14:05
    tick(at, {"a100": PoolState("a100", at, 4, 4), "h100": PoolState("h100", at, 1, 1)})
    for minute in range(6, 8):
        at = NOW + minute * TICK
        tick(at, {"a100": PoolState("a100", at, 4, 4)})

    deferred = [e for e in notifier.events if e.kind is AlertKind.BUDGET_HARD_STOP_DEFERRED and not e.resolved]
    assert [e.at for e in deferred] == [NOW, NOW + 6 * TICK]
    [ended] = [e for e in notifier.events if e.kind is AlertKind.BUDGET_HARD_STOP_DEFERRED and e.resolved]
    assert (ended.at, ended.subject) == (NOW + 5 * TICK, "budget team: unread since 2024-01-31 13:59 UTC")
    first, second = deferred
    assert first.subject == "budget team: unread since 2024-01-31 13:59 UTC"
    assert first.details["hard stop deferred until"] == "2024-01-31 14:09 UTC"
    assert first.details["unread pools (counted at)"] == "h100 (1 units)"
    assert "the hard stop is deferred: the state of h100 (1 units) could not be read" in first.summary
    assert second.details["hard stop deferred until"] == "2024-01-31 14:15 UTC"
    header = blocks(first)[0]["text"]["text"]
    assert header.endswith("Budget hard stop deferred: a pool cannot be read")
