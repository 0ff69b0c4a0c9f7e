"""Which drain holds a unit: the marks of another drain than the one with a given key on the unit's nodes, and why a
drain is therefore not ended (``cancel``) or not stepped (``drain``) under that key.

A drain in progress marks the nodes of its unit with its key (``DRAIN_ANNOTATION``); one that ended leaving the unit
cordoned while the cloud deleted it marks them with ``LEFT_DELETING_ANNOTATION`` instead. A cordoned node carrying
either mark with another key belongs to that other drain: a caller holding the key of a drain that ended since (a
person uncordoned its node, and another drain of it started, by another replica perhaps) would end that drain, or
write its own key, forced flag and start over that drain's marks. A node without a mark (cordoned by a person, or by
nobody) or a schedulable one (the marks of a drain a person ended, taken off when read) holds no other drain. Checked
on the unit's Node objects as Kubernetes has them (``drain_units.read_unit_nodes``), never on a read of the cloud.

A unit holds the drain with a key as long as one of its cordoned nodes carries that key (``held_against``): a slice
whose hosts carry two keys (a step of a leader that lost its lease midway, a release that wrote its key over part of
the slice) is listed under the first key met, and refusing that drain for the other key's marks would leave the slice
cordoned and paid for with no drain going on; the drain with that key continues it (its next step marks every node
with its key) or ends it (every node uncordoned).
"""

from __future__ import annotations

from collections.abc import Sequence

from actuators.drain_mark_names import DRAIN_ANNOTATION, LEFT_DELETING_ANNOTATION
from actuators.drain_units import cordoned
from kube.models import V1Node


def other_drains(nodes: Sequence[V1Node], key: str) -> dict[str, list[str]]:
    """The marks of drains other than the one with ``key`` on the cordoned ``nodes`` (``mark=key`` -> the nodes
    carrying it); empty when none holds them."""
    others: dict[str, list[str]] = {}
    for node in nodes:
        annotations = node.metadata.annotations or {}
        mark = DRAIN_ANNOTATION if annotations.get(DRAIN_ANNOTATION) else LEFT_DELETING_ANNOTATION
        if cordoned(node) and (other := annotations.get(mark)) and other != key:
            others.setdefault(f"{mark}={other}", []).append(node.metadata.name)
    return others


def held_against(nodes: Sequence[V1Node] | None, key: str) -> dict[str, list[str]]:
    """The marks of the other drains (``other_drains``) that keep the drain with ``key`` from being stepped or ended
    on the unit's ``nodes`` (None: not read, nothing is known to hold it): empty when a cordoned node of them carries
    ``key`` as its drain mark, the drain with ``key`` still holding the unit."""
    if nodes is None or any(
        cordoned(node) and (node.metadata.annotations or {}).get(DRAIN_ANNOTATION) == key for node in nodes
    ):
        return {}
    return other_drains(nodes, key)


def not_ended(noun: str, unit: str, key: str, others: dict[str, list[str]]) -> str:
    """Why the drain with ``key`` of ``unit`` is not ended: the marks of the ``others`` on its nodes."""
    return (
        f"not ended: {noun} {unit} carries the mark of another drain ({_marks(others)}), not of the drain with key "
        f"{key}, which no longer holds it; that drain goes on (to end it by hand: kubectl uncordon {_nodes(others)})"
    )


def not_stepped(noun: str, unit: str, key: str, others: dict[str, list[str]]) -> str:
    """Why no step of the drain with ``key`` of ``unit`` is taken: the marks of the ``others`` on its nodes."""
    return (
        f"not drained under key {key}: {noun} {unit} carries the mark of another drain ({_marks(others)}); the drain "
        f"with key {key} ended (the {noun} was drained again since, by another replica perhaps), and nothing was "
        f"written: the other drain goes on, continued by whichever replica leads (to end it by hand: kubectl "
        f"uncordon {_nodes(others)})"
    )


def _marks(others: dict[str, list[str]]) -> str:
    return "; ".join(f"{mark} on {', '.join(names)}" for mark, names in others.items())


def _nodes(others: dict[str, list[str]]) -> str:
    return " ".join(sorted({name for names in others.values() for name in names}))
