"""What GKE says of a node pool (``_message``): its deprecated ``statusMessage`` with its ``conditions``, each
condition's code and canonical code by name, as ``GkeTpuSliceActuator`` reads them for a stockout or an exhausted
quota."""

from __future__ import annotations

from typing import Any


def _message(node_pool: Any) -> str:
    """What GKE says of a node pool: its ``statusMessage`` and each of its ``conditions`` ("GCE_STOCKOUT
    (RESOURCE_EXHAUSTED): message"), joined by "; ", each text once."""
    parts = [str(node_pool.status_message)] if node_pool.status_message else []
    for condition in node_pool.conditions:
        codes = [condition.code.name] if condition.code else []
        if condition.canonical_code:
            codes.append(_canonical_name(int(condition.canonical_code)))
        label = f"{codes[0]} ({codes[1]})" if len(codes) == 2 else "".join(codes)
        text = ": ".join(t for t in (label, str(condition.message)) if t)
        if text and text not in parts:
            parts.append(text)
    return "; ".join(parts)


# google.rpc.Code: the canonical error codes a StatusCondition's canonicalCode holds (googleapis google/rpc/code.proto).
_CANONICAL_CODES = (
    "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
    "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
    "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
)  # fmt: skip


def _canonical_name(code: int) -> str:
    return _CANONICAL_CODES[code] if 0 <= code < len(_CANONICAL_CODES) else str(code)
