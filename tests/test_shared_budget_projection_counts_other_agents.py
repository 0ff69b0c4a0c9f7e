"""Agents sharing a monthly cap project the units the other agents hold, from what they keep reserved in the period.

Each planner projected the period's spend from the spend recorded and its own pools' units only: west and east,
each holding 8 units at 8 USD a unit-hour from 23:30 on January 31 (bought before the minimum hold of a unit
reached February, so neither was refused), committed 89,088 USD for February against a cap of 66,816 USD, while each
projected 44,544 and neither raised a projected-overspend alert (the pair first alerted on February 15, projecting
66,880). One agent running both pools alerts at 00:00 on February 1 with 89,088. The other agents' standing
reservations of the current period (``team``, and ``team@<start>`` made while it was the next) are now counted in
the projection of the overspend check and its shed, and the alert says how much of it they are. Run on two
connections to one PostgreSQL ledger, and on one in-process ledger both agents write."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent.ledger import InMemoryLedger
from models import AlertKind
from tests import shared_budget_rig as rig
from tests.conftest import TraceWriter
from tests.postgres.fixtures import POSTGRES, Database

FEBRUARY = (datetime(2024, 2, 1, tzinfo=UTC), datetime(2024, 3, 1, tzinfo=UTC))
FLEET = 8  # the units each agent's demand (64 chips) asks for
FEBRUARY_HOURS = (FEBRUARY[1] - FEBRUARY[0]) / timedelta(hours=1)
CAP = 1.5 * FLEET * rig.UNIT_HOUR_USD * FEBRUARY_HOURS  # 66,816 USD: one fleet for the month and half another
FLEET_MONTH = FLEET * rig.UNIT_HOUR_USD * FEBRUARY_HOURS  # 44,544 USD: one fleet for all of February
START = datetime(2024, 1, 31, 23, 30, tzinfo=UTC)  # before a unit's 25-minute minimum hold reaches February
END = FEBRUARY[0] + timedelta(hours=1)

Overspends = dict[str, tuple[datetime, str]]  # agent -> its first projected-overspend alert: when, and its summary


def _pair(write_trace: TraceWriter, ledgers: rig.Ledgers) -> Overspends:
    """West and east each demand 64 chips from 23:30 on January 31 to 01:00 on February 1, ticking every 5 minutes."""
    trace = write_trace({"train": [64.0] * 60}, start=(START - timedelta(hours=2)).isoformat(), step="5min")
    agents = [
        rig.member(rig.shared_budget_config(own, other, monthly_cap_usd=CAP), own, trace, ledger, START)
        for ledger, (own, other) in zip(ledgers, rig.PAIRS, strict=True)
    ]
    return _first_overspends(agents)


def _first_overspends(agents: list[rig.Member]) -> Overspends:
    first: Overspends = {}
    now = START
    while now <= END:
        for name, report in rig.tick(agents, now).items():
            for alert in report.alerts:
                if alert.kind is AlertKind.PROJECTED_OVERSPEND:
                    first.setdefault(name, (now, alert.summary))
        now += timedelta(minutes=5)
    return first


def _assert_both_alert_the_true_projection(first: Overspends) -> None:
    assert set(first) == {"west", "east"}
    for when, summary in first.values():
        assert when == FEBRUARY[0]
        assert summary.startswith(
            f"Projected {2 * FLEET_MONTH:,.2f} USD against a monthly cap of {CAP:,.2f} USD by 2024-03-01 00:00 UTC "
            f"({2 * FLEET_MONTH - CAP:,.2f} USD over), of which {FLEET_MONTH:,.2f} USD is reserved by the other "
            f"agents sharing the budget"
        )


@POSTGRES
def test_agents_sharing_a_cap_on_postgresql_project_each_others_units(
    write_trace: TraceWriter, postgres_database: Database
) -> None:
    with rig.postgres_ledgers(postgres_database) as ledgers:
        first = _pair(write_trace, ledgers)
    _assert_both_alert_the_true_projection(first)


def test_agents_sharing_a_cap_in_one_process_project_each_others_units(write_trace: TraceWriter) -> None:
    _assert_both_alert_the_true_projection(_pair(write_trace, rig.memory_ledgers()))


def test_one_agent_running_both_pools_projects_as_before(write_trace: TraceWriter) -> None:
    """The same two fleets run by one agent (no budget shared with another): the same figure at the same tick, with
    nothing said of other agents."""
    trace = write_trace({"train": [128.0] * 60}, start=(START - timedelta(hours=2)).isoformat(), step="5min")
    config = rig.shared_budget_config("west", "east", monthly_cap_usd=CAP)
    config["pools"].append(dict(config["pools"][0], id="east"))
    config["budgets"][0] = {"name": "team", "pools": ["west", "east"], "monthly_cap_usd": CAP}
    first = _first_overspends([rig.member(config, "west", trace, InMemoryLedger(), START)])
    when, summary = first["west"]
    assert when == FEBRUARY[0]
    assert summary.startswith(
        f"Projected {2 * FLEET_MONTH:,.2f} USD against a monthly cap of {CAP:,.2f} USD by 2024-03-01 00:00 UTC "
        f"({2 * FLEET_MONTH - CAP:,.2f} USD over). "
    )


def test_the_other_agents_reservations_are_not_counted_as_spend(write_trace: TraceWriter) -> None:
    """Their share is in the projection only: the spend the plan reports (thresholds, reports, metrics) is what the
    ledger recorded by each agent's tick at 01:00 (its own pool's first hour of February, the other's to the other's
    last tick), at most both fleets' first hour."""
    trace = write_trace({"train": [64.0] * 60}, start=(START - timedelta(hours=2)).isoformat(), step="5min")
    ledgers = rig.memory_ledgers()
    agents = [
        rig.member(rig.shared_budget_config(own, other, monthly_cap_usd=CAP), own, trace, ledger, START)
        for ledger, (own, other) in zip(ledgers, rig.PAIRS, strict=True)
    ]
    now = START
    while now < END:
        rig.tick(agents, now)
        now += timedelta(minutes=5)
    for report in rig.tick(agents, END).values():
        [team] = [b for b in report.plan.budgets if b.budget == "team"]
        assert FLEET * rig.UNIT_HOUR_USD < team.spent_usd <= ledgers[0].spent(["west", "east"], FEBRUARY[0], END)
        assert ledgers[0].spent(["west", "east"], FEBRUARY[0], END) == pytest.approx(2 * FLEET * rig.UNIT_HOUR_USD)
