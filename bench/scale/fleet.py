"""The fleet of the scale benchmark's series model (bench/scale/series.py): the golden samples every
engine exports, and each engine's scenario, host tier, generations, restore window and GPUs."""

from __future__ import annotations

import hashlib
import random
import sys
import time
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from exporter import defaults  # noqa: E402

GOLDEN = ROOT / "tests" / "golden" / "full_exposition.prom"
SCRAPE_INTERVAL = 15  # seconds, as deploy/ ships the scrape and evaluation intervals
JOB = "helios-exporter"
CLUSTERS = ("us-east-1", "us-west-2", "eu-west-1", "ap-south-1")
REQUEST_CUTOFF = defaults.REQUEST_CUTOFF
RESTORE_BOUND = defaults.RESTORE_BOUND
POLL_INTERVAL = defaults.POLL_INTERVAL
GROWTH_REFERENCE_S = 1800.0  # a counter reaches its golden value after this long
SCRAPE_SERIES = ("up", "scrape_duration_seconds", "scrape_samples_scraped",
                 "scrape_samples_post_metric_relabeling", "scrape_series_added")

# Scenario of engine i: SCENARIOS[i % len(SCENARIOS)]; "steady" fills the rest.
SCENARIOS = ("open", "closed_in_time", "closed_late", "breached", "restart", "gpu_lost",
             *("steady",) * 44)

# Host tier of engine i: HOST_TIERS[(i + 12) % len(HOST_TIERS)], apart from the restore scenarios.
HOST_TIERS = ("no_reuse", "dropping", *("reusing",) * 23)

# Window-only families: exported only while a window is open.
WINDOW_ONLY = frozenset({
    "helios_restore_window_start_timestamp_seconds", "helios_restore_deadline_timestamp_seconds",
    "helios_restore_window_cause", "helios_restore_incumbent_inflight_requests",
})
# Families whose golden value is a size or limit, not a measurement: no swing.
FIXED_WORDS = ("capacity", "record_bytes", "budget", "total_bytes", "limit", "max_fds", "ranks",
                "_info", "clock_hertz")


# -- the golden ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Template:
    """One golden sample, as a pattern for every engine's."""

    name: str
    family: str
    labels: tuple[tuple[str, str], ...]  # without generation; uuid as found
    value: float
    cumulative: bool  # counter or histogram/summary sample
    generation: bool  # carries the generation label
    gpu: str | None  # GPU index label


@cache
def templates(path: Path = GOLDEN) -> tuple[Template, ...]:
    """The golden's samples; GPU 1 (down in the golden) becomes a copy of GPU 0."""
    out: list[Template] = []
    for fam in text_string_to_metric_families(path.read_text()):
        cumulative = fam.type in ("counter", "histogram", "summary", "gaugehistogram")
        for s in fam.samples:
            if s.name.endswith("_created"):
                continue
            labels = tuple((k, v) for k, v in s.labels.items() if k != "generation")
            gpu = s.labels.get("gpu")
            if gpu not in (None, "0"):
                continue
            out.append(Template(s.name, fam.name, labels, float(s.value), cumulative,
                                "generation" in s.labels, gpu))
    copies = [Template(t.name, t.family, tuple((k, "1" if k == "gpu" else v) for k, v in t.labels),
                       t.value, t.cumulative, t.generation, "1")
              for t in out if t.gpu == "0"]
    return (*out, *copies)


# -- one engine ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Window:
    start: float
    duration: float | None  # None: still open at any time the benchmark looks
    cause: str = "drain"

    def phase(self, t: float) -> str:
        """The restore phase at t (serving before and after the window)."""
        if t < self.start:
            return "serving"
        d = t - self.start
        span = self.duration if self.duration is not None else 2400.0
        if self.duration is not None and d >= self.duration:
            return "serving"
        for share, phase in ((0.2, "draining"), (0.3, "drained"), (0.4, "down"),
                             (0.85, "restoring")):
            if d < share * span:
                return phase
        return "verifying" if self.duration is not None else "restoring"

    @property
    def back(self) -> float:
        """When the restored engine (a new generation) first answers."""
        return self.start + 0.4 * (self.duration if self.duration is not None else 2400.0)


