"""What one /metrics scrape costs the sidecar: identity vs gzip vs TLS with basic auth, side by side.

    .venv/bin/python bench/scrape_cost.py [--duration 5] [--clients 1 8] [--json PATH]

Prometheus asks for gzip on every scrape. The sidecar compresses each poll cycle's exposition
once, at the first gzip scrape after the cycle, and serves the cached bytes after that
(exporter/collectors/exposition.py), so a gzip scrape should cost what an identity scrape costs. Measured
here on one sidecar (`serve --no-nvml --poll-interval 1` against `simulate --scenario steady`),
with the same wrk load per variant, alternating the order per client count:

- `identity`: no Accept-Encoding;
- `gzip`: `Accept-Encoding: gzip` (as Prometheus sends it);
- `tls+auth` (a second sidecar with `--web-config-file`: TLS and basic auth, bcrypt cost 10): gzip
  over TLS with the right password on every request, i.e. Prometheus with a ServiceMonitor's
  tlsConfig and basicAuth on a kept-alive connection.

Per point: requests/s, p50/p99 latency, bytes per answer, and the sidecar's CPU per scrape (its
CPU time over the requests answered, poll cycles included). For scale, the CPU of compressing one
exposition with gzip level 6 in-process (median of 200): what every gzip scrape would cost without
the cache.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scrape_load
from benchlib import Procs, install_sigterm, proc_sample, wait_until, write_json

from tools.pki import CA, write_web_config

PASSWORD = "bench-Pa55word"
BASIC = "Basic " + base64.b64encode(f"prometheus:{PASSWORD}".encode()).decode()


def wrk_point(url: str, clients: int, duration: float, workdir: Path, label: str, pid: int,
              headers: list[str]) -> dict[str, Any]:
    """One wrk run with extra headers; the server's CPU per answered request."""
    before = proc_sample(pid)
    wrk = scrape_load.run_wrk(url, clients, duration, workdir, label, headers=headers)
    after = proc_sample(pid)
    requests = wrk["requests"]
    errors = sum(wrk[k] for k in ("connect", "read", "write", "timeout", "status"))
    return {
        "clients": clients, "requests": requests, "rps": requests / (wrk["duration_us"] / 1e6),
        "p50_ms": wrk["p50_us"] / 1000, "p99_ms": wrk["p99_us"] / 1000,
        "bytes_per_response": wrk["bytes"] / requests if requests else None,
        "server_cpu_ms_per_scrape": (after.cpu_s - before.cpu_s) * 1000 / requests
        if requests else None,
        "errors": errors,
    }


def compress_cost(body: bytes, reps: int = 200) -> float:
    took = []
    for _ in range(reps):
        t0 = time.process_time()
        gzip.compress(body, 6, mtime=0)
        took.append(time.process_time() - t0)
    return statistics.median(took) * 1000


def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    procs = Procs(workdir)
    ca = CA(workdir / "pki")
    web = write_web_config(workdir / "web.yml", server=ca.issue("sidecar", server=True),
                           users={"prometheus": PASSWORD}, cost=10)
    try:
        _, engine_url = procs.simulator()
        plain, plain_url = procs.sidecar(engine_url, "--poll-interval", "1")
        secure, secure_url = procs.sidecar(engine_url, "--poll-interval", "1", "--web-config-file",
                                           str(web), name="sidecar-tls", wait=False)
        https = secure_url.replace("http://", "https://")
        wait_until(lambda: httpx.get(https + "/readyz", verify=str(ca.path),
                                                 timeout=2).status_code == 200, 60, "tls sidecar")
        identity = httpx.get(plain_url + "/metrics", timeout=10).content
        with httpx.stream("GET", plain_url + "/metrics", timeout=10,
                          headers={"Accept-Encoding": "gzip"}) as resp:
            zipped = b"".join(resp.iter_raw())
        variants = {
            "identity": (plain_url + "/metrics", plain.pid, []),
            "gzip": (plain_url + "/metrics", plain.pid, ["Accept-Encoding: gzip"]),
            "tls+auth": (https + "/metrics", secure.pid,
                         ["Accept-Encoding: gzip", f"Authorization: {BASIC}"]),
        }
        for name, (url, pid, headers) in variants.items():  # warm-up (and the bcrypt cache)
            wrk_point(url, 1, 1, workdir, f"warmup-{name}", pid, headers)
        points: dict[str, list[dict[str, Any]]] = {name: [] for name in variants}
        for i, clients in enumerate(args.clients):
            order = list(variants) if i % 2 == 0 else list(reversed(variants))
            for name in order:
                url, pid, headers = variants[name]
                point = wrk_point(url, clients, args.duration, workdir, f"{name}-c{clients}",
                                  pid, headers)
                print(f"{name:<9} c={clients:<2} {point['rps']:8.0f} req/s  p50 "
                      f"{point['p50_ms']:6.2f} ms  {point['bytes_per_response']:8.0f} B/answer  "
                      f"cpu {point['server_cpu_ms_per_scrape']:.3f} ms/scrape  errors "
                      f"{point['errors']}", file=sys.stderr)
                points[name].append(point)
        if not (plain.alive() and secure.alive()):
            raise RuntimeError("a sidecar died during the load")
    finally:
        procs.stop_all()
    return {
        "benchmark": "scrape_cost", "duration_s": args.duration, "clients": args.clients,
        "load_generator": "wrk (2 threads, closed loop, keep-alive)",
        "identity_bytes": len(identity), "gzip_bytes": len(zipped),
        "gzip_compress_cpu_ms": compress_cost(identity),
        "points": points,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per point")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--json", type=Path, metavar="PATH")
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    install_sigterm()
    with tempfile.TemporaryDirectory(prefix="bench-scrape-cost-") as tmp:
        result = run(args, args.workdir or Path(tmp))
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
