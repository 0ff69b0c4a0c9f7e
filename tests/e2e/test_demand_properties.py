"""Properties over every kind of demand value, through the live source and the trace reader: a value that cannot be
a demand (negative, infinite, NaN, above MAX_DEMAND) never shrinks a pool and always raises a missing-data alert;
the trace reader refuses it or keeps only plausible values; whatever is read, written JSON stays strict JSON."""

from __future__ import annotations

import json
import math
import tempfile
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes import client as k8s

from agent.notify import RecordingNotifier
from agent.sources.trace import read_trace
from agent.strict_json import dumps
from config import settings_from_mapping
from models import AlertKind, SkipReason, TraceError
from models.demand import MAX_DEMAND, implausible_demand
from tests.e2e.rig import CLASS, ON_DEMAND, Rig, end_process, live_agent
from tests.fakes import kube_objects as objs


def _implausible_values(seed: int, count: int) -> list[float]:
    """A seeded sweep over every way a value can fail: negative (tiny to huge), above the limit (just to 1e308),
    both infinities and NaN."""
    rng = np.random.default_rng(seed)
    values = [-0.0001, -50.0, -1e308, MAX_DEMAND * 1.0000001, 1e12, 1e308, math.inf, -math.inf, math.nan]
    values += (-(10.0 ** rng.uniform(-6, 308, count))).tolist()
    values += (10.0 ** rng.uniform(9.01, 308, count)).tolist()
    return values


def test_no_implausible_value_from_prometheus_ever_shrinks_a_pool(rig: Rig, kube_client: k8s.ApiClient) -> None:
    rig.add_pools(on_demand_nodes=3)
    nodes = rig.mirror.nodes(ON_DEMAND)
    for i, node in enumerate(nodes):  # work the drainer cannot see: only the demand keeps these nodes
        rig.kube.put("pods", objs.pod(f"train-{i}", node, namespace=CLASS, owner_kind="ReplicaSet"))
    document = rig.config_document(spot_max=0)
    document["planner"] = {"scale_down_stabilization": "0s", "idle_hold_lead_times": 0}  # release at once
    config = settings_from_mapping(document, source="e2e config")

    for value in _implausible_values(seed=20, count=8):
        rig.prometheus.set_demand(CLASS, value)
        notifier = RecordingNotifier()
        agent = live_agent(rig, config, kube_client, notifier)
        try:
            report = agent.run_once(rig.clock.now())
        finally:
            end_process(agent)  # each value is a fresh agent process on the same ledger

        assert report.plan.resizes == (), value
        assert report.results == (), value
        assert [(s.pool_id, s.reason) for s in report.plan.skips] == [(ON_DEMAND, SkipReason.MISSING_DATA)], value
        assert [a.kind for a in report.alerts] == [AlertKind.MISSING_DATA], value
        assert CLASS not in report.observed
        rig.clock.advance(timedelta(minutes=5))

    assert rig.mirror.nodes(ON_DEMAND) == nodes
    assert rig.gke.calls("POST", "deleteInstances") == 0
    assert rig.gke.calls("POST", "/resize") == 0


@settings(max_examples=60, deadline=None)
@given(value=st.floats(allow_nan=True, allow_infinity=True), row=st.integers(min_value=0, max_value=5))
def test_the_trace_reader_refuses_an_implausible_value_and_keeps_the_others(value: float, row: int) -> None:
    values = [3.0] * 6
    values[row] = value
    lines = [f"a,2024-01-01T00:{5 * i:02d}:00Z,{v!r}" for i, v in enumerate(values)]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "t.csv"
        path.write_text("unique_id,ds,y\n" + "\n".join(lines) + "\n")
        if implausible_demand(value):
            with pytest.raises(TraceError, match=f"row {row + 2} has"):
                read_trace(path)
            return
        trace = read_trace(path)
    column = trace.column("a")
    assert all(math.isnan(v) or (0 <= v <= MAX_DEMAND) for v in column)
    document = {"values": column.tolist(), "total": float(np.sum(column))}
    json.loads(dumps(document), parse_constant=_not_json)


@settings(max_examples=50, deadline=None)
@given(
    document=st.recursive(
        st.floats(allow_nan=True, allow_infinity=True) | st.integers() | st.text(max_size=5) | st.none(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
        max_leaves=20,
    )
)
def test_written_json_is_always_strict(document: object) -> None:
    text = dumps(document)
    json.loads(text, parse_constant=_not_json)


def _not_json(name: str) -> None:
    pytest.fail(f"{name} is not JSON")
