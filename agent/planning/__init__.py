"""Planning: a pure function from forecasts, pool states, budgets and prices to a CapacityPlan.

Nothing here reads a clock, the network or the environment: ``now`` and every observation are arguments.
"""

from agent.planning.memory import PlannerMemory
from agent.planning.plan_input import PlanInput
from agent.planning.planner import plan_capacity
from agent.planning.service_level import resolve_service_levels

__all__ = ["PlanInput", "PlannerMemory", "plan_capacity", "resolve_service_levels"]
