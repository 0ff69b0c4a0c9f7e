"""docs/google-cloud.md on node pools managed with Terraform: put ``lifecycle { ignore_changes = [node_count] }`` on
each pool the agent resizes. The google provider reads ``node_count`` as the sum of the pool's groups' ``targetSize``
divided by their number (``flattenNodePool`` in its ``resource_container_node_pool.go``) and calls ``setSize`` when
that differs from the configuration, so an apply on a pool the agent grew sets every zone back. Tested: the page's
sentence and example (parsed by ``terraform fmt`` where it is installed), and, with the real clients on the fake GKE
API, that a pool configured at ``node_count = 1`` in 3 zones and grown by the agent to 7 nodes reads so as 2."""

from __future__ import annotations

import re
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from actuators.gke_node_pool import GkeNodePoolActuator
from config.cloud import NodePoolMapping
from models.clock import SimulatedClock
from tests.contract.harnesses import CLUSTER
from tests.fakes.fixtures import google_clients
from tests.fakes.gke_api import FakeGkeApi

DOC = Path(__file__).resolve().parents[1] / "docs" / "google-cloud.md"
TERRAFORM = shutil.which("terraform")


def _paragraph() -> str:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("\n## Node pools\n", 1)[1].split("\n## ", 1)[0]
    return section.split("**Node pools managed with Terraform.**", 1)[1]


def test_the_page_says_to_ignore_node_count_on_the_pools_the_agent_resizes() -> None:
    words = " ".join(_paragraph().split())
    assert "On each node pool the agent resizes, put `lifecycle { ignore_changes = [node_count] }`" in words
    assert "under `move-bounds`, if the pool's `autoscaling` block is managed there too, ignore it as well" in words
    [example] = re.findall(r"```hcl\n(.*?)```", _paragraph(), re.DOTALL)
    assert 'resource "google_container_node_pool"' in example
    assert re.search(r"lifecycle \{\s*ignore_changes = \[node_count, autoscaling\]\s*\}", example)


@pytest.mark.skipif(TERRAFORM is None, reason="terraform is not installed: it parses the page's example")
def test_the_pages_example_is_valid_and_formatted_hcl() -> None:
    [example] = re.findall(r"```hcl\n(.*?)```", _paragraph(), re.DOTALL)
    command = [str(TERRAFORM), "fmt", "-check", "-no-color", "-"]
    checked = subprocess.run(command, input=example, capture_output=True, text=True, timeout=60, check=False)
    assert checked.returncode == 0, checked.stderr


def test_a_pool_the_agent_grew_reads_as_another_node_count_than_terraforms(gke_api: FakeGkeApi) -> None:
    zones = ("us-central1-a", "us-central1-b", "us-central1-c")
    gke_api.add_pool("a100", nodes=3, zones=zones)  # node_count = 1, per zone
    clients = google_clients(gke_api.url)
    mapping = NodePoolMapping(pool="gpu", node_pool="a100")
    clock = SimulatedClock(datetime(2024, 5, 1, tzinfo=UTC))
    GkeNodePoolActuator(clients.gke, clients.migs, CLUSTER, [mapping], clock).resize("gpu", 7, "up")

    pool = clients.gke.get_node_pool(name=f"{CLUSTER}/nodePools/a100")
    sizes = []
    for url in pool.instance_group_urls:  # as the provider reads them: each group's targetSize
        project, zone, name = re.findall(r"projects/([^/]+)/zones/([^/]+)/instanceGroupManagers/([^/]+)$", url)[0]
        sizes.append(clients.migs.get(project=project, zone=zone, instance_group_manager=name).target_size)
    assert sizes == [3, 2, 2]
    assert sum(sizes) // len(pool.instance_group_urls) == 2  # not 1: the next apply would setSize every zone to 1
