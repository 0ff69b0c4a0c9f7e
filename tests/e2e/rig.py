"""A live cluster made of the fakes, for end-to-end tests of the real wiring.

FakeGkeApi holds two GKE node pools (a cheaper spot pool in one zone, an on-demand pool in another) and the
instance groups behind them; FakeKubeApi holds their nodes, kept in step the way GKE registers a node for each
running instance and removes it with the instance (``NodeMirror``); FakePrometheusApi serves the demand of one
demand class. ``config_document`` is a leadtime configuration pointing every part at them, and ``live_agent``
builds the real agent loop from it with ``agent.daemon.live.live_parts``, exactly as ``leadtime run`` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s
from prometheus_client import CollectorRegistry

from agent.daemon.live import live_parts
from agent.ledger.sqlite import SqliteLedger
from agent.loop import Agent, AgentParts
from agent.notify import RecordingNotifier
from config import settings_from_mapping
from config.schema import Settings
from forecasting.factory import build_forecaster
from models.clock import SimulatedClock
from tests.fakes import kube_objects as objs
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi
from tests.fakes.prometheus_api import FakePrometheusApi

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
CLASS = "training"  # the demand class; its default kube-state-metrics query selects namespace="training"
SPOT, ON_DEMAND = "a100-spot", "a100-on-demand"  # our pool ids
NODE_POOLS = {SPOT: "spot-a100", ON_DEMAND: "a100"}  # ... and their GKE node pools
ZONES = {SPOT: "us-central1-b", ON_DEMAND: "us-central1-a"}


class NodeMirror:
    """Every running instance of a node pool is a Kubernetes node (with a DaemonSet pod); a deleted one is not."""

    def __init__(self, gke: FakeGkeApi, kube: FakeKubeApi) -> None:
        self.gke, self.kube = gke, kube

    def running(self) -> dict[str, str]:
        """Node name -> GKE node pool, for every running instance."""
        return {
            inst.name: pool.name
            for pool in self.gke.pools.values()
            for mig in pool.migs
            for inst in mig.instances
            if inst.action == "NONE"
        }

    def nodes(self, pool_id: str) -> list[str]:
        return sorted(name for name, pool in self.running().items() if pool == NODE_POOLS[pool_id])

    def sync(self) -> None:
        running = self.running()
        existing = {n["metadata"]["name"] for n in self.kube.list("nodes")}
        for name, node_pool in running.items():
            if name not in existing:
                self.kube.put("nodes", objs.node(name, node_pool))
                self.kube.put("pods", objs.pod(f"logs-{name}", name, namespace="kube-system", owner_kind="DaemonSet"))
        for name in existing - set(running):
            self.kube.delete("nodes", name)
            for pod in self.kube.list("pods"):
                if pod["spec"].get("nodeName") == name:
                    self.kube.delete("pods", pod["metadata"]["name"], pod["metadata"]["namespace"])


@dataclass
class Rig:
    gke: FakeGkeApi
    kube: FakeKubeApi
    prometheus: FakePrometheusApi
    clock: SimulatedClock
    mirror: NodeMirror
    workdir: Path  # the test's own directory: the ledger file lives here, never in the working directory

    def __post_init__(self) -> None:
        self.kube.clock = self.clock.now  # evicted pods finish terminating as the scenario's time passes

    def add_pools(self, spot_nodes: int = 0, on_demand_nodes: int = 0) -> None:
        self.gke.add_pool(NODE_POOLS[SPOT], nodes=spot_nodes, zones=(ZONES[SPOT],))
        self.gke.add_pool(NODE_POOLS[ON_DEMAND], nodes=on_demand_nodes, zones=(ZONES[ON_DEMAND],))
        self.mirror.sync()

    def settle(self) -> None:
        """Lead time passes: operations finish, instances come up (or go) and their nodes follow."""
        self.gke.advance()
        self.mirror.sync()

    def config_document(
        self, *, spot_max: int = 4, election: bool = False, mode: str = "enforce", kube_url: str | None = None
    ) -> dict[str, Any]:
        def pool(pool_id: str, tier: str, max_units: int, price: float) -> dict[str, Any]:
            return {
                "id": pool_id,
                "kind": "gpu-node-pool",
                "tier": tier,
                "chips_per_unit": 8,
                "min_units": 0,
                "max_units": max_units,
                "price_per_chip_hour_usd": price,
                "lead_time": "10m",
                "serves": [CLASS],
            }

        return {
            "demand_classes": [{"name": CLASS, "family": "gpu"}],
            "pools": [pool(SPOT, "spot", spot_max, 1.47), pool(ON_DEMAND, "on-demand", 8, 3.67)],
            # The drain tests time releases by the stabilization window alone.
            "planner": {"scale_down_stabilization": "10m", "idle_hold_lead_times": 0},
            "forecast": {"model": "persistence", "history": "2h", "step": "1m", "max_staleness": "5m"},
            "prometheus": {"url": self.prometheus.url, "retries": 0, "timeout": "5s"},
            "cloud": {
                "project": self.gke.project,
                "location": self.gke.location,
                "cluster": self.gke.cluster,
                "endpoint": self.gke.url,
                "drain_timeout": "15m",
                "node_pools": [{"pool": p, "node_pool": n} for p, n in NODE_POOLS.items()],
            },
            "loop": {"tick_interval": "60s"},
            "ledger": {"path": str(self.workdir / "ledger.sqlite")},
            "daemon": {
                "mode": mode,
                "endpoints": {"bind_address": "127.0.0.1", "port": 0},
                "leader_election": {"enabled": election},
                "kubernetes": {"api_url": kube_url or self.kube.url, "request_timeout": "2s"},
            },
        }

    def settings(self, **options: Any) -> Settings:
        return settings_from_mapping(self.config_document(**options), source="e2e config")

    def write_config(self, path: Path, **options: Any) -> Path:
        path.write_text(yaml.safe_dump(self.config_document(**options)), encoding="utf-8")
        return path


def live_agent(rig: Rig, settings: Settings, kube: k8s.ApiClient, notifier: RecordingNotifier) -> Agent:
    """The real agent loop on the live parts ``leadtime run`` builds (enforce mode: nothing wraps the writers)."""
    parts = live_parts(settings, "e2e config", rig.clock, notifier, kube, CollectorRegistry())
    forecaster = build_forecaster(settings.forecast)
    return Agent(settings, AgentParts(parts.source, forecaster, parts.actuator, parts.ledger, notifier, parts.drainers))


def end_process(agent: Agent) -> None:
    """What the end of the agent's process releases: its ledger file and the ledger's writer lock."""
    ledger = agent.parts.ledger
    assert isinstance(ledger, SqliteLedger)
    ledger.close()
