"""IRSA's web identity credentials failing, with the daemon's boto3 clients against moto behind the proxy of
``tests.fakes.aws_api`` and STS answered by a small local server in STS's query-XML error format: an identity
provider STS could not reach, or whose keys it could not fetch, or a token expired, passes and is retried; a token
AWS cannot validate (no OIDC provider for its issuer, a wrong audience) is the operator's to fix."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from actuators.aws_wiring import build_aws_actuators
from actuators.base import Actuator, unread_pools
from config.aws import AutoScalingGroupMapping, AwsSettings
from models import ActuatorError, PermanentActuatorError, TransientActuatorError
from models.clock import SimulatedClock
from tests.fakes.aws_api import FakeAwsApi

# What STS answers, by case: (code, message). The two InvalidIdentityToken messages that are configuration and the
# one of keys STS could not fetch are STS's own words (tests/fakes/REFERENCE.md); the others are illustrative.
_ANSWERS = {
    "IDPCommunicationError": (
        "IDPCommunicationError",
        "The request could not be fulfilled because the identity provider (IDP) that was asked to verify the "
        "incoming identity token could not be reached.",
    ),
    "ExpiredTokenException": (
        "ExpiredTokenException",
        "Token expired: current date/time 1714521600 must be before the expiration date/time 1714518000",
    ),
    "keys not retrieved": (
        "InvalidIdentityToken",
        "Couldn't retrieve verification key from your identity provider,  please reference "
        "AssumeRoleWithWebIdentity documentation for requirements",
    ),
    "no provider": (
        "InvalidIdentityToken",
        "No OpenIDConnect provider found in your account for https://oidc.eks.us-east-1.amazonaws.com/id/EXAMPLE",
    ),
    "wrong audience": ("InvalidIdentityToken", "Incorrect token audience"),
}
_CREDENTIALS = (
    '<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">'
    "<AssumeRoleWithWebIdentityResult><Credentials><AccessKeyId>ASIAEXAMPLE</AccessKeyId>"
    "<SecretAccessKey>secret</SecretAccessKey><SessionToken>session</SessionToken>"
    "<Expiration>2099-01-01T00:00:00Z</Expiration></Credentials></AssumeRoleWithWebIdentityResult>"
    "<ResponseMetadata><RequestId>1</RequestId></ResponseMetadata></AssumeRoleWithWebIdentityResponse>"
)


@dataclass
class _Sts:
    """What the local STS answers AssumeRoleWithWebIdentity: ``error`` (a case of ``_ANSWERS``), or credentials."""

    error: str = ""
    calls: list[str] = field(default_factory=list)


def _handler(sts: _Sts) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            sts.calls.append(self.rfile.read(int(self.headers["Content-Length"])).decode())
            if sts.error:
                code, message = _ANSWERS[sts.error]
                body = (
                    '<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type>'
                    f"<Code>{code}</Code><Message>{message}</Message></Error>"
                    "<RequestId>1</RequestId></ErrorResponse>"
                ).encode()
                self.send_response(400)
            else:
                body = _CREDENTIALS.encode()
                self.send_response(200)
            self.send_header("Content-Type", "text/xml")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


@pytest.fixture
def sts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[_Sts]:
    """A local STS, and the environment IRSA gives the agent's pod pointing boto3 at it."""
    state = _Sts()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    token = tmp_path / "token"
    token.write_text("eyJhbGciOiJSUzI1NiJ9.e30.c2ln")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/leadtime")
    monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(token))
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", f"http://127.0.0.1:{server.server_address[1]}")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _spot_pool(aws_api: FakeAwsApi) -> Actuator:
    aws_api.add_group("gpu-spot", nodes=1)
    settings = AwsSettings(
        region="us-east-1",
        endpoint=aws_api.url,
        auto_scaling_groups=(AutoScalingGroupMapping(pool="spot", group="gpu-spot"),),
    )
    return build_aws_actuators(settings, SimulatedClock(datetime(2024, 5, 1, tzinfo=UTC))).routes["spot"]


@pytest.mark.parametrize(
    ("case", "kind", "said"),
    [
        ("IDPCommunicationError", TransientActuatorError, "could not reach the identity provider"),
        ("ExpiredTokenException", TransientActuatorError, "the kubelet rotates"),
        ("keys not retrieved", TransientActuatorError, "jwks_uri are reachable from the internet"),
        ("no provider", PermanentActuatorError, "No OpenIDConnect provider found"),
        ("wrong audience", PermanentActuatorError, "Incorrect token audience"),
    ],
)
def test_a_web_identity_failure_is_read_for_what_it_needs(
    aws_api: FakeAwsApi, sts: _Sts, case: str, kind: type[ActuatorError], said: str
) -> None:
    sts.error = case
    actuator = _spot_pool(aws_api)

    assert list(actuator.list_pools()) == []
    unread = unread_pools(actuator)["spot"]
    assert type(unread) is kind
    assert _ANSWERS[case][0] in str(unread) and said in str(unread)
    with pytest.raises(kind):
        actuator.resize("spot", 2, "up")
    assert aws_api.calls("SetDesiredCapacity") == 0
    assert all("Action=AssumeRoleWithWebIdentity" in call for call in sts.calls)


@pytest.mark.parametrize("case", ["IDPCommunicationError", "keys not retrieved"])
def test_the_pool_is_read_once_the_identity_provider_answers_again(aws_api: FakeAwsApi, sts: _Sts, case: str) -> None:
    sts.error = case
    actuator = _spot_pool(aws_api)
    assert list(actuator.list_pools()) == []

    sts.error = ""
    (state,) = actuator.list_pools()
    assert (state.pool_id, state.ready_units) == ("spot", 1)
