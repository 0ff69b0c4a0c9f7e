"""The monitoring component in ``deploy/components/monitoring``: its alert rules pass ``promtool check rules``
and their unit tests (each alert fires on the series that should fire it, and not on the healthy case), the
Grafana dashboard's queries parse, and every metric the rules and the dashboard name is one the agent exposes."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry
from prometheus_client.registry import Collector

from actuators.instrumented import InstrumentedActuator
from agent.daemon.metrics import BackoffCollector, BudgetLedgerCollector, DaemonMetrics, ScaleUpWaitCollector
from agent.daemon.shadow_book import ShadowBook, ShadowCollector
from agent.notify.queued import AlertQueueCollector
from models.clock import SystemClock
from tests.daemon.manifests import DEPLOY, KUBECTL, find, render

COMPONENT = DEPLOY / "components" / "monitoring"
RULES_TEST = Path(__file__).with_name("monitoring_rules_test.yaml")
PROMTOOL = shutil.which("promtool")

pytestmark = pytest.mark.skipif(PROMTOOL is None, reason="promtool (Debian package prometheus) is not installed")

_METRIC = re.compile(r"\bleadtime_[a-z_]+\b")
_SUFFIXES = ("", "_total", "_bucket", "_sum", "_count", "_created")


def _promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


def _rule_groups() -> list[dict[str, Any]]:
    rule = yaml.safe_load((COMPONENT / "prometheusrule.yaml").read_text())
    assert rule["kind"] == "PrometheusRule"
    return list(rule["spec"]["groups"])


def _dashboard() -> dict[str, Any]:
    return dict(json.loads((COMPONENT / "leadtime-dashboard.json").read_text()))


def _dashboard_queries() -> list[str]:
    return [target["expr"] for panel in _dashboard()["panels"] for target in panel["targets"]]


class _Queue:
    queued = 0
    dropped_total = 0
    rejected = 0
    webhook_refused = False


def _exposed_names() -> set[str]:
    """Every sample name the agent's /metrics can carry, from its own collectors."""
    actuators = CollectorRegistry()
    InstrumentedActuator(object(), actuators, unit_gauges=False)  # type: ignore[arg-type]
    shadow = ShadowCollector(ShadowBook([], [], timedelta(hours=1)))
    backoffs = BackoffCollector(lambda: None, SystemClock())
    ledgers = BudgetLedgerCollector(lambda: [])
    daemon = DaemonMetrics()
    daemon.record_model(datetime(2026, 1, 1, tzinfo=UTC), pending=False)  # the model's gauges appear at its first fit
    collectors: list[Collector] = [
        daemon.registry,
        actuators,
        AlertQueueCollector(_Queue()),  # type: ignore[arg-type]
        shadow,
        backoffs,
        ledgers,
        ScaleUpWaitCollector(lambda: None),
    ]
    names: set[str] = set()
    for collector in collectors:
        for family in collector.collect():
            names.update(family.name + suffix for suffix in _SUFFIXES)
    return names


