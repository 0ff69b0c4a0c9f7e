"""How a Cloud Billing usage cost export's rows are read and matched to pools: a JSON array export by global resource
name with ISO times (a time without a zone refused), a row to the pool of the longest resource prefix it starts
with, and a billed cost that ends before it starts refused before any store sees it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agent.ledger.billed import BilledCost
from agent.ledger.billing_export import match_pools, read_export
from agent.ledger.sqlite import SqliteLedger
from config.ledger import BillingSettings
from models import BillingExportError
from tests.ledger.billing_export_rig import (
    HOUR,
    T0,
    _row,
    as_csv,
)
from tests.postgres.fixtures import POSTGRES

pytestmark = POSTGRES


def test_a_json_array_export_matches_by_global_resource_name_and_reads_iso_times(tmp_path: Path) -> None:
    row = _row(
        {"usage_start_time": "2026-03-02T01:00:00Z", "usage_end_time": "2026-03-02T04:00:00+02:00"},
        "Compute Engine",
        "Nvidia H100 GPU",
        [{"key": "goog-k8s-cluster-name", "value": "prod"}],
        30.0,
        [-2.5],
        "ignored",
    )
    row["resource"] = {"global_name": "//compute.googleapis.com/projects/p/zones/z/instances/gke-prod-h100-9q"}
    export = tmp_path / "billing.json"
    export.write_text(json.dumps([row, {**row, "usage_end_time": "2026-03-02 01:00:00"}]), encoding="utf-8")
    with pytest.raises(BillingExportError) as refused:
        read_export(export)
    assert refused.value.problems == ("line 2: usage_end_time: '2026-03-02 01:00:00' has no time zone",)
    export.write_text(json.dumps([row]), encoding="utf-8")
    settings = BillingSettings(cluster="prod", resource_prefixes={"h100": "gke-prod-h100-"})
    matched = match_pools(read_export(export), settings, ["a100", "h100"], str(export))
    assert matched.costs == [BilledCost("h100", T0 + HOUR, T0 + 2 * HOUR, 27.5)]


def test_a_row_goes_to_the_pool_of_the_longest_prefix_it_starts_with(tmp_path: Path) -> None:
    hour = {"usage_start_time": "2026-03-02 00:00:00 UTC", "usage_end_time": "2026-03-02 01:00:00 UTC"}
    rows = [
        _row(hour, "Cloud TPU", "TPU v5e", [], cost, [], name)
        for name, cost in (("tpu-v5e-small-1", 10.0), ("tpu-v5e-large-1", 500.0))
    ]
    export = tmp_path / "billing.csv"
    export.write_text(as_csv(rows), encoding="utf-8")
    prefixes = {"slices": "tpu-v5e-", "slices-large": "tpu-v5e-large-"}
    matched = match_pools(read_export(export), BillingSettings(resource_prefixes=prefixes), list(prefixes), "x")
    assert sorted((c.pool_id, c.cost_usd) for c in matched.costs) == [("slices", 10.0), ("slices-large", 500.0)]


def test_a_billed_cost_that_ends_before_it_starts_is_refused_before_any_store_sees_it(tmp_path: Path) -> None:
    start = datetime(2026, 3, 2, tzinfo=UTC)
    with pytest.raises(ValueError, match="usage end 2026-03-01T23:00:00\\+00:00 is not after its start"):
        BilledCost("gpu", start, start - timedelta(hours=1), 5.0)
    with pytest.raises(ValueError, match="is not after its start"):
        BilledCost("gpu", start, start, 5.0)
    with SqliteLedger(tmp_path / "ledger.sqlite") as ledger:
        ledger.record_billed([BilledCost("gpu", start, start + timedelta(hours=1), 5.0)])
        assert ledger.billed(["gpu"], start, start + timedelta(hours=1)) == pytest.approx(5.0)
