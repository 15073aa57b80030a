"""What the sidecar's polling costs the engine, measured by `helios-exporter observer-cost` with
the polling as the observer (docs/experiments.md section 7).

    .venv/bin/python bench/observer_cost.py [--repetitions 3] [--requests 2400] [--json PATH]

One simulated engine (`simulate --scenario idle --time-scale F`, seed 7) for the whole run, one
sidecar that only brackets the phases (`--poll-interval 3600`: it polls at phase edges and
nowhere else), and the observer: a second sidecar polling at the production interval (5 s, from
exporter.defaults), started by `--on` and stopped by `--off` (this script's `switch on|off`). The
command warms C1 and C4 on their own, runs the fixture-1024 corpus `--requests` times a
repetition in an order drawn from `--seed`, checks every repetition and judges on the client's
clock: the simulator's histogram records the latency it models, which polling does not touch, so
only the client can see what polling costs. The benchmark's JSON keeps observer-cost.json under
`observer_cost` without the per-request records and edge readings, which stay in the run's folder
(`run`).

`switch on|off --state FILE` is the observer's switch: `on` starts the polling sidecar detached
and returns once its /readyz answers; `off` stops the one FILE names (SIGTERM, then SIGKILL).
`witness --state FILE` is observer-cost's `--witness command:...`: the time of the polling
sidecar's latest successful poll of the engine's snapshot (its
`helios_exporter_source_last_success_timestamp_seconds`), or 0 when no polling sidecar runs. It
grows across a repetition only if the observer polled during it, so a repetition must last longer
than the 5 s interval: the default 2,400 requests take about 6 s at C4 (1,600, the default
before, took about 4 s there, and most of those repetitions held no poll at all).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import PYTHON, ROOT, Procs, free_port, install_sigterm, loadavg, machine, write_json

sys.path.insert(0, str(ROOT))
from exporter.defaults import POLL_INTERVAL
from simulator.corpora import write_corpus

TOKEN = "bench-observer-0123456789abcdef"


# -- the observer's switch (run by observer-cost's --on / --off) --------------------------------
def switch(action: str, state: Path, engine: str) -> int:
    """Start or stop the polling sidecar whose pid and port `state` keeps."""
    if action == "off":
        if not state.exists():
            return 0
        pid = json.loads(state.read_text())["pid"]
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                os.kill(pid, 0)  # ProcessLookupError once it is gone
                time.sleep(0.05)
            os.kill(pid, signal.SIGKILL)
        state.unlink()
        return 0
    if state.exists():
        return 0  # on already
    port = free_port()
    log = state.with_suffix(".log").open("ab")
    proc = subprocess.Popen(
        [PYTHON, "-m", "exporter", "serve", "--engine-url", engine,
         "--listen", f"127.0.0.1:{port}", "--poll-interval", str(POLL_INTERVAL), "--no-nvml",
         "--state-dir", str(state.with_suffix(".state")), "--log-format", "json"],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        start_new_session=True)
    state.write_text(json.dumps({"pid": proc.pid, "port": port}))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                return 0
        if proc.poll() is not None:
            print(f"the polling sidecar exited {proc.returncode}", file=sys.stderr)
            state.unlink()
            return 1
        time.sleep(0.1)
    print("the polling sidecar did not become ready in 60 s", file=sys.stderr)
    return 1


WITNESS_SERIES = 'helios_exporter_source_last_success_timestamp_seconds{source="engine_snapshot"}'


def witness(state: Path) -> int:
    """Print the polling sidecar's latest successful snapshot poll (Unix seconds), 0 without one."""
    if not state.exists():
        print(0)
        return 0
    port = json.loads(state.read_text())["port"]
    try:
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    except httpx.HTTPError as exc:
        print(f"the polling sidecar does not answer: {exc}", file=sys.stderr)
        return 1
    for line in text.splitlines():
        if line.startswith(WITNESS_SERIES + " "):
            print(line.split()[-1])
            return 0
    print(f"the polling sidecar's /metrics has no {WITNESS_SERIES}", file=sys.stderr)
    return 1


