"""`helios-exporter observer-cost`: what an observer costs the engine, measured as the
observer-cost protocol asks (docs/experiments.md section 7).

The observer is whatever the --on and --off shell commands switch (an engine's trace, the
sidecar's polling, a config reload); --witness names what in the engine's state shows it on or
off (witness.py), read after every switch and after every repetition. Before anything
is sent the witness is read once and the whole order is drawn from a recorded seed and written
to DIR/plan.json. Per concurrency (C1 and C4 at least): the observer off, a warm-up phase, then
every pair of repetitions in the planned order, each repetition its switch command followed by a
phase of exactly the same requests. Every step is recorded as it happens (DIR/observer-cost.json
is rewritten after each), checked (checks.py) and reported (markdown and a picture).

Exit codes: 0 every repetition ran and is valid (whatever the result says); 1 a repetition is
invalid (its switch not verified included), a switch command failed or the sidecar refused a
phase edge (the report is written and refuses to conclude); 2 bad input (options, fewer than 3
repetitions, C1 or C4 missing, no warm-up, a witness that cannot be read, corpus, an --out that
holds a run already), nothing sent; 130 interrupted (the record kept).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from exporter.options import Option
from lab.client.sidecar import SidecarClient, SidecarError, connect
from lab.evidence.command import sidecar_options
from lab.observer_cost import run as runs
from lab.observer_cost import witness as witnesses
from lab.observer_cost.checks import DEFAULT_CLOCK_TOLERANCE
from lab.observer_cost.doc import JSON_FILE, build
from lab.observer_cost.plan import (
    MIN_REPETITIONS,
    PLAN_FILE,
    Step,
    parse_concurrency,
    plan,
    plan_doc,
    step_json,
)
from lab.probe.corpus import Corpus, CorpusError, read_corpus
from lab.probe.record import RecordError, prepare_out, write_json

SWITCH_LOG = "switch.log"


OPTIONS = (
    *sidecar_options(token=True),
    Option("--engine-url", "str", None, "the engine's base URL: completions go to "
           "/v1/completions, its identity, ranks and clock come from /debug/offload/snapshot",
           required=True, metavar="URL"),
    Option("--corpus", "path", None, "the retained fixture: one completion body a line, each "
           "with the same max_tokens (e.g. `python -m simulator corpus fixture-1024`)",
           required=True, metavar="FILE.jsonl"),
    Option("--on", "text", None, "shell command that switches the observer on (exit 0 when "
           "done)", required=True, metavar="CMD"),
    Option("--off", "text", None, "shell command that switches the observer off (exit 0 when "
           "done)", required=True, metavar="CMD"),
    Option("--witness", "text", None, "what in the engine's state shows the observer on or "
           "off, read after every switch and every repetition: snapshot:PATH (a boolean in its "
           "snapshot, e.g. simulator.trace.enabled), metric:NAME{LABEL=\"V\"} (a counter on "
           "its /metrics that grows while the observer is on) or command:CMD (a count the "
           "command prints)", required=True, metavar="KIND:WHAT"),
    Option("--out", "path", None, "directory for plan.json, observer-cost.json, "
           "observer-cost.md, observer-cost.png and switch.log", required=True, metavar="DIR"),
    Option("--concurrency", "text", "1,4", "concurrencies, each warmed and measured on its own, "
           "in this order", metavar="C,..."),
    Option("--repetitions", "int", 3, "repetitions per arm and concurrency, run as pairs (one "
           "off, one on)", check=lambda n: None if n >= MIN_REPETITIONS else (
               f"at least {MIN_REPETITIONS} repetitions an arm (the observer-cost protocol: three off and "
               f"three on per concurrency), got {n}"), metavar="N"),
    Option("--requests", "int", None, "requests per repetition, the corpus's bodies in order, "
           "cycling", low=1, metavar="N", default_text="one pass over the corpus"),
    Option("--warmup", "int", None, "warm-up requests per concurrency, the observer off",
           check=lambda n: None if n >= 1 else (
               "each concurrency is warmed before it is measured (the observer-cost protocol): at least "
               f"1 warm-up request, got {n}"), metavar="N", default_text="as --requests"),
    Option("--name", "text", None, "phase name prefix, 1-40 of A-Z a-z 0-9 . _ -",
           default_text="observer-<UTC time>"),
    Option("--seed", "int", None, "seed of the order", low=0, metavar="N",
           default_text="drawn, and recorded in plan.json"),
    Option("--latency-source", "str", "engine", "the latency a result judges: the engine's own "
           "histogram, or the client's clock (both are reported)", choices=("engine", "client")),
    Option("--ranks", "int", None, "ranks the snapshot must list at every edge", low=1,
           metavar="N", default_text="those it lists when the run begins"),
    Option("--clock-tolerance", "float", DEFAULT_CLOCK_TOLERANCE, "how far a clock may move "
           "against another within a repetition before it counts as a jump", low=0,
           below=86_400, metavar="S"),
    Option("--settle", "float", 0.0, "seconds to wait after each switch command", low=0,
           below=86_400, metavar="S"),
    Option("--switch-timeout", "float", 120.0, "seconds a switch command may take", low=0,
           below=86_400, metavar="S"),
    Option("--request-timeout", "float", 300.0, "seconds one completion may take", low=0,
           below=86_400, metavar="S"),
)


def _err(message: str) -> None:
    print(f"helios-exporter observer-cost: {message}", file=sys.stderr)


def output_tokens(corpus: Corpus) -> tuple[int, list[str]]:
    """The fixture's output length (every body's max_tokens) and warnings; CorpusError when the
    bodies do not fix one length."""
    lengths, unfixed = set(), 0
    for i, raw in enumerate(corpus.bodies, 1):
        body = json.loads(raw)
        n = body.get("max_tokens")
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise CorpusError(f"{corpus.path}: body {i} has no max_tokens >= 1: the fixture "
                              "must fix the output length")
        lengths.add(n)
        if body.get("ignore_eos") is not True and body.get("min_tokens") != n:
            unfixed += 1
    if len(lengths) != 1:
        raise CorpusError(f"{corpus.path}: the bodies ask for {len(lengths)} different "
                          f"max_tokens ({', '.join(map(str, sorted(lengths)))}): one length")
    warnings = []
    if unfixed:
        warnings.append(f"{unfixed} bodies set neither ignore_eos nor min_tokens = max_tokens: "
                        "an engine may stop them early, and each such output makes its "
                        "repetition invalid")
    return lengths.pop(), warnings


class Run:
    """One run's state and its record on disk."""

    def __init__(self, args: argparse.Namespace, steps: Sequence[Step], corpus: Corpus,
                 tokens: int, about: Mapping[str, Any]) -> None:
        self.args, self.steps, self.corpus, self.tokens = args, steps, corpus, tokens
        self.witness = witnesses.parse(args.witness)
        self.about = dict(about)
        self.concurrencies = list(dict.fromkeys(s.concurrency for s in steps))
        self.records: list[dict[str, Any]] = []
        self.stopped: str | None = None

    def document(self, complete: bool) -> dict[str, Any]:
        done = {r["phase"] for r in self.records}
        rest = [{**step_json(s), "stopped": self.stopped or "not run yet"}
                for s in self.steps if s.phase not in done]
        return build(self.about, [*self.records, *rest], self.concurrencies, self.tokens,
                     source=self.args.latency_source, ranks=self.args.ranks,
                     tolerance=self.args.clock_tolerance, complete=complete,
                     stopped=self.stopped)

    def save(self, complete: bool = False) -> dict[str, Any]:
        doc = self.document(complete)
        write_json(self.args.out / JSON_FILE, doc)
        return doc


