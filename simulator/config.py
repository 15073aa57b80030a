"""A simulated engine's configuration: its slab geometry and tokens per page, identity, latency
model and time scale, the faults and observer cost it is run with, and the snapshot version it
serves (simulator/engine.py runs it)."""

from __future__ import annotations

from dataclasses import dataclass, field

from simulator.latency import LatencyModel
from simulator.retired import DEFAULT_CAPACITY
from simulator.slabs import SlabGeometry

# The snapshot schema versions served: 1 (what the sidecar reads today) and 3, which adds the
# fields of exporter/schema/snapshot-v3.schema.json. There is no 2: interface version 2 kept
# snapshot schema 1.
SNAPSHOT_VERSIONS = (1, 3)


@dataclass(frozen=True)
class EngineConfig:
    geometry: SlabGeometry = field(default_factory=SlabGeometry)
    tokens_per_page: int = 64
    # Checkpoints stored per request, spread evenly over the prompt's block boundaries.
    stores_per_request: int = 3
    model_name: str = "qwen3-next"
    checkpoint: str = "qwen3-next-w4a16-r3"
    package: str = "helios-2.14.0+47581cca"
    image_digest: str | None = None
    container_id: str | None = None
    num_ranks: int = 2
    store_latency_s: tuple[float, float] = (0.003, 0.030)
    latency: LatencyModel = field(default_factory=LatencyModel)
    # Modelled durations (requests, host stores) pass this many times faster than the clock; the
    # engine's metrics still record the modelled latency. 1 is real time.
    time_scale: float = 1.0
    # Recent prompts still resident on the GPU: their shared prefix is reused without the host.
    device_cache_slots: int = 4
    # Retired checkpoints remembered so that a miss on them reads `evicted` (simulator.retired).
    retired_memory: int = DEFAULT_CAPACITY
    # The observer to measure (`POST /admin/trace`): while tracing, each generated token takes
    # this fraction longer (0.05: 5 %). Off after every (re)start.
    trace_cost: float = 0.0
    # A fault: every completion ends after this many tokens, whatever it asked for (None: none).
    early_stop: int | None = None
    # Row checkpoints sit only at multiples of this many prompt tokens (a multiple of
    # tokens_per_page); None: at any block boundary (tokens_per_page).
    row_checkpoint_interval_tokens: int | None = None
    snapshot_version: int = 3

    def __post_init__(self) -> None:
        if not self.time_scale > 0:
            raise ValueError(f"time_scale must be positive, got {self.time_scale}")
        if self.stores_per_request < 1:
            raise ValueError(f"stores_per_request must be at least 1, got {self.stores_per_request}")
        if self.retired_memory < 0:
            raise ValueError(f"retired_memory must not be negative, got {self.retired_memory}")
        if not 0 <= self.trace_cost <= 10:
            raise ValueError(f"trace_cost must be in [0, 10], got {self.trace_cost}")
        if self.early_stop is not None and self.early_stop < 0:
            raise ValueError(f"early_stop must not be negative, got {self.early_stop}")
        if self.tokens_per_page < 1:
            raise ValueError(f"tokens_per_page must be positive, got {self.tokens_per_page}")
        interval = self.row_checkpoint_interval_tokens
        if interval is not None and (interval < 1 or interval % self.tokens_per_page):
            raise ValueError(f"row_checkpoint_interval_tokens must be a positive multiple of "
                             f"tokens_per_page ({self.tokens_per_page}), got {interval}")
        if self.snapshot_version not in SNAPSHOT_VERSIONS:
            raise ValueError(f"snapshot_version must be one of "
                             f"{', '.join(map(str, SNAPSHOT_VERSIONS))}, got "
                             f"{self.snapshot_version}")

    @property
    def checkpoint_interval_tokens(self) -> int:
        """The row checkpoint interval in tokens (geometry.row_checkpoint_interval_tokens)."""
        return self.row_checkpoint_interval_tokens or self.tokens_per_page
