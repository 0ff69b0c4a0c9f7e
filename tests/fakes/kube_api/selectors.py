"""Label selectors (strings and LabelSelector objects) and field selectors, as the fake Kubernetes API server
matches them in lists and PodDisruptionBudgets."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from tests.fakes.kube_api.store import ApiError, Obj

_REQUIREMENT = re.compile(r"\s*(!?)([\w./-]+)\s*(?:(==|=|!=)\s*([\w./-]*)|\s+(in|notin)\s*\(([^)]*)\))?\s*(?:,|$)")


def label_selector_matches(selector: str, labels: dict[str, str]) -> bool:
    """A label selector string (``a=b,c!=d,e in (x,y),f notin (z),g,!h``) against a label map."""
    pos = 0
    while pos < len(selector):
        req = _REQUIREMENT.match(selector, pos)
        if req is None or req.end() == pos:
            raise ApiError(400, "BadRequest", f"unable to parse requirement: {selector[pos:]!r}")
        pos = req.end()
        negate, key, op, value, set_op, values = req.groups()
        if op:
            if (labels.get(key) == value) == (op == "!="):
                return False
        elif set_op:
            choices = {v.strip() for v in values.split(",")}
            if (labels.get(key) in choices) != (set_op == "in"):
                return False
        elif (key in labels) == bool(negate):
            return False
    return True


def selector_object_matches(selector: Obj, labels: dict[str, str]) -> bool:
    """A LabelSelector object (matchLabels, matchExpressions) against a label map."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], set(expr.get("values") or [])
        ok = {
            "In": key in labels and labels[key] in values,
            "NotIn": labels.get(key) not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[op]
        if not ok:
            return False
    return True


def field_selector_matches(selector: str, obj: Obj, value_of: Callable[[Obj, str], str] | None = None) -> bool:
    for term in filter(None, (t.strip() for t in selector.split(","))):
        path, op, value = re.split(r"(!=|==|=)", term, maxsplit=1)
        actual: Any = obj
        for part in path.split("."):
            actual = actual.get(part) if isinstance(actual, dict) else None
        if value_of is not None:
            actual = value_of(obj, path)
        if (str(actual if actual is not None else "") == value) == (op == "!="):
            return False
    return True
