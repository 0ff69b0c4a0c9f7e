"""``leadtime recommend`` on a TPU slice group with a slice in ERROR: recommend reads GKE, not the cluster's nodes, so
it cannot tell a slice a job still runs on (the daemon's broken slice, paid for and kept) from one that failed; it
counts the slice failed and says so, in the document's warnings and on stderr."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from agent.cli import main
from tests.actuators.test_gke_slice_errors import STOCKOUT, Rig, rig  # noqa: F401  (the fixture)
from tests.contract.harnesses import SLICES
from tests.prometheus.server import TENANTS, PrometheusServer

pytestmark = pytest.mark.xdist_group("prometheus")
AT = "2020-05-08T12:00+08:00"
POOL = "v5e-slices"


def _config(tmp_path: Path, server: PrometheusServer, rig: Rig) -> Path:  # noqa: F811
    gke = rig.gke
    document = {
        "demand_classes": [{"name": t, "family": "tpu"} for t in TENANTS],
        "pools": [
            {
                "id": POOL,
                "kind": "tpu-slice-group",
                "family": "tpu",
                "chips_per_unit": 16,
                "max_units": 40,
                "price_per_unit_hour_usd": 20.0,
                "lead_time": "30m",
                "serves": list(TENANTS),
            }
        ],
        "prometheus": {"url": server.url, "retries": 0},
        "cloud": {
            "project": gke.project,
            "location": gke.location,
            "cluster": gke.cluster,
            "endpoint": gke.url,
            "tpu_slice_groups": [
                {
                    "pool": POOL,
                    "group": SLICES.group,
                    "machine_type": SLICES.machine_type,
                    "tpu_topology": SLICES.tpu_topology,
                    "zone": SLICES.zone,
                }
            ],
        },
    }
    path = tmp_path / "leadtime.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def test_a_slice_in_error_is_counted_failed_and_said_to_be_unknown(
    prometheus: PrometheusServer,
    rig: Rig,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    rig.train("v5e-1")  # a job runs on v5e-1
    rig.gke.report_error("v5e-1", conditions=(STOCKOUT,))  # GKE keeps its node pool in ERROR
    out = tmp_path / "out"

    assert main(["recommend", "--config", str(_config(tmp_path, prometheus, rig)), "--out", str(out), "--at", AT]) == 0

    document = json.loads((out / "recommendation.json").read_text())
    (warning,) = [w for w in document["warnings"] if w.startswith(f"pool {POOL}:")]
    assert "1 slice(s) failed or in ERROR" in warning
    assert "cannot tell whether a job still runs on one" in warning
    assert warning in capsys.readouterr().err
    (pool,) = document["pools"]
    assert (pool["current_units"], pool["failed_units"]) == (1, 1)  # v5e-0 alone; v5e-1 counted failed
