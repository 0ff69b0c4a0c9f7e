"""A configured query with ``or vector(0)`` answers 0 while its exporter is down, which defeats the rule that missing
data is never zero: the class reads no demand, the on-prem pool no nodes. The configuration still loads, and a
warning at load names the key of each such query and says what to write instead; ``leadtime validate-config``
prints it, and every command that loads the file (``leadtime run`` among them) logs it."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.cli import main
from config import load_settings
from config.prometheus import has_zero_fallback

CLASS_QUERY = 'sum(kube_pod_container_resource_requests{namespace="team-a"})'
NODES_QUERY = 'count(kube_node_labels{label_pool="onprem-a100"})'


@pytest.mark.parametrize(
    ("query", "falls_back_to_zero"),
    [
        (f"{CLASS_QUERY} or vector(0)", True),
        (f"{CLASS_QUERY} or on() vector(0)", True),
        (f"{CLASS_QUERY}  OR  on ( )  vector ( 0 )", True),
        (f"({CLASS_QUERY}\n  or\n  vector(0.0))", True),
        (f"{CLASS_QUERY} or ignoring(cluster) (vector(0e0))", True),
        (f"{CLASS_QUERY} or vector(0x0)", True),
        (f"vector(0) or {CLASS_QUERY}", True),
        (f"{CLASS_QUERY} or vector(1)", False),  # not zero: the person asked for a floor
        (f"{CLASS_QUERY} or on() (0 * count(kube_namespace_created))", False),  # the fallback the README gives
        (CLASS_QUERY, False),
        ('sum(x{reason="or vector(0)"})', False),  # inside a string literal
        (f"{CLASS_QUERY} # or vector(0)", False),  # a comment
        ("sum(floor_vector(0))", False),
    ],
)
def test_a_constant_zero_operand_of_or_is_found_however_written(query: str, falls_back_to_zero: bool) -> None:
    assert has_zero_fallback(query) is falls_back_to_zero


def _config(tmp_path: Path, class_query: str, capacity_query: str) -> Path:
    document: dict[str, Any] = {
        "demand_classes": [{"name": "train"}],
        "pools": [
            {"id": "onprem", "kind": "on-prem", "chips_per_unit": 8, "min_units": 4, "max_units": 4,
             "price_per_chip_hour_usd": 0.0, "lead_time": "0s", "serves": ["train"]},
        ],
        "prometheus": {
            "url": "http://127.0.0.1:9090",
            "classes": {"train": {"query": class_query}},
            "pools": {"onprem": {"capacity_query": capacity_query}},
        },
    }  # fmt: skip
    path = tmp_path / "leadtime.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def test_validate_config_names_each_query_with_a_zero_fallback_and_says_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path, f"{CLASS_QUERY} or vector(0)", f"{NODES_QUERY} or on() vector(0)")

    assert main(["validate-config", str(config)]) == 0

    out, err = capsys.readouterr()
    assert "ok" in out
    lines = [line for line in err.splitlines() if "configuration check" in line]
    assert len(lines) == 2, err
    demand, nodes = lines
    assert "prometheus.classes.train.query: its `or vector(0)` answers 0 when the series it reads are missing" in demand
    assert "the class reads no demand where a query that answers nothing holds its pools" in demand
    assert "Drop the `or vector(0)`; where an absent series really means zero" in demand
    assert 'or on() (0 * count(kube_namespace_created{namespace="team-a"}))' in demand
    assert "prometheus.pools.onprem.capacity_query: its `or vector(0)`" in nodes
    assert "planned on its max_units" in nodes
    assert 'or on() (0 * count(kube_node_labels{label_pool="onprem-a100"}))' in nodes


def test_queries_without_a_constant_zero_load_with_no_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fallback = 'or on() (0 * count(kube_node_labels{label_pool="onprem-a100"}))'
    config = _config(tmp_path, CLASS_QUERY, f"{NODES_QUERY} {fallback}")

    assert main(["validate-config", str(config)]) == 0

    assert "configuration check" not in capsys.readouterr().err


def test_every_command_that_loads_the_file_logs_the_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """``leadtime run`` (and recommend, simulate) load the file with ``load_settings``: the warning is logged there,
    in the daemon's log format, before it connects to anything."""
    config = _config(tmp_path, f"{CLASS_QUERY} or vector(0)", NODES_QUERY)

    with caplog.at_level(logging.WARNING, logger="config.loader"):
        load_settings(config)

    (record,) = [r for r in caplog.records if r.name == "config.loader"]
    assert record.levelno == logging.WARNING
    assert "prometheus.classes.train.query: its `or vector(0)`" in record.getMessage()
