"""The example configuration each install manifest ships in the ConfigMap ``leadtime-config`` cannot act: applying
a manifest puts it back and rolls the Deployment before the user loads their configuration again (docs/install.md),
so an enforce agent refuses to start on it (exit 2, before it connects to anything), saying to load your
configuration; a dry-run agent, which changes nothing, and a configuration with a real project start as before."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.cli import main
from config import settings_from_mapping
from config.install_example import PLACEHOLDER_PROJECT, refuse_example_in_enforce
from models import ConfigError

ROOT = Path(__file__).resolve().parents[2]
MODES = ("dry-run", "enforce")


def shipped_config(mode: str) -> str:
    """The config.yaml of the ConfigMap leadtime-config in ``deploy/install/<mode>.yaml``."""
    objects = [o for o in yaml.safe_load_all((ROOT / "deploy" / "install" / f"{mode}.yaml").read_text()) if o]
    (config_map,) = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "leadtime-config"]
    return str(config_map["data"]["config.yaml"])


def _with_project(text: str, project: str) -> dict[str, Any]:
    raw: dict[str, Any] = yaml.safe_load(text)
    raw["cloud"]["project"] = project
    return raw


@pytest.mark.parametrize("mode", MODES)
def test_an_enforce_agent_refuses_the_example_each_manifest_ships(
    mode: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(shipped_config(mode))

    assert main(["run", "--config", str(config), "--mode", "enforce"]) == 2

    err = capsys.readouterr().err
    assert f"cloud.project: is '{PLACEHOLDER_PROJECT}', the placeholder of the example configuration" in err
    assert "Load your configuration into the ConfigMap leadtime-config and restart the Deployment" in err
    doc = " ".join((ROOT / "docs" / "install.md").read_text().split())
    quoted = re.search(r"its log saying `(cloud\.project: [^`]*) \.\.\. (Load [^`]*)`", doc)
    assert quoted and quoted[1] in " ".join(err.split()) and quoted[2] in err, "docs/install.md quotes another refusal"


def test_dry_run_and_a_real_project_are_not_refused() -> None:
    text = shipped_config("enforce")
    example = settings_from_mapping(yaml.safe_load(text), source="example")
    refuse_example_in_enforce(example, "dry-run", "example")  # shadow mode changes nothing: it may start
    mine = settings_from_mapping(_with_project(text, "my-project-1234"), source="mine")
    refuse_example_in_enforce(mine, "enforce", "mine")
    with pytest.raises(ConfigError, match=r"cloud\.project"):
        refuse_example_in_enforce(example, "enforce", "example")


def test_the_placeholder_is_no_google_cloud_project_id() -> None:
    """Project IDs are 6 to 30 lowercase letters, digits and hyphens, starting with a letter (Resource Manager's
    "Creating and managing projects"): no real project is refused."""
    assert re.fullmatch(r"[a-z][-a-z0-9]{4,28}[a-z0-9]", PLACEHOLDER_PROJECT) is None


def test_validate_config_for_run_refuses_what_an_enforce_run_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """validate-config --for run says what run would: the example in enforce mode (the file's daemon.mode) is refused
    with run's words; in dry-run it passes."""
    raw: dict[str, Any] = yaml.safe_load(shipped_config("enforce"))
    raw["daemon"]["mode"] = "enforce"
    enforce = tmp_path / "enforce.yaml"
    enforce.write_text(yaml.safe_dump(raw))
    raw["daemon"]["mode"] = "dry-run"
    dry_run = tmp_path / "dry-run.yaml"
    dry_run.write_text(yaml.safe_dump(raw))

    assert main(["validate-config", "--for", "run", str(enforce)]) == 2
    err = capsys.readouterr().err
    assert f"cloud.project: is '{PLACEHOLDER_PROJECT}', the placeholder of the example configuration" in err

    assert main(["validate-config", "--for", "run", str(dry_run)]) == 0
    assert "ok for run" in capsys.readouterr().out
