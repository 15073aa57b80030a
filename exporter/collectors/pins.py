"""The engine against its configured pins (exporter/cycle/pins.py), one series per configured pin while
its inputs are known, e.g. with `--expect-ranks 2 --expect-package helios-2.14.0+47581cca`:

    # TYPE helios_engine_pin_ok gauge
    helios_engine_pin_ok{pin="package"} 1.0
    helios_engine_pin_ok{pin="ranks"} 0.0
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import Metric

from exporter.collectors.families import gauge
from exporter.cycle.pins import PinCheck


class PinCollector:
    def __init__(self, checks: Callable[[], tuple[PinCheck, ...]]) -> None:
        self._checks = checks

    def collect(self) -> Iterator[Metric]:
        known = [c for c in self._checks() if c.ok is not None]
        if not known:
            return
        m = gauge("helios_engine_pin_ok")
        for check in known:
            m.add_metric([check.pin], 1.0 if check.ok else 0.0)
        yield m
