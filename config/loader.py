"""Loading a configuration file: YAML in, validated ``Settings`` out, or one ``ConfigError`` listing every
problem with its key path. Never a traceback for a person's mistake."""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from config.rules import check_rules, load_warnings
from config.schema import Settings
from models import ConfigError, ConfigProblem
from models.redaction import redact

log = logging.getLogger(__name__)

# A configuration is a few kilobytes; a limit keeps a wrong file (a log, a dump) from taking gigabytes to parse.
MAX_CONFIG_BYTES = 1024 * 1024


class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key given twice in one mapping (PyYAML silently keeps the last one).

    Merge keys (``<<: *defaults``, or ``<<: [*a, *b]``) are read as YAML specifies: a mapping takes every key of
    the merged mappings that it does not give itself, an earlier mapping of a list winning over a later one. Only a
    key written twice in the same mapping (``<<`` among them) is refused.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._flattened: set[int] = set()

    def flatten_mapping(self, node: yaml.MappingNode) -> None:
        """Replace the merge keys of ``node`` by the keys they bring, once per mapping (a mapping merged into
        another is flattened there, maybe before it is constructed itself). Each key is kept once, at its last
        occurrence in merged-then-own order, so that what a mapping writes wins and the mapping stays as small as
        its distinct keys however deep merges nest. (PyYAML's own flattening keeps the first of two keys, so a key
        overridden inside a merged mapping came back with its merged value.)"""
        if id(node) in self._flattened:
            return
        self._flattened.add(id(node))
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:value":  # a key ``=``: text, as PyYAML reads it
                key_node.tag = "tag:yaml.org,2002:str"
        self._refuse_repeated_keys(node)
        merged: list[tuple[yaml.Node, yaml.Node]] = []
        own: list[tuple[yaml.Node, yaml.Node]] = []
        for key_node, value_node in node.value:
            if key_node.tag != _MERGE:
                own.append((key_node, value_node))
                continue
            sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
            for source in reversed(sources):  # pairs given later win: the first mapping of a list goes last
                if not isinstance(source, yaml.MappingNode):
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping",
                        node.start_mark,
                        f"expected a mapping or a list of mappings to merge, but found {source.id}",
                        source.start_mark,
                    )
                self.flatten_mapping(source)
                merged.extend(source.value)
        kept: dict[object, tuple[yaml.Node, yaml.Node]] = {}
        for pair in merged + own:
            kept[_identity(pair[0])] = pair
        node.value = list(kept.values())

    def _refuse_repeated_keys(self, node: yaml.MappingNode) -> None:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = "<<" if key_node.tag == _MERGE else self.construct_object(key_node)
            line = key_node.start_mark.line + 1
            if isinstance(key, str | int | float | bool) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first given on line {seen[key]})", key_node.start_mark
                )
            if isinstance(key, str | int | float | bool):
                seen[key] = line


_MERGE = "tag:yaml.org,2002:merge"


def _identity(key_node: yaml.Node) -> object:
    """What makes two keys the same key when mappings are merged: a scalar's tag and text, else the node."""
    return (key_node.tag, key_node.value) if isinstance(key_node, yaml.ScalarNode) else id(key_node)


# Numbers are read as YAML 1.2 reads them (its core schema), not as YAML 1.1 does: 1.1's base 60 made
# ``lead_time: 1:30`` 90 seconds and ``daily_report_at: 10:30`` the number 630, and its ``010`` is octal 8. A
# plain scalar that is not a 1.2 number stays text, which the key's own parser reads or refuses with its message.
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_INT_12 = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
_FLOAT_12 = re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)


def _yaml12_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    text = str(loader.construct_scalar(node))
    digits = text.lstrip("+-")
    sign = -1 if text.startswith("-") else 1
    base = {"0o": 8, "0x": 16}.get(digits[:2].lower(), 10)
    try:
        return sign * int(digits[2:] if base != 10 else digits, base)
    except ValueError:
        raise yaml.constructor.ConstructorError(
            None, None, f"cannot read {text!r} as an integer", node.start_mark
        ) from None


