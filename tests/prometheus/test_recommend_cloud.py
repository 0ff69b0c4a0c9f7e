"""``leadtime recommend`` with a cloud section: the pools' current state is read from GKE through the real
actuators (on the fake GKE and Compute Engine APIs), never written; ``--current-units`` still overrides it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from agent.cli import main
from tests.fakes.gke_api import FakeGkeApi
from tests.prometheus.server import TENANTS, PrometheusServer

pytestmark = pytest.mark.xdist_group("prometheus")
AT = "2020-05-08T12:00+08:00"


def _config(tmp_path: Path, server: PrometheusServer, gke: FakeGkeApi) -> Path:
    document = {
        "demand_classes": [{"name": t} for t in TENANTS],
        "pools": [
            {
                "id": "a100-on-demand",
                "kind": "gpu-node-pool",
                "chips_per_unit": 8,
                "max_units": 60,
                "price_per_chip_hour_usd": 3.67,
                "lead_time": "10m",
                "serves": list(TENANTS),
            }
        ],
        "prometheus": {"url": server.url, "retries": 0},
        "cloud": {
            "project": gke.project,
            "location": gke.location,
            "cluster": gke.cluster,
            "endpoint": gke.url,
            "node_pools": [{"pool": "a100-on-demand", "node_pool": "a100"}],
        },
    }
    path = tmp_path / "leadtime.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def _writes(gke: FakeGkeApi) -> list[tuple[str, str]]:
    return [(m, p) for m, p in gke.requests if m in ("POST", "PUT", "DELETE") and "listManagedInstances" not in p]


def test_recommend_reads_the_pools_from_the_cloud_and_writes_nothing(
    prometheus: PrometheusServer, gke_api: FakeGkeApi, tmp_path: Path
) -> None:
    gke_api.add_pool("a100", nodes=4, zones=("us-central1-a", "us-central1-b"))
    gke_api.fail_next(1, 503, "backend unavailable", path="nonexistent")  # faults elsewhere do not matter
    out = tmp_path / "out"
    assert (
        main(["recommend", "--config", str(_config(tmp_path, prometheus, gke_api)), "--out", str(out), "--at", AT]) == 0
    )
    document = json.loads((out / "recommendation.json").read_text())
    (pool,) = document["pools"]
    assert document["pool_state_source"] == "cloud"
    assert (pool["current_units"], pool["ready_units"]) == (4, 4)
    assert pool["action"] == "scale-up"  # the trace's demand at that hour needs far more than 4 nodes
    assert document["dry_run"][0]["to_units"] == pool["recommended_units"]
    assert gke_api.calls("GET", "/nodePools/a100") > 0
    assert _writes(gke_api) == []
    assert gke_api.pools["a100"].migs[0].target_size + gke_api.pools["a100"].migs[1].target_size == 4
    assert [(z["zone"], z["ready_units"], z["target_units"]) for z in pool["zones"]] == [
        ("us-central1-a", 2, 2),
        ("us-central1-b", 2, 2),
    ]
    assert "Zones of the pools that span zones" in (out / "report.md").read_text()


def test_current_units_on_the_command_line_override_the_cloud(
    prometheus: PrometheusServer, gke_api: FakeGkeApi, tmp_path: Path
) -> None:
    gke_api.add_pool("a100", nodes=4)
    config = _config(tmp_path, prometheus, gke_api)
    out = tmp_path / "out"
    assert (
        main(
            ["recommend", "--config", str(config), "--out", str(out), "--at", AT, "--current-units", "a100-on-demand=9"]
        )
        == 0
    )
    document = json.loads((out / "recommendation.json").read_text())
    assert document["pool_state_source"] == "--current-units"
    assert document["pools"][0]["current_units"] == 9
    assert gke_api.requests == []


def test_an_unreachable_cloud_is_a_clear_error(
    prometheus: PrometheusServer, gke_api: FakeGkeApi, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gke_api.add_pool("a100", nodes=4)
    gke_api.fail_next(1, 403, "Permission 'container.nodePools.get' denied")
    config = _config(tmp_path, prometheus, gke_api)
    assert main(["recommend", "--config", str(config), "--out", str(tmp_path / "out"), "--at", AT]) == 2
    err = capsys.readouterr().err
    assert "a100-on-demand" in err and "403" in err and "--current-units" in err
    assert "Traceback" not in err
    assert not (tmp_path / "out").exists()  # nothing written for a fleet it could not read
