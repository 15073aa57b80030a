"""A fleet of sidecars' series for the scale benchmark (bench/scale.py), derived from the real full
exposition (tests/golden/full_exposition.prom, rendered by the production registry).

Every engine exports the golden's series with its own target labels (cluster, job, instance,
namespace, pod, container, endpoint, as a PodMonitor scrape adds them), its own generation and GPU
UUIDs, a second GPU like the first (TP2), and the five series Prometheus adds to every scrape
(`up`, `scrape_*`). Values move the way a sidecar's do:

- counters and histograms grow linearly from their generation's start (the sidecar's own: from
  the sidecar's start) at the rate that reaches the golden value after 30 minutes, times a
  per-engine speed of 0.5-1.5; integer counters stay integers, histogram buckets stay cumulative;
- measured gauges (power, temperature, memory, in-flight requests...) swing +-5% around the
  golden value; sizes, limits and 0/1 states stay put; timestamps are what they say;
- restore windows follow scenarios (`SCENARIOS`): most engines serve throughout, some restart
  outside a window, some have a window closed in time, closed late (with a failed check), still
  open, or open past its restore deadline, and some lose a GPU. A window's phases run draining,
  drained, down (engine unreachable), restoring (a new generation answers), verifying; its
  events, deadlines, cause, outcome and checks are exported as the sidecar exports them;
- host tiers follow `HOST_TIERS`: most engines restore tokens from the host tier (at the rate of
  the golden's reused prompt tokens) and drop no store; one in 25 drops stores as the golden does
  (dropped_full, failed), one in 25 never restores a token (the golden has no host reuse).

The model is a pure function of (engine, time): `write_openmetrics` backfills any time range for
promtool, `render` serves the current samples to a live Prometheus (`serve`).

    python bench/scale_series.py write --engines 100 --start T0 --end T1 out.om
    python bench/scale_series.py serve --engines 1000 --groups 10 --port 9999
"""

from __future__ import annotations

import argparse
import hashlib
import http.server
import math
import random
import sys
import threading
import time
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TextIO

from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from exporter import defaults  # noqa: E402

