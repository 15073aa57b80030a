"""Regenerate the SIMULATED reports docs/experiments.md shows, by running its simulator
walk-through against the simulated engine: `python -m tools.experiment_reports` (a few minutes).

It starts `helios-exporter simulate` and `helios-exporter serve` on free ports of 127.0.0.1 and
runs `probe`, `evidence`, `python -m simulator semantic-check` and `compare` through the command
line as the page shows them. What a reader needs goes to docs/experiments/ (evidence.md and
evidence.png of the probe and of each arm, all labelled SIMULATED, and the compare output block
of docs/experiments.md); what the tests read goes to tests/fixtures/experiments/ (the evidence.json
files and the semantic verdict on the two arms). The probe records (probe.json, outputs.jsonl)
stay in a temporary folder: the evidence carries their passes. A command that fails stops it
with that command's output.
"""

from __future__ import annotations

import re
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from tools.harness import PYTHON, ROOT, Procs

DOCS = ROOT / "docs"
PAGE = DOCS / "experiments.md"
FIXTURES = ROOT / "tests" / "fixtures" / "experiments"
REPORTS = ("probe", "arms/baseline", "arms/candidate")
SEMANTIC_VERDICT = FIXTURES / "arms" / "semantic-verdict.json"
ARM_IDENTITY = ("--seed", "1", "--image-digest",
                "sha256:9f2c5e0d7b3a41c8e6f0a2b4c6d8e0f1a3b5c7d9e1f3a5b7c9d1e3f5a7b9c1d3",
                "--container-id", "4be1c0ffee12", "--time-scale", "200")
# What the snapshot does not say about an engine, declared to the probe (the simulated engine
# has no GPU: its power limit is declared as such).
DECLARE = ("--declare", "runtime=helios-2.14.0+47581cca", "--declare", "quantization=w4a16",
           "--declare", "speculation=off", "--declare", "recipe=tp2-c1", "--declare",
           "power_limit=none-simulated")
ARMS = {"baseline": "0.25", "candidate": "0.3125"}
ARM_LANES = ("probe-52", "small-12", "long-context")
# prime:replay name, corpus, replay corpus, order: the control runs' outcomes and the other lanes
PROBES = (("reverse", "probe-52", None, "forward,reverse"),
          ("forward", "probe-52", None, "forward,forward"),
          ("other-model", "probe-52", "probe-52-other-model", "forward,forward"),
          ("control", "control-52", None, "forward,forward"),
          ("small", "small-12", None, "forward,forward"),
          ("long", "long-context", None, "forward,forward"))
COMPARE_ARGS = ("--primary", "probe-52", "--protected", "small-12", "--protected", "long-context",
                "--allow-difference", "allocator",
                "--semantic-verdict", str(SEMANTIC_VERDICT.relative_to(ROOT)))


def run(*args: str, ok: Sequence[int] = (0,)) -> str:
    done = subprocess.run([PYTHON, *args], cwd=ROOT, capture_output=True, text=True,
                          check=False, timeout=900)
    if done.returncode not in ok:
        sys.exit(f"{' '.join(args)}: exit {done.returncode}\n{done.stdout}{done.stderr}")
    return done.stdout


def corpora(work: Path) -> dict[str, Path]:
    out = {}
    for name in ("probe-52", "control-52", "small-12", "long-context"):
        out[name] = work / f"{name}.jsonl"
        out[name].write_text(run("-m", "simulator", "corpus", name))
    out["probe-52-other-model"] = work / "probe-52-other-model.jsonl"
    out["probe-52-other-model"].write_text(
        run("-m", "simulator", "corpus", "probe-52", "--model", "qwen3-next-lora-support"))
    return out


def fresh(engine: str) -> str:
    """`probe --fresh-command` for the simulated engine: a new incarnation, same container."""
    return (f"{PYTHON} -c \"import httpx; httpx.post('{engine}/admin/restart', json={{'container':"
            f" 'same'}}, timeout=30).raise_for_status()\"")


