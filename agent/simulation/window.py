"""The simulated window of a trace, and the demand each pool must carry in it."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cached_property

import numpy as np
import pandas as pd

from agent.sources.trace import Trace
from models import DemandClass, PoolKind, PoolSpec, TraceError
from models.allocation import allocate, units_for

log = logging.getLogger(__name__)

DEFAULT_HISTORY = timedelta(days=7)
# Above this share of a window's steps in gaps of any kind, ``gap_warning`` speaks up: those steps count neither cost
# nor service, so every figure covers less of the window than asked.
GAP_WARNING_SHARE = 0.05


@dataclass(frozen=True)
class SimulationWindow:
    """Steps ``index`` of the trace being simulated; ``demand[t, i]`` for class ``classes[i]`` (NaN = gap)."""

    index: pd.DatetimeIndex
    classes: tuple[str, ...]
    demand: np.ndarray
    history: np.ndarray  # demand before the window, same columns
    step: timedelta

    @property
    def observed(self) -> np.ndarray:
        """Steps at which every class has a value; only these count in the metrics."""
        return np.asarray(~np.isnan(self.demand).any(axis=1))

    def at(self, t: int) -> dict[str, float]:
        return dict(zip(self.classes, self.rows[t], strict=True))

    # Worked out once per window: every policy run and every trial of the equal-service search steps through the
    # same window, and reading a step from the index or the array one at a time cost more than the step's use.
    @cached_property
    def times(self) -> tuple[datetime, ...]:
        """The steps' times, ``index[t].to_pydatetime()``."""
        return tuple(self.index.to_pydatetime())

    @cached_property
    def rows(self) -> tuple[tuple[float, ...], ...]:
        """``demand[t]`` as floats, in ``classes`` order."""
        return tuple(tuple(row) for row in self.demand.tolist())

    @cached_property
    def totals(self) -> tuple[float, ...]:
        """Per step, the demand of all classes (``np.nansum(demand[t])``: gaps left out)."""
        return tuple(float(np.nansum(row)) for row in self.demand)

    def missing_by_class(self) -> dict[str, int]:
        """Steps of the window at which each class has no value (each such step is a gap), most first."""
        counts = np.isnan(self.demand).sum(axis=0)
        ranked = sorted(zip(self.classes, counts.tolist(), strict=True), key=lambda kv: -kv[1])
        return {name: int(n) for name, n in ranked if n}


def select_window(
    trace: Trace, classes: Sequence[DemandClass], start: datetime | None, end: datetime | None
) -> SimulationWindow:
    missing = [c.series_id for c in classes if c.series_id not in trace.series]
    if missing:
        raise TraceError(
            f"trace {trace.path} has no series for demand class(es) {missing}; it has {list(trace.series)[:20]}"
        )
    first, last = trace.index[0], trace.index[-1] + trace.step
    begin = pd.Timestamp(start) if start is not None else first + DEFAULT_HISTORY
    finish = pd.Timestamp(end) if end is not None else last
    if start is None and finish > first and (begin >= last or begin >= finish):
        raise TraceError(_defaulted_start(trace, begin, finish, end is not None))
    if begin >= last or finish <= first:
        raise TraceError(
            f"window {begin.isoformat()} .. {finish.isoformat()} is outside the trace "
            f"({first.isoformat()} .. {last.isoformat()})"
        )
    if begin >= finish:
        raise TraceError(f"empty window: start {begin.isoformat()} is not before end {finish.isoformat()}")
    if begin < first or finish > last:
        used = f"{max(begin, first).isoformat()} .. {min(finish, last).isoformat()}"
        log.warning(
            "the window %s .. %s runs outside the trace (%s .. %s): simulating %s only",
            begin.isoformat(),
            finish.isoformat(),
            first.isoformat(),
            last.isoformat(),
            used,
            extra={"trace": trace.path},
        )
    lo, hi = trace.position(begin.to_pydatetime()), trace.position(finish.to_pydatetime())
    columns = np.stack([trace.column(c.series_id) for c in classes], axis=1)
    window = columns[lo:hi]
    if len(window) == 0:
        raise TraceError(f"empty window: no trace steps between {begin.isoformat()} and {finish.isoformat()}")
    if np.isnan(window).all():
        raise TraceError(
            f"no observed demand in the window {begin.isoformat()} .. {finish.isoformat()}: every value is "
            "missing (NaN); choose another window"
        )
    for i, name in enumerate(c.name for c in classes):
        if np.isnan(window[:, i]).all():
            raise TraceError(
                f"demand class {name!r} has no observed value in the window {begin.isoformat()} .. "
                f"{finish.isoformat()}; {_observed_span(trace, columns[:, i])}: choose a window where every class "
                "has data, or leave the class out of the configuration"
            )
    return SimulationWindow(
        index=trace.index[lo:hi],
        classes=tuple(c.name for c in classes),
        demand=window,
        history=columns[:lo],
        step=trace.step,
    )


