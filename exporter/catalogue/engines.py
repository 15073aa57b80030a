"""Families of the engines collector: what the sidecar reads an engine of another kind as
(`serve --engine-kind`, exporter/engines/), and which catalogue signals it supplies."""

from __future__ import annotations

from exporter.catalogue.model import Family, Promise, Rows
from exporter.labels import (
    COVERAGE_SOURCES,
    ENGINE_KIND_FOUND,
    ENGINE_KINDS,
    ENGINE_SIGNALS,
    KIND_DECIDED,
)

KIND = Promise("4.2", 3)
C = "engines"

FAMILIES: Rows = (
    Family("helios_engine_kind_info", "gauge", ("kind", "decided", "mapping"), "",
           help="The engine kind the sidecar reads (--engine-kind, or what auto decided) and "
           "the mapping of its version (docs/engines.md); always 1. Absent with the default "
           "--engine-kind helios.", collector=C, promised=KIND,
           values={"kind": ENGINE_KINDS, "decided": KIND_DECIDED},
           labels_doc=f"kind={'|'.join(ENGINE_KINDS)}, decided={'|'.join(KIND_DECIDED)}, "
           "mapping (`sglang-0.5.23`, `vllm-0.33.0`; empty for helios)",
           source="always 1, once the kind is known: `--engine-kind`, or what `auto` decided "
           "from the engine's `/metrics`"),
    Family("helios_engine_signal_coverage", "gauge", ("signal", "source"), "",
           help="One series per catalogue signal of a mapped engine (sglang, vllm), always 1: "
           "source says whether the engine supplies it now, native, derived (computed from its "
           "families) or absent (its catalogue family is absent from /metrics, never 0).",
           collector=C, promised=KIND, values={"source": COVERAGE_SOURCES},
           labels_doc=f"signal ({len(ENGINE_SIGNALS)} of them, docs/engines.md), "
           f"source={'|'.join(COVERAGE_SOURCES)}",
           source="the engine's mapping (docs/engines.md) at its latest answer: a mapped family "
           "the engine stopped exporting reads absent"),
    Family("helios_engine_kind_mismatch", "gauge", ("kind", "found"), "",
           help="1 while the engine's /metrics holds the families of another engine than "
           "--engine-kind names (found: helios, sglang, vllm, or unknown: none); its polls fail "
           "meanwhile (a schema error, no restore window).", collector=C, promised=KIND,
           values={"kind": ENGINE_KINDS, "found": ENGINE_KIND_FOUND},
           source="1 while `--engine-kind` does not fit the engine's `/metrics`; absent otherwise"),
)
