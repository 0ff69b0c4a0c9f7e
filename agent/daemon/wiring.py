"""Assembling a daemon from settings and its parts. Every outside system comes in as a constructor argument
(``DaemonParts``), so tests pass fakes and the ``run`` command passes the real adapters.

The actuator the loop sees is wrapped, innermost first: dry-run (in ``dry-run`` mode: writes are recorded,
never sent), leader-only (a replica that does not lead at the moment of a write refuses it), and a recorder of
the newest pool states for the metrics. Node drainers are wrapped the same way (dry-run, then leader-only).

The planner's memory is kept in a ConfigMap (``daemon.state``) whenever the Kubernetes API is configured, so a
restarted replica or the next leader continues with it; otherwise (or when a test passes its own store) in the
given store or in process memory.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry

from actuators import Actuator, DryRunActuator, DryRunDrainer, NodeDrainer
from agent.daemon.adapters import AgentLoopAdapter, PoolStateRecorder
from agent.daemon.decision_recorder import KubernetesDecisionRecorder
from agent.daemon.demand_recorder import demand_recorder
from agent.daemon.election import Elector, Probe, SoleReplicaElector
from agent.daemon.endpoints import EndpointServer
from agent.daemon.events import KubernetesEventRecorder
from agent.daemon.guard import LeaderOnlyActuator, LeaderOnlyDrainer, Leadership
from agent.daemon.health import HealthState
from agent.daemon.identity import lease_namespace, replica_identity
from agent.daemon.lease import LeaseElector
from agent.daemon.metrics import BackoffCollector, BudgetLedgerCollector, DaemonMetrics, ScaleUpWaitCollector
from agent.daemon.runtime import DaemonRuntime, Schedule
from agent.daemon.service import Daemon
from agent.daemon.shadow_book import ShadowBook, ShadowCollector, ShadowStore
from agent.ledger import Ledger
from agent.ledger.shared_file import LeaderWrittenLedger
from agent.loop import Agent, AgentParts
from agent.notify import Notifier
from agent.sources.base import MetricSource
from agent.sources.onprem_capacity import OnPremCapacitySource
from agent.state import InMemoryStateStore, StateStore
from agent.state.configmap import KubernetesStateStore
from config.schema import Settings
from forecasting.base import Forecaster
from forecasting.factory import build_forecaster, stand_in_forecaster
from kube import ApiClient, KubernetesApi
from models import KubernetesUnconfigured
from models.clock import Clock

if TYPE_CHECKING:  # the slice adapter imports the cloud SDKs' errors, which only a live daemon loads
    from actuators.short_slices import ShortSlices


@dataclass
class DaemonParts:
    source: MetricSource
    actuator: Actuator
    ledger: Ledger
    notifier: Notifier
    clock: Clock
    kube: ApiClient | None = None  # needed when leader election is on
    forecaster: Forecaster | None = None  # default: the configured model
    # What the first ticks forecast with while ``forecaster`` first fits; default with the configured model: the
    # calibrated last value (none for a baseline model).
    stand_in: Forecaster | None = None
    # Pools that shrink only by draining idle nodes, each with its drainer (several pools may share one).
    drainers: Mapping[str, NodeDrainer] = field(default_factory=dict)
    # Where parts register their own metrics (e.g. an instrumented actuator); served on /metrics with the daemon's.
    registry: CollectorRegistry | None = None
    # Where the planner's memory is kept; default: a ConfigMap when ``kube`` is set, else process memory.
    state: StateStore | None = None
    # Whether decisions are written as Kubernetes Events when ``kube`` is set (a rehearsal writes none: its pools are
    # simulated, and Events about them next to the real cluster's objects would read as carried out there).
    decision_events: bool = True
    # Where a dry-run daemon keeps its shadow account (``agent.daemon.shadow_book``); ``None``: in process memory.
    shadow_store: ShadowStore | None = None
    shadow_reports: Path | None = None  # the directory its daily report file goes to; ``None``: none written
    # Advisory checks of the configuration against what the cluster reports, each run once at start; what they
    # return is logged as warnings (``agent.sources.resource_check`` for a live daemon).
    checks: Sequence[Callable[[], Sequence[str]]] = ()
    # Reads how many units of each on-prem pool can take work now; ``None``: they are planned on their max_units.
    onprem: OnPremCapacitySource | None = None
    # The TPU slice adapter's record of slices short of hosts, kept in the planner memory across restarts.
    short_slices: ShortSlices | None = None


@dataclass(frozen=True)
class AssembledDaemon:
    runtime: DaemonRuntime
    daemon: Daemon
    elector: Elector
    metrics: DaemonMetrics
    health: HealthState
    endpoints: EndpointServer
    loop: AgentLoopAdapter
    shadow: ShadowBook | None = None


def assemble(
    settings: Settings, mode: str, parts: DaemonParts, environ: Mapping[str, str] = os.environ
) -> AssembledDaemon:
    daemon_settings = settings.daemon
    election = daemon_settings.leader_election
    clock = parts.clock
    identity = replica_identity(election, environ)
    elector: Elector
    events = None
    if election.enabled:
        if parts.kube is None:
            raise KubernetesUnconfigured("leader election needs the Kubernetes API; none was configured")
        namespace = lease_namespace(election, environ)
        api = KubernetesApi(parts.kube, daemon_settings.kubernetes.request_timeout)
        elector = LeaseElector(
            api.leases,
            name=election.lease_name,
            namespace=namespace,
            identity=identity,
            lease_duration=election.lease_duration,
            renew_deadline=election.renew_deadline,
            monotonic=clock.monotonic,
        )
        events = KubernetesEventRecorder(
            api.events, namespace=namespace, lease_name=election.lease_name, identity=identity
        )
    else:
        elector = SoleReplicaElector(identity)

    if isinstance(parts.ledger, LeaderWrittenLedger):  # a file the replicas share: the leader alone writes it
        parts.ledger.follow(lambda: elector.is_leader(clock.now()))
    actuator: Actuator = parts.actuator
    if mode == "dry-run":
        actuator = DryRunActuator(actuator, clock)
    # A cloud write is sent only while the leadership left covers its time limit (``actuators.write_window``).
    write_limit = election.write_limit()
    recorder = PoolStateRecorder(LeaderOnlyActuator(actuator, elector, clock, write_limit))
    horizon = settings.planning_horizon()
    forecaster = parts.forecaster or build_forecaster(settings.forecast, horizon)
    # The first ticks forecast with a cheap stand-in, calibrated as far ahead, while the configured model first fits.
    stand_in = parts.stand_in if parts.forecaster is not None else stand_in_forecaster(settings.forecast, horizon)
    drainers = _guarded_drainers(parts.drainers, mode, elector, clock, write_limit)
    demand = demand_recorder(parts.source) if mode == "dry-run" else None  # the demand the shadow account charges
    source: MetricSource = parts.source if demand is None else demand
    agent = Agent(
        settings,
        AgentParts(
            source,
            forecaster,
            recorder,
            parts.ledger,
            parts.notifier,
            drainers,
            parts.onprem,
            short_slices=parts.short_slices,
        ),
        # what a shared budget's reservations are held by: the deployment (its Lease, shared by its replicas), so a
        # new leader replaces the standing reservations of the one before (``agent.budget_reserve``)
        holder=election.lease_name,
        stand_in=stand_in,
        monotonic=clock.monotonic,  # the ledger measures the time by it where the wall clock stepped back
    )
    agent.refit_in_ticks = False  # the refit job refits: a tick only when no model has been fitted
    agent.budget_watch.adopts_in_flight = mode != "dry-run"  # in dry-run, units in flight are another's scale-ups

    metrics = DaemonMetrics(parts.registry)
    agent.on_fitted = metrics.record_model  # a tick's fit too, not only a refit swapped in
    metrics.registry.register(BackoffCollector(lambda: agent.memory if elector.is_leader(clock.now()) else None, clock))
    metrics.registry.register(BudgetLedgerCollector(lambda: agent.budget_watch.coverage))
    metrics.registry.register(
        ScaleUpWaitCollector(lambda: agent.budget_watch if elector.is_leader(clock.now()) else None)
    )
    health = HealthState(
        daemon_settings.ready_bound(settings.loop.tick_interval),
        daemon_settings.live_bound(settings.loop.tick_interval),
        clock.monotonic,  # ages survive a wall-clock step
    )
    shadow = None
    if demand is not None:
        classes = [c.name for c in settings.demand_class_models()]
        # An interval the ledger would charge as a gap (or a tick more than half an interval late) is skipped.
        longest = max(settings.ledger.gap_after, settings.loop.tick_interval * 1.5)
        shadow = ShadowBook(settings.pool_specs(), classes, longest, parts.shadow_store, parts.shadow_reports)
        metrics.registry.register(ShadowCollector(shadow))
    store = _state_store(settings, parts, identity, environ)
    feed = None if shadow is None or demand is None else (shadow, demand)
    loop = AgentLoopAdapter(agent, recorder, store, elector, clock, feed)
    daemon = Daemon(
        loop,
        elector,
        clock=clock,
        metrics=metrics,
        health=health,
        notifier=parts.notifier,
        mode=mode,
        contact_bound=election.renew_deadline,
        resolve_after=settings.alerts.resolve_after,
        events=events,
        decisions=_decision_recorder(settings, parts, identity, environ),
        shadow=shadow,
        standby_probe=parts.source if isinstance(parts.source, Probe) else None,  # a standby checks its Prometheus
    )
    endpoints = EndpointServer(
        daemon_settings.endpoints.bind_address,
        daemon_settings.endpoints.port,
        health,
        metrics,
        clock,
        report=None if shadow is None else shadow.html,
    )
    schedule = Schedule(
        tick_interval=settings.loop.tick_interval,
        refit_interval=settings.forecast.refit_interval,
        election_interval=election.retry_period,
        misfire_grace=daemon_settings.misfire_grace,
        daily_report_at=daemon_settings.daily_report_at,
    )
    runtime = DaemonRuntime(daemon, schedule, endpoints, parts.checks)
    return AssembledDaemon(runtime, daemon, elector, metrics, health, endpoints, loop, shadow)


def _decision_recorder(
    settings: Settings, parts: DaemonParts, identity: str, environ: Mapping[str, str]
) -> KubernetesDecisionRecorder | None:
    """Decisions as Kubernetes Events whenever the API is configured; pool decisions on the state ConfigMap."""
    if parts.kube is None or not parts.decision_events:
        return None
    daemon_settings = settings.daemon
    return KubernetesDecisionRecorder(
        KubernetesApi(parts.kube, daemon_settings.kubernetes.request_timeout),
        namespace=daemon_settings.state.config_map_namespace
        or lease_namespace(daemon_settings.leader_election, environ),
        pool_object=daemon_settings.state.config_map_name,
        identity=identity,
        slice_pools=[m.pool for m in settings.cloud.tpu_slice_groups] if settings.cloud is not None else (),
    )


def _state_store(settings: Settings, parts: DaemonParts, identity: str, environ: Mapping[str, str]) -> StateStore:
    if parts.state is not None:
        return parts.state
    if parts.kube is None:
        return InMemoryStateStore(identity)
    daemon_settings = settings.daemon
    return KubernetesStateStore(
        KubernetesApi(parts.kube, daemon_settings.kubernetes.request_timeout).config_maps,
        name=daemon_settings.state.config_map_name,
        namespace=daemon_settings.state.config_map_namespace
        or lease_namespace(daemon_settings.leader_election, environ),
        identity=identity,
    )


def _guarded_drainers(
    drainers: Mapping[str, NodeDrainer], mode: str, leadership: Leadership, clock: Clock, write_limit: timedelta
) -> dict[str, NodeDrainer]:
    """Each distinct drainer wrapped once (dry-run in ``dry-run`` mode, then leader-only), mapped to its pools."""
    wrapped: dict[int, NodeDrainer] = {}
    for drainer in drainers.values():
        if id(drainer) not in wrapped:
            inner: NodeDrainer = DryRunDrainer(drainer, clock) if mode == "dry-run" else drainer
            wrapped[id(drainer)] = LeaderOnlyDrainer(inner, leadership, clock, write_limit)
    return {pool_id: wrapped[id(drainer)] for pool_id, drainer in drainers.items()}
