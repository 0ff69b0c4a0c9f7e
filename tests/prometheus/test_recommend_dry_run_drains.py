"""``leadtime recommend``'s ``dry_run`` list sets each pool to the target its recommendation names, also when idle
nodes of the pool are being drained. The pools are read from the fake GKE and Compute Engine APIs, the drains from the
nodes' drain marks on the fake Kubernetes API, with the real clients (``test_recommend_budget_drains``'s fixtures).

Before, the executor of recommend's dry-run tick, which has no drainer to end drains with, held back the units the
plan counted as served by the idle nodes being drained (``agent.executor_resizes.held_for_take_back``): with 4 nodes,
2 of them idle and being drained, and 24 recommended, the list said to set the pool to 22 under the key ``...->24``,
where the daemon ends those 2 drains and the pool serves the 24 planned.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes.gke_api import FakeGkeApi
from tests.fakes.kube_api import FakeKubeApi
from tests.prometheus.server import PrometheusServer
from tests.prometheus.test_recommend_budget_drains import _config, _four_nodes_two_draining, _recommend

pytestmark = pytest.mark.xdist_group("prometheus")


@pytest.mark.parametrize("forced", [False, True], ids=["idle-drains", "forced-drains"])
def test_the_dry_run_sets_the_recommended_target(
    prometheus: PrometheusServer, gke_api: FakeGkeApi, kube_api: FakeKubeApi, tmp_path: Path, forced: bool
) -> None:
    _four_nodes_two_draining(gke_api, kube_api, forced=forced)

    document = _recommend(_config(tmp_path, prometheus, gke_api, kube_api.url), tmp_path / "out")

    (pool,) = document["pools"]
    assert (pool["current_units"], pool["draining_units"]) == (2, 2)
    assert pool["recommended_draining_units"] == (2 if forced else 0)  # idle drains are taken back by the scale-up
    recommended = pool["recommended_units"]
    assert recommended == 24
    (action,) = document["dry_run"]
    # with idle drains 22 before: the 2 nodes the plan takes back were held back from the recorded resize
    assert (action["pool_id"], action["to_units"]) == ("a100", recommended)
    assert action["key"].endswith(f"->{recommended}")
    # only read: no node patched, cordoned or evicted, and no size change sent
    assert {r.verb for r in kube_api.requests} <= {"get", "list"}
    assert [(m, p) for m, p in gke_api.requests if m != "GET" and "listManagedInstances" not in p] == []
