"""A real Prometheus server for the tests, loaded with history from the bundled Helios Earth trace.

The trace (per tenant GPUs running and queued, 5-minute averages) is written as OpenMetrics with the metric names
the default queries read, backfilled with ``promtool tsdb create-blocks-from openmetrics`` and served by the
``prometheus`` binary on 127.0.0.1, with a temporary data dir, stopped by PID.

- kube-state-metrics: each tenant is a namespace; its running GPUs are one pod ``<tenant>-run-<k>`` that is
  replaced every 6 hours and its queued GPUs one pod ``<tenant>-wait-<k>`` replaced every 2 hours (pods appear
  and vanish as they do in a cluster); a pod only exists while its value is above zero. ``kube_node_info`` is
  reported whenever the collector was up (the trace's outages have no samples at all), and so are
  ``kube_namespace_created`` for each tenant's namespace and ``kube_node_status_capacity`` of the pool's node.
  Two kube-state-metrics replicas are scraped (``instance`` ksm-0 and ksm-1), so every series is there twice, as
  in an HA install.
- Kueue: each tenant is a ClusterQueue of cohort ``earth`` with flavor ``default``: usage = running, pending =
  queued, with the labels real Kueue gives them (kubernetes-sigs/kueue pkg/metrics/metrics.go): usage
  ``cohort, cluster_queue, flavor, resource, replica_role``, pending only ``cluster_queue, resource,
  replica_role`` (test helper ExpectCQResourcePendingMetric; the pending gauge exists from Kueue v0.18.0, PR
  #10485). Kueue runs highly available: the leader reports the values and a follower reports them one step late
  (a stale cache), except for ``earth/vcJkd``, whose ``standalone`` replica is scraped by two jobs (identical
  values). Every ClusterQueue but the legacy one is active (``kueue_cluster_queue_status``) with a nominal quota
  of its tenant's capacity and no borrowing limit in its cohort (reported as +Inf), so all its pending work is
  work it could admit. ``earth/legacy`` is a ClusterQueue of an older Kueue: usage (vc6YE's running) without any
  pending gauge.
  (``kube_node_labels`` below stays single: capacity queries are written by the operator, not by leadtime.)
- kube-state-metrics ``kube_node_labels`` with GKE's node-pool label: the nodes the pool ``a100-on-demand``
  really ran (``pool_nodes``: a step's node count covers the peak demand of the 6 hours before it, plus one),
  each node its own series, reported whenever the collector was up.
- DCGM: one node of the pool ``a100-on-demand`` whose ``DCGM_FI_DEV_GPU_UTIL`` is the busy share of the loaded
  tenants' GPUs (running / capacity, in percent), derived from the trace.

Pitfalls handled here (see the field notes): timestamps are seconds; out-of-order samples are dropped silently
by promtool, so every series is written in time order; retention must be long or the 2020 blocks are deleted
at start. ``--query.lookback-delta=4m`` makes each 5-minute step read only its own sample, so the trace's gaps
stay gaps (backfilled data carries no staleness markers).
"""

from __future__ import annotations

import math
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import chain
from pathlib import Path

import numpy as np
import pandas as pd

from agent.sources.trace import read_trace

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "data" / "helios-earth" / "demand_5min.csv.gz"
TENANTS = ("earth/vc6YE", "earth/vcMod", "earth/vcJkd")
POOL_NODE = "gke-earth-a100-on-demand-1a2b3c4d-n001"
RUN_POD_HOURS, WAIT_POD_HOURS = 6, 2
POOL = "a100-on-demand"
GPUS_PER_NODE = 8
CAPACITY_QUERY = f'count(kube_node_labels{{label_cloud_google_com_gke_nodepool="{POOL}"}})'
LEGACY_KUEUE_QUEUE = "earth/legacy"
# A ClusterQueue whose workloads hold quota while they wait on an admission check (a ProvisioningRequest, GKE's
# Dynamic Workload Scheduler): its reservation exceeds its admitted usage by this many GPUs, which are neither
# admitted nor pending. Reads as the running and pending work of TENANTS[0] plus these.
CHECKED_KUEUE_QUEUE, WAITING_ON_CHECKS = "earth/provisioned", 16.0
KSM_REPLICAS = ('instance="ksm-0"', 'instance="ksm-1"')
NAMESPACES_CREATED = 1.5e9  # kube_namespace_created: the namespace's creation time, in Unix seconds
# kube_node_status_capacity of the pool's node (an a2-highgpu-8g: 8 A100s, 96 vCPUs, 680 GiB): resource names as
# kube-state-metrics sanitizes them, with its unit label (internal/store/node.go)
NODE_CAPACITY = (("nvidia_com_gpu", "integer", 8.0), ("cpu", "core", 96.0), ("memory", "byte", 680 * 2.0**30))


