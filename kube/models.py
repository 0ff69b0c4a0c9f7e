"""The ``kubernetes`` client's types the product builds, reads or passes along, for modules outside ``kube``."""

from kubernetes.client import (
    ApiClient,
    CoreV1Event,
    V1ConfigMap,
    V1Container,
    V1EventSource,
    V1Lease,
    V1LeaseSpec,
    V1Node,
    V1ObjectMeta,
    V1ObjectReference,
    V1Pod,
)

__all__ = [
    "ApiClient",
    "CoreV1Event",
    "V1ConfigMap",
    "V1Container",
    "V1EventSource",
    "V1Lease",
    "V1LeaseSpec",
    "V1Node",
    "V1ObjectMeta",
    "V1ObjectReference",
    "V1Pod",
]
