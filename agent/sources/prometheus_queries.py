"""Default PromQL per demand class, for the exporters most clusters already run.

Demand (accelerator units requested by running + queued work), one series per class:

- ``kueue``: reserved quota plus pending requests of a ClusterQueue (Kueue v0.18.7 or later, with
  ``metrics.enableClusterQueueResources: true``: the pending gauge exists from v0.18.0, but v0.18.5 fixed it
  staying inflated (kubernetes-sigs/kueue#13758) and v0.18.7 stale after a LocalQueue moves to another ClusterQueue
  (#13885)); the class's series name is the ClusterQueue by default. The
  reservation (``kueue_cluster_queue_resource_reservation``, kueue pkg/metrics: "total resource reservation
  within all the flavors") is the admitted usage plus the quota of workloads that hold it while they wait on an
  admission check (a ProvisioningRequest, GKE's Dynamic Workload Scheduler): work that is neither admitted nor
  pending, and precisely the work waiting for capacity. ``kueue_cluster_queue_resource_usage`` counts admitted
  workloads only. The pending work counts only up to what the ClusterQueue could still admit (its quota and
  borrowing limit less its reservation, nothing while it is not active): Kueue admits against quota, so more
  nodes let none of the rest in (see ``kueue_demand_query``).
- ``kube-state-metrics``: accelerator requests of pods that are Pending or Running; the class's series name is
  the namespace by default.

Every default is written so that "no data" stays empty (and so unavailable) rather than reading as zero: a
sum over no pods is zero only while kube-state-metrics itself still reports the class's namespace (or, for a
selector that names none, nodes), and the Kueue query needs the reservation, the pending gauge, the nominal quota
(with the borrowing limit in a cohort) and the ClusterQueue's status (Kueue reports the first two at 0 for a
configured resource without work, so a real zero stays a zero). A selector over several ClusterQueues or
namespaces answers only while every one of them is reported, and kube-state-metrics only while every shard of it
is (where its telemetry is scraped): a part missing would otherwise add nothing while the rest still answers.

Several clusters in one Prometheus view (Google Managed Prometheus, Thanos, Mimir: series told apart by a
``cluster`` label or the like) need ``prometheus.cluster_selector``: its matchers go on every metric the default
queries read, the pod phases they join and the namespace or node check that lets "no pods" read as 0, so that
neither another cluster's demand nor another cluster's exporter can stand in for this one's.

Both are written for exporters that run, or are scraped, more than once. Every replica of a highly available
Kueue exports the ClusterQueue gauges (kubernetes-sigs/kueue#6772); recent releases label them ``replica_role``
leader / follower / standalone (v0.16 does, kubernetes-sigs/kueue#9288), older ones do not label them at all. Two
kube-state-metrics replicas, or two scrape jobs, give each pod's requests twice. The queries drop follower
replicas with ``replica_role!="follower"`` (which also matches series without the label) and keep one value per
identifying label set (``max by``) before summing. Should a Kueue leader not export a gauge (kueue#9288 reports
it for the nominal quota), the class reads as unavailable, never as zero; a ``replica_role`` matcher in the
class's selector replaces the default one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from config.prometheus import (
    DEFAULT_RESOURCES,
    KUEUE_USAGE_ONLY_LABELS,
    ClassQuerySettings,
    PrometheusSettings,
    label_matchers,
    matcher_parts,
    top_level_alternatives,
)
from models import DemandClass

# Extended resource names as Kubernetes (and Kueue) spell them. kube-state-metrics writes the same name into its
# ``resource`` label sanitized, every character outside [a-zA-Z0-9_] replaced by "_" (kubernetes/kube-state-metrics
# internal/store/pod.go: sanitizeLabelName(string(resourceName))), so ``nvidia.com/gpu`` reads ``nvidia_com_gpu``.
KUEUE_RESOURCES = DEFAULT_RESOURCES  # defined with the settings, whose rules compare the classes' queries

# Matches series without the label too, so a Kueue that does not label its replicas is read the same way.
NOT_A_FOLLOWER = 'replica_role!="follower"'

KUEUE_PENDING_HINT = (
    "the default Kueue query needs kueue_cluster_queue_resource_reservation, kueue_cluster_queue_resource_pending, "
    "kueue_cluster_queue_nominal_quota (and, in a cohort, kueue_cluster_queue_borrowing_limit) for this ClusterQueue "
    "and resource, and kueue_cluster_queue_status, for every ClusterQueue (and flavor) the selector matches; the "
    "pending gauge exists from Kueue v0.18.0 on, with "
    "metrics.enableClusterQueueResources: true, and is right from v0.18.7 on. On an older Kueue, upgrade it, use "
    "demand_metrics: kube-state-metrics, or write the class's query"
)

KSM_NAMESPACE_HINT = (
    "kube-state-metrics reports no namespace the class's selector names (kube_namespace_created), or not every one "
    'of a regex alternation such as namespace=~"a|b": check the namespace in the class\'s `series` (or each in '
    "its `selector`) for a typo; kube-state-metrics itself must be up and export namespaces (it does unless its "
    "--resources leaves them out), and when it is sharded (--total-shards) every shard must be up "
    "(kube_state_metrics_shard_ordinal against kube_state_metrics_total_shards); with prometheus.cluster_selector "
    "set, check that it names the cluster as Prometheus labels its series"
)


def ksm_resource(resource: str) -> str:
    """A resource name as kube-state-metrics writes it into its ``resource`` label."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", resource)


