"""The evidence document: phases with their deltas, probe verdicts, and the probe's passes.

`build()` is pure (phases as GET /experiment/phases serves them); lab/evidence/document.py writes
evidence.json, evidence.md and evidence.png into a directory (the picture only where matplotlib is
installed) as lab/evidence/report.py's EVIDENCE says.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

from lab.evidence.arithmetic import (
    INVALID,
    accounting,
    gap,
    lookups_before,
    mean_latency,
    per_request,
    verdict,
)

FORMAT_VERSION = 1
SIMULATOR = "helios-simulator"  # the simulated engine's system_fingerprint (simulator/app.py)
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


ORDER_IN_NAME = re.compile(r"(?:^|/)(forward|reverse)-[0-9]+$")


def order_of(name: str, passes: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The order a phase's traffic was sent in: the probe's record, else the probe's naming
    (`NAME/<order>-<n>`); None when unknown (a phase bracketed by hand)."""
    recorded = (passes.get(name) or {}).get("order")
    if recorded:
        return str(recorded)
    match = ORDER_IN_NAME.search(name)
    return match.group(1) if match else None


def _no_data(role: str, name: str, phase: Mapping[str, Any],
             recorded: Mapping[str, Any] | None) -> list[str]:
    """Why a phase measured nothing a verdict could rest on (empty: it measured something)."""
    d = phase.get("deltas") or {}
    out = []
    lookups, requests = d.get("lookups"), d.get("requests")
    if lookups is None:
        out.append(f"the engine reported no lookup counters in the {role} phase {name!r}")
    elif lookups == 0 or requests == 0:
        out.append(f"the {role} phase {name!r} saw {_count(lookups)} lookups and "
                   f"{_count(requests)} finished requests at the engine: nothing was measured")
    if recorded and recorded.get("failed"):
        out.append(f"{recorded['failed']} of {recorded['sent']} requests of the {role} pass "
                   f"{name!r} failed (their outputs are in probe.json)")
    return out


def _count(value: float | None) -> str:
    return "no" if value is None else f"{value:g}"


def reading(verdict: str, prime_order: str | None, replay_order: str | None) -> str:
    """One plain sentence on what a verdict says about order (evidence.md, the picture)."""
    if verdict == "order_sensitive":
        return (f"the {replay_order} replay hit what the {prime_order} prime stored: supports "
                "order sensitivity")
    if verdict == "reuse":
        if prime_order and replay_order:
            return (f"same order ({prime_order} -> {replay_order}): the replay reused what the "
                    "prime stored; not evidence of order sensitivity")
        return ("the replay reused what the prime stored; the orders are not known, so it is "
                "not evidence of order sensitivity")
    if verdict == "incompatible_keys":
        return "no hits; the prefixes were found under another key: the keys differ"
    if verdict == "no_reuse":
        return "no hits and no key mismatch: nothing the prime stored was reused"
    return "cannot be judged"


def foreign_traffic(role: str, name: str, phase: Mapping[str, Any],
                    recorded: Mapping[str, Any] | None) -> list[str]:
    """Where the engine counted other requests in a recorded pass than the probe sent: every
    lookup and every finished request of the phase must be one the probe sent (empty: so)."""
    if not recorded:
        return []
    d = phase.get("deltas") or {}
    sent = recorded.get("sent")
    out = []
    for what, value in (("finished", d.get("requests")), ("looked up", d.get("lookups"))):
        if value is not None and sent is not None and value != sent:
            where = f"the {role} phase {name!r}" if role else name
            out.append(f"the engine {what} {value:g} requests in {where}, the probe sent "
                       f"{sent}: another client's traffic reached the engine during the pass")
            break
    return out


def _links(phases: Mapping[str, Mapping[str, Any]], passes: Mapping[str, Mapping[str, Any]],
           prime: str, replay: str) -> list[tuple[str, str]]:
    """The consecutive pairs of passes from the prime to the replay as the probe's record ran
    them (each pass names the one before it); the pair itself where the record does not say."""
    links: list[tuple[str, str]] = []
    current = replay
    while current != prime and len(links) < 64:
        previous = (passes.get(current) or {}).get("previous")
        if not isinstance(previous, str) or previous not in phases:
            return [(prime, replay)]
        links.append((previous, current))
        current = previous
    return links[::-1] if current == prime else [(prime, replay)]


