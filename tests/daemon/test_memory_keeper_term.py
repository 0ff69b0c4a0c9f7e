"""MemoryKeeper at the first load of a new term as leader, over the ConfigMap store (real kubernetes client, fake API
server): when the store still holds what this replica last read or wrote there (its last save was refused, nobody
saved since), the memory it holds is the newer one and is kept; its open conditions too, unless it stood by since
(a standby forgets them), when they are the stored ones; when another replica saved in between, the stored copy
wins, as for any new leader."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from kubernetes import client as k8s

from agent.planning import PlannerMemory
from agent.planning.memory import OpenCondition
from agent.state import MemoryKeeper
from agent.state.configmap import KubernetesStateStore
from kube import ConfigMaps
from models import AlertKind, Severity, StateUnavailable
from tests.fakes.kube_api import FakeKubeApi

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
NAME, NAMESPACE = "leadtime-state", "leadtime"
STOCKOUT = (AlertKind.STOCKOUT, "v5e")
REFUSED = (AlertKind.ACTUATOR_FAILURE, "a100")


def _keeper(kube_api: FakeKubeApi, api_client_for: Callable[[str], k8s.ApiClient], identity: str) -> MemoryKeeper:
    config_maps = ConfigMaps(api_client_for(kube_api.url), timedelta(seconds=0.3))
    return MemoryKeeper(KubernetesStateStore(config_maps, name=NAME, namespace=NAMESPACE, identity=identity))


def _open(memory: PlannerMemory, condition: tuple[AlertKind, str], at: datetime) -> PlannerMemory:
    opened = OpenCondition(at, at, Severity.WARNING, f"{condition[0]} on {condition[1]}")
    return replace(memory, open_conditions={**memory.open_conditions, condition: opened})


def _saved_then_refused(kube_api: FakeKubeApi, keeper: MemoryKeeper) -> tuple[PlannerMemory, PlannerMemory]:
    """A leader saves a stockout's back-off and condition, then learns a pool is refused for good (403): that save
    answers 409. The memory saved and the memory it holds."""
    memory, error = keeper.before_tick(PlannerMemory())
    assert error is None
    saved = _open(memory.back_off("v5e", T0 + timedelta(minutes=10)), STOCKOUT, T0)
    assert keeper.after_tick(saved, T0) is None
    later = T0 + timedelta(minutes=1)
    assert keeper.before_tick(saved) == (saved, None)
    held = _open(saved.block("a100", "403 Forbidden: compute.instanceGroupManagers.update denied"), REFUSED, later)
    kube_api.fail_next(1, 409, verb="update", resource="configmaps")
    assert isinstance(keeper.after_tick(held, later), StateUnavailable)
    return saved, held


def test_what_a_leader_learned_after_a_refused_save_is_kept_when_it_leads_again(
    kube_api: FakeKubeApi, api_client_for: Callable[[str], k8s.ApiClient]
) -> None:
    keeper = _keeper(kube_api, api_client_for, "a")
    _, held = _saved_then_refused(kube_api, keeper)
    keeper.resume()  # its lease lapsed (the API was down) and came back: nobody led in between
    memory, error = keeper.before_tick(held)
    assert error is None
    assert memory == held  # the block and the open condition of the refused pool (the stored copy had neither)
    assert keeper.after_tick(memory, T0 + timedelta(minutes=2)) is None
    assert _keeper(kube_api, api_client_for, "b").before_tick(PlannerMemory())[0] == held  # saved now


def test_after_a_standby_tick_the_open_conditions_are_the_stored_ones_and_the_rest_is_kept(
    kube_api: FakeKubeApi, api_client_for: Callable[[str], k8s.ApiClient]
) -> None:
    keeper = _keeper(kube_api, api_client_for, "a")
    saved, held = _saved_then_refused(kube_api, keeper)
    stood_by = replace(held, open_conditions={}, conditions_ended={})  # a standby tick forgot them
    keeper.resume()
    memory, error = keeper.before_tick(stood_by)
    assert error is None
    assert set(memory.open_conditions) == {STOCKOUT}  # its tracker adopts them: the stockout's end is still told
    assert memory.blocked == held.blocked and memory.backoff_until == saved.backoff_until


def test_a_save_by_another_replica_in_between_wins_at_the_first_load(
    kube_api: FakeKubeApi, api_client_for: Callable[[str], k8s.ApiClient]
) -> None:
    keeper = _keeper(kube_api, api_client_for, "a")
    saved, held = _saved_then_refused(kube_api, keeper)
    other = _keeper(kube_api, api_client_for, "b")  # led meanwhile: the stockout ended, the back-off was lifted
    assert other.before_tick(PlannerMemory()) == (saved, None)
    theirs = PlannerMemory().changed("v5e", T0 + timedelta(minutes=3), +1)
    assert other.after_tick(theirs, T0 + timedelta(minutes=3)) is None
    keeper.resume()
    memory, error = keeper.before_tick(held)
    assert error is None
    assert memory == theirs  # what this replica held before it led again is stale: the other replica led since
