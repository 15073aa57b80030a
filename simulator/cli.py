"""Command line of the simulated engine (``helios-exporter simulate`` and ``python -m simulator``)."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import random
import signal
import sys
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import structlog
import uvicorn
from fastapi import FastAPI

from exporter import options
from exporter.options import Option, OptionParser
from simulator.app import build_app
from simulator.config import SNAPSHOT_VERSIONS, EngineConfig
from simulator.engine import SimulatedEngine
from simulator.flavors import DEFAULT_FLAVOR, FLAVORS, VERSIONS
from simulator.latency import LatencyModel
from simulator.outage import OutageOptions
from simulator.runner import DEFAULT_RATES, ENGINE_DEFAULTS, OUTAGE_DEFAULTS, SCENARIOS, build_scenario
from simulator.slabs import DEFAULT_GEOMETRY, GEOMETRIES

log = structlog.get_logger("simulator.cli")


TIER = "offload tier"
TIMING = "request timing (docs/simulator.md, 'Latency')"
IDENTITY = "identity"
API = "completions (docs/simulator.md, 'Completions')"
OUTAGE = "outage and demo scenarios (seconds may be fractional)"


def _outage_default(name: str) -> str:
    values = {k: getattr(o, name) for k, o in OUTAGE_DEFAULTS.items()}
    return "; ".join(f"{v:g} for {k}" for k, v in values.items())


OPTIONS = (
    Option("--listen", "text", None, "address to serve the engine API on, e.g. 127.0.0.1:8000",
           required=True, metavar="HOST:PORT"),
    Option("--scenario", "str", "steady", "background traffic and timeline; idle sends none, for "
           "a probe that drives the engine itself", choices=SCENARIOS),
    Option("--flavor", "str", DEFAULT_FLAVOR, "the shape of /metrics: helios, or that of "
           + ", ".join(f"{name} {version}" for name, version in VERSIONS.items())
           + " (from the same engine and scenarios; no snapshot, as those engines have none)",
           choices=FLAVORS),
    Option("--seed", "int", None, "random seed for identities, prompts and timings",
           default_text="random"),
    Option("--rate", "float", None, "background requests per second", metavar="REQ_PER_S",
           default_text=", ".join(f"{k} {v:g}" for k, v in DEFAULT_RATES.items())),
    Option("--geometry", "str", DEFAULT_GEOMETRY, "the tier the options below start from: "
           + "; ".join(f"{name}: {g.summary}" for name, g in GEOMETRIES.items()),
           choices=tuple(GEOMETRIES), group=TIER),
    Option("--budget-bytes", "int", None, "host offload budget in bytes", above=0,
           default_text="the geometry's, 32 GiB", group=TIER),
    Option("--row-fraction", "float", None, "share of the budget for recurrent-state rows",
           above=0, below=1, default_text="the geometry's, 0.25", group=TIER),
    Option("--row-record-bytes", "int", None, "bytes of one row record", above=0,
           default_text="the geometry's; generic 16 MiB", group=TIER),
    Option("--page-record-bytes", "int", None, "bytes of one page record", above=0,
           default_text="the geometry's, 1 MiB", group=TIER),
    Option("--tokens-per-page", "int", EngineConfig.tokens_per_page,
           "tokens in one KV page, i.e. one index block", above=0, group=TIER),
    Option("--stores-per-request", "int", None, "checkpoints stored per request, spread over the "
           "prompt's blocks", low=1, metavar="N", default_text="the geometry's, 3 for seed-001; with "
           "generic the scenario's: 3, or 12 for reverse-replay, idle and demo, 1 for inert",
           group=TIER),
    Option("--row-checkpoint-interval-tokens", "int", None, "row checkpoints only at multiples "
           "of N prompt tokens, a multiple of --tokens-per-page; a prompt of N tokens or fewer "
           "cannot be reused", low=1, metavar="N",
           default_text="--tokens-per-page, any block boundary", group=TIER),
    Option("--snapshot-version", "int", 3, "schema_version of /debug/offload/snapshot: 1, or 3 "
           "with the host tier's store outcomes, restore transfers, eviction ages, blocked "
           "tokens and prompt-token split (docs/snapshot.md)",
           check=lambda v: None if v in SNAPSHOT_VERSIONS else
           f"must be one of {', '.join(map(str, SNAPSHOT_VERSIONS))}, got {v}"),
    Option("--time-scale", "float", EngineConfig.time_scale, "run requests and host stores "
           "FACTOR times faster than real time; the engine's metrics still record the modelled "
           "latency", above=0, metavar="FACTOR", group=TIMING),
    Option("--latency-noise", "float", LatencyModel.noise, "sigma of the seeded log-normal noise "
           "on each request's latency, 0 for none", low=0, high=1, metavar="SIGMA",
           group=TIMING),
    Option("--trace-cost", "float", EngineConfig.trace_cost, "the fraction by which tracing "
           "lengthens each generated token's time while it is on (POST /admin/trace), e.g. 0.05",
           low=0, high=10, metavar="F", group=TIMING),
    Option("--model-name", "text", EngineConfig.model_name,
           "served model name, the model_name label", group=IDENTITY),
    Option("--checkpoint", "text", EngineConfig.checkpoint, "model checkpoint", group=IDENTITY),
    Option("--package", "text", EngineConfig.package, "engine package", group=IDENTITY),
    Option("--image-digest", "text", None, "container image digest",
           default_text="derived from the seed", group=IDENTITY),
    Option("--container-id", "text", None, "container id", default_text="derived from the seed",
           group=IDENTITY),
    Option("--api-key-file", "text", None, "ask /v1/ requests for `Authorization: Bearer <the "
           "file's first line>`, as vLLM's --api-key", metavar="F", default_text="no key",
           group=API),
    Option("--early-stop", "int", None, "a fault: end every completion after N tokens, whatever "
           "the request asked for (min_tokens, ignore_eos): a candidate whose outputs stop early",
           low=0, metavar="N", group=API),
    Option("--outage-after", "float", None, "serve this long before admission turns draining",
           metavar="S", default_text=_outage_default("outage_after"), group=OUTAGE),
    Option("--drain-seconds", "float", None, "stay draining this long, then closed", metavar="S",
           default_text=_outage_default("drain_seconds"), group=OUTAGE),
    Option("--closed-seconds", "float", None, "stay closed this long, then the container stops",
           metavar="S", default_text=_outage_default("closed_seconds"), group=OUTAGE),
    Option("--down-seconds", "float", None, "stay down (503, no snapshot) this long, then "
           "restore", metavar="S", default_text=_outage_default("down_seconds"), group=OUTAGE),
    Option("--outage-container", "str", "same", "restore into the retained container or a new "
           "one", choices=("same", "new"), group=OUTAGE),
    Option("--outage-keep-generation", "bool", False,
           "restore with the incumbent's generation (a failed fresh_generation)", group=OUTAGE),
    Option("--outage-new-image", "bool", False,
           "restore with a different image digest (a failed image check)", group=OUTAGE),
    Option("--outage-stuck-requests", "int", 0,
           "keep N requests in flight through draining and closed", low=0, metavar="N",
           group=OUTAGE),
)


def parser(environ: Mapping[str, str] | None = None) -> OptionParser:
    """`python -m simulator`'s parser (`helios-exporter simulate` has the same OPTIONS)."""
    return options.parser(OPTIONS, environ=environ, prog="python -m simulator",
                          description=__doc__)


def _engine_config(args: argparse.Namespace) -> EngineConfig:
    overrides: dict[str, Any] = dict(ENGINE_DEFAULTS[args.scenario])
    named = GEOMETRIES[args.geometry]
    if named.stores_per_request is not None:
        overrides["stores_per_request"] = named.stores_per_request
    if args.stores_per_request is not None:
        overrides["stores_per_request"] = args.stores_per_request
    given = {name: getattr(args, name) for name in
             ("budget_bytes", "row_fraction", "row_record_bytes", "page_record_bytes")
             if getattr(args, name) is not None}
    geometry = dataclasses.replace(named.slabs, **given)
    interval = args.row_checkpoint_interval_tokens
    if interval is not None and interval % args.tokens_per_page:
        raise ValueError(f"--row-checkpoint-interval-tokens must be a positive multiple of "
                         f"--tokens-per-page ({args.tokens_per_page}), got {interval}")
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
             geometry=args.geometry, generation=engine.generation, flavor=args.flavor)
    return build_app(engine, scenario=scenario, api_key=_api_key(args), flavor=args.flavor)


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
    return run(parser().parse_args(argv))
