"""Where the image's relative paths land. The pod's root filesystem is read-only, so the image's working directory
must be a writable volume of the Deployment: the default ``ledger.path`` (``leadtime-ledger.sqlite``, relative) and
the configurations docs/install.md says to start from must put the SQLite ledger on one, or the agent cannot open
its ledger ("Read-only file system") and crash-loops."""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from config import load_settings
from config.ledger import LedgerSettings
from tests.daemon.manifests import DEPLOY, find

ROOT = DEPLOY.parent
MODES = ("dry-run", "enforce")
# What docs/install.md says to start a configuration from; those that keep their ledger in a SQLite file (a memory
# or PostgreSQL ledger has no file to place).
STARTING_POINTS = [*sorted((ROOT / "config" / "examples").glob("*.yaml")), DEPLOY / "base" / "config.yaml"]
SQLITE_STARTING_POINTS = [p for p in STARTING_POINTS if load_settings(p).ledger.backend == "sqlite"]


def _workdir() -> PurePosixPath:
    """The working directory the runtime stage (the last FROM) leaves the container in; ``/`` without WORKDIR."""
    runtime = (DEPLOY / "Dockerfile").read_text().rsplit("\nFROM ", 1)[1]
    workdirs = re.findall(r"^WORKDIR\s+(\S+)\s*$", runtime, re.MULTILINE)
    return PurePosixPath(workdirs[-1]) if workdirs else PurePosixPath("/")


def _writable_mounts(mode: str) -> list[PurePosixPath]:
    """Mount paths of the agent container the pod can write to (its root filesystem is read-only)."""
    objects = [doc for doc in yaml.safe_load_all((DEPLOY / "install" / f"{mode}.yaml").read_text()) if doc]
    (deployment,) = find(objects, "Deployment", "leadtime")
    pod: dict[str, Any] = deployment["spec"]["template"]["spec"]
    (container,) = [c for c in pod["containers"] if c["name"] == "leadtime"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    volumes = {v["name"]: v for v in pod["volumes"]}
    return [
        PurePosixPath(m["mountPath"])
        for m in container["volumeMounts"]
        if not m.get("readOnly") and ({"emptyDir", "persistentVolumeClaim"} & volumes[m["name"]].keys())
    ]


def _on_a_writable_mount(path: PurePosixPath, mode: str) -> bool:
    return any(path.is_relative_to(mount) for mount in _writable_mounts(mode))


def test_the_image_works_in_a_writable_volume_of_the_deployment() -> None:
    default = PurePosixPath(LedgerSettings().path)
    assert not default.is_absolute()  # what the test is about: a relative default resolves against the workdir
    for mode in MODES:
        assert _on_a_writable_mount(_workdir() / default, mode), (
            f"{mode}: the default ledger.path resolves to {_workdir() / default}, on the read-only root filesystem"
        )


def test_the_starting_configurations_with_a_sqlite_ledger_are_checked() -> None:
    assert DEPLOY / "base" / "config.yaml" in SQLITE_STARTING_POINTS  # the one the install manifests carry


@pytest.mark.parametrize("config", SQLITE_STARTING_POINTS, ids=lambda p: str(Path(p).relative_to(ROOT)))
def test_every_starting_configuration_keeps_its_sqlite_ledger_on_a_writable_volume(config: Path) -> None:
    path = _workdir() / load_settings(config).ledger.path  # an absolute ledger.path replaces the workdir
    for mode in MODES:
        assert _on_a_writable_mount(path, mode), f"{mode}: {path} is on the read-only root filesystem"
