"""A TPU slice's node pool runs as the node service account its group names: the real ``ClusterManagerClient``
sends it (and the access scopes) in ``nodePools.create`` to the fake GKE API, which refuses a create as an account
the caller cannot act as (403, ``iam.serviceAccounts.actAs``), as GKE does. A group that names none is created as
GKE's default (the project's Compute Engine default service account), and loading such a configuration warns."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import yaml

from actuators.slice_writes import SliceWrites
from config import settings_from_mapping
from models import PermanentActuatorError
from tests.contract.harnesses import CLUSTER, SLICES
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi

NODES = "tpu-nodes@test-project.iam.gserviceaccount.com"
SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
BUNDLED = Path(__file__).resolve().parents[2] / "deploy" / "base" / "config.yaml"


def test_the_slice_is_created_as_the_groups_node_service_account(gke_api: FakeGkeApi) -> None:
    gke_api.act_as = {NODES}  # the agent may act as the node service account, as docs/google-cloud.md grants
    mapping = SLICES.model_copy(update={"service_account": NODES, "oauth_scopes": SCOPES})

    SliceWrites(google_clients(gke_api.url).gke, CLUSTER).create(SLICES.pool, mapping, "v5e-0")

    config = gke_api.pools["v5e-0"].spec["config"]
    assert config["serviceAccount"] == NODES
    assert config["oauthScopes"] == list(SCOPES)
    assert config["machineType"] == "ct5lp-hightpu-4t"


def test_a_group_without_one_is_created_as_gkes_default_which_needs_act_as_on_it(gke_api: FakeGkeApi) -> None:
    gke_api.act_as = {NODES}  # actAs on the node service account only, not on the Compute Engine default one

    with pytest.raises(PermanentActuatorError, match=r"iam\.serviceAccounts\.actAs") as refused:
        SliceWrites(google_clients(gke_api.url).gke, CLUSTER).create(SLICES.pool, SLICES, "v5e-0")

    assert "'default'" in str(refused.value)
    assert "v5e-0" not in gke_api.pools


def test_loading_a_slice_group_without_a_node_service_account_warns(caplog: pytest.LogCaptureFixture) -> None:
    raw: dict[str, Any] = yaml.safe_load(BUNDLED.read_text())
    group = raw["cloud"]["tpu_slice_groups"][0]
    assert group["service_account"].endswith(".iam.gserviceaccount.com")  # the example names one: no warning
    with caplog.at_level(logging.WARNING, logger="config.loader"):
        settings_from_mapping(raw, source="with")
        del group["service_account"]
        settings_from_mapping(raw, source="without")

    warned = [r.getMessage() for r in caplog.records if "service_account" in r.getMessage()]
    assert len(warned) == 1 and "without: cloud.tpu_slice_groups[0].service_account: unset" in warned[0], warned
    assert "Compute Engine default service account" in warned[0]
    assert "roles/iam.serviceAccountUser" in warned[0]