def _defaulted_start(trace: Trace, begin: pd.Timestamp, finish: pd.Timestamp, end_given: bool) -> str:
    """Why the window a start left to its default makes is empty, and a start inside the trace to give instead: the
    middle step of the trace, or of the part before the end given, so that the window keeps history before it."""
    first, last = trace.index[0], trace.index[-1] + trace.step
    bound = min(finish, last)
    ends = (
        f"the --end given is {finish.isoformat()}"
        if end_given and finish < last
        else f"the trace ends {last.isoformat()}"
    )
    steps = max(int((bound - first).to_pytimedelta() / trace.step) // 2, 0)
    suggest = first + steps * trace.step
    return (
        f"no --start given: the window starts {_days(DEFAULT_HISTORY)} after the trace starts ({begin.isoformat()}, "
        f"the trace starting {first.isoformat()}), but {ends}; give --start before {bound.isoformat()}, e.g. "
        f"--start {suggest.isoformat()} (the demand before it is the history the policies start from)"
    )


def _days(span: timedelta) -> str:
    return f"{span.days} days" if span == timedelta(days=span.days) else str(span)


def gap_warning(window: SimulationWindow, share: float = GAP_WARNING_SHARE) -> str | None:
    """A sentence for when more than ``share`` of the window's steps are gaps of any kind (a step where any class
    has no value counts neither cost nor service): how many, the share of the window every cost and service figure
    covers, the classes whose missing values alone make some of them (how many each, most first) and the steps no
    class has a value at (each collector outage with its start and length, the trace's own: no choice of classes or
    window avoids those).
    ``None`` when the gaps are at most that share: a few missed steps change no figure much."""
    steps = len(window.index)
    gaps = steps - int(window.observed.sum())
    if steps == 0 or gaps <= share * steps:
        return None
    outage = _outage(window)
    partial = ~window.observed & ~outage
    counts = np.isnan(window.demand[partial]).sum(axis=0)
    ranked = sorted(
        ((int(n), name) for name, n in zip(window.classes, counts.tolist(), strict=True) if n), key=lambda c: -c[0]
    )
    causes = [
        f"{name!r} has no value at {n} step(s){_why_missing(window, window.classes.index(name))}" for n, name in ranked
    ]
    shown = "; ".join(causes[:3]) + (f"; and {len(causes) - 3} more class(es)" if len(causes) > 3 else "")
    down = int(outage.sum())
    parts = [f"some classes alone leave {int(partial.sum())} of them empty: {shown}"] if causes else []
    if down:
        parts.append(
            f"no class has a value at {down} step{'' if down == 1 else 's'} ({_outages(window, outage)}; the "
            "trace's collector was down)"
        )
    advice = (
        "; choose a window where every class has data, or leave such a class out of the configuration" if causes else ""
    )
    return (
        f"{gaps} of the window's {steps} steps ({gaps / steps:.0%}) are gaps, which count neither cost nor service "
        f"(a step is a gap when any class has no value): every cost and service figure covers the other "
        f"{steps - gaps} steps, {(steps - gaps) / steps:.0%} of the window; {'; '.join(parts)}{advice}"
    )


def outage_note(window: SimulationWindow) -> str | None:
    """A sentence for the steps where no class has a value (the trace's collector was down, each outage with its
    start and length), or ``None``."""
    outage = _outage(window)
    count = int(outage.sum())
    if count == 0:
        return None
    return (
        f"{count} of the window's {len(window.index)} steps ({_outages(window, outage)}) have no value for any "
        "class (the trace's collector was down): they count neither cost nor service"
    )


# The outages a warning lists one by one; past these, how many more.
SHOWN_OUTAGES = 3


def _outages(window: SimulationWindow, outage: np.ndarray, shown: int = SHOWN_OUTAGES) -> str:
    """Each run of steps in ``outage``, its length and first step ('24 h from 2020-05-09T16:00:00+00:00'), the
    first ``shown`` of them and how many more: a total alone merged a day's outage and a 2-hour one into '26 h'."""
    edges = np.diff(np.concatenate(([0], outage.astype(np.int8), [0])))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    runs = [
        f"{_span(window.step * (end - start))} from {window.index[start].isoformat()}"
        for start, end in zip(starts.tolist(), ends.tolist(), strict=True)
    ]
    more = f" and {len(runs) - shown} more" if len(runs) > shown else ""
    return ", ".join(runs[:shown]) + more


def _outage(window: SimulationWindow) -> np.ndarray:
    if window.demand.shape[1] == 0:
        return np.zeros(len(window.index), dtype=bool)
    return np.asarray(np.isnan(window.demand).all(axis=1))


def _why_missing(window: SimulationWindow, column: int) -> str:
    values = window.demand[:, column]
    seen = np.flatnonzero(~np.isnan(values))
    missing = len(values) - len(seen)
    if len(seen) == 0 or missing == 0:
        return ""
    after = len(values) - 1 - int(seen[-1])
    if 2 * after >= missing:
        return f" (its values end at {(window.index[seen[-1]] + window.step).isoformat()})"
    if 2 * int(seen[0]) >= missing:
        return f" (its values start at {window.index[seen[0]].isoformat()})"
    if len(seen) > 1:
        spacing = int(np.median(np.diff(seen)))
        if spacing > 1:
            return f" (it has a value every {_span(window.step * spacing)}, the trace's step is {_span(window.step)})"
    return ""


def _span(span: timedelta) -> str:
    """'24 h', '1 h 40 min', '10 min', '90 s' ('6000 s' read '100 min')."""
    seconds = int(span.total_seconds())
    hours, minutes = divmod(seconds, 3600)
    minutes, rest = divmod(minutes, 60)
    if rest and seconds < 3600:
        return f"{seconds} s"
    parts = [f"{hours} h"] if hours else []
    parts += [f"{minutes} min"] if minutes else []
    parts += [f"{rest} s"] if rest else []
    return " ".join(parts) or "0 s"


def _observed_span(trace: Trace, values: np.ndarray) -> str:
    seen = np.flatnonzero(~np.isnan(values))
    if len(seen) == 0:
        return "the trace has no value for it at all"
    first, last = trace.index[seen[0]], trace.index[seen[-1]] + trace.step
    return f"the trace has its values from {first.isoformat()} to {last.isoformat()}"


def required_units(
    rows: np.ndarray, classes: Sequence[str], pools: Sequence[PoolSpec], priority: Mapping[str, float] | None = None
) -> dict[str, np.ndarray]:
    """Units each pool needs per step to serve all demand, split cheapest-first and, where the pools cannot hold
    it all, dearest waiting first by ``priority`` (each class's waiting cost), as the simulated cluster serves it;
    NaN steps need nothing."""
    room = {p.pool_id: float(p.max_units * p.chips_per_unit) for p in pools}
    out = {p.pool_id: np.zeros(len(rows), dtype=int) for p in pools}
    for t, row in enumerate(rows):
        if np.isnan(row).any():
            continue
        assigned = allocate(dict(zip(classes, row.tolist(), strict=True)), pools, room, priority=priority)
        for pool in pools:
            out[pool.pool_id][t] = units_for(sum(assigned[pool.pool_id].values()), pool.chips_per_unit)
    return out


def initial_units(
    window: SimulationWindow, pools: Sequence[PoolSpec], priority: Mapping[str, float] | None = None
) -> dict[str, int]:
    """Units every policy starts with: enough for the demand of the first lead time of the window (split as
    ``required_units`` splits it), a class's demand missing there taken as its nearest known (``_known_head``)."""
    out: dict[str, int] = {}
    for pool in pools:
        if pool.kind is PoolKind.ON_PREM:
            out[pool.pool_id] = pool.max_units
            continue
        lead_steps = int(pool.lead_time / window.step) + 1
        head = _known_head(window, lead_steps)
        need = required_units(head, window.classes, pools, priority)[pool.pool_id]
        out[pool.pool_id] = pool.clamp(int(need.max(initial=0)))
    return out


def _known_head(window: SimulationWindow, steps: int) -> np.ndarray:
    """The demand of the window's first ``steps`` steps, each class's missing value there taken as the one before
    it (the last recorded before the window, when the window opens in a gap), else as its first recorded in the
    window. Missing demand is unknown, not none: read as none, a window opening in a gap started every pool empty,
    the agent-driven policies held them so through the gap (no trustworthy demand), and the demand that came back
    waited a lead time for capacity the cluster had before the gap."""
    head = np.array(window.demand[:steps], dtype=float)
    for i in range(head.shape[1]):
        if not np.isnan(head[:, i]).any():
            continue
        before = window.history[:, i] if len(window.history) else np.zeros(0)
        prior, later = before[~np.isnan(before)][-1:], window.demand[:, i][~np.isnan(window.demand[:, i])][:1]
        filled = pd.Series(np.concatenate([prior, head[:, i], later])).ffill().bfill().to_numpy(dtype=float)
        head[:, i] = filled[len(prior) : len(prior) + len(head)]
    return head


def static_units(
    window: SimulationWindow, pools: Sequence[PoolSpec], priority: Mapping[str, float] | None = None
) -> dict[str, int]:
    """The static cluster: the peak each pool needed before the window (split as ``required_units`` splits it)."""
    observed = _static_history(window)
    if len(observed) == 0:
        raise TraceError(STATIC_NEEDS_HISTORY)
    need = required_units(observed, window.classes, pools, priority)
    return {p.pool_id: p.clamp(int(need[p.pool_id].max(initial=0))) for p in pools}


STATIC_NEEDS_HISTORY = "the static policy needs history before the window; start the window later"


def has_static_history(window: SimulationWindow) -> bool:
    """Whether the static policy can be sized: some step before the window has every class's demand. Checked
    before any forecasting, which takes minutes, so that a window without it is refused at once."""
    return len(_static_history(window)) > 0


def _static_history(window: SimulationWindow) -> np.ndarray:
    history: np.ndarray = window.history
    return history[~np.isnan(history).any(axis=1)] if len(history) else history
