"""The semantic gate: the engine team's own check that the outputs are right, which `compare`
cannot make (it sees output hashes and token counts, not what the text means).

It is supplied in one of two ways, and without either it is not evaluated (and nothing is
admitted):

- `--semantic-command CMD`: `compare` runs CMD (split like a shell would, no shell) with the two
  evidence files appended as arguments, baseline first. Exit 0: the outputs pass; 1: they fail;
  anything else, or no exit within the timeout: not evaluated. Its last line of output is shown.
- `--semantic-verdict FILE`: a JSON verdict the engine team wrote, `{"semantic_gate": "pass" |
  "fail", "baseline_sha256": "...", "candidate_sha256": "...", "method": "..."}`. The two
  hashes are the SHA-256 of the evidence files it judged: a verdict on other files (an older
  run, a regenerated evidence file) is not evaluated.
"""

from __future__ import annotations

import hashlib
import shlex
import subprocess
from pathlib import Path
from typing import Final

from exporter import jsonfile

HOLDS, FAILS, NOT_EVALUATED = "holds", "FAILS", "not evaluated"
TAIL_CHARS: Final = 200


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def from_command(command: str, baseline: Path, candidate: Path,
                 timeout: float) -> tuple[str, str]:
    """(status, what it said) of the engine team's command on the two evidence files."""
    try:
        argv = [*shlex.split(command), str(baseline), str(candidate)]
    except ValueError as exc:
        return NOT_EVALUATED, f"--semantic-command cannot be split: {exc}"
    shown = f"`{command}`"
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError:
        return NOT_EVALUATED, f"{shown}: {argv[0]} not found"
    except OSError as exc:
        return NOT_EVALUATED, f"{shown} could not run: {exc.strerror or exc}"
    except subprocess.TimeoutExpired:
        return NOT_EVALUATED, f"{shown} did not finish within {timeout:g} s"
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    said = f": {lines[-1][:TAIL_CHARS]}" if lines else ""
    if done.returncode == 0:
        return HOLDS, f"{shown} exited 0{said}"
    if done.returncode == 1:
        return FAILS, f"{shown} exited 1{said}"
    return NOT_EVALUATED, f"{shown} exited {done.returncode} (neither pass nor fail){said}"


def from_verdict(path: Path, baseline: Path, candidate: Path) -> tuple[str, str]:
    """(status, what it says) of a verdict file, if it judged exactly these two files."""
    try:
        doc = jsonfile.read(path, max_bytes=1 << 20)
    except jsonfile.JsonInputError as exc:
        return NOT_EVALUATED, str(exc)
    if not isinstance(doc, dict) or doc.get("semantic_gate") not in ("pass", "fail"):
        return NOT_EVALUATED, f'{path}: no "semantic_gate": "pass" or "fail"'
    for role, given in (("baseline", baseline), ("candidate", candidate)):
        if doc.get(f"{role}_sha256") != sha256_of(given):
            return NOT_EVALUATED, (f"{path} judged other evidence: its {role}_sha256 is not "
                                   f"the SHA-256 of {given}")
    method = str(doc.get("method") or "no method named")[:TAIL_CHARS]
    if doc["semantic_gate"] == "pass":
        return HOLDS, f"{path} passes these two files ({method})"
    return FAILS, f"{path} fails these two files ({method})"
