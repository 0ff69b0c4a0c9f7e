"""The rig of the ``leadtime ledger import-billing`` tests (``test_billing_import*.py``) and of the commands that
read a billing export: six hours of estimated spend of two pools on either database ledger (``backend``), its
configuration (``config``), and exports in the shape of the Cloud Billing usage cost export (``export_rows``,
``_row``, written ``as_csv`` or ``as_json``; fields and their source: docs/billing-reconciliation.md), and the
command's per-pool table read back (``table``)."""

from __future__ import annotations

import csv
import io
import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.ledger.postgres import PostgresLedger
from agent.ledger.sqlite import SqliteLedger
from models import LedgerEntry
from tests.postgres.fixtures import Database

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
