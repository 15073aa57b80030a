"""An engine's whole `/metrics` text, read once for the mapping of its kind.

Only what the mapping and the identity need is kept: the samples of the families a mapping
reads (by their name in the colon form, `sglang:x`; an engine that writes `sglang_x` is read the
same), the earliest `_created` sample of the engine's own counters, prometheus_client's
`process_start_time_seconds`, and which vendors' families the text holds (to decide or check the
kind). Lines of other families cost a dictionary lookup. Never raises on bad text: a malformed
line is counted.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Final

from exporter.sources.engine_metrics import parse_labels, sample_value

VENDORS: Final = ("sglang", "vllm", "helios")
START_TIME: Final = "process_start_time_seconds"

Series = tuple[dict[str, str], float]


@dataclass(slots=True)
class Exposition:
    samples: dict[str, list[Series]] = field(default_factory=dict)  # wanted sample name -> series
    vendors: Counter[str] = field(default_factory=Counter)  # sample lines per vendor prefix
    names: set[str] = field(default_factory=set)  # every vendor sample name seen (colon form)
    start_time: float | None = None  # process_start_time_seconds
    created_min: float | None = None  # the earliest `<vendor>:*_created` sample
    malformed: int = 0

    def has(self, name: str) -> bool:
        """The sample name (colon form) was in the text, with any series."""
        return name in self.names


def colon_form(name: str) -> tuple[str | None, str]:
    """(vendor, the name in the colon form) of a sample name; vendor None when it has none."""
    for vendor in VENDORS:
        if name.startswith(vendor) and len(name) > len(vendor) and name[len(vendor)] in ":_":
            return vendor, f"{vendor}:{name[len(vendor) + 1:]}"
    return None, name


def parse(text: str, wanted: Collection[str]) -> Exposition:
    """The exposition's samples of `wanted` (sample names in the colon form), and the rest of
    what the mapping needs."""
    out = Exposition()
    for line in text.splitlines():  # the sample-name rule of engine_metrics.parse, inlined in both
        if not line or line[0] == "#":  # (a call per line would cost the poll cycle)
            continue
        brace = line.find("{")
        space = line.find(" ")
        end = brace if brace != -1 and (space == -1 or brace < space) else space
        if end <= 0:
            out.malformed += 1
            continue
        vendor, name = colon_form(line[:end])
        if vendor is None:
            if name != START_TIME:
                continue
        else:
            out.vendors[vendor] += 1
            out.names.add(name)
            if name not in wanted and not name.endswith("_created"):
                continue
        labels: dict[str, str] = {}
        rest = line[end:]
        if end == brace:
            close = line.rfind("}")
            parsed = parse_labels(line[brace + 1:close]) if close > brace else None
            if parsed is None:
                out.malformed += 1
                continue
            labels, rest = dict(parsed), line[close + 1:]
        value = sample_value(rest)
        if value is None or math.isnan(value):
            out.malformed += 1
            continue
        if vendor is None:
            out.start_time = value
        elif name.endswith("_created") and name not in wanted:
            if math.isfinite(value) and value > 0:
                out.created_min = value if out.created_min is None else min(out.created_min,
                                                                               value)
        else:
            out.samples.setdefault(name, []).append((labels, value))
    return out
