"""Our top-level package names are common words; make sure the ones imported are this repository's."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", ["models", "config", "kube", "forecasting", "actuators", "agent"])
def test_package_is_imported_from_this_repository(name: str) -> None:
    module = importlib.import_module(name)
    assert module.__file__ is not None
    assert Path(module.__file__).resolve().parent == ROOT / name


def test_console_script_is_declared() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    assert 'leadtime = "agent.cli:main"' in text
