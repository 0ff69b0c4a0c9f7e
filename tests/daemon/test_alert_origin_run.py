"""``leadtime run`` stamps every alert it sends with its mode, the cluster it acts on and its replica (the pod name
the Deployment sets in POD_NAME): a rehearsal's alerts say they come from a simulated cluster, in enforce (the mode
every rehearsal runs in), so that they cannot be read as a live agent's. Posted to a local webhook receiver."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.fakes.slack_receiver import SlackReceiver

ROOT = Path(__file__).resolve().parents[2]
LEADTIME = Path(sys.executable).parent / "leadtime"
TRACE = ROOT / "data" / "helios-earth" / "demand_5min.csv.gz"
OUTAGE = "2020-05-10T12:00+08:00"  # the trace's collector was down all that day: missing-data alerts at once


@pytest.mark.slow
def test_a_rehearsals_alerts_say_they_come_from_a_simulated_cluster_and_which_replica(tmp_path: Path) -> None:
    settings = yaml.safe_load((ROOT / "config/examples/helios-earth.yaml").read_text())
    settings["forecast"] = {"model": "last-value"}
    settings["loop"] = {"tick_interval": "1s"}
    # the outage raises a missing-data alert per demand class (16) at the first tick: beyond the default rate limit
    # (10 a minute) the rest wait for it, and the stop waited out the queue's flush deadline (10 s) on them; within
    # the limit they all go at once, and every one of them is checked below
    settings["alerts"] = {"rate_limit_per_minute": 600}
    settings["daemon"] = {"endpoints": {"bind_address": "127.0.0.1", "port": 0}, "leader_election": {"enabled": False}}
    config = tmp_path / "leadtime.yaml"
    config.write_text(json.dumps(settings))
    log = tmp_path / "leadtime.log"
    with SlackReceiver() as receiver:
        command = [str(LEADTIME), "run", "--config", str(config), "--mode", "dry-run", "--replay", str(TRACE)]
        process = subprocess.Popen(
            [*command, "--replay-from", OUTAGE],
            env={**os.environ, "LEADTIME_SLACK_WEBHOOK_URL": receiver.url, "POD_NAME": "leadtime-rehearsal-0"},
            stdout=subprocess.DEVNULL,
            stderr=log.open("w"),
        )
        try:
            assert receiver.wait_for(1, timeout_s=120), log.read_text()
            process.send_signal(signal.SIGTERM)
            # a stop may take the shutdown wait for the tick in progress (90 s) and the alert queue's 10 s: on a
            # busy machine the first tick can still be running when the signal comes
            assert process.wait(timeout=120) == 0, log.read_text()
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)
    origin = "enforce · rehearsal of demand_5min.csv.gz (simulated cluster) · replica leadtime-rehearsal-0"
    assert receiver.received, log.read_text()
    for message in receiver.received:
        assert message["text"].startswith(f"[WARNING] ({origin}) "), message["text"]
        assert message["blocks"][-1]["elements"][0]["text"].endswith(f" · leadtime {origin}")
