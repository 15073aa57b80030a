"""Console script `helios-exporter`: serve, simulate, check, demo."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from exporter import config as cfg
from exporter import logs


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="helios-exporter",
        description="Prometheus exporter and observability sidecar for Helios inference engines. "
        f"Every flag also reads {cfg.ENV_PREFIX}<FLAG> (upper case, dashes as underscores).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the sidecar")
    cfg.add_arguments(serve, "serve")
    check = sub.add_parser("check", help="poll the engine once and print what would be exported")
    cfg.add_arguments(check, "check")
    simulate = sub.add_parser("simulate", help="run the simulated engine")
    try:
        from simulator.cli import add_arguments as sim_arguments
    except ImportError:  # the simulator ships in the same distribution; tolerate its absence
        simulate.add_argument("--listen", required=True)
        simulate.add_argument("--scenario", default="steady")
    else:
        sim_arguments(simulate)
    demo = sub.add_parser("demo", help="simulated engine + sidecar (+ Prometheus, Alertmanager)")
    from exporter.demo import add_arguments as demo_arguments
    demo_arguments(demo)
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    sys.exit(run(args))


def run(args: argparse.Namespace) -> int:
    if args.command in ("serve", "check"):
        try:
            config = cfg.load(args, args.command)
        except cfg.ConfigError as exc:
            print(f"helios-exporter {args.command}: {exc}", file=sys.stderr)
            return 2
        logs.configure(config.log_format, config.log_level)
        if args.command == "serve":
            from exporter.sidecar import serve
            return asyncio.run(serve(config))
        from exporter.check import check
        return asyncio.run(check(config))
    if args.command == "simulate":
        from simulator.cli import run as sim_run
        return int(sim_run(args))
    from exporter.demo import run as demo_run
    return demo_run(args)


if __name__ == "__main__":  # pragma: no cover
    main()
