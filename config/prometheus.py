"""Settings for reading demand and accelerator activity from Prometheus.

Which exporter the default queries are written for (``demand_metrics``) and in which cluster they read it
(``cluster_selector``, for a Prometheus view holding several clusters), how to reach the server (URL, bearer
token file, CA file, timeout, bounded retries), when a series counts as stale, and per demand class or pool
overrides of the default queries (``agent.sources.prometheus_queries`` builds them).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from datetime import timedelta
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    field_validator,
    model_validator,
)

from config.durations import at_least_one_second, format_duration, parse_duration
from config.fields import NumbersOnly
from models import AcceleratorFamily, ConfigProblem

_Duration = Annotated[
    timedelta,
    BeforeValidator(parse_duration),
    PlainSerializer(format_duration, return_type=str),
]

# The accelerator resource a class's default query counts, by its family, as Kubernetes (and Kueue) spell it.
DEFAULT_RESOURCES = {AcceleratorFamily.GPU: "nvidia.com/gpu", AcceleratorFamily.TPU: "google.com/tpu"}

# Prometheus refuses a range query above 11,000 points per series; stay clearly below it.
PROMETHEUS_MAX_POINTS = 11_000


class _Section(NumbersOnly):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class ClassQuerySettings(_Section):
    """How one demand class is read. ``query`` replaces the default query entirely (it must return one
    series); otherwise ``selector`` (PromQL label matchers) and ``resource`` adjust the default query of
    ``demand_metrics``. With ``kube-state-metrics`` the selector matches the pods' requests (e.g.
    ``namespace="team-a"``) and may not name Kueue's labels. With ``kueue`` it must name the ClusterQueue(s) with a
    ``cluster_queue`` matcher (e.g. ``cluster_queue="team-a", flavor="a100"``), and ``flavor`` / ``cohort``
    matchers narrow the usage term only: the pending gauge carries neither (see
    ``agent.sources.prometheus_queries``)."""

    query: str | None = Field(default=None, min_length=1)
    selector: str | None = Field(default=None, min_length=1)
    resource: str | None = Field(default=None, min_length=1)


class PoolQuerySettings(_Section):
    """``capacity_query`` (one series, in the pool's units: nodes or slices) is what the pool really ran;
    ``simulate --source prometheus`` replays it as the ``actual`` row."""

    capacity_query: str | None = Field(default=None, min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _no_longer_read(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key in _NO_LONGER_READ:
                if key in data:
                    raise ValueError(
                        f"{key} is no longer read: idle nodes are found from the pods running on them, not from "
                        "DCGM activity; remove the key"
                    )
        return data


_NO_LONGER_READ = ("activity_query", "node_selector")


class PrometheusSettings(_Section):
    # A host with "$", "{" or "}" is an environment variable written in the file (nothing expands it): refused at
    # load rather than at the first connection.
    url: str = Field(pattern=r"^https?://[^\s/${}]+(/\S*)?$")
    bearer_token_file: str | None = None
    ca_file: str | None = None
    # At least a second, as every other request timeout: 1ms failed every query before it connected, and a query of
    # days of history is not answered within a fraction of a second.
    timeout: Annotated[_Duration, AfterValidator(at_least_one_second)] = timedelta(seconds=30)
    retries: int = Field(default=2, ge=0, le=10)
    retry_backoff_s: float = Field(default=0.5, ge=0.0, le=30.0)
    max_staleness: _Duration = timedelta(minutes=15)
    max_points_per_query: int = Field(default=10_000, ge=2, le=PROMETHEUS_MAX_POINTS - 1)
    demand_metrics: Literal["kueue", "kube-state-metrics"] = "kube-state-metrics"
    cluster_selector: str | None = Field(default=None, min_length=1)
    classes: dict[str, ClassQuerySettings] = Field(default_factory=dict)
    pools: dict[str, PoolQuerySettings] = Field(default_factory=dict)

    @field_validator("max_staleness")
    @classmethod
    def _positive_staleness(cls, value: timedelta) -> timedelta:
        if value <= timedelta(0):
            raise ValueError("max_staleness must be positive, e.g. '15m'")
        return value

    @field_validator("cluster_selector")
    @classmethod
    def _cluster_matchers(cls, value: str | None) -> str | None:
        if value is None:
            return value
        matchers = label_matchers(value)
        if not matchers:
            raise ValueError(
                f"{value!r} is not a list of PromQL label matchers; name the cluster as Prometheus labels its series, "
                'e.g. \'cluster="prod"\' (Google Managed Prometheus: \'cluster="prod", location="europe-west4"\')'
            )
        read = sorted({label for label, _ in matchers} & DEFAULT_QUERY_LABELS)
        if read:
            raise ValueError(
                f"the default queries read the label(s) {', '.join(read)} themselves; cluster_selector names the "
                "cluster only (e.g. 'cluster=\"prod\"'): narrow a class with prometheus.classes.<name>.selector"
            )
        return value


def prometheus_problems(
    settings: PrometheusSettings | None, class_names: Iterable[str], pool_ids: Iterable[str]
) -> Iterator[ConfigProblem]:
    """Overrides must name demand classes and pools that exist, and a Kueue selector must be one the default
    query can split between its usage and pending terms."""
    if settings is None:
        return
    for section, known in (("classes", set(class_names)), ("pools", set(pool_ids))):
        for name in getattr(settings, section):
            if name not in known:
                listed = ", ".join(sorted(known)) or "none"
                yield ConfigProblem(f"prometheus.{section}.{name}", f"unknown name {name!r} (known: {listed})")
    for name, override in settings.classes.items():
        if override.selector and not override.query:
            if settings.demand_metrics == "kueue":
                reason = kueue_selector_problem(override.selector)
            else:
                reason = kube_state_metrics_selector_problem(override.selector)
            if reason:
                yield ConfigProblem(f"prometheus.classes.{name}.selector", reason)


def zero_fallback_queries(settings: PrometheusSettings | None) -> list[tuple[str, str]]:
    """Each configured query (key path, query) with a constant zero fallback, ``or vector(0)`` (``or on()
    vector(0)``, ``vector(0) or ...``, any spacing or case): it answers 0 when the series it reads are missing, an
    exporter down or a metric renamed, so the agent cannot tell missing data from none."""
    if settings is None:
        return []
    written = [(f"prometheus.classes.{name}.query", c.query) for name, c in sorted(settings.classes.items())]
    written += [
        (f"prometheus.pools.{pool}.capacity_query", p.capacity_query) for pool, p in sorted(settings.pools.items())
    ]
    return [(key, query) for key, query in written if query is not None and has_zero_fallback(query)]


def has_zero_fallback(query: str) -> bool:
    """Whether ``query`` has an operand of ``or`` that is ``vector(<zero>)``, read after its string literals and
    comments are blanked (PromQL keywords are case-insensitive: prometheus/prometheus, promql/parser/lex.go)."""
    text = _without_literals(query)
    for constant in _VECTOR_CALL.finditer(text):
        if not _is_zero(constant.group(1)):
            continue
        before, after = text[: constant.start()], text[constant.end() :]
        if _OR_BEFORE.search(before) or _OR_AFTER.match(after):
            return True
    return False


def _without_literals(query: str) -> str:
    """``query`` with each string literal emptied and each ``#`` comment removed, so that neither is read as PromQL."""
    out, i = [], 0
    while i < len(query):
        char = query[i]
        if char in "\"'`":
            end = i + 1
            while end < len(query) and query[end] != char:
                end += 2 if query[end] == "\\" and char != "`" else 1
            out.append(char * 2)
            i = end + 1
        elif char == "#":
            newline = query.find("\n", i)
            i = len(query) if newline < 0 else newline
        else:
            out.append(char)
            i += 1
    return "".join(out)


def _is_zero(literal: str) -> bool:
    try:
        return float.fromhex(literal) == 0.0 if literal.lower().lstrip("+-").startswith("0x") else float(literal) == 0.0
    except ValueError:
        return False


# vector(<number>), the argument a number literal (decimal, exponent or hexadecimal); its value is checked apart.
_VECTOR_CALL = re.compile(r"(?<![\w:])vector\s*\(\s*([+-]?[0-9a-fA-FxX.]+(?:[eE][+-]?[0-9]+)?)\s*\)")
# ``or``, with an optional ``on(...)`` / ``ignoring(...)`` matching, then opening brackets, right before the call.
_OR_BEFORE = re.compile(r"(?i)(?<![\w:])or\s*(?:(?:on|ignoring)\s*\([^()]*\)\s*)?[\s(]*$")
# closing brackets, then ``or``, right after the call (the constant as the left operand).
_OR_AFTER = re.compile(r"(?i)[\s)]*or(?![\w:])")


def matcher_parts(text: str) -> tuple[str, str, str]:
    """A matcher as ``label_matchers`` gives it, split into label, operator and value (PromQL's escapes undone;
    a back-quoted string has none)."""
    match = _MATCHER.match(text)
    if match is None:
        return (text, "", "")
    label, operator, quoted = match.groups()
    value = quoted[1:-1] if quoted.startswith("`") else re.sub(r"\\(.)", r"\1", quoted[1:-1])
    return (label, operator, value)


# One PromQL label matcher: name, operator, and a double-, single- or back-quoted string (PromQL "String literals").
_MATCHER = re.compile(
    r"""\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)\s*(?:,|$)"""
)

# Labels the default queries select, join or group on themselves (kube-state-metrics: pod and init container
# requests, init containers' restart policy, pod phases, namespaces and nodes; Kueue: the ClusterQueue gauges). A
# cluster selector naming one of them would change what a class counts rather than which cluster it is counted in.
DEFAULT_QUERY_LABELS = frozenset(
    {"namespace", "pod", "container", "resource", "unit", "phase", "node", "restart_policy", "cluster_queue",
     "flavor", "cohort", "replica_role", "status"}
)  # fmt: skip

# Labels of kueue_cluster_queue_resource_reservation (and _usage) that kueue_cluster_queue_resource_pending does not
# carry: reservation is reported per (cohort, cluster_queue, flavor, resource), pending per (cluster_queue,
# resource) only, since a pending workload has no flavor yet (kubernetes-sigs/kueue pkg/metrics/metrics.go; its
# test helper ExpectCQResourcePendingMetric takes the label values cluster_queue, resource, replica_role).
KUEUE_USAGE_ONLY_LABELS = frozenset({"flavor", "cohort"})

# Labels of Kueue's ClusterQueue gauges that no kube-state-metrics pod series carries (its pod metrics are labelled
# namespace, pod, uid, container, node, resource, unit: kubernetes/kube-state-metrics docs/metrics/workload/
# pod-metrics.md): a kube-state-metrics selector naming one matches nothing.
KUEUE_ONLY_LABELS = frozenset({"cluster_queue", *KUEUE_USAGE_ONLY_LABELS})


def label_matchers(selector: str) -> list[tuple[str, str]] | None:
    """``selector`` split into its matchers as (label name, matcher text); None when it is not a plain
    comma-separated list of PromQL label matchers."""
    matchers, position, text = [], 0, selector.strip()
    while position < len(text):
        match = _MATCHER.match(text, position)
        if match is None or match.end() == position:
            return None
        matchers.append((match.group(1), f"{match.group(1)}{match.group(2)}{match.group(3)}"))
        position = match.end()
    return matchers


def top_level_alternatives(regex: str) -> list[str]:
    """``regex`` split at each ``|`` outside a group, a character class or an escape."""
    parts, current, depth, in_class, i = [], [], 0, False, 0
    while i < len(regex):
        char = regex[i]
        if char == "\\":
            current.append(regex[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = char != "]" or not current or current[-1] == "["
        elif char == "[":
            in_class = True
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "|" and depth == 0:
            parts.append("".join(current))
            current = []
            i += 1
            continue
        current.append(char)
        i += 1
    parts.append("".join(current))
    return parts


def kube_state_metrics_selector_problem(selector: str) -> str | None:
    """Why ``selector`` cannot narrow the default kube-state-metrics query, or None when it can: a matcher on a
    label of Kueue's gauges, which no pod's requests carry, so the query would find no pods and read 0 while the
    work waits; or a ``node`` matcher that rejects an empty node, which drops every pod not yet scheduled."""
    matchers = label_matchers(selector) or []
    labels = {label for label, _ in matchers}
    kueue = sorted(labels & KUEUE_ONLY_LABELS)
    if kueue:
        return (
            f"{', '.join(kueue)} {'is a label' if len(kueue) == 1 else 'are labels'} of Kueue's ClusterQueue gauges, "
            "which kube_pod_container_resource_requests never carries: with demand_metrics: kube-state-metrics the "
            "class would read 0 while its jobs wait. Select pods by namespace (e.g. 'namespace=\"research\"'), or "
            "set demand_metrics: kueue"
        )
    if any(label == "node" and not _matches_empty(text) for label, text in matchers):
        return (
            "kube-state-metrics sets a pod's node label from spec.nodeName, which a pod not yet scheduled does not "
            "have: a node matcher that rejects an empty node drops every pending pod, so the class would read only "
            "its running work while its queue waits for capacity. Select pods by namespace, pod or container (e.g. "
            "'namespace=\"research\"'), leave nodes out with a matcher that keeps an empty node (e.g. "
            "'node!~\"gke-cpu-.*\"'), or write the class's `query` on a label a pod carries from its creation (a "
            "pod label, exported by kube_pod_labels when kube-state-metrics' --metric-labels-allowlist names it)"
        )
    return None


def _matches_empty(matcher: str) -> bool:
    """Whether ``matcher`` selects a series without its label (PromQL reads an absent label as ""): ``node!="x"``,
    ``node!~"gke-cpu-.*"`` and ``node=~".*"`` keep the pending pods, ``node="x"`` and ``node!=""`` drop them. A
    regex Python cannot compile is left to Prometheus, which tells it at the first query."""
    _, operator, value = matcher_parts(matcher)
    if operator in {"=", "!="}:
        return (value == "") == (operator == "=")
    try:
        full = re.fullmatch(value, "") is not None  # PromQL anchors its regexes at both ends
    except re.error:
        return True
    return full == (operator == "=~")


def kueue_selector_problem(selector: str) -> str | None:
    """Why ``selector`` cannot narrow the default Kueue query, or None when it can."""
    matchers = label_matchers(selector)
    if matchers is None:
        return (
            f'{selector!r} is not a list of PromQL label matchers (e.g. \'cluster_queue="team-a", flavor="a100"\'); '
            "write the whole query under `query` instead"
        )
    if not any(label == "cluster_queue" for label, _ in matchers):
        return (
            "a Kueue selector must name the ClusterQueue(s) with a cluster_queue matcher: "
            "kueue_cluster_queue_resource_pending is reported per cluster_queue and resource only (no flavor or "
            "cohort), so without it queued work of every ClusterQueue would be counted"
        )
    return None
