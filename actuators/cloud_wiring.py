"""Building the real actuators from the cloud settings: the Google clients, one adapter per kind of pool, and the
routing actuator that presents them as one. Nothing connects here; the clients connect on first use.

Credentials come from the environment (Application Default Credentials, e.g. GKE Workload Identity). With
``cloud.endpoint`` set, every client talks plain HTTP to that endpoint with anonymous credentials: that is for
local test servers only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from actuators.cloud_tpu import CloudTpuQueuedResourceActuator
from actuators.gke_node_pool import GkeNodePoolActuator
from actuators.gke_tpu_slices import GkeTpuSliceActuator
from actuators.routing import RoutingActuator
from config.cloud import CloudSettings
from models.clock import Clock


@dataclass(frozen=True)
class CloudActuators:
    """The router the agent drives, the node-pool adapter a ``KubernetesNodeDrainer`` removes nodes with, and the
    slice adapter a ``KubernetesSliceDrainer`` finds and deletes slices with (None without slice groups)."""

    router: RoutingActuator
    node_pools: GkeNodePoolActuator
    tpu_slices: GkeTpuSliceActuator | None = None


def build_cloud_actuators(
    cloud: CloudSettings,
    clock: Clock,
    queue_waits: Mapping[str, timedelta] | None = None,
    nodes_graces: Mapping[str, timedelta] | None = None,
    short_waits: Mapping[str, timedelta] | None = None,
) -> CloudActuators:
    """``queue_waits``: how long a queued resource of each pool may wait for resources
    (``actuators.cloud_tpu.queued_resource_waits``); ``nodes_graces``: how long a ready slice of each group may have
    no node in the cluster (``actuators.gke_tpu_slices.nodes_graces``); ``short_waits``: how long a slice of each
    group may be short of hosts for want of capacity (``actuators.short_slices.short_waits``)."""
    from google.cloud import compute_v1, container_v1, tpu_v2

    options: dict[str, Any] = {}
    if cloud.endpoint is not None:
        from google.auth.credentials import AnonymousCredentials

        anonymous = AnonymousCredentials()  # type: ignore[no-untyped-call]
        options = {"credentials": anonymous, "client_options": {"api_endpoint": cloud.endpoint}}
    gke = container_v1.ClusterManagerClient(transport="rest", **options)
    migs = compute_v1.InstanceGroupManagersClient(transport="rest", **options)
    # The daemon drains every node pool's nodes before they go (``KubernetesNodeDrainer``): never a blind shrink.
    node_pools = GkeNodePoolActuator(
        gke, migs, cloud.cluster_path, cloud.node_pools, clock, cloud.zone_backoff, drained=True
    )
    routes: dict[str, Any] = {m.pool: node_pools for m in cloud.node_pools}
    slices = None
    if cloud.tpu_slice_groups:
        # The daemon deletes ready slices only once drained (``KubernetesSliceDrainer``): never by a resize.
        slices = GkeTpuSliceActuator(
            gke,
            cloud.cluster_path,
            cloud.tpu_slice_groups,
            clock,
            migs=migs,
            drained=True,
            graces=nodes_graces,
            waits=short_waits,
        )
        routes |= {m.pool: slices for m in cloud.tpu_slice_groups}
    if cloud.queued_resources:
        tpu = tpu_v2.TpuClient(transport="rest", **options)
        queued = CloudTpuQueuedResourceActuator(tpu, cloud.project, cloud.queued_resources, clock, queue_waits)
        routes |= {m.pool: queued for m in cloud.queued_resources}
    return CloudActuators(RoutingActuator(routes), node_pools, slices)
