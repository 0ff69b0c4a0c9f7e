"""A cap spent first-come: how a reactive autoscaler, which has no forecast to pace a budget on, holds a burst
budget that the agent paces (``pacing: forecast``).

The autoscaler itself knows no budget; a kill switch beside it does. Before each step is billed, when the step's
cost would take the month period's spend over the cap, the budget's pools are cut, the dearest per chip first and
busy units too, to what the money left pays for; once the money is gone, nothing more is bought until the next
period opens. Every step counts, gap steps included, as in ``agent.simulation.budgets``: the spend never exceeds
the cap at any step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from actuators.simulated import SimulatedCluster
from agent.planning.budget import Budget, Period
from config.schema import Settings
from models import PoolSpec

_EPS_USD = 1e-6


class FirstComeCaps:
    """The monthly caps of the paced budgets, held first-come on a simulated cluster."""

    def __init__(self, budgets: Sequence[Budget], pools: Sequence[PoolSpec]) -> None:
        self.budgets = [b for b in budgets if b.monthly_cap_usd is not None]
        self.pools = {p.pool_id: p for p in pools}
        self._spent: dict[str, tuple[Period, float]] = {}

    @classmethod
    def paced(cls, settings: Settings) -> FirstComeCaps:
        budgets = [Budget.from_settings(b) for b in settings.budgets if b.pacing == "forecast"]
        return cls(budgets, settings.pool_specs())

    def hold(self, now: datetime, cluster: SimulatedCluster, hours: float) -> None:
        """Cut the budgets' pools so that this step fits every cap; then count the step's spend."""
        for budget in self.budgets:
            cap = float(budget.monthly_cap_usd or 0.0)
            period = budget.period(now)
            held = self._spent.get(budget.name)
            spent = held[1] if held is not None and held[0] == period else 0.0
            paid = cluster.paid_units()
            members = sorted(
                (p for p in budget.pools if p in self.pools and p in paid),
                key=lambda p: (-self.pools[p].price_per_chip_hour_usd, p),
            )
            cost = self._cost(members, paid, hours)
            for pool_id in members:
                if spent + cost <= cap + _EPS_USD:
                    break
                unit = self.pools[pool_id].price_per_unit_hour_usd * hours
                if unit <= 0.0 or paid[pool_id] <= 0:
                    continue
                over = spent + cost - cap
                cut = min(paid[pool_id], -int(-(over - _EPS_USD) // unit))
                target = paid[pool_id] - cut
                cluster.resize(pool_id, target, f"first-come-cap:{pool_id}@{now.isoformat()}->{target}")
                paid = cluster.paid_units()
                cost = self._cost(members, paid, hours)
            self._spent[budget.name] = (period, spent + cost)

    def _cost(self, members: Sequence[str], paid: Mapping[str, int], hours: float) -> float:
        return sum(paid[p] * self.pools[p].price_per_unit_hour_usd * hours for p in members)
