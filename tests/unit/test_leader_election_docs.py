"""``daemon.leader_election``'s reference says what a live run and a rehearsal each do with it. It said "in a pod,
leadtime run refuses it off unless the pod sets LEADTIME_SINGLE_REPLICA=true", true of a live run only: a rehearsal
(``leadtime run --replay``) skips the live checks and runs in a pod with election off, and with election on it
elects on a Lease of its own, ``<lease_name>-rehearsal`` (``agent.commands.run.rehearsal_settings``), which the
reference did not say. Each description is checked here against the code it describes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from agent.commands.run import REHEARSAL_LEASE_SUFFIX, rehearsal_settings
from agent.daemon.identity import lease_namespace
from agent.daemon.live_settings import SINGLE_REPLICA_ENV, check_live_settings
from agent.simulation.window import SimulationWindow
from config import settings_from_mapping
from config.field_docs import FIELDS
from config.schema import Settings
from models import ConfigError

POD = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
RAW: dict[str, Any] = {
    "demand_classes": [{"name": "train"}],
    "pools": [{"id": "a100", "kind": "gpu-node-pool", "chips_per_unit": 8, "max_units": 4,
               "price_per_chip_hour_usd": 3.67, "lead_time": "10m", "serves": ["train"]}],
}  # fmt: skip
ENABLED = FIELDS["LeaderElectionSettings.enabled"]
REHEARSAL_LEASE = f"`<lease_name>{REHEARSAL_LEASE_SUFFIX}`"


def _settings(**election: Any) -> Settings:
    return settings_from_mapping({**RAW, "daemon": {"leader_election": election}}, source="c.yaml")


def _election_problems(settings: Settings, environ: dict[str, str]) -> list[str]:
    try:
        check_live_settings(settings, "c.yaml", environ)  # a live run's check at start; a rehearsal skips it
    except ConfigError as exc:
        return [p.message for p in exc.problems if p.key_path == "daemon.leader_election.enabled"]
    return []


def test_a_live_run_in_a_pod_refuses_election_off_unless_the_pod_is_the_only_replica() -> None:
    off = _settings(enabled=False)
    (refusal,) = _election_problems(off, POD)
    assert SINGLE_REPLICA_ENV in refusal and "Recreate" in refusal
    assert _election_problems(off, {**POD, SINGLE_REPLICA_ENV: "true"}) == []
    assert _election_problems(off, {}) == []  # outside a pod
    assert f"A live `leadtime run` in a pod refuses it off unless the pod sets {SINGLE_REPLICA_ENV}=true" in ENABLED


def test_a_rehearsal_elects_on_a_lease_of_its_own_and_the_reference_says_so() -> None:
    settings = _settings(lease_name="ml-autoscaler")
    step = settings.forecast.step
    index = pd.date_range("2026-01-01", periods=4, freq=pd.Timedelta(step), tz="UTC")
    window = SimulationWindow(index, ("train",), np.zeros((4, 1)), np.zeros((4, 1)), step)
    rehearsed, mode = rehearsal_settings(settings, window, "dry-run")
    assert rehearsed.daemon.leader_election.lease_name == "ml-autoscaler-rehearsal" and mode == "enforce"
    assert "A rehearsal (`leadtime run --replay`) acts on no cluster: off is accepted anywhere, in a pod too" in ENABLED
    assert f"on, it elects on the Lease {REHEARSAL_LEASE}, never the daemon's own" in ENABLED
    assert REHEARSAL_LEASE in FIELDS["LeaderElectionSettings.lease_name"]


def test_the_lease_namespace_outside_a_pod_is_default(tmp_path: Path) -> None:
    election = _settings().daemon.leader_election
    assert lease_namespace(election, {}, tmp_path / "no-service-account-namespace") == "default"
    assert lease_namespace(election, {"POD_NAMESPACE": "ml"}, tmp_path / "none") == "ml"
    assert FIELDS["LeaderElectionSettings.lease_namespace"].endswith(
        "(unset: the pod's namespace; outside a pod, `default`)."
    )
