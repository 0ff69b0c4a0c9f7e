"""The four policies' runs on the hand-made hybrid fleet of ``test_burst_budget`` under the 150 USD burst budget,
computed once per test process and read by every test of that fleet and cap: the runs are the same whichever test
asks (the same settings, trace and window), so the modules that read them share one xdist group
(``HYBRID_CAPPED_GROUP``) and the first of their tests on a worker pays for them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import pytest

from agent.simulation.runner import PolicyRun, run_policy
from agent.simulation.window import SimulationWindow
from agent.sources.trace import Trace
from config.schema import Settings

HYBRID_CAPPED_GROUP = "hybrid-capped-runs"
BUDGET: dict[str, Any] = {
    "name": "burst",
    "pools": ["spot"],
    "monthly_cap_usd": 150.0,
    "period_start_day": 3,
    "pacing": "forecast",
}
COSTS = {"a": 1.0, "b": 4.0}  # b waits at 4 USD per accelerator-hour, a at 1
POLICIES = ("forecast", "reactive", "static", "oracle")


@dataclass(frozen=True)
class CappedRuns:
    settings: Settings
    trace: Trace
    window: SimulationWindow
    runs: Mapping[str, PolicyRun]  # read only: copy it to add a run


_computed: list[CappedRuns] = []


def capped_runs(tmp_path_factory: pytest.TempPathFactory) -> CappedRuns:
    """The runs of ``POLICIES`` under ``BUDGET``, computed at the first call of this process."""
    if not _computed:
        from tests.unit.test_burst_budget import hybrid  # here: test_burst_budget imports this module too

        settings, trace, window = hybrid(tmp_path_factory.mktemp("hybrid-capped"), [BUDGET], COSTS)
        runs = {name: run_policy(settings, trace, window, name) for name in POLICIES}
        _computed.append(CappedRuns(settings, trace, window, MappingProxyType(runs)))
    return _computed[0]
