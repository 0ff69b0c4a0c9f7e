"""Which model forecast each demand class over a simulated window, at the level it was planned at, and why.

Every forecast names the model that made it; where ``auto`` took some levels from the global model and others
from the class's own choice, the name lists the levels of each (``forecasting.selection.model_at_level`` reads
one level's model out of it). Counted here per class: the ticks each model forecast the class's service level,
and the newest forecast's note (for ``auto``: its choice, the score, the runner-up's and the global model's
pooled scores).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from agent.outlook import Outlook
from forecasting.selection import model_at_level


@dataclass(frozen=True)
class ModelUse:
    """One class: the ticks it had a forecast, how many of them each model forecast its level, the newest note."""

    level: float
    ticks: int = 0
    by_model: Mapping[str, int] = field(default_factory=dict)
    note: str = ""

    def summary(self) -> dict[str, object]:
        ranked = sorted(self.by_model.items(), key=lambda item: (-item[1], item[0]))
        return {
            "service_level": self.level,
            "ticks": self.ticks,
            "models": {name: count / self.ticks for name, count in ranked} if self.ticks else {},
            "note": self.note,
        }


def forecast_models(outlooks: Sequence[Outlook], levels: Mapping[str, float]) -> dict[str, ModelUse]:
    """Per class of ``levels`` (its service level): which model forecast that level at each tick of ``outlooks``."""
    counts: dict[str, Counter[str]] = {name: Counter() for name in levels}
    notes: dict[str, str] = dict.fromkeys(levels, "")
    for outlook in outlooks:
        for name, level in levels.items():
            forecast = outlook.forecasts.get(name)
            if forecast is None:
                continue
            # the level the planner reads: the forecast's nearest at or above the service level
            counts[name][model_at_level(forecast.model, forecast.level_at_or_above(level))] += 1
            notes[name] = forecast.note
    return {
        name: ModelUse(levels[name], sum(counts[name].values()), dict(counts[name]), notes[name]) for name in levels
    }


def level_mix(outlooks: Sequence[Outlook], level: float) -> dict[str, float]:
    """Which models forecast the level the planner reads at ``level`` (every class planned at it, as in a trial of
    the equal-service search): each model's share of the forecasts of every class at every tick of ``outlooks``."""
    counts: Counter[str] = Counter()
    read: dict[tuple[str, float], str] = {}  # model descriptions repeat: read each once per level
    for outlook in outlooks:
        for forecast in outlook.forecasts.values():
            at = forecast.level_at_or_above(level)
            key = (forecast.model, at)
            if key not in read:
                read[key] = model_at_level(forecast.model, at)
            counts[read[key]] += 1
    total = sum(counts.values())
    return {name: round(count / total, 4) for name, count in counts.most_common()} if total else {}
