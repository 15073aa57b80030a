"""Constructed evidence.json documents for `compare`, shaped as `probe` and `evidence` write them.

An arm's lane is R repetitions; repetition r ran on its own fresh engine incarnation: a prime
pass `LANE/r/forward-1` (begun at zero lookups), then the measured pass `LANE/r`, nothing in
between. Captures carry cumulative counters; deltas are their differences. The probe's record of
each pass (`passes`) says what was sent, what failed, and every request's output hash and token
count. Tests then edit a document (`phase_of`, `pass_of`) to make the case they need.
"""

from __future__ import annotations

import copy
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
WIDER = {"row": {"capacity": 640, "free": 0, "record_bytes": 16777216},
         "page": {"capacity": 22528, "free": 18000, "record_bytes": 1048576}}
BUDGET = 34359738368
DECLARED = {"runtime": "helios-2.14.0+47581cca", "quantization": "w4a16", "speculation": "off",
            "recipe": "tp2-c1", "power_limit": "300W"}
TOKENS = 32  # output tokens per request, fixed by the corpus
PROMPT = 3100
GPU_PREFIX = 9  # prompt tokens per request found on the GPU
LONG = [0.350, 0.349, 0.354]
LONG_PROMPT = 49216  # prompt tokens per request of the long-context lane (16 bodies)
REASONS = ("no_prefix", "key_mismatch", "no_checkpoint", "not_durable", "evicted", "too_short",
           "other")


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def histogram(values: Sequence[float]) -> dict[str, Any]:
    buckets = [["+Inf" if b == math.inf else repr(b), float(sum(v <= b for v in values))]
               for b in BOUNDS]
    return {"count": float(len(values)), "sum": float(sum(values)), "buckets": buckets}


def _v3(c: dict[str, Any], prompt: int = PROMPT) -> dict[str, int]:
    """The counters a schema 3 snapshot adds (as the sidecar keys them: every blocked-token
    reason zero-filled): each missed lookup (`evicted`) blocks its prompt less the GPU prefix."""
    misses = c["lookups"] - c["hits"]
    return {"host.store_outcomes.stored": c["stored"],
            "host.store_outcomes.dropped_full": c["dropped_full"],
            "host.store_outcomes.dropped_ineligible": c["dropped_ineligible"],
            "host.store_outcomes.failed": c["failed"],
            **{f"lookups.blocked_tokens.{r}": 0 for r in REASONS},
            "lookups.blocked_tokens.evicted": misses * (prompt - GPU_PREFIX),
            "prompt_tokens.computed": c["prompt"] - c["reused"],
            "prompt_tokens.gpu_prefix": c["reused"] - c["restored"],
            "prompt_tokens.host_restored": c["restored"]}


def _capture(at: float, generation: str, c: dict[str, Any], identity: dict[str, str],
             slabs: dict[str, Any], budget: int, v3: bool = False,
             prompt: int = PROMPT) -> dict[str, Any]:
    return {"at": at, "generation": generation, "identity": dict(identity),
            "budget_bytes": budget, "slabs": copy.deepcopy(slabs), "ranks": 2, "inflight": 0,
            "counters": {"lookups.total": c["lookups"], "lookups.hits": c["hits"],
                         **{f"lookups.misses.{r}": 0 for r in REASONS},
                         "lookups.misses.evicted": c["lookups"] - c["hits"],
                         "host.stores": c.get("stored", 0), "retired_leaves.row": c["row"],
                         "ancestor_row_compactions": 0,
                         "host.prompt_tokens_reused": c["reused"],
                         "host.tokens_restored": c["restored"],
                         "evictions.row.attempts": c["row"], "evictions.page.attempts": 0,
                         **(_v3(c, prompt) if v3 else {})},
            "misses_raw": {}, "row_pressure_with_page_headroom_total": c["headroom"],
            "requests": float(c["requests"]), "prompt_tokens": float(c["prompt"]),
            "generation_tokens": float(c["generated"]),
            "e2e_latency_seconds": histogram(c["latencies"])}


