"""README's `prometheus` example, one class selector per `demand_metrics` mode: the kube-state-metrics selector
loads and counts the pods it names, and the Kueue one given beside it loads under `kueue`. Under kube-state-metrics
the Kueue selector is refused: the query built from it is evaluated by promtool (``tests.prometheus.promql_cases``)
over a pending pod's requests and reads 0, the demand the README's example used to give a class whose jobs waited."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.sources.prometheus_queries import demand_queries
from config import settings_from_mapping
from config.prometheus import PrometheusSettings
from config.schema import Settings
from models import ConfigError
from tests.prometheus.promql_cases import Expect, assert_answers

README = Path(__file__).resolve().parents[1] / "README.md"
POOL = {"kind": "gpu-node-pool", "chips_per_unit": 8, "max_units": 4, "price_per_chip_hour_usd": 3.0,
        "lead_time": "10m"}  # fmt: skip
# kube-state-metrics' series of one pending pod asking for 8 GPUs in namespace research (labels as
# docs/metrics/workload/pod-metrics.md gives them, with the cluster label of README's cluster_selector), and the
# namespaces README's selector names (every one of its alternation must be reported).
PENDING_POD = {
    'kube_pod_container_resource_requests{namespace="research", pod="train-0", uid="u0", container="c", node="",'
    ' resource="nvidia_com_gpu", unit="integer", cluster="prod"}': "8x5",
    'kube_pod_status_phase{namespace="research", pod="train-0", uid="u0", phase="Pending", cluster="prod"}': "1x5",
    'kube_namespace_created{namespace="research", cluster="prod"}': "1x5",
    'kube_namespace_created{namespace="research-batch", cluster="prod"}': "1x5",
    'kube_node_info{node="n1", cluster="prod"}': "1x5",
}


def _readme_prometheus() -> tuple[dict[str, Any], str]:
    """README's `prometheus:` example of "Reading demand from Prometheus", and the Kueue class line it comments."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Reading demand from Prometheus") :]
    block = section[section.index("```yaml\n") + len("```yaml\n") :]
    block = block[: block.index("```")]
    [kueue_line] = [line for line in block.splitlines() if line.strip().startswith("#   gpu-a100:")]
    prometheus = yaml.safe_load(block)["prometheus"]
    return prometheus, kueue_line.strip()[1:].strip()


def _config(prometheus: dict[str, Any]) -> dict[str, Any]:
    return {
        "demand_classes": [{"name": "gpu-a100"}, {"name": "tpu-v5e", "family": "tpu"}],
        "pools": [
            {**POOL, "id": "a100-spot", "serves": ["gpu-a100"]},
            {**POOL, "id": "v5e", "kind": "tpu-slice-group", "family": "tpu", "serves": ["tpu-v5e"]},
        ],
        "prometheus": prometheus,
    }


def _gpu_query(prometheus: dict[str, Any]) -> str:
    settings = Settings.model_validate(_config(prometheus))
    assert isinstance(settings.prometheus, PrometheusSettings)
    return demand_queries(settings.demand_class_models(), settings.prometheus)["gpu-a100"]


def test_the_readme_example_loads_and_counts_the_pods_its_selector_names(tmp_path: Path) -> None:
    prometheus, _ = _readme_prometheus()
    assert prometheus["demand_metrics"] == "kube-state-metrics"
    settings = settings_from_mapping(_config(prometheus))
    assert settings.prometheus is not None
    assert_answers(tmp_path, PENDING_POD, [Expect(_gpu_query(prometheus), [("{}", 8)])])


def test_the_readme_kueue_selector_loads_under_kueue_only(tmp_path: Path) -> None:
    prometheus, kueue_line = _readme_prometheus()
    kueue_class = yaml.safe_load(kueue_line)["gpu-a100"]
    with_kueue = {**prometheus, "classes": {**prometheus["classes"], "gpu-a100": kueue_class}}
    assert settings_from_mapping(_config({**with_kueue, "demand_metrics": "kueue"})).prometheus is not None
    with pytest.raises(ConfigError) as refused:
        settings_from_mapping(_config(with_kueue))
    assert [p.key_path for p in refused.value.problems] == ["prometheus.classes.gpu-a100.selector"]
    # What it would have read: no pod carries Kueue's labels, and the fallback answers 0 while the pod waits.
    assert_answers(tmp_path, PENDING_POD, [Expect(_gpu_query(with_kueue), [("{}", 0)])])
