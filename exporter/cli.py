"""Console script `helios-exporter`: serve, check, status, geometry, simulate, demo; phase,
evidence, probe, compare."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import structlog

from exporter import config as cfg
from exporter import logs
from exporter.version import DISTRIBUTION, PYTHON_VERSION, VERSION

_ENV_EPILOG = f"Every flag also reads {cfg.ENV_PREFIX}<FLAG> (upper case, dashes as underscores); " \
    "flags given on the command line win."


def env_name(action: argparse.Action) -> str:
    """HELIOS_EXPORTER_<FLAG> for an optional action (its first long flag, else its dest)."""
    long = [s for s in action.option_strings if s.startswith("--")]
    name = long[0].lstrip("-") if long else action.dest
    return cfg.ENV_PREFIX + name.replace("-", "_").upper()


def apply_env_defaults(parser: argparse.ArgumentParser,
                       environ: Mapping[str, str] | None = None) -> dict[argparse.Action, str]:
    """Make every set HELIOS_EXPORTER_<FLAG> the default of that optional action of `parser`.

    Values are converted with the action's `type` and checked against its `choices`; store_true /
    store_false actions take true/false, 1/0, yes/no or on/off; a required option whose variable
    is set is no longer required. Flags on the command line still win. Returns, per action, why
    its variable cannot be used (that action is left as it was).
    """
    environ = os.environ if environ is None else environ
    errors: dict[argparse.Action, str] = {}
    for action in parser._actions:
        if not action.option_strings or isinstance(action, argparse._HelpAction | argparse._VersionAction):
            continue
        name = env_name(action)
        raw = environ.get(name)
        if raw is None:
            continue
        where = f"{name} ({'/'.join(action.option_strings)})"
        value: Any
        if isinstance(action, argparse._StoreTrueAction | argparse._StoreFalseAction):
            given = cfg.parse_bool(raw)
            if given is None:
                errors[action] = f"{where}: expected true/false, 1/0, yes/no or on/off, got {raw!r}"
                continue
            value = action.const if given else not action.const
        elif isinstance(action, argparse._StoreAction) and action.nargs is None:
            convert = action.type if callable(action.type) else str
            try:
                value = convert(raw)
            except argparse.ArgumentTypeError as exc:
                errors[action] = f"{where}: {exc}"
                continue
            except (TypeError, ValueError):
                kind = getattr(action.type, "__name__", "value")
                errors[action] = f"{where}: invalid {kind} value: {raw!r}"
                continue
            if action.choices is not None and value not in action.choices:
                choices = ", ".join(map(str, action.choices))
                errors[action] = f"{where}: expected one of {choices}, got {raw!r}"
                continue
        else:
            errors[action] = f"{where}: this option cannot be set from the environment"
            continue
        action.default = value
        action.required = False
    return errors


class _Unusable:
    """The default of an option whose variable is invalid: an error unless the flag is given."""

    def __repr__(self) -> str:
        return "(invalid environment variable)"


_UNUSABLE = _Unusable()


class _Parser(argparse.ArgumentParser):
    """A subcommand parser; with `env_defaults` set it applies `apply_env_defaults` before parsing
    (serve and check leave it off: exporter.config merges their environment with every error).
    An invalid variable is an error only when its flag is not given."""

    env_defaults = False
    _declared: dict[int, tuple[Any, bool]] | None = None

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None,
    ) -> tuple[argparse.Namespace, list[str]]:
        if not self.env_defaults:
            return super().parse_known_args(args, namespace)
        if self._declared is None:  # first parse: remember the declared defaults
            self._declared = {id(a): (a.default, a.required) for a in self._actions}
        for action in self._actions:  # a later parse starts from them again
            action.default, action.required = self._declared[id(action)]
        errors = apply_env_defaults(self)
        for action in errors:
            action.default, action.required = _UNUSABLE, False
        parsed, rest = super().parse_known_args(args, namespace)
        unused = [msg for action, msg in errors.items() if getattr(parsed, action.dest) is _UNUSABLE]
        if unused:
            self.error("invalid environment:\n  " + "\n  ".join(unused))
        return parsed, rest


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="helios-exporter",
        description="Prometheus exporter and observability sidecar for Helios inference engines. "
        f"Every flag also reads {cfg.ENV_PREFIX}<FLAG> (upper case, dashes as underscores).",
    )
    parser.add_argument("--version", action="version",
                        version=f"{DISTRIBUTION} {VERSION} (Python {PYTHON_VERSION})")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    serve = sub.add_parser("serve", help="run the sidecar", epilog=_ENV_EPILOG)
    cfg.add_arguments(serve, "serve")
    check = sub.add_parser("check", help="poll the engine once and print what would be exported",
                           epilog=_ENV_EPILOG)
    cfg.add_arguments(check, "check")
    status = sub.add_parser("status", help="the on-call status page of a running sidecar, in "
                            "the terminal", epilog=_ENV_EPILOG)
    status.env_defaults = True
    from exporter.oncall.terminal import add_arguments as status_arguments
    status_arguments(status)
    geometry = sub.add_parser("geometry", help="the offload records and slabs a model layout "
                              "implies", epilog=_ENV_EPILOG)
    geometry.env_defaults = True
    from exporter.geometry_command import add_arguments as geometry_arguments
    geometry_arguments(geometry)
    simulate = sub.add_parser("simulate", help="run the simulated engine", epilog=_ENV_EPILOG)
    simulate.env_defaults = True
    try:
        from simulator.cli import add_arguments as sim_arguments
    except ImportError:  # the simulator ships in the same distribution; tolerate its absence
        simulate.add_argument("--listen", required=True)
        simulate.add_argument("--scenario", default="steady")
    else:
        sim_arguments(simulate)
    demo = sub.add_parser("demo", help="simulated engine + sidecar (+ Prometheus, Alertmanager)",
                          epilog=_ENV_EPILOG)
    demo.env_defaults = True
    from exporter.demo import add_arguments as demo_arguments
    demo_arguments(demo)
    from exporter.experiment.commands import COMMANDS
    for name, (help_text, add, _) in COMMANDS.items():
        command = sub.add_parser(name, help=help_text, epilog=_ENV_EPILOG)
        command.env_defaults = True
        add(command)
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
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
    if args.command == "status":
        from exporter.oncall.terminal import run as status_run
        return status_run(args)
    if args.command == "geometry":
        from exporter.geometry_command import run as geometry_run
        return geometry_run(args)
    from exporter.experiment.commands import COMMANDS
    if args.command in COMMANDS:
        return COMMANDS[args.command][2](args)
    if args.command == "simulate":
        from simulator.cli import run as sim_run
        return int(sim_run(args))
    from exporter.demo import run as demo_run
    return demo_run(args)


if __name__ == "__main__":  # pragma: no cover
    main()
