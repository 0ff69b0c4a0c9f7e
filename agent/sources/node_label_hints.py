"""What an empty answer to a query over kube-state-metrics' node labels most likely means.

Since kube-state-metrics v2.0 (kubernetes/kube-state-metrics PR #1125), ``kube_node_labels`` carries only
``node`` unless the operator names the labels to export with ``--metric-labels-allowlist`` (e.g.
``--metric-labels-allowlist=nodes=[pool,cloud.google.com/gke-nodepool]``); each label then becomes
``label_<name>`` with every character other than letters, digits and ``_`` replaced by ``_``. A capacity query
that selects a pool's nodes by a ``label_*`` matcher answers nothing on that default, however many nodes are up,
and "no sample within its lookback delta" alone does not tell the operator which flag to set.
"""

from __future__ import annotations

import re

_SELECTOR = re.compile(r"kube_node_labels\s*\{([^}]*)\}")
_LABEL = re.compile(r"\blabel_([A-Za-z0-9_]+)\s*(?:=~|!~|!=|=)")
# Sanitized label names whose Kubernetes name is well known (the sanitizing cannot be undone in general).
_KNOWN = {
    "cloud_google_com_gke_nodepool": "cloud.google.com/gke-nodepool",
    "node_kubernetes_io_instance_type": "node.kubernetes.io/instance-type",
    "eks_amazonaws_com_nodegroup": "eks.amazonaws.com/nodegroup",
}


def node_label_names(query: str) -> list[str]:
    """The sanitized node label names (without ``label_``) a query's ``kube_node_labels`` selectors match on."""
    names: list[str] = []
    for selector in _SELECTOR.findall(query):
        names.extend(name for name in _LABEL.findall(selector) if name not in names)
    return names


def node_labels_hint(query: str) -> str:
    """Why a query matching ``kube_node_labels`` on a ``label_*`` answers nothing, and what to do; "" otherwise."""
    names = node_label_names(query)
    if not names:
        return ""
    series = ", ".join(f"label_{name}" for name in names)
    listed = ",".join(_KNOWN.get(name, name) for name in names)
    return (
        f"kube_node_labels may lack {series}: since v2.0 kube-state-metrics exports a node label only when "
        f"--metric-labels-allowlist names it, e.g. --metric-labels-allowlist=nodes=[{listed}] (the label's name "
        "as on the node); check that flag, then that kube-state-metrics is up and reports the pool's nodes"
    )


_POOL_MATCHER = re.compile(r'\b(label_[A-Za-z0-9_]+)\s*(?:=~|=)\s*"(?:[^"\\]|\\.)*"')


def pool_label_fallback(query: str) -> str | None:
    """A fallback for a ``count()`` of a pool's nodes that reads 0 while kube-state-metrics reports nodes that
    carry the pool's label at all (``or on() (0 * count(kube_node_labels{label_<pool label>!=""}))``, the other
    matchers kept), or None when the query selects no node label. Unlike ``count(kube_node_info)``, it answers
    nothing while the label is not exported (no ``--metric-labels-allowlist``), so the pool is unread, not 0."""
    selector = _SELECTOR.search(query)
    if selector is None:
        return None
    matchers, found = _POOL_MATCHER.subn(lambda m: f'{m.group(1)}!=""', selector.group(1))
    if not found:
        return None
    return f"or on() (0 * count(kube_node_labels{{{matchers.strip()}}}))"
