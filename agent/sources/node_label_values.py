"""Which values the node labels a capacity query selects on take in Prometheus, to tell a person whose query reads
0 throughout what it could have named. A query written as the docs show it (``count(kube_node_labels{label_<l>=
"<pool>"}) or on() (0 * count(kube_node_labels{label_<l>!=""}))``) reads 0, not nothing, when ``<pool>`` names no
node: a misspelt pool name looks like a pool that never ran a node. The values listed are those of
``kube_node_labels`` over the range read (``last_over_time``), so a pool that ran for an hour of it is listed.
"""

from __future__ import annotations

from datetime import datetime

from agent.sources.node_label_hints import node_label_names
from agent.sources.prometheus import PrometheusSource
from models import MetricsUnavailable

MAX_VALUES = 20  # enough to spot the one meant; a cluster with more pools is told the first ones, sorted


def node_label_values(source: PrometheusSource, query: str, start: datetime, end: datetime) -> dict[str, list[str]]:
    """For each ``label_<name>`` the query's ``kube_node_labels`` selectors match on: the values it took on any node
    in [start, end), sorted, at most ``MAX_VALUES``. A label Prometheus could not be asked about is left out: this
    is a hint, never a reason to fail the read."""
    seconds = max(1, int((end - start).total_seconds()))
    found: dict[str, list[str]] = {}
    for name in node_label_names(query):
        label = f"label_{name}"
        listing = f'count by ({label}) (last_over_time(kube_node_labels{{{label}!=""}}[{seconds}s]))'
        try:
            rows = source.instant(f"values of {label}", listing, end)
        except MetricsUnavailable:
            continue
        found[label] = sorted({labels[label] for labels, _ in rows if labels.get(label)})[:MAX_VALUES]
    return found
