"""Re-derive an evidence document's summaries from its raw captures, never trusting them.

evidence.json holds, for each phase, the two phase-edge captures (`begin`, `end`) and what the
sidecar derived from them (`deltas`, `valid`, `generation`); for each probe pass, the per-request
records (`body_sha256`, `outputs`, `failures`) and their sums (`sent`, `failed`,
`sequence_sha256`, `completion_tokens`, `prompt_tokens`). `rederive` computes every summary again
from the raw part (exporter.phases.deltas, the sidecar's own arithmetic) and returns a copy
whose summaries are the derived ones, with a refusal naming each stored summary that disagrees
(a hand-edited latency, a negative latency sum, `valid: true` on a phase whose captures show a
restart or a counter going backwards). A summary that is absent is derived, not refused.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from typing import Any

from exporter.phases.capture import Capture, from_json
from exporter.phases.deltas import deltas, problems

Refusals = list[str]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _shown(value: Any) -> str:
    text = "null" if value is None else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _differs(stored: Mapping[str, Any], derived: Mapping[str, Any], where: str,
             source: str = "its captures") -> Refusals:
    """A refusal per field present in `stored` whose value is not the derived one."""
    out = []
    for key, value in derived.items():
        if key not in stored:
            continue
        if key == "e2e_latency_seconds" and isinstance(stored[key], Mapping) and value:
            out += _differs(stored[key], value, f"{where}.{key}", source)
        elif not _same(stored[key], value):
            out.append(f"{where}.{key} is {_shown(stored[key])} in the file, {source} give "
                       f"{_shown(value)} (a stored summary that disagrees with what it sums)")
    return out


def _histogram_problems(begin: Capture, end: Capture) -> list[str]:
    """What the sidecar's own check (deltas.problems) does not look at: the histogram's sum and
    buckets going backwards within one generation."""
    if begin.latency is None or end.latency is None:
        return []
    out = []
    if end.latency.sum < begin.latency.sum:
        out.append("engine e2e latency sum decreased within one generation")
    before = dict(begin.latency.buckets)
    if any(n < before.get(le, 0.0) for le, n in end.latency.buckets):
        out.append("engine e2e latency buckets decreased within one generation")
    return out


def _phase(phase: dict[str, Any], label: str) -> Refusals:
    """Derive one phase's deltas and validity in place; refusals for stored ones that differ."""
    name = str(phase.get("name"))
    where = f"{label} phase {name}"
    if phase.get("state") != "ended":
        return []
    if phase.get("begin") is None or phase.get("end") is None:
        return [f"{where}: ended without its {'begin' if phase.get('begin') is None else 'end'} "
                "capture: its deltas cannot be derived"]
    try:
        begin = from_json(phase["begin"], "begin")
        end = from_json(phase["end"], "end")
    except ValueError as exc:
        return [f"{where}: {exc}"]
    derived = deltas(begin, end)
    stored = phase.get("deltas")
    out = _differs(stored, derived, f"{where}: deltas") if isinstance(stored, Mapping) else []
    phase["deltas"] = derived
    if phase.get("generation") not in (None, begin.generation):
        out.append(f"{where}: generation is {_shown(phase.get('generation'))} in the file, its "
                   f"begin capture's is {begin.generation!r}")
    phase["generation"] = begin.generation
    found = problems(begin, end) + _histogram_problems(begin, end)
    if found and phase.get("valid") is True:
        out.append(f"{where}: valid is true in the file, but its captures say: {'; '.join(found)}")
    if found or phase.get("valid") is not True:
        phase["valid"] = False
        phase["invalid_reasons"] = list(dict.fromkeys(
            [*(phase.get("invalid_reasons") or []), *found])) or ["invalid in the file"]
    return out


def _total(outputs: list[Any], key: str) -> int | None:
    values = [o.get(key) if isinstance(o, Mapping) else None for o in outputs]
    known = [v for v in values if isinstance(v, int)]
    return None if not values or len(known) != len(values) else sum(known)


def _pass(p: Mapping[str, Any], label: str) -> Refusals:
    """The probe's sums against its per-request records."""
    where = f"{label} pass {p.get('phase')}"
    derived: dict[str, Any] = {}
    bodies, outputs = p.get("body_sha256"), p.get("outputs")
    if isinstance(bodies, list):
        derived["sent"] = len(bodies)
        derived["sequence_sha256"] = hashlib.sha256("".join(map(str, bodies)).encode()).hexdigest()
    failures = p.get("failures")
    if isinstance(failures, list):
        derived["failed"] = len(failures)
    records = "its per-request records"
    out = _differs(p, derived, where, records)
    if isinstance(outputs, list):
        out += _differs(p, {"completion_tokens": _total(outputs, "completion_tokens"),
                            "prompt_tokens": _total(outputs, "prompt_tokens")}, where, records)
        if len(outputs) != p.get("sent"):
            out.append(f"{where}: {len(outputs)} outputs recorded for {p.get('sent')} requests "
                       "sent")
        elif isinstance(bodies, list) and len(bodies) == len(outputs):
            wrong = [i for i, (o, b) in enumerate(zip(outputs, bodies, strict=True))
                     if not isinstance(o, Mapping) or o.get("sha256") != b]
            if wrong:
                out.append(f"{where}: outputs[{wrong[0]}].sha256 is not body_sha256[{wrong[0]}] "
                           f"({len(wrong)} outputs out of the order sent)")
    return out


def rederive(doc: Mapping[str, Any], label: str) -> tuple[dict[str, Any], Refusals]:
    """A copy of `doc` whose phase summaries are derived from its captures, and a refusal for
    every stored summary that disagrees with its raw records (naming the field)."""
    out = dict(doc)  # the phases are copied one level down: _phase replaces, never edits, a value
    out["phases"] = [dict(p) if isinstance(p, Mapping) else p for p in doc.get("phases") or []]
    refusals: Refusals = []
    for phase in out["phases"]:
        refusals += _phase(phase, label)
    for p in out.get("passes") or []:
        refusals += _pass(p, label)
    return out, refusals
