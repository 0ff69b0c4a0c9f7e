"""Does the time of day (or the day of the week) add to the standby rule of ``bench.bench_standby_policy``?

The rule there asks, per pool, for ``need + s[k]`` units, ``k`` the bucket of how long the need has been unchanged.
Here ``s`` also depends on a band of the clock: ``s[band, k]``. The bands come from the trace's history before the
window only (never from the window): per hour of day, the rate at which the pools' need rose after at least
``base`` steps of unchanged need (the jumps standby is held for), pooled over all pools, against its mean over
the day; an hour whose rate is below the first cut is band 0 (quiet), below the second band 1, and so on. With
``--bands weekend`` the band is 1 on Saturdays and Sundays (in ``--tz``) instead; with ``--bands others``, 1 for a
pool when another pool's need rose within the last ``--others-steps`` steps.

Families (every combination replayed, one price per unserved chip-hour across pools, as in the policy bench):

* **offset**: a table ``s`` (0 to ``--max-standby`` in each of the seven buckets) for the reference band, and
  the same table shifted by ``d`` units (clipped at zero) in each other band: ``d`` from ``-max`` to 0 in the
  bands below the reference, 0 to ``+max`` above it. The offset 0 rows are the policy bench's family.
* **monotone**: an independent table per band of the policy bench's "never more for longer" kind (no bucket of
  its own after a fall; standby never rising with the time unchanged), 0 to ``--max-standby`` units.

**Hindsight**: chosen on the window itself, the least any rule of the family costs there at each target. With
``--causal``, also chosen before each day from all days before it (the week before the window, then the window so
far), each pool's history blended with all pools' (``--pooled``), as the policy bench's causal choice. With
``--placebo`` the hour bands turn by six hours a day: bands of the same sizes that carry no time of day, so what
they buy in hindsight is the family's extra freedom alone.

On helios-earth-slices.yaml (base 6, hold 12) at 0.1% unserved, against the family without bands (1.214x the
oracle in hindsight, 1.406x causal, pooled 0.25, at ``--max-standby 2``): two hour bands (quiet 02-08 local,
from the week before the window) 1.194x in hindsight (placebo 1.206x), 1.391x causal; three bands
(``--cuts 0.5,1.25``) 1.192x in hindsight (placebo 1.206x), 1.398x causal. Weekends: 1.213x. ``--bands others``
at ``--max-standby 1`` (1.235x without): 1.213x (30 min) and 1.207x (60 min) in hindsight, 1.404x causal. At
0.5% all are within 1.020x-1.036x.
"""

from __future__ import annotations

import argparse
import itertools
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from agent.simulation.equal_service import Trial, interpolate
from bench.bench_standby_policy import HISTORY_TARGETS, ROOT, TARGETS, Run, reactive_equal_service
from bench.credit import print_credit
from bench.memory import peak_rss_mib
from bench.standby_choice import hull_cost, lagrangian
from bench.standby_pools import DAY_STEPS, Loaded, configurations, day_of_steps, load
from bench.standby_sim import N_BUCKETS, buckets, simulate
from bench.unseen_jumps import unchanged_for


def clock(loaded: Loaded, tz: str) -> tuple[np.ndarray, np.ndarray]:
    """Per step of history and window: the hour of day and the day of the week (0 Monday) in ``tz``."""
    window = loaded.window
    steps = len(loaded.observed)
    start = window.index[0] - window.step * loaded.first
    index = pd.DatetimeIndex(pd.date_range(start=start, periods=steps, freq=window.step))
    if not index[loaded.first :].equals(window.index):
        raise SystemExit("the window's steps are not evenly spaced after its history")
    local = index.tz_convert(tz) if index.tz is not None else index.tz_localize("UTC").tz_convert(tz)
    return np.asarray(local.hour), np.asarray(local.day_of_week)


def flat_jumps(need: np.ndarray, observed: np.ndarray, base: int) -> np.ndarray:
    """Steps at which the need rose after at least ``base`` observed steps of unchanged need."""
    runs = unchanged_for(need, observed.astype(bool))
    out = np.zeros(len(need), dtype=bool)
    seen = observed.astype(bool)
    out[1:] = seen[1:] & seen[:-1] & (need[1:] > need[:-1]) & (runs[:-1] >= base)
    return out


