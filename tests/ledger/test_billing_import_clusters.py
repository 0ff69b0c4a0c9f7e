"""``leadtime ledger import-billing`` where a node pool is named alike in two clusters (staging and production):
billed for the agent's cluster only (``cloud.cluster``, or ``ledger.billing.cluster`` over it), refused when no
cluster is known, and a row without a cluster label still matched by its resource name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.cli import main
from agent.ledger.billing_export import match_pools, read_export
from agent.ledger.sqlite import SqliteLedger
from config.ledger import BillingSettings
from models import LedgerEntry
from tests.ledger.billing_export_rig import (
    HOUR,
    POOL,
    QUARTER,
    T0,
    _row,
    as_csv,
    as_json,
    table,
)
from tests.postgres.fixtures import POSTGRES

pytestmark = POSTGRES

# A node pool named alike in two clusters (staging and production), billed for the same hour.
ALIKE = {"prod-us": 48.0, "staging-eu": 32.0}
CLOUD = {"project": "p", "location": "us-central1", "node_pools": [{"pool": "a100", "node_pool": "a100"}]}


def _alike_rows() -> list[dict[str, Any]]:
    hour = {"usage_start_time": "2026-03-02 00:00:00 UTC", "usage_end_time": "2026-03-02 01:00:00 UTC"}
    return [
        _row(hour, "Compute Engine", "Nvidia Tesla A100 GPU", labels, cost, [])
        for cluster, cost in ALIKE.items()
        for labels in [[{"key": "goog-k8s-cluster-name", "value": cluster}, {"key": "goog-k8s-node-pool-name",
                                                                              "value": "a100"}]]
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("cloud_cluster", "billing_cluster", "billed"),
    [
        ("prod-us", None, ALIKE["prod-us"]),  # the cluster the agent scales
        ("prod-us", "staging-eu", ALIKE["staging-eu"]),  # ledger.billing.cluster is the one that counts
        (None, "staging-eu", ALIKE["staging-eu"]),
    ],
)
def test_a_node_pool_named_alike_in_two_clusters_is_billed_for_the_agent_s_cluster_only(
    cloud_cluster: str | None,
    billing_cluster: str | None,
    billed: float,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "ledger.sqlite"
    with SqliteLedger(path) as ledger:
        ledger.record_many([LedgerEntry("a100", T0 + i * QUARTER, T0 + (i + 1) * QUARTER, 2, 12.0) for i in range(4)])
    billing = {} if billing_cluster is None else {"cluster": billing_cluster}
    body: dict[str, Any] = {
        "demand_classes": [{"name": "c"}],
        "pools": [{"id": "a100", **POOL}],
        "ledger": {"path": str(path), "billing": billing},
    }
    if cloud_cluster is not None:
        body["cloud"] = {**CLOUD, "cluster": cloud_cluster}
    cfg = tmp_path / "leadtime.yaml"
    cfg.write_text(yaml.safe_dump(body), encoding="utf-8")
    export = tmp_path / "billing.json"
    export.write_text(as_json(_alike_rows()), encoding="utf-8")

    assert main(["ledger", "import-billing", "--config", str(cfg), str(export)]) == 0
    out = capsys.readouterr().out
    cluster = billing_cluster or cloud_cluster
    assert f"2 rows, 1 of them for 1 pool(s) in cluster {cluster}, 1 for other resources" in out
    assert table(out)["a100"][:3] == ["1.00", "48.00", f"{billed:.2f}"]
    with SqliteLedger(path, read_only=True) as ledger:
        assert ledger.billed(["a100"], T0, T0 + HOUR) == pytest.approx(billed)


def test_rows_of_a_pool_naming_two_clusters_are_refused_when_no_cluster_is_known(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "ledger.sqlite"
    with SqliteLedger(path) as ledger:
        ledger.record(LedgerEntry("a100", T0, T0 + QUARTER, 2, 12.0))
    body = {"demand_classes": [{"name": "c"}], "pools": [{"id": "a100", **POOL}], "ledger": {"path": str(path)}}
    cfg = tmp_path / "leadtime.yaml"
    cfg.write_text(yaml.safe_dump(body), encoding="utf-8")
    export = tmp_path / "billing.json"
    export.write_text(as_json(_alike_rows()), encoding="utf-8")

    assert main(["ledger", "import-billing", "--config", str(cfg), str(export)]) == 2
    err = capsys.readouterr().err
    assert "nothing imported" in err
    assert (
        "line 2: pool a100: its rows name 2 clusters in the label goog-k8s-cluster-name (prod-us from line 1, "
        "staging-eu from line 2) and no cluster is set: set ledger.billing.cluster"
    ) in err
    with SqliteLedger(path, read_only=True) as ledger:
        assert ledger.billed(["a100"], T0, T0 + HOUR) == 0.0


def test_with_the_agent_s_cluster_known_a_row_without_a_cluster_label_still_matches_by_resource_name(
    tmp_path: Path,
) -> None:
    # A Cloud TPU VM (a queued resource) is no GKE node: its row has no cluster label, only its resource name.
    hour = {"usage_start_time": "2026-03-02 00:00:00 UTC", "usage_end_time": "2026-03-02 01:00:00 UTC"}
    rows = [*_alike_rows(), _row(hour, "Cloud TPU", "TPU v5e", [], 60.0, [], "t1v-n-1a2b-w-0")]
    export = tmp_path / "billing.csv"
    export.write_text(as_csv(rows), encoding="utf-8")
    read = read_export(export)
    for settings, default in (
        (BillingSettings(resource_prefixes={"v5e": "t1v-n-"}), "prod-us"),  # cloud.cluster
        (BillingSettings(cluster="prod-us", resource_prefixes={"v5e": "t1v-n-"}), None),  # ledger.billing.cluster
    ):
        matched = match_pools(read, settings, ["a100", "v5e"], str(export), default_cluster=default)
        assert sorted((c.pool_id, c.cost_usd) for c in matched.costs) == [("a100", 48.0), ("v5e", 60.0)]
        assert (matched.rows, matched.unmatched, matched.cluster) == (2, 1, "prod-us")
