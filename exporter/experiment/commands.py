"""Subcommands `phase`, `evidence`, `probe` and `compare` (docs/interface.md section 7).

Exit codes: 0 done; 1 the sidecar refused (or, for `probe`, a request failed or a pass could not
be bracketed; the record is still written); 2 bad input (options, a corpus or evidence file).
`compare` has its own: 0 pass, 1 a gate failed, 2 cannot compare.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from exporter.experiment import evidence as ev
from exporter.experiment.client import SidecarClient, SidecarError
from exporter.experiment.compare import DIMENSIONS, MIN_REPETITIONS, compare, render

DEFAULT_SIDECAR = "http://127.0.0.1:19400"


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"expected a fraction in [0, 1), got {text!r}")
    return value


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    return int(text)


def _sidecar_options(parser: argparse.ArgumentParser, token: bool) -> None:
    parser.add_argument("--sidecar", default=DEFAULT_SIDECAR, metavar="URL",
                        help="the sidecar's base URL (default: %(default)s)")
    if token:
        parser.add_argument("--token-file", type=Path, required=True, metavar="F",
                            help="file holding the bearer token of the sidecar's "
                            "--events-token-file")


def add_phase(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("begin", "end"))
    parser.add_argument("name", help="1-64 of A-Z a-z 0-9 . _ / -, e.g. probe-52/1")
    _sidecar_options(parser, token=True)
    parser.add_argument("--note", help="free text stored with the capture (at most 256 chars)")


def add_evidence(parser: argparse.ArgumentParser) -> None:
    _sidecar_options(parser, token=False)
    parser.add_argument("--out", type=Path, required=True, metavar="DIR",
                        help="directory for evidence.json, evidence.md and evidence.png")
    parser.add_argument("--probe", action="append", default=[], metavar="PRIME:REPLAY",
                        help="judge this pair of phases (repeatable)")
    parser.add_argument("--prefix", action="append", default=[], metavar="PREFIX",
                        help="only phases whose name starts with PREFIX (repeatable; default: "
                        "every phase the sidecar keeps)")


def add_probe(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--engine-url", required=True, metavar="URL",
                        help="the engine's base URL (the probe POSTs to /v1/completions)")
    _sidecar_options(parser, token=True)
    parser.add_argument("--corpus", type=Path, required=True, metavar="FILE.jsonl",
                        help="one completion request body (a JSON object) per line")
    parser.add_argument("--replay-corpus", type=Path, metavar="FILE.jsonl",
                        help="send this corpus in every pass after the first (e.g. the same "
                        "prompts under another model)")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR",
                        help="directory for probe.json and the evidence report")
    parser.add_argument("--order", default="forward,reverse",
                        help="the passes' orders, comma-separated: forward or reverse; the "
                        "first pass primes, each later one replays (default: %(default)s)")
    parser.add_argument("--repetitions", type=_count, default=0, metavar="N",
                        help="then N more passes in the last order, phases NAME/1 ... NAME/N: "
                        "the repetitions `compare` reads (default: 0)")
    parser.add_argument("--name", help="phase name prefix (default: probe-<UTC time>)")
    # Not --timeout: HELIOS_EXPORTER_TIMEOUT is the sidecar's 2 s engine timeout in the same shell.
    parser.add_argument("--request-timeout", type=_positive, default=300.0, metavar="S",
                        help="seconds one completion may take (default: %(default)s)")


def add_compare(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--baseline", type=Path, required=True, metavar="A.json")
    parser.add_argument("--candidate", type=Path, required=True, metavar="B.json")
    parser.add_argument("--primary", required=True, metavar="LANE",
                        help="the lane that must improve (its phases LANE/1, LANE/2, ...)")
    parser.add_argument("--protected", action="append", default=[], metavar="LANE",
                        help="a lane that must not regress (repeatable)")
    parser.add_argument("--min-benefit", type=_fraction, default=0.05, metavar="F",
                        help="least relative improvement of the primary lane's mean latency "
                        "(default: %(default)s)")
    parser.add_argument("--max-regression", type=_fraction, default=0.03, metavar="F",
                        help="most relative slow-down of a protected lane (default: %(default)s)")
    parser.add_argument("--allow-difference", action="append", default=[], choices=DIMENSIONS,
                        metavar="DIM",
                        help="a declared difference between the arms' engines, one of "
                        f"{', '.join(DIMENSIONS)} (repeatable); any other difference refuses "
                        "the comparison")


def _err(command: str, message: str) -> None:
    print(f"helios-exporter {command}: {message}", file=sys.stderr)


def run_phase(args: argparse.Namespace) -> int:
    try:
        client = SidecarClient(args.sidecar, args.token_file)
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


def _write(doc: dict[str, Any], out: Path, command: str) -> None:
    written, missing = ev.write(doc, out)
    if missing:
        _err(command, missing)
    print(f"wrote {', '.join(str(p) for p in written)}", file=sys.stderr)


def run_evidence(args: argparse.Namespace) -> int:
    try:
        pairs = [ev.parse_pair(p) for p in args.probe]
    except ValueError as exc:
        _err("evidence", f"--probe: {exc}")
        return 2
    client = SidecarClient(args.sidecar)
    try:
        phases = client.phases()
    except SidecarError as exc:
        _err("evidence", str(exc))
        return 1
    finally:
        client.close()
    if args.prefix:
        phases = [p for p in phases if any(p["name"].startswith(x) for x in args.prefix)]
    _write(ev.build(phases, pairs, source=args.sidecar), args.out, "evidence")
    return 0


def run_probe(args: argparse.Namespace) -> int:
    from exporter.experiment import probe

    try:
        orders = probe.parse_orders(args.order)
        corpus = probe.read_corpus(args.corpus)
        replay = probe.read_corpus(args.replay_corpus) if args.replay_corpus else None
    except ValueError as exc:
        _err("probe", str(exc))
        return 2
    name = args.name or time.strftime("probe-%Y%m%dT%H%M%SZ", time.gmtime())
    try:
        client = SidecarClient(args.sidecar, args.token_file)
    except SidecarError as exc:
        _err("probe", str(exc))
        return 2
    started = time.time()
    passes = probe.plan(name, orders, args.repetitions, corpus, replay)
    try:
        records = probe.run_passes(args.engine_url, client, passes, args.request_timeout,
                                   progress=sys.stderr.isatty())
        record = probe.record_doc(name, args.engine_url, args.sidecar, corpus, replay, records,
                                  started)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / probe.RECORD_FILE).write_text(json.dumps(record, indent=1) + "\n")
        ours = {r.phase for r in records}
        try:
            phases = [p for p in client.phases() if p["name"] in ours]
        except SidecarError as exc:
            _err("probe", f"{exc}; probe.json is written, the evidence report is not")
            return 1
    finally:
        client.close()
    ended = [r.phase for r in records if r.end_error is None and r.begin_error is None]
    pairs = [(ended[0], later) for later in ended[1:]]
    summaries = [r.summary() for r in records]
    _write(ev.build(phases, pairs, summaries, source=args.sidecar), args.out, "probe")
    failed = sum(s["failed"] for s in summaries)
    incomplete = len(ended) < len(passes)
    for pair in ev.build(phases, pairs)["probes"]:
        print(f"{pair['prime']} -> {pair['replay']}: {pair['verdict']}")
    if failed or incomplete:
        _err("probe", f"{failed} requests failed" + (
            f"; {len(passes) - len(ended)} of {len(passes)} passes not bracketed"
            if incomplete else "") + f" (see {args.out / probe.RECORD_FILE})")
        return 1
    return 0


def run_compare(args: argparse.Namespace) -> int:
    docs = []
    for path in (args.baseline, args.candidate):
        try:
            doc = json.loads(path.read_text())
            if not isinstance(doc, dict) or not isinstance(doc.get("phases"), list):
                raise ValueError("not an evidence.json (no phases list)")
        except (OSError, ValueError) as exc:
            _err("compare", f"{path}: {exc}")
            return 2
        docs.append(doc)
    result = compare(docs[0], docs[1], args.primary, args.protected, args.min_benefit,
                     args.max_regression, args.allow_difference)
    sys.stdout.write(render(result, str(args.baseline), str(args.candidate)))
    return result.exit_code


COMMANDS = {
    "phase": ("begin or end an experiment phase on a sidecar", add_phase, run_phase),
    "evidence": ("write evidence.json, evidence.md and a picture from a sidecar's phases",
                 add_evidence, run_evidence),
    "probe": ("run the cache-order probe from a corpus, each pass a phase, then the evidence",
              add_probe, run_probe),
    "compare": (f"gate a candidate arm against a baseline ({MIN_REPETITIONS} repetitions a lane)",
                add_compare, run_compare),
}
