"""A real `serve` process with a full phase book under readers that never stop: the book is
served as bytes made once, so /healthz stays prompt (rebuilt at every request, twelve readers
made it answer 503)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from exporter.phases.book import STATE_FILE, Phase, encode
from exporter.phases.capture import Capture
from tests.exporter.test_stop_process import _get, _healthz_yardstick, _peak_rss_mib, _serve

pytestmark = pytest.mark.e2e
TOKEN = "phases-Token-0123456789abcdef"


def _capture(at: float) -> Capture:
    return Capture(at=at, generation="g-1", identity={"package": "p" * 15_000},
                   counters={"lookups.total": int(at)})


def test_twelve_readers_of_a_full_book_leave_healthz_prompt(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    book = tuple(Phase(f"r/{i}", _capture(i), _capture(i + 0.5)) for i in range(180))
    (state / STATE_FILE).write_bytes(encode(book))  # about 5.4 MB, near the writer's bound
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    with _serve(tmp_path, "--events-token-file", str(token)) as (proc, port):
        yardstick = _healthz_yardstick(port)
        stop = threading.Event()
        served: list[int] = []

        def read() -> None:
            import http.client
            while not stop.is_set():
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                conn.request("GET", "/experiment/phases",
                             headers={"Authorization": f"Bearer {TOKEN}"})
                resp = conn.getresponse()
                served.append(len(resp.read()) if resp.status == 200 else -resp.status)
                conn.close()

        readers = [threading.Thread(target=read, daemon=True) for _ in range(12)]
        for r in readers:
            r.start()
        healthz = []
        until = time.monotonic() + 5
        while time.monotonic() < until:
            status, _, took = _get(port, "/healthz")
            healthz.append((status, took))
            time.sleep(0.05)
        stop.set()
        for r in readers:
            r.join(30)
        peak = _peak_rss_mib(proc.pid)
    slowest = max(t for _, t in healthz)
    print(f"{len(served)} phase books served ({served[0] / 1e6:.1f} MB each), healthz slowest "
          f"{slowest:.3f}s (yardstick {yardstick:.3f}s), peak RSS {peak:.1f} MiB")
    assert served and min(served) > 1_000_000  # every answer the full book, none refused
    assert all(status == 200 for status, _ in healthz)
    assert slowest < max(1.0, 20 * yardstick)
