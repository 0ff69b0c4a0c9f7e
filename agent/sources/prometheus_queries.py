"""Default PromQL per demand class and per pool, for the exporters most clusters already run.

Demand (accelerator units requested by running + queued work), one series per class:

- ``kueue``: admitted usage plus pending requests of a ClusterQueue (Kueue with
  ``metrics.enableClusterQueueResources: true``); the class's series name is the ClusterQueue by default.
- ``kube-state-metrics``: accelerator requests of pods that are Pending or Running; the class's series name is
  the namespace by default.

Activity (0..1) per pool, from the NVIDIA DCGM exporter: mean ``DCGM_FI_DEV_GPU_UTIL`` over the pool's nodes,
used for idle detection and the report.

Every default is written so that "no data" stays empty (and so unavailable) rather than reading as zero: a
sum over no pods is zero only while kube-state-metrics itself still reports nodes, and missing pending
numbers count as zero only while Kueue still reports the ClusterQueue's usage.
"""

from __future__ import annotations

from collections.abc import Sequence

from config.prometheus import ClassQuerySettings, PrometheusSettings
from models import AcceleratorFamily, DemandClass

# Extended resource names as Kubernetes (and Kueue) spell them ...
KUEUE_RESOURCES = {AcceleratorFamily.GPU: "nvidia.com/gpu", AcceleratorFamily.TPU: "google.com/tpu"}
# ... and as kube-state-metrics sanitizes them into its ``resource`` label.
KSM_RESOURCES = {AcceleratorFamily.GPU: "nvidia_com_gpu", AcceleratorFamily.TPU: "google_com_tpu"}


def quote(value: str) -> str:
    """A PromQL string literal for a label value."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def kueue_demand_query(selector: str, resource: str) -> str:
    matchers = f"resource={quote(resource)}, {selector}"
    return (
        f"sum(kueue_cluster_queue_resource_usage{{{matchers}}})"
        f" + on() (sum(kueue_cluster_queue_resource_pending{{{matchers}}}) or on() vector(0))"
    )


def kube_state_metrics_demand_query(selector: str, resource: str) -> str:
    return (
        f"sum(kube_pod_container_resource_requests{{resource={quote(resource)}, {selector}}}"
        " * on(namespace, pod) group_left()"
        ' max by (namespace, pod) (kube_pod_status_phase{phase=~"Pending|Running"} == 1))'
        " or on() (0 * count(kube_node_info))"
    )


def demand_query(demand_class: DemandClass, settings: PrometheusSettings) -> str:
    """The PromQL that measures one demand class: the configured override, else the exporter's default."""
    override = settings.classes.get(demand_class.name, ClassQuerySettings())
    if override.query:
        return override.query
    if settings.demand_metrics == "kueue":
        selector = override.selector or f"cluster_queue={quote(demand_class.series_id)}"
        return kueue_demand_query(selector, override.resource or KUEUE_RESOURCES[demand_class.family])
    selector = override.selector or f"namespace={quote(demand_class.series_id)}"
    return kube_state_metrics_demand_query(selector, override.resource or KSM_RESOURCES[demand_class.family])


def demand_queries(classes: Sequence[DemandClass], settings: PrometheusSettings) -> dict[str, str]:
    return {c.name: demand_query(c, settings) for c in classes}
