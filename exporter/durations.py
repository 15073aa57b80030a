"""Prometheus durations ("90s", "1h30m", "500ms"), the one parser of the repository.

The grammar is Prometheus's own (`model.ParseDuration` of prometheus/common, which rule files,
Alertmanager timers and PromQL range selectors use): whole numbers, units in the order
y, w, d, h, m, s, ms, each at most once, or a lone "0". alerts/config.yaml, the dashboards, the
tests and the benchmarks read durations through `seconds`. (The web configuration's
`rate_limit.interval` is a Go duration, a different grammar: exporter/web/webconfig.py.)
"""

from __future__ import annotations

import re

_GRAMMAR = re.compile(
    r"(?:(\d+)y)?(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?(?:(\d+)ms)?")
_UNITS = (365 * 86400, 7 * 86400, 86400, 3600, 60, 1, 0.001)


def seconds(text: str) -> float:
    """The length of `text` in seconds; ValueError when it is not a Prometheus duration."""
    if text == "0":
        return 0.0
    match = _GRAMMAR.fullmatch(text) if isinstance(text, str) and text else None
    if match is None:
        raise ValueError(f"not a Prometheus duration: {text!r}")
    total = 0
    millis = 0
    for group, unit in zip(match.groups(), _UNITS, strict=True):
        if group is None:
            continue
        if unit < 1:
            millis = int(group)
        else:
            total += int(group) * int(unit)
    return total + millis / 1000
