"""Demand classes whose Prometheus demand queries read the same demand, refused at load: it would be counted twice
and the pools serving both sized on double. Two readings compare equal when they are the same written query, or
the same selector (in any spacing or order) and resource; two default queries overlap when both read a namespace
(Kueue: a ClusterQueue) each names literally. The settings themselves are in ``config.prometheus``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from config.prometheus import (
    DEFAULT_RESOURCES,
    KUEUE_USAGE_ONLY_LABELS,
    ClassQuerySettings,
    PrometheusSettings,
    label_matchers,
    matcher_parts,
    top_level_alternatives,
)
from models import AcceleratorFamily, ConfigProblem


def shared_demand_problems(
    settings: PrometheusSettings | None, classes: Sequence[tuple[str, str, AcceleratorFamily]]
) -> Iterator[ConfigProblem]:
    """Two demand classes (name, series, family) whose Prometheus demand queries read the same demand: the same
    written query, or the same selector and resource. Their demand would be counted twice and their pools sized on
    double. Classes of the same series and family are left to the rule on series, which names them already."""
    if settings is None:
        return
    first: dict[tuple[object, ...], tuple[str, str, AcceleratorFamily]] = {}
    reported: set[frozenset[str]] = set()
    for name, series, family in classes:
        reading = _demand_reading(settings, name, series, family)
        if reading not in first:
            first[reading] = (name, series, family)
            continue
        other, other_series, other_family = first[reading]
        if (other_series, other_family) == (series, family):
            continue
        override = settings.classes.get(name, ClassQuerySettings())
        key = "query" if override.query else "selector" if override.selector else None
        reported.add(frozenset({other, name}))
        yield ConfigProblem(
            f"prometheus.classes.{name}" + (f".{key}" if key else ""),
            f"demand classes {other!r} and {name!r} read the same demand from Prometheus (the same "
            f"{'query' if override.query else 'selector and resource'}): it would be counted twice and their pools "
            "sized on double; give each class a selector or query of its own",
        )
    yield from _overlap_problems(settings, classes, reported)


def _overlap_problems(
    settings: PrometheusSettings,
    classes: Sequence[tuple[str, str, AcceleratorFamily]],
    reported: set[frozenset[str]],
) -> Iterator[ConfigProblem]:
    """Two classes of one family and resource whose default queries both read a namespace (Kueue: a ClusterQueue)
    named literally in each, by ``=`` or as an alternative of a top-level regex alternation, when the rest of one's
    matchers is among the other's (so the one reads at least the other's pods there). A regex that is not such an
    alternation says nothing: what it matches is not guessed."""
    label = "cluster_queue" if settings.demand_metrics == "kueue" else "namespace"
    what = "ClusterQueue" if label == "cluster_queue" else "namespace"
    scopes = [
        (name, series, family, _literal_scope(settings, name, series, family, label))
        for name, series, family in classes
    ]
    for i, (first, first_series, family, first_scope) in enumerate(scopes):
        for name, series, other_family, scope in scopes[i + 1 :]:
            if first_scope is None or scope is None or (family, first_series) == (other_family, series):
                continue
            if family != other_family or frozenset({first, name}) in reported:
                continue
            (values, others, resource), (first_values, first_others, first_resource) = scope, first_scope
            shared = sorted(values & first_values)
            if not shared or resource != first_resource or not (others <= first_others or first_others <= others):
                continue
            keyed = name if settings.classes.get(name, ClassQuerySettings()).selector else first
            split = (
                " (flavor and cohort matchers do not split it: each class counts all the work queued in the "
                "ClusterQueue, whose pending gauge carries neither; give each class a ClusterQueue of its own)"
                if label == "cluster_queue"
                and (_names_usage_only(settings, name) or _names_usage_only(settings, first))
                else ""
            )
            yield ConfigProblem(
                f"prometheus.classes.{keyed}.selector",
                f"demand classes {first!r} and {name!r} both read the {resource} demand of {what} "
                f"{', '.join(map(repr, shared))}: it would be counted twice and their pools sized on double; leave "
                f"{'it' if len(shared) == 1 else 'them'} out of one class's selector{split}",
            )


def _literal_scope(
    settings: PrometheusSettings, name: str, series: str, family: AcceleratorFamily, label: str
) -> tuple[frozenset[str], frozenset[tuple[str, str, str]], str] | None:
    """The values of ``label`` a class's default demand query surely reads (from its one matcher on the label:
    ``=``, or the literal alternatives of a regex alternation), its other matchers and its resource; None for a
    query of its own, a selector that is not a list of matchers, or none of the label's values named literally.
    Under Kueue the ``flavor`` and ``cohort`` matchers are left out of the other matchers: they narrow the
    reservation only, and each class counts the ClusterQueue's whole pending gauge, which carries neither."""
    override = settings.classes.get(name, ClassQuerySettings())
    if override.query:
        return None
    matchers = [(label, "=", series)] if override.selector is None else None
    if matchers is None:
        found = label_matchers(override.selector or "")
        if found is None:
            return None
        matchers = [matcher_parts(text) for _, text in found]
    on_label = [m for m in matchers if m[0] == label]
    if len(on_label) != 1:
        return None
    _, operator, value = on_label[0]
    if operator == "=":
        values = {value} if value else set()
    elif operator == "=~" and not value.startswith("(?"):
        values = {alt for alt in top_level_alternatives(value) if _LITERAL.fullmatch(alt)}
    else:
        values = set()
    if not values:
        return None
    kueue = label == "cluster_queue"
    return (
        frozenset(values),
        frozenset(m for m in matchers if m[0] != label and not (kueue and m[0] in KUEUE_USAGE_ONLY_LABELS)),
        override.resource or DEFAULT_RESOURCES[family],
    )


def _names_usage_only(settings: PrometheusSettings, name: str) -> bool:
    """Whether a class's selector has a ``flavor`` or ``cohort`` matcher (Kueue's usage-only labels)."""
    selector = settings.classes.get(name, ClassQuerySettings()).selector or ""
    return any(label in KUEUE_USAGE_ONLY_LABELS for label, _ in label_matchers(selector) or [])


# An alternative every character of which matches itself (a '.' matches any character, itself too).
_LITERAL = re.compile(r"[A-Za-z0-9_.-]+")


def _demand_reading(
    settings: PrometheusSettings, name: str, series: str, family: AcceleratorFamily
) -> tuple[object, ...]:
    """What the demand query of a class reads, so that two queries that differ only in spacing or in the order
    of their label matchers compare equal: the written query, or the selector's matchers and the resource."""
    override = settings.classes.get(name, ClassQuerySettings())
    if override.query:
        return ("query", " ".join(override.query.split()))
    resource = override.resource or DEFAULT_RESOURCES[family]
    if override.selector is None:
        label = "cluster_queue" if settings.demand_metrics == "kueue" else "namespace"
        return ("selector", ((label, "=", series),), resource)
    matchers = label_matchers(override.selector)
    if matchers is None:
        return ("selector", " ".join(override.selector.split()), resource)
    return ("selector", tuple(sorted(matcher_parts(text) for _, text in matchers)), resource)
