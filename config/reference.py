"""The configuration reference, generated from the schema itself: a JSON Schema for editors (``leadtime config
schema``) and ``docs/configuration.md`` (``leadtime config reference``). Descriptions come from
``config.field_docs``; a test fails when a key has none or the committed reference has drifted.
"""

from __future__ import annotations

import copy
import json
from datetime import timedelta
from typing import Any

from pydantic import TypeAdapter

from config.durations import format_duration
from config.field_docs import FIELDS, SECTIONS
from config.schema import Settings

_DURATION_PATTERN = r"^\s*((\d+(\.\d+)?(ms|s|m|h|d|w))+|\d+(\.\d+)?)\s*$"
# A duration as configs write it: `90s`, `10m`, `1h30m`, `7d`, or a number of seconds.
_DURATION: list[dict[str, Any]] = [
    {"type": "string", "pattern": _DURATION_PATTERN},
    {"type": "number", "minimum": 0},
]
_TIMEDELTA: TypeAdapter[timedelta] = TypeAdapter(timedelta)


def json_schema() -> dict[str, Any]:
    """The JSON Schema of a configuration file, every key described, durations written as the loader reads them."""
    schema = Settings.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "leadtime configuration"
    schema["description"] = SECTIONS["Settings"]
    _describe("Settings", schema)
    for name, definition in schema.get("$defs", {}).items():
        if "properties" in definition:
            definition["description"] = SECTIONS.get(name, definition.get("description", ""))
            _describe(name, definition)
    return schema


def _describe(section: str, definition: dict[str, Any]) -> None:
    for key, prop in definition.get("properties", {}).items():
        text = FIELDS.get(f"{section}.{key}")
        if text is None:
            continue
        if _is_duration(prop):
            _as_duration(prop)
        prop["description"] = text
        prop.pop("title", None)


def _is_duration(prop: dict[str, Any]) -> bool:
    options = prop.get("anyOf", [prop])
    return any(option.get("format") == "duration" for option in options)


def _as_duration(prop: dict[str, Any]) -> None:
    shape = copy.deepcopy(_DURATION)
    if "anyOf" in prop:
        others = [o for o in prop["anyOf"] if o.get("format") != "duration"]
        prop["anyOf"] = shape + others
    else:
        prop.pop("type", None)
        prop.pop("format", None)
        prop["anyOf"] = shape
    if isinstance(prop.get("default"), str):
        prop["default"] = format_duration(_TIMEDELTA.validate_python(prop["default"]))


def schema_text() -> str:
    return json.dumps(json_schema(), indent=2, sort_keys=False) + "\n"


# -- Markdown -------------------------------------------------------------------------------------------------
def reference_markdown() -> str:
    schema = json_schema()
    defs = schema["$defs"]
    lines = [
        "# Configuration reference",
        "",
        "Generated from the schema by `leadtime config reference > docs/configuration.md`; do not edit by hand.",
        "`leadtime config schema` prints the same as a JSON Schema, for editors (for example, the YAML language",
        "server: `# yaml-language-server: $schema=leadtime.schema.json` at the top of the file).",
        "",
        "Durations are written `90s`, `10m`, `1h30m`, `7d`, or as a number of seconds. Unknown keys are errors.",
        "`leadtime validate-config FILE [--for run]` checks a file.",
        "",
    ]
    _section(lines, "(top level)", "Settings", schema, defs)
    return "\n".join(lines).rstrip() + "\n"


def _section(lines: list[str], path: str, name: str, definition: dict[str, Any], defs: dict[str, Any]) -> None:
    lines += [f"## `{path}`" if path != "(top level)" else "## Top level", "", SECTIONS.get(name, ""), ""]
    lines += ["| key | type | default | description |", "| --- | --- | --- | --- |"]
    children: list[tuple[str, str]] = []
    required = set(definition.get("required", []))
    for key, prop in definition["properties"].items():
        kind, child = _type(prop, defs)
        default = "required" if key in required else _default(prop)
        description = prop.get("description", "").replace("|", "\\|")
        lines.append(f"| `{key}` | {kind} | {default} | {description} |")
        if child is not None:
            suffix = {"list": "[]", "map": ".<name>"}.get(kind.split(" ")[0], "")
            prefix = "" if path == "(top level)" else f"{path}."
            children.append((f"{prefix}{key}{suffix}", child))
    lines.append("")
    for child_path, child in children:
        _section(lines, child_path, child, defs[child], defs)


def _ref(prop: dict[str, Any]) -> str | None:
    ref = prop.get("$ref")
    return ref.rsplit("/", 1)[-1] if isinstance(ref, str) else None


def _type(prop: dict[str, Any], defs: dict[str, Any]) -> tuple[str, str | None]:
    """A short type for the table, and the section it opens (if any)."""
    if (ref := _ref(prop)) is not None:
        target = defs[ref]
        if "enum" in target:
            return " \\| ".join(f"`{v}`" for v in target["enum"]), None
        return "section", ref
    if "anyOf" in prop:
        options = [o for o in prop["anyOf"] if o.get("type") != "null"]
        if any("pattern" in o and o.get("type") == "string" for o in options) and _is_duration_shape(prop):
            return "duration", None
        if len(options) == 1:
            kind, child = _type(options[0], defs)
            return f"{kind} (optional)" if child is None else kind, child
        return " or ".join(_type(o, defs)[0] for o in options), None
    if "enum" in prop:
        return " \\| ".join(f"`{v}`" for v in prop["enum"]), None
    kind = prop.get("type", "any")
    if kind == "array":
        item, child = _type(prop.get("items", {}), defs)
        return (f"list of {item}" if child is None else "list"), child
    if kind == "object" and isinstance(prop.get("additionalProperties"), dict):
        value, child = _type(prop["additionalProperties"], defs)
        return (f"map of {value}" if child is None else "map"), child
    return {"integer": "integer", "number": "number", "string": "string", "boolean": "boolean"}.get(kind, kind), None


def _is_duration_shape(prop: dict[str, Any]) -> bool:
    return any(o.get("pattern") == _DURATION_PATTERN for o in prop.get("anyOf", []))


def _default(prop: dict[str, Any]) -> str:
    if "default" not in prop:
        return ""
    value = prop["default"]
    if value is None:
        return "unset"
    if isinstance(value, dict):
        return "(see below)" if value else "`{}`"
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return "(see below)"
    return f"`{json.dumps(value) if not isinstance(value, str) else value}`"
