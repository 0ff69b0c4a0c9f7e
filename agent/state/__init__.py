"""State the agent keeps across restarts and leader changes: the planner's memory, behind a small store."""

from agent.state.base import StateStore
from agent.state.keeper import MemoryKeeper
from agent.state.memory import InMemoryStateStore
from models import StateConflict, StateUnavailable

__all__ = ["InMemoryStateStore", "MemoryKeeper", "StateConflict", "StateStore", "StateUnavailable"]
