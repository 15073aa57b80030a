"""Command line of the simulated engine (``helios-exporter simulate`` and ``python -m simulator``)."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import math
import random
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import structlog
import uvicorn
from fastapi import FastAPI

from simulator.app import build_app
from simulator.engine import SNAPSHOT_VERSIONS, EngineConfig, SimulatedEngine
from simulator.latency import LatencyModel
from simulator.outage import OutageOptions
from simulator.runner import DEFAULT_RATES, ENGINE_DEFAULTS, OUTAGE_DEFAULTS, SCENARIOS, build_scenario
from simulator.slabs import DEFAULT_GEOMETRY, GEOMETRIES

log = structlog.get_logger("simulator.cli")


def finite_float(text: str) -> float:
    """argparse type: a float that is neither nan nor infinite."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the simulator's options to ``parser``."""
    parser.add_argument("--listen", required=True, metavar="HOST:PORT",
                        help="address to serve the engine API on, e.g. 127.0.0.1:8000")
    parser.add_argument("--scenario", choices=SCENARIOS, default="steady",
                        help="background traffic and timeline; idle sends none, for a probe "
                        "that drives the engine itself (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=None,
                        help="random seed for identities, prompts and timings (default: random)")
    parser.add_argument("--rate", type=finite_float, default=None, metavar="REQ_PER_S",
                        help="background requests per second (default: "
                        + ", ".join(f"{k} {v:g}" for k, v in DEFAULT_RATES.items()) + ")")

    tier = parser.add_argument_group("offload tier")
    tier.add_argument("--geometry", choices=tuple(GEOMETRIES), default=DEFAULT_GEOMETRY,
                      help="the tier the options below start from: "
                      + "; ".join(f"{name}: {g.summary}" for name, g in GEOMETRIES.items())
                      + " (default: %(default)s)")
    tier.add_argument("--budget-bytes", type=int, default=None,
                      help="host offload budget in bytes (default: the geometry's, 32 GiB)")
    tier.add_argument("--row-fraction", type=finite_float, default=None,
                      help="share of the budget for recurrent-state rows (default: the "
                      "geometry's, 0.25)")
    tier.add_argument("--row-record-bytes", type=int, default=None,
                      help="bytes of one row record (default: the geometry's; generic 16 MiB)")
    tier.add_argument("--page-record-bytes", type=int, default=None,
                      help="bytes of one page record (default: the geometry's, 1 MiB)")
    tier.add_argument("--tokens-per-page", type=int, default=EngineConfig.tokens_per_page,
                      help="tokens in one KV page, i.e. one index block (default: %(default)s)")
    tier.add_argument("--stores-per-request", type=int, default=None, metavar="N",
                      help="checkpoints stored per request, spread over the prompt's blocks "
                      "(default: the geometry's, 3 for seed-001; with generic the scenario's: "
                      "3, or 12 for reverse-replay, idle and demo, 1 for inert)")
    tier.add_argument("--row-checkpoint-interval-tokens", type=int, default=None, metavar="N",
                      help="row checkpoints only at multiples of N prompt tokens, a multiple of "
                      "--tokens-per-page; a prompt of N tokens or fewer cannot be reused "
                      "(default: --tokens-per-page, any block boundary)")
    parser.add_argument("--snapshot-version", type=int, choices=SNAPSHOT_VERSIONS, default=1,
                        help="schema_version of /debug/offload/snapshot: 1, or 3 with the host "
                        "tier's store outcomes, restore transfers, eviction ages, blocked tokens "
                        "and prompt-token split (docs/snapshot.md) (default: %(default)s)")

    timing = parser.add_argument_group("request timing (docs/simulator.md, 'Latency')")
    timing.add_argument("--time-scale", type=finite_float, default=EngineConfig.time_scale,
                        metavar="FACTOR",
                        help="run requests and host stores FACTOR times faster than real time; "
                        "the engine's metrics still record the modelled latency "
                        "(default: %(default)s)")
    timing.add_argument("--latency-noise", type=finite_float, default=LatencyModel.noise,
                        metavar="SIGMA",
                        help="sigma of the seeded log-normal noise on each request's latency, "
                        "0 for none (default: %(default)s)")
    timing.add_argument("--trace-cost", type=finite_float, default=EngineConfig.trace_cost,
                        metavar="F",
                        help="the fraction by which tracing lengthens each generated token's "
                        "time while it is on (POST /admin/trace), e.g. 0.05 (default: "
                        "%(default)s)")

    ident = parser.add_argument_group("identity")
    ident.add_argument("--model-name", default=EngineConfig.model_name,
                       help="served model name, the model_name label (default: %(default)s)")
    ident.add_argument("--checkpoint", default=EngineConfig.checkpoint,
                       help="model checkpoint (default: %(default)s)")
    ident.add_argument("--package", default=EngineConfig.package,
                       help="engine package (default: %(default)s)")
    ident.add_argument("--image-digest", default=None,
                       help="container image digest (default: derived from the seed)")
    ident.add_argument("--container-id", default=None,
                       help="container id (default: derived from the seed)")

    api = parser.add_argument_group("completions (docs/simulator.md, 'Completions')")
    api.add_argument("--api-key-file", default=None, metavar="F",
                     help="ask /v1/ requests for `Authorization: Bearer <the file's first "
                     "line>`, as vLLM's --api-key (default: no key)")
    api.add_argument("--early-stop", type=int, default=None, metavar="N",
                     help="a fault: end every completion after N tokens, whatever the request "
                     "asked for (min_tokens, ignore_eos): a candidate whose outputs stop early")

    out = parser.add_argument_group("outage and demo scenarios (seconds may be fractional)")

    def default_of(name: str) -> str:
        values = {k: getattr(o, name) for k, o in OUTAGE_DEFAULTS.items()}
        return "; ".join(f"{v:g} for {k}" for k, v in values.items())

    out.add_argument("--outage-after", type=finite_float, default=None, metavar="S",
                     help=f"serve this long before admission turns draining (default: "
                     f"{default_of('outage_after')})")
    out.add_argument("--drain-seconds", type=finite_float, default=None, metavar="S",
                     help=f"stay draining this long, then closed (default: {default_of('drain_seconds')})")
    out.add_argument("--closed-seconds", type=finite_float, default=None, metavar="S",
                     help="stay closed this long, then the container stops (default: "
                     f"{default_of('closed_seconds')})")
    out.add_argument("--down-seconds", type=finite_float, default=None, metavar="S",
                     help="stay down (503, no snapshot) this long, then restore "
                     f"(default: {default_of('down_seconds')})")
    out.add_argument("--outage-container", choices=("same", "new"), default="same",
                     help="restore into the retained container or a new one (default: %(default)s)")
    out.add_argument("--outage-keep-generation", action="store_true",
                     help="restore with the incumbent's generation (a failed fresh_generation)")
    out.add_argument("--outage-new-image", action="store_true",
                     help="restore with a different image digest (a failed image check)")
    out.add_argument("--outage-stuck-requests", type=int, default=0, metavar="N",
                     help="keep N requests in flight through draining and closed (default: 0)")