# -- the benchmark ------------------------------------------------------------------------------
def measure(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    procs = Procs(work)
    state = work / "observer.json"
    # Relative to the repository (observer-cost runs the switch there): no machine's paths in
    # the stored result.
    python = os.path.relpath(PYTHON, ROOT) if Path(PYTHON).is_relative_to(ROOT) else PYTHON
    me = [python, str(Path(__file__).resolve().relative_to(ROOT)), "switch"]
    try:
        _, engine = procs.simulator("--time-scale", str(args.time_scale), scenario="idle",
                                    seed=7)
        token = work / "token"
        token.write_text(TOKEN + "\n")
        _, sidecar = procs.sidecar(engine, "--events-token-file", str(token),
                                   "--poll-interval", "3600", name="bracket")
        corpus = work / "fixture-1024.jsonl"
        with corpus.open("w") as f:
            write_corpus("fixture-1024", f)
        out = work / "run"
        command = [
            PYTHON, "-m", "commands", "observer-cost", "--engine-url", engine,
            "--sidecar", sidecar, "--token-file", str(token), "--corpus", str(corpus),
            "--out", str(out), "--latency-source", "client", "--seed", str(args.seed),
            "--repetitions", str(args.repetitions), "--requests", str(args.requests),
            "--settle", str(args.settle), "--name", "bench-polling",
            "--on", shlex.join([*me, "on", "--state", str(state), "--engine-url", engine]),
            "--off", shlex.join([*me, "off", "--state", str(state), "--engine-url", engine]),
            "--witness", "command:" + shlex.join([*me[:2], "witness", "--state", str(state)])]
        started = time.monotonic()
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False,
                              timeout=args.max_seconds)
        print(done.stderr, file=sys.stderr, end="")
        doc = json.loads((out / "observer-cost.json").read_text())
    finally:
        switch("off", state, "")
        procs.stop_all()
    m = machine()
    return {"benchmark": "observer_cost",
            "measured": {"date": m["date"], "git_commit": m["git_commit"],
                         "exporter_tree_dirty": m["exporter_tree_dirty"]},
            "time_scale": args.time_scale, "poll_interval": POLL_INTERVAL,
            "exit_code": done.returncode, "seconds": time.monotonic() - started,
            "observer_cost": compact(doc), "run": str(out), "loadavg_after": loadavg()}


def compact(doc: dict[str, Any]) -> dict[str, Any]:
    """observer-cost.json without what stays in the run's folder (each request, each edge's
    readings): every step keeps its figures, its validity and the checks it failed."""
    steps = [{"phase": s["phase"], "concurrency": s["concurrency"], "arm": s["arm"],
              "number": s["number"], "valid": s["valid"], "figures": s["figures"],
              "failing": [c for c in s["checks"] if c["ok"] is not True]}
             for s in doc["steps"]]
    return {**{k: v for k, v in doc.items() if k != "steps"}, "steps": steps}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command")
    sw = sub.add_parser("switch", help="the observer's switch (observer-cost runs it)")
    sw.add_argument("action", choices=("on", "off"))
    sw.add_argument("--state", type=Path, required=True)
    sw.add_argument("--engine-url", default="")
    wi = sub.add_parser("witness", help="the observer's latest poll (observer-cost reads it)")
    wi.add_argument("--state", type=Path, required=True)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--requests", type=int, default=2400,
                        help="requests a repetition (default: %(default)s, 150 passes of the "
                        "fixture: about 25 s at C1 and 6 s at C4, longer than the 5 s between "
                        "polls)")
    parser.add_argument("--time-scale", type=float, default=100.0)
    parser.add_argument("--settle", type=float, default=1.0,
                        help="seconds after each switch (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--max-seconds", type=float, default=600.0)
    parser.add_argument("--json", type=Path, metavar="PATH")
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    if args.command == "switch":
        return switch(args.action, args.state, args.engine_url)
    if args.command == "witness":
        return witness(args.state)
    install_sigterm()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-observer-"))
    work.mkdir(parents=True, exist_ok=True)
    result = measure(args, work)
    write_json(args.json, result)
    for r in result["observer_cost"]["results"]:
        print(f"C{r['concurrency']}: {r['sentence']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
