"""The name suggested for a shared budget whose name holds '/' or '@' is one no budget of the file uses. Budgets
``team-a`` and ``team/a`` were told "rename it (e.g. 'team-a')", which then failed as a duplicate name; the name
suggested is now numbered past the names in the file, and the message says it must be a name no other budget on the
shared ledger uses (the other agents' budgets are not in this file)."""

from __future__ import annotations

from typing import Any

import pytest

from config.loader import settings_from_mapping
from models.errors import ConfigError
from tests import shared_budget_rig as rig


def _config(*names: str) -> dict[str, Any]:
    config = rig.shared_budget_config("west", "east", monthly_cap_usd=5000.0)
    shared = config["budgets"][0]
    config["budgets"] = [{**shared, "name": name} for name in names]
    return config


def _suggested(config: dict[str, Any]) -> tuple[str, str]:
    with pytest.raises(ConfigError) as raised:
        settings_from_mapping(config, source="team.yaml")
    [problem] = raised.value.problems
    message = problem.message
    return problem.key_path, message[message.index("(e.g. '") + len("(e.g. '") : message.index("', a name no other")]


@pytest.mark.parametrize(
    ("names", "suggested"),
    [
        (("team/a",), "team-a"),
        (("team-a", "team/a"), "team-a-2"),
        (("team-a", "team-a-2", "team@a"), "team-a-3"),
    ],
)
def test_the_name_suggested_is_one_no_budget_of_the_file_uses(names: tuple[str, ...], suggested: str) -> None:
    config = _config(*names)
    key_path, name = _suggested(config)

    assert (key_path, name) == (f"budgets[{len(names) - 1}].name", suggested)
    config["budgets"][-1]["name"] = name  # the rename suggested loads
    assert [b.name for b in settings_from_mapping(config).budgets] == [*names[:-1], suggested]


def test_the_message_says_the_name_must_be_unused_on_the_shared_ledger() -> None:
    with pytest.raises(ConfigError, match="a name no other budget on the shared ledger uses"):
        settings_from_mapping(_config("team-a", "team/a"))
