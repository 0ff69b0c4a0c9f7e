"""``leadtime export-trace`` takes the start of the history either as ``--since`` (counted back from ``--end``) or
as ``--start``: given both, it says so and reads nothing, instead of ignoring ``--since``."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.cli import main
from tests.conftest import EXAMPLES


@pytest.mark.parametrize("end", [[], ["--end", "2024-03-08T00:00:00+00:00"]])
def test_since_and_start_together_are_refused_naming_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], end: list[str]
) -> None:
    out = tmp_path / "trace.csv.gz"
    # The configuration is checked only after the flags: this one has no prometheus section, which would be the
    # refusal if --since were ignored.
    argv = ["export-trace", "--config", str(EXAMPLES / "helios-earth.yaml"), "--out", str(out)]
    assert main([*argv, "--since", "1d", "--start", "2024-03-01T00:00:00+00:00", *end]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == (
        "leadtime: export-trace: give either --since or --start, not both (--since counts the start back from --end)"
    )
    assert not out.exists()


def test_each_alone_goes_on_to_read_the_configuration(capsys: pytest.CaptureFixture[str]) -> None:
    for flag, value in (("--since", "1d"), ("--start", "2024-03-01T00:00:00+00:00")):
        argv = ["export-trace", "--config", str(EXAMPLES / "helios-earth.yaml"), "--out", "unused.csv", flag, value]
        assert main(argv) == 2
        assert "export-trace reads Prometheus: add a prometheus section (url)" in capsys.readouterr().err
