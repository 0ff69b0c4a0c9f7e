"""A resize of pools shared by a large demand group keeps its target in the Event the agent writes. An Event's note
is cut at 1 KiB; listing every class whose peak is summed pushed '-> target N' past it for 60 classes. The text now
counts the classes beyond a few (the log line lists them all); the Event is written with the real client against the
fake API server."""

from __future__ import annotations

from kubernetes import client as k8s

from agent.daemon.decision_recorder import MAX_MESSAGE
from agent.decision_events import decision_events
from models import ActionResult, ActionStatus
from tests.daemon.decision_event_rig import NOW, _pool_notes, _recorder, _shared_pools_plan, _state_config_map
from tests.fakes.kube_api import FakeKubeApi

CLASSES = tuple(f"earth/vc{i:03d}" for i in range(60))  # earth/vc000 has no data


def test_a_resize_event_of_sixty_classes_keeps_its_target(kube_api: FakeKubeApi, kube_client: k8s.ApiClient) -> None:
    plan = _shared_pools_plan(CLASSES, forecast_for=CLASSES[1:], observed_for=CLASSES[1:])
    assert sorted((r.pool_id, r.to_units) for r in plan.resizes) == [("gpu-on-demand", 52), ("gpu-spot", 100)]
    results = [ActionResult(r.key, r.pool_id, ActionStatus.DONE, NOW) for r in plan.resizes]
    _state_config_map(kube_api)
    recorder = _recorder(kube_client)
    assert recorder.record(NOW, decision_events(plan, results, recommend=False)) == 2
    notes = _pool_notes(kube_api)
    for resize in plan.resizes:
        note = notes[resize.pool_id]
        assert len(note) <= MAX_MESSAGE
        assert note.endswith(f"-> target {resize.to_units}")
        assert "sum of the q0.9 peaks of 59 classes (all but earth/vc000)" in note
        assert "earth/vc000 without data, not counted" in note
        fields = plan.decisions[resize.pool_id].log_fields()["demand"]
        assert isinstance(fields, str) and "peak_summed=" + "+".join(CLASSES[1:]) in fields  # the log lists all
