"""A fleet of sidecars' series for the scale benchmark (bench/scale/scale.py), derived from the real full
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

    python bench/scale/series.py write --engines 100 --start T0 --end T1 out.om
    python bench/scale/series.py serve --engines 1000 --groups 10 --port 9999
"""

from __future__ import annotations

import argparse
import hashlib
import http.server
import math
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TextIO

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: `bench` importable
from bench.scale.fleet import (
    CLUSTERS,
    GOLDEN,
    HOST_TIERS,
    RESTORE_BOUND,
    SCENARIOS,
    SCRAPE_INTERVAL,
    SCRAPE_SERIES,
    WINDOW_ONLY,
    Engine,
    fleet,
    templates,
)
from bench.scale.samples import Plans, samples

# The model's parts that bench/scale/scale.py, bench/scale/tsdb.py and the tests read from here.
__all__ = ["CLUSTERS", "GOLDEN", "HOST_TIERS", "RESTORE_BOUND", "SCENARIOS", "SCRAPE_INTERVAL",
           "SCRAPE_SERIES", "WINDOW_ONLY", "Engine", "Plans", "eof", "family_names", "fingerprint",
           "fleet", "render", "samples", "serve", "steps", "templates", "write_openmetrics"]

def fingerprint() -> str:
    """Changes whenever the model or the golden does: blocks of another model are not reused."""
    here = Path(__file__).resolve().parent
    h = hashlib.sha256(Path(__file__).read_bytes())
    for part in ("fleet.py", "samples.py"):  # the model's other modules
        h.update((here / part).read_bytes())
    h.update(GOLDEN.read_bytes())
    return h.hexdigest()[:16]


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
                       "are placed around (bench/scale/scale.py: when the backfill started)")
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
