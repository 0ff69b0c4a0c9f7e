"""A TPU slice group whose topology has another number of dimensions than its machine type's TPU generation takes
(``2x2x4`` on a v5e ``ct5lp-*``, ``4x4`` on a v5p ``ct5p-*`` or v4 ``ct4p-*``) is refused when the configuration is
loaded, at ``cloud.tpu_slice_groups[i].tpu_topology``, saying what the generation takes: GKE refuses it at the first
slice create, which came as an actuator failure hours after the file loaded. A machine type of a generation not
known here (one GKE adds later) loads, without a warning."""

from __future__ import annotations

import copy
import logging
import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.cli import main
from config import settings_from_mapping
from models import ConfigError

BASE: dict[str, Any] = {
    "demand_classes": [{"name": "tpu", "family": "tpu"}],
    "pools": [
        {"id": "slices", "kind": "tpu-slice-group", "family": "tpu", "chips_per_unit": 16, "max_units": 4,
         "price_per_chip_hour_usd": 1.2, "lead_time": "30m", "serves": ["tpu"]},
    ],
    "cloud": {
        "project": "p",
        "location": "us-central1",
        "cluster": "ml",
        "tpu_slice_groups": [
            {"pool": "slices", "group": "slices", "machine_type": "ct5lp-hightpu-4t", "tpu_topology": "4x4",
             "zone": "us-central1-a", "service_account": "tpu-nodes@p.iam.gserviceaccount.com"},
        ],
    },
}  # fmt: skip

KEY = "cloud.tpu_slice_groups[0].tpu_topology"
TWO_D = "2-D topologies only (AxB, e.g. 4x4)"
THREE_D = "3-D topologies only (AxBxC, e.g. 2x2x4)"


def _slices(machine_type: str, topology: str) -> dict[str, Any]:
    """The base configuration with one slice group of ``machine_type`` and ``topology``, the pool counting the
    topology's chips (so that only the shape can be wrong)."""
    config = copy.deepcopy(BASE)
    config["cloud"]["tpu_slice_groups"][0].update(machine_type=machine_type, tpu_topology=topology)
    config["pools"][0]["chips_per_unit"] = math.prod(int(d) for d in topology.split("x"))
    return config


@pytest.mark.parametrize(
    ("machine_type", "topology", "generation", "takes"),
    [
        ("ct5lp-hightpu-4t", "2x2x4", "TPU v5e", TWO_D),
        ("ct5lp-hightpu-8t", "2x2x2", "TPU v5e", TWO_D),
        ("ct6e-standard-4t", "2x2x4", "TPU v6e", TWO_D),
        ("ct6e-standard-8t", "2x4x4", "TPU v6e", TWO_D),
        ("ct5p-hightpu-4t", "4x4", "TPU v5p", THREE_D),
        ("ct4p-hightpu-4t", "2x8", "TPU v4", THREE_D),
    ],
)
def test_a_topology_of_the_wrong_shape_for_the_generation_is_refused_at_its_key(
    machine_type: str, topology: str, generation: str, takes: str
) -> None:
    with pytest.raises(ConfigError) as error:
        settings_from_mapping(_slices(machine_type, topology))
    dimensions = topology.count("x") + 1
    assert [str(p) for p in error.value.problems] == [
        f"{KEY}: {topology} is a {dimensions}-D topology but machine type {machine_type} is {generation}, which GKE "
        f"slices in {takes}: GKE would refuse the first slice the agent creates"
    ]


@pytest.mark.parametrize(
    ("machine_type", "topology"),
    [
        ("ct5lp-hightpu-4t", "4x4"),
        ("ct5lp-hightpu-1t", "1x1"),
        ("ct6e-standard-8t", "2x4"),
        ("ct6e-standard-4t", "2x2"),
        ("ct5p-hightpu-4t", "2x2x4"),
        ("ct5p-hightpu-4t", "2x2x1"),
        ("ct4p-hightpu-4t", "2x2x2"),
    ],
)
def test_a_topology_of_the_generations_shape_loads(machine_type: str, topology: str) -> None:
    settings = settings_from_mapping(_slices(machine_type, topology))
    assert settings.cloud is not None and settings.cloud.tpu_slice_groups[0].tpu_topology == topology


@pytest.mark.parametrize(
    ("machine_type", "topology"),
    [("ct9x-standard-4t", "2x2x4"), ("ct9x-standard-4t", "4x4"), ("tpu-custom", "2x2x4"), ("tpu-custom", "4x4")],
)
def test_a_generation_not_known_here_loads_without_a_warning(
    machine_type: str, topology: str, caplog: pytest.LogCaptureFixture
) -> None:
    """GKE may add a generation: its well-formed machine type is not blocked, nor warned about."""
    with caplog.at_level(logging.WARNING):
        settings = settings_from_mapping(_slices(machine_type, topology))
    assert settings.cloud is not None and settings.cloud.tpu_slice_groups[0].machine_type == machine_type
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_each_slice_group_is_checked_at_its_own_index() -> None:
    config = _slices("ct5lp-hightpu-4t", "4x4")
    config["pools"].append({**config["pools"][0], "id": "v5p", "chips_per_unit": 16})
    config["cloud"]["tpu_slice_groups"].append(
        {**config["cloud"]["tpu_slice_groups"][0], "pool": "v5p", "group": "v5p", "machine_type": "ct5p-hightpu-4t"}
    )
    with pytest.raises(ConfigError) as error:
        settings_from_mapping(config)
    assert [p.key_path for p in error.value.problems] == ["cloud.tpu_slice_groups[1].tpu_topology"]


def test_validate_config_prints_the_refused_topology(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "slices.yaml"
    path.write_text(yaml.safe_dump(_slices("ct5lp-hightpu-4t", "2x2x4")))
    capsys.readouterr()
    assert main(["validate-config", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"  - {KEY}: 2x2x4 is a 3-D topology but machine type ct5lp-hightpu-4t is TPU v5e" in err
