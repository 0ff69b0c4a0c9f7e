"""Agents sharing a budget with different commit horizons count each other's reservations over their own spans.

West has no ``commit_horizon`` (it reserves its units to the month's end) and east has 24h (it reserves them over
the next 24 hours); each holds 8 units at 8 USD a unit-hour from February 10 under a monthly cap neither breaks. The
ledger did not record the span a reservation pays for, so each agent carried the other's over its own horizon: east's
``leadtime_budget_reserved_elsewhere_usd`` multiplied west's 30,709 USD (8 units to the month's end) by the month's
remaining days (614,080 USD) and west's counted east's 24 hours only (1,536 USD). Each reservation now records its
span, and each agent's gauge reads the other's 8 units to the month's end. Under a 30,000 USD cap east's overspend
check projected its next 24 hours with west's month in them (32,266.67 USD) and alerted, though the pair's 24 hours
cost 3,072; it now counts west's 24 hours and raises nothing, while west, projecting to the month's end, counts east's
units there too (61,440 USD, over the cap) and alerts. On PostgreSQL (a real server, each agent its own connection)
and on one in-process ledger both agents write."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent.daemon.metrics import DaemonMetrics
from models import AlertKind
from tests import shared_budget_rig as rig
from tests.conftest import TraceWriter
from tests.postgres.fixtures import POSTGRES, Database

START = datetime(2024, 2, 10, tzinfo=UTC)
MONTH_END = datetime(2024, 3, 1, tzinfo=UTC)
FLEET = 8
CAP = 1_000_000.0
HORIZONS = {"west": None, "east": "24h"}


def _agents(write_trace: TraceWriter, ledgers: rig.Ledgers, cap_usd: float) -> list[rig.Member]:
    """West without a commit horizon and east with 24h, each holding 8 units from February 10 under ``cap_usd``."""
    trace = write_trace({"train": [64.0] * 60}, start=(START - timedelta(hours=2)).isoformat())
    agents = []
    for ledger, (own, other) in zip(ledgers, rig.PAIRS, strict=True):
        horizon = HORIZONS[own]
        caps = {"monthly_cap_usd": cap_usd} | ({} if horizon is None else {"commit_horizon": horizon})
        agents.append(rig.member(rig.shared_budget_config(own, other, **caps), own, trace, ledger, START, FLEET))
    return agents


def _gauges(write_trace: TraceWriter, ledgers: rig.Ledgers) -> tuple[dict[str, float], dict[str, float], float]:
    """Both agents tick three times from February 10: each one's reserved-elsewhere gauge and projection after the
    last tick, and the hours from it to the month's end."""
    agents = _agents(write_trace, ledgers, CAP)
    now = START
    for _ in range(3):
        reports = rig.tick(agents, now)
        last, now = now, now + timedelta(minutes=5)
    elsewhere, projected = {}, {}
    for name, report in reports.items():
        assert report.plan is not None
        [snapshot] = [b for b in report.plan.budgets if b.budget == "team"]
        metrics = DaemonMetrics()
        metrics.record_budgets([snapshot])
        gauge = metrics.registry.get_sample_value("leadtime_budget_reserved_elsewhere_usd", {"budget": "team"})
        assert gauge is not None
        elsewhere[name], projected[name] = gauge, snapshot.projected_usd - snapshot.spent_usd
    return elsewhere, projected, (MONTH_END - last) / timedelta(hours=1)


def _check(elsewhere: dict[str, float], projected: dict[str, float], hours_left: float) -> None:
    fleet_to_month_end = FLEET * rig.UNIT_HOUR_USD * hours_left  # 30,709.33 USD
    for name in ("west", "east"):
        # the other's 8 units to the month's end, whatever horizon it reserves over (was 614,080 for east, 1,536
        # for west), within the tick or two a reservation was made before the last tick
        assert elsewhere[name] == pytest.approx(fleet_to_month_end, rel=1e-3), name
        assert projected[name] == pytest.approx(2 * fleet_to_month_end, rel=1e-3), name


@POSTGRES
def test_on_postgresql(write_trace: TraceWriter, postgres_database: Database) -> None:
    with rig.postgres_ledgers(postgres_database) as ledgers:
        _check(*_gauges(write_trace, ledgers))


def test_in_memory(write_trace: TraceWriter) -> None:
    _check(*_gauges(write_trace, rig.memory_ledgers()))


def _overspends(write_trace: TraceWriter, ledgers: rig.Ledgers) -> dict[str, list[str]]:
    """Both agents tick three times from February 10 under a 30,000 USD cap: the projected-overspend alerts each
    raised at its last two ticks (once the other's reservation is in the ledger)."""
    agents = _agents(write_trace, ledgers, 30_000.0)
    told: dict[str, list[str]] = {"west": [], "east": []}
    for minutes in (0, 5, 10):
        for name, report in rig.tick(agents, START + timedelta(minutes=minutes)).items():
            alerts = [a.summary for a in report.alerts if a.kind is AlertKind.PROJECTED_OVERSPEND]
            told[name] += alerts if minutes > 0 else []
    return told


def _check_overspends(told: dict[str, list[str]]) -> None:
    # east's next 24 hours hold both fleets' 24 hours, 3,072 USD: no overspend (it projected 32,266.67 and alerted)
    assert told["east"] == []
    # west's month holds both fleets to the month's end, about 61,400 USD, half of it east's
    assert len(told["west"]) == 2
    for summary in told["west"]:
        assert "reserved by the other agents sharing the budget" in summary, summary
        projected = float(summary.split("Projected ", 1)[1].split(" USD", 1)[0].replace(",", ""))
        assert projected == pytest.approx(
            2 * FLEET * rig.UNIT_HOUR_USD * (MONTH_END - START) / timedelta(hours=1), rel=1e-3
        )


@POSTGRES
def test_overspend_checks_on_postgresql(write_trace: TraceWriter, postgres_database: Database) -> None:
    with rig.postgres_ledgers(postgres_database) as ledgers:
        _check_overspends(_overspends(write_trace, ledgers))


def test_overspend_checks_in_memory(write_trace: TraceWriter) -> None:
    _check_overspends(_overspends(write_trace, rig.memory_ledgers()))
