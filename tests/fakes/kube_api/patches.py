"""How a write changes an object in the fake Kubernetes API server: JSON merge patches (strategic-merge patches
applied as merge patches, lists replaced), JSON patches, and the MicroTime layout a Lease's times must keep."""

from __future__ import annotations

import copy
import re
from typing import Any

from tests.fakes.kube_api.store import ApiError, Obj


def _apply_patch(current: Obj, patch: Any, content_type: str) -> Obj:
    if content_type.startswith("application/json-patch+json"):
        return _json_patch(copy.deepcopy(current), patch)
    if content_type.split(";", maxsplit=1)[0] in (
        "application/merge-patch+json",
        "application/strategic-merge-patch+json",
    ):
        merged: Obj = _merge(copy.deepcopy(current), patch)
        return merged
    raise ApiError(415, "UnsupportedMediaType", f"the body of the request was in an unknown format: {content_type}")


def _merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict) or not isinstance(target, dict):
        return copy.deepcopy(patch)
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = _merge(target.get(key), value)
    return target


def _json_patch(doc: Obj, ops: list[Obj]) -> Obj:
    for op in ops:
        *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].lstrip("/").split("/")]
        node: Any = doc
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
        if op["op"] in ("add", "replace"):
            if isinstance(node, list):
                node.insert(len(node) if last == "-" else int(last), op["value"])
            else:
                node[last] = op["value"]
        elif op["op"] == "remove":
            del node[int(last) if isinstance(node, list) else last]
        else:
            raise ApiError(422, "Invalid", f"json patch operation {op['op']!r} is not supported by this fake")
    return doc


_MICRO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|[+-]\d\d:\d\d)")


def _check_micro_times(resource: str, obj: Obj) -> None:
    """A Lease's renewTime and acquireTime are MicroTime, decoded with the fixed layout
    ``2006-01-02T15:04:05.000000Z07:00``: anything else (a whole second without its six digits) is refused."""
    if resource != "leases":
        return
    for field in ("renewTime", "acquireTime"):
        value = (obj.get("spec") or {}).get(field)
        if value is not None and not _MICRO_TIME.fullmatch(str(value)):
            raise ApiError(
                400, "BadRequest", f'Lease in version "v1" cannot be handled as a Lease: parsing time "{value}"'
            )