def hour_bands(
    hour: np.ndarray, jumps: np.ndarray, observed: np.ndarray, upto: int, cuts: Sequence[float]
) -> np.ndarray:
    """Per hour of day (24), its band: how many of ``cuts`` its jump rate over steps before ``upto`` reaches, as a
    multiple of the mean hourly rate. ``jumps``: (pools, steps)."""
    seen = observed[:upto].astype(bool)
    rate = np.zeros(24)
    for h in range(24):
        at = seen & (hour[:upto] == h)
        rate[h] = jumps[:, :upto][:, at].sum() / max(int(at.sum()) * jumps.shape[0], 1)
    relative = rate / max(rate.mean(), 1e-12)
    return np.array([sum(int(r >= c) for c in cuts) for r in relative], dtype=np.int64)


def others_rose(need: np.ndarray, observed: np.ndarray, steps: int) -> np.ndarray:
    """Per pool and step (``need``: pools x steps): 1 when another pool's need rose at that step or at one of the
    ``steps - 1`` before it, else 0."""
    seen = observed.astype(bool)
    rose = np.zeros(need.shape, dtype=np.int64)
    rose[:, 1:] = seen[1:] & seen[:-1] & (need[:, 1:] > need[:, :-1])
    cum = np.concatenate([np.zeros((len(need), 1), dtype=np.int64), np.cumsum(rose, axis=1)], axis=1)
    t = np.arange(need.shape[1])
    recent = (cum[:, t + 1] - cum[:, np.maximum(t + 1 - steps, 0)]) > 0
    others = recent.sum(axis=0)[None, :] - recent
    return np.asarray(others > 0, dtype=np.int64)


