"""Whether a transient error's request may have reached the cloud (``TransientActuatorError.maybe_applied``), as the
adapters translate it: a refusal applied nothing, a timeout, a lost connection or a server's failure may have applied
it. A release counted every transient error as possibly carried out, so another agent sharing its budget waited a
lead time before shedding for a refusal (``tests.test_shared_budget_claims_unclear_release``)."""

from __future__ import annotations

import socket
from collections.abc import Callable
from datetime import timedelta

import botocore.exceptions as boto
import pytest
import requests
import urllib3
from google.api_core import exceptions as google
from google.auth import exceptions as auth

from actuators import aws_errors, vendor_errors
from actuators.write_window import WriteWindow, write_timeout, write_window, writes_sent
from models import ActuatorError, TransientActuatorError
from models.errors import KubernetesUnavailable
from tests.fakes.fixtures import google_clients


def _api(kind: Callable[..., Exception], message: str) -> Exception:
    """A Google client's exception (their constructors carry no annotations)."""
    return kind(message)


def _aws(code: str, status: int = 400) -> Callable[[], ActuatorError]:
    response = {"Error": {"Code": code, "Message": "m"}, "ResponseMetadata": {"HTTPStatusCode": status}}
    return lambda: aws_errors.from_aws("p", boto.ClientError(response, "SetDesiredCapacity"))


def _google(exc: Exception) -> Callable[[], ActuatorError]:
    return lambda: vendor_errors.from_google("p", exc)


CASES: dict[str, tuple[Callable[[], ActuatorError], bool]] = {
    "gke 429": (_google(_api(google.TooManyRequests, "Too many operations")), False),
    "gke 409": (_google(_api(google.Conflict, "Operation operation-1 is currently upgrading cluster ml")), False),
    "gke 400 busy": (_google(_api(google.FailedPrecondition, "Cluster is running incompatible operation op-1")), False),
    "gke 503 rate limit": (_google(_api(google.ServiceUnavailable, "Rate Limit Exceeded")), False),
    "gke token": (_google(_api(auth.TransportError, "metadata server unreachable")), False),
    "gke connection refused": (_google(ConnectionRefusedError("refused")), False),
    "gke 500": (_google(_api(google.InternalServerError, "internal error")), True),
    "gke 503": (_google(_api(google.ServiceUnavailable, "unavailable")), True),
    "gke 504": (_google(_api(google.GatewayTimeout, "deadline exceeded")), True),
    "gke deadline": (_google(_api(google.DeadlineExceeded, "deadline exceeded")), True),
    "gke read timeout": (_google(TimeoutError("The read operation timed out")), True),
    "gke connection reset": (_google(ConnectionResetError("reset by peer")), True),
    "gke operation INTERNAL": (lambda: vendor_errors.from_operation_error("p", 13, "internal"), True),
    "kubernetes no answer": (
        lambda: vendor_errors.from_kubernetes("p", KubernetesUnavailable(None, "timed out")),
        True,
    ),
    "aws throttling": (_aws("Throttling"), False),
    "aws activity": (_aws("ScalingActivityInProgress"), False),
    "aws node group busy": (_aws("ResourceInUseException"), False),
    "aws no connection": (lambda: aws_errors.from_aws("p", boto.EndpointConnectionError(endpoint_url="u")), False),
    "aws connect timeout": (lambda: aws_errors.from_aws("p", boto.ConnectTimeoutError(endpoint_url="u")), False),
    "aws 500": (_aws("InternalFailure", 500), True),
    "aws 503": (_aws("ServiceUnavailable", 503), True),
    "aws read timeout": (lambda: aws_errors.from_aws("p", boto.ReadTimeoutError(endpoint_url="u")), True),
    "aws connection closed": (lambda: aws_errors.from_aws("p", boto.ConnectionClosedError(endpoint_url="u")), True),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_adapters_transient_error_says_whether_its_request_may_have_been_applied(case: str) -> None:
    translate, maybe = CASES[case]
    error = translate()
    assert isinstance(error, TransientActuatorError), error
    assert error.maybe_applied is maybe, error


def test_a_write_the_window_refuses_was_not_sent_unless_an_earlier_write_of_the_change_was() -> None:
    left = iter([60.0, 1.0, 1.0])
    window = WriteWindow(timedelta(seconds=5), lambda: next(left))
    with write_window(window), writes_sent() as sent:
        assert write_timeout("p") == 5.0  # sent
        with pytest.raises(TransientActuatorError) as second:
            write_timeout("p")
    assert sent.asked == sent.accepted == ["p"] and second.value.maybe_applied
    with write_window(window), writes_sent() as sent, pytest.raises(TransientActuatorError) as first:
        write_timeout("p")
    assert sent.asked == sent.accepted == [] and not first.value.maybe_applied


def _closed_port() -> int:
    """A port of 127.0.0.1 nothing listens on (bound, then closed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_a_connection_refused_on_the_rest_transport_sent_nothing() -> None:
    """The REST transport gives a refused connection as requests' ConnectionError wrapping urllib3's MaxRetryError,
    whose reason is the NewConnectionError: read as possibly applied before (only the outer class was looked at)."""
    url = f"http://127.0.0.1:{_closed_port()}"
    with pytest.raises(requests.exceptions.ConnectionError) as refused:
        requests.post(f"{url}/v1/nodePools:setAutoscaling", timeout=5)
    error = vendor_errors.from_google("p", refused.value)
    assert isinstance(error, TransientActuatorError) and not error.maybe_applied, error

    gke = google_clients(url).gke  # the real client, as the adapters call it
    with pytest.raises(TransientActuatorError) as raised:
        vendor_errors.call_google(
            "p", gke.set_node_pool_autoscaling, request={"name": "projects/p/locations/l/clusters/c/nodePools/n"},
            timeout=5, retry=None,
        )  # fmt: skip
    assert not raised.value.maybe_applied, raised.value


def test_a_name_not_resolved_on_the_rest_transport_sent_nothing() -> None:
    """As requests wraps urllib3's NameResolutionError (a NewConnectionError)."""
    host = "container.googleapis.com"
    connection, pool = urllib3.connection.HTTPConnection(host), urllib3.HTTPConnectionPool(host)
    resolving = urllib3.exceptions.NameResolutionError(host, connection, socket.gaierror(-2, "unknown"))
    exc = requests.exceptions.ConnectionError(urllib3.exceptions.MaxRetryError(pool, "/v1", resolving))
    error = vendor_errors.from_google("p", exc)
    assert isinstance(error, TransientActuatorError) and not error.maybe_applied, error


def test_a_connection_lost_once_the_request_was_sent_may_be_applied() -> None:
    lost = urllib3.exceptions.ProtocolError("Connection aborted.", ConnectionResetError(104, "reset by peer"))
    error = vendor_errors.from_google("p", requests.exceptions.ConnectionError(lost))
    assert isinstance(error, TransientActuatorError) and error.maybe_applied, error
