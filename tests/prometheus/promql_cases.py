"""PromQL evaluated by Prometheus' own engine, without a server: ``promtool test rules`` loads the given series
(promtool's expanding notation, ``'8x5'`` is 8 six times, one sample a minute) and checks each expression's answer
at an evaluation time against the expected samples, an empty list meaning "no answer at all" (how a default query
says a class is unavailable). promtool is part of the Debian package ``prometheus`` the other tests run."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

EVAL_AT = "3m"


@dataclass(frozen=True)
class Expect:
    """One expression and the samples it must answer with, as (PromQL label set, value); none for an empty
    answer."""

    expr: str
    samples: list[tuple[str, float]] = field(default_factory=list)


def assert_answers(tmp_path: Path, series: dict[str, str], expectations: list[Expect]) -> None:
    """Fails with promtool's report (each expression's expected and actual samples) unless every expression
    answers as expected over ``series`` (series selector -> values) at ``EVAL_AT``."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool must be on PATH (Debian package `prometheus`; `make prometheus`)")
    (tmp_path / "rules.yaml").write_text("groups: []\n", encoding="utf-8")
    test = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [{"series": name, "values": values} for name, values in series.items()],
                "promql_expr_test": [
                    {
                        "expr": expect.expr,
                        "eval_time": EVAL_AT,
                        "exp_samples": [{"labels": labels, "value": value} for labels, value in expect.samples],
                    }
                    for expect in expectations
                ],
            }
        ],
    }
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(test, sort_keys=False), encoding="utf-8")
    result = subprocess.run(
        [promtool, "test", "rules", "test.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout, result.stdout
