"""``leadtime run --replay`` on a workstation with the pod's configuration: ``alerts.slack_webhook_url_file`` names a
file mounted only in the pod. A rehearsal does not need Slack: it runs, its alerts go to the log, and the start says
why in one warning, where it was refused (exit 2) before. ``leadtime run`` live still refuses the file."""

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


@pytest.mark.slow
def test_a_rehearsal_with_the_pods_webhook_file_alerts_to_the_log(tmp_path: Path) -> None:
    port = _free_port()
    missing = tmp_path / "secrets" / "webhook-url"  # mounted from the Secret in the pod, absent here
    settings = yaml.safe_load((ROOT / "config/examples/helios-earth.yaml").read_text())
    settings["forecast"] = {"model": "last-value"}
    settings["loop"] = {"tick_interval": "1s"}
    settings["alerts"] = {"slack_webhook_url_file": str(missing)}
    settings["daemon"] = {
        "endpoints": {"bind_address": "127.0.0.1", "port": port},
        "leader_election": {"enabled": False},
    }
    config = tmp_path / "leadtime.yaml"
    config.write_text(json.dumps(settings))
    log = tmp_path / "leadtime.log"
    environ = {
        k: v for k, v in os.environ.items() if k not in ("LEADTIME_SLACK_WEBHOOK_URL", "KUBERNETES_SERVICE_HOST")
    }
    command = [str(LEADTIME), "--log-level", "INFO", "run", "--config", str(config), "--replay", str(TRACE)]
    process = subprocess.Popen(command, env=environ, stdout=subprocess.DEVNULL, stderr=log.open("w"))
    try:
        deadline = time.monotonic() + 120
        body = ""
        while process.poll() is None and time.monotonic() < deadline:
            body = _metrics(port)
            if _sample(body, 'leadtime_alerts_sink{sink="log"}') is not None:
                break
            time.sleep(0.2)
        assert process.poll() is None, log.read_text()  # not refused
        assert _sample(body, 'leadtime_alerts_sink{sink="log"}') == 1, log.read_text()
        assert _sample(body, 'leadtime_alerts_sink{sink="slack"}') == 0
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
    start = [line for line in log.read_text().splitlines() if "alerts go to" in line]
    assert len(start) == 1, log.read_text()
    assert "rehearsal: alerts go to the log only, not to Slack" in start[0]
    assert f"alerts.slack_webhook_url_file: cannot read the webhook URL file {missing}" in start[0]
    live = subprocess.run(
        [str(LEADTIME), "run", "--config", str(config)],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert live.returncode == 2
    assert f"alerts.slack_webhook_url_file: cannot read the webhook URL file {missing}" in live.stderr
