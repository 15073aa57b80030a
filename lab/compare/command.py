"""`helios-exporter compare` (docs/interface.md section 7): gate a candidate arm against a
baseline. Exit codes: 0 admitted, 1 not admitted, 2 cannot compare.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from exporter import jsonfile
from exporter.options import Option
from lab.compare import identity, semantic
from lab.compare.admission import CANNOT_COMPARE, TEAM_RECORDS, compare
from lab.compare.text import render
from lab.evidence.command import err
from lab.evidence.schema import SchemaError, check_evidence

OPTIONS = (
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


def run(args: argparse.Namespace) -> int:
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
