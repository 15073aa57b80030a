"""The sidecar's commands on the command line: `serve` and `check` (`python -m exporter`), and
what every command's parser shares. Each command's options are declared once
(exporter/options.py); its parser, variables, checks and --help come from them.

The console script `helios-exporter` is the table of every command, commands/cli.py: it sits
above this package, the lab (lab/) and the simulator (simulator/), and this package imports
neither (tests/repo/test_imports.py).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from exporter import config as cfg
from exporter import logs
from exporter.options import Option, OptionParser
from exporter.version import DISTRIBUTION, PYTHON_VERSION, VERSION

_ENV_EPILOG = f"Every flag also reads {cfg.ENV_PREFIX}<FLAG> (upper case, dashes as underscores); " \
    "flags given on the command line win."


@dataclass(frozen=True, slots=True)
class Command:
    help: str
    options: tuple[Option, ...]
    description: str | None = None


# The sidecar's own commands: their options are exporter/config.py's alone, so a parser for one
# of them imports no other command's modules (a long-running `serve` keeps only what it runs).
SIDECAR_COMMANDS = {
    "serve": "run the sidecar",
    "check": "poll the engine once and print what would be exported",
}


def sidecar_command(name: str) -> Command:
    return Command(SIDECAR_COMMANDS[name], cfg.of(name))


def top_parser(helps: Mapping[str, str]) -> argparse.ArgumentParser:
    """`helios-exporter`'s parser, one sub-command for each of `helps` (name -> help), each without
    its options: a command's own parser (command_parser) parses what follows its name."""
    parser = argparse.ArgumentParser(
        prog="helios-exporter",
        description="Prometheus exporter and observability sidecar for Helios inference engines. "
        f"Every flag also reads {cfg.ENV_PREFIX}<FLAG> (upper case, dashes as underscores).",
    )
    parser.add_argument("--version", action="version",
                        version=f"{DISTRIBUTION} {VERSION} (Python {PYTHON_VERSION})")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OptionParser)
    for name, help_text in helps.items():
        sub.add_parser(name, help=help_text)
    return parser


def parser_arguments(name: str, command: Command) -> dict[str, Any]:
    # serve and check resolve in exporter.config: their errors are one log event.
    return {"description": command.description, "epilog": _ENV_EPILOG,
            "options": command.options, "resolve": name not in ("serve", "check")}


def parser_of(name: str, command: Command,
              environ: Mapping[str, str] | None = None) -> OptionParser:
    """The parser of one command, as `helios-exporter NAME` parses."""
    return OptionParser(prog=f"helios-exporter {name}", environ=environ,
                        **parser_arguments(name, command))


def command_parser(name: str, environ: Mapping[str, str] | None = None) -> OptionParser:
    """The parser of `serve` or `check` (for the tests)."""
    return parser_of(name, sidecar_command(name), environ)


def parse(given: Sequence[str], helps: Mapping[str, str],
          parser: Callable[[str], OptionParser]) -> argparse.Namespace:
    """`given` parsed by the parser of the command it names (`parser(name)`), alone; without a
    command's name, by top_parser (--help, --version, the errors)."""
    if given and given[0] in helps:
        args = parser(given[0]).parse_args(given[1:])
        args.command = given[0]
        return args
    return top_parser(helps).parse_args(given)


def main(argv: Sequence[str] | None = None) -> None:
    """`python -m exporter serve|check ...`: the sidecar's commands alone."""
    given = list(sys.argv[1:] if argv is None else argv)
    sys.exit(run(parse(given, SIDECAR_COMMANDS, command_parser)))


def run(args: argparse.Namespace) -> int:
    """Run `serve` or `check`."""
    if args.command in ("serve", "check"):
        try:
            config = cfg.load(args, args.command)
        except cfg.ConfigError as exc:
            # One event in the log format asked for (a log pipeline parses it like every other
            # line), with every error in it; the format itself may be what is wrong.
            logs.configure(cfg.requested_log_format(args), "info")
            structlog.get_logger("helios_exporter").error("config_invalid", command=args.command,
                                              errors=exc.errors)
            return 2
        logs.configure(config.log_format, config.log_level)
        if args.command == "serve":
            from exporter.sidecar import serve
            return asyncio.run(serve(config))
        from exporter.check import check
        return asyncio.run(check(config))
    raise ValueError(f"not a command of the sidecar: {args.command}")


if __name__ == "__main__":  # pragma: no cover
    main()
