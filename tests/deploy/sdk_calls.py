"""Finding the SDK calls the actuators make, by reading their source: the IAM tests compare them with the
permissions a role or policy grants."""

from __future__ import annotations

import ast
from collections.abc import Collection


def calls_in(source: str, clients: Collection[str]) -> set[tuple[str, str]]:
    """``(client attribute, method)`` for every ``self.<client>.<method>`` in ``source``, and every
    ``self.<client>_writes(...).<method>`` (a write sent through a client made for its time limit), for the client
    attributes named in ``clients``."""
    found: set[tuple[str, str]] = set()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute):
            continue
        owner = node.value.func if isinstance(node.value, ast.Call) else node.value
        if not (isinstance(owner, ast.Attribute) and isinstance(owner.value, ast.Name) and owner.value.id == "self"):
            continue
        if isinstance(node.value, ast.Call) and owner.attr.endswith("_writes"):
            client = owner.attr.removesuffix("_writes")
        elif isinstance(node.value, ast.Attribute):
            client = owner.attr
        else:
            continue
        if client in clients:
            found.add((client, node.attr))
    return found
