"""AWS errors translated into decisions: the only module that reads botocore exception types.

    InsufficientInstanceCapacity, unfulfillable Spot,
    a capacity reservation used up,
    an instance or vCPU quota reached                   -> CapacityUnavailable     back off this pool
    throttling, 5xx, an update or scaling activity
    already running (a node group not ACTIVE), the
    EKS cluster's state, an instance no longer in
    service when terminated,
    connection and read timeouts,
    a size outside the group's bounds, the IRSA
    identity provider or its keys unreachable, a
    token expired                                       -> TransientActuatorError  retry on a later tick
                                                           (5xx, a read timeout or a connection closed once the
                                                           request was sent: ``maybe_applied``, it may be carried out)
    access denied, missing credentials, not found,
    invalid parameters                                  -> PermanentActuatorError  alert, stop touching this pool

A message naming a capacity shortage wins over the error code, as for Google: EC2 reports it as the error code
``InsufficientInstanceCapacity`` on a call, but Auto Scaling reports it after the call, in a failed scaling
activity's ``StatusMessage`` ("We currently do not have sufficient p5.48xlarge capacity in the Availability Zone
you requested (us-east-1a)..."), and EKS in a node group health issue. ``capacity_failure`` picks those out.
A pool's state names no zone, so backing off backs off the whole pool, in every zone of its group: a failure in one
zone of a group that spans others launching is not taken for the pool's (``actuators.aws_groups``); the zone is
only named in the error's message, for the operator.

The adapters read a group's bounds before every change and never ask outside them, so a refusal for a size outside
them (Auto Scaling's ``ValidationError`` "... is below min value ...", "Currently, desiredSize equals minSize ...",
EKS's ``InvalidParameterException`` "Minimum capacity N can't be greater than desired size M") means the bounds
changed in between: retried on the next tick's fresh reading, not a reason to stop touching the pool. So is a
termination refused because the instance is no longer in service in its group (EC2 took a Spot instance back, or
Auto Scaling replaced it, between the read and the call): ``not_in_service`` tells the adapters to read the group
again, where an instance that left is already gone.

EKS answers ``InvalidRequestException`` for a request "invalid given the state of the cluster" (EKS API Reference,
``UpdateNodegroupConfig`` errors), e.g. "Cluster 'ml' is not in ACTIVE status" while its control plane is upgraded:
the state passes, so the change is retried on a later tick (a long one is told about and backs the pool off as any
change that keeps failing does), never a reason to stop touching the node group until a person unblocks it.
So is a node group update refused because the node group is not ACTIVE, another update of it (an operator's, started
after the agent read the node group) in progress: "Nodegroup cannot be updated as it is currently not in Active
State" comes as ``ResourceInUseException`` (aws/karpenter-provider-aws issue 133) and may come as ``ClientException``,
which the EKS API Reference lists for ``UpdateNodegroupConfig`` with a description that does not tell a client's
mistake from a state that passes: the adapter reads the message, whatever code carries it.
"""

from __future__ import annotations

import re
import socket

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    HTTPClientError,
    NoCredentialsError,
    PartialCredentialsError,
)

from models import ActuatorError, CapacityUnavailable, PermanentActuatorError, TransientActuatorError