def _engine_config(args: argparse.Namespace) -> EngineConfig:
    overrides: dict[str, Any] = dict(ENGINE_DEFAULTS[args.scenario])
    named = GEOMETRIES[args.geometry]
    if named.stores_per_request is not None:
        overrides["stores_per_request"] = named.stores_per_request
    if args.stores_per_request is not None:
        overrides["stores_per_request"] = args.stores_per_request
    if overrides.get("stores_per_request", 1) < 1:
        raise ValueError("--stores-per-request must be at least 1")
    if not args.time_scale > 0:
        raise ValueError(f"--time-scale must be positive, got {args.time_scale}")
    if not 0 <= args.latency_noise <= 1:
        raise ValueError(f"--latency-noise must be in [0, 1], got {args.latency_noise}")
    if not 0 <= args.trace_cost <= 10:
        raise ValueError(f"--trace-cost must be in [0, 10], got {args.trace_cost}")
    given = {name: getattr(args, name) for name in
             ("budget_bytes", "row_fraction", "row_record_bytes", "page_record_bytes")
             if getattr(args, name) is not None}
    geometry = dataclasses.replace(named.slabs, **given)
    interval = args.row_checkpoint_interval_tokens
    if interval is not None and (interval < 1 or interval % args.tokens_per_page):
        raise ValueError(f"--row-checkpoint-interval-tokens must be a positive multiple of "
                         f"--tokens-per-page ({args.tokens_per_page}), got {interval}")
    if args.early_stop is not None and args.early_stop < 0:
        raise ValueError(f"--early-stop must not be negative, got {args.early_stop}")
    return EngineConfig(
        geometry=geometry, tokens_per_page=args.tokens_per_page, model_name=args.model_name,
        checkpoint=args.checkpoint, package=args.package, image_digest=args.image_digest,
        container_id=args.container_id, time_scale=args.time_scale,
        latency=LatencyModel(noise=args.latency_noise), trace_cost=args.trace_cost,
        early_stop=args.early_stop, snapshot_version=args.snapshot_version,
        row_checkpoint_interval_tokens=args.row_checkpoint_interval_tokens, **overrides,
    )


