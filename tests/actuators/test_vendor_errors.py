"""Vendor error translation, table-driven: the decision depends on the status code and on what the message names."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from google.api_core import exceptions as google_exceptions
from google.auth import exceptions as auth_exceptions
from google.cloud import compute_v1, container_v1
from google.oauth2.credentials import Credentials
from kubernetes.client.exceptions import ApiException

from actuators.gke_node_pool import GkeNodePoolActuator
from actuators.vendor_errors import capacity_failure, from_google, from_kubernetes, from_operation_error
from config.cloud import NodePoolMapping
from kube import translate
from models import CapacityUnavailable, PermanentActuatorError, TransientActuatorError
from models.clock import SimulatedClock
from tests.contract.harnesses import CLUSTER
from tests.fakes.gke_api import FakeGkeApi

# google.api_core's exception constructors have no annotations: typed here for this module's strict checks
TooManyRequests: Callable[[str], google_exceptions.TooManyRequests] = google_exceptions.TooManyRequests
ServiceUnavailable: Callable[[str], google_exceptions.ServiceUnavailable] = google_exceptions.ServiceUnavailable
InternalServerError: Callable[[str], google_exceptions.InternalServerError] = google_exceptions.InternalServerError
Forbidden: Callable[[str], google_exceptions.Forbidden] = google_exceptions.Forbidden
NotFound: Callable[[str], google_exceptions.NotFound] = google_exceptions.NotFound
BadRequest: Callable[[str], google_exceptions.BadRequest] = google_exceptions.BadRequest
FailedPrecondition: Callable[[str], google_exceptions.FailedPrecondition] = google_exceptions.FailedPrecondition
ResourceExhausted: Callable[[str], google_exceptions.ResourceExhausted] = google_exceptions.ResourceExhausted


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (TooManyRequests("Rate limit exceeded"), TransientActuatorError),
        (ServiceUnavailable("try later"), TransientActuatorError),
        (InternalServerError("oops"), TransientActuatorError),
        (Forbidden("caller lacks permission"), PermanentActuatorError),
        (NotFound("node pool x"), PermanentActuatorError),
        (BadRequest("invalid nodeCount"), PermanentActuatorError),
        (FailedPrecondition("Operation o is currently operating on"), TransientActuatorError),
        # GKE's wording when another operation holds the cluster (an upgrade, a node pool being created or deleted)
        (
            BadRequest(
                "Operation operation-1596064640049-1b03e177 is currently upgrading cluster ml. Please wait and try "
                "again once it is done."
            ),
            TransientActuatorError,
        ),
        # gcloud's quote of the same refusal (terraform-provider-google issue 1451): "it's", not "it is"
        (
            BadRequest(
                "Operation operation-1525805696523-5007b8e4 is currently upgrading cluster delivery-platform. "
                "Please wait and try again once it's done."
            ),
            TransientActuatorError,
        ),
        # another verb, and a node pool of the cluster (terraform-provider-google issue 10366)
        (
            FailedPrecondition(
                "Operation operation-1634590386123-2c9b8a5e is currently deleting a node pool for cluster "
                "default-cluster. Please wait and try again once it is done."
            ),
            TransientActuatorError,
        ),
        (FailedPrecondition("Operation operation-1 is currently repairing cluster ml."), TransientActuatorError),
        (
            FailedPrecondition(
                "Cluster is running incompatible operation operation-1731137433803-29e34938-9333-469b-b14f."
            ),
            TransientActuatorError,
        ),
        (
            FailedPrecondition(
                "Cluster is currently being created, deleted, updated or repaired and cannot be updated"
            ),
            TransientActuatorError,
        ),
        # too many requests or operations at once: retried, never a blocked pool nor a stockout
        (Forbidden("Rate Limit Exceeded"), TransientActuatorError),
        (
            TooManyRequests(
                "Quota exceeded for quota metric 'Read requests' and limit 'Read requests per minute' of service "
                "'container.googleapis.com' for consumer 'project_number:123'."
            ),
            TransientActuatorError,
        ),
        (
            TooManyRequests(
                'Too many operations: cluster "ml" hits the concurrent operations quota 5, please try again.'
            ),
            TransientActuatorError,
        ),
        (FailedPrecondition("Node pool autoscaling limits are invalid"), PermanentActuatorError),
        (BadRequest("ZONE_RESOURCE_POOL_EXHAUSTED in us-central1-a"), CapacityUnavailable),
        (Forbidden("QUOTA_EXCEEDED: NVIDIA_A100_GPUS"), CapacityUnavailable),
        (ResourceExhausted("Quota 'TPUS' exhausted. Limit 8"), CapacityUnavailable),
        # exhausted quotas and capacity as the services word them (sources in actuators/vendor_errors.py)
        (
            Forbidden(
                'Insufficient regional quota to satisfy request: resource "PREEMPTIBLE_NVIDIA_V100_GPUS": request '
                "requires '2.0' and is short '1.0'. project has a quota of '1.0' with '1.0' available."
            ),
            CapacityUnavailable,
        ),
        (Forbidden("Quota 'GPUS_ALL_REGIONS' exceeded. Limit: 0.0 globally."), CapacityUnavailable),
        (
            TooManyRequests(
                "Quota limit 'TPUV6EPreemptiblePerProjectPerRegionForTPUAPI' has been exceeded. Limit: 0 in region "
                "us-east5."
            ),
            CapacityUnavailable,
        ),
        (TooManyRequests("Insufficient reserved capacity. Try a different zone."), CapacityUnavailable),
        (ConnectionError("refused"), TransientActuatorError),
    ],
)
def test_google_errors(exc: Exception, expected: type[Exception]) -> None:
    translated = from_google("p", exc)
    assert type(translated) is expected
    assert translated.pool_id == "p"


@pytest.mark.parametrize(
    ("status", "expected"),
    [(429, TransientActuatorError), (500, TransientActuatorError), (409, TransientActuatorError),
     (403, PermanentActuatorError), (404, PermanentActuatorError), (401, PermanentActuatorError)],
)  # fmt: skip
def test_kubernetes_errors(status: int, expected: type[Exception]) -> None:
    assert type(from_kubernetes("p", translate(ApiException(status=status, reason="r")))) is expected


def test_an_unreachable_kubernetes_api_is_transient() -> None:
    decided = from_kubernetes("p", translate(ConnectionRefusedError(111, "Connection refused")))
    assert type(decided) is TransientActuatorError
    assert "cannot reach the Kubernetes API" in str(decided)


def test_operation_errors_use_grpc_codes_and_messages() -> None:
    assert type(from_operation_error("p", 8, "GCE_STOCKOUT")) is CapacityUnavailable
    assert type(from_operation_error("p", 14, "unavailable")) is TransientActuatorError
    assert type(from_operation_error("p", 7, "permission denied")) is PermanentActuatorError


def test_recorded_errors_name_a_stockout_only_when_one_is_there() -> None:
    igm = "Not all instances running in IGM after 35m0s. Current errors: [ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS]"
    assert capacity_failure([("", igm)]) == igm
    recorded = [("CONDITION_NOT_MET", "disk not ready"), ("ZONE_RESOURCE_POOL_EXHAUSTED", "no capacity in the zone")]
    assert capacity_failure(recorded) == "ZONE_RESOURCE_POOL_EXHAUSTED: no capacity in the zone"
    assert capacity_failure([("CONDITION_NOT_MET", "disk not ready")]) == ""
    assert capacity_failure([]) == ""


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("RESOURCE_POOL_EXHAUSTED", "The zone 'projects/p/zones/us-central1-a' does not have enough resources."),
        (
            "",
            "The zone 'projects/p/zones/us-central1-a' does not have enough resources available to fulfill the "
            "request.",
        ),
        ("QUOTA_EXCEEDED", "Quota 'NVIDIA_A100_GPUS' exceeded. Limit: 16.0 in region us-central1."),
    ],
)
def test_recorded_stockouts_and_quotas_in_their_real_words(code: str, message: str) -> None:
    assert capacity_failure([("CONDITION_NOT_MET", "disk not ready"), (code, message)]) == (
        f"{code}: {message}" if code else message
    )


def test_a_recorded_concurrent_operations_quota_is_not_an_exhausted_quota() -> None:
    assert capacity_failure([("CONCURRENT_OPERATIONS_QUOTA_EXCEEDED", "Rate Limit Exceeded")]) == ""


def _auth_error(
    kind: type[auth_exceptions.GoogleAuthError], message: object, retryable: bool = False
) -> auth_exceptions.GoogleAuthError:
    return kind(message, retryable=retryable)


def _refresh_failed_on_the_way(reason: str) -> auth_exceptions.GoogleAuthError:
    """A refresh that failed because the metadata server could not be read, as compute engine credentials raise it:
    the transport error wrapped in a ``RefreshError``."""
    try:
        try:
            raise _auth_error(auth_exceptions.TransportError, reason)
        except auth_exceptions.TransportError as caught:
            raise _auth_error(auth_exceptions.RefreshError, caught) from caught
    except auth_exceptions.RefreshError as refresh:
        return refresh


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (_refresh_failed_on_the_way("Compute Engine Metadata server unavailable"), TransientActuatorError),
        (_auth_error(auth_exceptions.TransportError, "metadata server unavailable"), TransientActuatorError),
        (_auth_error(auth_exceptions.RefreshError, "token endpoint answered 503", True), TransientActuatorError),
        (_auth_error(auth_exceptions.RefreshError, "invalid_grant: Invalid JWT Signature."), PermanentActuatorError),
    ],
)
def test_google_credentials_that_cannot_be_had(exc: Exception, expected: type[Exception]) -> None:
    translated = from_google("p", exc)
    assert type(translated) is expected
    assert translated.reason.startswith("cannot get Google credentials")


def test_a_client_whose_credentials_cannot_be_refreshed_leaves_its_pools_unread(gke_api: FakeGkeApi) -> None:
    """The real clients with credentials that cannot be refreshed (google-auth raises before sending anything):
    the pool is left out and reported, not an exception out of ``list_pools``."""
    gke_api.add_pool("a100", nodes=1)
    credentials = Credentials(token=None)  # type: ignore[no-untyped-call]  # nothing to refresh the token from
    endpoint = {"api_endpoint": gke_api.url}
    gke = container_v1.ClusterManagerClient(transport="rest", credentials=credentials, client_options=endpoint)
    migs = compute_v1.InstanceGroupManagersClient(transport="rest", credentials=credentials, client_options=endpoint)
    mapping = NodePoolMapping(pool="gpu", node_pool="a100")
    actuator = GkeNodePoolActuator(gke, migs, CLUSTER, [mapping], SimulatedClock(datetime(2024, 5, 1, tzinfo=UTC)))

    assert actuator.list_pools() == []
    (error,) = actuator.unread_pools().values()
    assert type(error) is PermanentActuatorError
    assert "refresh" in error.reason
    assert gke_api.requests == []  # nothing reached the API
