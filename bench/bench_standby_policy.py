"""What a causal standby rule costs on pools of whole units, at equal service: its hindsight optimum and its rolling,
history-only choice, against the perfect-foresight oracle and the reactive autoscaler.

The rule (per pool, whole units): at each tick ask for ``need + s[k]``, where ``need`` is the units the pool's
demand needed at the last observed step and ``k`` the bucket of how long that need has been unchanged (under
``base`` steps after a rise, under ``base`` after a fall, ``base`` to twice it, ..., sixteen times or longer).
Units asked for are paid from the request and ready one lead time later; units no longer asked for are released
once idle for the hold. ``bench.standby_sim`` replays it, matching the simulator's reactive run unit for unit.
``bench.standby_pools`` loads the pools and replays them under standby tables, ``bench.standby_choice`` chooses the
tables.

* **Hindsight**: ``s`` per pool and bucket (0 to ``--max-standby`` units each, every combination replayed) chosen
  with one price per unserved chip-hour across pools (the lower convex hull, as ``bench_class_levels``) to meet
  each target on the evaluation window itself: the least any rule of the family costs there. Beside it, the
  same for the nested families: one standby per pool (no buckets), and no separate bucket after a fall.
* **Causal**: before each day of the window, ``s`` per pool and bucket chosen the same way on all days before it
  (the trace's week before the window, then the window so far): the price that meets a history target there. The
  history target is the policy's knob: swept, and the cost at each evaluation target interpolated between the
  two nearest settings that bracket it, as the equal-service comparison tunes the forecast's service level.
  ``--pooled`` blends each pool's history with all pools' (the rule shared between tenants).

    .venv/bin/python -m bench.bench_standby_policy [--config FILE] [--trace CSV] [--base 6,12] [--hold 12]
        [--max-standby 3] [--pooled 0,0.25] [--forecast]

On helios-earth-slices.yaml (base 6, hold 12; 6.5 min, 357 MiB): hindsight 1.214x the oracle at 0.1% unserved
(1.020x at 0.5%); causal 1.369x (never more standby for longer unchanged need) to 1.488x (about 1.03x at 0.5%).
``--max-standby 1 --pooled 0`` is a quick run of the same code on two choices per bucket.
"""

from __future__ import annotations

import argparse
import itertools
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from agent.simulation import select_window
from agent.simulation.equal_service import Trial, interpolate
from agent.sources.trace import read_trace
from bench.credit import print_credit
from bench.memory import peak_rss_mib
from bench.standby_choice import causal_tables, families, hull_cost, lagrangian
from bench.standby_pools import (
    DAY_STEPS,
    Loaded,
    configurations,
    day_of_steps,
    load,
    reactive_replay,
    replay_all,
    replay_tables,
)
from config import load_settings

ROOT = Path(__file__).resolve().parents[1]
TARGETS = (0.005, 0.001)
HISTORY_TARGETS = (
    0.00002,
    0.00005,
    0.0001,
    0.0002,
    0.0004,
    0.0006,
    0.0008,
    0.001,
    0.0013,
    0.0017,
    0.0025,
    0.004,
    0.006,
    0.009,
)
REACTIVE_HEADROOMS = range(6)  # units above the last need, tuned to each target


def reactive_equal_service(loaded: Loaded, demanded: float) -> dict[float, float | None]:
    """The reactive autoscaler's cost at each target, its headroom tuned to it."""
    trials = []
    for headroom in REACTIVE_HEADROOMS:
        cost, short = reactive_replay(loaded, headroom)
        trials.append(Trial(headroom, cost, short / demanded))
    return {t: interpolate(trials, t, "headroom_units")["cost_usd"] for t in TARGETS}


