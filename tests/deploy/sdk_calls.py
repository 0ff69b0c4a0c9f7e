"""Finding the SDK calls the actuators make, by reading their source: the IAM tests compare them with the
permissions a role or policy grants."""

from __future__ import annotations

import ast
from collections.abc import Collection


def calls_in(source: str, clients: Collection[str]) -> set[tuple[str, str]]:
    """``(client attribute, method)`` for every ``self.<client>.<method>`` in ``source``, for the client
    attributes named in ``clients``."""
    found: set[tuple[str, str]] = set()
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Attribute)
            and isinstance(node.value.value, ast.Name)
            and node.value.value.id == "self"
            and node.value.attr in clients
        ):
            found.add((node.value.attr, node.attr))
    return found