def test_the_rules_pass_promtool_check(tmp_path: Path) -> None:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": _rule_groups()}))
    result = _promtool("check", "rules", "rules.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {sum(len(group['rules']) for group in _rule_groups())} rules found" in result.stdout


def test_every_alert_fires_when_it_should_and_only_then(tmp_path: Path) -> None:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": _rule_groups()}))
    shutil.copy(RULES_TEST, tmp_path / "rules_test.yaml")
    result = _promtool("test", "rules", "rules_test.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    tested = set(re.findall(r"alertname: (\w+)", RULES_TEST.read_text()))
    defined = {rule["alert"] for group in _rule_groups() for rule in group["rules"]}
    assert tested == defined, f"alerts without a unit test: {sorted(defined - tested)}"


def test_the_dashboard_queries_parse(tmp_path: Path) -> None:
    queries = _dashboard_queries()
    assert len(queries) >= 10
    # Grafana's variables, as Grafana would substitute them before sending the query.
    concrete = [q.replace("$job", ".*").replace("$__rate_interval", "5m") for q in queries]
    rules = [{"record": f"dashboard:query_{i}", "expr": q} for i, q in enumerate(concrete)]
    (tmp_path / "dashboard.yaml").write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    result = _promtool("check", "rules", "dashboard.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_rules_and_dashboard_name_only_metrics_the_agent_exposes() -> None:
    exposed = _exposed_names()
    rule_exprs = [str(rule["expr"]) for group in _rule_groups() for rule in group["rules"]]
    named = {m for expr in [*rule_exprs, *_dashboard_queries()] for m in _METRIC.findall(expr)}
    assert named, "no leadtime_ metric found in the rules or the dashboard"
    assert named <= exposed, f"not exposed by the agent: {sorted(named - exposed)}"


def test_a_misspelt_metric_would_be_caught() -> None:
    # The check above compares against the agent's real collectors, not against a list kept by hand.
    assert "leadtime_pool_ready_units" in _exposed_names()
    assert "leadtime_pool_ready_nodes" not in _exposed_names()


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed: it renders the kustomize overlays")
@pytest.mark.xdist_group("kustomize")
def test_the_component_renders_into_an_overlay(tmp_path: Path) -> None:
    # kustomize takes only relative paths: an overlay beside the shipped ones, in a copy of deploy/.
    root = tmp_path / "deploy"
    shutil.copytree(DEPLOY, root)
    overlay = root / "overlays" / "monitored"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": ["../dry-run"],
                "components": ["../../components/monitoring"],
            }
        )
    )
    objects = render("overlays/monitored", root=root)
    (rule,) = find(objects, "PrometheusRule", "leadtime")
    assert rule["metadata"]["namespace"] == "leadtime"
    (dashboard,) = find(objects, "ConfigMap", "leadtime-grafana-dashboard")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["leadtime-dashboard.json"]) == _dashboard()


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed: it renders the kustomize overlays")
@pytest.mark.xdist_group("kustomize")
def test_the_docs_overlay_labels_rule_and_monitor_for_a_default_kube_prometheus_stack(tmp_path: Path) -> None:
    """A default kube-prometheus-stack Prometheus selects only PrometheusRules and ServiceMonitors labelled
    ``release: <release name>``: the overlay docs/install.md shows must give both that label, and change no
    selector (the Deployment's and the ServiceMonitor's still match the agent's pods and Service)."""
    install_doc = (DEPLOY.parent / "docs" / "install.md").read_text()
    monitoring = install_doc.split("## 4. Monitoring", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```yaml\n(.*?)```", monitoring, re.DOTALL)
    assert len(blocks) == 1, "docs/install.md's monitoring section shows one overlay"
    overlay = yaml.safe_load(blocks[0])
    (release,) = {pairs["pairs"]["release"] for pairs in overlay.get("labels", []) if "release" in pairs["pairs"]}
    # The doc's overlay sits two levels below a checkout: ../../deploy/... from it is the repository's deploy/.
    shutil.copytree(DEPLOY, tmp_path / "deploy")
    mine = tmp_path / "overlays" / "mine"
    mine.mkdir(parents=True)
    (mine / "kustomization.yaml").write_text(blocks[0])
    objects = render("overlays/mine", root=tmp_path)
    selected = {"release": release}
    (rule,) = find(objects, "PrometheusRule", "leadtime")
    (monitor,) = find(objects, "ServiceMonitor", "leadtime")
    for obj in (rule, monitor):
        assert selected.items() <= obj["metadata"]["labels"].items(), f"{obj['kind']} lacks the release label"
    (deployment,) = find(objects, "Deployment", "leadtime")
    assert "release" not in deployment["spec"]["selector"]["matchLabels"]
    assert "release" not in monitor["spec"]["selector"]["matchLabels"]
    (service,) = find(objects, "Service", "leadtime-metrics")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
