"""The sidecar's version: one place for `--version`, build info, the User-Agent and the app.

The number itself is pyproject.toml's `version` (the single source), read from the installed
distribution's metadata."""

from __future__ import annotations

import platform
from importlib.metadata import PackageNotFoundError, version
from typing import Final

DISTRIBUTION: Final = "helios-exporter"


def _installed() -> str:
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0+unknown"


VERSION: Final = _installed()
PYTHON_VERSION: Final = platform.python_version()
USER_AGENT: Final = f"{DISTRIBUTION}/{VERSION}"  # the engine and the sidecar see who asks
