"""A simulated agent charges its ledger only where its configuration has a budget: nothing else reads a simulated
agent's ledger (the runs are billed from the simulated cluster), so an agent without a budget writes no entry and
runs exactly as one whose budget never binds, which still charges every pool."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from agent.ledger import InMemoryLedger
from agent.simulation import select_window
from agent.simulation.assembly import policy_agent, policy_cluster
from agent.simulation.policies import AgentController
from agent.simulation.runner import PolicyRun, drive
from agent.sources.trace import Trace, read_trace
from config import settings_from_mapping
from config.schema import Settings


def _trace(tmp_path: Path) -> tuple[Trace, pd.DatetimeIndex]:
    # a day of history, then twelve hours whose demand swings between 8 and 40 chips every hour and a half, so the
    # agent scales up and down many times over the window
    stamps = pd.date_range("2024-01-10T00:00:00+00:00", periods=288 + 12 * 12, freq="5min")
    demand = 24.0 + 16.0 * np.sign(np.sin(np.arange(len(stamps)) * 2 * np.pi / 36))
    frame = pd.DataFrame({"unique_id": "a", "ds": stamps.strftime("%Y-%m-%dT%H:%M:%S%z"), "y": demand})
    path = tmp_path / "trace.csv"
    frame.to_csv(path, index=False)
    return read_trace(path), stamps


def _settings(budgets: list[dict[str, Any]]) -> Settings:
    raw = {
        "demand_classes": [{"name": "a"}],
        "pools": [{"id": "gpu", "kind": "gpu-node-pool", "chips_per_unit": 8, "max_units": 10,
                   "price_per_chip_hour_usd": 1.0, "lead_time": "10m", "serves": ["a"]}],
        "forecast": {"history": "1d", "model": "last-value"},
        "budgets": budgets,
    }  # fmt: skip
    return settings_from_mapping(raw, source="uncharged.yaml")


def _run(settings: Settings, trace: Trace, start: pd.Timestamp, policy: str) -> tuple[PolicyRun, InMemoryLedger]:
    window = select_window(trace, settings.demand_class_models(), start.to_pydatetime(), None)
    cluster, clock = policy_cluster(settings, window, policy)
    agent = policy_agent(policy, settings, trace, window, cluster, None)
    ledger = agent.parts.ledger
    assert isinstance(ledger, InMemoryLedger)
    run = drive(policy, AgentController(agent), cluster, clock, window, settings.pool_specs(), None)
    return run, ledger


@pytest.mark.parametrize("policy", ["forecast", "reactive"])
def test_an_agent_without_budgets_writes_no_ledger_entry_and_runs_as_under_a_budget_that_never_binds(
    tmp_path: Path, policy: str
) -> None:
    trace, stamps = _trace(tmp_path)
    never_binds = [{"name": "b", "pools": ["gpu"], "monthly_cap_usd": 1e9, "hourly_cap_usd": 1e9}]
    bare, bare_ledger = _run(_settings([]), trace, stamps[288], policy)
    capped, capped_ledger = _run(_settings(never_binds), trace, stamps[288], policy)

    assert bare_ledger.entries() == []
    # the budgeted agent still charges what its pool holds, from the window's start on
    charged = capped_ledger.spent(["gpu"], stamps[288].to_pydatetime(), stamps[-1].to_pydatetime())
    assert charged > 0.0
    assert capped.scale_actions > 4
    assert bare.summary() == capped.summary()
    for pool, units in capped.paid_units.items():
        assert np.array_equal(bare.paid_units[pool], units)
    np.testing.assert_array_equal(bare.unserved_by_step, capped.unserved_by_step)
    assert [(a.kind, a.subject) for a in bare.alerts] == [(a.kind, a.subject) for a in capped.alerts]
