"""Planning cost at fleet scale: one tick for 1,000 pools and 200 demand classes.

Prints the time of a full plan, its ratio to the 1 s budget, and its ratio to planning the reference scenario
(16 classes, one pool) measured in the same process, plus peak memory.

    .venv/bin/python -m bench.bench_planner
"""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime, timedelta

from agent.planning import PlanInput, PlannerMemory, plan_capacity
from bench.memory import peak_rss_mib
from config.schema import PlannerSettings
from models import AcceleratorFamily, CapacityTier, DemandForecast, PoolKind, PoolSpec, PoolState

NOW = datetime(2024, 1, 1, tzinfo=UTC)
STEP = timedelta(minutes=5)
BUDGET_S = 1.0


def scenario(pools: int, classes: int, seed: int = 1) -> PlanInput:
    rng = random.Random(seed)
    names = [f"class-{i}" for i in range(classes)]
    specs, states = [], {}
    for i in range(pools):
        serves = tuple(rng.sample(names, k=min(len(names), rng.randint(1, 4))))
        tier = rng.choice(list(CapacityTier)[1:])
        spec = PoolSpec(
            f"pool-{i}",
            PoolKind.GPU_NODE_POOL,
            tier,
            AcceleratorFamily.GPU,
            rng.choice([1, 4, 8]),
            0,
            200,
            rng.uniform(2, 40),
            timedelta(minutes=rng.choice([5, 10, 30])),
            serves,
        )
        specs.append(spec)
        target = rng.randint(0, 50)
        idle = tuple(NOW - timedelta(minutes=rng.randint(0, 60)) for _ in range(rng.randint(0, target)))
        states[spec.pool_id] = PoolState(spec.pool_id, NOW, target, target, idle_units=len(idle), idle_since=idle)
    forecasts = {
        n: DemandForecast(
            n, NOW, STEP, {0.5: tuple([rng.uniform(0, 400)] * 8), 0.9: tuple([rng.uniform(0, 500)] * 8)}, 100.0, "bench"
        )
        for n in names
    }
    observed = {n: rng.uniform(0, 400) for n in names}
    return PlanInput(
        NOW,
        timedelta(minutes=1),
        specs,
        states,
        forecasts,
        observed,
        dict.fromkeys(names, 0.9),
        PlannerSettings(),
        PlannerMemory(),
        forecast_step=STEP,
    )


def best_of(given: PlanInput, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        plan_capacity(given)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    reference = best_of(scenario(1, 16), 50)
    fleet = best_of(scenario(1000, 200), 3)
    print("planning one tick (best of repeats)")
    print(f"  reference scenario, 1 pool x 16 classes : {reference * 1e3:8.2f} ms")
    print(f"  fleet, 1,000 pools x 200 classes        : {fleet * 1e3:8.2f} ms")
    print(f"  fleet / 1 s budget                      : {fleet / BUDGET_S:8.3f}x  (target <= 1.0x)")
    print(f"  fleet / reference                       : {fleet / reference:8.1f}x")
    print(f"  peak RSS                                : {peak_rss_mib():8.1f} MiB")


if __name__ == "__main__":
    main()
