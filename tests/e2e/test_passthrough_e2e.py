"""Pass-through counters end to end: the simulated engine keeps only its latest 50 request-id
series, yet the sidecar's requests counter counts every request served."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.procs import Stack, wait_for

REQUESTS = "helios_engine_native_requests_total"
LATENCY_COUNT = "helios_engine_native_e2e_request_latency_seconds_count"


def samples(url: str) -> list[tuple[str, dict[str, str], float]]:
    text = httpx.get(url + "/metrics", timeout=5).text
    return [(s.name, s.labels, s.value)
            for fam in text_string_to_metric_families(text) for s in fam.samples]


def engine_counts(engine_url: str) -> tuple[float, int, float]:
    """(requests served, request-id series visible, requests running) from the engine itself."""
    got = samples(engine_url)
    served = sum(v for n, _, v in got if n == "helios:e2e_request_latency_seconds_count")
    visible = sum(1 for n, labels, _ in got if n == "helios:requests_total")
    running = sum(v for n, _, v in got if n == "helios:num_running_reqs")
    return served, visible, running


def exported(sidecar_url: str, name: str) -> float | None:
    values = [v for n, _, v in samples(sidecar_url) if n == name]
    return values[0] if len(values) == 1 else None


def poll_cycles(sidecar_url: str) -> float:
    return exported(sidecar_url, "helios_exporter_poll_cycles_total") or 0.0


def test_requests_counter_counts_every_request_served(stack: Stack) -> None:
    # The test drives the traffic itself, in batches smaller than the engine's 50 visible ids,
    # each followed by a whole poll cycle of the sidecar: every request-id series is seen at least
    # once however loaded the machine is, so the exported total must equal what the engine served.
    _engine, engine_url = stack.simulator("idle", "--seed", "5", "--time-scale", "50")
    sidecar, sidecar_url = stack.sidecar(engine_url, "--poll-interval", "0.2")
    batch, batches = 30, 9
    with httpx.Client(base_url=engine_url, timeout=10) as client:
        for b in range(batches):
            for i in range(batch):
                body = {"prompt": f"batch {b} request {i} " + "tokens " * 40, "max_tokens": 4}
                assert client.post("/v1/completions", json=body).status_code == 200
            seen = poll_cycles(sidecar_url)
            wait_for(lambda seen=seen: poll_cycles(sidecar_url) >= seen + 2, 30,
                     "a whole poll cycle after the batch", sidecar)
    served, visible, running = engine_counts(engine_url)
    assert running == 0
    assert served == batch * batches and visible == 50  # the engine shows only its latest 50 ids
    wait_for(lambda: exported(sidecar_url, LATENCY_COUNT) == served, 15,
             "the sidecar to poll the idle engine", sidecar)
    assert exported(sidecar_url, REQUESTS) == served