@dataclass(frozen=True)
class Engine:
    index: int
    anchor: float  # the scenario times are placed relative to this instant
    seed: int = 7
    scenario: str = field(init=False)
    host_tier: str = field(init=False)
    cluster: str = field(init=False)
    labels: str = field(init=False)  # the target labels, rendered
    speed: float = field(init=False)
    sidecar_start: float = field(init=False)
    generations: tuple[tuple[float, str], ...] = field(init=False)  # (start, name), ascending
    window: Window | None = field(init=False)  # of the benchmark's time range
    past_window: float | None = field(init=False)  # duration of an earlier window, if any
    gpu_lost_at: float | None = field(init=False)
    uuids: tuple[str, str] = field(init=False)

    def __post_init__(self) -> None:
        rng = random.Random(f"{self.seed}/{self.index}")
        i, a = self.index, self.anchor
        scenario = SCENARIOS[i % len(SCENARIOS)]
        cluster = CLUSTERS[i % len(CLUSTERS)]
        pod = f"helios-engine-{i:04d}-0"
        ip = f"10.{64 + i // 65536 % 64}.{i // 256 % 256}.{i % 256}"
        labels = (f'cluster="{cluster}",job="{JOB}",instance="{ip}:{defaults.LISTEN_PORT}",'
                  f'namespace="helios",pod="{pod}",container="helios-exporter",'
                  'endpoint="helios-metrics"')
        first = a - 12 * 3600 - rng.uniform(0, 48 * 3600)
        starts = [first]
        window = None
        gpu_lost = None
        if scenario == "open":
            window = Window(a - rng.uniform(15, 25) * 60, None)
        elif scenario == "closed_in_time":
            window = Window(a - rng.uniform(3.5, 4.5) * 3600, rng.uniform(25, 45) * 60)
        elif scenario == "closed_late":
            window = Window(a - rng.uniform(5, 5.5) * 3600, RESTORE_BOUND + rng.uniform(5, 20) * 60)
        elif scenario == "breached":
            window = Window(a - RESTORE_BOUND - rng.uniform(5, 15) * 60, None, "event")
        elif scenario == "restart":
            starts.append(a - rng.uniform(1, 5) * 3600)
        elif scenario == "gpu_lost":
            gpu_lost = a - rng.uniform(0.5, 2) * 3600
        if window is not None:
            starts.append(window.back)
        gens = tuple((s, "g-" + time.strftime("%Y%m%dT%H%MZ", time.gmtime(s)) + "-"
                      + hashlib.sha256(f"{i}/{s}".encode()).hexdigest()[:4]) for s in starts)
        digest = hashlib.sha256(f"gpu/{self.seed}/{i}".encode()).hexdigest()
        uuids = tuple(f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"
                      for h in (digest, digest[32:] + digest[:32]))
        for name, value in (
            ("scenario", scenario), ("host_tier", HOST_TIERS[(i + 12) % len(HOST_TIERS)]),
            ("cluster", cluster), ("labels", labels),
            ("speed", rng.uniform(0.5, 1.5)), ("sidecar_start", first - rng.uniform(0, 3600)),
            ("generations", gens), ("window", window),
            ("past_window", rng.uniform(20, 60) * 60 if rng.random() < 0.5 else None),
            ("gpu_lost_at", gpu_lost), ("uuids", uuids),
        ):
            object.__setattr__(self, name, value)

    @property
    def instance(self) -> str:
        return self.labels.split('instance="', 1)[1].split('"', 1)[0]

    def generation(self, t: float) -> tuple[float, str]:
        current = self.generations[0]
        for g in self.generations:
            if g[0] <= t:
                current = g
        return current


def fleet(engines: int, anchor: float, seed: int = 7, first: int = 0) -> list[Engine]:
    return [Engine(i, anchor, seed) for i in range(first, first + engines)]
