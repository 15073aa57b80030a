"""Console script `helios-exporter`: serve, check, status, geometry, simulate, demo; phase,
evidence, probe, compare, observer-cost. Each command's options are declared once
(exporter/options.py); its parser, variables, checks and --help come from them.

serve and check are the sidecar's (this package). Every other command is the lab's (lab/) or the
simulated engine's (simulator/), which import `exporter` and never the reverse: this module names
their modules as strings (ELSEWHERE, LAB_COMMANDS) and loads one only when it is asked for, so
`exporter` imports neither (tests/repo/test_imports.py reads every import statement).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Final

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


def _sidecar_command(name: str) -> Command:
    return Command(SIDECAR_COMMANDS[name], cfg.of(name))


# The other commands, in --help order: (name, module, help). Each module has OPTIONS and
# run(args) -> int (the demo a DESCRIPTION too); lab.commands' COMMANDS follow them.
ELSEWHERE: Final = (
    ("status", "lab.status.terminal", "the on-call status page of a running sidecar, in the terminal"),
    ("geometry", "lab.geometry", "the offload records and slabs a model layout implies"),
    ("simulate", "simulator.cli", "run the simulated engine"),
    ("demo", "lab.demo.command", "simulated engine + sidecar (+ Prometheus, Alertmanager)"),
)
LAB_COMMANDS: Final = "lab.commands"  # COMMANDS: name -> (help, options, run)


def _load(module: str) -> ModuleType:
    return importlib.import_module(module)


def _elsewhere(module: str, help_text: str) -> Command:
    try:
        loaded = _load(module)
    except ImportError:
        if module != "simulator.cli":
            raise
        # the simulator ships in the same distribution; tolerate its absence
        return Command(help_text, (Option("--listen", "text", None, "HOST:PORT", required=True),))
    return Command(help_text, tuple(loaded.OPTIONS), getattr(loaded, "DESCRIPTION", None))


def commands() -> dict[str, Command]:
    """Every command and its declared options (exporter/options.py), in --help order."""
    return {
        **{name: _sidecar_command(name) for name in SIDECAR_COMMANDS},
        **{name: _elsewhere(module, help_text) for name, module, help_text in ELSEWHERE},
        **{name: Command(help_text, tuple(declared))
           for name, (help_text, declared, _) in _load(LAB_COMMANDS).COMMANDS.items()},
    }


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="helios-exporter",
        description="Prometheus exporter and observability sidecar for Helios inference engines. "
        f"Every flag also reads {cfg.ENV_PREFIX}<FLAG> (upper case, dashes as underscores).",
    )
    parser.add_argument("--version", action="version",
                        version=f"{DISTRIBUTION} {VERSION} (Python {PYTHON_VERSION})")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OptionParser)
    for name, command in commands().items():
        sub.add_parser(name, help=command.help, **_parser_arguments(name, command))
    return parser


def _parser_arguments(name: str, command: Command) -> dict[str, Any]:
    # serve and check resolve in exporter.config: their errors are one log event.
    return {"description": command.description, "epilog": _ENV_EPILOG,
            "options": command.options, "resolve": name not in ("serve", "check")}


def command_parser(name: str, environ: Mapping[str, str] | None = None) -> OptionParser:
    """The parser of one command, as `helios-exporter NAME` parses (for the tests)."""
    command = _sidecar_command(name) if name in SIDECAR_COMMANDS else commands()[name]
    return OptionParser(prog=f"helios-exporter {name}", environ=environ,
                        **_parser_arguments(name, command))


def main(argv: Sequence[str] | None = None) -> None:
    given = list(sys.argv[1:] if argv is None else argv)
    if given and given[0] in SIDECAR_COMMANDS:  # parsed alone: see SIDECAR_COMMANDS
        args = command_parser(given[0]).parse_args(given[1:])
        args.command = given[0]
    else:
        args = _parser().parse_args(given)
    sys.exit(run(args))


def run(args: argparse.Namespace) -> int:
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
    modules = {name: module for name, module, _ in ELSEWHERE}
    if args.command in modules:
        return int(_load(modules[args.command]).run(args))
    return int(_load(LAB_COMMANDS).COMMANDS[args.command][2](args))


if __name__ == "__main__":  # pragma: no cover
    main()
