"""moto's own server in its own process on 127.0.0.1, stopped by its PID, and the real boto3 clients pointed at it
or at the proxy in front of it (``tests.fakes.aws_api.proxy``)."""

from __future__ import annotations

import atexit
import functools
import os
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3

REGION = "us-east-1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class MotoServer:
    """moto's server in its own process on 127.0.0.1; ``stop`` ends that process by PID."""

    def __init__(self) -> None:
        self.port = _free_port()
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> MotoServer:
        command = [str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1", "-p", str(self.port)]
        # Without moto's catalogue of public AMIs (loading it takes seconds); the launch template names its own.
        env = os.environ | {"MOTO_EC2_LOAD_DEFAULT_AMIS": "false"}
        self._process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{self.url}/moto-api/", timeout=1).close()
                return self
            except OSError:
                if self._process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("moto server did not start") from None
                time.sleep(0.05)

    def reset(self) -> None:
        request = urllib.request.Request(f"{self.url}/moto-api/reset", method="POST")
        urllib.request.urlopen(request, timeout=10).close()

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None


_shared: MotoServer | None = None


def shared_moto() -> MotoServer:
    """One moto server per test process, started on first use and stopped (by PID) when the process exits."""
    global _shared  # noqa: PLW0603 - one server process per test process
    if _shared is None:
        _shared = MotoServer().start()
        atexit.register(_shared.stop)
    return _shared


@dataclass(frozen=True)
class AwsClients:
    autoscaling: Any
    ec2: Any
    eks: Any


@functools.cache
def _clients(url: str) -> AwsClients:
    """Real boto3 clients for ``url``; the keys are moto's test keys, never real ones."""
    session = boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION)
    from botocore.config import Config

    config = Config(retries={"total_max_attempts": 1, "mode": "standard"})  # each call once: faults are counted
    return AwsClients(
        autoscaling=session.client("autoscaling", endpoint_url=url, config=config),
        ec2=session.client("ec2", endpoint_url=url, config=config),
        eks=session.client("eks", endpoint_url=url, config=config),
    )
