"""Strict JSON for every document leadtime writes (results, recommendations, backtests).

Python's ``json`` writes ``NaN`` and ``Infinity`` by default, which no JSON parser has to accept (RFC 8259 has no
such numbers). Here a float that is not finite becomes ``null`` ("no value"), and the document is then dumped
with ``allow_nan=False`` so nothing non-finite can slip through another way.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


def finite_or_null(value: Any) -> Any:
    """``value`` with every non-finite float (at any depth of dicts, lists and tuples) replaced by ``None``."""
    if isinstance(value, dict):
        return {k: finite_or_null(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_or_null(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def dumps(document: Any, *, indent: int | None = 2) -> str:
    """The document as strict JSON text, ending with a newline."""
    return json.dumps(finite_or_null(document), indent=indent, allow_nan=False) + "\n"


def write_json(path: Path, document: Any) -> None:
    """Write the document to ``path`` as strict UTF-8 JSON."""
    path.write_text(dumps(document), encoding="utf-8")
