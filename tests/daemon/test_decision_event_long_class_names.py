"""A resize's Event keeps its target however long its reason: a note longer than an Event allows is cut in the
middle, its head and its '-> ... target N' tail kept with '…' between. Sixty classes of 38-character names, some
lacking a figure, make a 1,094-character reason that a cut at the end robbed of '-> target 100'. The Event is
written with the real client against the fake API server."""

from __future__ import annotations

from kubernetes import client as k8s

from agent.daemon.decision_recorder import MAX_MESSAGE, fit_note
from agent.decision_events import decision_events
from models import ActionResult, ActionStatus
from tests.daemon.decision_event_rig import NOW, _pool_notes, _recorder, _shared_pools_plan, _state_config_map
from tests.fakes.kube_api import FakeKubeApi

CLASSES = tuple(f"team-{i:02d}-llm-pretraining-a100-80gb-euw4" for i in range(60))  # 38 characters each
NEITHER, NO_FORECAST, NO_NOW = CLASSES[:5], CLASSES[5:10], CLASSES[10:15]


def test_a_resize_event_with_long_class_names_keeps_its_head_and_target(
    kube_api: FakeKubeApi, kube_client: k8s.ApiClient
) -> None:
    plan = _shared_pools_plan(
        CLASSES,
        forecast_for=[n for n in CLASSES if n not in NEITHER + NO_FORECAST],
        observed_for=[n for n in CLASSES if n not in NEITHER + NO_NOW],
    )
    assert sorted((r.pool_id, r.to_units) for r in plan.resizes) == [("gpu-on-demand", 29), ("gpu-spot", 100)]
    results = [ActionResult(r.key, r.pool_id, ActionStatus.DONE, NOW) for r in plan.resizes]
    events = decision_events(plan, results, recommend=False)
    whole = {e.pool_id: e.message for e in events}
    assert all(len(message) > MAX_MESSAGE for message in whole.values())  # the case: too long for a note
    _state_config_map(kube_api)
    recorder = _recorder(kube_client)
    assert recorder.record(NOW, events) == 2
    notes = _pool_notes(kube_api)
    for resize in plan.resizes:
        note, message = notes[resize.pool_id], whole[resize.pool_id]
        tail = f" -> {resize.to_units} units of 8 chips = {resize.to_units} -> target {resize.to_units}"
        assert len(note) == MAX_MESSAGE
        assert note.endswith(tail)
        head, cut = note.split("…")
        assert message.startswith(head) and message.endswith(cut)  # the middle is left out, nothing else changed
        assert cut == tail  # the chain from the need's whole units to the target
        assert head.startswith(f"pool {resize.pool_id}: scale up from 2 to {resize.to_units} units: need ")


def test_a_long_note_without_a_chain_keeps_its_head_and_its_end() -> None:
    message = "node gpu-node-7 could not be drained: " + ", ".join(f"pod team-{i:02d}/trainer-{i}" for i in range(60))
    note = fit_note(message)
    head, cut = note.split("…")
    assert len(note) == MAX_MESSAGE and message.startswith(head) and message.endswith(cut)
    assert cut.endswith("pod team-59/trainer-59")
    assert fit_note(message[:MAX_MESSAGE]) == message[:MAX_MESSAGE]  # a note that fits is left whole
