"""The policies compared in simulation. Each is a controller that the runner calls once per tick.

- ``forecast``: the leadtime agent with its configured forecaster and planner.
- ``reactive``: behaves like the Kubernetes cluster-autoscaler: scales up only on demand it already sees
  (running + queued, counting units in flight), and releases a unit once it has been unneeded for 10 minutes.
  It is the same agent loop with a last-value point forecast and no forecast uncertainty. A budget paced on a
  forecast (``pacing: forecast``) it cannot pace: it spends that cap first-come (``agent.simulation.first_come``).
- ``static``: a fixed cluster sized to the peak seen before the window; never resized, but interrupted spot units
  are replaced (after their lead time again), as a fixed-size node pool replaces them.
- ``oracle``: perfect foresight, the lowest cost for serving all demand split between the pools in the planner's
  fill order; that is the cost floor unless ``agent.simulation.oracle.floor_caveats`` finds a reason another split
  could cost less (pools of the same classes with different lead times or unit sizes, among others). What
  foresight cannot serve (spot interruptions, stockouts, demand above max_units) it leaves unserved.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Protocol

import numpy as np

from actuators.simulated import SimulatedCluster
from agent.loop import Agent, TickReport
from agent.outlook import Outlook
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
    """Holds every pool at the size the cluster started with, as a fixed-size node pool does: what spot
    interruptions take is asked for again at the next tick, paid from the request and ready after the lead time.

    A GKE node pool's Spot VMs sit in a Compute Engine managed instance group
    (https://cloud.google.com/kubernetes-engine/docs/concepts/spot-vms), which keeps its number of running VMs and
    recreates a VM that fails or that an action it did not initiate deletes
    (https://cloud.google.com/compute/docs/instance-groups/about-repair); an EC2 Auto Scaling group launches a
    replacement for a terminated Spot Instance to keep its desired capacity
    (https://docs.aws.amazon.com/autoscaling/ec2/userguide/asg-launch-spot-instances.html). A replacement refused
    for lack of capacity (a stockout) is asked for again at the next tick.
    """

    def __init__(self, cluster: SimulatedCluster) -> None:
        self.cluster = cluster
        self.size = cluster.paid_units()

    def tick(self, index: int, now: datetime) -> TickReport | None:
        paid = self.cluster.paid_units()
        for pool_id, size in self.size.items():
            if paid[pool_id] < size:
                try:
                    self.cluster.resize(pool_id, size, f"static:{pool_id}@{now.isoformat()}->{size}")
                except CapacityUnavailable:
                    continue
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
