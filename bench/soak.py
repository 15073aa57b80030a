"""Soak: tens of thousands of poll cycles against a flapping simulated engine; memory and fds.

    .venv/bin/python bench/soak.py [--cycles 20000] [--warmup 1000] [--json PATH]

The sidecar runs with `--poll-interval 0.002` (cycles back to back: a cycle against the simulator
takes longer than that) and compressed bounds (`--down-grace 0.5 --request-cutoff 1.5
--restore-bound 3`), so every flap walks the restore window through its states and writes its
state file. Every `--flip-every` seconds the engine is flipped through the admin API
(docs/simulator.md), in this order, round and round: admission `draining`, admission `closed`,
`crash` (every non-admin path answers 503), `restart` into the same container (every third restart
into a new container). /metrics is scraped twice a second (which also re-renders the exposition),
`helios_exporter_poll_cycles_total` counts the cycles, and /proc/<pid> gives RSS and open fds.
Measured from the end of the warm-up (`--warmup` cycles) to `--cycles` cycles after it: RSS
growth and fd count; RSS is also sampled along the way (min, max, the curve in the JSON).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import (
    MIB,
    Procs,
    cpu_share,
    install_sigterm,
    loadavg,
    proc_sample,
    write_json,
)

FLIPS: tuple[tuple[str, str, dict[str, Any] | None], ...] = (
    ("draining", "/admin/admission", {"state": "draining"}),
    ("closed", "/admin/admission", {"state": "closed"}),
    ("crash", "/admin/crash", None),
    ("restart", "/admin/restart", {"container": "same"}),
)


def scrape(client: httpx.Client, url: str) -> dict[str, float]:
    values: dict[str, float] = {"source_errors": 0.0}
    for line in client.get(url + "/metrics").text.splitlines():
        if line.startswith("helios_exporter_poll_cycles_total "):
            values["cycles"] = float(line.split()[1])
        elif line.startswith("helios_exporter_source_errors_total{"):
            values["source_errors"] += float(line.rsplit(" ", 1)[1])
    return values


class Flipper(threading.Thread):
    def __init__(self, engine_url: str, every: float) -> None:
        super().__init__(daemon=True)
        self.engine_url = engine_url
        self.every = every
        self.stop = threading.Event()
        self.done: dict[str, int] = {}
        self.failed = 0

    def run(self) -> None:
        restarts = 0
        step = 0
        with httpx.Client(timeout=5.0) as client:
            while not self.stop.wait(self.every):
                name, path, body = FLIPS[step % len(FLIPS)]
                if name == "restart":
                    restarts += 1
                    body = {"container": "new" if restarts % 3 == 0 else "same"}
                    name = f"restart-{body['container']}"
                try:
                    resp = client.post(self.engine_url + path, json=body)
                    ok = resp.status_code == 200
                except httpx.HTTPError:
                    ok = False
                if ok:
                    self.done[name] = self.done.get(name, 0) + 1
                else:
                    self.failed += 1
                step += 1


def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    procs = Procs(workdir)
    curve: list[tuple[float, float, int]] = []  # (cycles, rss MiB, fds)
    try:
        _engine, engine_url = procs.simulator()
        sidecar, url = procs.sidecar(
            engine_url, "--poll-interval", str(args.poll_interval), "--down-grace", "0.5",
            "--request-cutoff", "1.5", "--restore-bound", "3", "--log-level", "info")
        flipper = Flipper(engine_url, args.flip_every)
        flipper.start()
        started = time.monotonic()
        deadline = started + args.max_seconds
        with httpx.Client(timeout=5.0) as client:
            values = scrape(client, url)
            while values.get("cycles", 0) < args.warmup:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"warm-up not done in {args.max_seconds}s: {values}")
                time.sleep(0.5)
                values = scrape(client, url)
            a, first = proc_sample(sidecar.pid), values
            target = first["cycles"] + args.cycles
            while values["cycles"] < target and time.monotonic() < deadline:
                time.sleep(0.5)
                values = scrape(client, url)
                s = proc_sample(sidecar.pid)
                curve.append((values["cycles"], round(s.rss_bytes / MIB, 2), s.fds))
                if not sidecar.alive():
                    raise RuntimeError("sidecar died:\n" + sidecar.tail())
            b, last = proc_sample(sidecar.pid), values
        flipper.stop.set()
        flipper.join(10)
        status = httpx.get(url + "/status", timeout=5).json()
    finally:
        procs.stop_all()
    transitions = 0
    for line in (workdir / "sidecar.log").read_text(errors="replace").splitlines():
        if line.startswith("{") and json.loads(line).get("event") == "restore_transition":
            transitions += 1
    measured = last["cycles"] - first["cycles"]
    rss = [r for _, r, _ in curve]
    fds = [f for _, _, f in curve]
    return {
        "benchmark": "soak",
        "poll_interval_s": args.poll_interval, "flip_every_s": args.flip_every,
        "warmup_cycles": first["cycles"], "cycles_measured": measured,
        "cycles_target": args.cycles, "reached": measured >= args.cycles,
        "seconds": b.at - a.at, "cycles_per_s": measured / (b.at - a.at),
        "flips": flipper.done, "flips_failed": flipper.failed,
        "restore_transitions_logged": transitions,
        "source_errors_during": last["source_errors"] - first["source_errors"],
        "last_window": status["restore"]["last_window"],
        "rss_start_mib": a.rss_bytes / MIB, "rss_end_mib": b.rss_bytes / MIB,
        "rss_growth_mib": (b.rss_bytes - a.rss_bytes) / MIB,
        "rss_min_mib": min([a.rss_bytes / MIB, *rss]), "rss_max_mib": max([a.rss_bytes / MIB, *rss]),
        "fds_start": a.fds, "fds_end": b.fds, "fds_max": max([a.fds, *fds]),
        # One fd comes and goes with the engine connection (keep-alive, refused while the
        # engine is down): growth is judged on the peaks of the two halves, not two instants.
        "fds_first_half_max": max([a.fds, *fds[: len(fds) // 2]]),
        "fds_second_half_max": max([b.fds, *fds[len(fds) // 2 :]]),
        "threads_start": a.threads, "threads_end": b.threads,
        "cpu_share": cpu_share(a, b), "loadavg_after": loadavg(),
        "curve": curve[:: max(1, len(curve) // 60)],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=20000, help="measured cycles after warm-up")
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--poll-interval", type=float, default=0.002)
    parser.add_argument("--flip-every", type=float, default=1.0)
    parser.add_argument("--max-seconds", type=float, default=600.0,
                        help="stop here even if the cycle count is not reached")
    parser.add_argument("--json", type=Path, metavar="PATH")
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    install_sigterm()
    with tempfile.TemporaryDirectory(prefix="bench-soak-") as tmp:
        result = run(args, args.workdir or Path(tmp))
    print(f"soak: {result['cycles_measured']:.0f} cycles in {result['seconds']:.0f} s, rss "
          f"{result['rss_start_mib']:.1f} -> {result['rss_end_mib']:.1f} MiB, fds "
          f"{result['fds_start']} -> {result['fds_end']}", file=sys.stderr)
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
