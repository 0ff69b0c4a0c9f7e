"""Loading a configuration file: YAML in, validated ``Settings`` out, or one ``ConfigError`` listing every
problem with its key path. Never a traceback for a person's mistake."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from config.rules import check_rules
from config.schema import Settings
from models import ConfigError, ConfigProblem


def load_settings(path: str | Path) -> Settings:
    source = str(path)
    file = Path(path)
    if not file.is_file():
        raise ConfigError(source, [ConfigProblem("", f"no such file: {source}")])
    try:
        raw = yaml.safe_load(file.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(source, [ConfigProblem("", f"not valid YAML: {where}{problem}")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(source, [ConfigProblem("", f"cannot read the file: {exc}")]) from None
    if not isinstance(raw, Mapping):
        raise ConfigError(source, [ConfigProblem("", "the file must contain a mapping of settings at top level")])
    return settings_from_mapping(raw, source=source)


def settings_from_mapping(raw: Mapping[str, Any], source: str = "<mapping>") -> Settings:
    try:
        settings = Settings.model_validate(dict(raw))
    except ValidationError as exc:
        raise ConfigError(source, [_problem(err) for err in exc.errors()] + _rules_beside(raw, exc)) from None
    problems = check_rules(settings)
    if problems:
        raise ConfigError(source, problems)
    return settings


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


def _problem(error: Mapping[str, Any]) -> ConfigProblem:
    path = ""
    for part in error.get("loc", ()):
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    kind = error.get("type", "")
    if kind == "extra_forbidden":
        message = "unknown key (check its spelling and the section it is in)"
    elif kind == "missing":
        message = "required key is missing"
    else:
        message = str(error.get("msg", "invalid value")).removeprefix("Value error, ")
        if "input" in error and kind not in ("model_type", "dict_type"):
            message += f" (got {error['input']!r})"
    return ConfigProblem(path, message)
