"""``python -m simulator semantic-check BASELINE.json CANDIDATE.json``: the simulator's stand-in
for the engine team's semantic gate (``compare --semantic-command``).

A real engine team checks that a candidate's outputs are right against a numerical reference;
for the simulated engine the reference is simulator.outputs, which says what text each prompt
gets. For every pass of both evidence files it reads the probe's record (the pass's ``record``)
and, beside it, outputs.jsonl with every answer, finds each answer's prompt in the record's
corpus, and checks that the answer's text is the reference text of its length. Exit 0: every
answer is right; 1: one is not (named); 2: the records, corpora or answers cannot be read, so
nothing was checked. ``--verdict-out FILE`` also writes the verdict ``compare
--semantic-verdict`` takes, naming the SHA-256 of the two files it judged.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from exporter import jsonfile
from simulator import outputs
from simulator.app import tokenize

OUTPUTS_FILE = "outputs.jsonl"


class Unchecked(Exception):
    """Something needed for the check cannot be read."""


def _json(path: Path) -> Any:
    try:
        return jsonfile.read(path)
    except jsonfile.JsonInputError as exc:
        raise Unchecked(str(exc)) from None


def _answers(evidence: Path) -> Iterator[tuple[str, dict[str, Any], dict[str, Any], str]]:
    """(where, body, answer, checkpoint) of every answer of every pass of an evidence file."""
    doc = _json(evidence)
    checkpoints = {p["name"]: ((p.get("begin") or {}).get("identity") or {}).get("checkpoint")
                   for p in doc.get("phases") or []}
    passes = doc.get("passes") or []
    if not passes:
        raise Unchecked(f"{evidence}: no probe passes (write the evidence with --probe-record)")
    for record_path in sorted({str(p.get("record")) for p in passes}):
        record = _json(Path(record_path))
        bodies: dict[str, dict[str, Any]] = {}
        for about in (record.get("corpus"), record.get("replay_corpus")):
            if about:
                try:
                    for raw in Path(about["path"]).read_bytes().splitlines():
                        if raw.strip():
                            bodies[hashlib.sha256(raw).hexdigest()] = jsonfile.loads(raw, about["path"])
                except (OSError, ValueError) as exc:
                    raise Unchecked(f"{about['path']}: {exc}") from None
        log = Path(record_path).parent / OUTPUTS_FILE
        try:
            lines = log.read_text().splitlines()
        except OSError as exc:
            raise Unchecked(f"{log}: {exc.strerror or exc}") from None
        for line in lines:
            try:
                entry = jsonfile.loads(line.encode(), str(log))
            except jsonfile.JsonInputError as exc:
                raise Unchecked(str(exc)) from None
            phase = entry["phase"]
            if phase not in checkpoints:
                continue
            where = f"{phase} #{entry['position']}"
            if entry.get("status") != 200:
                raise Unchecked(f"{where}: HTTP {entry.get('status')}, no answer to check")
            body = bodies.get(entry["sha256"])
            if body is None:
                raise Unchecked(f"{where}: body {entry['sha256'][:12]} is not in the corpus")
            try:
                answer = jsonfile.loads(str(entry["answer"]).encode(), where)
            except jsonfile.JsonInputError as exc:
                raise Unchecked(str(exc)) from None
            yield where, body, answer, str(checkpoints[phase])


def check(paths: list[Path]) -> tuple[int, str]:
    """(exit code, what it says) of the check of these evidence files."""
    n = 0
    try:
        for evidence in paths:
            for where, body, answer, checkpoint in _answers(evidence):
                n += 1
                text = answer["choices"][0]["text"]
                tokens = answer["usage"]["completion_tokens"]
                want = outputs.text(checkpoint, answer["model"], tokenize(body["prompt"]),
                                    tokens)
                if text != want:
                    return 1, f"{evidence}: {where}: the text is not the reference answer"
    except Unchecked as exc:
        return 2, f"not checked: {exc}"
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        return 2, f"not checked: an answer without its text or usage ({exc!r})"
    return 0, f"{n} answers are the simulated model's reference text for their prompts"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m simulator semantic-check",
                                     description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("evidence", nargs=2, type=Path, metavar="EVIDENCE.json")
    parser.add_argument("--verdict-out", type=Path, metavar="FILE",
                        help="also write the verdict for compare --semantic-verdict")
    args = parser.parse_args(argv)
    code, said = check(args.evidence)
    print(said)
    if args.verdict_out is not None and code in (0, 1):
        baseline, candidate = args.evidence
        args.verdict_out.write_text(json.dumps({
            "semantic_gate": "pass" if code == 0 else "fail",
            "method": "python -m simulator semantic-check: " + said,
            "baseline_sha256": hashlib.sha256(baseline.read_bytes()).hexdigest(),
            "candidate_sha256": hashlib.sha256(candidate.read_bytes()).hexdigest(),
        }, indent=1) + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
