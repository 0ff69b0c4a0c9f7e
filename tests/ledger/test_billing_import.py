"""``leadtime ledger import-billing`` on both database ledgers (SQLite, and PostgreSQL on the suite's real server),
from a CSV and a JSON export built here in the shape of the Cloud Billing usage cost export (fields and their
source: docs/billing-reconciliation.md):

* rows are matched to pools by the node pool label (within the configured cluster) or the resource name; other
  rows are counted, not imported; a row's billed cost is its cost plus its credits;
* the difference per pool is printed; the billed cost replaces the estimate in spend so far for the intervals it
  covers, in the budget report and in the spend reservations are decided on;
* importing the same file again counts nothing twice; bad rows are refused with their line and problem, and
  nothing is imported.
"""

from __future__ import annotations

import csv
import io
import json
import os
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.cli import main
from agent.ledger.billed import BilledCost
from agent.ledger.billing_export import match_pools, read_export
from agent.ledger.postgres import PostgresLedger
from agent.ledger.reservations import ReservationRequest, Reservations
from agent.ledger.sqlite import SqliteLedger
from agent.ledger.sqlite_schema import SCHEMA_VERSION
from config.ledger import BillingSettings
from models import BillingExportError, LedgerEntry
from tests.postgres.fixtures import POSTGRES, Database

pytestmark = POSTGRES

T0 = datetime(2026, 3, 2, tzinfo=UTC)
HOUR = timedelta(hours=1)
QUARTER = timedelta(minutes=15)
UNIT_HOUR = 24.0  # 8 chips at 3 USD a chip-hour
UNITS = {"a100": 2, "h100": 1}
BILLED_HOURS = 4  # the export covers the first 4 of 6 recorded hours
A100_BILL = (40.0, 10.0, -1.0)  # GPU SKU, core SKU, a credit on the GPU SKU: 49.00 an hour
H100_BILL = 22.5

POOL = {"kind": "gpu-node-pool", "chips_per_unit": 8, "max_units": 4, "price_per_chip_hour_usd": 3.0,
        "lead_time": "10m", "serves": ["c"]}  # fmt: skip


def config(tmp_path: Path, ledger: dict[str, Any]) -> Path:
    billing = {
        "cluster": "prod",
        "pools": {"a100": "gpu-a100-pool"},
        "resource_prefixes": {"h100": "gke-prod-h100-"},
    }
    body = {
        "demand_classes": [{"name": "c"}],
        "pools": [{"id": "a100", **POOL}, {"id": "h100", **POOL}],
        "budgets": [{"name": "research", "pools": ["a100", "h100"], "monthly_cap_usd": 10_000}],
        "ledger": {**ledger, "billing": billing},
    }
    path = tmp_path / "leadtime.yaml"
    path.write_text(yaml.safe_dump(body), encoding="utf-8")
    return path


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Any]:
    """The configuration file and the ledger it names, with six hours of estimated spend of both pools."""
    if request.param == "sqlite":
        path = tmp_path / "ledger.sqlite"
        cfg = config(tmp_path, {"path": str(path)})
        opened: Any = SqliteLedger(path)
    else:
        database: Database = request.getfixturevalue("postgres_database")
        monkeypatch.setenv("LEADTIME_LEDGER_PASSWORD", database.password)
        cfg = config(tmp_path, {"backend": "postgresql", "url": database.url, "sslmode": "disable"})
        opened = PostgresLedger(database.url, database.password)
    opened.record_many(
        [
            LedgerEntry(pool, T0 + i * QUARTER, T0 + (i + 1) * QUARTER, units, units * UNIT_HOUR / 4)
            for i in range(6 * 4)
            for pool, units in UNITS.items()
        ]
    )
    opened.close()  # the command opens it itself (a SQLite writer holds the file's lock)
    return cfg, _reopen(request.param, cfg)


def _reopen(kind: str, cfg: Path) -> Any:
    settings = yaml.safe_load(cfg.read_text(encoding="utf-8"))["ledger"]
    if kind == "sqlite":
        return _Lazy(lambda: SqliteLedger(settings["path"], read_only=True))
    return _Lazy(lambda: PostgresLedger(settings["url"], _password()))


def _password() -> str:
    return os.environ["LEADTIME_LEDGER_PASSWORD"]


class _Lazy:
    """Opens the ledger for each question, so the command under test is the only writer in between."""

    def __init__(self, opener: Any) -> None:
        self._opener = opener

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any) -> Any:
            ledger = self._opener()
            try:
                return getattr(ledger, name)(*args)
            finally:
                ledger.close()

        return call