@dataclass(frozen=True)
class LoadedTrace:
    """What was loaded: the grid and, per tenant, total demand (y) as the trace has it (NaN = outage)."""

    index: pd.DatetimeIndex
    demand: dict[str, np.ndarray]
    pending: dict[str, np.ndarray]


def load_trace(tenants: Sequence[str] = TENANTS) -> LoadedTrace:
    trace = read_trace(TRACE)
    # read_trace keeps total demand only; the queued part comes from the same file's ``pending`` column.
    raw = pd.read_csv(TRACE, usecols=["unique_id", "ds", "pending"])
    raw["ds"] = pd.to_datetime(raw["ds"], format="ISO8601", utc=True)
    pending = raw.pivot(index="ds", columns="unique_id", values="pending").reindex(trace.index)
    return LoadedTrace(
        index=trace.index,
        demand={t: trace.column(t) for t in tenants},
        pending={t: pending[t].to_numpy(dtype=float) for t in tenants},
    )


def capacity(tenants: Sequence[str] = TENANTS) -> float:
    raw = pd.read_csv(TRACE, usecols=["unique_id", "capacity"])
    return float(raw[raw["unique_id"].isin(tenants)].groupby("unique_id")["capacity"].max().sum())


def collector_up(loaded: LoadedTrace, tenants: Sequence[str] = TENANTS) -> np.ndarray:
    """Steps at which the collector reported (the trace's outages have no samples at all)."""
    return np.asarray(np.all([~np.isnan(loaded.demand[t]) for t in tenants], axis=0))


def pool_nodes(loaded: LoadedTrace, tenants: Sequence[str] = TENANTS) -> np.ndarray:
    """Nodes the pool ran per step: enough for the peak total demand of the last 6 hours, plus one; NaN while
    the collector was down."""
    total = pd.Series(np.sum([np.nan_to_num(loaded.demand[t]) for t in tenants], axis=0))
    peak = total.rolling(6 * 12, min_periods=1).max().to_numpy()
    nodes = np.ceil(peak / GPUS_PER_NODE) + 1
    return np.where(collector_up(loaded, tenants), nodes, np.nan)


