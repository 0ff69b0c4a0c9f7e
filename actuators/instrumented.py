"""InstrumentedActuator: Prometheus metrics around any Actuator, by wrapping it (the actuator is not edited).

leadtime_actuator_calls_total{method, pool, outcome}    outcome: a status (done, started...) or an error class;
                                                         list_pools counts each pool it could not read by its error
leadtime_actuator_call_duration_seconds{method}          time spent in the wrapped call
leadtime_pool_ready_units{pool}, leadtime_pool_target_units{pool}, leadtime_pool_failed_units{pool}
leadtime_pool_zone_units{pool, zone, state}              state: ready, target, failed; pools that span zones
leadtime_pool_zone_backoff_until_seconds{pool, zone}     Unix time a zone out of capacity is left out until; 0 if not

The daemon exports ready and target units itself; it passes ``unit_gauges=False`` so the names are not registered
twice in its registry (failed units are still exported here). A pool that cannot be read has none of these unit and
back-off series while it is unread.
"""

from __future__ import annotations

import contextlib
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
        self._labelled: dict[Gauge, set[tuple[str, ...]]] = {}  # the label sets each gauge was last given

    def list_pools(self) -> Sequence[PoolState]:
        started = time.perf_counter()
        try:
            states = self._inner.list_pools()
        except ActuatorError as exc:
            self.calls.labels("list_pools", exc.pool_id, type(exc).__name__).inc()
            raise
        finally:
            self.duration.labels("list_pools").observe(time.perf_counter() - started)
        self._record(states)
        for pool_id, error in self.unread_pools().items():
            self.calls.labels("list_pools", pool_id, type(error).__name__).inc()
        self.calls.labels("list_pools", "", "done").inc()
        return states

    def _record(self, states: Sequence[PoolState]) -> None:
        """The unit and back-off series of the pools read. A pool absent from ``states`` could not be read (the
        pool-unreadable alert says so): its series, and those of a zone a pool no longer lists, are removed, as
        nothing is known of them now, instead of their last values exported on as if current; they come back from the
        pool's first read after."""
        if self.ready is not None and self.target is not None:
            self._set_only(self.ready, {(s.pool_id,): s.ready_units for s in states})
            self._set_only(self.target, {(s.pool_id,): s.target_units for s in states})
        self._set_only(self.failed, {(s.pool_id,): s.failed_units for s in states})
        zones = [(s.pool_id, z) for s in states for z in s.zones]
        units: dict[tuple[str, ...], float] = {}
        backoff: dict[tuple[str, ...], float] = {}
        for pool_id, zone in zones:
            units[(pool_id, zone.zone, "ready")] = zone.ready_units
            units[(pool_id, zone.zone, "target")] = zone.target_units
            units[(pool_id, zone.zone, "failed")] = zone.failed_units
            backoff[(pool_id, zone.zone)] = zone.backoff_until.timestamp() if zone.backoff_until is not None else 0.0
        self._set_only(self.zone_units, units)
        self._set_only(self.zone_backoff, backoff)

    def _set_only(self, gauge: Gauge, values: dict[tuple[str, ...], float]) -> None:
        """Set ``values`` on ``gauge`` and remove the label sets it was given last time and not now."""
        for labels in self._labelled.get(gauge, set()) - values.keys():
            with contextlib.suppress(KeyError):
                gauge.remove(*labels)
        for labels, value in values.items():
            gauge.labels(*labels).set(value)
        self._labelled[gauge] = set(values)

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