def _deltas(b: dict[str, Any], e: dict[str, Any]) -> dict[str, Any]:
    def d(key: str) -> Any:
        return e["counters"][key] - b["counters"][key]

    def known(key: str) -> Any:
        return d(key) if key in e["counters"] else None

    hb, he = b["e2e_latency_seconds"], e["e2e_latency_seconds"]
    blocked = {r: d(f"lookups.blocked_tokens.{r}") for r in REASONS
               if f"lookups.blocked_tokens.{r}" in e["counters"]}
    return {"lookups": d("lookups.total"), "hits": d("lookups.hits"),
            "misses": {r: d(f"lookups.misses.{r}") for r in REASONS}, "misses_raw": {},
            "prompt_tokens_reused": d("host.prompt_tokens_reused"),
            "host_tokens_restored": d("host.tokens_restored"), "host_stores": d("host.stores"),
            "row_pressure_attempts": d("evictions.row.attempts"),
            "row_pressure_with_page_headroom": (e["row_pressure_with_page_headroom_total"]
                                                - b["row_pressure_with_page_headroom_total"]),
            "page_pressure_attempts": d("evictions.page.attempts"),
            "retired_leaves_row": d("retired_leaves.row"),
            "ancestor_row_compactions": d("ancestor_row_compactions"),
            "stores_dropped_full": known("host.store_outcomes.dropped_full"),
            "stores_dropped_ineligible": known("host.store_outcomes.dropped_ineligible"),
            "stores_failed": known("host.store_outcomes.failed"),
            "blocked_tokens": blocked or None,
            "prompt_tokens_computed": known("prompt_tokens.computed"),
            "prompt_tokens_gpu_prefix": known("prompt_tokens.gpu_prefix"),
            "prompt_tokens_host_restored": known("prompt_tokens.host_restored"),
            "requests": e["requests"] - b["requests"],
            "prompt_tokens": e["prompt_tokens"] - b["prompt_tokens"],
            "generation_tokens": e["generation_tokens"] - b["generation_tokens"],
            "e2e_latency_seconds": {
                "count": he["count"] - hb["count"], "sum": he["sum"] - hb["sum"],
                "buckets": [[le, n - m] for (le, n), (_, m) in
                            zip(he["buckets"], hb["buckets"], strict=True)]},
            "seconds": e["at"] - b["at"]}


def phase_json(name: str, begin: dict[str, Any], end: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "state": "ended", "valid": True, "invalid_reasons": [],
            "generation": begin["generation"], "notes": {"begin": None, "end": None},
            "begin": begin, "end": end, "deltas": _deltas(begin, end)}


