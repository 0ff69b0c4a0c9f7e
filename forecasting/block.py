"""A block of forecasts for a set of series, and how its rows are answered by another block.

``Block`` holds the quantiles of each series (series, levels, horizon), the model that answered each row and why,
and the peak quantiles when known. A row whose forecast fails is answered by a backup block (the fallback's
forecasts, ``rescue_rows``), a row that fails at some levels by the backup's at those levels only
(``rescue_levels``), a peak that fails at some levels by the backup's peaks there (``rescue_peaks``); with no
fallback the backup is persistence (``persistence_block``). Quantiles are kept from crossing along the level axis
(``ordered``), around anchor levels when given, so that no level asked in addition moves them; a model's levels
offset from its base levels are placed between them level by level (``between_anchors``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from forecasting.base import quantile_column
from forecasting.series import SeriesData


@dataclass
class Block:
    """Forecasts for a set of series: values (series, levels, horizon), which model ran and why; ``peaks`` (same
    shape, when known): the quantile of the highest demand over steps 1 to ``h``."""

    uids: list[str]
    end_ns: list[int]
    values: np.ndarray
    models: list[str]
    notes: list[str]
    peaks: np.ndarray | None = None

    def at_levels(self, count: int) -> Block:
        """The block cut to its first ``count`` levels (those asked; the rest were forecast to order them)."""
        if self.values.shape[1] == count:
            return self
        peaks = None if self.peaks is None else self.peaks[:, :count]
        return Block(self.uids, self.end_ns, self.values[:, :count], self.models, self.notes, peaks)

    def peaks_or_running_max(self) -> np.ndarray:
        """The peak quantiles; where none are known, the running highest of the per-step quantiles."""
        running = np.maximum.accumulate(self.values, axis=2) if self.values.shape[2] else self.values
        return running if self.peaks is None else np.asarray(np.where(np.isnan(self.peaks), running, self.peaks))


def rescue_rows(block: Block, backup: Block, rescue: Mapping[int, str], name: str) -> None:
    """Rows of ``block`` (index: the reason it failed) answered by ``backup``: its values, peaks (or running
    highest quantiles) and model, the note naming ``name``'s reason and the backup's note."""
    position = {uid: j for j, uid in enumerate(backup.uids)}
    backup_peaks = backup.peaks_or_running_max()
    for i, reason in rescue.items():
        j = position[block.uids[i]]
        block.values[i] = backup.values[j]
        if block.peaks is not None:
            block.peaks[i] = backup_peaks[j]
        block.models[i] = backup.models[j]
        block.notes[i] = f"{name}: {reason}" + (f"; {backup.notes[j]}" if backup.notes[j] else "")


def rescue_peaks(
    block: Block,
    backup: Block,
    rescue: Mapping[int, Mapping[int, str]],
    name: str,
    levels: tuple[float, ...],
    anchors: Sequence[float] | None = None,
) -> None:
    """Peaks that fail the guards where the per-step quantiles passed them: at the levels that failed, the
    fallback's peaks (never below the row's own highest quantile so far); the other levels keep their own."""
    position = {uid: j for j, uid in enumerate(backup.uids)}
    backup_peaks = backup.peaks_or_running_max()
    assert block.peaks is not None
    for i, problems in rescue.items():
        j, failed = position[block.uids[i]], sorted(problems)
        running = np.maximum.accumulate(block.values[i], axis=1)
        block.peaks[i, failed] = np.maximum(backup_peaks[j, failed], running[failed])
        block.peaks[i] = ordered(block.peaks[i], levels, anchors)
        names = ", ".join(f"peak_{quantile_column(levels[k])}" for k in failed)
        block.notes[i] = f"{name}: {names}: {problems[failed[0]]}; {backup.models[j]}'s instead"


def ordered(
    values: np.ndarray, levels: Sequence[float], anchors: Sequence[float] | None = None, skip_nan: bool = False
) -> np.ndarray:
    """Quantiles that never cross: sorted along the level axis in the order of the levels.

    With ``anchors`` (levels that must all be among ``levels``), the order does not depend on which other levels
    were asked: the anchors are sorted among themselves, and every other level is kept between the anchors around
    it (at least the one below and the levels asked between them, at most the one above), so no level asked in
    addition ever moves an anchor. ``skip_nan``: a level not forecast (NaN) moves no other level.
    """
    order = np.argsort(levels)
    out = values.copy()
    accumulate = np.fmax if skip_nan else np.maximum
    if anchors is None:
        out[order] = accumulate.accumulate(values[order], axis=0)
        return out
    fixed = [any(abs(q - a) < LEVEL_TOLERANCE for a in anchors) for q in levels]
    kept = [k for k in order if fixed[k]]
    if kept:
        out[kept] = accumulate.accumulate(values[kept], axis=0)
    below: np.ndarray | None = None
    for k in order:
        if not fixed[k]:
            out[k] = values[k] if below is None else accumulate(values[k], below)
        below = out[k]
    above: np.ndarray | None = None
    for k in order[::-1]:
        if fixed[k]:
            above = out[k]
        elif above is not None:
            out[k] = (np.fmin if skip_nan else np.minimum)(out[k], above)
    return out


LEVEL_TOLERANCE = 1e-9


def between_anchors(candidates: np.ndarray, levels: Sequence[float], anchors: Sequence[float]) -> np.ndarray:
    """Quantiles (levels, horizon) from ``candidates`` (anchors, levels, horizon): each level's value offset from
    each anchor's forecast. The ``anchors`` must all be among ``levels``.

    An anchor takes its value offset from itself, the anchors sorted among themselves. Any other level takes the
    highest of its values offset from the two anchors around it, kept between those two anchors' values (beyond
    the outermost anchor, its value offset from that one, kept beyond it). A level so depends on itself alone,
    never on the other levels asked (``ordered``'s pass from level to level lifts a level to the one asked below
    it, which two bases' offsets can cross); and, its values offset from an anchor rising with the level, levels
    between the same anchors keep their order.
    """
    layout = _anchor_layout(tuple(levels), tuple(anchors))
    fixed = np.maximum.accumulate(candidates[layout.order, layout.at], axis=0)
    out = np.empty(candidates.shape[1:])
    for j in reversed(range(len(layout.at))):  # an anchor named twice reads as its first
        out[layout.at[j]] = fixed[j]
    for (below, above), ks in layout.between.items():
        rows = np.array(ks)
        if below is not None and above is not None:
            value = np.maximum(candidates[layout.order[below], rows], candidates[layout.order[above], rows])
        else:
            side = below if below is not None else above
            assert side is not None  # every level has an anchor on one side at least
            value = candidates[layout.order[side], rows]
        if below is not None:
            value = np.maximum(value, fixed[below])
        if above is not None:
            value = np.minimum(value, fixed[above])
        out[rows] = value
    return out


@dataclass(frozen=True)
class _AnchorLayout:
    """Where ``between_anchors`` reads each level from: the anchors in level order (``order``: their indices among
    the anchors; ``at``: their rows among the levels), and every other level's rows grouped by the anchors around
    them (positions in ``order``; None: no anchor on that side)."""

    order: tuple[int, ...]
    at: tuple[int, ...]
    between: dict[tuple[int | None, int | None], tuple[int, ...]]


@lru_cache(maxsize=256)
def _anchor_layout(levels: tuple[float, ...], anchors: tuple[float, ...]) -> _AnchorLayout:
    """The layout of ``levels`` around ``anchors``: the same for every series and tick that asks them, so worked
    out once (it was a third of ``between_anchors``' time, called for every series at every tick)."""
    order = tuple(sorted(range(len(anchors)), key=lambda a: anchors[a]))
    at = tuple(_index(levels, anchors[a]) for a in order)
    between: dict[tuple[int | None, int | None], tuple[int, ...]] = {}
    for k, level in enumerate(levels):
        if k in at:
            continue
        below = [j for j, a in enumerate(order) if anchors[a] < level]
        above = [j for j, a in enumerate(order) if anchors[a] > level]
        key = (below[-1] if below else None, above[0] if above else None)
        between[key] = (*between.get(key, ()), k)
    return _AnchorLayout(order, at, between)


def _index(levels: Sequence[float], level: float) -> int:
    return next(k for k, q in enumerate(levels) if abs(q - level) < LEVEL_TOLERANCE)


def with_anchors(levels: Sequence[float], anchors: Sequence[float]) -> tuple[float, ...]:
    """``levels`` followed by the ``anchors`` not among them: what to forecast so the anchors order the rest."""
    return (*levels, *(a for a in anchors if all(abs(a - q) >= LEVEL_TOLERANCE for q in levels)))


def rescue_levels(
    block: Block,
    backup: Block,
    rescue: Mapping[int, Mapping[int, str]],
    name: str,
    levels: tuple[float, ...],
    anchors: Sequence[float],
) -> None:
    """Levels of rows of ``block`` that fail the guards where the row's other levels passed them: the backup's
    values and peaks at those levels only, the row ordered again around its ``anchors``; the note names them."""
    position = {uid: j for j, uid in enumerate(backup.uids)}
    backup_peaks = backup.peaks_or_running_max()
    for i, problems in rescue.items():
        j, failed = position[block.uids[i]], sorted(problems)
        block.values[i, failed] = backup.values[j, failed]
        block.values[i] = ordered(block.values[i], levels, anchors)
        if block.peaks is not None:
            block.peaks[i, failed] = backup_peaks[j, failed]
            running = np.maximum.accumulate(block.values[i], axis=1)
            block.peaks[i] = ordered(np.maximum(block.peaks[i], running), levels, anchors)
        names = ", ".join(quantile_column(levels[k]) for k in failed)
        block.notes[i] = f"{name}: {names}: {problems[failed[0]]}; {backup.models[j]}'s instead"


def persistence_block(windows: Mapping[str, SeriesData], horizon: int, levels: Sequence[float]) -> Block:
    uids = sorted(windows)
    values = np.full((len(uids), len(levels), horizon), np.nan)
    notes = []
    for i, uid in enumerate(uids):
        observed = np.flatnonzero(~np.isnan(windows[uid].y))
        if len(observed):
            values[i] = windows[uid].y[observed[-1]]
            notes.append("persistence without spread")
        else:
            notes.append("no observed value in the recent window")
    return Block(uids, [windows[u].end_ns for u in uids], values, ["persistence"] * len(uids), notes)
