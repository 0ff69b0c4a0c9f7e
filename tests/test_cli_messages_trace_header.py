"""A trace whose header lacks required columns is refused naming the columns found and, where the cause shows in
them, what to change: a header written 'unique_id, ds, y' (spaces after the commas) or separated by semicolons
or tabs was refused naming only the columns missing, which the person could see were there."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from agent.sources.trace import read_trace
from models import TraceError
from tests.scenario.test_simulate import run_cli

ROW = "train-a100{sep}2024-03-01T00:00:00Z{sep}20.4\n"


def _refusal(path: Path) -> str:
    with pytest.raises(TraceError) as refused:
        read_trace(path)
    return str(refused.value)


def test_spaces_after_the_commas_are_named(tmp_path: Path) -> None:
    path = tmp_path / "spacey.csv"
    path.write_text("unique_id, ds, y\n" + ROW.format(sep=","))

    message = _refusal(path)
    assert "lacks column(s) ['ds', 'y']; found: ['unique_id', ' ds', ' y']" in message
    assert "the names have spaces around them (after the commas?): write the header as unique_id,ds,y" in message


@pytest.mark.parametrize(
    ("sep", "found", "name"), [(";", "'unique_id;ds;y'", "semicolons"), ("\t", r"'unique_id\tds\ty'", "tabs")]
)
def test_another_separator_is_named(tmp_path: Path, sep: str, found: str, name: str) -> None:
    path = tmp_path / "other.csv"
    path.write_text(f"unique_id{sep}ds{sep}y\n" + ROW.format(sep=sep))

    message = _refusal(path)
    assert f"lacks column(s) ['unique_id', 'ds', 'y']; found: [{found}]" in message
    assert f"the header is separated by {name}: the trace is comma-separated" in message


def test_other_names_are_listed_without_a_hint(tmp_path: Path) -> None:
    path = tmp_path / "named.csv"
    path.write_text("series,timestamp,value\n" + ROW.format(sep=","))

    message = _refusal(path)
    assert message.endswith(
        "lacks column(s) ['unique_id', 'ds', 'y']; found: ['series', 'timestamp', 'value']; expected "
        "['unique_id', 'ds', 'y'] (+ ['running', 'pending', 'capacity'])"
    )


def test_simulate_prints_the_columns_found(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "spacey.csv"
    trace.write_text("unique_id, ds, y\n" + ROW.format(sep=","))
    config = tmp_path / "c.yaml"
    pool = {"id": "p", "kind": "gpu-node-pool", "chips_per_unit": 8, "max_units": 4, "price_per_chip_hour_usd": 1.0}
    config.write_text(
        yaml.safe_dump(
            {
                "demand_classes": [{"name": "train-a100"}],
                "pools": [{**pool, "lead_time": "5m", "serves": ["train-a100"]}],
            }
        )
    )

    argv = ["simulate", "--config", str(config), "--trace", str(trace), "--out", str(tmp_path / "o"), "--no-progress"]
    assert run_cli(argv) == 2
    assert "found: ['unique_id', ' ds', ' y']" in capsys.readouterr().err