def export_rows() -> list[dict[str, Any]]:
    """Rows as the standard/detailed usage cost export holds them (nested records, label and credit lists)."""
    rows: list[dict[str, Any]] = []
    for h in range(BILLED_HOURS):
        start, end = T0 + h * HOUR, T0 + (h + 1) * HOUR
        times = {"usage_start_time": f"{start:%Y-%m-%d %H:%M:%S} UTC", "usage_end_time": f"{end:%Y-%m-%d %H:%M:%S} UTC"}
        a100_labels = [
            {"key": "goog-k8s-cluster-name", "value": "prod"},
            {"key": "goog-k8s-node-pool-name", "value": "gpu-a100-pool"},
        ]
        gpu, core, credit = A100_BILL
        rows.append(_row(times, "Compute Engine", "Nvidia Tesla A100 GPU", a100_labels, gpu, [credit]))
        rows.append(_row(times, "Compute Engine", "A2 Instance Core", a100_labels, core, []))
        h100_labels = [{"key": "goog-k8s-cluster-name", "value": "prod"}]
        rows.append(_row(times, "Compute Engine", "Nvidia H100 GPU", h100_labels, H100_BILL, [], "gke-prod-h100-7f-x2"))
        # Another cluster's node pool of the same name, and another service: not this ledger's pools.
        staging = [{"key": "goog-k8s-cluster-name", "value": "staging"}, a100_labels[1]]
        rows.append(_row(times, "Compute Engine", "Nvidia Tesla A100 GPU", staging, 99.0, []))
        rows.append(_row(times, "Cloud Storage", "Standard Storage", [], 0.37, []))
    return rows


def _row(
    times: dict[str, str],
    service: str,
    sku: str,
    labels: list[dict[str, str]],
    cost: float,
    credits: list[float],
    resource: str | None = None,
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "service": {"id": "6F81-5844-456A", "description": service},
        "sku": {"id": "0000-0000-0000", "description": sku},
        **times,
        "labels": labels,
        "cost": cost,
        "currency": "USD",
        "credits": [
            {"name": "Sustained use discount", "amount": c, "type": "SUSTAINED_USAGE_DISCOUNT"} for c in credits
        ],
    }
    if resource is not None:
        row["resource"] = {"name": resource, "global_name": f"//compute.googleapis.com/projects/p/instances/{resource}"}
    return row


