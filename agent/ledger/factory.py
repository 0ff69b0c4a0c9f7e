"""Opening the configured ledger."""

from __future__ import annotations

from agent.ledger.base import Ledger
from agent.ledger.memory import InMemoryLedger
from agent.ledger.sqlite import SqliteLedger
from config.ledger import LedgerSettings


def open_ledger(settings: LedgerSettings) -> Ledger:
    """The SQLite ledger at ``settings.path`` (the default), or an in-memory one for simulations."""
    if settings.backend == "memory":
        return InMemoryLedger()
    return SqliteLedger(settings.path, fresh_if_empty=settings.fresh_if_empty)
