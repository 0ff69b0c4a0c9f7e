"""``budgets[].alert_thresholds`` as the configuration reference describes it: an alert as the period's spend so far
reaches each fraction of the cap, the projection not counted (a projected overspend is an alert of its own, once
the projection passes the cap). The reference said "(spent or projected)", and a budget 10% spent and projected at
95% of its cap told nothing at 50% or 80%."""

from __future__ import annotations

from datetime import UTC, datetime

from agent.budget_alerts import budget_threshold_events
from config.reference import reference_markdown
from models import BudgetSnapshot

START, END = datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 4, 1, tzinfo=UTC)
NOW = datetime(2026, 3, 5, tzinfo=UTC)
THRESHOLDS = (0.5, 0.8, 1.0)


def _row(key: str) -> str:
    [row] = [line for line in reference_markdown().splitlines() if line.startswith(f"| `{key}` |")]
    return row


def test_the_reference_says_thresholds_are_crossed_by_spend_only() -> None:
    row = _row("alert_thresholds")
    assert "spent or projected" not in row
    assert "as the period's spend so far reaches each" in row
    assert "Only what was spent counts, not the projection" in row


def test_a_projection_past_the_thresholds_crosses_none_and_spend_does() -> None:
    projected_high = BudgetSnapshot("research", START, END, 5_000.0, 50_000.0, 47_500.0)  # 10% spent, 95% projected
    assert budget_threshold_events(projected_high, 4_000.0, THRESHOLDS, NOW) == []
    spent_half = BudgetSnapshot("research", START, END, 26_000.0, 50_000.0, 47_500.0)
    [event] = budget_threshold_events(spent_half, 24_000.0, THRESHOLDS, NOW)
    assert event.subject == "budget research: 50% of cap"
