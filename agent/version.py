"""The version of this installation, as ``--version`` prints it and ``leadtime_build_info`` exposes it."""

from __future__ import annotations

import platform
from functools import cache
from importlib.metadata import PackageNotFoundError, version


@cache
def package_version() -> str:
    try:
        return version("leadtime")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0+unknown"


def version_text() -> str:
    return f"leadtime {package_version()} (Python {platform.python_version()})"