def _api_key(args: argparse.Namespace) -> str | None:
    if args.api_key_file is None:
        return None
    try:
        with Path(args.api_key_file).open(encoding="utf-8") as f:
            key = f.readline().strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"--api-key-file {args.api_key_file}: {exc}") from None
    if not key:
        raise ValueError(f"--api-key-file {args.api_key_file}: empty")
    return key


def outage_options(args: argparse.Namespace) -> OutageOptions:
    """The outage timeline: the scenario's defaults (runner.OUTAGE_DEFAULTS) with what was given."""
    timings = ("outage_after", "drain_seconds", "closed_seconds", "down_seconds")
    given = {name: getattr(args, name) for name in timings if getattr(args, name) is not None}
    return dataclasses.replace(
        OUTAGE_DEFAULTS.get(args.scenario, OutageOptions()), **given,
        container=args.outage_container, keep_generation=args.outage_keep_generation,
        new_image=args.outage_new_image, stuck_requests=args.outage_stuck_requests,
    )


def create_app(args: argparse.Namespace) -> FastAPI:
    """The app ``run`` serves, built from parsed arguments (raises ValueError on bad options)."""
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    outage = outage_options(args)
    engine = SimulatedEngine(_engine_config(args), seed=seed)
    scenario = build_scenario(args.scenario, seed=seed, rate=args.rate, outage=outage)
    log.info("simulator_configured", scenario=args.scenario, seed=seed,
             geometry=args.geometry, generation=engine.generation)
    return build_app(engine, scenario=scenario, api_key=_api_key(args))


def parse_listen(listen: str) -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--listen must be HOST:PORT, got {listen!r}")
    return host.strip("[]"), int(port)


class _Server(uvicorn.Server):
    """uvicorn re-raises SIGINT/SIGTERM after a graceful shutdown; we return an exit code."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        handled = (signal.SIGINT, signal.SIGTERM)
        originals = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
        try:
            yield
        finally:
            for sig, handler in originals.items():
                signal.signal(sig, handler)


def run(args: argparse.Namespace) -> int:
    """Serve the simulated engine until SIGINT or SIGTERM; the exit code."""
    try:
        host, port = parse_listen(args.listen)
        app = create_app(args)
    except ValueError as exc:
        print(f"simulate: {exc}", file=sys.stderr)
        return 2
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False)
    try:
        _Server(config).run()
    except SystemExit as exc:  # uvicorn exits (code 3) when it cannot bind or start
        return 1 if exc.code else 0
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m simulator", description=__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))
