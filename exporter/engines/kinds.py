"""Which engine an exposition comes from, by the vendor prefix of its families."""

from __future__ import annotations

from exporter.engines.exposition import Exposition


def found(exp: Exposition) -> str:
    """The vendor whose families the exposition holds most of (exporter.labels.ENGINE_KIND_FOUND);
    `unknown` when it holds none."""
    if not exp.vendors:
        return "unknown"
    return max(sorted(exp.vendors), key=lambda v: exp.vendors[v])