# A failed scaling activity's StatusMessage carries the words, not the code: "You have requested more vCPU capacity
# than your current vCPU limit of 384 allows ... Launching EC2 instance failed." (kubernetes/kops pull request 15778),
# "You have requested more instances (7) than your current instance limit of 6 allows ..." (kubernetes/autoscaler
# issue 1263), "Max spot instance count exceeded. Launching EC2 instance failed."
# (aws-deepracer-community/deepracer-on-the-spot issue 55). A targeted capacity reservation (an On-Demand Capacity
# Reservation or Capacity Block) used up is a stockout of the capacity the group may launch into: EC2 code
# ReservationCapacityExceeded, "The requested reservation does not have sufficient compatible and available capacity
# for this request." (scylladb/scylla-cluster-tests issue 8839, openshift/openshift-docs pull request 96641). EC2's
# other shortages are codes Insufficient<what>Capacity (InsufficientInstanceCapacity, InsufficientHostCapacity,
# InsufficientReservedInstanceCapacity, InsufficientVolumeCapacity, InsufficientCapacity: EC2 API Reference, "Error
# codes"), worded "There is not enough capacity to fulfill your ... request"; the instance quota InstanceLimitExceeded
# is also worded "Your quota allows for 0 more running instance(s). You requested at least 1" (hashicorp/terraform
# issue 1891; quintilesims/layer0 issue 273, a launch of an Auto Scaling group's). Auto Scaling also words them its
# own way in a failed launch's StatusMessage: "Insufficient capacity. Launching EC2 instance failed." (Spinnaker's
# entity tags documentation, its ec2_instance_launch_error alert), the Region's running instance quota reached as
# "<number of instances> instance(s) are already running. Launching EC2 instance failed." and a Capacity Block the
# group launches into not started yet as "Your Capacity Block reservation <id> is not active yet. Launching EC2
# instance failed." (Auto Scaling User Guide, "Troubleshoot Amazon EC2 Auto Scaling: EC2 instance launch failures",
# ts-as-capacity-3 and ts-as-capacity-5; awsdocs/amazon-ec2-auto-scaling-user-guide doc_source/ts-as-capacity.md).
# A quota used up does not clear by itself (the operator requests an increase in Service Quotas, or lowers what the
# group asks for): told apart from a stockout, which does, so the alert can say what to do.
_QUOTA = re.compile(
    r"MaxSpotInstanceCountExceeded|InstanceLimitExceeded|VcpuLimitExceeded|"
    r"requested more (?:vCPU capacity|instances)\b.*\blimit\b|max spot instance count exceeded|"
    r"quota allows for \d+ more running instance|\b\d+ instance\(s\) are already running",
    re.IGNORECASE,
)
_STOCKOUT = re.compile(
    r"Insufficient\w*Capacity\b|\binsufficient (?:\w+ )?capacity\b|UnfulfillableCapacity|ReservationCapacityExceeded|"
    r"reservation does not have sufficient .*capacity|not enough capacity to fulfill|"
    r"do not have sufficient .*capacity|no Spot capacity available|capacity-not-available|"
    r"Capacity Block reservation \S+ is not active yet|SpotMaxPriceTooLow",
    re.IGNORECASE,
)
_BOUNDS = re.compile(
    r"(is below min value|is above max value|desiredSize equals minSize|"
    r"can't be greater than desired size|desiredSize can't be greater than maxSize)",
    re.IGNORECASE,
)
# TerminateInstanceInAutoScalingGroup of an instance that left the group since it was read, "Instance Id not found -
# No managed instance found for instance ID i-..." (yaybu/touchdown issue 51: "it means we don't need to do
# anything"), or that is changing state, "The instance i-... is not in InService or Standby." (reproio/ecs_deploy
# issues 47 and 84, where EC2 Auto Scaling was already taking the instance out).
_NOT_IN_SERVICE = re.compile(r"No managed instance found for instance ID|is not in InService or Standby", re.IGNORECASE)
# EKS refusing a node group change while the node group is not ACTIVE (UPDATING: another update in progress).
_NODEGROUP_BUSY = re.compile(r"not in ACTIVE (?:state|status)|currently being updated", re.IGNORECASE)
# EKS node group health issue codes that stop the node group's Auto Scaling group from launching nodes, for a reason
# other than capacity (Amazon EKS API Reference, ``Issue``): the addresses of its subnets used up, its launch
# template, subnets, security group, instance profile, role, instance type or AMI gone. ``AsgInstanceLaunchFailures``
# carries the group's own reason in its message: capacity or not, as ``capacity_failure`` reads it.
_LAUNCH_BLOCKING_ISSUES = frozenset(
    {
        "AsgInstanceLaunchFailures",
        "InsufficientFreeAddresses",
        "Ec2LaunchTemplateNotFound",
        "Ec2LaunchTemplateVersionMismatch",
        "Ec2SubnetNotFound",
        "Ec2SubnetInvalidConfiguration",
        "Ec2SecurityGroupNotFound",
        "Ec2InstanceTypeDoesNotExist",
        "IamInstanceProfileNotFound",
        "IamNodeRoleNotFound",
        "AmiIdNotFound",
    }
)
# The web identity credentials of IRSA (STS AssumeRoleWithWebIdentity, which botocore calls on a client's first
# request and again before the credentials expire) failing in a way that passes: IDPCommunicationError, STS not
# reaching the identity provider (the cluster's OIDC issuer) to verify the token, "often a transient error caused by
# network conditions. Retry the request a limited number of times"; ExpiredTokenException, "the web identity token
# that was passed is expired ... Get a new identity token from the identity provider and then retry the request"
# (STS API Reference, AssumeRoleWithWebIdentity, Errors): the kubelet rotates the projected token file, which
# botocore reads again at each try. InvalidIdentityToken ("could not be validated by AWS": "No OpenIDConnect provider
# found in your account for ...", "Incorrect token audience") and IDPRejectedClaim are a configuration a person fixes:
# permanent. Except the InvalidIdentityToken "Couldn't retrieve verification key from your identity provider": STS
# fetching the issuer's keys failed, its /.well-known/openid-configuration or jwks_uri unreachable from the internet,
# blocked, or slower than 5 s (AWS Knowledge Center, "iam-sts-invalididentitytoken"), which passes; AWS's Go SDKs
# retry InvalidIdentityToken as a temporary error (aws-sdk-go and aws-sdk-go-v2, credentials/stscreds,
# web_identity_provider.go). So that message alone is transient (_KEY_NOT_RETRIEVED).
_IDENTITY_PASSES = {
    "IDPCommunicationError": "STS could not reach the identity provider (the cluster's OIDC issuer) to verify the "
    "service account's token; will retry (if it lasts, check the issuer's /.well-known/openid-configuration and "
    "its keys answer from the internet)",
    "ExpiredTokenException": "the service account's token, or the credentials taken with it, expired; will retry "
    "with the token the kubelet rotates (if it lasts, check the projected token is refreshed and the node's clock)",
    "ExpiredToken": "the credentials expired; will retry with fresh ones",
}
_KEY_NOT_RETRIEVED = re.compile(r"retrieve verification key", re.IGNORECASE)
_KEY_NOT_RETRIEVED_HINT = (
    "STS could not fetch the keys that verify the service account's token from the cluster's OIDC issuer; will "
    "retry (if it lasts, check the issuer's /.well-known/openid-configuration and its jwks_uri are reachable from "
    "the internet, not blocked by a firewall, and answer within 5 s)"
)
_ZONE = re.compile(r"\b([a-z]{2}(?:-[a-z]+)+-\d[a-z])\b")
_TRANSIENT_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "RequestThrottled",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "InternalFailure",
        "InternalError",
        "ServerException",
        "ScalingActivityInProgress",  # SetDesiredCapacity while an activity runs (Auto Scaling API reference)
        "ResourceContention",
        "ResourceInUseException",  # EKS: an update of the node group is already in progress
        "InvalidRequestException",  # EKS: invalid given the cluster's state (e.g. not ACTIVE during an upgrade)
    }
)


