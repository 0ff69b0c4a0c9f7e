"""The Grafana dashboard shows the leading replica's plan, not a former leader's: Prometheus keeps a replica's
last values for as long as it is scraped, and a ``max by (pool)`` over both replicas showed a replica's last
plan after it stopped leading (an older release, or one whose gauges have not been cleared yet), beside or over
the leader's. Each panel's query is evaluated by ``promtool test rules`` on two replicas' series: the leader's,
and a standby's that still carries larger values from when it led.

Its tick panels tell a blind leader (its ticks run but read no demand class or no pool): the time since the
leader's last successful tick, not the standby's, and the failed ticks with the blind ones."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.test_monitoring import _dashboard, _dashboard_queries

PROMTOOL = shutil.which("promtool")
pytestmark = pytest.mark.skipif(PROMTOOL is None, reason="promtool (Debian package prometheus) is not installed")

# What each replica's latest leader tick exports, with the labels the agent gives them.
LEADER_SERIES = {
    "leadtime_demand_observed_accelerators": {"demand_class": "earth/vc6YE"},
    "leadtime_forecast_accelerators": {"demand_class": "earth/vc6YE", "quantile": "0.9"},
    "leadtime_pool_recommended_units": {"pool": "a100"},
    "leadtime_pool_target_units": {"pool": "a100"},
    "leadtime_pool_ready_units": {"pool": "a100"},
    "leadtime_pool_failed_units": {"pool": "a100"},
    "leadtime_budget_spent_usd": {"budget": "research"},
    "leadtime_budget_projected_usd": {"budget": "research"},
    "leadtime_budget_remaining_usd": {"budget": "research"},
}
LEADER, FORMER = 'instance="10.0.0.1:8080"', 'instance="10.0.0.2:8080"'
NOW, STALE = 3, 70  # the leader's value, and the former leader's last one


def _selector(labels: dict[str, str], instance: str) -> str:
    return "{" + ", ".join(['job="leadtime"', instance, *(f'{k}="{v}"' for k, v in labels.items())]) + "}"


def _panel_queries() -> list[tuple[str, str]]:
    """Each dashboard query that reads one of the series above, with the series it reads."""
    found = []
    for query in _dashboard_queries():
        named = [name for name in LEADER_SERIES if re.search(rf"\b{name}\b", query)]
        if named:
            (name,) = named
            found.append((name, query.replace("$job", ".*").replace("$__rate_interval", "5m")))
    return found


def test_every_panel_of_the_latest_plan_shows_the_leaders_values_only(tmp_path: Path) -> None:
    panels = _panel_queries()
    assert {name for name, _ in panels} == set(LEADER_SERIES)
    series: list[dict[str, Any]] = [
        {"series": f"leadtime_is_leader{_selector({}, LEADER)}", "values": "1x10"},
        {"series": f"leadtime_is_leader{_selector({}, FORMER)}", "values": "0x10"},
    ]
    for name, labels in LEADER_SERIES.items():
        series.append({"series": f"{name}{_selector(labels, LEADER)}", "values": f"{NOW}x10"})
        series.append({"series": f"{name}{_selector(labels, FORMER)}", "values": f"{STALE}x10"})
    checks = []
    for name, query in panels:
        by = re.search(r"max by \(([^)]*)\)", query)
        assert by is not None, query
        labels = {key.strip(): LEADER_SERIES[name][key.strip()] for key in by.group(1).split(",")}
        shown = "{" + ", ".join(f'{k}="{v}"' for k, v in labels.items()) + "}"
        checks.append({"expr": query, "eval_time": "5m", "exp_samples": [{"labels": shown, "value": NOW}]})
    _promtool_test(tmp_path, series, checks)


def _panel(title: str) -> str:
    """The one query of the panel titled ``title``, with Grafana's variables as Grafana would substitute them."""
    (panel,) = [p for p in _dashboard()["panels"] if p["title"] == title]
    (target,) = panel["targets"]
    return str(target["expr"]).replace("$job", ".*").replace("$__rate_interval", "5m")


def test_the_tick_panels_tell_a_blind_leader_beside_a_healthy_standby(tmp_path: Path) -> None:
    # An hour in: the leader's ticks have been blind for 50 minutes (its last success at 600 s), the standby's
    # ticks succeed every minute.
    series: list[dict[str, Any]] = [
        {"series": f"leadtime_is_leader{_selector({}, LEADER)}", "values": "1x60"},
        {"series": f"leadtime_is_leader{_selector({}, FORMER)}", "values": "0x60"},
        {"series": f"leadtime_last_successful_tick_timestamp_seconds{_selector({}, LEADER)}", "values": "600x60"},
        {"series": f"leadtime_last_successful_tick_timestamp_seconds{_selector({}, FORMER)}", "values": "0+60x60"},
        {
            "series": f"leadtime_ticks_total{_selector({'role': 'leader', 'outcome': 'blind'}, LEADER)}",
            "values": "0+1x60",
        },
        {
            "series": f"leadtime_ticks_total{_selector({'role': 'standby', 'outcome': 'ok'}, FORMER)}",
            "values": "0+1x60",
        },
    ]
    since = _panel("Since the leader's last successful tick")
    failing = _panel("Failed or blind ticks (1h)")
    checks = [
        {"expr": since, "eval_time": "60m", "exp_samples": [{"labels": "{}", "value": 3600 - 600}]},
        {"expr": f"({failing}) > bool 0", "eval_time": "60m", "exp_samples": [{"labels": "{}", "value": 1}]},
    ]
    _promtool_test(tmp_path, series, checks)


def _promtool_test(tmp_path: Path, series: list[dict[str, Any]], checks: list[dict[str, Any]]) -> None:
    (tmp_path / "none.yaml").write_text(yaml.safe_dump({"groups": []}))
    test = {
        "rule_files": ["none.yaml"],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": series, "promql_expr_test": checks}],
    }
    (tmp_path / "dashboard_test.yaml").write_text(yaml.safe_dump(test, sort_keys=False))
    assert PROMTOOL is not None
    result = subprocess.run(
        [PROMTOOL, "test", "rules", "dashboard_test.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
