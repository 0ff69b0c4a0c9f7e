"""The configuration reference is generated from the schema: every key is described, the committed
``docs/configuration.md`` is current, and the JSON Schema accepts the shipped configurations and refuses what
the loader refuses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from pydantic import BaseModel

from agent.cli import main
from config.field_docs import FIELDS, SECTIONS
from config.reference import json_schema, reference_markdown
from config.schema import Settings

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = [*sorted((ROOT / "config" / "examples").glob("*.yaml")), ROOT / "deploy" / "base" / "config.yaml"]


def _sections(model: type[BaseModel], seen: dict[str, type[BaseModel]]) -> dict[str, type[BaseModel]]:
    """Every settings class reachable from ``model``, by name."""
    seen[model.__name__] = model
    for field in model.model_fields.values():
        for arg in _types(field.annotation):
            if isinstance(arg, type) and issubclass(arg, BaseModel) and arg.__name__ not in seen:
                _sections(arg, seen)
    return seen


def _types(annotation: Any) -> list[Any]:
    args = getattr(annotation, "__args__", ())
    return [annotation, *[t for a in args for t in _types(a)]]


def test_every_key_has_a_description_and_no_description_is_stale() -> None:
    keys = {f"{name}.{field}" for name, model in _sections(Settings, {}).items() for field in model.model_fields}
    assert sorted(keys - FIELDS.keys()) == [], "describe these keys in config/field_docs.py"
    assert sorted(FIELDS.keys() - keys) == [], "these descriptions name keys that no longer exist"
    assert sorted(set(_sections(Settings, {})) - SECTIONS.keys()) == []


def test_the_committed_reference_is_current() -> None:
    committed = (ROOT / "docs" / "configuration.md").read_text()
    assert committed == reference_markdown(), "docs/configuration.md is stale: leadtime config reference > it"


def test_every_key_appears_in_the_reference() -> None:
    text = reference_markdown()
    for key in FIELDS:
        assert f"| `{key.split('.', 1)[1]}` |" in text


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_the_schema_accepts_every_shipped_configuration(path: Path) -> None:
    jsonschema.validate(yaml.safe_load(path.read_text()), json_schema())


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (lambda c: c["pools"][0].update(lead_tiem="10m"), "lead_tiem"),
        (lambda c: c["pools"][0].update(lead_time="ten minutes"), "ten minutes"),
        (lambda c: c.update(planner={"service_level": 1.5}), "1.5"),
    ],
)
def test_the_schema_refuses_what_the_loader_refuses(change: Any, where: str) -> None:
    config = yaml.safe_load((ROOT / "config" / "examples" / "helios-earth.yaml").read_text())
    change(config)
    with pytest.raises(jsonschema.ValidationError) as refused:
        jsonschema.validate(config, json_schema())
    assert where in str(refused.value.message) or where in json.dumps(refused.value.instance)
    with pytest.raises(ValueError, match="validation error"):
        Settings.model_validate(config)


def test_durations_in_the_schema_are_written_as_configs_write_them() -> None:
    pool = json_schema()["$defs"]["PoolSettings"]["properties"]["lead_time"]
    assert pool["description"].startswith("Time from asking")
    forecast = json_schema()["$defs"]["ForecastSettings"]["properties"]["history"]
    assert forecast["default"] == "7d"


def test_the_commands_print_schema_and_reference(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "schema"]) == 0
    assert json.loads(capsys.readouterr().out)["title"] == "leadtime configuration"
    assert main(["config", "reference"]) == 0
    assert capsys.readouterr().out == reference_markdown()
