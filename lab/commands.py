"""Subcommands `phase`, `evidence`, `probe`, `compare` and `observer-cost` (docs/interface.md
section 7): `phase` and `compare` here, `evidence` in lab/evidence_command.py, `probe` in
lab/probe_command.py, `observer-cost` in lab/observer_cost/command.py; COMMANDS is the table
exporter/cli.py loads by name.

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
from pathlib import Path

from exporter import jsonfile
from exporter.options import Option
from lab import identity
from lab.client import SidecarError, connect
from lab.compare import semantic
from lab.compare.admission import CANNOT_COMPARE, MIN_REPETITIONS, TEAM_RECORDS, compare
from lab.compare.text import render
from lab.evidence_command import EVIDENCE, err, run_evidence, sidecar_options
from lab.observer_cost import command as observer_cost
from lab.probe_command import PROBE, run_probe
from lab.schema import SchemaError, check_evidence

PHASE = (
    Option("action", "str", help="begin or end the phase", choices=("begin", "end")),
    Option("name", "text", help="1-64 of A-Z a-z 0-9 . _ / -, e.g. probe-52/1"),
    *sidecar_options(token=True),
    Option("--note", "text", None, "free text stored with the capture (at most 256 chars)"),
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


def run_phase(args: argparse.Namespace) -> int:
    try:
        client = connect(args, args.token_file)
    except SidecarError as exc:
        err("phase", str(exc))
        return 2
    try:
        answer = client.phase(args.action, args.name, args.note)
    except SidecarError as exc:
        err("phase", str(exc))
        return 1
    finally:
        client.close()
    print(json.dumps(answer, indent=1, sort_keys=True))
    return 0


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
        err("compare", "; ".join(said + [f"--allow-difference {w}" for w in wrong]))
        return CANNOT_COMPARE
    docs = []
    for path in (args.baseline, args.candidate):
        try:
            doc = jsonfile.read(path)
        except jsonfile.JsonInputError as exc:
            err("compare", str(exc))
            return CANNOT_COMPARE
        try:
            check_evidence(doc)
        except SchemaError as exc:
            err("compare", f"{path}: not a usable evidence.json: {exc}")
            return CANNOT_COMPARE
        docs.append(doc)
    records: dict[str, tuple[str, str]] = {}
    for text in args.team_record:
        kind, sep, name = text.partition("=")
        if not sep or kind not in TEAM_RECORDS or not name:
            err("compare", f"--team-record takes KIND=FILE with KIND one of "
                 f"{', '.join(TEAM_RECORDS)}, got {text[:80]!r}")
            return CANNOT_COMPARE
        try:
            records[kind] = (name, semantic.sha256_of(Path(name)))
        except OSError as exc:
            err("compare", f"--team-record {kind}: {name}: {exc.strerror or exc}")
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


OBSERVER_COST = (*sidecar_options(token=True), *observer_cost.OPTIONS)


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
