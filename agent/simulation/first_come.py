"""A cap spent first-come: how a reactive autoscaler, which has no forecast to pace a budget on, holds a burst
budget that the agent paces (``pacing: forecast``).

The autoscaler itself knows no budget; a kill switch beside it does. Before each step is billed, when the step's
cost would take the month period's spend over the monthly cap, or the clock hour's over the hourly cap, the
budget's pools are cut, the dearest per chip first and busy units too, to what the money left under the tighter
of the two pays for; once the money is gone, nothing more is bought until the next period (or hour) opens. Every
step counts, gap steps included, as in ``agent.simulation.budgets``: the spend never exceeds either cap at any
step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from actuators.simulated import SimulatedCluster
from agent.planning.budget import Budget, CapKind, Period
from config.schema import Settings
from models import PoolSpec

_EPS_USD = 1e-6


class FirstComeCaps:
    """The monthly and hourly caps of the paced budgets, held first-come on a simulated cluster."""

    def __init__(self, budgets: Sequence[Budget], pools: Sequence[PoolSpec]) -> None:
        self.budgets = [b for b in budgets if b.monthly_cap_usd is not None or b.hourly_cap_usd is not None]
        self.pools = {p.pool_id: p for p in pools}
        self._spent: dict[tuple[str, CapKind], tuple[Period, float]] = {}

    @classmethod
    def paced(cls, settings: Settings) -> FirstComeCaps:
        budgets = [Budget.from_settings(b) for b in settings.budgets if b.pacing == "forecast"]
        return cls(budgets, settings.pool_specs())

    def hold(self, now: datetime, cluster: SimulatedCluster, hours: float) -> int:
        """Cut the budgets' pools so that this step fits every cap; then count the step's spend. Returns the units
        cut."""
        released = 0
        for budget in self.budgets:
            caps = budget.caps(now)
            spent_by_cap = {kind: self._spent_in(budget.name, kind, period) for kind, period, _ in caps}
            # The tighter cap binds: spend is measured against the one with the least money left.
            cap, spent = min(((c, spent_by_cap[kind]) for kind, _, c in caps), key=lambda cs: cs[0] - cs[1])
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
                released += cut
                paid = cluster.paid_units()
                cost = self._cost(members, paid, hours)
            for kind, period, _ in caps:
                self._spent[(budget.name, kind)] = (period, spent_by_cap[kind] + cost)
        return released

    def _spent_in(self, name: str, kind: CapKind, period: Period) -> float:
        held = self._spent.get((name, kind))
        return held[1] if held is not None and held[0] == period else 0.0

    def _cost(self, members: Sequence[str], paid: Mapping[str, int], hours: float) -> float:
        return sum(paid[p] * self.pools[p].price_per_unit_hour_usd * hours for p in members)
