"""The evidence document: phases with their deltas, probe verdicts, and the probe's passes.

`build()` is pure (phases as GET /experiment/phases serves them); `write()` puts evidence.json,
evidence.md and evidence.png into a directory (the picture only where matplotlib is installed).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from exporter.experiment.deltas import INVALID, mean_latency, per_request, verdict

FORMAT_VERSION = 1
JSON_FILE = "evidence.json"
MD_FILE = "evidence.md"
PICTURE_FILE = "evidence.png"
PLOT_MISSING = ("no picture: matplotlib is not installed; install the plot extra "
                "(pip install 'helios-exporter[plot]', which scripts/bootstrap does) and run "
                "`helios-exporter evidence` again")


def parse_pair(text: str) -> tuple[str, str]:
    """`PRIME:REPLAY` (phase names never contain a colon)."""
    prime, sep, replay = text.partition(":")
    if not sep or not prime or not replay or ":" in replay:
        raise ValueError(f"expected PRIME:REPLAY (two phase names), got {text!r}")
    return prime, replay


def judge(phases: Mapping[str, Mapping[str, Any]], prime: str, replay: str) -> dict[str, Any]:
    """A probe pair's verdict, or `invalid` with the reason when it cannot be judged."""
    out: dict[str, Any] = {"prime": prime, "replay": replay}
    for role, name in (("prime", prime), ("replay", replay)):
        phase = phases.get(name)
        if phase is None:
            return {**out, "verdict": INVALID, "why": f"{role} phase {name!r} not found"}
        if phase.get("state") != "ended":
            return {**out, "verdict": INVALID, "why": f"{role} phase {name!r} has not ended"}
        if not phase.get("valid"):
            reasons = "; ".join(phase.get("invalid_reasons") or ["invalid"])
            return {**out, "verdict": INVALID, "why": f"{role} phase {name!r}: {reasons}"}
    if phases[prime]["generation"] != phases[replay]["generation"]:
        return {**out, "verdict": INVALID,
                "why": "prime and replay ran on different generations: the replay cannot reuse "
                       "what the prime stored"}
    return {**out, "verdict": verdict(phases[replay]["deltas"])}


def build(phases: Sequence[Mapping[str, Any]], pairs: Sequence[tuple[str, str]] = (),
          passes: Sequence[Mapping[str, Any]] = (), source: str = "") -> dict[str, Any]:
    by_name = {p["name"]: p for p in phases}
    return {
        "format": FORMAT_VERSION,
        "generated_at": time.time(),
        "sidecar": source,
        "phases": list(phases),
        "probes": [judge(by_name, prime, replay) for prime, replay in pairs],
        "passes": list(passes),
    }


def write(doc: Mapping[str, Any], out: Path) -> tuple[list[Path], str | None]:
    """Write the evidence files; the paths written and why there is no picture (None: there is)."""
    from exporter.experiment.report import markdown

    out.mkdir(parents=True, exist_ok=True)
    written = []
    path = out / JSON_FILE
    path.write_text(json.dumps(doc, indent=1, sort_keys=True, allow_nan=False) + "\n")
    written.append(path)
    picture_missing = None
    try:
        from exporter.experiment.plot import picture
    except ImportError:
        picture_missing = PLOT_MISSING
    else:
        path = out / PICTURE_FILE
        picture(doc, path)
        written.append(path)
    path = out / MD_FILE
    path.write_text(markdown(doc, None if picture_missing else PICTURE_FILE, picture_missing))
    written.append(path)
    return written, picture_missing


def figures(phase: Mapping[str, Any]) -> dict[str, Any]:
    """The per-phase figures the report and the picture show (None where unknown)."""
    d = phase.get("deltas") or {}
    begin, end = phase.get("begin") or {}, phase.get("end") or {}
    requests = d.get("requests")

    def ratio(capture: Mapping[str, Any], kind: str) -> float | None:
        slab = (capture.get("slabs") or {}).get(kind)
        return slab["free"] / slab["capacity"] if slab and slab.get("capacity") else None

    latency = d.get("e2e_latency_seconds")
    return {
        "requests": requests,
        "lookups": d.get("lookups"),
        "hits": d.get("hits"),
        "misses": {k: v for k, v in (d.get("misses") or {}).items() if v},
        "misses_raw": d.get("misses_raw") or {},
        "tokens_reused_per_request": per_request(d.get("prompt_tokens_reused"), requests),
        "stores_per_request": per_request(d.get("host_stores"), requests),
        "host_tokens_restored": d.get("host_tokens_restored"),
        "row_pressure_attempts": d.get("row_pressure_attempts"),
        "row_pressure_with_page_headroom": d.get("row_pressure_with_page_headroom"),
        "page_pressure_attempts": d.get("page_pressure_attempts"),
        "page_free_begin": ratio(begin, "page"),
        "page_free_end": ratio(end, "page"),
        "mean_latency_seconds": mean_latency(latency),
    }