@dataclass(frozen=True)
class Run:
    """What one setting of base and hold is judged on: the loaded pools, the window's days, the chip-hours
    demanded per day and on the window, and the oracle's and the reactive autoscaler's costs there."""

    loaded: Loaded
    n_days: int
    first_day: int
    demanded_by_day: np.ndarray
    demanded: float
    reactive: dict[float, float | None]

    @property
    def window_days(self) -> slice:
        return slice(self.first_day, self.n_days)

    def line(self, found: Mapping[float, float | None]) -> str:
        oracle = self.loaded.oracle_usd
        return "; ".join(f"{t:.1%} {_x(found[t], oracle)}, {_vs(found[t], self.reactive[t])} reactive" for t in TARGETS)


CAUSAL_FAMILIES = ("by time unchanged, and after a fall", "by time unchanged, never more for longer")


def _hindsight(run: Run, cost: dict[str, np.ndarray], short: dict[str, np.ndarray], configs: np.ndarray) -> None:
    series, days, hours = run.loaded.series, run.window_days, run.loaded.hours
    for label, mask in families(configs).items():
        costs = [cost[n][mask][:, days].sum(axis=1) for n in series]
        shorts = [short[n][mask][:, days].sum(axis=1) * hours for n in series]
        found = {t: hull_cost(costs, shorts, run.demanded, t) for t in TARGETS}
        print(f"    hindsight, {label}: {run.line(found)}")


def _causal(
    run: Run,
    cost: dict[str, np.ndarray],
    short: dict[str, np.ndarray],
    configs: np.ndarray,
    setting: tuple[int, int],
    pooled: Sequence[float],
) -> None:
    loaded, days = run.loaded, run.window_days
    masks = families(configs)
    for label, weight in itertools.product(CAUSAL_FAMILIES, pooled):
        mask = masks[label]
        sub_cost, sub_short = ({n: v[mask] for n, v in d.items()} for d in (cost, short))
        demanded_steps = run.demanded_by_day / loaded.hours  # chip-steps, as the replay counts unserved
        tables = [
            causal_tables(sub_cost, sub_short, configs[mask], demanded_steps, run.first_day, run.n_days, h, weight)
            for h in HISTORY_TARGETS
        ]
        c, u = replay_tables(loaded.series, loaded.observed, *setting, tables, run.n_days)
        trials = [
            Trial(h, float(c[i, days].sum()), float(u[i, days].sum()) * loaded.hours / run.demanded)
            for i, h in enumerate(HISTORY_TARGETS)
        ]
        found = {t: interpolate(trials, t, "history_target")["cost_usd"] for t in TARGETS}
        raw = ", ".join(
            f"{tr.setting:.2%}->{tr.unserved_fraction:.3%} {tr.cost_usd / loaded.oracle_usd:.3f}x" for tr in trials
        )
        print(f"    causal, {label} (pooled {weight:g}): {run.line(found)}")
        print(f"      history target -> window unserved, cost: {raw}")


