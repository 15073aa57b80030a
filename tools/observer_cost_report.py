"""Regenerate the observer-cost report docs/experiments.md section 7 shows, by running its
commands against the simulated engine: `python -m tools.observer_cost_report` (about a minute).

It starts `helios-exporter simulate --scenario idle --seed 1 --time-scale 20 --trace-cost 0.05`
and a sidecar on free ports of 127.0.0.1, runs `observer-cost` exactly as the page shows it (the
trace switched with curl and verified by the snapshot's simulator.trace.enabled, C1 and C4,
three pairs of repetitions of 64 requests, seed 7) in a
temporary folder, copies observer-cost.md and observer-cost.png into
docs/experiments/observer-cost/ and plan.json and observer-cost.json (what the tests read) into
tests/fixtures/experiments/observer-cost/, and puts the report's result into docs/experiments.md
(the block after its `observer-cost result` marker). A command that fails stops it with its output.
"""

from __future__ import annotations

import re
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tools.harness import PYTHON, ROOT, Procs

OUT = ROOT / "docs" / "experiments" / "observer-cost"
DATA = ROOT / "tests" / "fixtures" / "experiments" / "observer-cost"
PAGE = ROOT / "docs" / "experiments.md"
MARKER = "<!-- observer-cost result: tests/lab/observer_cost/test_docs.py -->\n"
FILES = {"plan.json": DATA, "observer-cost.json": DATA, "observer-cost.md": OUT,
         "observer-cost.png": OUT}
ENGINE = ("--seed", "1", "--time-scale", "20", "--trace-cost", "0.05")


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="observer-cost-report-") as tmp:
        work = Path(tmp)
        procs = Procs(work / "procs")
        try:
            token = work / "token"
            token.write_text(secrets.token_hex(16) + "\n")
            _, engine = procs.simulator("idle", *ENGINE, name="engine")
            _, sidecar = procs.sidecar(engine, "--events-token-file", str(token),
                                       "--poll-interval", "3600", state_dir=work / "state",
                                       name="sidecar")
            corpus = subprocess.run([PYTHON, "-m", "simulator", "corpus", "fixture-1024"],
                                    cwd=ROOT, capture_output=True, text=True, check=True,
                                    timeout=60).stdout
            (work / "fixture-1024.jsonl").write_text(corpus)
            trace = (f"curl -fsS -XPOST {engine}/admin/trace -H 'content-type: "
                     "application/json' -d")
            done = subprocess.run(
                [PYTHON, "-m", "commands", "observer-cost", "--engine-url", engine,
                 "--sidecar", sidecar, "--token-file", "token", "--corpus",
                 "fixture-1024.jsonl", "--on", trace + " '{\"enabled\": true}'",
                 "--off", trace + " '{\"enabled\": false}'", "--out", "trace",
                 "--witness", "snapshot:simulator.trace.enabled",
                 "--name", "trace", "--seed", "7", "--requests", "64"],
                cwd=work, capture_output=True, text=True, check=False, timeout=600)
            if done.returncode != 0:
                sys.exit(f"observer-cost: exit {done.returncode}\n{done.stdout}{done.stderr}")
            print(done.stdout, end="")
        finally:
            procs.stop_all()
        for name, folder in FILES.items():
            folder.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(work / "trace" / name, folder / name)
    show_result()
    print(f"wrote {', '.join(str((f / n).relative_to(ROOT)) for n, f in FILES.items())} and "
          f"{PAGE.relative_to(ROOT)}")
    return 0


def result_block(report: str) -> str:
    """The report's result: its table and one sentence per concurrency."""
    found = re.search(r"## Result\n\n(.*?)\n\n!\[", report, re.S)
    if found is None:
        sys.exit("observer-cost.md has no result section")
    return found.group(1)


def show_result() -> None:
    """The page's copy of the result, between the marker and the paragraph after it."""
    head, rest = PAGE.read_text().split(MARKER)
    tail = rest[rest.index("\n\nTop:"):]
    PAGE.write_text(head + MARKER + result_block((OUT / "observer-cost.md").read_text()) + tail)


if __name__ == "__main__":
    sys.exit(main())
