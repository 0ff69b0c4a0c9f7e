"""``leadtime run`` without a Slack webhook URL: the start says the alerts go to the log only and why, /metrics says
so, and the log gets one line per condition per ``alerts.dedup_window``, not one every tick (the trace's collector
outage holds every demand class for the whole day, so each tick raises the same missing-data alerts)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
LEADTIME = Path(sys.executable).parent / "leadtime"
TRACE = ROOT / "data" / "helios-earth" / "demand_5min.csv.gz"
OUTAGE = "2020-05-10T12:00+08:00"  # the trace's collector was down all that day
TICKS = 3  # each condition raised at every one: logged once, not three times


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _metrics(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
            return str(response.read().decode())
    except OSError:
        return ""


def _sample(body: str, name: str) -> float | None:
    values = [float(line.split()[-1]) for line in body.splitlines() if line.startswith(name + " ")]
    return values[0] if values else None


def _leader_ticks(body: str) -> float:
    """Leader ticks run: the replayed outage leaves every class without demand, so they hold every pool (blind)."""
    outcomes = ("ok", "blind")
    return sum(_sample(body, f'leadtime_ticks_total{{outcome="{o}",role="leader"}}') or 0 for o in outcomes)


@pytest.mark.slow
def test_without_a_webhook_the_daemon_says_so_and_logs_each_condition_once_per_window(tmp_path: Path) -> None:
    port = _free_port()
    settings = yaml.safe_load((ROOT / "config/examples/helios-earth.yaml").read_text())
    settings["forecast"] = {"model": "last-value"}
    settings["loop"] = {"tick_interval": "1s"}
    settings["alerts"] = {"dedup_window": "1h"}
    settings["daemon"] = {
        "endpoints": {"bind_address": "127.0.0.1", "port": port},
        "leader_election": {"enabled": False},
    }
    config = tmp_path / "leadtime.yaml"
    config.write_text(json.dumps(settings))
    log = tmp_path / "leadtime.log"
    environ = {k: v for k, v in os.environ.items() if k != "LEADTIME_SLACK_WEBHOOK_URL"}
    command = [str(LEADTIME), "--log-level", "INFO", "run", "--config", str(config), "--replay", str(TRACE)]
    process = subprocess.Popen(
        [*command, "--replay-from", OUTAGE], env=environ, stdout=subprocess.DEVNULL, stderr=log.open("w")
    )
    try:
        deadline = time.monotonic() + 120
        while _leader_ticks(_metrics(port)) < TICKS and time.monotonic() < deadline:
            time.sleep(0.2)
        body = _metrics(port)
        assert _leader_ticks(body) >= TICKS, log.read_text()
        assert _sample(body, 'leadtime_alerts_sink{sink="log"}') == 1
        assert _sample(body, 'leadtime_alerts_sink{sink="slack"}') == 0
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
    written = log.read_text()
    start = [line for line in written.splitlines() if "alerts go to" in line]
    assert len(start) == 1 and "alerts go to the log only, not to Slack" in start[0], written
    assert "no webhook URL in the environment variable LEADTIME_SLACK_WEBHOOK_URL" in start[0]
    alerts = [line for line in written.splitlines() if "alert kind=missing-data" in line]
    subjects = [line.split("subject=", 1)[1].split(" Holding pools:")[0] for line in alerts]
    assert alerts, written  # the outage is told
    assert len(subjects) == len(set(subjects)), "\n".join(alerts)  # each condition once in the window, not per tick
