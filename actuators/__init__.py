"""Everything that writes to infrastructure, behind two small interfaces (Actuator, NodeDrainer)."""

from actuators.base import Actuator, NodeDrainer
from actuators.dry_run import DryRunActuator, DryRunDrainer
from actuators.simulated import SimulatedCluster, StepOutcome

__all__ = ["Actuator", "DryRunActuator", "DryRunDrainer", "NodeDrainer", "SimulatedCluster", "StepOutcome"]
