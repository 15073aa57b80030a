"""Which sidecar this is, e.g.

    helios_exporter_build_info{python_version="3.11.2",version="0.2.0"} 1.0
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import Metric

from exporter.collectors.families import gauge
from exporter.version import PYTHON_VERSION, VERSION


class BuildInfoCollector:
    def __init__(self, version: str = VERSION, python_version: str = PYTHON_VERSION) -> None:
        self._version = version
        self._python_version = python_version

    def collect(self) -> Iterator[Metric]:
        info = gauge("helios_exporter_build_info")
        info.add_metric([self._version, self._python_version], 1.0)
        yield info
