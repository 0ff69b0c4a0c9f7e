"""Simulation and backtest on recorded traces: every policy runs through the same simulated cluster."""

from agent.simulation.runner import PolicyRun, run_policy, simulate
from agent.simulation.window import SimulationWindow, select_window

__all__ = ["PolicyRun", "SimulationWindow", "run_policy", "select_window", "simulate"]
