"""Whether kube-state-metrics knows the accelerator resource each class's default query counts.

A resource name spelled wrong (``nvidia.com/gpus``) matches no pod, and the default kube-state-metrics query reads
that as no demand: a 0 the query itself cannot refuse, since a cluster at rest has no pod asking for the right
name either, and a cloud pool at zero nodes has no node offering it. So ``leadtime recommend``, and the daemon
once at start, look further back: a resource that no node offered (``kube_node_status_capacity``) and no pod
requested (``kube_pod_container_resource_requests``, or ``kube_pod_init_container_resource_requests`` for init
containers and sidecars, which the default query counts too) over the whole history the forecaster reads is most
likely a typo, and they say so, with the resources that come closest among those nodes offered or pods requested
(app or init containers) over the same history: a cloud pool at zero nodes offers nothing, while its pods still
ask for the right name. The metrics are in
kube-state-metrics' docs/metrics/cluster/node-metrics.md and docs/metrics/workload/pod-metrics.md and carry the
resource name sanitized (``nvidia_com_gpu``), as ``ksm_resource`` writes it. In a Prometheus view of several
clusters they are read in the cluster ``prometheus.cluster_selector`` names, as the default queries are.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Sequence
from datetime import datetime, timedelta

from agent.sources.prometheus import PrometheusSource
from agent.sources.prometheus_client import prometheus_duration
from agent.sources.prometheus_queries import KUEUE_RESOURCES, cluster_matchers, ksm_resource, quote
from config.prometheus import ClassQuerySettings, PrometheusSettings
from models import DemandClass, MetricsUnavailable

log = logging.getLogger(__name__)
CHECK = "resource check"  # the name queries of this check are reported under


_SEEN_IN = (
    "kube_node_status_capacity",
    "kube_pod_container_resource_requests",
    "kube_pod_init_container_resource_requests",
)


def known_resources_query(lookback: timedelta, cluster: Sequence[str] = ()) -> str:
    """The resources some node of the cluster (``prometheus.cluster_selector``'s matcher texts) offered, or some
    pod's app or init container requested, within ``lookback`` before the query's time: one series per resource."""
    window = prometheus_duration(lookback)
    scope = f"{{{', '.join(cluster)}}}" if cluster else ""
    return " or ".join(f"count by (resource) (last_over_time({metric}{scope}[{window}]))" for metric in _SEEN_IN)


def seen_query(resource: str, lookback: timedelta, cluster: Sequence[str] = ()) -> str:
    """Non-empty when some node offered, or some pod requested, ``resource`` (as kube-state-metrics names it)
    within ``lookback`` before the query's time, in the cluster ``cluster`` (matcher texts) names. A pod's request
    may be an init container's alone (a GPU check before the job, a sidecar): the default query counts it."""
    window = prometheus_duration(lookback)
    matcher = f"{{{', '.join([f'resource={quote(resource)}', *cluster])}}}"
    return " or ".join(f"count(last_over_time({metric}{matcher}[{window}]))" for metric in _SEEN_IN)


def default_query_resources(classes: Sequence[DemandClass], settings: PrometheusSettings) -> dict[str, list[str]]:
    """Per resource (as kube-state-metrics names it), the classes whose default kube-state-metrics query counts
    it; classes with a query of their own, and every class under ``demand_metrics: kueue``, are not checked."""
    if settings.demand_metrics != "kube-state-metrics":
        return {}
    found: dict[str, list[str]] = {}
    for demand_class in classes:
        override = settings.classes.get(demand_class.name, ClassQuerySettings())
        if override.query:
            continue
        resource = override.resource or KUEUE_RESOURCES[demand_class.family]
        found.setdefault(ksm_resource(resource), []).append(demand_class.name)
    return found


def unknown_resources(
    source: PrometheusSource,
    classes: Sequence[DemandClass],
    settings: PrometheusSettings,
    at: datetime,
    lookback: timedelta,
) -> list[str]:
    """One sentence per resource that the classes' default queries count and that kube-state-metrics never saw
    within ``lookback`` before ``at``. Advisory: a check Prometheus cannot answer is logged and skipped."""
    problems = []
    cluster = cluster_matchers(settings)
    for resource, users in default_query_resources(classes, settings).items():
        try:
            if source.instant(CHECK, seen_query(resource, lookback, cluster), at):
                continue
            answer = source.instant(CHECK, known_resources_query(lookback, cluster), at)
            known = sorted({labels.get("resource", "") for labels, _ in answer})
        except MetricsUnavailable as exc:
            log.warning("could not check the resource %s of class(es) %s: %s", resource, ", ".join(users), exc.reason)
            continue
        closest = difflib.get_close_matches(resource, [r for r in known if r], n=3, cutoff=0.5)
        hint = (
            f"the closest resources nodes offered or pods requested in that time: {', '.join(closest)}"
            if closest
            else "no node offered and no pod requested a resource with a similar name in that time"
        )
        problems.append(
            f"class(es) {', '.join(users)}: no node offered and no pod requested the resource {resource!r} (as "
            f"kube-state-metrics names it) in the {_span(lookback)} before {at.isoformat()}, so "
            f"their demand reads 0; {hint}. Check the class's `resource` under prometheus.classes (a typo?), "
            "unless that resource has really not been used at all"
        )
    return problems


def _span(lookback: timedelta) -> str:
    hours = lookback.total_seconds() / 3600
    return f"{hours / 24:g} days" if hours >= 24 else f"{hours:g} hours"