# Of those, the server failing while it handled the request (500, 503): unlike a throttle or a change already under
# way, which refuse it, the request may have been carried out (``TransientActuatorError.maybe_applied``).
_SERVER_FAILED = frozenset(
    {"ServiceUnavailable", "ServiceUnavailableException", "InternalFailure", "InternalError", "ServerException"}
)


def capacity_failure(message: str) -> str:
    """``message`` when it names a capacity shortage or a reached instance quota, else ""."""
    return message if _STOCKOUT.search(message) or _QUOTA.search(message) else ""


def quota_failure(message: str) -> bool:
    """Whether ``message`` names an instance, vCPU or Spot request quota reached (one ``capacity_failure`` reads as
    capacity too), which does not clear by itself."""
    return bool(_QUOTA.search(message))


def blocks_launches(issue_code: str) -> bool:
    """Whether an EKS node group health issue with this code stops the node group's launches (capacity or not)."""
    return issue_code in _LAUNCH_BLOCKING_ISSUES


def not_in_service(exc: Exception) -> bool:
    """Whether AWS refused to terminate an instance because it is no longer, or not now, in service in its group."""
    if not isinstance(exc, ClientError):
        return False
    error = exc.response.get("Error", {})
    return str(error.get("Code", "")) == "ValidationError" and bool(_NOT_IN_SERVICE.search(str(error.get("Message"))))


