"""What the sidecar knows of the engine's kind, for the engines collector and /status."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from exporter.labels import COVERAGE_SOURCES


@dataclass(frozen=True, slots=True)
class KindState:
    configured: str  # --engine-kind: exporter.labels.ENGINE_KIND_CHOICES
    kind: str | None = None  # what the sidecar reads the engine as; None while auto decides
    mapping: str | None = None  # `sglang-0.5.23`; None for helios
    # Every signal of the mapping: how the engine supplies it at its latest answer (empty until
    # its first answer was translated).
    coverage: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    evidence: str | None = None  # how the generation is derived (exporter.labels.IDENTITY_EVIDENCE)
    mismatch: str | None = None  # the kind the engine's /metrics shows, when it is not `kind`
    message: str = ""  # what the mismatch means, in words

    @property
    def decided(self) -> str:
        """`auto` when the sidecar decided the kind, `configured` when --engine-kind named it."""
        return "auto" if self.configured == "auto" else "configured"

    def as_status(self) -> dict[str, Any]:
        counts = {source: sum(1 for v in self.coverage.values() if v == source)
                  for source in COVERAGE_SOURCES}
        return {
            "configured": self.configured,
            "kind": self.kind,
            "decided": self.decided if self.kind is not None else None,
            "mapping": self.mapping,
            "generation_from": self.evidence,
            "coverage": counts if self.coverage else None,
            "absent": sorted(s for s, v in self.coverage.items() if v == "absent"),
            "mismatch": None if self.mismatch is None else {"found": self.mismatch,
                                                            "message": self.message},
            # What needs the engine's snapshot is not known for these engines: never passing.
            "unknown": [] if self.kind in (None, "helios") else [
                "drain", "admission", "post-restore identity checks"],
        }
