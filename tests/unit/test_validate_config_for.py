"""``validate-config --for run`` rejects exactly what ``leadtime run`` would reject before connecting."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "config" / "examples" / "helios-earth.yaml"


def test_a_file_fine_for_simulate_is_refused_for_run_naming_both_sections(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["validate-config", str(EXAMPLE)]) == 0
    assert main(["validate-config", str(EXAMPLE), "--for", "simulate"]) == 0
    capsys.readouterr()
    assert main(["validate-config", str(EXAMPLE), "--for", "run"]) == 2
    err = capsys.readouterr().err
    assert "prometheus" in err and "cloud" in err
    # What `run` itself says about the same file, before it connects to anything.
    assert main(["run", "--config", str(EXAMPLE)]) == 2
    assert capsys.readouterr().err == err


def test_recommend_needs_prometheus(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate-config", str(EXAMPLE), "--for", "recommend"]) == 2
    assert "prometheus" in capsys.readouterr().err


def test_a_complete_daemon_config_passes_for_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = EXAMPLE.read_text()
    config = tmp_path / "live.yaml"
    config.write_text(
        text
        + "\nprometheus:\n  url: http://127.0.0.1:9090\n"
        + "cloud:\n  project: p\n  location: us-central1\n  cluster: c\n"
        + "  node_pools:\n    - {pool: a100-on-demand, node_pool: a100-pool}\n"
    )
    assert main(["validate-config", str(config), "--for", "run"]) == 0
    assert "ok for run" in capsys.readouterr().out