def judge(phases: Mapping[str, Mapping[str, Any]], prime: str, replay: str,
          passes: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """A probe pair's verdict, or `invalid` with the reason when it cannot be judged: a phase
    missing, open or invalid, the two on different generations, a phase that measured nothing
    (0 lookups or 0 requests), a pass with failed requests, counters that contradict each other,
    a prime that did not begin on a fresh incarnation, or traffic the probe did not send (in a
    pass: the engine finished or looked up other than the probe sent; between the passes: the
    end capture of one and the begin capture of the next differ). `passes`: the probe's passes
    by phase name, where recorded."""
    passes = passes or {}
    out: dict[str, Any] = {"prime": prime, "replay": replay}

    def invalid(why: str) -> dict[str, Any]:
        return {**out, "verdict": INVALID, "reading": f"cannot be judged: {why}", "why": why}

    for role, name in (("prime", prime), ("replay", replay)):
        phase = phases.get(name)
        if phase is None:
            return invalid(f"{role} phase {name!r} not found")
        if phase.get("state") != "ended":
            return invalid(f"{role} phase {name!r} has not ended")
        if not phase.get("valid"):
            reasons = "; ".join(phase.get("invalid_reasons") or ["invalid"])
            return invalid(f"{role} phase {name!r}: {reasons}")
    if phases[prime]["generation"] != phases[replay]["generation"]:
        return invalid("prime and replay ran on different generations: the replay cannot reuse "
                       "what the prime stored")
    problems = [why for role, name in (("prime", prime), ("replay", replay))
                for why in _no_data(role, name, phases[name], passes.get(name))]
    links = _links(phases, passes, prime, replay)
    between = [name for _, name in links[:-1]]  # the probe's own passes between the two
    for role, name in (("prime", prime), *(("pass", n) for n in between), ("replay", replay)):
        problems += [f"the {role} phase {name!r}: {why}" for why in accounting(phases[name])]
        problems += foreign_traffic(role, name, phases[name], passes.get(name))
    before = lookups_before(phases[prime])
    if before is None:
        problems.append(f"the prime {prime!r} has no lookup counters at its begin: whether it "
                        "began on a fresh incarnation is unknown")
    elif before:
        problems.append(f"the prime {prime!r} began on an incarnation that had served "
                        f"{before:g} lookups already: the prime needs a fresh incarnation")
    problems += [why for a, b in links if (why := gap(phases[a], phases[b])) is not None]
    if problems:
        return invalid("; ".join(problems))
    orders = [order_of(prime, passes), order_of(replay, passes)]
    found = verdict(phases[replay]["deltas"], *orders)
    return {**out, "verdict": found, "orders": orders, "reading": reading(found, *orders)}


def headline(probe: Mapping[str, Any], limit: int = 90) -> str:
    """A probe pair's verdict in a few words, as a picture's title shows it."""
    found = probe["verdict"]
    if found == INVALID:
        why = str(probe.get("why", ""))
        return "invalid: " + (why if len(why) <= limit else why[:limit - 3] + "...")
    prime_order, replay_order = (probe.get("orders") or [None, None])[:2]
    if found == "order_sensitive":
        return f"order_sensitive: the {replay_order} replay hit"
    if found == "reuse":
        return ("reuse (same order): not order sensitivity" if prime_order and replay_order
                else "reuse: not order sensitivity")
    return str(found)


def is_simulated(passes: Sequence[Mapping[str, Any]],
                 phases: Sequence[Mapping[str, Any]] = ()) -> bool:
    """Whether any pass was answered by the simulated engine (its system_fingerprint), or any
    phase captured it (the snapshot's identity.engine, v3)."""
    return any(str(p.get("engine") or "").startswith(SIMULATOR) for p in passes) or any(
        str(((p.get(edge) or {}).get("identity") or {}).get("engine") or "").startswith(SIMULATOR)
        for p in phases for edge in ("begin", "end"))


def build(phases: Sequence[Mapping[str, Any]], pairs: Sequence[tuple[str, str]] = (),
          passes: Sequence[Mapping[str, Any]] = (), source: str = "",
          simulated: bool = False) -> dict[str, Any]:
    """The evidence document. `passes` (the probe's, from its records) are kept for the phases
    the document holds; `simulated`: the phases ran on the simulated engine (also known from
    the passes' answers). `accounting` names, by phase, counters that contradict each other."""
    by_name = {p["name"]: p for p in phases}
    kept = [p for p in passes if p["phase"] in by_name]
    by_phase = {p["phase"]: p for p in kept}
    return {
        "format": FORMAT_VERSION,
        "generated_at": time.time(),
        "sidecar": source,
        "simulated": simulated or is_simulated(kept, phases),
        "phases": list(phases),
        "accounting": {p["name"]: why for p in phases if (why := accounting(p))},
        "probes": [judge(by_name, prime, replay, by_phase) for prime, replay in pairs],
        "passes": kept,
    }


def figures(phase: Mapping[str, Any]) -> dict[str, Any]:
    """The per-phase figures the report and the picture show (None where unknown)."""
    d = phase.get("deltas") or {}
    begin, end = phase.get("begin") or {}, phase.get("end") or {}
    requests = d.get("requests")

    def ratio(capture: Mapping[str, Any], kind: str) -> float | None:
        slab = (capture.get("slabs") or {}).get(kind)
        return slab["free"] / slab["capacity"] if slab and slab.get("capacity") else None

    latency = d.get("e2e_latency_seconds")
    blocked = d.get("blocked_tokens")
    return {
        "requests": requests,
        "lookups": d.get("lookups"),
        "hits": d.get("hits"),
        "misses": {k: v for k, v in (d.get("misses") or {}).items() if v},
        "misses_raw": d.get("misses_raw") or {},
        "tokens_reused_per_request": per_request(d.get("prompt_tokens_reused"), requests),
        "stores_per_request": per_request(d.get("host_stores"), requests),
        # (v3) None where the engine does not report them (schema 1) or no request finished
        "stores_dropped_full": d.get("stores_dropped_full"),
        "stores_dropped_ineligible": d.get("stores_dropped_ineligible"),
        "stores_failed": d.get("stores_failed"),
        "blocked_tokens_per_request": None if blocked is None or not requests else {
            reason: n / requests for reason, n in blocked.items() if n},
        "host_tokens_restored": d.get("host_tokens_restored"),
        "row_pressure_attempts": d.get("row_pressure_attempts"),
        "row_pressure_with_page_headroom": d.get("row_pressure_with_page_headroom"),
        "page_pressure_attempts": d.get("page_pressure_attempts"),
        "page_free_begin": ratio(begin, "page"),
        "page_free_end": ratio(end, "page"),
        "mean_latency_seconds": mean_latency(latency),
    }
