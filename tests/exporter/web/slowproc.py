"""A real `serve` process for the slow-client tests, and what they read of it: its open descriptors
(/proc), a scrape, its own connection counters."""

from __future__ import annotations

import http.client
import os
import time

from tools.harness import Proc, Procs, families, free_port, sample

READ_TIMEOUT = 2.0
# Seconds a deadline may fire late: the sidecar's event loop and this test share two cores with
# whatever else runs (scripts/test runs three test processes at once; other work on the machine
# took the load average above 10 while these were written). What is tested is that connections are
# cut by the deadline (none earlier, all of them, descriptors back), not how punctually a starved
# process is scheduled; docs/hardening.md reports the lateness measured.
SLACK = 10.0
HALF_HEAD = b"GET /metrics HTTP/1.1\r\nHost: sidecar\r\n"  # no blank line: never complete


def serve(procs: Procs, *extra: str) -> tuple[Proc, int]:
    """A sidecar whose engine is absent (every poll fails; it serves regardless)."""
    proc, url = procs.sidecar(f"http://127.0.0.1:{free_port()}", "--poll-interval", "0.3",
                              "--http-read-timeout", str(READ_TIMEOUT), *extra)
    return proc, int(url.rsplit(":", 1)[1])


def fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def scrape(port: int, path: str = "/metrics", timeout: float = 5.0) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def self_metrics(port: int) -> dict[str, float]:
    """The sidecar's own counters, from a rendering after what the test did (/metrics is
    rendered once per poll cycle: wait two)."""
    time.sleep(0.7)
    status, body = scrape(port)
    assert status == 200
    fams = families(body)  # by family name: a counter's without `_total`
    out = {f"closed_{r}": sample(fams, "helios_exporter_http_connections_closed", reason=r)
           for r in ("slow_request", "slow_reader", "idle", "evicted", "head_too_large")}
    for name in ("refused", "accepted"):
        out[f"{name}_total"] = sample(fams, f"helios_exporter_http_connections_{name}")
    out["open"] = sample(fams, "helios_exporter_http_connections_open")
    return {k: v for k, v in out.items() if v is not None}
