"""The benchmark suite behind bench/run: every section in one run, then docs/benchmarks.md.

    bench/run                 # full (about 7 min on 2 cores), writes docs/benchmarks.md
    bench/run --quick         # smoke (about 2 min), writes <workdir>/benchmarks.md unless --out
    bench/run --only ingest poll_cost --out /tmp/b.md

Each section runs as its own process (a fresh interpreter, so one section's imports, threads and
garbage do not weigh on the next), in its own process group, under a time bound: on overrun it
gets SIGTERM (its `finally` stops what it started), then the whole group SIGKILL. A section that
fails or overruns is reported as "not measured" with the reason; the others still run. Raw
results go to <workdir>/results.json, process logs under <workdir>/ (kept; the path is printed).
`bench/report/report.py results.json` re-renders the markdown from a results file.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `bench` importable
from benchlib import PYTHON, ROOT, host_cpu_busy, loadavg, machine, with_folders_named

from bench.report import report

BENCH = ROOT / "bench"
SECTIONS = ("scrape_load", "ingest", "poll_cost", "soak", "alert_latency", "nvml_poll",
            "observer_cost", "scrape_cost", "scale")
# Run unless --only says otherwise; `scale` (an hour or more) only with --scale or --only scale,
# and the page shows its stored result (bench/results/scale.json) otherwise.
DEFAULT_SECTIONS = SECTIONS[:-1]


def plan(quick: bool, work: Path) -> dict[str, dict[str, Any]]:
    """Section -> command (relative to the repository root), time bound, result file."""
    def out(name: str) -> Path:
        return work / f"{name}.json"

    q = quick
    return {
        "scrape_load": {
            "cmd": ["bench/scrape_load.py", "--duration", "5" if q else "15", "--warmup",
                    "1" if q else "2", "--clients", "1", "8", "50", "--workdir",
                    str(work / "scrape_load")],
            "timeout": 150 if q else 300, "json": out("scrape_load")},
        "ingest": {
            "cmd": ["bench/ingest.py", "--seconds", "2" if q else "8",
                    "--min-reps", "5" if q else "10"],
            "timeout": 120 if q else 240, "json": out("ingest")},
        "poll_cost": {
            "cmd": ["bench/poll_cost.py", "--cycles", "500", "--steady-seconds",
                    "30" if q else "60", "--workdir", str(work / "poll_cost")],
            "timeout": 150 if q else 240, "json": out("poll_cost")},
        "soak": {
            "cmd": ["bench/soak.py", "--cycles", "3000" if q else "20000", "--warmup",
                    "500" if q else "1000", "--poll-interval", "0.002",
                    "--max-seconds", "110" if q else "450", "--workdir", str(work / "soak")],
            "timeout": 170 if q else 540, "json": out("soak")},
        "alert_latency": {
            "cmd": ["bench/alert_latency.py", "--reps", "1" if q else "3",
                    "--workdir", str(work / "alert_latency")],
            "timeout": 150 if q else 330, "json": out("alert_latency")},
        "nvml_poll": {
            "cmd": ["bench/nvml_poll.py", "--polls", "200"],
            "timeout": 120, "json": None},  # prints a table; parsed below
        "observer_cost": {
            # Quick: a repetition may be shorter than the 5 s between polls; an on repetition
            # that held no poll is invalid (its witness did not move) and the result cannot
            # conclude. The full run's repetitions (about 6 s at C4) are longer than the interval.
            "cmd": ["bench/observer_cost.py", "--repetitions", "3", "--requests",
                    "320" if q else "2400", "--workdir", str(work / "observer_cost")],
            "timeout": 150 if q else 600, "json": out("observer_cost")},
        "scrape_cost": {
            "cmd": ["bench/scrape_cost.py", "--duration", "3" if q else "8", "--clients", "1", "8",
                    "--workdir", str(work / "scrape_cost")],
            "timeout": 120 if q else 240, "json": out("scrape_cost")},
        "scale": {
            "cmd": ["bench/scale/scale.py", "--engines", "100", "1000", "--workdir", str(work / "scale")],
            "timeout": 4 * 3600, "json": out("scale")},
    }


def _stop_group(proc: subprocess.Popen[bytes], grace: float = 30.0) -> None:
    """SIGTERM the section's own process (bench/ scripts turn it into an exception, so their
    `finally` stops what they started), then SIGKILL its whole process group: anything the
    section started and left behind."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(grace)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5)