def stack(procs: Procs, work: Path, name: str, *engine: str) -> tuple[str, list[str]]:
    """An engine and its sidecar; the engine's URL and the sidecar options of every command."""
    token = work / "token"
    token.write_text(secrets.token_hex(16) + "\n")
    _, engine_url = procs.simulator("idle", *engine, name=f"engine-{name}")
    _, sidecar = procs.sidecar(engine_url, "--events-token-file", str(token),
                               state_dir=work / f"state-{name}", name=f"sidecar-{name}")
    return engine_url, ["--sidecar", sidecar, "--token-file", str(token)]


def probe_report(procs: Procs, work: Path, corpus: dict[str, Path]) -> None:
    engine, sidecar = stack(procs, work, "probe", "--seed", "1", "--time-scale", "200")
    runs = []
    for name, lane, replay, order in PROBES:
        out = work / "runs" / name
        extra = ["--replay-corpus", str(corpus[replay])] if replay else []
        run("-m", "commands", "probe", "--engine-url", engine, *sidecar, "--corpus",
            str(corpus[lane]), *extra, "--out", str(out), "--name", name, "--order", order,
            "--fresh-command", fresh(engine))
        runs.append(str(out))
    pairs = []
    for name, _, _, order in PROBES:
        first, second = order.split(",")
        pairs += ["--probe", f"{name}/{first}-1:{name}/{second}-2"]
    print(run("-m", "commands", "evidence", *sidecar[:2], "--out", str(work / "reports" / "probe"),
              *pairs, "--probe-record", *runs), end="")


def arm(procs: Procs, work: Path, corpus: dict[str, Path], name: str, fraction: str) -> None:
    engine, sidecar = stack(procs, work / name, name, *ARM_IDENTITY, "--row-fraction", fraction)
    records = []
    for lane in ARM_LANES:
        out = work / name / lane
        run("-m", "commands", "probe", "--engine-url", engine, *sidecar, "--corpus",
            str(corpus[lane]), "--out", str(out), "--name", lane, "--order", "forward,forward",
            "--repetitions", "3", "--fresh-command", fresh(engine), *DECLARE)
        records.append(str(out))
    run("-m", "commands", "evidence", *sidecar[:2], "--out",
        str(work / "reports" / "arms" / name), "--probe-record", *records)


def publish(work: Path) -> None:
    """The JSON to the tests' fixtures, the markdown and the picture to docs/."""
    for report in REPORTS:
        made = work / "reports" / report
        (FIXTURES / report).mkdir(parents=True, exist_ok=True)
        (DOCS / "experiments" / report).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(made / "evidence.json", FIXTURES / report / "evidence.json")
        for name in ("evidence.md", "evidence.png"):
            shutil.copyfile(made / name, DOCS / "experiments" / report / name)
        (DOCS / "experiments" / report / "evidence.json").unlink(missing_ok=True)


def semantic_verdict() -> None:
    """The simulator's stand-in for the engine team's semantic check, run while the records
    exist, on the arms' evidence as the tests keep it."""
    print(run("-m", "simulator", "semantic-check",
              str(FIXTURES / "arms" / "baseline" / "evidence.json"),
              str(FIXTURES / "arms" / "candidate" / "evidence.json"),
              "--verdict-out", str(SEMANTIC_VERDICT)), end="")


def compare_block() -> None:
    arms = FIXTURES.relative_to(ROOT) / "arms"
    printed = run("-m", "commands", "compare", "--baseline", f"{arms}/baseline/evidence.json",
                  "--candidate", f"{arms}/candidate/evidence.json", *COMPARE_ARGS, ok=(0, 1, 2))
    page = PAGE.read_text()
    block = re.compile(r"(<!-- compare output[^>]*-->\n```text\n)(.*?)(```)", re.S)
    if not block.search(page):
        sys.exit(f"{PAGE}: no compare output block")
    PAGE.write_text(block.sub(lambda m: m.group(1) + printed + m.group(3), page, count=1))
    print(printed, end="")


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="helios-experiments-") as tmp:
        work = Path(tmp)
        procs = Procs(work / "procs")
        try:
            corpus = corpora(work)
            probe_report(procs, work, corpus)
            for name, fraction in ARMS.items():
                (work / name).mkdir()
                arm(procs, work, corpus, name, fraction)
        finally:
            procs.stop_all()
        publish(work)
        semantic_verdict()
    compare_block()
    return 0


if __name__ == "__main__":
    sys.exit(main())