def _yaml12_float(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> float:
    text = str(loader.construct_scalar(node))
    special = {".inf": math.inf, "+.inf": math.inf, "-.inf": -math.inf, ".nan": math.nan}.get(text.lower())
    try:
        return special if special is not None else float(text)
    except ValueError:
        raise yaml.constructor.ConstructorError(
            None, None, f"cannot read {text!r} as a number", node.start_mark
        ) from None


_UniqueKeyLoader.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers if tag not in (_INT, _FLOAT)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_UniqueKeyLoader.add_implicit_resolver(_INT, _INT_12, list("-+0123456789"))  # before floats: 12 is an int
_UniqueKeyLoader.add_implicit_resolver(_FLOAT, _FLOAT_12, list("-+0123456789."))
_UniqueKeyLoader.add_constructor(_INT, _yaml12_int)
_UniqueKeyLoader.add_constructor(_FLOAT, _yaml12_float)


def load_settings(path: str | Path) -> Settings:
    source = str(path)
    file = Path(path)
    if file.is_dir():
        raise ConfigError(source, [ConfigProblem("", "this is a directory: give the configuration file in it")])
    if not file.is_file():
        raise ConfigError(source, [ConfigProblem("", f"no such file: {source}")])
    try:
        size = file.stat().st_size
        if size > MAX_CONFIG_BYTES:
            problem = f"the file is {size:,} bytes, above the limit of {MAX_CONFIG_BYTES:,} for a configuration"
            raise ConfigError(source, [ConfigProblem("", problem)])
        raw, document = _read_yaml(file.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(source, [ConfigProblem("", f"not valid YAML: {where}{problem}")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(source, [ConfigProblem("", f"cannot read the file: {exc}")]) from None
    if not isinstance(raw, Mapping):
        raise ConfigError(source, [ConfigProblem("", "the file must contain a mapping of settings at top level")])
    return _settings(raw, source, document)


def _read_yaml(text: str) -> tuple[Any, yaml.Node | None]:
    """The document in ``text`` (as ``yaml.load`` with a ``SafeLoader`` reads it: no arbitrary objects) and its node
    tree, merge keys flattened, which tells how a value was written: which word YAML read as a boolean."""
    loader = _UniqueKeyLoader(text)
    try:
        node = loader.get_single_node()
        return (loader.construct_document(node) if node is not None else None), node
    finally:
        loader.dispose()


def settings_from_mapping(raw: Mapping[str, Any], source: str = "<mapping>") -> Settings:
    return _settings(raw, source, None)


def _settings(raw: Mapping[str, Any], source: str, document: yaml.Node | None) -> Settings:
    """``document``: the node tree ``raw`` was read from, None for a mapping given in code."""
    try:
        settings = Settings.model_validate(dict(raw))
    except ValidationError as exc:
        own = [_problem(err, document) for err in _own_errors(exc.errors())]
        raise ConfigError(source, own + _rules_beside(raw, exc)) from None
    problems = check_rules(settings)
    if problems:
        raise ConfigError(source, problems)
    for warning in load_warnings(settings):  # the file loads; a person should still know
        log.warning("configuration check: %s: %s", source, warning)
    return settings


def _own_errors(errors: list[Any]) -> list[Any]:
    """The errors without a list's "too short" that only echoes its items' own errors: pydantic counts the items
    that validated, so one broken pool also reports ``pools: Tuple should have at least 1 item`` with the pool."""
    nested = [tuple(e.get("loc", ())) for e in errors]
    return [
        e
        for e in errors
        if not (
            e.get("type") == "too_short"
            and any(len(loc) > len(e["loc"]) and loc[: len(e["loc"])] == tuple(e["loc"]) for loc in nested)
        )
    ]


def _rules_beside(raw: Mapping[str, Any], exc: ValidationError) -> list[ConfigProblem]:
    """The rules across sections that read only sections which are valid on their own, so that one run reports
    the broken rules together with the basic mistakes instead of after they are fixed."""
    locations = [err.get("loc", ()) for err in exc.errors()]
    if any(not loc for loc in locations):
        return []  # a problem of the whole file: no section can be trusted
    invalid = frozenset(str(loc[0]) for loc in locations)
    try:
        rest = Settings.model_validate({k: v for k, v in raw.items() if k not in invalid})
    except ValidationError:
        return []  # a required section is among the invalid ones
    return check_rules(rest, invalid)


def _problem(error: Mapping[str, Any], document: yaml.Node | None = None) -> ConfigProblem:
    kind = error.get("type", "")
    loc = tuple(error.get("loc", ()))
    boolean_key = kind in ("string_type", "invalid_key") and isinstance(error.get("input"), bool)
    boolean_key = boolean_key and (kind == "invalid_key" or loc[-1:] == ("[key]",))
    if boolean_key:  # a key read as a boolean: the mapping holding it (pydantic gives the key as 0 or 1)
        loc = loc[:-1] if kind == "invalid_key" else loc[:-2]
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    if kind == "extra_forbidden":
        message = "unknown key (check its spelling and the section it is in)"
    elif kind == "missing":
        message = "required key is missing"
    elif kind in _LIST_TYPES:
        message = f"should be a list, e.g. {_list_example(error)}{_got(error)}"
    elif kind in ("model_type", "model_attributes_type", "dict_type"):
        message = f"should be a mapping, e.g. {_mapping_example(error)}{_got(error)}"
    elif kind == "too_short" and not error.get("input") and (error.get("ctx") or {}).get("min_length") == 1:
        message = f"at least one {_item_name(error)} is required"
    elif kind in ("string_type", "invalid_key") and isinstance(error.get("input"), bool):
        message = ("a key " if boolean_key else "") + _boolean_read(bool(error["input"]))
    elif kind in _CHOICE_TYPES and (word := _boolean_word(document, loc)) is not None:
        choices = str(error.get("msg", "invalid value"))
        message = f"{choices}; YAML reads {word} as {str(error.get('input')).lower()}: quote it ('{word}')"
    elif _variable(error.get("input")):
        message = _variable_message(error)
    elif kind == "string_pattern_mismatch" and _is_url_pattern(error):
        message = f"should be a URL, http(s)://host:port{_got(error)}"
    else:
        message = str(error.get("msg", "invalid value")).removeprefix("Value error, ")
        if "input" in error and kind not in ("model_type", "dict_type"):
            shown = redact(repr(error["input"]))  # a credential in a URL is not echoed
            if f"got {shown}" not in message and f"read {shown}" not in message:  # the check may quote it already
                message += f" (got {shown})"
    return ConfigProblem(path, message)


_LIST_TYPES = ("tuple_type", "list_type", "set_type", "frozen_set_type")
_ITEM_NAMES = {"serves": "demand class"}  # lists not named after their items


def _item_name(error: Mapping[str, Any]) -> str:
    """What one item of the list at the error's location is called: ``pools`` holds a pool, ``demand_classes`` a
    demand class."""
    names = [part for part in error.get("loc", ()) if isinstance(part, str)]
    if not names:
        return "item"
    name = names[-1]
    if name in _ITEM_NAMES:
        return _ITEM_NAMES[name]
    singular = name[:-2] if name.endswith("sses") else name[:-1] if name.endswith("s") else name
    return singular.replace("_", " ")


def _boolean_read(value: bool) -> str:
    """Text that YAML read as a boolean: it takes an unquoted yes, no, on, off, true or false for one."""
    words, example = ("yes, on or true", "yes") if value else ("no, off or false", "no")
    return (
        f"should be text, but YAML reads an unquoted {words} as the boolean {str(value).lower()}; quote it: '{example}'"
    )


# Fixed choices: a ``Literal`` field (``mode``, ``gke_autoscaling``, ``sslmode``...) and an enum one (``kind``,
# ``tier``, ``family``). None of their choices is a word YAML reads as a boolean, but ``mode: off`` was told only that
# it is not one of them, with the boolean it was read as (``got False``).
_CHOICE_TYPES = ("literal_error", "enum")
_BOOL = "tag:yaml.org,2002:bool"
_BOOLEAN_WORDS = frozenset({"yes", "no", "on", "off"})  # YAML 1.1's, beside true and false


def _boolean_word(document: yaml.Node | None, loc: tuple[Any, ...]) -> str | None:
    """The word written at ``loc`` where YAML read it as a boolean and it is yes, no, on or off (in any case), as
    written; None otherwise: a true or false written so, a location the file does not hold as written (through a
    union's branch), or no file (a mapping given in code)."""
    node = document
    for part in loc:
        if isinstance(node, yaml.MappingNode) and isinstance(part, str):
            node = next((v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == part), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
            node = node.value[part]
        else:
            return None
    if isinstance(node, yaml.ScalarNode) and node.tag == _BOOL and str(node.value).lower() in _BOOLEAN_WORDS:
        return str(node.value)
    return None


def _variable(value: object) -> bool:
    """Whether ``value`` holds a reference to an environment variable (``$NAME``, ``${NAME}``), e.g. as a URL's
    host. Only asked of a value that failed its check: a price like ``$10`` is not one."""
    return isinstance(value, str) and re.search(r"\$\{|\$[A-Za-z_]", value) is not None


def _variable_message(error: Mapping[str, Any]) -> str:
    """An environment variable written as a value: the file is read as it is written, nothing expands it."""
    shown = redact(repr(error.get("input")))
    if _is_url_pattern(error):
        need = "a literal http(s)://host:port URL is needed"
    else:
        need = f"write the value itself ({str(error.get('msg', 'invalid value')).removeprefix('Value error, ')})"
    return f"environment variables are not expanded in the configuration file (got {shown}): {need}"


def _is_url_pattern(error: Mapping[str, Any]) -> bool:
    return str((error.get("ctx") or {}).get("pattern", "")).startswith("^https?://")


def _got(error: Mapping[str, Any]) -> str:
    """The value written, where it is a single one (a credential in a URL is not echoed)."""
    value = error.get("input")
    return f" (got {redact(repr(value))})" if isinstance(value, str | int | float | bool) else ""


def _example(value: Any) -> str:
    return str(value) if isinstance(value, str | int | float) and not isinstance(value, bool) else "..."


def _mapping_example(error: Mapping[str, Any]) -> str:
    """A mapping written as the configuration holds one: its first key (a required one if the section has any),
    as a list item where it is one, the value written as the required key's where it is a single one."""
    loc = tuple(error.get("loc", ()))
    first = _first_key(_model_named(str((error.get("ctx") or {}).get("class_name", ""))))
    if first is None:
        return "`key: value`"
    key, required = first
    entry = f"{key}: {_example(error.get('input')) if required else '...'}"
    return f"`- {entry}`" if loc and isinstance(loc[-1], int) else f"`{entry}`"


def _list_example(error: Mapping[str, Any]) -> str:
    """A list written as the configuration holds one: a list of values as ``[value]``, a list of sections as an item
    of it with its first key (``- id: a100-on-demand``): written as shown, the list has its shape at once, where
    ``[a100-on-demand]`` was refused again as an item that should be a mapping."""
    first = _first_key(_item_model(tuple(error.get("loc", ()))))
    if first is None:
        return f"[{_example(error.get('input'))}]"
    key, required = first
    return f"`- {key}: {_example(error.get('input')) if required else '...'}`"


def _first_key(model: type[BaseModel] | None) -> tuple[str, bool] | None:
    """The first required key of ``model`` (else its first key) and whether it is required; None for no model."""
    if model is None:
        return None
    fields = model.model_fields
    required = [n for n, f in fields.items() if f.is_required()]
    names = required or list(fields)
    return ((fields[names[0]].alias or names[0]), bool(required)) if names else None


def _model_named(class_name: str) -> type[BaseModel] | None:
    """The settings model named ``class_name`` among the models the settings nest; None for a name none has."""
    seen: set[type[BaseModel]] = set()
    pending: list[Any] = [Settings]
    while pending:
        kind = pending.pop()
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            if kind in seen:
                continue
            seen.add(kind)
            if kind.__name__ == class_name:
                return kind
            pending.extend(f.annotation for f in kind.model_fields.values())
        else:
            pending.extend(get_args(kind))
    return None


def _item_model(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The settings model the list at ``loc`` holds as its items; None where they are plain values (a list of
    names) or ``loc`` leads to no list of one model."""
    kinds: list[Any] = [Settings]
    for part in loc:
        kinds = [inner for kind in kinds for option in _options(kind) if (inner := _inner(option, part)) is not None]
    items = [
        item
        for kind in kinds
        for option in _options(kind)
        if get_origin(option) in (tuple, list, set, frozenset)
        for item in get_args(option)[:1]
    ]
    models = {m for item in items for m in _options(item) if isinstance(m, type) and issubclass(m, BaseModel)}
    return models.pop() if len(models) == 1 else None


def _inner(kind: Any, part: Any) -> Any:
    """What ``kind`` holds under the key or index ``part`` of a location; None where it holds nothing so."""
    if isinstance(part, int):
        args = get_args(kind)
        return args[0] if get_origin(kind) in (tuple, list, set, frozenset) and args else None
    if isinstance(kind, type) and issubclass(kind, BaseModel):
        found = [f.annotation for n, f in kind.model_fields.items() if part in (n, f.alias)]
        return found[0] if found else None
    return get_args(kind)[1] if get_origin(kind) in (dict, Mapping) and len(get_args(kind)) == 2 else None


def _options(kind: Any) -> list[Any]:
    """The types a value of ``kind`` may be: its ``Annotated`` metadata dropped, each member of a union."""
    origin = get_origin(kind)
    if origin is Annotated:
        return _options(get_args(kind)[0])
    if origin is Union or origin is UnionType:
        return [option for arg in get_args(kind) for option in _options(arg)]
    return [kind]
