"""Engine ingest: the pass-through (exporter.sources.engine_metrics.parse, then passthrough_totals.fold
into the previous poll's totals, as the sidecar does every poll) against prometheus_client's full
parser, same text.

    .venv/bin/python bench/ingest.py [--seconds 4] [--json PATH]

Two inputs: the real SGLang exposition (tests/fixtures/real/sglang_production_metrics.prom) and a
synthetic engine-like exposition of exactly 5,000 sample lines (`synthetic()`, deterministic): the
allow-listed families (counters, gauges, three histograms per model) including an allow-listed
counter with an unbounded `request_id` label, and many families the allow-list skips (per-request
gauges and histograms keyed by `request_id`, per-stage latency histograms, speculative-decoding and
KV-transfer families, the Python client's `process_*` / `python_gc_*`). Each parser is timed with
time.perf_counter per call, interleaved (one full parse, then pass-through parses for about as
long) for a time budget of `--seconds` per input (at least `--min-reps` full parses), after a
warm-up; the median per parse and the ratio of medians are reported. The full parse is
`list(text_string_to_metric_families(text))`, which materialises every family and sample.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import ROOT, install_sigterm, percentile, write_json

sys.path.insert(0, str(ROOT))
from exporter.cycle.passthrough_totals import fold
from exporter.sources import engine_metrics as passthrough

SGLANG = ROOT / "tests" / "fixtures" / "real" / "sglang_production_metrics.prom"
MODELS = ("meta-llama/Llama-3.1-8B-Instruct", "qwen3-next")
BUCKETS = ("0.005", "0.01", "0.025", "0.05", "0.075", "0.1", "0.15", "0.2", "0.3", "0.4", "0.5",
           "0.75", "1.0", "1.5", "2.0", "2.5", "5.0", "7.5", "10.0", "15.0", "20.0", "30.0",
           "60.0", "+Inf")


class _Writer:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.lines: list[str] = []
        self.samples = 0

    def family(self, name: str, typ: str, help_text: str) -> None:
        self.lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {typ}"]

    def sample(self, name: str, labels: dict[str, str], value: float) -> None:
        text = ",".join(f'{k}="{v}"' for k, v in labels.items())
        self.lines.append(f"{name}{{{text}}} {value!r}" if text else f"{name} {value!r}")
        self.samples += 1

    def histogram(self, name: str, labels: dict[str, str]) -> None:
        count = 0.0
        for le in BUCKETS:
            count += float(self.rng.randint(0, 40))
            self.sample(f"{name}_bucket", {**labels, "le": le}, count)
        self.sample(f"{name}_sum", labels, round(count * self.rng.uniform(0.1, 3.0), 6))
        self.sample(f"{name}_count", labels, count)


def _request_id(rng: random.Random) -> str:
    return f"{rng.getrandbits(128):032x}"


def synthetic(samples: int = 5000, seed: int = 1) -> str:
    """An engine-like exposition with exactly `samples` sample lines (see the module doc)."""
    rng = random.Random(seed)
    w = _Writer(rng)
    v = "sglang:"
    # Allow-listed families: what the sidecar re-exports.
    for fam, typ in (("prompt_tokens_total", "counter"), ("generation_tokens_total", "counter"),
                     ("num_running_reqs", "gauge"), ("num_queue_reqs", "gauge"),
                     ("num_used_tokens", "gauge"), ("token_usage", "gauge"),
                     ("cache_hit_rate", "gauge"), ("gen_throughput", "gauge")):
        w.family(v + fam, typ, f"Allow-listed {fam}.")
        for model in MODELS:
            w.sample(v + fam, {"model_name": model}, float(rng.randint(0, 10**7)))
    for fam in ("time_to_first_token_seconds", "time_per_output_token_seconds",
                "e2e_request_latency_seconds"):
        w.family(v + fam, "histogram", f"Allow-listed {fam}.")
        for model in MODELS:
            w.histogram(v + fam, {"model_name": model})
    w.family(v + "requests_total", "counter", "Requests by id (unbounded label, allow-listed).")
    for _ in range(400):
        w.sample(v + "requests_total", {"model_name": MODELS[0], "request_id": _request_id(rng)},
                 1.0)
    # Families the allow-list skips.
    w.family("process_cpu_seconds_total", "counter", "Total user and system CPU time.")
    w.sample("process_cpu_seconds_total", {}, 12345.67)
    w.family("python_gc_objects_collected_total", "counter", "Objects collected during gc.")
    for gen in ("0", "1", "2"):
        w.sample("python_gc_objects_collected_total", {"generation": gen}, 1234.0)
    stages = ("tokenize", "schedule", "prefill", "decode", "detokenize", "transfer")
    for fam in ("per_stage_req_latency_seconds", "kv_transfer_latency_seconds",
                "spec_verify_latency_seconds"):
        w.family(v + fam, "histogram", f"Skipped {fam}.")
        for model in MODELS:
            for stage in stages:
                w.histogram(v + fam, {"model_name": model, "stage": stage})
    for fam in ("request_prompt_tokens", "request_output_tokens", "request_cached_tokens",
                "request_queue_time_seconds", "spec_accept_length", "request_priority"):
        w.family(v + fam, "gauge", f"Skipped per-request {fam}.")
        for _ in range(350):
            w.sample(v + fam, {"model_name": MODELS[1], "request_id": _request_id(rng),
                               "tp_rank": str(rng.randint(0, 7))}, float(rng.randint(0, 4096)))
    w.family(v + "request_latency_seconds", "histogram", "Skipped per-request histogram.")
    rid = 0
    while w.samples + len(BUCKETS) + 2 <= samples:
        w.histogram(v + "request_latency_seconds", {"request_id": f"req-{rid:06d}"})
        rid += 1
    w.family(v + "kv_cache_blocks", "gauge", "Skipped per-block gauge (fills up to the total).")
    block = 0
    while w.samples < samples:
        w.sample(v + "kv_cache_blocks", {"block": str(block), "tier": "host"}, 1.0)
        block += 1
    return "\n".join(w.lines) + "\n"


def interleaved(fast: Callable[[], Any], slow: Callable[[], Any], seconds: float,
                min_reps: int) -> tuple[list[float], list[float]]:
    """Per round: one slow call, then fast calls for about as long (at most 50): both parsers
    see the same machine load, which on a shared 2-core machine moves from second to second."""
    for _ in range(3):
        fast()
        slow()
    fast_t: list[float] = []
    slow_t: list[float] = []
    gc.collect()
    deadline = time.perf_counter() + seconds
    while len(slow_t) < min_reps or time.perf_counter() < deadline:
        t0 = time.perf_counter()
        slow()
        spent = time.perf_counter() - t0
        slow_t.append(spent)
        budget, k = spent, 0
        while budget > 0 and k < 50:
            t0 = time.perf_counter()
            fast()
            took = time.perf_counter() - t0
            fast_t.append(took)
            budget -= took
            k += 1
    return fast_t, slow_t


def full_parse(text: str) -> int:
    return sum(len(f.samples) for f in text_string_to_metric_families(text))


def measure(name: str, text: str, seconds: float, min_reps: int) -> dict[str, Any]:
    parsed = passthrough.parse(text)
    families = list(text_string_to_metric_families(text))
    sample_lines = sum(1 for ln in text.splitlines() if ln and not ln.startswith("#"))
    # The sidecar parses with a SeriesCache that persists across polls (engines repeat their
    # series) and folds counters into the totals of the previous poll; warm both once, as the
    # first poll does, and time the steady state.
    cache = passthrough.SeriesCache()
    totals = [fold(None, passthrough.parse(text, cache=cache), "g-bench")]

    def poll() -> None:
        totals[0] = fold(totals[0], passthrough.parse(text, cache=cache), "g-bench")

    fast, full = interleaved(poll, lambda: full_parse(text), seconds, min_reps)
    exported = [*parsed.families, *totals[0].families]
    fast_ms = statistics.median(fast) * 1000
    full_ms = statistics.median(full) * 1000
    result = {
        "input": name, "bytes": len(text.encode()), "sample_lines": sample_lines,
        "families": len(families),
        "full_parse_samples": sum(len(f.samples) for f in families),
        "allow_listed_samples": parsed.samples_seen,
        "exported_families": len(exported),
        "exported_samples": sum(len(f.samples) for f in exported),
        "malformed_lines": parsed.malformed_lines,
        "passthrough": {"reps": len(fast), "median_ms": fast_ms,
                        "p99_ms": percentile(fast, 99) * 1000, "min_ms": min(fast) * 1000},
        "full_parse": {"reps": len(full), "median_ms": full_ms,
                       "p99_ms": percentile(full, 99) * 1000, "min_ms": min(full) * 1000},
        "ratio": full_ms / fast_ms,
    }
    print(f"{name:<24} passthrough {fast_ms:8.3f} ms  full parse {full_ms:8.3f} ms  "
          f"ratio {result['ratio']:.1f}x", file=sys.stderr)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=4.0,
                        help="time budget per input (default 4)")
    parser.add_argument("--min-reps", type=int, default=10)
    parser.add_argument("--samples", type=int, default=5000, help="synthetic sample lines")
    parser.add_argument("--dump", type=Path, help="write the synthetic exposition here")
    parser.add_argument("--json", type=Path, metavar="PATH")
    args = parser.parse_args()
    install_sigterm()
    text = synthetic(args.samples)
    if args.dump:
        args.dump.write_text(text)
    inputs = [("sglang (real sample)", SGLANG.read_text()),
              (f"synthetic {args.samples} samples", text)]
    results = [measure(name, body, args.seconds, args.min_reps) for name, body in inputs]
    write_json(args.json, {"benchmark": "ingest",
                           "timer": "time.perf_counter per call, the two parsers interleaved",
                           "seconds_per_input": args.seconds, "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
