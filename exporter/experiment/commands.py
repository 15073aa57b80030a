"""Subcommands `phase`, `evidence`, `probe`, `compare` and `observer-cost` (docs/interface.md
section 7; observer-cost lives in exporter/experiment/observer_cost.py).

Exit codes: 0 done; 1 the sidecar refused (or, for `probe`, it stopped before its plan was done:
a failed request or output contract, traffic it did not send, a used incarnation, an identity or
pin failure, a pass it could not bracket; the record is still written); 2 bad input (options, a
corpus or evidence file). `compare` has its own: 0 admitted, 1 not admitted, 2 cannot compare; so
has `observer-cost` (its module's docstring).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from exporter import access
from exporter.experiment import evidence as ev
from exporter.experiment import identity, jsonfile, observer_cost, probe, record, semantic, send
from exporter.experiment.client import SidecarClient, SidecarError, connect
from exporter.experiment.compare import CANNOT_COMPARE, MIN_REPETITIONS, TEAM_RECORDS, compare
from exporter.experiment.compare_text import render
from exporter.experiment.schema import SchemaError, check_evidence
from exporter.options import Option

DEFAULT_SIDECAR = "http://127.0.0.1:19400"


def _sidecar_options(token: bool) -> tuple[Option, ...]:
    return (
        Option("--sidecar", "str", DEFAULT_SIDECAR, "the sidecar's base URL", metavar="URL"),
        *([Option("--token-file", "path", None, "file holding the bearer token of the sidecar's "
                  "--events-token-file", required=True, metavar="F")] if token else []),
        *access.OPTIONS,
    )


PHASE = (
    Option("action", "str", help="begin or end the phase", choices=("begin", "end")),
    Option("name", "text", help="1-64 of A-Z a-z 0-9 . _ / -, e.g. probe-52/1"),
    *_sidecar_options(token=True),
    Option("--note", "text", None, "free text stored with the capture (at most 256 chars)"),
)

EVIDENCE = (
    *_sidecar_options(token=False),
    Option("--out", "path", None, "directory for evidence.json, evidence.md and evidence.png",
           required=True, metavar="DIR"),
    Option("--probe", "text", (), "judge this pair of phases (repeatable)", repeat=True,
           metavar="PRIME:REPLAY"),
    Option("--prefix", "text", (), "only phases whose name starts with PREFIX (repeatable)",
           repeat=True, metavar="PREFIX", default_text="every phase the sidecar keeps"),
    Option("--probe-record", "path", (), "probe.json files (or the probes' --out folders) whose "
           "passes go into the evidence: sent and failed requests, body hashes and order, which "
           "compare needs (repeatable; DIR/probe.json of --out is read too)", repeat=True,
           nargs="+", metavar="FILE"),
    Option("--simulated", "bool", False, "the phases ran on the simulated engine: label the "
           "report SIMULATED (known without it from probe records of the simulator)"),
)

PROBE = (
    Option("--engine-url", "str", None, "the engine's base URL (the probe POSTs to "
           "/v1/completions)", required=True, metavar="URL"),
    *_sidecar_options(token=True),
    Option("--corpus", "path", None, "one completion request body (a JSON object) per line, "
           "each fixing its output length (max_tokens with min_tokens equal to it, or "
           "ignore_eos)", required=True, metavar="FILE.jsonl"),
    Option("--replay-corpus", "path", None, "send this corpus in every pass after the first "
           "(e.g. the same prompts under another model)", metavar="FILE.jsonl"),
    Option("--out", "path", None, "directory for probe.json, outputs.jsonl and the evidence "
           "report", required=True, metavar="DIR"),
    Option("--order", "text", "forward,reverse", "the passes' orders, comma-separated: forward "
           "or reverse; the first pass primes, each later one replays"),
    Option("--repetitions", "int", 0, "run the passes R times, each time on a fresh incarnation "
           "(--fresh-command); the last pass of repetition r is the phase NAME/r that `compare` "
           "measures", low=0, metavar="R", default_text="0, one probe"),
    Option("--fresh-command", "text", None, "run before every prime to get a fresh engine "
           "incarnation (a managed unload and load; the simulator: POST /admin/restart); split "
           "like a shell would, no shell; it returns once the engine serves", metavar="CMD"),
    Option("--fresh-timeout", "float", 900.0, "seconds --fresh-command may take", above=0,
           metavar="S"),
    Option("--concurrency", "int", 1, "requests in flight at once, dispatched in the pass's "
           "order", low=1, metavar="N"),
    Option("--engine-header", "text", (), "a header every completion carries, e.g. the engine's "
           "Authorization (repeatable; values are never recorded)", repeat=True,
           metavar="'NAME: VALUE'"),
    Option("--engine-token-file", "path", None, "file holding the engine's bearer token "
           "(Authorization: Bearer)", metavar="F"),
    Option("--declare", "text", (), "what the snapshot does not say about the engine, recorded "
           f"for `compare`: {', '.join(identity.DECLARABLE)} (repeatable)", repeat=True,
           metavar="DIM=VALUE"),
    Option("--name", "text", None, "phase name prefix", default_text="probe-<UTC time>"),
    # Not --timeout: HELIOS_EXPORTER_TIMEOUT is the sidecar's 2 s engine timeout in the same shell.
    Option("--request-timeout", "float", 300.0, "seconds one completion may take", above=0,
           metavar="S"),
)

COMPARE = (
    Option("--baseline", "path", None, "the baseline arm's evidence.json", required=True,
           metavar="A.json"),
    Option("--candidate", "path", None, "the candidate arm's evidence.json", required=True,
           metavar="B.json"),
    Option("--primary", "text", None, "the lane that must improve (its repetitions LANE/1, "
           "LANE/2, ...)", required=True, metavar="LANE"),
    Option("--protected", "text", (), "a lane that must not regress (repeatable)", repeat=True,
           metavar="LANE"),
    Option("--min-benefit", "float", 0.05, "least relative improvement of the primary lane's "
           "mean latency, in every matched pair", low=0, below=1, metavar="F"),
    Option("--max-regression", "float", 0.03, "most relative slow-down of a protected lane, in "
           "every matched pair", low=0, below=1, metavar="F"),
    Option("--allow-difference", "text", (), "the one declared change between the arms: "
           f"{', '.join(identity.CHANGES)} (geometry: the v2 name of allocator); given once (one "
           "change per comparison); the total budget never may differ", repeat=True,
           metavar="CHANGE"),
    Option("--new-build", "bool", False, "the declared allocator or speculation change is "
           "delivered as a new build: the image and package may differ with it (the source diff "
           "is the engine team's to review)"),
    Option("--semantic-command", "text", None, "the engine team's check of the outputs, run with "
           "the two evidence files appended (baseline first): exit 0 pass, 1 fail, anything else "
           "not evaluated", exclusive="semantic", metavar="CMD"),
    Option("--semantic-verdict", "path", None, "the engine team's verdict: JSON "
           '{"semantic_gate": "pass"|"fail", "baseline_sha256", "candidate_sha256", "method"} '
           "naming the SHA-256 of the two evidence files it judged", exclusive="semantic",
           metavar="FILE"),
    Option("--semantic-timeout", "float", 600.0, "seconds --semantic-command may take", above=0,
           metavar="S"),
    Option("--team-record", "text", (), "the engine team's record of what this gate cannot "
           "check, KIND=FILE with KIND one of functional-acceptance, allocation-safety, "
           "restore-review: hashed and printed, never judged; without one the last line says "
           "it was not checked (repeatable)", repeat=True, metavar="KIND=FILE"),
    Option("--allow-unrecorded", "bool", False, "accept repetitions without a probe record "
           "(phases bracketed by hand with `phase begin|end` around another load generator): "
           "their failed requests and outputs are then unknown, so the strict-output gate is not "
           "evaluated and nothing is admitted"),
)


def _err(command: str, message: str) -> None:
    print(f"helios-exporter {command}: {message}", file=sys.stderr)


def run_phase(args: argparse.Namespace) -> int:
    try:
        client = connect(args, args.token_file)
    except SidecarError as exc:
        _err("phase", str(exc))
        return 2
    try:
        answer = client.phase(args.action, args.name, args.note)
    except SidecarError as exc:
        _err("phase", str(exc))
        return 1
    finally:
        client.close()
    print(json.dumps(answer, indent=1, sort_keys=True))
    return 0


def _write(doc: dict[str, Any], out: Path, command: str) -> bool:
    try:
        written, missing = ev.write(doc, out)
    except OSError as exc:
        _err(command, f"cannot write the evidence into {out}: {exc.strerror or exc}")
        return False
    if missing:
        _err(command, missing)
    print(f"wrote {', '.join(str(p) for p in written)}", file=sys.stderr)
    return True


def _print_verdicts(doc: dict[str, Any]) -> None:
    if doc["probes"] and doc.get("simulated"):
        print("SIMULATED: the simulated engine answered these passes; the verdicts describe it, "
              "not Helios")
    for pair in doc["probes"]:
        print(f"{pair['prime']} -> {pair['replay']}: {pair['verdict']} ({pair['reading']})")


def run_evidence(args: argparse.Namespace) -> int:
    try:
        pairs = [ev.parse_pair(p) for p in args.probe]
    except ValueError as exc:
        _err("evidence", f"--probe: {exc}")
        return 2
    own = args.out / record.RECORD_FILE
    paths = list(args.probe_record)
    if own.is_file() and own.resolve() not in {record.record_path(p).resolve() for p in paths}:
        paths.append(own)
    try:
        record.prepare_out(args.out)
        passes = record.read_passes(paths)
        client = connect(args)
    except (record.RecordError, SidecarError) as exc:
        _err("evidence", str(exc))
        return 2
    try:
        phases = client.phases()
    except SidecarError as exc:
        _err("evidence", str(exc))
        return 1
    finally:
        client.close()
    known = {p["name"] for p in phases}
    unknown = sorted(p["phase"] for p in passes if p["phase"] not in known)
    if unknown:
        _err("evidence", f"{len(unknown)} recorded passes are not among the sidecar's phases "
             f"(left out): {', '.join(unknown[:5])}{' ...' if len(unknown) > 5 else ''}")
    if args.prefix:
        phases = [p for p in phases if any(p["name"].startswith(x) for x in args.prefix)]
    doc = ev.build(phases, pairs, passes, source=args.sidecar, simulated=args.simulated)
    if not _write(doc, args.out, "evidence"):
        return 1
    _print_verdicts(doc)
    return 0


def _probe_options(args: argparse.Namespace) -> probe.Options:
    """ValueError (CorpusError, CredentialError) when an option cannot be used."""
    if args.repetitions > 1 and not args.fresh_command:
        raise ValueError(f"--repetitions {args.repetitions} needs --fresh-command: each "
                         "repetition runs on its own fresh incarnation")
    declared = dict(identity.parse_declaration(d) for d in args.declare)
    headers = send.engine_headers(args.engine_header, args.engine_token_file)
    return probe.Options(concurrency=args.concurrency, headers=headers,
                         fresh_command=args.fresh_command, fresh_timeout=args.fresh_timeout,
                         declared=declared, timeout=args.request_timeout)


def run_probe(args: argparse.Namespace) -> int:
    try:
        orders = probe.parse_orders(args.order)
        corpus = probe.read_corpus(args.corpus)
        corpus.require_fixed_lengths()
        replay = probe.read_corpus(args.replay_corpus) if args.replay_corpus else None
        if replay is not None:
            replay.require_fixed_lengths()
        options = _probe_options(args)
        record.prepare_out(args.out, fresh_record=True)
        client = connect(args, args.token_file)
    except (ValueError, SidecarError) as exc:
        _err("probe", str(exc))
        return 2
    name = args.name or time.strftime("probe-%Y%m%dT%H%M%SZ", time.gmtime())
    passes = probe.plan(name, orders, args.repetitions, corpus, replay)
    try:
        return _probe(args, client, name, corpus, replay, passes, options, orders)
    finally:
        client.close()


def _probe(args: argparse.Namespace, client: SidecarClient, name: str, corpus: probe.Corpus,
           replay: probe.Corpus | None, passes: list[probe.PassPlan], options: probe.Options,
           orders: list[str]) -> int:
    try:  # before anything is sent: the sidecar answers, takes the credentials, has the names free
        taken = {p["name"] for p in client.phases()} & {p.phase for p in passes}
    except SidecarError as exc:
        _err("probe", f"{exc} (nothing was sent)")
        return 1
    if taken:
        _err("probe", f"the sidecar has phases named {', '.join(sorted(taken))} already (names "
             "are unique): choose another --name (nothing was sent)")
        return 2
    started = time.time()
    records: list[probe.PassRecord] = []
    state: dict[str, Any] = {"complete": False, "stopped": None}

    def document() -> dict[str, Any]:
        return probe.record_doc(name, args.engine_url, args.sidecar, corpus, replay, records,
                                started, options, state["complete"], state["stopped"],
                                args.repetitions, orders)

    recorder = record.Recorder(args.out / record.RECORD_FILE, document)
    if recorder.save(force=True) is None:  # a record exists before the first phase begins
        return 1
    try:
        with (args.out / record.OUTPUTS_FILE).open("w") as stream, \
                send.Sender(args.engine_url, headers=options.headers, timeout=options.timeout,
                            concurrency=options.concurrency) as sender:
            state["stopped"] = probe.run_passes(
                sender, client, passes, options, records, progress=sys.stderr.isatty(),
                outputs=probe.OutputLog(stream), checkpoint=recorder.save,
                repetitions=args.repetitions or None)
        state["complete"] = True
    except KeyboardInterrupt:
        open_phase = next((r.phase for r in reversed(records) if r.begin_error is None), None)
        _err("probe", "interrupted; the record so far is kept" + (
            f"; phase {open_phase} may still be open: `helios-exporter phase end {open_phase}`"
            if open_phase else ""))
        return 130
    except OSError as exc:
        _err("probe", f"cannot write {args.out / record.OUTPUTS_FILE}: {exc.strerror or exc}")
        return 1
    finally:
        written = recorder.final()
    if written is None:
        return 1
    summaries = record.evidence_passes(document(), str(written))
    ours = {r.phase for r in records}
    try:
        phases = [p for p in client.phases() if p["name"] in ours]
    except SidecarError as exc:
        _err("probe", f"{exc}; {written} is written, the evidence report is not")
        return 1
    ended = [r for r in records if r.end_error is None and r.begin_error is None]
    pairs = [(first.phase, later.phase) for first in ended if first.previous is None
             for later in ended if later is not first and _same_incarnation(first, later, ended)]
    doc = ev.build(phases, pairs, summaries, source=args.sidecar)
    wrote = _write(doc, args.out, "probe")
    _print_verdicts(doc)
    if state["stopped"]:
        _err("probe", f"stopped: {state['stopped']} ({len(ended)} of {len(passes)} passes ran; "
             f"every output is in {written} and {args.out / record.OUTPUTS_FILE})")
        return 1
    return 0 if wrote else 1


def _same_incarnation(first: probe.PassRecord, later: probe.PassRecord,
                      ended: list[probe.PassRecord]) -> bool:
    """Whether `later` ran after the prime `first` on its incarnation (previous links)."""
    by_phase = {r.phase: r for r in ended}
    current: probe.PassRecord | None = later
    while current is not None and current.previous is not None:
        if current.previous == first.phase:
            return True
        current = by_phase.get(current.previous)
    return False


def run_compare(args: argparse.Namespace) -> int:
    given = list(dict.fromkeys(args.allow_difference))
    changes, wrong = [], []
    for text in given:
        try:
            changes.append(identity.parse_change(text))
        except ValueError as exc:
            wrong.append(str(exc))
    if len(given) > 1 or wrong:
        said = ([f"--allow-difference {' and '.join(given)}: one change per comparison "
                 "(runtime, quantization, allocator and speculation are compared separately)"]
                if len(given) > 1 else [])
        _err("compare", "; ".join(said + [f"--allow-difference {w}" for w in wrong]))
        return CANNOT_COMPARE
    docs = []
    for path in (args.baseline, args.candidate):
        try:
            doc = jsonfile.read(path)
        except jsonfile.JsonInputError as exc:
            _err("compare", str(exc))
            return CANNOT_COMPARE
        try:
            check_evidence(doc)
        except SchemaError as exc:
            _err("compare", f"{path}: not a usable evidence.json: {exc}")
            return CANNOT_COMPARE
        docs.append(doc)
    records: dict[str, tuple[str, str]] = {}
    for text in args.team_record:
        kind, sep, name = text.partition("=")
        if not sep or kind not in TEAM_RECORDS or not name:
            _err("compare", f"--team-record takes KIND=FILE with KIND one of "
                 f"{', '.join(TEAM_RECORDS)}, got {text[:80]!r}")
            return CANNOT_COMPARE
        try:
            records[kind] = (name, semantic.sha256_of(Path(name)))
        except OSError as exc:
            _err("compare", f"--team-record {kind}: {name}: {exc.strerror or exc}")
            return CANNOT_COMPARE
    gate = None
    if args.semantic_command:
        gate = semantic.from_command(args.semantic_command, args.baseline, args.candidate,
                                     args.semantic_timeout)
    elif args.semantic_verdict:
        gate = semantic.from_verdict(args.semantic_verdict, args.baseline, args.candidate)
    result = compare(docs[0], docs[1], args.primary, args.protected, args.min_benefit,
                     args.max_regression, changes[0] if changes else None, args.new_build,
                     args.allow_unrecorded, gate, records)
    sys.stdout.write(render(result, str(args.baseline), str(args.candidate)))
    return result.exit_code


OBSERVER_COST = (*_sidecar_options(token=True), *observer_cost.OPTIONS)


def run_observer_cost(args: argparse.Namespace) -> int:
    return observer_cost.main(args)


COMMANDS = {
    "phase": ("begin or end an experiment phase on a sidecar", PHASE, run_phase),
    "evidence": ("write evidence.json, evidence.md and a picture from a sidecar's phases",
                 EVIDENCE, run_evidence),
    "probe": ("run the cache-order probe from a corpus, each pass a phase, then the evidence",
              PROBE, run_probe),
    "compare": (f"gate a candidate arm against a baseline ({MIN_REPETITIONS} repetitions a lane)",
                COMPARE, run_compare),
    "observer-cost": ("measure an observer's cost: its --on/--off commands, repetitions in a "
                      "recorded order, checked, with an interval", OBSERVER_COST,
                      run_observer_cost),
}