def offset_family(
    max_standby: int, n_bands: int, reference: int, two_way: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Tables (rows, bands * buckets): a table per reference band shifted by an offset per other band (down for
    bands below the reference, up for those above, either way with ``two_way``; clipped at zero), and per row the
    offsets (rows, bands)."""
    base = configurations(max_standby)
    down, up, both = range(-max_standby, 1), range(max_standby + 1), range(-max_standby, max_standby + 1)
    ranges = [
        range(1) if b == reference else both if two_way else down if b < reference else up for b in range(n_bands)
    ]
    offsets = np.array(list(itertools.product(*ranges)), dtype=np.int64)
    rows = len(base) * len(offsets)
    tables = np.zeros((rows, n_bands * N_BUCKETS), dtype=np.int64)
    offs = np.repeat(offsets[None, :, :], len(base), axis=0).reshape(rows, n_bands)
    for b in range(n_bands):
        shifted = base[:, None, :] + offsets[None, :, b, None]
        tables[:, b * N_BUCKETS : (b + 1) * N_BUCKETS] = np.maximum(shifted, 0).reshape(rows, N_BUCKETS)
    return tables, offs


def monotone_tables(max_standby: int) -> np.ndarray:
    """Every table of the "never more for longer" kind: the bucket after a fall as bucket 0, non-increasing."""
    mono = list(itertools.combinations_with_replacement(range(max_standby, -1, -1), 6))
    return np.array([[*c, c[0]] for c in mono], dtype=np.int64)


def monotone_family(max_standby: int, n_bands: int) -> np.ndarray:
    """An independent monotone table per band: (rows, bands * buckets)."""
    mono = monotone_tables(max_standby)
    return np.array([np.concatenate(p) for p in itertools.product(mono, repeat=n_bands)], dtype=np.int64)


def replay(
    loaded: Loaded, band: np.ndarray, base: int, hold: int, tables: np.ndarray, n_days: int
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Per pool, per table (row) and day: cost (USD) and unserved chip-steps, the bucket of each step being its
    band's ``band * N_BUCKETS + k``."""
    day_of = day_of_steps(len(loaded.observed), n_days)
    cost, short = {}, {}
    for i, (pool_id, s) in enumerate(loaded.series.items()):
        k = buckets(s.need, loaded.observed, base, dropped=True) + N_BUCKETS * (band if band.ndim == 1 else band[i])
        paid, missed = simulate(
            s.need,
            s.demand,
            loaded.observed,
            k,
            tables[:, None, :],
            day_of,
            s.lead,
            hold,
            s.max_units,
            s.chips,
            np.full(len(tables), s.start),
            n_days,
        )
        cost[pool_id], short[pool_id] = paid * s.unit_step_usd, missed
    return cost, short


def hindsight(
    run: Run, cost: Mapping[str, np.ndarray], short: Mapping[str, np.ndarray], mask: np.ndarray
) -> dict[float, float | None]:
    days, hours = run.window_days, run.loaded.hours
    costs = [c[mask][:, days].sum(axis=1) for c in cost.values()]
    shorts = [u[mask][:, days].sum(axis=1) * hours for u in short.values()]
    return {t: hull_cost(costs, shorts, run.demanded, t) for t in TARGETS}


def causal(
    run: Run,
    cost: Mapping[str, np.ndarray],
    short: Mapping[str, np.ndarray],
    tables: np.ndarray,
    mask: np.ndarray,
    band: np.ndarray,
    setting: tuple[int, int],
    pooled: float,
) -> tuple[dict[float, float | None], str]:
    """Tables chosen before each day on all days before it (``standby_choice.causal_tables``, for tables of
    any width), replayed, and the cost at each target interpolated over the history targets."""
    loaded = run.loaded
    names = list(cost)
    sub = tables[mask]
    sub_cost = {n: cost[n][mask] for n in names}
    sub_short = {n: short[n][mask] for n in names}
    demanded_steps = run.demanded_by_day / loaded.hours
    day_of = day_of_steps(len(loaded.observed), run.n_days)
    chosen = {n: np.zeros((len(HISTORY_TARGETS), run.n_days, tables.shape[1]), dtype=np.int64) for n in names}
    for day in range(run.first_day, run.n_days):
        c = {n: sub_cost[n][:, :day].sum(axis=1) for n in names}
        u = {n: sub_short[n][:, :day].sum(axis=1) for n in names}
        demanded = float(demanded_steps[:day].sum())
        if pooled > 0:
            all_c, all_u = sum(c.values()), sum(u.values())
            share = {n: max(float(c[n].min()), 1e-9) / max(float(np.min(all_c)), 1e-9) for n in names}
            c = {n: (1 - pooled) * c[n] + pooled * share[n] * all_c for n in names}
            u = {n: (1 - pooled) * u[n] + pooled * share[n] * all_u for n in names}
        sweep = lagrangian([c[n] for n in names], [u[n] for n in names])
        for j, target in enumerate(HISTORY_TARGETS):
            # the cheapest price whose picks meet the target on the history; when none does, the fewest unserved
            picks = next((p for _c, total, p in sweep if total / demanded <= target), None)
            if picks is None:
                picks = [int(np.argmin(u[n] * 1e9 + c[n])) for n in names]
            for n, i in zip(names, picks, strict=True):
                chosen[n][j, day] = sub[i]
    total_c = np.zeros(len(HISTORY_TARGETS))
    total_u = np.zeros(len(HISTORY_TARGETS))
    for i, (n, s) in enumerate(loaded.series.items()):
        pool_band = band if band.ndim == 1 else band[i]
        k = buckets(s.need, loaded.observed, setting[0], dropped=True) + N_BUCKETS * pool_band
        paid, missed = simulate(
            s.need,
            s.demand,
            loaded.observed,
            k,
            chosen[n],
            day_of,
            s.lead,
            setting[1],
            s.max_units,
            s.chips,
            np.full(len(HISTORY_TARGETS), s.start),
            run.n_days,
        )
        total_c += (paid * s.unit_step_usd)[:, run.window_days].sum(axis=1)
        total_u += missed[:, run.window_days].sum(axis=1) * loaded.hours
    trials = [
        Trial(target, float(total_c[j]), float(total_u[j]) / run.demanded) for j, target in enumerate(HISTORY_TARGETS)
    ]
    found = {t: interpolate(trials, t, "history_target")["cost_usd"] for t in TARGETS}
    raw = ", ".join(
        f"{tr.setting:.2%}->{tr.unserved_fraction:.3%} {tr.cost_usd / loaded.oracle_usd:.3f}x" for tr in trials
    )
    return found, raw


def main() -> None:  # noqa: PLR0915
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--config", default=str(ROOT / "config/examples/helios-earth-slices.yaml"))
    parser.add_argument("--trace", default=str(ROOT / "data/helios-earth/demand_5min.csv.gz"))
    parser.add_argument("--base", type=int, default=6)
    parser.add_argument("--hold", type=int, default=12)
    parser.add_argument("--bands", choices=("hour", "weekend", "others"), default="hour")
    parser.add_argument("--cuts", default="0.5", help="multiples of the mean hourly jump rate that start a band")
    parser.add_argument(
        "--rotate", type=int, default=0, help="hours to rotate the hour bands by: a placebo with the same band sizes"
    )
    parser.add_argument(
        "--placebo", action="store_true", help="rotate the hour bands by 6 hours a day: the same sizes, no clock"
    )
    parser.add_argument("--two-way", action="store_true", help="offsets either way in every other band")
    parser.add_argument("--others-steps", type=int, default=6, help="with --bands others: how recent a rise counts")
    parser.add_argument("--tz", default="Asia/Shanghai", help="the trace's local time zone (for the weekend)")
    parser.add_argument("--family", default="offset,monotone")
    parser.add_argument("--max-standby", type=int, default=2)
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--pooled", default="0.25")
    args = parser.parse_args()
    started = time.perf_counter()
    loaded = load(args.config, args.trace)
    print_credit(args.trace)
    observed, first, hours = loaded.observed, loaded.first, loaded.hours
    n_days = math.ceil(len(observed) / DAY_STEPS)
    first_day = first // DAY_STEPS
    demand_rows = np.nansum(np.stack([s.demand for s in loaded.series.values()], axis=1), axis=1) * observed * hours
    demanded_by_day = np.bincount(day_of_steps(len(observed), n_days), weights=demand_rows, minlength=n_days)
    demanded = float(demanded_by_day[first_day:].sum())
    hour, weekday = clock(loaded, args.tz)
    jumps = np.stack([flat_jumps(s.need, observed, args.base) for s in loaded.series.values()])
    if args.bands == "hour":
        cuts = [float(c) for c in args.cuts.split(",")]
        by_hour = np.roll(hour_bands(hour, jumps, observed, first, cuts), args.rotate)
        band = by_hour[(hour + 6 * (np.arange(len(hour)) // DAY_STEPS)) % 24] if args.placebo else by_hour[hour]
        n_bands, reference = len(cuts) + 1, 1
        print(f"  hour bands from the {first} history steps ({args.tz} hours 0-23): {''.join(map(str, by_hour))}")
    elif args.bands == "weekend":
        band = (weekday >= 5).astype(np.int64)
        n_bands, reference = 2, 0
    else:
        need = np.stack([s.need for s in loaded.series.values()])
        band = others_rose(need, observed, args.others_steps)
        n_bands, reference = 2, 0
    for b in range(n_bands):
        for part, sl in (("history", slice(0, first)), ("window", slice(first, None))):
            at = observed[sl] & (np.broadcast_to(band, jumps.shape)[:, sl] == b)
            rate = jumps[:, sl][at].sum() / max(int(at.sum()), 1) * 1000
            print(f"    band {b}, {part}: {at.mean():.0%} of pool-steps, {rate:.2f} jumps per 1,000 pool-steps")
    reactive = reactive_equal_service(loaded, demanded)
    run = Run(loaded, n_days, first_day, demanded_by_day, demanded, reactive)
    print(
        f"{Path(args.config).name}: oracle {loaded.oracle_usd:,.0f} USD; reactive "
        + "; ".join(f"{t:.1%} {(reactive[t] or math.nan) / loaded.oracle_usd:.3f}x" for t in TARGETS)
    )
    for family in args.family.split(","):
        if family == "offset":
            tables, offsets = offset_family(args.max_standby, n_bands, reference, args.two_way)
            masks = {"no bands (offset 0)": np.all(offsets == 0, axis=1), "bands": np.ones(len(tables), dtype=bool)}
        else:
            tables = monotone_family(args.max_standby, n_bands)
            same = np.all(tables == np.tile(tables[:, :N_BUCKETS], n_bands), axis=1)
            masks = {"no bands (one table)": same, "bands": np.ones(len(tables), dtype=bool)}
        cost, short = replay(loaded, band, args.base, args.hold, tables, n_days)
        print(f"  {family}, max {args.max_standby}, {len(tables)} tables ({time.perf_counter() - started:.0f} s):")
        for label, mask in masks.items():
            print(f"    hindsight, {label}: {run.line(hindsight(run, cost, short, mask))}")
        if args.causal:
            for weight in (float(p) for p in args.pooled.split(",")):
                for label, mask in masks.items():
                    found, raw = causal(run, cost, short, tables, mask, band, (args.base, args.hold), weight)
                    print(f"    causal (pooled {weight:g}), {label}: {run.line(found)}")
                    print(f"      history target -> window unserved, cost: {raw}")
    print(f"({time.perf_counter() - started:.0f} s; peak RSS of this process: {peak_rss_mib():.0f} MiB)")


if __name__ == "__main__":
    main()