def _edge_share(run: Run, cost: Mapping[str, np.ndarray], short: Mapping[str, np.ndarray], configs: np.ndarray) -> str:
    """How many pools' hindsight picks at the tightest target hold the largest standby tried in some bucket."""
    top = int(configs.max())
    costs = [c[:, run.window_days].sum(axis=1) for c in cost.values()]
    shorts = [u[:, run.window_days].sum(axis=1) * run.loaded.hours for u in short.values()]
    passing = [t for t in lagrangian(costs, shorts) if t[1] / run.demanded <= TARGETS[-1]]
    if not passing:
        return "none pass"
    picks = min(passing, key=lambda t: t[0])[2]
    return f"{sum(int((configs[i] == top).any()) for i in picks)} of {len(picks)} pools"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--config", default=str(ROOT / "config/examples/helios-earth-slices.yaml"))
    parser.add_argument("--trace", default=str(ROOT / "data/helios-earth/demand_5min.csv.gz"))
    parser.add_argument("--base", default="6", help="steps: the first span of unchanged need (6 = the 30-min lead)")
    parser.add_argument("--hold", default="12", help="idle hold(s) in steps (12 = the planner's two lead times)")
    parser.add_argument("--max-standby", type=int, default=3)
    parser.add_argument("--pooled", default="0,0.25", help="weight(s) of the all-pool history in the causal choice")
    parser.add_argument("--forecast", action="store_true", help="also run the forecast policy's equal service")
    args = parser.parse_args()
    started = time.perf_counter()
    loaded = load(args.config, args.trace)
    observed, first, hours = loaded.observed, loaded.first, loaded.hours
    n_days = math.ceil(len(observed) / DAY_STEPS)
    if first % DAY_STEPS:
        raise SystemExit("the window must start a whole number of days into the trace")
    first_day = first // DAY_STEPS
    demand_rows = np.nansum(np.stack([s.demand for s in loaded.series.values()], axis=1), axis=1) * observed * hours
    demanded_by_day = np.bincount(day_of_steps(len(observed), n_days), weights=demand_rows, minlength=n_days)
    demanded = float(demanded_by_day[first_day:].sum())
    print(
        f"{Path(args.config).name}: window of {len(observed) - first} steps after {first} of history; oracle "
        f"{loaded.oracle_usd:,.0f} USD"
    )
    reactive = reactive_equal_service(loaded, demanded)
    print("  reactive (replayed): " + "; ".join(f"{t:.1%} {_x(reactive[t], loaded.oracle_usd)}" for t in TARGETS))
    run = Run(loaded, n_days, first_day, demanded_by_day, demanded, reactive)
    configs = configurations(args.max_standby)
    pooled = [float(p) for p in args.pooled.split(",")]
    for base, hold in itertools.product((int(b) for b in args.base.split(",")), [int(h) for h in args.hold.split(",")]):
        cost, short = replay_all(loaded.series, observed, base, hold, configs, n_days)
        print(f"  base {base} steps, hold {hold} steps ({time.perf_counter() - started:.0f} s):")
        _hindsight(run, cost, short, configs)
        at_edge = _edge_share(run, cost, short, configs)
        print(f"    (hindsight picks at {TARGETS[-1]:.1%} with some bucket at the largest standby tried: {at_edge})")
        _causal(run, cost, short, configs, (base, hold), pooled)
    if args.forecast:
        _forecast(args.config, args.trace, loaded.oracle_usd)
    print(f"({time.perf_counter() - started:.0f} s; peak RSS of this process: {peak_rss_mib():.0f} MiB)")


def _forecast(config: str, trace_path: str, oracle: float) -> None:
    from agent.simulation.equal_service import SERVICE_LEVELS, run_and_compare
    from agent.simulation.runner import Simulation

    settings = load_settings(config)
    trace = read_trace(trace_path)
    print_credit(trace_path)
    window = select_window(trace, settings.demand_class_models(), None, None)
    session = Simulation(settings, trace, window, SERVICE_LEVELS)
    session.prepare(("forecast", "reactive"))
    _, same = run_and_compare(session, ("forecast", "reactive", "oracle"), TARGETS)
    if same is None:
        raise SystemExit("the simulator's equal-service comparison found no result")
    for t in TARGETS:
        rows = same[f"{t:g}"]
        f, r, o = rows["forecast"]["cost_usd"], rows["reactive"]["cost_usd"], rows["oracle"]["cost_usd"]
        print(
            f"  forecast policy (simulator) at {t:.1%}: {f / o:.3f}x the oracle, {f / r:.3f}x reactive "
            f"(reactive {r / o:.3f}x; replayed oracle here {oracle / o:.4f}x the simulator's)"
        )


def _x(cost: float | None, oracle: float) -> str:
    return "not reached" if cost is None else f"{cost / oracle:.3f}x the oracle"


def _vs(cost: float | None, other: float | None) -> str:
    return "-" if cost is None or other is None else f"{cost / other:.3f}x"


if __name__ == "__main__":
    main()
