"""Console script `helios-exporter`: every command in one table, COMMANDS, in --help order.

serve and check are the sidecar's (exporter/cli.py, which `python -m exporter` runs alone); the
others are the lab's (lab/: each package's command.py) and the simulated engine's
(simulator/cli.py). Each of those modules declares OPTIONS (exporter/options.py), maybe a
DESCRIPTION, and run(args) -> int; the table imports one only when its command is asked for, by
an ordinary import in the function beside its name, so `helios-exporter --help` and `serve`
import none of them (tests/repo/test_imports.py runs them to see).

Exit codes of the lab's commands: 0 done; 1 the sidecar refused (or, for `probe`, it stopped
before its plan was done: a failed request or output contract, traffic it did not send, a used
incarnation, an identity or pin failure, a pass it could not bracket; the record is still
written); 2 bad input (options, a corpus or evidence file). `compare` has its own: 0 admitted,
1 not admitted, 2 cannot compare; so has `observer-cost` (its module's docstring).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Final

from exporter import cli as sidecar
from exporter.options import OptionParser


def _status() -> ModuleType:
    from lab.status import command
    return command


def _geometry() -> ModuleType:
    from lab.geometry import command
    return command


def _simulate() -> ModuleType:
    from simulator import cli
    return cli


def _demo() -> ModuleType:
    from lab.demo import command
    return command


def _phase() -> ModuleType:
    from lab.client import command
    return command


def _evidence() -> ModuleType:
    from lab.evidence import command
    return command


def _probe() -> ModuleType:
    from lab.probe import command
    return command


def _compare() -> ModuleType:
    from lab.compare import command
    return command


def _observer_cost() -> ModuleType:
    from lab.observer_cost import command
    return command


# name -> (help, the command's module); serve and check: exporter/cli.py
COMMANDS: Final[Mapping[str, tuple[str, Callable[[], ModuleType]]]] = {
    "status": ("the on-call status page of a running sidecar, in the terminal", _status),
    "geometry": ("the offload records and slabs a model layout implies", _geometry),
    "simulate": ("run the simulated engine", _simulate),
    "demo": ("simulated engine + sidecar (+ Prometheus, Alertmanager)", _demo),
    "phase": ("begin or end an experiment phase on a sidecar", _phase),
    "evidence": ("write evidence.json, evidence.md and a picture from a sidecar's phases",
                 _evidence),
    "probe": ("run the cache-order probe from a corpus, each pass a phase, then the evidence",
              _probe),
    # the count is lab/compare/admission.py's MIN_REPETITIONS (tests/repo/test_cli.py)
    "compare": ("gate a candidate arm against a baseline (3 repetitions a lane)", _compare),
    "observer-cost": ("measure an observer's cost: its --on/--off commands, repetitions in a "
                      "recorded order, checked, with an interval", _observer_cost),
}

HELPS: Final[Mapping[str, str]] = {
    **sidecar.SIDECAR_COMMANDS, **{name: help_text for name, (help_text, _) in COMMANDS.items()}}


def command(name: str) -> sidecar.Command:
    """One command and its declared options (importing its module)."""
    if name in sidecar.SIDECAR_COMMANDS:
        return sidecar.sidecar_command(name)
    help_text, load = COMMANDS[name]
    module = load()
    return sidecar.Command(help_text, tuple(module.OPTIONS), getattr(module, "DESCRIPTION", None))


def commands() -> dict[str, sidecar.Command]:
    """Every command and its declared options, in --help order (imports every module)."""
    return {name: command(name) for name in HELPS}


def command_parser(name: str, environ: Mapping[str, str] | None = None) -> OptionParser:
    """The parser of one command, as `helios-exporter NAME` parses."""
    return sidecar.parser_of(name, command(name), environ)


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """`argv` parsed as `helios-exporter` parses it: by the named command's parser alone."""
    return sidecar.parse(argv, HELPS, command_parser)


def main(argv: Sequence[str] | None = None) -> None:
    sys.exit(run(parse(list(sys.argv[1:] if argv is None else argv))))


def run(args: argparse.Namespace) -> int:
    if args.command in sidecar.SIDECAR_COMMANDS:
        return sidecar.run(args)
    return int(COMMANDS[args.command][1]().run(args))


if __name__ == "__main__":  # pragma: no cover
    main()
