"""Fixtures: the live cluster on the fakes (GKE, Kubernetes, Prometheus), all on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path

import pytest

from models.clock import SimulatedClock
from tests.e2e.rig import T0, NodeMirror, Rig
from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi
from tests.fakes.prometheus_api import FakePrometheusApi


@pytest.fixture
def rig(gke_api: FakeGkeApi, kube_api: FakeKubeApi, prometheus_api: FakePrometheusApi, tmp_path: Path) -> Rig:
    return Rig(gke_api, kube_api, prometheus_api, SimulatedClock(T0), NodeMirror(gke_api, kube_api), tmp_path)
