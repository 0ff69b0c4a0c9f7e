"""The rig of the decision-Event tests: the daemon's recorder (``KubernetesDecisionRecorder``) writing with the real
kubernetes client to the fake Kubernetes API server, the state ConfigMap its pool Events are about, and the note each
pool Event carries; the plan of one tick for two pools shared by a large demand group (the pool Events with the
longest reasons); and the decision Events of a tick whose plan releases one idle node through the agent's drains."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from kubernetes import client as k8s

from actuators.base import NodeDrainer
from agent.daemon.decision_recorder import KubernetesDecisionRecorder
from agent.decision_events import DecisionEvent, decision_events
from agent.drains import NodeDrains
from agent.planning import PlanInput, PlannerMemory, plan_capacity
from agent.planning.groups import demand_groups
from config.schema import PlannerSettings
from kube import KubernetesApi
from models import CapacityPlan, PoolState, Resize
from models.clock import SimulatedClock
from tests.fakes.kube_api import FakeKubeApi
from tests.unit.test_planner import forecast, pool

STATE = "leadtime-state"  # the ConfigMap pool Events are about: the planner memory's
NAMESPACE = "leadtime"
NOW = datetime(2024, 1, 31, 14, tzinfo=UTC)  # the tick of the large group's plan
STEP = timedelta(minutes=5)
IDLE_WINDOW = timedelta(minutes=10)  # how long a node is idle before the agent's drains offer it


def _recorder(
    client: k8s.ApiClient,
    *,
    timeout: timedelta | None = timedelta(seconds=2),
    identity: str = "leadtime-0",
    max_per_tick: int = 50,
    slice_pools: Collection[str] = (),
) -> KubernetesDecisionRecorder:
    """The daemon's recorder, each call bounded by ``timeout`` (None: unbounded), writing pool Events to ``STATE``."""
    return KubernetesDecisionRecorder(
        KubernetesApi(client, timeout),
        namespace=NAMESPACE,
        pool_object=STATE,
        identity=identity,
        max_per_tick=max_per_tick,
        slice_pools=slice_pools,
    )


def _state_config_map(kube_api: FakeKubeApi) -> dict[str, Any]:
    """The state ConfigMap, empty, as the API server made it (with its uid)."""
    return kube_api.put("configmaps", {"metadata": {"name": STATE, "namespace": NAMESPACE}, "data": {}})


def _pool_notes(kube_api: FakeKubeApi) -> dict[str, str]:
    """The note of each pool Event written, by its pool."""
    return {
        e["metadata"]["annotations"]["leadtime.io/pool"]: e["message"]
        for e in kube_api.list("events", namespace=NAMESPACE)
    }


def _shared_pools_plan(
    classes: tuple[str, ...], forecast_for: Iterable[str], observed_for: Iterable[str]
) -> CapacityPlan:
    """The plan at ``NOW`` of a spot and an on-demand pool of 2 units each that both serve every class of ``classes``
    (one demand group), with a q0.9 forecast of 20.5 chips for each class of ``forecast_for`` and 12.25 chips observed
    now for each class of ``observed_for``."""
    pools = [pool("gpu-spot", serves=classes, price=10.0), pool("gpu-on-demand", serves=classes, price=29.36)]
    return plan_capacity(
        PlanInput(
            now=NOW,
            tick=STEP,
            pools=pools,
            states={p.pool_id: PoolState(p.pool_id, NOW, 2, 2) for p in pools},
            forecasts={name: forecast(name, [20.5] * 4) for name in forecast_for},
            observed=dict.fromkeys(observed_for, 12.25),
            service_levels=dict.fromkeys(classes, 0.9),
            settings=PlannerSettings(idle_hold_lead_times=0),
            memory=PlannerMemory(),
            budgets=[],
            groups=demand_groups(list(classes), pools),
            forecast_step=STEP,
        )
    )


def _release_events(
    drainer: NodeDrainer,
    state: PoolState,
    clock: SimulatedClock,
    victim: str,
    resize: Resize,
    after_idle_check: Callable[[], None] = lambda: None,
) -> list[DecisionEvent]:
    """The decision Events of the tick whose plan ``resize`` releases ``victim``: the agent's drains over ``drainer``
    see the pool as ``state`` twice, ``IDLE_WINDOW`` apart, and ``victim`` idle at the second; ``after_idle_check``
    changes the cluster between that check and the release."""
    pools = {state.pool_id: state}
    drains = NodeDrains({state.pool_id: drainer}, IDLE_WINDOW)
    drains.observe(pools, clock.now())
    clock.advance(IDLE_WINDOW)
    seen, _ = drains.observe(pools, clock.now())
    assert victim in seen[state.pool_id].idle_nodes
    after_idle_check()
    outcome = drains.scale_down(resize, clock.now(), [victim])
    return list(decision_events(CapacityPlan(clock.now(), resizes=(resize,)), outcome.results, recommend=False))
