"""Metric sources: where observed demand comes from (a recorded trace, or Prometheus)."""

from agent.sources.base import MetricSource
from agent.sources.trace import Trace, TraceSource, read_trace

__all__ = ["MetricSource", "Trace", "TraceSource", "read_trace"]
