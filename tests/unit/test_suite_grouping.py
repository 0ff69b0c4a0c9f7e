"""The suite's own scheduling: tests marked with one ``xdist_group`` share a worker under ``--dist loadgroup``.

The module fixtures that run a whole simulation, and the tests that share one Prometheus server, rely on it;
pytest 9.2 with pytest-xdist 3.8 dropped the marks without a word, and each such fixture then ran once per worker.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.xdist_group("grouping-probe")


def test_a_grouped_test_carries_its_group_under_loadgroup(request: pytest.FixtureRequest) -> None:
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("runs only under pytest -n N --dist loadgroup (as `make test` does)")
    assert request.node.nodeid.endswith("@grouping-probe"), (
        f"{request.node.nodeid}: xdist_group marks are ignored by this pytest and pytest-xdist pair"
    )
