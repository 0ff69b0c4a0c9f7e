"""The daemon's live parts, built from settings: demand from Prometheus, pools through the Google Cloud actuators
(routed per pool and instrumented), GKE node pools shrunk only by draining idle nodes and GKE TPU slice groups only by
draining idle slices, both through the Kubernetes API. On-prem pools are never changed: the units of each that can
take work now are read from Prometheus (its ``capacity_query``) at every tick, and a pool without that query is
named at start, as planned on its ``max_units`` whatever its nodes do.

Nothing connects here: every client connects on first use. The notifier, the clock and the Kubernetes API client
come in as arguments, so a deployment (or a test) chooses them. Dry-run and leader-only wrapping happens in
``agent.daemon.wiring.assemble``, for every mode alike.
"""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry

from actuators.aws_wiring import AwsActuators, build_aws_actuators
from actuators.base import Actuator, NodeDrainer
from actuators.cloud_tpu import queued_resource_waits
from actuators.cloud_wiring import CloudActuators, build_cloud_actuators
from actuators.gke_tpu_slices import nodes_graces
from actuators.instrumented import InstrumentedActuator
from actuators.kubernetes_drain import KubernetesNodeDrainer
from actuators.routing import RoutingActuator
from actuators.short_slices import short_waits
from actuators.slice_drain import KubernetesSliceDrainer
from agent.daemon.live_settings import check_live_settings
from agent.daemon.shadow_book import shadow_store
from agent.daemon.wiring import DaemonParts
from agent.ledger.factory import open_daemon_ledger
from agent.notify import Notifier
from agent.sources.onprem_capacity import PrometheusOnPremCapacity, onprem_queries, unobserved_onprem_pools
from agent.sources.prometheus import PrometheusSource
from agent.sources.prometheus_queries import demand_queries
from agent.sources.resource_check import unknown_resources
from config.schema import Settings
from kube import ApiClient, KubernetesApi
from models.clock import Clock


def live_parts(
    settings: Settings,
    source: str,
    clock: Clock,
    notifier: Notifier,
    kube: ApiClient | None,
    registry: CollectorRegistry,
) -> DaemonParts:
    check_live_settings(settings, source)
    prometheus = settings.prometheus
    assert prometheus is not None  # checked above
    classes = settings.demand_class_models()
    demand = PrometheusSource.from_settings(prometheus, demand_queries(classes, prometheus))
    ledger = open_daemon_ledger(settings.ledger)

    def resources() -> list[str]:  # a misspelled accelerator resource would read as no demand
        own = PrometheusSource.from_settings(prometheus, {})  # its own session: it runs beside the first tick
        return unknown_resources(own, classes, prometheus, clock.now(), settings.forecast.history)

    def onprem_unobserved() -> list[str]:  # such a pool is planned whole while its nodes are down
        return [
            f"on-prem pool {pool} has no prometheus.pools.{pool}.capacity_query: it is planned on its max_units at "
            "every tick, and work its nodes down or cordoned would run waits instead of bursting; give it a query "
            "counting its Ready, schedulable nodes (README, On-prem capacity)"
            for pool in unobserved_onprem_pools(prometheus, settings.pool_specs())
        ]

    parts = DaemonParts(
        source=demand,
        actuator=RoutingActuator({}),  # on-prem pools only: nothing to change
        ledger=ledger,
        notifier=notifier,
        clock=clock,
        kube=kube,
        registry=registry,
        shadow_store=shadow_store(settings.ledger, ledger, settings.pool_specs()),
        shadow_reports=Path(settings.ledger.path).parent if settings.ledger.backend == "sqlite" else None,
        checks=[resources, onprem_unobserved],
    )
    if onprem_queries(prometheus, settings.pool_specs()):
        parts.onprem = PrometheusOnPremCapacity.from_settings(prometheus, settings.pool_specs())
    # The router is instrumented once, whichever clouds it routes to: a second InstrumentedActuator on the same
    # registry would register the same metrics twice.
    aws_routes = _add_aws(parts, settings, clock, kube) if settings.aws is not None else {}
    cloud = settings.cloud
    if cloud is None:
        if aws_routes:
            parts.actuator = InstrumentedActuator(RoutingActuator(aws_routes), registry, unit_gauges=False)
        return parts
    waits = queued_resource_waits(settings)
    actuators = build_cloud_actuators(cloud, clock, waits, nodes_graces(settings), short_waits(settings))
    router: Actuator = actuators.router
    if aws_routes:
        google = [m.pool for m in cloud.node_pools] + [m.pool for m in cloud.tpu_slice_groups]
        google += [m.pool for m in cloud.queued_resources]
        router = RoutingActuator(dict.fromkeys(google, actuators.router) | aws_routes)
    parts.actuator = InstrumentedActuator(router, registry, unit_gauges=False)
    if cloud.node_pools and kube is None:
        raise ValueError("GKE node pools are drained through the Kubernetes API: pass its client")
    if actuators.tpu_slices is not None and kube is None:
        raise ValueError("GKE TPU slices are drained through the Kubernetes API: pass its client")
    if kube is not None:
        api = KubernetesApi(kube, settings.daemon.kubernetes.request_timeout)
        parts.drainers = {**parts.drainers, **cloud_drainers(settings, clock, api, actuators)}
    if actuators.tpu_slices is not None:
        parts.short_slices = actuators.tpu_slices.short_slices
    return parts


