"""A budget's name is the ledger key of its monthly cap's reservations, and the reserver derives its other keys from
the name with ``/`` and ``@`` (``team/hourly``, ``team@START``, ``team/releasing``, ``team/hourly/releasing``). A
budget of another deployment on the same PostgreSQL ledger named ``team/releasing`` kept its ordinary reservations
under that key, which budget ``team``'s agents read as the units the others are releasing: their hard stop counted
the other fleet as going and spent 1,026.67 USD against a cap of 1,019.17, and a monthly cap 3 units short shed
nothing in 7 ticks. A shared budget's name holding ``/`` or ``@`` is refused at load, with the key, why, and a name
to use; every key derived from an accepted name is then a name no shared budget can have (an unshared budget's:
tests/test_budget_name_unshared.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.budget_reserve_caps import keyed, releasing_key, reserved_periods
from agent.planning.budget import Budget
from config.loader import settings_from_mapping
from models.errors import ConfigError
from tests import shared_budget_rig as rig

# near a month's and an hour's end, so that the periods reserved ahead are derived too
NOW = datetime(2024, 1, 31, 23, 50, tzinfo=UTC)


def _config(name: str) -> dict[str, Any]:
    config = rig.shared_budget_config("west", "east", monthly_cap_usd=1000.0, hourly_cap_usd=50.0)
    config["budgets"][0]["name"] = name
    return config


@pytest.mark.parametrize(
    ("name", "owner", "suggested"),
    [
        ("team/releasing", "team", "team-releasing"),
        ("team/hourly", "team", "team-hourly"),
        ("team/hourly/releasing", "team", "team-hourly-releasing"),
        ("team@2024-02-01T00:00:00+00:00", "team", "team-2024-02-01T00:00:00+00:00"),
    ],
)
def test_a_budget_name_that_is_another_budgets_ledger_key_is_refused(name: str, owner: str, suggested: str) -> None:
    with pytest.raises(ConfigError) as raised:
        settings_from_mapping(_config(name), source="team.yaml")

    [problem] = raised.value.problems
    assert problem.key_path == "budgets[0].name"
    assert f"a budget named {owner!r}" in problem.message  # why: whose keys it would be read as
    assert f"rename it (e.g. {suggested!r}, a name no other budget on the shared ledger uses)" in problem.message
    assert f"(got {name!r})" in problem.message


def test_every_key_derived_from_a_budget_name_is_refused_as_a_budget_name() -> None:
    settings = settings_from_mapping(_config("team"))
    budget = Budget.from_settings(settings.budgets[0])
    keys = {key for key, *_ in reserved_periods(budget, NOW, hold=timedelta(hours=1))}
    keys |= {releasing_key(key) for key in keys} | {keyed(key, budget.period(NOW)) for key in keys}
    assert {"team/hourly", "team/releasing", "team/hourly/releasing"} <= keys
    assert any(key.startswith("team@") for key in keys) and any(key.startswith("team/hourly@") for key in keys)

    for key in sorted(keys - {"team"}):
        with pytest.raises(ConfigError, match=r"budgets\[0\]\.name: a shared budget's name .* may not contain"):
            settings_from_mapping(_config(key))


@pytest.mark.parametrize("name", ["team", "team-releasing", "research.gpu", "team_hourly"])
def test_a_budget_name_without_a_key_separator_loads(name: str) -> None:
    assert settings_from_mapping(_config(name)).budgets[0].name == name


def test_every_shipped_configuration_names_its_budgets_without_a_key_separator() -> None:
    """The example and deployment configurations still load (their budget names hold no ``/`` or ``@``)."""
    root = Path(__file__).resolve().parent.parent
    files = sorted([*root.glob("config/examples/*.yaml"), *root.glob("deploy/**/config.yaml")])
    named = 0
    for path in files:
        raw = yaml.safe_load(path.read_text())
        if isinstance(raw, dict) and raw.get("budgets"):
            named += 1
            assert settings_from_mapping(raw, source=str(path)).budgets
    assert named >= 1
