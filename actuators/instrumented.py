"""InstrumentedActuator: Prometheus metrics around any Actuator, by wrapping it (the actuator is not edited).

leadtime_actuator_calls_total{method, pool, outcome}    outcome: a status (done, started...) or an error class;
                                                         list_pools counts each pool it could not read by its error
leadtime_actuator_call_duration_seconds{method}          time spent in the wrapped call
leadtime_pool_ready_units{pool}, leadtime_pool_target_units{pool}, leadtime_pool_failed_units{pool}
leadtime_pool_zone_units{pool, zone, state}              state: ready, target, failed; pools that span zones
leadtime_pool_zone_backoff_until_seconds{pool, zone}     Unix time a zone out of capacity is left out until; 0 if not

The daemon exports ready and target units itself; it passes ``unit_gauges=False`` so the names are not registered
twice in its registry (failed units are still exported here).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from actuators.base import Actuator, unread_pools
from models import ActionResult, ActuatorError, PoolState


class InstrumentedActuator:
    def __init__(self, inner: Actuator, registry: CollectorRegistry, unit_gauges: bool = True) -> None:
        self._inner = inner
        self.calls = Counter(
            "leadtime_actuator_calls", "Actuator calls by outcome.", ["method", "pool", "outcome"], registry=registry
        )
        self.duration = Histogram(
            "leadtime_actuator_call_duration_seconds", "Time spent in actuator calls.", ["method"], registry=registry
        )
        self.ready: Gauge | None = None
        self.target: Gauge | None = None
        if unit_gauges:
            self.ready = Gauge("leadtime_pool_ready_units", "Units accepting work.", ["pool"], registry=registry)
            self.target = Gauge("leadtime_pool_target_units", "Units asked for.", ["pool"], registry=registry)
        self.failed = Gauge("leadtime_pool_failed_units", "Failed or suspended units.", ["pool"], registry=registry)
        self.zone_units = Gauge(
            "leadtime_pool_zone_units", "Units per zone by state.", ["pool", "zone", "state"], registry=registry
        )
        self.zone_backoff = Gauge(
            "leadtime_pool_zone_backoff_until_seconds",
            "Unix time until which a zone out of capacity is left out of scale-ups (0: not backed off).",
            ["pool", "zone"],
            registry=registry,
        )

    def list_pools(self) -> Sequence[PoolState]:
        started = time.perf_counter()
        try:
            states = self._inner.list_pools()
        except ActuatorError as exc:
            self.calls.labels("list_pools", exc.pool_id, type(exc).__name__).inc()
            raise
        finally:
            self.duration.labels("list_pools").observe(time.perf_counter() - started)
        for state in states:
            if self.ready is not None and self.target is not None:
                self.ready.labels(state.pool_id).set(state.ready_units)
                self.target.labels(state.pool_id).set(state.target_units)
            self.failed.labels(state.pool_id).set(state.failed_units)
            for zone in state.zones:
                self.zone_units.labels(state.pool_id, zone.zone, "ready").set(zone.ready_units)
                self.zone_units.labels(state.pool_id, zone.zone, "target").set(zone.target_units)
                self.zone_units.labels(state.pool_id, zone.zone, "failed").set(zone.failed_units)
                until = zone.backoff_until.timestamp() if zone.backoff_until is not None else 0.0
                self.zone_backoff.labels(state.pool_id, zone.zone).set(until)
        for pool_id, error in self.unread_pools().items():
            self.calls.labels("list_pools", pool_id, type(error).__name__).inc()
        self.calls.labels("list_pools", "", "done").inc()
        return states

    def unread_pools(self) -> Mapping[str, ActuatorError]:
        return unread_pools(self._inner)

    def resize(self, pool_id: str, to_units: int, key: str) -> ActionResult:
        started = time.perf_counter()
        try:
            result = self._inner.resize(pool_id, to_units, key)
        except ActuatorError as exc:
            self.calls.labels("resize", pool_id, type(exc).__name__).inc()
            raise
        finally:
            self.duration.labels("resize").observe(time.perf_counter() - started)
        self.calls.labels("resize", pool_id, str(result.status)).inc()
        return result
