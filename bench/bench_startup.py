"""How long ``leadtime run --replay`` takes from process start to serving ``/healthz`` and to ``/readyz``.

One replica with leader election against the fake Kubernetes API (as ``tests/daemon/test_run_process.py`` runs
it), the bundled Helios trace and the ``helios-earth`` example (model ``auto``), endpoints on a free port of
127.0.0.1. ``--busy`` starts that many CPU-bound processes for the duration (each stopped by its PID), to see the
start on a loaded machine. Not a timed test: it prints the figures.

    .venv/bin/python -m bench.bench_startup [--runs 3] [--busy 1]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import yaml

from tests.fakes.kube_api import FakeKubeApi

ROOT = Path(__file__).resolve().parents[1]
LEADTIME = Path(sys.executable).parent / "leadtime"
TRACE = ROOT / "data" / "helios-earth" / "demand_5min.csv.gz"
CONFIG = ROOT / "config" / "examples" / "helios-earth.yaml"
GIVE_UP = 180.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def one_start(kube_url: str, workdir: Path) -> tuple[float, float]:
    """Seconds from spawning the process to the first 200 on /healthz and on /readyz."""
    port = _free_port()
    settings = yaml.safe_load(CONFIG.read_text())
    settings["loop"] = {"tick_interval": "5s"}
    settings["daemon"] = {
        "mode": "dry-run",
        "endpoints": {"bind_address": "127.0.0.1", "port": port, "ready_max_tick_age": "60s"},
        "leader_election": {"lease_duration": "3s", "renew_deadline": "2s", "retry_period": "0.5s"},
        "kubernetes": {"api_url": kube_url, "request_timeout": "1s"},
    }
    config = workdir / f"startup-{port}.yaml"
    config.write_text(json.dumps(settings))
    env = {**os.environ, "POD_NAME": f"bench-{port}", "POD_NAMESPACE": "leadtime"}
    command = [str(LEADTIME), "run", "--config", str(config), "--replay", str(TRACE)]
    started = time.monotonic()
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    healthy = ready = None
    try:
        while ready is None and time.monotonic() - started < GIVE_UP and process.poll() is None:
            if healthy is None and _status(f"http://127.0.0.1:{port}/healthz") == 200:
                healthy = time.monotonic() - started
            if healthy is not None and _status(f"http://127.0.0.1:{port}/readyz") == 200:
                ready = time.monotonic() - started
            time.sleep(0.05)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if healthy is None or ready is None:
        raise SystemExit(f"the daemon was not ready within {GIVE_UP:.0f} s (exit {process.returncode})")
    return healthy, ready


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--busy", type=int, default=0, help="CPU-bound processes to run meanwhile")
    args = parser.parse_args()
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    kube = FakeKubeApi().start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            times = [one_start(kube.url, Path(tmp)) for _ in range(args.runs)]
    finally:
        kube.stop()
        for process in busy:
            os.kill(process.pid, signal.SIGTERM)
            process.wait()
    for healthy, ready in times:
        print(f"healthz {healthy:5.1f} s   readyz {ready:5.1f} s")
    print(
        f"median of {len(times)} (busy {args.busy}, load {os.getloadavg()[0]:.1f}): healthz "
        f"{statistics.median(h for h, _ in times):.1f} s, readyz {statistics.median(r for _, r in times):.1f} s"
    )


if __name__ == "__main__":
    main()
