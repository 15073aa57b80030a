"""Constructed evidence.json documents for `compare` (shaped as GET /experiment/phases serves)."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

BOUNDS = (0.3, 0.325, 0.35, 0.375, 0.4, 0.425, 0.45, 0.5, 1.0, math.inf)
IDENTITY = {"image_digest": "sha256:" + "a" * 64, "package": "helios-2.14.0+47581cca",
            "checkpoint": "qwen3-next-w4a16-r3", "container_id": "4be1c0ffee12"}
GEOMETRY = {"row": {"capacity": 512, "free": 0, "record_bytes": 16777216},
            "page": {"capacity": 24576, "free": 20000, "record_bytes": 1048576}}


def latency(values: Sequence[float]) -> dict[str, Any]:
    buckets = [["+Inf" if b == math.inf else repr(b), float(sum(v <= b for v in values))]
               for b in BOUNDS]
    return {"count": float(len(values)), "sum": float(sum(values)), "buckets": buckets}


def phase(name: str, values: Sequence[float], *, valid: bool = True, generation: str = "g-1",
          identity: dict[str, str] | None = None, slabs: dict[str, Any] | None = None,
          state: str = "ended", recorded: bool = True, sent: int | None = None,
          failed: int = 0, sequence: str | None = None) -> dict[str, Any]:
    """A phase as the sidecar serves it, with the probe's record of its pass (`recorded`):
    `sent` requests (default: as many as finished), `failed` of them, and the bytes and order
    sent (`sequence`, default: the lane's)."""
    begin = {"at": 1.0, "generation": generation, "identity": identity or IDENTITY,
             "budget_bytes": 34359738368, "slabs": slabs or GEOMETRY}
    return {"name": name, "state": state, "valid": valid if state == "ended" else None,
            "invalid_reasons": [] if valid else ["generation changed from g-1 to g-2: the engine "
                                                 "restarted during the phase"],
            "generation": generation, "begin": begin, "end": {**begin, "at": 2.0},
            "deltas": {"requests": float(len(values)), "e2e_latency_seconds": latency(values)},
            "_pass": None if not recorded else {
                "phase": name, "order": "forward",
                "sent": len(values) if sent is None else sent, "failed": failed,
                "sequence_sha256": hashlib.sha256(
                    (sequence or name.split("/", maxsplit=1)[0]).encode()).hexdigest(),
                "failures": [{"status": 500, "output": "boom"}] * failed}}


def lane(name: str, means: Sequence[float], n: int = 52, **kwargs: Any) -> list[dict[str, Any]]:
    """Repetitions LANE/1.. whose requests all take the given mean (one per repetition), plus the
    prime LANE/forward-1, which compare must ignore."""
    out = [phase(f"{name}/forward-1", [0.9] * n, **kwargs)]
    out += [phase(f"{name}/{i}", [m] * n, **kwargs) for i, m in enumerate(means, 1)]
    return out


def evidence(*phase_lists: list[dict[str, Any]]) -> dict[str, Any]:
    phases = [dict(p) for ps in phase_lists for p in ps]
    passes = [recorded for p in phases if (recorded := p.pop("_pass")) is not None]
    return {"format": 1, "phases": phases, "probes": [], "passes": passes}


def write(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(json.dumps(doc))
    return path
