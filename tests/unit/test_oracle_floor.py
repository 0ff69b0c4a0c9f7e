"""The oracle is the lowest cost for demand split between pools in the planner's fill order. That is the floor when
the pools of the same classes share a lead time and a unit size; when a dearer pool is ready sooner, a schedule on
it can serve short bursts for less, and the report then does not call the oracle the lowest cost."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import numpy as np
import pytest

from agent.report.simulation import policy_descriptions
from agent.simulation import run_policy, select_window
from agent.simulation.oracle import floor_caveats
from agent.simulation.runner import PolicyRun, run_schedule
from agent.simulation.window import SimulationWindow
from agent.sources.trace import read_trace
from config import settings_from_mapping
from config.schema import Settings
from models import AcceleratorFamily, CapacityTier, PoolKind, PoolSpec
from tests.conftest import TraceWriter

HISTORY = 300  # five-minute steps before the window
BURSTS = ([0.0] * 23 + [8.0]) * 6  # a one-step burst of 8 GPUs every 2 hours
LOWEST = "the lowest cost at which no demand is left unserved"


def _pool(pool_id: str, tier: str, price: float, lead: str) -> dict[str, Any]:
    return {
        "id": pool_id,
        "kind": "gpu-node-pool",
        "tier": tier,
        "chips_per_unit": 8,
        "max_units": 50,
        "price_per_chip_hour_usd": price,
        "lead_time": lead,
        "serves": ["a"],
    }


def _runs(write_trace: TraceWriter, spot_lead: str) -> tuple[Settings, SimulationWindow, PolicyRun, PolicyRun]:
    """The oracle, and every burst served on on-demand asked for 10 minutes ahead, on the same simulator."""
    trace = read_trace(write_trace({"a": [0.0] * HISTORY + BURSTS}))
    settings = settings_from_mapping(
        {
            "demand_classes": [{"name": "a"}],
            "pools": [_pool("spot", "spot", 0.6, spot_lead), _pool("ondemand", "on-demand", 1.0, "10m")],
            "forecast": {"history": "1d", "model": "last-value"},
        }
    )
    window = select_window(trace, settings.demand_class_models(), trace.index[HISTORY].to_pydatetime(), None)
    oracle = run_policy(settings, trace, window, "oracle")
    ondemand = np.zeros(len(BURSTS), dtype=int)
    for t, demand in enumerate(BURSTS):
        if demand > 0:
            ondemand[max(0, t - 2) : t + 1] = 1
    schedule = {"spot": np.zeros(len(BURSTS), dtype=int), "ondemand": ondemand}
    by_hand = run_schedule(settings, window, schedule, {"spot": 0, "ondemand": 0})
    return settings, window, oracle, by_hand


def _oracle_text(settings: Settings, window: SimulationWindow, oracle: PolicyRun) -> str:
    document = {"policies": {"oracle": {"unserved_fraction": oracle.unserved_fraction}}}
    return policy_descriptions(document, window, settings)["oracle"]


def test_a_dearer_pool_ready_sooner_beats_the_oracle_and_the_report_does_not_call_it_the_lowest_cost(
    write_trace: TraceWriter,
) -> None:
    settings, window, oracle, by_hand = _runs(write_trace, spot_lead="30m")
    assert oracle.unserved_accelerator_hours == by_hand.unserved_accelerator_hours == 0.0
    assert by_hand.cost_usd < oracle.cost_usd  # the oracle is not the floor here
    assert floor_caveats(settings.pool_specs()) == [
        "pools that may serve the same classes differ in lead time (spot 30m, ondemand 10m)"
    ]
    text = _oracle_text(settings, window, oracle)
    assert LOWEST not in text
    assert "split step by step between the pools in the planner's fill order" in text
    assert "It is not necessarily the cost floor here" in text
    assert "differ in lead time (spot 30m, ondemand 10m)" in text


def test_with_one_lead_time_the_oracle_is_the_floor_and_is_called_so(write_trace: TraceWriter) -> None:
    settings, window, oracle, by_hand = _runs(write_trace, spot_lead="10m")
    assert oracle.unserved_accelerator_hours == 0.0
    assert oracle.cost_usd < by_hand.cost_usd
    assert floor_caveats(settings.pool_specs()) == []
    assert LOWEST in _oracle_text(settings, window, oracle)


def _spec(pool_id: str, serves: tuple[str, ...], **changes: Any) -> PoolSpec:
    fields: dict[str, Any] = {
        "pool_id": pool_id,
        "kind": PoolKind.GPU_NODE_POOL,
        "tier": CapacityTier.ON_DEMAND,
        "family": AcceleratorFamily.GPU,
        "chips_per_unit": 8,
        "min_units": 0,
        "max_units": 10,
        "price_per_unit_hour_usd": 8.0,
        "lead_time": timedelta(minutes=10),
        "serves": serves,
    }
    fields.update(changes)
    if fields["kind"] is PoolKind.ON_PREM:
        fields["tier"] = CapacityTier.ON_PREM
    return PoolSpec(**fields)


ONPREM = {"kind": PoolKind.ON_PREM, "min_units": 4, "max_units": 4, "lead_time": timedelta(0)}


@pytest.mark.parametrize(
    ("pools", "expected"),
    [
        # one pool, or two with one lead time, unit size and a fill order that is cheapest first: the floor
        ([_spec("od", ("a", "b"))], []),
        ([_spec("spot", ("a",), tier=CapacityTier.SPOT, price_per_unit_hour_usd=4.0), _spec("od", ("a",))], []),
        # each class's own on-prem pool beside shared cloud pools: it fills its own first, nobody else can use it
        ([_spec("own-a", ("a",), **ONPREM), _spec("own-b", ("b",), **ONPREM), _spec("od", ("a", "b"))], []),
        (
            [_spec("small", ("a",), chips_per_unit=1, price_per_unit_hour_usd=1.5), _spec("od", ("a",))],
            ["pools that may serve the same classes differ in chips per unit (od 8, small 1)"],
        ),
        (
            [_spec("spot", ("a",), tier=CapacityTier.SPOT, price_per_unit_hour_usd=16.0), _spec("od", ("a",))],
            ["the fill order takes a pool dearer per chip-hour first (spot 2, od 1 USD)"],
        ),
        (
            [
                _spec("spot", ("a",), tier=CapacityTier.SPOT, price_per_unit_hour_usd=4.0),
                _spec("od", ("a",), min_units=2),
            ],
            ["pools filled after another of the same classes hold min_units paid anyway (od 2)"],
        ),
        (
            [_spec("cheap", ("a", "b"), price_per_unit_hour_usd=4.0), _spec("od", ("a",)), _spec("dear", ("b",))],
            ["classes share some of their pools but not all (a and b share cheap)"],
        ),
        (  # a shared on-prem pool beside a class's own: filled first, the shared one can go to the wrong class
            [_spec("shared", ("a", "b"), **ONPREM), _spec("own-a", ("a",), **ONPREM), _spec("od", ("a", "b"))],
            ["classes share some of their pools but not all (a and b share od, shared)"],
        ),
    ],
)
def test_floor_caveats_name_what_could_make_another_split_cheaper(pools: list[PoolSpec], expected: list[str]) -> None:
    assert floor_caveats(pools) == expected
