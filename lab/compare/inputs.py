"""The fields of evidence.json each gate of `compare` reads: declared once, here.

`GATE_INPUTS` is the one home of what every gate depends on. `compare` uses it to print a gate
whose required inputs are missing or null as `not evaluated`, naming them (so a gate never holds
on nothing); docs/experiments.md's table of inputs is generated from it (scripts/generate); the
property test walks every field it names and deletes, nulls and perturbs each in either arm.
`IRRELEVANT` names every other field an evidence file carries, with the reason no gate needs it.

A path is a tuple of steps: a key, `[]` (every element of a list) or `*` (every key of an
object). `required` inputs must be present and not null wherever the gate reads them;
the others (`*` keys, fields the gate judges itself) are read where present.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from exporter.labels import MISS_REASONS
from exporter.phases.deltas import COUNTERS

Path = tuple[str, ...]
EDGES: Final = ("begin", "end")


@dataclass(frozen=True)
class Input:
    path: Path
    required: bool = True


def text(path: Path) -> str:
    """`phases[].begin.counters."lookups.total"`: a key holding a dot is quoted."""
    out = ""
    for step in path:
        shown = f'"{step}"' if "." in step else step
        out += "[]" if step == "[]" else (f".{shown}" if out else shown)
    return out


def _edges(*steps: str, required: bool = True) -> tuple[Input, ...]:
    return tuple(Input(("phases", "[]", edge, *steps), required) for edge in EDGES)


def _counters(*keys: str, required: bool = True) -> tuple[Input, ...]:
    return tuple(i for key in keys for i in _edges("counters", key, required=required))


# The capture counters the deltas are derived from (exporter/phases/deltas.py): the others a
# snapshot carries (evictions by outcome, stored bytes, ...) are shown in the report only.
DELTA_COUNTERS: Final = (*COUNTERS.values(), *(f"lookups.misses.{r}" for r in MISS_REASONS),
                         *(f"lookups.blocked_tokens.{r}" for r in MISS_REASONS))


PASS = ("passes", "[]")
PHASE = ("phases", "[]")
# scopes: which phases (and their passes) a gate reads
LANES, MEASURED, BASELINE_PRIMARY = "every phase of every lane", "measured passes", \
    "the baseline's primary lane"
DECLARED_DIMS: Final = ("runtime", "quantization", "speculation", "recipe", "power_limit",
                        "source_commit", "source_diff")

GATE_INPUTS: Final[dict[str, tuple[str, tuple[Input, ...]]]] = {
    # The phase summaries are derived from these (lab/compare/rederive.py): a stored
    # summary that disagrees refuses; an edge without them gives null deltas.
    "captures": (LANES, (
        Input((*PHASE, "name")), Input((*PHASE, "state")), Input((*PHASE, "valid")),
        *_edges("at"), *_edges("generation"), *_counters(*DELTA_COUNTERS, required=False),
        *_edges("e2e_latency_seconds", "count"), *_edges("e2e_latency_seconds", "sum"),
        *_edges("misses_raw", "*", required=False))),
    "identity": (LANES, (
        *(i for key in ("image_digest", "package", "checkpoint")
          for i in _edges("identity", key, required=False)),
        *_edges("ranks", required=False), *_edges("budget_bytes", required=False),
        *_edges("slabs", "*", "capacity", required=False),
        *_edges("slabs", "*", "record_bytes", required=False),
        *_edges("power_limits_watts", required=False),
        *(Input((*PASS, "declared", dim), required=False) for dim in DECLARED_DIMS))),
    "repetitions": (LANES, (
        *_counters("lookups.total"), *_edges("requests"),
        Input((*PASS, "phase")), Input((*PASS, "sent")), Input((*PASS, "failed")),
        Input((*PASS, "sequence_sha256")), Input((*PASS, "body_sha256")),
        Input((*PASS, "failures")))),
    "lanes": (MEASURED, (
        *_edges("prompt_tokens", required=False), Input((*PASS, "body_sha256"), required=False))),
    "accounting": (LANES, (
        *_counters("lookups.total", "lookups.hits", "host.prompt_tokens_reused",
                   "host.tokens_restored"),
        *_edges("requests"), *_edges("prompt_tokens"), *_edges("generation_tokens"),
        *_edges("inflight"), Input((*PASS, "completion_tokens")))),
    "strict output": (LANES, (
        Input((*PASS, "outputs")),
        *(Input((*PASS, "outputs", "[]", key)) for key in
          ("sha256", "output_sha256", "completion_tokens", "expected_tokens")),
        Input((*PASS, "outputs", "[]", "prompt_tokens"), required=False))),
    "counter evidence": (BASELINE_PRIMARY, (
        *_counters("evictions.row.attempts"), *_edges("row_pressure_with_page_headroom_total"))),
    "primary": (MEASURED, (*_edges("e2e_latency_seconds", "count"),
                           *_edges("e2e_latency_seconds", "sum"))),
    "protected": (MEASURED, (*_edges("e2e_latency_seconds", "count"),
                             *_edges("e2e_latency_seconds", "sum"))),
}
SEMANTIC_INPUTS: Final = ("--semantic-command CMD (its exit status) or --semantic-verdict FILE "
                          "(semantic_gate, baseline_sha256, candidate_sha256)")

_SHOWN = "shown in the report, gates nothing"
IRRELEVANT: Final[dict[str, str]] = {
    "format": "the file's version, checked by the schema",
    "generated_at": "when the file was written",
    "sidecar": "where the phases were read",
    "simulated": "a flag that can add the SIMULATED label, never remove it: the label comes "
                 "from the captured identity (identity.engine) and the probe's answers",
    "probes": "the probe's verdicts, which compare does not read",
    "accounting": "the evidence command's list, derived again by compare",
    "phases[].notes": _SHOWN,
    "phases[].begin.e2e_latency_seconds.buckets": "p50 and p95 are estimated from them, shown, "
                                                  "never gating (the bucket deltas stored must "
                                                  "agree with them)",
    "phases[].end.e2e_latency_seconds.buckets": "as at the begin",
    "passes[].prompt_tokens": "a stored sum of outputs[].prompt_tokens: cross-checked where "
                              "present; the lanes gate reads the engine's prompt tokens",
    "phases[].generation": "a stored summary: the captures' generations are read (one that "
                           "disagrees with its begin capture refuses)",
    "phases[].invalid_reasons": "shown; validity is derived from the captures",
    "phases[].deltas": "a stored summary: derived again from the captures (one that disagrees "
                       "refuses, one that is absent is derived)",
    "phases[].begin.identity.container_id": "arms and repetitions may run in other containers; "
                                           "an incarnation is its generation",
    "phases[].end.identity.container_id": "as at the begin",
    "phases[].begin.identity.engine": "adds the SIMULATED label (never removes it)",
    "phases[].end.identity.engine": "adds the SIMULATED label (never removes it)",
    "phases[].begin.pins": "the sidecar's --expect-* results; the identity gate reads the "
                           "identity itself",
    "phases[].end.pins": "as at the begin",
    "phases[].begin.counters.*": "every other counter of the snapshot (evictions by outcome, "
                                 "stored bytes, restore transfers, ...): shown in the evidence "
                                 "report; the counters the deltas come from are read (above)",
    "phases[].end.counters.*": "as at the begin",
    "phases[].begin.slabs.*.free": "shown; page headroom is the sidecar's counter "
                                   "(row_pressure_with_page_headroom_total)",
    "phases[].end.slabs.*.free": "as at the begin",
    "passes[].order": "shown; the order that counts is the bodies' (sequence_sha256)",
    "passes[].corpus": _SHOWN,
    "passes[].client_mean_seconds": "the client's clock; the gate reads the engine's histogram",
    "passes[].begin_error": _SHOWN, "passes[].end_error": _SHOWN,
    "passes[].record": "where the probe's record was; the semantic check reads it",
    "passes[].engine": "adds the SIMULATED label (never removes it)",
    "passes[].generation": "the phases' captures carry the generation",
    "passes[].repetition": "the repetition is the number in the phase's name",
    "passes[].repetitions": "the probe's plan: cross-checked where present, the count itself is "
                            "read from the phases",
    "passes[].previous": "cross-checked where present; the chain is read from the phases' begin "
                         "times",
}


def inputs(gate: str) -> tuple[Input, ...]:
    return GATE_INPUTS[gate][1]


def values(doc: Any, path: Path, where: str = "") -> Iterator[tuple[str, bool, Any]]:
    """(where, present, value) of every place `path` reaches in `doc`; a missing key is one
    place, not present. `[]` and `*` go through every element and key there is."""
    if not path:
        yield where, True, doc
        return
    step, rest = path[0], path[1:]
    if step == "[]":
        for i, item in enumerate(doc if isinstance(doc, list) else []):
            yield from values(item, rest, f"{where}[{i}]")
    elif step == "*":
        for key, item in (doc.items() if isinstance(doc, Mapping) else ()):
            yield from values(item, rest, f"{where}.{key}")
    elif isinstance(doc, Mapping) and step in doc:
        yield from values(doc[step], rest, f"{where}.{step}" if where else step)
    elif isinstance(doc, Mapping) or doc is None:
        yield (f"{where}.{step}" if where else step), False, None


def missing(docs: Sequence[tuple[str, Mapping[str, Any]]], gate: str) -> list[str]:
    """The required inputs of `gate` that are missing or null, by arm and phase (`docs`: each
    arm's phases and passes in the gate's scope)."""
    out = []
    for label, doc in docs:
        for spec in inputs(gate):
            if not spec.required:
                continue
            for item in doc.get(spec.path[0]) or []:
                name = item.get("name") if spec.path[0] == "phases" else item.get("phase")
                for where, present, value in values(item, spec.path[2:]):
                    if not present or value is None:
                        out.append(f"{label} {name}: {where or spec.path[0]} "
                                   f"{'null' if present else 'missing'}")
    return out


def _shown(path: Path) -> str:
    """A path as the table shows it: a begin capture's field stands for both edges."""
    if path[2:3] == ("begin",):
        return f"`{text(path).replace('.begin.', '.{begin,end}.', 1)}`"
    return f"`{text(path)}`"


def table() -> str:
    """docs/experiments.md's table of the gates' inputs (scripts/generate gate-inputs)."""
    rows = ["| gate | reads, in | required (missing or null: `not evaluated`) | other inputs "
            "(the gate's own rule says what their absence means) |",
            "| --- | --- | --- | --- |"]
    for gate, (scope, specs) in GATE_INPUTS.items():
        name = ("captures (the re-derivation: a required field missing or null cannot "
                "compare, exit 2)" if gate == "captures" else gate)
        cells = [", ".join(_shown(s.path) for s in specs
                           if s.required == want and s.path[2:3] != ("end",)) or "-"
                 for want in (True, False)]
        rows.append(f"| {name} | {scope} | {cells[0]} | {cells[1]} |")
    rows.append(f"| semantic | the command line | {SEMANTIC_INPUTS} | - |")
    rows += ["", "Not read by any gate, and why:", ""]
    rows += [f"- `{field}`: {reason}" for field, reason in IRRELEVANT.items()]
    return "\n".join(rows) + "\n"
