"""Only a shared budget's name (one with ``remote_pools``) is a ledger key: a budget no other agent shares reserves
nothing, so its name may hold ``/`` or ``@``. Every budget name holding either was refused at load, so a single
agent's configuration with a budget ``research/gpu`` on SQLite no longer loaded (an upgrade crash-looped, and a
rename would change its metrics' and alerts' labels). It loads again; a shared budget's is still refused, and so is
an unshared budget named as one of the keys the ledger derives from a shared budget of the same file."""

from __future__ import annotations

from typing import Any

import pytest

from config.loader import settings_from_mapping
from models.errors import ConfigError
from tests import shared_budget_rig as rig


def _unshared(name: str) -> dict[str, Any]:
    config = rig.shared_budget_config("west", "east", monthly_cap_usd=5000.0)
    config["budgets"] = [{"name": name, "pools": ["west"], "monthly_cap_usd": 5000.0}]
    return config


def _beside_shared(name: str) -> dict[str, Any]:
    config = rig.shared_budget_config("west", "east", monthly_cap_usd=5000.0, hourly_cap_usd=50.0)
    config["budgets"].append({"name": name, "pools": ["west"], "monthly_cap_usd": 5000.0})
    return config


@pytest.mark.parametrize("name", ["research/gpu", "research@gpu", "team/hourly"])
def test_an_unshared_budget_name_may_hold_a_key_separator(name: str) -> None:
    settings = settings_from_mapping(_unshared(name), source="research.yaml")

    assert settings.ledger.backend == "sqlite"
    assert [b.name for b in settings.budgets] == [name]


@pytest.mark.parametrize(
    "name", ["team/hourly", "team/releasing", "team/hourly/releasing", "team@2024-02-01T00:00:00+00:00"]
)
def test_an_unshared_budget_named_as_a_shared_budgets_ledger_key_is_refused(name: str) -> None:
    with pytest.raises(ConfigError) as raised:
        settings_from_mapping(_beside_shared(name), source="team.yaml")

    [problem] = raised.value.problems
    assert problem.key_path == "budgets[1].name"
    assert f"{name!r} is one of the ledger keys of the shared budget 'team' (budgets[0]" in problem.message
    assert "rename it (e.g. " in problem.message


@pytest.mark.parametrize("name", ["team/gpu", "team-hourly", "research/hourly"])
def test_an_unshared_budget_beside_a_shared_one_loads_under_a_name_not_its_key(name: str) -> None:
    assert [b.name for b in settings_from_mapping(_beside_shared(name)).budgets] == ["team", name]


def test_a_shared_budget_name_holding_a_key_separator_is_still_refused() -> None:
    config = rig.shared_budget_config("west", "east", monthly_cap_usd=5000.0)
    config["budgets"][0]["name"] = "research/gpu"

    with pytest.raises(ConfigError) as raised:
        settings_from_mapping(config, source="research.yaml")

    [problem] = raised.value.problems
    assert problem.key_path == "budgets[0].name"
    assert "a shared budget's name (one with remote_pools) may not contain '/'" in problem.message
