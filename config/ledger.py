"""Budget ledger settings: where spend is persisted and when a silence between observations is a gap."""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

from pydantic import Field

from config.fields import Duration, Section


class LedgerSettings(Section):
    """``backend: sqlite`` (the default) keeps spend in the file at ``path`` so it survives restarts; ``memory``
    is for simulations. An interval between two observations of a pool longer than ``gap_after`` is a gap:
    the larger of the capacities seen on either side of it is charged for all of it. A zero-length ledger file is
    refused (its spend is gone) unless ``fresh_if_empty`` says to start a new ledger in it."""

    backend: Literal["sqlite", "memory"] = "sqlite"
    path: str = Field(default="leadtime-ledger.sqlite", min_length=1)
    fresh_if_empty: bool = False
    gap_after: Duration = timedelta(minutes=5)
