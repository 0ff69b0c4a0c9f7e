"""A budget whose ledger began after its period started, with whole daemons (the real agent loop and planner, one
replica, a simulated cluster and clock, SQLite ledger files as the shipped base keeps them on the pod's emptyDir):

* the old pod's ledger holds the month from its start: no alert, ``leadtime_budget_spend_incomplete`` 0;
* its replacement starts a new, empty file mid-month: one ``budget-ledger-incomplete`` alert for the budget and
  period, naming the period start, the first record, the file and what to do, not one per tick, and the gauges
  say so until the next period, which the new file holds whole (no alert for it);
* a ledger filled with the period's bill from the period's start holds it: no alert.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from actuators import SimulatedCluster
from agent.ledger.billed import BilledCost
from agent.ledger.sqlite import SqliteLedger
from config.schema import BudgetSettings, Settings
from models import AlertEvent, AlertKind, LedgerEntry
from models.clock import SimulatedClock
from tests.daemon.conftest import T0
from tests.daemon.scenario import ScenarioReplica, helios_settings, scenario_replica

POOL = "a100-on-demand"
TICK = timedelta(seconds=60)
MARCH, APRIL = datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 4, 1, tzinfo=UTC)  # the clock starts 2 March 09:00


def _settings() -> Settings:
    base = helios_settings(kube_url=None)  # a single replica: election off
    budget = BudgetSettings(name="research", pools=(POOL,), monthly_cap_usd=250_000.0)
    return base.model_copy(update={"budgets": (budget,)})


def _pod(name: str, clock: SimulatedClock, ledger: SqliteLedger) -> ScenarioReplica:
    settings = _settings()
    cluster = SimulatedCluster(settings.pool_specs(), clock)
    return scenario_replica(name, settings, clock, cluster, "enforce", kube=None, ledger=ledger)


def _ticks(pod: ScenarioReplica, clock: SimulatedClock, count: int) -> None:
    for _ in range(count):
        clock.advance(TICK)
        pod.assembled.daemon.tick()


def _told(pod: ScenarioReplica) -> list[AlertEvent]:
    return [e for e in pod.notifier.delivered if e.kind is AlertKind.BUDGET_LEDGER_INCOMPLETE]


def _gauge(pod: ScenarioReplica, name: str) -> float | None:
    return pod.assembled.metrics.registry.get_sample_value(name, {"budget": "research"})


def test_a_replacement_pod_on_a_new_file_alerts_once_for_the_period_and_not_for_the_next(
    tmp_path: Path, clock: SimulatedClock
) -> None:
    old_file = SqliteLedger(tmp_path / "pod-a" / "ledger.sqlite")
    old_file.record_many(  # the old pod ran from February on: 200k spent in March so far
        [
            LedgerEntry(POOL, MARCH - timedelta(days=3), MARCH, 24, 60_000.0),
            LedgerEntry(POOL, MARCH, T0, 24, 200_000.0),
            LedgerEntry(POOL, T0, T0, 24, 0.0),
        ]
    )
    old = _pod("leadtime-a", clock, old_file)
    _ticks(old, clock, 3)
    assert _told(old) == []
    assert _gauge(old, "leadtime_budget_spend_incomplete") == 0.0
    assert _gauge(old, "leadtime_budget_ledger_since_seconds") == (MARCH - timedelta(days=3)).timestamp()
    old_file.close()

    path = tmp_path / "pod-b" / "ledger.sqlite"  # `kubectl rollout restart`: a new pod, a new emptyDir
    new = _pod("leadtime-b", clock, SqliteLedger(path))
    started = clock.now() + TICK
    _ticks(new, clock, 5)
    [alert] = _told(new)
    assert alert.subject == "budget research: period from 2026-03-01 00:00 UTC"
    assert alert.details["first record"] == started.strftime("%Y-%m-%d %H:%M UTC")
    assert alert.details["pools recorded late"] == f"{POOL} (first record {started:%Y-%m-%d %H:%M UTC})"
    assert f"the spend of {POOL} before its first record is counted as 0" in alert.summary
    assert alert.details["ledger"] == str(path)
    assert "sqlite-ledger-volume" in alert.details["what to do"]
    assert "import-billing" in alert.details["what to do"]
    assert _gauge(new, "leadtime_budget_spend_incomplete") == 1.0
    assert _gauge(new, "leadtime_budget_ledger_since_seconds") == started.timestamp()

    clock.set(APRIL - TICK)  # the new file holds April whole
    _ticks(new, clock, 3)
    assert len(_told(new)) == 1
    assert _gauge(new, "leadtime_budget_spend_incomplete") == 0.0
    assert _gauge(new, "leadtime_budget_ledger_since_seconds") == started.timestamp()


def test_a_ledger_holding_the_periods_bill_from_its_start_is_not_alerted(tmp_path: Path, clock: SimulatedClock) -> None:
    ledger = SqliteLedger(tmp_path / "ledger.sqlite")
    ledger.record_billed([BilledCost(POOL, MARCH, MARCH + timedelta(days=1), 4_800.0)])  # `ledger import-billing`
    pod = _pod("leadtime-a", clock, ledger)
    _ticks(pod, clock, 3)
    assert _told(pod) == []
    assert _gauge(pod, "leadtime_budget_spend_incomplete") == 0.0
    assert _gauge(pod, "leadtime_budget_ledger_since_seconds") == MARCH.timestamp()
    ledger.close()
