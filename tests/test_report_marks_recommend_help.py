"""``leadtime recommend --help`` says when the pools are read from the cloud: with a cloud (GKE) or an aws (EKS node
groups, EC2 Auto Scaling groups) section, both of which recommend reads."""

from __future__ import annotations

import pytest

from agent.cli import build_parser


def test_recommend_help_names_the_aws_section_beside_the_cloud_section(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args(["recommend", "--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "pools are read from the cloud when the configuration has a cloud or an aws section" in text
