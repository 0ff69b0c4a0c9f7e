"""``leadtime run``'s live wiring as a whole daemon (Lease election, metrics, the dry-run and leader-only wrappers)
on the fake GKE, Kubernetes and Prometheus APIs, driven tick by tick with a simulated clock; and the command's
refusal, with exit code 2, of a configuration without the sections a live daemon needs."""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from kubernetes import client as k8s
from prometheus_client import CollectorRegistry

from agent.cli import main
from agent.daemon.live import live_parts
from agent.daemon.wiring import AssembledDaemon, assemble
from agent.ledger.sqlite import SqliteLedger
from agent.notify import RecordingNotifier
from tests.e2e.rig import CLASS, NODE_POOLS, SPOT, Rig

MINUTE = timedelta(minutes=1)
ENVIRON = {"POD_NAME": "leadtime-0", "POD_NAMESPACE": "leadtime"}
LEADTIME = Path(sys.executable).parent / "leadtime"


def _daemon(rig: Rig, kube: k8s.ApiClient, mode: str) -> AssembledDaemon:
    settings = rig.settings(election=True, mode=mode)
    parts = live_parts(settings, "e2e config", rig.clock, RecordingNotifier(), kube, CollectorRegistry())
    assembled = assemble(settings, mode, parts, ENVIRON)
    assembled.endpoints.stop()  # driven job by job; no socket needed
    return assembled


def _tick(rig: Rig, assembled: AssembledDaemon, after: timedelta = MINUTE) -> None:
    rig.clock.advance(after)
    assembled.daemon.elect()
    assembled.daemon.tick()


def _sample(assembled: AssembledDaemon, name: str, **labels: str) -> float | None:
    return assembled.metrics.registry.get_sample_value(name, labels)


