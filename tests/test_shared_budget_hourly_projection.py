"""An hourly cap other agents share projects the hour with what they keep reserved in it, as a monthly cap does.

West and east share a cap of 100 USD an hour and each already holds 8 busy units at 8 USD a unit-hour (a cap
lowered under them, or units bought before the budget was shared): 128 USD an hour together. The reservations keep
either from growing, but each agent's projection of the hour counted its own units only (64 USD beside the spend
recorded), so neither told anyone until the recorded spend itself had crossed the cap: the first projected-overspend
alert came at 12:35. Each now counts the other's reservation of the hour too: east alerts at its first tick and west
at its second (once east has reserved), each projecting 128 USD, 28 over, 64 of it the other's (the gauge
``leadtime_budget_reserved_elsewhere_usd{budget="team/hourly"}``). Busy units are not released for a cap
without a hard stop, so the hour still bills 128 USD. On PostgreSQL (a real server, each agent its own connection)
and on one in-process ledger both agents write."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent.daemon.metrics import DaemonMetrics
from models import AlertKind
from tests import shared_budget_rig as rig
from tests.conftest import TraceWriter
from tests.postgres.fixtures import POSTGRES, Database

START = datetime(2024, 1, 15, 12, tzinfo=UTC)
HOURLY_CAP = 100.0
FLEET = 8


def _run(write_trace: TraceWriter, ledgers: rig.Ledgers) -> tuple[dict[str, datetime], dict[str, float]]:
    """Both agents demand 64 chips, holding 8 units from 12:00, ticking every 5 minutes to 12:25: when each first
    alerted a projected overspend (naming the other agents' share), and each one's projection of the hour then."""
    trace = write_trace({"train": [64.0] * 60}, start=(START - timedelta(hours=2)).isoformat())
    agents = [
        rig.member(rig.shared_budget_config(own, other, hourly_cap_usd=HOURLY_CAP), own, trace, ledger, START, FLEET)
        for ledger, (own, other) in zip(ledgers, rig.PAIRS, strict=True)
    ]
    first: dict[str, datetime] = {}
    projected: dict[str, float] = {}
    now = START
    while now < START + timedelta(minutes=30):
        for name, report in rig.tick(agents, now).items():
            told = [a for a in report.alerts if a.kind is AlertKind.PROJECTED_OVERSPEND]
            if told and name not in first:
                assert "reserved by the other agents" in told[0].summary, told[0].summary
                first[name] = now
                assert report.plan is not None
                [hourly] = [b for b in report.plan.budgets if b.budget == "team/hourly"]
                projected[name] = hourly.projected_usd
                # the other's 8 units over the hour, from its reservation made at 12:00, exported as their share
                assert hourly.reserved_elsewhere_usd == pytest.approx(FLEET * rig.UNIT_HOUR_USD), name
                metrics = DaemonMetrics()
                metrics.record_budgets([hourly])
                gauge = metrics.registry.get_sample_value(
                    "leadtime_budget_reserved_elsewhere_usd", {"budget": "team/hourly"}
                )
                assert gauge == pytest.approx(FLEET * rig.UNIT_HOUR_USD), name
        now += timedelta(minutes=5)
    return first, projected


def _check(first: dict[str, datetime], projected: dict[str, float]) -> None:
    # was 12:35 for east and 12:40 for west, when the spend recorded had crossed the cap
    assert first == {"east": START, "west": START + timedelta(minutes=5)}
    for name, usd in projected.items():
        assert usd == pytest.approx(2 * FLEET * rig.UNIT_HOUR_USD), name  # both fleets' hour, not 64


@POSTGRES
def test_on_postgresql(write_trace: TraceWriter, postgres_database: Database) -> None:
    with rig.postgres_ledgers(postgres_database) as ledgers:
        _check(*_run(write_trace, ledgers))


def test_in_memory(write_trace: TraceWriter) -> None:
    _check(*_run(write_trace, rig.memory_ledgers()))
