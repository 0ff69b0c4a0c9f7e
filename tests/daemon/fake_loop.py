"""FakeAgentLoop: a stand-in for the agent loop in daemon tests. Each tick it reads the pools and sets one pool to
a scripted target through whatever actuator it is given (the daemon's leader-only wrapper around a shared
simulated cluster), so who acted, and when, is visible in the cluster itself."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from actuators import Actuator
from models import ActionResult, BudgetSnapshot, CapacityPlan, DemandForecast, PoolState, Resize


@dataclass(frozen=True)
class FakeTickReport:
    forecasts: Sequence[DemandForecast] = ()
    pools: Sequence[PoolState] = ()
    plan: CapacityPlan | None = None
    results: Sequence[ActionResult] = ()
    budgets: Sequence[BudgetSnapshot] = ()
    errors: Sequence[Exception] = ()
    blind: str | None = None


@dataclass
class FakeAgentLoop:
    actuator: Actuator
    pool_id: str
    target: Callable[[datetime], int]
    name: str = "loop"
    fail_with: Exception | None = None
    during_tick: Callable[[], None] | None = None
    acted_at: list[datetime] = field(default_factory=list)
    refits: list[datetime] = field(default_factory=list)

    def run_once(self, now: datetime) -> FakeTickReport:
        if self.fail_with is not None:
            raise self.fail_with
        pools = list(self.actuator.list_pools())
        current = next(p for p in pools if p.pool_id == self.pool_id)
        units = self.target(now)
        key = f"{self.pool_id}@{now.isoformat()}"
        resize = Resize(self.pool_id, current.target_units, units, "scripted", key)
        plan = CapacityPlan(now=now, resizes=(resize,), targets={self.pool_id: units})
        if self.during_tick is not None:
            self.during_tick()
        errors: list[Exception] = []
        results: list[ActionResult] = []
        if units != current.target_units:
            try:
                results.append(self.actuator.resize(self.pool_id, units, key))
                self.acted_at.append(now)
            except Exception as exc:  # noqa: BLE001 - reported like the real loop reports a failed action
                errors.append(exc)
        return FakeTickReport(pools=pools, plan=plan, results=results, errors=errors)

    def refit(self, now: datetime) -> None:
        self.refits.append(now)
