"""What ``validate-config`` says of a value written as a person often writes it by mistake, whatever the key: an
environment variable (nothing expands it), a URL without its scheme (not a regular expression to read), and a name
or key that YAML read as a boolean (an unquoted no, off, yes or on)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.cli import main

POOLS = """\
demand_classes:
  - name: a
  - name: {class_name}
pools:
  - id: od
    kind: gpu-node-pool
    chips_per_unit: 8
    min_units: 0
    max_units: {max_units}
    price_per_chip_hour_usd: 3.0
    lead_time: 10m
    serves: [a, {class_name}]
"""


def _said(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> list[str]:
    """The problem lines ``validate-config`` prints for ``text``; it must refuse it."""
    config = tmp_path / "c.yaml"
    config.write_text(text)
    capsys.readouterr()
    assert main(["validate-config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"leadtime: invalid configuration {config}:\n")
    return [line.removeprefix("  - ") for line in err.splitlines()[1:]]


def _config(class_name: str = "b", max_units: str = "10", tail: str = "") -> str:
    return POOLS.format(class_name=class_name, max_units=max_units) + tail


@pytest.mark.parametrize("url", ["${PROM_URL}", "$PROM_URL", "http://${PROM_HOST}:9090", "https://$PROM_HOST/prom"])
def test_an_environment_variable_as_the_prometheus_url_is_said_to_be_not_expanded(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = _said(tmp_path, capsys, _config(tail=f"prometheus:\n  url: '{url}'\n"))
    assert lines == [
        f"prometheus.url: environment variables are not expanded in the configuration file (got {url!r}): a "
        "literal http(s)://host:port URL is needed"
    ]


def test_an_environment_variable_elsewhere_is_said_to_be_not_expanded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (line,) = _said(tmp_path, capsys, _config(max_units="'${MAX_UNITS}'"))
    assert line.startswith(
        "pools[0].max_units: environment variables are not expanded in the configuration file (got '${MAX_UNITS}'): "
        "write the value itself ("
    )


def test_a_price_in_dollars_is_not_taken_for_a_variable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (line,) = _said(tmp_path, capsys, _config(max_units="'$10'"))
    assert "environment variables" not in line and line.startswith("pools[0].max_units:")


def test_a_url_without_its_scheme_is_said_so_not_as_a_pattern(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = _said(tmp_path, capsys, _config(tail="prometheus:\n  url: prometheus:9090\n"))
    assert lines == ["prometheus.url: should be a URL, http(s)://host:port (got 'prometheus:9090')"]


@pytest.mark.parametrize(("written", "read"), [("no", "no, off or false"), ("on", "yes, on or true")])
def test_a_name_read_as_a_boolean_is_told_to_be_quoted(
    written: str, read: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    example = "no" if written == "no" else "yes"
    boolean = "false" if written == "no" else "true"
    told = f"should be text, but YAML reads an unquoted {read} as the boolean {boolean}; quote it: '{example}'"
    assert _said(tmp_path, capsys, _config(class_name=written)) == [
        f"demand_classes[1].name: {told}",
        f"pools[0].serves[1]: {told}",
    ]


def test_a_key_read_as_a_boolean_is_told_to_be_quoted_at_its_mapping(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tail = "energy:\n  pool_watts_per_chip:\n    off: 300\n"
    assert _said(tmp_path, capsys, _config(tail=tail)) == [
        "energy.pool_watts_per_chip: a key should be text, but YAML reads an unquoted no, off or false as the "
        "boolean false; quote it: 'no'"
    ]
