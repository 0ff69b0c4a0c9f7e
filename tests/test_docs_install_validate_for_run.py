"""docs/install.md checks a configuration with ``leadtime validate-config --for run``: a plain ``validate-config``
passes the examples it tells a person to start from, which the daemon then refuses at start (no ``prometheus``
section, no ``cloud`` mapping), so every such command there carries ``--for run``; none is an exception."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from agent.cli import main

ROOT = Path(__file__).resolve().parents[1]
INSTALL = ROOT / "docs" / "install.md"
COMMAND = re.compile(r"leadtime validate-config[^`\n]*")


def _commands() -> list[str]:
    return COMMAND.findall(INSTALL.read_text(encoding="utf-8"))


def test_every_validate_config_command_in_install_checks_for_run() -> None:
    commands = _commands()
    assert len(commands) >= 2  # step 3 and the upgrade
    assert [command for command in commands if "--for run" not in command] == []


def test_the_step_3_check_refuses_an_example_the_daemon_refuses(capsys: pytest.CaptureFixture[str]) -> None:
    """The command as written, run on an example: refused, naming the sections the daemon asks for, as run does."""
    step_3 = next(command for command in _commands() if "my-config.yaml" in command)
    example = str(ROOT / "config" / "examples" / "helios-earth.yaml")
    args = [example if word == "my-config.yaml" else word for word in shlex.split(step_3)[1:]]
    assert main(args) == 2
    said = capsys.readouterr().err
    assert "  - prometheus:" in said and "  - cloud:" in said
    assert main(["run", "--config", example]) == 2
    assert capsys.readouterr().err == said
