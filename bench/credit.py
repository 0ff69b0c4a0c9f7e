"""The credit a bundled trace requires, printed by every benchmark that shows figures measured on one (the data's
README asks for it wherever the data is shipped or shown)."""

from __future__ import annotations

from pathlib import Path

from agent.simulation.results import trace_attribution


def print_credit(path: str | Path) -> None:
    """Print the credit of the bundled trace at ``path``; nothing for a trace that is not bundled."""
    credit = trace_attribution(str(path))
    if credit is not None:
        print(credit)