GOLDEN = ROOT / "tests" / "golden" / "full_exposition.prom"
SCRAPE_INTERVAL = 15  # seconds, as deploy/ ships the scrape and evaluation intervals
JOB = "helios-exporter"
CLUSTERS = ("us-east-1", "us-west-2", "eu-west-1", "ap-south-1")
REQUEST_CUTOFF = defaults.REQUEST_CUTOFF
RESTORE_BOUND = defaults.RESTORE_BOUND
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
_FIXED_WORDS = ("capacity", "record_bytes", "budget", "total_bytes", "limit", "max_fds", "ranks",
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


def fingerprint() -> str:
    """Changes whenever the model or the golden does: blocks of another model are not reused."""
    h = hashlib.sha256(Path(__file__).read_bytes())
    h.update(GOLDEN.read_bytes())
    return h.hexdigest()[:16]


def fleet(engines: int, anchor: float, seed: int = 7, first: int = 0) -> list[Engine]:
    return [Engine(i, anchor, seed) for i in range(first, first + engines)]


# -- samples at one instant ---------------------------------------------------------------------
def _num(value: float) -> str:
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


@dataclass(frozen=True, slots=True)
class _State:
    phase: str
    window: Window | None  # open at t
    last: Window | None  # closed before t
    gpu1_up: bool
    generation: tuple[float, str]
    events: tuple[tuple[str, str, int], ...]
    unplanned: int  # generation changes outside a window so far

    @property
    def engine_up(self) -> bool:
        return self.phase != "down"


def _state(e: Engine, t: float) -> _State:
    w = e.window
    open_w = last = None
    phase = "serving"
    if w is not None and t >= w.start:
        if w.duration is None or t < w.start + w.duration:
            open_w, phase = w, w.phase(t)
        else:
            last = w
    if last is None and e.past_window is not None:
        last = Window(e.sidecar_start, e.past_window)  # closed before the time range
    gpu1 = e.gpu_lost_at is None or t < e.gpu_lost_at
    back = None if w is None else w.back
    unplanned = sum(1 for start, _ in e.generations[1:] if start <= t and start != back)
    return _State(phase, open_w, last, gpu1, e.generation(t), _events(e, t), unplanned)


# Kinds of the samples whose value changes from scrape to scrape (the rest is fixed per state).
_GROW, _SWING, _NOW, _DOWN_ERRORS = range(4)
Dynamic = tuple[str, int, float, float, bool]  # series, kind, a, b, integral


def _plan(e: Engine, st: _State, families: frozenset[str] | None
          ) -> tuple[list[str], list[Dynamic]]:
    """Engine `e` in state `st`: the fixed samples as "series value", and the changing ones."""
    fixed: list[str] = []
    dynamic: list[Dynamic] = []
    gen_start, gen = st.generation
    base = e.labels
    phase = (e.index % 97) / 97 * 2 * math.pi
    for tpl in templates():
        if families is not None and tpl.family not in families:
            continue
        labels = base + (f',generation="{gen}"' if tpl.generation else "")
        for k, v in tpl.labels:
            labels += f',{k}="{e.uuids[int(tpl.gpu or 0)] if k == "uuid" else v}"'
        series = f"{tpl.name}{{{labels}}}"
        got = _value(e, tpl, st, gen_start, phase)
        if got is None:
            continue
        if isinstance(got, tuple):
            dynamic.append((series, *got))
        else:
            fixed.append(f"{series} {_num(got)}")
    if families is None or "up" in families:
        n = len(fixed) + len(dynamic)
        fixed += [f"up{{{base}}} 1", f"scrape_samples_scraped{{{base}}} {n}",
                  f"scrape_samples_post_metric_relabeling{{{base}}} {n}",
                  f"scrape_series_added{{{base}}} 0"]
        dynamic.append((f"scrape_duration_seconds{{{base}}}", _SWING, 0.003, phase, False))
    return fixed, dynamic


def _value(e: Engine, tpl: Template, st: _State, gen_start: float,
           phase: float) -> float | tuple[int, float, float, bool] | None:
    """A fixed value, (kind, a, b, integral) for a changing one, or None: not exported."""
    name, golden = tpl.name, tpl.value
    integral = golden == int(golden)
    if tpl.family.startswith("helios_restore_"):
        return _restore_value(tpl, st)
    if tpl.gpu == "1" and not st.gpu1_up:
        return 0.0 if name == "helios_gpu_up" else (1.0 if name == "helios_gpu_rank_info" else None)
    labels = dict(tpl.labels)
    engine_source = labels.get("source", "").startswith("engine")
    if name == "helios_engine_up" or (name == "helios_exporter_source_up" and engine_source):
        return 1.0 if st.engine_up else 0.0
    if name == "helios_engine_admission_open":
        return 1.0 if st.phase == "serving" else 0.0
    if name == "helios_engine_unplanned_restarts_total":
        return float(st.unplanned)
    if tpl.cumulative:
        golden = _host_tier_value(e.host_tier, name, labels, golden)
        if (name == "helios_exporter_source_errors_total" and labels.get("reason") == "connect"
                and engine_source and e.window is not None):
            return (_DOWN_ERRORS, 0.0, 0.0, True)
        since = gen_start if tpl.generation else e.sidecar_start
        return (_GROW, golden * e.speed / GROWTH_REFERENCE_S, since, integral)
    if name.endswith("_timestamp_seconds") or name.endswith("start_time_seconds"):
        if name.startswith(("helios_monitoring_generation", "helios_engine_process")):
            return gen_start
        if name == "process_start_time_seconds":
            return e.sidecar_start
        return (_NOW, 0.0, 0.0, False)
    if golden in (0.0, 1.0) or any(w in name for w in _FIXED_WORDS):
        return golden
    return (_SWING, golden, phase + zlib.crc32(name.encode()) % 7, integral)


@cache
def _reused_tokens() -> float:
    return next(t.value for t in templates() if t.name == "helios_offload_prompt_tokens_reused_total")


def _host_tier_value(tier: str, name: str, labels: dict[str, str], golden: float) -> float:
    """The golden value of a host-tier counter for an engine of this tier."""
    if name == "helios_offload_host_store_outcomes_total" and labels.get("outcome") in (
            "dropped_full", "failed"):
        return golden if tier == "dropping" else 0.0
    if name == "helios_offload_host_tokens_restored_total" or (
            name == "helios_offload_prompt_tokens_total" and labels.get("source") == "host_restored"):
        return 0.0 if tier == "no_reuse" else _reused_tokens()
    return golden


def _dynamic(e: Engine, kind: int, a: float, b: float, integral: bool, t: float) -> float:
    if kind == _GROW:
        value = a * max(0.0, t - b)
    elif kind == _SWING:
        value = a * (1 + 0.05 * math.sin(t / 600 + b))
    elif kind == _NOW:
        return t - 1.0
    else:
        assert e.window is not None
        return float(math.floor(_down_seconds(e.window, t) / defaults.POLL_INTERVAL))
    return math.floor(value) if integral and kind == _GROW else (
        round(value) if integral else value)


def _down_seconds(w: Window, t: float) -> float:
    span = w.duration if w.duration is not None else 2400.0
    lo, hi = w.start + 0.3 * span, w.start + 0.4 * span
    return max(0.0, min(t, hi) - lo)


def _restore_value(tpl: Template, st: _State) -> float | None:
    name = tpl.name
    labels = dict(tpl.labels)
    w = st.window
    if name == "helios_restore_window_open":
        return 1.0 if w else 0.0
    if name == "helios_restore_phase":
        return 1.0 if labels.get("phase") == st.phase else 0.0
    if tpl.family in WINDOW_ONLY:
        if w is None:
            return None
        if name == "helios_restore_window_start_timestamp_seconds":
            return w.start
        if name == "helios_restore_deadline_timestamp_seconds":
            bound = labels.get("bound")
            return w.start + (REQUEST_CUTOFF if bound == "request_cutoff" else RESTORE_BOUND)
        if name == "helios_restore_window_cause":
            return 1.0 if labels.get("cause") == w.cause else 0.0
        return 0.0
    if name.startswith("helios_restore_last_window") or name == "helios_restore_check_ok":
        # Of the last closed window, kept while a later one is open.
        last = st.last
        if last is None or last.duration is None:
            return None
        late = last.duration > RESTORE_BOUND
        if name == "helios_restore_check_ok":
            return 0.0 if late and labels.get("check") == "image" else 1.0
        if name == "helios_restore_last_window_duration_seconds":
            return last.duration
        if name == "helios_restore_last_window_start_timestamp_seconds":
            return last.start
        if name == "helios_restore_last_window_end_timestamp_seconds":
            return last.start + last.duration
        return 1.0 if labels.get("outcome") == ("late" if late else "in_time") else 0.0
    if name == "helios_restore_events_total":
        key = (labels.get("event", ""), labels.get("result", ""))
        return float(sum(n for kind, result, n in st.events if (kind, result) == key))
    return tpl.value if tpl.value in (0.0, 1.0) else 0.0


def _events(e: Engine, t: float) -> tuple[tuple[str, str, int], ...]:
    """Accepted events of the engine's window by t."""
    w = e.window
    if w is None:
        return ()
    span = w.duration if w.duration is not None else 2400.0
    closed = None if w.duration is None else w.start + w.duration
    return tuple((kind, "accepted", 1) for kind, at in (
        ("drain_started", w.start), ("restore_started", w.start + 0.4 * span),
        ("window_closed", closed)) if at is not None and t >= at)


class Plans:
    """`_plan` per (engine, state), computed once: a state lasts many scrapes."""

    def __init__(self, families: frozenset[str] | None = None) -> None:
        self.families = families
        # The latest state's plan per engine: time moves forward, so a state change replaces it.
        self._plans: dict[int, tuple[_State, list[str], list[Dynamic]]] = {}

    def lines(self, e: Engine, t: float, suffix: str) -> list[str]:
        """Engine e's samples at t as lines, each ending in `suffix`."""
        st = _state(e, t)
        cached = self._plans.get(e.index)
        if cached is None or cached[0] != st:
            cached = self._plans[e.index] = (st, *_plan(e, st, self.families))
        _, fixed, dynamic = cached
        out = [f + suffix for f in fixed]
        out += [f"{series} {_num(_dynamic(e, kind, a, b, integral, t))}{suffix}"
                for series, kind, a, b, integral in dynamic]
        return out


def samples(e: Engine, t: float, families: frozenset[str] | None = None) -> list[tuple[str, str]]:
    """(series, value) of engine `e` at time t; series is `name{labels}`."""
    return [tuple(line.rsplit(" ", 1)) for line in Plans(families).lines(e, t, "")]  # type: ignore[misc]


# -- output -------------------------------------------------------------------------------------
def steps(start: float, end: float, interval: int = SCRAPE_INTERVAL) -> range:
    """Scrape instants in [start, end), on multiples of the interval."""
    first = math.ceil(start / interval) * interval
    return range(first, math.ceil(end), interval)


def write_openmetrics(out: TextIO, engines: Sequence[Engine], start: float, end: float,
                      families: frozenset[str] | None = None, interval: int = SCRAPE_INTERVAL) -> int:
    """Every engine's samples at every scrape instant in [start, end), time-major (each series'
    samples ascend, as the TSDB needs); returns the number of samples. No `# EOF`: see `eof`."""
    n = 0
    plans = Plans(families)
    for t in steps(start, end, interval):
        ts = f" {t}\n"
        for e in engines:
            lines = plans.lines(e, t, ts)
            out.write("".join(lines))
            n += len(lines)
    return n


def eof(out: TextIO) -> None:
    out.write("# EOF\n")


def render(engines: Iterable[Engine], t: float, plans: Plans | None = None) -> str:
    """The exposition a live scrape of `engines` gets at time t (text format, no timestamps)."""
    plans = plans or Plans()
    return "".join(line for e in engines for line in plans.lines(e, t, "\n"))


def family_names(extra: Iterable[str] = ()) -> frozenset[str]:
    """Every family name the model emits (for filters)."""
    return frozenset({t.family for t in templates()} | set(SCRAPE_SERIES) | set(extra))


# -- live feed ----------------------------------------------------------------------------------
def serve(engines: list[Engine], groups: int, port: int) -> http.server.ThreadingHTTPServer:
    """An HTTP server on 127.0.0.1:`port` with /metrics/<g> for g in 0..groups-1: the current
    samples of every `groups`-th engine (one scrape target per group, honor_labels)."""
    parts = [engines[g::groups] for g in range(groups)]
    plans = Plans()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            try:
                group = int(self.path.rsplit("/", 1)[1])
                body = render(parts[group], time.time(), plans).encode()
            except (ValueError, IndexError):
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write", help="write OpenMetrics for promtool tsdb create-blocks-from")
    s = sub.add_parser("serve", help="serve the fleet's current samples to a Prometheus")
    for p in (w, s):
        p.add_argument("--engines", type=int, required=True)
        p.add_argument("--first", type=int, default=0, help="index of the first engine")
        p.add_argument("--anchor", type=float, required=True, help="unix time the scenarios "
                       "are placed around (bench/scale.py: when the backfill started)")
        p.add_argument("--seed", type=int, default=7)
    w.add_argument("--start", type=float, required=True)
    w.add_argument("--end", type=float, required=True)
    w.add_argument("--families", nargs="*", help="only these families")
    w.add_argument("out", type=Path)
    s.add_argument("--groups", type=int, default=1)
    s.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    engines = fleet(args.engines, args.anchor, args.seed, args.first)
    if args.command == "write":
        with args.out.open("w") as out:
            n = write_openmetrics(out, engines, args.start, args.end,
                                  frozenset(args.families) if args.families else None)
            eof(out)
        print(n)
        return 0
    server = serve(engines, args.groups, args.port)
    print(f"serving {len(engines)} engines on 127.0.0.1:{args.port}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