def quote(value: str) -> str:
    """A PromQL string literal for a label value."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def kueue_demand_query(selector: str, resource: str, cluster: Sequence[str] = ()) -> str:
    """Quota reserved in the selected ClusterQueues' flavors plus what is pending in them, as much of it as each
    ClusterQueue could still admit. ``flavor`` and ``cohort`` matchers apply to the reservation and the quota
    only: pending work has no flavor yet, and the pending gauge is labelled by cluster_queue and resource alone (see
    ``config.prometheus.KUEUE_USAGE_ONLY_LABELS``). ``cluster`` (matcher texts) applies to every gauge.

    Kueue admits against quota, not nodes, and its pending gauge counts every pending workload, inadmissible ones
    included (kubernetes-sigs/kueue pkg/cache/queue/pending_workloads.go: the active heap and the inadmissible
    list), so work waiting for its ClusterQueue's quota would buy nodes it cannot use. Each ClusterQueue's pending
    work counts up to its room: per flavor, the nominal quota, plus the borrowing limit when it is in a cohort
    (``+Inf`` when unset, from Kueue v0.18.1 on), minus the reservation, never below 0; and none while the
    ClusterQueue is not active (stopped, or missing a flavor or an admission check: it admits nothing). The quota
    and status gauges are read from every replica (the highest value): they follow the ClusterQueue's spec, which
    followers see too, and a leader has been seen without the nominal quota (kubernetes-sigs/kueue#9288). The
    cohort's own free quota is not read (a Cohort's quota and its parents' are in no ClusterQueue gauge), so
    unlimited borrowing leaves the pending work uncapped."""
    matchers = label_matchers(selector)
    if matchers is None:  # refused at validation; a selector given in code still must not widen the query
        raise ValueError(f"not a list of PromQL label matchers: {selector!r}")
    if not any(label == "replica_role" for label, _ in matchers):
        matchers.append(("replica_role", NOT_A_FOLLOWER))
    resource_matcher = f"resource={quote(resource)}"
    per_flavor = [text for _, text in matchers]
    per_queue = [text for label, text in matchers if label not in KUEUE_USAGE_ONLY_LABELS]
    spec = [text for label, text in matchers if label != "replica_role"]
    usage = _selector(resource_matcher, *per_flavor, *cluster)
    pending = _selector(resource_matcher, *per_queue, *cluster)
    quota = _selector(resource_matcher, *spec, *cluster)
    status = _selector(*(t for label, t in matchers if label not in {*KUEUE_USAGE_ONLY_LABELS, "replica_role"}))
    flavor, queue = "cluster_queue, flavor, resource", "cluster_queue, resource"
    reserved = f"max by ({flavor}) (kueue_cluster_queue_resource_reservation{usage})"
    alone, in_cohort = _with(quota, 'cohort=""'), _with(quota, 'cohort!=""')
    limit = (
        f"(max by ({flavor}) (kueue_cluster_queue_nominal_quota{alone})"
        f" or max by ({flavor}) (kueue_cluster_queue_nominal_quota{in_cohort})"
        f" + on({flavor}) max by ({flavor}) (kueue_cluster_queue_borrowing_limit{in_cohort}))"
    )
    room = f"sum by ({queue}) (clamp_min({limit} - on({flavor}) {reserved}, 0))"
    waiting = f"max by ({queue}) (kueue_cluster_queue_resource_pending{pending})"
    admissible = f"({waiting} - on({queue}) clamp_min({waiting} - on({queue}) {room}, 0))"  # min(waiting, room)
    active_status = _with(status, *cluster, 'status="active"')
    active = f"max by (cluster_queue) (kueue_cluster_queue_status{active_status})"
    counted = f"{admissible} * on(cluster_queue) group_left() {active}"
    # A ClusterQueue missing a gauge drops out of the joins above while the others still answer, and a flavor
    # missing its reservation or quota drops out of the room; the guard empties the answer instead. Every
    # (ClusterQueue, flavor) the reservation or the quota names must have both (and, in a cohort, its borrowing
    # limit), and its ClusterQueue its pending work and its status: each ClusterQueue selected is then counted.
    named = f"({reserved} or max by ({flavor}) (kueue_cluster_queue_nominal_quota{quota}))"
    complete = f"({limit} - on({flavor}) {reserved}) and on(cluster_queue) {waiting} and on(cluster_queue) {active}"
    return f"(sum({reserved}) + on() sum({counted})) and on() (count({named}) == count({complete}))"


def _selector(*matchers: str) -> str:
    return f"{{{', '.join(matchers)}}}"


def _with(selector: str, *matchers: str) -> str:
    """``selector`` (as ``_selector`` writes it) with more matchers."""
    inner = selector[1:-1]
    return _selector(*([inner] if inner else []), *matchers)


def kube_state_metrics_demand_query(selector: str, resource: str, cluster: Sequence[str] = ()) -> str:
    """Requests of the selected pods that are Pending or Running. ``cluster`` (matcher texts) applies to every
    metric read: the requests, the pod phases they are joined with and the namespaces or nodes that let no pods
    read as 0.

    The answer is empty, so the class unavailable, while part of what the selector names is not reported: a
    namespace of a regex alternation (``namespace=~"research|research-batch"``) that kube-state-metrics does not
    report (spelled wrong, deleted) would otherwise add nothing while the others answer; and a sharded
    kube-state-metrics (``--total-shards``) with a shard down reports only part of the pods. The shards are
    checked on kube-state-metrics' own telemetry (``kube_state_metrics_total_shards`` and
    ``kube_state_metrics_shard_ordinal``, kubernetes/kube-state-metrics README "Kube-state-metrics self
    metrics"), and only where it is scraped: without it a shard down cannot be told from fewer pods."""
    phase = ", ".join(['phase=~"Pending|Running"', *cluster])
    demand = (
        f"sum({pod_effective_requests(selector, resource, cluster)}"
        " * on(namespace, pod) group_left()"
        f" max by (namespace, pod) (kube_pod_status_phase{{{phase}}} == 1))"
        f" or on() (0 * count({kube_state_metrics_known(selector, cluster)}))"
    )
    each_named = "".join(
        f" and on() count(kube_namespace_created{_selector(f'namespace=~{quote(name)}', *cluster)})"
        for name in named_namespaces(selector)
    )
    scope = _selector(*cluster) if cluster else ""
    shards_missing = (
        f"max(kube_state_metrics_total_shards{scope})"
        f" > count(count by (shard_ordinal) (kube_state_metrics_shard_ordinal{scope}))"
    )
    return f"({demand}){each_named} unless on() ({shards_missing})"


def pod_effective_requests(selector: str, resource: str, cluster: Sequence[str] = ()) -> str:
    """Per selected pod (``namespace``, ``pod``), the request for ``resource`` the scheduler reserves for it, counting
    its init containers.

    Kubernetes ("Resource Management for Pods and Containers", "Init Containers", "Sidecar Containers"): init
    containers run one at a time, so a pod's effective request is the larger of its highest init container
    request and the sum of its app containers' requests; a sidecar (an init container with ``restartPolicy:
    Always``) keeps running, so its request adds to both. kube-state-metrics gives init containers' requests in
    ``kube_pod_init_container_resource_requests`` (the labels of ``kube_pod_container_resource_requests``), with
    nothing telling a sidecar from a run-once container; that is only in ``kube_pod_init_container_info``'s
    ``restart_policy`` label (``Always`` for a sidecar, empty otherwise; kubernetes/kube-state-metrics#2240), and
    that series exists only once the kubelet reports the container's status, so never for a pod not yet
    scheduled, the demand this agent buys for. An init container is therefore a sidecar (added to the sum) only
    when an info series says ``restart_policy="Always"``, from any kube-state-metrics replica (during a rolling
    upgrade an older replica writes the same series without the label); every other one is taken for run-once
    (in the max), Kubernetes' default when ``restartPolicy`` is unset: a pending pod's GPU health check asking
    the app container's 8 GPUs reads 8, as the scheduler reserves, where counting it beside the app container
    would buy a second node. The answer is ``sidecars + max(highest run-once init request, sum of app requests)``:
    the rule itself when the sidecars come before the largest run-once container, more otherwise. It is less
    than the rule for a sidecar whose pod has not started (read as run-once until its status is reported) and
    with a kube-state-metrics older than the ``restart_policy`` label."""
    requests = ", ".join([f"resource={quote(ksm_resource(resource))}", selector, *cluster])
    shared = [text for label, text in label_matchers(selector) or [] if label in {"namespace", "pod"}]
    each = "max by (namespace, pod, container, resource)"
    app = f"{each} (kube_pod_container_resource_requests{{{requests}}})"
    init = f"{each} (kube_pod_init_container_resource_requests{{{requests}}})"
    sidecar_info = _selector('restart_policy="Always"', *shared, *cluster)
    sidecars = f"max by (namespace, pod, container) (kube_pod_init_container_info{sidecar_info})"
    run_once = f"({init} unless on(namespace, pod, container) {sidecars})"
    in_max = f"max by (namespace, pod) (sum by (namespace, pod) ({app}) or {run_once})"
    in_sum = f"({init} and on(namespace, pod, container) {sidecars})"
    return f"sum by (namespace, pod) ({in_max} or {in_sum})"


def named_namespaces(selector: str) -> list[str]:
    """The alternatives of each ``namespace=~`` regex of ``selector`` that is an alternation at its top level
    (``"research|research-batch"``, ``"team-a|team-b-.*"``), each of which must match a namespace; none for a
    regex without a top-level ``|`` (its one check is ``kube_state_metrics_known``'s) or with flags."""
    names: list[str] = []
    for _, text in label_matchers(selector) or []:
        label_name, operator, value = matcher_parts(text)
        if label_name != "namespace" or operator != "=~" or value.startswith("(?"):
            continue
        alternatives = [alt for alt in top_level_alternatives(value) if alt]
        if len(alternatives) > 1:
            names.extend(alternatives)
    return names


def kube_state_metrics_known(selector: str, cluster: Sequence[str] = ()) -> str:
    """What kube-state-metrics must report for "no accelerator pods" to read as 0: the namespaces the selector
    names (``kube_namespace_created``, one series per namespace, STABLE in kube-state-metrics'
    docs/metrics/cluster/namespace-metrics.md), so that a namespace spelled wrong, or deleted, is unavailable
    rather than a demand of 0; for a selector without a ``namespace`` matcher, any node (``kube_node_info``). Either
    is read in the cluster ``cluster`` names, so that another cluster's kube-state-metrics cannot stand in for this
    one's while it is down."""
    matchers = label_matchers(selector) or []
    namespaces = [text for label, text in matchers if label == "namespace"]
    metric = "kube_namespace_created" if namespaces else "kube_node_info"
    scope = [*namespaces, *cluster]
    return f"{metric}{{{', '.join(scope)}}}" if scope else metric


def cluster_matchers(settings: PrometheusSettings) -> list[str]:
    """The matcher texts of ``prometheus.cluster_selector`` (none when it is unset)."""
    if settings.cluster_selector is None:
        return []
    matchers = label_matchers(settings.cluster_selector)
    if matchers is None:  # refused at validation
        raise ValueError(f"not a list of PromQL label matchers: {settings.cluster_selector!r}")
    return [text for _, text in matchers]


def demand_query(demand_class: DemandClass, settings: PrometheusSettings) -> str:
    """The PromQL that measures one demand class: the configured override, else the exporter's default."""
    override = settings.classes.get(demand_class.name, ClassQuerySettings())
    if override.query:
        return override.query
    resource = override.resource or KUEUE_RESOURCES[demand_class.family]
    cluster = cluster_matchers(settings)
    if settings.demand_metrics == "kueue":
        selector = override.selector or f"cluster_queue={quote(demand_class.series_id)}"
        return kueue_demand_query(selector, resource, cluster)
    selector = override.selector or f"namespace={quote(demand_class.series_id)}"
    return kube_state_metrics_demand_query(selector, resource, cluster)


def demand_queries(classes: Sequence[DemandClass], settings: PrometheusSettings) -> dict[str, str]:
    return {c.name: demand_query(c, settings) for c in classes}


def no_data_hint(query: str) -> str:
    """What an empty answer to a default query most likely means, for the operator reading why a class is held."""
    if "kueue_cluster_queue_resource_pending" in query:
        return KUEUE_PENDING_HINT
    if "kube_namespace_created{" in query:
        return KSM_NAMESPACE_HINT
    return ""