def as_json(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


def as_csv(rows: list[dict[str, Any]]) -> str:
    header = ["service.description", "sku.description", "usage_start_time", "usage_end_time", "labels",
              "resource.name", "cost", "currency", "credits"]  # fmt: skip
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(header)
    for row in rows:
        writer.writerow(
            [
                row["service"]["description"],
                row["sku"]["description"],
                row["usage_start_time"],
                row["usage_end_time"],
                json.dumps(row["labels"]),
                row.get("resource", {}).get("name", ""),
                str(row["cost"]),
                row["currency"],
                json.dumps(row["credits"]),
            ]
        )
    return out.getvalue()


def table(out: str) -> dict[str, list[str]]:
    return {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.split()[:1] in (["a100"], ["h100"])}


@pytest.mark.parametrize("form", ["csv", "json"])
def test_billed_cost_is_stored_beside_the_estimate_and_counts_once_where_it_exists(
    form: str, tmp_path: Path, backend: tuple[Path, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    cfg, ledger = backend
    export = tmp_path / f"billing.{form}"
    export.write_text(as_csv(export_rows()) if form == "csv" else as_json(export_rows()), encoding="utf-8")
    end = T0 + 6 * HOUR
    estimated = {pool: 6 * units * UNIT_HOUR for pool, units in UNITS.items()}
    assert ledger.spent(["a100", "h100"], T0, end) == pytest.approx(sum(estimated.values()))

    assert main(["ledger", "import-billing", "--config", str(cfg), str(export)]) == 0
    out = capsys.readouterr().out
    assert (
        "20 rows, 12 of them for 2 pool(s) in cluster prod, 8 for other resources; stored 8 billed interval(s)" in out
    )
    a100_hour = sum(A100_BILL)
    a100_est = BILLED_HOURS * UNITS["a100"] * UNIT_HOUR
    h100_est = BILLED_HOURS * UNITS["h100"] * UNIT_HOUR
    # pool: hours billed, estimated, billed, diff, diff %
    hours = f"{BILLED_HOURS:.2f}"
    assert table(out) == {
        "a100": [hours, f"{a100_est:.2f}", f"{4 * a100_hour:.2f}", f"{4 * a100_hour - a100_est:+.2f}",
                 f"{100 * (4 * a100_hour - a100_est) / a100_est:+.2f}%"],
        "h100": [hours, f"{h100_est:.2f}", f"{4 * H100_BILL:.2f}", f"{4 * H100_BILL - h100_est:+.2f}",
                 f"{100 * (4 * H100_BILL - h100_est) / h100_est:+.2f}%"],
    }  # fmt: skip

    unbilled = 2 * (UNITS["a100"] + UNITS["h100"]) * UNIT_HOUR  # hours 4 and 5 keep their estimate
    spent = 4 * a100_hour + 4 * H100_BILL + unbilled
    assert ledger.billed(["a100"], T0, end) == pytest.approx(4 * a100_hour)
    assert ledger.estimated(["a100", "h100"], T0, end) == pytest.approx(sum(estimated.values()))
    assert ledger.spent(["a100", "h100"], T0, end) == pytest.approx(spent)
    assert ledger.spent(["h100"], T0 + 4 * HOUR, end) == pytest.approx(2 * UNIT_HOUR)

    # The same file again: nothing counted twice.
    assert main(["ledger", "import-billing", "--config", str(cfg), str(export)]) == 0
    assert table(capsys.readouterr().out)["a100"][:3] == [hours, f"{a100_est:.2f}", f"{4 * a100_hour:.2f}"]
    assert ledger.spent(["a100", "h100"], T0, end) == pytest.approx(spent)

    # The budget report shows the estimate, the bill, and what the budget counts.
    assert main(["ledger", "budgets", "--config", str(cfg), "--at", end.isoformat()]) == 0
    report = capsys.readouterr().out
    (research,) = [line.split() for line in report.splitlines() if line.startswith("research")]
    assert research[2:] == [
        "10000.00",
        f"{sum(estimated.values()):.2f}",
        f"{4 * a100_hour + 4 * H100_BILL:.2f}",
        f"{a100_est + h100_est:.2f}",
        f"{spent:.2f}",
        f"{100 * spent / 10_000:.1f}%",
    ]


def test_reservations_are_decided_on_billed_cost_where_it_exists(
    tmp_path: Path, backend: tuple[Path, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    cfg, _ = backend
    export = tmp_path / "billing.json"
    export.write_text(as_json(export_rows()), encoding="utf-8")
    assert main(["ledger", "import-billing", "--config", str(cfg), str(export)]) == 0
    settings = yaml.safe_load(cfg.read_text(encoding="utf-8"))["ledger"]
    ledger: SqliteLedger | PostgresLedger = (
        SqliteLedger(settings["path"]) if "path" in settings else PostgresLedger(settings["url"], _password())
    )
    assert isinstance(ledger, Reservations)
    end = T0 + 6 * HOUR
    spent = 4 * sum(A100_BILL) + 4 * H100_BILL + 2 * 3 * UNIT_HOUR
    cap = spent + 50.0  # the estimate alone (432.00) would leave 52.00
    ask = ReservationRequest("research", ("a100", "h100"), T0, T0 + timedelta(days=30), cap, 50.01, "x", HOUR)
    try:
        refused = ledger.reserve(ask, end)
        assert not refused.granted
        assert refused.headroom_usd == pytest.approx(50.0)
    finally:
        ledger.close()


def test_bad_rows_are_refused_with_their_line_and_problem_and_nothing_is_imported(
    tmp_path: Path, backend: tuple[Path, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    cfg, ledger = backend
    rows = export_rows()[:5]
    rows[1]["usage_start_time"] = "yesterday"
    rows[2]["cost"] = "12,50"
    rows[3]["labels"] = [{"value": "no key"}]
    eur = dict(rows[0], currency="EUR")
    export = tmp_path / "billing.csv"
    export.write_text(as_csv([*rows, eur]), encoding="utf-8")
    assert main(["ledger", "import-billing", "--config", str(cfg), str(export)]) == 2
    err = capsys.readouterr().err
    assert "line 3: usage_start_time: 'yesterday' is not a time" in err
    assert "line 4: cost: '12,50' is not a number" in err
    assert "line 5: labels: each label needs a key and a value" in err
    assert "nothing imported" in err
    assert ledger.billed(["a100", "h100"], T0, T0 + 6 * HOUR) == 0.0

    export.write_text(as_json([rows[0], eur]), encoding="utf-8")  # rows that read, but a pool's cost not in USD
    assert main(["ledger", "import-billing", "--config", str(cfg), str(export)]) == 2
    assert "line 2: currency 'EUR' for pool a100: the ledger keeps USD" in capsys.readouterr().err
    assert ledger.billed(["a100", "h100"], T0, T0 + 6 * HOUR) == 0.0


def test_a_ledger_file_of_the_first_schema_gains_the_billed_table_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    with SqliteLedger(path) as ledger:
        ledger.record(LedgerEntry("a100", T0, T0 + QUARTER, 1, 6.0))
    with sqlite3.connect(path) as db:  # as the previous release left it
        db.execute("DROP TABLE billed")
        db.execute("PRAGMA user_version = 1")
    with SqliteLedger(path, read_only=True) as reader:  # a reader of the old file sees the estimate
        assert reader.spent(["a100"], T0, T0 + HOUR) == pytest.approx(6.0)
    with SqliteLedger(path) as ledger:
        assert ledger.spent(["a100"], T0, T0 + HOUR) == pytest.approx(6.0)
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert db.execute("SELECT count(*) FROM billed").fetchone() == (0,)


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
