"""A pool is mapped to one cloud's resources: one mapped both in the ``aws`` section and in the ``cloud`` section
would be resized through AWS while its idle nodes are drained, and its capacity read, through GKE. Every command
refuses it, naming the second mapping's key and where the pool is mapped already."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "config" / "examples" / "hybrid-aws-gke.yaml"


@pytest.fixture(autouse=True)
def _not_in_a_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("LEADTIME_SLACK_WEBHOOK_URL", raising=False)


def _daemon_config(tmp_path: Path, node_pools: list[dict[str, Any]], raw: dict[str, Any] | None = None) -> Path:
    """The hybrid example (or ``raw``) with what a live daemon needs and ``node_pools`` in its cloud section;
    nothing listens on port 9, so nothing is reached."""
    raw = raw if raw is not None else yaml.safe_load(EXAMPLE.read_text())
    raw["prometheus"] = {"url": "http://127.0.0.1:9"}
    raw["daemon"] = {"leader_election": {"enabled": False}, "kubernetes": {"api_url": "http://127.0.0.1:9"}}
    raw["cloud"]["node_pools"] = node_pools
    path = tmp_path / "daemon.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.mark.parametrize(
    ("pool", "section"), [("aws-p4d-spot", "aws.auto_scaling_groups"), ("aws-p4d-on-demand", "aws.nodegroups")]
)
def test_a_pool_mapped_in_aws_and_in_gke_is_refused_naming_the_key(
    pool: str, section: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _daemon_config(tmp_path, [{"pool": pool, "node_pool": "gpu-pool"}])
    line = f"  - cloud.node_pools[0].pool: pool {pool!r} is already mapped in {section}; map each pool once\n"
    for purpose in ("any", "run"):
        capsys.readouterr()
        assert main(["validate-config", "--for", purpose, str(config)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"leadtime: invalid configuration {config}:\n")
        assert line in err


def test_each_pool_mapped_once_across_the_clouds_passes_for_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The check counts the pools, not the sections: a GKE node pool of its own beside the AWS ones is fine."""
    raw = yaml.safe_load(EXAMPLE.read_text())
    raw["pools"].append(dict(raw["pools"][2], id="gke-a100-on-demand"))
    path = _daemon_config(tmp_path, [{"pool": "gke-a100-on-demand", "node_pool": "a100-pool"}], raw)
    assert main(["validate-config", "--for", "run", str(path)]) == 0
    assert "ok for run" in capsys.readouterr().out
