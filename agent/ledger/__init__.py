"""The budget ledger: spend as it accrues, per pool."""

from agent.ledger.base import Ledger
from agent.ledger.memory import InMemoryLedger

__all__ = ["InMemoryLedger", "Ledger"]