def _witness(r: Run, engine: Any, env: dict[str, str]) -> dict[str, Any]:
    return witnesses.read(r.witness, engine, r.args.out / SWITCH_LOG, r.args.switch_timeout,
                          env)


def _step(r: Run, sidecar: SidecarClient, engine: Any, step: Step) -> dict[str, Any]:
    args = r.args
    record: dict[str, Any] = {**step_json(step), "switch": None, "witness": None,
                              "begin": None, "end": None, "load": None}
    # Switched before every step, whatever the step before left; --witness then shows whether
    # the observer really is on or off. A warm-up runs with the observer off.
    arm = step.arm or "off"
    env = {"OBSERVER_COST_ARM": arm, "OBSERVER_COST_PHASE": step.phase,
           "OBSERVER_COST_CONCURRENCY": str(step.concurrency)}
    record["switch"] = runs.switch(args.on if arm == "on" else args.off, arm, env,
                                  args.out / SWITCH_LOG, args.switch_timeout)
    if record["switch"]["error"] is not None:
        r.stopped = f"the --{arm} command before {step.phase} {record['switch']['error']}"
        return record
    if args.settle:
        time.sleep(args.settle)
    record["witness"] = {"what": r.witness.describe(), "counter": r.witness.counter,
                         "begin": _witness(r, engine, env), "end": None}
    note = f"observer-cost {step.label()}"
    record["begin"] = runs.edge(sidecar, engine, "begin", step.phase, note)
    if record["begin"]["error"] is not None:
        r.stopped = f"the sidecar refused to begin {step.phase}: {record['begin']['error']}"
        return record
    n = (args.warmup if args.warmup is not None else args.requests) if step.warmup \
        else args.requests
    record["load"] = runs.send(engine, r.corpus.bodies, n, step.concurrency)
    record["end"] = runs.edge(sidecar, engine, "end", step.phase)
    record["witness"]["end"] = _witness(r, engine, env)
    if record["end"]["error"] is not None:
        r.stopped = (f"the sidecar refused to end {step.phase}: {record['end']['error']} (end "
                     f"it with `helios-exporter phase end {step.phase}`)")
    return record


