"""State the agent keeps across restarts and leader changes: the planner's memory, behind a small store."""

from agent.state.base import StateConflict, StateStore, StateUnavailable
from agent.state.keeper import MemoryKeeper
from agent.state.memory import InMemoryStateStore

__all__ = ["InMemoryStateStore", "MemoryKeeper", "StateConflict", "StateStore", "StateUnavailable"]