def test_a_live_daemon_checks_the_resources_its_queries_count_and_logs_what_it_cannot_check(
    rig: Rig, kube_client: k8s.ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    settings = rig.settings(election=True, mode="dry-run")
    parts = live_parts(settings, "e2e config", rig.clock, RecordingNotifier(), kube_client, CollectorRegistry())
    check, onprem = parts.checks  # the resources the queries count; on-prem pools without a capacity query
    assert list(onprem()) == []  # this configuration has no on-prem pool
    # this Prometheus has no kube-state-metrics series: the resource was never offered nor requested, as a real
    # one would answer
    (problem,) = check()
    assert problem.startswith(f"class(es) {CLASS}: no node offered and no pod requested the resource 'nvidia_com_gpu'")
    rig.prometheus.stop()  # a check that cannot run is logged, not told as a problem
    with caplog.at_level(logging.WARNING):
        assert list(check()) == []
    (record,) = [r for r in caplog.records if "could not check the resource" in r.getMessage()]
    assert CLASS in record.getMessage() and "cannot connect to Prometheus" in record.getMessage()


def test_enforce_mode_scales_up_then_drains_the_idle_nodes_away(rig: Rig, kube_client: k8s.ApiClient) -> None:
    rig.add_pools()
    rig.prometheus.set_demand(CLASS, 24)
    assembled = _daemon(rig, kube_client, "enforce")
    assembled.daemon.refit()
    _tick(rig, assembled)
    assert _sample(assembled, "leadtime_is_leader") == 1.0
    assert rig.gke.pools[NODE_POOLS[SPOT]].migs[0].target_size == 3
    assert _sample(assembled, "leadtime_actuator_calls_total", method="resize", pool=SPOT, outcome="started") == 1.0
    assert _sample(assembled, "leadtime_decisions_total", pool=SPOT, action="scale-up", status="started") == 1.0

    rig.settle()
    _tick(rig, assembled, 10 * MINUTE)
    assert _sample(assembled, "leadtime_pool_ready_units", pool=SPOT) == 3.0
    rig.prometheus.set_demand(CLASS, 8)  # demand falls to one node; the other two sit idle
    for _ in range(3):
        _tick(rig, assembled, 5 * MINUTE)  # seen idle, then idle for the 10-minute window: drained

    assert rig.gke.calls("POST", "deleteInstances") == 2
    assert rig.gke.calls("POST", "/resize") == 1  # the scale-up only
    assert _sample(assembled, "leadtime_decisions_total", pool=SPOT, action="drain", status="done") == 2.0
    rig.settle()
    assert len(rig.mirror.nodes(SPOT)) == 1
    assert rig.kube.calls("patch", "nodes") == 6  # each drained node: cordoned and marked at its two steps, unmarked
    assert _sample(assembled, "leadtime_ticks_total", role="leader", outcome="ok") == 5.0


def test_dry_run_mode_reads_the_pools_and_the_nodes_but_changes_nothing(rig: Rig, kube_client: k8s.ApiClient) -> None:
    rig.add_pools(spot_nodes=3)
    rig.prometheus.set_demand(CLASS, 40)
    assembled = _daemon(rig, kube_client, "dry-run")
    assembled.daemon.refit()
    _tick(rig, assembled)
    rig.prometheus.set_demand(CLASS, 8)
    for _ in range(3):
        _tick(rig, assembled, 5 * MINUTE)

    recorded = {
        action: _sample(assembled, "leadtime_decisions_total", pool=SPOT, action=action, status="recorded")
        for action in ("scale-up", "drain")
    }
    assert recorded["scale-up"] == 1.0
    assert (recorded["drain"] or 0.0) >= 2.0  # would have drained two idle nodes (again each tick: nothing moves)
    gke_writes = [(m, p) for m, p in rig.gke.requests if m in ("POST", "DELETE") and "listManagedInstances" not in p]
    assert gke_writes == []
    kube_writes = [r for r in rig.kube.requests if r.verb not in ("get", "list", "watch") and r.resource != "leases"]
    # besides its Events (repeats patched), only its own planner memory (recorded decisions count for
    # anti-flapping, as in enforce)
    assert {(r.verb, r.resource, "" if r.resource == "events" else r.name) for r in kube_writes} <= {
        ("create", "events", ""),
        ("patch", "events", ""),
        ("create", "configmaps", ""),
        ("update", "configmaps", "leadtime-state"),
    }
    assert rig.kube.calls("list", "nodes") > 0 and rig.kube.calls("list", "pods") > 0
    # the shadow account: kept next to the ledger, charged for the intervals between ticks; the three nodes ran
    # on while the recommendations drained two of them, so following them would have saved money
    assert (rig.workdir / "ledger.sqlite.shadow.json").is_file()
    assert _sample(assembled, "leadtime_shadow_intervals", outcome="charged") == 3.0
    assert (_sample(assembled, "leadtime_shadow_savings_usd_total") or 0.0) > 0.0


@pytest.mark.parametrize(
    ("drop", "named"),
    [(("prometheus",), ["prometheus"]), (("cloud",), ["cloud"]), (("prometheus", "cloud"), ["prometheus", "cloud"])],
)
def test_run_without_a_needed_section_exits_2_naming_it(
    rig: Rig, tmp_path: Path, capsys: pytest.CaptureFixture[str], drop: tuple[str, ...], named: list[str]
) -> None:
    document = rig.config_document()
    for section in drop:
        del document[section]
    config = tmp_path / "leadtime.yaml"
    config.write_text(yaml.safe_dump(document), encoding="utf-8")
    assert main(["run", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    for section in named:
        assert f"  - {section}: " in err
    assert "--replay" in err
    assert "Traceback" not in err


@pytest.mark.slow
def test_leadtime_run_as_a_process_resizes_a_pool_and_stops_on_sigterm(rig: Rig, tmp_path: Path) -> None:
    rig.add_pools()
    rig.prometheus.set_demand(CLASS, 16)
    document = rig.config_document(election=True, mode="enforce")
    document["loop"] = {"tick_interval": "1s"}
    document["daemon"]["leader_election"] |= {"lease_duration": "3s", "renew_deadline": "2s", "retry_period": "0.5s"}
    document["daemon"]["kubernetes"]["request_timeout"] = "1s"  # within lease_duration - renew_deadline
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    document["daemon"]["endpoints"]["port"] = port
    config = tmp_path / "leadtime.yaml"
    config.write_text(yaml.safe_dump(document), encoding="utf-8")
    log = tmp_path / "leadtime.log"
    ledger = rig.workdir / "ledger.sqlite"
    ledger.touch()  # an empty ledger file: refused without --fresh-ledger (see the test below)
    with log.open("w") as err:
        process = subprocess.Popen(
            [str(LEADTIME), "--log-level", "INFO", "run", "--config", str(config), "--fresh-ledger"],
            env={**os.environ, **ENVIRON},
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        try:
            deadline = time.monotonic() + 60
            while _leader_ticks(port) < 3 and time.monotonic() < deadline:  # a few ticks, each on the live parts
                assert process.poll() is None, log.read_text()
                time.sleep(0.2)
            assert rig.gke.pools[NODE_POOLS[SPOT]].migs[0].target_size == 2
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=30) == 0
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)
    text = log.read_text()
    assert rig.gke.calls("POST", "/resize") == 1, text
    assert "daemon stopped and handed over the lease" in text
    assert "Traceback" not in text, text
    with SqliteLedger(ledger) as spend:  # the fresh ledger charged the pools while the daemon ran
        assert spend.entries()


def _leader_ticks(port: int) -> float:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
            body = response.read().decode()
    except OSError:
        return 0.0
    line = 'leadtime_ticks_total{outcome="ok",role="leader"} '
    return next((float(row.split()[-1]) for row in body.splitlines() if row.startswith(line)), 0.0)


def test_run_refuses_an_empty_ledger_file_naming_it_and_the_way_to_start_fresh(
    rig: Rig, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = rig.workdir / "ledger.sqlite"
    ledger.touch()
    config = rig.write_config(tmp_path / "leadtime.yaml")
    assert main(["run", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert f"the ledger file {ledger} is empty (0 bytes)" in err
    assert "--fresh-ledger" in err and "Traceback" not in err
    assert ledger.stat().st_size == 0
