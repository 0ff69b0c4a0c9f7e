"""A resize of pools shared by a large demand group keeps its target in the Event the agent writes. An Event's note
is cut at 1 KiB; listing every class whose peak is summed pushed '-> target N' past it for 60 classes. The text now
counts the classes beyond a few (the log line lists them all); the Event is written with the real client against the
fake API server."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kubernetes import client as k8s

from agent.daemon.decision_recorder import MAX_MESSAGE, KubernetesDecisionRecorder
from agent.decision_events import decision_events
from agent.planning import PlanInput, PlannerMemory, plan_capacity
from agent.planning.groups import demand_groups
from config.schema import PlannerSettings
from kube import KubernetesApi
from models import ActionResult, ActionStatus, PoolState
from tests.fakes.kube_api import FakeKubeApi
from tests.unit.test_planner import forecast, pool

NOW = datetime(2024, 1, 31, 14, tzinfo=UTC)
STEP = timedelta(minutes=5)
CLASSES = tuple(f"earth/vc{i:03d}" for i in range(60))  # earth/vc000 has no data
STATE = "leadtime-state"


def test_a_resize_event_of_sixty_classes_keeps_its_target(kube_api: FakeKubeApi, kube_client: k8s.ApiClient) -> None:
    pools = [pool("gpu-spot", serves=CLASSES, price=10.0), pool("gpu-on-demand", serves=CLASSES, price=29.36)]
    plan = plan_capacity(
        PlanInput(
            now=NOW,
            tick=STEP,
            pools=pools,
            states={p.pool_id: PoolState(p.pool_id, NOW, 2, 2) for p in pools},
            forecasts={name: forecast(name, [20.5] * 4) for name in CLASSES[1:]},
            observed=dict.fromkeys(CLASSES[1:], 12.25),
            service_levels=dict.fromkeys(CLASSES, 0.9),
            settings=PlannerSettings(idle_hold_lead_times=0),
            memory=PlannerMemory(),
            budgets=[],
            groups=demand_groups(list(CLASSES), pools),
            forecast_step=STEP,
        )
    )
    assert sorted((r.pool_id, r.to_units) for r in plan.resizes) == [("gpu-on-demand", 52), ("gpu-spot", 100)]
    results = [ActionResult(r.key, r.pool_id, ActionStatus.DONE, NOW) for r in plan.resizes]
    kube_api.put("configmaps", {"metadata": {"name": STATE, "namespace": "leadtime"}, "data": {}})
    recorder = KubernetesDecisionRecorder(
        KubernetesApi(kube_client, timedelta(seconds=2)), namespace="leadtime", pool_object=STATE, identity="a"
    )
    assert recorder.record(NOW, decision_events(plan, results, recommend=False)) == 2
    notes = {
        e["metadata"]["annotations"]["leadtime.io/pool"]: e["message"]
        for e in kube_api.list("events", namespace="leadtime")
    }
    for resize in plan.resizes:
        note = notes[resize.pool_id]
        assert len(note) <= MAX_MESSAGE
        assert note.endswith(f"-> target {resize.to_units}")
        assert "sum of the q0.9 peaks of 59 classes (all but earth/vc000)" in note
        assert "earth/vc000 without data, not counted" in note
        fields = plan.decisions[resize.pool_id].log_fields()["demand"]
        assert isinstance(fields, str) and "peak_summed=" + "+".join(CLASSES[1:]) in fields  # the log lists all
