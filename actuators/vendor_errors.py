"""Vendor errors translated into decisions, in one place: the only module that reads Google SDK exception types
(the Kubernetes API's failures arrive already translated by ``kube.errors`` into ``models.errors``).

    a rate limit or concurrent operations quota
    (any status code)                          -> TransientActuatorError  retry on a later tick
    stockout or quota (any status code)        -> CapacityUnavailable     back off this pool, try the next one
                                                  (``quota`` set for a quota used up: have it raised)
    HTTP 429 (rate limit), 5xx, 409 conflict,
    an operation already running, connection   -> TransientActuatorError  retry on a later tick (5xx, a timeout or
                                                  a connection lost: ``maybe_applied``)
    HTTP 401/403, 404, 400 invalid argument    -> PermanentActuatorError  alert, stop touching this pool
    no access token: the metadata server or
    the token endpoint failed                  -> TransientActuatorError  retry on a later tick
    no access token, any other reason          -> PermanentActuatorError  alert, stop touching this pool

A message naming a stockout or an exhausted quota wins over the status code: GKE, Compute Engine and Cloud TPU
report them as 400, 403, 429 or 503 depending on the call (``ZONE_RESOURCE_POOL_EXHAUSTED``, ``GCE_STOCKOUT``,
``QUOTA_EXCEEDED``, "Quota ... exhausted"), and a quota that ran out is back-off material, not a bad request.
Too many requests, or too many operations at once (on a project or on one resource), is neither: it wins over both,
so that Compute Engine's 403 "Rate Limit Exceeded" (whose reason, ``CONCURRENT_OPERATIONS_QUOTA_EXCEEDED``, names a
quota) and its "Operation rate exceeded for resource '...'" (``RESOURCE_OPERATION_RATE_EXCEEDED``) are retried
instead of blocking the pool or sending its demand elsewhere. The reasons an error carries (``errors[].reason``, the
``ErrorInfo`` detail) are read with its message.

A transient error says whether the request may have reached Google and be carried out all the same
(``TransientActuatorError.maybe_applied``): a server error (500 INTERNAL, 502, 503 UNAVAILABLE, which gRPC also
gives for a connection lost, 504 DEADLINE_EXCEEDED), an operation that ended with one, no answer in time or a
connection lost. A refusal is not: too many requests or operations, another operation running (409, 400
FAILED_PRECONDITION), no access token (asked before any request is sent), a connection never made.

A stockout can also come after an accepted call, recorded instead of raised: on a managed instance's
``lastAttempt.errors`` or on a finished operation's error ("Not all instances running in IGM ...
[ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS] ..."). ``capacity_failure`` picks those out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from google.api_core import exceptions as google_exceptions
from google.auth import exceptions as auth_exceptions

from actuators.write_window import write_raised, write_returned
from models import ActuatorError, CapacityUnavailable, PermanentActuatorError, TransientActuatorError
from models.errors import KubernetesApiError

# Stockouts and exhausted quotas, as the services word them: codes (``ZONE_RESOURCE_POOL_EXHAUSTED``, also plain
# ``RESOURCE_POOL_EXHAUSTED`` as cluster-autoscaler's GCE provider reads it, ``GCE_STOCKOUT``, ``QUOTA_EXCEEDED``) and
# messages: Compute's "The zone '...' does not have enough resources available to fulfill the request"; GKE's 403
# "Insufficient regional quota to satisfy request: resource "NVIDIA_A100_GPUS": ..." (kubeflow/kubeflow issue 842,
# vanvalenlab/kiosk-console issue 367) and its operations' "Insufficient quota to satisfy the request: Not all
# instances running in IGM ..."; Compute's "Quota 'GPUS_ALL_REGIONS' exceeded. Limit: 0.0 globally."; Cloud TPU's
# 429 "Quota limit 'TPUV6EPreemptiblePerProjectPerRegionForTPUAPI' has been exceeded. Limit: 0 in region ..."
# (marin-community/marin pull request 1612), "Quota '...' exhausted. Limit 20800 in region ..." (marin-community/marin
# issue 87) and "Insufficient reserved capacity" (skypilot-org/skypilot issue 4579).
_CAPACITY = re.compile(
    r"RESOURCE_POOL_EXHAUSTED|GCE_STOCKOUT|STOCKOUT|QUOTA_EXCEEDED|quota .*exhausted|quota exceeded|"
    r"quota (?:limit )?'[^']*' (?:has been )?exceeded|insufficient (?:regional |zonal )?quota|"
    r"insufficient (?:\w+ )?capacity|no more capacity|resource_exhausted_.*capacity|"
    r"does not have enough resources available",
    re.IGNORECASE,
)
# Another operation holds the pool or the whole cluster (GKE answers 400 FAILED_PRECONDITION): "Operation operation-...
# is currently upgrading cluster C. Please wait and try again once it is done." (a node pool's or the cluster's own
# operation; "... is currently deleting a node pool for cluster C ..."; gcloud's quote of it says "once it's done"),
# "Cluster is running incompatible operation operation-..." (reason CLUSTER_ALREADY_HAS_OPERATION, e.g. during an
# upgrade GKE started itself). Quoted in terraform-provider-google issues 1451, 3650 and 10366, rancher/gke-operator
# pull request 509 and cluster-api-provider-gcp issue 1363. The verb and the apostrophe vary, so either half is enough.
_BUSY = re.compile(
    r"is currently operating on|already in progress|try again once it(?:'|\u2019| i)s done|"
    r"is currently \w+ing (?:a node pool for )?(?:cluster|node pool)\b|running incompatible operation|"
    r"CLUSTER_ALREADY_HAS_OPERATION|is currently being created, deleted, updated or repaired",
    re.IGNORECASE,
)

# Too many requests or operations at once: Compute Engine answers 403 "Rate Limit Exceeded", reason
# rateLimitExceeded, with ErrorInfo reason CONCURRENT_OPERATIONS_QUOTA_EXCEEDED when a project has too many
# operations in flight (Compute Engine docs, "Concurrent operation quotas"); GKE answers 429 "Too many operations:
# cluster "C" hits the concurrent operations quota 5, please try again later." (terraform-provider-google issue
# 15205). GKE also refuses a change while the cluster itself is busy with "Cluster is currently being created,
# deleted, updated or repaired and cannot be updated" (GKE docs, "Troubleshoot concurrent operations"). A quota on
# API requests is a rate limit too, not an exhausted accelerator quota: "Quota exceeded for quota metric '...' and
# limit '... per minute ...'", ErrorInfo reason RATE_LIMIT_EXCEEDED (Google API errors, "ErrorInfo"). So is Compute's
# limit on the operations of one resource, RESOURCE_OPERATION_RATE_EXCEEDED "Operation rate exceeded for resource
# '...'. Too frequent operations from the source resource." (many boot disks created from one image at once, as a big
# scale-up does; snapshots of one disk too often): gcpdiag's lint rule gce/ERR/2024_001 reads it as a rate limit, and
# SkyPilot's GCP provisioner retries an instance insert refused with it.
_RATE_LIMITED = re.compile(
    r"rate[ _]?limit[ _]?exceeded|CONCURRENT_OPERATIONS_QUOTA_EXCEEDED|too many operations|"
    r"concurrent operations quota|limit '[^']*per (?:minute|second|100 seconds|day)|"
    r"RESOURCE_OPERATION_RATE_EXCEEDED|operation rate exceeded|too frequent operations",
    re.IGNORECASE,
)


def is_capacity_message(message: str) -> bool:
    return bool(_CAPACITY.search(message))


# Of those, the quotas used up: they do not clear by themselves, the operator has them raised.
_QUOTA = re.compile(
    r"QUOTA_EXCEEDED|quota .*exhausted|quota exceeded|quota (?:limit )?'[^']*' (?:has been )?exceeded|"
    r"insufficient (?:regional |zonal )?quota",
    re.IGNORECASE,
)


def is_quota_message(message: str) -> bool:
    """Whether a message names an exhausted quota (not a rate limit, which names a quota too)."""
    return bool(_QUOTA.search(message)) and not _RATE_LIMITED.search(message)


def is_rate_limited(code: str, message: str) -> bool:
    """Whether a recorded (code, message) error is too many requests or operations at once (``_RATE_LIMITED``):
    Compute retries such a create by itself, so it is neither a stockout, a quota used up nor a failed creation."""
    return bool(_RATE_LIMITED.search(f"{code} {message}"))


def _names_capacity(code: str, message: str) -> bool:
    """A recorded error that names a stockout or an exhausted quota, and not a rate limit (whose code,
    ``CONCURRENT_OPERATIONS_QUOTA_EXCEEDED``, contains a quota's)."""
    return is_capacity_message(f"{code} {message}") and not is_rate_limited(code, message)


def capacity_failure(errors: Iterable[tuple[str, str]]) -> str:
    """The first recorded (code, message) error that names a stockout or an exhausted quota, as "code: message";
    "" when none does (other recorded errors are not capacity and are left to the caller)."""
    found = (f"{code}: {message}" if code else message for code, message in errors if _names_capacity(code, message))
    return next(found, "")


def from_status(pool_id: str, code: int, message: str) -> ActuatorError:
    """The decision for an HTTP-style status code and message (also used for errors inside operations)."""
    if _RATE_LIMITED.search(message):
        return TransientActuatorError(pool_id, f"HTTP {code}: {message}")
    if is_capacity_message(message):
        return CapacityUnavailable(pool_id, message, quota=is_quota_message(message))
    if code in {429, 409} or _BUSY.search(message):  # refused: nothing applied
        return TransientActuatorError(pool_id, f"HTTP {code}: {message}")
    if code >= 500:  # the server failed handling it, or gave up waiting: it may carry it out all the same
        return TransientActuatorError(pool_id, f"HTTP {code}: {message}", maybe_applied=code != 501)
    return PermanentActuatorError(pool_id, f"HTTP {code}: {message}")


_GRPC_TO_HTTP = {1: 499, 2: 500, 3: 400, 4: 504, 5: 404, 6: 409, 7: 403, 8: 429, 9: 400, 10: 409, 13: 500, 14: 503}


def from_operation_error(pool_id: str, grpc_code: int, message: str) -> ActuatorError:
    """An error recorded in a finished operation (a ``google.rpc.Status``: gRPC code and message)."""
    return from_status(pool_id, _GRPC_TO_HTTP.get(grpc_code, 500), message)


def from_google(pool_id: str, exc: Exception) -> ActuatorError:
    """A ``google.api_core`` exception (or a transport failure under it) as one of ours."""
    if isinstance(exc, google_exceptions.GoogleAPICallError):
        code = int(exc.code) if exc.code is not None else 500
        return from_status(pool_id, code, _with_reasons(exc.message or str(exc), exc))
    if isinstance(exc, google_exceptions.RetryError | google_exceptions.GoogleAPIError):
        return TransientActuatorError(pool_id, f"Google API unavailable: {exc}", maybe_applied=True)
    if isinstance(exc, auth_exceptions.GoogleAuthError):
        return _from_credentials(pool_id, exc)
    return TransientActuatorError(pool_id, f"cannot reach the Google API: {exc}", maybe_applied=_maybe_sent(exc))


# Transport errors raised before a request leaves: no connection made (refused, a name not resolved, connecting timed
# out: requests' ConnectTimeout, urllib3's NewConnectionError, its NameResolutionError and ConnectTimeoutError). Any
# other (a read timed out, the connection reset or closed once the request was sent) may come after the request
# reached the server.
_NOT_SENT = frozenset(
    {"ConnectionRefusedError", "gaierror", "ConnectTimeout", "ConnectTimeoutError", "NewConnectionError"}
)


def _maybe_sent(exc: BaseException) -> bool:
    """Whether a transport error may have come once the request was sent (``_NOT_SENT``). The REST transport gives a
    connection never made as requests' ``ConnectionError`` wrapping urllib3's ``MaxRetryError``, whose ``reason`` is
    the ``NewConnectionError``: the error is read with what it wraps (its cause and context, the exceptions among its
    arguments, a ``reason`` that is one)."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        one = todo.pop()
        if id(one) in seen:
            continue
        seen.add(id(one))
        if any(k.__name__ in _NOT_SENT for k in type(one).__mro__):
            return False
        inner = [one.__cause__, one.__context__, getattr(one, "reason", None), *one.args]
        todo.extend(e for e in inner if isinstance(e, BaseException))
    return True


def _from_credentials(pool_id: str, exc: auth_exceptions.GoogleAuthError) -> ActuatorError:
    """The client could not get an access token before the call. A metadata server or token endpoint that failed
    (google-auth's ``TransportError``, which compute engine credentials raise wrapped in a ``RefreshError``, or an
    error it calls retryable) is tried again next tick: in GKE the metadata server restarts, and a blip must not
    block a pool; any other failure (credentials without what a refresh needs) is permanent."""
    cause = exc.__cause__
    passing = exc.retryable or isinstance(exc, auth_exceptions.TransportError)
    passing = passing or isinstance(cause, auth_exceptions.TransportError)
    what = f"cannot get Google credentials for the agent's service account: {exc}"
    return TransientActuatorError(pool_id, what) if passing else PermanentActuatorError(pool_id, what)


def _with_reasons(message: str, exc: google_exceptions.GoogleAPICallError) -> str:
    """The message, followed by the reasons the error carries that it does not already name (``errors[].reason``
    of the JSON error body, and the ``ErrorInfo`` detail's reason)."""
    reasons = [e.get("reason") for e in (exc.errors or []) if isinstance(e, dict)]
    reasons.append(exc.reason)
    extra = [r for r in dict.fromkeys(reasons) if isinstance(r, str) and r and r not in message]
    return f"{message} ({', '.join(extra)})" if extra else message


def from_kubernetes(pool_id: str, exc: KubernetesApiError) -> ActuatorError:
    """A failed Kubernetes API call (``kube.errors``) as the decision for this pool."""
    if exc.status is None:  # no answer: the request may have been sent
        return TransientActuatorError(pool_id, f"cannot reach the Kubernetes API: {exc.reason}", maybe_applied=True)
    if exc.status == 410:  # Gone: a list's continue token expired; the next read lists anew
        return TransientActuatorError(pool_id, f"HTTP 410: {exc.reason}: {exc.detail}".strip())
    return from_status(pool_id, exc.status, f"{exc.reason}: {exc.detail}".strip())


def is_already_exists(exc: Exception) -> bool:
    return isinstance(exc, google_exceptions.Conflict)


def is_not_found(exc: Exception) -> bool:
    return isinstance(exc, google_exceptions.NotFound)


# What the adapters catch around a vendor call: API errors and the transport errors beneath them.
GOOGLE_ERRORS: tuple[type[Exception], ...] = (
    google_exceptions.GoogleAPIError,
    auth_exceptions.GoogleAuthError,  # the access token could not be had (raised before any request is sent)
    ConnectionError,
    OSError,
)


def call_google(pool_id: str, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call a Google client method; what it raises comes back as this pool's ``ActuatorError``. A write's call (its
    time limit asked of ``actuators.write_window.write_timeout`` as its argument) that returns is counted accepted,
    one that raises is not: its error says for its own request."""
    try:
        answer = method(*args, **kwargs)
    except GOOGLE_ERRORS as exc:
        write_raised()
        raise from_google(pool_id, exc) from exc
    except BaseException:
        write_raised()
        raise
    write_returned()
    return answer
