"""`helios-exporter probe` (docs/interface.md section 7; the probe itself: lab/probe/passes.py): the
corpus sent pass by pass, each pass a phase, the record kept while it runs, then the evidence.
Exit codes: docs/interface.md section 7."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from exporter.options import Option
from lab.client.sidecar import SidecarClient, SidecarError, connect
from lab.compare import identity
from lab.evidence import doc as ev
from lab.evidence.command import err, print_verdicts, sidecar_options, write_evidence
from lab.probe import engine_verdicts, record, send
from lab.probe import passes as probe
from lab.probe.corpus import Corpus, read_corpus

OPTIONS = (
    Option("--engine-url", "str", None, "the engine's base URL (the probe POSTs to "
           "/v1/completions)", required=True, metavar="URL"),
    *sidecar_options(token=True),
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


def run(args: argparse.Namespace) -> int:
    try:
        orders = probe.parse_orders(args.order)
        corpus = read_corpus(args.corpus)
        corpus.require_fixed_lengths()
        replay = read_corpus(args.replay_corpus) if args.replay_corpus else None
        if replay is not None:
            replay.require_fixed_lengths()
        options = _probe_options(args)
        record.prepare_out(args.out, fresh_record=True)
        client = connect(args, args.token_file)
    except (ValueError, SidecarError) as exc:
        err("probe", str(exc))
        return 2
    name = args.name or time.strftime("probe-%Y%m%dT%H%M%SZ", time.gmtime())
    passes = probe.plan(name, orders, args.repetitions, corpus, replay)
    try:
        return _probe(args, client, name, corpus, replay, passes, options, orders)
    finally:
        client.close()


def _probe(args: argparse.Namespace, client: SidecarClient, name: str, corpus: Corpus,
           replay: Corpus | None, passes: list[probe.PassPlan], options: probe.Options,
           orders: list[str]) -> int:
    try:  # before anything is sent: the sidecar answers, takes the credentials, has the names free
        taken = {p["name"] for p in client.phases()} & {p.phase for p in passes}
    except SidecarError as exc:
        err("probe", f"{exc} (nothing was sent)")
        return 1
    if taken:
        err("probe", f"the sidecar has phases named {', '.join(sorted(taken))} already (names "
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
        err("probe", "interrupted; the record so far is kept" + (
            f"; phase {open_phase} may still be open: `helios-exporter phase end {open_phase}`"
            if open_phase else ""))
        return 130
    except OSError as exc:
        err("probe", f"cannot write {args.out / record.OUTPUTS_FILE}: {exc.strerror or exc}")
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
        err("probe", f"{exc}; {written} is written, the evidence report is not")
        return 1
    ended = [r for r in records if r.end_error is None and r.begin_error is None]
    pairs = [(first.phase, later.phase) for first in ended if first.previous is None
             for later in ended if later is not first and _same_incarnation(first, later, ended)]
    doc = ev.build(phases, pairs, summaries, source=args.sidecar)
    try:  # an engine read through its /metrics: verdicts only on what it exports
        doc = engine_verdicts.apply(doc, engine_verdicts.engine_of(client.status()))
    except SidecarError as exc:
        err("probe", f"{exc}: the engine kind is unknown, the verdicts are Helios's")
    wrote = write_evidence(doc, args.out, "probe")
    print_verdicts(doc)
    if state["stopped"]:
        err("probe", f"stopped: {state['stopped']} ({len(ended)} of {len(passes)} passes ran; "
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


