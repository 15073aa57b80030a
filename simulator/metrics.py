"""The simulated engine's own ``/metrics``, in the colon style of real engines (``sglang:...``).

Each incarnation has its own registry, so a restart starts every counter from zero, e.g.

    # TYPE helios:prompt_tokens_total counter
    helios:prompt_tokens_total{model_name="qwen3-next"} 2048.0
    helios:num_requests_total{model_name="qwen3-next"} 52.0
    helios:requests_total{model_name="qwen3-next",request_id="cmpl-5e1f0b2a9c3d"} 1.0

``request_id`` is deliberately unbounded in a real engine; the sidecar must drop it. The
simulator keeps only the most recent ``MAX_REQUEST_SERIES`` ids so that it stays bounded itself,
which also means those series come and go. ``num_requests_total`` (one series, as SGLang's) and the
latency histogram's ``_count`` count every finished request.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

MAX_REQUEST_SERIES = 50
# Fine around 0.3-0.5 s, where the probe corpora's requests fall (a hit vs a miss differs by
# ~20 %), and around 0.6-0.75 s, where fixture-1024's do (a 5 % trace cost adds 32 ms), so that
# quantiles estimated from the buckets can tell two arms apart.
LATENCY_BUCKETS = (
    0.05, 0.1, 0.2, 0.3, 0.325, 0.35, 0.375, 0.4, 0.425, 0.45, 0.5, 0.6,
    0.625, 0.65, 0.675, 0.7, 0.725, 0.75, 0.8,
    1.0, 1.25, 1.5, 2.0, 2.5, 5.0, 10.0, 30.0, 60.0,
)


class EngineMetrics:
    def __init__(self, model_name: str, running: Callable[[], int]) -> None:
        self.model_name = model_name
        self.registry = CollectorRegistry(auto_describe=True)
        self.prompt_tokens = Counter(
            "helios:prompt_tokens", "Prompt tokens processed.", ["model_name"],
            registry=self.registry,
        )
        self.generation_tokens = Counter(
            "helios:generation_tokens", "Tokens generated.", ["model_name"],
            registry=self.registry,
        )
        self.running = Gauge(
            "helios:num_running_reqs", "Requests running now.", ["model_name"],
            registry=self.registry,
        )
        self.running.labels(model_name).set_function(lambda: float(running()))
        self.latency = Histogram(
            "helios:e2e_request_latency_seconds", "End-to-end request latency.", ["model_name"],
            buckets=LATENCY_BUCKETS, registry=self.registry,
        )
        self.num_requests = Counter(
            "helios:num_requests", "Finished requests.", ["model_name"], registry=self.registry,
        )
        self.requests = Counter(
            "helios:requests", "Finished requests, one series per request id.",
            ["model_name", "request_id"], registry=self.registry,
        )
        self._request_ids: deque[str] = deque()
        # Touch the unlabelled children so the families show 0 before the first request.
        self.prompt_tokens.labels(model_name)
        self.generation_tokens.labels(model_name)
        self.num_requests.labels(model_name)
        self.latency.labels(model_name)

    def request_finished(
        self, request_id: str, prompt_tokens: int, generation_tokens: int, latency_s: float
    ) -> None:
        model = self.model_name
        self.prompt_tokens.labels(model).inc(prompt_tokens)
        self.generation_tokens.labels(model).inc(generation_tokens)
        self.latency.labels(model).observe(latency_s)
        self.num_requests.labels(model).inc()
        self.requests.labels(model, request_id).inc()
        self._request_ids.append(request_id)
        while len(self._request_ids) > MAX_REQUEST_SERIES:
            self.requests.remove(model, self._request_ids.popleft())

    def render(self) -> bytes:
        return generate_latest(self.registry)
