"""A fixed choice (a key that takes one of a few words: ``daemon.mode``, ``cloud.node_pools[].gke_autoscaling``,
``pools[].kind``, ``demand_classes[].family``...) written as an unquoted yes, no, on or off is read by YAML as a
boolean; ``validate-config`` says so with the word as written and how to quote it, where it said only that the value
is not one of the choices (``got False``). A true or false written so, and a boolean given in code, are not told to
be quoted: no such word was written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent.cli import main
from config import settings_from_mapping
from models import ConfigError

CONFIG = """\
demand_classes:
  - name: a
    family: {family}
pools:
  - id: od
    kind: {kind}
    chips_per_unit: 8
    min_units: 0
    max_units: 10
    price_per_chip_hour_usd: 3.0
    lead_time: 10m
    serves: [a]
"""
CLOUD = """\
cloud:
  project: p
  location: us-central1
  cluster: ml
  node_pools:
    - pool: od
      node_pool: od-pool
      gke_autoscaling: {value}
"""
FAMILIES = "Input should be 'gpu' or 'tpu'"
KINDS = "Input should be 'on-prem', 'gpu-node-pool', 'tpu-slice-group' or 'tpu-queued-resource'"


def _said(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> list[str]:
    """The problem lines ``validate-config`` prints for ``text``; it must refuse it."""
    config = tmp_path / "c.yaml"
    config.write_text(text)
    capsys.readouterr()
    assert main(["validate-config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"leadtime: invalid configuration {config}:\n")
    return [line.removeprefix("  - ") for line in err.splitlines()[1:]]


def _config(family: str = "gpu", kind: str = "gpu-node-pool", tail: str = "") -> str:
    return CONFIG.format(family=family, kind=kind) + tail


@pytest.mark.parametrize(
    ("tail", "said"),
    [
        ("daemon:\n  mode: off\n",
         "daemon.mode: Input should be 'dry-run' or 'enforce'; YAML reads off as false: quote it ('off')"),
        ("daemon:\n  mode: On\n",
         "daemon.mode: Input should be 'dry-run' or 'enforce'; YAML reads On as true: quote it ('On')"),
        (CLOUD.format(value="no"),
         "cloud.node_pools[0].gke_autoscaling: Input should be 'refuse' or 'move-bounds'; YAML reads no as false: "
         "quote it ('no')"),
        ("ledger:\n  backend: sqlite\n  path: l.db\n  sslmode: YES\n",
         "ledger.sslmode: Input should be 'disable', 'allow', 'prefer', 'require', 'verify-ca' or 'verify-full'; "
         "YAML reads YES as true: quote it ('YES')"),
        ("prometheus:\n  url: http://prometheus:9090\n  demand_metrics: off\n",
         "prometheus.demand_metrics: Input should be 'kueue' or 'kube-state-metrics'; YAML reads off as false: "
         "quote it ('off')"),
        ("forecast:\n  model: no\n",
         "forecast.model: Input should be 'auto', 'naive', 'persistence', 'last-value', 'seasonal_naive', 'ets', "
         "'stl' or 'lightgbm'; YAML reads no as false: quote it ('no')"),
    ],
)  # fmt: skip
def test_a_literal_choice_read_as_a_boolean_is_told_to_be_quoted(
    tail: str, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _said(tmp_path, capsys, _config(tail=tail)) == [said]


def test_an_enum_choice_read_as_a_boolean_is_told_to_be_quoted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _said(tmp_path, capsys, _config(family="No", kind="yes")) == [
        f"demand_classes[0].family: {FAMILIES}; YAML reads No as false: quote it ('No')",
        f"pools[0].kind: {KINDS}; YAML reads yes as true: quote it ('yes')",
    ]


def test_a_choice_brought_by_a_merge_key_is_told_at_the_key_that_takes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tail = "defaults: &defaults\n  mode: off\ndaemon:\n  <<: *defaults\n"
    lines = _said(tmp_path, capsys, _config(tail=tail))
    assert "daemon.mode: Input should be 'dry-run' or 'enforce'; YAML reads off as false: quote it ('off')" in lines


@pytest.mark.parametrize(("written", "read"), [("false", "False"), ("True", "True")])
def test_a_true_or_false_written_as_such_is_not_told_to_be_quoted(
    written: str, read: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _said(tmp_path, capsys, _config(tail=f"daemon:\n  mode: {written}\n")) == [
        f"daemon.mode: Input should be 'dry-run' or 'enforce' (got {read})"
    ]


def test_the_quoted_word_is_refused_as_the_text_it_is(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Quoted, the word is text: the choices it is not among are said with it."""
    assert _said(tmp_path, capsys, _config(tail="daemon:\n  mode: 'off'\n")) == [
        "daemon.mode: Input should be 'dry-run' or 'enforce' (got 'off')"
    ]


def test_a_boolean_given_in_code_is_not_told_of_yaml() -> None:
    config: dict[str, Any] = {
        "demand_classes": [{"name": "a"}],
        "pools": [
            {"id": "od", "kind": "gpu-node-pool", "chips_per_unit": 8, "max_units": 10, "price_per_chip_hour_usd": 3.0,
             "lead_time": "10m", "serves": ["a"]},
        ],
        "daemon": {"mode": False},
    }  # fmt: skip
    with pytest.raises(ConfigError) as error:
        settings_from_mapping(config)
    assert [str(p) for p in error.value.problems] == ["daemon.mode: Input should be 'dry-run' or 'enforce' (got False)"]
