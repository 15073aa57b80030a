"""Probe verdicts on an engine the sidecar reads through its `/metrics` (`serve --engine-kind
sglang|vllm`, docs/engines.md): what each verdict rests on, and `not_evaluated`, naming the
input, where the engine does not export it. Never a verdict that was not checked.

A probe pair's verdict (lab/evidence/doc.py `judge`) rests on:

- **reuse**: the replay's lookup hits. An engine that counts no lookup hits (SGLang, vLLM) shows
  reuse as host tokens restored (`host.tokens_restored`), read in their place: tokens restored
  from the host tier in the replay are what the prime stored there.
- **why nothing was reused**: with neither hits nor restored tokens, the lookup miss reasons
  tell `incompatible_keys` from `no_reuse`; without them, not evaluated.
- **one incarnation**: the prime began on a fresh one and the replay ran on the same. The
  generation must carry restart identity: a snapshot's, a process start time, or the counters'
  `_created` samples. A generation known only from counter resets (SGLang's multiprocess
  registry exports neither) cannot tell a restart the sidecar did not see: not evaluated.

What the probe cannot check on such an engine, beside the verdict, is said once per report
(`checks`): the snapshot's identity (image, package, checkpoint) that the probe stops on when
it changes, and the eviction causes behind the row-pressure-with-page-headroom figure.
Pure functions of the phases as GET /experiment/phases serves them and the sidecar's /status.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from lab.evidence.arithmetic import INVALID
from lab.probe.passes import IDENTITY_KEYS

NOT_EVALUATED: Final = "not_evaluated"
KINDS: Final = ("sglang", "vllm")
# Where a generation carries restart identity (exporter.labels.IDENTITY_EVIDENCE).
RESTART_IDENTITY: Final = ("process_start_time", "counter_created")

LOOKUP_HITS = "lookup hits (helios_offload_lookup_hits_total)"
HOST_RESTORED = "host tokens restored (helios_offload_host_tokens_restored_total)"
MISS_REASONS = "lookup miss reasons (helios_offload_lookup_misses_total{reason})"
GENERATION = ("a generation with restart identity (the engine exports neither a process start "
              "time nor counter _created samples: its generation is known from counter resets "
              "only)")
IDENTITY = "the engine's identity (the Helios snapshot's image, package and checkpoint)"
EVICTIONS = "eviction causes (helios_offload_eviction_attempts_total{pressure})"


def engine_of(status: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The engine kind and generation evidence from the sidecar's /status; None for Helios (or
    a sidecar that does not say)."""
    kind = ((status or {}).get("engine_kind") or {})
    if kind.get("kind") not in KINDS:
        return None
    return {"kind": kind["kind"], "mapping": kind.get("mapping"),
            "generation_from": kind.get("generation_from")}


def _capture(phase: Mapping[str, Any], edge: str) -> Mapping[str, Any]:
    return phase.get(edge) or {}


def checks(phases: Mapping[str, Mapping[str, Any]], engine: Mapping[str, Any] | None
           ) -> list[dict[str, str]]:
    """What the probe could not check on this engine, with the input it lacks."""
    if engine is None:
        return []
    out = []
    captures = [_capture(p, edge) for p in phases.values() for edge in ("begin", "end")]
    if captures and not any((c.get("identity") or {}).get(k) for c in captures
                            for k in IDENTITY_KEYS):
        out.append({"check": "identity held through the probe", "missing": IDENTITY})
    if captures and not any(key.startswith("evictions.") for c in captures
                            for key in (c.get("counters") or {})):
        out.append({"check": "row pressure with page headroom", "missing": EVICTIONS})
    if engine.get("generation_from") not in RESTART_IDENTITY:
        out.append({"check": "one fresh incarnation per prime", "missing": GENERATION})
    return out


def judge(pair: Mapping[str, Any], phases: Mapping[str, Mapping[str, Any]],
          engine: Mapping[str, Any] | None) -> dict[str, Any]:
    """`pair` (lab/evidence/doc.py `judge`'s answer) as it stands on this engine: unchanged for
    Helios and where the pair is invalid; else the verdict its inputs support, or
    not_evaluated naming what is missing."""
    if engine is None or pair["verdict"] == INVALID:
        return dict(pair)
    deltas = (phases[pair["replay"]].get("deltas") or {})
    orders = pair.get("orders") or [None, None]
    missing: list[str] = []
    if engine.get("generation_from") not in RESTART_IDENTITY:
        missing.append(GENERATION)
    hits, restored = deltas.get("hits"), deltas.get("host_tokens_restored")
    found, basis = pair["verdict"], LOOKUP_HITS
    if hits is None:
        basis = HOST_RESTORED
        if restored is None:
            missing.append(f"{LOOKUP_HITS} or {HOST_RESTORED}")
        elif restored > 0:
            found = "order_sensitive" if orders[0] and orders[1] and orders[0] != orders[1] \
                else "reuse"
    if not (hits or restored) and not deltas.get("misses"):
        missing.append(MISS_REASONS)
    out = {**pair, "engine": engine["kind"], "reuse_from": basis,
           "host_tokens_restored": restored}
    if missing:
        why = "; ".join(missing)
        shown = "" if restored is None else f" (the replay restored {restored:g} host tokens)"
        return {**out, "verdict": NOT_EVALUATED, "missing": missing,
                "reading": f"not evaluated: {engine['kind']} does not export {why}{shown}"}
    reading = str(pair.get("reading", ""))
    if basis == HOST_RESTORED:
        reading = (f"the replay restored {restored:g} tokens from the host tier, read in place "
                   f"of lookup hits: {found}")
    return {**out, "verdict": found, "reading": reading}


def apply(doc: dict[str, Any], engine: Mapping[str, Any] | None) -> dict[str, Any]:
    """The evidence document (lab/evidence/doc.py `build`) as it stands on this engine: its pairs
    judged by `judge`, and `engine` saying the kind and what the probe could not check."""
    if engine is None:
        return doc
    by_name = {p["name"]: p for p in doc["phases"]}
    return {**doc, "probes": [judge(p, by_name, engine) for p in doc["probes"]],
            "engine": {**engine, "not_checked": checks(by_name, engine)}}
