"""The dependencies only the agent in the cluster needs, installed as the ``daemon`` extra, and what a command that
needs one says when it is missing.

``pip install leadtime`` brings what simulating, backtesting, recommending from Prometheus and checking a
configuration need; the Kubernetes, Google Cloud and AWS clients, Slack and the PostgreSQL driver (a quarter of a
full install's size and half its time: 18 s instead of 33-40 s on 2 cores) come with
``pip install 'leadtime[daemon]'``, as in the container image. They are imported only where they are used, so a
command fails on one only when it really needs it.
"""

from __future__ import annotations

EXTRA = "daemon"
# Top-level module -> what it is for, for the message.
MODULES = {
    "kubernetes": "the Kubernetes client",
    "google": "the Google Cloud clients",
    "boto3": "the AWS client",
    "botocore": "the AWS client",
    "slack_sdk": "the Slack client",
    "psycopg": "the PostgreSQL driver",
}


def missing_extra(error: ModuleNotFoundError) -> str | None:
    """What to tell a person when ``error`` is one of the daemon extra's modules missing; None for any other."""
    name = error.name or ""
    what = MODULES.get(name.split(".")[0])
    if what is None:
        return None
    return (
        f"this needs {what} (module {name!r} is not installed), which comes with leadtime's {EXTRA} dependencies: "
        f"pip install 'leadtime[{EXTRA}]' (the container image has them)"
    )
