"""A generation for an engine that states none, from what its exposition shows, in this order:

1. `process_start_time_seconds` (prometheus_client's process collector, where the engine's
   registry has it): the incarnation's start;
2. the earliest `_created` sample of the engine's own counters: prometheus_client stamps each
   series when it is created, the first ones at start, and a series never goes away within a
   process, so the earliest stays put until the engine restarts;
3. neither (a multiprocess registry exports no `_created`): a counter reset, one of the mapped
   counters lower than at the poll before, starts a new generation, named after the time the
   sidecar first saw it. A sidecar restarted meanwhile cannot tell a restart it did not see.

`started_at` is the start time (1) or the earliest creation (2), None for (3). Pure.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from exporter.engines.exposition import Exposition


@dataclass(frozen=True, slots=True)
class Identity:
    generation: str
    started_at: float | None
    evidence: str  # exporter.labels.IDENTITY_EVIDENCE
    # The counters watched for a reset, as last seen.
    counters: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))


def _name(*material: object) -> str:
    return "d-" + hashlib.sha256(json.dumps(material).encode()).hexdigest()[:16]


def advance(prev: Identity | None, kind: str, exp: Exposition, counters: Mapping[str, float],
            now: float) -> Identity:
    """The identity after one poll; `counters`: the cumulative values of this poll's mapped
    counters, by signal."""
    frozen = MappingProxyType(dict(counters))
    if exp.start_time is not None:
        start = round(exp.start_time, 3)
        return Identity(_name(kind, "process_start_time", start), exp.start_time,
                        "process_start_time", frozen)
    if exp.created_min is not None:
        start = round(exp.created_min, 3)
        return Identity(_name(kind, "counter_created", start), exp.created_min,
                        "counter_created", frozen)
    reset = prev is not None and any(
        value < prev.counters[name] for name, value in counters.items() if name in prev.counters)
    if prev is None or prev.evidence != "counter_reset" or reset:
        return Identity(_name(kind, "counter_reset", round(now, 3)), None, "counter_reset", frozen)
    return Identity(prev.generation, None, "counter_reset", frozen)
