"""The policies compared in simulation. Each is a controller that the runner calls once per tick.

- ``forecast``: the leadtime agent with its configured forecaster and planner.
- ``reactive``: behaves like the Kubernetes cluster-autoscaler: scales up only on demand it already sees
  (running + queued, counting units in flight), and releases a unit once it has been unneeded for 10 minutes.
  It is the same agent loop with a last-value point forecast and no forecast uncertainty. A budget paced on a
  forecast (``pacing: forecast``) it cannot pace: it spends that cap first-come (``agent.simulation.first_come``).
- ``static``: a fixed cluster sized to the peak seen before the window; never changes.
- ``oracle``: perfect foresight, the cost floor for serving all demand (see ``agent.simulation.oracle``); what
  foresight cannot serve (spot interruptions, stockouts, demand above max_units) it leaves unserved.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Protocol

import numpy as np

from actuators.simulated import SimulatedCluster
from agent.loop import Agent, Outlook, TickReport
from models import CapacityUnavailable

POLICIES = ("forecast", "reactive", "static", "oracle")
AGENT_POLICIES = ("forecast", "reactive")
REACTIVE_UNNEEDED_TIME = timedelta(minutes=10)


class Controller(Protocol):
    def tick(self, index: int, now: datetime) -> TickReport | None: ...


class AgentController:
    """Drives an ``Agent`` (the forecast and reactive policies). With ``outlooks`` (one per step, computed once
    for the whole window) the agent only plans and acts; otherwise it observes and forecasts every tick."""

    def __init__(self, agent: Agent, outlooks: Sequence[Outlook] | None = None) -> None:
        self.agent = agent
        self.outlooks = outlooks

    def tick(self, index: int, now: datetime) -> TickReport | None:
        if self.outlooks is None:
            return self.agent.run_once(now)
        return self.agent.act(now, self.outlooks[index])


class StaticController:
    """Holds whatever the cluster started with."""

    def tick(self, index: int, now: datetime) -> TickReport | None:
        return None


class OracleController:
    """Replays a precomputed perfect-foresight schedule of paid units per pool.

    The schedule knows demand, not stockouts: a scale-up refused for lack of capacity leaves the pool as it is,
    and the next tick asks again, as the agent's executor does.
    """

    def __init__(self, cluster: SimulatedCluster, schedule: Mapping[str, np.ndarray]) -> None:
        self.cluster = cluster
        self.schedule = schedule

    def tick(self, index: int, now: datetime) -> TickReport | None:
        paid = self.cluster.paid_units()
        for pool_id, units in self.schedule.items():
            target = int(units[index])
            if target != paid[pool_id]:
                try:
                    self.cluster.resize(pool_id, target, f"oracle:{pool_id}@{now.isoformat()}->{target}")
                except CapacityUnavailable:
                    continue
        return None
