"""Static checks run with the tests: ruff (lint and format), mypy strict, and the layer contracts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.background_runs import Background, Ended, ended, register

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.xdist_group("static")
def test_ruff_lint_is_clean() -> None:
    result = _run(str(BIN / "ruff"), "check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.xdist_group("static")
def test_ruff_format_is_clean() -> None:
    result = _run(str(BIN / "ruff"), "format", "--check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


# Started in the background once the tests are collected (half a minute of CPU on a clean clone, no cache).
MYPY = register(Background("static-mypy", lambda _: [str(BIN / "mypy")], fixture="mypy_run"))


@pytest.fixture
def mypy_run(request: pytest.FixtureRequest) -> Ended:
    return ended(request.config, MYPY)


@pytest.mark.xdist_group("static")
def test_mypy_strict_is_clean(mypy_run: Ended) -> None:
    assert mypy_run.returncode == 0, mypy_run.stdout + mypy_run.stderr


@pytest.mark.xdist_group("static")
def test_layer_contracts_hold() -> None:
    result = _run(str(BIN / "lint-imports"))
    assert result.returncode == 0, result.stdout + result.stderr
