"""What README says of ``recommendation.json``'s ``dry_run`` list: each resize at the plan's size (``to_units``, the
pool's ``recommended_units``), the nodes being drained out of it, not the target the daemon would set in the cloud,
which still counts them until their drains delete them. The pool is read from the fake GKE and Compute Engine APIs,
the drains from the nodes' drain marks on the fake Kubernetes API, with the real clients
(``test_recommend_budget_drains``'s fixtures): 4 nodes, 2 of them being drained by a budget's forced release.

README described neither the list nor its figure: with the 2 draining nodes still in the cloud's target, the daemon
would set that target to 26 for the plan of 2 -> 24 the list gives as 24.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi
from tests.prometheus.server import PrometheusServer
from tests.prometheus.test_recommend_budget_drains import _config, _four_nodes_two_draining, _recommend

pytestmark = pytest.mark.xdist_group("prometheus")
README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_dry_run_figure_is_the_plans_size_as_readme_says(
    prometheus: PrometheusServer, gke_api: FakeGkeApi, kube_api: FakeKubeApi, tmp_path: Path
) -> None:
    _four_nodes_two_draining(gke_api, kube_api, forced=True)

    document = _recommend(_config(tmp_path, prometheus, gke_api, kube_api.url), tmp_path / "out")

    (pool,) = document["pools"]
    (action,) = document["dry_run"]
    cloud_target = sum(len(m.instances) for m in gke_api.pools["a100"].migs)
    assert (pool["current_units"], pool["draining_units"], cloud_target) == (2, 2, 4)
    assert action["to_units"] == pool["recommended_units"] == 24
    # the target the daemon sets in the cloud: the planned change applied to the cloud's own target
    assert cloud_target + action["to_units"] - pool["current_units"] == 26
    page = " ".join(README.read_text(encoding="utf-8").split())
    assert "`dry_run` lists each resize the tick would send" in page
    assert "`to_units` is the plan's size, the pool's `recommended_units`" in page
    assert "26 for a plan of 2 -> 24 with 2 nodes of a forced release still draining" in page