def zone_of(message: str) -> str | None:
    """The Availability Zone an AWS capacity message names, if any."""
    found = _ZONE.search(message)
    return found[1] if found else None


def capacity_unavailable(pool_id: str, message: str) -> CapacityUnavailable:
    """A refusal for capacity or quota, naming the zone where AWS's message does, and saying whether it is a quota
    reached (``quota_failure``), which does not clear by itself."""
    zone = zone_of(message)
    described = f"{message} (zone {zone})" if zone and zone not in message else message
    return CapacityUnavailable(pool_id, described, quota=quota_failure(message))


def from_aws(pool_id: str, exc: Exception) -> ActuatorError:
    """A botocore exception (or a transport failure under it) as one of ours."""
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        message = str(error.get("Message", "")) or str(exc)
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        described = f"{code}: {message}" if code else message
        if capacity_failure(described):
            return capacity_unavailable(pool_id, described)
        if code == "InvalidIdentityToken" and _KEY_NOT_RETRIEVED.search(message):
            return TransientActuatorError(pool_id, f"AWS {described} ({_KEY_NOT_RETRIEVED_HINT})")
        if code in _IDENTITY_PASSES:
            return TransientActuatorError(pool_id, f"AWS {described} ({_IDENTITY_PASSES[code]})")
        if code in _TRANSIENT_CODES or status == 429 or status >= 500:
            failed = code in _SERVER_FAILED or (status >= 500 and code not in _TRANSIENT_CODES)
            return TransientActuatorError(pool_id, f"AWS {described} (will retry)", maybe_applied=failed)
        if code == "ClientException" and _NODEGROUP_BUSY.search(message):
            return TransientActuatorError(
                pool_id, f"AWS {described} (the node group is busy with another update; will retry)"
            )
        if not_in_service(exc):
            return TransientActuatorError(pool_id, f"AWS {described} (the instance is leaving the group; will retry)")
        if code in ("ValidationError", "InvalidParameterException") and _BOUNDS.search(message):
            return TransientActuatorError(pool_id, f"AWS {described} (the group's bounds changed; will retry)")
        return PermanentActuatorError(pool_id, f"AWS {described}")
    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return PermanentActuatorError(
            pool_id,
            f"no AWS credentials ({exc}); give the agent's service account an IAM role (IRSA or EKS Pod Identity)",
        )
    if isinstance(exc, BotoCoreError):
        # a read timed out or the connection closed once the request was sent (HTTPClientError): it may be carried
        # out; no connection made (EndpointConnectionError, ConnectTimeoutError), credentials or parameters refused
        # before sending: not
        return TransientActuatorError(
            pool_id, f"AWS API unavailable: {exc}", maybe_applied=isinstance(exc, HTTPClientError)
        )
    sent = not isinstance(exc, ConnectionRefusedError | socket.gaierror)
    return TransientActuatorError(pool_id, f"cannot reach the AWS API: {exc}", maybe_applied=sent)


# What the adapters catch around an AWS call: API errors and the transport errors beneath them.
AWS_ERRORS: tuple[type[Exception], ...] = (ClientError, BotoCoreError, ConnectionError, OSError)