def openmetrics(loaded: LoadedTrace, tenants: Sequence[str] = TENANTS) -> Iterator[str]:
    """OpenMetrics text, one metric family after the other, each series in time order."""
    seconds = loaded.index.as_unit("s").asi8
    up = collector_up(loaded, tenants)
    parts: dict[str, dict[str, np.ndarray]] = {}
    for tenant in tenants:
        pending = np.where(np.isnan(loaded.pending[tenant]), 0.0, loaded.pending[tenant])
        total = loaded.demand[tenant]
        parts[tenant] = {"running": total - np.minimum(pending, total), "pending": np.minimum(pending, total)}

    stamps = np.array([str(s) for s in seconds.tolist()])

    def family(name: str, kind: str, series: Iterator[tuple[str, np.ndarray]]) -> Iterator[str]:
        """One line per sample that is not NaN, a series per chunk (most pod series are NaN at most steps: only
        what is kept is formatted)."""
        yield f"# TYPE {name} {kind}\n"
        for labels, values in series:
            if len(values) != len(stamps):
                raise ValueError(f"{name}{{{labels}}}: {len(values)} values for {len(stamps)} steps")
            kept = ~np.isnan(values)
            head = f"{name}{{{labels}}} "
            yield "".join(
                f"{head}{'+Inf' if value == math.inf else f'{value:g}'} {stamp}\n"
                for stamp, value in zip(stamps[kept].tolist(), values[kept].tolist(), strict=True)
            )

    def pods(phase: str, hours: int) -> Iterator[tuple[str, str, np.ndarray]]:
        generation = (seconds - seconds[0]) // (hours * 3600)
        for tenant in tenants:
            values = parts[tenant]["running" if phase == "Running" else "pending"]
            for k in np.unique(generation):
                mask = (generation == k) & (values > 0)
                if mask.any():
                    pod = f"{tenant.split('/')[-1].lower()}-{'run' if phase == 'Running' else 'wait'}-{k}"
                    yield tenant, pod, np.where(mask, values, np.nan)

    def all_pods() -> Iterator[tuple[str, str, str, np.ndarray]]:
        for phase, hours in (("Running", RUN_POD_HOURS), ("Pending", WAIT_POD_HOURS)):
            for tenant, pod, values in pods(phase, hours):
                yield phase, tenant, pod, values

    yield from family(
        "kube_pod_container_resource_requests",
        "gauge",
        (
            (f'{r},namespace="{t}",pod="{p}",container="main",resource="nvidia_com_gpu",unit="integer"', v)
            for r in KSM_REPLICAS
            for _, t, p, v in all_pods()
        ),
    )
    yield from family(
        "kube_pod_status_phase",
        "gauge",
        (
            (f'{r},namespace="{t}",pod="{p}",phase="{phase}"', np.where(np.isnan(v), np.nan, 1.0))
            for r in KSM_REPLICAS
            for phase, t, p, v in all_pods()
        ),
    )
    yield from family(
        "kube_node_info",
        "gauge",
        ((f'{r},node="{POOL_NODE}"', np.where(up, 1.0, np.nan)) for r in KSM_REPLICAS),
    )
    yield from family(
        "kube_namespace_created",
        "gauge",
        ((f'{r},namespace="{t}"', np.where(up, NAMESPACES_CREATED, np.nan)) for r in KSM_REPLICAS for t in tenants),
    )
    yield from family(
        "kube_node_status_capacity",
        "gauge",
        (
            (f'{r},node="{POOL_NODE}",resource="{resource}",unit="{unit}"', np.where(up, amount, np.nan))
            for r in KSM_REPLICAS
            for resource, unit, amount in NODE_CAPACITY
        ),
    )
    nodes = pool_nodes(loaded, tenants)
    yield from family(
        "kube_node_labels",
        "gauge",
        (
            (
                f'node="gke-earth-{POOL}-1a2b3c4d-m{k:03d}",label_cloud_google_com_gke_nodepool="{POOL}"',
                np.where(nodes > k, 1.0, np.nan),
            )
            for k in range(int(np.nanmax(nodes)))
        ),
    )

    def kueue_replicas(values: np.ndarray, tenant: str) -> Iterator[tuple[str, np.ndarray]]:
        if tenant == "earth/vcJkd":
            for job in ("kueue", "kueue-again"):
                yield f'job="{job}",replica_role="standalone"', values
            return
        yield 'job="kueue",replica_role="leader"', values
        yield 'job="kueue",replica_role="follower"', np.concatenate([[np.nan], values[:-1]])

    checked = f'cohort="earth",cluster_queue="{CHECKED_KUEUE_QUEUE}",flavor="default",resource="nvidia.com/gpu"'
    yield from family(
        "kueue_cluster_queue_resource_usage",
        "gauge",
        chain(
            (
                (f'{r},cohort="earth",cluster_queue="{t}",flavor="default",resource="nvidia.com/gpu"', v)
                for t in tenants
                for r, v in kueue_replicas(parts[t]["running"], t)
            ),
            [
                (
                    f'cohort="earth",cluster_queue="{LEGACY_KUEUE_QUEUE}",flavor="default",resource="nvidia.com/gpu"',
                    parts[tenants[0]]["running"],
                ),
                (checked, parts[tenants[0]]["running"]),
            ],
        ),
    )
    yield from family(
        "kueue_cluster_queue_resource_reservation",  # admitted usage plus quota reserved for workloads not yet admitted
        "gauge",
        chain(
            (
                (f'{r},cohort="earth",cluster_queue="{t}",flavor="default",resource="nvidia.com/gpu"', v)
                for t in tenants
                for r, v in kueue_replicas(parts[t]["running"], t)
            ),
            [(checked, parts[tenants[0]]["running"] + WAITING_ON_CHECKS)],
        ),
    )
    yield from family(
        "kueue_cluster_queue_resource_pending",
        "gauge",
        chain(
            (
                (f'{r},cluster_queue="{t}",resource="nvidia.com/gpu"', v)
                for t in tenants
                for r, v in kueue_replicas(parts[t]["pending"], t)
            ),
            [(f'cluster_queue="{CHECKED_KUEUE_QUEUE}",resource="nvidia.com/gpu"', parts[tenants[0]]["pending"])],
        ),
    )
    # The ClusterQueues' quota (their spec: every replica reports it) and status. Each has a nominal quota of its
    # tenant's capacity and, in cohort earth without a borrowing limit, may borrow without bound (Kueue reports an
    # unset limit as +Inf), so none of its pending work is beyond what it could admit; each is active.
    queues = [*tenants, CHECKED_KUEUE_QUEUE]
    own = {t: capacity([t]) for t in tenants}
    quota = {q: np.full(len(seconds), own.get(q, own[tenants[0]])) for q in queues}
    for name, values in (
        ("kueue_cluster_queue_nominal_quota", quota),
        ("kueue_cluster_queue_borrowing_limit", {q: np.full(len(seconds), math.inf) for q in queues}),
    ):
        yield from family(
            name,
            "gauge",
            (
                (f'{r},cohort="earth",cluster_queue="{q}",flavor="default",resource="nvidia.com/gpu"', values[q])
                for q in queues
                for r in ('replica_role="leader"', 'replica_role="follower"')
            ),
        )
    yield from family(
        "kueue_cluster_queue_status",
        "gauge",
        (
            (f'cluster_queue="{q}",status="{status}",{r}', np.full(len(seconds), 1.0 if status == "active" else 0.0))
            for q in queues
            for status in ("pending", "active", "terminating")
            for r in ('replica_role="leader"', 'replica_role="follower"')
        ),
    )
    busy = np.sum([parts[t]["running"] for t in tenants], axis=0) / capacity(tenants) * 100.0
    yield from family(
        "DCGM_FI_DEV_GPU_UTIL", "gauge", iter([(f'Hostname="{POOL_NODE}",gpu="0",modelName="A100"', busy)])
    )
    yield "# EOF\n"


