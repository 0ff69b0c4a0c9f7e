"""Whole daemons (the real agent loop, election, events) assembled from parts for scenario tests: a replayed
trace for metrics, a simulated cluster for pools, the fake Kubernetes API for the Lease, a simulated clock.
Sources, actuators and notifiers are wrapped so a test can take each dependency down and bring it back."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cache
from pathlib import Path

import pandas as pd
from kubernetes import client as k8s

from actuators import Actuator, SimulatedCluster
from actuators.routing import RoutingActuator
from agent.daemon.replay import RehearsalCluster, ShiftedTraceSource
from agent.daemon.wiring import AssembledDaemon, DaemonParts, assemble
from agent.ledger import InMemoryLedger, Ledger
from agent.sources.base import MetricSource
from agent.sources.trace import Trace, read_trace
from agent.state import StateStore
from config import load_settings
from config.schema import Settings
from models import ActionResult, AlertEvent, DemandClass, MetricsUnavailable, PoolState, TransientActuatorError
from models.clock import SimulatedClock

ROOT = Path(__file__).resolve().parents[2]
TRACE_START = datetime.fromisoformat("2020-05-12T00:00:00+00:00")


@cache
def helios_trace() -> Trace:
    return read_trace(ROOT / "data" / "helios-earth" / "demand_5min.csv.gz")


def helios_settings(kube_url: str | None, mode_tick: timedelta = timedelta(seconds=60)) -> Settings:
    base = load_settings(ROOT / "config" / "examples" / "helios-earth.yaml")
    daemon = base.daemon.model_copy(
        update={
            "endpoints": base.daemon.endpoints.model_copy(update={"bind_address": "127.0.0.1", "port": 0}),
            "leader_election": base.daemon.leader_election.model_copy(update={"enabled": kube_url is not None}),
            "kubernetes": base.daemon.kubernetes.model_copy(
                update={"api_url": kube_url, "request_timeout": timedelta(seconds=0.3)}
            ),
        }
    )
    # These scenarios test election, state and failure handling, not forecasting: the calibrated last value keeps
    # their refits cheap (the configured `auto` trains LightGBM boosters at every refit).
    forecast = base.forecast.model_copy(update={"model": "last-value"})
    loop = base.loop.model_copy(update={"tick_interval": mode_tick})
    return base.model_copy(update={"daemon": daemon, "loop": loop, "forecast": forecast})


@dataclass
class Switchable:
    """Wraps a metric source and an actuator; ``down`` makes every call fail like the real dependency would."""

    source: MetricSource
    actuator: Actuator
    metrics_down: bool = False
    cloud_down: bool = False

    def fetch(self, classes: Sequence[DemandClass], start: datetime, end: datetime, step: timedelta) -> pd.DataFrame:
        if self.metrics_down:
            raise MetricsUnavailable("*", "Prometheus is unreachable: connection refused")
        return self.source.fetch(classes, start, end, step)

    def list_pools(self) -> Sequence[PoolState]:
        if self.cloud_down:
            raise TransientActuatorError("*", "GKE answered 503 Service Unavailable")
        return self.actuator.list_pools()

    def resize(self, pool_id: str, to_units: int, key: str) -> ActionResult:
        if self.cloud_down:
            raise TransientActuatorError(pool_id, "GKE answered 503 Service Unavailable")
        return self.actuator.resize(pool_id, to_units, key)


@dataclass
class FlakyNotifier:
    down: bool = False
    delivered: list[AlertEvent] = field(default_factory=list)
    refused: list[AlertEvent] = field(default_factory=list)

    def notify(self, event: AlertEvent) -> bool:
        if self.down:
            self.refused.append(event)
            return False  # the Notifier contract: report, never raise
        self.delivered.append(event)
        return True


@dataclass
class ScenarioReplica:
    name: str
    assembled: AssembledDaemon
    deps: Switchable
    notifier: FlakyNotifier
    ledger: Ledger


def scenario_replica(
    name: str,
    settings: Settings,
    clock: SimulatedClock,
    cluster: SimulatedCluster,
    mode: str,
    kube: k8s.ApiClient | None,
    state: StateStore | None = None,
    trace_start: datetime | None = None,
    ledger: Ledger | None = None,
    routed: bool = False,
) -> ScenarioReplica:
    """``state``: where the planner memory is kept (default: the ConfigMap when ``kube`` is set); ``trace_start``:
    the simulated time the trace starts at (default: now), for a replica started later in the same scenario;
    ``ledger``: where spend is kept (default: a ledger of its own, in memory); ``routed``: the pools are read
    through a ``RoutingActuator`` as in a live daemon, so a cloud that is down has its pools left out and reported
    unread instead of failing the read."""
    source = ShiftedTraceSource(helios_trace(), TRACE_START, trace_start or clock.now())
    deps = Switchable(source, RehearsalCluster(cluster, clock))
    notifier = FlakyNotifier()
    ledger = InMemoryLedger() if ledger is None else ledger
    actuator: Actuator = RoutingActuator({p.pool_id: deps for p in settings.pool_specs()}) if routed else deps
    parts = DaemonParts(
        source=deps, actuator=actuator, ledger=ledger, notifier=notifier, clock=clock, kube=kube, state=state
    )
    assembled = assemble(settings, mode, parts, {"POD_NAME": name, "POD_NAMESPACE": "leadtime"})
    assembled.endpoints.stop()  # scenario tests drive the jobs directly; no socket needed
    return ScenarioReplica(name, assembled, deps, notifier, ledger)