def execute(args: argparse.Namespace, sidecar: SidecarClient) -> int:
    try:
        corpus = read_corpus(args.corpus)
        tokens, warnings = output_tokens(corpus)
        concurrencies = parse_concurrency(args.concurrency)
        witness = witnesses.parse(args.witness)
        prepare_out(args.out)
        for name in (PLAN_FILE, JSON_FILE):
            if (args.out / name).exists():
                raise RecordError(f"--out {args.out} holds a run already ({name}): give each run "
                                  "its own --out")
        seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
        name = args.name or time.strftime("observer-%Y%m%dT%H%M%SZ", time.gmtime())
        steps = plan(name, concurrencies, args.repetitions, seed)
    except (CorpusError, RecordError, ValueError) as exc:
        _err(str(exc))
        return 2
    if args.requests is None:
        args.requests = len(corpus.bodies)
    for w in warnings:
        _err(f"warning: {w}")
    try:  # before anything is sent: the sidecar answers and has none of the names
        taken = {p["name"] for p in sidecar.phases()} & {s.phase for s in steps}
    except SidecarError as exc:
        _err(f"{exc} (nothing was sent)")
        return 1
    if taken:
        _err(f"the sidecar has phases named {', '.join(sorted(taken)[:3])} already: choose "
             "another --name (nothing was sent)")
        return 2
    with runs.engine_client(args.engine_url, args.request_timeout, 1) as engine:
        first = witnesses.read(witness, engine, args.out / SWITCH_LOG, args.switch_timeout)
    if first["error"] is not None:
        _err(f"--witness {witness.describe()}: {first['error']}: the switch could not be "
             "verified, so no repetition could be valid (nothing was sent)")
        return 2
    about = {
        "name": name, "engine_url": args.engine_url, "sidecar": args.sidecar,
        "on": args.on, "off": args.off, "witness": witness.describe(), "seed": seed,
        "corpus": {"path": str(corpus.path), "bodies": len(corpus.bodies),
                   "sha256": hashlib.sha256(b"\n".join(corpus.bodies) + b"\n").hexdigest()},
        "concurrencies": concurrencies, "repetitions": args.repetitions,
        "requests_per_repetition": args.requests,
        "warmup_requests": args.warmup if args.warmup is not None else args.requests,
    }
    plan_path = args.out / PLAN_FILE
    write_json(plan_path, plan_doc(name, seed, steps, written_at=time.time(),
                                   **{k: v for k, v in about.items() if k not in ("name", "seed")}))
    about["plan"] = {"file": PLAN_FILE,
                     "sha256": hashlib.sha256(plan_path.read_bytes()).hexdigest()}
    r = Run(args, steps, corpus, tokens, about)
    print(f"plan: {len(steps)} steps, seed {seed}, in {plan_path}", file=sys.stderr)
    r.save()
    interrupted = False
    with runs.engine_client(args.engine_url, args.request_timeout, max(concurrencies)) as engine:
        try:
            for step in steps:
                record = _step(r, sidecar, engine, step)
                r.records.append(record)
                doc = r.save()
                judged = next(s for s in doc["steps"] if s["phase"] == step.phase)
                _progress(judged, args.latency_source)
                if r.stopped:
                    _err(f"stopping: {r.stopped}")
                    break
        except KeyboardInterrupt:
            interrupted = True
            current = steps[len(r.records)].phase if len(r.records) < len(steps) else None
            r.stopped = "interrupted (Ctrl-C)"
            if current:
                _err(f"interrupted; phase {current} may still be open: `helios-exporter phase "
                     f"end {current}`")
    return _finish(r, interrupted)


def _progress(step: Mapping[str, Any], source: str) -> None:
    f = step["figures"]
    what = "valid" if step["valid"] else "INVALID: " + "; ".join(
        c["check"] for c in step["checks"] if c["ok"] is not True)
    mean = f[source]["mean"]
    print(f"{step['phase']}: {f['answered']}/{f['sent']} answered, {source} mean "
          f"{'-' if mean is None else f'{mean:.4f} s'}; {what}", file=sys.stderr)


def _finish(r: Run, interrupted: bool) -> int:
    from lab.evidence import document
    from lab.observer_cost.report import OBSERVER_COST

    doc = r.document(complete=not r.stopped)
    try:
        written, missing = document.write(doc, r.args.out, OBSERVER_COST)
    except OSError as exc:
        _err(f"cannot write the report into {r.args.out}: {exc.strerror or exc}")
        return 1
    if missing:
        _err(missing)
    print(f"wrote {', '.join(str(p) for p in written)}", file=sys.stderr)
    if doc.get("simulated"):
        print("SIMULATED: the engine was the simulator (helios-exporter simulate): these figures "
              "measure its model, nothing about Helios.")
    for res in doc["results"]:
        print(f"C{res['concurrency']}: {res['sentence']}")
    if interrupted:
        return 130
    return 0 if doc["conclusive"] else 1


def run(args: argparse.Namespace) -> int:
    try:
        sidecar = connect(args, args.token_file)
    except SidecarError as exc:
        _err(str(exc))
        return 2
    try:
        return execute(args, sidecar)
    finally:
        sidecar.close()
