"""Which lanes an arm's evidence holds, and what kind of load each is (for the lanes gate).

A lane is named by its phases: `LANE/r` (repetition r's measured pass) and `LANE/r/<pass>` (the
passes before it on the same incarnation). Every lane present in either arm is gated: the command
line names the primary lane and may name protected ones, and every other lane is protected too,
so leaving a lane off the command line cannot hide it.

The allocator plan asks an allocator change to protect a small working set and a page-heavy
long context (docs/experiments.md, where the rules come from).
Both are read from the baseline's measured passes, against the primary lane's:

- small working set: at most half as many distinct bodies as the primary lane, each no longer
  (prompt tokens per request) than the primary lane's;
- page-heavy long context: prompts at least LONG_CONTEXT_FACTOR times as long as the primary
  lane's (a request's pages grow with its prompt).

Both are read from what the evidence cross-checks (the probe's body hashes, the engine's prompt
token and request counts), never from a field nothing checks.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

LANE_PHASE: Final = re.compile(r"(.+)/([0-9]+)(?:/[^/]+)?")
SMALL_BODIES_SHARE: Final = 0.5
LONG_CONTEXT_FACTOR: Final = 4.0
SMALL, LONG = "small working set", "page-heavy long context"


def lane_of(phase_name: str) -> str | None:
    match = LANE_PHASE.fullmatch(phase_name)
    return match.group(1) if match else None


def names(doc: Mapping[str, Any]) -> list[str]:
    """The lanes of an arm, in the order their first phase appears."""
    found = (lane_of(str(p.get("name"))) for p in doc.get("phases") or [])
    return list(dict.fromkeys(n for n in found if n is not None))


def outside(doc: Mapping[str, Any]) -> list[str]:
    """Phases that belong to no lane (a probe's own pair, a phase bracketed by hand)."""
    return [str(p.get("name")) for p in doc.get("phases") or []
            if lane_of(str(p.get("name"))) is None]


def _measured(doc: Mapping[str, Any], lane: str) -> list[tuple[Mapping[str, Any], Mapping[str, Any]]]:
    """(phase, pass) of each measured repetition of `lane`."""
    passes = {p.get("phase"): p for p in doc.get("passes") or []}
    pattern = re.compile(re.escape(lane) + r"/[0-9]+")
    return [(p, passes.get(p.get("name")) or {}) for p in doc.get("phases") or []
            if pattern.fullmatch(str(p.get("name")))]


def profile(doc: Mapping[str, Any], lane: str) -> dict[str, float | None]:
    """bodies (distinct, most of any repetition) and prompt tokens per request (most of any
    repetition) of the measured passes; None where the evidence does not say."""
    bodies, prompt = [], []
    for phase, recorded in _measured(doc, lane):
        hashes = recorded.get("body_sha256")
        bodies.append(len(set(hashes)) if isinstance(hashes, list) else None)
        d = phase.get("deltas") or {}
        tokens, requests = d.get("prompt_tokens"), d.get("requests")
        prompt.append(tokens / requests if tokens is not None and requests else None)

    def most(values: list[Any]) -> float | None:
        return None if not values or None in values else float(max(values))

    return {"bodies": most(bodies), "prompt_per_request": most(prompt)}


def kinds(doc: Mapping[str, Any], primary: str, lane: str) -> tuple[list[str], list[str]]:
    """(the kinds `lane` is, what is unknown) against the primary lane, in one arm."""
    mine, theirs = profile(doc, lane), profile(doc, primary)
    bodies, prompt = mine["bodies"], mine["prompt_per_request"]
    their_bodies, their_prompt = theirs["bodies"], theirs["prompt_per_request"]
    if bodies is None or prompt is None or their_bodies is None or their_prompt is None:
        return [], [f"{lane} or {primary}: bodies or prompt tokens per request"]
    out = []
    if bodies <= SMALL_BODIES_SHARE * their_bodies and prompt <= their_prompt:
        out.append(SMALL)
    if prompt >= LONG_CONTEXT_FACTOR * their_prompt:
        out.append(LONG)
    return out, []
