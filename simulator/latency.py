"""How long a simulated request takes: prefill of what was not reused, the host-to-GPU copy of
what was restored, decode of every output token, and seeded noise.

    seconds = ( computed_prompt_tokens / prefill_tokens_per_s
              + restored_bytes / host_bytes_per_s
              + max_tokens * decode_seconds_per_token * decode_factor ) * exp(N(0, noise))

``computed_prompt_tokens`` are the prompt tokens neither in the GPU-resident cache nor restored
from the host tier. ``restored_bytes`` are the restored tokens' pages plus the checkpoint's row.
So a host hit saves prefill and pays a copy, and a lane with more hits is faster; the decode term,
identical for a given corpus, keeps that saving in proportion. The noise (log-normal, sigma
``noise``) comes from the engine's seeded generator: a run repeats exactly under one seed, and two
repetitions of a lane under different seeds spread as measured repetitions do.
``decode_factor`` is 1 unless an observer lengthens every generated token (the engine's trace
switch: 1 + ``--trace-cost``).

What it leaves out: batching (concurrent requests do not slow each other), queueing, and any cost
of the sidecar's polling; the figures are a model of one request alone on the engine.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass


@dataclass(frozen=True)
class LatencyModel:
    prefill_tokens_per_s: float = 40_000.0
    decode_seconds_per_token: float = 0.010
    # Host to GPU over PCIe, as the engine restores pinned host records.
    host_bytes_per_s: float = 25e9
    # Sigma of the log-normal factor: 0.03 spreads single requests by about 3 %.
    noise: float = 0.03

    def __post_init__(self) -> None:
        if self.prefill_tokens_per_s <= 0 or self.host_bytes_per_s <= 0:
            raise ValueError("prefill and host rates must be positive")
        if self.decode_seconds_per_token < 0 or not 0 <= self.noise <= 1:
            raise ValueError("decode time must not be negative and noise must be in [0, 1]")

    def seconds(
        self, computed_tokens: int, restored_bytes: int, max_tokens: int, rng: random.Random,
        decode_factor: float = 1.0,
    ) -> float:
        base = (
            computed_tokens / self.prefill_tokens_per_s
            + restored_bytes / self.host_bytes_per_s
            + max_tokens * self.decode_seconds_per_token * decode_factor
        )
        # Drawn even when noise is 0, so the seed's sequence does not depend on the setting.
        factor = math.exp(rng.gauss(0.0, 1.0) * self.noise)
        return base * factor
