"""evidence.md: the evidence document as a report people can read (pure: a string), and the
report (EVIDENCE) that lab/evidence/document.py writes: evidence.json, evidence.png and evidence.md."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from lab.evidence.doc import JSON_FILE, MD_FILE, PICTURE_FILE, PLOT_MISSING, figures
from lab.evidence.document import Picture, Report

SIMULATED = ("**SIMULATED.** These phases ran on the simulated engine (`helios-exporter "
             "simulate`), not on Helios: the figures exercise the tools and show what the report "
             "looks like; they are not measurements of any engine.")
READING = {
    "order_sensitive": "the replay, sent in another order than the prime (forward, then "
                       "reverse), hit what the prime stored: this supports retained-suffix / "
                       "order sensitivity.",
    "reuse": "the replay hit what the prime stored, in the prime's own order (or an order not "
             "known): reuse, which says nothing about order sensitivity.",
    "incompatible_keys": "no hits, but the prefixes were found under another checkpoint key "
                         "(`key_mismatch` / `no_checkpoint`): the replay's model or checkpoint "
                         "differs from the prime's. Inspect the keys and the checkpoint.",
    "no_reuse": "no hits and no key mismatch: nothing the prime stored was reused. `evicted` "
                "misses with row pressure while pages had headroom mean the rows thrash (the "
                "budget split, not the keys); `no_prefix` alone means nothing was stored for "
                "these prefixes. Zero replay hits weaken the order explanation and call for key "
                "and checkpoint lookup inspection.",
    "not_evaluated": "the engine (an SGLang or vLLM engine read through its /metrics) does not "
                     "export an input this verdict needs; the reading names it. Not a pass.",
    "invalid": "the pair cannot be judged and its figures prove nothing: a phase is missing, "
               "open or invalid, the two ran on different engine generations, a phase measured "
               "nothing (0 lookups or 0 requests: the requests never reached the engine), "
               "requests of a pass failed, counters contradict each other, the prime did not "
               "begin on a fresh incarnation, or the engine counted traffic the probe did not "
               "send (in a pass or between the passes). The table says which.",
}


def _n(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "-"
    if digits == 0 and float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.{digits or 2}f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f} s"


def _when(at: float | None) -> str:
    if at is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at))


def _engines(phases: Sequence[Mapping[str, Any]]) -> list[str]:
    rows, seen = [], set()
    for p in phases:
        begin = p.get("begin") or {}
        key = begin.get("generation")
        if key in seen:
            continue
        seen.add(key)
        ident = begin.get("identity") or {}
        slabs = begin.get("slabs") or {}
        geometry = ", ".join(f"{kind} {s.get('capacity', '?'):,} x {s.get('record_bytes', 0):,} B"
                             for kind, s in sorted(slabs.items()))
        rows.append(f"| `{key}` | {ident.get('image_digest', '-')[:19]} | "
                    f"{ident.get('package', '-')} | {ident.get('checkpoint', '-')} | "
                    f"{_n(begin.get('budget_bytes'))} B: {geometry or '-'} |")
    return rows


def _misses(f: Mapping[str, Any]) -> str:
    misses = f["misses"]
    if not misses:
        return "0" if f["lookups"] is not None else "-"
    return ", ".join(f"{n:,} {reason}" for reason, n in sorted(misses.items(), key=lambda x: -x[1]))


def _drops(f: Mapping[str, Any]) -> str:
    counts = [f[k] for k in ("stores_dropped_full", "stores_dropped_ineligible", "stores_failed")]
    return "-" if all(n is None for n in counts) else " / ".join(_n(n) for n in counts)


def _blocked(f: Mapping[str, Any]) -> str:
    blocked = f["blocked_tokens_per_request"]
    if blocked is None:
        return "-"
    if not blocked:
        return "0"
    return ", ".join(f"{n:,.0f} {reason}" for reason, n in sorted(blocked.items(),
                                                                   key=lambda x: -x[1]))


def markdown(doc: Mapping[str, Any], picture: str | None, picture_missing: str | None) -> str:
    phases = doc.get("phases") or []
    simulated = bool(doc.get("simulated"))
    lines = ["# Experiment evidence" + (" (SIMULATED)" if simulated else ""), ""]
    if simulated:
        lines += [SIMULATED, ""]
    lines += [f"Written {_when(doc.get('generated_at'))} by `helios-exporter` from the sidecar "
              f"{doc.get('sidecar') or '(unknown)'}: {len(phases)} phases. Every figure is a "
              "difference between two captures the sidecar took at the phase's edges (a fresh "
              "poll of the engine's snapshot and `/metrics` at each), so traffic outside the "
              "phase is not in it.", ""]
    if picture:
        lines += [f"![per-phase lookups, reuse, row pressure and latency]({picture})", ""]
    elif picture_missing:
        lines += [f"*{picture_missing}*", ""]
    probes = doc.get("probes") or []
    if probes:
        lines += ["## Verdicts", "", "| prime | replay | verdict | what it says |",
                  "| --- | --- | --- | --- |"]
        for pr in probes:
            said = pr.get("reading") or (f"cannot be judged: {pr.get('why', '')}"
                                         if pr["verdict"] == "invalid" else "")
            lines.append(f"| `{pr['prime']}` | `{pr['replay']}` | **{pr['verdict']}** | "
                         f"{said} |")
        lines += ["", "How to read them:", ""]
        shown = dict.fromkeys(pr["verdict"] for pr in probes)
        lines += [f"- **{v}**: {READING[v]}" for v in shown if v in READING]
        lines.append("")
    lines += ["## Phases", "",
              "| phase | valid | requests | lookups | hits | misses by reason | blocked tokens / "
              "request | tokens reused / request | stores / request | stores dropped full / "
              "ineligible / failed | host tokens restored | row-pressure attempts | of them with "
              "page headroom | page free, begin -> end | mean latency |",
              "| --- " * 15 + "|"]
    for p in phases:
        f = figures(p)
        valid = {True: "yes", False: "**no**", None: "open"}[p.get("valid")]
        lines.append(
            f"| `{p['name']}` | {valid} | {_n(f['requests'])} | {_n(f['lookups'])} | "
            f"{_n(f['hits'])} | {_misses(f)} | {_blocked(f)} | "
            f"{_n(f['tokens_reused_per_request'], 1)} | {_n(f['stores_per_request'], 1)} | "
            f"{_drops(f)} | {_n(f['host_tokens_restored'])} | "
            f"{_n(f['row_pressure_attempts'])} | {_n(f['row_pressure_with_page_headroom'])} | "
            f"{_pct(f['page_free_begin'])} -> {_pct(f['page_free_end'])} | "
            f"{_seconds(f['mean_latency_seconds'])} |")
    lines.append("")
    invalid = [p for p in phases if p.get("valid") is False]
    if invalid:
        lines += ["Invalid phases (their deltas are shown but prove nothing):", ""]
        lines += [f"- `{p['name']}`: {'; '.join(p.get('invalid_reasons') or [])}" for p in invalid]
        lines.append("")
    contradicted = doc.get("accounting") or {}
    if contradicted:
        lines += ["Phases whose counters contradict each other (no verdict or comparison uses "
                  "them):", ""]
        lines += [f"- `{name}`: {'; '.join(why)}" for name, why in contradicted.items()]
        lines.append("")
    raw = {p["name"]: figures(p)["misses_raw"] for p in phases}
    keyed = {n: {k: v for k, v in m.items() if ":" in k} for n, m in raw.items()}
    if any(keyed.values()):
        lines += ["Miss keys as the engine reported them (the part after `:` names the other "
                  "key):", ""]
        lines += [f"- `{n}`: " + ", ".join(f"`{k}` {v:,}" for k, v in m.items())
                  for n, m in keyed.items() if m]
        lines.append("")
    lines += ["Per request: divided by the requests the engine finished in the phase (its "
              "end-to-end latency histogram's count). Blocked tokens: the prompt tokens a missed "
              "lookup left to be computed (less those found on the GPU), by miss reason. Stores "
              "dropped: checkpoint stores the engine chose to make but did not (no record could "
              "be freed; never storable; a host copy that failed). `-`: the engine does not "
              "report it (snapshot schema 1). Row pressure with page headroom: "
              "row-pressure eviction attempts made while at least 25% of the page slab was free "
              "at both ends of the poll interval they fell in. Mean latency: the engine's "
              "histogram (sum over count), as the engine measured it.", ""]
    engines = _engines(phases)
    if engines:
        lines += ["## Engines", "", "| generation | image | package | checkpoint | budget and "
                  "slabs |", "| --- | --- | --- | --- | --- |", *engines, ""]
    passes = doc.get("passes") or []
    if passes:
        lines += _passes(passes)
    return "\n".join(lines)


def _passes(passes: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = ["## Probe passes", "",
             "As the probe's record says; nothing was sent between the passes of one "
             "incarnation. The SHA-256 of every body in the order sent, and every request's "
             "output hash and token count, are in evidence.json (`passes`) and the probe's "
             "`probe.json`; every answer is in its `outputs.jsonl`. `sequence_sha256` hashes "
             "the body hashes in the order sent: two passes with equal hashes sent the same "
             "bytes in the same order. A pass with failed requests voids its verdict and, for "
             "`compare`, its repetition.", "",
             "| phase | corpus | order | incarnation | sent | failed | output tokens | client "
             "mean | sequence_sha256 |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for p in passes:
        lines.append(f"| `{p['phase']}` | `{p['corpus']}` | {p['order']} | "
                     f"`{p.get('generation') or '-'}` | {p['sent']:,} | {p['failed']:,} | "
                     f"{_n(p.get('completion_tokens'))} | "
                     f"{_seconds(p.get('client_mean_seconds'))} | "
                     f"`{p['sequence_sha256'][:16]}...` |")
    lines.append("")
    failures = [(p["phase"], f) for p in passes for f in p.get("failures", ())]
    if failures:
        lines += ["Failed requests (every output is kept in `probe.json`):", ""]
        for phase, f in failures[:50]:
            output = " ".join(str(f.get("output", "")).split())[:160]
            lines.append(f"- `{phase}` #{f['position']} (body {f['sha256'][:12]}): "
                         f"{f.get('status') or f.get('error')}: {output}")
        if len(failures) > 50:
            lines.append(f"- ... and {len(failures) - 50} more in `probe.json`")
        lines.append("")
    return lines


def _picture() -> Picture:
    from lab.evidence.plot import picture  # matplotlib: the plot extra

    return picture


EVIDENCE = Report(JSON_FILE, PICTURE_FILE, MD_FILE, markdown, _picture, PLOT_MISSING,
                  sort_keys=True)