def run_section(name: str, spec: dict[str, Any], work: Path, record: dict[str, Any]) -> None:
    """Run one section; fills `record` (also when interrupted: status "interrupted")."""
    script = ROOT / spec["cmd"][0]
    record.update(command=".venv/bin/python " + shlex.join(spec["cmd"]),
                  timeout_s=spec["timeout"], loadavg_before=loadavg())
    if not script.exists():
        record.update(status="missing", reason=f"{spec['cmd'][0]} is not in the checkout")
        return
    args = [PYTHON, str(script), *spec["cmd"][1:]]
    if spec["json"] is not None:
        args += ["--json", str(spec["json"])]
        with contextlib.suppress(FileNotFoundError):
            spec["json"].unlink()
        record["command"] += f" --json {spec['json'].name}"
    log = work / f"{name}.log"
    print(f"== {name}: {record['command']} (bound {spec['timeout']} s)", file=sys.stderr)
    busy0, total0 = host_cpu_busy()
    t0 = time.monotonic()
    with log.open("wb") as out:
        proc = subprocess.Popen(args, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            proc.wait(spec["timeout"])
        except subprocess.TimeoutExpired:
            _stop_group(proc)
            record.update(status="timeout", reason=f"still running after {spec['timeout']} s; "
                                                   "stopped (see the log)")
        except BaseException:
            _stop_group(proc)
            record.update(status="interrupted", reason="bench/run was interrupted",
                          wall_s=time.monotonic() - t0)
            raise
        finally:  # the section stops its own processes; this catches any straggler
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
    busy1, total1 = host_cpu_busy()
    record["wall_s"] = time.monotonic() - t0
    record["machine_busy_share"] = (busy1 - busy0) / (total1 - total0) if total1 > total0 else None
    record["loadavg_after"] = loadavg()
    record["log"] = str(log)
    text = log.read_text(errors="replace")
    if record.get("status") == "timeout":
        record["log_tail"] = text[-1500:]
        return
    if proc.returncode != 0:
        record.update(status="failed", reason=f"exit {proc.returncode}", log_tail=text[-1500:])
        return
    try:
        if spec["json"] is not None:
            record["data"] = json.loads(spec["json"].read_text())
        else:
            record["data"] = parse_nvml(text)
    except (OSError, ValueError, KeyError) as exc:
        record.update(status="failed", reason=f"unreadable result: {exc}", log_tail=text[-1500:])
        return
    record["status"] = "ok"


_NVML = re.compile(r"^(?P<label>fake driver|real driver)\s+gpus=(?P<gpus>\d+)\s+polls=(?P<polls>\d+)"
                   r"\s+min=\s*(?P<min>[\d.]+) ms\s+median=\s*(?P<median>[\d.]+) ms\s+"
                   r"p95=\s*(?P<p95>[\d.]+) ms\s+max=\s*(?P<max>[\d.]+) ms\s+"
                   r"median/gpu=\s*(?P<per_gpu>[\d.]+) ms", re.M)


def parse_nvml(text: str) -> dict[str, Any]:
    rows = []
    for m in _NVML.finditer(text):
        row: dict[str, Any] = {"driver": m["label"], "gpus": int(m["gpus"]),
                               "polls": int(m["polls"])}
        for key in ("min", "median", "p95", "max", "per_gpu"):
            row[key + "_ms"] = float(m[key])
        rows.append(row)
    if not rows:
        raise ValueError("no result line in bench/nvml_poll.py output")
    return {"benchmark": "nvml_poll", "rows": rows}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke version: about 2 minutes instead of 7")
    parser.add_argument("--only", nargs="+", choices=SECTIONS, help="run only these sections")
    parser.add_argument("--scale", action="store_true", help="also run the scale section "
                        "(bench/scale/scale.py: 100 and 1,000 engines, an hour or more); without it "
                        "the page shows the stored bench/results/scale.json")
    parser.add_argument("--out", type=Path, help="markdown output (default: docs/benchmarks.md "
                        "for a full run of every section, else <workdir>/benchmarks.md)")
    parser.add_argument("--workdir", type=Path, help="logs and raw results (default: a new "
                        "directory under the system temporary directory, kept)")
    args = parser.parse_args()

    def interrupted(signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    # Ctrl-C and SIGTERM alike stop the running section and still write what was measured, also
    # when started in the background (where SIGINT is inherited as ignored).
    signal.signal(signal.SIGINT, interrupted)
    signal.signal(signal.SIGTERM, interrupted)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="helios-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    full = not args.quick and not args.only
    out = args.out or (ROOT / "docs" / "benchmarks.md" if full else work / "benchmarks.md")
    argv = ["bench/run", *sys.argv[1:]]
    results: dict[str, Any] = {"command": shlex.join(argv), "quick": args.quick,
                               "machine": machine(), "sections": {}}
    print(f"bench: workdir {work}", file=sys.stderr)
    specs = plan(args.quick, work)
    t0 = time.monotonic()
    busy0, total0 = host_cpu_busy()
    try:
        for name in args.only or (SECTIONS if args.scale else DEFAULT_SECTIONS):
            record: dict[str, Any] = {}
            results["sections"][name] = record
            run_section(name, specs[name], work, record)
            print(f"   {name}: {record['status']} in {record.get('wall_s', 0):.0f} s"
                  + (f" ({record['reason']})" if record.get("reason") else ""), file=sys.stderr)
    except KeyboardInterrupt:
        print("bench: interrupted; writing what was measured", file=sys.stderr)
        results["interrupted"] = True
    busy1, total1 = host_cpu_busy()
    results["wall_s"] = time.monotonic() - t0
    results["machine_busy_share"] = (busy1 - busy0) / (total1 - total0) if total1 > total0 else None
    results["loadavg_at_end"] = loadavg()
    # Recorded with the folder's name, WORKDIR (--workdir), not this machine's temporary path.
    results = with_folders_named(results, {work: "WORKDIR"})
    (work / "results.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(report.render(results))
    scale = results["sections"].get("scale", {})
    if scale.get("status") == "ok":  # the newest scale figures become the stored ones
        (ROOT / "bench" / "results").mkdir(exist_ok=True)
        (ROOT / "bench" / "results" / "scale.json").write_text(
            json.dumps(scale["data"], indent=2) + "\n")
    if out == ROOT / "docs" / "benchmarks.md":  # the committed figures keep their raw data
        (ROOT / "bench" / "results").mkdir(exist_ok=True)
        (ROOT / "bench" / "results" / "latest.json").write_text((work / "results.json").read_text())
    print(f"bench: {results['wall_s']:.0f} s; wrote {out} and {work / 'results.json'}",
          file=sys.stderr)
    return 130 if results.get("interrupted") else 0


if __name__ == "__main__":
    sys.exit(main())