class Arm:
    """One arm's evidence, lane by lane."""

    def __init__(self, label: str = "base", identity: dict[str, str] | None = None,
                 slabs: dict[str, Any] | None = None, budget: int = BUDGET,
                 declared: dict[str, str] | None = None, v3: bool = False) -> None:
        self.label = label
        self.v3 = v3  # the engine's snapshot is schema 3 (store outcomes, blocked tokens)
        self.identity = identity or IDENTITY
        self.slabs = slabs or GEOMETRY
        self.budget = budget
        self.declared = DECLARED if declared is None else declared
        self.phases: list[dict[str, Any]] = []
        self.passes: list[dict[str, Any]] = []
        self.at = 1000.0

    def _pass(self, name: str, lane: str, r: int, of: int, previous: str | None, n: int,
              tokens: int, prompt: int = PROMPT) -> dict[str, Any]:
        bodies = [sha(f"{lane}/{i}") for i in range(n)]
        outputs = [{"sha256": body, "output_sha256": sha(f"out/{lane}/{i}"),
                    "completion_tokens": tokens, "expected_tokens": TOKENS,
                    "prompt_tokens": prompt} for i, body in enumerate(bodies)]
        return {"phase": name, "order": "forward", "corpus": f"{lane}.jsonl", "repetition": r,
                "repetitions": of, "previous": previous, "sent": n, "failed": 0,
                "sequence_sha256": sha("".join(bodies)), "body_sha256": bodies,
                "client_mean_seconds": 0.3, "failures": [], "begin_error": None,
                "end_error": None, "outputs": outputs, "completion_tokens": n * tokens,
                "prompt_tokens": n * prompt, "declared": dict(self.declared), "engine": None,
                "record": f"{self.label}/{lane}/probe.json"}

    def lane(self, name: str, means: Sequence[float], n: int = 52, prime: float = 0.45,
             hits: int = 0, row_pressure: int = 624, tokens: int = TOKENS,
             drops: tuple[int, int, int] = (0, 0, 0), prompt: int = PROMPT) -> Arm:
        """`drops`: stores dropped full, dropped ineligible and failed in each pass (v3);
        `prompt`: prompt tokens per request."""
        full, ineligible, failed = drops
        for r, mean in enumerate(means, 1):
            generation = f"g-{self.label}-{name}-{r}"
            counts: dict[str, Any] = {"lookups": 0, "hits": 0, "reused": 0, "restored": 0,
                                      "row": 0, "headroom": 0, "requests": 0, "prompt": 0,
                                      "generated": 0, "latencies": [], "stored": 0,
                                      "dropped_full": 0, "dropped_ineligible": 0, "failed": 0}
            previous = None
            for phase, values, phase_hits in ((f"{name}/{r}/forward-1", [prime] * n, 0),
                                              (f"{name}/{r}", [mean] * n, hits)):
                begin = _capture(self.at, generation, counts, self.identity, self.slabs,
                                 self.budget, self.v3, prompt)
                counts = {**counts, "lookups": counts["lookups"] + n,
                          "hits": counts["hits"] + phase_hits,
                          "stored": counts["stored"] + n - full - ineligible - failed,
                          "dropped_full": counts["dropped_full"] + full,
                          "dropped_ineligible": counts["dropped_ineligible"] + ineligible,
                          "failed": counts["failed"] + failed,
                          "reused": counts["reused"] + n * GPU_PREFIX + phase_hits * 2000,
                          "restored": counts["restored"] + phase_hits * 2000,
                          "row": counts["row"] + row_pressure,
                          "headroom": counts["headroom"] + row_pressure,
                          "requests": counts["requests"] + n,
                          "prompt": counts["prompt"] + n * prompt,
                          "generated": counts["generated"] + n * tokens,
                          "latencies": [*counts["latencies"], *values]}
                self.at += 30
                end = _capture(self.at, generation, counts, self.identity, self.slabs,
                               self.budget, self.v3, prompt)
                self.phases.append(phase_json(phase, begin, end))
                self.passes.append(self._pass(phase, name, r, len(means), previous, n, tokens,
                                              prompt))
                previous = phase
            self.at += 60
        return self

    def long(self, means: Sequence[float] | None = None) -> Arm:
        """The page-heavy long-context lane (16 bodies, prompts 16 times as long)."""
        return self.lane("long-context", LONG if means is None else means, n=16, row_pressure=0,
                         prompt=LONG_PROMPT)

    def doc(self) -> dict[str, Any]:
        return {"format": 1, "simulated": False, "phases": copy.deepcopy(self.phases),
                "probes": [], "passes": copy.deepcopy(self.passes)}


def lanes(arm: Arm, primary: Sequence[float], small: Sequence[float],
          long: Sequence[float] = LONG) -> Arm:
    """The allocator plan's three lanes: probe-52 (primary, row pressure), small-12 (a small working set)
    and long-context (page-heavy: prompts 16 times as long)."""
    return (arm.lane("probe-52", primary).lane("small-12", small, n=12, row_pressure=0)
            .lane("long-context", long, n=16, row_pressure=0, prompt=LONG_PROMPT))


def long_context(doc: dict[str, Any]) -> list[str]:
    """`--protected long-context` where the arm has that lane."""
    has = any(p["name"].startswith("long-context/") for p in doc["phases"])
    return ["--protected", "long-context"] if has else []


