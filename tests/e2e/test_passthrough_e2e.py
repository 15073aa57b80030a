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


def test_requests_counter_counts_every_request_served(stack: Stack) -> None:
    engine, engine_url = stack.simulator("steady", "--seed", "5", "--rate", "20")
    sidecar, sidecar_url = stack.sidecar(engine_url, "--poll-interval", "0.5")
    wait_for(lambda: engine_counts(engine_url)[0] >= 262, 90, "262 requests served", engine)
    httpx.post(engine_url + "/admin/traffic", json={"enabled": False}, timeout=5)
    wait_for(lambda: engine_counts(engine_url)[2] == 0, 60, "requests to finish", engine)
    served, visible, _ = engine_counts(engine_url)
    assert served >= 262 and visible == 50  # the engine shows only its latest 50 request ids
    wait_for(lambda: exported(sidecar_url, LATENCY_COUNT) == served, 15,
             "the sidecar to poll the idle engine", sidecar)
    assert exported(sidecar_url, REQUESTS) == served
