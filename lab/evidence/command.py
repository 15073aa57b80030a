"""`helios-exporter evidence` (docs/interface.md section 7), and what the lab's sidecar commands
share: the options that reach a sidecar, how a command words an error, and the evidence files
`evidence` and `probe` write (lab/evidence/document.py, lab/evidence/report.py's EVIDENCE)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from exporter.options import Option
from lab.client import access
from lab.client.sidecar import SidecarError, connect
from lab.evidence import doc as ev
from lab.evidence import document, report
from lab.probe import record

DEFAULT_SIDECAR = "http://127.0.0.1:19400"


def sidecar_options(token: bool) -> tuple[Option, ...]:
    return (
        Option("--sidecar", "str", DEFAULT_SIDECAR, "the sidecar's base URL", metavar="URL"),
        *([Option("--token-file", "path", None, "file holding the bearer token of the sidecar's "
                  "--events-token-file", required=True, metavar="F")] if token else []),
        *access.OPTIONS,
    )


OPTIONS = (
    *sidecar_options(token=False),
    Option("--token-file", "path", None, "file holding the bearer token of the sidecar's "
           "--events-token-file (GET /experiment/phases needs it when the sidecar has one)",
           metavar="F"),
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


def err(command: str, message: str) -> None:
    print(f"helios-exporter {command}: {message}", file=sys.stderr)


def write_evidence(doc: dict[str, Any], out: Path, command: str) -> bool:
    try:
        written, missing = document.write(doc, out, report.EVIDENCE)
    except OSError as exc:
        err(command, f"cannot write the evidence into {out}: {exc.strerror or exc}")
        return False
    if missing:
        err(command, missing)
    print(f"wrote {', '.join(str(p) for p in written)}", file=sys.stderr)
    return True


def print_verdicts(doc: dict[str, Any]) -> None:
    if doc["probes"] and doc.get("simulated"):
        print("SIMULATED: the simulated engine answered these passes; the verdicts describe it, "
              "not Helios")
    for pair in doc["probes"]:
        print(f"{pair['prime']} -> {pair['replay']}: {pair['verdict']} ({pair['reading']})")
    for check in (doc.get("engine") or {}).get("not_checked", ()):
        print(f"not checked on {doc['engine']['kind']}: {check['check']}: {check['missing']}")


def run(args: argparse.Namespace) -> int:
    try:
        pairs = [ev.parse_pair(p) for p in args.probe]
    except ValueError as exc:
        err("evidence", f"--probe: {exc}")
        return 2
    own = args.out / record.RECORD_FILE
    paths = list(args.probe_record)
    if own.is_file() and own.resolve() not in {record.record_path(p).resolve() for p in paths}:
        paths.append(own)
    try:
        record.prepare_out(args.out)
        passes = record.read_passes(paths)
        client = connect(args, args.token_file)
    except (record.RecordError, SidecarError) as exc:
        err("evidence", str(exc))
        return 2
    try:
        phases = client.phases()
    except SidecarError as exc:
        err("evidence", str(exc))
        return 1
    finally:
        client.close()
    known = {p["name"] for p in phases}
    unknown = sorted(p["phase"] for p in passes if p["phase"] not in known)
    if unknown:
        err("evidence", f"{len(unknown)} recorded passes are not among the sidecar's phases "
             f"(left out): {', '.join(unknown[:5])}{' ...' if len(unknown) > 5 else ''}")
    if args.prefix:
        phases = [p for p in phases if any(p["name"].startswith(x) for x in args.prefix)]
    doc = ev.build(phases, pairs, passes, source=args.sidecar, simulated=args.simulated)
    if not write_evidence(doc, args.out, "evidence"):
        return 1
    print_verdicts(doc)
    return 0