def phase_of(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(p for p in doc["phases"] if p["name"] == name)


def recount(doc: dict[str, Any], name: str, edge: str = "end", **fields: Any) -> None:
    """Change what a phase's capture says (`counters` keys as `counters__lookups.hits`) and
    drop its stored deltas, which compare derives again from the captures."""
    phase = phase_of(doc, name)
    for key, value in fields.items():
        if key.startswith("counters__"):
            phase[edge]["counters"][key.removeprefix("counters__")] = value
        else:
            phase[edge][key] = value
    phase.pop("deltas", None)


def counter(doc: dict[str, Any], name: str, key: str, edge: str = "end") -> Any:
    return phase_of(doc, name)[edge]["counters"][key]


def pass_of(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(p for p in doc["passes"] if p["phase"] == name)


def drop(doc: dict[str, Any], name: str) -> None:
    """Remove a phase and its pass, as if it never ran."""
    doc["phases"] = [p for p in doc["phases"] if p["name"] != name]
    doc["passes"] = [p for p in doc["passes"] if p["phase"] != name]


def write(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(json.dumps(doc))
    return path


def semantic_verdict(path: Path, baseline: Path, candidate: Path, verdict: str = "pass") -> Path:
    """The engine team's semantic verdict on exactly these two evidence files."""
    doc = {"semantic_gate": verdict, "method": "reference outputs checked by the engine team",
           "baseline_sha256": hashlib.sha256(baseline.read_bytes()).hexdigest(),
           "candidate_sha256": hashlib.sha256(candidate.read_bytes()).hexdigest()}
    path.write_text(json.dumps(doc))
    return path


def probe_pair(orders: tuple[str, str] = ("forward", "reverse"), hits: int = 43, n: int = 52,
               foreign_in_replay: int = 0, foreign_between: int = 0,
               before_prime: int = 0) -> tuple[dict[str, Any], dict[str, Any]]:
    """A cache-order probe's two phases (by name) and passes (by phase): the prime `p/<o>-1`
    and the replay `p/<o>-2`. `foreign_in_replay` requests of another client reach the engine
    during the replay, `foreign_between` between the two passes, `before_prime` before the
    prime began (the incarnation was not fresh)."""
    counts: dict[str, Any] = {"lookups": before_prime, "hits": 0, "reused": 9 * before_prime,
                              "restored": 0, "row": 0, "headroom": 0, "requests": before_prime,
                              "prompt": PROMPT * before_prime,
                              "generated": TOKENS * before_prime,
                              "latencies": [0.4] * before_prime}
    phases, passes = {}, {}
    previous = None
    names = [f"p/{orders[0]}-1", f"p/{orders[1]}-2"]
    for k, name in enumerate(names):
        if k == 1 and foreign_between:
            counts = {**counts, "lookups": counts["lookups"] + foreign_between,
                      "requests": counts["requests"] + foreign_between,
                      "prompt": counts["prompt"] + PROMPT * foreign_between,
                      "generated": counts["generated"] + TOKENS * foreign_between,
                      "reused": counts["reused"] + 9 * foreign_between,
                      "latencies": [*counts["latencies"], *[0.4] * foreign_between]}
        begin = _capture(1000.0 + 100 * k, "g-probe", counts, IDENTITY, GEOMETRY, BUDGET)
        extra = foreign_in_replay if k == 1 else 0
        got = hits if k == 1 else 0
        counts = {**counts, "lookups": counts["lookups"] + n + extra,
                  "hits": counts["hits"] + got,
                  "reused": counts["reused"] + 9 * (n + extra) + 2000 * got,
                  "restored": counts["restored"] + 2000 * got,
                  "requests": counts["requests"] + n + extra,
                  "prompt": counts["prompt"] + PROMPT * (n + extra),
                  "generated": counts["generated"] + TOKENS * (n + extra),
                  "latencies": [*counts["latencies"], *[0.4] * (n + extra)]}
        end = _capture(1050.0 + 100 * k, "g-probe", counts, IDENTITY, GEOMETRY, BUDGET)
        phases[name] = phase_json(name, begin, end)
        arm = Arm("probe")
        recorded = arm._pass(name, "p", 0, 0, previous, n, TOKENS)
        recorded.update(order=orders[k], repetition=None, repetitions=None)
        passes[name] = recorded
        previous = name
    return phases, passes