def cloud_drainers(
    settings: Settings, clock: Clock, api: KubernetesApi, actuators: CloudActuators
) -> dict[str, NodeDrainer]:
    """The drainer of each pool of the ``cloud`` section shrunk by draining: a GKE node pool's nodes, a TPU slice
    group's slices (``recommend`` reads the drains in progress through the same ones, never writing)."""
    cloud = settings.cloud
    assert cloud is not None
    drainers: dict[str, NodeDrainer] = {}
    if cloud.node_pools:
        drainer = KubernetesNodeDrainer(
            api,
            clock,
            {m.pool: m.node_pool for m in cloud.node_pools},
            actuators.node_pools,
            timeout=cloud.drain_timeout,
            accelerator_resources=_class_resources(settings),
        )
        drainers |= {m.pool: drainer for m in cloud.node_pools}
    if actuators.tpu_slices is not None:
        slices = KubernetesSliceDrainer(
            api,
            clock,
            actuators.tpu_slices,
            timeout=cloud.drain_timeout,
            accelerator_resources=_class_resources(settings),
        )
        drainers |= {m.pool: slices for m in cloud.tpu_slice_groups}
    return drainers


def _add_aws(parts: DaemonParts, settings: Settings, clock: Clock, kube: ApiClient | None) -> dict[str, Actuator]:
    """The AWS pools' adapters (returned as routes), their nodes drained before they go: one drainer per node label
    and adapter, put in ``parts``."""
    aws = settings.aws
    assert aws is not None
    built = build_aws_actuators(aws, clock)
    parts.checks = [*parts.checks, *built.checks]
    if not built.drains:
        return built.routes
    if kube is None:
        raise ValueError("AWS node groups are drained through the Kubernetes API: pass its client")
    parts.drainers = aws_drainers(
        settings, clock, KubernetesApi(kube, settings.daemon.kubernetes.request_timeout), built
    )
    return built.routes


def aws_drainers(settings: Settings, clock: Clock, api: KubernetesApi, built: AwsActuators) -> dict[str, NodeDrainer]:
    """The drainer of each pool of the ``aws`` section (its nodes drained before they go): one per node label and
    adapter (``recommend`` reads the drains in progress through the same ones, never writing)."""
    aws = settings.aws
    assert aws is not None
    drainers: dict[str, NodeDrainer] = {}
    resources = _class_resources(settings)
    for label in sorted({t.label for t in built.drains.values()}):
        for remover in {id(t.remover): t.remover for t in built.drains.values() if t.label == label}.values():
            mine = {pool: t.value for pool, t in built.drains.items() if t.label == label and t.remover is remover}
            drainer = KubernetesNodeDrainer(
                api, clock, mine, remover, timeout=aws.drain_timeout, pool_label=label, accelerator_resources=resources
            )
            drainers |= dict.fromkeys(mine, drainer)
    return drainers


def _class_resources(settings: Settings) -> set[str]:
    """The resources the demand classes are measured in: a pod requesting one runs accelerator work."""
    prometheus = settings.prometheus
    return {c.resource for c in prometheus.classes.values() if c.resource} if prometheus is not None else set()
