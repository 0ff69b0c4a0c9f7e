"""A TPU slice group is refused when the configuration is loaded if GKE does not offer its topology for its machine
type, at ``cloud.tpu_slice_groups[i].tpu_topology``, naming the topology and the shapes the machine type takes: GKE
refuses it at the first slice create, which came as an actuator failure hours after the file loaded. What is checked
is what Google's documentation states (the sources are beside each generation in ``config.cloud``): the v5e and v6e
slice shapes, the one shape of their single-host-only machine types, the v4 dimensions rule, and the number of
dimensions of the v3 (``ct3-``, ``ct3p-``) and Ironwood (``tpu7x-``) topologies. An Ironwood slice of more than one
host is refused too: GKE places it by a workload policy, not by the topology the agent creates slices with. A
topology not written as ``AxB`` or ``AxBxC`` of whole numbers from 1 (ASCII digits, no leading zeros, at most four
each) is refused in words, for every machine type."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from agent.cli import main
from config import settings_from_mapping
from config.reference import json_schema
from models import ConfigError
from tests.test_config_tpu_topologies import BASE, KEY, _slices

REFUSED = "GKE would refuse the first slice the agent creates"
# The shapes GKE offers on the 4-chip v5e and v6e machine types: every documented one but 1x1.
ON_FOUR_CHIPS = "2x2, 2x4, 4x4, 4x8, 8x8, 8x16, 16x16"


def _problems(config: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as error:
        settings_from_mapping(config)
    return [str(p) for p in error.value.problems]


def _loads(machine_type: str, topology: str) -> None:
    settings = settings_from_mapping(_slices(machine_type, topology))
    assert settings.cloud is not None
    mapping = settings.cloud.tpu_slice_groups[0]
    assert (mapping.machine_type, mapping.tpu_topology) == (machine_type, topology)


@pytest.mark.parametrize(
    ("machine_type", "topology", "generation"),
    [
        ("ct5lp-hightpu-4t", "2x8", "TPU v5e"),
        ("ct5lp-hightpu-4t", "4x2", "TPU v5e"),
        ("ct5lp-hightpu-4t", "16x32", "TPU v5e"),
        ("ct6e-standard-4t", "8x4", "TPU v6e"),
        ("ct6e-standard-4t", "4x12", "TPU v6e"),
    ],
)
def test_a_shape_gke_does_not_offer_is_refused_naming_the_shapes_the_machine_type_takes(
    machine_type: str, topology: str, generation: str
) -> None:
    assert _problems(_slices(machine_type, topology)) == [
        f"{KEY}: {topology} is not a slice shape GKE offers on machine type {machine_type} ({generation}), which "
        f"takes {ON_FOUR_CHIPS}: {REFUSED}"
    ]


def test_a_shape_of_an_uneven_number_of_hosts_is_refused_at_both_keys() -> None:
    """3x5 on v5e: 15 chips, no slice shape and no whole number of 4-chip hosts."""
    assert _problems(_slices("ct5lp-hightpu-4t", "3x5")) == [
        "cloud.tpu_slice_groups[0].chips_per_host: 15 chips do not split into hosts of 4",
        f"{KEY}: 3x5 is not a slice shape GKE offers on machine type ct5lp-hightpu-4t (TPU v5e), which takes "
        f"{ON_FOUR_CHIPS}: {REFUSED}",
    ]


@pytest.mark.parametrize("machine_type", ["ct5lp-hightpu-4t", "ct6e-standard-4t"])
@pytest.mark.parametrize("topology", ON_FOUR_CHIPS.split(", "))
def test_every_shape_gke_offers_on_the_four_chip_machine_types_loads(machine_type: str, topology: str) -> None:
    _loads(machine_type, topology)


@pytest.mark.parametrize(
    ("machine_type", "topology"),
    [("ct5lp-hightpu-1t", "1x1"), ("ct6e-standard-1t", "1x1"), ("ct5lp-hightpu-8t", "2x4"),
     ("ct6e-standard-8t", "2x4")],
)  # fmt: skip
def test_the_single_host_machine_types_load_in_their_shape(machine_type: str, topology: str) -> None:
    _loads(machine_type, topology)


@pytest.mark.parametrize(
    ("machine_type", "topology", "takes", "generation", "offered_on"),
    [
        ("ct5lp-hightpu-8t", "4x4", "2x4", "TPU v5e", "ct5lp-hightpu-4t"),
        ("ct5lp-hightpu-8t", "4x8", "2x4", "TPU v5e", "ct5lp-hightpu-4t"),
        ("ct5lp-hightpu-8t", "16x16", "2x4", "TPU v5e", "ct5lp-hightpu-4t"),
        ("ct5lp-hightpu-1t", "2x2", "1x1", "TPU v5e", "ct5lp-hightpu-4t"),
        ("ct5lp-hightpu-1t", "2x4", "1x1", "TPU v5e", "ct5lp-hightpu-4t and ct5lp-hightpu-8t"),
        ("ct6e-standard-1t", "2x2", "1x1", "TPU v6e", "ct6e-standard-4t"),
        ("ct6e-standard-1t", "2x4", "1x1", "TPU v6e", "ct6e-standard-4t and ct6e-standard-8t"),
        ("ct6e-standard-1t", "4x4", "1x1", "TPU v6e", "ct6e-standard-4t"),
        ("ct6e-standard-8t", "4x4", "2x4", "TPU v6e", "ct6e-standard-4t"),
        ("ct6e-standard-8t", "4x8", "2x4", "TPU v6e", "ct6e-standard-4t"),
        ("ct6e-standard-8t", "16x16", "2x4", "TPU v6e", "ct6e-standard-4t"),
    ],
)
def test_a_single_host_machine_type_in_a_multi_host_shape_is_refused_naming_where_it_is_offered(
    machine_type: str, topology: str, takes: str, generation: str, offered_on: str
) -> None:
    """GKE offers the 1- and 8-chip v5e and v6e machine types for one-VM slices only; the larger shapes are slices
    of 4-chip VMs. The message names the machine types that take the shape."""
    assert _problems(_slices(machine_type, topology)) == [
        f"{KEY}: {topology} is not a slice shape GKE offers on machine type {machine_type}, which takes {takes}; "
        f"{generation} slices of {topology} are offered on {offered_on}: {REFUSED}"
    ]


def test_a_shape_of_fewer_chips_than_a_host_is_refused_once_at_chips_per_host() -> None:
    assert _problems(_slices("ct5lp-hightpu-4t", "1x1")) == [
        "cloud.tpu_slice_groups[0].chips_per_host: 1 chips do not split into hosts of 4"
    ]


def test_a_machine_type_whose_hosts_fit_no_shape_is_told_so() -> None:
    problems = _problems(_slices("ct5lp-hightpu-3t", "2x8"))
    assert (
        f"{KEY}: 2x8 is not a slice shape GKE offers on machine type ct5lp-hightpu-3t (TPU v5e), which takes none "
        f"of TPU v5e's (1x1, 2x2, 2x4, 4x4, 4x8, 8x8, 8x16, 16x16): {REFUSED}"
    ) in problems


@pytest.mark.parametrize("topology", ["2x4x8", "4x4x6", "2x8x8", "1x2x12"])
def test_a_v4_topology_of_mixed_small_and_large_dimensions_is_refused(topology: str) -> None:
    assert _problems(_slices("ct4p-hightpu-4t", topology)) == [
        f"{KEY}: {topology} is not a TPU v4 topology (machine type ct4p-hightpu-4t): a TPU v4 topology's dimensions "
        f"must all be at most 4 or all be multiples of 4 (2x2x1, 2x2x4, 4x4x8, 8x8x16): {REFUSED}"
    ]


@pytest.mark.parametrize(
    "topology", ["2x2x1", "2x2x2", "2x2x4", "2x4x4", "4x4x4", "4x4x8", "4x8x8", "8x8x8", "8x8x16", "16x16x16"]
)
def test_a_v4_topology_of_small_or_multiple_of_4_dimensions_loads(topology: str) -> None:
    _loads("ct4p-hightpu-4t", topology)


@pytest.mark.parametrize(
    ("machine_type", "topology", "generation", "takes"),
    [
        ("ct3p-hightpu-4t", "2x2x4", "TPU v3", "2-D topologies only (AxB)"),
        ("ct3-hightpu-4t", "2x2x1", "TPU v3", "2-D topologies only (AxB)"),
        ("tpu7x-standard-4t", "4x4", "TPU7x (Ironwood)", "3-D topologies only (AxBxC, e.g. 2x2x1)"),
        ("tpu7x-standard-4t", "2x2", "TPU7x (Ironwood)", "3-D topologies only (AxBxC, e.g. 2x2x1)"),
    ],
)
def test_v3_and_ironwood_topologies_of_the_wrong_number_of_dimensions_are_refused(
    machine_type: str, topology: str, generation: str, takes: str
) -> None:
    dimensions = topology.count("x") + 1
    assert _problems(_slices(machine_type, topology)) == [
        f"{KEY}: {topology} is a {dimensions}-D topology but machine type {machine_type} is {generation}, which GKE "
        f"slices in {takes}: {REFUSED}"
    ]


@pytest.mark.parametrize(
    ("machine_type", "topology"),
    [("ct3-hightpu-4t", "2x2"), ("ct3p-hightpu-4t", "4x4"), ("ct3p-hightpu-4t", "8x16"),
     ("tpu7x-standard-4t", "2x2x1"), ("tpu7x-standard-4t", "1x2x2")],
)  # fmt: skip
def test_v3_and_single_host_ironwood_topologies_of_their_number_of_dimensions_load(
    machine_type: str, topology: str
) -> None:
    """Only their number of dimensions is checked (and Ironwood's one host): no list of the shapes GKE offers for
    them is cited."""
    _loads(machine_type, topology)


@pytest.mark.parametrize(("topology", "chips"), [("2x2x2", 8), ("2x2x4", 16), ("4x4x4", 64), ("8x16x16", 2048)])
def test_a_multi_host_ironwood_slice_is_refused_as_needing_a_workload_policy(topology: str, chips: int) -> None:
    """GKE places a multi-host Ironwood node pool by a workload policy, which replaces the TPU topology the agent
    creates every slice with (a COMPACT placement naming it): the slices could not be created."""
    assert _problems(_slices("tpu7x-standard-4t", topology)) == [
        f"{KEY}: {topology} ({chips} chips) is a multi-host slice of machine type tpu7x-standard-4t (4 chips per "
        "host): GKE creates a multi-host TPU7x (Ironwood) slice with a workload policy, which replaces the TPU "
        "topology other generations are created with, and the agent creates its slices with a topology and no "
        "workload policy, so it cannot create these; use single-host slices (2x2x1, one host of 4 chips) for this "
        "group, or a machine type of another TPU generation for multi-host slices"
    ]


FORM = (
    "should be a slice topology, AxB or AxBxC of whole numbers from 1 (at most 4 digits, no leading zeros), e.g. 4x4 "
    "or 2x2x1"
)
NOT_A_TOPOLOGY = [
    "1" * 4301 + "x1",  # int() of more than 4300 digits raised ValueError, not a config error
    "\u0664x\u0664",  # Arabic-Indic digits, which a regex's \d takes for 4
    "04x4x1",
    "4x04",
    "0x4",
    "10000x1",
    "4X4",
    "4x4x4x4",
    "4x",
    "4x4\n",
    " 4x4",
]


@pytest.mark.parametrize("machine_type", ["ct5lp-hightpu-4t", "tpu-custom"])
@pytest.mark.parametrize("topology", NOT_A_TOPOLOGY, ids=lambda t: repr(t)[:12])
def test_a_topology_not_written_as_whole_numbers_is_refused_in_words(machine_type: str, topology: str) -> None:
    """A type whose shapes are listed and one not known here alike; the message says the form, not the pattern."""
    config = copy.deepcopy(BASE)  # the pool's chips stay 16: the topology's are not computed
    config["cloud"]["tpu_slice_groups"][0].update(machine_type=machine_type, tpu_topology=topology)
    assert _problems(config) == [f"{KEY}: {FORM} (got {topology!r})"]


# Python's re, which the jsonschema package matches patterns with, lets '$' match before a final newline (an editor's
# JavaScript regex does not): that case is the loader's alone.
@pytest.mark.parametrize("topology", [t for t in NOT_A_TOPOLOGY if not t.endswith("\n")])
def test_the_json_schema_refuses_what_the_loader_refuses_as_a_topology(topology: str) -> None:
    config = _slices("ct5lp-hightpu-4t", "4x4")
    config["cloud"]["tpu_slice_groups"][0]["tpu_topology"] = topology
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(config, json_schema())


@pytest.mark.parametrize(("machine_type", "topology"), [("tpu-custom", "1000x4"), ("ct5p-hightpu-4t", "16x16x24")])
def test_a_topology_of_four_digit_and_two_digit_numbers_loads(machine_type: str, topology: str) -> None:
    _loads(machine_type, topology)


def test_validate_config_prints_a_topology_not_written_as_whole_numbers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = copy.deepcopy(BASE)
    config["cloud"]["tpu_slice_groups"][0]["tpu_topology"] = "04x4"
    path = tmp_path / "slices.yaml"
    path.write_text(yaml.safe_dump(config))
    capsys.readouterr()
    assert main(["validate-config", str(path)]) == 2
    assert f"  - {KEY}: {FORM} (got '04x4')" in capsys.readouterr().err


def test_validate_config_prints_the_shape_not_offered(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "slices.yaml"
    path.write_text(yaml.safe_dump(_slices("ct5lp-hightpu-8t", "4x8")))
    capsys.readouterr()
    assert main(["validate-config", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"  - {KEY}: 4x8 is not a slice shape GKE offers on machine type ct5lp-hightpu-8t, which takes 2x4" in err


@pytest.mark.parametrize("path", sorted((Path(__file__).resolve().parents[1] / "config" / "examples").glob("*.yaml")))
def test_the_shipped_examples_still_load(path: Path) -> None:
    assert main(["validate-config", str(path)]) == 0