def backfill(loaded: LoadedTrace, data_dir: Path, work: Path) -> None:
    source = work / "history.om"
    with source.open("w", encoding="utf-8") as out:
        out.writelines(openmetrics(loaded))
    subprocess.run(
        [
            "promtool",
            "tsdb",
            "create-blocks-from",
            "openmetrics",
            # One block for the whole history: promtool rounds the duration down to its block ranges (2h times a
            # power of 3: ..., 162h, 486h, 1458h) and parses the whole input once per block, so the trace's 3 weeks,
            # which fall in one 1458h block, are one pass (4 days gave 54h blocks: 10 passes, over 3 times the time).
            # The samples are the same (``promtool tsdb dump``), and Prometheus answers every query over them the same.
            "--max-block-duration=1458h",
            str(source),
            str(data_dir),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PrometheusServer:
    """One ``prometheus`` process on 127.0.0.1 serving ``data_dir``; ``stop`` ends it by PID."""

    def __init__(self, data_dir: Path, work: Path, extra_config: str = "") -> None:
        self.data_dir = data_dir
        self.work = work
        self.extra_config = extra_config
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self, ready_within_s: float = 30.0) -> None:
        config = self.work / "prometheus.yml"
        config.write_text("global:\n  scrape_interval: 1m\nscrape_configs: []\n" + self.extra_config, encoding="utf-8")
        log = (self.work / "prometheus.log").open("wb")
        self._process = subprocess.Popen(
            [
                "prometheus",
                f"--config.file={config}",
                f"--storage.tsdb.path={self.data_dir}",
                "--storage.tsdb.retention.time=3650d",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--query.lookback-delta=4m",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + ready_within_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"prometheus exited early: {(self.work / 'prometheus.log').read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("prometheus did not become ready in time")

    def stop(self) -> None:
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(timeout=10)
        self._process = None


def prometheus_available() -> bool:
    return shutil.which("prometheus") is not None and shutil.which("promtool") is not None


@contextmanager
def serving_openmetrics(text: str, work: Path) -> Iterator[PrometheusServer]:
    """A Prometheus on 127.0.0.1 serving ``text`` (OpenMetrics), backfilled into ``work`` with promtool; stopped on
    leaving. The tests that write their own series start theirs with it."""
    if not prometheus_available():
        raise AssertionError("prometheus and promtool must be on PATH (Debian package `prometheus`; `make prometheus`)")
    data = work / "data"
    data.mkdir()
    history = work / "history.om"
    history.write_text(text, encoding="utf-8")
    subprocess.run(
        ["promtool", "tsdb", "create-blocks-from", "openmetrics", str(history), str(data)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    server = PrometheusServer(data, work)
    server.start()
    try:
        yield server
    finally:
        server.stop()
