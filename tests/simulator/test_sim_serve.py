"""The probe's engine as a real process: `python -m simulator --scenario idle`, corpora from
`python -m simulator corpus` sent as is over TCP at concurrency 1, at a time scale that makes it quick."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.simulator.harness import counts
from tests.simulator.test_sim_cli import free_port

pytestmark = pytest.mark.e2e  # every test here starts a process

ROOT = Path(__file__).resolve().parents[2]


def write_corpus(name: str, *extra: str) -> list[bytes]:
    done = subprocess.run(
        [sys.executable, "-m", "simulator", "corpus", name, *extra],
        cwd=ROOT, capture_output=True, timeout=60, check=True,
    )
    return done.stdout.splitlines()


@contextlib.contextmanager
def simulator(*argv: str) -> Iterator[httpx.Client]:
    port = free_port()
    with subprocess.Popen(
        [sys.executable, "-m", "simulator", "--listen", f"127.0.0.1:{port}", *argv],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    ) as proc:
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
                deadline = time.monotonic() + 20
                while True:
                    assert proc.poll() is None and time.monotonic() < deadline
                    with contextlib.suppress(httpx.TransportError):
                        if client.get("/health").status_code == 200:
                            break
                    time.sleep(0.1)
                yield client
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=10) == 0
        finally:
            if proc.poll() is None:
                proc.kill()


def run_pass(client: httpx.Client, bodies: list[bytes]) -> None:
    for body in bodies:
        response = client.post("/v1/completions", content=body,
                               headers={"content-type": "application/json"})
        assert response.status_code == 200, response.text


def state(client: httpx.Client) -> tuple[dict[str, Any], list[str]]:
    offload = client.get("/debug/offload/snapshot").json()["offload"]
    metrics = [ln for ln in client.get("/metrics").text.splitlines() if "_created" not in ln]
    return offload, metrics


def test_idle_engine_serves_the_thrash_and_the_key_mismatch_over_tcp() -> None:
    probe = write_corpus("probe-52")
    other = write_corpus("probe-52", "--model", "qwen3-next-lora-support")
    runs = []
    for _ in range(2):
        with simulator("--scenario", "idle", "--seed", "5", "--time-scale", "1000") as client:
            assert client.get("/admin/state").json()["scenario"]["name"] == "idle"
            run_pass(client, probe)
            run_pass(client, probe)
            thrashed, _ = state(client)
            run_pass(client, list(reversed(other)))
            runs.append(state(client))
    lookups = thrashed["lookups"]
    assert lookups["hits"] == 0
    assert lookups["misses"] == {"no_prefix": 52, "evicted": 52}
    assert thrashed["evictions"]["row"]["attempts"] >= 52 * 12
    page = thrashed["slabs"]["page"]
    assert page["free"] / page["capacity"] > 0.25
    offload, metrics = runs[0]
    assert sum(n for k, n in offload["lookups"]["misses"].items()
               if k.startswith("key_mismatch:")) == 52
    assert f'helios:num_requests_total{{model_name="qwen3-next"}} {3 * 52}.0' in metrics
    # The same seed over real TCP and wall time: the same counters and the same latencies;
    # schema 3's eviction ages and restore seconds come from the wall clock, their counts not.
    assert [(counts(o), m) for o, m in runs] == [(counts(o), m) for o, m in runs[:1]] * 2
